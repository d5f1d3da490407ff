/*
 * group_coord.c - consumer groups on the broker: __consumer_offsets, its
 * replay at start, and the offset APIs.  See group_coord.h.
 *
 * The membership APIs (JoinGroup ...) are in h_group.c; both share the
 * state declared in group_int.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/say.h"
#include "group/group.h"
#include "group/offsets.h"
#include "group_coord.h"
#include "group_int.h"
#include "handlers.h"
#include "proto/batch.h"
#include "proto/gen/msgs.h"
#include "proto/kerr.h"
#include "txn/txn_state.h"
#include "txn_coord.h"

/* Kafka's offset.metadata.max.bytes default. */
#define OFFSET_METADATA_MAX_BYTES 4096

/* ---- the topic ------------------------------------------------------------- */

static struct cn_topic *offsets_topic(struct cn_broker *b, bool create)
{
    struct cn_bytes name = cn_bytes_str(CN_OFFSETS_TOPIC);
    struct cn_topic *t = cn_topic_find(b, name);
    if (t || !create)
        return t;
    struct cn_topic_config tc;
    cn_topic_config_init_defaults(&tc, b->cfg);
    char msg[256];
    cn_topic_config_set(&tc, "cleanup.policy", "compact", msg, sizeof msg);
    cn_topic_config_set(&tc, "segment.bytes", "104857600", msg, sizeof msg);
    /* Offsets leave by tombstone (expiry, deletion), never by age. */
    cn_topic_config_set(&tc, "retention.ms", "-1", msg, sizeof msg);
    cn_topic_config_set(&tc, "retention.bytes", "-1", msg, sizeof msg);
    int16_t kerr = cn_topic_create(b, name,
                                   b->cfg->offsets_topic_num_partitions, &tc,
                                   &t, msg, sizeof msg);
    if (kerr) {
        CN_ERROR("cannot create %s: %s", CN_OFFSETS_TOPIC, msg);
        return NULL;
    }
    return t;
}

struct cn_partition *cn_group_coord_partition(struct cn_broker *b,
                                              struct cn_bytes group_id)
{
    struct cn_topic *t = offsets_topic(b, true);
    if (!t)
        return NULL;
    int32_t part = cn_txn_partition_for(
        group_id.len > 0 ? group_id.ptr : (const uint8_t *)"",
        group_id.len > 0 ? (size_t)group_id.len : 0, t->partition_count);
    return part >= 0 ? t->partitions[part] : NULL;
}

char *cn_gc_cstr(struct cn_req *req, struct cn_bytes s)
{
    size_t n = s.len > 0 ? (size_t)s.len : 0;
    char *out = cn_arena_alloc(&req->arena, n + 1);
    if (!out)
        return NULL;
    if (n)
        memcpy(out, s.ptr, n);
    out[n] = '\0';
    return out;
}

/* ---- durable writes ----------------------------------------------------- */

/*
 * Appends records (key/value pairs; a value with len -1 is a tombstone) to
 * p as one batch; w->finish runs once durable.  producer_id >= 0 makes it
 * a transactional batch of that producer.  Returns 0 or an error (w not
 * called).
 */
int cn_gc_write(struct cn_broker *b, struct cn_partition *p,
                const struct cn_bytes *keys, const struct cn_bytes *values,
                size_t n, int64_t producer_id, int16_t producer_epoch,
                struct cn_sync_waiter *w)
{
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
    if (!rc)
        rc = cn_sync_append_internal(b, p, batch.buf, batch.len, w);
    cn_wr_fini(&batch);
    if (rc)
        CN_ERROR("cannot append to %s-%d: %s", CN_OFFSETS_TOPIC, p->index,
                 cn_strerror(rc));
    return rc;
}

/* Copies a finished writer's bytes into the request's arena. */
static struct cn_bytes arena_bytes(struct cn_req *req, const struct cn_wr *w)
{
    uint8_t *p = cn_arena_alloc(&req->arena, w->len ? w->len : 1);
    if (!p || w->err)
        return CN_BYTES_NULL;
    memcpy(p, w->buf, w->len);
    return cn_bytes_of(p, (int32_t)w->len);
}

/* ---- replay at start ------------------------------------------------------ */

struct load_ctx {
    struct cn_group_coord *gc;
    struct cn_wr scratch;
    int64_t now;
    size_t records, bad;
};

static int load_batch(void *arg, const uint8_t *batch, size_t len,
                      const struct cn_batch_hdr *hdr)
{
    struct load_ctx *lc = arg;
    if (cn_batch_is_control(hdr)) {
        int type;
        int32_t coord_epoch;
        if (hdr->producer_id >= 0 &&
            cn_batch_marker(batch, len, &type, &coord_epoch) == 0)
            cn_offsets_txn_complete(lc->gc->offsets, hdr->producer_id,
                                    type == CN_CONTROL_COMMIT);
        return 0;
    }
    struct cn_record_iter it;
    struct cn_batch_hdr h;
    if (cn_batch_records(batch, len, 0, &lc->scratch, &h, &it) != 0) {
        lc->bad++;
        return 0;
    }
    bool txn = cn_batch_is_transactional(&h);
    struct cn_record rec;
    while (cn_record_iter_next(&it, &rec) == 1) {
        if (cn_bytes_is_null(rec.key))
            continue;
        const uint8_t *val = cn_bytes_is_null(rec.value) ? NULL
                                                         : rec.value.ptr;
        size_t vlen = val ? (size_t)rec.value.len : 0;
        int rc = cn_offsets_load_record(lc->gc->offsets, rec.key.ptr,
                                        (size_t)rec.key.len, val, vlen,
                                        txn ? h.producer_id : -1, txn);
        if (rc == CN_OFFSETS_NOT_OFFSET)
            rc = cn_groups_load_record(lc->gc->groups, rec.key.ptr,
                                       (size_t)rec.key.len, val, vlen,
                                       lc->now);
        if (rc == CN_ENOMEM)
            return rc;
        if (rc)
            lc->bad++;
        else
            lc->records++;
    }
    return 0;
}

static int load_all(struct cn_broker *b, struct cn_topic *t)
{
    struct load_ctx lc = {b->gc, {0}, cn_clock_wall_ms(), 0, 0};
    cn_wr_init(&lc.scratch, 0);
    int64_t t0 = cn_clock_mono_ms();
    int rc = 0;
    for (int32_t i = 0; i < t->partition_count && !rc; i++) {
        struct cn_partition *p = t->partitions[i];
        rc = cn_partition_scan(p, cn_log_start_offset(p->log), load_batch,
                               &lc);
    }
    cn_wr_fini(&lc.scratch);
    if (lc.bad)
        CN_WARN("%s: %zu records could not be read and were skipped",
                CN_OFFSETS_TOPIC, lc.bad);
    CN_INFO("loaded %zu records of %s in %lld ms: %zu groups with offsets",
            lc.records, CN_OFFSETS_TOPIC,
            (long long)(cn_clock_mono_ms() - t0),
            cn_offsets_ngroups(b->gc->offsets));
    return rc;
}

/* ---- markers -------------------------------------------------------------- */

void cn_group_coord_marker(struct cn_broker *b, struct cn_partition *p,
                           int64_t producer_id, bool commit)
{
    (void)p;
    if (b->gc)
        cn_offsets_txn_complete(b->gc->offsets, producer_id, commit);
}

/* ---- keeping __consumer_offsets bounded ------------------------------- */

struct compact_ctx {
    struct cn_batch_builder bb;
    const char *group;
    struct cn_wr key, value;
    int64_t now;
    size_t live;
};

static int compact_offset(void *arg, const char *topic, int32_t partition,
                          const struct cn_offset_value *v)
{
    struct compact_ctx *cc = arg;
    cn_wr_reset(&cc->key);
    cn_wr_reset(&cc->value);
    int rc = cn_offsets_record(&cc->key, &cc->value, cc->group, topic,
                               partition, v);
    if (rc)
        return rc;
    cn_batch_builder_add(&cc->bb, cc->now,
                         cn_bytes_of(cc->key.buf, (int32_t)cc->key.len),
                         cn_bytes_of(cc->value.buf, (int32_t)cc->value.len),
                         NULL, 0);
    cc->live++;
    return 0;
}

/*
 * Compaction by checkpoint, as for the transaction log: the group
 * coordinator holds the newest value of every key of the partition, so it
 * appends them all (each group's metadata and offsets) in one batch,
 * syncs it, and moves the log start to it.  Skipped while anything of the
 * partition is not yet durable and applied, or a transaction is open on
 * it (its pending offsets live only in the log until the marker).
 */
static void maybe_compact(struct cn_broker *b, struct cn_partition *p)
{
    struct cn_group_coord *gc = b->gc;
    if (!gc || b->stopping || p->index >= gc->nparts)
        return;
    int64_t end = cn_log_end_offset(p->log);
    int64_t start = cn_log_start_offset(p->log);
    int64_t slack = b->cfg->cairn_internal_compact_slack_records;
    if (end - start < slack || end < gc->next_check[p->index])
        return;
    /* Not again before another half slack of records, whatever happens. */
    gc->next_check[p->index] = end + slack / 2;
    if (cn_log_synced_offset(p->log) < end ||
        cn_pstate_open_count(p->pstate) > 0)
        return;
    struct compact_ctx cc;
    struct cn_batch_params bp = CN_BATCH_PARAMS_INIT;
    cn_batch_builder_init(&cc.bb, &bp);
    cn_wr_init(&cc.key, 64);
    cn_wr_init(&cc.value, 256);
    cc.now = cn_clock_wall_ms();
    cc.live = 0;
    int rc = 0;
    for (const struct cn_group *g = cn_groups_next(gc->groups, NULL);
         g && !rc; g = cn_groups_next(gc->groups, g)) {
        const char *id = cn_group_id(g);
        struct cn_partition *gp = cn_group_coord_partition(b,
                                                           cn_bytes_str(id));
        if (gp != p)
            continue;
        if (cn_offsets_pending_count(gc->offsets, id) > 0) {
            rc = CN_EEXIST; /* a transaction holds offsets: not now */
            break;
        }
        cn_wr_reset(&cc.key);
        cn_wr_reset(&cc.value);
        rc = cn_group_metadata_record(g, &cc.key, &cc.value);
        if (rc)
            break;
        cn_batch_builder_add(&cc.bb, cc.now,
                             cn_bytes_of(cc.key.buf, (int32_t)cc.key.len),
                             cn_bytes_of(cc.value.buf, (int32_t)cc.value.len),
                             NULL, 0);
        cc.live++;
        cc.group = id;
        rc = cn_offsets_foreach(gc->offsets, id, compact_offset, &cc);
    }
    if (!rc && end - start >= (int64_t)cc.live + slack) {
        struct cn_wr batch;
        cn_wr_init(&batch, 4096);
        if (cc.bb.count > 0) {
            rc = cn_batch_builder_finish(&cc.bb, &batch);
            if (!rc)
                rc = cn_sync_checkpoint(b, p, batch.buf, batch.len);
        } else {
            rc = cn_log_delete_records(p->log, end);
            if (!rc)
                cn_partition_after_retention(p);
        }
        cn_wr_fini(&batch);
        if (rc)
            CN_WARN("compacting %s-%d failed: %s", CN_OFFSETS_TOPIC,
                    p->index, cn_strerror(rc));
        else
            CN_INFO("%s-%d compacted: %zu records kept, log starts at %lld",
                    CN_OFFSETS_TOPIC, p->index, cc.live,
                    (long long)cn_log_start_offset(p->log));
    }
    cn_batch_builder_fini(&cc.bb);
    cn_wr_fini(&cc.key);
    cn_wr_fini(&cc.value);
}

/* ---- OffsetCommit --------------------------------------------------------- */

struct commit_state {
    struct cn_sync_waiter waiter; /* first: container_of by cast */
    struct cn_broker *b;
    struct cn_req_header h;
    struct cn_offset_commit_request rq;
    struct cn_offset_commit_response rs;
    struct cn_partition *gp;
    const char *group;
    int64_t now;
};

static void answer_commit(struct cn_req *req, const struct cn_req_header *h,
                          struct cn_offset_commit_response *rs)
{
    cn_resp_begin(req, h);
    cn_offset_commit_response_encode(&req->resp, h->api_version, rs);
    cn_req_done(req);
}

static struct cn_offset_value commit_value(struct cn_bytes metadata,
                                           int64_t offset, int32_t epoch,
                                           int64_t now)
{
    struct cn_offset_value v = {
        .offset = offset,
        .leader_epoch = epoch,
        .metadata = cn_bytes_is_null(metadata) ? cn_bytes_str("") : metadata,
        .commit_timestamp_ms = now,
        .expire_timestamp_ms = -1,
    };
    return v;
}

static void commit_synced(struct cn_broker *b, struct cn_sync_waiter *w)
{
    struct commit_state *cs = (struct commit_state *)w;
    int16_t fail = b->log_dir_offline ? KAFKA_COORDINATOR_NOT_AVAILABLE
                                      : KAFKA_NONE;
    for (int32_t i = 0; i < cs->rs.topics_len; i++) {
        const struct cn_offset_commit_request_offset_commit_request_topic *qt =
            &cs->rq.topics[i];
        char *topic = cn_gc_cstr(cs->waiter.req, qt->name);
        for (int32_t j = 0; j < cs->rs.topics[i].partitions_len; j++) {
            struct cn_offset_commit_response_offset_commit_response_partition
                *rp = &cs->rs.topics[i].partitions[j];
            if (rp->error_code)
                continue;
            if (fail || !topic) {
                rp->error_code = KAFKA_COORDINATOR_NOT_AVAILABLE;
                continue;
            }
            const struct
                cn_offset_commit_request_offset_commit_request_partition *qp =
                    &qt->partitions[j];
            struct cn_offset_value v =
                commit_value(qp->committed_metadata, qp->committed_offset,
                             qp->committed_leader_epoch, cs->now);
            if (cn_offsets_put(b->gc->offsets, cs->group, topic,
                               qp->partition_index, &v) != 0)
                rp->error_code = KAFKA_COORDINATOR_NOT_AVAILABLE;
        }
    }
    answer_commit(cs->waiter.req, &cs->h, &cs->rs);
    if (cs->gp)
        maybe_compact(b, cs->gp);
}

/* Sets every partition's error that is still NONE. */
static void commit_fail_all(struct cn_offset_commit_response *rs,
                            int16_t err)
{
    for (int32_t i = 0; i < rs->topics_len; i++)
        for (int32_t j = 0; j < rs->topics[i].partitions_len; j++)
            if (!rs->topics[i].partitions[j].error_code)
                rs->topics[i].partitions[j].error_code = err;
}

void cn_h_offset_commit(struct cn_broker *b, struct cn_req *req,
                        const struct cn_req_header *h, struct cn_rd *body)
{
    struct commit_state *cs = cn_arena_calloc(&req->arena, 1, sizeof *cs);
    if (!cs) {
        cn_req_bad(req, h, CN_ENOMEM);
        return;
    }
    int err = cn_offset_commit_request_decode(body, &req->arena,
                                              h->api_version, &cs->rq);
    if (err) {
        cn_req_bad(req, h, err);
        return;
    }
    req->handler_state = cs;
    cs->b = b;
    cs->h = *h;
    cs->now = cn_clock_wall_ms();
    cs->waiter.req = req;
    cs->waiter.finish = commit_synced;
    struct cn_offset_commit_request *rq = &cs->rq;
    struct cn_offset_commit_response *rs = &cs->rs;
    cn_offset_commit_response_init(rs);
    int32_t nt = rq->topics_len > 0 ? rq->topics_len : 0;
    rs->topics = cn_arena_calloc(&req->arena, (size_t)nt + 1,
                                 sizeof *rs->topics);
    size_t nrec = 0;
    if (!rs->topics) {
        cn_req_bad(req, h, CN_ENOMEM);
        return;
    }
    rs->topics_len = nt;
    for (int32_t i = 0; i < nt; i++) {
        const struct cn_offset_commit_request_offset_commit_request_topic *qt =
            &rq->topics[i];
        struct cn_offset_commit_response_offset_commit_response_topic *rt =
            &rs->topics[i];
        rt->name = qt->name;
        int32_t np = qt->partitions_len > 0 ? qt->partitions_len : 0;
        rt->partitions = cn_arena_calloc(&req->arena, (size_t)np + 1,
                                         sizeof *rt->partitions);
        if (!rt->partitions) {
            cn_req_bad(req, h, CN_ENOMEM);
            return;
        }
        rt->partitions_len = np;
        for (int32_t j = 0; j < np; j++) {
            const struct
                cn_offset_commit_request_offset_commit_request_partition *qp =
                    &qt->partitions[j];
            rt->partitions[j].partition_index = qp->partition_index;
            if (!cn_partition_find(b, qt->name, qp->partition_index))
                rt->partitions[j].error_code =
                    KAFKA_UNKNOWN_TOPIC_OR_PARTITION;
            else if (qp->committed_metadata.len > OFFSET_METADATA_MAX_BYTES)
                rt->partitions[j].error_code =
                    KAFKA_OFFSET_METADATA_TOO_LARGE;
            else
                nrec++;
        }
    }
    cs->group = cn_gc_cstr(req, rq->group_id);
    int16_t kerr = KAFKA_NONE;
    struct cn_partition *gp = NULL;
    if (!cs->group || cs->group[0] == '\0')
        kerr = KAFKA_INVALID_GROUP_ID;
    else if (!(gp = cs->gp = cn_group_coord_partition(b, rq->group_id)))
        kerr = KAFKA_COORDINATOR_NOT_AVAILABLE;
    else
        kerr = cn_groups_check_commit(
            b->gc->groups, cs->group, rq->generation_id_or_member_epoch,
            cn_gc_cstr(req, rq->member_id),
            cn_bytes_is_null(rq->group_instance_id)
                ? NULL
                : cn_gc_cstr(req, rq->group_instance_id),
            false, cs->now);
    cn_gc_rearm(b);
    if (kerr == KAFKA_ILLEGAL_GENERATION && h->api_version >= 9 &&
        !cn_groups_exists(b->gc->groups, cs->group))
        kerr = KAFKA_GROUP_ID_NOT_FOUND;
    if (kerr) {
        commit_fail_all(rs, kerr);
        answer_commit(req, h, rs);
        return;
    }
    if (nrec == 0) {
        answer_commit(req, h, rs);
        return;
    }
    struct cn_bytes *keys = cn_arena_calloc(&req->arena, nrec, sizeof *keys);
    struct cn_bytes *vals = cn_arena_calloc(&req->arena, nrec, sizeof *vals);
    if (!keys || !vals) {
        cn_req_bad(req, h, CN_ENOMEM);
        return;
    }
    size_t k = 0;
    struct cn_wr kw, vw;
    cn_wr_init(&kw, 64);
    cn_wr_init(&vw, 64);
    for (int32_t i = 0; i < nt; i++) {
        const struct cn_offset_commit_request_offset_commit_request_topic *qt =
            &rq->topics[i];
        char *topic = cn_gc_cstr(req, qt->name);
        for (int32_t j = 0; j < rs->topics[i].partitions_len; j++) {
            if (rs->topics[i].partitions[j].error_code)
                continue;
            const struct
                cn_offset_commit_request_offset_commit_request_partition *qp =
                    &qt->partitions[j];
            struct cn_offset_value v =
                commit_value(qp->committed_metadata, qp->committed_offset,
                             qp->committed_leader_epoch, cs->now);
            cn_wr_reset(&kw);
            cn_wr_reset(&vw);
            if (!topic || cn_offsets_record(&kw, &vw, cs->group, topic,
                                            qp->partition_index, &v) != 0) {
                rs->topics[i].partitions[j].error_code =
                    KAFKA_INVALID_REQUEST;
                continue;
            }
            keys[k] = arena_bytes(req, &kw);
            vals[k] = arena_bytes(req, &vw);
            k++;
        }
    }
    cn_wr_fini(&kw);
    cn_wr_fini(&vw);
    if (k == 0 || cn_gc_write(b, gp, keys, vals, k, -1, -1, &cs->waiter)) {
        commit_fail_all(rs, k ? KAFKA_COORDINATOR_NOT_AVAILABLE : KAFKA_NONE);
        answer_commit(req, h, rs);
    }
}

/* ---- TxnOffsetCommit ---------------------------------------------------- */

struct txn_commit_state {
    struct cn_sync_waiter waiter; /* first */
    struct cn_broker *b;
    struct cn_req_header h;
    struct cn_txn_offset_commit_request rq;
    struct cn_txn_offset_commit_response rs;
    struct cn_partition *gp;
    const char *group;
    int64_t now;
};

static void answer_txn_commit(struct cn_req *req,
                              const struct cn_req_header *h,
                              struct cn_txn_offset_commit_response *rs)
{
    cn_resp_begin(req, h);
    cn_txn_offset_commit_response_encode(&req->resp, h->api_version, rs);
    cn_req_done(req);
}

static void txn_commit_fail_all(struct cn_txn_offset_commit_response *rs,
                                int16_t err)
{
    for (int32_t i = 0; i < rs->topics_len; i++)
        for (int32_t j = 0; j < rs->topics[i].partitions_len; j++)
            if (!rs->topics[i].partitions[j].error_code)
                rs->topics[i].partitions[j].error_code = err;
}

static void txn_commit_synced(struct cn_broker *b, struct cn_sync_waiter *w)
{
    struct txn_commit_state *ts = (struct txn_commit_state *)w;
    struct cn_req *req = w->req;
    /* The transaction may have ended (a timeout abort's marker) while the
     * records were being synced: its marker has then passed, and pending
     * offsets would wait for a marker that never comes. */
    struct cn_pentry_info pe;
    bool open = cn_pstate_get(ts->gp->pstate, ts->rq.producer_id, &pe) &&
                pe.txn_first_offset >= 0;
    if (b->log_dir_offline) {
        txn_commit_fail_all(&ts->rs, KAFKA_COORDINATOR_NOT_AVAILABLE);
    } else if (!open) {
        txn_commit_fail_all(&ts->rs, KAFKA_INVALID_TXN_STATE);
    } else {
        for (int32_t i = 0; i < ts->rs.topics_len; i++) {
            const struct
                cn_txn_offset_commit_request_txn_offset_commit_request_topic
                    *qt = &ts->rq.topics[i];
            char *topic = cn_gc_cstr(req, qt->name);
            for (int32_t j = 0; j < ts->rs.topics[i].partitions_len; j++) {
                struct
                    cn_txn_offset_commit_response_txn_offset_commit_response_partition
                        *rp = &ts->rs.topics[i].partitions[j];
                if (rp->error_code)
                    continue;
                const struct
                    cn_txn_offset_commit_request_txn_offset_commit_request_partition
                        *qp = &qt->partitions[j];
                struct cn_offset_value v = commit_value(
                    qp->committed_metadata, qp->committed_offset,
                    qp->committed_leader_epoch, ts->now);
                if (!topic ||
                    cn_offsets_txn_put(b->gc->offsets, ts->group,
                                       ts->rq.producer_id,
                                       ts->rq.producer_epoch, topic,
                                       qp->partition_index, &v) != 0)
                    rp->error_code = KAFKA_COORDINATOR_NOT_AVAILABLE;
            }
        }
    }
    answer_txn_commit(req, &ts->h, &ts->rs);
    maybe_compact(b, ts->gp);
}

/* KIP-447: a producer that carries the consumer's group generation is
 * checked like a member; one without (generation -1, no member id, as
 * older clients send) is trusted to the transaction's own fencing. */
static int16_t txn_commit_member_check(struct cn_broker *b,
                                       struct cn_req *req,
                                       const struct txn_commit_state *ts)
{
    const struct cn_txn_offset_commit_request *rq = &ts->rq;
    if (rq->generation_id < 0 && rq->member_id.len <= 0)
        return KAFKA_NONE;
    return cn_groups_check_commit(
        b->gc->groups, ts->group, rq->generation_id,
        cn_gc_cstr(req, rq->member_id),
        cn_bytes_is_null(rq->group_instance_id)
            ? NULL
            : cn_gc_cstr(req, rq->group_instance_id),
        true, ts->now);
}

void cn_h_txn_offset_commit(struct cn_broker *b, struct cn_req *req,
                            const struct cn_req_header *h,
                            struct cn_rd *body)
{
    struct txn_commit_state *ts = cn_arena_calloc(&req->arena, 1,
                                                  sizeof *ts);
    if (!ts) {
        cn_req_bad(req, h, CN_ENOMEM);
        return;
    }
    int err = cn_txn_offset_commit_request_decode(body, &req->arena,
                                                  h->api_version, &ts->rq);
    if (err) {
        cn_req_bad(req, h, err);
        return;
    }
    req->handler_state = ts;
    ts->b = b;
    ts->h = *h;
    ts->now = cn_clock_wall_ms();
    ts->waiter.req = req;
    ts->waiter.finish = txn_commit_synced;
    struct cn_txn_offset_commit_request *rq = &ts->rq;
    struct cn_txn_offset_commit_response *rs = &ts->rs;
    cn_txn_offset_commit_response_init(rs);
    int32_t nt = rq->topics_len > 0 ? rq->topics_len : 0;
    rs->topics = cn_arena_calloc(&req->arena, (size_t)nt + 1,
                                 sizeof *rs->topics);
    if (!rs->topics) {
        cn_req_bad(req, h, CN_ENOMEM);
        return;
    }
    rs->topics_len = nt;
    size_t nrec = 0;
    for (int32_t i = 0; i < nt; i++) {
        const struct cn_txn_offset_commit_request_txn_offset_commit_request_topic
            *qt = &rq->topics[i];
        struct cn_txn_offset_commit_response_txn_offset_commit_response_topic
            *rt = &rs->topics[i];
        rt->name = qt->name;
        int32_t np = qt->partitions_len > 0 ? qt->partitions_len : 0;
        rt->partitions = cn_arena_calloc(&req->arena, (size_t)np + 1,
                                         sizeof *rt->partitions);
        if (!rt->partitions) {
            cn_req_bad(req, h, CN_ENOMEM);
            return;
        }
        rt->partitions_len = np;
        for (int32_t j = 0; j < np; j++) {
            const struct
                cn_txn_offset_commit_request_txn_offset_commit_request_partition
                    *qp = &qt->partitions[j];
            rt->partitions[j].partition_index = qp->partition_index;
            if (!cn_partition_find(b, qt->name, qp->partition_index))
                rt->partitions[j].error_code =
                    KAFKA_UNKNOWN_TOPIC_OR_PARTITION;
            else if (qp->committed_metadata.len > OFFSET_METADATA_MAX_BYTES)
                rt->partitions[j].error_code =
                    KAFKA_OFFSET_METADATA_TOO_LARGE;
            else
                nrec++;
        }
    }
    ts->group = cn_gc_cstr(req, rq->group_id);
    int16_t kerr = KAFKA_NONE;
    if (!ts->group || ts->group[0] == '\0') {
        kerr = KAFKA_INVALID_GROUP_ID;
    } else if (!(ts->gp = cn_group_coord_partition(b, rq->group_id))) {
        kerr = KAFKA_COORDINATOR_NOT_AVAILABLE;
    } else {
        /* The group's partition must be in the producer's ongoing
         * transaction (AddOffsetsToTxn), or no marker would end these
         * offsets. */
        kerr = cn_txn_coord_verify(b, rq->producer_id, rq->producer_epoch,
                                   CN_OFFSETS_TOPIC, ts->gp->index);
        if (kerr == KAFKA_INVALID_PRODUCER_EPOCH && h->api_version >= 3)
            kerr = KAFKA_PRODUCER_FENCED;
        struct cn_pentry_info pe;
        if (!kerr && cn_pstate_get(ts->gp->pstate, rq->producer_id, &pe) &&
            pe.epoch > rq->producer_epoch)
            kerr = h->api_version >= 3 ? KAFKA_PRODUCER_FENCED
                                       : KAFKA_INVALID_PRODUCER_EPOCH;
        if (!kerr)
            kerr = txn_commit_member_check(b, req, ts);
    }
    if (kerr) {
        txn_commit_fail_all(rs, kerr);
        answer_txn_commit(req, h, rs);
        return;
    }
    if (nrec == 0) {
        answer_txn_commit(req, h, rs);
        return;
    }
    struct cn_bytes *keys = cn_arena_calloc(&req->arena, nrec, sizeof *keys);
    struct cn_bytes *vals = cn_arena_calloc(&req->arena, nrec, sizeof *vals);
    if (!keys || !vals) {
        cn_req_bad(req, h, CN_ENOMEM);
        return;
    }
    size_t k = 0;
    struct cn_wr kw, vw;
    cn_wr_init(&kw, 64);
    cn_wr_init(&vw, 64);
    for (int32_t i = 0; i < nt; i++) {
        const struct cn_txn_offset_commit_request_txn_offset_commit_request_topic
            *qt = &rq->topics[i];
        char *topic = cn_gc_cstr(req, qt->name);
        for (int32_t j = 0; j < rs->topics[i].partitions_len; j++) {
            if (rs->topics[i].partitions[j].error_code)
                continue;
            const struct
                cn_txn_offset_commit_request_txn_offset_commit_request_partition
                    *qp = &qt->partitions[j];
            struct cn_offset_value v =
                commit_value(qp->committed_metadata, qp->committed_offset,
                             qp->committed_leader_epoch, ts->now);
            cn_wr_reset(&kw);
            cn_wr_reset(&vw);
            if (!topic || cn_offsets_record(&kw, &vw, ts->group, topic,
                                            qp->partition_index, &v) != 0) {
                rs->topics[i].partitions[j].error_code =
                    KAFKA_INVALID_REQUEST;
                continue;
            }
            keys[k] = arena_bytes(req, &kw);
            vals[k] = arena_bytes(req, &vw);
            k++;
        }
    }
    cn_wr_fini(&kw);
    cn_wr_fini(&vw);
    if (k == 0 || cn_gc_write(b, ts->gp, keys, vals, k, rq->producer_id,
                              rq->producer_epoch, &ts->waiter)) {
        txn_commit_fail_all(rs,
                            k ? KAFKA_COORDINATOR_NOT_AVAILABLE : KAFKA_NONE);
        answer_txn_commit(req, h, rs);
    }
}

/* ---- OffsetFetch ------------------------------------------------------- */

/* One answered partition, before it is put in the version's shape. */
struct fetched {
    struct cn_bytes topic;
    int32_t partition;
    int64_t offset;
    int32_t leader_epoch;
    struct cn_bytes metadata;
    int16_t error;
};

struct fetched_list {
    struct cn_req *req;
    struct fetched *v;
    size_t n, cap;
};

static struct fetched *fetched_add(struct fetched_list *l)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        struct fetched *v = cn_arena_calloc(&l->req->arena, cap, sizeof *v);
        if (!v)
            return NULL;
        if (l->n)
            memcpy(v, l->v, l->n * sizeof *v);
        l->v = v;
        l->cap = cap;
    }
    return &l->v[l->n++];
}

struct fetch_all_ctx {
    struct fetched_list *l;
    const char *group;
    const struct cn_offsets *os;
    bool require_stable;
};

static void fetched_fill(struct fetched *f, const struct cn_offsets *os,
                         const char *group, const char *topic,
                         int32_t partition, bool require_stable)
{
    f->partition = partition;
    f->offset = -1;
    f->leader_epoch = -1;
    f->metadata = cn_bytes_str("");
    f->error = KAFKA_NONE;
    if (require_stable && cn_offsets_has_pending(os, group, topic, partition)) {
        f->error = KAFKA_UNSTABLE_OFFSET_COMMIT;
        return;
    }
    struct cn_offset_value v;
    if (cn_offsets_get(os, group, topic, partition, &v) == 0) {
        f->offset = v.offset;
        f->leader_epoch = v.leader_epoch;
        f->metadata = v.metadata; /* lives until the key changes: the
                                     response is encoded before that */
    }
}

static int fetch_all_visit(void *arg, const char *topic, int32_t partition,
                           const struct cn_offset_value *v)
{
    struct fetch_all_ctx *c = arg;
    (void)v;
    struct fetched *f = fetched_add(c->l);
    if (!f)
        return CN_ENOMEM;
    size_t n = strlen(topic);
    char *copy = cn_arena_alloc(&c->l->req->arena, n + 1);
    if (!copy)
        return CN_ENOMEM;
    memcpy(copy, topic, n + 1);
    f->topic = cn_bytes_of((const uint8_t *)copy, (int32_t)n);
    fetched_fill(f, c->os, c->group, copy, partition, c->require_stable);
    return 0;
}

/* Answers one group: the named partitions, or all with offsets when
 * topics is NULL (n < 0).  Topics and partitions come as parallel views so
 * both request shapes (v0-7, v8+) share this. */
static int fetch_group(struct cn_broker *b, struct fetched_list *l,
                       const char *group, bool require_stable,
                       const struct cn_bytes *topic_names,
                       int32_t *const *parts, const int32_t *nparts,
                       int32_t ntopics)
{
    const struct cn_offsets *os = b->gc->offsets;
    if (ntopics < 0) {
        struct fetch_all_ctx c = {l, group, os, require_stable};
        /* Keys with only pending offsets are listed too, so a
         * read_committed consumer learns they are unstable. */
        return cn_offsets_foreach_key(os, group, fetch_all_visit, &c);
    }
    for (int32_t i = 0; i < ntopics; i++) {
        char *topic = cn_gc_cstr(l->req, topic_names[i]);
        if (!topic)
            return CN_ENOMEM;
        for (int32_t j = 0; j < (nparts[i] > 0 ? nparts[i] : 0); j++) {
            struct fetched *f = fetched_add(l);
            if (!f)
                return CN_ENOMEM;
            f->topic = topic_names[i];
            fetched_fill(f, os, group, topic, parts[i][j], require_stable);
        }
    }
    return 0;
}

/* Groups the flat list by topic (in first-seen order) into the v0-7 or
 * v8+ response arrays.  The two shapes have the same fields. */
#define GROUP_BY_TOPIC(l, TOPIC_T, PART_T, out, out_len)                     \
    do {                                                                    \
        size_t nt_ = 0;                                                     \
        TOPIC_T *ts_ = cn_arena_calloc(&(l)->req->arena, (l)->n + 1,        \
                                       sizeof *ts_);                        \
        if (!ts_)                                                           \
            return CN_ENOMEM;                                               \
        for (size_t i_ = 0; i_ < (l)->n; i_++) {                            \
            size_t t_ = 0;                                                  \
            while (t_ < nt_ && !cn_bytes_eq(ts_[t_].name, (l)->v[i_].topic)) \
                t_++;                                                       \
            if (t_ == nt_) {                                                \
                ts_[nt_].name = (l)->v[i_].topic;                           \
                ts_[nt_].partitions = cn_arena_calloc(                      \
                    &(l)->req->arena, (l)->n, sizeof(PART_T));              \
                if (!ts_[nt_].partitions)                                   \
                    return CN_ENOMEM;                                       \
                nt_++;                                                      \
            }                                                               \
            PART_T *p_ = &ts_[t_].partitions[ts_[t_].partitions_len++];     \
            p_->partition_index = (l)->v[i_].partition;                     \
            p_->committed_offset = (l)->v[i_].offset;                       \
            p_->committed_leader_epoch = (l)->v[i_].leader_epoch;           \
            p_->metadata = (l)->v[i_].metadata;                             \
            p_->error_code = (l)->v[i_].error;                              \
        }                                                                   \
        (out) = ts_;                                                        \
        (out_len) = (int32_t)nt_;                                           \
    } while (0)

static int fetch_v0_7(struct cn_broker *b, struct cn_req *req,
                      const struct cn_offset_fetch_request *rq,
                      struct cn_offset_fetch_response *rs)
{
    struct fetched_list l = {req, NULL, 0, 0};
    char *group = cn_gc_cstr(req, rq->group_id);
    if (!group)
        return CN_ENOMEM;
    int32_t nt = rq->topics_len;
    struct cn_bytes *names = cn_arena_calloc(&req->arena,
                                             (size_t)(nt > 0 ? nt : 0) + 1,
                                             sizeof *names);
    int32_t **parts = cn_arena_calloc(&req->arena,
                                      (size_t)(nt > 0 ? nt : 0) + 1,
                                      sizeof *parts);
    int32_t *np = cn_arena_calloc(&req->arena, (size_t)(nt > 0 ? nt : 0) + 1,
                                  sizeof *np);
    if (!names || !parts || !np)
        return CN_ENOMEM;
    for (int32_t i = 0; i < nt; i++) {
        names[i] = rq->topics[i].name;
        parts[i] = rq->topics[i].partition_indexes;
        np[i] = rq->topics[i].partition_indexes_len;
    }
    int rc = fetch_group(b, &l, group, rq->require_stable, names, parts, np,
                         nt);
    if (rc)
        return rc;
    GROUP_BY_TOPIC(&l, struct cn_offset_fetch_response_offset_fetch_response_topic,
                   struct cn_offset_fetch_response_offset_fetch_response_partition,
                   rs->topics, rs->topics_len);
    return 0;
}

static int fetch_v8(struct cn_broker *b, struct cn_req *req,
                    const struct cn_offset_fetch_request *rq,
                    struct cn_offset_fetch_response *rs)
{
    int32_t ng = rq->groups_len > 0 ? rq->groups_len : 0;
    rs->groups = cn_arena_calloc(&req->arena, (size_t)ng + 1,
                                 sizeof *rs->groups);
    if (!rs->groups)
        return CN_ENOMEM;
    rs->groups_len = ng;
    for (int32_t g = 0; g < ng; g++) {
        const struct cn_offset_fetch_request_offset_fetch_request_group *qg =
            &rq->groups[g];
        struct cn_offset_fetch_response_offset_fetch_response_group *rg =
            &rs->groups[g];
        rg->group_id = qg->group_id;
        char *group = cn_gc_cstr(req, qg->group_id);
        if (!group)
            return CN_ENOMEM;
        int32_t nt = qg->topics_len;
        size_t cnt = (size_t)(nt > 0 ? nt : 0) + 1;
        struct cn_bytes *names = cn_arena_calloc(&req->arena, cnt,
                                                 sizeof *names);
        int32_t **parts = cn_arena_calloc(&req->arena, cnt, sizeof *parts);
        int32_t *np = cn_arena_calloc(&req->arena, cnt, sizeof *np);
        if (!names || !parts || !np)
            return CN_ENOMEM;
        for (int32_t i = 0; i < nt; i++) {
            names[i] = qg->topics[i].name;
            parts[i] = qg->topics[i].partition_indexes;
            np[i] = qg->topics[i].partition_indexes_len;
        }
        struct fetched_list l = {req, NULL, 0, 0};
        int rc = fetch_group(b, &l, group, rq->require_stable, names, parts,
                             np, nt);
        if (rc)
            return rc;
        GROUP_BY_TOPIC(&l,
                       struct cn_offset_fetch_response_offset_fetch_response_topics,
                       struct cn_offset_fetch_response_offset_fetch_response_partitions,
                       rg->topics, rg->topics_len);
    }
    return 0;
}

void cn_h_offset_fetch(struct cn_broker *b, struct cn_req *req,
                       const struct cn_req_header *h, struct cn_rd *body)
{
    struct cn_offset_fetch_request rq;
    int err = cn_offset_fetch_request_decode(body, &req->arena,
                                             h->api_version, &rq);
    if (err) {
        cn_req_bad(req, h, err);
        return;
    }
    struct cn_offset_fetch_response rs;
    cn_offset_fetch_response_init(&rs);
    rs.topics_len = 0;
    rs.groups_len = 0;
    int rc = h->api_version >= 8 ? fetch_v8(b, req, &rq, &rs)
                                 : fetch_v0_7(b, req, &rq, &rs);
    if (rc) {
        cn_req_bad(req, h, rc);
        return;
    }
    cn_resp_begin(req, h);
    cn_offset_fetch_response_encode(&req->resp, h->api_version, &rs);
    cn_req_done(req);
}

/* ---- group metadata records ---------------------------------------------- */

struct store_write {
    struct cn_sync_waiter waiter; /* first */
    struct cn_partition *p;       /* written to */
};

static void store_synced(struct cn_broker *b, struct cn_sync_waiter *w)
{
    struct cn_partition *p = ((struct store_write *)w)->p;
    free(w);
    maybe_compact(b, p);
}

/* ops->store: the group's generation (or its removal, g NULL with id) is
 * written so a restart brings the group back; nobody waits on it. */
static void store_record(struct cn_broker *b, const char *group_id,
                         const struct cn_group *g)
{
    struct cn_partition *p = cn_group_coord_partition(
        b, cn_bytes_str(group_id));
    if (!p)
        return;
    struct cn_wr kw, vw;
    cn_wr_init(&kw, 64);
    cn_wr_init(&vw, 256);
    int rc = g ? cn_group_metadata_record(g, &kw, &vw)
               : cn_group_tombstone_key(group_id, &kw);
    struct store_write *sw = rc ? NULL : calloc(1, sizeof *sw);
    if (sw) {
        sw->waiter.finish = store_synced;
        sw->p = p;
        struct cn_bytes key = cn_bytes_of(kw.buf, (int32_t)kw.len);
        struct cn_bytes val = g ? cn_bytes_of(vw.buf, (int32_t)vw.len)
                                : CN_BYTES_NULL;
        if (kw.err || vw.err ||
            cn_gc_write(b, p, &key, &val, 1, -1, -1, &sw->waiter) != 0)
            free(sw);
    }
    cn_wr_fini(&kw);
    cn_wr_fini(&vw);
}

static void on_store(void *arg, const struct cn_group *g)
{
    store_record(arg, cn_group_id(g), g);
}

/* ---- OffsetDelete ------------------------------------------------------ */

struct tombstones {
    struct cn_sync_waiter waiter; /* first */
    struct cn_req_header h;
    const char *group;
    void *rs;                     /* the response being built */
    bool whole_group;             /* DeleteGroups: all keys and metadata */
};

/* Does a Stable group's consumer subscription name the topic?  Kafka
 * refuses to delete offsets a live member is using. */
static bool group_subscribed(struct cn_req *req, const struct cn_group *g,
                             struct cn_bytes topic)
{
    if (strcmp(cn_group_protocol_type(g), "consumer") != 0)
        return false;
    for (size_t i = 0; i < cn_group_nmembers(g); i++) {
        struct cn_member_info mi;
        cn_group_member(g, i, &mi);
        if (!mi.metadata || mi.metadata_len < 2)
            continue;
        struct cn_rd rd;
        cn_rd_init(&rd, mi.metadata, mi.metadata_len);
        int16_t version = cn_rd_i16(&rd);
        struct cn_consumer_protocol_subscription sub;
        if (version < 0 ||
            cn_consumer_protocol_subscription_decode(
                &rd, &req->arena,
                version > CN_CONSUMER_PROTOCOL_SUBSCRIPTION_MAX_VERSION
                    ? CN_CONSUMER_PROTOCOL_SUBSCRIPTION_MAX_VERSION
                    : version,
                &sub) != 0)
            return true; /* cannot tell: keep the offsets */
        for (int32_t t = 0; t < sub.topics_len; t++)
            if (cn_bytes_eq(sub.topics[t], topic))
                return true;
    }
    return false;
}

static void offset_delete_synced(struct cn_broker *b,
                                 struct cn_sync_waiter *w)
{
    struct tombstones *tw = (struct tombstones *)w;
    struct cn_offset_delete_response *rs = tw->rs;
    struct cn_req *req = w->req;
    for (int32_t i = 0; i < rs->topics_len; i++) {
        char *topic = cn_gc_cstr(req, rs->topics[i].name);
        for (int32_t j = 0; j < rs->topics[i].partitions_len; j++) {
            struct cn_offset_delete_response_offset_delete_response_partition
                *rp = &rs->topics[i].partitions[j];
            if (rp->error_code)
                continue;
            if (b->log_dir_offline || !topic)
                rp->error_code = KAFKA_COORDINATOR_NOT_AVAILABLE;
            else
                cn_offsets_delete(b->gc->offsets, tw->group, topic,
                                  rp->partition_index);
        }
    }
    cn_resp_begin(req, &tw->h);
    cn_offset_delete_response_encode(&req->resp, tw->h.api_version, rs);
    cn_req_done(req);
}

void cn_h_offset_delete(struct cn_broker *b, struct cn_req *req,
                        const struct cn_req_header *h, struct cn_rd *body)
{
    struct cn_offset_delete_request rq;
    int err = cn_offset_delete_request_decode(body, &req->arena,
                                              h->api_version, &rq);
    if (err) {
        cn_req_bad(req, h, err);
        return;
    }
    struct tombstones *tw = cn_arena_calloc(&req->arena, 1, sizeof *tw);
    struct cn_offset_delete_response *rs =
        cn_arena_calloc(&req->arena, 1, sizeof *rs);
    int32_t nt = rq.topics_len > 0 ? rq.topics_len : 0;
    if (!tw || !rs) {
        cn_req_bad(req, h, CN_ENOMEM);
        return;
    }
    cn_offset_delete_response_init(rs);
    rs->topics_len = 0;
    tw->h = *h;
    tw->rs = rs;
    tw->waiter.req = req;
    tw->waiter.finish = offset_delete_synced;
    tw->group = cn_gc_cstr(req, rq.group_id);
    struct cn_partition *gp = NULL;
    const struct cn_group *g = NULL;
    if (!tw->group || !tw->group[0]) {
        rs->error_code = KAFKA_INVALID_GROUP_ID;
    } else if (!(gp = cn_group_coord_partition(b, rq.group_id))) {
        rs->error_code = KAFKA_COORDINATOR_NOT_AVAILABLE;
    } else if (!(g = cn_groups_find(b->gc->groups, tw->group)) &&
               cn_offsets_count(b->gc->offsets, tw->group) == 0) {
        rs->error_code = KAFKA_GROUP_ID_NOT_FOUND;
    } else if (g && cn_group_state(g) != CN_GROUP_EMPTY &&
               strcmp(cn_group_protocol_type(g), "consumer") != 0 &&
               cn_group_protocol_type(g)[0] != '\0') {
        rs->error_code = KAFKA_NON_EMPTY_GROUP;
    }
    size_t nkeys = 0;
    if (!rs->error_code) {
        rs->topics = cn_arena_calloc(&req->arena, (size_t)nt + 1,
                                     sizeof *rs->topics);
        if (!rs->topics) {
            cn_req_bad(req, h, CN_ENOMEM);
            return;
        }
        rs->topics_len = nt;
        for (int32_t i = 0; i < nt; i++) {
            const struct cn_offset_delete_request_offset_delete_request_topic
                *qt = &rq.topics[i];
            struct cn_offset_delete_response_offset_delete_response_topic *rt =
                &rs->topics[i];
            rt->name = qt->name;
            int32_t np = qt->partitions_len > 0 ? qt->partitions_len : 0;
            rt->partitions = cn_arena_calloc(&req->arena, (size_t)np + 1,
                                             sizeof *rt->partitions);
            if (!rt->partitions) {
                cn_req_bad(req, h, CN_ENOMEM);
                return;
            }
            rt->partitions_len = np;
            bool subscribed = g && cn_group_state(g) != CN_GROUP_EMPTY &&
                              group_subscribed(req, g, qt->name);
            for (int32_t j = 0; j < np; j++) {
                int32_t part = qt->partitions[j].partition_index;
                rt->partitions[j].partition_index = part;
                if (!cn_partition_find(b, qt->name, part))
                    rt->partitions[j].error_code =
                        KAFKA_UNKNOWN_TOPIC_OR_PARTITION;
                else if (subscribed)
                    rt->partitions[j].error_code =
                        KAFKA_GROUP_SUBSCRIBED_TO_TOPIC;
                else
                    nkeys++;
            }
        }
    }
    struct cn_bytes *keys = cn_arena_calloc(&req->arena, nkeys + 1,
                                            sizeof *keys);
    struct cn_bytes *vals = cn_arena_calloc(&req->arena, nkeys + 1,
                                            sizeof *vals);
    if (!keys || !vals) {
        cn_req_bad(req, h, CN_ENOMEM);
        return;
    }
    size_t k = 0;
    struct cn_wr kw;
    cn_wr_init(&kw, 64);
    for (int32_t i = 0; i < rs->topics_len; i++) {
        char *topic = cn_gc_cstr(req, rs->topics[i].name);
        for (int32_t j = 0; j < rs->topics[i].partitions_len; j++) {
            if (rs->topics[i].partitions[j].error_code)
                continue;
            cn_wr_reset(&kw);
            if (!topic ||
                cn_offsets_tombstone_key(&kw, tw->group, topic,
                                         rs->topics[i].partitions[j]
                                             .partition_index) != 0) {
                rs->topics[i].partitions[j].error_code =
                    KAFKA_INVALID_REQUEST;
                continue;
            }
            keys[k] = arena_bytes(req, &kw);
            vals[k] = CN_BYTES_NULL;
            k++;
        }
    }
    cn_wr_fini(&kw);
    if (k == 0 || cn_gc_write(b, gp, keys, vals, k, -1, -1, &tw->waiter)) {
        if (k)
            rs->error_code = KAFKA_COORDINATOR_NOT_AVAILABLE;
        cn_resp_begin(req, h);
        cn_offset_delete_response_encode(&req->resp, h->api_version, rs);
        cn_req_done(req);
    }
}

/* ---- DeleteGroups ------------------------------------------------------ */

/* Groups are deleted one write at a time, in request order: each group's
 * tombstones go to its own partition. */
struct delete_state {
    struct cn_sync_waiter waiter; /* first */
    struct cn_broker *b;
    struct cn_req_header h;
    struct cn_delete_groups_request rq;
    struct cn_delete_groups_response rs;
    int32_t next;                 /* group being deleted */
};

struct key_list {
    struct cn_req *req;
    const char *group;
    struct cn_bytes *keys;
    size_t n, cap;
    int err;
};

static int collect_key(void *arg, const char *topic, int32_t partition,
                       const struct cn_offset_value *v)
{
    struct key_list *kl = arg;
    (void)v;
    if (kl->n == kl->cap) {
        size_t cap = kl->cap ? kl->cap * 2 : 16;
        struct cn_bytes *keys = cn_arena_calloc(&kl->req->arena, cap + 1,
                                                sizeof *keys);
        if (!keys)
            return CN_ENOMEM;
        if (kl->n)
            memcpy(keys, kl->keys, kl->n * sizeof *keys);
        kl->keys = keys;
        kl->cap = cap;
    }
    struct cn_wr kw;
    cn_wr_init(&kw, 64);
    int rc = cn_offsets_tombstone_key(&kw, kl->group, topic, partition);
    if (!rc) {
        kl->keys[kl->n] = arena_bytes(kl->req, &kw);
        rc = cn_bytes_is_null(kl->keys[kl->n]) ? CN_ENOMEM : 0;
        kl->n += rc ? 0 : 1;
    }
    cn_wr_fini(&kw);
    return rc;
}

static void delete_next(struct cn_broker *b, struct delete_state *ds);

static void delete_synced(struct cn_broker *b, struct cn_sync_waiter *w)
{
    struct delete_state *ds = (struct delete_state *)w;
    struct cn_delete_groups_response_deletable_group_result *r =
        &ds->rs.results[ds->next];
    char *group = cn_gc_cstr(w->req, r->group_id);
    if (b->log_dir_offline || !group)
        r->error_code = KAFKA_COORDINATOR_NOT_AVAILABLE;
    else
        cn_offsets_delete_group(b->gc->offsets, group);
    ds->next++;
    delete_next(b, ds);
}

static void delete_next(struct cn_broker *b, struct delete_state *ds)
{
    struct cn_req *req = ds->waiter.req;
    for (; ds->next < ds->rs.results_len; ds->next++) {
        struct cn_delete_groups_response_deletable_group_result *r =
            &ds->rs.results[ds->next];
        char *group = cn_gc_cstr(req, r->group_id);
        struct cn_partition *gp = NULL;
        if (!group || !group[0]) {
            r->error_code = KAFKA_INVALID_GROUP_ID;
            continue;
        }
        if (!(gp = cn_group_coord_partition(b, r->group_id))) {
            r->error_code = KAFKA_COORDINATOR_NOT_AVAILABLE;
            continue;
        }
        bool had_offsets = cn_offsets_count(b->gc->offsets, group) > 0 ||
                           cn_offsets_pending_count(b->gc->offsets, group);
        r->error_code = cn_groups_delete(b->gc->groups, group);
        if (r->error_code == KAFKA_GROUP_ID_NOT_FOUND && had_offsets)
            r->error_code = KAFKA_NONE;
        if (r->error_code)
            continue;
        struct key_list kl = {req, group, NULL, 0, 0, 0};
        int rc = cn_offsets_foreach_key(b->gc->offsets, group, collect_key,
                                        &kl);
        struct cn_wr gk;
        cn_wr_init(&gk, 64);
        if (!rc)
            rc = cn_group_tombstone_key(group, &gk);
        if (!rc)
            rc = collect_key(&kl, "", 0, NULL); /* room for one more */
        if (!rc) {
            kl.keys[kl.n - 1] = arena_bytes(req, &gk);
            rc = cn_bytes_is_null(kl.keys[kl.n - 1]) ? CN_ENOMEM : 0;
        }
        cn_wr_fini(&gk);
        struct cn_bytes *vals = rc ? NULL
                                   : cn_arena_calloc(&req->arena, kl.n,
                                                     sizeof *vals);
        for (size_t i = 0; vals && i < kl.n; i++)
            vals[i] = CN_BYTES_NULL;
        if (!vals || cn_gc_write(b, gp, kl.keys, vals, kl.n, -1, -1,
                                 &ds->waiter) != 0) {
            r->error_code = KAFKA_COORDINATOR_NOT_AVAILABLE;
            continue;
        }
        return; /* delete_synced goes on with the next group */
    }
    cn_resp_begin(req, &ds->h);
    cn_delete_groups_response_encode(&req->resp, ds->h.api_version, &ds->rs);
    cn_req_done(req);
}

void cn_h_delete_groups(struct cn_broker *b, struct cn_req *req,
                        const struct cn_req_header *h, struct cn_rd *body)
{
    struct delete_state *ds = cn_arena_calloc(&req->arena, 1, sizeof *ds);
    if (!ds) {
        cn_req_bad(req, h, CN_ENOMEM);
        return;
    }
    int err = cn_delete_groups_request_decode(body, &req->arena,
                                              h->api_version, &ds->rq);
    if (err) {
        cn_req_bad(req, h, err);
        return;
    }
    req->handler_state = ds;
    ds->b = b;
    ds->h = *h;
    ds->waiter.req = req;
    ds->waiter.finish = delete_synced;
    cn_delete_groups_response_init(&ds->rs);
    int32_t n = ds->rq.groups_names_len > 0 ? ds->rq.groups_names_len : 0;
    ds->rs.results = cn_arena_calloc(&req->arena, (size_t)n + 1,
                                     sizeof *ds->rs.results);
    if (!ds->rs.results) {
        cn_req_bad(req, h, CN_ENOMEM);
        return;
    }
    ds->rs.results_len = n;
    for (int32_t i = 0; i < n; i++)
        ds->rs.results[i].group_id = ds->rq.groups_names[i];
    if (!b->gc) {
        for (int32_t i = 0; i < n; i++)
            ds->rs.results[i].error_code = KAFKA_COORDINATOR_NOT_AVAILABLE;
        ds->next = n;
    }
    delete_next(b, ds);
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
    uv_timer_start(&gc->timer, on_group_timer,
                   (uint64_t)(wait > 0 ? wait : 0), 0);
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
    struct store_write *sw = calloc(1, sizeof *sw);
    if (sw) {
        sw->waiter.finish = store_synced;
        sw->p = ec->p;
        if (cn_gc_write(ec->b, ec->p, ec->keys, vals, ec->n, -1, -1,
                        &sw->waiter) != 0)
            free(sw);
    }
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
            if (ec.p) {
                cn_offsets_expire(gc->offsets, id, now, retention,
                                  expired_key, &ec);
                flush_tombstones(&ec);
            }
        }
        g = next;
    }
}

/* ---- lifecycle ------------------------------------------------------------ */

static int touch_group(void *arg, const char *group, size_t ncommitted,
                       size_t npending)
{
    struct cn_broker *b = arg;
    (void)ncommitted;
    (void)npending;
    return cn_groups_touch(b->gc->groups, group, cn_clock_wall_ms());
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
        .join_done = cn_gc_join_done,
        .sync_done = cn_gc_sync_done,
        .store = on_store,
        .arg = b,
    };
    gc->groups = cn_groups_new(&cfg, &ops);
    gc->offsets = cn_offsets_new();
    if (!gc->groups || !gc->offsets)
        return CN_ENOMEM;
    struct cn_topic *t = offsets_topic(b, true);
    if (!t)
        return CN_ENOTFOUND;
    gc->nparts = t->partition_count;
    gc->next_check = calloc((size_t)gc->nparts, sizeof *gc->next_check);
    if (!gc->next_check)
        return CN_ENOMEM;
    int rc = load_all(b, t);
    if (rc)
        return rc;
    /* A group known only by its offsets exists, Empty, as in Kafka. */
    rc = cn_offsets_foreach_group(gc->offsets, touch_group, b);
    if (rc)
        return rc;
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
    free(gc->next_check);
    free(gc);
    b->gc = NULL;
}
