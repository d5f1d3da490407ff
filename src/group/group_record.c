/*
 * group_record.c - the GroupMetadata record in __consumer_offsets (layout
 * in group.h): writing it, the tombstone key, and replaying it at
 * start-up.  The only part of the coordinator that sees bytes from disk,
 * so the only part that reports corruption.
 */
#include "group/group_int.h"

#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/err.h"
#include "base/rd.h"
#include "proto/gen/group_metadata_key.h"
#include "proto/gen/group_metadata_value.h"
#include "proto/kerr.h"

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
        const struct proto *p = group_member_proto(m, g->protocol);
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
    group_clear_members(gs, g, KAFKA_COORDINATOR_NOT_AVAILABLE);
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
            group_set_assignment(m, mm->assignment.ptr,
                                 (size_t)mm->assignment.len);
        m->deadline_ms = after(now_ms, m->session_timeout_ms);
        group_append_member(g, m);
    }
    if (v->leader.len >= 0) {
        char *leader = xstrndup(v->leader.ptr, v->leader.len);
        struct member *l = group_find_member(g, leader);
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
    g = group_lookup(gs, id);
    if (!value) {
        if (g)
            group_destroy(gs, g);
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
        g = group_create(gs, id, now_ms);
        err = restore_group(gs, g, &v, now_ms);
        if (err)
            group_destroy(gs, g);
    } else {
        err = restore_group(gs, g, &v, now_ms);
    }
out_id:
    free(id);
out_arena:
    cn_arena_fini(&arena);
    return err;
}
