/* test_partition.c - the partition layer's one write path over a real log
 * in a temp directory, no sockets: each origin's checks (producer state
 * for clients, epoch fencing for operators), duplicate answers, markers
 * moving the LSO and writing the .txnindex, the roll snapshot, and the
 * hand-off to group commit. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/err.h"
#include "base/wr.h"
#include "log/file.h"
#include "log/log.h"
#include "partition/epochs.h"
#include "partition/partition.h"
#include "proto/batch.h"
#include "proto/kerr.h"
#include "unit.h"

/* The fake broker above: counts what the partition layer tells it. */
struct fake_env {
    int appended;
    int full_true, full_false;
    int dir_failed;
    int verified;
    int16_t verify_answer;
};

static void fake_appended(void *ctx, struct cn_partition *p)
{
    struct fake_env *f = ctx;
    f->appended++;
    /* As group commit without fsync: everything appended is visible. */
    p->high_watermark = cn_log_end_offset(p->log);
}

static void fake_disk_full(void *ctx, const struct cn_partition *p, bool full)
{
    struct fake_env *f = ctx;
    (void)p;
    if (full)
        f->full_true++;
    else
        f->full_false++;
}

static void fake_dir_failed(void *ctx, const char *what, int err)
{
    struct fake_env *f = ctx;
    (void)what;
    (void)err;
    f->dir_failed++;
}

static int16_t fake_verify(void *arg, int64_t producer_id, int16_t epoch)
{
    struct fake_env *f = arg;
    (void)producer_id;
    (void)epoch;
    f->verified++;
    return f->verify_answer;
}

struct fixture {
    char *dir;
    struct cn_partition p;
    struct fake_env f;
    struct cn_part_env env;
    struct cn_wr w;
};

static void fx_open(struct fixture *x, int64_t segment_bytes)
{
    memset(x, 0, sizeof *x);
    x->dir = unit_tmpdir("partition");
    struct cn_log_config cfg;
    cn_log_config_default(&cfg);
    if (segment_bytes > 0)
        cfg.segment_bytes = segment_bytes;
    CHECK_EQ(cn_log_open(x->dir, &cfg, &x->p.log), 0);
    CHECK_EQ(cn_partition_producers_load(&x->p, "t-0"), 0);
    CHECK_EQ(cn_partition_epochs_load(&x->p), 0);
    x->env = (struct cn_part_env){&x->f, fake_appended, fake_disk_full,
                                  fake_dir_failed, NULL};
    cn_wr_init(&x->w, 256);
}

static void fx_close(struct fixture *x)
{
    cn_wr_fini(&x->w);
    cn_partition_producers_close(&x->p);
    cn_partition_epochs_close(&x->p);
    cn_log_close(x->p.log);
    unit_rmtree(x->dir);
    free(x->dir);
}

/* A one-record batch of producer pid (or -1) into x->w, replacing it. */
static void data_batch(struct fixture *x, int64_t pid, int16_t epoch,
                       int32_t seq, bool txn)
{
    struct cn_batch_params bp = CN_BATCH_PARAMS_INIT;
    bp.producer_id = pid;
    bp.producer_epoch = epoch;
    bp.base_sequence = seq;
    bp.transactional = txn;
    struct cn_batch_builder bb;
    cn_batch_builder_init(&bb, &bp);
    cn_batch_builder_add(&bb, 1000, (struct cn_bytes){(const uint8_t *)"k", 1},
                         (struct cn_bytes){(const uint8_t *)"value", 5}, NULL,
                         0);
    cn_wr_reset(&x->w);
    CHECK_EQ(cn_batch_builder_finish(&bb, &x->w), 0);
    cn_batch_builder_fini(&bb);
}

static void marker_batch(struct fixture *x, int64_t pid, int16_t epoch,
                         bool commit)
{
    cn_wr_reset(&x->w);
    CHECK_EQ(cn_batch_build_control(&x->w, pid, epoch, commit, 0, 1000), 0);
}

/* A request to append x->w from origin, with no hooks. */
static void req_init(struct fixture *x, enum cn_part_origin origin,
                     struct cn_part_append *a)
{
    memset(a, 0, sizeof *a);
    a->origin = origin;
    a->batches = x->w.buf;
    a->len = x->w.len;
    a->what = "a test write";
    a->append_time = -1;
}

/* Appends x->w from origin; returns cn_part_append's result. */
static int append(struct fixture *x, enum cn_part_origin origin,
                  struct cn_part_append *a)
{
    req_init(x, origin, a);
    a->verify = fake_verify;
    a->arg = &x->f;
    return cn_part_append(&x->p, &x->env, a);
}

UNIT_TEST(client_idempotent_append_and_duplicate)
{
    struct fixture x;
    struct cn_part_append a;
    fx_open(&x, 0);
    data_batch(&x, 7, 0, 0, false);
    CHECK_EQ(append(&x, CN_PART_CLIENT, &a), 0);
    CHECK_EQ(a.base_offset, 0);
    CHECK(!a.duplicate);
    CHECK_EQ(x.f.appended, 1);
    CHECK_EQ(x.f.full_false, 1);
    CHECK_EQ(cn_pstate_count(x.p.pstate), 1);
    data_batch(&x, -1, -1, -1, false);
    CHECK_EQ(append(&x, CN_PART_CLIENT, &a), 0);
    CHECK_EQ(a.base_offset, 1);
    /* The retry of the first batch: answered with its offset, not
     * written, still handed to group commit (the original may not be
     * synced yet). */
    data_batch(&x, 7, 0, 0, false);
    CHECK_EQ(append(&x, CN_PART_CLIENT, &a), 0);
    CHECK(a.duplicate);
    CHECK_EQ(a.base_offset, 0);
    CHECK_EQ(cn_log_end_offset(x.p.log), 2);
    CHECK_EQ(x.f.appended, 3);
    fx_close(&x);
}

UNIT_TEST(client_producer_state_refusals)
{
    struct fixture x;
    struct cn_part_append a;
    fx_open(&x, 0);
    data_batch(&x, 7, 3, 0, false);
    CHECK_EQ(append(&x, CN_PART_CLIENT, &a), 0);
    /* A gap in the sequence. */
    data_batch(&x, 7, 3, 5, false);
    CHECK_EQ(append(&x, CN_PART_CLIENT, &a), -1);
    CHECK_EQ(a.kerr, KAFKA_OUT_OF_ORDER_SEQUENCE_NUMBER);
    /* An older epoch: fenced. */
    data_batch(&x, 7, 2, 0, false);
    CHECK_EQ(append(&x, CN_PART_CLIENT, &a), -1);
    CHECK_EQ(a.kerr, KAFKA_INVALID_PRODUCER_EPOCH);
    /* Nothing written, nothing handed off by the refusals. */
    CHECK_EQ(cn_log_end_offset(x.p.log), 1);
    CHECK_EQ(x.f.appended, 1);
    /* The coordinator's own writes are not checked against it. */
    data_batch(&x, 7, 3, 9, false);
    CHECK_EQ(append(&x, CN_PART_COORDINATOR, &a), 0);
    CHECK_EQ(cn_log_end_offset(x.p.log), 2);
    fx_close(&x);
}

UNIT_TEST(client_transactional_verify_and_lso)
{
    struct fixture x;
    struct cn_part_append a;
    fx_open(&x, 0);
    /* Opening a transaction here asks the coordinator (KIP-890). */
    x.f.verify_answer = KAFKA_INVALID_TXN_STATE;
    data_batch(&x, 9, 0, 0, true);
    CHECK_EQ(append(&x, CN_PART_CLIENT, &a), -1);
    CHECK_EQ(a.kerr, KAFKA_INVALID_TXN_STATE);
    CHECK_EQ(x.f.verified, 1);
    CHECK_EQ(cn_log_end_offset(x.p.log), 0);
    x.f.verify_answer = KAFKA_NONE;
    CHECK_EQ(append(&x, CN_PART_CLIENT, &a), 0);
    CHECK_EQ(x.f.verified, 2);
    CHECK_EQ(cn_partition_lso(&x.p), 0);
    /* Inside the open transaction: no second question. */
    data_batch(&x, 9, 0, 1, true);
    CHECK_EQ(append(&x, CN_PART_CLIENT, &a), 0);
    CHECK_EQ(x.f.verified, 2);
    /* A plain batch of that producer would land inside the range. */
    data_batch(&x, 9, 0, 2, false);
    CHECK_EQ(append(&x, CN_PART_CLIENT, &a), -1);
    CHECK_EQ(a.kerr, KAFKA_INVALID_TXN_STATE);
    CHECK_EQ(x.p.high_watermark, 2);
    CHECK_EQ(cn_partition_lso(&x.p), 0);
    fx_close(&x);
}

static int collect(void *arg, const struct cn_aborted_txn *t)
{
    struct cn_aborted_txn *out = arg;
    *out = *t;
    return 1;
}

UNIT_TEST(coordinator_markers_move_lso_and_txnindex)
{
    struct fixture x;
    struct cn_part_append a;
    fx_open(&x, 0);
    data_batch(&x, 11, 0, 0, true);
    CHECK_EQ(append(&x, CN_PART_CLIENT, &a), 0);
    data_batch(&x, 12, 0, 0, true);
    CHECK_EQ(append(&x, CN_PART_CLIENT, &a), 0);
    CHECK_EQ(cn_partition_lso(&x.p), 0);
    CHECK_EQ(cn_pstate_open_count(x.p.pstate), 2);
    /* Abort 11: the LSO moves to 12's first offset, the index has it. */
    marker_batch(&x, 11, 0, false);
    CHECK_EQ(append(&x, CN_PART_COORDINATOR, &a), 0);
    CHECK_EQ(a.base_offset, 2);
    CHECK_EQ(cn_partition_lso(&x.p), 1);
    struct cn_aborted_txn at;
    memset(&at, 0, sizeof at);
    CHECK_EQ(cn_log_aborted_txns(x.p.log, 0, 3, collect, &at), 1);
    CHECK_EQ(at.producer_id, 11);
    CHECK_EQ(at.first_offset, 0);
    CHECK_EQ(at.last_offset, 2);
    CHECK_EQ(at.lso, 1);
    /* Commit 12: nothing open, the LSO is the high watermark and a
     * commit adds no index entry. */
    marker_batch(&x, 12, 0, true);
    CHECK_EQ(append(&x, CN_PART_COORDINATOR, &a), 0);
    CHECK_EQ(cn_pstate_open_count(x.p.pstate), 0);
    CHECK_EQ(cn_partition_lso(&x.p), 4);
    memset(&at, 0, sizeof at);
    CHECK_EQ(cn_log_aborted_txns(x.p.log, 3, 4, collect, &at), 0);
    CHECK_EQ(x.f.appended, 4);
    fx_close(&x);
}

UNIT_TEST(operator_marker_fenced_by_epoch)
{
    struct fixture x;
    struct cn_part_append a;
    fx_open(&x, 0);
    data_batch(&x, 21, 4, 0, true);
    CHECK_EQ(append(&x, CN_PART_CLIENT, &a), 0);
    /* An operator's marker from an older epoch is a zombie's. */
    marker_batch(&x, 21, 3, false);
    CHECK_EQ(append(&x, CN_PART_OPERATOR, &a), -1);
    CHECK_EQ(a.kerr, KAFKA_INVALID_PRODUCER_EPOCH);
    CHECK_EQ(cn_log_end_offset(x.p.log), 1);
    CHECK_EQ(cn_pstate_open_count(x.p.pstate), 1);
    /* At the partition's epoch it closes the transaction. */
    marker_batch(&x, 21, 4, false);
    CHECK_EQ(append(&x, CN_PART_OPERATOR, &a), 0);
    CHECK_EQ(cn_pstate_open_count(x.p.pstate), 0);
    /* A marker for a producer with nothing open is appended too. */
    marker_batch(&x, 99, 0, true);
    CHECK_EQ(append(&x, CN_PART_OPERATOR, &a), 0);
    CHECK_EQ(cn_log_end_offset(x.p.log), 3);
    fx_close(&x);
}

UNIT_TEST(coordinator_marker_fenced_by_coordinator_epoch)
{
    struct fixture x;
    struct cn_part_append a;
    fx_open(&x, 0);
    data_batch(&x, 31, 2, 0, true);
    CHECK_EQ(append(&x, CN_PART_CLIENT, &a), 0);
    /* The coordinator at epoch 7 commits. */
    cn_wr_reset(&x.w);
    CHECK_EQ(cn_batch_build_control(&x.w, 31, 2, true, 7, 1000), 0);
    CHECK_EQ(append(&x, CN_PART_COORDINATOR, &a), 0);
    struct cn_pentry_info pe;
    CHECK(cn_pstate_get(x.p.pstate, 31, &pe));
    CHECK_EQ(pe.coordinator_epoch, 7);
    /* A deposed coordinator (epoch 6) comes late: fenced, nothing
     * written. */
    data_batch(&x, 31, 2, 1, true);
    CHECK_EQ(append(&x, CN_PART_CLIENT, &a), 0);
    int64_t end = cn_log_end_offset(x.p.log);
    cn_wr_reset(&x.w);
    CHECK_EQ(cn_batch_build_control(&x.w, 31, 2, false, 6, 1000), 0);
    CHECK_EQ(append(&x, CN_PART_COORDINATOR, &a), -1);
    CHECK_EQ(a.kerr, KAFKA_TRANSACTION_COORDINATOR_FENCED);
    CHECK_EQ(cn_log_end_offset(x.p.log), end);
    CHECK_EQ(cn_pstate_open_count(x.p.pstate), 1);
    /* The same epoch, or a newer one, writes. */
    cn_wr_reset(&x.w);
    CHECK_EQ(cn_batch_build_control(&x.w, 31, 2, false, 8, 1000), 0);
    CHECK_EQ(append(&x, CN_PART_COORDINATOR, &a), 0);
    CHECK_EQ(cn_pstate_open_count(x.p.pstate), 0);
    CHECK(cn_pstate_get(x.p.pstate, 31, &pe));
    CHECK_EQ(pe.coordinator_epoch, 8);
    cn_wr_reset(&x.w);
    CHECK_EQ(cn_batch_build_control(&x.w, 31, 2, false, 8, 1000), 0);
    CHECK_EQ(append(&x, CN_PART_COORDINATOR, &a), 0);
    /* A producer this partition has not seen takes any epoch. */
    cn_wr_reset(&x.w);
    CHECK_EQ(cn_batch_build_control(&x.w, 32, 0, true, 0, 1000), 0);
    CHECK_EQ(append(&x, CN_PART_COORDINATOR, &a), 0);
    fx_close(&x);
}

static int16_t refuse(void *arg, struct cn_part_append *a)
{
    (void)a;
    int *calls = arg;
    (*calls)++;
    return KAFKA_INVALID_TIMESTAMP;
}

UNIT_TEST(prepare_runs_after_producer_checks)
{
    struct fixture x;
    struct cn_part_append a;
    int calls = 0;
    fx_open(&x, 0);
    data_batch(&x, 5, 0, 0, false);
    CHECK_EQ(append(&x, CN_PART_CLIENT, &a), 0);
    data_batch(&x, 5, 0, 1, false);
    req_init(&x, CN_PART_CLIENT, &a);
    a.prepare = refuse;
    a.arg = &calls;
    CHECK_EQ(cn_part_append(&x.p, &x.env, &a), -1);
    CHECK_EQ(a.kerr, KAFKA_INVALID_TIMESTAMP);
    CHECK_EQ(calls, 1);
    CHECK_EQ(cn_log_end_offset(x.p.log), 1);
    /* A producer-state refusal comes first: prepare is not asked. */
    data_batch(&x, 5, 0, 7, false);
    a.batches = x.w.buf;
    a.len = x.w.len;
    CHECK_EQ(cn_part_append(&x.p, &x.env, &a), -1);
    CHECK_EQ(a.kerr, KAFKA_OUT_OF_ORDER_SEQUENCE_NUMBER);
    CHECK_EQ(calls, 1);
    CHECK_EQ(cn_log_end_offset(x.p.log), 1);
    CHECK_EQ(x.f.appended, 1);
    fx_close(&x);
}

UNIT_TEST(roll_snapshots_and_caller_syncs)
{
    struct fixture x;
    struct cn_part_append a;
    fx_open(&x, 200);
    data_batch(&x, 31, 0, 0, false);
    size_t one = x.w.len;
    int32_t seq = 0;
    /* Fill past the first segment so an append rolls. */
    while (cn_log_active_base(x.p.log) == 0 && seq < 20) {
        data_batch(&x, 31, 0, seq++, false);
        req_init(&x, CN_PART_COORDINATOR, &a);
        a.caller_syncs = true;
        CHECK_EQ(cn_part_append(&x.p, &x.env, &a), 0);
    }
    CHECK(one > 0);
    int64_t base = cn_log_active_base(x.p.log);
    CHECK(base > 0);
    CHECK_EQ(x.p.active_base, base);
    /* The snapshot names the new segment's base and leaves out the batch
     * that starts it. */
    char path[4096];
    snprintf(path, sizeof path, "%s/%020lld.snapshot", x.dir, (long long)base);
    CHECK_EQ(access(path, F_OK), 0);
    /* The caller syncs itself: no hand-off. */
    CHECK_EQ(x.f.appended, 0);
    CHECK_EQ(x.f.dir_failed, 0);
    fx_close(&x);
}

/* ---- roll snapshots on a worker ----------------------------------------- */

/* The worker, faked: queued work waits until the test runs it, so no test
 * depends on thread timing.  It also counts how many of one partition's
 * writes were in flight at once. */
struct fake_queue {
    struct cn_part_work *work[8];
    int n;
    int queued;
    int max_in_flight;
    int refuse; /* queue answers this error instead */
};

static int fake_queue(void *ctx, struct cn_part_work *w)
{
    struct fake_queue *q = ctx;
    if (q->refuse)
        return q->refuse;
    CHECK(q->n < 8);
    q->work[q->n++] = w;
    q->queued++;
    if (q->n > q->max_in_flight)
        q->max_in_flight = q->n;
    return 0;
}

/* Runs the oldest queued work as a worker and then the loop would. */
static void fake_complete(struct fake_queue *q)
{
    CHECK(q->n > 0);
    struct cn_part_work *w = q->work[0];
    memmove(q->work, q->work + 1, (size_t)(q->n - 1) * sizeof *q->work);
    q->n--;
    w->run(w);
    w->done(w);
}

static void fx_open_queued(struct fixture *x, struct fake_queue *q)
{
    fx_open(x, 200);
    memset(q, 0, sizeof *q);
    x->env.ctx = q;
    x->env.queue = fake_queue;
}

/* Appends client batches of one producer until the log rolls again;
 * returns the new segment's base. */
static int64_t append_until_roll(struct fixture *x, int32_t *seq)
{
    struct cn_part_append a;
    int64_t before = cn_log_active_base(x->p.log);
    for (int i = 0; i < 50 && cn_log_active_base(x->p.log) == before; i++) {
        data_batch(x, 41, 0, (*seq)++, false);
        req_init(x, CN_PART_COORDINATOR, &a);
        a.caller_syncs = true;
        CHECK_EQ(cn_part_append(&x->p, &x->env, &a), 0);
    }
    int64_t base = cn_log_active_base(x->p.log);
    CHECK(base != before);
    return base;
}

static bool snap_exists(const struct fixture *x, int64_t offset)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%020lld.snapshot", x->dir,
             (long long)offset);
    return access(path, F_OK) == 0;
}

UNIT_TEST(roll_snapshot_written_later_on_worker)
{
    struct fixture x;
    struct fake_queue q;
    fx_open_queued(&x, &q);
    int32_t seq = 0;
    int64_t base = append_until_roll(&x, &seq);
    /* Taken at the roll, written only when the worker runs. */
    CHECK_EQ(q.n, 1);
    CHECK(!snap_exists(&x, base));
    /* Appends after the roll do not change what it wrote. */
    struct cn_part_append a;
    data_batch(&x, 41, 0, seq++, false);
    req_init(&x, CN_PART_COORDINATOR, &a);
    a.caller_syncs = true;
    CHECK_EQ(cn_part_append(&x.p, &x.env, &a), 0);
    fake_complete(&q);
    CHECK(snap_exists(&x, base));
    CHECK(x.p.snap_running == NULL);
    struct cn_pstate *ps = cn_pstate_new();
    int64_t loaded = -1;
    CHECK_EQ(cn_pstate_snapshot_load(ps, x.dir, base, &loaded), 0);
    CHECK_EQ(loaded, base);
    struct cn_pentry_info pe;
    CHECK(cn_pstate_get(ps, 41, &pe));
    CHECK_EQ(pe.last_offset, base - 1); /* nothing from the roll on */
    cn_pstate_free(ps);
    /* A queue that cannot take the work: written at once, on the loop. */
    q.refuse = CN_ENOMEM;
    int64_t base2 = append_until_roll(&x, &seq);
    CHECK(snap_exists(&x, base2));
    CHECK_EQ(q.n, 0);
    fx_close(&x);
}

UNIT_TEST(roll_snapshots_in_order_newest_pending_wins)
{
    struct fixture x;
    struct fake_queue q;
    fx_open_queued(&x, &q);
    int32_t seq = 0;
    int64_t b1 = append_until_roll(&x, &seq);
    int64_t b2 = append_until_roll(&x, &seq);
    int64_t b3 = append_until_roll(&x, &seq);
    /* One write at a time: the later rolls wait, the newest replacing the
     * one before it. */
    CHECK_EQ(q.max_in_flight, 1);
    CHECK_EQ(q.queued, 1);
    CHECK(x.p.snap_pending != NULL);
    fake_complete(&q);
    CHECK(snap_exists(&x, b1));
    /* The first one's end started the newest pending one. */
    CHECK_EQ(q.n, 1);
    CHECK_EQ(q.queued, 2);
    CHECK(x.p.snap_pending == NULL);
    fake_complete(&q);
    CHECK(snap_exists(&x, b3));
    CHECK(!snap_exists(&x, b2));
    CHECK(snap_exists(&x, b1)); /* two kept */
    CHECK_EQ(q.max_in_flight, 1);
    CHECK_EQ(q.n, 0);
    fx_close(&x);
}

UNIT_TEST(close_with_roll_snapshot_in_flight)
{
    struct fixture x;
    struct fake_queue q;
    fx_open_queued(&x, &q);
    int32_t seq = 0;
    int64_t b1 = append_until_roll(&x, &seq);
    int64_t b2 = append_until_roll(&x, &seq);
    CHECK(x.p.snap_pending != NULL);
    int64_t end = cn_log_end_offset(x.p.log);
    cn_partition_producers_close(&x.p);
    /* No second writer of the directory while the first runs. */
    CHECK(!snap_exists(&x, end));
    CHECK(x.p.snap_running == NULL && x.p.snap_pending == NULL);
    /* What the worker's end finds in the partition must stay untouched:
     * the partition is freed by then. */
    struct cn_part_snap *poison = (struct cn_part_snap *)&q;
    x.p.snap_running = poison;
    fake_complete(&q);
    CHECK(snap_exists(&x, b1));
    CHECK(x.p.snap_running == poison);
    CHECK_EQ(q.n, 0); /* the dropped pending one never starts */
    CHECK(!snap_exists(&x, b2));
    x.p.snap_running = NULL;
    fx_close(&x);
}

/* The file layer, failing the open of a snapshot's temporary file. */
static int fail_snap_open;

static int snap_failing_open(const char *path, int flags, mode_t mode)
{
    size_t n = strlen(path);
    if (fail_snap_open && n > 13 && !strcmp(path + n - 13, ".snapshot.tmp"))
        return fail_snap_open;
    return cn_file_ops_real.open(path, flags, mode);
}

UNIT_TEST(roll_snapshot_write_failure_keeps_older)
{
    static struct cn_file_ops ops;
    ops = cn_file_ops_real;
    ops.open = snap_failing_open;
    cn_file_ops = &ops;
    struct fixture x;
    struct fake_queue q;
    fx_open_queued(&x, &q);
    int32_t seq = 0;
    int64_t b1 = append_until_roll(&x, &seq);
    fake_complete(&q);
    CHECK(snap_exists(&x, b1));
    /* A worker's open meeting EMFILE: logged, the older one stays, and
     * the next roll writes again. */
    fail_snap_open = -EMFILE;
    int64_t b2 = append_until_roll(&x, &seq);
    fake_complete(&q);
    CHECK(!snap_exists(&x, b2));
    CHECK(snap_exists(&x, b1));
    CHECK(x.p.snap_running == NULL);
    fail_snap_open = 0;
    int64_t b3 = append_until_roll(&x, &seq);
    fake_complete(&q);
    CHECK(snap_exists(&x, b3));
    CHECK(snap_exists(&x, b1));
    CHECK_EQ(x.f.dir_failed, 0);
    fx_close(&x);
    cn_file_ops = &cn_file_ops_real;
}

UNIT_TEST(retention_keeps_a_snapshot_while_a_roll_one_is_written)
{
    struct fixture x;
    struct fake_queue q;
    fx_open_queued(&x, &q);
    int32_t seq = 0;
    int64_t b1 = append_until_roll(&x, &seq);
    fake_complete(&q);
    CHECK(snap_exists(&x, b1));
    int64_t b2 = append_until_roll(&x, &seq);
    CHECK(!snap_exists(&x, b2));
    /* Retention removes every segment below b2 while b2's snapshot is
     * still on the worker: b1's must stay until b2's exists, or a crash
     * loads none and replays only from b2, forgetting producer 41. */
    CHECK_EQ(cn_log_delete_records(x.p.log, b2), 0);
    CHECK_EQ(cn_log_oldest_base(x.p.log), b2);
    cn_partition_after_retention(&x.p);
    CHECK(snap_exists(&x, b1));
    fake_complete(&q);
    CHECK(snap_exists(&x, b2));
    /* With none in flight the next pass prunes as before. */
    cn_partition_after_retention(&x.p);
    CHECK(!snap_exists(&x, b1));
    CHECK(snap_exists(&x, b2));
    fx_close(&x);
}

/* ---- replication --------------------------------------------------------- */

/* The partition leader epoch stored in the log's batch at offset. */
static int32_t epoch_at(struct fixture *x, int64_t offset)
{
    struct cn_wr r;
    cn_wr_init(&r, 256);
    size_t got = 0;
    CHECK_EQ(cn_log_read(x->p.log, offset, INT64_MAX, 1, true, &r, &got), 0);
    struct cn_batch_hdr hdr;
    int32_t epoch = -2;
    if (got > 0 && cn_batch_hdr_parse(r.buf, got, &hdr) == 0)
        epoch = hdr.leader_epoch;
    cn_wr_fini(&r);
    return epoch;
}

/* Appends x->w as a follower would, at base with leader epoch `epoch`. */
static int replica_append(struct fixture *x, int64_t base, int32_t epoch,
                          struct cn_part_append *a)
{
    cn_batch_set_base_offset(x->w.buf, base);
    cn_batch_set_leader_epoch(x->w.buf, epoch);
    req_init(x, CN_PART_REPLICA, a);
    return cn_part_append(&x->p, &x->env, a);
}

UNIT_TEST(client_appends_stamp_leader_epochs)
{
    struct fixture x;
    struct cn_part_append a;
    fx_open(&x, 0);
    /* A single node: epoch 0, recorded at the first append. */
    x.p.leader_epoch = -1;
    data_batch(&x, -1, -1, -1, false);
    CHECK_EQ(append(&x, CN_PART_CLIENT, &a), 0);
    CHECK_EQ(epoch_at(&x, 0), 0);
    CHECK_EQ(cn_epochs_latest(x.p.epochs), 0);
    CHECK_EQ(cn_epochs_start_of(x.p.epochs, 0), 0);
    /* Leading at 3: recorded at the log end before any append. */
    CHECK_EQ(cn_part_become_leader(&x.p, 3), 0);
    CHECK_EQ(x.p.leader_epoch, 3);
    CHECK_EQ(cn_epochs_start_of(x.p.epochs, 3), 1);
    data_batch(&x, 5, 0, 0, false);
    CHECK_EQ(append(&x, CN_PART_CLIENT, &a), 0);
    CHECK_EQ(epoch_at(&x, 1), 3);
    /* Coordinators' and operators' writes carry it too. */
    marker_batch(&x, 5, 0, true);
    CHECK_EQ(append(&x, CN_PART_COORDINATOR, &a), 0);
    CHECK_EQ(epoch_at(&x, 2), 3);
    CHECK_EQ(cn_epochs_count(x.p.epochs), 2);
    int32_t ep;
    int64_t end;
    cn_epochs_end_offset_for(x.p.epochs, 0, 3, &ep, &end);
    CHECK_EQ(ep, 0);
    CHECK_EQ(end, 1);
    /* Reopened: from the checkpoint; without it, rebuilt from the
     * batches (the same entries: both epochs wrote). */
    cn_partition_epochs_close(&x.p);
    CHECK_EQ(cn_partition_epochs_load(&x.p), 0);
    CHECK_EQ(cn_epochs_count(x.p.epochs), 2);
    cn_partition_epochs_close(&x.p);
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", x.dir, CN_EPOCHS_FILE);
    CHECK_EQ(unlink(path), 0);
    CHECK_EQ(cn_partition_epochs_load(&x.p), 0);
    CHECK_EQ(cn_epochs_count(x.p.epochs), 2);
    CHECK_EQ(cn_epochs_start_of(x.p.epochs, 3), 1);
    CHECK_EQ(access(path, F_OK), 0);
    /* Corrupt: rebuilt as well. */
    cn_partition_epochs_close(&x.p);
    FILE *f = fopen(path, "w");
    fputs("garbage\n", f);
    fclose(f);
    CHECK_EQ(cn_partition_epochs_load(&x.p), 0);
    CHECK_EQ(cn_epochs_count(x.p.epochs), 2);
    fx_close(&x);
}

UNIT_TEST(replica_append_keeps_offsets_and_epochs)
{
    struct fixture x;
    struct cn_part_append a;
    fx_open(&x, 0);
    /* The leader's batches 0..1 of producer 7 at its epoch 4, then a gap
     * (its cleaner removed 2..9), then 10 at epoch 6. */
    data_batch(&x, 7, 0, 0, false);
    CHECK_EQ(replica_append(&x, 0, 4, &a), 0);
    CHECK_EQ(a.base_offset, 0);
    data_batch(&x, 7, 0, 1, false);
    CHECK_EQ(replica_append(&x, 1, 4, &a), 0);
    data_batch(&x, 7, 0, 2, false);
    CHECK_EQ(replica_append(&x, 10, 6, &a), 0);
    CHECK_EQ(a.base_offset, 10);
    CHECK_EQ(cn_log_end_offset(x.p.log), 11);
    /* Unchanged: the leader's epochs, not this broker's. */
    CHECK_EQ(epoch_at(&x, 0), 4);
    CHECK_EQ(epoch_at(&x, 10), 6);
    CHECK_EQ(cn_epochs_count(x.p.epochs), 2);
    CHECK_EQ(cn_epochs_start_of(x.p.epochs, 4), 0);
    CHECK_EQ(cn_epochs_start_of(x.p.epochs, 6), 10);
    CHECK_EQ(x.f.appended, 3);
    /* Overlapping the log: refused before anything is written, the
     * whole request (a good batch after it included). */
    struct cn_wr two;
    cn_wr_init(&two, 256);
    data_batch(&x, 7, 0, 3, false);
    cn_batch_set_base_offset(x.w.buf, 10);
    cn_wr_raw(&two, x.w.buf, x.w.len);
    cn_batch_set_base_offset(x.w.buf, 11);
    cn_wr_raw(&two, x.w.buf, x.w.len);
    req_init(&x, CN_PART_REPLICA, &a);
    a.batches = two.buf;
    a.len = two.len;
    CHECK_EQ(cn_part_append(&x.p, &x.env, &a), -1);
    CHECK_EQ(a.kerr, KAFKA_OFFSET_OUT_OF_RANGE);
    CHECK_EQ(cn_log_end_offset(x.p.log), 11);
    /* Within one request too: the second batch overlaps the first. */
    cn_wr_reset(&two);
    cn_batch_set_base_offset(x.w.buf, 11);
    cn_wr_raw(&two, x.w.buf, x.w.len);
    cn_wr_raw(&two, x.w.buf, x.w.len);
    a.batches = two.buf;
    a.len = two.len;
    CHECK_EQ(cn_part_append(&x.p, &x.env, &a), -1);
    CHECK_EQ(a.kerr, KAFKA_OFFSET_OUT_OF_RANGE);
    CHECK_EQ(cn_log_end_offset(x.p.log), 11);
    cn_wr_fini(&two);
    /* The producer state followed: once leading, a client's retry of
     * sequence 2 is answered with the leader's offset. */
    CHECK_EQ(cn_part_become_leader(&x.p, 7), 0);
    data_batch(&x, 7, 0, 2, false);
    CHECK_EQ(append(&x, CN_PART_CLIENT, &a), 0);
    CHECK(a.duplicate);
    CHECK_EQ(a.base_offset, 10);
    data_batch(&x, 7, 0, 3, false);
    CHECK_EQ(append(&x, CN_PART_CLIENT, &a), 0);
    CHECK(!a.duplicate);
    CHECK_EQ(a.base_offset, 11);
    CHECK_EQ(epoch_at(&x, 11), 7);
    fx_close(&x);
}

/* Appends producer 7's next batch as a client; returns its offset. */
static int64_t client7(struct fixture *x, int32_t *seq)
{
    struct cn_part_append a;
    data_batch(x, 7, 0, (*seq)++, false);
    CHECK_EQ(append(x, CN_PART_CLIENT, &a), 0);
    CHECK(!a.duplicate);
    return a.base_offset;
}

static bool snapshot_at(const struct fixture *x, int64_t offset)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%020lld.snapshot", x->dir,
             (long long)offset);
    return access(path, F_OK) == 0;
}

static int count_aborted(void *arg, const struct cn_aborted_txn *t)
{
    (void)t;
    (*(int *)arg)++;
    return 0;
}

UNIT_TEST(truncate_rewinds_derived_state)
{
    struct fixture x;
    struct cn_part_append a;
    fx_open(&x, 300);
    CHECK_EQ(cn_part_become_leader(&x.p, 1), 0);
    int32_t seq = 0;
    while (cn_log_active_base(x.p.log) == 0)
        client7(&x, &seq);
    int64_t b1 = cn_log_active_base(x.p.log);
    CHECK(snapshot_at(&x, b1));
    CHECK_EQ(cn_part_become_leader(&x.p, 2), 0);
    /* Producer 10 aborts a transaction; producer 9 opens one. */
    data_batch(&x, 10, 0, 0, true);
    CHECK_EQ(append(&x, CN_PART_CLIENT, &a), 0);
    int64_t cut = a.base_offset;
    CHECK(cut > b1);
    marker_batch(&x, 10, 0, false);
    CHECK_EQ(append(&x, CN_PART_COORDINATOR, &a), 0);
    data_batch(&x, 9, 0, 0, true);
    CHECK_EQ(append(&x, CN_PART_CLIENT, &a), 0);
    int64_t open9 = a.base_offset;
    CHECK_EQ(cn_partition_lso(&x.p), open9);
    int aborted = 0;
    CHECK_EQ(cn_log_aborted_txns(x.p.log, 0, INT64_MAX, count_aborted,
                                 &aborted),
             0);
    CHECK_EQ(aborted, 1);
    int32_t seq_cut = seq;
    while (cn_log_active_base(x.p.log) == b1)
        client7(&x, &seq);
    int64_t b2 = cn_log_active_base(x.p.log);
    CHECK(snapshot_at(&x, b2));
    client7(&x, &seq);
    CHECK_EQ(x.p.high_watermark, cn_log_end_offset(x.p.log));

    CHECK_EQ(cn_part_truncate(&x.p, &x.env, cut), 0);
    CHECK_EQ(x.f.dir_failed, 0);
    CHECK_EQ(cn_log_end_offset(x.p.log), cut);
    CHECK_EQ(x.p.high_watermark, cut);
    /* The abort marker is gone, and its .txnindex entry with it. */
    aborted = 0;
    CHECK_EQ(cn_log_aborted_txns(x.p.log, 0, INT64_MAX, count_aborted,
                                 &aborted),
             0);
    CHECK_EQ(aborted, 0);
    /* Producer 9's transaction began above the cut: not open any more,
     * and the LSO is the end again. */
    CHECK_EQ(cn_pstate_open_count(x.p.pstate), 0);
    CHECK_EQ(cn_partition_lso(&x.p), cut);
    struct cn_pentry_info info;
    CHECK(!cn_pstate_get(x.p.pstate, 9, &info));
    CHECK(!cn_pstate_get(x.p.pstate, 10, &info));
    /* The roll snapshot above the cut is gone, the one below stays. */
    CHECK(!snapshot_at(&x, b2));
    CHECK(snapshot_at(&x, b1));
    /* Epoch 2 began at the cut: gone; 1 is the latest again. */
    CHECK_EQ(cn_epochs_latest(x.p.epochs), 1);
    /* Producer 7's sequences rewound: the first cut batch is new again
     * (not a duplicate, not out of order), at the cut offset. */
    CHECK(cn_pstate_get(x.p.pstate, 7, &info));
    CHECK_EQ(info.last_sequence, seq_cut - 1);
    data_batch(&x, 7, 0, seq_cut, false);
    CHECK_EQ(append(&x, CN_PART_CLIENT, &a), 0);
    CHECK(!a.duplicate);
    CHECK_EQ(a.base_offset, cut);
    /* Out of range. */
    CHECK_EQ(cn_part_truncate(&x.p, &x.env, cut + 5), CN_ERANGE);
    fx_close(&x);
}

UNIT_TEST(truncate_waits_for_roll_snapshot)
{
    struct fixture x;
    struct fake_queue q;
    fx_open_queued(&x, &q);
    int32_t seq = 0;
    int64_t base = append_until_roll(&x, &seq);
    CHECK_EQ(q.n, 1);
    CHECK_EQ(cn_part_truncate(&x.p, &x.env, 1), CN_EBUSY);
    CHECK_EQ(cn_part_truncate_fully(&x.p, &x.env, 1), CN_EBUSY);
    CHECK(cn_log_end_offset(x.p.log) > base);
    fake_complete(&q);
    CHECK_EQ(cn_part_truncate(&x.p, &x.env, 1), 0);
    CHECK_EQ(cn_log_end_offset(x.p.log), 1);
    CHECK(!snap_exists(&x, base));
    fx_close(&x);
}

UNIT_TEST(truncate_fully_restarts_the_log)
{
    struct fixture x;
    fx_open(&x, 300);
    CHECK_EQ(cn_part_become_leader(&x.p, 2), 0);
    int32_t seq = 0;
    while (cn_log_active_base(x.p.log) == 0)
        client7(&x, &seq);
    CHECK(snapshot_at(&x, cn_log_active_base(x.p.log)));
    CHECK_EQ(cn_part_truncate_fully(&x.p, &x.env, 1000), 0);
    CHECK_EQ(cn_log_start_offset(x.p.log), 1000);
    CHECK_EQ(cn_log_end_offset(x.p.log), 1000);
    CHECK_EQ(x.p.high_watermark, 1000);
    CHECK_EQ(cn_pstate_count(x.p.pstate), 0);
    CHECK_EQ(cn_epochs_count(x.p.epochs), 0);
    CHECK(!snapshot_at(&x, 0) && !snapshot_at(&x, 1000));
    /* The leader's batches follow from there. */
    struct cn_part_append a;
    data_batch(&x, 7, 0, 40, false);
    CHECK_EQ(replica_append(&x, 1000, 5, &a), 0);
    CHECK_EQ(cn_epochs_start_of(x.p.epochs, 5), 1000);
    CHECK_EQ(x.f.dir_failed, 0);
    fx_close(&x);
}

UNIT_TEST(retention_moves_epochs_start)
{
    struct fixture x;
    fx_open(&x, 300);
    int32_t seq = 0;
    while (cn_log_active_base(x.p.log) == 0)
        client7(&x, &seq);
    CHECK_EQ(cn_epochs_start_of(x.p.epochs, 0), 0);
    CHECK_EQ(cn_log_delete_records(x.p.log, 2), 0);
    cn_partition_after_retention(&x.p);
    CHECK_EQ(cn_epochs_start_of(x.p.epochs, 0), 2);
    fx_close(&x);
}

UNIT_MAIN(client_idempotent_append_and_duplicate,
          client_producer_state_refusals, client_transactional_verify_and_lso,
          coordinator_markers_move_lso_and_txnindex,
          operator_marker_fenced_by_epoch,
          coordinator_marker_fenced_by_coordinator_epoch,
          prepare_runs_after_producer_checks, roll_snapshots_and_caller_syncs,
          roll_snapshot_written_later_on_worker,
          roll_snapshots_in_order_newest_pending_wins,
          close_with_roll_snapshot_in_flight,
          roll_snapshot_write_failure_keeps_older,
          retention_keeps_a_snapshot_while_a_roll_one_is_written,
          client_appends_stamp_leader_epochs,
          replica_append_keeps_offsets_and_epochs,
          truncate_rewinds_derived_state, truncate_waits_for_roll_snapshot,
          truncate_fully_restarts_the_log, retention_moves_epochs_start)
