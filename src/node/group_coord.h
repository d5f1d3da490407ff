/*
 * group_coord.h - the consumer group coordinator's broker side: the
 * __consumer_offsets topic, its loading at start, and the Kafka APIs of
 * the classic group protocol and of committed offsets.
 *
 * Membership logic lives in src/group/group.c and the offsets table in
 * src/group/offsets.c; this file gives them durability.  Every offset
 * commit and group generation is appended to the group's partition of
 * __consumer_offsets (Java's String.hashCode rule, as Kafka) and synced
 * before it is applied and answered.  Transactional offsets
 * (TxnOffsetCommit) are appended as transactional batches of the producer
 * and stay pending until the transaction's marker reaches that partition.
 *
 * Runs on: loop.
 */
#ifndef CN_NODE_GROUP_COORD_H
#define CN_NODE_GROUP_COORD_H

#include "node/broker_int.h"

#define CN_OFFSETS_TOPIC "__consumer_offsets"

/* Creates __consumer_offsets if missing, replays it into the group and
 * offsets tables, and arms the group timers.  Returns 0 or a negative
 * error. */
int cn_group_coord_start(struct cn_broker *b);
/* Answers every parked JoinGroup/SyncGroup and stops the timers. */
void cn_group_coord_stop(struct cn_broker *b);
void cn_group_coord_free(struct cn_broker *b);

/* The __consumer_offsets partition holding a group, or NULL when the
 * topic cannot be created. */
struct cn_partition *cn_group_coord_partition(struct cn_broker *b,
                                              struct cn_bytes group_id);
/* Whether this broker coordinates the group: KAFKA_NONE (always on a
 * single node), or in cluster mode NOT_COORDINATOR when the image names
 * another leader of its __consumer_offsets partition and
 * COORDINATOR_NOT_AVAILABLE while that topic is not here yet (asked of
 * the controller).  Every group request passes it before its group is
 * touched. */
int16_t cn_group_coord_check(struct cn_broker *b, struct cn_bytes group_id);
/* A transaction marker was appended to a __consumer_offsets partition:
 * the producer's pending offsets become visible (commit) or go.  Without
 * group commit the marker is synced here. */
void cn_group_coord_marker(struct cn_broker *b, struct cn_partition *p,
                           int64_t producer_id, bool commit);

/* net's abandon_cb for an OffsetCommit or TxnOffsetCommit: ends a commit
 * the fail point offset_commit.wait_for_close held for its client's
 * going. */
void cn_offset_commit_abandon(struct cn_broker *b, struct cn_req *req);

#endif
