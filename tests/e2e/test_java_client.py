"""The Apache Kafka Java client 4.x (kafka-clients 4.4.0) against Cairn.

Each test starts a broker, runs one program from tests/java
(cairn.tests.X, built by `make build-java` into build/java) as a
subprocess with a timeout, and checks the JSON it prints: idempotent
producer; transactions under transaction version 2 (the Java 4.x default:
the epoch moves at every commit and abort) and under
cairn.transaction.version=1 (it does not); read-process-write with
sendOffsetsToTransaction(offsets, consumer.groupMetadata()); read_committed
and read_uncommitted consumers; zombie fencing; the seeds' lsoGap probe;
AdminClient topics, configs, cluster, producers, transactions, groups, and
abortTransaction on a hanging transaction.

The JVM costs about a second per program; these run against the release
broker only (they test the protocol, not memory safety), except one TV2
smoke test that also runs under the sanitizers.
"""

import json
from pathlib import Path

import pytest

import java_harness
import kafka_wire as kw
from conftest import SANITIZED, SLOW, needs_cairn
from test_hanging import metrics

pytestmark = needs_cairn

TIMEOUT = 120 * SLOW
GROUPS = {"group.initial.rebalance.delay.ms": "0"}

release_only = pytest.mark.skipif(
    SANITIZED, reason="Java client tests run against the release broker")


@pytest.fixture(scope="session")
def classpath():
    return java_harness.classpath()


def java(cp, tmp_path, cls, *args, timeout=TIMEOUT):
    """Runs cairn.tests.<cls> and returns the JSON of its last line."""
    err_path = Path(tmp_path) / ("%s.stderr" % cls)
    res = java_harness.run_java(cp, "cairn.tests." + cls, args, timeout,
                                err_path)
    lines = [x for x in res.stdout.splitlines() if x.startswith("{")]
    if res.returncode != 0 or not lines:
        pytest.fail("%s exited %d; stdout:\n%s\nstderr:\n%s"
                    % (cls, res.returncode, res.stdout[-2000:],
                       err_path.read_text()[-4000:]))
    return json.loads(lines[-1])


def values(read):
    return [r["value"] for r in read["records"]]


def by_partition(read):
    out = {}
    for r in read["records"]:
        out.setdefault(r["partition"], []).append((r["offset"], r["value"]))
    return out


@release_only
def test_idempotent_producer(broker_factory, classpath, tmp_path):
    broker = broker_factory()
    broker.create_topic("idem")
    n = 500
    out = java(classpath, tmp_path, "Idempotent", broker.bootstrap, "idem", n)
    # Every send acknowledged once, at consecutive offsets, in order.
    assert out["acked_offsets"] == list(range(n))
    assert values(out["read"]) == ["v%d" % i for i in range(n)]
    assert [r["offset"] for r in out["read"]["records"]] == list(range(n))
    assert out["read"]["end"] == {"0": n}
    # One producer id, epoch 0, its sequence at the last record.
    (p,) = out["producers"]
    assert p["producer_id"] >= 0 and p["epoch"] == 0
    assert p["last_sequence"] == n - 1 and p["open_txn_offset"] is None


def check_transactions(out, tv2):
    after = out["after"]
    assert after[0]["state"] == "Empty"
    assert [a["state"] for a in after[1:]] == [
        "CompleteCommit", "CompleteAbort", "CompleteCommit"]
    pid = after[0]["producer_id"]
    assert all(a["producer_id"] == pid for a in after)
    epochs = [a["producer_epoch"] for a in after]
    if tv2:
        # KIP-890 part 2: every EndTxn bumps the epoch.
        assert epochs == [epochs[0] + i for i in range(4)], epochs
    else:
        assert epochs == [epochs[0]] * 4, epochs
    # Sends alternate partitions: txn 1 (c1-0 p0, c1-1 p1, c1-2 p0), its
    # markers; txn 2 (a-0 p0, a-1 p1) aborted, markers; txn 3 (c2-0 p0,
    # c2-1 p1), markers.
    rc = by_partition(out["read_committed"])
    assert rc == {0: [(0, "c1-0"), (1, "c1-2"), (5, "c2-0")],
                  1: [(0, "c1-1"), (4, "c2-1")]}, rc
    ru = by_partition(out["read_uncommitted"])
    assert ru == {0: [(0, "c1-0"), (1, "c1-2"), (3, "a-0"), (5, "c2-0")],
                  1: [(0, "c1-1"), (2, "a-1"), (4, "c2-1")]}, ru
    # Both end at the high watermark (nothing open): the last marker.
    assert out["read_committed"]["end"] == {"0": 7, "1": 6}
    assert out["read_uncommitted"]["end"] == {"0": 7, "1": 6}


@release_only
def test_transactions_tv2(broker_factory, classpath, tmp_path):
    broker = broker_factory()
    broker.create_topic("txn", 2)
    out = java(classpath, tmp_path, "Transactions", broker.bootstrap, "txn",
               "java-tx")
    check_transactions(out, tv2=True)


@release_only
def test_transactions_tv1(broker_factory, classpath, tmp_path):
    broker = broker_factory(**{"cairn.transaction.version": "1"})
    broker.create_topic("txn", 2)
    out = java(classpath, tmp_path, "Transactions", broker.bootstrap, "txn",
               "java-tx")
    check_transactions(out, tv2=False)


def run_rpw(broker, classpath, tmp_path):
    broker.create_topic("rpw-in")
    broker.create_topic("rpw-out")
    n = 20
    cli = kw.TxnClient(broker.port)
    for i in range(n):
        err, _ = cli.produce("rpw-in", 0, kw.record_batch([b"in-%d" % i]))
        assert err == 0, err
    cli.close()
    out = java(classpath, tmp_path, "ReadProcessWrite", broker.bootstrap,
               "rpw-in", "rpw-out", "rpw-group", "rpw-tx", n)
    want = ["IN-%d" % i for i in range(n)]
    assert out["processed"] == n
    # The group's offset came with the transactions, exactly to the end.
    assert out["committed_offset"] == n
    # Each input exactly once for read_committed; the aborted first
    # transaction's outputs only for read_uncommitted.
    assert values(out["read_committed"]) == want
    aborted = out["aborted_records"]
    assert 0 < aborted <= 7
    assert values(out["read_uncommitted"]) == want[:aborted] + want


@pytest.mark.parametrize("tv", ["2", "1"])
def test_read_process_write(broker_factory, classpath, tmp_path, tv):
    """sendOffsetsToTransaction(offsets, consumer.groupMetadata()): under
    TV2 the client sends TxnOffsetCommit v5 with no AddOffsetsToTxn (the
    group's partition joins the transaction there); under TV1 it sends
    AddOffsetsToTxn and TxnOffsetCommit v4.  TV2 also runs under the
    sanitizers, since only the Java client reaches those paths."""
    if SANITIZED and tv == "1":
        pytest.skip("Java client tests run against the release broker")
    broker = broker_factory(**dict(GROUPS, **{"cairn.transaction.version": tv}))
    run_rpw(broker, classpath, tmp_path)
    # Which protocol the client chose, as the broker counted it.
    m = metrics(broker)

    def count(api):
        return m.get('cairn_requests_total{api="%s"}' % api, 0)
    assert count("TxnOffsetCommit") > 0 and count("EndTxn") > 0
    if tv == "2":
        assert count("AddOffsetsToTxn") == 0 and \
            count("AddPartitionsToTxn") == 0, m
    else:
        assert count("AddOffsetsToTxn") > 0 and \
            count("AddPartitionsToTxn") > 0, m


@release_only
def test_fencing(broker_factory, classpath, tmp_path):
    broker = broker_factory()
    broker.create_topic("fence")
    out = java(classpath, tmp_path, "Fencing", broker.bootstrap, "fence",
               "fence-tx")
    # The zombie's commit, and its next send, are fenced.
    assert out["zombie_commit"]["class"] == "ProducerFencedException", out
    assert out["zombie_send_after"]["class"] == "ProducerFencedException", out
    assert out["epoch_b"] > out["epoch_a"]
    # Its write was aborted on its behalf; only B's commit is visible.
    assert values(out["read_committed"]) == ["b-0"]
    assert values(out["read_uncommitted"]) == ["zombie-0", "b-0"]
    # zombie-0, its abort marker, b-0, B's commit marker.
    assert [r["offset"] for r in out["read_uncommitted"]["records"]] == [0, 2]
    assert out["read_committed"]["end"] == {"0": 4}


@release_only
def test_lso_gap(broker_factory, classpath, tmp_path):
    """The seeds' lsoGap: endOffsets() of a read_uncommitted and a
    read_committed consumer differ by the open transaction's records."""
    broker = broker_factory()
    broker.create_topic("gap", 2)
    out = java(classpath, tmp_path, "LsoGap", broker.bootstrap, "gap",
               "gap-tx")
    # p0: two plain records, then three in the open transaction (HW 5,
    # LSO 2); p1: one plain record.
    assert out["open"] == {"0": 3, "1": 0}, out
    assert out["closed"] == {"0": 0, "1": 0}, out


@release_only
def test_admin_client(broker_factory, classpath, tmp_path):
    broker = broker_factory(**GROUPS)
    out = java(classpath, tmp_path, "AdminOps", broker.bootstrap)
    assert out["create"] == "ok", out["create"]
    assert out["create_again"]["error"]["class"] == "TopicExistsException"
    assert out["create_bad_config"]["error"]["class"] == \
        "InvalidConfigurationException"
    assert out["create_bad_replication"]["error"]["class"] == \
        "InvalidReplicationFactorException"
    assert out["list_topics"] == ["adm-a", "adm-b"]
    d = out["describe_a"]
    assert d["name"] == "adm-a" and not d["internal"]
    assert d["topic_id"] != "AAAAAAAAAAAAAAAAAAAAAA"
    lead = d["partitions"][0]["leader"]
    assert [(p["partition"], p["leader"], p["replicas"], p["isr"])
            for p in d["partitions"]] == [(i, lead, [lead], [lead])
                                          for i in range(3)]
    assert out["describe_missing"]["error"]["class"] == \
        "UnknownTopicOrPartitionException"
    c = out["configs_a"]
    assert c["retention.ms"] == {"value": "123456", "source":
                                 "DYNAMIC_TOPIC_CONFIG", "read_only": False}
    assert c["cleanup.policy"]["value"] == "delete"
    assert c["segment.bytes"]["source"] == "DEFAULT_CONFIG"
    assert out["alter_a"]["retention.ms"]["value"] == "654321"
    assert [p["partition"] for p in out["partitions_b"]["partitions"]] == [0, 1]

    cl = out["cluster"]
    node = cl["controller"]
    assert cl["cluster_id"] and cl["nodes"] == [
        "%d@127.0.0.1:%d" % (node, broker.port)]
    assert out["configs_broker"]["transaction.max.timeout.ms"]["value"] == \
        "900000"

    (p,) = out["producers_b0"]
    assert p["last_sequence"] == 2 and p["open_txn_offset"] is None
    ongoing = {"transactional_id": "adm-tx", "state": "Ongoing"}
    listed = [{k: t[k] for k in ongoing} for t in out["txn_list"]]
    assert listed == [ongoing]
    assert [t["transactional_id"] for t in out["txn_list_ongoing"]] == \
        ["adm-tx"]
    assert out["txn_list_committed"] == []
    t = out["txn_describe_open"]
    assert t["state"] == "Ongoing" and t["partitions"] == ["adm-a-1"]
    assert t["coordinator_id"] == node and t["start_time_ms"] is not None
    assert out["txn_describe_missing"]["error"]["class"] == \
        "TransactionalIdNotFoundException"
    (po,) = out["producers_a1_open"]
    assert po["producer_id"] == t["producer_id"]
    assert po["open_txn_offset"] == 0 and po["last_sequence"] == 1
    done = out["txn_describe_done"]
    assert done["state"] == "CompleteCommit" and done["partitions"] == []
    assert done["producer_epoch"] == t["producer_epoch"] + 1   # TV2
    (pd,) = out["producers_a1_done"]
    assert pd["open_txn_offset"] is None
    assert out["fence"]["producer_epoch"] > done["producer_epoch"]

    assert out["group_consumed"] == 3
    assert {"group": "adm-g", "type": "Classic", "protocol": "consumer",
            "state": "Stable"} in out["groups_list"]
    g = out["group_describe"]
    assert g["state"] == "Stable" and g["assignor"] == "range"
    (m,) = g["members"]
    assert m["client_id"] == "adm-consumer"
    assert m["assignment"] == ["adm-b-0", "adm-b-1"]
    assert out["group_offsets"] == {"adm-b-0": 3, "adm-b-1": 0}
    assert out["group_delete_active"]["error"]["class"] == \
        "GroupNotEmptyException"
    assert out["group_describe_left"]["state"] == "Empty"
    assert out["group_describe_left"]["members"] == []
    assert out["group_reset"] == {"adm-b-0": 1, "adm-b-1": 0}
    assert out["group_offset_delete"] == {"adm-b-1": 0}
    assert all(x["group"] != "adm-g" for x in out["group_delete"])
    assert out["delete_b"] == ["adm-a"]


@release_only
def test_timeout_abort_recoverable(broker_factory, classpath, tmp_path):
    """The seeds: "InvalidProducerEpochException can be recoverable in
    modern clients, typically after a transaction timed out and the epoch
    was bumped underneath you".  The coordinator's timeout abort bumps the
    epoch once (Kafka 4.1+, KAFKA-19367), so the client's EndTxn(abort) at
    the old epoch is a retry of that abort and it carries on; bumping
    twice fenced it (ProducerFencedException)."""
    broker = broker_factory(**{
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": "200"})
    broker.create_topic("tmo")
    out = java(classpath, tmp_path, "TimeoutAbort", broker.bootstrap, "tmo",
               "tmo-tx")
    assert out["epochs"]["after_timeout"] > out["epochs"]["before"]
    # The timed-out transaction's write is aborted for read_committed.
    assert "timed-out-0" in values(out["read_uncommitted"])
    assert out["late_send"]["class"] == "InvalidProducerEpochException", out
    assert out["abort"] == "ok", out
    assert out["retry"] == "ok", out
    assert values(out["read_committed"]) == ["retried-0"], out
