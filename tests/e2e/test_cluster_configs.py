"""Cluster mode: topic config changes go through the controller.

AlterConfigs and IncrementalAlterConfigs on a topic, sent to any broker,
reach the active controller (in-process on its node, forwarded from the
others), which writes ConfigRecords; every broker applies them to its
local topic, so DescribeConfigs answers the same on every broker.  A bad
value is refused by the broker that received it and changes nothing
anywhere.

Raw requests on the wire (kafka_wire), so each answer's error code and
message is checked exactly.  Every process is killed by pid at teardown
(cluster_factory); every wait is a bounded poll (wait_until).
"""

import struct
import time

from conftest import SLOW, needs_cairn, wait_until
import kafka_wire as kw

pytestmark = needs_cairn

REGISTER_S = 20 * SLOW
PROPAGATE_S = 10 * SLOW

NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_CONFIG = 40

API_CREATE_TOPICS = 19
API_DESCRIBE_CONFIGS = 32
API_ALTER_CONFIGS = 33
API_INCREMENTAL_ALTER_CONFIGS = 44

TOPIC = 2
SET, DELETE = 0, 1


# ---- requests (classic encodings, header v1) ------------------------------

def create_topic_v4(corr, name, parts, rf):
    body = struct.pack(">i", 1) + kw.string(name) + struct.pack(">ih", parts,
                                                                rf)
    body += struct.pack(">ii", 0, 0)  # no assignment, no configs
    body += struct.pack(">i?", 15000, False)
    return kw.request(API_CREATE_TOPICS, 4, corr, body)


def parse_create_topics_v4(body):
    r = kw.Reader(body)
    r.i32()
    r.i32()
    return {r.string(): (r.i16(), r.string()) for _ in range(r.i32())}


def incremental_alter_v0(corr, resources, validate_only=False):
    """resources: [(type, name, [(key, op, value)])]."""
    body = struct.pack(">i", len(resources))
    for rtype, name, ops in resources:
        body += struct.pack(">b", rtype) + kw.string(name)
        body += struct.pack(">i", len(ops))
        for key, op, value in ops:
            body += kw.string(key) + struct.pack(">b", op) + kw.string(value)
    body += struct.pack(">?", validate_only)
    return kw.request(API_INCREMENTAL_ALTER_CONFIGS, 0, corr, body)


def alter_v0(corr, resources, validate_only=False):
    """resources: [(type, name, {key: value})], each replacing every
    override of its resource."""
    body = struct.pack(">i", len(resources))
    for rtype, name, configs in resources:
        body += struct.pack(">b", rtype) + kw.string(name)
        body += struct.pack(">i", len(configs))
        for key, value in configs.items():
            body += kw.string(key) + kw.string(value)
    body += struct.pack(">?", validate_only)
    return kw.request(API_ALTER_CONFIGS, 0, corr, body)


def parse_alter(body):
    """{(type, name): (error, message)} (both Alter APIs, v0)."""
    r = kw.Reader(body)
    r.i32()
    r.i32()
    out = {}
    for _ in range(r.i32()):
        err, msg = r.i16(), r.string()
        rtype = r.i8()
        out[(rtype, r.string())] = (err, msg)
    return out


def describe_v0(corr, name):
    body = struct.pack(">i", 1) + struct.pack(">b", TOPIC) + kw.string(name)
    body += struct.pack(">i", -1)  # every key
    return kw.request(API_DESCRIBE_CONFIGS, 0, corr, body)


def parse_describe_v0(body):
    """(error, {key: (value, is_default)}) of the one resource."""
    r = kw.Reader(body)
    r.i32()
    r.i32()
    assert r.i32() == 1
    err = r.i16()
    r.string()
    r.i8()
    r.string()
    configs = {}
    for _ in range(r.i32()):
        key, value = r.string(), r.string()
        r.i8()  # read_only
        is_default = bool(r.i8())
        r.i8()  # is_sensitive
        configs[key] = (value, is_default)
    return err, configs


def call(port, build, *args, **kwargs):
    c = kw.Client(port, timeout=20.0 * SLOW)
    try:
        return c.call(build, *args, **kwargs)
    finally:
        c.close()


def describe(port, name):
    return parse_describe_v0(call(port, describe_v0, name))


def non_controller(c, ctl):
    return next(b for b in c.nodes if b.node_id != ctl)


def everywhere(c, name, ok, what, timeout=PROPAGATE_S):
    """Waits until every live broker's DescribeConfigs of topic name
    satisfies ok(configs); returns {node id: configs}."""
    def check():
        seen = {}
        for b in c.live():
            err, configs = describe(b.port, name)
            if err != NONE or not ok(configs):
                return None
            seen[b.node_id] = configs
        return seen
    return wait_until("%s on every broker" % what, check, timeout)


def make_topic(c, via, name):
    res = parse_create_topics_v4(call(via.port, create_topic_v4, name, 1, 3))
    assert res == {name: (NONE, None)}, res
    return everywhere(c, name, lambda cf: "retention.ms" in cf,
                      "topic %s" % name)


# ---- tests ----------------------------------------------------------------

def test_incremental_alter_via_a_broker_reaches_every_broker(cluster_factory):
    c = cluster_factory()
    ctl = c.wait_registered([1, 2, 3], REGISTER_S)
    other = non_controller(c, ctl)
    seen = make_topic(c, other, "cfg")
    default = seen[ctl]["retention.ms"]
    assert default[1] and default[0] != "123456", default

    res = parse_alter(call(other.port, incremental_alter_v0,
                           [(TOPIC, "cfg", [("retention.ms", SET,
                                             "123456")])]))
    assert res == {(TOPIC, "cfg"): (NONE, None)}, res
    everywhere(c, "cfg",
               lambda cf: cf["retention.ms"] == ("123456", False),
               "retention.ms=123456")

    # Deleting the override brings the default back everywhere.
    res = parse_alter(call(other.port, incremental_alter_v0,
                           [(TOPIC, "cfg", [("retention.ms", DELETE,
                                             None)])]))
    assert res == {(TOPIC, "cfg"): (NONE, None)}, res
    everywhere(c, "cfg", lambda cf: cf["retention.ms"] == default,
               "retention.ms back to its default")


def test_alter_configs_on_the_controller_replaces_every_override(
        cluster_factory):
    c = cluster_factory()
    ctl = c.wait_registered([1, 2, 3], REGISTER_S)
    seen = make_topic(c, c.node(ctl), "whole")
    default_ret = seen[ctl]["retention.ms"]
    res = parse_alter(call(non_controller(c, ctl).port, incremental_alter_v0,
                           [(TOPIC, "whole", [("retention.ms", SET,
                                               "5000")])]))
    assert res == {(TOPIC, "whole"): (NONE, None)}, res
    everywhere(c, "whole", lambda cf: cf["retention.ms"] == ("5000", False),
               "retention.ms=5000")
    # AlterConfigs on the controller's own node (in-process): the set
    # given is the whole set, so retention.ms's override goes.
    res = parse_alter(call(c.node(ctl).port, alter_v0,
                           [(TOPIC, "whole", {"segment.ms": "7200000"})]))
    assert res == {(TOPIC, "whole"): (NONE, None)}, res
    everywhere(c, "whole",
               lambda cf: (cf["segment.ms"] == ("7200000", False) and
                           cf["retention.ms"] == default_ret),
               "segment.ms set and retention.ms default")
    # validate_only changes nothing anywhere.
    res = parse_alter(call(non_controller(c, ctl).port, alter_v0,
                           [(TOPIC, "whole", {"segment.ms": "3600000"})],
                           validate_only=True))
    assert res == {(TOPIC, "whole"): (NONE, None)}, res
    time.sleep(1.0 * SLOW)
    for b in c.nodes:
        err, cf = describe(b.port, "whole")
        assert err == NONE and cf["segment.ms"] == ("7200000", False), \
            (b.node_id, cf["segment.ms"])


def test_invalid_value_refused_nothing_changes(cluster_factory):
    c = cluster_factory(**{"auto.create.topics.enable": "false"})
    ctl = c.wait_registered([1, 2, 3], REGISTER_S)
    other = non_controller(c, ctl)
    make_topic(c, other, "strict")
    res = parse_alter(call(other.port, incremental_alter_v0,
                           [(TOPIC, "strict", [("retention.ms", SET,
                                                "42")])]))
    assert res == {(TOPIC, "strict"): (NONE, None)}, res
    everywhere(c, "strict", lambda cf: cf["retention.ms"] == ("42", False),
               "retention.ms=42")

    for b in (other, c.node(ctl)):
        res = parse_alter(call(b.port, incremental_alter_v0,
                               [(TOPIC, "strict",
                                 [("segment.ms", SET, "7200000"),
                                  ("retention.ms", SET, "soon")])]))
        err, msg = res[(TOPIC, "strict")]
        assert err == INVALID_CONFIG, res
        assert "retention.ms" in msg, msg
    res = parse_alter(call(other.port, incremental_alter_v0,
                           [(TOPIC, "nope", [("retention.ms", SET, "1")])]))
    assert res[(TOPIC, "nope")][0] == UNKNOWN_TOPIC_OR_PARTITION, res
    time.sleep(1.0 * SLOW)
    for b in c.nodes:
        err, cf = describe(b.port, "strict")
        assert err == NONE, err
        assert cf["retention.ms"] == ("42", False), (b.node_id, cf)
        assert cf["segment.ms"][1], (b.node_id, cf["segment.ms"])


def test_change_survives_a_restart(cluster_factory):
    c = cluster_factory()
    ctl = c.wait_registered([1, 2, 3], REGISTER_S)
    other = non_controller(c, ctl)
    make_topic(c, other, "kept")
    res = parse_alter(call(c.node(ctl).port, incremental_alter_v0,
                           [(TOPIC, "kept", [("retention.ms", SET,
                                              "77777")])]))
    assert res == {(TOPIC, "kept"): (NONE, None)}, res
    everywhere(c, "kept", lambda cf: cf["retention.ms"] == ("77777", False),
               "retention.ms=77777")
    c.stop(other.node_id)
    other.start()
    c.wait_registered([1, 2, 3], REGISTER_S)
    err, cf = describe(other.port, "kept")
    assert err == NONE and cf["retention.ms"] == ("77777", False), cf
