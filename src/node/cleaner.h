/*
 * cleaner.h - the log cleaner manager: which compacted partition is
 * cleaned when, on which thread, and what /metrics says about it.
 *
 * Only user topics with cleanup.policy containing compact are cleaned;
 * the coordinators' internal topics keep compacting by checkpoint
 * (cn_istore_maybe_compact), because their coordinators hold the newest record
 * per key in memory already and rewrite it whole.
 *
 * Scheduling follows Kafka's LogCleanerManager: at each scan the cleaner
 * picks, among the partitions not being cleaned, the one with the highest
 * dirty ratio above its min.cleanable.dirty.ratio, or any whose oldest
 * dirty record waited longer than max.compaction.lag.ms; with nothing to
 * do it sleeps log.cleaner.backoff.ms.  A pass is begun and ended on the
 * loop (cn_log_clean_begin / end, with the partition's LSO and active
 * producers from its producer state) and run on one of
 * log.cleaner.threads worker threads of the cleaner's own, so a pass
 * never holds a libuv pool thread that the group commit's fsyncs need.
 * The workers' reads and writes together stay under
 * log.cleaner.io.max.bytes.per.second (Kafka's Throttler).
 *
 * Stopping: cn_cleaner_stop makes every running pass give up at its next
 * chunk, or before its swap's commit point (its .cleaned files are
 * removed, nothing is swapped; a swap past that point finishes) and frees
 * the cleaner once the last one ended; b->clean_running counts passes in
 * flight, which the broker's shutdown and the reaping of deleted topics
 * wait for.
 *
 * The end of a pass: the loop commits (cn_log_clean_commit: holds the old
 * segments' descriptors), a worker swaps the files (cn_log_clean_swap),
 * the loop swaps the segment list (cn_log_clean_end), and a worker closes
 * the old descriptors (cn_log_clean_free), so the loop does no disk I/O
 * for a pass beyond opening old .log files the descriptor cache had
 * closed.  cairn_cleaner_swap_loop_ms_max on /metrics is the longest of
 * those loop steps.
 *
 * Runs on: loop (the workers only run the engine's run, swap and free).
 */
#ifndef CN_NODE_CLEANER_H
#define CN_NODE_CLEANER_H

#include <stdbool.h>
#include <stdint.h>

#include "node/broker_int.h"

struct cn_cleaner;

/* Starts the workers and the scan timer (nothing when log.cleaner.enable
 * is false or log.cleaner.threads is 0: *out is then NULL).  Returns 0 or
 * CN_ENOMEM / -errno. */
int cn_cleaner_start(struct cn_broker *b, struct cn_cleaner **out);
/* Stops scanning and cancels running passes; frees c once none runs.
 * NULL is fine.  Call once. */
void cn_cleaner_stop(struct cn_cleaner *c);
/* p's topic is being deleted: a pass over it gives up at its next chunk
 * (the log is deleted once the pass ended, see cn_topics_reap). */
void cn_cleaner_forget(struct cn_broker *b, const struct cn_partition *p);
/* A dynamic broker config changed: running passes take the new rate
 * limit at their next chunk. */
void cn_cleaner_config_changed(struct cn_broker *b);

/* Totals and the last pass, for /metrics (Kafka's LogCleaner gauges). */
struct cn_cleaner_stats {
    bool enabled;
    int threads;
    double max_dirty_percent;  /* highest dirty ratio of the last scan,
                                 * x100 (max-dirty-percent) */
    int64_t since_last_run_ms; /* since the last pass ended, or the start
                                 * (time-since-last-run-ms) */
    uint64_t passes;           /* passes ended with a swap */
    uint64_t passes_failed;    /* ended with an error (not cancelled) */
    uint64_t bytes_read;       /* .log bytes read by passes */
    uint64_t bytes_written;    /* .log bytes of cleaned segments */
    uint64_t records_removed;
    int64_t last_pass_ms;       /* wall time of the last pass's run */
    int last_error;             /* of the last failed pass, 0 none */
    int running;                /* passes in flight */
    double swap_loop_ms_max;    /* longest loop-side step of a pass's end
                                 * (commit or end), since the start */
    double swap_worker_ms_last; /* the last swap's disk work, on a worker */
};
void cn_cleaner_get_stats(const struct cn_broker *b,
                          struct cn_cleaner_stats *out);

/* One compacted partition's cleaning state (cairnctl, per-partition
 * metrics), from memory.  Returns false for a partition the cleaner does
 * not clean (not compacted, internal, offline). */
struct cn_cleaner_pstate {
    double dirty_ratio;  /* as max-dirty-percent / 100 */
    int64_t first_dirty; /* cleaner checkpoint */
    int64_t first_uncleanable;
    int64_t dirty_bytes;
    bool cleaning;              /* a pass is in flight */
    int64_t since_last_pass_ms; /* since its last pass ended, -1 none yet */
    int last_error;             /* of its last pass, 0 it swapped (or none) */
};
bool cn_cleaner_partition_state(const struct cn_broker *b,
                                const struct cn_partition *p,
                                struct cn_cleaner_pstate *out);

#endif
