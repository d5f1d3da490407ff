/*
 * istore.h - the store of a coordinator's internal topic
 * (__consumer_offsets, __transaction_state): one module for writing,
 * syncing, replaying at start and compacting by checkpoint, whoever owns
 * the records.
 *
 * The owner decides what a record means and which records are live; the
 * store does the log mechanics.  A write is one batch of records on one
 * partition, made durable whatever the flush policy for data says
 * (coordinators act only on durable state), then reported through the
 * caller's cn_istore_wait.  Compaction appends the owner's checkpoint (the
 * newest record of every live key) on the loop, syncs it in a sync round
 * on a worker and, once it is durable, moves the log start to it; the
 * store allows it only while nothing of the partition is between append
 * and durable, every record is synced and no transaction is open on the
 * partition, since the checkpoint must come after every record it
 * replaces.  Writes may go on while the checkpoint is in flight (they come
 * after it, so they stay), but no second compaction of the partition
 * starts until the first one ended; a failed sync deletes nothing.
 *
 * Runs on: loop.
 */
#ifndef CN_NODE_ISTORE_H
#define CN_NODE_ISTORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/bytes.h"
#include "node/broker_int.h"
#include "proto/batch.h"

struct cn_istore; /* opaque */

struct cn_istore_ops {
    /* Replay, in log order, of one data record of part whose key is not
     * null (value null: a tombstone); producer_id is the batch's when txn.
     * Returns 0, CN_ENOMEM (the replay stops with it) or another error
     * (the record is counted as unreadable and skipped). */
    int (*record)(void *ctx, int32_t part, struct cn_bytes key,
                  struct cn_bytes value, int64_t producer_id, bool txn);
    /* Replay of a transaction marker (a control batch) of part, in log
     * order with the records.  May be NULL. */
    void (*marker)(void *ctx, int32_t part, int64_t producer_id, bool commit);
    /* The owner's policy: is part, holding offsets start..end, worth a
     * checkpoint now?  May keep its own state (a next check).  NULL: the
     * store never compacts. */
    bool (*want_compact)(void *ctx, int32_t part, int64_t start, int64_t end);
    /* Adds every live record of part to bb (stamped now_ms) and counts
     * them in *live.  0, CN_EEXIST (not now: the owner holds state the
     * checkpoint could not carry) or another error; nothing is written
     * unless 0.  An owner that applies a durable write later than its
     * done() returns (queues it) must answer CN_EEXIST until it has. */
    int (*checkpoint)(void *ctx, int32_t part, struct cn_batch_builder *bb,
                      int64_t now_ms, size_t *live);
};

/* One write in flight; embed it in the caller's struct (first member, so
 * done can cast back) and keep it alive until done runs. */
struct cn_istore_wait {
    struct cn_sync_waiter waiter;         /* private to istore */
    struct cn_istore *store;              /* private; NULL once it is freed */
    int32_t part;                         /* private */
    int64_t end;                          /* private: log end after it */
    struct cn_istore_wait *next, **pprev; /* private: the store's pending */
    /* The batch is durable (err 0), or the sync failed and took the log
     * directory offline (CN_EOFFLINE); in cluster mode durable means held
     * by the ISR (its high watermark passed it), else CN_ENOTLEADER (this
     * broker stopped leading the partition: the record may be truncated)
     * or CN_EREPLICAS (fewer in-sync replicas than min.insync.replicas,
     * or they did not take it in time).  May free w and write again.
     * Runs even when the store was freed first. */
    void (*done)(struct cn_istore_wait *w, int err);
};

/* What one replay read. */
struct cn_istore_counts {
    size_t records; /* given to ops->record and taken */
    size_t bad;     /* undecodable batches and records the owner refused */
};

/*
 * The store of topic, with nparts partitions when it is created (create:
 * now; otherwise at the first write).  An existing topic keeps the count
 * it was made with.  ops and ctx are the owner's, kept until free.
 * Returns 0, CN_ENOMEM, or CN_ENOTFOUND when create failed.
 */
int cn_istore_open(struct cn_broker *b, const char *topic, int32_t nparts,
                   const struct cn_istore_ops *ops, void *ctx, bool create,
                   struct cn_istore **out);
void cn_istore_free(struct cn_istore *s);

int32_t cn_istore_nparts(const struct cn_istore *s);
/* The partition a key (a group or transactional id) lives on: Kafka's
 * abs(String.hashCode) % partitions, as cn_txn_partition_for. */
int32_t cn_istore_part_of(const struct cn_istore *s, const uint8_t *key,
                          size_t len);
/* Partition part of the topic; with create the topic is made if missing.
 * NULL when it is not there (or cannot be made). */
struct cn_partition *cn_istore_partition(struct cn_istore *s, int32_t part,
                                         bool create);

/* Replays part from its log start through ops->record and ops->marker;
 * records below the log start are skipped.  counts (may be NULL) is
 * added to.  0 (also when the topic does not exist yet), CN_ENOMEM from
 * the owner, or a read error. */
int cn_istore_replay(struct cn_istore *s, int32_t part,
                     struct cn_istore_counts *counts);

/*
 * Appends keys[i]/values[i] (a null value is a tombstone) to part as one
 * batch stamped with the wall clock, transactional for producer_id >= 0;
 * w->done runs once it is durable, whatever the flush policy for data
 * (do not count on it running only after this returns).  Returns 0, or
 * an error with w->done not called
 * (CN_EOFFLINE, CN_ENOTFOUND when the topic cannot be made, CN_ENOMEM; in
 * cluster mode CN_ENOTLEADER when another broker leads part, CN_EREPLICAS
 * when its ISR is below min.insync.replicas: nothing is appended, as
 * Kafka refuses an acks=all write).
 */
int cn_istore_write(struct cn_istore *s, int32_t part,
                    const struct cn_bytes *keys, const struct cn_bytes *values,
                    size_t n, int64_t producer_id, int16_t producer_epoch,
                    struct cn_istore_wait *w);

/* Makes what others appended to part durable (a transaction marker, which
 * the partition layer appends under the flush policy for data): with
 * cairn.fsync.group.commit=false part joins the next sync round, which
 * completes before any round that starts later (so before a coordinator's
 * next record is durable); with group commit that round is already
 * coming and this does nothing. */
void cn_istore_sync(struct cn_istore *s, int32_t part);

/* Compacts part by checkpoint when ops->want_compact says so and nothing
 * of it is in flight (a write or a checkpoint), unsynced or in an open
 * transaction; writes only if that frees at least
 * cairn.internal.compact.slack.records.  The old records go when the
 * checkpoint's sync round ends (with nothing live: at once).  Call once a
 * write is applied.  The store may be freed with a checkpoint or writes in
 * flight: the round then ends them without the store. */
void cn_istore_maybe_compact(struct cn_istore *s, int32_t part);

#endif
