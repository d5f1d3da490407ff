"""The brokers a benchmark compares, all running at once so their runs can
be interleaved: Cairn with group-commit fsync on and off, librdkafka's mock
cluster, and Apache Kafka 4.4.0 (KRaft, one node) whose topics are made
either with its defaults (no fsync) or with flush.messages=1 (an fsync per
append, the same durability as Cairn's default).

Each peer has a bootstrap address, the pid whose CPU time and memory count
as the broker's (the JVM's for Kafka), and topic create/delete.  Several
peers can share one process: the two Kafka peers are one broker with two
kinds of topics.
"""

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CLK_TCK = os.sysconf("SC_CLK_TCK")
# How often both brokers enforce retention.bytes (bench/scaling_figs.py's
# topics, kept over a figure's repetitions, are bounded that way).
RETENTION_CHECK_MS = 1000

# What bin/kafka-server-start.sh and bin/kafka-run-class.sh of Kafka 4.x
# give the broker when KAFKA_HEAP_OPTS and KAFKA_JVM_PERFORMANCE_OPTS are
# unset: the settings a user who runs Kafka out of the box gets.
KAFKA_JVM_DEFAULTS = ["-Xmx1G", "-Xms1G", "-server", "-XX:+UseG1GC",
                      "-XX:MaxGCPauseMillis=20",
                      "-XX:InitiatingHeapOccupancyPercent=35",
                      "-XX:+ExplicitGCInvokesConcurrent",
                      "-Djava.awt.headless=true"]


def proc_cpu_seconds(pid):
    """utime + stime of a process (all its threads), in seconds."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            # The command name may hold spaces: fields follow the last ')'.
            rest = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(rest[11]) + int(rest[12])) / CLK_TCK


def proc_memory_kb(pid):
    """{"rss_kb": VmRSS, "hwm_kb": VmHWM} of a process."""
    out = {}
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    out["rss_kb"] = int(line.split()[1])
                elif line.startswith("VmHWM:"):
                    out["hwm_kb"] = int(line.split()[1])
    except OSError:
        pass
    return out


def free_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_port(port, proc, timeout, what, log):
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("%s did not start; see %s" % (what, log))
            time.sleep(0.05)


def stop_proc(proc, timeout=15):
    """SIGTERM, then SIGKILL: by pid, only the process we started."""
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


class Peer:
    """One broker setting under test."""

    name = ""
    label = ""
    can_create = True    # CreateTopics/DeleteTopics (the mock has neither)
    topic_config = {}    # configs every topic of this peer is created with

    def __init__(self, workdir):
        self.dir = Path(workdir) / self.name
        self.dir.mkdir(parents=True, exist_ok=True)
        self.bootstrap = None

    def pid(self):
        raise NotImplementedError

    def alive(self):
        raise NotImplementedError

    def cpu_seconds(self):
        return proc_cpu_seconds(self.pid())

    def memory_kb(self):
        return proc_memory_kb(self.pid())

    def _admin(self):
        # Kept: the futures of a destroyed client fail with _DESTROY.
        if getattr(self, "_admin_client", None) is None:
            from confluent_kafka.admin import AdminClient
            self._admin_client = AdminClient(
                {"bootstrap.servers": self.bootstrap})
        return self._admin_client

    def create_topic(self, topic, partitions, config=None):
        """Creates the topic with this peer's configs (and config); the
        mock gets its topics at start."""
        if not self.can_create:
            return
        from confluent_kafka.admin import NewTopic
        nt = NewTopic(topic, num_partitions=partitions, replication_factor=1,
                      config=dict(self.topic_config, **(config or {})))
        for fut in self._admin().create_topics(
                [nt], request_timeout=60).values():
            fut.result(timeout=90)

    def delete_topic(self, topic):
        """Deletes a topic, so a long run does not fill the disk (Kafka
        removes the files a minute later: file.delete.delay.ms)."""
        if not self.can_create:
            return
        for fut in self._admin().delete_topics(
                [topic], request_timeout=60).values():
            try:
                fut.result(timeout=90)
            except Exception as e:   # a leftover topic is not fatal
                print("delete %s on %s: %s" % (topic, self.name, e),
                      file=sys.stderr)

    def data_dirs(self):
        """The broker's log directories (none for the mock)."""
        return []

    def topic_dirs(self, topic):
        """The topic's partition directories still on disk, also those a
        deletion has renamed but not yet removed (Kafka's
        <topic>-<n>.<uuid>-delete)."""
        out = []
        for d in self.data_dirs():
            for e in Path(d).glob("%s-*" % topic):
                part = e.name[len(topic) + 1:].split(".", 1)[0]
                if part.isdigit():
                    out.append(e)
        return out

    def delete_topic_wait(self, topic, timeout=60):
        """Deletes the topic and waits until its files are gone: a
        benchmark run writes GBs, and neither a full disk nor the next run
        sharing the disk with the unlinking may be part of a figure."""
        self.delete_topic(topic)
        deadline = time.monotonic() + timeout
        while self.topic_dirs(topic) and time.monotonic() < deadline:
            time.sleep(0.05)

    def drop_admin(self):
        """Before the broker stops: its client would log reconnects."""
        self._admin_client = None

    def stop(self):
        raise NotImplementedError


class CairnPeer(Peer):
    def __init__(self, workdir, cairn, fsync=True, sets=(), name=None,
                 label=None):
        self.name = name or ("cairn" if fsync else "cairn-nofsync")
        self.label = label or ("Cairn" if fsync else
                               "Cairn, cairn.fsync.group.commit=false")
        super().__init__(workdir)
        self.cairn = cairn
        self.fsync = fsync
        self.sets = list(sets)
        self.proc = None

    def start(self):
        port = free_port()
        data = self.dir / "data"
        data.mkdir(exist_ok=True)
        # Its own metrics port: the default one may be another broker's.
        self.http_port = free_port()
        argv = [str(self.cairn), "--set",
                "listeners=PLAINTEXT://127.0.0.1:%d" % port,
                "--set", "log.dirs=%s" % data,
                "--set", "http.listener=127.0.0.1:%d" % self.http_port]
        # Retention checked every second (Kafka's default is 5 min, and
        # the Kafka peer gets the same): a figure that keeps one topic
        # over its repetitions bounds it with retention.bytes.
        argv += ["--set", "log.retention.check.interval.ms=%d"
                 % RETENTION_CHECK_MS]
        if not self.fsync:
            argv += ["--set", "cairn.fsync.group.commit=false"]
        for s in self.sets:
            argv += ["--set", s]
        log = self.dir / "broker.log"
        with open(log, "wb") as f:
            self.proc = subprocess.Popen(argv, stdout=f, stderr=f,
                                         stdin=subprocess.DEVNULL)
        wait_port(port, self.proc, 15, self.label, log)
        self.bootstrap = "127.0.0.1:%d" % port

    def pid(self):
        return self.proc.pid

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def data_dirs(self):
        return [self.dir / "data"]

    def stop(self):
        self.drop_admin()
        stop_proc(self.proc)


class MockPeer(Peer):
    """librdkafka's mock cluster (tests/e2e/e2e_mockbroker): in memory, no
    fsync, ~5 MB kept per partition, topics fixed at start."""

    name = "mock"
    label = "librdkafka mock cluster"
    can_create = False

    def __init__(self, workdir, build_dir):
        super().__init__(workdir)
        self.build = Path(build_dir)
        self.proc = None

    def start(self, topics):
        argv = [str(self.build / "e2e_mockbroker")]
        for t, parts in topics:
            argv += ["--topic", "%s:%d" % (t, parts)]
        with open(self.dir / "broker.log", "wb") as log:
            self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE,
                                         stderr=log,
                                         stdin=subprocess.DEVNULL)
        self.bootstrap = self.proc.stdout.readline().split()[1].decode()

    def pid(self):
        return self.proc.pid

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self):
        self.drop_admin()
        stop_proc(self.proc)


def _kafka_ref():
    """tests/e2e/kafka_ref.py, the differential tests' reference broker."""
    e2e = str(REPO / "tests" / "e2e")
    if e2e not in sys.path:
        sys.path.insert(0, e2e)
    import java_harness
    import kafka_ref
    return kafka_ref, java_harness


class KafkaBroker:
    """Apache Kafka 4.4.0 as its scripts start it (KAFKA_JVM_DEFAULTS):
    kafka_ref.RefKafka, the differential tests' broker, with Kafka's own
    JVM options instead of the tests' small heap.  nodes=3 is a
    three-node cluster (combined broker+controller nodes)."""

    def __init__(self, workdir, **ref_kw):
        """ref_kw goes to RefKafka: nodes, listeners, server_props,
        format_args (bench/security.py's SSL listener)."""
        kafka_ref, java_harness = _kafka_ref()
        ref_kw.setdefault("jvm_opts", KAFKA_JVM_DEFAULTS)
        # A deleted topic's files go at once rather than a minute later
        # (Kafka's default), so the benchmark can wait for them to be gone
        # before the next run: the disk holds a few runs, not all of them.
        # Only deletion is affected, not the produce or fetch path.
        props = dict(ref_kw.get("server_props") or {})
        props.setdefault("log.segment.delete.delay.ms", "0")
        props.setdefault("log.retention.check.interval.ms",
                         str(RETENTION_CHECK_MS))
        ref_kw["server_props"] = props
        self.ref = kafka_ref.RefKafka(workdir, java_harness.classpath(),
                                      **ref_kw)
        self.ref.dir.mkdir(parents=True, exist_ok=True)
        self.bootstrap = self.ref.bootstrap
        self.proc = None
        self.users = 0

    def start(self, timeout=120):
        if self.proc is not None:
            return
        self.ref.start(timeout=timeout)
        self.proc = self.ref.proc

    def stop(self):
        # A clean stop (SIGTERM) flushes every log: slow and pointless
        # for throw-away data.
        self.ref.kill()


class KafkaPeer(Peer):
    jvm = True

    def __init__(self, workdir, broker, flush_every=False):
        self.name = "kafka-flush1" if flush_every else "kafka"
        self.label = ("Kafka 4.4.0, flush.messages=1" if flush_every else
                      "Kafka 4.4.0, defaults (no fsync)")
        self.topic_config = {"flush.messages": "1"} if flush_every else {}
        super().__init__(workdir)
        self.broker = broker

    def start(self):
        self.broker.start()
        self.broker.users += 1
        self.bootstrap = self.broker.bootstrap

    def pid(self):
        return self.broker.proc.pid

    def data_dirs(self):
        return sorted(self.broker.ref.dir.glob("data*"))

    def alive(self):
        return (self.broker.proc is not None
                and self.broker.proc.poll() is None)

    def stop(self):
        self.drop_admin()
        self.broker.users -= 1
        if self.broker.users <= 0:
            self.broker.stop()


def remove_tree(path):
    shutil.rmtree(path, ignore_errors=True)
