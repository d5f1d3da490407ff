"""How every figure of the benchmark is measured and summarised.

A figure is a set of arms, each a peer (broker setting) running one
workload.  measure() runs every arm `reps` times, interleaved (A B C A B C
...), so a slow moment of the machine hits every arm alike, and records
for each run the program's JSON plus the broker's CPU seconds
(utime+stime from /proc, before and after) and its memory.  summarise()
gives each arm's min-median-max of a metric and, for chosen pairs of arms
(Cairn vs Kafka, transactional vs idempotent), the ratio of the medians
and the median, min and max of the per-pair ratios: run i of one arm
against run i of the other, which were seconds apart.

Every raw sample stays in the figure's dict, which is what goes into the
JSON report.
"""

import statistics
import time


def _ratio(a, b):
    if a is None or b is None or not b:
        return None
    return a / b


def spread(values):
    """min, median, max (None for no values)."""
    vals = [v for v in values if v is not None]
    if not vals:
        return None
    return {"n": len(vals), "min": min(vals),
            "median": statistics.median(vals), "max": max(vals)}


class Arm:
    """One peer running one workload: run(peer, rep) -> the program's JSON
    (a dict) or None.  name is how the samples are keyed: the peer's name,
    or "peer/workload" when a figure has several workloads.  before(peer,
    rep) and after(peer, rep), when given, run around each run outside its
    CPU and wall-time count: making a fresh topic, deleting it and waiting
    for its files to go, so neither the set-up nor a full disk is in the
    figure."""

    def __init__(self, name, peer, run, before=None, after=None):
        self.name = name
        self.peer = peer
        self.run = run
        self.before = before
        self.after = after


def measure(figure, arms, reps, progress=None, order=None):
    """Runs every arm reps times, interleaved (arm 1, arm 2, ..., arm 1,
    ...), or in the order order(rep, arms) gives for each repetition (to
    rotate which arm goes first).  Returns the figure dict with
    "samples": {arm name: [sample]},
    each sample the program's JSON with "rep", "cpu_seconds",
    "wall_seconds", "rss_kb", "hwm_kb" and "cpu_s_per_gb" (broker CPU per
    GB of record bytes moved, "bytes_total") added."""
    fig = {k: v for k, v in figure.items() if not callable(v)}
    fig["arms"] = [a.name for a in arms]
    fig["peer_of"] = {a.name: a.peer.name for a in arms}
    fig["samples"] = {a.name: [] for a in arms}
    describe = figure.get("describe", str)
    for rep in range(reps):
        for arm in (order(rep, arms) if order else arms):
            peer = arm.peer
            if not peer.alive():
                if progress:
                    progress("  %s is not running; skipped" % peer.name)
                continue
            if arm.before:
                arm.before(peer, rep)
            cpu0 = peer.cpu_seconds()
            t0 = time.monotonic()
            rec = arm.run(peer, rep)
            wall = time.monotonic() - t0
            cpu1 = peer.cpu_seconds()
            if arm.after:
                arm.after(peer, rep)
            if rec is None:
                continue
            rec = dict(rec)
            rec["rep"] = rep
            rec["wall_seconds"] = round(wall, 3)
            if cpu0 is not None and cpu1 is not None:
                rec["cpu_seconds"] = round(cpu1 - cpu0, 3)
                gb = (rec.get("bytes_total") or 0) / 1e9
                rec["cpu_s_per_gb"] = (round(rec["cpu_seconds"] / gb, 3)
                                       if gb else None)
            rec.update(peer.memory_kb())
            fig["samples"][arm.name].append(rec)
            if progress:
                progress("  %-28s rep %d/%d: %s" % (arm.name, rep + 1, reps,
                                                   describe(rec)))
    return fig


def pair_ratio(fig, metric, a, b):
    """Arm a against arm b on one metric: ratio of their medians, and the
    ratios of run i of a to run i of b (measured seconds apart), with their
    median, min and max.  None when either has no samples."""
    sa = {s["rep"]: s.get(metric) for s in fig["samples"].get(a, [])}
    sb = {s["rep"]: s.get(metric) for s in fig["samples"].get(b, [])}
    ma, mb = spread(sa.values()), spread(sb.values())
    if not ma or not mb or not mb["median"]:
        return None
    pairs = [_ratio(sa[r], sb[r]) for r in sorted(sa) if r in sb]
    pairs = [round(p, 4) for p in pairs if p is not None]
    out = {"a": a, "b": b, "metric": metric,
           "ratio_of_medians": round(ma["median"] / mb["median"], 4),
           "pairs": pairs}
    if pairs:
        out.update(pair_median=round(statistics.median(pairs), 4),
                   pair_min=min(pairs), pair_max=max(pairs))
    return out


def summarise(fig, metrics, pairs):
    """Adds fig["stats"][metric][arm] = spread of the metric and
    fig["ratios"] = [pair_ratio(...) for each (a, b) in pairs and each
    metric]."""
    fig["stats"] = {m: {arm: spread([s.get(m) for s in samples])
                        for arm, samples in fig["samples"].items()}
                    for m in metrics}
    fig["ratios"] = []
    for m in metrics:
        for a, b in pairs:
            r = pair_ratio(fig, m, a, b)
            if r:
                fig["ratios"].append(r)
    return fig


def find_ratio(fig, metric, a, b):
    for r in fig.get("ratios", []):
        if r["metric"] == metric and r["a"] == a and r["b"] == b:
            return r
    return None


def fmt_spread(s, spec="%.1f"):
    if not s:
        return "-"
    return (spec + " / " + spec + " / " + spec) % (s["min"], s["median"],
                                                   s["max"])


def fmt_ratio(r):
    """"1.23 (pairs 1.21, 1.10-1.35)": ratio of medians, then the median
    and range of the per-pair ratios."""
    if not r:
        return "-"
    if "pair_min" not in r:
        return "%.2f" % r["ratio_of_medians"]
    return "%.2f (pairs %.2f, %.2f-%.2f)" % (
        r["ratio_of_medians"], r["pair_median"], r["pair_min"],
        r["pair_max"])
