/*
 * bench_client: produce then consume throughput through a real client.
 *
 *   bench_client --brokers B --topic T [--partitions P] [--messages N]
 *                [--size BYTES] [--acks -1|0|1] [--codec C] [--create]
 *                [--consume-only] [--consumer batch|poll]
 *                [--fetch-max-bytes B] [--partition-max-bytes B]
 *
 * Produces N values of BYTES bytes round-robin over P partitions with
 * throughput-oriented batching and waits for every delivery report, then
 * consumes the same data with assign() from the beginning. The topic
 * should be new (or --create makes it) so the consume phase reads exactly
 * what was produced; --consume-only skips producing, for a topic that
 * already holds N messages. Prints one JSON object per phase.
 *
 * --seconds S (produce-only) produces for W + S seconds instead of N
 * messages (W = --warmup-seconds, default 0) and counts only the records
 * whose delivery report arrives in the last S seconds, so start-up and the
 * final flush are outside the figure.  Every delivery report gives a
 * latency sample (enqueue to report, taken in the window), and
 * "series_mb_per_s" has the delivered MB/s of each whole second since the
 * start, to see when a long run reaches its steady state.  --rate R holds
 * production to R records per second (an offered load, for latency at the
 * same load on every broker) instead of as fast as the client can.
 * --keys K gives record i the key "k<i % K>" (K distinct keys, for a
 * compacted topic; default: no key).
 * -X key=value (repeatable) sets a producer property, e.g.
 * -X security.protocol=ssl -X ssl.ca.location=ca.pem for a TLS listener.
 *
 * --producers N (default 1) runs N producer instances (rd_kafka_t), driven
 * in turn by one loop: record i goes to producer i % N, and producer j
 * writes only partitions j*P/N .. (j+1)*P/N-1 (every partition,
 * round-robin, when P < N), so N = P/10 is "one producer per 10
 * partitions".  The queue limit is shared out among them; the window, the
 * latency samples and the series are every producer's together, and the
 * JSON says "producers", "start_seconds" (creating them and fetching
 * their metadata) and "client_cpu_seconds" (this process, user + system:
 * a hundred producers can make the client the bottleneck) only when
 * N > 1: the single-producer line is unchanged.
 */
#include <librdkafka/rdkafka.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <limits.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "bench_util.h"

#define MAX_SERIES 3600
#define MAX_PRODUCERS 1000

/* The timed window of a --seconds run: set before any producer starts,
 * read-only after. */
static struct {
    int64_t t0_ns;        /* production start */
    int64_t start_ns;     /* window start (t0 + warm-up) */
    int64_t end_ns;       /* window end */
} win;

/*
 * One producer instance and what its delivery reports counted.  Every
 * report is served by rd_kafka_poll/flush in the main thread, so the
 * counters need no lock; main() adds them up at the end.
 */
struct prod {
    rd_kafka_t *rk;
    int lo, n;            /* its partitions: lo .. lo + n - 1 */
    int first;            /* the partition of its record 0, lo + first */
    long messages;        /* produced */
    long dr_ok, dr_fail;  /* delivery reports */
    long msgs;            /* delivered in the window */
    long long bytes;      /* their value bytes */
    struct samples lat;   /* enqueue -> delivery report, ms */
    double series[MAX_SERIES]; /* delivered bytes per second since t0 */
    int err;                   /* producev failed */
};

static void dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    struct prod *pr = opaque;
    int64_t now;
    long sec;

    (void)rk;
    if (m->err) {
        if (pr->dr_fail++ < 5)
            fprintf(stderr, "delivery failed: %s\n",
                    rd_kafka_err2str(m->err));
        return;
    }
    pr->dr_ok++;
    if (!win.t0_ns)
        return;
    now = now_ns();
    sec = (long)((now - win.t0_ns) / 1000000000);
    if (sec >= 0 && sec < MAX_SERIES)
        pr->series[sec] += (double)m->len;
    if (now < win.start_ns || now > win.end_ns)
        return;
    pr->msgs++;
    pr->bytes += (long long)m->len;
    samples_add(&pr->lat,
                (double)(now - (int64_t)(intptr_t)m->_private) / 1e6);
}

/* This process's CPU seconds so far (user + system, every thread). */
static double cpu_self_s(void)
{
    struct rusage ru;

    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
           ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

/* Serves every producer's delivery reports that are due. */
static void poll_all(struct prod *prods, int nprod)
{
    for (int j = 0; j < nprod; j++)
        rd_kafka_poll(prods[j].rk, 0);
}

/*
 * Produces `messages` records (or until the window ends), then waits for
 * every delivery report.  One loop drives every producer, each record
 * going to the next producer in turn and to that producer's next
 * partition, so the client spends the same application CPU on one
 * producer as on a hundred (on two cores, a hundred threads producing flat
 * out would take the broker's CPU).  A producer whose queue is full is
 * passed over until every one is full; then all their delivery reports
 * are served, so a report is timed when it arrives, not when its producer
 * comes round again.
 */
static void produce_all(struct prod *prods, int nprod, long messages,
                        const char *topic, const char *buf, int size,
                        long keys, double rate, double seconds)
{
    double t0 = now_s();
    char kbuf[32];
    int klen = 0, cur = 0, full = 0;
    long i = 0;

    while (i < messages) {
        struct prod *pr = &prods[cur];
        rd_kafka_resp_err_t err;

        if (keys)
            klen = snprintf(kbuf, sizeof kbuf, "k%ld", i % keys);
        err = rd_kafka_producev(
            pr->rk, RD_KAFKA_V_TOPIC(topic),
            RD_KAFKA_V_PARTITION(
                (int32_t)(pr->lo + (pr->messages + pr->first) % pr->n)),
            RD_KAFKA_V_KEY(keys ? kbuf : NULL, (size_t)klen),
            RD_KAFKA_V_VALUE((void *)buf, (size_t)size),
            RD_KAFKA_V_OPAQUE((void *)(intptr_t)now_ns()),
            RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
        if (err == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
            if (nprod == 1) {
                rd_kafka_poll(pr->rk, 5);
                continue;
            }
            cur = (cur + 1) % nprod;
            if (++full >= nprod) {
                poll_all(prods, nprod);
                rd_kafka_poll(pr->rk, 1);
                full = 0;
                if (seconds > 0 && now_ns() >= win.end_ns)
                    break;
            }
            continue;
        }
        if (err) {
            fprintf(stderr, "producev: %s\n", rd_kafka_err2str(err));
            pr->err = 1;
            return;
        }
        pr->messages++;
        full = 0;
        cur = (cur + 1) % nprod;
        if ((i & 1023) == 0) {
            poll_all(prods, nprod);
            if (seconds > 0 && now_ns() >= win.end_ns)
                break;
        }
        /* Paced: wait until record i + 1 is due. */
        while (rate > 0 && (double)(i + 1) > (now_s() - t0) * rate) {
            if (nprod > 1)
                poll_all(prods, nprod);
            rd_kafka_poll(pr->rk, 1);
            if (seconds > 0 && now_ns() >= win.end_ns)
                break;
        }
        if (rate > 0 && seconds > 0 && now_ns() >= win.end_ns)
            break;
        i++;
    }
    for (int j = 0; j < nprod; j++)
        rd_kafka_flush(prods[j].rk, 300000);
}

/* Consumer tuning, from the command line. */
struct consume_opts {
    const char *mode;            /* "batch" or "poll" */
    const char *fetch_max_bytes; /* fetch.max.bytes */
    const char *part_max_bytes;  /* max.partition.fetch.bytes */
};

static struct consume_opts copts = {"batch", "52428800", "1048576"};

/*
 * Reads `messages` records from the start of every partition and prints the
 * fetch JSON line; returns 0 when all arrived.
 *
 * "batch" (the default) drains the consumer queue with
 * rd_kafka_consume_batch_queue, up to BATCH_MSGS messages per call: one
 * queue lock and wake-up per batch instead of per message, which matters
 * on a 2-core machine where the broker, librdkafka's fetcher thread and
 * this loop share the CPUs.  "poll" is the usual rd_kafka_consumer_poll
 * loop, one message per call, kept for comparison.
 *
 * Measured with 300k x 1 KiB on 6 partitions: batch 514-590 MB/s, poll
 * 313-344 MB/s.
 *
 * Fetch sizes follow librdkafka's defaults (50 MiB per request, 1 MiB per
 * partition): queued.min.messages is raised instead so the fetcher keeps
 * requests going back to back while this loop drains the queue.  The old
 * 10 MiB per partition made 50 MiB responses, which the broker builds in
 * a fresh mmap each time (page faults): ~120 MB/s instead of ~550.
 */
#define BATCH_MSGS 10000

static int consume(const char *brokers, const char *topic, int parts,
                   long messages, int size)
{
    static rd_kafka_message_t *msgs[BATCH_MSGS];
    char errstr[256];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_topic_partition_list_t *tl;
    rd_kafka_queue_t *q;
    rd_kafka_t *rk;
    long consumed = 0;
    long long bytes = 0;
    double t0 = 0, last, t;
    int batch = strcmp(copts.mode, "poll") != 0;
    int p;

    conf_set(conf, "bootstrap.servers", brokers);
    conf_set(conf, "group.id", "bench_client");
    conf_set(conf, "enable.auto.commit", "false");
    conf_set(conf, "fetch.max.bytes", copts.fetch_max_bytes);
    conf_set(conf, "max.partition.fetch.bytes", copts.part_max_bytes);
    conf_set(conf, "queued.min.messages", "1000000");
    conf_set(conf, "queued.max.messages.kbytes", "262144");
    rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof(errstr));
    if (!rk) {
        fprintf(stderr, "rd_kafka_new: %s\n", errstr);
        return -1;
    }
    q = rd_kafka_queue_get_consumer(rk);
    tl = rd_kafka_topic_partition_list_new(parts);
    for (p = 0; p < parts; p++)
        rd_kafka_topic_partition_list_add(tl, topic, p)->offset =
            RD_KAFKA_OFFSET_BEGINNING;
    last = now_s();
    rd_kafka_assign(rk, tl);
    rd_kafka_topic_partition_list_destroy(tl);
    while (consumed < messages && now_s() - last < 20) {
        ssize_t n, i;

        if (batch) {
            n = rd_kafka_consume_batch_queue(q, 100, msgs, BATCH_MSGS);
        } else {
            msgs[0] = rd_kafka_consumer_poll(rk, 100);
            n = msgs[0] != NULL;
        }
        for (i = 0; i < n; i++) {
            rd_kafka_message_t *m = msgs[i];

            if (!m->err) {
                /* Clock starts at the first record: steady state, not
                 * the consumer's start-up. */
                if (!consumed)
                    t0 = now_s();
                consumed++;
                bytes += (long long)m->len;
            }
            rd_kafka_message_destroy(m);
        }
        if (n > 0)
            last = now_s();
    }
    t = consumed > 1 ? last - t0 : 1e-9;
    rd_kafka_queue_destroy(q);
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    printf("{\"test\": \"fetch\", \"client\": \"librdkafka-%s\", "
           "\"messages\": %ld, \"size\": %d, \"partitions\": %d, "
           "\"fetch_max_bytes\": %s, \"partition_max_bytes\": %s, "
           "\"consumed\": %ld, \"seconds\": %.3f, \"msgs_per_s\": %.0f, "
           "\"mb_per_s\": %.1f}\n",
           batch ? "batch" : "poll", messages, size, parts,
           copts.fetch_max_bytes, copts.part_max_bytes, consumed, t,
           consumed / t, bytes / t / 1e6);
    fflush(stdout);
    return consumed == messages ? 0 : -1;
}

int main(int argc, char **argv)
{
    const char *brokers = NULL, *topic = NULL, *acks = "-1";
    const char *codec = "none";
    long messages = 1000000, i;
    int size = 1024, parts = 6, create = 0, produce = 1, p;
    int consume_after = 1, idempotent = 0, nprod = 1, j;
    const char *linger_ms = "10", *inflight = NULL;
    double seconds = 0, warmup = 0, rate = 0;
    long keys = 0;
    char errstr[256], qkb[32], pfield[128] = "";
    struct prod *prods;
    long dr_ok = 0, dr_fail = 0, wmsgs = 0;
    long long wbytes = 0;
    struct samples lat = {0};
    char *buf;
    double t0, t, t_start;
    const char *xprops[32];
    int nx = 0, failed = 0;

    for (i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";

        if (!strcmp(a, "--create")) {
            create = 1;
            continue;
        }
        if (!strcmp(a, "--consume-only")) {
            produce = 0;
            continue;
        }
        if (!strcmp(a, "--produce-only")) {
            consume_after = 0;
            continue;
        }
        if (!strcmp(a, "--idempotent")) {
            idempotent = 1;
            continue;
        }
        i++;
        if (!strcmp(a, "-X") && nx < 32)
            xprops[nx++] = v;
        else if (!strcmp(a, "--brokers"))
            brokers = v;
        else if (!strcmp(a, "--topic"))
            topic = v;
        else if (!strcmp(a, "--partitions"))
            parts = atoi(v);
        else if (!strcmp(a, "--messages"))
            messages = atol(v);
        else if (!strcmp(a, "--size"))
            size = atoi(v);
        else if (!strcmp(a, "--acks"))
            acks = v;
        else if (!strcmp(a, "--codec"))
            codec = v;
        else if (!strcmp(a, "--linger-ms"))
            linger_ms = v;
        else if (!strcmp(a, "--max-in-flight"))
            inflight = v;
        else if (!strcmp(a, "--seconds"))
            seconds = atof(v);
        else if (!strcmp(a, "--warmup-seconds"))
            warmup = atof(v);
        else if (!strcmp(a, "--rate"))
            rate = atof(v);
        else if (!strcmp(a, "--keys"))
            keys = atol(v);
        else if (!strcmp(a, "--producers"))
            nprod = atoi(v);
        else if (!strcmp(a, "--consumer"))
            copts.mode = v;
        else if (!strcmp(a, "--fetch-max-bytes"))
            copts.fetch_max_bytes = v;
        else if (!strcmp(a, "--partition-max-bytes"))
            copts.part_max_bytes = v;
        else
            brokers = NULL, i = argc;
    }
    if (seconds > 0)
        consume_after = 0;
    if (!brokers || !topic || parts < 1 || size < 1 || messages < 1 ||
        seconds < 0 || warmup < 0 || warmup + seconds >= MAX_SERIES ||
        rate < 0 || keys < 0 || nprod < 1 || nprod > MAX_PRODUCERS ||
        (seconds <= 0 && messages < nprod)) {
        fprintf(stderr,
                "usage: bench_client --brokers B --topic T "
                "[--partitions P] [--messages N] [--size BYTES] "
                "[--acks A] [--codec C] [--create] [--consume-only] "
                "[--produce-only] [--idempotent] [--linger-ms MS] "
                "[--max-in-flight N] [--seconds S [--warmup-seconds W]] "
                "[--rate R] [--keys K] [--producers N<=%d] [-X key=value] "
                "[--consumer batch|poll] [--fetch-max-bytes B] "
                "[--partition-max-bytes B]\n",
                MAX_PRODUCERS);
        return 2;
    }
    if (create && create_topic(brokers, topic, parts))
        return 1;
    if (!produce)
        return consume(brokers, topic, parts, messages, size) ? 1 : 0;

    /* A timed run keeps 64 MiB queued at most (a third of a second at
     * 200 MB/s): enough to keep every partition busy, and the final flush,
     * outside the window, stays short.  N producers share it (at least
     * 512 KiB each, a quarter second of a 100-producer run's share of
     * 200 MB/s): 100 instances must not queue 100 x 64 MiB.  A counted
     * run shares 1 GiB the same way (at least 16 MiB each). */
    snprintf(qkb, sizeof qkb, "%d",
             seconds > 0
                 ? (65536 / nprod > 512 ? 65536 / nprod : 512)
                 : (1048576 / nprod > 16384 ? 1048576 / nprod : 16384));
    prods = calloc((size_t)nprod, sizeof *prods);
    buf = malloc((size_t)size);
    if (!prods || !buf) {
        perror("calloc");
        return 2;
    }
    for (p = 0; p < size; p++)
        buf[p] = (char)('a' + p % 26);
    t_start = now_s();
    for (j = 0; j < nprod; j++) {
        struct prod *pr = &prods[j];
        rd_kafka_conf_t *conf = rd_kafka_conf_new();

        partition_share(j, nprod, parts, &pr->lo, &pr->n, &pr->first);
        conf_set(conf, "bootstrap.servers", brokers);
        conf_set(conf, "acks", acks);
        conf_set(conf, "compression.codec", codec);
        if (idempotent)
            conf_set(conf, "enable.idempotence", "true");
        if (inflight)
            conf_set(conf, "max.in.flight.requests.per.connection", inflight);
        conf_set_batching(conf, linger_ms, qkb);
        conf_set(conf, "message.timeout.ms", "120000");
        for (int x = 0; x < nx; x++)
            conf_set_kv(conf, xprops[x]);
        rd_kafka_conf_set_dr_msg_cb(conf, dr_cb);
        rd_kafka_conf_set_opaque(conf, pr);
        pr->rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
        if (!pr->rk) {
            fprintf(stderr, "rd_kafka_new: %s\n", errstr);
            return 2;
        }
        /* Metadata first, so the clock measures the broker, not
         * start-up. */
        {
            const struct rd_kafka_metadata *md;
            rd_kafka_topic_t *rkt = rd_kafka_topic_new(pr->rk, topic, NULL);

            if (!rd_kafka_metadata(pr->rk, 0, rkt, &md, 10000))
                rd_kafka_metadata_destroy(md);
            rd_kafka_topic_destroy(rkt);
        }
    }
    t0 = now_s();
    t_start = t0 - t_start;
    if (seconds > 0) {
        win.t0_ns = now_ns();
        win.start_ns = win.t0_ns + (int64_t)(warmup * 1e9);
        win.end_ns = win.start_ns + (int64_t)(seconds * 1e9);
        messages = LONG_MAX;
    }
    produce_all(prods, nprod, messages, topic, buf, size, keys, rate, seconds);
    t = now_s() - t0;
    messages = 0;
    for (j = 0; j < nprod; j++) {
        struct prod *pr = &prods[j];

        rd_kafka_destroy(pr->rk);
        failed |= pr->err;
        messages += pr->messages;
        dr_ok += pr->dr_ok;
        dr_fail += pr->dr_fail;
        wmsgs += pr->msgs;
        wbytes += pr->bytes;
        for (size_t k = 0; k < pr->lat.n; k++)
            samples_add(&lat, pr->lat.v[k]);
        free(pr->lat.v);
        if (j)
            for (int s = 0; s < MAX_SERIES; s++)
                prods[0].series[s] += pr->series[s];
    }
    free(buf);
    if (failed)
        return 1;
    if (nprod > 1)
        snprintf(pfield, sizeof pfield,
                 "\"producers\": %d, \"start_seconds\": %.3f, "
                 "\"client_cpu_seconds\": %.3f, ",
                 nprod, t_start, cpu_self_s());
    if (seconds > 0) {
        long s, nsec = (long)(warmup + seconds);

        samples_sort(&lat);
        printf("{\"test\": \"%s\", \"mode\": \"timed\", \"size\": %d, "
               "\"partitions\": %d, %s\"acks\": \"%s\", \"codec\": \"%s\", "
               "\"produced\": %ld, \"delivered\": %ld, \"failed\": %ld, "
               "\"warmup_seconds\": %.3f, \"seconds\": %.3f, "
               "\"rate\": %.0f, \"messages\": %ld, \"msgs_per_s\": %.0f, "
               "\"mb_per_s\": %.2f, \"bytes\": %lld, "
               "\"latency_ms_p50\": %.3f, \"latency_ms_p99\": %.3f, "
               "\"latency_ms_max\": %.3f, \"series_mb_per_s\": [",
               idempotent ? "produce_idempotent" : "produce", size, parts,
               pfield, acks, codec, messages, dr_ok, dr_fail, warmup, seconds,
               rate, wmsgs, wmsgs / seconds, wbytes / seconds / 1e6, wbytes,
               samples_pct(&lat, 0.5), samples_pct(&lat, 0.99),
               samples_pct(&lat, 1.0));
        for (s = 0; s < nsec; s++)
            printf("%s%.1f", s ? ", " : "", prods[0].series[s] / 1e6);
        printf("]}\n");
        fflush(stdout);
        free(prods);
        return dr_ok == messages ? 0 : 1;
    }
    free(prods);
    printf("{\"test\": \"%s\", \"messages\": %ld, \"size\": %d, "
           "\"partitions\": %d, %s\"acks\": \"%s\", \"codec\": \"%s\", "
           "\"delivered\": %ld, \"failed\": %ld, \"seconds\": %.3f, "
           "\"msgs_per_s\": %.0f, \"mb_per_s\": %.1f}\n",
           idempotent ? "produce_idempotent" : "produce", messages, size,
           parts, pfield, acks, codec, dr_ok, dr_fail, t, dr_ok / t,
           dr_ok * (double)size / t / 1e6);
    fflush(stdout);
    if (dr_ok != messages)
        return 1;
    if (!consume_after)
        return 0;
    return consume(brokers, topic, parts, messages, size) ? 1 : 0;
}
