"""Differential test of dynamic broker configs: the same IncrementalAlter
Configs and DescribeConfigs requests against Cairn and the reference
Kafka 4.4.0 (test_differential.py's fixture and comparison, with
kafka_differences.txt under "configs/"):

  the error code and message for a read-only key (alone, two together,
  at the cluster default), a key Kafka only takes per broker, another
  broker's id, a name that is no id, a null value, an append to a
  non-list, a duplicate key, a bad value (code only: the reasons are
  worded differently), an unknown key; validate_only; then values set
  per broker and as the default, and what DescribeConfigs reports for
  them (value, source, read-only, synonyms in order) before and after
  deleting them.

Kafka applies a change through its metadata log, so its DescribeConfigs
sees it a moment later: the describes poll (bounded) until the value set
shows.
"""

import time

import pytest

from config_wire import APPEND, BROKER, DELETE, SET, ConfigClient
from conftest import SANITIZED, SLOW, needs_cairn
from test_differential import compare

pytestmark = [needs_cairn, pytest.mark.skipif(
    SANITIZED, reason="differential tests run against the release broker")]

KEYS = ["log.retention.ms", "message.max.bytes", "num.partitions"]


def described(cli, name):
    err, entries = cli.describe_broker(name, KEYS)
    return err, {k: (e["value"], e["source"], e["read_only"], e["synonyms"])
                 for k, e in sorted(entries.items())
                 if k != "num.partitions" or name}


def describe_when(cli, name, ready, timeout=30 * SLOW):
    deadline = time.monotonic() + timeout
    while True:
        obs = described(cli, name)
        if ready(obs[1]) or time.monotonic() > deadline:
            return obs
        time.sleep(0.1)


def value(obs, key):
    return obs.get(key, (None,))[0]


def config_errors(port):
    cli = ConfigClient(port)
    obs = []

    def alter(label, name, configs, code_only=False, validate_only=False):
        err, msg = cli.alter_broker(name, configs, validate_only)
        obs.append((label, err if code_only or not err else (err, msg)))

    alter("read_only", "1", [("num.partitions", SET, "3")])
    alter("read_only_two", "1", [("num.partitions", SET, "3"),
                                 ("log.dirs", SET, "/x")])
    alter("read_only_default", "", [("transaction.max.timeout.ms", SET,
                                      "1000")])
    alter("per_broker_at_default", "", [("listeners", SET,
                                          "PLAINTEXT://127.0.0.1:1")])
    alter("wrong_id", "7", [("log.retention.ms", SET, "1000")])
    alter("not_an_id", "x", [("log.retention.ms", SET, "1000")])
    alter("null_value", "1", [("log.roll.ms", SET, None)])
    alter("append_non_list", "1", [("log.retention.ms", APPEND, "5")])
    alter("duplicate", "1", [("message.max.bytes", SET, "2000"),
                             ("message.max.bytes", SET, "3000")])
    alter("bad_value", "1", [("message.max.bytes", SET, "abc")],
          code_only=True)
    alter("unknown_key", "1", [("cairn.test.no.such.key", SET, "1")],
          code_only=True)
    alter("validate_only", "1", [("message.max.bytes", SET, "2000000")],
          validate_only=True)
    res = cli.describe([(BROKER, "7", ["log.retention.ms"])])[0]
    obs.append(("describe_wrong_id", (res[0], res[1])))
    obs.append(("after_validate_only", described(cli, "1")))

    alter("set_broker", "1", [("log.retention.ms", SET, "1000")])
    alter("set_default", "", [("message.max.bytes", SET, "2000000"),
                              ("log.retention.ms", SET, "5000")])
    obs.append(("describe_broker", describe_when(
        cli, "1", lambda d: value(d, "log.retention.ms") == "1000"
        and value(d, "message.max.bytes") == "2000000")))
    obs.append(("describe_default", describe_when(
        cli, "", lambda d: value(d, "log.retention.ms") == "5000")))

    alter("delete_broker", "1", [("log.retention.ms", DELETE, None)])
    alter("delete_default", "", [("message.max.bytes", DELETE, None),
                                 ("log.retention.ms", DELETE, None)])
    obs.append(("describe_deleted", describe_when(
        cli, "1", lambda d: value(d, "log.retention.ms") is None
        and value(d, "message.max.bytes") == "1048588")))
    obs.append(("describe_default_deleted", describe_when(
        cli, "", lambda d: not d)))
    cli.close()
    return obs


def test_config_errors(broker_factory, kafka):
    # num.partitions is in the reference's properties file: static there.
    cairn = broker_factory(**{"num.partitions": "1"})
    compare("configs", config_errors(cairn.port), config_errors(kafka.port))
