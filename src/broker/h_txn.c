/*
 * h_txn.c - the transactional producer's own APIs: InitProducerId (with a
 * transactional id), AddPartitionsToTxn v0-3, AddOffsetsToTxn, EndTxn.
 * These decide what the client may do and build the next metadata; they
 * never change the table themselves but hand the change to
 * txn_write_change (txn_coord.c), and answer once it is durable.  A busy
 * id parks the request there rather than bouncing the client.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "authz.h"
#include "base/clock.h"
#include "base/failpoint.h"
#include "base/say.h"
#include "group_coord.h"
#include "handlers.h"
#include "proto/gen/msgs.h"
#include "proto/kerr.h"
#include "txn/txn_state.h"
#include "txn_coord.h"
#include "txn_int.h"

/* Kafka moves to a new producer id before the epoch reaches
 * Short.MAX_VALUE, which is reserved. */
#define EPOCH_LAST_USABLE (INT16_MAX - 1)

/* ---- answering ---------------------------------------------------------- */

static void answer_init_pid(struct cn_req *req, const struct cn_req_header *h,
                            int16_t err, int64_t pid, int16_t epoch)
{
    struct cn_init_producer_id_response rs;
    cn_init_producer_id_response_init(&rs);
    rs.error_code = err;
    rs.producer_id = err ? -1 : pid;
    rs.producer_epoch = err ? -1 : epoch;
    cn_resp_begin(req, h);
    cn_init_producer_id_response_encode(&req->resp, h->api_version, &rs);
    cn_req_done(req);
}

/* v5 returns the producer id and epoch the client goes on with: after a
 * TV2 EndTxn the bumped epoch, or the next producer id at epoch 0 when the
 * epoch ran out. */
static void answer_end_txn(struct cn_req *req, const struct cn_req_header *h,
                           int16_t err, const struct cn_txn_meta *m)
{
    struct cn_end_txn_response rs;
    cn_end_txn_response_init(&rs);
    rs.error_code = err;
    rs.producer_id = -1;
    rs.producer_epoch = -1;
    if (!err && m) {
        bool rotating = m->next_producer_id >= 0;
        rs.producer_id = rotating ? m->next_producer_id : m->producer_id;
        rs.producer_epoch = rotating ? 0 : m->producer_epoch;
    }
    cn_resp_begin(req, h);
    cn_end_txn_response_encode(&req->resp, h->api_version, &rs);
    cn_req_done(req);
}

/* KIP-588: PRODUCER_FENCED is new; older request versions get what their
 * clients know for it. */
static int16_t fenced_error(int16_t api_key, int16_t version)
{
    int16_t first_with_fenced = api_key == CN_API_INIT_PRODUCER_ID ? 4 : 2;
    return version >= first_with_fenced ? KAFKA_PRODUCER_FENCED
                                        : KAFKA_INVALID_PRODUCER_EPOCH;
}

/* ---- InitProducerId ----------------------------------------------------- */

static void init_pid_written(struct txn_write *w, int16_t err)
{
    struct txn_entry *e = w->e;
    e->busy = false;
    answer_init_pid(w->req, &w->h, err, e->meta.producer_id,
                    e->meta.producer_epoch);
}

/* The Ongoing transaction of a fenced instance is aborted on its behalf
 * with the new epoch; the new instance retries until that is done. */
static void fence_written(struct txn_write *w, int16_t err)
{
    if (err) {
        w->e->busy = false;
        return;
    }
    w->b->txn->fenced++;
    if (CN_FAILPOINT("txn.after_prepare_sync"))
        return;
    txn_write_markers(w->b, w->e, false);
}

/* txn_next_epoch for a request, which waits for a durable producer id
 * (-EAGAIN: fn runs it again, see cn_pids_take). */
static int next_epoch_for(struct cn_broker *b, struct cn_txn_meta *m,
                          struct cn_req *req, const struct cn_req_header *h,
                          const struct cn_rd *body, cn_handler_fn fn)
{
    if (m->producer_id >= 0 && m->producer_epoch < EPOCH_LAST_USABLE) {
        m->last_producer_epoch = m->producer_epoch;
        m->producer_epoch++;
        return 0;
    }
    int64_t pid;
    int rc = cn_pids_take(b, req, h, body, fn, &pid);
    if (rc)
        return rc;
    m->prev_producer_id = m->producer_id;
    m->producer_id = pid;
    m->producer_epoch = 0;
    m->last_producer_epoch = -1;
    return 0;
}

int txn_next_epoch(struct cn_broker *b, struct cn_txn_meta *m)
{
    return next_epoch_for(b, m, NULL, NULL, NULL, NULL);
}

void cn_txn_init_producer_id(struct cn_broker *b, struct cn_req *req,
                             const struct cn_req_header *h,
                             const struct cn_rd *body,
                             struct cn_bytes transactional_id,
                             int32_t timeout_ms, int64_t producer_id,
                             int16_t producer_epoch)
{
    char id[1024];
    if (!cn_wire_cstr(transactional_id, id, sizeof id) || !id[0]) {
        answer_init_pid(req, h, KAFKA_INVALID_REQUEST, -1, -1);
        return;
    }
    if (timeout_ms <= 0 || timeout_ms > b->cfg->transaction_max_timeout_ms) {
        answer_init_pid(req, h, KAFKA_INVALID_TRANSACTION_TIMEOUT, -1, -1);
        return;
    }
    struct cn_txnb *c = b->txn;
    struct txn_entry *e = txn_entry_find(c, id);
    int64_t now = cn_clock_wall_ms();
    if (!e) {
        e = calloc(1, sizeof *e);
        if (e) {
            cn_txn_meta_init(&e->meta);
            e->indexed_pid = -1;
        }
        if (!e || cn_txn_meta_set_id(&e->meta, id) != 0 ||
            txn_entry_insert(c, e) != 0) {
            if (e)
                cn_txn_meta_fini(&e->meta);
            free(e);
            answer_init_pid(req, h, KAFKA_COORDINATOR_NOT_AVAILABLE, -1, -1);
            return;
        }
        e->meta.state = CN_TXN_EMPTY;
    }
    if (e->busy || e->meta.state == CN_TXN_PREPARE_COMMIT ||
        e->meta.state == CN_TXN_PREPARE_ABORT ||
        e->meta.state == CN_TXN_PREPARE_EPOCH_FENCE) {
        if (!txn_park(b, e, req, h, body, cn_h_init_producer_id))
            answer_init_pid(req, h, KAFKA_CONCURRENT_TRANSACTIONS, -1, -1);
        return;
    }
    /* v3+ (KIP-360): a client that names its id and epoch must be the
     * current instance. */
    if (producer_id >= 0 && e->meta.producer_id >= 0) {
        if (producer_id != e->meta.producer_id &&
            producer_id != e->meta.prev_producer_id) {
            answer_init_pid(req, h, KAFKA_INVALID_PRODUCER_ID_MAPPING, -1, -1);
            return;
        }
        if (producer_epoch != e->meta.producer_epoch &&
            producer_id == e->meta.producer_id) {
            answer_init_pid(req, h,
                            fenced_error(CN_API_INIT_PRODUCER_ID,
                                         h->api_version),
                            -1, -1);
            return;
        }
    }
    struct cn_txn_meta next;
    cn_txn_meta_init(&next);
    int rc = cn_txn_meta_copy(&next, &e->meta);
    if (!rc)
        rc = next_epoch_for(b, &next, req, h, body, cn_h_init_producer_id);
    if (rc) {
        cn_txn_meta_fini(&next);
        if (rc != -EAGAIN)
            answer_init_pid(req, h, KAFKA_COORDINATOR_NOT_AVAILABLE, -1, -1);
        return;
    }
    next.last_update_ms = now;
    /* The fence's one bump is also the TV2 abort's (KAFKA-19367); the new
     * instance's retry bumps once more. */
    if (e->meta.state == CN_TXN_ONGOING) {
        /* Fence: the old instance's transaction is aborted under the new
         * epoch (PrepareEpochFence then PrepareAbort in Kafka, which
         * stores only the PrepareAbort). */
        CN_INFO("transactional id %s: fencing producer %lld epoch %d; its "
                "open transaction is aborted",
                id, (long long)e->meta.producer_id, e->meta.producer_epoch);
        next.state = CN_TXN_PREPARE_ABORT;
        e->decide_us = cn_clock_mono_us();
        txn_write_change(b, e, &next, fence_written, NULL, NULL, false);
        answer_init_pid(req, h, KAFKA_CONCURRENT_TRANSACTIONS, -1, -1);
        return;
    }
    next.state = CN_TXN_EMPTY;
    next.timeout_ms = timeout_ms;
    next.txn_start_ms = -1;
    /* A new instance: which transaction version it speaks shows in its
     * first transaction (AddPartitionsToTxn: TV1; a produce with no add,
     * or EndTxn v5: TV2). */
    next.client_tv = 0;
    cn_txn_meta_clear_partitions(&next);
    txn_write_change(b, e, &next, init_pid_written, req, h, false);
}

/* ---- common checks ------------------------------------------------------ */

/* Checks the caller is the current instance of an existing id.  Returns a
 * Kafka error, or KAFKA_NONE with *out set. */
static int16_t check_producer(struct cn_broker *b, struct cn_bytes wire_id,
                              int64_t pid, int16_t epoch, int16_t api_key,
                              int16_t version, struct txn_entry **out)
{
    char id[1024];
    if (!cn_wire_cstr(wire_id, id, sizeof id))
        return KAFKA_INVALID_REQUEST;
    struct txn_entry *e = txn_entry_find(b->txn, id);
    if (!e || e->meta.producer_id != pid)
        return KAFKA_INVALID_PRODUCER_ID_MAPPING;
    if (e->meta.producer_epoch != epoch)
        return fenced_error(api_key, version);
    *out = e; /* also with CONCURRENT_TRANSACTIONS: the caller may wait */
    if (e->busy || e->meta.state == CN_TXN_PREPARE_COMMIT ||
        e->meta.state == CN_TXN_PREPARE_ABORT ||
        e->meta.state == CN_TXN_PREPARE_EPOCH_FENCE)
        return KAFKA_CONCURRENT_TRANSACTIONS;
    *out = e;
    return KAFKA_NONE;
}

/* ---- AddPartitionsToTxn (v0-3) ----------------------------------------- */

struct add_state {
    struct cn_add_partitions_to_txn_response rs;
};

void txn_answer_add(struct cn_req *req, const struct cn_req_header *h,
                    struct cn_add_partitions_to_txn_response *rs)
{
    cn_resp_begin(req, h);
    cn_add_partitions_to_txn_response_encode(&req->resp, h->api_version, rs);
    cn_req_done(req);
}

/* Sets every partition's error (those already set to a specific error
 * keep it when keep_set). */
static void set_all(struct cn_add_partitions_to_txn_response *rs, int16_t err,
                    bool keep_set)
{
    for (int32_t i = 0; i < rs->results_by_topic_v3_and_below_len; i++) {
        struct cn_add_partitions_to_txn_response_add_partitions_to_txn_topic_result
            *tr = &rs->results_by_topic_v3_and_below[i];
        for (int32_t j = 0; j < tr->results_by_partition_len; j++)
            if (!keep_set || !tr->results_by_partition[j].partition_error_code)
                tr->results_by_partition[j].partition_error_code = err;
    }
}

static void add_written(struct txn_write *w, int16_t err)
{
    struct add_state *as = w->req->handler_state;
    w->e->busy = false;
    set_all(&as->rs, err, false);
    txn_answer_add(w->req, &w->h, &as->rs);
}

void cn_h_add_partitions_to_txn(struct cn_broker *b, struct cn_req *req,
                                const struct cn_req_header *h,
                                struct cn_rd *body)
{
    struct cn_add_partitions_to_txn_request rq;
    const struct cn_rd body0 = *body;
    int err = cn_add_partitions_to_txn_request_decode(body, &req->arena,
                                                      h->api_version, &rq);
    if (err) {
        cn_req_bad(req, h, err);
        return;
    }
    if (h->api_version >= 4) {
        /* The batched form is broker-to-broker (KIP-890). */
        if (!cn_authz_cluster(b, req, CN_ACL_OP_CLUSTER_ACTION)) {
            struct cn_add_partitions_to_txn_response rs;
            cn_add_partitions_to_txn_response_init(&rs);
            rs.error_code = KAFKA_CLUSTER_AUTHORIZATION_FAILED;
            txn_answer_add(req, h, &rs);
            return;
        }
        txn_add_batched(b, req, h, &rq);
        return;
    }
    bool txn_denied = !cn_authz(b, req, CN_ACL_OP_WRITE, CN_ACL_RT_TXN_ID,
                                rq.v3_and_below_transactional_id);
    struct add_state *as = cn_arena_alloc(&req->arena, sizeof *as);
    if (!as) {
        cn_req_bad(req, h, CN_ENOMEM);
        return;
    }
    req->handler_state = as;
    struct cn_add_partitions_to_txn_response *rs = &as->rs;
    cn_add_partitions_to_txn_response_init(rs);
    int32_t nt = rq.v3_and_below_topics_len > 0 ? rq.v3_and_below_topics_len
                                                : 0;
    rs->results_by_topic_v3_and_below = cn_arena_calloc(
        &req->arena, (size_t)nt + 1, sizeof *rs->results_by_topic_v3_and_below);
    if (!rs->results_by_topic_v3_and_below) {
        cn_req_bad(req, h, CN_ENOMEM);
        return;
    }
    rs->results_by_topic_v3_and_below_len = nt;
    bool unknown = false, any_denied = false;
    for (int32_t i = 0; i < nt; i++) {
        const struct cn_add_partitions_to_txn_request_add_partitions_to_txn_topic
            *qt = &rq.v3_and_below_topics[i];
        struct cn_add_partitions_to_txn_response_add_partitions_to_txn_topic_result
            *tr = &rs->results_by_topic_v3_and_below[i];
        cn_add_partitions_to_txn_response_add_partitions_to_txn_topic_result_init(
            tr);
        tr->name = qt->name;
        int32_t np = qt->partitions_len > 0 ? qt->partitions_len : 0;
        tr->results_by_partition = cn_arena_calloc(
            &req->arena, (size_t)np + 1, sizeof *tr->results_by_partition);
        if (!tr->results_by_partition) {
            cn_req_bad(req, h, CN_ENOMEM);
            return;
        }
        tr->results_by_partition_len = np;
        /* Kafka checks WRITE per topic; a refused topic fails the whole
         * request and the others get OPERATION_NOT_ATTEMPTED. */
        bool topic_denied =
            !txn_denied && !cn_bytes_eq_str(qt->name, CN_TXN_TOPIC) &&
            !cn_authz(b, req, CN_ACL_OP_WRITE, CN_ACL_RT_TOPIC, qt->name);
        for (int32_t j = 0; j < np; j++) {
            tr->results_by_partition[j].partition_index = qt->partitions[j];
            if (topic_denied) {
                tr->results_by_partition[j].partition_error_code =
                    KAFKA_TOPIC_AUTHORIZATION_FAILED;
                any_denied = true;
            } else if (!cn_partition_find(b, qt->name, qt->partitions[j]) ||
                cn_bytes_eq_str(qt->name, CN_TXN_TOPIC)) {
                tr->results_by_partition[j].partition_error_code =
                    KAFKA_UNKNOWN_TOPIC_OR_PARTITION;
                unknown = true;
            }
        }
    }
    if (txn_denied) {
        set_all(rs, KAFKA_TRANSACTIONAL_ID_AUTHORIZATION_FAILED, false);
        txn_answer_add(req, h, rs);
        return;
    }
    if (any_denied) {
        /* As Kafka: refused and unknown topics are named, nothing is
         * attempted for the rest. */
        set_all(rs, KAFKA_OPERATION_NOT_ATTEMPTED, true);
        txn_answer_add(req, h, rs);
        return;
    }
    struct txn_entry *e = NULL;
    int16_t kerr = check_producer(b, rq.v3_and_below_transactional_id,
                                  rq.v3_and_below_producer_id,
                                  rq.v3_and_below_producer_epoch,
                                  CN_API_ADD_PARTITIONS_TO_TXN,
                                  h->api_version, &e);
    if (kerr == KAFKA_CONCURRENT_TRANSACTIONS &&
        txn_park(b, e, req, h, &body0, cn_h_add_partitions_to_txn))
        return;
    if (kerr) {
        set_all(rs, kerr, false);
        txn_answer_add(req, h, rs);
        return;
    }
    if (unknown) {
        /* Nothing is added when any partition is bad. */
        set_all(rs, KAFKA_OPERATION_NOT_ATTEMPTED, true);
        txn_answer_add(req, h, rs);
        return;
    }
    struct cn_txn_meta next;
    cn_txn_meta_init(&next);
    bool changed = e->meta.state != CN_TXN_ONGOING;
    if (cn_txn_meta_copy(&next, &e->meta) != 0) {
        set_all(rs, KAFKA_COORDINATOR_NOT_AVAILABLE, false);
        txn_answer_add(req, h, rs);
        return;
    }
    if (changed)
        cn_txn_meta_clear_partitions(&next);
    for (int32_t i = 0; i < nt; i++) {
        const struct cn_add_partitions_to_txn_request_add_partitions_to_txn_topic
            *qt = &rq.v3_and_below_topics[i];
        char topic[CN_TOPIC_NAME_MAX + 1];
        if (!cn_wire_cstr(qt->name, topic, sizeof topic))
            continue;
        for (int32_t j = 0; j < qt->partitions_len; j++) {
            if (!cn_txn_meta_has_partition(&next, topic, qt->partitions[j])) {
                changed = true;
                cn_txn_meta_add_partition(&next, topic, qt->partitions[j]);
            }
        }
    }
    if (!changed) {
        cn_txn_meta_fini(&next);
        txn_answer_add(req, h, rs);
        return;
    }
    int64_t now = cn_clock_wall_ms();
    if (next.state != CN_TXN_ONGOING)
        next.txn_start_ms = now;
    next.state = CN_TXN_ONGOING;
    next.last_update_ms = now;
    next.client_tv = 1; /* adds its partitions itself: a TV1 client */
    txn_write_change(b, e, &next, add_written, req, h, false);
}

/* ---- AddOffsetsToTxn ---------------------------------------------------- */

static void answer_add_offsets(struct cn_req *req,
                               const struct cn_req_header *h, int16_t err)
{
    struct cn_add_offsets_to_txn_response rs;
    cn_add_offsets_to_txn_response_init(&rs);
    rs.error_code = err;
    cn_resp_begin(req, h);
    cn_add_offsets_to_txn_response_encode(&req->resp, h->api_version, &rs);
    cn_req_done(req);
}

static void add_offsets_written(struct txn_write *w, int16_t err)
{
    w->e->busy = false;
    answer_add_offsets(w->req, &w->h, err);
}

/* The group's __consumer_offsets partition joins the transaction, so the
 * commit or abort marker reaches the offsets the producer then sends with
 * TxnOffsetCommit. */
void cn_h_add_offsets_to_txn(struct cn_broker *b, struct cn_req *req,
                             const struct cn_req_header *h,
                             struct cn_rd *body)
{
    struct cn_add_offsets_to_txn_request rq;
    const struct cn_rd body0 = *body;
    int err = cn_add_offsets_to_txn_request_decode(body, &req->arena,
                                                   h->api_version, &rq);
    if (err) {
        cn_req_bad(req, h, err);
        return;
    }
    if (!cn_authz(b, req, CN_ACL_OP_WRITE, CN_ACL_RT_TXN_ID,
                  rq.transactional_id)) {
        answer_add_offsets(req, h,
                           KAFKA_TRANSACTIONAL_ID_AUTHORIZATION_FAILED);
        return;
    }
    if (!cn_authz(b, req, CN_ACL_OP_READ, CN_ACL_RT_GROUP, rq.group_id)) {
        answer_add_offsets(req, h, KAFKA_GROUP_AUTHORIZATION_FAILED);
        return;
    }
    struct txn_entry *e = NULL;
    int16_t kerr = check_producer(b, rq.transactional_id, rq.producer_id,
                                  rq.producer_epoch, CN_API_ADD_OFFSETS_TO_TXN,
                                  h->api_version, &e);
    if (kerr == KAFKA_CONCURRENT_TRANSACTIONS &&
        txn_park(b, e, req, h, &body0, cn_h_add_offsets_to_txn))
        return;
    if (kerr) {
        answer_add_offsets(req, h, kerr);
        return;
    }
    if (cn_bytes_is_null(rq.group_id) || rq.group_id.len == 0) {
        answer_add_offsets(req, h, KAFKA_INVALID_GROUP_ID);
        return;
    }
    struct cn_partition *p = cn_group_coord_partition(b, rq.group_id);
    if (!p) {
        answer_add_offsets(req, h, KAFKA_COORDINATOR_NOT_AVAILABLE);
        return;
    }
    const char *topic = p->topic->name;
    bool ongoing = e->meta.state == CN_TXN_ONGOING;
    if (ongoing && cn_txn_meta_has_partition(&e->meta, topic, p->index)) {
        answer_add_offsets(req, h, KAFKA_NONE);
        return;
    }
    struct cn_txn_meta next;
    cn_txn_meta_init(&next);
    int rc = cn_txn_meta_copy(&next, &e->meta);
    if (rc == 0 && !ongoing)
        cn_txn_meta_clear_partitions(&next);
    if (rc == 0)
        rc = cn_txn_meta_add_partition(&next, topic, p->index);
    if (rc != 0) {
        cn_txn_meta_fini(&next);
        answer_add_offsets(req, h, KAFKA_COORDINATOR_NOT_AVAILABLE);
        return;
    }
    int64_t now = cn_clock_wall_ms();
    if (!ongoing)
        next.txn_start_ms = now;
    next.state = CN_TXN_ONGOING;
    next.last_update_ms = now;
    txn_write_change(b, e, &next, add_offsets_written, req, h, false);
}

/* ---- EndTxn ------------------------------------------------------------- */

static void end_written(struct txn_write *w, int16_t err);

/* A TV2 EndTxn decides the transaction and bumps the epoch in the same
 * record (Kafka's prepareAbortOrCommit); at the last usable epoch the
 * next producer id is allocated now and taken on at completion.  `bare`:
 * an abort with no transaction open (TV2 allows it), which starts now. */
static void end_tv2_prepare(struct cn_broker *b, struct txn_entry *e,
                            struct cn_req *req, const struct cn_req_header *h,
                            const struct cn_rd *body0, bool commit, bool bare)
{
    struct cn_txn_meta next;
    cn_txn_meta_init(&next);
    int rc = cn_txn_meta_copy(&next, &e->meta);
    if (!rc && e->meta.producer_epoch >= EPOCH_LAST_USABLE) {
        int64_t pid;
        rc = cn_pids_take(b, req, h, body0, cn_h_end_txn, &pid);
        if (!rc)
            next.next_producer_id = pid;
    }
    if (rc) {
        cn_txn_meta_fini(&next);
        if (rc != -EAGAIN)
            answer_end_txn(req, h, KAFKA_COORDINATOR_NOT_AVAILABLE, NULL);
        return;
    }
    int64_t now = cn_clock_wall_ms();
    next.last_producer_epoch = e->meta.producer_epoch;
    next.producer_epoch = (int16_t)(e->meta.producer_epoch + 1);
    next.state = commit ? CN_TXN_PREPARE_COMMIT : CN_TXN_PREPARE_ABORT;
    next.client_tv = 2;
    next.last_update_ms = now;
    if (bare) {
        cn_txn_meta_clear_partitions(&next);
        next.txn_start_ms = now;
    }
    e->decide_us = cn_clock_mono_us();
    txn_write_change(b, e, &next, end_written, req, h, commit);
}

/*
 * EndTxn v5 under transaction version 2, after Kafka 4.x's
 * TransactionCoordinator.endTransaction.  Because every EndTxn bumps the
 * epoch, the same epoch no longer tells a retry apart: a retry carries
 * the epoch just below the stored one (or, across a producer id
 * rotation, the previous id at the last usable epoch while the new id
 * is at 0).  A retry of what completed the previous transaction is
 * answered with success and the current id and epoch; any other epoch
 * is PRODUCER_FENCED.
 */
static void end_txn_tv2(struct cn_broker *b, struct cn_req *req,
                        const struct cn_req_header *h,
                        const struct cn_rd *body0,
                        const struct cn_end_txn_request *rq)
{
    char id[1024];
    if (!cn_wire_cstr(rq->transactional_id, id, sizeof id) || !id[0]) {
        answer_end_txn(req, h, KAFKA_INVALID_REQUEST, NULL);
        return;
    }
    struct txn_entry *e = txn_entry_find(b->txn, id);
    if (!e || e->meta.state == CN_TXN_DEAD) {
        answer_end_txn(req, h, KAFKA_INVALID_PRODUCER_ID_MAPPING, NULL);
        return;
    }
    const struct cn_txn_meta *m = &e->meta;
    enum cn_txn_state s = m->state;
    if (e->busy || s == CN_TXN_PREPARE_COMMIT || s == CN_TXN_PREPARE_ABORT ||
        s == CN_TXN_PREPARE_EPOCH_FENCE) {
        /* Kafka answers a retry during the markers with
         * CONCURRENT_TRANSACTIONS too; waiting gives the final answer. */
        if (!txn_park(b, e, req, h, body0, cn_h_end_txn))
            answer_end_txn(req, h, KAFKA_CONCURRENT_TRANSACTIONS, NULL);
        return;
    }
    bool retry_overflow = m->prev_producer_id >= 0 &&
                          m->prev_producer_id == rq->producer_id &&
                          rq->producer_epoch == EPOCH_LAST_USABLE &&
                          m->producer_epoch == 0;
    bool retry_bump = m->producer_id == rq->producer_id &&
                      m->producer_epoch == rq->producer_epoch + 1;
    if (m->producer_id != rq->producer_id && !retry_overflow) {
        answer_end_txn(req, h, KAFKA_INVALID_PRODUCER_ID_MAPPING, NULL);
        return;
    }
    bool same = rq->producer_epoch == m->producer_epoch &&
                m->producer_id == rq->producer_id;
    bool complete = s == CN_TXN_COMPLETE_COMMIT || s == CN_TXN_COMPLETE_ABORT;
    bool valid = complete ? retry_bump || retry_overflow || same : same;
    if (!valid) {
        answer_end_txn(req, h, KAFKA_PRODUCER_FENCED, NULL);
        return;
    }
    bool retry = retry_bump || retry_overflow;
    bool commit = rq->committed;
    switch (s) {
    case CN_TXN_ONGOING:
        end_tv2_prepare(b, e, req, h, body0, commit, false);
        return;
    case CN_TXN_COMPLETE_COMMIT:
        if (commit)
            answer_end_txn(req, h,
                           retry ? KAFKA_NONE : KAFKA_INVALID_TXN_STATE, m);
        else if (retry)
            answer_end_txn(req, h, KAFKA_INVALID_TXN_STATE, NULL);
        else
            end_tv2_prepare(b, e, req, h, body0, false, true);
        return;
    case CN_TXN_COMPLETE_ABORT:
        if (commit)
            answer_end_txn(req, h, KAFKA_INVALID_TXN_STATE, NULL);
        else if (retry)
            answer_end_txn(req, h, KAFKA_NONE, m);
        else
            end_tv2_prepare(b, e, req, h, body0, false, true);
        return;
    case CN_TXN_EMPTY:
        if (commit)
            answer_end_txn(req, h, KAFKA_INVALID_TXN_STATE, NULL);
        else
            end_tv2_prepare(b, e, req, h, body0, false, true);
        return;
    default:
        answer_end_txn(req, h, KAFKA_INVALID_TXN_STATE, NULL);
        return;
    }
}

static void end_written(struct txn_write *w, int16_t err)
{
    answer_end_txn(w->req, &w->h, err, &w->e->meta);
    if (err) {
        w->e->busy = false;
        return;
    }
    if (CN_FAILPOINT("txn.after_prepare_sync"))
        return;
    txn_write_markers(w->b, w->e, w->commit);
}

void cn_h_end_txn(struct cn_broker *b, struct cn_req *req,
                  const struct cn_req_header *h, struct cn_rd *body)
{
    struct cn_end_txn_request rq;
    const struct cn_rd body0 = *body;
    int err = cn_end_txn_request_decode(body, &req->arena, h->api_version, &rq);
    if (err) {
        cn_req_bad(req, h, err);
        return;
    }
    if (!cn_authz(b, req, CN_ACL_OP_WRITE, CN_ACL_RT_TXN_ID,
                  rq.transactional_id)) {
        answer_end_txn(req, h, KAFKA_TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                       NULL);
        return;
    }
    if (h->api_version >= 5 && txn_tv2_on(b)) {
        end_txn_tv2(b, req, h, &body0, &rq);
        return;
    }
    struct txn_entry *e = NULL;
    int16_t kerr = check_producer(b, rq.transactional_id, rq.producer_id,
                                  rq.producer_epoch, CN_API_END_TXN,
                                  h->api_version, &e);
    if (kerr == KAFKA_CONCURRENT_TRANSACTIONS &&
        txn_park(b, e, req, h, &body0, cn_h_end_txn))
        return;
    if (kerr) {
        answer_end_txn(req, h, kerr, NULL);
        return;
    }
    enum cn_txn_state s = e->meta.state;
    if (s == CN_TXN_COMPLETE_COMMIT || s == CN_TXN_COMPLETE_ABORT) {
        /* A retry of the EndTxn that finished it is answered as before. */
        bool same = (s == CN_TXN_COMPLETE_COMMIT) == rq.committed;
        answer_end_txn(req, h, same ? KAFKA_NONE : KAFKA_INVALID_TXN_STATE,
                       &e->meta);
        return;
    }
    if (s != CN_TXN_ONGOING) {
        answer_end_txn(req, h, KAFKA_INVALID_TXN_STATE, NULL);
        return;
    }
    struct cn_txn_meta next;
    cn_txn_meta_init(&next);
    if (cn_txn_meta_copy(&next, &e->meta) != 0) {
        answer_end_txn(req, h, KAFKA_COORDINATOR_NOT_AVAILABLE, NULL);
        return;
    }
    next.state = rq.committed ? CN_TXN_PREPARE_COMMIT : CN_TXN_PREPARE_ABORT;
    next.last_update_ms = cn_clock_wall_ms();
    next.client_tv = 1; /* an EndTxn without the bump: a TV1 client */
    e->decide_us = cn_clock_mono_us();
    txn_write_change(b, e, &next, end_written, req, h, rq.committed);
}
