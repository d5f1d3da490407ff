#!/usr/bin/python3
"""Broker benchmark: machine limits, then real-client throughput.

Builds nothing. Starts build/cairn on a free loopback port with a data
dir on the same filesystem as the disk test, runs bench_limits, then for
1 KiB and 100 B messages at acks=-1 over 6 partitions:

  produce    bench_client, librdkafka producer          vs fdatasync'd disk
  fetch      bench_client, librdkafka consumer reading  vs loopback TCP
             with rd_kafka_consume_batch_queue
  fetch_raw  bench_fetch_raw, the project's blocking     vs loopback TCP
             client: Fetch v11, max_bytes 50 MiB (Kafka's default
             fetch.max.bytes), 8 MiB per partition, max_wait 0, 3 passes
  fetch_raw_16m  the same with max_bytes 16 MiB

After the 1 KiB case come the transactional runs (bench_txn):

  produce_txn_<MS>ms  transactional producer committing every 10, 100 and
             1000 ms, 1 KiB over 6 partitions, as many messages as the
             idempotent run; printed as a ratio of that run's throughput
             (issue targets: >= 0.98 at 100 ms, >= 0.80 at 10 ms)
  commit_latency  200 transactions of one small record on each of 1, 4
             and 16 partitions of a 16-partition topic, timing
             rd_kafka_commit_transaction() after a flush; p50/p99 shown
             next to the machine's fdatasync p50 (targets: p50 <= two
             fdatasyncs + 0.3 ms, p99 <= 3x p50, flat in partition count)

Then the read path under transactions (bench_rc, part "rc"):

  read_committed  a topic of 6 partitions written by 8 transactional
             producers in transactions of 100 x 1 KiB records, every 10th
             transaction aborted (its data flushed first, so it is in the
             log); then read whole, from the beginning, with assign() and
             no group, alternately with isolation.level read_uncommitted
             and read_committed, 3 times each, best of each kept.  The
             target ratio (issue: >= 0.95) is read_committed /
             read_uncommitted in LOG bytes per second: the partitions'
             on-disk .log bytes over the time from the first record to
             EOF on every partition.  read_committed delivers 10% fewer
             records, so delivered records/s is shown too, for information.
  rc_latency end-to-end latency to read_committed delivery: a
             transactional producer sends 2000 records/s of 100 B stamped
             with CLOCK_MONOTONIC, committing every 100 ms, for 10 s; a
             read_committed consumer (fetch.wait.max.ms 10) records
             now - sent.  p50/p99/p99.9 (issue target: p99 < commit
             interval + 10 ms = 110 ms), with the commit split into flush,
             EndTxn and the delay from EndTxn's return to delivery.

Fetched data is page-cached (it was just produced). Each broker figure is
printed as a ratio of its limit, progress goes to stderr, and everything
lands in bench/out/report.json.

  /usr/bin/python3 bench/run.py [--build-dir build] [--cairn build/cairn]
                               [--dir DIR] [--scale F] [--mock]
                               [--only PART,...] [--report FILE]

--only runs just the named parts: limits (machine limits), client (the
produce/fetch/fetch_raw runs per message size), txn (transactional
produce and commit latency; needs client for its ratio), pstate
(producer table), rc (both read-path runs), rc_tput or rc_latency alone.
With --only the report goes to bench/out/report-<parts>.json unless
--report says otherwise, so a partial run does not replace the full one.

--scale multiplies the message counts (default 1: 300k x 1 KiB and
1M x 100 B, and 500k x 1 KiB for read_committed; the read_committed write
runs at only 9-15k records/s here because every transaction waits for
fsyncs, so its consume takes ~1 s at scale 1 and --scale 3 or more gives
the 2-5 s the issue asks for). --mock runs against librdkafka's mock cluster
(tests/e2e/e2e_mockbroker) to check the harness; its numbers mean nothing
and its log retention is small, so use a small --scale with it.
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
PARTITIONS = 6
CASES = [  # (message bytes, message count at scale 1)
    (1024, 300000),
    (100, 1000000),
]


def free_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


RAW_FETCHES = [  # (test name, max_bytes)
    ("fetch_raw", 50 * 1024 * 1024),
    ("fetch_raw_16m", 16 * 1024 * 1024),
]
RAW_PASSES = 3
TXN_SIZE = 1024             # message size of the transactional runs
TXN_INTERVALS_MS = [10, 100, 1000]
TXN_TARGETS = {10: 0.80, 100: 0.98}  # min ratio to idempotent produce
LAT_TOPIC = "bench-txn-latency"
LAT_PARTITIONS = 16
LAT_PER_TXN = [1, 4, 16]
LAT_TRANSACTIONS = 200
RC_TOPIC = "bench-rc"
RC_RECORDS = 500000         # read_committed topic, records at scale 1
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
PARTS = ["limits", "client", "txn", "pstate", "rc_tput", "rc_latency"]
T0 = time.monotonic()


def progress(msg):
    print("[%5.1fs] %s" % (time.monotonic() - T0, msg), file=sys.stderr,
          flush=True)


def summary(rec):
    return "%.1f MB/s, %.0f msgs/s" % (rec.get("mb_per_s", 0),
                                       rec.get("msgs_per_s", 0))


def json_lines(text):
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            out.append(json.loads(line))
    return out


def start_broker(args, tmp, topics):
    log = open(tmp / "broker.log", "wb")
    if args.mock:
        argv = [str(Path(args.build_dir) / "e2e_mockbroker")]
        for t, parts in topics:
            argv += ["--topic", "%s:%d" % (t, parts)]
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=log,
                                stdin=subprocess.DEVNULL)
        return proc, proc.stdout.readline().split()[1].decode()
    port = free_port()
    data = tmp / "data"
    data.mkdir()
    argv = [args.cairn, "--set", "listeners=PLAINTEXT://127.0.0.1:%d" % port,
            "--set", "log.dirs=%s" % data]
    proc = subprocess.Popen(argv, stdout=log, stderr=log,
                            stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                stop_broker(proc)
                sys.exit("broker did not start; see %s" % (tmp / "broker.log"))
            time.sleep(0.05)
    return proc, "127.0.0.1:%d" % port


def stop_broker(proc):
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def run_txn(args, build, bootstrap, report, n):
    """Transactional throughput at each commit interval, then commit
    latency; records go to report["runs"] and report["commit_latency"]."""
    create = [] if args.mock else ["--create"]
    for ms in TXN_INTERVALS_MS:
        topic = "bench-%d-txn-%dms" % (TXN_SIZE, ms)
        progress("%s: transactional produce %d x %d B, commit every %d ms"
                 % (topic, n, TXN_SIZE, ms))
        res = subprocess.run(
            [str(build / "bench_txn"), "--brokers", bootstrap, "--topic",
             topic, "--partitions", str(PARTITIONS), "--messages", str(n),
             "--size", str(TXN_SIZE), "--commit-interval-ms", str(ms)]
            + create, stdout=subprocess.PIPE, text=True, timeout=600)
        if res.returncode != 0:
            print("bench_txn exited %d for %d ms" % (res.returncode, ms),
                  file=sys.stderr)
        for rec in json_lines(res.stdout):
            progress("  %s: %s, %d commits, commit p50 %.2f ms p99 %.2f ms"
                     % (rec["test"], summary(rec), rec["commits"],
                        rec["commit_ms_p50"], rec["commit_ms_p99"]))
            report["runs"].append(rec)
    lat = report.setdefault("commit_latency", [])
    for k in LAT_PER_TXN:
        progress("%s: commit latency, %d transactions x %d partitions"
                 % (LAT_TOPIC, LAT_TRANSACTIONS, k))
        res = subprocess.run(
            [str(build / "bench_txn"), "--brokers", bootstrap, "--topic",
             LAT_TOPIC, "--partitions", str(LAT_PARTITIONS),
             "--commit-latency", "--partitions-per-txn", str(k),
             "--transactions", str(LAT_TRANSACTIONS)] + create,
            stdout=subprocess.PIPE, text=True, timeout=600)
        if res.returncode != 0:
            print("bench_txn --commit-latency exited %d for %d partitions"
                  % (res.returncode, k), file=sys.stderr)
        for rec in json_lines(res.stdout):
            progress("  %d partitions: commit p50 %.2f ms p99 %.2f ms "
                     "p99.9 %.2f ms" % (k, rec["p50_ms"], rec["p99_ms"],
                                        rec["p999_ms"]))
            lat.append(rec)


def print_txn(report, mbps):
    """Prints transactional throughput against idempotent produce and
    commit latency against fdatasync, filling in the report's verdicts."""
    idem = mbps("produce_idempotent", TXN_SIZE)
    ratios = {}
    for ms in TXN_INTERVALS_MS:
        txn = mbps("produce_txn_%dms" % ms, TXN_SIZE)
        if idem and txn is not None:
            ratios[str(ms)] = round(txn / idem, 3)
    if ratios:
        report["txn_vs_idempotent"] = ratios
        parts = []
        for ms in TXN_INTERVALS_MS:
            r = ratios.get(str(ms))
            if r is None:
                continue
            target = TXN_TARGETS.get(ms)
            parts.append("%d ms %.3f%s" % (
                ms, r, "" if target is None else " (target >= %.2f %s)"
                % (target, "ok" if r >= target else "MISS")))
        print("transactional / idempotent produce, %d B: %s"
              % (TXN_SIZE, ", ".join(parts)))
    lat = report.get("commit_latency") or []
    if not lat:
        return
    sync_ms = report["limits"]["fdatasync_4k"]["p50_us"] / 1e3
    p50_limit = 2 * sync_ms + 0.3
    base_p50 = lat[0]["p50_ms"]
    print("commit latency (rd_kafka_commit_transaction after flush, %d "
          "transactions); fdatasync p50 %.3f ms, p50 target <= %.3f ms"
          % (LAT_TRANSACTIONS, sync_ms, p50_limit))
    print("%-14s %9s %9s %9s  %s" % ("partitions/txn", "p50 ms", "p99 ms",
                                     "p99.9 ms", "verdict"))
    for rec in lat:
        p50, p99 = rec["p50_ms"], rec["p99_ms"]
        rec["fdatasync_p50_ms"] = round(sync_ms, 3)
        rec["p50_ok"] = p50 <= p50_limit
        rec["p99_ok"] = p99 <= 3 * p50
        # "Not growing with partition count": allow 0.3 ms or 50% over
        # the 1-partition p50 before calling it growth.
        rec["flat_ok"] = p50 <= max(base_p50 * 1.5, base_p50 + 0.3)
        verdict = ", ".join(
            "%s %s" % (what, "ok" if good else "MISS") for what, good in
            (("p50", rec["p50_ok"]), ("p99<=3xp50", rec["p99_ok"]),
             ("flat", rec["flat_ok"])))
        print("%-14d %9.3f %9.3f %9.3f  %s"
              % (rec["partitions_per_txn"], p50, p99, rec["p999_ms"],
                 verdict))


def log_bytes(tmp, topic):
    """On-disk bytes of the topic's .log segments (0 with the mock)."""
    total = 0
    for d in (tmp / "data").glob("%s-*" % topic):
        if d.name[len(topic) + 1:].isdigit():
            total += sum(f.stat().st_size for f in d.glob("*.log"))
    return total


def run_rc_tput(args, build, bootstrap, tmp, report):
    """Writes the read_committed topic, then consumes it alternately at
    both isolation levels; fills report["read_committed"]."""
    n = max(10 * RC_TXN_RECORDS, int(RC_RECORDS * args.scale))
    n -= n % RC_TXN_RECORDS
    common = ["--brokers", bootstrap, "--topic", RC_TOPIC, "--partitions",
              str(PARTITIONS), "--messages", str(n), "--size", str(RC_SIZE),
              "--txn-records", str(RC_TXN_RECORDS), "--abort-every",
              str(RC_ABORT_EVERY)]
    progress("%s: transactional write %d x %d B, %d per transaction, every "
             "%dth aborted, %d producers" % (RC_TOPIC, n, RC_SIZE,
                                              RC_TXN_RECORDS, RC_ABORT_EVERY,
                                              RC_PRODUCERS))
    res = subprocess.run(
        [str(build / "bench_rc"), "write"] + common
        + ["--producers", str(RC_PRODUCERS)]
        + ([] if args.mock else ["--create"]),
        stdout=subprocess.PIPE, text=True, timeout=900)
    rc = {"write": None, "passes": []}
    report["read_committed"] = rc
    for rec in json_lines(res.stdout):
        rc["write"] = rec
        progress("  write: %s, %d transactions in %.1f s"
                 % (summary(rec), rec["transactions"], rec["seconds"]))
    if res.returncode != 0:
        print("bench_rc write exited %d" % res.returncode, file=sys.stderr)
        return
    lb = 0 if args.mock else log_bytes(tmp, RC_TOPIC)
    progress("%s: consume %d rounds of read_uncommitted + read_committed, "
             "log %.1f MB" % (RC_TOPIC, RC_ROUNDS, lb / 1e6))
    res = subprocess.run(
        [str(build / "bench_rc"), "consume"] + common
        + ["--rounds", str(RC_ROUNDS), "--log-bytes", str(lb)],
        stdout=subprocess.PIPE, text=True, timeout=900)
    if res.returncode != 0:
        print("bench_rc consume exited %d" % res.returncode, file=sys.stderr)
    for rec in json_lines(res.stdout):
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


def run_rc_latency(args, build, bootstrap, report):
    progress("%s: read_committed latency, %d msgs/s, commit every %d ms, "
             "%d s" % (RC_LAT_TOPIC, RC_LAT_RATE, RC_LAT_INTERVAL_MS,
                       RC_LAT_SECONDS))
    res = subprocess.run(
        [str(build / "bench_rc"), "latency", "--brokers", bootstrap,
         "--topic", RC_LAT_TOPIC, "--partitions", str(PARTITIONS),
         "--rate", str(RC_LAT_RATE), "--commit-interval-ms",
         str(RC_LAT_INTERVAL_MS), "--seconds", str(RC_LAT_SECONDS),
         "--fetch-wait-ms", str(RC_LAT_FETCH_WAIT_MS)]
        + ([] if args.mock else ["--create"]),
        stdout=subprocess.PIPE, text=True, timeout=300)
    if res.returncode != 0:
        print("bench_rc latency exited %d" % res.returncode, file=sys.stderr)
    for rec in json_lines(res.stdout):
        report["rc_latency"] = rec
        progress("  p50 %.1f ms p99 %.1f ms p99.9 %.1f ms, %d samples"
                 % (rec["p50_ms"], rec["p99_ms"], rec["p999_ms"],
                    rec["samples"]))


def print_rc(report):
    """Prints the read-path results, filling in the report's verdicts."""
    rc = report.get("read_committed") or {}
    s = rc.get("summary")
    if s:
        u, c = s["uncommitted"], s["committed"]
        r = s["ratio_log_bytes_per_s"]
        s["target_ratio_log_bytes_per_s"] = RC_TARGET
        s["ok"] = r >= RC_TARGET
        print("read_committed consume, %d B, %d records over %d partitions, "
              "every %dth transaction of %d aborted, best of %d; log %.1f MB%s"
              % (s["size"], rc["write"]["messages"], s["partitions"],
                 RC_ABORT_EVERY, RC_TXN_RECORDS, s["rounds"],
                 s["log_bytes"] / 1e6,
                 "" if s["log_bytes_measured"] else " (value bytes: mock)"))
        print("%-18s %8s %11s %11s %11s" % ("isolation", "seconds",
                                            "log MB/s", "deliv MB/s",
                                            "records/s"))
        for name, x in (("read_uncommitted", u), ("read_committed", c)):
            print("%-18s %8.3f %11.1f %11.1f %11.0f"
                  % (name, x["seconds"], x["log_mb_per_s"], x["mb_per_s"],
                     x["msgs_per_s"]))
        print("read_committed / read_uncommitted, log bytes/s (TARGET "
              ">= %.2f): %.3f %s; delivered records/s (info, committed "
              "delivers %.0f%% fewer): %.3f"
              % (RC_TARGET, r, "ok" if s["ok"] else "MISS",
                 100.0 / RC_ABORT_EVERY, s["ratio_msgs_per_s"]))
    lat = report.get("rc_latency")
    if lat:
        lat["target_p99_ms"] = RC_LAT_TARGET_MS
        lat["p99_ok"] = lat["p99_ms"] < RC_LAT_TARGET_MS
        print("read_committed end-to-end latency, %d msgs/s, commit every "
              "%d ms, fetch.wait.max.ms %d, %d samples: p50 %.1f ms, p99 "
              "%.1f ms (target < %d ms %s), p99.9 %.1f ms, max %.1f ms"
              % (lat["rate"], lat["commit_interval_ms"],
                 lat["fetch_wait_max_ms"], lat["samples"], lat["p50_ms"],
                 lat["p99_ms"], RC_LAT_TARGET_MS,
                 "ok" if lat["p99_ok"] else "MISS", lat["p999_ms"],
                 lat["max_ms"]))
        print("  per commit: flush p50 %.2f / p99 %.2f ms, EndTxn p50 %.2f "
              "/ p99 %.2f ms; delivery after EndTxn returned p50 %.2f / "
              "p99 %.2f ms" % (lat["flush_ms_p50"], lat["flush_ms_p99"],
                               lat["commit_ms_p50"], lat["commit_ms_p99"],
                               lat["after_commit_ms_p50"],
                               lat["after_commit_ms_p99"]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build-dir",
                    default=os.environ.get("CAIRN_BUILD_DIR",
                                           str(REPO / "build")))
    ap.add_argument("--cairn", default=os.environ.get(
        "CAIRN_BIN", str(REPO / "build" / "cairn")))
    ap.add_argument("--dir", default=str(REPO / "bench" / "out"),
                    help="where the disk test and broker data go")
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--mock", action="store_true")
    ap.add_argument("--only", default=None,
                    help="comma-separated parts: %s, rc (= rc_tput,"
                    "rc_latency)" % ",".join(PARTS))
    ap.add_argument("--report", default=None,
                    help="report file (default bench/out/report.json, or "
                    "report-<parts>.json with --only)")
    args = ap.parse_args()
    parts = set(PARTS)
    if args.only:
        parts = set()
        for w in args.only.split(","):
            w = w.strip()
            if w == "rc":
                parts |= {"rc_tput", "rc_latency"}
            elif w in PARTS:
                parts.add(w)
            else:
                sys.exit("--only: unknown part %r (parts: %s, rc)"
                         % (w, ", ".join(PARTS)))

    out_dir = REPO / "bench" / "out"
    out_dir.mkdir(parents=True, exist_ok=True)
    Path(args.dir).mkdir(parents=True, exist_ok=True)
    build = Path(args.build_dir)
    need = {"limits": ["bench_limits"],
            "client": ["bench_client", "bench_fetch_raw"],
            "txn": ["bench_txn"], "rc_tput": ["bench_rc"],
            "rc_latency": ["bench_rc"]}
    for prog in sorted({p for k in parts for p in need.get(k, [])}):
        if not (build / prog).exists():
            sys.exit("%s missing; build it: cmake --build %s --target %s"
                     % (build / prog, build, prog))
    tmp = Path(tempfile.mkdtemp(prefix="cairn-bench-", dir=args.dir))
    report = {"time": time.strftime("%Y-%m-%dT%H:%M:%S"),
              "mock": args.mock, "dir": str(tmp), "limits": {},
              "runs": []}
    if args.only:
        report["only"] = sorted(parts)
    proc = None
    try:
        if "limits" in parts:
            progress("measuring machine limits (disk, fdatasync, "
                     "loopback TCP)")
            res = subprocess.run([str(build / "bench_limits"), "--dir",
                                  str(tmp)], stdout=subprocess.PIPE,
                                 text=True, timeout=60, check=True)
            for rec in json_lines(res.stdout):
                report["limits"][rec["test"]] = rec
            progress("limits: disk %.0f MB/s, loopback TCP %.0f MB/s" % (
                report["limits"]["disk_write_fdatasync"]["mb_per_s"],
                report["limits"]["tcp_loopback"]["mb_per_s"]))

        topics = ["bench-%d" % size for size, _ in CASES]
        # The mock cluster cannot create topics, so it is told them all.
        mock_topics = [(t, PARTITIONS) for t in topics]
        for size, _ in CASES:
            for name in ("produce_idempotent", "produce_inflight5"):
                mock_topics.append(("bench-%d-%s" % (size, name),
                                    PARTITIONS))
        for ms in TXN_INTERVALS_MS:
            mock_topics.append(("bench-%d-txn-%dms" % (TXN_SIZE, ms),
                                PARTITIONS))
        mock_topics.append((LAT_TOPIC, LAT_PARTITIONS))
        mock_topics += [(RC_TOPIC, PARTITIONS), (RC_LAT_TOPIC, PARTITIONS)]
        progress("starting broker")
        proc, bootstrap = start_broker(args, tmp, mock_topics)
        for (size, count), topic in zip(CASES, topics):
            if "client" not in parts and not (
                    "txn" in parts and size == TXN_SIZE):
                continue
            n = max(1000, int(count * args.scale))
            if "client" not in parts:
                run_txn(args, build, bootstrap, report, n)
                continue
            progress("%s: produce %d x %d B, then consume with librdkafka"
                     % (topic, n, size))
            res = subprocess.run(
                [str(build / "bench_client"), "--brokers", bootstrap,
                 "--topic", topic, "--partitions", str(PARTITIONS),
                 "--messages", str(n), "--size", str(size), "--acks", "-1"]
                + ([] if args.mock else ["--create"]),
                stdout=subprocess.PIPE, text=True, timeout=600)
            recs = json_lines(res.stdout)
            if res.returncode != 0:
                print("bench_client exited %d for size %d" %
                      (res.returncode, size), file=sys.stderr)
            for rec in recs:
                progress("  %s: %s" % (rec["test"], summary(rec)))
            report["runs"].extend(recs)
            # Idempotence costs the broker one table lookup per batch, but
            # it also makes librdkafka cap itself at 5 requests in flight.
            # To see the broker's cost, compare with a plain producer held
            # to the same 5 (issue target: at least 98%); the default plain
            # run above shows what the client cap costs on top.
            for name, extra in (("produce_idempotent", ["--idempotent"]),
                                ("produce_inflight5",
                                 ["--max-in-flight", "5"])):
                progress("%s: %s %d x %d B" % (topic, name, n, size))
                res = subprocess.run(
                    [str(build / "bench_client"), "--brokers", bootstrap,
                     "--topic", "%s-%s" % (topic, name), "--partitions",
                     str(PARTITIONS), "--messages", str(n), "--size",
                     str(size), "--acks", "-1", "--produce-only"] + extra
                    + ([] if args.mock else ["--create"]),
                    stdout=subprocess.PIPE, text=True, timeout=600)
                for rec in json_lines(res.stdout):
                    rec["test"] = name
                    progress("  %s: %s" % (rec["test"], summary(rec)))
                    report["runs"].append(rec)
            for name, max_bytes in RAW_FETCHES:
                progress("%s: raw fetch, max_bytes %d MiB, %d passes"
                         % (topic, max_bytes >> 20, RAW_PASSES))
                res = subprocess.run(
                    [str(build / "bench_fetch_raw"), "--brokers", bootstrap,
                     "--topic", topic, "--passes", str(RAW_PASSES),
                     "--max-bytes", str(max_bytes)],
                    stdout=subprocess.PIPE, text=True, timeout=600)
                if res.returncode != 0:
                    print("bench_fetch_raw exited %d for size %d" %
                          (res.returncode, size), file=sys.stderr)
                for rec in json_lines(res.stdout):
                    rec["test"] = name
                    rec["size"] = size
                    progress("  %s: %s" % (name, summary(rec)))
                    report["runs"].append(rec)
            if proc.poll() is not None:
                sys.exit("broker died; see %s" % (tmp / "broker.log"))
            if size == TXN_SIZE and "txn" in parts:
                run_txn(args, build, bootstrap, report, n)
                if proc.poll() is not None:
                    sys.exit("broker died; see %s" % (tmp / "broker.log"))
        if "rc_tput" in parts:
            run_rc_tput(args, build, bootstrap, tmp, report)
            if proc.poll() is not None:
                sys.exit("broker died; see %s" % (tmp / "broker.log"))
        if "rc_latency" in parts:
            run_rc_latency(args, build, bootstrap, report)
            if proc.poll() is not None:
                sys.exit("broker died; see %s" % (tmp / "broker.log"))
    finally:
        if proc is not None:
            progress("stopping broker")
            stop_broker(proc)

    lim = report["limits"]
    disk = lim.get("disk_write_fdatasync", {}).get("mb_per_s", 0)
    tcp = lim.get("tcp_loopback", {}).get("mb_per_s", 0)
    if lim:
        sync = lim["fdatasync_4k"]
        print("machine: fdatasync'd 256 KiB writes %.0f MB/s, 4 KiB "
              "fdatasync p50 %.0f us p99 %.0f us, loopback TCP %.0f MB/s"
              % (disk, sync["p50_us"], sync["p99_us"], tcp))
    if report["runs"]:
        print("%-18s %-6s %9s %11s %8s  %s" % ("phase", "size", "MB/s",
                                                "msgs/s", "ratio", "limit"))
    for rec in report["runs"]:
        limit, name = ((disk, "disk") if rec["test"].startswith("produce")
                       else (tcp, "tcp"))
        rec["limit_mb_per_s"] = limit
        rec["ratio"] = round(rec["mb_per_s"] / limit, 3) if limit else None
        print("%-18s %-6d %9.1f %11.0f %8.3f  %s %.0f MB/s"
              % (rec["test"], rec["size"], rec["mb_per_s"],
                 rec["msgs_per_s"], rec["ratio"] or 0, name, limit))
    def mbps(test, size):
        for r in report["runs"]:
            if r["test"] == test and r["size"] == size:
                return r["mb_per_s"]
        return None

    for size, _ in CASES:
        idem = mbps("produce_idempotent", size)
        same = mbps("produce_inflight5", size)
        plain = mbps("produce", size)
        if idem and same and plain:
            report.setdefault("idempotent_vs_plain", {})[str(size)] = {
                "same_in_flight": round(idem / same, 3),
                "client_defaults": round(idem / plain, 3)}
            print("idempotent / plain produce, %d B: %.3f with both at 5 "
                  "in flight, %.3f against plain's default"
                  % (size, idem / same, idem / plain))
    if lim:
        print_txn(report, mbps)
    print_rc(report)
    pst = build / "bench_pstate"
    if "pstate" in parts and pst.exists():
        res = subprocess.run([str(pst), "--producers", "100000"],
                             stdout=subprocess.PIPE, text=True, timeout=120)
        for rec in json_lines(res.stdout):
            report["producer_state"] = rec
            print("producer table: %.1f bytes per idle producer entry "
                  "(%.1f by RSS), %.0f ns per check+update, 100k producers"
                  % (rec["table_bytes_per_entry"], rec["rss_bytes_per_entry"],
                     rec["ns_per_check_update"]))
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
