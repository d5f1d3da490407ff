"""A client that pipelines requests and never reads (issue #11, defect 1).

One raw connection pipelines Fetch requests (max_bytes 1 MiB, on a topic
holding data, so every answer is a megabyte) mixed with Metadata requests,
as fast as the broker takes them, and never reads an answer.  Meanwhile:

- the broker's resident memory (VmRSS) stays under idle + RSS_BOUND_MB;
- another client's ApiVersions and Metadata keep working: their latency is
  measured on a quiet broker first and then under the flood (p50/p99 go to
  the test log), and only a generous bound is asserted;
- SIGTERM, sent while the flood's connection is still open with its answers
  unread, ends the broker within STOP_S seconds.

Without back-pressure the broker reads every request and queues every
answer in memory: it grew to gigabytes (the test stops the flood once RSS
passes a safety cap, so the machine is not exhausted) and its SIGTERM took
seconds.
"""

import os
import select
import socket
import struct
import threading
import time


import kafka_wire as kw
from conftest import metrics, SANITIZED, SLOW, needs_cairn

MiB = 1 << 20
FLOOD_S = 12                  # how long the flood runs
# The bound on growth above idle.  Under ASan freed memory sits in the
# allocator's quarantine (256 MiB by default) before it is reused, so the
# sanitized broker grows by that much with any allocation churn.
RSS_BOUND_MB = 64 + (320 if SANITIZED else 0)
SAFETY_CAP_MB = 1536          # stop the flood here: the test has failed
LATENCY_BOUND_S = 2.0 * SLOW  # one quick request under the flood
STOP_S = 5 * SLOW             # SIGTERM to exit


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS for pid %d" % pid)


def fill_topic(bootstrap, topic, mib):
    """mib MiB of incompressible records (100 KiB each) in the topic."""
    from confluent_kafka import Producer
    prod = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5,
                     "compression.type": "none"})
    for _ in range(mib * 10):
        prod.produce(topic, os.urandom(100 << 10), partition=0)
        prod.poll(0)
    assert prod.flush(30) == 0, "records not acknowledged"


class Flood(threading.Thread):
    """Pipelines Fetch + Metadata on one socket and never reads."""

    def __init__(self, port, topic, seconds):
        super().__init__(daemon=True)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        # A small receive window: the broker's writes stall at once.
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32 << 10)
        self.sock.connect(("127.0.0.1", port))
        self.sock.setblocking(False)
        self.topic = topic
        self.seconds = seconds
        self.stop = threading.Event()
        self.sent = 0          # requests fully handed to the kernel
        self.fetches = 0

    def requests(self):
        corr = 0
        while True:
            corr += 1
            # Offsets cycle so the answers are not all the same bytes.
            yield kw.fetch_request_v11(corr, self.topic, 0,
                                       (corr // 6) % 32, max_bytes=MiB)
            for _ in range(5):
                corr += 1
                yield kw.metadata_request_v1(corr)

    def run(self):
        gen = self.requests()
        pending = b""
        end = time.monotonic() + self.seconds
        while not self.stop.is_set() and time.monotonic() < end:
            if not pending:
                # Whole frames, 64 at a time, so a partial send never
                # leaves the broker a torn frame to read.
                chunk = [next(gen) for _ in range(64)]
                pending = b"".join(chunk)
                self.fetches += 64 // 6 + 1
            _, w, _ = select.select([], [self.sock], [], 0.1)
            if not w:
                continue
            try:
                n = self.sock.send(pending)
            except BlockingIOError:
                continue
            except OSError:
                return
            pending = pending[n:]
            if not pending:
                self.sent += 64


def latencies(port, seconds, stop=None):
    """ApiVersions and Metadata round trips (seconds) on a fresh client."""
    cli = kw.TxnClient(port, timeout=30)
    out = []
    end = time.monotonic() + seconds
    try:
        while time.monotonic() < end and not (stop and stop()):
            t0 = time.monotonic()
            cli.api_versions()
            t1 = time.monotonic()
            cli.metadata()
            t2 = time.monotonic()
            out += [t1 - t0, t2 - t1]
            time.sleep(0.02)
    finally:
        cli.close()
    return out


def metric(broker, name):
    """One unlabelled sample from /metrics, or None."""
    try:
        return metrics(broker).get(name)
    except OSError:
        return None


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p / 100))]


@needs_cairn
def test_pipelining_client_that_never_reads(broker):
    pid = broker.proc.pid
    broker.create_topic("bp", 1)
    fill_topic(broker.bootstrap, "bp", 8)
    time.sleep(0.5)
    quiet = latencies(broker.port, 2)
    idle_kb = rss_kb(pid)

    flood = Flood(broker.port, "bp", FLOOD_S)
    peak_kb = [idle_kb]
    capped = []

    def sample():
        while flood.is_alive():
            kb = rss_kb(pid)
            peak_kb[0] = max(peak_kb[0], kb)
            if kb > SAFETY_CAP_MB * 1024:
                capped.append(kb)
                flood.stop.set()
                return
            time.sleep(0.1)

    sampler = threading.Thread(target=sample, daemon=True)
    flood.start()
    sampler.start()
    time.sleep(1)      # let the flood fill whatever it can
    loud = latencies(broker.port, FLOOD_S - 2, stop=lambda: bool(capped))
    muted = metric(broker, "cairn_net_muted_connections")
    flood.join(FLOOD_S + 10)
    sampler.join(10)
    growth_mb = (peak_kb[0] - idle_kb) / 1024
    print("backpressure: idle RSS %.1f MiB, peak %.1f MiB (+%.1f MiB); "
          "flood sent %d requests (%d fetches)"
          % (idle_kb / 1024, peak_kb[0] / 1024, growth_mb, flood.sent,
             flood.fetches))
    print("backpressure: other client, quiet: n=%d p50 %.2f ms p99 %.2f ms; "
          "under the flood: n=%d p50 %.2f ms p99 %.2f ms max %.2f ms"
          % (len(quiet), 1000 * pct(quiet, 50), 1000 * pct(quiet, 99),
             len(loud), 1000 * pct(loud, 50) if loud else -1,
             1000 * pct(loud, 99) if loud else -1,
             1000 * max(loud) if loud else -1))

    # SIGTERM with the flood's connection open and its answers unread.
    t0 = time.monotonic()
    rc = broker.stop(timeout=STOP_S)
    stop_s = time.monotonic() - t0
    print("backpressure: SIGTERM to exit %.2f s" % stop_s)
    flood.sock.close()

    assert not capped, ("broker RSS passed %d MiB (idle %.1f MiB): the "
                        "flood's answers are queued without bound"
                        % (SAFETY_CAP_MB, idle_kb / 1024))
    assert growth_mb < RSS_BOUND_MB, \
        "RSS grew %.1f MiB above idle (bound %d)" % (growth_mb, RSS_BOUND_MB)
    assert rc == 0, "broker did not exit on SIGTERM within %ss (%s)" % (
        STOP_S, rc)
    assert loud, "the other client got no answer at all under the flood"
    assert muted == 1, "flood's connection not muted (metric %r)" % muted
    assert max(loud) < LATENCY_BOUND_S, \
        "the other client waited %.2f s for one answer" % max(loud)

    # The data is intact and the broker serves again after the restart.
    broker.start()
    cli = kw.TxnClient(broker.port)
    try:
        cli.api_versions()
    finally:
        cli.close()


@needs_cairn
def test_memory_returned_after_flooding_connections_close(broker):
    """Many connections each fill their own limit; once they close, the
    broker gives the memory back (malloc_trim, broker.c) instead of
    keeping its peak size for good."""
    conns = 16
    per_conn_mb = 8 + 2        # cairn.connection.max.queued.bytes + one
    pid = broker.proc.pid
    broker.create_topic("bp", 1)
    fill_topic(broker.bootstrap, "bp", 8)
    time.sleep(1.5)            # one trim period, after the fill's churn
    idle_kb = rss_kb(pid)
    socks = []
    for _ in range(conns):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32 << 10)
        s.connect(("127.0.0.1", broker.port))
        s.setblocking(False)
        reqs = b"".join(kw.fetch_request_v11(c, "bp", 0, c % 32,
                                             max_bytes=MiB)
                        for c in range(1, 301))
        try:
            s.send(reqs)           # what the kernel takes; never read
        except BlockingIOError:
            pass
        socks.append(s)
    peak_kb = idle_kb
    deadline = time.monotonic() + 4
    while time.monotonic() < deadline:
        peak_kb = max(peak_kb, rss_kb(pid))
        if peak_kb > SAFETY_CAP_MB * 1024:
            break
        time.sleep(0.1)
    for s in socks:
        s.close()
    after_kb = rss_kb(pid)
    deadline = time.monotonic() + 10 * SLOW
    while time.monotonic() < deadline:
        after_kb = rss_kb(pid)
        if after_kb < idle_kb + RSS_BOUND_MB * 1024:
            break
        time.sleep(0.25)
    print("backpressure: %d connections: idle %.1f MiB, peak %.1f MiB, "
          "after they closed %.1f MiB"
          % (conns, idle_kb / 1024, peak_kb / 1024, after_kb / 1024))
    bound_mb = conns * per_conn_mb + RSS_BOUND_MB
    assert (peak_kb - idle_kb) / 1024 < bound_mb, \
        "RSS grew %.1f MiB for %d connections (bound %d)" % (
            (peak_kb - idle_kb) / 1024, conns, bound_mb)
    if not SANITIZED:
        # ASan's allocator keeps freed memory in its quarantine and
        # ignores malloc_trim, so only the plain build is held to this.
        assert after_kb < idle_kb + RSS_BOUND_MB * 1024, \
            "RSS still %.1f MiB (idle %.1f) after the connections closed" \
            % (after_kb / 1024, idle_kb / 1024)


def long_poll_fetch(corr, topic, min_bytes, max_wait_ms, max_bytes=None):
    """Fetch v11 from offset 0 that waits for more than the topic holds."""
    max_bytes = max_bytes or min_bytes
    body = struct.pack(">iiiibii", -1, max_wait_ms, min_bytes, max_bytes,
                       0, 0, -1)
    body += struct.pack(">i", 1) + kw.string(topic)
    body += struct.pack(">iiiqqi", 1, 0, -1, 0, -1, max_bytes)
    body += struct.pack(">i", 0) + kw.string("")
    return kw.request(kw.API_FETCH, 11, corr, body)


@needs_cairn
def test_parked_fetches_hold_no_data(broker):
    """Long-poll fetches asking for more than there is wait (parked) for
    their max_wait_ms; they must not each keep the megabytes they read
    while they wait, and they end when their connection closes."""
    pid = broker.proc.pid
    broker.create_topic("bp", 1)
    fill_topic(broker.bootstrap, "bp", 8)
    time.sleep(1.5)
    idle_kb = rss_kb(pid)
    s = socket.create_connection(("127.0.0.1", broker.port), timeout=10)
    n = 200
    s.sendall(b"".join(long_poll_fetch(c, "bp", 64 * MiB, 60000)
                       for c in range(1, n + 1)))
    peak_kb = idle_kb
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        peak_kb = max(peak_kb, rss_kb(pid))
        if peak_kb > SAFETY_CAP_MB * 1024:
            break
        time.sleep(0.1)
    print("backpressure: %d parked 8 MiB fetches: idle %.1f MiB, peak "
          "%.1f MiB" % (n, idle_kb / 1024, peak_kb / 1024))
    assert (peak_kb - idle_kb) / 1024 < RSS_BOUND_MB, \
        "RSS grew %.1f MiB for parked fetches" % ((peak_kb - idle_kb) / 1024)
    # A new record wakes every parked fetch: each reads again, still
    # short of min_bytes, and parks again without keeping what it read.
    cli = kw.Client(broker.port)
    try:
        err, _ = cli.produce("bp", 0, kw.record_batch([b"wake"]), acks=1)
        assert err == 0
    finally:
        cli.close()
    time.sleep(1)
    woke_kb = rss_kb(pid)
    assert (woke_kb - idle_kb) / 1024 < RSS_BOUND_MB, \
        "RSS grew %.1f MiB after waking parked fetches" % (
            (woke_kb - idle_kb) / 1024)
    parked = metric(broker, "cairn_fetch_parked_requests")
    assert parked == 100, parked   # cairn.connection.max.inflight.requests
    s.close()
    # Their connection gone, the waits end now, not after their 60 s.
    deadline = time.monotonic() + 5 * SLOW
    while time.monotonic() < deadline:
        parked = metric(broker, "cairn_fetch_parked_requests")
        if parked == 0:
            break
        time.sleep(0.1)
    assert parked == 0, "%r fetches still parked after their connection " \
        "closed" % parked
    t0 = time.monotonic()
    assert broker.stop(timeout=STOP_S) == 0
    print("backpressure: SIGTERM to exit %.2f s" % (time.monotonic() - t0))
    broker.start()


@needs_cairn
def test_woken_parked_fetches_answer_within_the_connection_budget(broker):
    """Fetches pipelined while the topic was empty cost nothing while they
    wait; when data arrives they must not all answer at full size (here
    100 x 32 MiB) to a client that reads none of it: they share the
    connection's byte budget, each still sending at least one batch."""
    pid = broker.proc.pid
    broker.create_topic("bw", 1)
    time.sleep(1.5)
    idle_kb = rss_kb(pid)
    s = socket.create_connection(("127.0.0.1", broker.port), timeout=10)
    s.sendall(b"".join(long_poll_fetch(c, "bw", 4 * MiB, 60000,
                                       max_bytes=64 * MiB)
                       for c in range(1, 101)))
    deadline = time.monotonic() + 10 * SLOW
    while metric(broker, "cairn_fetch_parked_requests") < 100:
        assert time.monotonic() < deadline, "fetches did not park"
        time.sleep(0.1)
    from confluent_kafka import Producer
    prod = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5,
                     "batch.size": 128 << 10, "compression.type": "none"})
    peak_kb = idle_kb
    for _ in range(320):                     # 32 MiB in 100 KiB batches
        prod.produce("bw", os.urandom(100 << 10), partition=0)
        prod.poll(0)
        peak_kb = max(peak_kb, rss_kb(pid))
    assert prod.flush(30) == 0, "records not acknowledged"
    deadline = time.monotonic() + 10 * SLOW
    while time.monotonic() < deadline:
        peak_kb = max(peak_kb, rss_kb(pid))
        if peak_kb > SAFETY_CAP_MB * 1024 or \
                metric(broker, "cairn_fetch_parked_requests") == 0:
            break
        time.sleep(0.1)
    time.sleep(0.5)
    peak_kb = max(peak_kb, rss_kb(pid))
    print("backpressure: 100 woken 64 MiB fetches on one unread "
          "connection: idle %.1f MiB, peak %.1f MiB"
          % (idle_kb / 1024, peak_kb / 1024))
    assert metric(broker, "cairn_fetch_parked_requests") == 0
    assert (peak_kb - idle_kb) / 1024 < RSS_BOUND_MB, \
        "RSS grew %.1f MiB for woken fetches" % ((peak_kb - idle_kb) / 1024)
    s.close()
