"""A reference Apache Kafka broker (kafka_2.13 4.4.0 from build/java's
classpath) for the differential tests: KRaft, one node acting as broker
and controller, on loopback ports, data in a temp dir, formatted with
kafka.tools.StorageTool, warnings only on its log, killed by pid.
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
node.id=1
controller.quorum.bootstrap.servers=127.0.0.1:{cport}
listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{cport}
advertised.listeners=PLAINTEXT://127.0.0.1:{port}
controller.listener.names=CONTROLLER
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
inter.broker.listener.name=PLAINTEXT
log.dirs={data}
num.partitions=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
group.initial.rebalance.delay.ms=0
transaction.abort.timed.out.transaction.cleanup.interval.ms=200
"""


class RefKafka:
    def __init__(self, workdir, classpath):
        self.dir = Path(workdir)
        self.cp = classpath
        self.port = free_port()
        self.cport = free_port()
        self.bootstrap = "127.0.0.1:%d" % self.port
        self.proc = None
        self.log_path = self.dir / "kafka.log"
        self.start_seconds = None

    def _java(self, *args, timeout=120):
        return subprocess.run(["java", "-cp", self.cp] + list(args),
                              stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True,
                              timeout=timeout)

    def start(self, timeout=90):
        props = self.dir / "server.properties"
        props.write_text(PROPERTIES.format(port=self.port, cport=self.cport,
                                           data=self.dir / "data"))
        # A cluster id is 16 random bytes in URL-safe base64, no padding;
        # like Kafka's Uuid.randomUuid, never one starting with "-", which
        # the tool's argument parser would take for an option.
        cid = "-"
        while cid.startswith("-"):
            cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode()[:22]
        t0 = time.monotonic()
        res = self._java("kafka.tools.StorageTool", "format", "-t", cid,
                         "-c", str(props), "--standalone")
        if res.returncode != 0:
            raise RuntimeError("kafka-storage format failed:\n" + res.stdout)
        log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            ["java", "-Xmx512m", "-cp", self.cp, "kafka.Kafka", str(props)],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log,
            cwd=str(self.dir))
        log.close()
        deadline = time.monotonic() + timeout
        while not port_open(self.port):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.kill()
                raise RuntimeError("Kafka did not listen on %d:\n%s"
                                   % (self.port, self.log_tail()))
            time.sleep(0.1)
        # Ready when it hands out producer ids (the controller has
        # granted the broker a block; until then InitProducerId is
        # COORDINATOR_LOAD_IN_PROGRESS) and both coordinators answer
        # (FindCoordinator creates __transaction_state and
        # __consumer_offsets, as Kafka does only on demand).
        while True:
            try:
                cli = kw.TxnClient(self.port)
                err = cli.init_producer_id()[0]
                if not err:
                    err = cli.find_coordinator("warm-up", key_type=1)[0][
                        "error"]
                if not err:
                    err = cli.find_coordinator("warm-up", key_type=0)[0][
                        "error"]
                cli.close()
            except (OSError, AssertionError, ConnectionError):
                err = -1
            if err == 0:
                break
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.kill()
                raise RuntimeError("Kafka not ready (InitProducerId %d):\n%s"
                                   % (err, self.log_tail()))
            time.sleep(0.2)
        self.start_seconds = time.monotonic() - t0

    def rss_kb(self):
        try:
            with open("/proc/%d/status" % self.proc.pid) as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1])
        except OSError:
            pass
        return None

    def log_tail(self, n=40):
        try:
            return "".join(self.log_path.read_text(
                errors="replace").splitlines(True)[-n:])
        except OSError:
            return ""

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)
