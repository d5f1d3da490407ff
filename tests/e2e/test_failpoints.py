"""Crash the broker at named fail points inside an append, restart it, and
check the log is consistent: acknowledged data intact, the torn batch gone,
and the partition writable again.

CAIRN_FAILPOINTS=name=crash kills the broker with SIGKILL at that step;
name=error makes the step fail instead.
"""

import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from conftest import needs_cairn

pytestmark = needs_cairn


def produce(bootstrap, topic, values, timeout=10):
    """Produce values at acks=all; returns how many were acknowledged."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                  "message.send.max.retries": 0, "linger.ms": 0,
                  "message.timeout.ms": int(timeout * 1000)})
    acked = []
    for v in values:
        p.produce(topic, value=v, partition=0,
                  on_delivery=lambda err, msg: acked.append(msg.value())
                  if err is None else None)
    p.flush(timeout)
    return acked


def consume_all(bootstrap, topic):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "fp",
                  "enable.auto.commit": False})
    lo, hi = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
    c.assign([TopicPartition(topic, 0, lo)])
    out = []
    deadline = time.monotonic() + 20
    while len(out) < hi - lo and time.monotonic() < deadline:
        for m in c.consume(100, 0.5):
            if m.error() is None:
                out.append((m.offset(), m.value()))
    c.close()
    return hi, out


@pytest.mark.parametrize("point", ["log.mid_append",
                                   "log.after_append_before_sync"])
def test_crash_at_failpoint_then_recover(broker, point):
    broker.create_topic("fp", 1)
    before = [b"before-%d" % i for i in range(50)]
    assert produce(broker.bootstrap, "fp", before) == before
    broker.stop()

    broker.failpoints = point + "=crash"
    broker.start()
    # The next append dies at the fail point: nothing is acknowledged.
    acked = produce(broker.bootstrap, "fp", [b"doomed"], timeout=5)
    assert acked == []
    broker.proc.wait(timeout=10)
    assert broker.proc.returncode != 0
    broker.unexpected_exit = None   # the crash was the point

    broker.failpoints = None
    broker.start()
    hi, got = consume_all(broker.bootstrap, "fp")
    values = [v for _, v in got]
    # Every acknowledged record is there once, in order, at offsets 0..49.
    assert values[:50] == before
    assert [o for o, _ in got[:50]] == list(range(50))
    if point == "log.mid_append":
        # Half a batch on disk is a torn tail: recovery cut it off.
        assert values == before
        assert hi == 50
    else:
        # The whole batch reached the file before the crash; it was never
        # acknowledged, and it may or may not survive, but never twice.
        assert values in (before, before + [b"doomed"])
    after = [b"after-%d" % i for i in range(10)]
    assert produce(broker.bootstrap, "fp", after) == after
    hi2, got2 = consume_all(broker.bootstrap, "fp")
    assert [v for _, v in got2][-10:] == after
    assert hi2 == hi + 10


def test_failpoint_error_takes_log_dir_offline(broker):
    """An append that fails (as a failed write would) takes the log
    directory offline: the producer gets an error, nothing half-written is
    served, and the broker keeps answering."""
    broker.create_topic("fpe", 1)
    assert produce(broker.bootstrap, "fpe", [b"ok"]) == [b"ok"]
    broker.stop()
    broker.failpoints = "log.mid_append=error"
    broker.start()
    assert produce(broker.bootstrap, "fpe", [b"fails"], timeout=5) == []
    assert broker.alive()
    assert "offline" in broker.log_tail(200)
    broker.failpoints = None
    broker.restart()
    hi, got = consume_all(broker.bootstrap, "fpe")
    assert [v for _, v in got] == [b"ok"]
