/*
 * txn_coord.c - the transaction coordinator; see txn_coord.h.
 *
 * One entry per transactional id holds the metadata as last made durable.
 * A change is never applied in memory first: it is encoded, appended to
 * the id's __transaction_state partition and synced, and only then applied
 * and acted on (answering, writing markers).  While a change or the
 * markers of a decided transaction are in flight the entry is busy, and
 * requests for it get CONCURRENT_TRANSACTIONS, as Kafka's do.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/failpoint.h"
#include "base/say.h"
#include "group_coord.h"
#include "handlers.h"
#include "proto/batch.h"
#include "proto/gen/msgs.h"
#include "proto/kerr.h"
#include "txn/txn_log.h"
#include "txn/txn_state.h"
#include "txn_coord.h"

/* Kafka moves to a new producer id before the epoch reaches
 * Short.MAX_VALUE, which is reserved. */
#define EPOCH_LAST_USABLE (INT16_MAX - 1)
/* The longest a request waits for its busy id before the client hears
 * CONCURRENT_TRANSACTIONS. */
#define PARK_MAX_MS 1000
/* Markers carry the coordinator epoch; one broker has always led. */
#define COORDINATOR_EPOCH 0
/* A marker that could not be appended is tried again after this long. */
#define MARKER_RETRY_MS 1000

/* Transaction version 2 (KIP-890 part 2) is finalized. */
static bool tv2_on(const struct cn_broker *b)
{
    return b->cfg->cairn_transaction_version >= 2;
}

struct txn_entry {
    struct cn_txn_meta meta;    /* as last made durable */
    bool busy;                  /* a change or markers in flight */
    bool writing;               /* a record appended, not yet durable */
    int32_t part;               /* its __transaction_state partition */
    struct txn_entry *next;     /* hash chain by id */
    struct txn_entry *pid_next; /* chain in the producer id index */
    int64_t indexed_pid;        /* producer id it is indexed under, or -1 */
    int64_t decide_us;          /* monotonic us the running commit/abort
                                   decision began, for the histograms */
    bool timeout_abort;         /* the abort in flight is the timeout's */
};

#define PID_BUCKETS 4096

struct cn_txn_coord {
    uv_timer_t expiry_timer;    /* unused transactional ids */
    struct txn_entry **table;   /* by transactional id */
    size_t buckets, count;
    struct txn_entry *by_pid[PID_BUCKETS]; /* by current producer id */
    int32_t nparts;             /* partitions of __transaction_state */
    size_t *part_ids;           /* ids per partition */
    size_t *part_writing;       /* ids with a record not yet durable */
    uv_timer_t timer;           /* timed-out transactions */
    bool timer_armed;
    struct txn_park *parked;    /* requests waiting for a busy entry */
    uv_timer_t park_timer;      /* gives up on those after PARK_MAX_MS */
    bool park_timer_on;
    bool no_park;               /* re-running a request that waited
                                   long enough: answer, do not park */
    bool no_add;                /* re-running a produce whose implicit
                                   add failed: verify only */
    uint64_t commits, aborts;   /* completed transactions */
    uint64_t timed_out_aborts;  /* aborts the timeout check started */
    uint64_t fenced;            /* open transactions fenced by an
                                   InitProducerId */
    uint64_t marker_retries;    /* marker_retry timers pending */
    struct cn_hist commit_ms;   /* decision -> CompleteCommit durable */
    struct cn_hist abort_ms;    /* decision -> CompleteAbort durable */
};

/*
 * A request that found its id busy (markers of the previous transaction
 * still being written).  Kafka answers CONCURRENT_TRANSACTIONS and the
 * client retries after a backoff (librdkafka: 100 ms or more), which
 * caps a producer committing often at a few transactions a second.
 * Holding the request until the entry is idle answers it as soon as that
 * is possible instead; after PARK_MAX_MS the client gets the error after
 * all.
 */
struct txn_park {
    struct cn_broker *b;
    struct txn_entry *e;        /* NULL once the entry was removed */
    struct cn_req *req;
    struct cn_req_header h;
    struct cn_rd body;          /* undecoded request body */
    cn_handler_fn fn;           /* the handler to run again */
    int64_t deadline_ms;        /* monotonic */
    struct txn_park *next;
};

/* A change being made durable, and what to do once it is. */
struct txn_write {
    struct cn_sync_waiter waiter; /* first: the sync module's handle */
    struct cn_broker *b;
    struct txn_entry *e;
    struct cn_txn_meta next;      /* the metadata to apply */
    void (*then)(struct txn_write *w, int16_t err);
    struct cn_req *req;           /* to answer, or NULL */
    struct cn_req_header h;
    bool commit;                  /* for marker phases */
    cn_handler_fn rerun;          /* request to run again once durable */
    struct cn_rd body;            /* its undecoded body */
    int32_t index;                /* transaction of a batched request */
};

static void write_markers(struct cn_broker *b, struct txn_entry *e,
                          bool commit);

/* ---- table ------------------------------------------------------------ */

static uint32_t id_hash(const char *s)
{
    uint32_t h = 2166136261u;
    while (*s) {
        h ^= (uint8_t)*s++;
        h *= 16777619u;
    }
    return h;
}

static struct txn_entry *entry_find(struct cn_txn_coord *c, const char *id)
{
    if (!c->buckets)
        return NULL;
    for (struct txn_entry *e = c->table[id_hash(id) % c->buckets]; e;
         e = e->next)
        if (strcmp(e->meta.transactional_id, id) == 0)
            return e;
    return NULL;
}

static int entry_insert(struct cn_txn_coord *c, struct txn_entry *e)
{
    if (c->count + 1 > c->buckets) {
        size_t nb = c->buckets ? c->buckets * 2 : 256;
        struct txn_entry **nt = calloc(nb, sizeof *nt);
        if (!nt)
            return CN_ENOMEM;
        for (size_t i = 0; i < c->buckets; i++)
            while (c->table[i]) {
                struct txn_entry *x = c->table[i];
                c->table[i] = x->next;
                uint32_t h = id_hash(x->meta.transactional_id) % nb;
                x->next = nt[h];
                nt[h] = x;
            }
        free(c->table);
        c->table = nt;
        c->buckets = nb;
    }
    uint32_t h = id_hash(e->meta.transactional_id) % c->buckets;
    e->next = c->table[h];
    c->table[h] = e;
    c->count++;
    const char *id = e->meta.transactional_id;
    e->part = cn_txn_partition_for((const uint8_t *)id, strlen(id),
                                   c->nparts);
    c->part_ids[e->part]++;
    return 0;
}

static void set_writing(struct cn_txn_coord *c, struct txn_entry *e,
                        bool writing)
{
    if (e->writing == writing)
        return;
    e->writing = writing;
    if (writing)
        c->part_writing[e->part]++;
    else
        c->part_writing[e->part]--;
}

static void pid_unindex(struct cn_txn_coord *c, struct txn_entry *e)
{
    if (e->indexed_pid < 0)
        return;
    struct txn_entry **pp =
        &c->by_pid[(uint64_t)e->indexed_pid % PID_BUCKETS];
    while (*pp && *pp != e)
        pp = &(*pp)->pid_next;
    if (*pp)
        *pp = e->pid_next;
    e->indexed_pid = -1;
}

/* Keeps the producer id index in step with e->meta.producer_id. */
static void pid_reindex(struct cn_txn_coord *c, struct txn_entry *e)
{
    if (e->indexed_pid == e->meta.producer_id)
        return;
    pid_unindex(c, e);
    if (e->meta.producer_id < 0)
        return;
    struct txn_entry **head =
        &c->by_pid[(uint64_t)e->meta.producer_id % PID_BUCKETS];
    e->pid_next = *head;
    *head = e;
    e->indexed_pid = e->meta.producer_id;
}

static struct txn_entry *entry_by_pid(struct cn_txn_coord *c, int64_t pid)
{
    if (pid < 0)
        return NULL;
    for (struct txn_entry *e = c->by_pid[(uint64_t)pid % PID_BUCKETS]; e;
         e = e->pid_next)
        if (e->meta.producer_id == pid)
            return e;
    return NULL;
}

static void park_forget(struct cn_txn_coord *c, struct txn_entry *e);

static void entry_remove(struct cn_txn_coord *c, struct txn_entry *e)
{
    park_forget(c, e);
    pid_unindex(c, e);
    struct txn_entry **pp =
        &c->table[id_hash(e->meta.transactional_id) % c->buckets];
    while (*pp && *pp != e)
        pp = &(*pp)->next;
    if (*pp) {
        *pp = e->next;
        c->count--;
        c->part_ids[e->part]--;
        set_writing(c, e, false);
    }
    cn_txn_meta_fini(&e->meta);
    free(e);
}

/* ---- the log topic ------------------------------------------------------ */

static struct cn_topic *log_topic(struct cn_broker *b, bool create)
{
    struct cn_bytes name = cn_bytes_str(CN_TXN_TOPIC);
    struct cn_topic *t = cn_topic_find(b, name);
    if (t || !create)
        return t;
    struct cn_topic_config tc;
    cn_topic_config_init_defaults(&tc, b->cfg);
    /* Kafka's settings for the transaction log; the coordinator reads
     * only the newest record per id, so old ones may be compacted. */
    char msg[256];
    cn_topic_config_set(&tc, "cleanup.policy", "compact", msg, sizeof msg);
    cn_topic_config_set(&tc, "segment.bytes", "104857600", msg, sizeof msg);
    /* Never deleted by age or size: a record is replaced only by a newer
     * one for the same id. */
    cn_topic_config_set(&tc, "retention.ms", "-1", msg, sizeof msg);
    cn_topic_config_set(&tc, "retention.bytes", "-1", msg, sizeof msg);
    int16_t kerr = cn_topic_create(
        b, name, b->cfg->transaction_state_log_num_partitions, &tc, &t, msg,
        sizeof msg);
    if (kerr) {
        CN_ERROR("cannot create %s: %s", CN_TXN_TOPIC, msg);
        return NULL;
    }
    return t;
}

static struct cn_partition *log_partition(struct cn_topic *t, const char *id)
{
    int32_t p = cn_txn_partition_for((const uint8_t *)id, strlen(id),
                                     t->partition_count);
    return p >= 0 ? t->partitions[p] : NULL;
}

/* ---- durable changes ---------------------------------------------------- */

static void maybe_compact(struct cn_broker *b, const char *id);

/* ---- requests waiting for a busy id ---------------------------------- */

static void park_check(uv_timer_t *t);

/* Holds req until e is idle.  False when it cannot (the caller answers
 * CONCURRENT_TRANSACTIONS). */
static bool park(struct cn_broker *b, struct txn_entry *e, struct cn_req *req,
                 const struct cn_req_header *h, const struct cn_rd *body,
                 cn_handler_fn fn)
{
    struct cn_txn_coord *c = b->txn;
    if (c->no_park || b->stopping || !c->timer_armed)
        return false;
    struct txn_park *pk = cn_arena_calloc(&req->arena, 1, sizeof *pk);
    if (!pk)
        return false;
    pk->b = b;
    pk->e = e;
    pk->req = req;
    pk->h = *h;
    pk->body = *body;
    pk->fn = fn;
    pk->deadline_ms = cn_clock_mono_ms() + PARK_MAX_MS;
    struct txn_park **pp = &c->parked;
    while (*pp)
        pp = &(*pp)->next;
    *pp = pk;
    if (!c->park_timer_on) {
        uv_timer_start(&c->park_timer, park_check, 50, 50);
        c->park_timer_on = true;
    }
    return true;
}

/* Runs again every parked request that matches: those of entry e when it
 * went idle (e non-NULL), or (e NULL) those past their deadline or all
 * when `all`.  Requests parked again while this runs wait for the next
 * round. */
static void unpark(struct cn_broker *b, struct txn_entry *e, bool all)
{
    struct cn_txn_coord *c = b->txn;
    int64_t now = cn_clock_mono_ms();
    struct txn_park *ready = NULL, **tail = &ready;
    struct txn_park **pp = &c->parked;
    while (*pp) {
        struct txn_park *pk = *pp;
        bool go = all || (e ? pk->e == e : pk->deadline_ms <= now);
        if (go) {
            *pp = pk->next;
            pk->next = NULL;
            *tail = pk;
            tail = &pk->next;
        } else {
            pp = &pk->next;
        }
    }
    bool late = !e;
    while (ready) {
        struct txn_park *pk = ready;
        ready = pk->next;
        struct cn_rd body = pk->body;
        c->no_park = late;
        pk->fn(b, pk->req, &pk->h, &body);
        c->no_park = false;
    }
    if (!c->parked && c->park_timer_on) {
        uv_timer_stop(&c->park_timer);
        c->park_timer_on = false;
    }
}

static void park_check(uv_timer_t *t)
{
    unpark(t->data, NULL, false);
}

/* An entry is going away: its waiting requests run again now and find
 * it gone. */
static void park_forget(struct cn_txn_coord *c, struct txn_entry *e)
{
    for (struct txn_park *pk = c->parked; pk; pk = pk->next)
        if (pk->e == e) {
            pk->e = NULL;
            pk->deadline_ms = 0;
        }
}

static void write_done(struct cn_broker *b, struct cn_sync_waiter *sw)
{
    struct txn_write *w = (struct txn_write *)sw;
    int16_t err = KAFKA_NONE;
    set_writing(b->txn, w->e, false);
    if (b->log_dir_offline) {
        err = KAFKA_COORDINATOR_NOT_AVAILABLE;
        cn_txn_meta_fini(&w->next);
    } else {
        cn_txn_meta_fini(&w->e->meta);
        w->e->meta = w->next;
        pid_reindex(b->txn, w->e);
    }
    char id[1024];
    snprintf(id, sizeof id, "%s", w->e->meta.transactional_id);
    w->then(w, err); /* may free the entry (expiry) */
    free(w);
    if (!err)
        maybe_compact(b, id);
    struct txn_entry *e = entry_find(b->txn, id);
    if (e && !e->busy && b->txn->parked)
        unpark(b, e, false);
}

/*
 * Appends `next` as the id's newest record and calls then() once it is
 * durable (err KAFKA_NONE, with e->meta = next) or failed.  Takes
 * ownership of next.
 */
static void write_change_x(struct cn_broker *b, struct txn_entry *e,
                           struct cn_txn_meta *next,
                           void (*then)(struct txn_write *w, int16_t err),
                           struct cn_req *req, const struct cn_req_header *h,
                           bool commit, const struct txn_write *x)
{
    /* Shutting down: nothing more is written; a decided transaction is
     * finished by the next start's recovery. */
    struct txn_write *w = b->stopping ? NULL : calloc(1, sizeof *w);
    struct cn_topic *t = w ? log_topic(b, true) : NULL;
    struct cn_partition *p = t ? log_partition(t, e->meta.transactional_id)
                               : NULL;
    if (!w || !p) {
        free(w);
        cn_txn_meta_fini(next);
        struct txn_write failed = {.b = b, .e = e, .req = req, .commit = commit};
        if (h)
            failed.h = *h;
        if (x) {
            failed.rerun = x->rerun;
            failed.body = x->body;
            failed.index = x->index;
        }
        then(&failed, KAFKA_COORDINATOR_NOT_AVAILABLE);
        return;
    }
    w->b = b;
    w->e = e;
    w->next = *next;
    w->then = then;
    w->req = req;
    if (h)
        w->h = *h;
    w->commit = commit;
    if (x) {
        w->rerun = x->rerun;
        w->body = x->body;
        w->index = x->index;
    }
    w->waiter.req = req;
    w->waiter.finish = write_done;
    e->busy = true;
    set_writing(b->txn, e, true);

    struct cn_wr key, value, batch;
    cn_wr_init(&key, 64);
    cn_wr_init(&value, 128);
    cn_wr_init(&batch, 256);
    bool tombstone = false;
    int rc = cn_txn_log_encode(&w->next, &key, &value, &tombstone);
    if (!rc) {
        struct cn_batch_params bp = CN_BATCH_PARAMS_INIT;
        struct cn_batch_builder bb;
        cn_batch_builder_init(&bb, &bp);
        cn_batch_builder_add(&bb, cn_clock_wall_ms(),
                             cn_bytes_of(key.buf, (int32_t)key.len),
                             tombstone ? CN_BYTES_NULL
                                       : cn_bytes_of(value.buf,
                                                     (int32_t)value.len),
                             NULL, 0);
        rc = cn_batch_builder_finish(&bb, &batch);
        cn_batch_builder_fini(&bb);
    }
    int64_t base;
    if (!rc)
        rc = cn_log_append(p->log, batch.buf, batch.len, &base);
    cn_wr_fini(&key);
    cn_wr_fini(&value);
    cn_wr_fini(&batch);
    if (rc) {
        CN_ERROR("cannot append to %s for transactional id %s: %s",
                 CN_TXN_TOPIC, e->meta.transactional_id, cn_strerror(rc));
        if (rc != CN_ENOMEM && rc != CN_EINVAL)
            cn_broker_log_dir_failed(b, "a transaction log write", rc);
        e->busy = false;
        set_writing(b->txn, e, false);
        cn_txn_meta_fini(&w->next);
        w->then(w, KAFKA_COORDINATOR_NOT_AVAILABLE);
        free(w);
        return;
    }
    cn_partition_check_roll(p);
    if (!b->cfg->cairn_fsync_group_commit) {
        /* The transaction log is synced before it is acted on whatever
         * the flush policy for data says. */
        struct cn_log_sync *s = cn_log_sync_begin(p->log);
        if (s) {
            int err = cn_log_sync_run(s);
            cn_log_sync_end(p->log, s, err);
            if (err)
                cn_broker_log_dir_failed(b, "fdatasync", err);
        }
        p->high_watermark = cn_log_end_offset(p->log);
        write_done(b, &w->waiter);
        return;
    }
    cn_sync_appended(b, p);
    cn_sync_wait(b, &w->waiter);
}

static void write_change(struct cn_broker *b, struct txn_entry *e,
                         struct cn_txn_meta *next,
                         void (*then)(struct txn_write *w, int16_t err),
                         struct cn_req *req, const struct cn_req_header *h,
                         bool commit)
{
    write_change_x(b, e, next, then, req, h, commit, NULL);
}

/* ---- keeping the log bounded ------------------------------------------- */

/*
 * Compaction by checkpoint: the coordinator holds the newest state of
 * every id, so it appends one record per id of the partition, syncs, and
 * moves the log start offset to the first of them; older segments are
 * then deleted.  A crash before the start offset moves replays the old
 * records and then the checkpoint, which ends in the same state.  Only
 * done while no record of that partition is between append and durable,
 * since the checkpoint must come after every record it replaces.
 */
static void maybe_compact(struct cn_broker *b, const char *id)
{
    struct cn_txn_coord *c = b->txn;
    struct cn_topic *t = b->stopping ? NULL : log_topic(b, false);
    if (!t || !c)
        return;
    struct cn_partition *p = log_partition(t, id);
    int32_t part = p->index;
    if (part >= c->nparts || c->part_writing[part] > 0)
        return;
    int64_t span = cn_log_end_offset(p->log) - cn_log_start_offset(p->log);
    size_t ids = c->part_ids[part];
    if (span < (int64_t)ids + b->cfg->cairn_internal_compact_slack_records)
        return;
    struct cn_batch_params bp = CN_BATCH_PARAMS_INIT;
    struct cn_batch_builder bb;
    cn_batch_builder_init(&bb, &bp);
    struct cn_wr key, value, batch;
    cn_wr_init(&key, 64);
    cn_wr_init(&value, 128);
    cn_wr_init(&batch, 4096);
    int64_t now = cn_clock_wall_ms();
    int rc = 0;
    for (size_t i = 0; i < c->buckets && !rc; i++)
        for (struct txn_entry *e = c->table[i]; e && !rc; e = e->next) {
            if (e->meta.state == CN_TXN_DEAD || e->part != part)
                continue;
            bool tombstone = false;
            cn_wr_reset(&key);
            cn_wr_reset(&value);
            rc = cn_txn_log_encode(&e->meta, &key, &value, &tombstone);
            if (!rc && !tombstone)
                cn_batch_builder_add(&bb, now,
                                     cn_bytes_of(key.buf, (int32_t)key.len),
                                     cn_bytes_of(value.buf,
                                                 (int32_t)value.len),
                                     NULL, 0);
        }
    int64_t first = cn_log_end_offset(p->log);
    if (!rc && bb.count > 0) {
        rc = cn_batch_builder_finish(&bb, &batch);
        int64_t base;
        if (!rc)
            rc = cn_log_append(p->log, batch.buf, batch.len, &base);
        if (!rc) {
            cn_partition_check_roll(p);
            struct cn_log_sync *s = cn_log_sync_begin(p->log);
            if (s) {
                rc = cn_log_sync_run(s);
                cn_log_sync_end(p->log, s, rc);
            }
            if (rc)
                cn_broker_log_dir_failed(b, "fdatasync", rc);
            else
                p->high_watermark = cn_log_end_offset(p->log);
        }
    }
    if (!rc)
        rc = cn_log_delete_records(p->log, first);
    if (!rc) {
        cn_partition_after_retention(p);
        CN_INFO("%s-%d compacted: %zu ids kept, log starts at %lld",
                CN_TXN_TOPIC, part, ids, (long long)first);
    } else {
        CN_WARN("compacting %s-%d failed: %s", CN_TXN_TOPIC, part,
                cn_strerror(rc));
    }
    cn_batch_builder_fini(&bb);
    cn_wr_fini(&key);
    cn_wr_fini(&value);
    cn_wr_fini(&batch);
}

/* ---- answering ---------------------------------------------------------- */

static void answer_init_pid(struct cn_req *req, const struct cn_req_header *h,
                            int16_t err, int64_t pid, int16_t epoch)
{
    struct cn_init_producer_id_response rs;
    cn_init_producer_id_response_init(&rs);
    rs.error_code = err;
    rs.producer_id = err ? -1 : pid;
    rs.producer_epoch = err ? -1 : epoch;
    cn_resp_begin(req, h);
    cn_init_producer_id_response_encode(&req->resp, h->api_version, &rs);
    cn_req_done(req);
}

/* v5 returns the producer id and epoch the client goes on with: after a
 * TV2 EndTxn the bumped epoch, or the next producer id at epoch 0 when the
 * epoch ran out. */
static void answer_end_txn(struct cn_req *req, const struct cn_req_header *h,
                           int16_t err, const struct cn_txn_meta *m)
{
    struct cn_end_txn_response rs;
    cn_end_txn_response_init(&rs);
    rs.error_code = err;
    rs.producer_id = -1;
    rs.producer_epoch = -1;
    if (!err && m) {
        bool rotating = m->next_producer_id >= 0;
        rs.producer_id = rotating ? m->next_producer_id : m->producer_id;
        rs.producer_epoch = rotating ? 0 : m->producer_epoch;
    }
    cn_resp_begin(req, h);
    cn_end_txn_response_encode(&req->resp, h->api_version, &rs);
    cn_req_done(req);
}

/* KIP-588: PRODUCER_FENCED is new; older request versions get what their
 * clients know for it. */
static int16_t fenced_error(int16_t api_key, int16_t version)
{
    int16_t first_with_fenced = api_key == 22 ? 4 : 2;
    return version >= first_with_fenced ? KAFKA_PRODUCER_FENCED
                                        : KAFKA_INVALID_PRODUCER_EPOCH;
}

/* ---- markers and completion --------------------------------------------- */

static void complete_written(struct txn_write *w, int16_t err)
{
    if (err) {
        /* Markers are in the partitions; the Complete record will be
         * written again by the next start's recovery. */
        CN_ERROR("transactional id %s: cannot record completion",
                 w->e->meta.transactional_id);
        return;
    }
    struct txn_entry *e = w->e;
    struct cn_txn_coord *c = w->b->txn;
    e->busy = false;
    if (e->decide_us > 0) {
        double ms = (double)(cn_clock_mono_us() - e->decide_us) / 1000.0;
        cn_hist_record(w->commit ? &c->commit_ms : &c->abort_ms, ms);
        e->decide_us = 0;
    }
    if (w->commit)
        c->commits++;
    else
        c->aborts++;
    e->timeout_abort = false;
    CN_DEBUG("transactional id %s: %s", e->meta.transactional_id,
             cn_txn_state_name(e->meta.state));
}

struct marker_wait {
    struct cn_sync_waiter waiter; /* first */
    struct txn_entry *e;
    bool commit;
};

struct marker_retry {
    uv_timer_t timer;
    struct cn_broker *b;
    struct txn_entry *e;
    bool commit;
};

static void markers_synced(struct cn_broker *b, struct cn_sync_waiter *sw)
{
    struct marker_wait *mw = (struct marker_wait *)sw;
    struct txn_entry *e = mw->e;
    bool commit = mw->commit;
    free(mw);
    if (CN_FAILPOINT("txn.after_markers_before_complete"))
        return;
    struct cn_txn_meta next;
    cn_txn_meta_init(&next);
    if (cn_txn_meta_copy(&next, &e->meta) != 0)
        return;
    next.state = commit ? CN_TXN_COMPLETE_COMMIT : CN_TXN_COMPLETE_ABORT;
    if (next.next_producer_id >= 0) {
        /* TV2 epoch overflow: the client was handed the next id at epoch
         * 0 with the EndTxn answer; it becomes current now. */
        next.prev_producer_id = next.producer_id;
        next.producer_id = next.next_producer_id;
        next.producer_epoch = 0;
        next.next_producer_id = -1;
    }
    cn_txn_meta_clear_partitions(&next);
    next.txn_start_ms = -1; /* no transaction is running any more */
    next.last_update_ms = cn_clock_wall_ms();
    write_change(b, e, &next, complete_written, NULL, NULL, commit);
}

static void on_retry_closed(uv_handle_t *h)
{
    struct marker_retry *r = h->data;
    r->b->txn->marker_retries--;
    write_markers(r->b, r->e, r->commit);
    free(r);
}

static void on_marker_retry(uv_timer_t *t)
{
    uv_close((uv_handle_t *)t, on_retry_closed);
}

/*
 * Appends the marker to every partition of e's transaction, then (once
 * they are durable) records the completion.  A partition of a deleted
 * topic needs no marker.  If the log directory is offline the markers
 * are tried again later: a decided transaction is finished, never
 * dropped.
 */
static void write_markers(struct cn_broker *b, struct txn_entry *e,
                          bool commit)
{
    if (b->stopping)
        return; /* the next start's recovery writes them */
    const struct cn_txn_meta *m = &e->meta;
    struct cn_wr batch;
    cn_wr_init(&batch, 128);
    bool failed = b->log_dir_offline;
    for (size_t i = 0; i < m->npartitions && !failed; i++) {
        struct cn_partition *p = cn_partition_find(
            b, cn_bytes_str(m->partitions[i].topic), m->partitions[i].partition);
        if (!p)
            continue;
        cn_wr_reset(&batch);
        if (cn_batch_build_control(&batch, m->producer_id, m->producer_epoch,
                                   commit, COORDINATOR_EPOCH,
                                   cn_clock_wall_ms()) != 0) {
            failed = true;
            break;
        }
        int64_t base;
        int rc = cn_log_append(p->log, batch.buf, batch.len, &base);
        if (rc) {
            cn_broker_log_dir_failed(b, "a marker write", rc);
            failed = true;
            break;
        }
        cn_partition_check_roll(p);
        struct cn_batch_hdr hdr;
        if (cn_batch_hdr_parse(batch.buf, batch.len, &hdr) == 0)
            cn_partition_record_batch(p, batch.buf, batch.len, &hdr);
        if (p->topic->internal &&
            strcmp(p->topic->name, CN_OFFSETS_TOPIC) == 0)
            cn_group_coord_marker(b, p, m->producer_id, commit);
        cn_sync_appended(b, p);
        if (i == 0 && m->npartitions > 1 &&
            CN_FAILPOINT("txn.after_some_markers")) {
            failed = true;
            break;
        }
    }
    cn_wr_fini(&batch);
    if (failed) {
        struct marker_retry *r = calloc(1, sizeof *r);
        if (!r)
            return;
        r->b = b;
        r->e = e;
        r->commit = commit;
        uv_timer_init(b->loop, &r->timer);
        r->timer.data = r;
        uv_timer_start(&r->timer, on_marker_retry, MARKER_RETRY_MS, 0);
        b->txn->marker_retries++;
        return;
    }
    struct marker_wait *mw = calloc(1, sizeof *mw);
    if (!mw)
        return;
    mw->e = e;
    mw->commit = commit;
    mw->waiter.finish = markers_synced;
    if (!b->cfg->cairn_fsync_group_commit) {
        markers_synced(b, &mw->waiter);
        return;
    }
    cn_sync_wait(b, &mw->waiter);
}

/* ---- InitProducerId ----------------------------------------------------- */

static void init_pid_written(struct txn_write *w, int16_t err)
{
    struct txn_entry *e = w->e;
    e->busy = false;
    answer_init_pid(w->req, &w->h, err, e->meta.producer_id,
                    e->meta.producer_epoch);
}

/* The Ongoing transaction of a fenced instance is aborted on its behalf
 * with the new epoch; the new instance retries until that is done. */
static void fence_written(struct txn_write *w, int16_t err)
{
    if (err) {
        w->e->busy = false;
        return;
    }
    w->b->txn->fenced++;
    if (CN_FAILPOINT("txn.after_prepare_sync"))
        return;
    write_markers(w->b, w->e, false);
}

static int next_epoch(struct cn_broker *b, struct cn_txn_meta *m)
{
    if (m->producer_id >= 0 && m->producer_epoch < EPOCH_LAST_USABLE) {
        m->last_producer_epoch = m->producer_epoch;
        m->producer_epoch++;
        return 0;
    }
    int64_t pid;
    int rc = cn_pidalloc_next(&b->pids, &pid);
    if (rc)
        return rc;
    m->prev_producer_id = m->producer_id;
    m->producer_id = pid;
    m->producer_epoch = 0;
    m->last_producer_epoch = -1;
    return 0;
}

/*
 * The epoch for a coordinator-made abort (timeout, fence, operator).  A
 * TV2 client's EndTxn at epoch E is a retry when the stored epoch is E+1,
 * so Kafka bumps twice here (the fence, then the abort's own bump): a
 * late EndTxn from the aborted transaction is then fenced instead of
 * being taken for a retry.
 */
static int abort_epoch(struct cn_broker *b, struct cn_txn_meta *m)
{
    int rc = next_epoch(b, m);
    if (!rc && m->client_tv >= 2 && tv2_on(b))
        rc = next_epoch(b, m);
    return rc;
}

void cn_txn_init_producer_id(struct cn_broker *b, struct cn_req *req,
                             const struct cn_req_header *h,
                             const struct cn_rd *body,
                             struct cn_bytes transactional_id,
                             int32_t timeout_ms, int64_t producer_id,
                             int16_t producer_epoch)
{
    char id[1024];
    if (!cn_wire_cstr(transactional_id, id, sizeof id) || !id[0]) {
        answer_init_pid(req, h, KAFKA_INVALID_REQUEST, -1, -1);
        return;
    }
    if (timeout_ms <= 0 || timeout_ms > b->cfg->transaction_max_timeout_ms) {
        answer_init_pid(req, h, KAFKA_INVALID_TRANSACTION_TIMEOUT, -1, -1);
        return;
    }
    struct cn_txn_coord *c = b->txn;
    struct txn_entry *e = entry_find(c, id);
    int64_t now = cn_clock_wall_ms();
    if (!e) {
        e = calloc(1, sizeof *e);
        if (e) {
            cn_txn_meta_init(&e->meta);
            e->indexed_pid = -1;
        }
        if (!e || cn_txn_meta_set_id(&e->meta, id) != 0 ||
            entry_insert(c, e) != 0) {
            if (e)
                cn_txn_meta_fini(&e->meta);
            free(e);
            answer_init_pid(req, h, KAFKA_COORDINATOR_NOT_AVAILABLE, -1, -1);
            return;
        }
        e->meta.state = CN_TXN_EMPTY;
    }
    if (e->busy || e->meta.state == CN_TXN_PREPARE_COMMIT ||
        e->meta.state == CN_TXN_PREPARE_ABORT ||
        e->meta.state == CN_TXN_PREPARE_EPOCH_FENCE) {
        if (!park(b, e, req, h, body, cn_h_init_producer_id))
            answer_init_pid(req, h, KAFKA_CONCURRENT_TRANSACTIONS, -1, -1);
        return;
    }
    /* v3+ (KIP-360): a client that names its id and epoch must be the
     * current instance. */
    if (producer_id >= 0 && e->meta.producer_id >= 0) {
        if (producer_id != e->meta.producer_id &&
            producer_id != e->meta.prev_producer_id) {
            answer_init_pid(req, h, KAFKA_INVALID_PRODUCER_ID_MAPPING, -1, -1);
            return;
        }
        if (producer_epoch != e->meta.producer_epoch &&
            producer_id == e->meta.producer_id) {
            answer_init_pid(req, h, fenced_error(22, h->api_version), -1, -1);
            return;
        }
    }
    struct cn_txn_meta next;
    cn_txn_meta_init(&next);
    if (cn_txn_meta_copy(&next, &e->meta) != 0 || next_epoch(b, &next) != 0) {
        cn_txn_meta_fini(&next);
        answer_init_pid(req, h, KAFKA_COORDINATOR_NOT_AVAILABLE, -1, -1);
        return;
    }
    next.last_update_ms = now;
    if (e->meta.state == CN_TXN_ONGOING && next.client_tv >= 2 && tv2_on(b) &&
        next_epoch(b, &next) != 0) {
        cn_txn_meta_fini(&next);
        answer_init_pid(req, h, KAFKA_COORDINATOR_NOT_AVAILABLE, -1, -1);
        return;
    }
    if (e->meta.state == CN_TXN_ONGOING) {
        /* Fence: the old instance's transaction is aborted under the new
         * epoch (PrepareEpochFence then PrepareAbort in Kafka, which
         * stores only the PrepareAbort). */
        CN_INFO("transactional id %s: fencing producer %lld epoch %d; its "
                "open transaction is aborted",
                id, (long long)e->meta.producer_id, e->meta.producer_epoch);
        next.state = CN_TXN_PREPARE_ABORT;
        e->decide_us = cn_clock_mono_us();
        write_change(b, e, &next, fence_written, NULL, NULL, false);
        answer_init_pid(req, h, KAFKA_CONCURRENT_TRANSACTIONS, -1, -1);
        return;
    }
    next.state = CN_TXN_EMPTY;
    next.timeout_ms = timeout_ms;
    next.txn_start_ms = -1;
    /* A new instance: which transaction version it speaks shows in its
     * first transaction (AddPartitionsToTxn: TV1; a produce with no add,
     * or EndTxn v5: TV2). */
    next.client_tv = 0;
    cn_txn_meta_clear_partitions(&next);
    write_change(b, e, &next, init_pid_written, req, h, false);
}

/* ---- common checks ------------------------------------------------------ */

/* Checks the caller is the current instance of an existing id.  Returns a
 * Kafka error, or KAFKA_NONE with *out set. */
static int16_t check_producer(struct cn_broker *b, struct cn_bytes wire_id,
                              int64_t pid, int16_t epoch, int16_t api_key,
                              int16_t version, struct txn_entry **out)
{
    char id[1024];
    if (!cn_wire_cstr(wire_id, id, sizeof id))
        return KAFKA_INVALID_REQUEST;
    struct txn_entry *e = entry_find(b->txn, id);
    if (!e || e->meta.producer_id != pid)
        return KAFKA_INVALID_PRODUCER_ID_MAPPING;
    if (e->meta.producer_epoch != epoch)
        return fenced_error(api_key, version);
    *out = e; /* also with CONCURRENT_TRANSACTIONS: the caller may wait */
    if (e->busy || e->meta.state == CN_TXN_PREPARE_COMMIT ||
        e->meta.state == CN_TXN_PREPARE_ABORT ||
        e->meta.state == CN_TXN_PREPARE_EPOCH_FENCE)
        return KAFKA_CONCURRENT_TRANSACTIONS;
    *out = e;
    return KAFKA_NONE;
}

/* ---- AddPartitionsToTxn (v0-3) ----------------------------------------- */

struct add_state {
    struct cn_add_partitions_to_txn_response rs;
};

static void answer_add(struct cn_req *req, const struct cn_req_header *h,
                       struct cn_add_partitions_to_txn_response *rs)
{
    cn_resp_begin(req, h);
    cn_add_partitions_to_txn_response_encode(&req->resp, h->api_version, rs);
    cn_req_done(req);
}

/* Sets every partition's error (those already set to a specific error
 * keep it when keep_set). */
static void set_all(struct cn_add_partitions_to_txn_response *rs, int16_t err,
                    bool keep_set)
{
    for (int32_t i = 0; i < rs->results_by_topic_v3_and_below_len; i++) {
        struct cn_add_partitions_to_txn_response_add_partitions_to_txn_topic_result
            *tr = &rs->results_by_topic_v3_and_below[i];
        for (int32_t j = 0; j < tr->results_by_partition_len; j++)
            if (!keep_set || !tr->results_by_partition[j].partition_error_code)
                tr->results_by_partition[j].partition_error_code = err;
    }
}

static void add_written(struct txn_write *w, int16_t err)
{
    struct add_state *as = w->req->handler_state;
    w->e->busy = false;
    set_all(&as->rs, err, false);
    answer_add(w->req, &w->h, &as->rs);
}

/*
 * Builds in *next e's metadata with the partitions added, opening a
 * transaction if none is (Kafka's coordinator for AddPartitionsToTxn and,
 * with TV2, the partition leader's implicit add).  *changed says whether
 * anything differs.  0 or CN_ENOMEM.
 */
static int build_add(const struct txn_entry *e, const char *const *topics,
                     const int32_t *parts, size_t n, struct cn_txn_meta *next,
                     bool *changed)
{
    cn_txn_meta_init(next);
    int rc = cn_txn_meta_copy(next, &e->meta);
    bool open = e->meta.state == CN_TXN_ONGOING;
    *changed = !open;
    if (!rc && !open)
        cn_txn_meta_clear_partitions(next);
    for (size_t i = 0; i < n && !rc; i++)
        if (!cn_txn_meta_has_partition(next, topics[i], parts[i])) {
            *changed = true;
            rc = cn_txn_meta_add_partition(next, topics[i], parts[i]);
        }
    if (rc) {
        cn_txn_meta_fini(next);
        return rc;
    }
    int64_t now = cn_clock_wall_ms();
    if (!open)
        next->txn_start_ms = now;
    next->state = CN_TXN_ONGOING;
    next->last_update_ms = now;
    return 0;
}

/* ---- AddPartitionsToTxn v4-5: batched, from a partition leader --------- */

struct add_batch {
    struct cn_add_partitions_to_txn_response rs;
    struct cn_req_header h;
    int pending;                /* adds in flight, plus one while starting */
};

typedef struct cn_add_partitions_to_txn_response_add_partitions_to_txn_result
    add_result;
typedef struct
    cn_add_partitions_to_txn_response_add_partitions_to_txn_topic_result
        add_topic_result;
typedef struct
    cn_add_partitions_to_txn_request_add_partitions_to_txn_transaction
        add_txn_request;

static void result_set(add_result *r, int16_t err, bool keep_set)
{
    for (int32_t i = 0; i < r->topic_results_len; i++) {
        add_topic_result *tr = &r->topic_results[i];
        for (int32_t j = 0; j < tr->results_by_partition_len; j++)
            if (!keep_set || !tr->results_by_partition[j].partition_error_code)
                tr->results_by_partition[j].partition_error_code = err;
    }
}

static void batch_unref(struct add_batch *ab, struct cn_req *req)
{
    if (--ab->pending > 0)
        return;
    answer_add(req, &ab->h, &ab->rs);
}

static void batch_add_written(struct txn_write *w, int16_t err)
{
    struct add_batch *ab = w->req->handler_state;
    w->e->busy = false;
    result_set(&ab->rs.results_by_transaction[w->index], err, false);
    batch_unref(ab, w->req);
}

/* One transaction of the batch: verified, added (the write answers
 * later), or refused. */
static void add_batched_one(
    struct cn_broker *b, struct cn_req *req, const struct cn_req_header *h,
    struct add_batch *ab, int32_t index, const add_txn_request *qt)
{
    add_result *r = &ab->rs.results_by_transaction[index];
    char id[1024];
    struct txn_entry *e = cn_wire_cstr(qt->transactional_id, id, sizeof id)
                              ? entry_find(b->txn, id)
                              : NULL;
    int16_t kerr = KAFKA_NONE;
    if (!e || e->meta.state == CN_TXN_DEAD ||
        e->meta.producer_id != qt->producer_id)
        kerr = KAFKA_INVALID_PRODUCER_ID_MAPPING;
    else if (e->meta.producer_epoch != qt->producer_epoch)
        kerr = KAFKA_PRODUCER_FENCED;
    else if (e->busy || e->meta.state == CN_TXN_PREPARE_COMMIT ||
             e->meta.state == CN_TXN_PREPARE_ABORT ||
             e->meta.state == CN_TXN_PREPARE_EPOCH_FENCE)
        kerr = KAFKA_CONCURRENT_TRANSACTIONS;
    if (kerr) {
        result_set(r, kerr, false);
        return;
    }
    size_t n = 0;
    for (int32_t i = 0; i < r->topic_results_len; i++)
        n += (size_t)r->topic_results[i].results_by_partition_len;
    const char **topics = cn_arena_calloc(&req->arena, n + 1, sizeof *topics);
    int32_t *parts = cn_arena_calloc(&req->arena, n + 1, sizeof *parts);
    if (!topics || !parts) {
        result_set(r, KAFKA_COORDINATOR_NOT_AVAILABLE, false);
        return;
    }
    bool unknown = false;
    n = 0;
    for (int32_t i = 0; i < r->topic_results_len; i++) {
        add_topic_result *tr = &r->topic_results[i];
        char topic[CN_TOPIC_NAME_MAX + 1];
        bool named = cn_wire_cstr(tr->name, topic, sizeof topic);
        for (int32_t j = 0; j < tr->results_by_partition_len; j++) {
            int32_t part = tr->results_by_partition[j].partition_index;
            bool known = named && !cn_bytes_eq_str(tr->name, CN_TXN_TOPIC) &&
                         cn_partition_find(b, tr->name, part);
            if (qt->verify_only) {
                /* Kafka: in the Ongoing transaction, or not. */
                bool in = named && e->meta.state == CN_TXN_ONGOING &&
                          cn_txn_meta_has_partition(&e->meta, topic, part);
                tr->results_by_partition[j].partition_error_code =
                    in ? KAFKA_NONE : KAFKA_INVALID_TXN_STATE;
                continue;
            }
            if (!known) {
                tr->results_by_partition[j].partition_error_code =
                    KAFKA_UNKNOWN_TOPIC_OR_PARTITION;
                unknown = true;
                continue;
            }
            topics[n] = cn_arena_strdup(&req->arena, cn_bytes_str(topic));
            parts[n++] = part;
        }
    }
    if (qt->verify_only)
        return;
    if (unknown) {
        result_set(r, KAFKA_OPERATION_NOT_ATTEMPTED, true);
        return;
    }
    struct cn_txn_meta next;
    bool changed = false;
    if (build_add(e, topics, parts, n, &next, &changed) != 0) {
        result_set(r, KAFKA_COORDINATOR_NOT_AVAILABLE, false);
        return;
    }
    if (!changed) {
        cn_txn_meta_fini(&next);
        return;
    }
    /* v5 is what a broker sends for a TV2 client's produce. */
    if (h->api_version >= 5)
        next.client_tv = 2;
    ab->pending++;
    struct txn_write x = {.index = index};
    write_change_x(b, e, &next, batch_add_written, req, h, false, &x);
}

static void add_batched(struct cn_broker *b, struct cn_req *req,
                        const struct cn_req_header *h,
                        const struct cn_add_partitions_to_txn_request *rq)
{
    struct add_batch *ab = cn_arena_calloc(&req->arena, 1, sizeof *ab);
    int32_t nt = rq->transactions_len > 0 ? rq->transactions_len : 0;
    if (!ab)
        goto nomem;
    req->handler_state = ab;
    ab->h = *h;
    ab->pending = 1;
    cn_add_partitions_to_txn_response_init(&ab->rs);
    ab->rs.results_by_transaction = cn_arena_calloc(
        &req->arena, (size_t)nt + 1, sizeof *ab->rs.results_by_transaction);
    if (!ab->rs.results_by_transaction)
        goto nomem;
    ab->rs.results_by_transaction_len = nt;
    for (int32_t i = 0; i < nt; i++) {
        const add_txn_request *qt = &rq->transactions[i];
        add_result *r = &ab->rs.results_by_transaction[i];
        cn_add_partitions_to_txn_response_add_partitions_to_txn_result_init(r);
        r->transactional_id = qt->transactional_id;
        int32_t ntp = qt->topics_len > 0 ? qt->topics_len : 0;
        r->topic_results = cn_arena_calloc(&req->arena, (size_t)ntp + 1,
                                           sizeof *r->topic_results);
        if (!r->topic_results)
            goto nomem;
        r->topic_results_len = ntp;
        for (int32_t j = 0; j < ntp; j++) {
            add_topic_result *tr = &r->topic_results[j];
            memset(tr, 0, sizeof *tr);
            tr->name = qt->topics[j].name;
            int32_t np = qt->topics[j].partitions_len > 0
                             ? qt->topics[j].partitions_len
                             : 0;
            tr->results_by_partition = cn_arena_calloc(
                &req->arena, (size_t)np + 1, sizeof *tr->results_by_partition);
            if (!tr->results_by_partition)
                goto nomem;
            tr->results_by_partition_len = np;
            for (int32_t k = 0; k < np; k++)
                tr->results_by_partition[k].partition_index =
                    qt->topics[j].partitions[k];
        }
    }
    for (int32_t i = 0; i < nt; i++)
        add_batched_one(b, req, h, ab, i, &rq->transactions[i]);
    batch_unref(ab, req);
    return;
nomem:
    cn_req_bad(req, h, CN_ENOMEM);
}

/* ---- TV2: the partition leader adds the partition (produce path) ------ */

static void produce_add_written(struct txn_write *w, int16_t err)
{
    struct cn_txn_coord *c = w->b->txn;
    w->e->busy = false;
    struct cn_rd body = w->body;
    /* Failed: the produce runs once more without adding, so the
     * verification answers it. */
    c->no_add = err != KAFKA_NONE;
    w->rerun(w->b, w->req, &w->h, &body);
    c->no_add = false;
}

bool cn_txn_coord_add_for_produce(struct cn_broker *b, struct cn_req *req,
                                  const struct cn_req_header *h,
                                  const struct cn_rd *body,
                                  cn_handler_fn rerun, bool produce_v12,
                                  int64_t producer_id, int16_t producer_epoch,
                                  const struct cn_txn_tp_ref *tps, size_t n)
{
    struct cn_txn_coord *c = b->txn;
    if (!c || !tv2_on(b) || c->no_add || n == 0)
        return false;
    struct txn_entry *e = entry_by_pid(c, producer_id);
    /* Only at the current epoch (an older one is fenced by the
     * verification), and for Produce v12 or a producer already seen
     * using TV2 in this instance. */
    if (!e || e->meta.state == CN_TXN_DEAD ||
        producer_epoch != e->meta.producer_epoch ||
        (!produce_v12 && e->meta.client_tv != 2))
        return false;
    if (e->meta.state == CN_TXN_ONGOING) {
        size_t missing = 0;
        for (size_t i = 0; i < n; i++)
            if (!cn_txn_meta_has_partition(&e->meta, tps[i].topic,
                                           tps[i].partition))
                missing++;
        if (!missing)
            return false;
    }
    if (e->busy || e->meta.state == CN_TXN_PREPARE_COMMIT ||
        e->meta.state == CN_TXN_PREPARE_ABORT ||
        e->meta.state == CN_TXN_PREPARE_EPOCH_FENCE)
        return park(b, e, req, h, body, rerun);
    const char **topics = cn_arena_calloc(&req->arena, n, sizeof *topics);
    int32_t *parts = cn_arena_calloc(&req->arena, n, sizeof *parts);
    if (!topics || !parts)
        return false;
    for (size_t i = 0; i < n; i++) {
        topics[i] = tps[i].topic;
        parts[i] = tps[i].partition;
    }
    struct cn_txn_meta next;
    bool changed = false;
    if (build_add(e, topics, parts, n, &next, &changed) != 0)
        return false;
    if (!changed) {
        cn_txn_meta_fini(&next);
        return false;
    }
    next.client_tv = 2;
    struct txn_write x = {.rerun = rerun, .body = *body};
    write_change_x(b, e, &next, produce_add_written, req, h, false, &x);
    return true;
}

void cn_h_add_partitions_to_txn(struct cn_broker *b, struct cn_req *req,
                                const struct cn_req_header *h,
                                struct cn_rd *body)
{
    struct cn_add_partitions_to_txn_request rq;
    const struct cn_rd body0 = *body;
    int err = cn_add_partitions_to_txn_request_decode(body, &req->arena,
                                                      h->api_version, &rq);
    if (err) {
        cn_req_bad(req, h, err);
        return;
    }
    if (h->api_version >= 4) {
        add_batched(b, req, h, &rq);
        return;
    }
    struct add_state *as = cn_arena_alloc(&req->arena, sizeof *as);
    if (!as) {
        cn_req_bad(req, h, CN_ENOMEM);
        return;
    }
    req->handler_state = as;
    struct cn_add_partitions_to_txn_response *rs = &as->rs;
    cn_add_partitions_to_txn_response_init(rs);
    int32_t nt = rq.v3_and_below_topics_len > 0 ? rq.v3_and_below_topics_len
                                                : 0;
    rs->results_by_topic_v3_and_below = cn_arena_calloc(
        &req->arena, (size_t)nt + 1, sizeof *rs->results_by_topic_v3_and_below);
    if (!rs->results_by_topic_v3_and_below) {
        cn_req_bad(req, h, CN_ENOMEM);
        return;
    }
    rs->results_by_topic_v3_and_below_len = nt;
    bool unknown = false;
    for (int32_t i = 0; i < nt; i++) {
        const struct cn_add_partitions_to_txn_request_add_partitions_to_txn_topic
            *qt = &rq.v3_and_below_topics[i];
        struct cn_add_partitions_to_txn_response_add_partitions_to_txn_topic_result
            *tr = &rs->results_by_topic_v3_and_below[i];
        cn_add_partitions_to_txn_response_add_partitions_to_txn_topic_result_init(
            tr);
        tr->name = qt->name;
        int32_t np = qt->partitions_len > 0 ? qt->partitions_len : 0;
        tr->results_by_partition = cn_arena_calloc(
            &req->arena, (size_t)np + 1, sizeof *tr->results_by_partition);
        if (!tr->results_by_partition) {
            cn_req_bad(req, h, CN_ENOMEM);
            return;
        }
        tr->results_by_partition_len = np;
        for (int32_t j = 0; j < np; j++) {
            tr->results_by_partition[j].partition_index = qt->partitions[j];
            if (!cn_partition_find(b, qt->name, qt->partitions[j]) ||
                cn_bytes_eq_str(qt->name, CN_TXN_TOPIC)) {
                tr->results_by_partition[j].partition_error_code =
                    KAFKA_UNKNOWN_TOPIC_OR_PARTITION;
                unknown = true;
            }
        }
    }
    struct txn_entry *e = NULL;
    int16_t kerr = check_producer(b, rq.v3_and_below_transactional_id,
                                  rq.v3_and_below_producer_id,
                                  rq.v3_and_below_producer_epoch, 24,
                                  h->api_version, &e);
    if (kerr == KAFKA_CONCURRENT_TRANSACTIONS &&
        park(b, e, req, h, &body0, cn_h_add_partitions_to_txn))
        return;
    if (kerr) {
        set_all(rs, kerr, false);
        answer_add(req, h, rs);
        return;
    }
    if (unknown) {
        /* Nothing is added when any partition is bad. */
        set_all(rs, KAFKA_OPERATION_NOT_ATTEMPTED, true);
        answer_add(req, h, rs);
        return;
    }
    struct cn_txn_meta next;
    cn_txn_meta_init(&next);
    bool changed = e->meta.state != CN_TXN_ONGOING;
    if (cn_txn_meta_copy(&next, &e->meta) != 0) {
        set_all(rs, KAFKA_COORDINATOR_NOT_AVAILABLE, false);
        answer_add(req, h, rs);
        return;
    }
    if (changed)
        cn_txn_meta_clear_partitions(&next);
    for (int32_t i = 0; i < nt; i++) {
        const struct cn_add_partitions_to_txn_request_add_partitions_to_txn_topic
            *qt = &rq.v3_and_below_topics[i];
        char topic[CN_TOPIC_NAME_MAX + 1];
        if (!cn_wire_cstr(qt->name, topic, sizeof topic))
            continue;
        for (int32_t j = 0; j < qt->partitions_len; j++) {
            if (!cn_txn_meta_has_partition(&next, topic, qt->partitions[j])) {
                changed = true;
                cn_txn_meta_add_partition(&next, topic, qt->partitions[j]);
            }
        }
    }
    if (!changed) {
        cn_txn_meta_fini(&next);
        answer_add(req, h, rs);
        return;
    }
    int64_t now = cn_clock_wall_ms();
    if (next.state != CN_TXN_ONGOING)
        next.txn_start_ms = now;
    next.state = CN_TXN_ONGOING;
    next.last_update_ms = now;
    next.client_tv = 1; /* adds its partitions itself: a TV1 client */
    write_change(b, e, &next, add_written, req, h, false);
}

/* ---- AddOffsetsToTxn ---------------------------------------------------- */

static void answer_add_offsets(struct cn_req *req,
                               const struct cn_req_header *h, int16_t err)
{
    struct cn_add_offsets_to_txn_response rs;
    cn_add_offsets_to_txn_response_init(&rs);
    rs.error_code = err;
    cn_resp_begin(req, h);
    cn_add_offsets_to_txn_response_encode(&req->resp, h->api_version, &rs);
    cn_req_done(req);
}

static void add_offsets_written(struct txn_write *w, int16_t err)
{
    w->e->busy = false;
    answer_add_offsets(w->req, &w->h, err);
}

/* The group's __consumer_offsets partition joins the transaction, so the
 * commit or abort marker reaches the offsets the producer then sends with
 * TxnOffsetCommit. */
void cn_h_add_offsets_to_txn(struct cn_broker *b, struct cn_req *req,
                             const struct cn_req_header *h,
                             struct cn_rd *body)
{
    struct cn_add_offsets_to_txn_request rq;
    const struct cn_rd body0 = *body;
    int err = cn_add_offsets_to_txn_request_decode(body, &req->arena,
                                                   h->api_version, &rq);
    if (err) {
        cn_req_bad(req, h, err);
        return;
    }
    struct txn_entry *e = NULL;
    int16_t kerr = check_producer(b, rq.transactional_id, rq.producer_id,
                                  rq.producer_epoch, 25, h->api_version, &e);
    if (kerr == KAFKA_CONCURRENT_TRANSACTIONS &&
        park(b, e, req, h, &body0, cn_h_add_offsets_to_txn))
        return;
    if (kerr) {
        answer_add_offsets(req, h, kerr);
        return;
    }
    if (cn_bytes_is_null(rq.group_id) || rq.group_id.len == 0) {
        answer_add_offsets(req, h, KAFKA_INVALID_GROUP_ID);
        return;
    }
    struct cn_partition *p = cn_group_coord_partition(b, rq.group_id);
    if (!p) {
        answer_add_offsets(req, h, KAFKA_COORDINATOR_NOT_AVAILABLE);
        return;
    }
    const char *topic = p->topic->name;
    bool ongoing = e->meta.state == CN_TXN_ONGOING;
    if (ongoing && cn_txn_meta_has_partition(&e->meta, topic, p->index)) {
        answer_add_offsets(req, h, KAFKA_NONE);
        return;
    }
    struct cn_txn_meta next;
    cn_txn_meta_init(&next);
    int rc = cn_txn_meta_copy(&next, &e->meta);
    if (rc == 0 && !ongoing)
        cn_txn_meta_clear_partitions(&next);
    if (rc == 0)
        rc = cn_txn_meta_add_partition(&next, topic, p->index);
    if (rc != 0) {
        cn_txn_meta_fini(&next);
        answer_add_offsets(req, h, KAFKA_COORDINATOR_NOT_AVAILABLE);
        return;
    }
    int64_t now = cn_clock_wall_ms();
    if (!ongoing)
        next.txn_start_ms = now;
    next.state = CN_TXN_ONGOING;
    next.last_update_ms = now;
    write_change(b, e, &next, add_offsets_written, req, h, false);
}

/* ---- EndTxn ------------------------------------------------------------- */

static void end_written(struct txn_write *w, int16_t err);

/* A TV2 EndTxn decides the transaction and bumps the epoch in the same
 * record (Kafka's prepareAbortOrCommit); at the last usable epoch the
 * next producer id is allocated now and taken on at completion.  `bare`:
 * an abort with no transaction open (TV2 allows it), which starts now. */
static void end_tv2_prepare(struct cn_broker *b, struct txn_entry *e,
                            struct cn_req *req, const struct cn_req_header *h,
                            bool commit, bool bare)
{
    struct cn_txn_meta next;
    cn_txn_meta_init(&next);
    int rc = cn_txn_meta_copy(&next, &e->meta);
    if (!rc && e->meta.producer_epoch >= EPOCH_LAST_USABLE) {
        int64_t pid;
        rc = cn_pidalloc_next(&b->pids, &pid);
        if (!rc)
            next.next_producer_id = pid;
    }
    if (rc) {
        cn_txn_meta_fini(&next);
        answer_end_txn(req, h, KAFKA_COORDINATOR_NOT_AVAILABLE, NULL);
        return;
    }
    int64_t now = cn_clock_wall_ms();
    next.last_producer_epoch = e->meta.producer_epoch;
    next.producer_epoch = (int16_t)(e->meta.producer_epoch + 1);
    next.state = commit ? CN_TXN_PREPARE_COMMIT : CN_TXN_PREPARE_ABORT;
    next.client_tv = 2;
    next.last_update_ms = now;
    if (bare) {
        cn_txn_meta_clear_partitions(&next);
        next.txn_start_ms = now;
    }
    e->decide_us = cn_clock_mono_us();
    write_change(b, e, &next, end_written, req, h, commit);
}

/*
 * EndTxn v5 under transaction version 2, after Kafka 4.x's
 * TransactionCoordinator.endTransaction.  Because every EndTxn bumps the
 * epoch, the same epoch no longer tells a retry apart: a retry carries
 * the epoch just below the stored one (or, across a producer id
 * rotation, the previous id at the last usable epoch while the new id
 * is at 0).  A retry of what completed the previous transaction is
 * answered with success and the current id and epoch; any other epoch
 * is PRODUCER_FENCED.
 */
static void end_txn_tv2(struct cn_broker *b, struct cn_req *req,
                        const struct cn_req_header *h,
                        const struct cn_rd *body0,
                        const struct cn_end_txn_request *rq)
{
    char id[1024];
    if (!cn_wire_cstr(rq->transactional_id, id, sizeof id) || !id[0]) {
        answer_end_txn(req, h, KAFKA_INVALID_REQUEST, NULL);
        return;
    }
    struct txn_entry *e = entry_find(b->txn, id);
    if (!e || e->meta.state == CN_TXN_DEAD) {
        answer_end_txn(req, h, KAFKA_INVALID_PRODUCER_ID_MAPPING, NULL);
        return;
    }
    const struct cn_txn_meta *m = &e->meta;
    enum cn_txn_state s = m->state;
    if (e->busy || s == CN_TXN_PREPARE_COMMIT || s == CN_TXN_PREPARE_ABORT ||
        s == CN_TXN_PREPARE_EPOCH_FENCE) {
        /* Kafka answers a retry during the markers with
         * CONCURRENT_TRANSACTIONS too; waiting gives the final answer. */
        if (!park(b, e, req, h, body0, cn_h_end_txn))
            answer_end_txn(req, h, KAFKA_CONCURRENT_TRANSACTIONS, NULL);
        return;
    }
    bool retry_overflow = m->prev_producer_id >= 0 &&
                          m->prev_producer_id == rq->producer_id &&
                          rq->producer_epoch == EPOCH_LAST_USABLE &&
                          m->producer_epoch == 0;
    bool retry_bump = m->producer_id == rq->producer_id &&
                      m->producer_epoch == rq->producer_epoch + 1;
    if (m->producer_id != rq->producer_id && !retry_overflow) {
        answer_end_txn(req, h, KAFKA_INVALID_PRODUCER_ID_MAPPING, NULL);
        return;
    }
    bool same = rq->producer_epoch == m->producer_epoch &&
                m->producer_id == rq->producer_id;
    bool complete = s == CN_TXN_COMPLETE_COMMIT || s == CN_TXN_COMPLETE_ABORT;
    bool valid = complete ? retry_bump || retry_overflow || same : same;
    if (!valid) {
        answer_end_txn(req, h, KAFKA_PRODUCER_FENCED, NULL);
        return;
    }
    bool retry = retry_bump || retry_overflow;
    bool commit = rq->committed;
    switch (s) {
    case CN_TXN_ONGOING:
        end_tv2_prepare(b, e, req, h, commit, false);
        return;
    case CN_TXN_COMPLETE_COMMIT:
        if (commit)
            answer_end_txn(req, h,
                           retry ? KAFKA_NONE : KAFKA_INVALID_TXN_STATE, m);
        else if (retry)
            answer_end_txn(req, h, KAFKA_INVALID_TXN_STATE, NULL);
        else
            end_tv2_prepare(b, e, req, h, false, true);
        return;
    case CN_TXN_COMPLETE_ABORT:
        if (commit)
            answer_end_txn(req, h, KAFKA_INVALID_TXN_STATE, NULL);
        else if (retry)
            answer_end_txn(req, h, KAFKA_NONE, m);
        else
            end_tv2_prepare(b, e, req, h, false, true);
        return;
    case CN_TXN_EMPTY:
        if (commit)
            answer_end_txn(req, h, KAFKA_INVALID_TXN_STATE, NULL);
        else
            end_tv2_prepare(b, e, req, h, false, true);
        return;
    default:
        answer_end_txn(req, h, KAFKA_INVALID_TXN_STATE, NULL);
        return;
    }
}

static void end_written(struct txn_write *w, int16_t err)
{
    answer_end_txn(w->req, &w->h, err, &w->e->meta);
    if (err) {
        w->e->busy = false;
        return;
    }
    if (CN_FAILPOINT("txn.after_prepare_sync"))
        return;
    write_markers(w->b, w->e, w->commit);
}

void cn_h_end_txn(struct cn_broker *b, struct cn_req *req,
                  const struct cn_req_header *h, struct cn_rd *body)
{
    struct cn_end_txn_request rq;
    const struct cn_rd body0 = *body;
    int err = cn_end_txn_request_decode(body, &req->arena, h->api_version, &rq);
    if (err) {
        cn_req_bad(req, h, err);
        return;
    }
    if (h->api_version >= 5 && tv2_on(b)) {
        end_txn_tv2(b, req, h, &body0, &rq);
        return;
    }
    struct txn_entry *e = NULL;
    int16_t kerr = check_producer(b, rq.transactional_id, rq.producer_id,
                                  rq.producer_epoch, 26, h->api_version, &e);
    if (kerr == KAFKA_CONCURRENT_TRANSACTIONS &&
        park(b, e, req, h, &body0, cn_h_end_txn))
        return;
    if (kerr) {
        answer_end_txn(req, h, kerr, NULL);
        return;
    }
    enum cn_txn_state s = e->meta.state;
    if (s == CN_TXN_COMPLETE_COMMIT || s == CN_TXN_COMPLETE_ABORT) {
        /* A retry of the EndTxn that finished it is answered as before. */
        bool same = (s == CN_TXN_COMPLETE_COMMIT) == rq.committed;
        answer_end_txn(req, h, same ? KAFKA_NONE : KAFKA_INVALID_TXN_STATE,
                       &e->meta);
        return;
    }
    if (s != CN_TXN_ONGOING) {
        answer_end_txn(req, h, KAFKA_INVALID_TXN_STATE, NULL);
        return;
    }
    struct cn_txn_meta next;
    cn_txn_meta_init(&next);
    if (cn_txn_meta_copy(&next, &e->meta) != 0) {
        answer_end_txn(req, h, KAFKA_COORDINATOR_NOT_AVAILABLE, NULL);
        return;
    }
    next.state = rq.committed ? CN_TXN_PREPARE_COMMIT : CN_TXN_PREPARE_ABORT;
    next.last_update_ms = cn_clock_wall_ms();
    next.client_tv = 1; /* an EndTxn without the bump: a TV1 client */
    e->decide_us = cn_clock_mono_us();
    write_change(b, e, &next, end_written, req, h, rq.committed);
}

/* ---- partition leaders asking (KIP-890 part 1, locally) ----------------- */

int16_t cn_txn_coord_verify(struct cn_broker *b, int64_t producer_id,
                            int16_t producer_epoch, const char *topic,
                            int32_t partition)
{
    if (!b->cfg->transaction_partition_verification_enable)
        return KAFKA_NONE;
    struct txn_entry *e = b->txn ? entry_by_pid(b->txn, producer_id) : NULL;
    if (!e)
        return KAFKA_INVALID_TXN_STATE;
    /* Kafka checks the epoch first: a fenced producer hears so. */
    if (producer_epoch < e->meta.producer_epoch)
        return KAFKA_INVALID_PRODUCER_EPOCH;
    if (producer_epoch != e->meta.producer_epoch ||
        e->meta.state != CN_TXN_ONGOING ||
        !cn_txn_meta_has_partition(&e->meta, topic, partition))
        return KAFKA_INVALID_TXN_STATE;
    return KAFKA_NONE;
}

/* ---- FindCoordinator ---------------------------------------------------- */

#define KEY_TYPE_GROUP 0
#define KEY_TYPE_TRANSACTION 1

static void fill_coordinator(struct cn_broker *b, struct cn_req *req,
                             int8_t key_type, int16_t *err, int32_t *node,
                             struct cn_bytes *host, int32_t *port,
                             struct cn_bytes *msg)
{
    *node = -1;
    *host = cn_bytes_str("");
    *port = -1;
    if (key_type != KEY_TYPE_TRANSACTION && key_type != KEY_TYPE_GROUP) {
        *err = KAFKA_INVALID_REQUEST;
        *msg = cn_req_str(req, "Unknown coordinator key type.");
        return;
    }
    bool ready = key_type == KEY_TYPE_GROUP
                     ? cn_group_coord_partition(b, cn_bytes_str("")) != NULL
                     : log_topic(b, true) != NULL;
    if (!ready) {
        *err = KAFKA_COORDINATOR_NOT_AVAILABLE;
        return;
    }
    *err = KAFKA_NONE;
    *node = b->node_id;
    *host = cn_bytes_str(b->adv_host);
    *port = b->adv_port;
}

void cn_h_find_coordinator(struct cn_broker *b, struct cn_req *req,
                           const struct cn_req_header *h, struct cn_rd *body)
{
    struct cn_find_coordinator_request rq;
    int err = cn_find_coordinator_request_decode(body, &req->arena,
                                                 h->api_version, &rq);
    if (err) {
        cn_req_bad(req, h, err);
        return;
    }
    struct cn_find_coordinator_response rs;
    cn_find_coordinator_response_init(&rs);
    if (h->api_version < 4) {
        fill_coordinator(b, req, rq.key_type, &rs.error_code, &rs.node_id,
                         &rs.host, &rs.port, &rs.error_message);
    } else {
        int32_t n = rq.coordinator_keys_len > 0 ? rq.coordinator_keys_len : 0;
        rs.coordinators = cn_arena_calloc(&req->arena, (size_t)n + 1,
                                          sizeof *rs.coordinators);
        if (!rs.coordinators) {
            cn_req_bad(req, h, CN_ENOMEM);
            return;
        }
        rs.coordinators_len = n;
        for (int32_t i = 0; i < n; i++) {
            struct cn_find_coordinator_response_coordinator *c =
                &rs.coordinators[i];
            cn_find_coordinator_response_coordinator_init(c);
            c->key = rq.coordinator_keys[i];
            fill_coordinator(b, req, rq.key_type, &c->error_code, &c->node_id,
                             &c->host, &c->port, &c->error_message);
        }
    }
    cn_resp_begin(req, h);
    cn_find_coordinator_response_encode(&req->resp, h->api_version, &rs);
    cn_req_done(req);
}

/* ---- timeouts ----------------------------------------------------------- */

static void timeout_written(struct txn_write *w, int16_t err)
{
    if (err) {
        w->e->busy = false;
        w->e->timeout_abort = false;
        return;
    }
    if (w->e->timeout_abort)
        w->b->txn->timed_out_aborts++;
    if (CN_FAILPOINT("txn.after_prepare_sync"))
        return;
    write_markers(w->b, w->e, false);
}

static void on_timeout_check(uv_timer_t *t)
{
    struct cn_broker *b = t->data;
    struct cn_txn_coord *c = b->txn;
    int64_t now = cn_clock_wall_ms();
    if (b->stopping)
        return;
    for (size_t i = 0; i < c->buckets; i++)
        for (struct txn_entry *e = c->table[i]; e; e = e->next) {
            const struct cn_txn_meta *m = &e->meta;
            if (e->busy || m->state != CN_TXN_ONGOING ||
                now - m->txn_start_ms <= m->timeout_ms)
                continue;
            struct cn_txn_meta next;
            cn_txn_meta_init(&next);
            if (cn_txn_meta_copy(&next, m) != 0 ||
                abort_epoch(b, &next) != 0) {
                cn_txn_meta_fini(&next);
                continue;
            }
            CN_INFO("transactional id %s: transaction open %lld ms, past its "
                    "timeout of %d ms: aborting and bumping the epoch to %d",
                    m->transactional_id, (long long)(now - m->txn_start_ms),
                    m->timeout_ms, next.producer_epoch);
            next.state = CN_TXN_PREPARE_ABORT;
            next.last_update_ms = now;
            e->decide_us = cn_clock_mono_us();
            e->timeout_abort = true;
            write_change(b, e, &next, timeout_written, NULL, NULL, false);
        }
}

/* ---- expiry ------------------------------------------------------------- */

static void expired_written(struct txn_write *w, int16_t err)
{
    struct txn_entry *e = w->e;
    e->busy = false;
    if (!err && e->meta.state == CN_TXN_DEAD) {
        CN_INFO("transactional id %s expired: unused for %d ms",
                e->meta.transactional_id,
                w->b->cfg->transactional_id_expiration_ms);
        entry_remove(w->b->txn, e);
    }
}

/* Ids unused for transactional.id.expiration.ms are written as Dead (a
 * tombstone, so compaction can drop them) and forgotten.  Only ids with no
 * transaction open can expire. */
static void on_expiry_check(uv_timer_t *t)
{
    struct cn_broker *b = t->data;
    struct cn_txn_coord *c = b->txn;
    int64_t now = cn_clock_wall_ms();
    if (b->stopping)
        return;
    for (size_t i = 0; i < c->buckets; i++) {
        struct txn_entry *e = c->table[i];
        while (e) {
            struct txn_entry *next = e->next;
            if (!e->busy && cn_txn_state_expirable(e->meta.state) &&
                now - e->meta.last_update_ms >
                    b->cfg->transactional_id_expiration_ms) {
                struct cn_txn_meta dead;
                cn_txn_meta_init(&dead);
                if (cn_txn_meta_copy(&dead, &e->meta) == 0) {
                    dead.state = CN_TXN_DEAD;
                    cn_txn_meta_clear_partitions(&dead);
                    dead.last_update_ms = now;
                    write_change(b, e, &dead, expired_written, NULL, NULL,
                                 false);
                } else {
                    cn_txn_meta_fini(&dead);
                }
            }
            e = next;
        }
    }
}

/* ---- DescribeTransactions and ListTransactions -------------------------- */

void cn_h_describe_transactions(struct cn_broker *b, struct cn_req *req,
                                const struct cn_req_header *h,
                                struct cn_rd *body)
{
    struct cn_describe_transactions_request rq;
    int err = cn_describe_transactions_request_decode(body, &req->arena,
                                                      h->api_version, &rq);
    if (err) {
        cn_req_bad(req, h, err);
        return;
    }
    struct cn_describe_transactions_response rs;
    cn_describe_transactions_response_init(&rs);
    int32_t n = rq.transactional_ids_len > 0 ? rq.transactional_ids_len : 0;
    rs.transaction_states = cn_arena_calloc(&req->arena, (size_t)n + 1,
                                            sizeof *rs.transaction_states);
    if (!rs.transaction_states)
        goto nomem;
    rs.transaction_states_len = n;
    for (int32_t i = 0; i < n; i++) {
        struct cn_describe_transactions_response_transaction_state *ts =
            &rs.transaction_states[i];
        cn_describe_transactions_response_transaction_state_init(ts);
        ts->transactional_id = rq.transactional_ids[i];
        ts->topics_len = 0;
        char id[1024];
        struct txn_entry *e =
            cn_wire_cstr(rq.transactional_ids[i], id, sizeof id)
                ? entry_find(b->txn, id)
                : NULL;
        if (!e || e->meta.state == CN_TXN_DEAD) {
            ts->error_code = KAFKA_TRANSACTIONAL_ID_NOT_FOUND;
            ts->transaction_state = cn_bytes_str("");
            continue;
        }
        const struct cn_txn_meta *m = &e->meta;
        ts->transaction_state = cn_bytes_str(cn_txn_state_name(m->state));
        ts->transaction_timeout_ms = m->timeout_ms;
        ts->transaction_start_time_ms = m->txn_start_ms;
        ts->producer_id = m->producer_id;
        ts->producer_epoch = m->producer_epoch;
        /* Partitions come sorted by topic: one entry per topic. */
        ts->topics = cn_arena_calloc(&req->arena, m->npartitions + 1,
                                     sizeof *ts->topics);
        if (!ts->topics)
            goto nomem;
        for (size_t k = 0; k < m->npartitions; k++) {
            struct cn_describe_transactions_response_topic_data *td;
            if (ts->topics_len == 0 ||
                strcmp(m->partitions[k].topic, m->partitions[k - 1].topic)) {
                td = &ts->topics[ts->topics_len++];
                cn_describe_transactions_response_topic_data_init(td);
                td->topic = cn_req_str(req, m->partitions[k].topic);
                td->partitions = cn_arena_calloc(&req->arena,
                                                 m->npartitions + 1,
                                                 sizeof *td->partitions);
                if (!td->partitions)
                    goto nomem;
                td->partitions_len = 0;
            } else {
                td = &ts->topics[ts->topics_len - 1];
            }
            td->partitions[td->partitions_len++] =
                m->partitions[k].partition;
        }
    }
    cn_resp_begin(req, h);
    cn_describe_transactions_response_encode(&req->resp, h->api_version, &rs);
    cn_req_done(req);
    return;
nomem:
    cn_req_bad(req, h, CN_ENOMEM);
}

static bool pid_wanted(const struct cn_list_transactions_request *rq,
                       int64_t pid)
{
    if (rq->producer_id_filters_len <= 0)
        return true;
    for (int32_t i = 0; i < rq->producer_id_filters_len; i++)
        if (rq->producer_id_filters[i] == pid)
            return true;
    return false;
}

void cn_h_list_transactions(struct cn_broker *b, struct cn_req *req,
                            const struct cn_req_header *h, struct cn_rd *body)
{
    struct cn_list_transactions_request rq;
    int err = cn_list_transactions_request_decode(body, &req->arena,
                                                  h->api_version, &rq);
    if (err) {
        cn_req_bad(req, h, err);
        return;
    }
    struct cn_list_transactions_response rs;
    cn_list_transactions_response_init(&rs);
    int32_t nf = rq.state_filters_len > 0 ? rq.state_filters_len : 0;
    bool want_state[CN_TXN_NSTATES] = {false};
    rs.unknown_state_filters = cn_arena_calloc(&req->arena, (size_t)nf + 1,
                                               sizeof *rs.unknown_state_filters);
    if (!rs.unknown_state_filters)
        goto nomem;
    rs.unknown_state_filters_len = 0;
    for (int32_t i = 0; i < nf; i++) {
        char name[64];
        int st = cn_wire_cstr(rq.state_filters[i], name, sizeof name)
                     ? cn_txn_state_parse(name)
                     : -1;
        if (st < 0)
            rs.unknown_state_filters[rs.unknown_state_filters_len++] =
                rq.state_filters[i];
        else
            want_state[st] = true;
    }
    struct cn_txn_coord *c = b->txn;
    rs.transaction_states = cn_arena_calloc(&req->arena, c->count + 1,
                                            sizeof *rs.transaction_states);
    if (!rs.transaction_states)
        goto nomem;
    rs.transaction_states_len = 0;
    int64_t now = cn_clock_wall_ms();
    for (size_t i = 0; i < c->buckets; i++)
        for (struct txn_entry *e = c->table[i]; e; e = e->next) {
            const struct cn_txn_meta *m = &e->meta;
            if (m->state == CN_TXN_DEAD || (nf > 0 && !want_state[m->state]) ||
                !pid_wanted(&rq, m->producer_id))
                continue;
            /* v1: only transactions running longer than the filter. */
            if (rq.duration_filter >= 0 &&
                (m->txn_start_ms < 0 ||
                 now - m->txn_start_ms < rq.duration_filter))
                continue;
            struct cn_list_transactions_response_transaction_state *ts =
                &rs.transaction_states[rs.transaction_states_len++];
            cn_list_transactions_response_transaction_state_init(ts);
            ts->transactional_id = cn_req_str(req, m->transactional_id);
            ts->producer_id = m->producer_id;
            ts->transaction_state = cn_bytes_str(cn_txn_state_name(m->state));
        }
    cn_resp_begin(req, h);
    cn_list_transactions_response_encode(&req->resp, h->api_version, &rs);
    cn_req_done(req);
    return;
nomem:
    cn_req_bad(req, h, CN_ENOMEM);
}

/* ---- load and recovery -------------------------------------------------- */

static int load_record(struct cn_txn_coord *c, const struct cn_record *rec)
{
    struct cn_txn_meta m;
    cn_txn_meta_init(&m);
    bool tombstone = false;
    if (cn_txn_log_decode(rec->key, rec->value, &m, &tombstone) != 0)
        return 0; /* not a record we know: skip it, as Kafka's loader does */
    struct txn_entry *e = entry_find(c, m.transactional_id);
    if (tombstone) {
        if (e)
            entry_remove(c, e);
        cn_txn_meta_fini(&m);
        return 0;
    }
    if (!e) {
        e = calloc(1, sizeof *e);
        if (!e) {
            cn_txn_meta_fini(&m);
            return CN_ENOMEM;
        }
        e->meta = m;
        e->indexed_pid = -1;
        int rc = entry_insert(c, e);
        if (!rc)
            pid_reindex(c, e);
        return rc;
    }
    cn_txn_meta_fini(&e->meta);
    e->meta = m;
    pid_reindex(c, e);
    return 0;
}

struct load_ctx {
    struct cn_txn_coord *c;
    struct cn_wr scratch; /* decompressed records */
    int64_t from;         /* records below are not the log's any more */
};

static int load_batch(void *arg, const uint8_t *batch, size_t len,
                      const struct cn_batch_hdr *hdr)
{
    struct load_ctx *lc = arg;
    struct cn_record_iter it;
    struct cn_batch_hdr h;
    (void)hdr;
    if (cn_batch_records(batch, len, 0, &lc->scratch, &h, &it) != 0)
        return 0; /* a batch that does not decode holds nothing we wrote */
    struct cn_record rec;
    int rc = 0;
    while (!rc && cn_record_iter_next(&it, &rec) == 1)
        if (rec.offset >= lc->from)
            rc = load_record(lc->c, &rec);
    return rc;
}

static int load_partition(struct cn_txn_coord *c, struct cn_partition *p)
{
    struct load_ctx lc = {c, {0}, cn_log_start_offset(p->log)};
    cn_wr_init(&lc.scratch, 0);
    int rc = cn_partition_scan(p, lc.from, load_batch, &lc);
    cn_wr_fini(&lc.scratch);
    return rc;
}

int cn_txn_coord_start(struct cn_broker *b)
{
    struct cn_txn_coord *c = calloc(1, sizeof *c);
    if (!c)
        return CN_ENOMEM;
    b->txn = c;
    struct cn_topic *t = log_topic(b, false);
    /* An existing log keeps the partition count it was made with. */
    c->nparts = t ? t->partition_count
                  : b->cfg->transaction_state_log_num_partitions;
    c->part_ids = calloc((size_t)c->nparts, sizeof *c->part_ids);
    c->part_writing = calloc((size_t)c->nparts, sizeof *c->part_writing);
    if (!c->part_ids || !c->part_writing)
        return CN_ENOMEM;
    int64_t t0 = cn_clock_mono_ms();
    if (t) {
        for (int32_t i = 0; i < t->partition_count; i++) {
            int rc = load_partition(c, t->partitions[i]);
            if (rc)
                return rc;
        }
        size_t resumed = 0;
        for (size_t i = 0; i < c->buckets; i++)
            for (struct txn_entry *e = c->table[i]; e; e = e->next) {
                /* The decision is durable: finish what it says. */
                if (e->meta.state == CN_TXN_PREPARE_COMMIT ||
                    e->meta.state == CN_TXN_PREPARE_ABORT) {
                    e->busy = true;
                    e->decide_us = cn_clock_mono_us();
                    write_markers(b, e,
                                  e->meta.state == CN_TXN_PREPARE_COMMIT);
                    resumed++;
                }
            }
        CN_INFO("loaded %zu transactional ids from %s in %lld ms; %zu "
                "decided transactions being completed",
                c->count, CN_TXN_TOPIC,
                (long long)(cn_clock_mono_ms() - t0), resumed);
    }
    uv_timer_init(b->loop, &c->timer);
    c->timer.data = b;
    uint64_t every = (uint64_t)
        b->cfg->transaction_abort_timed_out_transaction_cleanup_interval_ms;
    uv_timer_start(&c->timer, on_timeout_check, every, every);
    uv_timer_init(b->loop, &c->park_timer);
    c->park_timer.data = b;
    uv_timer_init(b->loop, &c->expiry_timer);
    c->expiry_timer.data = b;
    uint64_t expiry_every = (uint64_t)
        b->cfg->transaction_remove_expired_transaction_cleanup_interval_ms;
    uv_timer_start(&c->expiry_timer, on_expiry_check, expiry_every,
                   expiry_every);
    c->timer_armed = true;
    return 0;
}

void cn_txn_coord_stop(struct cn_broker *b)
{
    struct cn_txn_coord *c = b->txn;
    if (!c || !c->timer_armed)
        return;
    uv_timer_stop(&c->timer);
    uv_close((uv_handle_t *)&c->timer, NULL);
    uv_timer_stop(&c->expiry_timer);
    uv_close((uv_handle_t *)&c->expiry_timer, NULL);
    /* Waiting requests are answered now (CONCURRENT_TRANSACTIONS, or what
     * a stopping broker says) rather than dropped. */
    c->no_park = true;
    unpark(b, NULL, true);
    uv_timer_stop(&c->park_timer);
    uv_close((uv_handle_t *)&c->park_timer, NULL);
    c->timer_armed = false;
}

void cn_txn_coord_free(struct cn_broker *b)
{
    struct cn_txn_coord *c = b->txn;
    if (!c)
        return;
    for (size_t i = 0; i < c->buckets; i++)
        while (c->table[i]) {
            struct txn_entry *e = c->table[i];
            c->table[i] = e->next;
            cn_txn_meta_fini(&e->meta);
            free(e);
        }
    free(c->table);
    free(c->part_ids);
    free(c->part_writing);
    free(c);
    b->txn = NULL;
}

/* ---- metrics and introspection ------------------------------------------ */

void cn_txn_coord_stats(struct cn_broker *b, struct cn_txn_stats *out)
{
    memset(out, 0, sizeof *out);
    struct cn_txn_coord *c = b->txn;
    if (!c)
        return;
    for (size_t i = 0; i < c->buckets; i++)
        for (struct txn_entry *e = c->table[i]; e; e = e->next)
            if (cn_txn_state_valid((int)e->meta.state))
                out->ids_by_state[e->meta.state]++;
    out->commits = c->commits;
    out->aborts = c->aborts;
    out->timed_out_aborts = c->timed_out_aborts;
    out->fenced = c->fenced;
    out->marker_retry_queue = c->marker_retries;
    for (struct txn_park *pk = c->parked; pk; pk = pk->next)
        out->parked_requests++;
    out->commit_ms = c->commit_ms;
    out->abort_ms = c->abort_ms;
}

bool cn_txn_coord_pid_view(struct cn_broker *b, int64_t producer_id,
                           const char *topic, int32_t partition,
                           struct cn_txn_pid_view *out, bool *has_partition)
{
    struct txn_entry *e = b->txn ? entry_by_pid(b->txn, producer_id) : NULL;
    if (has_partition)
        *has_partition = false;
    if (!e)
        return false;
    const struct cn_txn_meta *m = &e->meta;
    if (out) {
        memset(out, 0, sizeof *out);
        snprintf(out->transactional_id, sizeof out->transactional_id, "%s",
                 m->transactional_id ? m->transactional_id : "");
        out->state = m->state;
        out->producer_epoch = m->producer_epoch;
        out->txn_start_ms = m->txn_start_ms;
        out->timeout_ms = m->timeout_ms;
    }
    if (has_partition && topic)
        *has_partition = cn_txn_meta_has_partition(m, topic, partition);
    return true;
}

bool cn_txn_coord_abort_for_operator(struct cn_broker *b, int64_t producer_id,
                                     const char *topic, int32_t partition)
{
    struct txn_entry *e = b->txn ? entry_by_pid(b->txn, producer_id) : NULL;
    const char *tp = topic ? topic : "?";
    if (!e || e->busy || e->meta.state != CN_TXN_ONGOING || !topic ||
        !cn_txn_meta_has_partition(&e->meta, topic, partition)) {
        CN_WARN("operator abort of producer %lld on %s-%d: %s%s%s; the "
                "marker goes to the partition directly",
                (long long)producer_id, tp, partition,
                e ? "transactional id " : "no transactional id knows it",
                e ? e->meta.transactional_id : "",
                e ? " has no open transaction there (or is busy)" : "");
        return false;
    }
    const struct cn_txn_meta *m = &e->meta;
    struct cn_txn_meta next;
    cn_txn_meta_init(&next);
    if (cn_txn_meta_copy(&next, m) != 0 || abort_epoch(b, &next) != 0) {
        cn_txn_meta_fini(&next);
        CN_WARN("operator abort of transactional id %s (producer %lld epoch "
                "%d) on %s-%d: cannot start, the marker goes to the "
                "partition directly",
                m->transactional_id, (long long)producer_id,
                m->producer_epoch, tp, partition);
        return false;
    }
    CN_WARN("operator abort of transactional id %s (producer %lld epoch %d) "
            "on %s-%d: the coordinator aborts the whole transaction and "
            "bumps the epoch to %d",
            m->transactional_id, (long long)producer_id, m->producer_epoch,
            tp, partition, next.producer_epoch);
    next.state = CN_TXN_PREPARE_ABORT;
    next.last_update_ms = cn_clock_wall_ms();
    e->decide_us = cn_clock_mono_us();
    e->timeout_abort = false;
    write_change(b, e, &next, timeout_written, NULL, NULL, false);
    return true;
}
