"""Shared by the tests that run other client stacks against Cairn
(test_franz_go.py, test_python_clients.py): running a client program as a
subprocess that prints JSON, reading a topic to its end with Debian's
confluent_kafka, and the API versions a client sent, from the broker's
cairn_requests_by_version_total counters (before and after the client
ran, so the test's own admin and check traffic is left out).

Each test writes the versions it saw to build/api-versions/<client>.txt
and prints them (pytest -s shows them); the README's protocol section
lists them per client.
"""

import json
import re
import subprocess
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, TopicPartition

from conftest import REPO, SLOW, metrics

VENV_PY = REPO / "build" / "venv" / "bin" / "python"
VERSIONS_DIR = REPO / "build" / "api-versions"
_SAMPLE = re.compile(
    r'^cairn_requests_by_version_total\{api="([^"]+)",version="(\d+)"\}$')


def api_version_counts(broker):
    """{(api name, version): requests finished} so far."""
    out = {}
    for key, value in metrics(broker).items():
        m = _SAMPLE.match(key)
        if m:
            out[(m.group(1), int(m.group(2)))] = int(value)
    return out


def versions_sent(before, after):
    """{api name: [versions]} of the requests counted after `before`."""
    out = {}
    for (api, v), n in after.items():
        if n > before.get((api, v), 0):
            out.setdefault(api, []).append(v)
    return {api: sorted(vs) for api, vs in sorted(out.items())}


_seen = {}  # client -> {api: set of versions}, over this session's runs


def record_versions(client, sent):
    """Adds what `client` sent in one run to what it sent in the earlier
    runs of this pytest session, saves the union and prints the run's."""
    seen = _seen.setdefault(client, {})
    for api, vs in sent.items():
        seen.setdefault(api, set()).update(vs)
    fmt = lambda d: ", ".join("%s %s" % (api, "/".join(map(str, sorted(vs))))
                              for api, vs in sorted(d.items()))
    VERSIONS_DIR.mkdir(parents=True, exist_ok=True)
    (VERSIONS_DIR / ("%s.txt" % client)).write_text(fmt(seen) + "\n")
    print("\n%s sent: %s" % (client, fmt(sent)))


def run_recorded(client, broker, argv, timeout, stderr_path, env=None):
    """run_json(), recording the API versions the program sent.
    Returns (its JSON, {api: [versions]} of this run)."""
    before = api_version_counts(broker)
    out = run_json(argv, timeout, stderr_path, env)
    sent = versions_sent(before, api_version_counts(broker))
    record_versions(client, sent)
    return out, sent


def run_json(argv, timeout, stderr_path, env=None):
    """Runs argv; the JSON object of its last line starting with '{'.
    Fails the test on a timeout, a non-zero exit or no JSON."""
    with open(stderr_path, "w") as err:
        try:
            res = subprocess.run([str(a) for a in argv],
                                 stdin=subprocess.DEVNULL,
                                 stdout=subprocess.PIPE, stderr=err,
                                 text=True, timeout=timeout, env=env)
        except subprocess.TimeoutExpired:
            pytest.fail("%s timed out after %ss; stderr:\n%s"
                        % (argv[0], timeout,
                           Path(stderr_path).read_text()[-4000:]))
    lines = [x for x in res.stdout.splitlines() if x.startswith("{")]
    if res.returncode != 0 or not lines:
        pytest.fail("%s exited %d; stdout:\n%s\nstderr:\n%s"
                    % (" ".join(map(str, argv)), res.returncode,
                       res.stdout[-2000:],
                       Path(stderr_path).read_text()[-4000:]))
    return json.loads(lines[-1])


def wait_stable(broker, topic, partitions, timeout=30 * SLOW):
    """Waits until no transaction is open on the topic (the markers of
    the last commit or abort are written, so LSO == high watermark)."""
    deadline = time.monotonic() + timeout
    while True:
        m = metrics(broker)
        lags = [m.get('cairn_partition_lso_lag{topic="%s",partition="%d"}'
                      % (topic, p)) for p in range(partitions)]
        if all(lag == 0 for lag in lags):
            return
        if time.monotonic() > deadline:
            pytest.fail("%s: LSO lag still %s" % (topic, lags))
        time.sleep(0.1)


def read_to_end(bootstrap, topic, partitions, isolation="read_committed",
                timeout=60 * SLOW):
    """{partition: [(offset, value str)]} of everything a consumer of that
    isolation level sees up to each partition's end (the LSO for
    read_committed), read with Debian's confluent_kafka."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "e2e-reader",
                  "enable.auto.commit": False, "isolation.level": isolation,
                  "enable.partition.eof": True})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = {p: [] for p in range(partitions)}
    at_end = set()
    deadline = time.monotonic() + timeout
    try:
        while len(at_end) < partitions:
            if time.monotonic() > deadline:
                pytest.fail("%s: only partitions %s reached their end"
                            % (topic, sorted(at_end)))
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(m.partition())
                    continue
                pytest.fail("reading %s: %s" % (topic, m.error()))
            at_end.discard(m.partition())
            got[m.partition()].append((m.offset(), m.value().decode()))
    finally:
        c.close()
    return got


def committed(bootstrap, group, topic, partitions):
    """{partition: committed offset} of a group (-1001 when none)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "enable.auto.commit": False})
    try:
        tps = c.committed([TopicPartition(topic, p)
                           for p in range(partitions)], timeout=15 * SLOW)
    finally:
        c.close()
    return {tp.partition: tp.offset for tp in tps}
