/*
 * h_txn.c - the transactional producer's own APIs: InitProducerId (with a
 * transactional id), AddPartitionsToTxn (v0-3 from clients, v4-5 batched
 * from partition leaders), AddOffsetsToTxn, EndTxn.  These decode,
 * authorize and check the form of a request, hand it to the coordinator
 * (txn_exec.h, which steps the state machine of txn/coord.h) and encode
 * its answer when cn_h_txn_answer gets it: at once, once a change is
 * durable, or when a busy id it waited for is idle.
 */
#include <string.h>

#include "node/authz.h"
#include "node/group_coord.h"
#include "handlers/handlers.h"
#include "proto/gen/msgs.h"
#include "proto/kerr.h"
#include "txn/txn_state.h"
#include "node/txn_exec.h"
#include "node/txn_remote.h"

/* What a request fed to the coordinator keeps for its answer
 * (req->handler_state). */
struct txn_call {
    struct cn_req_header h;
    struct cn_add_partitions_to_txn_response rs; /* AddPartitionsToTxn */
    int pending; /* batched: transactions not yet answered, plus one while
                    they are being fed */
};

typedef struct cn_add_partitions_to_txn_response_add_partitions_to_txn_result
    add_result;
typedef struct
    cn_add_partitions_to_txn_response_add_partitions_to_txn_topic_result
        add_topic_result;
typedef struct
    cn_add_partitions_to_txn_request_add_partitions_to_txn_transaction
        add_txn_request;

static struct txn_call *call_new(struct cn_req *req,
                                 const struct cn_req_header *h)
{
    struct txn_call *tc = cn_arena_calloc(&req->arena, 1, sizeof *tc);
    if (!tc)
        return NULL;
    tc->h = *h;
    cn_add_partitions_to_txn_response_init(&tc->rs);
    req->handler_state = tc;
    return tc;
}

/* A request for the coordinator: the fields every kind has. */
static struct cn_txn_request request_for(enum cn_txn_req_kind kind,
                                         struct cn_req *req, int16_t version,
                                         const char *id, int64_t pid,
                                         int16_t epoch)
{
    return (struct cn_txn_request){.kind = kind,
                                   .token = req,
                                   .api_version = version,
                                   .transactional_id = id,
                                   .producer_id = pid,
                                   .producer_epoch = epoch};
}

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
                           int16_t err, int64_t pid, int16_t epoch)
{
    struct cn_end_txn_response rs;
    cn_end_txn_response_init(&rs);
    rs.error_code = err;
    rs.producer_id = err ? -1 : pid;
    rs.producer_epoch = err ? -1 : epoch;
    cn_resp_begin(req, h);
    cn_end_txn_response_encode(&req->resp, h->api_version, &rs);
    cn_req_done(req);
}

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

static void answer_add(struct cn_req *req, const struct cn_req_header *h,
                       struct cn_add_partitions_to_txn_response *rs)
{
    cn_resp_begin(req, h);
    cn_add_partitions_to_txn_response_encode(&req->resp, h->api_version, rs);
    cn_req_done(req);
}

static void set_partitions(add_topic_result *tr, int32_t n, int16_t err,
                           bool keep_set)
{
    for (int32_t i = 0; i < n; i++)
        for (int32_t j = 0; j < tr[i].results_by_partition_len; j++) {
            int16_t *code =
                &tr[i].results_by_partition[j].partition_error_code;
            if (!keep_set || !*code)
                *code = err;
        }
}

/* Sets every partition's error; OPERATION_NOT_ATTEMPTED leaves those
 * already named (unknown, refused) as they are, as Kafka does. */
static void set_all(struct cn_add_partitions_to_txn_response *rs, int16_t err)
{
    set_partitions(rs->results_by_topic_v3_and_below,
                   rs->results_by_topic_v3_and_below_len, err,
                   err == KAFKA_OPERATION_NOT_ATTEMPTED);
}

static void result_set(add_result *r, int16_t err)
{
    set_partitions(r->topic_results, r->topic_results_len, err,
                   err == KAFKA_OPERATION_NOT_ATTEMPTED);
}

static void batch_unref(struct cn_req *req, struct txn_call *tc)
{
    if (--tc->pending == 0)
        answer_add(req, &tc->h, &tc->rs);
}

void cn_h_txn_answer(struct cn_broker *b, const struct cn_txn_answer *a)
{
    struct cn_req *req = a->token;
    if (a->kind == CN_TXN_REQ_PRODUCE_ADD) {
        if (req->api_key == CN_API_TXN_OFFSET_COMMIT)
            cn_h_txn_offset_commit_resume(b, req, a->error);
        else
            cn_h_produce_resume(b, req, a->error);
        return;
    }
    struct txn_call *tc = req->handler_state;
    switch (a->kind) {
    case CN_TXN_REQ_INIT_PID:
        answer_init_pid(req, &tc->h, a->error, a->producer_id,
                        a->producer_epoch);
        break;
    case CN_TXN_REQ_ADD_PARTS:
        set_all(&tc->rs, a->error);
        answer_add(req, &tc->h, &tc->rs);
        break;
    case CN_TXN_REQ_ADD_BATCHED:
        if (a->index >= 0 && a->index < tc->rs.results_by_transaction_len)
            result_set(&tc->rs.results_by_transaction[a->index], a->error);
        batch_unref(req, tc);
        break;
    case CN_TXN_REQ_ADD_OFFSETS:
        answer_add_offsets(req, &tc->h, a->error);
        break;
    case CN_TXN_REQ_END:
        answer_end_txn(req, &tc->h, a->error, a->producer_id,
                       a->producer_epoch);
        break;
    case CN_TXN_REQ_PRODUCE_ADD: break;
    }
}

/* ---- InitProducerId ----------------------------------------------------- */

void cn_txn_init_producer_id(struct cn_broker *b, struct cn_req *req,
                             const struct cn_req_header *h,
                             struct cn_bytes transactional_id,
                             int32_t timeout_ms, int64_t producer_id,
                             int16_t producer_epoch)
{
    char id[1024];
    /* The coordinator checks the rest (empty id, the timeout's range). */
    if (!cn_wire_cstr(transactional_id, id, sizeof id)) {
        answer_init_pid(req, h, KAFKA_INVALID_REQUEST, -1, -1);
        return;
    }
    if (!call_new(req, h)) {
        cn_req_bad(req, h, CN_ENOMEM);
        return;
    }
    struct cn_txn_request rq = request_for(CN_TXN_REQ_INIT_PID, req,
                                           h->api_version, id, producer_id,
                                           producer_epoch);
    rq.timeout_ms = timeout_ms;
    cn_txn_exec_request(b, &rq);
}

/* ---- AddPartitionsToTxn v4-5: batched, from a partition leader --------- */

/* One transaction of the batch: verified, or fed to the coordinator (its
 * answer comes through cn_h_txn_answer). */
static void add_batched_one(struct cn_broker *b, struct cn_req *req,
                            struct txn_call *tc, int32_t index,
                            const add_txn_request *qt)
{
    add_result *r = &tc->rs.results_by_transaction[index];
    char id[1024];
    if (!cn_wire_cstr(qt->transactional_id, id, sizeof id)) {
        result_set(r, KAFKA_INVALID_PRODUCER_ID_MAPPING);
        return;
    }
    /* VerifyOnly (v4): the producer check, then is each partition in the
     * id's Ongoing transaction. */
    const struct cn_txn_meta *m = NULL;
    if (qt->verify_only) {
        /* Cluster mode: a broker that does not lead the id's
         * __transaction_state partition in the image is not its
         * coordinator (Kafka's getTransactionState: NOT_COORDINATOR), even
         * if it still has the id from when it was; the asking leader maps
         * it to a retriable error.  Adds (v5, not VerifyOnly) go through
         * the machine, which answers the same. */
        int32_t node = -1;
        if (b->cfg->cluster_mode &&
            (cn_txn_remote_coordinator_is_remote(b, qt->transactional_id,
                                                 &node) ||
             node != b->node_id)) {
            result_set(r, KAFKA_NOT_COORDINATOR);
            return;
        }
        const struct cn_txn_coord *c = cn_txn_exec_coord(b);
        int16_t kerr = c ? cn_txn_check_batched(c, id, qt->producer_id,
                                                qt->producer_epoch)
                         : KAFKA_COORDINATOR_NOT_AVAILABLE;
        if (kerr) {
            result_set(r, kerr);
            return;
        }
        m = cn_txn_find(c, id);
    }
    size_t n = 0;
    for (int32_t i = 0; i < r->topic_results_len; i++)
        n += (size_t)r->topic_results[i].results_by_partition_len;
    struct cn_txn_tp *tps = cn_arena_calloc(&req->arena, n + 1, sizeof *tps);
    if (!tps) {
        result_set(r, KAFKA_COORDINATOR_NOT_AVAILABLE);
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
            if (qt->verify_only) {
                bool in = named && m && m->state == CN_TXN_ONGOING &&
                          cn_txn_meta_has_partition(m, topic, part);
                tr->results_by_partition[j].partition_error_code =
                    in ? KAFKA_NONE : KAFKA_INVALID_TXN_STATE;
                continue;
            }
            bool known = named && !cn_bytes_eq_str(tr->name, CN_TXN_TOPIC) &&
                         cn_partition_find(b, tr->name, part);
            if (!known) {
                tr->results_by_partition[j].partition_error_code =
                    KAFKA_UNKNOWN_TOPIC_OR_PARTITION;
                unknown = true;
                continue;
            }
            tps[n].topic = cn_arena_strdup(&req->arena, cn_bytes_str(topic));
            tps[n++].partition = part;
        }
    }
    if (qt->verify_only)
        return;
    struct cn_txn_request rq = request_for(CN_TXN_REQ_ADD_BATCHED, req,
                                           tc->h.api_version, id,
                                           qt->producer_id,
                                           qt->producer_epoch);
    rq.index = index;
    rq.has_unknown = unknown;
    rq.tps = tps;
    rq.ntps = n;
    tc->pending++;
    cn_txn_exec_request(b, &rq);
}

static void add_batched(struct cn_broker *b, struct cn_req *req,
                        const struct cn_req_header *h,
                        const struct cn_add_partitions_to_txn_request *rq)
{
    struct txn_call *tc = call_new(req, h);
    int32_t nt = rq->transactions_len > 0 ? rq->transactions_len : 0;
    if (!tc)
        goto nomem;
    tc->pending = 1;
    tc->rs.results_by_transaction = cn_arena_calloc(
        &req->arena, (size_t)nt + 1, sizeof *tc->rs.results_by_transaction);
    if (!tc->rs.results_by_transaction)
        goto nomem;
    tc->rs.results_by_transaction_len = nt;
    for (int32_t i = 0; i < nt; i++) {
        const add_txn_request *qt = &rq->transactions[i];
        add_result *r = &tc->rs.results_by_transaction[i];
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
        add_batched_one(b, req, tc, i, &rq->transactions[i]);
    batch_unref(req, tc);
    return;
nomem:
    cn_req_bad(req, h, CN_ENOMEM);
}

/* ---- AddPartitionsToTxn (v0-3) ----------------------------------------- */

void cn_h_add_partitions_to_txn(struct cn_broker *b, struct cn_req *req,
                                const struct cn_req_header *h,
                                struct cn_rd *body)
{
    struct cn_add_partitions_to_txn_request rq;
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
            answer_add(req, h, &rs);
            return;
        }
        add_batched(b, req, h, &rq);
        return;
    }
    bool txn_denied = !cn_authz(b, req, CN_ACL_OP_WRITE, CN_ACL_RT_TXN_ID,
                                rq.v3_and_below_transactional_id);
    struct txn_call *tc = call_new(req, h);
    if (!tc) {
        cn_req_bad(req, h, CN_ENOMEM);
        return;
    }
    struct cn_add_partitions_to_txn_response *rs = &tc->rs;
    int32_t nt = rq.v3_and_below_topics_len > 0 ? rq.v3_and_below_topics_len
                                                : 0;
    size_t ntps = 0;
    for (int32_t i = 0; i < nt; i++)
        if (rq.v3_and_below_topics[i].partitions_len > 0)
            ntps += (size_t)rq.v3_and_below_topics[i].partitions_len;
    struct cn_txn_tp *tps = cn_arena_calloc(&req->arena, ntps + 1,
                                            sizeof *tps);
    rs->results_by_topic_v3_and_below =
        cn_arena_calloc(&req->arena, (size_t)nt + 1,
                        sizeof *rs->results_by_topic_v3_and_below);
    if (!rs->results_by_topic_v3_and_below || !tps) {
        cn_req_bad(req, h, CN_ENOMEM);
        return;
    }
    rs->results_by_topic_v3_and_below_len = nt;
    bool unknown = false, any_denied = false;
    ntps = 0;
    for (int32_t i = 0; i < nt; i++) {
        const struct
            cn_add_partitions_to_txn_request_add_partitions_to_txn_topic *qt =
                &rq.v3_and_below_topics[i];
        add_topic_result *tr = &rs->results_by_topic_v3_and_below[i];
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
        bool topic_denied = !txn_denied &&
                            !cn_bytes_eq_str(qt->name, CN_TXN_TOPIC) &&
                            !cn_authz(b, req, CN_ACL_OP_WRITE, CN_ACL_RT_TOPIC,
                                      qt->name);
        char topic[CN_TOPIC_NAME_MAX + 1];
        bool named = cn_wire_cstr(qt->name, topic, sizeof topic);
        for (int32_t j = 0; j < np; j++) {
            tr->results_by_partition[j].partition_index = qt->partitions[j];
            if (topic_denied) {
                tr->results_by_partition[j].partition_error_code =
                    KAFKA_TOPIC_AUTHORIZATION_FAILED;
                any_denied = true;
            } else if (!cn_partition_find(b, qt->name, qt->partitions[j]) ||
                       cn_bytes_eq_str(qt->name, CN_TXN_TOPIC) || !named) {
                tr->results_by_partition[j].partition_error_code =
                    KAFKA_UNKNOWN_TOPIC_OR_PARTITION;
                unknown = true;
            } else {
                tps[ntps].topic = cn_arena_strdup(&req->arena,
                                                  cn_bytes_str(topic));
                tps[ntps++].partition = qt->partitions[j];
            }
        }
    }
    if (txn_denied) {
        set_all(rs, KAFKA_TRANSACTIONAL_ID_AUTHORIZATION_FAILED);
        answer_add(req, h, rs);
        return;
    }
    if (any_denied) {
        /* As Kafka: refused and unknown topics are named, nothing is
         * attempted for the rest. */
        set_all(rs, KAFKA_OPERATION_NOT_ATTEMPTED);
        answer_add(req, h, rs);
        return;
    }
    char id[1024];
    if (!cn_wire_cstr(rq.v3_and_below_transactional_id, id, sizeof id)) {
        set_all(rs, KAFKA_INVALID_REQUEST);
        answer_add(req, h, rs);
        return;
    }
    struct cn_txn_request tr = request_for(CN_TXN_REQ_ADD_PARTS, req,
                                           h->api_version, id,
                                           rq.v3_and_below_producer_id,
                                           rq.v3_and_below_producer_epoch);
    tr.has_unknown = unknown;
    tr.tps = tps;
    tr.ntps = ntps;
    cn_txn_exec_request(b, &tr);
}

/* ---- AddOffsetsToTxn ---------------------------------------------------- */

/* The group's __consumer_offsets partition joins the transaction, so the
 * commit or abort marker reaches the offsets the producer then sends with
 * TxnOffsetCommit. */
void cn_h_add_offsets_to_txn(struct cn_broker *b, struct cn_req *req,
                             const struct cn_req_header *h, struct cn_rd *body)
{
    struct cn_add_offsets_to_txn_request rq;
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
    char id[1024];
    if (!cn_wire_cstr(rq.transactional_id, id, sizeof id)) {
        answer_add_offsets(req, h, KAFKA_INVALID_REQUEST);
        return;
    }
    /* No group (null or empty): no partition, and the coordinator answers
     * INVALID_GROUP_ID once the producer passed its check; a group whose
     * partition is missing: a partition without a topic, and
     * COORDINATOR_NOT_AVAILABLE after that check. */
    bool no_group = cn_bytes_is_null(rq.group_id) || rq.group_id.len == 0;
    struct cn_partition *p = no_group
                                 ? NULL
                                 : cn_group_coord_partition(b, rq.group_id);
    struct cn_txn_tp *tp = cn_arena_calloc(&req->arena, 1, sizeof *tp);
    if (!tp) {
        answer_add_offsets(req, h, KAFKA_COORDINATOR_NOT_AVAILABLE);
        return;
    }
    if (!call_new(req, h)) {
        cn_req_bad(req, h, CN_ENOMEM);
        return;
    }
    if (p) {
        tp->topic = p->topic->name;
        tp->partition = p->index;
    }
    struct cn_txn_request tr = request_for(CN_TXN_REQ_ADD_OFFSETS, req,
                                           h->api_version, id, rq.producer_id,
                                           rq.producer_epoch);
    tr.tps = tp;
    tr.ntps = no_group ? 0 : 1;
    cn_txn_exec_request(b, &tr);
}

/* ---- EndTxn ------------------------------------------------------------- */

void cn_h_end_txn(struct cn_broker *b, struct cn_req *req,
                  const struct cn_req_header *h, struct cn_rd *body)
{
    struct cn_end_txn_request rq;
    int err = cn_end_txn_request_decode(body, &req->arena, h->api_version,
                                        &rq);
    if (err) {
        cn_req_bad(req, h, err);
        return;
    }
    if (!cn_authz(b, req, CN_ACL_OP_WRITE, CN_ACL_RT_TXN_ID,
                  rq.transactional_id)) {
        answer_end_txn(req, h, KAFKA_TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1,
                       -1);
        return;
    }
    char id[1024];
    if (!cn_wire_cstr(rq.transactional_id, id, sizeof id) ||
        (h->api_version >= 5 && b->cfg->cairn_transaction_version >= 2 &&
         !id[0])) {
        answer_end_txn(req, h, KAFKA_INVALID_REQUEST, -1, -1);
        return;
    }
    if (!call_new(req, h)) {
        cn_req_bad(req, h, CN_ENOMEM);
        return;
    }
    struct cn_txn_request tr = request_for(CN_TXN_REQ_END, req, h->api_version,
                                           id, rq.producer_id,
                                           rq.producer_epoch);
    tr.commit = rq.committed;
    cn_txn_exec_request(b, &tr);
}
