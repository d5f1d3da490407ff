"""Authorization (issue #18): the StandardAuthorizer switch, the ACL APIs,
and Kafka's per-API checks for an exactly-once application.

Every connection is User:ANONYMOUS until SASL lands, so two callers are
told apart by host: the application connects from 127.0.0.1, the
administrator's raw connection is bound to 127.0.0.2, and only that host
holds ALTER/DESCRIBE on the cluster.  The ACLs the application gets are
exactly what a transactional read-process-write app needs.
"""

import os
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

import kafka_wire as kw
from conftest import CAIRN_BIN, SLOW

STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
ANON = "User:ANONYMOUS"
HERE = Path(__file__).resolve().parent

# Kafka's codes (ResourceType, PatternType, AclOperation, AclPermission).
TOPIC, GROUP, CLUSTER, TXN = 2, 3, 4, 5
ANY, MATCH, LITERAL, PREFIXED = 1, 2, 3, 4
ALL, READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE = 2, 3, 4, 5, 6, 7, 8
IDEMPOTENT_WRITE = 12
DENY, ALLOW = 2, 3

TOPIC_AUTH, GROUP_AUTH, CLUSTER_AUTH, TXN_AUTH = 29, 30, 31, 53
SECURITY_DISABLED = 54


def create_acls_request(corr, bindings):
    """CreateAcls v1; bindings: (rtype, name, pattern, principal, host, op,
    perm) tuples."""
    body = struct.pack(">i", len(bindings))
    for rt, name, pt, who, host, op, perm in bindings:
        body += struct.pack(">b", rt) + kw.string(name) + struct.pack(">b", pt)
        body += kw.string(who) + kw.string(host) + struct.pack(">bb", op, perm)
    return kw.request(30, 1, corr, body)


def parse_create_acls(body):
    r = kw.Reader(body)
    r.i32()
    r.i32()
    out = []
    for _ in range(r.i32()):
        out.append((r.i16(), r.string()))
    return out


def delete_acls_request(corr, filters):
    """DeleteAcls v1; filters like bindings, None = any string."""
    body = struct.pack(">i", len(filters))
    for rt, name, pt, who, host, op, perm in filters:
        body += struct.pack(">b", rt) + kw.string(name) + struct.pack(">b", pt)
        body += kw.string(who) + kw.string(host) + struct.pack(">bb", op, perm)
    return kw.request(31, 1, corr, body)


def parse_delete_acls(body):
    r = kw.Reader(body)
    r.i32()
    r.i32()
    out = []
    for _ in range(r.i32()):
        err, _msg = r.i16(), r.string()
        matched = []
        for _ in range(r.i32()):
            r.i16()
            r.string()
            matched.append((r.i8(), r.string(), r.i8(), r.string(),
                            r.string(), r.i8(), r.i8()))
        out.append((err, matched))
    return out


def describe_acls_request(corr, rt=ANY, name=None, pt=ANY, who=None,
                          host=None, op=ANY, perm=ANY):
    body = struct.pack(">b", rt) + kw.string(name) + struct.pack(">b", pt)
    body += kw.string(who) + kw.string(host) + struct.pack(">bb", op, perm)
    return kw.request(29, 1, corr, body)


def parse_describe_acls(body):
    r = kw.Reader(body)
    r.i32()
    r.i32()
    err, _msg = r.i16(), r.string()
    out = []
    for _ in range(r.i32()):
        rt, name, pt = r.i8(), r.string(), r.i8()
        for _ in range(r.i32()):
            out.append((rt, name, pt, r.string(), r.string(), r.i8(), r.i8()))
    return err, sorted(out)


class Admin(kw.Client):
    """A raw connection from 127.0.0.2: the host holding cluster rights."""

    def __init__(self, port):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.settimeout(10 * SLOW)
        s.bind(("127.0.0.2", 0))
        s.connect(("127.0.0.1", port))
        self.sock = s
        self.corr = 0

    def create(self, *bindings):
        res = parse_create_acls(self.call(create_acls_request,
                                          list(bindings)))
        assert all(e == 0 for e, _ in res), res

    def delete(self, *filters):
        res = parse_delete_acls(self.call(delete_acls_request,
                                          list(filters)))
        assert all(e == 0 for e, _ in res), res
        return [m for _, ms in res for m in ms]

    def describe(self, **kw_):
        return parse_describe_acls(self.call(describe_acls_request, **kw_))


ADMIN_ACLS = [(CLUSTER, "kafka-cluster", LITERAL, ANON, "127.0.0.2", ALTER,
               ALLOW),
              (CLUSTER, "kafka-cluster", LITERAL, ANON, "127.0.0.2", DESCRIBE,
               ALLOW)]


def app_acls(inp, out, group, tid):
    """What a transactional read-process-write application needs."""
    return {
        "read input": (TOPIC, inp, LITERAL, ANON, "127.0.0.1", READ, ALLOW),
        "write output": (TOPIC, out, LITERAL, ANON, "127.0.0.1", WRITE,
                         ALLOW),
        "read group": (GROUP, group, LITERAL, ANON, "127.0.0.1", READ, ALLOW),
        "write txn id": (TXN, tid, LITERAL, ANON, "127.0.0.1", WRITE, ALLOW),
    }


def start_secured(broker_factory, **extra):
    sets = {"authorizer.class.name": STANDARD,
            "allow.everyone.if.no.acl.found": "false",
            "auto.create.topics.enable": "false"}
    sets.update(extra)
    return broker_factory(**sets)


def test_acl_apis_answer_security_disabled_without_authorizer(broker_factory):
    b = broker_factory()
    c = kw.Client(b.port)
    err, _ = parse_describe_acls(c.call(describe_acls_request))
    assert err == SECURITY_DISABLED
    res = parse_create_acls(c.call(create_acls_request, [ADMIN_ACLS[0]]))
    assert res[0][0] == SECURITY_DISABLED
    c.close()


def test_unknown_authorizer_class_refused(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    res = subprocess.run(
        [str(CAIRN_BIN), "--set", "listeners=PLAINTEXT://127.0.0.1:0",
         "--set", "log.dirs=%s" % data, "--set", "http.listener=",
         "--set", "authorizer.class.name=com.example.NoSuchAuthorizer"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        timeout=30 * SLOW)
    assert res.returncode != 0
    assert "com.example.NoSuchAuthorizer" in res.stderr + res.stdout


def test_acl_store_survives_restart_and_damage_stops_start(broker_factory):
    b = start_secured(broker_factory)
    a = Admin(b.port)
    # Nobody holds ALTER on the cluster yet: the first admin comes from
    # super.users, as in Kafka.
    with pytest.raises(AssertionError):
        a.create(*ADMIN_ACLS)
    a.close()
    b.stop()
    b.sets["super.users"] = "User:nobody;" + ANON
    b.start()
    a = Admin(b.port)
    a.create(*ADMIN_ACLS)
    a.create((TOPIC, "pre-", PREFIXED, "User:*", "*", READ, DENY))
    a.close()
    b.stop()
    del b.sets["super.users"]
    b.start()
    a = Admin(b.port)
    err, acls = a.describe()
    assert err == 0
    assert (TOPIC, "pre-", PREFIXED, "User:*", "*", READ, DENY) in acls
    assert len(acls) == 3
    # MATCH finds the prefixed binding for a topic it covers.
    err, acls = a.describe(rt=TOPIC, name="pre-x", pt=MATCH)
    assert [x[1] for x in acls] == ["pre-"]
    a.close()
    b.stop()
    path = Path(b.data_dir) / "acls"
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0x01
    path.write_bytes(bytes(raw))
    with pytest.raises(BaseException):
        b.start(timeout=10 * SLOW)
    assert "acls" in b.log_tail() and "damaged" in b.log_tail()
    b.proc = None                # its refusal to start was the point
    b.unexpected_exit = None


def wait_line(proc, want, timeout):
    """Lines of proc's stdout until one equals want; the lines read."""
    seen = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        seen.append(line.strip())
        if line.strip() == want:
            return seen
    return seen


def test_eos_app_with_exact_acls_then_each_removed(broker_factory):
    inp, out, group, tid = "acl-in", "acl-out", "acl-group", "acl-tx"
    b = start_secured(broker_factory, **{"super.users": ANON})
    b.create_topic(inp)
    b.create_topic(out)
    from confluent_kafka import Producer
    p = Producer({"bootstrap.servers": b.bootstrap})
    for i in range(10):
        p.produce(inp, value=b"v%d" % i, partition=0)
    assert p.flush(30 * SLOW) == 0
    a = Admin(b.port)
    a.create(*ADMIN_ACLS)
    acls = app_acls(inp, out, group, tid)
    a.create(*acls.values())
    a.close()
    b.stop()
    del b.sets["super.users"]
    b.start()

    app = subprocess.Popen(
        [sys.executable, str(HERE / "rpw_app.py"), b.bootstrap, inp, out,
         group, tid, "--batch", "5", "--max-seconds", str(90 * SLOW)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        seen = wait_line(app, "committed 10", 90 * SLOW)
    finally:
        app.kill()
        app.wait(timeout=30)
    assert "committed 10" in seen, seen

    c = kw.Client(b.port)
    a = Admin(b.port)
    # With every ACL: the id is listed and describable.
    _, _, _, listed = kw.parse_list_transactions(
        c.call(kw.list_transactions_request))
    assert tid in listed

    def idempotent_init():
        return c.init_producer_id(version=4)[0]

    def txn_init():
        return c.init_producer_id(version=4, transactional_id=tid)[0]

    def produce_out():
        return c.produce(out, 0, kw.record_batch([b"x"]), acks=1)[0]

    def fetch_in():
        _, _, parts = kw.parse_fetch_v11(c.call(kw.fetch_request_v11, inp,
                                                0, 0))
        return parts[(inp, 0)][0]

    def find_group():
        body = c.call(kw.find_coordinator_request, group, key_type=0)
        return kw.parse_find_coordinator(body, 1)[1][0]["error"]

    def find_txn():
        body = c.call(kw.find_coordinator_request, tid, key_type=1)
        return kw.parse_find_coordinator(body, 1)[1][0]["error"]

    def describe_txn():
        _, d = kw.parse_describe_transactions(
            c.call(kw.describe_transactions_request, [tid]))
        return d[tid]["error"]

    def end_txn():
        body = c.call(kw.end_txn_request, tid, 1, 0, False)
        return kw.parse_end_txn(body, 1)[1]

    def listed_txn():
        _, _, _, ids = kw.parse_list_transactions(
            c.call(kw.list_transactions_request))
        return tid in ids

    # (ACL removed, [(call, error it must get)], transaction listed?)
    table = [
        ("write txn id", [(txn_init, TXN_AUTH), (find_txn, TXN_AUTH),
                          (describe_txn, TXN_AUTH), (end_txn, TXN_AUTH)],
         False),
        ("write output", [(produce_out, TOPIC_AUTH),
                          (idempotent_init, CLUSTER_AUTH)], True),
        ("read input", [(fetch_in, TOPIC_AUTH)], True),
        ("read group", [(find_group, GROUP_AUTH)], True),
    ]
    for name, checks, listed_after in table:
        binding = acls[name]
        gone = a.delete(binding)
        assert len(gone) == 1, (name, gone)
        for call, want in checks:
            assert call() == want, (name, call.__name__)
        assert listed_txn() == listed_after, name
        a.create(binding)
        for call, want in checks:
            if want:
                assert call() != want, ("restored", name, call.__name__)
    # Idempotent-only InitProducerId: IDEMPOTENT_WRITE on the cluster or
    # WRITE on some topic (KIP-679); with neither it is refused.
    a.delete(acls["write output"])
    assert idempotent_init() == CLUSTER_AUTH
    a.create((CLUSTER, "kafka-cluster", LITERAL, ANON, "127.0.0.1",
              IDEMPOTENT_WRITE, ALLOW))
    assert idempotent_init() == 0
    # A DENY wins over the ALLOW.
    a.create((TOPIC, inp, LITERAL, "User:*", "*", READ, DENY))
    assert fetch_in() == TOPIC_AUTH
    c.close()
    a.close()
    assert "DENIED principal=User:ANONYMOUS" in open(b.log_path).read()


# Raw requests (non-flexible versions) for the admin APIs, one resource
# each; every parser returns the error codes the test looks at.
DESCRIBE_CONFIGS, ALTER_CONFIGS = 10, 11
RES_TOPIC, RES_BROKER = 2, 4
UNKNOWN_TOPIC = 3
NODE = "1"                       # the broker resource: node.id


def create_topics_v4(corr, name):
    body = struct.pack(">i", 1) + kw.string(name)
    body += struct.pack(">ihii", 1, -1, 0, 0)
    return kw.request(19, 4, corr, body + struct.pack(">ib", 30000, 0))


def create_topics_v5(corr, name):
    """Flexible: the version that returns the created topic's configs."""
    body = kw.uvarint(2) + kw.compact_string(name)
    body += struct.pack(">ih", 1, -1) + kw.uvarint(1) + kw.uvarint(1)
    body += kw.uvarint(0) + struct.pack(">ib", 30000, 0) + kw.uvarint(0)
    return kw.request(19, 5, corr, body, flexible=True)


def created_configs(body):
    """(error, number of configs, topic_config_error_code or None)."""
    r = kw.Reader(body)
    r.i32()
    r.skip_tags()
    r.i32()
    r.uvarint()
    r.compact_string()
    err = r.i16()
    r.compact_string()
    r.i32()
    r.i16()
    n = r.uvarint() - 1
    for _ in range(max(n, 0)):
        r.compact_string()
        r.compact_string()
        r.i8()
        r.i8()
        r.i8()
        r.skip_tags()
    cfg_err = None
    for _ in range(r.uvarint()):
        tag, size = r.uvarint(), r.uvarint()
        assert tag == 0 and size == 2
        cfg_err = r.i16()
    return err, n, cfg_err


def delete_topics_v3(corr, name):
    body = struct.pack(">i", 1) + kw.string(name) + struct.pack(">i", 30000)
    return kw.request(20, 3, corr, body)


def create_partitions_v1(corr, name, count):
    body = struct.pack(">i", 1) + kw.string(name)
    body += struct.pack(">iiib", count, -1, 30000, 0)
    return kw.request(37, 1, corr, body)


def describe_configs_v1(corr, rtype, name):
    body = struct.pack(">ib", 1, rtype) + kw.string(name)
    return kw.request(32, 1, corr, body + struct.pack(">ib", -1, 0))


def alter_configs_v0(corr, rtype, name, key, value, incremental=False):
    body = struct.pack(">ib", 1, rtype) + kw.string(name)
    body += struct.pack(">i", 1) + kw.string(key)
    if incremental:
        body += struct.pack(">b", 0)          # SET
    body += kw.string(value) + struct.pack(">b", 0)
    return kw.request(44 if incremental else 33, 0, corr, body)


def describe_groups_v0(corr, group):
    return kw.request(15, 0, corr, struct.pack(">i", 1) + kw.string(group))


def list_groups_v0(corr):
    return kw.request(16, 0, corr, b"")


def offset_delete_v0(corr, group, topic, partition):
    body = kw.string(group) + struct.pack(">i", 1) + kw.string(topic)
    return kw.request(47, 0, corr, body + struct.pack(">ii", 1, partition))


def first_error(body, throttle=True):
    """The first result's error: [correlation, throttle,] count, error."""
    r = kw.Reader(body)
    r.i32()
    if throttle:
        r.i32()
    r.i32()
    return r.i16()


def named_error(body):
    """Results shaped [name, error]: the first error."""
    r = kw.Reader(body)
    r.i32()
    r.i32()
    r.i32()
    r.string()
    return r.i16()


def list_groups(body):
    r = kw.Reader(body)
    r.i32()
    err = r.i16()
    groups = []
    for _ in range(r.i32()):
        groups.append(r.string())
        r.string()
    return err, groups


def offset_delete(body):
    """(top-level error, first partition's error or None)."""
    r = kw.Reader(body)
    r.i32()
    err = r.i16()
    r.i32()
    n = r.i32()
    if n <= 0:
        return err, None
    r.string()
    r.i32()
    r.i32()
    return err, r.i16()


def test_admin_apis_check_what_kafka_checks(broker_factory):
    """Each admin API with the ACL Kafka wants and without it: the
    specific error per resource and an audit line, never a closed
    connection (they are no longer super.users-only)."""
    b = start_secured(broker_factory, **{"super.users": ANON})
    for t in ("az-cp", "az-cfg", "az-od", "az-del"):
        b.create_topic(t)
    c = kw.ReadClient(b.port)
    for g in ("az-desc", "az-od", "az-dg"):
        assert set(c.offset_commit(g, {("az-od", 0): 1}).values()) == {0}
    c.close()
    a = Admin(b.port)
    a.create(*ADMIN_ACLS)
    a.close()
    b.stop()
    del b.sets["super.users"]
    b.start()
    a = Admin(b.port)
    c = kw.Client(b.port)

    def acl(rt, name, op):
        return (rt, name, LITERAL, ANON, "127.0.0.1", op, ALLOW)

    def cluster(op):
        return acl(CLUSTER, "kafka-cluster", op)

    # (API, ACLs it needs, call -> error code, error without the ACLs)
    table = [
        ("CreateTopics", [acl(TOPIC, "az-new", CREATE)],
         lambda: named_error(c.call(create_topics_v4, "az-new")), TOPIC_AUTH),
        ("CreateTopics cluster", [cluster(CREATE)],
         lambda: named_error(c.call(create_topics_v4, "az-new2")),
         TOPIC_AUTH),
        ("CreatePartitions", [acl(TOPIC, "az-cp", ALTER)],
         lambda: named_error(c.call(create_partitions_v1, "az-cp", 2)),
         TOPIC_AUTH),
        ("DescribeConfigs topic", [acl(TOPIC, "az-cfg", DESCRIBE_CONFIGS)],
         lambda: first_error(c.call(describe_configs_v1, RES_TOPIC,
                                    "az-cfg")), TOPIC_AUTH),
        ("DescribeConfigs broker", [cluster(DESCRIBE_CONFIGS)],
         lambda: first_error(c.call(describe_configs_v1, RES_BROKER,
                                    NODE)), CLUSTER_AUTH),
        ("AlterConfigs topic", [acl(TOPIC, "az-cfg", ALTER_CONFIGS)],
         lambda: first_error(c.call(alter_configs_v0, RES_TOPIC, "az-cfg",
                                    "retention.ms", "86400000")),
         TOPIC_AUTH),
        ("AlterConfigs broker", [cluster(ALTER_CONFIGS)],
         lambda: first_error(c.call(alter_configs_v0, RES_BROKER,
                                    NODE, "message.max.bytes",
                                    "2000000")), CLUSTER_AUTH),
        ("IncrementalAlterConfigs topic",
         [acl(TOPIC, "az-cfg", ALTER_CONFIGS)],
         lambda: first_error(c.call(alter_configs_v0, RES_TOPIC, "az-cfg",
                                    "retention.ms", "86400001", True)),
         TOPIC_AUTH),
        ("IncrementalAlterConfigs broker", [cluster(ALTER_CONFIGS)],
         lambda: first_error(c.call(alter_configs_v0, RES_BROKER,
                                    NODE, "message.max.bytes",
                                    "2000000", True)), CLUSTER_AUTH),
        ("DescribeGroups", [acl(GROUP, "az-desc", DESCRIBE)],
         lambda: first_error(c.call(describe_groups_v0, "az-desc"), False),
         GROUP_AUTH),
        ("OffsetDelete group", [acl(GROUP, "az-od", DELETE),
                                acl(TOPIC, "az-od", READ)],
         lambda: offset_delete(c.call(offset_delete_v0, "az-od", "az-od",
                                      0))[0], GROUP_AUTH),
        ("DeleteGroups", [acl(GROUP, "az-dg", DELETE)],
         lambda: kw.parse_delete_groups_v1(c.call(
             kw.delete_groups_request_v1, ["az-dg"]))["az-dg"], GROUP_AUTH),
        ("DeleteTopics", [acl(TOPIC, "az-del", DELETE)],
         lambda: named_error(c.call(delete_topics_v3, "az-del")), TOPIC_AUTH),
    ]
    for name, acls, call, want in table:
        assert call() == want, name
        a.create(*acls)
        assert call() == 0, name
        assert a.delete(*acls), name

    # A created topic's configs only with DESCRIBE_CONFIGS on it.
    a.create(cluster(CREATE))
    assert created_configs(c.call(create_topics_v5, "az-c5")) == \
        (0, 0, TOPIC_AUTH)
    a.create(acl(TOPIC, "az-c6", DESCRIBE_CONFIGS))
    err, n, cfg_err = created_configs(c.call(create_topics_v5, "az-c6"))
    assert err == 0 and n > 0 and cfg_err is None
    a.delete(cluster(CREATE))

    # ListGroups is filtered, not refused: DESCRIBE on a group shows it,
    # DESCRIBE on the cluster shows all.
    assert list_groups(c.call(list_groups_v0)) == (0, [])
    a.create(acl(GROUP, "az-desc", DESCRIBE))
    assert list_groups(c.call(list_groups_v0)) == (0, ["az-desc"])
    a.create(cluster(DESCRIBE))
    err, groups = list_groups(c.call(list_groups_v0))
    assert err == 0 and sorted(groups) == ["az-desc", "az-od"]
    a.delete(acl(GROUP, "az-desc", DESCRIBE), cluster(DESCRIBE))

    # OffsetDelete: DELETE on the group but no READ on the topic fails the
    # partition, not the request.
    a.create(acl(GROUP, "az-od", DELETE))
    assert offset_delete(c.call(offset_delete_v0, "az-od", "az-od", 0)) == \
        (0, TOPIC_AUTH)
    # DeleteTopics hides whether a topic exists from a caller that may
    # not DESCRIBE it; with DESCRIBE the caller learns it is unknown.
    assert named_error(c.call(delete_topics_v3, "az-none")) == TOPIC_AUTH
    a.create(acl(TOPIC, "az-none", DESCRIBE))
    assert named_error(c.call(delete_topics_v3, "az-none")) == UNKNOWN_TOPIC
    # DESCRIBE alone does not let the caller delete.
    a.create(acl(TOPIC, "az-cfg", DESCRIBE))
    assert named_error(c.call(delete_topics_v3, "az-cfg")) == TOPIC_AUTH
    c.close()
    a.close()
    log = open(b.log_path).read()
    for line in ("operation=CREATE resource=TOPIC:az-new",
                 "operation=ALTER_CONFIGS resource=CLUSTER:kafka-cluster",
                 "operation=DELETE resource=GROUP:az-dg",
                 "operation=DESCRIBE resource=TOPIC:az-none"):
        assert "DENIED principal=User:ANONYMOUS host=127.0.0.1 " + line in \
            log, line
    assert "super.users only" not in log


def cairnctl(b, *args):
    import json
    from conftest import run, tool
    res = run([tool("cairnctl"), "--bootstrap-server", b.bootstrap, "--json"]
              + list(args), timeout=30 * SLOW)
    return res.returncode, (json.loads(res.stdout) if res.returncode == 0
                            else res.stderr)


def test_cairnctl_acls_agree_with_the_wire(broker_factory):
    b = start_secured(broker_factory, **{"super.users": ANON})
    rc, out = cairnctl(b, "acls", "add", "--resource", "topic:orders",
                       "--pattern-type", "prefixed", "--principal",
                       "User:app", "--operation", "write")
    assert rc == 0, out
    rc, out = cairnctl(b, "acls", "add", "--resource", "transactional_id:tx",
                       "--principal", "User:app", "--host", "10.0.0.1",
                       "--operation", "WRITE", "--deny")
    assert rc == 0, out
    rc, out = cairnctl(b, "acls", "add", "--resource", "topic:x",
                       "--principal", "nocolon", "--operation", "read")
    assert rc == 1 and "INVALID_REQUEST" in out
    rc, listed = cairnctl(b, "acls", "list")
    assert rc == 0
    assert sorted((x["resource_type"], x["name"], x["pattern_type"],
                   x["principal"], x["host"], x["operation"],
                   x["permission"]) for x in listed) == [
        ("TOPIC", "orders", "PREFIXED", "User:app", "*", "WRITE", "ALLOW"),
        ("TRANSACTIONAL_ID", "tx", "LITERAL", "User:app", "10.0.0.1",
         "WRITE", "DENY")]
    a = kw.Client(b.port)
    err, wire = parse_describe_acls(a.call(describe_acls_request))
    assert err == 0 and len(wire) == 2
    assert (TOPIC, "orders", PREFIXED, "User:app", "*", WRITE, ALLOW) in wire
    a.close()
    # MATCH: what applies to topic orders-eu.
    rc, listed = cairnctl(b, "acls", "list", "--resource", "topic:orders-eu",
                          "--pattern-type", "match")
    assert rc == 0 and [x["name"] for x in listed] == ["orders"]
    rc, out = cairnctl(b, "acls", "remove", "--resource", "transactional_id")
    assert rc == 0 and out == {"removed": 1}
    rc, listed = cairnctl(b, "acls", "list")
    assert rc == 0 and len(listed) == 1


@pytest.mark.skipif(os.environ.get("CAIRN_SANITIZED") == "1",
                    reason="Kafka's tools run against the release broker")
def test_kafka_acls_tool_and_cairnctl_agree(broker_factory, tmp_path):
    import java_harness
    cp = java_harness.classpath()
    b = start_secured(broker_factory, **{"super.users": ANON})

    def kafka_acls(*args):
        err = tmp_path / ("acls.%d.stderr" % len(list(tmp_path.iterdir())))
        res = java_harness.run_java(
            cp, "org.apache.kafka.tools.AclCommand",
            ["--bootstrap-server", b.bootstrap] + list(args), 120 * SLOW, err)
        assert res.returncode == 0, (args, res.stdout, err.read_text()[-2000:])
        return res.stdout

    kafka_acls("--add", "--allow-principal", "User:app", "--operation",
               "Read", "--operation", "Write", "--topic", "orders",
               "--resource-pattern-type", "prefixed")
    kafka_acls("--add", "--deny-principal", "User:eve", "--deny-host",
               "10.1.2.3", "--operation", "Write", "--transactional-id", "tx")
    rc, listed = cairnctl(b, "acls", "list")
    assert rc == 0
    assert sorted((x["resource_type"], x["name"], x["pattern_type"],
                   x["principal"], x["host"], x["operation"],
                   x["permission"]) for x in listed) == [
        ("TOPIC", "orders", "PREFIXED", "User:app", "*", "READ", "ALLOW"),
        ("TOPIC", "orders", "PREFIXED", "User:app", "*", "WRITE", "ALLOW"),
        ("TRANSACTIONAL_ID", "tx", "LITERAL", "User:eve", "10.1.2.3",
         "WRITE", "DENY")]
    rc, out = cairnctl(b, "acls", "add", "--resource", "group:g",
                       "--principal", "User:app", "--operation", "read")
    assert rc == 0, out
    out = kafka_acls("--list", "--group", "g")
    assert "ResourcePattern(resourceType=GROUP, name=g, patternType=LITERAL)" \
        in out, out
    assert "(principal=User:app, host=*, operation=READ, " \
        "permissionType=ALLOW)" in out, out
