"""cairnctl on secured listeners (issue #18): --command-config FILE with
Kafka's client property names, over SSL (mutual TLS), SASL_SSL with
SCRAM-SHA-512 and SASL_PLAINTEXT with PLAIN (and SCRAM-SHA-256).

The broker is ONE reference Apache Kafka 4.4.0 (kafka_ref.py) with three
extra listeners, started once for the module: its server certificate
names only "localhost" (so the host name check can be seen failing on
127.0.0.1), its SSL listener requires a client certificate, SCRAM users
come from `kafka-storage format --add-scram`, PLAIN users from the JAAS
line.  Test data (a topic, a committed transaction, a group with
offsets) goes in through the PLAINTEXT listener with confluent_kafka.

Each check: `topics list`, `topics describe`, `txn list` and `groups list`
(the last two open a connection per broker, not only the bootstrap one)
see the data on each protocol; `cairnctl verify` (librdkafka clients)
passes a short run over SASL_SSL; a wrong password, a wrong CA, the wrong
host name, a missing client certificate each give exit 1 and a message
saying so, not a hang; a bad file gives exit 2 naming the key.

Target "cairn": the same checks against Cairn's own SSL, SASL_SSL and
SASL_PLAINTEXT listeners, so cairnctl and the broker are proven against
each other as well as against Kafka.  `make test` runs the Cairn target;
`make soak` (CAIRN_SOAK=1) runs both, and CAIRN_SECURED_TARGETS=kafka or
=cairn picks one.

Release only (one JVM start; ~31 s for the Kafka target on a 2-core
machine, of which ~17 s Kafka's start and ~8 s the verify run, ~12 s for
Cairn's), except
test_bad_command_config, which needs no broker and runs under ASan too.
"""

import json
import os
import subprocess

import pytest

from conftest import SANITIZED, SLOW, fails, needs_cairn, ok, run, tool

pytestmark = needs_cairn

TIMEOUT = 60 * SLOW
TOPIC = "sec-topic"
GROUP = "sec-group"
TXN_ID = "sec-txn"
USER, PASSWORD = "alice", "alice-secret"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
TARGETS = os.environ.get(
    "CAIRN_SECURED_TARGETS",
    "kafka,cairn" if os.environ.get("CAIRN_SOAK") else "cairn").split(",")


def openssl(*args, cwd):
    subprocess.run(["openssl"] + list(args), cwd=cwd, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                   timeout=60)


def make_certs(d):
    """A test CA, a server certificate for DNS:localhost only, a client
    certificate, and an unrelated CA; keystores as Kafka's PEM type wants
    them (PKCS#8 key, then the certificate chain)."""
    d.mkdir(parents=True, exist_ok=True)
    for ca in ("ca", "other-ca"):
        openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
                ca + ".key", "-out", ca + ".pem", "-days", "2", "-subj",
                "/CN=cairn test " + ca, cwd=d)
    for name, san in (("server", "subjectAltName=DNS:localhost"),
                      ("client", "extendedKeyUsage=clientAuth")):
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout",
                name + ".key", "-out", name + ".csr", "-subj",
                "/CN=" + ("localhost" if name == "server" else USER), cwd=d)
        (d / (name + ".ext")).write_text(san + "\n")
        openssl("x509", "-req", "-in", name + ".csr", "-CA", "ca.pem",
                "-CAkey", "ca.key", "-CAcreateserial", "-out",
                name + ".crt", "-days", "2", "-extfile", name + ".ext",
                cwd=d)
        (d / (name + "-keystore.pem")).write_text(
            (d / (name + ".key")).read_text()
            + (d / (name + ".crt")).read_text())
    # The client key again, encrypted (ssl.key.password "kp").
    openssl("pkcs8", "-topk8", "-v2", "aes-256-cbc", "-in", "client.key",
            "-out", "client-enc.key", "-passout", "pass:kp", cwd=d)
    (d / "client-enc-keystore.pem").write_text(
        (d / "client-enc.key").read_text() + (d / "client.crt").read_text())
    return d


class Target:
    """A broker with secured listeners: ports by protocol, the host name
    its certificate carries, and a plaintext address for setting up."""
    host = "localhost"
    plain = None
    ports = {}
    certs = None


def kafka_target(tmp_path_factory):
    import java_harness
    from kafka_ref import RefKafka
    certs = make_certs(tmp_path_factory.mktemp("certs"))
    jaas_plain = '%s required user_%s="%s";' % (PLAIN, USER, PASSWORD)
    props = {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": certs / "server-keystore.pem",
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": certs / "ca.pem",
        "listener.name.ssl.ssl.client.auth": "required",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512,SCRAM-SHA-256,PLAIN",
    }
    for lst in ("sasl_ssl", "sasl_plaintext"):
        for mech in ("scram-sha-512", "scram-sha-256"):
            props["listener.name.%s.%s.sasl.jaas.config" % (lst, mech)] = (
                SCRAM + " required;")
        props["listener.name.%s.plain.sasl.jaas.config" % lst] = jaas_plain
    scram = []
    for mech in ("SCRAM-SHA-512", "SCRAM-SHA-256"):
        scram += ["--add-scram",
                  "%s=[name=%s,password=%s]" % (mech, USER, PASSWORD)]
    ref = RefKafka(tmp_path_factory.mktemp("kafka-secured"),
                   java_harness.classpath(),
                   listeners={"SSL": "SSL", "SASL_SSL": "SASL_SSL",
                              "SASL_PLAINTEXT": "SASL_PLAINTEXT"},
                   server_props=props, format_args=scram,
                   advertised_host="localhost")
    ref.start()
    t = Target()
    t.plain = "127.0.0.1:%d" % ref.port
    t.ports = dict(ref.listener_ports)
    t.certs = certs
    t.stop = ref.kill
    print("secured reference Kafka ready after %.1fs" % ref.start_seconds)
    return t


def cairn_target(tmp_path_factory):
    """The same listeners on Cairn (Kafka's key names; PLAIN checks the
    SCRAM credentials)."""
    import time
    from conftest import CAIRN_BIN, Broker, free_port, port_open
    certs = make_certs(tmp_path_factory.mktemp("certs"))
    b = Broker(tmp_path_factory.mktemp("cairn-secured"))
    ports = {n: free_port() for n in ("SSL", "SASL_SSL", "SASL_PLAINTEXT")}
    b.sets = {
        "listeners": ",".join(["PLAINTEXT://127.0.0.1:%d" % b.port] + [
            "%s://127.0.0.1:%d" % (n, p) for n, p in ports.items()]),
        "advertised.listeners": ",".join(
            ["PLAINTEXT://127.0.0.1:%d" % b.port] + [
                "%s://localhost:%d" % (n, p) for n, p in ports.items()]),
        "ssl.keystore.location": str(certs / "server-keystore.pem"),
        "ssl.truststore.location": str(certs / "ca.pem"),
        "listener.name.ssl.ssl.client.auth": "required",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512,SCRAM-SHA-256,PLAIN",
    }
    argv = [str(CAIRN_BIN), "--set", "log.dirs=%s" % b.data_dir]
    for mech in ("SCRAM-SHA-512", "SCRAM-SHA-256"):
        argv += ["--add-scram",
                 "%s=[name=%s,password=%s]" % (mech, USER, PASSWORD)]
    res = subprocess.run(argv, capture_output=True, text=True,
                         timeout=TIMEOUT)
    assert res.returncode == 0, res.stderr
    b.start()
    deadline = time.monotonic() + TIMEOUT
    while not all(port_open(p) for p in ports.values()):
        assert time.monotonic() < deadline, b.log_tail()
        time.sleep(0.05)
    t = Target()
    t.plain = b.bootstrap
    t.ports = ports
    t.certs = certs
    t.stop = b.stop
    return t


def seed(bootstrap):
    """A topic, a committed transaction and a group with an offset."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, 2, 1)])[TOPIC].result(TIMEOUT)
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": TXN_ID})
    p.init_transactions(TIMEOUT)
    p.begin_transaction()
    p.produce(TOPIC, b"v", partition=0)
    p.commit_transaction(TIMEOUT)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP,
                  "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(TOPIC, 0, 1)], asynchronous=False)
    c.close()


@pytest.fixture(scope="module", params=TARGETS)
def target(request, tmp_path_factory):
    if SANITIZED:
        pytest.skip("reference Kafka runs with the release build only")
    t = (kafka_target if request.param == "kafka" else cairn_target)(
        tmp_path_factory)
    try:
        seed(t.plain)
        yield t
    finally:
        t.stop()


def config(tmp_path, name, lines):
    path = tmp_path / (name + ".properties")
    path.write_text("".join(line + "\n" for line in lines))
    return str(path)


def jaas(module, user=USER, password=PASSWORD):
    return 'sasl.jaas.config=%s required username="%s" password="%s";' % (
        module, user, password)


def client_config(t, tmp_path, proto, mech=None, password=PASSWORD,
                  ca="ca.pem", keystore=True):
    lines = ["security.protocol=" + proto]
    if "SSL" in proto.split("_"):
        lines += ["ssl.truststore.type=PEM",
                  "ssl.truststore.location=%s" % (t.certs / ca)]
    if proto == "SSL" and keystore:
        lines += ["ssl.keystore.type=PEM",
                  "ssl.keystore.location=%s" % (t.certs /
                                                "client-keystore.pem")]
    if mech:
        lines += ["sasl.mechanism=" + mech,
                  jaas(PLAIN if mech == "PLAIN" else SCRAM,
                       password=password)]
    return config(tmp_path, "client", lines)


def ctl(t, proto, cfg, *args, host=None):
    server = "%s:%d" % (host or t.host, t.ports[proto])
    return run([tool("cairnctl"), "--bootstrap-server", server,
                "--command-config", cfg, "--timeout", str(20000 * SLOW)]
               + list(args), timeout=TIMEOUT)


PROTOCOLS = [("SSL", None), ("SASL_SSL", "SCRAM-SHA-512"),
             ("SASL_PLAINTEXT", "PLAIN")]
COMMANDS = [(["topics", "list"], TOPIC),
            (["topics", "describe", "--topic", TOPIC], TOPIC),
            (["txn", "list"], TXN_ID),
            (["groups", "list"], GROUP)]


@pytest.mark.parametrize("proto,mech", PROTOCOLS,
                         ids=[p for p, _ in PROTOCOLS])
def test_commands_on_secured_listener(target, tmp_path, proto, mech):
    cfg = client_config(target, tmp_path, proto, mech)
    for args, want in COMMANDS:
        out = ok(ctl(target, proto, cfg, *args))
        assert want in out, "%s: %r not in\n%s" % (args, want, out)


def test_scram_sha256_and_librdkafka_names(target, tmp_path):
    cfg = config(tmp_path, "rdk", [
        "security.protocol=SASL_PLAINTEXT", "sasl.mechanisms=SCRAM-SHA-256",
        "sasl.username=" + USER, "sasl.password=" + PASSWORD])
    assert TXN_ID in ok(ctl(target, "SASL_PLAINTEXT", cfg, "txn", "list"))


@pytest.mark.parametrize("proto,mech", [("SASL_SSL", "SCRAM-SHA-512"),
                                        ("SASL_PLAINTEXT", "PLAIN")])
def test_wrong_password_fails_clearly(target, tmp_path, proto, mech):
    cfg = client_config(target, tmp_path, proto, mech, password="wrong")
    fails(ctl(target, proto, cfg, "topics", "list"), 1,
          "SASL authentication failed: SASL_AUTHENTICATION_FAILED")


def test_wrong_ca_fails_verify(target, tmp_path):
    cfg = client_config(target, tmp_path, "SASL_SSL", "SCRAM-SHA-512",
                        ca="other-ca.pem")
    fails(ctl(target, "SASL_SSL", cfg, "topics", "list"), 1,
          "TLS handshake failed: certificate verify failed")


def test_host_name_checked_unless_disabled(target, tmp_path):
    cfg = client_config(target, tmp_path, "SSL")
    fails(ctl(target, "SSL", cfg, "topics", "list", host="127.0.0.1"), 1,
          "certificate verify failed: IP address mismatch")
    with open(cfg, "a") as f:
        f.write("ssl.endpoint.identification.algorithm=\n")
    # txn list also dials the broker by its advertised name (localhost),
    # a second connection that must be secured the same way.
    assert TXN_ID in ok(ctl(target, "SSL", cfg, "txn", "list",
                            host="127.0.0.1"))


def test_encrypted_client_key(target, tmp_path):
    base = ["security.protocol=SSL",
            "ssl.truststore.location=%s" % (target.certs / "ca.pem"),
            "ssl.keystore.location=%s" % (target.certs /
                                          "client-enc-keystore.pem")]
    cfg = config(tmp_path, "enc", base + ["ssl.key.password=kp"])
    assert TOPIC in ok(ctl(target, "SSL", cfg, "topics", "list"))
    cfg = config(tmp_path, "badpw", base + ["ssl.key.password=nope"])
    fails(ctl(target, "SSL", cfg, "topics", "list"), 2,
          "cannot load the private key (wrong ssl.key.password?)")


def test_mtls_needs_client_certificate(target, tmp_path):
    cfg = client_config(target, tmp_path, "SSL", keystore=False)
    fails(ctl(target, "SSL", cfg, "topics", "list"), 1, "TLS error",
          "the broker wants a client certificate")


def test_verify_over_sasl_ssl(target, tmp_path):
    """`cairnctl verify` drives librdkafka clients, which get the same
    file in librdkafka's names.  PLAIN: Debian 12's librdkafka 2.0.2 has
    the SCRAM nonce bug Kafka 4 refuses (fixed in 2.6.1), which verify
    warns about."""
    cfg = client_config(target, tmp_path, "SASL_SSL", "PLAIN")
    res = run([tool("cairnctl"), "--bootstrap-server",
               "localhost:%d" % target.ports["SASL_SSL"], "--json", "verify",
               "--duration", "2", "--writers", "1", "--rpw", "1",
               "--partitions", "1", "--command-config", cfg, "--dir",
               str(tmp_path / "verify")], timeout=TIMEOUT * 3)
    rep = json.loads(ok(res))
    assert rep["ok"] and rep["operations"]["txn_committed"] > 0, rep


def test_wrong_security_protocol_says_so(target, tmp_path):
    def plain(port):
        return run([tool("cairnctl"), "--bootstrap-server",
                    "localhost:%d" % port, "topics", "list"],
                   timeout=TIMEOUT)
    fails(plain(target.ports["SSL"]), 1,
          "a TLS listener: set security.protocol")
    fails(plain(target.ports["SASL_PLAINTEXT"]), 1,
          "a SASL listener does that to a client that does not log in")
    cfg = client_config(target, tmp_path, "SASL_PLAINTEXT", "PLAIN")
    fails(run([tool("cairnctl"), "--bootstrap-server", target.plain,
               "--command-config", cfg, "topics", "list"], timeout=TIMEOUT),
          1, "the listener does not take SASL")


def test_bad_command_config(tmp_path):
    """No broker needed: the file is refused before any connection."""
    cfg = config(tmp_path, "typo", ["security.protocol=SSL",
                                    "ssl.trustore.location=/x"])
    fails(run([tool("cairnctl"), "--bootstrap-server", "127.0.0.1:1",
               "--command-config", cfg, "topics", "list"], timeout=TIMEOUT),
          2, "typo.properties:2: ssl.trustore.location: unknown client "
             "property")
    cfg = config(tmp_path, "nomech", ["security.protocol=SASL_SSL",
                                      jaas(SCRAM)])
    fails(run([tool("cairnctl"), "--command-config", cfg, "groups", "list"],
              timeout=TIMEOUT), 2, "sasl.mechanism is not set")
    fails(run([tool("cairnctl"), "--command-config", str(tmp_path / "none"),
               "topics", "list"], timeout=TIMEOUT), 2, "cannot read")
