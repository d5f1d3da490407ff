/*
 * coord_finish.c - finishing decided transactions: the commit or abort
 * marker to every partition, then the Complete record; failed markers are
 * all sent again after marker_retry_ms (a decided transaction is never
 * dropped).  Also the aborts the coordinator starts itself (InitProducerId
 * fence, timeout, operator), which decide and then finish the same way,
 * and the expiry of unused ids.
 */
#include <string.h>

#include "base/err.h"
#include "base/say.h"
#include "proto/kerr.h"
#include "txn/coord_int.h"

/* ---- markers and completion --------------------------------------------- */

/* Every marker is durable: record the completion (and, after a TV2 epoch
 * overflow, take on the next producer id). */
static void markers_synced(struct txn_ctx *x, struct txn_entry *e)
{
    struct cn_txn_meta next;
    cn_txn_meta_init(&next);
    if (cn_txn_meta_copy(&next, &e->meta) != 0) {
        cn_txn_meta_fini(&next);
        return;
    }
    next.state = e->commit ? CN_TXN_COMPLETE_COMMIT : CN_TXN_COMPLETE_ABORT;
    if (next.next_producer_id >= 0) {
        /* TV2 epoch overflow: the client was handed the next id at epoch
         * 0 with the EndTxn answer; it becomes current now. */
        next.prev_producer_id = next.producer_id;
        next.producer_id = next.next_producer_id;
        next.producer_epoch = 0;
        next.next_producer_id = -1;
    }
    cn_txn_meta_clear_partitions(&next);
    /* txn_start_ms stays: Kafka keeps the finished transaction's start in
     * DescribeTransactions until InitProducerId clears it. */
    next.last_update_ms = x->now->wall_ms;
    cn_tc_write(x, e, &next, THEN_COMPLETE, NULL, CN_TXN_WRITE_COMPLETE);
}

void cn_tc_send_markers(struct txn_ctx *x, struct txn_entry *e, bool commit,
                        bool first)
{
    struct cn_txn_coord *c = x->c;
    e->commit = commit;
    if (c->stopping)
        return; /* the next start's recovery writes them */
    const struct cn_txn_meta *m = &e->meta;
    if (m->npartitions == 0) {
        markers_synced(x, e);
        return;
    }
    struct cn_txn_tp *tps = cn_arena_calloc(&x->acts->arena, m->npartitions,
                                            sizeof *tps);
    char *id = cn_arena_strdup(&x->acts->arena,
                               cn_bytes_str(m->transactional_id));
    bool ok = tps && id;
    for (size_t i = 0; ok && i < m->npartitions; i++) {
        tps[i].partition = m->partitions[i].partition;
        tps[i].topic = cn_arena_strdup(&x->acts->arena,
                                       cn_bytes_str(m->partitions[i].topic));
        ok = tps[i].topic != NULL;
    }
    struct cn_txn_action *act = ok ? cn_tc_push(x, CN_TXA_SEND_MARKERS) : NULL;
    if (!act) {
        x->rc = CN_ENOMEM;
        return;
    }
    e->marker_seq = ++c->next_seq;
    e->markers_pending = m->npartitions;
    e->markers_failed = false;
    act->u.markers.id = id;
    act->u.markers.seq = e->marker_seq;
    act->u.markers.producer_id = m->producer_id;
    act->u.markers.producer_epoch = m->producer_epoch;
    act->u.markers.commit = commit;
    act->u.markers.first_after_decision = first;
    act->u.markers.coordinator_epoch = e->part >= 0
                                           ? c->coordinator_epoch[e->part]
                                           : 0;
    act->u.markers.tps = tps;
    act->u.markers.n = m->npartitions;
}

void cn_tc_marker_result(struct txn_ctx *x, const char *id, uint64_t seq,
                         size_t i, int16_t err)
{
    struct cn_txn_coord *c = x->c;
    struct txn_entry *e = cn_tc_entry_find(c, id);
    /* One result per partition is the executor's contract (a repeat is
     * not looked for); one outside the round is ignored. */
    if (!e || !e->marker_seq || e->marker_seq != seq || !e->markers_pending ||
        i >= e->meta.npartitions)
        return; /* a round given up on, or its partition lost */
    if (err)
        e->markers_failed = true;
    if (--e->markers_pending > 0)
        return;
    e->marker_seq = 0;
    if (!e->markers_failed) {
        markers_synced(x, e);
        return;
    }
    /* Every partition has answered: try them all again later (a repeated
     * marker is harmless). */
    e->marker_retry_mono_ms = x->now->mono_ms + c->cfg.marker_retry_ms;
    if (e->marker_retry_mono_ms <= 0)
        e->marker_retry_mono_ms = 1;
    c->retries++;
    if (e->marker_retry_mono_ms < c->retry_due_mono_ms)
        c->retry_due_mono_ms = e->marker_retry_mono_ms;
}

void cn_tc_retry_markers(struct txn_ctx *x)
{
    struct cn_txn_coord *c = x->c;
    int64_t due = INT64_MAX;          /* the earliest retry left */
    c->retry_due_mono_ms = INT64_MAX; /* sends below may add retries */
    for (size_t i = 0; i < c->buckets; i++)
        for (struct txn_entry *e = c->table[i]; e; e = e->next) {
            if (!e->marker_retry_mono_ms)
                continue;
            if (e->marker_retry_mono_ms > x->now->mono_ms) {
                if (e->marker_retry_mono_ms < due)
                    due = e->marker_retry_mono_ms;
                continue;
            }
            e->marker_retry_mono_ms = 0;
            c->retries--;
            if (e->complete_retry && !c->stopping)
                markers_synced(x, e);
            else if (!e->complete_retry)
                cn_tc_send_markers(x, e, e->commit, false);
        }
    if (due < c->retry_due_mono_ms)
        c->retry_due_mono_ms = due;
}

static void complete_written(struct txn_ctx *x, struct txn_entry *e,
                             int16_t err)
{
    struct cn_txn_coord *c = x->c;
    if (err == KAFKA_NOT_COORDINATOR) {
        /* Its partition has another leader now, which finishes it from
         * the PrepareX it reads; this one forgets the id. */
        return;
    }
    if (err) {
        /* Every marker is in: only the Complete record is written again
         * (Kafka's log-append retry queue), e.g. once the transaction
         * log's ISR is back to min.insync.replicas.  A new leader or the
         * next start's recovery would also finish it. */
        if (!e->complete_retry)
            CN_ERROR("transactional id %s: cannot record completion (%s); "
                     "retrying every %lld ms",
                     e->meta.transactional_id, cn_kerr_name(err),
                     (long long)c->cfg.marker_retry_ms);
        e->complete_retry = true;
        e->marker_retry_mono_ms = x->now->mono_ms + c->cfg.marker_retry_ms;
        if (e->marker_retry_mono_ms <= 0)
            e->marker_retry_mono_ms = 1;
        c->retries++;
        if (e->marker_retry_mono_ms < c->retry_due_mono_ms)
            c->retry_due_mono_ms = e->marker_retry_mono_ms;
        return;
    }
    e->complete_retry = false;
    e->busy = false;
    if (e->decide_us > 0) {
        double ms = (double)(x->now->mono_us - e->decide_us) / 1000.0;
        cn_hist_record(e->commit ? &c->commit_ms : &c->abort_ms, ms);
        e->decide_us = 0;
    }
    if (e->commit)
        c->commits++;
    else
        c->aborts++;
    e->timeout_abort = false;
    CN_DEBUG("transactional id %s: %s", e->meta.transactional_id,
             cn_txn_state_name(e->meta.state));
}

void cn_tc_finish_written(struct txn_ctx *x, struct txn_entry *e,
                          enum txn_then then, int16_t err)
{
    struct cn_txn_coord *c = x->c;
    switch (then) {
    case THEN_COMPLETE: complete_written(x, e, err); return;
    case THEN_FENCE:
        /* The Ongoing transaction of a fenced instance is aborted on its
         * behalf with the new epoch; the new instance retries until that
         * is done. */
        if (err) {
            e->busy = false;
            return;
        }
        c->fenced++;
        cn_tc_send_markers(x, e, false, true);
        return;
    case THEN_COORD_ABORT:
        if (err) {
            e->busy = false;
            e->timeout_abort = false;
            return;
        }
        if (e->timeout_abort)
            c->timed_out_aborts++;
        cn_tc_send_markers(x, e, false, true);
        return;
    case THEN_EXPIRE:
        e->busy = false;
        if (!err && e->meta.state == CN_TXN_DEAD) {
            CN_INFO("transactional id %s expired: unused for %lld ms",
                    e->meta.transactional_id,
                    (long long)c->cfg.id_expiration_ms);
            cn_tc_entry_remove(c, e);
        }
        return;
    default: e->busy = false; return;
    }
}

/* ---- aborts the coordinator makes --------------------------------------- */

/*
 * The epoch for a coordinator-made abort (timeout, fence, operator): one
 * bump, for TV2 clients too (Kafka 4.1+, KAFKA-19367: the fence's bump is
 * the abort's).  A TV2 client's EndTxn(abort) at the old epoch E then
 * finds E+1 and CompleteAbort, a retry answered with success and the new
 * epoch: that is how the Java client recovers from a timeout abort
 * (InvalidProducerEpochException, then abortTransaction()).  A late
 * commit at E is still refused (INVALID_TXN_STATE), and a new instance's
 * InitProducerId bumps again, which fences E for good.
 *
 * The producer id stays, even at the last usable epoch, where the abort
 * takes INT16_MAX (Kafka's prepareFenceProducerEpoch): the markers must
 * carry the id whose batches are open on the data partitions, or those
 * stay open and the LSO stuck.  The next bump (InitProducerId, or the
 * TV2 EndTxn retry) moves to a new id.  At INT16_MAX already (a log
 * Cairn did not write) the epoch cannot go up: the abort keeps it.
 */
int cn_tc_abort_epoch(struct txn_ctx *x, struct cn_txn_meta *m)
{
    if (m->producer_id < 0)
        return cn_tc_next_epoch(x, m);
    if (m->producer_epoch < INT16_MAX) {
        m->last_producer_epoch = m->producer_epoch;
        m->producer_epoch++;
    }
    return 0;
}

/* Decides the abort of e's Ongoing transaction (next: its metadata with
 * the abort's epoch, taken over). */
static void coord_abort(struct txn_ctx *x, struct txn_entry *e,
                        struct cn_txn_meta *next, bool timeout)
{
    next->state = CN_TXN_PREPARE_ABORT;
    next->last_update_ms = x->now->wall_ms;
    e->decide_us = x->now->mono_us;
    e->timeout_abort = timeout;
    e->commit = false;
    cn_tc_write(x, e, next, THEN_COORD_ABORT, NULL, CN_TXN_WRITE_DECISION);
}

void cn_tc_check_timeouts(struct txn_ctx *x)
{
    struct cn_txn_coord *c = x->c;
    int64_t now = x->now->wall_ms;
    for (size_t i = 0; i < c->buckets; i++)
        for (struct txn_entry *e = c->table[i]; e; e = e->next) {
            const struct cn_txn_meta *m = &e->meta;
            if (e->busy || !cn_tc_part_led(c, e->part) ||
                m->state != CN_TXN_ONGOING ||
                now - m->txn_start_ms <= m->timeout_ms)
                continue;
            struct cn_txn_meta next;
            cn_txn_meta_init(&next);
            if (cn_txn_meta_copy(&next, m) != 0 ||
                cn_tc_abort_epoch(x, &next) != 0) {
                cn_txn_meta_fini(&next);
                continue;
            }
            CN_INFO("transactional id %s: transaction open %lld ms, past its "
                    "timeout of %d ms: aborting and bumping the epoch to %d",
                    m->transactional_id, (long long)(now - m->txn_start_ms),
                    m->timeout_ms, next.producer_epoch);
            coord_abort(x, e, &next, true);
        }
}

/* Ids unused for transactional.id.expiration.ms are written as Dead (a
 * tombstone, so compaction can drop them) and forgotten.  Only ids with no
 * transaction open can expire. */
void cn_tc_check_expiry(struct txn_ctx *x)
{
    struct cn_txn_coord *c = x->c;
    int64_t now = x->now->wall_ms;
    for (size_t i = 0; i < c->buckets; i++) {
        struct txn_entry *e = c->table[i];
        while (e) {
            struct txn_entry *next = e->next;
            if (!e->busy && cn_tc_part_led(c, e->part) &&
                cn_txn_state_expirable(e->meta.state) &&
                now - e->meta.last_update_ms > c->cfg.id_expiration_ms) {
                struct cn_txn_meta dead;
                cn_txn_meta_init(&dead);
                if (cn_txn_meta_copy(&dead, &e->meta) == 0) {
                    dead.state = CN_TXN_DEAD;
                    cn_txn_meta_clear_partitions(&dead);
                    dead.last_update_ms = now;
                    cn_tc_write(x, e, &dead, THEN_EXPIRE, NULL,
                                CN_TXN_WRITE_CHANGE);
                } else {
                    cn_txn_meta_fini(&dead);
                }
            }
            e = next;
        }
    }
}

/* ---- operator aborts ---------------------------------------------------- */

void cn_tc_operator_abort(struct txn_ctx *x, int64_t producer_id,
                          const char *topic, int32_t partition)
{
    struct cn_txn_coord *c = x->c;
    struct txn_entry *e = cn_tc_entry_by_pid(c, producer_id);
    if (e && !cn_tc_part_led(c, e->part))
        e = NULL;
    const char *tp = topic ? topic : "?";
    x->acts->op_taken = false;
    x->acts->result = KAFKA_NONE;
    if (!e || !topic ||
        !cn_txn_meta_has_partition(&e->meta, topic, partition)) {
        CN_WARN("operator abort of producer %lld on %s-%d: %s%s%s; the "
                "marker goes to the partition directly",
                (long long)producer_id, tp, partition,
                e ? "transactional id " : "no transactional id knows it",
                e ? e->meta.transactional_id : "",
                e ? " has no open transaction there" : "");
        return;
    }
    const struct cn_txn_meta *m = &e->meta;
    /* The coordinator holds this transaction: an abort marker written
     * beside it would close the partition's part alone.  After a commit
     * decision that splits the transaction; while a change is being
     * written the decision may be that commit. */
    switch (m->state) {
    case CN_TXN_PREPARE_ABORT:
    case CN_TXN_PREPARE_EPOCH_FENCE:
        CN_WARN("operator abort of transactional id %s (producer %lld) on "
                "%s-%d: the coordinator is already aborting it",
                m->transactional_id, (long long)producer_id, tp, partition);
        x->acts->op_taken = true;
        return;
    case CN_TXN_PREPARE_COMMIT:
        CN_WARN("operator abort of transactional id %s (producer %lld) on "
                "%s-%d refused: the coordinator has decided to commit it",
                m->transactional_id, (long long)producer_id, tp, partition);
        x->acts->result = KAFKA_INVALID_TXN_STATE;
        return;
    case CN_TXN_ONGOING: break;
    default:
        /* Empty or Complete*: no transaction of the coordinator's is
         * open (their partitions are cleared), as hanging.c counts. */
        return;
    }
    if (e->busy) {
        CN_WARN("operator abort of transactional id %s (producer %lld) on "
                "%s-%d refused for now: a change of it is being written",
                m->transactional_id, (long long)producer_id, tp, partition);
        x->acts->result = KAFKA_CONCURRENT_TRANSACTIONS;
        return;
    }
    struct cn_txn_meta next;
    cn_txn_meta_init(&next);
    if (cn_txn_meta_copy(&next, m) != 0 || cn_tc_abort_epoch(x, &next) != 0) {
        cn_txn_meta_fini(&next);
        CN_WARN("operator abort of transactional id %s (producer %lld epoch "
                "%d) on %s-%d: cannot start it",
                m->transactional_id, (long long)producer_id, m->producer_epoch,
                tp, partition);
        x->acts->result = KAFKA_COORDINATOR_NOT_AVAILABLE;
        return;
    }
    CN_WARN("operator abort of transactional id %s (producer %lld epoch %d) "
            "on %s-%d: the coordinator aborts the whole transaction and "
            "bumps the epoch to %d",
            m->transactional_id, (long long)producer_id, m->producer_epoch, tp,
            partition, next.producer_epoch);
    x->acts->op_taken = true;
    coord_abort(x, e, &next, false);
}
