"""`cairnctl topics describe` shows the log cleaner's state of compacted
topics (issue #19): per partition the dirty ratio, the cleaner checkpoint
(first dirty offset), the time since its last pass and that pass's error,
read from Cairn's /metrics (Kafka has no API for it), found through the
broker's http.listener (DescribeConfigs) or --metrics-url.

The cleaner runs as in test_compacted.py (its helpers); waits poll
/metrics, never a fixed time.  Values that move by themselves (the ms
since the last pass) are only checked for their form."""
import json
import time

import pytest

import kafka_wire as kw
from conftest import SANITIZED, SLOW, free_port, metrics, needs_cairn, ok
from test_cairnctl import ctl, describe_table
from test_compacted import FAST, create, raw_produce, wait_clean

pytestmark = needs_cairn

CLEANER_FIELDS = ("CleanerDirtyRatio", "CleanerCheckpoint",
                  "CleanerLastPassMsAgo", "CleanerLastError")


def produce_rounds(broker, topic, rounds, tag=b""):
    for rnd in range(rounds):
        err = raw_produce(broker, topic, kw.record_batch(
            [b"%s%d" % (tag, rnd) * 60] * 5,
            keys=[b"k%d" % i for i in range(5)]))[0]
        assert err == 0


def pkey(name, topic, partition=0):
    return '%s{topic="%s",partition="%d"}' % (name, topic, partition)


def part_lines(broker, *args):
    """The describe's result (exit code 0 checked) and its parsed text."""
    res = ctl(broker, "topics", "describe", *args)
    ok(res)
    return res, describe_table(res.stdout)


def test_describe_shows_cleaner_state_matching_metrics(broker_factory):
    broker = broker_factory(**FAST)
    create(broker, "cc-cmp")
    broker.create_topic("cc-plain")
    produce_rounds(broker, "cc-cmp", 12)
    wait_clean(broker, "cc-cmp")
    # No pass from here on: the next writes stay dirty and the checkpoint
    # stays where the passes left it, so cairnctl and /metrics can agree.
    ok(ctl(broker, "configs", "alter", "--topic", "cc-cmp", "--set",
           "min.cleanable.dirty.ratio=1"))
    produce_rounds(broker, "cc-cmp", 12, tag=b"n")
    dirty = pkey("cairn_cleaner_partition_dirty_ratio", "cc-cmp")
    deadline = time.monotonic() + 30 * SLOW
    while metrics(broker)[dirty] == 0:
        assert time.monotonic() < deadline, "nothing dirty after the writes"
        time.sleep(0.05)
    m = metrics(broker)
    assert m["cairn_cleaner_running_passes"] == 0
    ckpt = m[pkey("cairn_cleaner_partition_first_dirty_offset", "cc-cmp")]
    assert ckpt > 0
    assert m[pkey("cairn_cleaner_partition_time_since_last_pass_ms",
                  "cc-cmp")] >= 0
    assert m['cairn_cleaner_partition_last_error{topic="cc-cmp",'
             'partition="0",error=""}'] == 0
    # The plain topic has no cleaner series at all.
    assert not [k for k in m if "cc-plain" in k and "cleaner" in k]

    res, topics = part_lines(broker, "--topic", "cc-cmp")
    assert "note" not in res.stderr, res.stderr
    p = topics["cc-cmp"]["parts"][0]
    # Three decimals in the text (/metrics has six).
    assert abs(float(p["CleanerDirtyRatio"]) - m[dirty]) <= 0.0005 + 1e-9
    assert float(p["CleanerDirtyRatio"]) > 0
    assert int(p["CleanerCheckpoint"]) == ckpt
    assert int(p["CleanerLastPassMsAgo"]) >= 0
    assert p["CleanerLastError"] == "none"

    out = ok(ctl(broker, "--json", "topics", "describe", "--topic",
                 "cc-cmp"))
    t = json.loads(out)[0]
    c = t["partition_info"][0]["cleaner"]
    assert t["cleaner_note"] is None
    assert abs(c["dirty_ratio"] - m[dirty]) < 1e-5
    assert c["checkpoint"] == ckpt
    assert c["ms_since_last_pass"] >= 0 and c["last_error"] is None

    # A delete topic, and the compacted internal topic, show none of it,
    # and reading all topics needs no note either.
    res, topics = part_lines(broker)
    assert "note" not in res.stderr, res.stderr
    for name in ("cc-plain", "__consumer_offsets"):
        for part in topics[name]["parts"]:
            assert not set(CLEANER_FIELDS) & set(part), part
    assert int(topics["cc-cmp"]["parts"][0]["CleanerCheckpoint"]) == ckpt
    out = ok(ctl(broker, "--json", "topics", "describe", "--topic",
                 "cc-plain"))
    t = json.loads(out)[0]
    assert "cleaner_note" not in t
    assert "cleaner" not in t["partition_info"][0]


def test_unreachable_metrics_endpoint_is_a_note(broker_factory):
    """The describe still prints everything else and exits 0; stderr says
    why the cleaner state is missing; JSON carries the same note."""
    broker = broker_factory(**FAST)
    create(broker, "cc-cmp")
    port = free_port()          # bound then closed: nothing listens there
    url = "http://127.0.0.1:%d/metrics" % port
    res, topics = part_lines(broker, "--topic", "cc-cmp", "--metrics-url",
                             url)
    assert ("cairnctl: note: cleaner state not shown: cannot read the "
            "metrics endpoint: cannot connect to 127.0.0.1:%d" % port
            in res.stderr), res.stderr
    assert "refused" in res.stderr
    p = topics["cc-cmp"]["parts"][0]
    assert p["Leader"] == "1" and not set(CLEANER_FIELDS) & set(p)
    out = ok(ctl(broker, "--json", "topics", "describe", "--topic",
                 "cc-cmp", "--metrics-url", url))
    t = json.loads(out)[0]
    assert "cannot connect to 127.0.0.1:%d" % port in t["cleaner_note"]
    assert t["partition_info"][0]["cleaner"] is None
    # Something that is not Cairn's /metrics answering is said too.
    res, _ = part_lines(broker, "--topic", "cc-cmp", "--metrics-url",
                        "http://127.0.0.1:%d/nope" % broker.http_port)
    assert "HTTP status 404" in res.stderr, res.stderr
    # The broker's own endpoint, found without --metrics-url, works.
    res, topics = part_lines(broker, "--topic", "cc-cmp")
    assert topics["cc-cmp"]["parts"][0]["CleanerCheckpoint"] == "0"


def test_metrics_endpoint_off_is_a_note(broker_factory):
    broker = broker_factory(**{"http.listener": ""}, **FAST)
    create(broker, "cc-cmp")
    res, topics = part_lines(broker, "--topic", "cc-cmp")
    assert ("cleaner state not shown: the metrics endpoint of broker 1 is "
            "off (http.listener is empty)" in res.stderr), res.stderr
    assert not set(CLEANER_FIELDS) & set(topics["cc-cmp"]["parts"][0])


def test_failed_pass_error_shown(broker_factory):
    broker = broker_factory(**FAST)
    broker.stop()
    broker.failpoints = "clean.written=error"
    broker.start()
    create(broker, "cc-err")
    produce_rounds(broker, "cc-err", 10)
    key = ('cairn_cleaner_partition_last_error{topic="cc-err",'
           'partition="0",error="fail point"}')
    deadline = time.monotonic() + 30 * SLOW
    while metrics(broker).get(key) != 1:
        assert time.monotonic() < deadline, broker.log_tail()
        time.sleep(0.05)
    _, topics = part_lines(broker, "--topic", "cc-err")
    p = topics["cc-err"]["parts"][0]
    assert p["CleanerLastError"] == "fail point"
    assert p["CleanerCheckpoint"] == "0"
    assert int(p["CleanerLastPassMsAgo"]) >= 0
    out = ok(ctl(broker, "--json", "topics", "describe", "--topic",
                 "cc-err"))
    c = json.loads(out)[0]["partition_info"][0]["cleaner"]
    assert c["last_error"] == "fail point"
    broker.failpoints = None


@pytest.mark.skipif(SANITIZED, reason="the reference Kafka runs against "
                    "the release build only")
def test_apache_kafka_has_no_endpoint_note(kafka):
    """Against Apache Kafka 4.4 (the differential tests' reference; no
    http.listener key) the describe works as before, with the note."""
    create(kafka, "cc-ref", **{"segment.bytes": "1048576"})  # Kafka's least
    deadline = time.monotonic() + 30
    while True:     # Kafka's metadata lags its CreateTopics answer
        res = ctl(kafka, "topics", "describe", "--topic", "cc-ref")
        if res.returncode == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    ok(res)
    p = describe_table(res.stdout)["cc-ref"]["parts"][0]
    assert p["Leader"] != "" and not set(CLEANER_FIELDS) & set(p)
    assert ("cairnctl: note: cleaner state not shown: broker %s does not "
            "report http.listener (not Cairn?); give --metrics-url"
            % p["Leader"] in res.stderr), res.stderr
