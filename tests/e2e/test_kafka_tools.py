"""Kafka's own command-line tools against Cairn: the seeds' triage runbook
with kafka-transactions.sh (org.apache.kafka.tools.TransactionsCommand,
kafka-tools 4.4.0) on a hanging transaction made as test_hanging.py makes
it, and cairnctl's answers to the same questions, which must agree.

  1. find-hanging --broker-id 1      which partition is stuck, from where
  2. describe-producers              the producer behind the open txn
  3. describe --transactional-id     what its coordinator believes
  4. abort --start-offset            the repair (Admin.abortTransaction:
                                     DescribeProducers + WriteTxnMarkers)

Release broker only: one JVM per command, and the protocol is the point.
"""

import re

import pytest

import java_harness
from conftest import SANITIZED, SLOW, needs_cairn, run, tool
from test_hanging import SETTINGS, TID, TOPIC, make_hanging_race, offsets, plain

pytestmark = [needs_cairn, pytest.mark.skipif(
    SANITIZED, reason="Kafka's tools run against the release broker")]

TIMEOUT = 120 * SLOW


@pytest.fixture(scope="session")
def classpath():
    return java_harness.classpath()


def kafka_txn(cp, tmp_path, broker, *args):
    """kafka-transactions.sh --bootstrap-server B ARGS: its stdout."""
    err = tmp_path / "kafka-transactions.stderr"
    res = java_harness.run_java(
        cp, "org.apache.kafka.tools.TransactionsCommand",
        ["--bootstrap-server", broker.bootstrap] + list(args), TIMEOUT, err)
    assert res.returncode == 0, "kafka-transactions %s: rc %d\n%s\n%s" % (
        " ".join(args), res.returncode, res.stdout, err.read_text()[-3000:])
    return res.stdout


def cairnctl(broker, *args):
    res = run([tool("cairnctl"), "--bootstrap-server", broker.bootstrap]
              + list(args), timeout=TIMEOUT)
    assert res.returncode == 0, "cairnctl %s: rc %d\n%s\n%s" % (
        " ".join(args), res.returncode, res.stdout, res.stderr)
    return res.stdout


def kafka_table(out):
    """Kafka's tools print tab-separated, space-padded columns."""
    lines = [x for x in out.splitlines() if x.strip()]
    heads = [h.strip() for h in lines[0].split("\t") if h.strip()]
    rows = []
    for line in lines[1:]:
        cells = [c.strip() for c in line.split("\t")]
        rows.append(dict(zip(heads, cells + [""] * len(heads))))
    return heads, rows


def cairn_table(out):
    """cairnctl's padded columns, cut at the header's offsets."""
    lines = [x for x in out.splitlines() if x.strip()]
    heads = [(m.start(), m.group()) for m in re.finditer(r"\S+", lines[0])]
    rows = []
    for line in lines[1:]:
        row = {}
        for i, (start, name) in enumerate(heads):
            end = heads[i + 1][0] if i + 1 < len(heads) else len(line)
            row[name] = line[start:end].strip()
        rows.append(row)
    return [h for _, h in heads], rows


# Columns computed at the moment a tool runs: both must print a value or
# both none, which need not be the same.
MOVING = ("TransactionDurationMs",)


def same_facts(kafka_out, cairn_out, must_share):
    """Every column both print has the same values, row by row; kafka's
    "None" is cairnctl's empty cell.  Returns kafka's rows."""
    kh, krows = kafka_table(kafka_out)
    ch, crows = cairn_table(cairn_out)
    shared = [h for h in kh if h in ch]
    assert set(must_share) <= set(shared), (kh, ch)
    assert len(krows) == len(crows), (kafka_out, cairn_out)

    def norm(h, v):
        v = "" if v == "None" else v
        return (v != "") if h in MOVING else v
    for k, c in zip(krows, crows):
        assert {h: norm(h, k[h]) for h in shared} == \
            {h: norm(h, c[h]) for h in shared}, (kafka_out, cairn_out)
    return krows


def test_runbook_kafka_transactions(broker_factory, classpath, tmp_path):
    broker = broker_factory(**dict(
        SETTINGS, **{"transaction.partition.verification.enable": "false"}))
    broker.create_topic(TOPIC)
    cli, pid, epoch, (err, start) = make_hanging_race(broker)
    assert err == 0, "late batch refused with verification off: %d" % err
    plain(cli, TOPIC, [b"after"])
    hw, lso = offsets(cli, TOPIC)
    assert lso == start and hw > lso, (hw, lso, start)

    # 0. list: the coordinator knows the id, finished (timeout abort).
    rows = same_facts(kafka_txn(classpath, tmp_path, broker, "list"),
                      cairnctl(broker, "txn", "list"),
                      ["TransactionalId", "ProducerId", "TransactionState"])
    assert [(r["TransactionalId"], r["TransactionState"]) for r in rows] == \
        [(TID, "CompleteAbort")]

    # 1. find-hanging on the broker (0 minutes: anything open qualifies).
    out = kafka_txn(classpath, tmp_path, broker, "find-hanging",
                    "--broker-id", "1", "--max-transaction-timeout", "0")
    rows = same_facts(out, cairnctl(broker, "txn", "find-hanging", "--broker",
                                    "1", "--max-transaction-timeout", "0"),
                      ["Topic", "Partition", "ProducerId", "ProducerEpoch",
                       "CoordinatorEpoch", "StartOffset"])
    assert [(r["Topic"], r["Partition"], r["ProducerId"], r["ProducerEpoch"],
             r["StartOffset"]) for r in rows] == [
        (TOPIC, "0", str(pid), str(epoch), str(start))], out

    # 2. describe-producers: the open transaction's producer and start.
    out = kafka_txn(classpath, tmp_path, broker, "describe-producers",
                    "--topic", TOPIC, "--partition", "0")
    rows = same_facts(out, cairnctl(broker, "txn", "describe-producers",
                                    "--topic", TOPIC, "--partition", "0"),
                      ["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch",
                       "LastSequence", "LastTimestamp",
                       "CurrentTransactionStartOffset"])
    open_rows = [r for r in rows if r["CurrentTransactionStartOffset"]
                 not in ("", "None", "-1")]
    assert [(r["ProducerId"], r["CurrentTransactionStartOffset"])
            for r in open_rows] == [(str(pid), str(start))], out

    # 3. describe: the coordinator finished it at a later epoch and holds
    #    no partition, so it is a true hang.
    out = kafka_txn(classpath, tmp_path, broker, "describe",
                    "--transactional-id", TID)
    (r,) = same_facts(out, cairnctl(broker, "txn", "describe",
                                    "--transactional-id", TID),
                      ["CoordinatorId", "TransactionalId", "ProducerId",
                       "ProducerEpoch", "TransactionState",
                       "TransactionTimeoutMs", "TopicPartitions"])
    assert r["TransactionState"] == "CompleteAbort"
    assert int(r["ProducerEpoch"]) > epoch and r["TopicPartitions"] == ""

    # 4. abort at the stuck offset: the LSO catches up with the HW.
    kafka_txn(classpath, tmp_path, broker, "abort", "--topic", TOPIC,
              "--partition", "0", "--start-offset", str(start))
    hw2, lso2 = offsets(cli, TOPIC)
    assert hw2 == hw + 1 and lso2 == hw2, (hw2, lso2)   # the marker
    out = kafka_txn(classpath, tmp_path, broker, "find-hanging",
                    "--broker-id", "1", "--max-transaction-timeout", "0")
    assert kafka_table(out)[1] == [], out
    assert "no hanging transactions" in cairnctl(
        broker, "txn", "find-hanging", "--broker", "1",
        "--max-transaction-timeout", "0")
    cli.close()


def test_abort_refuses_wrong_offset(broker_factory, classpath, tmp_path):
    """abort at an offset where no transaction starts changes nothing."""
    broker = broker_factory(**dict(
        SETTINGS, **{"transaction.partition.verification.enable": "false"}))
    broker.create_topic(TOPIC)
    cli, pid, epoch, (err, start) = make_hanging_race(broker)
    assert err == 0, err
    before = offsets(cli, TOPIC)
    res = java_harness.run_java(
        classpath, "org.apache.kafka.tools.TransactionsCommand",
        ["--bootstrap-server", broker.bootstrap, "abort", "--topic", TOPIC,
         "--partition", "0", "--start-offset", str(start + 1)], TIMEOUT,
        tmp_path / "abort.stderr")
    assert res.returncode != 0
    assert offsets(cli, TOPIC) == before
    cli.close()
