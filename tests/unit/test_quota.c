/* test_quota.c - Kafka's quota precedence, sampled rates and throttle
 * time, on a fake clock (the module takes now_ms; nothing here sleeps). */
#include <stdio.h>
#include <string.h>

#include "base/err.h"
#include "quota/quota.h"
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

UNIT_MAIN(precedence_every_level, precedence_others_and_keys, key_names,
          rate_windows, throttle_formula, shared_and_separate_rates,
          sensors_bounded)
