/*
 * test_scram_msgs.c - the KIP-554 codecs (proto/scram_msgs.h): byte tables
 * for each message, round trips, truncation and lying counts refused, and
 * the fuzz corpus seeds written and replayed.
 */
#include <stdio.h>
#include <string.h>

#include "base/arena.h"
#include "base/err.h"
#include "base/rd.h"
#include "base/wr.h"
#include "proto/scram_msgs.h"
#include "unit.h"

#define CORPUS "tests/fuzz/corpus/scram_msgs"

static bool bytes_is(struct cn_bytes b, const char *s)
{
    return b.len == (int32_t)strlen(s) && !memcmp(b.ptr, s, strlen(s));
}

/* Describe request for ["alice"]: compact array 2, "alice" (6 then
 * bytes), tags, tags. */
static const uint8_t describe_req[] = {0x02, 0x06, 'a', 'l', 'i', 'c',
                                       'e',  0x00, 0x00};

/* Alter request: one deletion (bob, SHA-256), one upsertion (al, SHA-512,
 * 4096, salt "s", salted "pw"). */
static const uint8_t alter_req[] = {
    0x02, 0x04, 'b',  'o',  'b', 0x01, 0x00,             /* deletions */
    0x02, 0x03, 'a',  'l',  0x02, 0x00, 0x00, 0x10, 0x00, /* upsertion */
    0x02, 's',  0x03, 'p',  'w',  0x00,                   /* salt, salted */
    0x00};

static void write_seed(const char *name, uint8_t sel, const uint8_t *p,
                       size_t n)
{
    char path[256];
    snprintf(path, sizeof path, CORPUS "/%s", name);
    FILE *f = fopen(path, "wb");
    if (!f)
        return;
    fwrite(&sel, 1, 1, f);
    fwrite(p, 1, n, f);
    fclose(f);
}

UNIT_TEST(describe_request_bytes)
{
    struct cn_arena a;
    cn_arena_init(&a);
    struct cn_rd rd;
    cn_rd_init(&rd, describe_req, sizeof describe_req);
    struct cn_describe_scram_req rq;
    CHECK_EQ(cn_describe_scram_req_decode(&rd, &a, &rq), 0);
    CHECK_EQ(rq.users_len, 1);
    CHECK(bytes_is(rq.users[0], "alice"));
    CHECK_EQ(cn_rd_left(&rd), 0);
    struct cn_wr wr;
    cn_wr_init(&wr, 0);
    cn_describe_scram_req_encode(&wr, &rq);
    CHECK_EQ(wr.len, sizeof describe_req);
    CHECK(!memcmp(wr.buf, describe_req, wr.len));
    /* Null array: every user. */
    cn_wr_reset(&wr);
    struct cn_describe_scram_req all = {-1, NULL};
    cn_describe_scram_req_encode(&wr, &all);
    CHECK_EQ(wr.len, 2);
    CHECK_EQ(wr.buf[0], 0);
    cn_rd_init(&rd, wr.buf, wr.len);
    CHECK_EQ(cn_describe_scram_req_decode(&rd, &a, &rq), 0);
    CHECK_EQ(rq.users_len, -1);
    /* Every truncation fails. */
    for (size_t n = 0; n < sizeof describe_req; n++) {
        cn_rd_init(&rd, describe_req, n);
        CHECK(cn_describe_scram_req_decode(&rd, &a, &rq) != 0);
    }
    /* A count larger than the bytes left. */
    static const uint8_t lie[] = {0x7f, 0x00};
    cn_rd_init(&rd, lie, sizeof lie);
    CHECK(cn_describe_scram_req_decode(&rd, &a, &rq) != 0);
    write_seed("describe_req", 0, describe_req, sizeof describe_req);
    cn_wr_fini(&wr);
    cn_arena_fini(&a);
}

UNIT_TEST(alter_request_bytes)
{
    struct cn_arena a;
    cn_arena_init(&a);
    struct cn_rd rd;
    cn_rd_init(&rd, alter_req, sizeof alter_req);
    struct cn_alter_scram_req rq;
    CHECK_EQ(cn_alter_scram_req_decode(&rd, &a, &rq), 0);
    CHECK_EQ(rq.deletions_len, 1);
    CHECK(bytes_is(rq.deletions[0].name, "bob"));
    CHECK_EQ(rq.deletions[0].mechanism, 1);
    CHECK_EQ(rq.upsertions_len, 1);
    CHECK(bytes_is(rq.upsertions[0].name, "al"));
    CHECK_EQ(rq.upsertions[0].mechanism, 2);
    CHECK_EQ(rq.upsertions[0].iterations, 4096);
    CHECK(bytes_is(rq.upsertions[0].salt, "s"));
    CHECK(bytes_is(rq.upsertions[0].salted_password, "pw"));
    struct cn_wr wr;
    cn_wr_init(&wr, 0);
    cn_alter_scram_req_encode(&wr, &rq);
    CHECK_EQ(wr.len, sizeof alter_req);
    CHECK(!memcmp(wr.buf, alter_req, wr.len));
    for (size_t n = 0; n < sizeof alter_req; n++) {
        cn_rd_init(&rd, alter_req, n);
        CHECK(cn_alter_scram_req_decode(&rd, &a, &rq) != 0);
    }
    /* A null name is not allowed. */
    uint8_t bad[sizeof alter_req];
    memcpy(bad, alter_req, sizeof bad);
    bad[1] = 0x00;
    cn_rd_init(&rd, bad, sizeof bad);
    CHECK(cn_alter_scram_req_decode(&rd, &a, &rq) != 0);
    write_seed("alter_req", 2, alter_req, sizeof alter_req);
    cn_wr_fini(&wr);
    cn_arena_fini(&a);
}

UNIT_TEST(responses_round_trip)
{
    struct cn_arena a;
    cn_arena_init(&a);
    struct cn_scram_cred_info infos[2] = {{1, 8192}, {2, 4096}};
    struct cn_describe_scram_result res[2] = {
        {cn_bytes_str("alice"), 0, CN_BYTES_NULL, 2, infos},
        {cn_bytes_str("nobody"), 91, cn_bytes_str("no such user"), 0, NULL},
    };
    struct cn_describe_scram_resp ds = {7, 0, CN_BYTES_NULL, 2, res};
    struct cn_wr wr;
    cn_wr_init(&wr, 0);
    cn_describe_scram_resp_encode(&wr, &ds);
    CHECK_EQ(wr.err, 0);
    /* throttle 7, error 0, null message, 3 = two results, "alice". */
    static const uint8_t head[] = {0, 0, 0, 7, 0, 0, 0, 3, 6,
                                   'a', 'l', 'i', 'c', 'e'};
    CHECK(wr.len > sizeof head && !memcmp(wr.buf, head, sizeof head));
    struct cn_rd rd;
    cn_rd_init(&rd, wr.buf, wr.len);
    struct cn_describe_scram_resp back;
    CHECK_EQ(cn_describe_scram_resp_decode(&rd, &a, &back), 0);
    CHECK_EQ(back.throttle_time_ms, 7);
    CHECK_EQ(back.results_len, 2);
    CHECK_EQ(back.results[0].infos_len, 2);
    CHECK_EQ(back.results[0].infos[0].iterations, 8192);
    CHECK_EQ(back.results[1].error_code, 91);
    CHECK(bytes_is(back.results[1].error_message, "no such user"));
    CHECK_EQ(cn_rd_left(&rd), 0);
    write_seed("describe_resp", 1, wr.buf, wr.len);

    struct cn_alter_scram_result ar[1] = {
        {cn_bytes_str("bob"), 93, cn_bytes_str("Too few iterations")}};
    struct cn_alter_scram_resp as = {0, 1, ar};
    cn_wr_reset(&wr);
    cn_alter_scram_resp_encode(&wr, &as);
    cn_rd_init(&rd, wr.buf, wr.len);
    struct cn_alter_scram_resp aback;
    CHECK_EQ(cn_alter_scram_resp_decode(&rd, &a, &aback), 0);
    CHECK_EQ(aback.results_len, 1);
    CHECK(bytes_is(aback.results[0].user, "bob"));
    CHECK_EQ(aback.results[0].error_code, 93);
    for (size_t n = 0; n < wr.len; n++) {
        cn_rd_init(&rd, wr.buf, n);
        CHECK(cn_alter_scram_resp_decode(&rd, &a, &aback) != 0);
    }
    write_seed("alter_resp", 3, wr.buf, wr.len);
    cn_wr_fini(&wr);
    cn_arena_fini(&a);
}

/* Every corpus file decodes or is refused (the fuzz target's rule). */
UNIT_TEST(corpus_replay)
{
    const char *names[] = {"describe_req", "describe_resp", "alter_req",
                           "alter_resp"};
    for (size_t i = 0; i < 4; i++) {
        char path[256];
        snprintf(path, sizeof path, CORPUS "/%s", names[i]);
        FILE *f = fopen(path, "rb");
        CHECK(f != NULL);
        if (!f)
            continue;
        uint8_t buf[4096];
        size_t got = fread(buf, 1, sizeof buf, f);
        fclose(f);
        CHECK(got > 1);
        struct cn_arena a;
        cn_arena_init(&a);
        struct cn_rd rd;
        cn_rd_init(&rd, buf + 1, got - 1);
        union {
            struct cn_describe_scram_req dq;
            struct cn_describe_scram_resp ds;
            struct cn_alter_scram_req aq;
            struct cn_alter_scram_resp as;
        } m;
        int rc = buf[0] % 4 == 0   ? cn_describe_scram_req_decode(&rd, &a, &m.dq)
                 : buf[0] % 4 == 1 ? cn_describe_scram_resp_decode(&rd, &a, &m.ds)
                 : buf[0] % 4 == 2 ? cn_alter_scram_req_decode(&rd, &a, &m.aq)
                                   : cn_alter_scram_resp_decode(&rd, &a, &m.as);
        CHECK_EQ(rc, 0);
        cn_arena_fini(&a);
    }
}

UNIT_MAIN(describe_request_bytes, alter_request_bytes, responses_round_trip,
          corpus_replay)
