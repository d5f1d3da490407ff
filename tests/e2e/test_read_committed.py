"""read_committed: the last stable offset (LSO) and aborted transactions.

A read_committed Fetch is served only up to the LSO, the first offset of
the oldest transaction still open on the partition (else the high
watermark), and carries the aborted transactions [(producer_id,
first_offset)] overlapping the returned range so clients can drop their
records. ListOffsets latest answers the LSO at read_committed. A parked
read_committed Fetch wakes when the LSO moves.

The raw-protocol checks follow the seed document's worked example
(/work/shared/seeds/000_*.txt, "a timeline on one partition") shifted to
offset 0: Q idempotent at 0, 2, 4; P transactional at 1 and 3, aborted
(marker 5); then P commits a record at 6 (marker 7).
"""

import json
import select
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

import kafka_wire as kw
from conftest import SLOW, needs_cairn

pytestmark = needs_cairn

T = 15 * SLOW                   # client call timeout, seconds
RC, RU = kw.READ_COMMITTED, kw.READ_UNCOMMITTED
RETRIABLE = (kw.COORDINATOR_NOT_AVAILABLE, kw.COORDINATOR_LOAD_IN_PROGRESS,
             kw.NOT_COORDINATOR, kw.CONCURRENT_TRANSACTIONS)
JS_DIR = Path(__file__).resolve().parent / "js"


def retry(fn, timeout=10 * SLOW):
    """Call fn until its result (or its first item) is not retriable."""
    deadline = time.monotonic() + timeout
    while True:
        res = fn()
        code = res[0] if isinstance(res, tuple) else res
        if code not in RETRIABLE or time.monotonic() > deadline:
            return res
        time.sleep(0.1)


class Writers:
    """P (transactional, raw protocol) and Q (idempotent) on one
    partition, each keeping its own sequence numbers."""

    def __init__(self, cli, topic, tid):
        self.cli, self.topic, self.tid = cli, topic, tid
        err, self.q_pid, self.q_epoch = cli.init_producer_id()
        assert err == 0, err
        err, self.p_pid, self.p_epoch = retry(lambda: cli.init_producer_id(
            transactional_id=tid, txn_timeout_ms=60000))
        assert err == 0, err
        self.q_seq = self.p_seq = 0
        self.in_txn = False

    def q(self, value):
        batch = kw.record_batch([value], self.q_pid, self.q_epoch, self.q_seq)
        err, off = self.cli.produce(self.topic, 0, batch)
        assert err == 0, err
        self.q_seq += 1
        return off

    def p(self, value):
        if not self.in_txn:
            got = retry(lambda: self.cli.add_partitions(
                self.tid, self.p_pid, self.p_epoch, {self.topic: [0]})[
                    (self.topic, 0)])
            assert got == 0, got
            self.in_txn = True
        batch = kw.record_batch([value], self.p_pid, self.p_epoch,
                                self.p_seq, transactional=True)
        err, off = self.cli.produce(self.topic, 0, batch,
                                    transactional_id=self.tid)
        assert err == 0, err
        self.p_seq += 1
        return off

    def end(self, commit):
        err = retry(lambda: self.cli.end_txn(self.tid, self.p_pid,
                                             self.p_epoch, commit))
        assert err == 0, err
        self.in_txn = False
        wait_complete(self.cli, self.tid,
                      "CompleteCommit" if commit else "CompleteAbort")


def wait_complete(cli, tid, state, timeout=10 * SLOW):
    """Poll DescribeTransactions until tid reaches state."""
    deadline = time.monotonic() + timeout
    while True:
        got = cli.describe_transactions([tid])[tid]
        if got["state"] == state:
            return
        if time.monotonic() > deadline:
            pytest.fail("%s not %s within %ss: %r" % (tid, state, timeout,
                                                      got))
        time.sleep(0.05)


def fetch(cli, topic, offset, iso=RC, **kw_):
    d = cli.fetch_iso(topic, 0, offset, iso, **kw_)
    assert d["top_error"] == 0 and d["error"] == 0, d
    return d


def offsets_of(d):
    """[(base offset, "data"/"abort"/"commit")] of a fetch's batches."""
    out = []
    for b in d["batches"]:
        if b["attributes"] & kw.ATTR_CONTROL:
            kind = {kw.CONTROL_ABORT: "abort", kw.CONTROL_COMMIT: "commit"}
            out.append((b["base_offset"],
                        kind.get((b["control"] or (None,))[0], "control?")))
        else:
            out.append((b["base_offset"], "data"))
    return out


def aborted(d):
    """The aborted list, null counted as empty."""
    return sorted(d["aborted"] or [])


def consume_offsets(bootstrap, topic, iso, until_offset, timeout=15 * SLOW):
    """[(offset, value)] a librdkafka consumer delivers from offset 0 of
    partition 0 until it has delivered until_offset (or the timeout)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "rc-assign",
                  "enable.auto.commit": False, "isolation.level": iso,
                  "enable.partition.eof": False})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        out = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for m in c.consume(100, 0.2):
                if m.error() is None:
                    out.append((m.offset(), m.value()))
            if out and out[-1][0] >= until_offset:
                # A little longer, to catch anything delivered twice.
                for m in c.consume(100, 0.5):
                    if m.error() is None:
                        out.append((m.offset(), m.value()))
                break
        return out
    finally:
        c.close()


# ---------------------------------------------------------------------------
# a. The worked example.

def test_worked_example(broker):
    topic = "orders"
    broker.create_topic(topic, 1)
    cli = kw.ReadClient(broker.port)
    w = Writers(cli, topic, "tx-worked")

    assert w.q(b"q0") == 0
    assert w.p(b"p1") == 1
    assert w.q(b"q2") == 2
    assert w.p(b"p3") == 3
    assert w.q(b"q4") == 4

    # P's transaction is open from offset 1: read_committed stops there
    # even though Q's 2 and 4 are final.
    d = fetch(cli, topic, 0)
    assert d["high_watermark"] == 5, d
    assert d["last_stable_offset"] == 1, d
    assert offsets_of(d) == [(0, "data")], offsets_of(d)
    assert aborted(d) == []
    # At the LSO itself nothing is returned (and nothing waited for).
    d = fetch(cli, topic, 1)
    assert d["last_stable_offset"] == 1 and d["batches"] == [], d
    # read_uncommitted sees everything up to the high watermark.
    d = fetch(cli, topic, 0, RU)
    assert [o for o, _ in offsets_of(d)] == [0, 1, 2, 3, 4]
    assert not d["aborted"], d["aborted"]
    assert cli.list_offset_iso(topic, 0, RC) == (0, 1)
    assert cli.list_offset_iso(topic, 0, RU) == (0, 5)
    assert cli.list_offset_iso(topic, 0, RC, kw.EARLIEST_TIMESTAMP) == (0, 0)

    w.end(commit=False)             # ABORT marker at 5
    d = fetch(cli, topic, 1)
    assert d["high_watermark"] == 6 and d["last_stable_offset"] == 6, d
    assert offsets_of(d) == [(1, "data"), (2, "data"), (3, "data"),
                             (4, "data"), (5, "abort")], offsets_of(d)
    assert aborted(d) == [(w.p_pid, 1)], d["aborted"]
    assert cli.list_offset_iso(topic, 0, RC) == (0, 6)
    assert cli.list_offset_iso(topic, 0, RU) == (0, 6)
    # The whole partition from 0: the same single aborted transaction.
    d = fetch(cli, topic, 0)
    assert aborted(d) == [(w.p_pid, 1)], d["aborted"]
    # read_uncommitted gets no aborted list.
    d = fetch(cli, topic, 0, RU)
    assert not d["aborted"], d["aborted"]

    # A new transaction of P: 6, committed with the marker at 7.
    assert w.p(b"p6") == 6
    d = fetch(cli, topic, 6)
    assert d["last_stable_offset"] == 6 and d["batches"] == [], d
    assert cli.list_offset_iso(topic, 0, RC) == (0, 6)
    w.end(commit=True)
    d = fetch(cli, topic, 6)
    assert d["high_watermark"] == 8 and d["last_stable_offset"] == 8, d
    assert offsets_of(d) == [(6, "data"), (7, "commit")], offsets_of(d)
    assert aborted(d) == [], d["aborted"]
    assert cli.list_offset_iso(topic, 0, RC) == (0, 8)
    cli.close()

    # Clients drop the aborted records and hide the markers.
    got = consume_offsets(broker.bootstrap, topic, "read_committed", 6)
    assert got == [(0, b"q0"), (2, b"q2"), (4, b"q4"), (6, b"p6")], got
    got = consume_offsets(broker.bootstrap, topic, "read_uncommitted", 6)
    assert got == [(0, b"q0"), (1, b"p1"), (2, b"q2"), (3, b"p3"),
                   (4, b"q4"), (6, b"p6")], got


# ---------------------------------------------------------------------------
# b. An open transaction blocks later records from others; its end
# releases them.

def rc_consumer(bootstrap, topic):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "rc-block",
                  "enable.auto.commit": False,
                  "isolation.level": "read_committed"})
    c.assign([TopicPartition(topic, 0, 0)])
    return c


def poll_values(c, seconds, want=None):
    """Values delivered within seconds (stops early once want many)."""
    out = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for m in c.consume(100, 0.1):
            if m.error() is None:
                out.append(m.value())
        if want is not None and len(out) >= want:
            break
    return out


def open_txn_then_idempotent(broker, topic, tid):
    """A transactional producer with one record in an open transaction,
    then three records of an idempotent producer after it."""
    tp = Producer({"bootstrap.servers": broker.bootstrap,
                   "transactional.id": tid, "linger.ms": 0})
    tp.init_transactions(T)
    tp.begin_transaction()
    tp.produce(topic, value=b"txn-0", partition=0)
    assert tp.flush(T) == 0
    ip = Producer({"bootstrap.servers": broker.bootstrap,
                   "enable.idempotence": True, "linger.ms": 0})
    for i in range(3):
        ip.produce(topic, value=b"idem-%d" % i, partition=0)
    assert ip.flush(T) == 0
    return tp


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
def test_lso_blocks_then_releases(broker, commit):
    topic = "block"
    broker.create_topic(topic, 1)
    tp = open_txn_then_idempotent(broker, topic, "tx-block")
    c = rc_consumer(broker.bootstrap, topic)
    try:
        early = poll_values(c, 3)
        assert early == [], "delivered past the LSO: %r" % early
        t0 = time.monotonic()
        if commit:
            tp.commit_transaction(T)
            want = [b"txn-0", b"idem-0", b"idem-1", b"idem-2"]
        else:
            tp.abort_transaction(T)
            want = [b"idem-0", b"idem-1", b"idem-2"]
        got = poll_values(c, 10 * SLOW, len(want))
        took = time.monotonic() - t0
        assert got == want, got
        assert took < 10 * SLOW
        print("released %.2fs after the transaction ended" % took)
        got += poll_values(c, 1)
        assert got == want, "delivered twice or more: %r" % got
    finally:
        c.close()


# ---------------------------------------------------------------------------
# c. A second client library: kafkajs (readUncommitted: false).

def npm_ready():
    """None if kafkajs is installed under tests/e2e/js, else why not."""
    if not shutil.which("node") or not shutil.which("npm"):
        return "node/npm not installed (apt-get install nodejs npm)"
    if (JS_DIR / "node_modules" / "kafkajs").is_dir():
        return None
    cmd = ["npm", "ci" if (JS_DIR / "package-lock.json").exists()
           else "install", "--no-audit", "--no-fund", "--prefix",
           str(JS_DIR)]
    try:
        res = subprocess.run(cmd, cwd=str(JS_DIR), stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, timeout=120,
                             text=True)
    except (OSError, subprocess.TimeoutExpired) as e:
        return "npm install failed: %s" % e
    if res.returncode != 0:
        return "npm install failed:\n%s" % res.stdout[-2000:]
    return None


class LineReader:
    """Collects a child's stdout lines (JSON objects) on a thread."""

    def __init__(self, proc):
        self.lines = []
        self.raw = []
        self.lock = threading.Lock()
        self.t = threading.Thread(target=self._run, args=(proc,),
                                  daemon=True)
        self.t.start()

    def _run(self, proc):
        for line in proc.stdout:
            with self.lock:
                self.raw.append(line)
                try:
                    self.lines.append(json.loads(line))
                except ValueError:
                    pass

    def events(self, kind):
        with self.lock:
            return [e for e in self.lines if e.get("event") == kind]

    def wait(self, kind, count, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if len(self.events(kind)) >= count:
                return True
            time.sleep(0.05)
        return False


def test_kafkajs_lso_block(broker_factory):
    why = npm_ready()
    if why:
        pytest.skip(why)
    broker = broker_factory(**{"group.initial.rebalance.delay.ms": "0"})
    topic = "jsblock"
    broker.create_topic(topic, 1)
    tp = open_txn_then_idempotent(broker, topic, "tx-js")
    proc = subprocess.Popen(
        ["node", str(JS_DIR / "lso_block.js"), broker.bootstrap, topic],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, cwd=str(JS_DIR))
    try:
        out = LineReader(proc)
        assert out.wait("ready", 1, 30 * SLOW), \
            "kafkajs consumer never joined:\n%s" % "".join(out.raw[-20:])
        time.sleep(3)
        early = out.events("message")
        assert early == [], "kafkajs delivered past the LSO: %r" % early
        tp.commit_transaction(T)
        assert out.wait("message", 4, 15 * SLOW), \
            "kafkajs got %r after the commit:\n%s" % (
                out.events("message"), "".join(out.raw[-20:]))
        time.sleep(1)
        got = [(e["offset"], e["value"]) for e in out.events("message")]
        assert got == [(0, "txn-0"), (1, "idem-0"), (2, "idem-1"),
                       (3, "idem-2")], got
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)


# ---------------------------------------------------------------------------
# d. The aborted index and LSO survive kill -9.

def test_aborted_list_survives_kill9(broker):
    topic = "abrestart"
    broker.create_topic(topic, 1)
    cli = kw.ReadClient(broker.port)
    w = Writers(cli, topic, "tx-abrestart")
    w.q(b"q0")                     # 0
    w.p(b"a1")                     # 1
    w.p(b"a2")                     # 2
    w.q(b"q3")                     # 3
    w.end(commit=False)            # 4: ABORT
    w.p(b"c5")                     # 5
    w.end(commit=True)             # 6: COMMIT
    w.q(b"q7")                     # 7
    w.p(b"a8")                     # 8
    w.end(commit=False)            # 9: ABORT
    w.p(b"open10")                 # 10, left open
    w.q(b"q11")                    # 11
    before = fetch(cli, topic, 0)
    assert before["last_stable_offset"] == 10, before
    assert before["high_watermark"] == 12, before
    assert aborted(before) == [(w.p_pid, 1), (w.p_pid, 8)], \
        before["aborted"]
    lso_before = cli.list_offset_iso(topic, 0, RC)
    assert lso_before == (0, 10)
    cli.close()

    broker.kill9()
    broker.unexpected_exit = None
    broker.start()
    cli = kw.ReadClient(broker.port)
    deadline = time.monotonic() + 10 * SLOW
    while True:
        after = cli.fetch_iso(topic, 0, 0, RC)
        if (after["top_error"], after["error"]) == (0, 0) or \
                time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert (after["top_error"], after["error"]) == (0, 0), after
    assert after["last_stable_offset"] == before["last_stable_offset"]
    assert after["high_watermark"] == before["high_watermark"]
    assert aborted(after) == aborted(before), after["aborted"]
    assert offsets_of(after) == offsets_of(before)
    assert cli.list_offset_iso(topic, 0, RC) == lso_before
    # The open transaction is still open after the restart and its
    # commit moves the LSO.
    assert retry(lambda: cli.end_txn(w.tid, w.p_pid, w.p_epoch, True)) == 0
    wait_complete(cli, w.tid, "CompleteCommit")
    d = fetch(cli, topic, 0)
    assert d["last_stable_offset"] == 13 == d["high_watermark"], d
    assert aborted(d) == [(w.p_pid, 1), (w.p_pid, 8)], d["aborted"]
    cli.close()


# ---------------------------------------------------------------------------
# e. A parked read_committed fetch wakes when the LSO moves.

def test_parked_fetch_wakes_on_lso_move(broker):
    topic = "park"
    broker.create_topic(topic, 1)
    cli = kw.ReadClient(broker.port)
    w = Writers(cli, topic, "tx-park")
    assert w.p(b"t0") == 0
    assert w.q(b"q1") == 1          # data past the LSO: must not wake it
    waiter = kw.ReadClient(broker.port, timeout=15 * SLOW)
    waiter.corr += 1
    waiter.sock.sendall(kw.fetch_request_iso(
        waiter.corr, topic, 0, 0, RC, max_wait_ms=5000, min_bytes=1))
    # Still parked a second later: nothing is readable below the LSO.
    ready, _, _ = select.select([waiter.sock], [], [], 1.0)
    assert not ready, "read_committed fetch answered while the LSO was 0"
    t0 = time.monotonic()
    assert retry(lambda: cli.end_txn(w.tid, w.p_pid, w.p_epoch, True)) == 0
    body = kw.recv_frame(waiter.sock)
    took = time.monotonic() - t0
    assert body is not None
    _, top_err, out = kw.parse_fetch_iso(body)
    d = out[(topic, 0)]
    assert (top_err, d["error"]) == (0, 0), d
    print("parked fetch answered %.3fs after EndTxn was sent" % took)
    assert took < 2.0 * SLOW, "woke %.2fs after the commit" % took
    assert [o for o, _ in offsets_of(d)][:2] == [0, 1], offsets_of(d)
    assert d["last_stable_offset"] >= 2, d
    waiter.close()
    cli.close()
