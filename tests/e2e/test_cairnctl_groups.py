"""cairnctl groups list|describe|reset-offsets|delete against a live broker.

One scenario with exact numbers (topic "lag", three partitions):

  p0: 10 plain records                   HW 10  LSO 10  committed 4
  p1: 5 plain, then 3 in an open txn     HW  8  LSO  5  committed 2
  p2: 2 plain records                    HW  2  LSO  2  nothing committed

so p1's lag against the high watermark (6) and against the LSO (3)
diverge until the transaction commits (its marker lands at 8: HW = LSO =
9, both lags 7).  While the consumer is a member, describe names it on
each partition, reset-offsets is refused and delete is NON_EMPTY_GROUP;
after it leaves, the dry run changes nothing and --execute does.  Kafka's
own kafka-consumer-groups --describe on the same group must agree on
CURRENT-OFFSET, LOG-END-OFFSET and LAG (release build only: a JVM per
command).
"""

import json
import re
import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

import java_harness
from conftest import (SANITIZED, SLOW, fails, free_port, needs_cairn, ok, run,
                      tool)

pytestmark = needs_cairn

TIMEOUT = 30 * SLOW
T = 30 * SLOW
GROUPS = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"


def ctl(broker, *args):
    return run([tool("cairnctl"), "--bootstrap-server", broker.bootstrap]
               + list(args), timeout=TIMEOUT)


def table(out):
    """A cairnctl (or kafka-consumer-groups) table: rows under the GROUP
    header as dicts, sorted by partition."""
    lines = [x.split() for x in out.splitlines() if x.strip()]
    start = [i for i, x in enumerate(lines) if x and x[0] == "GROUP"]
    assert start, out
    heads = lines[start[0]]
    rows = [dict(zip(heads, x)) for x in lines[start[0] + 1:]]
    for r in rows:
        assert len(r) == len(heads), (r, out)
    if rows and "TOPIC" in heads:
        rows.sort(key=lambda r: (r["TOPIC"], int(r["PARTITION"])))
    return rows


def lags(broker, group="g-lag"):
    """describe --json: {partition: (current, hw, lag, lso, lag_lso)}."""
    doc = json.loads(ok(ctl(broker, "--json", "groups", "describe",
                            "--group", group)))
    assert len(doc) == 1 and doc[0]["group_id"] == group, doc
    return {p["partition"]: (p["current_offset"], p["log_end_offset"],
                             p["lag"], p["last_stable_offset"], p["lag_lso"])
            for p in doc[0]["partitions"]}


def wait_for(what, fn, want):
    """Polls fn() until it returns want (bounded); its last value."""
    deadline = time.monotonic() + T
    got = fn()
    while got != want:
        assert time.monotonic() < deadline, "%s: %r" % (what, got)
        time.sleep(0.1)
        got = fn()
    return got


def state(broker, group="g-lag"):
    doc = json.loads(ok(ctl(broker, "--json", "groups", "list")))
    return {g["group_id"]: g["state"] for g in doc}.get(group)


def hw_lso(broker, part):
    return lags(broker)[part][1::2][:2]


class Scene:
    """Topic "lag" as in the module docstring on the broker at bootstrap,
    a member consumer of group g-lag holding all three partitions, and
    the transactional producer whose transaction is open on p1.
    create_topic(name, partitions) makes the topic."""

    def __init__(self, bootstrap, create_topic):
        create_topic("lag", 3)
        p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
        for part, n in ((0, 10), (1, 5), (2, 2)):
            for i in range(n):
                p.produce("lag", b"v%d" % i, partition=part)
        assert p.flush(T) == 0
        self.tp = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0,
                            "transactional.id": "lag-txn",
                            "transaction.timeout.ms": 600000})
        self.tp.init_transactions(T)
        self.tp.begin_transaction()
        for i in range(3):
            self.tp.produce("lag", b"t%d" % i, partition=1)
        assert self.tp.flush(T) == 0

        self.c = Consumer({"bootstrap.servers": bootstrap,
                           "group.id": "g-lag", "client.id": "lag-client",
                           "enable.auto.commit": False,
                           "auto.offset.reset": "earliest"})
        self.c.subscribe(["lag"])
        deadline = time.monotonic() + T
        while len(self.c.assignment()) < 3:
            assert time.monotonic() < deadline, self.c.assignment()
            self.c.poll(0.2)
        self.c.commit(offsets=[TopicPartition("lag", 0, 4),
                               TopicPartition("lag", 1, 2)],
                      asynchronous=False)

    def close(self):
        """Ends the transaction and lets go of both clients while the
        broker is up: a client freed after it stopped retries a gone
        broker for seconds before it exits."""
        self.c.close()
        try:
            self.tp.abort_transaction(T)
        except KafkaException:
            pass
        self.c = self.tp = None


@pytest.fixture
def scene(broker_factory):
    """(broker, Scene)."""
    broker = broker_factory(**{"group.initial.rebalance.delay.ms": "0"})
    s = Scene(broker.bootstrap,
              lambda name, n: broker.create_topic(name, partitions=n))
    try:
        yield broker, s
    finally:
        s.close()


def test_describe_lag_hw_and_lso(scene):
    broker, s = scene
    c, tp = s.c, s.tp
    # The open transaction: p1's LSO stops at 5 where it began.
    assert lags(broker) == {0: (4, 10, 6, 10, 6),
                            1: (2, 8, 6, 5, 3),
                            2: (None, 2, None, 2, None)}

    res = ctl(broker, "groups", "describe", "--group", "g-lag")
    rows = table(ok(res))
    assert [(r["PARTITION"], r["CURRENT-OFFSET"], r["LOG-END-OFFSET"],
             r["LAG"], r["LSO"], r["LAG-LSO"]) for r in rows] == [
        ("0", "4", "10", "6", "10", "6"),
        ("1", "2", "8", "6", "5", "3"),
        ("2", "-", "2", "-", "2", "-")], res.stdout
    assert len({r["CONSUMER-ID"] for r in rows}) == 1, res.stdout
    assert all(r["GROUP"] == "g-lag" and r["TOPIC"] == "lag"
               and r["CONSUMER-ID"].startswith("lag-client-")
               and r["HOST"] == "/127.0.0.1" and r["CLIENT-ID"] == "lag-client"
               for r in rows), res.stdout

    doc = json.loads(ok(ctl(broker, "--json", "groups", "describe",
                            "--group", "g-lag")))[0]
    assert doc["state"] == "Stable" and doc["protocol_type"] == "consumer"
    assert len(doc["members"]) == 1, doc
    m = doc["members"][0]
    assert m["client_id"] == "lag-client" and m["host"] == "/127.0.0.1"
    assert sorted(a["partition"] for a in m["assignment"]) == [0, 1, 2]

    # The transaction commits: its marker is offset 8, and the pair
    # converges (the markers may land just after EndTxn answers).
    tp.commit_transaction(T)
    wait_for("lags after the commit", lambda: lags(broker),
             {0: (4, 10, 6, 10, 6), 1: (2, 9, 7, 9, 7),
              2: (None, 2, None, 2, None)})

    # Once the consumer leaves, the uncommitted p2 drops out, as in Kafka.
    c.close()
    wait_for("state", lambda: state(broker), "Empty")
    res = ctl(broker, "groups", "describe", "--group", "g-lag")
    assert "Consumer group 'g-lag' has no active members." in res.stderr
    rows = table(ok(res))
    assert [(r["PARTITION"], r["LAG"], r["LAG-LSO"], r["CONSUMER-ID"],
             r["HOST"], r["CLIENT-ID"]) for r in rows] == [
        ("0", "6", "6", "-", "-", "-"), ("1", "7", "7", "-", "-", "-")]


def test_list_and_refusals_while_member(scene):
    broker, s = scene
    c, tp = s.c, s.tp
    rows = table(ok(ctl(broker, "groups", "list")))
    assert rows == [{"GROUP": "g-lag", "STATE": "Stable",
                     "PROTOCOL-TYPE": "consumer"}], rows
    assert json.loads(ok(ctl(broker, "--json", "groups", "list"))) == [
        {"group_id": "g-lag", "state": "Stable", "protocol_type": "consumer",
         "coordinator_id": 1}]
    # --all-groups describes what list lists (here the one group).
    one = json.loads(ok(ctl(broker, "--json", "groups", "describe",
                            "--group", "g-lag")))
    every = json.loads(ok(ctl(broker, "--json", "groups", "describe",
                              "--all-groups")))
    assert [g["group_id"] for g in every] == ["g-lag"], every
    assert every[0]["partitions"] == one[0]["partitions"], every

    res = ctl(broker, "groups", "reset-offsets", "--group", "g-lag",
              "--all-topics", "--to-earliest", "--execute")
    fails(res, 1, "cannot reset offsets of group 'g-lag'",
          "its state is Stable")
    assert res.stdout == ""
    res = ctl(broker, "groups", "delete", "--group", "g-lag")
    fails(res, 1, "cannot delete group 'g-lag'", "NON_EMPTY_GROUP")
    res = ctl(broker, "--json", "groups", "delete", "--group", "g-lag")
    assert json.loads(res.stdout)["error"] == "NON_EMPTY_GROUP"
    # Nothing moved.
    assert lags(broker)[0] == (4, 10, 6, 10, 6)

    c.close()
    wait_for("state", lambda: state(broker), "Empty")
    assert table(ok(ctl(broker, "groups", "list")))[0]["STATE"] == "Empty"


def test_reset_offsets_and_delete(scene):
    broker, s = scene
    c, tp = s.c, s.tp
    tp.abort_transaction(T)   # p1: marker at 8, HW = LSO = 9
    c.close()
    wait_for("p1's HW and LSO", lambda: hw_lso(broker, 1), (9, 9))
    wait_for("state", lambda: state(broker), "Empty")

    # A dry run shows the plan and commits nothing.
    res = ctl(broker, "groups", "reset-offsets", "--group", "g-lag",
              "--all-topics", "--to-earliest", "--dry-run")
    assert [(r["PARTITION"], r["NEW-OFFSET"], r["PREVIOUS-OFFSET"])
            for r in table(ok(res))] == [("0", "0", "4"), ("1", "0", "2")]
    assert "dry run" in res.stderr
    assert {p: v[0] for p, v in lags(broker).items()} == {0: 4, 1: 2}

    # --execute, for one partition; the others keep their offsets.
    doc = json.loads(ok(ctl(broker, "--json", "groups", "reset-offsets",
                            "--group", "g-lag", "--topic", "lag:1",
                            "--to-latest", "--execute")))
    assert doc == {"group_id": "g-lag", "executed": True, "partitions": [
        {"topic": "lag", "partition": 1, "previous_offset": 2,
         "new_offset": 9}]}, doc
    assert lags(broker) == {0: (4, 10, 6, 10, 6), 1: (9, 9, 0, 9, 0)}

    # --shift-by and --to-offset clamp to [log start, HW], with a word.
    res = ctl(broker, "groups", "reset-offsets", "--group", "g-lag",
              "--topic", "lag:0", "--shift-by", "-10", "--execute")
    assert [(r["PARTITION"], r["NEW-OFFSET"]) for r in table(ok(res))] \
        == [("0", "0")]
    assert "below the log start" in res.stderr, res.stderr
    res = ctl(broker, "groups", "reset-offsets", "--group", "g-lag",
              "--topic", "lag", "--to-offset", "7", "--execute")
    assert [(r["PARTITION"], r["NEW-OFFSET"]) for r in table(ok(res))] \
        == [("0", "7"), ("1", "7"), ("2", "2")]
    assert "above the high watermark of lag-2" in res.stderr, res.stderr
    assert {p: v[0] for p, v in lags(broker).items()} == {0: 7, 1: 7, 2: 2}

    # Errors: a partition that does not exist, --shift-by with nothing
    # committed (a group that does not exist yet).
    fails(ctl(broker, "groups", "reset-offsets", "--group", "g-lag",
              "--topic", "lag:5", "--to-earliest", "--dry-run"), 1,
          "partition 5 of topic 'lag' does not exist")
    fails(ctl(broker, "groups", "reset-offsets", "--group", "g-new",
              "--topic", "lag:0", "--shift-by", "1", "--dry-run"), 1,
          "no committed offset")
    fails(ctl(broker, "groups", "reset-offsets", "--group", "g-new",
              "--all-topics", "--to-earliest", "--dry-run"), 1,
          "GROUP_ID_NOT_FOUND")

    res = ctl(broker, "groups", "delete", "--group", "g-lag")
    assert ok(res) == "Deleted group g-lag.\n"
    assert json.loads(ok(ctl(broker, "--json", "groups", "list"))) == []
    fails(ctl(broker, "groups", "delete", "--group", "g-lag"), 1,
          "cannot delete group 'g-lag'", "does not exist",
          "GROUP_ID_NOT_FOUND")
    fails(ctl(broker, "groups", "describe", "--group", "g-lag"), 1,
          "GROUP_ID_NOT_FOUND")


@pytest.mark.skipif(SANITIZED, reason="Kafka's tool runs against the "
                    "release broker")
def test_describe_agrees_with_kafka_tool(scene, tmp_path):
    broker, s = scene
    c, tp = s.c, s.tp
    cp = java_harness.classpath()

    def kafka_rows():
        err = tmp_path / "kcg.stderr"
        res = java_harness.run_java(
            cp, GROUPS, ["--bootstrap-server", broker.bootstrap,
                         "--describe", "--group", "g-lag"], 120 * SLOW, err)
        assert res.returncode == 0, (res.stdout, err.read_text()[-3000:])
        return table(res.stdout)

    def ours():
        return table(ok(ctl(broker, "groups", "describe", "--group",
                            "g-lag")))

    cols = ("TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
            "CONSUMER-ID", "HOST", "CLIENT-ID")
    # With the transaction open (Kafka's LOG-END-OFFSET is the high
    # watermark, read_uncommitted) and a live member.
    k = kafka_rows()
    assert [tuple(r[x] for x in cols) for r in ours()] == \
        [tuple(r[x] for x in cols) for r in k], k
    assert k[1]["LOG-END-OFFSET"] == "8", k
    c.close()
    tp.commit_transaction(T)
    wait_for("p1's HW and LSO", lambda: hw_lso(broker, 1), (9, 9))
    wait_for("state", lambda: state(broker), "Empty")
    k = kafka_rows()
    assert [tuple(r[x] for x in cols) for r in ours()] == \
        [tuple(r[x] for x in cols) for r in k], k
    assert [r["LAG"] for r in k] == ["6", "7"], k


def test_unreachable_and_usage(broker):
    port = free_port()
    res = run([tool("cairnctl"), "--bootstrap-server", "127.0.0.1:%d" % port,
               "groups", "list"], timeout=TIMEOUT)
    fails(res, 1, "cannot connect to 127.0.0.1:%d" % port)
    assert res.stdout == ""
    for args, needle in [
        (["groups"], "needs a subcommand"),
        (["groups", "describe"], "needs --group G"),
        (["groups", "describe", "--group", "a", "--all-groups"],
         "needs --group G"),
        (["groups", "delete"], "needs --group"),
        (["groups", "list", "--group", "x"], "not valid for 'groups list'"),
        (["groups", "reset-offsets", "--group", "g", "--to-earliest",
          "--execute"], "needs --topic T[:P,...] or --all-topics"),
        (["groups", "reset-offsets", "--group", "g", "--topic", "t",
          "--execute"], "needs one of --to-earliest"),
        (["groups", "reset-offsets", "--group", "g", "--topic", "t",
          "--to-latest", "--to-earliest", "--execute"],
         "needs one of --to-earliest"),
        (["groups", "reset-offsets", "--group", "g", "--topic", "t",
          "--to-latest"], "needs --dry-run or --execute"),
        (["groups", "reset-offsets", "--group", "g", "--topic", "t",
          "--topic", "u", "--to-latest", "--dry-run"], "takes one --topic"),
        (["groups", "reset-offsets", "--group", "g", "--topic", "t:x",
          "--to-latest", "--dry-run"], "bad --topic 't:x'"),
        (["groups", "reset-offsets", "--group", "g", "--topic", "t",
          "--to-offset", "-1", "--dry-run"], "bad --to-offset '-1'"),
    ]:
        res = ctl(broker, *args)
        fails(res, 2, needle)
        assert res.stdout == ""
    # An unknown group is an error, not an empty table.
    fails(ctl(broker, "groups", "describe", "--group", "nope"), 1,
          "cannot describe group 'nope'", "does not exist")


def _normal(text):
    """Output with the member ids (each client library and broker makes
    its own) replaced and the table padding (which follows their
    length) ignored: a list of word lists."""
    text = re.sub(r"lag-client-[\w-]+", "lag-client-M", text)
    return [line.split() for line in text.splitlines()]


class _Addr:
    def __init__(self, bootstrap):
        self.bootstrap = bootstrap


def cli_scenario(bootstrap, create_topic):
    """Every groups command on the scene at bootstrap, live member and
    open transaction first, then without them: [(step, (rc, stdout,
    stderr))], normalised for comparing brokers (test_differential's
    groups_cli compares Cairn's list with Apache Kafka's)."""
    b = _Addr(bootstrap)
    s = Scene(bootstrap, create_topic)
    obs = []

    def step(name, *args):
        res = ctl(b, *args)
        out = res.stdout
        # A shared reference broker has other tests' groups too.
        if args[-1] == "list" and args[0] == "--json":
            out = json.dumps([g for g in json.loads(out)
                              if g["group_id"].startswith("g-")])
        elif args[-1] == "list":
            out = "\n".join(x for x in out.splitlines()
                            if x.startswith(("GROUP ", "g-")))
        obs.append((name, (res.returncode, _normal(out),
                           _normal(res.stderr))))

    reset = ("groups", "reset-offsets", "--group", "g-lag")
    try:
        step("list_live", "groups", "list")
        step("describe_live", "groups", "describe", "--group", "g-lag")
        step("describe_live_json", "--json", "groups", "describe",
             "--group", "g-lag")
        step("reset_refused", *reset, "--all-topics", "--to-earliest",
             "--execute")
        step("delete_refused", "--json", "groups", "delete", "--group",
             "g-lag")
        s.c.close()
        s.tp.commit_transaction(T)
        wait_for("p1's HW and LSO", lambda: hw_lso(b, 1), (9, 9))
        wait_for("state", lambda: state(b), "Empty")
        step("list_empty", "--json", "groups", "list")
        step("describe_empty", "groups", "describe", "--group", "g-lag")
        step("reset_dry_run", *reset, "--topic", "lag", "--to-offset", "7",
             "--dry-run")
        step("reset_shift", *reset, "--topic", "lag:0,1", "--shift-by", "-3",
             "--execute")
        step("reset_latest", "--json", *reset, "--all-topics",
             "--to-latest", "--execute")
        step("describe_reset", "--json", "groups", "describe", "--group",
             "g-lag")
        step("delete", "groups", "delete", "--group", "g-lag")
        step("delete_again", "groups", "delete", "--group", "g-lag")
        step("describe_deleted", "groups", "describe", "--group", "g-lag")
        step("list_deleted", "--json", "groups", "list")
        step("reset_unknown", *reset, "--all-topics", "--to-earliest",
             "--dry-run")
    finally:
        s.close()
    return obs
