/* test_log_trunc.c - what replication asks of the log: appends at the
 * leader's offsets (cn_log_append_at), truncation to an offset
 * (cn_log_truncate_to) within the active segment and across segments,
 * with a sync in flight, across a reopen, and a restart at another offset
 * (cn_log_reset_at). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/crc32c.h"
#include "base/err.h"
#include "base/wr.h"
#include "log/log.h"
#include "unit.h"

static int64_t fake_now = 1000000;
static int64_t fake_clock(void)
{
    return fake_now;
}

static void cfg_small(struct cn_log_config *cfg)
{
    cn_log_config_default(cfg);
    cfg->segment_bytes = 1024;
    cfg->index_interval_bytes = 128;
    cfg->now_ms = fake_clock;
}

/* A valid magic-2 batch at base of nrec records, timestamps ts.. and
 * 40-byte values, replacing w's contents. */
static void make_batch(struct cn_wr *w, int64_t base, int nrec, int64_t ts)
{
    cn_wr_reset(w);
    cn_wr_i64(w, base);
    size_t len_slot = cn_wr_reserve(w, 4);
    cn_wr_i32(w, 3); /* leader epoch */
    cn_wr_i8(w, 2);
    size_t crc_slot = cn_wr_reserve(w, 4);
    cn_wr_i16(w, 0);
    cn_wr_i32(w, nrec - 1);
    cn_wr_i64(w, ts);
    cn_wr_i64(w, ts + nrec - 1);
    cn_wr_i64(w, -1);
    cn_wr_i16(w, -1);
    cn_wr_i32(w, -1);
    cn_wr_i32(w, nrec);
    for (int i = 0; i < nrec; i++) {
        size_t vlen = 40;
        int32_t body = (int32_t)(1 + cn_varint_size(i) + cn_varint_size(i) +
                                 cn_varint_size(-1) +
                                 cn_varint_size((int32_t)vlen) + vlen +
                                 cn_varint_size(0));
        cn_wr_varint(w, body);
        cn_wr_i8(w, 0);
        cn_wr_varlong(w, i);
        cn_wr_varint(w, i);
        cn_wr_varint(w, -1);
        cn_wr_varint(w, (int32_t)vlen);
        for (size_t k = 0; k < vlen; k++)
            cn_wr_i8(w, (int8_t)('a' + (i + k) % 26));
        cn_wr_varint(w, 0);
    }
    cn_wr_patch_i32(w, len_slot, (int32_t)(w->len - 12));
    cn_wr_patch_u32(w, crc_slot, cn_crc32c(0, w->buf + 21, w->len - 21));
}

/* n batches of 3 records through cn_log_append: offsets 3i..3i+2 from
 * the log end, timestamps 1000 * (i + 1). */
static void fill(struct cn_log *log, int n)
{
    struct cn_wr w;
    cn_wr_init(&w, 256);
    int64_t first = cn_log_end_offset(log);
    for (int i = 0; i < n; i++) {
        int64_t base = -1;
        make_batch(&w, 0, 3, 1000 * (int64_t)(i + 1));
        CHECK_EQ(cn_log_append(log, w.buf, w.len, &base), 0);
        CHECK_EQ(base, first + 3 * i);
    }
    cn_wr_fini(&w);
}

static int64_t be64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return (int64_t)v;
}

/* The base offsets of every batch readable from `from`, in order. */
static int read_bases(struct cn_log *log, int64_t from, int64_t *bases,
                      int max)
{
    struct cn_wr w;
    cn_wr_init(&w, 4096);
    size_t got = 0;
    CHECK_EQ(cn_log_read(log, from, INT64_MAX, SIZE_MAX, true, &w, &got), 0);
    int n = 0;
    for (size_t pos = 0; pos + 12 <= got && n < max;) {
        bases[n++] = be64(w.buf + pos);
        uint32_t len = (uint32_t)w.buf[pos + 8] << 24 |
                       (uint32_t)w.buf[pos + 9] << 16 |
                       (uint32_t)w.buf[pos + 10] << 8 | w.buf[pos + 11];
        pos += 12 + len;
    }
    cn_wr_fini(&w);
    return n;
}

static int count_segments(const char *dir)
{
    int n = 0;
    DIR *d = opendir(dir);
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        size_t l = strlen(de->d_name);
        if (l == 24 && strcmp(de->d_name + 20, ".log") == 0)
            n++;
    }
    closedir(d);
    return n;
}

UNIT_TEST(append_at_keeps_offsets)
{
    char *dir = unit_tmpdir("logtrunc");
    struct cn_log_config cfg;
    cfg_small(&cfg);
    struct cn_log *log;
    CHECK_EQ(cn_log_open(dir, &cfg, &log), 0);
    struct cn_wr w;
    cn_wr_init(&w, 256);
    make_batch(&w, 0, 3, 1000);
    CHECK_EQ(cn_log_append_at(log, w.buf, w.len), 0);
    CHECK_EQ(cn_log_end_offset(log), 3);
    /* A gap (a compacted leader's log), then the batch ends the log. */
    make_batch(&w, 10, 2, 2000);
    CHECK_EQ(cn_log_append_at(log, w.buf, w.len), 0);
    CHECK_EQ(cn_log_end_offset(log), 12);
    /* Below the end: refused, nothing written. */
    make_batch(&w, 11, 1, 3000);
    CHECK_EQ(cn_log_append_at(log, w.buf, w.len), CN_ERANGE);
    CHECK_EQ(cn_log_end_offset(log), 12);
    /* Enough to roll: the gaps stay inside segments. */
    for (int i = 0; i < 20; i++) {
        make_batch(&w, 12 + 5 * i, 3, 4000 + i);
        CHECK_EQ(cn_log_append_at(log, w.buf, w.len), 0);
    }
    CHECK_EQ(cn_log_end_offset(log), 12 + 5 * 19 + 3);
    CHECK(count_segments(dir) > 1);
    int64_t bases[64];
    int n = read_bases(log, 0, bases, 64);
    CHECK_EQ(n, 22);
    CHECK_EQ(bases[1], 10);
    CHECK_EQ(bases[21], 12 + 5 * 19);
    /* The offsets a consumer reads in a gap start at the next batch. */
    CHECK_EQ(read_bases(log, 5, bases, 64), 21);
    CHECK_EQ(bases[0], 10);
    cn_log_close(log);
    /* And they come back as written. */
    CHECK_EQ(cn_log_open(dir, &cfg, &log), 0);
    CHECK_EQ(cn_log_end_offset(log), 12 + 5 * 19 + 3);
    CHECK_EQ(read_bases(log, 0, bases, 64), 22);
    cn_log_close(log);
    cn_wr_fini(&w);
    unit_rmtree(dir);
    free(dir);
}

UNIT_TEST(truncate_in_active_segment)
{
    char *dir = unit_tmpdir("logtrunc");
    struct cn_log_config cfg;
    cn_log_config_default(&cfg);
    cfg.index_interval_bytes = 128;
    struct cn_log *log;
    CHECK_EQ(cn_log_open(dir, &cfg, &log), 0);
    fill(log, 10);                            /* offsets 0..29, one segment */
    CHECK_EQ(cn_log_truncate_to(log, 30), 0); /* at the end: nothing */
    CHECK_EQ(cn_log_end_offset(log), 30);
    CHECK_EQ(cn_log_truncate_to(log, 31), CN_ERANGE);
    CHECK_EQ(cn_log_truncate_to(log, 15), 0);
    CHECK_EQ(cn_log_end_offset(log), 15);
    int64_t ts, off;
    cn_log_max_timestamp(log, &ts, &off);
    CHECK_EQ(ts, 5002); /* batch 4, offsets 12..14 */
    CHECK_EQ(off, 14);
    /* Inside a batch (16 is in 15..17): the whole batch goes. */
    CHECK_EQ(cn_log_truncate_to(log, 13), 0);
    CHECK_EQ(cn_log_end_offset(log), 12);
    int64_t bases[64];
    CHECK_EQ(read_bases(log, 0, bases, 64), 4);
    /* Appends go on from the new end. */
    fill(log, 2);
    CHECK_EQ(cn_log_end_offset(log), 18);
    CHECK_EQ(read_bases(log, 0, bases, 64), 6);
    CHECK_EQ(bases[5], 15);
    cn_log_close(log);
    CHECK_EQ(cn_log_open(dir, &cfg, &log), 0);
    CHECK_EQ(cn_log_end_offset(log), 18);
    CHECK_EQ(read_bases(log, 0, bases, 64), 6);
    cn_log_close(log);
    unit_rmtree(dir);
    free(dir);
}

UNIT_TEST(truncate_across_segments)
{
    char *dir = unit_tmpdir("logtrunc");
    struct cn_log_config cfg;
    cfg_small(&cfg);
    struct cn_log *log;
    CHECK_EQ(cn_log_open(dir, &cfg, &log), 0);
    fill(log, 40); /* 0..119 over several segments */
    int before = count_segments(dir);
    CHECK(before >= 4);
    /* Exactly at a segment's base: that segment is emptied and stays. */
    int64_t active = cn_log_active_base(log);
    CHECK(active > 0);
    CHECK_EQ(cn_log_truncate_to(log, active), 0);
    CHECK_EQ(cn_log_end_offset(log), active);
    CHECK_EQ(cn_log_active_base(log), active); /* emptied, kept */
    CHECK_EQ(count_segments(dir), before);
    /* Into the first segment: every later one goes. */
    CHECK_EQ(cn_log_truncate_to(log, 9), 0);
    CHECK_EQ(cn_log_end_offset(log), 9);
    CHECK_EQ(count_segments(dir), 1);
    CHECK_EQ(cn_log_active_base(log), 0);
    int64_t bases[64];
    CHECK_EQ(read_bases(log, 0, bases, 64), 3);
    /* Appending rolls again, at the new offsets. */
    fill(log, 30);
    CHECK_EQ(cn_log_end_offset(log), 99);
    CHECK(count_segments(dir) > 1);
    CHECK_EQ(read_bases(log, 0, bases, 64), 33);
    cn_log_close(log);
    CHECK_EQ(cn_log_open(dir, &cfg, &log), 0);
    CHECK_EQ(cn_log_end_offset(log), 99);
    CHECK_EQ(read_bases(log, 0, bases, 64), 33);
    cn_log_close(log);
    unit_rmtree(dir);
    free(dir);
}

/* A crash right after a truncation (no clean close) must not bring the
 * cut batches back: recovery trusts nothing at or past the cut. */
UNIT_TEST(truncate_then_crash)
{
    char *dir = unit_tmpdir("logtrunc");
    struct cn_log_config cfg;
    cfg_small(&cfg);
    struct cn_log *log;
    CHECK_EQ(cn_log_open(dir, &cfg, &log), 0);
    fill(log, 40);
    struct cn_log_sync *s;
    while ((s = cn_log_sync_begin(log)) != NULL)
        CHECK_EQ(cn_log_sync_end(log, s, cn_log_sync_run(s)), 0);
    CHECK_EQ(cn_log_synced_offset(log), 120);
    CHECK_EQ(cn_log_truncate_to(log, 30), 0);
    CHECK_EQ(cn_log_synced_offset(log), 30);
    int64_t end = cn_log_end_offset(log);
    CHECK(end <= 30);
    /* Reopen without closing (the files are as a kill would leave them):
     * open a second handle on the same directory. */
    struct cn_log *again;
    CHECK_EQ(cn_log_open(dir, &cfg, &again), 0);
    CHECK_EQ(cn_log_end_offset(again), end);
    cn_log_close(again);
    cn_log_close(log);
    unit_rmtree(dir);
    free(dir);
}

/* A sync begun before a truncation ends after it: the synced offset must
 * not claim the new batches that took the cut offsets. */
UNIT_TEST(truncate_during_sync)
{
    char *dir = unit_tmpdir("logtrunc");
    struct cn_log_config cfg;
    cfg_small(&cfg);
    struct cn_log *log;
    CHECK_EQ(cn_log_open(dir, &cfg, &log), 0);
    fill(log, 20); /* 0..59, synced below 0 only */
    struct cn_log_sync *s = cn_log_sync_begin(log);
    CHECK(s != NULL);
    int rc = cn_log_sync_run(s); /* the worker's part */
    CHECK_EQ(cn_log_truncate_to(log, 12), 0);
    fill(log, 5); /* 12..26, not synced */
    CHECK_EQ(cn_log_sync_end(log, s, rc), 0);
    CHECK_EQ(cn_log_synced_offset(log), 12);
    /* The next sync covers the rest. */
    s = cn_log_sync_begin(log);
    CHECK(s != NULL);
    CHECK_EQ(cn_log_sync_end(log, s, cn_log_sync_run(s)), 0);
    CHECK_EQ(cn_log_synced_offset(log), 27);
    cn_log_close(log);
    unit_rmtree(dir);
    free(dir);
}

UNIT_TEST(truncate_below_start_refused)
{
    char *dir = unit_tmpdir("logtrunc");
    struct cn_log_config cfg;
    cfg_small(&cfg);
    struct cn_log *log;
    CHECK_EQ(cn_log_open(dir, &cfg, &log), 0);
    fill(log, 10);
    CHECK_EQ(cn_log_delete_records(log, 9), 0);
    CHECK_EQ(cn_log_truncate_to(log, 8), CN_ERANGE);
    /* At the start inside a batch (start 10 is in 9..11): nothing at or
     * above the start is left, so the log restarts at it. */
    CHECK_EQ(cn_log_delete_records(log, 10), 0);
    CHECK_EQ(cn_log_truncate_to(log, 10), 0);
    CHECK_EQ(cn_log_start_offset(log), 10);
    CHECK_EQ(cn_log_end_offset(log), 10);
    fill(log, 1);
    CHECK_EQ(cn_log_end_offset(log), 13);
    cn_log_close(log);
    unit_rmtree(dir);
    free(dir);
}

UNIT_TEST(reset_at)
{
    char *dir = unit_tmpdir("logtrunc");
    struct cn_log_config cfg;
    cfg_small(&cfg);
    struct cn_log *log;
    CHECK_EQ(cn_log_open(dir, &cfg, &log), 0);
    fill(log, 40);
    struct cn_log_sync *s = cn_log_sync_begin(log);
    CHECK(s != NULL);
    int rc = cn_log_sync_run(s);
    /* Behind the leader's start: the whole log restarts there. */
    CHECK_EQ(cn_log_reset_at(log, 500), 0);
    CHECK_EQ(cn_log_sync_end(log, s, rc), 0);
    CHECK_EQ(cn_log_start_offset(log), 500);
    CHECK_EQ(cn_log_end_offset(log), 500);
    CHECK_EQ(cn_log_synced_offset(log), 500);
    CHECK_EQ(count_segments(dir), 1);
    int64_t ts, off;
    cn_log_max_timestamp(log, &ts, &off);
    CHECK_EQ(ts, -1);
    struct cn_wr w;
    cn_wr_init(&w, 256);
    make_batch(&w, 500, 3, 1000);
    CHECK_EQ(cn_log_append_at(log, w.buf, w.len), 0);
    cn_wr_fini(&w);
    cn_log_close(log);
    CHECK_EQ(cn_log_open(dir, &cfg, &log), 0);
    CHECK_EQ(cn_log_start_offset(log), 500);
    CHECK_EQ(cn_log_end_offset(log), 503);
    /* Back below where it was is allowed too. */
    CHECK_EQ(cn_log_reset_at(log, 7), 0);
    CHECK_EQ(cn_log_end_offset(log), 7);
    cn_log_close(log);
    CHECK_EQ(cn_log_open(dir, &cfg, &log), 0);
    CHECK_EQ(cn_log_start_offset(log), 7);
    CHECK_EQ(cn_log_end_offset(log), 7);
    CHECK_EQ(cn_log_reset_at(log, -1), CN_EINVAL);
    cn_log_close(log);
    unit_rmtree(dir);
    free(dir);
}

UNIT_MAIN(append_at_keeps_offsets, truncate_in_active_segment,
          truncate_across_segments, truncate_then_crash, truncate_during_sync,
          truncate_below_start_refused, reset_at)
