"""SASL_SSL with real clients, and one broker with every listener kind.

ONE broker for the module has five listeners: PLAINTEXT, SSL,
SASL_PLAINTEXT, SASL_SSL, and MTLS (a second SASL_SSL listener with
ssl.client.auth=required and a principal mapping rule no test certificate
matches).  Over SASL_SSL: librdkafka (kcat), confluent-kafka-python
(transactional produce, read_committed consume), kafkajs and the Java
client, each with SCRAM-SHA-512 and PLAIN.  On MTLS a client with a
certificate AND a SASL login is its SASL principal, as in Kafka
(DefaultKafkaPrincipalBuilder.build: a SaslAuthenticationContext gives
User:<SASL authorization id>, the certificate and
ssl.principal.mapping.rules are not consulted), shown with an ACL.
Metadata on each listener names that listener's port; a wrong password
over SASL_SSL fails cleanly and every listener keeps serving.

The authorizer is on with allow.everyone.if.no.acl.found=true, so only
the topic with ACLs is guarded.  Certificates: test_tls's module fixture
(tools/mkcerts.sh); SCRAM users: `cairn --add-scram`, as test_sasl.

The client matrix (JVM, kafkajs, the transactional clients, PLAIN over
kcat) runs on the release build; under ASan: Metadata per listener, the
wrong password, kcat over SCRAM-SHA-512 and the principal check.
"""

import json
import socket
import ssl
import subprocess
import time
import types
import uuid

import pytest

import kafka_wire as kw
import test_acl as ta
from conftest import SANITIZED, SLOW, Broker, free_port, port_open
from test_sasl import (SASL_AUTHENTICATION_FAILED, add_scram, fast_cli,
                       jaas_props, metadata_ok, scram_login)
# certs: test_tls's module fixture, made once more for this module.
from test_tls import certs, client_ctx, kcat, wait_log  # noqa: F401

release_only = pytest.mark.skipif(SANITIZED, reason="client matrix: "
                                  "release build only")

USERS = {"admin": "admin-secret", "alice": "alice-secret",
         "bob": "bob-secret"}
KINDS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL", "MTLS")
PROTO = {"PLAINTEXT": "PLAINTEXT", "SSL": "SSL",
         "SASL_PLAINTEXT": "SASL_PLAINTEXT", "SASL_SSL": "SASL_SSL",
         "MTLS": "SASL_SSL"}
# No test certificate's subject matches: were the rules applied on a
# SASL_SSL listener (Kafka does not), every certificate would be refused.
MTLS_RULES = "RULE:^CN=nobody,.*$/nobody/"


@pytest.fixture(scope="module")
def b(tmp_path_factory, certs):
    br = Broker(tmp_path_factory.mktemp("saslssl"), {})
    br.ports = {"PLAINTEXT": br.port}
    for k in KINDS[1:]:
        br.ports[k] = free_port()
    br.sets = {
        "listeners": ",".join("%s://127.0.0.1:%d" % (k, br.ports[k])
                              for k in KINDS),
        "listener.security.protocol.map": ",".join(
            "%s:%s" % (k, PROTO[k]) for k in KINDS),
        "inter.broker.listener.name": "PLAINTEXT",
        "ssl.keystore.location": str(certs / "server.pem"),
        "ssl.truststore.location": str(certs / "ca.pem"),
        "listener.name.mtls.ssl.client.auth": "required",
        "listener.name.mtls.ssl.principal.mapping.rules": MTLS_RULES,
        "sasl.enabled.mechanisms": "SCRAM-SHA-512,SCRAM-SHA-256,PLAIN",
        "authorizer.class.name": ta.STANDARD,
        "allow.everyone.if.no.acl.found": "true",
        "group.initial.rebalance.delay.ms": "0",
    }
    r = add_scram(br.data_dir, *["%s=[name=%s,password=%s]" % (m, u, p)
                                 for u, p in USERS.items()
                                 for m in ("SCRAM-SHA-512", "SCRAM-SHA-256")])
    assert r.returncode == 0, r.stderr
    br.start()
    deadline = time.monotonic() + 10 * SLOW
    while not all(port_open(p) for p in br.ports.values()):
        assert time.monotonic() < deadline, br.log_tail()
        time.sleep(0.05)
    br.sasl_ssl = "127.0.0.1:%d" % br.ports["SASL_SSL"]
    yield br
    br._check_alive()
    assert br.unexpected_exit is None, br.unexpected_exit
    assert br.stop() == 0, br.log_tail()


def rdkafka_props(b, certs, kind, mech="SCRAM-SHA-512", user="alice",
                  pw=None, who=None):
    """librdkafka properties for listener kind (who: a client certificate
    from mkcerts)."""
    conf = {"bootstrap.servers": "127.0.0.1:%d" % b.ports[kind],
            "security.protocol": PROTO[kind].lower()}
    if "SSL" in PROTO[kind]:
        conf["ssl.ca.location"] = str(certs / "ca.pem")
    if "SASL" in PROTO[kind]:
        conf.update({"sasl.mechanism": mech, "sasl.username": user,
                     "sasl.password": USERS[user] if pw is None else pw})
    if who:
        conf["ssl.certificate.location"] = str(certs / ("%s.crt" % who))
        conf["ssl.key.location"] = str(certs / ("%s.key" % who))
    return conf


def kcat_x(conf):
    """kcat's -b/-X arguments for a librdkafka conf."""
    args = ["-b", conf.pop("bootstrap.servers")]
    for k, v in conf.items():
        args += ["-X", "%s=%s" % ("sasl.mechanisms" if k == "sasl.mechanism"
                                  else k, v)]
    return args


def kcat_metadata_ports(b, certs, kind):
    r = kcat(*kcat_x(rdkafka_props(b, certs, kind, who="alice")), "-L",
             "-J")
    assert r.returncode == 0, (kind, r.stderr)
    return [x["name"] for x in json.loads(r.stdout)["brokers"]]


def check_every_listener(b, certs):
    """Metadata through each listener names that listener's port only
    (Kafka answers with the listener a request came in on)."""
    for kind in KINDS:
        assert kcat_metadata_ports(b, certs, kind) == \
            ["127.0.0.1:%d" % b.ports[kind]], (kind, b.log_tail())


def test_metadata_on_each_listener_names_its_own_port(b, certs):
    check_every_listener(b, certs)


def tls_connect(b, certs, kind, who=None):
    raw = socket.create_connection(("127.0.0.1", b.ports[kind]),
                                   timeout=10 * SLOW)
    s = client_ctx(certs, who).wrap_socket(raw, server_hostname="localhost")
    s.settimeout(10 * SLOW)
    return s


def test_wrong_password_over_sasl_ssl_others_keep_working(b, certs):
    """A SCRAM login with a wrong password over TLS: SASL_AUTHENTICATION_
    FAILED with a message, then the connection closes; kcat with a wrong
    PLAIN password exits with an authentication error instead of hanging;
    the audit line has no password; every listener still serves and a
    right password on the same listener logs in."""
    s = tls_connect(b, certs, "SASL_SSL")
    a = scram_login(s, "SCRAM-SHA-512", "alice", "Wr0ng-Pw-5811")
    assert a is not None and a[0] == SASL_AUTHENTICATION_FAILED and a[1], a
    assert kw.wait_closed(s, 10 * SLOW)
    s.close()
    r = kcat(*kcat_x(rdkafka_props(b, certs, "SASL_SSL", "PLAIN", "bob",
                                   "Wr0ng-Pw-5812")), "-L", "-m", "1",
             timeout=60)
    assert r.returncode != 0, r.stdout
    assert "Authentication" in r.stderr or "SASL" in r.stderr, r.stderr
    assert wait_log(b, "authentication failed: principal=User:bob "
                    "mechanism=PLAIN"), b.log_tail()
    log = open(b.log_path).read()
    assert "authentication failed: principal=User:alice " \
        "mechanism=SCRAM-SHA-512" in log
    assert "Wr0ng-Pw" not in log
    s = tls_connect(b, certs, "SASL_SSL")
    assert scram_login(s, "SCRAM-SHA-512", "alice", USERS["alice"])[0] == 0
    assert metadata_ok(s)
    s.close()
    check_every_listener(b, certs)
    assert b.alive()


@pytest.mark.parametrize("mech", [
    "SCRAM-SHA-512", pytest.param("PLAIN", marks=release_only)])
def test_kcat_over_sasl_ssl(b, certs, mech):
    """librdkafka's TLS and SASL together: produce (acks=all, a record
    larger than one TLS record) and consume back."""
    topic = "kc-" + mech.lower() + "-" + uuid.uuid4().hex[:6]
    b.create_topic(topic)
    x = kcat_x(rdkafka_props(b, certs, "SASL_SSL", mech))
    lines = ["m%d" % i for i in range(20)] + ["x" * 70000]
    r = kcat(*x, "-P", "-t", topic, "-X", "acks=all",
             input="\n".join(lines) + "\n")
    assert r.returncode == 0, r.stderr
    r = kcat(*x, "-C", "-t", topic, "-o", "beginning", "-e", "-q")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:-1] == lines


@release_only
@pytest.mark.parametrize("mech", ["SCRAM-SHA-512", "PLAIN"])
def test_confluent_transactions_over_sasl_ssl(b, certs, mech):
    """confluent-kafka-python: an aborted then a committed transaction;
    a read_committed consumer sees only the committed records."""
    from confluent_kafka import Consumer, Producer
    topic = "tx-" + mech.lower() + "-" + uuid.uuid4().hex[:6]
    b.create_topic(topic)
    conf = rdkafka_props(b, certs, "SASL_SSL", mech)
    p = Producer(dict(conf, **{"transactional.id": "t-" + topic}))
    p.init_transactions(30 * SLOW)
    p.begin_transaction()
    p.produce(topic, b"aborted")
    p.abort_transaction(30 * SLOW)
    p.begin_transaction()
    for i in range(5):
        p.produce(topic, b"c%d" % i)
    p.commit_transaction(30 * SLOW)
    c = Consumer(dict(conf, **{"group.id": "g-" + topic,
                               "auto.offset.reset": "earliest",
                               "isolation.level": "read_committed"}))
    c.subscribe([topic])
    got = []
    deadline = time.monotonic() + 30 * SLOW
    while len(got) < 5 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append(m.value())
    c.close()
    assert got == [b"c%d" % i for i in range(5)]


@release_only
def test_kafkajs_over_sasl_ssl(b, certs):
    """kafkajs (Node's TLS) over SCRAM-SHA-512 and PLAIN, and a wrong
    password is a SASL error."""
    from test_read_committed import JS_DIR, npm_ready
    why = npm_ready()
    if why:
        pytest.fail(why)
    # kafkajs creates its topics by producing to them.
    for i in range(3):
        b.create_topic("js-sasl-%d" % i)
    specs = ["SCRAM-SHA-512:alice:alice-secret", "PLAIN:bob:bob-secret",
             "SCRAM-SHA-512:alice:wrong"]
    res = subprocess.run(["node", str(JS_DIR / "sasl.js"), "--ca",
                          str(certs / "ca.pem"), b.sasl_ssl] + specs,
                         capture_output=True, text=True, timeout=120 * SLOW,
                         cwd=str(JS_DIR))
    lines = [json.loads(x) for x in res.stdout.splitlines()
             if x.startswith("{")]
    assert len(lines) == 3, (res.stdout, res.stderr[-2000:])
    for ev in lines[:2]:
        assert ev["event"] == "ok" and ev["values"] == ["v0", "v1", "v2"], \
            (ev, res.stderr[-2000:])
    assert lines[2]["event"] == "error", lines[2]
    assert "SASL" in lines[2]["type"] or "SASL" in lines[2]["message"], \
        lines[2]


@release_only
def test_java_client_over_sasl_ssl(b, certs, tmp_path):
    """Kafka's own clients (through its perf tools): a transactional
    producer over SCRAM-SHA-512, a read_committed consumer over PLAIN,
    the truststore a PEM file as Kafka reads it."""
    import java_harness
    from test_kafka_cli import CONSUMER_PERF, PERF_SUMMARY, PRODUCER_PERF
    topic = "java-" + uuid.uuid4().hex[:6]
    b.create_topic(topic)
    cp = java_harness.classpath()
    target = types.SimpleNamespace(bootstrap=b.sasl_ssl)
    tls = "ssl.truststore.type=PEM\nssl.truststore.location=%s\n" \
        % (certs / "ca.pem")
    n = 500
    out = fast_cli(cp, tmp_path, target, PRODUCER_PERF).ok(
        "--topic", topic, "--num-records", str(n), "--record-size", "50",
        "--throughput", "-1", "--transactional-id", "jt-" + topic,
        "--transaction-duration-ms", "200", "--command-config",
        jaas_props(tmp_path / "p.properties", "SCRAM-SHA-512", "admin",
                   USERS["admin"], "SASL_SSL", tls))
    assert [int(x) for x in PERF_SUMMARY.findall(out)] == [n], out
    out = fast_cli(cp, tmp_path, target, CONSUMER_PERF).ok(
        "--topic", topic, "--num-records", str(n), "--group", "jg-" + topic,
        "--timeout", str(60000 * SLOW), "--command-property",
        "isolation.level=read_committed", "--command-config",
        jaas_props(tmp_path / "c.properties", "PLAIN", "alice",
                   USERS["alice"], "SASL_SSL", tls))
    lines = [x for x in out.splitlines() if x.strip()]
    row = dict(zip([x.strip() for x in lines[-2].split(",")],
                   [x.strip() for x in lines[-1].split(",")]))
    assert row["data.consumed.in.nMsg"] == str(n), out


def test_sasl_principal_wins_over_client_certificate(b, certs):
    """On MTLS (SASL_SSL, ssl.client.auth=required) the certificate must
    be there, but the principal is the SASL login's: with WRITE allowed
    to User:alice and to bob's certificate principal, bob's certificate
    with alice's login writes; bob's certificate with bob's login is
    TOPIC_AUTHORIZATION_FAILED.  The mapping rules match no certificate:
    they are not applied on SASL_SSL (Kafka's rule), so nothing is
    refused for them."""
    from confluent_kafka import KafkaError, Producer
    topic = "mtls-" + uuid.uuid4().hex[:6]
    b.create_topic(topic)
    admin = kw.Client(b.port)
    res = ta.parse_create_acls(admin.call(ta.create_acls_request, [
        (ta.TOPIC, topic, ta.LITERAL, who, "*", ta.WRITE, ta.ALLOW)
        for who in ("User:alice", "User:CN=bob,OU=eng,O=acme")]))
    admin.close()
    assert all(e == 0 for e, _ in res), res

    # Without a certificate the TLS handshake is refused.
    try:
        s = tls_connect(b, certs, "MTLS")
        s.sendall(kw.api_versions_request(1))
        refused = kw.recv_frame(s) is None
    except (ssl.SSLError, OSError):
        refused = True
    assert refused

    def produce(user):
        errs = []
        p = Producer(dict(rdkafka_props(b, certs, "MTLS", "SCRAM-SHA-512",
                                        user, who="bob"),
                          **{"message.timeout.ms": 10000 * SLOW}))
        p.produce(topic, value=b"from " + user.encode(),
                  on_delivery=lambda e, m: errs.append(e))
        p.flush(30 * SLOW)
        return errs

    assert produce("alice") == [None], b.log_tail()
    errs = produce("bob")
    assert len(errs) == 1 and errs[0] is not None, errs
    assert errs[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, errs
    assert wait_log(b, "DENIED principal=User:bob "), b.log_tail()
