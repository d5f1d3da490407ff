"""The read_committed part of the benchmark (issue #17): consuming a topic
written in transactions, read_committed against read_uncommitted, and the
produce -> read_committed delivery latency, Cairn and Apache Kafka in the
same run, measured with method.py (interleaved arms, median of the
repetitions).  It replaces run.py's rc_tput and rc_latency, which ran each
broker once, one after the other, against Cairn and librdkafka's mock.

Throughput ("rc_tput"): per peer, one unmeasured fill with bench_rc write
(8 transactional producers, 100 records of 1 KiB per transaction, every
10th transaction aborted, 6 partitions) and one unmeasured read_committed
pass, which also waits for the commit markers: Kafka writes them after
EndTxn has answered, and a pass that ran before them would stop early at
the last stable offset.  Then the arms peer/read_committed and
peer/read_uncommitted, interleaved over every peer, the order rotated per
repetition.  A sample is k passes over the whole topic, each with a new
consumer (bench_rc consume --isolation X --rounds k), k chosen from the
unmeasured pass so a sample reads for about a figure's run time (3 s at
the default scale; one pass over 300 MB takes well under a second), the
same k for both levels of a peer.
  log_mb_per_s  the partitions' on-disk .log bytes over the pass times:
                both levels scan the same log, so within a peer it is the
                fair read_committed / read_uncommitted ratio (the target,
                >= 0.95), while read_committed delivers 9/10 of the records
  mb_per_s, msgs_per_s  delivered value bytes and records per second: the
                same records on both brokers, the fair Cairn / Kafka ratio
  cpu_s_per_gb  broker CPU seconds per GB of log read (bytes_total is the
                log bytes, the same for both levels)

Latency ("rc_latency"): bench_rc latency, a read_committed consumer and a
transactional producer sending 100 B records at 2000/s and committing
every 100 ms, p50/p99/p99.9 of send -> delivery; one run per repetition
on a new topic (the consumer reads from the beginning, and an earlier
run's records would count as its warm-up), Cairn and Kafka interleaved.

librdkafka's mock is left out: it cannot create topics (it gets them at
start, from figures.all_topics) and keeps only ~5 MB per partition.
"""

import math
import statistics
import time

import method
from figures import run_prog, said_line, topic_name

PEERS = ["cairn", "kafka"]
PARTITIONS = 6
RECORDS = 300000            # the read_committed topic, records at scale 1
SIZE = 1024
TXN_RECORDS = 100
ABORT_EVERY = 10            # every 10th transaction aborts
PRODUCERS = 8
TARGET = 0.95               # min read_committed / read_uncommitted, log B/s
LAT_RATE = 2000             # records/s
LAT_INTERVAL_MS = 100       # commit interval
LAT_FETCH_WAIT_MS = 10
LAT_SIZE = 100
LAT_MIN_SECONDS = 3.0
LAT_FACTOR = 1.0            # x ctx.o["seconds"] per repetition
LAT_TARGET_MS = LAT_INTERVAL_MS + 10   # p99 target, absolute
MAX_PASSES = 40            # per sample
ISOLATIONS = ("read_committed", "read_uncommitted")


def _data_dirs(peer):
    if hasattr(peer, "broker"):                 # Kafka: data-<node>
        return sorted(peer.broker.ref.dir.glob("data*"))
    return [peer.dir / "data"]


def log_bytes(peer, topic):
    """On-disk bytes of the topic's .log segments, every partition (a
    deleted topic's renamed directories do not match)."""
    total = 0
    for d in _data_dirs(peer):
        for part in d.glob("%s-*" % topic):
            if part.name[len(topic) + 1:].isdigit():
                total += sum(f.stat().st_size for f in part.glob("*.log"))
    return total


def records(ctx):
    n = max(10 * TXN_RECORDS, int(RECORDS * ctx.o["scale"]))
    return n - n % TXN_RECORDS


def lat_seconds(ctx):
    """Per repetition: 1.5 times a figure's run (4.5 s at the default
    scale: 9,000 samples, so a p99 from 90 and a p99.9 from 9), at least
    3 s.  Twice would be 15 s more of make bench's 20 minutes."""
    return max(LAT_MIN_SECONDS, LAT_FACTOR * ctx.o["seconds"])


def describe_tput(rec):
    if not rec.get("complete"):
        return "INCOMPLETE: %d of %d records" % (rec.get("consumed", 0),
                                                 rec.get("expected", 0))
    s = "log %.1f MB/s, delivered %.1f MB/s, %.0f records/s, %d passes " \
        "in %.2f s" % (rec["log_mb_per_s"], rec["mb_per_s"],
                       rec["msgs_per_s"], rec["passes"], rec["seconds"])
    if rec.get("cpu_s_per_gb") is not None:
        s += ", broker %.2f CPU s/GB" % rec["cpu_s_per_gb"]
    return s


def describe_lat(rec):
    s = "p50 %.1f ms p99 %.1f ms p99.9 %.1f ms, %d samples, commit p50 " \
        "%.1f ms" % (rec["p50_ms"], rec["p99_ms"], rec["p999_ms"],
                     rec["samples"], rec["commit_ms_p50"])
    if not rec.get("complete"):
        s += "; INCOMPLETE: %d + %d warm-up of %d sent" % (
            rec["samples"], rec["warmup"], rec["sent"])
    return s


def _consume(ctx, peer, topic, n, lb, isolation, passes=1):
    """passes bench_rc consume passes of one isolation level (one
    process, a new consumer each), as one sample: rates over the sum of
    the pass times, bytes_total = the log bytes read.  An incomplete pass
    leaves the sample without rates: it stopped early, so its rate would
    be a fiction."""
    recs = run_prog([ctx.build / "bench_rc", "consume", "--brokers",
                     peer.bootstrap, "--topic", topic, "--partitions",
                     PARTITIONS, "--messages", n, "--size", SIZE,
                     "--txn-records", TXN_RECORDS, "--abort-every",
                     ABORT_EVERY, "--log-bytes", lb, "--rounds", passes,
                     "--isolation", isolation], 300 + 10 * passes,
                    ctx.progress)
    recs = [r for r in recs if r.get("isolation") == isolation]
    if not recs:
        return None
    secs = sum(r["seconds"] for r in recs)
    got = sum(r["consumed"] for r in recs)
    rec = {"test": "rc_consume", "isolation": isolation,
           "passes": len(recs), "log_bytes": lb, "consumed": got,
           "expected": recs[0]["expected"] * passes,
           "complete": len(recs) == passes and all(
               r["complete"] and r["consumed"] == r["expected"]
               for r in recs),
           "seconds": round(secs, 3),
           "pass_seconds": [r["seconds"] for r in recs],
           "startup_s": [r["startup_s"] for r in recs],
           "log_mb_per_s": None, "mb_per_s": None, "msgs_per_s": None}
    if rec["complete"] and secs > 0:
        rec.update(log_mb_per_s=round(lb * passes / secs / 1e6, 1),
                   mb_per_s=round(sum(r["mb_per_s"] * r["seconds"]
                                      for r in recs) / secs, 1),
                   msgs_per_s=round(got / secs),
                   bytes_total=lb * passes)
    return rec


def _fill(ctx, peer, topic, n):
    """Writes the topic (not measured); returns (write record, log bytes,
    passes per sample) or None."""
    peer.create_topic(topic, PARTITIONS)
    ctx.progress("rc: %s: transactional write %d x %d B, %d per "
                 "transaction, every %dth aborted, %d producers"
                 % (peer.name, n, SIZE, TXN_RECORDS, ABORT_EVERY,
                    PRODUCERS))
    recs = run_prog([ctx.build / "bench_rc", "write", "--brokers",
                     peer.bootstrap, "--topic", topic, "--partitions",
                     PARTITIONS, "--messages", n, "--size", SIZE,
                     "--txn-records", TXN_RECORDS, "--abort-every",
                     ABORT_EVERY, "--producers", PRODUCERS], 900,
                    ctx.progress)
    if not recs or recs[-1].get("failed") or recs[-1].get(
            "delivered") != n:
        ctx.progress("  %s: the write failed; no read_committed figure "
                     "for it" % peer.name)
        return None
    w = recs[-1]
    ctx.progress("  %.1f MB/s, %d transactions in %.1f s"
                 % (w["mb_per_s"], w["transactions"], w["seconds"]))
    # An unmeasured pass: it reads the whole log once (page cache, the
    # JIT) and proves the markers are in; a pass before them would stop
    # at a last stable offset short of the end.
    for attempt in range(10):
        lb = log_bytes(peer, topic)
        rec = _consume(ctx, peer, topic, n, lb, "read_committed")
        if rec and rec["complete"]:
            passes = max(1, min(MAX_PASSES, int(math.ceil(
                ctx.o["seconds"] / max(rec["seconds"], 1e-3)))))
            ctx.progress("  log %.1f MB; unmeasured read_committed pass: "
                         "%s; %d passes per sample"
                         % (lb / 1e6, describe_tput(rec), passes))
            return w, lb, passes
        time.sleep(1)
    ctx.progress("  %s: read_committed never read the whole topic; no "
                 "figure for it" % peer.name)
    return None


def _rotate(rep, arms):
    k = rep % len(arms)
    return arms[k:] + arms[:k]


def run_tput(ctx):
    peers = ctx.have(PEERS)
    if not peers:
        return []
    n = records(ctx)
    arms, topics, fills, lbs, passes = [], [], {}, {}, {}
    for p in peers:
        topic = topic_name("rc", p.name)
        topics.append((p, topic))
        got = _fill(ctx, p, topic, n)
        if not got:
            continue
        fills[p.name], lbs[p.name], passes[p.name] = got
        for iso in ISOLATIONS:
            def run(peer, rep, topic=topic, lb=got[1], k=got[2], iso=iso):
                return _consume(ctx, peer, topic, n, lb, iso, k)
            arms.append(method.Arm("%s/%s" % (p.name, iso), p, run))
    fig = None
    if arms:
        ctx.progress("rc: consume %d x %d B, read_committed and "
                     "read_uncommitted, about %g s of passes each: %s, %d "
                     "reps" % (n, SIZE, ctx.o["seconds"], ", ".join(fills),
                               ctx.o["reps"]))
        fig = method.measure(
            {"key": "rc_tput", "kind": "consume",
             "label": "consume read_committed vs read_uncommitted (1 KiB, "
             "%d per transaction, every %dth aborted)"
             % (TXN_RECORDS, ABORT_EVERY), "size": SIZE,
             "partitions": PARTITIONS, "records": n,
             "txn_records": TXN_RECORDS, "abort_every": ABORT_EVERY,
             "producers": PRODUCERS, "log_bytes": lbs, "writes": fills,
             "passes_per_sample": passes,
             "target_rc_over_ru": TARGET, "describe": describe_tput},
            arms, ctx.o["reps"], ctx.progress, order=_rotate)
    for p, topic in topics:
        if p.alive():
            p.delete_topic(topic)
    if not fig:
        return []
    names = list(fills)
    cross = [("cairn/" + iso, "%s/%s" % (other, iso))
             for other in ("kafka", "cairn-base")
             if "cairn" in names and other in names for iso in ISOLATIONS]
    own = [(n + "/read_committed", n + "/read_uncommitted") for n in names]
    method.summarise(fig, ["log_mb_per_s", "mb_per_s", "msgs_per_s",
                           "cpu_s_per_gb"], cross + own)
    # Within a peer only the log rate and CPU per GB compare like with
    # like: read_committed delivers 9/10 of the records by design.
    fig["ratios"] = [r for r in fig["ratios"]
                     if (r["a"], r["b"]) not in own
                     or r["metric"] in ("log_mb_per_s", "cpu_s_per_gb")]
    return [fig]


def run_latency(ctx):
    peers = ctx.have(PEERS)
    if not peers:
        return []
    secs = lat_seconds(ctx)
    arms = []
    for p in peers:
        def run(peer, rep):
            topic = topic_name("rclat", "%s-%d" % (peer.name, rep))
            peer.create_topic(topic, PARTITIONS)
            try:
                recs = run_prog(
                    [ctx.build / "bench_rc", "latency", "--brokers",
                     peer.bootstrap, "--topic", topic, "--partitions",
                     PARTITIONS, "--size", LAT_SIZE, "--rate", LAT_RATE,
                     "--commit-interval-ms", LAT_INTERVAL_MS, "--seconds",
                     secs, "--fetch-wait-ms", LAT_FETCH_WAIT_MS],
                    120 + 2 * secs, ctx.progress)
            finally:
                if peer.alive():
                    peer.delete_topic(topic)
            recs = [r for r in recs if r.get("test") == "rc_latency"]
            if not recs:
                return None
            rec = recs[-1]
            rec["complete"] = (rec["samples"] + rec["warmup"]
                               == rec["sent"] and not rec["failed"])
            return rec
        arms.append(method.Arm(p.name, p, run))
    ctx.progress("rc: produce -> read_committed latency, %d x %d B/s, "
                 "commit every %d ms: %s, %d x (1 + %g s)"
                 % (LAT_RATE, LAT_SIZE, LAT_INTERVAL_MS,
                    ", ".join(p.name for p in peers), ctx.o["reps"], secs))
    fig = method.measure(
        {"key": "rc_latency", "kind": "latency",
         "label": "produce -> read_committed delivery, %d records/s of %d "
         "B, commit every %d ms" % (LAT_RATE, LAT_SIZE, LAT_INTERVAL_MS),
         "rate": LAT_RATE, "size": LAT_SIZE, "partitions": PARTITIONS,
         "commit_interval_ms": LAT_INTERVAL_MS,
         "fetch_wait_max_ms": LAT_FETCH_WAIT_MS, "seconds": secs,
         "target_p99_ms": LAT_TARGET_MS, "describe": describe_lat},
        arms, ctx.o["reps"], ctx.progress)
    names = [p.name for p in peers]
    pairs = [("cairn", other) for other in ("kafka", "cairn-base")
             if "cairn" in names and other in names]
    method.summarise(fig, ["p50_ms", "p99_ms", "p999_ms"], pairs)
    return [fig]


def run_rc(ctx):
    """Both figures: [rc_tput, rc_latency] (either may be missing)."""
    return run_tput(ctx) + run_latency(ctx)


def _fig(figs, key):
    return next((f for f in figs if f.get("key") == key), None)


def summary_lines(figs):
    """Plain-language lines of the read_committed figures (as
    figures.summary_lines')."""
    lines = []

    def said(what, r, higher_better=True):
        line = said_line(what, r, higher_better)
        if line:
            lines.append(line)
    f = _fig(figs, "rc_tput")
    if f:
        said("read_committed consume, Cairn vs Kafka, delivered MB/s",
             method.find_ratio(f, "mb_per_s", "cairn/read_committed",
                               "kafka/read_committed"))
        said("read_committed consume, Cairn vs Kafka, broker CPU s/GB of "
             "log (lower is better)",
             method.find_ratio(f, "cpu_s_per_gb", "cairn/read_committed",
                               "kafka/read_committed"), False)
        for n in f["log_bytes"]:
            r = method.find_ratio(f, "log_mb_per_s", n + "/read_committed",
                                  n + "/read_uncommitted")
            if r:
                lines.append("%s read_committed / read_uncommitted, log "
                             "MB/s: %s (target >= %.2f)"
                             % (n, method.fmt_ratio(r), TARGET))
    f = _fig(figs, "rc_latency")
    if f:
        said("produce -> read_committed delivery p99, Cairn vs Kafka "
             "(lower is better)",
             method.find_ratio(f, "p99_ms", "cairn", "kafka"), False)
        for n in f["arms"]:
            p50 = f["stats"]["p50_ms"].get(n)
            p99 = f["stats"]["p99_ms"].get(n)
            if p50 and p99:
                lines.append("%s produce -> read_committed delivery at %d "
                             "records/s, commit every %d ms: p50 %.1f ms, "
                             "p99 %.1f ms (%.1f-%.1f)"
                             % (n, f["rate"], f["commit_interval_ms"],
                                p50["median"], p99["median"], p99["min"],
                                p99["max"]))
    return lines


def verdicts(figs):
    """Issue #17's read_committed targets, in figures.verdicts' shape:
    rc_over_ru_log_bytes (Cairn's read_committed / read_uncommitted log
    MB/s, ratio of medians, per-pair range) and rc_e2e_p99_ms (Cairn's
    median p99 in ms, an absolute target; pair_min/pair_max are then the
    lowest and highest p99 of its repetitions)."""
    out = {}
    f = _fig(figs, "rc_tput")
    r = f and method.find_ratio(f, "log_mb_per_s", "cairn/read_committed",
                                "cairn/read_uncommitted")
    if r:
        v = r["ratio_of_medians"]
        out["rc_over_ru_log_bytes"] = {
            "value": v, "target": TARGET, "at_least": True,
            "pair_min": r.get("pair_min"), "pair_max": r.get("pair_max"),
            "ok": v >= TARGET}
    f = _fig(figs, "rc_latency")
    vals = [s.get("p99_ms") for s in (f or {}).get("samples", {}).get(
        "cairn", [])]
    vals = [v for v in vals if v is not None]
    if vals:
        v = statistics.median(vals)
        out["rc_e2e_p99_ms"] = {
            "value": round(v, 3), "target": LAT_TARGET_MS,
            "at_least": False, "pair_min": min(vals),
            "pair_max": max(vals), "ok": v < LAT_TARGET_MS}
    return out
