/*
 * partition.h - the partition layer: one partition's log and the state
 * derived from it (producer state, last stable offset, aborted-transaction
 * index, producer snapshots), kept in step by one write path.
 *
 * Every write to a partition goes through cn_part_append, whoever makes
 * it: a client's Produce, a coordinator's marker or internal-topic record,
 * an operator's WriteTxnMarkers, a follower copying its leader.  (The few
 * writes that are no append, a follower's truncation, are here too.)
 * What depends on the origin is only the validation before the write;
 * the write itself (append, roll snapshot, producer-state update,
 * .txnindex entry for an abort, hand-off to group commit) is the same for
 * all, so no caller can forget a step.
 *
 * This layer sits below the broker: it includes no broker header, and
 * reaches the broker's group commit and disk-failure policy only through
 * struct cn_part_env.  The topic a partition belongs to is opaque here.
 *
 * Runs on: loop (a roll snapshot's write runs on a worker, env->queue).
 */
#ifndef CN_PARTITION_H
#define CN_PARTITION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/bytes.h"
#include "log/log.h"
#include "producer/pstate.h"
#include "proto/batch.h"

struct cn_topic;
struct cn_part_snap;
struct cn_epochs;
struct cn_isr;
struct cn_replica_fetcher;

struct cn_partition {
    struct cn_topic *topic;    /* owner (the broker's) */
    int32_t index;             /* partition number */
    struct cn_log *log;        /* its on-disk log */
    int64_t high_watermark;    /* offsets below are visible to consumers */
    struct cn_pstate *pstate;  /* producer ids that wrote here */
    int64_t active_base;       /* active segment's base: a change = roll */
    int64_t clean_retry_ms;    /* monotonic: a failed cleaner pass is not
                               * retried before (cleaner.c) */
    int64_t clean_last_end_ms; /* monotonic end of its last pass, 0 none */
    int clean_last_error;      /* of its last pass, 0 when it swapped */
    bool in_sync_list;         /* queued for the next sync round */
    struct cn_partition *sync_next;
    /* Roll snapshots (producers.c): the one a worker writes now, and the
     * newest taken since, written when that one ends. */
    struct cn_part_snap *snap_running;
    struct cn_part_snap *snap_pending;
    /* Who leads it and since which epoch: the broker itself at epoch 0 on
     * a single node; in cluster mode what the metadata image says
     * (publish.c), -1 when the image names no leader. */
    int32_t leader;
    int32_t leader_epoch;
    /* Where each leader epoch begins in the log (epochs.h): stamped and
     * recorded by the write path, cut by truncation and retention.  NULL
     * only for an offline partition. */
    struct cn_epochs *epochs;
    /* This broker leads it with followers (node/replica.c): their fetch
     * state, the ISR and the high watermark over it.  NULL otherwise. */
    struct cn_isr *isr;
    /* This broker follows it: the fetcher of its leader (node/replica.c).
     * NULL otherwise. */
    struct cn_replica_fetcher *fetcher;
};

/* The last stable offset: the first offset of the oldest open transaction
 * (or of one whose marker is not below the high watermark yet), capped at
 * the high watermark.  read_committed readers stop there. */
static inline int64_t cn_partition_lso(const struct cn_partition *p)
{
    int64_t open = cn_pstate_first_unstable_offset(p->pstate,
                                                   p->high_watermark);
    return open >= 0 && open < p->high_watermark ? open : p->high_watermark;
}

/* ---- the one write path -------------------------------------------------- */

/* Who writes, which decides what is checked before the write. */
enum cn_part_origin {
    /* A client's Produce: each batch passes the producer state (duplicate,
     * fenced epoch, sequence gap, a plain batch inside an open
     * transaction) and, for a transactional batch that opens no
     * transaction here, the coordinator's verification (KIP-890). */
    CN_PART_CLIENT,
    /* A coordinator's own write: a transaction marker, or a record of
     * __transaction_state / __consumer_offsets.  Trusted as is. */
    CN_PART_COORDINATOR,
    /* A marker from outside the broker (WriteTxnMarkers): refused with
     * INVALID_PRODUCER_EPOCH when older than the partition's epoch for
     * that producer, as Kafka refuses a zombie coordinator's. */
    CN_PART_OPERATOR,
    /* A follower appending its leader's batches unchanged (replication):
     * no producer-state check, no verify or prepare, nothing stamped.
     * Each batch keeps its base offset, which must not be below the log
     * end offset (gaps are allowed: a compacted leader's log has them);
     * a batch below it refuses the whole write, before anything is
     * written, with KAFKA_OFFSET_OUT_OF_RANGE (the follower's fetch
     * position and its log disagree: it must truncate or refetch).  The
     * producer state and the .txnindex are kept as for any origin, so
     * the follower recognises a client's retry once it leads; a batch's
     * partition leader epoch newer than the cache's latest is recorded
     * at the batch's base offset. */
    CN_PART_REPLICA,
};

/* Disk work the partition hands to the layer above to run off the loop:
 * run on a worker thread, then done back on the loop.  The layer above
 * keeps what it needs to wait for it (a partition's directory is not
 * deleted, nor the process stopped, while work of it runs). */
struct cn_part_work {
    void (*run)(struct cn_part_work *w);
    void (*done)(struct cn_part_work *w);
};

/* What the layer above provides; ctx is passed back to each. */
struct cn_part_env {
    void *ctx;
    /* Group commit: p has appended data not yet synced. */
    void (*appended)(void *ctx, struct cn_partition *p);
    /* After each append that reached the log: whether it found no space
     * (the log undid it and stays online). */
    void (*disk_full)(void *ctx, const struct cn_partition *p, bool full);
    /* A write failed in a way that takes the log directory offline;
     * what names the write for the log. */
    void (*dir_failed)(void *ctx, const char *what, int err);
    /* Runs w on a worker and later w->done on the loop; returns 0, or an
     * error when it cannot (w is then run here, on the loop).  NULL: all
     * such work runs here. */
    int (*queue)(void *ctx, struct cn_part_work *w);
};

/*
 * An append request.  The caller fills the inputs; cn_part_append fills
 * the results.  batches holds one or more whole, validated batches (magic
 * 2) and is written into: the base offset and the timestamps are patched
 * in place.
 */
struct cn_part_append {
    enum cn_part_origin origin;
    uint8_t *batches;
    size_t len;
    const char *what;     /* names the write if it fails ("a log write") */
    bool caller_syncs;    /* no group-commit hand-off: the caller syncs */
    bool allow_duplicate; /* CN_PART_CLIENT: append a retry again (only
                            * the history checker's planted bug does) */
    int64_t append_time;  /* LogAppendTime to stamp, or -1 */
    /* CN_PART_CLIENT: KIP-890 verification of a transactional batch that
     * opens no transaction here; returns a Kafka error code.  NULL: no
     * verification. */
    int16_t (*verify)(void *arg, int64_t producer_id, int16_t epoch);
    /* CN_PART_CLIENT: called once the producer state has accepted every
     * batch and before anything is written, for the checks that depend
     * on the topic (timestamps, keys) and for re-encoding: it may point
     * batches/len at other bytes that live until cn_part_append returns.
     * Returns a Kafka error code; non-zero refuses the write. */
    int16_t (*prepare)(void *arg, struct cn_part_append *a);
    void *arg; /* for verify and prepare */

    /* Results. */
    int16_t kerr;        /* a refusal by validation, else KAFKA_NONE */
    int err;             /* a log error (0, -ENOSPC, CN_EOFFLINE...) */
    bool duplicate;      /* a retry of a batch appended before: nothing
                            * written, base_offset is the original's */
    int64_t base_offset; /* first offset written, or -1 */
};

/*
 * Appends a->batches to p, in this order: the origin's checks (any
 * refusal leaves p untouched, a->kerr set), then for each batch the log
 * append, the producer snapshot if the append rolled a segment (taken
 * before the batch is recorded, so it describes the log below the new
 * segment), the producer-state update (which moves the LSO and, for an
 * abort marker, adds the .txnindex entry), and at the end the hand-off
 * to group commit unless a->caller_syncs.  A duplicate is handed off too:
 * the original may not be synced yet.  Returns 0, -1 for a refusal
 * (a->kerr), or the log error (a->err, for which the env was told).
 * After a log error a->base_offset >= 0 says earlier batches were
 * written (and handed off).
 */
int cn_part_append(struct cn_partition *p, const struct cn_part_env *env,
                   struct cn_part_append *a);

/* ---- replication (replication.c) ----------------------------------------- */

/* Opens p's leader-epoch cache at open, once its log and producer state
 * are loaded: the checkpoint file, or, when it is missing or corrupt
 * while the log holds data, a rebuild from the batch headers (each
 * increase of the partition leader epoch starts an epoch), written back.
 * The cache is then cut to the log's bounds.  Returns 0, CN_ENOMEM or a
 * read error of the rebuild. */
int cn_partition_epochs_load(struct cn_partition *p);
/* Frees p's cache (the file stays); call where the log is closed. */
void cn_partition_epochs_close(struct cn_partition *p);

/* This broker now leads p at `epoch` (cluster publish): sets
 * p->leader_epoch and records that the epoch starts at the log end, as
 * Kafka does when leadership starts, before any append (so a leader that
 * writes nothing still answers OffsetsForLeaderEpoch for its epoch).  A
 * repeated call for the same epoch changes nothing.  Returns 0, or the
 * checkpoint write's error (the cache is changed in memory anyway: the
 * file is rebuilt at the next open). */
int cn_part_become_leader(struct cn_partition *p, int32_t epoch);

/* Cuts p's log so that its end offset becomes `offset` (a batch holding
 * offset goes whole: the end is then that batch's base; see
 * cn_log_truncate_to), offset < LEO and >= the log start.  Everything
 * derived follows: indexes and segments above, the epoch cache
 * (truncate_from_end), producer snapshots above the new end deleted, the
 * producer state rebuilt from the newest remaining snapshot and a replay
 * (so open transactions, the LSO and sequences are as they were there),
 * .txnindex entries of aborts at or past it removed, the high watermark
 * and the synced offset capped at it (syncs in flight included).  Returns
 * 0, CN_EBUSY when it cannot run now (a cleaner pass, or a roll snapshot
 * write of p, is running: retry later; nothing changed), CN_ERANGE for an
 * offset outside [log start, LEO], or a log error (env->dir_failed was
 * told). */
int cn_part_truncate(struct cn_partition *p, const struct cn_part_env *env,
                     int64_t offset);
/* The follower is behind its leader's log start: empties the log and
 * restarts it at new_start (Kafka's truncateFullyAndStartAt); producer
 * state, producer snapshots and epochs emptied, high watermark new_start.
 * Same returns (no CN_ERANGE). */
int cn_part_truncate_fully(struct cn_partition *p,
                           const struct cn_part_env *env, int64_t new_start);

/* ---- producer state beside the log (producers.c) ------------------------- */

/* Loads p's producer state at open: the newest snapshot, then the log
 * after it.  name is for the log line. */
int cn_partition_producers_load(struct cn_partition *p, const char *name);
/* Calls fn for every batch of p's log from `from` (the batch holding it)
 * to the end, reading in large chunks; stops at fn's first non-zero
 * return and returns it, or a read or parse error. */
int cn_partition_scan(struct cn_partition *p, int64_t from,
                      int (*fn)(void *arg, const uint8_t *batch, size_t len,
                                const struct cn_batch_hdr *hdr),
                      void *arg);
/* Records an appended batch (data or marker) in the producer table. */
int cn_partition_record_batch(struct cn_partition *p, const uint8_t *batch,
                              size_t len, const struct cn_batch_hdr *hdr);
/* Call after each append and before recording the batch: when the append
 * rolled a new segment, takes the table as it is now and has env->queue
 * write it (and prune older snapshots) on a worker.  One write per
 * partition at a time, in roll order: a roll during a write leaves its
 * snapshot pending, replacing any older pending one (the newest covers
 * more of the log). */
void cn_partition_check_roll(struct cn_partition *p,
                             const struct cn_part_env *env);
/* Lets go of p's roll snapshots: the pending one is dropped and the one
 * being written finishes without touching p again.  Call before p is
 * freed or its topic deleted; the caller still waits for that write
 * before it deletes p's directory. */
void cn_partition_snap_release(struct cn_partition *p);
/* Writes the clean-shutdown snapshot (on this thread) and frees the
 * table.  Skips the snapshot when a roll's write is still running (the
 * layer above waits for those first): two writes of one directory at
 * once could tear each other's file. */
void cn_partition_producers_close(struct cn_partition *p);
/* Call after the log start moved (retention, DeleteRecords): cuts the
 * leader-epoch cache to the new start, and prunes the producer snapshots
 * retention left below the log; not while a roll snapshot is being
 * written (that write prunes after it lands). */
void cn_partition_after_retention(struct cn_partition *p);
/* After the log was truncated (no roll snapshot being written): drops a
 * pending roll snapshot above the new end and rebuilds the table from the
 * newest snapshot at or below it (deleting those above) and a replay.
 * Returns 0 or an error (the table then holds what was replayed). */
int cn_partition_producers_rewind(struct cn_partition *p);
/* After the log was emptied: the table, pending and written snapshots
 * all go.  Returns 0 or the first unlink error. */
int cn_partition_producers_reset(struct cn_partition *p);
/* Reads a control batch's marker: type (CN_CONTROL_*) and coordinator
 * epoch.  Returns 0 or CN_ECORRUPT. */
int cn_batch_marker(const uint8_t *batch, size_t len, int *type,
                    int32_t *coordinator_epoch);

#endif
