/*
 * log_trunc.c - cutting a log's end (cn_log_truncate_to) and restarting
 * it empty (cn_log_reset_at): what a follower whose log diverged from its
 * leader's needs (partition/replication.c).
 */
#include "base/err.h"
#include "log/file.h"
#include "base/say.h"
#include "log/log.h"
#include "log/log_clean.h"
#include "log/log_int.h"

/* The cleaner's checkpoint must not call offsets clean that the log no
 * longer holds (new batches will get them): cleaning starts over. */
static void forget_cleaned(struct cn_log *log, int64_t end)
{
    if (log->clean_first_dirty <= end)
        return;
    log->clean_first_dirty = -1;
    int err = cn_log_clean_forget(log->dir);
    if (err)
        CN_WARN("log %s: cannot forget its cleaner checkpoint: %s", log->dir,
                cn_strerror(err));
}

/* Unlinks and drops segs[from..], newest first: a crash midway leaves a
 * prefix of the log, never a hole. */
static int drop_from(struct cn_log *log, size_t from)
{
    while (log->nsegs > from) {
        struct cn_segment *seg = log->segs[log->nsegs - 1];
        log->nsegs--;
        int err = log_seg_unlink(log, seg->base);
        log_seg_release(seg);
        if (err)
            return err;
    }
    return 0;
}

int cn_log_truncate_to(struct cn_log *log, int64_t offset)
{
    if (log->offline)
        return CN_EOFFLINE;
    if (offset < log->start_offset || offset > log->end_offset)
        return CN_ERANGE;
    if (offset == log->end_offset)
        return 0;
    /* A pass reads these segments on a worker and may swap them. */
    if (log->clean_busy)
        return CN_EBUSY;
    size_t si = log_find_seg(log, offset);
    int err = drop_from(log, si + 1);
    struct cn_segment *seg = log_active(log);
    const char *what = "truncation";
    if (!err)
        err = log_seg_truncate(log, seg, offset);
    /* Synced now: a crash must not bring the cut batches back (they are
     * the diverged ones a follower must not serve again). */
    if (!err)
        err = log_seg_sync_all(seg);
    if (!err)
        err = cn_file_sync_dir(log->dir);
    if (err) {
        log_go_offline(log, what, err);
        return CN_EOFFLINE;
    }
    log->end_offset = seg->next_offset;
    log_syncs_cap(log, log->end_offset, seg);
    log_recompute_max_ts(log);
    forget_cleaned(log, log->end_offset);
    CN_INFO("log %s: truncated to offset %lld (asked %lld)", log->dir,
            (long long)log->end_offset, (long long)offset);
    /* The cut segment is active again and not synced whole: recovery must
     * scan it (and anything rolled after it) after a crash. */
    if (log->ckpt_rp > seg->base) {
        err = log_ckpt_write(log, log->start_offset, seg->base, false);
        if (err) {
            log_go_offline(log, "checkpoint write", err);
            return CN_EOFFLINE;
        }
    }
    if (log->end_offset < log->start_offset)
        return cn_log_reset_at(log, log->start_offset);
    return 0;
}

int cn_log_reset_at(struct cn_log *log, int64_t new_start)
{
    if (log->offline)
        return CN_EOFFLINE;
    if (new_start < 0)
        return CN_EINVAL;
    if (log->clean_busy)
        return CN_EBUSY;
    struct cn_segment *seg = NULL;
    int err = drop_from(log, 0);
    if (!err)
        err = cn_file_sync_dir(log->dir);
    if (!err)
        err = log_seg_create(log, new_start, &seg);
    if (!err) {
        err = log_push_seg(log, seg);
        if (err)
            log_seg_free(seg);
    }
    if (err) {
        /* No segment left to serve from: offline until a restart. */
        log_go_offline(log, "log reset", err);
        return CN_EOFFLINE;
    }
    seg->durable = true;
    log->start_offset = log->end_offset = new_start;
    log_syncs_cap(log, new_start, NULL);
    log->synced_offset = new_start;
    log->max_ts = log->max_ts_offset = -1;
    forget_cleaned(log, -1);
    err = log_ckpt_write(log, new_start, new_start, false);
    if (err) {
        log_go_offline(log, "checkpoint write", err);
        return CN_EOFFLINE;
    }
    CN_INFO("log %s: emptied, restarting at offset %lld", log->dir,
            (long long)new_start);
    return 0;
}
