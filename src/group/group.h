/*
 * group.h - the classic consumer-group membership coordinator (JoinGroup,
 * SyncGroup, Heartbeat, LeaveGroup, DescribeGroups, ListGroups,
 * DeleteGroups), as Apache Kafka 4.x runs the classic protocol.
 *
 * A pure state machine: no sockets, files or timers.  Time comes in as
 * now_ms arguments; the caller arms one timer at cn_groups_next_deadline()
 * and calls cn_groups_tick() when it fires.  JoinGroup and SyncGroup may
 * have to wait for other members, so their answers go through callbacks
 * (ops->join_done, ops->sync_done), possibly before cn_groups_join() or
 * cn_groups_sync() returns.  Every waiter handed in is answered exactly
 * once: with its result, or with an error when the member is removed,
 * fenced, re-sends the request, or the coordinator shuts down.
 *
 * Callbacks must not call back into the same struct cn_groups, except
 * cn_groups_stored from ops->store_sync and ops->store_created (a write
 * done at once).  Strings
 * and byte ranges handed to callbacks live only for the call; the caller
 * copies what it keeps.  Strings passed in are copied when kept.
 *
 * Committed offsets are not kept here (see the offsets store); only the
 * member check for OffsetCommit / TxnOffsetCommit is
 * (cn_groups_check_commit).
 *
 * Persistence: group metadata is stored in __consumer_offsets as a
 * GroupMetadata record (key version 2, value version 3, as Kafka 4 writes):
 *
 *   key:   int16 version (2) | string group
 *   value: int16 version (3) | string protocolType | int32 generation |
 *          nullable string protocol | nullable string leader |
 *          int64 currentStateTimestamp | [member: string memberId,
 *          nullable string groupInstanceId, string clientId, string
 *          clientHost, int32 rebalanceTimeout, int32 sessionTimeout,
 *          bytes subscription, bytes assignment]
 *
 * ops->store tells the caller when to write one; a null value (tombstone)
 * removes the group at replay.
 *
 * Runs on: loop (one thread owns a struct cn_groups).
 */
#ifndef CN_GROUP_GROUP_H
#define CN_GROUP_GROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/wr.h"

#define CN_GROUP_KEY_VERSION 2   /* GroupMetadataKey; 0 and 1 are offsets */
#define CN_GROUP_VALUE_VERSION 3 /* GroupMetadataValue version written */

enum cn_group_state {
    CN_GROUP_EMPTY,                /* no members (maybe offsets) */
    CN_GROUP_PREPARING_REBALANCE,  /* collecting JoinGroups */
    CN_GROUP_COMPLETING_REBALANCE, /* waiting for the leader's SyncGroup */
    CN_GROUP_STABLE,               /* assignment handed out */
    CN_GROUP_DEAD,                 /* does not exist (never stored) */
};

struct cn_groups_config {
    int32_t min_session_timeout_ms;     /* group.min.session.timeout.ms */
    int32_t max_session_timeout_ms;     /* group.max.session.timeout.ms */
    int32_t initial_rebalance_delay_ms; /* group.initial.rebalance.delay.ms */
    int32_t max_size;                   /* group.max.size, members */
    int32_t new_member_join_timeout_ms; /* a new member's JoinGroup is
                                           dropped after this, ms (Kafka:
                                           5 minutes, not configurable) */
    uint64_t seed;                      /* member id randomness; 0 = from
                                           the clock */
};

/* One member as the group's leader sees it in its JoinGroup answer. */
struct cn_join_member {
    const char *member_id;
    const char *instance_id; /* NULL when dynamic */
    const uint8_t *metadata; /* for the chosen protocol */
    size_t metadata_len;     /* bytes */
};

/* What a JoinGroup request gets back (JoinGroupResponse's fields). */
struct cn_join_result {
    int16_t error;                        /* KAFKA_* */
    int32_t generation;                   /* -1 on error */
    const char *protocol_type;            /* NULL when none */
    const char *protocol_name;            /* NULL when none */
    const char *leader;                   /* "" when none */
    const char *member_id;                /* the member's id; on
                                             MEMBER_ID_REQUIRED the one to
                                             rejoin with */
    bool skip_assignment;                 /* KIP-814: a static leader
                                             rejoined a Stable group and
                                             must not reassign */
    const struct cn_join_member *members; /* leader only, else NULL */
    size_t nmembers;
};

/* What a SyncGroup request gets back. */
struct cn_sync_result {
    int16_t error;             /* KAFKA_* */
    const char *protocol_type; /* NULL on error */
    const char *protocol_name; /* NULL on error */
    const uint8_t *assignment; /* the member's assignment (may be empty) */
    size_t assignment_len;     /* bytes */
};

struct cn_group;

struct cn_groups_ops {
    /* A JoinGroup answer for the waiter given to cn_groups_join(). */
    void (*join_done)(void *waiter, const struct cn_join_result *r);
    /* A SyncGroup answer for the waiter given to cn_groups_sync(). */
    void (*sync_done)(void *waiter, const struct cn_sync_result *r);
    /*
     * The group's stored metadata changed: write
     * cn_group_metadata_record(g) to __consumer_offsets.  Called when the
     * group is about to become Stable (with the leader's assignment
     * already set), when a static member is replaced in a Stable group,
     * when a rebalance ends with no members (Empty) and when JoinGroup
     * creates a group (unless store_created).  A notification only: the state machine goes on
     * at once.  May be NULL.
     */
    void (*store)(void *arg, const struct cn_group *g);
    /*
     * The leader's assignment, to be made durable before any member hears
     * of it (Kafka answers SyncGroup from the append's callback): the
     * group stays CompletingRebalance until the caller reports the write
     * with cn_groups_stored(token).  NULL: store is called instead and
     * the group goes Stable at once.
     */
    void (*store_sync)(void *arg, const struct cn_group *g, uint64_t token);
    void *arg; /* passed to the callbacks */
    /*
     * JoinGroup created g: its first record, whose outcome the caller
     * reports with cn_groups_stored(token).  If it could not be made
     * durable the group is removed again, as Kafka reverts the creation,
     * and members still waiting in it get the error.  NULL: store is
     * called instead.
     */
    void (*store_created)(void *arg, const struct cn_group *g, uint64_t token);
};

struct cn_join_protocol {
    const char *name;
    const uint8_t *metadata; /* may be NULL when metadata_len is 0 */
    size_t metadata_len;     /* bytes */
};

/* A decoded JoinGroup request; every string NUL-terminated. */
struct cn_join_req {
    const char *group_id;
    const char *member_id;     /* "" (or NULL) for a new member */
    const char *instance_id;   /* group.instance.id, NULL when dynamic */
    const char *client_id;     /* request header client id */
    const char *client_host;   /* peer address, e.g. "/127.0.0.1" */
    const char *protocol_type; /* "consumer", "connect", ... */
    int32_t session_timeout_ms;
    int32_t rebalance_timeout_ms; /* < 0 (v0): the session timeout */
    int16_t version;              /* request version (4+ requires a known
                                     member id, KIP-394) */
    const struct cn_join_protocol *protocols; /* in preference order */
    size_t nprotocols;
};

struct cn_sync_assignment {
    const char *member_id;
    const uint8_t *assignment; /* may be NULL when len is 0 */
    size_t len;                /* bytes */
};

/* A decoded SyncGroup request. */
struct cn_sync_req {
    const char *group_id;
    const char *member_id;
    const char *instance_id;   /* NULL when dynamic */
    int32_t generation;
    const char *protocol_type; /* v5+, NULL when absent */
    const char *protocol_name; /* v5+, NULL when absent */
    const struct cn_sync_assignment *assignments; /* leader only */
    size_t nassignments;
};

/* One entry of a LeaveGroup request; error is filled in. */
struct cn_leave_member {
    const char *member_id;   /* "" to name a static member by instance */
    const char *instance_id; /* NULL when dynamic (always for v0-2) */
    int16_t error;           /* out: KAFKA_* for this member */
};

/* A member as DescribeGroups shows it. */
struct cn_member_info {
    const char *member_id;
    const char *instance_id; /* NULL when dynamic */
    const char *client_id;
    const char *client_host;
    int32_t session_timeout_ms;
    int32_t rebalance_timeout_ms;
    const uint8_t *metadata;   /* for the chosen protocol; NULL if none */
    size_t metadata_len;       /* bytes */
    const uint8_t *assignment; /* NULL if none */
    size_t assignment_len;     /* bytes */
};

/* Kafka's defaults (6 s, 30 min, 3 s, INT32_MAX, 5 min, seed 0). */
void cn_groups_config_default(struct cn_groups_config *cfg);

/* NULL on allocation failure.  cfg and ops are copied. */
struct cn_groups *cn_groups_new(const struct cn_groups_config *cfg,
                                const struct cn_groups_ops *ops);
/* Shuts down (answering waiters) if not done yet, then frees all. */
void cn_groups_free(struct cn_groups *gs);
/*
 * Answers every waiting JoinGroup and SyncGroup with
 * COORDINATOR_NOT_AVAILABLE; from then on every call answers that too.
 * Idempotent.
 */
void cn_groups_shutdown(struct cn_groups *gs);

/*
 * Forgets every group for which match(arg, group_id) is true, as a broker
 * does for a __consumer_offsets partition it no longer leads (the log
 * keeps the groups; the new leader loads them): members waiting in a
 * JoinGroup or SyncGroup get error (NOT_COORDINATOR, so the clients find
 * the coordinator again) and pending store writes are then ignored.
 * match must not call into gs.  Returns how many groups went.
 */
size_t cn_groups_unload(struct cn_groups *gs,
                        bool (*match)(void *arg, const char *group_id),
                        void *arg, int16_t error);

/*
 * JoinGroup.  waiter is answered through ops->join_done exactly once,
 * maybe before this returns (errors, MEMBER_ID_REQUIRED, a follower
 * rejoining a Stable group) or later (when the join phase completes).
 */
void cn_groups_join(struct cn_groups *gs, const struct cn_join_req *rq,
                    void *waiter, int64_t now_ms);
/* SyncGroup; waiter is answered through ops->sync_done exactly once. */
void cn_groups_sync(struct cn_groups *gs, const struct cn_sync_req *rq,
                    void *waiter, int64_t now_ms);
/* Heartbeat: KAFKA_NONE (session extended) or the error to send. */
int16_t cn_groups_heartbeat(struct cn_groups *gs, const char *group_id,
                            const char *member_id, const char *instance_id,
                            int32_t generation, int64_t now_ms);
/*
 * LeaveGroup for n members (v0-2: one member, instance_id NULL; the
 * caller then sends members[0].error as the top-level error).  Fills each
 * members[i].error; returns the top-level error.  The group rebalances
 * once after all removals.
 */
int16_t cn_groups_leave(struct cn_groups *gs, const char *group_id,
                        struct cn_leave_member *members, size_t n,
                        int64_t now_ms);

/*
 * The member check before an OffsetCommit (transactional false) or
 * TxnOffsetCommit (true) is accepted, as Kafka 4's
 * ClassicGroup.validateOffsetCommit: generation < 0 from outside the
 * group is allowed while the group is Empty (a missing group is then
 * created Empty, a "simple" group); members need the right id, instance
 * and generation; a non-transactional commit during CompletingRebalance
 * gets REBALANCE_IN_PROGRESS.  A missing group with generation >= 0 gets
 * ILLEGAL_GENERATION (OffsetCommit v9+ sends GROUP_ID_NOT_FOUND instead:
 * the caller maps).  Success extends the member's session.
 */
int16_t cn_groups_check_commit(struct cn_groups *gs, const char *group_id,
                               int32_t generation, const char *member_id,
                               const char *instance_id, bool transactional,
                               int64_t now_ms);
/*
 * Creates an Empty group if none exists (offset records replayed for a
 * group with no metadata record, as Kafka does).  0 or CN_EINVAL (empty
 * id).
 */
int cn_groups_touch(struct cn_groups *gs, const char *group_id,
                    int64_t now_ms);

/*
 * DeleteGroups for one group: KAFKA_NONE (removed from memory; the caller
 * then writes cn_group_tombstone_key() with a null value and deletes the
 * group's offsets), NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND or
 * INVALID_GROUP_ID.
 */
int16_t cn_groups_delete(struct cn_groups *gs, const char *group_id);

/* The store_sync write `token` of group_id finished with error (KAFKA_*,
 * already as SyncGroup answers it).  On success the group goes Stable and
 * the waiting members get their assignments; on an error they get the
 * error and the group rebalances.  Ignored when the group has moved on
 * (another generation, or the leader sent its SyncGroup again). */
void cn_groups_stored(struct cn_groups *gs, const char *group_id,
                      uint64_t token, int16_t error, int64_t now_ms);
/* Expires sessions, join and sync phases due at now_ms. */
void cn_groups_tick(struct cn_groups *gs, int64_t now_ms);
/* The earliest deadline pending, or INT64_MAX when none.  O(members). */
int64_t cn_groups_next_deadline(const struct cn_groups *gs);

/* Lookups; the returned group lives until the next mutating call. */
const struct cn_group *cn_groups_find(const struct cn_groups *gs,
                                      const char *group_id);
bool cn_groups_exists(const struct cn_groups *gs, const char *group_id);
/* CN_GROUP_DEAD when the group does not exist. */
enum cn_group_state cn_groups_state(const struct cn_groups *gs,
                                    const char *group_id);
/* Groups in creation order: pass NULL for the first; NULL at the end. */
const struct cn_group *cn_groups_next(const struct cn_groups *gs,
                                      const struct cn_group *prev);
size_t cn_groups_count(const struct cn_groups *gs);

/* "Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead". */
const char *cn_group_state_name(enum cn_group_state s);
const char *cn_group_id(const struct cn_group *g);
enum cn_group_state cn_group_state(const struct cn_group *g);
int32_t cn_group_generation(const struct cn_group *g);
/* "" when the group has none (DescribeGroups and ListGroups send ""). */
const char *cn_group_protocol_type(const struct cn_group *g);
/* The chosen protocol, NULL when none (outside a generation). */
const char *cn_group_protocol(const struct cn_group *g);
/* The leader's member id, NULL when none. */
const char *cn_group_leader(const struct cn_group *g);
/* "classic": ListGroups v5 GroupType. */
const char *cn_group_type(const struct cn_group *g);
size_t cn_group_nmembers(const struct cn_group *g);
/* Member i (0 <= i < nmembers) with metadata and assignment as held. */
void cn_group_member(const struct cn_group *g, size_t i,
                     struct cn_member_info *out);
/* Member i as DescribeGroups sends it: metadata and assignment only
 * when the group is Stable, else empty (Kafka). */
void cn_group_describe_member(const struct cn_group *g, size_t i,
                              struct cn_member_info *out);
/*
 * ListGroups filters: true when the group's state name matches one of
 * states (case-insensitive, trimmed; v4+) and its type one of types
 * (case-insensitive; v5+).  An empty filter matches all.
 */
bool cn_group_list_match(const struct cn_group *g,
                         const char *const *states, size_t nstates,
                         const char *const *types, size_t ntypes);

/*
 * The GroupMetadata record for g: key and value appended to the writers
 * (both with their int16 version prefix).  0 or CN_ENOMEM.
 */
int cn_group_metadata_record(const struct cn_group *g, struct cn_wr *key,
                             struct cn_wr *value);
/* The key of a deleted group's tombstone (its value is null). */
int cn_group_tombstone_key(const char *group_id, struct cn_wr *key);
/*
 * Replays one __consumer_offsets record at start-up.  Offset records (key
 * version 0/1) and KIP-848 records (3+) are skipped with 0.  A
 * GroupMetadata record restores the group (Empty without members, else
 * Stable with sessions restarted at now_ms); value NULL (tombstone)
 * removes it.  0, CN_ECORRUPT or CN_ENOMEM.  Allocation failure
 * elsewhere in this module aborts (see group.c).
 */
int cn_groups_load_record(struct cn_groups *gs, const uint8_t *key,
                          size_t key_len, const uint8_t *value,
                          size_t value_len, int64_t now_ms);

#endif
