/* quota_store.c - client quotas to and from their file image; see
 * quota_store.h. */
#include "quota_store.h"

#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/crc32c.h"
#include "base/err.h"
#include "base/rd.h"
#include "base/wr.h"
#include "proto/quotas.h"

#define MAGIC "CNQUOTA1"
#define MAGIC_LEN 8

static void add_part(struct cn_cq_entity *ents, int32_t *n, const char *type,
                     enum cn_quota_part part, const char *name)
{
    if (part == CN_QP_NONE)
        return;
    ents[*n].type = cn_bytes_str(type);
    ents[*n].name = part == CN_QP_NAME ? cn_bytes_str(name) : CN_BYTES_NULL;
    ++*n;
}

int cn_quota_store_encode(const struct cn_quota *q, uint8_t **out,
                          size_t *len)
{
    struct cn_wr w;
    cn_wr_init(&w, 256);
    cn_wr_raw(&w, MAGIC, MAGIC_LEN);
    size_t count_at = cn_wr_reserve(&w, 4);
    uint32_t count = 0;
    for (size_t i = 0; i < cn_quota_count(q); i++) {
        double vals[CN_QK_COUNT];
        bool has[CN_QK_COUNT];
        const struct cn_quota_entity *e = cn_quota_at(q, i, vals, has);
        struct cn_cq_entity ents[2];
        int32_t ne = 0;
        add_part(ents, &ne, CN_QUOTA_TYPE_USER, e->user_part, e->user);
        add_part(ents, &ne, CN_QUOTA_TYPE_CLIENT, e->client_part, e->client);
        for (int k = 0; k < CN_QK_COUNT; k++) {
            if (!has[k])
                continue;
            struct cn_client_quota_record r = {
                ents, ne, cn_bytes_str(cn_quota_key_name(k)), vals[k], false};
            size_t len_at = cn_wr_reserve(&w, 4);
            size_t start = w.len;
            cn_client_quota_record_encode(&w, &r);
            if (w.err)
                break;
            cn_wr_patch_u32(&w, len_at, (uint32_t)(w.len - start));
            count++;
        }
    }
    if (!w.err)
        cn_wr_patch_u32(&w, count_at, count);
    cn_wr_u32(&w, w.err ? 0 : cn_crc32c(0, w.buf, w.len));
    if (w.err) {
        cn_wr_fini(&w);
        return CN_ENOMEM;
    }
    *out = cn_wr_steal(&w, len);
    return 0;
}

/* One record's entity into e; false for a shape Kafka would not log. */
static bool entity_of(const struct cn_client_quota_record *r,
                      struct cn_quota_entity *e)
{
    memset(e, 0, sizeof *e);
    for (int32_t i = 0; i < r->entity_len; i++) {
        const struct cn_cq_entity *p = &r->entity[i];
        enum cn_quota_part *part;
        char *name;
        if (cn_bytes_eq_str(p->type, CN_QUOTA_TYPE_USER)) {
            part = &e->user_part;
            name = e->user;
        } else if (cn_bytes_eq_str(p->type, CN_QUOTA_TYPE_CLIENT)) {
            part = &e->client_part;
            name = e->client;
        } else {
            return false;
        }
        if (*part != CN_QP_NONE)
            return false;
        if (p->name.len < 0) {
            *part = CN_QP_DEFAULT;
        } else {
            if ((size_t)p->name.len >= CN_QUOTA_NAME_MAX ||
                memchr(p->name.ptr, 0, (size_t)p->name.len))
                return false;
            memcpy(name, p->name.ptr, (size_t)p->name.len);
            name[p->name.len] = '\0';
            *part = CN_QP_NAME;
        }
    }
    return e->user_part != CN_QP_NONE || e->client_part != CN_QP_NONE;
}

int cn_quota_store_decode(const uint8_t *buf, size_t len, struct cn_quota *q)
{
    if (len < MAGIC_LEN + 8 || memcmp(buf, MAGIC, MAGIC_LEN) != 0)
        return cn_corrupt("client-quotas: no magic");
    struct cn_rd rd;
    cn_rd_init(&rd, buf + len - 4, 4);
    if (cn_rd_u32(&rd) != cn_crc32c(0, buf, len - 4))
        return cn_corrupt("client-quotas: checksum");
    cn_rd_init(&rd, buf + MAGIC_LEN, len - MAGIC_LEN - 4);
    uint32_t count = cn_rd_u32(&rd);
    int rc = 0;
    for (uint32_t i = 0; i < count && !rc; i++) {
        int32_t rlen = cn_rd_i32(&rd);
        if (rd.err || rlen < 0 || (size_t)rlen > cn_rd_left(&rd))
            return cn_corrupt("client-quotas: record length");
        struct cn_rd rr;
        cn_rd_init(&rr, rd.pos, (size_t)rlen);
        cn_rd_skip(&rd, (size_t)rlen);
        struct cn_arena a;
        cn_arena_init(&a);
        struct cn_client_quota_record r;
        struct cn_quota_entity e;
        int k;
        if (cn_client_quota_record_decode(&rr, &a, &r) != 0 ||
            cn_rd_left(&rr) != 0 || r.remove || !entity_of(&r, &e) ||
            (k = cn_quota_key_find((const char *)r.key.ptr,
                                   (size_t)r.key.len)) < 0) {
            rc = cn_corrupt("client-quotas: record");
        } else {
            rc = cn_quota_set(q, &e, (enum cn_quota_key)k, r.value, false);
            if (rc == CN_EINVAL)
                rc = cn_corrupt("client-quotas: value");
        }
        cn_arena_fini(&a);
    }
    if (!rc && (rd.err || cn_rd_left(&rd) != 0))
        rc = cn_corrupt("client-quotas: trailing bytes");
    return rc;
}
