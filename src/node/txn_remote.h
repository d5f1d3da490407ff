/*
 * txn_remote.h - what a partition leader asks the transaction coordinator
 * on another broker: KIP-890 verification of a transactional batch
 * (AddPartitionsToTxn, VerifyOnly) and transaction version 2's implicit
 * add (AddPartitionsToTxn, VerifyOnly false).
 *
 * Kafka's AddPartitionsToTxnManager: one connection per coordinator
 * broker (its inter-broker listener, client id
 * "cairn-txn-verifier-<this node>"), at most one request in flight to
 * each; checks asked meanwhile wait and go together in the next one.  A
 * second check of the same transactional id while one waits replaces it,
 * and the older is answered NETWORK_EXCEPTION (same epoch: a retry) or
 * INVALID_PRODUCER_EPOCH (the newer epoch fences it); an older epoch than
 * the waiting one is answered INVALID_PRODUCER_EPOCH at once.
 *
 * Nothing is cached across checks: every check is asked of the broker
 * the metadata image names as the coordinator now.  Answers are the
 * coordinator's per-partition codes after the manager's own mapping
 * (cn_txn_remote_coord_error); what a Produce or TxnOffsetCommit answers
 * with them is the handler's (cn_txn_remote_produce_error).
 *
 * Runs on: loop.
 */
#ifndef CN_NODE_TXN_REMOTE_H
#define CN_NODE_TXN_REMOTE_H

#include <stdbool.h>
#include <stdint.h>

#include "node/broker_int.h"
#include "producer/pstate.h"
#include "proto/batch.h"

/* One partition of a check; error is the answer (KAFKA_NONE: in the
 * transaction, or added to it). */
struct cn_txn_remote_tp {
    const char *topic; /* must live until done has run */
    int32_t partition;
    int16_t error;
};

/*
 * Cluster mode: the broker leading the id's __transaction_state
 * partition in the image (*node; -1 when the partition has no leader or
 * the topic is not in the image yet).  True when that is another broker
 * (a coordinator that exists and is not this one); false on a single
 * node, when this broker coordinates the id, or when no coordinator is
 * known.
 */
bool cn_txn_remote_coordinator_is_remote(struct cn_broker *b,
                                         struct cn_bytes txn_id,
                                         int32_t *node);

/*
 * Asks the coordinator of txn_id (another broker) whether producer_id at
 * producer_epoch has tps[0..n) in its Ongoing transaction (add false:
 * VerifyOnly), or to add them (add true: transaction version 2).  True:
 * done(b, arg) runs later on the loop, never inside this call, with
 * every tps[i].error set; tps, the topics and txn_id's bytes need not
 * outlive this call except tps and its topics.  False: done will not
 * run, and every tps[i].error is set already (no coordinator known:
 * COORDINATOR_NOT_AVAILABLE; out of memory or stopping:
 * COORDINATOR_NOT_AVAILABLE too, which asks the client to retry).
 */
bool cn_txn_remote_check(struct cn_broker *b, struct cn_bytes txn_id,
                         int64_t producer_id, int16_t producer_epoch, bool add,
                         struct cn_txn_remote_tp *tps, size_t n,
                         void (*done)(struct cn_broker *b, void *arg),
                         void *arg);

/* ---- the decisions: pure ------------------------------------------------ */

/*
 * Whether a produce batch needs the coordinator's word before it is
 * appended (the same test as append.c's verification): a transactional
 * batch that is not part of its producer's open transaction at its epoch
 * on the partition.  pe: the producer's entry there, NULL when none.
 */
bool cn_txn_remote_batch_needs_check(const struct cn_batch_hdr *hdr,
                                     const struct cn_pentry_info *pe);

/*
 * A coordinator's per-partition answer as Kafka's AddPartitionsToTxnManager
 * hands it on: PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH (producers
 * expect it there), TRANSACTION_ABORTABLE becomes INVALID_TXN_STATE for a
 * client too old to know it (default_error: Produce v10 and older,
 * TxnOffsetCommit v3 and older).
 */
int16_t cn_txn_remote_coord_error(int16_t err, bool default_error);

/*
 * What a produce partition answers for a check's result (Kafka's
 * ReplicaManager.appendRecords after verification): the coordinator
 * errors a producer may not retry (NETWORK_EXCEPTION,
 * COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE,
 * NOT_COORDINATOR, and CONCURRENT_TRANSACTIONS unless the check was a
 * TV2 add) become NOT_ENOUGH_REPLICAS, retriable without a metadata
 * refresh; the rest stay.
 */
int16_t cn_txn_remote_produce_error(int16_t err, bool add);

/* At broker stop: every check waiting or in flight is answered (done runs
 * before this returns, with NETWORK_EXCEPTION), the connections close,
 * and no check is taken after. */
void cn_txn_remote_stop(struct cn_broker *b);

#endif
