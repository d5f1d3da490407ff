"""Fixtures for end-to-end tests against a real build/cairn process.

Environment:
  CAIRN_BIN        broker binary (default <repo>/build/cairn)
  CAIRN_BUILD_DIR  where e2e_* helper programs are (default <repo>/build)
  CAIRN_SANITIZED  "1" under ASan/UBSan: message counts and waits scale
  CAIRN_E2E_MOCK   "1" runs against librdkafka's mock cluster (the
                   e2e_mockbroker helper) instead of cairn, to check the
                   tests themselves; tests needing cairn itself are skipped
"""

import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BUILD_DIR = Path(os.environ.get("CAIRN_BUILD_DIR", REPO / "build"))
CAIRN_BIN = Path(os.environ.get("CAIRN_BIN", REPO / "build" / "cairn"))
SANITIZED = os.environ.get("CAIRN_SANITIZED") == "1"
MOCK = os.environ.get("CAIRN_E2E_MOCK") == "1"
# Counts are divided and waits multiplied by this under the sanitizers.
SCALE = 10 if SANITIZED else 1
SLOW = 3 if SANITIZED else 1

needs_cairn = pytest.mark.skipif(MOCK, reason="needs the real broker")


def scaled(n):
    """A message count reduced for sanitizer builds."""
    return max(1, n // SCALE)


def tool(name):
    """Path of a helper program built from tests/e2e or bench."""
    path = BUILD_DIR / name
    if not path.exists():
        pytest.fail("%s not built (CAIRN_BUILD_DIR=%s)" % (name, BUILD_DIR))
    return str(path)


def _unassigned_port_range():
    """Ports the kernel never picks for bind(0) or an outgoing connection.

    A port from bind(0) is closed again before the broker binds it, so the
    kernel could hand the same number to the next bind(0) or to a client's
    connection meanwhile (CI saw two listeners given one port).  Ports
    outside the ephemeral range are taken only by explicit binds.
    """
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low, high = (int(x) for x in f.read().split())
    except (OSError, ValueError):
        low, high = 32768, 60999
    if low - 1 - 10000 >= 4000:
        return 10000, low - 1
    return high + 1, 65535


_PORT_RANGE = _unassigned_port_range()
_handed_out = set()
_port_rng = random.Random(os.getpid() ^ time.monotonic_ns())


def free_port():
    """A loopback port nobody listens on, never the same one twice."""
    for _ in range(10000):
        port = _port_rng.randint(*_PORT_RANGE)
        if port in _handed_out:
            continue
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            continue
        finally:
            s.close()
        _handed_out.add(port)
        return port
    raise RuntimeError("no free port in %d-%d" % _PORT_RANGE)


def port_open(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
        return True
    except OSError:
        return False


def metrics(broker):
    """{'name{labels}': value} from the broker's /metrics."""
    url = "http://127.0.0.1:%d/metrics" % broker.http_port
    with urllib.request.urlopen(url, timeout=5 * SLOW) as r:
        body = r.read().decode()
    out = {}
    for line in body.splitlines():
        if line and not line.startswith("#"):
            key, value = line.rsplit(" ", 1)
            out[key] = float(value)
    return out


def run(args, timeout, **kw):
    """subprocess.run with output captured and a hard timeout."""
    res = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         timeout=timeout, text=True, **kw)
    return res


class Broker:
    """One broker process on a fixed port and data dir across restarts."""

    def __init__(self, workdir, sets=None):
        self.port = free_port()
        self.bootstrap = "127.0.0.1:%d" % self.port
        self.data_dir = str(Path(workdir) / "data")
        os.makedirs(self.data_dir, exist_ok=True)
        self.log_path = str(Path(workdir) / "broker.log")
        self.sets = dict(sets or {})
        self.proc = None
        self.unexpected_exit = None    # (rc, log tail) of a crash we saw
        self.mock_topics = {}          # mock mode only: topic -> partitions
        self.failpoints = None         # CAIRN_FAILPOINTS for the next start
        self.nofile = None             # RLIMIT_NOFILE (soft = hard) if set
        # The metrics endpoint gets its own free port so parallel brokers
        # never fight over the default 9464; None when a test turns it off
        # with http.listener="" (its --set comes later and wins).
        self.http_port = free_port()
        if self.sets.get("http.listener") == "":
            self.http_port = None

    def _argv(self):
        if MOCK:
            argv = [tool("e2e_mockbroker")]
            for t, n in self.mock_topics.items():
                argv += ["--topic", "%s:%d" % (t, n)]
            return argv
        argv = [str(CAIRN_BIN),
                "--set", "listeners=PLAINTEXT://127.0.0.1:%d" % self.port,
                "--set", "log.dirs=%s" % self.data_dir,
                "--set", "http.listener=127.0.0.1:%d" % (self.http_port or 0)]
        for k, v in self.sets.items():
            argv += ["--set", "%s=%s" % (k, v)]
        return argv

    def log_tail(self, n=40):
        """The log's last n lines, or a sanitizer report's first 60."""
        try:
            with open(self.log_path, errors="replace") as f:
                lines = f.readlines()
        except OSError:
            return ""
        for i, line in enumerate(lines):
            if ("ERROR: AddressSanitizer" in line or "runtime error:" in line
                    or "ERROR: LeakSanitizer" in line):
                return "".join(lines[max(0, i - 3):i + 60])
        return "".join(lines[-n:])

    def _check_alive(self):
        """Record an exit nobody asked for, so teardown can fail on it."""
        if self.proc is not None and self.proc.poll() is not None:
            if self.unexpected_exit is None:
                self.unexpected_exit = (self.proc.returncode,
                                        self.log_tail())

    def alive(self):
        self._check_alive()
        return self.proc is not None and self.proc.poll() is None

    def start(self, timeout=10 * SLOW):
        assert self.proc is None or self.proc.poll() is not None
        if not MOCK and not CAIRN_BIN.exists():
            pytest.fail("broker binary %s not found" % CAIRN_BIN)
        log = open(self.log_path, "ab")
        log.write(b"=== start %s\n" % " ".join(self._argv()).encode())
        log.flush()
        env = dict(os.environ)
        env.pop("CAIRN_FAILPOINTS", None)
        if self.failpoints:
            env["CAIRN_FAILPOINTS"] = self.failpoints
        preexec = None
        if self.nofile:
            import resource
            lim = (self.nofile, self.nofile)

            def preexec():
                resource.setrlimit(resource.RLIMIT_NOFILE, lim)
        self.proc = subprocess.Popen(
            self._argv(), stdin=subprocess.DEVNULL, env=env,
            stdout=subprocess.PIPE if MOCK else log, stderr=log,
            cwd=str(Path(self.data_dir).parent), preexec_fn=preexec)
        log.close()
        if MOCK:
            line = self.proc.stdout.readline().split()
            assert line and line[0] == b"bootstrap", line
            self.bootstrap = line[1].decode()
            self.port = int(self.bootstrap.rsplit(":", 1)[1])
            return
        deadline = time.monotonic() + timeout
        while not port_open(self.port):
            if self.proc.poll() is not None:
                pytest.fail("broker exited with %s during start-up:\n%s"
                            % (self.proc.returncode, self.log_tail()))
            if time.monotonic() > deadline:
                self.kill9()
                pytest.fail("broker did not listen on %d within %ss:\n%s"
                            % (self.port, timeout, self.log_tail()))
            time.sleep(0.05)

    def kill9(self):
        """SIGKILL and reap; the exit is expected."""
        self._check_alive()
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self, timeout=10 * SLOW):
        """SIGTERM, then SIGKILL after timeout. Returns the exit code."""
        self._check_alive()
        if self.proc is None or self.proc.poll() is not None:
            return None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)
            return "killed"

    def restart(self):
        self.stop()
        self.start()

    def create_topic(self, name, partitions=1, config=None, timeout=15):
        """Create a topic through the admin API and wait until usable."""
        if MOCK:
            # The mock cluster has no CreateTopics: restart it with the
            # topic declared (losing earlier data, fine for test set-up).
            self.mock_topics[name] = partitions
            self.stop()
            self.start()
            return
        from confluent_kafka.admin import AdminClient, NewTopic
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        fut = admin.create_topics(
            [NewTopic(name, partitions, 1, config=config or {})],
            operation_timeout=timeout)[name]
        fut.result(timeout=timeout)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            md = admin.list_topics(topic=name, timeout=5)
            t = md.topics.get(name)
            if t and not t.error and len(t.partitions) == partitions:
                return
            time.sleep(0.1)
        pytest.fail("topic %s not visible with %d partitions"
                    % (name, partitions))


@pytest.fixture
def broker_factory(tmp_path):
    """Make brokers with extra --set options; all are checked and stopped."""
    made = []

    def make(**sets):
        b = Broker(tmp_path / ("b%d" % len(made)), sets)
        made.append(b)
        b.start()
        return b

    yield make
    problems = []
    for b in made:
        b._check_alive()
        if b.unexpected_exit is not None:
            rc, tail = b.unexpected_exit
            problems.append("broker on port %d died unexpectedly (exit %s)"
                            ":\n%s" % (b.port, rc, tail))
        rc = b.stop()
        if rc not in (None, 0, "killed") and not MOCK:
            problems.append("broker exited %s on SIGTERM:\n%s"
                            % (rc, b.log_tail()))
        if rc == "killed":
            problems.append("broker ignored SIGTERM for %ss" % (10 * SLOW))
    if problems:
        pytest.fail("\n".join(problems))


@pytest.fixture
def broker(broker_factory):
    return broker_factory()


class Background:
    """A helper program running while a test does other things."""

    def __init__(self, args, log_path):
        self.log_path = log_path
        self.log = open(log_path, "wb")
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL,
                                     stdout=self.log, stderr=self.log)

    def stop(self, timeout=30):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.log.close()
        return self.proc.returncode

    def output(self):
        with open(self.log_path, errors="replace") as f:
            return f.read()


@pytest.fixture
def background(tmp_path):
    """Start helper programs; all are stopped by pid at teardown."""
    started = []

    def start(args, name="bg"):
        bg = Background(args, str(tmp_path / ("%s.log" % name)))
        started.append(bg)
        return bg

    yield start
    for bg in started:
        bg.stop(timeout=10)


@pytest.fixture
def workdir():
    d = tempfile.mkdtemp(prefix="cairn-e2e-")
    yield Path(d)
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session")
def kafka(tmp_path_factory):
    """A reference Apache Kafka 4.4.0 (tests/e2e/kafka_ref.py), started once
    for every differential test of the run: each start costs 4-45 s and
    some 330 MB.  Scenarios use their own topics, groups and ids, and a
    test that changes the broker's configs puts them back."""
    import java_harness
    from kafka_ref import RefKafka
    ref = RefKafka(tmp_path_factory.mktemp("kafka"), java_harness.classpath())
    ref.start()
    print("reference Kafka listening after %.1fs, RSS %s kB"
          % (ref.start_seconds, ref.rss_kb()))
    yield ref
    ref.kill()


# A finished subprocess (run()) of a command-line tool: ok() insists it
# succeeded and gives its stdout; fails() insists on exit status rc and
# each needle in its stderr.  Failures show both streams.
def ok(res):
    assert res.returncode == 0, "rc %d\nstdout: %s\nstderr: %s" % (
        res.returncode, res.stdout, res.stderr)
    return res.stdout


def fails(res, rc, *needles):
    assert res.returncode == rc, "rc %d (want %d)\nstdout: %s\nstderr: %s" % (
        res.returncode, rc, res.stdout, res.stderr)
    for n in needles:
        assert n in res.stderr, "%r not in stderr: %s" % (n, res.stderr)


# ---- cluster mode: three brokers of one metadata quorum ----

def describe_cluster(port, timeout=2.0):
    """DescribeCluster v0 asked of the broker on port, raw on the wire:
    (controller_id, {broker_id: (host, port)}, cluster_id).  Raises OSError
    or ValueError when the broker does not answer."""
    import struct
    import kafka_wire as kw
    body = b"\x00" + kw.uvarint(0)  # no authorized operations; no tags
    sock = kw.connect("127.0.0.1", port, timeout)
    try:
        sock.sendall(kw.request(60, 0, 1, body, flexible=True))
        resp = kw.recv_frame(sock)
    finally:
        sock.close()
    if resp is None:
        raise ConnectionError("broker on %d closed the connection" % port)
    r = kw.Reader(resp)
    if r.i32() != 1:
        raise ValueError("correlation id mismatch")
    r.skip_tags()
    r.i32()  # throttle
    err = r.i16()
    r.compact_string()  # error message
    cluster_id = r.compact_string()
    controller = r.i32()
    brokers = {}
    for _ in range(r.uvarint() - 1):
        bid = r.i32()
        host = r.compact_string()
        bport = r.i32()
        r.compact_string()  # rack
        r.skip_tags()
        brokers[bid] = (host, bport)
    if err:
        raise ValueError("DescribeCluster error %d" % err)
    del struct
    return controller, brokers, cluster_id


def wait_until(what, pred, timeout):
    """Polls pred (a callable returning a true value when done; exceptions
    count as not yet) until timeout; returns its value or fails naming what
    and the last value or error seen."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        try:
            v = pred()
            if v:
                return v
            last = v
        except (OSError, ValueError) as e:
            last = e
        if time.monotonic() > deadline:
            pytest.fail("%s: not within %.1fs (last: %r)"
                        % (what, timeout, last))
        time.sleep(0.1)


class Cluster:
    """Three (n) brokers, each a voter of one metadata quorum, on free
    ports: node i+1 is nodes[i], its clients' port nodes[i].port, its
    CONTROLLER listener controller_ports[i].  Fast timings so fencing and
    failover fit in a test: session 3 s, heartbeat 0.5 s, election 0.5 s."""

    SESSION_MS = 3000
    HEARTBEAT_MS = 500
    ELECTION_MS = 500

    def __init__(self, workdir, n=3, sets=None):
        self.nodes = []
        self.controller_ports = [free_port() for _ in range(n)]
        voters = ",".join("%d@127.0.0.1:%d" % (i + 1, p)
                          for i, p in enumerate(self.controller_ports))
        for i in range(n):
            b = Broker(Path(workdir) / ("node-%d" % (i + 1)))
            b.node_id = i + 1
            b.sets.update({
                "node.id": str(i + 1),
                "process.roles": "broker,controller",
                "listeners": "PLAINTEXT://127.0.0.1:%d,CONTROLLER://"
                             "127.0.0.1:%d" % (b.port,
                                               self.controller_ports[i]),
                "listener.security.protocol.map":
                    "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                "controller.listener.names": "CONTROLLER",
                "controller.quorum.voters": voters,
                "broker.session.timeout.ms": str(self.SESSION_MS),
                "broker.heartbeat.interval.ms": str(self.HEARTBEAT_MS),
                "controller.quorum.election.timeout.ms":
                    str(self.ELECTION_MS),
            })
            b.sets.update(sets or {})
            self.nodes.append(b)

    def add_broker(self):
        """Starts one more node, process.roles=broker: a member that does
        not vote (a raft standby once registered); returns it."""
        n = len(self.nodes) + 1
        first = self.nodes[0]
        b = Broker(Path(first.data_dir).parent.parent / ("node-%d" % n))
        b.node_id = n
        b.sets.update({k: v for k, v in first.sets.items()
                       if k not in ("node.id", "listeners")})
        b.sets.update({
            "node.id": str(n),
            "process.roles": "broker",
            "listeners": "PLAINTEXT://127.0.0.1:%d" % b.port,
        })
        self.nodes.append(b)
        b.start()
        return b

    @property
    def bootstrap(self):
        return ",".join(b.bootstrap for b in self.nodes)

    def node(self, node_id):
        return self.nodes[node_id - 1]

    def start(self):
        for b in self.nodes:
            b.start()

    def live(self):
        return [b for b in self.nodes if b.alive()]

    def describe(self, node_id):
        return describe_cluster(self.node(node_id).port)

    def wait_registered(self, ids, timeout):
        """Every live node lists exactly ids (unfenced) and names the same
        live controller; returns that controller's id."""
        want = sorted(ids)

        def agreed():
            seen = set()
            for b in self.live():
                ctl, brokers, _ = describe_cluster(b.port)
                if sorted(brokers) != want or ctl < 0:
                    return None
                seen.add(ctl)
            if len(seen) != 1:
                return None
            ctl = seen.pop()
            return ctl if self.node(ctl).alive() else None
        return wait_until("brokers %s registered and unfenced everywhere"
                          % want, agreed, timeout)

    def stop(self, node_id):
        """SIGTERM one node and wait; returns its exit code (expected, not
        reported at teardown)."""
        b = self.node(node_id)
        # A controlled shutdown waits up to 30 s for the controller to move
        # the node's leaderships: that is a stop, not a hang.
        rc = b.stop(timeout=40 * SLOW)
        b.proc = None
        return rc

    def kill9(self, node_id):
        """SIGKILL one node; its exit is expected (not reported at
        teardown)."""
        b = self.node(node_id)
        b.kill9()
        b.proc = None


@pytest.fixture
def cluster_factory(tmp_path):
    """Make clusters; every broker process is killed by pid at teardown,
    and a broker that died on its own fails the test."""
    made = []

    def make(n=3, failpoints=None, **sets):
        """failpoints: {node id: CAIRN_FAILPOINTS} for the first start."""
        c = Cluster(tmp_path / ("c%d" % len(made)), n, sets)
        made.append(c)
        for node_id, spec in (failpoints or {}).items():
            c.node(node_id).failpoints = spec
        c.start()
        return c

    yield make
    problems = []
    for c in made:
        for b in c.nodes:
            b._check_alive()
            if b.unexpected_exit is not None:
                rc, tail = b.unexpected_exit
                problems.append("node %d died unexpectedly (exit %s):\n%s"
                                % (b.node_id, rc, tail))
            b.kill9()
    if problems:
        pytest.fail("\n".join(problems))


# ---- transactions on a cluster (issue #15): who coordinates, who leads ----

TXN_STATE_TOPIC = "__transaction_state"
TXN_STATE_PARTITIONS = 50     # Kafka's transaction.state.log.num.partitions


def java_string_hash(s):
    """Java's String.hashCode: over UTF-16 code units, int32 wrap."""
    units = s.encode("utf-16-be")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + ((units[i] << 8) | units[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def txn_partition_for(transactional_id, partitions=TXN_STATE_PARTITIONS):
    """The __transaction_state partition of a transactional id: Kafka's
    Utils.abs(hashCode) % partitions (abs(INT_MIN) is 0), as
    cn_txn_partition_for in src/txn/txn_state.c."""
    h = java_string_hash(transactional_id)
    h = 0 if h == -(1 << 31) else abs(h)
    return h % partitions


def partition_leaders(port, topic):
    """{partition: leader id} as the broker on port answers Metadata v1,
    or None while it does not know the topic (leader -1 stays -1)."""
    import kafka_wire as kw
    cli = kw.TxnClient(port, timeout=5)
    try:
        _, _, topics = cli.metadata([topic])
    finally:
        cli.close()
    t = topics.get(topic)
    if t is None or t["error"] or not t["partitions"]:
        return None
    return {p: leader for p, (_, leader) in t["partitions"].items()}


def find_coordinator(port, key, key_type=1):
    """(error, node id) of FindCoordinator v1 asked of the broker on port
    (key_type 1: a transactional id, 0: a group)."""
    import kafka_wire as kw
    cli = kw.TxnClient(port, timeout=5)
    try:
        (e,) = cli.find_coordinator(key, key_type=key_type, version=1)
    finally:
        cli.close()
    return e["error"], e["node_id"]


def wait_txn_state_led(c, timeout):
    """Asks for a transaction coordinator until __transaction_state
    exists with a leader for every partition on every live node, and the
    nodes agree; returns {partition: leader}."""
    def agreed():
        seen = None
        for b in c.live():
            find_coordinator(b.port, "cairn-e2e-warmup")
            led = partition_leaders(b.port, TXN_STATE_TOPIC)
            if not led or len(led) != TXN_STATE_PARTITIONS or \
                    min(led.values()) < 0:
                return None
            if seen is not None and led != seen:
                return None
            seen = led
        return seen
    return wait_until("%s led on every partition, all nodes agreeing"
                      % TXN_STATE_TOPIC, agreed, timeout)


def txn_id_coordinated_by(leaders, node_id, prefix):
    """The first "<prefix>-<n>" whose __transaction_state partition is led
    by node_id in leaders ({partition: leader})."""
    for n in range(100000):
        tid = "%s-%d" % (prefix, n)
        if leaders.get(txn_partition_for(tid)) == node_id:
            return tid
    raise AssertionError("node %d leads no %s partition: %r"
                         % (node_id, TXN_STATE_TOPIC, leaders))


def expect_exit(c, node_id, why, timeout):
    """Waits until node_id's process has exited on its own (a fail point
    planted a crash), then forgets it as expected; fails naming why."""
    b = c.node(node_id)
    wait_until("node %d exits (%s)" % (node_id, why),
               lambda: b.proc is None or b.proc.poll() is not None, timeout)
    b.unexpected_exit = None
    b.proc = None
