"""cairn.fsync.group.commit=false: data partitions follow Kafka's flush
policy (flush.messages / flush.ms), but the coordinators still act only on
durable state, through the sync rounds on a worker rather than an
fdatasync on the loop.  Transactions (with their offsets) and plain group
commits work in that mode and survive a kill -9 with nothing lost and
nothing aborted showing."""

import time

from confluent_kafka import Consumer, Producer, TopicPartition

import kafka_wire as kw
from conftest import SLOW, needs_cairn, scaled

pytestmark = needs_cairn

T = 15 * SLOW
OFF = {"cairn.fsync.group.commit": "false",
       "group.initial.rebalance.delay.ms": "0"}


def read_committed(bootstrap, topic, parts, expect, timeout=T):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "off-check",
                  "enable.auto.commit": False,
                  "isolation.level": "read_committed"})
    got = []
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(parts)])
        deadline = time.monotonic() + timeout
        quiet_since = time.monotonic()
        while time.monotonic() < deadline:
            msgs = [m for m in c.consume(500, 0.2) if m.error() is None]
            got += [m.value() for m in msgs]
            if msgs:
                quiet_since = time.monotonic()
            if len(got) >= expect and time.monotonic() - quiet_since > 1:
                break
        return got
    finally:
        c.close()


def offset(cli, group, topic, part):
    top, parts = cli.offset_fetch(group, {topic: [part]}, True)
    err, off = parts.get((topic, part), (0, None))
    return (err or top), off


def wait_offset(cli, group, topic, part, want, timeout=T):
    deadline = time.monotonic() + timeout
    while True:
        got = offset(cli, group, topic, part)
        if got == (0, want) or time.monotonic() > deadline:
            return got
        time.sleep(0.05)


def test_transactions_and_offsets_without_group_commit(broker_factory):
    broker = broker_factory(**OFF)
    broker.create_topic("off-out", 2)
    broker.create_topic("off-in", 1)
    n = scaled(40)
    prod = Producer({"bootstrap.servers": broker.bootstrap,
                     "transactional.id": "tx-off", "linger.ms": 0})
    cons = Consumer({"bootstrap.servers": broker.bootstrap,
                     "group.id": "g-off", "enable.auto.commit": False})
    plain = Consumer({"bootstrap.servers": broker.bootstrap,
                      "group.id": "g-plain", "enable.auto.commit": False})
    cli = kw.ReadClient(broker.port)
    want = []
    try:
        prod.init_transactions(T)
        for i in range(n):
            prod.begin_transaction()
            for p in range(2):
                prod.produce("off-out", value=b"%d-%d" % (i, p), partition=p)
            prod.send_offsets_to_transaction(
                [TopicPartition("off-in", 0, i + 1)],
                cons.consumer_group_metadata(), T)
            if i % 4 == 3:
                prod.abort_transaction(T)
            else:
                prod.commit_transaction(T)
                want += [b"%d-%d" % (i, p) for p in range(2)]
        last_committed = max(i + 1 for i in range(n) if i % 4 != 3)
        # A plain commit, answered only once __consumer_offsets synced it.
        plain.commit(offsets=[TopicPartition("off-in", 0, 7)],
                     asynchronous=False)
        assert wait_offset(cli, "g-off", "off-in", 0, last_committed) == \
            (0, last_committed)
        assert sorted(read_committed(broker.bootstrap, "off-out", 2,
                                     len(want))) == sorted(want)

        cli.close()
        broker.kill9()
        broker.unexpected_exit = None
        broker.start()
        cli = kw.ReadClient(broker.port)
        assert wait_offset(cli, "g-off", "off-in", 0, last_committed) == \
            (0, last_committed)
        assert wait_offset(cli, "g-plain", "off-in", 0, 7) == (0, 7)
        assert sorted(read_committed(broker.bootstrap, "off-out", 2,
                                     len(want))) == sorted(want)
        # The coordinator's state came back too: the same id starts again
        # (fencing the old instance) and commits.
        again = Producer({"bootstrap.servers": broker.bootstrap,
                          "transactional.id": "tx-off", "linger.ms": 0})
        again.init_transactions(T)
        again.begin_transaction()
        again.produce("off-out", value=b"after", partition=0)
        again.commit_transaction(T)
        assert b"after" in read_committed(broker.bootstrap, "off-out", 2,
                                          len(want) + 1)
    finally:
        cons.close()
        plain.close()
        cli.close()


def test_plain_commit_answered_only_once_synced(broker_factory):
    """The plain commit above survives a kill -9, but so would one answered
    before its fdatasync (the page cache outlives the process).  Here no
    fdatasync succeeds (fail point log.fsync=error): the commit must not be
    answered NONE, and its offset must not show."""
    broker = broker_factory(**OFF)
    broker.stop()
    broker.failpoints = "log.fsync=error"
    broker.start()
    broker.create_topic("off-sync", 1)
    cli = kw.ReadClient(broker.port, timeout=T)
    try:
        deadline = time.monotonic() + T
        while True:
            c = cli.find_coordinator("g-sync", kw.COORDINATOR_GROUP, 3)[0]
            if c["error"] == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert c["error"] == 0, c
        got = cli.offset_commit("g-sync", {("off-sync", 0): 7})
        assert got.get(("off-sync", 0)) not in (None, 0), got
        assert offset(cli, "g-sync", "off-sync", 0)[1] in (None, -1)
    finally:
        cli.close()
