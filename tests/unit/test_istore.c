/* test_istore.c - the internal-topic store over real logs in a temp
 * directory, with the real group commit on a libuv loop and a fake owner:
 * writes made durable then reported, replay in log order (records,
 * transactional records and markers), the partition count of an existing
 * topic, and compaction by checkpoint with each of its gates: its sync
 * runs in a round on a worker, and the old records go only once that
 * round made the checkpoint durable. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/config.h"
#include "base/failpoint.h"
#include "base/err.h"
#include "node/broker_int.h"
#include "node/group_coord.h"
#include "node/istore.h"
#include "node/markers.h"
#include "proto/kerr.h"
#include "txn/txn_state.h"
#include "unit.h"

/* ---- the fake owner ---------------------------------------------------- */

#define EV_MAX 64

struct owner {
    /* replay, in order: "k=v", "k=null", "txn:pid:k=v", "commit:pid" */
    char ev[EV_MAX][64];
    int nev;
    int refuse; /* record: answer this error for key "bad" */
    bool want;  /* want_compact's answer */
    int wants, checkpoints;
    int checkpoint_rc; /* CN_EEXIST: not now */
    int live;          /* records the checkpoint adds: "live0".. */
};

static int own_record(void *ctx, int32_t part, struct cn_bytes key,
                      struct cn_bytes value, int64_t producer_id, bool txn)
{
    struct owner *o = ctx;
    (void)part;
    if (o->refuse && key.len == 3 && memcmp(key.ptr, "bad", 3) == 0)
        return o->refuse;
    char pre[32] = "";
    if (txn)
        snprintf(pre, sizeof pre, "txn:%lld:", (long long)producer_id);
    if (o->nev < EV_MAX) {
        if (cn_bytes_is_null(value))
            snprintf(o->ev[o->nev++], 64, "%s%.*s=null", pre, (int)key.len,
                     (const char *)key.ptr);
        else
            snprintf(o->ev[o->nev++], 64, "%s%.*s=%.*s", pre, (int)key.len,
                     (const char *)key.ptr, (int)value.len,
                     (const char *)value.ptr);
    }
    return 0;
}

static void own_marker(void *ctx, int32_t part, int64_t producer_id,
                       bool commit)
{
    struct owner *o = ctx;
    (void)part;
    if (o->nev < EV_MAX)
        snprintf(o->ev[o->nev++], 64, "%s:%lld", commit ? "commit" : "abort",
                 (long long)producer_id);
}

static bool own_want(void *ctx, int32_t part, int64_t start, int64_t end)
{
    struct owner *o = ctx;
    (void)part;
    (void)start;
    (void)end;
    o->wants++;
    return o->want;
}

static int own_checkpoint(void *ctx, int32_t part, struct cn_batch_builder *bb,
                          int64_t now_ms, size_t *live)
{
    struct owner *o = ctx;
    (void)part;
    o->checkpoints++;
    if (o->checkpoint_rc)
        return o->checkpoint_rc;
    for (int i = 0; i < o->live; i++) {
        char k[16];
        int n = snprintf(k, sizeof k, "live%d", i);
        cn_batch_builder_add(bb, now_ms, cn_bytes_of((const uint8_t *)k, n),
                             cn_bytes_str("v"), NULL, 0);
    }
    *live = (size_t)o->live;
    return 0;
}

static const struct cn_istore_ops own_ops = {
    own_record,
    own_marker,
    own_want,
    own_checkpoint,
};

/* ---- a broker with only what the store uses ---------------------------- */

struct fixture {
    struct cn_broker b;
    struct cn_config cfg;
    uv_loop_t loop;
    char *dir;
    struct owner o;
    struct cn_istore *s;
};

static void no_fetches(struct cn_broker *b)
{
    (void)b;
}

/* A broker on x->dir. */
static void fx_start(struct fixture *x, bool group_commit, int32_t slack)
{
    memset(&x->b, 0, sizeof x->b);
    memset(&x->o, 0, sizeof x->o);
    x->s = NULL;
    char err[256];
    CHECK_EQ(cn_config_init(&x->cfg), 0);
    CHECK_EQ(cn_config_set(&x->cfg, "cairn.fsync.group.commit",
                           group_commit ? "true" : "false", err, sizeof err),
             0);
    char v[16];
    snprintf(v, sizeof v, "%d", slack);
    CHECK_EQ(cn_config_set(&x->cfg, "cairn.internal.compact.slack.records", v,
                           err, sizeof err),
             0);
    CHECK_EQ(uv_loop_init(&x->loop), 0);
    x->b.loop = &x->loop;
    x->b.cfg = &x->cfg;
    x->b.data_visible = no_fetches;
    snprintf(x->b.data_dir, sizeof x->b.data_dir, "%s", x->dir);
    CHECK_EQ(cn_topics_load(&x->b, err, sizeof err), 0);
}

static void fx_stop(struct fixture *x)
{
    while (x->b.sync_running)
        uv_run(&x->loop, UV_RUN_ONCE);
    cn_istore_free(x->s);
    x->s = NULL;
    cn_topics_close_all(&x->b);
    free(x->b.topic_table);
    uv_run(&x->loop, UV_RUN_NOWAIT);
    CHECK_EQ(uv_loop_close(&x->loop), 0);
    cn_config_fini(&x->cfg);
}

/* fx_start, then the store of topic on it. */
static void fx_open(struct fixture *x, bool group_commit, int32_t slack,
                    const char *topic, int32_t nparts, bool create)
{
    fx_start(x, group_commit, slack);
    CHECK_EQ(cn_istore_open(&x->b, topic, nparts, &own_ops, &x->o, create,
                            &x->s),
             0);
}

/* fx_stop, and the directory goes. */
static void fx_end(struct fixture *x)
{
    fx_stop(x);
    unit_rmtree(x->dir);
    free(x->dir);
}

struct waited {
    struct cn_istore_wait w; /* first */
    int done, err;
};

static void waited_done(struct cn_istore_wait *w, int err)
{
    struct waited *wd = (struct waited *)w;
    wd->done++;
    wd->err = err;
}

/* Writes n pairs "k=v" (v "-": tombstone) to part and waits until durable. */
static void put(struct fixture *x, int32_t part, int64_t pid,
                const char *const *kv, size_t n)
{
    struct cn_bytes keys[8], vals[8];
    char buf[8][32];
    for (size_t i = 0; i < n; i++) {
        snprintf(buf[i], sizeof buf[i], "%s", kv[i]);
        char *eq = strchr(buf[i], '=');
        *eq = '\0';
        keys[i] = cn_bytes_str(buf[i]);
        vals[i] = strcmp(eq + 1, "-") == 0 ? CN_BYTES_NULL
                                           : cn_bytes_str(eq + 1);
    }
    struct waited wd = {.w.done = waited_done};
    CHECK_EQ(cn_istore_write(x->s, part, keys, vals, n, pid, 0, &wd.w), 0);
    while (!wd.done && uv_run(&x->loop, UV_RUN_ONCE))
        ;
    CHECK_EQ(wd.done, 1);
    CHECK_EQ(wd.err, 0);
}

static struct cn_partition *part_of(struct fixture *x, int32_t part)
{
    return cn_istore_partition(x->s, part, false);
}

/* Runs the loop until no sync round is in flight. */
static void settle(struct fixture *x)
{
    while (x->b.sync_running && uv_run(&x->loop, UV_RUN_ONCE))
        ;
}

/* ---- tests ------------------------------------------------------------ */

UNIT_TEST(test_write_then_replay_in_order)
{
    struct fixture x;
    x.dir = unit_tmpdir("istore");
    fx_open(&x, true, 10000, "__consumer_offsets", 3, true);
    CHECK_EQ(cn_istore_nparts(x.s), 3);
    const char *a[] = {"a=1", "b=2"};
    const char *c[] = {"a=3", "b=-"};
    put(&x, 1, -1, a, 2);
    put(&x, 1, -1, c, 2);
    put(&x, 2, -1, (const char *[]){"z=9"}, 1);
    struct cn_partition *p = part_of(&x, 1);
    CHECK(p != NULL);
    CHECK_EQ(cn_log_end_offset(p->log), 4);
    CHECK_EQ(cn_log_synced_offset(p->log), 4);
    fx_stop(&x);

    /* A restart configured for 5 partitions finds the topic with 3. */
    fx_open(&x, true, 10000, "__consumer_offsets", 5, false);
    CHECK_EQ(cn_istore_nparts(x.s), 3);
    struct cn_istore_counts n = {0, 0};
    CHECK_EQ(cn_istore_replay(x.s, 1, &n), 0);
    CHECK_EQ(n.records, 4);
    CHECK_EQ(n.bad, 0);
    CHECK_EQ(x.o.nev, 4);
    CHECK(strcmp(x.o.ev[0], "a=1") == 0);
    CHECK(strcmp(x.o.ev[1], "b=2") == 0);
    CHECK(strcmp(x.o.ev[2], "a=3") == 0);
    CHECK(strcmp(x.o.ev[3], "b=null") == 0);
    fx_end(&x);
}

UNIT_TEST(test_open_without_create)
{
    struct fixture x;
    x.dir = unit_tmpdir("istore");
    fx_open(&x, true, 10000, "__transaction_state", 4, false);
    CHECK_EQ(cn_istore_nparts(x.s), 4);
    CHECK(part_of(&x, 0) == NULL);
    /* Nothing to replay before the first write makes the topic. */
    CHECK_EQ(cn_istore_replay(x.s, 0, NULL), 0);
    CHECK_EQ(x.o.nev, 0);
    CHECK_EQ(cn_istore_part_of(x.s, (const uint8_t *)"id", 2), 3);
    put(&x, 3, -1, (const char *[]){"k=v"}, 1);
    CHECK(part_of(&x, 3) != NULL);
    CHECK(part_of(&x, 4) == NULL);
    fx_end(&x);
}

/* An id's partition is Kafka's Utils.abs(id.hashCode()) % n, Java's
 * String.hashCode over UTF-16 units; the hash values are Java's
 * ("polygenelubricants" hashes to Integer.MIN_VALUE, whose abs is 0). */
UNIT_TEST(test_part_of_matches_kafka)
{
    static const struct {
        const char *id;
        int32_t java_hash, part; /* part of 50 */
    } v[] = {
        {"id", 3355, 5},
        {"hello", 99162322, 22},
        {"polygenelubricants", INT32_MIN, 0},
        {"my-transactional-id", -959806496, 46},
        {"transactional-id-42", -1774587604, 4},
        {"\xc3\xa9", 233, 33},             /* U+00E9 */
        {"\xf0\x9f\x98\x80", 1772899, 49}, /* U+1F600, a surrogate pair */
    };
    struct fixture x;
    x.dir = unit_tmpdir("istore");
    fx_open(&x, true, 10000, "__transaction_state", 50, false);
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        size_t n = strlen(v[i].id);
        CHECK_EQ(cn_txn_java_hash((const uint8_t *)v[i].id, n),
                 v[i].java_hash);
        CHECK_EQ(cn_istore_part_of(x.s, (const uint8_t *)v[i].id, n),
                 v[i].part);
    }
    fx_end(&x);
}

UNIT_TEST(test_replay_txn_records_and_markers)
{
    struct fixture x;
    x.dir = unit_tmpdir("istore");
    fx_open(&x, true, 10000, "__consumer_offsets", 1, true);
    put(&x, 0, 7, (const char *[]){"t=1"}, 1);
    put(&x, 0, -1, (const char *[]){"bad=x", "plain=2"}, 2);
    CHECK_EQ(cn_marker_write_local(&x.b, part_of(&x, 0), CN_PART_COORDINATOR,
                                   7, 0, true, 0, NULL, NULL),
             KAFKA_NONE);
    fx_stop(&x);

    fx_open(&x, true, 10000, "__consumer_offsets", 1, false);
    x.o.refuse = CN_ECORRUPT;
    struct cn_istore_counts n = {0, 0};
    CHECK_EQ(cn_istore_replay(x.s, 0, &n), 0);
    CHECK_EQ(n.records, 2);
    CHECK_EQ(n.bad, 1);
    CHECK_EQ(x.o.nev, 3);
    CHECK(strcmp(x.o.ev[0], "txn:7:t=1") == 0);
    CHECK(strcmp(x.o.ev[1], "plain=2") == 0);
    CHECK(strcmp(x.o.ev[2], "commit:7") == 0);
    /* Out of memory in the owner stops the replay with it. */
    x.o.refuse = CN_ENOMEM;
    CHECK_EQ(cn_istore_replay(x.s, 0, NULL), CN_ENOMEM);
    fx_end(&x);
}

UNIT_TEST(test_group_commit_off_still_synced)
{
    struct fixture x;
    x.dir = unit_tmpdir("istore");
    fx_open(&x, false, 10000, "__consumer_offsets", 1, true);
    put(&x, 0, -1, (const char *[]){"k=v"}, 1);
    CHECK_EQ(cn_log_synced_offset(part_of(&x, 0)->log), 1);
    fx_end(&x);
}

/* Six records on part 0, slack 2: compaction is possible. */
static void fill(struct fixture *x, bool group_commit)
{
    fx_open(x, group_commit, 2, "__consumer_offsets", 1, true);
    for (int i = 0; i < 3; i++)
        put(x, 0, -1, (const char *[]){"a=1", "b=2"}, 2);
}

/* fill, and the owner wants a checkpoint of 2 live records. */
static struct cn_partition *fill_wanting(struct fixture *x, bool group_commit)
{
    fill(x, group_commit);
    x->o.want = true;
    x->o.live = 2;
    return part_of(x, 0);
}

/* Restarts on x->dir: a replay of part 0 reads ev[0..n). */
static void check_replay(struct fixture *x, bool group_commit,
                         const char *const *ev, int n)
{
    fx_stop(x);
    fx_open(x, group_commit, 2, "__consumer_offsets", 1, false);
    CHECK_EQ(cn_istore_replay(x->s, 0, NULL), 0);
    CHECK_EQ(x->o.nev, n);
    for (int i = 0; i < n && i < x->o.nev; i++)
        CHECK(strcmp(x->o.ev[i], ev[i]) == 0);
}

static const char *const checkpointed[] = {"live0=v", "live1=v", "w=1"};

UNIT_TEST(test_compact_by_checkpoint)
{
    struct fixture x;
    x.dir = unit_tmpdir("istore");
    fill(&x, true);
    struct cn_partition *p = part_of(&x, 0);
    /* The owner's policy says no: nothing is built. */
    cn_istore_maybe_compact(x.s, 0);
    CHECK_EQ(x.o.wants, 1);
    CHECK_EQ(x.o.checkpoints, 0);
    x.o.want = true;
    x.o.live = 2;
    cn_istore_maybe_compact(x.s, 0);
    CHECK_EQ(x.o.checkpoints, 1);
    settle(&x);
    CHECK_EQ(cn_log_start_offset(p->log), 6);
    CHECK_EQ(cn_log_end_offset(p->log), 8);
    CHECK_EQ(cn_log_synced_offset(p->log), 8);
    /* 2 live + slack 2 > 2 records: built, not written. */
    cn_istore_maybe_compact(x.s, 0);
    CHECK_EQ(x.o.checkpoints, 2);
    CHECK_EQ(cn_log_start_offset(p->log), 6);
    /* What a restart reads is the checkpoint. */
    check_replay(&x, true, checkpointed, 2);
    fx_end(&x);
}

UNIT_TEST(test_compact_nothing_live_drops_the_log)
{
    struct fixture x;
    x.dir = unit_tmpdir("istore");
    fill(&x, true);
    x.o.want = true;
    cn_istore_maybe_compact(x.s, 0);
    struct cn_partition *p = part_of(&x, 0);
    CHECK_EQ(cn_log_start_offset(p->log), 6);
    CHECK_EQ(cn_log_end_offset(p->log), 6);
    fx_end(&x);
}

UNIT_TEST(test_compact_gates)
{
    struct fixture x;
    x.dir = unit_tmpdir("istore");
    fill(&x, true);
    struct cn_partition *p = part_of(&x, 0);
    x.o.want = true;
    x.o.live = 1;
    /* The owner holds what a checkpoint cannot carry. */
    x.o.checkpoint_rc = CN_EEXIST;
    cn_istore_maybe_compact(x.s, 0);
    CHECK_EQ(x.o.checkpoints, 1);
    CHECK_EQ(cn_log_start_offset(p->log), 0);
    x.o.checkpoint_rc = 0;
    /* A write between append and durable holds the partition, even while
     * the owner runs its done of another write of the same round. */
    struct cn_bytes k = cn_bytes_str("c"), v = cn_bytes_str("3");
    struct waited w1 = {.w.done = waited_done}, w2 = {.w.done = waited_done};
    CHECK_EQ(cn_istore_write(x.s, 0, &k, &v, 1, -1, -1, &w1.w), 0);
    CHECK_EQ(cn_istore_write(x.s, 0, &k, &v, 1, -1, -1, &w2.w), 0);
    cn_istore_maybe_compact(x.s, 0);
    CHECK_EQ(x.o.checkpoints, 1);
    while (!(w1.done && w2.done) && uv_run(&x.loop, UV_RUN_ONCE))
        ;
    /* An open transaction on the partition: its records are not the
     * owner's state until the marker. */
    put(&x, 0, 9, (const char *[]){"t=1"}, 1);
    cn_istore_maybe_compact(x.s, 0);
    CHECK_EQ(x.o.checkpoints, 1);
    CHECK_EQ(cn_marker_write_local(&x.b, p, CN_PART_COORDINATOR, 9, 0, false,
                                   0, NULL, NULL),
             KAFKA_NONE);
    settle(&x);
    cn_istore_maybe_compact(x.s, 0);
    CHECK_EQ(x.o.checkpoints, 2);
    settle(&x);
    CHECK_EQ(cn_log_start_offset(p->log), 10);
    /* Stopping: no compaction. */
    x.b.stopping = true;
    cn_istore_maybe_compact(x.s, 0);
    CHECK_EQ(x.o.wants, 4);
    x.b.stopping = false;
    fx_end(&x);
}

/* A done that asks for compaction, as an owner does once it applied. */
static void done_then_compact(struct cn_istore_wait *w, int err)
{
    waited_done(w, err);
    cn_istore_maybe_compact(w->store, 0);
}

/* Six records on part 0 of 4 (slack 2), then three rounds in flight (the
 * most there are) with a write each to parts 1..3: whatever is appended
 * next joins one round, the fourth. */
static void fill_then_busy(struct fixture *x, struct waited busy[3])
{
    fx_open(x, true, 2, "__consumer_offsets", 4, true);
    for (int i = 0; i < 3; i++)
        put(x, 0, -1, (const char *[]){"a=1", "b=2"}, 2);
    struct cn_bytes k = cn_bytes_str("c"), v = cn_bytes_str("3");
    for (int i = 0; i < 3; i++) {
        busy[i] = (struct waited){.w.done = waited_done};
        CHECK_EQ(cn_istore_write(x->s, i + 1, &k, &v, 1, -1, -1, &busy[i].w),
                 0);
    }
    CHECK_EQ(x->b.sync_running, 3);
}

UNIT_TEST(test_compact_gate_in_same_round)
{
    /* Two writes synced by one round: when the first one's done asks for
     * compaction, every record is synced but the second is not applied by
     * its owner yet; a checkpoint then would lose it. */
    struct fixture x;
    x.dir = unit_tmpdir("istore");
    struct waited busy[3];
    fill_then_busy(&x, busy);
    x.o.want = true;
    x.o.live = 1;
    /* Both writes wait for the same next round. */
    struct cn_bytes k = cn_bytes_str("c"), v = cn_bytes_str("3");
    struct waited w1 = {.w.done = done_then_compact};
    struct waited w2 = {.w.done = waited_done};
    CHECK_EQ(cn_istore_write(x.s, 0, &k, &v, 1, -1, -1, &w1.w), 0);
    CHECK_EQ(cn_istore_write(x.s, 0, &k, &v, 1, -1, -1, &w2.w), 0);
    while (!(w1.done && w2.done) && uv_run(&x.loop, UV_RUN_ONCE))
        ;
    CHECK_EQ(w1.done + w2.done, 2);
    CHECK_EQ(x.o.checkpoints, 0);
    /* Once the second is applied too, it may. */
    cn_istore_maybe_compact(x.s, 0);
    CHECK_EQ(x.o.checkpoints, 1);
    settle(&x);
    CHECK_EQ(cn_log_start_offset(part_of(&x, 0)->log), 8);
    fx_end(&x);
}

UNIT_TEST(test_compact_ends_with_its_round)
{
    /* The checkpoint is appended at once, synced in a round on a worker,
     * and the old records go only when that round ends; a write appended
     * meanwhile comes after the checkpoint and stays, also in a replay.
     * With group commit off too (only internal partitions join rounds). */
    for (int group = 0; group < 2; group++) {
        struct fixture x;
        x.dir = unit_tmpdir("istore");
        struct cn_partition *p = fill_wanting(&x, group);
        cn_istore_maybe_compact(x.s, 0);
        CHECK_EQ(x.o.checkpoints, 1);
        CHECK_EQ(cn_log_end_offset(p->log), 8);
        CHECK_EQ(cn_log_start_offset(p->log), 0);
        CHECK_EQ(cn_log_synced_offset(p->log), 6);
        CHECK_EQ(x.b.sync_running, 1);
        struct cn_bytes k = cn_bytes_str("w"), v = cn_bytes_str("1");
        struct waited w = {.w.done = waited_done};
        CHECK_EQ(cn_istore_write(x.s, 0, &k, &v, 1, -1, -1, &w.w), 0);
        CHECK_EQ(cn_log_start_offset(p->log), 0);
        while (!w.done && uv_run(&x.loop, UV_RUN_ONCE))
            ;
        settle(&x);
        CHECK_EQ(w.err, 0);
        CHECK_EQ(cn_log_start_offset(p->log), 6);
        CHECK_EQ(cn_log_end_offset(p->log), 9);
        CHECK_EQ(cn_log_synced_offset(p->log), 9);
        CHECK_EQ(p->high_watermark, 9);
        check_replay(&x, group, checkpointed, 3);
        fx_end(&x);
    }
}

UNIT_TEST(test_compact_failed_sync_deletes_nothing)
{
    struct fixture x;
    x.dir = unit_tmpdir("istore");
    struct cn_partition *p = fill_wanting(&x, true);
    CHECK_EQ(cn_failpoint_set("log.fsync", "error"), 0);
    cn_istore_maybe_compact(x.s, 0);
    CHECK_EQ(x.o.checkpoints, 1);
    settle(&x);
    CHECK_EQ(cn_failpoint_set("log.fsync", NULL), 0);
    CHECK(x.b.log_dir_offline);
    CHECK_EQ(cn_log_start_offset(p->log), 0);
    CHECK_EQ(cn_log_end_offset(p->log), 8);
    CHECK_EQ(cn_log_synced_offset(p->log), 6);
    CHECK_EQ(p->high_watermark, 6);
    fx_end(&x);
}

UNIT_TEST(test_compact_one_checkpoint_at_a_time)
{
    /* A write of another partition synced by the checkpoint's own round
     * asks for compaction before the checkpoint's end ran: every record
     * of the partition is synced and none in flight, but the first
     * checkpoint's records are not gone yet, so no second one starts. */
    struct fixture x;
    x.dir = unit_tmpdir("istore");
    struct waited busy[3];
    fill_then_busy(&x, busy);
    struct cn_partition *p = part_of(&x, 0);
    x.o.want = true;
    x.o.live = 2;
    /* The next write and the checkpoint join the same next round, the
     * write's waiter first. */
    struct cn_bytes k = cn_bytes_str("c"), v = cn_bytes_str("3");
    struct waited w1 = {.w.done = done_then_compact};
    CHECK_EQ(cn_istore_write(x.s, 1, &k, &v, 1, -1, -1, &w1.w), 0);
    cn_istore_maybe_compact(x.s, 0);
    CHECK_EQ(x.o.checkpoints, 1);
    CHECK_EQ(cn_log_end_offset(p->log), 8);
    while (!w1.done && uv_run(&x.loop, UV_RUN_ONCE))
        ;
    settle(&x);
    CHECK_EQ(w1.err, 0);
    CHECK_EQ(x.o.checkpoints, 1);
    CHECK_EQ(cn_log_start_offset(p->log), 6);
    CHECK_EQ(cn_log_end_offset(p->log), 8);
    /* Ended, the next one may start (nothing live: the log just goes). */
    x.o.live = 0;
    cn_istore_maybe_compact(x.s, 0);
    CHECK_EQ(x.o.checkpoints, 2);
    CHECK_EQ(cn_log_start_offset(p->log), 8);
    fx_end(&x);
}

UNIT_TEST(test_store_freed_with_checkpoint_in_flight)
{
    /* The round ends the checkpoint and a plain write of the same round
     * without the store (ASan judges); the write's done still runs. */
    struct fixture x;
    x.dir = unit_tmpdir("istore");
    struct cn_partition *p = fill_wanting(&x, true);
    cn_istore_maybe_compact(x.s, 0);
    CHECK_EQ(x.o.checkpoints, 1);
    struct cn_bytes k = cn_bytes_str("late"), v = cn_bytes_str("1");
    struct waited wd = {.w.done = waited_done};
    CHECK_EQ(cn_istore_write(x.s, 0, &k, &v, 1, -1, -1, &wd.w), 0);
    CHECK_EQ(wd.done, 0);
    cn_istore_free(x.s);
    x.s = NULL;
    settle(&x);
    CHECK_EQ(wd.done, 1);
    CHECK_EQ(wd.err, 0);
    CHECK_EQ(cn_log_start_offset(p->log), 6);
    fx_end(&x);
}

UNIT_TEST(test_group_marker_synced_without_group_commit)
{
    /* With cairn.fsync.group.commit=false the partition layer appends a
     * marker under the flush policy for data, which never syncs an
     * internal topic; the group coordinator acts on it at once. */
    struct fixture x;
    x.dir = unit_tmpdir("istore");
    fx_start(&x, false, 10000);
    char err[256];
    CHECK_EQ(cn_config_set(&x.cfg, "offsets.topic.num.partitions", "1", err,
                           sizeof err),
             0);
    CHECK_EQ(cn_group_coord_start(&x.b), 0);
    struct cn_partition *p = cn_group_coord_partition(&x.b, cn_bytes_str("g"));
    CHECK(p != NULL);
    CHECK_EQ(cn_marker_write_local(&x.b, p, CN_PART_COORDINATOR, 5, 0, true, 0,
                                   NULL, NULL),
             KAFKA_NONE);
    while (x.b.sync_running && uv_run(&x.loop, UV_RUN_ONCE))
        ;
    CHECK_EQ(cn_log_end_offset(p->log), 1);
    CHECK_EQ(cn_log_synced_offset(p->log), 1);
    cn_group_coord_stop(&x.b);
    uv_run(&x.loop, UV_RUN_NOWAIT);
    cn_group_coord_free(&x.b);
    fx_end(&x);
}

UNIT_MAIN(test_write_then_replay_in_order, test_open_without_create,
          test_part_of_matches_kafka, test_replay_txn_records_and_markers,
          test_group_commit_off_still_synced, test_compact_by_checkpoint,
          test_compact_nothing_live_drops_the_log, test_compact_gates,
          test_compact_gate_in_same_round, test_compact_ends_with_its_round,
          test_compact_failed_sync_deletes_nothing,
          test_compact_one_checkpoint_at_a_time,
          test_store_freed_with_checkpoint_in_flight,
          test_group_marker_synced_without_group_commit)
