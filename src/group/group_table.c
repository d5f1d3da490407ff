/*
 * group_table.c - where groups live: the hash table by group id (with
 * creation order for listing and timers), creating and destroying
 * groups, and the coordinator's own lifecycle.
 */
#include "group/group_int.h"

#include <stdlib.h>
#include <string.h>

#include "base/fnv.h"
#include "base/rand.h"
#include "proto/kerr.h"

/* ---------------------------------------------------------------------
 * Groups table
 */

static uint32_t hash_id(const char *s)
{
    return cn_fnv1a_str(s);
}

struct cn_group *group_lookup(const struct cn_groups *gs, const char *id)
{
    struct cn_group *g;
    if (!id)
        return NULL;
    for (g = gs->buckets[hash_id(id) & (gs->nbuckets - 1)]; g; g = g->hnext)
        if (strcmp(g->id, id) == 0)
            return g;
    return NULL;
}

static void grow_table(struct cn_groups *gs)
{
    size_t n = gs->nbuckets * 2, i;
    struct cn_group **b = xmalloc(n * sizeof *b);
    for (i = 0; i < gs->nbuckets; i++) {
        struct cn_group *g = gs->buckets[i], *next;
        for (; g; g = next) {
            size_t at = hash_id(g->id) & (n - 1);
            next = g->hnext;
            g->hnext = b[at];
            b[at] = g;
        }
    }
    free(gs->buckets);
    gs->buckets = b;
    gs->nbuckets = n;
}

struct cn_group *group_create(struct cn_groups *gs, const char *id,
                              int64_t now_ms)
{
    struct cn_group *g = xmalloc(sizeof *g);
    size_t at;

    if (gs->count >= gs->nbuckets)
        grow_table(gs);
    g->id = xstrdup(id);
    g->state = g->prev_state = CN_GROUP_EMPTY;
    g->join_deadline_ms = g->sync_deadline_ms = NEVER;
    g->state_ts_ms = now_ms;
    at = hash_id(id) & (gs->nbuckets - 1);
    g->hnext = gs->buckets[at];
    gs->buckets[at] = g;
    g->prev = gs->tail;
    if (gs->tail)
        gs->tail->next = g;
    else
        gs->head = g;
    gs->tail = g;
    gs->count++;
    return g;
}

/* Drops every member and pending id, answering their waiters. */
void group_clear_members(struct cn_groups *gs, struct cn_group *g,
                         int16_t error)
{
    size_t i;
    for (i = 0; i < g->nmembers; i++) {
        group_member_join_error(gs, g->members[i], error, "");
        group_member_sync_error(gs, g->members[i], error);
        group_free_member(g->members[i]);
    }
    g->nmembers = 0;
    g->leader = NULL;
    for (i = 0; i < g->npending; i++)
        free(g->pending[i].id);
    g->npending = 0;
}

void group_destroy(struct cn_groups *gs, struct cn_group *g)
{
    struct cn_group **pp =
        &gs->buckets[hash_id(g->id) & (gs->nbuckets - 1)];

    while (*pp != g)
        pp = &(*pp)->hnext;
    *pp = g->hnext;
    if (g->prev)
        g->prev->next = g->next;
    else
        gs->head = g->next;
    if (g->next)
        g->next->prev = g->prev;
    else
        gs->tail = g->prev;
    gs->count--;

    group_clear_members(gs, g, KAFKA_COORDINATOR_NOT_AVAILABLE);
    free(g->members);
    free(g->pending);
    free(g->protocol_type);
    free(g->protocol);
    free(g->id);
    free(g);
}

/* ---------------------------------------------------------------------
 * Lifecycle
 */

void cn_groups_config_default(struct cn_groups_config *cfg)
{
    cfg->min_session_timeout_ms = 6000;
    cfg->max_session_timeout_ms = 1800000;
    cfg->initial_rebalance_delay_ms = 3000;
    cfg->max_size = INT32_MAX;
    cfg->new_member_join_timeout_ms = 300000;
    cfg->seed = 0;
}

struct cn_groups *cn_groups_new(const struct cn_groups_config *cfg,
                                const struct cn_groups_ops *ops)
{
    struct cn_groups *gs = calloc(1, sizeof *gs);
    if (!gs)
        return NULL;
    gs->nbuckets = 64;
    gs->buckets = calloc(gs->nbuckets, sizeof *gs->buckets);
    if (!gs->buckets) {
        free(gs);
        return NULL;
    }
    gs->cfg = *cfg;
    gs->ops = *ops;
    gs->rng = cfg->seed;
    /* Without the system's generator, the table's address still differs
     * from one start to the next (ASLR), which is all member ids need. */
    if (!gs->rng && cn_rand_bytes(&gs->rng, sizeof gs->rng) != 0)
        gs->rng = (uint64_t)(uintptr_t)gs ^ 0x9e3779b97f4a7c15u;
    return gs;
}

void cn_groups_shutdown(struct cn_groups *gs)
{
    struct cn_group *g;
    size_t i;

    if (gs->shut)
        return;
    gs->shut = true;
    for (g = gs->head; g; g = g->next) {
        for (i = 0; i < g->nmembers; i++) {
            group_member_join_error(gs, g->members[i],
                                    KAFKA_COORDINATOR_NOT_AVAILABLE, "");
            group_member_sync_error(gs, g->members[i],
                                    KAFKA_COORDINATOR_NOT_AVAILABLE);
        }
    }
}

size_t cn_groups_unload(struct cn_groups *gs,
                        bool (*match)(void *arg, const char *group_id),
                        void *arg, int16_t error)
{
    struct cn_group *g, *next;
    size_t gone = 0;

    for (g = gs->head; g; g = next) {
        next = g->next;
        if (!match(arg, g->id))
            continue;
        /* Answered with the caller's error first: group_destroy's own
         * clearing then finds no members. */
        group_clear_members(gs, g, error);
        group_destroy(gs, g);
        gone++;
    }
    return gone;
}

void cn_groups_free(struct cn_groups *gs)
{
    if (!gs)
        return;
    cn_groups_shutdown(gs);
    while (gs->head)
        group_destroy(gs, gs->head);
    free(gs->buckets);
    free(gs);
}
