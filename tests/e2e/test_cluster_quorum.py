"""Cluster mode: DescribeQuorum sent to a broker that is not the
controller is forwarded to the controller (as a Kafka 4 broker does), so
every voter's log end offset is known at once; a CONTROLLER listener of a
node that does not lead answers from its own view (no forwarding loop);
with no controller (a minority) a broker still answers from its own view.
CreatePartitions with manual assignments is decided by the controller
with Kafka's checks, forwarded or in-process.

Raw requests on the wire (kafka_wire); every process is killed by pid at
teardown (cluster_factory); every wait is a bounded poll (wait_until).
"""

import struct
import time

from conftest import SLOW, needs_cairn, wait_until
import kafka_wire as kw
from test_cluster_admin import (call, create_topics_v4, metadata,
                                non_controller,
                                parse_create_partitions_v1,
                                parse_create_topics_v4, topic_everywhere)

pytestmark = needs_cairn

REGISTER_S = 20 * SLOW

API_DESCRIBE_QUORUM = 55
API_CREATE_PARTITIONS = 37
INVALID_REPLICA_ASSIGNMENT = 39
METADATA_TOPIC = "__cluster_metadata"


# ---- DescribeQuorum v1 (flexible, header v2) ------------------------------

def describe_quorum_v1(corr):
    body = kw.uvarint(2) + kw.compact_string(METADATA_TOPIC)
    body += kw.uvarint(2) + struct.pack(">i", 0) + kw.uvarint(0)
    body += kw.uvarint(0)  # topic tags
    body += kw.uvarint(0)  # request tags
    return kw.request(API_DESCRIBE_QUORUM, 1, corr, body, flexible=True)


def parse_describe_quorum_v1(body):
    """The metadata partition as a dict: error, leader, epoch, hwm,
    voters {id: log end offset}, observers {id: log end offset}."""
    r = kw.Reader(body)
    r.i32()  # correlation id
    r.skip_tags()  # response header v1
    err = r.i16()
    assert err == 0, err
    topics = [None] * (r.uvarint() - 1)
    for t in range(len(topics)):
        name = r.compact_string()
        parts = []
        for _ in range(r.uvarint() - 1):
            p = {"index": r.i32(), "error": r.i16(), "leader": r.i32(),
                 "epoch": r.i32(), "hwm": r.i64()}
            for role in ("voters", "observers"):
                reps = {}
                for _ in range(r.uvarint() - 1):
                    rid = r.i32()
                    reps[rid] = r.i64()
                    r.i64()  # last fetch
                    r.i64()  # last caught up
                    r.skip_tags()
                p[role] = reps
            r.skip_tags()
            parts.append(p)
        r.skip_tags()
        topics[t] = (name, parts)
    assert topics and topics[0][0] == METADATA_TOPIC, topics
    assert len(topics[0][1]) == 1, topics
    return topics[0][1][0]


def describe_quorum(port, timeout=20.0):
    c = kw.Client(port, timeout=timeout * SLOW)
    try:
        return parse_describe_quorum_v1(c.call(describe_quorum_v1))
    finally:
        c.close()


def create_partitions_v1(corr, topic, count, assignment,
                         validate_only=False, timeout_ms=15000):
    """assignment: [[broker ids] per new partition]."""
    body = struct.pack(">i", 1) + kw.string(topic)
    body += struct.pack(">ii", count, len(assignment))
    for ids in assignment:
        body += struct.pack(">i", len(ids))
        body += b"".join(struct.pack(">i", x) for x in ids)
    body += struct.pack(">i?", timeout_ms, validate_only)
    return kw.request(API_CREATE_PARTITIONS, 1, corr, body)


# ---- tests ----------------------------------------------------------------

def test_describe_quorum_forwarded_to_controller(cluster_factory):
    c = cluster_factory()
    ctl = c.wait_registered([1, 2, 3], REGISTER_S)
    other = non_controller(c, ctl)
    # One request, no polling: only the raft leader knows the other
    # voters' log end offsets, so these come from the controller.
    q = describe_quorum(other.port)
    assert q["error"] == 0, q
    assert sorted(q["voters"]) == [1, 2, 3], q
    assert all(leo >= 0 for leo in q["voters"].values()), q
    assert q["leader"] == ctl, q
    assert q["hwm"] > 0, q
    own = describe_quorum(c.node(ctl).port)
    assert own["leader"] == ctl and own["epoch"] == q["epoch"], (own, q)
    assert all(leo >= 0 for leo in own["voters"].values()), own

    # A non-leader's CONTROLLER listener answers from its own view, where
    # the other voters' offsets are unknown: it does not send it on.
    view = describe_quorum(c.controller_ports[other.node_id - 1])
    assert view["leader"] == ctl, view
    assert view["voters"][other.node_id] >= 0, view
    assert all(leo == -1 for vid, leo in view["voters"].items()
               if vid != other.node_id), view


def test_describe_quorum_minority_answers_own_view(cluster_factory):
    c = cluster_factory()
    ctl = c.wait_registered([1, 2, 3], REGISTER_S)
    other = non_controller(c, ctl)
    for b in c.nodes:
        if b.node_id != other.node_id:
            assert c.stop(b.node_id) == 0
    # A controlled shutdown takes a moment, in which the survivor may have
    # been elected with the last node's vote; a raft leader that lost its
    # majority steps down within an election timeout.
    wait_until("node %d no longer leads a quorum it lost" % other.node_id,
               lambda: c.describe(other.node_id)[0] != other.node_id,
               REGISTER_S)
    # No controller to forward to: after the forwarding deadline (5 s)
    # the survivor answers what it knows rather than nothing.
    t0 = time.monotonic()
    q = describe_quorum(other.port, timeout=30.0)
    took = time.monotonic() - t0
    assert took < 15 * SLOW, took
    assert q["error"] == 0, q
    assert sorted(q["voters"]) == [1, 2, 3], q
    assert q["voters"][other.node_id] >= 0, q
    assert all(leo == -1 for vid, leo in q["voters"].items()
               if vid != other.node_id), q


def test_create_partitions_manual_assignment(cluster_factory):
    c = cluster_factory()
    ctl = c.wait_registered([1, 2, 3], REGISTER_S)
    other = non_controller(c, ctl)
    res = parse_create_topics_v4(call(other.port, create_topics_v4,
                                      [("placed", 1, 2)]))
    assert res == {"placed": (0, None)}, res
    topic_everywhere(c, "placed", lambda e, p: e == 0 and len(p) == 1)

    # Forwarded by a broker that is not the controller.
    want = [[3, 1], [1, 2]]
    res = parse_create_partitions_v1(call(other.port, create_partitions_v1,
                                          "placed", 3, want))
    assert res == {"placed": (0, None)}, res
    seen = topic_everywhere(c, "placed",
                            lambda e, p: e == 0 and len(p) == 3)
    for parts in seen.values():
        got = [(p["replicas"], p["leader"]) for p in parts[1:]]
        assert got == [(ids, ids[0]) for ids in want], parts

    # Decided in-process on the controller's own broker listener.
    res = parse_create_partitions_v1(call(c.node(ctl).port,
                                          create_partitions_v1, "placed", 4,
                                          [[2, 3]]))
    assert res == {"placed": (0, None)}, res
    seen = topic_everywhere(c, "placed",
                            lambda e, p: e == 0 and len(p) == 4)
    assert all(parts[3]["replicas"] == [2, 3] and parts[3]["leader"] == 2
               for parts in seen.values()), seen

    # Refused by the controller with Kafka's texts, nothing added.
    bad = [
        ([[1, 7]], "The manual partition assignment includes broker 7, but "
                   "no such broker is registered."),
        ([[1, 1]], "The manual partition assignment includes the broker 1 "
                   "more than once."),
        ([[1]], "The manual partition assignment includes a partition with "
                "1 replica(s), but this is not consistent with previous "
                "partitions, which have 2 replica(s)."),
        ([], "Attempted to add 1 additional partition(s), but only 0 "
             "assignment(s) were specified."),
    ]
    for node in (other, c.node(ctl)):
        for assignment, msg in bad:
            res = parse_create_partitions_v1(call(
                node.port, create_partitions_v1, "placed", 5, assignment))
            assert res == {"placed": (INVALID_REPLICA_ASSIGNMENT, msg)}, res
    _, _, topics = metadata(other.port, ["placed"])
    assert len(topics["placed"][1]) == 4, topics
