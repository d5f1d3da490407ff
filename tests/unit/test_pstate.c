/* test_pstate.c - producer state: check outcomes, updates, transactions,
 * expiry, snapshots (round trip, corruption, pruning) and memory use. */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/say.h"
#include "producer/pstate.h"
#include "unit.h"

/* A data batch header: nrec records from base_seq, at base_offset. */
static struct cn_batch_hdr hdr(int64_t pid, int16_t epoch, int32_t base_seq,
                               int32_t nrec, int64_t base_offset, int64_t ts)
{
    struct cn_batch_hdr h;
    memset(&h, 0, sizeof h);
    h.base_offset = base_offset;
    h.magic = 2;
    h.last_offset_delta = nrec - 1;
    h.base_timestamp = ts;
    h.max_timestamp = ts;
    h.producer_id = pid;
    h.producer_epoch = epoch;
    h.base_sequence = base_seq;
    h.records_count = nrec;
    return h;
}

static struct cn_batch_hdr txn_hdr(int64_t pid, int16_t epoch,
                                   int32_t base_seq, int32_t nrec,
                                   int64_t base_offset, int64_t ts)
{
    struct cn_batch_hdr h = hdr(pid, epoch, base_seq, nrec, base_offset, ts);
    h.attributes = CN_BATCH_ATTR_TRANSACTIONAL;
    return h;
}

static struct cn_batch_hdr marker(int64_t pid, int16_t epoch, int64_t offset,
                                  int64_t ts)
{
    struct cn_batch_hdr h = hdr(pid, epoch, -1, 1, offset, ts);
    h.attributes = CN_BATCH_ATTR_TRANSACTIONAL | CN_BATCH_ATTR_CONTROL;
    return h;
}

/* Checks, then appends if the check says so; returns the check. */
static enum cn_pcheck put(struct cn_pstate *ps, struct cn_batch_hdr h)
{
    int64_t dup = -2;
    enum cn_pcheck c = cn_pstate_check(ps, &h, &dup);
    if (c == CN_PCHECK_APPEND)
        CHECK_EQ(cn_pstate_update(ps, &h, -1, 0, NULL), 0);
    return c;
}

static void upd(struct cn_pstate *ps, struct cn_batch_hdr h)
{
    CHECK_EQ(cn_pstate_update(ps, &h, -1, 0, NULL), 0);
}

static enum cn_pcheck chk(const struct cn_pstate *ps, struct cn_batch_hdr h,
                          int64_t *dup)
{
    int64_t d = -2;
    enum cn_pcheck c = cn_pstate_check(ps, &h, &d);
    if (dup)
        *dup = d;
    return c;
}

UNIT_TEST(test_append_in_sequence)
{
    struct cn_pstate *ps = cn_pstate_new();
    CHECK(ps != NULL);
    CHECK_EQ(cn_pstate_count(ps), 0);
    /* Unknown producer: any sequence. */
    CHECK_EQ(chk(ps, hdr(7, 0, 12345, 3, 0, 1), NULL), CN_PCHECK_APPEND);
    CHECK_EQ(put(ps, hdr(7, 0, 0, 3, 100, 1000)), CN_PCHECK_APPEND);
    CHECK_EQ(put(ps, hdr(7, 0, 3, 2, 103, 1001)), CN_PCHECK_APPEND);
    CHECK_EQ(cn_pstate_count(ps), 1);
    struct cn_pentry_info e;
    CHECK(cn_pstate_get(ps, 7, &e));
    CHECK_EQ(e.producer_id, 7);
    CHECK_EQ(e.epoch, 0);
    CHECK_EQ(e.last_sequence, 4);
    CHECK_EQ(e.last_offset, 104);
    CHECK_EQ(e.last_timestamp, 1001);
    CHECK_EQ(e.coordinator_epoch, -1);
    CHECK_EQ(e.txn_first_offset, -1);
    CHECK_EQ(e.batches, 2);
    CHECK(!cn_pstate_get(ps, 8, &e));
    /* Gap. */
    CHECK_EQ(chk(ps, hdr(7, 0, 6, 1, 0, 1), NULL), CN_PCHECK_OUT_OF_ORDER);
    /* Overlapping but not equal to a remembered batch. */
    CHECK_EQ(chk(ps, hdr(7, 0, 3, 1, 0, 1), NULL), CN_PCHECK_OUT_OF_ORDER);
    CHECK_EQ(chk(ps, hdr(7, 0, 5, 1, 0, 1), NULL), CN_PCHECK_APPEND);
    /* Batches without a producer id are ignored by update. */
    upd(ps, hdr(-1, -1, -1, 1, 105, 1));
    CHECK_EQ(cn_pstate_count(ps), 1);
    cn_pstate_free(ps);
}

UNIT_TEST(test_duplicates_last_five)
{
    struct cn_pstate *ps = cn_pstate_new();
    /* Six batches of 2 records: seqs 0-1, 2-3, ..., 10-11; offsets 10 apart
     * to show they are the producer's own. */
    for (int i = 0; i < 6; i++)
        CHECK_EQ(put(ps, hdr(42, 3, 2 * i, 2, 1000 + 10 * i, i)),
                 CN_PCHECK_APPEND);
    for (int i = 1; i < 6; i++) {
        int64_t dup = -2;
        CHECK_EQ(chk(ps, hdr(42, 3, 2 * i, 2, 0, 0), &dup),
                 CN_PCHECK_DUPLICATE);
        CHECK_EQ(dup, 1000 + 10 * i);
    }
    /* The sixth batch back is forgotten: not a duplicate, out of order. */
    CHECK_EQ(chk(ps, hdr(42, 3, 0, 2, 0, 0), NULL), CN_PCHECK_OUT_OF_ORDER);
    /* Same first seq, different length: not a duplicate. */
    CHECK_EQ(chk(ps, hdr(42, 3, 10, 1, 0, 0), NULL), CN_PCHECK_OUT_OF_ORDER);
    /* The same sequences under a newer epoch are not duplicates. */
    CHECK_EQ(chk(ps, hdr(42, 4, 10, 2, 0, 0), NULL), CN_PCHECK_OUT_OF_ORDER);
    /* Older epoch: fenced even when it looks like a duplicate. */
    CHECK_EQ(chk(ps, hdr(42, 2, 10, 2, 0, 0), NULL), CN_PCHECK_FENCED);
    CHECK_EQ(chk(ps, hdr(42, 2, 12, 2, 0, 0), NULL), CN_PCHECK_FENCED);
    cn_pstate_free(ps);
}

UNIT_TEST(test_epochs)
{
    struct cn_pstate *ps = cn_pstate_new();
    CHECK_EQ(put(ps, hdr(1, 5, 0, 1, 0, 0)), CN_PCHECK_APPEND);
    CHECK_EQ(put(ps, hdr(1, 5, 1, 1, 1, 0)), CN_PCHECK_APPEND);
    CHECK_EQ(chk(ps, hdr(1, 4, 2, 1, 0, 0), NULL), CN_PCHECK_FENCED);
    CHECK_EQ(chk(ps, hdr(1, 6, 2, 1, 0, 0), NULL), CN_PCHECK_OUT_OF_ORDER);
    CHECK_EQ(chk(ps, hdr(1, 6, 0, 1, 0, 0), NULL), CN_PCHECK_APPEND);
    CHECK_EQ(put(ps, hdr(1, 6, 0, 4, 2, 0)), CN_PCHECK_APPEND);
    struct cn_pentry_info e;
    CHECK(cn_pstate_get(ps, 1, &e));
    CHECK_EQ(e.epoch, 6);
    CHECK_EQ(e.batches, 1); /* the old epoch's batches are forgotten */
    CHECK_EQ(e.last_sequence, 3);
    CHECK_EQ(e.last_offset, 5);
    CHECK_EQ(chk(ps, hdr(1, 6, 4, 1, 0, 0), NULL), CN_PCHECK_APPEND);
    CHECK_EQ(chk(ps, hdr(1, 5, 4, 1, 0, 0), NULL), CN_PCHECK_FENCED);

    /* An entry without an epoch (-1) accepts any sequence. */
    upd(ps, hdr(2, -1, 17, 1, 10, 0));
    CHECK_EQ(chk(ps, hdr(2, -1, 40, 1, 0, 0), NULL), CN_PCHECK_APPEND);
    CHECK_EQ(chk(ps, hdr(2, 0, 40, 1, 0, 0), NULL), CN_PCHECK_APPEND);
    int64_t dup;
    CHECK_EQ(chk(ps, hdr(2, -1, 17, 1, 0, 0), &dup), CN_PCHECK_DUPLICATE);
    CHECK_EQ(dup, 10);
    cn_pstate_free(ps);
}

UNIT_TEST(test_sequence_wrap)
{
    struct cn_pstate *ps = cn_pstate_new();
    /* 3 records ending exactly at INT32_MAX. */
    CHECK_EQ(put(ps, hdr(9, 0, INT32_MAX - 2, 3, 50, 0)), CN_PCHECK_APPEND);
    CHECK_EQ(chk(ps, hdr(9, 0, 1, 1, 0, 0), NULL), CN_PCHECK_OUT_OF_ORDER);
    CHECK_EQ(put(ps, hdr(9, 0, 0, 2, 53, 0)), CN_PCHECK_APPEND);
    /* A batch that wraps inside: INT32_MAX-1 .. 1 (4 records). */
    struct cn_pstate *ps2 = cn_pstate_new();
    CHECK_EQ(put(ps2, hdr(9, 0, INT32_MAX - 1, 4, 70, 0)), CN_PCHECK_APPEND);
    struct cn_pentry_info e;
    CHECK(cn_pstate_get(ps2, 9, &e));
    CHECK_EQ(e.last_sequence, 1);
    int64_t dup;
    CHECK_EQ(chk(ps2, hdr(9, 0, INT32_MAX - 1, 4, 0, 0), &dup),
             CN_PCHECK_DUPLICATE);
    CHECK_EQ(dup, 70);
    CHECK_EQ(chk(ps2, hdr(9, 0, 2, 1, 0, 0), NULL), CN_PCHECK_APPEND);
    /* Duplicates across the wrap in the first table. */
    CHECK_EQ(chk(ps, hdr(9, 0, INT32_MAX - 2, 3, 0, 0), &dup),
             CN_PCHECK_DUPLICATE);
    CHECK_EQ(dup, 50);
    CHECK_EQ(chk(ps, hdr(9, 0, 0, 2, 0, 0), &dup), CN_PCHECK_DUPLICATE);
    CHECK_EQ(dup, 53);
    cn_pstate_free(ps);
    cn_pstate_free(ps2);
}

UNIT_TEST(test_transactions)
{
    struct cn_pstate *ps = cn_pstate_new();
    int64_t closed = -2;
    CHECK_EQ(put(ps, txn_hdr(5, 0, 0, 2, 100, 10)), CN_PCHECK_APPEND);
    CHECK_EQ(put(ps, txn_hdr(5, 0, 2, 2, 110, 11)), CN_PCHECK_APPEND);
    struct cn_pentry_info e;
    CHECK(cn_pstate_get(ps, 5, &e));
    CHECK_EQ(e.txn_first_offset, 100);
    struct cn_batch_hdr m = marker(5, 0, 120, 12);
    CHECK_EQ(cn_pstate_update(ps, &m, CN_CONTROL_COMMIT, 7, &closed), 0);
    CHECK_EQ(closed, 100);
    CHECK(cn_pstate_get(ps, 5, &e));
    CHECK_EQ(e.txn_first_offset, -1);
    CHECK_EQ(e.coordinator_epoch, 7);
    CHECK_EQ(e.last_timestamp, 12);
    /* The verification guard counts markers; data batches leave it. */
    CHECK_EQ(e.markers, 1);
    /* Markers leave sequences alone. */
    CHECK_EQ(e.batches, 2);
    CHECK_EQ(e.last_sequence, 3);
    CHECK_EQ(e.last_offset, 111);
    int64_t dup;
    CHECK_EQ(chk(ps, hdr(5, 0, 2, 2, 0, 0), &dup), CN_PCHECK_DUPLICATE);
    CHECK_EQ(dup, 110);
    CHECK_EQ(chk(ps, hdr(5, 0, 4, 1, 0, 0), NULL), CN_PCHECK_APPEND);

    /* A marker with nothing open reports -1. */
    m = marker(5, 0, 121, 13);
    closed = -2;
    CHECK_EQ(cn_pstate_update(ps, &m, CN_CONTROL_ABORT, 8, &closed), 0);
    CHECK_EQ(closed, -1);
    CHECK_EQ(cn_pstate_update(ps, &m, CN_CONTROL_ABORT, 8, NULL), 0);

    /* Next transaction, aborted by a marker that bumps the epoch (the
     * coordinator's timeout abort): the new epoch starts at 0. */
    CHECK_EQ(put(ps, txn_hdr(5, 0, 4, 1, 130, 14)), CN_PCHECK_APPEND);
    CHECK(cn_pstate_get(ps, 5, &e));
    CHECK_EQ(e.txn_first_offset, 130);
    m = marker(5, 1, 131, 15);
    CHECK_EQ(cn_pstate_update(ps, &m, CN_CONTROL_ABORT, 9, &closed), 0);
    CHECK_EQ(closed, 130);
    CHECK(cn_pstate_get(ps, 5, &e));
    CHECK_EQ(e.epoch, 1);
    CHECK_EQ(e.batches, 0);
    CHECK_EQ(e.last_sequence, -1);
    CHECK_EQ(chk(ps, hdr(5, 0, 5, 1, 0, 0), NULL), CN_PCHECK_FENCED);
    /* Same epoch, nothing remembered: must start at 0 (Kafka's
     * NO_SEQUENCE). */
    CHECK_EQ(chk(ps, hdr(5, 1, 5, 1, 0, 0), NULL), CN_PCHECK_OUT_OF_ORDER);
    CHECK_EQ(chk(ps, hdr(5, 1, 0, 1, 0, 0), NULL), CN_PCHECK_APPEND);
    /* Non-transactional data does not open a transaction; a marker for a
     * producer never seen creates its entry. */
    CHECK_EQ(put(ps, hdr(6, 0, 0, 1, 140, 16)), CN_PCHECK_APPEND);
    CHECK(cn_pstate_get(ps, 6, &e));
    CHECK_EQ(e.txn_first_offset, -1);
    m = marker(77, 3, 141, 17);
    CHECK_EQ(cn_pstate_update(ps, &m, CN_CONTROL_COMMIT, 2, &closed), 0);
    CHECK_EQ(closed, -1);
    CHECK(cn_pstate_get(ps, 77, &e));
    CHECK_EQ(e.epoch, 3);
    CHECK_EQ(e.coordinator_epoch, 2);
    cn_pstate_free(ps);
}

static int count_cb(void *arg, const struct cn_pentry_info *e)
{
    (void)e;
    (*(int *)arg)++;
    return 0;
}

static int stop_cb(void *arg, const struct cn_pentry_info *e)
{
    (void)e;
    (*(int *)arg)++;
    return 99;
}

UNIT_TEST(test_expiry)
{
    struct cn_pstate *ps = cn_pstate_new();
    for (int i = 0; i < 1000; i++)
        upd(ps, hdr(i, 0, 0, 1, i, i < 500 ? 1000 : 5000));
    /* Producer 3 has an open transaction: it stays however old. */
    upd(ps, txn_hdr(3, 0, 1, 1, 2000, 1000));
    CHECK_EQ(cn_pstate_expire(ps, 5999, 5000), 0);
    CHECK_EQ(cn_pstate_expire(ps, 6000, 5000), 499);
    CHECK_EQ(cn_pstate_count(ps), 501);
    struct cn_pentry_info e;
    CHECK(cn_pstate_get(ps, 3, &e));
    CHECK(!cn_pstate_get(ps, 4, &e));
    for (int i = 500; i < 1000; i++)
        CHECK(cn_pstate_get(ps, i, &e));
    int n = 0;
    CHECK_EQ(cn_pstate_foreach(ps, count_cb, &n), 0);
    CHECK_EQ(n, 501);
    n = 0;
    CHECK_EQ(cn_pstate_foreach(ps, stop_cb, &n), 99);
    CHECK_EQ(n, 1);
    size_t before = cn_pstate_memory(ps);
    CHECK_EQ(cn_pstate_expire(ps, 100000, 5000), 500);
    CHECK_EQ(cn_pstate_count(ps), 1);
    CHECK(cn_pstate_memory(ps) < before);
    CHECK(cn_pstate_get(ps, 3, &e));
    /* Table still works after shrinking. */
    for (int i = 0; i < 100; i++)
        upd(ps, hdr(10000 + i, 0, 0, 1, i, 1));
    CHECK_EQ(cn_pstate_count(ps), 101);
    CHECK(cn_pstate_get(ps, 10099, &e));
    cn_pstate_clear(ps);
    CHECK_EQ(cn_pstate_count(ps), 0);
    CHECK(!cn_pstate_get(ps, 3, &e));
    upd(ps, hdr(1, 0, 0, 1, 0, 1));
    CHECK_EQ(cn_pstate_count(ps), 1);
    cn_pstate_free(ps);
}

/* A table with a bit of everything: full rings, wrapped rings, partial
 * rings, open transactions, markers only. */
static struct cn_pstate *sample_table(void)
{
    struct cn_pstate *ps = cn_pstate_new();
    int64_t off = 0;
    for (int p = 0; p < 50; p++) {
        int nb = p % 9; /* 0..8 batches: rings full and wrapped */
        for (int b = 0; b < nb; b++) {
            struct cn_batch_hdr h = hdr(1000 + p, (int16_t)(p % 3), b * 3, 3,
                                        off, 100 * p + b);
            if (p % 4 == 0)
                h.attributes = CN_BATCH_ATTR_TRANSACTIONAL;
            upd(ps, h);
            off += 3;
        }
        if (nb == 0 || p % 7 == 0) {
            struct cn_batch_hdr m = marker(1000 + p, (int16_t)(p % 3), off++,
                                           100 * p + 50);
            CHECK_EQ(cn_pstate_update(ps, &m, CN_CONTROL_COMMIT, p, NULL),
                     0);
        }
    }
    return ps;
}

/* Every entry of a has an identical entry in b, and the same batches
 * (probed by duplicate checks of every remembered one). */
static void check_same(const struct cn_pstate *a, const struct cn_pstate *b)
{
    CHECK_EQ(cn_pstate_count(a), cn_pstate_count(b));
    for (int p = 0; p < 50; p++) {
        struct cn_pentry_info x, y;
        bool hx = cn_pstate_get(a, 1000 + p, &x);
        bool hy = cn_pstate_get(b, 1000 + p, &y);
        CHECK_EQ(hx, hy);
        if (!hx || !hy)
            continue;
        CHECK_EQ(x.producer_id, y.producer_id);
        CHECK_EQ(x.epoch, y.epoch);
        CHECK_EQ(x.last_sequence, y.last_sequence);
        CHECK_EQ(x.last_offset, y.last_offset);
        CHECK_EQ(x.last_timestamp, y.last_timestamp);
        CHECK_EQ(x.coordinator_epoch, y.coordinator_epoch);
        CHECK_EQ(x.txn_first_offset, y.txn_first_offset);
        CHECK_EQ(x.batches, y.batches);
        for (int s = 0; s < 8 * 3; s += 3) {
            int64_t da = -2, db = -2;
            struct cn_batch_hdr h = hdr(1000 + p, x.epoch, s, 3, 0, 0);
            CHECK_EQ(cn_pstate_check(a, &h, &da), cn_pstate_check(b, &h, &db));
            CHECK_EQ(da, db);
        }
    }
}

static char *path_in(const char *dir, const char *name)
{
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s/%s", dir, name);
    return buf;
}

static bool exists(const char *dir, const char *name)
{
    struct stat st;
    return stat(path_in(dir, name), &st) == 0;
}

static int count_files(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        if (de->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}

UNIT_TEST(test_snapshot_round_trip)
{
    char *dir = unit_tmpdir("pstate");
    struct cn_pstate *ps = sample_table();
    CHECK_EQ(cn_pstate_snapshot_write(ps, dir, 123), 0);
    CHECK(exists(dir, "00000000000000000123.snapshot"));
    CHECK(!exists(dir, "00000000000000000123.snapshot.tmp"));
    struct cn_pstate *ld = cn_pstate_new();
    upd(ld, hdr(5, 0, 0, 1, 0, 0)); /* load replaces what was there */
    int64_t at = -2;
    CHECK_EQ(cn_pstate_snapshot_load(ld, dir, 1000, &at), 0);
    CHECK_EQ(at, 123);
    check_same(ps, ld);
    /* The loaded table keeps working: an in-sequence append. */
    struct cn_pentry_info e;
    CHECK(cn_pstate_get(ld, 1008, &e));
    CHECK_EQ(e.batches, 5);
    CHECK_EQ(chk(ld, hdr(1008, e.epoch, e.last_sequence + 1, 1, 0, 0), NULL),
             CN_PCHECK_APPEND);

    /* An empty table round-trips too. */
    struct cn_pstate *empty = cn_pstate_new();
    CHECK_EQ(cn_pstate_snapshot_write(empty, dir, 200), 0);
    CHECK_EQ(cn_pstate_snapshot_load(ld, dir, 1000, &at), 0);
    CHECK_EQ(at, 200);
    CHECK_EQ(cn_pstate_count(ld), 0);

    /* No snapshot at all. */
    char *dir2 = unit_tmpdir("pstate-none");
    CHECK_EQ(cn_pstate_snapshot_load(ld, dir2, 1000, &at), 0);
    CHECK_EQ(at, -1);
    CHECK(cn_pstate_snapshot_load(ld, "/nonexistent/pstate", 1, &at) < 0);
    unit_rmtree(dir2);
    free(dir2);

    cn_pstate_free(empty);
    cn_pstate_free(ps);
    cn_pstate_free(ld);
    unit_rmtree(dir);
    free(dir);
}

static void flip_byte(const char *path, long at)
{
    FILE *f = fopen(path, "r+b");
    CHECK(f != NULL);
    if (!f)
        return;
    fseek(f, at, SEEK_SET);
    int c = fgetc(f);
    fseek(f, at, SEEK_SET);
    fputc(c ^ 0x40, f);
    fclose(f);
}

UNIT_TEST(test_snapshot_corrupt_fallback)
{
    char *dir = unit_tmpdir("pstate");
    struct cn_pstate *ps = sample_table();
    struct cn_pstate *ps2 = cn_pstate_new();
    upd(ps2, hdr(1, 0, 0, 1, 0, 0));
    CHECK_EQ(cn_pstate_snapshot_write(ps, dir, 100), 0);
    CHECK_EQ(cn_pstate_snapshot_write(ps2, dir, 200), 0);
    CHECK_EQ(cn_pstate_snapshot_write(ps2, dir, 300), 0);
    /* A stray temp file from a crash mid-write. */
    FILE *f = fopen(path_in(dir, "00000000000000000400.snapshot.tmp"), "w");
    fputs("junk", f);
    fclose(f);

    /* 300: flipped byte in the body; 200: truncated. */
    flip_byte(path_in(dir, "00000000000000000300.snapshot"), 20);
    CHECK_EQ(truncate(path_in(dir, "00000000000000000200.snapshot"), 30), 0);

    enum cn_say_level lvl = cn_say_max_level;
    cn_say_max_level = CN_SAY_ERROR; /* the warnings are expected */
    struct cn_pstate *ld = cn_pstate_new();
    int64_t at = -2;
    CHECK_EQ(cn_pstate_snapshot_load(ld, dir, 1000, &at), 0);
    cn_say_max_level = lvl;
    CHECK_EQ(at, 100);
    check_same(ps, ld);
    CHECK(!exists(dir, "00000000000000000300.snapshot"));
    CHECK(!exists(dir, "00000000000000000200.snapshot"));
    CHECK(!exists(dir, "00000000000000000400.snapshot.tmp"));
    CHECK(exists(dir, "00000000000000000100.snapshot"));

    /* Magic, version and a header-only stub. */
    CHECK_EQ(cn_pstate_snapshot_write(ps2, dir, 500), 0);
    CHECK_EQ(cn_pstate_snapshot_write(ps2, dir, 600), 0);
    CHECK_EQ(cn_pstate_snapshot_write(ps2, dir, 700), 0);
    flip_byte(path_in(dir, "00000000000000000700.snapshot"), 0);
    flip_byte(path_in(dir, "00000000000000000600.snapshot"), 5);
    CHECK_EQ(truncate(path_in(dir, "00000000000000000500.snapshot"), 5), 0);
    cn_say_max_level = CN_SAY_ERROR;
    CHECK_EQ(cn_pstate_snapshot_load(ld, dir, 1000, &at), 0);
    cn_say_max_level = lvl;
    CHECK_EQ(at, 100);
    CHECK_EQ(count_files(dir), 1);

    /* The only snapshot corrupt: nothing loaded, table empty. */
    flip_byte(path_in(dir, "00000000000000000100.snapshot"), 40);
    cn_say_max_level = CN_SAY_ERROR;
    CHECK_EQ(cn_pstate_snapshot_load(ld, dir, 1000, &at), 0);
    cn_say_max_level = lvl;
    CHECK_EQ(at, -1);
    CHECK_EQ(cn_pstate_count(ld), 0);
    CHECK_EQ(count_files(dir), 0);

    cn_pstate_free(ps);
    cn_pstate_free(ps2);
    cn_pstate_free(ld);
    unit_rmtree(dir);
    free(dir);
}

UNIT_TEST(test_snapshot_above_max_offset)
{
    char *dir = unit_tmpdir("pstate");
    struct cn_pstate *ps = sample_table();
    struct cn_pstate *ps2 = cn_pstate_new();
    upd(ps2, hdr(1, 0, 0, 1, 0, 0));
    CHECK_EQ(cn_pstate_snapshot_write(ps, dir, 100), 0);
    CHECK_EQ(cn_pstate_snapshot_write(ps2, dir, 150), 0);
    CHECK_EQ(cn_pstate_snapshot_write(ps2, dir, 151), 0);
    CHECK_EQ(cn_pstate_snapshot_write(ps2, dir, 9000), 0);
    enum cn_say_level lvl = cn_say_max_level;
    cn_say_max_level = CN_SAY_WARN;
    struct cn_pstate *ld = cn_pstate_new();
    int64_t at = -2;
    CHECK_EQ(cn_pstate_snapshot_load(ld, dir, 150, &at), 0);
    cn_say_max_level = lvl;
    CHECK_EQ(at, 150); /* a snapshot at max_offset itself is fine */
    CHECK_EQ(cn_pstate_count(ld), 1);
    CHECK(!exists(dir, "00000000000000000151.snapshot"));
    CHECK(!exists(dir, "00000000000000009000.snapshot"));
    CHECK(exists(dir, "00000000000000000100.snapshot"));
    CHECK_EQ(cn_pstate_snapshot_load(ld, dir, 149, &at), 0);
    CHECK_EQ(at, 100);
    check_same(ps, ld);
    CHECK_EQ(cn_pstate_snapshot_load(ld, dir, 99, &at), 0);
    CHECK_EQ(at, -1);
    CHECK_EQ(count_files(dir), 0);
    cn_pstate_free(ps);
    cn_pstate_free(ps2);
    cn_pstate_free(ld);
    unit_rmtree(dir);
    free(dir);
}

UNIT_TEST(test_snapshot_prune)
{
    char *dir = unit_tmpdir("pstate");
    struct cn_pstate *ps = cn_pstate_new();
    for (int i = 1; i <= 6; i++)
        CHECK_EQ(cn_pstate_snapshot_write(ps, dir, i * 100), 0);
    /* Unrelated files survive. */
    FILE *f = fopen(path_in(dir, "00000000000000000000.log"), "w");
    fclose(f);
    CHECK_EQ(cn_pstate_snapshot_prune(dir, 250, 10), 0);
    CHECK(!exists(dir, "00000000000000000100.snapshot"));
    CHECK(!exists(dir, "00000000000000000200.snapshot"));
    CHECK(exists(dir, "00000000000000000300.snapshot"));
    CHECK_EQ(count_files(dir), 5);
    CHECK_EQ(cn_pstate_snapshot_prune(dir, 0, 2), 0);
    CHECK_EQ(count_files(dir), 3);
    CHECK(exists(dir, "00000000000000000500.snapshot"));
    CHECK(exists(dir, "00000000000000000600.snapshot"));
    CHECK(exists(dir, "00000000000000000000.log"));
    /* A snapshot exactly at min_offset stays. */
    CHECK_EQ(cn_pstate_snapshot_prune(dir, 500, 5), 0);
    CHECK(exists(dir, "00000000000000000500.snapshot"));
    CHECK_EQ(cn_pstate_snapshot_prune(dir, 1000, 5), 0);
    CHECK_EQ(count_files(dir), 1);
    CHECK_EQ(cn_pstate_snapshot_prune(dir, 1000, 0), 0);
    cn_pstate_free(ps);
    unit_rmtree(dir);
    free(dir);
}

UNIT_TEST(test_memory_100k)
{
    struct cn_pstate *ps = cn_pstate_new();
    const int n = 100000;
    for (int i = 0; i < n; i++) {
        int64_t pid = 1000000 + (int64_t)i * 7;
        for (int b = 0; b < 5; b++)
            upd(ps, hdr(pid, 0, b * 10, 10, (int64_t)i * 50 + b * 10, i));
    }
    CHECK_EQ(cn_pstate_count(ps), n);
    size_t mem = cn_pstate_memory(ps);
    double per = (double)mem / n;
    printf("  pstate: %d producers, %zu bytes, %.1f bytes per entry\n", n,
           mem, per);
    CHECK(per < 160);
    /* Spot-check lookups. */
    int64_t dup;
    CHECK_EQ(chk(ps, hdr(1000000 + 7 * 99999, 0, 30, 10, 0, 0), &dup),
             CN_PCHECK_DUPLICATE);
    CHECK_EQ(dup, 99999LL * 50 + 30);
    struct cn_pentry_info e;
    CHECK(!cn_pstate_get(ps, 1000001, &e));
    cn_pstate_free(ps);
}

static int collect_open(void *arg, int64_t pid, int64_t first, int64_t ts)
{
    (void)ts;
    int64_t *v = arg;
    size_t n = (size_t)v[0];
    v[1 + 2 * n] = pid;
    v[2 + 2 * n] = first;
    v[0]++;
    return 0;
}

/* The LSO holder: the oldest open transaction, in any close order, and
 * after a snapshot round trip (which loads entries in table order). */
UNIT_TEST(test_open_transactions_ordered)
{
    struct cn_pstate *ps = cn_pstate_new();
    CHECK_EQ(cn_pstate_first_open_offset(ps), -1);
    upd(ps, hdr(9, 0, 0, 1, 0, 0));            /* idempotent: opens nothing */
    upd(ps, txn_hdr(30, 0, 0, 2, 1, 0));       /* 1..2 */
    upd(ps, txn_hdr(10, 0, 0, 1, 3, 0));       /* 3 */
    upd(ps, txn_hdr(30, 0, 2, 1, 4, 0));       /* same txn, no new open */
    upd(ps, txn_hdr(20, 0, 0, 1, 5, 0));       /* 5 */
    CHECK_EQ(cn_pstate_open_count(ps), 3);
    CHECK_EQ(cn_pstate_first_open_offset(ps), 1);

    /* Close the middle one: the holder is unchanged. */
    struct cn_batch_hdr m = marker(10, 0, 6, 0);
    int64_t closed = -2;
    CHECK_EQ(cn_pstate_update(ps, &m, CN_CONTROL_ABORT, 0, &closed), 0);
    CHECK_EQ(closed, 3);
    CHECK_EQ(cn_pstate_first_open_offset(ps), 1);
    CHECK_EQ(cn_pstate_open_count(ps), 2);

    char *dir = unit_tmpdir("pstate-open");
    CHECK_EQ(cn_pstate_snapshot_write(ps, dir, 7), 0);
    struct cn_pstate *ld = cn_pstate_new();
    int64_t at = -1;
    CHECK_EQ(cn_pstate_snapshot_load(ld, dir, 100, &at), 0);
    CHECK_EQ(at, 7);
    CHECK_EQ(cn_pstate_first_open_offset(ld), 1);
    int64_t v[1 + 2 * 4] = {0};
    CHECK_EQ(cn_pstate_foreach_open(ld, collect_open, v), 0);
    CHECK_EQ(v[0], 2);
    CHECK_EQ(v[1], 30);
    CHECK_EQ(v[2], 1);
    CHECK_EQ(v[3], 20);
    CHECK_EQ(v[4], 5);

    /* Close the oldest: the next open one takes over; then none. */
    m = marker(30, 0, 8, 0);
    CHECK_EQ(cn_pstate_update(ld, &m, CN_CONTROL_COMMIT, 0, &closed), 0);
    CHECK_EQ(closed, 1);
    CHECK_EQ(cn_pstate_first_open_offset(ld), 5);
    /* A repeated marker closes nothing. */
    CHECK_EQ(cn_pstate_update(ld, &m, CN_CONTROL_COMMIT, 0, &closed), 0);
    CHECK_EQ(closed, -1);
    CHECK_EQ(cn_pstate_first_open_offset(ld), 5);
    m = marker(20, 0, 9, 0);
    CHECK_EQ(cn_pstate_update(ld, &m, CN_CONTROL_ABORT, 0, &closed), 0);
    CHECK_EQ(cn_pstate_first_open_offset(ld), -1);
    CHECK_EQ(cn_pstate_open_count(ld), 0);

    /* Many transactions opening and closing keep the set bounded and
     * ordered. */
    for (int64_t i = 0; i < 10000; i++) {
        upd(ld, txn_hdr(100 + i, 0, 0, 1, 100 + 2 * i, 0));
        if (i >= 3) {
            m = marker(100 + i - 3, 0, 100 + 2 * i + 1, 0);
            CHECK_EQ(cn_pstate_update(ld, &m, CN_CONTROL_COMMIT, 0, NULL), 0);
        }
    }
    CHECK_EQ(cn_pstate_open_count(ld), 3);
    CHECK_EQ(cn_pstate_first_open_offset(ld), 100 + 2 * 9997);
    cn_pstate_clear(ld);
    CHECK_EQ(cn_pstate_first_open_offset(ld), -1);

    cn_pstate_free(ld);
    cn_pstate_free(ps);
    unit_rmtree(dir);
    free(dir);
}

/* A transaction closed by a marker the high watermark has not passed is
 * still unstable (Kafka's unreplicated transactions): the LSO stays at
 * its first offset until the marker is below the high watermark. */
UNIT_TEST(test_unreplicated_marker_keeps_lso)
{
    struct cn_pstate *ps = cn_pstate_new();
    CHECK_EQ(put(ps, txn_hdr(5, 0, 0, 2, 100, 10)), CN_PCHECK_APPEND);
    CHECK_EQ(put(ps, txn_hdr(6, 0, 0, 1, 102, 10)), CN_PCHECK_APPEND);
    CHECK_EQ(cn_pstate_first_unstable_offset(ps, 103), 100);
    struct cn_batch_hdr m = marker(5, 0, 103, 12);
    CHECK_EQ(cn_pstate_update(ps, &m, CN_CONTROL_COMMIT, 0, NULL), 0);
    CHECK_EQ(cn_pstate_first_open_offset(ps), 102);
    /* Marker at 103, high watermark 103: not replicated yet. */
    CHECK_EQ(cn_pstate_first_unstable_offset(ps, 103), 100);
    CHECK_EQ(cn_pstate_first_unstable_offset(ps, 104), 102);
    m = marker(6, 0, 104, 13);
    CHECK_EQ(cn_pstate_update(ps, &m, CN_CONTROL_ABORT, 0, NULL), 0);
    CHECK_EQ(cn_pstate_first_unstable_offset(ps, 104), 102);
    CHECK_EQ(cn_pstate_first_unstable_offset(ps, 105), -1);
    /* Pruned once stable; what is left still counts. */
    cn_pstate_stable_at(ps, 104);
    CHECK_EQ(cn_pstate_first_unstable_offset(ps, 104), 102);
    cn_pstate_stable_at(ps, 105);
    CHECK_EQ(cn_pstate_first_unstable_offset(ps, 0), -1);
    cn_pstate_free(ps);
}

UNIT_MAIN(test_append_in_sequence, test_unreplicated_marker_keeps_lso,
          test_open_transactions_ordered, test_duplicates_last_five,
          test_epochs, test_sequence_wrap, test_transactions, test_expiry,
          test_snapshot_round_trip, test_snapshot_corrupt_fallback,
          test_snapshot_above_max_offset, test_snapshot_prune,
          test_memory_100k)
