"""Offsets committed inside transactions, on the wire: AddOffsetsToTxn and
TxnOffsetCommit with their error codes (each bad request changes nothing),
then offsets that become visible on commit and vanish on abort."""

import time

import kafka_wire as kw
from conftest import SLOW, needs_cairn

UNSTABLE_OFFSET_COMMIT = 88
RETRIABLE = (kw.CONCURRENT_TRANSACTIONS, kw.COORDINATOR_LOAD_IN_PROGRESS,
             kw.COORDINATOR_NOT_AVAILABLE)


def retry(fn, timeout=10 * SLOW):
    deadline = time.monotonic() + timeout
    while True:
        res = fn()
        code = res if isinstance(res, int) else next(iter(res.values()))
        if code not in RETRIABLE or time.monotonic() > deadline:
            return res
        time.sleep(0.05)


def init(cli, tid, timeout=10 * SLOW):
    # CONCURRENT_TRANSACTIONS while the previous transaction's markers are
    # being written is retriable, as clients treat it.
    deadline = time.monotonic() + timeout
    while True:
        err, pid, epoch = cli.init_producer_id(
            version=4, transactional_id=tid, txn_timeout_ms=60000)
        if err not in RETRIABLE or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert err == 0, err
    return pid, epoch


def committed(cli, group, topic, parts, stable=False):
    top, got = cli.offset_fetch(group, {topic: parts}, require_stable=stable)
    assert top == 0, top
    return {p: got[(topic, p)] for p in parts}


def wait_offset(cli, group, topic, part, want, timeout=10 * SLOW):
    deadline = time.monotonic() + timeout
    while True:
        got = committed(cli, group, topic, [part], stable=True)[part]
        if got == (0, want) or time.monotonic() > deadline:
            return got
        time.sleep(0.05)


@needs_cairn
def test_txn_offset_errors_change_nothing(broker):
    broker.create_topic("in", 2)
    cli = kw.ReadClient(broker.port)
    tid, group = "tx-offsets-bad", "g-bad"
    pid, epoch = init(cli, tid)

    # No transaction at all, and then one without the group's partition:
    # the offsets would never see a marker, so they are refused.
    got = kw.txn_offset_commit(cli, tid, group, pid, epoch, {("in", 0): 5})
    assert got == {("in", 0): kw.INVALID_TXN_STATE}, got
    assert retry(lambda: cli.add_partitions(tid, pid, epoch,
                                            {"in": [1]}, 3)) == {("in", 1): 0}
    got = kw.txn_offset_commit(cli, tid, group, pid, epoch, {("in", 0): 5})
    assert got == {("in", 0): kw.INVALID_TXN_STATE}, got

    # AddOffsetsToTxn: wrong producer id, stale epoch, no group.
    assert kw.add_offsets_to_txn(cli, tid, pid + 1000, epoch, group) == \
        kw.INVALID_PRODUCER_ID_MAPPING
    assert kw.add_offsets_to_txn(cli, tid, pid, epoch + 1, group) == \
        kw.INVALID_PRODUCER_EPOCH
    assert kw.add_offsets_to_txn(cli, tid, pid, epoch, "") == \
        kw.INVALID_GROUP_ID
    assert kw.add_offsets_to_txn(cli, "tx-nobody", pid, epoch, group) == \
        kw.INVALID_PRODUCER_ID_MAPPING
    # Nothing was committed or left pending by any of that.
    assert committed(cli, group, "in", [0, 1], stable=True) == \
        {0: (0, -1), 1: (0, -1)}

    # Now properly: the group joins the transaction; an unknown topic
    # fails alone.
    assert retry(lambda: kw.add_offsets_to_txn(cli, tid, pid, epoch,
                                               group)) == 0
    got = kw.txn_offset_commit(cli, tid, group, pid, epoch,
                               {("in", 0): 5, ("nope", 0): 1})
    assert got == {("in", 0): 0, ("nope", 0): kw.UNKNOWN_TOPIC_OR_PARTITION}
    # Pending until the marker: require_stable says so, a plain fetch
    # shows the old value.
    assert committed(cli, group, "in", [0], stable=True)[0] == \
        (UNSTABLE_OFFSET_COMMIT, -1)
    assert committed(cli, group, "in", [0])[0] == (0, -1)
    assert retry(lambda: cli.end_txn(tid, pid, epoch, True, 3)) == 0
    assert wait_offset(cli, group, "in", 0, 5) == (0, 5)

    # An aborted transaction's offsets are dropped.
    assert retry(lambda: kw.add_offsets_to_txn(cli, tid, pid, epoch,
                                               group)) == 0
    got = kw.txn_offset_commit(cli, tid, group, pid, epoch, {("in", 0): 9})
    assert got == {("in", 0): 0}, got
    assert retry(lambda: cli.end_txn(tid, pid, epoch, False, 3)) == 0
    assert wait_offset(cli, group, "in", 0, 5) == (0, 5)

    # A newer instance fences the old epoch's offset commits.
    pid2, epoch2 = init(cli, tid)
    assert pid2 == pid and epoch2 == epoch + 1
    assert retry(lambda: kw.add_offsets_to_txn(cli, tid, pid, epoch2,
                                               group)) == 0
    got = kw.txn_offset_commit(cli, tid, group, pid, epoch, {("in", 0): 11})
    assert got == {("in", 0): kw.INVALID_PRODUCER_EPOCH}, got
    assert committed(cli, group, "in", [0])[0] == (0, 5)
    cli.close()
