"""cairnctl, the operator CLI, against a live broker.

Each subcommand runs in table and JSON form; errors (unknown topic,
unreachable server, bad options) must say what is wrong on stderr and exit
1 (operation failed) or 2 (usage).  cairnctl speaks only the Kafka
protocol, so the results are cross-checked with confluent_kafka's
AdminClient where that is cheap.
"""

import json

import pytest

from conftest import SLOW, fails, free_port, needs_cairn, ok, run, tool

pytestmark = needs_cairn

TIMEOUT = 30 * SLOW


def ctl(broker, *args, bootstrap=None):
    """Runs cairnctl with --bootstrap-server first; returns the result."""
    server = bootstrap or broker.bootstrap
    return run([tool("cairnctl"), "--bootstrap-server", server] + list(args),
               timeout=TIMEOUT)


def describe_table(out):
    """Parses kafka-topics.sh style describe output into dicts."""
    topics = {}
    cur = None
    for line in out.splitlines():
        fields = dict(f.split(": ", 1) if ": " in f else (f.rstrip(":"), "")
                      for f in line.strip("\t").split("\t"))
        if not line.startswith("\t"):
            cur = topics[fields["Topic"]] = dict(fields, parts=[])
        else:
            assert cur is not None and fields["Topic"] == cur["Topic"]
            cur["parts"].append(fields)
    return topics


def test_help_and_usage(broker):
    res = run([tool("cairnctl"), "--help"], timeout=TIMEOUT)
    assert res.returncode == 0
    assert "topics create" in res.stdout and "--bootstrap-server" in res.stdout
    for cmd in ("groups list", "groups describe", "groups reset-offsets",
                "groups delete"):
        assert cmd in res.stdout, cmd
    fails(run([tool("cairnctl")], timeout=TIMEOUT), 2, "no command")


def test_create_list_describe_table(broker):
    out = ok(ctl(broker, "topics", "create", "--topic", "orders",
                 "--partitions", "3", "--replication-factor", "1",
                 "--config", "retention.ms=123456",
                 "--config", "segment.bytes=1048576"))
    assert out == "Created topic orders.\n"
    ok(ctl(broker, "topics", "create", "--topic", "audit"))

    names = ok(ctl(broker, "topics", "list")).splitlines()
    assert "orders" in names and "audit" in names
    assert names == sorted(names)

    d = describe_table(ok(ctl(broker, "topics", "describe", "--topic",
                              "orders")))
    assert list(d) == ["orders"]
    t = d["orders"]
    assert t["PartitionCount"] == "3"
    assert t["ReplicationFactor"] == "1"
    assert len(t["TopicId"]) == 22
    configs = dict(kv.split("=", 1) for kv in t["Configs"].split(","))
    assert configs == {"retention.ms": "123456", "segment.bytes": "1048576"}
    assert [p["Partition"] for p in t["parts"]] == ["0", "1", "2"]
    for p in t["parts"]:
        assert p["Leader"] != "none"
        assert p["Replicas"] == p["Leader"] and p["Isr"] == p["Leader"]

    # Without --topic every topic is described; defaults are not shown.
    d = describe_table(ok(ctl(broker, "topics", "describe")))
    assert {"orders", "audit"} <= set(d)
    assert d["audit"]["Configs"] == ""
    assert d["audit"]["PartitionCount"] == "1"


def test_create_list_describe_json(broker):
    res = json.loads(ok(ctl(broker, "--json", "topics", "create", "--topic",
                            "events", "--partitions", "2",
                            "--config", "retention.ms=60000")))
    assert res["topic"] == "events" and res["created"] is True
    assert len(res["topic_id"]) == 22

    listed = json.loads(ok(ctl(broker, "topics", "list", "--json")))
    byname = {t["name"]: t for t in listed}
    assert byname["events"] == {"name": "events",
                                "topic_id": res["topic_id"],
                                "partitions": 2, "internal": False}

    desc = json.loads(ok(ctl(broker, "topics", "describe", "--topic",
                             "events", "--json")))
    assert len(desc) == 1
    t = desc[0]
    assert t["name"] == "events" and t["topic_id"] == res["topic_id"]
    assert t["partitions"] == 2 and t["replication_factor"] == 1
    assert t["internal"] is False
    assert t["configs"] == {"retention.ms": "60000"}
    assert [p["partition"] for p in t["partition_info"]] == [0, 1]
    for p in t["partition_info"]:
        assert p["leader"] >= 0 and p["replicas"] == [p["leader"]]
        assert p["isr"] == [p["leader"]] and p["error"] is None

    alld = json.loads(ok(ctl(broker, "--json", "topics", "describe")))
    assert "events" in [x["name"] for x in alld]


def test_interop_with_admin_client(broker):
    """What cairnctl creates, another Kafka client sees, and vice versa."""
    from confluent_kafka.admin import AdminClient
    broker.create_topic("from_admin", partitions=4)
    ok(ctl(broker, "topics", "create", "--topic", "from_ctl",
           "--partitions", "2"))
    listed = json.loads(ok(ctl(broker, "--json", "topics", "list")))
    assert {"name": "from_admin", "partitions": 4} .items() <= \
        [t for t in listed if t["name"] == "from_admin"][0].items()
    md = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(
        timeout=10)
    assert len(md.topics["from_ctl"].partitions) == 2


def test_global_options_after_subcommand(broker):
    server = broker.bootstrap
    res = run([tool("cairnctl"), "topics", "create", "--topic", "late",
               "--json", "--bootstrap-server", server], timeout=TIMEOUT)
    assert json.loads(ok(res))["topic"] == "late"
    res = run([tool("cairnctl"), "topics", "list",
               "--bootstrap-server=" + server], timeout=TIMEOUT)
    assert "late" in ok(res).splitlines()


def test_create_errors(broker):
    ok(ctl(broker, "topics", "create", "--topic", "dup"))
    res = ctl(broker, "topics", "create", "--topic", "dup")
    fails(res, 1, "TOPIC_ALREADY_EXISTS", "dup")
    assert res.stdout == ""

    res = ctl(broker, "--json", "topics", "create", "--topic", "dup")
    fails(res, 1, "TOPIC_ALREADY_EXISTS")
    err = json.loads(res.stdout)
    assert err["error"] == "TOPIC_ALREADY_EXISTS" and err["error_code"] == 36

    fails(ctl(broker, "topics", "create", "--topic", "rf3",
              "--replication-factor", "3"), 1, "INVALID_REPLICATION_FACTOR")
    fails(ctl(broker, "topics", "create", "--topic", "bad/name"), 1,
          "INVALID_TOPIC_EXCEPTION")
    fails(ctl(broker, "topics", "create", "--topic", "badcfg",
              "--config", "no.such.config=1"), 1, "INVALID_CONFIG")


def test_unknown_topic(broker):
    fails(ctl(broker, "topics", "describe", "--topic", "nope"), 1,
          "'nope' does not exist")
    res = ctl(broker, "--json", "topics", "describe", "--topic", "nope")
    fails(res, 1, "does not exist")
    assert json.loads(res.stdout)["error"] == "UNKNOWN_TOPIC_OR_PARTITION"
    fails(ctl(broker, "topics", "delete", "--topic", "nope"), 1,
          "'nope' does not exist")
    fails(ctl(broker, "topics", "alter", "--topic", "nope",
              "--partitions", "3"), 1, "'nope' does not exist")
    fails(ctl(broker, "configs", "describe", "--topic", "nope"), 1,
          "'nope' does not exist")
    # The failed describe must not have created the topic.
    assert "nope" not in ok(ctl(broker, "topics", "list")).splitlines()


def test_delete(broker):
    ok(ctl(broker, "topics", "create", "--topic", "doomed"))
    ok(ctl(broker, "topics", "create", "--topic", "doomed2"))
    assert ok(ctl(broker, "topics", "delete", "--topic", "doomed")) == \
        "Deleted topic doomed.\n"
    res = json.loads(ok(ctl(broker, "--json", "topics", "delete", "--topic",
                            "doomed2")))
    assert res == {"topic": "doomed2", "deleted": True}
    names = ok(ctl(broker, "topics", "list")).splitlines()
    assert "doomed" not in names and "doomed2" not in names
    fails(ctl(broker, "topics", "delete", "--topic", "doomed"), 1,
          "UNKNOWN_TOPIC_OR_PARTITION")


def test_alter_partitions(broker):
    ok(ctl(broker, "topics", "create", "--topic", "grow"))
    out = ok(ctl(broker, "topics", "alter", "--topic", "grow",
                 "--partitions", "4"))
    assert "to 4" in out
    d = describe_table(ok(ctl(broker, "topics", "describe", "--topic",
                              "grow")))
    assert d["grow"]["PartitionCount"] == "4"
    res = json.loads(ok(ctl(broker, "--json", "topics", "alter", "--topic",
                            "grow", "--partitions", "5")))
    assert res == {"topic": "grow", "partitions": 5}
    fails(ctl(broker, "topics", "alter", "--topic", "grow",
              "--partitions", "2"), 1, "INVALID_PARTITIONS")


def test_configs_alter_and_describe(broker):
    ok(ctl(broker, "topics", "create", "--topic", "cfg",
           "--config", "retention.ms=1000"))
    out = ok(ctl(broker, "configs", "alter", "--topic", "cfg",
                 "--set", "segment.bytes=2097152",
                 "--delete", "retention.ms"))
    assert out == "Completed updating config for topic cfg.\n"

    out = ok(ctl(broker, "configs", "describe", "--topic", "cfg"))
    lines = out.splitlines()
    assert lines[0] == "Dynamic configs for topic cfg are:"
    assert [l.split()[0] for l in lines[1:]] == ["segment.bytes=2097152"]

    d = describe_table(ok(ctl(broker, "topics", "describe", "--topic",
                              "cfg")))
    assert d["cfg"]["Configs"] == "segment.bytes=2097152"

    res = json.loads(ok(ctl(broker, "--json", "configs", "describe",
                            "--topic", "cfg", "--all")))
    byname = {c["name"]: c for c in res["configs"]}
    assert byname["segment.bytes"]["value"] == "2097152"
    assert byname["segment.bytes"]["source"] == "DYNAMIC_TOPIC_CONFIG"
    assert byname["retention.ms"]["source"] != "DYNAMIC_TOPIC_CONFIG"

    res = json.loads(ok(ctl(broker, "--json", "configs", "alter", "--topic",
                            "cfg", "--set", "retention.ms=5000")))
    assert res == {"topic": "cfg", "altered": True}
    fails(ctl(broker, "configs", "alter", "--topic", "cfg",
              "--set", "no.such.config=1"), 1, "INVALID_CONFIG")


def test_unreachable_server(broker):
    port = free_port()      # bound then closed: nothing listens there
    res = run([tool("cairnctl"), "--bootstrap-server", "127.0.0.1:%d" % port,
               "topics", "list"], timeout=TIMEOUT)
    fails(res, 1, "cannot connect to 127.0.0.1:%d" % port, "refused")
    assert res.stdout == ""
    res = run([tool("cairnctl"), "--bootstrap-server", "127.0.0.1:%d" % port,
               "--json", "topics", "create", "--topic", "x"],
              timeout=TIMEOUT)
    fails(res, 1, "cannot connect to")


@pytest.mark.parametrize("args,needle", [
    (["topics", "list", "--bogus"], "unknown option '--bogus'"),
    (["topics", "frobnicate"], "unknown command 'topics frobnicate'"),
    (["topics"], "needs a subcommand"),
    (["topics", "create"], "needs --topic"),
    (["topics", "create", "--topic", "x", "--partitions", "zero"],
     "bad --partitions 'zero'"),
    (["topics", "create", "--topic", "x", "--partitions", "0"],
     "bad --partitions '0'"),
    (["topics", "create", "--topic", "x", "--config", "novalue"],
     "bad --config 'novalue'"),
    (["topics", "create", "--topic"], "needs a value"),
    (["topics", "list", "--partitions", "3"], "not valid for 'topics list'"),
    (["topics", "alter", "--topic", "x"], "needs --partitions"),
    (["configs", "alter", "--topic", "x"], "needs --set or --delete"),
    (["topics", "list", "extra"], "unexpected argument 'extra'"),
])
def test_bad_options(broker, args, needle):
    res = ctl(broker, *args)
    fails(res, 2, needle)
    assert res.stdout == ""


def test_bad_bootstrap_server(broker):
    for bad in ["127.0.0.1:notaport", "[::1", "host:0", ":9092"]:
        res = ctl(broker, "topics", "list", bootstrap=bad)
        fails(res, 1, "bad bootstrap server '%s'" % bad)


def test_ipv6_bootstrap_syntax(broker):
    # The broker listens on IPv4 only, so [::1] is refused -- but the
    # address must have been parsed and tried, not rejected as malformed.
    res = ctl(broker, "topics", "list",
              bootstrap="[::1]:%d" % broker.port)
    if res.returncode == 0:
        return  # a dual-stack listener: fine too
    fails(res, 1, "cannot connect to ::1:%d" % broker.port)
