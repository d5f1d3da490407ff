"""compression.type at topic and broker level (issue #19, KIP-390 values):
a batch in another codec is stored in the topic's codec, values intact,
producer fields kept (idempotent and transactional), alter takes effect for
new batches."""
import socket

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import (AdminClient, ConfigResource, NewTopic)

import kafka_wire as kw

CODEC = {"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def stored_batches(broker, topic):
    """Batch headers of partition 0 as stored, by raw Fetches from 0 up to
    the high watermark."""
    s = socket.create_connection(("127.0.0.1", broker.port), timeout=30)
    out = []
    try:
        offset, hw, corr = 0, 1, 1
        while offset < hw:
            s.sendall(kw.fetch_request_v11(corr, topic, 0, offset))
            _, _, parts = kw.parse_fetch_v11(kw.recv_frame(s))
            err, hw, batches = parts[(topic, 0)]
            assert err == 0 and (batches or offset >= hw)
            out += batches
            if batches:
                offset = (batches[-1]["base_offset"]
                          + batches[-1]["last_offset_delta"] + 1)
            corr += 1
    finally:
        s.close()
    return out


def consume_all(broker, topic, n, isolation="read_uncommitted"):
    """Partition 0 read from the start by an assigned consumer (no group
    join), until n records came and a short poll finds nothing more."""
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": topic,
                  "auto.offset.reset": "earliest",
                  "isolation.level": isolation,
                  "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got = []
    try:
        for _ in range(600):
            m = c.poll(0.2 if len(got) >= n else 1.0)
            if m is None:
                if len(got) >= n:
                    break
                continue
            assert not m.error(), m.error()
            got.append((m.value(), m.headers()))
    finally:
        c.close()
    return got


def create(admin, topic, ctype):
    fs = admin.create_topics([NewTopic(topic, 1, 1, config={
        "compression.type": ctype})])
    fs[topic].result(30)


# Header values are never None here: Debian's confluent_kafka 2.0.2 hands
# a None header value back without a reference and the interpreter aborts
# at exit ("none_dealloc").  test_batch's recompress_every_codec_pair
# covers null header values.
def produce(broker, topic, codec, n, **extra):
    conf = {"bootstrap.servers": broker.bootstrap, "enable.idempotence": True,
            "compression.codec": codec, "linger.ms": 20}
    conf.update(extra)
    p = Producer(conf)
    vals = [(b"value-%d-" % i) * 20 for i in range(n)]
    for v in vals:
        p.produce(topic, v, headers=[("h", b"x"), ("n", b"")])
    assert p.flush(60) == 0
    return vals


def test_each_topic_codec_from_other_producer_codecs(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for ctype, want in CODEC.items():
        for pcodec in ("none", "lz4", "gzip"):
            topic = "ct-%s-%s" % (ctype, pcodec)
            create(admin, topic, ctype)
            vals = produce(broker, topic, pcodec, 50)
            got = consume_all(broker, topic, len(vals))
            assert [v for v, _ in got] == vals
            assert all(h == [("h", b"x"), ("n", b"")] for _, h in got)
            bs = stored_batches(broker, topic)
            assert bs and all(b["crc_ok"] for b in bs)
            assert all(b["attributes"] & 7 == want for b in bs), (ctype, bs)
            assert all(b["producer_id"] >= 0 and b["base_sequence"] >= 0
                       for b in bs)
    res = ConfigResource(ConfigResource.Type.TOPIC, "ct-zstd-none")
    cfg = admin.describe_configs([res])[res].result(30)
    assert cfg["compression.type"].value == "zstd"


def test_raw_retry_is_duplicate_after_recompression(broker):
    """The same idempotent batch sent twice to a zstd topic: one copy
    stored, the retry answered with the first offset."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    create(admin, "ct-retry", "zstd")
    s = socket.create_connection(("127.0.0.1", broker.port), timeout=30)
    try:
        s.sendall(kw.init_producer_id_request(1))
        _, err, pid, epoch = kw.parse_init_producer_id(kw.recv_frame(s), 4)
        assert err == 0
        batch = kw.record_batch([b"a" * 100, b"b" * 100], producer_id=pid,
                                producer_epoch=epoch, base_sequence=0)
        offs = []
        for corr in (2, 3):
            s.sendall(kw.produce_request_v8(corr, "ct-retry", 0, batch))
            _, parts = kw.parse_produce_v8(kw.recv_frame(s))
            assert parts[0][2] == 0, parts
            offs.append(parts[0][3])
    finally:
        s.close()
    assert offs == [0, 0]
    bs = stored_batches(broker, "ct-retry")
    assert len(bs) == 1 and bs[0]["attributes"] & 7 == CODEC["zstd"]
    assert bs[0]["producer_id"] == pid and bs[0]["base_sequence"] == 0


def test_transactional_batches_keep_flags(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    create(admin, "ct-txn", "gzip")
    p = Producer({"bootstrap.servers": broker.bootstrap,
                  "transactional.id": "ct-txn", "compression.codec": "lz4"})
    p.init_transactions(60)
    p.begin_transaction()
    p.produce("ct-txn", b"committed")
    p.commit_transaction(60)
    p.begin_transaction()
    p.produce("ct-txn", b"aborted")
    assert p.flush(60) == 0  # sent, so the abort has data to abort
    p.abort_transaction(60)
    got = consume_all(broker, "ct-txn", 1, "read_committed")
    assert [v for v, _ in got] == [b"committed"]
    bs = stored_batches(broker, "ct-txn")
    data = [b for b in bs if not b["attributes"] & 0x20]
    ctrl = [b for b in bs if b["attributes"] & 0x20]
    assert len(data) == 2 and len(ctrl) == 2
    assert all(b["attributes"] & 0x17 == 0x10 | CODEC["gzip"] for b in data)
    assert all(b["attributes"] & 7 == 0 for b in ctrl)


def test_alter_applies_to_new_batches_and_broker_default(broker_factory):
    broker = broker_factory(**{"compression.type": "snappy"})
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("ct-alter", 1, 1)])["ct-alter"].result(30)
    produce(broker, "ct-alter", "none", 5)
    res = ConfigResource(ConfigResource.Type.TOPIC, "ct-alter",
                         set_config={"compression.type": "lz4"})
    admin.alter_configs([res])[res].result(30)
    produce(broker, "ct-alter", "none", 5)
    bs = stored_batches(broker, "ct-alter")
    codecs = [b["attributes"] & 7 for b in bs]
    assert codecs[0] == CODEC["snappy"] and codecs[-1] == CODEC["lz4"]
    assert len(consume_all(broker, "ct-alter", 10)) == 10
    # The dynamic broker layer takes the values too.
    bres = ConfigResource(ConfigResource.Type.BROKER, "1",
                          set_config={"compression.type": "zstd"})
    admin.alter_configs([bres])[bres].result(30)
    admin.create_topics([NewTopic("ct-dyn", 1, 1)])["ct-dyn"].result(30)
    produce(broker, "ct-dyn", "none", 5)
    assert all(b["attributes"] & 7 == CODEC["zstd"]
               for b in stored_batches(broker, "ct-dyn"))


def test_codec_levels_used_on_recompression(broker):
    """compression.<codec>.level (KIP-390) is the level a batch is
    re-compressed at: the same uncompressed batch stored at the codec's
    lowest and highest level gives a smaller batch at the highest; a level
    out of Kafka's range is refused."""
    import random
    rnd = random.Random(19)
    words = [b"w%03d" % rnd.randrange(300) for _ in range(40)]
    values = [b" ".join(rnd.choice(words) for _ in range(60))
              for _ in range(300)]
    batch = kw.record_batch(values)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    sizes = {}
    for codec, low, high in (("gzip", 1, 9), ("lz4", 1, 17),
                             ("zstd", -5, 19)):
        for level in (low, high):
            topic = "ct-level-%s-%d" % (codec, level)
            admin.create_topics([NewTopic(topic, 1, 1, config={
                "compression.type": codec,
                "compression.%s.level" % codec: str(level)})])[topic].result(30)
            s = socket.create_connection(("127.0.0.1", broker.port),
                                         timeout=30)
            try:
                s.sendall(kw.produce_request_v8(1, topic, 0, batch))
                _, parts = kw.parse_produce_v8(kw.recv_frame(s))
                assert parts[0][2] == 0, parts
            finally:
                s.close()
            bs = stored_batches(broker, topic)
            assert len(bs) == 1 and bs[0]["attributes"] & 7 == CODEC[codec]
            sizes[(codec, level)] = bs[0]["length"]
        assert sizes[(codec, high)] < sizes[(codec, low)], sizes
    assert len(consume_all(broker, "ct-level-zstd-19", 300)) == 300
    for key, bad in (("compression.gzip.level", "0"),
                     ("compression.lz4.level", "18"),
                     ("compression.zstd.level", "23")):
        fs = admin.create_topics([NewTopic("ct-level-bad", 1, 1,
                                           config={key: bad})])
        try:
            fs["ct-level-bad"].result(30)
            raise AssertionError("%s=%s accepted" % (key, bad))
        except Exception as e:  # KafkaException(INVALID_CONFIG)
            assert "INVALID_CONFIG" in str(e) or "nvalid" in str(e), e


def test_librdkafka_compresses_against_cairn(broker):
    """librdkafka before 2.8 (Debian's is 2.0.2) sends gzip, snappy and lz4
    batches only to a broker whose ApiVersions lists Produce v0
    (librdkafka#4956): Cairn lists it, as Kafka 4.x does (KAFKA-18659),
    so the producer's own codec reaches the log of a `producer` topic."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for pcodec in ("gzip", "snappy", "lz4"):
        topic = "ct-client-%s" % pcodec
        create(admin, topic, "producer")
        produce(broker, topic, pcodec, 20)
        bs = stored_batches(broker, topic)
        assert bs and all(b["attributes"] & 7 == CODEC[pcodec]
                          for b in bs), (pcodec, bs)
