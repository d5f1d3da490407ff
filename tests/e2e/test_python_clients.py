"""Python client libraries from PyPI against Cairn, each in build/venv
(`make build-py`, pinned in tests/py/requirements.txt): confluent-kafka
2.16.1 with its bundled librdkafka 2.16 (newer than Debian's 2.0.2,
which these tests themselves run on), and kafka-python 2.3.3 (pure
Python); and for comparison the same confluent code on Debian's
confluent_kafka 2.0.2.  tests/py/eos_clients.py plays one scenario as a subprocess and
prints what the client saw; the test reads the topics with Debian's
confluent_kafka and checks the outcome.

Scenarios, for each library: a transactional producer committing,
aborting and committing again (read_committed sees only the committed
records, markers leave offset gaps); read-process-write with
send_offsets_to_transaction over a few hundred records with one
deliberately aborted transaction, exactly once in the output and in the
group's committed offsets; a zombie's commit refused after a second
producer with its transactional id started.  The API versions each
library sent are recorded (client_stacks.record_versions).
"""

import subprocess
from collections import Counter

import pytest

from client_stacks import (VENV_PY, committed, read_to_end, run_recorded,
                           wait_stable)
from conftest import REPO, SLOW, needs_cairn, scaled

pytestmark = needs_cairn

SCRIPT = REPO / "tests" / "py" / "eos_clients.py"
TIMEOUT = 150 * SLOW
# confluent-debian: the same confluent code on Debian's python3-confluent-
# kafka 2.0.2 (librdkafka 2.0.2), for the versions its librdkafka sends.
LIBS = ["confluent", "kafka-python", "confluent-debian"]
NAMES = {"confluent": "confluent-kafka-2.16.1",
         "kafka-python": "kafka-python-2.3.3",
         "confluent-debian": "confluent-kafka-2.0.2-debian"}


@pytest.fixture(scope="session")
def venv():
    """build/venv, made (a no-op when up to date) so this file can run on
    its own."""
    res = subprocess.run(["make", "-s", "build-py"], cwd=str(REPO),
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, timeout=900)
    if res.returncode != 0:
        pytest.fail("make build-py failed:\n%s" % res.stdout[-3000:])
    return str(VENV_PY)


def run(venv, lib, broker, tmp_path, *args):
    """(its JSON, the API versions it sent) of one scenario."""
    py, mod = venv, lib
    if lib == "confluent-debian":
        py, mod = "/usr/bin/python3", "confluent"
    return run_recorded(NAMES[lib], broker,
                        [py, SCRIPT, mod, args[0], broker.bootstrap]
                        + list(args[1:]), TIMEOUT,
                        tmp_path / ("%s-%s.stderr" % (lib, args[0])))


def values(parts):
    return [v for recs in parts.values() for _, v in recs]


@pytest.mark.parametrize("lib", LIBS)
def test_commit_abort_and_fencing(broker, venv, lib, tmp_path):
    topic = "py-txn-" + lib
    broker.create_topic(topic)
    out, _ = run(venv, lib, broker, tmp_path, "txn", topic, "t-" + lib)
    # 5 records, a marker, 5 aborted records, a marker, 5 records.
    assert out == {"commit1": list(range(0, 5)),
                   "abort": list(range(6, 11)),
                   "commit2": list(range(12, 17))}
    wait_stable(broker, topic, 1)
    rc = read_to_end(broker.bootstrap, topic, 1, "read_committed")
    assert rc[0] == ([(i, "c%d" % i) for i in range(5)] +
                     [(12 + i, "c%d" % (5 + i)) for i in range(5)])
    ru = read_to_end(broker.bootstrap, topic, 1, "read_uncommitted")
    assert len(ru[0]) == 15

    # Fencing: a zombie's commit after a second producer with its
    # transactional id started.
    topic = "py-fence-" + lib
    broker.create_topic(topic)
    out, _ = run(venv, lib, broker, tmp_path, "fence", topic, "z-" + lib)
    # Both send EndTxn v1, older than PRODUCER_FENCED (v2+), so the
    # coordinator answers INVALID_PRODUCER_EPOCH, as Kafka 4.4.0 does (checked
    # against kafka_ref with these scripts): librdkafka raises it as its
    # fatal _FENCED, kafka-python as InvalidProducerEpochError.
    if lib.startswith("confluent"):
        assert out["zombie_commit_error"] == "_FENCED" and out["fatal"], out
    else:
        assert out["zombie_commit_error"] == "INVALID_PRODUCER_EPOCH", out
    wait_stable(broker, topic, 1)
    rc = read_to_end(broker.bootstrap, topic, 1, "read_committed")
    assert [v for _, v in rc[0]] == ["fresh"]


@pytest.mark.parametrize("lib", LIBS)
def test_read_process_write_exactly_once(broker_factory, venv, lib,
                                         tmp_path):
    broker = broker_factory(**{"group.initial.rebalance.delay.ms": "0"})
    parts, n = 2, scaled(300)
    src, dst, group = "py-in", "py-out", "py-group"
    broker.create_topic(src, parts)
    broker.create_topic(dst, parts)
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(n):
        p.produce(src, value=b"r%d" % i, partition=i % parts)
    assert p.flush(30 * SLOW) == 0
    del p  # gone before the client runs: its requests would count too

    out, sent = run(venv, lib, broker, tmp_path, "rpw", src, dst, group,
                    "rpw-" + lib, n, max(5, n // 6), 2)
    assert out["aborts"] == 1 and out["aborted_records"] > 0, out
    assert out["committed_records"] == n
    assert out["rereads_after_commit"] == 0
    wait_stable(broker, dst, parts)
    rc = read_to_end(broker.bootstrap, dst, parts, "read_committed")
    counts = Counter(values(rc))
    assert sorted(counts) == sorted("out-r%d" % i for i in range(n))
    assert max(counts.values()) == 1
    for part, recs in rc.items():
        assert all(int(v[5:]) % parts == part for _, v in recs)
    ru = read_to_end(broker.bootstrap, dst, parts, "read_uncommitted")
    assert len(values(ru)) == n + out["aborted_records"]
    assert committed(broker.bootstrap, group, src, parts) == {
        q: len(range(q, n, parts)) for q in range(parts)}
    # The offsets went through the transaction (TxnOffsetCommit), not a
    # plain OffsetCommit.
    assert "TxnOffsetCommit" in sent and "OffsetCommit" not in sent, sent
