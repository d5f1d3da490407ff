/*
 * txn_log.h - one transactional id's coordinator metadata and its record
 * in __transaction_state.
 *
 * A record's key is the id, its value the metadata; a null value (a
 * tombstone) removes the id when the topic is compacted.
 *
 * Key (TransactionLogKey, version 0):
 *
 *   offset  size  field
 *   0       2     version (int16, 0)
 *   2       2     TransactionalId length N (int16)
 *   4       N     TransactionalId (UTF-8)
 *
 * Value (TransactionLogValue; written at version 1, read at 0 and 1):
 *
 *   offset  size  field
 *   0       2     version (int16)
 *   2       8     ProducerId
 *   10      2     ProducerEpoch
 *   12      4     TransactionTimeoutMs
 *   16      1     TransactionStatus (enum cn_txn_state)
 *   17      ...   TransactionPartitions: array of {Topic, []PartitionIds},
 *                 one entry per topic; null when the state is Empty
 *                 (compact encodings and tagged fields from version 1)
 *   ...     8     TransactionLastUpdateTimestampMs
 *   ...     8     TransactionStartTimestampMs
 *   ...           v1 tagged fields: 0 PreviousProducerId, 1 NextProducerId,
 *                 2 ClientTransactionVersion (int16)
 *
 * Runs on: any thread; nothing here does I/O.
 */
#ifndef CN_TXN_TXN_LOG_H
#define CN_TXN_TXN_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/bytes.h"
#include "base/wr.h"
#include "txn/txn_state.h"

#define CN_TXN_LOG_KEY_VERSION 0   /* the only key version Kafka has */
#define CN_TXN_LOG_VALUE_VERSION 1 /* the newest value version; written */

struct cn_txn_tp {
    char *topic;       /* NUL-terminated, owned */
    int32_t partition; /* >= 0 */
};

struct cn_txn_meta {
    char *transactional_id;       /* NUL-terminated, owned */
    int64_t producer_id;          /* -1 when none */
    int64_t prev_producer_id;     /* id before the last rotation, or -1 */
    int64_t next_producer_id;     /* id handed out but not yet in use
                                     (TV2 epoch overflow), or -1 */
    int16_t producer_epoch;       /* -1 when none */
    int16_t last_producer_epoch;  /* epoch before the last bump, or -1; not
                                     stored in the log (Kafka neither) */
    int32_t timeout_ms;           /* transaction.timeout.ms of the client */
    enum cn_txn_state state;
    struct cn_txn_tp *partitions; /* set, sorted by (topic, partition),
                                     owned; only the helpers below touch it */
    size_t npartitions;           /* entries used */
    size_t partitions_cap;        /* entries allocated */
    int64_t txn_start_ms;         /* wall clock ms the last txn began (kept
                                     * when it completes), or -1 */
    int64_t last_update_ms;       /* wall clock ms of the last transition */
    int8_t client_tv;             /* transaction version the client uses:
                                     0/1 = TV1, 2 = TV2 (KIP-890) */
};

/* An empty meta: no id, ids and epochs -1, state Empty, times -1. */
void cn_txn_meta_init(struct cn_txn_meta *m);
/* Frees what m owns and leaves it as after cn_txn_meta_init(). */
void cn_txn_meta_fini(struct cn_txn_meta *m);
/* Replaces the id with a copy of `id` (may be NULL).  0 or CN_ENOMEM. */
int cn_txn_meta_set_id(struct cn_txn_meta *m, const char *id);
/* A deep copy into dst, which must be initialized (its old contents are
 * freed).  0 or CN_ENOMEM, in which case dst is left empty. */
int cn_txn_meta_copy(struct cn_txn_meta *dst, const struct cn_txn_meta *src);
/* True when a and b hold the same id, fields and partition set. */
bool cn_txn_meta_eq(const struct cn_txn_meta *a, const struct cn_txn_meta *b);

/* Adds a partition to the set (a second add is a no-op).  0, CN_EINVAL
 * for a NULL topic or negative partition, or CN_ENOMEM. */
int cn_txn_meta_add_partition(struct cn_txn_meta *m, const char *topic,
                              int32_t partition);
/* Removes a partition; returns whether it was there. */
bool cn_txn_meta_remove_partition(struct cn_txn_meta *m, const char *topic,
                                  int32_t partition);
bool cn_txn_meta_has_partition(const struct cn_txn_meta *m,
                               const char *topic, int32_t partition);
/* Empties the set (keeps the allocation for the next transaction). */
void cn_txn_meta_clear_partitions(struct cn_txn_meta *m);

/* Appends the key record bytes for `transactional_id` to wr.  0, CN_EINVAL
 * (NULL id or longer than a Kafka string allows), or wr's error. */
int cn_txn_log_encode_key(struct cn_wr *wr, const char *transactional_id);

/*
 * Appends the value record bytes for m to wr, at CN_TXN_LOG_VALUE_VERSION.
 * CN_EINVAL when m cannot be written: state Dead (that is a tombstone) or
 * out of range, partitions while Empty, an over-long topic, or a
 * client_tv outside 0..127.  Otherwise 0 or wr's error.
 */
int cn_txn_log_encode_value(struct cn_wr *wr, const struct cn_txn_meta *m);

/*
 * Both halves of the record that stores m: the key into `key`, and the
 * value into `value` unless m is Dead, in which case the record is a
 * tombstone (*tombstone = true, `value` untouched).  0 or as above.
 */
int cn_txn_log_encode(const struct cn_txn_meta *m, struct cn_wr *key,
                      struct cn_wr *value, bool *tombstone);

/*
 * Reads a record back.  `key` must be a version 0 TransactionLogKey;
 * `value` (len -1 = null) a TransactionLogValue of version 0 or 1, or null
 * for a tombstone.  On success *out (overwritten: fini it first) holds the
 * id and, for a tombstone, state Dead and defaults otherwise, with
 * *tombstone set accordingly.  Partitions of an Empty value are ignored, as
 * Kafka does; last_producer_epoch is -1 (not stored).  Returns CN_ECORRUPT
 * for anything malformed (unknown versions, truncation, trailing bytes, a
 * status byte outside the enum, null or negative fields that cannot be,
 * NUL inside a string) or CN_ENOMEM; *out is untouched then.  Never reads
 * outside the given bytes.
 */
int cn_txn_log_decode(struct cn_bytes key, struct cn_bytes value,
                      struct cn_txn_meta *out, bool *tombstone);

#endif
