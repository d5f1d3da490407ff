"""Compacted topics (issue #19): cleanup.policy=compact and compact,delete
accepted, keyless records refused as Kafka refuses them, and the log
cleaner in the broker (cleaner.c over the engine in log_clean.c) run end
to end: latest committed value per key, nothing aborted, offsets kept,
producer state and the LSO right after restarts and crashes at the
engine's fail points.

The cleaner is made to run soon with real keys (small segment.bytes, a
short log.cleaner.backoff.ms, min.cleanable.dirty.ratio 0.01); tests wait
for cairn_cleaner_passes_total on /metrics, never for a fixed time."""
import socket
import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

import kafka_wire as kw
from conftest import SLOW, metrics, needs_cairn

pytestmark = needs_cairn

FAST = {"log.cleaner.backoff.ms": "50"}
TOPIC_CONF = {"cleanup.policy": "compact", "segment.bytes": "2048",
              "min.cleanable.dirty.ratio": "0.01"}


def create(broker, topic, **conf):
    c = dict(TOPIC_CONF)
    c.update(conf)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config=c)])[topic].result(30)


def raw_produce(broker, topic, batch):
    s = socket.create_connection(("127.0.0.1", broker.port), timeout=30)
    try:
        s.sendall(kw.produce_request_v8(1, topic, 0, batch))
        body = kw.recv_frame(s)
    finally:
        s.close()
    r = kw.Reader(body)
    r.i32()
    out = []
    for _ in range(r.i32()):
        r.string()
        for _ in range(r.i32()):
            part, err, base = r.i32(), r.i16(), r.i64()
            r.i64()
            r.i64()
            recs = [(r.i32(), r.string()) for _ in range(max(r.i32(), 0))]
            out.append((err, base, recs, r.string()))
    return out[0]


def passes(broker):
    return metrics(broker).get("cairn_cleaner_passes_total", 0)


def wait_passes(broker, n, timeout=60 * SLOW):
    """Until the cleaner has ended n passes with a swap."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = passes(broker)
        if got >= n:
            return got
        time.sleep(0.05)
    pytest.fail("cleaner did not finish %d passes in %ss (at %s):\n%s"
                % (n, timeout, passes(broker), broker.log_tail()))


def read_all(broker, topic, isolation="read_committed"):
    """(offset, key, value) of partition 0 from the start to the end its
    watermarks give for the isolation level."""
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": topic,
                  "isolation.level": isolation, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"})
    try:
        lo, hi = c.get_watermark_offsets(TopicPartition(topic, 0),
                                         timeout=10 * SLOW)
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        out, pos = [], lo
        deadline = time.monotonic() + 30 * SLOW
        while pos < hi and time.monotonic() < deadline:
            for m in c.consume(500, 0.5):
                if m.error():
                    continue
                out.append((m.offset(), m.key(), m.value()))
                pos = m.offset() + 1
            # Removed records and markers leave gaps: the position moves
            # past them although no message comes.
            got = c.position([TopicPartition(topic, 0)])[0].offset
            if got >= 0:
                pos = max(pos, got)
    finally:
        c.close()
    return out


def test_keyless_records_refused_like_kafka(broker):
    """Kafka 4.4 (checked with the reference broker): INVALID_RECORD,
    one record_errors entry per keyless record, its message, nothing of
    the batch appended; compact,delete the same; delete topics take them."""
    create(broker, "cmp-nokey")
    batch = kw.record_batch([b"v0", b"v1", b"v2"], keys=[b"k0", None, None])
    err, base, recs, msg = raw_produce(broker, "cmp-nokey", batch)
    one = ("Compacted topic cannot accept message without key in topic "
           "partition cmp-nokey-0")
    assert err == 87 and base == -1
    assert recs == [(1, one), (2, one)]
    assert msg == ("One or more records have been rejected due to 2 record "
                   "errors in total, and only showing the first three "
                   "errors at most: [RecordError(batchIndex=1, message='%s'"
                   "), RecordError(batchIndex=2, message='%s')]" % (one, one))
    ok = raw_produce(broker, "cmp-nokey",
                     kw.record_batch([b"x"], keys=[b"k"]))
    assert ok[0] == 0 and ok[1] == 0       # nothing of the refused batch
    create(broker, "cmp-nokey2", **{"cleanup.policy": "compact,delete"})
    assert raw_produce(broker, "cmp-nokey2",
                       kw.record_batch([None], keys=None))[0] == 87
    broker.create_topic("del-nokey")
    assert raw_produce(broker, "del-nokey",
                       kw.record_batch([b"v"]))[0] == 0


def test_plain_producer_latest_value_per_key(broker_factory):
    broker = broker_factory(**FAST)
    create(broker, "cmp-plain")
    expect = {}
    offset = 0
    for rnd in range(20):
        keys = [b"k%d" % ((rnd * 7 + i) % 10) for i in range(10)]
        vals = [b"v%d-%d" % (rnd, i) * 5 for i in range(10)]
        err, base, _, _ = raw_produce(broker, "cmp-plain",
                                      kw.record_batch(vals, keys=keys))
        assert err == 0 and base == offset
        for i, (k, v) in enumerate(zip(keys, vals)):
            expect[k] = (offset + i, v)
        offset += 10
    wait_passes(broker, 1)
    got = read_all(broker, "cmp-plain", "read_uncommitted")
    latest = {}
    for off, k, v in got:
        latest[k] = (off, v)
    assert latest == expect
    assert len(got) < offset              # something was removed
    assert [o for o, _, _ in got] == sorted(o for o, _, _ in got)
