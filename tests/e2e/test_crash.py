"""Crash safety: kill -9 the broker under an acks=all producer, restart
it on the same port and data dir, and check every acknowledged message
survived exactly once where it was acknowledged."""

import time

from conftest import needs_cairn, run, tool, SLOW

PARTITIONS = 6


def count_lines(path):
    try:
        with open(path, "rb") as f:
            return sum(1 for _ in f)
    except FileNotFoundError:
        return 0


def wait_for_acks(path, above, timeout):
    """Wait until the acked file grows past `above` lines."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if count_lines(path) > above:
            return True
        time.sleep(0.1)
    return False


def verify(broker, topic, acked):
    res = run([tool("e2e_verify"), "--brokers", broker.bootstrap,
               "--topic", topic, "--partitions", str(PARTITIONS),
               "--acked-file", acked], timeout=120 * SLOW)
    print(res.stdout)
    assert res.returncode == 0, res.stdout + res.stderr[-3000:]
    assert "e2e_verify: ok" in res.stdout
    return res.stdout


@needs_cairn
def test_kill9_twice_keeps_acked(broker, background, tmp_path):
    topic = "crash"
    broker.create_topic(topic, PARTITIONS)
    acked = str(tmp_path / "acked.txt")
    prod = background([tool("e2e_crash_producer"), "--brokers",
                       broker.bootstrap, "--topic", topic, "--partitions",
                       str(PARTITIONS), "--acked-file", acked,
                       "--duration-ms", str(120000 * SLOW),
                       "--rate", "20000"], name="producer")
    for crash in range(2):
        before = count_lines(acked)
        assert wait_for_acks(acked, before + 1000, 20 * SLOW), \
            "producer made no progress before crash %d:\n%s" % (
                crash, prod.output()[-2000:])
        time.sleep(1.0)
        broker.kill9()
        time.sleep(0.5)
        broker.start()
    # Production must resume against the restarted broker.
    after_restart = count_lines(acked)
    assert wait_for_acks(acked, after_restart + 1000, 30 * SLOW), \
        "no acks after the last restart:\n%s" % prod.output()[-2000:]
    time.sleep(2.0)
    rc = prod.stop(timeout=30)
    print(prod.output()[-2000:])
    assert rc == 0, prod.output()[-2000:]
    out = verify(broker, topic, acked)
    assert "acked=0 " not in out


@needs_cairn
def test_sigterm_is_prompt_and_keeps_acked(broker, tmp_path):
    topic = "clean"
    broker.create_topic(topic, PARTITIONS)
    acked = str(tmp_path / "acked.txt")
    res = run([tool("e2e_crash_producer"), "--brokers", broker.bootstrap,
               "--topic", topic, "--partitions", str(PARTITIONS),
               "--acked-file", acked, "--duration-ms", "3000"],
              timeout=60 * SLOW)
    assert res.returncode == 0, res.stderr[-2000:]
    assert count_lines(acked) > 1000, res.stdout + res.stderr[-2000:]
    t0 = time.monotonic()
    rc = broker.stop(timeout=10 * SLOW)
    took = time.monotonic() - t0
    assert rc == 0, "exit %s after SIGTERM:\n%s" % (rc, broker.log_tail())
    assert took < 5 * SLOW, "SIGTERM shutdown took %.1fs" % took
    broker.start()
    verify(broker, topic, acked)
