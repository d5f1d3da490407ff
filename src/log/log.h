/*
 * log.h - the partition log: the whole interface other modules call.
 *
 * One directory per partition, <log.dirs>/<topic>-<partition>/, holding:
 *
 *   <20-digit base>.log        record batches exactly as appended, base
 *                              offset patched in; a batch takes
 *                              12 + batchLength bytes
 *   <base>.index               sparse offset index, 8-byte entries
 *                                0  uint32 offset - base (batch base offset)
 *                                4  uint32 byte position in .log
 *                              one at least every index.interval.bytes
 *   <base>.timeindex           12-byte entries, added when the segment's
 *                              max timestamp grows (sparse, same interval)
 *                                0  int64  max timestamp so far (ms)
 *                                8  uint32 offset - base of that batch
 *   <base>.txnindex            aborted transactions whose abort marker is
 *                              in this segment, 34-byte entries in marker
 *                              order (Kafka's format); created at the
 *                              segment's first abort
 *                                0  int16  version, 0
 *                                2  int64  producer id
 *                               10  int64  first offset of the transaction
 *                               18  int64  offset of its abort marker
 *                               26  int64  last stable offset at the abort
 *   partition.checkpoint       text, replaced atomically:
 *                                cn-partition-checkpoint 1
 *                                log_start_offset N
 *                                recovery_point N
 *                                clean_shutdown 0|1
 *                                crc XXXXXXXX   (CRC-32C of the lines above)
 *
 *   <base>.*.cleaned, cleaner.swap   a cleaning pass in progress (see
 *                              log_clean.h; recovery finishes or removes)
 *
 * Batch offsets increase through a segment and across segments but may
 * have gaps: the cleaner removes batches and never renumbers, and a
 * cleaned segment's first batch may lie above its name.
 *
 * All integers in index files are big-endian.  Index files are appended to,
 * not preallocated, so after a crash they may be short or hold garbage;
 * recovery checks them against the log and rebuilds them.
 *
 * The recovery point is an offset below which every segment (data and
 * indexes) is known synced.  After a crash only segments from the one
 * holding the recovery point onward are scanned (CRC-checked, torn tail
 * truncated); after a clean close nothing is scanned.
 *
 * Threading: one loop thread owns a struct cn_log and makes every call,
 * except cn_log_sync_run(), which runs on a worker while the loop keeps
 * appending (begin/run/end, no locks).
 */
#ifndef CN_LOG_LOG_H
#define CN_LOG_LOG_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/wr.h"

struct cn_log; /* opaque; see log_int.h */

struct cn_log_config {
    int64_t segment_bytes;        /* segment.bytes; capped at INT32_MAX */
    int64_t segment_ms;           /* segment.ms: roll an older segment */
    int64_t retention_ms;         /* retention.ms, -1 unlimited */
    int64_t retention_bytes;      /* retention.bytes, -1 unlimited */
    int32_t index_interval_bytes; /* index.interval.bytes */
    int64_t flush_messages;       /* flush.messages; INT64_MAX never */
    int64_t flush_ms;             /* flush.ms; INT64_MAX never */
    /* Clock for segment.ms ages and flush.ms; NULL means cn_clock_wall_ms.
     * Tests inject a fake clock here. */
    int64_t (*now_ms)(void);
};

struct cn_log_stats {
    int32_t segments;              /* segment files */
    int64_t bytes;                 /* sum of .log sizes */
    int64_t recovery_scanned_bytes; /* bytes CRC-scanned by recovery at open */
    int64_t recovery_truncated_bytes; /* bytes cut off by recovery */
};

/* Fills cfg with Kafka's defaults: 1 GiB segments, 7-day segment.ms and
 * retention.ms, unlimited retention.bytes, 4096-byte index interval, no
 * forced flush. */
void cn_log_config_default(struct cn_log_config *cfg);

/* Opens (creating if missing, and fsyncing the parent) the partition log in
 * dir and recovers it: stray temp files removed, segments after the
 * recovery point CRC-scanned and cut at the first bad batch, indexes checked
 * and rebuilt, a fresh checkpoint written.  cfg is copied.  On success
 * *out is a log the caller frees with cn_log_close() or cn_log_delete().
 * Runs on: loop (blocking I/O; call before serving the partition). */
int cn_log_open(const char *dir, const struct cn_log_config *cfg,
                struct cn_log **out);

/* A log that is offline from the start, holding no files: for a partition
 * whose directory cn_log_open() could not open (an unreadable segment),
 * so the broker can keep listing it and answer KAFKA_STORAGE_ERROR for it
 * while every other partition is served.  Every call but close, delete and
 * the getters returns CN_EOFFLINE; the offsets read 0.  cn_log_close()
 * frees it and leaves the directory alone.  NULL only when out of memory.
 * Runs on: loop. */
struct cn_log *cn_log_new_offline(const char *dir,
                                  const struct cn_log_config *cfg);

/* Clean shutdown: syncs data and indexes, writes the checkpoint with the
 * recovery point at the end offset and the clean flag (so the next open
 * scans nothing), closes files and frees log.  No sync may be in flight.
 * If the log is offline only the files are closed.  Runs on: loop. */
void cn_log_close(struct cn_log *log);

/* Replaces the configuration (topic config change); takes effect at the next
 * append / retention pass.  A smaller index.interval.bytes makes the next
 * open rebuild older indexes (they look sparser than it allows).
 * Runs on: loop. */
void cn_log_set_config(struct cn_log *log, const struct cn_log_config *cfg);

/* Topic deletion: closes and removes every file and the directory, then
 * frees log (even on error).  No sync may be in flight.  Returns 0 or
 * -errno of the first failure.  Runs on: loop. */
int cn_log_delete(struct cn_log *log);

/* Log start offset (lowest readable offset), log end offset (next offset
 * to assign) and synced offset (everything below it is durable). */
int64_t cn_log_start_offset(const struct cn_log *log);
int64_t cn_log_end_offset(const struct cn_log *log);
int64_t cn_log_synced_offset(const struct cn_log *log);
/* Base offset of the active (newest) segment and of the oldest one: a
 * change of the first tells the caller a segment rolled, the second
 * bounds what snapshots of derived state are still useful. */
int64_t cn_log_active_base(const struct cn_log *log);
int64_t cn_log_oldest_base(const struct cn_log *log);
/* The partition directory (owned by the log). */
const char *cn_log_dir(const struct cn_log *log);

/* Appends one validated magic-2 batch of len bytes (CRC is not rechecked).
 * Assigns its base offset = end offset, patches it into batch (the caller's
 * buffer, so it must be writable; the CRC does not cover that field), rolls
 * the segment first if the batch would take it past segment.bytes or it is
 * older than segment.ms, writes it, and updates the indexes.  On success
 * *base_offset_out (may be NULL) is the assigned offset.  Returns CN_EINVAL
 * for a malformed header; on a write error the log goes offline and this
 * and every later call return CN_EOFFLINE.  The data is not durable until a
 * sync covering it ends.
 *
 * A full disk (ENOSPC or EDQUOT on a write, a roll's new files included)
 * is not a failure of the log: what part of the batch and its index
 * entries made it is truncated away, -ENOSPC is returned, and the log stays
 * online for reads and takes appends again once there is space.
 * Runs on: loop. */
int cn_log_append(struct cn_log *log, uint8_t *batch, size_t len,
                  int64_t *base_offset_out);

/* A follower's append (replication): as cn_log_append, but the batch
 * keeps the base offset it has, its leader's.  That offset must be >= the
 * end offset; a gap between them is allowed (a compacted leader's log has
 * them) and the end offset becomes the batch's last offset + 1.  Returns
 * CN_ERANGE, writing nothing, for a base below the end offset or one so
 * far above the segment that its index could not address it; otherwise
 * as cn_log_append.  Runs on: loop. */
int cn_log_append_at(struct cn_log *log, const uint8_t *batch, size_t len);

/* The caller must retry later: a cleaner pass is working on this log. */
#define CN_EBUSY (-EBUSY)

/* A follower whose log diverged from its leader's (KIP-101): removes every
 * batch holding an offset >= offset, so the end offset becomes offset, or
 * the end of the last batch kept when offset falls inside a batch or a
 * gap (a log never ends inside a batch; Kafka's does not either once
 * reopened).  Segments above go whole; the one holding the cut is cut
 * with its indexes and .txnindex and becomes the active segment; the
 * files are fdatasynced and the checkpoint's recovery point lowered to
 * that segment's base before this returns, so a crash cannot bring the
 * cut batches back.  The synced offset is capped at the new end, and so
 * is what every sync in flight will claim when it ends: cn_log_sync_end
 * never raises the synced offset above what the truncation left (the
 * bytes it synced below the cut are the same bytes).  If the cut leaves
 * nothing at or above the log start (offset inside the batch holding the
 * start), the log is reset at the start as cn_log_reset_at.  Returns 0
 * (also when offset is the end offset already), CN_ERANGE when offset is
 * below the log start or above the end, CN_EBUSY during a cleaner pass,
 * CN_EOFFLINE, or the error that took the log offline.  Runs on: loop
 * (blocking: unlinks, ftruncates, fdatasyncs). */
int cn_log_truncate_to(struct cn_log *log, int64_t offset);

/* A follower behind its leader's log start (Kafka's
 * truncateFullyAndStartAt): deletes every segment and starts an empty log
 * at new_start (start = end = synced offset = new_start), whatever the
 * old offsets were; the cleaner's checkpoint for it is forgotten.  Syncs
 * in flight claim nothing above new_start.  Segments are unlinked newest
 * first, then the new one is created and the checkpoint written, so a
 * crash leaves an older prefix of the old log at worst (which the
 * follower truncates again).  Returns 0, CN_EINVAL for a negative
 * new_start, CN_EBUSY during a cleaner pass, CN_EOFFLINE or the error
 * that took the log offline.  Runs on: loop. */
int cn_log_reset_at(struct cn_log *log, int64_t new_start);

/* Reads whole batches starting with the one containing offset, stopping
 * before any batch whose base offset is >= max_offset (e.g. the high
 * watermark) and before exceeding max_bytes, except that with min_one the
 * first batch is returned whole even if larger (KIP-74).  Batches may come
 * from several segments.  Appends the bytes to out; *bytes_read (may be
 * NULL) gets how many.  Returns 0 (possibly with 0 bytes, e.g. at the end
 * offset), CN_ERANGE if offset < start or > end offset, CN_ENOMEM,
 * CN_EOFFLINE, or -errno when a segment file the descriptor cache had
 * closed cannot be reopened (the log stays online).  Runs on: loop (pread,
 * normally from the page cache). */
int cn_log_read(struct cn_log *log, int64_t offset, int64_t max_offset,
                size_t max_bytes, bool min_one, struct cn_wr *out,
                size_t *bytes_read);

/* ListOffsets by timestamp: *offset_out = base offset of the first batch at
 * or after the log start whose max timestamp is >= ts_ms, and
 * *timestamp_out (may be NULL) its max timestamp; both -1 if there is none.
 * Uses each segment's max timestamp and time index, then scans a little.
 * Batch granularity: the offset is the batch's base offset, not the exact
 * record's.  Returns 0, or CN_EOFFLINE / -errno.  Runs on: loop. */
int cn_log_offset_for_time(struct cn_log *log, int64_t ts_ms,
                           int64_t *offset_out, int64_t *timestamp_out);

/* ListOffsets MAX_TIMESTAMP (-3): the largest batch max timestamp in the
 * log and the last offset of the batch that had it (first such batch);
 * -1, -1 for an empty log.  Tracked in memory, rebuilt at open. */
void cn_log_max_timestamp(const struct cn_log *log, int64_t *ts_out,
                          int64_t *offset_out);

/* Durability in three steps so fdatasync runs off the loop.
 *
 * cn_log_sync_begin() snapshots the files needing a sync (the active segment's
 * .log if it has unsynced data; for rolled segments not yet synced, .log,
 * .index, .timeindex and .txnindex if any) and the end offset they cover,
 * holding references so retention cannot free those segments meanwhile.
 * A file open in the descriptor cache is pinned there (its fd stays open
 * for the worker); one that is not, or beyond the cache's pin limit, is
 * named instead and the worker opens it.  Returns NULL if there is nothing
 * to sync, the log is offline, or memory is short.  Runs on: loop.
 *
 * cn_log_sync_run() fdatasyncs them; returns 0 or -errno of the first
 * failure.  Touches only the snapshot.  The fail point "log.fsync"
 * (error) fails it.  Runs on: worker.
 *
 * cn_log_sync_end() takes run's result and returns what it amounts to: 0
 * also when the only failure was a file whose segment was deleted during
 * the sync, else the error.  On success raises the synced offset
 * and, when a rolled segment became durable, rewrites the checkpoint's
 * recovery point; on failure takes the log offline (no retry: after a failed
 * fsync the page cache state is unknown).  Unpins, drops the references
 * and frees s.  Several syncs may be in flight; each must be ended.
 * Runs on: loop. */
struct cn_log_sync;
struct cn_log_sync *cn_log_sync_begin(struct cn_log *log);
int cn_log_sync_run(struct cn_log_sync *s);
int cn_log_sync_end(struct cn_log *log, struct cn_log_sync *s, int err);
/* The offset a sync begun now would cover up to (for acks waiters). */
int64_t cn_log_sync_target(const struct cn_log *log);

/* True when flush.messages unsynced records have piled up, or flush.ms has
 * passed since the last sync with data unsynced.  Runs on: loop. */
bool cn_log_needs_flush(const struct cn_log *log, int64_t now_ms);

/* Deletes whole segments from the oldest while they are past retention.ms
 * (by their largest timestamp) or while the log exceeds retention.bytes
 * without them; never the active segment.  Advances the log start offset
 * and persists it.  Returns the number of segments deleted, or CN_EOFFLINE /
 * -errno.  Runs on: loop. */
int cn_log_enforce_retention(struct cn_log *log, int64_t now_ms);

/* DeleteRecords: raises the log start offset to offset (a lower offset is a
 * no-op), persists it in the checkpoint before returning, and deletes the
 * segments wholly below it (rolling first if that is every segment).
 * Returns 0, CN_ERANGE if offset > end offset, -ENOSPC (nothing changed:
 * no space for the checkpoint), CN_EOFFLINE or -errno.
 * Runs on: loop. */
int cn_log_delete_records(struct cn_log *log, int64_t offset);

/* One aborted transaction, as a .txnindex entry and as Fetch's
 * AbortedTransactions need it (32 bytes in memory). */
struct cn_aborted_txn {
    int64_t producer_id;
    int64_t first_offset; /* first offset of the aborted transaction */
    int64_t last_offset;  /* offset of its abort marker */
    int64_t lso;          /* last stable offset when it was aborted */
};

/* Records an aborted transaction in the .txnindex of the segment holding
 * t->last_offset (normally the active one).  Idempotent: if that segment
 * already has an entry with last_offset >= t->last_offset, nothing is
 * written and 0 is returned (the producer-state replay at start-up calls
 * this again for markers already indexed).  Returns 0, CN_ERANGE if no
 * segment holds last_offset, CN_EINVAL if first_offset is negative or past
 * last_offset, CN_ENOMEM, or CN_EOFFLINE (a write error takes the log
 * offline, like cn_log_append).
 *
 * Durability: an entry in the active segment is synced with the segment's
 * indexes once it rolls (until then recovery rescans that segment and the
 * replay re-adds what a crash lost); an entry added to an older segment is
 * fdatasynced before this returns.  Runs on: loop. */
int cn_log_txnindex_add(struct cn_log *log, const struct cn_aborted_txn *t);

/* Calls fn, in index order, for every aborted transaction that overlaps
 * [from, to): last_offset >= from and first_offset < to.  Looks only at
 * segments from the one holding `from` onward (an abort marker always
 * follows its transaction's data, so earlier segments cannot hold a
 * match).  Later segments are looked at too, even past to: a transaction
 * with data below to may have its marker in a segment whose base is >= to;
 * each segment keeps its smallest first_offset, so one that cannot match
 * costs a comparison.  No data is read: the entries are kept in memory per
 * segment.  Stops at fn's first non-zero return and returns it; else 0.
 * t is valid only during the call.  Runs on: loop. */
int cn_log_aborted_txns(const struct cn_log *log, int64_t from, int64_t to,
                        int (*fn)(void *arg, const struct cn_aborted_txn *t),
                        void *arg);

/* What cn_log_verify() found in one partition directory. */
struct cn_log_verify {
    int32_t segments;     /* .log files checked */
    int64_t batches;      /* batches that passed */
    int64_t bytes;        /* bytes of those batches */
    int32_t bad_segments; /* segments with a bad batch */
    int32_t gaps;         /* offset gaps or overlaps between segments */
};

/* Checks every batch of every segment in the partition directory dir,
 * reading only (no recovery, nothing written, no cn_log needed): header,
 * offsets increasing from the file's base, length within the file, CRC-32C,
 * then each record decoded (cn_batch_validate, markers allowed).  Calls
 * report(arg, line) with one line per problem: the first bad batch of each
 * segment (file, byte position, offset, why) and each gap or overlap
 * between segments (a gap below the partition's cleaner checkpoint is
 * what cleaning left, not counted).  Returns 0 (see out->bad_segments), or -errno /
 * CN_ENOMEM if dir or a segment cannot be read (also reported).  Runs on:
 * any thread; fine beside a running broker, whose newest batch may then
 * look torn. */
int cn_log_verify(const char *dir,
                  void (*report)(void *arg, const char *line), void *arg,
                  struct cn_log_verify *out);

/* True after a write or sync error; the broker reports KAFKA_STORAGE_ERROR
 * and stops serving the partition. */
bool cn_log_is_offline(const struct cn_log *log);

/* Segment count, bytes, and what recovery scanned/truncated at open. */
void cn_log_stats(const struct cn_log *log, struct cn_log_stats *out);

/*
 * File descriptors.  Every log of the process shares one descriptor
 * cache: a segment's files are opened when used and the least recently
 * used are closed once `budget` are open, so the partition count is not
 * capped by RLIMIT_NOFILE.  A file a sync is fdatasyncing stays open
 * (pinned); beyond half the budget pinned, a sync opens the file by path
 * on its worker instead.  An open that fails with EMFILE or ENFILE closes
 * some cached files and is tried again.  Runs on: loop.
 */
struct cn_log_fd_stats {
    size_t open;        /* segment files open now */
    size_t pinned;      /* of which held by syncs or cleaner swaps */
    size_t budget;      /* most kept open */
    uint64_t opens;     /* segment file opens since start, reopens too */
    uint64_t evictions; /* closed to stay within the budget */
    uint64_t emfile;    /* opens that met EMFILE/ENFILE */
};

/* The budget for an RLIMIT_NOFILE soft limit of nofile: the limit less a
 * reserve (a quarter, at least 32 and at most 4096) for sockets and the
 * files opened briefly (checkpoints, snapshots, directories); at least 16. */
size_t cn_log_fd_budget_for_limit(uint64_t nofile);
/* Sets the budget (0: derive it from the current soft limit, the default
 * at first use).  A lower budget closes files at the next open. */
void cn_log_set_fd_budget(size_t budget);
void cn_log_fd_stats(struct cn_log_fd_stats *out);

#endif
