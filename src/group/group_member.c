/*
 * group_member.c - a group's members: their records, member ids, the
 * protocol vote, and answering the JoinGroup and SyncGroup they wait in.
 * Kept apart from the state machine so group.c reads as transitions, not
 * bookkeeping.
 */
#include "group/group_int.h"

#include <stdlib.h>
#include <string.h>

#include "proto/kerr.h"

static uint64_t rng_next(struct cn_groups *gs)
{
    uint64_t z = (gs->rng += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

/*
 * prefix + "-" + a random 128-bit id in URL-safe base64 without padding,
 * the shape of Kafka's Uuid.toString(); like Kafka's Uuid.randomUuid() we
 * never use one that starts with '-'.
 */
char *group_gen_member_id(struct cn_groups *gs, const char *prefix)
{
    static const char b64[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    uint8_t raw[18];
    char uuid[25];
    size_t i, o = 0, plen = strlen(or_empty(prefix));
    char *out;

    do {
        uint64_t a = rng_next(gs), b = rng_next(gs);
        memset(raw, 0, sizeof raw);
        for (i = 0; i < 8; i++) {
            raw[i] = (uint8_t)(a >> (56 - 8 * i));
            raw[8 + i] = (uint8_t)(b >> (56 - 8 * i));
        }
        raw[6] = (uint8_t)((raw[6] & 0x0f) | 0x40); /* version 4 */
        raw[8] = (uint8_t)((raw[8] & 0x3f) | 0x80); /* IETF variant */
        o = 0;
        for (i = 0; i < 18; i += 3) {
            uint32_t v = (uint32_t)raw[i] << 16 | (uint32_t)raw[i + 1] << 8 |
                         raw[i + 2];
            uuid[o++] = b64[(v >> 18) & 63];
            uuid[o++] = b64[(v >> 12) & 63];
            uuid[o++] = b64[(v >> 6) & 63];
            uuid[o++] = b64[v & 63];
        }
        uuid[22] = '\0'; /* 16 bytes are 22 characters */
    } while (uuid[0] == '-');

    out = xmalloc(plen + 1 + 22 + 1);
    memcpy(out, or_empty(prefix), plen);
    out[plen] = '-';
    memcpy(out + plen + 1, uuid, 23);
    return out;
}

/* ---------------------------------------------------------------------
 * Members
 */

static void free_protos(struct proto *p, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++) {
        free(p[i].name);
        free(p[i].meta);
    }
    free(p);
}

void group_copy_protos(struct member *m, const struct cn_join_protocol *p,
                       size_t n)
{
    size_t i;
    free_protos(m->protos, m->nprotos);
    m->protos = xmalloc(n * sizeof *m->protos);
    m->nprotos = n;
    for (i = 0; i < n; i++) {
        m->protos[i].name = xstrdup(or_empty(p[i].name));
        m->protos[i].meta = xmemdup(p[i].metadata, p[i].metadata_len);
        m->protos[i].len = p[i].metadata_len;
    }
}

void group_free_member(struct member *m)
{
    free(m->id);
    free(m->instance_id);
    free(m->client_id);
    free(m->client_host);
    free_protos(m->protos, m->nprotos);
    free(m->assignment);
    free(m);
}

const struct proto *group_member_proto(const struct member *m,
                                       const char *name)
{
    size_t i;
    if (!name)
        return NULL;
    for (i = 0; i < m->nprotos; i++)
        if (strcmp(m->protos[i].name, name) == 0)
            return &m->protos[i];
    return NULL;
}

/* Same protocols, same order, same metadata (Kafka's member.matches). */
bool group_member_matches(const struct member *m,
                          const struct cn_join_req *rq)
{
    size_t i;
    if (m->nprotos != rq->nprotocols)
        return false;
    for (i = 0; i < m->nprotos; i++) {
        const struct cn_join_protocol *p = &rq->protocols[i];
        if (strcmp(m->protos[i].name, or_empty(p->name)) != 0 ||
            m->protos[i].len != p->metadata_len ||
            (p->metadata_len &&
             memcmp(m->protos[i].meta, p->metadata, p->metadata_len) != 0))
            return false;
    }
    return true;
}

void group_set_assignment(struct member *m, const uint8_t *p, size_t len)
{
    free(m->assignment);
    m->assignment = xmemdup(p, len);
    m->assignment_len = len;
}

struct member *group_find_member(const struct cn_group *g, const char *id)
{
    size_t i;
    if (!id || !*id)
        return NULL;
    for (i = 0; i < g->nmembers; i++)
        if (strcmp(g->members[i]->id, id) == 0)
            return g->members[i];
    return NULL;
}

struct member *group_find_static(const struct cn_group *g,
                                 const char *instance_id)
{
    size_t i;
    if (!instance_id)
        return NULL;
    for (i = 0; i < g->nmembers; i++)
        if (str_eq(g->members[i]->instance_id, instance_id))
            return g->members[i];
    return NULL;
}

bool group_find_pending(const struct cn_group *g, const char *id,
                        size_t *at)
{
    size_t i;
    for (i = 0; i < g->npending; i++) {
        if (strcmp(g->pending[i].id, id) == 0) {
            *at = i;
            return true;
        }
    }
    return false;
}

void group_drop_pending(struct cn_group *g, size_t at)
{
    free(g->pending[at].id);
    g->pending[at] = g->pending[--g->npending];
}

void group_add_pending(struct cn_group *g, char *id, int64_t deadline_ms)
{
    if (g->npending == g->pending_cap) {
        g->pending_cap = g->pending_cap ? 2 * g->pending_cap : 4;
        g->pending =
            xrealloc(g->pending, g->pending_cap * sizeof *g->pending);
    }
    g->pending[g->npending].id = id;
    g->pending[g->npending].deadline_ms = deadline_ms;
    g->npending++;
}

/* Kafka's validateExistingMember / ClassicGroup.validateMember. */
int16_t group_validate_member(const struct cn_group *g, const char *id,
                              const char *instance_id)
{
    const struct member *m;
    if (!instance_id)
        return group_find_member(g, id) ? KAFKA_NONE : KAFKA_UNKNOWN_MEMBER_ID;
    m = group_find_static(g, instance_id);
    if (!m)
        return KAFKA_UNKNOWN_MEMBER_ID;
    if (!str_eq(m->id, or_empty(id)))
        return KAFKA_FENCED_INSTANCE_ID;
    return KAFKA_NONE;
}

size_t group_count_awaiting_join(const struct cn_group *g)
{
    size_t i, n = 0;
    for (i = 0; i < g->nmembers; i++)
        n += g->members[i]->awaiting_join;
    return n;
}

bool group_all_joined(const struct cn_group *g)
{
    return group_count_awaiting_join(g) == g->nmembers && g->npending == 0;
}

/* The group's rebalance timeout: the largest of its members'. */
int32_t group_rebalance_timeout(const struct cn_group *g)
{
    size_t i;
    int32_t t = 0;
    for (i = 0; i < g->nmembers; i++)
        if (g->members[i]->rebalance_timeout_ms > t)
            t = g->members[i]->rebalance_timeout_ms;
    return t;
}

/* Members that list this protocol name. */
static size_t supporters(const struct cn_group *g, const char *name)
{
    size_t i, n = 0;
    for (i = 0; i < g->nmembers; i++)
        n += group_member_proto(g->members[i], name) != NULL;
    return n;
}

/* Kafka's supportsProtocols: an Empty group takes any non-empty type and
 * protocol list; otherwise the type must match and one of the protocols
 * must be supported by every current member. */
bool group_supports_protocols(const struct cn_group *g,
                              const struct cn_join_req *rq)
{
    size_t i;
    const char *type = or_empty(rq->protocol_type);
    if (g->state == CN_GROUP_EMPTY)
        return *type && rq->nprotocols > 0;
    if (!str_eq(g->protocol_type, type))
        return false;
    for (i = 0; i < rq->nprotocols; i++)
        if (supporters(g, or_empty(rq->protocols[i].name)) == g->nmembers)
            return true;
    return false;
}

/*
 * The protocol every member supports that most members prefer: each
 * member votes for its first candidate; ties go to the earliest vote.
 * NULL when there is no common protocol.  The string belongs to a member.
 */
const char *group_select_protocol(const struct cn_group *g)
{
    const char **names;
    size_t *votes, n = 0, i, j, best = 0;
    const char *choice = NULL;

    if (!g->nmembers)
        return NULL;
    names = xmalloc(g->nmembers * sizeof *names);
    votes = xmalloc(g->nmembers * sizeof *votes);
    for (i = 0; i < g->nmembers; i++) {
        const struct member *m = g->members[i];
        const char *vote = NULL;
        for (j = 0; j < m->nprotos && !vote; j++)
            if (supporters(g, m->protos[j].name) == g->nmembers)
                vote = m->protos[j].name;
        if (!vote)
            continue;
        for (j = 0; j < n; j++)
            if (strcmp(names[j], vote) == 0)
                break;
        if (j == n) {
            names[n] = vote;
            votes[n++] = 0;
        }
        votes[j]++;
    }
    for (j = 0; j < n; j++) {
        if (votes[j] > best) {
            best = votes[j];
            choice = names[j];
        }
    }
    free(names);
    free(votes);
    return choice;
}

/* ---------------------------------------------------------------------
 * Answering waiters
 */

static void join_answer(struct cn_groups *gs, void *waiter,
                        const struct cn_join_result *r)
{
    gs->ops.join_done(waiter, r);
}

void group_join_error(struct cn_groups *gs, void *waiter, int16_t error,
                      const char *member_id)
{
    struct cn_join_result r = {
        .error = error,
        .generation = -1,
        .leader = "",
        .member_id = or_empty(member_id),
    };
    join_answer(gs, waiter, &r);
}

void group_sync_error(struct cn_groups *gs, void *waiter, int16_t error)
{
    struct cn_sync_result r = {.error = error};
    gs->ops.sync_done(waiter, &r);
}

/* Answers m's waiting JoinGroup (if any) with an error. */
void group_member_join_error(struct cn_groups *gs, struct member *m,
                             int16_t error, const char *member_id)
{
    void *w = m->join_waiter;
    if (!m->awaiting_join)
        return;
    m->awaiting_join = false;
    m->join_waiter = NULL;
    group_join_error(gs, w, error, member_id);
}

void group_member_sync_error(struct cn_groups *gs, struct member *m,
                             int16_t error)
{
    void *w = m->sync_waiter;
    if (!m->awaiting_sync)
        return;
    m->awaiting_sync = false;
    m->sync_waiter = NULL;
    group_sync_error(gs, w, error);
}

/* The current generation's answer for m's waiting JoinGroup; only the
 * leader gets the member list. */
void group_member_join_current(struct cn_groups *gs, struct cn_group *g,
                               struct member *m, bool skip_assignment)
{
    struct cn_join_member *list = NULL;
    struct cn_join_result r = {
        .error = KAFKA_NONE,
        .generation = g->generation,
        .protocol_type = g->protocol_type,
        .protocol_name = g->protocol,
        .leader = g->leader ? g->leader->id : "",
        .member_id = m->id,
        .skip_assignment = skip_assignment,
    };
    void *w = m->join_waiter;
    size_t i;

    if (!m->awaiting_join)
        return;
    if (g->leader == m) {
        list = xmalloc(g->nmembers * sizeof *list);
        for (i = 0; i < g->nmembers; i++) {
            const struct member *o = g->members[i];
            const struct proto *p = group_member_proto(o, g->protocol);
            list[i].member_id = o->id;
            list[i].instance_id = o->instance_id;
            list[i].metadata = p ? p->meta : NULL;
            list[i].metadata_len = p ? p->len : 0;
        }
        r.members = list;
        r.nmembers = g->nmembers;
    }
    m->awaiting_join = false;
    m->join_waiter = NULL;
    join_answer(gs, w, &r);
    free(list);
}
