/*
 * test_logclean.c - the cleaner's engine on disk (src/log/log_clean.c):
 * real partition logs in a temp dir, cleaned, reopened and read back; a
 * crash at each fail point (a forked child killed there) then recovery.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/err.h"
#include "base/failpoint.h"
#include "base/say.h"
#include "base/wr.h"
#include "log/file.h"
#include "log/log.h"
#include "log/log_clean.h"
#include "producer/pstate.h"
#include "proto/batch.h"
#include "unit.h"

static int64_t fake_now = 1000000;
static int64_t fake_clock(void)
{
    return fake_now;
}

struct fx {
    char *root;
    char dir[PATH_MAX];
    struct cn_log_config cfg;
    struct cn_log *log;
    bool roll_next;
};

static void fx_reopen(struct fx *f)
{
    CHECK_EQ(cn_log_open(f->dir, &f->cfg, &f->log), 0);
}

static void fx_open(struct fx *f)
{
    memset(f, 0, sizeof *f);
    f->root = unit_tmpdir("lclean");
    snprintf(f->dir, sizeof f->dir, "%s/t-0", f->root);
    cn_log_config_default(&f->cfg);
    f->cfg.segment_bytes = 1 << 20;
    f->cfg.index_interval_bytes = 64;
    f->cfg.now_ms = fake_clock;
    fx_reopen(f);
}

static void fx_close(struct fx *f)
{
    if (f->log)
        cn_log_close(f->log);
    f->log = NULL;
}

static void fx_fini(struct fx *f)
{
    fx_close(f);
    unit_rmtree(f->root);
    free(f->root);
}

/* The next append starts a new segment. */
static void roll(struct fx *f)
{
    f->roll_next = true;
}

static int64_t append(struct fx *f, struct cn_wr *w)
{
    int64_t base = -1;
    if (f->roll_next) {
        struct cn_log_config c = f->cfg;
        c.segment_bytes = 1;
        cn_log_set_config(f->log, &c);
    }
    CHECK_EQ(cn_log_append(f->log, w->buf, w->len, &base), 0);
    if (f->roll_next)
        cn_log_set_config(f->log, &f->cfg);
    f->roll_next = false;
    return base;
}

/* A data batch: kv is "k=v,k2=v2", "k=" a tombstone.  pid -1: plain. */
static int64_t put(struct fx *f, int64_t pid, int32_t seq, bool txn,
                   const char *kv)
{
    struct cn_batch_params pm = CN_BATCH_PARAMS_INIT;
    struct cn_batch_builder b;
    pm.producer_id = pid;
    pm.producer_epoch = pid >= 0 ? 0 : -1;
    pm.base_sequence = pid >= 0 ? seq : -1;
    pm.transactional = txn;
    cn_batch_builder_init(&b, &pm);
    char buf[256];
    snprintf(buf, sizeof buf, "%s", kv);
    for (char *save, *t = strtok_r(buf, ",", &save); t;
         t = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(t, '=');
        *eq = 0;
        struct cn_bytes k = cn_bytes_str(t);
        struct cn_bytes v = eq[1] ? cn_bytes_str(eq + 1) : CN_BYTES_NULL;
        cn_batch_builder_add(&b, fake_now, k, v, NULL, 0);
    }
    struct cn_wr w;
    cn_wr_init(&w, 256);
    CHECK_EQ(cn_batch_builder_finish(&b, &w), 0);
    cn_batch_builder_fini(&b);
    int64_t base = append(f, &w);
    cn_wr_fini(&w);
    return base;
}

/* A marker; an ABORT also gets its .txnindex entry, as the broker adds. */
static int64_t mark(struct fx *f, int64_t pid, bool commit, int64_t first)
{
    struct cn_wr w;
    cn_wr_init(&w, 128);
    CHECK_EQ(cn_batch_build_control(&w, pid, 0, commit, 1, fake_now), 0);
    int64_t off = append(f, &w);
    cn_wr_fini(&w);
    if (!commit) {
        struct cn_aborted_txn t = {pid, first, off, off + 1};
        CHECK_EQ(cn_log_txnindex_add(f->log, &t), 0);
    }
    return off;
}

/* Everything readable, as "off:k=v" (v "~" for a tombstone), "off:C0"
 * (ABORT), "off:C1" (COMMIT), "off:E" (an emptied batch), with the
 * producer state rebuilt from it as a restart would. */
static void dump(struct fx *f, char *out, size_t n, struct cn_pstate *ps)
{
    struct cn_wr w, scratch;
    cn_wr_init(&w, 1 << 16);
    cn_wr_init(&scratch, 1024);
    size_t used = 0;
    out[0] = 0;
    int64_t at = cn_log_start_offset(f->log), end = cn_log_end_offset(f->log);
    while (at < end) {
        cn_wr_reset(&w);
        size_t got = 0;
        CHECK_EQ(cn_log_read(f->log, at, end, 1 << 16, true, &w, &got), 0);
        if (got == 0)
            break;
        for (size_t pos = 0; pos < got;) {
            struct cn_batch_hdr h;
            struct cn_record_iter it;
            struct cn_record rec;
            CHECK_EQ(cn_batch_hdr_parse(w.buf + pos, got - pos, &h), 0);
            size_t len = cn_batch_size(&h);
            CHECK_EQ(cn_batch_compute_crc(w.buf + pos, len), h.crc);
            CHECK_EQ(cn_batch_records(w.buf + pos, len, 0, &scratch, &h, &it),
                     0);
            if (ps)
                CHECK_EQ(cn_pstate_update(ps, &h,
                                          cn_batch_is_control(&h) ? 1 : -1,
                                          1, NULL), 0);
            if (h.records_count == 0)
                used += (size_t)snprintf(out + used, n - used, "%lld:E ",
                                         (long long)h.base_offset);
            while (cn_record_iter_next(&it, &rec) == 1) {
                if (cn_batch_is_control(&h)) {
                    int16_t t = -1;
                    CHECK_EQ(cn_control_key_parse(rec.key, &t), 0);
                    used += (size_t)snprintf(out + used, n - used,
                                             "%lld:C%d ",
                                             (long long)rec.offset, t);
                    continue;
                }
                used += (size_t)snprintf(
                    out + used, n - used, "%lld:%.*s=%.*s ",
                    (long long)rec.offset, (int)rec.key.len, rec.key.ptr,
                    rec.value.len < 0 ? 1 : (int)rec.value.len,
                    rec.value.len < 0 ? (const uint8_t *)"~" : rec.value.ptr);
            }
            at = cn_batch_last_offset(&h) + 1;
            pos += len;
        }
    }
    if (used && out[used - 1] == ' ')
        out[used - 1] = 0;
    cn_wr_fini(&w);
    cn_wr_fini(&scratch);
}

static void params(struct fx *f, struct cn_log_clean_params *p)
{
    memset(p, 0, sizeof *p);
    p->now_ms = fake_now;
    p->delete_retention_ms = 1000;
    p->lso = cn_log_end_offset(f->log);
    p->dedupe_bytes = 1 << 20;
}

static int clean(struct fx *f, struct cn_log_clean_stats *st)
{
    struct cn_log_clean_params p;
    params(f, &p);
    return cn_log_clean_now(f->log, &p, st);
}

static int segments(struct fx *f)
{
    struct cn_log_stats s;
    cn_log_stats(f->log, &s);
    return s.segments;
}

/* Files in the partition dir ending with suffix. */
static int count_files(const char *dir, const char *suffix)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *de;
    size_t sl = strlen(suffix);
    while (d && (de = readdir(d)) != NULL) {
        size_t l = strlen(de->d_name);
        n += l >= sl && !strcmp(de->d_name + l - sl, suffix);
    }
    if (d)
        closedir(d);
    return n;
}

static int count_aborted_cb(void *arg, const struct cn_aborted_txn *t)
{
    (void)t;
    (*(int *)arg)++;
    return 0;
}

static int aborted_entries(struct fx *f)
{
    int n = 0;
    cn_log_aborted_txns(f->log, 0, INT64_MAX, count_aborted_cb, &n);
    return n;
}

#define BIG 4096

static void vreport(void *arg, const char *line)
{
    (void)arg;
    fprintf(stderr, "  verify: %s\n", line);
}

/* Latest value per key survives, offsets unchanged, segments merged;
 * reads from inside a removed range go on to the next survivor; the
 * result reopens (after a clean close and after a crash-style full
 * recovery) exactly the same. */
UNIT_TEST(test_survivors_offsets_reads)
{
    struct fx f;
    fx_open(&f);
    put(&f, -1, 0, false, "a=1,b=1");     /* 0,1 */
    put(&f, -1, 0, false, "c=1");         /* 2 */
    roll(&f);
    put(&f, -1, 0, false, "a=2");         /* 3 */
    put(&f, -1, 0, false, "b=2,d=1");     /* 4,5 */
    roll(&f);
    put(&f, -1, 0, false, "a=3,c=");      /* 6,7: c's tombstone */
    roll(&f);
    put(&f, -1, 0, false, "z=active");    /* 8: active, never cleaned */
    CHECK_EQ(segments(&f), 4);
    struct cn_log_clean_stats st;
    CHECK_EQ(clean(&f, &st), 0);
    char got[BIG];
    dump(&f, got, sizeof got, NULL);
    CHECK(!strcmp(got, "4:b=2 5:d=1 6:a=3 7:c=~ 8:z=active"));
    if (strcmp(got, "4:b=2 5:d=1 6:a=3 7:c=~ 8:z=active"))
        fprintf(stderr, "  got %s\n", got);
    CHECK_EQ(st.segments_before, 3);
    CHECK_EQ(st.segments_after, 1);
    CHECK_EQ(st.records_read, 8);
    CHECK_EQ(st.records_removed, 4);
    CHECK_EQ(st.cleaned_to, 8);
    CHECK(st.bytes_written < st.bytes_read);
    CHECK_EQ(segments(&f), 2);
    CHECK_EQ(cn_log_clean_checkpoint(f.log), 8);
    CHECK_EQ(cn_log_end_offset(f.log), 9);
    CHECK_EQ(cn_log_start_offset(f.log), 0);
    /* A fetch at a removed offset starts at the next batch kept. */
    struct cn_wr w;
    cn_wr_init(&w, 1024);
    size_t n = 0;
    CHECK_EQ(cn_log_read(f.log, 1, 9, 1 << 16, true, &w, &n), 0);
    struct cn_batch_hdr h;
    CHECK_EQ(cn_batch_hdr_parse(w.buf, w.len, &h), 0);
    CHECK_EQ(h.base_offset, 4); /* batches 0..1 and 3 went, 2 is c=1 gone */
    cn_wr_fini(&w);
    /* Nothing more to clean until more is written. */
    CHECK_EQ(clean(&f, NULL), -EAGAIN);
    fx_close(&f);
    fx_reopen(&f);
    char again[BIG];
    dump(&f, again, sizeof again, NULL);
    CHECK(!strcmp(got, again));
    CHECK_EQ(cn_log_clean_checkpoint(f.log), 8);
    fx_close(&f);
    /* A crash-style open scans every segment (no checkpoint). */
    char ck[2 * PATH_MAX];
    snprintf(ck, sizeof ck, "%s/partition.checkpoint", f.dir);
    CHECK_EQ(unlink(ck), 0);
    fx_reopen(&f);
    struct cn_log_stats ls;
    cn_log_stats(f.log, &ls);
    CHECK(ls.recovery_scanned_bytes > 0);
    CHECK_EQ(ls.recovery_truncated_bytes, 0);
    dump(&f, again, sizeof again, NULL);
    CHECK(!strcmp(got, again));
    /* The whole-log verifier agrees the cleaned segment is sound. */
    struct cn_log_verify v;
    CHECK_EQ(cn_log_verify(f.dir, vreport, NULL, &v), 0);
    CHECK_EQ(v.bad_segments, 0);
    fx_fini(&f);
}

/* The last batch of a cleaned group stays even when all its records are
 * superseded: emptied, so the cleaned segment ends where the old ones did
 * (no gap between segments) and is never an empty file, which recovery
 * would take for a torn write and delete everything after. */
UNIT_TEST(test_group_end_kept)
{
    struct fx f;
    fx_open(&f);
    put(&f, -1, 0, false, "x=1");  /* 0 */
    put(&f, -1, 0, false, "a=1");  /* 1 */
    roll(&f);
    put(&f, -1, 0, false, "a=2");  /* 2 */
    roll(&f);
    put(&f, -1, 0, false, "z=1");  /* 3 active */
    /* One segment per group. */
    struct cn_log_config c = f.cfg;
    c.segment_bytes = 1;
    cn_log_set_config(f.log, &c);
    struct cn_log_clean_stats st;
    CHECK_EQ(clean(&f, &st), 0);
    CHECK_EQ(st.segments_after, 2);
    CHECK_EQ(st.batches_emptied, 1);
    char got[BIG];
    dump(&f, got, sizeof got, NULL);
    CHECK(!strcmp(got, "0:x=1 1:E 2:a=2 3:z=1"));
    if (strcmp(got, "0:x=1 1:E 2:a=2 3:z=1"))
        fprintf(stderr, "  got %s\n", got);
    fx_close(&f);
    struct cn_log_verify v;
    CHECK_EQ(cn_log_verify(f.dir, vreport, NULL, &v), 0);
    CHECK_EQ(v.bad_segments, 0);
    CHECK_EQ(v.gaps, 0);
    fx_reopen(&f);
    dump(&f, got, sizeof got, NULL);
    CHECK(!strcmp(got, "0:x=1 1:E 2:a=2 3:z=1"));
    /* Merged with the next segment, it is no group's last any more. */
    roll(&f);
    put(&f, -1, 0, false, "y=1");
    CHECK_EQ(clean(&f, &st), 0);
    dump(&f, got, sizeof got, NULL);
    CHECK(!strcmp(got, "0:x=1 2:a=2 3:z=1 4:y=1"));
    CHECK_EQ(segments(&f), 2);
    fx_fini(&f);
}

/* A transaction aborted across three segments, cleaned as two groups
 * (KAFKA-8351: the tracker carries across groups): its data goes in
 * every group, the older committed value of its key survives, the
 * marker and its .txnindex entry stay while data was there, then go
 * once the delete horizon has passed. */
UNIT_TEST(test_abort_three_segments_two_groups)
{
    struct fx f;
    fx_open(&f);
    put(&f, -1, 0, false, "a=old");             /* 0 */
    int64_t first = put(&f, 7, 0, true, "a=x1"); /* 1 */
    roll(&f);
    put(&f, 7, 1, true, "a=x2");                /* 2 */
    put(&f, -1, 0, false, "b=1");               /* 3 */
    roll(&f);
    put(&f, 7, 2, true, "a=x3,b=x");            /* 4,5 */
    roll(&f);
    mark(&f, 7, false, first);                  /* 6: ABORT */
    put(&f, -1, 0, false, "c=1");               /* 7 */
    roll(&f);
    put(&f, -1, 0, false, "z=1");               /* 8 active */
    /* Groups: segments 0+1 fit segment.bytes, 2 and 3 go to a second. */
    struct stat s0, s1;
    char p[2 * PATH_MAX];
    snprintf(p, sizeof p, "%s/%020d.log", f.dir, 0);
    CHECK_EQ(stat(p, &s0), 0);
    snprintf(p, sizeof p, "%s/%020d.log", f.dir, 2);
    CHECK_EQ(stat(p, &s1), 0);
    struct cn_log_config c = f.cfg;
    c.segment_bytes = s0.st_size + s1.st_size;
    cn_log_set_config(f.log, &c);
    CHECK_EQ(aborted_entries(&f), 1);
    struct cn_log_clean_stats st;
    CHECK_EQ(clean(&f, &st), 0);
    CHECK_EQ(st.segments_before, 4);
    CHECK_EQ(st.segments_after, 2);
    char got[BIG];
    dump(&f, got, sizeof got, NULL);
    const char *want = "0:a=old 3:b=1 6:C0 7:c=1 8:z=1";
    CHECK(!strcmp(got, want));
    if (strcmp(got, want))
        fprintf(stderr, "  got %s\n", got);
    CHECK_EQ(aborted_entries(&f), 1);
    /* Second pass (more written): no data left, so the marker gets its
     * horizon and stays until then; its entry with it. */
    put(&f, -1, 0, false, "z=2");
    roll(&f);
    put(&f, -1, 0, false, "y=1");
    CHECK_EQ(clean(&f, NULL), 0);
    dump(&f, got, sizeof got, NULL);
    CHECK(strstr(got, "6:C0") != NULL);
    CHECK_EQ(aborted_entries(&f), 1);
    /* Past the horizon: marker and entry gone. */
    fake_now += 5000;
    put(&f, -1, 0, false, "y=2");
    roll(&f);
    put(&f, -1, 0, false, "x=1");
    CHECK_EQ(clean(&f, NULL), 0);
    dump(&f, got, sizeof got, NULL);
    CHECK(strstr(got, "C0") == NULL);
    CHECK(strstr(got, "0:a=old") != NULL);
    CHECK_EQ(aborted_entries(&f), 0);
    fx_close(&f);
    fx_reopen(&f);
    CHECK_EQ(aborted_entries(&f), 0);
    fx_fini(&f);
}

/* The LSO inside a segment: the segment is rewritten whole (as Kafka
 * does), the open transaction's data stays, and a transaction aborted
 * past the LSO in it still loses its data and keeps marker and entry. */
UNIT_TEST(test_lso_inside_segment)
{
    struct fx f;
    fx_open(&f);
    put(&f, -1, 0, false, "a=1");               /* 0 */
    put(&f, 5, 0, true, "d=1");                 /* 1: open, LSO */
    int64_t first = put(&f, 4, 0, true, "c=1"); /* 2: aborted */
    mark(&f, 4, false, first);                  /* 3 */
    put(&f, -1, 0, false, "a=2");               /* 4 */
    roll(&f);
    put(&f, -1, 0, false, "z=1");               /* 5 active */
    struct cn_log_clean_params p;
    params(&f, &p);
    p.lso = 1;
    struct cn_log_clean_stats st;
    CHECK_EQ(cn_log_clean_now(f.log, &p, &st), 0);
    CHECK_EQ(st.cleaned_to, 1);
    char got[BIG];
    dump(&f, got, sizeof got, NULL);
    const char *want = "0:a=1 1:d=1 3:C0 4:a=2 5:z=1";
    CHECK(!strcmp(got, want));
    if (strcmp(got, want))
        fprintf(stderr, "  got %s\n", got);
    CHECK_EQ(aborted_entries(&f), 1);
    fx_fini(&f);
}

/* A COMMIT marker's record key is 00 00 00 01; a user key of the same
 * bytes written later must not dedupe the marker away (KAFKA-14055). */
UNIT_TEST(test_marker_key_collides)
{
    struct fx f;
    fx_open(&f);
    put(&f, 5, 0, true, "k=v");           /* 0 */
    mark(&f, 5, true, 0);                 /* 1: COMMIT */
    /* The user record keyed exactly like the marker. */
    struct cn_batch_params pm = CN_BATCH_PARAMS_INIT;
    struct cn_batch_builder b;
    cn_batch_builder_init(&b, &pm);
    static const uint8_t mk[4] = {0, 0, 0, 1};
    struct cn_bytes key = {mk, 4};
    cn_batch_builder_add(&b, fake_now, key, cn_bytes_str("user"), NULL, 0);
    struct cn_wr w;
    cn_wr_init(&w, 128);
    CHECK_EQ(cn_batch_builder_finish(&b, &w), 0);
    cn_batch_builder_fini(&b);
    append(&f, &w);                       /* 2 */
    cn_wr_fini(&w);
    roll(&f);
    put(&f, -1, 0, false, "z=1");
    CHECK_EQ(clean(&f, NULL), 0);
    char got[BIG];
    dump(&f, got, sizeof got, NULL);
    CHECK(strstr(got, "0:k=v") != NULL);
    CHECK(strstr(got, "1:C1") != NULL);
    CHECK(strstr(got, "2:") != NULL);
    fx_fini(&f);
}

/* A tombstone survives its first pass (and gets a horizon), survives a
 * pass before the horizon, and goes on the first pass after it. */
UNIT_TEST(test_tombstone_expiry_two_passes)
{
    struct fx f;
    fx_open(&f);
    put(&f, -1, 0, false, "a=1");  /* 0 */
    put(&f, -1, 0, false, "a=");   /* 1: tombstone */
    roll(&f);
    put(&f, -1, 0, false, "b=1");  /* 2 */
    CHECK_EQ(clean(&f, NULL), 0);
    char got[BIG];
    dump(&f, got, sizeof got, NULL);
    CHECK(!strcmp(got, "1:a=~ 2:b=1"));
    /* Before the horizon (delete.retention.ms 1000 from the pass). */
    fake_now += 500;
    roll(&f);
    put(&f, -1, 0, false, "c=1");
    CHECK_EQ(clean(&f, NULL), 0);
    dump(&f, got, sizeof got, NULL);
    CHECK(strstr(got, "1:a=~") != NULL);
    fake_now += 1000;
    roll(&f);
    put(&f, -1, 0, false, "d=1");
    CHECK_EQ(clean(&f, NULL), 0);
    dump(&f, got, sizeof got, NULL);
    CHECK(!strcmp(got, "2:b=1 3:c=1 4:d=1"));
    if (strcmp(got, "2:b=1 3:c=1 4:d=1"))
        fprintf(stderr, "  got %s\n", got);
    fx_fini(&f);
}

/* An idempotent producer whose only batch has every record superseded:
 * the batch is kept empty (offset range, epoch, sequence), the log still
 * opens after a full recovery scan and verifies clean, and the producer
 * state rebuilt from it has the producer's last sequence and offset. */
UNIT_TEST(test_producer_batch_emptied)
{
    struct fx f;
    fx_open(&f);
    int64_t off = put(&f, 9, 41, false, "a=p,b=p"); /* 0,1: seqs 41,42 */
    put(&f, -1, 0, false, "a=2,b=2");                /* 2,3 */
    roll(&f);
    put(&f, -1, 0, false, "z=1");
    struct cn_clean_producer pr = {9, 0, off + 1};
    struct cn_log_clean_params p;
    params(&f, &p);
    p.producers = &pr;
    p.n_producers = 1;
    struct cn_log_clean_stats st;
    CHECK_EQ(cn_log_clean_now(f.log, &p, &st), 0);
    CHECK_EQ(st.batches_emptied, 1);
    char got[BIG];
    struct cn_pstate *ps = cn_pstate_new();
    dump(&f, got, sizeof got, ps);
    CHECK(!strcmp(got, "0:E 2:a=2 3:b=2 4:z=1"));
    struct cn_pentry_info e;
    CHECK(cn_pstate_get(ps, 9, &e));
    CHECK_EQ(e.last_sequence, 42);
    CHECK_EQ(e.last_offset, 1);
    CHECK_EQ(e.epoch, 0);
    cn_pstate_free(ps);
    fx_close(&f);
    char ck[2 * PATH_MAX];
    snprintf(ck, sizeof ck, "%s/partition.checkpoint", f.dir);
    CHECK_EQ(unlink(ck), 0);
    fx_reopen(&f);
    struct cn_log_stats ls;
    cn_log_stats(f.log, &ls);
    CHECK_EQ(ls.recovery_truncated_bytes, 0);
    dump(&f, got, sizeof got, NULL);
    CHECK(!strcmp(got, "0:E 2:a=2 3:b=2 4:z=1"));
    struct cn_log_verify v;
    CHECK_EQ(cn_log_verify(f.dir, vreport, NULL, &v), 0);
    CHECK_EQ(v.bad_segments, 0);
    CHECK_EQ(v.batches, 3);
    /* Without the producer in state the empty batch goes. */
    roll(&f);
    put(&f, -1, 0, false, "y=1");
    CHECK_EQ(clean(&f, NULL), 0);
    dump(&f, got, sizeof got, NULL);
    CHECK(strstr(got, ":E") == NULL);
    fx_fini(&f);
}

/* Appends during the run land in the active segment and survive; a
 * segment deleted under the job (DeleteRecords) makes the end abandon it
 * with nothing swapped and no file left. */
UNIT_TEST(test_changes_during_run)
{
    struct fx f;
    fx_open(&f);
    put(&f, -1, 0, false, "a=1");
    roll(&f);
    put(&f, -1, 0, false, "a=2");
    roll(&f);
    put(&f, -1, 0, false, "b=1");
    struct cn_log_clean_params p;
    params(&f, &p);
    struct cn_log_clean_job *j;
    CHECK_EQ(cn_log_clean_begin(f.log, &p, &j), 0);
    struct cn_log_clean_job *j2;
    CHECK_EQ(cn_log_clean_begin(f.log, &p, &j2), -EBUSY);
    put(&f, -1, 0, false, "a=3");
    roll(&f);
    put(&f, -1, 0, false, "c=1");
    CHECK_EQ(cn_log_clean_run(j), 0);
    CHECK(count_files(f.dir, ".cleaned") > 0);
    CHECK_EQ(cn_log_clean_end(f.log, j, 0, NULL), 0);
    cn_log_clean_free(j);
    char got[BIG];
    dump(&f, got, sizeof got, NULL);
    CHECK(!strcmp(got, "1:a=2 2:b=1 3:a=3 4:c=1"));
    if (strcmp(got, "1:a=2 2:b=1 3:a=3 4:c=1"))
        fprintf(stderr, "  got %s\n", got);

    params(&f, &p);
    CHECK_EQ(cn_log_clean_begin(f.log, &p, &j), 0);
    CHECK_EQ(cn_log_clean_run(j), 0);
    CHECK_EQ(cn_log_delete_records(f.log, 3), 0);
    CHECK_EQ(cn_log_clean_end(f.log, j, 0, NULL), -EAGAIN);
    cn_log_clean_free(j);
    CHECK_EQ(count_files(f.dir, ".cleaned"), 0);
    dump(&f, got, sizeof got, NULL);
    CHECK(!strcmp(got, "3:a=3 4:c=1"));
    /* And the next passes work (c=2 is in the active segment, so only
     * the one after it rolls removes c=1). */
    roll(&f);
    put(&f, -1, 0, false, "c=2");
    CHECK_EQ(clean(&f, NULL), 0);
    roll(&f);
    put(&f, -1, 0, false, "d=1");
    CHECK_EQ(clean(&f, NULL), 0);
    dump(&f, got, sizeof got, NULL);
    CHECK(!strcmp(got, "3:a=3 5:c=2 6:d=1"));
    if (strcmp(got, "3:a=3 5:c=2 6:d=1"))
        fprintf(stderr, "  got %s\n", got);
    fx_fini(&f);
}

/* A batch whose bytes rotted on disk fails the pass (CN_ECORRUPT) with
 * the log left as it was, instead of being rewritten with a fresh CRC.
 * And a key map too small for one batch fails it too (CN_ETOOBIG). */
UNIT_TEST(test_corrupt_batch_refused)
{
    struct fx f;
    fx_open(&f);
    put(&f, -1, 0, false, "a=1");
    put(&f, -1, 0, false, "a=2,b=valuevalue");
    roll(&f);
    put(&f, -1, 0, false, "z=1");
    fx_close(&f);
    char p[2 * PATH_MAX];
    snprintf(p, sizeof p, "%s/%020d.log", f.dir, 0);
    FILE *fp = fopen(p, "r+b");
    CHECK(fp != NULL);
    struct stat sb;
    CHECK_EQ(stat(p, &sb), 0);
    fseek(fp, sb.st_size - 3, SEEK_SET); /* inside b's value */
    fputc('X', fp);
    fclose(fp);
    fx_reopen(&f); /* clean close: the segment is trusted, not scanned */
    cn_corrupt_hush();
    CHECK_EQ(clean(&f, NULL), CN_ECORRUPT);
    cn_corrupt_unhush();
    CHECK(!cn_log_is_offline(f.log));
    CHECK_EQ(count_files(f.dir, ".cleaned"), 0);
    CHECK_EQ(segments(&f), 2);
    /* A key map too small for the first batch's keys is an error, not a
     * pass that succeeds without moving on. */
    struct cn_log_clean_params prm;
    params(&f, &prm);
    prm.dedupe_bytes = 8;
    CHECK_EQ(cn_log_clean_now(f.log, &prm, NULL), CN_ETOOBIG);
    CHECK_EQ(cn_log_clean_checkpoint(f.log), 0);
    struct cn_wr w;
    cn_wr_init(&w, 1024);
    size_t n = 0;
    CHECK_EQ(cn_log_read(f.log, 0, 3, 1 << 16, true, &w, &n), 0);
    CHECK(n > 0);
    cn_wr_fini(&w);
    fx_fini(&f);
}

struct throttle_ctx {
    int64_t bytes;
    int64_t stop_after; /* return -ECANCELED once past this */
};

static int throttle_cb(void *arg, size_t bytes)
{
    struct throttle_ctx *t = arg;
    t->bytes += (int64_t)bytes;
    return t->bytes > t->stop_after ? -ECANCELED : 0;
}

/* The I/O limiter hook sees every byte read and written; its error stops
 * the pass with nothing swapped and no file left. */
UNIT_TEST(test_throttle_hook)
{
    struct fx f;
    fx_open(&f);
    for (int i = 0; i < 20; i++)
        put(&f, -1, 0, false, i % 2 ? "a=1,b=2" : "a=3");
    roll(&f);
    put(&f, -1, 0, false, "z=1");
    char before[BIG], got[BIG];
    dump(&f, before, sizeof before, NULL);
    struct throttle_ctx t = {0, 200};
    struct cn_log_clean_params p;
    params(&f, &p);
    p.throttle = throttle_cb;
    p.throttle_arg = &t;
    CHECK_EQ(cn_log_clean_now(f.log, &p, NULL), -ECANCELED);
    CHECK_EQ(count_files(f.dir, ".cleaned"), 0);
    dump(&f, got, sizeof got, NULL);
    CHECK(!strcmp(got, before));
    t = (struct throttle_ctx){0, INT64_MAX};
    struct cn_log_clean_stats st;
    CHECK_EQ(cn_log_clean_now(f.log, &p, &st), 0);
    CHECK_EQ(t.bytes, st.bytes_read + st.bytes_written);
    CHECK(st.bytes_written > 0);
    dump(&f, got, sizeof got, NULL);
    CHECK(!strcmp(got, "28:a=1 29:b=2 30:z=1"));
    fx_fini(&f);
}

/* The log every crash test starts from, and what it is before and after
 * one pass: cleaned as one group, or as one group per segment (so the
 * swap has several groups to finish, each keeping its last batch). */
static int crash_mode;
static const char *const CRASH_OLD =
    "0:a=1 1:b=1 2:a=2 3:c=1 4:b=2 5:C0 6:z=1";
static const char *const CRASH_NEWS[2] = {
    "2:a=2 4:b=2 5:C0 6:z=1", "0:E 2:a=2 3:E 4:b=2 5:C0 6:z=1"};
#define CRASH_NEW CRASH_NEWS[crash_mode]

static void crash_log(struct fx *f)
{
    fx_open(f);
    put(f, -1, 0, false, "a=1,b=1");      /* 0,1 */
    roll(f);
    put(f, -1, 0, false, "a=2");          /* 2 */
    int64_t first = put(f, 3, 0, true, "c=1"); /* 3: aborted */
    roll(f);
    put(f, -1, 0, false, "b=2");          /* 4 */
    mark(f, 3, false, first);             /* 5 */
    roll(f);
    put(f, -1, 0, false, "z=1");          /* 6 */
    if (crash_mode) {
        f->cfg.segment_bytes = 1;
        cn_log_set_config(f->log, &f->cfg);
    }
}

static const char *const CRASH_POINTS[] = {
    "clean.written", "clean.swap", "clean.index", "clean.ckpt.before",
    "clean.ckpt.after"};

/* A kill -9 at each fail point, then recovery: old or new segments,
 * never a mix, no leftovers, and a second pass completes. */
UNIT_TEST(test_crash_at_each_fail_point)
{
    for (int k = 0; k < 10; k++) {
        size_t i = (size_t)k % 5;
        crash_mode = k / 5;
        struct fx f;
        crash_log(&f);
        char got[BIG];
        dump(&f, got, sizeof got, NULL);
        CHECK(!strcmp(got, CRASH_OLD));
        /* The child opens the log itself, so nothing of the parent's
         * writes to the directory after the kill. */
        fx_close(&f);
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {
            fx_reopen(&f);
            cn_failpoint_set(CRASH_POINTS[i], "crash");
            clean(&f, NULL);
            _exit(0); /* the point did not fire */
        }
        int status = 0;
        CHECK_EQ(waitpid(pid, &status, 0), pid);
        CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
        fx_reopen(&f);
        dump(&f, got, sizeof got, NULL);
        bool before_commit = i == 0;
        const char *want = before_commit ? CRASH_OLD : CRASH_NEW;
        CHECK(!strcmp(got, want));
        if (strcmp(got, want))
            fprintf(stderr, "  %s/%d: got %s\n", CRASH_POINTS[i],
                    crash_mode, got);
        CHECK_EQ(segments(&f), before_commit || crash_mode ? 4 : 2);
        CHECK_EQ(count_files(f.dir, ".cleaned"), 0);
        CHECK_EQ(count_files(f.dir, "cleaner.swap"), 0);
        CHECK_EQ(aborted_entries(&f), 1);
        /* The pass again (or, after the checkpoint, nothing to do). */
        int rc = clean(&f, NULL);
        CHECK(rc == 0 || (rc == -EAGAIN && i == 4));
        dump(&f, got, sizeof got, NULL);
        CHECK(!strcmp(got, CRASH_NEW));
        fx_fini(&f);
    }
}

/* The same points as errors: before the commit point the pass fails and
 * leaves the old log serving; after it the log goes offline and the next
 * open finishes the swap. */
UNIT_TEST(test_error_at_each_fail_point)
{
    enum cn_say_level lvl = cn_say_max_level;
    cn_say_max_level = CN_SAY_ERROR;
    for (int k = 0; k < 10; k++) {
        size_t i = (size_t)k % 5;
        crash_mode = k / 5;
        struct fx f;
        crash_log(&f);
        cn_failpoint_set(CRASH_POINTS[i], "error");
        int rc = clean(&f, NULL);
        cn_failpoint_set(CRASH_POINTS[i], NULL);
        CHECK_EQ(rc, CN_EFAILPOINT);
        char got[BIG];
        if (i == 0) {
            CHECK(!cn_log_is_offline(f.log));
            dump(&f, got, sizeof got, NULL);
            CHECK(!strcmp(got, CRASH_OLD));
            CHECK_EQ(count_files(f.dir, ".cleaned"), 0);
        } else if (i <= 2) {
            CHECK(cn_log_is_offline(f.log));
        } else {
            /* Swapped; only the checkpoint was missed (or not even). */
            CHECK(!cn_log_is_offline(f.log));
            dump(&f, got, sizeof got, NULL);
            CHECK(!strcmp(got, CRASH_NEW));
        }
        fx_close(&f);
        fx_reopen(&f);
        dump(&f, got, sizeof got, NULL);
        CHECK(!strcmp(got, i == 0 ? CRASH_OLD : CRASH_NEW));
        if (strcmp(got, i == 0 ? CRASH_OLD : CRASH_NEW))
            fprintf(stderr, "  %s/%d: got %s\n", CRASH_POINTS[i],
                    crash_mode, got);
        CHECK_EQ(count_files(f.dir, ".cleaned"), 0);
        fx_fini(&f);
    }
    cn_say_max_level = lvl;
}

/* The file syscalls, counted: what the loop-side steps of a swap do. */
static struct {
    int open, close, io, sync, rename, unlink, other;
} calls;

static int c_open(const char *p, int fl, mode_t m)
{
    calls.open++;
    return cn_file_ops_real.open(p, fl, m);
}
static int c_close(int fd)
{
    calls.close++;
    return cn_file_ops_real.close(fd);
}
static ssize_t c_pread(int fd, void *b, size_t n, off_t o)
{
    calls.io++;
    return cn_file_ops_real.pread(fd, b, n, o);
}
static ssize_t c_pwrite(int fd, const void *b, size_t n, off_t o)
{
    calls.io++;
    return cn_file_ops_real.pwrite(fd, b, n, o);
}
static int c_fdatasync(int fd)
{
    calls.sync++;
    return cn_file_ops_real.fdatasync(fd);
}
static int c_fsync(int fd)
{
    calls.sync++;
    return cn_file_ops_real.fsync(fd);
}
static int c_ftruncate(int fd, off_t l)
{
    calls.other++;
    return cn_file_ops_real.ftruncate(fd, l);
}
static int c_rename(const char *a, const char *b)
{
    calls.rename++;
    return cn_file_ops_real.rename(a, b);
}
static int c_unlink(const char *p)
{
    calls.unlink++;
    return cn_file_ops_real.unlink(p);
}
static int c_mkdir(const char *p, mode_t m)
{
    calls.other++;
    return cn_file_ops_real.mkdir(p, m);
}
static int c_rmdir(const char *p)
{
    calls.other++;
    return cn_file_ops_real.rmdir(p);
}
static int c_fsize(int fd, int64_t *s)
{
    calls.other++;
    return cn_file_ops_real.fsize(fd, s);
}

static const struct cn_file_ops counting_ops = {
    c_open,   c_close,  c_pread, c_pwrite, c_fdatasync, c_fsync,
    c_ftruncate, c_rename, c_unlink, c_mkdir, c_rmdir, c_fsize};

static void count_start(void)
{
    memset(&calls, 0, sizeof calls);
    cn_file_ops = &counting_ops;
}

static int count_stop(void)
{
    cn_file_ops = &cn_file_ops_real;
    return calls.open + calls.close + calls.io + calls.sync + calls.rename +
           calls.unlink + calls.other;
}

/* The crash log in mode (1: one group per segment, three to swap), its
 * pass begun and run. */
static struct cn_log_clean_job *crash_log_run(struct fx *f, int mode)
{
    crash_mode = mode;
    crash_log(f);
    struct cn_log_clean_params p;
    params(f, &p);
    struct cn_log_clean_job *j = NULL;
    CHECK_EQ(cn_log_clean_begin(f->log, &p, &j), 0);
    CHECK_EQ(cn_log_clean_run(j), 0);
    return j;
}

/* After a swap: the log reads cleaned, no descriptor is left held; and
 * the fixture is gone. */
static void check_swapped(struct fx *f)
{
    char got[BIG];
    dump(f, got, sizeof got, NULL);
    CHECK(!strcmp(got, CRASH_NEW));
    struct cn_log_fd_stats fs;
    cn_log_fd_stats(&fs);
    CHECK_EQ(fs.pinned, 0);
    fx_fini(f);
}

/* The loop's steps of a swap (commit, end) make no fsync, rename or
 * unlink, and end no file call at all: the worker's step (swap) does
 * them, and closing the old descriptors is free's.  The whole swap run
 * by end itself (as tools do) shows the counter sees them. */
UNIT_TEST(test_loop_steps_do_no_disk_io)
{
    struct fx f;
    struct cn_log_clean_job *j = crash_log_run(&f, 1);
    count_start();
    CHECK_EQ(cn_log_clean_commit(f.log, j), 0);
    int n = count_stop();
    /* Opens only for a .log the cache had closed (none here). */
    CHECK_EQ(calls.sync + calls.rename + calls.unlink + calls.io, 0);
    CHECK_EQ(n, calls.open);
    count_start();
    CHECK_EQ(cn_log_clean_swap(j), 0);
    count_stop();
    CHECK(calls.sync > 0 && calls.rename > 0 && calls.unlink > 0);
    count_start();
    CHECK_EQ(cn_log_clean_end(f.log, j, 0, NULL), 0);
    CHECK_EQ(count_stop(), 0);
    count_start();
    cn_log_clean_free(j);
    count_stop();
    CHECK(calls.close > 0); /* the old segments' descriptors */
    check_swapped(&f);

    j = crash_log_run(&f, 1);
    count_start();
    CHECK_EQ(cn_log_clean_end(f.log, j, 0, NULL), 0);
    count_stop();
    CHECK(calls.sync > 0 && calls.rename > 0);
    cn_log_clean_free(j);
    fx_fini(&f);
}

/* While the worker renames and unlinks, the loop's reads of the old
 * segments go through the .log descriptors commit held, so they return
 * the old bytes even after the cache closed everything it could; and
 * retention and DeleteRecords delete no segment under the swap. */
UNIT_TEST(test_old_segments_read_during_swap)
{
    struct fx f;
    struct cn_log_clean_job *j = crash_log_run(&f, 1);
    CHECK_EQ(cn_log_clean_commit(f.log, j), 0);
    CHECK_EQ(cn_log_clean_swap(j), 0);
    /* Another log's files take the whole (smallest) budget: the cache
     * closes every descriptor it may. */
    cn_log_set_fd_budget(16);
    struct fx other;
    fx_open(&other);
    for (int i = 0; i < 8; i++) {
        put(&other, -1, 0, false, "x=1");
        roll(&other);
    }
    char got[BIG];
    dump(&other, got, sizeof got, NULL);
    fx_fini(&other);
    dump(&f, got, sizeof got, NULL);
    cn_log_set_fd_budget(0);
    CHECK(!strcmp(got, CRASH_OLD));
    if (strcmp(got, CRASH_OLD))
        fprintf(stderr, "  during the swap: %s\n", got);
    struct cn_log_config c = f.cfg;
    c.retention_ms = 0;
    cn_log_set_config(f.log, &c);
    CHECK_EQ(cn_log_enforce_retention(f.log, fake_now + 10000), 0);
    CHECK_EQ(cn_log_delete_records(f.log, 2), 0);
    CHECK_EQ(cn_log_start_offset(f.log), 2);
    cn_log_set_config(f.log, &f.cfg);
    CHECK_EQ(segments(&f), 4);
    CHECK_EQ(cn_log_clean_end(f.log, j, 0, NULL), 0);
    cn_log_clean_free(j);
    dump(&f, got, sizeof got, NULL);
    CHECK(!strcmp(got, "2:a=2 3:E 4:b=2 5:C0 6:z=1"));
    if (strcmp(got, "2:a=2 3:E 4:b=2 5:C0 6:z=1"))
        fprintf(stderr, "  after the swap: %s\n", got);
    CHECK(!cn_log_is_offline(f.log));
    fx_close(&f);
    fx_reopen(&f);
    dump(&f, got, sizeof got, NULL);
    CHECK(!strcmp(got, "2:a=2 3:E 4:b=2 5:C0 6:z=1"));
    fx_fini(&f);
}

/* Syncs begun during a swap, of old segments never synced: one through
 * the descriptors it pins (the held .log among them), one that cannot pin
 * them and opens the files by name, finding some gone.  Neither takes
 * the log offline: the data is in the cleaned segments already. */
UNIT_TEST(test_syncs_during_swap)
{
    struct fx f;
    /* One group: its later segments' files are unlinked. */
    struct cn_log_clean_job *j = crash_log_run(&f, 0);
    CHECK_EQ(cn_log_clean_commit(f.log, j), 0);
    struct cn_log_sync *a = cn_log_sync_begin(f.log);
    struct cn_log_sync *b = cn_log_sync_begin(f.log);
    CHECK(a != NULL && b != NULL);
    CHECK_EQ(cn_log_clean_swap(j), 0);
    int rb = cn_log_sync_run(b);
    CHECK_EQ(rb, -ENOENT);
    CHECK_EQ(cn_log_sync_end(f.log, b, rb), 0);
    CHECK_EQ(cn_log_sync_end(f.log, a, cn_log_sync_run(a)), 0);
    CHECK(!cn_log_is_offline(f.log));
    CHECK_EQ(cn_log_clean_end(f.log, j, 0, NULL), 0);
    cn_log_clean_free(j);
    check_swapped(&f);
}

/* Kafka's cleaner-offset-checkpoint text: round trip, and the damaged
 * forms refused. */
UNIT_TEST(test_ckpt_codec)
{
    struct cn_clean_ckpt_entry in[2] = {{"orders", 3, 1234},
                                        {"t.x_y-z", 0, 0}};
    struct cn_wr w;
    cn_wr_init(&w, 64);
    CHECK_EQ(cn_clean_ckpt_format(in, 2, &w), 0);
    CHECK_EQ(w.len, strlen("0\n2\norders 3 1234\nt.x_y-z 0 0\n"));
    CHECK(!memcmp(w.buf, "0\n2\norders 3 1234\nt.x_y-z 0 0\n", w.len));
    struct cn_clean_ckpt_entry *e;
    size_t n;
    CHECK_EQ(cn_clean_ckpt_parse((const char *)w.buf, w.len, &e, &n), 0);
    CHECK_EQ(n, 2);
    CHECK(!strcmp(e[1].topic, "t.x_y-z"));
    CHECK_EQ(e[0].offset, 1234);
    CHECK_EQ(e[0].partition, 3);
    free(e);
    static const char *const bad[] = {
        "", "1\n0\n", "0\n1\n", "0\n0\nx 1 2\n", "0\n1\nx 1\n",
        "0\n1\nx -1 2\n", "0\n1\nx 1 2", "0\n1\n 1 2\n", "0\n-1\n",
        "0\n1\nx 1 2 3\n", "0\n2\nx 1 2\n"};
    cn_corrupt_hush();
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        int rc = cn_clean_ckpt_parse(bad[i], strlen(bad[i]), &e, &n);
        CHECK_EQ(rc, CN_ECORRUPT);
        if (rc != CN_ECORRUPT)
            fprintf(stderr, "  accepted bad[%zu]\n", i);
        if (!rc)
            free(e);
    }
    cn_corrupt_unhush();
    cn_wr_fini(&w);
    /* On disk: one file per log dir, one line per cleaned partition;
     * deleting the partition drops its line. */
    struct fx f;
    fx_open(&f);
    put(&f, -1, 0, false, "a=1");
    roll(&f);
    put(&f, -1, 0, false, "a=2");
    CHECK_EQ(clean(&f, NULL), 0);
    char path[PATH_MAX], buf[256];
    snprintf(path, sizeof path, "%s/cleaner-offset-checkpoint", f.root);
    FILE *fp = fopen(path, "r");
    CHECK(fp != NULL);
    size_t r = fp ? fread(buf, 1, sizeof buf - 1, fp) : 0;
    buf[r] = 0;
    if (fp)
        fclose(fp);
    CHECK(!strcmp(buf, "0\n1\nt 0 1\n"));
    CHECK_EQ(cn_log_delete(f.log), 0);
    f.log = NULL;
    fp = fopen(path, "r");
    r = fp ? fread(buf, 1, sizeof buf - 1, fp) : 0;
    buf[r] = 0;
    if (fp)
        fclose(fp);
    CHECK(!strcmp(buf, "0\n0\n"));
    fx_fini(&f);
}

UNIT_MAIN(test_survivors_offsets_reads, test_group_end_kept,
          test_abort_three_segments_two_groups, test_lso_inside_segment,
          test_marker_key_collides, test_tombstone_expiry_two_passes,
          test_producer_batch_emptied, test_changes_during_run,
          test_corrupt_batch_refused, test_throttle_hook,
          test_crash_at_each_fail_point,
          test_error_at_each_fail_point, test_loop_steps_do_no_disk_io,
          test_old_segments_read_during_swap, test_syncs_during_swap,
          test_ckpt_codec)
