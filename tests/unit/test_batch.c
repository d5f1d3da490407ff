/*
 * test_batch.c - record batch v2: build, validate (one test per rejection),
 * patch, iterate, multi-batch sets, and the fuzz corpus replayed.
 *
 * CN_WRITE_BATCH_SEEDS=dir ./test_batch seeds_write regenerates the fuzz
 * seeds into dir.
 */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "base/crc32c.h"
#include "base/err.h"
#include "base/rd.h"
#include "base/wr.h"
#include "proto/batch.h"
#include "proto/compress.h"
#include "unit.h"

static const struct cn_batch_limits client_lim = {
    .max_batch_bytes = 1 << 20,
    .max_uncompressed_bytes = 8 << 20,
    .allow_control = false,
};

static const int codecs[] = {CN_CODEC_NONE, CN_CODEC_GZIP, CN_CODEC_SNAPPY,
                             CN_CODEC_LZ4, CN_CODEC_ZSTD};

/* ---- helpers ---------------------------------------------------------- */

static void put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static void fix_crc(uint8_t *b, size_t len)
{
    put32(b + 17, cn_crc32c(0, b + 21, len - 21));
}

/* Builds an idempotent batch of n records with codec; returns its length. */
static void build(struct cn_wr *out, int codec, int n)
{
    struct cn_batch_params pm = CN_BATCH_PARAMS_INIT;
    struct cn_batch_builder b;
    pm.codec = codec;
    pm.producer_id = 1000;
    pm.producer_epoch = 3;
    pm.base_sequence = 0;
    cn_batch_builder_init(&b, &pm);
    for (int i = 0; i < n; i++) {
        char k[32], v[64];
        snprintf(k, sizeof k, "key-%d", i);
        snprintf(v, sizeof v, "value-%d-abcabcabcabcabcabc", i);
        struct cn_record_header h[2] = {
            {cn_bytes_str("h1"), cn_bytes_str("x")},
            {cn_bytes_str("h2"), CN_BYTES_NULL},
        };
        cn_batch_builder_add(&b, 1700000000000 + i * 3,
                             i == 1 ? CN_BYTES_NULL : cn_bytes_str(k),
                             i == 2 ? CN_BYTES_NULL : cn_bytes_str(v), h,
                             i % 3);
    }
    CHECK_EQ(cn_batch_builder_finish(&b, out), 0);
    cn_batch_builder_fini(&b);
}

struct hand {
    int16_t attr;
    int32_t count;
    int32_t last_delta;
    int64_t pid;
    int32_t seq;
    int64_t base_ts;
    int64_t max_ts;
};

#define HAND(n)                                                           \
    {                                                                     \
        .count = (n), .last_delta = (n)-1, .pid = -1, .seq = -1,          \
        .base_ts = 1000, .max_ts = 1010                                   \
    }

/* Wraps hand-written record bytes in a header, with length and CRC right. */
static void hand_batch(struct cn_wr *out, const struct hand *h,
                       const struct cn_wr *recs)
{
    cn_wr_reset(out);
    cn_wr_i64(out, 0);
    size_t len_slot = cn_wr_reserve(out, 4);
    cn_wr_i32(out, 0);
    cn_wr_i8(out, 2);
    cn_wr_reserve(out, 4);
    cn_wr_i16(out, h->attr);
    cn_wr_i32(out, h->last_delta);
    cn_wr_i64(out, h->base_ts);
    cn_wr_i64(out, h->max_ts);
    cn_wr_i64(out, h->pid);
    cn_wr_i16(out, h->pid >= 0 ? 0 : -1);
    cn_wr_i32(out, h->seq);
    cn_wr_i32(out, h->count);
    cn_wr_raw(out, recs->buf, recs->len);
    cn_wr_patch_i32(out, len_slot, (int32_t)(out->len - 12));
    fix_crc(out->buf, out->len);
}

/* One well-formed record: key "k", value "val", no headers. */
static void rec(struct cn_wr *w, int64_t ts_delta, int32_t off_delta)
{
    struct cn_wr body;
    cn_wr_init(&body, 0);
    cn_wr_i8(&body, 0);
    cn_wr_varlong(&body, ts_delta);
    cn_wr_varint(&body, off_delta);
    cn_wr_varint(&body, 1);
    cn_wr_raw(&body, "k", 1);
    cn_wr_varint(&body, 3);
    cn_wr_raw(&body, "val", 3);
    cn_wr_varint(&body, 0);
    cn_wr_varint(w, (int32_t)body.len);
    cn_wr_raw(w, body.buf, body.len);
    cn_wr_fini(&body);
}

static int validate(const struct cn_wr *b)
{
    return cn_batch_validate(b->buf, b->len, &client_lim, NULL, NULL);
}

/* Hand batch of the given records, validated. */
static int hand_validate(const struct hand *h, const struct cn_wr *recs)
{
    struct cn_wr b;
    cn_wr_init(&b, 0);
    hand_batch(&b, h, recs);
    int rc = validate(&b);
    cn_wr_fini(&b);
    return rc;
}

/* ---- good batches ----------------------------------------------------- */

UNIT_TEST(build_validate_every_codec)
{
    for (size_t c = 0; c < sizeof codecs / sizeof codecs[0]; c++) {
        for (int n = 1; n <= 200; n += 199) {
            struct cn_wr out, scratch;
            struct cn_batch_hdr h;
            cn_wr_init(&out, 0);
            cn_wr_init(&scratch, 0);
            build(&out, codecs[c], n);
            CHECK_EQ(cn_batch_validate(out.buf, out.len, &client_lim, &h,
                                       &scratch),
                     0);
            CHECK_EQ(cn_batch_codec(&h), codecs[c]);
            CHECK_EQ(h.records_count, n);
            CHECK_EQ(h.last_offset_delta, n - 1);
            CHECK_EQ(h.producer_id, 1000);
            CHECK_EQ(h.producer_epoch, 3);
            CHECK_EQ(h.base_timestamp, 1700000000000);
            CHECK_EQ(h.max_timestamp, 1700000000000 + (n - 1) * 3);
            CHECK_EQ(cn_batch_size(&h), out.len);

            struct cn_record_iter it;
            struct cn_record r;
            CHECK_EQ(cn_batch_records(out.buf, out.len, 0, &scratch, NULL,
                                      &it),
                     0);
            int i = 0;
            while (cn_record_iter_next(&it, &r) == 1) {
                char k[32];
                snprintf(k, sizeof k, "key-%d", i);
                CHECK_EQ(r.offset, i);
                CHECK_EQ(r.timestamp, 1700000000000 + i * 3);
                if (i == 1)
                    CHECK(cn_bytes_is_null(r.key));
                else
                    CHECK(cn_bytes_eq_str(r.key, k));
                CHECK_EQ(cn_bytes_is_null(r.value), i == 2);
                CHECK_EQ(r.header_count, i % 3);
                i++;
            }
            CHECK_EQ(i, n);
            CHECK_EQ(cn_rd_left(&it.rd), 0);
            cn_wr_fini(&out);
            cn_wr_fini(&scratch);
        }
    }
}

UNIT_TEST(headers_iterate)
{
    struct cn_wr out;
    cn_wr_init(&out, 0);
    build(&out, CN_CODEC_NONE, 3);
    struct cn_record_iter it;
    struct cn_record r;
    CHECK_EQ(cn_batch_records(out.buf, out.len, 0, NULL, NULL, &it), 0);
    for (int i = 0; i < 3; i++)
        CHECK_EQ(cn_record_iter_next(&it, &r), 1);
    CHECK_EQ(cn_record_iter_next(&it, &r), 0);
    CHECK_EQ(r.header_count, 2);
    struct cn_rd rd;
    struct cn_bytes k, v;
    cn_rd_init(&rd, r.headers_raw.ptr, (size_t)r.headers_raw.len);
    CHECK_EQ(cn_record_header_next(&rd, &k, &v), 1);
    CHECK(cn_bytes_eq_str(k, "h1") && cn_bytes_eq_str(v, "x"));
    CHECK_EQ(cn_record_header_next(&rd, &k, &v), 1);
    CHECK(cn_bytes_eq_str(k, "h2") && cn_bytes_is_null(v));
    CHECK_EQ(cn_record_header_next(&rd, &k, &v), 0);
    cn_wr_fini(&out);
}

/* Written out by hand (CRC from an independent bitwise CRC-32C): one
 * record, null key, value "v", CreateTime 1700000000000, no producer. */
static const uint8_t hand_vector[69] = {
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, /* baseOffset 0 */
    0x00, 0x00, 0x00, 0x39,                         /* batchLength 57 */
    0x00, 0x00, 0x00, 0x00,                         /* leader epoch 0 */
    0x02,                                           /* magic */
    0xd3, 0xf2, 0xac, 0x75,                         /* crc */
    0x00, 0x00,                                     /* attributes */
    0x00, 0x00, 0x00, 0x00,                         /* lastOffsetDelta */
    0x00, 0x00, 0x01, 0x8b, 0xcf, 0xe5, 0x68, 0x00, /* baseTimestamp */
    0x00, 0x00, 0x01, 0x8b, 0xcf, 0xe5, 0x68, 0x00, /* maxTimestamp */
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, /* producerId -1 */
    0xff, 0xff,                                     /* producerEpoch -1 */
    0xff, 0xff, 0xff, 0xff,                         /* baseSequence -1 */
    0x00, 0x00, 0x00, 0x01,                         /* recordsCount 1 */
    0x0e,                   /* record length 7 */
    0x00, 0x00, 0x00,       /* attributes, tsDelta 0, offsetDelta 0 */
    0x01,                   /* key length -1 */
    0x02, 0x76,             /* value length 1, "v" */
    0x00,                   /* no headers */
};

UNIT_TEST(hand_vector_known_crc)
{
    struct cn_batch_hdr h;
    CHECK_EQ(cn_batch_compute_crc(hand_vector, sizeof hand_vector),
             0xd3f2ac75u);
    CHECK_EQ(cn_batch_validate(hand_vector, sizeof hand_vector, &client_lim,
                               &h, NULL),
             0);
    CHECK_EQ(h.crc, 0xd3f2ac75u);
    CHECK_EQ(h.batch_length, 57);
    CHECK_EQ(h.producer_id, -1);

    /* The builder writes the same bytes for the same record. */
    struct cn_batch_params pm = CN_BATCH_PARAMS_INIT;
    struct cn_batch_builder b;
    struct cn_wr out;
    pm.leader_epoch = 0;
    cn_wr_init(&out, 0);
    cn_batch_builder_init(&b, &pm);
    cn_batch_builder_add(&b, 1700000000000, CN_BYTES_NULL,
                         cn_bytes_str("v"), NULL, 0);
    CHECK_EQ(cn_batch_builder_finish(&b, &out), 0);
    CHECK_EQ(out.len, sizeof hand_vector);
    CHECK(out.len == sizeof hand_vector &&
          memcmp(out.buf, hand_vector, out.len) == 0);
    cn_batch_builder_fini(&b);
    cn_wr_fini(&out);
}

UNIT_TEST(hdr_parse_torn_tail)
{
    struct cn_batch_hdr h;
    CHECK_EQ(cn_batch_hdr_parse(hand_vector, sizeof hand_vector, &h), 0);
    CHECK_EQ(cn_batch_hdr_parse(hand_vector, sizeof hand_vector - 1, &h),
             CN_ETRUNC);
    CHECK_EQ(cn_batch_hdr_parse(hand_vector, 60, &h), CN_ETRUNC);
    CHECK_EQ(cn_batch_hdr_parse(hand_vector, 5, &h), CN_ETRUNC);
    /* More bytes after the batch are fine for the header parser. */
    uint8_t two[2 * sizeof hand_vector];
    memcpy(two, hand_vector, sizeof hand_vector);
    memcpy(two + sizeof hand_vector, hand_vector, sizeof hand_vector);
    CHECK_EQ(cn_batch_hdr_parse(two, sizeof two, &h), 0);
    CHECK_EQ(cn_batch_size(&h), sizeof hand_vector);
}

/* ---- one test per rejection ------------------------------------------- */

UNIT_TEST(reject_bad_magic)
{
    uint8_t b[sizeof hand_vector];
    for (int m = 0; m < 4; m++) {
        if (m == 2)
            continue;
        memcpy(b, hand_vector, sizeof b);
        b[16] = (uint8_t)m;
        CHECK_EQ(cn_batch_validate(b, sizeof b, &client_lim, NULL, NULL),
                 CN_EUNSUPPORTED);
    }
}

UNIT_TEST(reject_short_header)
{
    for (size_t n = 0; n < CN_BATCH_HEADER_BYTES; n++)
        CHECK_EQ(cn_batch_validate(hand_vector, n, &client_lim, NULL, NULL),
                 CN_ECORRUPT);
}

UNIT_TEST(reject_batch_length_too_big)
{
    uint8_t b[sizeof hand_vector];
    memcpy(b, hand_vector, sizeof b);
    put32(b + 8, 58);
    CHECK_EQ(cn_batch_validate(b, sizeof b, &client_lim, NULL, NULL),
             CN_ECORRUPT);
    put32(b + 8, 0x7fffffff);
    CHECK_EQ(cn_batch_validate(b, sizeof b, &client_lim, NULL, NULL),
             CN_ECORRUPT);
}

UNIT_TEST(reject_batch_length_too_small)
{
    uint8_t b[sizeof hand_vector];
    memcpy(b, hand_vector, sizeof b);
    put32(b + 8, 56); /* shorter than the bytes given */
    CHECK_EQ(cn_batch_validate(b, sizeof b, &client_lim, NULL, NULL),
             CN_ECORRUPT);
    put32(b + 8, 48); /* cannot even hold the header */
    CHECK_EQ(cn_batch_validate(b, sizeof b, &client_lim, NULL, NULL),
             CN_ECORRUPT);
    put32(b + 8, 0xffffffff);
    CHECK_EQ(cn_batch_validate(b, sizeof b, &client_lim, NULL, NULL),
             CN_ECORRUPT);
}

UNIT_TEST(reject_crc_flipped_bit)
{
    uint8_t b[sizeof hand_vector];
    /* Every bit from the CRC field to the end matters. */
    for (size_t i = 17; i < sizeof b; i++) {
        for (int bit = 0; bit < 8; bit++) {
            memcpy(b, hand_vector, sizeof b);
            b[i] ^= (uint8_t)(1 << bit);
            int rc = cn_batch_validate(b, sizeof b, &client_lim, NULL, NULL);
            if (rc != CN_ECORRUPT) {
                fprintf(stderr, "  byte %zu bit %d rc %d\n", i, bit, rc);
                CHECK(0);
            }
        }
    }
}

UNIT_TEST(reject_records_count_zero)
{
    struct cn_wr recs;
    cn_wr_init(&recs, 0);
    struct hand h = HAND(0);
    CHECK_EQ(hand_validate(&h, &recs), CN_EINVAL);
    rec(&recs, 0, 0);
    h.last_delta = 0; /* a record present, count still 0 */
    CHECK_EQ(hand_validate(&h, &recs), CN_EINVAL);
    h.count = -1;
    CHECK_EQ(hand_validate(&h, &recs), CN_EINVAL);
    cn_wr_fini(&recs);
}

UNIT_TEST(reject_count_larger_than_records)
{
    struct cn_wr recs;
    cn_wr_init(&recs, 0);
    rec(&recs, 0, 0);
    rec(&recs, 1, 1);
    struct hand h = HAND(3);
    CHECK_EQ(hand_validate(&h, &recs), CN_ECORRUPT);
    struct hand huge = HAND(1000000);
    CHECK_EQ(hand_validate(&huge, &recs), CN_ECORRUPT);
    cn_wr_fini(&recs);
}

UNIT_TEST(reject_fewer_records_than_count_compressed)
{
    /* Inside a compressed payload the count cannot be bounded up front. */
    struct cn_wr recs, z;
    cn_wr_init(&recs, 0);
    cn_wr_init(&z, 0);
    rec(&recs, 0, 0);
    rec(&recs, 1, 1);
    CHECK_EQ(cn_compress(CN_CODEC_ZSTD, recs.buf, recs.len, &z), 0);
    struct hand h = HAND(3);
    h.attr = CN_CODEC_ZSTD;
    CHECK_EQ(hand_validate(&h, &z), CN_ECORRUPT);
    struct hand ok = HAND(2);
    ok.attr = CN_CODEC_ZSTD;
    CHECK_EQ(hand_validate(&ok, &z), 0);
    cn_wr_fini(&recs);
    cn_wr_fini(&z);
}

UNIT_TEST(reject_more_records_than_count)
{
    struct cn_wr recs;
    cn_wr_init(&recs, 0);
    rec(&recs, 0, 0);
    rec(&recs, 1, 1);
    rec(&recs, 2, 2);
    struct hand h = HAND(2);
    CHECK_EQ(hand_validate(&h, &recs), CN_ECORRUPT);
    cn_wr_fini(&recs);
}

UNIT_TEST(reject_trailing_garbage_in_batch)
{
    struct cn_wr recs;
    cn_wr_init(&recs, 0);
    rec(&recs, 0, 0);
    struct hand h = HAND(1);
    CHECK_EQ(hand_validate(&h, &recs), 0);
    cn_wr_raw(&recs, "\0", 1);
    CHECK_EQ(hand_validate(&h, &recs), CN_ECORRUPT);
    cn_wr_fini(&recs);
}

UNIT_TEST(reject_bad_varint)
{
    /* A record length of six continuation bytes, and an overlong
     * offsetDelta varint inside an otherwise sized record. */
    static const uint8_t bad_len[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
                                      0, 0, 0, 0, 0, 0};
    static const uint8_t bad_delta[] = {0x16, 0x00, 0x00, 0xff, 0xff, 0xff,
                                        0xff, 0xff, 0x01, 0x01, 0x01, 0x00};
    struct cn_wr recs;
    cn_wr_init(&recs, 0);
    struct hand h = HAND(1);
    cn_wr_raw(&recs, bad_len, sizeof bad_len);
    CHECK_EQ(hand_validate(&h, &recs), CN_ECORRUPT);
    cn_wr_reset(&recs);
    cn_wr_raw(&recs, bad_delta, sizeof bad_delta);
    CHECK_EQ(hand_validate(&h, &recs), CN_ECORRUPT);
    /* Varint running off the end of the batch. */
    cn_wr_reset(&recs);
    cn_wr_raw(&recs, "\x80\x80", 2);
    CHECK_EQ(hand_validate(&h, &recs), CN_ECORRUPT);
    cn_wr_fini(&recs);
}

UNIT_TEST(reject_key_length_beyond_record)
{
    /* len 9: attr, ts, delta, keyLen 50 (varint 100), then only 5 bytes. */
    static const uint8_t r[] = {0x12, 0x00, 0x00, 0x00, 0x64,
                                'a',  'b',  'c',  'd',  'e'};
    struct cn_wr recs;
    cn_wr_init(&recs, 0);
    cn_wr_raw(&recs, r, sizeof r);
    struct hand h = HAND(1);
    CHECK_EQ(hand_validate(&h, &recs), CN_ECORRUPT);
    cn_wr_fini(&recs);
}

UNIT_TEST(reject_negative_length)
{
    /* key length -2 (varint 3), value length -5 (9), header key -1 (1). */
    static const uint8_t key[] = {0x0e, 0, 0, 0, 0x03, 0x02, 'v', 0};
    static const uint8_t val[] = {0x0c, 0, 0, 0, 0x01, 0x09, 0};
    static const uint8_t hdr[] = {0x10, 0, 0, 0, 0x01, 0x01, 0x02, 0x01,
                                  0x01};
    const uint8_t *cases[] = {key, val, hdr};
    size_t lens[] = {sizeof key, sizeof val, sizeof hdr};
    static const size_t fix_at[] = {4, 5, 7};
    static const uint8_t fix_to[] = {0x01, 0x01, 0x00};
    struct cn_wr recs;
    cn_wr_init(&recs, 0);
    struct hand h = HAND(1);
    for (int i = 0; i < 3; i++) {
        cn_wr_reset(&recs);
        cn_wr_raw(&recs, cases[i], lens[i]);
        int rc = hand_validate(&h, &recs);
        if (rc != CN_ECORRUPT)
            fprintf(stderr, "  case %d rc %d\n", i, rc);
        CHECK_EQ(rc, CN_ECORRUPT);
        /* The same record with that one length made legal passes. */
        recs.buf[fix_at[i]] = fix_to[i];
        CHECK_EQ(hand_validate(&h, &recs), 0);
    }
    cn_wr_fini(&recs);
}

UNIT_TEST(reject_record_length_mismatch)
{
    struct cn_wr recs;
    cn_wr_init(&recs, 0);
    rec(&recs, 0, 0);
    struct hand h = HAND(1);
    recs.buf[0] += 2; /* one more byte claimed than parsed */
    cn_wr_raw(&recs, "\0", 1);
    CHECK_EQ(hand_validate(&h, &recs), CN_ECORRUPT);
    recs.buf[0] -= 4; /* one fewer */
    CHECK_EQ(hand_validate(&h, &recs), CN_ECORRUPT);
    recs.buf[0] = 0x01; /* negative */
    CHECK_EQ(hand_validate(&h, &recs), CN_ECORRUPT);
    cn_wr_fini(&recs);
}

UNIT_TEST(reject_offset_delta_mismatch)
{
    struct cn_wr recs;
    cn_wr_init(&recs, 0);
    rec(&recs, 0, 0);
    rec(&recs, 1, 2);
    struct hand h = HAND(2);
    CHECK_EQ(hand_validate(&h, &recs), CN_EINVAL);
    /* lastOffsetDelta disagreeing with the count. */
    cn_wr_reset(&recs);
    rec(&recs, 0, 0);
    rec(&recs, 1, 1);
    h.last_delta = 5;
    CHECK_EQ(hand_validate(&h, &recs), CN_EINVAL);
    cn_wr_fini(&recs);
}

UNIT_TEST(reject_control_bit_from_client)
{
    struct cn_wr out;
    cn_wr_init(&out, 0);
    CHECK_EQ(cn_batch_build_control(&out, 77, 2, true, 5, 1234), 0);
    CHECK_EQ(validate(&out), CN_EINVAL);
    struct cn_batch_limits coord = client_lim;
    coord.allow_control = true;
    CHECK_EQ(cn_batch_validate(out.buf, out.len, &coord, NULL, NULL), 0);
    cn_wr_fini(&out);
}

UNIT_TEST(reject_transactional_without_producer_id)
{
    struct cn_wr recs;
    cn_wr_init(&recs, 0);
    rec(&recs, 0, 0);
    struct hand h = HAND(1);
    h.attr = CN_BATCH_ATTR_TRANSACTIONAL;
    CHECK_EQ(hand_validate(&h, &recs), CN_EINVAL);
    h.pid = 5;
    h.seq = 0;
    CHECK_EQ(hand_validate(&h, &recs), 0);
    cn_wr_fini(&recs);
}

UNIT_TEST(reject_producer_id_without_sequence)
{
    struct cn_wr recs;
    cn_wr_init(&recs, 0);
    rec(&recs, 0, 0);
    struct hand h = HAND(1);
    h.pid = 5;
    h.seq = -1;
    CHECK_EQ(hand_validate(&h, &recs), CN_EINVAL);
    cn_wr_fini(&recs);
}

UNIT_TEST(reject_bad_timestamps)
{
    struct cn_wr recs;
    cn_wr_init(&recs, 0);
    rec(&recs, 0, 0);
    rec(&recs, 20, 1); /* 1020 > maxTimestamp 1010 */
    struct hand h = HAND(2);
    CHECK_EQ(hand_validate(&h, &recs), CN_EINVAL);
    h.max_ts = 1020;
    CHECK_EQ(hand_validate(&h, &recs), 0);
    h.base_ts = -5;
    CHECK_EQ(hand_validate(&h, &recs), CN_EINVAL);
    /* A record whose computed timestamp is below -1. */
    cn_wr_reset(&recs);
    rec(&recs, -2000, 0);
    struct hand h1 = HAND(1);
    CHECK_EQ(hand_validate(&h1, &recs), CN_EINVAL);
    /* Overflowing base + delta. */
    cn_wr_reset(&recs);
    rec(&recs, INT64_MAX, 0);
    h1.max_ts = INT64_MAX;
    CHECK_EQ(hand_validate(&h1, &recs), CN_EINVAL);
    /* No timestamps at all (-1) is allowed. */
    cn_wr_reset(&recs);
    rec(&recs, 0, 0);
    h1.base_ts = -1;
    h1.max_ts = -1;
    CHECK_EQ(hand_validate(&h1, &recs), 0);
    cn_wr_fini(&recs);
}

UNIT_TEST(reject_compressed_payload_corrupt)
{
    for (size_t c = 1; c < sizeof codecs / sizeof codecs[0]; c++) {
        struct cn_wr out;
        cn_wr_init(&out, 0);
        build(&out, codecs[c], 50);
        /* Garble the middle of the payload but keep the CRC right, so it
         * is the codec that must notice (or the records after it). */
        size_t mid = 61 + (out.len - 61) / 2;
        for (size_t i = mid; i < mid + 8 && i < out.len; i++)
            out.buf[i] ^= 0xa5;
        fix_crc(out.buf, out.len);
        int rc = validate(&out);
        if (rc != CN_ECORRUPT)
            fprintf(stderr, "  codec %s rc %d\n", cn_codec_name(codecs[c]),
                    rc);
        CHECK_EQ(rc, CN_ECORRUPT);
        /* Cut short, length and CRC fixed. */
        out.len -= 3;
        put32(out.buf + 8, (uint32_t)(out.len - 12));
        fix_crc(out.buf, out.len);
        CHECK_EQ(validate(&out), CN_ECORRUPT);
        cn_wr_fini(&out);
    }
}

UNIT_TEST(reject_decompressed_over_limit)
{
    struct cn_batch_limits lim = client_lim;
    lim.max_uncompressed_bytes = 4096;
    for (size_t c = 1; c < sizeof codecs / sizeof codecs[0]; c++) {
        struct cn_wr out;
        cn_wr_init(&out, 0);
        build(&out, codecs[c], 200); /* ~10 KiB of records */
        CHECK_EQ(cn_batch_validate(out.buf, out.len, &lim, NULL, NULL),
                 CN_ETOOBIG);
        CHECK_EQ(validate(&out), 0);
        cn_wr_fini(&out);
    }
}

UNIT_TEST(reject_unknown_codec)
{
    for (int codec = 5; codec <= 7; codec++) {
        struct cn_wr out;
        struct cn_batch_hdr h;
        cn_wr_init(&out, 0);
        build(&out, CN_CODEC_NONE, 2);
        out.buf[22] = (uint8_t)((out.buf[22] & ~7) | codec);
        fix_crc(out.buf, out.len);
        CHECK_EQ(cn_batch_validate(out.buf, out.len, &client_lim, &h, NULL),
                 CN_EUNSUPPORTED);
        CHECK_EQ(cn_batch_codec(&h), codec);
        cn_wr_fini(&out);
    }
}

UNIT_TEST(reject_batch_over_max_bytes)
{
    struct cn_batch_limits lim = client_lim;
    struct cn_wr out;
    cn_wr_init(&out, 0);
    build(&out, CN_CODEC_NONE, 20);
    lim.max_batch_bytes = out.len - 1;
    CHECK_EQ(cn_batch_validate(out.buf, out.len, &lim, NULL, NULL),
             CN_ETOOBIG);
    CHECK_EQ(cn_batch_validate_set(out.buf, out.len, &lim, NULL, NULL, NULL),
             CN_ETOOBIG);
    lim.max_batch_bytes = out.len;
    CHECK_EQ(cn_batch_validate(out.buf, out.len, &lim, NULL, NULL), 0);
    cn_wr_fini(&out);
}

/* ---- patching --------------------------------------------------------- */

UNIT_TEST(set_base_offset_keeps_crc)
{
    struct cn_wr out;
    struct cn_batch_hdr h;
    cn_wr_init(&out, 0);
    build(&out, CN_CODEC_LZ4, 5);
    uint32_t crc = cn_batch_compute_crc(out.buf, out.len);
    cn_batch_set_base_offset(out.buf, 123456789012);
    cn_batch_set_leader_epoch(out.buf, 42);
    CHECK_EQ(cn_batch_compute_crc(out.buf, out.len), crc);
    CHECK_EQ(cn_batch_validate(out.buf, out.len, &client_lim, &h, NULL), 0);
    CHECK_EQ(h.base_offset, 123456789012);
    CHECK_EQ(h.leader_epoch, 42);
    CHECK_EQ(cn_batch_last_offset(&h), 123456789016);
    struct cn_wr scratch;
    struct cn_record_iter it;
    struct cn_record r;
    cn_wr_init(&scratch, 0);
    CHECK_EQ(cn_batch_records(out.buf, out.len, 0, &scratch, NULL, &it), 0);
    for (int i = 0; i < 5; i++) {
        CHECK_EQ(cn_record_iter_next(&it, &r), 1);
        CHECK_EQ(r.offset, 123456789012 + i);
    }
    cn_wr_fini(&scratch);
    cn_wr_fini(&out);
}

UNIT_TEST(set_log_append_time)
{
    struct cn_wr out;
    struct cn_batch_hdr h;
    cn_wr_init(&out, 0);
    build(&out, CN_CODEC_NONE, 4);
    cn_batch_set_log_append_time(out.buf, out.len, 1800000000000);
    CHECK_EQ(cn_batch_validate(out.buf, out.len, &client_lim, &h, NULL), 0);
    CHECK(cn_batch_is_log_append_time(&h));
    CHECK_EQ(h.max_timestamp, 1800000000000);
    CHECK_EQ(cn_batch_codec(&h), CN_CODEC_NONE);
    struct cn_record_iter it;
    struct cn_record r;
    CHECK_EQ(cn_batch_records(out.buf, out.len, 0, NULL, NULL, &it), 0);
    while (cn_record_iter_next(&it, &r) == 1)
        CHECK_EQ(r.timestamp, 1800000000000);
    cn_wr_fini(&out);
}

UNIT_TEST(last_sequence_wraps)
{
    struct cn_batch_hdr h = {.base_sequence = INT32_MAX - 1,
                             .last_offset_delta = 3};
    CHECK_EQ(cn_batch_last_sequence(&h), 1);
    h.base_sequence = 10;
    CHECK_EQ(cn_batch_last_sequence(&h), 13);
}

/* ---- control batches -------------------------------------------------- */

UNIT_TEST(control_batch_contents)
{
    struct cn_batch_limits coord = client_lim;
    coord.allow_control = true;
    for (int commit = 0; commit < 2; commit++) {
        struct cn_wr out;
        struct cn_batch_hdr h;
        cn_wr_init(&out, 0);
        CHECK_EQ(cn_batch_build_control(&out, 77, 2, commit, 0x01020304, 99),
                 0);
        CHECK_EQ(cn_batch_validate(out.buf, out.len, &coord, &h, NULL), 0);
        CHECK(cn_batch_is_control(&h) && cn_batch_is_transactional(&h));
        CHECK_EQ(h.producer_id, 77);
        CHECK_EQ(h.producer_epoch, 2);
        CHECK_EQ(h.base_sequence, -1);
        CHECK_EQ(h.records_count, 1);
        struct cn_record_iter it;
        struct cn_record r;
        int16_t type = -1;
        CHECK_EQ(cn_batch_records(out.buf, out.len, 0, NULL, NULL, &it), 0);
        CHECK_EQ(cn_record_iter_next(&it, &r), 1);
        CHECK_EQ(cn_control_key_parse(r.key, &type), 0);
        CHECK_EQ(type, commit ? CN_CONTROL_COMMIT : CN_CONTROL_ABORT);
        static const uint8_t want_val[6] = {0, 0, 1, 2, 3, 4};
        CHECK(cn_bytes_eq(r.value, cn_bytes_of(want_val, 6)));
        CHECK_EQ(r.timestamp, 99);
        cn_wr_fini(&out);
    }
}

/* ---- multi-batch sets ------------------------------------------------- */

struct seen {
    int calls;
    size_t bytes;
};

static int count_cb(void *arg, const uint8_t *batch, size_t len,
                    const struct cn_batch_hdr *hdr)
{
    struct seen *s = arg;
    (void)batch;
    CHECK_EQ(cn_batch_size(hdr), len);
    s->calls++;
    s->bytes += len;
    return 0;
}

UNIT_TEST(multi_batch_sets)
{
    struct cn_wr set;
    struct seen s = {0, 0};
    cn_wr_init(&set, 0);
    build(&set, CN_CODEC_NONE, 3);
    size_t first = set.len;
    build(&set, CN_CODEC_GZIP, 10);
    build(&set, CN_CODEC_ZSTD, 1);
    CHECK_EQ(cn_batch_validate_set(set.buf, set.len, &client_lim, NULL,
                                   count_cb, &s),
             3);
    CHECK_EQ(s.calls, 3);
    CHECK_EQ(s.bytes, set.len);

    /* Bytes left over after the last batch, and a torn last batch. */
    cn_wr_raw(&set, "\0\0\0", 3);
    CHECK_EQ(cn_batch_validate_set(set.buf, set.len, &client_lim, NULL,
                                   NULL, NULL),
             CN_ECORRUPT);
    set.len -= 3;
    CHECK_EQ(cn_batch_validate_set(set.buf, set.len - 1, &client_lim, NULL,
                                   NULL, NULL),
             CN_ECORRUPT);

    /* A bad batch in the middle fails the set before any callback. */
    set.buf[first + 30] ^= 1;
    s.calls = 0;
    CHECK_EQ(cn_batch_validate_set(set.buf, set.len, &client_lim, NULL,
                                   count_cb, &s),
             CN_ECORRUPT);
    CHECK_EQ(s.calls, 0);
    set.buf[first + 30] ^= 1;

    /* Empty. */
    CHECK_EQ(cn_batch_validate_set(set.buf, 0, &client_lim, NULL, NULL,
                                   NULL),
             CN_EINVAL);
    cn_wr_fini(&set);
}

static int stop_cb(void *arg, const uint8_t *batch, size_t len,
                   const struct cn_batch_hdr *hdr)
{
    (void)batch;
    (void)len;
    (void)hdr;
    return ++*(int *)arg == 2 ? CN_EEXIST : 0;
}

UNIT_TEST(set_callback_stops_walk)
{
    struct cn_wr set;
    int calls = 0;
    cn_wr_init(&set, 0);
    for (int i = 0; i < 3; i++)
        build(&set, CN_CODEC_SNAPPY, 2);
    CHECK_EQ(cn_batch_validate_set(set.buf, set.len, &client_lim, NULL,
                                   stop_cb, &calls),
             CN_EEXIST);
    CHECK_EQ(calls, 2);
    cn_wr_fini(&set);
}

/* ---- fuzz corpus ------------------------------------------------------ */

#define CORPUS "tests/fuzz/corpus/batch"

/* Seeds: one batch per codec, a two-batch set, and a control batch. */
static int write_seeds(const char *dir)
{
    for (size_t c = 0; c <= sizeof codecs / sizeof codecs[0]; c++) {
        struct cn_wr out;
        char path[512];
        cn_wr_init(&out, 0);
        if (c < sizeof codecs / sizeof codecs[0]) {
            build(&out, codecs[c], 6);
            snprintf(path, sizeof path, "%s/%s", dir,
                     cn_codec_name(codecs[c]));
        } else {
            build(&out, CN_CODEC_NONE, 1);
            build(&out, CN_CODEC_LZ4, 2);
            snprintf(path, sizeof path, "%s/two-batches", dir);
        }
        FILE *f = fopen(path, "wb");
        if (!f)
            return -1;
        fwrite(out.buf, 1, out.len, f);
        fclose(f);
        cn_wr_fini(&out);
    }
    struct cn_wr out;
    char path[512];
    cn_wr_init(&out, 0);
    cn_batch_build_control(&out, 9, 1, true, 3, 1700000000000);
    snprintf(path, sizeof path, "%s/control-commit", dir);
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    fwrite(out.buf, 1, out.len, f);
    fclose(f);
    cn_wr_fini(&out);
    return 0;
}

UNIT_TEST(seeds_write)
{
    const char *dir = getenv("CN_WRITE_BATCH_SEEDS");
    if (dir)
        CHECK_EQ(write_seeds(dir), 0);
}

UNIT_TEST(corpus_replay)
{
    /* Every file must run clean; generated seeds (no '-' prefix from the
     * fuzzer's hashes) must be valid sets, control ones with allow_control. */
    DIR *d = opendir(CORPUS);
    if (!d) {
        fprintf(stderr, "  no %s; skipped\n", CORPUS);
        return;
    }
    struct dirent *e;
    int files = 0;
    struct cn_batch_limits lim = client_lim;
    lim.allow_control = true;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char path[512];
        snprintf(path, sizeof path, "%s/%s", CORPUS, e->d_name);
        FILE *f = fopen(path, "rb");
        if (!f)
            continue;
        static uint8_t buf[1 << 16];
        size_t n = fread(buf, 1, sizeof buf, f);
        fclose(f);
        int rc = cn_batch_validate_set(buf, n, &lim, NULL, NULL, NULL);
        if (rc < 1) {
            fprintf(stderr, "  %s: rc %d\n", path, rc);
            CHECK(0);
        }
        files++;
    }
    closedir(d);
    CHECK(files >= 6);
}

/* Decompressed records region of a whole batch, into out. */
static void records_of(const uint8_t *b, size_t len, struct cn_wr *out)
{
    struct cn_batch_hdr h;
    cn_wr_reset(out);
    CHECK_EQ(cn_batch_hdr_parse(b, len, &h), 0);
    CHECK_EQ(cn_decompress(cn_batch_codec(&h), b + CN_BATCH_HEADER_BYTES,
                           len - CN_BATCH_HEADER_BYTES, 1 << 24, out),
             0);
}

/* Every codec pair, plain and transactional: the rebuilt batch validates,
 * keeps every header field but length, codec and CRC, and its records
 * decode to the same bytes (offset deltas, timestamps, keys, values,
 * headers). */
UNIT_TEST(recompress_every_codec_pair)
{
    struct cn_wr src, dst, scratch, a, b;
    cn_wr_init(&src, 0);
    cn_wr_init(&dst, 0);
    cn_wr_init(&scratch, 0);
    cn_wr_init(&a, 0);
    cn_wr_init(&b, 0);
    for (int txn = 0; txn < 2; txn++)
        for (size_t i = 0; i < 5; i++)
            for (size_t j = 0; j < 5; j++) {
                cn_wr_reset(&src);
                cn_wr_reset(&dst);
                build(&src, codecs[i], 40);
                if (txn) {
                    src.buf[CN_BATCH_OFF_ATTRIBUTES + 1] |=
                        CN_BATCH_ATTR_TRANSACTIONAL;
                    fix_crc(src.buf, src.len);
                }
                CHECK_EQ(cn_batch_recompress(src.buf, src.len, codecs[j],
                                             CN_LEVEL_DEFAULT, 0, &scratch,
                                             &dst),
                         0);
                struct cn_batch_hdr hs, hd;
                CHECK_EQ(cn_batch_validate(src.buf, src.len, &client_lim,
                                           &hs, NULL),
                         0);
                CHECK_EQ(cn_batch_validate(dst.buf, dst.len, &client_lim,
                                           &hd, NULL),
                         0);
                CHECK_EQ(cn_batch_codec(&hd), codecs[j]);
                CHECK_EQ(hd.attributes & ~CN_BATCH_ATTR_CODEC_MASK,
                         hs.attributes & ~CN_BATCH_ATTR_CODEC_MASK);
                CHECK_EQ(cn_batch_is_transactional(&hd), txn);
                CHECK_EQ(hd.producer_id, 1000);
                CHECK_EQ(hd.producer_epoch, 3);
                CHECK_EQ(hd.base_sequence, hs.base_sequence);
                CHECK_EQ(hd.last_offset_delta, hs.last_offset_delta);
                CHECK_EQ(hd.records_count, hs.records_count);
                CHECK_EQ(hd.base_timestamp, hs.base_timestamp);
                CHECK_EQ(hd.max_timestamp, hs.max_timestamp);
                CHECK_EQ(cn_batch_last_sequence(&hd),
                         cn_batch_last_sequence(&hs));
                records_of(src.buf, src.len, &a);
                records_of(dst.buf, dst.len, &b);
                CHECK_EQ(a.len, b.len);
                CHECK(a.len == b.len && !memcmp(a.buf, b.buf, a.len));
            }
    /* A level is taken (zstd 19, gzip 1, lz4 12) and still decodes. */
    int lv[3][2] = {{CN_CODEC_ZSTD, 19}, {CN_CODEC_GZIP, 1},
                    {CN_CODEC_LZ4, 12}};
    for (int k = 0; k < 3; k++) {
        cn_wr_reset(&src);
        cn_wr_reset(&dst);
        build(&src, CN_CODEC_NONE, 40);
        CHECK_EQ(cn_batch_recompress(src.buf, src.len, lv[k][0], lv[k][1], 0,
                                     &scratch, &dst),
                 0);
        CHECK_EQ(cn_batch_validate(dst.buf, dst.len, &client_lim, NULL,
                                   NULL),
                 0);
    }
    cn_wr_fini(&src);
    cn_wr_fini(&dst);
    cn_wr_fini(&scratch);
    cn_wr_fini(&a);
    cn_wr_fini(&b);
}

/* Control batches are never recompressed (Kafka keeps them uncompressed),
 * and a failure leaves out as it was. */
UNIT_TEST(recompress_refuses_control)
{
    struct cn_wr m, out, scratch;
    cn_wr_init(&m, 0);
    cn_wr_init(&out, 0);
    cn_wr_init(&scratch, 0);
    CHECK_EQ(cn_batch_build_control(&m, 7, 1, true, 0, 1000), 0);
    cn_wr_raw(&out, "x", 1);
    CHECK_EQ(cn_batch_recompress(m.buf, m.len, CN_CODEC_ZSTD,
                                 CN_LEVEL_DEFAULT, 0, &scratch, &out),
             CN_EINVAL);
    CHECK_EQ(out.len, 1);
    cn_wr_fini(&m);
    cn_wr_fini(&out);
    cn_wr_fini(&scratch);
}

UNIT_MAIN(build_validate_every_codec, headers_iterate, hand_vector_known_crc,
          hdr_parse_torn_tail, reject_bad_magic, reject_short_header,
          reject_batch_length_too_big, reject_batch_length_too_small,
          reject_crc_flipped_bit, reject_records_count_zero,
          reject_count_larger_than_records,
          reject_fewer_records_than_count_compressed,
          reject_more_records_than_count, reject_trailing_garbage_in_batch,
          reject_bad_varint, reject_key_length_beyond_record,
          reject_negative_length, reject_record_length_mismatch,
          reject_offset_delta_mismatch, reject_control_bit_from_client,
          reject_transactional_without_producer_id,
          reject_producer_id_without_sequence, reject_bad_timestamps,
          reject_compressed_payload_corrupt, reject_decompressed_over_limit,
          reject_unknown_codec, reject_batch_over_max_bytes,
          set_base_offset_keeps_crc, set_log_append_time, last_sequence_wraps,
          control_batch_contents, multi_batch_sets, set_callback_stops_walk,
          seeds_write, corpus_replay, recompress_every_codec_pair,
          recompress_refuses_control)
