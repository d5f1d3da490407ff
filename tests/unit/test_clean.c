/*
 * test_clean.c - the cleaner's retention rules (src/clean), one test per
 * rule, over logs built in memory as Kafka batches.
 */
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/wr.h"
#include "clean/clean.h"
#include "proto/batch.h"
#include "proto/compress.h"
#include "unit.h"

#define MAXB 32

static int data_codec; /* codec data() builds with */

struct tlog {
    struct cn_wr b[MAXB];
    int n;
    int64_t next; /* next offset */
};

static void tlog_init(struct tlog *l)
{
    memset(l, 0, sizeof *l);
}

static void tlog_fini(struct tlog *l)
{
    for (int i = 0; i < l->n; i++)
        cn_wr_fini(&l->b[i]);
}

/* Appends a data batch; kv is "k=v,k2=v2", "k=" a tombstone, "=v" no key. */
static void data(struct tlog *l, int64_t pid, bool txn, const char *kv)
{
    struct cn_batch_params pm = CN_BATCH_PARAMS_INIT;
    struct cn_batch_builder b;
    pm.producer_id = pid;
    pm.producer_epoch = pid >= 0 ? 0 : -1;
    pm.base_sequence = pid >= 0 ? 0 : -1;
    pm.transactional = txn;
    pm.codec = data_codec;
    pm.base_offset = l->next;
    cn_batch_builder_init(&b, &pm);
    char buf[256];
    snprintf(buf, sizeof buf, "%s", kv);
    for (char *save, *t = strtok_r(buf, ",", &save); t;
         t = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(t, '=');
        *eq = 0;
        struct cn_bytes k = *t ? cn_bytes_str(t) : CN_BYTES_NULL;
        struct cn_bytes v = eq[1] ? cn_bytes_str(eq + 1) : CN_BYTES_NULL;
        cn_batch_builder_add(&b, 1000, k, v, NULL, 0);
        l->next++;
    }
    cn_wr_init(&l->b[l->n], 256);
    CHECK_EQ(cn_batch_builder_finish(&b, &l->b[l->n]), 0);
    cn_batch_builder_fini(&b);
    l->n++;
}

static void marker(struct tlog *l, int64_t pid, bool commit)
{
    cn_wr_init(&l->b[l->n], 128);
    CHECK_EQ(cn_batch_build_control(&l->b[l->n], pid, 0, commit, 1, 1000), 0);
    cn_batch_set_base_offset(l->b[l->n].buf, l->next);
    l->next++;
    l->n++;
}

struct pass_in {
    const struct cn_clean_aborted *aborted;
    size_t n_aborted;
    const struct cn_clean_producer *producers;
    size_t n_producers;
    int64_t now_ms;
    int64_t retention_ms;
    int split; /* batches [0, split) form group 1, the rest group 2 */
    size_t map_bytes;
};

/* Runs one pass over the whole log (all of it dirty); out gets the result.
 * Returns the number of txn entries reported; entries copied to ents. */
static int pass(const struct tlog *in, const struct pass_in *pi,
                struct tlog *out, struct cn_clean_aborted *ents)
{
    struct cn_clean_map *m;
    struct cn_clean_txns *mt, *ct;
    struct cn_clean_pass *p;
    struct cn_wr scratch;
    int nents = 0;
    cn_wr_init(&scratch, 1024);
    CHECK_EQ(cn_clean_map_new(pi->map_bytes ? pi->map_bytes : 1 << 20, &m), 0);
    CHECK_EQ(cn_clean_txns_new(&mt), 0);
    CHECK_EQ(cn_clean_txns_add_aborted(mt, pi->aborted, pi->n_aborted), 0);
    for (int i = 0; i < in->n; i++)
        if (cn_clean_map_add(m, mt, in->b[i].buf, in->b[i].len, &scratch))
            break;
    CHECK_EQ(cn_clean_txns_new(&ct), 0);
    struct cn_clean_params prm = {pi->now_ms, pi->retention_ms};
    CHECK_EQ(cn_clean_pass_new(m, ct, pi->producers, pi->n_producers, &prm,
                               &p), 0);
    tlog_init(out);
    int split = pi->split ? pi->split : in->n;
    for (int g = 0; g < 2; g++) {
        int from = g ? split : 0, to = g ? in->n : split;
        if (from >= to)
            continue;
        /* Each group gets the aborted txns starting in its range. */
        int64_t lo = g ? cn_clean_map_latest(m) + 1 : 0;
        struct cn_batch_hdr fh;
        CHECK_EQ(cn_batch_hdr_parse(in->b[from].buf, in->b[from].len, &fh), 0);
        lo = fh.base_offset;
        struct cn_batch_hdr th;
        int64_t hi = INT64_MAX;
        if (to < in->n) {
            CHECK_EQ(cn_batch_hdr_parse(in->b[to].buf, in->b[to].len, &th), 0);
            hi = th.base_offset;
        }
        for (size_t a = 0; a < pi->n_aborted; a++)
            if (pi->aborted[a].first_offset >= (g ? lo : INT64_MIN) &&
                pi->aborted[a].first_offset < hi)
                CHECK_EQ(cn_clean_txns_add_aborted(ct, &pi->aborted[a], 1), 0);
        for (int i = from; i < to; i++) {
            struct cn_clean_result r;
            struct cn_wr o;
            cn_wr_init(&o, 256);
            CHECK_EQ(cn_clean_batch(p, in->b[i].buf, in->b[i].len, &scratch,
                                    &o, &r), 0);
            if (r.has_txn_entry && ents)
                ents[nents] = r.txn_entry;
            nents += r.has_txn_entry;
            if (r.kept) {
                CHECK(o.len > 0);
                out->b[out->n++] = o;
            } else {
                CHECK_EQ(o.len, 0);
                cn_wr_fini(&o);
            }
        }
    }
    cn_clean_pass_free(p);
    cn_clean_txns_free(ct);
    cn_clean_txns_free(mt);
    cn_clean_map_free(m);
    cn_wr_fini(&scratch);
    return nents;
}

/* "offset:key=value;..." of every record, "offset:C" / "offset:A" for
 * markers, "[base-last]" for an emptied batch; checks each CRC. */
static void dump(const struct tlog *l, char *s, size_t cap)
{
    struct cn_wr scratch;
    cn_wr_init(&scratch, 1024);
    s[0] = 0;
    for (int i = 0; i < l->n; i++) {
        struct cn_batch_hdr h;
        struct cn_record_iter it;
        struct cn_record rec;
        CHECK_EQ(cn_batch_hdr_parse(l->b[i].buf, l->b[i].len, &h), 0);
        CHECK(h.crc == cn_batch_compute_crc(l->b[i].buf, l->b[i].len));
        CHECK_EQ(cn_batch_records(l->b[i].buf, l->b[i].len, 0, &scratch, &h,
                                  &it), 0);
        if (h.records_count == 0)
            snprintf(s + strlen(s), cap - strlen(s), "[%lld-%lld]",
                     (long long)h.base_offset,
                     (long long)cn_batch_last_offset(&h));
        while (cn_record_iter_next(&it, &rec) == 1) {
            if (cn_batch_is_control(&h)) {
                int16_t t = -1;
                CHECK_EQ(cn_control_key_parse(rec.key, &t), 0);
                snprintf(s + strlen(s), cap - strlen(s), "%lld:%s;",
                         (long long)rec.offset, t ? "C" : "A");
                continue;
            }
            CHECK_EQ(rec.timestamp, 1000);
            snprintf(s + strlen(s), cap - strlen(s), "%lld:%.*s=%.*s;",
                     (long long)rec.offset, rec.key.len > 0 ? rec.key.len : 0,
                     rec.key.ptr ? (const char *)rec.key.ptr : "",
                     rec.value.len > 0 ? rec.value.len : 0,
                     rec.value.ptr ? (const char *)rec.value.ptr : "");
        }
    }
    cn_wr_fini(&scratch);
}

#define CHECK_LOG(l, want)                                               \
    do {                                                                 \
        char got_[2048];                                                 \
        dump((l), got_, sizeof got_);                                    \
        if (strcmp(got_, (want))) {                                      \
            fprintf(stderr, "  got  %s\n  want %s\n", got_, (want));     \
            unit_fail(__FILE__, __LINE__, "log is " want);               \
        }                                                                \
    } while (0)

#define DAY 86400000LL

UNIT_TEST(test_latest_per_key)
{
    struct tlog l, o;
    tlog_init(&l);
    data(&l, -1, false, "a=1,b=1");
    data(&l, -1, false, "a=2,c=1");
    data(&l, -1, false, "=nokey,b=2");
    struct pass_in pi = {.now_ms = 2000, .retention_ms = DAY};
    pass(&l, &pi, &o, NULL);
    CHECK_LOG(&o, "2:a=2;3:c=1;5:b=2;");
    /* A second pass changes nothing. */
    struct tlog o2;
    pass(&o, &pi, &o2, NULL);
    CHECK_LOG(&o2, "2:a=2;3:c=1;5:b=2;");
    CHECK_EQ(o2.b[0].len, o.b[0].len);
    CHECK(!memcmp(o2.b[0].buf, o.b[0].buf, o.b[0].len));
    tlog_fini(&l);
    tlog_fini(&o);
    tlog_fini(&o2);
}

/* A compressed batch rewritten keeps its codec and its records' offsets. */
UNIT_TEST(test_compressed_rewrite)
{
    struct tlog l, o;
    tlog_init(&l);
    data_codec = CN_CODEC_GZIP;
    data(&l, -1, false, "a=1,b=1,c=1");
    data_codec = CN_CODEC_NONE;
    data(&l, -1, false, "b=2");
    struct pass_in pi = {.now_ms = 2000, .retention_ms = DAY};
    pass(&l, &pi, &o, NULL);
    CHECK_LOG(&o, "0:a=1;2:c=1;3:b=2;");
    struct cn_batch_hdr h;
    CHECK_EQ(cn_batch_hdr_parse(o.b[0].buf, o.b[0].len, &h), 0);
    CHECK_EQ(cn_batch_codec(&h), CN_CODEC_GZIP);
    CHECK_EQ(h.records_count, 2);
    CHECK_EQ(h.last_offset_delta, 2);
    tlog_fini(&l);
    tlog_fini(&o);
}

UNIT_TEST(test_tombstone_expiry)
{
    struct tlog l, o, o2, o3;
    tlog_init(&l);
    data(&l, -1, false, "a=1,b=1");
    data(&l, -1, false, "a=");
    struct pass_in pi = {.now_ms = 5000, .retention_ms = 1000};
    pass(&l, &pi, &o, NULL);
    CHECK_LOG(&o, "1:b=1;2:a=;");
    struct cn_batch_hdr h;
    CHECK_EQ(cn_batch_hdr_parse(o.b[1].buf, o.b[1].len, &h), 0);
    CHECK(h.attributes & CN_BATCH_ATTR_DELETE_HORIZON);
    CHECK_EQ(h.base_timestamp, 6000);
    /* Before the horizon the tombstone stays... */
    pi.now_ms = 5999;
    pass(&o, &pi, &o2, NULL);
    CHECK_LOG(&o2, "1:b=1;2:a=;");
    /* ...at it, it goes. */
    pi.now_ms = 6000;
    pass(&o2, &pi, &o3, NULL);
    CHECK_LOG(&o3, "1:b=1;");
    tlog_fini(&l);
    tlog_fini(&o);
    tlog_fini(&o2);
    tlog_fini(&o3);
}

UNIT_TEST(test_aborted_removed_whatever_key)
{
    struct tlog l, o;
    struct cn_clean_aborted ents[4];
    tlog_init(&l);
    data(&l, -1, false, "a=1");      /* 0 */
    data(&l, 7, true, "a=x,z=x");    /* 1-2 aborted, newest a */
    marker(&l, 7, false);            /* 3 */
    data(&l, 8, true, "b=c");        /* 4 committed */
    marker(&l, 8, true);             /* 5 */
    struct cn_clean_aborted ab = {7, 1, 3};
    struct pass_in pi = {.aborted = &ab, .n_aborted = 1, .now_ms = 2000,
                         .retention_ms = DAY};
    int n = pass(&l, &pi, &o, ents);
    /* a=1 survives: the aborted a=x never entered the key map. The
     * markers stay: the abort one guarded data this pass, the commit one
     * guarded b=c. */
    CHECK_LOG(&o, "0:a=1;3:A;4:b=c;5:C;");
    CHECK_EQ(n, 1);
    CHECK_EQ(ents[0].producer_id, 7);
    CHECK_EQ(ents[0].first_offset, 1);
    /* Next pass: the abort marker guards nothing, gets a horizon; the
     * commit marker stays while b=c does. */
    struct tlog o2, o3;
    n = pass(&o, &pi, &o2, ents);
    CHECK_EQ(n, 0);
    CHECK_LOG(&o2, "0:a=1;3:A;4:b=c;5:C;");
    struct cn_batch_hdr h;
    CHECK_EQ(cn_batch_hdr_parse(o2.b[1].buf, o2.b[1].len, &h), 0);
    CHECK(h.attributes & CN_BATCH_ATTR_DELETE_HORIZON);
    CHECK_EQ(cn_batch_hdr_parse(o2.b[3].buf, o2.b[3].len, &h), 0);
    CHECK(!(h.attributes & CN_BATCH_ATTR_DELETE_HORIZON));
    pi.now_ms = 2000 + DAY;
    pass(&o2, &pi, &o3, ents);
    CHECK_LOG(&o3, "0:a=1;4:b=c;5:C;");
    tlog_fini(&l);
    tlog_fini(&o);
    tlog_fini(&o2);
    tlog_fini(&o3);
}

/* KAFKA-14055: a user key equal to a marker's key must not remove it. */
UNIT_TEST(test_marker_key_collision)
{
    struct tlog l, o;
    tlog_init(&l);
    data(&l, 9, true, "k=1");    /* 0 */
    marker(&l, 9, true);         /* 1 */
    /* The bytes of a COMMIT control key: version 0, type 1. */
    struct cn_batch_params pm = CN_BATCH_PARAMS_INIT;
    struct cn_batch_builder b;
    pm.base_offset = l.next++;
    cn_batch_builder_init(&b, &pm);
    static const uint8_t ck[4] = {0, 0, 0, 1};
    cn_batch_builder_add(&b, 1000, cn_bytes_of(ck, 4), cn_bytes_str("v"),
                         NULL, 0);
    cn_wr_init(&l.b[l.n], 128);
    CHECK_EQ(cn_batch_builder_finish(&b, &l.b[l.n++]), 0);
    cn_batch_builder_fini(&b);
    struct pass_in pi = {.now_ms = 2000, .retention_ms = DAY};
    pass(&l, &pi, &o, NULL);
    CHECK_EQ(o.n, 3);
    char s[256];
    dump(&o, s, sizeof s);
    CHECK(strstr(s, "1:C;") != NULL);
    tlog_fini(&l);
    tlog_fini(&o);
}

/* KAFKA-8351: a transaction aborted across three segments, cleaned in two
 * groups, is removed whole and its marker kept with its index entry. */
UNIT_TEST(test_abort_across_groups)
{
    struct tlog l, o;
    struct cn_clean_aborted ents[4];
    tlog_init(&l);
    data(&l, -1, false, "a=1");  /* 0  segment 1 (group 1) */
    data(&l, 5, true, "a=x");    /* 1 */
    data(&l, 5, true, "b=x");    /* 2  segment 2 (group 1) */
    data(&l, -1, false, "b=1");  /* 3 */
    data(&l, 5, true, "c=x");    /* 4  segment 3 (group 2) */
    marker(&l, 5, false);        /* 5 */
    data(&l, -1, false, "c=1");  /* 6 */
    struct cn_clean_aborted ab = {5, 1, 5};
    struct pass_in pi = {.aborted = &ab, .n_aborted = 1, .now_ms = 2000,
                         .retention_ms = DAY, .split = 4};
    int n = pass(&l, &pi, &o, ents);
    CHECK_LOG(&o, "0:a=1;3:b=1;5:A;6:c=1;");
    CHECK_EQ(n, 1);
    tlog_fini(&l);
    tlog_fini(&o);
}

/* The last batch of an active producer stays, emptied, with its offsets
 * and sequence; an inactive producer's goes. */
UNIT_TEST(test_producer_last_batch_emptied)
{
    struct tlog l, o;
    tlog_init(&l);
    data(&l, 3, false, "a=1,b=1");  /* 0-1: producer 3's only batch */
    data(&l, 4, false, "c=1");      /* 2: producer 4, not active */
    data(&l, -1, false, "a=2,b=2,c=2");
    struct cn_clean_producer pr = {3, 0, 1};
    struct pass_in pi = {.producers = &pr, .n_producers = 1, .now_ms = 2000,
                         .retention_ms = DAY};
    pass(&l, &pi, &o, NULL);
    CHECK_LOG(&o, "[0-1]3:a=2;4:b=2;5:c=2;");
    struct cn_batch_hdr h;
    CHECK_EQ(cn_batch_hdr_parse(o.b[0].buf, o.b[0].len, &h), 0);
    CHECK_EQ(h.producer_id, 3);
    CHECK_EQ(h.base_sequence, 0);
    CHECK_EQ(cn_batch_last_sequence(&h), 1);
    CHECK_EQ(h.records_count, 0);
    tlog_fini(&l);
    tlog_fini(&o);
}

/* A producer whose last entry is a marker keeps that marker. */
UNIT_TEST(test_producer_last_marker_kept)
{
    struct tlog l, o, o2;
    tlog_init(&l);
    data(&l, 6, true, "a=x");
    marker(&l, 6, false);
    data(&l, -1, false, "b=1");
    struct cn_clean_aborted ab = {6, 0, 1};
    struct cn_clean_producer pr = {6, 0, -1};
    struct pass_in pi = {.aborted = &ab, .n_aborted = 1, .producers = &pr,
                         .n_producers = 1, .now_ms = 2000, .retention_ms = 1};
    pass(&l, &pi, &o, NULL);
    CHECK_LOG(&o, "1:A;2:b=1;");
    pi.now_ms = 5000;
    struct tlog *cur = &o;
    pass(cur, &pi, &o2, NULL);      /* horizon set */
    struct tlog o3;
    pi.now_ms = 5001;
    pass(&o2, &pi, &o3, NULL);      /* at it: emptied, not gone */
    CHECK_LOG(&o3, "[1-1]2:b=1;");
    tlog_fini(&l);
    tlog_fini(&o);
    tlog_fini(&o2);
    tlog_fini(&o3);
}

UNIT_TEST(test_map_full_stops_cleanly)
{
    struct tlog l, o;
    tlog_init(&l);
    data(&l, -1, false, "a=1");
    data(&l, -1, false, "a=2");
    data(&l, -1, false, "b=1,c=1,d=1,e=1,f=1,g=1,h=1,i=1,j=1");
    data(&l, -1, false, "b=2");
    /* Room for about two keys: the third batch does not fit, so b=1 is
     * past the map and must stay although b=2 follows. */
    struct pass_in pi = {.now_ms = 2000, .retention_ms = DAY,
                         .map_bytes = 2 * (2 * 24 + 1) + 10};
    pass(&l, &pi, &o, NULL);
    char s[512];
    dump(&o, s, sizeof s);
    CHECK(strncmp(s, "1:a=2;2:b=1;", 12) == 0);
    CHECK(strstr(s, "11:b=2;") != NULL);
    tlog_fini(&l);
    tlog_fini(&o);
}

UNIT_TEST(test_first_uncleanable_and_ratio)
{
    struct cn_clean_seg s[4] = {
        {0, 100, 1000}, {10, 200, 1000}, {20, 900, 1000}, {30, 950, 10}};
    /* The active segment bounds it. */
    CHECK_EQ(cn_clean_first_uncleanable(s, 4, 0, 1000, 1000, 0), 30);
    /* The LSO does when lower. */
    CHECK_EQ(cn_clean_first_uncleanable(s, 4, 0, 15, 1000, 0), 15);
    /* min.compaction.lag.ms: segment 20 is too young at now 1000, lag 500. */
    CHECK_EQ(cn_clean_first_uncleanable(s, 4, 0, 1000, 1000, 500), 20);
    CHECK_EQ(cn_clean_first_uncleanable(s, 4, 0, 1000, 1000, 850), 10);
    double r = cn_clean_dirty_ratio(s, 4, 10, 30);
    CHECK(r > 0.66 && r < 0.67);
    CHECK(cn_clean_dirty_ratio(s, 4, 30, 30) == 0.0);
}

UNIT_MAIN(test_latest_per_key, test_compressed_rewrite, test_tombstone_expiry,
          test_aborted_removed_whatever_key, test_marker_key_collision,
          test_abort_across_groups, test_producer_last_batch_emptied,
          test_producer_last_marker_kept, test_map_full_stops_cleanly,
          test_first_uncleanable_and_ratio)
