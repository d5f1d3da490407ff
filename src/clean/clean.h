/*
 * clean.h - the log cleaner's decisions, with no files and no threads:
 * which records of a compacted log survive a cleaning pass, following
 * Kafka's LogCleaner (research B1-B2).
 *
 * A pass over one partition, as the log layer is meant to drive it:
 *   1. cn_clean_first_uncleanable() bounds the pass (LSO, active segment,
 *      min.compaction.lag.ms); nothing at or past it is ever given here.
 *   2. A key map over the dirty range [first dirty, bound): for each batch
 *      in offset order cn_clean_map_add(), with a txns tracker fed the
 *      aborted transactions (.txnindex) of that range.  Control batches and
 *      aborted batches never enter the map.  CN_ETOOBIG means the map is
 *      full: stop there, the pass ends at cn_clean_map_latest() + 1.
 *   3. The rewrite: ONE cn_clean_pass for the whole round, a fresh txns
 *      tracker carried across every group of segments (KAFKA-8351); per
 *      group add its aborted transactions, then cn_clean_batch() for every
 *      batch from the log start, writing what it appends to `out` into the
 *      group's cleaned segment and each reported txn entry into its new
 *      .txnindex.
 * Offsets are never reassigned: a rewritten batch keeps its base offset and
 * every kept record its offset delta.
 *
 * Runs on: any thread; objects are not shared between threads.
 */
#ifndef CN_CLEAN_CLEAN_H
#define CN_CLEAN_CLEAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/bytes.h"
#include "base/wr.h"
#include "proto/batch.h"

/* An aborted transaction as .txnindex holds it. */
struct cn_clean_aborted {
    int64_t producer_id;
    int64_t first_offset; /* first offset of its data */
    int64_t last_offset;  /* offset of its ABORT marker */
};

/* One segment as the scheduler sees it; the last one is the active one. */
struct cn_clean_seg {
    int64_t base_offset;
    int64_t max_timestamp; /* ms, largest record timestamp, -1 none */
    int64_t bytes;
};

/*
 * First offset the pass must not touch: the least of the LSO, the active
 * (last) segment's base, and the base of the first segment at or after
 * first_dirty whose largest timestamp is newer than now - min_lag_ms.
 */
int64_t cn_clean_first_uncleanable(const struct cn_clean_seg *segs, size_t n,
                                   int64_t first_dirty, int64_t lso,
                                   int64_t now_ms, int64_t min_lag_ms);

/*
 * Dirty ratio as Kafka's max-dirty-percent: bytes of segments in
 * [first_dirty, uncleanable) over bytes of segments below uncleanable.
 * 0 for an empty log.
 */
double cn_clean_dirty_ratio(const struct cn_clean_seg *segs, size_t n,
                            int64_t first_dirty, int64_t uncleanable);

/* ---- transaction tracker (Kafka's CleanedTransactionMetadata) ---------- */

struct cn_clean_txns;

int cn_clean_txns_new(struct cn_clean_txns **out);
void cn_clean_txns_free(struct cn_clean_txns *t);
/* Adds aborted transactions, by first_offset, after any added before. */
int cn_clean_txns_add_aborted(struct cn_clean_txns *t,
                              const struct cn_clean_aborted *a, size_t n);
/* A data batch read: true when it belongs to an aborted transaction. */
bool cn_clean_txns_on_batch(struct cn_clean_txns *t,
                            const struct cn_batch_hdr *h);
/*
 * A control batch read (type CN_CONTROL_*, or -1 for an already emptied
 * one): true when the marker is no longer needed once its delete horizon
 * passes.  An ABORT marker whose transaction still had batches in this
 * pass stays, and *append (if not NULL) gets the entry the cleaned
 * .txnindex must hold; *has_append says whether it did.
 */
bool cn_clean_txns_on_control(struct cn_clean_txns *t,
                              const struct cn_batch_hdr *h, int type,
                              struct cn_clean_aborted *append,
                              bool *has_append);

/* ---- key map ------------------------------------------------------------ */

struct cn_clean_map;

/* max_bytes bounds keys plus bookkeeping (log.cleaner.dedupe.buffer.size). */
int cn_clean_map_new(size_t max_bytes, struct cn_clean_map **out);
void cn_clean_map_free(struct cn_clean_map *m);
/*
 * Maps the keys of one batch (the next in offset order) to their offsets,
 * consulting t (fed with the dirty range's aborted transactions) so that
 * aborted and control batches add no key.  Returns 0, CN_ETOOBIG when the
 * batch's keys do not fit (nothing added, t not advanced), CN_ECORRUPT,
 * CN_ENOMEM.
 */
int cn_clean_map_add(struct cn_clean_map *m, struct cn_clean_txns *t,
                     const uint8_t *batch, size_t len, struct cn_wr *scratch);
/* Last offset of the last batch mapped, -1 before any. */
int64_t cn_clean_map_latest(const struct cn_clean_map *m);
/* Offset of the latest record with key, -1 if not mapped. */
int64_t cn_clean_map_get(const struct cn_clean_map *m, struct cn_bytes key);
size_t cn_clean_map_count(const struct cn_clean_map *m);

/* ---- the rewrite -------------------------------------------------------- */

/* A producer still in producer state, and where its last data batch is. */
struct cn_clean_producer {
    int64_t producer_id;
    int16_t epoch;
    int64_t last_data_offset; /* -1 when its last entry is a marker */
};

struct cn_clean_params {
    int64_t now_ms;
    int64_t delete_retention_ms; /* delete.retention.ms */
};

struct cn_clean_pass;

/* The map and txns tracker are borrowed; producers are copied. */
int cn_clean_pass_new(const struct cn_clean_map *map, struct cn_clean_txns *t,
                      const struct cn_clean_producer *producers, size_t n,
                      const struct cn_clean_params *params,
                      struct cn_clean_pass **out);
void cn_clean_pass_free(struct cn_clean_pass *p);
/* The batch whose last offset is last_offset is kept, emptied if need be
 * (-1: none): the log layer names each group's last batch, so a cleaned
 * segment still ends where the segments it replaced ended (Kafka keeps
 * the last batch of a cleaning round for the same reason) and is never
 * empty. */
void cn_clean_pass_retain(struct cn_clean_pass *p, int64_t last_offset);

struct cn_clean_result {
    bool kept;          /* something was appended to out */
    bool rewritten;     /* and it differs from the input batch */
    int32_t records_kept;
    int32_t records_dropped;
    bool has_txn_entry; /* txn_entry goes into the cleaned .txnindex */
    struct cn_clean_aborted txn_entry;
};

/*
 * Decides one batch and appends to out what the cleaned segment holds in
 * its place: nothing, the batch unchanged, or a rewrite with the kept
 * records (an empty batch when only producer state needs it).  Returns 0,
 * CN_ECORRUPT, CN_ENOMEM or a codec error; out is unchanged on error.
 */
int cn_clean_batch(struct cn_clean_pass *p, const uint8_t *batch, size_t len,
                   struct cn_wr *scratch, struct cn_wr *out,
                   struct cn_clean_result *res);

#endif
