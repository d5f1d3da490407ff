#!/usr/bin/python3
"""Coordinator load time: create N transactional ids, restart the broker,
and read how long it took to load __transaction_state.

  /usr/bin/python3 bench/bench_txn_load.py [--ids 100000] [--build-dir build]

Ids are created with pipelined InitProducerId requests (1000 in flight on
one connection), so group commit batches their transaction-log records.
The broker is then stopped cleanly and started again; its log line
"loaded N transactional ids from __transaction_state in T ms" is the
result, printed as one JSON line.
"""

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "e2e"))
import kafka_wire as kw  # noqa: E402


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def start(cairn, port, data, log):
    proc = subprocess.Popen(
        [cairn, "--set", "listeners=PLAINTEXT://127.0.0.1:%d" % port,
         "--set", "log.dirs=%s" % data], stdout=log, stderr=log)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return proc
        except OSError:
            if proc.poll() is not None:
                sys.exit("broker exited during start-up")
            time.sleep(0.05)
    proc.kill()
    sys.exit("broker did not start")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ids", type=int, default=100000)
    ap.add_argument("--build-dir", default=str(REPO / "build"))
    args = ap.parse_args()
    cairn = str(Path(args.build_dir) / "cairn")
    tmp = Path(tempfile.mkdtemp(prefix="cairn-txnload-",
                                dir=str(REPO / "bench")))
    port = free_port()
    log_path = tmp / "broker.log"
    log = open(log_path, "ab")
    proc = start(cairn, port, tmp / "data", log)
    try:
        sock = socket.create_connection(("127.0.0.1", port))
        sock.settimeout(60)
        t0 = time.monotonic()
        window = 1000
        done = 0
        while done < args.ids:
            n = min(window, args.ids - done)
            out = b"".join(kw.init_producer_id_request(
                done + i, version=1, transactional_id="load-%d" % (done + i),
                txn_timeout_ms=60000) for i in range(n))
            sock.sendall(out)
            for _ in range(n):
                body = kw.recv_frame(sock)
                _, err, _, _ = kw.parse_init_producer_id(body, 1)
                if err not in (0, 51):
                    sys.exit("InitProducerId error %d" % err)
            done += n
            print("\r%d ids" % done, end="", file=sys.stderr, flush=True)
        create_s = time.monotonic() - t0
        print(file=sys.stderr)
        sock.close()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        proc = start(cairn, port, tmp / "data", log)
        text = open(log_path, errors="replace").read()
        m = re.findall(r"loaded (\d+) transactional ids from "
                       r"__transaction_state in (\d+) ms", text)
        ids, ms = map(int, m[-1])
        print(json.dumps({"test": "coordinator_load", "ids": ids,
                          "load_ms": ms,
                          "create_ids_per_s": round(args.ids / create_s)}))
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)
        log.close()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
