#!/usr/bin/python3
"""What replication costs a producer (issue #14, "Benchmark").

  make bench-replication   (= /usr/bin/python3 bench/replication.py)
  /usr/bin/python3 bench/replication.py [--cairn build/cairn]
          [--build build] [--dir bench/out] [--json FILE] [--reps 5]
          [--seconds 3] [--warmup 1] [--size 1024] [--partitions 6]
          [--rate 5000,50000] [--figures throughput,latency]
          [--variants rf1_acks1,...] [--min-isr 2] [--settle 1]
          [--broker-set KEY=VALUE ...] [--keep]

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

The second cluster runs only when a variant needs it; it idles while the
first is measured and the other way round.  Each topic is made with
min.insync.replicas=--min-isr (2; 1 for replication factor 1, which Cairn
refuses a higher value for); every broker with segments of 64 MiB and
128 MiB retention per partition (checked every 5 s), so repeated runs do
not fill the disk.

Figures: "throughput" produces as fast as the client can (latency there is
mostly the client's queue: up to 64 MiB waits in librdkafka), "latency"
one figure per offered load in --rate (records per second, linger.ms 5,
librdkafka's default), below what every variant sustains, so latency is
the brokers' and not the queue's.
Each figure interleaves its variants, A B C D E A B C D E ..., --reps
times (bench/method.py), and reports per variant min / median / max of
records/s, MB/s, p50 and p99 latency and the brokers' CPU seconds per GB
(all nodes of the variant's cluster), and the ratios to rf1_acks1 (Kafka's
published single-producer figures: -4% for RF 3 acks=1, -49% for acks=all,
against replication factor 1), to rf1_acksall, and rf3_acksall to
rf3_acksall_nosync.  After every run the topic's ISR is read from
Metadata: a run during which the ISR shrank is flagged (acks=all then
waits for fewer copies).  Then, outside the timed window but inside the
run's CPU count, the script waits until every follower has caught up
(cairn_partition_follower_lag on every node's /metrics is 0), so the next
run does not share the machine with this one's copying; how far behind
the followers were and how long they took is part of the sample (it is
what acks=1 leaves undone).  Produce and follower Fetch requests per MB
come from cairn_requests_total.  Raw samples go to --json
(bench/out/replication.json); the table to stdout.
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

# (name, cluster, replication factor, acks)
VARIANTS = [
    ("rf1_acks1", "sync", 1, "1"),
    ("rf1_acksall", "sync", 1, "-1"),
    ("rf3_acks1", "sync", 3, "1"),
    ("rf3_acksall", "sync", 3, "-1"),
    ("rf3_acksall_nosync", "nosync", 3, "-1"),
]
# (a, b): ratio a / b is reported for each metric.
PAIRS = [("rf1_acksall", "rf1_acks1"), ("rf3_acks1", "rf1_acks1"),
         ("rf3_acksall", "rf1_acks1"), ("rf3_acksall_nosync", "rf1_acks1"),
         ("rf3_acksall", "rf1_acksall"),
         ("rf3_acksall_nosync", "rf1_acksall"),
         ("rf3_acksall", "rf3_acksall_nosync")]
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


def progress(msg):
    print("[replication %6.1fs] %s" % (time.monotonic() - T0, msg),
          file=sys.stderr, flush=True)


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

    def create(self, topic, parts, rf):
        port = self.c.nodes[0].port
        configs = {"min.insync.replicas": str(min(self.min_isr, rf))}
        c = kw.Client(port, timeout=60)
        try:
            res = cl.parse_create_topics(c.call(create_topic_request, topic,
                                                parts, rf, configs))
        finally:
            c.close()
        cl.check_created(res, topic)
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
        """Waits until every follower of topic has the leaders' whole log
        (so the next run does not share the machine with a catch-up);
        returns the seconds it took and the lag it started from."""
        t0 = time.monotonic()
        lag0 = lag = self.follower_lag(topic) if rf > 1 else None
        while lag and time.monotonic() - t0 < timeout:
            time.sleep(0.05)
            lag = self.follower_lag(topic)
        return round(time.monotonic() - t0, 3), lag0, lag

    def close(self, keep):
        self.c.close(keep)


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


def arm_of(args, fig, variant, peer, rf, acks, rate):
    topic = "repl-%s-%s" % (fig, variant)
    peer.create(topic, args.partitions, rf)

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
        time.sleep(args.settle)
        return rec
    return method.Arm(variant, peer, run)


def describe(rec):
    s = "%.0f rec/s, %.1f MB/s, p50 %.1f ms, p99 %.1f ms" % (
        rec.get("msgs_per_s", 0), rec.get("mb_per_s", 0),
        rec.get("latency_ms_p50", 0), rec.get("latency_ms_p99", 0))
    if rec.get("cpu_s_per_gb") is not None:
        s += ", brokers %.2f CPU s/GB" % rec["cpu_s_per_gb"]
    if rec.get("failed"):
        s += ", %d failed" % rec["failed"]
    return s


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
    for key, fig in report["figures"].items():
        st = fig.get("stats", {})
        lines.append("")
        lines.append("%s (%s)" % (key, fig["label"]))
        lines.append("%-20s %-26s %-22s %-22s %-22s %s" % (
            "variant", "records/s", "MB/s", "p50 ms", "p99 ms",
            "CPU s/GB (3 nodes)"))
        for arm in fig["arms"]:
            def sp(m, spec="%.1f"):
                return method.fmt_spread(st.get(m, {}).get(arm), spec)
            lines.append("%-20s %-26s %-22s %-22s %-22s %s" % (
                arm, sp("msgs_per_s", "%.0f"), sp("mb_per_s"),
                sp("latency_ms_p50"), sp("latency_ms_p99"),
                sp("cpu_s_per_gb", "%.2f")))
        lines.append("ratios (a / b: ratio of medians (pairs: median, "
                     "min-max))")
        for a, b in PAIRS:
            if a not in fig["arms"] or b not in fig["arms"]:
                continue
            cells = []
            for m, short in (("msgs_per_s", "rec/s"),
                             ("latency_ms_p50", "p50"),
                             ("latency_ms_p99", "p99")):
                cells.append("%s %s" % (short, method.fmt_ratio(
                    method.find_ratio(fig, m, a, b))))
            anchor = KAFKA_ANCHOR.get(a) if b == "rf1_acks1" else None
            lines.append("  %-18s / %-18s %s%s" % (
                a, b, "; ".join(cells),
                "  [Kafka: %.2f]" % anchor if anchor else ""))
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
        shrunk = sum(1 for ss in fig["samples"].values() for s in ss
                     if s.get("isr_shrunk"))
        if shrunk:
            lines.append("  %d runs ended with a shrunk ISR" % shrunk)
        if fig.get("error"):
            lines.append("  NOT MEASURED / cut short: %s" % fig["error"])
    return "\n".join(lines)


def main():
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
    ap.add_argument("--min-isr", type=int, default=2)
    ap.add_argument("--settle", type=float, default=1.0,
                    help="seconds between runs, after the followers have "
                    "caught up")
    ap.add_argument("--broker-set", action="append", default=[],
                    metavar="KEY=VALUE",
                    help="a broker config for every node of both clusters "
                    "(repeatable), e.g. replica.fetch.max.bytes=8388608")
    ap.add_argument("--commit", default=None)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()

    def stop(signum, _frame):
        raise SystemExit("replication.py: signal %d" % signum)
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    args.cairn = str(Path(args.cairn).resolve())
    args.build = str(Path(args.build or Path(args.cairn).parent).resolve())
    wanted = args.variants.split(",")
    variants = [v for v in VARIANTS if v[0] in wanted]
    unknown = set(wanted) - {v[0] for v in VARIANTS}
    if unknown:
        sys.exit("--variants: unknown %s" % sorted(unknown))
    figures = args.figures.split(",")
    rates = [int(x) for x in args.rate.split(",")]
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
        for name, extra in (("sync", {}),
                            ("nosync", {"cairn.replica.sync": "false"})):
            if any(v[1] == name for v in variants):
                peers[name] = ClusterPeer(name, root, args, extra)
                peers[name].start()
        report["broker_settings"] = {n: p.settings for n, p in peers.items()}
        runs = []
        for fig in figures:
            if fig == "throughput":
                runs.append((fig, 0))
            elif fig == "latency":
                runs += [("latency_%d" % r, r) for r in rates]
            else:
                sys.exit("--figures: unknown %r" % fig)
        for fig, rate in runs:
            label = ("as fast as one producer goes" if not rate else
                     "offered %d records/s" % rate)
            progress("%s: %s, %s, %d x (%g + %g s)"
                     % (fig, label, ", ".join(v[0] for v in variants),
                        args.reps, args.warmup, args.seconds))
            try:
                arms = [arm_of(args, fig, v, peers[c], rf, acks, rate)
                        for v, c, rf, acks in variants]
            except cl.BenchError as e:
                report["figures"][fig] = {"label": label, "arms": [],
                                          "samples": {}, "error": str(e)}
                progress("%s: %s" % (fig, e))
                continue
            f = method.measure({"key": fig, "label": label, "rate": rate,
                                "describe": describe}, arms, args.reps,
                               progress)
            method.summarise(f, METRICS, PAIRS)
            report["figures"][fig] = f
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
