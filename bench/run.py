#!/usr/bin/python3
"""Broker benchmark report (issue #7): one command, everything measured in
the same run, a table on the terminal and JSON in bench/out/report.json.

  make bench        (= /usr/bin/python3 bench/run.py)
  /usr/bin/python3 bench/run.py [--build-dir build] [--cairn build/cairn]
          [--dir DIR] [--scale F|small] [--peer both|cairn|mock] [--mock]
          [--only PART,...] [--report FILE]

Parts, in the order they run:

  limits     this machine: fdatasync'd sequential 256 KiB writes (MB/s),
             4 KiB fdatasync latency, loopback TCP throughput (bench_limits)
  produce    librdkafka producer throughput, produce-only, for 100 B and
             1 KiB values on 1 and 6 partitions: acks=1, acks=all,
             idempotent, acks=all held to 5 in flight (6 partitions only:
             the fair baseline for idempotent, which librdkafka caps at 5),
             and transactional committing every 10, 100 and 1000 ms
             (bench_client, bench_txn); ratio to the synced-disk limit
  consume    librdkafka consumer (read_uncommitted) and the raw Fetch
             client bench_fetch_raw (50 and 16 MiB max_bytes); ratio to
             loopback TCP.  Data was just produced, so it is page-cached.
  txn        commit latency p50/p99/p99.9: 200 transactions of one record
             on each of 1, 4 and 16 partitions (bench_txn --commit-latency)
  rc_tput    read_committed vs read_uncommitted consume of a topic written
             by 8 transactional producers, 100 records per transaction,
             every 10th aborted (bench_rc write/consume, best of 3 each)
  rc_latency end-to-end produce -> read_committed delivery latency at 2000
             msgs/s, commit every 100 ms, for 10 s (bench_rc latency)
  load       coordinator load time after a restart with 100k transactional
             ids (bench_txn_load.py, its own broker)
  memory     broker VmRSS with 10k partitions (100 topics x 100) and 100k
             idempotent producer ids each writing one batch
             (bench_mem.py, its own broker)
  pstate     producer table bytes per idle entry (bench_pstate, in-process)
  scaling    produce and fetch throughput with 1, 1,000, 10,000 and 100,000
             partitions: 256 MiB spread over every partition (batches of
             total/partitions, 512 B to 64 KiB), acks=1, 100 partitions per
             request, raw protocol (bench_scale), a fresh broker per count;
             topic creation time too.  Not scaled below 1 partition per
             batch; at 100,000 partitions each gets one 2.6 KiB batch.
  (aliases: client = produce,consume; rc = rc_tput,rc_latency)

The produce, consume, txn and rc parts run twice in the same run: against
Cairn and against librdkafka's mock cluster (tests/e2e/e2e_mockbroker, an
in-memory broker in one process) as a peer, and every row shows Cairn /
mock.  The mock keeps everything in memory and never fsyncs, and keeps
only ~5 MB per partition, so its consume runs use fewer records (capped,
shown in the JSON) and its read_committed filtering is not Kafka's.
load and memory are Cairn-only (the mock has no persistence; the memory
run needs CreateTopics, which the mock lacks).

--scale multiplies every count (default 1; "small" = 0.1).  At scale 1 the
whole run takes about 8-10 minutes on a 2-core VM.  --peer cairn skips
the mock, --peer mock (or --mock) runs only the mock, to check the harness.
With --only the report goes to bench/out/report-<parts>.json unless
--report says otherwise, so a partial run does not replace the full one.
Progress goes to stderr; the load average before and after is recorded,
since other work on the machine skews every number.
"""

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SIZES = [1024, 100]
PARTITION_COUNTS = [1, 6]
PRODUCE_COUNTS = {1024: 200000, 100: 600000}    # per produce run, scale 1
CONSUME_COUNTS = {1024: 300000, 100: 1000000}
# The mock trims each partition's log at ~5 MB; consuming from the start
# needs everything still there, so its consume runs are capped.
MOCK_CONSUME_CAP = {1024: 20000, 100: 150000}
# (test, label, partition counts, bench_client args or commit interval)
PRODUCE_MODES = [
    ("produce_acks1", "produce acks=1", PARTITION_COUNTS, ["--acks", "1"]),
    ("produce_acksall", "produce acks=all", PARTITION_COUNTS,
     ["--acks", "-1"]),
    ("produce_inflight5", "produce acks=all 5 in flight", [6],
     ["--acks", "-1", "--max-in-flight", "5"]),
    ("produce_idempotent", "produce idempotent", PARTITION_COUNTS,
     ["--acks", "-1", "--idempotent"]),
    ("produce_txn_10ms", "produce txn 10 ms", PARTITION_COUNTS, 10),
    ("produce_txn_100ms", "produce txn 100 ms", PARTITION_COUNTS, 100),
    ("produce_txn_1000ms", "produce txn 1000 ms", PARTITION_COUNTS, 1000),
]
TXN_INTERVALS_MS = [10, 100, 1000]
TXN_TARGETS = {10: 0.80, 100: 0.98}  # min ratio to idempotent produce
RAW_FETCHES = [  # (test name, max_bytes)
    ("fetch_raw", 50 * 1024 * 1024),
    ("fetch_raw_16m", 16 * 1024 * 1024),
]
RAW_PASSES = 3
CONSUME_PARTITIONS = 6
LAT_TOPIC = "bench-txn-latency"
LAT_PARTITIONS = 16
LAT_PER_TXN = [1, 4, 16]
LAT_TRANSACTIONS = 200
RC_TOPIC = "bench-rc"
RC_PARTITIONS = 6
RC_RECORDS = 300000         # read_committed topic, records at scale 1
RC_MOCK_CAP = 20000
RC_SIZE = 1024
RC_TXN_RECORDS = 100
RC_ABORT_EVERY = 10         # every 10th transaction aborts
RC_PRODUCERS = 8
RC_ROUNDS = 3
RC_TARGET = 0.95            # min read_committed / read_uncommitted, log B/s
RC_LAT_TOPIC = "bench-rc-latency"
RC_LAT_SECONDS = 10
RC_LAT_RATE = 2000
RC_LAT_INTERVAL_MS = 100
RC_LAT_FETCH_WAIT_MS = 10
RC_LAT_TARGET_MS = RC_LAT_INTERVAL_MS + 10  # p99 target
LOAD_IDS = 100000
MEM_TOPICS = 100
MEM_PARTITIONS = 100        # per topic
MEM_PRODUCERS = 100000
SCALE_PARTITIONS = [1, 1000, 10000, 100000]
SCALE_BYTES = 256 << 20     # produced (then fetched) per partition count
SCALE_PER_REQUEST = 100
PARTS = ["limits", "produce", "consume", "txn", "rc_tput", "rc_latency",
         "load", "memory", "pstate", "scaling"]
PEER_PARTS = {"produce", "consume", "txn", "rc_tput", "rc_latency"}
ALIASES = {"client": ["produce", "consume"], "rc": ["rc_tput", "rc_latency"]}
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


def free_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def uptime():
    try:
        return subprocess.run(["uptime"], stdout=subprocess.PIPE, text=True,
                              timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


class Target:
    """One broker under test: Cairn or the mock cluster."""

    def __init__(self, name, args, tmp):
        self.name = name
        self.mock = name == "mock"
        self.args = args
        self.tmp = tmp / name
        self.tmp.mkdir()
        self.proc = None
        self.bootstrap = None
        self.res = {"runs": []}

    def create(self):
        return [] if self.mock else ["--create"]

    def start(self, topics):
        log = open(self.tmp / "broker.log", "wb")
        if self.mock:
            argv = [str(Path(self.args.build_dir) / "e2e_mockbroker")]
            for t, parts in topics:
                argv += ["--topic", "%s:%d" % (t, parts)]
            self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE,
                                         stderr=log,
                                         stdin=subprocess.DEVNULL)
            self.bootstrap = self.proc.stdout.readline().split()[1].decode()
            return
        port = free_port()
        data = self.tmp / "data"
        data.mkdir()
        argv = [self.args.cairn, "--set",
                "listeners=PLAINTEXT://127.0.0.1:%d" % port,
                "--set", "log.dirs=%s" % data]
        self.proc = subprocess.Popen(argv, stdout=log, stderr=log,
                                     stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                if (self.proc.poll() is not None
                        or time.monotonic() > deadline):
                    self.stop()
                    sys.exit("broker did not start; see %s"
                             % (self.tmp / "broker.log"))
                time.sleep(0.05)
        self.bootstrap = "127.0.0.1:%d" % port

    def alive(self):
        if self.proc.poll() is not None:
            sys.exit("%s broker died; see %s" % (self.name,
                                                  self.tmp / "broker.log"))

    def rss_kb(self):
        try:
            with open("/proc/%d/status" % self.proc.pid) as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1])
        except OSError:
            pass
        return None

    def stop(self):
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)


def produce_topic(test, size, parts):
    return "bench-%s-%d-p%d" % (test, size, parts)


def consume_topic(size):
    return "bench-consume-%d" % size


def all_topics():
    """Every topic a target run uses, for the mock, which cannot create
    topics."""
    out = []
    for test, _, plist, _ in PRODUCE_MODES:
        for size in SIZES:
            out += [(produce_topic(test, size, p), p) for p in plist]
    out += [(consume_topic(s), CONSUME_PARTITIONS) for s in SIZES]
    out += [(LAT_TOPIC, LAT_PARTITIONS), (RC_TOPIC, RC_PARTITIONS),
            (RC_LAT_TOPIC, RC_PARTITIONS)]
    return out


def scaled(n, scale, floor):
    return max(floor, int(n * scale))


def run_produce(t, build, scale):
    for size in SIZES:
        n = scaled(PRODUCE_COUNTS[size], scale, 1000)
        for test, label, plist, how in PRODUCE_MODES:
            for parts in plist:
                topic = produce_topic(test, size, parts)
                progress("%s: %s, %d x %d B, %d partition%s"
                         % (t.name, label, n, size, parts,
                            "" if parts == 1 else "s"))
                common = ["--brokers", t.bootstrap, "--topic", topic,
                          "--partitions", parts, "--messages", n,
                          "--size", size] + t.create()
                if isinstance(how, int):
                    argv = [build / "bench_txn"] + common + [
                        "--commit-interval-ms", how]
                else:
                    argv = ([build / "bench_client"] + common
                            + ["--produce-only"] + how)
                for rec in run_prog(argv, 600, test):
                    rec["test"] = test
                    rec["partitions"] = parts
                    extra = ""
                    if "commits" in rec:
                        extra = ", %d commits, commit p50 %.2f ms" % (
                            rec["commits"], rec["commit_ms_p50"])
                    progress("  %s%s" % (summary(rec), extra))
                    t.res["runs"].append(rec)
                t.alive()


def run_consume(t, build, scale):
    for size in SIZES:
        n = scaled(CONSUME_COUNTS[size], scale, 1000)
        if t.mock:
            n = min(n, MOCK_CONSUME_CAP[size])
        topic = consume_topic(size)
        progress("%s: %s: produce %d x %d B, then consume with librdkafka"
                 % (t.name, topic, n, size))
        for rec in run_prog(
                [build / "bench_client", "--brokers", t.bootstrap,
                 "--topic", topic, "--partitions", CONSUME_PARTITIONS,
                 "--messages", n, "--size", size, "--acks", "-1"]
                + t.create(), 600, "bench_client"):
            if rec["test"] == "fetch":
                progress("  librdkafka consume: %s, %d/%d records"
                         % (summary(rec), rec["consumed"], n))
                t.res["runs"].append(rec)
        t.alive()
        for name, max_bytes in RAW_FETCHES:
            progress("%s: %s: raw fetch, max_bytes %d MiB, %d passes"
                     % (t.name, topic, max_bytes >> 20, RAW_PASSES))
            for rec in run_prog(
                    [build / "bench_fetch_raw", "--brokers", t.bootstrap,
                     "--topic", topic, "--passes", RAW_PASSES,
                     "--max-bytes", max_bytes], 600, name):
                rec["test"] = name
                rec["size"] = size
                rec["partitions"] = CONSUME_PARTITIONS
                progress("  %s" % summary(rec))
                t.res["runs"].append(rec)
            t.alive()


def run_commit_latency(t, build):
    lat = t.res.setdefault("commit_latency", [])
    for k in LAT_PER_TXN:
        progress("%s: commit latency, %d transactions x %d partitions"
                 % (t.name, LAT_TRANSACTIONS, k))
        for rec in run_prog(
                [build / "bench_txn", "--brokers", t.bootstrap, "--topic",
                 LAT_TOPIC, "--partitions", LAT_PARTITIONS,
                 "--commit-latency", "--partitions-per-txn", k,
                 "--transactions", LAT_TRANSACTIONS] + t.create(), 600,
                "bench_txn --commit-latency"):
            progress("  p50 %.2f ms p99 %.2f ms p99.9 %.2f ms"
                     % (rec["p50_ms"], rec["p99_ms"], rec["p999_ms"]))
            lat.append(rec)
        t.alive()


def log_bytes(t, topic):
    """On-disk bytes of the topic's .log segments (0 with the mock)."""
    total = 0
    for d in (t.tmp / "data").glob("%s-*" % topic):
        if d.name[len(topic) + 1:].isdigit():
            total += sum(f.stat().st_size for f in d.glob("*.log"))
    return total


def run_rc_tput(t, build, scale):
    n = max(10 * RC_TXN_RECORDS, int(RC_RECORDS * scale))
    if t.mock:
        n = min(n, RC_MOCK_CAP)
    n -= n % RC_TXN_RECORDS
    common = ["--brokers", t.bootstrap, "--topic", RC_TOPIC, "--partitions",
              RC_PARTITIONS, "--messages", n, "--size", RC_SIZE,
              "--txn-records", RC_TXN_RECORDS, "--abort-every",
              RC_ABORT_EVERY]
    progress("%s: %s: transactional write %d x %d B, %d per transaction, "
             "every %dth aborted, %d producers"
             % (t.name, RC_TOPIC, n, RC_SIZE, RC_TXN_RECORDS,
                RC_ABORT_EVERY, RC_PRODUCERS))
    rc = {"write": None, "passes": []}
    t.res["read_committed"] = rc
    recs = run_prog([build / "bench_rc", "write"] + common
                    + ["--producers", RC_PRODUCERS] + t.create(), 900,
                    "bench_rc write")
    for rec in recs:
        rc["write"] = rec
        progress("  write: %s, %d transactions in %.1f s"
                 % (summary(rec), rec["transactions"], rec["seconds"]))
    if not recs:
        return
    t.alive()
    lb = 0 if t.mock else log_bytes(t, RC_TOPIC)
    progress("%s: %s: consume %d rounds of read_uncommitted + "
             "read_committed, log %.1f MB"
             % (t.name, RC_TOPIC, RC_ROUNDS, lb / 1e6))
    for rec in run_prog([build / "bench_rc", "consume"] + common
                        + ["--rounds", RC_ROUNDS, "--log-bytes", lb], 600,
                        "bench_rc consume"):
        if rec["test"] == "read_committed":
            rc["summary"] = rec
            progress("  ratio committed/uncommitted: log bytes/s %.3f, "
                     "delivered records/s %.3f"
                     % (rec["ratio_log_bytes_per_s"],
                        rec["ratio_msgs_per_s"]))
        else:
            rc["passes"].append(rec)
            progress("  %-16s round %d: %.2f s, log %.1f MB/s, delivered "
                     "%s, %d/%d records"
                     % (rec["isolation"], rec["round"], rec["seconds"],
                        rec["log_mb_per_s"], summary(rec), rec["consumed"],
                        rec["expected"]))
    t.alive()


def run_rc_latency(t, build):
    progress("%s: read_committed latency, %d msgs/s, commit every %d ms, "
             "%d s" % (t.name, RC_LAT_RATE, RC_LAT_INTERVAL_MS,
                       RC_LAT_SECONDS))
    for rec in run_prog(
            [build / "bench_rc", "latency", "--brokers", t.bootstrap,
             "--topic", RC_LAT_TOPIC, "--partitions", RC_PARTITIONS,
             "--rate", RC_LAT_RATE, "--commit-interval-ms",
             RC_LAT_INTERVAL_MS, "--seconds", RC_LAT_SECONDS,
             "--fetch-wait-ms", RC_LAT_FETCH_WAIT_MS] + t.create(), 300,
            "bench_rc latency"):
        t.res["rc_latency"] = rec
        progress("  p50 %.1f ms p99 %.1f ms p99.9 %.1f ms, %d samples"
                 % (rec["p50_ms"], rec["p99_ms"], rec["p999_ms"],
                    rec["samples"]))
    t.alive()


def run_target(t, build, parts, scale):
    progress("starting %s" % ("librdkafka mock cluster" if t.mock
                              else "Cairn broker"))
    t.start(all_topics())
    try:
        if "produce" in parts:
            run_produce(t, build, scale)
        if "consume" in parts:
            run_consume(t, build, scale)
        if "txn" in parts:
            run_commit_latency(t, build)
        if "rc_tput" in parts:
            run_rc_tput(t, build, scale)
        if "rc_latency" in parts:
            run_rc_latency(t, build)
        t.res["rss_end_kb"] = t.rss_kb()
    finally:
        progress("stopping %s" % t.name)
        t.stop()


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
    out = []
    total = max(1 << 20, int(SCALE_BYTES * scale))
    for parts in SCALE_PARTITIONS:
        t = Target("scale-%d" % parts, args, tmp)
        progress("scaling: %d partitions, %d MiB produced then fetched"
                 % (parts, total >> 20))
        t.start([])
        try:
            for rec in run_prog(
                    [build / "bench_scale", "--brokers", t.bootstrap,
                     "--topic", "bench-scale", "--partitions", parts,
                     "--bytes", total, "--per-request", SCALE_PER_REQUEST],
                    3600, "bench_scale"):
                rec["rss_kb"] = t.rss_kb()
                progress("  %s: %s%s" % (
                    rec["test"], summary(rec),
                    ", topic created in %.1f s" % rec["create_seconds"]
                    if "create_seconds" in rec else ""))
                out.append(rec)
            t.alive()
        finally:
            t.stop()
            shutil.rmtree(t.tmp, ignore_errors=True)
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


def find(runs, test, size, parts):
    for r in runs:
        if (r["test"] == test and r["size"] == size
                and r.get("partitions") == parts):
            return r
    return None


def fmt(v, spec="%.1f"):
    return "-" if v is None else spec % v


def ratio(a, b):
    return round(a / b, 3) if a is not None and b else None


ROW_LABELS = dict((m[0], m[1]) for m in PRODUCE_MODES)
ROW_LABELS.update({"fetch": "consume librdkafka",
                   "fetch_raw": "consume raw fetch 50 MiB",
                   "fetch_raw_16m": "consume raw fetch 16 MiB",
                   "consume_read_uncommitted": "consume read_uncommitted",
                   "consume_read_committed": "consume read_committed"})


def rc_rows(res):
    """read_committed summary as two throughput rows (log bytes/s)."""
    rc = res.get("read_committed") or {}
    s = rc.get("summary")
    if not s:
        # bench_rc prints no summary when a pass came out wrong (the mock
        # delivers aborted records to read_committed): best pass of each.
        s = {"size": RC_SIZE, "partitions": RC_PARTITIONS}
        for p in rc.get("passes", []):
            key = p["isolation"][5:]
            if key not in s or p["log_mb_per_s"] > s[key]["log_mb_per_s"]:
                s[key] = p
    out = []
    for key, test in (("uncommitted", "consume_read_uncommitted"),
                      ("committed", "consume_read_committed")):
        x = s.get(key)
        if not x:
            continue
        out.append({"test": test, "size": s["size"],
                    "partitions": s["partitions"],
                    "mb_per_s": x["log_mb_per_s"],
                    "msgs_per_s": x["msgs_per_s"],
                    "messages": x.get("consumed")})
    return out


def build_rows(report):
    """One row per workload: Cairn, its limit, the mock, Cairn / mock."""
    lim = report["limits"]
    disk = lim.get("disk_write_fdatasync", {}).get("mb_per_s")
    tcp = lim.get("tcp_loopback", {}).get("mb_per_s")
    tg = report["targets"]
    runs = {k: v["runs"] + rc_rows(v) for k, v in tg.items()}
    keys = []
    for name in ("cairn", "mock"):
        for r in runs.get(name, []):
            k = (r["test"], r["size"], r.get("partitions"))
            if k not in keys:
                keys.append(k)
    rows = []
    for test, size, parts in keys:
        c = find(runs.get("cairn", []), test, size, parts)
        m = find(runs.get("mock", []), test, size, parts)
        produce = test.startswith("produce")
        limit = disk if produce else tcp
        row = {"test": test, "size": size, "partitions": parts,
               "limit": "disk" if produce else "tcp",
               "limit_mb_per_s": limit,
               "cairn_mb_per_s": c and c["mb_per_s"],
               "cairn_msgs_per_s": c and c["msgs_per_s"],
               "cairn_messages": c and c.get("messages"),
               "mock_mb_per_s": m and m["mb_per_s"],
               "mock_messages": m and m.get("messages")}
        row["cairn_vs_limit"] = ratio(row["cairn_mb_per_s"], limit)
        row["cairn_vs_mock"] = ratio(row["cairn_mb_per_s"],
                                     row["mock_mb_per_s"])
        rows.append(row)
    return rows


def print_rows(rows):
    print("%-29s %5s %2s %8s %9s %7s %9s %7s"
          % ("throughput", "size", "P", "MB/s", "msgs/s", "/limit",
             "mock MB/s", "C/mock"))
    for r in rows:
        print("%-29s %5d %2s %8s %9s %7s %9s %7s"
              % (ROW_LABELS.get(r["test"], r["test"]), r["size"],
                 fmt(r["partitions"], "%d"), fmt(r["cairn_mb_per_s"]),
                 fmt(r["cairn_msgs_per_s"], "%.0f"),
                 fmt(r["cairn_vs_limit"], "%.3f"),
                 fmt(r["mock_mb_per_s"]), fmt(r["cairn_vs_mock"], "%.2f")))


def latency_rows(report):
    tg = report["targets"]
    rows = []
    for k in LAT_PER_TXN:
        row = {"test": "commit_latency", "partitions_per_txn": k}
        for name, res in tg.items():
            for rec in res.get("commit_latency", []):
                if rec["partitions_per_txn"] == k:
                    row[name] = {q: rec[q] for q in ("p50_ms", "p99_ms",
                                                     "p999_ms")}
        rows.append(row)
    row = {"test": "rc_latency"}
    for name, res in tg.items():
        rec = res.get("rc_latency")
        if rec:
            row[name] = {q: rec[q] for q in ("p50_ms", "p99_ms", "p999_ms")}
    rows.append(row)
    for row in rows:
        c, m = row.get("cairn"), row.get("mock")
        row["cairn_vs_mock_p50"] = ratio(c and c["p50_ms"],
                                         m and m["p50_ms"])
    return rows


def print_latency(rows):
    print("%-29s %24s %24s %7s" % ("latency, ms", "Cairn p50/p99/p99.9",
                                   "mock p50/p99/p99.9", "p50 C/m"))
    for row in rows:
        if row["test"] == "commit_latency":
            label = "txn commit, %d partition%s" % (
                row["partitions_per_txn"],
                "" if row["partitions_per_txn"] == 1 else "s")
        else:
            label = "e2e read_committed"
        cols = []
        for name in ("cairn", "mock"):
            x = row.get(name)
            cols.append("-" if not x else "%.2f / %.2f / %.2f"
                        % (x["p50_ms"], x["p99_ms"], x["p999_ms"]))
        print("%-29s %24s %24s %7s" % (label, cols[0], cols[1],
                                       fmt(row["cairn_vs_mock_p50"],
                                           "%.2f")))


def print_verdicts(report):
    """Issue targets, checked on Cairn's figures."""
    res = report["targets"].get("cairn")
    if not res:
        return
    runs = res["runs"]
    verdicts = report.setdefault("verdicts", {})
    for size in SIZES:
        for parts in PARTITION_COUNTS:
            idem = find(runs, "produce_idempotent", size, parts)
            if not idem:
                continue
            bits = []
            for ms in TXN_INTERVALS_MS:
                txn = find(runs, "produce_txn_%dms" % ms, size, parts)
                r = ratio(txn and txn["mb_per_s"], idem["mb_per_s"])
                if r is None:
                    continue
                verdicts["txn_%dms_vs_idempotent_%d_p%d" % (ms, size,
                                                             parts)] = r
                target = TXN_TARGETS.get(ms)
                bits.append("%d ms %.3f%s" % (
                    ms, r, "" if target is None else " (>= %.2f %s)"
                    % (target, "ok" if r >= target else "MISS")))
            if bits:
                print("txn / idempotent, %4d B, %d partition%s: %s"
                      % (size, parts, "" if parts == 1 else "s",
                         ", ".join(bits)))
        idem = find(runs, "produce_idempotent", size, 6)
        same = find(runs, "produce_inflight5", size, 6)
        if idem and same:
            r = ratio(idem["mb_per_s"], same["mb_per_s"])
            verdicts["idempotent_vs_inflight5_%d" % size] = r
            print("idempotent / acks=all at 5 in flight, %4d B, 6 "
                  "partitions: %.3f (>= 0.98 %s)"
                  % (size, r, "ok" if r >= 0.98 else "MISS"))
    lat = res.get("commit_latency") or []
    sync = report["limits"].get("fdatasync_4k")
    if lat and sync:
        sync_ms = sync["p50_us"] / 1e3
        limit = 2 * sync_ms + 0.3
        base = lat[0]["p50_ms"]
        bits = []
        for rec in lat:
            ok = (rec["p50_ms"] <= limit and rec["p99_ms"] <= 3 *
                  rec["p50_ms"] and rec["p50_ms"] <= max(base * 1.5,
                                                         base + 0.3))
            rec["ok"] = ok
            bits.append("%d: %s" % (rec["partitions_per_txn"],
                                    "ok" if ok else "MISS"))
        print("commit latency targets (p50 <= 2 fdatasync + 0.3 = %.2f ms, "
              "p99 <= 3 p50, flat): %s" % (limit, ", ".join(bits)))
    s = (res.get("read_committed") or {}).get("summary")
    if s:
        r = s["ratio_log_bytes_per_s"]
        verdicts["read_committed_vs_uncommitted"] = r
        print("read_committed / read_uncommitted, log bytes/s: %.3f "
              "(>= %.2f %s); delivered records/s %.3f (10%% aborted)"
              % (r, RC_TARGET, "ok" if r >= RC_TARGET else "MISS",
                 s["ratio_msgs_per_s"]))
    lat = res.get("rc_latency")
    if lat:
        ok = lat["p99_ms"] < RC_LAT_TARGET_MS
        verdicts["rc_latency_p99_ok"] = ok
        print("e2e read_committed p99 %.1f ms (< %d ms %s); per commit: "
              "flush p50 %.2f, EndTxn p50 %.2f, delivery after EndTxn p50 "
              "%.2f ms" % (lat["p99_ms"], RC_LAT_TARGET_MS,
                           "ok" if ok else "MISS", lat["flush_ms_p50"],
                           lat["commit_ms_p50"],
                           lat["after_commit_ms_p50"]))


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
                    help="count multiplier, or 'small' (= 0.1)")
    ap.add_argument("--peer", choices=["both", "cairn", "mock"],
                    default="both")
    ap.add_argument("--mock", action="store_true",
                    help="same as --peer mock")
    ap.add_argument("--only", default=None,
                    help="comma-separated parts: %s (client = produce,"
                    "consume; rc = rc_tput,rc_latency)" % ",".join(PARTS))
    ap.add_argument("--report", default=None,
                    help="report file (default bench/out/report.json, or "
                    "report-<parts>.json with --only)")
    args = ap.parse_args()
    args.cairn = args.cairn or os.environ.get(
        "CAIRN_BIN", str(Path(args.build_dir) / "cairn"))
    scale = 0.1 if args.scale == "small" else float(args.scale)
    if args.mock:
        args.peer = "mock"
    parts = set(PARTS)
    if args.only:
        parts = set()
        for w in args.only.split(","):
            w = w.strip()
            if w in ALIASES:
                parts |= set(ALIASES[w])
            elif w in PARTS:
                parts.add(w)
            else:
                sys.exit("--only: unknown part %r (parts: %s, client, rc)"
                         % (w, ", ".join(PARTS)))
    targets = {"both": ["cairn", "mock"], "cairn": ["cairn"],
               "mock": ["mock"]}[args.peer]
    if args.peer == "mock":
        parts -= {"load", "memory", "scaling"}

    out_dir = REPO / "bench" / "out"
    out_dir.mkdir(parents=True, exist_ok=True)
    Path(args.dir).mkdir(parents=True, exist_ok=True)
    build = Path(args.build_dir)
    need = {"limits": ["bench_limits"],
            "produce": ["bench_client", "bench_txn"],
            "consume": ["bench_client", "bench_fetch_raw"],
            "txn": ["bench_txn"], "rc_tput": ["bench_rc"],
            "rc_latency": ["bench_rc"], "pstate": ["bench_pstate"],
            "scaling": ["bench_scale"]}
    progs = {p for k in parts for p in need.get(k, [])}
    if "mock" in targets and parts & PEER_PARTS:
        progs.add("e2e_mockbroker")
    for prog in sorted(progs):
        if not (build / prog).exists():
            sys.exit("%s missing; build it: cmake --build %s --target %s"
                     % (build / prog, build, prog))
    if not Path(args.cairn).exists() and (
            "cairn" in targets or parts & {"load", "memory", "scaling"}):
        sys.exit("%s missing; run make first" % args.cairn)
    tmp = Path(tempfile.mkdtemp(prefix="cairn-bench-", dir=args.dir))
    report = {"time": time.strftime("%Y-%m-%dT%H:%M:%S"), "scale": scale,
              "peers": targets, "dir": str(tmp),
              "machine": {"nproc": os.cpu_count(),
                          "kernel": os.uname().release,
                          "uptime_before": uptime(),
                          "loadavg_before": os.getloadavg()},
              "limits": {}, "targets": {}}
    if args.only:
        report["only"] = sorted(parts)
    progress("load before: %s" % report["machine"]["uptime_before"])
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
        if parts & PEER_PARTS:
            for name in targets:
                t = Target(name, args, tmp)
                report["targets"][name] = t.res
                run_target(t, build, parts, scale)
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
        report["machine"]["uptime_after"] = uptime()
        report["machine"]["loadavg_after"] = os.getloadavg()
        report["seconds"] = round(time.monotonic() - T0, 1)

    m = report["machine"]
    print()
    print("Cairn benchmark %s, scale %g, %d CPUs, %.0f s"
          % (report["time"], scale, m["nproc"], report["seconds"]))
    print("load before: %s" % m["uptime_before"])
    print("load after:  %s" % m["uptime_after"])
    lim = report["limits"]
    if "fdatasync_4k" in lim:
        sync = lim["fdatasync_4k"]
        print("machine: fdatasync'd 256 KiB writes %.0f MB/s, 4 KiB "
              "fdatasync p50 %.0f us p99 %.0f us, loopback TCP %.0f MB/s"
              % (lim["disk_write_fdatasync"]["mb_per_s"], sync["p50_us"],
                 sync["p99_us"], lim["tcp_loopback"]["mb_per_s"]))
    if report["targets"]:
        report["rows"] = build_rows(report)
        report["latency_rows"] = latency_rows(report)
        if report["rows"]:
            print_rows(report["rows"])
        if "txn" in parts or "rc_latency" in parts:
            print_latency(report["latency_rows"])
        print_verdicts(report)
        if "mock" in report["targets"]:
            print("mock = librdkafka's in-memory mock cluster: no disk, no "
                  "fsync, ~5 MB kept per partition (consume runs use fewer "
                  "records there, and its read_committed also delivers "
                  "aborted records); /limit: produce vs synced disk, consume "
                  "vs loopback TCP; read_committed rows are log MB/s")
    print_other(report)
    if report.get("scaling"):
        print_scaling(report["scaling"])
    if args.report:
        out = Path(args.report)
    elif args.only:
        out = out_dir / ("report-%s.json" % "-".join(sorted(parts)))
    else:
        out = out_dir / "report.json"
    with open(out, "w") as f:
        json.dump(report, f, indent=2)
    print("wrote", out)
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
