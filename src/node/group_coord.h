/*
 * group_coord.h - the consumer group coordinator's broker side: the
 * __consumer_offsets topic, its loading (all of it at start on a single
 * node; in cluster mode each partition while this broker leads it), and
 * the Kafka APIs of the classic group protocol and of committed offsets.
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
 * offsets tables, and arms the group timers; in cluster mode only arms
 * the timers (the image decides which partitions load here,
 * cn_group_coord_lead).  Returns 0 or a negative error. */
int cn_group_coord_start(struct cn_broker *b);
/*
 * Cluster mode (publish.c): this broker leads partition part of
 * __consumer_offsets at leader epoch `epoch`, or does not.  Gaining it:
 * what was held of it is forgotten and it is replayed from the local log
 * (pending transactional offsets included), synchronously on the loop, so
 * no request sees it half loaded; then its groups are served.  Losing it:
 * members waiting in JoinGroup/SyncGroup get NOT_COORDINATOR and its
 * groups and offsets leave memory (clients find the new coordinator,
 * which loads them from its log).  Leading it already at another epoch
 * (an epoch bump without a change of leader): the state is kept and the
 * new epoch taken (KAFKA-15468), since another leader's records could
 * only have reached this log while this broker followed it, which would
 * have unloaded the partition first.  Nothing when already so.
 */
void cn_group_coord_lead(struct cn_broker *b, int32_t part, bool leads,
                         int32_t epoch);
/* Answers every parked JoinGroup/SyncGroup and stops the timers. */
void cn_group_coord_stop(struct cn_broker *b);
void cn_group_coord_free(struct cn_broker *b);

/* The __consumer_offsets partition holding a group, or NULL when the
 * topic cannot be created. */
struct cn_partition *cn_group_coord_partition(struct cn_broker *b,
                                              struct cn_bytes group_id);
/* Whether this broker coordinates the group: KAFKA_NONE (always on a
 * single node), or in cluster mode NOT_COORDINATOR when the image names
 * another leader of its __consumer_offsets partition or the partition is
 * not loaded here at its current leader epoch, and
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
