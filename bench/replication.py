#!/usr/bin/python3
"""What replication costs a producer (issue #14, "Benchmark").

  make bench-replication   (= /usr/bin/python3 bench/replication.py)
  /usr/bin/python3 bench/replication.py [--cairn build/cairn]
          [--build build] [--dir bench/out] [--json FILE] [--reps 5]
          [--seconds 3] [--warmup 1] [--size 1024] [--partitions 6]
          [--rate 5000,50000] [--figures throughput,latency]
          [--variants rf1_acks1,...] [--min-isr 2] [--settle 1]
          [--broker-set KEY=VALUE ...] [--kafka | --no-kafka]
          [--kafka-warmup 5] [--keep]

Three nodes on loopback, each process.roles=broker,controller, started as
bench/cluster.py starts them (Kafka's default timings; every process killed
by pid at the end), and one producer: bench_client, the librdkafka load
generator of `make bench`, timed (--warmup unmeasured seconds, then the
records whose delivery report arrives in the next --seconds count; every
delivery report is a latency sample, enqueue to report).  Records of
--size bytes round-robin over --partitions partitions, so the leaders of
every topic are spread over the three brokers.

Variants (the arms; each its own topic, made before the first run):

  rf1_acks1           replication factor 1, acks=1: the leader's append
  rf1_acksall         replication factor 1, acks=all: the leader's fsync
                      (group commit) as well
  rf3_acks1           replication factor 3, acks=1: followers copy behind
  rf3_acksall         replication factor 3, acks=all,
                      cairn.replica.sync=true (the default): answered when
                      the leader has synced and every ISR follower has
                      synced its copy and fetched again
  rf3_acksall_nosync  the same on a second cluster of three nodes with
                      cairn.replica.sync=false: a follower's appended copy
                      counts (Kafka's behaviour)

  kafka_rf1_acks1, kafka_rf1_acksall, kafka_rf3_acks1, kafka_rf3_acksall
                      the same on Apache Kafka 4.4.0: three combined
                      broker+controller JVMs (bench/peers.py KafkaBroker,
                      nodes=3: Kafka's own JVM options, -Xmx1G each),
                      default settings (no fsync)
  kafka_rf3_acksall_flush1
                      RF 3 acks=all on Kafka with the topic config
                      flush.messages=1: an fsync per append on every
                      replica, Cairn's durability

The Kafka variants run with --kafka (the default when build/java exists,
`make build-java`); --no-kafka leaves them out.  Each Cairn variant runs
next to its Kafka twin (rf1_acks1, kafka_rf1_acks1, rf1_acksall, ...), so
Cairn / Kafka is a ratio of neighbouring runs.  Before the first figure
Kafka gets one unmeasured --kafka-warmup seconds run (its JIT compiles the
hot paths; its first seconds run far slower).  The Kafka cluster's start
time (format to every broker registered) is in the JSON.

A cluster runs only when a variant needs it; it idles while the others
are measured.  Each topic is made with
min.insync.replicas=--min-isr (2; 1 for replication factor 1, which Cairn
refuses a higher value for); every broker, Kafka's too, with segments of
64 MiB and 128 MiB retention per partition (checked every 5 s), so
repeated runs do not fill the disk.  --broker-set keys not starting with
"cairn." go to Kafka's brokers as well.

Figures: "throughput" produces as fast as the client can (latency there is
mostly the client's queue: up to 64 MiB waits in librdkafka), "latency"
one figure per offered load in --rate (records per second, linger.ms 5,
librdkafka's default), below what every variant sustains, so latency is
the brokers' and not the queue's.
Each figure interleaves its variants, A B C D E A B C D E ..., --reps
times (bench/method.py), and reports per variant min / median / max of
records/s, MB/s, p50 and p99 latency and the brokers' CPU seconds per GB
(all nodes of the variant's cluster: the three JVMs' utime+stime for
Kafka), and the ratios to rf1_acks1 (Kafka's published single-producer
figures: -4% for RF 3 acks=1, -49% for acks=all, against replication
factor 1), to rf1_acksall, and rf3_acksall to rf3_acksall_nosync, each
with the same ratio measured on Kafka beside it (rf3_acksall /
rf3_acksall_nosync beside kafka_rf3_acksall_flush1 / kafka_rf3_acksall);
and Cairn / Kafka for every variant and its twin, plus rf3_acksall /
kafka_rf3_acksall_flush1 (equal durability) and rf3_acksall_nosync /
kafka_rf3_acksall (equal acknowledgement rule).  After every run the
topic's ISR is read from Metadata: a run during which the ISR shrank is
flagged (acks=all then waits for fewer copies).  Then, outside the timed
window but inside the run's CPU count, the script waits until every
follower has caught up, so the next run does not share the machine with
this one's copying; how far behind the followers were and how long they
took is part of the sample (it is what acks=1 leaves undone).  Cairn says
it in cairn_partition_follower_lag on every node's /metrics; Kafka's
replicas are asked their log end offsets (ListOffsets as a debugging
replica, id -2, which any replica answers with its LEO), or, if a broker
refuses that, its Metadata ISR being full is taken as caught up.  Produce
and follower Fetch requests per MB come from cairn_requests_total (Cairn
only).  Raw samples go to --json (bench/out/replication.json); the table
to stdout.

bench/run.py can run a reduced form as part of `make bench`:
run_for_report() measures rf1_acks1, rf3_acks1 and rf3_acksall on Cairn
and Kafka (throughput, and latency at REPORT_RATE records/s) and returns
figures shaped like bench/figures.py's, arms named cairn/<variant> and
kafka/<variant>; summary_lines() gives their plain-language lines.
"""

import argparse
import json
import os
import resource
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
import cluster as cl  # noqa: E402
import method  # noqa: E402
from cluster import kw  # noqa: E402

T0 = time.monotonic()

# (name, cluster, replication factor, acks), each Cairn variant followed
# by its Kafka twin: the order of the arms in a repetition.
VARIANTS = [
    ("rf1_acks1", "sync", 1, "1"),
    ("kafka_rf1_acks1", "kafka", 1, "1"),
    ("rf1_acksall", "sync", 1, "-1"),
    ("kafka_rf1_acksall", "kafka", 1, "-1"),
    ("rf3_acks1", "sync", 3, "1"),
    ("kafka_rf3_acks1", "kafka", 3, "1"),
    ("rf3_acksall", "sync", 3, "-1"),
    ("kafka_rf3_acksall", "kafka", 3, "-1"),
    ("rf3_acksall_nosync", "nosync", 3, "-1"),
    ("kafka_rf3_acksall_flush1", "kafka", 3, "-1"),
]
# Topic configs beyond min.insync.replicas.
TOPIC_CONFIGS = {"kafka_rf3_acksall_flush1": {"flush.messages": "1"}}
# (a, b): ratio a / b is reported for each metric.
PAIRS = [("rf1_acksall", "rf1_acks1"), ("rf3_acks1", "rf1_acks1"),
         ("rf3_acksall", "rf1_acks1"), ("rf3_acksall_nosync", "rf1_acks1"),
         ("rf3_acksall", "rf1_acksall"),
         ("rf3_acksall_nosync", "rf1_acksall"),
         ("rf3_acksall", "rf3_acksall_nosync")]


def kafka_twin(a, b):
    """The Kafka pair measuring what Cairn's pair (a, b) does, or None:
    the same variants, and for Cairn's synced / unsynced copies Kafka's
    flush.messages=1 / default."""
    if (a, b) == ("rf3_acksall", "rf3_acksall_nosync"):
        return ("kafka_rf3_acksall_flush1", "kafka_rf3_acksall")
    if "nosync" in a or "nosync" in b:
        return None
    return ("kafka_" + a, "kafka_" + b)


KAFKA_PAIRS = [kafka_twin(a, b) for a, b in PAIRS if kafka_twin(a, b)]
# Cairn / Kafka: every variant against its twin, and the two equal
# comparisons across settings: durability (Cairn syncs every copy, Kafka
# with flush.messages=1) and the acknowledgement rule (an appended copy
# counts: Cairn's nosync cluster, Kafka's default).
VERSUS = [(v, "kafka_" + v) for v in ("rf1_acks1", "rf1_acksall",
                                      "rf3_acks1", "rf3_acksall")]
VERSUS += [("rf3_acksall", "kafka_rf3_acksall_flush1"),
           ("rf3_acksall_nosync", "kafka_rf3_acksall")]
ALL_PAIRS = PAIRS + KAFKA_PAIRS + VERSUS
METRICS = ["msgs_per_s", "mb_per_s", "latency_ms_p50", "latency_ms_p99",
           "cpu_s_per_gb", "follower_lag_after_records",
           "followers_caught_up_s", "produce_requests_per_mb",
           "fetch_requests_per_mb", "client_cpu_s_per_gb", "machine_busy"]
# Kafka's published single-producer figures (Kreps, "Benchmarking Apache
# Kafka: 2 million writes per second (on three cheap machines)", 2014):
# records/s against no replication.
KAFKA_ANCHOR = {"rf3_acks1": 0.96, "rf3_acksall": 0.51}

BROKER_SETS = {
    "log.segment.bytes": str(64 << 20),
    "log.retention.bytes": str(128 << 20),
    "log.retention.check.interval.ms": "5000",
}


# run_for_report's progress function while it runs (bench/run.py's).
_SAY = []


def progress(msg):
    if _SAY:
        _SAY[-1](msg)
        return
    print("[replication %6.1fs] %s" % (time.monotonic() - T0, msg),
          file=sys.stderr, flush=True)


def java_built():
    """Kafka's jars are there (make build-java)."""
    return (REPO / "build" / "java" / "classpath.txt").exists()


def metadata_isr(port, topic, timeout=5.0):
    """{partition: (leader, replicas, isr)} of topic from Metadata v1 on
    port (kafka_wire's parser drops the lists)."""
    c = kw.Client(port, timeout=timeout)
    try:
        body = c.call(kw.metadata_request_v1, [topic])
    finally:
        c.close()
    r = kw.Reader(body)
    r.i32()
    for _ in range(r.i32()):
        r.i32()
        r.string()
        r.i32()
        r.string()
    r.i32()
    out = {}
    for _ in range(r.i32()):
        err, name = r.i16(), r.string()
        r.i8()
        for _ in range(r.i32()):
            perr, idx, leader = r.i16(), r.i32(), r.i32()
            lists = []
            for _ in range(2):
                lists.append([r.i32() for _ in range(max(r.i32(), 0))])
            if name == topic and not err and not perr:
                out[idx] = (leader, lists[0], lists[1])
    return out


def create_topic_request(corr, name, partitions, rf, configs,
                         timeout_ms=60000):
    """CreateTopics v4 (not flexible) of one topic with topic configs; the
    controller picks the replicas."""
    body = struct.pack(">i", 1) + kw.string(name)
    body += struct.pack(">ihi", partitions, rf, 0)
    body += struct.pack(">i", len(configs))
    for k, v in configs.items():
        body += kw.string(k) + kw.string(v)
    body += struct.pack(">ib", timeout_ms, 0)
    return kw.request(cl.API_CREATE_TOPICS, 4, corr, body)


def create_topic_at(port, topic, parts, rf, min_isr, extra=None):
    """CreateTopics through the broker at port (Cairn's or Kafka's), with
    min.insync.replicas capped at the replication factor."""
    configs = {"min.insync.replicas": str(min(min_isr, rf))}
    configs.update(extra or {})
    c = kw.Client(port, timeout=60)
    try:
        res = cl.parse_create_topics(c.call(create_topic_request, topic,
                                            parts, rf, configs))
    finally:
        c.close()
    cl.check_created(res, topic)


class ClusterPeer:
    """A cluster of three nodes as bench/method.py's peer: alive when all
    are, CPU and memory summed over them."""

    def __init__(self, name, root, args, extra):
        self.name = name
        sets = dict(BROKER_SETS, **extra)
        sets.update(kv.split("=", 1) for kv in args.broker_set)
        self.settings = sets
        self.min_isr = args.min_isr
        self.c = cl.Cluster(root / name, args.cairn, cl.KAFKA, extra=sets)

    @property
    def bootstrap(self):
        return ",".join("127.0.0.1:%d" % b.port for b in self.c.nodes)

    def start(self):
        ctl = self.c.start()
        progress("cluster %s: 3 registered, controller %d (%s)"
                 % (self.name, ctl, self.bootstrap))

    def alive(self):
        return all(b.alive() for b in self.c.nodes)

    def cpu_seconds(self):
        vals = [b.stats().get("cpu_s") for b in self.c.nodes]
        return None if None in vals else sum(vals)

    def memory_kb(self):
        st = [b.stats() for b in self.c.nodes]
        return {"rss_kb": sum(s.get("rss_kb", 0) for s in st),
                "hwm_kb": sum(s.get("hwm_kb", 0) for s in st)}

    def create(self, topic, parts, rf, extra=None):
        port = self.c.nodes[0].port
        create_topic_at(port, topic, parts, rf, self.min_isr, extra)
        self.c.wait_topic(topic, parts)

        def full():
            md = metadata_isr(port, topic)
            return len(md) == parts and all(
                len(isr) == rf for _, _, isr in md.values())
        cl.wait_until("%s: ISR of %d everywhere" % (topic, rf), full, 30)

    def isr_sizes(self, topic):
        try:
            md = metadata_isr(self.c.nodes[0].port, topic)
        except (OSError, ValueError, struct.error):
            return None
        return sorted(len(isr) for _, _, isr in md.values())

    def metrics(self):
        """Every node's /metrics text, or None for a node that does not
        answer."""
        out = []
        for b in self.c.nodes:
            url = "http://127.0.0.1:%d/metrics" % b.http_port
            try:
                with urllib.request.urlopen(url, timeout=5) as r:
                    out.append(r.read().decode(errors="replace"))
            except OSError:
                out.append(None)
        return out

    def requests(self):
        """{api: requests} summed over the nodes (cairn_requests_total):
        with only this producer running, Fetch is the followers'."""
        tot = {}
        for text in self.metrics():
            for line in (text or "").splitlines():
                if line.startswith('cairn_requests_total{api="'):
                    api = line.split('"')[1]
                    tot[api] = tot.get(api, 0) + int(float(
                        line.rsplit(" ", 1)[1]))
        return tot

    def follower_lag(self, topic):
        """Sum over the topic's partitions of cairn_partition_follower_lag
        from every node's /metrics (each leader reports its followers), or
        None when a node has no such metric."""
        total, seen = 0, False
        pat = 'cairn_partition_follower_lag{topic="%s",' % topic
        for text in self.metrics():
            if text is None:
                return None
            for line in text.splitlines():
                if line.startswith(pat):
                    seen = True
                    total += int(float(line.rsplit(" ", 1)[1]))
        return total if seen else None

    def settle(self, topic, rf, timeout=120.0):
        return settle(self, topic, rf, timeout)

    def close(self, keep):
        self.c.close(keep)


def settle(peer, topic, rf, timeout=120.0):
    """Waits until every follower of topic has the leaders' whole log
    (so the next run does not share the machine with a catch-up);
    returns the seconds it took, the lag it started from and the lag
    left (None: not known)."""
    t0 = time.monotonic()
    lag0 = lag = peer.follower_lag(topic) if rf > 1 else None
    while lag and time.monotonic() - t0 < timeout:
        time.sleep(0.05)
        lag = peer.follower_lag(topic)
    return round(time.monotonic() - t0, 3), lag0, lag


def list_offsets_debug_request(corr, topic, partitions):
    """ListOffsets v1 as a debugging replica (replica id -2) for the
    latest offset of partitions: any replica answers, not only the
    leader, and Kafka gives a request that is not a consumer's the log
    end offset rather than the high watermark."""
    body = struct.pack(">i", -2)
    body += struct.pack(">i", 1) + kw.string(topic)
    body += struct.pack(">i", len(partitions))
    for p in partitions:
        body += struct.pack(">iq", p, kw.LATEST_TIMESTAMP)
    return kw.request(kw.API_LIST_OFFSETS, 1, corr, body)


class KafkaClusterPeer:
    """Apache Kafka 4.4.0, three combined broker+controller nodes on
    loopback (peers.KafkaBroker(nodes=3): tests/e2e/kafka_ref.RefKafka
    with Kafka's own JVM options), as bench/method.py's peer: alive when
    all three JVMs are, CPU (utime+stime) and memory summed over them."""

    name = "kafka"

    def __init__(self, root, args):
        import peers
        self.pe = peers
        sets = dict(BROKER_SETS)
        sets["auto.create.topics.enable"] = "false"
        for kv in args.broker_set:
            k, v = kv.split("=", 1)
            if not k.startswith("cairn."):
                sets[k] = v
        self.settings = sets
        self.min_isr = args.min_isr
        self.dir = Path(root) / "kafka"
        self.k = peers.KafkaBroker(self.dir, nodes=3, server_props=sets)
        self.ports = list(self.k.ref.ports)   # node id i + 1 at ports[i]
        self.start_seconds = None
        self.lag_by = None                    # "log end offsets" or "isr"

    @property
    def bootstrap(self):
        return self.k.bootstrap

    def start(self):
        self.k.start(timeout=120)
        self.start_seconds = round(self.k.ref.start_seconds, 1)
        progress("cluster kafka: 3 JVMs ready in %.1f s (%s)"
                 % (self.start_seconds, self.bootstrap))

    def procs(self):
        return self.k.ref.procs

    def alive(self):
        return bool(self.procs()) and all(p.poll() is None
                                          for p in self.procs())

    def cpu_seconds(self):
        vals = [self.pe.proc_cpu_seconds(p.pid) for p in self.procs()]
        return None if not vals or None in vals else sum(vals)

    def memory_kb(self):
        st = [self.pe.proc_memory_kb(p.pid) for p in self.procs()]
        return {"rss_kb": sum(s.get("rss_kb", 0) for s in st),
                "hwm_kb": sum(s.get("hwm_kb", 0) for s in st)}

    def create(self, topic, parts, rf, extra=None):
        create_topic_at(self.ports[0], topic, parts, rf, self.min_isr, extra)

        def full():
            # Every broker knows every partition's leader and a full ISR.
            for port in self.ports:
                md = metadata_isr(port, topic)
                if len(md) != parts or not all(
                        ldr >= 0 and len(isr) == rf
                        for ldr, _, isr in md.values()):
                    return False
            return True
        cl.wait_until("%s: led, ISR of %d everywhere" % (topic, rf), full,
                      60)

    def isr_sizes(self, topic):
        try:
            md = metadata_isr(self.ports[0], topic)
        except (OSError, ValueError, struct.error):
            return None
        return sorted(len(isr) for _, _, isr in md.values())

    def requests(self):
        return None          # no cairn_requests_total; JMX is not read

    def log_end_offsets(self, topic, md):
        """{(node, partition): log end offset} of every replica, or None
        when a broker does not answer or refuses (then the ISR counts)."""
        out = {}
        for i, port in enumerate(self.ports):
            node = i + 1
            mine = [p for p, (_, reps, _) in md.items() if node in reps]
            if not mine:
                continue
            c = kw.Client(port, timeout=5)
            try:
                _, res = kw.parse_list_offsets_v1(c.call(
                    list_offsets_debug_request, topic, mine))
            finally:
                c.close()
            for p in mine:
                err, off = res.get((topic, p), (-1, -1))
                if err:
                    return None
                out[(node, p)] = off
        return out

    def follower_lag(self, topic):
        """Records the followers are behind their leaders, summed over the
        partitions' replicas (as cairn_partition_follower_lag), from every
        replica's log end offset; if the brokers do not give those, 1
        while any ISR is short and 0 once all are full (Kafka keeps a
        follower up to replica.lag.time.max.ms behind in the ISR, so that
        is weaker).  None when the brokers do not answer."""
        try:
            md = metadata_isr(self.ports[0], topic)
            leo = None if self.lag_by == "isr" else \
                self.log_end_offsets(topic, md)
        except (OSError, ValueError, struct.error, ConnectionError):
            return None
        if leo is None:
            if self.lag_by is None:
                progress("  kafka: no log end offsets from ListOffsets "
                         "(replica -2); follower catch-up = full ISR")
            self.lag_by = "isr"
            return 0 if all(len(isr) == len(reps)
                            for _, reps, isr in md.values()) else 1
        self.lag_by = "log end offsets"
        total = 0
        for p, (leader, reps, _) in md.items():
            for r in reps:
                if r != leader and (leader, p) in leo and (r, p) in leo:
                    total += max(0, leo[(leader, p)] - leo[(r, p)])
        return total

    def settle(self, topic, rf, timeout=120.0):
        return settle(self, topic, rf, timeout)

    def close(self, keep):
        try:
            self.k.stop()           # SIGKILL by pid: throw-away data
        except (OSError, subprocess.TimeoutExpired):
            pass
        if not keep:
            shutil.rmtree(self.dir, ignore_errors=True)


def cpu_times():
    """(busy, total) jiffies of all cores from /proc/stat."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:9]]
    except (OSError, ValueError):
        return None
    return sum(v) - v[3] - v[4], sum(v)


def run_prog(argv, timeout):
    """The last JSON line of a bench program, or None (reported), with
    "client_cpu_s" (the program's user + system CPU seconds) and
    "machine_busy" (the share of every core busy while it ran, whoever
    used it: other work on the machine included)."""
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    m0 = cpu_times()
    try:
        res = subprocess.run([str(a) for a in argv], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True,
                             timeout=timeout)
    except subprocess.TimeoutExpired:
        progress("  %s: timed out after %d s" % (argv[0], timeout))
        return None
    if res.returncode != 0:
        progress("  %s: exited %d: %s" % (argv[0], res.returncode,
                                          res.stderr.strip()[-300:]))
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    m1 = cpu_times()
    for line in reversed(res.stdout.splitlines()):
        if line.startswith("{"):
            try:
                rec = json.loads(line)
            except ValueError:
                break
            rec["client_cpu_s"] = round(ru1.ru_utime + ru1.ru_stime
                                        - ru0.ru_utime - ru0.ru_stime, 3)
            if m0 and m1 and m1[1] > m0[1]:
                rec["machine_busy"] = round((m1[0] - m0[0])
                                            / (m1[1] - m0[1]), 3)
            return rec
    return None


def arm_of(args, fig, variant, peer, rf, acks, rate, name=None):
    """The arm of one variant in figure fig (its own topic, made now);
    name is the arm's name (default: the variant's)."""
    topic = "repl-%s-%s" % (fig, variant)
    peer.create(topic, args.partitions, rf, TOPIC_CONFIGS.get(variant))

    def run(p, rep):
        argv = [Path(args.build) / "bench_client", "--brokers", p.bootstrap,
                "--topic", topic, "--partitions", args.partitions,
                "--size", args.size, "--acks", acks, "--produce-only",
                "--seconds", args.seconds, "--warmup-seconds", args.warmup]
        if rate:
            argv += ["--rate", rate, "--linger-ms", "5"]
        req0 = p.requests()
        rec = run_prog(argv, 120 + 4 * (args.seconds + args.warmup))
        if rec is None:
            return None
        rec.pop("series_mb_per_s", None)
        rec["bytes_total"] = rec.get("delivered", 0) * args.size
        if rec.get("produced"):
            rec["client_cpu_s_per_gb"] = round(
                rec["client_cpu_s"] / (rec["produced"] * args.size / 1e9), 3)
        rec["isr_sizes_after"] = p.isr_sizes(topic)
        if rec["isr_sizes_after"] and min(rec["isr_sizes_after"]) < rf:
            rec["isr_shrunk"] = True
            progress("  %s: ISR shrank to %s during the run"
                     % (variant, rec["isr_sizes_after"]))
        # Outside the timed window, so the next run does not share the
        # machine with this one's catch-up; inside method.measure's CPU
        # count, which is right: copying is this variant's work.
        secs, lag0, lag = p.settle(topic, rf)
        rec["follower_lag_after_records"] = lag0
        rec["followers_caught_up_s"] = secs
        if lag:
            rec["followers_not_caught_up"] = lag
            progress("  %s: followers still %d records behind after %.0f s"
                     % (variant, lag, secs))
        # Requests of the whole run, warm-up, flush and catch-up included:
        # Produce requests per MB and the followers' Fetch requests per MB
        # (per follower copy) produced.
        req1 = p.requests()
        mb = rec.get("produced", 0) * args.size / 1e6
        if mb and req0 and req1:
            for api, key in (("Produce", "produce_requests_per_mb"),
                             ("Fetch", "fetch_requests_per_mb")):
                n = req1.get(api, 0) - req0.get(api, 0)
                copies = 1 if api == "Produce" else rf - 1
                rec[key] = round(n / mb / copies, 3) if copies else None
        if rf > 1 and getattr(p, "lag_by", None):
            rec["followers_caught_up_by"] = p.lag_by
        time.sleep(args.settle)
        return rec
    return method.Arm(name or variant, peer, run)


def kafka_warm_up(args, peer):
    """One unmeasured run on Kafka before any figure (RF 3, acks=all):
    the JIT compiles Kafka's hot paths, so the first repetition is not a
    start-up measurement (as bench/figures.py's warm_up)."""
    if args.kafka_warmup <= 0:
        return
    topic = "repl-warmup"
    peer.create(topic, args.partitions, 3)
    progress("kafka warm-up: %g s of RF 3 acks=all, not measured"
             % args.kafka_warmup)
    run_prog([Path(args.build) / "bench_client", "--brokers",
              peer.bootstrap, "--topic", topic, "--partitions",
              args.partitions, "--size", args.size, "--acks", "-1",
              "--produce-only", "--seconds", args.kafka_warmup],
             120 + 2 * args.kafka_warmup)
    peer.settle(topic, 3)


def start_peers(args, variants, root, report):
    """Starts the clusters the variants need: {cluster: peer}.  A Kafka
    cluster that does not start is reported and its variants dropped
    (variants is edited in place); Cairn's failing is fatal."""
    peers = {}
    for name, extra in (("sync", {}),
                        ("nosync", {"cairn.replica.sync": "false"})):
        if any(v[1] == name for v in variants):
            peers[name] = ClusterPeer(name, root, args, extra)
            peers[name].start()
    if any(v[1] == "kafka" for v in variants):
        k = KafkaClusterPeer(root, args)
        try:
            k.start()
        except (RuntimeError, OSError) as e:
            k.close(args.keep)
            report["kafka_error"] = str(e)[-2000:]
            progress("Kafka did not start, its variants left out: %s"
                     % str(e)[-500:])
            variants[:] = [v for v in variants if v[1] != "kafka"]
        else:
            peers["kafka"] = k
            report["kafka_start_seconds"] = k.start_seconds
            try:
                kafka_warm_up(args, k)
            except cl.BenchError as e:
                progress("kafka warm-up: %s" % e)
    report["broker_settings"] = {n: p.settings for n, p in peers.items()}
    return peers


def run_figure(args, fig, label, rate, variants, peers, pairs, metrics,
               rename=None, extra=None):
    """One figure: every variant an arm, --reps interleaved repetitions,
    summarised over metrics with the ratios of pairs (of variant names;
    rename maps a variant's name to its arm's)."""
    rename = rename or (lambda v: v)
    progress("%s: %s, %s, %d x (%g + %g s)"
             % (fig, label, ", ".join(v[0] for v in variants),
                args.reps, args.warmup, args.seconds))
    head = {"key": fig, "label": label, "rate": rate, "size": args.size,
            "partitions": args.partitions}
    head.update(extra or {})
    try:
        arms = [arm_of(args, fig, v, peers[c], rf, acks, rate, rename(v))
                for v, c, rf, acks in variants]
    except cl.BenchError as e:
        progress("%s: %s" % (fig, e))
        return dict(head, arms=[], samples={}, error=str(e))
    f = method.measure(dict(head, describe=describe), arms, args.reps,
                       progress)
    names = {v[0] for v in variants}
    method.summarise(f, metrics, [(rename(a), rename(b)) for a, b in pairs
                                  if a in names and b in names])
    return f


def describe(rec):
    s = "%.0f rec/s, %.1f MB/s, p50 %.1f ms, p99 %.1f ms" % (
        rec.get("msgs_per_s", 0), rec.get("mb_per_s", 0),
        rec.get("latency_ms_p50", 0), rec.get("latency_ms_p99", 0))
    if rec.get("cpu_s_per_gb") is not None:
        s += ", brokers %.2f CPU s/GB" % rec["cpu_s_per_gb"]
    if rec.get("failed"):
        s += ", %d failed" % rec["failed"]
    return s


def _cells(fig, a, b, metrics):
    return "; ".join("%s %s" % (short, method.fmt_ratio(
        method.find_ratio(fig, m, a, b))) for m, short in metrics)


RATIO_CELLS = (("msgs_per_s", "rec/s"), ("latency_ms_p50", "p50"),
               ("latency_ms_p99", "p99"))


def table(report):
    lines = ["", "Replication cost, Cairn %s, %s, %d cores, load average "
             "%.1f before, %.1f after; %d B records on %d partitions, "
             "%d reps of %g + %g s"
             % (report["commit"], report["started"], report["nproc"],
                report["loadavg_before"][0],
                report.get("loadavg_after", [0])[0],
                report["args"]["size"], report["args"]["partitions"],
                report["args"]["reps"], report["args"]["warmup"],
                report["args"]["seconds"])]
    if report.get("kafka_start_seconds") is not None:
        lines.append("Kafka 4.4.0: 3 combined broker+controller JVMs "
                     "(-Xmx1G each), ready %.1f s after the start"
                     % report["kafka_start_seconds"])
    if report.get("kafka_error"):
        lines.append("Kafka NOT MEASURED: %s"
                     % report["kafka_error"].splitlines()[0])
    for key, fig in report["figures"].items():
        st = fig.get("stats", {})
        lines.append("")
        lines.append("%s (%s)" % (key, fig["label"]))
        lines.append("%-25s %-26s %-22s %-22s %-22s %s" % (
            "variant", "records/s", "MB/s", "p50 ms", "p99 ms",
            "CPU s/GB (3 nodes)"))
        for arm in fig["arms"]:
            def sp(m, spec="%.1f"):
                return method.fmt_spread(st.get(m, {}).get(arm), spec)
            lines.append("%-25s %-26s %-22s %-22s %-22s %s" % (
                arm, sp("msgs_per_s", "%.0f"), sp("mb_per_s"),
                sp("latency_ms_p50"), sp("latency_ms_p99"),
                sp("cpu_s_per_gb", "%.2f")))
        arms = set(fig["arms"])
        lines.append("ratios (a / b: ratio of medians (pairs: median, "
                     "min-max)); Kafka's same ratio under Cairn's")
        for a, b in PAIRS:
            twin = kafka_twin(a, b)
            for x, y in ((a, b), twin or (None, None)):
                if x not in arms or y not in arms:
                    continue
                anchor = KAFKA_ANCHOR.get(a) if b == "rf1_acks1" else None
                lines.append("  %-24s / %-18s %s%s" % (
                    x, y, _cells(fig, x, y, RATIO_CELLS),
                    "  [published: %.2f]" % anchor
                    if anchor and x == a else ""))
        versus = [(a, b) for a, b in VERSUS if a in arms and b in arms]
        if versus:
            lines.append("Cairn / Kafka")
            for a, b in versus:
                lines.append("  %-18s / %-24s %s" % (
                    a, b, _cells(fig, a, b, RATIO_CELLS + (
                        ("cpu_s_per_gb", "CPU s/GB"),))))
        for arm in fig["arms"]:
            lines.append("  %s: producer %s CPU s/GB; all cores %s busy" % (
                arm, method.fmt_spread(
                    st.get("client_cpu_s_per_gb", {}).get(arm), "%.2f"),
                method.fmt_spread(st.get("machine_busy", {}).get(arm),
                                  "%.2f")))
        for arm in fig["arms"]:
            pr = st.get("produce_requests_per_mb", {}).get(arm)
            fr = st.get("fetch_requests_per_mb", {}).get(arm)
            if pr:
                lines.append(
                    "  %s: per MB produced %s Produce requests%s" % (
                        arm, method.fmt_spread(pr, "%.2f"),
                        ", %s follower Fetch requests per copy"
                        % method.fmt_spread(fr, "%.2f") if fr else ""))
        for arm in fig["arms"]:
            lag = st.get("follower_lag_after_records", {}).get(arm)
            if lag and lag["max"]:
                lines.append(
                    "  %s: followers %s records behind (sum over replicas) "
                    "when the run ended, caught up %s s later" % (
                        arm, method.fmt_spread(lag, "%.0f"),
                        method.fmt_spread(st["followers_caught_up_s"][arm],
                                          "%.2f")))
        by_isr = sorted({a for a, ss in fig["samples"].items() for x in ss
                         if x.get("followers_caught_up_by") == "isr"})
        if by_isr:
            lines.append("  %s: caught up = ISR full (no log end offsets)"
                         % ", ".join(by_isr))
        shrunk = sum(1 for ss in fig["samples"].values() for s in ss
                     if s.get("isr_shrunk"))
        if shrunk:
            lines.append("  %d runs ended with a shrunk ISR" % shrunk)
        if fig.get("error"):
            lines.append("  NOT MEASURED / cut short: %s" % fig["error"])
    return "\n".join(lines)


# ---- as a part of bench/run.py (make bench) -----------------------------

REPORT_VARIANTS = ["rf1_acks1", "rf3_acks1", "rf3_acksall"]
REPORT_RATE = 5000          # records/s of the latency figure: below what
                            # Kafka RF 3 acks=all kept up with on this
                            # machine under load (10000 it did not)
REPORT_METRICS = ["mb_per_s", "latency_ms_p50", "latency_ms_p99",
                  "cpu_s_per_gb"]
REPORT_LABELS = {"rf1_acks1": "RF 1 acks=1", "rf3_acks1": "RF 3 acks=1",
                 "rf3_acksall": "RF 3 acks=all"}


def report_name(variant):
    """cairn/<variant> or kafka/<variant>: figures.py's peer/workload
    arm names, so its chart and labels know the peer."""
    if variant.startswith("kafka_"):
        return "kafka/" + variant[len("kafka_"):]
    return "cairn/" + variant


def run_for_report(build, cairn, workdir, opts, progress_fn, kafka=True):
    """bench/run.py's replication part: a three-node Cairn cluster and
    (kafka and build/java there) a three-node Kafka 4.4.0 cluster, both
    measured with RF 1 acks=1, RF 3 acks=1 and RF 3 acks=all, 1 KiB over
    6 partitions; a throughput figure and a latency figure at
    REPORT_RATE records/s, each opts["reps"] interleaved repetitions of
    opts["warmup"] + opts["seconds"] (opts["jvm_warmup"]: Kafka's
    unmeasured first run; opts["scale"] is not used: the part is timed,
    not counted).  Returns the figures (figures.run_produce's shape:
    key, label, kind, samples, stats, ratios; arms cairn/<variant> and
    kafka/<variant>); every process it started is killed before it
    returns."""
    args = parser().parse_args([])
    args.cairn = str(Path(cairn).resolve())
    args.build = str(Path(build).resolve())
    args.reps = int(opts["reps"])
    args.seconds = float(opts["seconds"])
    args.warmup = float(opts["warmup"])
    args.kafka_warmup = float(opts.get("jvm_warmup", args.kafka_warmup))
    args.kafka = bool(kafka) and java_built()
    wanted = set(REPORT_VARIANTS) | {"kafka_" + v for v in REPORT_VARIANTS}
    variants = [v for v in VARIANTS if v[0] in wanted
                and (args.kafka or v[1] != "kafka")]
    root = Path(tempfile.mkdtemp(prefix="replication-", dir=str(workdir)))
    _SAY.append(progress_fn)
    info, figs, peers = {}, [], {}
    t0 = time.monotonic()
    try:
        peers = start_peers(args, variants, root, info)
        for key, rate, label in (
                ("replication_tput", 0, "as fast as one producer goes"),
                ("replication_latency", REPORT_RATE,
                 "at %d records/s" % REPORT_RATE)):
            extra = {"kind": "produce", "clusters": "3 nodes each",
                     "kafka_start_seconds": info.get("kafka_start_seconds"),
                     "kafka_error": info.get("kafka_error"),
                     "broker_settings": info.get("broker_settings")}
            f = run_figure(args, key, "replication 1 KiB, 3 nodes each, %s"
                           % label, rate,
                           variants, peers, ALL_PAIRS, REPORT_METRICS,
                           report_name, extra)
            if rate and f.get("stats"):
                # As figures.run_produce's latency_1k: an arm that did not
                # keep up measured its queue, not the brokers.
                offered = rate * args.size / 1e6
                f["offered_mb_per_s"] = offered
                f["kept_up"] = {
                    a: bool(st) and st["median"] >= 0.9 * offered
                    for a, st in f["stats"]["mb_per_s"].items()}
                # MB/s is the offered load here, not a result: no ratios
                # of it (figures.chart would draw them).
                f["ratios"] = [r for r in f["ratios"]
                               if r["metric"] != "mb_per_s"]
            figs.append(f)
    finally:
        for p in peers.values():
            p.close(False)
        shutil.rmtree(root, ignore_errors=True)
        _SAY.pop()
    for f in figs:
        f["part_seconds"] = round(time.monotonic() - t0, 1)
    return figs


def summary_lines(figs):
    """Plain-language lines of run_for_report's figures (figures.py's
    said_line): Cairn vs Kafka per variant, and what RF 3 costs each."""
    import figures
    lines = []
    by = {f.get("key"): f for f in figs}

    def said(what, r, higher_better=True):
        line = figures.said_line(what, r, higher_better)
        if line:
            lines.append(line)
    f = by.get("replication_tput")
    if f:
        for v in REPORT_VARIANTS:
            c, k = report_name(v), report_name("kafka_" + v)
            said("replication %s, 3 nodes, Cairn vs Kafka, MB/s"
                 % REPORT_LABELS[v],
                 method.find_ratio(f, "mb_per_s", c, k))
            said("replication %s, 3 nodes, Cairn vs Kafka, CPU s/GB of "
                 "all three (lower is better)" % REPORT_LABELS[v],
                 method.find_ratio(f, "cpu_s_per_gb", c, k), False)
        for v in ("rf3_acks1", "rf3_acksall"):
            cells = []
            for peer in ("cairn", "kafka"):
                r = method.find_ratio(f, "mb_per_s", peer + "/" + v,
                                      peer + "/rf1_acks1")
                if r:
                    cells.append("%s %s" % (peer.capitalize(),
                                            method.fmt_ratio(r)))
            if cells:
                lines.append("replication %s / RF 1 acks=1, MB/s: %s "
                             "(Kafka's published: %.2f)"
                             % (REPORT_LABELS[v], "; ".join(cells),
                                KAFKA_ANCHOR[v]))
    f = by.get("replication_latency")
    if f:
        for v in REPORT_VARIANTS:
            c, k = report_name(v), report_name("kafka_" + v)
            slow = [a for a in (c, k)
                    if not f.get("kept_up", {}).get(a, True)]
            said("replication %s at %d records/s, Cairn vs Kafka, p99 "
                 "(lower is better)%s"
                 % (REPORT_LABELS[v], f.get("rate", REPORT_RATE),
                    "; did not keep up: " + ", ".join(slow) if slow
                    else ""),
                 method.find_ratio(f, "latency_ms_p99", c, k), False)
    return lines


def parser():
    ap = argparse.ArgumentParser(
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cairn", default=str(REPO / "build" / "cairn"))
    ap.add_argument("--build", default=None,
                    help="where bench_client is (default: --cairn's "
                    "directory)")
    ap.add_argument("--dir", default=str(REPO / "bench" / "out"))
    ap.add_argument("--json", default=None,
                    help="report path (default DIR/replication.json)")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--warmup", type=float, default=1.0)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--rate", default="5000,50000",
                    help="records/s of the latency figures, "
                    "comma-separated: one figure each")
    ap.add_argument("--figures", default="throughput,latency")
    ap.add_argument("--variants", default=",".join(v[0] for v in VARIANTS))
    ap.add_argument("--kafka", action=argparse.BooleanOptionalAction,
                    default=None,
                    help="the kafka_* variants (default: on when "
                    "build/java exists, make build-java)")
    ap.add_argument("--kafka-warmup", type=float, default=5.0,
                    help="seconds of the unmeasured Kafka run before the "
                    "first figure (0: none)")
    ap.add_argument("--min-isr", type=int, default=2)
    ap.add_argument("--settle", type=float, default=1.0,
                    help="seconds between runs, after the followers have "
                    "caught up")
    ap.add_argument("--broker-set", action="append", default=[],
                    metavar="KEY=VALUE",
                    help="a broker config for every node of every cluster "
                    "(repeatable; keys starting with cairn. not on Kafka's), "
                    "e.g. replica.fetch.max.bytes=8388608")
    ap.add_argument("--commit", default=None)
    ap.add_argument("--keep", action="store_true")
    return ap


def main():
    args = parser().parse_args()

    def stop(signum, _frame):
        raise SystemExit("replication.py: signal %d" % signum)
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    args.cairn = str(Path(args.cairn).resolve())
    args.build = str(Path(args.build or Path(args.cairn).parent).resolve())
    wanted = args.variants.split(",")
    unknown = set(wanted) - {v[0] for v in VARIANTS}
    if unknown:
        sys.exit("--variants: unknown %s" % sorted(unknown))
    if args.kafka is None:
        args.kafka = java_built()
        if not args.kafka:
            progress("no build/java (make build-java): Cairn only")
    variants = [v for v in VARIANTS if v[0] in wanted
                and (args.kafka or v[1] != "kafka")]
    figures = args.figures.split(",")
    rates = [int(x) for x in args.rate.split(",")]
    runs = []
    for fig in figures:
        if fig == "throughput":
            runs.append((fig, 0))
        elif fig == "latency":
            runs += [("latency_%d" % r, r) for r in rates]
        else:
            sys.exit("--figures: unknown %r" % fig)
    Path(args.dir).mkdir(parents=True, exist_ok=True)
    out = Path(args.json or Path(args.dir) / "replication.json")
    root = Path(tempfile.mkdtemp(prefix="cairn-replication-", dir=args.dir))
    commit = args.commit or subprocess.run(
        ["git", "-C", str(REPO), "describe", "--always", "--dirty"],
        stdout=subprocess.PIPE, text=True).stdout.strip()
    report = {"commit": commit, "cairn": args.cairn,
              "started": time.strftime("%Y-%m-%d %H:%M:%S UTC",
                                       time.gmtime()),
              "nproc": os.cpu_count(), "loadavg_before": os.getloadavg(),
              "args": vars(args), "variants": variants,
              "kafka_anchor": KAFKA_ANCHOR, "figures": {}}
    peers = {}
    try:
        peers = start_peers(args, variants, root, report)
        for fig, rate in runs:
            label = ("as fast as one producer goes" if not rate else
                     "offered %d records/s" % rate)
            report["figures"][fig] = run_figure(
                args, fig, label, rate, variants, peers, ALL_PAIRS, METRICS)
            report["loadavg_after"] = os.getloadavg()
            out.write_text(json.dumps(report, indent=1) + "\n")
    finally:
        for p in peers.values():
            p.close(args.keep)
        if args.keep:
            progress("kept %s" % root)
        else:
            shutil.rmtree(root, ignore_errors=True)
    report["loadavg_after"] = os.getloadavg()
    out.write_text(json.dumps(report, indent=1) + "\n")
    print(table(report))
    print("\nraw samples: %s" % out)


if __name__ == "__main__":
    main()
