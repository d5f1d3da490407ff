/* test_quota.c - Kafka's quota precedence, sampled rates and throttle
 * time, on a fake clock (the module takes now_ms; nothing here sleeps). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/err.h"
#include "base/rd.h"
#include "base/wr.h"
#include "proto/quotas.h"
#include "quota/quota.h"
#include "quota/quota_store.h"
#include "unit.h"

static struct cn_quota *mk(void)
{
    struct cn_quota_cfg cfg = {.window_num = 11, .window_ms = 1000};
    struct cn_quota *q = NULL;
    CHECK_EQ(cn_quota_new(&cfg, &q), 0);
    return q;
}

static struct cn_quota_entity ent(enum cn_quota_part up, const char *u,
                                  enum cn_quota_part cp, const char *c)
{
    struct cn_quota_entity e = {.user_part = up, .client_part = cp};
    if (u)
        snprintf(e.user, sizeof e.user, "%s", u);
    if (c)
        snprintf(e.client, sizeof e.client, "%s", c);
    return e;
}

#define N CN_QP_NAME
#define D CN_QP_DEFAULT
#define O CN_QP_NONE

/* The eight levels of Kafka's table, most specific first. */
static struct cn_quota_entity level_ent(int i)
{
    static const enum cn_quota_part up[8] = {N, N, N, D, D, D, O, O};
    static const enum cn_quota_part cp[8] = {N, D, O, N, D, O, N, D};
    return ent(up[i], "alice", cp[i], "app");
}

static int level_of(struct cn_quota *q, const char *u, const char *c,
                    double *lim)
{
    int lv = 0;
    double l = -1;
    if (!cn_quota_limit(q, CN_QK_PRODUCE, u, c, &l, &lv))
        return 0;
    if (lim)
        *lim = l;
    return lv;
}

UNIT_TEST(precedence_every_level)
{
    struct cn_quota *q = mk();
    CHECK_EQ(level_of(q, "alice", "app", NULL), 0); /* nothing: unlimited */
    for (int i = 0; i < 8; i++) {
        struct cn_quota_entity e = level_ent(i);
        CHECK_EQ(cn_quota_set(q, &e, CN_QK_PRODUCE, 100 + i, false), 0);
    }
    /* Remove the most specific one at a time: the next level takes over,
     * with its own value. */
    for (int i = 0; i < 8; i++) {
        double lim = 0;
        CHECK_EQ(level_of(q, "alice", "app", &lim), i + 1);
        CHECK_EQ((long long)lim, 100 + i);
        struct cn_quota_entity e = level_ent(i);
        CHECK_EQ(cn_quota_set(q, &e, CN_QK_PRODUCE, 0, true), 0);
    }
    CHECK_EQ(level_of(q, "alice", "app", NULL), 0);
    CHECK_EQ(cn_quota_count(q), 0);
    cn_quota_free(q);
}

UNIT_TEST(precedence_others_and_keys)
{
    struct cn_quota *q = mk();
    for (int i = 0; i < 8; i++) {
        struct cn_quota_entity e = level_ent(i);
        CHECK_EQ(cn_quota_set(q, &e, CN_QK_PRODUCE, 100 + i, false), 0);
    }
    /* alice with another client: her clients/<default> (level 2). */
    CHECK_EQ(level_of(q, "alice", "other", NULL), 2);
    /* bob with app: the default user's clients/app (level 4). */
    CHECK_EQ(level_of(q, "bob", "app", NULL), 4);
    CHECK_EQ(level_of(q, "bob", "other", NULL), 5);
    /* A key set nowhere is unlimited even where the entity exists; each
     * key has its own precedence walk. */
    double l;
    CHECK(!cn_quota_limit(q, CN_QK_FETCH, "alice", "app", &l, NULL));
    struct cn_quota_entity cd = ent(O, NULL, D, NULL);
    CHECK_EQ(cn_quota_set(q, &cd, CN_QK_FETCH, 7, false), 0);
    int lv = 0;
    CHECK(cn_quota_limit(q, CN_QK_FETCH, "alice", "app", &l, &lv));
    CHECK_EQ(lv, 8);
    CHECK_EQ((long long)l, 7);
    /* The entity keeps its other key when one is removed. */
    struct cn_quota_entity e1 = level_ent(0);
    CHECK_EQ(cn_quota_set(q, &e1, CN_QK_REQUEST, 50, false), 0);
    CHECK_EQ(cn_quota_set(q, &e1, CN_QK_PRODUCE, 0, true), 0);
    CHECK(cn_quota_get(q, &e1, CN_QK_REQUEST, &l));
    CHECK_EQ(level_of(q, "alice", "app", NULL), 2);
    /* Invalid: an entity with no part, a negative value. */
    struct cn_quota_entity none = ent(O, NULL, O, NULL);
    CHECK_EQ(cn_quota_set(q, &none, CN_QK_PRODUCE, 1, false), CN_EINVAL);
    CHECK_EQ(cn_quota_set(q, &e1, CN_QK_PRODUCE, -1, false), CN_EINVAL);
    cn_quota_free(q);
}

UNIT_TEST(key_names)
{
    CHECK_EQ(cn_quota_key_find("producer_byte_rate", 18), CN_QK_PRODUCE);
    CHECK_EQ(cn_quota_key_find("consumer_byte_rate", 18), CN_QK_FETCH);
    CHECK_EQ(cn_quota_key_find("request_percentage", 18), CN_QK_REQUEST);
    CHECK_EQ(cn_quota_key_find("controller_mutation_rate", 24),
             CN_QK_MUTATION);
    CHECK_EQ(cn_quota_key_find("producer_byte_ratex", 19), -1);
    CHECK(cn_quota_key_is_long(CN_QK_PRODUCE));
    CHECK(!cn_quota_key_is_long(CN_QK_REQUEST));
}

UNIT_TEST(rate_windows)
{
    struct cn_quota *q = mk();
    struct cn_quota_entity e = ent(O, NULL, N, "c");
    CHECK_EQ(cn_quota_set(q, &e, CN_QK_PRODUCE, 1e9, false), 0);
    /* A new client: 1000 bytes over at least (11 - 1) windows = 100/s. */
    cn_quota_record(q, CN_QK_PRODUCE, "u", "c", 1000, 0);
    CHECK_EQ((long long)cn_quota_rate(q, CN_QK_PRODUCE, "u", "c", 0), 100);
    /* 5 s later still spread over 10 s. */
    cn_quota_record(q, CN_QK_PRODUCE, "u", "c", 1000, 5000);
    CHECK_EQ((long long)cn_quota_rate(q, CN_QK_PRODUCE, "u", "c", 5000), 200);
    /* 15 s after start: elapsed 15 s > 10 s, the first sample (started at
     * 0) is older than 11 windows and counts as empty from then on. */
    CHECK_EQ((long long)cn_quota_rate(q, CN_QK_PRODUCE, "u", "c", 10999),
             181); /* 2000 bytes / 10.999 s */
    CHECK_EQ((long long)cn_quota_rate(q, CN_QK_PRODUCE, "u", "c", 11000), 100);
    /* After everything expired, nothing is left. */
    CHECK_EQ((long long)cn_quota_rate(q, CN_QK_PRODUCE, "u", "c", 60000), 0);
    cn_quota_free(q);
}

UNIT_TEST(throttle_formula)
{
    /* (rate - limit) / limit * window. */
    CHECK_EQ(cn_quota_throttle_ms(200, 100, 10000, 0), 10000);
    CHECK_EQ(cn_quota_throttle_ms(150, 100, 10000, 0), 5000);
    CHECK_EQ(cn_quota_throttle_ms(100, 100, 10000, 0), 0); /* at: fine */
    CHECK_EQ(cn_quota_throttle_ms(99, 100, 10000, 0), 0);
    /* Bounded (request_percentage: one window). */
    CHECK_EQ(cn_quota_throttle_ms(200, 100, 10000, 1000), 1000);
    CHECK_EQ(cn_quota_throttle_ms(1e300, 1e-300, 10000, 0), 2147483647);

    struct cn_quota *q = mk();
    struct cn_quota_entity e = ent(O, NULL, N, "c");
    CHECK_EQ(cn_quota_set(q, &e, CN_QK_PRODUCE, 100, false), 0);
    CHECK_EQ(cn_quota_set(q, &e, CN_QK_REQUEST, 10, false), 0);
    /* 1000 bytes over 10 s = 100/s: at the limit, not over it. */
    CHECK_EQ(cn_quota_record(q, CN_QK_PRODUCE, "u", "c", 1000, 0), 0);
    /* 2000 = 200/s: one more 10 s window's worth to wait. */
    CHECK_EQ(cn_quota_record(q, CN_QK_PRODUCE, "u", "c", 1000, 0), 10000);
    /* Another client id is not limited (clients/c only). */
    CHECK_EQ(cn_quota_record(q, CN_QK_PRODUCE, "u", "d", 1e6, 0), 0);
    /* request_percentage: 500 %-seconds over 10 s = 50 % against 10 %:
     * 40 s by the formula, bounded at one window. */
    CHECK_EQ(cn_quota_record(q, CN_QK_REQUEST, "u", "c", 500, 0), 1000);
    /* Unrecord takes a value back (a throttled fetch sends nothing). */
    cn_quota_unrecord(q, CN_QK_PRODUCE, "u", "c", 1000, 0);
    CHECK_EQ((long long)cn_quota_rate(q, CN_QK_PRODUCE, "u", "c", 0), 100);
    /* A fetch never answers more than limit * (num - 1) windows. */
    CHECK_EQ((long long)cn_quota_max_in_window(q, CN_QK_PRODUCE, "u", "c"),
             1000);
    CHECK_EQ((long long)cn_quota_max_in_window(q, CN_QK_FETCH, "u", "c"), -1);
    cn_quota_free(q);
}

UNIT_TEST(shared_and_separate_rates)
{
    struct cn_quota *q = mk();
    /* clients/<default>: each client id measured on its own. */
    struct cn_quota_entity cd = ent(O, NULL, D, NULL);
    CHECK_EQ(cn_quota_set(q, &cd, CN_QK_PRODUCE, 100, false), 0);
    CHECK_EQ(cn_quota_record(q, CN_QK_PRODUCE, "u", "a", 1000, 0), 0);
    CHECK_EQ(cn_quota_record(q, CN_QK_PRODUCE, "u", "b", 1000, 0), 0);
    CHECK(cn_quota_record(q, CN_QK_PRODUCE, "u", "a", 1000, 0) > 0);
    /* users/alice: all of alice's client ids share one rate. */
    struct cn_quota_entity ua = ent(N, "alice", O, NULL);
    CHECK_EQ(cn_quota_set(q, &ua, CN_QK_PRODUCE, 100, false), 0);
    CHECK_EQ(cn_quota_record(q, CN_QK_PRODUCE, "alice", "a", 1000, 0), 0);
    CHECK(cn_quota_record(q, CN_QK_PRODUCE, "alice", "b", 1000, 0) > 0);
    cn_quota_free(q);
}

UNIT_TEST(sensors_bounded)
{
    struct cn_quota_cfg cfg = {.window_num = 11, .window_ms = 1000,
                               .max_sensors = 4};
    struct cn_quota *q = NULL;
    CHECK_EQ(cn_quota_new(&cfg, &q), 0);
    struct cn_quota_entity cd = ent(O, NULL, D, NULL);
    CHECK_EQ(cn_quota_set(q, &cd, CN_QK_PRODUCE, 100, false), 0);
    char id[16];
    for (int i = 0; i < 100; i++) {
        snprintf(id, sizeof id, "c%d", i);
        cn_quota_record(q, CN_QK_PRODUCE, "u", id, 10, 0);
    }
    CHECK_EQ(cn_quota_sensor_count(q), 4);
    /* The most recent ones are kept. */
    CHECK_EQ((long long)cn_quota_rate(q, CN_QK_PRODUCE, "u", "c99", 0), 1);
    CHECK_EQ((long long)cn_quota_rate(q, CN_QK_PRODUCE, "u", "c0", 0), 0);
    cn_quota_clear(q);
    CHECK_EQ(cn_quota_sensor_count(q), 0);
    CHECK_EQ(cn_quota_count(q), 0);
    cn_quota_free(q);
}

/* ---- the wire codecs (src/proto/quotas.c) ------------------------------ */

static bool bytes_eq(struct cn_bytes a, const char *s)
{
    if (!s)
        return a.len < 0;
    return a.len == (int32_t)strlen(s) && memcmp(a.ptr, s, (size_t)a.len) == 0;
}

/* Encodes, decodes, re-encodes: same bytes, nothing left over. */
#define ROUNDTRIP(enc, dec, type, ver, in, out)                            \
    do {                                                                   \
        struct cn_wr w1_, w2_;                                             \
        cn_wr_init(&w1_, 0);                                               \
        cn_wr_init(&w2_, 0);                                               \
        enc(&w1_, ver, in);                                                \
        CHECK_EQ(w1_.err, 0);                                              \
        /* The decoded views must outlive w1_: decode from a copy. */      \
        uint8_t *copy_ = cn_arena_alloc(&arena, w1_.len + 1);              \
        memcpy(copy_, w1_.buf, w1_.len);                                   \
        struct cn_rd rd_;                                                  \
        cn_rd_init(&rd_, copy_, w1_.len);                                  \
        CHECK_EQ(dec(&rd_, &arena, ver, out), 0);                          \
        CHECK_EQ(cn_rd_left(&rd_), 0);                                     \
        enc(&w2_, ver, out);                                               \
        CHECK_EQ(w2_.len, w1_.len);                                        \
        CHECK(memcmp(w1_.buf, w2_.buf, w1_.len) == 0);                     \
        /* Every truncation fails cleanly. */                              \
        for (size_t cut_ = 0; cut_ < w1_.len; cut_++) {                    \
            type t_;                                                       \
            cn_rd_init(&rd_, w1_.buf, cut_);                               \
            CHECK(dec(&rd_, &arena, ver, &t_) != 0);                       \
        }                                                                  \
        cn_wr_fini(&w1_);                                                  \
        cn_wr_fini(&w2_);                                                  \
    } while (0)

UNIT_TEST(codec_describe_roundtrip)
{
    struct cn_arena arena;
    cn_arena_init(&arena);
    for (int16_t v = 0; v <= 1; v++) {
        struct cn_dcq_component comps[2] = {
            {cn_bytes_str("user"), CN_CQ_MATCH_EXACT, cn_bytes_str("alice")},
            {cn_bytes_str("client-id"), CN_CQ_MATCH_DEFAULT, CN_BYTES_NULL}};
        struct cn_describe_client_quotas_request rq = {comps, 2, true}, rq2;
        ROUNDTRIP(cn_dcq_request_encode, cn_dcq_request_decode,
                  struct cn_describe_client_quotas_request, v, &rq, &rq2);
        CHECK_EQ(rq2.components_len, 2);
        CHECK(rq2.strict);
        CHECK(bytes_eq(rq2.components[0].match, "alice"));
        CHECK(bytes_eq(rq2.components[1].match, NULL));
        CHECK_EQ(rq2.components[1].match_type, CN_CQ_MATCH_DEFAULT);

        struct cn_cq_entity ents[2] = {
            {cn_bytes_str("user"), CN_BYTES_NULL},
            {cn_bytes_str("client-id"), cn_bytes_str("app")}};
        struct cn_dcq_value vals[2] = {{cn_bytes_str("producer_byte_rate"), 1024},
                                       {cn_bytes_str("request_percentage"), 12.5}};
        struct cn_dcq_entry entry = {ents, 2, vals, 2};
        struct cn_describe_client_quotas_response rs = {
            .throttle_time_ms = 7, .error_code = 0,
            .error_message = CN_BYTES_NULL, .entries = &entry,
            .entries_len = 1}, rs2;
        ROUNDTRIP(cn_dcq_response_encode, cn_dcq_response_decode,
                  struct cn_describe_client_quotas_response, v, &rs, &rs2);
        CHECK_EQ(rs2.throttle_time_ms, 7);
        CHECK_EQ(rs2.entries_len, 1);
        CHECK(bytes_eq(rs2.entries[0].entity[0].name, NULL));
        CHECK(bytes_eq(rs2.entries[0].entity[1].name, "app"));
        CHECK(rs2.entries[0].values[1].value == 12.5);
        /* An error answer has null entries. */
        struct cn_describe_client_quotas_response err = {
            .error_code = 42, .error_message = cn_bytes_str("no"),
            .entries_len = -1}, err2;
        ROUNDTRIP(cn_dcq_response_encode, cn_dcq_response_decode,
                  struct cn_describe_client_quotas_response, v, &err, &err2);
        CHECK_EQ(err2.entries_len, -1);
        CHECK(bytes_eq(err2.error_message, "no"));
    }
    cn_arena_fini(&arena);
}

UNIT_TEST(codec_alter_roundtrip)
{
    struct cn_arena arena;
    cn_arena_init(&arena);
    for (int16_t v = 0; v <= 1; v++) {
        struct cn_cq_entity ents[1] = {{cn_bytes_str("client-id"),
                                        cn_bytes_str("app")}};
        struct cn_acq_op ops[2] = {{cn_bytes_str("producer_byte_rate"), 1024, false},
                                   {cn_bytes_str("consumer_byte_rate"), 0, true}};
        struct cn_acq_entry e = {ents, 1, ops, 2};
        struct cn_alter_client_quotas_request rq = {&e, 1, true}, rq2;
        ROUNDTRIP(cn_acq_request_encode, cn_acq_request_decode,
                  struct cn_alter_client_quotas_request, v, &rq, &rq2);
        CHECK(rq2.validate_only);
        CHECK_EQ(rq2.entries[0].ops_len, 2);
        CHECK(rq2.entries[0].ops[1].remove);
        CHECK(rq2.entries[0].ops[0].value == 1024);

        struct cn_acq_result r = {35, cn_bytes_str("bad"), ents, 1};
        struct cn_alter_client_quotas_response rs = {3, &r, 1}, rs2;
        ROUNDTRIP(cn_acq_response_encode, cn_acq_response_decode,
                  struct cn_alter_client_quotas_response, v, &rs, &rs2);
        CHECK_EQ(rs2.entries[0].error_code, 35);
        CHECK(bytes_eq(rs2.entries[0].entity[0].name, "app"));
    }
    cn_arena_fini(&arena);
}

/* Kafka's v0 layout by hand: classic strings and arrays, no tags. */
UNIT_TEST(codec_wire_layout)
{
    static const uint8_t v0[] = {
        0, 0, 0, 1,                                 /* 1 component */
        0, 4, 'u', 's', 'e', 'r', 0, 0xff, 0xff,    /* user, EXACT, null */
        1};                                         /* strict */
    static const uint8_t v1[] = {
        2, 5, 'u', 's', 'e', 'r', 1, 0, 0, /* compact: 1 comp, DEFAULT, null, tags */
        0, 0};                             /* strict false, tags */
    struct cn_arena arena;
    cn_arena_init(&arena);
    struct cn_describe_client_quotas_request rq;
    struct cn_rd rd;
    cn_rd_init(&rd, v0, sizeof v0);
    CHECK_EQ(cn_dcq_request_decode(&rd, &arena, 0, &rq), 0);
    CHECK_EQ(cn_rd_left(&rd), 0);
    CHECK(rq.strict && rq.components_len == 1);
    CHECK(bytes_eq(rq.components[0].entity_type, "user"));
    CHECK(bytes_eq(rq.components[0].match, NULL));
    cn_rd_init(&rd, v1, sizeof v1);
    CHECK_EQ(cn_dcq_request_decode(&rd, &arena, 1, &rq), 0);
    CHECK_EQ(cn_rd_left(&rd), 0);
    CHECK(!rq.strict);
    CHECK_EQ(rq.components[0].match_type, CN_CQ_MATCH_DEFAULT);
    /* A null entity type is malformed. */
    static const uint8_t bad[] = {2, 0, 1, 0, 0, 0, 0};
    cn_rd_init(&rd, bad, sizeof bad);
    CHECK(cn_dcq_request_decode(&rd, &arena, 1, &rq) != 0);
    CHECK_EQ(cn_dcq_request_decode(&rd, &arena, 2, &rq), CN_EUNSUPPORTED);
    cn_arena_fini(&arena);
}

UNIT_TEST(codec_record_roundtrip)
{
    struct cn_arena arena;
    cn_arena_init(&arena);
    struct cn_cq_entity ents[2] = {{cn_bytes_str("user"), cn_bytes_str("alice")},
                                   {cn_bytes_str("client-id"), CN_BYTES_NULL}};
    struct cn_client_quota_record r = {ents, 2, cn_bytes_str("consumer_byte_rate"),
                                       2048, false}, r2;
    struct cn_wr w;
    cn_wr_init(&w, 0);
    cn_client_quota_record_encode(&w, &r);
    struct cn_rd rd;
    cn_rd_init(&rd, w.buf, w.len);
    CHECK_EQ(cn_client_quota_record_decode(&rd, &arena, &r2), 0);
    CHECK_EQ(cn_rd_left(&rd), 0);
    CHECK_EQ(r2.entity_len, 2);
    CHECK(bytes_eq(r2.entity[1].name, NULL));
    CHECK(bytes_eq(r2.key, "consumer_byte_rate"));
    CHECK(r2.value == 2048 && !r2.remove);
    cn_wr_fini(&w);
    cn_arena_fini(&arena);
}

UNIT_TEST(store_roundtrip_and_damage)
{
    struct cn_quota *q = mk();
    struct cn_quota_entity a = ent(N, "alice", N, "app");
    struct cn_quota_entity b = ent(D, NULL, O, NULL);
    struct cn_quota_entity c = ent(O, NULL, D, NULL);
    CHECK_EQ(cn_quota_set(q, &a, CN_QK_PRODUCE, 1024, false), 0);
    CHECK_EQ(cn_quota_set(q, &a, CN_QK_REQUEST, 12.5, false), 0);
    CHECK_EQ(cn_quota_set(q, &b, CN_QK_FETCH, 2048, false), 0);
    CHECK_EQ(cn_quota_set(q, &c, CN_QK_MUTATION, 3, false), 0);
    uint8_t *img = NULL;
    size_t len = 0;
    CHECK_EQ(cn_quota_store_encode(q, &img, &len), 0);
    struct cn_quota *q2 = mk();
    CHECK_EQ(cn_quota_store_decode(img, len, q2), 0);
    CHECK_EQ(cn_quota_count(q2), 3);
    double v = 0;
    CHECK(cn_quota_get(q2, &a, CN_QK_REQUEST, &v) && v == 12.5);
    CHECK(cn_quota_get(q2, &b, CN_QK_FETCH, &v) && v == 2048);
    CHECK(cn_quota_get(q2, &c, CN_QK_MUTATION, &v) && v == 3);
    CHECK(!cn_quota_get(q2, &b, CN_QK_PRODUCE, &v));
    /* Every flipped byte and every truncation is refused. */
    cn_corrupt_hush();
    for (size_t i = 0; i < len; i++) {
        struct cn_quota *q3 = mk();
        img[i] ^= 0x40;
        CHECK_EQ(cn_quota_store_decode(img, len, q3), CN_ECORRUPT);
        img[i] ^= 0x40;
        CHECK_EQ(cn_quota_store_decode(img, i, q3), CN_ECORRUPT);
        cn_quota_free(q3);
    }
    cn_corrupt_unhush();
    free(img);
    cn_quota_free(q);
    cn_quota_free(q2);
}

UNIT_MAIN(precedence_every_level, precedence_others_and_keys, key_names,
          rate_windows, throttle_formula, shared_and_separate_rates,
          sensors_bounded, codec_describe_roundtrip, codec_alter_roundtrip,
          codec_wire_layout, codec_record_roundtrip, store_roundtrip_and_damage)
