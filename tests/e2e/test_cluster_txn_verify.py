"""KIP-890 verification asked of a coordinator on another broker (issue
#15): a transactional batch that opens a transaction on a partition must
be in the coordinator's Ongoing transaction, and when the partition's
leader is not the coordinator it asks the coordinator's broker with
AddPartitionsToTxn (VerifyOnly; for a transaction version 2 producer an
add), as Kafka's AddPartitionsToTxnManager does.

The topic "xv" is placed by hand, partition p led by node p + 1, RF 3;
each test picks a transactional id whose __transaction_state partition
node 1 leads, so partitions 1 and 2 are verified remotely.  Every broker
is killed by pid at teardown (cluster_factory); every wait is bounded.
"""

import time

import pytest
from confluent_kafka import Producer

import kafka_wire as kw
from conftest import SLOW, find_coordinator, needs_cairn, \
    txn_id_coordinated_by, wait_txn_state_led
from test_cluster_txn import create_spread, read_committed, txn_cluster

pytestmark = [needs_cairn]

REGISTER_S = 30 * SLOW
T = 30 * SLOW
PARTS = 3
TOPIC = "xv"
NOT_ENOUGH_REPLICAS = 19
RETRIABLE = (kw.COORDINATOR_NOT_AVAILABLE, kw.COORDINATOR_LOAD_IN_PROGRESS,
             kw.NOT_COORDINATOR, kw.CONCURRENT_TRANSACTIONS,
             NOT_ENOUGH_REPLICAS)


def retry(fn, timeout=20 * SLOW):
    """fn() until its result (or its first item) is not retriable."""
    deadline = time.monotonic() + timeout
    while True:
        res = fn()
        code = res[0] if isinstance(res, tuple) else res
        if code not in RETRIABLE or time.monotonic() > deadline:
            return res
        time.sleep(0.1)


def spread_cluster(cluster_factory, prefix):
    """The cluster, the placed topic, and a transactional id node 1
    coordinates."""
    c = txn_cluster(cluster_factory)
    create_spread(c, TOPIC)
    led = wait_txn_state_led(c, REGISTER_S)
    return c, txn_id_coordinated_by(led, 1, prefix)


def init_pid(cli, tid):
    err, pid, epoch = retry(lambda: cli.init_producer_id(
        version=4, transactional_id=tid, txn_timeout_ms=60000))
    assert err == 0, err
    return pid, epoch


def txn_batch(pid, epoch, seq, values):
    return kw.record_batch(values, producer_id=pid, producer_epoch=epoch,
                           base_sequence=seq, transactional=True)


def test_librdkafka_commit_abort_remote_verification(cluster_factory):
    """A TV1 client (librdkafka) writes to partitions two of which are led
    by brokers that are not its coordinator: each verifies remotely.  The
    commit's markers go to those brokers too, so this also needs the
    remote marker channel (markers_remote.c) and the coordinator's
    completion across brokers."""
    c, tid = spread_cluster(cluster_factory, "xv-rdk")
    p = Producer({"bootstrap.servers": c.bootstrap,
                  "transactional.id": tid, "linger.ms": 5})
    p.init_transactions(T)

    def txn(tag, commit, per=4):
        p.begin_transaction()
        for i in range(per * PARTS):
            p.produce(TOPIC, value=b"%s-%d" % (tag, i), partition=i % PARTS)
        assert p.flush(T) == 0
        if commit:
            p.commit_transaction(T)
        else:
            p.abort_transaction(T)
        return {q: [b"%s-%d" % (tag, i) for i in range(q, per * PARTS, PARTS)]
                for q in range(PARTS)}

    want = txn(b"c1", True)
    txn(b"a1", False)
    got = read_committed(c.bootstrap, TOPIC, PARTS, 4 * PARTS)
    assert got == want, got


def test_unadded_partition_refused_by_remote_leader(cluster_factory):
    """The raw protocol: node 2 leads xv-1, node 1 coordinates the id."""
    c, tid = spread_cluster(cluster_factory, "xv-raw")
    co = kw.Tv2Client(c.node(1).port, timeout=T)
    leader = kw.TxnClient(c.node(2).port, timeout=T)
    pid, epoch = init_pid(co, tid)
    end = leader.list_offset(TOPIC, 1)

    # Never added: the coordinator says not in the transaction, as a
    # single node answers (test_transactions.py).
    err, _ = retry(lambda: leader.produce(TOPIC, 1,
                                          txn_batch(pid, epoch, 0, [b"x"]),
                                          transactional_id=tid))
    assert err == kw.INVALID_TXN_STATE, err
    # Another producer id under the id, and a fenced epoch.
    err, _ = retry(lambda: leader.produce(
        TOPIC, 1, txn_batch(pid + 1000, epoch, 0, [b"x"]),
        transactional_id=tid))
    assert err == kw.INVALID_PRODUCER_ID_MAPPING, err
    err, _ = retry(lambda: leader.produce(
        TOPIC, 1, txn_batch(pid, epoch + 1, 0, [b"x"]),
        transactional_id=tid))
    assert err == kw.INVALID_PRODUCER_EPOCH, err
    assert leader.list_offset(TOPIC, 1) == end

    # A leader that is not the coordinator answers a broker's
    # verification NOT_COORDINATOR.
    ask = kw.Tv2Client(c.node(2).port, timeout=T)
    txn = {"transactional_id": tid, "producer_id": pid,
           "producer_epoch": epoch, "topics": {TOPIC: [0, 1]},
           "verify_only": True}
    err, res = ask.add_partitions_batched([txn])
    assert err == 0 and set(res[tid].values()) == {kw.NOT_COORDINATOR}, res
    ask.close()

    # Added at the coordinator: the remote leader's check passes.
    res = retry(lambda: (lambda r: (max(r.values()), r))(
        co.add_partitions(tid, pid, epoch, {TOPIC: [1]}, version=3)))
    assert res[0] == 0, res
    err, res = co.add_partitions_batched([txn])
    assert err == 0 and res[tid] == {(TOPIC, 0): kw.INVALID_TXN_STATE,
                                     (TOPIC, 1): 0}, res
    err, base = retry(lambda: leader.produce(
        TOPIC, 1, txn_batch(pid, epoch, 0, [b"a", b"b"]),
        transactional_id=tid))
    assert err == 0 and base == end, (err, base)
    # Open here now: no check, the next batch goes on.
    err, base = leader.produce(TOPIC, 1, txn_batch(pid, epoch, 2, [b"c"]),
                               transactional_id=tid)
    assert (err, base) == (0, end + 2)
    # Partition 2 (node 3) was not added: refused there.
    other = kw.TxnClient(c.node(3).port, timeout=T)
    err, _ = retry(lambda: other.produce(TOPIC, 2,
                                         txn_batch(pid, epoch, 0, [b"y"]),
                                         transactional_id=tid))
    assert err == kw.INVALID_TXN_STATE, err
    other.close()
    # The abort is decided; its markers to other brokers are another
    # part's (remote markers), not waited for here.
    assert co.end_txn(tid, pid, epoch, False, version=3) == 0
    leader.close()
    co.close()


def test_tv2_produce_adds_at_remote_coordinator(cluster_factory):
    """Produce v12 (transaction version 2) to a leader that is not the
    coordinator: the leader adds the partition there (AddPartitionsToTxn
    v5, VerifyOnly false); v11 only verifies."""
    c, tid = spread_cluster(cluster_factory, "xv-tv2")
    co = kw.Tv2Client(c.node(1).port, timeout=T)
    f = co.api_versions_features(4)
    if f["finalized"].get(kw.FEATURE_TXN_VERSION, (0, 0))[1] < 2:
        co.close()
        pytest.skip("transaction.version 2 is not finalized: %r" % f)
    pid, epoch = init_pid(co, tid)
    leader = kw.Tv2ProduceClient(c.node(2).port, timeout=T)
    other = kw.Tv2ProduceClient(c.node(3).port, timeout=T)

    err, _ = retry(lambda: other.produce(
        TOPIC, 2, txn_batch(pid, epoch, 0, [b"v11"]), transactional_id=tid,
        version=11))
    assert err == kw.INVALID_TXN_STATE, err
    err, base = retry(lambda: leader.produce(
        TOPIC, 1, txn_batch(pid, epoch, 0, [b"t1"]), transactional_id=tid))
    assert err == 0, err
    d = co.describe_transactions([tid])[tid]
    assert d["state"] == "Ongoing" and d["topics"] == {TOPIC: [1]}, d
    err, _ = retry(lambda: other.produce(
        TOPIC, 2, txn_batch(pid, epoch, 0, [b"t2"]), transactional_id=tid))
    assert err == 0, err
    d = co.describe_transactions([tid])[tid]
    assert d["topics"] == {TOPIC: [1, 2]}, d
    # Committed (TV2 bumps the epoch); the markers are not waited for.
    assert co.end_txn_v5(tid, pid, epoch, True) == (0, pid, epoch + 1)
    for cli in (leader, other, co):
        cli.close()


def group_coordinated_by(c, node_id, prefix):
    """The first "<prefix>-<n>" group node_id coordinates."""
    for n in range(1000):
        group = "%s-%d" % (prefix, n)
        err, node = retry(lambda: find_coordinator(c.node(1).port, group,
                                                   key_type=0))
        assert err == 0, err
        if node == node_id:
            return group
    raise AssertionError("node %d coordinates no %s group" % (node_id,
                                                              prefix))


def test_txn_offset_commit_at_remote_group_coordinator(cluster_factory):
    """TxnOffsetCommit goes to the group's coordinator (node 2), whose
    broker is not the transaction's coordinator (node 1): the group's
    partition is verified there (v4), or added (v5, transaction version
    2)."""
    c, tid = spread_cluster(cluster_factory, "xv-off")
    group = group_coordinated_by(c, 2, "xv-g")
    co = kw.Tv2Client(c.node(1).port, timeout=T)
    gc = kw.Tv2Client(c.node(2).port, timeout=T)
    pid, epoch = init_pid(co, tid)
    # v4 without AddOffsetsToTxn: not in the transaction, as on one node.
    got = retry(lambda: (lambda r: (max(r.values()), r))(gc.txn_offset_commit(
        tid, group, pid, epoch, {(TOPIC, 0): 1}, version=4)))
    assert got[1] == {(TOPIC, 0): kw.INVALID_TXN_STATE}, got
    f = co.api_versions_features(4)
    if f["finalized"].get(kw.FEATURE_TXN_VERSION, (0, 0))[1] >= 2:
        got = retry(lambda: (lambda r: (max(r.values()), r))(
            gc.txn_offset_commit(tid, group, pid, epoch, {(TOPIC, 0): 1})))
        assert got[1] == {(TOPIC, 0): 0}, got
        d = co.describe_transactions([tid])[tid]
        assert d["state"] == "Ongoing" and \
            len(d["topics"].get("__consumer_offsets", [])) == 1, d
        # In the transaction now: v4 passes the remote verification too.
        got = gc.txn_offset_commit(tid, group, pid, epoch, {(TOPIC, 0): 2},
                                   version=4)
        assert got == {(TOPIC, 0): 0}, got
    # A fenced epoch is refused by the remote coordinator's word.
    got = gc.txn_offset_commit(tid, group, pid, epoch + 1, {(TOPIC, 0): 3},
                               version=4)
    assert got == {(TOPIC, 0): kw.PRODUCER_FENCED}, got
    gc.close()
    co.close()
