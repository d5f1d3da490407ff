/*
 * txn_verify.c - what partition leaders ask of the coordinator (KIP-890):
 * AddPartitionsToTxn v4-5 (batched, VerifyOnly), the TV2 add on the
 * produce path, and cn_txn_coord_verify.  Cairn is its own partition
 * leader, so these arrive as local calls as well as requests; keeping
 * them apart from the client APIs keeps the broker-to-broker rules (which
 * error codes, when an add is implicit) in one place.
 */
#include <string.h>

#include "base/clock.h"
#include "proto/gen/msgs.h"
#include "proto/kerr.h"
#include "txn/txn_state.h"
#include "txn_coord.h"
#include "txn_int.h"

/*
 * Builds in *next e's metadata with the partitions added, opening a
 * transaction if none is (Kafka's coordinator for AddPartitionsToTxn and,
 * with TV2, the partition leader's implicit add).  *changed says whether
 * anything differs.  0 or CN_ENOMEM.
 */
static int build_add(const struct txn_entry *e, const char *const *topics,
                     const int32_t *parts, size_t n, struct cn_txn_meta *next,
                     bool *changed)
{
    cn_txn_meta_init(next);
    int rc = cn_txn_meta_copy(next, &e->meta);
    bool open = e->meta.state == CN_TXN_ONGOING;
    *changed = !open;
    if (!rc && !open)
        cn_txn_meta_clear_partitions(next);
    for (size_t i = 0; i < n && !rc; i++)
        if (!cn_txn_meta_has_partition(next, topics[i], parts[i])) {
            *changed = true;
            rc = cn_txn_meta_add_partition(next, topics[i], parts[i]);
        }
    if (rc) {
        cn_txn_meta_fini(next);
        return rc;
    }
    int64_t now = cn_clock_wall_ms();
    if (!open)
        next->txn_start_ms = now;
    next->state = CN_TXN_ONGOING;
    next->last_update_ms = now;
    return 0;
}

/* ---- AddPartitionsToTxn v4-5: batched, from a partition leader --------- */

struct add_batch {
    struct cn_add_partitions_to_txn_response rs;
    struct cn_req_header h;
    int pending;                /* adds in flight, plus one while starting */
};

typedef struct cn_add_partitions_to_txn_response_add_partitions_to_txn_result
    add_result;
typedef struct
    cn_add_partitions_to_txn_response_add_partitions_to_txn_topic_result
        add_topic_result;
typedef struct
    cn_add_partitions_to_txn_request_add_partitions_to_txn_transaction
        add_txn_request;

static void result_set(add_result *r, int16_t err, bool keep_set)
{
    for (int32_t i = 0; i < r->topic_results_len; i++) {
        add_topic_result *tr = &r->topic_results[i];
        for (int32_t j = 0; j < tr->results_by_partition_len; j++)
            if (!keep_set || !tr->results_by_partition[j].partition_error_code)
                tr->results_by_partition[j].partition_error_code = err;
    }
}

static void batch_unref(struct add_batch *ab, struct cn_req *req)
{
    if (--ab->pending > 0)
        return;
    txn_answer_add(req, &ab->h, &ab->rs);
}

static void batch_add_written(struct txn_write *w, int16_t err)
{
    struct add_batch *ab = w->req->handler_state;
    w->e->busy = false;
    result_set(&ab->rs.results_by_transaction[w->index], err, false);
    batch_unref(ab, w->req);
}

/* One transaction of the batch: verified, added (the write answers
 * later), or refused. */
static void add_batched_one(
    struct cn_broker *b, struct cn_req *req, const struct cn_req_header *h,
    struct add_batch *ab, int32_t index, const add_txn_request *qt)
{
    add_result *r = &ab->rs.results_by_transaction[index];
    char id[1024];
    struct txn_entry *e = cn_wire_cstr(qt->transactional_id, id, sizeof id)
                              ? txn_entry_find(b->txn, id)
                              : NULL;
    int16_t kerr = KAFKA_NONE;
    if (!e || e->meta.state == CN_TXN_DEAD ||
        e->meta.producer_id != qt->producer_id)
        kerr = KAFKA_INVALID_PRODUCER_ID_MAPPING;
    else if (e->meta.producer_epoch != qt->producer_epoch)
        kerr = KAFKA_PRODUCER_FENCED;
    else if (e->busy || e->meta.state == CN_TXN_PREPARE_COMMIT ||
             e->meta.state == CN_TXN_PREPARE_ABORT ||
             e->meta.state == CN_TXN_PREPARE_EPOCH_FENCE)
        kerr = KAFKA_CONCURRENT_TRANSACTIONS;
    if (kerr) {
        result_set(r, kerr, false);
        return;
    }
    size_t n = 0;
    for (int32_t i = 0; i < r->topic_results_len; i++)
        n += (size_t)r->topic_results[i].results_by_partition_len;
    const char **topics = cn_arena_calloc(&req->arena, n + 1, sizeof *topics);
    int32_t *parts = cn_arena_calloc(&req->arena, n + 1, sizeof *parts);
    if (!topics || !parts) {
        result_set(r, KAFKA_COORDINATOR_NOT_AVAILABLE, false);
        return;
    }
    bool unknown = false;
    n = 0;
    for (int32_t i = 0; i < r->topic_results_len; i++) {
        add_topic_result *tr = &r->topic_results[i];
        char topic[CN_TOPIC_NAME_MAX + 1];
        bool named = cn_wire_cstr(tr->name, topic, sizeof topic);
        for (int32_t j = 0; j < tr->results_by_partition_len; j++) {
            int32_t part = tr->results_by_partition[j].partition_index;
            bool known = named && !cn_bytes_eq_str(tr->name, CN_TXN_TOPIC) &&
                         cn_partition_find(b, tr->name, part);
            if (qt->verify_only) {
                /* Kafka: in the Ongoing transaction, or not. */
                bool in = named && e->meta.state == CN_TXN_ONGOING &&
                          cn_txn_meta_has_partition(&e->meta, topic, part);
                tr->results_by_partition[j].partition_error_code =
                    in ? KAFKA_NONE : KAFKA_INVALID_TXN_STATE;
                continue;
            }
            if (!known) {
                tr->results_by_partition[j].partition_error_code =
                    KAFKA_UNKNOWN_TOPIC_OR_PARTITION;
                unknown = true;
                continue;
            }
            topics[n] = cn_arena_strdup(&req->arena, cn_bytes_str(topic));
            parts[n++] = part;
        }
    }
    if (qt->verify_only)
        return;
    if (unknown) {
        result_set(r, KAFKA_OPERATION_NOT_ATTEMPTED, true);
        return;
    }
    struct cn_txn_meta next;
    bool changed = false;
    if (build_add(e, topics, parts, n, &next, &changed) != 0) {
        result_set(r, KAFKA_COORDINATOR_NOT_AVAILABLE, false);
        return;
    }
    if (!changed) {
        cn_txn_meta_fini(&next);
        return;
    }
    /* v5 is what a broker sends for a TV2 client's produce. */
    if (h->api_version >= 5)
        next.client_tv = 2;
    ab->pending++;
    struct txn_write x = {.index = index};
    txn_write_change_x(b, e, &next, batch_add_written, req, h, false, &x);
}

void txn_add_batched(struct cn_broker *b, struct cn_req *req,
                     const struct cn_req_header *h,
                     const struct cn_add_partitions_to_txn_request *rq)
{
    struct add_batch *ab = cn_arena_calloc(&req->arena, 1, sizeof *ab);
    int32_t nt = rq->transactions_len > 0 ? rq->transactions_len : 0;
    if (!ab)
        goto nomem;
    req->handler_state = ab;
    ab->h = *h;
    ab->pending = 1;
    cn_add_partitions_to_txn_response_init(&ab->rs);
    ab->rs.results_by_transaction = cn_arena_calloc(
        &req->arena, (size_t)nt + 1, sizeof *ab->rs.results_by_transaction);
    if (!ab->rs.results_by_transaction)
        goto nomem;
    ab->rs.results_by_transaction_len = nt;
    for (int32_t i = 0; i < nt; i++) {
        const add_txn_request *qt = &rq->transactions[i];
        add_result *r = &ab->rs.results_by_transaction[i];
        cn_add_partitions_to_txn_response_add_partitions_to_txn_result_init(r);
        r->transactional_id = qt->transactional_id;
        int32_t ntp = qt->topics_len > 0 ? qt->topics_len : 0;
        r->topic_results = cn_arena_calloc(&req->arena, (size_t)ntp + 1,
                                           sizeof *r->topic_results);
        if (!r->topic_results)
            goto nomem;
        r->topic_results_len = ntp;
        for (int32_t j = 0; j < ntp; j++) {
            add_topic_result *tr = &r->topic_results[j];
            memset(tr, 0, sizeof *tr);
            tr->name = qt->topics[j].name;
            int32_t np = qt->topics[j].partitions_len > 0
                             ? qt->topics[j].partitions_len
                             : 0;
            tr->results_by_partition = cn_arena_calloc(
                &req->arena, (size_t)np + 1, sizeof *tr->results_by_partition);
            if (!tr->results_by_partition)
                goto nomem;
            tr->results_by_partition_len = np;
            for (int32_t k = 0; k < np; k++)
                tr->results_by_partition[k].partition_index =
                    qt->topics[j].partitions[k];
        }
    }
    for (int32_t i = 0; i < nt; i++)
        add_batched_one(b, req, h, ab, i, &rq->transactions[i]);
    batch_unref(ab, req);
    return;
nomem:
    cn_req_bad(req, h, CN_ENOMEM);
}

/* ---- TV2: the partition leader adds the partition (produce path) ------ */

static void produce_add_written(struct txn_write *w, int16_t err)
{
    struct cn_txnb *c = w->b->txn;
    w->e->busy = false;
    struct cn_rd body = w->body;
    /* Failed: the produce runs once more without adding, so the
     * verification answers it. */
    c->no_add = err != KAFKA_NONE;
    w->rerun(w->b, w->req, &w->h, &body);
    c->no_add = false;
}

bool cn_txn_coord_add_for_produce(struct cn_broker *b, struct cn_req *req,
                                  const struct cn_req_header *h,
                                  const struct cn_rd *body,
                                  cn_handler_fn rerun, bool produce_v12,
                                  int64_t producer_id, int16_t producer_epoch,
                                  const struct cn_txn_tp_ref *tps, size_t n)
{
    struct cn_txnb *c = b->txn;
    if (!c || !txn_tv2_on(b) || c->no_add || n == 0)
        return false;
    struct txn_entry *e = txn_entry_by_pid(c, producer_id);
    /* Only at the current epoch (an older one is fenced by the
     * verification), and for Produce v12 or a producer already seen
     * using TV2 in this instance. */
    if (!e || e->meta.state == CN_TXN_DEAD ||
        producer_epoch != e->meta.producer_epoch ||
        (!produce_v12 && e->meta.client_tv != 2))
        return false;
    if (e->meta.state == CN_TXN_ONGOING) {
        size_t missing = 0;
        for (size_t i = 0; i < n; i++)
            if (!cn_txn_meta_has_partition(&e->meta, tps[i].topic,
                                           tps[i].partition))
                missing++;
        if (!missing)
            return false;
    }
    if (e->busy || e->meta.state == CN_TXN_PREPARE_COMMIT ||
        e->meta.state == CN_TXN_PREPARE_ABORT ||
        e->meta.state == CN_TXN_PREPARE_EPOCH_FENCE)
        return txn_park(b, e, req, h, body, rerun);
    const char **topics = cn_arena_calloc(&req->arena, n, sizeof *topics);
    int32_t *parts = cn_arena_calloc(&req->arena, n, sizeof *parts);
    if (!topics || !parts)
        return false;
    for (size_t i = 0; i < n; i++) {
        topics[i] = tps[i].topic;
        parts[i] = tps[i].partition;
    }
    struct cn_txn_meta next;
    bool changed = false;
    if (build_add(e, topics, parts, n, &next, &changed) != 0)
        return false;
    if (!changed) {
        cn_txn_meta_fini(&next);
        return false;
    }
    next.client_tv = 2;
    struct txn_write x = {.rerun = rerun, .body = *body};
    txn_write_change_x(b, e, &next, produce_add_written, req, h, false, &x);
    return true;
}

/* ---- partition leaders asking (KIP-890 part 1, locally) ----------------- */

int16_t cn_txn_coord_verify(struct cn_broker *b, struct cn_bytes txn_id,
                            int64_t producer_id, int16_t producer_epoch,
                            const char *topic, int32_t partition)
{
    if (!b->cfg->transaction_partition_verification_enable)
        return KAFKA_NONE;
    struct txn_entry *e = NULL;
    if (b->txn && !cn_bytes_is_null(txn_id) && txn_id.len > 0) {
        char id[1024];
        e = cn_wire_cstr(txn_id, id, sizeof id) ? txn_entry_find(b->txn, id)
                                                : NULL;
        if (!e || e->meta.producer_id != producer_id)
            return KAFKA_INVALID_PRODUCER_ID_MAPPING;
    } else {
        e = b->txn ? txn_entry_by_pid(b->txn, producer_id) : NULL;
        if (!e)
            return KAFKA_INVALID_TXN_STATE;
    }
    /* Kafka checks the epoch next: any other epoch is fenced (its
     * coordinator's PRODUCER_FENCED, which the leader passes on as
     * INVALID_PRODUCER_EPOCH). */
    if (producer_epoch != e->meta.producer_epoch)
        return KAFKA_INVALID_PRODUCER_EPOCH;
    if (e->meta.state != CN_TXN_ONGOING ||
        !cn_txn_meta_has_partition(&e->meta, topic, partition))
        return KAFKA_INVALID_TXN_STATE;
    return KAFKA_NONE;
}
