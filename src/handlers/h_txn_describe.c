/*
 * h_txn_describe.c - looking at the coordinator without changing it:
 * FindCoordinator (for groups too), DescribeTransactions,
 * ListTransactions, through the coordinator's read-only queries.  Nothing
 * here writes, so nothing here waits or parks.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "node/authz.h"
#include "base/clock.h"
#include "node/group_coord.h"
#include "handlers/handlers.h"
#include "node/ctlcall.h"
#include "node/quorum.h"
#include "proto/gen/msgs.h"
#include "proto/kerr.h"
#include "txn/txn_state.h"
#include "node/txn_exec.h"

/* ---- FindCoordinator ---------------------------------------------------- */

#define KEY_TYPE_GROUP 0
#define KEY_TYPE_TRANSACTION 1

/*
 * Cluster mode: the coordinator of a key is the leader of its partition of
 * the internal topic, as the image has it (partitionFor over the topic's
 * partition count in the image), reached on the listener the request came
 * in on.  A missing topic is asked of the controller; until it has a
 * leader the answer is COORDINATOR_NOT_AVAILABLE, which clients retry.
 */
static int16_t cluster_coordinator(struct cn_broker *b, struct cn_req *req,
                                   bool txn, struct cn_bytes key,
                                   int32_t *node, struct cn_bytes *host,
                                   int32_t *port)
{
    const char *topic = txn ? "__transaction_state" : "__consumer_offsets";
    const struct cn_image *img = cn_quorum_image(b->quorum);
    const struct cn_image_topic *it = cn_image_topic_find(img,
                                                          cn_bytes_str(topic));
    if (!it || it->nparts <= 0) {
        const struct cn_config *cfg = b->cfg;
        cn_ctlcall_ensure_topic(
            b, topic,
            txn ? cfg->transaction_state_log_num_partitions
                : cfg->offsets_topic_num_partitions,
            (int16_t)(txn ? cfg->transaction_state_log_replication_factor
                          : cfg->offsets_topic_replication_factor),
            true);
        return KAFKA_COORDINATOR_NOT_AVAILABLE;
    }
    int32_t part = cn_txn_partition_for(key.len > 0 ? key.ptr
                                                    : (const uint8_t *)"",
                                        key.len > 0 ? (size_t)key.len : 0,
                                        it->nparts);
    if (part < 0)
        return KAFKA_COORDINATOR_NOT_AVAILABLE;
    int32_t leader = it->parts[part].leader;
    const struct cn_image_broker *ib = leader >= 0
                                           ? cn_image_broker_find(img, leader)
                                           : NULL;
    if (!ib || ib->fenced)
        return KAFKA_COORDINATOR_NOT_AVAILABLE;
    int li = cn_req_listener(req);
    const char *lname = li >= 0 && li < b->cfg->nlisteners
                            ? b->cfg->listener[li].name
                            : NULL;
    for (size_t j = 0; j < ib->neps; j++)
        if (!lname || strcasecmp(ib->eps[j].name, lname) == 0) {
            *node = leader;
            *host = cn_bytes_str(ib->eps[j].host);
            *port = ib->eps[j].port;
            return KAFKA_NONE;
        }
    return KAFKA_COORDINATOR_NOT_AVAILABLE;
}

static void fill_coordinator(struct cn_broker *b, struct cn_req *req,
                             int8_t key_type, struct cn_bytes key,
                             int16_t *err, int32_t *node,
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
    bool txn = key_type == KEY_TYPE_TRANSACTION;
    if (!cn_authz(b, req, CN_ACL_OP_DESCRIBE,
                  txn ? CN_ACL_RT_TXN_ID : CN_ACL_RT_GROUP, key)) {
        *err = txn ? KAFKA_TRANSACTIONAL_ID_AUTHORIZATION_FAILED
                   : KAFKA_GROUP_AUTHORIZATION_FAILED;
        return;
    }
    if (b->quorum) {
        *err = cluster_coordinator(b, req, txn, key, node, host, port);
        return;
    }
    bool ready = key_type == KEY_TYPE_GROUP
                     ? cn_group_coord_partition(b, cn_bytes_str("")) != NULL
                     : cn_txn_exec_log_ready(b);
    if (!ready) {
        *err = KAFKA_COORDINATOR_NOT_AVAILABLE;
        return;
    }
    *err = KAFKA_NONE;
    *node = b->node_id;
    const char *adv;
    cn_broker_advertised(b, req, &adv, port);
    *host = cn_bytes_str(adv);
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
        fill_coordinator(b, req, rq.key_type, rq.key, &rs.error_code,
                         &rs.node_id, &rs.host, &rs.port, &rs.error_message);
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
            fill_coordinator(b, req, rq.key_type, c->key, &c->error_code,
                             &c->node_id, &c->host, &c->port,
                             &c->error_message);
        }
    }
    cn_resp_begin(req, h);
    cn_find_coordinator_response_encode(&req->resp, h->api_version, &rs);
    cn_req_done(req);
}

/* ---- DescribeTransactions and ListTransactions -------------------------- */

/*
 * Cluster mode: whether this broker coordinates id, as FindCoordinator
 * answers it (the image's leader of its __transaction_state partition).
 * Another broker's id answers NOT_COORDINATOR, as Kafka's does, so a
 * client asks FindCoordinator again instead of reading "not found".  A
 * single node coordinates every id.
 */
static bool coordinates(struct cn_broker *b, struct cn_bytes id)
{
    if (!b->quorum)
        return true;
    const struct cn_image *img = cn_quorum_image(b->quorum);
    const struct cn_image_topic *it =
        cn_image_topic_find(img, cn_bytes_str("__transaction_state"));
    if (!it || it->nparts <= 0)
        return false;
    int32_t part = cn_txn_partition_for(id.len > 0 ? id.ptr
                                                   : (const uint8_t *)"",
                                        id.len > 0 ? (size_t)id.len : 0,
                                        it->nparts);
    return part >= 0 && it->parts[part].leader == b->node_id;
}

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
        if (!cn_authz(b, req, CN_ACL_OP_DESCRIBE, CN_ACL_RT_TXN_ID,
                      rq.transactional_ids[i])) {
            ts->error_code = KAFKA_TRANSACTIONAL_ID_AUTHORIZATION_FAILED;
            ts->transaction_state = cn_bytes_str("");
            continue;
        }
        if (!coordinates(b, rq.transactional_ids[i])) {
            ts->error_code = KAFKA_NOT_COORDINATOR;
            ts->transaction_state = cn_bytes_str("");
            continue;
        }
        char id[1024];
        const struct cn_txn_coord *c = cn_txn_exec_coord(b);
        const struct cn_txn_meta *m =
            c && cn_wire_cstr(rq.transactional_ids[i], id, sizeof id)
                ? cn_txn_find(c, id)
                : NULL;
        if (!m || m->state == CN_TXN_DEAD) {
            ts->error_code = KAFKA_TRANSACTIONAL_ID_NOT_FOUND;
            ts->transaction_state = cn_bytes_str("");
            continue;
        }
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
                /* Kafka shows only the topics the caller may describe. */
                if (!cn_authz_quiet(b, req, CN_ACL_OP_DESCRIBE,
                                    CN_ACL_RT_TOPIC,
                                    cn_bytes_str(m->partitions[k].topic))) {
                    while (k + 1 < m->npartitions &&
                           !strcmp(m->partitions[k + 1].topic,
                                   m->partitions[k].topic))
                        k++;
                    continue;
                }
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
            td->partitions[td->partitions_len++] = m->partitions[k].partition;
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

struct list_ctx {
    struct cn_broker *b;
    struct cn_req *req;
    const struct cn_list_transactions_request *rq;
    struct cn_list_transactions_response *rs;
    const bool *want_state;
    int32_t nf;
    size_t cap;
    int64_t now;
};

static int list_one(void *arg, const struct cn_txn_meta *m)
{
    struct list_ctx *lc = arg;
    if ((size_t)lc->rs->transaction_states_len >= lc->cap)
        return 1;
    if (m->state == CN_TXN_DEAD || !cn_txn_state_valid((int)m->state) ||
        (lc->nf > 0 && !lc->want_state[m->state]) ||
        !pid_wanted(lc->rq, m->producer_id))
        return 0;
    /* v1: only transactions started longer ago than the filter.  As in
     * Kafka, an id with no start time (-1: Empty) counts as started at
     * the epoch, so the filter never hides it. */
    if (lc->rq->duration_filter >= 0 &&
        lc->now - m->txn_start_ms < lc->rq->duration_filter)
        return 0;
    /* Filtered, not refused (Kafka): ids the caller may not describe are
     * left out. */
    if (!cn_authz_quiet(lc->b, lc->req, CN_ACL_OP_DESCRIBE, CN_ACL_RT_TXN_ID,
                        cn_bytes_str(m->transactional_id)))
        return 0;
    struct cn_list_transactions_response_transaction_state *ts =
        &lc->rs->transaction_states[lc->rs->transaction_states_len++];
    cn_list_transactions_response_transaction_state_init(ts);
    ts->transactional_id = cn_req_str(lc->req, m->transactional_id);
    ts->producer_id = m->producer_id;
    ts->transaction_state = cn_bytes_str(cn_txn_state_name(m->state));
    return 0;
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
    rs.unknown_state_filters = cn_arena_calloc(
        &req->arena, (size_t)nf + 1, sizeof *rs.unknown_state_filters);
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
    const struct cn_txn_coord *c = cn_txn_exec_coord(b);
    size_t count = c ? cn_txn_count(c, -1) : 0;
    rs.transaction_states = cn_arena_calloc(&req->arena, count + 1,
                                            sizeof *rs.transaction_states);
    if (!rs.transaction_states)
        goto nomem;
    rs.transaction_states_len = 0;
    struct list_ctx lc = {b,          req, &rq,   &rs,
                          want_state, nf,  count, cn_clock_wall_ms()};
    if (c)
        cn_txn_foreach(c, -1, list_one, &lc);
    cn_resp_begin(req, h);
    cn_list_transactions_response_encode(&req->resp, h->api_version, &rs);
    cn_req_done(req);
    return;
nomem:
    cn_req_bad(req, h, CN_ENOMEM);
}
