"""A topic deleted and created again while its old partitions are still in
use: a sync round held in flight (the log.fsync=delay fail point) keeps
the deleted topic's directory until the round ends.  The new topic must
not show the old records, and the old directory's removal must not take
the new topic's records with it."""

import time

from confluent_kafka import (Consumer, KafkaError, KafkaException, Producer,
                             TopicPartition)
from confluent_kafka.admin import AdminClient, NewTopic

from conftest import SLOW, needs_cairn

pytestmark = needs_cairn

TOPIC = "recreated"


def produce_one(bootstrap, value):
    p = Producer({"bootstrap.servers": bootstrap, "acks": "1",
                  "linger.ms": 0})
    acked = []
    p.produce(TOPIC, value=value, partition=0,
              on_delivery=lambda err, msg: acked.append(err))
    p.flush(30 * SLOW)
    assert acked == [None], acked


def values(bootstrap, want):
    """The partition's values from the beginning, once its high watermark
    reached want (a held sync round delays it)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "recreate",
                  "enable.auto.commit": False})
    tp = TopicPartition(TOPIC, 0)
    deadline = time.monotonic() + 30 * SLOW
    while True:
        lo, hi = c.get_watermark_offsets(tp, timeout=10)
        if hi >= want or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    c.assign([TopicPartition(TOPIC, 0, lo)])
    out = []
    while len(out) < hi - lo and time.monotonic() < deadline:
        for m in c.consume(100, 0.5):
            if m.error() is None:
                out.append(m.value())
    c.close()
    return out


def test_recreate_while_old_partition_in_use(broker_factory):
    b = broker_factory()
    b.create_topic(TOPIC)
    # Every fsync of a round now holds its worker: the round started by
    # the next produce is in flight while the topic is deleted.
    b.failpoints = "log.fsync=delay/800"
    b.restart()
    produce_one(b.bootstrap, b"old")
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    admin.delete_topics([TOPIC], operation_timeout=30)[TOPIC].result(30)
    # A create whose timeout_ms (1) ends before the round does times out,
    # as in Kafka, creating nothing; unless this machine stalled so long
    # that the round had ended.
    fut = admin.create_topics([NewTopic(TOPIC, 1, 1)],
                              operation_timeout=0.001)[TOPIC]
    try:
        fut.result(30)
        created = True
    except KafkaException as e:
        assert e.args[0].code() == KafkaError.REQUEST_TIMED_OUT, e
        created = False
    if not created:
        # Waits for the round to end (the broker's wait, not ours).
        b.create_topic(TOPIC, timeout=30 * SLOW)
    produce_one(b.bootstrap, b"new")
    assert values(b.bootstrap, 1) == [b"new"]
    b.failpoints = None
    b.restart()
    assert values(b.bootstrap, 1) == [b"new"]
