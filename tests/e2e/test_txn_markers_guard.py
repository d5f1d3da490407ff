"""WriteTxnMarkers from a client cannot break another producer's
transaction (issue #11, defect 3).

The attack: a client learns a victim's producer id and epoch from
DescribeProducers and sends WriteTxnMarkers(COMMIT) for the victim's open
transaction.  Written straight to the partition, that marker made the
records the victim then aborted visible to read_committed readers.

Cairn's coordinator writes its own markers to local partitions, so every
WriteTxnMarkers a single broker receives comes from outside the cluster:
- COMMIT is refused with CLUSTER_AUTHORIZATION_FAILED unless
  cairn.transaction.operator.commit.enable=true, and even then with
  INVALID_TXN_STATE for a producer id the coordinator knows; an allowed
  one is audited (WARN line, cairn_txn_operator_commit_markers_total).
- ABORT of a transaction the coordinator holds is done by the coordinator
  (the whole transaction, with an epoch bump), as before; while the
  coordinator is committing it (PrepareCommit) it is refused with
  INVALID_TXN_STATE.
"""

import time

from confluent_kafka import Consumer, KafkaException, Producer, \
    TopicPartition

import kafka_wire as kw
from conftest import metrics, SLOW, needs_cairn

pytestmark = needs_cairn

TOPIC = "guarded"
TIMEOUT = 20 * SLOW
CONTROL_ABORT, CONTROL_COMMIT = kw.CONTROL_ABORT, kw.CONTROL_COMMIT


def victim(broker, tid, values):
    """A transactional producer with an open transaction holding values
    on TOPIC-0, flushed to the broker."""
    p = Producer({"bootstrap.servers": broker.bootstrap,
                  "transactional.id": tid, "linger.ms": 0})
    p.init_transactions(TIMEOUT)
    p.begin_transaction()
    for v in values:
        p.produce(TOPIC, value=v, partition=0)
    assert p.flush(TIMEOUT) == 0
    return p


def open_txn_producer(cli):
    """(producer id, epoch, coordinator epoch) of the one producer with an
    open transaction on TOPIC-0, as DescribeProducers tells anyone."""
    err, producers = cli.describe_producers(TOPIC, [0])[0]
    assert err == 0, err
    open_ = [x for x in producers if x["current_txn_start_offset"] >= 0]
    assert len(open_) == 1, producers
    x = open_[0]
    return x["producer_id"], x["producer_epoch"], x["coordinator_epoch"]


def send_marker(cli, pid, epoch, commit, coordinator_epoch=0):
    _, out = kw.parse_write_txn_markers(cli.call(
        kw.write_txn_markers_request, pid, epoch, commit, {TOPIC: [0]},
        coordinator_epoch))
    return out[(pid, TOPIC, 0)]


def plain(cli, value):
    err, base = cli.produce(TOPIC, 0, kw.record_batch([value]))
    assert err == 0, err
    return base


def read_committed(broker, until, timeout=TIMEOUT):
    """Values a read_committed consumer gets from offset 0 up to and
    including the value `until`."""
    c = Consumer({"bootstrap.servers": broker.bootstrap,
                  "group.id": "guard-reader",
                  "isolation.level": "read_committed",
                  "enable.auto.commit": False})
    got = []
    try:
        c.assign([TopicPartition(TOPIC, 0, 0)])
        deadline = time.monotonic() + timeout
        while until not in got and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None and not m.error():
                got.append(m.value())
    finally:
        c.close()
    assert until in got, "read_committed never reached %r: %r" % (until,
                                                                    got)
    return got


def markers_of(cli, pid):
    """Control types (0 abort, 1 commit) of pid's markers on TOPIC-0, and
    the values of its data records, as read_uncommitted sees them, in log
    order: [("data", value) | ("control", type)]."""
    seq = []
    for b in cli.fetch_full(TOPIC, 0):
        if b["producer_id"] != pid:
            continue
        if b["attributes"] & kw.ATTR_CONTROL:
            seq.append(("control", b["control"][0]))
        else:
            seq += [("data", v) for _, _, v in b["records"]]
    return seq


def test_client_commit_cannot_break_a_victims_abort(broker_factory):
    """The issue's case as written: the victim's abort stays an abort for
    every reader."""
    broker = broker_factory()
    broker.create_topic(TOPIC)
    values = [b"victim-%d" % i for i in range(5)]
    p = victim(broker, "victim", values)
    cli = kw.TxnClient(broker.port)
    pid, epoch, coord_epoch = open_txn_producer(cli)

    err = send_marker(cli, pid, epoch, True, coord_epoch)
    assert err == kw.CLUSTER_AUTHORIZATION_FAILED, err
    # A higher epoch changes nothing: commits from clients are refused.
    assert send_marker(cli, pid, epoch + 1, True) == \
        kw.CLUSTER_AUTHORIZATION_FAILED

    p.abort_transaction(TIMEOUT)
    plain(cli, b"after")
    got = read_committed(broker, b"after")
    assert got == [b"after"], got
    # read_uncommitted sees the records, closed by an abort marker only.
    assert markers_of(cli, pid) == \
        [("data", v) for v in values] + [("control", CONTROL_ABORT)]
    assert "WriteTxnMarkers from" in broker.log_tail(200)
    m = metrics(broker)
    assert m["cairn_txn_client_markers_refused_total"] == 2, m
    assert m["cairn_txn_operator_commit_markers_total"] == 0, m
    cli.close()


def test_client_abort_of_tracked_txn_goes_through_coordinator(
        broker_factory):
    """An ABORT from a client (cairnctl txn abort) for a transaction the
    coordinator holds: the coordinator aborts the whole transaction and
    bumps the epoch, so the victim cannot commit what was aborted."""
    broker = broker_factory()
    broker.create_topic(TOPIC)
    values = [b"aborted-%d" % i for i in range(3)]
    p = victim(broker, "victim2", values)
    cli = kw.TxnClient(broker.port)
    pid, epoch, coord_epoch = open_txn_producer(cli)
    assert send_marker(cli, pid, epoch, False, coord_epoch) == 0

    def done():
        d = cli.describe_transactions(["victim2"])["victim2"]
        return d["state"] == "CompleteAbort" and d["producer_epoch"] > epoch
    deadline = time.monotonic() + TIMEOUT
    while not done():
        assert time.monotonic() < deadline, "coordinator abort not seen"
        time.sleep(0.05)
    try:
        p.commit_transaction(TIMEOUT)
        committed = True
    except KafkaException:
        committed = False
    assert not committed, "the victim committed an aborted transaction"
    plain(cli, b"after")
    assert read_committed(broker, b"after") == [b"after"]
    seq = markers_of(cli, pid)
    assert seq[:len(values)] == [("data", v) for v in values], seq
    assert ("control", CONTROL_COMMIT) not in seq, seq
    assert seq[len(values)] == ("control", CONTROL_ABORT), seq
    assert "the coordinator aborts the whole transaction" in \
        broker.log_tail(200)
    cli.close()


def test_client_abort_refused_while_coordinator_commits(broker_factory):
    """The coordinator has decided to commit (PrepareCommit durable, its
    markers not yet written): an ABORT from a client would split the
    transaction, so it is refused and the commit wins after restart."""
    broker = broker_factory()
    broker.create_topic(TOPIC)
    broker.failpoints = "txn.after_prepare_sync=error"
    broker.restart()
    values = [b"committed-%d" % i for i in range(3)]
    p = victim(broker, "victim3", values)
    cli = kw.TxnClient(broker.port)
    pid, epoch, coord_epoch = open_txn_producer(cli)
    p.commit_transaction(TIMEOUT)   # answered once PrepareCommit is durable
    d = cli.describe_transactions(["victim3"])["victim3"]
    assert d["state"] == "PrepareCommit", d
    assert send_marker(cli, pid, epoch, False, coord_epoch) == \
        kw.INVALID_TXN_STATE
    cli.close()
    broker.failpoints = None
    broker.restart()                # recovery writes the commit markers
    cli = kw.TxnClient(broker.port)
    plain(cli, b"after")
    assert read_committed(broker, b"after") == values + [b"after"]
    seq = markers_of(cli, pid)
    assert seq == [("data", v) for v in values] + [
        ("control", CONTROL_COMMIT)], seq
    cli.close()


def untracked_open_txn(cli):
    """An open transaction on TOPIC-0 that no coordinator knows: an
    idempotent producer id writing a transactional batch with partition
    verification off (what a lost __transaction_state leaves behind).
    Returns (pid, epoch)."""
    err, pid, epoch = cli.init_producer_id(version=4)
    assert err == 0, err
    err, _ = cli.produce(TOPIC, 0, kw.record_batch(
        [b"orphan-1", b"orphan-2"], producer_id=pid, producer_epoch=epoch,
        base_sequence=0, transactional=True), transactional_id="ghost")
    assert err == 0, err
    assert open_txn_producer(cli)[0] == pid
    return pid, epoch


def test_client_commit_of_untracked_txn_needs_operator_key(broker_factory):
    broker = broker_factory(
        **{"transaction.partition.verification.enable": "false"})
    broker.create_topic(TOPIC)
    cli = kw.TxnClient(broker.port)
    pid, epoch = untracked_open_txn(cli)
    assert send_marker(cli, pid, epoch, True) == \
        kw.CLUSTER_AUTHORIZATION_FAILED
    assert metrics(broker)["cairn_txn_operator_commit_markers_total"] == 0
    cli.close()


def test_operator_commit_of_untracked_txn_is_audited(broker_factory):
    broker = broker_factory(
        **{"transaction.partition.verification.enable": "false",
           "cairn.transaction.operator.commit.enable": "true"})
    broker.create_topic(TOPIC)
    cli = kw.TxnClient(broker.port)
    pid, epoch = untracked_open_txn(cli)
    assert send_marker(cli, pid, epoch, True) == 0
    plain(cli, b"after")
    assert read_committed(broker, b"after") == [b"orphan-1", b"orphan-2",
                                                b"after"]
    log = broker.log_tail(200)
    line = [x for x in log.splitlines()
            if "audit: cairn.transaction.operator.commit.enable" in x]
    assert line and ("producer %d" % pid) in line[-1], log
    assert metrics(broker)["cairn_txn_operator_commit_markers_total"] == 1

    # Even with the key, a producer the coordinator knows is not the
    # operator's to commit.
    values = [b"victim-%d" % i for i in range(2)]
    p = victim(broker, "victim4", values)
    err, producers = cli.describe_producers(TOPIC, [0])[0]
    vp = [x for x in producers if x["current_txn_start_offset"] >= 0]
    assert len(vp) == 1, producers
    assert send_marker(cli, vp[0]["producer_id"], vp[0]["producer_epoch"],
                       True) == kw.INVALID_TXN_STATE
    p.abort_transaction(TIMEOUT)
    plain(cli, b"after-2")
    got = read_committed(broker, b"after-2")
    assert not set(values) & set(got), got
    assert metrics(broker)["cairn_txn_operator_commit_markers_total"] == 1
    cli.close()
