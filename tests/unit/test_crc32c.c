/* test_crc32c.c - CRC-32C vectors, table vs SSE4.2, incremental use. */
#include <stdlib.h>
#include <time.h>
#include <string.h>

#include "base/crc32c.h"
#include "unit.h"

typedef uint32_t (*crc_fn)(uint32_t, const void *, size_t);

/* RFC 3720 B.4 vectors plus the usual check string. */
static void check_vectors(crc_fn f)
{
    uint8_t b[32];
    CHECK_EQ(f(0, "123456789", 9), 0xE3069283u);
    memset(b, 0, sizeof b);
    CHECK_EQ(f(0, b, 32), 0x8A9136AAu);
    memset(b, 0xff, sizeof b);
    CHECK_EQ(f(0, b, 32), 0x62A8AB43u);
    for (int i = 0; i < 32; i++)
        b[i] = (uint8_t)i;
    CHECK_EQ(f(0, b, 32), 0x46DD794Eu);
    for (int i = 0; i < 32; i++)
        b[i] = (uint8_t)(31 - i);
    CHECK_EQ(f(0, b, 32), 0x113FDB5Cu);
    CHECK_EQ(f(0, "", 0), 0);
}

UNIT_TEST(vectors_dispatch)
{
    check_vectors(cn_crc32c);
}

UNIT_TEST(vectors_sw)
{
    check_vectors(cn_crc32c_sw);
}

UNIT_TEST(vectors_hw)
{
    if (!cn_crc32c_hw_available()) {
        fprintf(stderr, "  no SSE4.2; skipped\n");
        return;
    }
    check_vectors(cn_crc32c_hw);
}

static uint64_t rng_state;

static uint32_t rng(void)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng_state >> 33);
}

UNIT_TEST(hw_equals_sw_all_lengths)
{
    if (!cn_crc32c_hw_available())
        return;
    rng_state = 12345;
    uint8_t *buf = malloc(1024 + 16);
    for (size_t i = 0; i < 1024 + 16; i++)
        buf[i] = (uint8_t)rng();
    int bad = 0;
    for (size_t len = 0; len <= 1024; len++) {
        size_t align = rng() % 16;
        uint32_t seed = (len & 1) ? rng() : 0;
        if (cn_crc32c_hw(seed, buf + align, len) !=
            cn_crc32c_sw(seed, buf + align, len)) {
            if (bad++ < 5)
                fprintf(stderr, "  mismatch len %zu align %zu\n", len, align);
        }
    }
    CHECK_EQ(bad, 0);
    free(buf);
}

UNIT_TEST(hw_equals_sw_long)
{
    /* Long enough to use the three-stream path, with ragged edges. */
    if (!cn_crc32c_hw_available())
        return;
    rng_state = 777;
    size_t cap = 64 * 1024 + 64;
    uint8_t *buf = malloc(cap);
    for (size_t i = 0; i < cap; i++)
        buf[i] = (uint8_t)rng();
    static const size_t lens[] = {3071, 3072, 3073, 6144, 9999, 65536};
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        for (size_t align = 0; align < 9; align++)
            CHECK_EQ(cn_crc32c_hw(0, buf + align, lens[i]),
                     cn_crc32c_sw(0, buf + align, lens[i]));
    }
    free(buf);
}

UNIT_TEST(incremental_equals_one_shot)
{
    rng_state = 99;
    size_t n = 10000;
    uint8_t *buf = malloc(n);
    for (size_t i = 0; i < n; i++)
        buf[i] = (uint8_t)rng();
    uint32_t want = cn_crc32c(0, buf, n);
    CHECK_EQ(want, cn_crc32c_sw(0, buf, n));
    for (int t = 0; t < 200; t++) {
        size_t a = rng() % (n + 1);
        size_t b = a + rng() % (n - a + 1);
        uint32_t c = cn_crc32c(0, buf, a);
        c = cn_crc32c_sw(c, buf + a, b - a);
        c = cn_crc32c(c, buf + b, n - b);
        if (c != want) {
            fprintf(stderr, "  split %zu %zu\n", a, b);
            CHECK(0);
            break;
        }
    }
    free(buf);
}

UNIT_TEST(hw_speed_smoke)
{
    /* Not a benchmark; prints the rate so a slow path is noticed. */
    size_t n = 8 << 20;
    uint8_t *buf = malloc(n);
    memset(buf, 0x5a, n); /* fault the pages in before timing */
    uint32_t c = cn_crc32c(0, buf, n);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < 8; i++)
        c = cn_crc32c(c, buf, n);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) +
               (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    fprintf(stderr, "  crc32c: %.2f GB/s (crc %08x)\n",
            s > 0 ? 8.0 * (double)n / s / 1e9 : 0.0, c);
    free(buf);
}

UNIT_MAIN(vectors_dispatch, vectors_sw, vectors_hw, hw_equals_sw_all_lengths,
          hw_equals_sw_long, incremental_equals_one_shot, hw_speed_smoke)
