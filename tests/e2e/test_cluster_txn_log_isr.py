"""The transaction log below its min ISR (issue #15): "With fewer than the
minimum in-sync replicas on a __transaction_state partition, the
coordinator cannot write state, and every transactional ID hashed there
stops."  Kafka's coordinator then answers COORDINATOR_NOT_AVAILABLE
(TransactionStateManager maps NOT_ENOUGH_REPLICAS to it), which clients
retry; once a replica is back in the ISR the same id works again, and
nothing decided before is lost.

Three brokers with transaction.state.log.min.isr=3, so one broker down is
enough (two down would lose the metadata quorum).  Every wait is bounded;
every broker is killed by pid at teardown (cluster_factory).
"""

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

import kafka_wire as kw
from conftest import SLOW, needs_cairn, txn_id_coordinated_by, \
    txn_partition_for, wait_txn_state_led, wait_until

pytestmark = [needs_cairn]

REGISTER_S = 20 * SLOW
COORDINATOR_NOT_AVAILABLE = 15
TOPIC = "isr-data"


def isr_of(port, topic, part):
    md = AdminClient({"bootstrap.servers": "127.0.0.1:%d" % port}) \
        .list_topics(topic, timeout=5)
    t = md.topics.get(topic)
    if t is None or t.error is not None or part not in t.partitions:
        return None
    return sorted(t.partitions[part].isrs)


def init_producer_id(port, tid):
    """InitProducerId v4 for tid, asked of the broker on port: its error."""
    cli = kw.Client(port, timeout=40.0 * SLOW)
    try:
        body = cli.call(kw.init_producer_id_request, version=4,
                        transactional_id=tid)
    finally:
        cli.close()
    return kw.parse_init_producer_id(body, 4)[1]


def txn_state(port, tid):
    cli = kw.TxnClient(port, timeout=10.0 * SLOW)
    try:
        return cli.describe_transactions([tid])[tid]["state"]
    finally:
        cli.close()


def commit_one(bootstrap, tid, values):
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid,
                  "transaction.timeout.ms": 60000})
    p.init_transactions(60 * SLOW)
    p.begin_transaction()
    for v in values:
        p.produce(TOPIC, v, partition=0)
    p.commit_transaction(60 * SLOW)


def read_committed(bootstrap, want):
    cons = Consumer({"bootstrap.servers": bootstrap, "group.id": "isr-rc",
                     "isolation.level": "read_committed",
                     "enable.auto.commit": False,
                     "auto.offset.reset": "earliest"})
    cons.assign([TopicPartition(TOPIC, 0, 0)])
    got = []
    try:
        def enough():
            for m in cons.consume(num_messages=100, timeout=0.5):
                if m.error() is None:
                    got.append(m.value())
            return len(got) >= want
        wait_until("%d committed records" % want, enough, 30 * SLOW)
        # Nothing more than that comes.
        for m in cons.consume(num_messages=100, timeout=1.0):
            if m.error() is None:
                got.append(m.value())
    finally:
        cons.close()
    return got


def test_txn_log_below_min_isr_stops_then_resumes(cluster_factory):
    c = cluster_factory(**{"transaction.state.log.min.isr": "3",
                           "replica.lag.time.max.ms": "3000"})
    c.wait_registered([1, 2, 3], REGISTER_S)
    leaders = wait_txn_state_led(c, REGISTER_S)
    tid = txn_id_coordinated_by(leaders, 1, "isr")
    part = txn_partition_for(tid)
    coord = c.node(1)
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    fs = admin.create_topics(
        [NewTopic(TOPIC, num_partitions=1, replica_assignment=[[1, 2, 3]])],
        operation_timeout=30)
    fs[TOPIC].result(timeout=60)
    wait_until("__transaction_state-%d with its whole ISR" % part,
               lambda: isr_of(coord.port, "__transaction_state", part) ==
               [1, 2, 3], REGISTER_S)

    commit_one(c.bootstrap, tid, [b"before-1", b"before-2"])
    # EndTxn is answered once PrepareCommit is replicated; the markers and
    # CompleteCommit follow.  Killed before that, the Complete record
    # would wait for the ISR too, and the id would answer
    # CONCURRENT_TRANSACTIONS (busy), not the error this test is about.
    wait_until("%s CompleteCommit" % tid,
               lambda: txn_state(coord.port, tid) == "CompleteCommit",
               30 * SLOW)

    c.kill9(3)
    wait_until("node 3 out of the ISR of __transaction_state-%d" % part,
               lambda: isr_of(coord.port, "__transaction_state", part) ==
               [1, 2], REGISTER_S)
    # Two in-sync replicas, min ISR three: no state change can be written.
    assert init_producer_id(coord.port, tid) == COORDINATOR_NOT_AVAILABLE
    assert "min.insync.replicas is 3" in coord.log_tail(200)

    c.node(3).start()
    wait_until("node 3 back in the ISR of __transaction_state-%d" % part,
               lambda: isr_of(coord.port, "__transaction_state", part) ==
               [1, 2, 3], 60 * SLOW)
    wait_until("InitProducerId for %s answered again" % tid,
               lambda: init_producer_id(coord.port, tid) == 0, 30 * SLOW)

    commit_one(c.bootstrap, tid, [b"after-1"])
    got = read_committed(c.bootstrap, 3)
    assert sorted(got) == [b"after-1", b"before-1", b"before-2"], got
