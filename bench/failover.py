#!/usr/bin/python3
"""Transaction coordinator failover (issue #17): kill -9 of the broker that
coordinates a transactional producer, to that producer's next successful
commit, Cairn and Apache Kafka 4.4.0, three brokers each on loopback.

  /usr/bin/python3 bench/failover.py [--reps 5] [--build-dir build]
          [--cairn build/cairn] [--dir bench/out]
          [--json bench/out/failover.json] [--interval-ms 100]
          [--steady 2] [--after 1] [--keep]

Both clusters run side by side for the whole run: Cairn as bench/cluster.py
starts it (three processes, each process.roles=broker,controller, ports
outside the ephemeral range), Kafka as bench/peers.KafkaBroker(nodes=3)
starts it (tests/e2e/kafka_ref.RefKafka, combined nodes, Kafka's JVM
defaults; its ports are moved out of the ephemeral range here too, so a
killed node's port is still free when it comes back).  On each a topic of
6 partitions, replication factor 3, min.insync.replicas 2.

One repetition (an arm run of bench/method.py; the arms alternate,
Cairn, Kafka, Cairn, ...):
  1. a transactional.id is picked whose __transaction_state partition is
     led by a broker that is not the active controller (DescribeQuorum),
     alternating between the two others; so the kill moves the
     coordinator and the partitions that broker leads, but never needs a
     raft election on top (FindCoordinator confirms the pick; when it
     names another broker, that one is killed and the sample says so);
  2. a producer (confluent-kafka-python / librdkafka 2.16, out-of-the-box
     settings but bootstrap.servers and transactional.id, a child
     process: build/venv/bin/python this file --client) commits a
     transaction of 6 records, one per partition, pausing --interval-ms
     (100 ms) after each commit, printing a line per commit, per error,
     per abort and per re-created producer, each with its
     CLOCK_MONOTONIC time (the parent's clock too).  commit_transaction()
     is called without a timeout, as a user's code would (it blocks until
     the commit is done); --commit-timeout T calls it with T and again
     after each timeout, which is not the same: with T = 10 s both
     brokers' failovers measured ~20 s, the commit finishing only after
     the second retry (librdkafka);
  3. once commits have flowed for --steady seconds without an error, the
     harness waits for the next commit and kills the coordinator's broker
     with SIGKILL right after it: the kill lands between two
     transactions, so the first commit after it is of a transaction
     begun after it (the sample checks this);
  4. failover_s = time from the SIGKILL to the first commit that
     succeeds after it; also how many errors, aborted transactions and
     re-created producers (a fatal error: the child makes a new producer
     with the same transactional.id and calls init_transactions again, and
     failover_s includes that), when the client saw its first error; and,
     polled every 50 ms meanwhile, the brokers' part: when every
     surviving broker names a live coordinator for the id
     (coordinator_moved_s) and leads every partition of the topic with a
     live broker (leaders_moved_s).  The rest of failover_s is the
     client's: librdkafka asks FindCoordinator again only when a
     reconnect to the dead coordinator fails, and its reconnect backoff
     doubles up to reconnect.backoff.max.ms (10 s), so it may learn of
     the new coordinator seconds late; then it re-queries the dead
     broker's partition leaders about once a second (seen in its debug
     log: --client-debug eos,topic,broker --keep);
  5. --after seconds more of commits, then the child stops and reads the
     topic read_committed: every transaction it saw acknowledged must be
     there whole (lost_txns, partial_txns, duplicates);
  6. the killed broker is restarted, and the rep ends when the cluster is
     whole again: all three brokers unfenced in DescribeCluster on every
     node, and every partition of the topic and of __transaction_state
     with its full replica set in the ISR (restart_whole_s).

What governs the time (all at their defaults in both; printed with the
results):
  Cairn  broker.session.timeout.ms 9000 (the controller fences the dead
         broker after a missed session; broker.heartbeat.interval.ms
         2000), then the controller's leader election for its partitions
         (its __transaction_state partition among them) and the new
         leader loading the transaction state; the client's FindCoordinator
         retries meanwhile.  controller.quorum.election.timeout.ms 1000
         matters only when the controller dies, which step 1 avoids.
  Kafka  the same mechanism and numbers: broker.session.timeout.ms 9000
         (controller fencing), broker.heartbeat.interval.ms 2000, leader
         election by the controller, the new coordinator loading its
         __transaction_state partition.  RefKafka's only non-default
         timing is transaction.abort.timed.out.transaction.cleanup.
         interval.ms 200 (the timed-out-transaction sweep, not used here).
  client librdkafka's defaults: transaction.timeout.ms 60000,
         socket.timeout.ms 60000, retry.backoff.ms 100 (up to 1000),
         reconnect.backoff.ms 100 (up to 10000).

run_for_report(build, cairn, workdir, opts, progress) -> fig is the part
for bench/run.py: figure key "coord_failover", kind "latency", samples per
arm ("cairn", "kafka"), stats and ratios of failover_s and friends
(bench/method.py), and summary_lines(figs) the sentence for the report's
summary (lower is better).
"""

import argparse
import json
import os
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "e2e"))
sys.path.insert(0, str(REPO / "bench"))

PARTITIONS = 6
RF = 3
MIN_ISR = 2
TXN_STATE = "__transaction_state"
TXN_STATE_PARTITIONS = 50        # the default of both brokers
INTERVAL_MS = 100
STEADY_S = 2.0
AFTER_S = 1.0
FAILOVER_TIMEOUT = 180.0         # s from the kill to a commit
PROBE_S = 0.05                   # the brokers' view, polled meanwhile
WHOLE_TIMEOUT = 180.0            # s from the restart to a whole cluster
METRICS = ["failover_s", "coordinator_moved_s", "leaders_moved_s",
           "first_error_s", "errors", "aborted_txns", "recreated",
           "lost_txns", "restart_whole_s"]
SETTINGS = {
    "cairn": {"broker.session.timeout.ms": 9000,
              "broker.heartbeat.interval.ms": 2000,
              "controller.quorum.election.timeout.ms": 1000,
              "replica.lag.time.max.ms": 30000,
              "transaction.state.log.replication.factor": 3,
              "transaction.state.log.min.isr": 2},
    "kafka": {"broker.session.timeout.ms": 9000,
              "broker.heartbeat.interval.ms": 2000,
              "controller.quorum.election.timeout.ms": 1000,
              "controller.quorum.fetch.timeout.ms": 2000,
              "replica.lag.time.max.ms": 30000,
              "transaction.state.log.replication.factor": 3,
              "transaction.state.log.min.isr": 2,
              "transaction.abort.timed.out.transaction.cleanup."
              "interval.ms": 200},
    "client": {"librdkafka": "2.16", "transaction.timeout.ms": 60000,
               "socket.timeout.ms": 60000, "retry.backoff.ms": 100,
               "retry.backoff.max.ms": 1000, "reconnect.backoff.ms": 100,
               "reconnect.backoff.max.ms": 10000},
}
T0 = time.monotonic()


def _progress(msg):
    print("[failover %6.1fs] %s" % (time.monotonic() - T0, msg),
          file=sys.stderr, flush=True)


# --------------------------------------------------------------------------
# The producer (a child process in build/venv's Python, where
# confluent-kafka 2.16 is): every line on stdout is one JSON event with
# "ev" and "t" (time.monotonic(), CLOCK_MONOTONIC as in the parent).

def client_main(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--client", action="store_true")
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--txn-id", required=True)
    ap.add_argument("--partitions", type=int, default=PARTITIONS)
    ap.add_argument("--interval-ms", type=float, default=INTERVAL_MS)
    ap.add_argument("--commit-timeout", type=float, default=0)
    ap.add_argument("--debug", default="")
    a = ap.parse_args(argv)
    from confluent_kafka import Consumer, KafkaError, KafkaException, \
        Producer, TopicPartition

    lock = threading.Lock()

    def out(ev, **kw):
        kw["ev"] = ev
        kw["t"] = time.monotonic()
        with lock:
            sys.stdout.write(json.dumps(kw) + "\n")
            sys.stdout.flush()

    stop = threading.Event()

    def watch_stdin():
        for line in sys.stdin:
            if line.strip() == "stop":
                break
        stop.set()
    threading.Thread(target=watch_stdin, daemon=True).start()

    def err_fields(e):
        err = e.args[0] if e.args else None
        if not isinstance(err, KafkaError):
            return {"code": type(e).__name__, "msg": str(e), "fatal": False,
                    "retriable": False, "abortable": True}
        return {"code": err.name(), "msg": err.str(), "fatal": err.fatal(),
                "retriable": err.retriable(),
                "abortable": err.txn_requires_abort()}

    conf = {"bootstrap.servers": a.bootstrap,
            "transactional.id": a.txn_id}
    if a.debug:
        conf["debug"] = a.debug     # librdkafka's log, to stderr

    def make():
        # Out of the box: nothing but the address and the id.
        while True:
            p = Producer(conf)
            try:
                p.init_transactions(30)
                out("ready")
                return p
            except KafkaException as e:
                out("error", stage="init", **err_fields(e))
                if stop.is_set():
                    return None
                time.sleep(0.1)

    def abort(p):
        """Aborts the open transaction; the producer to go on with (a new
        one after a fatal error)."""
        while True:
            try:
                p.abort_transaction(10)
                out("abort")
                return p
            except KafkaException as e:
                f = err_fields(e)
                out("error", stage="abort", **f)
                if f["fatal"]:
                    out("recreate")
                    return make()
                time.sleep(0.05)

    def commit(p):
        if a.commit_timeout > 0:
            p.commit_transaction(a.commit_timeout)
        else:
            p.commit_transaction()      # no timeout: librdkafka's default

    p = make()
    acked = set()
    seq = 0
    while p is not None and not stop.is_set():
        # The pause follows each commit (not a fixed rate), so a commit
        # slower than the interval still leaves a gap between two
        # transactions for the harness's kill to land in.
        time.sleep(a.interval_ms / 1000.0)
        seq += 1
        begin = time.monotonic()
        stage = "begin"
        retries = 0
        try:
            p.begin_transaction()
            stage = "produce"
            for i in range(a.partitions):
                p.produce(a.topic, value=("%s:%d:%d" % (a.txn_id, seq, i))
                          .encode(), partition=i)
            stage = "commit"
            while True:
                try:
                    commit(p)
                    break
                except KafkaException as e:
                    f = err_fields(e)
                    if not f["retriable"] or f["fatal"] or f["abortable"]:
                        raise
                    # librdkafka's documented way: call commit again.
                    out("error", stage="commit", seq=seq, retry=True, **f)
                    retries += 1
            acked.add(seq)
            out("commit", seq=seq, begin=begin, retries=retries)
        except KafkaException as e:
            f = err_fields(e)
            out("error", stage=stage, seq=seq, **f)
            if f["fatal"]:
                out("recreate")
                p = make()
            else:
                p = abort(p)
        except BufferError as e:
            out("error", stage=stage, seq=seq, code="BufferError",
                msg=str(e), fatal=False, retriable=True, abortable=True)
            p = abort(p)
    if p is not None:
        try:
            p.abort_transaction(5)
        except KafkaException:
            pass
    out("stopped", seq=seq)
    # Every acknowledged transaction must be readable, whole, once.
    c = Consumer({"bootstrap.servers": a.bootstrap,
                  "group.id": a.txn_id + "-check",
                  "isolation.level": "read_committed",
                  "enable.auto.commit": False,
                  "enable.partition.eof": True})
    c.assign([TopicPartition(a.topic, i, -2) for i in range(a.partitions)])
    seen = {}
    eof = set()
    deadline = time.monotonic() + 60
    while len(eof) < a.partitions and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error():
            if m.error().code() == KafkaError._PARTITION_EOF:
                eof.add(m.partition())
            continue
        v = m.value().decode(errors="replace")
        if not v.startswith(a.txn_id + ":"):
            continue
        eof.discard(m.partition())
        _, s, i = v.rsplit(":", 2)
        seen.setdefault(int(s), []).append(int(i))
    c.close()
    lost = sorted(acked - set(seen))
    partial = sorted(s for s, idx in seen.items()
                     if set(idx) != set(range(a.partitions)))
    dups = sorted(s for s, idx in seen.items() if len(idx) != len(set(idx)))
    out("count", complete=len(eof) >= a.partitions,
        acked_txns=len(acked), found_txns=len(seen),
        lost_txns=len(lost), lost_first=lost[:10],
        unacked_found=len(set(seen) - acked), partial_txns=len(partial),
        partial_first=partial[:10], duplicated_txns=len(dups))


# --------------------------------------------------------------------------
# The parent: clusters, kill, restart.

def _libs():
    """The harness's modules, imported when the parent runs (the child
    needs none of them)."""
    import cluster as cl
    import method
    import peers as pe
    import replication as rp
    from conftest import txn_partition_for
    return cl, method, pe, rp, txn_partition_for


class BenchError(Exception):
    pass


class Child:
    """The producer process; its events as they arrive."""

    def __init__(self, argv, log_path):
        self.log = open(log_path, "ab")
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE,
                                     stderr=self.log, text=True, bufsize=1)
        self.events = []
        self.cond = threading.Condition()
        self.eof = False
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            line = line.strip()
            if not line.startswith("{"):
                continue
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            with self.cond:
                self.events.append(ev)
                self.cond.notify_all()
        with self.cond:
            self.eof = True
            self.cond.notify_all()

    def wait(self, pred, timeout):
        """Waits until pred(events) is true; returns its value, or None
        after timeout or when the child has ended."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                v = pred(self.events)
                if v or self.eof:
                    return v
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self.cond.wait(min(left, 0.5))

    def stop(self, timeout=90):
        """Asks the child to stop and check the topic; its count event."""
        try:
            self.proc.stdin.write("stop\n")
            self.proc.stdin.close()
        except (OSError, ValueError):
            pass
        cnt = self.wait(lambda evs: [e for e in evs if e["ev"] == "count"],
                        timeout)
        self.kill()
        return cnt[-1] if cnt else None

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
        self.reader.join(timeout=5)
        self.log.close()


class Side:
    """A three-broker cluster as bench/method.py's peer (alive when all
    three are; CPU and memory summed over them), with kill -9 and restart
    of one broker by node id (1-3)."""

    name = ""
    label = ""

    def __init__(self, root):
        self.root = Path(root)
        self.cl, self.method, self.pe, self.rp, _ = _libs()
        self.topic = "failover-%s" % self.name
        self.txn_seq = 0

    # per kind
    def port_of(self, node):
        raise NotImplementedError

    def pid_of(self, node):
        raise NotImplementedError

    def node_alive(self, node):
        raise NotImplementedError

    def kill9(self, node):
        raise NotImplementedError

    def restart(self, node):
        raise NotImplementedError

    # common
    @property
    def bootstrap(self):
        return ",".join("127.0.0.1:%d" % self.port_of(n) for n in (1, 2, 3))

    def live(self):
        return [n for n in (1, 2, 3) if self.node_alive(n)]

    def alive(self):
        return len(self.live()) == 3

    def cpu_seconds(self):
        vals = [self.pe.proc_cpu_seconds(self.pid_of(n)) for n in self.live()]
        return None if None in vals or not vals else sum(vals)

    def memory_kb(self):
        st = [self.pe.proc_memory_kb(self.pid_of(n)) for n in self.live()]
        return {"rss_kb": sum(s.get("rss_kb", 0) for s in st),
                "hwm_kb": sum(s.get("hwm_kb", 0) for s in st)}

    def controller(self):
        """The active controller (raft leader) as a live node says, or
        None."""
        for n in self.live():
            try:
                q = self.cl.describe_quorum(self.port_of(n))
                if q and q["leader"] >= 0:
                    return q["leader"]
            except (OSError, ValueError, struct.error):
                continue
        return None

    def find_coordinator(self, tid):
        """{node: coordinator id or ("error", code)} asked of every live
        node."""
        kw = self.cl.kw
        out = {}
        for n in self.live():
            try:
                c = kw.TxnClient(self.port_of(n), timeout=5)
                try:
                    (e,) = c.find_coordinator(tid, key_type=1)
                finally:
                    c.close()
                out[n] = e["node_id"] if not e["error"] else \
                    ("error", e["error"])
            except (OSError, ValueError, AssertionError, struct.error,
                    ConnectionError) as ex:
                out[n] = ("error", str(ex))
        return out

    def txn_state_leaders(self, port):
        md = self.rp.metadata_isr(port, TXN_STATE)
        if len(md) != TXN_STATE_PARTITIONS:
            return None
        return {p: ld for p, (ld, _, _) in md.items()}

    def whole(self):
        """True when all three brokers are unfenced on every node and
        every partition of the topic and of __transaction_state has its
        whole replica set in the ISR (as every node's Metadata says)."""
        if not self.alive():
            return False
        for n in (1, 2, 3):
            port = self.port_of(n)
            _, brokers = self.cl.describe_cluster(port, 2.0)
            if brokers != [1, 2, 3]:
                return False
            for t, parts in ((self.topic, PARTITIONS),
                             (TXN_STATE, TXN_STATE_PARTITIONS)):
                md = self.rp.metadata_isr(port, t)
                if len(md) != parts:
                    return False
                for ld, reps, isr in md.values():
                    if ld < 0 or sorted(isr) != sorted(reps):
                        return False
        return True

    def wait_whole(self, timeout=WHOLE_TIMEOUT):
        self.cl.wait_until("%s whole (3 brokers, full ISRs)" % self.name,
                           self.whole, timeout, 0.1)

    def setup(self):
        """After start: __transaction_state made (FindCoordinator makes it
        on demand in both) and the topic created; waits until whole."""
        kw = self.cl.kw

        def txn_state():
            for n in self.live():
                self.find_coordinator("failover-warm-up")
                if not self.txn_state_leaders(self.port_of(n)):
                    return False
            return True
        self.cl.wait_until("%s: %s led" % (self.name, TXN_STATE), txn_state,
                           120, 0.2)
        c = kw.Client(self.port_of(1), timeout=60)
        try:
            res = self.cl.parse_create_topics(c.call(
                self.rp.create_topic_request, self.topic, PARTITIONS, RF,
                {"min.insync.replicas": str(MIN_ISR)}))
        finally:
            c.close()
        self.cl.check_created(res, self.topic)
        self.wait_whole()

    def pick_txn_id(self, rep):
        """A transactional.id whose __transaction_state partition is led
        by a broker that is not the controller, alternating between the
        other two over the reps; (tid, intended victim, controller)."""
        _, _, _, _, part_for = _libs()
        ctl = self.controller()
        leaders = self.txn_state_leaders(self.port_of(self.live()[0]))
        if not leaders:
            raise BenchError("%s: %s not led" % (self.name, TXN_STATE))
        others = sorted({ld for ld in leaders.values() if ld != ctl})
        if not others:
            others = sorted(set(leaders.values()))
        want = others[rep % len(others)]
        for _ in range(100000):
            self.txn_seq += 1
            tid = "failover-%s-%d-%d" % (self.name, os.getpid(),
                                         self.txn_seq)
            if leaders.get(part_for(tid)) == want:
                return tid, want, ctl
        raise BenchError("no transactional.id led by %d" % want)

    def close(self, keep=False):
        raise NotImplementedError


class CairnSide(Side):
    name = "cairn"
    label = "Cairn, 3 brokers, defaults"

    def __init__(self, root, cairn):
        super().__init__(root)
        # cluster.KAFKA: session 9 s, heartbeat 2 s, election 1 s, which
        # are Cairn's defaults too (src/base/config_keys.c).
        self.c = self.cl.Cluster(self.root / "cairn", str(cairn),
                                 self.cl.KAFKA)

    def start(self):
        self.c.start()
        self.setup()

    def port_of(self, node):
        return self.c.node(node).port

    def pid_of(self, node):
        return self.c.node(node).proc.pid

    def node_alive(self, node):
        return self.c.node(node).alive()

    def kill9(self, node):
        b = self.c.node(node)
        t = time.monotonic()
        b.proc.send_signal(signal.SIGKILL)
        b.proc.wait(timeout=30)
        return t

    def restart(self, node):
        self.c.node(node).start()

    def settings(self):
        return dict(SETTINGS["cairn"], **self.c.timings)

    def close(self, keep=False):
        self.c.close(keep)


class KafkaSide(Side):
    name = "kafka"
    label = "Kafka 4.4.0, 3 brokers, defaults"

    def __init__(self, root):
        super().__init__(root)
        self.kb = self.pe.KafkaBroker(self.root / "kafka", nodes=3)
        ref = self.ref = self.kb.ref
        # Ports outside the ephemeral range (cluster.free_port), as for
        # Cairn: a killed node's port must still be free at its restart.
        ref.ports = [self.cl.free_port() for _ in range(3)]
        ref.cports = [self.cl.free_port() for _ in range(3)]
        ref.port = ref.ports[0]
        ref.bootstrap = self.kb.bootstrap = ",".join(
            "127.0.0.1:%d" % p for p in ref.ports)

    def start(self):
        self.kb.start()
        self.setup()

    def port_of(self, node):
        return self.ref.ports[node - 1]

    def pid_of(self, node):
        return self.ref.procs[node - 1].pid

    def node_alive(self, node):
        procs = self.ref.procs
        return len(procs) >= node and procs[node - 1].poll() is None

    def kill9(self, node):
        p = self.ref.procs[node - 1]
        t = time.monotonic()
        os.kill(p.pid, signal.SIGKILL)
        p.wait(timeout=30)
        return t

    def restart(self, node):
        """RefKafka has no restart: the same java command again, its log
        appended to."""
        ref = self.ref
        i = node - 1
        with open(ref.dir / ("kafka-%d.log" % node), "ab") as log:
            p = subprocess.Popen(
                ["java"] + ref.jvm_opts + [
                    "-cp", ref.cp, "kafka.Kafka",
                    str(ref.dir / ("server-%d.properties" % node))],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                cwd=str(ref.dir))
        ref.procs[i] = p
        if i == 0:
            ref.proc = self.kb.proc = p
        deadline = time.monotonic() + 120
        while not self.cl.port_open(ref.ports[i]):
            if p.poll() is not None or time.monotonic() > deadline:
                raise BenchError("Kafka node %d did not come back:\n%s"
                                 % (node, ref.log_tail()))
            time.sleep(0.05)

    def settings(self):
        props = {}
        try:
            for line in (self.ref.dir / "server-1.properties").read_text(
                    ).splitlines():
                if "=" in line and not line.startswith("#"):
                    k, v = line.split("=", 1)
                    if "timeout" in k or "interval" in k or "isr" in k or \
                            "replication" in k or "delay" in k:
                        props[k] = v
        except OSError:
            pass
        return dict(SETTINGS["kafka"], server_properties=props,
                    jvm_opts=self.ref.jvm_opts)

    def close(self, keep=False):
        try:
            self.ref.kill()
        except (OSError, subprocess.TimeoutExpired):
            pass
        if not keep:
            shutil.rmtree(self.ref.dir, ignore_errors=True)


def probe_brokers(side, poller, tid, live, t_kill, seen):
    """Records in seen the first time (s after t_kill) every live node
    names one live coordinator for tid ("coordinator") and every
    partition of the topic has a live leader in every live node's
    Metadata ("leaders")."""
    if "coordinator" not in seen:
        coords = side.find_coordinator(tid)
        named = {coords.get(n) for n in live}
        if len(named) == 1:
            c = named.pop()
            if isinstance(c, int) and c in live:
                seen["coordinator"] = round(time.monotonic() - t_kill, 4)
                seen["new_coordinator"] = c
    if "leaders" not in seen:
        try:
            ok = all(side.cl.topic_led(poller.metadata(
                side.port_of(n), [side.topic]), side.topic, PARTITIONS,
                set(live)) for n in live)
        except (OSError, ValueError, struct.error):
            ok = False
        if ok:
            seen["leaders"] = round(time.monotonic() - t_kill, 4)


def _commits(evs):
    return [e for e in evs if e["ev"] == "commit"]


def one_rep(side, rep, build, opts, progress):
    """One kill-and-measure on side; the sample (failover_s None and
    "error" when it could not be measured).  The killed broker is
    restarted and the cluster whole again when it returns, or an
    exception says why not; a signal (SystemExit) ends it at once, and
    run_for_report's finally kills every broker."""
    s = {"failover_s": None}
    try:
        _kill_and_measure(side, rep, build, opts, s)
    except (BenchError, side.cl.BenchError, OSError, ValueError,
            struct.error, subprocess.SubprocessError) as e:
        s["error"] = "%s: %s" % (type(e).__name__, e)
    victim = s.get("victim")
    if victim is not None and not side.node_alive(victim):
        t = time.monotonic()
        side.restart(victim)
        side.wait_whole()
        s["restart_whole_s"] = round(time.monotonic() - t, 3)
        progress("  %s: node %d back, cluster whole after %.1f s"
                 % (side.name, victim, s["restart_whole_s"]))
    return s


def _kill_and_measure(side, rep, build, opts, s):
    """Fills in the sample s."""
    interval = opts.get("interval_ms", INTERVAL_MS)
    steady = opts.get("steady_s", STEADY_S)
    after = opts.get("after_s", AFTER_S)
    tid, want, ctl = side.pick_txn_id(rep)
    s.update(txn_id=tid, controller=ctl, planned_victim=want)
    py = Path(build) / "venv" / "bin" / "python"
    if not py.exists():
        py = REPO / "build" / "venv" / "bin" / "python"
    child = Child([str(py), str(Path(__file__).resolve()), "--client",
                   "--bootstrap", side.bootstrap, "--topic", side.topic,
                   "--txn-id", tid, "--partitions", str(PARTITIONS),
                   "--interval-ms", str(interval), "--commit-timeout",
                   str(opts.get("commit_timeout", 0)), "--debug",
                   opts.get("client_debug") or ""],
                  side.root / ("client-%s-rep%d.log" % (side.name, rep)))
    victim = None
    t_kill = None
    try:
        # Commits for `steady` s with no error in between.
        def flowing(evs):
            last_bad = max([e["t"] for e in evs if e["ev"] != "commit"]
                           or [0])
            cs = [e["t"] for e in evs if e["ev"] == "commit"
                  and e["t"] > last_bad]
            return len(cs) >= 2 and cs[-1] - cs[0] >= steady
        if not child.wait(flowing, 60 + steady):
            s["error"] = "commits did not flow for %g s within %g s" % (
                steady, 60 + steady)
            return s
        coords = side.find_coordinator(tid)
        named = {v for v in coords.values() if isinstance(v, int)}
        s["find_coordinator"] = {str(k): v for k, v in coords.items()}
        victim = named.pop() if len(named) == 1 else want
        s["victim"] = victim
        s["victim_was_controller"] = victim == ctl
        md = side.rp.metadata_isr(side.port_of(victim), side.topic)
        s["victim_led_partitions"] = sum(1 for ld, _, _ in md.values()
                                         if ld == victim)
        before = child.wait(lambda evs: list(_commits(evs)), 1)
        n0 = len(before)
        s["commit_ms_before"] = round(1e3 * statistics.median(
            e["t"] - e["begin"] for e in before), 2)
        # Right after the next commit: between two transactions.
        if not child.wait(lambda evs: len(_commits(evs)) > n0, 10):
            s["error"] = "no commit to kill after"
            return s
        t_kill = side.kill9(victim)
        s["kill_after_commit_ms"] = round(1e3 * (
            t_kill - _commits(child.events)[n0]["t"]), 2)

        def first_after(evs):
            return [e for e in _commits(evs) if e["t"] > t_kill][:1]
        # Meanwhile, what the surviving brokers say, every PROBE_S: when
        # all of them name a live coordinator for the id, and when every
        # partition of the topic has a live leader (the brokers' part of
        # the time; the rest is the client finding out).
        live = [n for n in (1, 2, 3) if n != victim]
        seen = {}
        deadline = t_kill + FAILOVER_TIMEOUT
        poller = side.cl.Poller(2.0)
        try:
            while True:
                got = child.wait(first_after, PROBE_S)
                if got or child.eof or time.monotonic() > deadline:
                    break
                probe_brokers(side, poller, tid, live, t_kill, seen)
            probe_brokers(side, poller, tid, live, t_kill, seen)
        finally:
            poller.close()
        s["coordinator_moved_s"] = seen.get("coordinator")
        s["leaders_moved_s"] = seen.get("leaders")
        s["new_coordinator"] = seen.get("new_coordinator")
        if not got:
            s["error"] = "no commit within %g s of the kill" % \
                FAILOVER_TIMEOUT
        else:
            first = got[0]
            s["failover_s"] = round(first["t"] - t_kill, 4)
            s["first_commit_begun_after_kill"] = first["begin"] > t_kill
            s["first_commit_retries"] = first["retries"]
            time.sleep(after)
        cnt = child.stop()
        evs = list(child.events)
        end = got[0]["t"] if got else time.monotonic()
        mid = [e for e in evs if t_kill < e["t"] <= end]
        errs = [e for e in mid if e["ev"] == "error"]
        s["errors"] = len(errs)
        s["error_codes"] = sorted({"%s:%s" % (e.get("stage"), e["code"])
                                   for e in errs})
        s["first_error_s"] = round(errs[0]["t"] - t_kill, 4) if errs \
            else None
        s["aborted_txns"] = sum(1 for e in mid if e["ev"] == "abort")
        s["recreated"] = sum(1 for e in mid if e["ev"] == "recreate")
        s["fatal_errors"] = sum(1 for e in errs if e.get("fatal"))
        s["commits_after_failover"] = sum(
            1 for e in _commits(evs) if e["t"] > end)
        if cnt:
            s["check"] = {k: v for k, v in cnt.items()
                          if k not in ("ev", "t")}
            s["lost_txns"] = cnt["lost_txns"]
        else:
            s["check"] = None
            s["lost_txns"] = None
        # Relative to the kill, every event: the raw record.
        s["events"] = [dict(e, t=round(e["t"] - t_kill, 4),
                            **({"begin": round(e["begin"] - t_kill, 4)}
                               if "begin" in e else {}))
                       for e in evs]
        return s
    finally:
        child.kill()


def describe(rec):
    if rec.get("failover_s") is None:
        return "NOT MEASURED: %s" % rec.get("error")
    def t(k):
        v = rec.get(k)
        return "-" if v is None else "%.2f s" % v
    return ("coordinator %s%s killed, next commit after %.2f s (brokers: "
            "coordinator moved %s, leaders %s; client's first error %s), "
            "%d errors%s, %d aborted, %d re-created producers, lost %s"
            % (rec["victim"], " (controller)"
                if rec.get("victim_was_controller") else "",
                rec["failover_s"], t("coordinator_moved_s"),
                t("leaders_moved_s"), t("first_error_s"),
                rec.get("errors", 0),
                " (%s)" % ", ".join(rec["error_codes"])
                if rec.get("error_codes") else "",
                rec.get("aborted_txns", 0), rec.get("recreated", 0),
                rec.get("lost_txns")))


def run_for_report(build, cairn, workdir, opts, progress):
    """The coordinator failover figure for bench/run.py: both clusters
    started in workdir, opts["reps"] (or opts["failover_reps"])
    interleaved reps, everything stopped at the end.  Returns the figure
    (key "coord_failover")."""
    cl, method, _, _, _ = _libs()
    reps = opts.get("failover_reps", opts.get("reps", 5))
    root = Path(workdir) / "failover"
    root.mkdir(parents=True, exist_ok=True)
    sides = []
    try:
        progress("coordinator failover: starting Cairn and Kafka clusters "
                 "(3 brokers each)")
        sides.append(CairnSide(root, cairn))
        sides.append(KafkaSide(root))
        for sd in sides:
            sd.start()
            progress("  %s: 3 brokers, topic %s (%d partitions, RF %d, "
                     "min ISR %d), %s led" % (sd.name, sd.topic, PARTITIONS,
                                             RF, MIN_ISR, TXN_STATE))
        def run(peer, rep):
            try:
                return one_rep(peer, rep, build, opts, progress)
            except (BenchError, cl.BenchError, OSError,
                    subprocess.SubprocessError) as e:
                progress("  %s rep %d: %s" % (peer.name, rep + 1, e))
                return {"failover_s": None, "error": str(e)}
        arms = [method.Arm(sd.name, sd, run) for sd in sides]
        progress("coordinator failover, kill -9 to the next commit: %s, "
                 "%d reps" % (", ".join(sd.name for sd in sides), reps))
        fig = method.measure(
            {"key": "coord_failover", "kind": "latency",
             "label": "transaction coordinator failover, kill -9 to the "
             "next commit (s)", "partitions": PARTITIONS, "rf": RF,
             "min_isr": MIN_ISR,
             "interval_ms": opts.get("interval_ms", INTERVAL_MS),
             "settings": {sd.name: sd.settings() for sd in sides},
             "client": SETTINGS["client"], "describe": describe},
            arms, reps, progress)
        method.summarise(fig, METRICS, [("cairn", "kafka")])
        return fig
    finally:
        keep = opts.get("keep", False)
        for sd in sides:
            sd.close(keep)
        if not keep:
            shutil.rmtree(root, ignore_errors=True)


def summary_lines(figs):
    """The report's sentence on coordinator failover (lower is better),
    and one on any acknowledged transaction that was lost."""
    import figures
    import method
    lines = []
    for f in figs:
        if f.get("key") != "coord_failover":
            continue
        line = figures.said_line(
            "coordinator failover, kill -9 to the next commit, Cairn vs "
            "Kafka (lower is better)",
            method.find_ratio(f, "failover_s", "cairn", "kafka"), False)
        if line:
            lines.append(line)
        line = figures.said_line(
            "coordinator failover, the brokers' part (kill -9 until "
            "every survivor names a live coordinator), Cairn vs Kafka "
            "(lower is better)",
            method.find_ratio(f, "coordinator_moved_s", "cairn", "kafka"),
            False)
        if line:
            lines.append(line)
        for arm, samples in f.get("samples", {}).items():
            lost = sum(s.get("lost_txns") or 0 for s in samples)
            bad = [s for s in samples if s.get("failover_s") is None]
            if lost:
                lines.append("LOST: %s lost %d acknowledged transactions "
                             "over its coordinator failovers" % (arm, lost))
            if bad:
                lines.append("%s: %d of %d coordinator failovers not "
                             "measured (%s)" % (arm, len(bad), len(samples),
                                                bad[0].get("error")))
    return lines


def table(fig):
    import method
    lines = ["", "%s, %d reps each, min / median / max"
             % (fig["label"], max([len(v) for v in
                                   fig["samples"].values()] or [0]))]
    rows = [("failover_s", "kill -9 -> next commit (s)", "%.2f"),
            ("coordinator_moved_s", "  brokers name a live coordinator",
             "%.2f"),
            ("leaders_moved_s", "  every partition led by a live one",
             "%.2f"),
            ("first_error_s", "kill -9 -> client's first error (s)",
             "%.2f"),
            ("errors", "client errors in between", "%.0f"),
            ("aborted_txns", "transactions aborted in between", "%.0f"),
            ("recreated", "producers re-created (fatal)", "%.0f"),
            ("lost_txns", "acknowledged transactions lost", "%.0f"),
            ("restart_whole_s", "restart -> cluster whole (s)", "%.1f")]
    lines.append("  %-40s %-22s %-22s" % ("", "cairn", "kafka"))
    for m, what, spec in rows:
        st = fig["stats"].get(m, {})
        lines.append("  %-40s %-22s %-22s" % (
            what, method.fmt_spread(st.get("cairn"), spec),
            method.fmt_spread(st.get("kafka"), spec)))
    for m in ("failover_s", "coordinator_moved_s"):
        r = method.find_ratio(fig, m, "cairn", "kafka")
        lines.append("  %s Cairn / Kafka: %s" % (m, method.fmt_ratio(r)))
    for arm, samples in fig["samples"].items():
        for smp in samples:
            lines.append("  %s rep %d: %s" % (arm, smp["rep"],
                                               describe(smp)))
    lines.append("  settings: %s" % json.dumps(
        {k: {kk: vv for kk, vv in v.items()
             if kk not in ("jvm_opts", "server_properties")}
         for k, v in fig["settings"].items()}))
    lines.append("  client: %s" % json.dumps(fig.get("client")))
    return "\n".join(lines)


def main():
    if "--client" in sys.argv[1:]:
        client_main(sys.argv[1:])
        return
    ap = argparse.ArgumentParser(
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir",
                    default=os.environ.get("CAIRN_BUILD_DIR",
                                           str(REPO / "build")))
    ap.add_argument("--cairn", default=None,
                    help="broker binary (default <build-dir>/cairn)")
    ap.add_argument("--dir", default=str(REPO / "bench" / "out"))
    ap.add_argument("--json", default=None,
                    help="report path (default DIR/failover.json)")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--interval-ms", type=float, default=INTERVAL_MS)
    ap.add_argument("--commit-timeout", type=float, default=0,
                    help="the producer's commit_transaction timeout, s, "
                    "retried after (default none: it blocks until done, "
                    "as librdkafka's default)")
    ap.add_argument("--steady", type=float, default=STEADY_S,
                    help="seconds of error-free commits before the kill")
    ap.add_argument("--after", type=float, default=AFTER_S,
                    help="seconds of commits after the first one past the "
                    "kill, before the check")
    ap.add_argument("--client-debug", default="",
                    help="librdkafka debug contexts for the producer's "
                    "log (e.g. eos,topic,broker; with --keep: "
                    "failover/client-<side>-rep<N>.log)")
    ap.add_argument("--keep", action="store_true",
                    help="keep the brokers' directories and logs")
    args = ap.parse_args()

    # SIGTERM, and SIGINT also when started in the background, end the
    # run through the finally blocks, which kill every process by pid.
    def stop(signum, _frame):
        raise SystemExit("failover.py: signal %d" % signum)
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    build = Path(args.build_dir).resolve()
    cairn = Path(args.cairn or build / "cairn").resolve()
    for p in (cairn, build / "venv" / "bin" / "python"):
        if not p.exists():
            sys.exit("%s missing" % p)
    Path(args.dir).mkdir(parents=True, exist_ok=True)
    out = Path(args.json or Path(args.dir) / "failover.json")
    tmp = Path(tempfile.mkdtemp(prefix="cairn-failover-", dir=args.dir))
    opts = {"reps": args.reps, "interval_ms": args.interval_ms,
            "steady_s": args.steady, "after_s": args.after,
            "commit_timeout": args.commit_timeout,
            "client_debug": args.client_debug,
            "keep": args.keep}
    report = {"started": time.strftime("%Y-%m-%d %H:%M:%S UTC",
                                       time.gmtime()),
              "commit": subprocess.run(
                  ["git", "-C", str(REPO), "describe", "--always",
                   "--dirty"], stdout=subprocess.PIPE,
                  text=True).stdout.strip(),
              "cairn": str(cairn), "nproc": os.cpu_count(),
              "loadavg_before": os.getloadavg(), "args": vars(args)}
    try:
        fig = run_for_report(build, cairn, tmp, opts, _progress)
    finally:
        if args.keep:
            _progress("kept %s" % tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    report["loadavg_after"] = os.getloadavg()
    report["figures"] = [fig]
    report["summary"] = summary_lines([fig])
    out.write_text(json.dumps(report, indent=1) + "\n")
    print(table(fig))
    for line in report["summary"]:
        print(line)
    print("\nraw samples: %s" % out)


if __name__ == "__main__":
    main()
