"""The scaling part of the benchmark (issue #17, "Also in the report"):
produce throughput and latency with 1, 10, 100 and 1,000 partitions, and
1, 10 and 100 concurrent transactional producers committing every 100 ms,
Cairn and Apache Kafka interleaved (method.py: median of the repetitions,
ratios pair by pair).

Partitions: one figure per partition count, 1 KiB acks=all as fast as the
client can (bench_client --seconds), arms per peer x producer mode:
  1p     one producer over every partition
  per10  one producer per 10 partitions (bench_client --producers P/10),
         driven by one loop so the client's own CPU is the same as with
         one; at 1,000 partitions only (100 producers), see PER10_AT
Each peer's topic is made once per figure, bounded by retention.bytes
(about 2 GiB in all: retention()), timed (the figure records
create_seconds, until every partition has a leader, and delete_seconds
per peer), primed with one unmeasured second of writes when it has 100
partitions or more (_prime), and dropped after the figure.

Transactional producers: one figure, bench_txn --producers N committing
every 100 ms (the transaction's age, then flush and commit: the achieved
interval is reported beside it), 1 KiB, on a topic of 100 partitions, so
every N divides them and no two producers share a partition (N = 100:
one each; N = 1: all 100).  All N are initialised before the clock
starts; commit p99 is over every producer's commits that returned in the
window, achieved_interval_ms the mean interval of one producer.  The
producers share one 64 MiB queue budget (TXN_QUEUE_KB) whatever their
number.

Time at the default scale (5 reps of 1 + 3 s each): 10 partition arms
and 6 transactional ones, 80 runs of about 4.5 s (process start, 100
producers' metadata or init_transactions, the final flush come on top of
the 4 s), plus topic creation and priming: about 6 minutes, 4 of them
partitions (estimated from a run at 2 reps of 0.5 + 1 s: 51 s and 25 s).
That is over the 5 minutes this part was given; cut already: per10 at
100 partitions (10 producers, another 45 s), which sits between the 1p
arms and the 100-producer arm (PER10_AT puts it back).  Next to cut, if
need be: the 10-partition figure (45 s; the produce figure's 6
partitions is close) or the one-producer transactional arm (40 s; the
idem_txn figure's txn_100ms is close, on 6 partitions).
"""

import time

import figures
import method

PEERS = ["cairn", "kafka"]
SIZE = 1024
PARTITION_COUNTS = (1, 10, 100, 1000)
PER_PRODUCER = 10                 # partitions per producer, per10 mode
PER10_AT = (1000,)                # partition counts with a per10 arm
TXN_PRODUCERS = (1, 10, 100)
TXN_PARTITIONS = 100
TXN_INTERVAL_MS = 100
# The producers' queues together, whatever their number: a producer flat
# out fills its queue between commits and flushes it before each, so with
# the same total every arm has the same data waiting on the broker (one
# producer's default, 1 GiB, makes 100+ MB transactions; 100 producers
# with 16 MiB each flushed for seconds before every commit).
TXN_QUEUE_KB = 65536
READY_TIMEOUT = 120               # s for a new topic's leaders to show
PRIME_AT = 100                    # topics this wide get an unmeasured run
PRIME_SECONDS = 1
RETAIN_BYTES = 2 << 30            # per topic, over all its partitions


def retention(partitions):
    """Topic configs that keep a figure's topic near RETAIN_BYTES on disk:
    its repetitions write up to 1 GB/s for minutes, which filled the disk
    once (both brokers check retention every second, peers.py)."""
    per = max(16 << 20, RETAIN_BYTES // partitions)
    return {"retention.bytes": str(per),
            "segment.bytes": str(max(4 << 20, per // 4))}


def _create(peer, topic, partitions, progress):
    """Creates the topic and waits until every partition has a leader in
    the broker's metadata (Kafka answers CreateTopics before its
    partitions are ready); returns the seconds it took."""
    t0 = time.monotonic()
    peer.create_topic(topic, partitions, retention(partitions))
    admin = peer._admin()
    while time.monotonic() - t0 < READY_TIMEOUT:
        try:
            md = admin.list_topics(topic, timeout=10).topics.get(topic)
        except Exception:     # asked again until the deadline
            md = None
        if (md is not None and md.error is None
                and len(md.partitions) == partitions
                and all(p.leader >= 0 for p in md.partitions.values())):
            break
        time.sleep(0.1)
    else:
        progress("  %s: %s not ready after %d s" % (peer.name, topic,
                                                   READY_TIMEOUT))
    return round(time.monotonic() - t0, 3)


def _prime(ctx, peer, topic, partitions):
    """One unmeasured second of 1 KiB over every partition of a new topic:
    a broker's first writes to hundreds of fresh partitions (Kafka's
    segment and index files, its JIT on those paths) ran at a tenth of
    the later reps' rate at small scale, which is start-up, not the
    figure."""
    figures.run_prog([ctx.build / "bench_client", "--brokers",
                      peer.bootstrap, "--topic", topic, "--partitions",
                      partitions, "--size", SIZE, "--acks", "-1",
                      "--produce-only", "--seconds", PRIME_SECONDS],
                     120, ctx.progress)


def _drop(peer, topic):
    """Deletes the topic and waits for its files to go (a figure's topic
    holds GBs; the next figure should not share the disk with unlinking
    them); returns the seconds that took."""
    t0 = time.monotonic()
    if peer.alive():
        peer.delete_topic_wait(topic)
    return round(time.monotonic() - t0, 3)


def _pairs(arms, workloads):
    """Cairn against each other peer, workload by workload."""
    names = {a.name for a in arms}
    out = []
    for w in workloads:
        for other in ("kafka", "cairn-base"):
            a, b = "cairn/" + w, "%s/%s" % (other, w)
            if a in names and b in names:
                out.append((a, b))
    return out


def _timed(ctx, prog, topic, partitions, producers, extra):
    """An arm's run: prog --seconds with N producers; bytes_total counts
    every delivered record (CPU s/GB: the broker's CPU over the whole
    run, as figures.py's produce figures count it)."""
    o = ctx.o

    def run(p, rep):
        argv = [ctx.build / prog, "--brokers", p.bootstrap, "--topic",
                topic, "--partitions", partitions, "--size", SIZE,
                "--seconds", o["seconds"], "--warmup-seconds", o["warmup"],
                "--producers", producers] + extra
        recs = figures.run_prog(argv, 180 + 4 * o["seconds"], ctx.progress)
        if not recs:
            return None
        rec = recs[-1]
        rec["bytes_total"] = rec.get("delivered", 0) * SIZE
        rec.setdefault("producers", producers)
        return rec
    return run


def run_partitions(ctx):
    """One figure per partition count: Cairn and Kafka, one producer and
    one per 10 partitions, 1 KiB acks=all flat out."""
    peers = ctx.have(PEERS)
    if not peers:
        return []
    figs = []
    for parts in PARTITION_COUNTS:
        modes = [("1p", 1)]
        if parts in PER10_AT and parts // PER_PRODUCER > 1:
            modes.append(("per10", parts // PER_PRODUCER))
        topics, created, arms = [], {}, []
        for p in peers:
            topic = "b-scale-%d-%s" % (parts, p.name)
            try:
                created[p.name] = _create(p, topic, parts, ctx.progress)
            except Exception as e:   # the other peer is still worth it
                ctx.progress("  %s: creating %d partitions failed: %s"
                             % (p.name, parts, e))
                continue
            if parts >= PRIME_AT:
                _prime(ctx, p, topic, parts)
            topics.append((p, topic))
            for mode, n in modes:
                arms.append(method.Arm(
                    "%s/%s" % (p.name, mode), p,
                    _timed(ctx, "bench_client", topic, parts, n,
                           ["--acks", "-1", "--produce-only"])))
        if not arms:
            continue
        ctx.progress("scaling: %d partition%s (%s), %s, topics created in "
                     "%s s; %d x (%g + %g s)"
                     % (parts, "s" if parts > 1 else "", ", ".join(
                         "%s = %d producer%s" % (m, n, "s" if n > 1 else "")
                         for m, n in modes),
                        ", ".join(created), ", ".join(
                            "%s %.1f" % kv for kv in created.items()),
                        ctx.o["reps"], ctx.o["warmup"], ctx.o["seconds"]))
        fig = method.measure(
            {"key": "scale_p%d" % parts, "kind": "produce",
             "label": "scaling: produce acks=all 1 KiB, %d partition%s"
             % (parts, "s" if parts > 1 else ""), "size": SIZE,
             "partitions": parts, "producers": dict(modes),
             "describe": figures.describe_produce},
            arms, ctx.o["reps"], ctx.progress)
        fig["create_seconds"] = created
        fig["delete_seconds"] = {p.name: _drop(p, t) for p, t in topics}
        method.summarise(fig, ["mb_per_s", "latency_ms_p50",
                               "latency_ms_p99", "cpu_s_per_gb"],
                         _pairs(arms, [m for m, _ in modes]))
        figs.append(fig)
    return figs


def run_txn_producers(ctx):
    """1, 10 and 100 transactional producers committing every 100 ms on
    one topic of 100 partitions, Cairn and Kafka interleaved."""
    peers = ctx.have(PEERS)
    if not peers:
        return []
    topics, created, arms = [], {}, []
    for p in peers:
        topic = "b-scale-txn-%s" % p.name
        try:
            created[p.name] = _create(p, topic, TXN_PARTITIONS,
                                      ctx.progress)
        except Exception as e:
            ctx.progress("  %s: creating the topic failed: %s" % (p.name, e))
            continue
        _prime(ctx, p, topic, TXN_PARTITIONS)
        topics.append((p, topic))
        for n in TXN_PRODUCERS:
            arms.append(method.Arm(
                "%s/%dtp" % (p.name, n), p,
                _timed(ctx, "bench_txn", topic, TXN_PARTITIONS, n,
                       ["--commit-interval-ms", TXN_INTERVAL_MS,
                        "--queue-kbytes", TXN_QUEUE_KB])))
    if not arms:
        return []
    ctx.progress("scaling: %s transactional producers committing every %d "
                 "ms, 1 KiB, %d partitions: %s; %d x (%g + %g s)"
                 % (", ".join(map(str, TXN_PRODUCERS)), TXN_INTERVAL_MS,
                    TXN_PARTITIONS, ", ".join(created), ctx.o["reps"],
                    ctx.o["warmup"], ctx.o["seconds"]))
    fig = method.measure(
        {"key": "scale_txn", "kind": "produce",
         "label": "scaling: transactional producers committing every %d "
         "ms, 1 KiB, %d partitions" % (TXN_INTERVAL_MS, TXN_PARTITIONS),
         "size": SIZE, "partitions": TXN_PARTITIONS,
         "commit_interval_ms": TXN_INTERVAL_MS,
         "producers": list(TXN_PRODUCERS),
         "describe": figures.describe_produce},
        arms, ctx.o["reps"], ctx.progress)
    fig["create_seconds"] = created
    fig["delete_seconds"] = {p.name: _drop(p, t) for p, t in topics}
    method.summarise(fig, ["mb_per_s", "commit_ms_p50", "commit_ms_p99",
                           "achieved_interval_ms", "cpu_s_per_gb"],
                     _pairs(arms, ["%dtp" % n for n in TXN_PRODUCERS]))
    return [fig]


def summary_lines(figs):
    """Plain-language lines, Cairn vs Kafka in every scaling figure: MB/s,
    and p99 (produce latency, or commit latency) where lower is better."""
    lines = []
    for f in figs:
        key = f.get("key", "")
        if key.startswith("scale_p"):
            what = "%d partition%s" % (f["partitions"],
                                       "s" if f["partitions"] > 1 else "")
            works = [("1p", "one producer"),
                     ("per10", "one producer per %d partitions"
                      % PER_PRODUCER)]
            p99 = "latency_ms_p99"
        elif key == "scale_txn":
            what = "transactional every %d ms" % f["commit_interval_ms"]
            works = [("%dtp" % n, "%d producer%s" % (n, "s" if n > 1
                                                     else ""))
                     for n in f["producers"]]
            p99 = "commit_ms_p99"
        else:
            continue
        for w, label in works:
            for metric, name, higher in (("mb_per_s", "MB/s", True),
                                         (p99, "p99 (lower is better)",
                                          False)):
                line = figures.said_line(
                    "scaling, %s, %s, Cairn vs Kafka, %s" % (what, label,
                                                            name),
                    method.find_ratio(f, metric, "cairn/" + w,
                                      "kafka/" + w), higher)
                if line:
                    lines.append(line)
    return lines
