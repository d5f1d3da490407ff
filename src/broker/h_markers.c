/*
 * h_markers.c - WriteTxnMarkers (API 27, v0-1): a coordinator, or an
 * operator through cairnctl txn abort (KIP-664), asks this leader to
 * write commit or abort markers.
 *
 * An abort first goes to our own coordinator: if it holds the producer
 * in an Ongoing transaction that includes the partition, it aborts the
 * whole transaction with an epoch bump (so the live producer cannot
 * commit the part aborted under it) and the partition's answer is NONE
 * at once; its markers follow through the normal path.  Otherwise, and
 * for commits, the marker is appended here (hanging.c), recorded in the
 * producer state and the partition answers once it is durable.  A marker
 * for a producer with no open transaction on the partition is appended
 * as Kafka does: it closes nothing and fences older epochs.
 */
#include <stdio.h>

#include "base/say.h"
#include "handlers.h"
#include "hanging.h"
#include "proto/gen/msgs.h"
#include "proto/kerr.h"

struct markers_state;

/* One partition's marker, waiting to be durable. */
struct part_wait {
    struct cn_sync_waiter w;
    struct markers_state *ms;
};

struct markers_state {
    struct cn_req *req;
    struct cn_req_header h;
    struct cn_write_txn_markers_response rs;
    int pending; /* markers not yet durable, plus one while issuing */
};

static void markers_answer(struct markers_state *ms)
{
    cn_resp_begin(ms->req, &ms->h);
    cn_write_txn_markers_response_encode(&ms->req->resp, ms->h.api_version,
                                         &ms->rs);
    cn_req_done(ms->req);
}

static void part_durable(struct cn_broker *b, struct cn_sync_waiter *w)
{
    struct part_wait *pw = (struct part_wait *)w;

    (void)b;
    if (--pw->ms->pending == 0)
        markers_answer(pw->ms);
}

static int16_t write_one(
    struct cn_broker *b, struct markers_state *ms,
    const struct cn_write_txn_markers_request_writable_txn_marker *m,
    struct cn_bytes topic, int32_t partition)
{
    struct cn_partition *p = cn_partition_find(b, topic, partition);
    struct part_wait *pw;
    bool by_coord = false;
    int16_t err;

    if (!p)
        return KAFKA_UNKNOWN_TOPIC_OR_PARTITION;
    pw = cn_arena_calloc(&ms->req->arena, 1, sizeof *pw);
    if (!pw)
        return KAFKA_KAFKA_STORAGE_ERROR;
    pw->ms = ms;
    pw->w.req = ms->req;
    pw->w.finish = part_durable;
    ms->pending++;
    if (m->transaction_result)
        err = cn_hanging_write_marker(b, p, m->producer_id, m->producer_epoch,
                                      true, m->coordinator_epoch, &pw->w);
    else
        err = cn_hanging_abort(b, p, m->producer_id, m->producer_epoch,
                               m->coordinator_epoch, &pw->w, &by_coord);
    if (err)
        ms->pending--; /* the waiter is not called on an error */
    CN_INFO("WriteTxnMarkers from %s: %s marker for producer %lld epoch %d "
            "on %s-%d: %s",
            cn_req_peer(ms->req), m->transaction_result ? "commit" : "abort",
            (long long)m->producer_id, m->producer_epoch, p->topic->name,
            partition,
            err ? cn_kerr_name(err)
                : by_coord ? "the coordinator aborts the whole transaction"
                           : "written");
    return err;
}

void cn_h_write_txn_markers(struct cn_broker *b, struct cn_req *req,
                            const struct cn_req_header *h, struct cn_rd *body)
{
    struct cn_write_txn_markers_request rq;
    struct markers_state *ms;
    int err = cn_write_txn_markers_request_decode(body, &req->arena,
                                                  h->api_version, &rq);
    if (err) {
        cn_req_bad(req, h, err);
        return;
    }
    ms = cn_arena_calloc(&req->arena, 1, sizeof *ms);
    if (!ms)
        goto nomem;
    ms->req = req;
    ms->h = *h;
    ms->pending = 1;
    cn_write_txn_markers_response_init(&ms->rs);
    int32_t nm = rq.markers_len > 0 ? rq.markers_len : 0;
    ms->rs.markers = cn_arena_calloc(&req->arena, (size_t)nm + 1,
                                     sizeof *ms->rs.markers);
    if (!ms->rs.markers)
        goto nomem;
    ms->rs.markers_len = nm;
    /* Every result slot is filled before any marker is written: a marker
     * may become durable (and the answer go out) before this loop ends
     * only through the pending count, which holds one until the end. */
    for (int32_t i = 0; i < nm; i++) {
        const struct cn_write_txn_markers_request_writable_txn_marker *m =
            &rq.markers[i];
        struct cn_write_txn_markers_response_writable_txn_marker_result *r =
            &ms->rs.markers[i];
        cn_write_txn_markers_response_writable_txn_marker_result_init(r);
        r->producer_id = m->producer_id;
        int32_t nt = m->topics_len > 0 ? m->topics_len : 0;
        r->topics = cn_arena_calloc(&req->arena, (size_t)nt + 1,
                                    sizeof *r->topics);
        if (!r->topics)
            goto nomem;
        r->topics_len = nt;
        for (int32_t j = 0; j < nt; j++) {
            struct cn_write_txn_markers_response_writable_txn_marker_topic_result
                *rt = &r->topics[j];
            cn_write_txn_markers_response_writable_txn_marker_topic_result_init
                (rt);
            rt->name = m->topics[j].name;
            int32_t np = m->topics[j].partition_indexes_len > 0
                             ? m->topics[j].partition_indexes_len
                             : 0;
            rt->partitions = cn_arena_calloc(&req->arena, (size_t)np + 1,
                                             sizeof *rt->partitions);
            if (!rt->partitions)
                goto nomem;
            rt->partitions_len = np;
        }
    }
    for (int32_t i = 0; i < nm; i++) {
        const struct cn_write_txn_markers_request_writable_txn_marker *m =
            &rq.markers[i];
        for (int32_t j = 0; j < ms->rs.markers[i].topics_len; j++) {
            struct cn_write_txn_markers_response_writable_txn_marker_topic_result
                *rt = &ms->rs.markers[i].topics[j];
            for (int32_t k = 0; k < rt->partitions_len; k++) {
                /* Generated names outgrow 80 columns here. */
                struct cn_write_txn_markers_response_writable_txn_marker_partition_result
                    *rp = &rt->partitions[k];
                cn_write_txn_markers_response_writable_txn_marker_partition_result_init
                    (rp);
                rp->partition_index = m->topics[j].partition_indexes[k];
                rp->error_code = write_one(b, ms, m, m->topics[j].name,
                                           rp->partition_index);
            }
        }
    }
    if (--ms->pending == 0)
        markers_answer(ms);
    return;
nomem:
    cn_req_bad(req, h, CN_ENOMEM);
}
