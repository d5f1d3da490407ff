#!/usr/bin/python3
"""Broker benchmark report (issues #7, #17): one command, everything
measured in the same run, a summary and tables on the terminal, JSON with
every raw sample in bench/out/report.json and a chart beside it (.png).

  make bench        (= /usr/bin/python3 bench/run.py)
  /usr/bin/python3 bench/run.py [--build-dir build] [--cairn build/cairn]
          [--dir DIR] [--scale F|small] [--reps N] [--seconds S]
          [--warmup W] [--steady-seconds S] [--peers P,...]
          [--only PART,...] [--report FILE] [--base-cairn BIN]

Method (bench/method.py): every compared figure is a set of arms, a peer
running a workload; each arm runs --reps times (default 5) for --seconds
(default 3) after --warmup (0.5) unmeasured seconds, the arms interleaved
(A B C A B C ...).  Reported: min / median / max per arm, and for pairs of
arms the ratio of medians plus the median and range of the per-pair
ratios (run i of A against run i of B).  Each run also records the
broker's CPU seconds (utime+stime from /proc, the JVM's for Kafka), CPU
seconds per GB of record bytes, and VmRSS / VmHWM.

Peers (bench/peers.py, all running at once; --peers picks some):
  cairn          Cairn, group-commit fsync (its default)
  cairn-nofsync  Cairn with cairn.fsync.group.commit=false
  kafka          Apache Kafka 4.4.0, KRaft, its default settings and JVM
                 options (no fsync); topics with default configs
  kafka-flush1   the same broker, topics with flush.messages=1 (fsync per
                 append: Cairn's durability)
  mock           librdkafka's mock cluster (in memory, ~5 MB/partition)
  cairn-base     with --base-cairn BIN only: Cairn built from another
                 commit, beside cairn in every figure Cairn runs in, so a
                 change's before and after are interleaved in one run
Before the first figure each Kafka peer gets one unmeasured 5 s run (the
JIT compiles Kafka's hot paths; its first seconds run far slower).

Parts, in the order they run (make bench runs all but the opt-in ones,
in about 20 minutes; --only cluster, make bench-cluster-kafka, the two
three-broker comparisons with Kafka, about 12; --only all, make
bench-all, every part):

  limits     this machine: fdatasync'd sequential 256 KiB writes (MB/s),
             4 KiB fdatasync latency, loopback TCP throughput (bench_limits)
  produce    librdkafka producer (bench_client --seconds), 6 partitions:
             acks=all 1 KiB (every peer), acks=all 1 KiB at a fixed 20k
             records/s (latency at the same offered load)
  acks100    opt-in: acks=all 100 B, Cairn and both Kafkas
  acks1      opt-in: acks=1 1 KiB, Cairn and Kafka
  idem_txn   1 KiB, 6 partitions, Cairn and Kafka, all interleaved:
             idempotent, transactional committing every 10 ms, every
             100 ms and every 1000 records, with the achieved commit
             interval beside the nominal one (bench_txn)
  inflight5  opt-in: adds acks=all at 5 in flight (Cairn only) to idem_txn
             (the baseline of issue #4's idempotent target)
  consume    librdkafka consumer and the raw Fetch client (bench_fetch_raw,
             50 MiB requests) over a pre-filled 6 GB topic (page-cached)
  rc         read_committed vs read_uncommitted consume of a topic written
             by 8 transactional producers (every 10th transaction
             aborted), and produce -> read_committed delivery latency,
             Cairn and Kafka (bench/rc_figs.py)
  commit     commit latency: 200 transactions of one record on 1 and on 16
             partitions (bench_txn --commit-latency)
  jvm        opt-in: Kafka's ProducerPerformance (the JVM client), 500k x
             1 KiB acks=all, Cairn and Kafka
  steady     1 KiB acks=all runs of --steady-seconds (10) per peer,
             interleaved with the synced-disk limit measured the same way,
             MB/s per second; steady = median of the second half
  partitions produce acks=all 1 KiB with 1, 10, 100 and 1,000 partitions,
             one producer, and at 1,000 one producer per 10 partitions
  txn_producers  1, 10 and 100 transactional producers committing every
             100 ms on 100 partitions (both: bench/scaling_figs.py)
  replication opt-in: three Cairn and three Kafka brokers: RF 1 acks=1, RF 3
             acks=1, RF 3 acks=all, as fast as one producer goes and at
             5,000 records/s (bench/replication.py; make bench-replication
             has more variants)
  failover   opt-in: transaction coordinator failover, kill -9 of the
             coordinator's broker to the next commit, three Cairn and
             three Kafka brokers (bench/failover.py, make bench-failover)
  cleaner    opt-in: log cleaner MB/s and produce acks=all p50/p99 during
             a pass vs idle, Cairn, Cairn without fsync and Kafka
             (bench/cleaner.py)
  security   opt-in: one Cairn with PLAINTEXT, SSL and SASL_SSL
             (SCRAM-SHA-512) listeners, the protocols in rotating order per
             rep: 1 KiB acks=all and transactional (commit every 1000
             records), ratios to PLAINTEXT; TLS 1.3/1.2 handshake and SCRAM
             login times (bench/security.py, its own broker; with kafka
             among --peers also Kafka over PLAINTEXT and SSL)
  load       opt-in: coordinator load time after a restart with 100k
             transactional ids (bench_txn_load.py, its own broker)
  memory     opt-in: broker VmRSS with 10k partitions (100 topics x 100)
             and 100k idempotent producer ids each writing one batch
             (bench_mem.py, its own broker)
  pstate     producer table bytes per idle entry (bench_pstate, in-process)
  scaling    opt-in: produce and fetch throughput with 1, 1,000, 10,000 and
             100,000 partitions (bench_scale, raw protocol, a fresh Cairn
             each)
  (aliases: client = produce,idem_txn,consume; txn = idem_txn,commit;
  cluster = replication,failover; all = every part)

Every timed run of a producer gets a new topic, deleted with its files
gone before the next run (peers.Peer.delete_topic_wait): at 1 GB/s five
repetitions of five peers would not fit on the disk, and the next run
should not share it with the unlinking.

--scale multiplies the counts of the count-based parts (default 1);
"small" is a fast check of the harness (3 reps of 1 s, 0.1 of the
counts), not a measurement.  With --only the report goes to
bench/out/report-<parts>.json unless --report says otherwise, so a partial
run does not replace the full one.  Progress goes to stderr; the load
average before and after is recorded, since other work on the machine
skews every number.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SMALL = {"reps": 3, "seconds": 1.0, "warmup": 0.5, "steady": 6,
         "jvm_warmup": 2, "scale": 0.1}
DEFAULT = {"reps": 5, "seconds": 3.0, "warmup": 0.5, "steady": 10,
           "jvm_warmup": 5, "scale": 1.0}
LOAD_IDS = 100000
MEM_TOPICS = 100
MEM_PARTITIONS = 100        # per topic
MEM_PRODUCERS = 100000
SCALE_PARTITIONS = [1, 1000, 10000, 100000]
SCALE_BYTES = 256 << 20     # produced (then fetched) per partition count
SCALE_PER_REQUEST = 100
PARTS = ["limits", "produce", "acks1", "acks100", "idem_txn", "inflight5",
         "consume",
         "rc", "commit", "jvm", "steady", "partitions", "txn_producers",
         "replication", "failover", "cleaner", "security", "load", "memory",
         "pstate", "scaling"]
# Left out of make bench (20 minutes); --only names them, --only all runs
# everything (make bench-all).
OPT_IN = {"jvm", "acks1", "acks100", "inflight5", "cleaner", "security",
          "load", "memory", "scaling", "replication", "failover"}
FIGURE_PARTS = {"produce", "acks1", "acks100", "idem_txn", "inflight5",
                "consume", "rc",
                "commit", "jvm", "steady", "cleaner", "partitions",
                "txn_producers"}
ALIASES = {"client": ["produce", "idem_txn", "consume"],
           "txn": ["idem_txn", "commit"],
           "rc_tput": ["rc"], "rc_latency": ["rc"],
           "cluster": ["replication", "failover"],
           "all": PARTS}
ALL_PEERS = ["cairn", "cairn-nofsync", "kafka", "kafka-flush1", "mock"]
T0 = time.monotonic()


def progress(msg):
    print("[%5.1fs] %s" % (time.monotonic() - T0, msg), file=sys.stderr,
          flush=True)


def summary(rec):
    return "%.1f MB/s, %.0f msgs/s" % (rec.get("mb_per_s", 0),
                                       rec.get("msgs_per_s", 0))


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


def run_prog(argv, timeout, what):
    """Runs a bench program; its JSON lines (also on failure or timeout:
    a failed run is reported, not fatal)."""
    try:
        res = subprocess.run([str(a) for a in argv], stdout=subprocess.PIPE,
                             text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else e.stdout
        progress("  %s: timed out after %d s" % (what, timeout))
        return json_lines(out)
    if res.returncode != 0:
        progress("  %s: exited %d" % (what, res.returncode))
    return json_lines(res.stdout)


def uptime():
    try:
        return subprocess.run(["uptime"], stdout=subprocess.PIPE, text=True,
                              timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def scaled(n, scale, floor):
    return max(floor, int(n * scale))


def run_load(args, scale):
    ids = scaled(LOAD_IDS, scale, 1000)
    progress("coordinator load: %d transactional ids, then restart" % ids)
    recs = run_prog([sys.executable, REPO / "bench" / "bench_txn_load.py",
                     "--ids", ids, "--build-dir", Path(args.cairn).parent],
                    900, "bench_txn_load.py")
    for rec in recs:
        progress("  loaded %d ids in %d ms (created at %d ids/s)"
                 % (rec["ids"], rec["load_ms"], rec["create_ids_per_s"]))
        return rec
    return None


def run_memory(args, scale):
    parts = max(1, int(MEM_PARTITIONS * scale))
    producers = scaled(MEM_PRODUCERS, scale, 1000)
    progress("broker memory: %d topics x %d partitions, %d producer ids"
             % (MEM_TOPICS, parts, producers))
    recs = run_prog([sys.executable, REPO / "bench" / "bench_mem.py",
                     "--cairn", args.cairn, "--dir", args.dir, "--topics",
                     MEM_TOPICS, "--partitions", parts, "--producers",
                     producers], 900, "bench_mem.py")
    for rec in recs:
        progress("  RSS %.1f MB: %d B per partition, %d B per producer id"
                 % (rec["rss_mb"], rec["bytes_per_partition"],
                    rec["bytes_per_producer"]))
        return rec
    return None


def run_scaling(args, build, tmp, scale):
    import peers as pe
    out = []
    total = max(1 << 20, int(SCALE_BYTES * scale))
    for parts in SCALE_PARTITIONS:
        t = pe.CairnPeer(tmp, args.cairn, name="scale-%d" % parts)
        progress("scaling: %d partitions, %d MiB produced then fetched"
                 % (parts, total >> 20))
        t.start()
        try:
            for rec in run_prog(
                    [build / "bench_scale", "--brokers", t.bootstrap,
                     "--topic", "bench-scale", "--partitions", parts,
                     "--bytes", total, "--per-request", SCALE_PER_REQUEST],
                    3600, "bench_scale"):
                rec["rss_kb"] = t.memory_kb().get("rss_kb")
                progress("  %s: %s%s" % (
                    rec["test"], summary(rec),
                    ", topic created in %.1f s" % rec["create_seconds"]
                    if "create_seconds" in rec else ""))
                out.append(rec)
            if not t.alive():
                progress("  scale-%d broker died; see %s"
                         % (parts, t.dir / "broker.log"))
        finally:
            t.stop()
            shutil.rmtree(t.dir, ignore_errors=True)
    return out


def print_scaling(rows):
    print()
    print("%-11s %10s %9s %12s %12s %9s %9s" % (
        "partitions", "batch B", "create s", "produce MB/s", "fetch MB/s",
        "msgs/s p", "RSS MB"))
    by = {}
    for r in rows:
        by.setdefault(r["partitions"], {})[r["test"]] = r
    for parts in sorted(by):
        p, f = by[parts].get("scale_produce"), by[parts].get("scale_fetch")
        print("%-11d %10s %9s %12s %12s %9s %9s" % (
            parts, fmt(p and p["batch_bytes"], "%d"),
            fmt(p and p["create_seconds"]), fmt(p and p["mb_per_s"]),
            fmt(f and f["mb_per_s"]), fmt(p and p["msgs_per_s"], "%.0f"),
            fmt(f and f["rss_kb"] and f["rss_kb"] / 1024.0)))


def fmt(v, spec="%.1f"):
    return "-" if v is None else spec % v


def print_other(report):
    load = report.get("coordinator_load")
    if load:
        print("coordinator load after restart: %d transactional ids in %d "
              "ms" % (load["ids"], load["load_ms"]))
    mem = report.get("broker_memory")
    if mem:
        capped = ""
        if mem["partitions"] != mem["partitions_requested"]:
            capped = (" (open-file limit %d allowed only %d partitions; "
                      "%.1f MB extrapolated to %d)"
                      % (mem["nofile_limit"], mem["partitions"],
                         mem["rss_mb_extrapolated"],
                         mem["partitions_requested"]))
        print("broker RSS with %d partitions and %d producer ids: %.1f MB "
              "(idle %.1f MB); %d B per partition, %d B per producer id%s"
              % (mem["partitions"], mem["producers"], mem["rss_mb"],
                 mem["rss_idle_kb"] / 1024.0, mem["bytes_per_partition"],
                 mem["bytes_per_producer"], capped))
    pst = report.get("producer_state")
    if pst:
        print("producer table: %.1f bytes per idle producer entry (%.1f by "
              "RSS), %.0f ns per check+update"
              % (pst["table_bytes_per_entry"], pst["rss_bytes_per_entry"],
                 pst["ns_per_check_update"]))


def start_peers(names, args, build, tmp):
    """Starts every compared peer at once (so runs can interleave); a peer
    that fails to start is left out, with a message."""
    import figures
    import peers as pe
    out = {}
    kafka = None
    for name in names:
        try:
            if name in ("cairn", "cairn-nofsync"):
                p = pe.CairnPeer(tmp, args.cairn, fsync=name == "cairn")
                p.start()
            elif name == "cairn-base":
                p = pe.CairnPeer(tmp, args.base_cairn, name=name,
                                 label="Cairn at %s" % args.base_cairn)
                p.start()
            elif name == "mock":
                p = pe.MockPeer(tmp, build)
                p.start(figures.all_topics())
            else:
                if kafka is None:
                    progress("starting Apache Kafka 4.4.0 (KRaft, Kafka's "
                             "default JVM settings)")
                    kafka = pe.KafkaBroker(tmp / "kafka")
                p = pe.KafkaPeer(tmp, kafka, flush_every=name ==
                                 "kafka-flush1")
                p.start()
        except Exception as e:   # report the rest rather than nothing
            progress("%s did not start: %s" % (name, e))
            continue
        progress("started %s at %s (pid %d)" % (p.label, p.bootstrap,
                                                p.pid()))
        out[name] = p
    return out


def main():
    ap = argparse.ArgumentParser(
        description="Cairn benchmark report (see the module docstring)")
    ap.add_argument("--build-dir",
                    default=os.environ.get("CAIRN_BUILD_DIR",
                                           str(REPO / "build")))
    ap.add_argument("--cairn", default=None,
                    help="broker binary (default <build-dir>/cairn)")
    ap.add_argument("--dir", default=str(REPO / "bench" / "out"),
                    help="where the disk test and broker data go")
    ap.add_argument("--scale", default="1",
                    help="count multiplier, or 'small' (a fast check: %s)"
                    % SMALL)
    ap.add_argument("--reps", type=int, default=None,
                    help="repetitions of each figure (default %d)"
                    % DEFAULT["reps"])
    ap.add_argument("--seconds", type=float, default=None,
                    help="measured seconds of each timed run (default %g)"
                    % DEFAULT["seconds"])
    ap.add_argument("--warmup", type=float, default=None,
                    help="unmeasured seconds before each timed run "
                    "(default %g)" % DEFAULT["warmup"])
    ap.add_argument("--steady-seconds", type=float, default=None,
                    help="length of each steady-state run (default %d)"
                    % DEFAULT["steady"])
    ap.add_argument("--peers", default=",".join(ALL_PEERS),
                    help="compared peers, comma-separated (default all: "
                    "%s)" % ",".join(ALL_PEERS))
    ap.add_argument("--base-cairn", default=None,
                    help="a Cairn binary built from another commit: runs "
                    "as peer cairn-base beside cairn in every Cairn figure "
                    "(before/after a change, interleaved)")
    ap.add_argument("--only", default=None,
                    help="comma-separated parts: %s (client = produce,"
                    "idem_txn,consume; txn = idem_txn,commit; rc = rc_tput,"
                    "rc_latency)" % ",".join(PARTS))
    ap.add_argument("--report", default=None,
                    help="report file (default bench/out/report.json, or "
                    "report-<parts>.json with --only); the chart goes "
                    "beside it as .png")
    args = ap.parse_args()
    args.cairn = args.cairn or os.environ.get(
        "CAIRN_BIN", str(Path(args.build_dir) / "cairn"))
    opts = dict(SMALL if args.scale == "small" else DEFAULT)
    if args.scale != "small":
        opts["scale"] = float(args.scale)
    for k, v in (("reps", args.reps), ("seconds", args.seconds),
                 ("warmup", args.warmup), ("steady", args.steady_seconds)):
        if v is not None:
            opts[k] = v
    scale = opts["scale"]
    names = [n.strip() for n in args.peers.split(",") if n.strip()]
    for n in names:
        if n not in ALL_PEERS:
            sys.exit("--peers: unknown peer %r (%s)" % (n,
                                                        ", ".join(ALL_PEERS)))
    if args.base_cairn:
        if not os.access(args.base_cairn, os.X_OK):
            sys.exit("--base-cairn: %s is not an executable" %
                     args.base_cairn)
        names.append("cairn-base")
    parts = set(PARTS) - OPT_IN
    if args.only:
        parts = set()
        for w in args.only.split(","):
            w = w.strip()
            if w in ALIASES:
                parts |= set(ALIASES[w])
            elif w in PARTS:
                parts.add(w)
            else:
                sys.exit("--only: unknown part %r (parts: %s; aliases: "
                         "%s)" % (w, ", ".join(PARTS), ", ".join(ALIASES)))
    if "cairn" not in names:
        parts -= {"load", "memory", "scaling", "security", "replication",
                  "failover"}

    out_dir = REPO / "bench" / "out"
    out_dir.mkdir(parents=True, exist_ok=True)
    Path(args.dir).mkdir(parents=True, exist_ok=True)
    build = Path(args.build_dir)
    need = {"limits": ["bench_limits"], "steady": ["bench_limits",
                                                   "bench_client"],
            "produce": ["bench_client"], "idem_txn": ["bench_client",
                                                     "bench_txn"],
            "consume": ["bench_client", "bench_fetch_raw"],
            "commit": ["bench_txn"],
            "security": ["bench_client", "bench_txn"],
            "cleaner": ["bench_client"],
            "rc": ["bench_rc"], "partitions": ["bench_client"],
            "txn_producers": ["bench_txn"], "replication": ["bench_client"],
            "pstate": ["bench_pstate"], "scaling": ["bench_scale"]}
    progs = {p for k in parts for p in need.get(k, [])}
    if "mock" in names and parts & FIGURE_PARTS:
        progs.add("e2e_mockbroker")
    for prog in sorted(progs):
        if not (build / prog).exists():
            sys.exit("%s missing; build it: cmake --build %s --target %s"
                     % (build / prog, build, prog))
    if not Path(args.cairn).exists():
        sys.exit("%s missing; run make first" % args.cairn)
    tmp = Path(tempfile.mkdtemp(prefix="cairn-bench-", dir=args.dir))
    report = {"time": time.strftime("%Y-%m-%dT%H:%M:%S"), "scale": scale,
              "method": opts, "peers": names, "dir": str(tmp),
              "machine": {"nproc": os.cpu_count(),
                          "kernel": os.uname().release,
                          "uptime_before": uptime(),
                          "loadavg_before": os.getloadavg()},
              "limits": {}, "figures": [], "part_seconds": {}}
    if args.only:
        report["only"] = sorted(parts)
    progress("load before: %s" % report["machine"]["uptime_before"])
    progress("method: %d interleaved reps of %g s (after %g s warm-up) per "
             "figure; steady-state runs %g s"
             % (opts["reps"], opts["seconds"], opts["warmup"],
                opts["steady"]))
    import figures
    peers = {}
    try:
        if "limits" in parts:
            progress("measuring machine limits (disk, fdatasync, "
                     "loopback TCP)")
            for rec in run_prog([build / "bench_limits", "--dir", tmp], 120,
                                "bench_limits"):
                report["limits"][rec["test"]] = rec
            lim = report["limits"]
            if "disk_write_fdatasync" in lim and "tcp_loopback" in lim:
                progress("limits: disk %.0f MB/s, loopback TCP %.0f MB/s"
                         % (lim["disk_write_fdatasync"]["mb_per_s"],
                            lim["tcp_loopback"]["mb_per_s"]))
        if parts & FIGURE_PARTS:
            peers = start_peers(names, args, build, tmp)
            report["peer_labels"] = {n: p.label for n, p in peers.items()}
            report["memory_start"] = {n: p.memory_kb()
                                      for n, p in peers.items()}
            ctx = figures.Ctx(peers, build, opts, progress)
            figures.warm_up(ctx)
            opts["extra"] = sorted(parts & {"acks1", "acks100", "inflight5"})
            opts["produce_default"] = "produce" in parts
            if parts & {"acks1", "acks100"}:
                parts.add("produce")
            if "inflight5" in parts:
                parts.add("idem_txn")
            import cleaner
            import rc_figs
            import scaling_figs
            for part, fn in (("produce", figures.run_produce),
                             ("idem_txn", figures.run_idem_txn),
                             ("consume", figures.run_consume),
                             ("rc", rc_figs.run_rc),
                             ("commit", figures.run_commit),
                             ("jvm", figures.run_jvm),
                             ("steady", lambda c: [figures.run_steady(
                                 c, tmp)]),
                             ("partitions", scaling_figs.run_partitions),
                             ("txn_producers",
                              scaling_figs.run_txn_producers),
                             ("cleaner", cleaner.run_cleaner)):
                if part in parts:
                    t0 = time.monotonic()
                    report["figures"] += fn(ctx)
                    report["part_seconds"][part] = round(
                        time.monotonic() - t0, 1)
                    progress("%s done in %.0f s" % (
                        part, report["part_seconds"][part]))
            report["memory_end"] = {n: p.memory_kb()
                                    for n, p in peers.items()}
            for n in list(peers):
                progress("stopping %s" % n)
                peers.pop(n).stop()
        if "replication" in parts:
            import replication
            t0 = time.monotonic()
            report["figures"] += replication.run_for_report(
                build, args.cairn, tmp, opts, progress,
                kafka="kafka" in names)
            report["part_seconds"]["replication"] = round(
                time.monotonic() - t0, 1)
        if "failover" in parts:
            import failover
            t0 = time.monotonic()
            report["figures"].append(failover.run_for_report(
                build, args.cairn, tmp, opts, progress))
            report["part_seconds"]["failover"] = round(
                time.monotonic() - t0, 1)
        if "security" in parts:
            import security
            fig, report["security"] = security.run_security(
                figures.Ctx({}, build, opts, progress), args, tmp,
                kafka="kafka" in names)
            report["figures"].append(fig)
        if "load" in parts:
            report["coordinator_load"] = run_load(args, scale)
        if "memory" in parts:
            report["broker_memory"] = run_memory(args, scale)
        if "pstate" in parts:
            for rec in run_prog([build / "bench_pstate", "--producers",
                                 "100000"], 120, "bench_pstate"):
                report["producer_state"] = rec
        if "scaling" in parts:
            report["scaling"] = run_scaling(args, build, tmp, scale)
    finally:
        for p in peers.values():
            p.stop()
        report["machine"]["uptime_after"] = uptime()
        report["machine"]["loadavg_after"] = os.getloadavg()
        report["seconds"] = round(time.monotonic() - T0, 1)

    import cleaner
    import failover
    import rc_figs
    import replication
    import scaling_figs
    figs = report["figures"]
    report["summary"] = figures.summary_lines(figs, report["limits"])
    for mod in (rc_figs, scaling_figs, replication, failover, cleaner):
        report["summary"] += mod.summary_lines(figs)
    if report.get("security"):
        import security
        report["summary"] += security.summary_lines(
            next(f for f in figs if f["key"] == "security"),
            report["security"])
    report["verdicts"] = figures.verdicts(figs)
    report["verdicts"].update(rc_figs.verdicts(figs))
    m = report["machine"]
    print()
    print("Cairn benchmark %s, scale %g, %d CPUs, %.0f s; each figure: "
          "median of %d interleaved runs of %g s"
          % (report["time"], scale, m["nproc"], report["seconds"],
             opts["reps"], opts["seconds"]))
    print("load before: %s" % m["uptime_before"])
    print("load after:  %s" % m["uptime_after"])
    if report["part_seconds"]:
        print("seconds per part: %s" % ", ".join(
            "%s %.0f" % kv for kv in report["part_seconds"].items()))
    if report["summary"]:
        print()
        print("Summary (Cairn / peer, ratio of medians; per-pair range of "
              "neighbouring runs):")
        for line in report["summary"]:
            print("  " + line)
    if report["verdicts"]:
        print()
        print("Targets (issue #17):")
        for k, v in report["verdicts"].items():
            crosses = (v.get("pair_min") is not None and v["pair_min"] <
                       v["target"] < v["pair_max"])
            print("  %-32s %.3f (%s %.2f) %s%s%s" % (
                k, v["value"], ">=" if v["at_least"] else "<=",
                v["target"], "ok" if v["ok"] else "MISS",
                "" if v.get("pair_min") is None else
                ", range %.2f-%.2f" % (v["pair_min"], v["pair_max"]),
                " (the pairs fall on both sides: not settled)"
                if crosses else ""))
    lim = report["limits"]
    if "fdatasync_4k" in lim:
        sync = lim["fdatasync_4k"]
        print("machine: fdatasync'd 256 KiB writes %.0f MB/s, 4 KiB "
              "fdatasync p50 %.0f us p99 %.0f us, loopback TCP %.0f MB/s"
              % (lim["disk_write_fdatasync"]["mb_per_s"], sync["p50_us"],
                 sync["p99_us"], lim["tcp_loopback"]["mb_per_s"]))
    for when in ("memory_start", "memory_end"):
        if report.get(when):
            print("broker memory at %s: %s" % (when[7:], ", ".join(
                "%s RSS %.0f MB (peak %.0f)" % (
                    n, v.get("rss_kb", 0) / 1024, v.get("hwm_kb", 0) / 1024)
                for n, v in report[when].items())))
    figures.print_figures(report["figures"])
    print_other(report)
    if report.get("scaling"):
        print_scaling(report["scaling"])
    if args.report:
        out = Path(args.report)
    elif args.only:
        out = out_dir / ("report-%s.json" % "-".join(sorted(parts)))
    else:
        out = out_dir / "report.json"
    png = figures.chart(report["figures"], out.with_suffix(".png"))
    if isinstance(png, Path):
        report["chart"] = str(png)
        png = "and the chart %s" % png
    with open(out, "w") as f:
        json.dump(report, f, indent=2)
    print("wrote", out, "(%s)" % png)
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
