"""Cluster mode (issue #13, the metadata quorum): three brokers that are
also the three voters register with the active controller, heartbeat, are
fenced when they go silent and come back when restarted; the controller
fails over when its node dies; and configurations the quorum cannot work
with fail start-up naming the key.

Every process is killed by pid at teardown (cluster_factory); every wait is
a bounded poll (wait_until).  Topics are not yet placed across brokers, so
nothing here produces or consumes.
"""

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import (CAIRN_BIN, SANITIZED, SLOW, BUILD_DIR, free_port,
                      needs_cairn, run, wait_until)

pytestmark = needs_cairn

# Election (0.5 s) plus registration and unfencing, on a busy 2-core
# machine; sanitizer builds are several times slower.
REGISTER_S = 20 * SLOW


def test_three_register_and_agree(cluster_factory):
    c = cluster_factory()
    ctl = c.wait_registered([1, 2, 3], REGISTER_S)
    # Every broker gives the same cluster id and lists the others at their
    # client listeners (the ones this request came in on).
    ids = set()
    for b in c.nodes:
        got_ctl, brokers, cid = c.describe(b.node_id)
        assert got_ctl == ctl
        ids.add(cid)
        for n in c.nodes:
            assert brokers[n.node_id] == ("127.0.0.1", n.port), brokers
    assert len(ids) == 1 and ids.pop()
    # A clean stop with registrations and heartbeats in flight (peer calls
    # cancelled, the quorum closed) exits 0; the controller last.
    for b in sorted(c.nodes, key=lambda b: b.node_id == ctl):
        tail = b.log_tail
        assert c.stop(b.node_id) == 0, tail()


def test_cairnctl_cluster_describe(cluster_factory):
    c = cluster_factory()
    ctl = c.wait_registered([1, 2, 3], REGISTER_S)
    cairnctl = str(BUILD_DIR / "cairnctl")
    # Asked of a node that is not the controller: the quorum still comes
    # from the controller, which knows every voter's log end offset.
    other = next(b for b in c.nodes if b.node_id != ctl)

    def described():
        res = run([cairnctl, "--bootstrap-server", other.bootstrap, "--json",
                   "cluster", "describe"], timeout=30 * SLOW)
        if res.returncode != 0:
            return None
        d = json.loads(res.stdout)
        q = d["quorum"]
        if not q or len(q["voters"]) != 3:
            return None
        if any(v["log_end_offset"] < 0 for v in q["voters"]):
            return None
        return d
    d = wait_until("cairnctl cluster describe with 3 voters", described,
                   REGISTER_S)
    assert d["controller_id"] == ctl
    assert sorted(b["id"] for b in d["brokers"]) == [1, 2, 3]
    assert d["quorum"]["leader_id"] == ctl
    assert d["quorum"]["high_watermark"] > 0
    assert sorted(v["id"] for v in d["quorum"]["voters"]) == [1, 2, 3]
    res = run([cairnctl, "--bootstrap-server", other.bootstrap, "cluster",
               "describe"], timeout=30 * SLOW)
    assert res.returncode == 0, res.stderr
    assert "Controller:  %d" % ctl in res.stdout, res.stdout
    assert "High watermark:" in res.stdout, res.stdout


@pytest.mark.skipif(SANITIZED, reason="client view: release build only")
def test_confluent_admin_sees_three(cluster_factory):
    c = cluster_factory()
    ctl = c.wait_registered([1, 2, 3], REGISTER_S)
    # Metadata, as librdkafka sees the cluster (the system's confluent_kafka
    # predates AdminClient.describe_cluster).
    script = (
        "import sys\n"
        "from confluent_kafka.admin import AdminClient\n"
        "a = AdminClient({'bootstrap.servers': sys.argv[1]})\n"
        "md = a.list_topics(timeout=20)\n"
        "print(md.controller_id, ' '.join(str(i) for i in "
        "sorted(md.brokers)))\n")
    res = run(["/usr/bin/python3", "-c", script, c.bootstrap], timeout=60)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == [str(ctl), "1", "2", "3"], res.stdout


def test_broker_only_node_joins(cluster_factory):
    """A process.roles=broker node on a new directory knows neither the
    cluster id nor the controller: it asks the voters, registers, is added
    to the quorum as a non-voter, catches up and is unfenced."""
    c = cluster_factory()
    c.wait_registered([1, 2, 3], REGISTER_S)
    c.add_broker()
    ctl = c.wait_registered([1, 2, 3, 4], REGISTER_S)
    assert ctl in (1, 2, 3)
    ids = {c.describe(n)[2] for n in (1, 2, 3, 4)}
    assert len(ids) == 1, ids


def test_controller_failover(cluster_factory):
    c = cluster_factory()
    old = c.wait_registered([1, 2, 3], REGISTER_S)
    t0 = time.monotonic()
    c.kill9(old)
    survivors = [n for n in (1, 2, 3) if n != old]

    def new_controller():
        seen = set()
        for n in survivors:
            ctl, _, _ = c.describe(n)
            seen.add(ctl)
        return seen.pop() if len(seen) == 1 and seen != {old} and \
            seen != {-1} else None
    new = wait_until("a new controller after killing %d" % old,
                     new_controller, 15 * SLOW)
    print("new controller %d named %.2fs after kill -9 of %d"
          % (new, time.monotonic() - t0, old))
    assert new in survivors
    # The dead node is fenced by the new controller once its session ends.
    c.wait_registered(survivors,
                      (c.SESSION_MS / 1000 + 2 * c.ELECTION_MS / 1000 + 10)
                      * SLOW)


@pytest.mark.skipif(SANITIZED, reason="waits out a session timeout and "
                    "restarts a node: release build only (failover covers "
                    "kill -9 under the sanitizers)")
def test_broker_fenced_then_back(cluster_factory):
    c = cluster_factory()
    ctl = c.wait_registered([1, 2, 3], REGISTER_S)
    victim = next(n for n in (3, 2, 1) if n != ctl)
    t0 = time.monotonic()
    c.kill9(victim)
    rest = [n for n in (1, 2, 3) if n != victim]
    c.wait_registered(rest, (c.SESSION_MS / 1000 + 10) * SLOW)
    gone = time.monotonic() - t0
    print("node %d fenced %.2fs after kill -9 (session %d ms)"
          % (victim, gone, c.SESSION_MS))
    # Not before its session ran out (less the heartbeat it may have had
    # just sent).
    assert gone >= (c.SESSION_MS - c.HEARTBEAT_MS) / 1000 - 0.5, gone
    c.node(victim).start()
    c.wait_registered([1, 2, 3], REGISTER_S)


def test_controller_apis_only_in_cluster_mode(broker):
    """A single node's listener offers DescribeQuorum (as a Kafka 4 broker
    listener does) but not the controller's own APIs, and closes the
    connection for them as Kafka does."""
    import kafka_wire as kw
    c = kw.TxnClient(broker.port)
    try:
        apis = c.api_versions()
    finally:
        c.close()
    assert apis[55] == (0, 2), apis
    for key in (62, 63, 67):
        assert key not in apis, apis
    sock = kw.connect("127.0.0.1", broker.port)
    try:
        # BrokerHeartbeat v0: id, epoch, offset, want_fence, want_shutdown.
        body = (b"\x00\x00\x00\x01" + b"\x00" * 16 + b"\x00\x00"
                + kw.uvarint(0))
        sock.sendall(kw.request(63, 0, 1, body, flexible=True))
        assert kw.wait_closed(sock, 5), "connection not closed"
    finally:
        sock.close()


def test_controller_apis_advertised_in_cluster_mode(cluster_factory):
    """The controller's APIs are on the CONTROLLER listener only, which
    serves nothing else a client needs (no Produce, Fetch, Metadata), as a
    Kafka controller listener; the broker listener is the reverse."""
    import kafka_wire as kw
    c = cluster_factory()
    cl = kw.TxnClient(c.controller_ports[0])
    try:
        apis = cl.api_versions()
    finally:
        cl.close()
    assert apis[62] == (0, 4) and apis[63] == (0, 1) and apis[67] == (0, 0)
    for key in (19, 20, 37, 55, 60):  # topic changes, cluster, quorum
        assert key in apis, apis
    for key in (0, 1, 2, 3, 10):  # Produce, Fetch, ListOffsets, Metadata...
        assert key not in apis, apis
    cl = kw.TxnClient(c.nodes[0].port)
    try:
        apis = cl.api_versions()
    finally:
        cl.close()
    for key in (62, 63, 67):
        assert key not in apis, apis
    assert 0 in apis and 3 in apis


def _restart_refused(c, node_id, needle):
    """Starts node_id again and expects it to stop by itself, non-zero,
    with needle in its log; the exit is then not reported at teardown."""
    b = c.node(node_id)
    try:
        b.start()
    except pytest.fail.Exception:  # it may stop before its port answers
        pass
    wait_until("node %d to stop by itself" % node_id,
               lambda: b.proc.poll() is not None, 15 * SLOW)
    rc = b.proc.returncode
    tail = b.log_tail(10)
    b.proc = None
    b.unexpected_exit = None
    assert rc not in (0, None), (rc, tail)
    assert needle in tail, tail
    return tail


@pytest.mark.parametrize("damage", ["other-cluster", "metadata-files",
                                    "log-segment"])
def test_voter_with_bad_directory_stops(cluster_factory, damage):
    """A voter whose directory belongs to another cluster, or whose raft
    files are corrupt, stops with a message naming the directory; the
    other two go on."""
    c = cluster_factory()
    c.wait_registered([1, 2, 3], REGISTER_S)
    assert c.stop(3) == 0
    data = Path(c.node(3).data_dir)
    raft_dir = data / "__cluster_metadata-0"
    if damage == "other-cluster":
        mp = data / "meta.properties"
        mp.write_text(re.sub(r"cluster\.id=.*", "cluster.id=" + "A" * 22,
                             mp.read_text()))
        tail = _restart_refused(c, 3, "belongs to cluster " + "A" * 22)
        assert "log.dirs: %s" % data in tail, tail
    elif damage == "metadata-files":
        for name in ("metadata1", "metadata2"):
            with open(raft_dir / name, "r+b") as f:
                f.seek(8)
                f.write(b"\xff" * 16)
        _restart_refused(c, 3, "metadata.log.dir: %s: " % raft_dir)
    else:
        segs = [p for p in raft_dir.iterdir() if p.name[0].isdigit()]
        assert segs, list(raft_dir.iterdir())
        for p in segs:
            with open(p, "r+b") as f:
                f.seek(min(40, p.stat().st_size // 2))
                f.write(b"\xa5" * 64)
        tail = _restart_refused(c, 3, "metadata.log.dir: %s: " % raft_dir)
        assert "checksum" in tail, tail
    c.wait_registered([1, 2], (c.SESSION_MS / 1000 + 10) * SLOW)


def _start_fails(tmp_path, sets):
    port = free_port()
    argv = [str(CAIRN_BIN),
            "--set", "listeners=PLAINTEXT://127.0.0.1:%d,"
                     "CONTROLLER://127.0.0.1:%d" % (port, free_port()),
            "--set", "listener.security.protocol.map="
                     "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "--set", "controller.listener.names=CONTROLLER",
            "--set", "http.listener=",
            "--set", "log.dirs=%s" % (tmp_path / "data")]
    for k, v in sets.items():
        argv += ["--set", "%s=%s" % (k, v)]
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=str(tmp_path))
    try:
        _, err = proc.communicate(timeout=10 * SLOW)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate(timeout=10)
        pytest.fail("broker started with %s:\n%s" % (sets, err[-2000:]))
    assert proc.returncode not in (0, None), (proc.returncode, err)
    return err


@pytest.mark.parametrize("sets,key", [
    ({"node.id": "4", "process.roles": "broker,controller",
      "controller.quorum.voters": "1@127.0.0.1:1,2@127.0.0.1:2,"
                                  "3@127.0.0.1:3"},
     "controller.quorum.voters"),
    ({"node.id": "1", "process.roles": "controller",
      "controller.quorum.voters": "1@127.0.0.1:1"},
     "process.roles"),
], ids=["voters-without-this-node", "controller-only"])
def test_config_errors_name_the_key(tmp_path, sets, key):
    err = _start_fails(tmp_path, sets)
    assert key in err, err


if __name__ == "__main__":
    sys.exit(pytest.main([__file__]))
