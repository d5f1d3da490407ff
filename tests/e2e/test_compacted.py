"""Compacted topics (issue #19): cleanup.policy=compact and compact,delete
accepted, keyless records refused as Kafka refuses them, and the log
cleaner in the broker (cleaner.c over the engine in log_clean.c) run end
to end: latest committed value per key, nothing aborted, offsets kept,
producer state and the LSO right after restarts and crashes at the
engine's fail points.

The cleaner is made to run soon with real keys (small segment.bytes, a
short log.cleaner.backoff.ms, min.cleanable.dirty.ratio 0.01); tests wait
for cairn_cleaner_passes_total on /metrics, never for a fixed time."""
import os
import shutil
import signal
import socket
import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

import kafka_wire as kw
from test_compression_type import CODEC, stored_batches
from conftest import SANITIZED, SLOW, Broker, metrics, needs_cairn

pytestmark = needs_cairn

# One offsets partition: a broker here starts (and restarts) in a fraction
# of the time 50 take.
FAST = {"log.cleaner.backoff.ms": "50", "offsets.topic.num.partitions": "1",
        "transaction.state.log.num.partitions": "1"}
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


def wait_clean(broker, topic, min_passes=1, timeout=60 * SLOW):
    """Until the cleaner has caught up with partition 0 of topic: at least
    min_passes passes ended, none running, and nothing dirty left below
    the first uncleanable offset (its dirty ratio 0)."""
    key = ('cairn_cleaner_partition_dirty_ratio{topic="%s",partition="0"}'
           % topic)
    deadline = time.monotonic() + timeout
    m = {}
    while time.monotonic() < deadline:
        m = metrics(broker)
        if (m.get("cairn_cleaner_passes_total", 0) >= min_passes
                and m.get("cairn_cleaner_running_passes") == 0
                and m.get(key) == 0):
            return m
        time.sleep(0.05)
    pytest.fail("cleaner did not catch up with %s in %ss (passes %s, "
                "dirty ratio %s):\n%s"
                % (topic, timeout, m.get("cairn_cleaner_passes_total"),
                   m.get(key), broker.log_tail()))


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
            for m in c.consume(500, 0.1):
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
    wait_clean(broker, "cmp-plain")
    got = read_all(broker, "cmp-plain", "read_uncommitted")
    latest = {}
    for off, k, v in got:
        latest[k] = (off, v)
    assert latest == expect
    assert len(got) < offset              # something was removed
    assert [o for o, _, _ in got] == sorted(o for o, _, _ in got)


def write_mixed(broker, topic, tag=b""):
    """Transactional writes (commits, aborts, tombstones) interleaved with
    an idempotent plain producer's, then a batch that rolls the segment so
    every transactional record is below the active segment.  Returns
    (latest committed value per key, None for a tombstone; every aborted
    value; offset of every committed record as the producer was told)."""
    txp = Producer({"bootstrap.servers": broker.bootstrap,
                    "transactional.id": topic + "-tx", "linger.ms": 5})
    plain = Producer({"bootstrap.servers": broker.bootstrap,
                      "enable.idempotence": True, "linger.ms": 5})
    txp.init_transactions(30 * SLOW)
    latest, aborted, offsets = {}, set(), {}

    def note(err, msg):
        assert err is None, err
        offsets[(msg.key(), msg.value())] = msg.offset()

    for rnd in range(8):
        commit = rnd % 3 != 1
        txp.begin_transaction()
        for i in range(12):
            k = b"t%d" % ((rnd + i) % 6)
            v = None if (commit and i == 11) else b"tx%s-%d-%d" % (tag, rnd, i)
            txp.produce(topic, key=k, value=v, partition=0,
                        on_delivery=note if commit else None)
            if commit:
                latest[k] = v
            else:
                aborted.add(v)
        for i in range(6):
            k = b"p%d" % ((rnd * 5 + i) % 7)
            v = b"plain%s-%d-%d" % (tag, rnd, i) * 3
            plain.produce(topic, key=k, value=v, partition=0,
                          on_delivery=note)
            latest[k] = v
        plain.flush(30 * SLOW)
        if commit:
            txp.commit_transaction(30 * SLOW)
        else:
            txp.abort_transaction(30 * SLOW)
    assert plain.flush(30 * SLOW) == 0
    # A lone big batch: the segment before it (all of the above) rolls.
    plain.produce(topic, key=b"roll", value=b"r" * 2500, partition=0,
                  on_delivery=note)
    plain.produce(topic, key=b"roll2", value=b"r" * 2500, partition=0,
                  on_delivery=note)
    assert plain.flush(30 * SLOW) == 0
    latest[b"roll"] = latest[b"roll2"] = b"r" * 2500
    return latest, aborted, offsets


def check_clean(broker, topic, latest, aborted, offsets):
    """read_committed: exactly the latest committed value per key (a
    tombstone may be gone); read_uncommitted: no aborted value; every
    record at the offset it was written at."""
    for iso in ("read_committed", "read_uncommitted"):
        got = read_all(broker, topic, iso)
        seen = {}
        for off, k, v in got:
            assert v not in aborted, (iso, off, k, v)
            assert offsets.get((k, v)) == off, (iso, off, k, v)
            seen[k] = v
        want = {k: v for k, v in latest.items() if v is not None}
        assert {k: v for k, v in seen.items() if v is not None} == want, iso
        assert len(got) < len(offsets), iso        # something was removed


def lso_and_hw(broker, topic):
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "lso",
                  "isolation.level": "read_committed"})
    try:
        lo, lso = c.get_watermark_offsets(TopicPartition(topic, 0),
                                          timeout=10 * SLOW)
    finally:
        c.close()
    m = metrics(broker)
    key = '{topic="%s",partition="0"}' % topic
    return (lso, m["cairn_partition_high_watermark" + key],
            m["cairn_partition_open_transactions" + key])


def producers(broker, topic):
    """{producer id: last sequence} from DescribeProducers."""
    s = socket.create_connection(("127.0.0.1", broker.port), timeout=30)
    try:
        s.sendall(kw.describe_producers_request(1, {topic: [0]}))
        _, out = kw.parse_describe_producers(kw.recv_frame(s))
    finally:
        s.close()
    err, ps = out[(topic, 0)]
    assert err == 0
    return {p["producer_id"]: p["last_sequence"] for p in ps}


def idem_pid(before):
    """The idempotent producer of the restart test: the one at sequence
    29 (30 records, one per batch)."""
    pids = [pid for pid, seq in before.items() if seq == 29]
    assert len(pids) == 1, before
    return pids[0]


def test_transactions_tombstones_restart(broker_factory):
    """Commits, aborts and tombstones from a transactional producer with a
    plain idempotent one: cleaned as Kafka cleans; after a restart the same
    view, the LSO at the high watermark, and an idempotent producer that
    lived through it continues its sequence."""
    broker = broker_factory(**FAST)
    create(broker, "cmp-tx")
    latest, aborted, offsets = write_mixed(broker, "cmp-tx")
    wait_clean(broker, "cmp-tx")
    check_clean(broker, "cmp-tx", latest, aborted, offsets)
    m = metrics(broker)
    assert m["cairn_cleaner_bytes_read_total"] > 0
    assert m["cairn_cleaner_records_removed_total"] > 0
    assert 'cairn_cleaner_partition_dirty_ratio{topic="cmp-tx",' \
           'partition="0"}' in m
    assert not any(k.startswith("cairn_cleaner_partition_dirty_ratio")
                   and "__" in k for k in m)
    # An idempotent producer across a restart of the cleaned log.
    idem = Producer({"bootstrap.servers": broker.bootstrap,
                     "enable.idempotence": True, "linger.ms": 0})
    errs = []

    def note(err, msg):
        if err is not None:
            errs.append(err)
        else:
            offsets[(msg.key(), msg.value())] = msg.offset()

    for i in range(20):
        idem.produce("cmp-tx", key=b"p%d" % (i % 3), value=b"idem-%d" % i,
                     partition=0, on_delivery=note)
        idem.flush(30 * SLOW)
        latest[b"p%d" % (i % 3)] = b"idem-%d" % i
    broker.restart()
    for i in range(20, 30):
        idem.produce("cmp-tx", key=b"p%d" % (i % 3), value=b"idem-%d" % i,
                     partition=0, on_delivery=note)
        latest[b"p%d" % (i % 3)] = b"idem-%d" % i
    assert idem.flush(60 * SLOW) == 0
    assert errs == []
    lso, hw, open_txns = lso_and_hw(broker, "cmp-tx")
    assert lso == hw and open_txns == 0
    check_clean(broker, "cmp-tx", latest, aborted, offsets)
    # Another producer supersedes every key the idempotent one wrote, so
    # its last batch holds no live record: the cleaner must keep it
    # (emptied) for producer state, which a restart without snapshots
    # then rebuilds from the cleaned log alone.
    before = producers(broker, "cmp-tx")
    assert before[idem_pid(before)] == 29
    other = Producer({"bootstrap.servers": broker.bootstrap,
                      "enable.idempotence": True, "linger.ms": 0})
    for i in range(3):
        other.produce("cmp-tx", key=b"p%d" % i, value=b"other-%d" % i,
                      partition=0, on_delivery=note)
        latest[b"p%d" % i] = b"other-%d" % i
    # Each in its own batch, so the supersedes end below the active
    # segment that the last one starts.
    for k in (b"roll", b"roll2"):
        assert other.flush(30 * SLOW) == 0
        other.produce("cmp-tx", key=k, value=b"R" * 2500, partition=0,
                      on_delivery=note)
        latest[k] = b"R" * 2500
    assert other.flush(30 * SLOW) == 0
    wait_clean(broker, "cmp-tx", min_passes=metrics(broker)[
        "cairn_cleaner_passes_total"] + 1)
    broker.stop()
    part = os.path.join(broker.data_dir, "cmp-tx-0")
    for f in os.listdir(part):
        if f.endswith(".snapshot"):
            os.unlink(os.path.join(part, f))
    broker.start()
    after = producers(broker, "cmp-tx")
    assert after[idem_pid(before)] == 29, (before, after)
    idem.produce("cmp-tx", key=b"p9", value=b"idem-30", partition=0,
                 on_delivery=note)
    latest[b"p9"] = b"idem-30"
    assert idem.flush(60 * SLOW) == 0
    assert errs == []
    check_clean(broker, "cmp-tx", latest, aborted, offsets)
    # A transactional producer of the same id starts again.
    txp = Producer({"bootstrap.servers": broker.bootstrap,
                    "transactional.id": "cmp-tx-tx"})
    txp.init_transactions(30 * SLOW)
    txp.begin_transaction()
    txp.produce("cmp-tx", key=b"t0", value=b"after", partition=0)
    txp.commit_transaction(30 * SLOW)


@pytest.fixture(scope="module")
def dirty_log(tmp_path_factory):
    """A data dir holding a never-cleaned cmp-fp (write_mixed, cleaner
    off), written once for the fail point tests, with what it must clean
    to."""
    work = tmp_path_factory.mktemp("cmp-fp")
    b = Broker(work, dict(FAST, **{"log.cleaner.enable": "false"}))
    b.start()
    try:
        # Ratio 1: never due (a log is due above it), so a broker started
        # on a copy cleans it only once the test lowers it.
        create(b, "cmp-fp", **{"min.cleanable.dirty.ratio": "1"})
        want = write_mixed(b, "cmp-fp")
        assert metrics(b)["cairn_cleaner_threads"] == 0
    finally:
        assert b.stop() == 0
    return b.data_dir, want


# Every fail point of the engine (log_clean.h), in pass order.
POINTS = ["clean.written", "clean.swap", "clean.index", "clean.ckpt.before",
          "clean.ckpt.after"]


@pytest.mark.parametrize("point", POINTS)
def test_kill9_at_fail_point_then_restart(tmp_path, dirty_log, point):
    """The broker killed (SIGKILL, by the fail point) in the middle of its
    first pass; restarted, it recovers the old or the new segments and
    cleans to the same result: latest committed value per key, nothing
    aborted, offsets unchanged, the LSO at the high watermark."""
    if SANITIZED and point not in ("clean.swap", "clean.ckpt.before"):
        pytest.skip("two points reach the recovery paths under ASan")
    template, (latest, aborted, offsets) = dirty_log
    b = Broker(tmp_path, FAST)
    shutil.rmtree(b.data_dir)
    shutil.copytree(template, b.data_dir)
    b.failpoints = point + "=crash"
    try:
        crash_then_recover(b, point, latest, aborted, offsets)
    finally:
        b.kill9()


def crash_then_recover(b, point, latest, aborted, offsets):
    b.start()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    # AlterConfigs replaces every override: all of them again.
    res = ConfigResource(ConfigResource.Type.TOPIC, "cmp-fp",
                         set_config=dict(TOPIC_CONF))
    admin.alter_configs([res])[res].result(30)
    b.proc.wait(timeout=60 * SLOW)
    assert b.proc.returncode == -signal.SIGKILL, b.log_tail()
    assert "log cleaner: cleaned" not in open(b.log_path).read()
    b.failpoints = None
    b.start()
    # After clean.ckpt.after the swap and checkpoint are durable: the log
    # is clean already and the cleaner has nothing left to do.
    wait_clean(b, "cmp-fp", min_passes=0 if point == "clean.ckpt.after"
               else 1)
    check_clean(b, "cmp-fp", latest, aborted, offsets)
    lso, hw, open_txns = lso_and_hw(b, "cmp-fp")
    assert lso == hw and open_txns == 0
    left = [f for f in os.listdir(os.path.join(b.data_dir, "cmp-fp-0"))
            if f.endswith(".cleaned") or f == "cleaner.swap"]
    assert left == []
    assert b.stop() == 0, b.log_tail()


def slow_pass(broker_factory, topic):
    """A broker whose cleaner reads and writes at 2 KB/s, on a topic big
    enough that its pass runs for seconds; returns once the pass runs."""
    broker = broker_factory(**dict(FAST, **{
        "log.cleaner.io.max.bytes.per.second": "2000"}))
    create(broker, topic)
    for rnd in range(30):
        raw_produce(broker, topic, kw.record_batch(
            [b"x" * 200] * 10, keys=[b"k%d" % i for i in range(10)]))
    deadline = time.monotonic() + 30 * SLOW
    while metrics(broker).get("cairn_cleaner_running_passes") != 1:
        assert time.monotonic() < deadline, broker.log_tail()
        time.sleep(0.02)
    return broker


def test_sigterm_mid_pass_stops_promptly(broker_factory):
    """The rate limit keeps the pass running; SIGTERM abandons it: the
    broker exits 0 within the fixture's bound (a pass at 2 KB/s would
    take far longer), no .cleaned file is left, the log reads whole."""
    broker = slow_pass(broker_factory, "cmp-term")
    t0 = time.monotonic()
    assert broker.stop() == 0
    stop_s = time.monotonic() - t0
    part = os.path.join(broker.data_dir, "cmp-term-0")
    assert not [f for f in os.listdir(part) if f.endswith(".cleaned")]
    assert metrics_after_restart(broker)["cairn_cleaner_threads"] == 0
    got = read_all(broker, "cmp-term", "read_uncommitted")
    offs = [o for o, _, _ in got]
    assert offs == sorted(set(offs)) and offs[-10:] == list(range(290, 300))
    assert stop_s < 8 * SLOW


def metrics_after_restart(broker):
    broker.sets["log.cleaner.enable"] = "false"
    broker.start()
    return metrics(broker)


def test_topic_deleted_mid_pass(broker_factory):
    """Deleting the topic under a running pass: the pass gives up, the
    partition directory goes, the broker serves on and a new topic of the
    same name starts empty."""
    broker = slow_pass(broker_factory, "cmp-del")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.delete_topics(["cmp-del"])["cmp-del"].result(30)
    part = os.path.join(broker.data_dir, "cmp-del-0")
    deadline = time.monotonic() + 30 * SLOW
    while os.path.exists(part) or \
            metrics(broker).get("cairn_cleaner_running_passes") != 0:
        assert time.monotonic() < deadline, broker.log_tail()
        time.sleep(0.05)
    m = metrics(broker)
    assert m["cairn_cleaner_passes_failed_total"] == 0
    create(broker, "cmp-del")
    assert raw_produce(broker, "cmp-del",
                       kw.record_batch([b"v"], keys=[b"k"]))[:2] == (0, 0)


def test_max_compaction_lag_forces_a_pass(broker_factory):
    """min.cleanable.dirty.ratio 1 never makes the log due; a dirty record
    older than max.compaction.lag.ms does (KIP-354)."""
    broker = broker_factory(**FAST)
    create(broker, "cmp-lag", **{"min.cleanable.dirty.ratio": "1",
                                 "max.compaction.lag.ms": "1"})
    for rnd in range(10):
        raw_produce(broker, "cmp-lag", kw.record_batch(
            [b"y" * 300] * 5, keys=[b"k%d" % i for i in range(5)]))
    wait_clean(broker, "cmp-lag")


def test_tombstone_expires_after_delete_retention(broker_factory):
    """delete.retention.ms as KIP-534 has it: the first pass over a
    tombstone keeps it (and stamps its delete horizon, now + the
    retention); a later pass past the horizon removes it.  Held off by
    min.compaction.lag.ms until everything is written, so one pass cleans
    it all whenever it runs; later passes come from new dirty data, as
    many as it takes, so nothing depends on how long anything took."""
    broker = broker_factory(**FAST)
    conf = dict(TOPIC_CONF, **{"delete.retention.ms": "300"})
    create(broker, "cmp-tomb", **dict(conf, **{
        "min.compaction.lag.ms": str(24 * 3600 * 1000)}))
    assert raw_produce(broker, "cmp-tomb", kw.record_batch(
        [b"old" * 100], keys=[b"gone"]))[0] == 0
    assert raw_produce(broker, "cmp-tomb", kw.record_batch(
        [None], keys=[b"gone"]))[:2] == (0, 1)
    for rnd in range(6):
        raw_produce(broker, "cmp-tomb", kw.record_batch(
            [b"f" * 300] * 4, keys=[b"f%d" % i for i in range(4)]))
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    res = ConfigResource(ConfigResource.Type.TOPIC, "cmp-tomb",
                         set_config=conf)
    admin.alter_configs([res])[res].result(30)
    m = wait_clean(broker, "cmp-tomb")
    passes = m["cairn_cleaner_passes_total"]
    # The swap's figures: its disk work on a worker, the loop's share.
    assert m["cairn_cleaner_swap_worker_ms_last"] > 0
    assert m["cairn_cleaner_swap_loop_ms_max"] >= 0
    got = read_all(broker, "cmp-tomb", "read_uncommitted")
    assert [(o, v) for o, k, v in got if k == b"gone"] == [(1, None)]
    deadline = time.monotonic() + 30 * SLOW
    while any(k == b"gone" for _, k, _ in got):
        assert time.monotonic() < deadline, broker.log_tail()
        raw_produce(broker, "cmp-tomb", kw.record_batch(
            [b"f" * 300] * 4, keys=[b"f%d" % i for i in range(4)]))
        passes = wait_clean(broker, "cmp-tomb", min_passes=passes + 1)[
            "cairn_cleaner_passes_total"]
        got = read_all(broker, "cmp-tomb", "read_uncommitted")
    # Only the tombstone went: the latest of every other key stays.
    assert {k for _, k, _ in got} == {b"f%d" % i for i in range(4)}


def test_compressed_batches_compacted(broker_factory):
    """The gist of librdkafka's 0077 (compaction) with its compression
    cases: keyed records with tombstones stored in each codec in a
    compacted topic, cleaned to the latest value per key (tombstone
    expiry is test_clean's), batches still in their codec.  The topic's compression.type makes the codec: Debian's
    librdkafka 2.0.2 sends these batches uncompressed whatever its
    compression.codec ("Broker does not support compression type")."""
    broker = broker_factory(**FAST)
    cases = [("none", c) for c in ("gzip", "snappy", "lz4", "zstd")]
    for codec, ctype in cases:
        topic = "cmp-z-%s-%s" % (codec, ctype)
        create(broker, topic, **{"compression.type": ctype})
        p = Producer({"bootstrap.servers": broker.bootstrap,
                      "compression.codec": codec, "linger.ms": 5,
                      "batch.num.messages": 20})
        latest = {}
        for rnd in range(12):
            for i in range(20):
                k = b"key-%02d" % i
                v = None if (i % 5 == 0 and rnd == 11) else \
                    b"%s-%d-%d " % (codec.encode(), rnd, i) * 8
                p.produce(topic, key=k, value=v, partition=0)
                latest[k] = v
        p.produce(topic, key=b"roll", value=b"r" * 3000, partition=0)
        assert p.flush(30 * SLOW) == 0
        latest[b"roll"] = b"r" * 3000
        wait_clean(broker, topic, min_passes=0)
        got = read_all(broker, topic, "read_uncommitted")
        seen = {k: v for _, k, v in got}
        assert seen == latest             # tombstones kept (1 day)
        assert len(got) < 12 * 20
        # Cleaned batches keep their codec; batches kept empty for
        # producer state have no records to compress (Kafka writes them
        # uncompressed too), control batches never are.
        want = CODEC[ctype if ctype != "producer" else codec]
        codecs = {b["attributes"] & 7 for b in stored_batches(broker, topic)
                  if not b["attributes"] & 0x20 and b["count"] > 0}
        assert codecs == {want}, (codecs, want)


def test_failed_pass_reported_log_untouched(broker_factory):
    """A pass failing at the engine's clean.written point ("error"): the
    failure is counted with its error on /metrics, the broker serves on,
    nothing is removed."""
    broker = broker_factory(**FAST)
    broker.stop()
    broker.failpoints = "clean.written=error"
    broker.start()
    create(broker, "cmp-err")
    for rnd in range(10):
        raw_produce(broker, "cmp-err", kw.record_batch(
            [b"z" * 300] * 5, keys=[b"k%d" % i for i in range(5)]))
    deadline = time.monotonic() + 30 * SLOW
    while metrics(broker).get("cairn_cleaner_passes_failed_total", 0) < 1:
        assert time.monotonic() < deadline, broker.log_tail()
        time.sleep(0.05)
    m = metrics(broker)
    assert m['cairn_cleaner_last_error{error="fail point"}'] == 1, \
        [k for k in m if "last_error" in k]
    assert m["cairn_cleaner_passes_total"] == 0
    got = read_all(broker, "cmp-err", "read_uncommitted")
    assert [o for o, _, _ in got] == list(range(50))
    broker.failpoints = None
