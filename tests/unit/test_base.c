/* test_base.c - reader, writer, arena and fail points. */
#include <string.h>

#include "base/arena.h"
#include "base/clock.h"
#include "base/err.h"
#include "base/failpoint.h"
#include "base/fnv.h"
#include "base/rand.h"
#include "base/rd.h"
#include "base/wr.h"
#include "unit.h"

UNIT_TEST(varint_round_trip)
{
    static const int64_t vals[] = {0, 1, -1, 63, -64, 64, 300, -300,
                                   INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN};
    struct cn_wr wr;
    cn_wr_init(&wr, 0);
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++)
        cn_wr_varlong(&wr, vals[i]);
    struct cn_rd rd;
    cn_rd_init(&rd, wr.buf, wr.len);
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++)
        CHECK(cn_rd_varlong(&rd) == vals[i]);
    CHECK_EQ(rd.err, 0);
    CHECK_EQ(cn_rd_left(&rd), 0);
    cn_wr_fini(&wr);
}

UNIT_TEST(varint_known_bytes)
{
    /* Zig-zag: -1 -> 1, 1 -> 2, 150 -> 300 -> ac 02. */
    struct cn_wr wr;
    cn_wr_init(&wr, 0);
    cn_wr_varint(&wr, -1);
    cn_wr_varint(&wr, 150);
    cn_wr_uvarint(&wr, 300);
    static const uint8_t want[] = {0x01, 0xac, 0x02, 0xac, 0x02};
    CHECK_EQ(wr.len, sizeof want);
    CHECK(memcmp(wr.buf, want, sizeof want) == 0);
    cn_wr_fini(&wr);
}

UNIT_TEST(reader_stops_at_first_error)
{
    static const uint8_t b[] = {0x00, 0x01, 0x02};
    struct cn_rd rd;
    cn_rd_init(&rd, b, sizeof b);
    CHECK_EQ(cn_rd_i16(&rd), 1);
    CHECK_EQ(cn_rd_i32(&rd), 0);
    CHECK_EQ(rd.err, CN_ETRUNC);
    CHECK_EQ(cn_rd_i8(&rd), 0);
}

UNIT_TEST(overlong_uvarint_rejected)
{
    static const uint8_t b[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
    struct cn_rd rd;
    cn_rd_init(&rd, b, sizeof b);
    (void)cn_rd_uvarint(&rd);
    CHECK(rd.err != 0);
}

UNIT_TEST(huge_array_count_rejected)
{
    static const uint8_t b[] = {0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0};
    struct cn_rd rd;
    cn_rd_init(&rd, b, sizeof b);
    CHECK_EQ(cn_rd_array_len(&rd, false, 4), 0);
    CHECK_EQ(rd.err, CN_EBADLEN);
}

UNIT_TEST(strings_null_and_compact)
{
    struct cn_wr wr;
    cn_wr_init(&wr, 0);
    cn_wr_str(&wr, false, CN_BYTES_NULL);
    cn_wr_str(&wr, true, CN_BYTES_NULL);
    cn_wr_str(&wr, true, cn_bytes_str("abc"));
    cn_wr_bytes(&wr, false, cn_bytes_str("xy"));
    struct cn_rd rd;
    cn_rd_init(&rd, wr.buf, wr.len);
    CHECK(cn_bytes_is_null(cn_rd_str(&rd, false)));
    CHECK(cn_bytes_is_null(cn_rd_str(&rd, true)));
    CHECK(cn_bytes_eq_str(cn_rd_str(&rd, true), "abc"));
    CHECK(cn_bytes_eq_str(cn_rd_bytes(&rd, false), "xy"));
    CHECK_EQ(rd.err, 0);
    cn_wr_fini(&wr);
}

UNIT_TEST(tags_skipped)
{
    static const uint8_t b[] = {0x02, 0x00, 0x01, 0xaa, 0x05, 0x02, 1, 2, 0x7};
    struct cn_rd rd;
    cn_rd_init(&rd, b, sizeof b);
    cn_rd_skip_tags(&rd);
    CHECK_EQ(rd.err, 0);
    CHECK_EQ(cn_rd_i8(&rd), 7);
}

UNIT_TEST(arena_zeroed_and_aligned)
{
    struct cn_arena a;
    cn_arena_init(&a);
    for (int i = 0; i < 1000; i++) {
        uint8_t *p = cn_arena_alloc(&a, (size_t)i * 7 + 1);
        CHECK(p != NULL);
        CHECK(((uintptr_t)p & 15) == 0);
        CHECK(p[0] == 0);
    }
    CHECK(cn_arena_calloc(&a, SIZE_MAX / 2, 4) == NULL);
    cn_arena_fini(&a);
}

UNIT_TEST(failpoint_every_nth_hit)
{
    CHECK_EQ(cn_failpoint_set("unit.sometimes", "error/3"), 0);
    int fired = 0;
    for (int i = 1; i <= 9; i++) {
        int rc = CN_FAILPOINT("unit.sometimes");
        if (rc) {
            CHECK_EQ(rc, CN_EFAILPOINT);
            CHECK_EQ(i % 3, 0);
            fired++;
        }
    }
    CHECK_EQ(fired, 3);
    CHECK_EQ(cn_failpoint_set("unit.sometimes", "error"), 0);
    CHECK_EQ(CN_FAILPOINT("unit.sometimes"), CN_EFAILPOINT);
    CHECK_EQ(cn_failpoint_set("unit.sometimes", "error/0"), CN_EINVAL);
    CHECK_EQ(cn_failpoint_set("unit.sometimes", "error/x"), CN_EINVAL);
    CHECK_EQ(cn_failpoint_set("unit.sometimes", "/3"), CN_EINVAL);
    CHECK_EQ(cn_failpoint_set("unit.sometimes", "explode/3"), CN_EINVAL);
    CHECK_EQ(cn_failpoint_set("unit.sometimes", NULL), 0);
    CHECK_EQ(CN_FAILPOINT("unit.sometimes"), 0);
}

UNIT_TEST(failpoint_delay_sleeps_and_goes_on)
{
    CHECK_EQ(cn_failpoint_set("unit.slow", "delay/30"), 0);
    int64_t t0 = cn_clock_mono_us();
    CHECK_EQ(CN_FAILPOINT("unit.slow"), 0);
    /* At least: a sleep is never shorter. */
    CHECK(cn_clock_mono_us() - t0 >= 30 * 1000);
    CHECK_EQ(cn_failpoint_set("unit.slow", "delay"), CN_EINVAL);
    CHECK_EQ(cn_failpoint_set("unit.slow", "delay/0"), CN_EINVAL);
    CHECK_EQ(cn_failpoint_set("unit.slow", "delay/x"), CN_EINVAL);
    CHECK_EQ(cn_failpoint_set("unit.slow", NULL), 0);
    CHECK_EQ(CN_FAILPOINT("unit.slow"), 0);
}

/* The fake clock stands still until advanced; the real one comes back. */
UNIT_TEST(fake_clock_set_and_advanced)
{
    cn_clock_fake(5000, 70);
    CHECK_EQ(cn_clock_wall_ms(), 5000);
    CHECK_EQ(cn_clock_mono_ms(), 70);
    CHECK_EQ(cn_clock_mono_us(), 70000);
    cn_clock_advance_ms(30);
    CHECK_EQ(cn_clock_wall_ms(), 5030);
    CHECK_EQ(cn_clock_mono_ms(), 100);
    cn_clock_real();
    CHECK(cn_clock_wall_ms() > 1600000000000);
}

/* A seeded fake gives the same bytes again; the real generator differs. */
UNIT_TEST(fake_rand_repeatable)
{
    uint8_t a[24], b[24], c[24];
    cn_rand_fake(42);
    CHECK_EQ(cn_rand_bytes(a, sizeof a), 0);
    cn_rand_fake(42);
    CHECK_EQ(cn_rand_bytes(b, sizeof b), 0);
    CHECK(memcmp(a, b, sizeof a) == 0);
    cn_rand_real();
    CHECK_EQ(cn_rand_bytes(c, sizeof c), 0);
    CHECK(memcmp(a, c, sizeof a) != 0);
}

/* The published FNV-1a 32-bit test vectors; both forms agree. */
UNIT_TEST(fnv1a_known_values)
{
    CHECK_EQ(cn_fnv1a("", 0), 0x811c9dc5u);
    CHECK_EQ(cn_fnv1a("a", 1), 0xe40c292cu);
    CHECK_EQ(cn_fnv1a("foobar", 6), 0xbf9cf968u);
    CHECK_EQ(cn_fnv1a_str("foobar"), 0xbf9cf968u);
    CHECK_EQ(cn_fnv1a_str(""), 0x811c9dc5u);
}

UNIT_MAIN(varint_round_trip, varint_known_bytes, reader_stops_at_first_error,
          overlong_uvarint_rejected, huge_array_count_rejected,
          strings_null_and_compact, tags_skipped, arena_zeroed_and_aligned,
          failpoint_every_nth_hit, failpoint_delay_sleeps_and_goes_on,
          fake_clock_set_and_advanced, fake_rand_repeatable,
          fnv1a_known_values)
