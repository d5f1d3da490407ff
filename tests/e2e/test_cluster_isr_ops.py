"""What an operator sees of the ISR on three brokers (issue #14): a dead
follower leaves the ISR, `cairnctl topics describe
--under-replicated-partitions` lists exactly the partitions it left and
/metrics counts them under Kafka's ReplicaManager names; back, it rejoins
through the leader's AlterPartition (an ISR expansion) and the lists are
empty again.  Every broker is killed by pid at teardown; every wait is
bounded."""

import json

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from conftest import BUILD_DIR, SLOW, metrics, needs_cairn, run, \
    wait_until

pytestmark = [needs_cairn]

REGISTER_S = 30 * SLOW


def states(c, topic):
    """{partition: (leader, sorted isr, sorted replicas)} from one live
    broker's Metadata, or None."""
    b = c.live()[0]
    md = AdminClient({"bootstrap.servers": b.bootstrap}).list_topics(
        topic, timeout=5)
    t = md.topics.get(topic)
    if t is None or t.error is not None:
        return None
    return {p.id: (p.leader, sorted(p.isrs), sorted(p.replicas))
            for p in t.partitions.values()}


def describe(c, *extra, json_out=False):
    args = [str(BUILD_DIR / "cairnctl"), "--bootstrap-server",
            c.live()[0].bootstrap]
    if json_out:
        args.append("--json")
    res = run(args + ["topics", "describe", "--topic", "ops"] + list(extra),
              timeout=30)
    assert res.returncode == 0, res.stderr
    return res.stdout


def metric(b, name):
    return metrics(b).get(name, 0.0)


def test_under_replicated_then_back(cluster_factory):
    c = cluster_factory(3, **{"replica.lag.time.max.ms": "2000"})
    c.wait_registered([1, 2, 3], REGISTER_S)
    a = AdminClient({"bootstrap.servers": c.bootstrap})
    # Replicas placed by hand: node 1 leads partitions 0 and 1, node 2
    # leads 2, node 3 follows all three and leads nothing.
    fs = a.create_topics([NewTopic("ops", num_partitions=3,
                                   replica_assignment=[[1, 2, 3], [1, 3, 2],
                                                       [2, 1, 3]],
                                   config={"min.insync.replicas": "2"})],
                         operation_timeout=30)
    fs["ops"].result(timeout=60)
    wait_until("ops fully in sync", lambda: (lambda s: s and all(
        len(v[1]) == len(v[2]) and v[0] >= 0 for v in s.values()))(
            states(c, "ops")), REGISTER_S)
    p = Producer({"bootstrap.servers": c.bootstrap, "acks": "all"})
    for i in range(30):
        p.produce("ops", value=b"v%d" % i, partition=i % 3)
    assert p.flush(60) == 0

    assert "Partition:" not in describe(c, "--under-replicated-partitions")
    leader = c.node(1)
    assert metric(leader, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    expands_before = metric(leader, "kafka_server_replicamanager_isrexpands_total")

    c.kill9(3)
    wait_until("node 3 out of every ISR", lambda: (lambda s: s and all(
        3 not in v[1] for v in s.values()))(states(c, "ops")), REGISTER_S)
    text = describe(c, "--under-replicated-partitions")
    lines = [l for l in text.splitlines() if l.strip()]
    # kafka-topics prints the matching partition lines alone, without
    # the topic's header line.
    assert len(lines) == 3, text
    assert all("\tPartition: " in l for l in lines), text
    assert sorted(int(l.split("\tPartition: ")[1].split("\t")[0])
                  for l in lines) == [0, 1, 2], text
    doc = json.loads(describe(c, "--under-replicated-partitions",
                              json_out=True))
    infos = doc[0]["partition_info"] if isinstance(doc, list) else \
        doc["partition_info"]
    assert sorted(pi["partition"] for pi in infos) == [0, 1, 2]
    assert all(pi["under_replicated"] for pi in infos)
    wait_until("node 1's metrics count two under-replicated partitions",
               lambda: metric(leader, "kafka_server_replicamanager_"
                              "underreplicatedpartitions") == 2, REGISTER_S)
    assert metric(leader, "kafka_server_replicamanager_leadercount") >= 2
    assert metric(leader, "kafka_server_replicamanager_"
                  "underminisrpartitioncount") == 0

    c.node(3).start()
    wait_until("node 3 back in every ISR", lambda: (lambda s: s and all(
        len(v[1]) == len(v[2]) for v in s.values()))(states(c, "ops")),
        REGISTER_S)
    assert "Partition:" not in describe(c, "--under-replicated-partitions")
    wait_until("node 1's metrics count no under-replicated partition",
               lambda: metric(leader, "kafka_server_replicamanager_"
                              "underreplicatedpartitions") == 0, REGISTER_S)
    # Only a leader adds a replica back (the controller never does): the
    # two partitions node 1 leads were expanded by node 1.
    assert metric(leader, "kafka_server_replicamanager_isrexpands_total") \
        >= expands_before + 2
    lag = {k: v for k, v in metrics(leader).items()
           if k.startswith("cairn_partition_follower_lag{topic=\"ops\"")}
    assert lag and all(v == 0 for v in lag.values()), lag
