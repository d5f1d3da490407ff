/*
 * h_offset_commit.c - OffsetCommit and TxnOffsetCommit.
 *
 * Both become a list of commit items (one per partition, pointing at the
 * partition's error in the response being built) that one flow checks,
 * appends to the group's __consumer_offsets partition as one batch, and
 * applies once it is durable: to the committed offsets, or (for
 * TxnOffsetCommit, as a transactional batch of the producer) to the
 * producer's pending offsets, which the transaction's marker resolves.
 */
#include <string.h>

#include "node/authz.h"
#include "base/clock.h"
#include "base/failpoint.h"
#include "node/group_coord.h"
#include "node/group_int.h"
#include "handlers/handlers.h"
#include "proto/gen/msgs.h"
#include "proto/kerr.h"
#include "node/txn_exec.h"
#include "node/txn_remote.h"

/* Kafka's offset.metadata.max.bytes default. */
#define OFFSET_METADATA_MAX_BYTES 4096

/* One partition of either request. */
struct commit_item {
    struct cn_bytes topic;
    int32_t partition;
    int64_t offset;
    int32_t leader_epoch;
    struct cn_bytes metadata;
    int16_t *error; /* the response's field for it */
};

struct commit_op {
    struct cn_sync_waiter waiter; /* first: the sync module's handle */
    struct cn_req_header h;
    const char *group;
    struct cn_partition *gp; /* the group's __consumer_offsets part */
    struct commit_item *items;
    size_t n;
    int64_t producer_id; /* TxnOffsetCommit; -1 for OffsetCommit */
    int16_t producer_epoch;
    int64_t now;
    void (*answer)(struct commit_op *op); /* encodes and finishes */
    void *rs;                             /* the version's response */
    struct commit_op *held_next;          /* in held, see hold_until_gone */
};

/* Commits the fail point holds; one broker per process, as for the fail
 * points themselves. */
static struct commit_op *held;

static struct commit_op *op_new(struct cn_req *req,
                                const struct cn_req_header *h, size_t n,
                                void (*answer)(struct commit_op *op), void *rs)
{
    struct commit_op *op = cn_arena_calloc(&req->arena, 1, sizeof *op);
    if (!op)
        return NULL;
    op->items = cn_arena_calloc(&req->arena, n + 1, sizeof *op->items);
    if (!op->items)
        return NULL;
    op->waiter.req = req;
    op->h = *h;
    op->producer_id = -1;
    op->producer_epoch = -1;
    op->now = cn_clock_wall_ms();
    op->answer = answer;
    op->rs = rs;
    return op;
}

static void fail_items(struct commit_op *op, int16_t err)
{
    for (size_t i = 0; i < op->n; i++)
        if (!*op->items[i].error)
            *op->items[i].error = err;
}

static struct cn_offset_value item_value(const struct commit_op *op,
                                         const struct commit_item *it)
{
    struct cn_offset_value v = {
        .offset = it->offset,
        .leader_epoch = it->leader_epoch,
        .metadata = cn_bytes_is_null(it->metadata) ? cn_bytes_str("")
                                                   : it->metadata,
        .commit_timestamp_ms = op->now,
        .expire_timestamp_ms = -1,
    };
    return v;
}

/* offset_commit.wait_for_close (tests only): a durable commit is applied
 * and answered only once its client has gone, so the answer frees the
 * request at once, as when a client disconnects during the sync, which
 * otherwise happens only by luck.  cn_offset_commit_abandon ends it
 * (with cairn.fsync.group.commit=false, from net's abandon walk, where
 * the request is not freed yet). */
static bool hold_until_gone(struct commit_op *op)
{
    if (!CN_FAILPOINT("offset_commit.wait_for_close") ||
        cn_req_conn_closed(op->waiter.req))
        return false;
    op->held_next = held;
    held = op;
    return true;
}

static void commit_written(struct cn_broker *b, struct cn_sync_waiter *w)
{
    struct commit_op *op = (struct commit_op *)w;
    if (hold_until_gone(op))
        return;
    bool txn = op->producer_id >= 0;
    int16_t fail = cn_gc_write_kerr(w->err);
    /* The partition was unloaded meanwhile (its leadership went): the
     * new coordinator loads the record from its log. */
    if (!fail && !cn_gc_serves(b, op->gp))
        fail = KAFKA_NOT_COORDINATOR;
    /* The transaction may have ended (a timeout abort's marker) while the
     * records were being synced: its marker has then passed, and pending
     * offsets would wait for a marker that never comes. */
    struct cn_pentry_info pe;
    if (!fail && txn &&
        !(cn_pstate_get(op->gp->pstate, op->producer_id, &pe) &&
          pe.txn_first_offset >= 0))
        fail = KAFKA_INVALID_TXN_STATE;
    if (fail)
        fail_items(op, fail);
    for (size_t i = 0; i < op->n && !fail; i++) {
        struct commit_item *it = &op->items[i];
        if (*it->error)
            continue;
        char *topic = cn_gc_cstr(w->req, it->topic);
        struct cn_offset_value v = item_value(op, it);
        int rc = !topic ? CN_ENOMEM
                 : txn
                     ? cn_offsets_txn_put(b->gc->offsets, op->group,
                                          op->producer_id, op->producer_epoch,
                                          topic, it->partition, &v)
                     : cn_offsets_put(b->gc->offsets, op->group, topic,
                                      it->partition, &v);
        if (rc)
            *it->error = KAFKA_COORDINATOR_NOT_AVAILABLE;
    }
    /* Answering may free the request, and op lives in its arena. */
    struct cn_partition *gp = op->gp;
    op->answer(op);
    cn_gc_maybe_compact(b, gp);
}

void cn_offset_commit_abandon(struct cn_broker *b, struct cn_req *req)
{
    for (struct commit_op **pp = &held; *pp; pp = &(*pp)->held_next)
        if ((*pp)->waiter.req == req) {
            struct commit_op *op = *pp;
            *pp = op->held_next;
            /* Not from here: net frees nothing during its abandon walk.
             * The next group-commit round ends the commit, as the round
             * that made it durable would have after the close. */
            cn_sync_appended(b, op->gp);
            cn_sync_wait(b, &op->waiter);
            return;
        }
}

/* Refuses partitions that do not exist or carry too much metadata; the
 * rest go on. */
static void check_items(struct cn_broker *b, struct commit_op *op)
{
    for (size_t i = 0; i < op->n; i++) {
        struct commit_item *it = &op->items[i];
        if (!cn_partition_find(b, it->topic, it->partition))
            *it->error = KAFKA_UNKNOWN_TOPIC_OR_PARTITION;
        else if (it->metadata.len > OFFSET_METADATA_MAX_BYTES)
            *it->error = KAFKA_OFFSET_METADATA_TOO_LARGE;
    }
}

/* Kafka's checks for committing offsets: a whole-request refusal (group,
 * transactional id) sets every item's error; topics without READ are
 * refused one by one, before any other error of theirs.  False when
 * nothing is to be done. */
static bool authz_items(struct cn_broker *b, struct cn_req *req,
                        struct commit_op *op, struct cn_bytes txn_id,
                        struct cn_bytes group)
{
    int16_t all = KAFKA_NONE;
    if (!cn_bytes_is_null(txn_id) &&
        !cn_authz(b, req, CN_ACL_OP_WRITE, CN_ACL_RT_TXN_ID, txn_id))
        all = KAFKA_TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
    else if (!cn_authz(b, req, CN_ACL_OP_READ, CN_ACL_RT_GROUP, group))
        all = KAFKA_GROUP_AUTHORIZATION_FAILED;
    for (size_t i = 0; i < op->n; i++) {
        struct commit_item *it = &op->items[i];
        if (all)
            *it->error = all;
        else if (!cn_authz(b, req, CN_ACL_OP_READ, CN_ACL_RT_TOPIC, it->topic))
            *it->error = KAFKA_TOPIC_AUTHORIZATION_FAILED;
    }
    return all == KAFKA_NONE;
}

/* Appends the records of the items still without an error; answers at
 * once when there are none or the append fails. */
static void commit_start(struct cn_broker *b, struct cn_req *req,
                         struct commit_op *op)
{
    struct cn_bytes *keys = cn_arena_calloc(&req->arena, op->n + 1,
                                            sizeof *keys);
    struct cn_bytes *vals = cn_arena_calloc(&req->arena, op->n + 1,
                                            sizeof *vals);
    if (!keys || !vals) {
        cn_req_bad(req, &op->h, CN_ENOMEM);
        return;
    }
    size_t k = 0;
    struct cn_wr kw, vw;
    cn_wr_init(&kw, 64);
    cn_wr_init(&vw, 64);
    for (size_t i = 0; i < op->n; i++) {
        struct commit_item *it = &op->items[i];
        if (*it->error)
            continue;
        char *topic = cn_gc_cstr(req, it->topic);
        struct cn_offset_value v = item_value(op, it);
        cn_wr_reset(&kw);
        cn_wr_reset(&vw);
        if (!topic || cn_offsets_record(&kw, &vw, op->group, topic,
                                        it->partition, &v) != 0) {
            *it->error = KAFKA_INVALID_REQUEST;
            continue;
        }
        keys[k] = cn_gc_arena_bytes(req, &kw);
        vals[k] = cn_gc_arena_bytes(req, &vw);
        k++;
    }
    cn_wr_fini(&kw);
    cn_wr_fini(&vw);
    op->waiter.finish = commit_written;
    if (k == 0) {
        op->answer(op);
        return;
    }
    int rc = cn_gc_write(b, op->gp, keys, vals, k, op->producer_id,
                         op->producer_epoch, &op->waiter);
    if (rc != 0) {
        fail_items(op, cn_gc_write_kerr(rc));
        op->answer(op);
    }
}

/* The group id as a C string and its partition, or the error for all. */
static int16_t resolve_group(struct cn_broker *b, struct cn_req *req,
                             struct cn_bytes group_id, struct commit_op *op)
{
    op->group = cn_gc_cstr(req, group_id);
    if (!op->group || op->group[0] == '\0')
        return KAFKA_INVALID_GROUP_ID;
    op->gp = cn_group_coord_partition(b, group_id);
    return op->gp ? cn_group_coord_check(b, group_id)
                  : KAFKA_COORDINATOR_NOT_AVAILABLE;
}

static const char *opt_cstr(struct cn_req *req, struct cn_bytes s)
{
    return cn_bytes_is_null(s) ? NULL : cn_gc_cstr(req, s);
}

/* ---- OffsetCommit ------------------------------------------------------- */

static void answer_commit(struct commit_op *op)
{
    struct cn_req *req = op->waiter.req;
    cn_resp_begin(req, &op->h);
    cn_offset_commit_response_encode(&req->resp, op->h.api_version, op->rs);
    cn_req_done(req);
}

void cn_h_offset_commit(struct cn_broker *b, struct cn_req *req,
                        const struct cn_req_header *h, struct cn_rd *body)
{
    struct cn_offset_commit_request rq;
    int err = cn_offset_commit_request_decode(body, &req->arena,
                                              h->api_version, &rq);
    if (err) {
        cn_req_bad(req, h, err);
        return;
    }
    struct cn_offset_commit_response *rs = cn_arena_calloc(&req->arena, 1,
                                                           sizeof *rs);
    int32_t nt = rq.topics_len > 0 ? rq.topics_len : 0;
    size_t n = 0;
    for (int32_t i = 0; i < nt; i++)
        n += rq.topics[i].partitions_len > 0
                 ? (size_t)rq.topics[i].partitions_len
                 : 0;
    struct commit_op *op = rs ? op_new(req, h, n, answer_commit, rs) : NULL;
    if (op) {
        cn_offset_commit_response_init(rs);
        rs->topics = cn_arena_calloc(&req->arena, (size_t)nt + 1,
                                     sizeof *rs->topics);
    }
    if (!op || !rs->topics) {
        cn_req_bad(req, h, CN_ENOMEM);
        return;
    }
    rs->topics_len = nt;
    for (int32_t i = 0; i < nt; i++) {
        const struct cn_offset_commit_request_offset_commit_request_topic *qt =
            &rq.topics[i];
        struct cn_offset_commit_response_offset_commit_response_topic *rt =
            &rs->topics[i];
        rt->name = qt->name;
        int32_t np = qt->partitions_len > 0 ? qt->partitions_len : 0;
        rt->partitions = cn_arena_calloc(&req->arena, (size_t)np + 1,
                                         sizeof *rt->partitions);
        if (!rt->partitions) {
            cn_req_bad(req, h, CN_ENOMEM);
            return;
        }
        rt->partitions_len = np;
        for (int32_t j = 0; j < np; j++) {
            const struct
                cn_offset_commit_request_offset_commit_request_partition *qp =
                    &qt->partitions[j];
            rt->partitions[j].partition_index = qp->partition_index;
            op->items[op->n++] =
                (struct commit_item){qt->name,
                                     qp->partition_index,
                                     qp->committed_offset,
                                     qp->committed_leader_epoch,
                                     qp->committed_metadata,
                                     &rt->partitions[j].error_code};
        }
    }
    check_items(b, op);
    if (!authz_items(b, req, op, CN_BYTES_NULL, rq.group_id)) {
        answer_commit(op);
        return;
    }
    int16_t kerr = resolve_group(b, req, rq.group_id, op);
    if (!kerr) {
        kerr = cn_groups_check_commit(b->gc->groups, op->group,
                                      rq.generation_id_or_member_epoch,
                                      cn_gc_cstr(req, rq.member_id),
                                      opt_cstr(req, rq.group_instance_id),
                                      false, op->now);
        cn_gc_rearm(b);
        if (kerr == KAFKA_ILLEGAL_GENERATION && h->api_version >= 9 &&
            !cn_groups_exists(b->gc->groups, op->group))
            kerr = KAFKA_GROUP_ID_NOT_FOUND;
    }
    if (kerr) {
        fail_items(op, kerr);
        answer_commit(op);
        return;
    }
    commit_start(b, req, op);
}

/* ---- TxnOffsetCommit ---------------------------------------------------- */

static void answer_txn_commit(struct commit_op *op)
{
    struct cn_req *req = op->waiter.req;
    cn_resp_begin(req, &op->h);
    cn_txn_offset_commit_response_encode(&req->resp, op->h.api_version,
                                         op->rs);
    cn_req_done(req);
}

/*
 * Before the producer's offsets are taken: the group's partition must be
 * in its ongoing transaction (AddOffsetsToTxn), or no marker would end
 * them; its epoch must be current on that partition; and (KIP-447) a
 * producer that carries the consumer's generation is checked like a
 * member.  One without (generation -1, no member id, as older clients
 * send) is trusted to the transaction's own fencing.
 */
static int16_t txn_commit_check(struct cn_broker *b, struct cn_req *req,
                                const struct cn_txn_offset_commit_request *rq,
                                const struct commit_op *op,
                                const int16_t *remote_kerr)
{
    int16_t v = op->h.api_version;
    int16_t kerr = remote_kerr
                       ? *remote_kerr
                       : cn_txn_exec_verify(b, rq->transactional_id,
                                            rq->producer_id,
                                            rq->producer_epoch,
                                            CN_OFFSETS_TOPIC, op->gp->index);
    struct cn_pentry_info pe;
    if (!kerr && cn_pstate_get(op->gp->pstate, rq->producer_id, &pe) &&
        pe.epoch > rq->producer_epoch)
        kerr = KAFKA_INVALID_PRODUCER_EPOCH;
    if (kerr == KAFKA_INVALID_PRODUCER_EPOCH && v >= 3)
        kerr = KAFKA_PRODUCER_FENCED;
    if (kerr || (rq->generation_id < 0 && rq->member_id.len <= 0))
        return kerr;
    return cn_groups_check_commit(b->gc->groups, op->group, rq->generation_id,
                                  cn_gc_cstr(req, rq->member_id),
                                  opt_cstr(req, rq->group_instance_id), true,
                                  op->now);
}

/* A TxnOffsetCommit v5 waiting for its implicit add
 * (req->handler_state). */
struct txn_commit_wait {
    struct commit_op *op;
    struct cn_txn_offset_commit_request rq;
    /* Cluster mode, the transaction's coordinator on another broker: the
     * group's partition as asked of it (txn_remote.h). */
    struct cn_req *req;
    int16_t version; /* as sent: <= 3 knows no TRANSACTION_ABORTABLE */
    struct cn_txn_remote_tp tp;
};

static void txn_commit_go(struct cn_broker *b, struct cn_req *req,
                          const struct cn_txn_offset_commit_request *rq,
                          struct commit_op *op, const int16_t *remote_kerr)
{
    int16_t kerr = txn_commit_check(b, req, rq, op, remote_kerr);
    if (kerr) {
        fail_items(op, kerr);
        answer_txn_commit(op);
        return;
    }
    commit_start(b, req, op);
}

/* The add is durable (or failed: the check answers). */
void cn_h_txn_offset_commit_resume(struct cn_broker *b, struct cn_req *req,
                                   int16_t err)
{
    struct txn_commit_wait *w = req->handler_state;
    (void)err;
    txn_commit_go(b, req, &w->rq, w->op, NULL);
}

/* The remote coordinator answered.  Kafka's group coordinator passes the
 * verification's error on as it is (after the AddPartitionsToTxnManager's
 * own mapping); NOT_ENOUGH_REPLICAS is the produce path's only. */
static void txn_commit_remote_done(struct cn_broker *b, void *arg)
{
    struct txn_commit_wait *w = arg;
    int16_t kerr = cn_txn_remote_coord_error(w->tp.error, w->version <= 3);
    txn_commit_go(b, w->req, &w->rq, w->op, &kerr);
}

/*
 * Cluster mode: this broker coordinates the group, but the transactional
 * id's coordinator is another broker (or none is known).  The group's
 * partition is asked of it (added for a TV2 v5 request, else verified)
 * before the offsets are taken.  True: taken, it goes on in
 * txn_commit_remote_done.
 */
static bool txn_commit_remote(struct cn_broker *b, struct cn_req *req,
                              const struct cn_txn_offset_commit_request *rq,
                              struct commit_op *op, int16_t version, bool v5)
{
    int32_t node = -1;
    if (!b->cfg->cluster_mode ||
        !b->cfg->transaction_partition_verification_enable ||
        (!cn_txn_remote_coordinator_is_remote(b, rq->transactional_id,
                                              &node) &&
         node == b->node_id))
        return false;
    struct txn_commit_wait *w = cn_arena_calloc(&req->arena, 1, sizeof *w);
    if (!w)
        return false; /* the local verifier refuses */
    w->op = op;
    w->rq = *rq;
    w->req = req;
    w->version = version;
    w->tp = (struct cn_txn_remote_tp){op->gp->topic->name, op->gp->index,
                                      KAFKA_NONE};
    req->handler_state = w;
    bool add = v5 && b->cfg->cairn_transaction_version >= 2;
    if (!cn_txn_remote_check(b, rq->transactional_id, rq->producer_id,
                             rq->producer_epoch, add, &w->tp, 1,
                             txn_commit_remote_done, w))
        txn_commit_remote_done(b, w); /* answered already */
    return true;
}

void cn_h_txn_offset_commit(struct cn_broker *b, struct cn_req *req,
                            const struct cn_req_header *h, struct cn_rd *body)
{
    struct cn_txn_offset_commit_request rq;
    const struct cn_req_header *h0 = h;
    /* TxnOffsetCommit v5 (Kafka 4.x, KIP-890 part 2) is v4 on the wire; it
     * says the client uses transaction version 2 and sent no
     * AddOffsetsToTxn, so the group's partition joins the transaction
     * here.  The schemas stop at v4: as for Produce v12, the header's tag
     * buffer is still in the body, and v5 is decoded and answered as v4. */
    bool v5 = h->api_version >= 5;
    struct cn_req_header hv = *h;
    if (v5) {
        cn_rd_skip_tags(body);
        hv.api_version = 4;
    }
    h = &hv;
    int err = cn_txn_offset_commit_request_decode(body, &req->arena,
                                                  h->api_version, &rq);
    if (err) {
        cn_req_bad(req, h, err);
        return;
    }
    struct cn_txn_offset_commit_response *rs = cn_arena_calloc(&req->arena, 1,
                                                               sizeof *rs);
    int32_t nt = rq.topics_len > 0 ? rq.topics_len : 0;
    size_t n = 0;
    for (int32_t i = 0; i < nt; i++)
        n += rq.topics[i].partitions_len > 0
                 ? (size_t)rq.topics[i].partitions_len
                 : 0;
    struct commit_op *op = rs ? op_new(req, h, n, answer_txn_commit, rs)
                              : NULL;
    if (op) {
        cn_txn_offset_commit_response_init(rs);
        rs->topics = cn_arena_calloc(&req->arena, (size_t)nt + 1,
                                     sizeof *rs->topics);
    }
    if (!op || !rs->topics) {
        cn_req_bad(req, h, CN_ENOMEM);
        return;
    }
    op->producer_id = rq.producer_id;
    op->producer_epoch = rq.producer_epoch;
    rs->topics_len = nt;
    for (int32_t i = 0; i < nt; i++) {
        const struct
            cn_txn_offset_commit_request_txn_offset_commit_request_topic *qt =
                &rq.topics[i];
        struct cn_txn_offset_commit_response_txn_offset_commit_response_topic
            *rt = &rs->topics[i];
        rt->name = qt->name;
        int32_t np = qt->partitions_len > 0 ? qt->partitions_len : 0;
        rt->partitions = cn_arena_calloc(&req->arena, (size_t)np + 1,
                                         sizeof *rt->partitions);
        if (!rt->partitions) {
            cn_req_bad(req, h, CN_ENOMEM);
            return;
        }
        rt->partitions_len = np;
        for (int32_t j = 0; j < np; j++) {
            const struct
                cn_txn_offset_commit_request_txn_offset_commit_request_partition
                    *qp = &qt->partitions[j];
            rt->partitions[j].partition_index = qp->partition_index;
            op->items[op->n++] =
                (struct commit_item){qt->name,
                                     qp->partition_index,
                                     qp->committed_offset,
                                     qp->committed_leader_epoch,
                                     qp->committed_metadata,
                                     &rt->partitions[j].error_code};
        }
    }
    check_items(b, op);
    if (!authz_items(b, req, op, rq.transactional_id, rq.group_id)) {
        answer_txn_commit(op);
        return;
    }
    int16_t kerr = resolve_group(b, req, rq.group_id, op);
    if (kerr) {
        fail_items(op, kerr);
        answer_txn_commit(op);
        return;
    }
    if (txn_commit_remote(b, req, &rq, op, h0->api_version, v5))
        return;
    if (v5) {
        /* Added (durably) first; the request then resumes and finds the
         * partition in the transaction.  A refused add resumes it too, so
         * the check answers. */
        struct txn_commit_wait *w = cn_arena_alloc(&req->arena, sizeof *w);
        if (!w) {
            cn_req_bad(req, h, CN_ENOMEM);
            return;
        }
        w->op = op;
        w->rq = rq;
        req->handler_state = w;
        struct cn_txn_tp tp = {(char *)op->gp->topic->name, op->gp->index};
        struct cn_txn_request tr = {
            .kind = CN_TXN_REQ_PRODUCE_ADD,
            .token = req,
            .api_version = h0->api_version,
            .producer_id = rq.producer_id,
            .producer_epoch = rq.producer_epoch,
            .produce_v12 = true,
            .tps = &tp,
            .ntps = 1,
        };
        if (cn_txn_exec_produce_add(b, &tr))
            return;
    }
    txn_commit_go(b, req, &rq, op, NULL);
}
