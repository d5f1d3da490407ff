/*
 * txn_coord.h - the transaction coordinator (transaction versions 1 and 2).
 *
 * Every transactional id lives in one partition of __transaction_state
 * (Java's String.hashCode rule, so tools agree on where).  Each state
 * change is appended to that partition and synced before anything acts on
 * it or the client hears of it.  EndTxn writes PrepareCommit/PrepareAbort
 * (the decision), answers, sends a marker to every partition in the
 * transaction through its marker channel (markers.h: local partitions
 * today, through the partition layer's one write path), and then writes
 * CompleteCommit/CompleteAbort.  At start the log is replayed
 * and decided transactions are finished.
 *
 * Transaction version 2 (KIP-890 part 2), while cairn.transaction.version
 * finalizes it at 2: EndTxn v5 bumps the epoch in the PrepareX record, so
 * markers carry the new epoch and fence the previous transaction's late
 * batches; at the last usable epoch a new producer id is handed out
 * (NextProducerId) and taken on at completion.  The client's version is
 * stored as ClientTransactionVersion.  Partitions join on produce (see
 * cn_txn_coord_add_for_produce), and AddPartitionsToTxn v4/v5 (batched,
 * VerifyOnly) is served for brokers.
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

#include "base/hist.h"
#include "broker_int.h"
#include "handlers.h"
#include "txn/coord.h"
#include "txn/txn_state.h"

struct cn_txnb;

/* Loads __transaction_state if it exists, finishing decided transactions,
 * and arms the timeout check.  Returns 0 or a negative error. */
int cn_txn_coord_start(struct cn_broker *b);
void cn_txn_coord_stop(struct cn_broker *b);
void cn_txn_coord_free(struct cn_broker *b);

/*
 * What a partition leader asks before a transactional batch opens a
 * transaction on it (KIP-890 part 1): is this transactional id's producer
 * id, at this epoch, in an Ongoing transaction that includes the
 * partition?  Returns KAFKA_NONE if so (and always when
 * transaction.partition.verification.enable is false); as Kafka's
 * verification answers (by transactional id, the producer id, the epoch,
 * then the state): INVALID_PRODUCER_ID_MAPPING for an unknown id or
 * another producer id, INVALID_PRODUCER_EPOCH for another epoch, else
 * INVALID_TXN_STATE.  A null transactional id finds the transaction by
 * producer id.  A late batch from a transaction that has already ended
 * is refused this way instead of opening one nobody will close.
 */
int16_t cn_txn_coord_verify(struct cn_broker *b, struct cn_bytes txn_id,
                            int64_t producer_id, int16_t producer_epoch,
                            const char *topic, int32_t partition);

/* A partition named by a produce request. */
struct cn_txn_tp_ref {
    const char *topic;
    int32_t partition;
};

/*
 * Transaction version 2 (KIP-890 part 2): a TV2 client does not send
 * AddPartitionsToTxn; the partition joins the transaction when the first
 * transactional batch for it arrives.  Kafka 4.x decides by the Produce
 * version: v12 makes the leader send AddPartitionsToTxn v5 (add), v11 and
 * below only verify.  Cairn does the add locally, while transaction.
 * version 2 is finalized, at the producer's current epoch, for Produce
 * v12 (produce_v12) and also for older versions once the producer
 * instance has used TV2 (EndTxn v5 or an earlier add).  tps are the
 * request's partitions whose batch would open a transaction there.
 * Returns true when it took the request: the add is made durable (or the
 * busy id waited for) and then rerun(b, req, h, body) runs the request
 * again, which then finds the partitions in the transaction.  False: go
 * on (the verification answers).  TxnOffsetCommit v5 uses it the same way
 * for the group's __consumer_offsets partition (a TV2 client sends no
 * AddOffsetsToTxn), with produce_v12 true.
 */
bool cn_txn_coord_add_for_produce(struct cn_broker *b, struct cn_req *req,
                                  const struct cn_req_header *h,
                                  const struct cn_rd *body,
                                  cn_handler_fn rerun, bool produce_v12,
                                  int64_t producer_id, int16_t producer_epoch,
                                  const struct cn_txn_tp_ref *tps, size_t n);

void cn_txn_coord_stats(struct cn_broker *b, struct cn_txn_stats *out);

/* The coordinator's view of a producer id (hanging-transaction checks,
 * introspection).  False when it does not know the producer id. */
struct cn_txn_pid_view {
    char transactional_id[256]; /* truncated if longer */
    enum cn_txn_state state;
    int16_t producer_epoch;
    int64_t txn_start_ms;       /* the last transaction's start, or -1 */
    int32_t timeout_ms;
};
bool cn_txn_coord_pid_view(struct cn_broker *b, int64_t producer_id,
                           const char *topic, int32_t partition,
                           struct cn_txn_pid_view *out, bool *has_partition);

/*
 * An operator (WriteTxnMarkers from cairnctl txn abort, or the hanging
 * check's auto abort) wants producer_id's open transaction on
 * topic/partition aborted.  When the coordinator holds that producer in a
 * transaction that includes the partition, an abort marker written beside
 * it could split the transaction, so the coordinator decides:
 *  - Ongoing: it aborts the whole transaction itself, with an epoch bump,
 *    so the live producer cannot commit what was aborted under it
 *    (markers follow through the normal path): NONE, *taken true;
 *  - PrepareAbort / PrepareEpochFence: it is aborting already: NONE,
 *    *taken true;
 *  - PrepareCommit: INVALID_TXN_STATE (the decision is commit);
 *  - Ongoing with a change being written: CONCURRENT_TRANSACTIONS (that
 *    change may be the commit decision; try again).
 * Otherwise it returns NONE with *taken false and the caller writes the
 * abort marker to the partition directly.
 */
int16_t cn_txn_coord_abort_for_operator(struct cn_broker *b,
                                        int64_t producer_id, const char *topic,
                                        int32_t partition, bool *taken);

/* InitProducerId with a transactional id (the idempotent case stays in
 * h_producers.c).  body is the undecoded request, kept so it can run
 * again when the id is busy. */
void cn_txn_init_producer_id(struct cn_broker *b, struct cn_req *req,
                             const struct cn_req_header *h,
                             const struct cn_rd *body,
                             struct cn_bytes transactional_id,
                             int32_t timeout_ms, int64_t producer_id,
                             int16_t producer_epoch);

#endif
