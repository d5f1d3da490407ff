"""Client quotas (issue #18): DescribeClientQuotas / AlterClientQuotas on
the wire, Kafka's validation answers, the durable store, precedence, and
throttling as Kafka does it since KIP-219 (the answer carries
throttle_time_ms, the connection is then not read for that long).

Until SASL lands every connection is User:ANONYMOUS, so user quotas are
tested as users/ANONYMOUS and users/<default>.

Timing: nothing here asserts how long anything took.  Throttles are made
long on purpose (a 100 B/s quota against a few KB), so "throttled" is an
outcome the first answer already shows; the clients' tests assert that
they were told to slow down and that every record still arrived once.
request_percentage tests use a quota so tiny (1e-9 %) that any measured
microsecond crosses it, so the crossing answer's throttle is always
Kafka's bound of one window.
"""

import os
import struct
import time
from pathlib import Path

import pytest

import kafka_wire as kw
import test_sasl
from conftest import SANITIZED, SLOW, metrics, needs_cairn, run, tool
from test_sasl import sasl_broker  # noqa: F401 (a fixture used here)

pytestmark = needs_cairn

DESCRIBE, ALTER = 48, 49
NONE, INVALID_REQUEST, UNSUPPORTED_VERSION = 0, 42, 35
EXACT, DEFAULT, ANY = 0, 1, 2


# ---- the two APIs, by hand (v0 classic, v1 flexible) ----------------------

def _s(s, flex):
    return kw.compact_string(s) if flex else kw.string(s)


def _n(n, flex):
    return kw.uvarint(n + 1) if flex else struct.pack(">i", n)


def _tags(flex):
    return kw.uvarint(0) if flex else b""


def alter_body(entries, validate_only=False, version=1):
    """entries: [([(type, name or None)], [(key, value, remove)])]."""
    flex = version >= 1
    b = _n(len(entries), flex)
    for entity, ops in entries:
        b += _n(len(entity), flex)
        for t, name in entity:
            b += _s(t, flex) + _s(name, flex) + _tags(flex)
        b += _n(len(ops), flex)
        for key, value, remove in ops:
            b += _s(key, flex) + struct.pack(">d?", value, remove) + _tags(flex)
        b += _tags(flex)
    return b + struct.pack(">?", validate_only) + _tags(flex)


def describe_body(components, strict=False, version=1):
    """components: [(type, match_type, match or None)]."""
    flex = version >= 1
    b = _n(len(components), flex)
    for t, mt, m in components:
        b += _s(t, flex) + struct.pack(">b", mt) + _s(m, flex) + _tags(flex)
    return b + struct.pack(">?", strict) + _tags(flex)


class R(kw.Reader):
    def __init__(self, data, flex):
        super().__init__(data)
        self.flex = flex

    def s(self):
        return self.compact_string() if self.flex else self.string()

    def n(self):
        return self.uvarint() - 1 if self.flex else self.i32()

    def tags(self):
        if self.flex:
            self.skip_tags()

    def f64(self):
        return self._take(">d")


def _entity(r):
    ents = []
    for _ in range(r.n()):
        t, name = r.s(), r.s()
        r.tags()
        ents.append((t, name))
    return tuple(sorted(ents, key=lambda e: e[0]))


def parse_alter(body, version=1):
    """[(entity, error_code, error_message)]"""
    r = R(body, version >= 1)
    r.i32()
    if r.flex:
        r.skip_tags()                     # response header v1
    r.i32()                               # throttle
    out = []
    for _ in range(r.n()):
        code, msg = r.i16(), r.s()
        ent = _entity(r)
        r.tags()
        out.append((ent, code, msg))
    return out


def parse_describe(body, version=1):
    """(error_code, error_message, {entity: {key: value}} or None)"""
    r = R(body, version >= 1)
    r.i32()
    if r.flex:
        r.skip_tags()
    r.i32()
    code, msg = r.i16(), r.s()
    n = r.n()
    if n < 0:
        return code, msg, None
    out = {}
    for _ in range(n):
        ent = _entity(r)
        vals = {}
        for _ in range(r.n()):
            k = r.s()
            vals[k] = r.f64()
            r.tags()
        r.tags()
        out[ent] = vals
    return code, msg, out


class Wire:
    """One connection for the quota APIs."""

    def __init__(self, port, client_id="e2e"):
        self.sock = kw.connect("127.0.0.1", port, timeout=10 * SLOW)
        self.corr = 0
        self.client_id = client_id

    def call(self, key, version, body):
        self.corr += 1
        self.sock.sendall(kw.request(key, version, self.corr, body,
                                     client_id=self.client_id,
                                     flexible=version >= 1))
        resp = kw.recv_frame(self.sock)
        assert resp is not None, "connection closed"
        return resp

    def alter(self, entries, validate_only=False, version=1):
        return parse_alter(self.call(ALTER, version, alter_body(
            entries, validate_only, version)), version)

    def describe(self, components=(), strict=False, version=1):
        return parse_describe(self.call(DESCRIBE, version, describe_body(
            list(components), strict, version)), version)

    def close(self):
        self.sock.close()


CLIENT = "client-id"
USER = "user"


def ent(*parts):
    return tuple(sorted(parts, key=lambda e: e[0]))


def set_quota(w, entity, **vals):
    res = w.alter([(list(entity), [(k, v, False) for k, v in vals.items()])])
    assert [(e, c) for e, c, _ in res] == [(ent(*entity), NONE)], res


# ---- API behaviour -------------------------------------------------------

# Each case: (entity, ops, validate_only) -> (code, message) as reference
# Kafka 4.4.0 answers it (test_quota_validation_matches_kafka checks that
# the table is still Kafka's).
VALIDATION = [
    ([(CLIENT, "a")], [("producer_byte_rate", 1024.0, False)], NONE),
    ([(CLIENT, "a")], [("no_such_key", 1.0, False)], INVALID_REQUEST),
    ([(CLIENT, "a")], [("producer_byte_rate", -5.0, False)], INVALID_REQUEST),
    ([(CLIENT, "a")], [("producer_byte_rate", 0.0, False)], INVALID_REQUEST),
    ([(CLIENT, "a")], [("producer_byte_rate", 1.5, False)], INVALID_REQUEST),
    ([(CLIENT, "a")], [("request_percentage", 12.5, False)], NONE),
    ([], [("producer_byte_rate", 1.0, False)], INVALID_REQUEST),
    ([(CLIENT, "")], [("producer_byte_rate", 1.0, False)], INVALID_REQUEST),
    # A type given twice: the last one counts (Kafka reads a map).
    ([(CLIENT, "a"), (CLIENT, "b")], [("producer_byte_rate", 1.0, False)],
     NONE),
    ([(CLIENT, "a")], [("no_such_key", 0.0, True)], NONE),
    ([(CLIENT, "a")], [("producer_byte_rate", 1e20, False)], INVALID_REQUEST),
    ([(CLIENT, "a")], [("request_percentage", -0.5, False)], INVALID_REQUEST),
    ([(CLIENT, "a")], [("producer_byte_rate", 10.0, False),
                       ("nope", 1.0, False)], INVALID_REQUEST),
    ([("bogus", "a")], [("producer_byte_rate", 1.0, False)], None),
    ([(USER, None), (CLIENT, None)], [("consumer_byte_rate", 4096.0, False)],
     NONE),
    ([(USER, "x")], [("producer_byte_rate", 0.0, True)], NONE),
]


def test_alter_describe_validate_and_restart(broker_factory):
    b = broker_factory()
    w = Wire(b.port)
    # Nothing set: an empty list, not an error.
    assert w.describe() == (NONE, None, {})

    for entity, ops, want in VALIDATION:
        res = w.alter([(entity, ops)], validate_only=True)
        assert len(res) == 1
        if want is None:
            assert res[0][1] != NONE, (entity, res)
        else:
            assert res[0][1] == want, (entity, ops, res)
        if res[0][1] != NONE:
            assert res[0][2], "an error without a message: %r" % (res,)
    # validate_only changed nothing.
    assert w.describe() == (NONE, None, {})
    # controller_mutation_rate is refused with a clear message (Cairn does
    # not enforce it).
    res = w.alter([([(CLIENT, "a")], [("controller_mutation_rate", 1.0,
                                       False)])])
    assert res[0][1] == INVALID_REQUEST and "controller_mutation_rate" in \
        res[0][2], res

    # One bad entity does not stop the others.
    res = w.alter([([(CLIENT, "app")], [("producer_byte_rate", 1024, False),
                                        ("request_percentage", 50, False)]),
                   ([(CLIENT, "bad")], [("nope", 1, False)]),
                   ([(USER, None)], [("consumer_byte_rate", 2048, False)]),
                   ([(USER, "ANONYMOUS"), (CLIENT, None)],
                    [("producer_byte_rate", 4096, False)])])
    assert [c for _, c, _ in res] == [NONE, INVALID_REQUEST, NONE, NONE], res
    want = {
        ent((CLIENT, "app")): {"producer_byte_rate": 1024.0,
                               "request_percentage": 50.0},
        ent((USER, None)): {"consumer_byte_rate": 2048.0},
        ent((USER, "ANONYMOUS"), (CLIENT, None)): {
            "producer_byte_rate": 4096.0},
    }
    assert w.describe() == (NONE, None, want)
    # v0 (classic encoding) sees the same.
    assert w.describe(version=0) == (NONE, None, want)

    # Filters: exact, default, any; strict.
    assert w.describe([(CLIENT, EXACT, "app")])[2] == {
        ent((CLIENT, "app")): want[ent((CLIENT, "app"))]}
    assert set(w.describe([(CLIENT, ANY, None)])[2]) == {
        ent((CLIENT, "app")), ent((USER, "ANONYMOUS"), (CLIENT, None))}
    assert set(w.describe([(CLIENT, ANY, None)], strict=True)[2]) == {
        ent((CLIENT, "app"))}
    assert set(w.describe([(USER, DEFAULT, None)])[2]) == {ent((USER, None))}
    assert set(w.describe([(USER, EXACT, "ANONYMOUS"), (CLIENT, DEFAULT,
                                                         None)])[2]) == {
        ent((USER, "ANONYMOUS"), (CLIENT, None))}
    # A name longer than any stored one matches nothing (not everything).
    assert w.describe([(CLIENT, EXACT, "x" * 300)])[2] == {}
    code, msg, entries = w.describe([(CLIENT, EXACT, None)])
    assert code == INVALID_REQUEST and entries is None and msg, (code, msg)
    code, msg, _ = w.describe([("bogus", ANY, None)])
    assert code == UNSUPPORTED_VERSION and "bogus" in msg, (code, msg)

    # Removing the last key forgets the entity.
    res = w.alter([([(USER, None)], [("consumer_byte_rate", 0, True)])])
    assert res[0][1] == NONE
    del want[ent((USER, None))]
    assert w.describe()[2] == want
    w.close()

    # Durable: a restart loads the same values.
    b.restart()
    w = Wire(b.port)
    assert w.describe() == (NONE, None, want)
    w.close()

    # A damaged store refuses start, naming the file.
    b.stop()
    path = os.path.join(b.data_dir, "client-quotas")
    data = bytearray(open(path, "rb").read())
    data[len(data) // 2] ^= 0xff
    open(path, "wb").write(bytes(data))
    res = run(b._argv(), timeout=30 * SLOW)
    assert res.returncode != 0
    assert "client-quotas" in res.stderr and "damaged" in res.stderr, \
        res.stderr[-2000:]
    os.unlink(path)
    b.start()


def produce(port, client_id, topic, nbytes, acks=-1):
    """One Produce v8 from client_id; returns (errors, throttle_time_ms)."""
    s = kw.connect("127.0.0.1", port, timeout=10 * SLOW)
    try:
        recs = kw.record_batch([b"x" * nbytes])
        body = kw.string(None) + struct.pack(">hi", acks, 10000)
        body += struct.pack(">i", 1) + kw.string(topic)
        body += struct.pack(">i", 1) + struct.pack(">i", 0)
        body += kw.bytes_field(recs)
        s.sendall(kw.request(0, 8, 1, body, client_id=client_id))
        resp = kw.recv_frame(s)
        assert resp is not None
        (throttle,) = struct.unpack(">i", resp[-4:])
        _, parts = kw.parse_produce_v8(resp)
        return [p[2] for p in parts], throttle
    finally:
        s.close()


def test_throttle_and_precedence(broker_factory):
    """Produce answers carry throttle_time_ms by the precedence table:
    users/ANONYMOUS/clients/fast (huge) beats clients/<default> (tiny);
    other client ids get the default, each on its own rate."""
    b = broker_factory()
    b.create_topic("q-prec")
    w = Wire(b.port)
    set_quota(w, [(CLIENT, None)], producer_byte_rate=100)
    set_quota(w, [(USER, "ANONYMOUS"), (CLIENT, "fast")],
              producer_byte_rate=1e12)
    errs, t = produce(b.port, "fast", "q-prec", 5000)
    assert errs == [0] and t == 0, (errs, t)
    # 5000 bytes against 100 B/s over the 10 s minimum window:
    # (500 - 100) / 100 * 10 s, Kafka's formula.
    errs, t = produce(b.port, "slow", "q-prec", 5000)
    assert errs == [0] and t > 0, (errs, t)
    assert 40000 <= t <= 45000, t     # the frame is a little over 5000
    # Another client id has a rate of its own under clients/<default>.
    errs, t2 = produce(b.port, "slow2", "q-prec", 50)
    assert t2 == 0, t2
    m = metrics(b)
    assert m['cairn_quota_throttled_total{quota="producer_byte_rate"}'] >= 1
    assert m["cairn_quota_entities"] == 2
    # A user-level quota (users/<default>) for a client without its own:
    # precedence 6 beats 8.
    set_quota(w, [(USER, None)], producer_byte_rate=1e12)
    errs, t = produce(b.port, "slow3", "q-prec", 5000)
    assert t == 0, t
    w.close()


def test_throttled_connection_is_muted(broker_factory):
    """After a throttled answer the connection is not read until the
    throttle ends: a second request stays unanswered while the broker
    reports the connection throttled."""
    b = broker_factory()
    b.create_topic("q-mute")
    w = Wire(b.port)
    set_quota(w, [(CLIENT, "m")], producer_byte_rate=100)
    w.close()
    s = kw.connect("127.0.0.1", b.port, timeout=10 * SLOW)
    recs = kw.record_batch([b"x" * 5000])
    body = kw.string(None) + struct.pack(">hi", -1, 10000)
    body += struct.pack(">i", 1) + kw.string("q-mute")
    body += struct.pack(">i", 1) + struct.pack(">i", 0) + kw.bytes_field(recs)
    s.sendall(kw.request(0, 8, 1, body, client_id="m"))
    resp = kw.recv_frame(s)
    (throttle,) = struct.unpack(">i", resp[-4:])
    assert throttle > 10000, throttle
    s.sendall(kw.request(18, 0, 2, b"", client_id="m"))   # ApiVersions
    deadline = time.monotonic() + 10 * SLOW
    seen = False
    while time.monotonic() < deadline and not seen:
        seen = metrics(b)["cairn_net_throttled_connections"] >= 1
        time.sleep(0.05)
    assert seen
    # Still muted: the ApiVersions request waits (the throttle is > 10 s,
    # so 1 s of silence cannot be the answer merely being slow).
    s.settimeout(1)
    with pytest.raises(OSError):
        kw.recv_frame(s)
    s.close()


# Describe filters whose answers are compared with Kafka's too.
DESCRIBE_CASES = [
    [(CLIENT, EXACT, None)],
    [(CLIENT, DEFAULT, "x")],
    [(CLIENT, ANY, "x")],
    [("bogus", ANY, None)],
    [(CLIENT, ANY, None), (CLIENT, ANY, None)],
    [("", ANY, None)],
    [("ip", ANY, None), (USER, ANY, None)],
    [(CLIENT, 7, None)],
]


@pytest.mark.skipif(SANITIZED, reason="the reference Kafka is a JVM: "
                    "release build only")
def test_quota_validation_matches_kafka(broker, kafka):
    """The same AlterClientQuotas (validate_only) and DescribeClientQuotas
    requests to Cairn and to Apache Kafka 4.4.0: the same error codes and
    messages, entity by entity."""
    ours, theirs = Wire(broker.port), Wire(kafka.port)
    diffs = []
    for entity, ops, _ in VALIDATION:
        a = ours.alter([(entity, ops)], validate_only=True)
        k = theirs.alter([(entity, ops)], validate_only=True)
        if [(c, m) for _, c, m in a] != [(c, m) for _, c, m in k]:
            diffs.append(("alter", entity, ops, a, k))
    for comps in DESCRIBE_CASES:
        a = ours.describe(comps)
        k = theirs.describe(comps)
        if a[:2] != k[:2]:
            diffs.append(("describe", comps, a, k))
    ours.close()
    theirs.close()
    assert not diffs, "\n".join(repr(d) for d in diffs)


# Short windows (still Kafka's measure: 2 samples of 1 s) so a throttle is
# about a second and the rate recovers in two: the clients' tests finish
# quickly while the throttle they must see stays certain.
SHORT_WINDOWS = {"quota.window.num": "2", "quota.window.size.seconds": "1"}


def test_clients_are_throttled_and_data_complete(broker_factory):
    """confluent-kafka (librdkafka) under producer_byte_rate and
    consumer_byte_rate quotas on their client ids: both report a throttle
    through throttle_cb, and every record arrives exactly once."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    b = broker_factory(**SHORT_WINDOWS)
    b.create_topic("q-clients")
    w = Wire(b.port)
    # 40 x 500 B = 20 kB against 10 kB/s over a 1 s window: over twice.
    set_quota(w, [(CLIENT, "qp")], producer_byte_rate=10000)
    set_quota(w, [(CLIENT, "qc")], consumer_byte_rate=10000)
    w.close()
    n = 40
    throttles = {"p": [], "c": []}
    p = Producer({"bootstrap.servers": b.bootstrap, "client.id": "qp",
                  "enable.idempotence": True, "linger.ms": 0,
                  "batch.num.messages": 5,
                  "throttle_cb": lambda ev: throttles["p"].append(
                      ev.throttle_time)})
    for i in range(n):
        p.produce("q-clients", value=b"%04d" % i + b"." * 496)
        p.poll(0)
    assert p.flush(60 * SLOW) == 0
    p.poll(0)
    assert any(t > 0 for t in throttles["p"]), throttles

    c = Consumer({"bootstrap.servers": b.bootstrap, "client.id": "qc",
                  "group.id": "q-clients-g", "enable.auto.commit": False,
                  "fetch.wait.max.ms": 100,
                  "throttle_cb": lambda ev: throttles["c"].append(
                      ev.throttle_time)})
    c.assign([TopicPartition("q-clients", 0, 0)])
    seen = []
    deadline = time.monotonic() + 60 * SLOW
    while len(seen) < n and time.monotonic() < deadline:
        m = c.poll(0.2)
        if m is not None and not m.error():
            seen.append(m.value()[:4])
    c.poll(0.1)
    c.close()
    assert sorted(seen) == [b"%04d" % i for i in range(n)], seen
    assert any(t > 0 for t in throttles["c"]), throttles
    m = metrics(b)
    assert m['cairn_quota_throttled_total{quota="producer_byte_rate"}'] >= 1
    assert m['cairn_quota_throttled_total{quota="consumer_byte_rate"}'] >= 1


@pytest.mark.skipif(SANITIZED, reason="Kafka's tools (one JVM per command) "
                    "run against the release broker")
def test_kafka_configs_and_cairnctl_agree(broker):
    """kafka-configs.sh (Kafka's ConfigCommand) sets and describes client
    quotas; cairnctl quotas shows and changes the same values that
    DescribeClientQuotas returns."""
    import java_harness
    from test_kafka_cli import CONFIGS, Cli
    kc = Cli(java_harness.classpath(), Path(broker.data_dir).parent, broker,
             CONFIGS)
    app = ("--entity-type", "clients", "--entity-name", "app")
    out = kc.ok("--alter", *app, "--add-config",
                "producer_byte_rate=1024,request_percentage=25.5")
    assert "Completed updating config for client app." in out, out
    out = kc.ok("--alter", "--entity-type", "clients", "--entity-default",
                "--add-config", "consumer_byte_rate=2048")
    out = kc.ok("--alter", "--entity-type", "users", "--entity-name",
                "ANONYMOUS", "--entity-type", "clients", "--entity-name",
                "app", "--add-config", "producer_byte_rate=4096")
    out = kc.ok("--describe", *app)
    assert "Quota configs for client-id 'app' are" in out, out
    assert "producer_byte_rate=1024.0" in out and \
        "request_percentage=25.5" in out, out
    out = kc.fails("--alter", *app, "--add-config", "producer_byte_rate=-1")
    assert "must be greater than 0" in out, out[-2000:]

    w = Wire(broker.port)
    want = {
        ent((CLIENT, "app")): {"producer_byte_rate": 1024.0,
                               "request_percentage": 25.5},
        ent((CLIENT, None)): {"consumer_byte_rate": 2048.0},
        ent((USER, "ANONYMOUS"), (CLIENT, "app")): {
            "producer_byte_rate": 4096.0},
    }
    assert w.describe() == (NONE, None, want)

    ctl = tool("cairnctl")
    res = run([ctl, "--bootstrap-server", broker.bootstrap, "quotas", "list"], 30 * SLOW)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert "client-id=app producer_byte_rate=1024 request_percentage=25.5" \
        in lines, res.stdout
    assert "client-id=<default> consumer_byte_rate=2048" in lines, res.stdout
    assert "user=ANONYMOUS,client-id=app producer_byte_rate=4096" in lines, \
        res.stdout
    res = run([ctl, "--bootstrap-server", broker.bootstrap, "quotas", "set",
               "--user", "<default>", "--set", "consumer_byte_rate=1000"],
              30 * SLOW)
    assert res.returncode == 0, res.stderr
    res = run([ctl, "--bootstrap-server", broker.bootstrap, "quotas", "delete",
               "--client-id", "app", "--delete", "request_percentage"],
              30 * SLOW)
    assert res.returncode == 0, res.stderr
    res = run([ctl, "--bootstrap-server", broker.bootstrap, "quotas", "set",
               "--client-id", "app", "--set", "bogus_key=1"], 30 * SLOW)
    assert res.returncode != 0 and "Invalid configuration key bogus_key" \
        in res.stderr, (res.stdout, res.stderr)
    want[ent((USER, None))] = {"consumer_byte_rate": 1000.0}
    del want[ent((CLIENT, "app"))]["request_percentage"]
    assert w.describe() == (NONE, None, want)
    w.close()


# ---- request_percentage: the crossing answer carries the throttle --------

# 2 samples of 10 s: the rate is taken over at least 10 s, and Kafka bounds
# a request_percentage throttle by one window, so the answer that crosses
# a tiny quota carries exactly 10000 ms whatever the handler took (any
# measured microsecond is ~10^4 times a 1e-9 % quota).
REQ_WINDOWS = {"quota.window.num": "2", "quota.window.size.seconds": "10"}
REQ_BOUND_MS = 10000


def _req_quota_broker(broker_factory, **sets):
    """A broker where every client id but "admin" has a request_percentage
    so small that a few requests cross it."""
    b = broker_factory(**sets)
    b.create_topic("q-req")
    w = Wire(b.port, client_id="admin")
    set_quota(w, [(USER, "ANONYMOUS"), (CLIENT, "admin")],
              request_percentage=1000)
    set_quota(w, [(CLIENT, None)], request_percentage=1e-9)
    w.close()
    return b


def _first_i32(resp, flexible):
    """throttle_time_ms of an answer whose body starts with it."""
    return struct.unpack_from(">i", resp, 5 if flexible else 4)[0]


def _api_versions_throttle(resp):
    r = kw.Reader(resp)
    r.i32()                                   # header v0, always
    assert r.i16() == 0
    for _ in range(r.uvarint() - 1):
        r.i16(), r.i16(), r.i16()
        r.skip_tags()
    return r.i32()


def _metadata_v12(corr, cid):
    body = kw.uvarint(0) + b"\x00\x00" + kw.uvarint(0)   # all topics
    return kw.request(3, 12, corr, body, client_id=cid, flexible=True)


def _list_offsets_v5(corr, cid):
    body = struct.pack(">ib", -1, 0) + struct.pack(">i", 1)
    body += kw.string("q-req") + struct.pack(">iiiq", 1, 0, -1, -1)
    return kw.request(2, 5, corr, body, client_id=cid)


def _describe_configs_v1(corr, cid):
    body = struct.pack(">ib", 1, 2) + kw.string("q-req")
    body += struct.pack(">i?", -1, False)
    return kw.request(32, 1, corr, body, client_id=cid)


# (name, request builder, throttle_time_ms of the answer)
REQ_APIS = [
    ("metadata", _metadata_v12, lambda r: _first_i32(r, True)),
    ("api_versions",
     lambda corr, cid: kw.api_versions_request(corr, 3, cid),
     _api_versions_throttle),
    ("list_offsets", _list_offsets_v5, lambda r: _first_i32(r, False)),
    ("describe_configs", _describe_configs_v1, lambda r: _first_i32(r, False)),
]


def _until_throttled(port, cid, build, throttle_of, answers=10):
    """Sends one request at a time until an answer carries a throttle;
    returns (socket, throttle_ms) or fails after `answers` answers."""
    s = kw.connect("127.0.0.1", port, timeout=10 * SLOW)
    for corr in range(1, answers + 1):
        s.sendall(build(corr, cid))
        resp = kw.recv_frame(s)
        assert resp is not None, "connection closed"
        assert struct.unpack_from(">i", resp)[0] == corr
        t = throttle_of(resp)
        if t:
            return s, t
    s.close()
    pytest.fail("%s: no answer carried throttle_time_ms" % cid)


def test_request_quota_throttle_in_every_answer(broker_factory):
    """Over request_percentage, the answer of the request that crossed the
    quota carries throttle_time_ms (bounded by one window, as in Kafka),
    for Metadata, ApiVersions (the field after api_keys), ListOffsets and
    DescribeConfigs, each client id on its own rate; then the connection
    is muted: a further request stays unanswered while the broker counts
    the connection throttled."""
    b = _req_quota_broker(broker_factory, **REQ_WINDOWS)
    socks = []
    try:
        got = {}
        for name, build, throttle_of in REQ_APIS:
            s, t = _until_throttled(b.port, "r-" + name, build, throttle_of)
            socks.append(s)
            got[name] = t
        assert got == {n: REQ_BOUND_MS for n, _, _ in REQ_APIS}, got
        m = metrics(b)
        assert m['cairn_quota_throttled_total{quota="request_percentage"}'] \
            >= len(REQ_APIS), m
        # The Metadata connection: muted after its throttled answer.
        s = socks[0]
        s.sendall(_metadata_v12(99, "r-metadata"))
        deadline = time.monotonic() + 10 * SLOW
        seen = False
        while time.monotonic() < deadline and not seen:
            seen = metrics(b)["cairn_net_throttled_connections"] >= 1
            time.sleep(0.05)
        assert seen
        # 10 s throttle: 1 s without the answer cannot be mere slowness.
        s.settimeout(1)
        with pytest.raises(OSError):
            kw.recv_frame(s)
        # The admin's own client id is not held back.
        w = Wire(b.port, client_id="admin")
        assert w.describe()[0] == NONE
        w.close()
    finally:
        for s in socks:
            s.close()


@pytest.mark.skipif(SANITIZED, reason="client behaviour: release build only")
def test_request_quota_reported_to_librdkafka(broker_factory):
    """confluent-kafka's AdminClient, doing nothing but Metadata (and its
    ApiVersions), is told of a request_percentage throttle: throttle_cb
    fires with a time > 0."""
    from confluent_kafka.admin import AdminClient
    b = _req_quota_broker(broker_factory, **SHORT_WINDOWS)
    seen = []
    a = AdminClient({"bootstrap.servers": b.bootstrap, "client.id": "lib",
                     "throttle_cb": lambda ev: seen.append(ev.throttle_time)})
    deadline = time.monotonic() + 60 * SLOW
    while not any(t > 0 for t in seen) and time.monotonic() < deadline:
        a.list_topics(timeout=30 * SLOW)
        a.poll(0.1)
    assert any(t > 0 for t in seen), seen


@pytest.mark.skipif(SANITIZED, reason="the reference Kafka is a JVM: "
                    "release build only")
def test_request_quota_answers_match_kafka(broker, kafka):
    """Apache Kafka 4.4.0 and Cairn, each with a tiny request_percentage
    on a client id per API and default windows: the Metadata, ApiVersions,
    ListOffsets and DescribeConfigs answers that cross it carry the same
    throttle_time_ms, the one-window bound (1000 ms)."""
    got = {}
    for name, target in (("kafka", kafka), ("cairn", broker)):
        w = Wire(target.port, client_id="admin")
        cids = ["ref-" + n for n, _, _ in REQ_APIS]
        for cid in cids:
            set_quota(w, [(CLIENT, cid)], request_percentage=1e-9)
        try:
            for (api, build, throttle_of), cid in zip(REQ_APIS, cids):
                # Kafka applies a quota once its metadata is published:
                # unthrottled answers until then (a few at most).
                s, t = _until_throttled(target.port, cid, build, throttle_of,
                                        answers=2000)
                s.close()
                got[(name, api)] = t
        finally:
            res = w.alter([([(CLIENT, cid)], [("request_percentage", 0.0,
                                               True)]) for cid in cids])
            w.close()
        assert all(c == NONE for _, c, _ in res), res
    want = {(n, a): 1000 for n in ("kafka", "cairn") for a, _, _ in REQ_APIS}
    assert got == want, got


def test_request_quota_not_before_sasl_authentication(sasl_broker):
    """On a SASL listener, ApiVersions before authentication is answered
    outside the quotas (Kafka's authenticator): throttle_time_ms 0 however
    small the quota; once the same connection has authenticated as alice,
    an answer that crosses the quota carries the throttle."""
    b = sasl_broker()
    w = Wire(b.port, client_id="admin")
    assert test_sasl.scram_login(w.sock)[0] == 0
    w.corr = 10
    set_quota(w, [(USER, "alice"), (CLIENT, "admin")],
              request_percentage=1000)
    set_quota(w, [(CLIENT, None)], request_percentage=1e-9)
    w.close()
    s = kw.connect("127.0.0.1", b.port, timeout=10 * SLOW)
    for corr in range(1, 6):
        s.sendall(kw.api_versions_request(corr, 3, "r-sasl"))
        resp = kw.recv_frame(s)
        assert resp is not None
        assert _api_versions_throttle(resp) == 0
    assert test_sasl.scram_login(s)[0] == 0
    for corr in range(10, 20):
        s.sendall(kw.api_versions_request(corr, 3, "r-sasl"))
        resp = kw.recv_frame(s)
        assert resp is not None
        t = _api_versions_throttle(resp)
        if t:
            break
    assert t == 1000, t
    s.close()
