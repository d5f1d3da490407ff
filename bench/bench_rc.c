/*
 * bench_rc: read path under transactions, through librdkafka.
 *
 *   bench_rc write --brokers B --topic T [--partitions P] [--messages N]
 *                  [--size BYTES] [--txn-records R] [--abort-every K]
 *                  [--producers J] [--create]
 *   bench_rc consume --brokers B --topic T [--partitions P]
 *                  --messages N [--txn-records R] [--abort-every K]
 *                  [--size BYTES] [--log-bytes L] [--rounds X]
 *                  [--isolation read_committed|read_uncommitted]
 *   bench_rc latency --brokers B --topic T [--partitions P] [--size BYTES]
 *                  [--rate MSGS_PER_S] [--commit-interval-ms MS]
 *                  [--seconds S] [--fetch-wait-ms W] [--create]
 *
 * write: N values in transactions of R records (records round-robin over
 * P partitions), every K-th transaction aborted (transaction index
 * i % K == K - 1).  J transactional producers in threads share the
 * transactions (i % J), because each commit waits for the coordinator's
 * fsyncs and one producer alone would take most of a minute for ~1 GB.
 * Aborted data is flushed before the abort so it really lands in the log:
 * abort_transaction would otherwise purge what is still queued, and the
 * read_committed consumer would have nothing to skip.
 *
 * consume: X rounds, each reading the whole topic once with
 * isolation.level=read_uncommitted and once with read_committed (new
 * consumer each time, assign() from the beginning, never joins a group,
 * no offset commits).  A pass ends when every partition reported EOF,
 * i.e. reached the high watermark (uncommitted) or the last stable offset
 * (committed); nothing is open after `write`, so both are the log end.
 * The clock runs from the first delivered record to the last EOF.  Prints
 * one JSON line per pass and one "read_committed" summary with the best
 * pass of each level.  With --isolation, each round is one pass of that
 * level alone and there is no summary: bench/rc_figs.py interleaves the
 * levels (and the brokers) itself, each sample X passes of one level.
 * Log throughput is L (the partitions' on-disk log bytes, measured by the
 * caller; without it the written value bytes) per second: both levels
 * scan the same log, so it is the fair comparison, while read_committed
 * delivers (K-1)/K of the records.
 *
 * latency: a consumer thread (read_committed, fetch.wait.max.ms W) and a
 * transactional producer sending RATE records per second, each carrying
 * its CLOCK_MONOTONIC send time, committing every MS ms, for S seconds.
 * The consumer records now - sent per record; prints p50/p99/p99.9.
 */
#include <librdkafka/rdkafka.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"

/* Command-line options; one set for all modes. */
struct opts {
    const char *brokers;  /* bootstrap.servers */
    const char *topic;    /* topic name */
    int parts;            /* partitions */
    long messages;        /* records written in total */
    int size;             /* value size, bytes */
    int txn_records;      /* records per transaction */
    int abort_every;      /* every K-th transaction aborts; 0 none */
    int producers;        /* concurrent transactional producers */
    long long log_bytes;  /* on-disk log bytes of the topic, 0 unknown */
    int rounds;           /* consume rounds (uncommitted + committed) */
    int isolation;        /* consume: -1 both, 0 uncommitted, 1 committed */
    int rate;             /* latency mode send rate, records/s */
    int interval_ms;      /* latency mode commit interval, ms */
    double seconds;       /* latency mode duration, s */
    int fetch_wait_ms;    /* latency mode fetch.wait.max.ms */
    int create;           /* create the topic first */
    const char *debug;    /* librdkafka debug contexts, or NULL */
};

static struct opts o = {
    .parts = 6,
    .messages = 1000000,
    .size = -1,
    .txn_records = 100,
    .abort_every = 10,
    .producers = 4,
    .rounds = 3,
    .isolation = -1,
    .rate = 2000,
    .interval_ms = 100,
    .seconds = 10,
    .fetch_wait_ms = 10,
};

/* Delivery counts of one producer instance (its rd_kafka opaque). */
struct dr_count {
    long ok;   /* delivered */
    long fail; /* failed */
};

static void dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    struct dr_count *c = opaque;

    (void)rk;
    if (m->err) {
        if (c->fail++ < 5)
            fprintf(stderr, "delivery failed: %s\n",
                    rd_kafka_err2str(m->err));
    } else {
        c->ok++;
    }
}

/* Ends the program on any transactional API error: a run with errors
 * does not write the log the consume figures assume. */
static void txn_ok(rd_kafka_error_t *err, const char *what)
{
    if (!err)
        return;
    fprintf(stderr, "%s: %s (%s)\n", what, rd_kafka_error_string(err),
            rd_kafka_error_name(err));
    rd_kafka_error_destroy(err);
    exit(1);
}

static rd_kafka_t *new_producer(const char *tag, struct dr_count *dc,
                                int linger_ms)
{
    char errstr[256], txid[160], linger[16];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_t *rk;
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(txid, sizeof(txid), "bench_rc-%s-%s-%ld-%ld-%ld", o.topic, tag,
             (long)getpid(), (long)ts.tv_sec, ts.tv_nsec);
    snprintf(linger, sizeof(linger), "%d", linger_ms);
    conf_set(conf, "bootstrap.servers", o.brokers);
    conf_set(conf, "transactional.id", txid);
    conf_set(conf, "acks", "all");
    conf_set(conf, "linger.ms", linger);
    conf_set(conf, "batch.size", "1000000");
    conf_set(conf, "queue.buffering.max.messages", "1000000");
    conf_set(conf, "queue.buffering.max.kbytes", "1048576");
    conf_set(conf, "transaction.timeout.ms", "60000");
    conf_set(conf, "message.timeout.ms", "60000");
    if (o.debug)
        conf_set(conf, "debug", o.debug);
    rd_kafka_conf_set_dr_msg_cb(conf, dr_cb);
    rd_kafka_conf_set_opaque(conf, dc);
    rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
    if (!rk) {
        fprintf(stderr, "rd_kafka_new: %s\n", errstr);
        exit(2);
    }
    txn_ok(rd_kafka_init_transactions(rk, 30000), "init_transactions");
    /* Leaders first: with a just-created topic librdkafka otherwise waits
     * for its next metadata refresh (about a second) before the first
     * AddPartitionsToTxn. */
    {
        const struct rd_kafka_metadata *md;
        rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, o.topic, NULL);

        if (!rd_kafka_metadata(rk, 0, rkt, &md, 10000))
            rd_kafka_metadata_destroy(md);
        rd_kafka_topic_destroy(rkt);
    }
    return rk;
}

static void produce_one(rd_kafka_t *rk, int32_t part, const void *buf,
                        size_t len)
{
    rd_kafka_resp_err_t err;

    for (;;) {
        err = rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(o.topic),
                                RD_KAFKA_V_PARTITION(part),
                                RD_KAFKA_V_VALUE((void *)buf, len),
                                RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                                RD_KAFKA_V_END);
        if (err != RD_KAFKA_RESP_ERR__QUEUE_FULL)
            break;
        rd_kafka_poll(rk, 5);
    }
    if (err) {
        fprintf(stderr, "producev: %s\n", rd_kafka_err2str(err));
        exit(1);
    }
}

static long num_txns(void)
{
    return (o.messages + o.txn_records - 1) / o.txn_records;
}

static int txn_aborted(long t)
{
    return o.abort_every > 0 && t % o.abort_every == o.abort_every - 1;
}

/* Records in transaction t (the last one may be short). */
static long txn_len(long t)
{
    long left = o.messages - t * o.txn_records;

    return left < o.txn_records ? left : o.txn_records;
}

/* One writer thread: transactions t with t % producers == idx. */
struct writer {
    pthread_t tid;       /* thread */
    int idx;             /* 0..producers-1 */
    struct dr_count dc;  /* delivery reports */
    long txns;           /* transactions finished */
};

static void *writer_main(void *arg)
{
    struct writer *w = arg;
    char tag[16], *buf = malloc((size_t)o.size);
    rd_kafka_t *rk;
    long t, j;

    snprintf(tag, sizeof(tag), "w%d", w->idx);
    for (j = 0; j < o.size; j++)
        buf[j] = (char)('a' + j % 26);
    /* linger 1 ms: each transaction is small and ends in a flush. */
    rk = new_producer(tag, &w->dc, 1);
    for (t = w->idx; t < num_txns(); t += o.producers) {
        long base = t * o.txn_records;

        txn_ok(rd_kafka_begin_transaction(rk), "begin_transaction");
        for (j = 0; j < txn_len(t); j++)
            produce_one(rk, (int32_t)((base + j) % o.parts), buf,
                        (size_t)o.size);
        if (txn_aborted(t)) {
            rd_kafka_flush(rk, 60000);
            txn_ok(rd_kafka_abort_transaction(rk, 60000),
                   "abort_transaction");
        } else {
            txn_ok(rd_kafka_commit_transaction(rk, 60000),
                   "commit_transaction");
        }
        w->txns++;
    }
    rd_kafka_flush(rk, 60000);
    rd_kafka_destroy(rk);
    free(buf);
    return NULL;
}

/* Records the read_committed pass should deliver. */
static long committed_records(void)
{
    long t, n = 0;

    for (t = 0; t < num_txns(); t++)
        if (!txn_aborted(t))
            n += txn_len(t);
    return n;
}

static int run_write(void)
{
    struct writer *w = calloc((size_t)o.producers, sizeof(*w));
    long ok = 0, fail = 0, txns = 0;
    double t0, t;
    int i;

    if (o.create && create_topic(o.brokers, o.topic, o.parts))
        return 1;
    t0 = now_s();
    for (i = 0; i < o.producers; i++) {
        w[i].idx = i;
        if (pthread_create(&w[i].tid, NULL, writer_main, &w[i])) {
            perror("pthread_create");
            return 1;
        }
    }
    for (i = 0; i < o.producers; i++) {
        pthread_join(w[i].tid, NULL);
        ok += w[i].dc.ok;
        fail += w[i].dc.fail;
        txns += w[i].txns;
    }
    t = now_s() - t0;
    free(w);
    printf("{\"test\": \"rc_write\", \"messages\": %ld, \"size\": %d, "
           "\"partitions\": %d, \"txn_records\": %d, \"abort_every\": %d, "
           "\"producers\": %d, \"transactions\": %ld, \"delivered\": %ld, "
           "\"failed\": %ld, \"committed_records\": %ld, "
           "\"seconds\": %.3f, \"msgs_per_s\": %.0f, \"mb_per_s\": %.1f}\n",
           o.messages, o.size, o.parts, o.txn_records, o.abort_every,
           o.producers, txns, ok, fail, committed_records(), t, ok / t,
           ok * (double)o.size / t / 1e6);
    fflush(stdout);
    return ok == o.messages && !fail ? 0 : 1;
}

/* One consume pass. */
struct pass {
    long records;     /* delivered */
    long long bytes;  /* delivered value bytes */
    double seconds;   /* first record to last partition EOF */
    double to_last;   /* first record to last record, s */
    double startup;   /* assign() to first record, s */
    int complete;     /* every partition reached EOF */
};

#define BATCH_MSGS 10000

/*
 * Reads the topic from the beginning until every partition reports EOF.
 * Consumer settings match bench_client's fetch run (50 MiB per request,
 * 1 MiB per partition, deep local queue) so figures are comparable.
 */
static void consume_pass(int committed, struct pass *ps)
{
    static rd_kafka_message_t *msgs[BATCH_MSGS];
    char errstr[256];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_topic_partition_list_t *tl;
    rd_kafka_queue_t *q;
    rd_kafka_t *rk;
    char *eof = calloc((size_t)o.parts, 1);
    int neof = 0, p;
    double t_assign, t_first = 0, t_last = 0, t_end = 0, last;

    memset(ps, 0, sizeof(*ps));
    conf_set(conf, "bootstrap.servers", o.brokers);
    /* assign() needs a group.id in librdkafka; nothing joins or commits. */
    conf_set(conf, "group.id", "bench_rc");
    conf_set(conf, "enable.auto.commit", "false");
    conf_set(conf, "enable.partition.eof", "true");
    conf_set(conf, "isolation.level",
             committed ? "read_committed" : "read_uncommitted");
    conf_set(conf, "fetch.max.bytes", "52428800");
    conf_set(conf, "max.partition.fetch.bytes", "1048576");
    conf_set(conf, "queued.min.messages", "1000000");
    conf_set(conf, "queued.max.messages.kbytes", "262144");
    /* librdkafka reports EOF only after a fetch at the end comes back
     * empty, which the broker holds for fetch.wait.max.ms (500 ms by
     * default): that would be a third of a pass.  Fetches that find data
     * return at once, so a short wait changes nothing else. */
    conf_set(conf, "fetch.wait.max.ms", "10");
    if (o.debug)
        conf_set(conf, "debug", o.debug);
    rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof(errstr));
    if (!rk) {
        fprintf(stderr, "rd_kafka_new: %s\n", errstr);
        exit(2);
    }
    /* Connect and learn the leaders before the clock starts. */
    {
        const struct rd_kafka_metadata *md;
        rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, o.topic, NULL);

        if (!rd_kafka_metadata(rk, 0, rkt, &md, 10000))
            rd_kafka_metadata_destroy(md);
        rd_kafka_topic_destroy(rkt);
    }
    q = rd_kafka_queue_get_consumer(rk);
    tl = rd_kafka_topic_partition_list_new(o.parts);
    for (p = 0; p < o.parts; p++)
        rd_kafka_topic_partition_list_add(tl, o.topic, p)->offset =
            RD_KAFKA_OFFSET_BEGINNING;
    t_assign = last = now_s();
    rd_kafka_assign(rk, tl);
    rd_kafka_topic_partition_list_destroy(tl);
    while (neof < o.parts && now_s() - last < 20 &&
           now_s() - t_assign < 300) {
        ssize_t n, i;

        /* A short timeout: the call waits it out until the batch is
         * full, so near the end it would delay seeing the last EOF. */
        n = rd_kafka_consume_batch_queue(q, 5, msgs, BATCH_MSGS);
        for (i = 0; i < n; i++) {
            rd_kafka_message_t *m = msgs[i];

            if (!m->err) {
                if (!ps->records)
                    t_first = now_s();
                ps->records++;
                ps->bytes += (long long)m->len;
                t_last = now_s();
            } else if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
                /* EOF comes again after new data; count each once. */
                if (m->partition >= 0 && m->partition < o.parts &&
                    !eof[m->partition]) {
                    eof[m->partition] = 1;
                    neof++;
                }
            } else {
                fprintf(stderr, "consume: %s\n", rd_kafka_message_errstr(m));
            }
            rd_kafka_message_destroy(m);
        }
        if (n > 0)
            last = now_s();
    }
    t_end = now_s();
    ps->complete = neof == o.parts;
    ps->seconds = ps->records > 1 ? t_end - t_first : 1e-9;
    ps->startup = ps->records ? t_first - t_assign : 0;
    ps->to_last = t_last - t_first;
    rd_kafka_queue_destroy(q);
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    free(eof);
}

static void print_pass(const char *test, int committed, int round,
                       const struct pass *ps, long expect,
                       long long log_bytes)
{
    printf("{\"test\": \"%s\", \"isolation\": \"%s\", \"round\": %d, "
           "\"size\": %d, \"partitions\": %d, \"consumed\": %ld, "
           "\"expected\": %ld, \"complete\": %s, \"seconds\": %.3f, "
           "\"startup_s\": %.3f, \"last_record_s\": %.3f, "
           "\"msgs_per_s\": %.0f, \"mb_per_s\": %.1f, "
           "\"log_bytes\": %lld, \"log_mb_per_s\": %.1f}\n",
           test, committed ? "read_committed" : "read_uncommitted", round,
           o.size, o.parts, ps->records, expect,
           ps->complete ? "true" : "false", ps->seconds, ps->startup,
           ps->to_last, ps->records / ps->seconds, ps->bytes / ps->seconds / 1e6,
           log_bytes, log_bytes / ps->seconds / 1e6);
    fflush(stdout);
}

static int run_consume(void)
{
    struct pass best[2] = {{0}}, ps;
    long expect[2] = {o.messages, committed_records()};
    long long log_bytes = o.log_bytes ? o.log_bytes
                                      : (long long)o.messages * o.size;
    int r, c, bad = 0;

    for (r = 0; r < o.rounds; r++) {
        for (c = 0; c < 2; c++) {
            if (o.isolation >= 0 && c != o.isolation)
                continue;
            consume_pass(c, &ps);
            print_pass(c ? "fetch_read_committed" : "fetch_read_uncommitted",
                       c, r, &ps, expect[c], log_bytes);
            if (!ps.complete || ps.records != expect[c]) {
                fprintf(stderr, "%s pass %d: %ld records of %ld%s\n",
                        c ? "read_committed" : "read_uncommitted", r,
                        ps.records, expect[c],
                        ps.complete ? "" : ", no EOF on every partition");
                bad = 1;
                continue;
            }
            if (!best[c].records || ps.seconds < best[c].seconds)
                best[c] = ps;
        }
    }
    if (o.isolation >= 0)
        return bad;
    if (!best[0].records || !best[1].records)
        return 1;
    printf("{\"test\": \"read_committed\", \"size\": %d, \"partitions\": %d, "
           "\"rounds\": %d, \"log_bytes\": %lld, "
           "\"log_bytes_measured\": %s, "
           "\"uncommitted\": {\"seconds\": %.3f, \"records\": %ld, "
           "\"msgs_per_s\": %.0f, \"mb_per_s\": %.1f, "
           "\"log_mb_per_s\": %.1f}, "
           "\"committed\": {\"seconds\": %.3f, \"records\": %ld, "
           "\"msgs_per_s\": %.0f, \"mb_per_s\": %.1f, "
           "\"log_mb_per_s\": %.1f}, "
           "\"ratio_log_bytes_per_s\": %.3f, \"ratio_msgs_per_s\": %.3f}\n",
           o.size, o.parts, o.rounds, log_bytes,
           o.log_bytes ? "true" : "false", best[0].seconds,
           best[0].records, best[0].records / best[0].seconds,
           best[0].bytes / best[0].seconds / 1e6,
           log_bytes / best[0].seconds / 1e6, best[1].seconds,
           best[1].records, best[1].records / best[1].seconds,
           best[1].bytes / best[1].seconds / 1e6,
           log_bytes / best[1].seconds / 1e6,
           best[0].seconds / best[1].seconds,
           (best[1].records / best[1].seconds) /
               (best[0].records / best[0].seconds));
    fflush(stdout);
    return bad;
}

/* Latency mode: state shared by the producer and the consumer thread. */
struct lat {
    atomic_int stop;               /* consumer should finish */
    atomic_int ready;              /* consumer has its assignment */
    _Atomic int64_t measure_from_ns; /* records sent earlier: warm-up */
    struct samples ms;             /* end-to-end latency, ms */
    struct samples recv_ns;        /* receive time of each sample, ns */
    struct samples txn;            /* transaction index of each sample */
    long warmup;                   /* warm-up records seen */
    long bad;                      /* values too short to hold a stamp */
};

static void *lat_consumer(void *arg)
{
    rd_kafka_message_t *msgs[1];
    struct lat *l = arg;
    char errstr[256], wait[16];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_topic_partition_list_t *tl;
    rd_kafka_queue_t *q;
    rd_kafka_t *rk;
    int p;

    snprintf(wait, sizeof(wait), "%d", o.fetch_wait_ms);
    conf_set(conf, "bootstrap.servers", o.brokers);
    conf_set(conf, "group.id", "bench_rc_latency");
    conf_set(conf, "enable.auto.commit", "false");
    conf_set(conf, "isolation.level", "read_committed");
    conf_set(conf, "fetch.wait.max.ms", wait);
    if (o.debug)
        conf_set(conf, "debug", o.debug);
    rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof(errstr));
    if (!rk) {
        fprintf(stderr, "rd_kafka_new: %s\n", errstr);
        exit(2);
    }
    q = rd_kafka_queue_get_consumer(rk);
    tl = rd_kafka_topic_partition_list_new(o.parts);
    for (p = 0; p < o.parts; p++)
        rd_kafka_topic_partition_list_add(tl, o.topic, p)->offset =
            RD_KAFKA_OFFSET_BEGINNING;
    rd_kafka_assign(rk, tl);
    rd_kafka_topic_partition_list_destroy(tl);
    l->ready = 1;
    while (!l->stop) {
        ssize_t n, i;

        /* One at a time: consume_batch_queue waits out its whole timeout
         * until the batch is full, which would be measured as latency. */
        msgs[0] = rd_kafka_consume_queue(q, 50);
        n = msgs[0] != NULL;
        for (i = 0; i < n; i++) {
            rd_kafka_message_t *m = msgs[i];
            int64_t now = now_ns(), sent, txn;

            if (m->err) {
                if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
                    fprintf(stderr, "consume: %s\n",
                            rd_kafka_message_errstr(m));
            } else if (m->len < 16) {
                l->bad++;
            } else {
                memcpy(&sent, m->payload, sizeof(sent));
                memcpy(&txn, (const char *)m->payload + 8, sizeof(txn));
                if (sent < l->measure_from_ns) {
                    l->warmup++;
                } else {
                    samples_add(&l->ms, (double)(now - sent) / 1e6);
                    /* Exact in a double: monotonic ns stay below 2^53
                     * for 104 days of uptime. */
                    samples_add(&l->recv_ns, (double)now);
                    samples_add(&l->txn, (double)txn);
                }
            }
            rd_kafka_message_destroy(m);
        }
    }
    rd_kafka_queue_destroy(q);
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    return NULL;
}

static void sleep_until_ns(int64_t t)
{
    int64_t d = t - now_ns();
    struct timespec ts;

    if (d <= 0)
        return;
    ts.tv_sec = d / 1000000000;
    ts.tv_nsec = d % 1000000000;
    nanosleep(&ts, NULL);
}

static int run_latency(void)
{
    struct lat l = {0};
    struct dr_count dc = {0};
    struct samples flush = {0}, commit = {0}, after = {0};
    pthread_t tid;
    rd_kafka_t *rk;
    char *buf;
    int64_t period_ns = 1000000000 / o.rate, next, end, txn_end, warm_end;
    int64_t *commit_end_ns, t1;
    long sent = 0, txn = 0, ncap;
    double p50, p99, p999, max, t0;
    size_t k;
    int i, bad = 0;

    if (o.create && create_topic(o.brokers, o.topic, o.parts))
        return 1;
    /* Commits are at least interval_ms apart: this bounds their count. */
    ncap = (long)((o.seconds + 3) * 1000 / o.interval_ms) + 16;
    commit_end_ns = calloc((size_t)ncap, sizeof(*commit_end_ns));
    buf = calloc(1, (size_t)o.size);
    rk = new_producer("lat", &dc, 5);
    l.measure_from_ns = INT64_MAX;
    if (pthread_create(&tid, NULL, lat_consumer, &l)) {
        perror("pthread_create");
        return 1;
    }
    for (i = 0; !l.ready && i < 1000; i++)
        usleep(1000);
    /* Warm-up: the first transaction, then one second of the same load,
     * so connections, partition registration and the consumer's first
     * fetches are not in the figures. */
    next = now_ns();
    warm_end = end = next + 1000000000;
    while (next < end && txn < ncap) {
        txn_ok(rd_kafka_begin_transaction(rk), "begin_transaction");
        txn_end = next + (int64_t)o.interval_ms * 1000000;
        if (txn_end > end)
            txn_end = end;
        /* Records due while the previous commit blocked go out at once,
         * stamped with the real send time. */
        while (next < txn_end) {
            int64_t stamp;

            sleep_until_ns(next);
            stamp = now_ns();
            memcpy(buf, &stamp, sizeof(stamp));
            memcpy(buf + 8, &txn, sizeof(txn));
            produce_one(rk, (int32_t)(sent % o.parts), buf, (size_t)o.size);
            sent++;
            rd_kafka_poll(rk, 0);
            next += period_ns;
        }
        /* Flush first so the commit figure is the EndTxn round trip. */
        t0 = now_s();
        rd_kafka_flush(rk, 60000);
        t1 = now_ns();
        txn_ok(rd_kafka_commit_transaction(rk, 60000), "commit_transaction");
        commit_end_ns[txn] = now_ns();
        if (l.measure_from_ns != INT64_MAX) {
            samples_add(&flush, (t1 / 1e9 - t0) * 1e3);
            samples_add(&commit, (commit_end_ns[txn] - t1) / 1e6);
        }
        if (txn == 0) {
            /* The first transaction paid for connections and partition
             * registration: restart the schedule rather than send its
             * backlog in one burst. */
            next = now_ns();
            warm_end = next + 1000000000;
            end = warm_end + (int64_t)(o.seconds * 1e9);
        } else if (l.measure_from_ns == INT64_MAX && now_ns() >= warm_end) {
            l.measure_from_ns = now_ns();
        }
        txn++;
    }
    /* Let the last transaction reach the consumer. */
    usleep(500000);
    l.stop = 1;
    pthread_join(tid, NULL);
    rd_kafka_destroy(rk);
    free(buf);
    /* Visibility delay: receipt minus the return of the record's commit
     * (negative when the fetch beat the EndTxn response home). */
    for (k = 0; k < l.ms.n; k++) {
        long t = (long)l.txn.v[k];

        if (t < 0 || t >= txn || !commit_end_ns[t]) {
            bad = 1;
            continue;
        }
        samples_add(&after, (l.recv_ns.v[k] - (double)commit_end_ns[t]) /
                                1e6);
    }
    samples_sort(&l.ms);
    samples_sort(&flush);
    samples_sort(&commit);
    samples_sort(&after);
    p50 = samples_pct(&l.ms, 0.5);
    p99 = samples_pct(&l.ms, 0.99);
    p999 = samples_pct(&l.ms, 0.999);
    max = samples_pct(&l.ms, 1.0);
    printf("{\"test\": \"rc_latency\", \"size\": %d, \"partitions\": %d, "
           "\"rate\": %d, \"commit_interval_ms\": %d, "
           "\"fetch_wait_max_ms\": %d, \"seconds\": %.1f, \"sent\": %ld, "
           "\"delivered\": %ld, \"failed\": %ld, \"transactions\": %ld, "
           "\"samples\": %zu, \"warmup\": %ld, \"p50_ms\": %.3f, "
           "\"p99_ms\": %.3f, \"p999_ms\": %.3f, \"max_ms\": %.3f, "
           "\"flush_ms_p50\": %.3f, \"flush_ms_p99\": %.3f, "
           "\"commit_ms_p50\": %.3f, \"commit_ms_p99\": %.3f, "
           "\"after_commit_ms_p50\": %.3f, \"after_commit_ms_p99\": %.3f, "
           "\"after_commit_ms_max\": %.3f}\n",
           o.size, o.parts, o.rate, o.interval_ms, o.fetch_wait_ms,
           o.seconds, sent, dc.ok, dc.fail, txn, l.ms.n, l.warmup, p50,
           p99, p999, max, samples_pct(&flush, 0.5),
           samples_pct(&flush, 0.99), samples_pct(&commit, 0.5),
           samples_pct(&commit, 0.99), samples_pct(&after, 0.5),
           samples_pct(&after, 0.99), samples_pct(&after, 1.0));
    fflush(stdout);
    free(commit_end_ns);
    free(flush.v);
    free(commit.v);
    free(after.v);
    free(l.ms.v);
    free(l.recv_ns.v);
    free(l.txn.v);
    /* Every record sent after the warm-up must have arrived. */
    return !bad && l.ms.n + (size_t)l.warmup == (size_t)sent && !dc.fail
               ? 0 : 1;
}

static void usage(void)
{
    fprintf(stderr,
            "usage: bench_rc write|consume|latency --brokers B --topic T\n"
            "  [--partitions P] [--size BYTES] [--create] [--debug CTX]\n"
            "  write/consume: [--messages N] [--txn-records R] "
            "[--abort-every K]\n"
            "  write: [--producers J]   consume: [--log-bytes L] "
            "[--rounds X]\n"
            "    [--isolation read_committed|read_uncommitted]\n"
            "  latency: [--rate MSGS_PER_S] [--commit-interval-ms MS] "
            "[--seconds S] [--fetch-wait-ms W]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    const char *mode;
    int i;

    if (argc < 2)
        usage();
    mode = argv[1];
    for (i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";

        if (!strcmp(a, "--create")) {
            o.create = 1;
            continue;
        }
        i++;
        if (!strcmp(a, "--brokers"))
            o.brokers = v;
        else if (!strcmp(a, "--topic"))
            o.topic = v;
        else if (!strcmp(a, "--partitions"))
            o.parts = atoi(v);
        else if (!strcmp(a, "--messages"))
            o.messages = atol(v);
        else if (!strcmp(a, "--size"))
            o.size = atoi(v);
        else if (!strcmp(a, "--txn-records"))
            o.txn_records = atoi(v);
        else if (!strcmp(a, "--abort-every"))
            o.abort_every = atoi(v);
        else if (!strcmp(a, "--producers"))
            o.producers = atoi(v);
        else if (!strcmp(a, "--log-bytes"))
            o.log_bytes = atoll(v);
        else if (!strcmp(a, "--rounds"))
            o.rounds = atoi(v);
        else if (!strcmp(a, "--isolation")) {
            if (!strcmp(v, "read_committed"))
                o.isolation = 1;
            else if (!strcmp(v, "read_uncommitted"))
                o.isolation = 0;
            else
                usage();
        } else if (!strcmp(a, "--rate"))
            o.rate = atoi(v);
        else if (!strcmp(a, "--commit-interval-ms"))
            o.interval_ms = atoi(v);
        else if (!strcmp(a, "--seconds"))
            o.seconds = atof(v);
        else if (!strcmp(a, "--fetch-wait-ms"))
            o.fetch_wait_ms = atoi(v);
        else if (!strcmp(a, "--debug"))
            o.debug = v;
        else
            usage();
    }
    if (o.size < 0)
        o.size = strcmp(mode, "latency") ? 1024 : 100;
    if (!o.brokers || !o.topic || o.parts < 1 || o.messages < 1 ||
        o.txn_records < 1 || o.abort_every < 0 || o.producers < 1 ||
        o.rounds < 1 || o.rate < 1 || o.rate > 1000000 ||
        o.interval_ms < 1 || o.seconds <= 0 || o.fetch_wait_ms < 0)
        usage();
    if (!strcmp(mode, "write"))
        return run_write();
    if (!strcmp(mode, "consume"))
        return run_consume();
    if (!strcmp(mode, "latency")) {
        if (o.size < 16)
            usage();
        return run_latency();
    }
    usage();
    return 2;
}
