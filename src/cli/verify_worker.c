/*
 * verify_worker.c - the child processes of `cairnctl verify`, run as the
 * hidden command `cairnctl verify-worker --role R ...` so the parent can
 * SIGKILL or SIGSTOP them.  Each appends its history (verify.h) to its own
 * file with one write(2) per line, so a kill -9 can only cut the last one.
 *
 *   writer  transactional producer: TXN_RECORDS values per transaction to
 *           random input partitions; every 7th transaction is aborted on
 *           purpose.  With --idempotent an idempotent acks=all
 *           producer instead, each record its own "transaction"
 *           (verify.h): S before it is sent, W and C once acknowledged.
 *   rpw     read-process-write: consumes the input read_committed in a
 *           group, writes "<own value>:<input value>" to the same output
 *           partition, commits offsets with the transaction.
 *   tail    read_committed (or --isolation read_uncommitted) consumer of every partition of both topics from the start,
 *           logging "R <topic> <partition> <offset> <value>".
 *
 * SIGTERM asks a worker to finish its transaction and exit 0; a fatal
 * client error (fenced) exits 3 and the parent starts a new incarnation.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <librdkafka/rdkafka.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "cli/cli.h"

#define TXN_RECORDS 4       /* writer records per transaction */
#define ABORT_EVERY 7       /* writer aborts every 7th transaction */
#define RPW_BATCH 20        /* rpw records per transaction at most */
#define CALL_TIMEOUT_MS 30000
#define EXIT_FATAL 3
#define TXN_ABORTED (-1) /* finish(): aborted instead of committed */
#define IDEM_IN_FLIGHT 200 /* idempotent writer: unacknowledged records */

struct worker {
    const char *role;      /* writer, rpw, tail */
    const char *bootstrap; /* HOST:PORT */
    const char *command_config; /* --command-config FILE or NULL */
    const char *in;        /* input topic */
    const char *out;       /* output topic */
    const char *group;     /* rpw consumer group */
    int id;                /* worker number within its role */
    int inc;               /* incarnation, bumped on each restart */
    int partitions;        /* per topic */
    int txn_timeout_ms;    /* transaction.timeout.ms */
    bool idempotent;       /* writer: idempotent, not transactional */
    const char *isolation; /* tail: isolation.level */
    int fd;                /* history file */
    int64_t txn;           /* current transaction number */
    int pending;           /* rpw records in the open transaction */
    rd_kafka_t *prod;      /* transactional producer */
    rd_kafka_t *cons;      /* rpw or tail consumer */
};

static volatile sig_atomic_t stopping;

static void on_term(int sig)
{
    (void)sig;
    stopping = 1;
}

__attribute__((format(printf, 2, 3)))
static void hist(struct worker *w, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n > 0 && (size_t)n < sizeof line && write(w->fd, line, (size_t)n))
        return;
}

static char prefix(const struct worker *w)
{
    return w->role[0] == 'w' ? 'w' : 'r';
}

/* The delivery report: an acknowledged write goes into the history. */
static void on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m,
                        void *opaque)
{
    struct worker *w = opaque;
    const char *v = m->payload;
    int dots = 0;
    size_t tl = 0;

    (void)rk;
    if (m->err)
        return;
    while (tl < m->len && (v[tl] != '.' || ++dots < 3))
        tl++;
    hist(w, "W %.*s %s %" PRId32 " %" PRId64 " %.*s\n", (int)tl, v,
         rd_kafka_topic_name(m->rkt), m->partition, m->offset, (int)m->len,
         v);
    /* Its own transaction, committed by the acknowledgement. */
    if (w->idempotent)
        hist(w, "C %.*s\n", (int)tl, v);
}

static int rk_set(void *ctx, const char *key, const char *value)
{
    char err[256];

    if (rd_kafka_conf_set(ctx, key, value, err, sizeof err) ==
        RD_KAFKA_CONF_OK)
        return 0;
    fprintf(stderr, "cairnctl verify: %s: %s\n", key, err);
    return -1;
}

int cli_verify_apply_sec(struct rd_kafka_conf_s *c, const char *path)
{
    struct cli_props *p;
    char err[1024];
    int rc;

    if (!path)
        return 0;
    p = malloc(sizeof *p);
    if (!p)
        return -1;
    rc = cli_props_load(p, path, NULL, err, sizeof err);
    if (rc)
        fprintf(stderr, "cairnctl verify: --command-config %s\n", err);
    else
        rc = cli_props_each_rdkafka(p, rk_set, c);
    /* librdkafka before 2.6.1 repeats the client nonce in client-final
     * (librdkafka#4895); Kafka 4 and Cairn compare it strictly, as RFC
     * 5802 says, and refuse the login. */
    static bool warned;
    if (!rc && !warned && rd_kafka_version() < 0x020601ff &&
        (p->sec.sasl == CN_KCLIENT_SASL_SCRAM_SHA256 ||
         p->sec.sasl == CN_KCLIENT_SASL_SCRAM_SHA512)) {
        fprintf(stderr,
                "cairnctl verify: warning: librdkafka %s sends a SCRAM nonce "
                "that Kafka 4 brokers refuse (fixed in librdkafka 2.6.1); "
                "use PLAIN or a newer librdkafka\n",
                rd_kafka_version_str());
        warned = true;
    }
    free(p);
    return rc ? -1 : 0;
}

static rd_kafka_conf_t *base_conf(const struct worker *w)
{
    rd_kafka_conf_t *c = rd_kafka_conf_new();
    char err[256];

    rd_kafka_conf_set(c, "bootstrap.servers", w->bootstrap, err, sizeof err);
    rd_kafka_conf_set(c, "reconnect.backoff.ms", "100", err, sizeof err);
    rd_kafka_conf_set(c, "reconnect.backoff.max.ms", "1000", err,
                      sizeof err);
    rd_kafka_conf_set(c, "log_level", "3", err, sizeof err);
    /* Checked by `cairnctl verify` before it started us. */
    cli_verify_apply_sec(c, w->command_config);
    return c;
}

static int make_producer(struct worker *w)
{
    rd_kafka_conf_t *c = base_conf(w);
    char err[256], tid[64], tmo[32];
    rd_kafka_error_t *e;

    snprintf(tid, sizeof tid, "verify-%c%d", prefix(w), w->id);
    snprintf(tmo, sizeof tmo, "%d", w->txn_timeout_ms);
    rd_kafka_conf_set(c, "transactional.id", tid, err, sizeof err);
    rd_kafka_conf_set(c, "transaction.timeout.ms", tmo, err, sizeof err);
    rd_kafka_conf_set(c, "linger.ms", "5", err, sizeof err);
    rd_kafka_conf_set_dr_msg_cb(c, on_delivery);
    rd_kafka_conf_set_opaque(c, w);
    w->prod = rd_kafka_new(RD_KAFKA_PRODUCER, c, err, sizeof err);
    if (!w->prod) {
        fprintf(stderr, "verify-worker: %s\n", err);
        return EXIT_FATAL;
    }
    while ((e = rd_kafka_init_transactions(w->prod, CALL_TIMEOUT_MS))) {
        bool retry = rd_kafka_error_is_retriable(e) && !stopping;
        fprintf(stderr, "verify-worker %s%d: init: %s\n", w->role, w->id,
                rd_kafka_error_string(e));
        rd_kafka_error_destroy(e);
        if (!retry)
            return EXIT_FATAL;
    }
    return 0;
}

static int begin(struct worker *w)
{
    rd_kafka_error_t *e = rd_kafka_begin_transaction(w->prod);

    if (!e)
        return 0;
    fprintf(stderr, "verify-worker: begin: %s\n", rd_kafka_error_string(e));
    rd_kafka_error_destroy(e);
    return EXIT_FATAL;
}

/*
 * Handles a failed transactional call: an abortable error aborts (logged
 * only once the abort returned); anything else is fatal.  Returns
 * TXN_ABORTED when the transaction was aborted, else EXIT_FATAL.
 */
static int txn_failed(struct worker *w, rd_kafka_error_t *e)
{
    bool abortable = rd_kafka_error_txn_requires_abort(e);

    fprintf(stderr, "verify-worker %s%d: txn %" PRId64 ": %s\n", w->role,
            w->id, w->txn, rd_kafka_error_string(e));
    rd_kafka_error_destroy(e);
    if (!abortable)
        return EXIT_FATAL;
    e = rd_kafka_abort_transaction(w->prod, CALL_TIMEOUT_MS);
    if (e) {
        fprintf(stderr, "verify-worker: abort: %s\n",
                rd_kafka_error_string(e));
        rd_kafka_error_destroy(e);
        return EXIT_FATAL;
    }
    hist(w, "A %c%d.%d.%" PRId64 "\n", prefix(w), w->id, w->inc, w->txn);
    return TXN_ABORTED;
}

/* Commits (retrying retriable errors) or aborts the open transaction.
 * Returns 0, TXN_ABORTED when a commit failed and was aborted instead, or
 * EXIT_FATAL. */
static int finish(struct worker *w, bool commit)
{
    rd_kafka_error_t *e;

    if (!commit) {
        e = rd_kafka_abort_transaction(w->prod, CALL_TIMEOUT_MS);
        if (e)
            return txn_failed(w, e);
        hist(w, "A %c%d.%d.%" PRId64 "\n", prefix(w), w->id, w->inc,
             w->txn);
        return 0;
    }
    hist(w, "S %c%d.%d.%" PRId64 "\n", prefix(w), w->id, w->inc, w->txn);
    while ((e = rd_kafka_commit_transaction(w->prod, CALL_TIMEOUT_MS))) {
        if (!rd_kafka_error_is_retriable(e))
            return txn_failed(w, e);
        rd_kafka_error_destroy(e);
    }
    hist(w, "C %c%d.%d.%" PRId64 "\n", prefix(w), w->id, w->inc, w->txn);
    return 0;
}

static int produce(struct worker *w, const char *topic, int32_t part,
                   const char *value)
{
    rd_kafka_resp_err_t err;

    for (;;) {
        err = rd_kafka_producev(w->prod, RD_KAFKA_V_TOPIC(topic),
                                RD_KAFKA_V_PARTITION(part),
                                RD_KAFKA_V_VALUE((void *)value,
                                                 strlen(value)),
                                RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                                RD_KAFKA_V_END);
        if (err != RD_KAFKA_RESP_ERR__QUEUE_FULL)
            break;
        rd_kafka_poll(w->prod, 50);
    }
    return err ? -1 : 0;
}

static int run_writer(struct worker *w)
{
    unsigned seed = (unsigned)(w->id * 7919 + w->inc * 104729 + getpid());
    int rc = make_producer(w);

    while (!rc && !stopping) {
        bool ok = true;
        char v[96];

        rc = begin(w);
        for (int i = 0; !rc && i < TXN_RECORDS && ok; i++) {
            snprintf(v, sizeof v, "w%d.%d.%" PRId64 ".%d", w->id, w->inc,
                     w->txn, i);
            ok = produce(w, w->in, (int32_t)(rand_r(&seed) % w->partitions),
                         v) == 0;
        }
        /* A deliberate abort first waits for the records to be written,
         * so aborted data really sits in the log for readers to skip. */
        if (!rc && ok && w->txn % ABORT_EVERY == ABORT_EVERY - 1) {
            rd_kafka_flush(w->prod, CALL_TIMEOUT_MS);
            ok = false;
        }
        if (!rc)
            rc = finish(w, ok);
        if (rc == TXN_ABORTED)
            rc = 0;
        w->txn++;
        rd_kafka_poll(w->prod, 0);
        usleep(10000);
    }
    return rc;
}

/*
 * --idempotent: an idempotent acks=all producer, one record per "transaction" so the checker holds every
 * acknowledged record to be read and leaves a failed send open either
 * way.  A fatal error (the producer state is gone) exits for a new
 * incarnation.
 */
static int run_idempotent_writer(struct worker *w)
{
    unsigned seed = (unsigned)(w->id * 7919 + w->inc * 104729 + getpid());
    rd_kafka_conf_t *c = base_conf(w);
    char err[256], v[96];

    rd_kafka_conf_set(c, "enable.idempotence", "true", err, sizeof err);
    rd_kafka_conf_set(c, "acks", "all", err, sizeof err);
    rd_kafka_conf_set(c, "linger.ms", "5", err, sizeof err);
    /* Longer than any failover, so a send fails only for a real reason. */
    rd_kafka_conf_set(c, "message.timeout.ms", "120000", err, sizeof err);
    rd_kafka_conf_set_dr_msg_cb(c, on_delivery);
    rd_kafka_conf_set_opaque(c, w);
    w->prod = rd_kafka_new(RD_KAFKA_PRODUCER, c, err, sizeof err);
    if (!w->prod) {
        fprintf(stderr, "verify-worker: %s\n", err);
        return EXIT_FATAL;
    }
    while (!stopping) {
        if (rd_kafka_fatal_error(w->prod, err, sizeof err)) {
            fprintf(stderr, "verify-worker %s%d: fatal: %s\n", w->role, w->id,
                    err);
            return EXIT_FATAL;
        }
        if (rd_kafka_outq_len(w->prod) >= IDEM_IN_FLIGHT) {
            rd_kafka_poll(w->prod, 10);
            continue;
        }
        snprintf(v, sizeof v, "w%d.%d.%" PRId64 ".0", w->id, w->inc, w->txn);
        hist(w, "S w%d.%d.%" PRId64 "\n", w->id, w->inc, w->txn);
        if (produce(w, w->in, (int32_t)(rand_r(&seed) % w->partitions), v))
            fprintf(stderr, "verify-worker %s%d: produce %s failed\n", w->role,
                    w->id, v);
        w->txn++;
        rd_kafka_poll(w->prod, 0);
        usleep(2000);
    }
    return 0;
}

/*
 * Seeks every assigned partition back to its committed offset, after an
 * abort.  Returns 0, or EXIT_FATAL when it could not (the group
 * coordinator unreachable, say, while its broker is down): going on from
 * the position would skip what the aborted transaction consumed, and the
 * next commit would move the group past it for good, so the worker exits
 * and its next incarnation starts from the committed offsets.
 */
static int rewind_committed(struct worker *w)
{
    rd_kafka_topic_partition_list_t *parts = NULL;
    rd_kafka_resp_err_t err;
    int rc = 0;

    if (rd_kafka_assignment(w->cons, &parts) || !parts)
        return EXIT_FATAL;
    if (parts->cnt) {
        err = rd_kafka_committed(w->cons, parts, CALL_TIMEOUT_MS);
        for (int i = 0; !err && i < parts->cnt; i++) {
            if (parts->elems[i].err)
                err = parts->elems[i].err;
            else if (parts->elems[i].offset < 0)
                parts->elems[i].offset = RD_KAFKA_OFFSET_BEGINNING;
        }
        if (!err) {
            rd_kafka_error_t *e = rd_kafka_seek_partitions(w->cons, parts,
                                                           CALL_TIMEOUT_MS);
            if (e) {
                fprintf(stderr, "verify-worker %s%d: seek: %s\n", w->role,
                        w->id, rd_kafka_error_string(e));
                rd_kafka_error_destroy(e);
                rc = EXIT_FATAL;
            }
            for (int i = 0; !rc && i < parts->cnt; i++)
                if (parts->elems[i].err)
                    rc = EXIT_FATAL;
        } else {
            fprintf(stderr, "verify-worker %s%d: committed offsets: %s\n",
                    w->role, w->id, rd_kafka_err2str(err));
            rc = EXIT_FATAL;
        }
    }
    rd_kafka_topic_partition_list_destroy(parts);
    return rc;
}

/* An open transaction may hold records of partitions being revoked:
 * abort it, so the next owner starts from what is committed. */
static void on_rebalance(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                         rd_kafka_topic_partition_list_t *parts, void *opaque)
{
    struct worker *w = opaque;

    if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
        rd_kafka_assign(rk, parts);
        return;
    }
    if (w->pending) {
        int rc = finish(w, false);
        if ((rc && rc != TXN_ABORTED) || begin(w))
            _exit(EXIT_FATAL);
        w->txn++;
        w->pending = 0;
    }
    rd_kafka_assign(rk, NULL);
}

static int make_consumer(struct worker *w, bool group)
{
    rd_kafka_conf_t *c = base_conf(w);
    char err[256], gid[64];

    snprintf(gid, sizeof gid, "%s", group ? w->group : "verify-tail");
    rd_kafka_conf_set(c, "group.id", gid, err, sizeof err);
    rd_kafka_conf_set(c, "isolation.level",
                      group || !w->isolation ? "read_committed" : w->isolation,
                      err, sizeof err);
    rd_kafka_conf_set(c, "enable.auto.commit", "false", err, sizeof err);
    rd_kafka_conf_set(c, "auto.offset.reset", "earliest", err, sizeof err);
    rd_kafka_conf_set(c, "session.timeout.ms", "6000", err, sizeof err);
    rd_kafka_conf_set(c, "heartbeat.interval.ms", "500", err, sizeof err);
    rd_kafka_conf_set(c, "max.poll.interval.ms", "60000", err, sizeof err);
    if (group) {
        rd_kafka_conf_set_rebalance_cb(c, on_rebalance);
        rd_kafka_conf_set_opaque(c, w);
    }
    w->cons = rd_kafka_new(RD_KAFKA_CONSUMER, c, err, sizeof err);
    if (!w->cons) {
        fprintf(stderr, "verify-worker: %s\n", err);
        return EXIT_FATAL;
    }
    rd_kafka_poll_set_consumer(w->cons);
    return 0;
}

static int rpw_commit(struct worker *w)
{
    rd_kafka_topic_partition_list_t *pos = NULL;
    rd_kafka_consumer_group_metadata_t *md;
    rd_kafka_error_t *e;
    int rc;

    if (rd_kafka_assignment(w->cons, &pos))
        return EXIT_FATAL;
    rd_kafka_position(w->cons, pos);
    md = rd_kafka_consumer_group_metadata(w->cons);
    while ((e = rd_kafka_send_offsets_to_transaction(w->prod, pos, md,
                                                     CALL_TIMEOUT_MS))) {
        if (!rd_kafka_error_is_retriable(e))
            break;
        rd_kafka_error_destroy(e);
    }
    rd_kafka_consumer_group_metadata_destroy(md);
    rd_kafka_topic_partition_list_destroy(pos);
    rc = e ? txn_failed(w, e) : finish(w, true);
    if (rc == TXN_ABORTED)
        rc = rewind_committed(w);
    return rc;
}

static int run_rpw(struct worker *w)
{
    rd_kafka_topic_partition_list_t *sub;
    int64_t idle_since = cn_clock_mono_ms();
    int rc = make_producer(w);

    if (!rc)
        rc = make_consumer(w, true);
    if (rc)
        return rc;
    sub = rd_kafka_topic_partition_list_new(1);
    rd_kafka_topic_partition_list_add(sub, w->in, RD_KAFKA_PARTITION_UA);
    rd_kafka_subscribe(w->cons, sub);
    rd_kafka_topic_partition_list_destroy(sub);
    rc = begin(w);
    while (!rc && (!stopping || w->pending)) {
        rd_kafka_message_t *m = stopping ? NULL
                                         : rd_kafka_consumer_poll(w->cons,
                                                                  100);
        int64_t now = cn_clock_mono_ms();

        if (m && m->err) {
            bool fatal = m->err == RD_KAFKA_RESP_ERR__FATAL;
            rd_kafka_message_destroy(m);
            if (fatal)
                return EXIT_FATAL;
            continue;
        }
        if (m) {
            char v[1024];
            snprintf(v, sizeof v, "r%d.%d.%" PRId64 ".%d:%.*s", w->id, w->inc,
                     w->txn, w->pending, (int)m->len, (const char *)m->payload);
            if (produce(w, w->out, m->partition, v) == 0) {
                w->pending++;
            } else {
                rd_kafka_message_destroy(m);
                rc = finish(w, false);
                if (rc == 0 || rc == TXN_ABORTED)
                    rc = rewind_committed(w);
                w->txn++;
                w->pending = 0;
                if (!rc)
                    rc = begin(w);
                continue;
            }
            rd_kafka_message_destroy(m);
            idle_since = now;
        }
        if (w->pending >= RPW_BATCH ||
            (w->pending && (stopping || now - idle_since > 200))) {
            rc = rpw_commit(w);
            w->txn++;
            w->pending = 0;
            if (!rc)
                rc = begin(w);
        }
    }
    if (!rc)
        rd_kafka_consumer_close(w->cons);
    return rc;
}

static int run_tail(struct worker *w)
{
    rd_kafka_topic_partition_list_t *parts =
        rd_kafka_topic_partition_list_new(2 * w->partitions);
    int rc = make_consumer(w, false);

    if (rc)
        return rc;
    for (int32_t p = 0; p < w->partitions; p++) {
        rd_kafka_topic_partition_list_add(parts, w->in, p)->offset =
            RD_KAFKA_OFFSET_BEGINNING;
        rd_kafka_topic_partition_list_add(parts, w->out, p)->offset =
            RD_KAFKA_OFFSET_BEGINNING;
    }
    rd_kafka_assign(w->cons, parts);
    rd_kafka_topic_partition_list_destroy(parts);
    while (!stopping) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(w->cons, 100);
        if (!m)
            continue;
        if (!m->err)
            hist(w, "R %s %" PRId32 " %" PRId64 " %.*s\n",
                 rd_kafka_topic_name(m->rkt), m->partition, m->offset,
                 (int)m->len, (const char *)m->payload);
        rd_kafka_message_destroy(m);
    }
    return 0;
}

int cmd_verify_worker(int argc, char **argv)
{
    struct worker w;
    const char *path = NULL;
    struct sigaction sa;
    int rc;

    memset(&w, 0, sizeof w);
    w.partitions = 1;
    w.txn_timeout_ms = 10000;
    for (int i = 2; i + 1 < argc; i += 2) {
        const char *k = argv[i], *v = argv[i + 1];
        if (!strcmp(k, "--role"))
            w.role = v;
        else if (!strcmp(k, "--bootstrap-server"))
            w.bootstrap = v;
        else if (!strcmp(k, "--command-config"))
            w.command_config = v;
        else if (!strcmp(k, "--in"))
            w.in = v;
        else if (!strcmp(k, "--out"))
            w.out = v;
        else if (!strcmp(k, "--group"))
            w.group = v;
        else if (!strcmp(k, "--id"))
            w.id = atoi(v);
        else if (!strcmp(k, "--inc"))
            w.inc = atoi(v);
        else if (!strcmp(k, "--partitions"))
            w.partitions = atoi(v);
        else if (!strcmp(k, "--txn-timeout-ms"))
            w.txn_timeout_ms = atoi(v);
        else if (!strcmp(k, "--history"))
            path = v;
        else if (!strcmp(k, "--idempotent"))
            w.idempotent = !strcmp(v, "1");
        else if (!strcmp(k, "--isolation"))
            w.isolation = v;
    }
    if (!w.role || !w.bootstrap || !w.in || !w.out || !path ||
        w.partitions < 1) {
        fprintf(stderr, "verify-worker: internal command, started by "
                        "'cairnctl verify'\n");
        return EXIT_USAGE;
    }
    if (!w.group)
        w.group = "verify-rpw";
    w.fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (w.fd < 0) {
        fprintf(stderr, "verify-worker: %s: %s\n", path, strerror(errno));
        return EXIT_FAIL;
    }
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_term;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);

    if (!strcmp(w.role, "writer"))
        rc = w.idempotent ? run_idempotent_writer(&w) : run_writer(&w);
    else if (!strcmp(w.role, "rpw"))
        rc = run_rpw(&w);
    else
        rc = run_tail(&w);
    /* A fatal worker leaves at once: flushing a fenced producer only
     * waits out its timeouts. */
    if (rc) {
        close(w.fd);
        _exit(rc);
    }
    if (w.cons)
        rd_kafka_destroy(w.cons);
    if (w.prod) {
        /* Cluster mode stops writers once every partition has a leader:
         * what is queued gets through, given the time. */
        rd_kafka_flush(w.prod, w.idempotent ? 30000 : 5000);
        rd_kafka_destroy(w.prod);
    }
    close(w.fd);
    return rc;
}
