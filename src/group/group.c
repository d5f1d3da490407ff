/*
 * group.c - classic consumer-group membership, after Kafka 4.x's
 * GroupMetadataManager and ClassicGroup (classic protocol only).
 *
 * Each group is a hash-table entry holding its members in join order (the
 * first is the fallback leader, as Kafka picks the first remaining member
 * when the leader goes) and the "pending" member ids handed out with
 * MEMBER_ID_REQUIRED (KIP-394) that have not joined yet.  Timers are
 * deadlines on the group (join phase, sync phase) and on each member
 * (session); cn_groups_tick() fires the due ones in deadline order.
 *
 * Allocation failure inside the state machine aborts: a half-applied
 * transition would leave waiters unanswered, which is worse than a crash
 * the supervisor restarts (Redis makes the same call for its in-memory
 * state).
 */
#include "group/group.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/arena.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/rd.h"
#include "base/say.h"
#include "proto/gen/group_metadata_key.h"
#include "proto/gen/group_metadata_value.h"
#include "proto/kerr.h"

#define NEVER INT64_MAX

struct proto {
    char *name;
    uint8_t *meta; /* NULL when len is 0 */
    size_t len;    /* bytes */
};

struct member {
    char *id;
    char *instance_id; /* NULL when dynamic */
    char *client_id;
    char *client_host;
    int32_t session_timeout_ms;
    int32_t rebalance_timeout_ms;
    struct proto *protos; /* in the member's preference order */
    size_t nprotos;
    uint8_t *assignment;   /* NULL when none */
    size_t assignment_len; /* bytes */
    void *join_waiter;     /* valid while awaiting_join */
    void *sync_waiter;     /* valid while awaiting_sync */
    bool awaiting_join;
    bool awaiting_sync;
    bool is_new;       /* joined but no join phase completed yet: its
                          JoinGroup times out instead of its session */
    bool pending_sync; /* got a JoinGroup answer, SyncGroup not seen */
    int64_t deadline_ms; /* session (or new-member join) expiry, ms */
};

struct pending {
    char *id;            /* handed out with MEMBER_ID_REQUIRED */
    int64_t deadline_ms; /* dropped if it has not joined by then, ms */
};

enum join_kind {
    JOIN_NONE,
    JOIN_INITIAL, /* first rebalance of an Empty group: delayed join */
    JOIN_NORMAL,  /* rebalance timeout */
};

struct cn_group {
    char *id;
    enum cn_group_state state;
    enum cn_group_state prev_state;
    int32_t generation;
    char *protocol_type;     /* NULL when none */
    char *protocol;          /* chosen protocol, NULL when none */
    struct member *leader;   /* NULL when no members */
    struct member **members; /* join order */
    size_t nmembers, members_cap;
    struct pending *pending;
    size_t npending, pending_cap;
    int64_t join_deadline_ms; /* end of the join phase (or of one initial
                                 delay step), NEVER when none */
    enum join_kind join_kind;
    int32_t delay_ms;         /* current initial delay step, ms */
    int32_t remaining_ms;     /* initial delay still allowed, ms */
    bool new_member_added;    /* a member joined during the initial delay */
    int64_t sync_deadline_ms; /* members not synced by then are removed */
    int64_t state_ts_ms;      /* when the state last changed, caller's ms */
    struct cn_group *hnext;   /* hash chain */
    struct cn_group *prev, *next; /* creation order */
};

struct cn_groups {
    struct cn_groups_config cfg;
    struct cn_groups_ops ops;
    struct cn_group **buckets;
    size_t nbuckets; /* a power of two */
    size_t count;    /* groups */
    struct cn_group *head, *tail;
    uint64_t rng;    /* splitmix64 state for member ids */
    bool shut;       /* cn_groups_shutdown() ran */
};

/* ---------------------------------------------------------------------
 * Allocation and small helpers
 */

static void oom(void)
{
    CN_ERROR("group coordinator: out of memory");
    abort();
}

static void *xmalloc(size_t n)
{
    void *p = calloc(1, n ? n : 1);
    if (!p)
        oom();
    return p;
}

static void *xrealloc(void *p, size_t n)
{
    p = realloc(p, n ? n : 1);
    if (!p)
        oom();
    return p;
}

static char *xstrdup(const char *s)
{
    char *p;
    if (!s)
        return NULL;
    p = strdup(s);
    if (!p)
        oom();
    return p;
}

static char *xstrndup(const uint8_t *s, int32_t len)
{
    char *p;
    if (len < 0)
        return NULL;
    p = xmalloc((size_t)len + 1);
    if (len)
        memcpy(p, s, (size_t)len);
    return p;
}

static uint8_t *xmemdup(const uint8_t *s, size_t len)
{
    uint8_t *p;
    if (!len)
        return NULL;
    p = xmalloc(len);
    memcpy(p, s, len);
    return p;
}

static bool str_eq(const char *a, const char *b)
{
    if (!a || !b)
        return a == b;
    return strcmp(a, b) == 0;
}

static const char *or_empty(const char *s)
{
    return s ? s : "";
}

/* now + delta, at least 1 ms ahead so a tick never re-arms what it just
 * fired (a zero rebalance timeout would otherwise spin). */
static int64_t after(int64_t now_ms, int32_t delta_ms)
{
    if (delta_ms < 1)
        delta_ms = 1;
    return now_ms > NEVER - delta_ms ? NEVER : now_ms + delta_ms;
}

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
static char *gen_member_id(struct cn_groups *gs, const char *prefix)
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

static void copy_protos(struct member *m, const struct cn_join_protocol *p,
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

static void free_member(struct member *m)
{
    free(m->id);
    free(m->instance_id);
    free(m->client_id);
    free(m->client_host);
    free_protos(m->protos, m->nprotos);
    free(m->assignment);
    free(m);
}

static const struct proto *member_proto(const struct member *m,
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
static bool member_matches(const struct member *m,
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

static void set_assignment(struct member *m, const uint8_t *p, size_t len)
{
    free(m->assignment);
    m->assignment = xmemdup(p, len);
    m->assignment_len = len;
}

static struct member *find_member(const struct cn_group *g, const char *id)
{
    size_t i;
    if (!id || !*id)
        return NULL;
    for (i = 0; i < g->nmembers; i++)
        if (strcmp(g->members[i]->id, id) == 0)
            return g->members[i];
    return NULL;
}

static struct member *find_static(const struct cn_group *g,
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

static bool find_pending(const struct cn_group *g, const char *id,
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

static void drop_pending(struct cn_group *g, size_t at)
{
    free(g->pending[at].id);
    g->pending[at] = g->pending[--g->npending];
}

static void add_pending(struct cn_group *g, char *id, int64_t deadline_ms)
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
static int16_t validate_member(const struct cn_group *g, const char *id,
                               const char *instance_id)
{
    const struct member *m;
    if (!instance_id)
        return find_member(g, id) ? KAFKA_NONE : KAFKA_UNKNOWN_MEMBER_ID;
    m = find_static(g, instance_id);
    if (!m)
        return KAFKA_UNKNOWN_MEMBER_ID;
    if (!str_eq(m->id, or_empty(id)))
        return KAFKA_FENCED_INSTANCE_ID;
    return KAFKA_NONE;
}

static size_t count_awaiting_join(const struct cn_group *g)
{
    size_t i, n = 0;
    for (i = 0; i < g->nmembers; i++)
        n += g->members[i]->awaiting_join;
    return n;
}

static bool all_joined(const struct cn_group *g)
{
    return count_awaiting_join(g) == g->nmembers && g->npending == 0;
}

/* The group's rebalance timeout: the largest of its members'. */
static int32_t rebalance_timeout(const struct cn_group *g)
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
        n += member_proto(g->members[i], name) != NULL;
    return n;
}

/* Kafka's supportsProtocols: an Empty group takes any non-empty type and
 * protocol list; otherwise the type must match and one of the protocols
 * must be supported by every current member. */
static bool supports_protocols(const struct cn_group *g,
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
static const char *select_protocol(const struct cn_group *g)
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

static void join_error(struct cn_groups *gs, void *waiter, int16_t error,
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

static void sync_error(struct cn_groups *gs, void *waiter, int16_t error)
{
    struct cn_sync_result r = {.error = error};
    gs->ops.sync_done(waiter, &r);
}

/* Answers m's waiting JoinGroup (if any) with an error. */
static void member_join_error(struct cn_groups *gs, struct member *m,
                              int16_t error, const char *member_id)
{
    void *w = m->join_waiter;
    if (!m->awaiting_join)
        return;
    m->awaiting_join = false;
    m->join_waiter = NULL;
    join_error(gs, w, error, member_id);
}

static void member_sync_error(struct cn_groups *gs, struct member *m,
                              int16_t error)
{
    void *w = m->sync_waiter;
    if (!m->awaiting_sync)
        return;
    m->awaiting_sync = false;
    m->sync_waiter = NULL;
    sync_error(gs, w, error);
}

/* The current generation's answer for m's waiting JoinGroup; only the
 * leader gets the member list. */
static void member_join_current(struct cn_groups *gs, struct cn_group *g,
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
            const struct proto *p = member_proto(o, g->protocol);
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

/* ---------------------------------------------------------------------
 * Groups table
 */

static uint32_t hash_id(const char *s)
{
    uint32_t h = 2166136261u;
    while (*s) {
        h ^= (uint8_t)*s++;
        h *= 16777619u;
    }
    return h;
}

static struct cn_group *lookup(const struct cn_groups *gs, const char *id)
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

static struct cn_group *create_group(struct cn_groups *gs, const char *id,
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
static void clear_members(struct cn_groups *gs, struct cn_group *g,
                          int16_t error)
{
    size_t i;
    for (i = 0; i < g->nmembers; i++) {
        member_join_error(gs, g->members[i], error, "");
        member_sync_error(gs, g->members[i], error);
        free_member(g->members[i]);
    }
    g->nmembers = 0;
    g->leader = NULL;
    for (i = 0; i < g->npending; i++)
        free(g->pending[i].id);
    g->npending = 0;
}

static void destroy_group(struct cn_groups *gs, struct cn_group *g)
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

    clear_members(gs, g, KAFKA_COORDINATOR_NOT_AVAILABLE);
    free(g->members);
    free(g->pending);
    free(g->protocol_type);
    free(g->protocol);
    free(g->id);
    free(g);
}

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

static void store(struct cn_groups *gs, const struct cn_group *g)
{
    if (gs->ops.store)
        gs->ops.store(gs->ops.arg, g);
}

static void append_member(struct cn_group *g, struct member *m)
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
static void remove_member(struct cn_groups *gs, struct cn_group *g,
                          struct member *m, int16_t error)
{
    size_t i;

    member_join_error(gs, m, error, "");
    member_sync_error(gs, m, error);
    for (i = 0; i < g->nmembers; i++)
        if (g->members[i] == m)
            break;
    memmove(&g->members[i], &g->members[i + 1],
            (g->nmembers - i - 1) * sizeof *g->members);
    g->nmembers--;
    if (g->leader == m)
        g->leader = g->nmembers ? g->members[0] : NULL;
    free_member(m);
}

static void complete_join(struct cn_groups *gs, struct cn_group *g,
                          int64_t now_ms);

/* Members waiting in SyncGroup get `error`; all assignments are dropped. */
static void reset_assignments(struct cn_groups *gs, struct cn_group *g,
                              int16_t error)
{
    size_t i;
    for (i = 0; i < g->nmembers; i++) {
        set_assignment(g->members[i], NULL, 0);
        member_sync_error(gs, g->members[i], error);
    }
}

static void clear_pending_sync(struct cn_group *g)
{
    size_t i;
    for (i = 0; i < g->nmembers; i++)
        g->members[i]->pending_sync = false;
    g->sync_deadline_ms = NEVER;
}

static void maybe_complete_join_phase(struct cn_groups *gs,
                                      struct cn_group *g, int64_t now_ms)
{
    /* The initial delayed join of a group that was Empty runs its full
     * delay even when everyone is in: more members are expected. */
    if (g->state == CN_GROUP_PREPARING_REBALANCE && all_joined(g) &&
        g->prev_state != CN_GROUP_EMPTY)
        complete_join(gs, g, now_ms);
}

static void prepare_rebalance(struct cn_groups *gs, struct cn_group *g,
                              int64_t now_ms, const char *reason)
{
    bool initial = g->state == CN_GROUP_EMPTY;
    int32_t rt = rebalance_timeout(g);

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
        maybe_complete_join_phase(gs, g, now_ms);
    }
}

static void maybe_prepare_or_complete(struct cn_groups *gs,
                                      struct cn_group *g, int64_t now_ms,
                                      const char *reason)
{
    if (g->state == CN_GROUP_STABLE ||
        g->state == CN_GROUP_COMPLETING_REBALANCE ||
        g->state == CN_GROUP_EMPTY)
        prepare_rebalance(gs, g, now_ms, reason);
    else
        maybe_complete_join_phase(gs, g, now_ms);
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
            remove_member(gs, g, m, KAFKA_UNKNOWN_MEMBER_ID);
        }
    }
    if (!elect_joined_leader(g) && g->nmembers) {
        /* Only static members that have not rejoined are left: wait for
         * them or for their sessions to expire. */
        g->join_kind = JOIN_NORMAL;
        g->join_deadline_ms = after(now_ms, rebalance_timeout(g));
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
        store(gs, g);
        return;
    }
    g->protocol = xstrdup(select_protocol(g));
    transition(g, CN_GROUP_COMPLETING_REBALANCE, now_ms);
    CN_INFO("group %s: generation %d with %zu members, protocol %s", g->id,
            g->generation, g->nmembers, or_empty(g->protocol));
    for (i = 0; i < g->nmembers; i++) {
        struct member *m = g->members[i];
        member_join_current(gs, g, m, false);
        m->deadline_ms = after(now_ms, m->session_timeout_ms);
        m->is_new = false;
        m->pending_sync = true;
    }
    g->sync_deadline_ms = after(now_ms, rebalance_timeout(g));
}

/* A member went away on its own (session expiry): Kafka's
 * removeMemberAndUpdateClassicGroup. */
static void remove_and_update(struct cn_groups *gs, struct cn_group *g,
                              struct member *m, int64_t now_ms)
{
    remove_member(gs, g, m, KAFKA_UNKNOWN_MEMBER_ID);
    if (g->state == CN_GROUP_STABLE ||
        g->state == CN_GROUP_COMPLETING_REBALANCE)
        maybe_prepare_or_complete(gs, g, now_ms, "member expired");
    else if (g->state == CN_GROUP_PREPARING_REBALANCE && all_joined(g))
        complete_join(gs, g, now_ms);
}

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
    copy_protos(m, rq->protocols, rq->nprotocols);
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
    append_member(g, m);
    if (find_pending(g, id, &at))
        drop_pending(g, at);
    maybe_prepare_or_complete(gs, g, now_ms, "member joined");
}

/* New protocols and timeouts; waiter becomes m's waiting JoinGroup. */
static void update_member(struct cn_groups *gs, struct member *m,
                          const struct cn_join_req *rq, void *waiter)
{
    /* A client that re-sends JoinGroup gave up on the first one; answer
     * it so it does not hang. */
    member_join_error(gs, m, KAFKA_REBALANCE_IN_PROGRESS, m->id);
    copy_protos(m, rq->protocols, rq->nprotocols);
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

    member_join_error(gs, m, KAFKA_FENCED_INSTANCE_ID, m->id);
    member_sync_error(gs, m, KAFKA_FENCED_INSTANCE_ID);
    CN_INFO("group %s: static member %s replaced %s", g->id, new_id, m->id);
    free(m->id);
    m->id = new_id;
    m->pending_sync = false;
    update_member(gs, m, rq, waiter);
    m->deadline_ms = after(now_ms, m->session_timeout_ms);

    switch (g->state) {
    case CN_GROUP_STABLE:
        sel = select_protocol(g);
        if (sel && g->protocol && strcmp(sel, g->protocol) == 0) {
            store(gs, g);
            member_join_current(gs, g, m, g->leader == m);
        } else {
            maybe_prepare_or_complete(gs, g, now_ms,
                                      "static member changed protocols");
        }
        break;
    case CN_GROUP_COMPLETING_REBALANCE:
        /* Rebalance again so every member learns the new id. */
        prepare_rebalance(gs, g, now_ms, "static member rejoined");
        break;
    case CN_GROUP_PREPARING_REBALANCE:
        maybe_complete_join_phase(gs, g, now_ms);
        break;
    default:
        break;
    }
}

/* Kafka's acceptJoiningMember: is there room for this (re)joiner? */
static bool accept_joining(const struct cn_groups *gs,
                           const struct cn_group *g, const char *id)
{
    const struct member *m = find_member(g, id);
    size_t max = (size_t)(gs->cfg.max_size > 0 ? gs->cfg.max_size : 0);

    switch (g->state) {
    case CN_GROUP_PREPARING_REBALANCE:
        /* Counting awaiting members (not all members) lets the last
         * rejoiners be the ones turned away if the limit shrank. */
        return (m && m->awaiting_join) || count_awaiting_join(g) < max;
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

    if (!supports_protocols(g, rq)) {
        join_error(gs, waiter, KAFKA_INCONSISTENT_GROUP_PROTOCOL, "");
        return;
    }
    id = gen_member_id(gs, rq->instance_id ? rq->instance_id
                                           : or_empty(rq->client_id));
    if (rq->instance_id) {
        old = find_static(g, rq->instance_id);
        if (old)
            update_static_member(gs, g, old, id, rq, waiter, now_ms);
        else
            add_member(gs, g, id, rq, waiter, now_ms);
    } else if (rq->version >= 4) {
        /* KIP-394: hand out the id first, so a client that times out
         * and retries does not leave defunct members behind. */
        add_pending(g, id, after(now_ms, rq->session_timeout_ms));
        join_error(gs, waiter, KAFKA_MEMBER_ID_REQUIRED, id);
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

    if (!supports_protocols(g, rq)) {
        join_error(gs, waiter, KAFKA_INCONSISTENT_GROUP_PROTOCOL, mid);
        return;
    }
    if (find_pending(g, mid, &at)) {
        /* Pending ids are only handed to dynamic members. */
        if (rq->instance_id) {
            join_error(gs, waiter, KAFKA_UNKNOWN_SERVER_ERROR, mid);
            return;
        }
        add_member(gs, g, xstrdup(mid), rq, waiter, now_ms);
        return;
    }
    err = validate_member(g, mid, rq->instance_id);
    if (err) {
        join_error(gs, waiter, err, mid);
        return;
    }
    m = find_member(g, mid);
    switch (g->state) {
    case CN_GROUP_PREPARING_REBALANCE:
        update_member(gs, m, rq, waiter);
        maybe_prepare_or_complete(gs, g, now_ms, "member rejoined");
        break;
    case CN_GROUP_COMPLETING_REBALANCE:
        if (member_matches(m, rq)) {
            /* It probably missed our answer: send it again. */
            update_member(gs, m, rq, waiter);
            m->deadline_ms = after(now_ms, m->session_timeout_ms);
            member_join_current(gs, g, m, false);
        } else {
            update_member(gs, m, rq, waiter);
            maybe_prepare_or_complete(gs, g, now_ms,
                                      "member changed metadata");
        }
        break;
    case CN_GROUP_STABLE:
        if (g->leader == m || !member_matches(m, rq)) {
            /* The leader rejoins to force a reassignment (e.g. topic
             * metadata changed). */
            update_member(gs, m, rq, waiter);
            maybe_prepare_or_complete(gs, g, now_ms,
                                      g->leader == m ? "leader rejoined"
                                                     : "member changed "
                                                       "metadata");
        } else {
            update_member(gs, m, rq, waiter);
            m->deadline_ms = after(now_ms, m->session_timeout_ms);
            member_join_current(gs, g, m, false);
        }
        break;
    default:
        join_error(gs, waiter, KAFKA_UNKNOWN_MEMBER_ID, mid);
        break;
    }
}

/* ---------------------------------------------------------------------
 * Public API
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
    gs->rng = cfg->seed ? cfg->seed
                        : (uint64_t)cn_clock_mono_us() ^
                              (uint64_t)cn_clock_wall_ms() << 20;
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
            member_join_error(gs, g->members[i],
                              KAFKA_COORDINATOR_NOT_AVAILABLE, "");
            member_sync_error(gs, g->members[i],
                              KAFKA_COORDINATOR_NOT_AVAILABLE);
        }
    }
}

void cn_groups_free(struct cn_groups *gs)
{
    if (!gs)
        return;
    cn_groups_shutdown(gs);
    while (gs->head)
        destroy_group(gs, gs->head);
    free(gs->buckets);
    free(gs);
}

void cn_groups_join(struct cn_groups *gs, const struct cn_join_req *rq,
                    void *waiter, int64_t now_ms)
{
    struct cn_join_req r = *rq;
    struct cn_group *g;
    bool created = false;

    r.member_id = or_empty(rq->member_id);
    if (gs->shut) {
        join_error(gs, waiter, KAFKA_COORDINATOR_NOT_AVAILABLE, r.member_id);
        return;
    }
    if (!r.group_id || !*r.group_id) {
        join_error(gs, waiter, KAFKA_INVALID_GROUP_ID, r.member_id);
        return;
    }
    if (r.session_timeout_ms < gs->cfg.min_session_timeout_ms ||
        r.session_timeout_ms > gs->cfg.max_session_timeout_ms) {
        join_error(gs, waiter, KAFKA_INVALID_SESSION_TIMEOUT, r.member_id);
        return;
    }
    g = lookup(gs, r.group_id);
    if (!g) {
        if (*r.member_id) {
            join_error(gs, waiter, KAFKA_UNKNOWN_MEMBER_ID, r.member_id);
            return;
        }
        g = create_group(gs, r.group_id, now_ms);
        created = true;
    }
    if (!accept_joining(gs, g, r.member_id)) {
        struct member *m = find_member(g, r.member_id);
        size_t at;
        if (m)
            remove_member(gs, g, m, KAFKA_GROUP_MAX_SIZE_REACHED);
        else if (find_pending(g, r.member_id, &at))
            drop_pending(g, at);
        join_error(gs, waiter, KAFKA_GROUP_MAX_SIZE_REACHED, "");
        maybe_complete_join_phase(gs, g, now_ms);
    } else if (!*r.member_id) {
        join_new_member(gs, g, &r, waiter, now_ms);
    } else {
        join_existing_member(gs, g, &r, waiter, now_ms);
    }
    if (created)
        store(gs, g);
}

static bool protocol_inconsistent(const char *req, const char *have)
{
    return req && have && strcmp(req, have) != 0;
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
        sync_error(gs, waiter, KAFKA_COORDINATOR_NOT_AVAILABLE);
        return;
    }
    if (!rq->group_id || !*rq->group_id) {
        sync_error(gs, waiter, KAFKA_INVALID_GROUP_ID);
        return;
    }
    g = lookup(gs, rq->group_id);
    if (!g) {
        sync_error(gs, waiter, KAFKA_UNKNOWN_MEMBER_ID);
        return;
    }
    err = validate_member(g, mid, rq->instance_id);
    if (!err && rq->generation != g->generation)
        err = KAFKA_ILLEGAL_GENERATION;
    if (!err && (protocol_inconsistent(rq->protocol_type, g->protocol_type) ||
                 protocol_inconsistent(rq->protocol_name, g->protocol)))
        err = KAFKA_INCONSISTENT_GROUP_PROTOCOL;
    if (err) {
        sync_error(gs, waiter, err);
        return;
    }
    m = find_member(g, mid);
    switch (g->state) {
    case CN_GROUP_PREPARING_REBALANCE:
        sync_error(gs, waiter, KAFKA_REBALANCE_IN_PROGRESS);
        break;
    case CN_GROUP_COMPLETING_REBALANCE:
        member_sync_error(gs, m, KAFKA_REBALANCE_IN_PROGRESS);
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
                set_assignment(o, a->assignment, a->len);
            else
                set_assignment(o, NULL, 0);
        }
        store(gs, g);
        transition(g, CN_GROUP_STABLE, now_ms);
        CN_INFO("group %s: stable at generation %d", g->id, g->generation);
        for (i = 0; i < g->nmembers; i++) {
            struct member *o = g->members[i];
            struct cn_sync_result r = {
                .error = KAFKA_NONE,
                .protocol_type = g->protocol_type,
                .protocol_name = g->protocol,
                .assignment = o->assignment,
                .assignment_len = o->assignment_len,
            };
            void *w = o->sync_waiter;
            if (!o->awaiting_sync)
                continue;
            o->awaiting_sync = false;
            o->sync_waiter = NULL;
            o->deadline_ms = after(now_ms, o->session_timeout_ms);
            gs->ops.sync_done(w, &r);
        }
        break;
    case CN_GROUP_STABLE: {
        struct cn_sync_result r = {
            .error = KAFKA_NONE,
            .protocol_type = g->protocol_type,
            .protocol_name = g->protocol,
            .assignment = m->assignment,
            .assignment_len = m->assignment_len,
        };
        m->pending_sync = false;
        m->deadline_ms = after(now_ms, m->session_timeout_ms);
        gs->ops.sync_done(waiter, &r);
        break;
    }
    default:
        sync_error(gs, waiter, KAFKA_UNKNOWN_MEMBER_ID);
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
    g = lookup(gs, group_id);
    if (!g)
        return KAFKA_UNKNOWN_MEMBER_ID;
    err = validate_member(g, member_id, instance_id);
    if (err)
        return err;
    if (generation != g->generation)
        return KAFKA_ILLEGAL_GENERATION;
    m = find_member(g, member_id);
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
    g = lookup(gs, group_id);
    for (i = 0; i < n; i++) {
        const char *mid = or_empty(members[i].member_id);
        const char *inst = members[i].instance_id;
        struct member *m;

        members[i].error = KAFKA_UNKNOWN_MEMBER_ID;
        if (!g)
            continue;
        if (!*mid) {
            /* Admin removal of a static member by instance id alone. */
            m = find_static(g, inst);
            if (!m)
                continue;
        } else if (find_pending(g, mid, &at)) {
            drop_pending(g, at);
            members[i].error = KAFKA_NONE;
            removed++;
            continue;
        } else {
            members[i].error = validate_member(g, mid, inst);
            if (members[i].error)
                continue;
            m = find_member(g, mid);
        }
        CN_INFO("group %s: member %s left", g->id, m->id);
        remove_member(gs, g, m, KAFKA_UNKNOWN_MEMBER_ID);
        members[i].error = KAFKA_NONE;
        removed++;
    }
    if (!removed)
        return KAFKA_NONE;
    if (g->state == CN_GROUP_STABLE ||
        g->state == CN_GROUP_COMPLETING_REBALANCE)
        maybe_prepare_or_complete(gs, g, now_ms, "members left");
    else if (g->state == CN_GROUP_PREPARING_REBALANCE)
        maybe_complete_join_phase(gs, g, now_ms);
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
    g = lookup(gs, group_id);
    if (!g) {
        if (generation >= 0)
            return KAFKA_ILLEGAL_GENERATION;
        /* An admin client or a consumer with manual assignment: Kafka
         * creates a "simple" group for its offsets. */
        create_group(gs, group_id, now_ms);
        return KAFKA_NONE;
    }
    if (generation < 0 && g->state == CN_GROUP_EMPTY)
        return KAFKA_NONE;
    if (generation >= 0 || *mid || instance_id) {
        err = validate_member(g, mid, instance_id);
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
    m = find_member(g, mid);
    if (m)
        m->deadline_ms = after(now_ms, m->session_timeout_ms);
    return KAFKA_NONE;
}

int cn_groups_touch(struct cn_groups *gs, const char *group_id,
                    int64_t now_ms)
{
    if (!group_id || !*group_id)
        return CN_EINVAL;
    if (!lookup(gs, group_id))
        create_group(gs, group_id, now_ms);
    return 0;
}

int16_t cn_groups_delete(struct cn_groups *gs, const char *group_id)
{
    struct cn_group *g;

    if (gs->shut)
        return KAFKA_COORDINATOR_NOT_AVAILABLE;
    if (!group_id || !*group_id)
        return KAFKA_INVALID_GROUP_ID;
    g = lookup(gs, group_id);
    if (!g)
        return KAFKA_GROUP_ID_NOT_FOUND;
    if (g->state != CN_GROUP_EMPTY)
        return KAFKA_NON_EMPTY_GROUP;
    CN_INFO("group %s: deleted", g->id);
    destroy_group(gs, g);
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
            remove_member(gs, g, g->members[i], KAFKA_UNKNOWN_MEMBER_ID);
            any = true;
        }
    }
    if (any)
        prepare_rebalance(gs, g, now_ms, "pending sync expired");
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
                drop_pending(g, at);
                if (g->state == CN_GROUP_PREPARING_REBALANCE &&
                    all_joined(g))
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

/* ---------------------------------------------------------------------
 * Queries
 */

const struct cn_group *cn_groups_find(const struct cn_groups *gs,
                                      const char *group_id)
{
    return lookup(gs, group_id);
}

bool cn_groups_exists(const struct cn_groups *gs, const char *group_id)
{
    return lookup(gs, group_id) != NULL;
}

enum cn_group_state cn_groups_state(const struct cn_groups *gs,
                                    const char *group_id)
{
    const struct cn_group *g = lookup(gs, group_id);
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
    const struct proto *p = member_proto(m, g->protocol);

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

/* ---------------------------------------------------------------------
 * Records
 */

static struct cn_bytes bytes_of_str(const char *s)
{
    return cn_bytes_str(s);
}

static struct cn_bytes bytes_of_buf(const uint8_t *p, size_t len)
{
    return cn_bytes_of(p, (int32_t)len);
}

int cn_group_tombstone_key(const char *group_id, struct cn_wr *key)
{
    struct cn_group_metadata_key k;

    cn_group_metadata_key_init(&k);
    k.group = bytes_of_str(or_empty(group_id));
    cn_wr_i16(key, CN_GROUP_KEY_VERSION);
    cn_group_metadata_key_encode(key, CN_GROUP_KEY_VERSION, &k);
    return key->err;
}

int cn_group_metadata_record(const struct cn_group *g, struct cn_wr *key,
                             struct cn_wr *value)
{
    struct cn_group_metadata_value v;
    struct cn_group_metadata_value_member_metadata *mm;
    size_t i;
    int err;

    err = cn_group_tombstone_key(g->id, key);
    if (err)
        return err;
    cn_group_metadata_value_init(&v);
    v.protocol_type = bytes_of_str(or_empty(g->protocol_type));
    v.generation = g->generation;
    v.protocol = bytes_of_str(g->protocol);
    v.leader = bytes_of_str(g->leader ? g->leader->id : NULL);
    v.current_state_timestamp = g->state_ts_ms;
    mm = xmalloc(g->nmembers * sizeof *mm);
    for (i = 0; i < g->nmembers; i++) {
        const struct member *m = g->members[i];
        const struct proto *p = member_proto(m, g->protocol);
        cn_group_metadata_value_member_metadata_init(&mm[i]);
        mm[i].member_id = bytes_of_str(m->id);
        mm[i].group_instance_id = bytes_of_str(m->instance_id);
        mm[i].client_id = bytes_of_str(m->client_id);
        mm[i].client_host = bytes_of_str(m->client_host);
        mm[i].rebalance_timeout = m->rebalance_timeout_ms;
        mm[i].session_timeout = m->session_timeout_ms;
        mm[i].subscription = p ? bytes_of_buf(p->meta, p->len)
                               : bytes_of_buf(NULL, 0);
        mm[i].assignment = bytes_of_buf(m->assignment, m->assignment_len);
    }
    v.members = mm;
    v.members_len = (int32_t)g->nmembers;
    cn_wr_i16(value, CN_GROUP_VALUE_VERSION);
    cn_group_metadata_value_encode(value, CN_GROUP_VALUE_VERSION, &v);
    free(mm);
    return value->err;
}

/* Replaces g's contents with the record's. */
static int restore_group(struct cn_groups *gs, struct cn_group *g,
                         const struct cn_group_metadata_value *v,
                         int64_t now_ms)
{
    int32_t i;

    for (i = 0; i < v->members_len; i++)
        if (v->members[i].member_id.len <= 0)
            return cn_corrupt("group record: empty member id");
    clear_members(gs, g, KAFKA_COORDINATOR_NOT_AVAILABLE);
    free(g->protocol_type);
    free(g->protocol);
    g->protocol_type = v->protocol_type.len > 0
                           ? xstrndup(v->protocol_type.ptr,
                                      v->protocol_type.len)
                           : NULL;
    g->protocol = xstrndup(v->protocol.ptr, v->protocol.len);
    g->generation = v->generation;
    g->join_kind = JOIN_NONE;
    g->join_deadline_ms = g->sync_deadline_ms = NEVER;
    g->new_member_added = false;
    for (i = 0; i < v->members_len; i++) {
        const struct cn_group_metadata_value_member_metadata *mm =
            &v->members[i];
        struct member *m = xmalloc(sizeof *m);

        m->id = xstrndup(mm->member_id.ptr, mm->member_id.len);
        m->instance_id =
            xstrndup(mm->group_instance_id.ptr, mm->group_instance_id.len);
        m->client_id = mm->client_id.len > 0
                           ? xstrndup(mm->client_id.ptr, mm->client_id.len)
                           : xstrdup("");
        m->client_host =
            mm->client_host.len > 0
                ? xstrndup(mm->client_host.ptr, mm->client_host.len)
                : xstrdup("");
        m->session_timeout_ms = mm->session_timeout;
        m->rebalance_timeout_ms = mm->rebalance_timeout < 0
                                      ? mm->session_timeout
                                      : mm->rebalance_timeout;
        if (g->protocol) {
            /* Only the chosen protocol's subscription is stored. */
            m->protos = xmalloc(sizeof *m->protos);
            m->nprotos = 1;
            m->protos[0].name = xstrdup(g->protocol);
            m->protos[0].len =
                mm->subscription.len > 0 ? (size_t)mm->subscription.len : 0;
            m->protos[0].meta =
                xmemdup(mm->subscription.ptr, m->protos[0].len);
        }
        if (mm->assignment.len > 0)
            set_assignment(m, mm->assignment.ptr,
                           (size_t)mm->assignment.len);
        m->deadline_ms = after(now_ms, m->session_timeout_ms);
        append_member(g, m);
    }
    if (v->leader.len >= 0) {
        char *leader = xstrndup(v->leader.ptr, v->leader.len);
        struct member *l = find_member(g, leader);
        if (l)
            g->leader = l;
        free(leader);
    }
    g->prev_state = CN_GROUP_EMPTY;
    g->state = g->nmembers ? CN_GROUP_STABLE : CN_GROUP_EMPTY;
    g->state_ts_ms = v->current_state_timestamp;
    return 0;
}

int cn_groups_load_record(struct cn_groups *gs, const uint8_t *key,
                          size_t key_len, const uint8_t *value,
                          size_t value_len, int64_t now_ms)
{
    struct cn_group_metadata_key k;
    struct cn_group_metadata_value v;
    struct cn_arena arena;
    struct cn_group *g;
    struct cn_rd rd;
    int16_t version;
    char *id;
    int err;

    cn_rd_init(&rd, key, key_len);
    version = cn_rd_i16(&rd);
    if (rd.err || version < 0)
        return cn_corrupt("group record: bad key version");
    if (version != CN_GROUP_KEY_VERSION)
        return 0; /* offsets (0, 1) or KIP-848 records (3+) */
    cn_arena_init(&arena);
    err = cn_group_metadata_key_decode(&rd, &arena, version, &k);
    if (err || k.group.len <= 0) {
        err = err == CN_ENOMEM ? err : cn_corrupt("group record: bad key");
        goto out_arena;
    }
    id = xstrndup(k.group.ptr, k.group.len);
    g = lookup(gs, id);
    if (!value) {
        if (g)
            destroy_group(gs, g);
        err = 0;
        goto out_id;
    }
    cn_rd_init(&rd, value, value_len);
    version = cn_rd_i16(&rd);
    if (rd.err || version < CN_GROUP_METADATA_VALUE_MIN_VERSION ||
        version > CN_GROUP_METADATA_VALUE_MAX_VERSION) {
        err = cn_corrupt("group record: bad value version");
        goto out_id;
    }
    err = cn_group_metadata_value_decode(&rd, &arena, version, &v);
    if (err) {
        err = err == CN_ENOMEM ? err : cn_corrupt("group record: bad value");
        goto out_id;
    }
    if (!g) {
        g = create_group(gs, id, now_ms);
        err = restore_group(gs, g, &v, now_ms);
        if (err)
            destroy_group(gs, g);
    } else {
        err = restore_group(gs, g, &v, now_ms);
    }
out_id:
    free(id);
out_arena:
    cn_arena_fini(&arena);
    return err;
}
