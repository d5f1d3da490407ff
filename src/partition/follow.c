/*
 * follow.c - a follower's decision on one partition's Fetch response
 * (follow.h).  Pure: no I/O, no clock.
 */
#include "partition/follow.h"
#include "proto/kerr.h"

static int64_t min64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

/* Truncate to `to`; below this log's start the log is emptied instead
 * (Kafka's truncateTo does truncateFullyAndStartAt then), and restarted
 * no lower than the leader's start: anything below it would be refused
 * with OFFSET_OUT_OF_RANGE by the next fetch anyway. */
static void cut(const struct cn_follow_log *log, int64_t leader_start,
                int64_t to, struct cn_follow_action *out)
{
    if (to < log->log_start) {
        out->kind = CN_FOLLOW_TRUNCATE_FULLY;
        out->offset = leader_start > to ? leader_start : to;
        return;
    }
    out->kind = CN_FOLLOW_TRUNCATE;
    out->offset = to;
}

/* getOffsetTruncationState for a DivergingEpoch {E, end}. */
static int64_t diverged_at(const struct cn_follow_log *log,
                           const struct cn_follow_resp *r)
{
    if (r->diverging_end_offset < 0)
        return log->leo; /* the leader knows no end: cut nothing */
    if (r->own_epoch < 0 || r->own_end_offset < 0 || r->diverging_epoch < 0)
        return min64(r->diverging_end_offset, log->leo);
    if (r->own_epoch != r->diverging_epoch)
        return min64(r->own_end_offset, log->leo);
    return min64(min64(r->diverging_end_offset, r->own_end_offset), log->leo);
}

static void out_of_range(const struct cn_follow_log *log,
                         const struct cn_follow_resp *r,
                         struct cn_follow_action *out)
{
    int64_t start = r->log_start_offset, end = r->leader_leo;

    /* Behind the leader's start (it deleted what we lack): nothing here
     * is worth keeping.  The leader's LEO is at least its start, so no
     * need to know it. */
    if (start >= 0 && start > log->leo) {
        out->kind = CN_FOLLOW_TRUNCATE_FULLY;
        out->offset = start;
        return;
    }
    if (end < 0) {
        out->kind = CN_FOLLOW_LIST_OFFSETS;
        return;
    }
    /* Ahead of the leader's end: what the leader never had goes. */
    if (end < log->leo) {
        cut(log, start, end, out);
        return;
    }
    if (start < 0) {
        out->kind = CN_FOLLOW_LIST_OFFSETS;
        return;
    }
    out->kind = CN_FOLLOW_BACKOFF; /* in range by now: fetch again */
}

void cn_follow_decide(const struct cn_follow_log *log,
                      const struct cn_follow_resp *r,
                      struct cn_follow_action *out)
{
    out->kind = CN_FOLLOW_BACKOFF;
    out->offset = -1;
    out->await_metadata = false;

    switch (r->error) {
    case KAFKA_NONE:
        /* Kafka: isDivergingEpoch is either field set. */
        if (r->diverging_epoch >= 0 || r->diverging_end_offset >= 0)
            cut(log, r->log_start_offset, diverged_at(log, r), out);
        else
            out->kind = CN_FOLLOW_APPEND;
        return;
    case KAFKA_OFFSET_OUT_OF_RANGE: out_of_range(log, r, out); return;
    case KAFKA_NOT_LEADER_OR_FOLLOWER:
    case KAFKA_FENCED_LEADER_EPOCH:
    case KAFKA_UNKNOWN_TOPIC_OR_PARTITION:
    case KAFKA_UNKNOWN_TOPIC_ID:
    case KAFKA_INCONSISTENT_TOPIC_ID: out->await_metadata = true; return;
    default: return;
    }
}

void cn_follow_settle(const struct cn_follow_log *log,
                      const struct cn_follow_resp *r, int64_t *hw,
                      int64_t *log_start)
{
    int64_t h = log->hw, start = log->log_start;

    if (r->high_watermark >= 0) {
        h = min64(r->high_watermark, log->leo);
        if (h < log->log_start)
            h = log->log_start;
    }
    if (r->log_start_offset > start)
        start = min64(r->log_start_offset, h); /* h >= log start */
    *hw = h;
    *log_start = start;
}
