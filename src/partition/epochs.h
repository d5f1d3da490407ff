/*
 * epochs.h - one partition's leader-epoch cache (Kafka's
 * LeaderEpochFileCache, KIP-101 and KIP-279): for each leader epoch that
 * wrote to the log, the offset its first batch got.
 *
 * Replication needs it to find where a follower's log diverged from its
 * leader's: the follower asks the leader for the end offset of its own
 * latest epoch (OffsetsForLeaderEpoch) and truncates there, instead of
 * trusting a high watermark that may be stale after two quick leader
 * changes.  Entries are kept in epoch order with non-decreasing start
 * offsets; the log keeps it in step through the partition layer (append,
 * truncation, retention).
 *
 * File: <partition dir>/leader-epoch-checkpoint, Kafka's text format
 *
 *     0                      version
 *     <count>
 *     <epoch> <start offset> one line per entry, oldest first
 *
 * replaced atomically (tmp, fdatasync, rename, directory fsync) whenever
 * the cache changes.  A crash leaves the old or the new file.
 *
 * Runs on: loop (each change writes the file there; changes are rare: one
 * per leader change, truncation or retention pass that moves the start).
 */
#ifndef CN_PARTITION_EPOCHS_H
#define CN_PARTITION_EPOCHS_H

#include <stddef.h>
#include <stdint.h>

#include "base/wr.h"

#define CN_EPOCHS_FILE "leader-epoch-checkpoint"

struct cn_epochs; /* opaque */

/* Loads <dir>/leader-epoch-checkpoint; a missing file is an empty cache.
 * A corrupt one returns CN_ECORRUPT after a warning naming the file (the
 * caller rebuilds from the log).  Returns 0, CN_ECORRUPT, CN_ENOMEM or
 * -errno; *out set only on success. */
int cn_epochs_open(const char *dir, struct cn_epochs **out);
/* An empty cache for dir that has written nothing yet (for a rebuild);
 * NULL when out of memory. */
struct cn_epochs *cn_epochs_new_empty(const char *dir);
void cn_epochs_free(struct cn_epochs *e);

/* Records that `epoch` starts at start_offset.  Ignored when epoch is not
 * newer than the latest recorded one (negative arguments are ignored as
 * well).  Entries starting at or after start_offset go first: they are
 * epochs that wrote nothing before this one began (Kafka's assign).
 * Writes the file when the cache changed.  Returns 0 or the write's
 * error; the cache in memory is changed even when the write failed. */
int cn_epochs_assign(struct cn_epochs *e, int32_t epoch, int64_t start_offset);
/* The latest recorded epoch, -1 when empty. */
int32_t cn_epochs_latest(const struct cn_epochs *e);
/* Where `epoch` starts, -1 when it is not recorded. */
int64_t cn_epochs_start_of(const struct cn_epochs *e, int32_t epoch);

/* OffsetsForLeaderEpoch for `epoch`, as Kafka's endOffsetFor answers it:
 *  - epoch is the latest recorded: (epoch, log_end);
 *  - else, with a recorded epoch above it: the largest recorded epoch
 *    <= epoch and the start of the first recorded epoch above it; when no
 *    recorded epoch is <= epoch (retention removed it), epoch itself and
 *    that start, so the follower truncates to where this log's known
 *    history begins;
 *  - epoch above every recorded one, epoch < 0, or an empty cache:
 *    (-1, -1), Kafka's UNDEFINED_EPOCH / UNDEFINED_EPOCH_OFFSET. */
void cn_epochs_end_offset_for(const struct cn_epochs *e, int32_t epoch,
                              int64_t log_end, int32_t *out_epoch,
                              int64_t *out_end);

/* The log was truncated to end_offset: entries starting at or after it
 * go.  Writes the file when changed; returns 0 or the write's error. */
int cn_epochs_truncate_from_end(struct cn_epochs *e, int64_t end_offset);
/* The log start moved to start_offset: entries wholly below it go, and
 * the one spanning it now starts there.  Writes the file when changed;
 * returns 0 or the write's error. */
int cn_epochs_truncate_from_start(struct cn_epochs *e, int64_t start_offset);
/* Empties the cache and writes the empty file (the log restarted). */
int cn_epochs_clear(struct cn_epochs *e);

/* Entries held (tests, metrics), and the i-th oldest. */
size_t cn_epochs_count(const struct cn_epochs *e);
void cn_epochs_entry(const struct cn_epochs *e, size_t i, int32_t *epoch,
                     int64_t *start_offset);

/* The file's text: parse replaces what e holds with the entries of a
 * checkpoint file's bytes (0, CN_ECORRUPT or CN_ENOMEM); format appends
 * e's file image to w (0 or CN_ENOMEM).  Exposed for the fuzz target. */
int cn_epochs_parse(struct cn_epochs *e, const uint8_t *buf, size_t len);
int cn_epochs_format(const struct cn_epochs *e, struct cn_wr *w);

#endif
