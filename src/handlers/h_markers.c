/*
 * h_markers.c - WriteTxnMarkers (API 27, v0-1): an operator through
 * cairnctl txn abort (KIP-664), or any client, asks this leader to write
 * commit or abort markers.
 *
 * Cairn's coordinator writes its markers to this broker's partitions
 * itself, without WriteTxnMarkers, so on one broker every request here
 * comes from outside the cluster, and a marker from outside must not
 * decide a transaction its coordinator still holds (issue #11):
 *
 * An abort first goes to our own coordinator: if it holds the producer in
 * an Ongoing transaction that includes the partition, it aborts the whole
 * transaction with an epoch bump (so the live producer cannot commit the
 * part aborted under it) and the partition's answer is NONE at once; its
 * markers follow through the normal path.  While the coordinator commits
 * that transaction the abort is refused (see hanging.h).
 *
 * A commit is refused with CLUSTER_AUTHORIZATION_FAILED, the answer Kafka
 * gives a caller without ClusterAction on WriteTxnMarkers: only the
 * producer commits its transaction, and Kafka's tools never send one.
 * With cairn.transaction.operator.commit.enable=true an operator may
 * commit the open transaction of a producer id no coordinator knows (a
 * repair after __transaction_state was lost); for a producer id the
 * coordinator knows it is INVALID_TXN_STATE, since the coordinator, not
 * the operator, has the transaction's outcome.  Such a commit is audited
 * (a WARN line and cairn_txn_operator_commit_markers_total).
 *
 * Otherwise the marker is appended here through the local marker
 * channel's path (markers.h), the one the coordinator's markers take,
 * and the partition answers once it is visible.  A marker
 * for a producer with no open transaction on the partition is appended
 * as Kafka does: it closes nothing and fences older epochs.
 *
 * In a cluster, another broker's transaction coordinator sends its
 * markers for the partitions this broker leads (markers_remote.c).  Its
 * request is told from an operator's by its client id,
 * "cairn-txn-marker-sender-<N>" (N another broker's node id, cluster
 * mode only), together with CLUSTER_ACTION on the cluster, which only
 * brokers hold (without an authorizer anyone does, as in Kafka, where
 * WriteTxnMarkers is then open to all); any other request is an
 * operator's and is handled as above.  A coordinator's
 * commit and abort markers are written directly (origin coordinator, no
 * operator checks) and each partition answers once the ISR holds its
 * marker (Kafka appends them with acks=-1).  They are fenced two ways:
 *
 *  (a) in the partition layer, for every coordinator marker: a
 *      coordinator epoch older than the producer's last marker on the
 *      partition is TRANSACTION_COORDINATOR_FENCED (Kafka's
 *      ProducerStateManager rule);
 *  (b) here, against this broker's image: the marker's coordinator epoch
 *      is the leader epoch of the __transaction_state partition N
 *      coordinates from.  The request does not say which partition, so:
 *      N leads some __transaction_state partition at exactly that epoch
 *      -> accepted; otherwise, if every __transaction_state partition in
 *      the image is at that epoch or newer, N no longer coordinates at
 *      that epoch -> TRANSACTION_COORDINATOR_FENCED; if some partition
 *      is at an older epoch, this image may lag the sender's (the
 *      partition may have moved to N since) -> accepted, (a) still
 *      applies.  A lagging image therefore never fences a current
 *      coordinator: at the sender's real epoch E its partition is, here,
 *      either older than E or at E led by N.
 *
 * Markers on __transaction_state itself stay refused (INVALID_REQUEST).
 */
#include <stdio.h>
#include <string.h>

#include "node/authz.h"
#include "base/say.h"
#include "handlers/handlers.h"
#include "node/hanging.h"
#include "meta/image.h"
#include "node/markers.h"
#include "node/quorum.h"
#include "proto/gen/msgs.h"
#include "proto/kerr.h"
#include "txn/coord.h"
#include "txn/txn_state.h"
#include "node/txn_exec.h"

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

/*
 * Why a client's COMMIT marker for producer_id may not be written:
 * KAFKA_NONE when it may (the operator key is on and no coordinator knows
 * the producer id), else the refusal's error code, with the reason in why.
 */
static int16_t commit_refusal(struct cn_broker *b, int64_t producer_id,
                              char *why, size_t why_len)
{

    if (!b->cfg->cairn_transaction_operator_commit_enable) {
        snprintf(why, why_len,
                 "only a producer commits its transaction "
                 "(cairn.transaction.operator.commit.enable is false)");
        return KAFKA_CLUSTER_AUTHORIZATION_FAILED;
    }
    const struct cn_txn_coord *c = cn_txn_exec_coord(b);
    const struct cn_txn_meta *v = c ? cn_txn_find_pid(c, producer_id) : NULL;
    if (v) {
        snprintf(why, why_len,
                 "the coordinator knows the producer id (transactional id "
                 "'%s', %s at epoch %d) and decides its transactions",
                 v->transactional_id, cn_txn_state_name(v->state),
                 v->producer_epoch);
        return KAFKA_INVALID_TXN_STATE;
    }
    return KAFKA_NONE;
}

/* The node id in a coordinator's marker client id, or -1. */
static int32_t sender_node(struct cn_bytes client_id)
{
    static const char prefix[] = "cairn-txn-marker-sender-";
    size_t pl = sizeof prefix - 1;
    if (client_id.len <= (int32_t)pl || client_id.len > (int32_t)pl + 10 ||
        memcmp(client_id.ptr, prefix, pl) != 0)
        return -1;
    int64_t n = 0;
    for (int32_t i = (int32_t)pl; i < client_id.len; i++) {
        uint8_t c = client_id.ptr[i];
        if (c < '0' || c > '9')
            return -1;
        n = n * 10 + (c - '0');
    }
    return n <= INT32_MAX ? (int32_t)n : -1;
}

/* Rule (b) above: whether node's coordinator epoch is out of date in
 * this broker's image. */
static bool coordinator_deposed(struct cn_broker *b, int32_t node,
                                int32_t coordinator_epoch)
{
    const struct cn_image *img = b->quorum ? cn_quorum_image(b->quorum) : NULL;
    const struct cn_image_topic *t =
        img ? cn_image_topic_find(img, cn_bytes_str(CN_TXN_TOPIC)) : NULL;
    if (!t)
        return false; /* nothing to judge by: this image lags */
    bool older = false;
    for (int32_t i = 0; i < t->nparts; i++) {
        const struct cn_image_part *ip = &t->parts[i];
        if (ip->leader_epoch == coordinator_epoch && ip->leader == node)
            return false;
        if (ip->leader_epoch < coordinator_epoch)
            older = true;
    }
    return !older;
}

/* One partition of a coordinator's request, until its marker is
 * replicated. */
struct coord_part {
    struct markers_state *ms;
    int16_t *error_code;
};

static void coord_replicated(struct cn_broker *b, void *arg, int16_t kerr)
{
    struct coord_part *cp = arg;
    (void)b;
    *cp->error_code = kerr;
    if (--cp->ms->pending == 0)
        markers_answer(cp->ms);
}

/* Writes *error_code: at once for a refusal, from coord_replicated for a
 * marker written (which may run before this returns). */
static void write_coordinator(
    struct cn_broker *b, struct markers_state *ms, int32_t node,
    const struct cn_write_txn_markers_request_writable_txn_marker *m,
    struct cn_bytes topic, int32_t partition, int16_t *error_code)
{
    struct cn_partition *p = cn_partition_find(b, topic, partition);
    *error_code = KAFKA_NONE;
    if (!p) {
        *error_code = cn_partition_missing(b, topic, partition);
        return;
    }
    if (!cn_partition_led(b, p)) {
        *error_code = KAFKA_NOT_LEADER_OR_FOLLOWER;
        return;
    }
    if (coordinator_deposed(b, node, m->coordinator_epoch)) {
        CN_INFO("WriteTxnMarkers from broker %d: marker of producer %lld on "
                "%s-%d fenced: coordinator epoch %d is no longer current "
                "here",
                node, (long long)m->producer_id, p->topic->name, partition,
                m->coordinator_epoch);
        *error_code = KAFKA_TRANSACTION_COORDINATOR_FENCED;
        return;
    }
    struct coord_part *cp = cn_arena_calloc(&ms->req->arena, 1, sizeof *cp);
    if (!cp) {
        *error_code = KAFKA_KAFKA_STORAGE_ERROR;
        return;
    }
    cp->ms = ms;
    cp->error_code = error_code;
    ms->pending++;
    int16_t err = cn_marker_write_replicated(b, p, CN_PART_COORDINATOR,
                                             m->producer_id, m->producer_epoch,
                                             m->transaction_result,
                                             m->coordinator_epoch,
                                             coord_replicated, cp);
    if (err) {
        ms->pending--; /* coord_replicated is not called on an error */
        *error_code = err;
        CN_INFO("WriteTxnMarkers from broker %d: %s marker for producer "
                "%lld epoch %d on %s-%d: %s",
                node, m->transaction_result ? "commit" : "abort",
                (long long)m->producer_id, m->producer_epoch, p->topic->name,
                partition, cn_kerr_name(err));
    }
}

/* An operator's marker (KIP-664's abort, or a commit under
 * cairn.transaction.operator.commit.enable): its refusal, or NONE with
 * *error_code written later by coord_replicated, once the marker is
 * visible and, in a cluster, replicated (Kafka appends markers with
 * acks=-1). */
static int16_t operator_marker(
    struct cn_broker *b, struct markers_state *ms,
    const struct cn_write_txn_markers_request_writable_txn_marker *m,
    struct cn_bytes topic, int32_t partition, int16_t *error_code)
{
    struct cn_partition *p = cn_partition_find(b, topic, partition);
    bool by_coord = false;
    int16_t err;

    if (!p)
        return cn_partition_missing(b, topic, partition);
    if (!cn_partition_led(b, p))
        return KAFKA_NOT_LEADER_OR_FOLLOWER;
    if (m->transaction_result) {
        char why[400];
        err = commit_refusal(b, m->producer_id, why, sizeof why);
        if (err) {
            b->counters.client_markers_refused++;
            CN_WARN("WriteTxnMarkers from %s: commit marker for producer "
                    "%lld epoch %d on %s-%d refused with %s: %s",
                    cn_req_peer(ms->req), (long long)m->producer_id,
                    m->producer_epoch, p->topic->name, partition,
                    cn_kerr_name(err), why);
            return err;
        }
    }
    struct coord_part *cp = cn_arena_calloc(&ms->req->arena, 1, sizeof *cp);
    if (!cp)
        return KAFKA_KAFKA_STORAGE_ERROR;
    cp->ms = ms;
    cp->error_code = error_code;
    ms->pending++;
    if (m->transaction_result)
        err = cn_marker_write_replicated(b, p, CN_PART_OPERATOR,
                                         m->producer_id, m->producer_epoch,
                                         true, m->coordinator_epoch,
                                         coord_replicated, cp);
    else
        err = cn_hanging_abort(b, p, m->producer_id, m->producer_epoch,
                               m->coordinator_epoch, coord_replicated, cp,
                               &by_coord);
    if (err)
        ms->pending--; /* coord_replicated is not called on an error */
    if (!m->transaction_result && (err == KAFKA_INVALID_TXN_STATE ||
                                   err == KAFKA_CONCURRENT_TRANSACTIONS))
        b->counters.client_markers_refused++;
    if (!err && m->transaction_result) {
        b->counters.operator_commit_markers++;
        CN_WARN("audit: cairn.transaction.operator.commit.enable: "
                "WriteTxnMarkers from %s commits producer %lld epoch %d "
                "on %s-%d, a producer id no coordinator knows",
                cn_req_peer(ms->req), (long long)m->producer_id,
                m->producer_epoch, p->topic->name, partition);
    }
    CN_INFO("WriteTxnMarkers from %s: %s marker for producer %lld epoch %d "
            "on %s-%d: %s",
            cn_req_peer(ms->req), m->transaction_result ? "commit" : "abort",
            (long long)m->producer_id, m->producer_epoch, p->topic->name,
            partition,
            err        ? cn_kerr_name(err)
            : by_coord ? "the coordinator aborts the whole transaction"
                       : "written");
    return err;
}

static void
write_one(struct cn_broker *b, struct markers_state *ms,
          const struct cn_write_txn_markers_request_writable_txn_marker *m,
          struct cn_bytes topic, int32_t partition, int16_t *error_code)
{
    *error_code = KAFKA_NONE;
    int16_t err = operator_marker(b, ms, m, topic, partition, error_code);
    if (err)
        *error_code = err;
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
    /* KIP-664: an operator aborting with ALTER on the cluster, or a
     * broker with CLUSTER_ACTION. */
    bool allowed = cn_authz_quiet(b, req, CN_ACL_OP_ALTER, CN_ACL_RT_CLUSTER,
                                  cn_bytes_str(CN_ACL_CLUSTER_NAME)) ||
                   cn_authz_cluster(b, req, CN_ACL_OP_CLUSTER_ACTION);
    /* Another broker's coordinator (see the top of the file). */
    int32_t node = sender_node(h->client_id);
    if (node >= 0 && (!b->cfg->cluster_mode || node == b->node_id ||
                      !cn_authz_cluster(b, req, CN_ACL_OP_CLUSTER_ACTION)))
        node = -1;
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
            struct
                cn_write_txn_markers_response_writable_txn_marker_topic_result
                    *rt = &r->topics[j];
            cn_write_txn_markers_response_writable_txn_marker_topic_result_init(
                rt);
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
            struct
                cn_write_txn_markers_response_writable_txn_marker_topic_result
                    *rt = &ms->rs.markers[i].topics[j];
            for (int32_t k = 0; k < rt->partitions_len; k++) {
                /* Generated names outgrow 80 columns here. */
                struct
                    cn_write_txn_markers_response_writable_txn_marker_partition_result
                        *rp = &rt->partitions[k];
                cn_write_txn_markers_response_writable_txn_marker_partition_result_init(
                    rp);
                rp->partition_index = m->topics[j].partition_indexes[k];
                if (node >= 0)
                    write_coordinator(b, ms, node, m, m->topics[j].name,
                                      rp->partition_index, &rp->error_code);
                else if (allowed)
                    write_one(b, ms, m, m->topics[j].name, rp->partition_index,
                              &rp->error_code);
                else
                    rp->error_code = KAFKA_CLUSTER_AUTHORIZATION_FAILED;
            }
        }
    }
    if (--ms->pending == 0)
        markers_answer(ms);
    return;
nomem:
    cn_req_bad(req, h, CN_ENOMEM);
}
