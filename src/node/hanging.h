/*
 * hanging.h - hanging transactions on this broker's partitions: the
 * operator abort that WriteTxnMarkers and the check share, and the
 * periodic check that finds (and, if asked, aborts) transactions a
 * partition holds open but no coordinator will ever close.
 *
 * A transaction is hanging when it has been open on the partition longer
 * than transaction.max.timeout.ms + cairn.transaction.hanging.margin.ms
 * and the coordinator does not hold its producer id in a live transaction
 * (Ongoing, PrepareCommit or PrepareAbort) that includes the partition.
 * No correct transaction lives past transaction.max.timeout.ms: the
 * coordinator aborts it first.  The margin (default 60 s) covers the
 * coordinator's timeout check interval and the marker write, so a
 * transaction that is merely being aborted late is not reported.
 *
 * Every cairn.transaction.hanging.check.interval.ms the check logs one
 * warning per hanging transaction and updates the hanging metrics; with
 * transaction.hanging.auto.abort=true it also aborts each one (same path
 * as cairnctl txn abort) with an audit warning.
 *
 * Runs on: loop.
 */
#ifndef CN_NODE_HANGING_H
#define CN_NODE_HANGING_H

#include <stdbool.h>
#include <stdint.h>

#include "node/broker_int.h"

struct cn_hanging;

/* Arms the periodic check.  Returns 0 or CN_ENOMEM; *out set on success. */
int cn_hanging_start(struct cn_broker *b, struct cn_hanging **out);
/* Stops the check; h is freed once its timer has closed.  NULL is fine. */
void cn_hanging_stop(struct cn_hanging *h);

/*
 * An operator abort of producer_id's open transaction on p: if the
 * coordinator holds the producer in a transaction that includes p, it
 * decides (cn_txn_exec_operator_abort): it aborts the whole
 * transaction (epoch bump, markers follow) or is aborting it already, and
 * *by_coordinator is true, or it refuses (INVALID_TXN_STATE while it
 * commits, CONCURRENT_TRANSACTIONS while a change is written); otherwise
 * the abort marker is written here (cn_marker_write_replicated, origin
 * operator: done hears NONE once it is visible and, in a cluster,
 * replicated, or why not).  done may be NULL (fire and forget); when the
 * coordinator takes over done is called at once with NONE.  Returns a
 * Kafka error code as cn_marker_write_replicated, or the coordinator's
 * refusal (done not called).
 */
int16_t cn_hanging_abort(struct cn_broker *b, struct cn_partition *p,
                         int64_t producer_id, int16_t producer_epoch,
                         int32_t coordinator_epoch,
                         void (*done)(struct cn_broker *b, void *arg,
                                      int16_t kerr),
                         void *arg, bool *by_coordinator);

/* Runs one check now (tests); returns how many hanging transactions it
 * found. */
int cn_hanging_check_now(struct cn_broker *b, bool auto_abort);

#endif
