/*
 * test_offsets.c - the committed-offsets store of consumer groups and its
 * __consumer_offsets records.
 *
 * Byte tables were written by hand from internal/OffsetCommitKey.json and
 * OffsetCommitValue.json (int16 version, then the body at that version).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/wr.h"
#include "group/offsets.h"
#include "unit.h"

static struct cn_offset_value val(int64_t offset, const char *meta,
                                  int64_t commit_ms)
{
    struct cn_offset_value v;

    v.offset = offset;
    v.leader_epoch = 7;
    v.metadata = cn_bytes_str(meta);
    v.commit_timestamp_ms = commit_ms;
    v.expire_timestamp_ms = -1;
    return v;
}

/* The visible offset of a key, or -1 when there is none. */
static int64_t got(const struct cn_offsets *os, const char *g, const char *t,
                   int32_t p)
{
    struct cn_offset_value v;

    if (cn_offsets_get(os, g, t, p, &v))
        return -1;
    return v.offset;
}

UNIT_TEST(test_put_get_overwrite_delete)
{
    struct cn_offsets *os = cn_offsets_new();
    struct cn_offset_value v = val(42, "hello", 1000), out;

    CHECK(os != NULL);
    CHECK_EQ(cn_offsets_get(os, "g", "t", 0, &out), CN_ENOTFOUND);
    CHECK_EQ(cn_offsets_put(os, "g", "t", 0, &v), 0);
    CHECK_EQ(cn_offsets_get(os, "g", "t", 0, &out), 0);
    CHECK_EQ(out.offset, 42);
    CHECK_EQ(out.leader_epoch, 7);
    CHECK_EQ(out.commit_timestamp_ms, 1000);
    CHECK_EQ(out.expire_timestamp_ms, -1);
    CHECK(cn_bytes_eq_str(out.metadata, "hello"));
    CHECK_EQ(cn_offsets_count(os, "g"), 1);
    CHECK_EQ(cn_offsets_ngroups(os), 1);

    /* Overwrite; the store owns its copy of the metadata. */
    {
        char buf[8];
        strcpy(buf, "abc");
        v = val(43, buf, 2000);
        CHECK_EQ(cn_offsets_put(os, "g", "t", 0, &v), 0);
        strcpy(buf, "xyz");
    }
    CHECK_EQ(cn_offsets_get(os, "g", "t", 0, &out), 0);
    CHECK_EQ(out.offset, 43);
    CHECK(cn_bytes_eq_str(out.metadata, "abc"));
    CHECK_EQ(cn_offsets_count(os, "g"), 1);

    /* Neighbours are distinct keys. */
    v = val(1, NULL, 0);
    CHECK_EQ(cn_offsets_put(os, "g", "t", 1, &v), 0);
    v = val(2, "", 0);
    CHECK_EQ(cn_offsets_put(os, "g", "u", 0, &v), 0);
    v = val(3, "x", 0);
    CHECK_EQ(cn_offsets_put(os, "h", "t", 0, &v), 0);
    CHECK_EQ(got(os, "g", "t", 0), 43);
    CHECK_EQ(got(os, "g", "t", 1), 1);
    CHECK_EQ(got(os, "g", "u", 0), 2);
    CHECK_EQ(got(os, "h", "t", 0), 3);
    CHECK_EQ(cn_offsets_get(os, "g", "t", 1, &out), 0);
    CHECK(cn_bytes_is_null(out.metadata)); /* null stays null in memory */
    CHECK_EQ(cn_offsets_get(os, "g", "u", 0, &out), 0);
    CHECK_EQ(out.metadata.len, 0);
    CHECK_EQ(cn_offsets_count(os, "g"), 3);
    CHECK_EQ(cn_offsets_ngroups(os), 2);

    CHECK_EQ(cn_offsets_delete(os, "g", "t", 0), 0);
    CHECK_EQ(cn_offsets_delete(os, "g", "t", 0), CN_ENOTFOUND);
    CHECK_EQ(got(os, "g", "t", 0), -1);
    CHECK_EQ(got(os, "g", "t", 1), 1);
    CHECK_EQ(cn_offsets_count(os, "g"), 2);
    CHECK_EQ(cn_offsets_delete(os, "h", "t", 0), 0);
    CHECK_EQ(cn_offsets_ngroups(os), 1); /* an emptied group goes */
    CHECK_EQ(cn_offsets_count(os, "h"), 0);
    cn_offsets_free(os);
    cn_offsets_free(NULL);
}

UNIT_TEST(test_invalid_args)
{
    struct cn_offsets *os = cn_offsets_new();
    struct cn_offset_value v = val(1, NULL, 0), out;

    CHECK_EQ(cn_offsets_put(os, NULL, "t", 0, &v), CN_EINVAL);
    CHECK_EQ(cn_offsets_put(os, "g", NULL, 0, &v), CN_EINVAL);
    CHECK_EQ(cn_offsets_put(os, "g", "t", -1, &v), CN_EINVAL);
    CHECK_EQ(cn_offsets_txn_put(os, "g", -1, 0, "t", 0, &v), CN_EINVAL);
    CHECK_EQ(cn_offsets_txn_put(os, "g", 5, 0, "t", -2, &v), CN_EINVAL);
    CHECK_EQ(cn_offsets_get(os, NULL, "t", 0, &out), CN_ENOTFOUND);
    CHECK_EQ(cn_offsets_ngroups(os), 0);
    /* Empty names are names. */
    CHECK_EQ(cn_offsets_put(os, "", "", 0, &v), 0);
    CHECK_EQ(got(os, "", "", 0), 1);
    cn_offsets_free(os);
}

UNIT_TEST(test_delete_group)
{
    struct cn_offsets *os = cn_offsets_new();
    struct cn_offset_value v = val(5, "m", 0);
    int32_t p;

    for (p = 0; p < 10; p++) {
        CHECK_EQ(cn_offsets_put(os, "g1", "a", p, &v), 0);
        CHECK_EQ(cn_offsets_put(os, "g1", "b", p, &v), 0);
        CHECK_EQ(cn_offsets_put(os, "g2", "a", p, &v), 0);
    }
    /* A pending-only key counts as a key of the group. */
    CHECK_EQ(cn_offsets_txn_put(os, "g1", 9, 0, "c", 0, &v), 0);
    CHECK_EQ(cn_offsets_count(os, "g1"), 20);
    CHECK_EQ(cn_offsets_delete_group(os, "g1"), 21);
    CHECK_EQ(cn_offsets_delete_group(os, "g1"), 0);
    CHECK_EQ(cn_offsets_count(os, "g1"), 0);
    CHECK_EQ(cn_offsets_pending_count(os, "g1"), 0);
    CHECK(!cn_offsets_has_pending(os, "g1", "c", 0));
    CHECK_EQ(cn_offsets_count(os, "g2"), 10);
    CHECK_EQ(cn_offsets_ngroups(os), 1);
    /* The producer's transaction lost its only offset. */
    CHECK_EQ(cn_offsets_txn_complete(os, 9, true), 0);
    CHECK_EQ(got(os, "g1", "c", 0), -1);
    cn_offsets_free(os);
}

struct seen {
    int n;            /* calls */
    int nnull;        /* calls with v == NULL */
    int64_t sum;      /* sum of offsets */
    int64_t partsum;  /* sum of partitions */
    int stop_after;   /* return 99 on this call (1-based), 0 = never */
};

static int visit(void *arg, const char *topic, int32_t partition,
                 const struct cn_offset_value *v)
{
    struct seen *s = arg;

    CHECK(topic != NULL);
    s->n++;
    s->partsum += partition;
    if (v)
        s->sum += v->offset;
    else
        s->nnull++;
    return s->n == s->stop_after ? 99 : 0;
}

UNIT_TEST(test_foreach_group_offsets)
{
    struct cn_offsets *os = cn_offsets_new();
    struct cn_offset_value v;
    struct seen s;
    int32_t p;
    int t;

    /* Enough topics and partitions for every table to grow a few times. */
    for (t = 0; t < 40; t++) {
        char topic[32];
        snprintf(topic, sizeof topic, "topic-%d", t);
        for (p = 0; p < 50; p++) {
            v = val(t * 1000 + p, "m", 0);
            CHECK_EQ(cn_offsets_put(os, "g", topic, p, &v), 0);
        }
    }
    v = val(1, NULL, 0);
    CHECK_EQ(cn_offsets_put(os, "other", "topic-0", 0, &v), 0);
    CHECK_EQ(cn_offsets_txn_put(os, "g", 3, 1, "pending-only", 7, &v), 0);
    CHECK_EQ(cn_offsets_count(os, "g"), 2000);

    memset(&s, 0, sizeof s);
    CHECK_EQ(cn_offsets_foreach(os, "g", visit, &s), 0);
    CHECK_EQ(s.n, 2000);
    CHECK_EQ(s.nnull, 0);
    /* sum over t of (50 * 1000 t + 1225) */
    CHECK_EQ(s.sum, 50LL * 1000 * (39 * 40 / 2) + 40LL * 1225);
    CHECK_EQ(s.partsum, 40LL * 1225);

    memset(&s, 0, sizeof s);
    CHECK_EQ(cn_offsets_foreach_key(os, "g", visit, &s), 0);
    CHECK_EQ(s.n, 2001);
    CHECK_EQ(s.nnull, 1);

    memset(&s, 0, sizeof s);
    s.stop_after = 5;
    CHECK_EQ(cn_offsets_foreach(os, "g", visit, &s), 99);
    CHECK_EQ(s.n, 5);

    memset(&s, 0, sizeof s);
    CHECK_EQ(cn_offsets_foreach(os, "nope", visit, &s), 0);
    CHECK_EQ(s.n, 0);

    for (t = 0; t < 40; t++) {
        char topic[32];
        snprintf(topic, sizeof topic, "topic-%d", t);
        for (p = 0; p < 50; p++)
            CHECK_EQ(got(os, "g", topic, p), t * 1000 + p);
    }
    cn_offsets_free(os);
}

struct groups_seen {
    int n;
    size_t committed, pending;
    bool saw_a, saw_b;
};

static int visit_group(void *arg, const char *group, size_t ncommitted,
                       size_t npending)
{
    struct groups_seen *s = arg;

    s->n++;
    s->committed += ncommitted;
    s->pending += npending;
    if (strcmp(group, "a") == 0)
        s->saw_a = true;
    if (strcmp(group, "b") == 0)
        s->saw_b = npending == 1 && ncommitted == 0;
    return 0;
}

UNIT_TEST(test_foreach_groups)
{
    struct cn_offsets *os = cn_offsets_new();
    struct cn_offset_value v = val(1, NULL, 0);
    struct groups_seen s;
    int i;

    CHECK_EQ(cn_offsets_put(os, "a", "t", 0, &v), 0);
    CHECK_EQ(cn_offsets_put(os, "a", "t", 1, &v), 0);
    CHECK_EQ(cn_offsets_txn_put(os, "b", 1, 0, "t", 0, &v), 0);
    for (i = 0; i < 100; i++) {
        char g[16];
        snprintf(g, sizeof g, "g%d", i);
        CHECK_EQ(cn_offsets_put(os, g, "t", 0, &v), 0);
    }
    memset(&s, 0, sizeof s);
    CHECK_EQ(cn_offsets_foreach_group(os, visit_group, &s), 0);
    CHECK_EQ(s.n, 102);
    CHECK_EQ(s.committed, 102);
    CHECK_EQ(s.pending, 1);
    CHECK(s.saw_a);
    CHECK(s.saw_b);
    CHECK_EQ(cn_offsets_ngroups(os), 102);
    cn_offsets_free(os);
}

UNIT_TEST(test_txn_commit_and_abort)
{
    struct cn_offsets *os = cn_offsets_new();
    struct cn_offset_value v, out;

    v = val(100, "txn", 5);
    CHECK_EQ(cn_offsets_txn_put(os, "g", 1000, 3, "t", 0, &v), 0);
    v = val(200, "txn", 5);
    CHECK_EQ(cn_offsets_txn_put(os, "g", 1000, 3, "t", 1, &v), 0);
    CHECK_EQ(got(os, "g", "t", 0), -1); /* not visible while pending */
    CHECK(cn_offsets_has_pending(os, "g", "t", 0));
    CHECK(cn_offsets_has_pending(os, "g", "t", 1));
    CHECK(!cn_offsets_has_pending(os, "g", "t", 2));
    CHECK_EQ(cn_offsets_pending_count(os, "g"), 2);
    CHECK_EQ(cn_offsets_count(os, "g"), 0);
    CHECK_EQ(cn_offsets_ngroups(os), 1);

    /* A later put in the same transaction replaces the pending one. */
    v = val(150, "again", 6);
    CHECK_EQ(cn_offsets_txn_put(os, "g", 1000, 3, "t", 0, &v), 0);
    CHECK_EQ(cn_offsets_pending_count(os, "g"), 2);

    CHECK_EQ(cn_offsets_txn_complete(os, 1000, true), 2);
    CHECK_EQ(cn_offsets_get(os, "g", "t", 0, &out), 0);
    CHECK_EQ(out.offset, 150);
    CHECK(cn_bytes_eq_str(out.metadata, "again"));
    CHECK_EQ(out.commit_timestamp_ms, 6);
    CHECK_EQ(got(os, "g", "t", 1), 200);
    CHECK(!cn_offsets_has_pending(os, "g", "t", 0));
    CHECK_EQ(cn_offsets_pending_count(os, "g"), 0);
    CHECK_EQ(cn_offsets_count(os, "g"), 2);
    CHECK_EQ(cn_offsets_txn_complete(os, 1000, true), 0); /* gone */

    /* Abort drops them and leaves the visible ones alone. */
    v = val(999, NULL, 7);
    CHECK_EQ(cn_offsets_txn_put(os, "g", 1000, 4, "t", 0, &v), 0);
    CHECK_EQ(cn_offsets_txn_put(os, "h", 1000, 4, "t", 0, &v), 0);
    CHECK_EQ(cn_offsets_ngroups(os), 2);
    CHECK_EQ(cn_offsets_txn_complete(os, 1000, false), 2);
    CHECK_EQ(got(os, "g", "t", 0), 150);
    CHECK_EQ(got(os, "h", "t", 0), -1);
    CHECK_EQ(cn_offsets_ngroups(os), 1); /* h had only the pending one */
    CHECK(!cn_offsets_has_pending(os, "g", "t", 0));
    CHECK_EQ(cn_offsets_txn_complete(os, 424242, true), 0);
    cn_offsets_free(os);
}

static bool match_prefix(void *arg, const char *group)
{
    return strncmp(group, arg, strlen(arg)) == 0;
}

/* A marker on one __consumer_offsets partition ends the transaction for
 * that partition's groups only; the producer's other pending offsets (and
 * its epoch fence) stay until their own marker. */
UNIT_TEST(test_txn_complete_match)
{
    struct cn_offsets *os = cn_offsets_new();
    struct cn_offset_value v = val(10, NULL, 1);

    CHECK_EQ(cn_offsets_txn_put(os, "p0-g", 77, 5, "t", 0, &v), 0);
    CHECK_EQ(cn_offsets_txn_put(os, "p0-g", 77, 5, "t", 1, &v), 0);
    v = val(20, NULL, 1);
    CHECK_EQ(cn_offsets_txn_put(os, "p1-g", 77, 5, "t", 0, &v), 0);
    CHECK_EQ(cn_offsets_txn_complete_match(os, 77, true, match_prefix, "p0-"),
             2);
    CHECK_EQ(got(os, "p0-g", "t", 0), 10);
    CHECK_EQ(got(os, "p0-g", "t", 1), 10);
    CHECK_EQ(got(os, "p1-g", "t", 0), -1);
    CHECK(cn_offsets_has_pending(os, "p1-g", "t", 0));
    /* Still open elsewhere: an older epoch is still a zombie. */
    CHECK_EQ(cn_offsets_txn_put(os, "p1-g", 77, 4, "t", 2, &v), CN_EINVAL);
    /* A marker that matches nothing here ends nothing. */
    CHECK_EQ(cn_offsets_txn_complete_match(os, 77, true, match_prefix, "p9-"),
             0);
    CHECK_EQ(cn_offsets_txn_complete_match(os, 77, false, match_prefix, "p1-"),
             1);
    CHECK_EQ(got(os, "p1-g", "t", 0), -1);
    CHECK_EQ(cn_offsets_ngroups(os), 1);
    /* The producer is gone: its next transaction starts afresh. */
    CHECK_EQ(cn_offsets_txn_complete(os, 77, true), 0);
    CHECK_EQ(cn_offsets_txn_put(os, "p1-g", 77, 1, "t", 0, &v), 0);
    CHECK_EQ(cn_offsets_txn_complete_match(os, 77, true, NULL, NULL), 1);
    CHECK_EQ(got(os, "p1-g", "t", 0), 20);
    cn_offsets_free(os);
}

/* Unloading a partition's groups drops their visible and pending offsets
 * (pending ones off their producers too) and leaves the others. */
UNIT_TEST(test_unload)
{
    struct cn_offsets *os = cn_offsets_new();
    struct cn_offset_value v = val(5, "m", 1);
    char name[32];

    for (int i = 0; i < 40; i++) {
        snprintf(name, sizeof name, "%s-%d", i % 2 ? "lost" : "kept", i);
        CHECK_EQ(cn_offsets_put(os, name, "t", 0, &v), 0);
        CHECK_EQ(cn_offsets_put(os, name, "u", 3, &v), 0);
    }
    CHECK_EQ(cn_offsets_txn_put(os, "lost-1", 9, 0, "t", 1, &v), 0);
    CHECK_EQ(cn_offsets_txn_put(os, "kept-0", 9, 0, "t", 1, &v), 0);
    CHECK_EQ(cn_offsets_txn_put(os, "lost-3", 8, 0, "t", 1, &v), 0);
    CHECK_EQ(cn_offsets_ngroups(os), 40);
    CHECK_EQ(cn_offsets_unload(os, match_prefix, "lost-"), 20);
    CHECK_EQ(cn_offsets_ngroups(os), 20);
    CHECK_EQ(got(os, "lost-1", "t", 0), -1);
    CHECK_EQ(cn_offsets_pending_count(os, "lost-1"), 0);
    CHECK_EQ(got(os, "kept-0", "u", 3), 5);
    CHECK_EQ(got(os, "kept-38", "t", 0), 5);
    /* Producer 8 had only unloaded offsets; 9 keeps its other one. */
    CHECK_EQ(cn_offsets_txn_complete(os, 8, true), 0);
    CHECK_EQ(cn_offsets_txn_complete(os, 9, true), 1);
    CHECK_EQ(got(os, "kept-0", "t", 1), 5);
    CHECK_EQ(cn_offsets_unload(os, match_prefix, "lost-"), 0);
    CHECK_EQ(cn_offsets_unload(os, match_prefix, ""), 20);
    CHECK_EQ(cn_offsets_ngroups(os), 0);
    cn_offsets_free(os);
}

UNIT_TEST(test_txn_epoch_fence)
{
    struct cn_offsets *os = cn_offsets_new();
    struct cn_offset_value v = val(1, NULL, 0);

    CHECK_EQ(cn_offsets_txn_put(os, "g", 7, 5, "t", 0, &v), 0);
    CHECK_EQ(cn_offsets_txn_put(os, "g", 7, 4, "t", 1, &v), CN_EINVAL);
    CHECK(!cn_offsets_has_pending(os, "g", "t", 1));
    CHECK_EQ(cn_offsets_txn_put(os, "g", 7, -1, "t", 1, &v), 0);
    CHECK_EQ(cn_offsets_txn_put(os, "g", 7, 6, "t", 2, &v), 0);
    CHECK_EQ(cn_offsets_txn_put(os, "g", 7, 5, "t", 3, &v), CN_EINVAL);
    CHECK_EQ(cn_offsets_txn_complete(os, 7, false), 3);
    /* A new transaction starts with whatever epoch it has. */
    CHECK_EQ(cn_offsets_txn_put(os, "g", 7, 0, "t", 0, &v), 0);
    CHECK_EQ(cn_offsets_txn_complete(os, 7, true), 1);
    cn_offsets_free(os);
}

UNIT_TEST(test_pending_counts_across_producers_and_groups)
{
    struct cn_offsets *os = cn_offsets_new();
    struct cn_offset_value v = val(10, NULL, 0);

    /* Producers 1 and 2 both hold g/t/0; 1 also g/t/1 and h/t/0; 3 holds
     * h/u/5. */
    CHECK_EQ(cn_offsets_txn_put(os, "g", 1, 0, "t", 0, &v), 0);
    CHECK_EQ(cn_offsets_txn_put(os, "g", 2, 0, "t", 0, &v), 0);
    CHECK_EQ(cn_offsets_txn_put(os, "g", 1, 0, "t", 1, &v), 0);
    CHECK_EQ(cn_offsets_txn_put(os, "h", 1, 0, "t", 0, &v), 0);
    CHECK_EQ(cn_offsets_txn_put(os, "h", 3, 0, "u", 5, &v), 0);
    CHECK_EQ(cn_offsets_txn_put(os, "g", 2, 0, "t", 0, &v), 0); /* again */
    CHECK_EQ(cn_offsets_pending_count(os, "g"), 3);
    CHECK_EQ(cn_offsets_pending_count(os, "h"), 2);
    CHECK_EQ(cn_offsets_pending_count(os, "x"), 0);

    CHECK_EQ(cn_offsets_txn_complete(os, 2, false), 1);
    CHECK(cn_offsets_has_pending(os, "g", "t", 0)); /* 1 still holds it */
    CHECK_EQ(cn_offsets_pending_count(os, "g"), 2);

    CHECK_EQ(cn_offsets_txn_complete(os, 1, true), 3);
    CHECK(!cn_offsets_has_pending(os, "g", "t", 0));
    CHECK(!cn_offsets_has_pending(os, "g", "t", 1));
    CHECK(!cn_offsets_has_pending(os, "h", "t", 0));
    CHECK(cn_offsets_has_pending(os, "h", "u", 5));
    CHECK_EQ(cn_offsets_pending_count(os, "g"), 0);
    CHECK_EQ(cn_offsets_pending_count(os, "h"), 1);
    CHECK_EQ(cn_offsets_count(os, "g"), 2);
    CHECK_EQ(cn_offsets_count(os, "h"), 1);

    CHECK_EQ(cn_offsets_txn_complete(os, 3, true), 1);
    CHECK_EQ(cn_offsets_pending_count(os, "h"), 0);
    CHECK_EQ(got(os, "h", "u", 5), 10);
    cn_offsets_free(os);
}

UNIT_TEST(test_plain_and_txn_commit_order)
{
    struct cn_offsets *os = cn_offsets_new();
    struct cn_offset_value v;

    /* Plain commit first, then the transaction's: the transaction's is
     * later in the log and wins at commit. */
    v = val(10, NULL, 0);
    CHECK_EQ(cn_offsets_put(os, "g", "t", 0, &v), 0);
    v = val(20, NULL, 0);
    CHECK_EQ(cn_offsets_txn_put(os, "g", 1, 0, "t", 0, &v), 0);
    CHECK_EQ(got(os, "g", "t", 0), 10);
    CHECK_EQ(cn_offsets_txn_complete(os, 1, true), 1);
    CHECK_EQ(got(os, "g", "t", 0), 20);

    /* A plain commit made while the transaction is open is visible at
     * once and kept when the earlier transactional record commits (Kafka
     * 4.x replayEndTransactionMarker keeps the later record offset). */
    v = val(30, NULL, 0);
    CHECK_EQ(cn_offsets_txn_put(os, "g", 1, 0, "t", 0, &v), 0);
    v = val(25, NULL, 0);
    CHECK_EQ(cn_offsets_put(os, "g", "t", 0, &v), 0);
    CHECK_EQ(got(os, "g", "t", 0), 25);
    CHECK(cn_offsets_has_pending(os, "g", "t", 0));
    CHECK_EQ(cn_offsets_txn_complete(os, 1, true), 1);
    CHECK_EQ(got(os, "g", "t", 0), 25);

    /* Re-putting in the transaction after the plain commit makes the
     * transactional one the later record again. */
    v = val(40, NULL, 0);
    CHECK_EQ(cn_offsets_txn_put(os, "g", 1, 0, "t", 0, &v), 0);
    v = val(35, NULL, 0);
    CHECK_EQ(cn_offsets_put(os, "g", "t", 0, &v), 0);
    v = val(45, NULL, 0);
    CHECK_EQ(cn_offsets_txn_put(os, "g", 1, 0, "t", 0, &v), 0);
    CHECK_EQ(cn_offsets_txn_complete(os, 1, true), 1);
    CHECK_EQ(got(os, "g", "t", 0), 45);
    CHECK_EQ(cn_offsets_count(os, "g"), 1);
    cn_offsets_free(os);
}

UNIT_TEST(test_delete_drops_pending)
{
    struct cn_offsets *os = cn_offsets_new();
    struct cn_offset_value v = val(10, NULL, 0);

    CHECK_EQ(cn_offsets_put(os, "g", "t", 0, &v), 0);
    CHECK_EQ(cn_offsets_txn_put(os, "g", 1, 0, "t", 0, &v), 0);
    CHECK_EQ(cn_offsets_txn_put(os, "g", 1, 0, "t", 1, &v), 0);
    CHECK_EQ(cn_offsets_txn_put(os, "g", 2, 0, "t", 0, &v), 0);
    CHECK_EQ(cn_offsets_delete(os, "g", "t", 0), 0);
    CHECK(!cn_offsets_has_pending(os, "g", "t", 0));
    CHECK_EQ(cn_offsets_pending_count(os, "g"), 1);
    CHECK_EQ(got(os, "g", "t", 0), -1);
    /* A key with only pending offsets is deletable too. */
    CHECK_EQ(cn_offsets_delete(os, "g", "t", 1), 0);
    CHECK_EQ(cn_offsets_ngroups(os), 0);
    CHECK_EQ(cn_offsets_txn_complete(os, 1, true), 0);
    CHECK_EQ(cn_offsets_txn_complete(os, 2, true), 0);
    CHECK_EQ(got(os, "g", "t", 0), -1);
    CHECK_EQ(got(os, "g", "t", 1), -1);
    cn_offsets_free(os);
}

/* Frees with pending offsets still open: ASan checks nothing leaks. */
UNIT_TEST(test_free_with_open_transactions)
{
    struct cn_offsets *os = cn_offsets_new();
    struct cn_offset_value v = val(10, "meta", 0);
    int i;

    for (i = 0; i < 50; i++) {
        CHECK_EQ(cn_offsets_put(os, "g", "t", i, &v), 0);
        CHECK_EQ(cn_offsets_txn_put(os, "g", i % 7, 0, "t", i, &v), 0);
        CHECK_EQ(cn_offsets_txn_put(os, "h", i % 5, 0, "t", i, &v), 0);
    }
    cn_offsets_free(os);
}

static const uint8_t key_v1_bytes[] = {
    0x00, 0x01,                   /* version 1 */
    0x00, 0x02, 'g', '1',         /* group */
    0x00, 0x03, 't', 'o', 'p',    /* topic */
    0x00, 0x00, 0x00, 0x05,       /* partition */
};

static const uint8_t value_v3_bytes[] = {
    0x00, 0x03,                                     /* version 3 */
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, /* offset 256 */
    0x00, 0x00, 0x00, 0x09,                         /* leader epoch 9 */
    0x00, 0x02, 'm', 'd',                           /* metadata */
    0x00, 0x00, 0x01, 0x8f, 0x00, 0x00, 0x00, 0x01, /* commit ts */
};

UNIT_TEST(test_record_bytes)
{
    struct cn_offset_value v;
    struct cn_wr k, val_wr;

    v.offset = 256;
    v.leader_epoch = 9;
    v.metadata = cn_bytes_str("md");
    v.commit_timestamp_ms = INT64_C(0x0000018f00000001);
    v.expire_timestamp_ms = 12345; /* never written */
    cn_wr_init(&k, 0);
    cn_wr_init(&val_wr, 0);
    CHECK_EQ(cn_offsets_record(&k, &val_wr, "g1", "top", 5, &v), 0);
    CHECK_EQ(k.len, sizeof key_v1_bytes);
    CHECK(k.len == sizeof key_v1_bytes &&
          memcmp(k.buf, key_v1_bytes, k.len) == 0);
    CHECK_EQ(val_wr.len, sizeof value_v3_bytes);
    CHECK(val_wr.len == sizeof value_v3_bytes &&
          memcmp(val_wr.buf, value_v3_bytes, val_wr.len) == 0);

    cn_wr_reset(&k);
    CHECK_EQ(cn_offsets_tombstone_key(&k, "g1", "top", 5), 0);
    CHECK(k.len == sizeof key_v1_bytes &&
          memcmp(k.buf, key_v1_bytes, k.len) == 0);

    /* A null metadata goes out empty (the schema has no null). */
    cn_wr_reset(&k);
    cn_wr_reset(&val_wr);
    v.metadata = CN_BYTES_NULL;
    CHECK_EQ(cn_offsets_record(&k, &val_wr, "g1", "top", 5, &v), 0);
    CHECK_EQ(val_wr.len, sizeof value_v3_bytes - 2);
    CHECK(val_wr.len > 15 && val_wr.buf[14] == 0 && val_wr.buf[15] == 0);

    /* Invalid arguments write nothing. */
    cn_wr_reset(&k);
    cn_wr_reset(&val_wr);
    CHECK_EQ(cn_offsets_record(&k, &val_wr, NULL, "t", 0, &v), CN_EINVAL);
    CHECK_EQ(cn_offsets_record(&k, &val_wr, "g", "t", -1, &v), CN_EINVAL);
    CHECK_EQ(cn_offsets_tombstone_key(&k, "g", NULL, 0), CN_EINVAL);
    {
        char *big = malloc(32769);
        memset(big, 'a', 32768);
        big[32768] = '\0';
        CHECK_EQ(cn_offsets_tombstone_key(&k, big, "t", 0), CN_EINVAL);
        v.metadata = cn_bytes_of(big, 32768);
        CHECK_EQ(cn_offsets_record(&k, &val_wr, "g", "t", 0, &v),
                 CN_EINVAL);
        big[32767] = '\0'; /* the longest that fits */
        CHECK_EQ(cn_offsets_tombstone_key(&k, big, "t", 0), 0);
        free(big);
    }
    CHECK_EQ(val_wr.len, 0);
    cn_wr_fini(&k);
    cn_wr_fini(&val_wr);
}

/* Encodes a record for (g, t, p, v) and loads it into os. */
static int load(struct cn_offsets *os, const char *g, const char *t,
                int32_t p, const struct cn_offset_value *v, int64_t pid,
                bool txn)
{
    struct cn_wr k, vw;
    int err;

    cn_wr_init(&k, 0);
    cn_wr_init(&vw, 0);
    if (v)
        err = cn_offsets_record(&k, &vw, g, t, p, v);
    else
        err = cn_offsets_tombstone_key(&k, g, t, p);
    CHECK_EQ(err, 0);
    err = cn_offsets_load_record(os, k.buf, k.len, v ? vw.buf : NULL,
                                 vw.len, pid, txn);
    cn_wr_fini(&k);
    cn_wr_fini(&vw);
    return err;
}

UNIT_TEST(test_load_roundtrip)
{
    struct cn_offsets *os = cn_offsets_new();
    struct cn_offset_value v = val(77, "meta", 1700000000000LL), out;

    /* Plain. */
    CHECK_EQ(load(os, "g", "t", 3, &v, -1, false), 0);
    CHECK_EQ(cn_offsets_get(os, "g", "t", 3, &out), 0);
    CHECK_EQ(out.offset, 77);
    CHECK_EQ(out.leader_epoch, 7);
    CHECK(cn_bytes_eq_str(out.metadata, "meta"));
    CHECK_EQ(out.commit_timestamp_ms, 1700000000000LL);
    CHECK_EQ(out.expire_timestamp_ms, -1);

    /* Transactional: pending until the marker. */
    v = val(88, NULL, 1);
    CHECK_EQ(load(os, "g", "t", 3, &v, 4000, true), 0);
    CHECK_EQ(load(os, "g", "t", 4, &v, 4000, true), 0);
    CHECK_EQ(got(os, "g", "t", 3), 77);
    CHECK(cn_offsets_has_pending(os, "g", "t", 3));
    CHECK_EQ(cn_offsets_txn_complete(os, 4000, true), 2);
    CHECK_EQ(got(os, "g", "t", 3), 88);
    CHECK_EQ(got(os, "g", "t", 4), 88);
    CHECK_EQ(cn_offsets_get(os, "g", "t", 4, &out), 0);
    CHECK_EQ(out.metadata.len, 0); /* null was written empty */

    /* Transactional without a producer id. */
    CHECK_EQ(load(os, "g", "t", 5, &v, -1, true), CN_EINVAL);
    CHECK(!cn_offsets_has_pending(os, "g", "t", 5));

    /* Tombstones, also for keys that are not there. */
    CHECK_EQ(load(os, "g", "t", 3, NULL, -1, false), 0);
    CHECK_EQ(got(os, "g", "t", 3), -1);
    CHECK_EQ(load(os, "g", "t", 3, NULL, -1, false), 0);
    CHECK_EQ(load(os, "g", "t", 4, NULL, -1, false), 0);
    CHECK_EQ(cn_offsets_ngroups(os), 0);
    cn_offsets_free(os);
}

UNIT_TEST(test_load_old_versions)
{
    static const uint8_t key_v0[] = {
        0x00, 0x00, 0x00, 0x01, 'g', 0x00, 0x01, 't', 0x00, 0x00, 0x00, 0x02,
    };
    static const uint8_t value_v1[] = {
        0x00, 0x01,                                     /* version 1 */
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x2a, /* offset 42 */
        0x00, 0x01, 'x',                                /* metadata */
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0xe8, /* commit 1000 */
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x07, 0xd0, /* expire 2000 */
    };
    static const uint8_t value_v0[] = {
        0x00, 0x00,                                     /* version 0 */
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x2b, /* offset 43 */
        0x00, 0x00,                                     /* metadata "" */
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x05, /* commit 5 */
    };
    static const uint8_t value_v2[] = {
        0x00, 0x02,                                     /* version 2 */
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x2c, /* offset 44 */
        0x00, 0x00,                                     /* metadata "" */
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x06, /* commit 6 */
    };
    static const uint8_t value_v4[] = {
        0x00, 0x04,                                     /* version 4 */
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x2d, /* offset 45 */
        0x00, 0x00, 0x00, 0x03,                         /* leader epoch */
        0x03, 'a', 'b',                                 /* compact str */
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x07, /* commit 7 */
        0x01, 0x00, 0x02, 0xaa, 0xbb,                   /* one tag */
    };
    struct cn_offsets *os = cn_offsets_new();
    struct cn_offset_value out;

    CHECK_EQ(cn_offsets_load_record(os, key_v0, sizeof key_v0, value_v1,
                                    sizeof value_v1, -1, false),
             0);
    CHECK_EQ(cn_offsets_get(os, "g", "t", 2, &out), 0);
    CHECK_EQ(out.offset, 42);
    CHECK_EQ(out.leader_epoch, -1);
    CHECK(cn_bytes_eq_str(out.metadata, "x"));
    CHECK_EQ(out.commit_timestamp_ms, 1000);
    CHECK_EQ(out.expire_timestamp_ms, 2000);

    CHECK_EQ(cn_offsets_load_record(os, key_v0, sizeof key_v0, value_v0,
                                    sizeof value_v0, -1, false),
             0);
    CHECK_EQ(cn_offsets_get(os, "g", "t", 2, &out), 0);
    CHECK_EQ(out.offset, 43);
    CHECK_EQ(out.expire_timestamp_ms, -1);
    CHECK_EQ(out.leader_epoch, -1);

    CHECK_EQ(cn_offsets_load_record(os, key_v0, sizeof key_v0, value_v2,
                                    sizeof value_v2, -1, false),
             0);
    CHECK_EQ(got(os, "g", "t", 2), 44);

    CHECK_EQ(cn_offsets_load_record(os, key_v0, sizeof key_v0, value_v4,
                                    sizeof value_v4, -1, false),
             0);
    CHECK_EQ(cn_offsets_get(os, "g", "t", 2, &out), 0);
    CHECK_EQ(out.offset, 45);
    CHECK_EQ(out.leader_epoch, 3);
    CHECK(cn_bytes_eq_str(out.metadata, "ab"));
    CHECK_EQ(out.commit_timestamp_ms, 7);
    cn_offsets_free(os);
}

UNIT_TEST(test_load_not_an_offset_key)
{
    /* A GroupMetadataKey (version 2: just the group string). */
    static const uint8_t key_v2[] = {0x00, 0x02, 0x00, 0x01, 'g'};
    static const uint8_t key_v3[] = {0x00, 0x03, 0x00, 0x01, 'g'};
    static const uint8_t junk[] = {0xde, 0xad};
    struct cn_offsets *os = cn_offsets_new();

    CHECK_EQ(cn_offsets_load_record(os, key_v2, sizeof key_v2, junk,
                                    sizeof junk, -1, false),
             CN_OFFSETS_NOT_OFFSET);
    CHECK_EQ(cn_offsets_load_record(os, key_v2, sizeof key_v2, NULL, 0, -1,
                                    false),
             CN_OFFSETS_NOT_OFFSET);
    CHECK_EQ(cn_offsets_load_record(os, key_v3, sizeof key_v3, NULL, 0, -1,
                                    false),
             CN_OFFSETS_NOT_OFFSET);
    CHECK(CN_OFFSETS_NOT_OFFSET > 0);
    CHECK_EQ(cn_offsets_ngroups(os), 0);
    cn_offsets_free(os);
}

UNIT_TEST(test_load_malformed)
{
    struct cn_offsets *os = cn_offsets_new();
    uint8_t buf[64];
    size_t i;

    /* Every truncation of a good key and of a good value. */
    for (i = 0; i < sizeof key_v1_bytes; i++)
        CHECK_EQ(cn_offsets_load_record(os, key_v1_bytes, i, value_v3_bytes,
                                        sizeof value_v3_bytes, -1, false),
                 CN_ECORRUPT);
    for (i = 0; i < sizeof value_v3_bytes; i++)
        CHECK_EQ(cn_offsets_load_record(os, key_v1_bytes,
                                        sizeof key_v1_bytes, value_v3_bytes,
                                        i, -1, false),
                 CN_ECORRUPT);
    /* Trailing bytes. */
    memcpy(buf, key_v1_bytes, sizeof key_v1_bytes);
    buf[sizeof key_v1_bytes] = 0;
    CHECK_EQ(cn_offsets_load_record(os, buf, sizeof key_v1_bytes + 1, NULL,
                                    0, -1, false),
             CN_ECORRUPT);
    memcpy(buf, value_v3_bytes, sizeof value_v3_bytes);
    buf[sizeof value_v3_bytes] = 0;
    CHECK_EQ(cn_offsets_load_record(os, key_v1_bytes, sizeof key_v1_bytes,
                                    buf, sizeof value_v3_bytes + 1, -1,
                                    false),
             CN_ECORRUPT);
    /* Unknown value version, negative key version. */
    memcpy(buf, value_v3_bytes, sizeof value_v3_bytes);
    buf[1] = 5;
    CHECK_EQ(cn_offsets_load_record(os, key_v1_bytes, sizeof key_v1_bytes,
                                    buf, sizeof value_v3_bytes, -1, false),
             CN_ECORRUPT);
    buf[0] = 0xff;
    buf[1] = 0xff;
    CHECK_EQ(cn_offsets_load_record(os, key_v1_bytes, sizeof key_v1_bytes,
                                    buf, sizeof value_v3_bytes, -1, false),
             CN_ECORRUPT);
    memcpy(buf, key_v1_bytes, sizeof key_v1_bytes);
    buf[0] = 0x80;
    CHECK_EQ(cn_offsets_load_record(os, buf, sizeof key_v1_bytes, NULL, 0,
                                    -1, false),
             CN_ECORRUPT);
    /* Null group, NUL inside the topic, negative partition. */
    memcpy(buf, key_v1_bytes, sizeof key_v1_bytes);
    buf[2] = 0xff;
    buf[3] = 0xff;
    CHECK_EQ(cn_offsets_load_record(os, buf, sizeof key_v1_bytes, NULL, 0,
                                    -1, false),
             CN_ECORRUPT);
    memcpy(buf, key_v1_bytes, sizeof key_v1_bytes);
    buf[9] = 0;
    CHECK_EQ(cn_offsets_load_record(os, buf, sizeof key_v1_bytes, NULL, 0,
                                    -1, false),
             CN_ECORRUPT);
    memcpy(buf, key_v1_bytes, sizeof key_v1_bytes);
    buf[11] = 0x80;
    CHECK_EQ(cn_offsets_load_record(os, buf, sizeof key_v1_bytes, NULL, 0,
                                    -1, false),
             CN_ECORRUPT);
    /* A string length past the end; a null metadata. */
    memcpy(buf, key_v1_bytes, sizeof key_v1_bytes);
    buf[6] = 0x7f;
    CHECK_EQ(cn_offsets_load_record(os, buf, sizeof key_v1_bytes, NULL, 0,
                                    -1, false),
             CN_ECORRUPT);
    memcpy(buf, value_v3_bytes, sizeof value_v3_bytes);
    buf[14] = 0xff;
    buf[15] = 0xff;
    CHECK_EQ(cn_offsets_load_record(os, key_v1_bytes, sizeof key_v1_bytes,
                                    buf, sizeof value_v3_bytes - 2, -1,
                                    false),
             CN_ECORRUPT);
    CHECK_EQ(cn_offsets_load_record(os, NULL, 0, NULL, 0, -1, false),
             CN_ECORRUPT);
    /* Nothing got in; a good record still does. */
    CHECK_EQ(cn_offsets_ngroups(os), 0);
    CHECK_EQ(cn_offsets_load_record(os, key_v1_bytes, sizeof key_v1_bytes,
                                    value_v3_bytes, sizeof value_v3_bytes,
                                    -1, false),
             0);
    CHECK_EQ(got(os, "g1", "top", 5), 256);
    cn_offsets_free(os);
}

struct expired_seen {
    int n;
    int fail_at; /* return CN_ENOMEM on this call (1-based), 0 = never */
    int64_t sum;
};

static int on_expired(void *arg, const char *topic, int32_t partition,
                      const struct cn_offset_value *v)
{
    struct expired_seen *s = arg;

    (void)topic;
    (void)partition;
    CHECK(v != NULL);
    s->n++;
    if (s->n == s->fail_at)
        return CN_ENOMEM;
    s->sum += v->offset;
    return 0;
}

UNIT_TEST(test_expire)
{
    const int64_t day = 24LL * 3600 * 1000, week = 7 * day;
    struct cn_offsets *os = cn_offsets_new();
    struct cn_offset_value v;
    struct expired_seen s;
    int i;

    /* Offsets committed at day 0..9; now = day 10, retention a week:
     * days 0..3 expire (10 - 3 = 7 >= 7), 4..9 stay. */
    for (i = 0; i < 10; i++) {
        v = val(i, NULL, i * day);
        CHECK_EQ(cn_offsets_put(os, "g", i % 2 ? "odd" : "even", i, &v), 0);
    }
    /* Day 1 has a pending transactional offset: kept. */
    CHECK_EQ(cn_offsets_txn_put(os, "g", 5, 0, "odd", 1, &v), 0);
    /* An old-style expire timestamp wins over the retention. */
    v = val(100, NULL, 0);
    v.expire_timestamp_ms = 20 * day;
    CHECK_EQ(cn_offsets_put(os, "g", "old", 0, &v), 0);
    v = val(200, NULL, 9 * day);
    v.expire_timestamp_ms = day;
    CHECK_EQ(cn_offsets_put(os, "g", "old", 1, &v), 0);
    /* A commit in the future (clock skew) does not expire. */
    v = val(300, NULL, INT64_MAX);
    CHECK_EQ(cn_offsets_put(os, "g", "future", 0, &v), 0);
    v = val(400, NULL, INT64_MIN); /* wild timestamp: expires, no UB */
    CHECK_EQ(cn_offsets_put(os, "g", "past", 0, &v), 0);
    v = val(1, NULL, 0);
    CHECK_EQ(cn_offsets_put(os, "other", "t", 0, &v), 0);

    memset(&s, 0, sizeof s);
    CHECK_EQ(cn_offsets_expire(os, "g", 10 * day, week, on_expired, &s), 5);
    CHECK_EQ(s.n, 5);
    CHECK_EQ(s.sum, 0 + 2 + 3 + 200 + 400);
    CHECK_EQ(got(os, "g", "even", 0), -1);
    CHECK_EQ(got(os, "g", "odd", 1), 1);
    CHECK_EQ(got(os, "g", "even", 2), -1);
    CHECK_EQ(got(os, "g", "odd", 3), -1);
    CHECK_EQ(got(os, "g", "even", 4), 4);
    CHECK_EQ(got(os, "g", "old", 0), 100);
    CHECK_EQ(got(os, "g", "old", 1), -1);
    CHECK_EQ(got(os, "g", "future", 0), 300);
    CHECK_EQ(got(os, "g", "past", 0), -1);
    CHECK_EQ(got(os, "other", "t", 0), 1);
    CHECK_EQ(cn_offsets_count(os, "g"), 9);

    /* The callback refuses the second: one removed, then stop. */
    memset(&s, 0, sizeof s);
    s.fail_at = 2;
    CHECK_EQ(cn_offsets_expire(os, "g", 100 * day, week, on_expired, &s),
             CN_ENOMEM);
    CHECK_EQ(cn_offsets_count(os, "g"), 8);

    /* Without a callback; all but the pending and future ones go. */
    CHECK_EQ(cn_offsets_expire(os, "g", 100 * day, week, NULL, NULL), 6);
    CHECK_EQ(cn_offsets_count(os, "g"), 2);
    CHECK_EQ(cn_offsets_txn_complete(os, 5, false), 1);
    CHECK_EQ(cn_offsets_expire(os, "g", 100 * day, week, NULL, NULL), 1);
    CHECK_EQ(cn_offsets_count(os, "g"), 1);
    CHECK_EQ(cn_offsets_expire(os, "nope", 100 * day, week, NULL, NULL), 0);
    CHECK_EQ(cn_offsets_delete(os, "g", "future", 0), 0);
    CHECK_EQ(cn_offsets_ngroups(os), 1);
    cn_offsets_free(os);
}

/*
 * Random operations against a plain model: 2 groups x 2 topics x 3
 * partitions, 3 producers.  Sequence numbers in the model give the log
 * order that decides a commit.
 */
#define M_G 2
#define M_T 2
#define M_P 3
#define M_K (M_G * M_T * M_P)
#define M_PRODS 3

struct mval {
    bool has;
    int64_t off;
    uint64_t seq;
};

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

UNIT_TEST(test_random_against_model)
{
    static const char *const gs[M_G] = {"ga", "gb"};
    static const char *const ts[M_T] = {"ta", "tb"};
    struct mval vis[M_K], pend[M_PRODS][M_K];
    uint64_t seed = 0x9e3779b97f4a7c15ULL, seq = 0;
    struct cn_offsets *os = cn_offsets_new();
    int step, k, pr, bad = 0;

    memset(vis, 0, sizeof vis);
    memset(pend, 0, sizeof pend);
    for (step = 0; step < 20000 && !bad; step++) {
        uint64_t r = rng_next(&seed);
        int op = (int)(r % 100);
        int key = (int)((r >> 8) % M_K);
        int g = key / (M_T * M_P), t = (key / M_P) % M_T, p = key % M_P;
        int prod = (int)((r >> 16) % M_PRODS);
        struct cn_offset_value v = val((int64_t)step, NULL, 0);

        if (op < 35) {
            CHECK_EQ(cn_offsets_put(os, gs[g], ts[t], p, &v), 0);
            vis[key] = (struct mval){true, step, ++seq};
        } else if (op < 70) {
            CHECK_EQ(cn_offsets_txn_put(os, gs[g], prod, 0, ts[t], p, &v),
                     0);
            pend[prod][key] = (struct mval){true, step, ++seq};
        } else if (op < 85) {
            bool commit = (r >> 24) & 1;
            size_t want = 0;
            for (k = 0; k < M_K; k++) {
                if (!pend[prod][k].has)
                    continue;
                want++;
                if (commit && (!vis[k].has || vis[k].seq < pend[prod][k].seq))
                    vis[k] = pend[prod][k];
                pend[prod][k].has = false;
            }
            CHECK_EQ(cn_offsets_txn_complete(os, prod, commit), want);
        } else if (op < 97) {
            bool any = vis[key].has;
            for (pr = 0; pr < M_PRODS; pr++) {
                any |= pend[pr][key].has;
                pend[pr][key].has = false;
            }
            vis[key].has = false;
            CHECK_EQ(cn_offsets_delete(os, gs[g], ts[t], p),
                     any ? 0 : CN_ENOTFOUND);
        } else {
            size_t want = 0;
            for (k = g * M_T * M_P; k < (g + 1) * M_T * M_P; k++) {
                bool any = vis[k].has;
                for (pr = 0; pr < M_PRODS; pr++) {
                    any |= pend[pr][k].has;
                    pend[pr][k].has = false;
                }
                vis[k].has = false;
                want += any;
            }
            CHECK_EQ(cn_offsets_delete_group(os, gs[g]), want);
        }

        for (k = 0; k < M_K; k++) {
            int kg = k / (M_T * M_P), kt = (k / M_P) % M_T, kp = k % M_P;
            bool pending = false;
            for (pr = 0; pr < M_PRODS; pr++)
                pending |= pend[pr][k].has;
            if (got(os, gs[kg], ts[kt], kp) !=
                    (vis[k].has ? vis[k].off : -1) ||
                cn_offsets_has_pending(os, gs[kg], ts[kt], kp) != pending)
                bad = 1;
        }
        for (k = 0; k < M_G; k++) {
            size_t nv = 0, np = 0;
            int kk;
            for (kk = k * M_T * M_P; kk < (k + 1) * M_T * M_P; kk++) {
                nv += vis[kk].has;
                for (pr = 0; pr < M_PRODS; pr++)
                    np += pend[pr][kk].has;
            }
            if (cn_offsets_count(os, gs[k]) != nv ||
                cn_offsets_pending_count(os, gs[k]) != np)
                bad = 1;
        }
        if (bad)
            fprintf(stderr, "  model mismatch at step %d (op %d)\n", step,
                    op);
    }
    CHECK(!bad);
    cn_offsets_free(os);
}

UNIT_MAIN(test_put_get_overwrite_delete, test_invalid_args, test_delete_group,
          test_foreach_group_offsets, test_foreach_groups,
          test_txn_commit_and_abort, test_txn_epoch_fence,
          test_pending_counts_across_producers_and_groups,
          test_plain_and_txn_commit_order, test_delete_drops_pending,
          test_free_with_open_transactions, test_record_bytes,
          test_load_roundtrip, test_load_old_versions,
          test_load_not_an_offset_key, test_load_malformed, test_expire,
          test_random_against_model, test_txn_complete_match, test_unload)
