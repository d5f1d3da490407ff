#!/usr/bin/python3
"""Cluster mode measurements (issue #13, docs/cluster-plan.md section 10).

  make bench-cluster      (= /usr/bin/python3 bench/cluster.py)
  /usr/bin/python3 bench/cluster.py [--cairn build/cairn] [--dir bench/out]
          [--json bench/out/cluster.json] [--only PART,...]
          [--election-ms 1000,500] [--election-runs 10]
          [--session-ms 3000,9000] [--fencing-runs 5]
          [--propagation-runs 20] [--propagation-election-ms 500,1000]
          [--topics 1000] [--partitions 10] [--rf 3] [--scale-rf 3,1]
          [--scale-reps 3] [--restarts 3] [--keep]

Every part starts its own three nodes, each process.roles=broker,controller
(a voter of the metadata quorum), on loopback ports nobody else uses, data
under a temporary directory in --dir (removed unless --keep), every process
killed by pid at the end.  auto.create.topics.enable=false everywhere, so
polling Metadata for a topic never creates it.  Waits are bounded; a part
that cannot run (a request refused, a wait that runs out) is recorded with
the reason and the next part runs.  Progress goes to stderr, a table to
stdout, and every raw sample to the JSON report.  As bench/method.py:
min / median / max of repeated runs, nothing pass/fail.

Parts:

  election     kill -9 of the active controller; the time from the SIGKILL
               to when every surviving node's DescribeCluster names the
               same new live controller (and when each one first does);
               the killed node is restarted and all three registered
               again before the next run.  --election-runs per
               controller.quorum.election.timeout.ms in --election-ms.
  fencing      a topic of 6 partitions, replication factor 3, made through
               CreateTopics (new each run, so every replica is in the
               ISR); kill -9 of a broker that is not the controller and
               leads some of its partitions; the time until Metadata from
               every survivor shows no partition led by the dead broker,
               until every partition has a live leader again, and until
               DescribeCluster no longer lists it (fenced), at
               broker.session.timeout.ms --session-ms.
  propagation  CreateTopics (3 partitions, --rf) sent to one node, in turn
               each of the three, after a random gap (runs do not start in
               one phase of raft's heartbeat, election timeout / 10); the
               time from sending it until every node's Metadata lists the
               topic with a leader for every partition, until the first
               does, and the CreateTopics answer time; at each
               controller.quorum.election.timeout.ms in
               --propagation-election-ms.
  scale        each node's CPU seconds (utime+stime, /proc/<pid>/stat) and
               VmRSS / VmHWM (/proc/<pid>/status) idle, then while and
               after --topics x --partitions partitions (each replication
               factor in --scale-rf) are created through a node that is
               not the controller, until every node's Metadata has them
               all with leaders; the raft log (metadata.log.dir): file
               sizes, the bytes written into libraft's preallocated open
               segments, closed segments, snapshots, and its high
               watermark (DescribeQuorum); then 2 x --restarts restarts of
               a node that is not the controller, alternately after kill
               -9 and after SIGTERM: start -> listening (its "loaded N
               topics in M ms" from the log) -> registered and unfenced on
               every node -> its Metadata has every topic.  Kafka's
               default timings here; --scale-reps fresh clusters per
               replication factor, summarised as min / median / max.
               Creation stops early, and says so, when a node's open
               files would pass the open-file limit.

Timings of the election/fencing/propagation clusters are the e2e suite's
(tests/e2e/conftest.py Cluster: session 3 s, heartbeat 0.5 s, election
0.5 s) unless the options say otherwise; each figure records its settings.
Polling is every POLL_S (10 ms), Metadata on persistent connections (a new
one after an error), DescribeCluster on a new connection each time, so
times are resolved to about 10-20 ms.
"""

import argparse
import json
import os
import random
import re
import resource
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "e2e"))
sys.path.insert(0, str(REPO / "bench"))
import kafka_wire as kw  # noqa: E402
from method import spread  # noqa: E402

API_CREATE_TOPICS = 19
API_DESCRIBE_CLUSTER = 60
API_DESCRIBE_QUORUM = 55
POLL_S = 0.01
CLK_TCK = os.sysconf("SC_CLK_TCK")
T0 = time.monotonic()

# tests/e2e/conftest.py's Cluster timings.
E2E = {"session_ms": 3000, "heartbeat_ms": 500, "election_ms": 500}
# Kafka's defaults (and Cairn's).
KAFKA = {"session_ms": 9000, "heartbeat_ms": 2000, "election_ms": 1000}


class BenchError(Exception):
    pass


def progress(msg):
    print("[cluster %6.1fs] %s" % (time.monotonic() - T0, msg),
          file=sys.stderr, flush=True)


# --------------------------------------------------------------------------
# Ports: outside the kernel's ephemeral range (as tests/e2e/conftest.py),
# so a node's port cannot be taken by an outgoing connection while the node
# is down between a kill and its restart.

def _port_range():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low, high = (int(x) for x in f.read().split())
    except (OSError, ValueError):
        low, high = 32768, 60999
    if low - 1 - 10000 >= 4000:
        return 10000, low - 1
    return high + 1, 65535


_PORTS = _port_range()
_handed_out = set()
_rng = random.Random(os.getpid() ^ time.monotonic_ns())


def free_port():
    for _ in range(10000):
        port = _rng.randint(*_PORTS)
        if port in _handed_out:
            continue
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            continue
        finally:
            s.close()
        _handed_out.add(port)
        return port
    raise BenchError("no free port in %d-%d" % _PORTS)


def port_open(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
        return True
    except OSError:
        return False


# --------------------------------------------------------------------------
# Wire

def describe_cluster(port, timeout=2.0):
    """DescribeCluster v0: (controller_id, sorted broker ids)."""
    body = b"\x00" + kw.uvarint(0)
    sock = kw.connect("127.0.0.1", port, timeout)
    try:
        sock.sendall(kw.request(API_DESCRIBE_CLUSTER, 0, 1, body,
                                flexible=True))
        resp = kw.recv_frame(sock)
    finally:
        sock.close()
    if resp is None:
        raise ConnectionError("closed")
    r = kw.Reader(resp)
    r.i32()
    r.skip_tags()
    r.i32()
    err = r.i16()
    r.compact_string()
    r.compact_string()
    controller = r.i32()
    brokers = []
    for _ in range(r.uvarint() - 1):
        brokers.append(r.i32())
        r.compact_string()
        r.i32()
        r.compact_string()
        r.skip_tags()
    if err:
        raise ValueError("DescribeCluster error %d" % err)
    return controller, sorted(brokers)


def describe_quorum(port, timeout=2.0):
    """DescribeQuorum v0 of __cluster_metadata-0 as the node on port knows
    it: {"leader", "epoch", "high_watermark", "voters": {id: leo}}."""
    body = (kw.uvarint(2) + kw.compact_string("__cluster_metadata")
            + kw.uvarint(2) + struct.pack(">i", 0) + kw.uvarint(0)
            + kw.uvarint(0) + kw.uvarint(0))
    sock = kw.connect("127.0.0.1", port, timeout)
    try:
        sock.sendall(kw.request(API_DESCRIBE_QUORUM, 0, 1, body,
                                flexible=True))
        resp = kw.recv_frame(sock)
    finally:
        sock.close()
    if resp is None:
        raise ConnectionError("closed")
    r = kw.Reader(resp)
    r.i32()
    r.skip_tags()
    err = r.i16()
    if err:
        raise ValueError("DescribeQuorum error %d" % err)
    out = None
    for _ in range(r.uvarint() - 1):
        r.compact_string()
        for _ in range(r.uvarint() - 1):
            r.i32()
            perr = r.i16()
            leader, epoch, hw = r.i32(), r.i32(), r.i64()
            voters = {}
            for _ in range(r.uvarint() - 1):
                rid, leo = r.i32(), r.i64()
                r.skip_tags()
                voters[rid] = leo
            for _ in range(r.uvarint() - 1):
                r.i32()
                r.i64()
                r.skip_tags()
            r.skip_tags()
            if perr:
                raise ValueError("DescribeQuorum partition error %d" % perr)
            out = {"leader": leader, "epoch": epoch, "high_watermark": hw,
                   "voters": voters}
        r.skip_tags()
    return out


def create_topics_request(corr, names, partitions, rf, timeout_ms=60000):
    """CreateTopics v4 (not flexible), the controller picks replicas."""
    body = struct.pack(">i", len(names))
    for n in names:
        body += kw.string(n) + struct.pack(">ihii", partitions, rf, 0, 0)
    body += struct.pack(">ib", timeout_ms, 0)
    return kw.request(API_CREATE_TOPICS, 4, corr, body)


def parse_create_topics(body):
    """[(name, error, message)] of a CreateTopics v4 answer."""
    r = kw.Reader(body)
    r.i32()
    r.i32()
    return [(r.string(), r.i16(), r.string()) for _ in range(r.i32())]


def create_topics(port, names, partitions, rf, timeout=60.0):
    """Sends one CreateTopics; returns [(name, error, message)]."""
    c = kw.Client(port, timeout=timeout)
    try:
        return parse_create_topics(
            c.call(create_topics_request, names, partitions, rf,
                   int(timeout * 1000)))
    finally:
        c.close()


class Poller:
    """Metadata v1 on one persistent connection per port."""

    def __init__(self, timeout=5.0):
        self.timeout = timeout
        self.conns = {}

    def metadata(self, port, topics=None):
        """{topic: {"error", "partitions": {i: (error, leader)}}} or None
        when the node does not answer."""
        try:
            c = self.conns.get(port)
            if c is None:
                c = self.conns[port] = kw.Client(port, timeout=self.timeout)
            _, _, _, t = kw.parse_metadata_v1(
                c.call(kw.metadata_request_v1, topics))
            return t
        except (OSError, ValueError, struct.error):
            self.drop(port)
            return None

    def drop(self, port):
        c = self.conns.pop(port, None)
        if c is not None:
            try:
                c.close()
            except OSError:
                pass

    def close(self):
        for p in list(self.conns):
            self.drop(p)


def topic_led(md, name, nparts, alive=None):
    """True when md lists name with nparts partitions, each with a leader
    (one in alive if given)."""
    t = md.get(name) if md else None
    if not t or t["error"] or len(t["partitions"]) != nparts:
        return False
    for _, leader in t["partitions"].values():
        if leader < 0 or (alive is not None and leader not in alive):
            return False
    return True


def wait_until(what, pred, timeout, poll=0.05):
    deadline = time.monotonic() + timeout
    last = None
    while True:
        try:
            v = pred()
            if v:
                return v
            last = v
        except (OSError, ValueError, struct.error) as e:
            last = e
        if time.monotonic() > deadline:
            raise BenchError("%s: not within %.0f s (last: %r)"
                             % (what, timeout, last))
        time.sleep(poll)


# --------------------------------------------------------------------------
# Processes

def proc_stats(pid):
    """cpu_s (utime+stime), rss_kb, hwm_kb, fds of a live process."""
    out = {}
    try:
        with open("/proc/%d/stat" % pid) as f:
            rest = f.read().rsplit(")", 1)[1].split()
        out["cpu_s"] = round((int(rest[11]) + int(rest[12])) / CLK_TCK, 2)
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    out["rss_kb"] = int(line.split()[1])
                elif line.startswith("VmHWM:"):
                    out["hwm_kb"] = int(line.split()[1])
        out["fds"] = len(os.listdir("/proc/%d/fd" % pid))
    except (OSError, IndexError, ValueError):
        pass
    return out


def used_bytes(path):
    """Bytes up to the last non-zero one: what libraft has written into a
    preallocated (zero-filled) open segment."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return 0
    return len(data.rstrip(b"\0"))


def topics_load_ms(log_path, offset):
    """The "loaded N topics from DIR in MS ms" of the start logged after
    offset (the partition logs opened before listening), or None."""
    try:
        with open(log_path, "rb") as f:
            f.seek(offset)
            text = f.read().decode(errors="replace")
    except OSError:
        return None
    m = re.search(r"loaded \d+ topics from \S+ in (\d+) ms", text)
    return int(m.group(1)) if m else None


def dir_bytes(path):
    """Total size of the files under path, and {name: bytes} of its top
    level (segments, snapshots)."""
    total, files = 0, {}
    for root, _, names in os.walk(path):
        for n in names:
            try:
                sz = os.path.getsize(os.path.join(root, n))
            except OSError:
                continue
            total += sz
            if root == str(path):
                files[n] = sz
    return total, files


class Node:
    def __init__(self, node_id, workdir, cairn):
        self.id = node_id
        self.cairn = cairn
        self.port = free_port()
        self.ctl_port = free_port()
        self.http_port = free_port()
        self.workdir = Path(workdir)
        self.data_dir = self.workdir / "data"
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = self.workdir / "broker.log"
        self.sets = {}
        self.proc = None

    @property
    def raft_dir(self):
        return self.data_dir / "__cluster_metadata-0"

    def argv(self):
        a = [self.cairn,
             "--set", "listeners=PLAINTEXT://127.0.0.1:%d,CONTROLLER://"
             "127.0.0.1:%d" % (self.port, self.ctl_port),
             "--set", "log.dirs=%s" % self.data_dir,
             "--set", "http.listener=127.0.0.1:%d" % self.http_port]
        for k, v in self.sets.items():
            a += ["--set", "%s=%s" % (k, v)]
        return a

    def start(self, timeout=60):
        """Starts the process; returns the monotonic time of the Popen."""
        assert not self.alive()
        with open(self.log_path, "ab") as log:
            log.write(b"=== start %s\n" % " ".join(self.argv()).encode())
            log.flush()
            t = time.monotonic()
            self.proc = subprocess.Popen(
                self.argv(), stdin=subprocess.DEVNULL, stdout=log,
                stderr=log, cwd=str(self.workdir))
        deadline = t + timeout
        while not port_open(self.port):
            if self.proc.poll() is not None:
                raise BenchError("node %d exited with %s during start-up:\n%s"
                                 % (self.id, self.proc.returncode,
                                    self.log_tail()))
            if time.monotonic() > deadline:
                raise BenchError("node %d not listening within %d s"
                                 % (self.id, timeout))
            time.sleep(0.01)
        return t

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def kill9(self):
        if self.alive():
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=30)

    def stats(self):
        return proc_stats(self.proc.pid) if self.alive() else {}

    def log_tail(self, n=20):
        try:
            with open(self.log_path, errors="replace") as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return ""


class Cluster:
    def __init__(self, workdir, cairn, timings, n=3, extra=None):
        self.root = Path(workdir)
        self.timings = dict(timings)
        self.nodes = [Node(i + 1, Path(workdir) / ("node-%d" % (i + 1)),
                           cairn) for i in range(n)]
        voters = ",".join("%d@127.0.0.1:%d" % (b.id, b.ctl_port)
                          for b in self.nodes)
        for b in self.nodes:
            b.sets.update({
                "node.id": str(b.id),
                "process.roles": "broker,controller",
                "listener.security.protocol.map":
                    "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                "controller.listener.names": "CONTROLLER",
                "controller.quorum.voters": voters,
                "broker.session.timeout.ms": str(timings["session_ms"]),
                "broker.heartbeat.interval.ms": str(timings["heartbeat_ms"]),
                "controller.quorum.election.timeout.ms":
                    str(timings["election_ms"]),
                "auto.create.topics.enable": "false",
            })
            b.sets.update(extra or {})
        self.poller = Poller()

    def node(self, i):
        return self.nodes[i - 1]

    def live(self):
        return [b for b in self.nodes if b.alive()]

    def start(self):
        for b in self.nodes:
            b.start()
        return self.wait_registered([b.id for b in self.nodes], 60)

    def close(self, keep=False):
        """Kills every node by pid; removes their directories unless
        keep."""
        self.poller.close()
        for b in self.nodes:
            try:
                b.kill9()
            except (OSError, subprocess.TimeoutExpired):
                pass
        if not keep:
            shutil.rmtree(self.root, ignore_errors=True)

    def agreed(self, want):
        """The controller every live node names while listing exactly want
        (unfenced), if they agree on a live one; else None."""
        seen = set()
        for b in self.live():
            ctl, brokers = describe_cluster(b.port)
            if brokers != want or ctl < 0:
                return None
            seen.add(ctl)
        if len(seen) != 1:
            return None
        ctl = seen.pop()
        return ctl if self.node(ctl).alive() else None

    def wait_registered(self, ids, timeout):
        want = sorted(ids)
        return wait_until("brokers %s registered everywhere" % want,
                          lambda: self.agreed(want), timeout, POLL_S)

    def wait_topic(self, name, nparts, timeout=30):
        def ok():
            return all(topic_led(self.poller.metadata(b.port, [name]), name,
                                 nparts) for b in self.live())
        wait_until("topic %s led on every node" % name, ok, timeout, POLL_S)

    def leaders(self, port, name):
        md = self.poller.metadata(port, [name])
        t = (md or {}).get(name)
        return {i: ldr for i, (_, ldr) in t["partitions"].items()} if t \
            else {}


def check_created(res, what):
    bad = [r for r in res if r[1]]
    if bad:
        raise BenchError("%s: CreateTopics answered %s" % (what, bad[:3]))


# --------------------------------------------------------------------------
# Parts

def part_election(args, root, election_ms):
    timings = dict(E2E, election_ms=election_ms)
    fig = {"settings": timings, "runs": args.election_runs, "samples": []}
    c = Cluster(root / ("election-%d" % election_ms), args.cairn, timings)
    try:
        ctl = c.start()
        progress("election %d ms: 3 registered, controller %d"
                 % (election_ms, ctl))
        for run in range(args.election_runs):
            time.sleep(args.settle)
            old = ctl
            survivors = [b for b in c.nodes if b.id != old]
            t0 = time.monotonic()
            c.node(old).kill9()
            first = {}
            deadline = t0 + 60
            done = None
            while done is None:
                now = time.monotonic()
                if now > deadline:
                    raise BenchError("no new controller within 60 s")
                names = {}
                for b in survivors:
                    try:
                        names[b.id] = describe_cluster(b.port, 1.0)[0]
                    except (OSError, ValueError, struct.error):
                        names[b.id] = None
                    n = names[b.id]
                    if n not in (None, -1, old) and b.id not in first:
                        first[b.id] = time.monotonic() - t0
                vals = set(names.values())
                if len(vals) == 1:
                    v = vals.pop()
                    if v not in (None, -1, old) and c.node(v).alive():
                        done = time.monotonic() - t0, v
                        break
                time.sleep(POLL_S)
            t_elect, new = done
            t1 = time.monotonic()
            c.node(old).start()
            ctl = c.wait_registered([1, 2, 3], 60)
            s = {"run": run, "killed": old, "new_controller": new,
                 "election_s": round(t_elect, 4),
                 "first_named_s": {str(k): round(v, 4)
                                   for k, v in first.items()},
                 "restart_registered_s": round(time.monotonic() - t1, 3)}
            fig["samples"].append(s)
            progress("election %d ms run %d/%d: killed %d, %d named by all "
                     "after %.3f s" % (election_ms, run + 1,
                                       args.election_runs, old, new,
                                       t_elect))
    except BenchError as e:
        fig["error"] = str(e)
        progress("election %d ms: %s" % (election_ms, e))
    finally:
        c.close(args.keep)
    fig["stats"] = {"election_s": spread(s["election_s"]
                                         for s in fig["samples"]),
                    "restart_registered_s": spread(
                        s["restart_registered_s"] for s in fig["samples"])}
    return fig


def part_fencing(args, root, session_ms):
    timings = dict(E2E, session_ms=session_ms,
                   heartbeat_ms=min(E2E["heartbeat_ms"], session_ms // 3))
    nparts = 6
    fig = {"settings": dict(timings, partitions=nparts, rf=3),
           "runs": args.fencing_runs, "samples": []}
    c = Cluster(root / ("fencing-%d" % session_ms), args.cairn, timings)
    try:
        ctl = c.start()
        for run in range(args.fencing_runs):
            time.sleep(args.settle)
            topic = "fence-%d" % run
            check_created(create_topics(c.nodes[run % 3].port, [topic],
                                        nparts, 3), topic)
            c.wait_topic(topic, nparts)
            leaders = c.leaders(c.node(ctl).port, topic)
            counts = {b.id: sum(1 for v in leaders.values() if v == b.id)
                      for b in c.nodes if b.id != ctl}
            victim = max(counts, key=lambda k: (counts[k], k))
            survivors = [b for b in c.nodes if b.id != victim]
            alive_ids = {b.id for b in survivors}
            t0 = time.monotonic()
            c.node(victim).kill9()
            t_none, t_new, t_fenced = {}, {}, {}
            deadline = t0 + session_ms / 1000 + 60
            while len(t_new) < len(survivors) or \
                    len(t_fenced) < len(survivors):
                now = time.monotonic()
                if now > deadline:
                    raise BenchError("partitions of %s not re-led within "
                                     "%.0f s (seen %s)"
                                     % (topic, deadline - t0, t_new))
                for b in survivors:
                    md = c.poller.metadata(b.port, [topic])
                    t = (md or {}).get(topic)
                    if t and t["partitions"]:
                        lds = [ld for _, ld in t["partitions"].values()]
                        if victim not in lds and b.id not in t_none:
                            t_none[b.id] = time.monotonic() - t0
                        if topic_led(md, topic, nparts, alive_ids) and \
                                b.id not in t_new:
                            t_new[b.id] = time.monotonic() - t0
                    if b.id not in t_fenced:
                        try:
                            _, brokers = describe_cluster(b.port, 1.0)
                            if victim not in brokers:
                                t_fenced[b.id] = time.monotonic() - t0
                        except (OSError, ValueError, struct.error):
                            pass
                time.sleep(POLL_S)
            s = {"run": run, "killed": victim, "controller": ctl,
                 "led_by_killed": counts[victim],
                 "none_led_by_dead_s": round(max(t_none.values()), 4),
                 "all_new_leaders_s": round(max(t_new.values()), 4),
                 "fenced_s": round(max(t_fenced.values()), 4),
                 "per_node": {str(k): {"none_led_by_dead_s": t_none.get(k),
                                       "all_new_leaders_s": t_new.get(k),
                                       "fenced_s": t_fenced.get(k)}
                              for k in alive_ids}}
            fig["samples"].append(s)
            progress("fencing session %d ms run %d/%d: killed %d (led %d), "
                     "new leaders everywhere after %.3f s, fenced %.3f s"
                     % (session_ms, run + 1, args.fencing_runs, victim,
                        counts[victim], s["all_new_leaders_s"],
                        s["fenced_s"]))
            c.node(victim).start()
            ctl = c.wait_registered([1, 2, 3], 60)
    except BenchError as e:
        fig["error"] = str(e)
        progress("fencing: %s" % e)
    finally:
        c.close(args.keep)
    fig["stats"] = {m: spread(s[m] for s in fig["samples"])
                    for m in ("none_led_by_dead_s", "all_new_leaders_s",
                              "fenced_s")}
    return fig


def part_propagation(args, root, election_ms):
    nparts = 3
    timings = dict(E2E, election_ms=election_ms)
    fig = {"settings": dict(timings, partitions=nparts, rf=args.rf,
                            raft_heartbeat_ms=election_ms // 10),
           "runs": args.propagation_runs, "samples": []}
    c = Cluster(root / ("propagation-%d" % election_ms), args.cairn, timings)
    try:
        ctl = c.start()
        time.sleep(args.settle)
        for run in range(args.propagation_runs):
            # A random gap, so runs do not start in one phase of raft's
            # heartbeat (election/10).
            gap = _rng.uniform(0.05, 0.05 + 3 * election_ms / 10000)
            time.sleep(gap)
            topic = "prop-%d" % run
            target = c.nodes[run % 3]
            seen = {}
            t0 = time.monotonic()
            res = create_topics(target.port, [topic], nparts, args.rf)
            t_resp = time.monotonic() - t0
            check_created(res, topic)
            deadline = t0 + 30
            while len(seen) < 3:
                if time.monotonic() > deadline:
                    raise BenchError("%s not led everywhere in 30 s (seen %s)"
                                     % (topic, seen))
                for b in c.nodes:
                    if b.id not in seen and topic_led(
                            c.poller.metadata(b.port, [topic]), topic,
                            nparts):
                        seen[b.id] = time.monotonic() - t0
                time.sleep(POLL_S / 2)
            s = {"run": run, "sent_to": target.id, "controller": ctl,
                 "gap_before_s": round(gap, 3),
                 "sent_to_controller": target.id == ctl,
                 "create_answer_s": round(t_resp, 4),
                 "all_nodes_s": round(max(seen.values()), 4),
                 "first_node_s": round(min(seen.values()), 4),
                 "per_node_s": {str(k): round(v, 4) for k, v in seen.items()}}
            fig["samples"].append(s)
            progress("propagation run %d/%d via node %d%s: answer %.1f ms, "
                     "all nodes %.1f ms" % (
                         run + 1, args.propagation_runs, target.id,
                         " (controller)" if target.id == ctl else "",
                         t_resp * 1e3, s["all_nodes_s"] * 1e3))
    except BenchError as e:
        fig["error"] = str(e)
        progress("propagation: %s" % e)
    finally:
        c.close(args.keep)
    fig["stats"] = {m: spread(s[m] for s in fig["samples"])
                    for m in ("create_answer_s", "first_node_s",
                              "all_nodes_s")}
    return fig


def snapshot_stats(c, label):
    out = {}
    for b in c.nodes:
        st = b.stats()
        st["raft_dir_bytes"], st["raft_files"] = dir_bytes(b.raft_dir)
        # libraft's files: open-N (preallocated, written in place),
        # FIRST-LAST (closed segments), snapshot-* (and their .meta).
        fl = st["raft_files"]
        st["raft_open_bytes"] = sum(v for k, v in fl.items()
                                    if k.startswith("open-"))
        st["raft_snapshot_bytes"] = sum(v for k, v in fl.items()
                                        if k.startswith("snapshot-"))
        st["raft_closed_bytes"] = sum(
            v for k, v in fl.items() if re.fullmatch(r"\d+-\d+", k))
        st["raft_open_used_bytes"] = sum(
            used_bytes(b.raft_dir / k) for k in fl if k.startswith("open-"))
        if b.alive():
            try:
                q = describe_quorum(b.port)
                st["raft_high_watermark"] = q["high_watermark"]
                st["raft_epoch"] = q["epoch"]
            except (OSError, ValueError, struct.error):
                pass
        out[str(b.id)] = st
    progress("scale %s: %s" % (label, ", ".join(
        "node %s cpu %.2fs rss %s kB fds %s raft %d B" % (
            k, v.get("cpu_s", -1), v.get("rss_kb"), v.get("fds"),
            v["raft_dir_bytes"]) for k, v in out.items())))
    return out


def part_scale(args, root, rf, rep=0):
    fig = {"settings": dict(KAFKA, topics_requested=args.topics,
                            partitions=args.partitions, rf=rf,
                            topics_per_request=args.per_request),
           "samples": []}
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    fig["nofile_limit"] = hard
    c = Cluster(root / ("scale-rf%d-%d" % (rf, rep)), args.cairn, KAFKA)
    try:
        ctl = c.start()
        fig["controller"] = ctl
        time.sleep(args.idle_seconds)
        before = snapshot_stats(c, "idle")
        time.sleep(args.idle_seconds)
        before2 = snapshot_stats(c, "idle+%ds" % args.idle_seconds)
        fig["before"] = before
        fig["idle_cpu_s_per_s"] = {
            k: round((before2[k]["cpu_s"] - before[k]["cpu_s"])
                     / args.idle_seconds, 4) for k in before}
        via = next(b for b in c.nodes if b.id != ctl)
        fig["created_via"] = via.id
        made, t_create, stopped = 0, 0.0, None
        client = kw.Client(via.port, timeout=120)
        try:
            t0 = time.monotonic()
            while made < args.topics:
                chunk = min(100, args.topics - made)
                names = ["scale-%05d" % (made + i) for i in range(chunk)]
                reqs = [names[i:i + args.per_request]
                        for i in range(0, chunk, args.per_request)]
                for r in reqs:
                    client.corr += 1
                    client.sock.sendall(create_topics_request(
                        client.corr, r, args.partitions, rf, 120000))
                for r in reqs:
                    body = kw.recv_frame(client.sock)
                    if body is None:
                        raise BenchError("connection closed at %d topics"
                                         % made)
                    check_created(parse_create_topics(body), "scale")
                made += chunk
                t_create = time.monotonic() - t0
                # Open files on each node, and where the next chunk would
                # take them at the rate so far.
                nxt = min(100, args.topics - made)
                fds, proj = 0, 0
                for b in c.nodes:
                    now = b.stats().get("fds", 0)
                    rate = (now - before[str(b.id)].get("fds", 0)) / made
                    fds = max(fds, now)
                    proj = max(proj, now + rate * nxt)
                if made < args.topics and proj > hard - 512:
                    stopped = ("stopped at %d topics: %d open files on a "
                               "node, the limit is %d" % (made, fds, hard))
                    progress("scale: " + stopped)
                    break
                if made % 200 == 0 or made == args.topics:
                    progress("scale: %d topics answered, %.1f s, at most %d "
                             "open files on a node" % (made, t_create, fds))
        finally:
            client.close()
        fig["topics_created"] = made
        fig["partitions_created"] = made * args.partitions
        fig["create_answers_s"] = round(t_create, 3)
        if stopped:
            fig["stopped"] = stopped
        names = {"scale-%05d" % i for i in range(made)}

        def all_led(port):
            md = c.poller.metadata(port)
            return md is not None and all(
                topic_led(md, n, args.partitions) for n in names)
        seen = {}

        def everywhere():
            for b in c.nodes:
                if b.id not in seen and all_led(b.port):
                    seen[b.id] = time.monotonic() - t0
            return len(seen) == 3
        wait_until("every topic led on every node", everywhere,
                   args.scale_timeout, 0.1)
        fig["all_led_everywhere_s"] = round(max(seen.values()), 3)
        fig["all_led_per_node_s"] = {str(k): round(v, 3)
                                     for k, v in seen.items()}
        progress("scale: %d topics led on every node %.1f s after the "
                 "first request" % (made, fig["all_led_everywhere_s"]))
        after = snapshot_stats(c, "after")
        fig["after"] = after
        time.sleep(args.idle_seconds)
        after2 = snapshot_stats(c, "after+%ds" % args.idle_seconds)
        fig["after_idle_cpu_s_per_s"] = {
            k: round((after2[k]["cpu_s"] - after[k]["cpu_s"])
                     / args.idle_seconds, 4) for k in after}
        fig["delta_cpu_s"] = {k: round(after[k]["cpu_s"] - before2[k]["cpu_s"],
                                       2) for k in after}
        ctl = c.agreed([1, 2, 3]) or ctl
        victim = next(b for b in c.nodes if b.id != ctl)
        fig["restarted_node"] = victim.id
        for run in range(2 * args.restarts):
            # Alternately after kill -9 (the partition logs are recovered)
            # and after a clean stop (SIGTERM).
            kind = "kill9" if run % 2 == 0 else "term"
            t_stop = time.monotonic()
            if kind == "kill9":
                victim.kill9()
            else:
                victim.proc.send_signal(signal.SIGTERM)
                try:
                    victim.proc.wait(timeout=args.stop_timeout)
                except subprocess.TimeoutExpired:
                    victim.kill9()
                    kind = "term-timeout"
            t_stop = time.monotonic() - t_stop
            rc = victim.proc.returncode
            log_at = victim.log_path.stat().st_size
            t_start = victim.start(120)
            t_listen = time.monotonic() - t_start
            c.wait_registered([1, 2, 3], 300)
            t_reg = time.monotonic() - t_start
            wait_until("restarted node has every topic",
                       lambda: all_led(victim.port), 300, 0.05)
            t_md = time.monotonic() - t_start
            s = {"run": run, "after": kind, "stop_s": round(t_stop, 3),
                 "exit_code": rc,
                 "listening_s": round(t_listen, 3),
                 "registered_s": round(t_reg, 3),
                 "metadata_complete_s": round(t_md, 3),
                 "topics_load_ms": topics_load_ms(victim.log_path, log_at),
                 "node": victim.stats()}
            fig["samples"].append(s)
            progress("scale restart %d/%d of node %d after %s (stopped in "
                     "%.2f s): listening "
                     "%.2f s (local topics loaded in %s ms), registered "
                     "%.2f s, Metadata complete %.2f s"
                     % (run + 1, 2 * args.restarts, victim.id, kind, t_stop,
                        t_listen, s["topics_load_ms"], t_reg, t_md))
            time.sleep(args.settle)
    except BenchError as e:
        fig["error"] = str(e)
        progress("scale: %s" % e)
    finally:
        c.close(args.keep)
    fig["stats"] = {}
    fig["term_timeouts"] = sum(1 for s in fig["samples"]
                               if s["after"] == "term-timeout")
    for kind in ("kill9", "term"):
        for m in ("stop_s", "listening_s", "topics_load_ms", "registered_s",
                  "metadata_complete_s"):
            fig["stats"]["%s_%s" % (kind, m)] = spread(
                s[m] for s in fig["samples"] if s["after"] == kind)
    return fig


def scale_summary(reps, rf):
    """The scale part's repetitions side by side: min / median / max of
    each figure over the fresh clusters."""
    rows = []
    for f in reps:
        if not f.get("after"):
            continue
        ctl = str(f["controller"])
        others = [k for k in f["after"] if k != ctl]
        a = f["after"]
        st = f.get("stats", {})

        def med(m):
            return (st.get(m) or {}).get("median")
        rows.append({
            "create_answers_s": f["create_answers_s"],
            "all_led_everywhere_s": f["all_led_everywhere_s"],
            "controller_cpu_s": f["delta_cpu_s"][ctl],
            "other_cpu_s": max(f["delta_cpu_s"][k] for k in others),
            "rss_after_kb": max(v.get("rss_kb", 0) for v in a.values()),
            "hwm_after_kb": max(v.get("hwm_kb", 0) for v in a.values()),
            "rss_growth_kb": max(v.get("rss_kb", 0)
                                 - f["before"][k].get("rss_kb", 0)
                                 for k, v in a.items()),
            "raft_written_bytes": a[ctl].get("raft_open_used_bytes", 0)
            + a[ctl].get("raft_closed_bytes", 0)
            + a[ctl].get("raft_snapshot_bytes", 0),
            "raft_high_watermark": a[ctl].get("raft_high_watermark"),
            "restart_kill9_listening_s": med("kill9_listening_s"),
            "restart_kill9_registered_s": med("kill9_registered_s"),
            "restart_term_listening_s": med("term_listening_s"),
            "restart_term_registered_s": med("term_registered_s"),
            "term_stop_s": med("term_stop_s"),
            "term_timeouts": f.get("term_timeouts", 0),
        })
    out = {"summary_of": rf, "reps": len(reps), "rows": rows,
           "settings": reps[0]["settings"] if reps else {},
           "topics_created": [f.get("topics_created") for f in reps],
           "stats": {m: spread(r[m] for r in rows)
                     for m in (rows[0] if rows else {})}}
    errs = [f["error"] for f in reps if f.get("error")]
    if errs:
        out["error"] = "; ".join(errs)
    return out


# --------------------------------------------------------------------------
# Report

def fmt_spread(sp, scale=1.0, unit="s"):
    if not sp:
        return "-"
    f = "%.1f" if unit == "ms" else "%.3f"
    return (f + "  (" + f + " .. " + f + ") %s, n=%d") % (
        sp["median"] * scale, sp["min"] * scale, sp["max"] * scale, unit,
        sp["n"])


def table(report):
    lines = ["", "Cairn cluster mode (3 voters on loopback), %s, %s, "
             "load average %s before, %s after"
             % (report["commit"], report["started"],
                "%.1f" % report["loadavg_before"][0]
                if report.get("loadavg_before") else "?",
                "%.1f" % report["loadavg_after"][0]
                if report.get("loadavg_after") else "?"),
             "%-52s %s" % ("figure", "median  (min .. max)")]
    for key, f in report["figures"].items():
        st = f.get("stats", {})
        sets = f.get("settings", {})
        if key.startswith("election"):
            lines.append("%-52s %s" % (
                "election after kill -9, election.timeout %d ms"
                % sets["election_ms"], fmt_spread(st.get("election_s"))))
            lines.append("%-52s %s" % (
                "  killed node back, 3 registered",
                fmt_spread(st.get("restart_registered_s"))))
        elif key.startswith("fencing"):
            lines.append("%-52s %s" % (
                "broker kill -9 -> new leaders, session %d ms"
                % sets["session_ms"], fmt_spread(st.get("all_new_leaders_s"))))
            lines.append("%-52s %s" % (
                "  -> none led by the dead one",
                fmt_spread(st.get("none_led_by_dead_s"))))
            lines.append("%-52s %s" % (
                "  -> fenced (gone from DescribeCluster)",
                fmt_spread(st.get("fenced_s"))))
        elif key.startswith("propagation"):
            lines.append("%-52s %s" % (
                "CreateTopics -> led in Metadata of all 3, el. %d ms"
                % sets["election_ms"],
                fmt_spread(st.get("all_nodes_s"), 1e3, "ms")))
            lines.append("%-52s %s" % (
                "  -> led in Metadata of the first node",
                fmt_spread(st.get("first_node_s"), 1e3, "ms")))
            lines.append("%-52s %s" % ("  CreateTopics answer",
                                       fmt_spread(st.get("create_answer_s"),
                                                  1e3, "ms")))
        elif key.startswith("scale") and "summary_of" in f:
            lines.append(
                "scale summary, %d fresh clusters: %s topics x %s "
                "partitions, RF %d, Kafka's default timings"
                % (f["reps"], f["topics_created"], sets.get("partitions"),
                   f["summary_of"]))
            for m, unit, sc in (
                    ("create_answers_s", "s", 1),
                    ("all_led_everywhere_s", "s", 1),
                    ("controller_cpu_s", "s", 1), ("other_cpu_s", "s", 1),
                    ("rss_after_kb", "MB", 1e-3),
                    ("rss_growth_kb", "MB", 1e-3),
                    ("hwm_after_kb", "MB", 1e-3),
                    ("raft_written_bytes", "kB", 1e-3),
                    ("raft_high_watermark", "entries", 1),
                    ("restart_kill9_listening_s", "s", 1),
                    ("restart_kill9_registered_s", "s", 1),
                    ("restart_term_listening_s", "s", 1),
                    ("restart_term_registered_s", "s", 1),
                    ("term_stop_s", "s", 1),
                    ("term_timeouts", "", 1)):
                lines.append("%-52s %s" % ("  " + m,
                                           fmt_spread(st.get(m), sc, unit)))
        elif key.startswith("scale"):
            lines.append("scale: %s of %s topics x %d partitions, RF %d "
                         "(created via node %s; answers %s s, led "
                         "everywhere %s s)%s" % (
                             f.get("topics_created"),
                             sets.get("topics_requested"),
                             sets.get("partitions"), sets.get("rf"),
                             f.get("created_via"),
                             f.get("create_answers_s"),
                             f.get("all_led_everywhere_s"),
                             " [%s]" % f["stopped"] if f.get("stopped")
                             else ""))
            if f.get("before") and not f.get("after"):
                lines.append("  before: %s" % json.dumps(
                    {k: {m: v[m] for m in ("cpu_s", "rss_kb", "fds",
                                           "raft_dir_bytes") if m in v}
                     for k, v in f["before"].items()}))
            for k in sorted(f.get("after", {})):
                b, a = f["before"][k], f["after"][k]
                lines.append(
                    "  node %s%s: cpu +%.2f s, RSS %d -> %d kB, HWM %d kB, "
                    "fds %s -> %s, raft dir %d -> %d B (written: closed "
                    "segments %s B, open %s -> %s B, snapshots %s B; high "
                    "watermark %s -> %s), idle cpu %.3f -> %.3f s/s" % (
                        k, " (controller)" if str(f.get("controller")) == k
                        else "", f["delta_cpu_s"][k], b.get("rss_kb", 0),
                        a.get("rss_kb", 0), a.get("hwm_kb", 0),
                        b.get("fds"), a.get("fds"), b["raft_dir_bytes"],
                        a["raft_dir_bytes"], a.get("raft_closed_bytes"),
                        b.get("raft_open_used_bytes"),
                        a.get("raft_open_used_bytes"),
                        a.get("raft_snapshot_bytes"),
                        b.get("raft_high_watermark"),
                        a.get("raft_high_watermark"),
                        f["idle_cpu_s_per_s"][k],
                        f["after_idle_cpu_s_per_s"][k]))
            for kind in ("kill9", "term"):
                for m in ("listening_s", "registered_s",
                          "metadata_complete_s"):
                    lines.append("%-52s %s" % (
                        "  restart of node %s after %s: %s"
                        % (f.get("restarted_node"), kind, m),
                        fmt_spread(st.get("%s_%s" % (kind, m)))))
                if kind == "term":
                    lines.append("%-52s %s" % (
                        "    SIGTERM -> exit",
                        fmt_spread(st.get("term_stop_s"))))
                lines.append("%-52s %s" % (
                    "    its local topics loaded in",
                    fmt_spread(st.get("%s_topics_load_ms" % kind), 1,
                               "ms")))
        if f.get("error"):
            lines.append("  NOT MEASURED / cut short: %s" % f["error"])
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cairn", default=str(REPO / "build" / "cairn"))
    ap.add_argument("--dir", default=str(REPO / "bench" / "out"))
    ap.add_argument("--json", default=None,
                    help="report path (default DIR/cluster.json)")
    ap.add_argument("--only", default="election,fencing,propagation,scale")
    ap.add_argument("--election-ms", default="1000,500")
    ap.add_argument("--election-runs", type=int, default=10)
    ap.add_argument("--session-ms", default="3000,9000")
    ap.add_argument("--fencing-runs", type=int, default=5)
    ap.add_argument("--propagation-runs", type=int, default=20)
    ap.add_argument("--topics", type=int, default=1000)
    ap.add_argument("--partitions", type=int, default=10)
    ap.add_argument("--rf", type=int, default=3,
                    help="replication factor of the propagation topics")
    ap.add_argument("--scale-rf", default="3,1",
                    help="replication factors of the scale part's runs")
    ap.add_argument("--propagation-election-ms", default="500,1000")
    ap.add_argument("--scale-reps", type=int, default=3,
                    help="fresh clusters per replication factor in the "
                    "scale part")
    ap.add_argument("--per-request", type=int, default=10,
                    help="topics per CreateTopics in the scale part")
    ap.add_argument("--restarts", type=int, default=3)
    ap.add_argument("--stop-timeout", type=float, default=120.0,
                    help="seconds a SIGTERM'd node gets before kill -9 in "
                    "the scale part's restarts")
    ap.add_argument("--scale-timeout", type=float, default=300.0,
                    help="bound on the scale part's waits (s)")
    ap.add_argument("--idle-seconds", type=float, default=5.0)
    ap.add_argument("--settle", type=float, default=1.0,
                    help="seconds between a cluster settling and a run")
    ap.add_argument("--commit", default=None,
                    help="what --cairn was built from, for the report "
                    "(default: git describe of this tree)")
    ap.add_argument("--keep", action="store_true",
                    help="keep the nodes' directories and logs")
    args = ap.parse_args()

    # SIGTERM, and SIGINT also when started in the background (where the
    # shell ignores it), end the run through the finally blocks, which
    # kill every node by pid.
    def stop(signum, _frame):
        raise SystemExit("cluster.py: signal %d" % signum)
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    args.cairn = str(Path(args.cairn).resolve())
    parts = args.only.split(",")
    Path(args.dir).mkdir(parents=True, exist_ok=True)
    out = Path(args.json or Path(args.dir) / "cluster.json")
    root = Path(tempfile.mkdtemp(prefix="cairn-cluster-", dir=args.dir))
    commit = args.commit or subprocess.run(
        ["git", "-C", str(REPO), "describe", "--always", "--dirty"],
        stdout=subprocess.PIPE, text=True).stdout.strip()
    report = {"commit": commit, "cairn": args.cairn,
              "started": time.strftime("%Y-%m-%d %H:%M:%S UTC",
                                       time.gmtime()),
              "nproc": os.cpu_count(), "loadavg_before": os.getloadavg(),
              "poll_s": POLL_S, "args": vars(args), "figures": {}}
    try:
        for p in parts:
            if p == "election":
                for ms in (int(x) for x in args.election_ms.split(",")):
                    report["figures"]["election_%d" % ms] = \
                        part_election(args, root, ms)
            elif p == "fencing":
                for ms in (int(x) for x in args.session_ms.split(",")):
                    report["figures"]["fencing_%d" % ms] = \
                        part_fencing(args, root, ms)
            elif p == "propagation":
                for ms in (int(x) for x in
                           args.propagation_election_ms.split(",")):
                    report["figures"]["propagation_%d" % ms] = \
                        part_propagation(args, root, ms)
            elif p == "scale":
                for rf in (int(x) for x in args.scale_rf.split(",")):
                    reps = []
                    for i in range(args.scale_reps):
                        f = part_scale(args, root, rf, i)
                        report["figures"]["scale_rf%d_rep%d" % (rf, i)] = f
                        reps.append(f)
                        out.write_text(json.dumps(report, indent=1) + "\n")
                    report["figures"]["scale_rf%d" % rf] = \
                        scale_summary(reps, rf)
            else:
                sys.exit("--only: unknown part %r" % p)
            report["loadavg_after"] = os.getloadavg()
            out.write_text(json.dumps(report, indent=1) + "\n")
    finally:
        if args.keep:
            progress("kept %s" % root)
        else:
            shutil.rmtree(root, ignore_errors=True)
    print(table(report))
    print("\nraw samples: %s" % out)


if __name__ == "__main__":
    main()
