"""Dynamic broker configs (KIP-226) over the raw protocol: the broker's
own layer (resource name = node id) and the cluster default (""), what
DescribeConfigs reports for each (source, synonyms in Kafka's order), a
change taking effect on topics without their own override, persistence
across a restart, and the refusals.  Kafka's own tool and the
differential comparison are in test_kafka_cli.py and
test_differential_configs.py.
"""

import os
import subprocess
import time

import kafka_wire as kw
from config_wire import (BROKER, DELETE, SET, TOPIC, ConfigClient)
from conftest import SLOW, needs_cairn

pytestmark = needs_cairn

DYNAMIC_BROKER, DYNAMIC_DEFAULT, STATIC, DEFAULT = 2, 3, 4, 5
INVALID_REQUEST, INVALID_CONFIG, MESSAGE_TOO_LARGE = 42, 40, 10
NOT_ENOUGH_REPLICAS = 19


def entry(cli, name, key):
    err, entries = cli.describe_broker(name, [key])
    assert err == 0, (name, key, err)
    return entries.get(key)


def layers(cli):
    """What an operator sees: per broker and default, key -> (value,
    source, synonyms), for the keys the tests change."""
    keys = ["log.retention.ms", "message.max.bytes"]
    out = {}
    for name in ("1", ""):
        err, entries = cli.describe_broker(name, keys)
        assert err == 0, (name, err)
        out[name] = {k: (e["value"], e["source"], e["synonyms"])
                     for k, e in entries.items()}
    return out


def test_layers_describe_delete_and_restart(broker_factory):
    b = broker_factory(**{"message.max.bytes": "3000000"})
    cli = ConfigClient(b.port)
    assert cli.alter_broker("1", [("log.retention.ms", SET, "1000")])[0] == 0
    assert cli.alter_broker("", [("message.max.bytes", SET, "2000000"),
                                 ("log.retention.ms", SET, "5000")])[0] == 0
    want = {
        # Kafka 4.4.0 shows exactly these (checked against kafka_ref.py):
        # every layer with a value, strongest first, then the synonyms.
        "1": {
            "log.retention.ms": ("1000", DYNAMIC_BROKER, [
                ("log.retention.ms", "1000", DYNAMIC_BROKER),
                ("log.retention.ms", "5000", DYNAMIC_DEFAULT),
                ("log.retention.hours", "168", DEFAULT)]),
            "message.max.bytes": ("2000000", DYNAMIC_DEFAULT, [
                ("message.max.bytes", "2000000", DYNAMIC_DEFAULT),
                ("message.max.bytes", "3000000", STATIC),
                ("message.max.bytes", "1048588", DEFAULT)]),
        },
        "": {
            "log.retention.ms": ("5000", DYNAMIC_DEFAULT, [
                ("log.retention.ms", "5000", DYNAMIC_DEFAULT)]),
            "message.max.bytes": ("2000000", DYNAMIC_DEFAULT, [
                ("message.max.bytes", "2000000", DYNAMIC_DEFAULT)]),
        },
    }
    assert layers(cli) == want
    assert not entry(cli, "1", "log.retention.ms")["read_only"]
    assert entry(cli, "1", "num.partitions")["read_only"]
    cli.close()

    # Both layers survive a restart, from a file in the data directory.
    path = os.path.join(b.data_dir, "dynamic-configs")
    with open(path) as f:
        assert sorted(f.read().split()) == [
            "broker.log.retention.ms=1000",
            "default.log.retention.ms=5000",
            "default.message.max.bytes=2000000"]
    b.restart()
    cli = ConfigClient(b.port)
    assert layers(cli) == want

    # A delete uncovers the layer below: default, then static.
    assert cli.alter_broker("1", [("log.retention.ms", DELETE, None)])[0] \
        == 0
    e = entry(cli, "1", "log.retention.ms")
    assert (e["value"], e["source"]) == ("5000", DYNAMIC_DEFAULT)
    assert cli.alter_broker("", [("message.max.bytes", DELETE, None)])[0] \
        == 0
    e = entry(cli, "1", "message.max.bytes")
    assert (e["value"], e["source"]) == ("3000000", STATIC)
    err, entries = cli.describe_broker("", None)
    assert err == 0 and list(entries) == ["log.retention.ms"], entries
    cli.close()

    # A damaged file stops the start with a message naming it.
    b.stop()
    with open(path, "w") as f:
        f.write("broker.log.retention.ms=soon\n")
    res = subprocess.run(b._argv(), stdin=subprocess.DEVNULL,
                         capture_output=True, text=True, timeout=60 * SLOW)
    assert res.returncode != 0, res.stderr
    assert path in res.stderr and "soon" in res.stderr, res.stderr
    os.unlink(path)
    b.start()


def produce(cli, topic, size):
    return cli.produce(topic, 0, kw.record_batch([b"x" * size]))[0]


def test_message_max_bytes_applies_at_once(broker_factory):
    b = broker_factory()
    b.create_topic("dyn-plain")
    b.create_topic("dyn-own", config={"max.message.bytes": "100000"})
    cli = ConfigClient(b.port)
    pc = kw.Client(b.port)
    assert produce(pc, "dyn-plain", 5000) == 0
    assert cli.alter_broker("", [("message.max.bytes", SET, "2000")])[0] == 0
    # The topic without its own max.message.bytes follows the broker; the
    # one with it keeps its own.
    assert produce(pc, "dyn-plain", 5000) == MESSAGE_TOO_LARGE
    assert produce(pc, "dyn-plain", 100) == 0
    assert produce(pc, "dyn-own", 5000) == 0
    err, _, _, _, entries = cli.describe(
        [(TOPIC, "dyn-plain", ["max.message.bytes"])])[0]
    assert err == 0
    assert (entries["max.message.bytes"]["value"],
            entries["max.message.bytes"]["source"]) == ("2000",
                                                         DYNAMIC_DEFAULT)
    # validate_only changes nothing; a per-broker value beats the default.
    assert cli.alter_broker("1", [("message.max.bytes", SET, "9000")],
                            validate_only=True)[0] == 0
    assert produce(pc, "dyn-plain", 5000) == MESSAGE_TOO_LARGE
    assert cli.alter_broker("1", [("message.max.bytes", SET, "9000")])[0] \
        == 0
    assert produce(pc, "dyn-plain", 5000) == 0
    # A topic created now starts with the dynamic value too.
    assert cli.alter_broker("1", [("message.max.bytes", DELETE, None)])[0] \
        == 0
    b.create_topic("dyn-new")
    assert produce(pc, "dyn-new", 5000) == MESSAGE_TOO_LARGE
    # min.insync.replicas above 1 refuses acks=all at once, with the
    # warning the broker gives for it at start.
    assert cli.alter_broker("", [("min.insync.replicas", SET, "2")])[0] == 0
    assert produce(pc, "dyn-new", 10) == NOT_ENOUGH_REPLICAS
    assert "min.insync.replicas=2: this single broker" in b.log_tail(200)
    assert cli.alter_broker("", [("min.insync.replicas", DELETE, None)])[0] \
        == 0
    assert produce(pc, "dyn-new", 10) == 0
    pc.close()
    cli.close()


def test_segment_and_retention_defaults_apply(broker_factory):
    b = broker_factory(**{"log.retention.check.interval.ms": "200"})
    b.create_topic("dyn-ret")
    b.create_topic("dyn-keep", config={"retention.ms": "-1"})
    cli = ConfigClient(b.port)
    pc = kw.Client(b.port)
    # Small segments for topics without their own segment.bytes: every
    # 1 kB batch rolls a new one.
    assert cli.alter_broker("1", [("log.segment.bytes", SET, "1024")])[0] \
        == 0
    for topic in ("dyn-ret", "dyn-keep"):
        for _ in range(5):
            assert produce(pc, topic, 1200) == 0
    segs = [f for f in os.listdir(os.path.join(b.data_dir, "dyn-ret-0"))
            if f.endswith(".log")]
    assert len(segs) >= 5, segs
    # Retention of 1 ms: the retention check deletes the closed segments
    # of dyn-ret; dyn-keep (retention.ms=-1 of its own) keeps everything.
    assert cli.alter_broker("", [("log.retention.ms", SET, "1")])[0] == 0
    deadline = time.monotonic() + 60 * SLOW
    while time.monotonic() < deadline:
        start = pc.list_offset("dyn-ret", 0, kw.EARLIEST_TIMESTAMP)
        if start >= 4:
            break
        time.sleep(0.1)
    assert start >= 4, start
    assert pc.list_offset("dyn-keep", 0, kw.EARLIEST_TIMESTAMP) == 0
    pc.close()
    cli.close()


def test_refusals(broker_factory):
    b = broker_factory()
    cli = ConfigClient(b.port)
    # Read-only keys: Kafka's code and words, every key named.
    assert cli.alter_broker("1", [("num.partitions", SET, "3"),
                                  ("log.dirs", SET, "/x")]) == (
        INVALID_REQUEST,
        "Cannot update these configs dynamically: [num.partitions, "
        "log.dirs]")
    assert cli.alter_broker("", [("transaction.max.timeout.ms", SET,
                                  "1000")])[0] == INVALID_REQUEST
    # Dynamic in Kafka, but not something Cairn can change while running.
    err, msg = cli.alter_broker("1", [("num.io.threads", SET, "4")])
    assert err == INVALID_CONFIG and "num.io.threads" in msg, msg
    err, msg = cli.alter_broker("1", [("listeners", SET,
                                       "PLAINTEXT://127.0.0.1:1")])
    assert err == INVALID_CONFIG and "restart" in msg, msg
    # (log.cleanup.policy=compact is taken since the cleaner exists:
    # test_compacted.)
    err, msg = cli.alter_broker("", [("log.cleanup.policy", SET,
                                      "shred")])
    assert err != 0 and "cleanup.policy" in msg, msg
    err, msg = cli.alter_broker("1", [("foo.bar", SET, "1")])
    assert err == INVALID_CONFIG and "foo.bar" in msg, msg
    # The value checks of the config file.
    err, msg = cli.alter_broker("1", [("message.max.bytes", SET, "abc")])
    assert err == INVALID_REQUEST and "message.max.bytes" in msg, msg
    # Another broker's id, and a name that is no id.
    assert cli.alter_broker("7", [("log.retention.ms", SET, "1")]) == (
        INVALID_REQUEST, "Unexpected broker id, expected 1, but received 7")
    assert cli.alter_broker("x", [("log.retention.ms", SET, "1")])[0] \
        == INVALID_REQUEST
    res = cli.describe([(BROKER, "7", None)])[0]
    assert res[0] == INVALID_REQUEST, res
    # Nothing of that changed anything or wrote a file.
    err, entries = cli.describe_broker("", None)
    assert (err, entries) == (0, {})
    assert entry(cli, "1", "num.partitions")["value"] == "1"
    assert not os.path.exists(os.path.join(b.data_dir, "dynamic-configs"))
    cli.close()


def test_confluent_admin_alter_configs(broker_factory):
    """librdkafka's AdminClient (Debian's confluent_kafka 2.0.2 has only
    the legacy AlterConfigs, which replaces the whole layer)."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (AdminClient, ConfigResource,
                                       ConfigSource)
    b = broker_factory()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    timeout = 30 * SLOW

    def alter(**configs):
        res = ConfigResource(ConfigResource.Type.BROKER, "1", set_config=configs)
        admin.alter_configs([res])[res].result(timeout=timeout)

    def describe():
        res = ConfigResource(ConfigResource.Type.BROKER, "1")
        return admin.describe_configs([res])[res].result(timeout=timeout)

    alter(**{"log.retention.ms": "1000", "message.max.bytes": "5000"})
    conf = describe()
    for key, value in (("log.retention.ms", "1000"),
                       ("message.max.bytes", "5000")):
        assert conf[key].value == value, conf[key]
        assert conf[key].source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
        assert not conf[key].is_read_only
    assert conf["num.partitions"].is_read_only
    # AlterConfigs sets the layer to exactly what it names.
    alter(**{"message.max.bytes": "6000"})
    conf = describe()
    assert conf["message.max.bytes"].value == "6000"
    assert conf["log.retention.ms"].source == \
        ConfigSource.DEFAULT_CONFIG.value
    try:
        alter(**{"num.partitions": "3"})
        raise AssertionError("a read-only key was accepted")
    except KafkaException as e:
        assert e.args[0].code() == INVALID_REQUEST, e
        assert "Cannot update these configs dynamically" in str(e), e
    assert describe()["message.max.bytes"].value == "6000"
