/*
 * h_producers.c - InitProducerId for idempotent producers, and
 * DescribeProducers.
 *
 * InitProducerId without a transactional id always hands out a fresh
 * producer id at epoch 0, also when it names the client's current id and
 * epoch (v3+, KIP-360): Kafka ignores those for idempotent producers, and
 * a client asking for a bump (librdkafka after a sequence error) starts
 * over with the new id, its sequences at 0.  The Java client bumps an
 * idempotent producer's epoch locally and never asks.  Transactional ids
 * need the transaction coordinator.
 */
#include <errno.h>
#include <stdio.h>

#include "node/authz.h"
#include "base/say.h"
#include "handlers/handlers.h"
#include "proto/gen/msgs.h"
#include "proto/kerr.h"

void cn_h_init_producer_id(struct cn_broker *b, struct cn_req *req,
                           const struct cn_req_header *h, struct cn_rd *body)
{
    struct cn_init_producer_id_request rq;
    const struct cn_rd body0 = *body; /* to run again if it must wait */
    int err = cn_init_producer_id_request_decode(body, &req->arena,
                                                 h->api_version, &rq);
    if (err) {
        cn_req_bad(req, h, err);
        return;
    }
    struct cn_init_producer_id_response rs;
    cn_init_producer_id_response_init(&rs);
    rs.producer_id = -1;
    rs.producer_epoch = -1;
    if (!cn_bytes_is_null(rq.transactional_id)) {
        /* Without WRITE on the id a client could fence its owner. */
        if (!cn_authz(b, req, CN_ACL_OP_WRITE, CN_ACL_RT_TXN_ID,
                      rq.transactional_id)) {
            rs.error_code = KAFKA_TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
            goto out_answer;
        }
        cn_txn_init_producer_id(b, req, h, rq.transactional_id,
                                rq.transaction_timeout_ms, rq.producer_id,
                                rq.producer_epoch);
        return;
    }
    /* KIP-679: IDEMPOTENT_WRITE on the cluster, or WRITE on any topic. */
    if (!cn_authz_quiet(b, req, CN_ACL_OP_IDEMPOTENT_WRITE, CN_ACL_RT_CLUSTER,
                        cn_bytes_str(CN_ACL_CLUSTER_NAME)) &&
        !cn_authz_any(b, req, CN_ACL_OP_WRITE, CN_ACL_RT_TOPIC)) {
        rs.error_code = KAFKA_CLUSTER_AUTHORIZATION_FAILED;
        goto out_answer;
    }
    int64_t pid;
    int rc = cn_pids_take(b, req, h, &body0, cn_h_init_producer_id, &pid);
    if (rc == -EAGAIN)
        return;
    if (rc) {
        CN_ERROR("cannot reserve producer ids: %s", cn_strerror(rc));
        rs.error_code = KAFKA_KAFKA_STORAGE_ERROR;
    } else {
        rs.producer_id = pid;
        rs.producer_epoch = 0;
    }
out_answer:
    cn_resp_begin(req, h);
    cn_init_producer_id_response_encode(&req->resp, h->api_version, &rs);
    cn_req_done(req);
}

struct fill_ctx {
    struct cn_describe_producers_response_producer_state *out;
    int32_t n;
};

static int fill_one(void *arg, const struct cn_pentry_info *e)
{
    struct fill_ctx *fc = arg;
    struct cn_describe_producers_response_producer_state *s =
        &fc->out[fc->n++];
    cn_describe_producers_response_producer_state_init(s);
    s->producer_id = e->producer_id;
    s->producer_epoch = e->epoch;
    s->last_sequence = e->last_sequence;
    s->last_timestamp = e->last_timestamp;
    s->coordinator_epoch = e->coordinator_epoch;
    s->current_txn_start_offset = e->txn_first_offset;
    return 0;
}

void cn_h_describe_producers(struct cn_broker *b, struct cn_req *req,
                             const struct cn_req_header *h, struct cn_rd *body)
{
    struct cn_describe_producers_request rq;
    int err = cn_describe_producers_request_decode(body, &req->arena,
                                                   h->api_version, &rq);
    if (err) {
        cn_req_bad(req, h, err);
        return;
    }
    struct cn_describe_producers_response rs;
    cn_describe_producers_response_init(&rs);
    int32_t nt = rq.topics_len > 0 ? rq.topics_len : 0;
    rs.topics = cn_arena_calloc(&req->arena, (size_t)nt + 1,
                                sizeof *rs.topics);
    if (!rs.topics)
        goto nomem;
    rs.topics_len = nt;
    for (int32_t i = 0; i < nt; i++) {
        const struct cn_describe_producers_request_topic_request *qt =
            &rq.topics[i];
        struct cn_describe_producers_response_topic_response *rt =
            &rs.topics[i];
        cn_describe_producers_response_topic_response_init(rt);
        rt->name = qt->name;
        int32_t np = qt->partition_indexes_len > 0 ? qt->partition_indexes_len
                                                   : 0;
        rt->partitions = cn_arena_calloc(&req->arena, (size_t)np + 1,
                                         sizeof *rt->partitions);
        if (!rt->partitions)
            goto nomem;
        rt->partitions_len = np;
        bool denied = !cn_authz(b, req, CN_ACL_OP_READ, CN_ACL_RT_TOPIC,
                                qt->name);
        for (int32_t j = 0; j < np; j++) {
            struct cn_describe_producers_response_partition_response *rp =
                &rt->partitions[j];
            cn_describe_producers_response_partition_response_init(rp);
            rp->partition_index = qt->partition_indexes[j];
            rp->active_producers_len = 0;
            if (denied) {
                rp->error_code = KAFKA_TOPIC_AUTHORIZATION_FAILED;
                continue;
            }
            struct cn_partition *p = cn_partition_find(b, qt->name,
                                                       rp->partition_index);
            if (!p) {
                rp->error_code = cn_partition_missing(b, qt->name,
                                                      rp->partition_index);
                continue;
            }
            if (!cn_partition_led(b, p)) {
                rp->error_code = KAFKA_NOT_LEADER_OR_FOLLOWER;
                continue;
            }
            if (cn_partition_offline(b, p)) {
                rp->error_code = KAFKA_KAFKA_STORAGE_ERROR;
                continue;
            }
            size_t count = cn_pstate_count(p->pstate);
            struct fill_ctx fc = {cn_arena_calloc(&req->arena, count + 1,
                                                  sizeof *fc.out),
                                  0};
            if (!fc.out)
                goto nomem;
            cn_pstate_foreach(p->pstate, fill_one, &fc);
            rp->active_producers = fc.out;
            rp->active_producers_len = fc.n;
        }
    }
    cn_resp_begin(req, h);
    cn_describe_producers_response_encode(&req->resp, h->api_version, &rs);
    cn_req_done(req);
    return;
nomem:
    cn_req_bad(req, h, CN_ENOMEM);
}
