#!/usr/bin/python3
"""Broker memory with many partitions and many idempotent producers.

  /usr/bin/python3 bench/bench_mem.py [--cairn build/cairn] [--dir DIR]
          [--topics 100] [--partitions 100] [--producers 100000]

Starts a broker of its own, reads its VmRSS from /proc/<pid>/status when
idle, after CreateTopics has made TOPICS x PARTITIONS partitions, and
after PRODUCERS distinct idempotent producer ids (InitProducerId without
a transactional id) have each written one batch of one 16-byte record,
producer i to partition i spread over all partitions.  Prints one JSON
line; progress goes to stderr.

Requests are pipelined (WINDOW in flight on one connection) through the
raw wire helpers of tests/e2e/kafka_wire.py: a client library would need
one handle per producer id, which costs more than the broker's side.
Each partition keeps three files open (log, index, time index), so the
broker's open-file limit is raised first (as root) when it is too low
for 10k partitions.  Where it cannot be raised (no CAP_SYS_RESOURCE, as in
a container) the run uses as many whole topics as fit in the limit and
also reports the RSS extrapolated to the requested partition count.
"""

import argparse
import json
import os
import resource
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "e2e"))
import kafka_wire as kw  # noqa: E402

API_CREATE_TOPICS = 19
WINDOW = 1000
T0 = time.monotonic()


def progress(msg, end="\n"):
    print("[mem %5.1fs] %s" % (time.monotonic() - T0, msg), end=end,
          file=sys.stderr, flush=True)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def status_kb(pid, key):
    """A "kB" line of /proc/<pid>/status (VmRSS, VmHWM), in KiB."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return -1


def open_fds(pid):
    try:
        return len(os.listdir("/proc/%d/fd" % pid))
    except OSError:
        return -1


def raise_nofile(want):
    """Runs in the broker's child before exec: 3 fds per partition."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft >= want:
        return
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, max(want, hard)))
    except (ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def create_topics_request(corr, names, partitions, timeout_ms=600000):
    """CreateTopics v4 (non-flexible), broker-chosen assignment."""
    body = struct.pack(">i", len(names))
    for n in names:
        body += kw.string(n) + struct.pack(">ihii", partitions, 1, 0, 0)
    body += struct.pack(">ib", timeout_ms, 0)
    return kw.request(API_CREATE_TOPICS, 4, corr, body)


def parse_create_topics(body):
    """[(name, error, message)] of a CreateTopics v2..v4 response."""
    r = kw.Reader(body)
    r.i32()                               # correlation id
    r.i32()                               # throttle
    return [(r.string(), r.i16(), r.string()) for _ in range(r.i32())]


def pipelined(sock, count, build, check, label):
    """Sends count requests, WINDOW at a time; check(i, body) each answer."""
    done = 0
    while done < count:
        n = min(WINDOW, count - done)
        sock.sendall(b"".join(build(done + i) for i in range(n)))
        for i in range(n):
            body = kw.recv_frame(sock)
            if body is None:
                raise ConnectionError("broker closed the connection")
            check(done + i, body)
        done += n
        if done % 10000 == 0 or done == count:
            progress("%s %d/%d" % (label, done, count))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cairn", default=str(REPO / "build" / "cairn"))
    ap.add_argument("--dir", default=str(REPO / "bench" / "out"))
    ap.add_argument("--topics", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=100)
    ap.add_argument("--producers", type=int, default=100000)
    args = ap.parse_args()
    requested = args.topics * args.partitions
    want_fds = 3 * requested + 1024
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != resource.RLIM_INFINITY and hard < want_fds:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want_fds, want_fds))
        except (ValueError, OSError):
            # Cannot raise it: fewer topics, with headroom for sockets.
            args.topics = max(1, min(args.topics, (hard - 1024) // 3
                                     // args.partitions))
            want_fds = hard
            progress("open-file limit %d: only %d topics x %d partitions"
                     % (hard, args.topics, args.partitions))
    nparts = args.topics * args.partitions
    Path(args.dir).mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="cairn-mem-", dir=args.dir))
    port = free_port()
    log = open(tmp / "broker.log", "wb")
    proc = subprocess.Popen(
        [args.cairn, "--set", "listeners=PLAINTEXT://127.0.0.1:%d" % port,
         "--set", "log.dirs=%s" % (tmp / "data")],
        stdout=log, stderr=log, stdin=subprocess.DEVNULL,
        preexec_fn=lambda: raise_nofile(want_fds))
    res = {"test": "broker_memory", "topics": args.topics,
           "partitions": nparts, "partitions_requested": requested,
           "producers": args.producers}
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    sys.exit("broker did not start; see %s"
                             % (tmp / "broker.log"))
                time.sleep(0.05)
        with open("/proc/%d/limits" % proc.pid) as f:
            for line in f:
                if line.startswith("Max open files"):
                    res["nofile_limit"] = int(line.split()[3])
        time.sleep(0.5)
        res["rss_idle_kb"] = status_kb(proc.pid, "VmRSS")
        sock = socket.create_connection(("127.0.0.1", port))
        sock.settimeout(600)
        names = ["mem-%03d" % t for t in range(args.topics)]
        t0 = time.monotonic()
        per_req = 10
        for i in range(0, len(names), per_req):
            sock.sendall(create_topics_request(i, names[i:i + per_req],
                                               args.partitions))
            body = kw.recv_frame(sock)
            if body is None:
                sys.exit("broker closed the connection during "
                         "CreateTopics; see %s" % (tmp / "broker.log"))
            for name, err, msg in parse_create_topics(body):
                if err:
                    sys.exit("CreateTopics %s: error %d %s"
                             % (name, err, msg))
            progress("created %d/%d topics" % (
                min(i + per_req, len(names)), len(names)))
        res["create_s"] = round(time.monotonic() - t0, 2)
        time.sleep(0.5)
        res["rss_topics_kb"] = status_kb(proc.pid, "VmRSS")
        res["open_fds"] = open_fds(proc.pid)

        pids = [None] * args.producers

        def init_check(i, body):
            _, err, pid, epoch = kw.parse_init_producer_id(body, 1)
            if err:
                sys.exit("InitProducerId error %d" % err)
            pids[i] = (pid, epoch)

        t0 = time.monotonic()
        pipelined(sock, args.producers,
                  lambda i: kw.init_producer_id_request(i, version=1),
                  init_check, "InitProducerId")
        res["init_s"] = round(time.monotonic() - t0, 2)
        ts = int(time.time() * 1000)
        value = [b"m" * 16]

        def produce_build(i):
            t = i % args.topics
            p = (i // args.topics) % args.partitions
            pid, epoch = pids[i]
            batch = kw.record_batch(value, producer_id=pid,
                                    producer_epoch=epoch, base_sequence=0,
                                    base_timestamp=ts)
            return kw.produce_request_v8(i, names[t], p, batch, acks=1)

        def produce_check(i, body):
            _, parts = kw.parse_produce_v8(body)
            if parts[0][2]:
                sys.exit("Produce error %d for producer %d"
                         % (parts[0][2], i))

        t0 = time.monotonic()
        pipelined(sock, args.producers, produce_build, produce_check,
                  "Produce")
        res["produce_s"] = round(time.monotonic() - t0, 2)
        sock.close()
        time.sleep(0.5)
        res["rss_kb"] = status_kb(proc.pid, "VmRSS")
        res["hwm_kb"] = status_kb(proc.pid, "VmHWM")
        res["rss_mb"] = round(res["rss_kb"] / 1024.0, 1)
        res["bytes_per_partition"] = round(
            (res["rss_topics_kb"] - res["rss_idle_kb"]) * 1024.0 / nparts)
        res["bytes_per_producer"] = round(
            (res["rss_kb"] - res["rss_topics_kb"]) * 1024.0
            / max(1, args.producers))
        # What the requested partition count would take, at the measured
        # cost per partition (equal to rss_mb when nothing was capped).
        res["rss_mb_extrapolated"] = round(
            (res["rss_kb"] * 1024.0 + res["bytes_per_partition"]
             * (requested - nparts)) / (1 << 20), 1)
        print(json.dumps(res), flush=True)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        log.close()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
