"""TLS listeners: SSL beside PLAINTEXT, client certificates (mTLS) and the
principal they give, and what a bad peer gets (no certificate, an expired
one, one from another CA, plaintext bytes, a handshake that stalls).

Certificates come from tools/mkcerts.sh (openssl CLI) into a tmp dir, once
per module.  Negative cases use Python's ssl module on a raw socket: the
outcome is immediate (an alert or a close), no client retry loop to wait
out.
"""
import os
import socket
import ssl
import subprocess
import time
import uuid
from pathlib import Path

import pytest

import kafka_wire as kw
from conftest import (Broker, CAIRN_BIN, REPO, SANITIZED, SLOW, free_port,
                      port_open)

CN_ALICE = "User:CN=alice,OU=eng,O=acme"


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    d = tmp_path_factory.mktemp("certs")
    subprocess.run([str(REPO / "tools" / "mkcerts.sh"), str(d)], check=True,
                   stdout=subprocess.DEVNULL, timeout=60)
    return d


@pytest.fixture
def tls_broker(tmp_path, certs):
    """Starts brokers with PLAINTEXT on .port and SSL on .ssl_port."""
    made = []

    def make(**sets):
        b = Broker(tmp_path / ("b%d" % len(made)), sets)
        b.ssl_port = free_port()
        b.sets = dict({
            "listeners": "PLAINTEXT://127.0.0.1:%d,SSL://127.0.0.1:%d"
                         % (b.port, b.ssl_port),
            "ssl.keystore.location": str(certs / "server.pem"),
            "ssl.truststore.location": str(certs / "ca.pem"),
        }, **sets)
        made.append(b)
        b.start()
        deadline = time.monotonic() + 10 * SLOW
        while not port_open(b.ssl_port):
            assert time.monotonic() < deadline, b.log_tail()
            time.sleep(0.05)
        b.ssl_bootstrap = "127.0.0.1:%d" % b.ssl_port
        return b

    yield make
    problems = []
    for b in made:
        b._check_alive()
        if b.unexpected_exit is not None:
            problems.append("broker died: %s\n%s" % b.unexpected_exit)
        rc = b.stop()
        if rc not in (None, 0):
            problems.append("broker exited %s on SIGTERM:\n%s"
                            % (rc, b.log_tail()))
    assert not problems, "\n".join(problems)


def client_ctx(certs, who=None):
    ctx = ssl.create_default_context(cafile=str(certs / "ca.pem"))
    if who:
        ctx.load_cert_chain(str(certs / ("%s.crt" % who)),
                            str(certs / ("%s.key" % who)))
    return ctx


def tls_api_versions(b, certs, who=None):
    """ApiVersions over TLS; the response body, or the exception."""
    raw = socket.create_connection(("127.0.0.1", b.ssl_port), timeout=5)
    try:
        s = client_ctx(certs, who).wrap_socket(raw,
                                               server_hostname="localhost")
        s.settimeout(10 * SLOW)
        s.sendall(kw.api_versions_request(1))
        # TLS 1.3 sends the verdict on a client certificate after the
        # client's handshake is done: it shows up on the first read.
        body = kw.recv_frame(s)
        s.close()
        return body
    except (ssl.SSLError, OSError) as e:
        raw.close()
        return e


def ssl_conf(b, certs, who=None, **extra):
    conf = {"bootstrap.servers": b.ssl_bootstrap,
            "security.protocol": "SSL",
            "ssl.ca.location": str(certs / "ca.pem")}
    if who:
        conf["ssl.certificate.location"] = str(certs / ("%s.crt" % who))
        conf["ssl.key.location"] = str(certs / ("%s.key" % who))
    conf.update(extra)
    return conf


def kcat(*args, timeout=30, **kw_):
    return subprocess.run(["kcat"] + list(args), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, timeout=timeout * SLOW,
                          text=True, **kw_)


def kcat_ssl(b, certs, *args, **kw_):
    return kcat("-b", b.ssl_bootstrap, "-X", "security.protocol=ssl",
                "-X", "ssl.ca.location=%s" % (certs / "ca.pem"), *args,
                **kw_)


def wait_log(b, text, timeout=15):
    deadline = time.monotonic() + timeout * SLOW
    while time.monotonic() < deadline:
        if text in Path(b.log_path).read_text(errors="replace"):
            return True
        time.sleep(0.1)
    return False


def test_kcat_over_ssl_and_metadata_per_listener(tls_broker, certs):
    """Produce and consume through the SSL listener; each listener's
    Metadata names its own port (Kafka answers with the listener the
    request came in on)."""
    b = tls_broker()
    topic = "tls-" + uuid.uuid4().hex[:8]
    b.create_topic(topic)
    lines = ["m%d" % i for i in range(50)] + ["x" * 100000]
    r = kcat_ssl(b, certs, "-P", "-t", topic, "-X", "acks=all",
                 input="\n".join(lines) + "\n")
    assert r.returncode == 0, r.stderr
    r = kcat_ssl(b, certs, "-C", "-t", topic, "-o", "beginning", "-e",
                 "-q")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:-1] == lines
    for port in (b.port, b.ssl_port):
        args = ["-b", "127.0.0.1:%d" % port, "-L", "-J"]
        if port == b.ssl_port:
            args += ["-X", "security.protocol=ssl",
                     "-X", "ssl.ca.location=%s" % (certs / "ca.pem")]
        r = kcat(*args)
        assert r.returncode == 0, r.stderr
        import json
        md = json.loads(r.stdout)
        assert [(x["name"]) for x in md["brokers"]] == \
            ["127.0.0.1:%d" % port], md["brokers"]


@pytest.mark.skipif(SANITIZED, reason="client matrix: release build only")
def test_transactional_produce_over_ssl(tls_broker, certs):
    from confluent_kafka import Consumer, Producer
    b = tls_broker()
    topic = "tls-txn-" + uuid.uuid4().hex[:8]
    b.create_topic(topic)
    p = Producer(ssl_conf(b, certs, **{"transactional.id": "tls-" + topic}))
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(10):
        p.produce(topic, value=b"c%d" % i)
    p.commit_transaction(30)
    p.begin_transaction()
    p.produce(topic, value=b"aborted")
    p.abort_transaction(30)
    c = Consumer(ssl_conf(b, certs, **{
        "group.id": "g-" + topic, "auto.offset.reset": "earliest",
        "isolation.level": "read_committed"}))
    c.subscribe([topic])
    got = []
    deadline = time.monotonic() + 30 * SLOW
    while len(got) < 10 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append(m.value())
    c.close()
    assert got == [b"c%d" % i for i in range(10)]


@pytest.mark.parametrize("rules,principal", [
    ("DEFAULT", CN_ALICE),
    ("RULE:^CN=([^,]*),OU=eng,.*$/$1/U,DEFAULT", "User:ALICE")])
def test_mtls_principal_from_certificate_checked_by_acl(tls_broker, certs,
                                                        rules, principal):
    """The principal is User: + the subject DN (RFC 2253), or what
    ssl.principal.mapping.rules makes of it; an ACL for alice's principal
    lets alice write and not bob."""
    from confluent_kafka import KafkaError, Producer
    from test_acl import ALLOW, LITERAL, TOPIC, WRITE, create_acls_request, \
        parse_create_acls
    b = tls_broker(**{
        "authorizer.class.name":
            "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS",
        "ssl.principal.mapping.rules": rules,
        "ssl.client.auth": "required"})
    topic = "mtls-" + uuid.uuid4().hex[:8]
    b.create_topic(topic)
    admin = kw.Client(b.port)
    res = parse_create_acls(admin.call(create_acls_request, [
        (TOPIC, topic, LITERAL, principal, "*", WRITE, ALLOW)]))
    admin.close()
    assert res == [(0, None)] or all(e == 0 for e, _ in res), res

    def produce(who):
        errs = []
        p = Producer(ssl_conf(b, certs, who, **{
            "message.timeout.ms": 10000 * SLOW}))
        p.produce(topic, value=b"from " + who.encode(),
                  on_delivery=lambda e, m: errs.append(e))
        p.flush(30 * SLOW)
        return errs

    assert produce("alice") == [None]
    errs = produce("bob")
    assert len(errs) == 1 and errs[0] is not None
    assert errs[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, errs
    bob = "User:CN=bob,OU=eng,O=acme" if rules == "DEFAULT" else "User:BOB"
    assert wait_log(b, bob), b.log_tail()


def test_client_auth_required_refuses_missing_expired_and_foreign(
        tls_broker, certs):
    b = tls_broker(**{"ssl.client.auth": "required"})
    assert isinstance(tls_api_versions(b, certs, "alice"), bytes)
    for who, log in ((None, "certificate"), ("expired", "expired"),
                     ("rogue", "unable to get local issuer")):
        res = tls_api_versions(b, certs, who)
        assert not isinstance(res, bytes) or res is None, (who, res)
        assert wait_log(b, log), (who, b.log_tail())
    # Nothing else was affected.
    assert isinstance(tls_api_versions(b, certs, "bob"), bytes)
    assert b.alive()


def test_plaintext_bytes_and_stalled_handshake(tls_broker, certs):
    """Kafka frames sent in the clear to the TLS port: handshake fails and
    the connection closes.  A client that sends half a ClientHello and
    waits is closed after the handshake timeout, while another client is
    served meanwhile."""
    b = tls_broker(**{"cairn.ssl.handshake.timeout.ms": "1500"})
    s = kw.connect("127.0.0.1", b.ssl_port)
    s.sendall(kw.api_versions_request(1))
    assert kw.wait_closed(s, timeout=10 * SLOW)
    s.close()
    assert wait_log(b, "a client using PLAINTEXT on a TLS listener"), \
        b.log_tail()

    stall = kw.connect("127.0.0.1", b.ssl_port)
    # A TLS record header announcing a 512-byte handshake, then nothing.
    stall.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")
    t0 = time.monotonic()
    assert isinstance(tls_api_versions(b, certs), bytes)
    assert kw.wait_closed(stall, timeout=30 * SLOW)
    assert time.monotonic() - t0 >= 1.0
    stall.close()
    assert wait_log(b, "TLS handshake not done"), b.log_tail()
    assert isinstance(tls_api_versions(b, certs), bytes)
    # And plaintext on the other listener still works.
    c = kw.connect("127.0.0.1", b.port)
    c.sendall(kw.api_versions_request(2))
    assert kw.recv_frame(c)
    c.close()


def run_broker(tmp_path, *sets):
    """Runs the broker binary until it exits (a bad config); returns
    (rc, output).  A broker that starts is stopped and reported as 0."""
    argv = [str(CAIRN_BIN), "--set", "log.dirs=%s" % (tmp_path / "d"),
            "--set", "http.listener="]
    for s in sets:
        argv += ["--set", s]
    p = subprocess.Popen(argv, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    try:
        out, _ = p.communicate(timeout=10 * SLOW)
    except subprocess.TimeoutExpired:
        p.terminate()
        out, _ = p.communicate(timeout=10 * SLOW)
        return 0, out
    return p.returncode, out


@pytest.mark.parametrize("sets,words", [
    (["ssl.keystore.location=/nonexistent.pem"],
     ["ssl.keystore.location", "/nonexistent.pem", "No such file"]),
    (["ssl.keystore.location={c}/mismatch.pem"],
     ["ssl.keystore.location", "does not match"]),
    (["ssl.keystore.location={c}/server-enc.pem"],
     ["ssl.key.password", "encrypted", "not set"]),
    (["ssl.keystore.location={c}/server-enc.pem", "ssl.key.password=wrong"],
     ["ssl.key.password", "wrong password"]),
    (["ssl.keystore.location={c}/server.pem", "ssl.client.auth=required"],
     ["ssl.truststore.location", "not set"]),
    (["ssl.keystore.location={c}/server.pem",
      "ssl.enabled.protocols=TLSv1.1"],
     ["ssl.enabled.protocols", "TLSv1.1"]),
    (["ssl.keystore.location={c}/server.pem",
      "ssl.principal.mapping.rules=RULE:x"],
     ["ssl.principal.mapping.rules", "missing '/'"]),
    ([], ["ssl.keystore.location", "not set"]),
])
def test_tls_config_errors_name_the_key(tmp_path, certs, sets, words):
    port = free_port()
    rc, out = run_broker(tmp_path, "listeners=SSL://127.0.0.1:%d" % port,
                         *[s.format(c=certs) for s in sets])
    assert rc not in (0, None), out
    for w in words:
        assert w in out, (w, out)


def test_listener_config_errors(tmp_path):
    p1, p2 = free_port(), free_port()
    rc, out = run_broker(tmp_path, "listeners=CLIENT://127.0.0.1:%d" % p1)
    assert rc != 0 and "listener.security.protocol.map" in out and \
        "CLIENT is not mapped" in out, out
    rc, out = run_broker(tmp_path, "listeners=PLAINTEXT://127.0.0.1:%d,"
                         "SSL://127.0.0.1:%d" % (p1, p1))
    assert rc != 0 and "listeners" in out and "port %d" % p1 in out, out


@pytest.mark.skipif(SANITIZED, reason="one more broker: release build only")
def test_custom_names_encrypted_key_and_pkcs12(tmp_path, certs):
    """A custom listener name mapped to SSL, an encrypted PEM key with its
    password given by listener-prefixed keys (a plain ssl.keystore.location
    naming a missing file shows the prefixed one wins), then a PKCS12
    keystore: both serve TLS."""
    for i, extra in enumerate([
            ["ssl.keystore.location=/nonexistent.pem",
             "listener.name.client.ssl.keystore.location=%s"
             % (certs / "server-enc.pem"),
             "listener.name.client.ssl.key.password=secret"],
            ["ssl.keystore.type=PKCS12",
             "ssl.keystore.location=%s" % (certs / "server.p12"),
             "ssl.keystore.password=secret"]]):
        b = Broker(tmp_path / ("b%d" % i), {})
        b.ssl_port = free_port()
        b.sets = {"listeners": "INTERNAL://127.0.0.1:%d,CLIENT://127.0.0.1:%d"
                               % (b.port, b.ssl_port),
                  "listener.security.protocol.map":
                      "INTERNAL:PLAINTEXT,CLIENT:SSL",
                  "inter.broker.listener.name": "INTERNAL"}
        for e in extra:
            k, v = e.split("=", 1)
            b.sets[k] = v
        b.start()
        try:
            deadline = time.monotonic() + 10 * SLOW
            while not port_open(b.ssl_port):
                assert time.monotonic() < deadline, b.log_tail()
                time.sleep(0.05)
            assert isinstance(tls_api_versions(b, certs), bytes)
        finally:
            assert b.stop() == 0


@pytest.mark.skipif(SANITIZED, reason="client matrix: release build only")
def test_kafkajs_over_ssl_with_client_certificate(tls_broker, certs):
    """The second client library's TLS stack (Node's) with mTLS."""
    from test_read_committed import JS_DIR, npm_ready
    why = npm_ready()
    if why:
        pytest.skip(why)
    b = tls_broker(**{"ssl.client.auth": "required",
                      "group.initial.rebalance.delay.ms": "0"})
    topic = "js-tls-" + uuid.uuid4().hex[:8]
    b.create_topic(topic)
    res = subprocess.run(
        ["node", str(JS_DIR / "tls_roundtrip.js"), b.ssl_bootstrap, topic,
         str(certs / "ca.pem"), str(certs / "alice.crt"),
         str(certs / "alice.key")],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, timeout=120 * SLOW,
        cwd=str(JS_DIR))
    assert res.returncode == 0, res.stderr[-3000:]
    import json
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["values"] == ["js%d" % i for i in range(20)], out


@pytest.mark.skipif(SANITIZED, reason="Java client: release build only")
def test_java_client_over_ssl_with_pem_keystore(tls_broker, certs,
                                                tmp_path):
    """Kafka's own producer (kafka-producer-perf-test, acks=all) over SSL
    with ssl.client.auth=required, its keystore and truststore PEM files
    as Kafka reads them."""
    import re
    import java_harness
    cp = java_harness.classpath()
    b = tls_broker(**{"ssl.client.auth": "required"})
    topic = "java-tls-" + uuid.uuid4().hex[:8]
    b.create_topic(topic)
    n = 5000
    props = tmp_path / "client.properties"
    props.write_text("\n".join([
        "security.protocol=SSL",
        "ssl.truststore.type=PEM",
        "ssl.truststore.location=%s" % (certs / "ca.pem"),
        "ssl.keystore.type=PEM",
        "ssl.keystore.location=%s" % (certs / "alice.pem"),
        "acks=all", ""]))
    err = tmp_path / "perf.stderr"
    res = java_harness.run_java(
        cp, "org.apache.kafka.tools.ProducerPerformance",
        ["--bootstrap-server", b.ssl_bootstrap, "--topic", topic,
         "--num-records", str(n), "--record-size", "100",
         "--throughput", "-1", "--producer.config", str(props)],
        120 * SLOW, err, jvm_args=java_harness.FAST_START)
    assert res.returncode == 0, (res.stdout[-2000:], err.read_text()[-3000:])
    m = re.search(r"^(\d+) records sent", res.stdout, re.M)
    assert m and int(m.group(1)) == n, res.stdout[-2000:]
    r = kcat("-b", b.bootstrap, "-C", "-t", topic, "-o", "beginning", "-e",
             "-q", "-f", "x\n")
    assert r.stdout.count("x\n") == n, r.stderr


def test_pipelined_requests_muted_and_resumed_over_tls(tls_broker, certs):
    """Back-pressure on a TLS connection: 2000 requests (several TLS
    records) sent at once with at most 2 in flight mute the connection
    with undecrypted bytes left in OpenSSL's buffer; resuming must decrypt
    them (no socket read will come), and every answer arrives, in order."""
    b = tls_broker(**{"cairn.connection.max.inflight.requests": "2"})
    raw = socket.create_connection(("127.0.0.1", b.ssl_port), timeout=5)
    s = client_ctx(certs).wrap_socket(raw, server_hostname="localhost")
    s.settimeout(20 * SLOW)
    n = 2000
    s.sendall(b"".join(kw.api_versions_request(i) for i in range(1, n + 1)))
    import struct
    for i in range(1, n + 1):
        body = kw.recv_frame(s)
        assert body is not None, "closed after %d answers" % (i - 1)
        assert struct.unpack_from(">i", body)[0] == i
    s.close()
