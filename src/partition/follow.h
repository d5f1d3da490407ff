/*
 * follow.h - what a follower does with one partition's part of its
 * leader's Fetch response: append, truncate where its log diverges,
 * start over at the leader's log start, ask the leader for its offsets,
 * or back off.
 *
 * A pure function after Kafka's AbstractFetcherThread
 * (processFetchRequest, truncateOnFetchResponse with
 * getOffsetTruncationState, handleOutOfRangeError with
 * fetchOffsetAndTruncate) and ReplicaFetcherThread.processPartitionData:
 * the caller reads its log's state and the response, this decides, the
 * caller does it (partition layer truncation or append) and fetches
 * again.  Truncation on fetch follows KIP-320 and Fetch v12+
 * (DivergingEpoch), with KIP-279's rule when the follower does not know
 * the epoch the leader answers with.
 *
 * Offsets are log offsets; -1 is unknown or absent.
 *
 * Runs on: loop (the replica fetcher's).
 */
#ifndef CN_PARTITION_FOLLOW_H
#define CN_PARTITION_FOLLOW_H

#include <stdbool.h>
#include <stdint.h>

/* The follower's log, before the response is handled. */
struct cn_follow_log {
    int64_t leo;       /* log end offset = the fetch offset it sent */
    int64_t log_start; /* its log start offset */
    int64_t hw;        /* its high watermark */
};

/* One partition of the response, plus what the caller knows besides. */
struct cn_follow_resp {
    int16_t error;            /* the partition's Kafka error code */
    int64_t high_watermark;   /* the leader's, -1 absent */
    int64_t log_start_offset; /* the leader's, -1 absent (Kafka sends -1
                               * with an error; Cairn's leader may not) */
    /* DivergingEpoch, {-1, -1} when absent. */
    int32_t diverging_epoch;
    int64_t diverging_end_offset;
    bool has_records; /* the response carries record batches (APPEND
                       * either way: with none, only settle) */
    /* With a diverging epoch: this log's own answer for that epoch
     * (cn_epochs_end_offset_for(diverging_epoch, leo)): the largest epoch
     * it holds <= diverging_epoch and where that one ends; {-1, -1} when
     * it holds none or has no epoch cache. */
    int32_t own_epoch;
    int64_t own_end_offset;
    /* After an OFFSET_OUT_OF_RANGE, the leader's log end offset from a
     * ListOffsets (latest, as a replica), -1 not asked yet. */
    int64_t leader_leo;
};

enum cn_follow_kind {
    /* Append the batches (if any) as they are, then take the HW and log
     * start of cn_follow_settle. */
    CN_FOLLOW_APPEND,
    /* Truncate the log to .offset and fetch from there.  .offset may
     * equal the LEO: nothing is cut from the log, but epoch-cache entries
     * starting at or after it must still go (an epoch this broker began
     * as leader and never wrote to; Kafka's UnifiedLog.truncateTo does
     * this), else the next fetch diverges again at the same place. */
    CN_FOLLOW_TRUNCATE,
    /* Empty the log and restart it at .offset (the leader's log start,
     * or a truncation point below this log's start). */
    CN_FOLLOW_TRUNCATE_FULLY,
    /* OFFSET_OUT_OF_RANGE and the answer needs the leader's offsets: ask
     * it with ListOffsets (earliest and latest, as a replica) and decide
     * again with leader_leo and log_start_offset filled in. */
    CN_FOLLOW_LIST_OFFSETS,
    /* Change nothing; fetch again after replica.fetch.backoff.ms. */
    CN_FOLLOW_BACKOFF,
};

struct cn_follow_action {
    enum cn_follow_kind kind;
    int64_t offset; /* TRUNCATE, TRUNCATE_FULLY: see above; else -1 */
    /* BACKOFF: this broker's metadata is what is out of date
     * (NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, UNKNOWN_TOPIC_*,
     * INCONSISTENT_TOPIC_ID): a newer image, not time, fixes it, so fetch
     * again when the image changes the partition (or after the backoff if
     * that is simpler).  False for UNKNOWN_LEADER_EPOCH: the leader's
     * metadata lags ours and it catches up by itself. */
    bool await_metadata;
};

/* Decides what to do with r for a log in state *log; fills *out.
 *   NONE, no diverging epoch: APPEND.
 *   NONE with a diverging epoch {E, end}: TRUNCATE (no append: the
 *     records, if any, are not for this log) to
 *       - min(end, LEO) if own_epoch is -1 (no epoch at or below E here);
 *       - min(own_end_offset, LEO) if own_epoch != E (KIP-279: this log
 *         does not know E; cut to where its own older epoch ends, and the
 *         next fetch asks again);
 *       - min(end, own_end_offset, LEO) otherwise;
 *     the LEO if end is -1; and TRUNCATE_FULLY when that point is below
 *     this log's start (at the leader's log start if that is higher).
 *   OFFSET_OUT_OF_RANGE (handleOutOfRangeError):
 *       - the leader's log start above the LEO: TRUNCATE_FULLY there;
 *       - leader_leo known and below the LEO (this log has what the
 *         leader lost, after an unclean election or a log without
 *         epochs): TRUNCATE to leader_leo;
 *       - either offset needed but unknown: LIST_OFFSETS;
 *       - else (the LEO is within the leader's log now): BACKOFF.
 *   any other error: BACKOFF. */
void cn_follow_decide(const struct cn_follow_log *log,
                      const struct cn_follow_resp *r,
                      struct cn_follow_action *out);

/* After an APPEND, with *log as it is now (the LEO after the append): the
 * high watermark and log start to set.  *hw = min(leader HW, LEO), never
 * below the log start (Kafka's follower takes the leader's HW even when
 * lower, e.g. a new leader's that has not caught up yet); unchanged when
 * the response has none.  *log_start = the leader's log start when higher
 * than this log's (DeleteRecords, retention), never past *hw (Kafka
 * refuses a log start above the HW). */
void cn_follow_settle(const struct cn_follow_log *log,
                      const struct cn_follow_resp *r, int64_t *hw,
                      int64_t *log_start);

#endif
