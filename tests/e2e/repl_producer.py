"""An idempotent acks=all producer that writes until the test says stop,
for the replication tests: brokers are killed and restarted underneath it
while it writes, and the test, not a rate or a count, decides when enough
has happened.

    repl_producer.py --brokers B --topic T --partitions P
                     --acked-file F --stop-file S [--count MAX]
                     [--rate MSGS_PER_S] [--timeout-ms D] [--prefix X]

Message s goes to partition s % P with value "s<s>" ("X-s<s>" with
--prefix: two producers of one test write different values, so each
offset's content depends on how they interleaved).  Each delivery report
appends "partition offset value" to F (flushed at least every 100 ms).
Sends (at most R per second, default 5000, 0 = no cap) until the file S
exists or MAX messages are sent, then waits up to D ms (default 120000)
for every report.  message.timeout.ms is 0: no message may time out, each
must arrive exactly once whatever happens to the brokers.  Prints one
summary line.  Exit 0 if every message sent was acknowledged and no fatal
error was raised, 1 otherwise, 2 on bad usage.

It runs under build/venv's Python, whose confluent-kafka bundles a
librdkafka newer than Debian's 2.0.2: that one raises a fatal "sequence
desynchronization" error when a leader dies holding a batch it had not
replicated while a later batch is in flight (librdkafka PR #4438, fixed
in 2.3.0; seen against Apache Kafka too), which would end the test's
producer for a client bug, not a broker one.

CAIRN_REPL_PRODUCER_DEBUG=eos,protocol (any librdkafka debug contexts)
puts librdkafka's debug log into the producer's log.
"""

import argparse
import os
import sys
import time

from confluent_kafka import Producer

MAX_SHOWN = 10


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--brokers", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--partitions", type=int, default=1)
    ap.add_argument("--acked-file", required=True)
    ap.add_argument("--stop-file", required=True)
    ap.add_argument("--count", type=int, default=-1)
    ap.add_argument("--rate", type=int, default=5000)
    ap.add_argument("--timeout-ms", type=int, default=120000)
    ap.add_argument("--prefix")
    a = ap.parse_args()
    if a.partitions < 1:
        ap.error("--partitions must be at least 1")

    acked = open(a.acked_file, "a")
    st = {"acked": 0, "failed": 0, "errors": 0, "fatal": None}

    def on_delivery(err, msg):
        if err is not None:
            # With idempotence and no timeout, any failure is a finding.
            st["failed"] += 1
            if st["failed"] <= MAX_SHOWN:
                print("delivery failed for %r: %s" % (msg.value(), err),
                      file=sys.stderr)
            return
        st["acked"] += 1
        acked.write("%d %d %s\n" % (msg.partition(), msg.offset(),
                                    msg.value().decode()))

    def on_error(err):
        if err.fatal():
            st["fatal"] = err.str()
        # Transport errors are expected while a broker is down.
        st["errors"] += 1
        if st["errors"] <= 3 * MAX_SHOWN or err.fatal():
            print("client error %s: %s" % (err.name(), err.str()),
                  file=sys.stderr, flush=True)

    conf = {}
    if os.environ.get("CAIRN_REPL_PRODUCER_DEBUG"):
        # librdkafka's debug contexts (e.g. eos,protocol,broker) into this
        # producer's log, to see why a producer stalls after a leader kill.
        conf = {"debug": os.environ["CAIRN_REPL_PRODUCER_DEBUG"],
                "log_level": 7}
    p = Producer({
        "bootstrap.servers": a.brokers,
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 5,
        "message.timeout.ms": 0,
        "request.timeout.ms": 5000,
        "reconnect.backoff.ms": 50,
        "reconnect.backoff.max.ms": 500,
        "topic.metadata.refresh.interval.ms": 1000,
        "log_level": 3,
        "error_cb": on_error,
        **conf,
    })
    seq = local_err = 0
    t0 = time.monotonic()
    last_report = last_check = t0
    stopped = False
    while not stopped and (a.count < 0 or seq < a.count) and \
            st["fatal"] is None:
        now = time.monotonic()
        if now - last_check > 0.1:
            last_check = now
            acked.flush()
            stopped = os.path.exists(a.stop_file)
        if len(p) > 50000 or (a.rate > 0 and seq > (now - t0) * a.rate):
            p.poll(0.005)
            continue
        val = ("%s-s%d" % (a.prefix, seq)) if a.prefix else ("s%d" % seq)
        try:
            p.produce(a.topic, val.encode(), partition=seq % a.partitions,
                      on_delivery=on_delivery)
            seq += 1
        except BufferError as e:
            # Queue full: try it again.
            local_err += 1
            if local_err <= 5:
                print("produce s%d: %s" % (seq, e), file=sys.stderr)
            p.poll(0.01)
        p.poll(0)
        if now - last_report > 1.0:
            last_report = now
            print("repl_producer: sent=%d acked=%d failed=%d outq=%d"
                  % (seq, st["acked"], st["failed"], len(p)),
                  file=sys.stderr, flush=True)
    deadline = time.monotonic() + a.timeout_ms / 1000.0
    while len(p) > 0 and time.monotonic() < deadline and \
            st["fatal"] is None:
        p.poll(0.1)
        acked.flush()
    acked.flush()
    acked.close()
    unreported = len(p)
    print("repl_producer: sent=%d acked=%d failed=%d unreported=%d "
          "local_errors=%d client_errors=%d fatal=%s secs=%.1f"
          % (seq, st["acked"], st["failed"], unreported, local_err,
             st["errors"], st["fatal"] or "none", time.monotonic() - t0),
          flush=True)
    bad = st["fatal"] is not None or st["failed"] or st["acked"] != seq
    # Not a clean destroy: with reports outstanding it would wait for
    # messages that can no longer be delivered.
    sys.stderr.flush()
    os._exit(1 if bad else 0)


if __name__ == "__main__":
    main()
