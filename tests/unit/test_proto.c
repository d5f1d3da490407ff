/*
 * test_proto.c - generated codecs, request headers and Kafka error names.
 *
 * The round trip fills every message in every version with seeded random
 * values, encodes, decodes and re-encodes, and compares the bytes.  Byte
 * tables check what real clients send.  Set CN_WRITE_SEEDS=<dir> and run
 * the write_fuzz_seeds test to regenerate tests/fuzz/corpus/request/.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/err.h"
#include "base/rd.h"
#include "base/wr.h"
#include "proto/gen/msgs.h"
#include "proto/header.h"
#include "proto/kerr.h"
#include "unit.h"

/* --- seeded random values for the generated fillers ------------------- */

struct fill_rng {
    uint64_t s; /* splitmix64 state */
};

static uint64_t fill_next(struct fill_rng *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* 0-7 printable bytes, or null one time in five when allowed. */
static struct cn_bytes fill_bytes(struct fill_rng *r, struct cn_arena *a,
                                  bool nullable)
{
    if (nullable && fill_next(r) % 5 == 0)
        return CN_BYTES_NULL;
    int32_t n = (int32_t)(fill_next(r) % 8);
    uint8_t *p = n ? cn_arena_alloc(a, (size_t)n) : NULL;
    for (int32_t i = 0; i < n; i++)
        p[i] = (uint8_t)('a' + fill_next(r) % 26);
    return cn_bytes_of(p, n);
}

/* Array sizes 0-3, or -1 (null) one time in five when allowed. */
static int32_t fill_count(struct fill_rng *r, bool nullable)
{
    if (nullable && fill_next(r) % 5 == 0)
        return -1;
    return (int32_t)(fill_next(r) % 4);
}

static void fill_uuid(struct fill_rng *r, struct cn_uuid *u)
{
    /* Zero half the time so tagged uuids are also left out sometimes. */
    bool zero = fill_next(r) & 1;
    for (int i = 0; i < 16; i++)
        u->b[i] = zero ? 0 : (uint8_t)fill_next(r);
}

#include "gen/proto_fill.h"

/* Index of a message in cn_msg_infos by schema name. */
static int msg_index(const char *name)
{
    for (int i = 0; i < CN_MSG_COUNT; i++)
        if (strcmp(cn_msg_infos[i].name, name) == 0)
            return i;
    return -1;
}

/* Fills message mi at version v from seed, encodes it into wr. */
static void *fill_and_encode(int mi, int16_t v, uint64_t seed,
                             struct cn_arena *a, struct cn_wr *wr)
{
    const struct cn_msg_info *info = &cn_msg_infos[mi];
    struct fill_rng r = {seed * 1000003u + (uint64_t)mi * 131u + (uint64_t)v};
    void *m = cn_arena_alloc(a, info->size);
    proto_fillers[mi](&r, a, v, m);
    info->encode(wr, v, m);
    return m;
}

/* --- (a) round trips ---------------------------------------------------- */

#define ROUND_TRIP_SEEDS 24

static int round_trip_one(int mi, int16_t v, uint64_t seed)
{
    const struct cn_msg_info *info = &cn_msg_infos[mi];
    struct cn_arena a1, a2;
    struct cn_wr w1, w2;
    struct cn_rd rd;
    int bad = 0;

    cn_arena_init(&a1);
    cn_arena_init(&a2);
    cn_wr_init(&w1, 0);
    cn_wr_init(&w2, 0);
    fill_and_encode(mi, v, seed, &a1, &w1);
    void *m2 = cn_arena_alloc(&a2, info->size);
    /* An empty encoding leaves buf NULL; NULL + 0 is undefined. */
    cn_rd_init(&rd, w1.len ? w1.buf : (const uint8_t *)"", w1.len);
    int rc = info->decode(&rd, &a2, v, m2);
    if (w1.err || rc != 0 || cn_rd_left(&rd) != 0) {
        fprintf(stderr, "  %s v%d seed %llu: decode rc %d (%s), %zu left\n",
                info->name, v, (unsigned long long)seed, rc, cn_strerror(rc),
                cn_rd_left(&rd));
        bad = 1;
    } else {
        info->encode(&w2, v, m2);
        if (w2.err || w1.len != w2.len ||
            (w1.len && memcmp(w1.buf, w2.buf, w1.len) != 0)) {
            fprintf(stderr, "  %s v%d seed %llu: re-encode differs "
                    "(%zu vs %zu bytes)\n", info->name, v,
                    (unsigned long long)seed, w1.len, w2.len);
            bad = 1;
        }
    }
    /* Every proper prefix must fail cleanly, never read past the end. */
    for (size_t cut = 0; !bad && cut < w1.len; cut += 1 + w1.len / 64) {
        struct cn_arena a3;
        cn_arena_init(&a3);
        void *m3 = cn_arena_alloc(&a3, info->size);
        uint8_t *copy = malloc(cut ? cut : 1);
        if (cut)
            memcpy(copy, w1.buf, cut);
        cn_rd_init(&rd, copy, cut);
        rc = info->decode(&rd, &a3, v, m3);
        if (rc == 0) {
            fprintf(stderr, "  %s v%d seed %llu: prefix %zu/%zu decoded\n",
                    info->name, v, (unsigned long long)seed, cut, w1.len);
            bad = 1;
        }
        free(copy);
        cn_arena_fini(&a3);
    }
    cn_wr_fini(&w1);
    cn_wr_fini(&w2);
    cn_arena_fini(&a1);
    cn_arena_fini(&a2);
    return bad;
}

UNIT_TEST(round_trip_every_message_and_version)
{
    int cases = 0, failed = 0;
    for (int mi = 0; mi < CN_MSG_COUNT; mi++) {
        const struct cn_msg_info *info = &cn_msg_infos[mi];
        for (int16_t v = info->min_version; v <= info->max_version; v++) {
            for (uint64_t seed = 0; seed < ROUND_TRIP_SEEDS; seed++) {
                cases++;
                if (round_trip_one(mi, v, seed))
                    failed++;
            }
        }
    }
    CHECK_EQ(failed, 0);
    fprintf(stderr, "  %d round trips\n", cases);
    CHECK(cases > 1000);
}

UNIT_TEST(defaults_from_init)
{
    struct cn_produce_request pr;
    cn_produce_request_init(&pr);
    CHECK(cn_bytes_is_null(pr.transactional_id));

    struct cn_fetch_request fr;
    cn_fetch_request_init(&fr);
    CHECK_EQ(fr.replica_id, -1);
    CHECK_EQ(fr.max_bytes, 0x7fffffff);
    CHECK_EQ(fr.session_epoch, -1);
    CHECK(cn_bytes_is_null(fr.cluster_id));

    struct cn_fetch_request_fetch_partition fp;
    cn_fetch_request_fetch_partition_init(&fp);
    CHECK_EQ(fp.current_leader_epoch, -1);
    CHECK_EQ(fp.last_fetched_epoch, -1);
    CHECK_EQ(fp.log_start_offset, -1);

    struct cn_produce_response_partition_produce_response pp;
    cn_produce_response_partition_produce_response_init(&pp);
    CHECK_EQ(pp.log_append_time_ms, -1);
    CHECK_EQ(pp.log_start_offset, -1);
    CHECK(cn_bytes_is_null(pp.error_message));
    CHECK_EQ(pp.current_leader.leader_id, -1);
    CHECK_EQ(pp.current_leader.leader_epoch, -1);
}

/* A v0 decode leaves v1+ fields at their defaults, not zero. */
UNIT_TEST(absent_fields_get_defaults)
{
    static const uint8_t v0[] = {
        0xff, 0xff, 0xff, 0xff,  /* replica_id -1 */
        0x00, 0x00, 0x01, 0xf4,  /* max_wait_ms 500 */
        0x00, 0x00, 0x00, 0x01,  /* min_bytes 1 */
        0x00, 0x00, 0x00, 0x00,  /* topics: 0 */
    };
    struct cn_arena a;
    struct cn_rd rd;
    struct cn_fetch_request fr;
    cn_arena_init(&a);
    cn_rd_init(&rd, v0, sizeof v0);
    CHECK_EQ(cn_fetch_request_decode(&rd, &a, 0, &fr), 0);
    CHECK_EQ(fr.max_wait_ms, 500);
    CHECK_EQ(fr.max_bytes, 0x7fffffff);
    CHECK_EQ(fr.isolation_level, 0);
    CHECK_EQ(fr.session_epoch, -1);
    CHECK_EQ(fr.topics_len, 0);
    cn_arena_fini(&a);
}

/* --- (b) byte tables ---------------------------------------------------- */

/* ApiVersions v3 request as librdkafka 2.0.2 sends it (header v2). */
static const uint8_t api_versions_v3[] = {
    0x00, 0x12, 0x00, 0x03,             /* api key 18, version 3 */
    0x00, 0x00, 0x00, 0x01,             /* correlation id 1 */
    0x00, 0x07, 'r', 'd', 'k', 'a', 'f', 'k', 'a', /* client id */
    0x00,                               /* header tags */
    0x0b, 'l', 'i', 'b', 'r', 'd', 'k', 'a', 'f', 'k', 'a',
    0x06, '2', '.', '0', '.', '2',
    0x00,                               /* body tags */
};

/* Metadata v1 for two topics (header v1, classic strings). */
static const uint8_t metadata_v1[] = {
    0x00, 0x03, 0x00, 0x01,             /* api key 3, version 1 */
    0x00, 0x00, 0x00, 0x2a,             /* correlation id 42 */
    0xff, 0xff,                         /* client id null */
    0x00, 0x00, 0x00, 0x02,             /* topics: 2 */
    0x00, 0x03, 'f', 'o', 'o',
    0x00, 0x04, 'b', 'a', 'r', '2',
};

/* Produce v3: non-transactional, acks -1, one topic, one partition. */
static const uint8_t produce_v3[] = {
    0x00, 0x00, 0x00, 0x03,             /* api key 0, version 3 */
    0x00, 0x00, 0x00, 0x07,             /* correlation id 7 */
    0x00, 0x01, 'p',                    /* client id "p" */
    0xff, 0xff,                         /* transactional id null */
    0xff, 0xff,                         /* acks -1 */
    0x00, 0x00, 0x75, 0x30,             /* timeout 30000 ms */
    0x00, 0x00, 0x00, 0x01,             /* topics: 1 */
    0x00, 0x01, 't',
    0x00, 0x00, 0x00, 0x01,             /* partitions: 1 */
    0x00, 0x00, 0x00, 0x05,             /* index 5 */
    0x00, 0x00, 0x00, 0x04, 0xde, 0xad, 0xbe, 0xef, /* records */
};

/* Header then body through the API table; 0 or the first error. */
static int decode_frame(const uint8_t *p, size_t len, struct cn_arena *a,
                        struct cn_req_header *h, void **body)
{
    struct cn_rd rd;
    cn_rd_init(&rd, p, len);
    int rc = cn_req_header_decode(&rd, h);
    if (rc != 0)
        return rc;
    const struct cn_api_info *api = cn_api_find(h->api_key);
    *body = cn_arena_alloc(a, api->request_size);
    rc = api->decode_request(&rd, a, h->api_version, *body);
    if (rc == 0 && cn_rd_left(&rd) != 0)
        rc = CN_EBADLEN;
    return rc;
}

/* Every truncation of a valid frame fails with a negative code. */
static void check_truncations(const uint8_t *p, size_t len)
{
    for (size_t cut = 0; cut < len; cut++) {
        struct cn_arena a;
        struct cn_req_header h;
        void *body;
        uint8_t *copy = malloc(len);
        memcpy(copy, p, cut);
        cn_arena_init(&a);
        int rc = decode_frame(copy, cut, &a, &h, &body);
        if (rc >= 0)
            fprintf(stderr, "  prefix %zu/%zu decoded\n", cut, len);
        CHECK(rc < 0);
        cn_arena_fini(&a);
        free(copy);
    }
}

UNIT_TEST(api_versions_v3_from_librdkafka)
{
    struct cn_arena a;
    struct cn_req_header h;
    void *body = NULL;
    cn_arena_init(&a);
    CHECK_EQ(decode_frame(api_versions_v3, sizeof api_versions_v3, &a, &h,
                          &body), 0);
    CHECK_EQ(h.api_key, 18);
    CHECK_EQ(h.api_version, 3);
    CHECK_EQ(h.correlation_id, 1);
    CHECK(cn_bytes_eq_str(h.client_id, "rdkafka"));
    const struct cn_api_versions_request *req = body;
    CHECK(req && cn_bytes_eq_str(req->client_software_name, "librdkafka"));
    CHECK(req && cn_bytes_eq_str(req->client_software_version, "2.0.2"));

    /* Re-encoding header and body gives the same bytes. */
    struct cn_wr wr;
    cn_wr_init(&wr, 0);
    cn_req_header_encode(&wr, &h);
    cn_api_versions_request_encode(&wr, 3, req);
    CHECK_EQ(wr.len, sizeof api_versions_v3);
    CHECK(memcmp(wr.buf, api_versions_v3, wr.len) == 0);
    cn_wr_fini(&wr);
    cn_arena_fini(&a);
    check_truncations(api_versions_v3, sizeof api_versions_v3);
}

UNIT_TEST(metadata_v1_two_topics)
{
    struct cn_arena a;
    struct cn_req_header h;
    void *body = NULL;
    cn_arena_init(&a);
    CHECK_EQ(decode_frame(metadata_v1, sizeof metadata_v1, &a, &h, &body),
             0);
    CHECK_EQ(h.correlation_id, 42);
    CHECK(cn_bytes_is_null(h.client_id));
    const struct cn_metadata_request *req = body;
    CHECK_EQ(req->topics_len, 2);
    if (req->topics_len == 2) {
        CHECK(cn_bytes_eq_str(req->topics[0].name, "foo"));
        CHECK(cn_bytes_eq_str(req->topics[1].name, "bar2"));
        CHECK(cn_uuid_is_zero(&req->topics[0].topic_id));
    }
    CHECK(req->allow_auto_topic_creation); /* default true, absent in v1 */
    cn_arena_fini(&a);
    check_truncations(metadata_v1, sizeof metadata_v1);
}

UNIT_TEST(produce_v3_one_partition)
{
    struct cn_arena a;
    struct cn_req_header h;
    void *body = NULL;
    cn_arena_init(&a);
    CHECK_EQ(decode_frame(produce_v3, sizeof produce_v3, &a, &h, &body), 0);
    CHECK(cn_bytes_eq_str(h.client_id, "p"));
    const struct cn_produce_request *req = body;
    CHECK(cn_bytes_is_null(req->transactional_id));
    CHECK_EQ(req->acks, -1);
    CHECK_EQ(req->timeout_ms, 30000);
    CHECK_EQ(req->topic_data_len, 1);
    if (req->topic_data_len == 1) {
        const struct cn_produce_request_topic_produce_data *t =
            &req->topic_data[0];
        CHECK(cn_bytes_eq_str(t->name, "t"));
        CHECK_EQ(t->partition_data_len, 1);
        CHECK_EQ(t->partition_data[0].index, 5);
        CHECK_EQ(t->partition_data[0].records.len, 4);
        /* Views point into the frame, no copy. */
        CHECK(t->partition_data[0].records.ptr == produce_v3 + 38);
    }
    cn_arena_fini(&a);
    check_truncations(produce_v3, sizeof produce_v3);
}

UNIT_TEST(header_unknown_version_still_answerable)
{
    /* ApiVersions v99 from a future client: header read as v1. */
    static const uint8_t b[] = {0x00, 0x12, 0x00, 0x63, 0x00, 0x00, 0x00,
                                0x09, 0x00, 0x02, 'c', 'l', 0x55};
    struct cn_rd rd;
    struct cn_req_header h;
    cn_rd_init(&rd, b, sizeof b);
    CHECK_EQ(cn_req_header_decode(&rd, &h), CN_REQ_HDR_UNKNOWN);
    CHECK_EQ(h.api_key, 18);
    CHECK_EQ(h.api_version, 99);
    CHECK_EQ(h.correlation_id, 9);
    CHECK(cn_bytes_eq_str(h.client_id, "cl"));
    CHECK_EQ(cn_rd_left(&rd), 1);

    /* Unknown API key. */
    static const uint8_t k[] = {0x03, 0xe8, 0x00, 0x00, 0x00, 0x00,
                                0x00, 0x01, 0xff, 0xff};
    cn_rd_init(&rd, k, sizeof k);
    CHECK_EQ(cn_req_header_decode(&rd, &h), CN_REQ_HDR_UNKNOWN);
    CHECK_EQ(h.api_key, 1000);
}

UNIT_TEST(header_versions)
{
    CHECK_EQ(cn_api_request_header_version(0, 8), 1);
    CHECK_EQ(cn_api_request_header_version(0, 9), 2);
    CHECK_EQ(cn_api_request_header_version(18, 3), 2);
    CHECK_EQ(cn_api_response_header_version(18, 3), 0);
    CHECK_EQ(cn_api_response_header_version(1, 12), 1);
    CHECK_EQ(cn_api_response_header_version(1, 11), 0);
    CHECK_EQ(cn_api_request_header_version(1000, 0), 1);

    struct cn_wr wr;
    cn_wr_init(&wr, 0);
    cn_resp_header_encode(&wr, 18, 3, 0x01020304);
    CHECK_EQ(wr.len, 4);
    cn_wr_reset(&wr);
    cn_resp_header_encode(&wr, 3, 12, 5);
    CHECK_EQ(wr.len, 5);
    CHECK_EQ(wr.buf[4], 0);
    cn_wr_fini(&wr);
}

UNIT_TEST(api_table)
{
    const struct cn_api_info *p = cn_api_info_get(0);
    CHECK(p && strcmp(p->name, "Produce") == 0);
    CHECK(p && p->flexible_min == 9 && p->min_version == 0);
    CHECK(p && p->request_size == sizeof(struct cn_produce_request));
    CHECK(cn_api_info_get(18) && cn_api_info_get(18)->max_version >= 3);
    CHECK(cn_api_info_get(-1) == NULL);
    CHECK(cn_api_info_get(4) == NULL); /* LeaderAndIsr: not served */
    CHECK(cn_api_info_get(30000) == NULL);
    for (int i = 1; i < CN_API_COUNT; i++)
        CHECK(cn_api_infos[i - 1].api_key < cn_api_infos[i].api_key);
    CHECK(cn_api_version_ok(1, 17));
    CHECK(!cn_api_version_ok(1, 18));
}

UNIT_TEST(kafka_error_names)
{
    CHECK(strcmp(cn_kerr_name(KAFKA_NONE), "NONE") == 0);
    CHECK(strcmp(cn_kerr_name(-1), "UNKNOWN_SERVER_ERROR") == 0);
    CHECK(strcmp(cn_kerr_name(KAFKA_NOT_COORDINATOR), "NOT_COORDINATOR") ==
          0);
    CHECK_EQ(KAFKA_UNSUPPORTED_VERSION, 35);
    CHECK_EQ(KAFKA_TRANSACTION_ABORTABLE, 120);
    CHECK(strcmp(cn_kerr_name(30000), "UNKNOWN") == 0);
    CHECK(strcmp(cn_kerr_name(-2), "UNKNOWN") == 0);
}

/* Tagged fields: known ones decode, unknown ones are skipped, defaults are
 * not written. */
UNIT_TEST(tagged_fields)
{
    struct cn_api_versions_response r, back;
    struct cn_api_versions_response_finalized_feature_key ff = {
        cn_bytes_str("kraft.version"), 1, 0};
    struct cn_wr wr;
    struct cn_rd rd;
    struct cn_arena a;

    cn_api_versions_response_init(&r);
    CHECK_EQ(r.finalized_features_epoch, -1);
    cn_wr_init(&wr, 0);
    cn_api_versions_response_encode(&wr, 3, &r);
    /* error, keys (compact, 0 elems), throttle, empty tags */
    CHECK_EQ(wr.len, 2 + 1 + 4 + 1);
    cn_wr_reset(&wr);

    r.finalized_features_epoch = 7;
    r.finalized_features = &ff;
    r.finalized_features_len = 1;
    r.zk_migration_ready = true;
    cn_api_versions_response_encode(&wr, 3, &r);
    CHECK_EQ(wr.buf[7], 3); /* tags 1, 2, 3 */
    CHECK_EQ(wr.buf[8], 1); /* tag 1 first */
    CHECK_EQ(wr.buf[9], 8); /* int64 */

    cn_arena_init(&a);
    cn_rd_init(&rd, wr.buf, wr.len);
    CHECK_EQ(cn_api_versions_response_decode(&rd, &a, 3, &back), 0);
    CHECK_EQ(back.finalized_features_epoch, 7);
    CHECK_EQ(back.finalized_features_len, 1);
    CHECK(back.zk_migration_ready);
    CHECK(back.finalized_features_len == 1 &&
          cn_bytes_eq_str(back.finalized_features[0].name, "kraft.version"));
    CHECK_EQ(back.supported_features_len, 0);

    /* An unknown tag 9 in front of the others is skipped. */
    static const uint8_t unk[] = {0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00,
                                  0x02, 0x09, 0x02, 0xaa, 0xbb,
                                  0x03, 0x01, 0x01};
    cn_rd_init(&rd, unk, sizeof unk);
    CHECK_EQ(cn_api_versions_response_decode(&rd, &a, 3, &back), 0);
    CHECK(back.zk_migration_ready);
    CHECK_EQ(cn_rd_left(&rd), 0);

    /* A tag whose size runs past the end fails. */
    static const uint8_t past[] = {0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00,
                                   0x01, 0x09, 0x05, 0xaa};
    cn_rd_init(&rd, past, sizeof past);
    CHECK(cn_api_versions_response_decode(&rd, &a, 3, &back) < 0);
    cn_arena_fini(&a);
    cn_wr_fini(&wr);
}

/* --- (c) hostile input ---------------------------------------------------- */

UNIT_TEST(null_non_nullable_rejected)
{
    /* Produce v3 body with a null topic name. */
    static const uint8_t null_name[] = {
        0xff, 0xff, 0x00, 0x01, 0x00, 0x00, 0x03, 0xe8,
        0x00, 0x00, 0x00, 0x01, 0xff, 0xff, 0x00, 0x00, 0x00, 0x00};
    /* Produce v3 body with a null topic array. */
    static const uint8_t null_topics[] = {
        0xff, 0xff, 0x00, 0x01, 0x00, 0x00, 0x03, 0xe8,
        0xff, 0xff, 0xff, 0xff};
    /* ApiVersions v3 with a null (compact 0) software name. */
    static const uint8_t null_sw[] = {0x00, 0x01, 0x00};
    struct cn_arena a;
    struct cn_rd rd;
    struct cn_produce_request pr;
    struct cn_api_versions_request av;

    cn_arena_init(&a);
    cn_rd_init(&rd, null_name, sizeof null_name);
    CHECK_EQ(cn_produce_request_decode(&rd, &a, 3, &pr), CN_EBADLEN);
    cn_rd_init(&rd, null_topics, sizeof null_topics);
    CHECK_EQ(cn_produce_request_decode(&rd, &a, 3, &pr), CN_EBADLEN);
    cn_rd_init(&rd, null_sw, sizeof null_sw);
    CHECK_EQ(cn_api_versions_request_decode(&rd, &a, 3, &av), CN_EBADLEN);
    /* Version out of range. */
    cn_rd_init(&rd, null_sw, sizeof null_sw);
    CHECK_EQ(cn_api_versions_request_decode(&rd, &a, 99, &av),
             CN_EUNSUPPORTED);
    cn_arena_fini(&a);
}

UNIT_TEST(huge_array_count_rejected_before_allocation)
{
    static const uint8_t classic[] = {
        0xff, 0xff, 0x00, 0x01, 0x00, 0x00, 0x03, 0xe8,
        0x7f, 0xff, 0xff, 0xff, 0x00, 0x01, 't', 0x00};
    /* Fetch v12 (compact) with 2^32-2 topics. */
    static const uint8_t compact[] = {
        0xff, 0xff, 0xff, 0xff, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, /* ... through session epoch */
        0xff, 0xff, 0xff, 0xff, 0x0f, 0x00, 0x00};
    struct cn_arena a;
    struct cn_rd rd;
    struct cn_produce_request pr;
    struct cn_fetch_request fr;

    cn_arena_init(&a);
    cn_rd_init(&rd, classic, sizeof classic);
    CHECK_EQ(cn_produce_request_decode(&rd, &a, 3, &pr), CN_EBADLEN);
    CHECK(a.total < 4096);
    cn_rd_init(&rd, compact, sizeof compact);
    CHECK(cn_fetch_request_decode(&rd, &a, 12, &fr) < 0);
    CHECK(a.total < 4096);

    /* Metadata v1 claiming 1000 topics of 2 bytes each in 30 bytes. */
    uint8_t meta[34] = {0x00, 0x00, 0x03, 0xe8};
    cn_rd_init(&rd, meta, sizeof meta);
    struct cn_metadata_request mr;
    CHECK_EQ(cn_metadata_request_decode(&rd, &a, 1, &mr), CN_EBADLEN);
    CHECK(a.total < 4096);
    cn_arena_fini(&a);
}

/* --- fuzz corpus: replayed here, written on request -------------------- */

#define CORPUS_DIR "tests/fuzz/corpus/request"

/* Same steps as tests/fuzz/fuzz_request.c. */
static void replay_frame(const uint8_t *p, size_t len)
{
    struct cn_arena a;
    struct cn_req_header h;
    void *body = NULL;
    cn_arena_init(&a);
    if (decode_frame(p, len, &a, &h, &body) == 0) {
        const struct cn_api_info *api = cn_api_find(h.api_key);
        struct cn_wr wr;
        cn_wr_init(&wr, 0);
        api->encode_request(&wr, h.api_version, body);
        CHECK_EQ(wr.err, 0);
        cn_wr_fini(&wr);
    }
    cn_arena_fini(&a);
}

UNIT_TEST(fuzz_corpus_replay)
{
    DIR *d = opendir(CORPUS_DIR);
    int n = 0;
    if (!d) {
        fprintf(stderr, "  no %s (run from the source root)\n", CORPUS_DIR);
        return;
    }
    struct dirent *e;
    while ((e = readdir(d))) {
        char path[512];
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "%s/%s", CORPUS_DIR, e->d_name);
        FILE *f = fopen(path, "rb");
        if (!f)
            continue;
        static uint8_t buf[1 << 16];
        size_t len = fread(buf, 1, sizeof buf, f);
        fclose(f);
        uint8_t *copy = malloc(len ? len : 1);
        memcpy(copy, buf, len);
        replay_frame(copy, len);
        free(copy);
        n++;
    }
    closedir(d);
    CHECK(n > 0);
}

UNIT_TEST(write_fuzz_seeds)
{
    static const struct {
        const char *name;
        int16_t version;
    } seeds[] = {
        {"ProduceRequest", 3},       {"ProduceRequest", 9},
        {"FetchRequest", 4},         {"FetchRequest", 12},
        {"FetchRequest", 17},        {"MetadataRequest", 1},
        {"MetadataRequest", 12},     {"ApiVersionsRequest", 3},
        {"InitProducerIdRequest", 4}, {"EndTxnRequest", 3},
        {"JoinGroupRequest", 7},     {"OffsetCommitRequest", 8},
        {"TxnOffsetCommitRequest", 3}, {"ListOffsetsRequest", 7},
    };
    const char *dir = getenv("CN_WRITE_SEEDS");
    if (!dir)
        return;
    for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++) {
        int mi = msg_index(seeds[i].name);
        CHECK(mi >= 0);
        if (mi < 0)
            continue;
        struct cn_arena a;
        struct cn_wr wr;
        struct cn_req_header h = {cn_msg_infos[mi].api_key, seeds[i].version,
                                  (int32_t)i, cn_bytes_str("seed")};
        cn_arena_init(&a);
        cn_wr_init(&wr, 0);
        cn_req_header_encode(&wr, &h);
        fill_and_encode(mi, seeds[i].version, 7, &a, &wr);
        char path[512];
        snprintf(path, sizeof path, "%s/%s-v%d.bin", dir, seeds[i].name,
                 seeds[i].version);
        FILE *f = fopen(path, "wb");
        CHECK(f != NULL);
        if (f) {
            fwrite(wr.buf, 1, wr.len, f);
            fclose(f);
        }
        cn_wr_fini(&wr);
        cn_arena_fini(&a);
    }
    /* Hand-built frames too. */
    static const struct {
        const char *file;
        const uint8_t *p;
        size_t len;
    } raw[] = {
        {"api-versions-v3-librdkafka.bin", api_versions_v3,
         sizeof api_versions_v3},
        {"metadata-v1.bin", metadata_v1, sizeof metadata_v1},
        {"produce-v3.bin", produce_v3, sizeof produce_v3},
    };
    for (size_t i = 0; i < sizeof raw / sizeof raw[0]; i++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s", dir, raw[i].file);
        FILE *f = fopen(path, "wb");
        CHECK(f != NULL);
        if (f) {
            fwrite(raw[i].p, 1, raw[i].len, f);
            fclose(f);
        }
    }
}

/* The generated table says where throttle_time_ms may be written into a
 * finished answer (the request quota, h_quotas.c): the schemas' versions,
 * and the encoders put the field's bytes first exactly there. */
UNIT_TEST(throttle_first_table)
{
    CHECK(!cn_api_throttle_first(3, 2)); /* Metadata v0-2: no field */
    CHECK(cn_api_throttle_first(3, 3));
    CHECK(cn_api_throttle_first(3, 12));
    CHECK(!cn_api_throttle_first(3, 13)); /* past the schema */
    CHECK(!cn_api_throttle_first(1, 0));  /* Fetch v0: no field */
    CHECK(cn_api_throttle_first(1, 1));
    CHECK(!cn_api_throttle_first(2, 1)); /* ListOffsets v1: none */
    CHECK(cn_api_throttle_first(2, 2));
    CHECK(cn_api_throttle_first(32, 0)); /* DescribeConfigs: always */
    /* The field is there but after another: handlers set it. */
    for (int16_t v = 0; v <= 12; v++) {
        CHECK(!cn_api_throttle_first(0, v));  /* Produce */
        CHECK(!cn_api_throttle_first(18, v)); /* ApiVersions */
    }
    CHECK(!cn_api_throttle_first(47, 0)); /* OffsetDelete: error first */
    CHECK(!cn_api_throttle_first(36, 2)); /* SaslAuthenticate: none */
    CHECK(!cn_api_throttle_first(-1, 0));
    CHECK(!cn_api_throttle_first(30000, 0));
    /* Hand-written codecs: client quotas, SCRAM credentials. */
    CHECK(cn_resp_throttle_first(48, 0) && cn_resp_throttle_first(48, 1));
    CHECK(cn_resp_throttle_first(49, 1) && cn_resp_throttle_first(51, 0));
    CHECK(!cn_resp_throttle_first(48, 2));

    struct cn_wr wr;
    cn_wr_init(&wr, 0);
    static const uint8_t want[4] = {0x12, 0x34, 0x56, 0x78};
    int16_t mv[] = {3, 12};
    for (size_t i = 0; i < 2; i++) {
        struct cn_metadata_response rs;
        cn_metadata_response_init(&rs);
        rs.throttle_time_ms = 0x12345678;
        cn_wr_reset(&wr);
        cn_metadata_response_encode(&wr, mv[i], &rs);
        CHECK(wr.len >= 4 && memcmp(wr.buf, want, 4) == 0);
    }
    struct cn_describe_configs_response dc;
    cn_describe_configs_response_init(&dc);
    dc.throttle_time_ms = 0x12345678;
    cn_wr_reset(&wr);
    cn_describe_configs_response_encode(&wr, 1, &dc);
    CHECK(wr.len >= 4 && memcmp(wr.buf, want, 4) == 0);
    struct cn_api_versions_response av;
    cn_api_versions_response_init(&av);
    av.throttle_time_ms = 0x12345678;
    cn_wr_reset(&wr);
    cn_api_versions_response_encode(&wr, 3, &av);
    CHECK(wr.len >= 4 && memcmp(wr.buf, want, 4) != 0);
    cn_wr_fini(&wr);
}

UNIT_MAIN(round_trip_every_message_and_version, defaults_from_init,
          absent_fields_get_defaults, api_versions_v3_from_librdkafka,
          metadata_v1_two_topics, produce_v3_one_partition,
          header_unknown_version_still_answerable, header_versions, api_table,
          throttle_first_table,
          kafka_error_names, tagged_fields, null_non_nullable_rejected,
          huge_array_count_rejected_before_allocation, fuzz_corpus_replay,
          write_fuzz_seeds)
