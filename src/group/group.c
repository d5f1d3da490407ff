/*
 * group.c - classic consumer-group membership, after Kafka 4.x's
 * GroupMetadataManager and ClassicGroup (classic protocol only): the
 * rebalance state machine, SyncGroup, Heartbeat, LeaveGroup, the
 * offset-commit check, DeleteGroups and the timers.  JoinGroup is in
 * group_join.c, the member records in group_member.c.
 *
 * Timers are deadlines on the group (join phase, sync phase) and on each
 * member (session); cn_groups_tick() fires the due ones in deadline order.
 *
 * Allocation failure inside the state machine aborts: a half-applied
 * transition would leave waiters unanswered, which is worse than a crash
 * the supervisor restarts (Redis makes the same call for its in-memory
 * state).
 */
#include "group/group_int.h"

#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/say.h"
#include "proto/kerr.h"

/* ---------------------------------------------------------------------
 * State machine
 */

static void transition(struct cn_group *g, enum cn_group_state to,
                       int64_t now_ms)
{
    g->prev_state = g->state;
    g->state = to;
    g->state_ts_ms = now_ms;
}

void group_store(struct cn_groups *gs, const struct cn_group *g)
{
    if (gs->ops.store)
        gs->ops.store(gs->ops.arg, g);
}

void group_append_member(struct cn_group *g, struct member *m)
{
    if (g->nmembers == g->members_cap) {
        g->members_cap = g->members_cap ? 2 * g->members_cap : 4;
        g->members =
            xrealloc(g->members, g->members_cap * sizeof *g->members);
    }
    g->members[g->nmembers++] = m;
    if (!g->leader)
        g->leader = m;
}

/*
 * Removes m from g, answering its waiters with `error` (Kafka answers a
 * waiting JoinGroup with UNKNOWN_MEMBER_ID so a live client rejoins; we
 * answer a waiting SyncGroup the same way rather than leave it hanging).
 * A leaving leader is replaced by the first remaining member.
 */
void group_remove_member(struct cn_groups *gs, struct cn_group *g,
                         struct member *m, int16_t error)
{
    size_t i;

    group_member_join_error(gs, m, error, "");
    group_member_sync_error(gs, m, error);
    for (i = 0; i < g->nmembers; i++)
        if (g->members[i] == m)
            break;
    memmove(&g->members[i], &g->members[i + 1],
            (g->nmembers - i - 1) * sizeof *g->members);
    g->nmembers--;
    if (g->leader == m)
        g->leader = g->nmembers ? g->members[0] : NULL;
    group_free_member(m);
}

static void complete_join(struct cn_groups *gs, struct cn_group *g,
                          int64_t now_ms);

/* Members waiting in SyncGroup get `error`; all assignments are dropped. */
static void reset_assignments(struct cn_groups *gs, struct cn_group *g,
                              int16_t error)
{
    size_t i;
    for (i = 0; i < g->nmembers; i++) {
        group_set_assignment(g->members[i], NULL, 0);
        group_member_sync_error(gs, g->members[i], error);
    }
}

static void clear_pending_sync(struct cn_group *g)
{
    size_t i;
    for (i = 0; i < g->nmembers; i++)
        g->members[i]->pending_sync = false;
    g->sync_deadline_ms = NEVER;
}

void group_maybe_complete_join_phase(struct cn_groups *gs,
                                     struct cn_group *g, int64_t now_ms)
{
    /* The initial delayed join of a group that was Empty runs its full
     * delay even when everyone is in: more members are expected. */
    if (g->state == CN_GROUP_PREPARING_REBALANCE && group_all_joined(g) &&
        g->prev_state != CN_GROUP_EMPTY)
        complete_join(gs, g, now_ms);
}

void group_prepare_rebalance(struct cn_groups *gs, struct cn_group *g,
                             int64_t now_ms, const char *reason)
{
    bool initial = g->state == CN_GROUP_EMPTY;
    int32_t rt = group_rebalance_timeout(g);

    if (g->state == CN_GROUP_COMPLETING_REBALANCE)
        reset_assignments(gs, g, KAFKA_REBALANCE_IN_PROGRESS);
    clear_pending_sync(g);
    CN_INFO("group %s: preparing to rebalance (generation %d): %s", g->id,
            g->generation, reason);
    if (initial) {
        /* KIP-134: give more consumers time to arrive before the first
         * assignment; each arrival extends it, up to the rebalance
         * timeout. */
        g->join_kind = JOIN_INITIAL;
        g->delay_ms = gs->cfg.initial_rebalance_delay_ms;
        g->remaining_ms = rt - g->delay_ms > 0 ? rt - g->delay_ms : 0;
        g->new_member_added = false;
        g->join_deadline_ms = after(now_ms, g->delay_ms);
    }
    transition(g, CN_GROUP_PREPARING_REBALANCE, now_ms);
    if (!initial) {
        g->join_kind = JOIN_NORMAL;
        g->join_deadline_ms = after(now_ms, rt);
        group_maybe_complete_join_phase(gs, g, now_ms);
    }
}

void group_maybe_prepare_or_complete(struct cn_groups *gs,
                                     struct cn_group *g, int64_t now_ms,
                                     const char *reason)
{
    if (g->state == CN_GROUP_STABLE ||
        g->state == CN_GROUP_COMPLETING_REBALANCE ||
        g->state == CN_GROUP_EMPTY)
        group_prepare_rebalance(gs, g, now_ms, reason);
    else
        group_maybe_complete_join_phase(gs, g, now_ms);
}

/* Kafka's maybeElectNewJoinedLeader: keep a leader that rejoined, else
 * take any member that did. */
static bool elect_joined_leader(struct cn_group *g)
{
    size_t i;
    if (!g->leader)
        return false;
    if (g->leader->awaiting_join)
        return true;
    for (i = 0; i < g->nmembers; i++) {
        if (g->members[i]->awaiting_join) {
            g->leader = g->members[i];
            return true;
        }
    }
    return false;
}

static void complete_join(struct cn_groups *gs, struct cn_group *g,
                          int64_t now_ms)
{
    size_t i;

    if (g->state != CN_GROUP_PREPARING_REBALANCE)
        return;
    /* Dynamic members that did not rejoin in time are out; static ones
     * stay until their session expires. */
    for (i = g->nmembers; i-- > 0;) {
        struct member *m = g->members[i];
        if (!m->awaiting_join && !m->instance_id) {
            CN_INFO("group %s: member %s did not rejoin; removed", g->id,
                    m->id);
            group_remove_member(gs, g, m, KAFKA_UNKNOWN_MEMBER_ID);
        }
    }
    if (!elect_joined_leader(g) && g->nmembers) {
        /* Only static members that have not rejoined are left: wait for
         * them or for their sessions to expire. */
        g->join_kind = JOIN_NORMAL;
        g->join_deadline_ms = after(now_ms, group_rebalance_timeout(g));
        return;
    }
    g->join_kind = JOIN_NONE;
    g->join_deadline_ms = NEVER;
    g->new_member_added = false;
    g->generation++;
    free(g->protocol);
    g->protocol = NULL;
    clear_pending_sync(g);
    if (!g->nmembers) {
        transition(g, CN_GROUP_EMPTY, now_ms);
        CN_INFO("group %s: generation %d is empty", g->id, g->generation);
        group_store(gs, g);
        return;
    }
    g->protocol = xstrdup(group_select_protocol(g));
    transition(g, CN_GROUP_COMPLETING_REBALANCE, now_ms);
    CN_INFO("group %s: generation %d with %zu members, protocol %s", g->id,
            g->generation, g->nmembers, or_empty(g->protocol));
    for (i = 0; i < g->nmembers; i++) {
        struct member *m = g->members[i];
        group_member_join_current(gs, g, m, false);
        m->deadline_ms = after(now_ms, m->session_timeout_ms);
        m->is_new = false;
        m->pending_sync = true;
    }
    g->sync_deadline_ms = after(now_ms, group_rebalance_timeout(g));
}

/* A member went away on its own (session expiry): Kafka's
 * removeMemberAndUpdateClassicGroup. */
static void remove_and_update(struct cn_groups *gs, struct cn_group *g,
                              struct member *m, int64_t now_ms)
{
    group_remove_member(gs, g, m, KAFKA_UNKNOWN_MEMBER_ID);
    if (g->state == CN_GROUP_STABLE ||
        g->state == CN_GROUP_COMPLETING_REBALANCE)
        group_maybe_prepare_or_complete(gs, g, now_ms, "member expired");
    else if (g->state == CN_GROUP_PREPARING_REBALANCE && group_all_joined(g))
        complete_join(gs, g, now_ms);
}

/* ---------------------------------------------------------------------
 * Public API
 */

static bool protocol_inconsistent(const char *req, const char *have)
{
    return req && have && strcmp(req, have) != 0;
}

/* Answers waiter with m's assignment; m's session starts again. */
static void sync_answer(struct cn_groups *gs, const struct cn_group *g,
                        struct member *m, void *waiter, int64_t now_ms)
{
    struct cn_sync_result r = {
        .error = KAFKA_NONE,
        .protocol_type = g->protocol_type,
        .protocol_name = g->protocol,
        .assignment = m->assignment,
        .assignment_len = m->assignment_len,
    };
    m->deadline_ms = after(now_ms, m->session_timeout_ms);
    gs->ops.sync_done(waiter, &r);
}

/* The leader's assignment is durable (or needs not be): Stable, and every
 * member waiting gets its part. */
static void complete_sync(struct cn_groups *gs, struct cn_group *g,
                          int64_t now_ms)
{
    g->store_token = 0;
    transition(g, CN_GROUP_STABLE, now_ms);
    CN_INFO("group %s: stable at generation %d", g->id, g->generation);
    for (size_t i = 0; i < g->nmembers; i++) {
        struct member *o = g->members[i];
        void *w = o->sync_waiter;
        if (!o->awaiting_sync)
            continue;
        o->awaiting_sync = false;
        o->sync_waiter = NULL;
        sync_answer(gs, g, o, w, now_ms);
    }
}

/* The creating JoinGroup's write ended.  Failed, and nothing of the group
 * written since: it goes, as in Kafka, whose creation is undone with the
 * write. */
static void create_stored(struct cn_groups *gs, struct cn_group *g,
                          int16_t error)
{
    g->create_token = 0;
    if (!error || g->generation != 0 || g->store_token)
        return;
    CN_WARN("group %s: cannot store its creation (error %d); removed", g->id,
            error);
    group_clear_members(gs, g, error);
    group_destroy(gs, g);
}

void cn_groups_stored(struct cn_groups *gs, const char *group_id,
                      uint64_t token, int16_t error, int64_t now_ms)
{
    struct cn_group *g = gs->shut ? NULL : group_lookup(gs, group_id);
    if (g && token && g->create_token == token) {
        create_stored(gs, g, error);
        return;
    }
    if (!g || !token || g->store_token != token ||
        g->store_generation != g->generation ||
        g->state != CN_GROUP_COMPLETING_REBALANCE)
        return;
    if (!error) {
        complete_sync(gs, g, now_ms);
        return;
    }
    g->store_token = 0;
    CN_WARN("group %s: cannot store the assignment of generation %d (error "
            "%d); rebalancing",
            g->id, g->generation, error);
    reset_assignments(gs, g, error);
    group_prepare_rebalance(gs, g, now_ms,
                            "error when storing group assignment during "
                            "SyncGroup");
}

void cn_groups_sync(struct cn_groups *gs, const struct cn_sync_req *rq,
                    void *waiter, int64_t now_ms)
{
    const char *mid = or_empty(rq->member_id);
    struct cn_group *g;
    struct member *m;
    int16_t err;
    size_t i, j;

    if (gs->shut) {
        group_sync_error(gs, waiter, KAFKA_COORDINATOR_NOT_AVAILABLE);
        return;
    }
    if (!rq->group_id || !*rq->group_id) {
        group_sync_error(gs, waiter, KAFKA_INVALID_GROUP_ID);
        return;
    }
    g = group_lookup(gs, rq->group_id);
    if (!g) {
        group_sync_error(gs, waiter, KAFKA_UNKNOWN_MEMBER_ID);
        return;
    }
    err = group_validate_member(g, mid, rq->instance_id);
    if (!err && rq->generation != g->generation)
        err = KAFKA_ILLEGAL_GENERATION;
    if (!err && (protocol_inconsistent(rq->protocol_type, g->protocol_type) ||
                 protocol_inconsistent(rq->protocol_name, g->protocol)))
        err = KAFKA_INCONSISTENT_GROUP_PROTOCOL;
    if (err) {
        group_sync_error(gs, waiter, err);
        return;
    }
    m = group_find_member(g, mid);
    switch (g->state) {
    case CN_GROUP_PREPARING_REBALANCE:
        group_sync_error(gs, waiter, KAFKA_REBALANCE_IN_PROGRESS);
        break;
    case CN_GROUP_COMPLETING_REBALANCE:
        group_member_sync_error(gs, m, KAFKA_REBALANCE_IN_PROGRESS);
        m->awaiting_sync = true;
        m->sync_waiter = waiter;
        m->pending_sync = false;
        if (g->leader != m)
            break;
        /* The leader's map decides; members it left out get nothing.
         * A member named twice gets the last entry, as Kafka's map. */
        for (i = 0; i < g->nmembers; i++) {
            struct member *o = g->members[i];
            const struct cn_sync_assignment *a = NULL;
            for (j = 0; j < rq->nassignments; j++)
                if (str_eq(rq->assignments[j].member_id, o->id))
                    a = &rq->assignments[j];
            if (a)
                group_set_assignment(o, a->assignment, a->len);
            else
                group_set_assignment(o, NULL, 0);
        }
        if (gs->ops.store_sync) {
            g->store_token = ++gs->tokens;
            g->store_generation = g->generation;
            gs->ops.store_sync(gs->ops.arg, g, g->store_token);
            break;
        }
        group_store(gs, g);
        complete_sync(gs, g, now_ms);
        break;
    case CN_GROUP_STABLE:
        m->pending_sync = false;
        sync_answer(gs, g, m, waiter, now_ms);
        break;
    default:
        group_sync_error(gs, waiter, KAFKA_UNKNOWN_MEMBER_ID);
        break;
    }
}

int16_t cn_groups_heartbeat(struct cn_groups *gs, const char *group_id,
                            const char *member_id, const char *instance_id,
                            int32_t generation, int64_t now_ms)
{
    struct cn_group *g;
    struct member *m;
    int16_t err;

    if (gs->shut)
        return KAFKA_COORDINATOR_NOT_AVAILABLE;
    if (!group_id || !*group_id)
        return KAFKA_INVALID_GROUP_ID;
    g = group_lookup(gs, group_id);
    if (!g)
        return KAFKA_UNKNOWN_MEMBER_ID;
    err = group_validate_member(g, member_id, instance_id);
    if (err)
        return err;
    if (generation != g->generation)
        return KAFKA_ILLEGAL_GENERATION;
    m = group_find_member(g, member_id);
    switch (g->state) {
    case CN_GROUP_PREPARING_REBALANCE:
        m->deadline_ms = after(now_ms, m->session_timeout_ms);
        return KAFKA_REBALANCE_IN_PROGRESS;
    case CN_GROUP_COMPLETING_REBALANCE:
    case CN_GROUP_STABLE:
        m->deadline_ms = after(now_ms, m->session_timeout_ms);
        return KAFKA_NONE;
    default:
        return KAFKA_UNKNOWN_MEMBER_ID;
    }
}

int16_t cn_groups_leave(struct cn_groups *gs, const char *group_id,
                        struct cn_leave_member *members, size_t n,
                        int64_t now_ms)
{
    struct cn_group *g;
    size_t i, at, removed = 0;

    if (gs->shut)
        return KAFKA_COORDINATOR_NOT_AVAILABLE;
    if (!group_id || !*group_id)
        return KAFKA_INVALID_GROUP_ID;
    g = group_lookup(gs, group_id);
    for (i = 0; i < n; i++) {
        const char *mid = or_empty(members[i].member_id);
        const char *inst = members[i].instance_id;
        struct member *m;

        members[i].error = KAFKA_UNKNOWN_MEMBER_ID;
        if (!g)
            continue;
        if (!*mid) {
            /* Admin removal of a static member by instance id alone. */
            m = group_find_static(g, inst);
            if (!m)
                continue;
        } else if (group_find_pending(g, mid, &at)) {
            group_drop_pending(g, at);
            members[i].error = KAFKA_NONE;
            removed++;
            continue;
        } else {
            members[i].error = group_validate_member(g, mid, inst);
            if (members[i].error)
                continue;
            m = group_find_member(g, mid);
        }
        CN_INFO("group %s: member %s left", g->id, m->id);
        group_remove_member(gs, g, m, KAFKA_UNKNOWN_MEMBER_ID);
        members[i].error = KAFKA_NONE;
        removed++;
    }
    if (!removed)
        return KAFKA_NONE;
    if (g->state == CN_GROUP_STABLE ||
        g->state == CN_GROUP_COMPLETING_REBALANCE)
        group_maybe_prepare_or_complete(gs, g, now_ms, "members left");
    else if (g->state == CN_GROUP_PREPARING_REBALANCE)
        group_maybe_complete_join_phase(gs, g, now_ms);
    return KAFKA_NONE;
}

int16_t cn_groups_check_commit(struct cn_groups *gs, const char *group_id,
                               int32_t generation, const char *member_id,
                               const char *instance_id, bool transactional,
                               int64_t now_ms)
{
    const char *mid = or_empty(member_id);
    struct cn_group *g;
    struct member *m;
    int16_t err;

    if (gs->shut)
        return KAFKA_COORDINATOR_NOT_AVAILABLE;
    if (!group_id || !*group_id)
        return KAFKA_INVALID_GROUP_ID;
    g = group_lookup(gs, group_id);
    if (!g) {
        if (generation >= 0)
            return KAFKA_ILLEGAL_GENERATION;
        /* An admin client or a consumer with manual assignment: Kafka
         * creates a "simple" group for its offsets. */
        group_create(gs, group_id, now_ms);
        return KAFKA_NONE;
    }
    if (generation < 0 && g->state == CN_GROUP_EMPTY)
        return KAFKA_NONE;
    if (generation >= 0 || *mid || instance_id) {
        err = group_validate_member(g, mid, instance_id);
        if (err)
            return err;
        if (generation != g->generation)
            return KAFKA_ILLEGAL_GENERATION;
    } else if (!transactional && g->state != CN_GROUP_EMPTY) {
        /* No id and no generation (OffsetCommit v0): only while the
         * group has no members.  Old TxnOffsetCommit versions carry
         * neither, so they pass. */
        return KAFKA_UNKNOWN_MEMBER_ID;
    }
    if (!transactional && g->state == CN_GROUP_COMPLETING_REBALANCE)
        return KAFKA_REBALANCE_IN_PROGRESS;
    m = group_find_member(g, mid);
    if (m)
        m->deadline_ms = after(now_ms, m->session_timeout_ms);
    return KAFKA_NONE;
}

int cn_groups_touch(struct cn_groups *gs, const char *group_id,
                    int64_t now_ms)
{
    if (!group_id || !*group_id)
        return CN_EINVAL;
    if (!group_lookup(gs, group_id))
        group_create(gs, group_id, now_ms);
    return 0;
}

int16_t cn_groups_delete(struct cn_groups *gs, const char *group_id)
{
    struct cn_group *g;

    if (gs->shut)
        return KAFKA_COORDINATOR_NOT_AVAILABLE;
    if (!group_id || !*group_id)
        return KAFKA_INVALID_GROUP_ID;
    g = group_lookup(gs, group_id);
    if (!g)
        return KAFKA_GROUP_ID_NOT_FOUND;
    if (g->state != CN_GROUP_EMPTY)
        return KAFKA_NON_EMPTY_GROUP;
    CN_INFO("group %s: deleted", g->id);
    group_destroy(gs, g);
    return KAFKA_NONE;
}

/* ---------------------------------------------------------------------
 * Timers
 */

enum due_kind { DUE_NONE, DUE_JOIN, DUE_SYNC, DUE_MEMBER, DUE_PENDING };

/* The earliest deadline of g; *kind and *at say whose. */
static int64_t group_deadline(const struct cn_group *g, enum due_kind *kind,
                              size_t *at)
{
    int64_t t = NEVER;
    size_t i;

    *kind = DUE_NONE;
    if (g->join_deadline_ms < t) {
        t = g->join_deadline_ms;
        *kind = DUE_JOIN;
    }
    if (g->sync_deadline_ms < t) {
        t = g->sync_deadline_ms;
        *kind = DUE_SYNC;
    }
    for (i = 0; i < g->nmembers; i++) {
        if (g->members[i]->deadline_ms < t) {
            t = g->members[i]->deadline_ms;
            *kind = DUE_MEMBER;
            *at = i;
        }
    }
    for (i = 0; i < g->npending; i++) {
        if (g->pending[i].deadline_ms < t) {
            t = g->pending[i].deadline_ms;
            *kind = DUE_PENDING;
            *at = i;
        }
    }
    return t;
}

static void join_due(struct cn_groups *gs, struct cn_group *g,
                     int64_t now_ms)
{
    g->join_deadline_ms = NEVER;
    if (g->join_kind == JOIN_INITIAL && g->new_member_added &&
        g->remaining_ms > 0) {
        /* Someone new arrived during this step: wait another step. */
        int32_t delay = gs->cfg.initial_rebalance_delay_ms;
        if (delay > g->remaining_ms)
            delay = g->remaining_ms;
        g->remaining_ms = g->remaining_ms - g->delay_ms > 0
                              ? g->remaining_ms - g->delay_ms
                              : 0;
        g->delay_ms = delay;
        g->new_member_added = false;
        g->join_deadline_ms = after(now_ms, delay);
        return;
    }
    complete_join(gs, g, now_ms);
}

/* Members that got their JoinGroup answer but never sent SyncGroup. */
static void sync_due(struct cn_groups *gs, struct cn_group *g,
                     int64_t now_ms)
{
    size_t i;
    bool any = false;

    g->sync_deadline_ms = NEVER;
    if (g->state != CN_GROUP_COMPLETING_REBALANCE &&
        g->state != CN_GROUP_STABLE)
        return;
    for (i = g->nmembers; i-- > 0;) {
        if (g->members[i]->pending_sync) {
            CN_INFO("group %s: member %s never synced; removed", g->id,
                    g->members[i]->id);
            group_remove_member(gs, g, g->members[i], KAFKA_UNKNOWN_MEMBER_ID);
            any = true;
        }
    }
    if (any)
        group_prepare_rebalance(gs, g, now_ms, "pending sync expired");
}

static void member_due(struct cn_groups *gs, struct cn_group *g,
                       struct member *m, int64_t now_ms)
{
    /* A member parked in JoinGroup or SyncGroup is alive (the answer
     * restarts its session); a new member's JoinGroup timed out. */
    if (!m->is_new && (m->awaiting_join || m->awaiting_sync)) {
        m->deadline_ms = after(now_ms, m->session_timeout_ms);
        return;
    }
    CN_INFO("group %s: member %s session expired", g->id, m->id);
    remove_and_update(gs, g, m, now_ms);
}

void cn_groups_tick(struct cn_groups *gs, int64_t now_ms)
{
    struct cn_group *g;
    enum due_kind kind;
    size_t at = 0;

    if (gs->shut)
        return;
    for (g = gs->head; g; g = g->next) {
        while (group_deadline(g, &kind, &at) <= now_ms) {
            switch (kind) {
            case DUE_JOIN:
                join_due(gs, g, now_ms);
                break;
            case DUE_SYNC:
                sync_due(gs, g, now_ms);
                break;
            case DUE_MEMBER:
                member_due(gs, g, g->members[at], now_ms);
                break;
            case DUE_PENDING:
                group_drop_pending(g, at);
                if (g->state == CN_GROUP_PREPARING_REBALANCE &&
                    group_all_joined(g))
                    complete_join(gs, g, now_ms);
                break;
            default:
                break;
            }
        }
    }
}

int64_t cn_groups_next_deadline(const struct cn_groups *gs)
{
    const struct cn_group *g;
    enum due_kind kind;
    int64_t t = NEVER, d;
    size_t at;

    if (gs->shut)
        return NEVER;
    for (g = gs->head; g; g = g->next) {
        d = group_deadline(g, &kind, &at);
        if (d < t)
            t = d;
    }
    return t;
}
