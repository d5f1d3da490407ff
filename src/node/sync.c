/*
 * sync.c - group commit: one fdatasync round covers every batch appended
 * before the round began, and the high watermark follows the sync.
 *
 * A round snapshots, on the loop, each dirty log's unsynced range
 * (cn_log_sync_begin), runs the fdatasyncs on a libuv worker, and on
 * completion moves each partition's high watermark to what is now
 * durable, answers acks=-1 produce requests waiting for that round, and
 * wakes parked fetches.  Appends that arrive while a round runs start the
 * next one (up to MAX_ROUNDS at once); beyond that they wait and join the
 * next round, so under load each round covers many batches.
 *
 * Consumers see only synced data while group commit is on: a record that a
 * crash could still take away is never handed out.  With
 * cairn.fsync.group.commit=false the broker follows Kafka's flush.messages
 * and flush.ms instead, and the high watermark is the log end offset.
 */
#include <errno.h>
#include <stdlib.h>

#include "base/failpoint.h"
#include "base/say.h"
#include "node/broker_int.h"
#include "node/replica.h"

/* Rounds that may run at once.  A round that starts while another is
 * still in fdatasync covers what was appended meanwhile without waiting
 * for it, which takes a whole fsync off the latency of anything appended
 * during a round; rounds still complete in order (see round_done). */
#define MAX_ROUNDS 3
/* A round's fdatasyncs are spread over this many workers: one file after
 * another would make a transaction's markers on N partitions cost N
 * fsyncs, while the filesystem commits concurrent ones together. */
#define ROUND_WORKERS 4

struct round_chunk {
    uv_work_t work;
    struct cn_sync_round *round;
    size_t from, to; /* its share of the round's logs */
};

struct cn_sync_round {
    struct cn_broker *broker;
    uint64_t round;
    int chunks_left; /* workers still running */
    bool finished;   /* all done, effects not applied yet */
    size_t n;
    struct cn_partition **parts;
    struct cn_log_sync **syncs;
    int *errs;
    struct round_chunk chunks[ROUND_WORKERS];
    struct cn_sync_round *next; /* in flight, in start order */
};

static void sync_start_round(struct cn_broker *b);

static void round_work(uv_work_t *w)
{
    struct round_chunk *c = w->data;
    struct cn_sync_round *r = c->round;
    for (size_t i = c->from; i < c->to; i++)
        if (r->syncs[i])
            r->errs[i] = cn_log_sync_run(r->syncs[i]);
}

static void finish_waiters(struct cn_broker *b)
{
    struct cn_sync_waiter **pp = &b->sync_waiters;
    struct cn_sync_waiter *ready = NULL, **ready_tail = &ready;
    while (*pp) {
        struct cn_sync_waiter *w = *pp;
        if (w->round <= b->sync_done_round) {
            *pp = w->next;
            w->next = NULL;
            *ready_tail = w;
            ready_tail = &w->next;
        } else {
            pp = &w->next;
        }
    }
    b->sync_waiters_tail = pp;
    /* Answer in arrival order; finish() may free the waiter. */
    while (ready) {
        struct cn_sync_waiter *w = ready;
        ready = w->next;
        w->finish(b, w);
    }
}

/* A round's effects, applied only once every older round has finished:
 * "round N done" must keep meaning "everything appended before round N
 * began is durable", whichever fdatasync returned first. */
static void round_apply(struct cn_broker *b, struct cn_sync_round *r)
{
    for (size_t i = 0; i < r->n; i++) {
        struct cn_partition *p = r->parts[i];
        if (r->syncs[i])
            r->errs[i] = cn_log_sync_end(p->log, r->syncs[i], r->errs[i]);
        if (r->errs[i]) {
            CN_ERROR("fdatasync of %s-%d failed (%s)",
                     p->topic ? p->topic->name : "(deleted topic)", p->index,
                     cn_strerror(r->errs[i]));
            cn_broker_log_dir_failed(b, "fdatasync", r->errs[i]);
        }
        int64_t synced = cn_log_synced_offset(p->log);
        if (b->cfg->cluster_mode)
            cn_replica_durable(b, p, synced);
        else if (synced > p->high_watermark)
            p->high_watermark = synced;
    }
    b->sync_done_round = r->round;
    free(r->parts);
    free(r->syncs);
    free(r->errs);
    free(r);
}

static void round_done(uv_work_t *w, int status)
{
    struct round_chunk *c = w->data;
    struct cn_sync_round *r = c->round;
    struct cn_broker *b = r->broker;
    (void)status;
    if (--r->chunks_left > 0)
        return;
    r->finished = true;
    bool applied = false;
    while (b->sync_inflight && b->sync_inflight->finished) {
        struct cn_sync_round *done = b->sync_inflight;
        b->sync_inflight = done->next;
        b->sync_running--;
        round_apply(b, done);
        applied = true;
    }
    if (!applied)
        return; /* an older round is still syncing */
    finish_waiters(b);
    cn_topics_reap(b);
    b->data_visible(b);
    /* Waiters for the next round still need one even if the partitions
     * they wrote to were deleted meanwhile; finish() may have appended and
     * started one already. */
    if (b->sync_list || (b->sync_waiters && !b->sync_running))
        sync_start_round(b);
}

static void sync_start_round(struct cn_broker *b)
{
    if (b->sync_running >= MAX_ROUNDS)
        return;
    size_t n = 0;
    for (struct cn_partition *p = b->sync_list; p; p = p->sync_next)
        n++;
    struct cn_sync_round *r = calloc(1, sizeof *r);
    if (r) {
        r->parts = calloc(n + 1, sizeof *r->parts);
        r->syncs = calloc(n + 1, sizeof *r->syncs);
        r->errs = calloc(n + 1, sizeof *r->errs);
    }
    if (!r || !r->parts || !r->syncs || !r->errs) {
        /* Without memory we cannot sync; leave the list for the next try
         * (the flush timer retries). */
        if (r) {
            free(r->parts);
            free(r->syncs);
            free(r->errs);
        }
        free(r);
        return;
    }
    r->broker = b;
    r->round = b->sync_next_round++;
    size_t i = 0;
    struct cn_partition *p = b->sync_list;
    b->sync_list = NULL;
    while (p) {
        struct cn_partition *next = p->sync_next;
        p->in_sync_list = false;
        p->sync_next = NULL;
        r->parts[i] = p;
        r->syncs[i] = cn_log_sync_begin(p->log);
        i++;
        p = next;
    }
    r->n = i;
    b->sync_running++;
    struct cn_sync_round **tail = &b->sync_inflight;
    while (*tail)
        tail = &(*tail)->next;
    *tail = r;
    /* An empty round (waiters only) still needs one worker to finish. */
    int nchunks = r->n < ROUND_WORKERS ? (int)r->n : ROUND_WORKERS;
    if (nchunks == 0)
        nchunks = 1;
    r->chunks_left = nchunks;
    for (int k = 0; k < nchunks; k++) {
        struct round_chunk *c = &r->chunks[k];
        c->round = r;
        c->from = r->n * (size_t)k / (size_t)nchunks;
        c->to = r->n * (size_t)(k + 1) / (size_t)nchunks;
        c->work.data = c;
    }
    /* Queued after the loop above so no chunk can complete (and free the
     * round) while later ones are still being set up. */
    for (int k = 0; k < nchunks; k++) {
        struct round_chunk *c = &r->chunks[k];
        /* The fail point stands for a queue that refuses the work: the
         * round then runs on the loop, inside its caller. */
        if (CN_FAILPOINT("sync.on_loop") ||
            uv_queue_work(b->loop, &c->work, round_work, round_done) < 0) {
            round_work(&c->work);
            round_done(&c->work, 0);
        }
    }
}

static void sync_enlist(struct cn_broker *b, struct cn_partition *p)
{
    if (!p->in_sync_list) {
        p->in_sync_list = true;
        p->sync_next = b->sync_list;
        b->sync_list = p;
    }
}

void cn_sync_flush(struct cn_broker *b, struct cn_partition *p)
{
    sync_enlist(b, p);
    sync_start_round(b);
}

void cn_sync_appended(struct cn_broker *b, struct cn_partition *p)
{
    /* Followers copy it while it syncs here, not after. */
    if (b->cfg->cluster_mode)
        cn_replica_appended(b, p);
    if (!b->cfg->cairn_fsync_group_commit) {
        if (b->cfg->cluster_mode)
            cn_replica_durable(b, p, cn_log_end_offset(p->log));
        else
            p->high_watermark = cn_log_end_offset(p->log);
        return;
    }
    cn_sync_flush(b, p);
}

static void sync_queue_waiter(struct cn_broker *b, struct cn_sync_waiter *w)
{
    w->next = NULL;
    struct cn_sync_waiter **pp = b->sync_waiters ? b->sync_waiters_tail
                                                 : &b->sync_waiters;
    *pp = w;
    b->sync_waiters_tail = &w->next;
}

void cn_sync_wait(struct cn_broker *b, struct cn_sync_waiter *w)
{
    /* Data appended now is covered by the round that starts next (or the
     * one just started by cn_sync_appended). */
    w->round = b->sync_running ? b->sync_next_round - 1 : b->sync_next_round;
    if (b->sync_list)
        w->round = b->sync_next_round;
    /* Nothing appended and not yet synced (every partition of the request
     * was refused, say): there is nothing to wait for. */
    if (!b->sync_running && !b->sync_list) {
        w->finish(b, w);
        return;
    }
    if (!b->cfg->cairn_fsync_group_commit || w->round <= b->sync_done_round) {
        w->finish(b, w);
        return;
    }
    sync_queue_waiter(b, w);
}

static void env_appended(void *ctx, struct cn_partition *p)
{
    cn_sync_appended(ctx, p);
}

static void env_disk_full(void *ctx, const struct cn_partition *p, bool full)
{
    cn_broker_disk_full(ctx, p, full);
}

static void env_dir_failed(void *ctx, const char *what, int err)
{
    cn_broker_log_dir_failed(ctx, what, err);
}

struct cn_part_env cn_sync_part_env(struct cn_broker *b)
{
    return (struct cn_part_env){b, env_appended, env_disk_full, env_dir_failed,
                                cn_part_work_queue};
}

/* Appends a coordinator's batch; the caller decides how it is synced. */
static int append_coordinator(struct cn_broker *b, struct cn_partition *p,
                              uint8_t *batch, size_t len, const char *what,
                              bool caller_syncs)
{
    if (b->stopping || cn_partition_offline(b, p))
        return CN_EOFFLINE;
    struct cn_part_env env = cn_sync_part_env(b);
    struct cn_part_append a = {
        .origin = CN_PART_COORDINATOR,
        .batches = batch,
        .len = len,
        .what = what,
        .caller_syncs = caller_syncs,
        .append_time = -1,
    };
    return cn_part_append(p, &env, &a);
}

/* Appends an internal partition's batch that w waits for: synced in a
 * round whatever the flush policy for data. */
static int append_internal(struct cn_broker *b, struct cn_partition *p,
                           uint8_t *batch, size_t len, const char *what,
                           struct cn_sync_waiter *w)
{
    bool group = b->cfg->cairn_fsync_group_commit;
    int rc = append_coordinator(b, p, batch, len, what, !group);
    if (rc)
        return rc;
    if (!group) {
        /* Coordinators act only on what is durable, whatever the flush
         * policy for data says: the partition gets a round of its own (on
         * a worker, as with group commit; only internal partitions join
         * rounds then), and its high watermark follows that round. */
        w->round = b->sync_next_round;
        sync_queue_waiter(b, w);
        cn_sync_flush(b, p);
        return 0;
    }
    cn_sync_wait(b, w);
    return 0;
}

int cn_sync_append_internal(struct cn_broker *b, struct cn_partition *p,
                            uint8_t *batch, size_t len,
                            struct cn_sync_waiter *w)
{
    return append_internal(b, p, batch, len, "an internal topic write", w);
}

/* A checkpoint's round is done.  The round moved the high watermark
 * already (to what it synced: records appended after the checkpoint may
 * not be durable yet, so not to the log end). */
static void checkpoint_synced(struct cn_broker *b, struct cn_sync_waiter *w)
{
    struct cn_sync_checkpoint *c = (struct cn_sync_checkpoint *)w;
    struct cn_partition *p = c->p;
    /* The old records may only go once the checkpoint that replaces them
     * is durable.  A round snapshots whole batches, so the checkpoint is
     * synced once the synced offset is past its first record. */
    int err = CN_EOFFLINE;
    if (!cn_partition_offline(b, p) && cn_log_synced_offset(p->log) > c->first)
        err = cn_log_delete_records(p->log, c->first);
    if (!err)
        cn_partition_after_retention(p);
    c->done(c, err);
}

int cn_sync_append_checkpoint(struct cn_broker *b, struct cn_partition *p,
                              uint8_t *batch, size_t len,
                              struct cn_sync_checkpoint *c)
{
    c->p = p;
    c->first = cn_log_end_offset(p->log);
    c->waiter.finish = checkpoint_synced;
    return append_internal(b, p, batch, len, "a checkpoint write", &c->waiter);
}
