"""SASL on a SASL_PLAINTEXT listener: SCRAM-SHA-256/512 and PLAIN with real
clients, and on the raw wire what no client sends (requests before
authentication, garbage SCRAM, the v0 bare-token form, re-authentication
and session expiry, KIP-368).

Credentials are bootstrapped with `cairn --add-scram` before the broker
starts, as an operator would.
"""

import base64
import hashlib
import hmac
import os
import re
import struct
import subprocess
import time
import uuid

import pytest

import kafka_wire as kw
from conftest import CAIRN_BIN, SANITIZED, SLOW, Broker

API_SASL_HANDSHAKE = 17
API_SASL_AUTHENTICATE = 36
UNSUPPORTED_SASL_MECHANISM = 33
ILLEGAL_SASL_STATE = 34
SASL_AUTHENTICATION_FAILED = 58

USERS = {"admin": "admin-secret", "alice": "alice-secret"}

# The client matrix runs on the release build; under ASan one client of
# each kind reaches the new C paths (the raw-wire tests reach the rest).
release_only = pytest.mark.skipif(SANITIZED, reason="client matrix: "
                                  "release build only")


def add_scram(data_dir, *specs):
    argv = [str(CAIRN_BIN), "--set", "log.dirs=%s" % data_dir]
    for s in specs:
        argv += ["--add-scram", s]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60)


@pytest.fixture
def sasl_broker(tmp_path):
    """Make SASL_PLAINTEXT brokers with admin and alice as SCRAM users."""
    made = []

    def make(users=USERS, **sets):
        b = Broker(tmp_path / ("b%d" % len(made)), sets)
        b.sets.setdefault("sasl.enabled.mechanisms",
                          "SCRAM-SHA-512,SCRAM-SHA-256,PLAIN")
        # Consumers join at once (the default waits 3 s for more members).
        b.sets.setdefault("group.initial.rebalance.delay.ms", "0")
        b.sets["listeners"] = "SASL_PLAINTEXT://127.0.0.1:%d" % b.port
        specs = []
        for u, p in users.items():
            for m in ("SCRAM-SHA-512", "SCRAM-SHA-256"):
                specs.append("%s=[name=%s,password=%s]" % (m, u, p))
        if specs:
            r = add_scram(b.data_dir, *specs)
            assert r.returncode == 0, r.stderr
        made.append(b)
        b.start()
        return b

    yield make
    for b in made:
        b._check_alive()
        assert b.unexpected_exit is None, b.unexpected_exit
        assert b.stop() in (None, 0), b.log_tail()


def client_conf(b, mech, user="alice", pw=None):
    return {"bootstrap.servers": b.bootstrap,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mech, "sasl.username": user,
            "sasl.password": USERS.get(user, "x") if pw is None else pw}


# ---- a raw-wire SASL client ---------------------------------------------

def handshake(sock, mech, version=1, corr=1):
    sock.sendall(kw.request(API_SASL_HANDSHAKE, version, corr,
                            kw.string(mech)))
    body = kw.recv_frame(sock)
    if body is None:
        return None, []
    r = kw.Reader(body)
    assert r.i32() == corr
    err = r.i16()
    mechs = [r.string() for _ in range(r.i32())]
    return err, mechs


def authenticate(sock, token, version=1, corr=2):
    """SaslAuthenticate; (error, message, bytes, lifetime) or None."""
    flexible = version >= 2
    body = (kw.uvarint(len(token) + 1) + token + kw.uvarint(0)) if flexible \
        else struct.pack(">i", len(token)) + token
    sock.sendall(kw.request(API_SASL_AUTHENTICATE, version, corr, body,
                            flexible=flexible))
    resp = kw.recv_frame(sock)
    if resp is None:
        return None
    r = kw.Reader(resp)
    assert r.i32() == corr
    if flexible:
        r.skip_tags()
    err = r.i16()
    msg = r.compact_string() if flexible else r.string()
    n = r.uvarint() - 1 if flexible else r.i32()
    data = resp[r.pos:r.pos + max(n, 0)]
    r.pos += max(n, 0)
    life = r.i64() if version >= 1 else None
    return err, msg, data, life


def _h(mech):
    return hashlib.sha512 if mech.endswith("512") else hashlib.sha256


class Scram:
    """The client side of RFC 5802, enough to drive the broker."""

    def __init__(self, mech, user, pw):
        self.mech, self.user, self.pw = mech, user, pw
        self.nonce = base64.b64encode(os.urandom(18)).decode()
        self.bare = "n=%s,r=%s" % (user, self.nonce)

    def first(self):
        return ("n,," + self.bare).encode()

    def final(self, server_first):
        sf = server_first.decode()
        attrs = dict(kv.split("=", 1) for kv in sf.split(","))
        h = _h(self.mech)
        salted = hashlib.pbkdf2_hmac(h().name, self.pw.encode(),
                                     base64.b64decode(attrs["s"]),
                                     int(attrs["i"]))
        ck = hmac.new(salted, b"Client Key", h).digest()
        sk = h(ck).digest()
        without = "c=biws,r=%s" % attrs["r"]
        auth = ",".join([self.bare, sf, without]).encode()
        sig = hmac.new(sk, auth, h).digest()
        proof = bytes(a ^ b for a, b in zip(ck, sig))
        server_key = hmac.new(salted, b"Server Key", h).digest()
        self.expect = base64.b64encode(
            hmac.new(server_key, auth, h).digest()).decode()
        return (without + ",p=" + base64.b64encode(proof).decode()).encode()


def scram_login(sock, mech="SCRAM-SHA-512", user="alice", pw=None,
                version=1):
    """Handshake v1 + two SaslAuthenticate; the last answer."""
    err, _ = handshake(sock, mech)
    assert err == 0
    c = Scram(mech, user, USERS.get(user, "x") if pw is None else pw)
    a = authenticate(sock, c.first(), version, corr=2)
    assert a is not None and a[0] == 0, a
    a = authenticate(sock, c.final(a[2]), version, corr=3)
    if a is not None and a[0] == 0:
        assert a[2].decode() == "v=" + c.expect
    return a


def metadata_ok(sock, corr=9):
    sock.sendall(kw.metadata_request_v1(corr))
    body = kw.recv_frame(sock)
    return body is not None and struct.unpack(">i", body[:4])[0] == corr


# ---- real clients ---------------------------------------------------------

@pytest.mark.parametrize("mech", [
    "SCRAM-SHA-512",
    pytest.param("SCRAM-SHA-256", marks=release_only),
    pytest.param("PLAIN", marks=release_only)])
def test_client_produce_consume(sasl_broker, mech):
    """librdkafka (confluent_kafka) produces and consumes over each
    mechanism."""
    from confluent_kafka import Consumer, Producer
    b = sasl_broker()
    topic = "t-" + mech.lower()
    p = Producer(dict(client_conf(b, mech), **{"acks": "all"}))
    for i in range(5):
        p.produce(topic, b"v%d" % i)
    assert p.flush(30 * SLOW) == 0
    c = Consumer(dict(client_conf(b, mech), **{
        "group.id": "g", "auto.offset.reset": "earliest"}))
    c.subscribe([topic])
    got = []
    deadline = time.monotonic() + 30 * SLOW
    while len(got) < 5 and time.monotonic() < deadline:
        m = c.poll(1.0)
        if m is not None and not m.error():
            got.append(m.value())
    c.close()
    assert got == [b"v%d" % i for i in range(5)]
    assert "authentication failed" not in open(b.log_path).read()


@release_only
def test_client_transactions_read_committed(sasl_broker):
    """A transactional producer over SCRAM-SHA-512, read_committed sees
    only the committed transaction."""
    from confluent_kafka import Consumer, Producer
    b = sasl_broker()
    conf = client_conf(b, "SCRAM-SHA-512")
    p = Producer(dict(conf, **{"transactional.id": "tx-sasl"}))
    p.init_transactions(30 * SLOW)
    p.begin_transaction()
    p.produce("tx", b"aborted")
    p.abort_transaction(30 * SLOW)
    p.begin_transaction()
    p.produce("tx", b"committed")
    p.commit_transaction(30 * SLOW)
    c = Consumer(dict(conf, **{"group.id": "g", "auto.offset.reset":
                               "earliest", "isolation.level":
                               "read_committed"}))
    c.subscribe(["tx"])
    got = []
    deadline = time.monotonic() + 30 * SLOW
    while not got and time.monotonic() < deadline:
        m = c.poll(1.0)
        if m is not None and not m.error():
            got.append(m.value())
    c.close()
    assert got == [b"committed"]


@pytest.mark.parametrize("mech,user,pw", [
    pytest.param("SCRAM-SHA-512", "alice", "Wr0ng-Pw-4711",
                 marks=release_only),
    pytest.param("SCRAM-SHA-256", "nobody", "N0body-Pw-4712",
                 marks=release_only),
    ("PLAIN", "alice", "Wr0ng-Pw-4713"),
    pytest.param("PLAIN", "nobody", "N0body-Pw-4714", marks=release_only),
])
def test_client_bad_credentials(sasl_broker, mech, user, pw):
    """Wrong password and unknown user fail with an authentication error
    (no hang, no crash) and leave an audit line without the password."""
    from confluent_kafka import KafkaError, Producer
    b = sasl_broker()
    errors = []
    p = Producer(dict(client_conf(b, mech, user, pw),
                      error_cb=lambda e: errors.append(e)))
    deadline = time.monotonic() + 30 * SLOW
    while time.monotonic() < deadline and not any(
            e.code() == KafkaError._AUTHENTICATION for e in errors):
        p.poll(0.2)
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), \
        errors
    log = open(b.log_path).read()
    assert ("authentication failed: principal=User:%s mechanism=%s"
            % (user, mech)) in log
    assert pw not in log


# ---- raw wire -------------------------------------------------------------

def test_requests_before_authentication_close(sasl_broker):
    """ApiVersions is served before authentication; Metadata closes the
    connection; SaslAuthenticate before SaslHandshake is
    ILLEGAL_SASL_STATE and closes; an unknown mechanism is
    UNSUPPORTED_SASL_MECHANISM with the enabled list."""
    b = sasl_broker(**{"sasl.enabled.mechanisms": "SCRAM-SHA-512"})
    s = kw.connect("127.0.0.1", b.port)
    s.sendall(kw.api_versions_request(1))
    _, err, apis = kw.parse_api_versions(kw.recv_frame(s), 3)
    assert err == 0 and apis[17] == (0, 1) and apis[36] == (0, 2)
    s.sendall(kw.metadata_request_v1(2))
    assert kw.wait_closed(s, 10 * SLOW)

    s = kw.connect("127.0.0.1", b.port)
    a = authenticate(s, b"n,,n=alice,r=abc")
    assert a is not None and a[0] == ILLEGAL_SASL_STATE
    assert kw.wait_closed(s, 10 * SLOW)

    s = kw.connect("127.0.0.1", b.port)
    err, mechs = handshake(s, "PLAIN")
    assert err == UNSUPPORTED_SASL_MECHANISM and mechs == ["SCRAM-SHA-512"]
    assert kw.wait_closed(s, 10 * SLOW)

    s = kw.connect("127.0.0.1", b.port)
    assert scram_login(s)[0] == 0
    assert metadata_ok(s)
    # Authenticated: a second SaslAuthenticate is out of order, answered.
    a = authenticate(s, b"n,,n=alice,r=abc", corr=4)
    assert a[0] == ILLEGAL_SASL_STATE
    assert metadata_ok(s, 5)


GARBAGE = [
    [b"garbage"],
    [b""],
    [b"n,,n=alice"],
    [b"y,,n=alice,r=x" + b"\xff" * 2000],
    [b"n,,n=alice,r=abc", b"c=biws,r=WRONG,p=AAAA"],
    [b"n,,n=alice,r=abc", b"\x00" * 50],
]


def test_garbage_scram(sasl_broker):
    """Malformed SCRAM messages: SASL_AUTHENTICATION_FAILED with a message,
    the connection closed, the broker still serving (one broker for all,
    a good login after each)."""
    b = sasl_broker()
    for msgs in GARBAGE:
        s = kw.connect("127.0.0.1", b.port)
        assert handshake(s, "SCRAM-SHA-256")[0] == 0
        a = None
        for i, m in enumerate(msgs):
            a = authenticate(s, m, version=2, corr=10 + i)
            if a is None or a[0] != 0:
                break
        assert a is not None and a[0] == SASL_AUTHENTICATION_FAILED, \
            (msgs, a)
        assert a[1], msgs
        assert kw.wait_closed(s, 10 * SLOW), msgs
        s = kw.connect("127.0.0.1", b.port)
        assert scram_login(s, "SCRAM-SHA-256", version=2)[0] == 0
        assert metadata_ok(s)


def test_v0_bare_tokens(sasl_broker):
    """SaslHandshake v0, then bare tokens (no Kafka header, frames under 8
    bytes allowed): PLAIN succeeds with an empty token; SCRAM runs both
    rounds bare; a bad bare token closes the connection."""
    b = sasl_broker()
    s = kw.connect("127.0.0.1", b.port)
    assert handshake(s, "PLAIN", version=0)[0] == 0
    s.sendall(kw.frame(b"\x00alice\x00alice-secret"))
    assert kw.recv_frame(s) == b""
    assert metadata_ok(s)

    s = kw.connect("127.0.0.1", b.port)
    assert handshake(s, "SCRAM-SHA-512", version=0)[0] == 0
    c = Scram("SCRAM-SHA-512", "admin", "admin-secret")
    s.sendall(kw.frame(c.first()))
    sf = kw.recv_frame(s)
    s.sendall(kw.frame(c.final(sf)))
    assert kw.recv_frame(s).decode() == "v=" + c.expect
    assert metadata_ok(s)

    s = kw.connect("127.0.0.1", b.port)
    assert handshake(s, "PLAIN", version=0)[0] == 0
    s.sendall(kw.frame(b"\x00a"))  # 6 bytes: a token, not a request
    assert kw.wait_closed(s, 10 * SLOW)
    s = kw.connect("127.0.0.1", b.port)
    assert handshake(s, "PLAIN", version=0)[0] == 0
    s.sendall(kw.frame(b"\x00alice\x00wrong"))
    assert kw.wait_closed(s, 10 * SLOW)
    assert "principal=User:alice mechanism=PLAIN" in open(b.log_path).read()
    from conftest import metrics
    m = metrics(b)
    key = 'cairn_sasl_authentications_total{mechanism="%s",result="%s"}'
    assert m[key % ("PLAIN", "ok")] == 1
    assert m[key % ("PLAIN", "failed")] == 2
    assert m[key % ("SCRAM-SHA-512", "ok")] == 1


def test_reauthentication_and_expiry(sasl_broker):
    """connections.max.reauth.ms: SaslAuthenticate v1 tells the lifetime;
    a client may re-authenticate on the same connection (even after the
    session ended); a connection whose session ended is closed at its next
    request; a re-authentication may not change the principal or the
    mechanism."""
    life = 3000
    b = sasl_broker(**{"connections.max.reauth.ms": str(life)})
    s1 = kw.connect("127.0.0.1", b.port, timeout=10 * SLOW)
    s2 = kw.connect("127.0.0.1", b.port, timeout=10 * SLOW)
    s3 = kw.connect("127.0.0.1", b.port, timeout=10 * SLOW)
    for s in (s1, s2):
        a = scram_login(s)
        assert a[0] == 0 and a[3] == life
    assert scram_login(s3, user="admin")[0] == 0
    # Re-authentication keeps the mechanism (as Kafka).
    s4 = kw.connect("127.0.0.1", b.port, timeout=10 * SLOW)
    assert scram_login(s4)[0] == 0
    assert handshake(s4, "SCRAM-SHA-256", corr=20)[0] == 0
    a = authenticate(s4, Scram("SCRAM-SHA-256", "alice",
                               "alice-secret").first(), corr=21)
    assert a is not None and a[0] == SASL_AUTHENTICATION_FAILED, a
    assert "not supported for re-authentication" in a[1]
    assert kw.wait_closed(s4, 10 * SLOW)
    time.sleep(life / 1000.0 + 0.5)
    # s1 re-authenticates, then is served.
    a = scram_login(s1)
    assert a[0] == 0 and a[3] == life
    # s2 did not: its next request closes it.
    s2.sendall(kw.metadata_request_v1(7))
    assert kw.wait_closed(s2, 10 * SLOW)
    # s3 tries to become alice.
    a = scram_login(s3, user="alice")
    assert a is not None and a[0] == SASL_AUTHENTICATION_FAILED
    assert "Cannot change principals" in a[1]
    assert kw.wait_closed(s3, 10 * SLOW)
    assert metadata_ok(s1)


def test_no_reauth_when_off(sasl_broker):
    """With connections.max.reauth.ms=0 the session never expires and a
    second SaslHandshake is ILLEGAL_SASL_STATE (as Kafka's KafkaApis)."""
    b = sasl_broker()
    s = kw.connect("127.0.0.1", b.port)
    a = scram_login(s)
    assert a[0] == 0 and a[3] == 0
    # As Kafka 4.4.0 (checked with kafka_ref.py): no mechanism list.
    assert handshake(s, "SCRAM-SHA-512", corr=5) == (ILLEGAL_SASL_STATE, [])
    assert metadata_ok(s)
    # --add-scram while the broker runs would be lost: refused.
    r = add_scram(b.data_dir, "SCRAM-SHA-512=[name=x,password=y]")
    assert r.returncode != 0 and "running broker" in r.stderr, r.stderr


def test_add_scram_and_corrupt_store(tmp_path):
    """--add-scram checks its argument; a damaged credential file stops
    the broker from starting, naming the file."""
    d = tmp_path / "data"
    r = add_scram(d, "SCRAM-SHA-1=[name=a,password=b]")
    assert r.returncode != 0 and "unknown SCRAM mechanism" in r.stderr
    r = add_scram(d, "SCRAM-SHA-512=[name=a,password=b,iterations=10]")
    assert r.returncode != 0 and "iterations" in r.stderr
    r = add_scram(d, "SCRAM-SHA-256=[name=a,iterations=8192,"
                     "salt=\"MWx2NHBkbnc0ZndxN25vdGN4bTB5eTFrN3E=\","
                     "saltedpassword=\"mT0yyUUxnlJaC99HXgRTSYlbuqa4FSGtJCJf"
                     "TMvjYCE=\"]")
    assert r.returncode == 0, r.stderr
    path = d / "scram-credentials"
    raw = bytearray(path.read_bytes())
    raw[20] ^= 0xFF
    path.write_bytes(bytes(raw))
    r = subprocess.run([str(CAIRN_BIN), "--set", "log.dirs=%s" % d,
                        "--set", "http.listener="],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and str(path) in r.stderr, r.stderr


# ---- credential management ------------------------------------------------

def cairnctl(b, *args, stdin=None):
    from conftest import tool
    return subprocess.run([tool("cairnctl"), "--bootstrap-server",
                           b.bootstrap] + list(args), input=stdin,
                          capture_output=True, text=True, timeout=60)


def scram_request(api, corr, body):
    return kw.request(api, 0, corr, body, flexible=True)


def alter_body(deletions=(), upsertions=()):
    body = kw.uvarint(len(deletions) + 1)
    for name, mech in deletions:
        body += kw.compact_string(name) + struct.pack(">b", mech) + \
            kw.uvarint(0)
    body += kw.uvarint(len(upsertions) + 1)
    for name, mech, it, salt, salted in upsertions:
        body += kw.compact_string(name) + struct.pack(">bi", mech, it)
        body += kw.uvarint(len(salt) + 1) + salt
        body += kw.uvarint(len(salted) + 1) + salted + kw.uvarint(0)
    return body + kw.uvarint(0)


def alter_results(sock, corr, body):
    sock.sendall(scram_request(51, corr, body))
    r = kw.Reader(kw.recv_frame(sock))
    assert r.i32() == corr
    r.skip_tags()
    r.i32()
    out = {}
    for _ in range(r.uvarint() - 1):
        user, err, msg = r.compact_string(), r.i16(), r.compact_string()
        r.skip_tags()
        out[user] = (err, msg)
    return out


def test_cairnctl_users_and_alter_errors(broker_factory):
    """cairnctl users set/list/delete round-trip through KIP-554, the
    credential works for a SASL login after a restart, and the broker's
    AlterUserScramCredentials errors are Kafka's."""
    from conftest import fails, ok
    b = broker_factory()
    ok(cairnctl(b, "users", "set", "--user", "bob", "--password", "bob-pw"))
    ok(cairnctl(b, "users", "set", "--user", "bob", "--mechanism",
                "SCRAM-SHA-256", "--iterations", "8192", stdin="bob-pw\n"))
    out = ok(cairnctl(b, "--json", "users", "list"))
    import json
    assert sorted((u["user"], u["mechanism"], u["iterations"])
                  for u in json.loads(out)) == [
        ("bob", "SCRAM-SHA-256", 8192), ("bob", "SCRAM-SHA-512", 4096)]
    fails(cairnctl(b, "users", "list", "--user", "nobody"), 1,
          "RESOURCE_NOT_FOUND")
    fails(cairnctl(b, "users", "delete", "--user", "nobody"), 1,
          "RESOURCE_NOT_FOUND")
    ok(cairnctl(b, "users", "set", "--user", "carol", "--password", "c"))
    ok(cairnctl(b, "users", "delete", "--user", "carol"))
    assert "carol" not in ok(cairnctl(b, "users", "list"))

    s = kw.connect("127.0.0.1", b.port)
    salted = b"\x01" * 64
    # Checked against Kafka 4.4.0 (kafka_ref.py): deletions, then
    # upsertions, in order; a user's first error is its answer.
    res = alter_results(s, 1, alter_body(
        deletions=[("dup", 2), ("two", 1)],
        upsertions=[("dup", 2, 4096, b"salt", salted),
                    ("two", 2, 4096, b"salt", salted),
                    ("both", 2, 4096, b"salt", salted),
                    ("both", 1, 4096, b"salt", b"\x01" * 32),
                    ("few", 2, 100, b"salt", salted),
                    ("many", 2, 20000, b"salt", salted),
                    ("mech", 9, 4096, b"salt", salted),
                    ("short", 2, 4096, b"salt", b"\x01" * 10),
                    ("", 2, 4096, b"salt", salted),
                    ("good", 2, 4096, b"salt", salted)]))
    notfound = (91, "Attempt to delete a user credential that does not "
                "exist")
    assert res["dup"] == notfound
    assert res["two"] == notfound
    assert res["both"] == (92, "A user credential cannot be altered twice "
                           "in the same request")
    assert res["few"] == (93, "Too few iterations")
    assert res["many"] == (93, "Too many iterations")
    assert res["mech"] == (33, "Unknown SCRAM mechanism")
    assert res[""] == (93, "Username must not be empty")
    # Kafka stores a SaltedPassword of any length; Cairn refuses one that
    # no PBKDF2 of the mechanism can produce (a deliberate difference).
    assert res["short"][0] == 93
    assert res["good"] == (0, None)
    assert "few" not in ok(cairnctl(b, "users", "list"))

    # The credential set through the API logs in after a restart.
    b.stop()
    b.sets["listeners"] = "SASL_PLAINTEXT://127.0.0.1:%d" % b.port
    b.start()
    s = kw.connect("127.0.0.1", b.port)
    assert scram_login(s, "SCRAM-SHA-256", "bob", "bob-pw")[0] == 0
    s = kw.connect("127.0.0.1", b.port)
    assert scram_login(s, "SCRAM-SHA-512", "bob", "bob-pw")[0] == 0


# ---- two principals under the authorizer ----------------------------------

class SaslClient(kw.Client):
    """A raw connection authenticated with SCRAM-SHA-512."""

    def __init__(self, port, user, pw):
        self.sock = kw.connect("127.0.0.1", port, timeout=10 * SLOW)
        self.corr = 10
        a = scram_login(self.sock, "SCRAM-SHA-512", user, pw)
        assert a is not None and a[0] == 0, (user, a)


@release_only
def test_two_principals_transactional_acls(sasl_broker):
    """With the authorizer on: User:app holding exactly the ACLs of a
    transactional read-process-write app commits; User:mallory, without
    WRITE on the transactional id, cannot fence it (InitProducerId), end
    or abort its transaction (EndTxn, WriteTxnMarkers) or see it in
    ListTransactions, and the app's transaction still commits."""
    import test_acl as ta
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    users = {"admin": "admin-secret", "app": "app-secret",
             "mallory": "mallory-secret"}
    USERS.update(users)
    inp, out, group, tid = "s-in", "s-out", "s-group", "s-tx"
    b = sasl_broker(users, **{"authorizer.class.name": ta.STANDARD,
                              "super.users": "User:admin",
                              "allow.everyone.if.no.acl.found": "false",
                              "auto.create.topics.enable": "false"})
    admin_conf = client_conf(b, "SCRAM-SHA-512", "admin")
    admin = AdminClient(admin_conf)
    fs = admin.create_topics(
        [NewTopic(t, 1, 1) for t in (inp, out)], operation_timeout=30)
    for f in fs.values():
        f.result(30 * SLOW)
    p = Producer(admin_conf)
    for i in range(5):
        p.produce(inp, b"v%d" % i, partition=0)
    assert p.flush(30 * SLOW) == 0

    a = SaslClient(b.port, "admin", users["admin"])
    app_acls = [(ta.TOPIC, inp, ta.LITERAL, "User:app", "*", ta.READ,
                 ta.ALLOW),
                (ta.TOPIC, out, ta.LITERAL, "User:app", "*", ta.WRITE,
                 ta.ALLOW),
                (ta.GROUP, group, ta.LITERAL, "User:app", "*", ta.READ,
                 ta.ALLOW),
                (ta.TXN, tid, ta.LITERAL, "User:app", "*", ta.WRITE,
                 ta.ALLOW),
                # mallory may write the topic, just not as the app.
                (ta.TOPIC, out, ta.LITERAL, "User:mallory", "*", ta.WRITE,
                 ta.ALLOW)]
    res = ta.parse_create_acls(a.call(ta.create_acls_request, app_acls))
    assert all(e == 0 for e, _ in res), res

    conf = client_conf(b, "SCRAM-SHA-512", "app")
    prod = Producer(dict(conf, **{"transactional.id": tid}))
    prod.init_transactions(30 * SLOW)
    cons = Consumer(dict(conf, **{"group.id": group,
                                  "enable.auto.commit": False,
                                  "auto.offset.reset": "earliest",
                                  "isolation.level": "read_committed"}))
    cons.subscribe([inp])
    got = []
    deadline = time.monotonic() + 30 * SLOW
    while len(got) < 5 and time.monotonic() < deadline:
        m = cons.poll(1.0)
        if m is not None and not m.error():
            got.append(m)
    assert len(got) == 5
    prod.begin_transaction()
    for m in got:
        prod.produce(out, m.value().upper(), partition=0)
    assert prod.flush(30 * SLOW) == 0

    # The transaction is open: what the admin sees of it.
    _, d = kw.parse_describe_transactions(
        a.call(kw.describe_transactions_request, [tid]))
    assert d[tid]["error"] == 0 and d[tid]["state"] == "Ongoing", d
    pid, epoch = d[tid]["producer_id"], d[tid]["producer_epoch"]

    m = SaslClient(b.port, "mallory", users["mallory"])
    assert m.init_producer_id(version=4, transactional_id=tid)[0] == \
        ta.TXN_AUTH
    assert kw.parse_end_txn(m.call(kw.end_txn_request, tid, pid, epoch,
                                   False), 1)[1] == ta.TXN_AUTH
    _, marks = kw.parse_write_txn_markers(m.call(
        kw.write_txn_markers_request, pid, epoch, False, {out: [0]}))
    assert set(marks.values()) == {ta.CLUSTER_AUTH}, marks
    _, err, _, listed = kw.parse_list_transactions(
        m.call(kw.list_transactions_request))
    assert err == 0 and tid not in listed
    _, _, _, listed = kw.parse_list_transactions(
        a.call(kw.list_transactions_request))
    assert tid in listed
    # mallory may still produce idempotently to the topic she may write.
    assert m.init_producer_id(version=4)[0] == 0
    # Credentials: DESCRIBE / ALTER on the cluster, which she lacks.
    m.sock.sendall(scram_request(50, 40, kw.uvarint(0) + kw.uvarint(0)))
    r = kw.Reader(kw.recv_frame(m.sock))
    assert r.i32() == 40
    r.skip_tags()
    r.i32()
    assert r.i16() == ta.CLUSTER_AUTH
    res = alter_results(m.sock, 41, alter_body(
        upsertions=[("mallory", 2, 4096, b"salt", b"\x01" * 64)]))
    assert list(res) == ["mallory"] and res["mallory"][0] == ta.CLUSTER_AUTH
    assert set(alter_results(a.sock, 42, alter_body(
        deletions=[("nobody", 2)])).values()) == {
        (91, "Attempt to delete a user credential that does not exist")}

    prod.send_offsets_to_transaction(
        cons.position(cons.assignment()), cons.consumer_group_metadata(),
        30 * SLOW)
    prod.commit_transaction(30 * SLOW)
    cons.close()
    check = Consumer(dict(admin_conf, **{"group.id": "check",
                                         "auto.offset.reset": "earliest",
                                         "isolation.level":
                                         "read_committed"}))
    check.subscribe([out])
    seen = []
    deadline = time.monotonic() + 30 * SLOW
    while len(seen) < 5 and time.monotonic() < deadline:
        msg = check.poll(1.0)
        if msg is not None and not msg.error():
            seen.append(msg.value())
    check.close()
    assert seen == [b"V%d" % i for i in range(5)]
    log = open(b.log_path).read()
    assert "DENIED principal=User:mallory" in log


@release_only
def test_kafka_configs_and_cairnctl_agree(broker_factory, tmp_path):
    """Kafka's kafka-configs.sh (ConfigCommand) sets SCRAM credentials
    through AlterUserScramCredentials; cairnctl users list sees them, a
    SCRAM login with the password works, and what cairnctl sets the tool
    describes."""
    import java_harness
    from conftest import ok
    from test_kafka_cli import CONFIGS
    b = broker_factory()
    cli = fast_cli(java_harness.classpath(), tmp_path, b, CONFIGS)
    # One mechanism per request: Kafka 4.4 itself refuses two mechanisms of
    # a user in one AlterUserScramCredentials (DUPLICATE_RESOURCE).
    cli.ok("--alter", "--entity-type", "users", "--entity-name", "alice",
           "--add-config", "SCRAM-SHA-512=[iterations=8192,password=alice-pw]")
    ok(cairnctl(b, "users", "set", "--user", "alice", "--mechanism",
                "SCRAM-SHA-256", "--password", "alice-pw"))
    listed = ok(cairnctl(b, "users", "list", "--user", "alice"))
    assert re.search(r"alice\s+SCRAM-SHA-256\s+4096", listed), listed
    assert re.search(r"alice\s+SCRAM-SHA-512\s+8192", listed), listed
    ok(cairnctl(b, "users", "set", "--user", "bob", "--password", "bob-pw",
                "--iterations", "5000"))
    # The tool's describe of users also asks for their client quotas
    # (DescribeClientQuotas): checked once the broker serves that API.
    s = kw.connect("127.0.0.1", b.port)
    s.sendall(kw.api_versions_request(1))
    _, _, apis = kw.parse_api_versions(kw.recv_frame(s), 3)
    s.close()
    if 48 in apis:
        out = cli.ok("--describe", "--entity-type", "users",
                     "--entity-name", "bob")
        assert "SCRAM-SHA-512=iterations=5000" in out, out
    cli.ok("--alter", "--entity-type", "users", "--entity-name", "alice",
           "--delete-config", "SCRAM-SHA-256")
    listed = ok(cairnctl(b, "users", "list"))
    assert "SCRAM-SHA-256" not in listed and "alice" in listed, listed
    b.stop()
    b.sets["listeners"] = "SASL_PLAINTEXT://127.0.0.1:%d" % b.port
    b.start()
    s = kw.connect("127.0.0.1", b.port)
    assert scram_login(s, "SCRAM-SHA-512", "alice", "alice-pw")[0] == 0


@release_only
def test_kafkajs(sasl_broker):
    """kafkajs produces and consumes over SCRAM-SHA-512, SCRAM-SHA-256 and
    PLAIN; a wrong password is an authentication error."""
    import json
    from test_read_committed import JS_DIR, npm_ready
    why = npm_ready()
    if why:
        pytest.fail(why)
    b = sasl_broker(**{"auto.create.topics.enable": "true"})
    specs = ["SCRAM-SHA-512:alice:alice-secret",
             "SCRAM-SHA-256:admin:admin-secret",
             "PLAIN:alice:alice-secret", "SCRAM-SHA-512:alice:wrong"]
    res = subprocess.run(["node", str(JS_DIR / "sasl.js"), b.bootstrap]
                         + specs, capture_output=True, text=True,
                         timeout=120 * SLOW)
    lines = [json.loads(x) for x in res.stdout.splitlines()
             if x.startswith("{")]
    assert len(lines) == 4, (res.stdout, res.stderr[-2000:])
    for ev in lines[:3]:
        assert ev["event"] == "ok" and ev["values"] == ["v0", "v1", "v2"], \
            (ev, res.stderr[-2000:])
    assert lines[3]["event"] == "error", lines[3]
    assert "SASL" in lines[3]["type"] or "SASL" in lines[3]["message"], \
        lines[3]


def jaas_props(path, mech, user, pw, protocol="SASL_PLAINTEXT", extra=""):
    """A Java client's properties file; extra: more lines (the
    truststore of SASL_SSL)."""
    module = ("org.apache.kafka.common.security.plain.PlainLoginModule"
              if mech == "PLAIN" else
              "org.apache.kafka.common.security.scram.ScramLoginModule")
    path.write_text(
        "security.protocol=%s\nsasl.mechanism=%s\n"
        "sasl.jaas.config=%s required username=\"%s\" password=\"%s\";\n"
        % (protocol, mech, module, user, pw) + extra)
    return str(path)


def fast_cli(cp, tmp_path, b, main):
    """test_kafka_cli's Cli with the JVM flags that start it sooner."""
    import java_harness
    from test_kafka_cli import TIMEOUT, Cli

    class Fast(Cli):
        def run(self, *args):
            self.n += 1
            err = self.tmp / ("%s.%d.stderr" % (self.main.rsplit(".", 1)[1],
                                               self.n))
            res = java_harness.run_java(
                self.cp, self.main,
                ["--bootstrap-server", self.broker.bootstrap] + list(args),
                TIMEOUT, err, jvm_args=java_harness.FAST_START)
            return res.returncode, res.stdout, err.read_text()
    return Fast(cp, tmp_path, b, main)


@release_only
def test_java_clients(sasl_broker, tmp_path):
    """The Java client (Kafka 4.4.0, through Kafka's own tools): a
    transactional producer over SCRAM-SHA-512, a read_committed consumer
    over PLAIN, and the admin client over SCRAM-SHA-256 adding a user
    (AlterUserScramCredentials on an authenticated connection) who can
    then log in."""
    import java_harness
    from confluent_kafka.admin import AdminClient, NewTopic
    from test_kafka_cli import (CONFIGS, CONSUMER_PERF, PERF_SUMMARY,
                                PRODUCER_PERF)
    b = sasl_broker()
    admin = AdminClient(client_conf(b, "SCRAM-SHA-512", "admin"))
    admin.create_topics([NewTopic("jt", 1, 1)])["jt"].result(30 * SLOW)
    cp = java_harness.classpath()
    n = 500
    pp = fast_cli(cp, tmp_path, b, PRODUCER_PERF)
    out = pp.ok("--topic", "jt", "--num-records", str(n), "--record-size",
                "50", "--throughput", "-1", "--transactional-id", "jt-tx",
                "--transaction-duration-ms", "200", "--command-config",
                jaas_props(tmp_path / "p.properties", "SCRAM-SHA-512",
                           "admin", "admin-secret"))
    assert [int(x) for x in PERF_SUMMARY.findall(out)] == [n], out
    cons = fast_cli(cp, tmp_path, b, CONSUMER_PERF)
    out = cons.ok("--topic", "jt", "--num-records", str(n), "--group", "jg",
                  "--timeout", str(60000 * SLOW), "--command-property",
                  "isolation.level=read_committed", "--command-config",
                  jaas_props(tmp_path / "c.properties", "PLAIN", "alice",
                             "alice-secret"))
    lines = [x for x in out.splitlines() if x.strip()]
    row = dict(zip([x.strip() for x in lines[-2].split(",")],
                   [x.strip() for x in lines[-1].split(",")]))
    assert row["data.consumed.in.nMsg"] == str(n), out
    cfg = fast_cli(cp, tmp_path, b, CONFIGS)
    cfg.ok("--command-config",
           jaas_props(tmp_path / "a.properties", "SCRAM-SHA-256", "admin",
                      "admin-secret"),
           "--alter", "--entity-type", "users", "--entity-name", "carol",
           "--add-config", "SCRAM-SHA-512=[password=carol-pw]")
    s = kw.connect("127.0.0.1", b.port)
    assert scram_login(s, "SCRAM-SHA-512", "carol", "carol-pw")[0] == 0


@release_only
def test_kcat(sasl_broker):
    """kcat produces and consumes over SCRAM-SHA-512; with a wrong password
    it fails instead of hanging."""
    from conftest import run

    def kcat(pw, *args, stdin=None):
        return run(["kcat", "-b", b.bootstrap, "-X",
                    "security.protocol=SASL_PLAINTEXT", "-X",
                    "sasl.mechanisms=SCRAM-SHA-512", "-X",
                    "sasl.username=alice", "-X", "sasl.password=" + pw]
                   + list(args), timeout=60 * SLOW, input=stdin)

    b = sasl_broker(**{"auto.create.topics.enable": "true"})
    res = kcat("alice-secret", "-P", "-t", "kc", stdin="a\nb\nc\n")
    assert res.returncode == 0, res.stderr
    res = kcat("alice-secret", "-C", "-t", "kc", "-o", "beginning", "-e",
               "-c", "3")
    assert res.returncode == 0 and res.stdout.split() == ["a", "b", "c"], \
        res.stderr
    res = kcat("wrong", "-L", "-m", "1")
    assert res.returncode != 0
    assert "Authentication" in res.stderr or "SASL" in res.stderr, \
        res.stderr
