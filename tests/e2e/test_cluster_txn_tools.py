"""cairnctl's transaction tools against three brokers (issue #15).

Each tool must ask the right broker whatever the bootstrap is: producer
state at the partition's leader (DescribeProducers, ListOffsets,
WriteTxnMarkers), transaction state at the transactional id's
coordinator (FindCoordinator, DescribeTransactions), every broker for
ListTransactions; `find-hanging --broker N` covers exactly the
partitions N leads (kafka-transactions.sh, KIP-664).

Topics "xo" and "hx" are placed by hand, partition p led by node p + 1.
A librdkafka producer whose coordinator is node 2 leaves a transaction
open on xo-1 (led by 2) and xo-2 (led by 3).  A raw client plants
hanging transactions on hx-1 and hx-2 (transactional batches with
verification off and no AddPartitionsToTxn, so the coordinator, node 3,
holds the id Empty).  cairnctl always bootstraps from node 1, which is
neither a coordinator nor a leader of those partitions.
"""

import json
import re
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

import kafka_wire as kw
from conftest import SLOW, needs_cairn, ok, partition_leaders, run, tool, \
    txn_id_coordinated_by, wait_txn_state_led, wait_until

pytestmark = [needs_cairn]

REGISTER_S = 30 * SLOW
T = 30 * SLOW
PARTS = 3


def create_spread(c, topic):
    """topic with partition p led by node p + 1, RF 3, every live node
    agreeing."""
    assignment = [[(p + i) % 3 + 1 for i in range(3)] for p in range(PARTS)]
    a = AdminClient({"bootstrap.servers": c.bootstrap})
    fs = a.create_topics([NewTopic(topic, num_partitions=PARTS,
                                   replica_assignment=assignment)],
                         operation_timeout=30)
    fs[topic].result(timeout=60)
    want = {p: p + 1 for p in range(PARTS)}
    wait_until("%s led as placed on every node" % topic,
               lambda: all(partition_leaders(b.port, topic) == want
                           for b in c.live()), REGISTER_S)


def ctl(node, *args):
    return run([tool("cairnctl"), "--bootstrap-server", node.bootstrap]
               + list(args), timeout=T)


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


def led_by(port, node_id):
    """{(topic, partition)} that node_id leads, as the broker on port
    answers Metadata for every topic."""
    cli = kw.TxnClient(port, timeout=5)
    try:
        _, _, topics = cli.metadata(None)
    finally:
        cli.close()
    return {(t, p) for t, d in topics.items()
            for p, (_, leader) in d["partitions"].items()
            if leader == node_id}


def offsets(port, topic, part):
    """(high watermark, last stable offset) at the broker on port."""
    cli = kw.ReadClient(port, timeout=5)
    try:
        e1, hw = cli.list_offset_iso(topic, part, kw.READ_UNCOMMITTED)
        e2, stable = cli.list_offset_iso(topic, part, kw.READ_COMMITTED)
    finally:
        cli.close()
    assert (e1, e2) == (0, 0), (e1, e2)
    return hw, stable


def settled(port, topic, part, end):
    """Waits until the broker on port has high watermark and LSO both at
    end: the marker is written there and replicated.  (WriteTxnMarkers
    answers once its leader has appended, before the high watermark
    covers the marker.)"""
    wait_until("%s-%d: high watermark and LSO at %d" % (topic, part, end),
               lambda: offsets(port, topic, part) == (end, end), T)


def plant_hanging(c, tid, parts, txn_timeout_ms=60000):
    """Transactional batches of tid's producer on hx-p for p in parts,
    each at its leader, with no AddPartitionsToTxn (verification is off):
    open transactions the coordinator does not know.  Returns (pid,
    epoch, {partition: start offset})."""
    coord = c.node(int(tid_coordinator(c, tid)))
    cli = kw.TxnClient(coord.port)
    try:
        deadline = time.monotonic() + T
        while True:
            err, pid, epoch = cli.init_producer_id(
                version=4, transactional_id=tid,
                txn_timeout_ms=txn_timeout_ms)
            if err not in (15, 14, 51) or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert err == 0, err
    finally:
        cli.close()
    starts = {}
    for p in parts:
        lc = kw.TxnClient(c.node(p + 1).port)
        try:
            err, base = lc.produce("hx", p, kw.record_batch(
                [b"before"]))
            assert err == 0, err
            err, base = lc.produce("hx", p, kw.record_batch(
                [b"hang-1", b"hang-2"], producer_id=pid,
                producer_epoch=epoch, base_sequence=0, transactional=True),
                transactional_id=tid)
            assert err == 0, "planted batch on hx-%d refused: %d" % (p, err)
            starts[p] = base
            err, _ = lc.produce("hx", p, kw.record_batch([b"after"]))
            assert err == 0, err
        finally:
            lc.close()
    return pid, epoch, starts


def tid_coordinator(c, tid):
    cli = kw.TxnClient(c.node(1).port, timeout=5)
    try:
        (e,) = cli.find_coordinator(tid, key_type=1, version=1)
    finally:
        cli.close()
    assert e["error"] == 0, e
    return e["node_id"]


def test_txn_tools_ask_leaders_and_coordinators(cluster_factory):
    c = cluster_factory(3, **{
        "group.initial.rebalance.delay.ms": "0",
        "transaction.partition.verification.enable": "false"})
    c.wait_registered([1, 2, 3], REGISTER_S)
    create_spread(c, "xo")
    create_spread(c, "hx")
    led = wait_txn_state_led(c, REGISTER_S)
    boot = c.node(1)

    # An open transaction on xo-1 (node 2) and xo-2 (node 3), coordinated
    # by node 2.
    tid = txn_id_coordinated_by(led, 2, "tools")
    p = Producer({"bootstrap.servers": c.bootstrap, "transactional.id": tid,
                  "linger.ms": 5})
    p.init_transactions(T)
    p.begin_transaction()
    for q in (1, 2):
        p.produce("xo", value=b"open-%d" % q, partition=q)
    assert p.flush(T) == 0
    assert tid_coordinator(c, tid) == 2

    # describe: at the coordinator (node 2), not the bootstrap.
    (d,) = table(ok(ctl(boot, "txn", "describe", "--transactional-id",
                        tid)))
    assert d["CoordinatorId"] == "2" and d["TransactionState"] == "Ongoing"
    assert sorted(d["TopicPartitions"].split(",")) == ["xo-1", "xo-2"], d
    dj = json.loads(ok(ctl(boot, "--json", "txn", "describe",
                           "--transactional-id", tid)))
    assert dj["coordinator_id"] == 2
    assert sorted((x["topic"], x["partition"])
                  for x in dj["topic_partitions"]) == [("xo", 1), ("xo", 2)]
    pid = dj["producer_id"]
    # Another broker does not describe it as unknown: NOT_COORDINATOR
    # sends a client back to FindCoordinator (Kafka).
    cli = kw.TxnClient(boot.port, timeout=5)
    try:
        assert cli.describe_transactions([tid])[tid]["error"] == 16
    finally:
        cli.close()

    # describe-producers: at each partition's leader.
    for q in (1, 2):
        pj = json.loads(ok(ctl(boot, "--json", "txn", "describe-producers",
                               "--topic", "xo", "--partition", str(q))))
        (s,) = [x for x in pj["producers"] if x["producer_id"] == pid]
        assert s["current_transaction_start_offset"] == 0, pj
    pj = json.loads(ok(ctl(boot, "--json", "txn", "describe-producers",
                           "--topic", "xo", "--partition", "0")))
    assert pj["producers"] == [], pj

    # list: every broker; the id shows with its coordinator.
    lj = json.loads(ok(ctl(boot, "--json", "txn", "list")))
    mine = [x for x in lj if x["transactional_id"] == tid]
    assert len(mine) == 1 and mine[0]["coordinator_id"] == 2, lj
    assert mine[0]["transaction_state"] == "Ongoing"

    # Hanging transactions on hx-1 (node 2) and hx-2 (node 3), their id
    # coordinated by node 3, which holds it Empty.
    htid = txn_id_coordinated_by(led, 3, "planted")
    hpid, hepoch, starts = plant_hanging(c, htid, (1, 2))
    time.sleep(0.05)   # older than --max-transaction-timeout 0

    # The live transaction is not hanging: its coordinator has it Ongoing
    # with both partitions.
    out = ok(ctl(boot, "txn", "find-hanging", "--topic", "xo",
                 "--max-transaction-timeout", "0"))
    assert "no hanging transactions (3 partitions checked)" in out, out

    # --broker N: exactly the partitions N leads, and only their hanging
    # transactions.
    for n, want in ((1, []), (2, [("hx", 1)]), (3, [("hx", 2)])):
        doc = json.loads(ok(ctl(boot, "--json", "txn", "find-hanging",
                                "--broker", str(n),
                                "--max-transaction-timeout", "0")))
        assert doc["partitions_checked"] == len(led_by(boot.port, n)), \
            (n, doc)
        got = [(h["topic"], h["partition"]) for h in doc["hanging"]]
        assert got == want, (n, doc)
        for h in doc["hanging"]:
            assert h["producer_id"] == hpid and \
                h["producer_epoch"] == hepoch, h
            assert h["start_offset"] == starts[h["partition"]], h
            assert h["transactional_id"] == htid, h
            assert h["coordinator_state"] == "Empty", h
    res = ctl(boot, "txn", "find-hanging", "--broker", "9")
    assert res.returncode == 1, (res.stdout, res.stderr)
    assert "broker 9 is not in the cluster" in res.stderr, res.stderr

    # lso-gap: at each leader, naming the holder.
    gj = json.loads(ok(ctl(boot, "--json", "lso-gap", "--topic", "hx")))
    gaps = {g["partition"]: g for g in gj}
    assert gaps[0]["gap"] == 0 and gaps[0]["holder"] is None, gj
    for q in (1, 2):
        assert gaps[q]["last_stable_offset"] == starts[q], gj
        assert gaps[q]["gap"] == 3, gj
        assert gaps[q]["holder"]["producer_id"] == hpid, gj
        assert gaps[q]["holder"]["transactional_id"] == htid, gj

    # abort: the marker is written at the partition's leader; its LSO
    # moves.
    out = ok(ctl(boot, "txn", "abort", "--topic", "hx", "--partition", "1",
                 "--start-offset", str(starts[1])))
    assert "producer id %d" % hpid in out, out
    settled(c.node(2).port, "hx", 1, starts[1] + 4)
    assert "abort marker for producer %d epoch %d on hx-1: written" % (
        hpid, hepoch) in c.node(2).log_tail(400)
    aj = json.loads(ok(ctl(boot, "--json", "txn", "abort", "--topic", "hx",
                           "--partition", "2", "--producer-id",
                           str(hpid), "--producer-epoch",
                           str(hepoch))))
    assert aj["aborted"] is True and aj["producer_id"] == hpid, aj
    settled(c.node(3).port, "hx", 2, starts[2] + 4)
    gj = json.loads(ok(ctl(boot, "--json", "lso-gap", "--topic", "hx")))
    assert [g["gap"] for g in gj] == [0, 0, 0], gj
    out = ok(ctl(boot, "txn", "find-hanging", "--topic", "hx",
                 "--max-transaction-timeout", "0"))
    assert "no hanging transactions" in out, out

    # An abort of a live transaction's partition led away from its
    # coordinator is refused: the marker would split the transaction.
    res = ctl(boot, "txn", "abort", "--topic", "xo", "--partition", "2",
              "--start-offset", "0")
    assert res.returncode == 1, (res.stdout, res.stderr)
    assert "is Ongoing with xo-2 at its coordinator, broker 2" in \
        res.stderr, res.stderr

    # The live transaction is untouched and still commits.
    (d,) = table(ok(ctl(boot, "txn", "describe", "--transactional-id",
                        tid)))
    assert d["TransactionState"] == "Ongoing", d
    p.commit_transaction(T)
    for q in (1, 2):
        settled(c.node(q + 1).port, "xo", q, 2)


def test_broker_hanging_check_in_a_cluster(cluster_factory):
    """The broker's own hanging check (transaction.hanging.auto.abort)
    judges only partitions it leads, and aborts only a producer its own
    coordinator knows to be dead: hx-2 (led by node 3, the planted id's
    coordinator) is aborted by node 3; hx-1 (led by node 2) is reported by
    node 2 but left to the operator, who finds and aborts it with
    cairnctl through node 1."""
    c = cluster_factory(3, **{
        "transaction.partition.verification.enable": "false",
        "transaction.max.timeout.ms": "2000",
        "cairn.transaction.hanging.check.interval.ms": "200",
        "cairn.transaction.hanging.margin.ms": "0",
        "transaction.hanging.auto.abort": "true"})
    c.wait_registered([1, 2, 3], REGISTER_S)
    create_spread(c, "hx")
    led = wait_txn_state_led(c, REGISTER_S)
    htid = txn_id_coordinated_by(led, 3, "planted")
    hpid, hepoch, starts = plant_hanging(c, htid, (1, 2),
                                         txn_timeout_ms=1000)
    settled(c.node(3).port, "hx", 2, starts[2] + 4)
    assert "aborting producer id %d epoch %d on hx-2" % (hpid, hepoch) in \
        c.node(3).log_tail(2000)
    wait_until("node 2 declines to abort hx-1 itself", lambda:
               "not aborting producer id %d on hx-1" % hpid
               in c.node(2).log_tail(2000), T)
    assert offsets(c.node(2).port, "hx", 1) == (starts[1] + 3, starts[1])
    # Followers judge nothing.
    for n, part in ((1, 1), (3, 1), (1, 2), (2, 2)):
        assert "hanging transaction on hx-%d" % part not in \
            c.node(n).log_tail(2000), (n, part)

    boot = c.node(1)
    doc = json.loads(ok(ctl(boot, "--json", "txn", "find-hanging",
                            "--broker", "2",
                            "--max-transaction-timeout", "0")))
    assert [(h["topic"], h["partition"], h["producer_id"],
             h["coordinator_state"]) for h in doc["hanging"]] == \
        [("hx", 1, hpid, "Empty")], doc
    ok(ctl(boot, "txn", "abort", "--topic", "hx", "--partition", "1",
           "--start-offset", str(starts[1])))
    settled(c.node(2).port, "hx", 1, starts[1] + 4)
