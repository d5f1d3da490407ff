"""e2e_roundtrip (librdkafka producer + assign() consumer) for every
codec and acks value: 15 runs of 200k x 100-byte messages over 6
partitions, 20k each under the sanitizers. CAIRN_E2E_ROUNDTRIP_MSGS
overrides the count (e.g. to shorten a local run)."""

import os

import pytest

from conftest import run, scaled, tool, SLOW

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
ACKS = ["0", "1", "-1"]
MESSAGES = int(os.environ.get("CAIRN_E2E_ROUNDTRIP_MSGS", scaled(200000)))


@pytest.mark.parametrize("acks", ACKS)
@pytest.mark.parametrize("codec", CODECS)
def test_roundtrip(broker, codec, acks):
    topic = "rt-%s-%s" % (codec, acks.replace("-", "m"))
    broker.create_topic(topic, 6)
    res = run([tool("e2e_roundtrip"), "--brokers", broker.bootstrap,
               "--topic", topic, "--partitions", "6",
               "--messages", str(MESSAGES), "--size", "100",
               "--codec", codec, "--acks", acks,
               "--timeout-s", str(60 * SLOW)],
              timeout=180 * SLOW)
    print(res.stdout)
    assert res.returncode == 0, res.stdout + res.stderr[-3000:]
    assert "e2e_roundtrip: ok" in res.stdout
