"""The benchmark's compared figures (issue #17): each is a set of arms (a
peer from peers.py running a workload) measured with method.py, so every
figure is a median of interleaved repetitions with its peers.

  produce   librdkafka producer, timed runs, 6 partitions: acks=all 1 KiB
            (every peer), acks=all 100 B, acks=1 1 KiB, and acks=all 1 KiB
            at a fixed 20k records/s for latency at the same load
  idem_txn  acks=all at 5 in flight, idempotent, transactional committing
            every 10 and 100 ms and every 1000 records, 1 KiB, 6
            partitions: Cairn and Kafka, all interleaved, so txn /
            idempotent is a ratio of neighbouring runs too
  consume   librdkafka consumer and the raw Fetch client bench_fetch_raw
            over a pre-filled topic (page-cached)
  commit    commit latency: transactions of one record on 1 and on 16
            partitions
  jvm       (opt-in) Kafka's ProducerPerformance, the JVM client, 1 KiB
            acks=all against Cairn and Kafka
  steady    long runs of 1 KiB acks=all per peer interleaved with the
            synced-disk limit measured the same way, MB/s per second; the
            steady rate is the median of the second half
"""

import json
import re
import statistics
import subprocess
import time

import method

SIZE = 1024
PARTITIONS = 6
COMMIT_PARTITIONS = 16
COMMIT_TRANSACTIONS = 200

# (figure key, label, size, bench_client args, peers)
PRODUCE = [
    ("acksall_1k", "produce acks=all 1 KiB", 1024, ["--acks", "-1"],
     ["cairn", "cairn-nofsync", "kafka", "kafka-flush1", "mock"]),
    ("acksall_100", "produce acks=all 100 B", 100, ["--acks", "-1"],
     ["cairn", "kafka", "kafka-flush1"]),
    ("acks1_1k", "produce acks=1 1 KiB", 1024, ["--acks", "1"],
     ["cairn", "kafka"]),
    # The same offered load on every broker, below what each sustains, so
    # latency is the broker's and not the client's queue (at full speed
    # the queue dominates p99).  linger.ms 5 is librdkafka's default.
    ("latency_1k", "produce acks=all 1 KiB at 20k records/s", 1024,
     ["--acks", "-1", "--rate", "20000", "--linger-ms", "5"],
     ["cairn", "kafka", "kafka-flush1"]),
]
# Left out of the default run (20 minutes): figure -> the --only part
# that adds it.
OPT_IN_FIGURES = {"acks1_1k": "acks1", "acksall_100": "acks100"}
# (workload, label, program, args)
IDEM_TXN = [
    ("inflight5", "acks=all 5 in flight (Cairn only)", "bench_client",
     ["--acks", "-1", "--max-in-flight", "5"]),
    ("idempotent", "idempotent", "bench_client", ["--acks", "-1",
                                                  "--idempotent"]),
    ("txn_10ms", "txn every 10 ms", "bench_txn",
     ["--commit-interval-ms", "10"]),
    ("txn_100ms", "txn every 100 ms", "bench_txn",
     ["--commit-interval-ms", "100"]),
    ("txn_1000rec", "txn every 1000 records", "bench_txn",
     ["--txn-records", "1000"]),
]
IDEM_TXN_PEERS = ["cairn", "kafka"]
CONSUME_PEERS = ["cairn", "kafka"]   # the mock keeps only ~5 MB/partition
COMMIT_PEERS = ["cairn", "kafka"]
STEADY_PEERS = ["cairn", "kafka", "kafka-flush1"]
# Issue #17's targets, each a ratio measured in the same run.
TARGETS = {"durable_vs_disk": 0.8, "vs_kafka_default": 1.0,
           "vs_kafka_flush1": 1.5, "txn_10ms": 0.9, "txn_100ms": 0.98,
           "commit_p99_over_p50": 3.0, "cpu_vs_kafka": 1 / 3.0,
           "p99_vs_kafka": 1 / 3.0}


def json_lines(text):
    out = []
    for line in (text or "").splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
    return out


def run_prog(argv, timeout, progress):
    """A bench program's JSON lines; a failure is reported, not fatal."""
    try:
        res = subprocess.run([str(a) for a in argv], stdout=subprocess.PIPE,
                             text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else e.stdout
        progress("  %s: timed out after %d s" % (argv[0], timeout))
        return json_lines(out)
    if res.returncode != 0:
        progress("  %s: exited %d" % (argv[0], res.returncode))
    return json_lines(res.stdout)


def topic_name(fig, arm):
    return "b-%s-%s" % (fig, arm.replace("/", "-"))


def describe_produce(rec):
    s = "%.1f MB/s" % rec.get("mb_per_s", 0)
    if "latency_ms_p99" in rec:
        s += ", latency p99 %.1f ms" % rec["latency_ms_p99"]
    if "achieved_interval_ms" in rec:
        s = "%.1f MB/s, commit every %.1f ms (%d records), commit p99 %.1f " \
            "ms" % (rec["mb_per_s"], rec["achieved_interval_ms"],
                    rec["records_per_txn"], rec["commit_ms_p99"])
    if rec.get("cpu_s_per_gb") is not None:
        s += ", broker %.2f CPU s/GB" % rec["cpu_s_per_gb"]
    return s


class Ctx:
    """What every part needs: peers by name, programs, timing, progress."""

    def __init__(self, peers, build, opts, progress):
        self.peers = peers          # name -> started Peer
        self.build = build
        self.o = opts               # reps, seconds, warmup, steady, scale
        self.progress = progress

    def have(self, names):
        # cairn-base (--base-cairn: the same broker built from another
        # commit) runs wherever Cairn does, interleaved with it.
        out = []
        for n in names:
            if n in self.peers:
                out.append(self.peers[n])
            if n == "cairn" and "cairn-base" in self.peers:
                out.append(self.peers["cairn-base"])
        return out


def all_topics():
    """Every topic any mock arm uses (the mock cannot create topics)."""
    out = []
    for key, _, _, _, peers in PRODUCE:
        if "mock" in peers:
            out.append((topic_name(key, "mock"), PARTITIONS))
    return out


def _timed_arm(ctx, fig, arm_name, peer, prog, args, size, topics,
               partitions=PARTITIONS):
    """An arm running a timed producer (bench_client or bench_txn).  Each
    run gets a new topic, deleted after it (files gone) outside the
    run's count: runs start alike, and at 1 GB/s five runs of five peers
    would not fit on the disk.  The mock keeps one topic (it has only the
    topics it started with, in memory)."""
    base = topic_name(fig, arm_name)
    if not peer.can_create:
        topics.append((peer, base))
    o = ctx.o

    def topic_of(rep):
        return base if not peer.can_create else "%s-r%d" % (base, rep)

    def before(p, rep):
        p.create_topic(topic_of(rep), partitions)

    def after(p, rep):
        p.delete_topic_wait(topic_of(rep))

    def run(p, rep):
        argv = [ctx.build / prog, "--brokers", p.bootstrap, "--topic",
                topic_of(rep), "--partitions", partitions, "--size", size,
                "--seconds", o["seconds"], "--warmup-seconds", o["warmup"]]
        if prog == "bench_client":
            argv.append("--produce-only")
        recs = run_prog(argv + args, 120 + 4 * o["seconds"], ctx.progress)
        if not recs:
            return None
        rec = recs[-1]
        rec["bytes_total"] = rec.get("delivered", 0) * size
        return rec
    if not peer.can_create:
        return method.Arm(arm_name, peer, run)
    return method.Arm(arm_name, peer, run, before=before, after=after)


def _drop_topics(topics):
    for peer, topic in topics:
        if peer.alive():
            peer.delete_topic_wait(topic)


def warm_up(ctx):
    """One unmeasured run per JVM peer before any figure: the JVM
    compiles its hot paths (Kafka's first seconds run at a fraction of its
    speed), so the first figure's first repetition is not a start-up
    measurement."""
    secs = ctx.o["jvm_warmup"]
    for p in ctx.peers.values():
        topic = topic_name("warmup", p.name)
        if not getattr(p, "jvm", False):
            continue
        p.create_topic(topic, PARTITIONS)
        ctx.progress("warm-up: %s, %g s of 1 KiB acks=all, not measured"
                     % (p.name, secs))
        run_prog([ctx.build / "bench_client", "--brokers", p.bootstrap,
                  "--topic", topic, "--partitions", PARTITIONS, "--size",
                  SIZE, "--acks", "-1", "--produce-only", "--seconds", secs],
                 secs + 120, ctx.progress)
        p.delete_topic_wait(topic)


def run_produce(ctx):
    figs = []
    for key, label, size, args, names in PRODUCE:
        if key in OPT_IN_FIGURES:
            if OPT_IN_FIGURES[key] not in ctx.o.get("extra", ()):
                continue
        elif not ctx.o.get("produce_default", True):
            continue
        peers = ctx.have(names)
        if not peers:
            continue
        ctx.progress("%s, %d partitions: %s, %d x (%g + %g s)"
                     % (label, PARTITIONS, ", ".join(p.name for p in peers),
                        ctx.o["reps"], ctx.o["warmup"], ctx.o["seconds"]))
        topics = []
        arms = [_timed_arm(ctx, key, p.name, p, "bench_client", args, size,
                           topics) for p in peers]
        fig = method.measure({"key": key, "label": label, "size": size,
                              "partitions": PARTITIONS, "kind": "produce",
                              "describe": describe_produce},
                             arms, ctx.o["reps"], ctx.progress)
        _drop_topics(topics)
        pairs = [("cairn", a.name) for a in arms if a.name != "cairn"]
        if "cairn-nofsync" in fig["arms"]:
            pairs += [("cairn-nofsync", a.name) for a in arms
                      if a.name.startswith("kafka")]
        method.summarise(fig, ["mb_per_s", "latency_ms_p50",
                               "latency_ms_p99", "cpu_s_per_gb"], pairs)
        if "--rate" in args:
            # A peer that cannot keep up with the offered load measures its
            # queue, not its latency: say so beside the figure.
            offered = float(args[args.index("--rate") + 1]) * size / 1e6
            fig["offered_mb_per_s"] = offered
            fig["kept_up"] = {
                arm: bool(st) and st["median"] >= 0.9 * offered
                for arm, st in fig["stats"]["mb_per_s"].items()}
        figs.append(fig)
    return figs


def run_idem_txn(ctx):
    peers = ctx.have(IDEM_TXN_PEERS)
    if not peers:
        return []
    ctx.progress("idempotent and transactional produce, 1 KiB, %d "
                 "partitions: %s, %d x (%g + %g s)"
                 % (PARTITIONS, ", ".join(p.name for p in peers),
                    ctx.o["reps"], ctx.o["warmup"], ctx.o["seconds"]))
    topics, arms = [], []
    for p in peers:
        for w, _, prog, args in IDEM_TXN:
            if w == "inflight5" and (p.name != "cairn" or "inflight5" not in
                                     ctx.o.get("extra", ())):
                continue     # opt-in: the baseline of #4's idempotent target
            arms.append(_timed_arm(ctx, "it", "%s/%s" % (p.name, w), p, prog,
                                   args, SIZE, topics))
    fig = method.measure({"key": "idem_txn", "kind": "produce",
                          "label": "idempotent and transactional 1 KiB",
                          "size": SIZE, "partitions": PARTITIONS,
                          "workloads": [w[0] for w in IDEM_TXN],
                          "describe": describe_produce},
                         arms, ctx.o["reps"], ctx.progress)
    _drop_topics(topics)
    pairs = []
    pairs.append(("cairn/idempotent", "cairn/inflight5"))
    for p in peers:
        for w in ("txn_10ms", "txn_100ms", "txn_1000rec"):
            pairs.append(("%s/%s" % (p.name, w), "%s/idempotent" % p.name))
    names = [p.name for p in peers]
    for other in ("kafka", "cairn-base"):
        if other in names:
            for w, _, _, _ in IDEM_TXN[1:]:
                pairs.append(("cairn/%s" % w, "%s/%s" % (other, w)))
    method.summarise(fig, ["mb_per_s", "latency_ms_p99", "cpu_s_per_gb",
                           "commit_ms_p99", "achieved_interval_ms"], pairs)
    return [fig]


def run_consume(ctx):
    peers = ctx.have(CONSUME_PEERS)
    if not peers:
        return []
    # 6 GB per peer: one pass takes 3 s or more at ~2 GB/s, the method's
    # shortest run, and both peers' topics stay in the page cache.
    n = max(10000, int(6000000 * ctx.o["scale"]))
    topics, arms = [], []
    for p in peers:
        topic = topic_name("consume", p.name)
        topics.append((p, topic))
        p.create_topic(topic, PARTITIONS)
        ctx.progress("%s: filling %s with %d x %d B" % (p.name, topic, n,
                                                        SIZE))
        run_prog([ctx.build / "bench_client", "--brokers", p.bootstrap,
                  "--topic", topic, "--partitions", PARTITIONS, "--messages",
                  n, "--size", SIZE, "--acks", "-1", "--produce-only"], 600,
                 ctx.progress)

        def run(peer, rep, topic=topic):
            for rec in run_prog(
                    [ctx.build / "bench_client", "--brokers", peer.bootstrap,
                     "--topic", topic, "--partitions", PARTITIONS,
                     "--messages", n, "--size", SIZE, "--consume-only"], 300,
                    ctx.progress):
                if rec.get("test") == "fetch":
                    rec["bytes_total"] = rec["consumed"] * SIZE
                    return rec
            return None

        def raw(peer, rep, topic=topic):
            # The broker's fetch path alone: one connection, 50 MiB
            # Fetch requests, batches not parsed (bench_fetch_raw).
            recs = run_prog([ctx.build / "bench_fetch_raw", "--brokers",
                             peer.bootstrap, "--topic", topic, "--passes",
                             1, "--max-bytes", 50 << 20], 300, ctx.progress)
            if not recs:
                return None
            recs[-1]["bytes_total"] = recs[-1]["bytes"]
            return recs[-1]
        arms.append(method.Arm(p.name + "/librdkafka", p, run))
        arms.append(method.Arm(p.name + "/raw_fetch", p, raw))
    ctx.progress("consume %d x %d B, librdkafka: %s, %d reps"
                 % (n, SIZE, ", ".join(p.name for p in peers),
                    ctx.o["reps"]))
    fig = method.measure({"key": "consume_1k", "kind": "consume",
                          "label": "consume 1 KiB (page-cached)",
                          "size": SIZE, "partitions": PARTITIONS,
                          "records": n, "describe": describe_produce},
                         arms, ctx.o["reps"], ctx.progress)
    _drop_topics(topics)
    method.summarise(fig, ["mb_per_s", "cpu_s_per_gb"],
                     [("cairn/" + w, "kafka/" + w)
                      for w in ("librdkafka", "raw_fetch")])
    return [fig]


def run_commit(ctx):
    peers = ctx.have(COMMIT_PEERS)
    if not peers:
        return []
    txns = max(20, int(COMMIT_TRANSACTIONS * min(1.0, ctx.o["scale"] * 2)))
    topics, arms = [], []
    for p in peers:
        topic = topic_name("commit", p.name)
        topics.append((p, topic))
        p.create_topic(topic, COMMIT_PARTITIONS)
        for k in (1, COMMIT_PARTITIONS):
            def run(peer, rep, topic=topic, k=k):
                recs = run_prog(
                    [ctx.build / "bench_txn", "--brokers", peer.bootstrap,
                     "--topic", topic, "--partitions", COMMIT_PARTITIONS,
                     "--commit-latency", "--partitions-per-txn", k,
                     "--transactions", txns], 300, ctx.progress)
                return recs[-1] if recs else None
            arms.append(method.Arm("%s/%dp" % (p.name, k), p, run))
    ctx.progress("commit latency, %d transactions of one record on 1 and "
                 "%d partitions: %s, %d reps"
                 % (txns, COMMIT_PARTITIONS,
                    ", ".join(p.name for p in peers), ctx.o["reps"]))
    fig = method.measure(
        {"key": "commit", "kind": "latency", "transactions": txns,
         "label": "transaction commit latency",
         "describe": lambda r: "p50 %.2f ms p99 %.2f ms" % (
             r.get("p50_ms", 0), r.get("p99_ms", 0))},
        arms, ctx.o["reps"], ctx.progress)
    _drop_topics(topics)
    pairs = [("cairn/%dp" % k, "%s/%dp" % (p.name, k))
             for p in peers if p.name != "cairn"
             for k in (1, COMMIT_PARTITIONS)]
    method.summarise(fig, ["p50_ms", "p99_ms"], pairs)
    return [fig]


JVM_PEERS = ["cairn", "kafka"]
JVM_RECORDS = 500000
PERF_LINE = re.compile(
    r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), "
    r"([\d.]+) ms avg latency, ([\d.]+) ms max latency, (\d+) ms 50th, "
    r"(\d+) ms 95th, (\d+) ms 99th")


def run_jvm(ctx):
    """Kafka's own producer perf tool (org.apache.kafka.tools.
    ProducerPerformance, the JVM client) against Cairn and Kafka: 1 KiB
    acks=all as fast as it goes.  It counts records, not seconds, and its
    figures include the JVM client's start-up; opt-in (--only jvm)."""
    import peers as pe
    peers = ctx.have(JVM_PEERS)
    if not peers:
        return []
    _, java_harness = pe._kafka_ref()
    cp = java_harness.classpath()
    n = max(20000, int(JVM_RECORDS * ctx.o["scale"]))
    topics, arms = [], []
    for p in peers:
        topic = topic_name("jvm", p.name)
        topics.append((p, topic))
        p.create_topic(topic, PARTITIONS)

        def run(peer, rep, topic=topic):
            res = subprocess.run(
                ["java", "-cp", cp, "org.apache.kafka.tools."
                 "ProducerPerformance", "--topic", topic, "--num-records",
                 str(n), "--record-size", str(SIZE), "--throughput", "-1",
                 "--command-property",
                 "bootstrap.servers=%s" % peer.bootstrap, "acks=all"],
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT, text=True, timeout=600)
            m = None
            for line in res.stdout.splitlines():
                m = PERF_LINE.search(line) or m
            if not m:
                ctx.progress("  ProducerPerformance: no summary line:\n%s"
                             % res.stdout[-1500:])
                return None
            return {"test": "jvm_produce", "records": int(m.group(1)),
                    "msgs_per_s": float(m.group(2)),
                    "mb_per_s": float(m.group(3)) * 1.048576,
                    "latency_ms_avg": float(m.group(4)),
                    "latency_ms_max": float(m.group(5)),
                    "latency_ms_p50": float(m.group(6)),
                    "latency_ms_p95": float(m.group(7)),
                    "latency_ms_p99": float(m.group(8)),
                    "bytes_total": int(m.group(1)) * SIZE}
        arms.append(method.Arm(p.name, p, run))
    ctx.progress("JVM client (ProducerPerformance), %d x %d B acks=all: %s, "
                 "%d reps" % (n, SIZE, ", ".join(p.name for p in peers),
                              ctx.o["reps"]))
    fig = method.measure({"key": "jvm_1k", "kind": "produce",
                          "label": "JVM producer (Kafka's perf tool) "
                          "acks=all 1 KiB", "size": SIZE,
                          "partitions": PARTITIONS, "records": n,
                          "describe": describe_produce},
                         arms, ctx.o["reps"], ctx.progress)
    _drop_topics(topics)
    method.summarise(fig, ["mb_per_s", "latency_ms_p99", "cpu_s_per_gb"],
                     [("cairn", a.name) for a in arms if a.name != "cairn"])
    return [fig]


def steady_rate(series):
    """Median MB/s of the second half of a per-second series."""
    if not series:
        return None
    half = series[len(series) // 2:]
    return round(statistics.median(half), 1)


class DiskLimit:
    """The synced-disk limit as an arm of the steady figure: bench_limits
    writing 256 KiB chunks with an fdatasync after each, for as long as a
    peer's run, so the limit is measured the same way and at the same
    moments as the brokers (A B C D A B C D ...)."""

    name = "disk"
    label = "synced disk (bench_limits)"
    can_create = False

    def __init__(self, disk_dir):
        self.dir = disk_dir

    def alive(self):
        return True

    def cpu_seconds(self):
        return None

    def memory_kb(self):
        return {}


def run_steady(ctx, disk_dir):
    """Long 1 KiB acks=all runs per peer, interleaved with the synced-disk
    limit measured the same way: a cache in front of the disk absorbs the
    first seconds of every run, at up to twice the rate the disk sustains,
    so a run's steady rate is the median of the second half of its
    per-second series."""
    secs = ctx.o["steady"]
    reps = ctx.o.get("steady_reps", ctx.o["reps"])
    disk = DiskLimit(disk_dir)

    def run_disk(p, rep):
        recs = run_prog([ctx.build / "bench_limits", "--dir", disk_dir,
                         "--seconds", secs, "--only", "disk"], secs + 60,
                        ctx.progress)
        if not recs:
            return None
        rec = recs[-1]
        rec["steady_mb_per_s"] = steady_rate(rec.get("series_mb_per_s"))
        return rec

    topics = []
    saved, ctx.o = ctx.o, dict(ctx.o, seconds=secs, warmup=0)
    try:
        arms = [method.Arm("disk", disk, run_disk)]
        for p in ctx.have(STEADY_PEERS):
            arm = _timed_arm(ctx, "steady", p.name, p, "bench_client",
                             ["--acks", "-1"], SIZE, topics)

            def run(peer, rep, inner=arm.run):
                rec = inner(peer, rep)
                if rec:
                    rec["steady_mb_per_s"] = steady_rate(
                        rec.get("series_mb_per_s"))
                return rec
            arm.run = run
            arms.append(arm)
        ctx.progress("steady state: synced-disk limit and %s, 1 KiB "
                     "acks=all, %d x %g s, interleaved" % (
                         ", ".join(a.name for a in arms[1:]), reps, secs))
        fig = method.measure(
            {"key": "steady", "kind": "steady", "seconds": secs,
             "label": "steady state, 1 KiB acks=all, %g s runs (steady = "
             "median of the second half)" % secs,
             "describe": lambda r: "%.0f MB/s overall, steady %s MB/s; per "
             "second %s" % (r.get("mb_per_s", 0), r.get("steady_mb_per_s"),
                            r.get("series_mb_per_s"))},
            arms, reps, ctx.progress)
    finally:
        ctx.o = saved
    _drop_topics(topics)
    pairs = [(a.name, "disk") for a in arms[1:]]
    names = [a.name for a in arms]
    pairs += [("cairn", n) for n in ("kafka", "kafka-flush1") if n in names
              and "cairn" in names]
    method.summarise(fig, ["steady_mb_per_s", "mb_per_s", "cpu_s_per_gb"],
                     pairs)
    return fig


# ---- the report ---------------------------------------------------------

PEER_LABELS = {"cairn": "Cairn", "cairn-nofsync": "Cairn without fsync",
               "cairn-base": "Cairn at --base-cairn",
               "kafka": "Kafka (defaults, no fsync)",
               "kafka-flush1": "Kafka flush.messages=1",
               "mock": "librdkafka mock"}


def _arm_label(fig, arm):
    if "/" in arm:
        peer, w = arm.split("/", 1)
        return "%s %s" % (PEER_LABELS.get(peer, peer), w)
    return PEER_LABELS.get(arm, arm)


def print_figures(figs):
    for fig in figs:
        print()
        print("%s (%d reps; min / median / max)" % (
            fig["label"], max([len(v) for v in fig["samples"].values()]
                              or [0])))
        metrics = list(fig.get("stats", {}))
        print("  %-34s %s" % ("", "  ".join("%-24s" % m for m in metrics)))
        for arm in fig["arms"]:
            cols = []
            for m in metrics:
                cols.append("%-24s" % method.fmt_spread(
                    fig["stats"][m].get(arm),
                    "%.2f" if m.endswith("ms") or "gb" in m else "%.1f"))
            print("  %-34s %s" % (arm, "  ".join(cols)))
        if "offered_mb_per_s" in fig:
            print("  offered %.1f MB/s; kept up: %s" % (
                fig["offered_mb_per_s"], ", ".join(
                    "%s %s" % (a, "yes" if ok else "NO")
                    for a, ok in fig["kept_up"].items())))
        for r in fig.get("ratios", []):
            print("  %-12s %s / %s: %s" % (r["metric"], r["a"], r["b"],
                                          method.fmt_ratio(r)))


def _r(fig, m, a, b):
    return method.find_ratio(fig, m, a, b) if fig else None


def said_line(what, r, higher_better=True):
    """One summary sentence for a ratio: "ahead", "behind", or "even" when
    the per-pair range straddles 1.0; None without a ratio."""
    if not r:
        return None
    x = r["ratio_of_medians"]
    good = x >= 1 if higher_better else x <= 1
    word = "ahead " if good else "behind"
    if r.get("pair_min", x) <= 1 <= r.get("pair_max", x):
        word = "even  "     # neighbouring runs disagree on the sign
    return "%s %s: %.2fx (per-pair median %.2f, %.2f-%.2f)" % (
        word, what, x,
        r.get("pair_median", x), r.get("pair_min", x),
        r.get("pair_max", x))


def summary_lines(figs, limits):
    """Plain-language sentences: where Cairn is ahead or behind."""
    lines = []
    by = {f["key"]: f for f in figs}

    def said(what, r, higher_better=True):
        line = said_line(what, r, higher_better)
        if line:
            lines.append(line)
    for key in ("acksall_1k", "acksall_100", "acks1_1k"):
        f = by.get(key)
        if not f:
            continue
        for peer in ("kafka", "kafka-flush1", "mock"):
            said("%s, Cairn vs %s, MB/s" % (f["label"], PEER_LABELS[peer]),
                 _r(f, "mb_per_s", "cairn", peer))
        said("%s, Cairn vs Kafka, broker CPU s/GB (lower is better)"
             % f["label"], _r(f, "cpu_s_per_gb", "cairn", "kafka"), False)
    f = by.get("latency_1k")
    if f:
        for peer in ("kafka", "kafka-flush1"):
            slow = [n for n in ("cairn", peer)
                    if not f.get("kept_up", {}).get(n, True)]
            said("produce latency p99 at 20k records/s, Cairn vs %s (lower "
                 "is better)%s" % (PEER_LABELS[peer], "; did not keep up "
                                   "with the load: " + ", ".join(slow)
                                   if slow else ""),
                 _r(f, "latency_ms_p99", "cairn", peer), False)
    f = by.get("idem_txn")
    if f:
        for w in ("idempotent", "txn_10ms", "txn_100ms", "txn_1000rec"):
            said("%s, Cairn vs Kafka, MB/s" % w,
                 _r(f, "mb_per_s", "cairn/" + w, "kafka/" + w))
        for w in ("txn_10ms", "txn_100ms"):
            said("Cairn %s / Cairn idempotent, MB/s" % w,
                 _r(f, "mb_per_s", "cairn/" + w, "cairn/idempotent"))
    f = by.get("jvm_1k")
    if f:
        said("JVM producer acks=all 1 KiB, Cairn vs Kafka, MB/s",
             _r(f, "mb_per_s", "cairn", "kafka"))
    f = by.get("consume_1k")
    if f:
        for w in ("librdkafka", "raw_fetch"):
            said("consume 1 KiB (%s), Cairn vs Kafka, MB/s" % w,
                 _r(f, "mb_per_s", "cairn/" + w, "kafka/" + w))
            said("consume 1 KiB (%s), Cairn vs Kafka, broker CPU s/GB "
                 "(lower is better)" % w,
                 _r(f, "cpu_s_per_gb", "cairn/" + w, "kafka/" + w), False)
    f = by.get("commit")
    if f:
        said("commit latency p50, 1 partition, Cairn vs Kafka (lower is "
             "better)", _r(f, "p50_ms", "cairn/1p", "kafka/1p"), False)
    f = by.get("steady")
    if f:
        for peer in ("cairn", "kafka", "kafka-flush1"):
            r = _r(f, "steady_mb_per_s", peer, "disk")
            if r:
                lines.append(
                    "steady state 1 KiB acks=all over %g s runs, %s / synced "
                    "disk: %.2f (per-pair %.2f-%.2f)" % (
                        f["seconds"], PEER_LABELS.get(peer, peer),
                        r["ratio_of_medians"], r.get("pair_min", 0),
                        r.get("pair_max", 0)))
        for peer in ("kafka", "kafka-flush1"):
            said("steady state 1 KiB acks=all, Cairn vs %s, MB/s"
                 % PEER_LABELS[peer], _r(f, "steady_mb_per_s", "cairn",
                                         peer))
    return lines


def verdicts(figs):
    """The issue's targets, checked; {name: {value, target, ok}}."""
    out = {}
    by = {f["key"]: f for f in figs}

    def check(name, r, target, at_least=True):
        if not r:
            return
        v = r["ratio_of_medians"]
        out[name] = {"value": v, "target": target, "at_least": at_least,
                     "pair_min": r.get("pair_min"),
                     "pair_max": r.get("pair_max"),
                     "ok": v >= target if at_least else v <= target}
    f = by.get("acksall_1k")
    check("cairn_vs_kafka_default", _r(f, "mb_per_s", "cairn", "kafka"),
          TARGETS["vs_kafka_default"])
    check("cairn_vs_kafka_flush1", _r(f, "mb_per_s", "cairn",
                                      "kafka-flush1"),
          TARGETS["vs_kafka_flush1"])
    check("cpu_per_gb_vs_kafka", _r(f, "cpu_s_per_gb", "cairn", "kafka"),
          TARGETS["cpu_vs_kafka"], False)
    check("p99_vs_kafka_same_load", _r(by.get("latency_1k"),
                                       "latency_ms_p99", "cairn", "kafka"),
          TARGETS["p99_vs_kafka"], False)
    f = by.get("idem_txn")
    check("txn_10ms_vs_idempotent", _r(f, "mb_per_s", "cairn/txn_10ms",
                                       "cairn/idempotent"),
          TARGETS["txn_10ms"])
    check("txn_100ms_vs_idempotent", _r(f, "mb_per_s", "cairn/txn_100ms",
                                        "cairn/idempotent"),
          TARGETS["txn_100ms"])
    f = by.get("commit")
    if f:
        for k in ("1p", "%dp" % COMMIT_PARTITIONS):
            s = f["stats"]
            p50 = (s["p50_ms"].get("cairn/" + k) or {}).get("median")
            p99 = (s["p99_ms"].get("cairn/" + k) or {}).get("median")
            if p50 and p99:
                out["commit_p99_over_p50_" + k] = {
                    "value": round(p99 / p50, 3), "at_least": False,
                    "target": TARGETS["commit_p99_over_p50"],
                    "ok": p99 / p50 <= TARGETS["commit_p99_over_p50"]}
    check("durable_vs_disk_steady", _r(by.get("steady"),
                                       "steady_mb_per_s", "cairn", "disk"),
          TARGETS["durable_vs_disk"])
    return out


# The chart's rows: (label, figure key, metric, arm a, arm b, lower is
# better[, target: the bar is green when it is met]).  Cairn against Kafka
# at its defaults, against Kafka with an fsync per append where the figure
# has it, and Cairn against itself where the issue sets a target
# (transactional / idempotent, steady / disk).
CHART_ROWS = [
    ("produce acks=all 1 KiB, MB/s", "acksall_1k", "mb_per_s", "cairn",
     "kafka", False),
    ("  vs Kafka flush.messages=1", "acksall_1k", "mb_per_s", "cairn",
     "kafka-flush1", False),
    ("produce acks=all, broker CPU s/GB (target 0.33)", "acksall_1k",
     "cpu_s_per_gb", "cairn", "kafka", True, TARGETS["cpu_vs_kafka"]),
    ("produce p99 at 20k records/s (target 0.33)", "latency_1k",
     "latency_ms_p99", "cairn", "kafka", True, TARGETS["p99_vs_kafka"]),
    ("steady state, MB/s", "steady", "steady_mb_per_s",
     "cairn", "kafka", False),
    ("  vs Kafka flush.messages=1", "steady", "steady_mb_per_s", "cairn",
     "kafka-flush1", False),
    ("  Cairn / synced disk (target 0.8)", "steady", "steady_mb_per_s",
     "cairn", "disk", False, TARGETS["durable_vs_disk"]),
    ("idempotent, MB/s", "idem_txn", "mb_per_s", "cairn/idempotent",
     "kafka/idempotent", False),
    ("txn every 10 ms, MB/s", "idem_txn", "mb_per_s", "cairn/txn_10ms",
     "kafka/txn_10ms", False),
    ("txn every 100 ms, MB/s", "idem_txn", "mb_per_s", "cairn/txn_100ms",
     "kafka/txn_100ms", False),
    ("  Cairn txn 10 ms / Cairn idempotent (target 0.9)", "idem_txn",
     "mb_per_s", "cairn/txn_10ms", "cairn/idempotent", False,
     TARGETS["txn_10ms"]),
    ("  Cairn txn 100 ms / Cairn idempotent (target 0.98)", "idem_txn",
     "mb_per_s", "cairn/txn_100ms", "cairn/idempotent", False,
     TARGETS["txn_100ms"]),
    ("commit latency p99, 1 partition", "commit", "p99_ms", "cairn/1p",
     "kafka/1p", True),
    ("consume (librdkafka), MB/s", "consume_1k", "mb_per_s",
     "cairn/librdkafka", "kafka/librdkafka", False),
    ("consume read_committed, MB/s", "rc_tput", "mb_per_s",
     "cairn/read_committed", "kafka/read_committed", False),
    ("  broker CPU s/GB", "rc_tput", "cpu_s_per_gb", "cairn/read_committed",
     "kafka/read_committed", True),
    ("produce -> read_committed p99", "rc_latency", "p99_ms", "cairn",
     "kafka", True),
    ("scaling: 1 partition, MB/s", "scale_p1", "mb_per_s", "cairn/1p",
     "kafka/1p", False),
    ("scaling: 10 partitions, MB/s", "scale_p10", "mb_per_s", "cairn/1p",
     "kafka/1p", False),
    ("scaling: 100 partitions, MB/s", "scale_p100", "mb_per_s", "cairn/1p",
     "kafka/1p", False),
    ("scaling: 1000 partitions, MB/s", "scale_p1000", "mb_per_s", "cairn/1p",
     "kafka/1p", False),
    ("scaling: 1000 partitions, 100 producers, MB/s", "scale_p1000",
     "mb_per_s", "cairn/per10", "kafka/per10", False),
    ("scaling: 10 txn producers, MB/s", "scale_txn", "mb_per_s",
     "cairn/10tp", "kafka/10tp", False),
    ("scaling: 100 txn producers, MB/s", "scale_txn", "mb_per_s",
     "cairn/100tp", "kafka/100tp", False),
    ("3 nodes RF 1 acks=1, MB/s", "replication_tput", "mb_per_s",
     "cairn/rf1_acks1", "kafka/rf1_acks1", False),
    ("3 nodes RF 3 acks=1, MB/s", "replication_tput", "mb_per_s",
     "cairn/rf3_acks1", "kafka/rf3_acks1", False),
    ("3 nodes RF 3 acks=all, MB/s", "replication_tput", "mb_per_s",
     "cairn/rf3_acksall", "kafka/rf3_acksall", False),
    ("coordinator failover, s", "coord_failover", "failover_s", "cairn",
     "kafka", True),
]


def chart(figs, path):
    """A PNG of the main ratios (CHART_ROWS): bar = ratio of the medians,
    whisker = range of the per-pair ratios, green where Cairn is better.
    Every ratio is in the JSON and the tables; this is the page a reader
    looks at first.  Returns the path, or why there is none."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "no chart: matplotlib missing (tools/deps.sh bench)"
    by = {f["key"]: f for f in figs}
    rows = []
    for label, key, metric, a, b, lower, *target in CHART_ROWS:
        r = _r(by.get(key), metric, a, b)
        if r and r.get("ratio_of_medians"):
            rows.append((label + (" (lower is better)" if lower else ""), r,
                         lower, target[0] if target else 1.0))
    if not rows:
        return "no chart: no Cairn / peer ratio measured"
    fig, ax = plt.subplots(figsize=(10, 0.32 * len(rows) + 1.6))
    ys = range(len(rows))
    vals = [r["ratio_of_medians"] for _, r, _, _ in rows]
    lo = [max(0, v - (r.get("pair_min") or v))
          for v, (_, r, _, _) in zip(vals, rows)]
    hi = [max(0, (r.get("pair_max") or v) - v)
          for v, (_, r, _, _) in zip(vals, rows)]
    colors = ["tab:green" if (v <= t if lower else v >= t) else "tab:red"
              for v, (_, _, lower, t) in zip(vals, rows)]
    ax.barh(list(ys), vals, xerr=[lo, hi], color=colors, alpha=0.8,
            capsize=3)
    for y, v, h in zip(ys, vals, hi):
        ax.annotate("%.2f" % v, (v + h, y), xytext=(5, -3),
                    textcoords="offset points", fontsize=7)
    ax.set_yticks(list(ys))
    ax.set_yticklabels([l for l, _, _, _ in rows], fontsize=8)
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_xscale("log")
    lo_t = min(v - d for v, d in zip(vals, lo))
    hi_t = max(v + d for v, d in zip(vals, hi))
    ticks = [t for t in (0.03, 0.1, 0.25, 0.5, 1, 2, 4, 10, 30)
             if lo_t / 2 <= t <= hi_t * 2]
    ax.set_xticks(ticks)
    ax.set_xticklabels(["%g" % t for t in ticks])
    ax.minorticks_off()
    ax.set_xlabel("Cairn / Kafka 4.4.0 at its defaults unless the row "
                  "says otherwise (ratio of medians; whiskers: per-pair "
                  "range)", fontsize=8)
    ax.set_title("Cairn / Apache Kafka, same machine and run (green: Cairn "
                 "better, or its target met)", fontsize=10)
    ax.invert_yaxis()
    fig.tight_layout()
    fig.savefig(str(path), dpi=110)
    plt.close(fig)
    return path


def now():
    return time.strftime("%H:%M:%S")
