"""Configuration that would start a broker which cannot work is refused
at start, naming the key and the reason (issue #11, defect 4); and
min.insync.replicas above what one broker can hold refuses acks=all with
NOT_ENOUGH_REPLICAS at once, as Kafka does, instead of timing out.
"""

import subprocess
import time

import pytest

import kafka_wire as kw
from conftest import CAIRN_BIN, SLOW, free_port, needs_cairn

pytestmark = needs_cairn

NOT_ENOUGH_REPLICAS = 19


def start_fails(tmp_path, *sets):
    """Runs the broker with sets; it must exit non-zero on its own.
    Returns its stderr."""
    argv = [str(CAIRN_BIN),
            "--set", "listeners=PLAINTEXT://127.0.0.1:%d" % free_port(),
            "--set", "http.listener=",
            "--set", "log.dirs=%s" % (tmp_path / "data")]
    for s in sets:
        argv += ["--set", s]
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=str(tmp_path))
    try:
        out, err = proc.communicate(timeout=10 * SLOW)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate(timeout=10)
        pytest.fail("broker started with %s:\n%s" % (sets, err[-2000:]))
    assert proc.returncode not in (0, None), (proc.returncode, err)
    return err


@pytest.mark.parametrize("setting,words", [
    ("socket.request.max.bytes=1", ["socket.request.max.bytes",
                                    "at least 1024", "ApiVersions"]),
    ("socket.request.max.bytes=1023", ["socket.request.max.bytes",
                                       "at least 1024"]),
    ("log.retention.ms=-5", ["log.retention.ms", "\"-5\"", "at least -1",
                             "forever"]),
    ("log.retention.hours=-2", ["log.retention.hours", "\"-2\"",
                                "at least -1", "forever"]),
    ("log.retention.minutes=-3", ["log.retention.minutes", "at least -1"]),
    ("log.retention.ms=0", ["log.retention.ms", "unlimited (-1)"]),
    ("log.retention.hours=0", ["log.retention.hours", "unlimited (-1)"]),
])
def test_unworkable_value_refused(tmp_path, setting, words):
    err = start_fails(tmp_path, setting)
    for w in words:
        assert w in err, err


def test_log_dirs_naming_a_file(tmp_path):
    f = tmp_path / "not-a-dir"
    f.write_text("x")
    err = start_fails(tmp_path, "log.dirs=%s" % f)
    assert "log.dirs" in err and "regular file" in err, err
    assert "not a directory" in err, err
    assert "Permission denied" not in err, err


def produce_acks_all(broker, topic, acks=-1):
    """(error, seconds until the answer) of one produce with a long
    request timeout."""
    cli = kw.Client(broker.port, timeout=90)
    try:
        t0 = time.monotonic()
        err, _ = cli.produce(topic, 0, kw.record_batch([b"x"]), acks=acks,
                             timeout_ms=60000)
        return err, time.monotonic() - t0
    finally:
        cli.close()


def test_acks_all_above_min_insync_refused_at_once(broker_factory):
    """Topic min.insync.replicas=2 on one broker: CreateTopics accepts it
    (as Kafka does), acks=all gets NOT_ENOUGH_REPLICAS long before the
    request's 60 s timeout, acks=1 still works."""
    broker = broker_factory()
    broker.create_topic("isr2", 1, {"min.insync.replicas": "2"})
    err, took = produce_acks_all(broker, "isr2")
    assert err == NOT_ENOUGH_REPLICAS, err
    assert took < 30, took
    err, _ = produce_acks_all(broker, "isr2", acks=1)
    assert err == 0, err


def test_broker_default_min_insync_above_one(broker_factory):
    """The broker-wide default does the same, and the start says so."""
    broker = broker_factory(**{"min.insync.replicas": "2"})
    assert "min.insync.replicas=2: this single broker is one in-sync" \
        in broker.log_tail(100)
    broker.create_topic("isr-default")
    err, took = produce_acks_all(broker, "isr-default")
    assert err == NOT_ENOUGH_REPLICAS, err
    assert took < 30, took
    # A topic override back to 1 makes acks=all work.
    broker.create_topic("isr-one", 1, {"min.insync.replicas": "1"})
    err, _ = produce_acks_all(broker, "isr-one")
    assert err == 0, err
