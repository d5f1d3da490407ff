/*
 * test_threads.c - the log's calls that run off the loop thread, run
 * the way the broker runs them, so the ThreadSanitizer build (make
 * build-tsan) sees the concurrency: cn_log_sync_run on libuv's thread pool
 * (uv_queue_work, as sync.c's group-commit rounds: up to three in flight,
 * ended in order) while the loop appends, rolls segments and deletes
 * records; and a cleaning pass's worker steps (cn_log_clean_run, then
 * cn_log_clean_swap after the loop's commit, then cn_log_clean_free after
 * its end) on a worker thread handing the job back through a uv_async (as
 * cleaner.c) while the loop appends; and a partition's roll snapshots
 * written on the thread pool (as the node's cn_part_work_queue) while the
 * loop appends through cn_part_append and prunes after retention.  The plain
 * and ASan builds run it too; it checks the outcome (everything synced,
 * the compacted log's contents).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "base/err.h"
#include "base/wr.h"
#include "log/file.h"
#include "log/log.h"
#include "log/log_clean.h"
#include "partition/partition.h"
#include "proto/batch.h"
#include "unit.h"

#define APPENDS 300
#define MAX_ROUNDS 3   /* sync.c's */
#define PASSES 4

static int64_t fake_now = 1000000;
static int64_t fake_clock(void)
{
    return fake_now;
}

struct round {
    uv_work_t work;
    struct fx *f;
    struct cn_log_sync *sync;
    int err;
    bool finished;
    struct round *next; /* in flight, in start order */
};

struct fx {
    char *root;
    char dir[PATH_MAX];
    struct cn_log_config cfg;
    struct cn_log *log;
    uv_loop_t loop;
    uv_idle_t idle;
    int appended;
    struct round *inflight;
    int running, rounds;
    /* The cleaner's worker. */
    uv_thread_t thread;
    uv_async_t async;
    struct cn_log_clean_job *job;
    enum { PH_RUN, PH_SWAP, PH_FREE } phase; /* the worker's step */
    int job_err;
    bool cleaning;
    int passes;
    int64_t removed;
};

static void fx_open(struct fx *f, int64_t segment_bytes)
{
    memset(f, 0, sizeof *f);
    f->root = unit_tmpdir("threads");
    snprintf(f->dir, sizeof f->dir, "%s/t-0", f->root);
    cn_log_config_default(&f->cfg);
    f->cfg.segment_bytes = segment_bytes;
    f->cfg.index_interval_bytes = 64;
    f->cfg.now_ms = fake_clock;
    CHECK_EQ(cn_log_open(f->dir, &f->cfg, &f->log), 0);
    CHECK_EQ(uv_loop_init(&f->loop), 0);
}

static void fx_fini(struct fx *f)
{
    CHECK_EQ(uv_loop_close(&f->loop), 0);
    cn_log_close(f->log);
    unit_rmtree(f->root);
    free(f->root);
}

/* One batch of one record "k<key>" = "v<n>". */
static void put(struct fx *f, int key)
{
    struct cn_batch_params pm = CN_BATCH_PARAMS_INIT;
    struct cn_batch_builder b;
    cn_batch_builder_init(&b, &pm);
    char k[16], v[16];
    snprintf(k, sizeof k, "k%d", key);
    snprintf(v, sizeof v, "v%d", f->appended);
    cn_batch_builder_add(&b, fake_now, cn_bytes_str(k), cn_bytes_str(v),
                         NULL, 0);
    struct cn_wr w;
    cn_wr_init(&w, 128);
    CHECK_EQ(cn_batch_builder_finish(&b, &w), 0);
    cn_batch_builder_fini(&b);
    int64_t base;
    CHECK_EQ(cn_log_append(f->log, w.buf, w.len, &base), 0);
    cn_wr_fini(&w);
    f->appended++;
}

/* ---- group commit ------------------------------------------------------- */

static void round_work(uv_work_t *w)
{
    struct round *r = w->data;
    r->err = cn_log_sync_run(r->sync);
}

static void round_done(uv_work_t *w, int status)
{
    struct round *r = w->data;
    struct fx *f = r->f;
    CHECK_EQ(status, 0);
    r->finished = true;
    while (f->inflight && f->inflight->finished) {
        struct round *done = f->inflight;
        f->inflight = done->next;
        f->running--;
        CHECK_EQ(cn_log_sync_end(f->log, done->sync, done->err), 0);
        free(done);
    }
}

static void start_round(struct fx *f)
{
    if (f->running >= MAX_ROUNDS)
        return;
    struct cn_log_sync *s = cn_log_sync_begin(f->log);
    if (!s)
        return;
    struct round *r = calloc(1, sizeof *r);
    CHECK(r != NULL);
    r->f = f;
    r->sync = s;
    r->work.data = r;
    struct round **tail = &f->inflight;
    while (*tail)
        tail = &(*tail)->next;
    *tail = r;
    f->running++;
    f->rounds++;
    CHECK_EQ(uv_queue_work(&f->loop, &r->work, round_work, round_done), 0);
}

static void sync_step(uv_idle_t *h)
{
    struct fx *f = h->data;
    if (f->appended < APPENDS) {
        put(f, f->appended);
        /* Retention under the rounds: segments they hold go, and their
         * files are synced by name or found gone. */
        if (f->appended % 60 == 0)
            CHECK_EQ(cn_log_delete_records(f->log, f->appended - 30), 0);
    }
    start_round(f);
    if (f->appended == APPENDS && !f->running)
        uv_idle_stop(h);
}

/* Rounds run on the thread pool while the loop appends, rolls and deletes;
 * at the end everything is synced. */
UNIT_TEST(test_sync_rounds_beside_appends)
{
    struct fx f;
    fx_open(&f, 512);
    uv_idle_init(&f.loop, &f.idle);
    f.idle.data = &f;
    uv_idle_start(&f.idle, sync_step);
    uv_run(&f.loop, UV_RUN_DEFAULT);
    uv_close((uv_handle_t *)&f.idle, NULL);
    uv_run(&f.loop, UV_RUN_DEFAULT);
    CHECK(f.rounds > 1);
    CHECK_EQ(cn_log_end_offset(f.log), APPENDS);
    CHECK_EQ(cn_log_synced_offset(f.log), APPENDS);
    CHECK(!cn_log_is_offline(f.log));
    fx_fini(&f);
}

/* ---- the cleaner's worker ----------------------------------------------- */

static void clean_worker(void *arg)
{
    struct fx *f = arg;
    if (f->phase == PH_RUN)
        f->job_err = cn_log_clean_run(f->job);
    else if (f->phase == PH_SWAP)
        f->job_err = cn_log_clean_swap(f->job);
    else
        cn_log_clean_free(f->job);
    uv_async_send(&f->async);
}

static void start_worker(struct fx *f, int phase)
{
    f->phase = phase;
    CHECK_EQ(uv_thread_create(&f->thread, clean_worker, f), 0);
}

static void begin_pass(struct fx *f)
{
    struct cn_log_clean_params p;
    memset(&p, 0, sizeof p);
    p.now_ms = fake_now;
    p.delete_retention_ms = 1000;
    p.lso = cn_log_end_offset(f->log);
    p.dedupe_bytes = 1 << 20;
    int rc = cn_log_clean_begin(f->log, &p, &f->job);
    if (rc == -EAGAIN)
        return; /* nothing dirty rolled yet */
    CHECK_EQ(rc, 0);
    if (rc)
        return;
    f->cleaning = true;
    start_worker(f, PH_RUN);
}

static void on_cleaned(uv_async_t *a)
{
    struct fx *f = a->data;
    CHECK_EQ(uv_thread_join(&f->thread), 0);
    if (f->phase == PH_RUN && f->job_err == 0) {
        f->job_err = cn_log_clean_commit(f->log, f->job);
        CHECK_EQ(f->job_err, 0);
        if (f->job_err == 0) {
            start_worker(f, PH_SWAP);
            return;
        }
    }
    if (f->phase != PH_FREE) {
        struct cn_log_clean_stats st;
        memset(&st, 0, sizeof st);
        CHECK_EQ(cn_log_clean_end(f->log, f->job, f->job_err, &st), 0);
        f->removed += st.records_removed;
        f->passes++;
        start_worker(f, PH_FREE);
        return;
    }
    f->job = NULL;
    f->cleaning = false;
}

static void clean_step(uv_idle_t *h)
{
    struct fx *f = h->data;
    /* Appends go on until the passes are done (bounded, should a pass
     * never begin). */
    bool done = f->passes == PASSES || f->appended >= 50 * APPENDS;
    if (!done)
        put(f, f->appended % 10);
    if (!f->cleaning && !done)
        begin_pass(f);
    if (done && !f->cleaning) {
        uv_idle_stop(h);
        uv_close((uv_handle_t *)&f->async, NULL);
    }
}

/* Passes run on a worker thread while the loop appends to the same log;
 * older copies of the keys are removed. */
UNIT_TEST(test_clean_beside_appends)
{
    struct fx f;
    fx_open(&f, 1024);
    uv_idle_init(&f.loop, &f.idle);
    f.idle.data = &f;
    uv_async_init(&f.loop, &f.async, on_cleaned);
    f.async.data = &f;
    uv_idle_start(&f.idle, clean_step);
    uv_run(&f.loop, UV_RUN_DEFAULT);
    uv_close((uv_handle_t *)&f.idle, NULL);
    uv_run(&f.loop, UV_RUN_DEFAULT);
    CHECK_EQ(f.passes, PASSES);
    CHECK_EQ(cn_log_end_offset(f.log), f.appended);
    /* Ten keys, many copies of each. */
    CHECK(f.removed > 0);
    fx_fini(&f);
}

/* ---- the descriptor cache is the loop's ------------------------------- */

static void reclaim_off_loop(void *arg)
{
    size_t *closed = arg;
    *closed = cn_file_reclaim();
}

/* A worker whose open hits EMFILE must not close the loop's cached
 * descriptors (the LRU list has no lock); the loop's own reclaim does. */
UNIT_TEST(test_reclaim_only_on_the_loop)
{
    struct fx f;
    /* As the broker starts: its budget set before any log is opened. */
    cn_file_reclaim = NULL;
    cn_log_set_fd_budget(64);
    CHECK(cn_file_reclaim != NULL);
    fx_open(&f, 256);
    for (int i = 0; i < 200; i++)
        put(&f, i % 10);
    struct cn_log_fd_stats before, after;
    cn_log_fd_stats(&before);
    CHECK(before.open > 16);
    size_t closed = 99;
    uv_thread_t t;
    CHECK_EQ(uv_thread_create(&t, reclaim_off_loop, &closed), 0);
    CHECK_EQ(uv_thread_join(&t), 0);
    CHECK_EQ(closed, 0);
    cn_log_fd_stats(&after);
    CHECK_EQ(after.open, before.open);
    CHECK(cn_file_reclaim() > 0);
    cn_log_fd_stats(&after);
    CHECK(after.open < before.open);
    fx_fini(&f);
    cn_log_set_fd_budget(0);
}

/* ---- roll snapshots on the thread pool ---------------------------------- */

struct snap_fx {
    struct fx f;
    struct cn_partition p;
    struct cn_part_env env;
    int queued, running;
};

struct snap_work {
    uv_work_t work;
    struct snap_fx *s;
    struct cn_part_work *w;
};

static void snap_work_run(uv_work_t *uw)
{
    struct snap_work *sw = uw->data;
    sw->w->run(sw->w);
}

static void snap_work_done(uv_work_t *uw, int status)
{
    struct snap_work *sw = uw->data;
    CHECK_EQ(status, 0);
    /* Its end may start the partition's next one. */
    sw->s->running--;
    sw->w->done(sw->w);
    free(sw);
}

static int snap_queue(void *ctx, struct cn_part_work *w)
{
    struct snap_fx *s = ctx;
    struct snap_work *sw = calloc(1, sizeof *sw);
    CHECK(sw != NULL);
    sw->work.data = sw;
    sw->s = s;
    sw->w = w;
    s->queued++;
    s->running++;
    CHECK(s->running <= 1); /* one write per partition at a time */
    return uv_queue_work(&s->f.loop, &sw->work, snap_work_run, snap_work_done);
}

static void snap_noop(void *ctx, struct cn_partition *p)
{
    (void)ctx;
    (void)p;
}

static void snap_noop_full(void *ctx, const struct cn_partition *p, bool full)
{
    (void)ctx;
    (void)p;
    (void)full;
}

static void snap_dir_failed(void *ctx, const char *what, int err)
{
    (void)ctx;
    CHECK(!what || err == 0);
}

static void snap_step(uv_idle_t *h)
{
    struct snap_fx *s = h->data;
    struct fx *f = &s->f;
    if (f->appended < APPENDS) {
        /* Idempotent batches of a few producers, so the table the
         * snapshots carry is not empty. */
        struct cn_batch_params pm = CN_BATCH_PARAMS_INIT;
        pm.producer_id = 1 + f->appended % 4;
        pm.producer_epoch = 0;
        pm.base_sequence = f->appended / 4;
        struct cn_batch_builder b;
        cn_batch_builder_init(&b, &pm);
        cn_batch_builder_add(&b, fake_now, cn_bytes_str("k"),
                             cn_bytes_str("value"), NULL, 0);
        struct cn_wr w;
        cn_wr_init(&w, 128);
        CHECK_EQ(cn_batch_builder_finish(&b, &w), 0);
        cn_batch_builder_fini(&b);
        struct cn_part_append a;
        memset(&a, 0, sizeof a);
        a.origin = CN_PART_CLIENT;
        a.batches = w.buf;
        a.len = w.len;
        a.what = "a test write";
        a.append_time = -1;
        a.caller_syncs = true;
        CHECK_EQ(cn_part_append(&s->p, &s->env, &a), 0);
        cn_wr_fini(&w);
        f->appended++;
        /* Retention's prune on the loop beside the workers' own. */
        if (f->appended % 50 == 0) {
            CHECK_EQ(cn_log_delete_records(f->log, f->appended - 30), 0);
            cn_partition_after_retention(&s->p);
        }
    }
    if (f->appended == APPENDS && !s->running)
        uv_idle_stop(h);
}

/* A partition's roll snapshots are written on the thread pool while the
 * loop appends; at the end the newest roll's snapshot is on disk and
 * loads. */
UNIT_TEST(test_roll_snapshots_beside_appends)
{
    struct snap_fx s;
    memset(&s, 0, sizeof s);
    fx_open(&s.f, 512);
    s.p.log = s.f.log;
    CHECK_EQ(cn_partition_producers_load(&s.p, "t-0"), 0);
    s.env = (struct cn_part_env){&s, snap_noop, snap_noop_full,
                                 snap_dir_failed, snap_queue};
    uv_idle_init(&s.f.loop, &s.f.idle);
    s.f.idle.data = &s;
    uv_idle_start(&s.f.idle, snap_step);
    uv_run(&s.f.loop, UV_RUN_DEFAULT);
    uv_close((uv_handle_t *)&s.f.idle, NULL);
    uv_run(&s.f.loop, UV_RUN_DEFAULT);
    CHECK(s.queued > 1);
    CHECK(s.p.snap_running == NULL && s.p.snap_pending == NULL);
    int64_t newest = cn_log_active_base(s.f.log);
    struct cn_pstate *ps = cn_pstate_new();
    int64_t loaded = -1;
    CHECK_EQ(cn_pstate_snapshot_load(ps, s.f.dir, newest, &loaded), 0);
    CHECK_EQ(loaded, newest);
    CHECK_EQ(cn_pstate_count(ps), 4);
    cn_pstate_free(ps);
    cn_partition_producers_close(&s.p);
    fx_fini(&s.f);
}

UNIT_MAIN(test_sync_rounds_beside_appends, test_clean_beside_appends,
          test_reclaim_only_on_the_loop, test_roll_snapshots_beside_appends)
