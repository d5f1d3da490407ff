"""Consumer groups (classic protocol): librdkafka consumers join, split the
partitions, rebalance when one leaves, commit and resume; static
membership rejoins without a rebalance; group administration; the
coordinator's error codes over the raw protocol; committed offsets
survive kill -9.

Brokers run with group.initial.rebalance.delay.ms=0 so a first join does
not wait the default 3 s. Consumers are read_uncommitted (librdkafka's
default is read_committed) so these tests depend on groups only.
"""

import time
from collections import Counter

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

import kafka_wire as kw
from conftest import SLOW, needs_cairn

pytestmark = needs_cairn

T = 15 * SLOW
FAST_GROUPS = {"group.initial.rebalance.delay.ms": "0"}
RETRIABLE = (kw.COORDINATOR_NOT_AVAILABLE, kw.COORDINATOR_LOAD_IN_PROGRESS,
             kw.NOT_COORDINATOR)


@pytest.fixture
def gbroker(broker_factory):
    return broker_factory(**FAST_GROUPS)


class Member:
    """A subscribed consumer that records its rebalance callbacks and the
    messages it is given."""

    def __init__(self, broker, group, topic, instance_id=None, **extra):
        conf = {"bootstrap.servers": broker.bootstrap, "group.id": group,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "isolation.level": "read_uncommitted",
                "session.timeout.ms": 6000, "heartbeat.interval.ms": 300,
                "partition.assignment.strategy": "range",
                "enable.partition.eof": False}
        if instance_id:
            conf["group.instance.id"] = instance_id
        conf.update(extra)
        self.name = instance_id or "m"
        self.c = Consumer(conf)
        self.assigned = set()
        self.events = []            # ("assign"|"revoke", [partitions])
        self.msgs = []              # (partition, offset, value)
        self.closed = False
        self.c.subscribe([topic], on_assign=self._assign,
                         on_revoke=self._revoke)

    def _assign(self, c, parts):
        self.assigned = {p.partition for p in parts}
        self.events.append(("assign", sorted(self.assigned)))

    def _revoke(self, c, parts):
        self.events.append(("revoke", sorted(p.partition for p in parts)))
        self.assigned = set()

    def poll(self, timeout=0.05):
        for m in self.c.consume(100, timeout):
            if m.error() is None:
                self.msgs.append((m.partition(), m.offset(), m.value()))

    def close(self):
        if not self.closed:
            self.closed = True
            self.c.close()


def poll_until(members, pred, timeout, what):
    """Poll every member in turn until pred() holds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for m in members:
            m.poll()
        if pred():
            return
    pytest.fail("%s within %ss; assignments %s, events %s" % (
        what, timeout, [sorted(m.assigned) for m in members],
        [m.events for m in members]))


def poll_for(members, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for m in members:
            m.poll()


def balanced(members, each, total):
    def pred():
        sets = [m.assigned for m in members]
        union = set().union(*sets)
        return all(len(s) == each for s in sets) and len(union) == total \
            and sum(len(s) for s in sets) == total
    return pred


def produce(broker, topic, values_by_partition):
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5,
                  "enable.idempotence": True})
    for part, values in values_by_partition.items():
        for v in values:
            p.produce(topic, value=v, partition=part)
    assert p.flush(T) == 0


def committed(broker, group, topic, parts):
    """{partition: committed offset} read by a consumer outside the
    group (OffsetFetch only)."""
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                  "enable.auto.commit": False,
                  "isolation.level": "read_uncommitted"})
    try:
        got = c.committed([TopicPartition(topic, p) for p in parts],
                          timeout=T)
        return {tp.partition: tp.offset for tp in got}
    finally:
        c.close()


def retry(fn, timeout=10 * SLOW):
    deadline = time.monotonic() + timeout
    while True:
        res = fn()
        code = res[0] if isinstance(res, tuple) else res
        if code not in RETRIABLE or time.monotonic() > deadline:
            return res
        time.sleep(0.1)


# ---------------------------------------------------------------------------

def test_three_members_share_rebalance_and_resume(gbroker):
    broker, topic, group = gbroker, "g6", "grp-three"
    broker.create_topic(topic, 6)
    members = []
    try:
        for i in range(3):
            members.append(Member(broker, group, topic))
        poll_until(members, balanced(members, 2, 6), 40 * SLOW,
                   "three members did not settle on 2 partitions each")

        values = {p: [b"v-%d-%d" % (p, i) for i in range(10)]
                  for p in range(6)}
        produce(broker, topic, values)
        poll_until(members, lambda: sum(len(m.msgs) for m in members) >= 60,
                   20 * SLOW, "60 records not consumed")
        poll_for(members, 1.0)
        got = [(p, o, v) for m in members for (p, o, v) in m.msgs]
        assert len(got) == 60, "consumed %d records, some twice" % len(got)
        assert Counter(v for _, _, v in got) == \
            Counter(v for vs in values.values() for v in vs)
        # Each consumed only its own partitions, in order from offset 0.
        for m in members:
            for p in m.assigned:
                mine = [(o, v) for (pp, o, v) in m.msgs if pp == p]
                assert mine == list(enumerate(values[p])), (p, mine)
            assert {p for p, _, _ in m.msgs} <= m.assigned
        for m in members:
            m.c.commit(asynchronous=False)
        for m in members:
            got = m.c.committed([TopicPartition(topic, p)
                                 for p in sorted(m.assigned)], timeout=T)
            assert {tp.partition: tp.offset for tp in got} == \
                {p: 10 for p in m.assigned}, got
        assert committed(broker, group, topic, range(6)) == \
            {p: 10 for p in range(6)}

        # One leaves: the other two take three partitions each and are not
        # given anything again (everything was committed).
        members[2].close()
        rest = members[:2]
        poll_until(rest, balanced(rest, 3, 6), 20 * SLOW,
                   "the two remaining members did not take 3 each")
        poll_for(rest, 1.0)
        assert sum(len(m.msgs) for m in members) == 60, \
            "records delivered again after the rebalance"
        got = rest[0].c.committed([TopicPartition(topic, p)
                                   for p in range(6)], timeout=T)
        assert {tp.partition: tp.offset for tp in got} == \
            {p: 10 for p in range(6)}
        for m in rest:
            m.close()

        # New records, then a new member: it resumes at the committed
        # offsets (auto.offset.reset=earliest would replay otherwise).
        more = {p: [b"w-%d-%d" % (p, i) for i in range(5)] for p in range(6)}
        produce(broker, topic, more)
        fresh = Member(broker, group, topic)
        members.append(fresh)
        poll_until([fresh], lambda: len(fresh.msgs) >= 30, 20 * SLOW,
                   "the new member did not get the 30 new records")
        poll_for([fresh], 1.0)
        assert sorted(fresh.msgs) == sorted(
            (p, 10 + i, v) for p, vs in more.items()
            for i, v in enumerate(vs)), fresh.msgs
    finally:
        for m in members:
            m.close()


def test_static_member_rejoins_without_rebalance(gbroker):
    broker, topic, group = gbroker, "gstatic", "grp-static"
    broker.create_topic(topic, 4)
    extra = {"session.timeout.ms": 10000}
    s2 = Member(broker, group, topic, "s2", **extra)
    s1 = s1b = None
    try:
        # s2 first, so it is the leader and s1 a follower.
        poll_until([s2], lambda: len(s2.assigned) == 4, 20 * SLOW,
                   "s2 alone did not get all 4 partitions")
        s1 = Member(broker, group, topic, "s1", **extra)
        poll_until([s1, s2], balanced([s1, s2], 2, 4), 20 * SLOW,
                   "s1 and s2 did not settle on 2 partitions each")
        poll_for([s1, s2], 1.0)
        s1_parts, s2_parts = set(s1.assigned), set(s2.assigned)
        s2_events = list(s2.events)

        # A static member's close sends no LeaveGroup; coming back with
        # the same group.instance.id inside session.timeout.ms takes its
        # old place without a rebalance.
        s1.close()
        s1b = Member(broker, group, topic, "s1", **extra)
        poll_until([s1b, s2], lambda: bool(s1b.assigned), 8,
                   "restarted s1 got no assignment")
        assert s1b.assigned == s1_parts, (s1b.assigned, s1_parts)
        poll_for([s1b, s2], 3.0)
        assert s2.events == s2_events, \
            "s2 saw a rebalance: %r" % s2.events[len(s2_events):]
        assert s2.assigned == s2_parts
        assert s1b.events == [("assign", sorted(s1_parts))], s1b.events
    finally:
        for m in (s1, s1b, s2):
            if m is not None:
                m.close()


def test_admin_list_describe_delete(gbroker):
    broker, topic, group = gbroker, "gadm", "grp-admin"
    broker.create_topic(topic, 2)
    members = [Member(broker, group, topic) for _ in range(2)]
    cli = kw.ReadClient(broker.port)
    try:
        poll_until(members, balanced(members, 1, 2), 30 * SLOW,
                   "two members did not settle on 1 partition each")
        produce(broker, topic, {0: [b"a"], 1: [b"b"]})
        poll_until(members, lambda: sum(len(m.msgs) for m in members) == 2,
                   10 * SLOW, "records not consumed")
        for m in members:
            m.c.commit(asynchronous=False)
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})

        # ListGroups and DescribeGroups (librdkafka's list_groups does
        # both) while the members keep heartbeating.
        groups = {}
        deadline = time.monotonic() + 10 * SLOW
        while time.monotonic() < deadline:
            poll_for(members, 0.2)
            groups = {g.id: g for g in admin.list_groups(timeout=T)}
            if group in groups and groups[group].state == "Stable":
                break
        assert group in groups, list(groups)
        g = groups[group]
        assert g.state == "Stable", g.state
        assert g.protocol_type == "consumer", g.protocol_type
        assert g.protocol == "range", g.protocol
        assert len(g.members) == 2, g.members
        assert g.error is None or g.error.code() == 0, g.error
        (one,) = admin.list_groups(group=group, timeout=T)
        assert one.id == group and len(one.members) == 2
        ids = {mm.id for mm in one.members}
        assert len(ids) == 2 and all(ids), ids

        # Deleting a group with members fails; an empty one goes, with
        # its committed offsets.
        assert retry(lambda: cli.delete_groups([group])[group]) == \
            kw.NON_EMPTY_GROUP
        for m in members:
            m.close()
        assert committed(broker, group, topic, [0, 1]) == {0: 1, 1: 1}
        got = cli.delete_groups([group, "grp-never-was"])
        assert got == {group: 0,
                       "grp-never-was": kw.GROUP_ID_NOT_FOUND}, got
        assert cli.delete_groups([group]) == {group: kw.GROUP_ID_NOT_FOUND}
        assert group not in {g.id for g in admin.list_groups(timeout=T)}
        err, offs = cli.offset_fetch(group, {topic: [0, 1]})
        assert err == 0 and offs == {(topic, 0): (0, -1),
                                     (topic, 1): (0, -1)}, (err, offs)
    finally:
        for m in members:
            m.close()
        cli.close()


def failpoint_coordinator(broker_factory, failpoints, topic, group):
    """A broker restarted with failpoints, topic made, and a raw client
    that found group's coordinator (the caller closes it)."""
    broker = broker_factory(**FAST_GROUPS)
    broker.stop()
    broker.failpoints = failpoints
    broker.start()
    broker.create_topic(topic, 1)
    cli = kw.ReadClient(broker.port, timeout=15 * SLOW)
    c = retry(lambda: (lambda e: (e["error"], e))(
        cli.find_coordinator(group, kw.COORDINATOR_GROUP, 3)[0]))[1]
    assert c["error"] == 0, c
    return cli


def test_sync_group_waits_for_stored_assignment(broker_factory):
    """The leader's assignment is written to __consumer_offsets before
    SyncGroup is answered, as Kafka answers from the append's callback:
    when that write fails (a fail point), SyncGroup gets NOT_COORDINATOR
    (Kafka's mapping of KAFKA_STORAGE_ERROR) and no assignment, and the
    group rebalances."""
    topic, group = "gstore", "g-st"
    cli = failpoint_coordinator(broker_factory, "group.assignment_write=error",
                                topic, group)
    try:
        d = cli.join_group(group, topics=[topic])
        assert d["error"] == kw.MEMBER_ID_REQUIRED, d
        mid = d["member_id"]
        d = cli.join_group(group, member_id=mid, topics=[topic])
        assert d["error"] == 0 and d["leader"] == mid, d
        gen = d["generation"]
        assign = kw.consumer_assignment({topic: [0]})
        err, got = cli.sync_group(group, gen, mid, [(mid, assign)])
        assert (err, got) == (kw.NOT_COORDINATOR, b""), (err, got)
        assert cli.heartbeat(group, gen, mid) == kw.REBALANCE_IN_PROGRESS
    finally:
        cli.close()


def test_failed_group_creation_is_undone(broker_factory):
    """JoinGroup that creates a group writes it to __consumer_offsets; when
    that write fails (a fail point) the group goes again, as Kafka undoes
    the creation with its failed append.  The KIP-394 answer comes first
    (Kafka answers it before the write too), so the id it handed out is
    then unknown."""
    topic, group = "gcreate", "g-cr"
    cli = failpoint_coordinator(broker_factory, "group.create_write=error",
                                topic, group)
    try:
        d = cli.join_group(group, topics=[topic])
        assert d["error"] == kw.MEMBER_ID_REQUIRED, d
        d = cli.join_group(group, member_id=d["member_id"], topics=[topic])
        assert d["error"] == kw.UNKNOWN_MEMBER_ID, d
        # Gone, not kept empty: ListGroups (v0) does not name it.
        r = kw.Reader(cli.call(lambda corr: kw.request(16, 0, corr, b"")))
        r.i32()
        assert r.i16() == 0
        names = [(r.string(), r.string())[0] for _ in range(r.i32())]
        assert group not in names, names
    finally:
        cli.close()


def test_raw_protocol_errors(gbroker):
    broker, topic, group = gbroker, "graw", "grp-raw"
    broker.create_topic(topic, 1)
    cli = kw.ReadClient(broker.port, timeout=15 * SLOW)
    try:
        for version in (1, 3):
            c = retry(lambda: (lambda e: (e["error"], e))(
                cli.find_coordinator(group, kw.COORDINATOR_GROUP,
                                     version)[0]))[1]
            assert c["error"] == 0 and c["port"] == broker.port, c

        d = retry(lambda: (lambda r: (r["error"], r))(
            cli.join_group(group, session_timeout_ms=1,
                           topics=[topic])))[1]
        assert d["error"] == kw.INVALID_SESSION_TIMEOUT, d

        # JoinGroup v4+: a first join without a member id is told its id.
        d = cli.join_group(group, topics=[topic])
        assert d["error"] == kw.MEMBER_ID_REQUIRED and d["member_id"], d
        mid = d["member_id"]
        d = cli.join_group(group, member_id=mid, topics=[topic])
        assert d["error"] == 0, d
        gen = d["generation"]
        assert gen >= 1 and d["leader"] == mid and d["protocol"] == "range"
        assert [m[0] for m in d["members"]] == [mid], d["members"]
        assign = kw.consumer_assignment({topic: [0]})

        err, _ = cli.sync_group(group, gen + 1, mid, [(mid, assign)])
        assert err == kw.ILLEGAL_GENERATION, err
        err, got = cli.sync_group(group, gen, mid, [(mid, assign)])
        assert err == 0 and got == assign, (err, got)

        assert cli.heartbeat(group, gen, mid) == 0
        assert cli.heartbeat(group, gen, "no-such-member") == \
            kw.UNKNOWN_MEMBER_ID
        assert cli.heartbeat(group, gen + 1, mid) == kw.ILLEGAL_GENERATION

        got = cli.offset_commit(group, {(topic, 0): 7}, generation=gen,
                                member_id=mid)
        assert got == {(topic, 0): 0}, got
        got = cli.offset_commit(group, {(topic, 0): 9}, generation=gen + 1,
                                member_id=mid)
        assert got == {(topic, 0): kw.ILLEGAL_GENERATION}, got
        err, offs = cli.offset_fetch(group, {topic: [0]})
        assert err == 0 and offs == {(topic, 0): (0, 7)}, (err, offs)

        # Committing for a topic that does not exist (simple commit).
        got = retry(lambda: (lambda r: (r.get(("no-such-topic", 0)), r))(
            cli.offset_commit("grp-raw-simple", {("no-such-topic", 0): 1})))
        assert got[0] == kw.UNKNOWN_TOPIC_OR_PARTITION, got

        # After LeaveGroup the member is unknown.
        assert cli.leave_group(group, [(mid, None)]) == 0
        assert cli.heartbeat(group, gen, mid) in (kw.UNKNOWN_MEMBER_ID,
                                                  kw.ILLEGAL_GENERATION)
    finally:
        cli.close()


def test_offsets_survive_kill9(gbroker):
    broker, topic, group = gbroker, "gkill", "grp-kill"
    broker.create_topic(topic, 2)
    produce(broker, topic, {0: [b"a%d" % i for i in range(7)],
                            1: [b"b%d" % i for i in range(3)]})
    m = Member(broker, group, topic)
    try:
        poll_until([m], lambda: len(m.msgs) >= 10, 20 * SLOW,
                   "10 records not consumed")
        m.c.commit(asynchronous=False)
    finally:
        m.close()
    # A simple (memberless) commit in another group too.
    c = Consumer({"bootstrap.servers": broker.bootstrap,
                  "group.id": "grp-kill-simple", "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(topic, 0, 3),
                      TopicPartition(topic, 1, 2)], asynchronous=False)
    c.close()
    assert committed(broker, group, topic, [0, 1]) == {0: 7, 1: 3}

    broker.kill9()
    broker.unexpected_exit = None
    broker.start()
    assert committed(broker, group, topic, [0, 1]) == {0: 7, 1: 3}
    assert committed(broker, "grp-kill-simple", topic, [0, 1]) == \
        {0: 3, 1: 2}
    produce(broker, topic, {0: [b"a7"], 1: [b"b3"]})
    m = Member(broker, group, topic)
    try:
        poll_until([m], lambda: len(m.msgs) >= 2, 20 * SLOW,
                   "the new records not consumed after the restart")
        poll_for([m], 1.0)
        assert sorted(m.msgs) == [(0, 7, b"a7"), (1, 3, b"b3")], m.msgs
    finally:
        m.close()


@needs_cairn
def test_offsets_topic_compacted_and_reloaded(broker_factory):
    """__consumer_offsets stays bounded: once a partition holds more than
    its live keys plus the slack, the coordinator rewrites the live state
    as a checkpoint and the old records go.  Offsets and group metadata
    come back identical after a kill -9."""
    b = broker_factory(**{"offsets.topic.num.partitions": "1",
                          "cairn.internal.compact.slack.records": "50",
                          "group.initial.rebalance.delay.ms": "0"})
    b.create_topic("cmp", 3)
    cli = kw.ReadClient(b.port)
    last = {}
    for i in range(120):
        offs = {("cmp", p): i * 10 + p for p in range(3)}
        errs = cli.offset_commit("grp-c", offs)
        assert set(errs.values()) == {0}, errs
        last = offs
    # A second group on the same (only) partition survives compaction.
    assert set(cli.offset_commit("grp-d", {("cmp", 0): 7}).values()) == {0}
    err, start = cli.list_offset_iso("__consumer_offsets", 0, 0,
                                     timestamp=kw.EARLIEST_TIMESTAMP)
    assert err == 0
    err, end = cli.list_offset_iso("__consumer_offsets", 0, 0)
    assert err == 0
    assert start > 0, "no compaction happened (log start still 0)"
    assert end - start < 120, (start, end)
    cli.close()

    b.kill9()
    b.start()
    cli = kw.ReadClient(b.port)
    top, got = cli.offset_fetch("grp-c", {"cmp": [0, 1, 2]})
    assert top == 0
    assert {k: v[1] for k, v in got.items()} == last, got
    top, got = cli.offset_fetch("grp-d", {"cmp": [0]})
    assert got[("cmp", 0)] == (0, 7), got
    cli.close()
