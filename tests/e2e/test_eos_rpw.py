"""Exactly-once read-process-write: consumed offsets committed inside the
producer's transaction (AddOffsetsToTxn + TxnOffsetCommit).

test_txn_offsets_visibility checks the offsets alone: pending while the
transaction is open (OffsetFetch require_stable answers
UNSTABLE_OFFSET_COMMIT, plain OffsetFetch the old offset), visible after
the commit, dropped on abort.

test_read_process_write_exactly_once runs rpw_app.py over 2000 input
records while killing the app (SIGKILL) and the broker (kill -9) at
random moments, then checks that the output topic, read read_committed,
holds every input exactly once and in input order per partition, and
that the group's committed offsets are the input's end offsets.
"""

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from confluent_kafka import (Consumer, KafkaException, Producer,
                             TopicPartition)

import kafka_wire as kw
from conftest import SLOW, needs_cairn

pytestmark = needs_cairn

T = 15 * SLOW
FAST_GROUPS = {"group.initial.rebalance.delay.ms": "0"}
APP = Path(__file__).resolve().parent / "rpw_app.py"
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") \
    else sys.executable


def offset_fetch(cli, group, topic, part, stable):
    """(error, offset): the partition's error, or the top-level one if
    the partition has none."""
    top, parts = cli.offset_fetch(group, {topic: [part]}, stable)
    err, off = parts.get((topic, part), (0, None))
    return (err or top), off


def wait_offset(cli, group, topic, part, want, timeout=10 * SLOW):
    deadline = time.monotonic() + timeout
    while True:
        got = offset_fetch(cli, group, topic, part, True)
        if got == (0, want) or time.monotonic() > deadline:
            return got
        time.sleep(0.1)


def test_txn_offsets_visibility(broker_factory):
    broker = broker_factory(**FAST_GROUPS)
    broker.create_topic("offs-in", 1)
    broker.create_topic("offs-out", 1)
    group = "grp-offs"
    prod = Producer({"bootstrap.servers": broker.bootstrap,
                     "transactional.id": "tx-offs", "linger.ms": 0})
    cons = Consumer({"bootstrap.servers": broker.bootstrap,
                     "group.id": group, "enable.auto.commit": False})
    cli = kw.ReadClient(broker.port)
    try:
        prod.init_transactions(T)
        prod.begin_transaction()
        prod.produce("offs-out", value=b"x", partition=0)
        prod.send_offsets_to_transaction(
            [TopicPartition("offs-in", 0, 5)],
            cons.consumer_group_metadata(), T)
        assert prod.flush(T) == 0
        # Pending: require_stable refuses, a plain fetch sees nothing yet.
        assert offset_fetch(cli, group, "offs-in", 0, True)[0] == \
            kw.UNSTABLE_OFFSET_COMMIT
        assert offset_fetch(cli, group, "offs-in", 0, False) == (0, -1)
        prod.commit_transaction(T)
        assert wait_offset(cli, group, "offs-in", 0, 5) == (0, 5)
        assert offset_fetch(cli, group, "offs-in", 0, False) == (0, 5)
        got = cons.committed([TopicPartition("offs-in", 0)], timeout=T)
        assert got[0].offset == 5, got

        # An aborted transaction's offsets are dropped.
        prod.begin_transaction()
        prod.send_offsets_to_transaction(
            [TopicPartition("offs-in", 0, 9)],
            cons.consumer_group_metadata(), T)
        assert offset_fetch(cli, group, "offs-in", 0, True)[0] == \
            kw.UNSTABLE_OFFSET_COMMIT
        assert offset_fetch(cli, group, "offs-in", 0, False) == (0, 5)
        prod.abort_transaction(T)
        assert wait_offset(cli, group, "offs-in", 0, 5) == (0, 5)
        # And they stay dropped across a restart.
        cli.close()
        broker.kill9()
        broker.unexpected_exit = None
        broker.start()
        cli = kw.ReadClient(broker.port)
        assert wait_offset(cli, group, "offs-in", 0, 5) == (0, 5)
    finally:
        cons.close()
        cli.close()


# ---------------------------------------------------------------------------

class App:
    """rpw_app.py runs, one log file each; every one is killed by pid."""

    def __init__(self, argv, logdir):
        self.argv = argv
        self.logdir = logdir
        self.runs = []              # (proc, log path)

    def start(self):
        path = self.logdir / ("rpw-%d.log" % len(self.runs))
        with open(path, "wb") as log:
            proc = subprocess.Popen([PYTHON, str(APP)] + self.argv,
                                    stdin=subprocess.DEVNULL, stdout=log,
                                    stderr=subprocess.STDOUT)
        self.runs.append((proc, path))

    @property
    def proc(self):
        return self.runs[-1][0]

    def log(self, i=-1):
        try:
            return self.runs[i][1].read_text(errors="replace")
        except OSError:
            return ""

    def ensure_running(self):
        if self.proc.poll() is not None:
            print("app run %d exited %s; restarting" % (
                len(self.runs) - 1, self.proc.returncode))
            self.start()

    def kill(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)

    def kill_all(self):
        for proc, _ in self.runs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)

    def tails(self, n=15):
        out = []
        for i, (proc, _) in enumerate(self.runs):
            # Our own lines, not librdkafka's "%3|..." log lines.
            lines = [ln for ln in self.log(i).splitlines()
                     if not ln.startswith("%")]
            out.append("--- run %d (exit %s):\n%s" % (
                i, proc.poll(), "\n".join(lines[-n:])))
        return "\n".join(out)


def read_all_committed(bootstrap, topic, parts, expect, timeout):
    """{partition: [values]} of a read_committed consumer from the start,
    once expect records arrived and nothing more for 1.5 s."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "rpw-check",
                  "enable.auto.commit": False,
                  "isolation.level": "read_committed",
                  "enable.partition.eof": False})
    out = {p: [] for p in range(parts)}
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(parts)])
        deadline = time.monotonic() + timeout
        last = time.monotonic()
        while time.monotonic() < deadline:
            msgs = c.consume(500, 0.2)
            for m in msgs:
                if m.error() is None:
                    out[m.partition()].append(m.value())
            if msgs:
                last = time.monotonic()
            n = sum(len(v) for v in out.values())
            if n >= expect and time.monotonic() - last > 1.5:
                break
        return out
    finally:
        c.close()


def test_read_process_write_exactly_once(broker_factory, tmp_path):
    t_start = time.monotonic()
    broker = broker_factory(**FAST_GROUPS)
    # Not scaled down under the sanitizers: the app's own pace (20
    # records per transaction, 0.1 s apart) is what keeps the kills
    # landing mid-run, whatever the broker's speed.
    parts, n = 3, 2000
    src, dst, group, tid = "rpw-in", "rpw-out", "grp-rpw", "tx-rpw"
    broker.create_topic(src, parts)
    broker.create_topic(dst, parts)
    inputs = {p: [] for p in range(parts)}
    prod = Producer({"bootstrap.servers": broker.bootstrap,
                     "enable.idempotence": True, "linger.ms": 5})
    for i in range(n):
        v = b"in-%05d" % i
        inputs[i % parts].append(v)
        prod.produce(src, value=v, partition=i % parts)
    assert prod.flush(T) == 0
    ends = {p: len(vs) for p, vs in inputs.items()}

    seed = int(os.environ.get("CAIRN_RPW_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    plan = ["app", "app", "broker", "app", "app"]
    rng.shuffle(plan)
    print("seed %d (CAIRN_RPW_SEED), plan %s" % (seed, plan))

    app = App([broker.bootstrap, src, dst, group, tid, "--batch", "20",
               "--sleep", "0.1", "--max-seconds", str(150 * SLOW)],
              tmp_path)
    checker = Consumer({"bootstrap.servers": broker.bootstrap,
                        "group.id": group, "enable.auto.commit": False,
                        "isolation.level": "read_uncommitted"})

    def progress():
        """{partition: committed offset} of the group, or None."""
        try:
            got = checker.committed([TopicPartition(src, p)
                                     for p in range(parts)], timeout=5)
        except KafkaException:
            return None
        return {tp.partition: tp.offset for tp in got}

    def commits_in_run():
        return app.log().count("committed ")

    budget = 110 * SLOW
    mid_run = 0
    try:
        app.start()
        for ev in plan:
            # Let this run make some progress, then strike at a random
            # moment.
            deadline = min(time.monotonic() + 25 * SLOW,
                           t_start + budget - 40 * SLOW)
            while commits_in_run() == 0 and time.monotonic() < deadline:
                app.ensure_running()
                time.sleep(0.1)
            time.sleep(rng.uniform(0.1, 1.5))
            now = progress()
            if now == ends:
                print("input fully processed before %s kill" % ev)
                break
            mid_run += 1
            print("%.1fs: kill %s, progress %s" % (
                time.monotonic() - t_start, ev, now))
            if ev == "app":
                app.kill()
                app.start()
            else:
                broker.kill9()
                broker.unexpected_exit = None
                broker.start()
                app.ensure_running()
        # Let it finish.
        deadline = t_start + budget - 15
        now = None
        while time.monotonic() < deadline:
            app.ensure_running()
            now = progress()
            if now == ends:
                break
            time.sleep(0.3)
        assert now == ends, "committed offsets %s, input ends %s\n%s" % (
            now, ends, app.tails())
        assert mid_run >= 3, "only %d kills landed mid-run" % mid_run
    finally:
        app.kill_all()
        checker.close()
    print("%d app runs, %d kills mid-run, done after %.1fs" % (
        len(app.runs), mid_run, time.monotonic() - t_start))

    out = read_all_committed(broker.bootstrap, dst, parts, n, 15 * SLOW)
    want = Counter(b"out-" + v for vs in inputs.values() for v in vs)
    got = Counter(v for vs in out.values() for v in vs)
    dups = sorted(v for v, c in got.items() if c > 1)
    missing = sorted(v for v in want if v not in got)
    extra = sorted(v for v in got if v not in want)
    assert not dups and not missing and not extra, \
        "%d duplicated (%r...), %d missing (%r...), %d unexpected\n%s" % (
            len(dups), dups[:5], len(missing), missing[:5], len(extra),
            app.tails())
    # Same partition in and out: the committed output keeps input order.
    for p in range(parts):
        assert out[p] == [b"out-" + v for v in inputs[p]], p
    assert progress_after(broker, group, src, parts) == ends


def progress_after(broker, group, topic, parts):
    """Committed offsets as a read_committed consumer reads them
    (OffsetFetch with require_stable)."""
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                  "enable.auto.commit": False,
                  "isolation.level": "read_committed"})
    try:
        got = c.committed([TopicPartition(topic, p) for p in range(parts)],
                          timeout=T)
        return {tp.partition: tp.offset for tp in got}
    finally:
        c.close()
