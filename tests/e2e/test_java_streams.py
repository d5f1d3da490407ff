"""A Kafka Streams application (kafka-streams 4.4.0) with
processing.guarantee=exactly_once_v2 against Cairn, killed with SIGKILL
in the middle of its transactions: its output is still exactly once.

test_streams_state_store_restored_after_kill9 runs the stateful
StreamsCount (below); the rest of this text is about the stateless one.

tests/java StreamsEos is stateless: IN (3 partitions) -> flatMapValues
(v -> v:a, v:b) -> OUT (3 partitions).  The test writes N keyed records
to IN with a plain (non-transactional) producer, then runs the
application three times.  The first two runs are killed: once the
group's committed offsets pass a threshold (a quarter and a half of the
input), the test tells the program to stall inside its open transaction
(the thread that would commit it sleeps), waits until that transaction's
records are in OUT's log (DescribeProducers shows a new producer with a
transaction open there), and kills it with SIGKILL.  The third run
finishes the input.  Each start is a new process id to Streams, so a new
transactional id: the killed transaction stays open until the
coordinator's timeout aborts it.  The program is a static group member
(group.instance.id), so each restart takes the dead member's place.

Checked: the group's committed offsets reach IN's end; a read_committed
consumer reads every expected output exactly once (nothing lost, nothing
twice); a read_uncommitted consumer also reads the aborted records of
both killed transactions (at least one per kill), all of them copies of
expected outputs.
"""

import collections
import json
import signal
import subprocess
import time
from pathlib import Path

import pytest

import java_harness
import kafka_wire as kw
from conftest import SANITIZED, SLOW, needs_cairn

# Release only: four JVM starts make it the suite's slowest file under
# the sanitizers (45-55 s, minutes on a loaded machine), and the broker
# paths it reaches (static member replacement, timeout aborts, TV2
# transactions) are run under the sanitizers by test_groups,
# test_transactions and test_java_client's read-process-write.
pytestmark = [needs_cairn, pytest.mark.skipif(
    SANITIZED, reason="the Streams test runs against the release broker")]

N = 900                  # input records, 300 per partition
PARTS = 3
IN, OUT, APP = "st-in", "st-out", "st-app"
# Each run stalls by itself at the latest here (forwarded outputs; two per
# input), in case it gets through the input faster than the test reacts.
STALL_AFTER = 2 * N * 6 // 10
THROTTLE_MS = 2
WAIT = 90 * SLOW


def until(what, pred, app=None, timeout=WAIT):
    """Polls pred() until it returns something true; fails after timeout
    or when app exited."""
    deadline = time.monotonic() + timeout
    while True:
        got = pred()
        if got:
            return got
        if app is not None and app.proc.poll() is not None:
            pytest.fail("StreamsEos exited %s while waiting for %s:\n%s"
                        % (app.proc.returncode, what, app.tail()))
        if time.monotonic() > deadline:
            pytest.fail("no %s within %ss%s" % (
                what, timeout, ":\n" + app.tail() if app else ""))
        time.sleep(0.05)


class App:
    """One run of StreamsEos; stdout lines are JSON."""

    def __init__(self, cp, bootstrap, tmp_path, run, stall_after):
        self.out_path = tmp_path / ("streams-%d.out" % run)
        self.err_path = tmp_path / ("streams-%d.err" % run)
        with open(self.out_path, "w") as out, open(self.err_path, "w") as err:
            self.proc = subprocess.Popen(
                ["java"] + java_harness.FAST_START +
                ["-cp", cp, "cairn.tests.StreamsEos", bootstrap, APP,
                 IN, OUT, str(tmp_path / ("state-%d" % run)),
                 str(stall_after), str(THROTTLE_MS)],
                stdin=subprocess.PIPE, stdout=out, stderr=err, text=True)

    def lines(self):
        # Whole lines only: the last may be half written.
        done = self.out_path.read_text().split("\n")[:-1]
        return [json.loads(x) for x in done if x.startswith("{")]

    def stalled(self):
        return [x for x in self.lines() if "stalled" in x]

    def tail(self):
        return "stdout:\n%s\nstderr:\n%s" % (
            self.out_path.read_text()[-2000:],
            self.err_path.read_text()[-4000:])

    def request_stall(self):
        self.proc.stdin.write("stall\n")
        self.proc.stdin.flush()

    def kill9(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)


@pytest.fixture
def apps():
    started = []
    yield started
    for a in started:
        a.kill9()


def test_streams_exactly_once_under_kill9(broker_factory, tmp_path, apps):
    cp = java_harness.classpath()
    broker = broker_factory(**{
        "group.initial.rebalance.delay.ms": "0",
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": "200"})
    broker.create_topic(IN, PARTS)
    broker.create_topic(OUT, PARTS)
    scenario(cp, broker.bootstrap, broker.port, tmp_path, apps)


def scenario(cp, bootstrap, port, tmp_path, apps):
    """The runs, kills and checks, against the broker at port with IN and
    OUT created."""
    cli = kw.ReadClient(port, timeout=30 * SLOW)
    per_part = N // PARTS
    want = []
    for p in range(PARTS):
        for lo in range(0, per_part, 100):
            ids = ["p%d-%d" % (p, i) for i in range(lo, lo + 100)]
            err, _ = cli.produce(IN, p, kw.record_batch(
                [("v-" + x).encode() for x in ids],
                keys=[("k-" + x).encode() for x in ids]))
            assert err == 0, err
            want += ["v-%s:%s" % (x, s) for x in ids for s in "ab"]

    def committed():
        """The group's committed offsets on IN (-1: none)."""
        top, offs = cli.offset_fetch(APP, {IN: list(range(PARTS))})
        assert top == 0, top
        return [offs[(IN, p)][1] for p in range(PARTS)]

    def progress():
        return sum(max(0, o) for o in committed())

    def open_txn_producers():
        got = cli.describe_producers(OUT, list(range(PARTS)))
        return {pr["producer_id"] for p in range(PARTS)
                for pr in got[p][1] if pr["current_txn_start_offset"] >= 0}

    killed_open = set()     # producers left with an open transaction
    kills = []
    t0 = time.monotonic()
    phases = []             # (what, seconds since t0), printed for -s

    def phase(what):
        phases.append((what, round(time.monotonic() - t0, 1)))
    for run, threshold in enumerate((N // 4, N // 2)):
        app = App(cp, bootstrap, tmp_path, run, STALL_AFTER)
        apps.append(app)
        until("running", lambda: {"state": "RUNNING"} in app.lines(), app)
        phase("run %d running" % run)
        until("committed progress to %d" % threshold,
              lambda: progress() >= threshold or app.stalled(), app)
        asked = not app.stalled()
        if asked:
            app.request_stall()
        until("stall", app.stalled, app)
        # The stalled transaction's records in OUT's log, still open.
        fresh = until("open transaction in %s" % OUT,
                      lambda: open_txn_producers() - killed_open, app)
        kills.append({"committed": progress(), "asked": asked,
                      "stalled": app.stalled()[0]})
        app.kill9()
        phase("run %d killed" % run)
        killed_open |= fresh

    app = App(cp, bootstrap, tmp_path, 2, 0)
    apps.append(app)
    until("running", lambda: {"state": "RUNNING"} in app.lines(), app)
    phase("run 2 running")
    until("committed offsets at %s's end" % IN,
          lambda: committed() == [per_part] * PARTS, app, timeout=2 * WAIT)

    def settled():
        # Every transaction on OUT ended: the killed ones aborted by the
        # coordinator's timeout, the last run's committed.
        for p in range(PARTS):
            err, hw = cli.list_offset_iso(OUT, p, kw.READ_UNCOMMITTED)
            err2, lso = cli.list_offset_iso(OUT, p, kw.READ_COMMITTED)
            if err or err2 or hw != lso:
                return False
        return not open_txn_producers()
    phase("run 2 done")
    until("every transaction on %s ended" % OUT, settled, app)
    app.kill9()
    phase("settled")

    res = java_harness.run_java(cp, "cairn.tests.ReadBack",
                                [bootstrap, OUT, PARTS], 120 * SLOW,
                                tmp_path / "readback.err",
                                java_harness.FAST_START)
    assert res.returncode == 0, (tmp_path / "readback.err").read_text()
    out = json.loads(res.stdout.splitlines()[-1])
    phase("read back")
    print("kills:", kills, "phases:", phases)
    rc = collections.Counter(r["value"] for r in
                             out["read_committed"]["records"])
    ru = collections.Counter(r["value"] for r in
                             out["read_uncommitted"]["records"])
    expected = collections.Counter(want)
    lost = expected - rc
    dup = rc - expected
    assert not lost and not dup, (
        "read_committed: %d lost (e.g. %s), %d extra (e.g. %s)"
        % (sum(lost.values()), list(lost)[:5], sum(dup.values()),
           list(dup)[:5]))
    # The killed transactions' records are in the log, aborted: copies
    # of records the next run wrote again.
    aborted = ru - rc
    assert not (rc - ru)
    assert set(aborted) <= set(expected), list(set(aborted) - set(expected))
    assert sum(aborted.values()) >= len(kills), (kills, aborted)
    assert len(killed_open) >= len(kills)


CIN, COUT, CAPP = "sc-in", "sc-out", "sc-app"
CKEYS, CPER = 20, 30       # 20 keys, 30 records each


def test_streams_state_store_restored_after_kill9(broker_factory, tmp_path,
                                                  apps):
    """tests/java StreamsCount (count per key in an in-memory store under
    exactly_once_v2; its changelog a compacted topic Streams creates)
    killed with SIGKILL half way, after the cleaner cleaned the changelog;
    restarted with an empty state dir it restores the counts from the
    changelog alone: every key's last committed output is its exact
    count, nothing counted twice or lost."""
    from test_compacted import metrics
    cp = java_harness.classpath()
    broker = broker_factory(**{
        "group.initial.rebalance.delay.ms": "0",
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": "200",
        "log.cleaner.backoff.ms": "50",
        "log.cleaner.min.cleanable.ratio": "0.01",
        "log.segment.bytes": "2048"})
    broker.create_topic(CIN, 1)
    broker.create_topic(COUT, 1)
    cli = kw.ReadClient(broker.port, timeout=30 * SLOW)
    for lo in range(0, CKEYS * CPER, 100):
        keys = [b"k%02d" % (i % CKEYS) for i in range(lo, lo + 100)]
        err, _ = cli.produce(CIN, 0, kw.record_batch(
            [b"v"] * len(keys), keys=keys))
        assert err == 0, err
    total = CKEYS * CPER

    def committed():
        top, offs = cli.offset_fetch(CAPP, {CIN: [0]})
        assert top == 0, top
        return offs[(CIN, 0)][1]

    def run(n, throttle_ms):
        a = StreamsCountApp(cp, broker.bootstrap, tmp_path, n, throttle_ms)
        apps.append(a)
        until("running", lambda: {"state": "RUNNING"} in a.lines(), a)
        return a

    first = run(0, 10)
    until("a third of the input committed and a cleaner pass",
          lambda: committed() >= total // 3 and
          metrics(broker).get("cairn_cleaner_passes_total", 0) >= 1, first)
    first.kill9()
    # Killed half way: the rest must count on from the restored state.
    assert committed() < total
    second = run(1, 0)
    until("the input committed", lambda: committed() == total, second,
          timeout=2 * WAIT)
    # Every transaction ended (the killed one by its timeout).
    until("LSO at the high watermark", lambda: cli.list_offset_iso(
        COUT, 0, kw.READ_UNCOMMITTED) == cli.list_offset_iso(
        COUT, 0, kw.READ_COMMITTED), second)
    from confluent_kafka import Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "sc",
                  "isolation.level": "read_committed",
                  "auto.offset.reset": "earliest"})
    last = {}
    try:
        _, hi = c.get_watermark_offsets(TopicPartition(COUT, 0), timeout=10)
        c.assign([TopicPartition(COUT, 0, 0)])
        deadline = time.monotonic() + WAIT
        while len(last) < CKEYS or any(v != str(CPER).encode()
                                       for v in last.values()):
            assert time.monotonic() < deadline, last
            for m in c.consume(500, 0.2):
                if not m.error():
                    last[m.key()] = m.value()
            if c.position([TopicPartition(COUT, 0)])[0].offset >= hi:
                break
    finally:
        c.close()
    assert last == {b"k%02d" % k: str(CPER).encode() for k in range(CKEYS)}
    m = metrics(broker)
    changelog = [k for k in m if k.startswith(
        "cairn_cleaner_partition_dirty_ratio") and "counts-changelog" in k]
    assert changelog, [k for k in m if "dirty_ratio" in k]


class StreamsCountApp(App):
    def __init__(self, cp, bootstrap, tmp_path, run, throttle_ms):
        self.out_path = tmp_path / ("count-%d.out" % run)
        self.err_path = tmp_path / ("count-%d.err" % run)
        with open(self.out_path, "w") as out, open(self.err_path, "w") as err:
            self.proc = subprocess.Popen(
                ["java"] + java_harness.FAST_START +
                ["-cp", cp, "cairn.tests.StreamsCount", bootstrap, CAPP,
                 CIN, COUT, str(tmp_path / ("count-state-%d" % run)),
                 str(throttle_ms)],
                stdin=subprocess.PIPE, stdout=out, stderr=err, text=True)
