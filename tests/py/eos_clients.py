"""One short exactly-once scenario of a Python client library against a
broker; prints one JSON line of what the client observed.  Runs in
build/venv (tools/py-build.sh), started by tests/e2e/test_python_clients.py,
which then reads the topics itself.

    eos_clients.py LIB txn BOOTSTRAP TOPIC TXNID
    eos_clients.py LIB rpw BOOTSTRAP IN OUT GROUP TXNID N PER_TXN ABORT_AT
    eos_clients.py LIB fence BOOTSTRAP TOPIC TXNID

LIB is confluent (confluent-kafka from PyPI, its bundled librdkafka) or
kafka-python.  txn: commit c0-c4, abort a0-a4, commit c5-c9.  rpw: a group
consumer (read_committed) and a transactional producer copy IN to OUT as
"out-"+value, the consumed offsets sent to each transaction; the
ABORT_AT-th transaction is aborted on purpose and the consumer rewound to
the committed offsets.  fence: a zombie's commit after a second producer
with its transactional id started.
"""

import json
import sys
import time

DEADLINE = time.monotonic() + 120
T = 30  # seconds for one client call


def left():
    rest = DEADLINE - time.monotonic()
    if rest <= 0:
        raise SystemExit("eos_clients: deadline passed")
    return rest


def seq(prefix, a, b):
    return ["%s%d" % (prefix, i) for i in range(a, b)]


class Confluent:
    def __init__(self):
        import confluent_kafka as ck
        self.ck = ck

    def producer(self, boot, tid):
        p = self.ck.Producer({"bootstrap.servers": boot,
                              "transactional.id": tid})
        p.init_transactions(T)
        return p

    def txn(self, boot, topic, tid):
        p = self.producer(boot, tid)
        out = {}
        for name, values, commit in (("commit1", seq("c", 0, 5), True),
                                     ("abort", seq("a", 0, 5), False),
                                     ("commit2", seq("c", 5, 10), True)):
            offs = []
            p.begin_transaction()
            for v in values:
                p.produce(topic, v.encode(), partition=0,
                          on_delivery=lambda e, m, o=offs: o.append(
                              m.offset() if e is None else str(e)))
            assert p.flush(T) == 0
            if commit:
                p.commit_transaction(T)
            else:
                p.abort_transaction(T)
            out[name] = offs
        return out

    def rpw(self, boot, src, dst, group, tid, n, per_txn, abort_at):
        ck = self.ck
        c = ck.Consumer({"bootstrap.servers": boot, "group.id": group,
                         "isolation.level": "read_committed",
                         "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
        c.subscribe([src])
        p = self.producer(boot, tid)
        done, stats = set(), dict(transactions=0, commits=0, aborts=0,
                                  aborted_records=0, rereads_after_commit=0)
        while len(done) < n:
            left()
            msgs = [m for m in c.consume(per_txn, 1.0) if not m.error()]
            if not msgs:
                continue
            p.begin_transaction()
            stats["transactions"] += 1
            keys = []
            for m in msgs:
                key = (m.partition(), m.offset())
                stats["rereads_after_commit"] += key in done
                keys.append(key)
                p.produce(dst, b"out-" + m.value(), partition=m.partition())
            pos = [tp for tp in c.position(c.assignment()) if tp.offset >= 0]
            p.send_offsets_to_transaction(pos, c.consumer_group_metadata(),
                                          T)
            if stats["transactions"] == abort_at:
                assert p.flush(T) == 0  # the aborted records in the log
                p.abort_transaction(T)
                stats["aborts"] += 1
                stats["aborted_records"] += len(keys)
                for tp in c.committed(c.assignment(), T):
                    if tp.offset < 0:
                        tp.offset = ck.OFFSET_BEGINNING
                    c.seek(tp)
            else:
                p.commit_transaction(T)
                stats["commits"] += 1
                done.update(keys)
        c.close()
        stats["committed_records"] = len(done)
        return stats

    def fence(self, boot, topic, tid):
        zombie = self.producer(boot, tid)
        zombie.begin_transaction()
        zombie.produce(topic, b"zombie", partition=0)
        assert zombie.flush(T) == 0
        fresh = self.producer(boot, tid)
        fresh.begin_transaction()
        fresh.produce(topic, b"fresh", partition=0)
        fresh.commit_transaction(T)
        try:
            zombie.commit_transaction(T)
            return {"zombie_commit_error": ""}
        except self.ck.KafkaException as e:
            err = e.args[0]
            return {"zombie_commit_error": err.name(), "fatal": err.fatal()}


class KafkaPython:
    def __init__(self):
        import kafka
        self.kafka = kafka

    def producer(self, boot, tid):
        p = self.kafka.KafkaProducer(bootstrap_servers=boot,
                                     transactional_id=tid)
        p.init_transactions()
        return p

    def txn(self, boot, topic, tid):
        p = self.producer(boot, tid)
        out = {}
        for name, values, commit in (("commit1", seq("c", 0, 5), True),
                                     ("abort", seq("a", 0, 5), False),
                                     ("commit2", seq("c", 5, 10), True)):
            p.begin_transaction()
            futs = [p.send(topic, v.encode(), partition=0) for v in values]
            p.flush(T)
            out[name] = [f.get(T).offset for f in futs]
            if commit:
                p.commit_transaction()
            else:
                p.abort_transaction()
        p.close(T)
        return out

    def rpw(self, boot, src, dst, group, tid, n, per_txn, abort_at):
        kafka = self.kafka
        from kafka.structs import OffsetAndMetadata
        c = kafka.KafkaConsumer(src, bootstrap_servers=boot, group_id=group,
                                isolation_level="read_committed",
                                enable_auto_commit=False,
                                auto_offset_reset="earliest")
        p = self.producer(boot, tid)
        done, stats = set(), dict(transactions=0, commits=0, aborts=0,
                                  aborted_records=0, rereads_after_commit=0)
        while len(done) < n:
            left()
            batches = c.poll(timeout_ms=1000, max_records=per_txn)
            msgs = [m for recs in batches.values() for m in recs]
            if not msgs:
                continue
            p.begin_transaction()
            stats["transactions"] += 1
            keys = []
            for m in msgs:
                key = (m.partition, m.offset)
                stats["rereads_after_commit"] += key in done
                keys.append(key)
                p.send(dst, b"out-" + m.value, partition=m.partition)
            offsets = {tp: OffsetAndMetadata(c.position(tp), "", -1)
                       for tp in batches}
            p.send_offsets_to_transaction(offsets, group)
            if stats["transactions"] == abort_at:
                p.flush(T)  # the aborted records in the log
                p.abort_transaction()
                stats["aborts"] += 1
                stats["aborted_records"] += len(keys)
                for tp in c.assignment():
                    off = c.committed(tp)
                    if off is None:
                        c.seek_to_beginning(tp)
                    else:
                        c.seek(tp, off)
            else:
                p.commit_transaction()
                stats["commits"] += 1
                done.update(keys)
        c.close()
        p.close(T)
        stats["committed_records"] = len(done)
        return stats

    def fence(self, boot, topic, tid):
        zombie = self.producer(boot, tid)
        zombie.begin_transaction()
        zombie.send(topic, b"zombie", partition=0).get(T)
        fresh = self.producer(boot, tid)
        fresh.begin_transaction()
        fresh.send(topic, b"fresh", partition=0).get(T)
        fresh.commit_transaction()
        fresh.close(T)
        try:
            zombie.commit_transaction()
            return {"zombie_commit_error": ""}
        except self.kafka.errors.KafkaError as e:
            name = type(e).__name__
            # The Kafka error name (PRODUCER_FENCED) where there is one.
            return {"zombie_commit_error": getattr(e, "message", name),
                    "error_class": name}
        finally:
            zombie.close(0)


def main():
    lib, scenario, boot = sys.argv[1:4]
    args = sys.argv[4:]
    client = {"confluent": Confluent, "kafka-python": KafkaPython}[lib]()
    if scenario == "rpw":
        args = args[:4] + [int(a) for a in args[4:]]
    out = getattr(client, scenario)(boot, *args)
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
