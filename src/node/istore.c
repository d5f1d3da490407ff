/*
 * istore.c - a coordinator's internal topic: write, sync, replay,
 * compaction by checkpoint.  See istore.h.
 */
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/say.h"
#include "node/istore.h"
#include "node/replica.h"
#include "proto/batch.h"
#include "proto/kerr.h"
#include "txn/txn_state.h"

/* How long a coordinator's record may wait for the ISR in a cluster:
 * Kafka's request.timeout.ms, which its coordinators' appends use. */
#define REPLICA_TIMEOUT_MS 30000

struct cn_istore {
    struct cn_broker *b;
    char *name;
    struct cn_topic *topic; /* NULL until made */
    int32_t nparts;
    struct cn_istore_ops ops;
    void *ctx;
    size_t *inflight;   /* per partition: writes not yet durable */
    struct ckpt **ckpt; /* per partition: the checkpoint in flight, or NULL */
    struct cn_istore_wait *pending; /* writes not yet durable */
};

/* A checkpoint between append and durable: the partition's only one. */
struct ckpt {
    struct cn_sync_checkpoint c; /* first */
    struct cn_istore *store;     /* NULL once the store is freed */
    int32_t part;
    size_t live;
};

static struct cn_topic *store_topic(struct cn_istore *s, bool create)
{
    if (!s->topic)
        s->topic = cn_topic_internal(s->b, s->name, s->nparts, create);
    return s->topic;
}

int cn_istore_open(struct cn_broker *b, const char *topic, int32_t nparts,
                   const struct cn_istore_ops *ops, void *ctx, bool create,
                   struct cn_istore **out)
{
    struct cn_istore *s = calloc(1, sizeof *s);
    if (!s)
        return CN_ENOMEM;
    s->b = b;
    s->ops = *ops;
    s->ctx = ctx;
    s->nparts = nparts;
    s->name = strdup(topic);
    if (!s->name) {
        cn_istore_free(s);
        return CN_ENOMEM;
    }
    /* An existing log keeps the partition count it was made with: every
     * key's home depends on it. */
    if (store_topic(s, create))
        s->nparts = s->topic->partition_count;
    else if (create) {
        cn_istore_free(s);
        return CN_ENOTFOUND;
    }
    size_t n = s->nparts > 0 ? (size_t)s->nparts : 1;
    s->inflight = calloc(n, sizeof *s->inflight);
    s->ckpt = calloc(n, sizeof *s->ckpt);
    if (!s->inflight || !s->ckpt) {
        cn_istore_free(s);
        return CN_ENOMEM;
    }
    *out = s;
    return 0;
}

void cn_istore_free(struct cn_istore *s)
{
    if (!s)
        return;
    /* A checkpoint still in flight ends in its sync round, which may come
     * after this: it then only frees itself. */
    for (int32_t i = 0; s->ckpt && i < s->nparts; i++)
        if (s->ckpt[i])
            s->ckpt[i]->store = NULL;
    for (struct cn_istore_wait *w = s->pending; w; w = w->next)
        w->store = NULL;
    free(s->name);
    free(s->inflight);
    free(s->ckpt);
    free(s);
}

int32_t cn_istore_nparts(const struct cn_istore *s)
{
    return s->nparts;
}

int32_t cn_istore_part_of(const struct cn_istore *s, const uint8_t *key,
                          size_t len)
{
    return cn_txn_partition_for(len ? key : (const uint8_t *)"", len,
                                s->nparts);
}

struct cn_partition *cn_istore_partition(struct cn_istore *s, int32_t part,
                                         bool create)
{
    struct cn_topic *t = store_topic(s, create);
    if (!t || part < 0 || part >= t->partition_count || part >= s->nparts)
        return NULL;
    return t->partitions[part];
}

/* ---- replay ------------------------------------------------------------- */

struct replay_ctx {
    struct cn_istore *s;
    int32_t part;
    int64_t from;         /* records below are not the log's any more */
    struct cn_wr scratch; /* decompressed records */
    struct cn_istore_counts n;
};

static int replay_batch(void *arg, const uint8_t *batch, size_t len,
                        const struct cn_batch_hdr *hdr)
{
    struct replay_ctx *rc = arg;
    struct cn_istore *s = rc->s;
    if (cn_batch_is_control(hdr)) {
        int type;
        int32_t coord_epoch;
        if (s->ops.marker && hdr->producer_id >= 0 &&
            cn_batch_marker(batch, len, &type, &coord_epoch) == 0)
            s->ops.marker(s->ctx, rc->part, hdr->producer_id,
                          type == CN_CONTROL_COMMIT);
        return 0;
    }
    struct cn_record_iter it;
    struct cn_batch_hdr h;
    if (cn_batch_records(batch, len, 0, &rc->scratch, &h, &it) != 0) {
        rc->n.bad++; /* holds nothing a coordinator wrote */
        return 0;
    }
    bool txn = cn_batch_is_transactional(&h);
    struct cn_record rec;
    while (cn_record_iter_next(&it, &rec) == 1) {
        if (rec.offset < rc->from || cn_bytes_is_null(rec.key))
            continue;
        int err = s->ops.record(s->ctx, rc->part, rec.key, rec.value,
                                txn ? h.producer_id : -1, txn);
        if (err == CN_ENOMEM)
            return err;
        if (err)
            rc->n.bad++;
        else
            rc->n.records++;
    }
    return 0;
}

int cn_istore_replay(struct cn_istore *s, int32_t part,
                     struct cn_istore_counts *counts)
{
    struct cn_partition *p = cn_istore_partition(s, part, false);
    if (!p)
        return 0;
    struct replay_ctx rc = {s, part, cn_log_start_offset(p->log), {0}, {0}};
    cn_wr_init(&rc.scratch, 0);
    int err = cn_partition_scan(p, rc.from, replay_batch, &rc);
    cn_wr_fini(&rc.scratch);
    if (counts) {
        counts->records += rc.n.records;
        counts->bad += rc.n.bad;
    }
    return err;
}

/* ---- writes ------------------------------------------------------------- */

static void pending_link(struct cn_istore *s, struct cn_istore_wait *w)
{
    w->next = s->pending;
    if (s->pending)
        s->pending->pprev = &w->next;
    w->pprev = &s->pending;
    s->pending = w;
}

static void pending_unlink(struct cn_istore_wait *w)
{
    if (w->next)
        w->next->pprev = w->pprev;
    *w->pprev = w->next;
}

static void write_end(struct cn_istore_wait *w, int err)
{
    /* Not in flight any more before done applies it, so that done's own
     * compaction may run; a write of the same round whose waiter has not
     * run yet still holds the partition. */
    if (w->store) {
        w->store->inflight[w->part]--;
        pending_unlink(w);
    }
    w->done(w, err);
}

static void write_replicated(struct cn_broker *b, void *arg, int16_t kerr)
{
    (void)b;
    write_end(arg, kerr == KAFKA_NONE                     ? 0
                   : kerr == KAFKA_NOT_LEADER_OR_FOLLOWER ? CN_ENOTLEADER
                                                          : CN_EREPLICAS);
}

static void write_synced(struct cn_broker *b, struct cn_sync_waiter *sw)
{
    struct cn_istore_wait *w = (struct cn_istore_wait *)sw;
    /* A sync round that failed takes the log directory offline. */
    if (b->log_dir_offline) {
        write_end(w, CN_EOFFLINE);
        return;
    }
    /* In a cluster a coordinator acts only on what the ISR holds: a
     * record only this broker has is gone when another replica leads
     * (Kafka writes coordinator records with acks=all).  Still in flight
     * meanwhile: a checkpoint must not replace it before it is applied. */
    if (b->cfg->cluster_mode) {
        struct cn_partition *p = w->store ? cn_istore_partition(w->store,
                                                                w->part, false)
                                          : NULL;
        if (!p) {
            write_end(w, CN_ENOTLEADER);
            return;
        }
        if (cn_replica_await_hw(b, p, w->end,
                                p->topic->config.min_insync_replicas,
                                REPLICA_TIMEOUT_MS, write_replicated, w) != 0)
            write_end(w, CN_EREPLICAS);
        return;
    }
    write_end(w, 0);
}

int cn_istore_write(struct cn_istore *s, int32_t part,
                    const struct cn_bytes *keys, const struct cn_bytes *values,
                    size_t n, int64_t producer_id, int16_t producer_epoch,
                    struct cn_istore_wait *w)
{
    struct cn_partition *p = cn_istore_partition(s, part, true);
    if (!p) {
        CN_ERROR("cannot append to %s-%d: no such partition", s->name, part);
        return CN_ENOTFOUND;
    }
    if (s->b->cfg->cluster_mode) {
        if (!cn_partition_led(s->b, p))
            return CN_ENOTLEADER;
        if (cn_replica_isr_size(p) < p->topic->config.min_insync_replicas) {
            CN_WARN("cannot write to %s-%d: %d in-sync replica(s), "
                    "min.insync.replicas is %d",
                    s->name, part, (int)cn_replica_isr_size(p),
                    (int)p->topic->config.min_insync_replicas);
            return CN_EREPLICAS;
        }
    }
    struct cn_batch_params bp = CN_BATCH_PARAMS_INIT;
    if (producer_id >= 0) {
        bp.transactional = true;
        bp.producer_id = producer_id;
        bp.producer_epoch = producer_epoch;
    }
    struct cn_batch_builder bb;
    cn_batch_builder_init(&bb, &bp);
    int64_t now = cn_clock_wall_ms();
    for (size_t i = 0; i < n; i++)
        cn_batch_builder_add(&bb, now, keys[i], values[i], NULL, 0);
    struct cn_wr batch;
    cn_wr_init(&batch, 256);
    int rc = cn_batch_builder_finish(&bb, &batch);
    cn_batch_builder_fini(&bb);
    if (!rc) {
        w->waiter.finish = write_synced;
        w->store = s;
        w->part = part;
        s->inflight[part]++;
        pending_link(s, w);
        w->end = cn_log_end_offset(p->log) + (int64_t)n;
        /* Synced before it is acted on whatever the flush policy for data
         * says; done may run before this returns. */
        rc = cn_sync_append_internal(s->b, p, batch.buf, batch.len,
                                     &w->waiter);
        if (rc) {
            s->inflight[part]--;
            pending_unlink(w);
        }
    }
    cn_wr_fini(&batch);
    if (rc)
        CN_ERROR("cannot append to %s-%d: %s", s->name, part, cn_strerror(rc));
    return rc;
}

void cn_istore_sync(struct cn_istore *s, int32_t part)
{
    struct cn_partition *p = cn_istore_partition(s, part, false);
    if (p && !s->b->cfg->cairn_fsync_group_commit)
        cn_sync_flush(s->b, p);
}

/* ---- compaction by checkpoint ------------------------------------------- */

static void log_compacted(struct cn_istore *s, int32_t part, size_t live,
                          int rc)
{
    struct cn_partition *p = cn_istore_partition(s, part, false);
    if (rc)
        CN_WARN("compacting %s-%d failed: %s", s->name, part, cn_strerror(rc));
    else if (p)
        CN_INFO("%s-%d compacted: %zu records kept, log starts at %lld",
                s->name, part, live, (long long)cn_log_start_offset(p->log));
}

static void checkpoint_done(struct cn_sync_checkpoint *c, int err)
{
    struct ckpt *k = (struct ckpt *)c;
    if (k->store) {
        k->store->ckpt[k->part] = NULL;
        log_compacted(k->store, k->part, k->live, err);
    }
    free(k);
}

/* Appends the checkpoint in bb, synced on a worker before the old records
 * go (in checkpoint_done); with nothing live it just drops the log, which
 * needs no sync. */
static int write_checkpoint(struct cn_istore *s, struct cn_partition *p,
                            int32_t part, struct cn_batch_builder *bb,
                            size_t live, int64_t end)
{
    if (bb->count == 0) {
        int rc = cn_log_delete_records(p->log, end);
        if (!rc) {
            cn_partition_after_retention(p);
            log_compacted(s, part, live, 0);
        }
        return rc;
    }
    struct ckpt *k = calloc(1, sizeof *k);
    if (!k)
        return CN_ENOMEM;
    k->c.done = checkpoint_done;
    k->store = s;
    k->part = part;
    k->live = live;
    struct cn_wr batch;
    cn_wr_init(&batch, 4096);
    int rc = cn_batch_builder_finish(bb, &batch);
    if (!rc) {
        /* Held before the append: done may run before it returns. */
        s->ckpt[part] = k;
        rc = cn_sync_append_checkpoint(s->b, p, batch.buf, batch.len, &k->c);
    }
    cn_wr_fini(&batch);
    if (rc) {
        s->ckpt[part] = NULL;
        free(k);
    }
    return rc;
}

void cn_istore_maybe_compact(struct cn_istore *s, int32_t part)
{
    if (!s || s->b->stopping || !s->ops.want_compact || !s->ops.checkpoint)
        return;
    /* One checkpoint at a time: the next one waits until this one's old
     * records are gone. */
    if (part < 0 || part >= s->nparts || s->ckpt[part])
        return;
    struct cn_partition *p = cn_istore_partition(s, part, false);
    if (!p)
        return;
    int64_t end = cn_log_end_offset(p->log);
    int64_t start = cn_log_start_offset(p->log);
    if (!s->ops.want_compact(s->ctx, part, start, end))
        return;
    /* The checkpoint must come after every record it replaces, and a
     * transaction's records are not the owner's state until its marker. */
    if (s->inflight[part] > 0 || cn_log_synced_offset(p->log) < end ||
        cn_pstate_open_count(p->pstate) > 0)
        return;
    struct cn_batch_params bp = CN_BATCH_PARAMS_INIT;
    struct cn_batch_builder bb;
    cn_batch_builder_init(&bb, &bp);
    size_t live = 0;
    int rc = s->ops.checkpoint(s->ctx, part, &bb, cn_clock_wall_ms(), &live);
    int64_t slack = s->b->cfg->cairn_internal_compact_slack_records;
    if (!rc && end - start >= (int64_t)live + slack) {
        rc = write_checkpoint(s, p, part, &bb, live, end);
        if (rc)
            log_compacted(s, part, live, rc);
    }
    cn_batch_builder_fini(&bb);
}
