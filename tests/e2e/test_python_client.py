"""confluent_kafka (Python over librdkafka) producer, assign()-based
consumer and AdminClient against the broker."""

import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (AdminClient, ConfigResource,
                                   NewPartitions)

from conftest import needs_cairn, scaled, MOCK, SLOW

PARTITIONS = 3


def consume_all(bootstrap, topic, partitions, expected, timeout=60 * SLOW):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "e2e-py",
                  "enable.auto.commit": False,
                  "enable.partition.eof": False})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = {p: [] for p in range(partitions)}
    n = 0
    deadline = time.monotonic() + timeout
    try:
        while n < expected and time.monotonic() < deadline:
            for m in c.consume(num_messages=1000, timeout=0.5):
                if m.error():
                    continue
                got[m.partition()].append((m.offset(), m.value(),
                                           m.key(), m.timestamp()[1]))
                n += 1
    finally:
        c.close()
    return got


def test_produce_consume_acks_all(broker):
    topic = "py-roundtrip"
    broker.create_topic(topic, PARTITIONS)
    count = scaled(10000)
    p = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all",
                  "linger.ms": 5})
    delivered = {}

    def on_delivery(err, msg):
        assert err is None, err
        delivered[msg.key()] = (msg.partition(), msg.offset())

    base_ts = int(time.time() * 1000) - 100000
    for i in range(count):
        p.produce(topic, key=b"k%d" % i, value=b"v%d-%s" % (i, b"z" * (i % 97)),
                  partition=i % PARTITIONS, timestamp=base_ts + i,
                  on_delivery=on_delivery)
        if i % 1000 == 0:
            p.poll(0)
    assert p.flush(30 * SLOW) == 0
    assert len(delivered) == count

    got = consume_all(broker.bootstrap, topic, PARTITIONS, count)
    for part in range(PARTITIONS):
        recs = got[part]
        want = list(range(part, count, PARTITIONS))
        assert len(recs) == len(want), "partition %d" % part
        for j, (off, value, key, ts) in enumerate(recs):
            i = want[j]
            assert off == j
            assert key == b"k%d" % i
            assert value == b"v%d-%s" % (i, b"z" * (i % 97))
            assert ts == base_ts + i
            assert delivered[key] == (part, off)

    c = Consumer({"bootstrap.servers": broker.bootstrap,
                  "group.id": "e2e-py"})
    try:
        for part in range(PARTITIONS):
            n = len(range(part, count, PARTITIONS))
            lo, hi = c.get_watermark_offsets(TopicPartition(topic, part),
                                             timeout=10)
            assert (lo, hi) == (0, n)
        if MOCK:
            return              # the mock cluster ignores timestamps
        # Timestamps of partition 1 are base+1, base+4, ...: a time
        # between two records finds the later one.
        # One query per request: Kafka refuses a partition listed twice.
        def at(ts):
            res = c.offsets_for_times([TopicPartition(topic, 1, ts)],
                                      timeout=10)
            assert res[0].error is None, res[0].error
            return res[0].offset
        assert at(base_ts - 5000) == 0
        assert at(base_ts + 1) == 0
        assert at(base_ts + 3 * 10 + 1) == 10
        assert at(base_ts + 3 * 10 + 2) == 11
        assert at(base_ts + count + 1000) == -1
    finally:
        c.close()


@needs_cairn
def test_admin(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    from confluent_kafka.admin import NewTopic
    fs = admin.create_topics([NewTopic("adm-a", 2, 1,
                                       config={"retention.ms": "123456"}),
                              NewTopic("adm-b", 1, 1)],
                             operation_timeout=10)
    for f in fs.values():
        f.result(timeout=15)
    md = admin.list_topics(timeout=10)
    assert {"adm-a", "adm-b"} <= set(md.topics)
    assert len(md.topics["adm-a"].partitions) == 2

    # Creating it again is an error, not a crash.
    fs = admin.create_topics([NewTopic("adm-b", 1, 1)])
    with pytest.raises(Exception):
        fs["adm-b"].result(timeout=15)

    res = admin.describe_configs([ConfigResource("topic", "adm-a")])
    cfg = list(res.values())[0].result(timeout=15)
    assert cfg["retention.ms"].value == "123456"
    assert "cleanup.policy" in cfg

    broker_id = str(list(md.brokers)[0])
    res = admin.describe_configs([ConfigResource("broker", broker_id)])
    assert list(res.values())[0].result(timeout=15)

    fs = admin.create_partitions([NewPartitions("adm-a", 5)])
    fs["adm-a"].result(timeout=15)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        md = admin.list_topics(topic="adm-a", timeout=10)
        if len(md.topics["adm-a"].partitions) == 5:
            break
        time.sleep(0.1)
    assert len(md.topics["adm-a"].partitions) == 5

    fs = admin.delete_topics(["adm-b"], operation_timeout=10)
    fs["adm-b"].result(timeout=15)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if "adm-b" not in admin.list_topics(timeout=10).topics:
            break
        time.sleep(0.1)
    assert "adm-b" not in admin.list_topics(timeout=10).topics
    assert "adm-a" in admin.list_topics(timeout=10).topics
