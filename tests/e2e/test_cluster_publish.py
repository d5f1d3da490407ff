"""Cluster mode (issue #13, S4's publish): every broker's local topics and
partition leadership follow the metadata image.  A topic the controller
creates gets local logs on every broker with the image's topic id (#13:
every broker holds every partition; #14 narrows it to the replicas); only
the partition's leader takes produce and answers ListOffsets, the others
answer NOT_LEADER_OR_FOLLOWER; a group's requests are answered by the
leader of its __consumer_offsets partition, NOT_COORDINATOR elsewhere; a
deleted topic's logs go from every broker.

Raw requests (kafka_wire) so each broker is asked on its own, not through
a client's routing.  Every broker is killed by pid at teardown
(cluster_factory); every wait is bounded (wait_until).
"""

from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

import kafka_wire as kw
from conftest import SLOW, needs_cairn, wait_until

pytestmark = needs_cairn

REGISTER_S = 20 * SLOW
PUBLISH_S = 20 * SLOW

NONE = 0
NOT_LEADER_OR_FOLLOWER = 6
NOT_COORDINATOR = 16
COORDINATOR_NOT_AVAILABLE = 15


def topic_id(node, topic):
    """The id line of the broker's local metadata for topic, or None."""
    p = Path(node.data_dir) / ".topics" / topic
    try:
        for line in p.read_text().splitlines():
            if line.startswith("id="):
                return line[3:]
    except FileNotFoundError:
        return None
    return None


def part_dirs(node, topic):
    d = Path(node.data_dir)
    return sorted(int(e.name[len(topic) + 1:]) for e in d.iterdir()
                  if e.is_dir() and e.name.startswith(topic + "-")
                  and e.name[len(topic) + 1:].isdigit())


def same_everywhere(c, topic, nparts):
    """The topic's id when every node has it locally with nparts partition
    logs and one id; None before."""
    ids = set()
    for b in c.nodes:
        tid = topic_id(b, topic)
        if tid is None or part_dirs(b, topic) != list(range(nparts)):
            return None
        ids.add(tid)
    return ids.pop() if len(ids) == 1 else None


def list_offset_error(node, topic, part):
    cl = kw.Client(node.port)
    try:
        _, out = kw.parse_list_offsets_v1(
            cl.call(kw.list_offsets_request_v1, topic, part))
    finally:
        cl.close()
    return out[(topic, part)][0]


def produce_error(node, topic, part):
    cl = kw.Client(node.port)
    try:
        err, _ = cl.produce(topic, part, kw.record_batch([b"v"]), acks=1)
    finally:
        cl.close()
    return err


def leader_by_answers(c, ask, topic, part):
    """The one node whose answer to ask(node, topic, part) is not
    NOT_LEADER_OR_FOLLOWER while every other node's is; None otherwise
    (publish not done everywhere yet)."""
    errs = {b.node_id: ask(b, topic, part) for b in c.nodes}
    led = [n for n, e in errs.items() if e != NOT_LEADER_OR_FOLLOWER]
    if len(led) != 1:
        return None
    return led[0], errs


def test_internal_topic_from_the_controller(cluster_factory):
    """__consumer_offsets is created through the controller at the first
    group lookup: every broker then has its logs with the image's id, each
    partition is led by exactly one broker, and group requests are
    answered only there."""
    c = cluster_factory(**{"offsets.topic.num.partitions": "3"})
    c.wait_registered([1, 2, 3], REGISTER_S)
    topic = "__consumer_offsets"
    assert all(topic_id(b, topic) is None for b in c.nodes)

    def found():
        # FindCoordinator asks the controller for the topic until it is
        # published here.
        cl = kw.Client(c.nodes[0].port)
        try:
            _, res = kw.parse_find_coordinator(
                cl.call(kw.find_coordinator_request, "g", 0, 1), 1)
        finally:
            cl.close()
        return res[0]["error"] == NONE
    wait_until("FindCoordinator answered", found, PUBLISH_S)
    tid = wait_until("%s on every broker with one id" % topic,
                     lambda: same_everywhere(c, topic, 3), PUBLISH_S)
    assert len(tid) == 32 and tid != "0" * 32

    for part in range(3):
        led, errs = wait_until(
            "one leader of %s-%d" % (topic, part),
            lambda: leader_by_answers(c, list_offset_error, topic, part),
            PUBLISH_S)
        assert errs[led] == NONE, errs

    # A group's requests: the leader of its partition answers them, the
    # others NOT_COORDINATOR.
    def heartbeat_errors():
        out = {}
        for b in c.nodes:
            cl = kw.Client(b.port)
            try:
                out[b.node_id] = kw.parse_error_after_throttle(
                    cl.call(kw.heartbeat_request_v3, "g", 1, "m"))
            finally:
                cl.close()
        return out
    errs = heartbeat_errors()
    others = [e for e in errs.values() if e == NOT_COORDINATOR]
    assert len(others) == 2, errs
    coordinator = [n for n, e in errs.items() if e != NOT_COORDINATOR]
    assert len(coordinator) == 1 and \
        errs[coordinator[0]] != COORDINATOR_NOT_AVAILABLE, errs


def test_topic_published_led_and_deleted(cluster_factory):
    """A topic created on the cluster: local logs on every broker with one
    id; produce and ListOffsets answered only by each partition's leader
    (the others NOT_LEADER_OR_FOLLOWER); deleted: the logs go
    everywhere."""
    c = cluster_factory()
    c.wait_registered([1, 2, 3], REGISTER_S)
    topic = "pub"
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    fs = admin.create_topics([NewTopic(topic, num_partitions=3,
                                       replication_factor=3)],
                             operation_timeout=30)
    fs[topic].result(timeout=60 * SLOW)
    wait_until("%s on every broker with one id" % topic,
               lambda: same_everywhere(c, topic, 3), PUBLISH_S)

    for part in range(3):
        led, errs = wait_until(
            "one leader of %s-%d" % (topic, part),
            lambda: leader_by_answers(c, produce_error, topic, part),
            PUBLISH_S)
        assert errs[led] == NONE, errs
        # The leader took the record; the others wrote nothing.
        for b in c.nodes:
            err = list_offset_error(b, topic, part)
            assert err == (NONE if b.node_id == led
                           else NOT_LEADER_OR_FOLLOWER), (b.node_id, err)

    fs = admin.delete_topics([topic], operation_timeout=30)
    fs[topic].result(timeout=60 * SLOW)

    def gone():
        return all(topic_id(b, topic) is None and not part_dirs(b, topic)
                   for b in c.nodes)
    wait_until("%s's logs deleted on every broker" % topic, gone,
               PUBLISH_S)

    # Deleted and made again at once: every broker ends with the new id,
    # the old logs reaped before the new ones are made in their place.
    def create(name):
        fs = admin.create_topics([NewTopic(name, num_partitions=2,
                                           replication_factor=3)],
                                 operation_timeout=30)
        fs[name].result(timeout=60 * SLOW)
    create("again")
    first = wait_until("again on every broker",
                       lambda: same_everywhere(c, "again", 2), PUBLISH_S)
    fs = admin.delete_topics(["again"], operation_timeout=30)
    fs["again"].result(timeout=60 * SLOW)
    create("again")

    def recreated():
        tid = same_everywhere(c, "again", 2)
        return tid if tid != first else None
    wait_until("again on every broker with its new id", recreated,
               PUBLISH_S)


def test_restart_keeps_image_topics_drops_orphans(cluster_factory):
    """A restarted broker keeps the local logs of topics the image has
    (the replay at start deletes nothing) and, once the controller has
    unfenced it, deletes a local topic no image names."""
    c = cluster_factory()
    c.wait_registered([1, 2, 3], REGISTER_S)
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    fs = admin.create_topics([NewTopic("keep", num_partitions=2,
                                       replication_factor=3)],
                             operation_timeout=30)
    fs["keep"].result(timeout=60 * SLOW)
    tid = wait_until("keep on every broker with one id",
                     lambda: same_everywhere(c, "keep", 2), PUBLISH_S)
    node = c.node(3)
    assert c.stop(3) == 0
    # A topic of this broker's own from before (its metadata file and a
    # partition log), which the cluster never had.
    data = Path(node.data_dir)
    (data / ".topics" / "orphan").write_text(
        "id=%s\npartitions=1\n" % ("ab" * 16))
    (data / "orphan-0").mkdir()
    node.start()
    c.wait_registered([1, 2, 3], REGISTER_S)
    wait_until("the orphan's logs deleted",
               lambda: topic_id(node, "orphan") is None
               and not part_dirs(node, "orphan"), PUBLISH_S)
    assert topic_id(node, "keep") == tid
    assert part_dirs(node, "keep") == [0, 1]
    assert "topic orphan: in no image" in node.log_tail(400)


def test_transaction_coordinator_follows_the_image(cluster_factory):
    """Each __transaction_state partition is coordinated by its leader
    only: InitProducerId for a transactional id succeeds on the broker
    FindCoordinator names and is NOT_COORDINATOR on the others."""
    c = cluster_factory(**{"transaction.state.log.num.partitions": "3"})
    c.wait_registered([1, 2, 3], REGISTER_S)

    def coordinator():
        cl = kw.Client(c.nodes[0].port)
        try:
            _, res = kw.parse_find_coordinator(
                cl.call(kw.find_coordinator_request, "t1", 1, 1), 1)
        finally:
            cl.close()
        return res[0]["node_id"] if res[0]["error"] == NONE else None
    coord = wait_until("FindCoordinator for t1", coordinator, PUBLISH_S)

    def init_errors():
        out = {}
        for b in c.nodes:
            cl = kw.Client(b.port)
            try:
                _, err, _, _ = kw.parse_init_producer_id(
                    cl.call(kw.init_producer_id_request, version=4,
                            transactional_id="t1"), 4)
            finally:
                cl.close()
            out[b.node_id] = err
        want = {n.node_id: NONE if n.node_id == coord else NOT_COORDINATOR
                for n in c.nodes}
        return out if out == want else None
    wait_until("InitProducerId(t1) only on node %d" % coord, init_errors,
               PUBLISH_S)
