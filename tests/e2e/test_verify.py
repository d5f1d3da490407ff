"""`cairnctl verify` (issue #7): the history checker against a Cairn broker
it owns through --broker-cmd (so it can kill -9 and restart it).

test_verify_clean: a short run with every fault kind passes (exit 0).
test_verify_finds_*: the broker started with a planted bug behind a fail
point; the checker must name it and exit 1.  The planted bugs (CN_TEST_BUG)
exist only in cairn-testbugs, built beside cairn from the same objects but
the files holding them; test_planted_bugs_only_in_test_build checks that
the shipped binary holds none.
test_verify_clean_with_lost_responses: dropped produce responses alone
(retries the broker must deduplicate) leave nothing for the checker.

Longer runs (not part of make test):
  cairnctl --bootstrap-server 127.0.0.1:PORT verify --duration 600 \
      --faults kill-worker,kill-broker,pause-worker \
      --broker-cmd "exec build/cairn --set listeners=PLAINTEXT://127.0.0.1:PORT \
                    --set log.dirs=/tmp/cairn-verify-data"
"""

import json
import re
import shlex

import pytest

from conftest import (CAIRN_BIN, SANITIZED, SLOW, free_port, needs_cairn, run,
                      scaled, tool)

pytestmark = needs_cairn

# The planted-bug runs test the checker, not the broker's memory safety:
# once, against the plain build, is enough (they cost a minute each under
# the sanitizers).
checker_self_test = pytest.mark.skipif(
    SANITIZED, reason="checker self-test runs in the plain pass only")

TESTBUGS_BIN = CAIRN_BIN.with_name("cairn-testbugs")
PLANTED = (b"bug.lso_ignores_open_txns", b"bug.duplicates_appended")


def test_planted_bugs_only_in_test_build():
    shipped = CAIRN_BIN.read_bytes()
    assert re.findall(rb"\bbug\.[a-z_]+", shipped) == []
    # Else the check above could pass only because the names changed.
    testbugs = TESTBUGS_BIN.read_bytes()
    assert [n for n in PLANTED if n not in testbugs] == []


def verify(tmp_path, duration, faults, failpoints=None, extra=(),
           binary=CAIRN_BIN):
    port = free_port()
    data = tmp_path / "data"
    data.mkdir()
    cmd = "exec %s --set listeners=PLAINTEXT://127.0.0.1:%d " \
          "--set log.dirs=%s --set group.initial.rebalance.delay.ms=0 " \
          "--set transaction.abort.timed.out.transaction.cleanup." \
          "interval.ms=1000" % (shlex.quote(str(binary)), port,
                                shlex.quote(str(data)))
    if failpoints:
        cmd = "CAIRN_FAILPOINTS=%s %s" % (failpoints, cmd)
    args = [tool("cairnctl"), "--bootstrap-server", "127.0.0.1:%d" % port,
            "--json", "verify", "--duration", str(duration),
            "--faults", faults, "--seed", "42", "--broker-cmd", cmd,
            "--dir", str(tmp_path / "hist")] + list(extra)
    res = run(args, timeout=duration + 150 * SLOW)
    print(res.stderr[-3000:])
    assert res.returncode in (0, 1), (res.returncode, res.stderr[-3000:])
    rep = json.loads(res.stdout)
    return res.returncode, rep


def summary(rep):
    return {k: v for k, v in rep["anomalies"].items() if v["count"]}


def test_verify_clean(tmp_path):
    rc, rep = verify(tmp_path, 45,
                     "kill-worker,kill-broker,pause-worker,crash-mid-commit")
    print("faults", rep["faults"], "fail point crashes",
          rep["failpoint_crashes"])
    assert rc == 0, summary(rep)
    assert rep["ok"]
    ops = rep["operations"]
    assert ops["txn_committed"] > 100 and ops["reads_rc"] > 500, ops
    assert sum(rep["faults"].values()) >= 3, rep["faults"]


@checker_self_test
def test_verify_finds_lso_ignoring_open_txns(tmp_path):
    rc, rep = verify(tmp_path, 20, "kill-worker,pause-worker",
                     "bug.lso_ignores_open_txns=error", binary=TESTBUGS_BIN)
    found = summary(rep)
    assert rc == 1 and not rep["ok"]
    assert "aborted_visible" in found or "torn_transaction" in found, found


@checker_self_test
def test_verify_finds_appended_duplicates(tmp_path):
    # The broker drops every 40th produce response after a durable append,
    # so producers retry batches it already holds; the planted bug appends
    # them again.  Lost responses, not broker kills, make the retries: a
    # kill lands between append and answer only by luck, and on a busy
    # machine a run could see none.
    rc, rep = verify(tmp_path, 20, "pause-worker",
                     "bug.duplicates_appended=error,"
                     "produce.drop_response=error/40", binary=TESTBUGS_BIN)
    found = summary(rep)
    assert rc == 1 and "duplicate" in found, found


def test_verify_clean_with_lost_responses(tmp_path):
    # The control for the test above: the same lost responses without the
    # bug are deduplicated, and the checker finds nothing.
    rc, rep = verify(tmp_path, 20, "pause-worker",
                     "produce.drop_response=error/40")
    assert rc == 0, summary(rep)
    assert rep["operations"]["writes_acked"] > scaled(200), rep["operations"]
