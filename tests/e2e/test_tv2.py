"""Transaction version 2 (KIP-890 part 2) over the raw protocol, playing
the sequence of a Java 4.x transactional producer: ApiVersions shows
transaction.version finalized at 2, InitProducerId, transactional
batches without AddPartitionsToTxn (the partition joins on produce),
EndTxn v5 bumping the epoch on every commit and abort, late requests of
the previous transaction refused, read_committed readers seeing what was
committed; AddPartitionsToTxn v4/v5 (the batched broker form);
cairn.transaction.version=1 keeping EndTxn v5 without the bump; and a
restart keeping the epoch and the ClientTransactionVersion."""

import struct
import time

import kafka_wire as kw
from conftest import SLOW, needs_cairn

pytestmark = needs_cairn

TOPIC = "tv2"
TXN_TOPIC = "__transaction_state"
RETRIABLE = (kw.COORDINATOR_NOT_AVAILABLE, kw.COORDINATOR_LOAD_IN_PROGRESS,
             kw.NOT_COORDINATOR, kw.CONCURRENT_TRANSACTIONS)


def retry(fn, timeout=10 * SLOW):
    """Call fn until its result (or its first item) is not retriable."""
    deadline = time.monotonic() + timeout
    while True:
        res = fn()
        code = res[0] if isinstance(res, tuple) else res
        if code not in RETRIABLE or time.monotonic() > deadline:
            return res
        time.sleep(0.05)


def start_txn_id(broker, tid, partitions=2):
    broker.create_topic(TOPIC, partitions)
    cli = kw.Tv2ProduceClient(broker.port)
    coords = retry(lambda: (cli.find_coordinator(tid)[0]["error"],))
    assert coords == (0,), coords
    err, pid, epoch = retry(lambda: cli.init_producer_id(
        version=4, transactional_id=tid, txn_timeout_ms=60000))
    assert err == 0
    return cli, pid, epoch


def produce(cli, tid, pid, epoch, seq, partition, values, version=12):
    """Produce v12 as a TV2 Java client does (or an older version)."""
    batch = kw.record_batch(values, producer_id=pid, producer_epoch=epoch,
                            base_sequence=seq, transactional=True)
    return cli.produce(TOPIC, partition, batch, transactional_id=tid,
                       version=version)


def describe(cli, tid):
    return cli.describe_transactions([tid])[tid]


def wait_state(cli, tid, state, timeout=10 * SLOW):
    deadline = time.monotonic() + timeout
    while True:
        d = describe(cli, tid)
        if d["state"] == state or time.monotonic() > deadline:
            assert d["state"] == state, d
            return d
        time.sleep(0.05)


def committed_values(cli, partition):
    """Values of the data records a read_committed reader keeps (the
    aborted transactions list applied as the Java consumer does)."""
    got = cli.fetch_committed(TOPIC, partition)
    assert got["error"] == 0, got
    pending = sorted(got["aborted"] or [], key=lambda a: a[1])
    skipping = set()
    out = []
    for b in got["batches"]:
        while pending and pending[0][1] <= b["base_offset"]:
            skipping.add(pending.pop(0)[0])
        if b["attributes"] & kw.ATTR_CONTROL:
            if (b["control"] or (None,))[0] == kw.CONTROL_ABORT:
                skipping.discard(b["producer_id"])
            continue
        if b["attributes"] & kw.ATTR_TRANSACTIONAL and \
                b["producer_id"] in skipping:
            continue
        out += [r[2] for r in b["records"]]
    return out, got


def java_hash(s):
    """Java's String.hashCode."""
    units = s.encode("utf-16-be")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + struct.unpack_from(">H", units, i)[0]) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def txn_log_partition(tid, partitions=50):
    h = java_hash(tid)
    return 0 if h == -(1 << 31) else abs(h) % partitions


def client_tv_of(value):
    """ClientTransactionVersion (tag 2) of a TransactionLogValue v1, with
    the producer id and epoch: (client_tv, producer_id, epoch)."""
    r = kw.Reader(value)
    version = r.i16()
    pid, epoch = r.i64(), r.i16()
    r.i32()                               # timeout
    r.i8()                                # status
    if version < 1:
        return 0, pid, epoch
    n = r.uvarint() - 1                   # partitions (null: -1)
    for _ in range(max(n, 0)):
        r.compact_string()
        for _ in range(r.uvarint() - 1):
            r.i32()
        r.skip_tags()
    r.i64()
    r.i64()
    tv = 0
    for _ in range(r.uvarint()):
        tag, size = r.uvarint(), r.uvarint()
        end = r.pos + size
        if tag == 2:
            tv = r.i16()
        r.pos = end
    return tv, pid, epoch


def last_log_record(cli, tid):
    """(client_tv, producer_id, epoch) of tid's newest record in
    __transaction_state."""
    part = txn_log_partition(tid)
    newest = None
    for b in cli.fetch_full(TXN_TOPIC, part):
        for r in b["records"]:
            _, key, value = r
            if key and key[4:].decode() == tid and value is not None:
                newest = value
    assert newest is not None, "no record for %s in %s-%d" % (
        tid, TXN_TOPIC, part)
    return client_tv_of(newest)


def test_api_versions_features(broker_factory):
    b2 = broker_factory()
    cli = kw.Tv2Client(b2.port)
    v3 = cli.api_versions_features(3)
    assert v3["error"] == 0
    assert v3["apis"][26][1] == 5, v3["apis"][26]        # EndTxn
    assert v3["apis"][24][1] == 5, v3["apis"][24]        # AddPartitionsToTxn
    # Produce from v0, as Kafka 4.x lists it for librdkafka's compression
    # check (KAFKA-18659); v0-2 requests are still refused.
    assert v3["apis"][0] == (0, 12), v3["apis"][0]       # Produce
    # Before v4 a minimum of 0 reads as 1 (KAFKA-17011).
    assert v3["supported"][kw.FEATURE_TXN_VERSION] == (1, 2)
    assert v3["finalized"][kw.FEATURE_TXN_VERSION] == (2, 2)
    assert v3["finalized_epoch"] >= 0
    v4 = cli.api_versions_features(4)
    assert v4["supported"][kw.FEATURE_TXN_VERSION] == (0, 2)
    assert v4["finalized"][kw.FEATURE_TXN_VERSION] == (2, 2)
    # Versions without tagged fields still parse as before.
    assert cli.api_versions()[18] == (0, 4)
    cli.close()
    b1 = broker_factory(**{"cairn.transaction.version": "1"})
    cli = kw.Tv2Client(b1.port)
    assert cli.api_versions_features(4)["finalized"][
        kw.FEATURE_TXN_VERSION] == (1, 1)
    cli.close()
    b0 = broker_factory(**{"cairn.transaction.version": "0"})
    cli = kw.Tv2Client(b0.port)
    f = cli.api_versions_features(4)
    assert kw.FEATURE_TXN_VERSION not in f["finalized"], f
    assert f["supported"][kw.FEATURE_TXN_VERSION] == (0, 2)
    cli.close()


def test_tv2_java_client_sequence(broker):
    tid = "tv2-seq"
    cli, pid, e0 = start_txn_id(broker, tid)
    f = cli.api_versions_features(4)
    assert f["finalized"][kw.FEATURE_TXN_VERSION] == (2, 2)

    # Kafka's rule: only Produce v12 adds; v11 and below verify.
    err, _ = produce(cli, tid, pid, e0, 0, 0, [b"v11"], version=11)
    assert err == kw.INVALID_TXN_STATE, err
    # Transaction 1: no AddPartitionsToTxn, the produce adds the partition.
    err, base = produce(cli, tid, pid, e0, 0, 0, [b"a1", b"a2"])
    assert err == 0, err
    d = describe(cli, tid)
    assert d["state"] == "Ongoing" and d["topics"] == {TOPIC: [0]}, d
    assert d["producer_epoch"] == e0
    err, base2 = produce(cli, tid, pid, e0, 2, 0, [b"a3"])
    assert (err, base2) == (0, base + 2)

    err, rpid, repoch = cli.end_txn_v5(tid, pid, e0, True)
    assert (err, rpid, repoch) == (0, pid, e0 + 1)
    d = wait_state(cli, tid, "CompleteCommit")
    assert (d["producer_id"], d["producer_epoch"]) == (pid, e0 + 1), d

    # The marker carries the bumped epoch.
    batches = cli.fetch_full(TOPIC, 0)
    ctl = [b for b in batches if b["attributes"] & kw.ATTR_CONTROL]
    assert len(ctl) == 1 and ctl[0]["producer_epoch"] == e0 + 1, ctl

    # A retry of that EndTxn (old epoch) gets success and the current
    # epoch; an abort at the old epoch does not match what happened.
    assert cli.end_txn_v5(tid, pid, e0, True) == (0, pid, e0 + 1)
    assert cli.end_txn_v5(tid, pid, e0, False)[0] == kw.INVALID_TXN_STATE
    # A late batch of transaction 1 is fenced by the partition.
    err, _ = produce(cli, tid, pid, e0, 3, 0, [b"late"])
    assert err == kw.INVALID_PRODUCER_EPOCH, err

    # Transaction 2 at the bumped epoch, sequences from 0, two partitions.
    e1 = e0 + 1
    assert produce(cli, tid, pid, e1, 0, 0, [b"b1"])[0] == 0
    assert produce(cli, tid, pid, e1, 0, 1, [b"b2"])[0] == 0
    d = describe(cli, tid)
    assert d["state"] == "Ongoing" and d["topics"] == {TOPIC: [0, 1]}, d
    # Now the old epoch is stale, not a retry.
    assert cli.end_txn_v5(tid, pid, e0, True)[0] == kw.PRODUCER_FENCED
    assert cli.end_txn_v5(tid, pid, e1 + 1, True)[0] == kw.PRODUCER_FENCED
    assert cli.end_txn_v5(tid, pid, e1, True) == (0, pid, e1 + 1)
    wait_state(cli, tid, "CompleteCommit")

    # Transaction 3 is aborted; its data stays invisible.
    e2 = e1 + 1
    assert produce(cli, tid, pid, e2, 0, 0, [b"c1"])[0] == 0
    assert cli.end_txn_v5(tid, pid, e2, False) == (0, pid, e2 + 1)
    wait_state(cli, tid, "CompleteAbort")
    # TV2: an abort with nothing open is allowed and bumps too.
    assert cli.end_txn_v5(tid, pid, e2 + 1, False) == (0, pid, e2 + 2)
    d = wait_state(cli, tid, "CompleteAbort")
    assert d["producer_epoch"] == e2 + 2
    # ... but a commit with nothing open is not.
    assert cli.end_txn_v5(tid, pid, e2 + 2, True)[0] == kw.INVALID_TXN_STATE

    vals0, got0 = committed_values(cli, 0)
    vals1, _ = committed_values(cli, 1)
    assert vals0 == [b"a1", b"a2", b"a3", b"b1"], (vals0, got0)
    assert vals1 == [b"b2"]
    assert got0["last_stable_offset"] == got0["high_watermark"]
    assert last_log_record(cli, tid) == (2, pid, e2 + 2)
    cli.close()


def test_batched_add_partitions(broker):
    tid = "tv2-batched"
    cli, pid, e0 = start_txn_id(broker, tid)
    txn = {"transactional_id": tid, "producer_id": pid,
           "producer_epoch": e0, "topics": {TOPIC: [0, 1]}}
    err, res = cli.add_partitions_batched([dict(txn, verify_only=True)])
    assert err == 0
    assert res[tid] == {(TOPIC, 0): kw.INVALID_TXN_STATE,
                        (TOPIC, 1): kw.INVALID_TXN_STATE}, res
    err, res = cli.add_partitions_batched([dict(txn, verify_only=False)], 5)
    assert (err, res[tid]) == (0, {(TOPIC, 0): 0, (TOPIC, 1): 0}), res
    d = describe(cli, tid)
    assert d["state"] == "Ongoing" and d["topics"] == {TOPIC: [0, 1]}, d
    err, res = cli.add_partitions_batched([dict(txn, verify_only=True)])
    assert res[tid] == {(TOPIC, 0): 0, (TOPIC, 1): 0}, res
    # Wrong epoch, unknown id, unknown partition, in one request.
    err, res = cli.add_partitions_batched([
        dict(txn, producer_epoch=e0 + 5, verify_only=True),
        dict(txn, transactional_id="nobody", verify_only=False),
    ])
    assert set(res[tid].values()) == {kw.PRODUCER_FENCED}, res
    assert set(res["nobody"].values()) == {kw.INVALID_PRODUCER_ID_MAPPING}
    err, res = cli.add_partitions_batched([dict(
        txn, topics={TOPIC: [0, 7]}, verify_only=False)])
    assert res[tid] == {(TOPIC, 0): kw.OPERATION_NOT_ATTEMPTED,
                        (TOPIC, 7): kw.UNKNOWN_TOPIC_OR_PARTITION}, res
    assert cli.end_txn_v5(tid, pid, e0, False) == (0, pid, e0 + 1)
    wait_state(cli, tid, "CompleteAbort")
    cli.close()


def test_tv1_client_keeps_tv1(broker):
    """A client that adds its partitions (TV1) is not added for on
    produce: its late batch is refused, as KIP-890 part 1 wants."""
    tid = "tv2-tv1client"
    cli, pid, e0 = start_txn_id(broker, tid)
    assert cli.add_partitions(tid, pid, e0, {TOPIC: [0]}, version=3) == {
        (TOPIC, 0): 0}
    assert produce(cli, tid, pid, e0, 0, 0, [b"x"], version=11)[0] == 0
    assert cli.end_txn(tid, pid, e0, True, version=4) == 0
    wait_state(cli, tid, "CompleteCommit")
    assert describe(cli, tid)["producer_epoch"] == e0
    err, _ = produce(cli, tid, pid, e0, 1, 0, [b"late"], version=11)
    assert err == kw.INVALID_TXN_STATE, err
    cli.close()


def test_level_1_no_bump(broker_factory):
    broker = broker_factory(**{"cairn.transaction.version": "1"})
    tid = "tv2-level1"
    cli, pid, e0 = start_txn_id(broker, tid)
    # No implicit add below level 2: the verification refuses.
    err, _ = produce(cli, tid, pid, e0, 0, 0, [b"x"])
    assert err == kw.INVALID_TXN_STATE, err
    assert cli.add_partitions(tid, pid, e0, {TOPIC: [0]}, version=3) == {
        (TOPIC, 0): 0}
    assert produce(cli, tid, pid, e0, 0, 0, [b"x"])[0] == 0
    assert cli.end_txn_v5(tid, pid, e0, True) == (0, pid, e0)
    d = wait_state(cli, tid, "CompleteCommit")
    assert d["producer_epoch"] == e0
    # TV1 retry: the same epoch again.
    assert cli.end_txn_v5(tid, pid, e0, True) == (0, pid, e0)
    ctl = [b for b in cli.fetch_full(TOPIC, 0)
           if b["attributes"] & kw.ATTR_CONTROL]
    assert [b["producer_epoch"] for b in ctl] == [e0]
    assert last_log_record(cli, tid)[0] == 1
    cli.close()


def test_restart_keeps_tv2(broker):
    tid = "tv2-restart"
    cli, pid, e0 = start_txn_id(broker, tid)
    assert produce(cli, tid, pid, e0, 0, 0, [b"r1"])[0] == 0
    assert cli.end_txn_v5(tid, pid, e0, True) == (0, pid, e0 + 1)
    wait_state(cli, tid, "CompleteCommit")
    cli.close()

    broker.kill9()
    broker.start()
    cli = kw.Tv2ProduceClient(broker.port)
    d = wait_state(cli, tid, "CompleteCommit")
    assert (d["producer_id"], d["producer_epoch"]) == (pid, e0 + 1), d
    assert last_log_record(cli, tid) == (2, pid, e0 + 1)
    # Still TV2 after the restart: the retry rule, and the implicit add
    # even below Produce v12 for this producer, which is known to use TV2.
    assert cli.end_txn_v5(tid, pid, e0, True) == (0, pid, e0 + 1)
    assert produce(cli, tid, pid, e0 + 1, 0, 0, [b"r2"], version=11)[0] == 0
    assert cli.end_txn_v5(tid, pid, e0 + 1, True) == (0, pid, e0 + 2)
    wait_state(cli, tid, "CompleteCommit")

    broker.restart()
    cli = kw.Tv2ProduceClient(broker.port)
    d = wait_state(cli, tid, "CompleteCommit")
    assert d["producer_epoch"] == e0 + 2
    assert last_log_record(cli, tid) == (2, pid, e0 + 2)
    vals, _ = committed_values(cli, 0)
    assert vals == [b"r1", b"r2"]
    cli.close()


def test_txn_offset_commit_v5_joins_group_partition(broker_factory):
    """A TV2 client's sendOffsetsToTransaction is TxnOffsetCommit v5 with
    no AddOffsetsToTxn (KIP-890 part 2): the group's __consumer_offsets
    partition joins the transaction there, and the offsets become the
    group's when the commit marker lands.  v4 without AddOffsetsToTxn is
    still refused, and so is v5 while transaction.version is 1."""
    broker = broker_factory()
    tid, group = "tv2-offsets", "tv2-group"
    cli, pid, e0 = start_txn_id(broker, tid)
    reader = kw.ReadClient(broker.port)
    assert retry(lambda: (reader.find_coordinator(group, key_type=0)[0][
        "error"],)) == (0,)
    assert produce(cli, tid, pid, e0, 0, 0, [b"out"])[0] == 0
    # v4: the TV1 rule, the group's partition must be added first.
    assert cli.txn_offset_commit(tid, group, pid, e0, {(TOPIC, 0): 1},
                                 version=4) == {(TOPIC, 0): kw.INVALID_TXN_STATE}
    assert cli.txn_offset_commit(tid, group, pid, e0,
                                 {(TOPIC, 0): 1}) == {(TOPIC, 0): 0}
    d = describe(cli, tid)
    assert d["state"] == "Ongoing"
    assert len(d["topics"].get("__consumer_offsets", [])) == 1, d
    # Pending until the commit: a stable fetch says so.
    err, offs = reader.offset_fetch(group, {TOPIC: [0]}, require_stable=True)
    assert offs[(TOPIC, 0)][0] == kw.UNSTABLE_OFFSET_COMMIT, offs
    assert cli.end_txn_v5(tid, pid, e0, True)[0] == 0
    wait_state(cli, tid, "CompleteCommit")
    deadline = time.monotonic() + 10 * SLOW
    while True:
        err, offs = reader.offset_fetch(group, {TOPIC: [0]},
                                        require_stable=True)
        if offs[(TOPIC, 0)] == (0, 1) or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert err == 0 and offs[(TOPIC, 0)] == (0, 1), offs
    cli.close()
    reader.close()

    b1 = broker_factory(**{"cairn.transaction.version": "1"})
    cli, pid, e0 = start_txn_id(b1, tid)
    assert cli.add_partitions(tid, pid, e0, {TOPIC: [0]}, version=3) == {
        (TOPIC, 0): 0}
    assert cli.txn_offset_commit(tid, group, pid, e0, {(TOPIC, 0): 1}) == {
        (TOPIC, 0): kw.INVALID_TXN_STATE}
    cli.close()


def test_coordinator_aborts_bump_once(broker_factory):
    """A coordinator-made abort (timeout, fence) bumps a TV2 producer's
    epoch once, as Kafka 4.1+ does (KAFKA-19367): the timed-out producer's
    EndTxn(abort) at its old epoch is then a retry of that abort, answered
    with the new epoch, so the Java client recovers (KIP-588); its late
    commit is refused.  After a fence the new instance's own bump leaves
    the zombie two epochs behind: fenced."""
    broker = broker_factory(**{
        "transaction.abort.timed.out.transaction.cleanup.interval.ms":
            "200"})
    tid = "tv2-timeout"
    broker.create_topic(TOPIC, 1)
    cli = kw.Tv2ProduceClient(broker.port)
    assert retry(lambda: (cli.find_coordinator(tid)[0]["error"],)) == (0,)
    err, pid, e0 = retry(lambda: cli.init_producer_id(
        version=5, transactional_id=tid, txn_timeout_ms=1000))
    assert err == 0
    assert produce(cli, tid, pid, e0, 0, 0, [b"slow"])[0] == 0
    d = wait_state(cli, tid, "CompleteAbort")
    assert d["producer_epoch"] == e0 + 1, d
    assert cli.end_txn_v5(tid, pid, e0, True)[0] == kw.INVALID_TXN_STATE
    assert cli.end_txn_v5(tid, pid, e0, False) == (0, pid, e0 + 1)
    # Carries on at the new epoch.
    assert produce(cli, tid, pid, e0 + 1, 0, 0, [b"again"])[0] == 0
    assert cli.end_txn_v5(tid, pid, e0 + 1, True) == (0, pid, e0 + 2)
    wait_state(cli, tid, "CompleteCommit")
    vals, _ = committed_values(cli, 0)
    assert vals == [b"again"], vals

    # Fence: an Ongoing transaction at E, a new instance's InitProducerId.
    e = e0 + 2
    assert produce(cli, tid, pid, e, 0, 0, [b"zombie"])[0] == 0
    new = kw.Tv2ProduceClient(broker.port)
    err, pid2, e_new = retry(lambda: new.init_producer_id(
        version=5, transactional_id=tid, txn_timeout_ms=60000))
    assert (err, pid2, e_new) == (0, pid, e + 2)
    ctl = [b for b in cli.fetch_full(TOPIC, 0)
           if b["attributes"] & kw.ATTR_CONTROL]
    assert ctl[-1]["producer_epoch"] == e + 1     # the fence's abort
    assert cli.end_txn_v5(tid, pid, e, True)[0] == kw.PRODUCER_FENCED
    assert cli.end_txn_v5(tid, pid, e, False)[0] == kw.PRODUCER_FENCED
    cli.close()
    new.close()
