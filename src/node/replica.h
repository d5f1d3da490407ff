/*
 * replica.h - partition replication in cluster mode (issue #14), Kafka's
 * ISR way: this broker as a partition's leader (its followers' fetches,
 * the ISR, the high watermark, produces waiting for acks=all) and as a
 * follower (fetching from each leader and appending its batches
 * unchanged through the partition's one write path).
 *
 * The decisions are the partition layer's pure machines (partition/isr.h
 * for the leader, the epoch cache and truncation for the follower); this
 * module carries them out with the loop, the peer connections and the
 * controller.
 *
 *  - Leader: a partition with more than one replica gets a struct cn_isr
 *    (p->isr) while this broker leads it.  Its high watermark is the
 *    smallest end over the maximal ISR, where the leader counts what it
 *    has synced (group commit) and a follower what its fetch offset says
 *    it holds.  An ISR change (a follower behind for
 *    replica.lag.time.max.ms leaves, one caught up comes back) is sent to
 *    the controller as AlterPartition; the image then carries it.
 *  - Follower: one fetcher per leader broker sends Fetch (v17,
 *    ReplicaState) for every partition this broker follows there, appends
 *    what comes (CN_PART_REPLICA: offsets, epochs, producer ids kept),
 *    truncates where the leader says the logs diverge (DivergingEpoch),
 *    and with cairn.replica.sync (the default) waits for its group-commit
 *    round before the next fetch, so a fetch offset the leader counts is
 *    on disk here.
 *  - acks=all: a produce whose data must reach the ISR waits here
 *    (struct cn_hw_wait) until every partition's high watermark passes
 *    what it appended, or its timeout.
 *
 * Nothing here runs on a single node: b->replica stays NULL and every
 * partition's p->isr too.
 *
 * Runs on: loop.
 */
#ifndef CN_NODE_REPLICA_H
#define CN_NODE_REPLICA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct cn_broker;
struct cn_partition;
struct cn_topic;
struct cn_image_part;

/* publish.c, for each local partition of an image topic, before p->leader
 * and p->leader_epoch take the image's values: starts or stops leading
 * with followers, following, or neither.  ip NULL: the image has no such
 * partition. */
void cn_replica_partition(struct cn_broker *b, struct cn_topic *t,
                          struct cn_partition *p,
                          const struct cn_image_part *ip);

/* publish.c, once a publish has gone through every topic: fetchers that
 * follow nothing any more stop, waiters recheck. */
void cn_replica_published(struct cn_broker *b);

/* A partition leaves (its topic is deleted here): its leader state goes
 * and no fetcher names it any more.  Safe for any partition. */
void cn_replica_forget(struct cn_broker *b, struct cn_partition *p);

/* At broker stop, before topics close: fetchers stop, waiters are
 * answered, nothing runs after this.  Frees b->replica once its handles
 * have closed. */
void cn_replica_stop(struct cn_broker *b);

/* sync.c: p's locally durable end moved to end (the synced offset under
 * group commit, else the log end).  In cluster mode this is what moves a
 * high watermark: the leader's own share when p has followers, the whole
 * of it for a partition of one replica, nothing on a follower (its high
 * watermark is the leader's).  Returns true when p->high_watermark
 * moved. */
bool cn_replica_durable(struct cn_broker *b, struct cn_partition *p,
                        int64_t end);

/* sync.c: p took an append.  A leader with followers wakes their
 * parked fetches (soon, from the loop), so they copy it while it is
 * synced here rather than after. */
void cn_replica_appended(struct cn_broker *b, struct cn_partition *p);

/* h_fetch.c, once per follower Fetch partition, before it is served:
 * records the follower's fetch offset (its log end), may advance the high
 * watermark and propose adding it to the ISR.  Returns 0 or the Kafka
 * error to answer the partition with (the fetcher is no replica, or this
 * broker does not lead p with followers). */
int16_t cn_replica_follower_fetch(struct cn_broker *b, struct cn_partition *p,
                                  int32_t replica_id, int64_t replica_epoch,
                                  int64_t fetch_offset);

/* The ISR size acks=all is held to: the committed ISR when p has
 * followers, else 1. */
int32_t cn_replica_isr_size(const struct cn_partition *p);

/* Whether an acks=all write to p must wait for followers beyond this
 * broker's own sync. */
static inline bool cn_replica_needs_wait(const struct cn_partition *p);

/* A request waiting for high watermarks (acks=all).  check runs after
 * every high-watermark or ISR change of any partition and at the
 * deadline (final true); it returns true when it answered, and is then
 * unlinked.  Embed it. */
struct cn_hw_wait {
    bool (*check)(struct cn_broker *b, struct cn_hw_wait *w, bool final);
    int64_t deadline_ms; /* monotonic */
    struct cn_hw_wait *next;
};

/* Queues w (checked once at once; it may answer inside this call). */
void cn_replica_hw_wait(struct cn_broker *b, struct cn_hw_wait *w);

/*
 * What a coordinator's record or a transaction marker waits for in
 * cluster mode, after its local sync: that p's high watermark passes end,
 * so the ISR holds it ("replicated before acted on").  done(b, arg, kerr)
 * runs once: NONE; NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR is below
 * min_isr as the high watermark passes (as acks=all); NOT_LEADER_OR_
 * FOLLOWER when this broker stops leading p or its leader epoch moves
 * (what was appended may have been truncated); REQUEST_TIMED_OUT after
 * timeout_ms.  It may run before this returns.  Returns 0, or CN_ENOMEM
 * with done not called.
 */
int cn_replica_await_hw(struct cn_broker *b, struct cn_partition *p,
                        int64_t end, int32_t min_isr, int64_t timeout_ms,
                        void (*done)(struct cn_broker *b, void *arg,
                                     int16_t kerr),
                        void *arg);

/* Broker id's address on the inter-broker listener
 * (inter.broker.listener.name, PLAINTEXT by default; its first listener
 * when it has no such one), from the image: where followers fetch, and
 * where markers and KIP-890 checks go.  False when the image has no such
 * broker or the host does not fit. */
bool cn_replica_broker_endpoint(struct cn_broker *b, int32_t id, char *host,
                                size_t hostsz, int *port);

/* What /metrics and cairnctl show (Kafka's names where they exist). */
struct cn_replica_stats {
    uint64_t isr_shrinks;      /* IsrShrinksPerSec's count */
    uint64_t isr_expands;      /* IsrExpandsPerSec's count */
    uint64_t leader_elections; /* partitions this broker started leading */
    uint64_t truncations;      /* follower log truncations */
    uint64_t fetch_errors;     /* follower fetches that failed */
};
void cn_replica_stats(const struct cn_broker *b, struct cn_replica_stats *out);

/* ---- inline ----------------------------------------------------------- */

#include "partition/partition.h"

static inline bool cn_replica_needs_wait(const struct cn_partition *p)
{
    return p->isr != NULL;
}

#endif
