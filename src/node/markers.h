/*
 * markers.h - how transaction markers leave the coordinator: a channel,
 * and its one implementation today, the local partitions.
 *
 * The coordinator asks a channel to write the commit or abort marker of
 * producer X (epoch, coordinator epoch E) to partitions P1..Pn and hears
 * back once per partition.  It does not know where the partitions live.
 *
 * The local channel (cn_marker_channel_local) appends each marker to this
 * broker's partition through the partition layer's one write path
 * (cn_part_append, origin coordinator) and reports once the marker is
 * below the high watermark, as an acks=all produce is answered.  The
 * operator's WriteTxnMarkers takes the same local path per partition
 * (cn_marker_write_local, origin operator).
 *
 * A remote channel implements the same send: it groups the partitions by
 * their leader, sends one WriteTxnMarkers per destination broker (all of
 * the markers for that broker batched in one request), and reports each
 * partition's error code from the answer.  It retries what failed with a
 * retriable code (NOT_LEADER_OR_FOLLOWER after a leadership move,
 * COORDINATOR_LOAD_IN_PROGRESS...) after looking the leader up again, and
 * stops retrying when the coordinator epoch it was given is no longer
 * current (the partition of __transaction_state moved: a newer
 * coordinator finishes the transaction).  A leader refuses markers whose
 * coordinator epoch is older than the last it saw for that producer.
 * Hence the contract below: send only reads its arguments during the
 * call; results name partitions by index and may come before send
 * returns or much later; each partition gets exactly one result.
 *
 * Runs on: loop.
 */
#ifndef CN_NODE_MARKERS_H
#define CN_NODE_MARKERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "node/broker_int.h"

struct cn_marker_tp {
    const char *topic;
    int32_t partition;
};

/* Markers of one producer for a set of partitions. */
struct cn_marker_send {
    int64_t producer_id;
    int16_t producer_epoch;
    bool commit; /* commit or abort marker */
    int32_t coordinator_epoch;
    /* The __transaction_state partition whose coordinator sends them (-1:
     * none, an operator's): a remote channel stops retrying once this
     * broker no longer leads it at coordinator_epoch. */
    int32_t txn_partition;
    const struct cn_marker_tp *tps;
    size_t n;
    /* Partition tps[i]'s result: KAFKA_NONE once its marker is written
     * and visible (a partition of a deleted topic needs none and gets
     * NONE), else the error code.  Called exactly once per partition. */
    void (*result)(struct cn_broker *b, void *arg, size_t i, int16_t kerr);
    void *arg;
};

struct cn_marker_channel {
    void (*send)(struct cn_broker *b, const struct cn_marker_send *s);
};

/* Delivers to this broker's partitions. */
extern const struct cn_marker_channel cn_marker_channel_local;

/* Cluster mode: to each partition's leader, this broker's through the
 * local path (reported once replicated), other brokers' by
 * WriteTxnMarkers (markers_remote.c). */
extern const struct cn_marker_channel cn_marker_channel_cluster;

/* What /metrics shows of the cluster channel (Kafka's
 * TransactionMarkerChannelManager gauges): markers waiting for their
 * partition to have a leader, markers waiting for a retry to a known
 * one, WriteTxnMarkers sent, markers requeued after a retriable error.
 * Zeros before the first cluster send. */
struct cn_markers_remote_counts {
    size_t unknown_destination;
    size_t retry_waiting;
    uint64_t requests;
    uint64_t retries;
};
void cn_markers_remote_counts(const struct cn_broker *b,
                              struct cn_markers_remote_counts *out);

/* At broker stop: requests in flight and queued markers end (their
 * results reported as errors); nothing is sent after this. */
void cn_markers_remote_stop(struct cn_broker *b);

/*
 * One marker for producer_id/producer_epoch to p, through the partition
 * layer (origin CN_PART_COORDINATOR or CN_PART_OPERATOR).  Returns a
 * Kafka error code: NONE, then done(b, arg) runs once the marker is
 * below the high watermark (possibly before this returns);
 * INVALID_PRODUCER_EPOCH (operator: older than the partition's epoch),
 * INVALID_REQUEST for __transaction_state, KAFKA_STORAGE_ERROR when the
 * log cannot take it.  done is not called on an error; it may be NULL.
 */
int16_t cn_marker_write_local(struct cn_broker *b, struct cn_partition *p,
                              enum cn_part_origin origin, int64_t producer_id,
                              int16_t producer_epoch, bool commit,
                              int32_t coordinator_epoch,
                              void (*done)(struct cn_broker *b, void *arg),
                              void *arg);

/*
 * cn_marker_write_local, but done(b, arg, kerr) hears the outcome: on a
 * single node NONE once the marker is visible; in cluster mode once the
 * ISR holds it (cn_replica_await_hw's code: NONE, NOT_ENOUGH_REPLICAS_
 * AFTER_APPEND, NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT), as Kafka
 * appends markers with acks=-1.  A refusal is returned, done not called.
 */
int16_t cn_marker_write_replicated(
    struct cn_broker *b, struct cn_partition *p, enum cn_part_origin origin,
    int64_t producer_id, int16_t producer_epoch, bool commit,
    int32_t coordinator_epoch,
    void (*done)(struct cn_broker *b, void *arg, int16_t kerr), void *arg);

#endif
