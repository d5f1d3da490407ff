/*
 * group_int.h - what the group coordinator's own files share: the group
 * and member records and the helpers that work on them.  Others use
 * group.h; nothing here is part of the module's interface.
 *
 * Each group is a hash-table entry holding its members in join order (the
 * first is the fallback leader, as Kafka picks the first remaining member
 * when the leader goes) and the "pending" member ids handed out with
 * MEMBER_ID_REQUIRED (KIP-394) that have not joined yet.
 *
 * Runs on: loop.
 */
#ifndef CN_GROUP_GROUP_INT_H
#define CN_GROUP_GROUP_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/say.h"
#include "group/group.h"


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
    uint64_t store_token;     /* the leader's assignment being made durable
                                 (ops.store_sync), 0 when none */
    int32_t store_generation; /* the generation it was written for */
    uint64_t create_token;    /* the creating JoinGroup's write
                                 (ops.store_created), 0 when none */
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
    uint64_t tokens; /* last store_sync/store_created token handed out */
    bool shut;       /* cn_groups_shutdown() ran */
};

/* ---------------------------------------------------------------------
 * Allocation and small helpers
 */

/* Allocation failure aborts (see group.c).  Static inline: every file
 * needs these, and they stay out of the library's global symbols. */

static inline void oom(void)
{
    CN_ERROR("group coordinator: out of memory");
    abort();
}

static inline void *xmalloc(size_t n)
{
    void *p = calloc(1, n ? n : 1);
    if (!p)
        oom();
    return p;
}

static inline void *xrealloc(void *p, size_t n)
{
    p = realloc(p, n ? n : 1);
    if (!p)
        oom();
    return p;
}

static inline char *xstrdup(const char *s)
{
    char *p;
    if (!s)
        return NULL;
    p = strdup(s);
    if (!p)
        oom();
    return p;
}

static inline char *xstrndup(const uint8_t *s, int32_t len)
{
    char *p;
    if (len < 0)
        return NULL;
    p = xmalloc((size_t)len + 1);
    if (len)
        memcpy(p, s, (size_t)len);
    return p;
}

static inline uint8_t *xmemdup(const uint8_t *s, size_t len)
{
    uint8_t *p;
    if (!len)
        return NULL;
    p = xmalloc(len);
    memcpy(p, s, len);
    return p;
}

static inline bool str_eq(const char *a, const char *b)
{
    if (!a || !b)
        return a == b;
    return strcmp(a, b) == 0;
}

static inline const char *or_empty(const char *s)
{
    return s ? s : "";
}

/* now + delta, at least 1 ms ahead so a tick never re-arms what it just
 * fired (a zero rebalance timeout would otherwise spin). */
static inline int64_t after(int64_t now_ms, int32_t delta_ms)
{
    if (delta_ms < 1)
        delta_ms = 1;
    return now_ms > NEVER - delta_ms ? NEVER : now_ms + delta_ms;
}

/* ---------------------------------------------------------------------
 * Members (group_member.c)
 */

char *group_gen_member_id(struct cn_groups *gs, const char *prefix);
void group_copy_protos(struct member *m, const struct cn_join_protocol *p,
                       size_t n);
void group_free_member(struct member *m);
const struct proto *group_member_proto(const struct member *m,
                                       const char *name);
bool group_member_matches(const struct member *m,
                          const struct cn_join_req *rq);
void group_set_assignment(struct member *m, const uint8_t *p, size_t len);
struct member *group_find_member(const struct cn_group *g, const char *id);
struct member *group_find_static(const struct cn_group *g,
                                 const char *instance_id);
bool group_find_pending(const struct cn_group *g, const char *id,
                        size_t *at);
void group_drop_pending(struct cn_group *g, size_t at);
void group_add_pending(struct cn_group *g, char *id, int64_t deadline_ms);
int16_t group_validate_member(const struct cn_group *g, const char *id,
                              const char *instance_id);
size_t group_count_awaiting_join(const struct cn_group *g);
bool group_all_joined(const struct cn_group *g);
int32_t group_rebalance_timeout(const struct cn_group *g);
bool group_supports_protocols(const struct cn_group *g,
                              const struct cn_join_req *rq);
const char *group_select_protocol(const struct cn_group *g);

void group_join_error(struct cn_groups *gs, void *waiter, int16_t error,
                      const char *member_id);
void group_sync_error(struct cn_groups *gs, void *waiter, int16_t error);
void group_member_join_error(struct cn_groups *gs, struct member *m,
                             int16_t error, const char *member_id);
void group_member_sync_error(struct cn_groups *gs, struct member *m,
                             int16_t error);
void group_member_join_current(struct cn_groups *gs, struct cn_group *g,
                               struct member *m, bool skip_assignment);

/* ---------------------------------------------------------------------
 * Groups table (group_table.c)
 */

struct cn_group *group_lookup(const struct cn_groups *gs, const char *id);
struct cn_group *group_create(struct cn_groups *gs, const char *id,
                              int64_t now_ms);
void group_clear_members(struct cn_groups *gs, struct cn_group *g,
                         int16_t error);
void group_destroy(struct cn_groups *gs, struct cn_group *g);

/* ---------------------------------------------------------------------
 * State machine (group.c)
 */

void group_store(struct cn_groups *gs, const struct cn_group *g);
void group_append_member(struct cn_group *g, struct member *m);
void group_remove_member(struct cn_groups *gs, struct cn_group *g,
                         struct member *m, int16_t error);
void group_maybe_complete_join_phase(struct cn_groups *gs,
                                     struct cn_group *g, int64_t now_ms);
void group_prepare_rebalance(struct cn_groups *gs, struct cn_group *g,
                             int64_t now_ms, const char *reason);
void group_maybe_prepare_or_complete(struct cn_groups *gs,
                                     struct cn_group *g, int64_t now_ms,
                                     const char *reason);

#endif
