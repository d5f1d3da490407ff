/*
 * pstate.h - one partition's producer state: what idempotence and
 * transactions need to know about each producer id that wrote to it.
 *
 * For each producer id: its current epoch, the metadata of the last five
 * batches it appended (so a retried batch is recognised and answered with
 * its original offset), the coordinator epoch of the last marker, and the
 * first offset of its open transaction.  The table is a pure state machine:
 * the caller decides (cn_pstate_check) and then records
 * (cn_pstate_update) each appended batch, live or while replaying the log
 * at start-up.  Snapshots (one file per offset, beside the segments) let a
 * restart replay only the log after the newest one.
 *
 * Rules, as Kafka 4.x applies them to client produce requests:
 *  - epoch older than the entry's: fenced (INVALID_PRODUCER_EPOCH);
 *  - same epoch and (first seq, last seq) equal to one of the remembered
 *    batches: a duplicate, answered with that batch's first offset;
 *  - same epoch: the first sequence must follow the last one (wrapping
 *    from INT32_MAX to 0), else OUT_OF_ORDER_SEQUENCE_NUMBER;
 *  - newer epoch: must start at sequence 0 (unless the entry has no epoch
 *    yet), else OUT_OF_ORDER_SEQUENCE_NUMBER;
 *  - a producer id the table does not know is accepted at any sequence
 *    (Kafka stopped answering UNKNOWN_PRODUCER_ID with KIP-360: state may
 *    legitimately be gone after expiry or retention).
 *
 * Runs on: loop (no locking).
 */
#ifndef CN_PRODUCER_PSTATE_H
#define CN_PRODUCER_PSTATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/batch.h"

#define CN_PSTATE_BATCHES 5 /* remembered batches per producer */

struct cn_pstate; /* opaque */

/* What cn_pstate_check decided for a batch. */
enum cn_pcheck {
    CN_PCHECK_APPEND = 0,     /* in sequence: append it */
    CN_PCHECK_DUPLICATE,      /* already appended: answer, write nothing */
    CN_PCHECK_FENCED,         /* older epoch: INVALID_PRODUCER_EPOCH */
    CN_PCHECK_OUT_OF_ORDER,   /* OUT_OF_ORDER_SEQUENCE_NUMBER */
};

/* A read-only copy of one entry, for DescribeProducers and tests. */
struct cn_pentry_info {
    int64_t producer_id;
    int16_t epoch;
    int32_t last_sequence;      /* -1 when no data batch is remembered */
    int64_t last_offset;        /* last offset written by it, -1 none */
    int64_t last_timestamp;     /* max timestamp of its last batch; ms */
    int32_t coordinator_epoch;  /* from its last marker, -1 none */
    int64_t txn_first_offset;   /* open transaction's first offset, -1 */
    int batches;                /* remembered batches, 0..5 */
    uint32_t markers;           /* markers taken since the entry was made
                                   in memory (not kept in snapshots): a
                                   change says a transaction ended */
};

struct cn_pstate *cn_pstate_new(void);
void cn_pstate_free(struct cn_pstate *ps);
/* Forgets everything (log truncated below what the table describes). */
void cn_pstate_clear(struct cn_pstate *ps);

/*
 * Decides what to do with a client batch that carries a producer id
 * (hdr->producer_id >= 0; control batches never come here).  Does not
 * change the table.  On CN_PCHECK_DUPLICATE, *dup_offset is the first
 * offset the original batch was given.
 */
enum cn_pcheck cn_pstate_check(const struct cn_pstate *ps,
                               const struct cn_batch_hdr *hdr,
                               int64_t *dup_offset);

/*
 * Records an appended batch; hdr->base_offset is its real first offset.
 * Data batches update epoch and sequence memory (a newer epoch forgets the
 * older epoch's batches); a transactional data batch opens the
 * producer's transaction at its first offset if none is open.  Control
 * batches (markers) close the open transaction: control_type is
 * CN_CONTROL_COMMIT or CN_CONTROL_ABORT and coordinator_epoch comes from
 * the marker's value; pass control_type -1 for data batches.  On a marker,
 * *closed_first_offset (may be NULL) gets the first offset of the
 * transaction it closed, or -1.  Batches without a producer id are
 * ignored.  Returns 0 or CN_ENOMEM.
 */
int cn_pstate_update(struct cn_pstate *ps, const struct cn_batch_hdr *hdr,
                     int control_type, int32_t coordinator_epoch,
                     int64_t *closed_first_offset);

/*
 * Open transactions, kept ordered by first offset as batches and markers
 * are recorded, so the last stable offset needs no scan: it is the first
 * offset of the oldest open transaction (-1 when none is open; the caller
 * caps it at the high watermark).
 */
int64_t cn_pstate_first_open_offset(const struct cn_pstate *ps);
/*
 * The first unstable offset, given the high watermark: the oldest open
 * transaction's first offset, or older, that of a transaction whose
 * marker is at or above the high watermark (not replicated yet: a new
 * leader without it would hold the transaction open again, so it is not
 * stable, as Kafka keeps it).  -1 when there is none.
 */
int64_t cn_pstate_first_unstable_offset(const struct cn_pstate *ps,
                                        int64_t high_watermark);
/* Forgets transactions whose markers are below the high watermark. */
void cn_pstate_stable_at(struct cn_pstate *ps, int64_t high_watermark);
size_t cn_pstate_open_count(const struct cn_pstate *ps);
/* Calls fn for each open transaction, oldest first, with the max
 * timestamp of its first batch as start_ms (ms; after a restart from a
 * snapshot, the producer's last batch's instead); stops at fn's first
 * non-zero return and returns it. */
int cn_pstate_foreach_open(const struct cn_pstate *ps,
                           int (*fn)(void *arg, int64_t producer_id,
                                     int64_t first_offset, int64_t start_ms),
                           void *arg);

/* Number of producer ids in the table. */
size_t cn_pstate_count(const struct cn_pstate *ps);
/* Looks up one producer id; false if absent. */
bool cn_pstate_get(const struct cn_pstate *ps, int64_t producer_id,
                   struct cn_pentry_info *out);
/* Calls fn for every entry (order unspecified); stops if fn returns
 * non-zero and returns that. */
int cn_pstate_foreach(const struct cn_pstate *ps,
                      int (*fn)(void *arg, const struct cn_pentry_info *e),
                      void *arg);
/* Removes entries whose last timestamp is expiration_ms or more before
 * now_ms, except those with an open transaction.  Returns how many. */
size_t cn_pstate_expire(struct cn_pstate *ps, int64_t now_ms,
                        int64_t expiration_ms);
/* Bytes of memory the table uses (entries and its hash index). */
size_t cn_pstate_memory(const struct cn_pstate *ps);

/*
 * Snapshots: <dir>/<offset, 20 digits>.snapshot holds the table as it is
 * after every batch below `offset`.  Written to a temporary file, synced,
 * renamed, and the directory synced, so a crash leaves either no file or a
 * whole one; a CRC32C over the contents catches the rest.  Returns 0 or a
 * negative error.  Runs on: either thread (one fsync; clean shutdown calls
 * it on the loop, a segment roll splits it in two below).
 */
int cn_pstate_snapshot_write(const struct cn_pstate *ps, const char *dir,
                             int64_t offset);
/* The two halves of cn_pstate_snapshot_write, so the table can be taken
 * where it lives and the file written elsewhere.  encode: initialises w
 * and fills it with the file's image (on error w is released).  Runs on:
 * the table's thread (loop). */
int cn_pstate_snapshot_encode(const struct cn_pstate *ps, struct cn_wr *w);
/* store: writes an encoded image as dir's snapshot at offset.  Touches no
 * table, only the directory.  Runs on: any thread (a worker at roll). */
int cn_pstate_snapshot_store(const char *dir, int64_t offset,
                             const uint8_t *buf, size_t len);
/*
 * Start-up: deletes snapshots above max_offset (the log was truncated
 * below them), then loads the newest remaining snapshot that is intact,
 * deleting any newer one that is corrupt (with a warning naming it).
 * *offset_out is the loaded snapshot's offset, or -1 when none loaded (the
 * table is then empty and the whole log must be replayed).  Returns 0 or a
 * negative error for an unreadable directory.
 */
int cn_pstate_snapshot_load(struct cn_pstate *ps, const char *dir,
                            int64_t max_offset, int64_t *offset_out);
/* Deletes snapshots whose offset is below min_offset (the log no longer
 * reaches back there), then the oldest ones until at most keep_newest
 * remain.  Runs on: any thread; two at once in one directory (the loop
 * after retention, a worker after a roll) are safe: a file already gone is
 * skipped. */
int cn_pstate_snapshot_prune(const char *dir, int64_t min_offset,
                             int keep_newest);

#endif
