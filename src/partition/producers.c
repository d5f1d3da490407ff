/*
 * producers.c - each partition's producer state, kept in step with its
 * log: loaded at open (newest snapshot, then the log after it), updated on
 * every append, snapshotted at segment roll (written on a worker) and
 * clean shutdown, expired on a timer.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/failpoint.h"
#include "base/rd.h"
#include "base/say.h"
#include "partition/epochs.h"
#include "partition/partition.h"
#include "proto/batch.h"

/* Snapshots kept per partition: the newest is what a restart uses; one
 * older is a fallback should the newest turn out corrupt. */
#define SNAPSHOTS_KEPT 2
#define REPLAY_CHUNK_BYTES (1024 * 1024)

int cn_batch_marker(const uint8_t *batch, size_t len, int *type,
                    int32_t *coordinator_epoch)
{
    struct cn_batch_hdr hdr;
    struct cn_record_iter it;
    struct cn_record rec;
    if (cn_batch_records(batch, len, 0, NULL, &hdr, &it) != 0 ||
        cn_record_iter_next(&it, &rec) != 1)
        return CN_ECORRUPT;
    int16_t t;
    if (cn_control_key_parse(rec.key, &t) != 0)
        return CN_ECORRUPT;
    struct cn_rd rd;
    cn_rd_init(&rd, rec.value.ptr,
               rec.value.len > 0 ? (size_t)rec.value.len : 0);
    (void)cn_rd_i16(&rd); /* marker value version */
    int32_t epoch = cn_rd_i32(&rd);
    if (rd.err)
        return CN_ECORRUPT;
    *type = t;
    *coordinator_epoch = epoch;
    return 0;
}

int cn_partition_record_batch(struct cn_partition *p, const uint8_t *batch,
                              size_t len, const struct cn_batch_hdr *hdr)
{
    if (hdr->producer_id < 0)
        return 0;
    int type = -1;
    int32_t coord_epoch = -1;
    if (cn_batch_is_control(hdr) &&
        cn_batch_marker(batch, len, &type, &coord_epoch) != 0)
        return 0; /* not a marker Kafka would write: nothing to track */
    int64_t closed = -1;
    cn_pstate_stable_at(p->pstate, p->high_watermark);
    int rc = cn_pstate_update(p->pstate, hdr, type, coord_epoch, &closed);
    if (rc || type != CN_CONTROL_ABORT || closed < 0)
        return rc;
    /* The read path finds aborted ranges here instead of scanning data.
     * The entry's LSO is where the partition becomes stable once this
     * transaction is out of the way, as Kafka records it.  Replay at
     * start-up re-adds entries; the index ignores ones it has. */
    int64_t next_open = cn_pstate_first_open_offset(p->pstate);
    struct cn_aborted_txn at = {
        .producer_id = hdr->producer_id,
        .first_offset = closed,
        .last_offset = hdr->base_offset,
        .lso = next_open >= 0 ? next_open : hdr->base_offset + 1,
    };
    return cn_log_txnindex_add(p->log, &at);
}

int cn_partition_scan(struct cn_partition *p, int64_t from,
                      int (*fn)(void *arg, const uint8_t *batch, size_t len,
                                const struct cn_batch_hdr *hdr),
                      void *arg)
{
    struct cn_wr buf;
    cn_wr_init(&buf, REPLAY_CHUNK_BYTES);
    int64_t end = cn_log_end_offset(p->log);
    int64_t at = from;
    int rc = 0;
    while (at < end && !rc) {
        cn_wr_reset(&buf);
        size_t got = 0;
        rc = cn_log_read(p->log, at, end, REPLAY_CHUNK_BYTES, true, &buf,
                         &got);
        if (rc || got == 0)
            break;
        for (size_t pos = 0; pos < got && !rc;) {
            struct cn_batch_hdr hdr;
            rc = cn_batch_hdr_parse(buf.buf + pos, got - pos, &hdr);
            if (rc)
                break;
            size_t len = cn_batch_size(&hdr);
            if (cn_batch_last_offset(&hdr) >= at)
                rc = fn(arg, buf.buf + pos, len, &hdr);
            at = cn_batch_last_offset(&hdr) + 1;
            pos += len;
        }
    }
    cn_wr_fini(&buf);
    return rc;
}

struct replay_ctx {
    struct cn_partition *p;
    int64_t batches;
};

static int replay_one(void *arg, const uint8_t *batch, size_t len,
                      const struct cn_batch_hdr *hdr)
{
    struct replay_ctx *rc = arg;
    rc->batches++;
    return cn_partition_record_batch(rc->p, batch, len, hdr);
}

/* Replays the log from `from` to its end through the producer table. */
static int replay(struct cn_partition *p, int64_t from, int64_t *batches)
{
    struct replay_ctx ctx = {p, 0};
    int rc = cn_partition_scan(p, from, replay_one, &ctx);
    *batches = ctx.batches;
    return rc;
}

int cn_partition_producers_load(struct cn_partition *p, const char *name)
{
    p->pstate = cn_pstate_new();
    if (!p->pstate)
        return CN_ENOMEM;
    const char *dir = cn_log_dir(p->log);
    int64_t end = cn_log_end_offset(p->log);
    int64_t snap = -1;
    int rc = cn_pstate_snapshot_load(p->pstate, dir, end, &snap);
    if (rc)
        return rc;
    int64_t from = snap >= 0 ? snap : cn_log_oldest_base(p->log);
    if (from < cn_log_start_offset(p->log))
        from = cn_log_start_offset(p->log);
    int64_t batches = 0;
    rc = replay(p, from, &batches);
    if (rc)
        return rc;
    p->active_base = cn_log_active_base(p->log);
    if (batches > 0 || cn_pstate_count(p->pstate) > 0)
        CN_INFO("producer state for %s: snapshot at offset %" PRId64
                ", replayed %" PRId64 " batches from the log, %zu producers",
                name, snap, batches, cn_pstate_count(p->pstate));
    return 0;
}

/* One roll snapshot: taken on the loop (the table changes with the next
 * append), written on a worker.  It owns copies of all it needs, so the
 * worker never reads the partition, whose table the loop keeps using. */
struct cn_part_snap {
    struct cn_part_work work; /* first: the worker's handle is a snap */
    struct cn_partition *p;   /* NULL once p let go of it */
    int (*queue)(void *ctx, struct cn_part_work *w);
    void *ctx;
    char *dir;
    int64_t offset;      /* the new segment's base */
    int64_t oldest_base; /* prune below (read at the roll: a later
                          * retention only makes this conservative) */
    struct cn_wr image;
    int rc; /* the write's, for done */
};

static void snap_free(struct cn_part_snap *s)
{
    if (!s)
        return;
    cn_wr_fini(&s->image);
    free(s->dir);
    free(s);
}

static void snap_run(struct cn_part_work *w)
{
    struct cn_part_snap *s = (struct cn_part_snap *)w;
    /* The fail point stands for a crash or failure between a roll and
     * its snapshot. */
    s->rc = CN_FAILPOINT("pstate.snapshot");
    if (!s->rc)
        s->rc = cn_pstate_snapshot_store(s->dir, s->offset, s->image.buf,
                                         s->image.len);
    /* Only after the new one is durable: pruning first could leave a
     * crash with no snapshot the log still reaches. */
    if (!s->rc)
        cn_pstate_snapshot_prune(s->dir, s->oldest_base, SNAPSHOTS_KEPT);
}

static void snap_start(struct cn_part_snap *s);

static void snap_done(struct cn_part_work *w)
{
    struct cn_part_snap *s = (struct cn_part_snap *)w;
    /* A failed write (a worker's open meeting EMFILE, a full disk) leaves
     * the older snapshots: a restart replays more of the log, and the
     * next roll tries again. */
    if (s->rc)
        CN_WARN("cannot write producer snapshot %020" PRId64 " in %s: %s",
                s->offset, s->dir, cn_strerror(s->rc));
    struct cn_partition *p = s->p;
    snap_free(s);
    if (!p)
        return;
    p->snap_running = NULL;
    struct cn_part_snap *next = p->snap_pending;
    p->snap_pending = NULL;
    if (next)
        snap_start(next);
}

static void snap_start(struct cn_part_snap *s)
{
    s->p->snap_running = s;
    if (!s->queue || s->queue(s->ctx, &s->work) != 0) {
        snap_run(&s->work);
        snap_done(&s->work);
    }
}

static void snapshot_at_roll(struct cn_partition *p,
                             const struct cn_part_env *env, int64_t offset)
{
    const char *dir = cn_log_dir(p->log);
    struct cn_part_snap *s = calloc(1, sizeof *s);
    int rc = s ? 0 : CN_ENOMEM;
    if (s && !(s->dir = strdup(dir)))
        rc = CN_ENOMEM;
    if (!rc)
        rc = cn_pstate_snapshot_encode(p->pstate, &s->image);
    if (rc) {
        /* As a failed write: the older snapshots stay. */
        CN_WARN("cannot take producer snapshot in %s: %s", dir,
                cn_strerror(rc));
        if (s)
            free(s->dir);
        free(s);
        return;
    }
    s->work = (struct cn_part_work){snap_run, snap_done};
    s->p = p;
    s->queue = env->queue;
    s->ctx = env->ctx;
    s->offset = offset;
    s->oldest_base = cn_log_oldest_base(p->log);
    if (p->snap_running) {
        /* Behind the write in flight; a newer roll's table covers all an
         * older pending one does. */
        snap_free(p->snap_pending);
        p->snap_pending = s;
        return;
    }
    snap_start(s);
}

void cn_partition_check_roll(struct cn_partition *p,
                             const struct cn_part_env *env)
{
    int64_t base = cn_log_active_base(p->log);
    if (base != p->active_base) {
        /* A new segment began at `base`: the table now describes exactly
         * the log below it. */
        p->active_base = base;
        snapshot_at_roll(p, env, base);
    }
}

void cn_partition_snap_release(struct cn_partition *p)
{
    snap_free(p->snap_pending);
    p->snap_pending = NULL;
    if (p->snap_running)
        p->snap_running->p = NULL;
    p->snap_running = NULL;
}

void cn_partition_producers_close(struct cn_partition *p)
{
    bool writing = p->snap_running != NULL;
    cn_partition_snap_release(p);
    if (!p->pstate)
        return;
    const char *dir = cn_log_dir(p->log);
    if (writing)
        CN_WARN("producer snapshot in %s still being written at close: "
                "none written at shutdown (a restart replays from it)",
                dir);
    else if (!cn_log_is_offline(p->log)) {
        int rc = cn_pstate_snapshot_write(p->pstate, dir,
                                          cn_log_end_offset(p->log));
        if (rc)
            CN_WARN("cannot write producer snapshot in %s: %s", dir,
                    cn_strerror(rc));
        else
            cn_pstate_snapshot_prune(dir, cn_log_oldest_base(p->log),
                                     SNAPSHOTS_KEPT);
    }
    cn_pstate_free(p->pstate);
    p->pstate = NULL;
}

void cn_partition_after_retention(struct cn_partition *p)
{
    /* Epochs whose offsets are all gone cannot answer for them any more
     * (KIP-101: the follower is told where the log now starts). */
    if (p->epochs)
        (void)cn_epochs_truncate_from_start(p->epochs,
                                            cn_log_start_offset(p->log));
    /* A roll snapshot not yet written may be the only one at or above the
     * new oldest base: pruning now could leave a crash none.  The worker
     * prunes after its rename, and the next pass here. */
    if (p->snap_running || p->snap_pending)
        return;
    cn_pstate_snapshot_prune(cn_log_dir(p->log), cn_log_oldest_base(p->log),
                             SNAPSHOTS_KEPT);
}

int cn_partition_producers_rewind(struct cn_partition *p)
{
    int64_t end = cn_log_end_offset(p->log);
    /* A roll snapshot waiting to be written describes the log below its
     * offset: above the new end, batches that are gone. */
    if (p->snap_pending && p->snap_pending->offset > end) {
        snap_free(p->snap_pending);
        p->snap_pending = NULL;
    }
    struct cn_pstate *ps = cn_pstate_new();
    if (!ps)
        return CN_ENOMEM;
    struct cn_pstate *old = p->pstate;
    p->pstate = ps;
    cn_pstate_free(old);
    /* Deletes the snapshots above the new end, then replays from the
     * newest left, as at open. */
    const char *dir = cn_log_dir(p->log);
    int64_t snap = -1;
    int rc = cn_pstate_snapshot_load(ps, dir, end, &snap);
    if (rc)
        return rc;
    int64_t from = snap >= 0 ? snap : cn_log_oldest_base(p->log);
    if (from < cn_log_start_offset(p->log))
        from = cn_log_start_offset(p->log);
    int64_t batches = 0;
    rc = replay(p, from, &batches);
    p->active_base = cn_log_active_base(p->log);
    return rc;
}

int cn_partition_producers_reset(struct cn_partition *p)
{
    snap_free(p->snap_pending);
    p->snap_pending = NULL;
    cn_pstate_clear(p->pstate);
    p->active_base = cn_log_active_base(p->log);
    /* None of them describes the new log. */
    return cn_pstate_snapshot_prune(cn_log_dir(p->log), INT64_MAX, 0);
}
