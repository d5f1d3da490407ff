"""The `security` part of the benchmark (issue #18): what TLS and SASL cost.

One Cairn broker with PLAINTEXT, SSL and SASL_SSL (SCRAM-SHA-512)
listeners (certificates from tools/mkcerts.sh, the SCRAM user written by
`cairn --add-scram` before the start).  Each listener is an arm's peer:
the three share the broker process, so CPU and memory are that one
broker's.  One figure, measured with method.py: per repetition the three
protocols run in a rotating order (PLAINTEXT SSL SASL_SSL, then SSL
SASL_SSL PLAINTEXT, ...), each running

  acks_all  librdkafka producer, 1 KiB acks=all, 6 partitions (bench_client)
  txn       transactional producer committing every TXN_RECORDS records
            (bench_txn)

and each protocol is compared with PLAINTEXT of the same run (ratio of
medians and per-pair ratios).  With Kafka among the peers (--peers, and
build/java from make build-java), Apache Kafka 4.4.0 with a PLAINTEXT and
an SSL listener (the same certificate, Kafka's default JVM settings via
peers.KafkaBroker) joins the rotation as kafka-plaintext and kafka-ssl,
after one unmeasured run of each, for Kafka's own SSL / PLAINTEXT ratio
and Cairn SSL / Kafka SSL.  After the rounds: TLS handshake time
(TLS 1.3 and 1.2, bench/tls_handshake.py) and the SCRAM-SHA-512 login time
on the SASL_SSL listener (after the TLS handshake: SaslHandshake and the
two SaslAuthenticate round trips, the client's PBKDF2 left out), median
and p99 of fresh connections.
"""

import statistics
import subprocess
import sys
import time
from pathlib import Path

import figures
import method
import peers as pe
import tls_handshake

REPO = Path(__file__).resolve().parents[1]
PROTOCOLS = ["plaintext", "ssl", "sasl_ssl"]
MECH = "SCRAM-SHA-512"
USER, PASSWORD = "bench", "bench-secret"
TXN_RECORDS = 1000
HANDSHAKES = 200            # per TLS version, and SCRAM logins
WORKLOADS = [
    ("acks_all", "bench_client", ["--acks", "-1"]),
    ("txn", "bench_txn", ["--txn-records", str(TXN_RECORDS)]),
]


class SecuredCairn:
    """The broker: certificates, the SCRAM user, three listeners."""

    def __init__(self, workdir, cairn):
        self.dir = Path(workdir) / "cairn-secured"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.cairn = str(cairn)
        self.certs = self.dir / "certs"
        self.ports = {}
        self.proc = None

    def start(self):
        res = subprocess.run(["bash", str(REPO / "tools" / "mkcerts.sh"),
                              str(self.certs)], capture_output=True,
                             text=True, timeout=120)
        if res.returncode != 0:
            raise RuntimeError("tools/mkcerts.sh failed: " + res.stderr)
        data = self.dir / "data"
        data.mkdir(exist_ok=True)
        res = subprocess.run(
            [self.cairn, "--set", "log.dirs=%s" % data, "--add-scram",
             "%s=[name=%s,password=%s]" % (MECH, USER, PASSWORD)],
            capture_output=True, text=True, timeout=60)
        if res.returncode != 0:
            raise RuntimeError("cairn --add-scram failed: " + res.stderr)
        self.ports = {p: pe.free_port() for p in PROTOCOLS}
        sets = {
            "listeners": ",".join("%s://127.0.0.1:%d" % (p.upper(), port)
                                  for p, port in self.ports.items()),
            "log.dirs": str(data),
            "ssl.keystore.location": str(self.certs / "server.pem"),
            "ssl.truststore.location": str(self.certs / "ca.pem"),
            "sasl.enabled.mechanisms": MECH,
        }
        argv = [self.cairn]
        for k, v in sets.items():
            argv += ["--set", "%s=%s" % (k, v)]
        log = self.dir / "broker.log"
        with open(log, "wb") as f:
            self.proc = subprocess.Popen(argv, stdout=f, stderr=f,
                                         stdin=subprocess.DEVNULL)
        for port in self.ports.values():
            pe.wait_port(port, self.proc, 15, "secured Cairn", log)

    def client_props(self, proto):
        """librdkafka properties for a listener, as -X key=value."""
        props = {}
        if proto in ("ssl", "sasl_ssl"):
            props["ssl.ca.location"] = str(self.certs / "ca.pem")
        if proto == "ssl":
            props["security.protocol"] = "ssl"
        if proto == "sasl_ssl":
            props.update({"security.protocol": "sasl_ssl",
                          "sasl.mechanism": MECH, "sasl.username": USER,
                          "sasl.password": PASSWORD})
        return ["%s=%s" % kv for kv in props.items()]

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self):
        pe.stop_proc(self.proc)


class ListenerPeer(pe.Peer):
    """One listener of a broker (Cairn's SecuredCairn, or Kafka's
    KafkaBroker as proc_of says).  Topics are created through the
    PLAINTEXT listener (the same broker): the admin client is not what is
    measured."""

    def __init__(self, workdir, name, broker, port, admin_port, xprops,
                 jvm=False):
        self.name = name
        self.label = LABELS.get(name, name)
        super().__init__(workdir)
        self.broker = broker
        self.jvm = jvm
        self.bootstrap = "127.0.0.1:%d" % port
        self.admin_bootstrap = "127.0.0.1:%d" % admin_port
        self.xprops = xprops

    def _admin(self):
        if getattr(self, "_admin_client", None) is None:
            from confluent_kafka.admin import AdminClient
            self._admin_client = AdminClient(
                {"bootstrap.servers": self.admin_bootstrap})
        return self._admin_client

    def pid(self):
        return self.broker.proc.pid

    def alive(self):
        return (self.broker.proc is not None
                and self.broker.proc.poll() is None)

    def stop(self):
        self.drop_admin()


LABELS = {"plaintext": "Cairn PLAINTEXT", "ssl": "Cairn SSL",
          "sasl_ssl": "Cairn SASL_SSL", "kafka-plaintext": "Kafka PLAINTEXT",
          "kafka-ssl": "Kafka SSL"}


def rotate(rep, arms):
    """The listeners in a rotating order per repetition (PLAINTEXT SSL
    SASL_SSL, SSL SASL_SSL PLAINTEXT, ...), each one's workloads back to
    back."""
    names = []
    for a in arms:
        if a.peer.name not in names:
            names.append(a.peer.name)
    k = rep % len(names)
    return [a for p in names[k:] + names[:k] for a in arms
            if a.peer.name == p]


def start_kafka(tmp, certs, progress):
    """Kafka 4.4.0 with PLAINTEXT and SSL listeners, or None (reported)."""
    try:
        kb = pe.KafkaBroker(
            Path(tmp) / "kafka-secured", listeners={"SSL": "SSL"},
            server_props={
                "ssl.keystore.type": "PEM",
                "ssl.keystore.location": str(certs / "server.pem"),
                "ssl.truststore.type": "PEM",
                "ssl.truststore.location": str(certs / "ca.pem")})
        progress("security: starting Apache Kafka 4.4.0 with PLAINTEXT and "
                 "SSL listeners")
        kb.start()
        return kb
    except Exception as e:   # the Cairn figures still stand without it
        progress("security: Kafka did not start, left out: %s" % e)
        return None


def _arm(ctx, peer, workload, prog, args, topics):
    arm_name = "%s/%s" % (peer.name, workload)
    topic = figures.topic_name("sec", arm_name)
    topics.append((peer, topic))
    peer.create_topic(topic, figures.PARTITIONS)
    o = ctx.o
    xs = [a for kv in peer.xprops for a in ("-X", kv)]

    def run(p, rep):
        argv = [ctx.build / prog, "--brokers", p.bootstrap, "--topic", topic,
                "--partitions", figures.PARTITIONS, "--size", figures.SIZE,
                "--seconds", o["seconds"], "--warmup-seconds", o["warmup"]]
        if prog == "bench_client":
            argv.append("--produce-only")
        recs = figures.run_prog(argv + args + xs, 120 + 4 * o["seconds"],
                                ctx.progress)
        if not recs:
            return None
        rec = recs[-1]
        rec["bytes_total"] = rec.get("delivered", 0) * figures.SIZE
        return rec
    return method.Arm(arm_name, peer, run)


def _times_stats(times):
    times = sorted(times)
    if not times:
        return None
    return {"n": len(times), "median_ms": round(statistics.median(times), 3),
            "p99_ms": round(tls_handshake.percentile(times, 0.99), 3),
            "max_ms": round(times[-1], 3)}


def _sasl():
    """tests/e2e/test_sasl.py's raw-wire SCRAM client."""
    e2e = str(REPO / "tests" / "e2e")
    if e2e not in sys.path:
        sys.path.insert(0, e2e)
    import test_sasl
    return test_sasl


def scram_logins(broker, n):
    """n fresh SASL_SSL connections: TLS handshake, then SaslHandshake v1
    and the two SaslAuthenticate round trips; the login time is those
    three round trips (the broker's SCRAM work and the loopback), without
    the client's PBKDF2 (done between them, not timed)."""
    import socket
    import ssl
    ts = _sasl()
    ctx = ssl.create_default_context(cafile=str(broker.certs / "ca.pem"))
    login, total = [], []
    for _ in range(n):
        raw = socket.create_connection(("127.0.0.1",
                                        broker.ports["sasl_ssl"]))
        t0 = time.perf_counter()
        s = ctx.wrap_socket(raw, server_hostname="localhost")
        t1 = time.perf_counter()
        err, _ = ts.handshake(s, MECH)
        c = ts.Scram(MECH, USER, PASSWORD)
        a = ts.authenticate(s, c.first(), 1, corr=2)
        t2 = time.perf_counter()
        final = c.final(a[2])        # client PBKDF2: not the broker's
        t3 = time.perf_counter()
        b = ts.authenticate(s, final, 1, corr=3)
        t4 = time.perf_counter()
        s.close()
        if err or a[0] or b is None or b[0]:
            raise RuntimeError("SCRAM login failed: %r %r %r" % (err, a, b))
        login.append(((t2 - t1) + (t4 - t3)) * 1000)
        total.append((t4 - t0) * 1000)
    return _times_stats(login), _times_stats(total)


def run_security(ctx, args, tmp, kafka=False):
    """The figure (into the report's figures) and the handshake times;
    kafka: Kafka's PLAINTEXT and SSL listeners too."""
    broker = SecuredCairn(tmp, args.cairn)
    ctx.progress("security: starting Cairn with PLAINTEXT, SSL and "
                 "SASL_SSL (%s) listeners" % MECH)
    broker.start()
    out = {"handshake": {}, "ports": dict(broker.ports)}
    topics = []
    lp = {p: ListenerPeer(tmp, p, broker, broker.ports[p],
                          broker.ports["plaintext"],
                          broker.client_props(p)) for p in PROTOCOLS}
    kb = start_kafka(tmp, broker.certs, ctx.progress) if kafka else None
    try:
        if kb:
            kp = kb.ref.port
            for name, port, xp in (
                    ("kafka-plaintext", kp, []),
                    ("kafka-ssl", kb.ref.listener_ports["SSL"],
                     broker.client_props("ssl"))):
                lp[name] = ListenerPeer(tmp, name, kb, port, kp, xp,
                                        jvm=True)
            out["kafka_start_seconds"] = getattr(kb.ref, "start_seconds",
                                                 None)
        sctx = figures.Ctx(lp, ctx.build, ctx.o, ctx.progress)
        arms = [_arm(sctx, peer, w, prog, a, topics)
                for peer in lp.values() for w, prog, a in WORKLOADS]
        for a in arms:
            if a.peer.jvm and a.name.endswith("/acks_all"):
                # The JIT, as figures.warm_up does for the other parts.
                ctx.progress("warm-up: %s, not measured" % a.name)
                a.run(a.peer, -1)
        ctx.progress("security: 1 KiB acks=all and transactional (commit "
                     "every %d records), %d partitions, over %s, %d x "
                     "(%g + %g s), rotating order"
                     % (TXN_RECORDS, figures.PARTITIONS,
                        ", ".join(p.upper() for p in PROTOCOLS),
                        ctx.o["reps"], ctx.o["warmup"], ctx.o["seconds"]))
        fig = method.measure(
            {"key": "security", "kind": "produce",
             "label": "produce over PLAINTEXT, SSL, SASL_SSL (%s) 1 KiB"
             % MECH, "size": figures.SIZE,
             "partitions": figures.PARTITIONS, "txn_records": TXN_RECORDS,
             "describe": figures.describe_produce},
            arms, ctx.o["reps"], ctx.progress, order=rotate)
        _drop(topics)
        pairs = [("%s/%s" % (p, w), "plaintext/%s" % w)
                 for w, _, _ in WORKLOADS for p in PROTOCOLS[1:]]
        if kb:
            pairs += [("%s/%s" % (a, w), "%s/%s" % (b, w))
                      for w, _, _ in WORKLOADS
                      for a, b in (("kafka-ssl", "kafka-plaintext"),
                                   ("ssl", "kafka-ssl"))]
        method.summarise(fig, ["mb_per_s", "msgs_per_s", "latency_ms_p50",
                               "latency_ms_p99", "commit_ms_p99",
                               "cpu_s_per_gb"], pairs)
        # Metrics a workload does not report (commit p99 of acks=all).
        for m in list(fig["stats"]):
            fig["stats"][m] = {a: s for a, s in fig["stats"][m].items()
                               if s}
        n = HANDSHAKES if ctx.o["reps"] >= 5 else HANDSHAKES // 4
        ca = str(broker.certs / "ca.pem")
        import ssl
        for v, name in ((ssl.TLSVersion.TLSv1_3, "TLSv1.3"),
                        (ssl.TLSVersion.TLSv1_2, "TLSv1.2")):
            out["handshake"][name] = _times_stats(tls_handshake.run(
                "127.0.0.1", broker.ports["ssl"], ca, v, n))
            ctx.progress("  TLS handshake %s: median %.2f ms, p99 %.2f ms "
                         "(%d)" % (name, out["handshake"][name]["median_ms"],
                                   out["handshake"][name]["p99_ms"], n))
        login, total = scram_logins(broker, n)
        out["handshake"]["scram_login"] = login
        out["handshake"]["tls_plus_scram"] = total
        ctx.progress("  %s login: median %.2f ms, p99 %.2f ms; with the "
                     "TLS handshake and the client's PBKDF2 %.2f / %.2f ms"
                     % (MECH, login["median_ms"], login["p99_ms"],
                        total["median_ms"], total["p99_ms"]))
        out["rss_end_kb"] = pe.proc_memory_kb(broker.proc.pid)
    finally:
        for p in lp.values():
            p.stop()
        ctx.progress("stopping the secured Cairn")
        broker.stop()
        if kb:
            kb.stop()
    return fig, out


def _drop(topics):
    for peer, topic in topics:
        if peer.alive():
            peer.delete_topic(topic)


def summary_lines(fig, extra):
    """The part's lines for the report's summary, in figures.summary_lines'
    format: each protocol / PLAINTEXT of the same run ("behind" = the
    protocol costs something, "even" = the neighbouring runs disagree),
    then the handshake and login times."""
    lines = []
    what = {"mb_per_s": ("MB/s", True),
            "latency_ms_p99": ("ack latency p99 (lower is better)", False),
            "commit_ms_p99": ("commit p99 (lower is better)", False)}
    for r in (fig or {}).get("ratios", []):
        if r["metric"] not in what:
            continue
        label, higher = what[r["metric"]]
        (pa, w), pb = r["a"].split("/"), r["b"].split("/")[0]
        line = figures.said_line("%s %s / %s, %s" % (
            w, LABELS.get(pa, pa), LABELS.get(pb, pb), label), r, higher)
        if line:
            lines.append(line)
    for k, v in ((extra or {}).get("handshake") or {}).items():
        if v:
            lines.append("%s: median %.2f ms, p99 %.2f ms over %d "
                         "connections" % (HANDSHAKE_LABELS.get(k, k),
                                          v["median_ms"], v["p99_ms"],
                                          v["n"]))
    return lines


HANDSHAKE_LABELS = {
    "TLSv1.3": "TLS 1.3 handshake",
    "TLSv1.2": "TLS 1.2 handshake",
    "scram_login": MECH + " login (3 round trips after TLS)",
    "tls_plus_scram": "TLS 1.3 + " + MECH + " login incl. client PBKDF2",
}
