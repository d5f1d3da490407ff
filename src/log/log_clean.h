/*
 * log_clean.h - the log cleaner's engine on disk: one cleaning pass over a
 * partition log (cleanup.policy=compact), in steps like a sync, so every
 * disk access runs off the loop thread.  The retention rules themselves
 * are src/clean/clean.h; this drives them over the segment files and
 * swaps the result in crash-safely.
 *
 *   cn_log_clean_begin()  loop: snapshots what the pass needs (the
 *                         cleanable segments, the first dirty offset from
 *                         the cleaner checkpoint, the aborted transactions
 *                         of the range, the caller's LSO and active
 *                         producers) and holds the segments; returns a job.
 *   cn_log_clean_run()    worker: builds the key map over the dirty range
 *                         and writes the cleaned groups of segments as
 *                         <base>.{log,index,timeindex,txnindex}.cleaned
 *                         next to the originals, fdatasynced.  Touches
 *                         only the job (no loop calls, no descriptor
 *                         cache).
 *   cn_log_clean_commit() loop: checks the job's segments are unchanged and
 *                         holds the .log descriptors of those the swap
 *                         replaces (opening any the cache had closed), so
 *                         reads go on seeing the old bytes whatever the
 *                         names become; from here until end no segment is
 *                         deleted (retention waits, DeleteRecords only
 *                         moves the log start).
 *   cn_log_clean_swap()   worker: manifest, renames and unlinks, opens and
 *                         loads the cleaned segments (outside the
 *                         descriptor cache), directory fsync, manifest
 *                         removed, cleaner checkpoint written.
 *   cn_log_clean_end()    loop, memory only: the cleaned segments replace
 *                         the old in the list and the old ones' descriptors
 *                         leave the cache; fills the stats.  (Called right
 *                         after run, it commits and swaps on the calling
 *                         thread first, as tools and tests do.)
 *   cn_log_clean_free()   any thread, best a worker: closes the old
 *                         descriptors (their files are unlinked, so the
 *                         last close frees the blocks) and frees the job.
 *
 * A begun job must be ended (or abandoned) before cn_log_close() or
 * cn_log_delete(), as a sync must; free may come later.
 *
 * Appends go on meanwhile: only the active segment changes and it is never
 * cleaned.  Retention or DeleteRecords deleting a segment of the job while
 * it runs makes commit refuse it (-EAGAIN; end removes the .cleaned files,
 * nothing swapped); the next pass starts over.  A fetch during the swap
 * reads the old segments through the held descriptors; a sync of an old
 * segment whose file the swap removed counts as done (its data is in the
 * cleaned segment, synced before).
 *
 * Each group of segments becomes one segment named after its first; its
 * last batch is kept (emptied if need be), so the new segment ends where
 * the group did and is never empty, as Kafka keeps the last batch of a
 * round.  Offsets never change; batches removed leave gaps, which reads,
 * recovery and --verify-logs accept.
 *
 * Files.  The swap's commit point is <dir>/cleaner.swap, a small CRC'd
 * manifest naming each group (new base, old bases' end) written and synced
 * before any old file is touched.  Recovery (cn_log_open) finishes a swap
 * whose manifest is intact (deletes the old segments of each group,
 * renames the .cleaned files over the group's first segment) and otherwise
 * deletes every .cleaned file, so a crash anywhere leaves the old segments
 * or the new, never a mix.
 *
 * The first dirty offset of each partition is kept in
 * <log dir>/cleaner-offset-checkpoint, Kafka's file and format (version 0,
 * count, "topic partition offset" lines), one per log dir, shared by the
 * partitions in it and rewritten atomically (tmp, fsync, rename) under a
 * process-wide lock.  Kafka's file, because the issue asks for it and a
 * tool that knows Kafka's layout reads it; the cost is a rewrite of the
 * whole file per pass (one line per compacted partition of the dir).  A
 * line past the log end at open (a directory removed behind our back) is
 * ignored.
 *
 * Fail points ("error" makes the step fail and the job be abandoned,
 * "crash" kills the process there):
 *   clean.written      run, after every .cleaned file is written and synced
 *   clean.swap         swap, manifest committed, first group's old files
 *                      gone
 *   clean.index        swap, every group renamed in and its indexes loaded
 *   clean.ckpt.before  swap, before the cleaner checkpoint write
 *   clean.ckpt.after   swap, after it
 * (all on the worker: a crash there leaves the disk as the same crash did
 * when the swap ran on the loop, and end then never ran).
 */
#ifndef CN_LOG_LOG_CLEAN_H
#define CN_LOG_LOG_CLEAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "clean/clean.h"
#include "log.h"

/* What a pass is given; copied by begin (producers too). */
struct cn_log_clean_params {
    int64_t now_ms;                /* clock for lags and delete horizons */
    int64_t min_compaction_lag_ms; /* min.compaction.lag.ms */
    int64_t delete_retention_ms;   /* delete.retention.ms */
    int64_t lso;                   /* last stable offset: nothing at or past
                                    * it is cleaned (the high watermark when
                                    * no transaction is open) */
    size_t dedupe_bytes;           /* key map budget for this pass, from
                                    * log.cleaner.dedupe.buffer.size */
    /* Producers in producer state, with the offset of each one's last data
     * batch (its last batch is kept, emptied if need be). */
    const struct cn_clean_producer *producers;
    size_t n_producers;
    /* I/O rate limiter (log.cleaner.io.max.bytes.per.second): called on the
     * worker after every chunk read or written with its byte count; it may
     * sleep.  NULL for none.  A non-zero return stops the pass (the job
     * then fails with that code, e.g. on shutdown). */
    int (*throttle)(void *arg, size_t bytes);
    void *throttle_arg;
};

/* The scheduler's view of one log, from memory (no I/O). */
struct cn_log_clean_state {
    int64_t first_dirty;       /* cleaner checkpoint, clamped to the log
                                * start and end */
    int64_t first_uncleanable; /* cn_clean_first_uncleanable() */
    double dirty_ratio;        /* Kafka's max-dirty-percent / 100 */
    int64_t dirty_bytes;       /* bytes of segments in the dirty range */
    int64_t cleanable_bytes;   /* bytes of segments below uncleanable */
    /* Smallest max timestamp among the dirty non-active segments, -1 if
     * none has one: max.compaction.lag.ms forces a pass once now is past it
     * by the lag (Kafka uses each segment's first batch timestamp; ours is
     * later, so a forced pass may come a segment's age later at most). */
    int64_t dirty_earliest_ts;
};

/* Fills *out for log with the same lso / now / lag as a pass would use.
 * Returns 0 or CN_EOFFLINE.  Runs on: loop. */
int cn_log_clean_state(const struct cn_log *log, int64_t now_ms,
                       int64_t min_compaction_lag_ms, int64_t lso,
                       struct cn_log_clean_state *out);

/* What one pass did (end fills it, also on failure as far as it got). */
struct cn_log_clean_stats {
    int64_t first_dirty;     /* checkpoint before the pass */
    int64_t cleaned_to;      /* checkpoint after it (first dirty offset) */
    int32_t segments_before; /* segments rewritten */
    int32_t segments_after;  /* segments they became */
    int64_t bytes_read;      /* .log bytes read, map and rewrite */
    int64_t bytes_written;   /* .log bytes of the cleaned segments */
    int64_t records_read;    /* records of the rewritten segments */
    int64_t records_removed; /* of which dropped */
    int64_t batches_emptied; /* kept with no record (producer state) */
    int64_t keys_mapped;     /* entries in the key map */
    int64_t run_ms;          /* wall time of run (monotonic) */
    double dirty_ratio_after;
};

struct cn_log_clean_job;

/* Snapshots a pass over log with p.  Returns 0 and *out, or -EAGAIN
 * when there is nothing to clean (no dirty segment below the bound, the
 * log is empty), -EBUSY when a job is already in flight for this log,
 * CN_EOFFLINE or CN_ENOMEM.  Runs on: loop. */
int cn_log_clean_begin(struct cn_log *log, const struct cn_log_clean_params *p,
                       struct cn_log_clean_job **out);

/* Runs the pass: reads, decides, writes and syncs the .cleaned files.
 * Returns 0, -errno, CN_ECORRUPT (a segment does not decode or fails its
 * CRC: the log is left alone), CN_ETOOBIG (the keys of the first dirty
 * batch alone exceed dedupe_bytes), CN_ENOMEM, CN_EFAILPOINT, or the
 * throttle's code.
 * Runs on: worker. */
int cn_log_clean_run(struct cn_log_clean_job *job);

/* After run returned 0: readies the swap (see above).  Returns 0 (then
 * cn_log_clean_swap, then end), or -EAGAIN when the log changed under the
 * job, CN_EOFFLINE, -errno when a descriptor cannot be opened, CN_ENOMEM
 * (then end with that error).  Runs on: loop. */
int cn_log_clean_commit(struct cn_log *log, struct cn_log_clean_job *job);

/* The swap's disk work, and the cleaner checkpoint.  Calls the throttle
 * once first (its error, e.g. -ECANCELED, calls the swap off, nothing
 * touched).  Returns 0 or the first error; end reads the details from the
 * job.  Runs on: worker (touches only the job and files). */
int cn_log_clean_swap(struct cn_log_clean_job *job);

/* Takes the result of the caller's last step (run, commit or swap) in
 * err.  After a swap: the cleaned segments go into the list.  Else (err
 * set, or the log changed under the job, see above: -EAGAIN) removes the
 * .cleaned files.  Fills *stats (may be NULL) and returns the pass's
 * result: 0, run's or commit's error, -EAGAIN, or -errno of the swap (a
 * failed swap after the commit point takes the log offline: recovery at
 * the next open finishes it), or of the checkpoint write (the swap
 * stands; the next pass only re-reads clean data).  The job is then only
 * for cn_log_clean_free.
 * Runs on: loop. */
int cn_log_clean_end(struct cn_log *log, struct cn_log_clean_job *job, int err,
                     struct cn_log_clean_stats *stats);

/* Closes what end left to close and frees the job (NULL is fine).
 * Runs on: any thread, once end has returned. */
void cn_log_clean_free(struct cn_log_clean_job *job);

/* Ends and frees a job that was begun but will not run (shutdown before
 * the worker took it), like end with an error.  Runs on: loop. */
void cn_log_clean_abandon(struct cn_log *log, struct cn_log_clean_job *job);

/* Whole-pass convenience for tests and tools: begin, run, end on the
 * calling thread.  -EAGAIN when there was nothing to clean. */
int cn_log_clean_now(struct cn_log *log, const struct cn_log_clean_params *p,
                     struct cn_log_clean_stats *stats);

/* The log's cleaner checkpoint: first dirty offset (the log start when it
 * has never been cleaned).  Runs on: loop. */
int64_t cn_log_clean_checkpoint(const struct cn_log *log);

/* Topic deletion: drops the partition's line from its log dir's cleaner
 * checkpoint (cn_log_delete calls it).  Returns 0 or -errno.
 * Runs on: loop. */
int cn_log_clean_forget(const char *partition_dir);

/* ---- cleaner-offset-checkpoint, the file (decoder fuzzed) -------------- */

struct cn_clean_ckpt_entry {
    char topic[256]; /* NUL-terminated */
    int32_t partition;
    int64_t offset;
};

/* Parses the file's bytes (Kafka's format: "0\n<count>\n" then count
 * lines "<topic> <partition> <offset>").  *out is the caller's to free.
 * Returns 0, CN_ECORRUPT (bad version, count, line) or CN_ENOMEM. */
int cn_clean_ckpt_parse(const char *buf, size_t len,
                        struct cn_clean_ckpt_entry **out, size_t *n_out);
/* Formats entries into out in that format.  Returns 0 or CN_ENOMEM. */
int cn_clean_ckpt_format(const struct cn_clean_ckpt_entry *e, size_t n,
                         struct cn_wr *out);

#endif
