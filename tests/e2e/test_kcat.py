"""kcat (librdkafka's command-line client) against the broker."""

import json

import pytest

from conftest import run, SLOW

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def kcat(broker, *args, stdin=None, timeout=30 * SLOW):
    res = run(["kcat", "-b", broker.bootstrap, "-X", "api.version.request=true"]
              + list(args), timeout=timeout, input=stdin)
    assert res.returncode == 0, "kcat %s failed: %s" % (args, res.stderr)
    return res.stdout


def test_metadata_lists_broker_and_topic(broker):
    broker.create_topic("kcat-meta", 3)
    md = json.loads(kcat(broker, "-L", "-J"))
    ports = [b["name"].rsplit(":", 1)[1] for b in md["brokers"]]
    assert str(broker.port) in ports, md["brokers"]
    topics = {t["topic"]: t for t in md["topics"]}
    assert "kcat-meta" in topics, list(topics)
    parts = topics["kcat-meta"]["partitions"]
    assert sorted(p["partition"] for p in parts) == [0, 1, 2]
    assert all(p["leader"] == md["brokers"][0]["id"] for p in parts)
    # Plain-text listing too, as a person would run it.
    text = kcat(broker, "-L", "-t", "kcat-meta")
    assert 'topic "kcat-meta" with 3 partitions' in text, text


def test_produce_consume_lines(broker):
    broker.create_topic("kcat-lines", 1)
    lines = ["line %d %s" % (i, "x" * (i % 50)) for i in range(500)]
    kcat(broker, "-P", "-t", "kcat-lines", "-p", "0",
         stdin="\n".join(lines) + "\n")
    out = kcat(broker, "-C", "-t", "kcat-lines", "-p", "0", "-o",
               "beginning", "-e", "-q")
    assert out.splitlines() == lines


@pytest.mark.parametrize("codec", CODECS)
def test_codec(broker, codec):
    topic = "kcat-" + codec
    broker.create_topic(topic, 1)
    # Repetitive lines so every codec really compresses the batch.
    lines = ["%s message %05d %s" % (codec, i, "abc" * 20)
             for i in range(2000)]
    kcat(broker, "-P", "-t", topic, "-p", "0", "-X",
         "compression.codec=" + codec, "-X", "linger.ms=50",
         stdin="\n".join(lines) + "\n")
    out = kcat(broker, "-C", "-t", topic, "-p", "0", "-o", "beginning",
               "-e", "-q", "-f", "%o %s\\n")
    got = out.splitlines()
    assert len(got) == len(lines)
    for i, (want, line) in enumerate(zip(lines, got)):
        off, value = line.split(" ", 1)
        assert int(off) == i
        assert value == want
