/*
 * scram_msgs.c - KIP-554 codecs; see scram_msgs.h for the layout.
 */
#include "scram_msgs.h"

#include "base/err.h"

/* An array of n elements of size sz in the arena; NULL for n <= 0. */
static void *arr(struct cn_rd *rd, struct cn_arena *a, int32_t n, size_t sz)
{
    if (n <= 0 || rd->err)
        return NULL;
    void *p = cn_arena_calloc(a, (size_t)n, sz);
    if (!p)
        cn_rd_fail(rd, CN_ENOMEM);
    return p;
}

/* A compact string the schema says is not nullable. */
static struct cn_bytes str_nn(struct cn_rd *rd)
{
    struct cn_bytes b = cn_rd_str(rd, true);
    if (!rd->err && b.len < 0)
        cn_rd_fail(rd, CN_EINVAL);
    return b;
}

static int32_t arr_len_nn(struct cn_rd *rd, size_t min)
{
    int32_t n = cn_rd_array_len(rd, true, min);
    if (!rd->err && n < 0)
        cn_rd_fail(rd, CN_EINVAL);
    return n;
}

int cn_describe_scram_req_decode(struct cn_rd *rd, struct cn_arena *a,
                                 struct cn_describe_scram_req *out)
{
    out->users_len = cn_rd_array_len(rd, true, 2);
    out->users = arr(rd, a, out->users_len, sizeof *out->users);
    for (int32_t i = 0; i < out->users_len && !rd->err; i++) {
        out->users[i] = str_nn(rd);
        cn_rd_skip_tags(rd);
    }
    cn_rd_skip_tags(rd);
    return rd->err;
}

void cn_describe_scram_req_encode(struct cn_wr *wr,
                                  const struct cn_describe_scram_req *in)
{
    cn_wr_array_len(wr, true, in->users_len);
    for (int32_t i = 0; i < in->users_len; i++) {
        cn_wr_str(wr, true, in->users[i]);
        cn_wr_empty_tags(wr);
    }
    cn_wr_empty_tags(wr);
}

int cn_describe_scram_resp_decode(struct cn_rd *rd, struct cn_arena *a,
                                  struct cn_describe_scram_resp *out)
{
    out->throttle_time_ms = cn_rd_i32(rd);
    out->error_code = cn_rd_i16(rd);
    out->error_message = cn_rd_str(rd, true);
    out->results_len = arr_len_nn(rd, 5);
    out->results = arr(rd, a, out->results_len, sizeof *out->results);
    for (int32_t i = 0; i < out->results_len && !rd->err; i++) {
        struct cn_describe_scram_result *r = &out->results[i];
        r->user = str_nn(rd);
        r->error_code = cn_rd_i16(rd);
        r->error_message = cn_rd_str(rd, true);
        r->infos_len = arr_len_nn(rd, 6);
        r->infos = arr(rd, a, r->infos_len, sizeof *r->infos);
        for (int32_t j = 0; j < r->infos_len && !rd->err; j++) {
            r->infos[j].mechanism = cn_rd_i8(rd);
            r->infos[j].iterations = cn_rd_i32(rd);
            cn_rd_skip_tags(rd);
        }
        cn_rd_skip_tags(rd);
    }
    cn_rd_skip_tags(rd);
    return rd->err;
}

void cn_describe_scram_resp_encode(struct cn_wr *wr,
                                   const struct cn_describe_scram_resp *in)
{
    cn_wr_i32(wr, in->throttle_time_ms);
    cn_wr_i16(wr, in->error_code);
    cn_wr_str(wr, true, in->error_message);
    cn_wr_array_len(wr, true, in->results_len);
    for (int32_t i = 0; i < in->results_len; i++) {
        const struct cn_describe_scram_result *r = &in->results[i];
        cn_wr_str(wr, true, r->user);
        cn_wr_i16(wr, r->error_code);
        cn_wr_str(wr, true, r->error_message);
        cn_wr_array_len(wr, true, r->infos_len);
        for (int32_t j = 0; j < r->infos_len; j++) {
            cn_wr_i8(wr, r->infos[j].mechanism);
            cn_wr_i32(wr, r->infos[j].iterations);
            cn_wr_empty_tags(wr);
        }
        cn_wr_empty_tags(wr);
    }
    cn_wr_empty_tags(wr);
}

int cn_alter_scram_req_decode(struct cn_rd *rd, struct cn_arena *a,
                              struct cn_alter_scram_req *out)
{
    out->deletions_len = arr_len_nn(rd, 3);
    out->deletions = arr(rd, a, out->deletions_len, sizeof *out->deletions);
    for (int32_t i = 0; i < out->deletions_len && !rd->err; i++) {
        out->deletions[i].name = str_nn(rd);
        out->deletions[i].mechanism = cn_rd_i8(rd);
        cn_rd_skip_tags(rd);
    }
    out->upsertions_len = arr_len_nn(rd, 9);
    out->upsertions = arr(rd, a, out->upsertions_len,
                          sizeof *out->upsertions);
    for (int32_t i = 0; i < out->upsertions_len && !rd->err; i++) {
        struct cn_scram_upsertion *u = &out->upsertions[i];
        u->name = str_nn(rd);
        u->mechanism = cn_rd_i8(rd);
        u->iterations = cn_rd_i32(rd);
        u->salt = cn_rd_bytes(rd, true);
        u->salted_password = cn_rd_bytes(rd, true);
        if (!rd->err && (u->salt.len < 0 || u->salted_password.len < 0))
            cn_rd_fail(rd, CN_EINVAL);
        cn_rd_skip_tags(rd);
    }
    cn_rd_skip_tags(rd);
    return rd->err;
}

void cn_alter_scram_req_encode(struct cn_wr *wr,
                               const struct cn_alter_scram_req *in)
{
    cn_wr_array_len(wr, true, in->deletions_len);
    for (int32_t i = 0; i < in->deletions_len; i++) {
        cn_wr_str(wr, true, in->deletions[i].name);
        cn_wr_i8(wr, in->deletions[i].mechanism);
        cn_wr_empty_tags(wr);
    }
    cn_wr_array_len(wr, true, in->upsertions_len);
    for (int32_t i = 0; i < in->upsertions_len; i++) {
        const struct cn_scram_upsertion *u = &in->upsertions[i];
        cn_wr_str(wr, true, u->name);
        cn_wr_i8(wr, u->mechanism);
        cn_wr_i32(wr, u->iterations);
        cn_wr_bytes(wr, true, u->salt);
        cn_wr_bytes(wr, true, u->salted_password);
        cn_wr_empty_tags(wr);
    }
    cn_wr_empty_tags(wr);
}

int cn_alter_scram_resp_decode(struct cn_rd *rd, struct cn_arena *a,
                               struct cn_alter_scram_resp *out)
{
    out->throttle_time_ms = cn_rd_i32(rd);
    out->results_len = arr_len_nn(rd, 4);
    out->results = arr(rd, a, out->results_len, sizeof *out->results);
    for (int32_t i = 0; i < out->results_len && !rd->err; i++) {
        out->results[i].user = str_nn(rd);
        out->results[i].error_code = cn_rd_i16(rd);
        out->results[i].error_message = cn_rd_str(rd, true);
        cn_rd_skip_tags(rd);
    }
    cn_rd_skip_tags(rd);
    return rd->err;
}

void cn_alter_scram_resp_encode(struct cn_wr *wr,
                                const struct cn_alter_scram_resp *in)
{
    cn_wr_i32(wr, in->throttle_time_ms);
    cn_wr_array_len(wr, true, in->results_len);
    for (int32_t i = 0; i < in->results_len; i++) {
        cn_wr_str(wr, true, in->results[i].user);
        cn_wr_i16(wr, in->results[i].error_code);
        cn_wr_str(wr, true, in->results[i].error_message);
        cn_wr_empty_tags(wr);
    }
    cn_wr_empty_tags(wr);
}

/* ---- the API table rows ------------------------------------------------ */

#define SCRAM_ADAPTERS(n, type)                                             \
    static void init_##n(void *m) { memset(m, 0, sizeof(type)); }           \
    static int decode_##n(struct cn_rd *rd, struct cn_arena *arena,         \
                          int16_t version, void *out)                       \
    {                                                                       \
        (void)version;                                                      \
        return cn_##n##_decode(rd, arena, out);                             \
    }                                                                       \
    static void encode_##n(struct cn_wr *wr, int16_t version,               \
                           const void *in)                                  \
    {                                                                       \
        (void)version;                                                      \
        cn_##n##_encode(wr, in);                                            \
    }

SCRAM_ADAPTERS(describe_scram_req, struct cn_describe_scram_req)
SCRAM_ADAPTERS(describe_scram_resp, struct cn_describe_scram_resp)
SCRAM_ADAPTERS(alter_scram_req, struct cn_alter_scram_req)
SCRAM_ADAPTERS(alter_scram_resp, struct cn_alter_scram_resp)

const struct cn_api_info cn_scram_api_infos[2] = {
    {CN_API_DESCRIBE_USER_SCRAM_CREDENTIALS, "DescribeUserScramCredentials", 0,
     0, 0, false,
     sizeof(struct cn_describe_scram_req),
     sizeof(struct cn_describe_scram_resp), init_describe_scram_req,
     decode_describe_scram_req, encode_describe_scram_req,
     init_describe_scram_resp, decode_describe_scram_resp,
     encode_describe_scram_resp},
    {CN_API_ALTER_USER_SCRAM_CREDENTIALS, "AlterUserScramCredentials", 0, 0, 0,
     false,
     sizeof(struct cn_alter_scram_req), sizeof(struct cn_alter_scram_resp),
     init_alter_scram_req, decode_alter_scram_req, encode_alter_scram_req,
     init_alter_scram_resp, decode_alter_scram_resp,
     encode_alter_scram_resp},
};
