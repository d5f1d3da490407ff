"""TLS handshake time against a running SSL listener: median, p90 and p99
of N fresh connections per TLS version, measured on the client from the
TCP connection being up to the handshake being done (so it includes the
client's own work; loopback).  bench/security.py imports run() and
percentile().

  /usr/bin/python3 bench/tls_handshake.py HOST:PORT CA.pem [N] [CERT KEY]
"""
import socket
import ssl
import statistics
import sys
import time


def percentile(sorted_times, q):
    """The q-quantile (nearest rank) of a sorted list."""
    return sorted_times[min(len(sorted_times) - 1,
                            int(len(sorted_times) * q))]


def run(host, port, ca, version, n, cert=None, key=None):
    """The sorted handshake times (ms) of n fresh connections."""
    times = []
    for _ in range(n):
        ctx = ssl.create_default_context(cafile=ca)
        ctx.minimum_version = ctx.maximum_version = version
        if cert:
            ctx.load_cert_chain(cert, key)
        raw = socket.create_connection((host, port))
        t = time.perf_counter()
        s = ctx.wrap_socket(raw, server_hostname="localhost")
        times.append((time.perf_counter() - t) * 1000)
        s.close()
    times.sort()
    return times


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    host, port = sys.argv[1].rsplit(":", 1)
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 100
    cert, key = (sys.argv[4], sys.argv[5]) if len(sys.argv) > 5 else (None,
                                                                      None)
    for v, name in ((ssl.TLSVersion.TLSv1_3, "TLSv1.3"),
                    (ssl.TLSVersion.TLSv1_2, "TLSv1.2")):
        times = run(host, int(port), sys.argv[2], v, n, cert, key)
        print("%s: median %.2f ms, p90 %.2f ms, p99 %.2f ms over %d "
              "handshakes%s" % (name, statistics.median(times),
                                percentile(times, 0.9),
                                percentile(times, 0.99), n,
                                " (client certificate)" if cert else ""))


if __name__ == "__main__":
    main()
