/*
 * h_group_delete.c - OffsetDelete and DeleteGroups: tombstones in the
 * group's __consumer_offsets partition, applied once durable.
 */
#include <stdlib.h>
#include <string.h>

#include "node/authz.h"
#include "node/group_coord.h"
#include "node/group_int.h"
#include "handlers/handlers.h"
#include "handlers/quotas.h"
#include "proto/gen/msgs.h"
#include "proto/kerr.h"

/* ---- OffsetDelete ------------------------------------------------------ */

struct tombstones {
    struct cn_sync_waiter waiter; /* first */
    struct cn_req_header h;
    const char *group;
    void *rs;         /* the response being built */
    bool whole_group; /* DeleteGroups: all keys and metadata */
};

/* Does a Stable group's consumer subscription name the topic?  Kafka
 * refuses to delete offsets a live member is using. */
static bool group_subscribed(struct cn_req *req, const struct cn_group *g,
                             struct cn_bytes topic)
{
    if (strcmp(cn_group_protocol_type(g), "consumer") != 0)
        return false;
    for (size_t i = 0; i < cn_group_nmembers(g); i++) {
        struct cn_member_info mi;
        cn_group_member(g, i, &mi);
        if (!mi.metadata || mi.metadata_len < 2)
            continue;
        struct cn_rd rd;
        cn_rd_init(&rd, mi.metadata, mi.metadata_len);
        int16_t version = cn_rd_i16(&rd);
        struct cn_consumer_protocol_subscription sub;
        if (version < 0 ||
            cn_consumer_protocol_subscription_decode(
                &rd, &req->arena,
                version > CN_CONSUMER_PROTOCOL_SUBSCRIPTION_MAX_VERSION
                    ? CN_CONSUMER_PROTOCOL_SUBSCRIPTION_MAX_VERSION
                    : version,
                &sub) != 0)
            return true; /* cannot tell: keep the offsets */
        for (int32_t t = 0; t < sub.topics_len; t++)
            if (cn_bytes_eq(sub.topics[t], topic))
                return true;
    }
    return false;
}

static void offset_delete_synced(struct cn_broker *b, struct cn_sync_waiter *w)
{
    struct tombstones *tw = (struct tombstones *)w;
    struct cn_offset_delete_response *rs = tw->rs;
    struct cn_req *req = w->req;
    for (int32_t i = 0; i < rs->topics_len; i++) {
        char *topic = cn_gc_cstr(req, rs->topics[i].name);
        for (int32_t j = 0; j < rs->topics[i].partitions_len; j++) {
            struct cn_offset_delete_response_offset_delete_response_partition
                *rp = &rs->topics[i].partitions[j];
            if (rp->error_code)
                continue;
            if (w->err || !topic)
                rp->error_code = w->err ? cn_gc_write_kerr(w->err)
                                        : KAFKA_COORDINATOR_NOT_AVAILABLE;
            else
                cn_offsets_delete(b->gc->offsets, tw->group, topic,
                                  rp->partition_index);
        }
    }
    rs->throttle_time_ms = cn_quota_request_answer(b, req, &tw->h);
    cn_resp_begin(req, &tw->h);
    cn_offset_delete_response_encode(&req->resp, tw->h.api_version, rs);
    cn_req_done(req);
}

void cn_h_offset_delete(struct cn_broker *b, struct cn_req *req,
                        const struct cn_req_header *h, struct cn_rd *body)
{
    struct cn_offset_delete_request rq;
    int err = cn_offset_delete_request_decode(body, &req->arena,
                                              h->api_version, &rq);
    if (err) {
        cn_req_bad(req, h, err);
        return;
    }
    struct tombstones *tw = cn_arena_calloc(&req->arena, 1, sizeof *tw);
    struct cn_offset_delete_response *rs = cn_arena_calloc(&req->arena, 1,
                                                           sizeof *rs);
    int32_t nt = rq.topics_len > 0 ? rq.topics_len : 0;
    if (!tw || !rs) {
        cn_req_bad(req, h, CN_ENOMEM);
        return;
    }
    cn_offset_delete_response_init(rs);
    rs->topics_len = 0;
    tw->h = *h;
    tw->rs = rs;
    tw->waiter.req = req;
    tw->waiter.finish = offset_delete_synced;
    tw->group = cn_gc_cstr(req, rq.group_id);
    struct cn_partition *gp = NULL;
    const struct cn_group *g = NULL;
    if (!cn_authz(b, req, CN_ACL_OP_DELETE, CN_ACL_RT_GROUP, rq.group_id)) {
        rs->error_code = KAFKA_GROUP_AUTHORIZATION_FAILED;
    } else if (!tw->group || !tw->group[0]) {
        rs->error_code = KAFKA_INVALID_GROUP_ID;
    } else if (!(gp = cn_group_coord_partition(b, rq.group_id))) {
        rs->error_code = KAFKA_COORDINATOR_NOT_AVAILABLE;
    } else if ((rs->error_code = cn_group_coord_check(b, rq.group_id))) {
        /* another broker's group */
    } else if (!(g = cn_groups_find(b->gc->groups, tw->group)) &&
               cn_offsets_count(b->gc->offsets, tw->group) == 0) {
        rs->error_code = KAFKA_GROUP_ID_NOT_FOUND;
    } else if (g && cn_group_state(g) != CN_GROUP_EMPTY &&
               strcmp(cn_group_protocol_type(g), "consumer") != 0 &&
               cn_group_protocol_type(g)[0] != '\0') {
        rs->error_code = KAFKA_NON_EMPTY_GROUP;
    }
    size_t nkeys = 0;
    if (!rs->error_code) {
        rs->topics = cn_arena_calloc(&req->arena, (size_t)nt + 1,
                                     sizeof *rs->topics);
        if (!rs->topics) {
            cn_req_bad(req, h, CN_ENOMEM);
            return;
        }
        rs->topics_len = nt;
        for (int32_t i = 0; i < nt; i++) {
            const struct cn_offset_delete_request_offset_delete_request_topic
                *qt = &rq.topics[i];
            struct cn_offset_delete_response_offset_delete_response_topic *rt =
                &rs->topics[i];
            rt->name = qt->name;
            int32_t np = qt->partitions_len > 0 ? qt->partitions_len : 0;
            rt->partitions = cn_arena_calloc(&req->arena, (size_t)np + 1,
                                             sizeof *rt->partitions);
            if (!rt->partitions) {
                cn_req_bad(req, h, CN_ENOMEM);
                return;
            }
            rt->partitions_len = np;
            bool subscribed = g && cn_group_state(g) != CN_GROUP_EMPTY &&
                              group_subscribed(req, g, qt->name);
            bool topic_ok = cn_authz(b, req, CN_ACL_OP_READ, CN_ACL_RT_TOPIC,
                                     qt->name);
            for (int32_t j = 0; j < np; j++) {
                int32_t part = qt->partitions[j].partition_index;
                rt->partitions[j].partition_index = part;
                if (!topic_ok)
                    rt->partitions[j].error_code =
                        KAFKA_TOPIC_AUTHORIZATION_FAILED;
                else if (!cn_partition_find(b, qt->name, part))
                    rt->partitions[j].error_code =
                        KAFKA_UNKNOWN_TOPIC_OR_PARTITION;
                else if (subscribed)
                    rt->partitions[j].error_code =
                        KAFKA_GROUP_SUBSCRIBED_TO_TOPIC;
                else
                    nkeys++;
            }
        }
    }
    struct cn_bytes *keys = cn_arena_calloc(&req->arena, nkeys + 1,
                                            sizeof *keys);
    struct cn_bytes *vals = cn_arena_calloc(&req->arena, nkeys + 1,
                                            sizeof *vals);
    if (!keys || !vals) {
        cn_req_bad(req, h, CN_ENOMEM);
        return;
    }
    size_t k = 0;
    struct cn_wr kw;
    cn_wr_init(&kw, 64);
    for (int32_t i = 0; i < rs->topics_len; i++) {
        char *topic = cn_gc_cstr(req, rs->topics[i].name);
        for (int32_t j = 0; j < rs->topics[i].partitions_len; j++) {
            if (rs->topics[i].partitions[j].error_code)
                continue;
            cn_wr_reset(&kw);
            if (!topic ||
                cn_offsets_tombstone_key(
                    &kw, tw->group, topic,
                    rs->topics[i].partitions[j].partition_index) != 0) {
                rs->topics[i].partitions[j].error_code = KAFKA_INVALID_REQUEST;
                continue;
            }
            keys[k] = cn_gc_arena_bytes(req, &kw);
            vals[k] = CN_BYTES_NULL;
            k++;
        }
    }
    cn_wr_fini(&kw);
    if (k == 0 || cn_gc_write(b, gp, keys, vals, k, -1, -1, &tw->waiter)) {
        if (k)
            rs->error_code = KAFKA_COORDINATOR_NOT_AVAILABLE;
        rs->throttle_time_ms = cn_quota_request_answer(b, req, h);
        cn_resp_begin(req, h);
        cn_offset_delete_response_encode(&req->resp, h->api_version, rs);
        cn_req_done(req);
    }
}

/* ---- DeleteGroups ------------------------------------------------------ */

/* Groups are deleted one write at a time, in request order: each group's
 * tombstones go to its own partition. */
struct delete_state {
    struct cn_sync_waiter waiter; /* first */
    struct cn_broker *b;
    struct cn_req_header h;
    struct cn_delete_groups_request rq;
    struct cn_delete_groups_response rs;
    int32_t next; /* group being deleted */
};

/* The tombstone keys of one group, in the request's arena. */
struct key_list {
    struct cn_req *req;
    const char *group;
    struct cn_bytes *keys;
    size_t n, cap;
};

/* Appends a finished key writer's bytes; 0 or CN_ENOMEM. */
static int key_list_push(struct key_list *kl, const struct cn_wr *w)
{
    if (kl->n == kl->cap) {
        size_t cap = kl->cap ? kl->cap * 2 : 16;
        struct cn_bytes *keys = cn_arena_calloc(&kl->req->arena, cap,
                                                sizeof *keys);
        if (!keys)
            return CN_ENOMEM;
        if (kl->n)
            memcpy(keys, kl->keys, kl->n * sizeof *keys);
        kl->keys = keys;
        kl->cap = cap;
    }
    struct cn_bytes key = cn_gc_arena_bytes(kl->req, w);
    if (cn_bytes_is_null(key))
        return CN_ENOMEM;
    kl->keys[kl->n++] = key;
    return 0;
}

static int collect_key(void *arg, const char *topic, int32_t partition,
                       const struct cn_offset_value *v)
{
    struct key_list *kl = arg;
    (void)v;
    struct cn_wr kw;
    cn_wr_init(&kw, 64);
    int rc = cn_offsets_tombstone_key(&kw, kl->group, topic, partition);
    if (!rc)
        rc = key_list_push(kl, &kw);
    cn_wr_fini(&kw);
    return rc;
}

static void delete_next(struct cn_broker *b, struct delete_state *ds);

static void delete_synced(struct cn_broker *b, struct cn_sync_waiter *w)
{
    struct delete_state *ds = (struct delete_state *)w;
    struct cn_delete_groups_response_deletable_group_result *r =
        &ds->rs.results[ds->next];
    char *group = cn_gc_cstr(w->req, r->group_id);
    if (w->err || !group)
        r->error_code = w->err ? cn_gc_write_kerr(w->err)
                               : KAFKA_COORDINATOR_NOT_AVAILABLE;
    else
        cn_offsets_delete_group(b->gc->offsets, group);
    ds->next++;
    delete_next(b, ds);
}

static void delete_next(struct cn_broker *b, struct delete_state *ds)
{
    struct cn_req *req = ds->waiter.req;
    for (; ds->next < ds->rs.results_len; ds->next++) {
        struct cn_delete_groups_response_deletable_group_result *r =
            &ds->rs.results[ds->next];
        char *group = cn_gc_cstr(req, r->group_id);
        struct cn_partition *gp = NULL;
        if (!cn_authz(b, req, CN_ACL_OP_DELETE, CN_ACL_RT_GROUP,
                      r->group_id)) {
            r->error_code = KAFKA_GROUP_AUTHORIZATION_FAILED;
            continue;
        }
        if (!group || !group[0]) {
            r->error_code = KAFKA_INVALID_GROUP_ID;
            continue;
        }
        if (!(gp = cn_group_coord_partition(b, r->group_id))) {
            r->error_code = KAFKA_COORDINATOR_NOT_AVAILABLE;
            continue;
        }
        if ((r->error_code = cn_group_coord_check(b, r->group_id)))
            continue;
        bool had_offsets = cn_offsets_count(b->gc->offsets, group) > 0 ||
                           cn_offsets_pending_count(b->gc->offsets, group);
        r->error_code = cn_groups_delete(b->gc->groups, group);
        if (r->error_code == KAFKA_GROUP_ID_NOT_FOUND && had_offsets)
            r->error_code = KAFKA_NONE;
        if (r->error_code)
            continue;
        struct key_list kl = {req, group, NULL, 0, 0};
        int rc = cn_offsets_foreach_key(b->gc->offsets, group, collect_key,
                                        &kl);
        struct cn_wr gk;
        cn_wr_init(&gk, 64);
        if (!rc)
            rc = cn_group_tombstone_key(group, &gk);
        if (!rc)
            rc = key_list_push(&kl, &gk);
        cn_wr_fini(&gk);
        struct cn_bytes *vals = rc ? NULL
                                   : cn_arena_calloc(&req->arena, kl.n,
                                                     sizeof *vals);
        for (size_t i = 0; vals && i < kl.n; i++)
            vals[i] = CN_BYTES_NULL;
        if (!vals || cn_gc_write(b, gp, kl.keys, vals, kl.n, -1, -1,
                                 &ds->waiter) != 0) {
            r->error_code = KAFKA_COORDINATOR_NOT_AVAILABLE;
            continue;
        }
        return; /* delete_synced goes on with the next group */
    }
    cn_resp_begin(req, &ds->h);
    cn_delete_groups_response_encode(&req->resp, ds->h.api_version, &ds->rs);
    cn_req_done(req);
}

void cn_h_delete_groups(struct cn_broker *b, struct cn_req *req,
                        const struct cn_req_header *h, struct cn_rd *body)
{
    struct delete_state *ds = cn_arena_calloc(&req->arena, 1, sizeof *ds);
    if (!ds) {
        cn_req_bad(req, h, CN_ENOMEM);
        return;
    }
    int err = cn_delete_groups_request_decode(body, &req->arena,
                                              h->api_version, &ds->rq);
    if (err) {
        cn_req_bad(req, h, err);
        return;
    }
    req->handler_state = ds;
    ds->b = b;
    ds->h = *h;
    ds->waiter.req = req;
    ds->waiter.finish = delete_synced;
    cn_delete_groups_response_init(&ds->rs);
    int32_t n = ds->rq.groups_names_len > 0 ? ds->rq.groups_names_len : 0;
    ds->rs.results = cn_arena_calloc(&req->arena, (size_t)n + 1,
                                     sizeof *ds->rs.results);
    if (!ds->rs.results) {
        cn_req_bad(req, h, CN_ENOMEM);
        return;
    }
    ds->rs.results_len = n;
    for (int32_t i = 0; i < n; i++)
        ds->rs.results[i].group_id = ds->rq.groups_names[i];
    if (!b->gc) {
        for (int32_t i = 0; i < n; i++)
            ds->rs.results[i].error_code = KAFKA_COORDINATOR_NOT_AVAILABLE;
        ds->next = n;
    }
    delete_next(b, ds);
}
