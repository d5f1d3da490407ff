"""The cluster marker channel (issue #15, src/node/markers_remote.c): a
coordinator whose transaction wrote only to partitions other brokers lead
sends its markers there as WriteTxnMarkers, batched per destination, and
the commit is visible to read_committed consumers once the leaders have
replicated them; /metrics shows Kafka's TransactionMarkerChannelManager
gauges and the channel's counters.

The transactional id is picked so node 1 coordinates it; the topic's two
partitions are led by nodes 2 and 3 (RF 3, min.insync.replicas 2).
"""

import time

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from conftest import SLOW, metrics, needs_cairn, partition_leaders, \
    txn_id_coordinated_by, wait_txn_state_led, wait_until

pytestmark = [needs_cairn]

REGISTER_S = 30 * SLOW
T = 30 * SLOW
GAUGE = "kafka_coordinator_transaction_transactionmarkerchannelmanager_"


def create_led_by(c, topic, leaders):
    """topic with partition p led by leaders[p], every node a replica."""
    assignment = [[l] + [n for n in (1, 2, 3) if n != l] for l in leaders]
    a = AdminClient({"bootstrap.servers": c.bootstrap})
    fs = a.create_topics([NewTopic(topic, num_partitions=len(leaders),
                                   replica_assignment=assignment,
                                   config={"min.insync.replicas": "2"})],
                         operation_timeout=30)
    fs[topic].result(timeout=60)
    want = dict(enumerate(leaders))
    wait_until("%s led as placed (%r) on every node" % (topic, want),
               lambda: all(partition_leaders(b.port, topic) == want
                           for b in c.live()), REGISTER_S)


def read_committed(bootstrap, topic, parts, want):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "chk-" + topic,
                  "enable.auto.commit": False,
                  "isolation.level": "read_committed",
                  "enable.partition.eof": True})
    out = {p: [] for p in range(parts)}
    eof = set()
    c.assign([TopicPartition(topic, p, 0) for p in range(parts)])
    deadline = time.monotonic() + 60 * SLOW
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
            assert time.monotonic() < deadline, \
                "read_committed %s: %d of %d records: %r" % (topic, n, want,
                                                             out)
    finally:
        c.close()


def test_markers_to_remote_leaders(cluster_factory):
    c = cluster_factory(3)
    c.wait_registered([1, 2, 3], REGISTER_S)
    topic = "mk"
    create_led_by(c, topic, [2, 3])
    led = wait_txn_state_led(c, REGISTER_S)
    tid = txn_id_coordinated_by(led, 1, "mk")
    p = Producer({"bootstrap.servers": c.bootstrap,
                  "transactional.id": tid, "linger.ms": 5})
    p.init_transactions(T)
    for tag, commit in ((b"c1", True), (b"a1", False), (b"c2", True)):
        p.begin_transaction()
        for i in range(6):
            p.produce(topic, value=b"%s-%d" % (tag, i), partition=i % 2)
        if commit:
            p.commit_transaction(T)
        else:
            p.abort_transaction(T)
    got = read_committed(c.bootstrap, topic, 2, 12)
    for q in range(2):
        want = [b"%s-%d" % (tag, i) for tag in (b"c1", b"c2")
                for i in range(6) if i % 2 == q]
        assert got[q] == want, (q, got[q], want)

    # Node 1 sent every marker as WriteTxnMarkers (its partitions are
    # led by 2 and 3); nothing waits in its channel afterwards.
    m = metrics(c.node(1))
    assert m[GAUGE + "unknowndestinationqueuesize"] == 0, m
    assert m[GAUGE + "logappendretryqueuesize"] == 0, m
    assert m["cairn_txn_marker_requests_total"] >= 3, m
    assert "cairn_txn_marker_retries_total" in m
    for n in (2, 3):
        assert GAUGE + "unknowndestinationqueuesize" in metrics(c.node(n))

    # A leader dies with a transaction open on it: the commit's marker for
    # its partition fails (connection refused or NOT_LEADER_OR_FOLLOWER),
    # is retried at the new leader, and the commit is still read in full.
    p.begin_transaction()
    for i in range(4):
        p.produce(topic, value=b"c3-%d" % i, partition=i % 2)
    assert p.flush(T) == 0
    c.kill9(3)
    p.commit_transaction(T)
    got = read_committed(c.bootstrap, topic, 2, 16)
    for q in range(2):
        assert got[q][-2:] == [b"c3-%d" % i for i in range(4)
                               if i % 2 == q], (q, got[q])
    m = metrics(c.node(1))
    assert m[GAUGE + "unknowndestinationqueuesize"] == 0, m
    assert m[GAUGE + "logappendretryqueuesize"] == 0, m
    p.flush(T)
    del p
    # The coordinator stops cleanly, its channel with it.
    assert c.stop(1) == 0
