"""Topic rules applied on produce: CreateTime bounds
(message.timestamp.before.max.ms / after.max.ms) refuse records whose
timestamps stray too far from the broker's clock with INVALID_TIMESTAMP;
LogAppendTime topics stamp the broker's time; min.insync.replicas above one
refuses acks=all on a single broker."""

import time

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from conftest import needs_cairn

pytestmark = needs_cairn


def send(bootstrap, topic, ts_ms):
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                  "message.send.max.retries": 0})
    result = []
    p.produce(topic, value=b"x", partition=0, timestamp=ts_ms,
              on_delivery=lambda err, msg: result.append((err, msg)))
    p.flush(10)
    assert len(result) == 1
    return result[0]


def test_create_time_bounds(broker):
    broker.create_topic("ts", 1, {"message.timestamp.before.max.ms": "60000",
                                  "message.timestamp.after.max.ms": "60000"})
    now = int(time.time() * 1000)
    err, _ = send(broker.bootstrap, "ts", now - 2 * 3600 * 1000)
    assert err is not None and err.code() == KafkaError.INVALID_TIMESTAMP
    err, _ = send(broker.bootstrap, "ts", now + 2 * 3600 * 1000)
    assert err is not None and err.code() == KafkaError.INVALID_TIMESTAMP
    err, msg = send(broker.bootstrap, "ts", now)
    assert err is None and msg.offset() == 0


def test_log_append_time_stamps_broker_time(broker):
    broker.create_topic("lat", 1, {"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    err, msg = send(broker.bootstrap, "lat", 1000)
    after = int(time.time() * 1000)
    assert err is None
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "lat",
                  "enable.auto.commit": False})
    c.assign([TopicPartition("lat", 0, 0)])
    got = None
    deadline = time.monotonic() + 10
    while got is None and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got = m
    c.close()
    assert got is not None
    kind, ts = got.timestamp()
    assert kind == 2  # TIMESTAMP_LOG_APPEND_TIME
    assert before - 1000 <= ts <= after + 1000


def test_min_insync_replicas_above_one_refuses_acks_all(broker):
    """A single broker is one in-sync replica; Kafka refuses acks=all
    writes that cannot meet min.insync.replicas."""
    broker.create_topic("isr", 1, {"min.insync.replicas": "2"})
    err, _ = send(broker.bootstrap, "isr", int(time.time() * 1000))
    assert err is not None and err.code() == KafkaError.NOT_ENOUGH_REPLICAS
    p = Producer({"bootstrap.servers": broker.bootstrap, "acks": "1"})
    done = []
    p.produce("isr", value=b"y", partition=0,
              on_delivery=lambda e, m: done.append(e))
    p.flush(10)
    assert done == [None]
