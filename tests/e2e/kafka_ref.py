"""A reference Apache Kafka broker (kafka_2.13 4.4.0 from build/java's
classpath) for the differential tests: KRaft, one node acting as broker
and controller, on loopback ports, data in a temp dir, formatted with
kafka.tools.StorageTool, warnings only on its log, killed by pid.

RefKafka(..., nodes=3) starts a three-node cluster instead: each node
broker and controller (combined mode), a static quorum of the three,
internal topics replicated three times (min.insync.replicas 2).

jvm_opts replaces the JVM options (default: a 512 MiB heap, 384 MiB per
node of a cluster).

Secured listeners (one node only): listeners={"SSL": "SSL", ...} adds a
listener of that name and security protocol on its own port
(self.listener_ports[name]), advertised as advertised_host;
server_props adds lines to server.properties (ssl.*, sasl.*, ...), and
format_args goes to kafka-storage format (e.g. --add-scram ...).  The
PLAINTEXT listener stays for readiness and inter-broker traffic.
"""

import base64
import os
import signal
import subprocess
import time
import uuid
from pathlib import Path

import kafka_wire as kw
from conftest import free_port, port_open

PROPERTIES = """\
process.roles=broker,controller
node.id={node}
{quorum}
listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{cport}{xl}
advertised.listeners=PLAINTEXT://127.0.0.1:{port}{xa}
controller.listener.names=CONTROLLER
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT{xm}
inter.broker.listener.name=PLAINTEXT
log.dirs={data}
num.partitions=1
offsets.topic.replication.factor={rf}
transaction.state.log.replication.factor={rf}
transaction.state.log.min.isr={isr}
group.initial.rebalance.delay.ms=0
transaction.abort.timed.out.transaction.cleanup.interval.ms=200
"""


class RefKafka:
    def __init__(self, workdir, classpath, nodes=1, listeners=None,
                 server_props=None, format_args=(),
                 advertised_host="127.0.0.1", jvm_opts=None):
        self.dir = Path(workdir)
        self.cp = classpath
        self.nodes = nodes
        self.listeners = dict(listeners or {})
        assert nodes == 1 or not self.listeners
        self.listener_ports = {n: free_port() for n in self.listeners}
        self.advertised_host = advertised_host
        self.server_props = dict(server_props or {})
        self.format_args = list(format_args)
        # The tests' small heaps by default; the benchmark passes Kafka's
        # own JVM defaults (bench/peers.py).
        self.jvm_opts = list(jvm_opts or (
            ["-Xmx512m"] if nodes == 1 else ["-Xmx384m"]))
        self.ports = [free_port() for _ in range(nodes)]
        self.cports = [free_port() for _ in range(nodes)]
        self.port = self.ports[0]
        self.bootstrap = ",".join("127.0.0.1:%d" % p for p in self.ports)
        self.procs = []
        self.proc = None                  # node 1's process
        self.log_path = self.dir / "kafka-1.log"
        self.start_seconds = None

    def _java(self, *args, timeout=120):
        return subprocess.run(["java", "-cp", self.cp] + list(args),
                              stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True,
                              timeout=timeout)

    def _props(self, i):
        if self.nodes == 1:
            quorum = ("controller.quorum.bootstrap.servers=127.0.0.1:%d"
                      % self.cports[0])
        else:
            quorum = "controller.quorum.voters=" + ",".join(
                "%d@127.0.0.1:%d" % (n + 1, c)
                for n, c in enumerate(self.cports))
        props = self.dir / ("server-%d.properties" % (i + 1))
        lp = self.listener_ports
        text = PROPERTIES.format(
            node=i + 1, quorum=quorum, port=self.ports[i],
            cport=self.cports[i], data=self.dir / ("data-%d" % (i + 1)),
            rf=min(self.nodes, 3), isr=2 if self.nodes >= 3 else 1,
            xl="".join(",%s://127.0.0.1:%d" % (n, lp[n]) for n in lp),
            xa="".join(",%s://%s:%d" % (n, self.advertised_host, lp[n])
                       for n in lp),
            xm="".join(",%s:%s" % (n, p) for n, p in self.listeners.items()))
        text += "".join("%s=%s\n" % kv for kv in self.server_props.items())
        props.write_text(text)
        return props

    def start(self, timeout=90):
        # A cluster id is 16 random bytes in URL-safe base64, no padding;
        # like Kafka's Uuid.randomUuid, never one starting with "-", which
        # the tool's argument parser would take for an option.
        cid = "-"
        while cid.startswith("-"):
            cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode()[:22]
        t0 = time.monotonic()
        for i in range(self.nodes):
            props = self._props(i)
            # One node: a dynamic quorum of itself (--standalone); more:
            # the static controller.quorum.voters above.
            extra = ["--standalone"] if self.nodes == 1 else []
            res = self._java("kafka.tools.StorageTool", "format", "-t", cid,
                             "-c", str(props), *extra, *self.format_args)
            if res.returncode != 0:
                raise RuntimeError("kafka-storage format failed:\n"
                                   + res.stdout)
        for i in range(self.nodes):
            log = open(self.dir / ("kafka-%d.log" % (i + 1)), "wb")
            self.procs.append(subprocess.Popen(
                ["java"] + self.jvm_opts + ["-cp", self.cp, "kafka.Kafka",
                 str(self.dir / ("server-%d.properties" % (i + 1)))],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                cwd=str(self.dir)))
            log.close()
        self.proc = self.procs[0]
        deadline = time.monotonic() + timeout * self.nodes
        for port in self.ports:
            while not port_open(port):
                self._check(deadline, "Kafka did not listen on %d" % port)
                time.sleep(0.1)
        # Ready when every broker is registered, it hands out producer
        # ids (the controller has granted the broker a block; until then
        # InitProducerId is COORDINATOR_LOAD_IN_PROGRESS) and both
        # coordinators answer (FindCoordinator creates __transaction_state
        # and __consumer_offsets, as Kafka does only on demand).
        while True:
            try:
                cli = kw.TxnClient(self.port)
                brokers = cli.metadata()[0]
                err = 0 if len(brokers) == self.nodes else -2
                if not err:
                    err = cli.init_producer_id()[0]
                if not err:
                    err = cli.find_coordinator("warm-up", key_type=1)[0][
                        "error"]
                if not err:
                    err = cli.find_coordinator("warm-up", key_type=0)[0][
                        "error"]
                cli.close()
            except (OSError, AssertionError, ConnectionError, ValueError):
                err = -1
            if err == 0:
                break
            self._check(deadline, "Kafka not ready (%d)" % err)
            time.sleep(0.2)
        self.start_seconds = time.monotonic() - t0

    def _check(self, deadline, what):
        if (any(p.poll() is not None for p in self.procs)
                or time.monotonic() > deadline):
            self.kill()
            raise RuntimeError("%s:\n%s" % (what, self.log_tail()))

    def rss_kb(self):
        """Resident memory of all nodes together, kB."""
        total = 0
        for p in self.procs:
            try:
                with open("/proc/%d/status" % p.pid) as f:
                    for line in f:
                        if line.startswith("VmRSS:"):
                            total += int(line.split()[1])
            except OSError:
                return None
        return total

    def log_tail(self, n=40):
        out = []
        for i in range(self.nodes):
            try:
                lines = (self.dir / ("kafka-%d.log" % (i + 1))).read_text(
                    errors="replace").splitlines(True)[-n:]
            except OSError:
                continue
            out.append("--- node %d\n" % (i + 1) + "".join(lines))
        return "".join(out)

    def kill_node(self, i):
        """SIGKILL node i+1 and reap it."""
        p = self.procs[i]
        if p.poll() is None:
            os.kill(p.pid, signal.SIGKILL)
            p.wait(timeout=30)

    def kill(self):
        for i in range(len(self.procs)):
            self.kill_node(i)
