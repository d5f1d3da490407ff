"""Differential tests: one scenario played against Cairn and against a
reference Apache Kafka 4.4.0 broker (tests/e2e/kafka_ref.py), comparing
what a client observes.  Every observation must be equal, or be listed
with its reason in tests/e2e/kafka_differences.txt.

Scenarios:
  worked_example  the seeds' timeline on one partition over the raw
                  protocol (test_read_committed's, from offset 0): produce
                  offsets with the gaps markers leave, high watermark and
                  LSO from Fetch and from ListOffsets per isolation level,
                  the batches each read returns, the aborted-transaction
                  list of read_committed fetches.
  txn_errors      transaction version 1 over the raw protocol: the error
                  answers of EndTxn, AddPartitionsToTxn, AddOffsetsToTxn
                  and TxnOffsetCommit for bad ids, epochs, topics and
                  states; then zombie fencing by InitProducerId on an
                  Ongoing transaction (its first answer, the epochs, what
                  the zombie's produce, add and end get, the markers).
  idempotence     hand-built batches of an idempotent producer: the
                  offsets of new batches and of retries (the last five and
                  older), sequence gaps, InitProducerId naming the
                  producer (a new producer id, as the KIP-360 bump asks),
                  the old id, the new one at sequence 1 and 0, an unknown
                  producer id.
  tv2_epochs      transaction version 2 as the Java 4.x client speaks it
                  (Produce v12, EndTxn v5, TxnOffsetCommit v5): the epoch
                  each EndTxn returns, late requests of a finished
                  transaction, a timeout abort and the recovery from it.
  groups_cli      cairnctl groups list|describe|reset-offsets|delete on a
                  group with a live member and an open transaction, then
                  without them (test_cairnctl_groups' scene): exit codes
                  and output, member ids aside.

  cross_partition two transactions over three partitions of two topics,
                  one committing, one aborting: per partition the offsets,
                  high watermark, LSO, aborted list and DescribeProducers,
                  DescribeTransactions and ListTransactions of both.
  zombie_prepare  a new instance's InitProducerId while the old one's
                  transaction is PrepareCommit (held there on Cairn by a
                  fail point), then what the old epoch's requests get.
  timeout_abort   transaction version 1 timed out by the coordinator:
                  CompleteAbort, the bumped epoch, the old epoch's errors.
  txn_error_paths the rest of the error answers of test_transactions and
                  test_txn_offsets (timeouts, unknown topics and
                  partitions, TxnOffsetCommit's checks, EndTxn retries).
  kip890_late     transactional Produce v8 batches the coordinator did not
                  add (KIP-890 part 1): before any transaction, another
                  partition, another epoch, producer id or transactional
                  id, after the commit.
  topics_configs  CreateTopics' error answers (also validate_only) and
                  DescribeConfigs of an unknown topic, through
                  confluent-kafka's AdminClient.
  group_states    DescribeGroups and ListGroups states (CompletingRebalance,
                  Stable, Empty after the member leaves, a group with only
                  offsets) and DeleteGroups' errors.
  compacted_produce  keyless records refused by compact and compact,delete
                  topics (INVALID_RECORD, record_errors, the message with
                  its first three errors), keyed records taken, and the
                  DescribeConfigs values and sources of the compaction,
                  cleaner and compression level keys.

The reference broker starts once per module (about 4 s on an idle
machine, 15-45 s on a loaded one; some 330 MB resident); release build
only.
"""

import time
from pathlib import Path

import pytest

import kafka_wire as kw
from conftest import SANITIZED, needs_cairn
from test_cairnctl_groups import cli_scenario
from test_read_committed import (RC, RETRIABLE, RU, Writers, aborted,
                                 fetch, offsets_of)

pytestmark = [needs_cairn, pytest.mark.skipif(
    SANITIZED, reason="differential tests run against the release broker")]

DIFFERENCES = Path(__file__).resolve().parent / "kafka_differences.txt"

# Cairn's broker settings and fail points per scenario (for the
# reference, kafka_ref.py's server.properties); "broker" passes the
# Broker to the scenario, which then steers it.
TIMEOUTS = {"transaction.abort.timed.out.transaction.cleanup.interval.ms":
            "200"}
CAIRN_SETS = {
    "tv2_epochs": {"sets": TIMEOUTS},
    "timeout_abort": {"sets": TIMEOUTS},
    "group_states": {"sets": {"group.initial.rebalance.delay.ms": "0"}},
    "zombie_prepare": {"failpoints": "txn.after_prepare_sync=error",
                       "broker": True},
}


def known_differences():
    out = {}
    for line in DIFFERENCES.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, _, reason = line.partition(":")
            out[key.strip()] = reason.strip()
    return out


def create_topic(bootstrap, name, partitions=1, timeout=60):
    """Created, and every partition's leader answers ListOffsets (Kafka
    takes a moment after CreateTopics before its leader serves)."""
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)],
                        operation_timeout=timeout)[name].result(timeout)
    port = int(bootstrap.rsplit(":", 1)[1])
    cli = kw.ReadClient(port)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if all(cli.list_offset_iso(name, p, RU)[0] == 0
                   for p in range(partitions)):
                return
            time.sleep(0.1)
    finally:
        cli.close()
    raise AssertionError("topic %s not ready" % name)


def worked_example(port, bootstrap):
    """The observations, in order, as (name, value)."""
    topic = "orders"
    create_topic(bootstrap, topic)
    cli = kw.ReadClient(port)
    w = Writers(cli, topic, "tx-worked")
    obs = []

    def names(d):
        # Producer ids differ between brokers; name them.
        ids = {w.p_pid: "P", w.q_pid: "Q"}
        return [(ids.get(p, p), off) for p, off in aborted(d)]

    def look(label, d):
        obs.append((label + ".high_watermark", d["high_watermark"]))
        obs.append((label + ".last_stable_offset", d["last_stable_offset"]))
        obs.append((label + ".batches", offsets_of(d)))
        obs.append((label + ".aborted", names(d)))

    def list_offsets(label):
        obs.append((label + ".list_offsets", (
            cli.list_offset_iso(topic, 0, RC),
            cli.list_offset_iso(topic, 0, RU),
            cli.list_offset_iso(topic, 0, RC, kw.EARLIEST_TIMESTAMP))))

    obs.append(("offsets", [w.q(b"q0"), w.p(b"p1"), w.q(b"q2"), w.p(b"p3"),
                            w.q(b"q4")]))
    look("open.rc0", fetch(cli, topic, 0))
    look("open.rc1", fetch(cli, topic, 1))
    look("open.ru0", fetch(cli, topic, 0, RU))
    list_offsets("open")
    w.end(commit=False)
    look("aborted.rc1", fetch(cli, topic, 1))
    look("aborted.rc0", fetch(cli, topic, 0))
    look("aborted.ru0", fetch(cli, topic, 0, RU))
    list_offsets("aborted")
    obs.append(("offset_p6", w.p(b"p6")))
    look("open2.rc6", fetch(cli, topic, 6))
    list_offsets("open2")
    w.end(commit=True)
    look("committed.rc6", fetch(cli, topic, 6))
    look("committed.rc0", fetch(cli, topic, 0))
    list_offsets("committed")
    cli.close()
    return obs


def txn_ready(cli, tid):
    deadline = time.monotonic() + 30
    while True:
        err = cli.find_coordinator(tid)[0]["error"]
        if err == 0 or time.monotonic() > deadline:
            assert err == 0, err
            return
        time.sleep(0.1)


def init(cli, tid, version=4, timeout_ms=60000):
    deadline = time.monotonic() + 30
    while True:
        res = cli.init_producer_id(version=version, transactional_id=tid,
                                   txn_timeout_ms=timeout_ms)
        if res[0] not in RETRIABLE or time.monotonic() > deadline:
            return res
        time.sleep(0.1)


def until_state(cli, tid, state):
    deadline = time.monotonic() + 30
    while True:
        d = cli.describe_transactions([tid])[tid]
        if d["state"] == state or time.monotonic() > deadline:
            return d["state"]
        time.sleep(0.05)


def control_batches(cli, topic, e0, part=0):
    """[(kind, epoch relative to e0)] of the partition's markers."""
    bs = cli.fetch_full(topic, part)
    kinds = dict(offsets_of({"batches": bs}))
    return [(kinds[b["base_offset"]], b["producer_epoch"] - e0)
            for b in bs if b["attributes"] & kw.ATTR_CONTROL]


def txn_errors(port, bootstrap):
    topic, tid, group = "errs", "diff-tx", "diff-group"
    create_topic(bootstrap, topic)
    cli = kw.ReadClient(port)
    txn_ready(cli, tid)
    obs = []
    err, pid, e0 = init(cli, tid)
    obs.append(("init", (err, e0)))
    obs.append(("end_commit_empty", cli.end_txn(tid, pid, e0, True)))
    obs.append(("end_abort_empty", cli.end_txn(tid, pid, e0, False)))
    obs.append(("end_unknown_id", cli.end_txn("nobody", pid, e0, True)))
    obs.append(("end_wrong_pid", cli.end_txn(tid, pid + 1000, e0, True)))
    obs.append(("end_newer_epoch", cli.end_txn(tid, pid, e0 + 1, True)))
    for v in (1, 3):
        add = lambda p, e, t=topic, i=tid: cli.add_partitions(  # noqa: E731
            i, p, e, {t: [0]}, version=v)[(t, 0)]
        obs.append(("add_v%d_wrong_pid" % v, add(pid + 1000, e0)))
        obs.append(("add_v%d_newer_epoch" % v, add(pid, e0 + 1)))
        obs.append(("add_v%d_unknown_id" % v, add(pid, e0, topic, "nobody")))
        obs.append(("add_v%d_unknown_topic" % v, add(pid, e0, "nope")))
    obs.append(("add_offsets_empty_group",
                kw.add_offsets_to_txn(cli, tid, pid, e0, "")))
    obs.append(("add_offsets_wrong_pid",
                kw.add_offsets_to_txn(cli, tid, pid + 1000, e0, group)))
    obs.append(("add_ok", cli.add_partitions(tid, pid, e0, {topic: [0]})))
    batch = kw.record_batch([b"t0"], pid, e0, 0, transactional=True)
    obs.append(("produce", cli.produce(topic, 0, batch,
                                       transactional_id=tid)))
    obs.append(("txn_offset_commit_not_added", kw.txn_offset_commit(
        cli, tid, group, pid, e0, {(topic, 0): 1})))
    obs.append(("state", until_state(cli, tid, "Ongoing")))

    # Fencing: a second instance's InitProducerId on the Ongoing txn.
    cli2 = kw.ReadClient(port)
    first = cli2.init_producer_id(version=4, transactional_id=tid,
                                  txn_timeout_ms=60000)
    obs.append(("fence_first_answer", first[0]))
    err, pid2, e2 = init(cli2, tid)
    obs.append(("fence_new_instance", (err, pid2 == pid, e2 - e0)))
    stale = kw.record_batch([b"zombie"], pid, e0, 1, transactional=True)
    obs.append(("zombie_produce", cli.produce(topic, 0, stale,
                                              transactional_id=tid)[0]))
    obs.append(("zombie_add_v1", cli.add_partitions(
        tid, pid, e0, {topic: [0]}, version=1)[(topic, 0)]))
    obs.append(("zombie_add_v3", cli.add_partitions(
        tid, pid, e0, {topic: [0]}, version=3)[(topic, 0)]))
    obs.append(("zombie_end_v1", cli.end_txn(tid, pid, e0, True, 1)))
    obs.append(("zombie_end_v3", cli.end_txn(tid, pid, e0, True, 3)))
    obs.append(("markers", control_batches(cli, topic, e0)))
    obs.append(("list_offsets", (cli.list_offset_iso(topic, 0, RC),
                                 cli.list_offset_iso(topic, 0, RU))))
    cli.close()
    cli2.close()
    return obs


def tv2_epochs(port, bootstrap):
    topic, tid, group = "tv2", "diff-tv2", "diff-tv2-group"
    create_topic(bootstrap, topic)
    cli = kw.Tv2ProduceClient(port)
    txn_ready(cli, tid)
    obs = []
    err, pid, e0 = init(cli, tid, version=5, timeout_ms=1000)
    obs.append(("init", err))

    def produce(epoch, seq, value):
        return cli.produce(topic, 0, kw.record_batch(
            [value], pid, epoch, seq, transactional=True),
            transactional_id=tid)[0]

    def end(epoch, commit):
        err, p, e = cli.end_txn_v5(tid, pid, epoch, commit)
        return (err, p == pid if p >= 0 else p, e - e0 if e >= 0 else e)
    # Transaction 1: produce (implicit add) and sendOffsets (TxnOffsetCommit
    # v5, no AddOffsetsToTxn), commit.
    obs.append(("t1_produce", produce(e0, 0, b"a")))
    obs.append(("t1_offsets", cli.txn_offset_commit(
        tid, group, pid, e0, {(topic, 0): 1})))
    obs.append(("t1_commit", end(e0, True)))
    obs.append(("t1_state", until_state(cli, tid, "CompleteCommit")))
    obs.append(("t1_retry_commit", end(e0, True)))
    obs.append(("t1_late_abort", end(e0, False)))
    obs.append(("t1_late_produce", produce(e0, 1, b"late")))
    # Transaction 2, aborted by the client.
    obs.append(("t2_produce", produce(e0 + 1, 0, b"b")))
    obs.append(("t2_abort", end(e0 + 1, False)))
    obs.append(("t2_state", until_state(cli, tid, "CompleteAbort")))
    # Transaction 3 outlives its 1 s timeout: the coordinator aborts it.
    obs.append(("t3_produce", produce(e0 + 2, 0, b"c")))
    obs.append(("t3_state", until_state(cli, tid, "CompleteAbort")))
    d = cli.describe_transactions([tid])[tid]
    obs.append(("t3_epoch_after_timeout", d["producer_epoch"] - e0))
    obs.append(("t3_late_produce", produce(e0 + 2, 1, b"c2")))
    obs.append(("t3_client_abort", end(e0 + 2, False)))
    obs.append(("markers", control_batches(cli, topic, e0)))
    reader = kw.ReadClient(port)
    obs.append(("list_offsets", (reader.list_offset_iso(topic, 0, RC),
                                 reader.list_offset_iso(topic, 0, RU))))
    obs.append(("group_offset", reader.offset_fetch(group, {topic: [0]},
                                                    require_stable=True)))
    reader.close()
    cli.close()
    return obs


def idempotence(port, bootstrap):
    topic = "idem"
    create_topic(bootstrap, topic)
    cli = kw.ReadClient(port)
    obs = []
    err, pid, e0 = cli.init_producer_id()
    obs.append(("init", err))

    def send(seq, n=1, epoch=e0, producer=None):
        p = pid if producer is None else producer
        return cli.produce(topic, 0, kw.record_batch(
            [b"v%d" % (seq + i) for i in range(n)], p, epoch, seq))

    obs.append(("seq0", send(0, 2)))
    obs.append(("seq2", send(2, 2)))
    obs.append(("retry_seq2", send(2, 2)))
    obs.append(("retry_seq0", send(0, 2)))
    obs.append(("gap_seq10", send(10)))
    obs.append(("seq4", send(4)))
    obs.append(("seq5_to_10", [send(s) for s in range(5, 11)]))
    obs.append(("retry_seq0_past_window", send(0, 2)))
    obs.append(("retry_seq10", send(10)))
    err, pid2, e1 = cli.init_producer_id(producer_id=pid, producer_epoch=e0)
    obs.append(("bump", (err, pid2 == pid, e1 - e0 if pid2 == pid else None)))
    # Then the old (id, epoch), and the new one at sequence 1 and 0.
    obs.append(("old_epoch", send(11)))
    obs.append(("new_epoch_seq1", send(1, epoch=e1, producer=pid2)))
    obs.append(("new_epoch_seq0", send(0, epoch=e1, producer=pid2)))
    obs.append(("unknown_pid_seq7", send(7, producer=pid + 5000)))
    obs.append(("list_offsets", cli.list_offset_iso(topic, 0, RU)))
    cli.close()
    return obs


class Txn:
    """One transactional producer (transaction version 1) over the raw
    protocol, on any partitions, keeping its sequences."""

    def __init__(self, cli, tid, timeout_ms=60000):
        self.cli, self.tid = cli, tid
        txn_ready(cli, tid)
        err, self.pid, self.epoch = init(cli, tid, timeout_ms=timeout_ms)
        assert err == 0, err
        self.e0 = self.epoch
        self.seq = {}
        self.added = set()

    def add(self, topic, part):
        got = retry(lambda: self.cli.add_partitions(
            self.tid, self.pid, self.epoch, {topic: [part]}, version=3)[
                (topic, part)])
        assert got == 0, got
        self.added.add((topic, part))

    def produce(self, topic, part, n=1, epoch=None):
        """(error, base offset)."""
        if (topic, part) not in self.added and epoch is None:
            self.add(topic, part)
        seq = self.seq.get((topic, part), 0)
        batch = kw.record_batch([b"%s-%d-%d" % (topic.encode(), part, seq + i)
                                 for i in range(n)], self.pid,
                                self.epoch if epoch is None else epoch, seq,
                                transactional=True)
        res = self.cli.produce(topic, part, batch, transactional_id=self.tid)
        if res[0] == 0:
            self.seq[(topic, part)] = seq + n
        return res

    def end(self, commit, wait=True):
        err = retry(lambda: self.cli.end_txn(self.tid, self.pid, self.epoch,
                                             commit, 3))
        if err == 0 and wait:
            until_state(self.cli, self.tid,
                        "CompleteCommit" if commit else "CompleteAbort")
        self.added.clear()
        return err


def retry(fn, timeout=30):
    deadline = time.monotonic() + timeout
    while True:
        res = fn()
        code = res[0] if isinstance(res, tuple) else res
        if code not in RETRIABLE or time.monotonic() > deadline:
            return res
        time.sleep(0.05)


def describe_txn(cli, tid, e0):
    """DescribeTransactions fields a client can compare (times and ids
    are the broker's own)."""
    d = cli.describe_transactions([tid])[tid]
    return {"error": d["error"], "state": d["state"],
            "timeout_ms": d["timeout_ms"],
            "epoch": d["producer_epoch"] - e0 if d["producer_epoch"] >= 0
            else d["producer_epoch"],
            "started": d["start_time_ms"] > 0,
            "topics": {t: sorted(ps) for t, ps in d["topics"].items()}}


def describe_producers(cli, topic, part, names):
    """DescribeProducers of one partition, producer ids named."""
    err, ps = cli.describe_producers(topic, [part])[part]
    return err, sorted(
        (names.get(s["producer_id"], "?"), s["producer_epoch"],
         s["last_sequence"], s["current_txn_start_offset"],
         s["last_timestamp"] > 0) for s in ps)


def cross_partition(port, bootstrap):
    """Two transactions over three partitions of two topics, interleaved:
    X commits, Y aborts."""
    create_topic(bootstrap, "xa", 2)
    create_topic(bootstrap, "xb")
    parts = [("xa", 0), ("xa", 1), ("xb", 0)]
    cli = kw.ReadClient(port)
    x, y = Txn(cli, "diff-x"), Txn(cli, "diff-y")
    names = {x.pid: "X", y.pid: "Y"}
    obs = [("offsets", [x.produce("xa", 0, 2), y.produce("xa", 0),
                        x.produce("xa", 1), y.produce("xb", 0),
                        x.produce("xb", 0, 3), y.produce("xa", 0, 2)])]

    def look(label):
        for t, p in parts:
            name = "%s.%s-%d" % (label, t, p)
            obs.append((name + ".list_offsets", (
                cli.list_offset_iso(t, p, RC), cli.list_offset_iso(t, p, RU))))
            for iso, iname in ((RC, "rc"), (RU, "ru")):
                d = cli.fetch_iso(t, p, 0, iso)
                obs.append(("%s.%s" % (name, iname), (
                    d["top_error"], d["error"], d["high_watermark"],
                    d["last_stable_offset"], offsets_of(d),
                    [(names.get(pid, pid), off) for pid, off in aborted(d)])))
            obs.append((name + ".producers",
                        describe_producers(cli, t, p, names)))

    look("open")
    obs.append(("open.describe_x", describe_txn(cli, x.tid, x.e0)))
    obs.append(("open.describe_y", describe_txn(cli, y.tid, y.e0)))
    err, unknown, lst = cli.list_transactions(states=["Ongoing"])
    obs.append(("open.list_ongoing", (err, unknown, sorted(
        (tid, names.get(pid), st) for tid, (pid, st) in lst.items()
        if tid in (x.tid, y.tid)))))
    obs.append(("end_x_commit", x.end(True)))
    obs.append(("end_y_abort", y.end(False)))
    look("ended")
    obs.append(("ended.describe_x", describe_txn(cli, x.tid, x.e0)))
    obs.append(("ended.describe_y", describe_txn(cli, y.tid, y.e0)))
    err, unknown, lst = cli.list_transactions()
    obs.append(("ended.list", (err, unknown, sorted(
        (tid, names.get(pid), st) for tid, (pid, st) in lst.items()
        if tid in (x.tid, y.tid)))))
    cli.close()
    return obs


def stale_requests(cli, t, topic, group, epoch):
    """What a producer at an old epoch gets for each request."""
    return [
        ("produce", t.produce(topic, 0, epoch=epoch)[0]),
        ("add_v1", cli.add_partitions(t.tid, t.pid, epoch, {topic: [0]},
                                      version=1)[(topic, 0)]),
        ("add_v3", cli.add_partitions(t.tid, t.pid, epoch, {topic: [0]},
                                      version=3)[(topic, 0)]),
        ("add_offsets", kw.add_offsets_to_txn(cli, t.tid, t.pid, epoch,
                                              group)),
        ("txn_offset_commit", kw.txn_offset_commit(
            cli, t.tid, group, t.pid, epoch, {(topic, 0): 7})),
        ("end_commit_v1", cli.end_txn(t.tid, t.pid, epoch, True, 1)),
        ("end_commit_v3", cli.end_txn(t.tid, t.pid, epoch, True, 3)),
        ("end_abort_v1", cli.end_txn(t.tid, t.pid, epoch, False, 1)),
        ("end_abort_v3", cli.end_txn(t.tid, t.pid, epoch, False, 3))]


def zombie_prepare(port, bootstrap, cairn=None):
    """A new instance's InitProducerId while the old one's transaction is
    PrepareCommit.  Cairn (cairn given) is held there by the fail point
    txn.after_prepare_sync=error (the markers wait for a restart) and its
    answers in that state are asserted on Cairn alone; Kafka cannot be
    held, so its first InitProducerId may come before or after the
    markers, and only what follows the completion is compared."""
    topic, group = "zp", "zp-group"
    create_topic(bootstrap, topic, 2)
    cli = kw.ReadClient(port)
    z = Txn(cli, "diff-zp")
    obs = [("produce", [z.produce(topic, 0, 2), z.produce(topic, 1)])]
    obs.append(("add_offsets", retry(lambda: kw.add_offsets_to_txn(
        cli, z.tid, z.pid, z.epoch, group))))
    obs.append(("txn_offset_commit", kw.txn_offset_commit(
        cli, z.tid, group, z.pid, z.epoch, {(topic, 0): 2})))
    obs.append(("end_commit", z.end(True, wait=False)))
    if cairn is not None:
        d = describe_txn(cli, z.tid, z.e0)
        assert d["state"] == "PrepareCommit", d
        # Kafka's answers in PrepareCommit (seen with requests pipelined
        # right behind the EndTxn): CONCURRENT_TRANSACTIONS to
        # InitProducerId, to EndTxn commit and abort, to
        # AddPartitionsToTxn.
        first = cli.init_producer_id(version=4, transactional_id=z.tid,
                                     txn_timeout_ms=60000)
        assert first[0] == kw.CONCURRENT_TRANSACTIONS, first
        held = (cli.end_txn(z.tid, z.pid, z.epoch, True, 3),
                cli.end_txn(z.tid, z.pid, z.epoch, False, 3),
                cli.add_partitions(z.tid, z.pid, z.epoch, {topic: [1]}, 3))
        assert held == (kw.CONCURRENT_TRANSACTIONS, kw.CONCURRENT_TRANSACTIONS,
                        {(topic, 1): kw.CONCURRENT_TRANSACTIONS}), held
        d = describe_txn(cli, z.tid, z.e0)
        assert d["state"] == "PrepareCommit" and d["epoch"] == 0, d
        assert cli.list_offset_iso(topic, 0, RC) == (0, 0)
        cli.close()
        cairn.failpoints = None
        cairn.restart()
        cli = z.cli = kw.ReadClient(port)
        txn_ready(cli, z.tid)
    first = cli.init_producer_id(version=4, transactional_id=z.tid,
                                 txn_timeout_ms=60000)
    obs.append(("new_first_answer", first[0] in (0, kw.CONCURRENT_TRANSACTIONS)))
    err, pid2, e2 = init(cli, z.tid) if first[0] else first
    obs.append(("new_instance", (err, pid2 == z.pid, e2 - z.e0)))
    obs.append(("describe", describe_txn(cli, z.tid, z.e0)))
    obs += [("stale_" + k, v) for k, v in
            stale_requests(cli, z, topic, group, z.e0)]
    for p in (0, 1):
        obs.append(("markers_%d" % p, [
            (k, e) for k, e in control_batches(cli, topic, z.e0, p)]))
        obs.append(("list_offsets_%d" % p, (cli.list_offset_iso(topic, p, RC),
                                           cli.list_offset_iso(topic, p, RU))))
    obs.append(("group_offset", cli.offset_fetch(group, {topic: [0, 1]},
                                                 require_stable=True)))
    cli.close()
    return obs


def timeout_abort(port, bootstrap):
    """Transaction version 1: the coordinator aborts a transaction that
    outlives its 1 s timeout; the old epoch's requests after that."""
    topic, group = "to", "to-group"
    create_topic(bootstrap, topic)
    cli = kw.ReadClient(port)
    t = Txn(cli, "diff-timeout", timeout_ms=1000)
    obs = [("produce", t.produce(topic, 0, 2))]
    obs.append(("state", until_state(cli, t.tid, "CompleteAbort")))
    obs.append(("describe", describe_txn(cli, t.tid, t.e0)))
    obs += [("stale_" + k, v) for k, v in
            stale_requests(cli, t, topic, group, t.e0)]
    obs.append(("markers", control_batches(cli, topic, t.e0)))
    obs.append(("list_offsets", (cli.list_offset_iso(topic, 0, RC),
                                 cli.list_offset_iso(topic, 0, RU))))
    d = cli.fetch_iso(topic, 0, 0, RC)
    obs.append(("aborted", [(pid == t.pid, off) for pid, off in aborted(d)]))
    err, pid2, e2 = init(cli, t.tid, timeout_ms=60000)
    obs.append(("new_instance", (err, pid2 == t.pid, e2 - t.e0)))
    obs.append(("describe_after_init", describe_txn(cli, t.tid, t.e0)))
    cli.close()
    return obs


def txn_error_paths(port, bootstrap):
    """The error answers of test_transactions.test_txn_error_codes and
    test_txn_offsets.test_txn_offset_errors_change_nothing that
    txn_errors does not cover."""
    topic, tid, group = "ep", "diff-ep", "ep-group"
    create_topic(bootstrap, topic, 2)
    cli = kw.ReadClient(port)
    txn_ready(cli, tid)
    obs = []
    for v in (1, 4):
        obs.append(("init_v%d_timeout_too_big" % v,
                    init(cli, tid, version=v, timeout_ms=900001)[0]))
    err, pid, e0 = init(cli, tid, timeout_ms=900000)
    obs.append(("init_max_timeout", (err, e0)))
    for v in (1, 3):
        obs.append(("add_v%d_with_unknown_topic" % v, cli.add_partitions(
            tid, pid, e0, [(topic, [0, 1]), ("nope", [0])], v)))
        obs.append(("add_v%d_unknown_partition" % v, cli.add_partitions(
            tid, pid, e0, {topic: [0, 9]}, v)))
        for c in (True, False):
            obs.append(("end_v%d_%s_nothing_added" % (v, c),
                        cli.end_txn(tid, pid, e0, c, v)))
        obs.append(("end_v%d_unknown_id" % v,
                    cli.end_txn("tx-never", pid, e0, True, v)))
    obs.append(("txn_offset_commit_no_txn", kw.txn_offset_commit(
        cli, tid, group, pid, e0, {(topic, 0): 5})))
    obs.append(("add_offsets_no_txn_newer_epoch",
                kw.add_offsets_to_txn(cli, tid, pid, e0 + 1, group)))
    obs.append(("add_offsets_unknown_id",
                kw.add_offsets_to_txn(cli, "tx-nobody", pid, e0, group)))
    obs.append(("txn_offset_commit_unknown_id", kw.txn_offset_commit(
        cli, "tx-nobody", group, pid, e0, {(topic, 0): 5})))
    obs.append(("describe_empty", describe_txn(cli, tid, e0)))
    obs.append(("add_1", cli.add_partitions(tid, pid, e0, {topic: [1]}, 3)))
    obs.append(("add_1_again_v1", cli.add_partitions(tid, pid, e0,
                                                     {topic: [1]}, 1)))
    obs.append(("txn_offset_commit_group_not_added", kw.txn_offset_commit(
        cli, tid, group, pid, e0, {(topic, 0): 5})))
    obs.append(("add_offsets_newer_epoch",
                kw.add_offsets_to_txn(cli, tid, pid, e0 + 1, group)))
    obs.append(("add_offsets", retry(lambda: kw.add_offsets_to_txn(
        cli, tid, pid, e0, group))))
    obs.append(("txn_offset_commit_unknown_topic", kw.txn_offset_commit(
        cli, tid, group, pid, e0, {(topic, 0): 5, ("nope", 0): 1})))
    obs.append(("txn_offset_commit_newer_epoch", kw.txn_offset_commit(
        cli, tid, group, pid, e0 + 1, {(topic, 0): 6})))
    obs.append(("txn_offset_commit_wrong_pid", kw.txn_offset_commit(
        cli, tid, group, pid + 1000, e0, {(topic, 0): 6})))
    obs.append(("offset_pending_stable", cli.offset_fetch(
        group, {topic: [0]}, require_stable=True)))
    obs.append(("offset_pending_plain", cli.offset_fetch(group,
                                                         {topic: [0]})))
    obs.append(("describe_ongoing", describe_txn(cli, tid, e0)))
    obs.append(("commit", retry(lambda: cli.end_txn(tid, pid, e0, True, 3))))
    obs.append(("state", until_state(cli, tid, "CompleteCommit")))
    obs.append(("commit_retry", retry(lambda: cli.end_txn(tid, pid, e0, True,
                                                          3))))
    obs.append(("abort_after_commit", cli.end_txn(tid, pid, e0, False, 3)))
    obs.append(("abort_after_commit_v1", cli.end_txn(tid, pid, e0, False,
                                                     1)))
    obs.append(("offset_committed", cli.offset_fetch(
        group, {topic: [0]}, require_stable=True)))
    obs.append(("markers_1", control_batches(cli, topic, e0, 1)))
    cli.close()
    return obs


def kip890_late(port, bootstrap):
    """KIP-890 part 1 (transaction.partition.verification.enable): the
    transactional batches of a transaction version 1 producer (Produce
    v8) for a partition it never added, before any transaction, and
    after its transaction finished, with the offsets unchanged."""
    topic = "late"
    create_topic(bootstrap, topic, 2)
    cli = kw.ReadClient(port)
    t = Txn(cli, "diff-late")
    ends = lambda: [cli.list_offset_iso(topic, p, RU)  # noqa: E731
                    for p in (0, 1)]
    obs = [("before_any_txn", t.produce(topic, 0, epoch=t.epoch)[0])]
    obs.append(("ends_0", ends()))
    obs.append(("in_txn", t.produce(topic, 0)))
    obs.append(("not_added_partition", t.produce(topic, 1,
                                                 epoch=t.epoch)[0]))
    obs.append(("newer_epoch", t.produce(topic, 0, epoch=t.epoch + 1)[0]))
    real = t.pid
    t.pid = real + 1000
    obs.append(("wrong_pid", t.produce(topic, 0, epoch=t.epoch)[0]))
    t.pid = real
    t.tid = "diff-nobody"
    obs.append(("unknown_tid", t.produce(topic, 0, epoch=t.epoch)[0]))
    t.tid = "diff-late"
    obs.append(("ends_1", ends()))
    obs.append(("describe", describe_txn(cli, t.tid, t.e0)))
    obs.append(("commit", t.end(True)))
    obs.append(("late_after_commit", t.produce(topic, 0, epoch=t.epoch)[0]))
    obs.append(("late_after_commit_1", t.produce(topic, 1,
                                                 epoch=t.epoch)[0]))
    obs.append(("ends_2", ends()))
    obs.append(("describe_after", describe_txn(cli, t.tid, t.e0)))
    obs.append(("producers", describe_producers(cli, topic, 0,
                                                {t.pid: "T"})))
    cli.close()
    return obs


def admin_error(fut, timeout=60):
    """The Kafka error code a confluent-kafka admin future ends with (0
    when it succeeds)."""
    from confluent_kafka import KafkaException
    try:
        fut.result(timeout)
        return 0
    except KafkaException as e:
        return e.args[0].code()


def topics_configs(port, bootstrap):
    """CreateTopics' error answers (also with validate_only) and
    DescribeConfigs of an unknown topic."""
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    obs = []

    def create(label, name, parts=1, rf=1, config=None, validate=False):
        fs = admin.create_topics([NewTopic(name, parts, rf,
                                           config=config or {})],
                                 validate_only=validate,
                                 operation_timeout=30)
        obs.append((label, admin_error(fs[name])))

    create("ok", "cfg-ok", 2, config={"retention.ms": "1234"})
    create("existing", "cfg-ok")
    create("existing_validate_only", "cfg-ok", validate=True)
    create("replication_factor_2", "cfg-rf", rf=2)
    create("partitions_0", "cfg-p0", parts=0)
    create("bad_value", "cfg-bv", config={"retention.ms": "soon"})
    create("bad_enum", "cfg-be", config={"cleanup.policy": "sometimes"})
    create("unknown_config", "cfg-uc", config={"no.such.config": "1"})
    create("name_space", "bad name")
    create("name_dot", ".")
    create("name_dotdot", "..")
    create("name_long", "n" * 250)
    create("name_slash", "a/b")
    create("validate_only_ok", "cfg-vo", 3, validate=True)
    create("validate_only_bad_rf", "cfg-vo", rf=3, validate=True)
    create("validate_only_bad_config", "cfg-vo",
           config={"retention.ms": "x"}, validate=True)
    md = admin.list_topics(timeout=30)
    obs.append(("listed", sorted(t for t in md.topics
                                 if t.startswith("cfg-") or "name" in t
                                 or t in (".", "..", "a/b"))))
    obs.append(("ok_partitions", len(md.topics["cfg-ok"].partitions)))
    fs = admin.describe_configs([ConfigResource("topic", "cfg-missing")])
    obs.append(("describe_unknown_topic", admin_error(next(iter(
        fs.values())))))
    fs = admin.describe_configs([ConfigResource("topic", "cfg-ok")])
    entries = next(iter(fs.values())).result(30)
    e = entries["retention.ms"]
    obs.append(("describe_set_value", (e.value, e.is_default, e.is_read_only,
                                       e.source)))
    return obs


def compacted_produce(port, bootstrap):
    """A compacted topic's refusal of keyless records (INVALID_RECORD,
    record_errors, the message, nothing appended), keyed records taken,
    and DescribeConfigs of the compaction and level keys."""
    from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic
    from test_compacted import raw_produce
    admin = AdminClient({"bootstrap.servers": bootstrap})
    obs = []
    for name, policy in (("cmpd", "compact"), ("cmpd2", "compact,delete")):
        obs.append(("create_" + policy, admin_error(admin.create_topics(
            [NewTopic(name, 1, 1, config={"cleanup.policy": policy,
                                          "compression.zstd.level": "7"})],
            operation_timeout=30)[name])))
        cli = kw.ReadClient(port)
        deadline = time.monotonic() + 60
        try:
            while (cli.list_offset_iso(name, 0, RU)[0] != 0
                   and time.monotonic() < deadline):
                time.sleep(0.1)
        finally:
            cli.close()
    batch = kw.record_batch([b"v0", b"v1", b"v2", b"v3", b"v4"],
                            keys=[b"k0", None, None, b"k3", None])
    obs.append(("keyless", raw_produce(_Addr(port), "cmpd", batch)))
    obs.append(("keyless_tombstone", raw_produce(
        _Addr(port), "cmpd2", kw.record_batch([None]))))
    obs.append(("keyed", raw_produce(_Addr(port), "cmpd", kw.record_batch(
        [b"x", None], keys=[b"k", b"k"]))[:3]))
    r = ConfigResource(ConfigResource.Type.TOPIC, "cmpd")
    ents = admin.describe_configs([r])[r].result(30)
    for k in ("compression.zstd.level", "compression.gzip.level",
              "compression.lz4.level", "min.cleanable.dirty.ratio",
              "min.compaction.lag.ms", "max.compaction.lag.ms",
              "delete.retention.ms"):
        obs.append(("describe_" + k, (ents[k].value, ents[k].source)))
    r = ConfigResource(ConfigResource.Type.BROKER, "1")
    ents = admin.describe_configs([r])[r].result(30)
    for k in ("log.cleaner.backoff.ms", "log.cleaner.enable",
              "log.cleaner.io.max.bytes.per.second",
              "log.cleaner.dedupe.buffer.size", "compression.gzip.level",
              "compression.lz4.level", "compression.zstd.level"):
        obs.append(("describe_broker_" + k, (ents[k].value, ents[k].source)))
    return obs


class _Addr:
    """What test_compacted.raw_produce needs of a broker: its port."""

    def __init__(self, port):
        self.port = port


def group_states(port, bootstrap):
    """Consumer group states through DescribeGroups and ListGroups: a
    member joins (Stable), leaves (Empty); a group with only committed
    offsets; DeleteGroups' errors."""
    from confluent_kafka.admin import AdminClient
    topic = "gs"
    create_topic(bootstrap, topic, 2)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    cli = kw.ReadClient(port)
    obs = []

    def describe(label, group):
        # librdkafka's list_groups(group): DescribeGroups of that group.
        gs = admin.list_groups(group, timeout=30)
        obs.append((label, [(g.id, g.error.code() if g.error else 0,
                             g.state, g.protocol_type, g.protocol,
                             len(g.members)) for g in gs]))

    def listed(label):
        # ListGroups, then DescribeGroups of each.
        gs = admin.list_groups(timeout=30)
        obs.append((label, sorted((g.id, g.state, g.protocol_type)
                                  for g in gs if g.id.startswith("gs-"))))

    def group_ready(group):
        deadline = time.monotonic() + 30
        while cli.find_coordinator(group, key_type=0)[0]["error"]:
            assert time.monotonic() < deadline
            time.sleep(0.1)

    group_ready("gs-live")
    group_ready("gs-offsets")
    j = cli.join_group("gs-live", topics=(topic,))
    obs.append(("join_first", j["error"]))
    j = cli.join_group("gs-live", member_id=j["member_id"], topics=(topic,))
    obs.append(("join", (j["error"], j["generation"], j["protocol"],
                         j["leader"] == j["member_id"], len(j["members"]))))
    mid, gen = j["member_id"], j["generation"]
    describe("joined_before_sync", "gs-live")
    err, _ = cli.sync_group("gs-live", gen, mid, [
        (mid, kw.consumer_assignment({topic: [0, 1]}))])
    obs.append(("sync", err))
    describe("stable", "gs-live")
    obs.append(("commit_member", cli.offset_commit(
        "gs-live", {(topic, 0): 3}, generation=gen, member_id=mid)))
    obs.append(("commit_offsets_only", cli.offset_commit(
        "gs-offsets", {(topic, 1): 5})))
    describe("offsets_only", "gs-offsets")
    listed("list_stable")
    obs.append(("delete_live", cli.delete_groups(["gs-live"])))
    obs.append(("delete_unknown", cli.delete_groups(["gs-never"])))
    obs.append(("leave", cli.leave_group("gs-live", [(mid, None)])))
    describe("after_leave", "gs-live")
    listed("list_after_leave")
    describe("unknown", "gs-never")
    obs.append(("delete_empty", cli.delete_groups(["gs-live",
                                                   "gs-offsets"])))
    describe("deleted", "gs-live")
    listed("list_after_delete")
    obs.append(("offsets_after_delete", cli.offset_fetch(
        "gs-offsets", {topic: [1]})))
    cli.close()
    return obs


def compare(scenario, cairn_obs, kafka_obs):
    known = known_differences()
    assert [k for k, _ in cairn_obs] == [k for k, _ in kafka_obs]
    unexpected, stale = [], []
    for (key, cv), (_, kv) in zip(cairn_obs, kafka_obs):
        name = "%s/%s" % (scenario, key)
        if cv != kv and name not in known:
            unexpected.append("%s: cairn %r, kafka %r" % (name, cv, kv))
        if cv == kv and name in known:
            stale.append(name)
    assert not unexpected, "Cairn differs from Kafka:\n" + "\n".join(unexpected)
    assert not stale, ("listed in %s but no longer different: %s"
                       % (DIFFERENCES.name, stale))


SCENARIOS = ["worked_example", "txn_errors", "idempotence", "tv2_epochs",
             "cross_partition", "zombie_prepare", "timeout_abort",
             "txn_error_paths", "kip890_late", "topics_configs",
             "group_states", "compacted_produce"]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_scenario(broker_factory, kafka, scenario):
    spec = CAIRN_SETS.get(scenario, {})
    fn = globals()[scenario]
    cairn = broker_factory(**spec.get("sets", {}))
    extra = {}
    if spec.get("failpoints"):
        # CAIRN_FAILPOINTS is read at start.
        cairn.stop()
        cairn.failpoints = spec["failpoints"]
        cairn.start()
    if spec.get("broker"):
        extra = {"cairn": cairn}
    got = fn(cairn.port, cairn.bootstrap, **extra)
    if spec.get("broker"):
        extra = {"cairn": None}
    compare(scenario, got, fn(kafka.port, kafka.bootstrap, **extra))


def test_groups_cli(broker_factory, kafka):
    cairn = broker_factory(**{"group.initial.rebalance.delay.ms": "0"})
    compare("groups_cli",
            cli_scenario(cairn.bootstrap, lambda name, n:
                         cairn.create_topic(name, partitions=n)),
            cli_scenario(kafka.bootstrap, lambda name, n:
                         create_topic(kafka.bootstrap, name, n)))
