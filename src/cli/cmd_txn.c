/*
 * cmd_txn.c - cairnctl txn list|describe|describe-producers, modelled on
 * kafka-transactions.sh (KIP-664).
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
        v = cli_need_version(c, API_LIST_TRANSACTIONS, "ListTransactions");
        if (v < 0)
            return EXIT_FAIL;
        if ((o->seen & OPT_DURATION) && v < 1) {
            fprintf(stderr,
                    "cairnctl: broker %s:%d supports only ListTransactions "
                    "v0; --duration-ms needs v1\n",
                    c->host, c->port);
            return EXIT_FAIL;
        }
        if (cli_call(c, API_LIST_TRANSACTIONS, v, &rq, &rs[b], &x->arena))
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
    cli_table_row(&t);
    cli_table_set(&t, 0, "TransactionalId");
    cli_table_set(&t, 1, "Coordinator");
    cli_table_set(&t, 2, "ProducerId");
    cli_table_set(&t, 3, "TransactionState");
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

/* The transaction coordinator for id: its connection and node id. */
static int find_txn_coordinator(struct ctx *x, const char *id,
                                struct cn_kclient **out, int32_t *node)
{
    struct cn_find_coordinator_request rq;
    struct cn_find_coordinator_response rs;
    struct cn_bytes key = cn_bytes_str(id);
    struct cn_bytes host, msg;
    int32_t port;
    int16_t err;
    int16_t v = cli_need_version(&x->boot, API_FIND_COORDINATOR,
                             "FindCoordinator");

    if (v < 0)
        return EXIT_FAIL;
    cn_find_coordinator_request_init(&rq);
    /* v4+ batches keys (KIP-699); older versions take one key. */
    rq.key = key;
    rq.key_type = COORDINATOR_TRANSACTION;
    rq.coordinator_keys = &key;
    rq.coordinator_keys_len = 1;
    if (cli_call(&x->boot, API_FIND_COORDINATOR, v, &rq, &rs, &x->arena))
        return EXIT_FAIL;
    if (v >= 4) {
        if (rs.coordinators_len < 1) {
            fprintf(stderr, "cairnctl: FindCoordinator response has no "
                            "result\n");
            return EXIT_FAIL;
        }
        err = rs.coordinators[0].error_code;
        msg = rs.coordinators[0].error_message;
        *node = rs.coordinators[0].node_id;
        host = rs.coordinators[0].host;
        port = rs.coordinators[0].port;
    } else {
        err = rs.error_code;
        msg = rs.error_message;
        *node = rs.node_id;
        host = rs.host;
        port = rs.port;
    }
    if (err)
        return txn_error(x->o, "cannot find the coordinator of", id, err, msg);
    *out = cli_conn_to(x, host, port);
    return *out ? 0 : EXIT_FAIL;
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
    struct cn_describe_transactions_request rq;
    struct cn_describe_transactions_response rs;
    const struct cn_describe_transactions_response_transaction_state *s;
    struct cn_bytes id = cn_bytes_str(o->txn_id);
    struct cn_kclient *c = NULL;
    struct table t;
    char tp[1024];
    size_t len = 0;
    int32_t node;
    int64_t now;
    int16_t v;
    int rc;

    rc = find_txn_coordinator(x, o->txn_id, &c, &node);
    if (rc)
        return rc;
    v = cli_need_version(c, API_DESCRIBE_TRANSACTIONS, "DescribeTransactions");
    if (v < 0)
        return EXIT_FAIL;
    cn_describe_transactions_request_init(&rq);
    rq.transactional_ids = &id;
    rq.transactional_ids_len = 1;
    if (cli_call(c, API_DESCRIBE_TRANSACTIONS, v, &rq, &rs, &x->arena))
        return EXIT_FAIL;
    if (rs.transaction_states_len < 1) {
        fprintf(stderr, "cairnctl: DescribeTransactions response has no "
                        "result\n");
        return EXIT_FAIL;
    }
    s = &rs.transaction_states[0];
    if (s->error_code)
        return txn_error(o, "cannot describe transaction", o->txn_id,
                         s->error_code, CN_BYTES_NULL);
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
    cli_table_row(&t);
    cli_table_set(&t, 0, "CoordinatorId");
    cli_table_set(&t, 1, "TransactionalId");
    cli_table_set(&t, 2, "ProducerId");
    cli_table_set(&t, 3, "ProducerEpoch");
    cli_table_set(&t, 4, "TransactionState");
    cli_table_set(&t, 5, "TransactionTimeoutMs");
    cli_table_set(&t, 6, "CurrentTransactionStartTimeMs");
    cli_table_set(&t, 7, "TransactionDurationMs");
    cli_table_set(&t, 8, "TopicPartitions");
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
    v = cli_need_version(c, API_DESCRIBE_PRODUCERS, "DescribeProducers");
    if (v < 0)
        return EXIT_FAIL;
    cn_describe_producers_request_init(&rq);
    memset(&tr, 0, sizeof tr);
    tr.name = cn_bytes_str(o->topic);
    tr.partition_indexes = &part;
    tr.partition_indexes_len = 1;
    rq.topics = &tr;
    rq.topics_len = 1;
    if (cli_call(c, API_DESCRIBE_PRODUCERS, v, &rq, &rs, &x->arena))
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
    cli_table_row(&t);
    cli_table_set(&t, 0, "ProducerId");
    cli_table_set(&t, 1, "ProducerEpoch");
    cli_table_set(&t, 2, "LatestCoordinatorEpoch");
    cli_table_set(&t, 3, "LastSequence");
    cli_table_set(&t, 4, "LastTimestamp");
    cli_table_set(&t, 5, "CurrentTransactionStartOffset");
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
