"""Idempotent producers: hand-built batches over the raw protocol check
the broker's per-partition producer state (duplicates answered with their
original offset, sequence gaps and stale epochs refused), its survival
across clean and crash restarts (snapshots, corrupt snapshot fallback,
log replay), producer expiry, and a librdkafka idempotent producer under
repeated kill -9 must leave every message in the log exactly once."""

import os
import random
import re
import time
from pathlib import Path

import kafka_wire as kw
from conftest import needs_cairn, run, scaled, tool, SLOW

pytestmark = needs_cairn

OOO = kw.OUT_OF_ORDER_SEQUENCE_NUMBER
FENCED = kw.INVALID_PRODUCER_EPOCH
SEQ_MOD = 1 << 31
# Idempotent producers must use acks=all; every refusal below is also a
# check that an acks=-1 request writing nothing is still answered.
ACKS = -1

STATE_RE = re.compile(r"producer state for (\S+)-(\d+): snapshot at offset "
                      r"(-?\d+), replayed (\d+) batches from the log")


class Prod:
    """One hand-driven idempotent producer writing to one partition.

    Keeps the next sequence number and every accepted batch (its bytes,
    sequence range and offset) so tests can resend exact duplicates.
    """

    def __init__(self, cli, topic, partition, pid, epoch=0, seq=0):
        self.cli = cli
        self.topic = topic
        self.partition = partition
        self.pid = pid
        self.epoch = epoch
        self.seq = seq
        self.sent = []          # dicts: batch, base_seq, n, offset, max_ts

    def build(self, n=2, seq=None, epoch=None, ts=None):
        seq = self.seq if seq is None else seq
        epoch = self.epoch if epoch is None else epoch
        ts = int(time.time() * 1000) if ts is None else ts
        values = [b"p%d-e%d-s%d" % (self.pid, epoch, (seq + i) % SEQ_MOD)
                  for i in range(n)]
        batch = kw.record_batch(values, self.pid, epoch, seq, ts)
        return {"batch": batch, "base_seq": seq, "n": n, "epoch": epoch,
                "max_ts": ts + n - 1, "offset": None}

    def send(self, n=2, **kw_):
        """Send the next batch; on success advance the sequence.

        Returns (error, base_offset, batch record)."""
        b = self.build(n, **kw_)
        err, off = self.cli.produce(self.topic, self.partition, b["batch"],
                                    acks=ACKS)
        if err == 0:
            b["offset"] = off
            self.sent.append(b)
            self.seq = (b["base_seq"] + n) % SEQ_MOD
        return err, off, b

    def ok(self, n=2, **kw_):
        err, off, b = self.send(n, **kw_)
        assert err == 0, "batch seq %d refused with %d" % (b["base_seq"], err)
        return off

    def resend(self, b):
        return self.cli.produce(self.topic, self.partition, b["batch"],
                                acks=ACKS)


def client(broker):
    return kw.Client(broker.port)


def new_pid(cli, version=4):
    err, pid, epoch = cli.init_producer_id(version=version)
    assert err == 0, "InitProducerId v%d error %d" % (version, err)
    assert pid >= 0 and epoch == 0, (pid, epoch)
    return pid


def end_offset(cli, topic, partition=0):
    return cli.list_offset(topic, partition)


def log_summary(cli, topic, partition=0):
    """(batches, records, [(pid, epoch, base_seq, count, base_offset)])."""
    batches = cli.fetch_batches(topic, partition)
    assert all(b["crc_ok"] for b in batches)
    keys = [(b["producer_id"], b["producer_epoch"], b["base_sequence"],
             b["count"], b["base_offset"]) for b in batches]
    return len(batches), sum(b["count"] for b in batches), keys


def producers(cli, topic, partition=0):
    """{pid: producer dict} from DescribeProducers for one partition."""
    out = cli.describe_producers(topic, [partition])
    err, plist = out[partition]
    assert err == 0, "DescribeProducers error %d" % err
    return {p["producer_id"]: p for p in plist}


def log_since_last_start(broker):
    with open(broker.log_path, errors="replace") as f:
        text = f.read()
    return text[text.rfind("=== start"):]


def state_lines(broker, timeout=5.0):
    """{(topic, partition): (snapshot offset, replayed batches)} from the
    broker's latest start-up."""
    deadline = time.monotonic() + timeout * SLOW
    while True:
        found = {}
        for m in STATE_RE.finditer(log_since_last_start(broker)):
            found[(m.group(1), int(m.group(2)))] = (int(m.group(3)),
                                                    int(m.group(4)))
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


# ---------------------------------------------------------------------------
# Sequence and epoch rules, on a running broker.

def test_duplicate_returns_original_offset_and_writes_once(broker):
    broker.create_topic("dup", 1)
    cli = client(broker)
    p = Prod(cli, "dup", 0, new_pid(cli))
    off = p.ok(3)
    assert off == 0
    b = p.sent[-1]
    for _ in range(3):
        assert p.resend(b) == (0, off)
    assert end_offset(cli, "dup") == 3
    nb, nr, keys = log_summary(cli, "dup")
    assert (nb, nr) == (1, 3), keys
    assert keys == [(p.pid, 0, 0, 3, 0)]
    # The producer carries on after its duplicate as if nothing happened.
    assert p.ok(2) == 3
    assert end_offset(cli, "dup") == 5


def test_last_five_batches_deduplicated_sixth_refused(broker):
    broker.create_topic("five", 1)
    cli = client(broker)
    p = Prod(cli, "five", 0, new_pid(cli))
    for n in (1, 2, 3, 1, 4, 2, 5):
        p.ok(n)
    end = end_offset(cli, "five")
    assert end == 18
    # Any of the last five, in any order, is answered with its offset.
    last5 = p.sent[-5:]
    for b in reversed(last5):
        assert p.resend(b) == (0, b["offset"]), b["base_seq"]
    for b in random.sample(last5, 5):
        assert p.resend(b) == (0, b["offset"]), b["base_seq"]
    # The 6th and 7th back are no longer remembered: out of order.
    for b in p.sent[:2]:
        err, _ = p.resend(b)
        assert err == OOO, (b["base_seq"], err)
    assert end_offset(cli, "five") == end
    nb, nr, _ = log_summary(cli, "five")
    assert (nb, nr) == (7, 18)


def test_sequence_gap_refused_nothing_written(broker):
    broker.create_topic("gap", 1)
    cli = client(broker)
    p = Prod(cli, "gap", 0, new_pid(cli))
    p.ok(2)
    p.ok(2)
    for seq in (5, 100, (p.seq + 3) % SEQ_MOD, kw.INT32_MAX, 1):
        err, _, _ = p.send(2, seq=seq)
        assert err == OOO, (seq, err)
        assert p.seq == 4
    assert end_offset(cli, "gap") == 4
    # A batch overlapping the last one without matching it is no
    # duplicate either.
    err, _, _ = p.send(3, seq=2)
    assert err == OOO
    assert end_offset(cli, "gap") == 4
    assert p.ok(2) == 4
    nb, nr, _ = log_summary(cli, "gap")
    assert (nb, nr) == (3, 6)


def test_epoch_fencing_and_new_epoch_must_start_at_zero(broker):
    broker.create_topic("epoch", 1)
    cli = client(broker)
    pid = new_pid(cli)
    old = Prod(cli, "epoch", 0, pid, epoch=0)
    old.ok(2)
    old.ok(2)
    first_dup = old.sent[-1]
    # The producer moves to epoch 3 on its own, as the Java client bumps
    # an idempotent producer's epoch (KIP-360); the partition still only
    # knows epoch 0.
    new = Prod(cli, "epoch", 0, pid, epoch=3)
    end = end_offset(cli, "epoch")
    err, _, _ = new.send(2, seq=4)
    assert err == OOO, "new epoch at non-zero sequence: %d" % err
    err, _, _ = new.send(2, seq=1)
    assert err == OOO
    assert end_offset(cli, "epoch") == end
    off = new.ok(2)
    assert off == end
    # The old epoch is fenced from now on, also for its duplicates.
    err, _, _ = old.send(2)
    assert err == FENCED, err
    assert old.resend(first_dup)[0] == FENCED
    err, _, _ = old.send(2, epoch=2, seq=0)
    assert err == FENCED
    assert end_offset(cli, "epoch") == end + 2
    # The new epoch's own duplicate is still recognised.
    assert new.resend(new.sent[-1]) == (0, off)
    got = producers(cli, "epoch")
    assert got[pid]["producer_epoch"] == 3
    assert got[pid]["last_sequence"] == 1


def test_sequence_wraps_after_int32_max(broker):
    broker.create_topic("wrap", 1)
    cli = client(broker)
    # A producer id the partition does not know may start anywhere.
    p = Prod(cli, "wrap", 0, new_pid(cli), seq=kw.INT32_MAX - 2)
    assert p.ok(3) == 0
    assert p.seq == 0
    assert producers(cli, "wrap")[p.pid]["last_sequence"] == kw.INT32_MAX
    assert p.ok(2) == 3
    assert p.ok(2) == 5
    assert p.resend(p.sent[0]) == (0, 0)
    assert p.resend(p.sent[1]) == (0, 3)
    assert producers(cli, "wrap")[p.pid]["last_sequence"] == 3
    # Sequence INT32_MAX again is no longer in order.
    err, _, _ = p.send(1, seq=kw.INT32_MAX)
    assert err == OOO
    nb, nr, keys = log_summary(cli, "wrap")
    assert (nb, nr) == (3, 7), keys
    assert [k[2] for k in keys] == [kw.INT32_MAX - 2, 0, 2]


def test_two_producers_interleaved(broker):
    broker.create_topic("two", 1)
    cli = client(broker)
    a = Prod(cli, "two", 0, new_pid(cli))
    b = Prod(cli, "two", 0, new_pid(cli))
    assert a.pid != b.pid
    for i in range(6):
        a.ok(1 + i % 3)
        b.ok(2)
        # Each one's duplicates, and each one's gaps, are its own.
        assert a.resend(a.sent[-1]) == (0, a.sent[-1]["offset"])
        assert b.resend(b.sent[-1]) == (0, b.sent[-1]["offset"])
        assert b.send(1, seq=a.seq + 7)[0] == OOO
    for x in (a, b):
        for s in x.sent[-5:]:
            assert x.resend(s) == (0, s["offset"])
    nb, nr, keys = log_summary(cli, "two")
    assert nb == 12
    assert nr == sum(s["n"] for s in a.sent + b.sent)
    assert [k[0] for k in keys] == [a.pid, b.pid] * 6
    got = producers(cli, "two")
    assert set(got) == {a.pid, b.pid}
    assert got[a.pid]["last_sequence"] == a.seq - 1
    assert got[b.pid]["last_sequence"] == b.seq - 1


def test_refused_batch_answered_promptly_at_acks_all(broker):
    """A Produce with acks=-1 that writes nothing has nothing to wait
    for: its error must come back at once, not with the next fsync."""
    broker.create_topic("refused", 1)
    cli = kw.Client(broker.port, timeout=3.0)
    p = Prod(cli, "refused", 0, new_pid(cli))
    p.ok(1)
    time.sleep(0.2)                     # let that append's sync finish
    t0 = time.monotonic()
    err, _, _ = p.send(1, seq=5)
    assert err == OOO
    assert time.monotonic() - t0 < 1.0


def test_transactional_batch_refused_without_transaction(broker):
    broker.create_topic("txn", 1)
    cli = client(broker)
    pid = new_pid(cli)
    batch = kw.record_batch([b"x"], pid, 0, 0, transactional=True)
    err, _ = cli.produce("txn", 0, batch, acks=ACKS)
    assert err == kw.INVALID_TXN_STATE, err
    assert end_offset(cli, "txn") == 0


def test_describe_producers_fields(broker):
    broker.create_topic("desc", 2)
    cli = client(broker)
    a = Prod(cli, "desc", 0, new_pid(cli))
    b = Prod(cli, "desc", 1, new_pid(cli))
    ts = int(time.time() * 1000) - 5000
    a.ok(3, ts=ts)
    a.ok(4, ts=ts + 100)
    b.ok(1, ts=ts + 7)
    got = cli.describe_producers("desc", [0, 1])
    assert set(got) == {0, 1}
    (err0, p0), (err1, p1) = got[0], got[1]
    assert err0 == err1 == 0
    assert p0 == [{"producer_id": a.pid, "producer_epoch": 0,
                   "last_sequence": 6, "last_timestamp": ts + 103,
                   "coordinator_epoch": -1,
                   "current_txn_start_offset": -1}]
    assert p1 == [{"producer_id": b.pid, "producer_epoch": 0,
                   "last_sequence": 0, "last_timestamp": ts + 7,
                   "coordinator_epoch": -1,
                   "current_txn_start_offset": -1}]
    # A duplicate changes nothing.
    a.resend(a.sent[0])
    assert producers(cli, "desc", 0)[a.pid] == p0[0]
    # A topic nobody wrote to lists no producers.
    broker.create_topic("empty", 1)
    assert cli.describe_producers("empty", [0]) == {0: (0, [])}


def test_init_producer_id_versions_and_distinct_across_restarts(broker):
    cli = client(broker)
    ids = []
    for version in (0, 1, 2, 3, 4, 5):
        for _ in range(3):
            ids.append(new_pid(cli, version))
    cli.close()
    broker.restart()
    cli = client(broker)
    for version in (1, 4):
        for _ in range(5):
            ids.append(new_pid(cli, version))
    cli.close()
    broker.kill9()
    broker.start()
    cli = client(broker)
    for _ in range(5):
        ids.append(new_pid(cli))
    assert len(set(ids)) == len(ids), ids
    # Naming an id from before the restarts (v3+, KIP-360) gets a new
    # one too: as in Kafka, an idempotent producer never keeps its id.
    err, pid, epoch = cli.init_producer_id(version=4, producer_id=ids[0],
                                           producer_epoch=0)
    assert err == 0 and pid not in ids and epoch == 0, (err, pid, epoch)


KAFKA_STORAGE_ERROR = 56


def test_init_producer_id_waits_for_durable_block(broker):
    """Producer-id blocks are written on a worker, and a request that
    finds no durable id waits for the write: when the write fails (fail
    point) the waiting InitProducerId gets KAFKA_STORAGE_ERROR, never an
    id that is not on disk, and the broker goes on; with writes working
    again ids come."""
    broker.stop()
    broker.failpoints = "pid.write=error"
    broker.start()
    cli = client(broker)
    for _ in range(2):
        err, pid, _ = cli.init_producer_id()
        assert (err, pid) == (KAFKA_STORAGE_ERROR, -1), (err, pid)
    cli.close()
    broker.failpoints = None
    broker.restart()
    cli = client(broker)
    ids = [new_pid(cli) for _ in range(3)]
    assert ids == sorted(set(ids)), ids
    cli.close()


def test_init_producer_id_with_current_id_gives_new_id(broker):
    """InitProducerId without a transactional id but with the producer's
    id and epoch (v3+, what librdkafka sends to bump after a sequence
    error) hands out a new id at epoch 0, as Kafka does; the old id's
    batches still count as its own."""
    broker.create_topic("newid", 1)
    cli = client(broker)
    pid = new_pid(cli)
    old = Prod(cli, "newid", 0, pid)
    assert old.ok(2) == 0
    seen = {pid}
    for version in (3, 4, 5):
        for epoch in (0, 5, 32766):
            err, pid2, epoch2 = cli.init_producer_id(
                version=version, producer_id=pid, producer_epoch=epoch)
            assert err == 0 and epoch2 == 0 and pid2 not in seen, \
                (version, epoch, err, pid2, epoch2)
            seen.add(pid2)
    # An id this broker never handed out is no error either.
    err, pid3, epoch3 = cli.init_producer_id(
        version=4, producer_id=max(seen) + 10 ** 6, producer_epoch=0)
    assert err == 0 and pid3 not in seen and epoch3 == 0
    new = Prod(cli, "newid", 0, pid2)
    assert new.ok(1) == 2
    assert old.ok(1) == 3
    assert sorted(producers(cli, "newid")) == sorted([pid, pid2])


# ---------------------------------------------------------------------------
# Restarts: snapshots, a corrupt snapshot, and log replay.

def dup_answers(prods):
    """The broker's answer to a duplicate of each producer's last five
    batches, as {(pid, base_seq): (error, offset)}."""
    out = {}
    for p in prods:
        for b in p.sent[-5:]:
            out[(p.pid, b["base_seq"])] = p.resend(b)
    return out


def snapshots(broker, topic, partition):
    d = Path(broker.data_dir) / ("%s-%d" % (topic, partition))
    return sorted(d.glob("*.snapshot"))


def test_clean_and_crash_restart_give_same_state(broker_factory):
    broker = broker_factory()
    topic = "rst"
    # Small segments: every roll writes a snapshot, so a corrupt newest
    # one leaves older ones to fall back on.
    broker.create_topic(topic, 2, config={"segment.bytes": "2000"})
    cli = client(broker)
    prods = []
    for part in (0, 1):
        for _ in range(2):
            prods.append(Prod(cli, topic, part, new_pid(cli)))
    for i in range(30):
        for p in prods:
            p.ok(1 + (i + p.partition) % 3)
        if i == 10:
            # One producer moves to a new epoch: fencing must survive too.
            bumped = prods[3]
            stale = Prod(cli, topic, bumped.partition, bumped.pid, 0,
                         bumped.seq)
            bumped.epoch, bumped.seq = 1, 0
    ends = [end_offset(cli, topic, part) for part in (0, 1)]
    table = {part: producers(cli, topic, part) for part in (0, 1)}
    assert len(table[0]) == len(table[1]) == 2
    answers = dup_answers(prods)
    assert all(a[0] == 0 for a in answers.values()), answers
    assert all(answers[(p.pid, b["base_seq"])][1] == b["offset"]
               for p in prods for b in p.sent[-5:])
    cli.close()

    # (a) Clean restart: a snapshot at the log end, nothing replayed.
    assert broker.stop() == 0
    snaps = [snapshots(broker, topic, part) for part in (0, 1)]
    broker.start()
    for part in (0, 1):
        assert len(snaps[part]) >= 2, snaps
        assert snaps[part][-1].name == "%020d.snapshot" % ends[part], snaps
    lines = state_lines(broker)
    for part in (0, 1):
        assert lines.get((topic, part)) == (ends[part], 0), \
            "after clean restart: %r\n%s" % (lines, broker.log_tail())
    cli = client(broker)
    for p in prods:
        p.cli = cli
    assert {part: producers(cli, topic, part) for part in (0, 1)} == table
    assert dup_answers(prods) == answers
    assert [end_offset(cli, topic, part) for part in (0, 1)] == ends
    stale.cli = cli
    assert stale.send(1)[0] == FENCED
    cli.close()

    # (b) Crash restart with the newest snapshot of each partition cut in
    # half: it must be ignored (WARN naming it) and the state rebuilt
    # from an older snapshot plus the log.  Nothing is written meanwhile,
    # so the broker has no reason to touch the files before it dies.
    cut = []
    for part in (0, 1):
        newest = snapshots(broker, topic, part)[-1]
        os.truncate(newest, newest.stat().st_size // 2)
        cut.append(newest)
    broker.kill9()
    broker.start()
    lines = state_lines(broker)
    log = log_since_last_start(broker)
    for part in (0, 1):
        warned = [ln for ln in log.splitlines()
                  if "WARN" in ln and cut[part].name in ln]
        assert warned, "no WARN naming %s:\n%s" % (cut[part], log[-3000:])
        snap, replayed = lines.get((topic, part), (None, None))
        assert snap is not None, "no state line:\n%s" % log[-3000:]
        assert snap < ends[part] and replayed > 0, (part, snap, replayed)
    cli = client(broker)
    for p in prods:
        p.cli = cli
    assert {part: producers(cli, topic, part) for part in (0, 1)} == table
    assert dup_answers(prods) == answers
    assert [end_offset(cli, topic, part) for part in (0, 1)] == ends
    stale.cli = cli
    assert stale.send(1)[0] == FENCED
    assert table[1][bumped.pid]["producer_epoch"] == 1

    # (c) Crash with batches no snapshot covers: replayed from the log.
    for i in range(4):
        for p in prods:
            p.ok(2)
    table = {part: producers(cli, topic, part) for part in (0, 1)}
    answers = dup_answers(prods)
    ends = [end_offset(cli, topic, part) for part in (0, 1)]
    cli.close()
    broker.kill9()
    broker.start()
    lines = state_lines(broker)
    for part in (0, 1):
        # A roll among the new batches may have left a newer snapshot.
        snap, replayed = lines[(topic, part)]
        assert snap <= ends[part], (part, snap, replayed)
    cli = client(broker)
    for p in prods:
        p.cli = cli
    assert {part: producers(cli, topic, part) for part in (0, 1)} == table
    assert dup_answers(prods) == answers
    # Each producer goes on in sequence, and a gap is still refused.
    for p in prods:
        assert p.send(1, seq=p.seq + 1)[0] == OOO
        p.ok(1)
    assert [end_offset(cli, topic, part) for part in (0, 1)] == \
        [e + 2 for e in ends]


def test_restart_without_any_snapshot_replays_log(broker_factory):
    """All snapshots gone: the whole log is replayed (snapshot -1)."""
    broker = broker_factory()
    broker.create_topic("nosnap", 1)
    cli = client(broker)
    p = Prod(cli, "nosnap", 0, new_pid(cli))
    for _ in range(8):
        p.ok(3)
    table = producers(cli, "nosnap")
    answers = dup_answers([p])
    cli.close()
    broker.kill9()
    for s in snapshots(broker, "nosnap", 0):
        s.unlink()
    broker.start()
    assert state_lines(broker).get(("nosnap", 0)) == (-1, 8), \
        broker.log_tail()
    cli = client(broker)
    p.cli = cli
    assert producers(cli, "nosnap") == table
    assert dup_answers([p]) == answers


# ---------------------------------------------------------------------------
# Expiry.

def test_idle_producer_expires(broker_factory):
    broker = broker_factory(**{"producer.id.expiration.ms": "2000",
                               "producer.id.expiration.check.interval.ms":
                               "500"})
    broker.create_topic("exp", 1)
    cli = client(broker)
    idle = Prod(cli, "exp", 0, new_pid(cli))
    busy = Prod(cli, "exp", 0, new_pid(cli))
    for _ in range(3):
        idle.ok(2)
    busy.ok(1)
    assert set(producers(cli, "exp")) == {idle.pid, busy.pid}
    t0 = time.monotonic()
    gone_after = None
    while time.monotonic() - t0 < 10 * SLOW:
        busy.ok(1)          # keeps its last timestamp fresh
        got = producers(cli, "exp")
        assert busy.pid in got
        if idle.pid not in got:
            gone_after = time.monotonic() - t0
            break
        time.sleep(0.25)
    assert gone_after is not None, "idle producer never expired"
    assert gone_after > 1.0, "expired after %.1fs" % gone_after
    # A crash restart replays the idle producer's batches from the log;
    # being long idle, it must expire again rather than come back.
    cli.close()
    broker.kill9()
    broker.start()
    cli = client(broker)
    idle.cli = busy.cli = cli
    deadline = time.monotonic() + 3 * SLOW
    while idle.pid in producers(cli, "exp"):
        assert time.monotonic() < deadline, "expired producer came back"
        time.sleep(0.1)
    # Its state is gone: an old duplicate is no longer recognised, and a
    # batch at any sequence is accepted as from an unknown producer.
    end = end_offset(cli, "exp")
    err, off, _ = idle.send(2, seq=17)
    assert (err, off) == (0, end)
    got = producers(cli, "exp")[idle.pid]
    assert got["last_sequence"] == 18 and got["producer_epoch"] == 0
    assert idle.ok(1) == end + 2


# ---------------------------------------------------------------------------
# librdkafka's idempotent producer under repeated kill -9.

PARTITIONS = 6


def count_lines(path):
    try:
        with open(path, "rb") as f:
            return sum(1 for _ in f)
    except FileNotFoundError:
        return 0


def test_idempotent_producer_survives_kill9(broker, background, tmp_path):
    topic = "idemcrash"
    # Small segments: the crashes also hit rolls and their snapshots.
    broker.create_topic(topic, PARTITIONS,
                        config={"segment.bytes": str(128 << 10)})
    count = scaled(500000)
    rate = 50000 // SLOW
    acked = str(tmp_path / "acked.txt")
    prod = background([tool("e2e_idem_producer"), "--brokers",
                       broker.bootstrap, "--topic", topic, "--partitions",
                       str(PARTITIONS), "--acked-file", acked,
                       "--count", str(count), "--rate", str(rate),
                       "--timeout-ms", str(60000 * SLOW)], name="producer")
    for crash in range(3):
        target = count * (crash + 1) // 5
        deadline = time.monotonic() + 30 * SLOW
        while count_lines(acked) < target:
            assert time.monotonic() < deadline, \
                "no progress before crash %d:\n%s" % (crash,
                                                     prod.output()[-3000:])
            assert prod.proc.poll() is None, prod.output()[-3000:]
            time.sleep(0.05)
        time.sleep(random.uniform(0.0, 0.3))
        broker.kill9()
        time.sleep(0.3)
        broker.start()
    try:
        rc = prod.proc.wait(timeout=120 * SLOW)
    except Exception:
        rc = prod.stop(timeout=5)
    out = prod.output()
    print(out[-3000:])
    assert rc == 0, out[-3000:]
    assert "failed=0 " in out and "fatal=none" in out, out[-3000:]
    assert count_lines(acked) == count
    res = run([tool("e2e_verify"), "--brokers", broker.bootstrap,
               "--topic", topic, "--partitions", str(PARTITIONS),
               "--acked-file", acked, "--check-gaps"], timeout=120 * SLOW)
    print(res.stdout)
    assert res.returncode == 0, res.stdout + res.stderr[-3000:]
    assert "e2e_verify: ok" in res.stdout
    assert "unacked_present=0 " in res.stdout and "gaps=0 " in res.stdout
