/*
 * txn_coord.c - the transaction coordinator's core; see txn_coord.h.
 *
 * One entry per transactional id holds the metadata as last made durable.
 * A change is never applied in memory first: it is encoded, appended to
 * the id's __transaction_state partition and synced, and only then applied
 * and acted on (answering, writing markers).  While a change or the
 * markers of a decided transaction are in flight the entry is busy, and
 * requests for it get CONCURRENT_TRANSACTIONS, as Kafka's do.
 *
 * This file owns that table and the one path by which it changes (so
 * nothing else can apply a change before it is durable), the requests
 * parked on busy ids, compaction, expiry, and load at start.  The APIs
 * that ask for changes are in h_txn.c (clients), txn_verify.c (partition
 * leaders) and h_txn_describe.c (read-only); finishing decided
 * transactions is txn_markers.c.  They share txn_int.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/say.h"
#include "markers.h"
#include "proto/batch.h"
#include "proto/kerr.h"
#include "txn/txn_log.h"
#include "txn/txn_state.h"
#include "txn_coord.h"
#include "txn_int.h"

/* The longest a request waits for its busy id before the client hears
 * CONCURRENT_TRANSACTIONS. */
#define PARK_MAX_MS 1000

/* Transaction version 2 (KIP-890 part 2) is finalized. */
bool txn_tv2_on(const struct cn_broker *b)
{
    return b->cfg->cairn_transaction_version >= 2;
}

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

struct txn_entry *txn_entry_find(struct cn_txnb *c, const char *id)
{
    if (!c->buckets)
        return NULL;
    for (struct txn_entry *e = c->table[id_hash(id) % c->buckets]; e;
         e = e->next)
        if (strcmp(e->meta.transactional_id, id) == 0)
            return e;
    return NULL;
}

int txn_entry_insert(struct cn_txnb *c, struct txn_entry *e)
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

static void set_writing(struct cn_txnb *c, struct txn_entry *e,
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

static void pid_unindex(struct cn_txnb *c, struct txn_entry *e)
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
static void pid_reindex(struct cn_txnb *c, struct txn_entry *e)
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

struct txn_entry *txn_entry_by_pid(struct cn_txnb *c, int64_t pid)
{
    if (pid < 0)
        return NULL;
    for (struct txn_entry *e = c->by_pid[(uint64_t)pid % PID_BUCKETS]; e;
         e = e->pid_next)
        if (e->meta.producer_id == pid)
            return e;
    return NULL;
}

static void park_forget(struct cn_txnb *c, struct txn_entry *e);

static void entry_remove(struct cn_txnb *c, struct txn_entry *e)
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

struct cn_topic *txn_log_topic(struct cn_broker *b, bool create)
{
    return cn_topic_internal(b, CN_TXN_TOPIC,
                             b->cfg->transaction_state_log_num_partitions,
                             create);
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
bool txn_park(struct cn_broker *b, struct txn_entry *e, struct cn_req *req,
              const struct cn_req_header *h, const struct cn_rd *body,
              cn_handler_fn fn)
{
    struct cn_txnb *c = b->txn;
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
    struct cn_txnb *c = b->txn;
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
static void park_forget(struct cn_txnb *c, struct txn_entry *e)
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
    struct txn_entry *e = txn_entry_find(b->txn, id);
    if (e && !e->busy && b->txn->parked)
        unpark(b, e, false);
}

/*
 * Appends `next` as the id's newest record and calls then() once it is
 * durable (err KAFKA_NONE, with e->meta = next) or failed.  Takes
 * ownership of next.
 */
void txn_write_change_x(struct cn_broker *b, struct txn_entry *e,
                        struct cn_txn_meta *next,
                        void (*then)(struct txn_write *w, int16_t err),
                        struct cn_req *req, const struct cn_req_header *h,
                        bool commit, const struct txn_write *x)
{
    /* Shutting down: nothing more is written; a decided transaction is
     * finished by the next start's recovery. */
    struct txn_write *w = b->stopping ? NULL : calloc(1, sizeof *w);
    struct cn_topic *t = w ? txn_log_topic(b, true) : NULL;
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
    /* Synced before it is acted on whatever the flush policy for data
     * says; write_done runs once it is durable. */
    if (!rc)
        rc = cn_sync_append_internal(b, p, batch.buf, batch.len, &w->waiter);
    cn_wr_fini(&key);
    cn_wr_fini(&value);
    cn_wr_fini(&batch);
    if (rc) {
        CN_ERROR("cannot append to %s for transactional id %s: %s",
                 CN_TXN_TOPIC, e->meta.transactional_id, cn_strerror(rc));
        e->busy = false;
        set_writing(b->txn, e, false);
        cn_txn_meta_fini(&w->next);
        w->then(w, KAFKA_COORDINATOR_NOT_AVAILABLE);
        free(w);
    }
}

void txn_write_change(struct cn_broker *b, struct txn_entry *e,
                      struct cn_txn_meta *next,
                      void (*then)(struct txn_write *w, int16_t err),
                      struct cn_req *req, const struct cn_req_header *h,
                      bool commit)
{
    txn_write_change_x(b, e, next, then, req, h, commit, NULL);
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
    struct cn_txnb *c = b->txn;
    struct cn_topic *t = b->stopping ? NULL : txn_log_topic(b, false);
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
        if (!rc)
            rc = cn_sync_checkpoint(b, p, batch.buf, batch.len);
    } else if (!rc) {
        rc = cn_log_delete_records(p->log, first);
        if (!rc)
            cn_partition_after_retention(p);
    }
    if (!rc) {
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
    struct cn_txnb *c = b->txn;
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
                    txn_write_change(b, e, &dead, expired_written, NULL,
                                     NULL, false);
                } else {
                    cn_txn_meta_fini(&dead);
                }
            }
            e = next;
        }
    }
}

/* ---- load and recovery -------------------------------------------------- */

static int load_record(struct cn_txnb *c, const struct cn_record *rec)
{
    struct cn_txn_meta m;
    cn_txn_meta_init(&m);
    bool tombstone = false;
    if (cn_txn_log_decode(rec->key, rec->value, &m, &tombstone) != 0)
        return 0; /* not a record we know: skip it, as Kafka's loader does */
    struct txn_entry *e = txn_entry_find(c, m.transactional_id);
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
        int rc = txn_entry_insert(c, e);
        if (rc) {
            cn_txn_meta_fini(&e->meta);
            free(e);
            return rc;
        }
        pid_reindex(c, e);
        return 0;
    }
    cn_txn_meta_fini(&e->meta);
    e->meta = m;
    pid_reindex(c, e);
    return 0;
}

struct load_ctx {
    struct cn_txnb *c;
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

static int load_partition(struct cn_txnb *c, struct cn_partition *p)
{
    struct load_ctx lc = {c, {0}, cn_log_start_offset(p->log)};
    cn_wr_init(&lc.scratch, 0);
    int rc = cn_partition_scan(p, lc.from, load_batch, &lc);
    cn_wr_fini(&lc.scratch);
    return rc;
}

int cn_txn_coord_start(struct cn_broker *b)
{
    struct cn_txnb *c = calloc(1, sizeof *c);
    if (!c)
        return CN_ENOMEM;
    b->txn = c;
    c->markers = &cn_marker_channel_local;
    struct cn_topic *t = txn_log_topic(b, false);
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
                    txn_write_markers(b, e,
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
    uv_timer_start(&c->timer, txn_on_timeout_check, every, every);
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
    struct cn_txnb *c = b->txn;
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
    struct cn_txnb *c = b->txn;
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
