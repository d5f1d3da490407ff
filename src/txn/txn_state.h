/*
 * txn_state.h - transaction states, their legal transitions, and which
 * __transaction_state partition owns a transactional id.
 *
 * Pure functions, no I/O: the coordinator checks every transition here
 * before it writes the new state to its log.
 *
 * Runs on: any thread.
 */
#ifndef CN_TXN_TXN_STATE_H
#define CN_TXN_TXN_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * The values are the ids Kafka stores in TransactionLogValue's
 * TransactionStatus byte, so a log written by either can be read by both.
 */
enum cn_txn_state {
    CN_TXN_EMPTY = 0,               /* no transaction open */
    CN_TXN_ONGOING = 1,             /* partitions added, not yet ended */
    CN_TXN_PREPARE_COMMIT = 2,      /* commit decided; markers pending */
    CN_TXN_PREPARE_ABORT = 3,       /* abort decided; markers pending */
    CN_TXN_COMPLETE_COMMIT = 4,     /* commit markers all written */
    CN_TXN_COMPLETE_ABORT = 5,      /* abort markers all written */
    CN_TXN_DEAD = 6,                /* id expired, about to be removed */
    CN_TXN_PREPARE_EPOCH_FENCE = 7, /* epoch bumped over an open txn;
                                       it will be aborted next */
};

#define CN_TXN_NSTATES 8

/* True when v is one of the enum's values (e.g. a status byte read from
 * disk). */
static inline bool cn_txn_state_valid(int v)
{
    return v >= 0 && v < CN_TXN_NSTATES;
}

/*
 * Kafka's name for a state, as DescribeTransactions and ListTransactions
 * report it ("Empty", "Ongoing", "PrepareCommit", "PrepareAbort",
 * "CompleteCommit", "CompleteAbort", "Dead", "PrepareEpochFence").
 * "Unknown" for a value outside the enum.  The string is static.
 */
const char *cn_txn_state_name(enum cn_txn_state s);

/* The state named exactly (case-sensitive, as Kafka's broker matches
 * ListTransactions filters), or -1 for an unknown or NULL name. */
int cn_txn_state_parse(const char *name);

/*
 * True when Kafka's coordinator allows moving from `from` to `to` (its
 * TransactionState.validPreviousStates, Kafka 4.x).  Out-of-range values
 * are never allowed.  Notably PrepareAbort may follow Empty,
 * CompleteCommit and CompleteAbort: with transaction version 2 (KIP-890)
 * a client unsure of the server's state may send an abort.  The caller
 * rejects that for older clients.
 */
bool cn_txn_transition_ok(enum cn_txn_state from, enum cn_txn_state to);

/* True in the states where Kafka lets an idle id expire (Empty,
 * CompleteCommit, CompleteAbort). */
bool cn_txn_state_expirable(enum cn_txn_state s);

/*
 * Java's String.hashCode of the string Java decodes from these UTF-8
 * bytes: h = 31 * h + unit over the UTF-16 code units, wrapping at 32
 * bits.  Malformed UTF-8 is replaced the way Java 17's
 * new String(bytes, UTF_8) does it (see txn_state.c), so an id that a Java
 * client could never send still lands where Kafka would put it.
 */
int32_t cn_txn_java_hash(const uint8_t *s, size_t len);

/*
 * The __transaction_state partition that coordinates this id: Kafka's
 * Utils.abs(id.hashCode()) % partitions, with abs(INT32_MIN) = 0.
 * Returns -1 when partitions <= 0.
 */
int32_t cn_txn_partition_for(const uint8_t *id, size_t len,
                             int32_t partitions);

#endif
