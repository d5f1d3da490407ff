"""The group coordinator follows leadership of __consumer_offsets
partitions (issue #15).

A consumer group commits offsets on a three-broker cluster whose
__consumer_offsets has RF 3; the broker coordinating the group (the
leader of the group's __consumer_offsets partition) is killed (-9).
Another broker takes that partition over and loads it from its own log
(the state it held from its start would miss every commit made since): a
new consumer of the same group resumes exactly at the committed offsets
(nothing read twice, nothing skipped), and what it commits lands on the
new coordinator.  The old coordinator then comes back, the new one is
killed in turn: whoever leads the partition next again serves the latest
commits.

Every broker is killed by pid at teardown (cluster_factory); every wait
is bounded and waits for a condition.
"""

import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from conftest import SLOW, find_coordinator, needs_cairn, wait_until
from test_cluster_txn import PARTS, create_spread

pytestmark = [needs_cairn]

REGISTER_S = 30 * SLOW
FAILOVER_S = 40 * SLOW
T = 30 * SLOW
OFFSETS_TOPIC = "__consumer_offsets"
SETS = {"offsets.topic.num.partitions": "3",
        "offsets.topic.replication.factor": "3",
        "group.initial.rebalance.delay.ms": "0",
        "replica.lag.time.max.ms": "3000"}
TOPIC = "gf-data"
GROUP = "gf-group"
PER = 10  # records per partition


def coordinator(c, group):
    """The node every live node names as group's coordinator, or None
    while they disagree or answer an error."""
    seen = set()
    for b in c.live():
        err, node = find_coordinator(b.port, group, key_type=0)
        if err:
            return None
        seen.add(node)
    return seen.pop() if len(seen) == 1 else None


def offsets_replicas(c):
    """{partition: (leader, replicas, isr)} of __consumer_offsets."""
    a = AdminClient({"bootstrap.servers": ",".join(
        b.bootstrap for b in c.live())})
    md = a.list_topics(OFFSETS_TOPIC, timeout=10)
    t = md.topics.get(OFFSETS_TOPIC)
    if t is None or t.error is not None or not t.partitions:
        return None
    return {p: (pm.leader, sorted(pm.replicas), sorted(pm.isrs))
            for p, pm in t.partitions.items()}


def consumer(c, **extra):
    conf = {"bootstrap.servers": ",".join(b.bootstrap for b in c.live()),
            "group.id": GROUP, "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 10000,
            "socket.timeout.ms": 5000 * SLOW}
    conf.update(extra)
    return Consumer(conf)


def consume(cons, n, timeout):
    """n records as (partition, offset, value), polled within timeout."""
    out = []
    deadline = time.monotonic() + timeout
    while len(out) < n and time.monotonic() < deadline:
        m = cons.poll(0.5)
        if m is None:
            continue
        assert not m.error(), m.error()
        out.append((m.partition(), m.offset(), m.value()))
    assert len(out) == n, "read %d of %d records" % (len(out), n)
    return out


def commit_next(cons, got):
    """Commits, synchronously, the offset after the last record read of
    every partition in got; returns {partition: offset}."""
    nxt = {}
    for p, off, _ in got:
        nxt[p] = max(nxt.get(p, 0), off + 1)
    cons.commit(offsets=[TopicPartition(TOPIC, p, o) for p, o in nxt.items()],
                asynchronous=False)
    return nxt


def committed(cons):
    tps = cons.committed([TopicPartition(TOPIC, p) for p in range(PARTS)],
                         timeout=T)
    return {tp.partition: tp.offset for tp in tps if tp.offset >= 0}


def kill_coordinator(c):
    """Kills -9 the group's coordinator once every live node agrees on it;
    then waits for the survivors to agree on another one.  Returns (old,
    new)."""
    old = wait_until("a coordinator for %s" % GROUP,
                     lambda: coordinator(c, GROUP), FAILOVER_S)
    c.kill9(old)
    new = wait_until("a new coordinator for %s, not node %d" % (GROUP, old),
                     lambda: (lambda n: n if n and n != old else None)(
                         coordinator(c, GROUP)), FAILOVER_S)
    return old, new


def test_group_resumes_on_the_new_coordinator(cluster_factory):
    c = cluster_factory(3, **SETS)
    c.wait_registered([1, 2, 3], REGISTER_S)
    create_spread(c, TOPIC)
    # The first lookup has the controller create __consumer_offsets.
    wait_until("a coordinator for %s" % GROUP,
               lambda: coordinator(c, GROUP), REGISTER_S)
    md = wait_until("%s described" % OFFSETS_TOPIC,
                    lambda: offsets_replicas(c), REGISTER_S)
    rf = min(len(r) for _, r, _ in md.values())
    if rf < 3:
        pytest.skip("%s has RF %d here: a failover of its leader cannot "
                    "keep the group's offsets until it gets RF 3"
                    % (OFFSETS_TOPIC, rf))
    wait_until("every %s replica in sync" % OFFSETS_TOPIC,
               lambda: all(len(isr) == 3 for _, _, isr in
                           offsets_replicas(c).values()), FAILOVER_S)

    p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all"})
    for i in range(PER * PARTS):
        p.produce(TOPIC, value=b"v-%d" % i, partition=i % PARTS)
    assert p.flush(T) == 0
    every = {(q, o) for q in range(PARTS) for o in range(PER)}

    # First consumer: half the records, committed, then a clean leave.
    first = consumer(c)
    first.subscribe([TOPIC])
    got1 = consume(first, PER * PARTS // 2, T)
    want1 = commit_next(first, got1)
    assert committed(first) == want1
    first.close()
    # The commits are on the coordinator's followers too before it dies.
    wait_until("every %s replica in sync" % OFFSETS_TOPIC,
               lambda: all(len(isr) == 3 for _, _, isr in
                           offsets_replicas(c).values()), FAILOVER_S)

    old, new = kill_coordinator(c)

    # Second consumer, same group, on the new coordinator: it starts at the
    # committed offsets (the new leader loaded them from its log).
    second = consumer(c)
    assert wait_until("the committed offsets on node %d" % new,
                      lambda: committed(second) == want1 or None,
                      FAILOVER_S)
    second.subscribe([TOPIC])
    rest = len(every) - len(got1)
    got2 = consume(second, rest, FAILOVER_S)
    read = [(q, o) for q, o, _ in got1 + got2]
    assert len(read) == len(set(read)), "a record was read twice"
    assert set(read) == every, "records skipped: %r" % (every - set(read))
    assert coordinator(c, GROUP) == new
    commit_next(second, got2)
    want2 = {q: PER for q in range(PARTS)}
    assert committed(second) == want2
    second.close()

    # The old coordinator comes back and catches up; the new one goes.
    # Whoever leads the partition next serves the commits made on `new`.
    c.node(old).start()
    c.wait_registered([1, 2, 3], REGISTER_S)
    wait_until("every %s replica in sync" % OFFSETS_TOPIC,
               lambda: all(len(isr) == 3 for _, _, isr in
                           offsets_replicas(c).values()), FAILOVER_S)
    _, third_node = kill_coordinator(c)
    third = consumer(c)
    assert wait_until("the offsets committed on node %d, on node %d"
                      % (new, third_node),
                      lambda: committed(third) == want2 or None, FAILOVER_S)
    third.subscribe([TOPIC])
    m = third.poll(3 * SLOW)
    assert m is None or m.error(), "read past the committed end: %r" % (
        (m.partition(), m.offset()),)
    third.close()
