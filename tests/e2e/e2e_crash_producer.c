/*
 * e2e_crash_producer: keeps producing unique, sequence-numbered values
 * while the broker is killed and restarted underneath it, and records
 * every acknowledged message so e2e_verify can check none was lost.
 *
 *   e2e_crash_producer --brokers B --topic T --partitions P
 *                      --acked-file F --duration-ms D [--rate MSGS_PER_S]
 *
 * acks=-1 with message.send.max.retries=0 and no idempotence: a message
 * whose request was cut off by a crash is reported failed and is simply
 * not acknowledged, so the broker may hold it or not, but it can never
 * be written twice by a retry. Each successful delivery report appends
 * "partition offset value" to F and is flushed to the kernel at once.
 * Value of message s is "s<s>"; it goes to partition s % P. Stops after
 * D ms or on SIGTERM/SIGINT, then waits (bounded) for outstanding
 * reports. --rate (default 20000) caps the send rate so the run's data
 * stays small enough to verify quickly. Exit 0 unless setup failed.
 */
#include <librdkafka/rdkafka.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static volatile sig_atomic_t stop;
static FILE *acked;
static long n_acked, n_failed;

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

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
        n_failed++;
        return;
    }
    n_acked++;
    fprintf(acked, "%d %" PRId64 " %.*s\n", m->partition, m->offset,
            (int)m->len, (const char *)m->payload);
}

static void usage(void)
{
    fprintf(stderr, "usage: e2e_crash_producer --brokers B --topic T "
                    "--partitions P --acked-file F --duration-ms D "
                    "[--rate R]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    const char *brokers = NULL, *topic = NULL, *file = NULL;
    int partitions = 1;
    long duration_ms = 10000;
    long rate = 20000;
    char errstr[256];
    rd_kafka_conf_t *conf;
    rd_kafka_t *rk;
    long seq = 0, n_local_err = 0;
    double t0, last_report;
    int i;

    for (i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--brokers"))
            brokers = argv[i + 1];
        else if (!strcmp(argv[i], "--topic"))
            topic = argv[i + 1];
        else if (!strcmp(argv[i], "--partitions"))
            partitions = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--acked-file"))
            file = argv[i + 1];
        else if (!strcmp(argv[i], "--rate"))
            rate = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--duration-ms"))
            duration_ms = atol(argv[i + 1]);
        else
            usage();
    }
    if (i != argc || !brokers || !topic || !file || partitions < 1)
        usage();

    acked = fopen(file, "a");
    if (!acked) {
        perror(file);
        return 2;
    }
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);

    conf = rd_kafka_conf_new();
    conf_set(conf, "bootstrap.servers", brokers);
    conf_set(conf, "acks", "-1");
    conf_set(conf, "enable.idempotence", "false");
    conf_set(conf, "message.send.max.retries", "0");
    conf_set(conf, "linger.ms", "2");
    /* Bounded so messages queued while the broker is down fail soon. */
    conf_set(conf, "message.timeout.ms", "5000");
    conf_set(conf, "request.timeout.ms", "5000");
    conf_set(conf, "reconnect.backoff.ms", "50");
    conf_set(conf, "reconnect.backoff.max.ms", "500");
    conf_set(conf, "topic.metadata.refresh.interval.ms", "1000");
    conf_set(conf, "log_level", "3");
    rd_kafka_conf_set_dr_msg_cb(conf, dr_cb);
    rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
    if (!rk) {
        fprintf(stderr, "rd_kafka_new: %s\n", errstr);
        return 2;
    }

    t0 = now_ms();
    last_report = t0;
    while (!stop && now_ms() - t0 < duration_ms) {
        char val[32];
        int len;
        rd_kafka_resp_err_t err;

        /* Keep the backlog small so a crash fails a bounded number. */
        if (rd_kafka_outq_len(rk) > 20000 ||
            (rate > 0 && seq > (now_ms() - t0) * rate / 1000)) {
            rd_kafka_poll(rk, 5);
            fflush(acked);
            continue;
        }
        len = snprintf(val, sizeof(val), "s%ld", seq);
        err = rd_kafka_producev(
            rk, RD_KAFKA_V_TOPIC(topic),
            RD_KAFKA_V_PARTITION((int32_t)(seq % partitions)),
            RD_KAFKA_V_VALUE(val, (size_t)len),
            RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
        if (err) {
            /* Queue full or partition not yet known: not a delivery. */
            if (n_local_err++ < 5)
                fprintf(stderr, "producev s%ld: %s\n", seq,
                        rd_kafka_err2str(err));
            rd_kafka_poll(rk, 10);
        } else {
            seq++;
        }
        rd_kafka_poll(rk, 0);
        fflush(acked);
        if (now_ms() - last_report > 1000) {
            last_report = now_ms();
            fprintf(stderr, "e2e_crash_producer: sent=%ld acked=%ld "
                    "failed=%ld outq=%d\n", seq, n_acked, n_failed,
                    rd_kafka_outq_len(rk));
        }
    }
    rd_kafka_flush(rk, 15000);
    fflush(acked);
    fclose(acked);
    printf("e2e_crash_producer: sent=%ld acked=%ld failed=%ld "
           "unreported=%d local_errors=%ld\n", seq, n_acked, n_failed,
           rd_kafka_outq_len(rk), n_local_err);
    rd_kafka_destroy(rk);
    return 0;
}
