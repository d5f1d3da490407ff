/*
 * txn_markers.c - finishing decided transactions: the commit or abort
 * marker to every partition, then the Complete record, retried while the
 * log directory is offline (a decided transaction is never dropped).
 * Also the aborts the coordinator starts itself (timeout, operator),
 * which decide and then finish the same way.  The fail points named in
 * txn_coord.h fire here and in h_txn.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/failpoint.h"
#include "base/say.h"
#include "markers.h"
#include "proto/kerr.h"
#include "txn/txn_state.h"
#include "txn_coord.h"
#include "txn_int.h"

/* Markers carry the coordinator epoch; one broker has always led. */
#define COORDINATOR_EPOCH 0
/* A marker that could not be appended is tried again after this long. */
#define MARKER_RETRY_MS 1000

/* ---- markers and completion --------------------------------------------- */

static void complete_written(struct txn_write *w, int16_t err)
{
    if (err) {
        /* Markers are in the partitions; the Complete record will be
         * written again by the next start's recovery. */
        CN_ERROR("transactional id %s: cannot record completion",
                 w->e->meta.transactional_id);
        return;
    }
    struct txn_entry *e = w->e;
    struct cn_txnb *c = w->b->txn;
    e->busy = false;
    if (e->decide_us > 0) {
        double ms = (double)(cn_clock_mono_us() - e->decide_us) / 1000.0;
        cn_hist_record(w->commit ? &c->commit_ms : &c->abort_ms, ms);
        e->decide_us = 0;
    }
    if (w->commit)
        c->commits++;
    else
        c->aborts++;
    e->timeout_abort = false;
    CN_DEBUG("transactional id %s: %s", e->meta.transactional_id,
             cn_txn_state_name(e->meta.state));
}

/* One round of markers for e's transaction, sent through the channel. */
struct marker_run {
    struct txn_entry *e;
    bool commit;
    bool failed;    /* some partition's marker was not written */
    size_t pending; /* results not yet in, plus one while sending */
};

struct marker_retry {
    uv_timer_t timer;
    struct cn_broker *b;
    struct txn_entry *e;
    bool commit;
};

static void markers_synced(struct cn_broker *b, struct txn_entry *e,
                           bool commit)
{
    if (CN_FAILPOINT("txn.after_markers_before_complete"))
        return;
    struct cn_txn_meta next;
    cn_txn_meta_init(&next);
    if (cn_txn_meta_copy(&next, &e->meta) != 0)
        return;
    next.state = commit ? CN_TXN_COMPLETE_COMMIT : CN_TXN_COMPLETE_ABORT;
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
    next.last_update_ms = cn_clock_wall_ms();
    txn_write_change(b, e, &next, complete_written, NULL, NULL, commit);
}

static void on_retry_closed(uv_handle_t *h)
{
    struct marker_retry *r = h->data;
    r->b->txn->marker_retries--;
    txn_write_markers(r->b, r->e, r->commit);
    free(r);
}

static void on_marker_retry(uv_timer_t *t)
{
    uv_close((uv_handle_t *)t, on_retry_closed);
}

/* Every partition has answered: complete, or try them all again later
 * (a repeated marker is harmless). */
static void markers_done(struct cn_broker *b, struct marker_run *run)
{
    struct txn_entry *e = run->e;
    bool commit = run->commit, failed = run->failed;
    free(run);
    if (!failed) {
        markers_synced(b, e, commit);
        return;
    }
    struct marker_retry *r = calloc(1, sizeof *r);
    if (!r)
        return;
    r->b = b;
    r->e = e;
    r->commit = commit;
    uv_timer_init(b->loop, &r->timer);
    r->timer.data = r;
    uv_timer_start(&r->timer, on_marker_retry, MARKER_RETRY_MS, 0);
    b->txn->marker_retries++;
}

static void marker_result(struct cn_broker *b, void *arg, size_t i,
                          int16_t kerr)
{
    struct marker_run *run = arg;
    (void)i;
    if (kerr)
        run->failed = true;
    if (--run->pending == 0)
        markers_done(b, run);
}

/*
 * Sends the marker to every partition of e's transaction through the
 * coordinator's marker channel, then (once every partition has it)
 * records the completion.  If a partition cannot take it (the log
 * directory offline, a full disk) the markers are sent again later: a
 * decided transaction is finished, never dropped.
 */
void txn_write_markers(struct cn_broker *b, struct txn_entry *e, bool commit)
{
    if (b->stopping)
        return; /* the next start's recovery writes them */
    const struct cn_txn_meta *m = &e->meta;
    struct marker_run *run = calloc(1, sizeof *run);
    struct cn_marker_tp *tps = calloc(m->npartitions + 1, sizeof *tps);
    if (!run || !tps) {
        free(run);
        free(tps);
        return;
    }
    for (size_t i = 0; i < m->npartitions; i++)
        tps[i] = (struct cn_marker_tp){m->partitions[i].topic,
                                       m->partitions[i].partition};
    run->e = e;
    run->commit = commit;
    run->failed = b->log_dir_offline;
    run->pending = 1;
    struct cn_marker_send s = {
        .producer_id = m->producer_id,
        .producer_epoch = m->producer_epoch,
        .commit = commit,
        .coordinator_epoch = COORDINATOR_EPOCH,
        .tps = tps,
        .n = m->npartitions,
        .result = marker_result,
        .arg = run,
    };
    if (!run->failed && s.n > 1) {
        /* The first marker alone, so a crash can be planted between it
         * and the others. */
        s.n = 1;
        run->pending++;
        b->txn->markers->send(b, &s);
        if (CN_FAILPOINT("txn.after_some_markers"))
            run->failed = true;
        s.tps = tps + 1;
        s.n = m->npartitions - 1;
    }
    if (!run->failed) {
        run->pending += s.n;
        b->txn->markers->send(b, &s);
    }
    free(tps);
    if (--run->pending == 0)
        markers_done(b, run);
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
 */
static int abort_epoch(struct cn_broker *b, struct cn_txn_meta *m)
{
    return txn_next_epoch(b, m);
}

/* ---- timeouts ----------------------------------------------------------- */

static void timeout_written(struct txn_write *w, int16_t err)
{
    if (err) {
        w->e->busy = false;
        w->e->timeout_abort = false;
        return;
    }
    if (w->e->timeout_abort)
        w->b->txn->timed_out_aborts++;
    if (CN_FAILPOINT("txn.after_prepare_sync"))
        return;
    txn_write_markers(w->b, w->e, false);
}

void txn_on_timeout_check(uv_timer_t *t)
{
    struct cn_broker *b = t->data;
    struct cn_txnb *c = b->txn;
    int64_t now = cn_clock_wall_ms();
    if (b->stopping)
        return;
    for (size_t i = 0; i < c->buckets; i++)
        for (struct txn_entry *e = c->table[i]; e; e = e->next) {
            const struct cn_txn_meta *m = &e->meta;
            if (e->busy || m->state != CN_TXN_ONGOING ||
                now - m->txn_start_ms <= m->timeout_ms)
                continue;
            struct cn_txn_meta next;
            cn_txn_meta_init(&next);
            if (cn_txn_meta_copy(&next, m) != 0 ||
                abort_epoch(b, &next) != 0) {
                cn_txn_meta_fini(&next);
                continue;
            }
            CN_INFO("transactional id %s: transaction open %lld ms, past its "
                    "timeout of %d ms: aborting and bumping the epoch to %d",
                    m->transactional_id, (long long)(now - m->txn_start_ms),
                    m->timeout_ms, next.producer_epoch);
            next.state = CN_TXN_PREPARE_ABORT;
            next.last_update_ms = now;
            e->decide_us = cn_clock_mono_us();
            e->timeout_abort = true;
            txn_write_change(b, e, &next, timeout_written, NULL, NULL, false);
        }
}

/* ---- operator aborts ---------------------------------------------------- */

int16_t cn_txn_coord_abort_for_operator(struct cn_broker *b,
                                        int64_t producer_id, const char *topic,
                                        int32_t partition, bool *taken)
{
    struct txn_entry *e = b->txn ? txn_entry_by_pid(b->txn, producer_id) : NULL;
    const char *tp = topic ? topic : "?";
    *taken = false;
    if (!e || !topic ||
        !cn_txn_meta_has_partition(&e->meta, topic, partition)) {
        CN_WARN("operator abort of producer %lld on %s-%d: %s%s%s; the "
                "marker goes to the partition directly",
                (long long)producer_id, tp, partition,
                e ? "transactional id " : "no transactional id knows it",
                e ? e->meta.transactional_id : "",
                e ? " has no open transaction there" : "");
        return KAFKA_NONE;
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
        *taken = true;
        return KAFKA_NONE;
    case CN_TXN_PREPARE_COMMIT:
        CN_WARN("operator abort of transactional id %s (producer %lld) on "
                "%s-%d refused: the coordinator has decided to commit it",
                m->transactional_id, (long long)producer_id, tp, partition);
        return KAFKA_INVALID_TXN_STATE;
    case CN_TXN_ONGOING:
        break;
    default:
        /* Empty or Complete*: no transaction of the coordinator's is
         * open (their partitions are cleared), as hanging.c counts. */
        return KAFKA_NONE;
    }
    if (e->busy) {
        CN_WARN("operator abort of transactional id %s (producer %lld) on "
                "%s-%d refused for now: a change of it is being written",
                m->transactional_id, (long long)producer_id, tp, partition);
        return KAFKA_CONCURRENT_TRANSACTIONS;
    }
    struct cn_txn_meta next;
    cn_txn_meta_init(&next);
    if (cn_txn_meta_copy(&next, m) != 0 || abort_epoch(b, &next) != 0) {
        cn_txn_meta_fini(&next);
        CN_WARN("operator abort of transactional id %s (producer %lld epoch "
                "%d) on %s-%d: cannot start it",
                m->transactional_id, (long long)producer_id,
                m->producer_epoch, tp, partition);
        return KAFKA_COORDINATOR_NOT_AVAILABLE;
    }
    CN_WARN("operator abort of transactional id %s (producer %lld epoch %d) "
            "on %s-%d: the coordinator aborts the whole transaction and "
            "bumps the epoch to %d",
            m->transactional_id, (long long)producer_id, m->producer_epoch,
            tp, partition, next.producer_epoch);
    next.state = CN_TXN_PREPARE_ABORT;
    next.last_update_ms = cn_clock_wall_ms();
    e->decide_us = cn_clock_mono_us();
    e->timeout_abort = false;
    txn_write_change(b, e, &next, timeout_written, NULL, NULL, false);
    *taken = true;
    return KAFKA_NONE;
}
