"""Segment tampering (issue #11): with the broker stopped, remove a middle
segment, remove the active segment, truncate indexes, corrupt a producer
snapshot, flip a byte in an old segment; restart and check the documented
behaviour (README "Recovery"):

- no intact record is deleted: every offset still on disk is fetched back
  with its value;
- the log end never moves back, so no offset a consumer may have read is
  handed out again;
- a missing range is one ERROR naming it, a torn tail one WARN with the
  partition, segment, byte and offset (no "corruption detected" line);
- `cairn --verify-logs` finds a flipped byte no normal start looks at.
"""

import os
import re
import subprocess
from pathlib import Path

import pytest

from conftest import CAIRN_BIN, SLOW, free_port, needs_cairn
from kafka_wire import (TxnClient, fetch_request_v11, parse_fetch_v11,
                        record_batch)

pytestmark = needs_cairn

KAFKA_STORAGE_ERROR = 56

TOPIC = "tamper"
SEGMENT_BYTES = 4096
BATCHES = 60
PER_BATCH = 5
END = BATCHES * PER_BATCH
TS0 = 1_700_000_000_000
FUTURE = 10_000_000  # ms added to every fourth batch's timestamps


def batch_ts(first):
    """Timestamps go down inside a segment: every fourth batch is ahead."""
    return TS0 + first + (FUTURE if (first // PER_BATCH) % 4 == 1 else 0)


def value(off):
    return b"rec-%05d-" % off + b"x" * 60


def start_topic(broker_factory, **sets):
    b = broker_factory(**sets)
    b.create_topic(TOPIC, 1, config={"segment.bytes": str(SEGMENT_BYTES)})
    return b


def idem_batch(pid, epoch, first):
    """The batch of PER_BATCH records starting at offset and sequence
    first."""
    return record_batch([value(first + k) for k in range(PER_BATCH)],
                        producer_id=pid, producer_epoch=epoch,
                        base_sequence=first, base_timestamp=batch_ts(first))


def fill(b):
    """BATCHES idempotent batches of PER_BATCH records; offset o holds
    value(o), its batch starts at batch_ts.  Returns (producer id,
    epoch)."""
    c = TxnClient(b.port)
    err, pid, epoch = c.init_producer_id()
    assert err == 0
    for i in range(BATCHES):
        first = i * PER_BATCH
        err, base = c.produce(TOPIC, 0, idem_batch(pid, epoch, first))
        assert (err, base) == (0, first)
    c.close()
    return pid, epoch


def part_dir(b):
    return Path(b.data_dir) / (TOPIC + "-0")


def segment_bases(b):
    return sorted(int(p.name[:20]) for p in part_dir(b).glob("*.log"))


def read_all(b):
    """{offset: value} of everything the broker serves."""
    c = TxnClient(b.port)
    out = {}
    for batch in c.fetch_full(TOPIC, 0, 0):
        assert batch["crc_ok"]
        for delta, _, v in batch["records"]:
            out[batch["base_offset"] + delta] = v
    c.close()
    return out


def log_end(b):
    c = TxnClient(b.port)
    end = c.list_offset(TOPIC, 0)
    c.close()
    return end


def produce_one(b, pid=-1, epoch=-1, seq=-1):
    c = TxnClient(b.port)
    res = c.produce(TOPIC, 0, record_batch([b"after"], producer_id=pid,
                                           producer_epoch=epoch,
                                           base_sequence=seq))
    c.close()
    return res


def broker_log(b):
    with open(b.log_path, errors="replace") as f:
        return f.read()


def since_last_start(b):
    text = broker_log(b)
    return text[text.rfind("=== start"):]


def expect_all_but(b, lost):
    """Every offset outside `lost` is served with its value."""
    got = read_all(b)
    want = {o: value(o) for o in range(END) if o not in lost}
    missing = sorted(set(want) - set(got))
    assert not missing, "intact records gone: %s..." % missing[:10]
    assert got == want


def test_missing_middle_segment_keeps_later_ones(broker_factory):
    b = start_topic(broker_factory)
    fill(b)
    b.stop()
    bases = segment_bases(b)
    assert len(bases) >= 4, bases
    gone = range(bases[2], bases[3])
    os.unlink(part_dir(b) / ("%020d.log" % bases[2]))
    b.start()
    assert segment_bases(b) == bases[:2] + bases[3:]
    assert log_end(b) == END
    expect_all_but(b, gone)
    # New records continue after the end, reusing no offset.
    assert produce_one(b) == (0, END)
    log = since_last_start(b)
    assert "ERROR" in log and "offsets %d..%d are missing" % (
        gone[0], gone[-1]) in log
    assert "deleting segment" not in log


def test_missing_active_segment_keeps_the_end(broker_factory):
    b = start_topic(broker_factory)
    fill(b)
    b.stop()
    bases = segment_bases(b)
    gone = range(bases[-1], END)
    os.unlink(part_dir(b) / ("%020d.log" % bases[-1]))
    b.start()
    # The clean stop's checkpoint knew the end: it stays, and the next
    # record does not get an offset a consumer may already have read.
    assert log_end(b) == END
    expect_all_but(b, gone)
    assert produce_one(b) == (0, END)
    assert "new records start at %d" % END in since_last_start(b)


def test_unreadable_segment_takes_only_its_partition_offline(
        broker_factory):
    b = start_topic(broker_factory)
    b.create_topic("bystander", 1)
    fill(b)
    c = TxnClient(b.port)
    assert c.produce("bystander", 0, record_batch([b"b0"])) == (0, 0)
    c.close()
    b.stop()
    bases = segment_bases(b)
    seg = part_dir(b) / ("%020d.log" % bases[2])
    saved = seg.read_bytes()
    # Unreadable, even for root: a directory where the file should be.
    seg.unlink()
    seg.mkdir()
    b.start()
    c = TxnClient(b.port)
    assert c.produce("bystander", 0, record_batch([b"b1"])) == (0, 1)
    assert c.produce(TOPIC, 0, record_batch([b"x"]))[0] == \
        KAFKA_STORAGE_ERROR
    _, top_err, out = parse_fetch_v11(c.call(fetch_request_v11, TOPIC, 0, 0))
    assert out[(TOPIC, 0)][0] == KAFKA_STORAGE_ERROR
    c.close()
    log = since_last_start(b)
    assert "cannot read segment %020d.log" % bases[2] in log
    assert "partition %s-0 is offline" % TOPIC in log
    # Nothing was deleted or cut: once the file is back, all of it is.
    assert b.stop() == 0
    seg.rmdir()
    seg.write_bytes(saved)
    b.start()
    assert segment_bases(b) == bases
    assert log_end(b) == END
    expect_all_but(b, ())


def test_truncated_indexes_are_rebuilt(broker_factory):
    # An index entry per batch, so a trusted segment's check reads only
    # its last batch: a cut time index is then not seen by chance.
    b = broker_factory()
    b.create_topic(TOPIC, 1, config={"segment.bytes": str(SEGMENT_BYTES),
                                     "index.interval.bytes": "1"})
    fill(b)
    b.stop()
    bases = segment_bases(b)
    assert len(bases) >= 5, bases
    for base, ext, size in ((bases[0], "index", 0), (bases[1], "index", 8),
                            (bases[2], "timeindex", 0),
                            (bases[3], "timeindex", 12)):
        p = part_dir(b) / ("%020d.%s" % (base, ext))
        assert p.stat().st_size > size, p
        os.truncate(p, size)
    b.start()
    assert log_end(b) == END
    expect_all_but(b, ())
    # ListOffsets by time finds the batches ahead in time in every
    # segment: each is the first whose max timestamp reaches its own.
    c = TxnClient(b.port)
    for k in range(4):
        ahead = [o for o in range(bases[k], bases[k + 1] - PER_BATCH,
                                  PER_BATCH) if batch_ts(o) > TS0 + o]
        assert ahead, (k, bases)
        assert c.list_offset(TOPIC, 0, timestamp=batch_ts(ahead[0])) == \
            ahead[0]
    c.close()


def test_corrupt_producer_snapshot_falls_back(broker_factory):
    b = start_topic(broker_factory)
    pid, epoch = fill(b)
    b.stop()
    snaps = sorted(part_dir(b).glob("*.snapshot"))
    assert snaps, list(part_dir(b).iterdir())
    newest = snaps[-1]
    data = bytearray(newest.read_bytes())
    data[len(data) // 2] ^= 0xFF
    newest.write_bytes(bytes(data))
    b.start()
    assert log_end(b) == END
    expect_all_but(b, ())
    # Producer state came back from an older snapshot plus the log: a
    # retry of the last batch is a duplicate, the next sequence appends.
    c = TxnClient(b.port)
    last = END - PER_BATCH
    assert c.produce(TOPIC, 0, idem_batch(pid, epoch, last)) == (0, last)
    c.close()
    assert produce_one(b, pid, epoch, END) == (0, END)
    log = since_last_start(b)
    assert "deleting snapshot" in log and newest.name in log
    assert "corruption detected" not in log


def test_torn_tail_is_one_warn(broker_factory):
    b = start_topic(broker_factory)
    fill(b)
    b.stop()
    b.failpoints = "log.mid_append=crash"
    b.start()
    try:
        produce_one(b)
    except (ConnectionError, OSError):
        pass
    b.proc.wait(timeout=10 * SLOW)
    b.failpoints = None
    b.unexpected_exit = None
    b.start()
    assert log_end(b) == END
    expect_all_but(b, ())
    log = since_last_start(b)
    assert "corruption detected" not in log
    warns = [line for line in log.splitlines()
             if "WARN" in line and "truncating" in line]
    assert len(warns) == 1, log
    assert str(part_dir(b)) in warns[0]
    assert re.search(r"segment \d{20}: .* at byte \d+ \(offset %d\)" % END,
                     warns[0]), warns[0]


def test_crash_before_roll_snapshot_replays_older(broker_factory):
    """The broker dies as a worker starts a roll's producer snapshot: the
    restart loads the snapshot before it, replays the log after it, and
    the producer's retries and next sequences carry on."""
    b = start_topic(broker_factory)
    b.stop()
    b.failpoints = "pstate.snapshot=crash/3"
    b.start()
    c = TxnClient(b.port)
    err, pid, epoch = c.init_producer_id()
    assert err == 0
    acked = 0
    try:
        for i in range(BATCHES):
            batch = idem_batch(pid, epoch, acked)
            assert c.produce(TOPIC, 0, batch) == (0, acked)
            acked += PER_BATCH
    except (ConnectionError, OSError):
        pass
    c.close()
    b.proc.wait(timeout=10 * SLOW)
    assert 0 < acked < END, acked
    # The two rolls before it wrote theirs; the third never did.
    snaps = sorted(int(p.name[:20]) for p in part_dir(b).glob("*.snapshot"))
    bases = segment_bases(b)
    assert len(snaps) == 2 and snaps[-1] in bases, (snaps, bases)
    b.failpoints = None
    b.unexpected_exit = None
    b.start()
    log = since_last_start(b)
    assert "snapshot at offset %d," % snaps[-1] in log, log
    c = TxnClient(b.port)
    last = acked - PER_BATCH
    assert c.produce(TOPIC, 0, idem_batch(pid, epoch, last)) == (0, last)
    # The unanswered batch: a duplicate if it reached the disk, else new;
    # at offset `acked` either way.
    for first in (acked, acked + PER_BATCH):
        batch = idem_batch(pid, epoch, first)
        assert c.produce(TOPIC, 0, batch) == (0, first)
    c.close()


def verify_logs(b):
    res = subprocess.run([str(CAIRN_BIN), "--verify-logs", "--set",
                          "log.dirs=%s" % b.data_dir],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, timeout=60 * SLOW)
    print(res.stdout, res.stderr)
    return res


def test_verify_logs_finds_a_flipped_byte(broker_factory):
    from confluent_kafka import Producer
    b = start_topic(broker_factory)
    fill(b)
    # Markers and coordinator records must verify too.
    b.create_topic("tamper-txn-topic", 1)
    p = Producer({"bootstrap.servers": b.bootstrap,
                  "transactional.id": "tamper-txn"})
    p.init_transactions(30)
    for committed in (True, False):
        p.begin_transaction()
        p.produce("tamper-txn-topic", b"v")
        p.flush(30)
        if committed:
            p.commit_transaction(30)
        else:
            p.abort_transaction(30)
    # And compressed batches (the records are decoded too).
    b.create_topic("tamper-zstd", 1)
    z = Producer({"bootstrap.servers": b.bootstrap,
                  "compression.type": "zstd", "linger.ms": 5})
    for i in range(200):
        z.produce("tamper-zstd", b"compressed %d " % i * 4)
    assert z.flush(30) == 0
    b.stop()
    res = verify_logs(b)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "tamper-zstd-0: ok" in res.stdout
    assert "BAD" not in res.stdout
    assert "%s: ok" % part_dir(b) in res.stdout
    assert "__transaction_state" in res.stdout

    bases = segment_bases(b)
    seg = part_dir(b) / ("%020d.log" % bases[1])
    data = bytearray(seg.read_bytes())
    first_len = int.from_bytes(data[8:12], "big") + 12
    data[first_len + 70] ^= 0x01        # inside the second batch's records
    seg.write_bytes(bytes(data))
    res = verify_logs(b)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "%s: bad batch at byte %d (offset %d): batch CRC mismatch" % (
        seg, first_len, bases[1] + PER_BATCH) in res.stdout
    assert seg.read_bytes() == bytes(data)   # it only reads
    # A normal start trusts that cleanly closed segment: only the tool
    # looks at it.
    b.start()
    assert log_end(b) == END


def test_topic_id_with_bad_hex_refuses_start(tmp_path):
    """A .topics file whose id holds a non-hex digit is corrupt metadata:
    the broker says so and exits.  Decoding it once shifted the -1 a bad
    digit gives left (undefined; the sanitized build aborted there)."""
    data = tmp_path / "data"
    (data / ".topics").mkdir(parents=True)
    (data / ".topics" / "badhex").write_text(
        "id=%s\npartitions=1\n" % ("zz" * 16))
    res = subprocess.run(
        [str(CAIRN_BIN), "--set", "log.dirs=%s" % data,
         "--set", "listeners=PLAINTEXT://127.0.0.1:%d" % free_port(),
         "--set", "http.listener="],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, timeout=60 * SLOW)
    out = res.stdout + res.stderr
    assert "runtime error" not in out, out
    assert res.returncode != 0 and "corrupt topic metadata" in out, out
