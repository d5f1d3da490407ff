/*
 * ctl.h - the cluster controller, as a state machine.
 *
 * The active controller (the raft leader) decides every change to the
 * cluster's metadata: broker registrations and their fencing, topics and
 * partitions with their replicas, ISRs and leaders, producer-id blocks.
 * It decides from the image (image.h) and proposes records; nothing
 * changes until the records are committed and applied to the image on
 * every node.  The machine owns no handle, timer or file and reads no
 * clock: it takes events (an entry applied, leadership gained or lost, a
 * broker's registration or heartbeat, an admin request, a proposal's
 * outcome, a tick) and returns actions (propose these records as one
 * entry, answer this request, add this broker as a raft standby, tick me
 * at T).  fsm.c carries them out on libraft; tests/unit/test_ctl.c drives
 * it both bare and on libraft's fixture.
 *
 * Rules, as Kafka's QuorumController keeps them (KIP-631):
 *  - At most ONE proposal is in flight.  Every request that needs a
 *    decision waits in a FIFO queue and is decided only when nothing is in
 *    flight, i.e. against an image that already holds every earlier
 *    proposal (applied: CN_CTE_PROPOSED with 0) or knows it failed
 *    (CN_CTE_PROPOSED with an error).  Two proposals can then never
 *    contradict each other (two registrations of one id, two overlapping
 *    producer-id blocks, a topic created twice), at the price of one
 *    commit round trip per decision.  Requests that need no proposal (a
 *    heartbeat of a live broker) are answered when their turn comes.
 *  - A broker's epoch is the offset of its RegisterBrokerRecord; it
 *    registers fenced, and is unfenced (UnfenceBrokerRecord) by a
 *    heartbeat whose metadata offset has reached its registration.  A
 *    broker silent for longer than session_timeout_ms is fenced: one
 *    entry with the PartitionChangeRecords that take it out of ISRs and
 *    elect new leaders (elect.h), then its FenceBrokerRecord.
 *  - Requests are answered only after their records are applied; a
 *    proposal whose outcome is unknown (leadership lost) is answered with
 *    the error fsm.c gives (REQUEST_TIMED_OUT), which clients retry; every
 *    record is safe to see twice.
 *  - ISR changes come from partition leaders (AlterPartition), checked
 *    as Kafka's ReplicationControlManager.alterPartition does; an ISR
 *    equal to the current one is answered without a proposal.
 *  - Controlled shutdown (BrokerHeartbeat want_shut_down, Kafka's
 *    BrokerHeartbeatManager): a live broker that leads partitions is put
 *    in controlled shutdown (BrokerRegistrationChangeRecord) in one entry
 *    with the PartitionChangeRecords that move its leaderships to other
 *    eligible ISR members and take it out of ISRs (never the last member:
 *    such a partition is left without a leader, as elect.h says).  It is
 *    answered should_shut_down once it leads nothing and every active
 *    broker has heartbeated an offset at or past that entry; it is then
 *    fenced.  A broker that leads nothing, or is fenced, may go at once.
 *  - A first leader on an empty image proposes the cluster id and the
 *    finalized features (metadata.version, transaction.version) before
 *    anything else.
 *  - Randomness (the round robin's start, topic ids) comes from the seed in
 *    the config, never from rand().
 *
 * Ownership: an event's strings and arrays are read during cn_ctl_step
 * only; the machine copies what it queues.  Everything an action points to
 * lives in the actions' arena until cn_ctl_actions_reset.
 *
 * Runs on: one thread at a time (the loop); not re-entrant.
 */
#ifndef CN_META_CTL_H
#define CN_META_CTL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/arena.h"
#include "base/bytes.h"
#include "meta/image.h"
#include "meta/records.h"

struct cn_ctl; /* opaque */

struct cn_ctl_config {
    const char *cluster_id;      /* proposed on an empty image; NULL or "": a
                               random one */
    int16_t metadata_version;    /* FeatureLevelRecord at bootstrap */
    int16_t transaction_version; /* FeatureLevelRecord at bootstrap, 0: none */
    int64_t session_timeout_ms;  /* broker.session.timeout.ms */
    int32_t default_partitions;  /* num.partitions, for CreateTopics -1 */
    int16_t default_rf;          /* default.replication.factor */
    int32_t pid_block;           /* producer ids per block (Kafka: 1000) */
    uint64_t seed;               /* the machine's randomness */
};

/* ---- events ---------------------------------------------------------- */

enum cn_ctl_ev_kind {
    CN_CTE_COMMITTED,         /* an entry was applied to the image */
    CN_CTE_LEADER,            /* leading, the image has every earlier entry */
    CN_CTE_UNLEADER,          /* not leading any more */
    CN_CTE_PROPOSED,          /* the outcome of a CN_CTA propose */
    CN_CTE_TICK,              /* time passed */
    CN_CTE_REGISTER,          /* BrokerRegistration */
    CN_CTE_HEARTBEAT,         /* BrokerHeartbeat */
    CN_CTE_CREATE_TOPIC,      /* one topic of CreateTopics */
    CN_CTE_DELETE_TOPIC,      /* one topic of DeleteTopics */
    CN_CTE_CREATE_PARTITIONS, /* one topic of CreatePartitions */
    CN_CTE_ALLOC_PIDS,        /* AllocateProducerIds */
    CN_CTE_ALTER_TOPIC_CONFIGS, /* one topic of (Incremental)AlterConfigs */
    CN_CTE_ALTER_PARTITION,     /* one partition of AlterPartition */
};

/* The most ISR members an AlterPartition event or answer carries (answers
 * are copied by value on their way to the waiter). */
#define CN_CTL_ISR_MAX 32

struct cn_ctl_endpoint {
    struct cn_bytes name; /* listener name */
    struct cn_bytes host;
    uint16_t port;
    int16_t security_protocol;
};

struct cn_ctl_register {
    int32_t broker_id;
    struct cn_bytes cluster_id;
    struct cn_uuid incarnation; /* new at every process start */
    const struct cn_ctl_endpoint *eps;
    size_t neps;
    struct cn_bytes rack; /* null: none */
};

struct cn_ctl_heartbeat {
    int32_t broker_id;
    int64_t broker_epoch;
    int64_t metadata_offset; /* the broker's applied offset */
    bool want_fence;
    bool want_shut_down; /* controlled shutdown (see cn_ctl_answer) */
};

struct cn_ctl_kv {
    struct cn_bytes name;
    struct cn_bytes value;
};

struct cn_ctl_replicas {
    const int32_t *ids; /* partition i's replicas, preferred first */
    int32_t n;
};

struct cn_ctl_create_topic {
    struct cn_bytes name;
    int32_t nparts;                       /* -1: default_partitions */
    int16_t rf;                           /* -1: default_rf */
    const struct cn_ctl_replicas *assign; /* manual assignment, partition
                                             i = assign[i]; NULL: none */
    int32_t nassign;
    const struct cn_ctl_kv *configs;
    size_t nconfigs;
    bool validate_only;
};

struct cn_ctl_delete_topic {
    struct cn_bytes name; /* null: by id */
    struct cn_uuid id;
};

struct cn_ctl_create_partitions {
    struct cn_bytes name;
    int32_t count;                        /* the new total */
    const struct cn_ctl_replicas *assign; /* manual assignment: new
                                             partition (old count + i) =
                                             assign[i]; NULL: the
                                             controller places them */
    int32_t nassign; /* lists in assign (checked against the number of
                        partitions added) */
    bool validate_only;
};

/* The broker computed and validated the topic's whole resulting override
 * set (its config code knows the keys; the controller does not); the
 * controller proposes the difference to the image's. */
struct cn_ctl_alter_configs {
    struct cn_bytes name;
    const struct cn_ctl_kv *configs; /* every override after the change */
    size_t nconfigs;
    bool validate_only;
};

struct cn_ctl_alloc_pids {
    int32_t broker_id;
    int64_t broker_epoch;
};

/* A member of a proposed ISR (AlterPartition v3's BrokerState). */
struct cn_ctl_isr_member {
    int32_t id;
    int64_t broker_epoch; /* -1: not checked (requests before v3) */
};

/*
 * One partition of an AlterPartition request, from its leader.  The
 * request's other partitions are events of their own: Kafka decides each
 * partition on its own (one error each) after one broker epoch check for
 * the whole request, which each event repeats against the same image.
 */
struct cn_ctl_alter_partition {
    int32_t broker_id; /* the requesting leader */
    int64_t broker_epoch;
    struct cn_uuid topic_id;
    int32_t partition;
    int32_t leader_epoch; /* as the leader knows them */
    int32_t partition_epoch;
    const struct cn_ctl_isr_member *isr; /* the ISR it wants */
    int32_t nisr;
};

struct cn_ctl_event {
    enum cn_ctl_ev_kind kind;
    void *token; /* requests: the caller's, echoed in the answer */
    union {
        int64_t offset; /* COMMITTED */
        int64_t term;   /* LEADER */
        struct {
            uint64_t seq;   /* the propose action's */
            int16_t error;  /* 0: applied; else a Kafka code to answer */
            int64_t offset; /* where it was applied, when error is 0 */
        } proposed;
        struct cn_ctl_register reg;
        struct cn_ctl_heartbeat hb;
        struct cn_ctl_create_topic create;
        struct cn_ctl_delete_topic del;
        struct cn_ctl_create_partitions parts;
        struct cn_ctl_alloc_pids pids;
        struct cn_ctl_alter_configs alter;
        struct cn_ctl_alter_partition isr;
    } u;
};

/* ---- actions --------------------------------------------------------- */

struct cn_ctl_answer {
    enum cn_ctl_ev_kind kind; /* the request's */
    void *token;
    int16_t error;       /* Kafka code, 0 */
    const char *message; /* NULL, or Kafka's error message */
    union {
        int64_t broker_epoch; /* REGISTER */
        struct {
            bool fenced;
            bool caught_up;
            bool should_shut_down; /* controlled shutdown is over */
        } hb;                      /* HEARTBEAT */
        struct {
            struct cn_uuid id;
            int32_t nparts;
            int16_t rf;
        } topic; /* CREATE_TOPIC, DELETE_TOPIC (id), CREATE_PARTITIONS */
        struct {
            int64_t start;
            int32_t len;
        } pids; /* ALLOC_PIDS */
        struct {
            int32_t leader;
            int32_t leader_epoch;
            int32_t partition_epoch;
            int32_t isr[CN_CTL_ISR_MAX];
            int32_t nisr;
        } part; /* ALTER_PARTITION: the partition as the image has it */
    } u;
};

/* A registered broker the raft configuration should hold as a standby
 * (fsm.c adds it unless it is already a member). */
struct cn_ctl_standby {
    int32_t id;
    const char *address; /* "host:port" of its first endpoint */
};

/*
 * A proposed RegisterBrokerRecord has broker_epoch -1: the epoch is the
 * offset of its entry (KIP-631), which only the executor knows when it
 * appends (on libraft: raft_last_index + 1 at raft_apply), so the executor
 * writes it in before encoding.  The REGISTER answer carries the epoch the
 * applied record has.
 */
struct cn_ctl_actions {
    struct cn_arena arena; /* what the actions point to */
    bool propose;          /* recs[0..nrecs) as ONE entry */
    uint64_t seq;          /* echoed in CN_CTE_PROPOSED */
    struct cn_mrec *recs;
    size_t nrecs;
    struct cn_ctl_answer *answers; /* heap, grows */
    size_t nanswers, answers_cap;
    struct cn_ctl_standby *standbys; /* heap, grows */
    size_t nstandbys, standbys_cap;
    int64_t timer_mono_ms; /* tick me at this time; -1: no need */
};

void cn_ctl_actions_init(struct cn_ctl_actions *a);
void cn_ctl_actions_reset(struct cn_ctl_actions *a);
void cn_ctl_actions_fini(struct cn_ctl_actions *a);

/* ---- the machine ----------------------------------------------------- */

/* A follower's machine; NULL when out of memory.  cfg is copied. */
struct cn_ctl *cn_ctl_new(const struct cn_ctl_config *cfg);
void cn_ctl_free(struct cn_ctl *c);

/*
 * Feeds one event and appends the actions it causes to acts.  img is the
 * node's image, as applied so far; now_ms is the monotonic clock.
 * Requests fed to a machine that does not lead are answered NOT_CONTROLLER.
 */
void cn_ctl_step(struct cn_ctl *c, const struct cn_image *img, int64_t now_ms,
                 const struct cn_ctl_event *ev, struct cn_ctl_actions *acts);

bool cn_ctl_is_leader(const struct cn_ctl *c);
/* True while a proposal's outcome is awaited. */
bool cn_ctl_in_flight(const struct cn_ctl *c);
/* Requests waiting for their turn. */
size_t cn_ctl_queued(const struct cn_ctl *c);

/*
 * Kafka's rack-unaware assignment (AdminUtils.assignReplicasToBrokers-
 * RackUnaware): partitions [first, first + n) over brokers[0..nb) (sorted
 * ascending), rf replicas each, starting at broker index start_index with
 * replica shift `shift` (both random in Kafka).  out is n * rf ids, row by
 * row.  rf <= nb.
 */
void cn_ctl_assign(const int32_t *brokers, int32_t nb, int32_t first,
                   int32_t n, int32_t rf, int32_t start_index, int32_t shift,
                   int32_t *out);

#endif
