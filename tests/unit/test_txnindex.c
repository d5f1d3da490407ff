/* test_txnindex.c - the per-segment aborted-transaction index: overlap
 * queries across segments, idempotent adds, persistence, repair of torn or
 * stale files, deletion with segments, syncs and I/O errors.
 *
 * Every batch here holds one record and takes BATCH_BYTES, and segments are
 * SEG_BATCHES batches long, so segment k holds offsets 5k..5k+4. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/crc32c.h"
#include "base/err.h"
#include "base/say.h"
#include "base/wr.h"
#include "log/file.h"
#include "log/log.h"
#include "unit.h"

#define VLEN 40
#define BATCH_BYTES 108 /* 61 header + 47 for one record of VLEN bytes */
#define SEG_BATCHES 5

static int64_t fake_now = 1000000;
static int64_t fake_clock(void)
{
    return fake_now;
}

static void cfg_small(struct cn_log_config *cfg)
{
    cn_log_config_default(cfg);
    cfg->segment_bytes = SEG_BATCHES * BATCH_BYTES;
    cfg->index_interval_bytes = 128;
    cfg->now_ms = fake_clock;
}

/* One valid magic-2 batch holding one record with a VLEN-byte value. */
static void make_batch(struct cn_wr *w, int64_t ts)
{
    size_t start = w->len;
    cn_wr_i64(w, 0);                /* base offset */
    size_t len_slot = cn_wr_reserve(w, 4);
    cn_wr_i32(w, -1);               /* leader epoch */
    cn_wr_i8(w, 2);                 /* magic */
    size_t crc_slot = cn_wr_reserve(w, 4);
    cn_wr_i16(w, 0);                /* attributes */
    cn_wr_i32(w, 0);                /* last offset delta */
    cn_wr_i64(w, ts);               /* base timestamp */
    cn_wr_i64(w, ts);               /* max timestamp */
    cn_wr_i64(w, -1);               /* producer id */
    cn_wr_i16(w, -1);
    cn_wr_i32(w, -1);
    cn_wr_i32(w, 1);                /* records */
    cn_wr_varint(w, (int32_t)(6 + VLEN));
    cn_wr_i8(w, 0);                 /* record attributes */
    cn_wr_varlong(w, 0);            /* timestamp delta */
    cn_wr_varint(w, 0);             /* offset delta */
    cn_wr_varint(w, -1);            /* null key */
    cn_wr_varint(w, VLEN);
    for (int k = 0; k < VLEN; k++)
        cn_wr_i8(w, (int8_t)('a' + k % 26));
    cn_wr_varint(w, 0);             /* headers */
    cn_wr_patch_i32(w, len_slot, (int32_t)(w->len - start - 12));
    cn_wr_patch_u32(w, crc_slot,
                    cn_crc32c(0, w->buf + start + 21, w->len - start - 21));
}

/* Appends one batch; checks it got offset want and landed in the segment
 * the layout above predicts. */
static void append_at(struct cn_log *log, int64_t want)
{
    struct cn_wr w;
    cn_wr_init(&w, 256);
    make_batch(&w, 1000 + want);
    CHECK_EQ(w.len, BATCH_BYTES);
    int64_t base = -1;
    CHECK_EQ(cn_log_append(log, w.buf, w.len, &base), 0);
    CHECK_EQ(base, want);
    CHECK_EQ(cn_log_active_base(log), want / SEG_BATCHES * SEG_BATCHES);
    cn_wr_fini(&w);
}

static void append_upto(struct cn_log *log, int64_t end)
{
    for (int64_t o = cn_log_end_offset(log); o < end; o++)
        append_at(log, o);
}

static int add(struct cn_log *log, int64_t pid, int64_t first, int64_t last)
{
    struct cn_aborted_txn t = {pid, first, last, first};
    return cn_log_txnindex_add(log, &t);
}

/* The example: five aborted transactions (pid, first, last), the markers
 * appended in order as a broker would, over offsets 0..19:
 *   1 (0..3) seg 0;  2 (2..7) seg 5;  3 (6..8) seg 5;
 *   4 (1..12) seg 10;  5 (13..14) seg 10. */
static void build_example(struct cn_log *log)
{
    append_upto(log, 4);
    CHECK_EQ(add(log, 1, 0, 3), 0);
    append_upto(log, 8);
    CHECK_EQ(add(log, 2, 2, 7), 0);
    append_upto(log, 9);
    CHECK_EQ(add(log, 3, 6, 8), 0);
    append_upto(log, 13);
    CHECK_EQ(add(log, 4, 1, 12), 0);
    append_upto(log, 15);
    CHECK_EQ(add(log, 5, 13, 14), 0);
    append_upto(log, 20);
}

struct collect {
    char pids[32]; /* producer ids as digits, in callback order */
    int stop_after; /* return 7 after this many calls; 0 never */
};

static int collect_fn(void *arg, const struct cn_aborted_txn *t)
{
    struct collect *c = arg;
    size_t n = strlen(c->pids);
    CHECK(n + 1 < sizeof c->pids);
    c->pids[n] = (char)('0' + t->producer_id % 10);
    c->pids[n + 1] = '\0';
    CHECK_EQ(t->lso, t->first_offset);
    if (c->stop_after && (int)n + 1 >= c->stop_after)
        return 7;
    return 0;
}

static const char *query(struct cn_log *log, int64_t from, int64_t to)
{
    static struct collect c;
    memset(&c, 0, sizeof c);
    CHECK_EQ(cn_log_aborted_txns(log, from, to, collect_fn, &c), 0);
    return c.pids;
}

#define CHECK_Q(log, from, to, want)                                     \
    do {                                                                 \
        const char *got_ = query(log, from, to);                         \
        if (strcmp(got_, want) != 0) {                                   \
            fprintf(stderr, "  [%d, %d): got \"%s\", want \"%s\"\n",     \
                    (int)(from), (int)(to), got_, want);                 \
            unit_fail(__FILE__, __LINE__, "query " #from " " #to);       \
        }                                                                \
    } while (0)

/* Every query of the example, with its answer worked out by hand. */
static void check_example(struct cn_log *log)
{
    CHECK_Q(log, 0, 20, "12345");
    CHECK_Q(log, 0, 1, "1");     /* 4 starts at 1: to is exclusive */
    CHECK_Q(log, 0, 2, "14");
    CHECK_Q(log, 3, 4, "124");   /* 1 ends at 3: from is inclusive */
    CHECK_Q(log, 4, 5, "24");    /* markers in segments at or past to */
    CHECK_Q(log, 8, 9, "34");
    CHECK_Q(log, 9, 13, "4");
    CHECK_Q(log, 9, 14, "45");
    CHECK_Q(log, 14, 15, "5");
    CHECK_Q(log, 15, 20, "");
    CHECK_Q(log, 5, 5, "");      /* empty range */
    CHECK_Q(log, 7, 3, "");
}

static char *seg_file(const char *dir, int64_t base, const char *ext)
{
    char *p;
    if (asprintf(&p, "%s/%020lld.%s", dir, (long long)base, ext) < 0)
        abort();
    return p;
}

static int64_t file_size(const char *dir, int64_t base, const char *ext)
{
    char *p = seg_file(dir, base, ext);
    struct stat st;
    int64_t n = stat(p, &st) == 0 ? (int64_t)st.st_size : -1;
    free(p);
    return n;
}

/* Appends n bytes of junk to a segment file. */
static void append_junk(const char *dir, int64_t base, const char *ext,
                        size_t n)
{
    char *p = seg_file(dir, base, ext);
    int fd = open(p, O_WRONLY | O_APPEND);
    CHECK(fd >= 0);
    uint8_t junk[64];
    memset(junk, 0x5a, sizeof junk);
    CHECK(write(fd, junk, n) == (ssize_t)n);
    close(fd);
    free(p);
}

static void quiet(bool on)
{
    static enum cn_say_level saved;
    if (on) {
        saved = cn_say_max_level;
        cn_say_max_level = CN_SAY_ERROR;
    } else {
        cn_say_max_level = saved;
    }
}

UNIT_TEST(test_overlap_queries)
{
    char *dir = unit_tmpdir("txn");
    struct cn_log_config cfg;
    cfg_small(&cfg);
    struct cn_log *log;
    CHECK_EQ(cn_log_open(dir, &cfg, &log), 0);
    CHECK_Q(log, 0, 100, "");
    build_example(log);
    check_example(log);
    CHECK_Q(log, 0, INT64_MAX, "12345");
    /* fn's first non-zero return ends the walk and is returned. */
    struct collect c = {.stop_after = 2};
    CHECK_EQ(cn_log_aborted_txns(log, 0, 20, collect_fn, &c), 7);
    CHECK(strcmp(c.pids, "12") == 0);
    /* Only segments with an abort have a file. */
    CHECK_EQ(file_size(dir, 0, "txnindex"), 34);
    CHECK_EQ(file_size(dir, 5, "txnindex"), 68);
    CHECK_EQ(file_size(dir, 10, "txnindex"), 68);
    CHECK_EQ(file_size(dir, 15, "txnindex"), -1);
    cn_log_close(log);
    unit_rmtree(dir);
    free(dir);
}

UNIT_TEST(test_add_idempotent_and_bounds)
{
    char *dir = unit_tmpdir("txn");
    struct cn_log_config cfg;
    cfg_small(&cfg);
    struct cn_log *log;
    CHECK_EQ(cn_log_open(dir, &cfg, &log), 0);
    build_example(log);
    /* The replay adds what is already there: nothing is written. */
    CHECK_EQ(add(log, 2, 2, 7), 0);
    CHECK_EQ(add(log, 3, 6, 8), 0);
    CHECK_EQ(add(log, 9, 6, 6), 0); /* below the segment's last entry */
    CHECK_EQ(add(log, 1, 0, 3), 0);
    CHECK_EQ(file_size(dir, 5, "txnindex"), 68);
    CHECK_EQ(file_size(dir, 0, "txnindex"), 34);
    check_example(log);
    /* Outside the log, or not a transaction. */
    CHECK_EQ(add(log, 6, 19, 20), CN_ERANGE);
    CHECK_EQ(add(log, 6, 0, -1), CN_EINVAL);
    CHECK_EQ(add(log, 6, 12, 11), CN_EINVAL);
    /* A rolled segment that had none gets a file, synced at once. */
    append_upto(log, 21);
    CHECK_EQ(add(log, 7, 16, 19), 0);
    CHECK_EQ(file_size(dir, 15, "txnindex"), 34);
    CHECK_Q(log, 16, 17, "7");
    /* The active segment, too. */
    CHECK_EQ(add(log, 8, 14, 20), 0);
    CHECK_Q(log, 14, 15, "58");
    CHECK_EQ(file_size(dir, 20, "txnindex"), 34);
    cn_log_close(log);
    unit_rmtree(dir);
    free(dir);
}

UNIT_TEST(test_persist_and_format)
{
    char *dir = unit_tmpdir("txn");
    struct cn_log_config cfg;
    cfg_small(&cfg);
    struct cn_log *log;
    CHECK_EQ(cn_log_open(dir, &cfg, &log), 0);
    build_example(log);
    append_upto(log, 22);
    struct cn_aborted_txn t = {0x0102030405060708LL, 20, 21, 20};
    CHECK_EQ(cn_log_txnindex_add(log, &t), 0);
    char pid_digit[2] = {(char)('0' + t.producer_id % 10), '\0'};
    cn_log_close(log);

    /* Kafka's 34-byte big-endian entry. */
    static const uint8_t want[34] = {
        0, 0,                                         /* version */
        1, 2, 3, 4, 5, 6, 7, 8,                       /* producer id */
        0, 0, 0, 0, 0, 0, 0, 20,                      /* first offset */
        0, 0, 0, 0, 0, 0, 0, 21,                      /* last offset */
        0, 0, 0, 0, 0, 0, 0, 20};                     /* LSO */
    uint8_t got[40];
    char *p = seg_file(dir, 20, "txnindex");
    int fd = open(p, O_RDONLY);
    CHECK_EQ(read(fd, got, sizeof got), 34);
    close(fd);
    free(p);
    CHECK(memcmp(got, want, sizeof want) == 0);

    /* Clean reopen, then a reopen that trusts nothing. */
    for (int round = 0; round < 2; round++) {
        CHECK_EQ(cn_log_open(dir, &cfg, &log), 0);
        check_example(log);
        CHECK_EQ(cn_log_end_offset(log), 22);
        CHECK_EQ(add(log, 2, 2, 7), 0); /* replay: still idempotent */
        CHECK_EQ(file_size(dir, 5, "txnindex"), 68);
        CHECK_Q(log, 21, 22, pid_digit);
        cn_log_close(log);
        char *ck;
        if (asprintf(&ck, "%s/partition.checkpoint", dir) < 0)
            abort();
        unlink(ck);
        free(ck);
        if (round == 0)
            quiet(true);
    }
    quiet(false);
    unit_rmtree(dir);
    free(dir);
}

UNIT_TEST(test_torn_and_bad_entries)
{
    char *dir = unit_tmpdir("txn");
    struct cn_log_config cfg;
    cfg_small(&cfg);
    struct cn_log *log;
    CHECK_EQ(cn_log_open(dir, &cfg, &log), 0);
    build_example(log);
    cn_log_close(log);

    /* A torn append: 10 bytes of a 34-byte entry. */
    append_junk(dir, 5, "txnindex", 10);
    /* A whole entry of garbage (version 0x5a5a). */
    append_junk(dir, 10, "txnindex", 34);
    quiet(true);
    CHECK_EQ(cn_log_open(dir, &cfg, &log), 0);
    quiet(false);
    CHECK_EQ(file_size(dir, 5, "txnindex"), 68);
    CHECK_EQ(file_size(dir, 10, "txnindex"), 68);
    check_example(log);
    /* Appends continue where the good prefix ends. */
    CHECK_EQ(add(log, 6, 19, 19), 0);
    CHECK_EQ(file_size(dir, 15, "txnindex"), 34);
    cn_log_close(log);

    /* A bad version in the middle drops it and what follows it; an entry
     * naming a marker outside its segment is dropped likewise. */
    char *p = seg_file(dir, 10, "txnindex");
    int fd = open(p, O_WRONLY);
    CHECK(pwrite(fd, "\x00\x01", 2, 34) == 2); /* entry 2: version 1 */
    close(fd);
    free(p);
    p = seg_file(dir, 5, "txnindex");
    fd = open(p, O_WRONLY);
    CHECK(pwrite(fd, "\x00\x00\x00\x00\x00\x00\x00\x0b", 8, 18) == 8);
    close(fd); /* first entry: last offset 11, in segment 10 */
    free(p);
    quiet(true);
    CHECK_EQ(cn_log_open(dir, &cfg, &log), 0);
    quiet(false);
    CHECK_EQ(file_size(dir, 5, "txnindex"), 0);
    CHECK_EQ(file_size(dir, 10, "txnindex"), 34);
    CHECK_Q(log, 0, 20, "146");
    /* The replay puts them back. */
    CHECK_EQ(add(log, 2, 2, 7), 0);
    CHECK_EQ(add(log, 3, 6, 8), 0);
    CHECK_EQ(add(log, 5, 13, 14), 0);
    CHECK_Q(log, 0, 20, "123456");
    cn_log_close(log);
    unit_rmtree(dir);
    free(dir);
}

/* The log recovery cuts the marker off the end: its entry goes too. */
UNIT_TEST(test_entry_past_recovered_end)
{
    char *dir = unit_tmpdir("txn");
    struct cn_log_config cfg;
    cfg_small(&cfg);
    struct cn_log *log;
    CHECK_EQ(cn_log_open(dir, &cfg, &log), 0);
    build_example(log);
    CHECK_EQ(add(log, 6, 16, 17), 0);
    CHECK_EQ(add(log, 7, 18, 18), 0);
    CHECK_EQ(add(log, 8, 19, 19), 0);
    CHECK_EQ(file_size(dir, 15, "txnindex"), 3 * 34);
    cn_log_close(log);
    /* What a crash could leave: no clean checkpoint, and the last two
     * batches (offsets 18 and 19) torn off the log. */
    char *p = seg_file(dir, 15, "log");
    CHECK_EQ(truncate(p, 3 * BATCH_BYTES + 50), 0);
    free(p);
    char *ck;
    if (asprintf(&ck, "%s/partition.checkpoint", dir) < 0)
        abort();
    unlink(ck);
    free(ck);
    struct cn_log *log2;
    quiet(true);
    CHECK_EQ(cn_log_open(dir, &cfg, &log2), 0);
    quiet(false);
    CHECK_EQ(cn_log_end_offset(log2), 18);
    CHECK_EQ(file_size(dir, 15, "txnindex"), 34);
    CHECK_Q(log2, 0, 20, "123456");
    CHECK_Q(log2, 18, 19, "");
    CHECK_EQ(add(log2, 7, 18, 18), CN_ERANGE);
    append_at(log2, 18);
    CHECK_EQ(add(log2, 7, 18, 18), 0);
    CHECK_Q(log2, 18, 19, "7");
    cn_log_close(log2);
    unit_rmtree(dir);
    free(dir);
}

UNIT_TEST(test_deleted_with_segments)
{
    char *dir = unit_tmpdir("txn");
    struct cn_log_config cfg;
    cfg_small(&cfg);
    struct cn_log *log;
    CHECK_EQ(cn_log_open(dir, &cfg, &log), 0);
    build_example(log);
    /* DeleteRecords to 7 deletes segment 0 only. */
    CHECK_EQ(cn_log_delete_records(log, 7), 0);
    CHECK_EQ(file_size(dir, 0, "txnindex"), -1);
    CHECK_EQ(file_size(dir, 0, "log"), -1);
    CHECK_EQ(file_size(dir, 5, "txnindex"), 68);
    CHECK_Q(log, 7, 20, "2345");
    CHECK_EQ(add(log, 1, 0, 3), CN_ERANGE);
    /* Retention by bytes keeps the last two segments. */
    cfg.retention_bytes = 2 * SEG_BATCHES * BATCH_BYTES;
    cfg.retention_ms = -1;
    cn_log_set_config(log, &cfg);
    CHECK_EQ(cn_log_enforce_retention(log, fake_now), 1);
    CHECK_EQ(cn_log_start_offset(log), 10);
    CHECK_EQ(file_size(dir, 5, "txnindex"), -1);
    CHECK_EQ(file_size(dir, 10, "txnindex"), 68);
    CHECK_Q(log, 10, 20, "45");
    /* A stale file where the next segment goes is not inherited. */
    char *stale = seg_file(dir, 20, "txnindex");
    close(open(stale, O_WRONLY | O_CREAT, 0644));
    append_junk(dir, 20, "txnindex", 34);
    append_at(log, 20); /* rolls */
    CHECK_EQ(file_size(dir, 20, "txnindex"), -1);
    free(stale);
    cn_log_close(log);

    /* An orphan .txnindex (its .log gone) is removed at open. */
    char *orphan = seg_file(dir, 999, "txnindex");
    close(open(orphan, O_WRONLY | O_CREAT, 0644));
    free(orphan);
    CHECK_EQ(cn_log_open(dir, &cfg, &log), 0);
    CHECK_EQ(file_size(dir, 999, "txnindex"), -1);
    CHECK_Q(log, 0, 20, "45");
    CHECK_EQ(cn_log_delete(log), 0);
    struct stat st;
    CHECK(stat(dir, &st) != 0);
    free(dir);
}

/* --- file ops faults ---------------------------------------------------- */

static int inject_pwrite_err; /* -errno to return, 0 none */
static int sync_calls;        /* fdatasync calls seen */

static ssize_t test_pwrite(int fd, const void *buf, size_t n, off_t off)
{
    if (inject_pwrite_err)
        return inject_pwrite_err;
    return cn_file_ops_real.pwrite(fd, buf, n, off);
}

static int test_fdatasync(int fd)
{
    sync_calls++;
    return cn_file_ops_real.fdatasync(fd);
}

static struct cn_file_ops test_ops;

static void install_faults(void)
{
    test_ops = cn_file_ops_real;
    test_ops.pwrite = test_pwrite;
    test_ops.fdatasync = test_fdatasync;
    cn_file_ops = &test_ops;
    inject_pwrite_err = 0;
    sync_calls = 0;
}

static void remove_faults(void)
{
    cn_file_ops = &cn_file_ops_real;
}

static void sync_now(struct cn_log *log)
{
    struct cn_log_sync *s = cn_log_sync_begin(log);
    CHECK(s != NULL);
    if (s)
        cn_log_sync_end(log, s, cn_log_sync_run(s));
}

/* fdatasyncs made by the sync right after a roll, with or without an
 * abort in the rolled segment. */
static int syncs_after_roll(bool with_abort)
{
    char *dir = unit_tmpdir("txn");
    struct cn_log_config cfg;
    cfg_small(&cfg);
    struct cn_log *log;
    CHECK_EQ(cn_log_open(dir, &cfg, &log), 0);
    append_upto(log, 5);
    if (with_abort)
        CHECK_EQ(add(log, 1, 0, 4), 0);
    sync_now(log);
    append_upto(log, 6); /* rolls */
    install_faults();
    sync_now(log);
    int n = sync_calls;
    remove_faults();
    cn_log_close(log);
    unit_rmtree(dir);
    free(dir);
    return n;
}

UNIT_TEST(test_sync_includes_txnindex)
{
    /* .log, .index, .timeindex of the rolled segment, the active .log and
     * the checkpoint (the recovery point moved); plus the .txnindex when
     * the rolled segment has one. */
    CHECK_EQ(syncs_after_roll(false), 5);
    CHECK_EQ(syncs_after_roll(true), 6);
}

UNIT_TEST(test_write_error_offline)
{
    char *dir = unit_tmpdir("txn");
    struct cn_log_config cfg;
    cfg_small(&cfg);
    struct cn_log *log;
    CHECK_EQ(cn_log_open(dir, &cfg, &log), 0);
    build_example(log);
    install_faults();
    inject_pwrite_err = -EIO;
    quiet(true);
    CHECK_EQ(add(log, 6, 19, 19), CN_EOFFLINE);
    quiet(false);
    inject_pwrite_err = 0;
    CHECK(cn_log_is_offline(log));
    CHECK_EQ(add(log, 6, 19, 19), CN_EOFFLINE);
    CHECK_EQ(add(log, 2, 2, 7), CN_EOFFLINE);
    /* Lookups need no I/O and do not show the failed entry. */
    check_example(log);
    remove_faults();
    cn_log_close(log);
    /* The next open finds an empty file (created, never written). */
    CHECK_EQ(cn_log_open(dir, &cfg, &log), 0);
    check_example(log);
    CHECK_EQ(add(log, 6, 19, 19), 0);
    CHECK_Q(log, 19, 20, "6");
    cn_log_close(log);
    unit_rmtree(dir);
    free(dir);
}

UNIT_MAIN(test_overlap_queries, test_add_idempotent_and_bounds,
          test_persist_and_format, test_torn_and_bad_entries,
          test_entry_past_recovered_end, test_deleted_with_segments,
          test_sync_includes_txnindex, test_write_error_offline)
