/* test_log.c - partition log: append/read, roll, retention, recovery, I/O
 * faults.  Crashes are simulated by copying the directory while the log is
 * open (the "crash image": what a kill -9 would leave, since all writes go
 * straight to files) and opening the copy. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/crc32c.h"
#include "base/err.h"
#include "base/failpoint.h"
#include "base/say.h"
#include "base/wr.h"
#include "log/file.h"
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

/* A valid magic-2 batch of nrec records with timestamps ts, ts+1, ... and
 * vlen-byte values; the log never looks inside the records, but they are
 * well formed anyway. */
static void make_batch(struct cn_wr *w, int nrec, int64_t ts, size_t vlen)
{
    size_t start = w->len;
    cn_wr_i64(w, 0);                /* base offset */
    size_t len_slot = cn_wr_reserve(w, 4);
    cn_wr_i32(w, -1);               /* leader epoch */
    cn_wr_i8(w, 2);                 /* magic */
    size_t crc_slot = cn_wr_reserve(w, 4);
    cn_wr_i16(w, 0);                /* attributes */
    cn_wr_i32(w, nrec - 1);         /* last offset delta */
    cn_wr_i64(w, ts);               /* base timestamp */
    cn_wr_i64(w, ts + nrec - 1);    /* max timestamp */
    cn_wr_i64(w, -1);               /* producer id */
    cn_wr_i16(w, -1);
    cn_wr_i32(w, -1);
    cn_wr_i32(w, nrec);
    for (int i = 0; i < nrec; i++) {
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
    cn_wr_patch_i32(w, len_slot, (int32_t)(w->len - start - 12));
    cn_wr_patch_u32(w, crc_slot,
                    cn_crc32c(0, w->buf + start + 21, w->len - start - 21));
}

static int append_one(struct cn_log *log, int nrec, int64_t ts, size_t vlen,
                      int64_t *base)
{
    struct cn_wr w;
    cn_wr_init(&w, 256);
    make_batch(&w, nrec, ts, vlen);
    int err = cn_log_append(log, w.buf, w.len, base);
    cn_wr_fini(&w);
    return err;
}

static int64_t be64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return (int64_t)v;
}

static int32_t be32(const uint8_t *p)
{
    return (int32_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
                     (uint32_t)p[2] << 8 | p[3]);
}

/* Walks batches in buf; checks contiguity from first and CRCs; returns the
 * count and the next offset after the last batch. */
static int walk(const uint8_t *buf, size_t len, int64_t first, int64_t *next)
{
    size_t pos = 0;
    int n = 0;
    int64_t expect = first;
    while (pos < len) {
        CHECK(len - pos >= 61);
        if (len - pos < 61)
            break;
        int64_t base = be64(buf + pos);
        size_t total = (size_t)be32(buf + pos + 8) + 12;
        CHECK(pos + total <= len);
        if (pos + total > len)
            break;
        if (expect >= 0)
            CHECK_EQ(base, expect);
        CHECK_EQ((uint32_t)be32(buf + pos + 17),
                 cn_crc32c(0, buf + pos + 21, total - 21));
        expect = base + be32(buf + pos + 23) + 1;
        pos += total;
        n++;
    }
    if (next)
        *next = expect;
    return n;
}

/* Fills a log with n batches of 3 records (offsets 3i..3i+2), timestamps
 * 1000*(i+1). */
static void fill(struct cn_log *log, int n)
{
    for (int i = 0; i < n; i++) {
        int64_t base = -1;
        CHECK_EQ(append_one(log, 3, 1000 * (int64_t)(i + 1), 40, &base), 0);
        CHECK_EQ(base, 3 * i);
    }
}

static char *path_in(const char *dir, const char *name)
{
    char *p;
    if (asprintf(&p, "%s/%s", dir, name) < 0)
        abort();
    return p;
}

static char *seg_file(const char *dir, int64_t base, const char *ext)
{
    char name[64];
    snprintf(name, sizeof name, "%020lld.%s", (long long)base, ext);
    return path_in(dir, name);
}

/* Copies every file of src into a fresh dir: what kill -9 leaves. */
static char *crash_image(const char *src)
{
    char *dst = unit_tmpdir("logcrash");
    DIR *d = opendir(src);
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        char *a = path_in(src, de->d_name), *b = path_in(dst, de->d_name);
        int in = open(a, O_RDONLY), out = open(b, O_WRONLY | O_CREAT, 0644);
        char buf[4096];
        ssize_t r;
        while ((r = read(in, buf, sizeof buf)) > 0)
            CHECK(write(out, buf, (size_t)r) == r);
        close(in);
        close(out);
        free(a);
        free(b);
    }
    closedir(d);
    return dst;
}

static int64_t file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (int64_t)st.st_size : -1;
}

static bool exists(const char *path)
{
    return access(path, F_OK) == 0;
}

static size_t read_all(struct cn_log *log, int64_t from, struct cn_wr *w)
{
    size_t n = 0;
    cn_wr_reset(w);
    CHECK_EQ(cn_log_read(log, from, INT64_MAX, SIZE_MAX, true, w, &n), 0);
    CHECK_EQ(n, w->len);
    return n;
}

/* Segment bases, in order, from the directory. */
static int list_bases(const char *dir, int64_t *bases, int max)
{
    int n = 0;
    DIR *d = opendir(dir);
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        size_t l = strlen(de->d_name);
        if (l == 24 && strcmp(de->d_name + 20, ".log") == 0 && n < max)
            bases[n++] = strtoll(de->d_name, NULL, 10);
    }
    closedir(d);
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            if (bases[j] < bases[i]) {
                int64_t t = bases[i];
                bases[i] = bases[j];
                bases[j] = t;
            }
    return n;
}

UNIT_TEST(test_round_trip_segments)
{
    char *dir = unit_tmpdir("log");
    struct cn_log_config cfg;
    cfg_small(&cfg);
    struct cn_log *log;
    char *sub = path_in(dir, "t-0");
    CHECK_EQ(cn_log_open(sub, &cfg, &log), 0);
    CHECK_EQ(cn_log_end_offset(log), 0);
    fill(log, 40);
    CHECK_EQ(cn_log_end_offset(log), 120);
    CHECK_EQ(cn_log_start_offset(log), 0);
    struct cn_log_stats st;
    cn_log_stats(log, &st);
    CHECK(st.segments >= 5);
    struct cn_wr w;
    cn_wr_init(&w, 0);
    size_t n = read_all(log, 0, &w);
    CHECK_EQ(n, st.bytes);
    int64_t next;
    CHECK_EQ(walk(w.buf, w.len, 0, &next), 40);
    CHECK_EQ(next, 120);
    /* Segment files are each a whole number of batches and chain. */
    int64_t bases[64];
    int nb = list_bases(sub, bases, 64);
    CHECK_EQ(nb, st.segments);
    for (int i = 0; i < nb; i++) {
        char *p = seg_file(sub, bases[i], "log");
        CHECK(file_size(p) <= 1024);
        free(p);
    }
    cn_wr_fini(&w);
    cn_log_close(log);
    unit_rmtree(dir);
    free(sub);
    free(dir);
}

UNIT_TEST(test_read_bounds)
{
    char *dir = unit_tmpdir("log");
    struct cn_log_config cfg;
    cfg_small(&cfg);
    struct cn_log *log;
    CHECK_EQ(cn_log_open(dir, &cfg, &log), 0);
    fill(log, 10);
    struct cn_wr w;
    cn_wr_init(&w, 0);
    size_t n, one = read_all(log, 0, &w) / 10; /* all batches same size */
    int64_t next;

    /* max_offset is exclusive on batch base offsets. */
    cn_wr_reset(&w);
    CHECK_EQ(cn_log_read(log, 0, 9, SIZE_MAX, true, &w, &n), 0);
    CHECK_EQ(walk(w.buf, w.len, 0, &next), 3);
    cn_wr_reset(&w);
    CHECK_EQ(cn_log_read(log, 0, 10, SIZE_MAX, true, &w, &n), 0);
    CHECK_EQ(walk(w.buf, w.len, 0, &next), 4);
    cn_wr_reset(&w);
    CHECK_EQ(cn_log_read(log, 3, 3, SIZE_MAX, true, &w, &n), 0);
    CHECK_EQ(n, 0);

    /* max_bytes: whole batches only; min_one returns one anyway. */
    cn_wr_reset(&w);
    CHECK_EQ(cn_log_read(log, 0, INT64_MAX, 2 * one + 5, false, &w, &n), 0);
    CHECK_EQ(n, 2 * one);
    cn_wr_reset(&w);
    CHECK_EQ(cn_log_read(log, 0, INT64_MAX, 10, false, &w, &n), 0);
    CHECK_EQ(n, 0);
    cn_wr_reset(&w);
    CHECK_EQ(cn_log_read(log, 0, INT64_MAX, 10, true, &w, &n), 0);
    CHECK_EQ(n, one);

    /* At the end: nothing; outside the log: CN_ERANGE. */
    cn_wr_reset(&w);
    CHECK_EQ(cn_log_read(log, 30, INT64_MAX, SIZE_MAX, true, &w, &n), 0);
    CHECK_EQ(n, 0);
    CHECK_EQ(cn_log_read(log, 31, INT64_MAX, SIZE_MAX, true, &w, &n),
             CN_ERANGE);
    CHECK_EQ(cn_log_read(log, -1, INT64_MAX, SIZE_MAX, true, &w, &n),
             CN_ERANGE);
    cn_wr_fini(&w);
    cn_log_close(log);
    unit_rmtree(dir);
    free(dir);
}

/* Every offset, including mid-batch ones, returns its containing batch. */
static void check_every_offset(struct cn_log *log)
{
    struct cn_wr w;
    cn_wr_init(&w, 0);
    for (int64_t off = cn_log_start_offset(log); off < cn_log_end_offset(log);
         off++) {
        size_t n;
        cn_wr_reset(&w);
        CHECK_EQ(cn_log_read(log, off, INT64_MAX, 1, true, &w, &n), 0);
        CHECK(n >= 61);
        if (n < 61)
            continue;
        int64_t base = be64(w.buf), last = base + be32(w.buf + 23);
        CHECK(base <= off && off <= last);
        if (!(base <= off && off <= last))
            fprintf(stderr, "  offset %lld got batch %lld..%lld\n",
                    (long long)off, (long long)base, (long long)last);
    }
    cn_wr_fini(&w);
}

UNIT_TEST(test_index_lookup)
{
    char *dir = unit_tmpdir("log");
    struct cn_log_config cfg;
    cfg_small(&cfg);
    cfg.segment_bytes = 8192;
    cfg.index_interval_bytes = 200;
    struct cn_log *log;
    CHECK_EQ(cn_log_open(dir, &cfg, &log), 0);
    for (int i = 0; i < 60; i++)
        CHECK_EQ(append_one(log, 1 + i % 5, 1000 + i, 10 + (size_t)i * 3,
                            NULL), 0);
    check_every_offset(log);
    char *idx = seg_file(dir, 0, "index");
    CHECK(file_size(idx) >= 8 * 5);
    CHECK_EQ(file_size(idx) % 8, 0);
    free(idx);
    cn_log_close(log);
    /* Same after a clean reopen (indexes loaded, not rebuilt). */
    CHECK_EQ(cn_log_open(dir, &cfg, &log), 0);
    struct cn_log_stats st;
    cn_log_stats(log, &st);
    CHECK_EQ(st.recovery_scanned_bytes, 0);
    check_every_offset(log);
    cn_log_close(log);
    unit_rmtree(dir);
    free(dir);
}

UNIT_TEST(test_roll_by_time)
{
    char *dir = unit_tmpdir("log");
    struct cn_log_config cfg;
    cfg_small(&cfg);
    cfg.segment_bytes = 1 << 20;
    cfg.segment_ms = 1000;
    struct cn_log *log;
    CHECK_EQ(cn_log_open(dir, &cfg, &log), 0);
    CHECK_EQ(append_one(log, 1, fake_now, 10, NULL), 0);
    fake_now += 500;
    CHECK_EQ(append_one(log, 1, fake_now, 10, NULL), 0);
    struct cn_log_stats st;
    cn_log_stats(log, &st);
    CHECK_EQ(st.segments, 1);
    fake_now += 600;
    CHECK_EQ(append_one(log, 1, fake_now, 10, NULL), 0);
    cn_log_stats(log, &st);
    CHECK_EQ(st.segments, 2);
    char *p = seg_file(dir, 2, "log");
    CHECK(exists(p));
    free(p);
    cn_log_close(log);
    unit_rmtree(dir);
    free(dir);
}

UNIT_TEST(test_retention_bytes)
{
    char *dir = unit_tmpdir("log");
    struct cn_log_config cfg;
    cfg_small(&cfg);
    cfg.retention_ms = -1;
    struct cn_log *log;
    CHECK_EQ(cn_log_open(dir, &cfg, &log), 0);
    fill(log, 40);
    struct cn_log_stats before, after;
    cn_log_stats(log, &before);
    CHECK_EQ(cn_log_enforce_retention(log, fake_now), 0);
    cfg.retention_bytes = 2500;
    cn_log_set_config(log, &cfg);
    int del = cn_log_enforce_retention(log, fake_now);
    CHECK(del > 0);
    cn_log_stats(log, &after);
    CHECK_EQ(after.segments, before.segments - del);
    /* Kafka keeps at least retention.bytes: a segment goes only if the
     * rest still holds that much. */
    CHECK(after.bytes >= 2500);
    CHECK(after.bytes < 2500 + 1024);
    int64_t start = cn_log_start_offset(log);
    CHECK(start > 0);
    CHECK_EQ(start % 3, 0);
    struct cn_wr w;
    cn_wr_init(&w, 0);
    size_t n;
    CHECK_EQ(cn_log_read(log, start - 1, INT64_MAX, SIZE_MAX, true, &w, &n),
             CN_ERANGE);
    int64_t next;
    read_all(log, start, &w);
    walk(w.buf, w.len, start, &next);
    CHECK_EQ(next, 120);
    int64_t bases[64];
    CHECK_EQ(list_bases(dir, bases, 64), after.segments);
    CHECK_EQ(bases[0], start);
    cn_log_close(log);
    /* The start offset survives a reopen. */
    CHECK_EQ(cn_log_open(dir, &cfg, &log), 0);
    CHECK_EQ(cn_log_start_offset(log), start);
    cn_wr_fini(&w);
    cn_log_close(log);
    unit_rmtree(dir);
    free(dir);
}

UNIT_TEST(test_retention_time)
{
    char *dir = unit_tmpdir("log");
    struct cn_log_config cfg;
    cfg_small(&cfg);
    cfg.retention_ms = 10000;
    struct cn_log *log;
    CHECK_EQ(cn_log_open(dir, &cfg, &log), 0);
    fill(log, 40); /* timestamps 1000 .. 40000 */
    struct cn_log_stats st;
    cn_log_stats(log, &st);
    int segs = st.segments;
    /* At now = 25000 segments whose max timestamp < 15000 go. */
    int del = cn_log_enforce_retention(log, 25000);
    CHECK(del > 0 && del < segs - 1);
    int64_t start = cn_log_start_offset(log);
    int64_t off, ts;
    CHECK_EQ(cn_log_offset_for_time(log, 0, &off, &ts), 0);
    CHECK_EQ(off, start);
    CHECK_EQ(ts, 11002); /* segments with max 5002 and 10002 went */
    /* Far in the future: everything but the active segment. */
    del = cn_log_enforce_retention(log, 1000000);
    cn_log_stats(log, &st);
    CHECK_EQ(st.segments, 1);
    CHECK_EQ(cn_log_end_offset(log), 120);
    cn_log_close(log);
    unit_rmtree(dir);
    free(dir);
}

UNIT_TEST(test_delete_records)
{
    char *dir = unit_tmpdir("log");
    struct cn_log_config cfg;
    cfg_small(&cfg);
    struct cn_log *log;
    CHECK_EQ(cn_log_open(dir, &cfg, &log), 0);
    fill(log, 40);
    struct cn_log_stats before, after;
    cn_log_stats(log, &before);
    CHECK_EQ(cn_log_delete_records(log, 121), CN_ERANGE);
    CHECK_EQ(cn_log_delete_records(log, 50), 0);
    CHECK_EQ(cn_log_start_offset(log), 50);
    cn_log_stats(log, &after);
    CHECK(after.segments < before.segments);
    int64_t bases[64];
    int nb = list_bases(dir, bases, 64);
    CHECK(bases[0] <= 50);
    CHECK(nb < 2 || bases[1] > 50);
    /* Reading at the start returns the batch containing it (48..50). */
    struct cn_wr w;
    cn_wr_init(&w, 0);
    size_t n;
    CHECK_EQ(cn_log_read(log, 50, INT64_MAX, 1, true, &w, &n), 0);
    CHECK_EQ(be64(w.buf), 48);
    CHECK_EQ(cn_log_read(log, 49, INT64_MAX, 1, true, &w, &n), CN_ERANGE);
    CHECK_EQ(cn_log_delete_records(log, 10), 0); /* lower: no-op */
    CHECK_EQ(cn_log_start_offset(log), 50);
    /* Persisted at once: a crash image keeps it. */
    char *img = crash_image(dir);
    struct cn_log *log2;
    CHECK_EQ(cn_log_open(img, &cfg, &log2), 0);
    CHECK_EQ(cn_log_start_offset(log2), 50);
    CHECK_EQ(cn_log_end_offset(log2), 120);
    cn_log_close(log2);
    /* Up to the end: every old segment goes. */
    CHECK_EQ(cn_log_delete_records(log, 120), 0);
    cn_log_stats(log, &after);
    CHECK_EQ(after.segments, 1);
    CHECK_EQ(after.bytes, 0);
    CHECK_EQ(cn_log_start_offset(log), 120);
    CHECK_EQ(append_one(log, 1, 5, 5, NULL), 0);
    CHECK_EQ(cn_log_end_offset(log), 121);
    cn_log_close(log);
    CHECK_EQ(cn_log_open(dir, &cfg, &log), 0);
    CHECK_EQ(cn_log_start_offset(log), 120);
    CHECK_EQ(cn_log_end_offset(log), 121);
    cn_wr_fini(&w);
    cn_log_close(log);
    unit_rmtree(img);
    unit_rmtree(dir);
    free(img);
    free(dir);
}

UNIT_TEST(test_clean_reopen_scans_nothing)
{
    char *dir = unit_tmpdir("log");
    struct cn_log_config cfg;
    cfg_small(&cfg);
    struct cn_log *log;
    CHECK_EQ(cn_log_open(dir, &cfg, &log), 0);
    fill(log, 30);
    struct cn_wr a, b;
    cn_wr_init(&a, 0);
    cn_wr_init(&b, 0);
    read_all(log, 0, &a);
    int64_t ts, off;
    cn_log_max_timestamp(log, &ts, &off);
    CHECK_EQ(ts, 30002);
    CHECK_EQ(off, 89);
    cn_log_close(log);
    CHECK_EQ(cn_log_open(dir, &cfg, &log), 0);
    struct cn_log_stats st;
    cn_log_stats(log, &st);
    CHECK_EQ(st.recovery_scanned_bytes, 0);
    CHECK_EQ(st.recovery_truncated_bytes, 0);
    CHECK_EQ(cn_log_end_offset(log), 90);
    CHECK_EQ(cn_log_synced_offset(log), 90);
    read_all(log, 0, &b);
    CHECK_EQ(a.len, b.len);
    CHECK(memcmp(a.buf, b.buf, a.len) == 0);
    cn_log_max_timestamp(log, &ts, &off);
    CHECK_EQ(ts, 30002);
    CHECK_EQ(off, 89);
    /* Appends continue where they left off. */
    fill(log, 0);
    int64_t base;
    CHECK_EQ(append_one(log, 2, 99999, 5, &base), 0);
    CHECK_EQ(base, 90);
    cn_log_close(log);
    cn_wr_fini(&a);
    cn_wr_fini(&b);
    unit_rmtree(dir);
    free(dir);
}

UNIT_TEST(test_offset_for_time)
{
    char *dir = unit_tmpdir("log");
    struct cn_log_config cfg;
    cfg_small(&cfg);
    struct cn_log *log;
    CHECK_EQ(cn_log_open(dir, &cfg, &log), 0);
    int64_t off, ts;
    CHECK_EQ(cn_log_offset_for_time(log, 0, &off, &ts), 0);
    CHECK_EQ(off, -1);
    cn_log_max_timestamp(log, &ts, &off);
    CHECK_EQ(ts, -1);
    fill(log, 30); /* batch i: offsets 3i.., max ts 1000(i+1)+2 */
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < 30; i++) {
            CHECK_EQ(cn_log_offset_for_time(log, 1000 * (i + 1) + 2, &off,
                                            &ts), 0);
            CHECK_EQ(off, 3 * i);
            CHECK_EQ(ts, 1000 * (i + 1) + 2);
            CHECK_EQ(cn_log_offset_for_time(log, 1000 * (i + 1) + 3, &off,
                                            &ts), 0);
            CHECK_EQ(off, i == 29 ? -1 : 3 * (i + 1));
        }
        cn_log_close(log);
        CHECK_EQ(cn_log_open(dir, &cfg, &log), 0);
    }
    cn_log_close(log);
    unit_rmtree(dir);
    free(dir);
}

/* Opens a crash image of a 20-batch log after damage() and checks the end
 * offset and what recovery cut. */
static void torn_case(void (*damage)(const char *dir, int64_t last_base),
                      int64_t want_end, bool want_cut)
{
    char *dir = unit_tmpdir("log");
    struct cn_log_config cfg;
    cfg_small(&cfg);
    cfg.segment_bytes = 1 << 20;
    struct cn_log *log;
    CHECK_EQ(cn_log_open(dir, &cfg, &log), 0);
    fill(log, 20);
    char *img = crash_image(dir);
    cn_log_close(log);
    damage(img, 0);
    CHECK_EQ(cn_log_open(img, &cfg, &log), 0);
    CHECK_EQ(cn_log_end_offset(log), want_end);
    struct cn_log_stats st;
    cn_log_stats(log, &st);
    CHECK(st.recovery_scanned_bytes > 0);
    CHECK_EQ(st.recovery_truncated_bytes > 0, want_cut);
    struct cn_wr w;
    cn_wr_init(&w, 0);
    int64_t next;
    read_all(log, 0, &w);
    CHECK_EQ(walk(w.buf, w.len, 0, &next), want_end / 3);
    CHECK_EQ(next, want_end);
    char *p = seg_file(img, 0, "log");
    CHECK_EQ(file_size(p), (int64_t)w.len);
    free(p);
    /* The log keeps working after the cut. */
    int64_t base;
    CHECK_EQ(append_one(log, 3, 1, 40, &base), 0);
    CHECK_EQ(base, want_end);
    cn_log_close(log);
    CHECK_EQ(cn_log_open(img, &cfg, &log), 0);
    CHECK_EQ(cn_log_end_offset(log), want_end + 3);
    cn_log_close(log);
    cn_wr_fini(&w);
    unit_rmtree(img);
    unit_rmtree(dir);
    free(img);
    free(dir);
}

static void damage_truncate(const char *dir, int64_t b)
{
    char *p = seg_file(dir, b, "log");
    CHECK_EQ(truncate(p, file_size(p) - 30), 0);
    free(p);
}

static void damage_garbage(const char *dir, int64_t b)
{
    char *p = seg_file(dir, b, "log");
    int fd = open(p, O_WRONLY | O_APPEND);
    CHECK(write(fd, "\x00\x00\x00\x00\x00\x00\x00\x3c\x00\x00\x00\x20zzzz",
                16) == 16);
    close(fd);
    free(p);
}

static void damage_crc(const char *dir, int64_t b)
{
    char *p = seg_file(dir, b, "log");
    int fd = open(p, O_RDWR);
    uint8_t c;
    off_t at = (off_t)file_size(p) - 5; /* inside the last batch's records */
    CHECK(pread(fd, &c, 1, at) == 1);
    c ^= 0x40;
    CHECK(pwrite(fd, &c, 1, at) == 1);
    close(fd);
    free(p);
}

/* Flips a byte inside the first batch's records (its CRC then fails). */
static void damage_first_batch(const char *dir, int64_t b)
{
    char *p = seg_file(dir, b, "log");
    int fd = open(p, O_RDWR);
    uint8_t c;
    CHECK(pread(fd, &c, 1, 70) == 1);
    c ^= 0x40;
    CHECK(pwrite(fd, &c, 1, 70) == 1);
    close(fd);
    free(p);
}

static void damage_none(const char *dir, int64_t b)
{
    (void)dir;
    (void)b;
}

UNIT_TEST(test_torn_tail)
{
    torn_case(damage_truncate, 57, true);
    torn_case(damage_garbage, 60, true);
    torn_case(damage_crc, 57, true);
    torn_case(damage_none, 60, false);
}

static void sync_now(struct cn_log *log);

/* Every offset in [start, end) returns its own batch, except those in
 * [gap_from, gap_to), which no segment holds: they return the first batch
 * at gap_to (or nothing when the gap runs to the end), as Kafka serves a
 * compacted gap. */
static void check_offsets_gap(struct cn_log *log, int64_t gap_from,
                              int64_t gap_to)
{
    struct cn_wr w;
    cn_wr_init(&w, 0);
    for (int64_t off = cn_log_start_offset(log); off < cn_log_end_offset(log);
         off++) {
        size_t n;
        bool in_gap = off >= gap_from && off < gap_to;
        cn_wr_reset(&w);
        CHECK_EQ(cn_log_read(log, off, INT64_MAX, 1, true, &w, &n), 0);
        if (in_gap && gap_to >= cn_log_end_offset(log)) {
            CHECK_EQ(n, 0);
            continue;
        }
        CHECK(n >= 61);
        if (n < 61)
            continue;
        int64_t base = be64(w.buf), last = base + be32(w.buf + 23);
        bool ok = in_gap ? base == gap_to : base <= off && off <= last;
        CHECK(ok);
        if (!ok)
            fprintf(stderr, "  offset %lld got batch %lld..%lld\n",
                    (long long)off, (long long)base, (long long)last);
    }
    cn_wr_fini(&w);
}

/* Bytes of the log from offset `from` to its end. */
static void read_from(struct cn_log *log, int64_t from, struct cn_wr *w)
{
    size_t n;
    cn_wr_reset(w);
    CHECK_EQ(cn_log_read(log, from, INT64_MAX, SIZE_MAX, true, w, &n), 0);
}

/* A write torn by a crash in a middle segment (past the recovery point):
 * what follows it was never acknowledged with acks=all nor read, so it
 * goes with the tail, as in Kafka; offsets continue from the cut. */
UNIT_TEST(test_torn_middle_segment)
{
    char *dir = unit_tmpdir("log");
    struct cn_log_config cfg;
    cfg_small(&cfg);
    struct cn_log *log;
    CHECK_EQ(cn_log_open(dir, &cfg, &log), 0);
    fill(log, 30);
    char *img = crash_image(dir);
    cn_log_close(log);
    int64_t bases[64];
    int nb = list_bases(img, bases, 64);
    CHECK(nb >= 4);
    damage_crc(img, bases[1]);
    int64_t cut_at = bases[2] - 3;
    CHECK_EQ(cn_log_open(img, &cfg, &log), 0);
    CHECK_EQ(cn_log_end_offset(log), cut_at);
    CHECK_EQ(list_bases(img, bases, 64), 2);
    check_every_offset(log);
    struct cn_log_stats st;
    cn_log_stats(log, &st);
    CHECK(st.recovery_truncated_bytes > 0 && st.recovery_truncated_bytes < 300);
    int64_t base;
    CHECK_EQ(append_one(log, 3, 1, 40, &base), 0);
    CHECK_EQ(base, cut_at);
    cn_log_close(log);
    unit_rmtree(img);
    unit_rmtree(dir);
    free(img);
    free(dir);
}

/* A bad batch in a segment below the recovery point is damage to synced
 * data, found because its index disagrees: cutting there would delete the
 * intact batches after it, which consumers may have read.  The partition
 * is refused and nothing is cut; moved away, the file becomes a gap. */
UNIT_TEST(test_corrupt_synced_segment_refused)
{
    char *dir = unit_tmpdir("log");
    struct cn_log_config cfg;
    cfg_small(&cfg);
    struct cn_log *log;
    CHECK_EQ(cn_log_open(dir, &cfg, &log), 0);
    fill(log, 30);
    cn_log_close(log);
    int64_t bases[64];
    int nb = list_bases(dir, bases, 64);
    CHECK(nb >= 4);
    char *lp = seg_file(dir, bases[1], "log");
    int64_t size = file_size(lp);
    damage_first_batch(dir, bases[1]);
    char *idx = seg_file(dir, bases[1], "index");
    CHECK_EQ(truncate(idx, 0), 0);
    CHECK_EQ(cn_log_open(dir, &cfg, &log), CN_ECORRUPT);
    CHECK_EQ(list_bases(dir, bases, 64), nb);
    CHECK_EQ(file_size(lp), size);
    char moved[PATH_MAX];
    snprintf(moved, sizeof moved, "%s.damaged", lp);
    CHECK_EQ(rename(lp, moved), 0);
    CHECK_EQ(cn_log_open(dir, &cfg, &log), 0);
    CHECK_EQ(cn_log_end_offset(log), 90);
    check_offsets_gap(log, bases[1], bases[2]);
    cn_log_close(log);
    unit_rmtree(dir);
    free(idx);
    free(lp);
    free(dir);
}

/* A crash that lost a middle segment's first batch (past the recovery
 * point) leaves it empty: it is a torn write like any other, so what was
 * written after it goes too and offsets continue from its base. */
UNIT_TEST(test_torn_first_batch_middle_segment)
{
    char *dir = unit_tmpdir("log");
    struct cn_log_config cfg;
    cfg_small(&cfg);
    struct cn_log *log;
    CHECK_EQ(cn_log_open(dir, &cfg, &log), 0);
    fill(log, 30);
    char *img = crash_image(dir);
    cn_log_close(log);
    int64_t bases[64];
    int nb = list_bases(img, bases, 64);
    CHECK(nb >= 4);
    damage_first_batch(img, bases[1]);
    CHECK_EQ(cn_log_open(img, &cfg, &log), 0);
    CHECK_EQ(cn_log_end_offset(log), bases[1]);
    CHECK_EQ(list_bases(img, bases, 64), 1);
    check_every_offset(log);
    int64_t base;
    CHECK_EQ(append_one(log, 3, 1, 40, &base), 0);
    CHECK_EQ(base, bases[1]);
    cn_log_close(log);
    unit_rmtree(img);
    unit_rmtree(dir);
    free(img);
    free(dir);
}

/* A middle .log removed (issue #11: segments 0, 289, 1068, 3000 with 289
 * gone deleted 1068 and 3000 and moved the end back to 289): the gap is
 * kept, every later byte is still served, the end and the next offset do
 * not move.  Both after a clean stop (segments trusted) and from a crash
 * image (every segment scanned). */
UNIT_TEST(test_missing_middle_segment)
{
    for (int crash = 0; crash < 2; crash++) {
        char *dir = unit_tmpdir("log");
        struct cn_log_config cfg;
        cfg_small(&cfg);
        struct cn_log *log;
        CHECK_EQ(cn_log_open(dir, &cfg, &log), 0);
        fill(log, 30);
        int64_t bases[64];
        int nb = list_bases(dir, bases, 64);
        CHECK(nb >= 5);
        struct cn_wr before, after;
        cn_wr_init(&before, 0);
        cn_wr_init(&after, 0);
        read_from(log, bases[3], &before);
        char *img = crash ? crash_image(dir) : NULL;
        cn_log_close(log);
        const char *d = crash ? img : dir;
        char *gone = seg_file(d, bases[2], "log");
        CHECK_EQ(unlink(gone), 0);
        CHECK_EQ(cn_log_open(d, &cfg, &log), 0);
        CHECK_EQ(cn_log_end_offset(log), 90);
        int64_t now[64];
        CHECK_EQ(list_bases(d, now, 64), nb - 1);
        check_offsets_gap(log, bases[2], bases[3]);
        read_from(log, bases[3], &after);
        CHECK_EQ(after.len, before.len);
        CHECK(after.len == before.len &&
              memcmp(after.buf, before.buf, after.len) == 0);
        /* A consumer inside the gap moves on to the next batch. */
        read_from(log, bases[2] + 1, &after);
        CHECK(after.len == before.len &&
              memcmp(after.buf, before.buf, after.len) == 0);
        int64_t base;
        CHECK_EQ(append_one(log, 3, 1, 40, &base), 0);
        CHECK_EQ(base, 90);
        cn_log_close(log);
        CHECK_EQ(cn_log_open(d, &cfg, &log), 0);
        CHECK_EQ(cn_log_end_offset(log), 93);
        check_offsets_gap(log, bases[2], bases[3]);
        cn_log_close(log);
        cn_wr_fini(&before);
        cn_wr_fini(&after);
        free(gone);
        if (img) {
            unit_rmtree(img);
            free(img);
        }
        unit_rmtree(dir);
        free(dir);
    }
}

/* The newest .log removed.  After a clean stop the checkpoint holds the
 * exact end: it stays, and the next record gets it, not an offset a
 * consumer may already have read.  After a crash the recovery point (all
 * below it synced) is the floor: with the two newest files gone the end
 * still does not fall below it. */
UNIT_TEST(test_missing_active_segment)
{
    char *dir = unit_tmpdir("log");
    struct cn_log_config cfg;
    cfg_small(&cfg);
    struct cn_log *log;
    CHECK_EQ(cn_log_open(dir, &cfg, &log), 0);
    fill(log, 30);
    cn_log_close(log);
    int64_t bases[64];
    int nb = list_bases(dir, bases, 64);
    CHECK(nb >= 4);
    char *last = seg_file(dir, bases[nb - 1], "log");
    CHECK_EQ(unlink(last), 0);
    CHECK_EQ(cn_log_open(dir, &cfg, &log), 0);
    CHECK_EQ(cn_log_end_offset(log), 90);
    check_offsets_gap(log, bases[nb - 1], 90);
    int64_t base;
    CHECK_EQ(append_one(log, 3, 1, 40, &base), 0);
    CHECK_EQ(base, 90);
    cn_log_close(log);
    CHECK_EQ(cn_log_open(dir, &cfg, &log), 0);
    CHECK_EQ(cn_log_end_offset(log), 93);
    check_offsets_gap(log, bases[nb - 1], 90);
    cn_log_close(log);
    unit_rmtree(dir);
    free(dir);
    free(last);

    /* Crash: the recovery point is the base of the active segment. */
    dir = unit_tmpdir("log");
    CHECK_EQ(cn_log_open(dir, &cfg, &log), 0);
    fill(log, 30);
    sync_now(log);
    nb = list_bases(dir, bases, 64);
    char *img = crash_image(dir);
    cn_log_close(log);
    for (int k = 1; k <= 2; k++) {
        char *p = seg_file(img, bases[nb - k], "log");
        CHECK_EQ(unlink(p), 0);
        free(p);
    }
    CHECK_EQ(cn_log_open(img, &cfg, &log), 0);
    CHECK_EQ(cn_log_end_offset(log), bases[nb - 1]);
    CHECK_EQ(append_one(log, 3, 1, 40, &base), 0);
    CHECK_EQ(base, bases[nb - 1]);
    check_offsets_gap(log, bases[nb - 2], bases[nb - 1]);
    cn_log_close(log);
    unit_rmtree(img);
    unit_rmtree(dir);
    free(img);
    free(dir);
}

/* --- the file layer: an unreadable segment ------------------------------ */

static const char *fail_open_suffix; /* open() of a path ending so: EIO */

static int open_failing(const char *path, int flags, mode_t mode)
{
    size_t a = strlen(path), b = fail_open_suffix ? strlen(fail_open_suffix)
                                                  : 0;
    if (b && a >= b && strcmp(path + a - b, fail_open_suffix) == 0)
        return -EIO;
    return cn_file_ops_real.open(path, flags, mode);
}

/* Unreadable is not missing: the bytes may come back once the disk or the
 * permissions are fixed, so the open is refused (naming the file) and
 * nothing is deleted or cut; once readable, everything is there. */
UNIT_TEST(test_unreadable_segment_refused)
{
    char *dir = unit_tmpdir("log");
    struct cn_log_config cfg;
    cfg_small(&cfg);
    struct cn_log *log;
    CHECK_EQ(cn_log_open(dir, &cfg, &log), 0);
    fill(log, 30);
    char *img = crash_image(dir);
    cn_log_close(log);
    int64_t bases[64];
    int nb = list_bases(img, bases, 64);
    char name[32];
    snprintf(name, sizeof name, "%020lld.log", (long long)bases[2]);
    static struct cn_file_ops ops;
    ops = cn_file_ops_real;
    ops.open = open_failing;
    fail_open_suffix = name;
    cn_file_ops = &ops;
    enum cn_say_level lvl = cn_say_max_level;
    cn_say_max_level = CN_SAY_ERROR;
    CHECK_EQ(cn_log_open(img, &cfg, &log), -EIO);
    cn_say_max_level = lvl;
    cn_file_ops = &cn_file_ops_real;
    fail_open_suffix = NULL;
    int64_t now[64];
    CHECK_EQ(list_bases(img, now, 64), nb);
    CHECK_EQ(cn_log_open(img, &cfg, &log), 0);
    CHECK_EQ(cn_log_end_offset(log), 90);
    check_every_offset(log);
    cn_log_close(log);
    unit_rmtree(img);
    unit_rmtree(dir);
    free(img);
    free(dir);
}

/* A segment file under the wrong name (its first batch is sound but not
 * at the file's base offset) is not a torn tail: cutting it would delete
 * the whole file.  The open is refused and the file left as it is. */
UNIT_TEST(test_misnamed_segment_refused)
{
    char *dir = unit_tmpdir("log");
    struct cn_log_config cfg;
    cfg_small(&cfg);
    struct cn_log *log;
    CHECK_EQ(cn_log_open(dir, &cfg, &log), 0);
    fill(log, 30);
    cn_log_close(log);
    int64_t bases[64];
    int nb = list_bases(dir, bases, 64);
    CHECK(nb >= 4);
    char *from = seg_file(dir, bases[2], "log");
    char *to = seg_file(dir, bases[2] - 1, "log");
    int64_t size = file_size(from);
    CHECK_EQ(rename(from, to), 0);
    enum cn_say_level lvl = cn_say_max_level;
    cn_say_max_level = CN_SAY_ERROR;
    CHECK_EQ(cn_log_open(dir, &cfg, &log), CN_ECORRUPT);
    cn_say_max_level = lvl;
    CHECK_EQ(file_size(to), size);
    int64_t now[64];
    CHECK_EQ(list_bases(dir, now, 64), nb);
    /* Named right again, it all comes back. */
    CHECK_EQ(rename(to, from), 0);
    CHECK_EQ(cn_log_open(dir, &cfg, &log), 0);
    CHECK_EQ(cn_log_end_offset(log), 90);
    check_every_offset(log);
    cn_log_close(log);
    free(from);
    free(to);
    unit_rmtree(dir);
    free(dir);
}

/* A time index cut to whole entries looks sane, but its last entry no
 * longer holds the segment's max timestamp; with timestamps that go down
 * inside a segment, ListOffsets by time then skipped the segment.  It is
 * noticed (a sealed index ends with the max) and rebuilt. */
UNIT_TEST(test_timeindex_truncated)
{
    char *dir = unit_tmpdir("log");
    struct cn_log_config cfg;
    cfg_small(&cfg);
    struct cn_log *log;
    CHECK_EQ(cn_log_open(dir, &cfg, &log), 0);
    /* Batch i: offsets 3i..3i+2; every fourth is far in the future. */
    for (int i = 0; i < 30; i++) {
        int64_t ts = i % 4 == 1 ? 1000000000 + 1000 * i : 1000 * (i + 1);
        CHECK_EQ(append_one(log, 3, ts, 40, NULL), 0);
    }
    cn_log_close(log);
    int64_t bases[64];
    int nb = list_bases(dir, bases, 64);
    CHECK(nb >= 4);
    /* Segment 1 and 2 each hold a future batch that is not their last. */
    int want[2] = {-1, -1};
    for (int k = 1; k <= 2; k++)
        for (int i = (int)(bases[k] / 3); i < (bases[k + 1] / 3) - 1; i++)
            if (i % 4 == 1 && want[k - 1] < 0)
                want[k - 1] = i;
    CHECK(want[0] >= 0 && want[1] >= 0);
    char *t1 = seg_file(dir, bases[1], "timeindex");
    char *t2 = seg_file(dir, bases[2], "timeindex");
    int64_t t2_size = file_size(t2);
    CHECK(t2_size >= 24);
    CHECK_EQ(truncate(t1, 0), 0);
    CHECK_EQ(truncate(t2, 12), 0);
    CHECK_EQ(cn_log_open(dir, &cfg, &log), 0);
    for (int k = 0; k < 2; k++) {
        int64_t ts_want = 1000000000 + 1000 * want[k] + 2, off, ts;
        CHECK_EQ(cn_log_offset_for_time(log, ts_want, &off, &ts), 0);
        CHECK_EQ(off, 3 * want[k]);
        CHECK_EQ(ts, ts_want);
    }
    CHECK_EQ(file_size(t2), t2_size);
    CHECK_EQ(cn_log_end_offset(log), 90);
    cn_log_close(log);
    unit_rmtree(dir);
    free(t1);
    free(t2);
    free(dir);
}

/* Recovery says a torn tail once, as its WARN with the partition, segment,
 * byte and offset; no "corruption detected at segment.c:NNN" line first. */
UNIT_TEST(test_torn_tail_reported_once)
{
    char *dir = unit_tmpdir("log");
    struct cn_log_config cfg;
    cfg_small(&cfg);
    cfg.segment_bytes = 1 << 20;
    struct cn_log *log;
    CHECK_EQ(cn_log_open(dir, &cfg, &log), 0);
    fill(log, 20);
    char *img = crash_image(dir);
    cn_log_close(log);
    damage_truncate(img, 0);
    char *out = path_in(dir, "stderr.txt");
    fflush(stderr);
    int saved = dup(2), fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 2);
    close(fd);
    enum cn_say_level lvl = cn_say_max_level;
    cn_say_max_level = CN_SAY_WARN;
    int err = cn_log_open(img, &cfg, &log);
    cn_say_max_level = lvl;
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    CHECK_EQ(err, 0);
    if (!err)
        cn_log_close(log);
    char text[4096] = "";
    fd = open(out, O_RDONLY);
    ssize_t r = read(fd, text, sizeof text - 1);
    close(fd);
    text[r > 0 ? r : 0] = '\0';
    CHECK(strstr(text, "corruption detected") == NULL);
    const char *w = strstr(text, "WARN");
    CHECK(w != NULL);
    CHECK(w && strstr(w + 1, "WARN") == NULL);
    CHECK(strstr(text, img) != NULL);
    CHECK(strstr(text, "segment 00000000000000000000") != NULL);
    CHECK(strstr(text, "at byte ") != NULL);
    CHECK(strstr(text, "(offset 57)") != NULL);
    if (unit_failures)
        fprintf(stderr, "  stderr was: %s\n", text);
    free(out);
    unit_rmtree(img);
    unit_rmtree(dir);
    free(img);
    free(dir);
}

/* --- on-demand verification -------------------------------------------- */

struct lines {
    char text[4096];
    int n;
};

static void collect(void *arg, const char *line)
{
    struct lines *l = arg;
    size_t len = strlen(l->text);
    snprintf(l->text + len, sizeof l->text - len, "%s\n", line);
    l->n++;
}

/* cn_log_verify finds a flipped byte in an old (trusted, never rescanned)
 * segment, names the file, byte and offset of the first bad batch, and
 * changes nothing on disk. */
UNIT_TEST(test_verify_finds_flipped_byte)
{
    char *dir = unit_tmpdir("log");
    struct cn_log_config cfg;
    cfg_small(&cfg);
    struct cn_log *log;
    CHECK_EQ(cn_log_open(dir, &cfg, &log), 0);
    fill(log, 30);
    cn_log_close(log);
    int64_t bases[64];
    int nb = list_bases(dir, bases, 64);
    CHECK(nb >= 4);
    struct lines l = {"", 0};
    struct cn_log_verify v;
    CHECK_EQ(cn_log_verify(dir, collect, &l, &v), 0);
    CHECK_EQ(v.segments, nb);
    CHECK_EQ(v.batches, 30);
    CHECK_EQ(v.bad_segments, 0);
    CHECK_EQ(v.gaps, 0);
    CHECK_EQ(l.n, 0);

    /* Flip one byte inside the second batch of segment bases[1]. */
    char *p = seg_file(dir, bases[1], "log");
    int fd = open(p, O_RDWR);
    uint8_t hdr[12], c;
    CHECK(pread(fd, hdr, 12, 0) == 12);
    int64_t total = be32(hdr + 8) + 12;
    CHECK(pread(fd, &c, 1, total + 70) == 1);
    c ^= 0x01;
    CHECK(pwrite(fd, &c, 1, total + 70) == 1);
    close(fd);
    int64_t size = file_size(p);
    CHECK_EQ(cn_log_verify(dir, collect, &l, &v), 0);
    CHECK_EQ(v.bad_segments, 1);
    CHECK_EQ(l.n, 1);
    char want[512];
    snprintf(want, sizeof want, "%s: bad batch at byte %lld (offset %lld): "
             "batch CRC mismatch", p, (long long)total,
             (long long)bases[1] + 3);
    CHECK(strstr(l.text, want) != NULL);
    if (!strstr(l.text, want))
        fprintf(stderr, "  want %s\n  got %s", want, l.text);
    CHECK_EQ(file_size(p), size);
    /* A normal open trusts that segment (clean stop): the flip is only
     * found on demand. */
    CHECK_EQ(cn_log_open(dir, &cfg, &log), 0);
    CHECK_EQ(cn_log_end_offset(log), 90);
    cn_log_close(log);

    /* A missing segment is reported as a gap. */
    char *gone = seg_file(dir, bases[3], "log");
    CHECK_EQ(unlink(gone), 0);
    l.text[0] = '\0';
    l.n = 0;
    CHECK_EQ(cn_log_verify(dir, collect, &l, &v), 0);
    CHECK_EQ(v.gaps, 1);
    CHECK_EQ(v.segments, nb - 1);
    CHECK(strstr(l.text, "are in no segment") != NULL);
    free(gone);
    free(p);
    unit_rmtree(dir);
    free(dir);
}

UNIT_TEST(test_index_rebuild)
{
    char *dir = unit_tmpdir("log");
    struct cn_log_config cfg;
    cfg_small(&cfg);
    cfg.segment_bytes = 2048;
    cfg.index_interval_bytes = 100;
    struct cn_log *log;
    CHECK_EQ(cn_log_open(dir, &cfg, &log), 0);
    fill(log, 40);
    cn_log_close(log);
    int64_t bases[64];
    int nb = list_bases(dir, bases, 64);
    CHECK(nb >= 3);
    char *idx0 = seg_file(dir, bases[0], "index");
    char *tidx1 = seg_file(dir, bases[1], "timeindex");
    char *idx2 = seg_file(dir, bases[2], "index");
    int64_t idx0_size = file_size(idx0), tidx1_size = file_size(tidx1),
            idx2_size = file_size(idx2);
    CHECK(idx0_size > 0 && tidx1_size > 0);
    unlink(idx0);
    CHECK_EQ(truncate(tidx1, tidx1_size - 5), 0);
    int fd = open(idx2, O_WRONLY | O_APPEND);
    CHECK(write(fd, "\xff\xff\xff\xff\xff\xff\xff\xff", 8) == 8);
    close(fd);
    CHECK_EQ(cn_log_open(dir, &cfg, &log), 0);
    struct cn_log_stats st;
    cn_log_stats(log, &st);
    CHECK(st.recovery_scanned_bytes > 0);
    CHECK_EQ(st.recovery_truncated_bytes, 0);
    CHECK_EQ(file_size(idx0), idx0_size);
    CHECK_EQ(file_size(tidx1), tidx1_size);
    CHECK_EQ(file_size(idx2), idx2_size);
    CHECK_EQ(cn_log_end_offset(log), 120);
    check_every_offset(log);
    int64_t off, ts;
    CHECK_EQ(cn_log_offset_for_time(log, 15002, &off, &ts), 0);
    CHECK_EQ(off, 42);
    cn_log_close(log);
    /* A shortened (but sane) index also gets noticed: entries lost. */
    CHECK_EQ(truncate(idx0, 8), 0);
    CHECK_EQ(cn_log_open(dir, &cfg, &log), 0);
    CHECK_EQ(file_size(idx0), idx0_size);
    cn_log_close(log);
    free(idx0);
    free(tidx1);
    free(idx2);
    unit_rmtree(dir);
    free(dir);
}

/* --- fault injection ----------------------------------------------------- */

static int inject_pwrite_err;   /* -errno to return, 0 none */
static int inject_pwrite_after; /* pwrites let through before failing */
static size_t inject_short;     /* max bytes per pwrite, 0 none */
static int inject_sync_err;     /* -errno from fdatasync, 0 none */
static int inject_creat_err;    /* -errno from an O_CREAT open, 0 none */
static int fake_fd_limit;       /* EMFILE at this many live opens, 0 none */
static int pwrite_calls, sync_calls, open_calls, live_fds;

static ssize_t test_pwrite(int fd, const void *buf, size_t n, off_t off)
{
    pwrite_calls++;
    if (inject_pwrite_err && inject_pwrite_after-- <= 0)
        return inject_pwrite_err;
    if (inject_short && n > inject_short)
        n = inject_short;
    return cn_file_ops_real.pwrite(fd, buf, n, off);
}

static int test_fdatasync(int fd)
{
    sync_calls++;
    if (inject_sync_err)
        return inject_sync_err;
    return cn_file_ops_real.fdatasync(fd);
}

static int test_open(const char *path, int flags, mode_t mode)
{
    open_calls++;
    if (inject_creat_err && (flags & O_CREAT))
        return inject_creat_err;
    if (fake_fd_limit && live_fds >= fake_fd_limit)
        return -EMFILE;
    int fd = cn_file_ops_real.open(path, flags, mode);
    if (fd >= 0)
        live_fds++;
    return fd;
}

static int test_close(int fd)
{
    live_fds--;
    return cn_file_ops_real.close(fd);
}

static struct cn_file_ops test_ops;

static void install_faults(void)
{
    test_ops = cn_file_ops_real;
    test_ops.pwrite = test_pwrite;
    test_ops.fdatasync = test_fdatasync;
    cn_file_ops = &test_ops;
    inject_pwrite_err = inject_sync_err = inject_creat_err = 0;
    inject_pwrite_after = 0;
    inject_short = 0;
}

static void remove_faults(void)
{
    cn_file_ops = &cn_file_ops_real;
}

UNIT_TEST(test_eio_on_write)
{
    char *dir = unit_tmpdir("log");
    struct cn_log_config cfg;
    cfg_small(&cfg);
    struct cn_log *log;
    install_faults();
    CHECK_EQ(cn_log_open(dir, &cfg, &log), 0);
    fill(log, 5);
    enum cn_say_level lvl = cn_say_max_level;
    inject_pwrite_err = -EIO;
    CHECK_EQ(append_one(log, 1, 1, 1, NULL), CN_EOFFLINE);
    CHECK(cn_log_is_offline(log));
    inject_pwrite_err = 0;
    CHECK_EQ(append_one(log, 1, 1, 1, NULL), CN_EOFFLINE);
    struct cn_wr w;
    cn_wr_init(&w, 0);
    size_t n;
    CHECK_EQ(cn_log_read(log, 0, INT64_MAX, SIZE_MAX, true, &w, &n),
             CN_EOFFLINE);
    CHECK(cn_log_sync_begin(log) == NULL);
    CHECK_EQ(cn_log_delete_records(log, 3), CN_EOFFLINE);
    cn_log_close(log);
    cn_say_max_level = lvl;
    /* The log reopens with everything before the failed write. */
    CHECK_EQ(cn_log_open(dir, &cfg, &log), 0);
    CHECK_EQ(cn_log_end_offset(log), 15);
    cn_log_close(log);
    remove_faults();
    cn_wr_fini(&w);
    unit_rmtree(dir);
    free(dir);
}

UNIT_TEST(test_eio_on_sync)
{
    char *dir = unit_tmpdir("log");
    struct cn_log_config cfg;
    cfg_small(&cfg);
    struct cn_log *log;
    install_faults();
    CHECK_EQ(cn_log_open(dir, &cfg, &log), 0);
    fill(log, 5);
    struct cn_log_sync *s = cn_log_sync_begin(log);
    CHECK(s != NULL);
    inject_sync_err = -EIO;
    int err = cn_log_sync_run(s);
    CHECK_EQ(err, -EIO);
    enum cn_say_level lvl = cn_say_max_level;
    cn_log_sync_end(log, s, err);
    cn_say_max_level = lvl;
    CHECK(cn_log_is_offline(log));
    CHECK_EQ(cn_log_synced_offset(log), 0);
    CHECK_EQ(append_one(log, 1, 1, 1, NULL), CN_EOFFLINE);
    inject_sync_err = 0;
    cn_log_close(log);
    remove_faults();
    unit_rmtree(dir);
    free(dir);
}

UNIT_TEST(test_short_writes)
{
    char *dir = unit_tmpdir("log");
    struct cn_log_config cfg;
    cfg_small(&cfg);
    struct cn_log *log;
    install_faults();
    inject_short = 7;
    CHECK_EQ(cn_log_open(dir, &cfg, &log), 0);
    pwrite_calls = 0;
    fill(log, 20);
    CHECK(pwrite_calls > 20 * 10);
    check_every_offset(log);
    cn_log_close(log);
    inject_short = 0;
    CHECK_EQ(cn_log_open(dir, &cfg, &log), 0);
    CHECK_EQ(cn_log_end_offset(log), 60);
    struct cn_wr w;
    cn_wr_init(&w, 0);
    int64_t next;
    read_all(log, 0, &w);
    CHECK_EQ(walk(w.buf, w.len, 0, &next), 20);
    cn_wr_fini(&w);
    cn_log_close(log);
    remove_faults();
    unit_rmtree(dir);
    free(dir);
}

UNIT_TEST(test_mid_append_failpoint)
{
    char *dir = unit_tmpdir("log");
    struct cn_log_config cfg;
    cfg_small(&cfg);
    cfg.segment_bytes = 1 << 20;
    struct cn_log *log;
    CHECK_EQ(cn_log_open(dir, &cfg, &log), 0);
    fill(log, 5);
    CHECK_EQ(cn_failpoint_set("log.mid_append", "error"), 0);
    enum cn_say_level lvl = cn_say_max_level;
    CHECK_EQ(append_one(log, 3, 1, 40, NULL), CN_EOFFLINE);
    cn_say_max_level = lvl;
    CHECK_EQ(cn_failpoint_set("log.mid_append", NULL), 0);
    char *img = crash_image(dir);
    cn_log_close(log);
    char *p = seg_file(img, 0, "log");
    int64_t torn = file_size(p);
    struct cn_log *log2;
    CHECK_EQ(cn_log_open(img, &cfg, &log2), 0);
    CHECK_EQ(cn_log_end_offset(log2), 15);
    CHECK(file_size(p) < torn);
    struct cn_log_stats st;
    cn_log_stats(log2, &st);
    CHECK_EQ(st.recovery_truncated_bytes, torn - file_size(p));
    cn_log_close(log2);
    free(p);
    unit_rmtree(img);
    unit_rmtree(dir);
    free(img);
    free(dir);
}

/* Real kill -9 through the crash fail points, in a child process. */
static void kill9_case(const char *point, int64_t want_end, bool want_cut)
{
    char *dir = unit_tmpdir("log");
    struct cn_log_config cfg;
    cfg_small(&cfg);
    cfg.segment_bytes = 1 << 20;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        struct cn_log *log;
        if (cn_log_open(dir, &cfg, &log) != 0)
            _exit(2);
        fill(log, 5);
        cn_failpoint_set(point, "crash");
        append_one(log, 3, 1, 40, NULL);
        _exit(3); /* not reached: the fail point kills us */
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    struct cn_log *log;
    CHECK_EQ(cn_log_open(dir, &cfg, &log), 0);
    CHECK_EQ(cn_log_end_offset(log), want_end);
    struct cn_log_stats st;
    cn_log_stats(log, &st);
    CHECK_EQ(st.recovery_truncated_bytes > 0, want_cut);
    check_every_offset(log);
    cn_log_close(log);
    unit_rmtree(dir);
    free(dir);
}

UNIT_TEST(test_kill9)
{
    kill9_case("log.mid_append", 15, true);
    kill9_case("log.after_append_before_sync", 18, false);
}

/* --- durability -------------------------------------------------------- */

static void sync_now(struct cn_log *log)
{
    struct cn_log_sync *s = cn_log_sync_begin(log);
    CHECK(s != NULL);
    if (s)
        cn_log_sync_end(log, s, cn_log_sync_run(s));
}

UNIT_TEST(test_sync_flow)
{
    char *dir = unit_tmpdir("log");
    struct cn_log_config cfg;
    cfg_small(&cfg);
    cfg.flush_messages = 10;
    struct cn_log *log;
    CHECK_EQ(cn_log_open(dir, &cfg, &log), 0);
    CHECK(cn_log_sync_begin(log) == NULL);
    CHECK(!cn_log_needs_flush(log, fake_now));
    fill(log, 3);
    CHECK_EQ(cn_log_synced_offset(log), 0);
    CHECK(!cn_log_needs_flush(log, fake_now));
    fill(log, 0);
    CHECK_EQ(append_one(log, 3, 1, 4, NULL), 0);
    CHECK(cn_log_needs_flush(log, fake_now));
    /* Appends between begin and end are not covered by that sync. */
    struct cn_log_sync *s = cn_log_sync_begin(log);
    CHECK(s != NULL);
    CHECK_EQ(append_one(log, 3, 1, 4, NULL), 0);
    CHECK_EQ(cn_log_sync_run(s), 0);
    cn_log_sync_end(log, s, 0);
    CHECK_EQ(cn_log_synced_offset(log), 12);
    sync_now(log);
    CHECK_EQ(cn_log_synced_offset(log), 15);
    CHECK(cn_log_sync_begin(log) == NULL);
    /* flush.ms */
    cfg.flush_messages = INT64_MAX;
    cfg.flush_ms = 100;
    cn_log_set_config(log, &cfg);
    CHECK_EQ(append_one(log, 1, 1, 4, NULL), 0);
    CHECK(!cn_log_needs_flush(log, fake_now + 50));
    CHECK(cn_log_needs_flush(log, fake_now + 150));
    cn_log_close(log);
    unit_rmtree(dir);
    free(dir);
}

/* Synced rolled segments move the recovery point: a crash then rescans only
 * from the active segment on. */
UNIT_TEST(test_recovery_point)
{
    char *dir = unit_tmpdir("log");
    struct cn_log_config cfg;
    cfg_small(&cfg);
    struct cn_log *log;
    CHECK_EQ(cn_log_open(dir, &cfg, &log), 0);
    fill(log, 30);
    /* A sync in flight while retention deletes one of its segments. */
    struct cn_log_sync *s = cn_log_sync_begin(log);
    CHECK(s != NULL);
    cfg.retention_bytes = 3000;
    cn_log_set_config(log, &cfg);
    CHECK(cn_log_enforce_retention(log, fake_now) > 0);
    CHECK_EQ(cn_log_sync_run(s), 0);
    cn_log_sync_end(log, s, 0);
    CHECK_EQ(cn_log_synced_offset(log), 90);
    struct cn_log_stats total;
    cn_log_stats(log, &total);
    char *img = crash_image(dir);
    fill(log, 0);
    cn_log_close(log);
    CHECK_EQ(cn_log_open(img, &cfg, &log), 0);
    struct cn_log_stats st;
    cn_log_stats(log, &st);
    CHECK(st.recovery_scanned_bytes > 0);
    CHECK(st.recovery_scanned_bytes <= 1024);
    CHECK_EQ(cn_log_end_offset(log), 90);
    CHECK_EQ(st.segments, total.segments);
    check_every_offset(log);
    cn_log_close(log);
    unit_rmtree(img);
    unit_rmtree(dir);
    free(img);
    free(dir);
}

UNIT_TEST(test_stray_files_and_delete)
{
    char *dir = unit_tmpdir("log");
    struct cn_log_config cfg;
    cfg_small(&cfg);
    struct cn_log *log;
    char *sub = path_in(dir, "topic-3");
    CHECK_EQ(cn_log_open(sub, &cfg, &log), 0);
    fill(log, 10);
    cn_log_close(log);
    char *tmp = path_in(sub, "partition.checkpoint.tmp");
    char *orphan = seg_file(sub, 999, "index");
    close(open(tmp, O_WRONLY | O_CREAT, 0644));
    close(open(orphan, O_WRONLY | O_CREAT, 0644));
    /* A damaged checkpoint means: scan everything. */
    char *ck = path_in(sub, "partition.checkpoint");
    int fd = open(ck, O_WRONLY);
    CHECK(pwrite(fd, "X", 1, 30) == 1);
    close(fd);
    enum cn_say_level lvl = cn_say_max_level;
    cn_say_max_level = CN_SAY_ERROR;
    CHECK_EQ(cn_log_open(sub, &cfg, &log), 0);
    cn_say_max_level = lvl;
    CHECK(!exists(tmp));
    CHECK(!exists(orphan));
    struct cn_log_stats st;
    cn_log_stats(log, &st);
    CHECK_EQ(st.recovery_scanned_bytes, st.bytes);
    CHECK_EQ(cn_log_end_offset(log), 30);
    CHECK_EQ(cn_log_delete(log), 0);
    CHECK(!exists(sub));
    free(tmp);
    free(orphan);
    free(ck);
    free(sub);
    unit_rmtree(dir);
    free(dir);
}

UNIT_TEST(test_fuzz_corpus)
{
    /* Replays tests/fuzz/corpus/log_recovery/ as single-segment logs: open
     * must succeed or fail cleanly, never crash. */
    DIR *d = opendir("tests/fuzz/corpus/log_recovery");
    if (!d)
        return;
    struct dirent *de;
    struct cn_log_config cfg;
    cn_log_config_default(&cfg);
    enum cn_say_level lvl = cn_say_max_level;
    cn_say_max_level = CN_SAY_ERROR;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        char *src = path_in("tests/fuzz/corpus/log_recovery", de->d_name);
        char *dir = unit_tmpdir("logfz");
        char *dst = seg_file(dir, 0, "log");
        int in = open(src, O_RDONLY), out = open(dst, O_WRONLY | O_CREAT, 0644);
        char buf[4096];
        ssize_t r;
        while ((r = read(in, buf, sizeof buf)) > 0)
            CHECK(write(out, buf, (size_t)r) == r);
        close(in);
        close(out);
        struct cn_log *log;
        if (cn_log_open(dir, &cfg, &log) == 0) {
            check_every_offset(log);
            cn_log_close(log);
        }
        unit_rmtree(dir);
        free(src);
        free(dst);
        free(dir);
    }
    cn_say_max_level = lvl;
    closedir(d);
}

/* --- full disk ---------------------------------------------------------- */

/* Sizes of a segment's three files. */
static void seg_sizes(const char *dir, int64_t base, int64_t out[3])
{
    static const char *const ext[3] = {"log", "index", "timeindex"};
    for (int i = 0; i < 3; i++) {
        char *p = seg_file(dir, base, ext[i]);
        out[i] = file_size(p);
        free(p);
    }
}

/* ENOSPC on an append is undone and the log stays online: reads go on,
 * the next append (with space) takes the next offset, nothing is torn. */
UNIT_TEST(test_enospc_append)
{
    char *dir = unit_tmpdir("log");
    struct cn_log_config cfg;
    cfg_small(&cfg);
    cfg.segment_bytes = 1 << 20;
    struct cn_log *log;
    install_faults();
    CHECK_EQ(cn_log_open(dir, &cfg, &log), 0);
    fill(log, 5);
    int64_t before[3], after[3];
    seg_sizes(dir, 0, before);
    /* Part of the batch lands, then the disk is full. */
    inject_short = 50;
    inject_pwrite_after = 1;
    inject_pwrite_err = -ENOSPC;
    CHECK_EQ(append_one(log, 3, 9000, 40, NULL), -ENOSPC);
    CHECK(!cn_log_is_offline(log));
    seg_sizes(dir, 0, after);
    for (int i = 0; i < 3; i++)
        CHECK_EQ(after[i], before[i]);
    CHECK_EQ(cn_log_end_offset(log), 15);
    /* The batch lands, its index entry does not. */
    inject_short = 0;
    inject_pwrite_after = 1;
    CHECK_EQ(append_one(log, 3, 9000, 40, NULL), -ENOSPC);
    seg_sizes(dir, 0, after);
    for (int i = 0; i < 3; i++)
        CHECK_EQ(after[i], before[i]);
    /* Reads are served meanwhile. */
    struct cn_wr w;
    cn_wr_init(&w, 0);
    int64_t next;
    read_all(log, 0, &w);
    CHECK_EQ(walk(w.buf, w.len, 0, &next), 5);
    CHECK_EQ(next, 15);
    /* Space again: appends go on where they stopped. */
    inject_pwrite_err = 0;
    int64_t base = -1;
    CHECK_EQ(append_one(log, 3, 9000, 40, &base), 0);
    CHECK_EQ(base, 15);
    fill(log, 0);
    check_every_offset(log);
    char *img = crash_image(dir);
    cn_log_close(log);
    /* What a crash would leave scans clean: no torn bytes were left. */
    struct cn_log *log2;
    CHECK_EQ(cn_log_open(img, &cfg, &log2), 0);
    struct cn_log_stats st;
    cn_log_stats(log2, &st);
    CHECK_EQ(st.recovery_truncated_bytes, 0);
    CHECK_EQ(cn_log_end_offset(log2), 18);
    read_all(log2, 0, &w);
    CHECK_EQ(walk(w.buf, w.len, 0, &next), 6);
    cn_log_close(log2);
    remove_faults();
    cn_wr_fini(&w);
    unit_rmtree(img);
    unit_rmtree(dir);
    free(img);
    free(dir);
}

/* ENOSPC creating a roll's files: the append is refused, the old segment
 * stays active and whole, and the roll happens once there is space. */
UNIT_TEST(test_enospc_roll)
{
    char *dir = unit_tmpdir("log");
    struct cn_log_config cfg;
    cfg_small(&cfg);
    /* Sparse: the time index's last entry is not the max, so a roll's
     * seal has to write. */
    cfg.index_interval_bytes = 4096;
    struct cn_log *log;
    install_faults();
    test_ops.open = test_open;
    CHECK_EQ(cn_log_open(dir, &cfg, &log), 0);
    fill(log, 5); /* ~1010 bytes: the next batch rolls */
    CHECK_EQ(cn_log_active_base(log), 0);
    inject_creat_err = -ENOSPC;
    CHECK_EQ(append_one(log, 3, 9000, 40, NULL), -ENOSPC);
    CHECK(!cn_log_is_offline(log));
    CHECK_EQ(cn_log_active_base(log), 0);
    char *p = seg_file(dir, 15, "log");
    CHECK(!exists(p));
    /* The time index seal is also undone when its write finds no space. */
    inject_creat_err = 0;
    inject_pwrite_err = -ENOSPC;
    int64_t before[3], after[3];
    seg_sizes(dir, 0, before);
    CHECK_EQ(append_one(log, 3, 9000, 40, NULL), -ENOSPC);
    seg_sizes(dir, 0, after);
    for (int i = 0; i < 3; i++)
        CHECK_EQ(after[i], before[i]);
    CHECK(!exists(p));
    inject_pwrite_err = 0;
    int64_t base = -1;
    CHECK_EQ(append_one(log, 3, 9000, 40, &base), 0);
    CHECK_EQ(base, 15);
    CHECK_EQ(cn_log_active_base(log), 15);
    check_every_offset(log);
    cn_log_close(log);
    CHECK_EQ(cn_log_open(dir, &cfg, &log), 0);
    CHECK_EQ(cn_log_end_offset(log), 18);
    check_every_offset(log);
    cn_log_close(log);
    remove_faults();
    free(p);
    unit_rmtree(dir);
    free(dir);
}

/* An fsync failure still takes the log offline (fail point log.fsync). */
UNIT_TEST(test_fsync_failpoint)
{
    char *dir = unit_tmpdir("log");
    struct cn_log_config cfg;
    cfg_small(&cfg);
    struct cn_log *log;
    CHECK_EQ(cn_log_open(dir, &cfg, &log), 0);
    fill(log, 2);
    CHECK_EQ(cn_failpoint_set("log.fsync", "error"), 0);
    struct cn_log_sync *s = cn_log_sync_begin(log);
    CHECK(s != NULL);
    int err = cn_log_sync_run(s);
    CHECK_EQ(err, CN_EFAILPOINT);
    enum cn_say_level lvl = cn_say_max_level;
    CHECK_EQ(cn_log_sync_end(log, s, err), CN_EFAILPOINT);
    cn_say_max_level = lvl;
    CHECK_EQ(cn_failpoint_set("log.fsync", NULL), 0);
    CHECK(cn_log_is_offline(log));
    CHECK_EQ(cn_log_synced_offset(log), 0);
    CHECK_EQ(append_one(log, 1, 1, 1, NULL), CN_EOFFLINE);
    cn_log_close(log);
    unit_rmtree(dir);
    free(dir);
}

/* --- descriptor cache --------------------------------------------------- */

#define NLOGS 12

static int count_open_fds(void)
{
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -1;
    while (readdir(d))
        n++;
    closedir(d);
    return n;
}

/* Many logs under a small budget: files are closed least recently used
 * first and reopened on use; data, reads, rolls and reopen all work. */
UNIT_TEST(test_fdcache_evict)
{
    struct cn_log_fd_stats st;
    cn_log_fd_stats(&st);
    CHECK_EQ(st.open, 0);
    int fds0 = count_open_fds();
    cn_log_set_fd_budget(16);
    struct cn_log_config cfg;
    cfg_small(&cfg);
    char *dirs[NLOGS];
    struct cn_log *logs[NLOGS];
    for (int i = 0; i < NLOGS; i++) {
        dirs[i] = unit_tmpdir("fdc");
        CHECK_EQ(cn_log_open(dirs[i], &cfg, &logs[i]), 0);
    }
    cn_log_fd_stats(&st);
    CHECK(st.open <= 16);
    CHECK(st.evictions > 0);
    /* Interleaved: every append finds its files closed by the others. */
    for (int round = 0; round < 8; round++)
        for (int i = 0; i < NLOGS; i++) {
            int64_t base = -1;
            CHECK_EQ(append_one(logs[i], 3, 1000 * (round + 1), 40, &base),
                     0);
            CHECK_EQ(base, 3 * round);
            cn_log_fd_stats(&st);
            CHECK(st.open <= 16);
        }
    for (int i = 0; i < NLOGS; i++) {
        sync_now(logs[i]);
        CHECK_EQ(cn_log_synced_offset(logs[i]), 24);
        CHECK(cn_log_active_base(logs[i]) > 0); /* rolled */
        check_every_offset(logs[i]);
        int64_t off = -1;
        CHECK_EQ(cn_log_offset_for_time(logs[i], 3000, &off, NULL), 0);
        CHECK_EQ(off, 6);
    }
    cn_log_fd_stats(&st);
    CHECK(st.open <= 16);
    CHECK(count_open_fds() <= fds0 + 16);
    for (int i = 0; i < NLOGS; i++)
        cn_log_close(logs[i]);
    cn_log_fd_stats(&st);
    CHECK_EQ(st.open, 0);
    CHECK_EQ(count_open_fds(), fds0);
    for (int i = 0; i < NLOGS; i++) {
        CHECK_EQ(cn_log_open(dirs[i], &cfg, &logs[i]), 0);
        CHECK_EQ(cn_log_end_offset(logs[i]), 24);
        struct cn_log_stats ls;
        cn_log_stats(logs[i], &ls);
        CHECK_EQ(ls.recovery_scanned_bytes, 0); /* closed cleanly */
    }
    for (int i = 0; i < NLOGS; i++) {
        check_every_offset(logs[i]);
        cn_log_close(logs[i]);
        unit_rmtree(dirs[i]);
        free(dirs[i]);
    }
    cn_log_set_fd_budget(0);
}

static bool same_file(int fd, const char *path)
{
    struct stat a, b;
    return fstat(fd, &a) == 0 && stat(path, &b) == 0 && a.st_ino == b.st_ino &&
           a.st_dev == b.st_dev;
}

/* A sync in flight keeps its descriptors: the cache does not close a
 * pinned one however many files others open; a file already closed, or
 * beyond the pin limit, is synced by name on the worker. */
UNIT_TEST(test_fdcache_pin_during_sync)
{
    cn_log_set_fd_budget(16);
    install_faults();
    struct cn_log_config cfg;
    cfg_small(&cfg);
    char *dirs[NLOGS];
    struct cn_log *logs[NLOGS];
    for (int i = 0; i < NLOGS; i++) {
        dirs[i] = unit_tmpdir("fdc");
        CHECK_EQ(cn_log_open(dirs[i], &cfg, &logs[i]), 0);
    }
    /* logs[0]'s file is open (just appended): pinned by the sync. */
    CHECK_EQ(append_one(logs[0], 3, 1000, 40, NULL), 0);
    struct cn_log_sync *s0 = cn_log_sync_begin(logs[0]);
    CHECK(s0 != NULL);
    /* Every other log appends twice: far more opens than the budget. */
    for (int r = 0; r < 2; r++)
        for (int i = 1; i < NLOGS; i++)
            CHECK_EQ(append_one(logs[i], 3, 1000 * (r + 1), 40, NULL), 0);
    struct cn_log_fd_stats st;
    cn_log_fd_stats(&st);
    CHECK_EQ(st.pinned, 1);
    CHECK(st.open <= 16);
    /* logs[1]'s .log was closed since: the sync reopens and pins it. */
    for (int i = 2; i < NLOGS; i++)
        CHECK_EQ(append_one(logs[i], 3, 3000, 40, NULL), 0);
    cn_log_fd_stats(&st);
    uint64_t opens = st.opens;
    struct cn_log_sync *s1 = cn_log_sync_begin(logs[1]);
    CHECK(s1 != NULL);
    cn_log_fd_stats(&st);
    CHECK_EQ(st.pinned, 2);
    CHECK_EQ(st.opens, opens + 1);
    /* The pinned descriptor still names logs[0]'s segment. */
    char *p0 = seg_file(dirs[0], 0, "log");
    int found = 0;
    DIR *d = opendir("/proc/self/fd");
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        int fd = atoi(de->d_name);
        if (de->d_name[0] != '.' && fd != dirfd(d) && same_file(fd, p0))
            found++;
    }
    closedir(d);
    CHECK_EQ(found, 1);
    free(p0);
    sync_calls = 0;
    CHECK_EQ(cn_log_sync_run(s0), 0);
    CHECK_EQ(sync_calls, 1);
    CHECK_EQ(cn_log_sync_end(logs[0], s0, 0), 0);
    CHECK_EQ(cn_log_synced_offset(logs[0]), 3);
    sync_calls = 0;
    CHECK_EQ(cn_log_sync_run(s1), 0);
    CHECK_EQ(sync_calls, 1);
    CHECK_EQ(cn_log_sync_end(logs[1], s1, 0), 0);
    CHECK_EQ(cn_log_synced_offset(logs[1]), 6);
    cn_log_fd_stats(&st);
    CHECK_EQ(st.pinned, 0);
    /* At most half the budget is pinned; the rest go by name. */
    struct cn_log_sync *ss[NLOGS];
    for (int i = 0; i < NLOGS; i++) {
        CHECK_EQ(append_one(logs[i], 3, 5000, 40, NULL), 0);
        ss[i] = cn_log_sync_begin(logs[i]);
        CHECK(ss[i] != NULL);
        cn_log_fd_stats(&st);
        CHECK(st.pinned <= 8);
        CHECK(st.open <= 16);
    }
    for (int i = 0; i < NLOGS; i++) {
        int err = cn_log_sync_run(ss[i]);
        CHECK_EQ(err, 0);
        CHECK_EQ(cn_log_sync_end(logs[i], ss[i], err), 0);
        CHECK_EQ(cn_log_synced_offset(logs[i]), cn_log_end_offset(logs[i]));
    }
    cn_log_fd_stats(&st);
    CHECK_EQ(st.pinned, 0);
    for (int i = 0; i < NLOGS; i++) {
        check_every_offset(logs[i]);
        cn_log_close(logs[i]);
        unit_rmtree(dirs[i]);
        free(dirs[i]);
    }
    remove_faults();
    cn_log_set_fd_budget(0);
}

/* A segment deleted while a sync that names it runs: its file is gone,
 * which is no failure (its data no longer matters). */
UNIT_TEST(test_fdcache_sync_deleted_segment)
{
    cn_log_set_fd_budget(16);
    struct cn_log_config cfg;
    cfg_small(&cfg);
    char *dirs[NLOGS];
    struct cn_log *logs[NLOGS];
    for (int i = 0; i < NLOGS; i++) {
        dirs[i] = unit_tmpdir("fdc");
        CHECK_EQ(cn_log_open(dirs[i], &cfg, &logs[i]), 0);
    }
    for (int i = 0; i < NLOGS; i++)
        CHECK_EQ(append_one(logs[i], 3, 1000, 40, NULL), 0);
    /* Eight syncs pin half the budget: the next goes by name. */
    struct cn_log_sync *held[8];
    for (int i = 0; i < 8; i++)
        held[i] = cn_log_sync_begin(logs[i + 1]);
    struct cn_log_sync *s = cn_log_sync_begin(logs[0]);
    CHECK(s != NULL);
    struct cn_log_fd_stats st;
    cn_log_fd_stats(&st);
    CHECK_EQ(st.pinned, 8);
    /* Everything deleted: the old active segment rolls and goes. */
    CHECK_EQ(cn_log_delete_records(logs[0], 3), 0);
    CHECK_EQ(cn_log_active_base(logs[0]), 3);
    int err = cn_log_sync_run(s);
    CHECK_EQ(err, -ENOENT);
    CHECK_EQ(cn_log_sync_end(logs[0], s, err), 0);
    CHECK(!cn_log_is_offline(logs[0]));
    CHECK_EQ(append_one(logs[0], 3, 2000, 40, NULL), 0);
    /* A live segment's file gone is a failure, though. */
    s = cn_log_sync_begin(logs[0]);
    CHECK(s != NULL);
    char *p = seg_file(dirs[0], 3, "log");
    CHECK_EQ(unlink(p), 0);
    err = cn_log_sync_run(s);
    CHECK_EQ(err, -ENOENT);
    enum cn_say_level lvl = cn_say_max_level;
    CHECK_EQ(cn_log_sync_end(logs[0], s, err), -ENOENT);
    cn_say_max_level = lvl;
    CHECK(cn_log_is_offline(logs[0]));
    free(p);
    for (int i = 0; i < 8; i++) {
        CHECK_EQ(cn_log_sync_run(held[i]), 0);
        CHECK_EQ(cn_log_sync_end(logs[i + 1], held[i], 0), 0);
        CHECK_EQ(cn_log_synced_offset(logs[i + 1]), 3);
    }
    for (int i = 0; i < NLOGS; i++) {
        cn_log_close(logs[i]);
        unit_rmtree(dirs[i]);
        free(dirs[i]);
    }
    cn_log_set_fd_budget(0);
}

/* EMFILE (sockets took the reserve) closes cached files and tries again
 * instead of failing the partition. */
UNIT_TEST(test_fdcache_emfile)
{
    cn_log_set_fd_budget(1000);
    install_faults();
    test_ops.open = test_open;
    test_ops.close = test_close;
    live_fds = 0;
    fake_fd_limit = 14; /* well below the budget */
    struct cn_log_config cfg;
    cfg_small(&cfg);
    char *dirs[NLOGS];
    struct cn_log *logs[NLOGS];
    for (int i = 0; i < NLOGS; i++) {
        dirs[i] = unit_tmpdir("fdc");
        CHECK_EQ(cn_log_open(dirs[i], &cfg, &logs[i]), 0);
    }
    for (int r = 0; r < 6; r++)
        for (int i = 0; i < NLOGS; i++) {
            int64_t base = -1;
            CHECK_EQ(append_one(logs[i], 3, 1000 * (r + 1), 40, &base), 0);
            CHECK_EQ(base, 3 * r);
            CHECK(!cn_log_is_offline(logs[i]));
        }
    struct cn_log_fd_stats st;
    cn_log_fd_stats(&st);
    CHECK(st.emfile > 0);
    CHECK(st.open <= 14);
    for (int i = 0; i < NLOGS; i++) {
        sync_now(logs[i]);
        check_every_offset(logs[i]);
    }
    for (int i = 0; i < NLOGS; i++)
        cn_log_close(logs[i]);
    fake_fd_limit = 0;
    for (int i = 0; i < NLOGS; i++) {
        CHECK_EQ(cn_log_open(dirs[i], &cfg, &logs[i]), 0);
        CHECK_EQ(cn_log_end_offset(logs[i]), 18);
        check_every_offset(logs[i]);
        cn_log_close(logs[i]);
        unit_rmtree(dirs[i]);
        free(dirs[i]);
    }
    remove_faults();
    cn_log_set_fd_budget(0);
}

UNIT_MAIN(test_round_trip_segments, test_read_bounds, test_index_lookup,
          test_roll_by_time, test_retention_bytes, test_retention_time,
          test_delete_records, test_clean_reopen_scans_nothing,
          test_offset_for_time, test_torn_tail, test_torn_middle_segment,
          test_corrupt_synced_segment_refused,
          test_torn_first_batch_middle_segment,
          test_missing_middle_segment, test_missing_active_segment,
          test_unreadable_segment_refused, test_misnamed_segment_refused,
          test_timeindex_truncated,
          test_torn_tail_reported_once, test_verify_finds_flipped_byte,
          test_index_rebuild, test_eio_on_write, test_eio_on_sync,
          test_short_writes, test_mid_append_failpoint, test_sync_flow,
          test_recovery_point, test_stray_files_and_delete, test_fuzz_corpus,
          test_kill9, test_enospc_append, test_enospc_roll,
          test_fsync_failpoint, test_fdcache_evict,
          test_fdcache_pin_during_sync, test_fdcache_sync_deleted_segment,
          test_fdcache_emfile)
