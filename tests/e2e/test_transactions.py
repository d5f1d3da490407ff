"""Transactions (transaction version 1): a librdkafka transactional
producer commits and aborts, zombies are fenced, the coordinator's error
codes over the raw protocol, timed-out transactions are aborted, and a
crash between the decision and the last marker is finished on restart.

Most checks look at the log itself: the control batches (markers) that
end each transaction on each partition, and DescribeProducers'
current_txn_start_offset (-1 once the transaction's marker is written);
the commit/abort test also reads it back with a read_committed consumer."""

import socket
import time

import pytest
from confluent_kafka import (Consumer, KafkaError, KafkaException, Producer,
                             TopicPartition)

import kafka_wire as kw
from conftest import CAIRN_BIN, SLOW, needs_cairn

pytestmark = needs_cairn

T = 15 * SLOW                   # client call timeout, seconds
COMMIT, ABORT = kw.CONTROL_COMMIT, kw.CONTROL_ABORT
KIND = {COMMIT: "COMMIT", ABORT: "ABORT"}
RETRIABLE = (kw.COORDINATOR_NOT_AVAILABLE, kw.COORDINATOR_LOAD_IN_PROGRESS,
             kw.NOT_COORDINATOR, kw.CONCURRENT_TRANSACTIONS)


def client(broker):
    return kw.TxnClient(broker.port)


def txn_producer(broker, tid, **extra):
    conf = {"bootstrap.servers": broker.bootstrap, "transactional.id": tid,
            "linger.ms": 5}
    conf.update(extra)
    return Producer(conf)


def retry(fn, ok=lambda r: r == 0, retriable=RETRIABLE, timeout=10 * SLOW):
    """Call fn until its result (or its first item) is not retriable."""
    deadline = time.monotonic() + timeout
    while True:
        res = fn()
        code = res[0] if isinstance(res, tuple) else res
        if code not in retriable or time.monotonic() > deadline:
            return res
        time.sleep(0.1)


def init_pid(cli, tid, version=4, timeout_ms=60000, **kw_):
    """(error, pid, epoch) of InitProducerId, retried while retriable."""
    return retry(lambda: cli.init_producer_id(
        version=version, transactional_id=tid, txn_timeout_ms=timeout_ms,
        **kw_))


def describe(batches):
    """A readable summary of a partition's batches for failure messages."""
    out = []
    for b in batches:
        if b["attributes"] & kw.ATTR_CONTROL:
            ctype = b["control"][0] if b["control"] else None
            out.append("@%d %s pid=%d e=%d" % (
                b["base_offset"], KIND.get(ctype, "CTRL?%s" % ctype),
                b["producer_id"], b["producer_epoch"]))
        else:
            out.append("@%d data%s x%d pid=%d e=%d" % (
                b["base_offset"],
                "(txn)" if b["attributes"] & kw.ATTR_TRANSACTIONAL else "",
                b["count"], b["producer_id"], b["producer_epoch"]))
    return "; ".join(out)


def markers(batches, ctype=None):
    return [b for b in batches if b["attributes"] & kw.ATTR_CONTROL
            and (ctype is None or (b["control"] or (None,))[0] == ctype)]


def data(batches):
    return [b for b in batches if not b["attributes"] & kw.ATTR_CONTROL]


def wait_markers(cli, tps, ctype, count=1, timeout=10 * SLOW, offset=0):
    """Wait until every (topic, partition) has at least count markers of
    ctype from offset on; returns {tp: batches}. Fails with the logs."""
    deadline = time.monotonic() + timeout
    while True:
        logs = {tp: cli.fetch_full(tp[0], tp[1], offset) for tp in tps}
        missing = [tp for tp in tps if len(markers(logs[tp], ctype)) < count]
        if not missing:
            return logs
        if time.monotonic() > deadline:
            pytest.fail("no %s marker on %s within %ss:\n%s" % (
                KIND[ctype], missing, timeout,
                "\n".join("%s-%d: %s" % (tp[0], tp[1], describe(logs[tp]))
                          for tp in missing)))
        time.sleep(0.1)


def check_marker(b, ctype, pid, epoch=None):
    assert b["attributes"] & kw.ATTR_CONTROL, b
    assert b["attributes"] & kw.ATTR_TRANSACTIONAL, \
        "marker without the transactional bit: %r" % b
    assert b["crc_ok"]
    assert b["control"] is not None and b["control"][0] == ctype, \
        "expected %s, control record %r" % (KIND[ctype], b["control"])
    assert b["count"] == 1 and b["last_offset_delta"] == 0, b
    assert b["producer_id"] == pid, (b["producer_id"], pid)
    if epoch is not None:
        assert b["producer_epoch"] == epoch, (b["producer_epoch"], epoch)
    key = b["records"][0][1]
    assert key == bytes([0, 0, 0, ctype]), "control key %r" % key


def producer_state(cli, topic, partition):
    """{pid: producer dict} from DescribeProducers."""
    err, plist = cli.describe_producers(topic, [partition])[partition]
    assert err == 0, "DescribeProducers %s-%d error %d" % (topic, partition,
                                                           err)
    return {p["producer_id"]: p for p in plist}


def wait_no_open_txn(cli, tps, pid, timeout=5 * SLOW):
    """current_txn_start_offset of pid is -1 on every partition."""
    deadline = time.monotonic() + timeout
    while True:
        bad = {}
        for t, p in tps:
            st = producer_state(cli, t, p).get(pid)
            if st is None or st["current_txn_start_offset"] != -1:
                bad[(t, p)] = st
        if not bad:
            return
        if time.monotonic() > deadline:
            pytest.fail("pid %d still has an open transaction: %r"
                        % (pid, bad))
        time.sleep(0.1)


def kafka_error(exc):
    err = exc.args[0] if exc.args else None
    assert isinstance(err, KafkaError), exc
    return err


# ---------------------------------------------------------------------------
# librdkafka transactional producer.

@pytest.mark.parametrize("group_commit", ["true", "false"])
def test_commit_then_abort(broker_factory, group_commit):
    # With group commit off the outcomes of the coordinator's actions (a
    # durable record, the local markers' results) arrive while the
    # executor is still carrying out the step that caused them: it must
    # queue them (txn_exec.c), not step the state machine from inside its
    # own step.  The "false" case kills a broker that does.
    broker = broker_factory(**{"cairn.fsync.group.commit": group_commit})
    topics = ["txa", "txb"]
    for t in topics:
        broker.create_topic(t, 3)
    tps = [(t, p) for t in topics for p in range(3)]
    n1, n2 = 7, 4
    prod = txn_producer(broker, "tx-basic")
    prod.init_transactions(T)
    prod.begin_transaction()
    for t, p in tps:
        for i in range(n1):
            prod.produce(t, value=b"c-%s-%d-%d" % (t.encode(), p, i),
                         partition=p)
    assert prod.flush(T) == 0
    cli = client(broker)

    # Open: each partition's only producer has its transaction at 0.
    pid = None
    for t, p in tps:
        st = producer_state(cli, t, p)
        assert len(st) == 1, st
        (pid_here, s), = st.items()
        pid = pid_here if pid is None else pid
        assert pid_here == pid
        assert s["current_txn_start_offset"] == 0, (t, p, s)
    prod.commit_transaction(T)

    logs = wait_markers(cli, tps, COMMIT)
    epoch = None
    for tp in tps:
        bs = logs[tp]
        d = data(bs)
        assert sum(b["count"] for b in d) == n1, describe(bs)
        for b in d:
            assert b["producer_id"] == pid
            assert b["attributes"] & kw.ATTR_TRANSACTIONAL, describe(bs)
        epoch = d[0]["producer_epoch"]
        assert len(markers(bs)) == 1, describe(bs)
        check_marker(bs[-1], COMMIT, pid, epoch)
        assert bs[-1]["base_offset"] == n1, describe(bs)
    wait_no_open_txn(cli, tps, pid)

    # __transaction_state came into being on first use: internal, 50.
    _, _, md = cli.metadata(["__transaction_state"])
    st = md.get("__transaction_state")
    assert st is not None and st["error"] == 0, md
    assert len(st["partitions"]) == 50
    assert st["internal"], "__transaction_state not marked internal"

    # A second transaction, aborted.
    prod.begin_transaction()
    for t, p in tps:
        for i in range(n2):
            prod.produce(t, value=b"a-%d" % i, partition=p)
    assert prod.flush(T) == 0
    for t, p in tps:
        s = producer_state(cli, t, p)[pid]
        assert s["current_txn_start_offset"] == n1 + 1, (t, p, s)
    prod.abort_transaction(T)
    logs = wait_markers(cli, tps, ABORT, offset=n1 + 1)
    for tp in tps:
        bs = logs[tp]
        assert sum(b["count"] for b in data(bs)) == n2, describe(bs)
        assert len(markers(bs)) == 1, describe(bs)
        check_marker(bs[-1], ABORT, pid, epoch)
        assert bs[-1]["base_offset"] == n1 + 1 + n2
    wait_no_open_txn(cli, tps, pid)
    # The whole log: data, COMMIT, data, ABORT and nothing else.
    for tp in tps:
        kinds = [b["control"][0] if b["control"] else "d"
                 for b in cli.fetch_full(*tp)]
        assert kinds.count(COMMIT) == 1 and kinds.count(ABORT) == 1, kinds
    cli.close()

    # A read_committed consumer sees exactly the committed records.
    c = Consumer({"bootstrap.servers": broker.bootstrap,
                  "group.id": "tx-basic-reader",
                  "isolation.level": "read_committed",
                  "enable.auto.commit": False,
                  "enable.partition.eof": True})
    try:
        c.assign([TopicPartition(t, p, 0) for t, p in tps])
        got, eof = [], set()
        deadline = time.monotonic() + T
        while len(eof) < len(tps) and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    eof.add((m.topic(), m.partition()))
                continue
            got.append(m.value())
    finally:
        c.close()
    want = [b"c-%s-%d-%d" % (t.encode(), p, i)
            for t, p in tps for i in range(n1)]
    assert sorted(got) == sorted(want), (len(got), len(want))


def test_zombie_fenced(broker):
    broker.create_topic("zomb", 2)
    tps = [("zomb", 0), ("zomb", 1)]
    p1 = txn_producer(broker, "tx-zombie")
    p1.init_transactions(T)
    p1.begin_transaction()
    for t, p in tps:
        for i in range(3):
            p1.produce(t, value=b"zombie-%d" % i, partition=p)
    assert p1.flush(T) == 0
    cli = client(broker)
    old = data(cli.fetch_full("zomb", 0))
    pid, e1 = old[0]["producer_id"], old[0]["producer_epoch"]
    assert producer_state(cli, "zomb", 0)[pid]["current_txn_start_offset"] \
        == 0

    p2 = txn_producer(broker, "tx-zombie")
    p2.init_transactions(T)       # retried through CONCURRENT_TRANSACTIONS
    # The coordinator finished the abort before answering p2 success.
    logs = {tp: cli.fetch_full(*tp) for tp in tps}
    late = [tp for tp in tps if not markers(logs[tp], ABORT)]
    if late:
        logs = wait_markers(cli, tps, ABORT)
        pytest.fail("init_transactions returned before the ABORT marker "
                    "of the fenced transaction was written on %s" % late)
    abort_epochs = set()
    for tp in tps:
        bs = logs[tp]
        assert not markers(bs, COMMIT), describe(bs)
        check_marker(bs[-1], ABORT, pid)
        abort_epochs.add(bs[-1]["producer_epoch"])
    wait_no_open_txn(cli, tps, pid)

    with pytest.raises(KafkaException) as ei:
        p1.commit_transaction(T)
    err = kafka_error(ei.value)
    print("fenced producer's commit failed: %s (code %d, fatal %s)"
          % (err.name(), err.code(), err.fatal()))
    fenced = {getattr(KafkaError, n, None) for n in (
        "_FENCED", "PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH")}
    assert err.fatal() or err.code() in fenced, err

    p2.begin_transaction()
    for t, p in tps:
        p2.produce(t, value=b"p2", partition=p)
    assert p2.flush(T) == 0
    p2.commit_transaction(T)
    logs = wait_markers(cli, tps, COMMIT)
    e2 = None
    for tp in tps:
        bs = logs[tp]
        d = data(bs)
        assert d[-1]["producer_id"] == pid and d[-1]["count"] == 1
        e2 = d[-1]["producer_epoch"]
        check_marker(bs[-1], COMMIT, pid, e2)
        assert len(markers(bs)) == 2, describe(bs)
    assert e2 > e1
    # Kafka aborts the fenced transaction with a bumped epoch so the
    # zombie is fenced on the data partitions too.
    (ea,) = abort_epochs
    print("epochs: zombie %d, abort marker %d, new producer %d"
          % (e1, ea, e2))
    assert e1 < ea <= e2, (e1, ea, e2)
    cli.close()


# ---------------------------------------------------------------------------
# Raw protocol: coordinator lookup and error codes.

def test_find_coordinator(broker):
    cli = client(broker)
    brokers, _, _ = cli.metadata([])
    assert len(brokers) == 1, brokers
    (node, (host, port)), = brokers.items()
    assert port == broker.port
    for version in (1, 4):
        c = retry(lambda: (lambda e: (e["error"], e))(
            cli.find_coordinator("tx-find", 1, version)[0]))[1]
        assert c["error"] == 0, (version, c)
        assert (c["node_id"], c["host"], c["port"]) == (node, host, port), c
        if version >= 4:
            assert c["key"] == "tx-find"
        # Groups are coordinated by the same (only) node.
        g = cli.find_coordinator("some-group", 0, version)[0]
        assert g["error"] == 0, (version, g)
        assert (g["node_id"], g["host"], g["port"]) == (node, host, port), g
        # An unknown key type is refused.
        bad = cli.find_coordinator("x", 7, version)[0]
        assert bad["error"] == kw.INVALID_REQUEST, (version, bad)
    cli.close()


def test_txn_error_codes(broker):
    broker.create_topic("raw", 2)
    cli = client(broker)
    tid = "tx-raw"

    # Timeout above transaction.max.timeout.ms (900000).
    for version in (1, 4):
        err, _, _ = init_pid(cli, tid, version=version, timeout_ms=900001)
        assert err == kw.INVALID_TRANSACTION_TIMEOUT, (version, err)
    err, pid, epoch = init_pid(cli, tid, timeout_ms=900000)
    assert err == 0 and pid >= 0 and epoch == 0, (err, pid, epoch)

    # An unknown topic (or partition) fails alone; the others are not
    # attempted and nothing joins the transaction.
    for version in (1, 3):
        got = cli.add_partitions(tid, pid, epoch,
                                 [("raw", [0, 1]), ("nope", [0])], version)
        assert got == {("raw", 0): kw.OPERATION_NOT_ATTEMPTED,
                       ("raw", 1): kw.OPERATION_NOT_ATTEMPTED,
                       ("nope", 0): kw.UNKNOWN_TOPIC_OR_PARTITION}, \
            (version, got)
    got = cli.add_partitions(tid, pid, epoch, {"raw": [0, 9]}, 3)
    assert got == {("raw", 0): kw.OPERATION_NOT_ATTEMPTED,
                   ("raw", 9): kw.UNKNOWN_TOPIC_OR_PARTITION}, got
    # Still no transaction, so none to end.
    for version in (1, 3):
        for committed in (True, False):
            err = cli.end_txn(tid, pid, epoch, committed, version)
            assert err == kw.INVALID_TXN_STATE, (version, committed, err)

    # A producer id that is not this transactional id's.
    for version in (1, 3):
        got = cli.add_partitions(tid, pid + 1000, epoch, {"raw": [0]},
                                 version)
        assert got == {("raw", 0): kw.INVALID_PRODUCER_ID_MAPPING}, got
        err = cli.end_txn(tid, pid + 1000, epoch, True, version)
        assert err == kw.INVALID_PRODUCER_ID_MAPPING, (version, err)
    # A transactional id nobody initialised.
    err = cli.end_txn("tx-never", pid, epoch, True, 3)
    assert err == kw.INVALID_PRODUCER_ID_MAPPING, err

    # A second InitProducerId bumps the epoch: the old one is stale.
    err, pid2, epoch2 = init_pid(cli, tid)
    assert (err, pid2, epoch2) == (0, pid, 1)
    got = cli.add_partitions(tid, pid, 0, {"raw": [0]}, 1)
    assert got == {("raw", 0): kw.INVALID_PRODUCER_EPOCH}, got
    got = cli.add_partitions(tid, pid, 0, {"raw": [0]}, 3)
    assert got == {("raw", 0): kw.PRODUCER_FENCED}, got
    assert cli.end_txn(tid, pid, 0, True, 1) == kw.INVALID_PRODUCER_EPOCH
    assert cli.end_txn(tid, pid, 0, True, 3) == kw.PRODUCER_FENCED

    # None of that changed anything: a full transaction at epoch 1 works.
    got = cli.add_partitions(tid, pid, 1, {"raw": [0, 1]}, 3)
    assert got == {("raw", 0): 0, ("raw", 1): 0}, got
    # Adding the same partitions again is harmless.
    got = cli.add_partitions(tid, pid, 1, {"raw": [1]}, 1)
    assert got == {("raw", 1): 0}, got
    for p in (0, 1):
        batch = kw.record_batch([b"r%d" % p, b"s%d" % p], pid, 1, 0,
                                transactional=True)
        assert cli.produce("raw", p, batch, transactional_id=tid) == (0, 0)
        st = producer_state(cli, "raw", p)[pid]
        assert st["current_txn_start_offset"] == 0, st
    assert cli.end_txn(tid, pid, 1, True, 3) == 0
    logs = wait_markers(cli, [("raw", 0), ("raw", 1)], COMMIT)
    for p in (0, 1):
        check_marker(logs[("raw", p)][-1], COMMIT, pid, 1)
        assert logs[("raw", p)][-1]["base_offset"] == 2
    wait_no_open_txn(cli, [("raw", 0), ("raw", 1)], pid)
    # Kafka: committing again is a successful retry; aborting is not.
    err = retry(lambda: cli.end_txn(tid, pid, 1, True, 3))
    assert err == 0, "EndTxn commit retry after commit: %d" % err
    err = retry(lambda: cli.end_txn(tid, pid, 1, False, 3))
    assert err == kw.INVALID_TXN_STATE, err
    assert len(markers(cli.fetch_full("raw", 0))) == 1
    cli.close()


def test_init_producer_id_aborts_ongoing(broker):
    """InitProducerId on an Ongoing transaction answers 51 while it aborts
    the transaction, then succeeds with the epoch bumped twice."""
    broker.create_topic("ong", 1)
    cli = client(broker)
    tid = "tx-ongoing"
    err, pid, epoch = init_pid(cli, tid)
    assert (err, epoch) == (0, 0)
    assert cli.add_partitions(tid, pid, 0, {"ong": [0]}, 3) == \
        {("ong", 0): 0}
    batch = kw.record_batch([b"x"], pid, 0, 0, transactional=True)
    assert cli.produce("ong", 0, batch, transactional_id=tid) == (0, 0)
    first = cli.init_producer_id(version=4, transactional_id=tid)
    assert first[0] == kw.CONCURRENT_TRANSACTIONS, first
    err, pid2, epoch2 = init_pid(cli, tid)
    assert err == 0 and pid2 == pid, (err, pid2, epoch2)
    bs = cli.fetch_full("ong", 0)
    assert markers(bs, ABORT) and not markers(bs, COMMIT), describe(bs)
    check_marker(bs[-1], ABORT, pid)
    wait_no_open_txn(cli, [("ong", 0)], pid)
    # The stale producer can no longer write to the partition either.
    stale = kw.record_batch([b"y"], pid, 0, 1, transactional=True)
    end = cli.list_offset("ong", 0)
    err, _ = cli.produce("ong", 0, stale, transactional_id=tid)
    # Kafka's KIP-890 verification checks the epoch first (fenced); "not
    # in the transaction" (48) refuses the write just as well.
    print("stale transactional produce refused with %d" % err)
    assert err in (kw.INVALID_PRODUCER_EPOCH, kw.PRODUCER_FENCED,
                   kw.INVALID_TXN_STATE), err
    assert cli.list_offset("ong", 0) == end
    print("epochs: first 0, abort marker %d, new %d"
          % (bs[-1]["producer_epoch"], epoch2))
    assert epoch2 == 2, epoch2
    assert bs[-1]["producer_epoch"] == 1
    # transaction.partition.verification.enable (default true): a
    # transactional batch for a partition not added to the transaction is
    # refused with INVALID_TXN_STATE, as Kafka's KIP-890 check does.
    early = kw.record_batch([b"z"], pid, 2, 0, transactional=True)
    end = cli.list_offset("ong", 0)
    err, _ = cli.produce("ong", 0, early, transactional_id=tid)
    assert err == kw.INVALID_TXN_STATE, err
    assert cli.list_offset("ong", 0) == end
    cli.close()


def test_describe_and_list_transactions(broker):
    broker.create_topic("dtx", 2)
    cli = client(broker)
    apis = cli.api_versions()
    have_d = kw.API_DESCRIBE_TRANSACTIONS in apis
    have_l = kw.API_LIST_TRANSACTIONS in apis
    if not have_d and not have_l:
        pytest.skip("neither DescribeTransactions nor ListTransactions "
                    "in ApiVersions")
    tid = "tx-desc"
    err, pid, _ = init_pid(cli, tid, timeout_ms=30000)
    assert err == 0
    assert cli.add_partitions(tid, pid, 0, {"dtx": [0, 1]}, 3) == \
        {("dtx", 0): 0, ("dtx", 1): 0}
    if have_d:
        d = cli.describe_transactions([tid, "tx-unknown"])
        got = d[tid]
        assert got["error"] == 0 and got["state"] == "Ongoing", got
        assert got["producer_id"] == pid and got["producer_epoch"] == 0
        assert got["timeout_ms"] == 30000
        assert got["start_time_ms"] > 0
        assert sorted(got["topics"].get("dtx", [])) == [0, 1], got
        # TRANSACTIONAL_ID_NOT_FOUND
        assert d["tx-unknown"]["error"] == 105, d
    if have_l:
        for version in range(apis[kw.API_LIST_TRANSACTIONS][1] + 1):
            err, unknown, lst = cli.list_transactions(version=version)
            assert err == 0 and lst.get(tid) == (pid, "Ongoing"), lst
        err, unknown, lst = cli.list_transactions(states=["Ongoing",
                                                          "Bogus"])
        assert err == 0 and unknown == ["Bogus"] and tid in lst, \
            (unknown, lst)
        err, _, lst = cli.list_transactions(states=["Empty"])
        assert tid not in lst, lst
        err, _, lst = cli.list_transactions(producer_ids=[pid + 77])
        assert tid not in lst, lst
    assert cli.end_txn(tid, pid, 0, True, 3) == 0
    wait_markers(cli, [("dtx", 0), ("dtx", 1)], COMMIT)
    if have_d:
        deadline = time.monotonic() + 5 * SLOW
        while True:
            got = cli.describe_transactions([tid])[tid]
            if got["state"] == "CompleteCommit" or \
                    time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert got["state"] == "CompleteCommit", got
    cli.close()


def test_state_survives_restart(broker):
    """__transaction_state is replayed: a completed transaction's epoch and
    an Ongoing transaction's partitions are known after a restart (clean
    and kill -9), so the Ongoing one can still be committed."""
    broker.create_topic("rs", 2)
    tps = [("rs", 0), ("rs", 1)]
    cli = client(broker)
    err, pid_a, _ = init_pid(cli, "tx-rs-a")
    assert err == 0
    err, pid_b, _ = init_pid(cli, "tx-rs-b")
    assert err == 0 and pid_b != pid_a
    err, _, ea = init_pid(cli, "tx-rs-a")
    assert (err, ea) == (0, 1)
    got = cli.add_partitions("tx-rs-b", pid_b, 0, {"rs": [0, 1]}, 3)
    assert set(got.values()) == {0}, got
    for t, p in tps:
        batch = kw.record_batch([b"b%d" % p], pid_b, 0, 0,
                                transactional=True)
        assert cli.produce(t, p, batch, transactional_id="tx-rs-b")[0] == 0
    cli.close()
    for kill in (False, True):
        if kill:
            broker.kill9()
            broker.unexpected_exit = None
            broker.start()
        else:
            broker.restart()
        cli = client(broker)
        # Still Ongoing: no marker yet, the partitions still see it open.
        for t, p in tps:
            assert not markers(cli.fetch_full(t, p)), (kill, t, p)
            st = producer_state(cli, t, p)[pid_b]
            assert st["current_txn_start_offset"] >= 0, (kill, st)
        # Errors that need the replayed state.
        assert cli.end_txn("tx-rs-a", pid_a, 0, True, 3) == \
            kw.PRODUCER_FENCED
        assert retry(lambda: cli.end_txn("tx-rs-a", pid_a, 1, True, 3)) == \
            kw.INVALID_TXN_STATE
        assert cli.end_txn("tx-rs-b", pid_a, 0, True, 3) == \
            kw.INVALID_PRODUCER_ID_MAPPING
        cli.close()
    cli = client(broker)
    assert retry(lambda: cli.end_txn("tx-rs-b", pid_b, 0, True, 3)) == 0
    logs = wait_markers(cli, tps, COMMIT)
    for tp in tps:
        check_marker(logs[tp][-1], COMMIT, pid_b, 0)
    wait_no_open_txn(cli, tps, pid_b)
    broker.restart()
    cli = client(broker)
    err, pid2, e2 = init_pid(cli, "tx-rs-a")
    assert (err, pid2, e2) == (0, pid_a, 2)
    err, pid2, e2 = init_pid(cli, "tx-rs-b")
    assert (err, pid2, e2) == (0, pid_b, 1)
    for tp in tps:
        assert len(markers(cli.fetch_full(*tp))) == 1
    cli.close()


# ---------------------------------------------------------------------------
# Timed-out transactions.

def test_timed_out_transaction_aborted(broker_factory):
    broker = broker_factory(**{
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": 500})
    broker.create_topic("slow", 1)
    tp = ("slow", 0)
    stalled = txn_producer(broker, "tx-slow", **{"transaction.timeout.ms":
                                                 2000})
    stalled.init_transactions(T)
    stalled.begin_transaction()
    for i in range(3):
        stalled.produce("slow", value=b"stalled-%d" % i, partition=0)
    assert stalled.flush(T) == 0
    cli = client(broker)
    pid = data(cli.fetch_full(*tp))[0]["producer_id"]
    e0 = data(cli.fetch_full(*tp))[0]["producer_epoch"]
    assert producer_state(cli, *tp)[pid]["current_txn_start_offset"] == 0
    t0 = time.monotonic()
    time.sleep(3.2)
    logs = wait_markers(cli, [tp], ABORT, timeout=6 * SLOW)
    print("abort marker seen %.1fs after the stall began"
          % (time.monotonic() - t0))
    bs = logs[tp]
    assert not markers(bs, COMMIT), describe(bs)
    check_marker(bs[-1], ABORT, pid)
    assert bs[-1]["producer_epoch"] > e0, \
        "timeout abort without an epoch bump: %s" % describe(bs)
    wait_no_open_txn(cli, [tp], pid)

    with pytest.raises(KafkaException) as ei:
        stalled.commit_transaction(T)
    err = kafka_error(ei.value)
    print("stalled producer's commit failed: %s (code %d, fatal %s, "
          "abortable %s)" % (err.name(), err.code(), err.fatal(),
                             err.txn_requires_abort()))

    fresh = txn_producer(broker, "tx-slow")
    fresh.init_transactions(T)
    fresh.begin_transaction()
    fresh.produce("slow", value=b"fresh", partition=0)
    assert fresh.flush(T) == 0
    fresh.commit_transaction(T)
    logs = wait_markers(cli, [tp], COMMIT)
    bs = logs[tp]
    check_marker(bs[-1], COMMIT, pid)
    assert len(markers(bs, ABORT)) == 1, describe(bs)
    assert data(bs)[-1]["count"] == 1
    wait_no_open_txn(cli, [tp], pid)
    cli.close()


# ---------------------------------------------------------------------------
# Crash between the decision and CompleteCommit/CompleteAbort.

# How the transaction ends x where the broker crashes: after the decision
# (PrepareCommit/PrepareAbort) is synced, after the first of three
# markers, after all markers but before CompleteCommit/CompleteAbort.
# "fence" is an InitProducerId aborting an older instance's Ongoing
# transaction, "timeout" the coordinator aborting a timed-out one; both
# go through the same points.
POINTS = ["txn.after_prepare_sync", "txn.after_some_markers",
          "txn.after_markers_before_complete"]
CRASHES = [(how, pt) for how in ("commit", "abort") for pt in POINTS] + \
    [("fence", "txn.after_prepare_sync"),
     ("fence", "txn.after_some_markers"),
     ("timeout", "txn.after_prepare_sync")]


def binary_has(name):
    try:
        return name.encode() in CAIRN_BIN.read_bytes()
    except OSError:
        return False


@pytest.mark.parametrize("how,point", CRASHES,
                         ids=["%s-%s" % c for c in CRASHES])
def test_crash_recovery_finishes_decided_txn(broker, how, point):
    if not binary_has(point):
        pytest.skip("fail point %s not in %s" % (point, CAIRN_BIN))
    broker.create_topic("crash", 3)
    tps = [("crash", p) for p in range(3)]
    tid = "tx-crash"
    want, other = (COMMIT, ABORT) if how == "commit" else (ABORT, COMMIT)
    broker.stop()
    if how == "timeout":
        broker.sets["transaction.abort.timed.out.transaction.cleanup."
                    "interval.ms"] = 200
    broker.failpoints = point + "=crash"
    broker.start()

    cli = client(broker)
    err, pid, epoch = init_pid(cli, tid,
                               timeout_ms=1000 if how == "timeout" else 60000)
    assert err == 0, err
    got = cli.add_partitions(tid, pid, epoch, {"crash": [0, 1, 2]}, 3)
    assert set(got.values()) == {0}, got
    for t, p in tps:
        batch = kw.record_batch([b"v%d-%d" % (p, i) for i in range(p + 1)],
                                pid, epoch, 0, transactional=True)
        assert cli.produce(t, p, batch, transactional_id=tid) == (0, 0)
    try:
        if how == "fence":
            answer = cli.init_producer_id(version=4, transactional_id=tid)
            ok = (kw.CONCURRENT_TRANSACTIONS,)
        elif how == "timeout":
            answer = "waited for the timeout"
            ok = ()
        else:
            answer = cli.end_txn(tid, pid, epoch, how == "commit", 3)
            ok = (0,)
    except (ConnectionError, OSError, socket.timeout) as e:
        answer = "no answer (%s)" % e
    print("%s before the crash at %s: %s" % (how, point, answer))
    code = answer[0] if isinstance(answer, tuple) else answer
    assert code in ok or isinstance(answer, str), answer
    cli.close()
    try:
        broker.proc.wait(timeout=10 * SLOW)
    except Exception:
        pytest.fail("broker did not crash at %s:\n%s"
                    % (point, broker.log_tail()))
    assert broker.proc.returncode != 0
    broker.unexpected_exit = None   # the crash was the point

    broker.failpoints = None
    broker.start()
    cli = client(broker)
    logs = wait_markers(cli, tps, want)
    for t, p in tps:
        bs = logs[(t, p)]
        assert not markers(bs, other), describe(bs)
        d = data(bs)
        assert len(d) == 1 and d[0]["count"] == p + 1, describe(bs)
        for m in markers(bs):
            check_marker(m, want, pid,
                         epoch if how in ("commit", "abort") else None)
            assert m["producer_epoch"] >= epoch
        assert bs[-1]["attributes"] & kw.ATTR_CONTROL, describe(bs)
        if len(markers(bs)) > 1:
            print("%s-%d: %d markers (duplicate after recovery)"
                  % (t, p, len(markers(bs))))
    wait_no_open_txn(cli, tps, pid)
    # The transactional id is usable again and its state is complete.
    err, pid2, epoch2 = init_pid(cli, tid)
    assert err == 0 and pid2 == pid and epoch2 > epoch, (err, pid2, epoch2)
    if how in ("commit", "abort"):
        assert epoch2 == epoch + 1, (epoch, epoch2)
    assert cli.add_partitions(tid, pid, epoch2, {"crash": [0]}, 3) == \
        {("crash", 0): 0}
    batch = kw.record_batch([b"after"], pid, epoch2, 0, transactional=True)
    err, _ = cli.produce("crash", 0, batch, transactional_id=tid)
    assert err == 0, err
    assert cli.end_txn(tid, pid, epoch2, True, 3) == 0
    wait_markers(cli, [("crash", 0)], COMMIT,
                 count=1 + len(markers(logs[("crash", 0)], COMMIT)))
    cli.close()


def test_transaction_log_compacted_and_reloaded(broker_factory):
    """__transaction_state stays bounded: once a partition holds more than
    one record per id plus the slack, the coordinator checkpoints the
    newest state of its ids and moves the log start past the old records;
    a restart reloads the same state from what is left."""
    broker = broker_factory(**{"cairn.internal.compact.slack.records": 50})
    broker.create_topic("cmp", 1)
    cli = client(broker)
    tid = "compact-me"
    err, pid, epoch = init_pid(cli, tid)
    assert err == 0
    # Each transaction writes Ongoing, PrepareCommit and CompleteCommit.
    for _ in range(40):
        res = retry(lambda: cli.add_partitions(tid, pid, epoch,
                                               {"cmp": [0]})[("cmp", 0)])
        assert res == 0
        assert retry(lambda: cli.end_txn(tid, pid, epoch, True)) == 0
    starts = [cli.list_offset("__transaction_state", p, kw.EARLIEST_TIMESTAMP)
              for p in range(50)]
    assert max(starts) > 0, "no __transaction_state partition was compacted"
    assert "compacted" in broker.log_tail(400)
    cli.close()
    broker.kill9()
    broker.unexpected_exit = None
    broker.start()
    cli = client(broker)
    # The id is still known at its epoch: a wrong epoch is fenced and the
    # right one can run a transaction.
    assert retry(lambda: cli.end_txn(tid, pid, epoch + 1, True, version=3)) \
        == kw.PRODUCER_FENCED
    res = retry(lambda: cli.add_partitions(tid, pid, epoch,
                                           {"cmp": [0]})[("cmp", 0)])
    assert res == 0
    assert retry(lambda: cli.end_txn(tid, pid, epoch, True)) == 0
    cli.close()


def test_compacted_log_keeps_ongoing_transactions(broker_factory):
    """A checkpoint of __transaction_state carries open transactions: ids
    whose transaction is ongoing (partition added, data written) when
    another id's churn compacts the partition are still ongoing after a
    kill -9 and a restart, and their commits go through."""
    broker = broker_factory(**{"cairn.internal.compact.slack.records": 5,
                               "transaction.state.log.num.partitions": 1})
    broker.create_topic("cmpo", 1)
    broker.create_topic("cmpc", 1)
    cli = client(broker)
    open_ids = []
    for i in range(2):
        tid = "ongoing-%d" % i
        err, pid, epoch = init_pid(cli, tid)
        assert err == 0, err
        res = retry(lambda: cli.add_partitions(tid, pid, epoch,
                                               {"cmpo": [0]})[("cmpo", 0)])
        assert res == 0, res
        batch = kw.record_batch([b"open-%d" % i], pid, epoch, 0,
                                transactional=True)
        err, _ = cli.produce("cmpo", 0, batch, transactional_id=tid)
        assert err == 0, err
        open_ids.append((tid, pid, epoch))
    # Three records a transaction: the ongoing ids' own records fall
    # below the log start, only the checkpoint holds their state.
    before = cli.list_offset("__transaction_state", 0, kw.LATEST_TIMESTAMP)
    tid = "churn"
    err, pid, epoch = init_pid(cli, tid)
    assert err == 0, err
    for _ in range(5):
        res = retry(lambda: cli.add_partitions(tid, pid, epoch,
                                               {"cmpc": [0]})[("cmpc", 0)])
        assert res == 0, res
        assert retry(lambda: cli.end_txn(tid, pid, epoch, True)) == 0
    start = cli.list_offset("__transaction_state", 0, kw.EARLIEST_TIMESTAMP)
    assert start >= before, "__transaction_state-0 not compacted past %d " \
        "(log start %d)" % (before, start)
    cli.close()
    broker.kill9()
    broker.unexpected_exit = None
    broker.start()
    cli = client(broker)
    for tid, pid, epoch in open_ids:
        assert retry(lambda: cli.end_txn(tid, pid, epoch, True)) == 0, tid
    logs = wait_markers(cli, [("cmpo", 0)], COMMIT, count=len(open_ids))
    pids = {m["producer_id"] for m in markers(logs[("cmpo", 0)], COMMIT)}
    assert pids == {pid for _, pid, _ in open_ids}, describe(logs[("cmpo", 0)])
    cli.close()
