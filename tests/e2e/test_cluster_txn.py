"""Transactions across three brokers (issue #15): one transaction writes to
partitions led by three different brokers, so its markers go to two
remote leaders besides (perhaps) the coordinator's own broker; commit and
abort must give read_committed consumers exactly the committed records,
in order, and the last stable offset (ListOffsets read_committed) must
stop at an open transaction and move past it once it ends.  Clients:
librdkafka (confluent_kafka), kafkajs (tests/e2e/js/cluster_txn.js) and
the Java client (cairn.tests.Transactions, release builds only).

The topic "xo" is placed by hand, partition p led by node p + 1, RF 3 and
min.insync.replicas 2.  Every broker is killed by pid at teardown
(cluster_factory); every wait is bounded and waits for a condition.
"""

import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import kafka_wire as kw
from conftest import SANITIZED, SLOW, TXN_STATE_TOPIC, needs_cairn, \
    partition_leaders, run, wait_txn_state_led, wait_until

pytestmark = [needs_cairn]

REGISTER_S = 30 * SLOW
T = 30 * SLOW                   # a client call's timeout, seconds
PARTS = 3
JS_DIR = Path(__file__).resolve().parent / "js"
COMMIT, ABORT = kw.CONTROL_COMMIT, kw.CONTROL_ABORT


def create_spread(c, topic, parts=PARTS):
    """topic with partition p led by node p % 3 + 1 (the others follow),
    every replica in sync and every live node agreeing on it."""
    assignment = [[(p + i) % 3 + 1 for i in range(3)] for p in range(parts)]
    a = AdminClient({"bootstrap.servers": c.bootstrap})
    fs = a.create_topics([NewTopic(topic, num_partitions=parts,
                                   replica_assignment=assignment,
                                   config={"min.insync.replicas": "2"})],
                         operation_timeout=30)
    fs[topic].result(timeout=60)
    want = {p: assignment[p][0] for p in range(parts)}
    wait_until("%s led as placed (%r) on every node" % (topic, want),
               lambda: all(partition_leaders(b.port, topic) == want
                           for b in c.live()), REGISTER_S)
    return want


def txn_cluster(cluster_factory, **sets):
    c = cluster_factory(3, **{"group.initial.rebalance.delay.ms": "0"},
                        **sets)
    c.wait_registered([1, 2, 3], REGISTER_S)
    return c


def read_committed(bootstrap, topic, parts, want, timeout=60 * SLOW,
                   isolation="read_committed"):
    """{partition: [values]} from offset 0 until every partition reached
    its end (partition EOF) and at least want records arrived."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "chk-" + topic,
                  "enable.auto.commit": False,
                  "isolation.level": isolation,
                  "enable.partition.eof": True})
    out = {p: [] for p in range(parts)}
    eof = set()
    c.assign([TopicPartition(topic, p, 0) for p in range(parts)])
    deadline = time.monotonic() + timeout
    try:
        while True:
            for m in c.consume(num_messages=500, timeout=0.3):
                if m.error() is None:
                    out[m.partition()].append(m.value())
                    eof.discard(m.partition())
                elif m.error().code() == KafkaError._PARTITION_EOF:
                    eof.add(m.partition())
            n = sum(len(v) for v in out.values())
            if len(eof) == parts and n >= want:
                return out
            if time.monotonic() > deadline:
                pytest.fail("%s %s: %d of %d records, EOF on %s within "
                            "%ss: %r" % (isolation, topic, n, want,
                                         sorted(eof), timeout, out))
    finally:
        c.close()


def leader_port(c, topic, part):
    """The port of the node leading topic-part, as the first live node
    answers."""
    led = partition_leaders(c.live()[0].port, topic)
    return c.node(led[part]).port


def lso(c, topic, part):
    """(read_committed offset, high watermark) of ListOffsets v2 at the
    partition's leader; raises ValueError on an error code."""
    cli = kw.ReadClient(leader_port(c, topic, part), timeout=5)
    try:
        e1, stable = cli.list_offset_iso(topic, part, kw.READ_COMMITTED)
        e2, hw = cli.list_offset_iso(topic, part, kw.READ_UNCOMMITTED)
    finally:
        cli.close()
    if e1 or e2:
        raise ValueError("ListOffsets errors %d/%d" % (e1, e2))
    return stable, hw


def wait_offsets(c, topic, cond, what, timeout=T):
    """Waits until cond(partition, (LSO, high watermark)) holds for every
    partition; returns {partition: (LSO, HW)}, or fails showing the last
    ones."""
    def check():
        s = {q: lso(c, topic, q) for q in range(PARTS)}
        if all(cond(q, v) for q, v in s.items()):
            return s
        raise ValueError("(LSO, HW) by partition: %r" % s)
    return wait_until(what, check, timeout)


def marker_kinds(c, topic, part):
    """The control types of the partition's markers, in log order, read
    from its leader."""
    cli = kw.TxnClient(leader_port(c, topic, part), timeout=5)
    try:
        batches = cli.fetch_full(topic, part)
    finally:
        cli.close()
    return [b["control"][0] for b in batches
            if b["attributes"] & kw.ATTR_CONTROL and b["control"]]


def test_librdkafka_commit_abort_three_leaders(cluster_factory):
    c = txn_cluster(cluster_factory)
    topic = "xo"
    create_spread(c, topic)
    p = Producer({"bootstrap.servers": c.bootstrap,
                  "transactional.id": "xo-rdk", "linger.ms": 5})
    p.init_transactions(T)
    led = wait_txn_state_led(c, REGISTER_S)
    print("__transaction_state leaders by node: %r"
          % {n: sum(1 for v in led.values() if v == n) for n in (1, 2, 3)})

    def txn(tag, commit, per=4):
        p.begin_transaction()
        for i in range(per * PARTS):
            p.produce(topic, value=b"%s-%d" % (tag, i), partition=i % PARTS)
        # Flushed first, so an aborted transaction's records are in the
        # log too (abort_transaction purges what is still queued).
        assert p.flush(T) == 0
        if commit:
            p.commit_transaction(T)
        else:
            p.abort_transaction(T)

    txn(b"c1", True)
    txn(b"a1", False)
    txn(b"c2", True)

    # An open transaction holds every partition's LSO below its records.
    # Each partition: 4 records and a marker per transaction.  The LSO
    # may be read before the last marker is below the high watermark:
    # wait for the whole log.
    before = wait_offsets(c, topic, lambda q, s: s == (15, 15),
                          "LSO = high watermark = 15 on every partition "
                          "after three ended transactions")
    p.begin_transaction()
    for i in range(PARTS):
        p.produce(topic, value=b"open-%d" % i, partition=i)
    assert p.flush(T) == 0
    wait_offsets(c, topic, lambda q, s: s[1] > before[q][1] and
                 s[0] == before[q][0], "open transaction's records above "
                 "the LSO (%r before) on every partition" % before)
    seen = read_committed(c.bootstrap, topic, PARTS, 8 * PARTS)
    assert all(b"open-%d" % q not in seen[q] for q in range(PARTS)), seen
    p.commit_transaction(T)
    wait_offsets(c, topic, lambda q, s: s[0] == s[1] and
                 s[0] > before[q][1] + 1, "LSO past the committed "
                 "transaction on every partition")

    got = read_committed(c.bootstrap, topic, PARTS, 9 * PARTS)
    for q in range(PARTS):
        want = [b"%s-%d" % (tag, i) for tag in (b"c1", b"c2")
                for i in range(4 * PARTS) if i % PARTS == q]
        want.append(b"open-%d" % q)
        assert got[q] == want, "partition %d (led by node %d) read " \
            "committed %r, want %r" % (q, q + 1, got[q], want)
        assert marker_kinds(c, topic, q) == [COMMIT, ABORT, COMMIT, COMMIT]
    allrec = read_committed(c.bootstrap, topic, PARTS, 13 * PARTS,
                            isolation="read_uncommitted")
    assert sum(len(v) for v in allrec.values()) == 13 * PARTS, allrec


def npm_ready():
    if not shutil.which("node"):
        return "node not installed"
    if (JS_DIR / "node_modules" / "kafkajs").is_dir():
        return None
    res = subprocess.run(["npm", "ci", "--no-audit", "--no-fund",
                          "--prefix", str(JS_DIR)], cwd=str(JS_DIR),
                         capture_output=True, text=True, timeout=120)
    return None if res.returncode == 0 else "npm ci failed: %s" % \
        res.stderr[-2000:]


def test_kafkajs_commit_abort_three_leaders(cluster_factory):
    why = npm_ready()
    if why:
        pytest.fail(why)
    c = txn_cluster(cluster_factory)
    topic = "xo-js"
    create_spread(c, topic)
    res = run(["node", str(JS_DIR / "cluster_txn.js"), c.bootstrap, topic,
               str(PARTS), "xo-js"], timeout=120 * SLOW)
    assert res.returncode == 0, "cluster_txn.js exited %d:\n%s" % (
        res.returncode, res.stderr[-3000:])
    out = json.loads(res.stdout.strip().splitlines()[-1])
    for q in range(PARTS):
        want = ["%s-%d" % (tag, i) for tag in ("js-c1", "js-c2")
                for i in range(2 * PARTS) if i % PARTS == q]
        assert out["read"].get(str(q)) == want, \
            "partition %d read committed %r, want %r" % (
                q, out["read"].get(str(q)), want)
        assert marker_kinds(c, topic, q) == [COMMIT, ABORT, COMMIT]


@pytest.mark.skipif(SANITIZED or not shutil.which("java"),
                    reason="the Java client runs against the release broker")
def test_java_commit_abort_two_leaders(cluster_factory, tmp_path):
    import java_harness
    from test_java_client import check_transactions, java
    cp = java_harness.classpath()
    c = txn_cluster(cluster_factory)
    # Two partitions (what the program writes) on nodes 2 and 3; node 1
    # leads no partition of the topic.
    a = AdminClient({"bootstrap.servers": c.bootstrap})
    fs = a.create_topics([NewTopic("txn", num_partitions=2,
                                   replica_assignment=[[2, 3, 1], [3, 1, 2]],
                                   config={"min.insync.replicas": "2"})],
                         operation_timeout=30)
    fs["txn"].result(timeout=60)
    wait_until("txn led by nodes 2 and 3 everywhere",
               lambda: all(partition_leaders(b.port, "txn") == {0: 2, 1: 3}
                           for b in c.live()), REGISTER_S)
    out = java(cp, tmp_path, "Transactions", c.bootstrap, "txn", "java-tx")
    check_transactions(out, tv2=True)
    assert partition_leaders(c.node(1).port, TXN_STATE_TOPIC) is not None
