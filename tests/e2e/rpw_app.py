"""Read-process-write with exactly-once semantics, for test_eos_rpw.py.

Consumes an input topic read_committed in a consumer group (no auto
commit), writes b"out-" + value of each record to the output topic inside
a transaction, and every --batch records commits the consumed positions
with send_offsets_to_transaction followed by commit_transaction. An
abortable error aborts the transaction and rewinds the consumer to the
committed offsets; a fatal one exits, and the test restarts the app with
the same transactional.id, which fences the old instance.

usage: rpw_app.py BOOTSTRAP INPUT OUTPUT GROUP TRANSACTIONAL_ID
                  [--batch N] [--sleep SECONDS] [--max-seconds S]

Progress goes to stdout, one line per event ("committed N", "aborted",
"fatal ..."), flushed at once, so a log shows how far each run got.
"""

import argparse
import sys
import time

from confluent_kafka import (OFFSET_BEGINNING, Consumer, KafkaError,
                             KafkaException, Producer, TopicPartition)

CALL_TIMEOUT = 20


def say(*args):
    print(*args, flush=True)


def rewind(consumer):
    """Seek every assigned partition back to its committed offset."""
    parts = consumer.assignment()
    if not parts:
        return
    for tp in consumer.committed(parts, timeout=CALL_TIMEOUT):
        off = tp.offset if tp.offset >= 0 else OFFSET_BEGINNING
        consumer.seek(TopicPartition(tp.topic, tp.partition, off))


def retrying(fn, deadline):
    """fn() again while it fails with a retriable error, as librdkafka
    asks for send_offsets_to_transaction and commit_transaction."""
    while True:
        try:
            return fn()
        except KafkaException as e:
            err = e.args[0] if e.args else None
            if not isinstance(err, KafkaError) or not err.retriable() or \
                    time.monotonic() > deadline:
                raise
            say("retrying after %s" % err)
            time.sleep(0.2)


def commit(producer, consumer, deadline):
    """Commit the consumed positions and the output in one transaction."""
    offsets = consumer.position(consumer.assignment())
    meta = consumer.consumer_group_metadata()
    retrying(lambda: producer.send_offsets_to_transaction(
        offsets, meta, CALL_TIMEOUT), deadline)
    retrying(lambda: producer.commit_transaction(CALL_TIMEOUT), deadline)


def main():
    ap = argparse.ArgumentParser()
    for name in ("bootstrap", "input", "output", "group", "tid"):
        ap.add_argument(name)
    ap.add_argument("--batch", type=int, default=20)
    ap.add_argument("--sleep", type=float, default=0.0)
    ap.add_argument("--max-seconds", type=float, default=150.0)
    a = ap.parse_args()

    consumer = Consumer({
        "bootstrap.servers": a.bootstrap, "group.id": a.group,
        "isolation.level": "read_committed", "enable.auto.commit": False,
        "auto.offset.reset": "earliest", "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 500, "max.poll.interval.ms": 20000,
        "enable.partition.eof": False})
    producer = Producer({
        "bootstrap.servers": a.bootstrap, "transactional.id": a.tid,
        "linger.ms": 5, "transaction.timeout.ms": 20000})
    producer.init_transactions(CALL_TIMEOUT)
    say("initialised")

    # On a rebalance the open transaction holds records of partitions
    # this instance may lose: abort it and start again from what is
    # committed (the eager range assignor revokes everything first).
    state = {"pending": 0}

    def on_revoke(c, parts):
        if state["pending"]:
            producer.abort_transaction(CALL_TIMEOUT)
            producer.begin_transaction()
            state["pending"] = 0
            say("aborted on revoke")

    consumer.subscribe([a.input], on_revoke=on_revoke)
    producer.begin_transaction()
    total = 0
    idle_since = time.monotonic()
    deadline = time.monotonic() + a.max_seconds
    while time.monotonic() < deadline:
        try:
            msgs = consumer.consume(a.batch, 0.2)
            for m in msgs:
                if m.error() is not None:
                    if m.error().fatal():
                        raise KafkaException(m.error())
                    continue
                producer.produce(a.output, key=m.key(),
                                 value=b"out-" + m.value(),
                                 partition=m.partition())
                state["pending"] += 1
            if msgs:
                idle_since = time.monotonic()
            idle = time.monotonic() - idle_since > 0.5
            if state["pending"] >= a.batch or (state["pending"] and idle):
                commit(producer, consumer, deadline)
                total += state["pending"]
                state["pending"] = 0
                say("committed %d" % total)
                producer.begin_transaction()
                if a.sleep:
                    time.sleep(a.sleep)
        except KafkaException as e:
            err = e.args[0] if e.args else None
            if not isinstance(err, KafkaError) or err.fatal():
                say("fatal %s" % err)
                return 2
            if err.txn_requires_abort():
                say("abortable %s" % err)
                try:
                    producer.abort_transaction(CALL_TIMEOUT)
                    rewind(consumer)
                    producer.begin_transaction()
                except KafkaException as e2:
                    say("abort/rewind failed: %s" % e2)
                    return 3
                state["pending"] = 0
                say("aborted")
            elif err.retriable():
                say("retriable %s" % err)
                time.sleep(0.2)
            else:
                say("error %s" % err)
                return 4
    say("time limit reached")
    return 0


if __name__ == "__main__":
    sys.exit(main())
