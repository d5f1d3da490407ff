/*
 * group_coord.c - consumer groups on the broker: __consumer_offsets, its
 * replay (at start, or per partition as its leadership comes and goes),
 * compaction, group metadata records, offset expiry and
 * the coordinator's timers.  See group_coord.h.
 *
 * The APIs are in h_group.c (membership), h_offset_commit.c,
 * h_offset_fetch.c and h_group_delete.c; they share group_int.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/say.h"
#include "group/group.h"
#include "group/offsets.h"
#include "node/group_coord.h"
#include "node/group_int.h"
#include "node/istore.h"
#include "proto/batch.h"
#include "proto/gen/msgs.h"
#include "proto/kerr.h"

/* ---- the topic ---------------------------------------------------------- */

static int32_t group_part(const struct cn_group_coord *gc, const char *id)
{
    return cn_istore_part_of(gc->store, (const uint8_t *)id, strlen(id));
}

struct cn_partition *cn_group_coord_partition(struct cn_broker *b,
                                              struct cn_bytes group_id)
{
    if (!b->gc || !b->gc->store)
        return NULL;
    int32_t part = cn_istore_part_of(b->gc->store, group_id.ptr,
                                     group_id.len > 0 ? (size_t)group_id.len
                                                      : 0);
    return part >= 0 ? cn_istore_partition(b->gc->store, part, true) : NULL;
}

bool cn_gc_serves(struct cn_broker *b, const struct cn_partition *p)
{
    struct cn_group_coord *gc = b->gc;
    if (!gc || !gc->loaded_epoch || p->index < 0 ||
        p->index >= cn_istore_nparts(gc->store))
        return false;
    int32_t at = gc->loaded_epoch[p->index];
    if (!b->cfg->cluster_mode)
        return at >= 0;
    return at >= 0 && cn_partition_led(b, p) && p->leader_epoch == at;
}

/* cn_gc_serves by partition number; false when the topic is not here. */
static bool serves_part(struct cn_group_coord *gc, int32_t part)
{
    struct cn_partition *p = cn_istore_partition(gc->store, part, false);
    return p && cn_gc_serves(gc->b, p);
}

int16_t cn_group_coord_check(struct cn_broker *b, struct cn_bytes group_id)
{
    if (!b->cfg->cluster_mode)
        return KAFKA_NONE;
    struct cn_partition *p = cn_group_coord_partition(b, group_id);
    if (!p)
        return KAFKA_COORDINATOR_NOT_AVAILABLE;
    /* Loading is synchronous (cn_group_coord_lead), so a led partition
     * not loaded at its epoch is one whose replay failed, or whose
     * leadership this broker has not published yet: NOT_COORDINATOR
     * rather than COORDINATOR_LOAD_IN_PROGRESS, the client asks again. */
    return cn_gc_serves(b, p) ? KAFKA_NONE : KAFKA_NOT_COORDINATOR;
}

char *cn_gc_cstr(struct cn_req *req, struct cn_bytes s)
{
    return cn_arena_strdup(&req->arena, s.len > 0 ? s : cn_bytes_str(""));
}

/* ---- durable writes ----------------------------------------------------- */

/* A caller's sync waiter, finished through the store. */
struct gc_write {
    struct cn_istore_wait iw; /* first */
    struct cn_broker *b;
    struct cn_sync_waiter *w;
};

static void gc_write_done(struct cn_istore_wait *iw, int err)
{
    struct gc_write *gw = (struct gc_write *)iw;
    struct cn_broker *b = gw->b;
    struct cn_sync_waiter *w = gw->w;
    w->err = err;
    free(gw);
    w->finish(b, w);
}

int cn_gc_write(struct cn_broker *b, struct cn_partition *p,
                const struct cn_bytes *keys, const struct cn_bytes *values,
                size_t n, int64_t producer_id, int16_t producer_epoch,
                struct cn_sync_waiter *w)
{
    struct gc_write *gw = b->gc ? calloc(1, sizeof *gw) : NULL;
    if (!gw)
        return CN_ENOMEM;
    gw->iw.done = gc_write_done;
    gw->b = b;
    gw->w = w;
    int rc = cn_istore_write(b->gc->store, p->index, keys, values, n,
                             producer_id, producer_epoch, &gw->iw);
    if (rc)
        free(gw);
    return rc;
}

struct cn_bytes cn_gc_arena_bytes(struct cn_req *req, const struct cn_wr *w)
{
    uint8_t *p = cn_arena_alloc(&req->arena, w->len ? w->len : 1);
    if (!p || w->err)
        return CN_BYTES_NULL;
    memcpy(p, w->buf, w->len);
    return cn_bytes_of(p, (int32_t)w->len);
}

/* ---- replay ------------------------------------------------------------- */

/* A group and a partition: cn_offsets_match_fn and the groups' match. */
struct on_part {
    struct cn_group_coord *gc;
    int32_t part;
};

static bool group_on_part(void *arg, const char *group)
{
    struct on_part *op = arg;
    return group_part(op->gc, group) == op->part;
}

static int load_record(void *ctx, int32_t part, struct cn_bytes key,
                       struct cn_bytes value, int64_t producer_id, bool txn)
{
    struct cn_group_coord *gc = ctx;
    (void)part;
    const uint8_t *val = cn_bytes_is_null(value) ? NULL : value.ptr;
    size_t vlen = val ? (size_t)value.len : 0;
    int rc = cn_offsets_load_record(gc->offsets, key.ptr, (size_t)key.len, val,
                                    vlen, producer_id, txn);
    if (rc == CN_OFFSETS_NOT_OFFSET)
        rc = cn_groups_load_record(gc->groups, key.ptr, (size_t)key.len, val,
                                   vlen, gc->load_now_ms);
    return rc;
}

static void load_marker(void *ctx, int32_t part, int64_t producer_id,
                        bool commit)
{
    struct cn_group_coord *gc = ctx;
    /* Only this partition's groups: the producer's offsets on another
     * partition wait for the marker there (an older transaction's marker
     * replayed here must not end a newer one's offsets elsewhere). */
    struct on_part op = {gc, part};
    cn_offsets_txn_complete_match(gc->offsets, producer_id, commit,
                                  group_on_part, &op);
}

static int load_all(struct cn_group_coord *gc)
{
    struct cn_istore_counts n = {0, 0};
    gc->load_now_ms = cn_clock_wall_ms();
    int64_t t0 = cn_clock_mono_ms();
    int rc = 0;
    for (int32_t i = 0; i < cn_istore_nparts(gc->store) && !rc; i++) {
        rc = cn_istore_replay(gc->store, i, &n);
        gc->loaded_epoch[i] = 0;
    }
    if (n.bad)
        CN_WARN("%s: %zu records could not be read and were skipped",
                CN_OFFSETS_TOPIC, n.bad);
    CN_INFO("loaded %zu records of %s in %lld ms: %zu groups with offsets",
            n.records, CN_OFFSETS_TOPIC, (long long)(cn_clock_mono_ms() - t0),
            cn_offsets_ngroups(gc->offsets));
    return rc;
}

/* ---- markers ------------------------------------------------------------ */

void cn_group_coord_marker(struct cn_broker *b, struct cn_partition *p,
                           int64_t producer_id, bool commit)
{
    if (!b->gc)
        return;
    /* With cairn.fsync.group.commit=false the data flush policy would
     * never sync it, yet the coordinators act on it. */
    cn_istore_sync(b->gc->store, p->index);
    /* Not loaded here: nothing of it is held (the replay at the next load
     * reads this marker). */
    if (!cn_gc_serves(b, p))
        return;
    struct on_part op = {b->gc, p->index};
    cn_offsets_txn_complete_match(b->gc->offsets, producer_id, commit,
                                  group_on_part, &op);
}

/* ---- keeping __consumer_offsets bounded ------------------------------- */

/* The policy: past the slack, and not again before another half slack of
 * records, whatever happens. */
static bool want_compact(void *ctx, int32_t part, int64_t start, int64_t end)
{
    struct cn_group_coord *gc = ctx;
    int64_t slack = gc->b->cfg->cairn_internal_compact_slack_records;
    /* The checkpoint is what memory holds of the partition: nothing while
     * it is not loaded, or not led, here. */
    if (!serves_part(gc, part))
        return false;
    if (end - start < slack || end < gc->next_check[part])
        return false;
    gc->next_check[part] = end + slack / 2;
    return true;
}

struct compact_ctx {
    struct cn_batch_builder *bb;
    const char *group;
    struct cn_wr key, value;
    int64_t now;
    size_t live;
};

static void compact_add(struct compact_ctx *cc)
{
    cn_batch_builder_add(cc->bb, cc->now,
                         cn_bytes_of(cc->key.buf, (int32_t)cc->key.len),
                         cn_bytes_of(cc->value.buf, (int32_t)cc->value.len),
                         NULL, 0);
    cc->live++;
}

static int compact_offset(void *arg, const char *topic, int32_t partition,
                          const struct cn_offset_value *v)
{
    struct compact_ctx *cc = arg;
    cn_wr_reset(&cc->key);
    cn_wr_reset(&cc->value);
    int rc = cn_offsets_record(&cc->key, &cc->value, cc->group, topic,
                               partition, v);
    if (!rc)
        compact_add(cc);
    return rc;
}

/*
 * The checkpoint: the group coordinator holds the newest value of every
 * key of the partition, each group's metadata and offsets.  Not while a
 * transaction holds offsets of a group of the partition: its pending
 * offsets live only in the log until the marker.
 */
static int checkpoint(void *ctx, int32_t part, struct cn_batch_builder *bb,
                      int64_t now_ms, size_t *live)
{
    struct cn_group_coord *gc = ctx;
    if (!serves_part(gc, part)) {
        *live = 0;
        return CN_EEXIST;
    }
    struct compact_ctx cc = {.bb = bb, .now = now_ms};
    cn_wr_init(&cc.key, 64);
    cn_wr_init(&cc.value, 256);
    int rc = 0;
    for (const struct cn_group *g = cn_groups_next(gc->groups, NULL); g && !rc;
         g = cn_groups_next(gc->groups, g)) {
        const char *id = cn_group_id(g);
        if (group_part(gc, id) != part)
            continue;
        if (cn_offsets_pending_count(gc->offsets, id) > 0) {
            rc = CN_EEXIST;
            break;
        }
        cn_wr_reset(&cc.key);
        cn_wr_reset(&cc.value);
        rc = cn_group_metadata_record(g, &cc.key, &cc.value);
        if (rc)
            break;
        compact_add(&cc);
        cc.group = id;
        rc = cn_offsets_foreach(gc->offsets, id, compact_offset, &cc);
    }
    cn_wr_fini(&cc.key);
    cn_wr_fini(&cc.value);
    *live = cc.live;
    return rc;
}

void cn_gc_maybe_compact(struct cn_broker *b, struct cn_partition *p)
{
    if (b->gc)
        cn_istore_maybe_compact(b->gc->store, p->index);
}

/* ---- group metadata records --------------------------------------------- */

struct store_write {
    struct cn_istore_wait iw; /* first */
    struct cn_broker *b;
    struct cn_partition *p; /* written to */
    uint64_t token;         /* a SyncGroup waits on it, or 0 */
    char group_id[];        /* when token is set */
};

/* What SyncGroup answers when the leader's assignment could not be made
 * durable: Kafka's appendGroupMetadataErrorToResponseError, for which a
 * failed local write is KAFKA_STORAGE_ERROR and a missing partition
 * UNKNOWN_TOPIC_OR_PARTITION. */
static int16_t store_error(bool no_partition)
{
    return no_partition ? KAFKA_COORDINATOR_NOT_AVAILABLE
                        : KAFKA_NOT_COORDINATOR;
}

int16_t cn_gc_write_kerr(int err)
{
    switch (err) {
    case 0: return KAFKA_NONE;
    case CN_ENOTLEADER: return KAFKA_NOT_COORDINATOR;
    default: return KAFKA_COORDINATOR_NOT_AVAILABLE;
    }
}

static void store_synced(struct cn_istore_wait *w, int err)
{
    struct store_write *sw = (struct store_write *)w;
    struct cn_broker *b = sw->b;
    struct cn_partition *p = sw->p;
    if (sw->token && b->gc)
        cn_groups_stored(b->gc->groups, sw->group_id, sw->token,
                         err == CN_EREPLICAS ? KAFKA_COORDINATOR_NOT_AVAILABLE
                         : err               ? store_error(false)
                                             : KAFKA_NONE,
                         cn_clock_wall_ms());
    free(w);
    cn_gc_maybe_compact(b, p);
}

/* Writes keys/values to p; store_synced runs once durable.  Token and
 * group_id: a SyncGroup waits for it.  False when it could not be
 * written. */
static bool store_append(struct cn_broker *b, struct cn_partition *p,
                         const struct cn_bytes *keys,
                         const struct cn_bytes *values, size_t n,
                         uint64_t token, const char *group_id)
{
    size_t idlen = token ? strlen(group_id) + 1 : 0;
    struct store_write *sw = calloc(1, sizeof *sw + idlen);
    if (!sw)
        return false;
    sw->iw.done = store_synced;
    sw->b = b;
    sw->p = p;
    sw->token = token;
    if (idlen)
        memcpy(sw->group_id, group_id, idlen);
    if (cn_istore_write(b->gc->store, p->index, keys, values, n, -1, -1,
                        &sw->iw) == 0)
        return true;
    free(sw);
    return false;
}

/* ops->store, store_sync and store_created: the group's generation (or
 * its removal, g NULL with id) is written so a restart brings the group
 * back.  With a token the state machine hears how the write ended
 * (cn_groups_stored, which may run before this returns: a write synced at
 * once): SyncGroup answers wait for it, a failed creation removes the
 * group.  The fail point, when given, stands for an append that fails. */
static void store_record(struct cn_broker *b, const char *group_id,
                         const struct cn_group *g, uint64_t token,
                         const char *failpoint)
{
    struct cn_partition *p = cn_group_coord_partition(b,
                                                      cn_bytes_str(group_id));
    if (!p) {
        if (token)
            cn_groups_stored(b->gc->groups, group_id, token, store_error(true),
                             cn_clock_wall_ms());
        return;
    }
    struct cn_wr kw, vw;
    cn_wr_init(&kw, 64);
    cn_wr_init(&vw, 256);
    int rc = g ? cn_group_metadata_record(g, &kw, &vw)
               : cn_group_tombstone_key(group_id, &kw);
    struct cn_bytes key = cn_bytes_of(kw.buf, (int32_t)kw.len);
    struct cn_bytes val = g ? cn_bytes_of(vw.buf, (int32_t)vw.len)
                            : CN_BYTES_NULL;
    bool written = !rc && !kw.err && !vw.err &&
                   !(failpoint && CN_FAILPOINT(failpoint)) &&
                   store_append(b, p, &key, &val, 1, token, group_id);
    cn_wr_fini(&kw);
    cn_wr_fini(&vw);
    if (!written && token)
        cn_groups_stored(b->gc->groups, group_id, token, store_error(false),
                         cn_clock_wall_ms());
}

static void on_store(void *arg, const struct cn_group *g)
{
    store_record(arg, cn_group_id(g), g, 0, NULL);
}

/* Tests: SyncGroup must answer with an error when the assignment's append
 * fails. */
static void on_store_sync(void *arg, const struct cn_group *g, uint64_t token)
{
    store_record(arg, cn_group_id(g), g, token, "group.assignment_write");
}

/* Tests: the group must go when its creation's append fails. */
static void on_store_created(void *arg, const struct cn_group *g,
                             uint64_t token)
{
    store_record(arg, cn_group_id(g), g, token, "group.create_write");
}

/* ---- timers ------------------------------------------------------------- */

static void on_group_timer(uv_timer_t *t)
{
    struct cn_broker *b = t->data;
    cn_groups_tick(b->gc->groups, cn_clock_wall_ms());
    cn_gc_rearm(b);
}

void cn_gc_rearm(struct cn_broker *b)
{
    struct cn_group_coord *gc = b->gc;
    if (!gc || !gc->timers_armed)
        return;
    int64_t due = cn_groups_next_deadline(gc->groups);
    if (due == INT64_MAX) {
        uv_timer_stop(&gc->timer);
        return;
    }
    int64_t wait = due - cn_clock_wall_ms();
    uv_timer_start(&gc->timer, on_group_timer, (uint64_t)(wait > 0 ? wait : 0),
                   0);
}

struct expire_ctx {
    struct cn_broker *b;
    struct cn_partition *p;
    const char *group;
    struct cn_bytes keys[64];
    size_t n;
};

static void flush_tombstones(struct expire_ctx *ec)
{
    if (ec->n == 0)
        return;
    struct cn_bytes vals[64];
    for (size_t i = 0; i < ec->n; i++)
        vals[i] = CN_BYTES_NULL;
    store_append(ec->b, ec->p, ec->keys, vals, ec->n, 0, NULL);
    for (size_t i = 0; i < ec->n; i++)
        free((void *)ec->keys[i].ptr);
    ec->n = 0;
}

static int expired_key(void *arg, const char *topic, int32_t partition,
                       const struct cn_offset_value *v)
{
    struct expire_ctx *ec = arg;
    (void)v;
    struct cn_wr kw;
    cn_wr_init(&kw, 64);
    if (cn_offsets_tombstone_key(&kw, ec->group, topic, partition) != 0 ||
        kw.err) {
        cn_wr_fini(&kw);
        return CN_ENOMEM;
    }
    /* The writer's buffer becomes the key; freed after the append. */
    ec->keys[ec->n++] = cn_bytes_of(kw.buf, (int32_t)kw.len);
    if (ec->n == 64)
        flush_tombstones(ec);
    return 0;
}

/* offsets.retention.minutes: offsets of groups without members expire
 * (Kafka 4's rule), and a group left with nothing is removed. */
static void on_retention_timer(uv_timer_t *t)
{
    struct cn_broker *b = t->data;
    struct cn_group_coord *gc = b->gc;
    int64_t now = cn_clock_wall_ms();
    int64_t retention = (int64_t)b->cfg->offsets_retention_minutes * 60000;
    const struct cn_group *g = cn_groups_next(gc->groups, NULL);
    while (g) {
        const struct cn_group *next = cn_groups_next(gc->groups, g);
        if (cn_group_state(g) == CN_GROUP_EMPTY) {
            const char *id = cn_group_id(g);
            struct expire_ctx ec = {b, NULL, id, {{0}}, 0};
            ec.p = cn_group_coord_partition(b, cn_bytes_str(id));
            if (ec.p && cn_gc_serves(b, ec.p)) {
                cn_offsets_expire(gc->offsets, id, now, retention, expired_key,
                                  &ec);
                flush_tombstones(&ec);
            }
        }
        g = next;
    }
}

/* ---- lifecycle ---------------------------------------------------------- */

/* A group known only by its offsets exists, Empty, as in Kafka; arg is
 * a struct on_part (part -1: every partition). */
static int touch_group(void *arg, const char *group, size_t ncommitted,
                       size_t npending)
{
    struct on_part *op = arg;
    (void)ncommitted;
    (void)npending;
    if (op->part >= 0 && !group_on_part(op, group))
        return 0;
    return cn_groups_touch(op->gc->groups, group, op->gc->load_now_ms);
}

/* Forgets what memory holds of part: its groups (waiting members get
 * NOT_COORDINATOR) and offsets. */
static void unload_part(struct cn_group_coord *gc, int32_t part)
{
    struct on_part op = {gc, part};
    size_t ng = cn_groups_unload(gc->groups, group_on_part, &op,
                                 KAFKA_NOT_COORDINATOR);
    size_t no = cn_offsets_unload(gc->offsets, group_on_part, &op);
    gc->loaded_epoch[part] = -1;
    gc->next_check[part] = 0;
    if (ng || no)
        CN_DEBUG("%s-%d: %zu groups and the offsets of %zu left memory",
                 CN_OFFSETS_TOPIC, part, ng, no);
}

void cn_group_coord_lead(struct cn_broker *b, int32_t part, bool leads,
                         int32_t epoch)
{
    struct cn_group_coord *gc = b->gc;
    if (!gc || !gc->timers_armed || !b->cfg->cluster_mode || part < 0 ||
        part >= cn_istore_nparts(gc->store))
        return;
    int32_t was = gc->loaded_epoch[part];
    if (leads && was >= 0) {
        /* KAFKA-15468: an epoch bump while this broker goes on leading
         * keeps the state (see group_coord.h). */
        if (was != epoch)
            CN_DEBUG("%s-%d: group coordinator goes on at epoch %d",
                     CN_OFFSETS_TOPIC, part, epoch);
        gc->loaded_epoch[part] = epoch;
        return;
    }
    /* Loading is synchronous, so no partition is ever half loaded when it
     * is lost (KAFKA-18137 cannot happen here).  When gained, anything a
     * write that finished after the last unload left is dropped too. */
    unload_part(gc, part);
    if (!leads) {
        if (was >= 0)
            CN_INFO("%s-%d: no longer its group coordinator", CN_OFFSETS_TOPIC,
                    part);
        cn_gc_rearm(b);
        return;
    }
    struct cn_istore_counts n = {0, 0};
    int64_t t0 = cn_clock_mono_ms();
    gc->load_now_ms = cn_clock_wall_ms();
    int rc = cn_istore_replay(gc->store, part, &n);
    struct on_part op = {gc, part};
    if (!rc)
        rc = cn_offsets_foreach_group(gc->offsets, touch_group, &op);
    if (rc) {
        /* Not served: its groups answer NOT_COORDINATOR; the next
         * leadership change tries again. */
        unload_part(gc, part);
        CN_ERROR("%s-%d: cannot load it (%s); not coordinating its groups",
                 CN_OFFSETS_TOPIC, part, cn_strerror(rc));
        cn_gc_rearm(b);
        return;
    }
    if (n.bad)
        CN_WARN("%s-%d: %zu records could not be read and were skipped",
                CN_OFFSETS_TOPIC, part, n.bad);
    gc->loaded_epoch[part] = epoch;
    CN_INFO("%s-%d: group coordinator at epoch %d (%zu records in %lld ms)",
            CN_OFFSETS_TOPIC, part, epoch, n.records,
            (long long)(cn_clock_mono_ms() - t0));
    cn_gc_rearm(b);
}

int cn_group_coord_start(struct cn_broker *b)
{
    struct cn_group_coord *gc = calloc(1, sizeof *gc);
    if (!gc)
        return CN_ENOMEM;
    b->gc = gc;
    struct cn_groups_config cfg;
    cn_groups_config_default(&cfg);
    cfg.min_session_timeout_ms = b->cfg->group_min_session_timeout_ms;
    cfg.max_session_timeout_ms = b->cfg->group_max_session_timeout_ms;
    cfg.initial_rebalance_delay_ms = b->cfg->group_initial_rebalance_delay_ms;
    cfg.max_size = b->cfg->group_max_size;
    struct cn_groups_ops ops = {
        .join_done = b->group_join_done,
        .sync_done = b->group_sync_done,
        .store = on_store,
        .store_sync = on_store_sync,
        .arg = b,
        .store_created = on_store_created,
    };
    gc->groups = cn_groups_new(&cfg, &ops);
    gc->offsets = cn_offsets_new();
    if (!gc->groups || !gc->offsets)
        return CN_ENOMEM;
    gc->b = b;
    static const struct cn_istore_ops store_ops = {
        .record = load_record,
        .marker = load_marker,
        .want_compact = want_compact,
        .checkpoint = checkpoint,
    };
    /* In cluster mode the controller makes the topic (publish.c creates
     * its local logs), asked at the first group request, and a partition
     * loads when its leadership comes here (cn_group_coord_lead). */
    int rc = cn_istore_open(b, CN_OFFSETS_TOPIC,
                            b->cfg->offsets_topic_num_partitions, &store_ops,
                            gc, !b->cfg->cluster_mode, &gc->store);
    if (rc)
        return rc;
    size_t np = (size_t)cn_istore_nparts(gc->store);
    gc->next_check = calloc(np, sizeof *gc->next_check);
    gc->loaded_epoch = malloc((np ? np : 1) * sizeof *gc->loaded_epoch);
    if (!gc->next_check || !gc->loaded_epoch)
        return CN_ENOMEM;
    for (size_t i = 0; i < np; i++)
        gc->loaded_epoch[i] = -1;
    if (!b->cfg->cluster_mode) {
        rc = load_all(gc);
        if (rc)
            return rc;
        struct on_part all = {gc, -1};
        rc = cn_offsets_foreach_group(gc->offsets, touch_group, &all);
        if (rc)
            return rc;
    }
    uv_timer_init(b->loop, &gc->timer);
    gc->timer.data = b;
    uv_timer_init(b->loop, &gc->retention_timer);
    gc->retention_timer.data = b;
    uint64_t every = (uint64_t)b->cfg->offsets_retention_check_interval_ms;
    uv_timer_start(&gc->retention_timer, on_retention_timer, every, every);
    gc->timers_armed = true;
    cn_gc_rearm(b);
    return 0;
}

void cn_group_coord_stop(struct cn_broker *b)
{
    struct cn_group_coord *gc = b->gc;
    if (!gc)
        return;
    if (gc->groups)
        cn_groups_shutdown(gc->groups);
    if (!gc->timers_armed)
        return;
    uv_timer_stop(&gc->timer);
    uv_close((uv_handle_t *)&gc->timer, NULL);
    uv_timer_stop(&gc->retention_timer);
    uv_close((uv_handle_t *)&gc->retention_timer, NULL);
    gc->timers_armed = false;
}

void cn_group_coord_free(struct cn_broker *b)
{
    struct cn_group_coord *gc = b->gc;
    if (!gc)
        return;
    cn_groups_free(gc->groups);
    cn_offsets_free(gc->offsets);
    cn_istore_free(gc->store);
    free(gc->next_check);
    free(gc->loaded_epoch);
    free(gc);
    b->gc = NULL;
}
