/*
 * txn_exec.h - the transaction coordinator's executor: the state machine
 * (txn/coord.h) wired to the broker.
 *
 * The machine decides; this carries out what it asks.  It owns the
 * machine, its one timer, the __transaction_state log (on the internal-
 * topic store, istore.h: records written durably, replayed at start,
 * compacted by checkpoint once no event waits in the queue), the marker
 * channel (markers.h) and the producer-id seam, and feeds every outcome
 * back as an event.  Events that arise while actions are being carried
 * out (a sync that finishes at once, a marker result before send
 * returns) wait in a queue and are stepped after, never from inside the
 * step that caused them.  Answers go to cn_h_txn_answer (handlers.h),
 * which encodes them or resumes the request they belong to.
 *
 * Fail points, the same on the commit, abort, epoch-fence and timeout
 * paths: txn.after_prepare_sync (decision durable, no marker written),
 * txn.after_some_markers (the first of several partitions has its marker),
 * txn.after_markers_before_complete (every marker durable, Complete not
 * written).
 *
 * Runs on: loop.
 */
#ifndef CN_NODE_TXN_EXEC_H
#define CN_NODE_TXN_EXEC_H

#include <stdbool.h>
#include <stdint.h>

#include "node/broker_int.h"
#include "txn/coord.h"

struct cn_txn_exec;

/* Replays __transaction_state if it exists, makes this broker the
 * coordinator of every partition of it (finishing decided transactions)
 * and arms the timer; in cluster mode only arms the timer (the image
 * decides, cn_txn_exec_lead).  0 or a negative error. */
int cn_txn_exec_start(struct cn_broker *b);
/* Cluster mode (publish.c): this broker coordinates partition part of
 * __transaction_state at leader epoch `epoch` (leads: replayed from the
 * local log, then led, its markers carrying the epoch), or no longer
 * does (its ids answer NOT_COORDINATOR).  Nothing when already so. */
void cn_txn_exec_lead(struct cn_broker *b, int32_t part, bool leads,
                      int32_t epoch);
/* Answers parked requests; nothing more is written. */
void cn_txn_exec_stop(struct cn_broker *b);
void cn_txn_exec_free(struct cn_broker *b);

/* A decoded, authorized request (not PRODUCE_ADD); its answer reaches
 * cn_h_txn_answer, possibly before this returns. */
void cn_txn_exec_request(struct cn_broker *b, const struct cn_txn_request *rq);
/* TV2's implicit add (PRODUCE_ADD).  True: taken, and cn_h_txn_answer
 * resumes the request later (or before this returns); false: go on now. */
bool cn_txn_exec_produce_add(struct cn_broker *b,
                             const struct cn_txn_request *rq);
/*
 * An operator wants producer_id's open transaction on topic/partition
 * aborted (WriteTxnMarkers, the hanging check).  NONE with *taken true:
 * the coordinator aborts the whole transaction itself; NONE with *taken
 * false: the caller writes the marker to the partition; else the refusal
 * (INVALID_TXN_STATE after a commit decision, CONCURRENT_TRANSACTIONS
 * while a change is being written).
 */
int16_t cn_txn_exec_operator_abort(struct cn_broker *b, int64_t producer_id,
                                   const char *topic, int32_t partition,
                                   bool *taken);
/* The machine, for its read-only queries; NULL before start. */
const struct cn_txn_coord *cn_txn_exec_coord(const struct cn_broker *b);
/* pids.c: a producer-id reservation finished (durable or failed). */
void cn_txn_exec_pids_ready(struct cn_broker *b);
/* FindCoordinator's readiness: __transaction_state exists (made now if
 * missing). */
bool cn_txn_exec_log_ready(struct cn_broker *b);

/*
 * What a partition leader asks the coordinator before a transactional
 * batch opens a transaction on it (KIP-890 part 1; cn_txn_verify for the
 * answers).  A seam: today the coordinator is local and this calls its
 * query; with more brokers it becomes an AddPartitionsToTxn v4
 * (VerifyOnly) to the coordinator's broker.
 */
struct cn_txn_verifier {
    int16_t (*verify)(struct cn_broker *b, struct cn_bytes txn_id,
                      int64_t producer_id, int16_t producer_epoch,
                      const char *topic, int32_t partition);
};
extern const struct cn_txn_verifier cn_txn_verifier_local;

/* Through the broker's verifier. */
int16_t cn_txn_exec_verify(struct cn_broker *b, struct cn_bytes txn_id,
                           int64_t producer_id, int16_t producer_epoch,
                           const char *topic, int32_t partition);

#endif
