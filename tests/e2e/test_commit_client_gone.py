"""An OffsetCommit or TxnOffsetCommit whose client goes away while the
commit is being made durable (commit 226fbaf: the answer freed the
request, and the commit's partition was then read from the freed arena).

The fail point offset_commit.wait_for_close holds every durable commit
until its client's connection is closed, so the late path runs every time
instead of by luck on a busy machine.  The commit must still be applied
(a new connection reads it back) and the broker must live on: under ASan
the use-after-free kills the broker, and these tests fail.
"""

import time

import kafka_wire as kw
from conftest import SLOW, needs_cairn

pytestmark = needs_cairn

TOPIC = "gone"
HOLD = "offset_commit.wait_for_close=error"


def held_broker(broker):
    broker.failpoints = HOLD
    broker.restart()
    broker.create_topic(TOPIC, 1)
    return broker


def ready(cli, key, key_type):
    deadline = time.monotonic() + 30 * SLOW
    while True:
        err = cli.find_coordinator(key, key_type=key_type)[0]["error"]
        if err == 0 or time.monotonic() > deadline:
            assert err == 0, err
            return
        time.sleep(0.1)


def send_and_leave(cli, build, *args):
    """Sends one request, sees that no answer comes while the client is
    there (the fail point holds it), and closes the connection."""
    cli.corr += 1
    cli.sock.sendall(build(cli.corr, *args))
    cli.sock.settimeout(0.5)
    try:
        got = kw.recv_frame(cli.sock)
    except OSError:     # socket.timeout: held, as it should be
        got = None
    assert got is None, "the commit was answered; the fail point held nothing"
    cli.close()


def committed(broker, group):
    """The group's committed offset of TOPIC-0 once it shows, polled from a
    new connection (the held commit is applied only after the close)."""
    cli = kw.ReadClient(broker.port)
    try:
        deadline = time.monotonic() + 30 * SLOW
        while True:
            assert broker.alive(), broker.log_tail()
            _, parts = cli.offset_fetch(group, {TOPIC: [0]})
            err, off = parts[(TOPIC, 0)]
            if (err == 0 and off >= 0) or time.monotonic() > deadline:
                return err, off
            time.sleep(0.1)
    finally:
        cli.close()


def test_offset_commit_client_gone(broker):
    b = held_broker(broker)
    group = "gone-plain"
    cli = kw.ReadClient(b.port)
    ready(cli, group, kw.COORDINATOR_GROUP)
    send_and_leave(cli, kw.offset_commit_request_v7, group, {(TOPIC, 0): 5})
    assert committed(b, group) == (0, 5)
    assert b.alive(), b.log_tail()


def test_txn_offset_commit_client_gone(broker):
    b = held_broker(broker)
    group, tid = "gone-txn", "gone-tid"
    cli = kw.ReadClient(b.port)
    ready(cli, tid, kw.COORDINATOR_TRANSACTION)
    ready(cli, group, kw.COORDINATOR_GROUP)
    err, pid, epoch = cli.init_producer_id(version=4, transactional_id=tid,
                                           txn_timeout_ms=60000)
    assert err == 0, err
    assert kw.add_offsets_to_txn(cli, tid, pid, epoch, group) == 0
    send_and_leave(cli, kw.txn_offset_commit_request_v2, tid, group, pid,
                   epoch, {(TOPIC, 0): 7})
    # The pending offset, applied after the close, becomes the group's
    # with the transaction's commit (from another connection).
    cli = kw.ReadClient(b.port)
    try:
        deadline = time.monotonic() + 30 * SLOW
        while True:
            err = cli.end_txn(tid, pid, epoch, True, 3)
            if err != kw.CONCURRENT_TRANSACTIONS or \
                    time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert err == 0, err
    finally:
        cli.close()
    assert committed(b, group) == (0, 7)
    assert b.alive(), b.log_tail()
