"""Cluster mode (issue #13, S4): topics are decided by the controller and
every broker answers from its metadata image.  CreateTopics, DeleteTopics
and CreatePartitions sent to a broker that is not the controller are
forwarded to it; Metadata on every broker shows the placement (replicas,
ISR, leaders spread over brokers); FindCoordinator names the leader of the
internal partition; producer ids come from the controller, so idempotent
producers on different brokers never share one.

Raw requests on the wire (kafka_wire), so each answer's error code and
message is checked exactly.  Every process is killed by pid at teardown
(cluster_factory); every wait is a bounded poll (wait_until).
"""

import struct

from conftest import SLOW, needs_cairn, run, wait_until
import kafka_wire as kw

pytestmark = needs_cairn

REGISTER_S = 20 * SLOW
PROPAGATE_S = 10 * SLOW

NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
LEADER_NOT_AVAILABLE = 5
COORDINATOR_NOT_AVAILABLE = 15
INVALID_PARTITIONS = 37
INVALID_REPLICATION_FACTOR = 38
INVALID_REPLICA_ASSIGNMENT = 39
INVALID_CONFIG = 40
TOPIC_ALREADY_EXISTS = 36

API_CREATE_TOPICS = 19
API_DELETE_TOPICS = 20
API_CREATE_PARTITIONS = 37


# ---- requests (classic encodings, header v1) ------------------------------

def create_topics_v4(corr, topics, validate_only=False, timeout_ms=15000,
                     assignment=None, configs=None):
    """topics: [(name, partitions, rf)]; assignment [[broker ids] per
    partition] and configs {name: value} apply to each topic."""
    body = struct.pack(">i", len(topics))
    for name, parts, rf in topics:
        body += kw.string(name) + struct.pack(">ih", parts, rf)
        assignment = assignment or []
        body += struct.pack(">i", len(assignment))
        for i, ids in enumerate(assignment):
            body += struct.pack(">ii", i, len(ids))
            body += b"".join(struct.pack(">i", x) for x in ids)
        configs = configs or {}
        body += struct.pack(">i", len(configs))
        for k, v in configs.items():
            body += kw.string(k) + kw.string(v)
    body += struct.pack(">i?", timeout_ms, validate_only)
    return kw.request(API_CREATE_TOPICS, 4, corr, body)


def parse_create_topics_v4(body):
    """{name: (error, message)}."""
    r = kw.Reader(body)
    r.i32()  # correlation id
    r.i32()  # throttle
    out = {}
    for _ in range(r.i32()):
        name = r.string()
        out[name] = (r.i16(), r.string())
    return out


def delete_topics_v3(corr, names, timeout_ms=15000):
    body = struct.pack(">i", len(names))
    for n in names:
        body += kw.string(n)
    body += struct.pack(">i", timeout_ms)
    return kw.request(API_DELETE_TOPICS, 3, corr, body)


def parse_delete_topics_v3(body):
    r = kw.Reader(body)
    r.i32()
    r.i32()
    return {r.string(): r.i16() for _ in range(r.i32())}


def create_partitions_v1(corr, topic, count, timeout_ms=15000):
    body = struct.pack(">i", 1) + kw.string(topic)
    body += struct.pack(">ii", count, -1)  # null assignments
    body += struct.pack(">i?", timeout_ms, False)
    return kw.request(API_CREATE_PARTITIONS, 1, corr, body)


def parse_create_partitions_v1(body):
    r = kw.Reader(body)
    r.i32()
    r.i32()
    out = {}
    for _ in range(r.i32()):
        name = r.string()
        out[name] = (r.i16(), r.string())
    return out


def parse_metadata_v1(body):
    """(brokers {id: port}, controller, {topic: (error, [partitions])})
    with each partition a dict."""
    r = kw.Reader(body)
    r.i32()
    brokers = {}
    for _ in range(r.i32()):
        bid = r.i32()
        r.string()
        brokers[bid] = r.i32()
        r.string()  # rack
    controller = r.i32()
    topics = {}
    for _ in range(r.i32()):
        err = r.i16()
        name = r.string()
        r.i8()  # is_internal
        parts = []
        for _ in range(r.i32()):
            p = {"error": r.i16(), "index": r.i32(), "leader": r.i32()}
            p["replicas"] = [r.i32() for _ in range(r.i32())]
            p["isr"] = [r.i32() for _ in range(r.i32())]
            parts.append(p)
        topics[name] = (err, sorted(parts, key=lambda p: p["index"]))
    return brokers, controller, topics


def call(port, build, *args, **kwargs):
    c = kw.Client(port, timeout=20.0 * SLOW)
    try:
        return c.call(build, *args, **kwargs)
    finally:
        c.close()


def metadata(port, topics):
    return parse_metadata_v1(call(port, kw.metadata_request_v1, topics))


def topic_everywhere(c, name, ok, timeout=PROPAGATE_S):
    """Waits until every live node's Metadata for name satisfies ok(error,
    partitions); returns {node id: partitions}."""
    def check():
        seen = {}
        for b in c.live():
            _, _, topics = metadata(b.port, [name])
            err, parts = topics[name]
            if not ok(err, parts):
                return None
            seen[b.node_id] = parts
        return seen
    return wait_until("topic %s as wanted on every broker" % name, check,
                      timeout)


def java_hash_partition(key, n):
    """Kafka's partitionFor: abs(String.hashCode) % n (ASCII keys)."""
    h = 0
    for ch in key:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    if h >= 0x80000000:
        h -= 0x100000000
    h = 0 if h == -0x80000000 else abs(h)
    return h % n


def non_controller(c, ctl):
    return next(b for b in c.nodes if b.node_id != ctl)


# ---- tests ----------------------------------------------------------------

def test_create_rf3_forwarded_placed_everywhere(cluster_factory):
    c = cluster_factory()
    ctl = c.wait_registered([1, 2, 3], REGISTER_S)
    other = non_controller(c, ctl)
    res = parse_create_topics_v4(call(other.port, create_topics_v4,
                                      [("spread", 6, 3)]))
    assert res == {"spread": (NONE, None)}, res

    def placed(err, parts):
        return (err == NONE and len(parts) == 6 and
                all(sorted(p["replicas"]) == [1, 2, 3] and
                    sorted(p["isr"]) == [1, 2, 3] and p["leader"] > 0 and
                    p["error"] == NONE for p in parts))
    seen = topic_everywhere(c, "spread", placed)
    views = list(seen.values())
    assert all(v == views[0] for v in views), seen
    # Kafka's round robin: each broker leads two of the six.
    leaders = [p["leader"] for p in views[0]]
    assert sorted(leaders) == [1, 1, 2, 2, 3, 3], leaders
    assert all(p["leader"] == p["replicas"][0] for p in views[0])

    # Created once: asking again (on another broker) finds it.
    res = parse_create_topics_v4(call(c.node(ctl).port, create_topics_v4,
                                      [("spread", 6, 3)]))
    assert res["spread"][0] == TOPIC_ALREADY_EXISTS, res


def test_replication_factor_above_brokers_refused(cluster_factory):
    # No auto-creation: Metadata below must not create what it looks for.
    c = cluster_factory(**{"auto.create.topics.enable": "false"})
    ctl = c.wait_registered([1, 2, 3], REGISTER_S)
    # Kafka 4.4's text (ctl_topics.c, checked against a Kafka cluster).
    want = ("Unable to replicate the partition 4 time(s): The target "
            "replication factor of 4 cannot be reached because only 3 "
            "broker(s) are registered or some brokers have all their log "
            "directories cordoned.")
    # Forwarded, and in-process on the controller's own node.
    for b in (non_controller(c, ctl), c.node(ctl)):
        res = parse_create_topics_v4(call(b.port, create_topics_v4,
                                          [("rf4", 1, 4)]))
        assert res == {"rf4": (INVALID_REPLICATION_FACTOR, want)}, res
    # validate_only goes to the controller too and creates nothing.
    res = parse_create_topics_v4(call(non_controller(c, ctl).port,
                                      create_topics_v4, [("dry", 3, 3)],
                                      validate_only=True))
    assert res == {"dry": (NONE, None)}, res
    for b in c.nodes:
        _, _, topics = metadata(b.port, ["dry"])
        assert topics["dry"][0] == UNKNOWN_TOPIC_OR_PARTITION, topics


def test_delete_topics_forwarded(cluster_factory):
    c = cluster_factory(**{"auto.create.topics.enable": "false"})
    ctl = c.wait_registered([1, 2, 3], REGISTER_S)
    other = non_controller(c, ctl)
    res = parse_create_topics_v4(call(other.port, create_topics_v4,
                                      [("doomed", 2, 2)]))
    assert res == {"doomed": (NONE, None)}, res
    topic_everywhere(c, "doomed", lambda e, p: e == NONE and len(p) == 2)
    res = parse_delete_topics_v3(call(other.port, delete_topics_v3,
                                      ["doomed", "never-was"]))
    assert res == {"doomed": NONE,
                   "never-was": UNKNOWN_TOPIC_OR_PARTITION}, res
    topic_everywhere(c, "doomed",
                     lambda e, p: e == UNKNOWN_TOPIC_OR_PARTITION)


def test_create_partitions_forwarded(cluster_factory):
    c = cluster_factory()
    ctl = c.wait_registered([1, 2, 3], REGISTER_S)
    other = non_controller(c, ctl)
    res = parse_create_topics_v4(call(other.port, create_topics_v4,
                                      [("grows", 2, 2)]))
    assert res == {"grows": (NONE, None)}, res
    topic_everywhere(c, "grows", lambda e, p: e == NONE and len(p) == 2)
    res = parse_create_partitions_v1(call(other.port, create_partitions_v1,
                                          "grows", 5))
    assert res == {"grows": (NONE, None)}, res
    seen = topic_everywhere(
        c, "grows",
        lambda e, p: e == NONE and len(p) == 5 and
        all(len(set(x["replicas"])) == 2 and x["leader"] > 0 for x in p))
    assert len({p["leader"] for p in seen[ctl]}) > 1, seen[ctl]
    res = parse_create_partitions_v1(call(other.port, create_partitions_v1,
                                          "grows", 3))
    assert res["grows"][0] == INVALID_PARTITIONS, res


def test_metadata_auto_creates_through_controller(cluster_factory):
    c = cluster_factory(**{"num.partitions": "3",
                           "default.replication.factor": "3"})
    ctl = c.wait_registered([1, 2, 3], REGISTER_S)
    other = non_controller(c, ctl)
    _, _, topics = metadata(other.port, ["auto-made"])
    assert topics["auto-made"][0] == LEADER_NOT_AVAILABLE, topics
    topic_everywhere(
        c, "auto-made",
        lambda e, p: e == NONE and len(p) == 3 and
        all(sorted(x["replicas"]) == [1, 2, 3] for x in p))


def test_find_coordinator_is_partition_leader(cluster_factory):
    """Groups and transactional ids alike: the coordinator is the leader
    of the key's partition of the internal topic, which the first lookup
    has the controller create (at the configured size), and every broker
    names it with its address on the listener asked."""
    c = cluster_factory(**{"offsets.topic.num.partitions": "6",
                           "offsets.topic.replication.factor": "3",
                           "transaction.state.log.num.partitions": "4",
                           "transaction.state.log.replication.factor": "3"})
    c.wait_registered([1, 2, 3], REGISTER_S)
    for key, key_type, topic, n in (
            ("admin-group", 0, "__consumer_offsets", 6),
            ("admin-txn", 1, "__transaction_state", 4)):
        def found():
            out = []
            for b in c.nodes:
                _, res = kw.parse_find_coordinator(
                    call(b.port, kw.find_coordinator_request, key,
                         key_type=key_type, version=1), 1)
                if res[0]["error"] != NONE:
                    assert res[0]["error"] == COORDINATOR_NOT_AVAILABLE, res
                    return None
                out.append((res[0]["node_id"], res[0]["host"],
                            res[0]["port"]))
            return out
        answers = wait_until("a coordinator for %s on every broker" % key,
                             found, PROPAGATE_S)
        assert len(set(answers)) == 1, answers
        node, _, port = answers[0]
        _, _, topics = metadata(c.nodes[0].port, [topic])
        err, parts = topics[topic]
        assert err == NONE and len(parts) == n, topics
        assert all(sorted(p["replicas"]) == [1, 2, 3] for p in parts), parts
        want = parts[java_hash_partition(key, n)]["leader"]
        assert node == want, (key, node, want, parts)
        assert port == c.node(node).port


def test_producer_ids_unique_across_brokers(cluster_factory):
    c = cluster_factory()
    c.wait_registered([1, 2, 3], REGISTER_S)
    got = {}
    for b in c.nodes:
        cl = kw.Client(b.port, timeout=20.0 * SLOW)
        try:
            def one():
                err, pid, epoch = cl.init_producer_id()
                return (pid, epoch) if err == NONE else None
            got[b.node_id] = [wait_until("a producer id from node %d"
                                         % b.node_id, one, PROPAGATE_S)[0]
                              for _ in range(3)]
        finally:
            cl.close()
    every = [p for ids in got.values() for p in ids]
    assert len(set(every)) == len(every), got
    assert all(p >= 0 for p in every), got


def test_create_retried_until_new_controller(cluster_factory):
    """The controller dies just before a forwarded CreateTopics: the
    forwarding broker asks again, after a backoff, whichever node leads
    next, within the request's timeout."""
    c = cluster_factory()
    ctl = c.wait_registered([1, 2, 3], REGISTER_S)
    c.kill9(ctl)
    other = non_controller(c, ctl)
    res = parse_create_topics_v4(call(other.port, create_topics_v4,
                                      [("after-failover", 2, 2)],
                                      timeout_ms=int(15000 * SLOW)))
    assert res == {"after-failover": (NONE, None)}, res
    topic_everywhere(c, "after-failover",
                     lambda e, p: e == NONE and len(p) == 2)


def test_manual_assignment_and_checks_on_the_controller_node(cluster_factory):
    """Sent to the controller's own node (decided in-process): a manual
    assignment may name any registered broker, not only the node asked;
    an unregistered one is refused; min.insync.replicas above the
    replication factor is refused before the controller is asked."""
    c = cluster_factory()
    ctl = c.wait_registered([1, 2, 3], REGISTER_S)
    port = c.node(ctl).port
    others = sorted(b.node_id for b in c.nodes if b.node_id != ctl)
    plan = [others, [others[1], ctl]]
    res = parse_create_topics_v4(call(port, create_topics_v4,
                                      [("manual", -1, -1)], assignment=plan))
    assert res == {"manual": (NONE, None)}, res
    seen = topic_everywhere(c, "manual",
                            lambda e, p: e == NONE and len(p) == 2)
    for parts in seen.values():
        assert [p["replicas"] for p in parts] == plan, parts
        assert [p["leader"] for p in parts] == [others[0], others[1]]
    res = parse_create_topics_v4(call(port, create_topics_v4,
                                      [("nobody", -1, -1)],
                                      assignment=[[ctl, 9]]))
    assert res["nobody"][0] == INVALID_REPLICA_ASSIGNMENT, res
    assert "broker 9" in res["nobody"][1], res
    res = parse_create_topics_v4(call(non_controller(c, ctl).port,
                                      create_topics_v4, [("isr", 1, 2)],
                                      configs={"min.insync.replicas": "3"}))
    assert res["isr"][0] == INVALID_CONFIG, res
    assert "min.insync.replicas" in res["isr"][1], res


def metadata_v7(corr, topics):
    body = struct.pack(">i", len(topics))
    for t in topics:
        body += kw.string(t)
    body += struct.pack(">?", False)  # no auto-creation
    return kw.request(3, 7, corr, body)


def parse_metadata_v7(body):
    """{topic: (error, [partition dicts])}, with leader_epoch and
    offline."""
    r = kw.Reader(body)
    r.i32()
    r.i32()  # throttle
    for _ in range(r.i32()):
        r.i32()
        r.string()
        r.i32()
        r.string()
    r.string()  # cluster id
    r.i32()     # controller
    topics = {}
    for _ in range(r.i32()):
        err = r.i16()
        name = r.string()
        r.i8()
        parts = []
        for _ in range(r.i32()):
            p = {"error": r.i16(), "index": r.i32(), "leader": r.i32(),
                 "leader_epoch": r.i32()}
            p["replicas"] = [r.i32() for _ in range(r.i32())]
            p["isr"] = [r.i32() for _ in range(r.i32())]
            p["offline"] = [r.i32() for _ in range(r.i32())]
            parts.append(p)
        topics[name] = (err, sorted(parts, key=lambda p: p["index"]))
    return topics


def test_fenced_broker_is_offline_replica(cluster_factory):
    """A broker that stops heartbeating is fenced: every broker's Metadata
    lists it as an offline replica, out of the ISR, and the partitions it
    led have a new leader with a higher leader epoch."""
    c = cluster_factory(**{"auto.create.topics.enable": "false"})
    ctl = c.wait_registered([1, 2, 3], REGISTER_S)
    res = parse_create_topics_v4(call(c.node(ctl).port, create_topics_v4,
                                      [("survives", 3, 3)]))
    assert res == {"survives": (NONE, None)}, res
    before = topic_everywhere(c, "survives",
                              lambda e, p: e == NONE and len(p) == 3)
    victim = non_controller(c, ctl).node_id
    led = [p["index"] for p in before[ctl] if p["leader"] == victim]
    assert led, before[ctl]  # round robin: each broker leads one
    c.kill9(victim)

    def fenced():
        views = []
        for b in c.live():
            err, parts = parse_metadata_v7(
                call(b.port, metadata_v7, ["survives"]))["survives"]
            if err or any(p["offline"] != [victim] or victim in p["isr"] or
                          p["leader"] in (victim, -1) for p in parts):
                return None
            views.append(parts)
        return views
    views = wait_until("node %d offline everywhere" % victim, fenced,
                       REGISTER_S)
    for parts in views:
        for i in led:
            assert parts[i]["leader_epoch"] > 0, parts[i]
            assert sorted(parts[i]["replicas"]) == [1, 2, 3]


def test_confluent_admin_create_delete_forwarded(cluster_factory):
    """librdkafka's AdminClient (CreateTopics and DeleteTopics at their
    newest versions: flexible encodings, configs in the answer) bootstrapped
    to one broker that is not the controller.  The answer comes once the
    controller has committed the topic; the broker asked may apply it a
    moment later, as in Kafka, so Metadata is polled.  Without
    auto-creation: librdkafka's Metadata after the delete would make the
    topic again."""
    c = cluster_factory(**{"auto.create.topics.enable": "false"})
    ctl = c.wait_registered([1, 2, 3], REGISTER_S)
    other = non_controller(c, ctl)
    script = (
        "import sys\n"
        "from confluent_kafka.admin import AdminClient, NewTopic\n"
        "a = AdminClient({'bootstrap.servers': sys.argv[1]})\n"
        "fs = a.create_topics([NewTopic('viaclient', num_partitions=4, "
        "replication_factor=3, config={'retention.ms': '3600000'})], "
        "operation_timeout=20)\n"
        "fs['viaclient'].result(timeout=30)\n"
        "import time\n"
        "end = time.monotonic() + 20\n"
        "while True:\n"
        "    t = a.list_topics('viaclient', timeout=20).topics['viaclient']\n"
        "    if len(t.partitions) or time.monotonic() > end:\n"
        "        break\n"
        "    time.sleep(0.1)\n"
        "print(len(t.partitions), sorted(len(p.replicas) for p in "
        "t.partitions.values()))\n"
        "a.delete_topics(['viaclient'], operation_timeout=20)['viaclient']"
        ".result(timeout=30)\n"
        "print('deleted')\n")
    res = run(["/usr/bin/python3", "-c", script, other.bootstrap],
              timeout=90)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.split("\n")
    assert lines[0] == "4 [3, 3, 3, 3]", res.stdout
    assert lines[1] == "deleted", res.stdout
    topic_everywhere(c, "viaclient",
                     lambda e, p: e == UNKNOWN_TOPIC_OR_PARTITION)


def test_internal_topic_replication_capped_at_brokers(cluster_factory):
    """offsets.topic.replication.factor above the brokers there are:
    __consumer_offsets is made with one replica per unfenced broker (Kafka's
    rule) rather than never."""
    c = cluster_factory(**{"offsets.topic.num.partitions": "3",
                           "offsets.topic.replication.factor": "5"})
    c.wait_registered([1, 2, 3], REGISTER_S)

    def found():
        _, res = kw.parse_find_coordinator(
            call(c.nodes[0].port, kw.find_coordinator_request, "capped",
                 key_type=0, version=1), 1)
        return res[0]["error"] == NONE
    wait_until("a group coordinator", found, PROPAGATE_S)
    _, _, topics = metadata(c.nodes[0].port, ["__consumer_offsets"])
    err, parts = topics["__consumer_offsets"]
    assert err == NONE and len(parts) == 3, topics
    assert all(sorted(p["replicas"]) == [1, 2, 3] for p in parts), parts
