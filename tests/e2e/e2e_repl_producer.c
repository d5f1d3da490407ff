/*
 * e2e_repl_producer: an idempotent acks=all librdkafka producer that
 * writes until the test says stop, for the replication tests: brokers
 * are killed and restarted underneath it while it writes, and the test,
 * not a rate or a count, decides when enough has happened.
 *
 *   e2e_repl_producer --brokers B --topic T --partitions P
 *                     --acked-file F --stop-file S [--count MAX]
 *                     [--rate MSGS_PER_S] [--timeout-ms D] [--prefix X]
 *
 * Message s goes to partition s % P with value "s<s>", as
 * e2e_idem_producer does, so e2e_verify --check-gaps checks the result;
 * with --prefix the value is "X-s<s>" (two producers of one test write
 * different values, so each offset's content depends on how they
 * interleaved).
 * Each delivery report appends "partition offset value" to F (flushed at
 * least every 100 ms).  Sends (at most R per second, default 5000, 0 = no
 * cap) until the file S exists or MAX messages are sent (default: no
 * limit), then waits up to D ms (default 120000) for every report.
 * message.timeout.ms is 0: no message may time out, each must arrive
 * exactly once whatever happens to the brokers.  Prints one summary line.
 * Exit 0 if every message sent was acknowledged and no fatal error was
 * raised, 1 otherwise, 2 on bad usage or setup.
 */
#include <librdkafka/rdkafka.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_SHOWN 10

static FILE *acked;
static long n_acked, n_failed, n_errors;

static double now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void conf_set(rd_kafka_conf_t *conf, const char *k, const char *v)
{
    char errstr[256];

    if (rd_kafka_conf_set(conf, k, v, errstr, sizeof(errstr)) !=
        RD_KAFKA_CONF_OK) {
        fprintf(stderr, "config %s=%s: %s\n", k, v, errstr);
        exit(2);
    }
}

static void dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    (void)rk;
    (void)opaque;
    if (m->err) {
        /* With idempotence and no timeout, any failure is a finding. */
        if (n_failed++ < MAX_SHOWN)
            fprintf(stderr, "delivery failed for %.*s: %s\n", (int)m->len,
                    (const char *)m->payload, rd_kafka_err2str(m->err));
        return;
    }
    n_acked++;
    fprintf(acked, "%d %" PRId64 " %.*s\n", m->partition, m->offset,
            (int)m->len, (const char *)m->payload);
}

static void error_cb(rd_kafka_t *rk, int err, const char *reason, void *opaque)
{
    (void)rk;
    (void)opaque;
    /* Transport errors are expected while a broker is down. */
    if (n_errors++ < 3 * MAX_SHOWN)
        fprintf(stderr, "client error %s: %s\n",
                rd_kafka_err2name((rd_kafka_resp_err_t)err), reason);
}

static void usage(void)
{
    fprintf(stderr, "usage: e2e_repl_producer --brokers B --topic T "
                    "--partitions P --acked-file F --stop-file S "
                    "[--count MAX] [--rate R] [--timeout-ms D] "
                    "[--prefix X]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    const char *brokers = NULL, *topic = NULL, *file = NULL, *stop = NULL;
    const char *prefix = NULL;
    int partitions = 1;
    long count = -1, rate = 5000, timeout_ms = 120000;
    char errstr[512];
    rd_kafka_conf_t *conf;
    rd_kafka_t *rk;
    rd_kafka_resp_err_t fatal;
    long seq = 0, n_local_err = 0;
    double t0, last_report, last_check, deadline;
    int i, unreported, stopped = 0;

    for (i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--brokers"))
            brokers = argv[i + 1];
        else if (!strcmp(argv[i], "--topic"))
            topic = argv[i + 1];
        else if (!strcmp(argv[i], "--partitions"))
            partitions = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--acked-file"))
            file = argv[i + 1];
        else if (!strcmp(argv[i], "--stop-file"))
            stop = argv[i + 1];
        else if (!strcmp(argv[i], "--count"))
            count = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--rate"))
            rate = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--timeout-ms"))
            timeout_ms = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--prefix"))
            prefix = argv[i + 1];
        else
            usage();
    }
    if (i != argc || !brokers || !topic || !file || !stop || partitions < 1)
        usage();

    acked = fopen(file, "a");
    if (!acked) {
        perror(file);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);

    conf = rd_kafka_conf_new();
    conf_set(conf, "bootstrap.servers", brokers);
    conf_set(conf, "enable.idempotence", "true");
    conf_set(conf, "acks", "all");
    conf_set(conf, "linger.ms", "5");
    conf_set(conf, "message.timeout.ms", "0");
    conf_set(conf, "request.timeout.ms", "5000");
    conf_set(conf, "reconnect.backoff.ms", "50");
    conf_set(conf, "reconnect.backoff.max.ms", "500");
    conf_set(conf, "topic.metadata.refresh.interval.ms", "1000");
    conf_set(conf, "log_level", "3");
    rd_kafka_conf_set_dr_msg_cb(conf, dr_cb);
    rd_kafka_conf_set_error_cb(conf, error_cb);
    rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
    if (!rk) {
        fprintf(stderr, "rd_kafka_new: %s\n", errstr);
        return 2;
    }

    t0 = now_ms();
    last_report = last_check = t0;
    while (!stopped && (count < 0 || seq < count) &&
           !rd_kafka_fatal_error(rk, NULL, 0)) {
        char val[96];
        int len;
        rd_kafka_resp_err_t err;

        if (now_ms() - last_check > 100) {
            last_check = now_ms();
            fflush(acked);
            stopped = access(stop, F_OK) == 0;
        }
        if (rd_kafka_outq_len(rk) > 50000 ||
            (rate > 0 && seq > (now_ms() - t0) * rate / 1000)) {
            rd_kafka_poll(rk, 5);
            continue;
        }
        len = prefix ? snprintf(val, sizeof(val), "%.64s-s%ld", prefix, seq)
                     : snprintf(val, sizeof(val), "s%ld", seq);
        err = rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic),
                                RD_KAFKA_V_PARTITION(
                                    (int32_t)(seq % partitions)),
                                RD_KAFKA_V_VALUE(val, (size_t)len),
                                RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                                RD_KAFKA_V_END);
        if (err) {
            /* Queue full or partition not yet known: try it again. */
            if (n_local_err++ < 5)
                fprintf(stderr, "producev s%ld: %s\n", seq,
                        rd_kafka_err2str(err));
            rd_kafka_poll(rk, 10);
        } else {
            seq++;
        }
        rd_kafka_poll(rk, 0);
        if (now_ms() - last_report > 1000) {
            last_report = now_ms();
            fprintf(stderr,
                    "e2e_repl_producer: sent=%ld acked=%ld "
                    "failed=%ld outq=%d\n",
                    seq, n_acked, n_failed, rd_kafka_outq_len(rk));
        }
    }
    deadline = now_ms() + timeout_ms;
    while (rd_kafka_outq_len(rk) > 0 && now_ms() < deadline &&
           !rd_kafka_fatal_error(rk, NULL, 0)) {
        rd_kafka_poll(rk, 100);
        fflush(acked);
    }
    fflush(acked);
    fclose(acked);
    fatal = rd_kafka_fatal_error(rk, errstr, sizeof(errstr));
    unreported = rd_kafka_outq_len(rk);
    printf("e2e_repl_producer: sent=%ld acked=%ld failed=%ld "
           "unreported=%d local_errors=%ld client_errors=%ld fatal=%s "
           "secs=%.1f\n",
           seq, n_acked, n_failed, unreported, n_local_err, n_errors,
           fatal ? errstr : "none", (now_ms() - t0) / 1e3);
    fflush(stdout);
    if (unreported == 0)
        rd_kafka_destroy(rk);
    /* else: destroy would wait for the undeliverable messages forever. */
    return (fatal || n_failed || n_acked != seq) ? 1 : 0;
}
