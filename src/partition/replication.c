/*
 * replication.c - what replication does to a partition besides appending
 * (see partition.h): the leader-epoch cache's life beside the log, the
 * start of a leadership, and a follower's truncations.
 */
#include <inttypes.h>

#include "base/err.h"
#include "base/say.h"
#include "partition/epochs.h"
#include "partition/partition.h"

struct rebuild_ctx {
    struct cn_epochs *e;
    int64_t batches;
};

static int rebuild_one(void *arg, const uint8_t *batch, size_t len,
                       const struct cn_batch_hdr *hdr)
{
    struct rebuild_ctx *rc = arg;
    (void)batch;
    (void)len;
    rc->batches++;
    if (hdr->leader_epoch > cn_epochs_latest(rc->e))
        return cn_epochs_assign(rc->e, hdr->leader_epoch, hdr->base_offset);
    return 0;
}

int cn_partition_epochs_load(struct cn_partition *p)
{
    const char *dir = cn_log_dir(p->log);
    int64_t start = cn_log_start_offset(p->log);
    int64_t end = cn_log_end_offset(p->log);
    struct cn_epochs *e = NULL;
    int err = cn_epochs_open(dir, &e);
    if (err == CN_ECORRUPT)
        e = cn_epochs_new_empty(dir);
    else if (err)
        return err;
    if (!e)
        return CN_ENOMEM;
    /* Missing (a log older than the cache) or corrupt: the batches carry
     * their leader epochs, so the log says it all again. */
    if ((err == CN_ECORRUPT || cn_epochs_count(e) == 0) && end > start) {
        struct rebuild_ctx rc = {e, 0};
        err = cn_partition_scan(p, start, rebuild_one, &rc);
        if (!err && cn_epochs_count(e) == 0)
            err = cn_epochs_clear(e); /* no epoch in any batch: say so */
        if (err) {
            cn_epochs_free(e);
            return err;
        }
        CN_INFO("leader epochs of %s rebuilt from %" PRId64
                " batches: %zu epochs",
                dir, rc.batches, cn_epochs_count(e));
    }
    /* A crash between a truncation or retention and the checkpoint's
     * write leaves entries the log no longer has. */
    err = cn_epochs_truncate_from_end(e, end);
    if (!err)
        err = cn_epochs_truncate_from_start(e, start);
    if (err) {
        cn_epochs_free(e);
        return err;
    }
    p->epochs = e;
    return 0;
}

void cn_partition_epochs_close(struct cn_partition *p)
{
    cn_epochs_free(p->epochs);
    p->epochs = NULL;
}

int cn_part_become_leader(struct cn_partition *p, int32_t epoch)
{
    p->leader_epoch = epoch;
    if (!p->epochs)
        return 0;
    return cn_epochs_assign(p->epochs, epoch, cn_log_end_offset(p->log));
}

/* A log error of a truncation: the caller retries CN_EBUSY, and a range
 * is the caller's mistake; anything else is the disk's. */
static int log_failed(const struct cn_part_env *env, const char *what, int err)
{
    if (err != CN_EBUSY && err != CN_ERANGE && err != CN_EINVAL)
        env->dir_failed(env->ctx, what, err);
    return err;
}

int cn_part_truncate(struct cn_partition *p, const struct cn_part_env *env,
                     int64_t offset)
{
    if (offset < cn_log_start_offset(p->log) ||
        offset > cn_log_end_offset(p->log))
        return CN_ERANGE;
    if (offset == cn_log_end_offset(p->log))
        return 0;
    /* The worker's snapshot may be of a table above the cut and would
     * land after the rebuild deleted those. */
    if (p->snap_running)
        return CN_EBUSY;
    int err = cn_log_truncate_to(p->log, offset);
    if (err)
        return log_failed(env, "a log truncation", err);
    int64_t end = cn_log_end_offset(p->log);
    if (p->high_watermark > end)
        p->high_watermark = end;
    if (p->epochs) {
        err = cn_epochs_truncate_from_end(p->epochs, end);
        if (err)
            return log_failed(env, "a leader-epoch checkpoint write", err);
    }
    err = cn_partition_producers_rewind(p);
    if (err)
        return log_failed(env, "a producer-state rebuild", err);
    return 0;
}

int cn_part_truncate_fully(struct cn_partition *p,
                           const struct cn_part_env *env, int64_t new_start)
{
    if (p->snap_running)
        return CN_EBUSY;
    int err = cn_log_reset_at(p->log, new_start);
    if (err)
        return log_failed(env, "a log reset", err);
    p->high_watermark = new_start;
    if (p->epochs) {
        err = cn_epochs_clear(p->epochs);
        if (err)
            return log_failed(env, "a leader-epoch checkpoint write", err);
    }
    err = cn_partition_producers_reset(p);
    if (err)
        return log_failed(env, "a producer snapshot removal", err);
    return 0;
}
