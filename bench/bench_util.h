/*
 * bench_util.h - what every librdkafka bench program needs: a monotonic
 * clock, config setting that stops on a typo, topic creation, and
 * latency samples with percentiles.  Header-only (static inline) because
 * each bench program is its own executable.
 */
#ifndef CN_BENCH_UTIL_H
#define CN_BENCH_UTIL_H

#include <librdkafka/rdkafka.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static inline double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static inline int64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* A bad key or value would make the figures meaningless: stop. */
static inline void conf_set(rd_kafka_conf_t *conf, const char *k,
                            const char *v)
{
    char errstr[256];

    if (rd_kafka_conf_set(conf, k, v, errstr, sizeof(errstr)) !=
        RD_KAFKA_CONF_OK) {
        fprintf(stderr, "config %s=%s: %s\n", k, v, errstr);
        exit(2);
    }
}

/* "key=value" from a -X option (TLS and SASL properties for a secured
 * listener); a malformed one stops the program like a bad key would. */
static inline void conf_set_kv(rd_kafka_conf_t *conf, const char *kv)
{
    char k[256];
    const char *eq = strchr(kv, '=');

    if (!eq || (size_t)(eq - kv) >= sizeof k) {
        fprintf(stderr, "-X %s: expected key=value\n", kv);
        exit(2);
    }
    memcpy(k, kv, (size_t)(eq - kv));
    k[eq - kv] = '\0';
    conf_set(conf, k, eq + 1);
}

/* Creates the topic (an existing one is fine), waiting at most timeout_ms
 * for the answer; 0 or -1. */
static inline int create_topic_wait(const char *brokers, const char *topic,
                                    int parts, int timeout_ms)
{
    char errstr[256];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_t *rk;
    rd_kafka_NewTopic_t *nt;
    rd_kafka_queue_t *q;
    rd_kafka_event_t *ev;
    rd_kafka_AdminOptions_t *opts;
    int rc = 0;

    conf_set(conf, "bootstrap.servers", brokers);
    if (timeout_ms > 60000) {
        /* The request's own timeout is capped by this one (at most 300 s). */
        char v[16];
        snprintf(v, sizeof v, "%d", timeout_ms < 300000 ? timeout_ms : 300000);
        conf_set(conf, "socket.timeout.ms", v);
    }
    rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
    if (!rk)
        return -1;
    nt = rd_kafka_NewTopic_new(topic, parts, 1, errstr, sizeof(errstr));
    q = rd_kafka_queue_new(rk);
    /* Thousands of partitions take longer than the default 60 s. */
    opts = rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_CREATETOPICS);
    rd_kafka_AdminOptions_set_request_timeout(opts, timeout_ms, errstr,
                                              sizeof(errstr));
    rd_kafka_CreateTopics(rk, &nt, 1, opts, q);
    ev = rd_kafka_queue_poll(q, timeout_ms);
    if (!ev || rd_kafka_event_error(ev)) {
        fprintf(stderr, "CreateTopics: %s\n",
                ev ? rd_kafka_event_error_string(ev) : "timed out");
        rc = -1;
    } else {
        size_t cnt;
        const rd_kafka_topic_result_t **tr =
            rd_kafka_CreateTopics_result_topics(
                rd_kafka_event_CreateTopics_result(ev), &cnt);

        if (cnt == 1 && rd_kafka_topic_result_error(tr[0]) &&
            rd_kafka_topic_result_error(tr[0]) !=
                RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS) {
            fprintf(stderr, "CreateTopics: %s\n",
                    rd_kafka_topic_result_error_string(tr[0]));
            rc = -1;
        }
    }
    if (ev)
        rd_kafka_event_destroy(ev);
    rd_kafka_NewTopic_destroy(nt);
    rd_kafka_AdminOptions_destroy(opts);
    rd_kafka_queue_destroy(q);
    rd_kafka_destroy(rk);
    return rc;
}

/* create_topic_wait with 30 s. */
static inline int create_topic(const char *brokers, const char *topic,
                               int parts)
{
    return create_topic_wait(brokers, topic, parts, 30000);
}

/* Growable list of samples. */
struct samples {
    double *v;  /* samples */
    size_t n;   /* used */
    size_t cap; /* allocated */
};

static inline void samples_add(struct samples *s, double x)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 1024;
        s->v = realloc(s->v, s->cap * sizeof(*s->v));
        if (!s->v) {
            perror("realloc");
            exit(2);
        }
    }
    s->v[s->n++] = x;
}

static inline int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

static inline void samples_sort(struct samples *s)
{
    if (s->n)
        qsort(s->v, s->n, sizeof(*s->v), cmp_double);
}

/* Nearest-rank percentile, q in [0, 1]; the samples must be sorted. */
static inline double samples_pct(const struct samples *s, double q)
{
    size_t i;

    if (!s->n)
        return 0;
    i = (size_t)(q * (double)s->n + 0.999999);
    if (i > 0)
        i--;
    if (i >= s->n)
        i = s->n - 1;
    return s->v[i];
}

/* Throughput-oriented batching, the same in every producing bench program
 * so their figures compare like with like (idempotent bench_client against
 * transactional bench_txn): queue_kbytes bounds what waits in the client. */
static inline void conf_set_batching(rd_kafka_conf_t *conf,
                                     const char *linger_ms,
                                     const char *queue_kbytes)
{
    conf_set(conf, "linger.ms", linger_ms);
    conf_set(conf, "batch.size", "1000000");
    conf_set(conf, "batch.num.messages", "100000");
    conf_set(conf, "queue.buffering.max.messages", "1000000");
    conf_set(conf, "queue.buffering.max.kbytes", queue_kbytes);
}

/* Producer j of nprod's partitions out of parts: a range of its own when
 * there are at least as many partitions as producers (j * parts / nprod
 * up to the next one's start), else every partition, starting at j's own
 * so the producers do not all write partition 0 first. */
static inline void partition_share(int j, int nprod, int parts, int *lo,
                                   int *n, int *first)
{
    if (parts >= nprod) {
        *lo = (int)((long)j * parts / nprod);
        *n = (int)((long)(j + 1) * parts / nprod) - *lo;
        *first = 0;
    } else {
        *lo = 0;
        *n = parts;
        *first = j % parts;
    }
}

#endif
