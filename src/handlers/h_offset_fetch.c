/*
 * h_offset_fetch.c - OffsetFetch (v0-7 for one group, v8+ batched), with
 * require_stable: a partition with offsets pending in an open transaction
 * answers UNSTABLE_OFFSET_COMMIT, so a read_committed consumer waits
 * instead of starting from an offset that may still change.
 */
#include <string.h>

#include "node/authz.h"
#include "node/group_coord.h"
#include "node/group_int.h"
#include "handlers/handlers.h"
#include "proto/gen/msgs.h"
#include "proto/kerr.h"

/* ---- OffsetFetch ------------------------------------------------------- */

/* One answered partition, before it is put in the version's shape. */
struct fetched {
    struct cn_bytes topic;
    int32_t partition;
    int64_t offset;
    int32_t leader_epoch;
    struct cn_bytes metadata;
    int16_t error;
};

struct fetched_list {
    struct cn_req *req;
    struct fetched *v;
    size_t n, cap;
};

static struct fetched *fetched_add(struct fetched_list *l)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        struct fetched *v = cn_arena_calloc(&l->req->arena, cap, sizeof *v);
        if (!v)
            return NULL;
        if (l->n)
            memcpy(v, l->v, l->n * sizeof *v);
        l->v = v;
        l->cap = cap;
    }
    return &l->v[l->n++];
}

struct fetch_all_ctx {
    struct fetched_list *l;
    const char *group;
    const struct cn_offsets *os;
    bool require_stable;
};

static void fetched_fill(struct fetched *f, const struct cn_offsets *os,
                         const char *group, const char *topic,
                         int32_t partition, bool require_stable)
{
    f->partition = partition;
    f->offset = -1;
    f->leader_epoch = -1;
    f->metadata = cn_bytes_str("");
    f->error = KAFKA_NONE;
    if (require_stable &&
        cn_offsets_has_pending(os, group, topic, partition)) {
        f->error = KAFKA_UNSTABLE_OFFSET_COMMIT;
        return;
    }
    struct cn_offset_value v;
    if (cn_offsets_get(os, group, topic, partition, &v) == 0) {
        f->offset = v.offset;
        f->leader_epoch = v.leader_epoch;
        f->metadata = v.metadata; /* lives until the key changes: the
                                     response is encoded before that */
    }
}

static int fetch_all_visit(void *arg, const char *topic, int32_t partition,
                           const struct cn_offset_value *v)
{
    struct fetch_all_ctx *c = arg;
    (void)v;
    struct fetched *f = fetched_add(c->l);
    if (!f)
        return CN_ENOMEM;
    size_t n = strlen(topic);
    char *copy = cn_arena_alloc(&c->l->req->arena, n + 1);
    if (!copy)
        return CN_ENOMEM;
    memcpy(copy, topic, n + 1);
    f->topic = cn_bytes_of((const uint8_t *)copy, (int32_t)n);
    fetched_fill(f, c->os, c->group, copy, partition, c->require_stable);
    return 0;
}

/* Answers one group: the named partitions, or all with offsets when
 * topics is NULL (n < 0).  Topics and partitions come as parallel views so
 * both request shapes (v0-7, v8+) share this. */
static int fetch_group(struct cn_broker *b, struct fetched_list *l,
                       const char *group, bool require_stable,
                       const struct cn_bytes *topic_names,
                       int32_t *const *parts, const int32_t *nparts,
                       int32_t ntopics)
{
    const struct cn_offsets *os = b->gc->offsets;
    if (ntopics < 0) {
        struct fetch_all_ctx c = {l, group, os, require_stable};
        /* Keys with only pending offsets are listed too, so a
         * read_committed consumer learns they are unstable. */
        return cn_offsets_foreach_key(os, group, fetch_all_visit, &c);
    }
    for (int32_t i = 0; i < ntopics; i++) {
        char *topic = cn_gc_cstr(l->req, topic_names[i]);
        if (!topic)
            return CN_ENOMEM;
        for (int32_t j = 0; j < (nparts[i] > 0 ? nparts[i] : 0); j++) {
            struct fetched *f = fetched_add(l);
            if (!f)
                return CN_ENOMEM;
            f->topic = topic_names[i];
            fetched_fill(f, os, group, topic, parts[i][j], require_stable);
        }
    }
    return 0;
}

/* Kafka: partitions of topics the caller may not describe get
 * TOPIC_AUTHORIZATION_FAILED when named, and are left out of an
 * all-topics answer. */
static void authz_filter(struct cn_broker *b, struct fetched_list *l, bool all)
{
    size_t keep = 0;
    for (size_t i = 0; i < l->n; i++) {
        struct fetched *f = &l->v[i];
        if (!cn_authz_quiet(b, l->req, CN_ACL_OP_DESCRIBE, CN_ACL_RT_TOPIC,
                            f->topic)) {
            if (all)
                continue;
            f->offset = -1;
            f->leader_epoch = -1;
            f->metadata = cn_bytes_str("");
            f->error = KAFKA_TOPIC_AUTHORIZATION_FAILED;
        }
        l->v[keep++] = *f;
    }
    l->n = keep;
}

/* Groups the flat list by topic (in first-seen order) into the v0-7 or
 * v8+ response arrays.  The two shapes have the same fields.  TOPIC_T and
 * PART_T are types, which cannot take parentheses. */
/* NOLINTBEGIN(bugprone-macro-parentheses) */
#define GROUP_BY_TOPIC(l, TOPIC_T, PART_T, out, out_len)                     \
    do {                                                                     \
        size_t nt_ = 0;                                                      \
        TOPIC_T *ts_ = cn_arena_calloc(&(l)->req->arena, (l)->n + 1,         \
                                       sizeof *ts_);                         \
        if (!ts_)                                                            \
            return CN_ENOMEM;                                                \
        for (size_t i_ = 0; i_ < (l)->n; i_++) {                             \
            size_t t_ = 0;                                                   \
            while (t_ < nt_ && !cn_bytes_eq(ts_[t_].name, (l)->v[i_].topic)) \
                t_++;                                                        \
            if (t_ == nt_) {                                                 \
                ts_[nt_].name = (l)->v[i_].topic;                            \
                ts_[nt_].partitions = cn_arena_calloc(&(l)->req->arena,      \
                                                      (l)->n,                \
                                                      sizeof(PART_T));       \
                if (!ts_[nt_].partitions)                                    \
                    return CN_ENOMEM;                                        \
                nt_++;                                                       \
            }                                                                \
            PART_T *p_ = &ts_[t_].partitions[ts_[t_].partitions_len++];      \
            p_->partition_index = (l)->v[i_].partition;                      \
            p_->committed_offset = (l)->v[i_].offset;                        \
            p_->committed_leader_epoch = (l)->v[i_].leader_epoch;            \
            p_->metadata = (l)->v[i_].metadata;                              \
            p_->error_code = (l)->v[i_].error;                               \
        }                                                                    \
        (out) = ts_;                                                         \
        (out_len) = (int32_t)nt_;                                            \
    } while (0)
/* NOLINTEND(bugprone-macro-parentheses) */

static int fetch_v0_7(struct cn_broker *b, struct cn_req *req,
                      const struct cn_offset_fetch_request *rq,
                      struct cn_offset_fetch_response *rs)
{
    struct fetched_list l = {req, NULL, 0, 0};
    char *group = cn_gc_cstr(req, rq->group_id);
    if (!group)
        return CN_ENOMEM;
    if (!cn_authz(b, req, CN_ACL_OP_DESCRIBE, CN_ACL_RT_GROUP, rq->group_id)) {
        rs->error_code = KAFKA_GROUP_AUTHORIZATION_FAILED;
        return 0;
    }
    if ((rs->error_code = cn_group_coord_check(b, rq->group_id)))
        return 0;
    int32_t nt = rq->topics_len;
    struct cn_bytes *names = cn_arena_calloc(&req->arena,
                                             (size_t)(nt > 0 ? nt : 0) + 1,
                                             sizeof *names);
    int32_t **parts = cn_arena_calloc(&req->arena,
                                      (size_t)(nt > 0 ? nt : 0) + 1,
                                      sizeof *parts);
    int32_t *np = cn_arena_calloc(&req->arena, (size_t)(nt > 0 ? nt : 0) + 1,
                                  sizeof *np);
    if (!names || !parts || !np)
        return CN_ENOMEM;
    for (int32_t i = 0; i < nt; i++) {
        names[i] = rq->topics[i].name;
        parts[i] = rq->topics[i].partition_indexes;
        np[i] = rq->topics[i].partition_indexes_len;
    }
    int rc = fetch_group(b, &l, group, rq->require_stable, names, parts, np,
                         nt);
    if (rc)
        return rc;
    authz_filter(b, &l, nt < 0);
    GROUP_BY_TOPIC(
        &l, struct cn_offset_fetch_response_offset_fetch_response_topic,
        struct cn_offset_fetch_response_offset_fetch_response_partition,
        rs->topics, rs->topics_len);
    return 0;
}

static int fetch_v8(struct cn_broker *b, struct cn_req *req,
                    const struct cn_offset_fetch_request *rq,
                    struct cn_offset_fetch_response *rs)
{
    int32_t ng = rq->groups_len > 0 ? rq->groups_len : 0;
    rs->groups = cn_arena_calloc(&req->arena, (size_t)ng + 1,
                                 sizeof *rs->groups);
    if (!rs->groups)
        return CN_ENOMEM;
    rs->groups_len = ng;
    for (int32_t g = 0; g < ng; g++) {
        const struct cn_offset_fetch_request_offset_fetch_request_group *qg =
            &rq->groups[g];
        struct cn_offset_fetch_response_offset_fetch_response_group *rg =
            &rs->groups[g];
        rg->group_id = qg->group_id;
        char *group = cn_gc_cstr(req, qg->group_id);
        if (!group)
            return CN_ENOMEM;
        if (!cn_authz(b, req, CN_ACL_OP_DESCRIBE, CN_ACL_RT_GROUP,
                      qg->group_id)) {
            rg->error_code = KAFKA_GROUP_AUTHORIZATION_FAILED;
            rg->topics_len = 0;
            continue;
        }
        if ((rg->error_code = cn_group_coord_check(b, qg->group_id))) {
            rg->topics_len = 0;
            continue;
        }
        int32_t nt = qg->topics_len;
        size_t cnt = (size_t)(nt > 0 ? nt : 0) + 1;
        struct cn_bytes *names = cn_arena_calloc(&req->arena, cnt,
                                                 sizeof *names);
        int32_t **parts = cn_arena_calloc(&req->arena, cnt, sizeof *parts);
        int32_t *np = cn_arena_calloc(&req->arena, cnt, sizeof *np);
        if (!names || !parts || !np)
            return CN_ENOMEM;
        for (int32_t i = 0; i < nt; i++) {
            names[i] = qg->topics[i].name;
            parts[i] = qg->topics[i].partition_indexes;
            np[i] = qg->topics[i].partition_indexes_len;
        }
        struct fetched_list l = {req, NULL, 0, 0};
        int rc = fetch_group(b, &l, group, rq->require_stable, names, parts,
                             np, nt);
        if (rc)
            return rc;
        authz_filter(b, &l, nt < 0);
        GROUP_BY_TOPIC(
            &l, struct cn_offset_fetch_response_offset_fetch_response_topics,
            struct cn_offset_fetch_response_offset_fetch_response_partitions,
            rg->topics, rg->topics_len);
    }
    return 0;
}

void cn_h_offset_fetch(struct cn_broker *b, struct cn_req *req,
                       const struct cn_req_header *h, struct cn_rd *body)
{
    struct cn_offset_fetch_request rq;
    int err = cn_offset_fetch_request_decode(body, &req->arena, h->api_version,
                                             &rq);
    if (err) {
        cn_req_bad(req, h, err);
        return;
    }
    struct cn_offset_fetch_response rs;
    cn_offset_fetch_response_init(&rs);
    rs.topics_len = 0;
    rs.groups_len = 0;
    int rc = h->api_version >= 8 ? fetch_v8(b, req, &rq, &rs)
                                 : fetch_v0_7(b, req, &rq, &rs);
    if (rc) {
        cn_req_bad(req, h, rc);
        return;
    }
    cn_resp_begin(req, h);
    cn_offset_fetch_response_encode(&req->resp, h->api_version, &rs);
    cn_req_done(req);
}
