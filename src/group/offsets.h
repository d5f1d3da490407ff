/*
 * offsets.h - committed offsets of consumer groups, in memory, and their
 * records in __consumer_offsets.
 *
 * The table maps group -> (topic, partition) -> committed offset.  Offsets
 * committed inside a transaction (TxnOffsetCommit, KIP-447) wait per
 * producer id until the transaction's marker: commit makes them visible,
 * abort drops them.  As in Kafka 4.x, when a transaction commits, each of
 * its offsets replaces the visible one only if it was applied later (the
 * later record in the log wins), so a plain commit made while the
 * transaction was open is kept.  The store stamps every change with a
 * sequence number for this, which matches log order as long as the caller
 * applies records in the order it appends them (and replays them in log
 * order at start-up).
 *
 * Nothing here does I/O: the caller appends the records built by
 * cn_offsets_record() / cn_offsets_tombstone_key() and applies the same
 * change to the store.
 *
 * Key (OffsetCommitKey; written at version 1, read at 0 and 1; versions 2
 * and up belong to the group module):
 *
 *   offset  size  field
 *   0       2     version (int16)
 *   2       2     group length G (int16)
 *   4       G     group (UTF-8)
 *   4+G     2     topic length T (int16)
 *   6+G     T     topic (UTF-8)
 *   6+G+T   4     partition (int32)
 *
 * Value (OffsetCommitValue; written at version 3, read at 0..4; null = a
 * tombstone that deletes the key):
 *
 *   offset  size  field
 *   0       2     version (int16)
 *   2       8     offset
 *   10      4     leader epoch (versions 3+; -1 = unknown)
 *   14      2+M   metadata (int16 length; compact uvarint length+1 in v4)
 *   ...     8     commit timestamp (ms)
 *   ...     8     expire timestamp (ms; version 1 only)
 *   ...           tagged fields (version 4)
 *
 * Runs on: the group coordinator's loop; not thread-safe.
 */
#ifndef CN_GROUP_OFFSETS_H
#define CN_GROUP_OFFSETS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/bytes.h"
#include "base/wr.h"

#define CN_OFFSETS_KEY_VERSION 1   /* OffsetCommitKey version written */
#define CN_OFFSETS_VALUE_VERSION 3 /* OffsetCommitValue version written */
/* cn_offsets_load_record(): the key is a group coordinator record of
 * another kind (version 2 = group metadata); hand it to the group module. */
#define CN_OFFSETS_NOT_OFFSET 1

struct cn_offsets;

struct cn_offset_value {
    int64_t offset;              /* next offset the group will consume */
    int32_t leader_epoch;        /* leader epoch of that offset, -1 unknown */
    struct cn_bytes metadata;    /* client metadata, len -1 = null; the
                                    store copies it */
    int64_t commit_timestamp_ms; /* wall clock ms of the commit */
    int64_t expire_timestamp_ms; /* wall clock ms, or -1; only old
                                    (version 1) records carry one */
};

/*
 * Visits one (topic, partition).  `v` points into the store (metadata
 * included) and is NULL when the key has only pending transactional
 * offsets (cn_offsets_foreach_key).  A non-zero return stops the walk.
 */
typedef int (*cn_offsets_visit_fn)(void *arg, const char *topic,
                                   int32_t partition,
                                   const struct cn_offset_value *v);
/* Visits one group: its committed and pending offset counts. */
typedef int (*cn_offsets_group_fn)(void *arg, const char *group,
                                   size_t ncommitted, size_t npending);

/* An empty store, or NULL when out of memory. */
struct cn_offsets *cn_offsets_new(void);
/* Frees the store and everything in it; os may be NULL. */
void cn_offsets_free(struct cn_offsets *os);

/*
 * Commits an offset outside a transaction, replacing the visible one.
 * Pending transactional offsets of the key stay pending.  v's metadata is
 * copied.  0, CN_EINVAL (NULL name, negative partition) or CN_ENOMEM (the
 * store is then unchanged).
 */
int cn_offsets_put(struct cn_offsets *os, const char *group,
                   const char *topic, int32_t partition,
                   const struct cn_offset_value *v);

/*
 * The visible committed offset, or CN_ENOTFOUND.  out->metadata points
 * into the store and stays valid until that key next changes.
 */
int cn_offsets_get(const struct cn_offsets *os, const char *group,
                   const char *topic, int32_t partition,
                   struct cn_offset_value *out);

/*
 * Deletes a key as its tombstone does: the visible offset and every
 * pending transactional offset of the key (Kafka 4.x does the same on
 * replay).  0, or CN_ENOTFOUND when there was neither.
 */
int cn_offsets_delete(struct cn_offsets *os, const char *group,
                      const char *topic, int32_t partition);

/* Deletes every visible and pending offset of the group (DeleteGroups);
 * returns how many keys went. */
size_t cn_offsets_delete_group(struct cn_offsets *os, const char *group);

/*
 * Visits the group's visible offsets (OffsetFetch with null topics), in no
 * particular order.  The callback must not change the store.  Returns 0
 * or the first non-zero callback result.
 */
int cn_offsets_foreach(const struct cn_offsets *os, const char *group,
                       cn_offsets_visit_fn fn, void *arg);
/* As cn_offsets_foreach, but also keys with only pending offsets (v NULL):
 * the keys DeleteGroups writes tombstones for. */
int cn_offsets_foreach_key(const struct cn_offsets *os, const char *group,
                           cn_offsets_visit_fn fn, void *arg);
/* Visits every group that has visible or pending offsets (ListGroups
 * finds groups that only commit offsets this way). */
int cn_offsets_foreach_group(const struct cn_offsets *os,
                             cn_offsets_group_fn fn, void *arg);

/* Number of visible offsets of the group (0 for an unknown group). */
size_t cn_offsets_count(const struct cn_offsets *os, const char *group);
/* Number of pending transactional offsets of the group, over all
 * producers; a key pending in two transactions counts twice. */
size_t cn_offsets_pending_count(const struct cn_offsets *os,
                                const char *group);
/* Number of groups in the store. */
size_t cn_offsets_ngroups(const struct cn_offsets *os);

/*
 * Stores an offset committed in producer_id's open transaction; a later
 * put of the same key in that transaction replaces it.  It becomes
 * visible only through cn_offsets_txn_complete(..., true).  producer_epoch
 * may be -1 (unknown, as at load); a known epoch lower than one already
 * seen for this producer's open transaction is a zombie: CN_EINVAL.
 * 0, CN_EINVAL (also for producer_id < 0) or CN_ENOMEM (store unchanged).
 */
int cn_offsets_txn_put(struct cn_offsets *os, const char *group,
                       int64_t producer_id, int16_t producer_epoch,
                       const char *topic, int32_t partition,
                       const struct cn_offset_value *v);

/*
 * Ends producer_id's transaction in every group: commit makes its pending
 * offsets visible (each one unless the key was committed later outside
 * the transaction), abort drops them.  Returns how many pending offsets
 * the transaction held (0 for an unknown producer: markers for
 * transactions without offsets are common).
 */
size_t cn_offsets_txn_complete(struct cn_offsets *os, int64_t producer_id,
                               bool commit);

/* Which groups a call is about: true for those it touches (a cluster's
 * broker asks whether the group lives on a given __consumer_offsets
 * partition). */
typedef bool (*cn_offsets_match_fn)(void *arg, const char *group);

/*
 * As cn_offsets_txn_complete, for the pending offsets of the groups match
 * accepts (match NULL: all): a marker ends the transaction on one
 * __consumer_offsets partition only, and the producer's offsets on other
 * partitions wait for their own marker.  The producer's epoch is kept
 * while it still has pending offsets.
 */
size_t cn_offsets_txn_complete_match(struct cn_offsets *os,
                                     int64_t producer_id, bool commit,
                                     cn_offsets_match_fn match, void *arg);

/*
 * Forgets every visible and pending offset of the groups match accepts
 * (a __consumer_offsets partition this broker no longer coordinates: its
 * log keeps them).  Returns how many groups went.  match must not change
 * the store.
 */
size_t cn_offsets_unload(struct cn_offsets *os, cn_offsets_match_fn match,
                         void *arg);

/* True when some open transaction holds an offset for the key: OffsetFetch
 * with require_stable answers UNSTABLE_OFFSET_COMMIT then.  O(1). */
bool cn_offsets_has_pending(const struct cn_offsets *os, const char *group,
                            const char *topic, int32_t partition);

/*
 * Removes the group's visible offsets that have expired at now_ms: those
 * with an expire timestamp (old records) once it has passed, the others
 * when now_ms - commit timestamp >= retention_ms
 * (offsets.retention.minutes).  Keys with pending transactional offsets
 * are kept, as Kafka does.  Call it only for groups in state Empty (or
 * without members).  For each expired key, on_expired (may be NULL) is
 * called before the removal so the caller can write the tombstone; if it
 * returns non-zero the key is kept and expiry stops with that value.
 * Returns the number removed (>= 0) or the callback's value.
 */
int cn_offsets_expire(struct cn_offsets *os, const char *group,
                      int64_t now_ms, int64_t retention_ms,
                      cn_offsets_visit_fn on_expired, void *arg);

/*
 * Appends the record for a commit: key at CN_OFFSETS_KEY_VERSION into
 * `key`, value at CN_OFFSETS_VALUE_VERSION into `value` (a null metadata
 * is written empty, which the schema requires; the expire timestamp is
 * not written).  0, CN_EINVAL (NULL or over-long string, negative
 * partition) or the writers' error.
 */
int cn_offsets_record(struct cn_wr *key, struct cn_wr *value,
                      const char *group, const char *topic,
                      int32_t partition, const struct cn_offset_value *v);
/* Appends the key of a tombstone (the record's value is null). */
int cn_offsets_tombstone_key(struct cn_wr *key, const char *group,
                             const char *topic, int32_t partition);

/*
 * Applies one __consumer_offsets record during the replay at start-up (in
 * log order).  value NULL is a tombstone.  A record from a transactional
 * batch (producer_id >= 0 required) goes to that producer's pending
 * offsets; the caller then calls cn_offsets_txn_complete() at the
 * producer's marker.  Returns 0, CN_OFFSETS_NOT_OFFSET for a key of
 * version 2 or higher (not an offset commit: hand it to the group
 * module), CN_ECORRUPT for anything malformed (unknown versions,
 * truncation, trailing bytes, NUL inside a name, negative partition, null
 * metadata), CN_EINVAL for a transactional record without a producer
 * id, or CN_ENOMEM.  The store is unchanged on error.  Never reads
 * outside the given bytes.
 */
int cn_offsets_load_record(struct cn_offsets *os, const uint8_t *key,
                           size_t key_len, const uint8_t *value,
                           size_t value_len, int64_t producer_id,
                           bool transactional);

#endif
