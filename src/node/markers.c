/*
 * markers.c - the local marker channel: markers to this broker's
 * partitions through the partition layer; see markers.h.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/err.h"
#include "base/say.h"
#include "node/group_coord.h"
#include "node/markers.h"
#include "node/replica.h"
#include "proto/batch.h"
#include "proto/kerr.h"
#include "txn/coord.h"

/* How long a marker waits for the ISR: Kafka's request.timeout.ms, which
 * a WriteTxnMarkers append with acks=-1 is held to. */
#define MARKER_REPLICA_TIMEOUT_MS 30000

/* One marker in flight until it is visible (and, in cluster mode, for a
 * caller that wants it, replicated). */
struct marker_op {
    struct cn_sync_waiter w; /* first */
    void (*done)(struct cn_broker *b, void *arg);
    void (*done_kerr)(struct cn_broker *b, void *arg, int16_t kerr);
    void *arg;
    int64_t end; /* the log end after the marker */
    int32_t index;
    char topic[]; /* where to look for the partition again */
};

static void marker_visible(struct cn_broker *b, struct cn_sync_waiter *w)
{
    struct marker_op *op = (struct marker_op *)w;
    void (*done)(struct cn_broker *, void *) = op->done;
    void (*done_kerr)(struct cn_broker *, void *, int16_t) = op->done_kerr;
    void *arg = op->arg;
    struct cn_partition *p = NULL;

    /* The LSO moved: read_committed fetches parked on it may go.  A sync
     * round wakes them itself. */
    if (!b->cfg->cairn_fsync_group_commit)
        b->data_visible(b);
    if (done_kerr && b->cfg->cluster_mode)
        p = cn_partition_find(b, cn_bytes_str(op->topic), op->index);
    int64_t end = op->end;
    free(op);
    if (done)
        done(b, arg);
    if (!done_kerr)
        return;
    if (!b->cfg->cluster_mode) {
        done_kerr(b, arg, KAFKA_NONE);
        return;
    }
    /* Kafka appends markers with acks=-1: the leader answers once the ISR
     * holds them, so a leader elected from it has them too.  A partition
     * gone meanwhile (its topic deleted) needs no marker. */
    if (!p) {
        done_kerr(b, arg, KAFKA_NONE);
        return;
    }
    if (cn_replica_await_hw(b, p, end, p->topic->config.min_insync_replicas,
                            MARKER_REPLICA_TIMEOUT_MS, done_kerr, arg) != 0)
        done_kerr(b, arg, KAFKA_NOT_ENOUGH_REPLICAS);
}

static int16_t marker_write(
    struct cn_broker *b, struct cn_partition *p, enum cn_part_origin origin,
    int64_t producer_id, int16_t producer_epoch, bool commit,
    int32_t coordinator_epoch, void (*done)(struct cn_broker *b, void *arg),
    void (*done_kerr)(struct cn_broker *b, void *arg, int16_t kerr), void *arg)
{
    /* The coordinator's own log takes no transactional data, so a marker
     * there could only confuse its replay. */
    if (p->topic->internal && strcmp(p->topic->name, CN_TXN_TOPIC) == 0)
        return KAFKA_INVALID_REQUEST;
    if (cn_partition_offline(b, p) || b->stopping)
        return KAFKA_KAFKA_STORAGE_ERROR;
    size_t tlen = strlen(p->topic->name);
    struct marker_op *op = calloc(1, sizeof *op + tlen + 1);
    if (!op)
        return KAFKA_KAFKA_STORAGE_ERROR;
    op->w.finish = marker_visible;
    op->done = done;
    op->done_kerr = done_kerr;
    op->arg = arg;
    op->index = p->index;
    memcpy(op->topic, p->topic->name, tlen + 1);
    struct cn_wr batch;
    cn_wr_init(&batch, 128);
    int rc = cn_batch_build_control(&batch, producer_id, producer_epoch,
                                    commit, coordinator_epoch,
                                    cn_clock_wall_ms());
    if (rc == 0)
        rc = batch.err;
    struct cn_part_env env = cn_sync_part_env(b);
    struct cn_part_append a = {
        .origin = origin,
        .batches = batch.buf,
        .len = batch.len,
        .what = "a marker write",
        .append_time = -1,
    };
    if (rc == 0)
        rc = cn_part_append(p, &env, &a);
    cn_wr_fini(&batch);
    if (rc) {
        free(op);
        if (a.kerr)
            return a.kerr;
        CN_WARN("cannot write the %s marker of producer %" PRId64
                " to %s-%d: %s",
                commit ? "commit" : "abort", producer_id, p->topic->name,
                p->index, cn_strerror(rc));
        return KAFKA_KAFKA_STORAGE_ERROR;
    }
    /* A control batch is one record. */
    op->end = a.base_offset + 1;
    /* The group coordinator must hear of markers on its partitions: the
     * producer's pending transactional offsets become visible or go. */
    if (p->topic->internal && strcmp(p->topic->name, CN_OFFSETS_TOPIC) == 0)
        cn_group_coord_marker(b, p, producer_id, commit);
    cn_sync_wait(b, &op->w);
    return KAFKA_NONE;
}

int16_t cn_marker_write_local(struct cn_broker *b, struct cn_partition *p,
                              enum cn_part_origin origin, int64_t producer_id,
                              int16_t producer_epoch, bool commit,
                              int32_t coordinator_epoch,
                              void (*done)(struct cn_broker *b, void *arg),
                              void *arg)
{
    return marker_write(b, p, origin, producer_id, producer_epoch, commit,
                        coordinator_epoch, done, NULL, arg);
}

int16_t cn_marker_write_replicated(
    struct cn_broker *b, struct cn_partition *p, enum cn_part_origin origin,
    int64_t producer_id, int16_t producer_epoch, bool commit,
    int32_t coordinator_epoch,
    void (*done)(struct cn_broker *b, void *arg, int16_t kerr), void *arg)
{
    return marker_write(b, p, origin, producer_id, producer_epoch, commit,
                        coordinator_epoch, NULL, done, arg);
}

struct local_result {
    void (*result)(struct cn_broker *b, void *arg, size_t i, int16_t kerr);
    void *arg;
    size_t i;
};

static void local_done(struct cn_broker *b, void *arg)
{
    struct local_result lr = *(struct local_result *)arg;
    free(arg);
    lr.result(b, lr.arg, lr.i, KAFKA_NONE);
}

static void local_send(struct cn_broker *b, const struct cn_marker_send *s)
{
    for (size_t i = 0; i < s->n; i++) {
        struct cn_partition *p = cn_partition_find(
            b, cn_bytes_str(s->tps[i].topic), s->tps[i].partition);
        if (!p) {
            /* A deleted topic needs no marker; one this broker has not
             * published yet does. */
            int16_t missing = cn_partition_missing(
                b, cn_bytes_str(s->tps[i].topic), s->tps[i].partition);
            s->result(b, s->arg, i,
                      missing == KAFKA_NOT_LEADER_OR_FOLLOWER ? missing
                                                              : KAFKA_NONE);
            continue;
        }
        if (!cn_partition_led(b, p)) {
            /* Another broker leads it: a marker here would sit in a log
             * that is not the partition's.  Retried (the coordinator
             * treats this as retriable) until markers go to other
             * brokers' leaders (issue #15). */
            s->result(b, s->arg, i, KAFKA_NOT_LEADER_OR_FOLLOWER);
            continue;
        }
        struct local_result *lr = malloc(sizeof *lr);
        if (!lr) {
            s->result(b, s->arg, i, KAFKA_KAFKA_STORAGE_ERROR);
            continue;
        }
        *lr = (struct local_result){s->result, s->arg, i};
        int16_t kerr = cn_marker_write_local(b, p, CN_PART_COORDINATOR,
                                             s->producer_id, s->producer_epoch,
                                             s->commit, s->coordinator_epoch,
                                             local_done, lr);
        if (kerr) {
            free(lr);
            s->result(b, s->arg, i, kerr);
        }
    }
}

const struct cn_marker_channel cn_marker_channel_local = {local_send};
