/*
 * bench_txn: transactional producer throughput and commit latency through
 * librdkafka.
 *
 *   bench_txn --brokers B --topic T --partitions P --messages N
 *             --size BYTES --commit-interval-ms MS [--create]
 *   bench_txn --brokers B --topic T --partitions P --commit-latency
 *             --partitions-per-txn K --transactions T [--size BYTES]
 *             [--create]
 *
 * --debug CONTEXTS passes librdkafka's debug setting (e.g. eos,protocol).
 * -X key=value (repeatable) sets a producer property, as in bench_client
 * (security.protocol, ssl.ca.location, sasl.* for a secured listener).
 *
 * Throughput mode produces N values round-robin over P partitions inside
 * transactions, committing whenever MS milliseconds of wall time have
 * passed since the transaction began (and once more at the end), and
 * prints {"test": "produce_txn_<MS>ms", ...}.
 *
 * --txn-records R commits after every R records instead (the interval is
 * then only the label's fallback), and the JSON says "produce_txn_<R>rec".
 * --seconds S runs for W + S seconds (W = --warmup-seconds) instead of N
 * messages, and the figures count only the transactions whose commit
 * returned in the last S seconds: committed records, commits per second and
 * the achieved commit interval (S / commits), which with the flush before
 * each commit is longer than the nominal one.
 *
 * Commit-latency mode runs T transactions that each put one small record
 * (64 B unless --size says otherwise) on each of partitions 0..K-1, and
 * prints {"test": "commit_latency", ...}.  One untimed transaction runs
 * first so connection set-up and the first AddPartitionsToTxn are not in
 * the figures.
 *
 * In both modes every commit is preceded by rd_kafka_flush(), so the time
 * taken by rd_kafka_commit_transaction() is the EndTxn round trip (the
 * coordinator writing its prepare record and the markers) rather than the
 * delivery of the transaction's data, which commit_transaction would
 * otherwise wait for first.  The flush time is reported separately.
 *
 * --queue-kbytes K: the producers' queue.buffering.max.kbytes together
 * (default 1048576 for one producer, 65536 for more; at least 512 each).
 *
 * --producers N (throughput mode; default 1) runs N transactional
 * producers (distinct transactional.id), each in its own thread with its
 * own transactions and commit clock: producer j writes partitions j*P/N ..
 * (j+1)*P/N-1 (every partition, round-robin, when P < N).  They are all
 * initialised (init_transactions, in parallel) before the clock starts.
 * The figures are every producer's together: records and commits summed,
 * commit and flush percentiles over all their commits,
 * achieved_interval_ms the mean interval of one producer (S * N /
 * commits), and the JSON says "producers", "init_seconds" (their
 * start-up: rd_kafka_new, init_transactions, metadata) and
 * "client_cpu_seconds" (this process, user + system: a hundred producers
 * can make the client the bottleneck), only when N > 1.
 *
 * In a timed run the commit and flush percentiles are those of the
 * commits that returned in the window, like every other figure of it:
 * the first commit of each producer (its first AddPartitionsToTxn, N at
 * once) is start-up, not the steady state.
 */
#include <librdkafka/rdkafka.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"

#define MAX_PRODUCERS 1000

static const char *debug; /* librdkafka debug contexts, or NULL */
static const char *linger_ms = "10"; /* --linger-ms */
static const char *xprops[32];       /* -X key=value */
static char qkb[24] = "1048576";     /* queue.buffering.max.kbytes */
static int nx;

/* One producer's delivery reports, counted by dr_cb in the thread that
 * polls (flushes) that producer: no lock. */
struct drc {
    long ok, fail;
};

static void dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
    struct drc *d = opaque;

    (void)rk;
    if (m->err) {
        if (d->fail++ < 5)
            fprintf(stderr, "delivery failed: %s\n",
                    rd_kafka_err2str(m->err));
    } else {
        d->ok++;
    }
}

/*
 * Reports a transactional API error.  Abortable errors abort the
 * transaction and return -1 so the caller can count it and go on; fatal
 * and other errors end the program, since the figures would mean nothing.
 */
static int txn_check(rd_kafka_t *rk, rd_kafka_error_t *err, const char *what)
{
    rd_kafka_error_t *aerr;

    if (!err)
        return 0;
    fprintf(stderr, "%s: %s (%s)%s%s\n", what, rd_kafka_error_string(err),
            rd_kafka_error_name(err),
            rd_kafka_error_is_fatal(err) ? " fatal" : "",
            rd_kafka_error_txn_requires_abort(err) ? " requires abort" : "");
    if (!rd_kafka_error_txn_requires_abort(err)) {
        rd_kafka_error_destroy(err);
        exit(1);
    }
    rd_kafka_error_destroy(err);
    aerr = rd_kafka_abort_transaction(rk, 60000);
    if (aerr) {
        fprintf(stderr, "abort_transaction: %s\n",
                rd_kafka_error_string(aerr));
        rd_kafka_error_destroy(aerr);
        exit(1);
    }
    return -1;
}

static void produce_one(rd_kafka_t *rk, const char *topic, int32_t part,
                        const char *buf, int size)
{
    rd_kafka_resp_err_t err;

    for (;;) {
        err = rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic),
                                RD_KAFKA_V_PARTITION(part),
                                RD_KAFKA_V_VALUE((void *)buf, (size_t)size),
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

/* Commit statistics of one run. */
struct commits {
    struct samples commit; /* commit_transaction() time, ms */
    struct samples flush;  /* flush() before it, ms */
    long aborts;           /* transactions aborted on abortable errors */
};

/* Flushes, then commits the open transaction, timing both; 0 when it
 * committed. */
static int commit_timed(rd_kafka_t *rk, struct commits *c)
{
    double t0, t1, t2;
    rd_kafka_error_t *err;

    t0 = now_s();
    rd_kafka_flush(rk, 120000);
    t1 = now_s();
    err = rd_kafka_commit_transaction(rk, 60000);
    t2 = now_s();
    if (txn_check(rk, err, "commit_transaction")) {
        c->aborts++;
        return -1;
    }
    samples_add(&c->flush, (t1 - t0) * 1e3);
    samples_add(&c->commit, (t2 - t1) * 1e3);
    return 0;
}

static void begin(rd_kafka_t *rk)
{
    rd_kafka_error_t *err = rd_kafka_begin_transaction(rk);

    if (err) {
        fprintf(stderr, "begin_transaction: %s\n",
                rd_kafka_error_string(err));
        rd_kafka_error_destroy(err);
        exit(1);
    }
}

static rd_kafka_t *new_producer(const char *brokers, const char *topic,
                                struct drc *d, int j)
{
    char errstr[256], txid[128];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_t *rk;
    rd_kafka_error_t *err;
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(txid, sizeof(txid), "bench_txn-%s-%ld-%ld-%ld-%d", topic,
             (long)getpid(), (long)ts.tv_sec, ts.tv_nsec, j);
    conf_set(conf, "bootstrap.servers", brokers);
    conf_set(conf, "transactional.id", txid);
    conf_set(conf, "acks", "all");
    conf_set_batching(conf, linger_ms, qkb);
    /* librdkafka wants message.timeout.ms <= transaction.timeout.ms. */
    conf_set(conf, "transaction.timeout.ms", "60000");
    conf_set(conf, "message.timeout.ms", "60000");
    if (debug)
        conf_set(conf, "debug", debug);
    for (int x = 0; x < nx; x++)
        conf_set_kv(conf, xprops[x]);
    rd_kafka_conf_set_dr_msg_cb(conf, dr_cb);
    rd_kafka_conf_set_opaque(conf, d);
    rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
    if (!rk) {
        fprintf(stderr, "rd_kafka_new: %s\n", errstr);
        exit(2);
    }
    err = rd_kafka_init_transactions(rk, 30000);
    if (err) {
        fprintf(stderr, "init_transactions: %s (%s)\n",
                rd_kafka_error_string(err), rd_kafka_error_name(err));
        rd_kafka_error_destroy(err);
        exit(1);
    }
    /* Metadata first, so the clock measures the broker, not start-up. */
    {
        const struct rd_kafka_metadata *md;
        rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);

        if (!rd_kafka_metadata(rk, 0, rkt, &md, 10000))
            rd_kafka_metadata_destroy(md);
        rd_kafka_topic_destroy(rkt);
    }
    return rk;
}

/* What a throughput run does: how long, and when it commits. */
struct tput_opts {
    long messages;     /* records, when seconds == 0 */
    int size;          /* value bytes */
    int interval_ms;   /* commit when the transaction is this old */
    long txn_records;  /* or after this many records (0: by interval) */
    double seconds;    /* timed run: the measured window */
    double warmup;     /* timed run: seconds before the window */
};

/* One transactional producer of a throughput run, run by its own
 * thread: everything it counts is its own until main() adds them up. */
struct txp {
    int j;            /* index: its transactional.id ends in -j */
    int lo, n, first; /* partitions lo .. lo + n - 1, starting at first */
    long messages;    /* to produce (counted run), then produced */
    rd_kafka_t *rk;
    struct drc d;     /* its delivery reports */
    struct commits c; /* every commit */
    struct commits w; /* the commits that returned in the window */
    long win_msgs;    /* records of those commits */
};

/* What every producer thread of a throughput run shares. */
static struct {
    const char *brokers, *topic, *buf;
    const struct tput_opts *o;
    pthread_barrier_t ready; /* every producer initialised */
    pthread_barrier_t go;    /* the clock is set */
    double t0, win_start, win_end;
} tp;

static void *txn_loop(void *arg)
{
    struct txp *pr = arg;
    const struct tput_opts *o = tp.o;
    rd_kafka_t *rk;
    double interval = o->interval_ms / 1e3, txn_t0, now;
    long i, messages = pr->messages, in_txn = 0;

    rk = pr->rk = new_producer(tp.brokers, tp.topic, &pr->d, pr->j);
    pthread_barrier_wait(&tp.ready);
    pthread_barrier_wait(&tp.go);
    begin(rk);
    txn_t0 = tp.t0;
    for (i = 0; i < messages; i++) {
        produce_one(rk, tp.topic, (int32_t)(pr->lo + (i + pr->first) % pr->n),
                    tp.buf, o->size);
        in_txn++;
        if ((i & 1023) == 0)
            rd_kafka_poll(rk, 0);
        if (i + 1 == messages)
            break;
        now = now_s();
        if (o->seconds > 0 && now >= tp.win_end)
            break;
        if (o->txn_records ? in_txn < o->txn_records
                           : now - txn_t0 < interval)
            continue;
        if (!commit_timed(rk, &pr->c)) {
            now = now_s();
            if (now >= tp.win_start && now <= tp.win_end) {
                pr->win_msgs += in_txn;
                samples_add(&pr->w.commit, pr->c.commit.v[pr->c.commit.n - 1]);
                samples_add(&pr->w.flush, pr->c.flush.v[pr->c.flush.n - 1]);
            }
        }
        in_txn = 0;
        begin(rk);
        /* The interval is the transaction's age, as in a loop that
         * commits what it gathered in the last 10 ms; the flush and commit
         * come on top, so the achieved interval is printed beside it.
         * (Timed from the previous commit's start instead, a commit slower
         * than the interval would leave one record per transaction.) */
        txn_t0 = now_s();
    }
    pr->messages = i + 1;
    commit_timed(rk, &pr->c);
    return NULL;
}

/* This process's CPU seconds so far (user + system, every thread). */
static double cpu_self_s(void)
{
    struct rusage ru;

    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
           ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

/* Appends b's samples to a. */
static void samples_merge(struct samples *a, const struct samples *b)
{
    for (size_t k = 0; k < b->n; k++)
        samples_add(a, b->v[k]);
}

static int run_throughput(const char *brokers, const char *topic, int parts,
                          int nprod, const struct tput_opts *o)
{
    struct txp *prods = calloc((size_t)nprod, sizeof *prods);
    pthread_t *tids = calloc((size_t)nprod, sizeof *tids);
    struct commits c = {0}, w = {0}, *fig;
    double t0, t, span;
    char *buf = malloc((size_t)o->size);
    long messages = 0, win_msgs = 0, win_commits, dr_ok = 0, dr_fail = 0;
    char name[64], pfield[128] = "";
    double t_init = now_s();
    int p, j;

    if (!prods || !tids || !buf) {
        perror("calloc");
        exit(2);
    }
    for (p = 0; p < o->size; p++)
        buf[p] = (char)('a' + p % 26);
    tp.brokers = brokers;
    tp.topic = topic;
    tp.buf = buf;
    tp.o = o;
    pthread_barrier_init(&tp.ready, NULL, (unsigned)nprod + 1);
    pthread_barrier_init(&tp.go, NULL, (unsigned)nprod + 1);
    for (j = 0; j < nprod; j++) {
        struct txp *pr = &prods[j];

        pr->j = j;
        partition_share(j, nprod, parts, &pr->lo, &pr->n, &pr->first);
        pr->messages = o->seconds > 0
                           ? LONG_MAX
                           : o->messages / nprod + (j < o->messages % nprod);
        if (pthread_create(&tids[j], NULL, txn_loop, pr)) {
            perror("pthread_create");
            exit(2);
        }
    }
    /* Every producer has its producer id before the clock starts. */
    pthread_barrier_wait(&tp.ready);
    t0 = tp.t0 = now_s();
    t_init = t0 - t_init;
    tp.win_start = t0 + o->warmup;
    tp.win_end = tp.win_start + o->seconds;
    pthread_barrier_wait(&tp.go);
    for (j = 0; j < nprod; j++)
        pthread_join(tids[j], NULL);
    t = now_s() - t0;
    for (j = 0; j < nprod; j++) {
        struct txp *pr = &prods[j];

        rd_kafka_destroy(pr->rk);
        messages += pr->messages;
        dr_ok += pr->d.ok;
        dr_fail += pr->d.fail;
        win_msgs += pr->win_msgs;
        c.aborts += pr->c.aborts;
        samples_merge(&c.commit, &pr->c.commit);
        samples_merge(&c.flush, &pr->c.flush);
        samples_merge(&w.commit, &pr->w.commit);
        samples_merge(&w.flush, &pr->w.flush);
    }
    free(buf);
    free(tids);
    free(prods);
    pthread_barrier_destroy(&tp.ready);
    pthread_barrier_destroy(&tp.go);
    if (o->txn_records)
        snprintf(name, sizeof name, "produce_txn_%ldrec", o->txn_records);
    else
        snprintf(name, sizeof name, "produce_txn_%dms", o->interval_ms);
    if (o->seconds <= 0) {
        /* A counted run: everything, start to last commit. */
        win_msgs = dr_ok;
        fig = &c;
        span = t;
    } else {
        fig = &w;
        span = o->seconds;
    }
    win_commits = (long)fig->commit.n;
    samples_sort(&fig->commit);
    samples_sort(&fig->flush);
    if (nprod > 1)
        snprintf(pfield, sizeof pfield,
                 "\"producers\": %d, \"init_seconds\": %.3f, "
                 "\"client_cpu_seconds\": %.3f, ",
                 nprod, t_init, cpu_self_s());
    printf("{\"test\": \"%s\", \"mode\": \"%s\", "
           "\"commit_interval_ms\": %d, \"txn_records\": %ld, "
           "\"produced\": %ld, \"size\": %d, \"partitions\": %d, %s"
           "\"acks\": \"all\", \"delivered\": %ld, \"failed\": %ld, "
           "\"warmup_seconds\": %.3f, \"seconds\": %.3f, "
           "\"messages\": %ld, \"msgs_per_s\": %.0f, \"mb_per_s\": %.2f, "
           "\"bytes\": %lld, \"commits\": %ld, \"commits_per_s\": %.2f, "
           "\"achieved_interval_ms\": %.2f, \"records_per_txn\": %.1f, "
           "\"aborts\": %ld, \"commit_ms_p50\": %.3f, "
           "\"commit_ms_p99\": %.3f, \"commit_ms_max\": %.3f, "
           "\"flush_ms_p50\": %.3f, \"flush_ms_p99\": %.3f}\n",
           name, o->seconds > 0 ? "timed" : "counted", o->interval_ms,
           o->txn_records, messages, o->size, parts, pfield, dr_ok, dr_fail,
           o->warmup, span, win_msgs, win_msgs / span,
           win_msgs * (double)o->size / span / 1e6,
           (long long)win_msgs * o->size, win_commits, win_commits / span,
           win_commits ? span * 1e3 * nprod / win_commits : 0.0,
           win_commits ? (double)win_msgs / win_commits : 0.0, c.aborts,
           samples_pct(&fig->commit, 0.5), samples_pct(&fig->commit, 0.99),
           samples_pct(&fig->commit, 1.0), samples_pct(&fig->flush, 0.5),
           samples_pct(&fig->flush, 0.99));
    fflush(stdout);
    return dr_ok == messages && !c.aborts ? 0 : 1;
}

static int run_latency(const char *brokers, const char *topic, int k,
                       long txns, int size)
{
    struct commits c = {0};
    struct drc d = {0};
    rd_kafka_t *rk = new_producer(brokers, topic, &d, 0);
    char *buf = malloc((size_t)size);
    double p50, p99, p999, max;
    long i;
    int p;

    memset(buf, 'x', (size_t)size);
    for (i = 0; i <= txns; i++) {
        begin(rk);
        for (p = 0; p < k; p++)
            produce_one(rk, topic, p, buf, size);
        if (i == 0) {
            /* Warm-up: connections, first AddPartitionsToTxn. */
            struct commits warm = {0};

            commit_timed(rk, &warm);
            c.aborts += warm.aborts;
            free(warm.commit.v);
            free(warm.flush.v);
            continue;
        }
        commit_timed(rk, &c);
    }
    rd_kafka_destroy(rk);
    free(buf);
    samples_sort(&c.commit);
    samples_sort(&c.flush);
    p50 = samples_pct(&c.commit, 0.5);
    p99 = samples_pct(&c.commit, 0.99);
    p999 = samples_pct(&c.commit, 0.999);
    max = samples_pct(&c.commit, 1.0);
    printf("{\"test\": \"commit_latency\", \"partitions_per_txn\": %d, "
           "\"transactions\": %zu, \"aborts\": %ld, \"size\": %d, "
           "\"p50_ms\": %.3f, \"p99_ms\": %.3f, \"p999_ms\": %.3f, "
           "\"max_ms\": %.3f, \"flush_ms_p50\": %.3f, "
           "\"delivered\": %ld, \"failed\": %ld}\n",
           k, c.commit.n, c.aborts, size, p50, p99, p999, max,
           samples_pct(&c.flush, 0.5), d.ok, d.fail);
    fflush(stdout);
    return (long)c.commit.n == txns && !d.fail ? 0 : 1;
}

int main(int argc, char **argv)
{
    const char *brokers = NULL, *topic = NULL;
    long messages = 300000, txns = 200, i;
    int size = -1, parts = 6, create = 0, latency = 0, k = 1;
    int interval_ms = 100, nprod = 1;
    long queue_kb = 0;
    long txn_records = 0;
    double seconds = 0, warmup = 0;

    for (i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";

        if (!strcmp(a, "--create")) {
            create = 1;
            continue;
        }
        if (!strcmp(a, "--commit-latency")) {
            latency = 1;
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
        else if (!strcmp(a, "--commit-interval-ms"))
            interval_ms = atoi(v);
        else if (!strcmp(a, "--partitions-per-txn"))
            k = atoi(v);
        else if (!strcmp(a, "--transactions"))
            txns = atol(v);
        else if (!strcmp(a, "--debug"))
            debug = v;
        else if (!strcmp(a, "--linger-ms"))
            linger_ms = v;
        else if (!strcmp(a, "--txn-records"))
            txn_records = atol(v);
        else if (!strcmp(a, "--seconds"))
            seconds = atof(v);
        else if (!strcmp(a, "--producers"))
            nprod = atoi(v);
        else if (!strcmp(a, "--queue-kbytes"))
            queue_kb = atol(v);
        else if (!strcmp(a, "--warmup-seconds"))
            warmup = atof(v);
        else
            brokers = NULL, i = argc;
    }
    if (size < 0)
        size = latency ? 64 : 1024;
    if (!brokers || !topic || parts < 1 || size < 1 || messages < 1 ||
        interval_ms < 1 || k < 1 || k > parts || txns < 1 || txn_records < 0 ||
        seconds < 0 || warmup < 0 || nprod < 1 || nprod > MAX_PRODUCERS ||
        (seconds <= 0 && messages < nprod) || queue_kb < 0) {
        fprintf(stderr,
                "usage: bench_txn --brokers B --topic T "
                "[--partitions P] [--create] [--size BYTES]\n"
                "         [--messages N | --seconds S [--warmup-seconds W]]\n"
                "         [--commit-interval-ms MS | --txn-records R]\n"
                "         [--producers N] [--queue-kbytes K]\n"
                "       | --commit-latency [--partitions-per-txn K<=P] "
                "[--transactions T]\n"
                "       [--debug librdkafka-debug-contexts] "
                "[-X key=value]\n");
        return 2;
    }
    if (create && create_topic(brokers, topic, parts))
        return 1;
    if (latency)
        return run_latency(brokers, topic, k, txns, size);
    {
        struct tput_opts o = {messages, size, interval_ms, txn_records,
                              seconds, warmup};

        /* The producers share --queue-kbytes (default 1 GiB for one,
         * 64 MiB for more), at least 512 KiB each.  A producer flat out
         * fills its queue between commits, so this bounds how much each
         * transaction piles up beyond the broker's pace: 100 producers
         * with 1 GiB each would flush for seconds before every commit. */
        if (!queue_kb)
            queue_kb = nprod == 1 ? 1048576 : 65536;
        snprintf(qkb, sizeof qkb, "%ld",
                 queue_kb / nprod > 512 ? queue_kb / nprod : 512);
        return run_throughput(brokers, topic, parts, nprod, &o);
    }
}
