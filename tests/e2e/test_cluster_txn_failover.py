"""Exactly-once across three brokers when brokers fail (issue #15).

- The transaction coordinator's broker crashes at each fail point of
  ending a transaction (txn.after_prepare_sync: decision durable, no
  marker; txn.after_some_markers: one of three markers sent;
  txn.after_markers_before_complete: every marker, no Complete record),
  for a commit, an abort and a timeout abort (the coordinator's own
  abort of a transaction past transaction.timeout.ms).  Another broker
  takes the __transaction_state partition over and finishes the
  transaction: read_committed sees it whole or not at all, and the same
  producer (or a new one with the same transactional.id) goes on.
  The fail point is armed on node 1 only, and the transactional id is
  picked so that node 1 leads its __transaction_state partition.
- A partition leader dies while its marker is in flight: the marker
  reaches the new leader and the last stable offset moves.
- A deposed coordinator (SIGSTOP past the broker session timeout, then
  SIGCONT) gets no stale marker or state write accepted and says in its
  log that it stopped coordinating.
- Read-process-write (rpw_app.py) on the cluster while a random broker
  is killed (-9) and restarted every few seconds: the output holds each
  input exactly once, the group's offsets end at the input's end.

Data topics are placed by hand (partition p led by node p + 1, RF 3,
min.insync.replicas 2).  Every broker is killed by pid at teardown
(cluster_factory); every wait is bounded and waits for a condition.
About 180 s on two cores (release build): a cluster per fail point and
outcome (8-20 s each; the timeout abort at two of the three fail points
only under make soak), the read-process-write run about 30 s, the
leader kill 35 s (of which 30 s is the marker channel waiting out a
request to the dead leader: 5 s once it does not).
"""

import os
import random
import signal
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, \
    TopicPartition
from confluent_kafka.admin import AdminClient

import kafka_wire as kw
from conftest import SANITIZED, SLOW, TXN_STATE_TOPIC, expect_exit, find_coordinator, \
    needs_cairn, partition_leaders, txn_id_coordinated_by, \
    txn_partition_for, wait_txn_state_led, wait_until
from test_cluster_txn import PARTS, create_spread, lso, marker_kinds, \
    read_committed
from test_eos_rpw import App, read_all_committed

pytestmark = [needs_cairn]

SOAK = bool(os.environ.get("CAIRN_SOAK"))
REGISTER_S = 30 * SLOW
T = 45 * SLOW                 # a client call's timeout, seconds
FAILOVER_S = 40 * SLOW        # a coordinator or a leader moves within this
COMMIT, ABORT = kw.CONTROL_COMMIT, kw.CONTROL_ABORT
TXN_TIMEOUT_MS = 3000
SETS = {"group.initial.rebalance.delay.ms": "0",
        "replica.lag.time.max.ms": "3000",
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": "300"}
FAIL_POINTS = ["txn.after_prepare_sync", "txn.after_some_markers",
               "txn.after_markers_before_complete"]


def coordinator_everywhere(c, tid, nodes=None):
    """The node every serving node names as tid's coordinator, or None
    while they disagree or answer an error."""
    seen = {}
    for b in (nodes or c.live()):
        seen[b.node_id] = find_coordinator(b.port, tid)
    nodes_named = {node for err, node in seen.values() if not err}
    if len(nodes_named) != 1 or any(err for err, _ in seen.values()):
        # wait_until shows the last one: {asked node: (error, node)}.
        raise ValueError("FindCoordinator(%s) answers %r" % (tid, seen))
    return nodes_named.pop()


def producer(c, tid, nodes=None, **extra):
    conf = {"bootstrap.servers": ",".join(
        b.bootstrap for b in (nodes or c.nodes)),
        "transactional.id": tid, "linger.ms": 5,
        "socket.timeout.ms": 5000 * SLOW}
    conf.update(extra)
    # librdkafka insists on socket.timeout.ms <= transaction.timeout.ms
    # + 100.
    conf["socket.timeout.ms"] = min(conf["socket.timeout.ms"], conf.get(
        "transaction.timeout.ms", 60000))
    return Producer(conf)


def send(p, topic, tag, per=2):
    """per records on every partition, flushed; returns {part: values}."""
    out = {q: [] for q in range(PARTS)}
    errors = []

    def cb(err, msg):
        if err is not None:
            errors.append("%s-%d: %s" % (msg.topic(), msg.partition(), err))
    for i in range(per * PARTS):
        v = b"%s-%d" % (tag, i)
        p.produce(topic, value=v, partition=i % PARTS, on_delivery=cb)
        out[i % PARTS].append(v)
    assert p.flush(T) == 0, "records of %r not delivered" % tag
    assert not errors, "delivery of %r failed: %s" % (tag, errors[:3])
    return out


def pid_markers(c, topic, part, pid):
    """The control types of the partition's markers of producer pid."""
    cli = kw.TxnClient(c.node(partition_leaders(
        c.live()[0].port, topic)[part]).port, timeout=5)
    try:
        batches = cli.fetch_full(topic, part)
    finally:
        cli.close()
    return [b["control"][0] for b in batches
            if b["attributes"] & kw.ATTR_CONTROL and b["control"]
            and b["producer_id"] == pid]


def describe_txn(c, tid, nodes=None):
    """DescribeTransactions of tid asked of its coordinator (as the
    serving nodes agree): the dict of parse_describe_transactions."""
    node = coordinator_everywhere(c, tid, nodes)
    if node is None:
        raise ValueError("no agreed coordinator for %s" % tid)
    cli = kw.TxnClient(c.node(node).port, timeout=5)
    try:
        d = cli.describe_transactions([tid])[tid]
    finally:
        cli.close()
    if d["error"]:
        raise ValueError("DescribeTransactions error %d" % d["error"])
    return d


def all_settled(c, topic):
    return all((lambda s: s[0] == s[1])(lso(c, topic, q))
               for q in range(PARTS))


def continue_after(c, p, tid, topic, tag, failed):
    """A committed transaction by p, or when p is fenced or in a fatal
    state, by a new producer with the same transactional.id after
    init_transactions: the producer goes on."""
    if failed:
        try:
            p.abort_transaction(T)
        except KafkaException as e:
            if not e.args[0].fatal():
                raise
            p = producer(c, tid)
            p.init_transactions(T)
    try:
        p.begin_transaction()
        sent = send(p, topic, tag)
        p.commit_transaction(T)
    except KafkaException as e:
        if not e.args[0].fatal():
            raise
        p = producer(c, tid)
        p.init_transactions(T)
        p.begin_transaction()
        sent = send(p, topic, tag)
        p.commit_transaction(T)
    return sent


SOAK_ONLY = pytest.mark.skipif(
    not SOAK, reason="make soak (CAIRN_SOAK=1): the timeout abort runs at "
    "txn.after_some_markers only under make test, for time")
# Under the sanitizers one case per outcome is enough to look for memory
# errors on the takeover paths; the release run covers every fail point.
SANITIZED_SKIP = pytest.mark.skipif(
    SANITIZED and not SOAK, reason="sanitized run: txn.after_some_markers "
    "only, for time")
CASES = [pytest.param(fp, outcome, marks=(
            [SOAK_ONLY] if outcome == "timeout"
            and fp != "txn.after_some_markers" else []) +
         ([SANITIZED_SKIP] if fp != "txn.after_some_markers" else []))
         for fp in FAIL_POINTS for outcome in ("commit", "abort", "timeout")]


@pytest.mark.parametrize("fail_point,outcome", CASES)
def test_coordinator_crash_at_fail_point(cluster_factory, fail_point,
                                         outcome):
    c = cluster_factory(3, failpoints={1: fail_point + "=crash"}, **SETS)
    c.wait_registered([1, 2, 3], REGISTER_S)
    topic = "xf"
    create_spread(c, topic)
    led = wait_txn_state_led(c, REGISTER_S)
    tid = txn_id_coordinated_by(led, 1, "xf-" + outcome)
    part = txn_partition_for(tid)
    wait_until("every node names node 1 the coordinator of %s" % tid,
               lambda: coordinator_everywhere(c, tid) == 1, REGISTER_S)

    extra = {"transaction.timeout.ms": TXN_TIMEOUT_MS} \
        if outcome == "timeout" else {}
    p = producer(c, tid, **extra)
    p.init_transactions(T)
    p.begin_transaction()
    sent = send(p, topic, b"victim")
    pid = describe_txn(c, tid)["producer_id"]
    failed = False
    if outcome == "commit":
        p.commit_transaction(T)
    elif outcome == "abort":
        p.abort_transaction(T)
    # A timeout: the coordinator aborts on its own past 3 s and crashes
    # at the fail point doing it.
    expect_exit(c, 1, "%s armed, the transaction %s" % (fail_point, outcome),
                FAILOVER_S if outcome == "timeout" else 15 * SLOW)
    survivors = [c.node(2), c.node(3)]
    new = wait_until("nodes 2 and 3 agree on a new coordinator of %s "
                     "(__transaction_state-%d)" % (tid, part),
                     lambda: (lambda n: n if n in (2, 3) else None)(
                         coordinator_everywhere(c, tid, survivors)),
                     FAILOVER_S)
    want = COMMIT if outcome == "commit" else ABORT
    wait_until("node %d completed the transaction: %s marker on every "
               "partition" % (new, "COMMIT" if want == COMMIT else "ABORT"),
               lambda: all(want in pid_markers(c, topic, q, pid)
                           for q in range(PARTS)), FAILOVER_S)
    wait_until("node %d's DescribeTransactions says Complete*" % new,
               lambda: describe_txn(c, tid, survivors)["state"].startswith(
                   "Complete"), FAILOVER_S)
    wait_until("LSO = high watermark on every partition", lambda:
               all_settled(c, topic), FAILOVER_S)
    for q in range(PARTS):
        kinds = set(pid_markers(c, topic, q, pid))
        assert kinds == {want}, "partition %d has markers %r of pid %d" \
            % (q, kinds, pid)
    got = read_committed(c.bootstrap, topic, PARTS,
                         2 * PARTS if outcome == "commit" else 0)
    if outcome == "commit":
        assert got == sent, "read_committed %r, committed %r" % (got, sent)
    else:
        assert got == {q: [] for q in range(PARTS)}, \
            "aborted records visible: %r" % got

    if outcome == "timeout":
        failed = True
    after = continue_after(c, p, tid, topic, b"after", failed)
    wait_until("LSO = high watermark after the next transaction",
               lambda: all_settled(c, topic), FAILOVER_S)
    got = read_committed(c.bootstrap, topic, PARTS, 4 * PARTS if outcome ==
                         "commit" else 2 * PARTS)
    for q in range(PARTS):
        want_q = (sent[q] if outcome == "commit" else []) + after[q]
        assert got[q] == want_q, "partition %d read committed %r, want " \
            "%r" % (q, got[q], want_q)

    if outcome != "commit":
        return
    # The old coordinator back (unarmed) finishes nothing a second time
    # (once per fail point: a restart costs seconds).
    c.node(1).failpoints = None
    c.node(1).start()
    c.wait_registered([1, 2, 3], REGISTER_S)
    wait_until("node 1 sees the same coordinator of %s" % tid,
               lambda: coordinator_everywhere(c, tid) == new, REGISTER_S)
    got2 = read_committed(c.bootstrap, topic, PARTS,
                          sum(len(v) for v in got.values()))
    assert got2 == got, "after node 1's restart: %r, before %r" % (got2, got)
    for q in range(PARTS):
        assert set(pid_markers(c, topic, q, pid)) <= {want, COMMIT}


def test_leader_killed_with_marker_in_flight(cluster_factory):
    """Node 3 leads xf-2.  It is paused before the commit, so the marker
    for xf-2 cannot land; once the coordinator (node 1) has decided and
    the markers of xf-0 and xf-1 are written, node 3 is killed: xf-2's
    new leader gets the marker and its LSO moves.  A replica lag time
    well below the session timeout lets the paused node leave the ISRs
    (so the decision and the other markers are durable) while it still
    leads xf-2, so the marker is sent to it."""
    c = cluster_factory(3, **dict(SETS, **{
        "replica.lag.time.max.ms": str(1500 * SLOW)}))
    c.wait_registered([1, 2, 3], REGISTER_S)
    topic = "xf"
    create_spread(c, topic)
    led = wait_txn_state_led(c, REGISTER_S)
    tid = txn_id_coordinated_by(led, 1, "xl")
    wait_until("every node names node 1 the coordinator of %s" % tid,
               lambda: coordinator_everywhere(c, tid) == 1, REGISTER_S)
    p = producer(c, tid)
    p.init_transactions(T)
    p.begin_transaction()
    sent = send(p, topic, b"inflight")
    pid = describe_txn(c, tid)["producer_id"]
    before = lso(c, topic, 2)

    c.node(3).proc.send_signal(signal.SIGSTOP)
    done = {}

    def commit():
        try:
            p.commit_transaction(T)
            done["ok"] = True
        except KafkaException as e:
            done["err"] = e
    th = threading.Thread(target=commit)
    th.start()
    try:
        first = [c.node(1), c.node(2)]
        wait_until("the commit decided (PrepareCommit or later) and the "
                   "markers of xf-0 and xf-1 written", lambda: describe_txn(
                       c, tid, first)["state"] in (
                       "PrepareCommit", "CompleteCommit") and all(
                       COMMIT in pid_markers_at(c, topic, q, pid, q + 1)
                       for q in (0, 1)), FAILOVER_S)
        print("xf-2's leader as node 1 sees it at the kill: %r" % (
            partition_leaders(c.node(1).port, topic)[2],))
    finally:
        c.kill9(3)
    t_kill = time.monotonic()
    th.join(T + 10)
    assert not th.is_alive(), "commit_transaction did not return"
    print("commit_transaction returned %.1fs after the kill"
          % (time.monotonic() - t_kill))
    assert done.get("ok"), "commit_transaction failed: %r" % done.get("err")
    wait_until("xf-2 led by a live node", lambda: partition_leaders(
        c.node(1).port, topic)[2] in (1, 2), FAILOVER_S)
    wait_until("the COMMIT marker on xf-2's new leader", lambda:
               COMMIT in pid_markers(c, topic, 2, pid), FAILOVER_S)
    wait_until("xf-2's LSO past the transaction (before: %r)" % (before,),
               lambda: (lambda s: s[0] == s[1] and s[0] > before[1])(
                   lso(c, topic, 2)), FAILOVER_S)
    print("xf-2's LSO moved %.1fs after the kill"
          % (time.monotonic() - t_kill))
    got = read_committed(",".join(b.bootstrap for b in c.live()), topic,
                         PARTS, 2 * PARTS)
    assert got == sent, "read_committed %r, committed %r" % (got, sent)


def pid_markers_at(c, topic, part, pid, node_id):
    """pid_markers read from node_id (the partition's leader)."""
    cli = kw.TxnClient(c.node(node_id).port, timeout=5)
    try:
        batches = cli.fetch_full(topic, part)
    finally:
        cli.close()
    return [b["control"][0] for b in batches
            if b["attributes"] & kw.ATTR_CONTROL and b["control"]
            and b["producer_id"] == pid]


def test_deposed_coordinator_gets_nothing_stale_in(cluster_factory):
    """Node 1 coordinates tid with a transaction open (3 s timeout) when
    it is paused past the session timeout; node 2 or 3 takes its
    __transaction_state partitions, a new producer with the same id
    fences the old one (its transaction aborted) and commits.  Node 1
    resumed with the open transaction long timed out in its memory: no
    marker or state record of its own may land, and it says it no longer
    coordinates."""
    c = cluster_factory(3, **SETS)
    c.wait_registered([1, 2, 3], REGISTER_S)
    topic = "xd"
    create_spread(c, topic)
    led = wait_txn_state_led(c, REGISTER_S)
    tid = txn_id_coordinated_by(led, 1, "xd")
    part = txn_partition_for(tid)
    wait_until("every node names node 1 the coordinator of %s" % tid,
               lambda: coordinator_everywhere(c, tid) == 1, REGISTER_S)
    p1 = producer(c, tid, **{"transaction.timeout.ms": TXN_TIMEOUT_MS,
                             "message.timeout.ms": TXN_TIMEOUT_MS})
    p1.init_transactions(T)
    p1.begin_transaction()
    send(p1, topic, b"zombie")
    old = describe_txn(c, tid)
    assert old["state"] == "Ongoing", old

    b1 = c.node(1)
    b1.proc.send_signal(signal.SIGSTOP)
    c.paused = {1}
    survivors = [c.node(2), c.node(3)]
    try:
        new = wait_until("nodes 2 and 3 agree on a new coordinator of %s"
                         % tid, lambda: (lambda n: n if n in (2, 3)
                                         else None)(
                             coordinator_everywhere(c, tid, survivors)),
                         FAILOVER_S)
        p2 = producer(c, tid, nodes=survivors)
        p2.init_transactions(T)
        p2.begin_transaction()
        sent = send(p2, topic, b"fresh")
        p2.commit_transaction(T)
        wait_until("node %d completed the commit" % new, lambda:
                   describe_txn(c, tid, survivors)["state"] ==
                   "CompleteCommit", FAILOVER_S)
    finally:
        b1.proc.send_signal(signal.SIGCONT)
        c.paused = set()
    log = Path(b1.log_path)
    line = "%s-%d: no longer its transaction coordinator" % (
        TXN_STATE_TOPIC, part)
    wait_until("node 1's log: %r" % line,
               lambda: line in log.read_text(errors="replace"), FAILOVER_S)
    c.wait_registered([1, 2, 3], REGISTER_S)
    wait_until("all three nodes name node %d the coordinator" % new,
               lambda: coordinator_everywhere(c, tid) == new, REGISTER_S)
    d = describe_txn(c, tid)
    assert d["state"] == "CompleteCommit" and \
        d["producer_id"] == old["producer_id"] and \
        d["producer_epoch"] > old["producer_epoch"], (old, d)
    wait_until("LSO = high watermark everywhere", lambda:
               all_settled(c, topic), FAILOVER_S)
    for q in range(PARTS):
        kinds = marker_kinds(c, topic, q)
        assert kinds == [ABORT, COMMIT], \
            "partition %d: markers %r (want the zombie's ABORT, then the " \
            "COMMIT)" % (q, kinds)
    got = read_committed(c.bootstrap, topic, PARTS, 2 * PARTS)
    assert got == sent, "read_committed %r, committed %r" % (got, sent)
    # Still so after node 1 has been back a while: its stale timers had
    # their chance (it logged the hand-over above).
    p3 = producer(c, tid)
    p3.init_transactions(T)
    p3.begin_transaction()
    sent3 = send(p3, topic, b"third")
    p3.commit_transaction(T)
    got = read_committed(c.bootstrap, topic, PARTS, 4 * PARTS)
    assert got == {q: sent[q] + sent3[q] for q in range(PARTS)}, got
    for q in range(PARTS):
        assert marker_kinds(c, topic, q) == [ABORT, COMMIT, COMMIT], q


def full_isr_everywhere(c, topics):
    """Every partition of topics (and __transaction_state, and
    __consumer_offsets when present) led, with its whole replica set in
    sync, as a live node answers."""
    b = c.live()[0]
    md = AdminClient({"bootstrap.servers": b.bootstrap}).list_topics(
        timeout=5)
    for name in list(topics) + [TXN_STATE_TOPIC, "__consumer_offsets"]:
        t = md.topics.get(name)
        if t is None:
            if name in topics:
                return False
            continue
        if t.error is not None:
            return False
        for p in t.partitions.values():
            if p.leader < 0 or len(p.isrs) != len(p.replicas):
                return False
    return True


@pytest.mark.skipif(SANITIZED and not SOAK,
                    reason="kill -9 chaos: release builds or make soak")
def test_read_process_write_with_broker_kills(cluster_factory, tmp_path):
    """rpw_app.py on the cluster; every few seconds a random node is
    killed -9 and started again once every partition is back in sync
    (the next kill never takes the last in-sync replica)."""
    t_start = time.monotonic()
    c = cluster_factory(3, **SETS)
    c.wait_registered([1, 2, 3], REGISTER_S)
    n = 3000 if SOAK else 1200
    src, dst, group, tid = "rpw-in", "rpw-out", "grp-rpw", "tx-rpw"
    create_spread(c, src)
    create_spread(c, dst)
    inputs = {q: [] for q in range(PARTS)}
    prod = Producer({"bootstrap.servers": c.bootstrap, "acks": "all",
                     "enable.idempotence": True, "linger.ms": 5})
    for i in range(n):
        v = b"in-%05d" % i
        inputs[i % PARTS].append(v)
        prod.produce(src, value=v, partition=i % PARTS)
    assert prod.flush(T) == 0
    ends = {q: len(vs) for q, vs in inputs.items()}

    seed = int(os.environ.get("CAIRN_RPW_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    print("seed %d (CAIRN_RPW_SEED)" % seed)
    app = App([c.bootstrap, src, dst, group, tid, "--batch", "20",
               "--sleep", "0.3", "--max-seconds", str(240 * SLOW)],
              tmp_path)
    checker = Consumer({"bootstrap.servers": c.bootstrap,
                        "group.id": group, "enable.auto.commit": False,
                        "isolation.level": "read_uncommitted"})

    def progress():
        try:
            got = checker.committed([TopicPartition(src, q)
                                     for q in range(PARTS)], timeout=5)
        except KafkaException:
            return None
        return {tp.partition: tp.offset for tp in got}

    budget = (400 if SOAK else 150) * SLOW
    kills = []
    now = None
    try:
        app.start()
        wait_until("the app's first commit",
                   lambda: "committed " in app.log(), 60 * SLOW)
        while time.monotonic() < t_start + budget:
            app.ensure_running()
            now = progress()
            if now == ends:
                break
            if len(kills) < (12 if SOAK else 4):
                time.sleep(rng.uniform(1.0, 3.0))
                victim = rng.choice([1, 2, 3])
                kills.append((round(time.monotonic() - t_start, 1), victim,
                              now))
                print("%.1fs: kill -9 node %d, progress %s" % kills[-1])
                c.kill9(victim)
                time.sleep(rng.uniform(0.5, 2.0))
                c.node(victim).start()
                c.wait_registered([1, 2, 3], REGISTER_S)
                wait_until("every partition in sync again after node %d's "
                           "restart" % victim, lambda: full_isr_everywhere(
                               c, [src, dst]), FAILOVER_S)
            else:
                time.sleep(0.3)
        assert now == ends, "committed offsets %s, input ends %s after " \
            "kills %r\n%s" % (now, ends, kills, app.tails())
    finally:
        app.kill_all()
        checker.close()
    print("%d app runs, kills %r, done after %.1fs"
          % (len(app.runs), kills, time.monotonic() - t_start))
    assert len(kills) >= 3, "only %d kills before the input was done: %r" \
        % (len(kills), kills)

    out = read_all_committed(c.bootstrap, dst, PARTS, n, 30 * SLOW)
    want = Counter(b"out-" + v for vs in inputs.values() for v in vs)
    got = Counter(v for vs in out.values() for v in vs)
    dups = sorted(v for v, k in got.items() if k > 1)
    missing = sorted(v for v in want if v not in got)
    extra = sorted(v for v in got if v not in want)
    assert not dups and not missing and not extra, \
        "%d duplicated (%r...), %d missing (%r...), %d unexpected\n%s" % (
            len(dups), dups[:5], len(missing), missing[:5], len(extra),
            app.tails())
    for q in range(PARTS):
        assert out[q] == [b"out-" + v for v in inputs[q]], q
    c2 = Consumer({"bootstrap.servers": c.bootstrap, "group.id": group,
                   "enable.auto.commit": False,
                   "isolation.level": "read_committed"})
    try:
        fin = c2.committed([TopicPartition(src, q) for q in range(PARTS)],
                           timeout=T)
    finally:
        c2.close()
    assert {tp.partition: tp.offset for tp in fin} == ends
