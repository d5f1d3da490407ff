/*
 * cmd_txn.c - cairnctl txn list|describe|describe-producers|find-hanging|
 * abort and lso-gap, modelled on kafka-transactions.sh (KIP-664).
 *
 * Whatever the bootstrap broker, each request goes where the state lives,
 * as Kafka's admin client sends it: anything about a partition (producer
 * state, offsets, markers) to its leader from Metadata; a transactional
 * id's state to its coordinator from FindCoordinator; ListTransactions to
 * every broker.  On a single node all of these are the one broker.
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/err.h"
#include "cli/cli.h"
#include "proto/kerr.h"

static int txn_error(const struct opts *o, const char *what, const char *id,
                     int16_t code, struct cn_bytes msg)
{
    if (msg.len > 0)
        fprintf(stderr, "cairnctl: %s '%s': %s: %.*s\n", what, id,
                cn_kerr_name(code), (int)msg.len, (const char *)msg.ptr);
    else
        fprintf(stderr, "cairnctl: %s '%s': %s\n", what, id,
                cn_kerr_name(code));
    if (o->json) {
        fputs("{\"transactional_id\":", stdout);
        cli_json_str(stdout, id);
        fputs(",\"error\":", stdout);
        cli_json_str(stdout, cn_kerr_name(code));
        printf(",\"error_code\":%d,\"message\":", code);
        cli_json_bytes(stdout, msg.len > 0 ? msg : CN_BYTES_NULL);
        fputs("}\n", stdout);
    }
    return EXIT_FAIL;
}

/* One ListTransactions result, tagged with the broker that answered. */
struct txn_row {
    int32_t coordinator; /* node id of the answering broker */
    const struct cn_list_transactions_response_transaction_state *s;
};

static int cmp_txn_row(const void *a, const void *b)
{
    const struct txn_row *ra = a, *rb = b;

    return cli_cmp_bytes(ra->s->transactional_id, rb->s->transactional_id);
}

/*
 * Every broker coordinates some transactional ids, so ListTransactions goes
 * to each broker in the cluster (as Kafka's admin client does) and the
 * answers are merged.
 */
int cmd_txn_list(struct ctx *x)
{
    const struct opts *o = x->o;
    struct cn_metadata_response md;
    struct cn_list_transactions_request rq;
    struct cn_list_transactions_response *rs;
    struct txn_row *rows;
    struct cn_bytes *states;
    int32_t nbrokers, nrows = 0, cap = 0;
    bool warned = false;
    struct table t;

    if (cli_fetch_metadata(x, NULL, &md))
        return EXIT_FAIL;
    nbrokers = md.brokers_len > 0 ? md.brokers_len : 0;
    if (nbrokers == 0) {
        fprintf(stderr, "cairnctl: Metadata lists no brokers\n");
        return EXIT_FAIL;
    }
    rs = cn_arena_calloc(&x->arena, (size_t)nbrokers, sizeof *rs);
    states = cn_arena_calloc(&x->arena, (size_t)o->nstates + 1,
                             sizeof *states);
    if (!rs || !states) {
        fprintf(stderr, "cairnctl: out of memory\n");
        return EXIT_FAIL;
    }
    for (int i = 0; i < o->nstates; i++)
        states[i] = cn_bytes_str(o->states[i]);
    cn_list_transactions_request_init(&rq);
    rq.state_filters = states;
    rq.state_filters_len = o->nstates;
    rq.producer_id_filters = o->pids;
    rq.producer_id_filters_len = o->npids;
    /* -1 means no duration filter (v1); v0 has no such field. */
    rq.duration_filter = o->seen & OPT_DURATION ? o->duration_ms : -1;
    for (int32_t b = 0; b < nbrokers; b++) {
        const struct cn_metadata_response_metadata_response_broker *br =
            &md.brokers[b];
        struct cn_kclient *c = cli_conn_to(x, br->host, br->port);
        int16_t v;

        if (!c)
            return EXIT_FAIL;
        v = cli_need_version(c, CN_API_LIST_TRANSACTIONS, "ListTransactions");
        if (v < 0)
            return EXIT_FAIL;
        if ((o->seen & OPT_DURATION) && v < 1) {
            fprintf(stderr,
                    "cairnctl: broker %s:%d supports only ListTransactions "
                    "v0; --duration-ms needs v1\n",
                    c->host, c->port);
            return EXIT_FAIL;
        }
        if (cli_call(c, CN_API_LIST_TRANSACTIONS, v, &rq, &rs[b], &x->arena))
            return EXIT_FAIL;
        if (rs[b].error_code) {
            fprintf(stderr,
                    "cairnctl: cannot list transactions on broker %d: %s\n",
                    br->node_id, cn_kerr_name(rs[b].error_code));
            return EXIT_FAIL;
        }
        /* Every broker reports the same unknown filters; say it once. */
        for (int32_t i = 0; !warned && i < rs[b].unknown_state_filters_len;
             i++)
            fprintf(stderr, "cairnctl: warning: unknown transaction state "
                            "filter '%.*s'\n",
                    (int)(rs[b].unknown_state_filters[i].len > 0
                              ? rs[b].unknown_state_filters[i].len
                              : 0),
                    (const char *)rs[b].unknown_state_filters[i].ptr);
        if (rs[b].unknown_state_filters_len > 0)
            warned = true;
        if (rs[b].transaction_states_len > 0)
            cap += rs[b].transaction_states_len;
    }
    rows = cn_arena_calloc(&x->arena, (size_t)cap + 1, sizeof *rows);
    if (!rows) {
        fprintf(stderr, "cairnctl: out of memory\n");
        return EXIT_FAIL;
    }
    for (int32_t b = 0; b < nbrokers; b++)
        for (int32_t i = 0; i < rs[b].transaction_states_len; i++) {
            rows[nrows].coordinator = md.brokers[b].node_id;
            rows[nrows++].s = &rs[b].transaction_states[i];
        }
    qsort(rows, (size_t)nrows, sizeof *rows, cmp_txn_row);
    if (o->json) {
        putchar('[');
        for (int32_t i = 0; i < nrows; i++) {
            printf("%s{\"transactional_id\":", i ? "," : "");
            cli_json_bytes(stdout, rows[i].s->transactional_id);
            printf(",\"coordinator_id\":%d,\"producer_id\":%lld,"
                   "\"transaction_state\":",
                   rows[i].coordinator, (long long)rows[i].s->producer_id);
            cli_json_bytes(stdout, rows[i].s->transaction_state);
            putchar('}');
        }
        puts("]");
        return 0;
    }
    if (cli_table_init(&t, &x->arena, 4, nrows))
        return EXIT_FAIL;
    cli_table_header(&t, (const char *const[]){
                             "TransactionalId", "Coordinator", "ProducerId",
                             "TransactionState"});
    for (int32_t i = 0; i < nrows; i++) {
        cli_table_row(&t);
        cli_table_set_bytes(&t, 0, rows[i].s->transactional_id);
        cli_table_set(&t, 1, "%d", rows[i].coordinator);
        cli_table_set(&t, 2, "%lld", (long long)rows[i].s->producer_id);
        cli_table_set_bytes(&t, 3, rows[i].s->transaction_state);
    }
    cli_table_print(&t);
    return 0;
}

/* Answers after which a client asks FindCoordinator again and retries, as
 * Kafka's admin client does: the coordinator moved, is loading its
 * partition, or has no leader yet (a cluster electing one). */
static bool coord_retriable(int16_t err)
{
    return err == KAFKA_NOT_COORDINATOR ||
           err == KAFKA_COORDINATOR_LOAD_IN_PROGRESS ||
           err == KAFKA_COORDINATOR_NOT_AVAILABLE;
}

/* One transactional id as its coordinator describes it. */
struct txn_at {
    int32_t node; /* the coordinator's node id, -1 not found */
    int16_t err;  /* KAFKA_NONE: s is the answer */
    bool finding; /* err is FindCoordinator's, with msg */
    struct cn_bytes msg;
    const struct cn_describe_transactions_response_transaction_state *s;
};

/*
 * DescribeTransactions for id at its coordinator, wherever the bootstrap
 * is: FindCoordinator (any broker answers it), then the coordinator;
 * both again every 100 ms, within the admin timeout, while the answer is
 * retriable.  0 with *r filled (r->err set when there is no answer);
 * EXIT_FAIL after printing a transport failure.
 */
static int txn_describe_at(struct ctx *x, const char *id, struct txn_at *r)
{
    int64_t give_up = cn_clock_mono_ms() + cli_admin_timeout(x->o);

    for (;;) {
        struct cn_describe_transactions_request rq;
        struct cn_describe_transactions_response rs;
        struct cn_bytes key = cn_bytes_str(id);
        struct cn_kclient *c = NULL;
        int16_t v;

        memset(r, 0, sizeof *r);
        r->node = -1;
        if (cli_find_coordinator(x, COORDINATOR_TRANSACTION, id, &c, &r->node,
                                 &r->err, &r->msg))
            return EXIT_FAIL;
        r->finding = r->err != KAFKA_NONE;
        if (!r->err) {
            v = cli_need_version(c, CN_API_DESCRIBE_TRANSACTIONS,
                                 "DescribeTransactions");
            if (v < 0)
                return EXIT_FAIL;
            cn_describe_transactions_request_init(&rq);
            rq.transactional_ids = &key;
            rq.transactional_ids_len = 1;
            if (cli_call(c, CN_API_DESCRIBE_TRANSACTIONS, v, &rq, &rs,
                         &x->arena))
                return EXIT_FAIL;
            if (rs.transaction_states_len < 1) {
                fprintf(stderr, "cairnctl: DescribeTransactions response "
                                "has no result\n");
                return EXIT_FAIL;
            }
            r->err = rs.transaction_states[0].error_code;
            if (!r->err) {
                r->s = rs.transaction_states; /* arena memory */
                return 0;
            }
        }
        if (!coord_retriable(r->err) || cn_clock_mono_ms() >= give_up)
            return 0;
        usleep(100000);
    }
}

static void describe_txn_json(
    int32_t node,
    const struct cn_describe_transactions_response_transaction_state *s,
    int64_t now)
{
    bool first = true;

    printf("{\"coordinator_id\":%d,\"transactional_id\":", node);
    cli_json_bytes(stdout, s->transactional_id);
    printf(",\"producer_id\":%lld,\"producer_epoch\":%d,"
           "\"transaction_state\":",
           (long long)s->producer_id, s->producer_epoch);
    cli_json_bytes(stdout, s->transaction_state);
    printf(",\"transaction_timeout_ms\":%d", s->transaction_timeout_ms);
    if (s->transaction_start_time_ms >= 0)
        printf(",\"transaction_start_time_ms\":%lld,"
               "\"transaction_duration_ms\":%lld",
               (long long)s->transaction_start_time_ms,
               (long long)(now - s->transaction_start_time_ms));
    else
        fputs(",\"transaction_start_time_ms\":null,"
              "\"transaction_duration_ms\":null",
              stdout);
    fputs(",\"topic_partitions\":[", stdout);
    for (int32_t i = 0; i < s->topics_len; i++)
        for (int32_t p = 0; p < s->topics[i].partitions_len; p++) {
            fputs(first ? "{\"topic\":" : ",{\"topic\":", stdout);
            cli_json_bytes(stdout, s->topics[i].topic);
            printf(",\"partition\":%d}", s->topics[i].partitions[p]);
            first = false;
        }
    puts("]}");
}

int cmd_txn_describe(struct ctx *x)
{
    const struct opts *o = x->o;
    const struct cn_describe_transactions_response_transaction_state *s;
    struct txn_at at;
    struct table t;
    char tp[1024];
    size_t len = 0;
    int32_t node;
    int64_t now;

    if (txn_describe_at(x, o->txn_id, &at))
        return EXIT_FAIL;
    if (at.err)
        return at.finding ? txn_error(o, "cannot find the coordinator of",
                                      o->txn_id, at.err, at.msg)
                          : txn_error(o, "cannot describe transaction",
                                      o->txn_id, at.err, CN_BYTES_NULL);
    s = at.s;
    node = at.node;
    now = cn_clock_wall_ms();
    if (o->json) {
        describe_txn_json(node, s, now);
        return 0;
    }
    tp[0] = '\0';
    for (int32_t i = 0; i < s->topics_len; i++)
        for (int32_t p = 0; p < s->topics[i].partitions_len; p++) {
            int n = snprintf(tp + len, sizeof tp - len, "%s%.*s-%d",
                             len ? "," : "",
                             (int)(s->topics[i].topic.len > 0
                                       ? s->topics[i].topic.len
                                       : 0),
                             (const char *)s->topics[i].topic.ptr,
                             s->topics[i].partitions[p]);
            /* A huge transaction is cut short rather than overflowing. */
            if (n < 0 || (size_t)n >= sizeof tp - len) {
                tp[len] = '\0';
                break;
            }
            len += (size_t)n;
        }
    if (cli_table_init(&t, &x->arena, 9, 1))
        return EXIT_FAIL;
    cli_table_header(&t, (const char *const[]){
                             "CoordinatorId", "TransactionalId", "ProducerId",
                             "ProducerEpoch", "TransactionState",
                             "TransactionTimeoutMs",
                             "CurrentTransactionStartTimeMs",
                             "TransactionDurationMs", "TopicPartitions"});
    cli_table_row(&t);
    cli_table_set(&t, 0, "%d", node);
    cli_table_set_bytes(&t, 1, s->transactional_id);
    cli_table_set(&t, 2, "%lld", (long long)s->producer_id);
    cli_table_set(&t, 3, "%d", s->producer_epoch);
    cli_table_set_bytes(&t, 4, s->transaction_state);
    cli_table_set(&t, 5, "%d", s->transaction_timeout_ms);
    if (s->transaction_start_time_ms >= 0) {
        cli_table_set(&t, 6, "%lld", (long long)s->transaction_start_time_ms);
        cli_table_set(&t, 7, "%lld",
                  (long long)(now - s->transaction_start_time_ms));
    }
    cli_table_set(&t, 8, "%s", tp);
    cli_table_print(&t);
    return 0;
}

/* Producer state lives with the partition's leader, so ask it. */
int cmd_txn_describe_producers(struct ctx *x)
{
    const struct opts *o = x->o;
    struct cn_metadata_response md;
    struct cn_describe_producers_request rq;
    struct cn_describe_producers_request_topic_request tr;
    struct cn_describe_producers_response rs;
    const struct cn_describe_producers_response_partition_response *pr = NULL;
    const struct cn_metadata_response_metadata_response_topic *mt;
    struct cn_kclient *c = NULL;
    int32_t part = o->partition;
    int32_t leader = -1;
    struct table t;
    int16_t v;

    if (cli_fetch_metadata(x, o->topic, &md))
        return EXIT_FAIL;
    if (md.topics_len < 1)
        return cli_topic_error(o, "cannot describe producers", o->topic,
                           KAFKA_UNKNOWN_TOPIC_OR_PARTITION, CN_BYTES_NULL);
    mt = &md.topics[0];
    if (mt->error_code)
        return cli_topic_error(o, "cannot describe producers", o->topic,
                           mt->error_code, CN_BYTES_NULL);
    for (int32_t i = 0; i < mt->partitions_len; i++)
        if (mt->partitions[i].partition_index == o->partition)
            leader = mt->partitions[i].leader_id;
    if (leader < 0) {
        fprintf(stderr,
                "cairnctl: cannot describe producers: partition %d of "
                "topic '%s' does not exist or has no leader (%s)\n",
                o->partition, o->topic,
                cn_kerr_name(KAFKA_UNKNOWN_TOPIC_OR_PARTITION));
        return EXIT_FAIL;
    }
    for (int32_t i = 0; i < md.brokers_len; i++)
        if (md.brokers[i].node_id == leader)
            c = cli_conn_to(x, md.brokers[i].host, md.brokers[i].port);
    if (!c) {
        fprintf(stderr, "cairnctl: cannot reach leader %d of %s-%d\n", leader,
                o->topic, o->partition);
        return EXIT_FAIL;
    }
    v = cli_need_version(c, CN_API_DESCRIBE_PRODUCERS, "DescribeProducers");
    if (v < 0)
        return EXIT_FAIL;
    cn_describe_producers_request_init(&rq);
    memset(&tr, 0, sizeof tr);
    tr.name = cn_bytes_str(o->topic);
    tr.partition_indexes = &part;
    tr.partition_indexes_len = 1;
    rq.topics = &tr;
    rq.topics_len = 1;
    if (cli_call(c, CN_API_DESCRIBE_PRODUCERS, v, &rq, &rs, &x->arena))
        return EXIT_FAIL;
    for (int32_t i = 0; i < rs.topics_len; i++)
        for (int32_t p = 0; p < rs.topics[i].partitions_len; p++)
            if (rs.topics[i].partitions[p].partition_index == o->partition)
                pr = &rs.topics[i].partitions[p];
    if (!pr) {
        fprintf(stderr, "cairnctl: DescribeProducers response has no "
                        "result\n");
        return EXIT_FAIL;
    }
    if (pr->error_code)
        return cli_topic_error(o, "cannot describe producers of topic", o->topic,
                           pr->error_code, pr->error_message);
    if (o->json) {
        fputs("{\"topic\":", stdout);
        cli_json_str(stdout, o->topic);
        printf(",\"partition\":%d,\"producers\":[", o->partition);
        for (int32_t i = 0; i < pr->active_producers_len; i++) {
            const struct cn_describe_producers_response_producer_state *s =
                &pr->active_producers[i];
            printf("%s{\"producer_id\":%lld,\"producer_epoch\":%d,"
                   "\"latest_coordinator_epoch\":%d,\"last_sequence\":%d,"
                   "\"last_timestamp\":%lld,"
                   "\"current_transaction_start_offset\":%lld}",
                   i ? "," : "", (long long)s->producer_id,
                   s->producer_epoch, s->coordinator_epoch, s->last_sequence,
                   (long long)s->last_timestamp,
                   (long long)s->current_txn_start_offset);
        }
        puts("]}");
        return 0;
    }
    if (cli_table_init(&t, &x->arena, 6,
                   pr->active_producers_len > 0 ? pr->active_producers_len
                                                : 0))
        return EXIT_FAIL;
    cli_table_header(&t, (const char *const[]){
                             "ProducerId", "ProducerEpoch",
                             "LatestCoordinatorEpoch", "LastSequence",
                             "LastTimestamp", "CurrentTransactionStartOffset"});
    for (int32_t i = 0; i < pr->active_producers_len; i++) {
        const struct cn_describe_producers_response_producer_state *s =
            &pr->active_producers[i];
        cli_table_row(&t);
        cli_table_set(&t, 0, "%lld", (long long)s->producer_id);
        cli_table_set(&t, 1, "%d", s->producer_epoch);
        cli_table_set(&t, 2, "%d", s->coordinator_epoch);
        cli_table_set(&t, 3, "%d", s->last_sequence);
        cli_table_set(&t, 4, "%lld", (long long)s->last_timestamp);
        cli_table_set(&t, 5, "%lld", (long long)s->current_txn_start_offset);
    }
    cli_table_print(&t);
    return 0;
}

/* ---- hanging transactions: find-hanging, abort, lso-gap ----------------- */

static int cmp_tp(const void *a, const void *b)
{
    const struct tp *ta = a, *tb = b;
    int c = cli_cmp_bytes(ta->topic, tb->topic);

    return c ? c : (ta->partition > tb->partition) -
                       (ta->partition < tb->partition);
}

/*
 * The partitions named by --topic/--partition or --broker (all when
 * neither), sorted.  An unknown topic or partition is an error; a topic
 * or partition Metadata reports with an error is skipped with a warning.
 */
static int select_partitions(struct ctx *x, struct cn_metadata_response *md,
                             struct tp **out, int32_t *n_out)
{
    const struct opts *o = x->o;
    const char *what = "cannot look at partitions of";
    const char *topic = (o->seen & OPT_TOPIC) ? o->topic : NULL;
    int32_t cap = 0, n = 0;
    struct tp *v;

    if (cli_fetch_metadata(x, topic, md))
        return EXIT_FAIL;
    if (topic && md->topics_len < 1)
        return cli_topic_error(o, what, topic,
                               KAFKA_UNKNOWN_TOPIC_OR_PARTITION,
                               CN_BYTES_NULL);
    if (topic && md->topics[0].error_code)
        return cli_topic_error(o, what, topic, md->topics[0].error_code,
                               CN_BYTES_NULL);
    if ((o->seen & OPT_BROKER)) {
        bool known = false;
        for (int32_t i = 0; i < md->brokers_len; i++)
            known |= md->brokers[i].node_id == o->broker;
        if (!known) {
            fprintf(stderr, "cairnctl: broker %d is not in the cluster\n",
                    o->broker);
            return EXIT_FAIL;
        }
    }
    for (int32_t i = 0; i < md->topics_len; i++)
        if (md->topics[i].partitions_len > 0)
            cap += md->topics[i].partitions_len;
    v = cn_arena_calloc(&x->arena, (size_t)cap + 1, sizeof *v);
    if (!v) {
        fprintf(stderr, "cairnctl: out of memory\n");
        return EXIT_FAIL;
    }
    for (int32_t i = 0; i < md->topics_len; i++) {
        const struct cn_metadata_response_metadata_response_topic *t =
            &md->topics[i];
        if (t->error_code) {
            fprintf(stderr, "cairnctl: warning: skipping topic '%.*s': %s\n",
                    (int)(t->name.len > 0 ? t->name.len : 0),
                    (const char *)t->name.ptr, cn_kerr_name(t->error_code));
            continue;
        }
        for (int32_t j = 0; j < t->partitions_len; j++) {
            const struct cn_metadata_response_metadata_response_partition
                *mp = &t->partitions[j];
            if ((o->seen & OPT_PARTITION) &&
                mp->partition_index != o->partition)
                continue;
            if ((o->seen & OPT_BROKER) && mp->leader_id != o->broker)
                continue;
            v[n].topic = t->name;
            v[n].partition = mp->partition_index;
            v[n].leader = mp->leader_id;
            n++;
        }
    }
    if ((o->seen & OPT_PARTITION) && n == 0) {
        fprintf(stderr,
                "cairnctl: partition %d of topic '%s' does not exist (%s)\n",
                o->partition, o->topic,
                cn_kerr_name(KAFKA_UNKNOWN_TOPIC_OR_PARTITION));
        if (o->json) {
            fputs("{\"topic\":", stdout);
            cli_json_str(stdout, o->topic);
            printf(",\"partition\":%d,\"error\":\"%s\",\"error_code\":%d}\n",
                   o->partition,
                   cn_kerr_name(KAFKA_UNKNOWN_TOPIC_OR_PARTITION),
                   KAFKA_UNKNOWN_TOPIC_OR_PARTITION);
        }
        return EXIT_FAIL;
    }
    qsort(v, (size_t)n, sizeof *v, cmp_tp);
    *out = v;
    *n_out = n;
    return 0;
}

/* DescribeProducers for one partition on its leader. */
static int producers_of(
    struct ctx *x, const struct cn_metadata_response *md, const struct tp *tp,
    const struct cn_describe_producers_response_partition_response **out)
{
    struct cn_describe_producers_request rq;
    struct cn_describe_producers_request_topic_request tr;
    struct cn_describe_producers_response *rs;
    struct cn_kclient *c;
    int32_t part = tp->partition;
    int16_t v;

    *out = NULL;
    if (tp->leader < 0) {
        fprintf(stderr, "cairnctl: %.*s-%d has no leader\n",
                (int)tp->topic.len, (const char *)tp->topic.ptr,
                tp->partition);
        return EXIT_FAIL;
    }
    c = cli_node_conn(x, md, tp->leader);
    if (!c)
        return EXIT_FAIL;
    v = cli_need_version(c, CN_API_DESCRIBE_PRODUCERS, "DescribeProducers");
    if (v < 0)
        return EXIT_FAIL;
    rs = cn_arena_calloc(&x->arena, 1, sizeof *rs);
    if (!rs)
        return EXIT_FAIL;
    cn_describe_producers_request_init(&rq);
    memset(&tr, 0, sizeof tr);
    tr.name = tp->topic;
    tr.partition_indexes = &part;
    tr.partition_indexes_len = 1;
    rq.topics = &tr;
    rq.topics_len = 1;
    if (cli_call(c, CN_API_DESCRIBE_PRODUCERS, v, &rq, rs, &x->arena))
        return EXIT_FAIL;
    for (int32_t i = 0; i < rs->topics_len; i++)
        for (int32_t p = 0; p < rs->topics[i].partitions_len; p++)
            if (rs->topics[i].partitions[p].partition_index == part)
                *out = &rs->topics[i].partitions[p];
    if (!*out) {
        fprintf(stderr, "cairnctl: DescribeProducers response has no "
                        "result\n");
        return EXIT_FAIL;
    }
    if ((*out)->error_code) {
        fprintf(stderr,
                "cairnctl: cannot describe producers of %.*s-%d at "
                "its leader %d: %s\n",
                (int)tp->topic.len, (const char *)tp->topic.ptr, tp->partition,
                tp->leader, cn_kerr_name((*out)->error_code));
        return EXIT_FAIL;
    }
    return 0;
}

/* What the coordinators say about one producer id. */
struct pid_coord {
    bool known;              /* some coordinator lists the producer id */
    char txn_id[256];        /* its transactional id, "" when unknown */
    int32_t coordinator;     /* node id of that coordinator */
    char state[32];          /* DescribeTransactions state */
    int16_t epoch;           /* coordinator's producer epoch */
    int64_t start_ms;        /* coordinator's transaction start, -1 */
    int32_t timeout_ms;      /* transaction timeout */
    bool has_partition;      /* the partition is in its transaction */
};

static void copy_bytes(char *out, size_t len, struct cn_bytes b)
{
    size_t n = b.len > 0 ? (size_t)b.len : 0;

    if (n >= len)
        n = len - 1;
    if (n)
        memcpy(out, b.ptr, n);
    out[n] = '\0';
}

/*
 * ListTransactions filtered by producer id on every broker (each lists
 * the ids it coordinates), then DescribeTransactions at the id's
 * coordinator (txn_describe_at).  A producer id no coordinator lists is
 * not an error: it is what an idempotent producer, or an expired
 * transactional id, looks like.
 */
static int pid_lookup(struct ctx *x, const struct cn_metadata_response *md,
                      int64_t pid, struct cn_bytes topic, int32_t partition,
                      struct pid_coord *pc)
{
    struct cn_list_transactions_request rq;
    struct txn_at at;
    int64_t filter = pid;

    memset(pc, 0, sizeof *pc);
    pc->start_ms = -1;
    pc->coordinator = -1;
    cn_list_transactions_request_init(&rq);
    rq.producer_id_filters = &filter;
    rq.producer_id_filters_len = 1;
    rq.duration_filter = -1;
    for (int32_t b = 0; b < md->brokers_len && !pc->known; b++) {
        struct cn_list_transactions_response rs;
        struct cn_kclient *c = cli_conn_to(x, md->brokers[b].host,
                                           md->brokers[b].port);
        int16_t v;

        if (!c)
            return EXIT_FAIL;
        v = cli_need_version(c, CN_API_LIST_TRANSACTIONS, "ListTransactions");
        if (v < 0)
            return EXIT_FAIL;
        if (cli_call(c, CN_API_LIST_TRANSACTIONS, v, &rq, &rs, &x->arena))
            return EXIT_FAIL;
        for (int32_t i = 0; i < rs.transaction_states_len; i++)
            if (rs.transaction_states[i].producer_id == pid) {
                pc->known = true;
                pc->coordinator = md->brokers[b].node_id;
                copy_bytes(pc->txn_id, sizeof pc->txn_id,
                           rs.transaction_states[i].transactional_id);
                copy_bytes(pc->state, sizeof pc->state,
                           rs.transaction_states[i].transaction_state);
            }
    }
    if (!pc->known)
        return 0;
    if (txn_describe_at(x, pc->txn_id, &at))
        return EXIT_FAIL;
    if (at.err)
        return 0; /* gone or moved meanwhile: keep what the list said */
    const struct cn_describe_transactions_response_transaction_state *s = at.s;
    pc->coordinator = at.node;
    copy_bytes(pc->state, sizeof pc->state, s->transaction_state);
    pc->epoch = s->producer_epoch;
    pc->start_ms = s->transaction_start_time_ms;
    pc->timeout_ms = s->transaction_timeout_ms;
    /* The id may have a new producer id by now; its transaction is then
     * not this producer's. */
    if (s->producer_id != pid)
        return 0;
    for (int32_t i = 0; i < s->topics_len; i++)
        if (cli_cmp_bytes(s->topics[i].topic, topic) == 0)
            for (int32_t p = 0; p < s->topics[i].partitions_len; p++)
                pc->has_partition |= s->topics[i].partitions[p] == partition;
    return 0;
}

/* States in which the coordinator will still write this transaction's
 * markers. */
static bool coord_live(const char *state)
{
    return strcmp(state, "Ongoing") == 0 ||
           strcmp(state, "PrepareCommit") == 0 ||
           strcmp(state, "PrepareAbort") == 0 ||
           strcmp(state, "PrepareEpochFence") == 0;
}

struct hang_row {
    const struct tp *tp;
    const struct cn_describe_producers_response_producer_state *s;
    struct pid_coord pc;
    int64_t age_ms;          /* since the producer's last write here */
    char reason[160];
};

static void print_hang_json(const struct hang_row *r, bool first)
{
    printf("%s{\"topic\":", first ? "" : ",");
    cli_json_bytes(stdout, r->tp->topic);
    printf(",\"partition\":%d,\"producer_id\":%lld,\"producer_epoch\":%d,"
           "\"coordinator_epoch\":%d,\"start_offset\":%lld,"
           "\"last_timestamp\":%lld,\"age_ms\":%lld,\"transactional_id\":",
           r->tp->partition, (long long)r->s->producer_id,
           r->s->producer_epoch, r->s->coordinator_epoch,
           (long long)r->s->current_txn_start_offset,
           (long long)r->s->last_timestamp, (long long)r->age_ms);
    if (r->pc.known)
        cli_json_str(stdout, r->pc.txn_id);
    else
        fputs("null", stdout);
    fputs(",\"coordinator_state\":", stdout);
    if (r->pc.known)
        cli_json_str(stdout, r->pc.state);
    else
        fputs("null", stdout);
    fputs(",\"reason\":", stdout);
    cli_json_str(stdout, r->reason);
    putchar('}');
}

/*
 * KIP-664's find-hanging: an open transaction (DescribeProducers
 * current_txn_start_offset >= 0) whose producer last wrote to the
 * partition longer ago than the maximum transaction timeout cannot belong
 * to a live transaction unless a coordinator still holds it (Ongoing or
 * deciding) with this partition; otherwise nobody will ever write its
 * marker.
 */
int cmd_txn_find_hanging(struct ctx *x)
{
    const struct opts *o = x->o;
    struct cn_metadata_response md;
    struct hang_row *rows = NULL;
    int32_t nparts = 0, nrows = 0, cap = 0;
    int64_t now;
    struct tp *parts;
    struct table t;
    int rc;

    rc = select_partitions(x, &md, &parts, &nparts);
    if (rc)
        return rc;
    now = cn_clock_wall_ms();
    for (int32_t i = 0; i < nparts; i++) {
        const struct cn_describe_producers_response_partition_response *pr;

        rc = producers_of(x, &md, &parts[i], &pr);
        if (rc)
            return rc;
        for (int32_t k = 0; k < pr->active_producers_len; k++) {
            const struct cn_describe_producers_response_producer_state *s =
                &pr->active_producers[k];
            struct hang_row *r;

            if (s->current_txn_start_offset < 0 ||
                now - s->last_timestamp <= o->max_txn_timeout_ms)
                continue;
            if (nrows == cap) {
                int32_t ncap = cap ? cap * 2 : 8;
                struct hang_row *nr = cn_arena_calloc(
                    &x->arena, (size_t)ncap, sizeof *nr);
                if (!nr) {
                    fprintf(stderr, "cairnctl: out of memory\n");
                    return EXIT_FAIL;
                }
                if (nrows)
                    memcpy(nr, rows, (size_t)nrows * sizeof *nr);
                rows = nr;
                cap = ncap;
            }
            r = &rows[nrows];
            memset(r, 0, sizeof *r);
            r->tp = &parts[i];
            r->s = s;
            r->age_ms = now - s->last_timestamp;
            rc = pid_lookup(x, &md, s->producer_id, parts[i].topic,
                            parts[i].partition, &r->pc);
            if (rc)
                return rc;
            if (!r->pc.known)
                snprintf(r->reason, sizeof r->reason,
                         "no coordinator knows producer id %lld",
                         (long long)s->producer_id);
            else if (!coord_live(r->pc.state))
                snprintf(r->reason, sizeof r->reason,
                         "coordinator has the transactional id %s",
                         r->pc.state);
            else if (!r->pc.has_partition)
                snprintf(r->reason, sizeof r->reason,
                         "coordinator's %s transaction does not include "
                         "this partition",
                         r->pc.state);
            else
                continue; /* the coordinator will write its marker */
            nrows++;
        }
    }
    if (o->json) {
        printf("{\"max_transaction_timeout_ms\":%lld,"
               "\"partitions_checked\":%d,\"hanging\":[",
               (long long)o->max_txn_timeout_ms, nparts);
        for (int32_t i = 0; i < nrows; i++)
            print_hang_json(&rows[i], i == 0);
        puts("]}");
        return 0;
    }
    if (nrows == 0) {
        printf("no hanging transactions (%d partitions checked)\n", nparts);
        return 0;
    }
    if (cli_table_init(&t, &x->arena, 10, nrows))
        return EXIT_FAIL;
    cli_table_header(&t, (const char *const[]){
                             "Topic", "Partition", "ProducerId",
                             "ProducerEpoch", "CoordinatorEpoch",
                             "StartOffset", "TransactionalId", "AgeMs",
                             "CoordinatorState", "Reason"});
    for (int32_t i = 0; i < nrows; i++) {
        const struct hang_row *r = &rows[i];
        cli_table_row(&t);
        cli_table_set_bytes(&t, 0, r->tp->topic);
        cli_table_set(&t, 1, "%d", r->tp->partition);
        cli_table_set(&t, 2, "%lld", (long long)r->s->producer_id);
        cli_table_set(&t, 3, "%d", r->s->producer_epoch);
        cli_table_set(&t, 4, "%d", r->s->coordinator_epoch);
        cli_table_set(&t, 5, "%lld",
                      (long long)r->s->current_txn_start_offset);
        cli_table_set(&t, 6, "%s", r->pc.known ? r->pc.txn_id : "-");
        cli_table_set(&t, 7, "%lld", (long long)r->age_ms);
        cli_table_set(&t, 8, "%s", r->pc.known ? r->pc.state : "-");
        cli_table_set(&t, 9, "%s", r->reason);
    }
    cli_table_print(&t);
    return 0;
}

static int abort_error(const struct opts *o, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Says why txn abort did nothing; stderr, and a JSON error with --json. */
static int abort_error(const struct opts *o, const char *fmt, ...)
{
    char msg[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "cairnctl: cannot abort: %s\n", msg);
    if (o->json) {
        fputs("{\"topic\":", stdout);
        cli_json_str(stdout, o->topic);
        printf(",\"partition\":%d,\"aborted\":false,\"error\":", o->partition);
        cli_json_str(stdout, msg);
        puts("}");
    }
    return EXIT_FAIL;
}

/*
 * KIP-664's abort: WriteTxnMarkers (abort) to the partition's leader for
 * the producer whose open transaction starts at --start-offset, or for
 * the producer id and epoch given.  The partition's producer state is
 * read first so a typo cannot write a marker for the wrong producer.
 */
int cmd_txn_abort(struct ctx *x)
{
    const struct opts *o = x->o;
    struct cn_metadata_response md;
    const struct cn_describe_producers_response_partition_response *pr;
    const struct cn_describe_producers_response_producer_state *s = NULL;
    struct cn_write_txn_markers_request rq;
    struct cn_write_txn_markers_request_writable_txn_marker m;
    struct cn_write_txn_markers_request_writable_txn_marker_topic mt;
    struct cn_write_txn_markers_response rs;
    int32_t part = o->partition, coord_epoch;
    int16_t epoch, v, err = KAFKA_NONE;
    struct pid_coord pc;
    struct cn_kclient *c;
    struct tp *parts;
    int32_t nparts;
    int rc;

    rc = select_partitions(x, &md, &parts, &nparts);
    if (rc)
        return rc;
    rc = producers_of(x, &md, &parts[0], &pr);
    if (rc)
        return rc;
    for (int32_t i = 0; i < pr->active_producers_len; i++) {
        const struct cn_describe_producers_response_producer_state *ps =
            &pr->active_producers[i];
        if ((o->seen & OPT_START_OFFSET) &&
            ps->current_txn_start_offset == o->start_offset)
            s = ps;
        if ((o->seen & OPT_PRODUCER_ID) && ps->producer_id == o->pids[0])
            s = ps;
    }
    if (!s && (o->seen & OPT_START_OFFSET))
        return abort_error(o,
                           "no open transaction starts at offset %lld of "
                           "%s-%d (see 'cairnctl txn describe-producers')",
                           (long long)o->start_offset, o->topic, o->partition);
    if (!s)
        return abort_error(o, "producer id %lld has no state on %s-%d",
                           (long long)o->pids[0], o->topic, o->partition);
    if (s->current_txn_start_offset < 0)
        return abort_error(o,
                           "producer id %lld has no open transaction on "
                           "%s-%d",
                           (long long)s->producer_id, o->topic, o->partition);
    epoch = (o->seen & OPT_PRODUCER_EPOCH) ? (int16_t)o->producer_epoch
                                           : (int16_t)s->producer_epoch;
    coord_epoch = (o->seen & OPT_COORD_EPOCH) ? o->coordinator_epoch
                                              : s->coordinator_epoch;
    /* Said before acting, for the incident record (the runbook asks). */
    rc = pid_lookup(x, &md, s->producer_id, parts[0].topic, part, &pc);
    if (rc)
        return rc;
    /*
     * A leader hands the abort to its own coordinator when that one holds
     * the transaction (it then aborts all of it).  Another broker's
     * coordinator is not asked: a marker here would end this partition's
     * part alone while that coordinator may still commit the rest.  Such
     * a transaction is not hanging; its coordinator will end it.
     */
    if (pc.known && coord_live(pc.state) && pc.has_partition &&
        pc.coordinator != parts[0].leader)
        return abort_error(o,
                           "transactional id '%s' (producer id %lld) is %s "
                           "with %s-%d at its coordinator, broker %d, which "
                           "will write its marker; an abort marker from "
                           "the leader, broker %d, would split the "
                           "transaction",
                           pc.txn_id, (long long)s->producer_id, pc.state,
                           o->topic, o->partition, pc.coordinator,
                           parts[0].leader);
    c = cli_node_conn(x, &md, parts[0].leader);
    if (!c)
        return EXIT_FAIL;
    v = cli_need_version(c, CN_API_WRITE_TXN_MARKERS, "WriteTxnMarkers");
    if (v < 0)
        return EXIT_FAIL;
    cn_write_txn_markers_request_init(&rq);
    cn_write_txn_markers_request_writable_txn_marker_init(&m);
    cn_write_txn_markers_request_writable_txn_marker_topic_init(&mt);
    mt.name = parts[0].topic;
    mt.partition_indexes = &part;
    mt.partition_indexes_len = 1;
    m.producer_id = s->producer_id;
    m.producer_epoch = epoch;
    m.transaction_result = false;
    m.topics = &mt;
    m.topics_len = 1;
    m.coordinator_epoch = coord_epoch;
    rq.markers = &m;
    rq.markers_len = 1;
    if (cli_call(c, CN_API_WRITE_TXN_MARKERS, v, &rq, &rs, &x->arena))
        return EXIT_FAIL;
    if (rs.markers_len < 1 || rs.markers[0].topics_len < 1 ||
        rs.markers[0].topics[0].partitions_len < 1) {
        fprintf(stderr, "cairnctl: WriteTxnMarkers response has no result\n");
        return EXIT_FAIL;
    }
    err = rs.markers[0].topics[0].partitions[0].error_code;
    if (err)
        return abort_error(o,
                           "the leader refused the abort marker for producer "
                           "id %lld epoch %d on %s-%d: %s",
                           (long long)s->producer_id, epoch, o->topic,
                           o->partition, cn_kerr_name(err));
    if (o->json) {
        fputs("{\"topic\":", stdout);
        cli_json_str(stdout, o->topic);
        printf(",\"partition\":%d,\"aborted\":true,\"producer_id\":%lld,"
               "\"producer_epoch\":%d,\"coordinator_epoch\":%d,"
               "\"start_offset\":%lld,\"transactional_id\":",
               o->partition, (long long)s->producer_id, epoch, coord_epoch,
               (long long)s->current_txn_start_offset);
        if (pc.known)
            cli_json_str(stdout, pc.txn_id);
        else
            fputs("null", stdout);
        fputs(",\"coordinator_state\":", stdout);
        if (pc.known)
            cli_json_str(stdout, pc.state);
        else
            fputs("null", stdout);
        puts("}");
        return 0;
    }
    printf("aborted the open transaction of producer id %lld (epoch %d, "
           "coordinator epoch %d) on %s-%d starting at offset %lld",
           (long long)s->producer_id, epoch, coord_epoch, o->topic,
           o->partition, (long long)s->current_txn_start_offset);
    if (pc.known)
        printf("; transactional id '%s' was %s at its coordinator%s",
               pc.txn_id, pc.state,
               coord_live(pc.state) && pc.has_partition
                   ? ", which aborts its whole transaction"
                   : "");
    else
        fputs("; no coordinator knew the producer id", stdout);
    putchar('\n');
    return 0;
}

struct gap_row {
    const struct tp *tp;
    int64_t hw, lso;
    const struct cn_describe_producers_response_producer_state *holder;
    struct pid_coord pc;
    int64_t age_ms;
};

/*
 * Per partition: high watermark (read_uncommitted latest), last stable
 * offset (read_committed latest), their gap, and the open transaction
 * holding the LSO (the one starting exactly there).
 */
int cmd_lso_gap(struct ctx *x)
{
    const struct opts *o = x->o;
    struct cn_metadata_response md;
    struct gap_row *rows;
    struct tp *parts;
    int32_t nparts;
    struct table t;
    int64_t now;
    int rc;

    rc = select_partitions(x, &md, &parts, &nparts);
    if (rc)
        return rc;
    rows = cn_arena_calloc(&x->arena, (size_t)nparts + 1, sizeof *rows);
    if (!rows)
        return EXIT_FAIL;
    now = cn_clock_wall_ms();
    for (int32_t i = 0; i < nparts; i++) {
        struct gap_row *r = &rows[i];
        struct cn_kclient *c;

        r->tp = &parts[i];
        if (parts[i].leader < 0) {
            fprintf(stderr, "cairnctl: %.*s-%d has no leader\n",
                    (int)parts[i].topic.len,
                    (const char *)parts[i].topic.ptr, parts[i].partition);
            return EXIT_FAIL;
        }
        c = cli_node_conn(x, &md, parts[i].leader);
        if (!c)
            return EXIT_FAIL;
        if (cli_list_offset(c, x, &parts[i], 0, -1, &r->hw) ||
            cli_list_offset(c, x, &parts[i], 1, -1, &r->lso))
            return EXIT_FAIL;
        if (r->lso >= r->hw)
            continue;
        const struct cn_describe_producers_response_partition_response *pr;
        rc = producers_of(x, &md, &parts[i], &pr);
        if (rc)
            return rc;
        for (int32_t k = 0; k < pr->active_producers_len; k++)
            if (pr->active_producers[k].current_txn_start_offset == r->lso)
                r->holder = &pr->active_producers[k];
        if (!r->holder)
            continue;
        r->age_ms = now - r->holder->last_timestamp;
        rc = pid_lookup(x, &md, r->holder->producer_id, parts[i].topic,
                        parts[i].partition, &r->pc);
        if (rc)
            return rc;
    }
    if (o->json) {
        putchar('[');
        for (int32_t i = 0; i < nparts; i++) {
            const struct gap_row *r = &rows[i];
            printf("%s{\"topic\":", i ? "," : "");
            cli_json_bytes(stdout, r->tp->topic);
            printf(",\"partition\":%d,\"high_watermark\":%lld,"
                   "\"last_stable_offset\":%lld,\"gap\":%lld,\"holder\":",
                   r->tp->partition, (long long)r->hw, (long long)r->lso,
                   (long long)(r->hw - r->lso));
            if (!r->holder) {
                fputs("null}", stdout);
                continue;
            }
            printf("{\"producer_id\":%lld,\"producer_epoch\":%d,"
                   "\"start_offset\":%lld,\"age_ms\":%lld,"
                   "\"transactional_id\":",
                   (long long)r->holder->producer_id,
                   r->holder->producer_epoch,
                   (long long)r->holder->current_txn_start_offset,
                   (long long)r->age_ms);
            if (r->pc.known)
                cli_json_str(stdout, r->pc.txn_id);
            else
                fputs("null", stdout);
            fputs(",\"coordinator_state\":", stdout);
            if (r->pc.known)
                cli_json_str(stdout, r->pc.state);
            else
                fputs("null", stdout);
            fputs("}}", stdout);
        }
        puts("]");
        return 0;
    }
    if (cli_table_init(&t, &x->arena, 10, nparts))
        return EXIT_FAIL;
    cli_table_header(&t, (const char *const[]){
                             "Topic", "Partition", "HighWatermark",
                             "LastStableOffset", "Gap", "HolderProducerId",
                             "HolderStartOffset", "HolderTransactionalId",
                             "HolderAgeMs", "HolderCoordinatorState"});
    for (int32_t i = 0; i < nparts; i++) {
        const struct gap_row *r = &rows[i];
        cli_table_row(&t);
        cli_table_set_bytes(&t, 0, r->tp->topic);
        cli_table_set(&t, 1, "%d", r->tp->partition);
        cli_table_set(&t, 2, "%lld", (long long)r->hw);
        cli_table_set(&t, 3, "%lld", (long long)r->lso);
        cli_table_set(&t, 4, "%lld", (long long)(r->hw - r->lso));
        if (!r->holder)
            continue;
        cli_table_set(&t, 5, "%lld", (long long)r->holder->producer_id);
        cli_table_set(&t, 6, "%lld",
                      (long long)r->holder->current_txn_start_offset);
        cli_table_set(&t, 7, "%s", r->pc.known ? r->pc.txn_id : "-");
        cli_table_set(&t, 8, "%lld", (long long)r->age_ms);
        cli_table_set(&t, 9, "%s", r->pc.known ? r->pc.state : "-");
    }
    cli_table_print(&t);
    return 0;
}
