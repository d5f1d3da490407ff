"""A rolling restart of a three-broker cluster (issue #14): SIGTERM is a
controlled shutdown, so leadership moves away before each broker stops
and an idempotent acks=all producer writing the whole time sees no error
it cannot retry, loses nothing and duplicates nothing.  Every broker is
killed by pid at teardown (cluster_factory); every wait is bounded."""

import threading
import time

from confluent_kafka import Consumer, KafkaException, Producer, \
    TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from conftest import SLOW, needs_cairn, wait_until

pytestmark = [needs_cairn]

REGISTER_S = 30 * SLOW
PARTS = 3


def isr_full(c, topic):
    """True when every live broker's Metadata gives each partition a
    leader and all three replicas in the ISR."""
    for b in c.live():
        try:
            md = AdminClient({"bootstrap.servers": b.bootstrap}).list_topics(
                topic, timeout=5)
        except KafkaException:
            return False
        t = md.topics.get(topic)
        if t is None or t.error is not None or len(t.partitions) != PARTS:
            return False
        for p in t.partitions.values():
            if p.leader < 0 or len(p.isrs) != 3:
                return False
    return True


def test_rolling_restart_loses_nothing(cluster_factory):
    c = cluster_factory(3, **{"replica.lag.time.max.ms": "3000"})
    c.wait_registered([1, 2, 3], REGISTER_S)
    a = AdminClient({"bootstrap.servers": c.bootstrap})
    fs = a.create_topics([NewTopic("roll", num_partitions=PARTS,
                                   replication_factor=3,
                                   config={"min.insync.replicas": "2"})],
                         operation_timeout=30)
    fs["roll"].result(timeout=60)
    wait_until("roll fully in sync", lambda: isr_full(c, "roll"),
               REGISTER_S)

    acked, errors = [], []
    stop = threading.Event()

    def cb(err, msg):
        if err is None:
            acked.append((msg.partition(), msg.value()))
        else:
            errors.append(err)

    def produce():
        p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all",
                      "enable.idempotence": True, "linger.ms": 5,
                      "message.timeout.ms": 120000})
        i = 0
        while not stop.is_set():
            p.produce("roll", value=b"r-%d" % i, partition=i % PARTS,
                      on_delivery=cb)
            i += 1
            p.poll(0.002)
        assert p.flush(150) == 0
    t = threading.Thread(target=produce)
    t.start()
    try:
        for node in (1, 2, 3):
            time.sleep(1.0)
            # A controlled shutdown ends within Broker.stop's wait (exit 0),
            # well before the 30 s cap.
            assert c.stop(node) == 0, "node %d did not stop cleanly" % node
            # It stopped because the controller had moved its leaderships
            # away, not because it gave up waiting.
            with open(c.node(node).log_path, errors="replace") as f:
                log = f.read()
            assert ("the controller approved the shutdown of node %d" % node
                    in log), c.node(node).log_tail()
            c.node(node).start()
            c.wait_registered([1, 2, 3], REGISTER_S)
            wait_until("roll back in sync after node %d" % node,
                       lambda: isr_full(c, "roll"), REGISTER_S)
        time.sleep(1.0)
    finally:
        stop.set()
        t.join(200)
    assert not errors, "producer errors: %r" % errors[:5]
    assert len(acked) > 100

    # Every acknowledged record once, in the order it was acknowledged
    # per partition.
    cons = Consumer({"bootstrap.servers": c.bootstrap, "group.id": "roll",
                     "enable.auto.commit": False,
                     "enable.partition.eof": True})
    cons.assign([TopicPartition("roll", p, 0) for p in range(PARTS)])
    got = {p: [] for p in range(PARTS)}
    eof = set()
    deadline = time.monotonic() + 60 * SLOW
    try:
        while len(eof) < PARTS and time.monotonic() < deadline:
            for m in cons.consume(num_messages=1000, timeout=0.5):
                if m.error() is None:
                    got[m.partition()].append(m.value())
                    eof.discard(m.partition())
                elif m.error().code() == -191:  # _PARTITION_EOF
                    eof.add(m.partition())
    finally:
        cons.close()
    for p in range(PARTS):
        want = [v for q, v in acked if q == p]
        assert got[p] == want, (
            "partition %d: %d records read, %d acknowledged; first "
            "difference at %r" % (p, len(got[p]), len(want), next(
                (i for i, (x, y) in enumerate(zip(got[p], want)) if x != y),
                min(len(got[p]), len(want)))))
