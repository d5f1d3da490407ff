"""Kafka's own command-line tools (kafka-tools 4.4.0) against Cairn:

  kafka-topics.sh           org.apache.kafka.tools.TopicCommand
  kafka-configs.sh          org.apache.kafka.tools.ConfigCommand
  kafka-consumer-groups.sh  org.apache.kafka.tools.consumer.group.
                            ConsumerGroupCommand
  kafka-producer-perf-test  org.apache.kafka.tools.ProducerPerformance
  kafka-consumer-perf-test  org.apache.kafka.tools.ConsumerPerformance

Each step asserts on what the tool prints and its exit code, as an
operator would read them.  Release broker only (one JVM per command,
~1.5 s each; the protocol is the point, not the sanitizers), and only under
`make soak` (CAIRN_SOAK=1): about 40 JVM starts, 2-3 minutes on a 2-core
machine, which `make test`'s 30 minutes no longer had room for.  The same
APIs are reached in `make test` by the Java client, test_kafka_tools.py
(kafka-transactions, kafka-acls), test_differential*.py and the cairnctl
tests.
"""

import re
import time

import kafka_wire as kw

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

import os

import java_harness
from conftest import SANITIZED, SLOW, needs_cairn

pytestmark = [needs_cairn, pytest.mark.skipif(
    SANITIZED, reason="Kafka's tools run against the release broker"),
    pytest.mark.skipif(not os.environ.get("CAIRN_SOAK"),
                       reason="about 40 JVM starts: only under make soak "
                              "(CAIRN_SOAK=1)")]

TIMEOUT = 120 * SLOW
TOPICS = "org.apache.kafka.tools.TopicCommand"
CONFIGS = "org.apache.kafka.tools.ConfigCommand"
GROUPS = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
PRODUCER_PERF = "org.apache.kafka.tools.ProducerPerformance"
CONSUMER_PERF = "org.apache.kafka.tools.ConsumerPerformance"


@pytest.fixture(scope="session")
def classpath():
    return java_harness.classpath()


class Cli:
    """One Kafka tool against one broker: run(args) -> (rc, stdout,
    stderr); ok(args) -> stdout, failing the test unless rc is 0."""

    def __init__(self, cp, tmp_path, broker, main):
        self.cp, self.tmp, self.broker, self.main = cp, tmp_path, broker, main
        self.n = 0

    def run(self, *args):
        self.n += 1
        err = self.tmp / ("%s.%d.stderr" % (self.main.rsplit(".", 1)[1],
                                           self.n))
        res = java_harness.run_java(
            self.cp, self.main,
            ["--bootstrap-server", self.broker.bootstrap] + list(args),
            TIMEOUT, err)
        return res.returncode, res.stdout, err.read_text()

    def ok(self, *args):
        rc, out, err = self.run(*args)
        assert rc == 0, "%s %s: rc %d\n%s\n%s" % (
            self.main, " ".join(args), rc, out, err[-3000:])
        self.last_err = err
        return out

    def fails(self, *args):
        """rc != 0: stdout and stderr together (the tools print the
        error on stdout and log it again on stderr)."""
        rc, out, err = self.run(*args)
        assert rc != 0, "%s %s: expected a failure\n%s" % (
            self.main, " ".join(args), out)
        return out + err


def describe_topic(out):
    """kafka-topics --describe: (header fields, [partition rows])."""
    head, parts = None, []
    for line in out.splitlines():
        fields = dict(re.findall(r"(\w+): ?(\S*)", line))
        if not fields:
            continue
        if line.startswith("\t"):
            parts.append(fields)
        else:
            head = fields
    return head, parts


def dynamic_configs(out):
    """kafka-configs --describe: {name: value} of the lines below the
    'configs for ... are:' header."""
    return dict(re.findall(r"^  ([\w.]+)=(\S*) sensitive=", out, re.M))


def group_rows(out):
    """kafka-consumer-groups --describe/--reset-offsets: the rows under
    the GROUP header, as dicts, sorted by partition."""
    lines = [x.split() for x in out.splitlines() if x.strip()]
    start = [i for i, x in enumerate(lines) if x and x[0] == "GROUP"]
    assert start, out
    heads = lines[start[0]]
    rows = [dict(zip(heads, x)) for x in lines[start[0] + 1:]]
    return sorted(rows, key=lambda r: int(r["PARTITION"]))


def test_kafka_topics(broker, classpath, tmp_path):
    kt = Cli(classpath, tmp_path, broker, TOPICS)
    out = kt.ok("--create", "--topic", "cli-t", "--partitions", "3",
                "--config", "retention.ms=123456")
    assert "Created topic cli-t." in out, out

    assert "cli-t" in kt.ok("--list").split()
    assert kt.ok("--list", "--exclude-internal").split() == ["cli-t"]

    head, parts = describe_topic(kt.ok("--describe", "--topic", "cli-t"))
    assert head["Topic"] == "cli-t" and head["PartitionCount"] == "3" \
        and head["ReplicationFactor"] == "1", head
    assert head["Configs"] == "retention.ms=123456", head
    assert [(p["Partition"], p["Leader"], p["Replicas"], p["Isr"])
            for p in parts] == [(str(i), "1", "1", "1") for i in range(3)]

    # The tool's own error texts for the two refusals.
    err = kt.fails("--create", "--topic", "cli-t", "--partitions", "1")
    assert "Topic 'cli-t' already exists." in err, err
    assert "TopicExistsException" in err, err
    err = kt.fails("--create", "--topic", "cli-rf3", "--partitions", "1",
                   "--replication-factor", "3")
    assert "InvalidReplicationFactorException" in err, err
    assert "replication factor of 3 cannot be reached" in err, err

    kt.ok("--alter", "--topic", "cli-t", "--partitions", "5")
    head, parts = describe_topic(kt.ok("--describe", "--topic", "cli-t"))
    assert head["PartitionCount"] == "5", head
    assert [p["Leader"] for p in parts] == ["1"] * 5
    # Fewer partitions is refused (Kafka: INVALID_PARTITIONS).
    err = kt.fails("--alter", "--topic", "cli-t", "--partitions", "2")
    assert "InvalidPartitionsException" in err, err

    kt.ok("--delete", "--topic", "cli-t")
    deadline = time.monotonic() + 10 * SLOW
    while "cli-t" in kt.ok("--list").split():
        assert time.monotonic() < deadline, "cli-t still listed"
        time.sleep(0.2)
    # Neither refused create left a topic behind.
    assert kt.ok("--list", "--exclude-internal").split() == []


def test_kafka_configs(broker, classpath, tmp_path):
    broker.create_topic("cli-c", config={"retention.ms": "123456"})
    kc = Cli(classpath, tmp_path, broker, CONFIGS)
    topic = ("--entity-type", "topics", "--entity-name", "cli-c")

    out = kc.ok("--describe", *topic)
    assert "Dynamic configs for topic cli-c are:" in out, out
    assert dynamic_configs(out) == {"retention.ms": "123456"}, out
    assert "synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=123456}" in out

    out = kc.ok("--alter", *topic, "--add-config",
                "retention.ms=999000,max.message.bytes=20000")
    assert "Completed updating config for topic cli-c." in out, out
    assert dynamic_configs(kc.ok("--describe", *topic)) == {
        "retention.ms": "999000", "max.message.bytes": "20000"}

    kc.ok("--alter", *topic, "--delete-config", "retention.ms")
    assert dynamic_configs(kc.ok("--describe", *topic)) == {
        "max.message.bytes": "20000"}

    # A bad value is refused and changes nothing.
    err = kc.fails("--alter", *topic, "--add-config", "retention.ms=abc")
    assert "InvalidConfigurationException" in err \
        or "InvalidRequestException" in err, err
    assert dynamic_configs(kc.ok("--describe", *topic)) == {
        "max.message.bytes": "20000"}

    # Broker 1: no dynamic overrides; --all shows the static ones with
    # their source.
    b1 = ("--entity-type", "brokers", "--entity-name", "1")
    out = kc.ok("--describe", *b1)
    assert "Dynamic configs for broker 1 are:" in out, out
    assert dynamic_configs(out) == {}, out
    out = kc.ok("--describe", *b1, "--all")
    assert "All configs for broker 1 are:" in out, out
    conf = dynamic_configs(out)
    assert conf["node.id"] == "1", out
    assert conf["listeners"] == "PLAINTEXT://%s" % broker.bootstrap, out
    assert ("synonyms={STATIC_BROKER_CONFIG:log.dirs=%s}" % broker.data_dir
            in out), out
    assert conf["num.partitions"] == "1", out

    # Dynamic broker configs, per broker and cluster-wide; the describe
    # lines are the ones Kafka 4.4.0 prints for the same commands.
    dflt = ("--entity-type", "brokers", "--entity-default")
    out = kc.ok("--alter", *b1, "--add-config", "log.retention.ms=1000")
    assert "Completed updating config for broker 1." in out, out
    out = kc.ok("--alter", *dflt, "--add-config",
                "message.max.bytes=2000000,log.retention.ms=5000")
    assert "Completed updating default config for brokers in the cluster." \
        in out, out
    out = kc.ok("--describe", *b1)
    assert "Dynamic configs for broker 1 are:" in out, out
    assert dynamic_configs(out) == {"log.retention.ms": "1000"}, out
    assert ("  log.retention.ms=1000 sensitive=false synonyms={"
            "DYNAMIC_BROKER_CONFIG:log.retention.ms=1000, "
            "DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=5000, "
            "DEFAULT_CONFIG:log.retention.hours=168}") in out, out
    out = kc.ok("--describe", *dflt)
    assert "Default configs for brokers in the cluster are:" in out, out
    assert dynamic_configs(out) == {"log.retention.ms": "5000",
                                    "message.max.bytes": "2000000"}, out
    assert ("  message.max.bytes=2000000 sensitive=false synonyms={"
            "DYNAMIC_DEFAULT_BROKER_CONFIG:message.max.bytes=2000000}") \
        in out, out
    # The topic without overrides shows where its defaults now come from.
    out = kc.ok("--describe", *topic, "--all")
    assert re.search(r"^  max.message.bytes=20000 ", out, re.M), out
    assert re.search(r"^  retention.ms=1000 sensitive=false synonyms="
                     r"\{DYNAMIC_BROKER_CONFIG:", out, re.M), out

    # Read-only keys: Kafka's exception and words (the other refusals are
    # in test_dynamic_configs.py, without a JVM per request).
    err = kc.fails("--alter", *b1, "--add-config", "num.partitions=3")
    assert "InvalidRequestException: Cannot update these configs " \
        "dynamically: [num.partitions]" in err, err

    # Deleting uncovers the default, which survives a restart.
    kc.ok("--alter", *b1, "--delete-config", "log.retention.ms")
    broker.restart()
    out = kc.ok("--describe", *b1, "--all")
    assert re.search(r"^  message.max.bytes=2000000 ", out, re.M), out
    assert re.search(r"^  log.retention.ms=5000 sensitive=false synonyms="
                     r"\{DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=5000,"
                     r" DEFAULT_CONFIG:log.retention.hours=168\}", out,
                     re.M), out


def test_kafka_consumer_groups(broker_factory, classpath, tmp_path):
    broker = broker_factory(**{"group.initial.rebalance.delay.ms": "0"})
    broker.create_topic("cli-g", partitions=2)
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(10):
        p.produce("cli-g", b"v%d" % i, partition=i % 2)
    assert p.flush(15 * SLOW) == 0

    # A subscribed consumer reads everything, commits 3 of partition 0's
    # 5 and all 5 of partition 1's, and leaves.
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "cg",
                  "auto.offset.reset": "earliest",
                  "enable.auto.commit": False,
                  "isolation.level": "read_uncommitted"})
    c.subscribe(["cli-g"])
    got, deadline = 0, time.monotonic() + 30 * SLOW
    while got < 10 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got += 1
    assert got == 10, got
    c.commit(offsets=[TopicPartition("cli-g", 0, 3),
                      TopicPartition("cli-g", 1, 5)], asynchronous=False)

    # While it is a member: its id, host and client id on each of its
    # partitions (the tool decodes the member's assignment), and its
    # offsets cannot be reset or it deleted.
    kg = Cli(classpath, tmp_path, broker, GROUPS)
    out = kg.ok("--describe", "--group", "cg")
    rows = group_rows(out)
    assert [r["PARTITION"] for r in rows] == ["0", "1"], out
    assert len({r["CONSUMER-ID"] for r in rows}) == 1, out
    assert all(r["CONSUMER-ID"].startswith("rdkafka-")
               and r["HOST"] == "/127.0.0.1" and r["CLIENT-ID"] == "rdkafka"
               for r in rows), out
    assert [r["LAG"] for r in rows] == ["2", "0"], out
    # (the tool decides from the group's state, and exits 0)
    out = kg.ok("--reset-offsets", "--group", "cg", "--topic", "cli-g",
                "--to-earliest", "--execute")
    assert "Error: Assignments can only be reset if the group 'cg' is " \
        "inactive, but the current state is Stable." in out, out
    # and the broker refuses to delete it (NON_EMPTY_GROUP).
    rc, out, err = kg.run("--delete", "--group", "cg")
    assert "Deletion of some consumer groups failed" in out \
        and "GroupNotEmptyException: The group is not empty." in out, \
        (rc, out, err)
    c.close()

    assert kg.ok("--list").split() == ["cg"]
    out = kg.ok("--list", "--state")
    assert re.search(r"^cg\s+Empty\s*$", out, re.M), out

    def lag():
        out = kg.ok("--describe", "--group", "cg")
        # the state goes to stderr, the table to stdout
        assert "Consumer group 'cg' has no active members." in \
            kg.last_err, kg.last_err
        return [(r["TOPIC"], r["PARTITION"], r["CURRENT-OFFSET"],
                 r["LOG-END-OFFSET"], r["LAG"]) for r in group_rows(out)]
    assert lag() == [("cli-g", "0", "3", "5", "2"),
                     ("cli-g", "1", "5", "5", "0")]

    out = kg.ok("--reset-offsets", "--group", "cg", "--topic", "cli-g",
                "--to-earliest", "--execute")
    assert [(r["PARTITION"], r["NEW-OFFSET"]) for r in group_rows(out)] \
        == [("0", "0"), ("1", "0")], out
    assert lag() == [("cli-g", "0", "0", "5", "5"),
                     ("cli-g", "1", "0", "5", "5")]

    out = kg.ok("--reset-offsets", "--group", "cg", "--topic", "cli-g:1",
                "--to-offset", "4", "--execute")
    assert [(r["PARTITION"], r["NEW-OFFSET"]) for r in group_rows(out)] \
        == [("1", "4")], out

    out = kg.ok("--delete", "--group", "cg")
    assert "Deletion of requested consumer groups ('cg') was successful." \
        in out, out
    assert kg.ok("--list").split() == []
    rc, out, err = kg.run("--describe", "--group", "cg")
    assert "Error: Consumer group 'cg' does not exist." in out, (out, err)


PERF_SUMMARY = re.compile(
    r"^(\d+) records sent, [\d.]+ records/sec \([\d.]+ MB/sec\), "
    r"[\d.]+ ms avg latency, [\d.]+ ms max latency, \d+ ms 50th, "
    r"\d+ ms 95th, \d+ ms 99th, \d+ ms 99.9th\.$", re.M)


def log_counts(port, topic):
    """(data records, control batches, log end offset) of partition 0."""
    cli = kw.Client(port)
    batches = cli.fetch_batches(topic, 0)
    end = cli.list_offset(topic, 0)
    cli.close()
    control = [b for b in batches if b["attributes"] & 0x20]
    data = sum(b["count"] for b in batches if not b["attributes"] & 0x20)
    return data, len(control), end


def test_kafka_perf_tests(broker_factory, classpath, tmp_path):
    """kafka-producer-perf-test with acks=all, then transactional, and
    kafka-consumer-perf-test reading both topics back read_committed; the
    counts each tool prints are the ones the log holds."""
    n = 20000
    broker = broker_factory(**{"group.initial.rebalance.delay.ms": "0"})
    broker.create_topic("perf-acks")
    broker.create_topic("perf-txn")
    pp = Cli(classpath, tmp_path, broker, PRODUCER_PERF)
    common = ("--num-records", str(n), "--record-size", "100",
              "--throughput", "-1")
    out = pp.ok("--topic", "perf-acks", *common,
                "--command-property", "acks=all")
    assert [int(x) for x in PERF_SUMMARY.findall(out)] == [n], out
    # Idempotent (the 4.x default): exactly n records, no duplicates.
    assert log_counts(broker.port, "perf-acks") == (n, 0, n)

    out = pp.ok("--topic", "perf-txn", *common,
                "--transactional-id", "perf-tx",
                "--transaction-duration-ms", "200")
    assert [int(x) for x in PERF_SUMMARY.findall(out)] == [n], out
    data, markers, end = log_counts(broker.port, "perf-txn")
    # One commit marker per transaction, each taking an offset.
    assert data == n and markers >= 1 and end == n + markers, \
        (data, markers, end)

    cp = Cli(classpath, tmp_path, broker, CONSUMER_PERF)
    out = cp.ok("--include", "perf-.*", "--num-records", str(2 * n),
                "--group", "perf-group", "--timeout", str(60000 * SLOW),
                "--command-property", "isolation.level=read_committed")
    lines = [x for x in out.splitlines() if x.strip()]
    head = [x.strip() for x in lines[-2].split(",")]
    row = dict(zip(head, [x.strip() for x in lines[-1].split(",")]))
    assert row["data.consumed.in.nMsg"] == str(2 * n), out
    assert float(row["data.consumed.in.MB"]) == round(2 * n * 100
                                                      / 1048576, 4), out
