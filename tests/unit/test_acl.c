/* test_acl.c - Kafka's authorization rules, filters and the store image. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acl/acl.h"
#include "base/err.h"
#include "unit.h"

static void add(struct cn_acl_set *s, int rt, int pt, const char *name,
                const char *who, const char *host, int op, int perm)
{
    struct cn_acl_binding bd = {.rtype = (int8_t)rt, .pattern = (int8_t)pt,
                                .op = (int8_t)op, .perm = (int8_t)perm,
                                .name = (char *)name, .principal = (char *)who,
                                .host = (char *)host};
    CHECK(cn_acl_binding_invalid(&bd) == NULL);
    CHECK_EQ(cn_acl_set_add(s, &bd), 0);
}

#define A CN_ACL_PERM_ALLOW
#define D CN_ACL_PERM_DENY
#define LIT CN_ACL_PT_LITERAL
#define PRE CN_ACL_PT_PREFIXED
#define T CN_ACL_RT_TOPIC
#define G CN_ACL_RT_GROUP
#define X CN_ACL_RT_TXN_ID

static bool can(const struct cn_acl_authorizer *az, const char *who,
                const char *host, int op, int rt, const char *name)
{
    return cn_acl_authorize(az, who, host, op, rt, name);
}

UNIT_TEST(off_allows_everything)
{
    struct cn_acl_authorizer az = {0};
    CHECK(can(&az, "User:x", "1.2.3.4", CN_ACL_OP_WRITE, T, "t"));
}

UNIT_TEST(default_deny_and_allow_everyone)
{
    struct cn_acl_authorizer az = {.enabled = true};
    cn_acl_set_init(&az.acls);
    CHECK(!can(&az, "User:x", "h", CN_ACL_OP_READ, T, "t"));
    az.allow_if_no_acl = true;
    CHECK(can(&az, "User:x", "h", CN_ACL_OP_READ, T, "t"));
    /* Any binding on the resource, even for someone else, ends the
     * default. */
    add(&az.acls, T, LIT, "t", "User:y", "*", CN_ACL_OP_READ, A);
    CHECK(!can(&az, "User:x", "h", CN_ACL_OP_READ, T, "t"));
    CHECK(can(&az, "User:x", "h", CN_ACL_OP_READ, T, "other"));
    cn_acl_set_fini(&az.acls);
}

UNIT_TEST(super_users)
{
    struct cn_acl_authorizer az = {.enabled = true,
                                   .super_users = "User:a; User:b"};
    cn_acl_set_init(&az.acls);
    add(&az.acls, T, LIT, "*", "User:*", "*", CN_ACL_OP_ALL, D);
    CHECK(can(&az, "User:a", "h", CN_ACL_OP_WRITE, T, "t"));
    CHECK(can(&az, "User:b", "h", CN_ACL_OP_WRITE, T, "t"));
    CHECK(!can(&az, "User:c", "h", CN_ACL_OP_WRITE, T, "t"));
    CHECK(!can(&az, "User:", "h", CN_ACL_OP_WRITE, T, "t"));
    cn_acl_set_fini(&az.acls);
}

UNIT_TEST(deny_wins_and_implication)
{
    struct cn_acl_authorizer az = {.enabled = true};
    cn_acl_set_init(&az.acls);
    add(&az.acls, T, PRE, "orders", "User:x", "*", CN_ACL_OP_WRITE, A);
    add(&az.acls, T, LIT, "orders-secret", "User:*", "*", CN_ACL_OP_ALL, D);
    add(&az.acls, T, LIT, "cfg", "User:x", "*", CN_ACL_OP_ALTER_CONFIGS, A);
    add(&az.acls, T, LIT, "r", "User:x", "*", CN_ACL_OP_READ, A);
    add(&az.acls, T, LIT, "r", "User:x", "*", CN_ACL_OP_READ, D);
    CHECK(can(&az, "User:x", "h", CN_ACL_OP_WRITE, T, "orders-eu"));
    CHECK(can(&az, "User:x", "h", CN_ACL_OP_DESCRIBE, T, "orders-eu"));
    CHECK(!can(&az, "User:x", "h", CN_ACL_OP_READ, T, "orders-eu"));
    CHECK(!can(&az, "User:x", "h", CN_ACL_OP_WRITE, T, "orders-secret"));
    CHECK(!can(&az, "User:x", "h", CN_ACL_OP_WRITE, T, "order"));
    CHECK(can(&az, "User:x", "h", CN_ACL_OP_DESCRIBE_CONFIGS, T, "cfg"));
    CHECK(!can(&az, "User:x", "h", CN_ACL_OP_DESCRIBE, T, "cfg"));
    /* A DENY of READ does not deny DESCRIBE (implication is for ALLOW),
     * and here nothing allows DESCRIBE either. */
    CHECK(!can(&az, "User:x", "h", CN_ACL_OP_READ, T, "r"));
    cn_acl_set_fini(&az.acls);
}

UNIT_TEST(resource_type_and_host_matter)
{
    struct cn_acl_authorizer az = {.enabled = true};
    cn_acl_set_init(&az.acls);
    /* redpanda #1579: a topic prefix must not authorize a group. */
    add(&az.acls, T, PRE, "app", "User:x", "*", CN_ACL_OP_READ, A);
    add(&az.acls, X, LIT, "tx1", "User:x", "127.0.0.1", CN_ACL_OP_WRITE, A);
    CHECK(!can(&az, "User:x", "h", CN_ACL_OP_READ, G, "app-group"));
    CHECK(can(&az, "User:x", "127.0.0.1", CN_ACL_OP_WRITE, X, "tx1"));
    CHECK(!can(&az, "User:x", "127.0.0.2", CN_ACL_OP_WRITE, X, "tx1"));
    CHECK(!can(&az, "User:y", "127.0.0.1", CN_ACL_OP_WRITE, X, "tx1"));
    cn_acl_set_fini(&az.acls);
}

UNIT_TEST(authorize_any_of_type)
{
    struct cn_acl_authorizer az = {.enabled = true};
    cn_acl_set_init(&az.acls);
    CHECK(!cn_acl_authorize_any(&az, "User:x", "h", CN_ACL_OP_WRITE, T));
    add(&az.acls, T, PRE, "a", "User:x", "*", CN_ACL_OP_WRITE, A);
    CHECK(cn_acl_authorize_any(&az, "User:x", "h", CN_ACL_OP_WRITE, T));
    CHECK(!cn_acl_authorize_any(&az, "User:y", "h", CN_ACL_OP_WRITE, T));
    add(&az.acls, T, LIT, "*", "User:x", "*", CN_ACL_OP_WRITE, D);
    CHECK(!cn_acl_authorize_any(&az, "User:x", "h", CN_ACL_OP_WRITE, T));
    cn_acl_set_fini(&az.acls);
}

UNIT_TEST(filters_any_match_and_remove)
{
    struct cn_acl_set s;
    cn_acl_set_init(&s);
    add(&s, T, LIT, "orders", "User:x", "*", CN_ACL_OP_READ, A);
    add(&s, T, LIT, "*", "User:x", "*", CN_ACL_OP_READ, A);
    add(&s, T, PRE, "ord", "User:x", "*", CN_ACL_OP_WRITE, A);
    add(&s, G, LIT, "orders", "User:x", "*", CN_ACL_OP_READ, A);
    add(&s, G, LIT, "orders", "User:x", "*", CN_ACL_OP_READ, A); /* dup */
    CHECK_EQ(s.n, 4);
    struct cn_acl_filter match = {T, CN_ACL_PT_MATCH, CN_ACL_OP_ANY,
                                  CN_ACL_PERM_ANY, "orders", NULL, NULL};
    struct cn_acl_filter lit = {T, CN_ACL_PT_ANY, CN_ACL_OP_ANY,
                                CN_ACL_PERM_ANY, "orders", NULL, NULL};
    struct cn_acl_filter all = {CN_ACL_RT_ANY, CN_ACL_PT_ANY, CN_ACL_OP_ANY,
                                CN_ACL_PERM_ANY, NULL, NULL, NULL};
    int nm = 0, nl = 0, na = 0;
    for (size_t i = 0; i < s.n; i++) {
        nm += cn_acl_filter_matches(&match, &s.v[i]);
        nl += cn_acl_filter_matches(&lit, &s.v[i]);
        na += cn_acl_filter_matches(&all, &s.v[i]);
    }
    CHECK_EQ(nm, 3);
    CHECK_EQ(nl, 1);
    CHECK_EQ(na, 4);
    CHECK(cn_acl_filter_invalid(&match) == NULL);
    struct cn_acl_filter bad = match;
    bad.op = 0;
    CHECK(cn_acl_filter_invalid(&bad) != NULL);
    struct cn_acl_set gone;
    cn_acl_set_init(&gone);
    CHECK_EQ(cn_acl_set_remove(&s, &match, &gone), 0);
    CHECK_EQ(gone.n, 3);
    CHECK_EQ(s.n, 1);
    CHECK_EQ(s.v[0].rtype, G);
    cn_acl_set_fini(&gone);
    cn_acl_set_fini(&s);
}

UNIT_TEST(invalid_bindings)
{
    struct cn_acl_binding bd = {.rtype = CN_ACL_RT_CLUSTER, .pattern = LIT,
                                .op = CN_ACL_OP_ALTER, .perm = A,
                                .name = "kafka-cluster",
                                .principal = "User:x", .host = "*"};
    CHECK(cn_acl_binding_invalid(&bd) == NULL);
    bd.name = "other";
    CHECK(cn_acl_binding_invalid(&bd) != NULL);
    bd.name = "kafka-cluster";
    bd.principal = "nouser";
    CHECK(cn_acl_binding_invalid(&bd) != NULL);
    bd.principal = "User:x";
    bd.op = CN_ACL_OP_ANY;
    CHECK(cn_acl_binding_invalid(&bd) != NULL);
    bd.op = CN_ACL_OP_ALTER;
    bd.pattern = CN_ACL_PT_MATCH;
    CHECK(cn_acl_binding_invalid(&bd) != NULL);
    CHECK_EQ(cn_acl_op_parse("idempotent_write"), CN_ACL_OP_IDEMPOTENT_WRITE);
    CHECK_EQ(cn_acl_rtype_parse("TRANSACTIONAL_ID"), X);
    CHECK_EQ(cn_acl_op_parse("nope"), 0);
    CHECK(strcmp(cn_acl_op_name(CN_ACL_OP_CLUSTER_ACTION),
                 "CLUSTER_ACTION") == 0);
}

UNIT_TEST(store_roundtrip_and_damage)
{
    struct cn_acl_set s, r;
    cn_acl_set_init(&s);
    add(&s, T, PRE, "orders", "User:x", "*", CN_ACL_OP_WRITE, A);
    add(&s, X, LIT, "tx", "User:*", "10.0.0.1", CN_ACL_OP_DESCRIBE, D);
    s.v[0].id[0] = 7;
    uint8_t *p;
    size_t n;
    CHECK_EQ(cn_acl_encode(&s, &p, &n), 0);
    cn_acl_set_init(&r);
    CHECK_EQ(cn_acl_decode(p, n, &r), 0);
    CHECK_EQ(r.n, 2);
    CHECK_EQ(r.v[0].id[0], 7);
    CHECK(strcmp(r.v[1].host, "10.0.0.1") == 0);
    CHECK_EQ(r.v[1].perm, D);
    cn_acl_set_fini(&r);
    /* Every flipped byte and every truncation is refused. */
    for (size_t i = 0; i < n; i++) {
        p[i] ^= 0x40;
        cn_acl_set_init(&r);
        CHECK_EQ(cn_acl_decode(p, n, &r), CN_ECORRUPT);
        CHECK_EQ(r.n, 0);
        p[i] ^= 0x40;
        CHECK_EQ(cn_acl_decode(p, i, &r), CN_ECORRUPT);
    }
    free(p);
    cn_acl_set_fini(&s);
    CHECK_EQ(cn_acl_encode(&s, &p, &n), 0);
    cn_acl_set_init(&r);
    CHECK_EQ(cn_acl_decode(p, n, &r), 0);
    CHECK_EQ(r.n, 0);
    free(p);
}

#define CORPUS "tests/fuzz/corpus/acl_store"

/* Writes the seed images the fuzz target starts from, then replays every
 * file of the corpus: each decodes or is refused, never crashes. */
UNIT_TEST(corpus_seeds_and_replay)
{
    struct cn_acl_set s;
    cn_acl_set_init(&s);
    uint8_t *p;
    size_t n;
    CHECK_EQ(cn_acl_encode(&s, &p, &n), 0);
    FILE *f = fopen(CORPUS "/empty", "wb");
    if (f) {
        fwrite(p, 1, n, f);
        fclose(f);
    }
    free(p);
    add(&s, T, PRE, "orders", "User:x", "*", CN_ACL_OP_WRITE, A);
    add(&s, CN_ACL_RT_CLUSTER, LIT, "kafka-cluster", "User:*", "127.0.0.1",
        CN_ACL_OP_ALTER, D);
    CHECK_EQ(cn_acl_encode(&s, &p, &n), 0);
    f = fopen(CORPUS "/two", "wb");
    if (f) {
        fwrite(p, 1, n, f);
        fclose(f);
    }
    free(p);
    cn_acl_set_fini(&s);
    const char *names[] = {"empty", "two"};
    for (size_t i = 0; i < 2; i++) {
        char path[256];
        snprintf(path, sizeof path, CORPUS "/%s", names[i]);
        f = fopen(path, "rb");
        CHECK(f != NULL);
        if (!f)
            continue;
        uint8_t buf[4096];
        size_t got = fread(buf, 1, sizeof buf, f);
        fclose(f);
        cn_acl_set_init(&s);
        CHECK_EQ(cn_acl_decode(buf, got, &s), 0);
        cn_acl_set_fini(&s);
    }
}

UNIT_MAIN(corpus_seeds_and_replay, off_allows_everything, default_deny_and_allow_everyone, super_users,
          deny_wins_and_implication, resource_type_and_host_matter,
          authorize_any_of_type, filters_any_match_and_remove,
          invalid_bindings, store_roundtrip_and_damage)
