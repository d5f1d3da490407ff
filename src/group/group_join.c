/*
 * group_join.c - JoinGroup: who may join, new members and their ids
 * (KIP-394), static members replacing themselves (KIP-345), and rejoins.
 * The longest request path, kept apart from the rest of the state
 * machine in group.c, which it drives through group_int.h.
 */
#include "group/group_int.h"

#include <stdlib.h>
#include <string.h>

#include "base/say.h"
#include "proto/kerr.h"

/* Takes over `id`.  Kafka's addMemberThenRebalanceOrCompleteJoin. */
static void add_member(struct cn_groups *gs, struct cn_group *g, char *id,
                       const struct cn_join_req *rq, void *waiter,
                       int64_t now_ms)
{
    struct member *m = xmalloc(sizeof *m);
    size_t at;

    m->id = id;
    m->instance_id = xstrdup(rq->instance_id);
    m->client_id = xstrdup(or_empty(rq->client_id));
    m->client_host = xstrdup(or_empty(rq->client_host));
    m->session_timeout_ms = rq->session_timeout_ms;
    m->rebalance_timeout_ms = rq->rebalance_timeout_ms < 0
                                  ? rq->session_timeout_ms
                                  : rq->rebalance_timeout_ms;
    group_copy_protos(m, rq->protocols, rq->nprotocols);
    m->is_new = true;
    m->awaiting_join = true;
    m->join_waiter = waiter;
    /* A new member cannot heartbeat before its first answer, so its
     * JoinGroup gets its own time limit. */
    m->deadline_ms = after(now_ms, gs->cfg.new_member_join_timeout_ms);
    if (g->state == CN_GROUP_PREPARING_REBALANCE &&
        g->prev_state == CN_GROUP_EMPTY)
        g->new_member_added = true;
    if (!g->nmembers) {
        free(g->protocol_type);
        g->protocol_type = xstrdup(or_empty(rq->protocol_type));
    }
    group_append_member(g, m);
    if (group_find_pending(g, id, &at))
        group_drop_pending(g, at);
    group_maybe_prepare_or_complete(gs, g, now_ms, "member joined");
}

/* New protocols and timeouts; waiter becomes m's waiting JoinGroup. */
static void update_member(struct cn_groups *gs, struct member *m,
                          const struct cn_join_req *rq, void *waiter)
{
    /* A client that re-sends JoinGroup gave up on the first one; answer
     * it so it does not hang. */
    group_member_join_error(gs, m, KAFKA_REBALANCE_IN_PROGRESS, m->id);
    group_copy_protos(m, rq->protocols, rq->nprotocols);
    m->session_timeout_ms = rq->session_timeout_ms;
    m->rebalance_timeout_ms = rq->rebalance_timeout_ms < 0
                                  ? rq->session_timeout_ms
                                  : rq->rebalance_timeout_ms;
    m->awaiting_join = true;
    m->join_waiter = waiter;
}

/*
 * A known group.instance.id joined with an empty member id: it takes
 * `new_id` (owned) and the old id is fenced.  In a Stable group whose
 * protocol would not change, no rebalance: the member gets the current
 * generation and keeps its assignment (KIP-345).
 */
static void update_static_member(struct cn_groups *gs, struct cn_group *g,
                                 struct member *m, char *new_id,
                                 const struct cn_join_req *rq, void *waiter,
                                 int64_t now_ms)
{
    const char *sel;

    group_member_join_error(gs, m, KAFKA_FENCED_INSTANCE_ID, m->id);
    group_member_sync_error(gs, m, KAFKA_FENCED_INSTANCE_ID);
    CN_INFO("group %s: static member %s replaced %s", g->id, new_id, m->id);
    free(m->id);
    m->id = new_id;
    m->pending_sync = false;
    update_member(gs, m, rq, waiter);
    m->deadline_ms = after(now_ms, m->session_timeout_ms);

    switch (g->state) {
    case CN_GROUP_STABLE:
        sel = group_select_protocol(g);
        if (sel && g->protocol && strcmp(sel, g->protocol) == 0) {
            group_store(gs, g);
            group_member_join_current(gs, g, m, g->leader == m);
        } else {
            group_maybe_prepare_or_complete(gs, g, now_ms,
                                            "static member changed protocols");
        }
        break;
    case CN_GROUP_COMPLETING_REBALANCE:
        /* Rebalance again so every member learns the new id. */
        group_prepare_rebalance(gs, g, now_ms, "static member rejoined");
        break;
    case CN_GROUP_PREPARING_REBALANCE:
        group_maybe_complete_join_phase(gs, g, now_ms);
        break;
    default:
        break;
    }
}

/* Kafka's acceptJoiningMember: is there room for this (re)joiner? */
static bool accept_joining(const struct cn_groups *gs,
                           const struct cn_group *g, const char *id)
{
    const struct member *m = group_find_member(g, id);
    size_t max = (size_t)(gs->cfg.max_size > 0 ? gs->cfg.max_size : 0);

    switch (g->state) {
    case CN_GROUP_PREPARING_REBALANCE:
        /* Counting awaiting members (not all members) lets the last
         * rejoiners be the ones turned away if the limit shrank. */
        return (m && m->awaiting_join) || group_count_awaiting_join(g) < max;
    case CN_GROUP_COMPLETING_REBALANCE:
    case CN_GROUP_STABLE:
        return m || g->nmembers < max;
    default:
        return true;
    }
}

static void join_new_member(struct cn_groups *gs, struct cn_group *g,
                            const struct cn_join_req *rq, void *waiter,
                            int64_t now_ms)
{
    char *id;
    struct member *old;

    if (!group_supports_protocols(g, rq)) {
        group_join_error(gs, waiter, KAFKA_INCONSISTENT_GROUP_PROTOCOL, "");
        return;
    }
    id = group_gen_member_id(gs, rq->instance_id ? rq->instance_id
                                           : or_empty(rq->client_id));
    if (rq->instance_id) {
        old = group_find_static(g, rq->instance_id);
        if (old)
            update_static_member(gs, g, old, id, rq, waiter, now_ms);
        else
            add_member(gs, g, id, rq, waiter, now_ms);
    } else if (rq->version >= 4) {
        /* KIP-394: hand out the id first, so a client that times out
         * and retries does not leave defunct members behind. */
        group_add_pending(g, id, after(now_ms, rq->session_timeout_ms));
        group_join_error(gs, waiter, KAFKA_MEMBER_ID_REQUIRED, id);
    } else {
        add_member(gs, g, id, rq, waiter, now_ms);
    }
}

static void join_existing_member(struct cn_groups *gs, struct cn_group *g,
                                 const struct cn_join_req *rq, void *waiter,
                                 int64_t now_ms)
{
    const char *mid = rq->member_id;
    struct member *m;
    size_t at;
    int16_t err;

    if (!group_supports_protocols(g, rq)) {
        group_join_error(gs, waiter, KAFKA_INCONSISTENT_GROUP_PROTOCOL, mid);
        return;
    }
    if (group_find_pending(g, mid, &at)) {
        /* Pending ids are only handed to dynamic members. */
        if (rq->instance_id) {
            group_join_error(gs, waiter, KAFKA_UNKNOWN_SERVER_ERROR, mid);
            return;
        }
        add_member(gs, g, xstrdup(mid), rq, waiter, now_ms);
        return;
    }
    err = group_validate_member(g, mid, rq->instance_id);
    if (err) {
        group_join_error(gs, waiter, err, mid);
        return;
    }
    m = group_find_member(g, mid);
    switch (g->state) {
    case CN_GROUP_PREPARING_REBALANCE:
        update_member(gs, m, rq, waiter);
        group_maybe_prepare_or_complete(gs, g, now_ms, "member rejoined");
        break;
    case CN_GROUP_COMPLETING_REBALANCE:
        if (group_member_matches(m, rq)) {
            /* It probably missed our answer: send it again. */
            update_member(gs, m, rq, waiter);
            m->deadline_ms = after(now_ms, m->session_timeout_ms);
            group_member_join_current(gs, g, m, false);
        } else {
            update_member(gs, m, rq, waiter);
            group_maybe_prepare_or_complete(gs, g, now_ms,
                                            "member changed metadata");
        }
        break;
    case CN_GROUP_STABLE:
        if (g->leader == m || !group_member_matches(m, rq)) {
            /* The leader rejoins to force a reassignment (e.g. topic
             * metadata changed). */
            update_member(gs, m, rq, waiter);
            group_maybe_prepare_or_complete(gs, g, now_ms,
                                            g->leader == m ? "leader rejoined"
                                                     : "member changed "
                                                       "metadata");
        } else {
            update_member(gs, m, rq, waiter);
            m->deadline_ms = after(now_ms, m->session_timeout_ms);
            group_member_join_current(gs, g, m, false);
        }
        break;
    default:
        group_join_error(gs, waiter, KAFKA_UNKNOWN_MEMBER_ID, mid);
        break;
    }
}

/* ---------------------------------------------------------------------
 * Public API
 */

void cn_groups_join(struct cn_groups *gs, const struct cn_join_req *rq,
                    void *waiter, int64_t now_ms)
{
    struct cn_join_req r = *rq;
    struct cn_group *g;
    bool created = false;

    r.member_id = or_empty(rq->member_id);
    if (gs->shut) {
        group_join_error(gs, waiter, KAFKA_COORDINATOR_NOT_AVAILABLE,
                         r.member_id);
        return;
    }
    if (!r.group_id || !*r.group_id) {
        group_join_error(gs, waiter, KAFKA_INVALID_GROUP_ID, r.member_id);
        return;
    }
    if (r.session_timeout_ms < gs->cfg.min_session_timeout_ms ||
        r.session_timeout_ms > gs->cfg.max_session_timeout_ms) {
        group_join_error(gs, waiter, KAFKA_INVALID_SESSION_TIMEOUT,
                         r.member_id);
        return;
    }
    g = group_lookup(gs, r.group_id);
    if (!g) {
        if (*r.member_id) {
            group_join_error(gs, waiter, KAFKA_UNKNOWN_MEMBER_ID,
                             r.member_id);
            return;
        }
        g = group_create(gs, r.group_id, now_ms);
        created = true;
    }
    if (!accept_joining(gs, g, r.member_id)) {
        struct member *m = group_find_member(g, r.member_id);
        size_t at;
        if (m)
            group_remove_member(gs, g, m, KAFKA_GROUP_MAX_SIZE_REACHED);
        else if (group_find_pending(g, r.member_id, &at))
            group_drop_pending(g, at);
        group_join_error(gs, waiter, KAFKA_GROUP_MAX_SIZE_REACHED, "");
        group_maybe_complete_join_phase(gs, g, now_ms);
    } else if (!*r.member_id) {
        join_new_member(gs, g, &r, waiter, now_ms);
    } else {
        join_existing_member(gs, g, &r, waiter, now_ms);
    }
    if (!created)
        return;
    if (!gs->ops.store_created) {
        group_store(gs, g);
        return;
    }
    g->create_token = ++gs->tokens;
    gs->ops.store_created(gs->ops.arg, g, g->create_token); /* may free g */
}
