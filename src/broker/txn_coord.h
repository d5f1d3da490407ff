/*
 * txn_coord.h - the transaction coordinator (transaction version 1).
 *
 * Every transactional id lives in one partition of __transaction_state
 * (Java's String.hashCode rule, so tools agree on where).  Each state
 * change is appended to that partition and synced before anything acts on
 * it or the client hears of it.  EndTxn writes PrepareCommit/PrepareAbort
 * (the decision), answers, appends a marker to every partition in the
 * transaction through the same append path a remote leader would use, and
 * then writes CompleteCommit/CompleteAbort.  At start the log is replayed
 * and decided transactions are finished.
 *
 * Fail points, the same on the commit, abort, epoch-fence and timeout
 * paths: txn.after_prepare_sync (decision durable, no marker written),
 * txn.after_some_markers (the first of several partitions has its marker),
 * txn.after_markers_before_complete (every marker durable, Complete not
 * written).
 *
 * Runs on: loop.
 */
#ifndef CN_BROKER_TXN_COORD_H
#define CN_BROKER_TXN_COORD_H

#include "broker_int.h"

#define CN_TXN_TOPIC "__transaction_state"

struct cn_txn_coord;

/* Loads __transaction_state if it exists, finishing decided transactions,
 * and arms the timeout check.  Returns 0 or a negative error. */
int cn_txn_coord_start(struct cn_broker *b);
void cn_txn_coord_stop(struct cn_broker *b);
void cn_txn_coord_free(struct cn_broker *b);

/*
 * What a partition leader asks before a transactional batch opens a
 * transaction on it (KIP-890 part 1): is this producer id, at this epoch,
 * in an Ongoing transaction that includes the partition?  Returns
 * KAFKA_NONE if so (and always when transaction.partition.verification.
 * enable is false), INVALID_PRODUCER_EPOCH for an older epoch, else
 * INVALID_TXN_STATE.  A late batch from a transaction that has already
 * ended is refused this way instead of opening one nobody will close.
 */
int16_t cn_txn_coord_verify(struct cn_broker *b, int64_t producer_id,
                            int16_t producer_epoch, const char *topic,
                            int32_t partition);

void cn_h_find_coordinator(struct cn_broker *b, struct cn_req *req,
                           const struct cn_req_header *h, struct cn_rd *body);
/* InitProducerId with a transactional id (the idempotent case stays in
 * h_producers.c). */
void cn_txn_init_producer_id(struct cn_broker *b, struct cn_req *req,
                             const struct cn_req_header *h,
                             struct cn_bytes transactional_id,
                             int32_t timeout_ms, int64_t producer_id,
                             int16_t producer_epoch);
void cn_h_add_partitions_to_txn(struct cn_broker *b, struct cn_req *req,
                                const struct cn_req_header *h,
                                struct cn_rd *body);
void cn_h_add_offsets_to_txn(struct cn_broker *b, struct cn_req *req,
                             const struct cn_req_header *h,
                             struct cn_rd *body);
void cn_h_describe_transactions(struct cn_broker *b, struct cn_req *req,
                                const struct cn_req_header *h,
                                struct cn_rd *body);
void cn_h_list_transactions(struct cn_broker *b, struct cn_req *req,
                            const struct cn_req_header *h,
                            struct cn_rd *body);
void cn_h_end_txn(struct cn_broker *b, struct cn_req *req,
                  const struct cn_req_header *h, struct cn_rd *body);

#endif
