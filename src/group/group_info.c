/*
 * group_info.c - read-only views of the groups for DescribeGroups,
 * ListGroups and the handlers' lookups.  Nothing here changes a group,
 * so these can never leave a waiter unanswered.
 */
#include "group/group_int.h"

#include <ctype.h>
#include <string.h>
#include <strings.h>

const struct cn_group *cn_groups_find(const struct cn_groups *gs,
                                      const char *group_id)
{
    return group_lookup(gs, group_id);
}

bool cn_groups_exists(const struct cn_groups *gs, const char *group_id)
{
    return group_lookup(gs, group_id) != NULL;
}

enum cn_group_state cn_groups_state(const struct cn_groups *gs,
                                    const char *group_id)
{
    const struct cn_group *g = group_lookup(gs, group_id);
    return g ? g->state : CN_GROUP_DEAD;
}

const struct cn_group *cn_groups_next(const struct cn_groups *gs,
                                      const struct cn_group *prev)
{
    return prev ? prev->next : gs->head;
}

size_t cn_groups_count(const struct cn_groups *gs)
{
    return gs->count;
}

const char *cn_group_state_name(enum cn_group_state s)
{
    switch (s) {
    case CN_GROUP_EMPTY:
        return "Empty";
    case CN_GROUP_PREPARING_REBALANCE:
        return "PreparingRebalance";
    case CN_GROUP_COMPLETING_REBALANCE:
        return "CompletingRebalance";
    case CN_GROUP_STABLE:
        return "Stable";
    default:
        return "Dead";
    }
}

const char *cn_group_id(const struct cn_group *g)
{
    return g->id;
}

enum cn_group_state cn_group_state(const struct cn_group *g)
{
    return g->state;
}

int32_t cn_group_generation(const struct cn_group *g)
{
    return g->generation;
}

const char *cn_group_protocol_type(const struct cn_group *g)
{
    return or_empty(g->protocol_type);
}

const char *cn_group_protocol(const struct cn_group *g)
{
    return g->protocol;
}

const char *cn_group_leader(const struct cn_group *g)
{
    return g->leader ? g->leader->id : NULL;
}

const char *cn_group_type(const struct cn_group *g)
{
    (void)g;
    return "classic";
}

size_t cn_group_nmembers(const struct cn_group *g)
{
    return g->nmembers;
}

void cn_group_member(const struct cn_group *g, size_t i,
                     struct cn_member_info *out)
{
    const struct member *m = g->members[i];
    const struct proto *p = group_member_proto(m, g->protocol);

    out->member_id = m->id;
    out->instance_id = m->instance_id;
    out->client_id = m->client_id;
    out->client_host = m->client_host;
    out->session_timeout_ms = m->session_timeout_ms;
    out->rebalance_timeout_ms = m->rebalance_timeout_ms;
    out->metadata = p ? p->meta : NULL;
    out->metadata_len = p ? p->len : 0;
    out->assignment = m->assignment;
    out->assignment_len = m->assignment_len;
}

void cn_group_describe_member(const struct cn_group *g, size_t i,
                              struct cn_member_info *out)
{
    cn_group_member(g, i, out);
    if (g->state != CN_GROUP_STABLE) {
        out->metadata = NULL;
        out->metadata_len = 0;
        out->assignment = NULL;
        out->assignment_len = 0;
    }
}

/* Case-insensitive equality after trimming spaces from want. */
static bool name_eq_trim(const char *want, const char *have)
{
    size_t n;
    while (*want && isspace((unsigned char)*want))
        want++;
    n = strlen(want);
    while (n && isspace((unsigned char)want[n - 1]))
        n--;
    return n == strlen(have) && strncasecmp(want, have, n) == 0;
}

bool cn_group_list_match(const struct cn_group *g,
                         const char *const *states, size_t nstates,
                         const char *const *types, size_t ntypes)
{
    size_t i;
    bool ok = nstates == 0;

    for (i = 0; i < nstates && !ok; i++)
        ok = states[i] &&
             name_eq_trim(states[i], cn_group_state_name(g->state));
    if (!ok)
        return false;
    ok = ntypes == 0;
    for (i = 0; i < ntypes && !ok; i++)
        ok = types[i] && strcasecmp(types[i], cn_group_type(g)) == 0;
    return ok;
}
