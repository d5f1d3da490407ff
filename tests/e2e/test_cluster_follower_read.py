"""A consumer reading from a follower (KIP-392, issue #14): Fetch v11+ sent
to a follower of the partition is served from its copy, up to its high
watermark, as Kafka 4.4 serves it; before v11 a follower answers
NOT_LEADER_OR_FOLLOWER.  Every broker is killed by pid at teardown."""

import struct

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

import kafka_wire as kw
from conftest import SLOW, needs_cairn, wait_until

pytestmark = [needs_cairn]

REGISTER_S = 20 * SLOW
NOT_LEADER_OR_FOLLOWER = 6


def fetch_v10_error(port, topic, part):
    """The partition error of a Fetch v10 (no rack id) sent to port."""
    body = struct.pack(">iiiibii", -1, 0, 0, 1 << 20, 0, 0, -1)
    body += struct.pack(">i", 1) + kw.string(topic)
    body += struct.pack(">iiiqqi", 1, part, -1, 0, -1, 1 << 20)
    body += struct.pack(">i", 0)
    c = kw.Client(port)
    try:
        r = kw.Reader(c.call(lambda corr: kw.request(kw.API_FETCH, 10, corr,
                                                     body)))
    finally:
        c.close()
    r.i32()  # correlation id
    r.i32()  # throttle
    assert r.i16() == 0
    r.i32()  # session id
    assert r.i32() == 1
    r.string()
    assert r.i32() == 1
    r.i32()  # partition
    return r.i16()


def follower_read(port, topic, part):
    """(error, high watermark, record values) of a Fetch v11 from 0."""
    c = kw.Client(port)
    try:
        _, top, out = kw.parse_fetch_iso(c.call(
            kw.fetch_request_iso, topic, part, 0,
            isolation_level=kw.READ_UNCOMMITTED))
    finally:
        c.close()
    assert top == 0
    d = out[(topic, part)]
    values = [rec[2] for b in d["batches"] for rec in (b["records"] or [])]
    return d["error"], d["high_watermark"], values


def test_consumer_reads_a_follower(cluster_factory):
    c = cluster_factory(3)
    c.wait_registered([1, 2, 3], REGISTER_S)
    a = AdminClient({"bootstrap.servers": c.bootstrap})
    fs = a.create_topics([NewTopic("fr", num_partitions=1,
                                   replication_factor=3)],
                         operation_timeout=30)
    fs["fr"].result(timeout=60)

    def full_isr():
        md = a.list_topics("fr", timeout=5)
        p = md.topics["fr"].partitions.get(0)
        return p if p and p.leader >= 0 and len(p.isrs) == 3 else None
    leader = wait_until("fr fully in sync", full_isr, REGISTER_S).leader

    p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all"})
    values = [b"f-%d" % i for i in range(50)]
    for v in values:
        p.produce("fr", value=v, partition=0)
    assert p.flush(60) == 0

    for b in c.nodes:
        if b.node_id == leader:
            continue
        # Served from the follower's own copy once its high watermark
        # (the leader's, carried by its fetches) covers the records.
        got = wait_until(
            "node %d serves the 50 records" % b.node_id,
            lambda: (lambda e, hw, vs: vs if e == 0 and hw == 50 else None)(
                *follower_read(b.port, "fr", 0)), REGISTER_S)
        assert got == values
        assert fetch_v10_error(b.port, "fr", 0) == NOT_LEADER_OR_FOLLOWER
