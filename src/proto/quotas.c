/*
 * quotas.c - DescribeClientQuotas, AlterClientQuotas and ClientQuotaRecord
 * on the wire; see quotas.h.  Every field is read in schema order, then
 * the caller tests rd->err once.
 */
#include "quotas.h"

#include <string.h>

#include "base/err.h"

/* A null where the schema forbids one goes out empty. */
static struct cn_bytes not_null(struct cn_bytes b)
{
    return b.len < 0 ? (struct cn_bytes){NULL, 0} : b;
}

static struct cn_bytes rd_str_nn(struct cn_rd *rd, bool flex)
{
    struct cn_bytes s = cn_rd_str(rd, flex);
    if (s.len < 0)
        cn_rd_fail(rd, CN_EBADLEN);
    return s;
}

/* Reads an array length and allocates n elements of size sz; a null array
 * is refused when !nullable.  Returns the count (0 on failure, -1 null). */
static int32_t rd_array(struct cn_rd *rd, struct cn_arena *arena, bool flex,
                        size_t min_elem, size_t sz, bool nullable,
                        void **out)
{
    *out = NULL;
    int32_t n = cn_rd_array_len(rd, flex, min_elem);
    if (rd->err)
        return 0;
    if (n < 0) {
        if (!nullable)
            cn_rd_fail(rd, CN_EBADLEN);
        return nullable ? -1 : 0;
    }
    if (n == 0)
        return 0;
    *out = cn_arena_calloc(arena, (size_t)n, sz);
    if (!*out) {
        cn_rd_fail(rd, CN_ENOMEM);
        return 0;
    }
    return n;
}

static void tags_end(struct cn_rd *rd, bool flex)
{
    if (flex)
        cn_rd_skip_tags(rd);
}

static void wr_tags(struct cn_wr *wr, bool flex)
{
    if (flex)
        cn_wr_empty_tags(wr);
}

static void dec_entities(struct cn_rd *rd, struct cn_arena *arena, bool flex,
                         struct cn_cq_entity **ents, int32_t *n)
{
    void *p;
    *n = rd_array(rd, arena, flex, flex ? 3 : 4, sizeof **ents, false, &p);
    *ents = p;
    for (int32_t i = 0; i < *n && !rd->err; i++) {
        (*ents)[i].type = rd_str_nn(rd, flex);
        (*ents)[i].name = cn_rd_str(rd, flex);
        tags_end(rd, flex);
    }
}

static void enc_entities(struct cn_wr *wr, bool flex,
                         const struct cn_cq_entity *ents, int32_t n)
{
    cn_wr_array_len(wr, flex, n < 0 ? 0 : n);
    for (int32_t i = 0; i < n; i++) {
        cn_wr_str(wr, flex, not_null(ents[i].type));
        cn_wr_str(wr, flex, ents[i].name);
        wr_tags(wr, flex);
    }
}

/* ---- DescribeClientQuotas ------------------------------------------------ */

int cn_dcq_request_decode(struct cn_rd *rd, struct cn_arena *arena,
                          int16_t version,
                          struct cn_describe_client_quotas_request *out)
{
    if (version < 0 || version > CN_CLIENT_QUOTAS_MAX_VERSION)
        return CN_EUNSUPPORTED;
    bool flex = version >= 1;
    memset(out, 0, sizeof *out);
    void *p;
    out->components_len = rd_array(rd, arena, flex, flex ? 3 : 5,
                                   sizeof *out->components, false, &p);
    out->components = p;
    for (int32_t i = 0; i < out->components_len && !rd->err; i++) {
        struct cn_dcq_component *c = &out->components[i];
        c->entity_type = rd_str_nn(rd, flex);
        c->match_type = cn_rd_i8(rd);
        c->match = cn_rd_str(rd, flex);
        tags_end(rd, flex);
    }
    out->strict = cn_rd_bool(rd);
    tags_end(rd, flex);
    return rd->err;
}

void cn_dcq_request_encode(struct cn_wr *wr, int16_t version,
                           const struct cn_describe_client_quotas_request *in)
{
    bool flex = version >= 1;
    cn_wr_array_len(wr, flex, in->components_len < 0 ? 0 : in->components_len);
    for (int32_t i = 0; i < in->components_len; i++) {
        const struct cn_dcq_component *c = &in->components[i];
        cn_wr_str(wr, flex, not_null(c->entity_type));
        cn_wr_i8(wr, c->match_type);
        cn_wr_str(wr, flex, c->match);
        wr_tags(wr, flex);
    }
    cn_wr_bool(wr, in->strict);
    wr_tags(wr, flex);
}

int cn_dcq_response_decode(struct cn_rd *rd, struct cn_arena *arena,
                           int16_t version,
                           struct cn_describe_client_quotas_response *out)
{
    if (version < 0 || version > CN_CLIENT_QUOTAS_MAX_VERSION)
        return CN_EUNSUPPORTED;
    bool flex = version >= 1;
    memset(out, 0, sizeof *out);
    out->throttle_time_ms = cn_rd_i32(rd);
    out->error_code = cn_rd_i16(rd);
    out->error_message = cn_rd_str(rd, flex);
    void *p;
    out->entries_len = rd_array(rd, arena, flex, flex ? 3 : 8,
                                sizeof *out->entries, true, &p);
    out->entries = p;
    for (int32_t i = 0; i < out->entries_len && !rd->err; i++) {
        struct cn_dcq_entry *e = &out->entries[i];
        dec_entities(rd, arena, flex, &e->entity, &e->entity_len);
        e->values_len = rd_array(rd, arena, flex, flex ? 10 : 10,
                                 sizeof *e->values, false, &p);
        e->values = p;
        for (int32_t j = 0; j < e->values_len && !rd->err; j++) {
            e->values[j].key = rd_str_nn(rd, flex);
            e->values[j].value = cn_rd_f64(rd);
            tags_end(rd, flex);
        }
        tags_end(rd, flex);
    }
    tags_end(rd, flex);
    return rd->err;
}

void cn_dcq_response_encode(
    struct cn_wr *wr, int16_t version,
    const struct cn_describe_client_quotas_response *in)
{
    bool flex = version >= 1;
    cn_wr_i32(wr, in->throttle_time_ms);
    cn_wr_i16(wr, in->error_code);
    cn_wr_str(wr, flex, in->error_message);
    cn_wr_array_len(wr, flex, in->entries_len);
    for (int32_t i = 0; i < in->entries_len; i++) {
        const struct cn_dcq_entry *e = &in->entries[i];
        enc_entities(wr, flex, e->entity, e->entity_len);
        cn_wr_array_len(wr, flex, e->values_len < 0 ? 0 : e->values_len);
        for (int32_t j = 0; j < e->values_len; j++) {
            cn_wr_str(wr, flex, not_null(e->values[j].key));
            cn_wr_f64(wr, e->values[j].value);
            wr_tags(wr, flex);
        }
        wr_tags(wr, flex);
    }
    wr_tags(wr, flex);
}

/* ---- AlterClientQuotas --------------------------------------------------- */

int cn_acq_request_decode(struct cn_rd *rd, struct cn_arena *arena,
                          int16_t version,
                          struct cn_alter_client_quotas_request *out)
{
    if (version < 0 || version > CN_CLIENT_QUOTAS_MAX_VERSION)
        return CN_EUNSUPPORTED;
    bool flex = version >= 1;
    memset(out, 0, sizeof *out);
    void *p;
    out->entries_len = rd_array(rd, arena, flex, flex ? 3 : 8,
                                sizeof *out->entries, false, &p);
    out->entries = p;
    for (int32_t i = 0; i < out->entries_len && !rd->err; i++) {
        struct cn_acq_entry *e = &out->entries[i];
        dec_entities(rd, arena, flex, &e->entity, &e->entity_len);
        e->ops_len = rd_array(rd, arena, flex, flex ? 11 : 11,
                              sizeof *e->ops, false, &p);
        e->ops = p;
        for (int32_t j = 0; j < e->ops_len && !rd->err; j++) {
            e->ops[j].key = rd_str_nn(rd, flex);
            e->ops[j].value = cn_rd_f64(rd);
            e->ops[j].remove = cn_rd_bool(rd);
            tags_end(rd, flex);
        }
        tags_end(rd, flex);
    }
    out->validate_only = cn_rd_bool(rd);
    tags_end(rd, flex);
    return rd->err;
}

void cn_acq_request_encode(struct cn_wr *wr, int16_t version,
                           const struct cn_alter_client_quotas_request *in)
{
    bool flex = version >= 1;
    cn_wr_array_len(wr, flex, in->entries_len < 0 ? 0 : in->entries_len);
    for (int32_t i = 0; i < in->entries_len; i++) {
        const struct cn_acq_entry *e = &in->entries[i];
        enc_entities(wr, flex, e->entity, e->entity_len);
        cn_wr_array_len(wr, flex, e->ops_len < 0 ? 0 : e->ops_len);
        for (int32_t j = 0; j < e->ops_len; j++) {
            cn_wr_str(wr, flex, not_null(e->ops[j].key));
            cn_wr_f64(wr, e->ops[j].value);
            cn_wr_bool(wr, e->ops[j].remove);
            wr_tags(wr, flex);
        }
        wr_tags(wr, flex);
    }
    cn_wr_bool(wr, in->validate_only);
    wr_tags(wr, flex);
}

int cn_acq_response_decode(struct cn_rd *rd, struct cn_arena *arena,
                           int16_t version,
                           struct cn_alter_client_quotas_response *out)
{
    if (version < 0 || version > CN_CLIENT_QUOTAS_MAX_VERSION)
        return CN_EUNSUPPORTED;
    bool flex = version >= 1;
    memset(out, 0, sizeof *out);
    out->throttle_time_ms = cn_rd_i32(rd);
    void *p;
    out->entries_len = rd_array(rd, arena, flex, flex ? 4 : 8,
                                sizeof *out->entries, false, &p);
    out->entries = p;
    for (int32_t i = 0; i < out->entries_len && !rd->err; i++) {
        struct cn_acq_result *e = &out->entries[i];
        e->error_code = cn_rd_i16(rd);
        e->error_message = cn_rd_str(rd, flex);
        dec_entities(rd, arena, flex, &e->entity, &e->entity_len);
        tags_end(rd, flex);
    }
    tags_end(rd, flex);
    return rd->err;
}

void cn_acq_response_encode(struct cn_wr *wr, int16_t version,
                            const struct cn_alter_client_quotas_response *in)
{
    bool flex = version >= 1;
    cn_wr_i32(wr, in->throttle_time_ms);
    cn_wr_array_len(wr, flex, in->entries_len < 0 ? 0 : in->entries_len);
    for (int32_t i = 0; i < in->entries_len; i++) {
        const struct cn_acq_result *e = &in->entries[i];
        cn_wr_i16(wr, e->error_code);
        cn_wr_str(wr, flex, e->error_message);
        enc_entities(wr, flex, e->entity, e->entity_len);
        wr_tags(wr, flex);
    }
    wr_tags(wr, flex);
}

/* ---- ClientQuotaRecord v0 (flexible) ------------------------------------- */

int cn_client_quota_record_decode(struct cn_rd *rd, struct cn_arena *arena,
                                  struct cn_client_quota_record *out)
{
    memset(out, 0, sizeof *out);
    dec_entities(rd, arena, true, &out->entity, &out->entity_len);
    out->key = rd_str_nn(rd, true);
    out->value = cn_rd_f64(rd);
    out->remove = cn_rd_bool(rd);
    tags_end(rd, true);
    return rd->err;
}

void cn_client_quota_record_encode(struct cn_wr *wr,
                                   const struct cn_client_quota_record *in)
{
    enc_entities(wr, true, in->entity, in->entity_len);
    cn_wr_str(wr, true, not_null(in->key));
    cn_wr_f64(wr, in->value);
    cn_wr_bool(wr, in->remove);
    wr_tags(wr, true);
}

/* ---- the API table rows (same shape as the generated cn_api_infos) ------- */

#define HAND_ADAPTERS(n, type)                                              \
    static void init_##n(void *m) { memset(m, 0, sizeof(type)); }           \
    static int decode_##n(struct cn_rd *rd, struct cn_arena *arena,         \
                          int16_t version, void *out)                       \
    {                                                                       \
        return cn_##n##_decode(rd, arena, version, out);                    \
    }                                                                       \
    static void encode_##n(struct cn_wr *wr, int16_t version,               \
                           const void *in)                                  \
    {                                                                       \
        cn_##n##_encode(wr, version, in);                                   \
    }

HAND_ADAPTERS(dcq_request, struct cn_describe_client_quotas_request)
HAND_ADAPTERS(dcq_response, struct cn_describe_client_quotas_response)
HAND_ADAPTERS(acq_request, struct cn_alter_client_quotas_request)
HAND_ADAPTERS(acq_response, struct cn_alter_client_quotas_response)

const struct cn_api_info cn_quota_api_infos[2] = {
    {CN_API_DESCRIBE_CLIENT_QUOTAS, "DescribeClientQuotas", 0,
     CN_CLIENT_QUOTAS_MAX_VERSION, 1, false,
     sizeof(struct cn_describe_client_quotas_request),
     sizeof(struct cn_describe_client_quotas_response), init_dcq_request,
     decode_dcq_request, encode_dcq_request, init_dcq_response,
     decode_dcq_response, encode_dcq_response},
    {CN_API_ALTER_CLIENT_QUOTAS, "AlterClientQuotas", 0,
     CN_CLIENT_QUOTAS_MAX_VERSION, 1, false,
     sizeof(struct cn_alter_client_quotas_request),
     sizeof(struct cn_alter_client_quotas_response), init_acq_request,
     decode_acq_request, encode_acq_request, init_acq_response,
     decode_acq_response, encode_acq_response},
};
