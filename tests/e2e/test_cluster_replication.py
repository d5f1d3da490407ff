"""Partition replication on three brokers (issue #14): followers copy
their leader's log, acks=all waits for the ISR, a new leader has every
acknowledged record, and min.insync.replicas refuses what it cannot
honour.  Every broker is killed by pid at teardown (cluster_factory);
every wait is bounded; no verdict depends on how fast anything happens.

Topics are created with a manual assignment, so each test knows who leads
and who is elected next: the controller picks the first replica in
assignment order that is in the ISR (src/meta/elect.h, Kafka's rule).

Every node of a Cluster is also a metadata voter, so killing two of three
loses the quorum and with it every ISR change.  The test with two
followers down therefore adds a fourth node that only brokers and puts
one of the two followers there: the voters left still make a quorum.

Record counts: RECORDS (100,000 under `make test`, a tenth under the
sanitizers, 500,000 under CAIRN_SOAK=1, or CAIRN_REPL_RECORDS) is how
many acknowledged records the leader-kill tests wait for at least;
repl_producer.py writes at RATE per second until the test has done its
kills and seen that many acknowledged.  About 90 s in all on two cores
(release build), 80 s under ASan.
"""

import os
import signal
import struct
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, \
    Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import kafka_wire as kw
from client_stacks import VENV_PY
from conftest import SLOW, metrics, needs_cairn, run, scaled, tool, \
    wait_until

pytestmark = [needs_cairn]

HERE = Path(__file__).resolve().parent

SOAK = bool(os.environ.get("CAIRN_SOAK"))
RECORDS = int(os.environ.get("CAIRN_REPL_RECORDS",
                             500000 if SOAK else scaled(100000)))
RATE = 50000 if SOAK else 20000 // SLOW
REGISTER_S = 20 * SLOW
# Kafka's defaults are 30 s; a test cannot wait that long for a shrink.
LAG_MS = 3000
SETS = {"replica.lag.time.max.ms": str(LAG_MS)}
MIN_ISR = {"min.insync.replicas": "2"}
# How long followers are stopped before a leader kill: well below the lag
# time, so the ISR stays whole and acks=all must wait.
STALL_S = 0.5

# Kafka error codes the tests expect.
NOT_LEADER_OR_FOLLOWER = 6
NOT_ENOUGH_REPLICAS = 19
FENCED_LEADER_EPOCH = 74
UNKNOWN_LEADER_EPOCH = 75

URP = "kafka_server_replicamanager_underreplicatedpartitions"
UNDER_MIN = "kafka_server_replicamanager_underminisrpartitioncount"
EXPANDS = "kafka_server_replicamanager_isrexpands_total"



def admin(bootstrap):
    return AdminClient({"bootstrap.servers": bootstrap})


def create_topic(bootstrap, topic, parts=1, rf=3, configs=None,
                 assignment=None):
    """assignment: one replica list per partition (assignment order, the
    first leads)."""
    a = admin(bootstrap)
    if assignment is not None:
        nt = NewTopic(topic, num_partitions=len(assignment),
                      replica_assignment=assignment, config=configs or {})
    else:
        nt = NewTopic(topic, num_partitions=parts, replication_factor=rf,
                      config=configs or {})
    fs = a.create_topics([nt], operation_timeout=30)
    fs[topic].result(timeout=60)


def partition_state(port, topic, part=0):
    """(leader, isr) as the broker at port answers Metadata, or None."""
    try:
        md = admin("127.0.0.1:%d" % port).list_topics(topic, timeout=5)
    except KafkaException:
        return None
    t = md.topics.get(topic)
    if t is None or t.error is not None or part not in t.partitions:
        return None
    p = t.partitions[part]
    if p.error is not None or p.leader < 0:
        return None
    return p.leader, sorted(p.isrs)


def serving(c):
    """The nodes that run and are not paused (SIGSTOP) by the test."""
    paused = getattr(c, "paused", set())
    return [b for b in c.live() if b.node_id not in paused]


def wait_state(c, topic, pred, what, part=0, timeout=None):
    """Waits until every serving node answers the same (leader, isr) for
    the partition and pred holds for it; returns it."""
    def check():
        seen = None
        for b in serving(c):
            st = partition_state(b.port, topic, part)
            if st is None or not pred(st):
                return None
            if seen is not None and st != seen:
                return None
            seen = st
        return seen
    return wait_until(what, check, timeout or REGISTER_S)


def full_isr(c, topic, n=3):
    return wait_state(c, topic, lambda s: len(s[1]) == n,
                      "%s led with all %d replicas in the ISR" % (topic, n))


def produce(bootstrap, topic, n, tag, part=0, timeout=90):
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                  "enable.idempotence": True,
                  "message.timeout.ms": int(timeout * 1000),
                  "linger.ms": 5})
    acked, failed = [], []

    def cb(err, msg):
        (acked if err is None else failed).append(
            msg.value() if err is None else err)
    for i in range(n):
        p.produce(topic, value=b"%s-%d" % (tag.encode(), i), partition=part,
                  on_delivery=cb)
        p.poll(0)
    p.flush(timeout + 10)
    return acked, failed


def read_all(bootstrap, topic, part=0, want=None, timeout=60 * SLOW):
    """[(offset, value)] from offset 0 to the high watermark (and at least
    want records when given), read_uncommitted."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "r-" + topic,
                  "enable.auto.commit": False,
                  "isolation.level": "read_uncommitted",
                  "enable.partition.eof": True})
    c.assign([TopicPartition(topic, part, 0)])
    out = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            eof = False
            for m in c.consume(num_messages=1000, timeout=0.5):
                if m.error() is None:
                    out.append((m.offset(), m.value()))
                elif m.error().code() == KafkaError._PARTITION_EOF:
                    eof = True
            if eof and (want is None or len(out) >= want):
                break
    finally:
        c.close()
    return out


def count_acked(path):
    """Complete lines of an acked file (a line being written is not)."""
    try:
        with open(path, "rb") as f:
            return f.read().count(b"\n")
    except FileNotFoundError:
        return 0


class ReplProducer:
    """repl_producer.py writing "s<n>" (or "<prefix>-s<n>") to partition 0
    of topic until finish(); every delivery report lands in an acked
    file."""

    def __init__(self, background, tmp_path, bootstrap, topic, name="prod",
                 prefix=None, rate=RATE):
        self.prefix = prefix
        self.acked = str(tmp_path / ("%s-acked.txt" % name))
        self.stop_file = str(tmp_path / ("%s-stop" % name))
        self.topic = topic
        args = [str(VENV_PY), str(HERE / "repl_producer.py"),
                "--brokers", bootstrap, "--topic",
                topic, "--partitions", "1", "--acked-file", self.acked,
                "--stop-file", self.stop_file, "--rate", str(rate),
                "--timeout-ms", str(120000 * SLOW)]
        if prefix:
            args += ["--prefix", prefix]
        self.bg = background(args, name=name)

    def n_acked(self):
        return count_acked(self.acked)

    def wait_acked(self, n, what):
        """Until n records are acknowledged; the producer must be running
        and making progress (each 60 s at least one record)."""
        last = [self.n_acked(), time.monotonic()]

        def enough():
            got = self.n_acked()
            assert self.bg.proc.poll() is None, \
                "producer exited early:\n" + self.bg.output()[-3000:]
            if got > last[0]:
                last[:] = [got, time.monotonic()]
            assert time.monotonic() - last[1] < 60 * SLOW, \
                "%s: no record acknowledged for 60 s (%d of %d):\n%s" % (
                    what, got, n, self.bg.output()[-3000:])
            return got >= n
        wait_until(what, enough, 600 * SLOW)

    def finish(self):
        """Stops sending, waits for every report; returns the summary."""
        Path(self.stop_file).touch()
        try:
            rc = self.bg.proc.wait(timeout=150 * SLOW)
        except Exception:
            rc = self.bg.stop(timeout=5)
        out = self.bg.output()
        print(out[-2000:])
        assert rc == 0, "producer exit %s:\n%s" % (rc, out[-3000:])
        assert "failed=0 " in out and "fatal=none" in out, out[-3000:]
        return out

    def check(self, log):
        """Against log, the whole partition as [(offset, value)], after
        finish() (so every record sent was acknowledged): this producer's
        records are all there once and in order, nothing missing between,
        each at the offset its delivery report gave.

        A report may have no offset (-1001): librdkafka acknowledges
        messages implicitly when the broker accepts a later sequence
        (the earlier batch was written but its answer was lost in a
        failover).  Those are checked by value and order only."""
        tag = b"" if self.prefix is None else self.prefix.encode() + b"-"
        n = self.n_acked()
        mine = [(o, v) for o, v in log if v.startswith(tag + b"s")]
        want = [b"%ss%d" % (tag, i) for i in range(n)]
        got = [v for _, v in mine]
        if got != want:
            i = next((i for i, (a, b) in enumerate(zip(got, want))
                      if a != b), min(len(got), len(want)))
            raise AssertionError(
                "%s records in the log, %d acknowledged: first difference "
                "at #%d: log %r, want %r" % (
                    len(got), n, i, mine[i] if i < len(mine) else None,
                    want[i] if i < n else None))
        by_offset = dict(log)
        acked = acked_list(self.acked)
        assert len(acked) == n
        bad = [(o, v, by_offset.get(o)) for o, v in acked
               if o >= 0 and by_offset.get(o) != v]
        assert not bad, "(acknowledged offset, value, log) %s" % bad[:10]
        unknown = sum(1 for o, _ in acked if o < 0)
        print("%d records of %r checked, %d acknowledged without an offset"
              % (n, tag, unknown))


def acked_list(path):
    """[(offset, value)] of an acked file, in report order."""
    out = []
    with open(path, "rb") as f:
        for line in f.read().split(b"\n"):
            if line:
                _, off, val = line.split(b" ")
                out.append((int(off), val))
    return out


def kill_leader_and_restart(c, topic, stall=False):
    """kill -9 the partition's leader while it has a full ISR, waits for
    another leader, restarts the old one and waits until it is back in
    the ISR.  Returns the killed node's id.

    stall: both followers are stopped (SIGSTOP) for STALL_S first and
    resumed after the kill, so the leader dies holding records no
    follower has; none of them may have been acknowledged.  (Without a
    stall, followers on loopback copy an append within microseconds and a
    leader acknowledging too early would go unnoticed.)"""
    leader, isr = full_isr(c, topic)
    followers = [n for n in isr if n != leader]
    if stall:
        for n in followers:
            pause(c, n)
        time.sleep(STALL_S)
    c.kill9(leader)
    if stall:
        for n in followers:
            resume(c, n)
    wait_state(c, topic, lambda s: s[0] != leader and leader not in s[1],
               "%s led by another broker after node %d died" % (topic,
                                                                 leader))
    c.node(leader).start()
    full_isr(c, topic)
    return leader


def cluster(cluster_factory, n=3, **sets):
    all_sets = dict(SETS)
    all_sets.update(sets)
    c = cluster_factory(n, **all_sets)
    c.wait_registered(list(range(1, n + 1)), REGISTER_S)
    return c


def test_acks_all_survives_leader_kill(cluster_factory):
    c = cluster(cluster_factory)
    create_topic(c.bootstrap, "rep", configs=MIN_ISR)
    leader, isr = full_isr(c, "rep")
    acked, failed = produce(c.bootstrap, "rep", 2000, "a")
    assert not failed and len(acked) == 2000
    c.kill9(leader)
    wait_state(c, "rep", lambda s: s[0] != leader,
               "rep led by another broker")
    got = read_all(c.bootstrap, "rep", want=2000)
    values = [v for _, v in got]
    assert values == acked, "after the kill: %d records, want %d" % (
        len(values), len(acked))
    assert [o for o, _ in got] == list(range(2000))


def test_idempotent_producer_through_three_leader_kills(
        cluster_factory, background, tmp_path):
    """An idempotent acks=all producer writes while the leader is killed
    with kill -9 three times, each restarted and back in the ISR before
    the next kill (the last two while the followers are stalled):
    every acknowledged record is there exactly once, at its acknowledged
    offset, in order, without a gap."""
    c = cluster(cluster_factory)
    create_topic(c.bootstrap, "kills", configs=MIN_ISR,
                 assignment=[[1, 2, 3]])
    full_isr(c, "kills")
    prod = ReplProducer(background, tmp_path, c.bootstrap, "kills")
    killed = []
    for k in range(3):
        prod.wait_acked(prod.n_acked() + RECORDS // 4,
                        "records acknowledged before kill %d" % (k + 1))
        killed.append(kill_leader_and_restart(c, "kills", stall=k > 0))
    prod.wait_acked(max(RECORDS, prod.n_acked() + RECORDS // 4),
                    "records acknowledged after the kills")
    out = prod.finish()
    print("leaders killed: %s" % killed)
    assert len(set(killed)) >= 2, killed  # leadership did move around
    n = prod.n_acked()
    log = read_all(c.bootstrap, "kills", want=n)
    assert [o for o, _ in log] == list(range(n))
    prod.check(log)
    assert "sent=%d acked=%d " % (n, n) in out, out[-2000:]
    # Nothing but what was sent: the log ends at the count.
    cli = kw.Client(c.node(full_isr(c, "kills")[0]).port)
    try:
        assert cli.list_offset("kills", 0) == n
    finally:
        cli.close()


def test_read_uncommitted_never_sees_a_lost_offset(
        cluster_factory, background, tmp_path):
    """A read_uncommitted consumer reads while leaders are killed (the
    last two with the followers stalled, so the dying leader holds records
    nobody else has): every (offset, value) it ever saw is in the final
    log at that offset, so nothing it was shown was later truncated away.
    Two producers write at once: a lost tail written again comes back
    interleaved differently, so the values at its offsets change (one
    idempotent producer would write the same values at the same offsets
    again and hide the loss)."""
    c = cluster(cluster_factory)
    create_topic(c.bootstrap, "peek", configs=MIN_ISR,
                 assignment=[[1, 2, 3]])
    full_isr(c, "peek")
    seen = []
    done = threading.Event()
    errors = []

    def consume():
        cons = Consumer({"bootstrap.servers": c.bootstrap,
                         "group.id": "peek-live",
                         "enable.auto.commit": False,
                         "isolation.level": "read_uncommitted",
                         "auto.offset.reset": "earliest",
                         "topic.metadata.refresh.interval.ms": 1000})
        cons.assign([TopicPartition("peek", 0, 0)])
        try:
            while not done.is_set():
                for m in cons.consume(num_messages=1000, timeout=0.2):
                    if m.error() is None:
                        seen.append((m.offset(), m.value()))
        except Exception as e:  # reported by the test, not lost
            errors.append(e)
        finally:
            cons.close()
    th = threading.Thread(target=consume, daemon=True)
    th.start()
    prods = [ReplProducer(background, tmp_path, c.bootstrap, "peek",
                          name="prod-" + x, prefix=x, rate=RATE // 2)
             for x in ("a", "b")]

    def acked():
        return sum(p.n_acked() for p in prods)
    try:
        for k in range(3):
            prods[k % 2].wait_acked(
                prods[k % 2].n_acked() + RECORDS // 16,
                "records acknowledged before kill %d" % (k + 1))
            kill_leader_and_restart(c, "peek", stall=k > 0)
        for p in prods:
            p.wait_acked(p.n_acked() + RECORDS // 16,
                         "records acknowledged after the kills")
        for p in prods:
            p.finish()
        total = acked()
        wait_until("the live consumer caught up",
                   lambda: seen and seen[-1][0] >= total - 1, 60 * SLOW)
    finally:
        done.set()
        th.join(30)
    assert not errors, errors
    got = read_all(c.bootstrap, "peek", want=total)
    assert [o for o, _ in got] == list(range(total))
    final = dict(got)
    wrong = [(o, v, final.get(o)) for o, v in seen if final.get(o) != v]
    print("live consumer saw %d records (%d distinct offsets); final log "
          "%d" % (len(seen), len(set(o for o, _ in seen)), len(final)))
    assert not wrong, "seen then gone or changed (offset, seen, final): %s" \
        % wrong[:10]
    assert len(set(o for o, _ in seen)) == total
    for p in prods:
        p.check(got)


def pause(c, node_id):
    """SIGSTOP: the process keeps its sockets but answers nothing."""
    if not hasattr(c, "paused"):
        c.paused = set()
    c.paused.add(node_id)
    os.kill(c.node(node_id).proc.pid, signal.SIGSTOP)


def resume(c, node_id):
    os.kill(c.node(node_id).proc.pid, signal.SIGCONT)
    c.paused.discard(node_id)


def test_paused_follower_leaves_isr_and_comes_back_whole(cluster_factory):
    """One follower stopped (SIGSTOP): the leader shrinks the ISR after
    replica.lag.time.max.ms and acks=all goes on with two; resumed, the
    follower catches up and is added back; it then holds every record,
    as it shows once it leads."""
    # A session longer than the lag time: the ISR shrink is the leader's
    # AlterPartition, not the controller fencing a silent broker.
    c = cluster(cluster_factory, **{"broker.session.timeout.ms": "10000"})
    create_topic(c.bootstrap, "pause", configs=MIN_ISR,
                 assignment=[[1, 2, 3]])
    assert full_isr(c, "pause") == (1, [1, 2, 3])
    a, failed = produce(c.bootstrap, "pause", 1000, "a")
    assert not failed and len(a) == 1000
    pause(c, 2)
    # Written while node 2 is silent: acknowledged once the ISR is {1, 3}.
    b, failed = produce(c.bootstrap, "pause", 1000, "b")
    assert not failed and len(b) == 1000, failed[:3]
    assert wait_state(c, "pause", lambda s: s[1] == [1, 3],
                      "ISR shrunk to [1, 3]") == (1, [1, 3])
    c2, failed = produce(c.bootstrap, "pause", 1000, "c")
    assert not failed and len(c2) == 1000, failed[:3]
    m = metrics(c.node(1))
    assert m[URP] == 1 and m[UNDER_MIN] == 0, m
    resume(c, 2)
    assert full_isr(c, "pause") == (1, [1, 2, 3])
    m = metrics(c.node(1))
    # Back in the ISR only through the leader's AlterPartition, whether
    # the shrink was its own or the controller's fencing of node 2.
    assert m[EXPANDS] >= 1 and m[URP] == 0, m
    d, failed = produce(c.bootstrap, "pause", 1000, "d")
    assert not failed and len(d) == 1000, failed[:3]
    # Node 2 is next in assignment order: it leads once node 1 is gone,
    # and what it serves is its own log.
    c.kill9(1)
    wait_state(c, "pause", lambda s: s[0] == 2, "node 2 leads")
    got = read_all(c.node(2).bootstrap, "pause", want=4000)
    assert [v for _, v in got] == a + b + c2 + d
    assert [o for o, _ in got] == list(range(4000))


def test_two_followers_down_refuses_acks_all(cluster_factory):
    """Both followers killed: once the ISR is the leader alone, acks=all
    is refused with NOT_ENOUGH_REPLICAS before anything is appended,
    what was acknowledged before is all there, and writes go on once one
    follower is back."""
    c = cluster(cluster_factory)
    c.add_broker()  # node 4: brokers only, so 1 and 3 keep the quorum
    c.wait_registered([1, 2, 3, 4], REGISTER_S)
    create_topic(c.bootstrap, "two", configs=MIN_ISR,
                 assignment=[[1, 2, 4]])
    assert full_isr(c, "two") == (1, [1, 2, 4])
    a, failed = produce(c.bootstrap, "two", 1000, "a")
    assert not failed and len(a) == 1000
    c.kill9(2)
    c.kill9(4)
    assert wait_state(c, "two", lambda s: s[1] == [1],
                      "ISR shrunk to the leader alone") == (1, [1])
    leader = c.node(1)
    m = metrics(leader)
    assert m[URP] == 1 and m[UNDER_MIN] == 1, m
    cli = kw.Client(leader.port)
    try:
        end = cli.list_offset("two", 0)
        assert end == 1000
        # The exact code on the wire, for a plain and an idempotent batch.
        err, _ = cli.produce("two", 0, kw.record_batch([b"refused"]),
                             acks=-1)
        assert err == NOT_ENOUGH_REPLICAS, err
        assert cli.list_offset("two", 0) == end  # not appended
        # acks=1 does not ask for the ISR (Kafka checks min.insync.replicas
        # for acks=all only).
        err, off = cli.produce("two", 0, kw.record_batch([b"one"]), acks=1)
        assert (err, off) == (0, end)
    finally:
        cli.close()
    # What a client sees: librdkafka without retries reports the code.
    p = Producer({"bootstrap.servers": leader.bootstrap, "acks": "all",
                  "retries": 0, "message.timeout.ms": 10000 * SLOW})
    errs = []
    p.produce("two", value=b"refused-client", partition=0,
              on_delivery=lambda err, msg: errs.append(err))
    assert p.flush(30 * SLOW) == 0
    assert len(errs) == 1 and errs[0] is not None, errs
    assert errs[0].code() == KafkaError.NOT_ENOUGH_REPLICAS, errs[0]
    # Nothing acknowledged is lost.
    got = read_all(leader.bootstrap, "two", want=1001)
    assert [v for _, v in got] == a + [b"one"]
    # One follower back: the ISR is 2 = min.insync.replicas, writes resume.
    c.node(2).start()
    assert wait_state(c, "two", lambda s: s[1] == [1, 2],
                      "node 2 back in the ISR") == (1, [1, 2])
    b, failed = produce(c.bootstrap, "two", 1000, "b")
    assert not failed and len(b) == 1000, failed[:3]
    got = read_all(leader.bootstrap, "two", want=2001)
    assert [v for _, v in got] == a + [b"one"] + b
    assert [o for o, _ in got] == list(range(2001))


def test_all_killed_at_once_keeps_everything_acknowledged(
        cluster_factory, background, tmp_path):
    """kill -9 of all three during acks=all production, all restarted:
    every acknowledged record is there once, in order, no gap (the
    default replica durability syncs before a follower counts)."""
    c = cluster(cluster_factory)
    create_topic(c.bootstrap, "all", configs=MIN_ISR,
                 assignment=[[1, 2, 3]])
    full_isr(c, "all")
    prod = ReplProducer(background, tmp_path, c.bootstrap, "all")
    prod.wait_acked(RECORDS // 4, "records acknowledged before the kill")
    for b in c.nodes:
        b.proc.send_signal(signal.SIGKILL)
    before = prod.n_acked()
    for b in c.nodes:  # reaped here: these exits are expected
        b.proc.wait(timeout=10)
        b.proc = None
    c.start()
    c.wait_registered([1, 2, 3], REGISTER_S)
    full_isr(c, "all")
    prod.wait_acked(before + RECORDS // 4,
                    "records acknowledged after the restart")
    prod.finish()
    n = prod.n_acked()
    log = read_all(c.bootstrap, "all", want=n)
    assert [o for o, _ in log] == list(range(n))
    prod.check(log)


def fetch_request(correlation_id, topic, partition, offset, version=11,
                  current_leader_epoch=-1, max_bytes=1 << 20):
    """Fetch v9..v11 (non-flexible, no session) for one partition."""
    body = struct.pack(">iiiibii", -1, 0, 0, max_bytes, 0, 0, -1)
    body += struct.pack(">i", 1) + kw.string(topic)
    body += struct.pack(">iiiqqi", 1, partition, current_leader_epoch,
                        offset, -1, max_bytes)
    body += struct.pack(">i", 0)          # forgotten topics
    if version >= 11:
        body += kw.string("")             # rack id
    return kw.request(kw.API_FETCH, version, correlation_id, body)


def parse_fetch(body, version=11):
    """(error, high_watermark, [(base_offset, partition_leader_epoch,
    count)]) of the one partition."""
    r = kw.Reader(body)
    r.i32()                               # correlation id
    r.i32()                               # throttle
    top = r.i16()
    r.i32()                               # session id
    assert r.i32() == 1
    r.string()
    assert r.i32() == 1
    r.i32()
    err, hw = r.i16(), r.i64()
    r.i64()
    r.i64()
    for _ in range(max(r.i32(), 0)):
        r.i64()
        r.i64()
    if version >= 11:
        r.i32()                           # preferred read replica
    n = r.i32()
    records = r.data[r.pos:r.pos + n] if n > 0 else b""
    batches = []
    pos = 0
    while pos + 61 <= len(records):
        base, blen, ple = struct.unpack_from(">qii", records, pos)
        if pos + 12 + blen > len(records):
            break
        (count,) = struct.unpack_from(">i", records, pos + 57)
        batches.append((base, ple, count))
        pos += 12 + blen
    return (top or err), hw, batches


def offset_for_leader_epoch_request(correlation_id, topic, partition,
                                    leader_epoch, current_leader_epoch):
    """OffsetForLeaderEpoch v3 (non-flexible) as a consumer (replica -1)."""
    body = struct.pack(">i", -1)
    body += struct.pack(">i", 1) + kw.string(topic)
    body += struct.pack(">iiii", 1, partition, current_leader_epoch,
                        leader_epoch)
    return kw.request(23, 3, correlation_id, body)


def parse_offset_for_leader_epoch(body):
    """(error, leader_epoch, end_offset) of the one partition."""
    r = kw.Reader(body)
    r.i32()
    r.i32()                               # throttle
    assert r.i32() == 1
    r.string()
    assert r.i32() == 1
    err = r.i16()
    r.i32()
    return err, r.i32(), r.i64()


def leader_epoch(bootstrap, topic, part=0):
    """(leader, leader epoch) as cairnctl topics describe shows them."""
    import json
    res = run([tool("cairnctl"), "--bootstrap-server", bootstrap, "topics",
               "describe", "--topic", topic, "--json"], timeout=30 * SLOW)
    assert res.returncode == 0, res.stderr
    for p in json.loads(res.stdout)[0]["partition_info"]:
        if p["partition"] == part:
            return p["leader"], p["leader_epoch"]
    raise AssertionError("partition %d not described" % part)


def failed_over(c, topic):
    """Writes 100 records led by node 1, kills node 1, writes 100 more
    led by node 2; returns (old epoch, new epoch)."""
    create_topic(c.bootstrap, topic, configs=MIN_ISR,
                 assignment=[[1, 2, 3]])
    full_isr(c, topic)
    led, e0 = leader_epoch(c.bootstrap, topic)
    assert led == 1
    a, failed = produce(c.bootstrap, topic, 100, "a")
    assert not failed and len(a) == 100
    c.kill9(1)
    wait_state(c, topic, lambda s: s[0] == 2, "node 2 leads")
    led, e1 = wait_until("node 2's epoch described",
                         lambda: (lambda le: le if le[0] == 2 else None)(
                             leader_epoch(c.node(2).bootstrap, topic)),
                         REGISTER_S)
    assert e1 > e0, (e0, e1)
    b, failed = produce(c.bootstrap, topic, 100, "b")
    assert not failed and len(b) == 100
    return e0, e1


def test_fetch_and_offset_for_leader_epoch_fencing(cluster_factory):
    """A consumer's fetch v10 from a follower gets NOT_LEADER_OR_FOLLOWER
    (v11+ is served up to the follower's high watermark); a
    fetch or OffsetForLeaderEpoch naming an epoch older than the leader's
    gets FENCED_LEADER_EPOCH, a newer one UNKNOWN_LEADER_EPOCH; batches
    carry the epoch of the leader that appended them."""
    c = cluster(cluster_factory)
    e0, e1 = failed_over(c, "fence")
    lead = kw.Client(c.node(2).port)
    follower = kw.Client(c.node(3).port)
    try:
        # Fetch v10 carries no client metadata: Kafka serves it from the
        # leader only.  From v11 (KIP-392) a follower serves what it has up
        # to its high watermark.
        err, _, _ = parse_fetch(follower.call(
            fetch_request, "fence", 0, 0, version=10), 10)
        assert err == NOT_LEADER_OR_FOLLOWER, err
        err, hw, batches = parse_fetch(follower.call(
            fetch_request, "fence", 0, 0, version=11))
        assert err == 0 and hw <= 200, (err, hw)
        assert sum(n for _, _, n in batches) >= hw, (hw, batches)
        for cur, want in ((e0, FENCED_LEADER_EPOCH), (e1, 0),
                          (e1 + 1, UNKNOWN_LEADER_EPOCH), (-1, 0)):
            err, hw, batches = parse_fetch(lead.call(
                fetch_request, "fence", 0, 0, current_leader_epoch=cur))
            assert err == want, (cur, err)
            if want == 0:
                assert hw == 200
                # Node 1 appended the first 100 in e0, node 2 the rest.
                epochs = {}
                for base, ple, count in batches:
                    for o in range(base, base + count):
                        epochs[o] = ple
                assert set(epochs) >= set(range(200)), sorted(epochs)[-3:]
                assert {epochs[o] for o in range(100)} == {e0}
                assert {epochs[o] for o in range(100, 200)} == {e1}
        for cur, want in ((e0, FENCED_LEADER_EPOCH),
                          (e1 + 1, UNKNOWN_LEADER_EPOCH)):
            err, _, _ = parse_offset_for_leader_epoch(lead.call(
                offset_for_leader_epoch_request, "fence", 0, e0, cur))
            assert err == want, (cur, err)
        err, _, _ = parse_offset_for_leader_epoch(follower.call(
            offset_for_leader_epoch_request, "fence", 0, e0, e1))
        assert err == NOT_LEADER_OR_FOLLOWER, err
    finally:
        lead.close()
        follower.close()


def test_offset_for_leader_epoch_from_the_epoch_cache(cluster_factory):
    """OffsetForLeaderEpoch answers from the leader's epoch history: an
    old epoch ends where the next one starts (KIP-101), the current one
    at the log end."""
    c = cluster(cluster_factory)
    e0, e1 = failed_over(c, "olde")
    lead = kw.Client(c.node(2).port)
    try:
        got = parse_offset_for_leader_epoch(lead.call(
            offset_for_leader_epoch_request, "olde", 0, e0, e1))
        assert got == (0, e0, 100), got
        got = parse_offset_for_leader_epoch(lead.call(
            offset_for_leader_epoch_request, "olde", 0, e1, e1))
        assert got == (0, e1, 200), got
    finally:
        lead.close()
