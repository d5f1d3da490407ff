"""franz-go (Go, kgo v1.22.3) against Cairn: the program tests/go
(build/go/cairn-franz, built by `make build-go`) runs one scenario as a
subprocess and prints what the client saw; the test then reads the topics
with Debian's confluent_kafka and checks the outcome.

Scenarios: the idempotent producer; a transactional producer committing,
aborting and committing again (read_committed sees only the committed
records, read_uncommitted all of them, markers leave offset gaps); a
GroupTransactSession read-process-write over a few hundred records with
one deliberately aborted transaction, checked exactly once in the output
and in the group's committed offsets; zombie fencing.  The API versions
franz-go sent are recorded (client_stacks.record_versions).
"""

import subprocess
from collections import Counter

import pytest

from client_stacks import committed, read_to_end, run_recorded, wait_stable
from conftest import REPO, SLOW, needs_cairn, scaled

pytestmark = needs_cairn

PROG = REPO / "build" / "go" / "cairn-franz"
TIMEOUT = 150 * SLOW


@pytest.fixture(scope="session")
def franz():
    """The program, built (a no-op when up to date) so this file can run
    on its own."""
    res = subprocess.run(["make", "-s", "build-go"], cwd=str(REPO),
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, timeout=900)
    if res.returncode != 0:
        pytest.fail("make build-go failed:\n%s" % res.stdout[-3000:])
    return str(PROG)


def run(franz, broker, tmp_path, *args):
    """(its JSON, the API versions it sent) of one scenario."""
    return run_recorded("franz-go", broker, [franz] + list(args), TIMEOUT,
                        tmp_path / ("franz-%s.stderr" % args[0]))


def values(parts):
    return [v for recs in parts.values() for _, v in recs]


def test_idempotent_producer(broker, franz, tmp_path):
    broker.create_topic("fz-idem")
    n = 200
    out, _ = run(franz, broker, tmp_path, "idem", broker.bootstrap, "fz-idem", n)
    assert out["offsets"] == list(range(n))
    got = read_to_end(broker.bootstrap, "fz-idem", 1, "read_uncommitted")
    assert got[0] == [(i, "v%d" % i) for i in range(n)]


def test_transactions_commit_abort(broker, franz, tmp_path):
    broker.create_topic("fz-txn")
    out, sent = run(franz, broker, tmp_path, "txn", broker.bootstrap, "fz-txn", "fz-t1")
    # 5 records, a marker, 5 aborted records, a marker, 5 records.
    assert out["commit1"] == list(range(0, 5))
    assert out["abort"] == list(range(6, 11))
    assert out["commit2"] == list(range(12, 17))
    # franz-go's own consumers: read_committed skips the aborted records
    # (the aborted-transaction list), read_uncommitted returns them.
    committed_recs = (["%d:c%d" % (i, i) for i in range(5)] +
                      ["%d:c%d" % (12 + i, 5 + i) for i in range(5)])
    assert out["read_committed"] == committed_recs
    assert out["read_uncommitted"] == (
        committed_recs[:5] + ["%d:a%d" % (6 + i, i) for i in range(5)] +
        committed_recs[5:])
    # Transaction version 2 with every transaction.
    assert sent["EndTxn"] == [5] and sent["Produce"] == [12], sent
    wait_stable(broker, "fz-txn", 1)
    rc = read_to_end(broker.bootstrap, "fz-txn", 1, "read_committed")
    assert rc[0] == ([(i, "c%d" % i) for i in range(5)] +
                     [(12 + i, "c%d" % (5 + i)) for i in range(5)])
    ru = read_to_end(broker.bootstrap, "fz-txn", 1, "read_uncommitted")
    assert [v for _, v in ru[0]] == (["c%d" % i for i in range(5)] +
                                     ["a%d" % i for i in range(5)] +
                                     ["c%d" % i for i in range(5, 10)])


def test_group_transact_session_exactly_once(broker_factory, franz,
                                             tmp_path):
    broker = broker_factory(**{"group.initial.rebalance.delay.ms": "0"})
    parts, n = 2, scaled(300)
    broker.create_topic("fz-in", parts)
    broker.create_topic("fz-out", parts)
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(n):
        p.produce("fz-in", value=b"r%d" % i, partition=i % parts)
    assert p.flush(30 * SLOW) == 0
    del p  # gone before the client runs: its requests would count too

    per_txn = max(5, n // 6)
    out, sent = run(franz, broker, tmp_path, "rpw", broker.bootstrap,
                    "fz-in", "fz-out", "fz-group", "fz-rpw", n, per_txn, 2)

    assert out["aborts"] == 1 and out["aborted_records"] > 0, out
    assert out["committed_records"] == n
    assert out["rereads_after_commit"] == 0
    wait_stable(broker, "fz-out", parts)
    rc = read_to_end(broker.bootstrap, "fz-out", parts, "read_committed")
    # Each input record exactly once in the output, in its partition.
    counts = Counter(values(rc))
    assert sorted(counts) == sorted("out-r%d" % i for i in range(n))
    assert max(counts.values()) == 1
    for part, recs in rc.items():
        assert all(int(v[5:]) % parts == part for _, v in recs)
    # The aborted transaction's records are in the log all the same.
    ru = read_to_end(broker.bootstrap, "fz-out", parts, "read_uncommitted")
    assert len(values(ru)) == n + out["aborted_records"]
    # The group's offsets were committed with the transactions.
    assert committed(broker.bootstrap, "fz-group", "fz-in", parts) == {
        q: len(range(q, n, parts)) for q in range(parts)}
    # Transaction version 2 (KIP-890 part 2), which Cairn finalizes:
    # Produce v12 and TxnOffsetCommit v5 add the partitions to the
    # transaction themselves (no AddPartitionsToTxn, no AddOffsetsToTxn),
    # EndTxn v5 bumps the epoch.
    assert sent["Produce"] == [12] and sent["EndTxn"] == [5], sent
    assert sent["TxnOffsetCommit"] == [5], sent
    assert "AddPartitionsToTxn" not in sent, sent
    assert "AddOffsetsToTxn" not in sent, sent
    for api in ("InitProducerId", "JoinGroup", "SyncGroup", "Fetch"):
        assert api in sent, sent


def test_zombie_fenced(broker, franz, tmp_path):
    broker.create_topic("fz-fence")
    out, _ = run(franz, broker, tmp_path, "fence", broker.bootstrap, "fz-fence",
              "fz-zombie")
    # A zombie's produce is refused by the partition (its epoch is older
    # than the one the new producer wrote with), a zombie's commit by the
    # coordinator; neither zombie's records are ever committed.
    assert out["zombie_produce_error"] == "INVALID_PRODUCER_EPOCH", out
    # EndTxn v5: PRODUCER_FENCED, as Kafka 4.4.0 answers (checked against
    # kafka_ref with this program).
    assert out["zombie_commit_error"] == "PRODUCER_FENCED", out
    wait_stable(broker, "fz-fence", 1)
    rc = read_to_end(broker.bootstrap, "fz-fence", 1, "read_committed")
    assert [v for _, v in rc[0]] == ["fresh-produce", "fresh-commit"]
    ru = read_to_end(broker.bootstrap, "fz-fence", 1, "read_uncommitted")
    assert [v for _, v in ru[0]] == ["zombie-produce", "fresh-produce",
                                     "zombie-commit", "fresh-commit"]
