/* test_compress.c - the four Kafka codecs: round trips and hostile input. */
#include <stdlib.h>
#include <string.h>

#include <snappy-c.h>
#include <zlib.h>

#include "base/err.h"
#include "base/wr.h"
#include "proto/compress.h"
#include "unit.h"

static const int codecs[] = {CN_CODEC_NONE, CN_CODEC_GZIP, CN_CODEC_SNAPPY,
                             CN_CODEC_LZ4, CN_CODEC_ZSTD};
#define NCODECS (sizeof codecs / sizeof codecs[0])

static uint64_t rng_state;

static uint32_t rng(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng_state >> 33);
}

/* Half random, half repetitive, so every codec has something to find. */
static uint8_t *make_data(size_t n)
{
    uint8_t *b = malloc(n ? n : 1);
    for (size_t i = 0; i < n; i++)
        b[i] = (i / 64) % 2 ? (uint8_t)rng() : (uint8_t)("kafka"[i % 5]);
    return b;
}

UNIT_TEST(round_trip_all_codecs)
{
    static const size_t sizes[] = {0, 1, 7, 100, 4096, 65537, 300000,
                                   2 << 20};
    rng_state = 42;
    for (size_t c = 0; c < NCODECS; c++) {
        for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
            size_t n = sizes[s];
            uint8_t *data = make_data(n);
            struct cn_wr z, d;
            cn_wr_init(&z, 0);
            cn_wr_init(&d, 0);
            cn_wr_raw(&d, "pre", 3); /* decoders append */
            CHECK_EQ(cn_compress(codecs[c], data, n, &z), 0);
            int rc = cn_decompress(codecs[c], z.buf, z.len, n, &d);
            if (rc != 0 || d.len != n + 3 ||
                memcmp(d.buf + 3, data, n) != 0) {
                fprintf(stderr, "  codec %s size %zu rc %d\n",
                        cn_codec_name(codecs[c]), n, rc);
                CHECK(0);
            }
            CHECK(memcmp(d.buf, "pre", 3) == 0);
            cn_wr_fini(&z);
            cn_wr_fini(&d);
            free(data);
        }
    }
}

UNIT_TEST(garbage_rejected)
{
    rng_state = 7;
    for (size_t c = 1; c < NCODECS; c++) {
        for (int t = 0; t < 50; t++) {
            uint8_t junk[200];
            size_t n = 1 + rng() % sizeof junk;
            for (size_t i = 0; i < n; i++)
                junk[i] = (uint8_t)rng();
            struct cn_wr d;
            cn_wr_init(&d, 0);
            int rc = cn_decompress(codecs[c], junk, n, 1 << 20, &d);
            /* Random bytes can be valid raw snappy, or claim a length
             * past the limit in their header; anything else is corrupt. */
            if (rc == CN_ETOOBIG)
                CHECK_EQ(codecs[c], CN_CODEC_SNAPPY);
            else if (rc != 0)
                CHECK_EQ(rc, CN_ECORRUPT);
            else
                CHECK_EQ(codecs[c], CN_CODEC_SNAPPY);
            if (rc)
                CHECK_EQ(d.len, 0);
            cn_wr_fini(&d);
        }
        struct cn_wr d;
        cn_wr_init(&d, 0);
        CHECK_EQ(cn_decompress(codecs[c], (const uint8_t *)"", 0, 100, &d),
                 CN_ECORRUPT);
        cn_wr_fini(&d);
    }
}

UNIT_TEST(truncated_rejected)
{
    rng_state = 8;
    size_t n = 50000;
    uint8_t *data = make_data(n);
    for (size_t c = 1; c < NCODECS; c++) {
        struct cn_wr z, d;
        cn_wr_init(&z, 0);
        cn_wr_init(&d, 0);
        CHECK_EQ(cn_compress(codecs[c], data, n, &z), 0);
        size_t cuts[] = {1, z.len / 2, z.len - 1};
        for (size_t k = 0; k < 3; k++) {
            cn_wr_reset(&d);
            int rc = cn_decompress(codecs[c], z.buf, cuts[k], n, &d);
            if (rc != CN_ECORRUPT)
                fprintf(stderr, "  codec %s cut %zu rc %d\n",
                        cn_codec_name(codecs[c]), cuts[k], rc);
            CHECK_EQ(rc, CN_ECORRUPT);
            CHECK_EQ(d.len, 0);
        }
        cn_wr_fini(&z);
        cn_wr_fini(&d);
    }
    free(data);
}

UNIT_TEST(unknown_codec)
{
    struct cn_wr d;
    cn_wr_init(&d, 0);
    for (int c = 5; c <= 7; c++) {
        CHECK_EQ(cn_decompress(c, (const uint8_t *)"x", 1, 10, &d),
                 CN_EUNSUPPORTED);
        CHECK_EQ(cn_compress(c, (const uint8_t *)"x", 1, &d),
                 CN_EUNSUPPORTED);
    }
    cn_wr_fini(&d);
}

UNIT_TEST(bomb_limit_enforced)
{
    /* 64 MiB of zeros compresses to a few KiB; a 1 MiB limit must stop it
     * without allocating anything like 64 MiB. */
    size_t n = 64 << 20;
    uint8_t *zeros = calloc(1, n);
    for (size_t c = 0; c < NCODECS; c++) {
        struct cn_wr z, d;
        cn_wr_init(&z, 0);
        cn_wr_init(&d, 0);
        CHECK_EQ(cn_compress(codecs[c], zeros, n, &z), 0);
        CHECK_EQ(cn_decompress(codecs[c], z.buf, z.len, 1 << 20, &d),
                 CN_ETOOBIG);
        CHECK_EQ(d.len, 0);
        CHECK(d.cap <= (4u << 20));
        /* Exactly at the limit passes, one byte under fails. */
        cn_wr_reset(&z);
        CHECK_EQ(cn_compress(codecs[c], zeros, 1000, &z), 0);
        CHECK_EQ(cn_decompress(codecs[c], z.buf, z.len, 1000, &d), 0);
        CHECK_EQ(d.len, 1000);
        cn_wr_reset(&d);
        CHECK_EQ(cn_decompress(codecs[c], z.buf, z.len, 999, &d),
                 CN_ETOOBIG);
        cn_wr_fini(&z);
        cn_wr_fini(&d);
    }
    free(zeros);
}

/* Builds the Java client's xerial framing around raw snappy blocks. */
static void xerial(struct cn_wr *z, const uint8_t *data, size_t n,
                   size_t block)
{
    static const uint8_t hdr[16] = {0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0,
                                    0,    0,   0,   1,   0,   0,   0,   1};
    cn_wr_raw(z, hdr, sizeof hdr);
    for (size_t off = 0; off < n; off += block) {
        size_t len = n - off < block ? n - off : block;
        size_t bound = snappy_max_compressed_length(len);
        size_t slot = cn_wr_reserve(z, 4);
        cn_wr_ensure(z, bound);
        size_t got = bound;
        snappy_compress((const char *)data + off, len,
                        (char *)z->buf + z->len, &got);
        z->len += got;
        cn_wr_patch_u32(z, slot, (uint32_t)got);
    }
}

UNIT_TEST(snappy_xerial_framing)
{
    rng_state = 9;
    size_t n = 100000;
    uint8_t *data = make_data(n);
    struct cn_wr z, d;
    cn_wr_init(&z, 0);
    cn_wr_init(&d, 0);
    xerial(&z, data, n, 32768);
    CHECK_EQ(cn_decompress(CN_CODEC_SNAPPY, z.buf, z.len, n, &d), 0);
    CHECK_EQ(d.len, n);
    CHECK(d.len == n && memcmp(d.buf, data, n) == 0);
    /* Limit applies across blocks. */
    cn_wr_reset(&d);
    CHECK_EQ(cn_decompress(CN_CODEC_SNAPPY, z.buf, z.len, n - 1, &d),
             CN_ETOOBIG);
    /* A block length past the end, and a cut block length. */
    cn_wr_reset(&d);
    CHECK_EQ(cn_decompress(CN_CODEC_SNAPPY, z.buf, z.len - 1, n, &d),
             CN_ECORRUPT);
    cn_wr_reset(&d);
    CHECK_EQ(cn_decompress(CN_CODEC_SNAPPY, z.buf, 18, n, &d), CN_ECORRUPT);
    /* Header only: zero blocks is empty output. */
    cn_wr_reset(&d);
    CHECK_EQ(cn_decompress(CN_CODEC_SNAPPY, z.buf, 16, n, &d), 0);
    CHECK_EQ(d.len, 0);
    cn_wr_fini(&z);
    cn_wr_fini(&d);
    free(data);
}

UNIT_TEST(gzip_concatenated_members)
{
    struct cn_wr z, d;
    cn_wr_init(&z, 0);
    cn_wr_init(&d, 0);
    CHECK_EQ(cn_compress(CN_CODEC_GZIP, (const uint8_t *)"hello ", 6, &z), 0);
    CHECK_EQ(cn_compress(CN_CODEC_GZIP, (const uint8_t *)"world", 5, &z), 0);
    CHECK_EQ(cn_decompress(CN_CODEC_GZIP, z.buf, z.len, 100, &d), 0);
    CHECK(d.len == 11 && memcmp(d.buf, "hello world", 11) == 0);
    /* Trailing junk after a member is not a member. */
    cn_wr_raw(&z, "xy", 2);
    cn_wr_reset(&d);
    CHECK_EQ(cn_decompress(CN_CODEC_GZIP, z.buf, z.len, 100, &d),
             CN_ECORRUPT);
    cn_wr_fini(&z);
    cn_wr_fini(&d);
}

UNIT_TEST(concatenated_frames_lz4_zstd)
{
    static const int cs[] = {CN_CODEC_LZ4, CN_CODEC_ZSTD};
    for (int i = 0; i < 2; i++) {
        struct cn_wr z, d;
        cn_wr_init(&z, 0);
        cn_wr_init(&d, 0);
        CHECK_EQ(cn_compress(cs[i], (const uint8_t *)"abc", 3, &z), 0);
        CHECK_EQ(cn_compress(cs[i], (const uint8_t *)"def", 3, &z), 0);
        CHECK_EQ(cn_decompress(cs[i], z.buf, z.len, 100, &d), 0);
        CHECK(d.len == 6 && memcmp(d.buf, "abcdef", 6) == 0);
        cn_wr_fini(&z);
        cn_wr_fini(&d);
    }
}

UNIT_MAIN(round_trip_all_codecs, garbage_rejected, truncated_rejected,
          unknown_codec, bomb_limit_enforced, snappy_xerial_framing,
          gzip_concatenated_members, concatenated_frames_lz4_zstd)
