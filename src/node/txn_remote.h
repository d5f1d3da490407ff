/*
 * txn_remote.h - what a partition leader asks the transaction coordinator
 * on another broker: KIP-890 verification of a transactional batch
 * (AddPartitionsToTxn v4, VerifyOnly) and transaction version 2's
 * implicit add (AddPartitionsToTxn v5).
 *
 * Runs on: loop.
 */
#ifndef CN_NODE_TXN_REMOTE_H
#define CN_NODE_TXN_REMOTE_H

#include "node/broker_int.h"

/* At broker stop: calls in flight end, their waiters are answered. */
void cn_txn_remote_stop(struct cn_broker *b);

#endif
