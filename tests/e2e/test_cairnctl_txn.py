"""cairnctl txn: list, describe and describe-producers against a live broker.

A confluent_kafka transactional producer opens a transaction and leaves it
open while each subcommand is checked in table and JSON form (state
Ongoing, producer id and epoch agreeing between the coordinator and the
partition leader, a current transaction start offset); after the commit the
same commands must show CompleteCommit and no open transaction.  Errors must
say what is wrong on stderr and exit 1 (operation failed) or 2 (usage).
"""

import json
import re
import time

from confluent_kafka import Producer

from conftest import SLOW, fails, free_port, needs_cairn, ok, run, tool

pytestmark = needs_cairn

TIMEOUT = 30 * SLOW
TXN_ID = "cli-txn-1"
TOPIC = "txn-events"


def ctl(broker, *args, bootstrap=None):
    """Runs cairnctl with --bootstrap-server first; returns the result."""
    server = bootstrap or broker.bootstrap
    return run([tool("cairnctl"), "--bootstrap-server", server] + list(args),
               timeout=TIMEOUT)


def table(out):
    """Rows of a padded table as dicts, cut at the header's column offsets
    (cells may be blank, so splitting on whitespace would not do)."""
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


def open_transaction(broker):
    broker.create_topic(TOPIC, partitions=2)
    p = Producer({"bootstrap.servers": broker.bootstrap,
                  "transactional.id": TXN_ID,
                  "transaction.timeout.ms": 60000})
    p.init_transactions(TIMEOUT)
    p.begin_transaction()
    for i in range(3):
        p.produce(TOPIC, value=b"v%d" % i, partition=0)
    p.flush(TIMEOUT)
    return p


def test_txn_lifecycle(broker):
    p = open_transaction(broker)

    # --- open: describe ---
    d = table(ok(ctl(broker, "txn", "describe", "--transactional-id",
                     TXN_ID)))
    assert len(d) == 1
    d = d[0]
    assert d["TransactionalId"] == TXN_ID
    assert d["TransactionState"] == "Ongoing"
    assert d["TransactionTimeoutMs"] == "60000"
    assert int(d["CurrentTransactionStartTimeMs"]) > 0
    assert int(d["TransactionDurationMs"]) >= 0
    assert d["TopicPartitions"] == TOPIC + "-0"
    pid, epoch = int(d["ProducerId"]), int(d["ProducerEpoch"])
    assert pid >= 0 and epoch >= 0

    dj = json.loads(ok(ctl(broker, "--json", "txn", "describe",
                           "--transactional-id", TXN_ID)))
    assert dj["transactional_id"] == TXN_ID
    assert dj["transaction_state"] == "Ongoing"
    assert dj["producer_id"] == pid and dj["producer_epoch"] == epoch
    assert dj["coordinator_id"] == int(d["CoordinatorId"])
    assert dj["transaction_timeout_ms"] == 60000
    assert dj["transaction_start_time_ms"] > 0
    assert dj["transaction_duration_ms"] >= 0
    assert dj["topic_partitions"] == [{"topic": TOPIC, "partition": 0}]

    # --- open: describe-producers agrees with the coordinator ---
    rows = table(ok(ctl(broker, "txn", "describe-producers", "--topic",
                        TOPIC, "--partition", "0")))
    assert len(rows) == 1
    r = rows[0]
    assert int(r["ProducerId"]) == pid and int(r["ProducerEpoch"]) == epoch
    assert r["LastSequence"] == "2"
    assert int(r["LastTimestamp"]) > 0
    assert r["CurrentTransactionStartOffset"] == "0"
    assert "LatestCoordinatorEpoch" in r
    pj = json.loads(ok(ctl(broker, "txn", "describe-producers", "--json",
                           "--topic", TOPIC, "--partition", "0")))
    assert pj["topic"] == TOPIC and pj["partition"] == 0
    assert len(pj["producers"]) == 1
    s = pj["producers"][0]
    assert s["producer_id"] == pid and s["producer_epoch"] == epoch
    assert s["last_sequence"] == 2
    assert s["current_transaction_start_offset"] == 0
    assert isinstance(s["latest_coordinator_epoch"], int)
    # The other partition saw nothing.
    pj1 = json.loads(ok(ctl(broker, "--json", "txn", "describe-producers",
                            "--topic", TOPIC, "--partition", "1")))
    assert pj1["producers"] == []
    assert table(ok(ctl(broker, "txn", "describe-producers", "--topic",
                        TOPIC, "--partition", "1"))) == []

    # --- open: list and its filters ---
    rows = table(ok(ctl(broker, "txn", "list")))
    mine = [r for r in rows if r["TransactionalId"] == TXN_ID]
    assert len(mine) == 1
    assert mine[0]["ProducerId"] == str(pid)
    assert mine[0]["TransactionState"] == "Ongoing"
    assert mine[0]["Coordinator"] == d["CoordinatorId"]
    lj = json.loads(ok(ctl(broker, "--json", "txn", "list")))
    assert {"transactional_id": TXN_ID, "coordinator_id": dj["coordinator_id"],
            "producer_id": pid, "transaction_state": "Ongoing"} in lj

    def listed(*args):
        out = json.loads(ok(ctl(broker, "--json", "txn", "list", *args)))
        return [t["transactional_id"] for t in out]

    assert listed("--state", "Ongoing") == [TXN_ID]
    assert listed("--state", "Empty", "--state", "CompleteCommit") == []
    assert listed("--producer-id", str(pid)) == [TXN_ID]
    assert listed("--producer-id", str(pid + 1000)) == []
    assert listed("--duration-ms", "0") == [TXN_ID]
    assert listed("--duration-ms", "3600000") == []

    res = ctl(broker, "txn", "list", "--state", "Bogus")
    assert res.returncode == 0, res.stderr
    assert "warning" in res.stderr and "Bogus" in res.stderr
    assert table(res.stdout) == []

    # --- committed ---
    p.commit_transaction(TIMEOUT)

    # EndTxn is answered once PrepareCommit is durable (the decision); the
    # markers and CompleteCommit follow, so the state may still be
    # PrepareCommit for a moment.  Wait for it, bounded, and never accept
    # anything else on the way.
    deadline = time.monotonic() + TIMEOUT
    while True:
        d = table(ok(ctl(broker, "txn", "describe", "--transactional-id",
                         TXN_ID)))[0]
        if d["TransactionState"] != "PrepareCommit":
            break
        assert time.monotonic() < deadline, "stuck in PrepareCommit"
        time.sleep(0.05)
    assert d["TransactionState"] == "CompleteCommit"
    assert int(d["ProducerId"]) == pid
    assert d["TopicPartitions"] == ""
    dj = json.loads(ok(ctl(broker, "--json", "txn", "describe",
                           "--transactional-id", TXN_ID)))
    assert dj["transaction_state"] == "CompleteCommit"
    assert dj["topic_partitions"] == []

    rows = table(ok(ctl(broker, "txn", "describe-producers", "--topic",
                        TOPIC, "--partition", "0")))
    assert int(rows[0]["ProducerId"]) == pid
    assert rows[0]["CurrentTransactionStartOffset"] == "-1"
    pj = json.loads(ok(ctl(broker, "--json", "txn", "describe-producers",
                           "--topic", TOPIC, "--partition", "0")))
    assert pj["producers"][0]["current_transaction_start_offset"] == -1

    assert listed("--state", "CompleteCommit") == [TXN_ID]
    assert listed("--state", "Ongoing") == []
    rows = table(ok(ctl(broker, "txn", "list")))
    assert [r["TransactionState"] for r in rows
            if r["TransactionalId"] == TXN_ID] == ["CompleteCommit"]


def test_txn_errors(broker):
    broker.create_topic(TOPIC, partitions=1)

    res = ctl(broker, "txn", "describe", "--transactional-id", "no-such-id")
    fails(res, 1, "TRANSACTIONAL_ID_NOT_FOUND", "no-such-id")
    assert res.stdout == ""
    res = ctl(broker, "--json", "txn", "describe", "--transactional-id",
              "no-such-id")
    fails(res, 1, "TRANSACTIONAL_ID_NOT_FOUND")
    assert json.loads(res.stdout)["error"] == "TRANSACTIONAL_ID_NOT_FOUND"

    res = ctl(broker, "txn", "describe-producers", "--topic", "nope",
              "--partition", "0")
    fails(res, 1, "nope", "UNKNOWN_TOPIC_OR_PARTITION")
    res = ctl(broker, "txn", "describe-producers", "--topic", TOPIC,
              "--partition", "7")
    fails(res, 1, "UNKNOWN_TOPIC_OR_PARTITION")

    # No transactions yet: an empty list, header only.
    assert json.loads(ok(ctl(broker, "--json", "txn", "list"))) == []
    assert table(ok(ctl(broker, "txn", "list"))) == []

    # Usage errors exit 2 before touching the network.
    fails(ctl(broker, "txn", "describe"), 2, "--transactional-id")
    fails(ctl(broker, "txn", "describe-producers", "--topic", TOPIC), 2,
          "--partition")
    fails(ctl(broker, "txn", "list", "--partition", "1"), 2, "--partition")
    fails(ctl(broker, "txn", "list", "--producer-id", "abc"), 2,
          "--producer-id")
    fails(ctl(broker, "txn", "list", "--duration-ms", "-5"), 2,
          "--duration-ms")
    fails(ctl(broker, "txn", "list", "--bogus"), 2, "--bogus")
    fails(ctl(broker, "txn", "nothing"), 2, "unknown command")
    fails(ctl(broker, "txn", "describe", "--transactional-id", "x",
              "--state", "Ongoing"), 2, "--state")


def test_txn_unreachable_and_help():
    port = free_port()
    for args in (["txn", "list"],
                 ["txn", "describe", "--transactional-id", "x"],
                 ["txn", "describe-producers", "--topic", "t",
                  "--partition", "0"]):
        res = run([tool("cairnctl"), "--bootstrap-server",
                   "127.0.0.1:%d" % port, "--timeout", "2000"] + args,
                  timeout=TIMEOUT)
        fails(res, 1, "cannot connect")
        assert res.stdout == ""
    res = run([tool("cairnctl"), "--help"], timeout=TIMEOUT)
    assert res.returncode == 0
    for s in ("txn list", "txn describe --transactional-id",
              "txn describe-producers", "--duration-ms"):
        assert s in res.stdout


# --- find-hanging, abort, lso-gap (hanging transactions, issue #6) ---------


def test_hanging_tools_on_a_live_transaction(broker):
    """A live (Ongoing) transaction is not hanging; lso-gap names it as the
    LSO holder; txn abort --start-offset makes its coordinator abort the
    whole transaction (epoch bump), after which the LSO catches up."""
    p = open_transaction(broker)
    pid = json.loads(ok(ctl(broker, "--json", "txn", "describe",
                            "--transactional-id", TXN_ID)))["producer_id"]

    # Young and Ongoing at its coordinator: not hanging, either way.
    out = ok(ctl(broker, "txn", "find-hanging", "--topic", TOPIC))
    assert "no hanging transactions (2 partitions checked)" in out
    doc = json.loads(ok(ctl(broker, "--json", "txn", "find-hanging",
                            "--topic", TOPIC,
                            "--max-transaction-timeout", "0")))
    assert doc == {"max_transaction_timeout_ms": 0, "partitions_checked": 2,
                   "hanging": []}
    doc = json.loads(ok(ctl(broker, "--json", "txn", "find-hanging")))
    assert doc["hanging"] == [] and doc["partitions_checked"] >= 2

    rows = table(ok(ctl(broker, "lso-gap", "--topic", TOPIC)))
    assert [r["Partition"] for r in rows] == ["0", "1"]
    r0, r1 = rows
    assert (r0["HighWatermark"], r0["LastStableOffset"], r0["Gap"]) == \
        ("3", "0", "3")
    assert r0["HolderProducerId"] == str(pid)
    assert r0["HolderStartOffset"] == "0"
    assert r0["HolderTransactionalId"] == TXN_ID
    assert r0["HolderCoordinatorState"] == "Ongoing"
    assert (r1["Gap"], r1["HolderProducerId"]) == ("0", "")
    gj = json.loads(ok(ctl(broker, "--json", "lso-gap", "--topic", TOPIC)))
    assert gj[0]["holder"]["transactional_id"] == TXN_ID
    assert gj[0]["holder"]["coordinator_state"] == "Ongoing"
    assert gj[1]["holder"] is None and gj[1]["gap"] == 0
    assert any(x["topic"] == TOPIC
               for x in json.loads(ok(ctl(broker, "--json", "lso-gap"))))

    out = ok(ctl(broker, "txn", "abort", "--topic", TOPIC, "--partition",
                 "0", "--start-offset", "0"))
    assert "producer id %d" % pid in out
    assert "aborts its whole transaction" in out

    def settled():
        d = json.loads(ok(ctl(broker, "--json", "txn", "describe",
                              "--transactional-id", TXN_ID)))
        g = json.loads(ok(ctl(broker, "--json", "lso-gap", "--topic",
                              TOPIC)))
        return d["transaction_state"] == "CompleteAbort" and \
            g[0]["gap"] == 0
    deadline = time.monotonic() + TIMEOUT
    while not settled():
        assert time.monotonic() < deadline, "abort did not complete"
        time.sleep(0.1)
    # The producer was fenced under its feet: its commit must fail.
    try:
        p.commit_transaction(10)
        committed = True
    except Exception:
        committed = False
    assert not committed


def test_hanging_tools_errors(broker):
    broker.create_topic(TOPIC, partitions=1)
    # Something with a producer id but no open transaction.
    p = Producer({"bootstrap.servers": broker.bootstrap,
                  "enable.idempotence": True})
    p.produce(TOPIC, value=b"x", partition=0)
    p.flush(TIMEOUT)
    (prod,) = json.loads(ok(ctl(broker, "--json", "txn",
                                "describe-producers", "--topic", TOPIC,
                                "--partition", "0")))["producers"]

    for args in (["txn", "find-hanging", "--topic", "nope"],
                 ["lso-gap", "--topic", "nope"],
                 ["txn", "abort", "--topic", "nope", "--partition", "0",
                  "--start-offset", "0"]):
        fails(ctl(broker, *args), 1, "nope", "UNKNOWN_TOPIC_OR_PARTITION")
        res = ctl(broker, "--json", *args)
        fails(res, 1, "nope")
        assert json.loads(res.stdout)["error"] == "UNKNOWN_TOPIC_OR_PARTITION"
    fails(ctl(broker, "txn", "find-hanging", "--topic", TOPIC,
              "--partition", "5"), 1, "UNKNOWN_TOPIC_OR_PARTITION")
    fails(ctl(broker, "txn", "find-hanging", "--broker", "77"), 1,
          "broker 77")

    # Nothing starts at that offset.
    res = ctl(broker, "txn", "abort", "--topic", TOPIC, "--partition", "0",
              "--start-offset", "0")
    fails(res, 1, "no open transaction starts at offset 0")
    res = ctl(broker, "--json", "txn", "abort", "--topic", TOPIC,
              "--partition", "0", "--start-offset", "12345")
    fails(res, 1, "offset 12345")
    assert json.loads(res.stdout)["aborted"] is False
    # Unknown producer id; known producer without an open transaction.
    fails(ctl(broker, "txn", "abort", "--topic", TOPIC, "--partition", "0",
              "--producer-id", "987654", "--producer-epoch", "0"), 1,
          "producer id 987654 has no state")
    fails(ctl(broker, "txn", "abort", "--topic", TOPIC, "--partition", "0",
              "--producer-id", str(prod["producer_id"]),
              "--producer-epoch", str(prod["producer_epoch"])), 1,
          "has no open transaction")
    # Nothing was written by the refusals.
    (g,) = json.loads(ok(ctl(broker, "--json", "lso-gap", "--topic",
                             TOPIC)))
    assert (g["high_watermark"], g["gap"]) == (1, 0)

    # Usage errors exit 2.
    fails(ctl(broker, "txn", "abort", "--topic", TOPIC, "--partition", "0"),
          2, "--start-offset")
    fails(ctl(broker, "txn", "abort", "--topic", TOPIC, "--partition", "0",
              "--start-offset", "1", "--producer-id", "1",
              "--producer-epoch", "0"), 2, "either")
    fails(ctl(broker, "txn", "abort", "--topic", TOPIC, "--partition", "0",
              "--producer-id", "1"), 2, "--producer-epoch")
    fails(ctl(broker, "txn", "abort", "--topic", TOPIC, "--start-offset",
              "1"), 2, "--partition")
    fails(ctl(broker, "txn", "find-hanging", "--broker", "1", "--topic",
              TOPIC), 2, "not both")
    fails(ctl(broker, "txn", "find-hanging", "--partition", "0"), 2,
          "needs --topic")
    fails(ctl(broker, "txn", "find-hanging", "--max-transaction-timeout",
              "soon"), 2, "--max-transaction-timeout")
    fails(ctl(broker, "lso-gap", "extra"), 2, "unexpected argument")
    fails(ctl(broker, "lso-gap", "--partition", "0"), 2, "--partition")
