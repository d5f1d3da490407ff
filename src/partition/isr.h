/*
 * isr.h - a partition leader's view of its followers: who is in sync, the
 * high watermark, and which ISR change to ask the controller for.
 *
 * A pure state machine after Kafka's Partition and Replica classes
 * (updateFollowerFetchState, maybeIncrementLeaderHW, maybeShrinkIsr,
 * maybeExpandIsr, the AlterPartition answer handlers; KIP-497).  It does
 * no I/O, reads no clock (every time is an argument, monotonic ms) and
 * allocates nothing: the struct holds fixed arrays, so the broker embeds
 * it in its per-partition leader state.  The broker feeds it events
 * (leadership and image changes, replica fetches, AlterPartition answers)
 * and carries out what it returns (send AlterPartition, publish the HW).
 *
 * The ISR it tracks has two layers:
 *   - committed: what the controller's image says (or its last
 *     AlterPartition answer, which may come first);
 *   - maximal: committed plus the members a pending AlterPartition adds.
 *     Members being removed count until the removal is committed.  The
 *     high watermark and acks=all use the maximal ISR, so neither moves
 *     past a replica the controller may already have put in the ISR
 *     (KIP-497); min.insync.replicas before an append uses the committed.
 *
 * Offsets are log end offsets (the next offset to write); -1 is unknown.
 * Times are monotonic milliseconds, never negative; -1 is "never".
 *
 * Runs on: loop (the thread that owns the partition).
 */
#ifndef CN_PARTITION_ISR_H
#define CN_PARTITION_ISR_H

#include <stdbool.h>
#include <stdint.h>

/* Largest replication factor handled; the fixed arrays below are sized by
 * it.  Kafka allows more, Cairn's clusters are small. */
#define CN_ISR_MAX_REPLICAS 16

/* In the image_broker_epochs array of cn_isr_want_change: the broker may
 * not join the ISR (fenced, in controlled shutdown, or not registered). */
#define CN_ISR_INELIGIBLE (-2)

/* What the leader knows of one follower, from its fetches (Kafka's
 * ReplicaState). */
struct cn_isr_follower {
    int32_t id;           /* broker id */
    int64_t broker_epoch; /* of its last fetch (ReplicaState), -1 none */
    int64_t leo;          /* its log end offset = last fetch offset, -1 */
    /* Last time its LEO reached the leader's, -1 never. */
    int64_t last_caught_up_ms;
    int64_t last_fetch_ms;         /* time of its last fetch, -1 none */
    int64_t last_fetch_leader_leo; /* leader LEO at that fetch, -1 none */
};

struct cn_isr {
    int32_t self; /* this broker: the leader */
    int32_t leader_epoch;
    int32_t partition_epoch; /* of the committed state */
    /* Where this leader epoch began in the log (the leader's LEO when
     * elected). */
    int64_t epoch_start_offset;
    int32_t replicas[CN_ISR_MAX_REPLICAS]; /* assignment, image order */
    int32_t nreplicas;
    int32_t isr[CN_ISR_MAX_REPLICAS]; /* committed ISR */
    int32_t nisr;
    /* An AlterPartition is in flight, or was refused because our epochs
     * are out of date: no new change is proposed until its answer or the
     * image. */
    bool pending;
    /* Its send failed with a retriable error: not pending, but the same
     * ISR must go again (cn_isr_want_change returns it), and until then
     * its members still count as if pending. */
    bool resend;
    /* The ISR asked for, while pending or resend. */
    int32_t pending_isr[CN_ISR_MAX_REPLICAS];
    int32_t npending;
    /* Every replica but self, in replicas order. */
    struct cn_isr_follower f[CN_ISR_MAX_REPLICAS];
    int32_t nf;
    int64_t hw; /* high watermark; never decreases while leading */
    /* Set by cn_isr_reset, cleared by cn_isr_clear (zeroed: not
     * leading). */
    bool leading;
};

/* Leadership starts, or the image changed this partition while this
 * broker still leads it (replicas, ISR, epochs).  Call it with every image
 * of the partition while leading; a state older than the one held
 * (partition epoch or leader epoch lower, as when the image lags behind an
 * AlterPartition answer) is ignored.
 *
 * Followers' state is kept for ids still replicas: fully within one leader
 * epoch; in a new leader epoch of a broker that kept leading, their LEO
 * and broker epoch stay but their catch-up clock restarts (Kafka's
 * resetReplicaState).  A broker that was not leading (cn_isr_clear, or a
 * zeroed struct) knows nothing of its followers: LEOs unknown.  Followers
 * in the ISR get a grace period: last_caught_up = now_ms, so none is
 * dropped before it had lag_max_ms to fetch; others start "never caught
 * up".  epoch_start_offset is taken in a new leader epoch only (it is the
 * leader's LEO at election, fixed for the epoch).  hw: the partition's
 * high watermark now; while leading, the larger of it and the one held.
 * A newer partition epoch or leader epoch ends any pending change (the
 * controller decided; the answer, if it comes, is stale).
 *
 * Returns 0, or CN_EINVAL (nothing changed) for more than
 * CN_ISR_MAX_REPLICAS replicas, none, duplicates, self not a replica, or
 * an ISR member that is not a replica. */
int cn_isr_reset(struct cn_isr *s, int32_t self, const int32_t *replicas,
                 int32_t nreplicas, const int32_t *isr, int32_t nisr,
                 int32_t leader_epoch, int32_t partition_epoch,
                 int64_t epoch_start_offset, int64_t hw, int64_t now_ms);

/* Leadership ended: the next cn_isr_reset starts afresh, so follower
 * positions learned in an earlier term (which may have been truncated
 * since) never count toward a high watermark. */
void cn_isr_clear(struct cn_isr *s);

/* A follower's fetch, after the leader read its log for it: fetch_offset
 * is the follower's LEO, leader_leo the leader's LEO before the read.
 * Call it only for a fetch answered without a diverging epoch (Kafka
 * records no state for a diverging one).  Updates its LEO and catch-up
 * time (Replica.updateFetchStateOrThrow): caught up now if fetch_offset >=
 * leader_leo, else caught up as of its previous fetch if it has reached
 * the leader LEO of that fetch.  Then call cn_isr_advance_hw and
 * cn_isr_want_change.
 *
 * Returns 0, or the Kafka error to answer the partition with:
 *   UNKNOWN_LEADER_EPOCH - not a replica (or self): Kafka's answer when the
 *     fetch carries a current leader epoch (a reassignment's new replica
 *     may fetch before this leader sees it; it retries).  A fetch without
 *     one (before v9) gets NOT_LEADER_OR_FOLLOWER: the caller maps it.
 *   NOT_LEADER_OR_FOLLOWER - broker_epoch older than one this follower
 *     already fetched with (a fetch from a dead incarnation).  Kafka
 *     compares with the image's broker epoch; the caller, which has the
 *     image, should refuse a fetch whose epoch is below the image's too.
 *   OFFSET_OUT_OF_RANGE - fetch_offset > leader_leo (the read should have
 *     refused it already).
 * Nothing is recorded on an error. */
int16_t cn_isr_on_fetch(struct cn_isr *s, int32_t replica_id,
                        int64_t broker_epoch, int64_t fetch_offset,
                        int64_t leader_leo, int64_t now_ms);

/* Recomputes the high watermark: the minimum of leader_end (the leader's
 * own contribution: its durable end, the synced offset under group
 * commit) and the LEO of every follower in the maximal ISR; a member with
 * unknown LEO holds it where it is.  It only moves forward.  Call it after
 * a fetch, an append or sync, and an ISR change.  Returns true when s->hw
 * advanced. */
bool cn_isr_advance_hw(struct cn_isr *s, int64_t leader_end);

/* As cn_isr_advance_hw, and also waits for followers outside the ISR that
 * are caught up (LEO = leader_leo, or caught up within lag_max_ms) and
 * eligible (image_broker_epochs, as in cn_isr_want_change_img): Kafka's
 * maybeIncrementLeaderHW does, so that a follower catching up under
 * steady produce load is not outrun by the HW forever and can join. */
bool cn_isr_advance_hw_at(struct cn_isr *s, int64_t leader_end,
                          int64_t leader_leo, int64_t now_ms,
                          int64_t lag_max_ms,
                          const int64_t *image_broker_epochs);

/* The ISR change to send now, if any: fills out_isr (the whole new ISR,
 * CN_ISR_MAX_REPLICAS entries) and *out_n and returns true.
 *   - While a change is pending: none.
 *   - After a retriable error: the same ISR again (Kafka resends the same
 *     proposal: the controller may have applied it).
 *   - Shrink first: ISR followers out of sync, i.e. whose LEO differs from
 *     leader_leo and who have not been caught up within lag_max_ms
 *     (replica.lag.time.max.ms), leave.  The leader never does.
 *   - Else expand: followers outside the ISR whose LEO >= the HW and >=
 *     the leader epoch's start offset (else they may lack records
 *     committed in an earlier epoch) join.
 * The caller then sends AlterPartition and calls cn_isr_change_sent.
 * This one checks no broker epochs: cn_isr_want_change_img does. */
bool cn_isr_want_change(const struct cn_isr *s, int64_t now_ms,
                        int64_t lag_max_ms, int64_t leader_leo,
                        int32_t *out_isr, int32_t *out_n);

/* As cn_isr_want_change, and a follower joins only if eligible (Kafka's
 * isReplicaIsrEligible in KRaft).  image_broker_epochs is NULL (no check)
 * or an array parallel to s->replicas (the order given to cn_isr_reset)
 * with the broker epoch the image holds for each replica: a follower is
 * eligible if that is -1 (don't check), or the broker epoch of its last
 * fetch is -1 or equal to it; CN_ISR_INELIGIBLE keeps it out (fenced, in
 * controlled shutdown, not registered). */
bool cn_isr_want_change_img(const struct cn_isr *s, int64_t now_ms,
                            int64_t lag_max_ms, int64_t leader_leo,
                            const int64_t *image_broker_epochs,
                            int32_t *out_isr, int32_t *out_n);

/* The caller sent AlterPartition asking for this ISR (n <=
 * CN_ISR_MAX_REPLICAS): pending from now, and its new members count in
 * the maximal ISR. */
void cn_isr_change_sent(struct cn_isr *s, const int32_t *isr, int32_t n);

/* The AlterPartition answer for the pending change (ignored when none is
 * pending: a newer image already settled it).
 *   0: the committed state is isr/n, partition_epoch; the pending change
 *     ends.  An answer for another leader epoch or an older partition
 *     epoch is stale: the change stays pending until the image comes.
 *   OPERATION_NOT_ATTEMPTED, INELIGIBLE_REPLICA: the controller says it
 *     did not apply it: back to the committed ISR, may propose again.
 *   FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION, NOT_LEADER_OR_FOLLOWER,
 *   UNKNOWN_TOPIC_OR_PARTITION, UNKNOWN_TOPIC_ID, INVALID_REQUEST,
 *   NEW_LEADER_ELECTED: our state is out of date; the change stays
 *     pending (no new proposal, its members still count for the HW, as an
 *     earlier attempt may have been applied) until cn_isr_reset brings
 *     the image.
 *   anything else (REQUEST_TIMED_OUT, NOT_CONTROLLER, ...): retriable;
 *     no longer pending, and cn_isr_want_change returns the same ISR to
 *     send again (a caller whose send fails may report that as
 *     REQUEST_TIMED_OUT). */
void cn_isr_change_done(struct cn_isr *s, int16_t kerr, const int32_t *isr,
                        int32_t n, int32_t leader_epoch,
                        int32_t partition_epoch);

bool cn_isr_contains(const int32_t *ids, int32_t n, int32_t id);

/* Members of the maximal ISR (committed plus pending additions): acks=all
 * answers NOT_ENOUGH_REPLICAS_AFTER_APPEND when below min.insync.replicas
 * (Kafka's checkEnoughReplicasReachOffset). */
int32_t cn_isr_maximal_size(const struct cn_isr *s);

/* Committed ISR smaller than the replicas (Kafka's UnderReplicated). */
bool cn_isr_under_replicated(const struct cn_isr *s);
/* Committed ISR smaller than min_isr: acks=all is refused before the
 * append with NOT_ENOUGH_REPLICAS (Kafka's UnderMinIsr). */
bool cn_isr_below_min(const struct cn_isr *s, int32_t min_isr);

/* A follower's lag in offsets for /metrics: leader_leo minus its LEO
 * (leader_leo when unknown), never negative; -1 when id is no
 * follower. */
int64_t cn_isr_follower_lag(const struct cn_isr *s, int32_t id,
                            int64_t leader_leo);

#endif
