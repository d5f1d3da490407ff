"""The cleaner part of the benchmark (issue #19): log cleaner throughput and
its effect on produce latency, Cairn (with and without fsync) and Apache
Kafka in the same run, measured with method.py (interleaved arms, median
of the repetitions).

Each peer gets a compacted topic of one partition (segment.bytes 1 MiB, so
a pass covers many segments; min.cleanable.dirty.ratio 0.01) and a plain
topic for the latency producer.  The cleaner is held off by
min.compaction.lag.ms (a day: nothing is old enough to clean) and let go
by setting it to 0, so a pass starts when the run says, not while the
topic fills.  Both brokers get log.cleaner.backoff.ms=100 as a dynamic
broker config (Kafka's default, 15 s, would be most of the wait).  Kafka
restarts its cleaner threads on that change; Cairn takes it at the end of
the wait already armed (up to 15 s), which with the JIT is why each peer
first has one unmeasured pass.

Arms, per peer, each starting with the same unmeasured fill of N x 1 KiB
records over N/10 keys (acks=all, one partition), so the disk has the same
recent writes to absorb in both:
  idle      the fill goes to a plain topic (the ballast); then 1 KiB
            acks=all at a fixed rate to the latency topic, cleaner idle
  cleaning  the fill goes to the compacted topic; then the same producer,
            and after its warm-up the hold is lifted: a pass runs while it
            measures

A cleaning run records the pass: its wall time from the release to the
moment the broker's cleaner-offset-checkpoint moves (both brokers write
one per log dir, in the same format, at the end of a pass; up to one
backoff, 0.1 s, of it is the cleaner's wait), the on-disk bytes it had to
clean (the partition's .log files but the active segment) and their ratio,
clean_mb_per_s.  For Cairn also the same bytes over its /metrics'
cairn_cleaner_last_pass_duration_seconds (time inside the pass, ms
resolution), cairn_in_pass_mb_per_s, and cairn_cleaner_bytes_read_total's
growth (it counts both reads of a pass: key map, then copy).
Kafka's log cleaner says "X MB of log processed in Y seconds" only at INFO,
which the harness's logging (slf4j-simple at WARN) drops, and its JMX
gauges are whole seconds: the checkpoint is what both can be read by.
"""

import glob
import json
import os
import subprocess
import time
import urllib.request

import method

# cairn-nofsync tells a stall of Cairn's loop from its acks=all waiting on
# an fsync that the cleaner's writes slow down.
PEERS = ["cairn", "cairn-nofsync", "kafka"]
SIZE = 1024
RECORDS = 200000            # per cleaning run, at scale 1
KEY_SHARE = 10              # N / 10 distinct keys
SEGMENT_BYTES = 1 << 20     # ~210 segments per pass at scale 1
HOLD_MS = str(24 * 3600 * 1000)
BACKOFF_MS = "100"
LAT_PARTITIONS = 6
LAT_RATE = 5000             # records/s of the measured producer
PASS_TIMEOUT = 120          # s from the release to the end of a pass


def compact_config(lag_ms):
    # AlterConfigs (v0-2, the only one confluent_kafka 2.0 sends) replaces
    # every config of the topic: always the whole set.
    return {"cleanup.policy": "compact", "segment.bytes": str(SEGMENT_BYTES),
            "min.cleanable.dirty.ratio": "0.01",
            "min.compaction.lag.ms": lag_ms}


def _alter(peer, restype, name, configs):
    from confluent_kafka.admin import ConfigResource
    res = ConfigResource(restype, name, set_config=configs)
    for fut in peer._admin().alter_configs([res],
                                           request_timeout=60).values():
        fut.result(timeout=90)


def _data_dirs(peer):
    if hasattr(peer, "broker"):                 # Kafka: data-<node>
        return glob.glob(str(peer.broker.ref.dir / "data*"))
    return [str(peer.dir / "data")]


def checkpoint(peer, topic):
    """The topic's partition 0 offset in the cleaner-offset-checkpoint
    (version, count, then "topic partition offset" lines), or -1."""
    for d in _data_dirs(peer):
        try:
            with open(os.path.join(d, "cleaner-offset-checkpoint")) as f:
                lines = f.read().splitlines()
        except OSError:
            continue
        for line in lines[2:]:
            f = line.split()
            if len(f) == 3 and f[0] == topic and f[1] == "0":
                return int(f[2])
    return -1


def dirty_bytes(peer, topic):
    """Bytes of the partition's .log segments but the active (last) one:
    what a pass reads."""
    for d in _data_dirs(peer):
        segs = sorted(glob.glob(os.path.join(d, "%s-0" % topic, "*.log")))
        if segs:
            return sum(os.path.getsize(s) for s in segs[:-1])
    return 0


def cairn_metrics(peer):
    port = getattr(peer, "http_port", None)
    if not port:
        return {}
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port,
                                    timeout=10) as r:
            body = r.read().decode()
    except OSError:
        return {}
    out = {}
    for line in body.splitlines():
        if line.startswith("cairn_cleaner_") and " " in line:
            k, v = line.rsplit(" ", 1)
            try:
                out[k] = float(v)
            except ValueError:
                pass
    return out


def describe(rec):
    s = "p50 %.2f ms p99 %.2f ms at %.1f MB/s" % (
        rec.get("latency_ms_p50", 0), rec.get("latency_ms_p99", 0),
        rec.get("mb_per_s", 0))
    if "pass_wall_s" in rec:
        s += "; pass %.1f MB in %.2f s = %.1f MB/s" % (
            rec["clean_mb"], rec["pass_wall_s"], rec["clean_mb_per_s"])
        if rec.get("cairn_in_pass_mb_per_s") is not None:
            s += " (Cairn's metrics: %.1f MB/s inside the pass)" % (
                rec["cairn_in_pass_mb_per_s"])
        if not rec.get("pass_in_window"):
            s += ", pass ended after the window"
    return s


class _Peer:
    """One peer's topics and state across the runs."""

    def __init__(self, ctx, peer):
        self.ctx, self.p = ctx, peer
        self.ctopic = "b-cleaner-compact-%s" % peer.name
        self.ltopic = "b-cleaner-latency-%s" % peer.name
        self.btopic = "b-cleaner-ballast-%s" % peer.name
        self.n = max(20000, int(RECORDS * ctx.o["scale"]))

    def setup(self):
        from confluent_kafka.admin import NewTopic
        # On the broker itself: confluent_kafka refuses the cluster-wide
        # resource (an empty name).
        node = min(self.p._admin().list_topics(timeout=30).brokers)
        _alter(self.p, "broker", str(node),
               {"log.cleaner.backoff.ms": BACKOFF_MS})
        nt = NewTopic(self.ctopic, num_partitions=1, replication_factor=1,
                      config=compact_config(HOLD_MS))
        for fut in self.p._admin().create_topics(
                [nt], request_timeout=60).values():
            fut.result(timeout=90)
        self.p.create_topic(self.ltopic, LAT_PARTITIONS)
        self.p.create_topic(self.btopic, 1)

    def fill(self, topic):
        b = self.ctx.build
        from figures import run_prog
        run_prog([b / "bench_client", "--brokers", self.p.bootstrap,
                  "--topic", topic, "--partitions", 1, "--messages",
                  self.n, "--keys", self.n // KEY_SHARE, "--size", SIZE,
                  "--acks", "-1", "--produce-only"], 900, self.ctx.progress)

    def latency(self):
        o = self.ctx.o
        return subprocess.Popen(
            [str(a) for a in (
                self.ctx.build / "bench_client", "--brokers",
                self.p.bootstrap, "--topic", self.ltopic, "--partitions",
                LAT_PARTITIONS, "--size", SIZE, "--acks", "-1", "--rate",
                LAT_RATE, "--linger-ms", 5, "--produce-only", "--seconds",
                o["seconds"], "--warmup-seconds", o["warmup"])],
            stdout=subprocess.PIPE, text=True)

    def finish_latency(self, proc):
        from figures import json_lines
        try:
            out = proc.communicate(timeout=120 + 4 * self.ctx.o["seconds"])[0]
        except subprocess.TimeoutExpired:
            proc.kill()
            out = proc.communicate()[0]
        recs = json_lines(out)
        if not recs:
            return None
        rec = recs[-1]
        rec["bytes_total"] = rec.get("delivered", 0) * SIZE
        return rec

    def release_pass(self, during=None):
        """Fills the topic, lets the cleaner go and waits for the pass;
        during(): started just before the release (the latency producer).
        Returns the pass's figures."""
        self.fill(self.ctopic)
        before = checkpoint(self.p, self.ctopic)
        nbytes = dirty_bytes(self.p, self.ctopic)
        m0 = cairn_metrics(self.p)
        proc, t_launch = None, time.monotonic()
        if during:
            proc = during()
            time.sleep(self.ctx.o["warmup"])
        t0 = time.monotonic()
        _alter(self.p, "topic", self.ctopic, compact_config("0"))
        done = None
        while time.monotonic() - t0 < PASS_TIMEOUT:
            if checkpoint(self.p, self.ctopic) > before:
                done = time.monotonic()
                break
            time.sleep(0.02)
        _alter(self.p, "topic", self.ctopic, compact_config(HOLD_MS))
        out = {"records": self.n, "keys": self.n // KEY_SHARE,
               "clean_mb": round(nbytes / 1e6, 2)}
        if done is None:
            self.ctx.progress("  %s: no pass within %d s"
                              % (self.p.name, PASS_TIMEOUT))
        else:
            wall = done - t0
            out.update(pass_wall_s=round(wall, 3),
                       clean_mb_per_s=round(nbytes / 1e6 / wall, 2),
                       pass_in_window=(done - t_launch <=
                                       self.ctx.o["warmup"]
                                       + self.ctx.o["seconds"]))
        m1 = cairn_metrics(self.p)
        key_d = "cairn_cleaner_last_pass_duration_seconds"
        key_b = "cairn_cleaner_bytes_read_total"
        if m1.get(key_d) and key_b in m0 and key_b in m1:
            read = m1[key_b] - m0[key_b]
            out.update(cairn_bytes_read=read,
                       cairn_pass_s=m1[key_d],
                       cairn_in_pass_mb_per_s=round(nbytes / 1e6 / m1[key_d],
                                                    2))
        if proc is not None:
            rec = self.finish_latency(proc)
            if rec is None:
                return None
            rec.update(out)
            return rec
        return out


def run_cleaner(ctx):
    peers = ctx.have(PEERS)
    if not peers:
        return []
    st = {}
    for p in peers:
        s = _Peer(ctx, p)
        try:
            s.setup()
        except Exception as e:   # the other peer is still worth measuring
            ctx.progress("cleaner: %s: setup failed: %s" % (p.name, e))
            continue
        st[p.name] = s
        ctx.progress("cleaner: %s: unmeasured first pass over %d x %d B, "
                     "%d keys" % (p.name, s.n, SIZE, s.n // KEY_SHARE))
        first = s.release_pass()
        ctx.progress("  %s" % json.dumps(first))
    arms = []
    for name, s in st.items():
        def idle(peer, rep, s=s):
            s.fill(s.btopic)
            return s.finish_latency(s.latency())

        def cleaning(peer, rep, s=s):
            return s.release_pass(during=s.latency)
        arms.append(method.Arm(name + "/idle", s.p, idle))
        arms.append(method.Arm(name + "/cleaning", s.p, cleaning))
    if not arms:
        return []
    ctx.progress("cleaner: %s; produce 1 KiB acks=all at %d records/s with "
                 "the cleaner idle and during a pass, %d x (%g + %g s)"
                 % (", ".join(st), LAT_RATE, ctx.o["reps"], ctx.o["warmup"],
                    ctx.o["seconds"]))
    fig = method.measure({"key": "cleaner", "kind": "cleaner",
                          "label": "log cleaner: throughput, and produce "
                          "acks=all 1 KiB at %d records/s while it runs"
                          % LAT_RATE, "size": SIZE,
                          "records_per_pass": max(s.n for s in st.values()),
                          "key_share": 1.0 / KEY_SHARE,
                          "segment_bytes": SEGMENT_BYTES,
                          "rate": LAT_RATE, "describe": describe},
                         arms, ctx.o["reps"], ctx.progress)
    for s in st.values():
        if s.p.alive():
            s.p.delete_topic(s.ctopic)
            s.p.delete_topic(s.ltopic)
            s.p.delete_topic(s.btopic)
    pairs = [("%s/cleaning" % n, "%s/idle" % n) for n in st]
    if "kafka" in st:
        pairs += [(c + w, "kafka" + w) for c in ("cairn", "cairn-nofsync")
                  if c in st for w in ("/cleaning", "/idle")]
    method.summarise(fig, ["latency_ms_p50", "latency_ms_p99",
                           "clean_mb_per_s", "cairn_in_pass_mb_per_s",
                           "pass_wall_s"], pairs)
    # MB/s is the offered load here, not a result: only whether each arm
    # kept up with it (print_figures says so), as in produce's latency_1k.
    offered = LAT_RATE * SIZE / 1e6
    fig["offered_mb_per_s"] = offered
    fig["kept_up"] = {}
    for arm, samples in fig["samples"].items():
        st = method.spread([x.get("mb_per_s") for x in samples])
        fig["kept_up"][arm] = bool(st) and st["median"] >= 0.9 * offered
    return [fig]


def summary_lines(figs):
    """Plain-language lines of the cleaner figure (as figures.py's)."""
    lines = []
    f = next((f for f in figs if f.get("key") == "cleaner"), None)
    if not f:
        return lines

    def said(what, r, higher_better=True):
        if not r:
            return
        x = r["ratio_of_medians"]
        good = x >= 1 if higher_better else x <= 1
        word = "ahead " if good else "behind"
        if r.get("pair_min", x) <= 1 <= r.get("pair_max", x):
            word = "even  "
        lines.append("%s %s: %.2fx (per-pair median %.2f, %.2f-%.2f)" % (
            word, what, x, r.get("pair_median", x), r.get("pair_min", x),
            r.get("pair_max", x)))
    said("log cleaner MB/s (release to checkpoint), Cairn vs Kafka",
         method.find_ratio(f, "clean_mb_per_s", "cairn/cleaning",
                           "kafka/cleaning"))
    for n in PEERS:
        r = method.find_ratio(f, "latency_ms_p99", n + "/cleaning",
                              n + "/idle")
        if r:
            lines.append("%s produce p99 during a cleaner pass / idle: "
                         "%s" % (n, method.fmt_ratio(r)))
    said("produce p99 during a cleaner pass, Cairn vs Kafka (lower is "
         "better)", method.find_ratio(f, "latency_ms_p99", "cairn/cleaning",
                                      "kafka/cleaning"), False)
    return lines
