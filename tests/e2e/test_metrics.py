"""The HTTP metrics endpoint (issue #6): Prometheus text on /metrics,
/healthz, the HTTP error answers, and LastStableOffsetLag following an
open transaction.  Every broker gets its own metrics port from the
conftest fixture (broker.http_port)."""

import os
import re
import socket
import time
import urllib.error
import urllib.request

import pytest
from confluent_kafka import Producer

from conftest import SLOW, needs_cairn

pytestmark = needs_cairn

T = 15 * SLOW  # client call timeout, seconds
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def get(broker, path, method="GET"):
    """(status, headers, body text) of one request to the endpoint."""
    req = urllib.request.Request("http://127.0.0.1:%d%s"
                                 % (broker.http_port, path), method=method)
    try:
        with urllib.request.urlopen(req, timeout=5 * SLOW) as r:
            return r.status, r.headers, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read().decode()


def scrape(broker):
    """{(name, frozenset(labels)): value}, checking the format as it goes:
    every sample's family has HELP and TYPE lines before it, once."""
    status, headers, body = get(broker, "/metrics")
    assert status == 200
    assert headers["Content-Type"].startswith("text/plain; version=0.0.4")
    assert body.endswith("\n")
    out, typed, helped = {}, {}, set()
    for line in body.splitlines():
        if line.startswith("# HELP "):
            name = line.split()[2]
            assert name not in helped, "HELP twice for " + name
            helped.add(name)
            continue
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            assert name not in typed, "TYPE twice for " + name
            typed[name] = kind
            continue
        m = SAMPLE.match(line)
        assert m, "not a sample line: %r" % line
        name, labels, value = m.group(1), m.group(3) or "", m.group(4)
        fam = re.sub(r"_(bucket|sum|count)$", "", name)
        assert name in typed or (fam in typed and
                                 typed[fam] == "histogram"), line
        assert name in helped or fam in helped, line
        key = (name, frozenset(LABEL.findall(labels)))
        assert key not in out, "duplicate sample " + line
        out[key] = float(value)
    return out


def val(metrics, name, **labels):
    want = frozenset((k, str(v)) for k, v in labels.items())
    for (n, ls), v in metrics.items():
        if n == name and want <= ls:
            return v
    return None


def wait_for(fn, what, timeout=10 * SLOW):
    deadline = time.monotonic() + timeout
    while True:
        res = fn()
        if res:
            return res
        if time.monotonic() > deadline:
            pytest.fail("timed out waiting for " + what)
        time.sleep(0.1)


def test_lso_lag_follows_open_transaction(broker):
    broker.create_topic("mt", partitions=1)
    m0 = scrape(broker)
    commits0 = val(m0, "cairn_txn_commits_total")
    assert commits0 is not None
    assert val(m0, "cairn_partition_lso_lag", topic="mt", partition=0) == 0

    p = Producer({"bootstrap.servers": broker.bootstrap,
                  "transactional.id": "metrics-t1", "linger.ms": 5})
    p.init_transactions(T)
    p.begin_transaction()
    for i in range(5):
        p.produce("mt", value=b"v%d" % i, partition=0)
    assert p.flush(T) == 0

    # Open transaction: the high watermark moved, the LSO did not.
    m1 = wait_for(lambda: (lambda m: m if val(
        m, "cairn_partition_lso_lag", topic="mt", partition=0) else None)(
            scrape(broker)), "lso_lag > 0")
    assert val(m1, "cairn_partition_lso_lag", topic="mt", partition=0) == 5
    assert val(m1, "cairn_partition_high_watermark", topic="mt",
               partition=0) == 5
    assert val(m1, "cairn_partition_last_stable_offset", topic="mt",
               partition=0) == 0
    assert val(m1, "cairn_partition_open_transactions", topic="mt",
               partition=0) == 1
    assert val(m1, "cairn_partition_producer_ids", topic="mt",
               partition=0) == 1
    assert val(m1, "cairn_partition_oldest_open_txn_age_seconds",
               topic="mt", partition=0) >= 0
    assert val(m1, "cairn_txn_ids", state="Ongoing") >= 1
    assert val(m1, "cairn_requests_total", api="Produce") >= 1
    assert val(m1, "cairn_request_latency_seconds_count",
               api="Produce") >= 1
    assert val(m1, "cairn_request_latency_seconds_bucket", api="Produce",
               le="+Inf") == val(m1, "cairn_request_latency_seconds_count",
                                 api="Produce")
    time.sleep(1.2)
    assert val(scrape(broker), "cairn_partition_oldest_open_txn_age_seconds",
               topic="mt", partition=0) >= 1.0

    p.commit_transaction(T)
    m2 = wait_for(lambda: (lambda m: m if val(
        m, "cairn_txn_commits_total") > commits0 and val(
            m, "cairn_partition_lso_lag", topic="mt", partition=0) == 0
        else None)(scrape(broker)), "commit counted and lso_lag 0")
    # The marker took offset 5; everything is stable again.
    assert val(m2, "cairn_partition_high_watermark", topic="mt",
               partition=0) == 6
    assert val(m2, "cairn_partition_last_stable_offset", topic="mt",
               partition=0) == 6
    assert val(m2, "cairn_partition_open_transactions", topic="mt",
               partition=0) == 0
    assert val(m2, "cairn_partition_oldest_open_txn_age_seconds",
               topic="mt", partition=0) == 0
    assert val(m2, "cairn_txn_commit_latency_seconds_count") >= 1
    assert val(m2, "cairn_requests_total", api="EndTxn") >= 1
    assert val(m2, "cairn_partition_high_watermark",
               topic="__transaction_state", partition=0,
               internal="true") is not None


def test_process_and_health(broker):
    m = scrape(broker)
    assert val(m, "cairn_up") == 1
    assert val(m, "cairn_process_resident_memory_bytes") > 1 << 20
    assert val(m, "cairn_connections") is not None
    assert val(m, "cairn_net_muted_connections") == 0
    assert val(m, "cairn_net_queued_requests") is not None
    assert val(m, "cairn_net_mutes_total") is not None
    assert val(m, "cairn_txn_marker_unknown_destination_queue_size") == 0
    assert val(m, "cairn_txn_hanging_transactions_found_total") is not None
    for state in ("Empty", "Ongoing", "PrepareCommit", "CompleteAbort"):
        assert val(m, "cairn_txn_ids", state=state) is not None
    status, headers, body = get(broker, "/healthz")
    assert (status, body) == (200, "ok\n")
    assert headers["Connection"] == "close"
    status, headers, body = get(broker, "/healthz", method="HEAD")
    assert status == 200 and body == ""
    assert headers["Content-Length"] == "3"


def test_http_errors(broker):
    assert get(broker, "/nope")[0] == 404
    assert get(broker, "/metricsX")[0] == 404
    status, headers, _ = get(broker, "/metrics", method="POST")
    assert status == 405
    assert "GET" in headers["Allow"]
    assert get(broker, "/metrics", method="DELETE")[0] == 405

    def raw(data, shut=True):
        # Longer than the server's 5 s deadline, which is under test.
        s = socket.create_connection(("127.0.0.1", broker.http_port),
                                     timeout=12 * SLOW)
        s.sendall(data)
        if shut:
            s.shutdown(socket.SHUT_WR)
        got = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            got += chunk
        s.close()
        return got

    big = b"GET /metrics HTTP/1.1\r\nX-Pad: " + b"a" * 9000 + b"\r\n\r\n"
    assert raw(big).startswith(b"HTTP/1.1 431 ")
    assert raw(b"\x16\x03\x01\x00\xa5\x01\x00\x00").startswith(
        b"HTTP/1.1 400 ")
    assert raw(b"GET / HTTP/9.9\r\n\r\n").startswith(b"HTTP/1.1 400 ")
    # Kafka bytes on the HTTP port: answered 400, nothing else happens.
    assert raw(b"\x00\x00\x00\x0a\x00\x12\x00\x00").startswith(
        b"HTTP/1.1 400 ")
    # A client that never finishes its head is closed at the deadline.
    t0 = time.monotonic()
    assert raw(b"GET /metrics HTTP/1.1\r\n", shut=False) == b""
    assert 3 < time.monotonic() - t0 < 15 * SLOW
    # Many connections at once: some refused, none crash the broker.
    socks = []
    for _ in range(100):
        try:
            socks.append(socket.create_connection(
                ("127.0.0.1", broker.http_port), timeout=2))
        except OSError:
            pass
    for s in socks:
        s.close()

    def healthy():
        try:
            return get(broker, "/healthz")[0] == 200
        except OSError:
            return False  # refused while the closes are still processed
    wait_for(healthy, "the endpoint to accept again")
    assert broker.alive()


def listening_ports(pid):
    """TCP ports the process listens on (from /proc)."""
    inodes = set()
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            target = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                cols = line.split()
                if cols[3] == "0A" and cols[9] in inodes:
                    ports.add(int(cols[1].rsplit(":", 1)[1], 16))
    return ports


def test_http_listener_empty_disables(broker_factory):
    b = broker_factory()
    port = b.http_port
    assert get(b, "/healthz")[0] == 200
    assert listening_ports(b.proc.pid) == {b.port, port}
    b.sets["http.listener"] = ""
    b.restart()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=2)
    assert listening_ports(b.proc.pid) == {b.port}
    assert b.alive()


def test_parallel_brokers_get_their_own_port(broker_factory):
    a = broker_factory()
    b = broker_factory()
    assert a.http_port != b.http_port
    assert get(a, "/healthz")[0] == 200
    assert get(b, "/healthz")[0] == 200


def test_requests_by_version(broker):
    """cairn_requests_by_version_total counts each request under the
    version its header names, including one the broker then refuses."""
    import kafka_wire as kw
    cli = kw.Client(broker.port)
    try:
        cli.call(kw.api_versions_request, version=0)
        cli.call(kw.api_versions_request, version=3)
        cli.call(kw.api_versions_request, version=3)
        cli.call(kw.metadata_request_v1)
        # ApiVersions v9 does not exist: answered UNSUPPORTED_VERSION at
        # v0, still counted as the v9 the client sent.
        cli.call(kw.api_versions_request, version=9)
    finally:
        cli.close()
    m = scrape(broker)
    assert val(m, "cairn_requests_by_version_total", api="ApiVersions",
               version=0) == 1
    assert val(m, "cairn_requests_by_version_total", api="ApiVersions",
               version=3) == 2
    assert val(m, "cairn_requests_by_version_total", api="ApiVersions",
               version=9) == 1
    assert val(m, "cairn_requests_by_version_total", api="Metadata",
               version=1) == 1
    # Versions never sent have no sample at all.
    assert val(m, "cairn_requests_by_version_total", api="ApiVersions",
               version=1) is None
    assert val(m, "cairn_requests_total", api="ApiVersions") == 4
