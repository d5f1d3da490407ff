"""Hanging transactions: the classic race made deterministic, then found,
explained and repaired.

The race (KIP-890): a producer's AddPartitionsToTxn for partition T-0 is
lost or late while its produce request to T-0 is delayed in the network;
the transaction (which the coordinator knows only with partition D-0)
times out, the coordinator aborts it, bumps the epoch and writes its
marker to D-0 only.  Then the delayed produce reaches T-0 at the old
epoch.  T-0 has never seen the producer, so without verification the
batch opens a transaction no coordinator will ever close: the LSO of T-0
stops there and read_committed readers stall.

(a) transaction.partition.verification.enable=true: the late batch is
    refused and the LSO keeps up with the high watermark.
(b) verification off: the batch lands; cairnctl txn find-hanging and
    cairnctl lso-gap name it, a read_committed consumer stalls, the broker's
    periodic check logs it, and cairnctl txn abort --start-offset clears it.
(c) transaction.hanging.auto.abort=true: the broker clears it itself.
"""

import json
import re
import time

from confluent_kafka import Consumer, TopicPartition

import kafka_wire as kw
from conftest import SLOW, metrics, needs_cairn, ok, run, tool

pytestmark = needs_cairn

TIMEOUT = 30 * SLOW
TID = "hang-tx"
TOPIC = "orders"
DECOY = "decoy"

SETTINGS = {
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "200",
    "transaction.max.timeout.ms": "2000",
    "cairn.transaction.hanging.check.interval.ms": "200",
    "cairn.transaction.hanging.margin.ms": "0",
}


def ctl(broker, *args):
    return run([tool("cairnctl"), "--bootstrap-server", broker.bootstrap]
               + list(args), timeout=TIMEOUT)


def table(out):
    """Rows of a padded table as dicts, cut at the header's offsets."""
    lines = out.splitlines()
    heads = [(m.start(), m.group()) for m in re.finditer(r"\S+", lines[0])]
    rows = []
    for line in lines[1:]:
        row = {}
        for i, (start, name) in enumerate(heads):
            end = heads[i + 1][0] if i + 1 < len(heads) else len(line)
            row[name] = line[start:end].strip()
        rows.append(row)
    return rows


def wait_for(fn, what, timeout=15 * SLOW, every=0.1):
    deadline = time.monotonic() + timeout
    while True:
        res = fn()
        if res:
            return res
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(every)


def offsets(cli, topic, partition=0):
    """(high watermark, last stable offset) via ListOffsets v2."""
    out = []
    for iso in (kw.READ_UNCOMMITTED, kw.READ_COMMITTED):
        _, res = kw.parse_list_offsets_v2(cli.call(
            kw.list_offsets_request_v2, topic, partition,
            isolation_level=iso))
        err, off = res[(topic, partition)]
        assert err == 0, err
        out.append(off)
    return tuple(out)


def plain(cli, topic, values):
    """A non-transactional batch; returns its base offset."""
    err, base = cli.produce(topic, 0, kw.record_batch(values))
    assert err == 0, err
    return base


def make_hanging_race(broker):
    """Runs the race up to the late produce; returns (cli, pid, old epoch,
    late produce's (error, base offset)).  TOPIC must exist."""
    broker.create_topic(DECOY)
    cli = kw.TxnClient(broker.port)
    deadline = time.monotonic() + 10 * SLOW
    while True:
        err, pid, epoch = cli.init_producer_id(
            version=4, transactional_id=TID, txn_timeout_ms=1000)
        if err not in (15, 14, 51) or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert err == 0, err
    # The coordinator hears of D-0 only; T-0's AddPartitionsToTxn is "lost".
    res = cli.add_partitions(TID, pid, epoch, {DECOY: [0]})
    assert res == {(DECOY, 0): 0}, res

    def aborted():
        d = cli.describe_transactions([TID])[TID]
        return d["state"] == "CompleteAbort" and d["producer_epoch"] > epoch
    wait_for(aborted, "the coordinator's timeout abort")
    # The delayed produce to T-0 arrives now, at the old epoch.
    late = cli.produce(TOPIC, 0, kw.record_batch(
        [b"late-1", b"late-2"], producer_id=pid, producer_epoch=epoch,
        base_sequence=0, transactional=True), transactional_id=TID)
    return cli, pid, epoch, late


def test_verification_refuses_late_batch(broker_factory):
    broker = broker_factory(**SETTINGS)
    broker.create_topic(TOPIC)
    cli, pid, epoch, (err, _) = make_hanging_race(broker)
    assert err != 0, "late transactional batch was accepted"
    plain(cli, TOPIC, [b"other-1", b"other-2"])
    hw, lso = offsets(cli, TOPIC)
    assert hw == 2 and lso == hw, (hw, lso)
    out = ok(ctl(broker, "txn", "find-hanging", "--topic", TOPIC,
                 "--max-transaction-timeout", "0"))
    assert "no hanging transactions" in out
    cli.close()


def consume(consumer, want, timeout):
    """Values polled until `want` arrived or timeout passed."""
    got = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and len(got) < want:
        m = consumer.poll(0.2)
        if m is None or m.error():
            continue
        got.append(m.value())
    return got


def test_hanging_found_explained_and_aborted(broker_factory):
    broker = broker_factory(**dict(
        SETTINGS, **{"transaction.partition.verification.enable": "false"}))
    broker.create_topic(TOPIC)
    cli0 = kw.TxnClient(broker.port)
    assert plain(cli0, TOPIC, [b"before"]) == 0
    cli0.close()
    cli, pid, epoch, (err, start) = make_hanging_race(broker)
    assert err == 0, "late batch refused with verification off: %d" % err
    assert start == 1
    plain(cli, TOPIC, [b"after-1", b"after-2"])
    hw, lso = offsets(cli, TOPIC)
    assert (hw, lso) == (5, 1)

    # The default threshold (15 min) does not call it hanging yet.
    out = ok(ctl(broker, "txn", "find-hanging", "--topic", TOPIC))
    assert "no hanging transactions" in out

    def found():
        rows = table(ok(ctl(broker, "txn", "find-hanging", "--topic", TOPIC,
                            "--max-transaction-timeout", "300")))
        return rows if rows and "ProducerId" in rows[0] else None
    rows = wait_for(found, "find-hanging to report it")
    assert len(rows) == 1, rows
    r = rows[0]
    assert r["Topic"] == TOPIC and r["Partition"] == "0"
    assert r["ProducerId"] == str(pid) and r["ProducerEpoch"] == str(epoch)
    assert r["StartOffset"] == "1"
    assert r["TransactionalId"] == TID
    assert r["CoordinatorState"] == "CompleteAbort"
    assert int(r["AgeMs"]) > 300
    doc = json.loads(ok(ctl(broker, "--json", "txn", "find-hanging",
                            "--topic", TOPIC, "--partition", "0",
                            "--max-transaction-timeout", "300")))
    assert doc["partitions_checked"] == 1
    (h,) = doc["hanging"]
    assert (h["topic"], h["partition"], h["producer_id"], h["start_offset"],
            h["producer_epoch"], h["transactional_id"],
            h["coordinator_state"]) == (TOPIC, 0, pid, 1, epoch, TID,
                                        "CompleteAbort")
    assert "CompleteAbort" in h["reason"]
    # --broker 1 covers the same partition (single node, id 1).
    doc = json.loads(ok(ctl(broker, "--json", "txn", "find-hanging",
                            "--broker", "1",
                            "--max-transaction-timeout", "300")))
    assert [x["topic"] for x in doc["hanging"]] == [TOPIC]

    # lso-gap names the holder.
    (g,) = table(ok(ctl(broker, "lso-gap", "--topic", TOPIC)))
    assert (g["HighWatermark"], g["LastStableOffset"], g["Gap"],
            g["HolderProducerId"], g["HolderStartOffset"],
            g["HolderTransactionalId"]) == ("5", "1", "4", str(pid), "1",
                                            TID)
    (gj,) = json.loads(ok(ctl(broker, "--json", "lso-gap", "--topic",
                              TOPIC)))
    assert gj["gap"] == 4 and gj["last_stable_offset"] == 1
    assert gj["holder"]["producer_id"] == pid
    assert gj["holder"]["start_offset"] == 1
    assert gj["holder"]["transactional_id"] == TID

    # A read_committed consumer gets "before" and then nothing.
    c = Consumer({"bootstrap.servers": broker.bootstrap,
                  "group.id": "hang-reader", "isolation.level":
                  "read_committed", "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(TOPIC, 0, 0)])
        got = consume(c, 3, 3 * SLOW)
        assert got == [b"before"], got

        # The broker's own check has said so in its log.
        wait_for(lambda: "hanging transaction on %s-0" % TOPIC
                 in broker.log_tail(400), "the broker's hanging warning")
        line = [x for x in broker.log_tail(400).splitlines()
                if "hanging transaction on %s-0" % TOPIC in x][-1]
        assert "producer id %d" % pid in line and "first offset 1" in line
        assert TID in line and "CompleteAbort" in line
        # ... and in its metrics: the hanging count, and the partition's
        # LSO lag and oldest open transaction.
        m = metrics(broker)
        assert m["cairn_txn_hanging_transactions"] >= 1, m
        assert m["cairn_txn_hanging_transactions_found_total"] >= 1, m
        assert m['cairn_partition_lso_lag{topic="%s",partition="0"}'
                 % TOPIC] > 0
        assert m['cairn_partition_oldest_open_txn_age_seconds'
                 '{topic="%s",partition="0"}' % TOPIC] > 0

        out = ok(ctl(broker, "txn", "abort", "--topic", TOPIC,
                     "--partition", "0", "--start-offset", "1"))
        assert "producer id %d" % pid in out and "offset 1" in out
        hw, lso = offsets(cli, TOPIC)
        assert hw == 6 and lso == hw, (hw, lso)   # the marker took 5
        got = consume(c, 2, 10 * SLOW)
        assert got == [b"after-1", b"after-2"], got
        assert metrics(broker)['cairn_partition_lso_lag{topic="%s",'
                               'partition="0"}' % TOPIC] == 0
    finally:
        c.close()
    out = ok(ctl(broker, "txn", "find-hanging", "--topic", TOPIC,
                 "--max-transaction-timeout", "0"))
    assert "no hanging transactions" in out
    (g,) = table(ok(ctl(broker, "lso-gap", "--topic", TOPIC)))
    assert g["Gap"] == "0" and g["HolderProducerId"] == ""
    cli.close()


def test_hanging_auto_abort(broker_factory):
    broker = broker_factory(**dict(
        SETTINGS, **{"transaction.partition.verification.enable": "false",
                     "transaction.hanging.auto.abort": "true"}))
    broker.create_topic(TOPIC)
    cli, pid, epoch, (err, start) = make_hanging_race(broker)
    assert err == 0, err
    plain(cli, TOPIC, [b"after"])

    def cleared():
        hw, lso = offsets(cli, TOPIC)
        return hw == lso and hw == 4
    wait_for(cleared, "the auto abort to move the LSO")
    log = broker.log_tail(400)
    assert "audit: transaction.hanging.auto.abort" in log, log
    assert "producer id %d" % pid in log
    cli.close()
