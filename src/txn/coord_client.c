/*
 * coord_client.c - the transactional producer's own APIs: InitProducerId
 * (with a transactional id), AddPartitionsToTxn v0-3, AddOffsetsToTxn,
 * EndTxn.  These decide what the client may do and build the next
 * metadata; they never change the table themselves but hand the change
 * to cn_tc_write (coord.c), whose `then` answers once it is durable.  A
 * busy id parks the request rather than bouncing the client.
 */
#include <errno.h>
#include <string.h>

#include "base/say.h"
#include "proto/kerr.h"
#include "txn/coord_int.h"

/* KIP-588: PRODUCER_FENCED is new; older request versions get what their
 * clients know for it. */
int16_t cn_tc_fenced_error(enum cn_txn_req_kind kind, int16_t version)
{
    int16_t first_with_fenced = kind == CN_TXN_REQ_INIT_PID ? 4 : 2;
    return version >= first_with_fenced ? KAFKA_PRODUCER_FENCED
                                        : KAFKA_INVALID_PRODUCER_EPOCH;
}

/* Parks rq on e, or answers CONCURRENT_TRANSACTIONS when it may not. */
static void park_or_answer(struct txn_ctx *x, const struct cn_txn_request *rq,
                           struct txn_entry *e, bool late)
{
    if (late || !cn_tc_park(x, rq, e, PARK_BUSY))
        cn_tc_answer(x, rq, KAFKA_CONCURRENT_TRANSACTIONS, -1, -1);
}

/* A request that needs a producer id none of which is durable yet waits
 * for the seam (-EAGAIN); any other error is answered. */
static void pid_failed(struct txn_ctx *x, const struct cn_txn_request *rq,
                       int rc)
{
    if (rc == -EAGAIN && cn_tc_park(x, rq, NULL, PARK_PIDS))
        return;
    cn_tc_answer(x, rq, KAFKA_COORDINATOR_NOT_AVAILABLE, -1, -1);
}

/* ---- InitProducerId ----------------------------------------------------- */

int cn_tc_next_epoch(struct txn_ctx *x, struct cn_txn_meta *m)
{
    if (m->producer_id >= 0 && m->producer_epoch < CN_TXN_EPOCH_LAST_USABLE) {
        m->last_producer_epoch = m->producer_epoch;
        m->producer_epoch++;
        return 0;
    }
    int64_t pid;
    int rc = cn_tc_take_pid(x, &pid);
    if (rc)
        return rc;
    m->prev_producer_id = m->producer_id;
    m->producer_id = pid;
    m->producer_epoch = 0;
    m->last_producer_epoch = -1;
    return 0;
}

void cn_tc_init_pid(struct txn_ctx *x, const struct cn_txn_request *rq,
                    bool late)
{
    struct cn_txn_coord *c = x->c;
    const char *id = rq->transactional_id;
    if (rq->timeout_ms <= 0 || rq->timeout_ms > c->cfg.max_timeout_ms) {
        cn_tc_answer(x, rq, KAFKA_INVALID_TRANSACTION_TIMEOUT, -1, -1);
        return;
    }
    struct txn_entry *e = cn_tc_entry_find(c, id);
    if (!e) {
        e = cn_tc_entry_new(c, id);
        if (!e) {
            cn_tc_answer(x, rq, KAFKA_COORDINATOR_NOT_AVAILABLE, -1, -1);
            return;
        }
    }
    if (cn_tc_entry_waits(e)) {
        park_or_answer(x, rq, e, late);
        return;
    }
    /* v3+ (KIP-360): a client that names its id and epoch must be the
     * current instance. */
    if (rq->producer_id >= 0 && e->meta.producer_id >= 0) {
        if (rq->producer_id != e->meta.producer_id &&
            rq->producer_id != e->meta.prev_producer_id) {
            cn_tc_answer(x, rq, KAFKA_INVALID_PRODUCER_ID_MAPPING, -1, -1);
            return;
        }
        if (rq->producer_epoch != e->meta.producer_epoch &&
            rq->producer_id == e->meta.producer_id) {
            cn_tc_answer(x, rq, cn_tc_fenced_error(rq->kind, rq->api_version),
                         -1, -1);
            return;
        }
    }
    struct cn_txn_meta next;
    cn_txn_meta_init(&next);
    /* The fence's one bump is also the TV2 abort's (KAFKA-19367), with
     * the same producer id (cn_tc_abort_epoch); the new instance's retry
     * bumps once more. */
    bool fence = e->meta.state == CN_TXN_ONGOING;
    int rc = cn_txn_meta_copy(&next, &e->meta);
    if (!rc)
        rc = fence ? cn_tc_abort_epoch(x, &next) : cn_tc_next_epoch(x, &next);
    if (rc) {
        cn_txn_meta_fini(&next);
        pid_failed(x, rq, rc);
        return;
    }
    next.last_update_ms = x->now->wall_ms;
    if (fence) {
        /* Fence: the old instance's transaction is aborted under the new
         * epoch (PrepareEpochFence then PrepareAbort in Kafka, which
         * stores only the PrepareAbort). */
        CN_INFO("transactional id %s: fencing producer %lld epoch %d; its "
                "open transaction is aborted",
                id, (long long)e->meta.producer_id, e->meta.producer_epoch);
        next.state = CN_TXN_PREPARE_ABORT;
        e->decide_us = x->now->mono_us;
        e->commit = false;
        cn_tc_write(x, e, &next, THEN_FENCE, NULL, CN_TXN_WRITE_DECISION);
        cn_tc_answer(x, rq, KAFKA_CONCURRENT_TRANSACTIONS, -1, -1);
        return;
    }
    next.state = CN_TXN_EMPTY;
    next.timeout_ms = rq->timeout_ms;
    next.txn_start_ms = -1;
    /* A new instance: which transaction version it speaks shows in its
     * first transaction (AddPartitionsToTxn: TV1; a produce with no add,
     * or EndTxn v5: TV2). */
    next.client_tv = 0;
    cn_txn_meta_clear_partitions(&next);
    cn_tc_write(x, e, &next, THEN_ANSWER, rq, CN_TXN_WRITE_CHANGE);
}

/* ---- common checks ------------------------------------------------------ */

/* Checks the caller is the current instance of an existing id.  Returns a
 * Kafka error, or NONE; *out is set with NONE and CONCURRENT_TRANSACTIONS
 * (the caller may wait). */
static int16_t check_producer(struct txn_ctx *x,
                              const struct cn_txn_request *rq,
                              struct txn_entry **out)
{
    struct txn_entry *e = cn_tc_entry_find(x->c, rq->transactional_id);
    if (!e || e->meta.producer_id != rq->producer_id)
        return KAFKA_INVALID_PRODUCER_ID_MAPPING;
    if (e->meta.producer_epoch != rq->producer_epoch)
        return cn_tc_fenced_error(rq->kind, rq->api_version);
    *out = e;
    return cn_tc_entry_waits(e) ? KAFKA_CONCURRENT_TRANSACTIONS : KAFKA_NONE;
}

/* check_producer, parking or answering what it finds.  True: go on. */
static bool producer_ok(struct txn_ctx *x, const struct cn_txn_request *rq,
                        bool late, struct txn_entry **out)
{
    struct txn_entry *e = NULL;
    int16_t kerr = check_producer(x, rq, &e);
    if (kerr == KAFKA_CONCURRENT_TRANSACTIONS) {
        park_or_answer(x, rq, e, late);
        return false;
    }
    if (kerr) {
        cn_tc_answer(x, rq, kerr, -1, -1);
        return false;
    }
    *out = e;
    return true;
}

/* ---- AddPartitionsToTxn (v0-3) ----------------------------------------- */

void cn_tc_add_parts(struct txn_ctx *x, const struct cn_txn_request *rq,
                     bool late)
{
    struct txn_entry *e = NULL;
    if (!producer_ok(x, rq, late, &e))
        return;
    /* Adds its partitions itself: a TV1 client. */
    cn_tc_add_write(x, e, rq, 1);
}

/* ---- AddOffsetsToTxn ---------------------------------------------------- */

/* The group's __consumer_offsets partition joins the transaction, so the
 * commit or abort marker reaches the offsets the producer then sends with
 * TxnOffsetCommit. */
void cn_tc_add_offsets(struct txn_ctx *x, const struct cn_txn_request *rq,
                       bool late)
{
    struct txn_entry *e = NULL;
    if (!producer_ok(x, rq, late, &e))
        return;
    /* After the producer check, as Kafka (its partitionFor needs no
     * partition; Cairn cannot add one that is missing: retriable). */
    if (rq->ntps == 0 || !rq->tps[0].topic) {
        cn_tc_answer(x, rq,
                     rq->ntps ? KAFKA_COORDINATOR_NOT_AVAILABLE
                              : KAFKA_INVALID_GROUP_ID,
                     -1, -1);
        return;
    }
    const char *topic = rq->tps[0].topic;
    int32_t partition = rq->tps[0].partition;
    bool ongoing = e->meta.state == CN_TXN_ONGOING;
    if (ongoing && cn_txn_meta_has_partition(&e->meta, topic, partition)) {
        cn_tc_answer(x, rq, KAFKA_NONE, -1, -1);
        return;
    }
    struct cn_txn_meta next;
    cn_txn_meta_init(&next);
    int rc = cn_txn_meta_copy(&next, &e->meta);
    if (rc == 0 && !ongoing)
        cn_txn_meta_clear_partitions(&next);
    if (rc == 0)
        rc = cn_txn_meta_add_partition(&next, topic, partition);
    if (rc != 0) {
        cn_txn_meta_fini(&next);
        cn_tc_answer(x, rq, KAFKA_COORDINATOR_NOT_AVAILABLE, -1, -1);
        return;
    }
    if (!ongoing)
        next.txn_start_ms = x->now->wall_ms;
    next.state = CN_TXN_ONGOING;
    next.last_update_ms = x->now->wall_ms;
    cn_tc_write(x, e, &next, THEN_ANSWER, rq, CN_TXN_WRITE_CHANGE);
}

/* ---- EndTxn ------------------------------------------------------------- */

/* Answers an EndTxn with m's id and epoch (the next id at 0 while one is
 * handed out). */
static void answer_end(struct txn_ctx *x, const struct cn_txn_request *rq,
                       int16_t err, const struct cn_txn_meta *m)
{
    if (err || !m) {
        cn_tc_answer(x, rq, err, -1, -1);
        return;
    }
    bool rotating = m->next_producer_id >= 0;
    cn_tc_answer(x, rq, err, rotating ? m->next_producer_id : m->producer_id,
                 rotating ? 0 : m->producer_epoch);
}

/* A TV2 EndTxn decides the transaction and bumps the epoch in the same
 * record (Kafka's prepareAbortOrCommit); at the last usable epoch the
 * next producer id is allocated now and taken on at completion.  `bare`:
 * an abort with no transaction open (TV2 allows it), which starts now. */
static void end_tv2_prepare(struct txn_ctx *x, struct txn_entry *e,
                            const struct cn_txn_request *rq, bool commit,
                            bool bare)
{
    /* INT16_MAX is a coordinator abort's epoch, never handed out; a bump
     * past it would wrap. */
    if (e->meta.producer_epoch > CN_TXN_EPOCH_LAST_USABLE) {
        cn_tc_answer(x, rq, KAFKA_PRODUCER_FENCED, -1, -1);
        return;
    }
    struct cn_txn_meta next;
    cn_txn_meta_init(&next);
    int rc = cn_txn_meta_copy(&next, &e->meta);
    if (!rc && e->meta.producer_epoch >= CN_TXN_EPOCH_LAST_USABLE) {
        int64_t pid;
        rc = cn_tc_take_pid(x, &pid);
        if (!rc)
            next.next_producer_id = pid;
    }
    if (rc) {
        cn_txn_meta_fini(&next);
        pid_failed(x, rq, rc);
        return;
    }
    int64_t now = x->now->wall_ms;
    next.last_producer_epoch = e->meta.producer_epoch;
    next.producer_epoch = (int16_t)(e->meta.producer_epoch + 1);
    next.state = commit ? CN_TXN_PREPARE_COMMIT : CN_TXN_PREPARE_ABORT;
    next.client_tv = 2;
    next.last_update_ms = now;
    if (bare) {
        cn_txn_meta_clear_partitions(&next);
        next.txn_start_ms = now;
    }
    e->decide_us = x->now->mono_us;
    e->commit = commit;
    cn_tc_write(x, e, &next, THEN_END, rq, CN_TXN_WRITE_DECISION);
}

/* A retry answered with success: with the epoch the client goes on with.
 * After a coordinator abort at the last usable epoch the stored epoch is
 * INT16_MAX, which no client may use: the retry is the next bump, to a
 * new producer id at epoch 0 (Empty, as InitProducerId leaves it), made
 * durable before the answer. */
static void answer_retry(struct txn_ctx *x, struct txn_entry *e,
                         const struct cn_txn_request *rq)
{
    if (e->meta.producer_epoch <= CN_TXN_EPOCH_LAST_USABLE) {
        answer_end(x, rq, KAFKA_NONE, &e->meta);
        return;
    }
    struct cn_txn_meta next;
    cn_txn_meta_init(&next);
    int rc = cn_txn_meta_copy(&next, &e->meta);
    if (!rc)
        rc = cn_tc_next_epoch(x, &next);
    if (rc) {
        cn_txn_meta_fini(&next);
        pid_failed(x, rq, rc);
        return;
    }
    next.state = CN_TXN_EMPTY;
    next.client_tv = 2; /* tells a repeat of this retry apart (end_tv2) */
    cn_txn_meta_clear_partitions(&next);
    next.last_update_ms = x->now->wall_ms;
    cn_tc_write(x, e, &next, THEN_ANSWER, rq, CN_TXN_WRITE_CHANGE);
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
static void end_tv2(struct txn_ctx *x, const struct cn_txn_request *rq,
                    bool late)
{
    struct txn_entry *e = cn_tc_entry_find(x->c, rq->transactional_id);
    if (!e || e->meta.state == CN_TXN_DEAD) {
        cn_tc_answer(x, rq, KAFKA_INVALID_PRODUCER_ID_MAPPING, -1, -1);
        return;
    }
    const struct cn_txn_meta *m = &e->meta;
    enum cn_txn_state s = m->state;
    if (cn_tc_entry_waits(e)) {
        /* Kafka answers a retry during the markers with
         * CONCURRENT_TRANSACTIONS too; waiting gives the final answer. */
        park_or_answer(x, rq, e, late);
        return;
    }
    bool retry_overflow = m->prev_producer_id >= 0 &&
                          m->prev_producer_id == rq->producer_id &&
                          rq->producer_epoch == CN_TXN_EPOCH_LAST_USABLE &&
                          m->producer_epoch == 0;
    bool retry_bump = m->producer_id == rq->producer_id &&
                      m->producer_epoch == rq->producer_epoch + 1;
    if (m->producer_id != rq->producer_id && !retry_overflow) {
        cn_tc_answer(x, rq, KAFKA_INVALID_PRODUCER_ID_MAPPING, -1, -1);
        return;
    }
    /* A repeat of the retry that moved to a new id after a coordinator
     * abort at the last usable epoch (answer_retry wrote Empty, keeping
     * client_tv 2; InitProducerId's Empty has client_tv 0, so its fenced
     * instance stays fenced). */
    if (s == CN_TXN_EMPTY && retry_overflow && !rq->commit &&
        m->client_tv == 2) {
        answer_end(x, rq, KAFKA_NONE, m);
        return;
    }
    bool same = rq->producer_epoch == m->producer_epoch &&
                m->producer_id == rq->producer_id;
    bool complete = s == CN_TXN_COMPLETE_COMMIT || s == CN_TXN_COMPLETE_ABORT;
    bool valid = complete ? retry_bump || retry_overflow || same : same;
    if (!valid) {
        cn_tc_answer(x, rq, KAFKA_PRODUCER_FENCED, -1, -1);
        return;
    }
    bool retry = retry_bump || retry_overflow;
    bool commit = rq->commit;
    switch (s) {
    case CN_TXN_ONGOING: end_tv2_prepare(x, e, rq, commit, false); return;
    case CN_TXN_COMPLETE_COMMIT:
        if (commit && retry)
            answer_retry(x, e, rq);
        else if (commit || retry)
            cn_tc_answer(x, rq, KAFKA_INVALID_TXN_STATE, -1, -1);
        else
            end_tv2_prepare(x, e, rq, false, true);
        return;
    case CN_TXN_COMPLETE_ABORT:
        if (commit)
            cn_tc_answer(x, rq, KAFKA_INVALID_TXN_STATE, -1, -1);
        else if (retry)
            answer_retry(x, e, rq);
        else
            end_tv2_prepare(x, e, rq, false, true);
        return;
    case CN_TXN_EMPTY:
        if (commit)
            cn_tc_answer(x, rq, KAFKA_INVALID_TXN_STATE, -1, -1);
        else
            end_tv2_prepare(x, e, rq, false, true);
        return;
    default: cn_tc_answer(x, rq, KAFKA_INVALID_TXN_STATE, -1, -1); return;
    }
}

void cn_tc_end(struct txn_ctx *x, const struct cn_txn_request *rq, bool late)
{
    if (rq->api_version >= 5 && cn_tc_tv2_on(x->c)) {
        end_tv2(x, rq, late);
        return;
    }
    struct txn_entry *e = NULL;
    if (!producer_ok(x, rq, late, &e))
        return;
    enum cn_txn_state s = e->meta.state;
    if (s == CN_TXN_COMPLETE_COMMIT || s == CN_TXN_COMPLETE_ABORT) {
        /* A retry of the EndTxn that finished it is answered as before. */
        bool same = (s == CN_TXN_COMPLETE_COMMIT) == rq->commit;
        answer_end(x, rq, same ? KAFKA_NONE : KAFKA_INVALID_TXN_STATE,
                   &e->meta);
        return;
    }
    if (s != CN_TXN_ONGOING) {
        cn_tc_answer(x, rq, KAFKA_INVALID_TXN_STATE, -1, -1);
        return;
    }
    struct cn_txn_meta next;
    cn_txn_meta_init(&next);
    if (cn_txn_meta_copy(&next, &e->meta) != 0) {
        cn_tc_answer(x, rq, KAFKA_COORDINATOR_NOT_AVAILABLE, -1, -1);
        return;
    }
    next.state = rq->commit ? CN_TXN_PREPARE_COMMIT : CN_TXN_PREPARE_ABORT;
    next.last_update_ms = x->now->wall_ms;
    next.client_tv = 1; /* an EndTxn without the bump: a TV1 client */
    e->decide_us = x->now->mono_us;
    e->commit = rq->commit;
    cn_tc_write(x, e, &next, THEN_END, rq, CN_TXN_WRITE_DECISION);
}
