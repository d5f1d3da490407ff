/*
 * h_metadata.c - Metadata and DescribeCluster: one broker, every partition
 * led by it, replication factor 1.  Metadata may auto-create topics
 * (auto.create.topics.enable and the request's allow flag, v4+).
 */
#include <stdio.h>
#include <string.h>

#include "node/authz.h"
#include "base/say.h"
#include "handlers/handlers.h"
#include "proto/gen/msgs.h"
#include "proto/kerr.h"

/* Kafka's "not requested" value for authorized-operation bitfields. */
#define AUTHORIZED_OPS_OMITTED INT32_MIN

struct cn_topic *cn_topic_autocreate(struct cn_broker *b, struct cn_bytes name,
                                     int16_t *kerr)
{
    struct cn_topic *t = cn_topic_find(b, name);
    if (t)
        return t;
    if (!b->cfg->auto_create_topics_enable) {
        *kerr = KAFKA_UNKNOWN_TOPIC_OR_PARTITION;
        return NULL;
    }
    int16_t nerr = cn_topic_name_check(name);
    if (nerr) {
        *kerr = nerr;
        return NULL;
    }
    struct cn_topic_config tc;
    cn_topic_config_init_defaults(&tc, b->cfg);
    char msg[256];
    *kerr = cn_topic_create(b, name, b->cfg->num_partitions, &tc, &t, msg,
                            sizeof msg);
    if (*kerr) {
        CN_WARN("auto-creating topic %.*s failed: %s", name.len,
                (const char *)name.ptr, msg);
        return NULL;
    }
    return t;
}

static int fill_topic(struct cn_broker *b, struct cn_req *req,
                      struct cn_metadata_response_metadata_response_topic *rt,
                      struct cn_topic *t)
{
    rt->name = cn_bytes_str(t->name);
    rt->topic_id = t->id;
    rt->is_internal = t->internal;
    rt->partitions = cn_arena_calloc(&req->arena, (size_t)t->partition_count,
                                     sizeof *rt->partitions);
    if (!rt->partitions)
        return CN_ENOMEM;
    rt->partitions_len = t->partition_count;
    int32_t *node = cn_arena_alloc(&req->arena, sizeof *node);
    if (!node)
        return CN_ENOMEM;
    *node = b->node_id;
    for (int32_t i = 0; i < t->partition_count; i++) {
        struct cn_metadata_response_metadata_response_partition *rp =
            &rt->partitions[i];
        cn_metadata_response_metadata_response_partition_init(rp);
        rp->partition_index = i;
        rp->leader_id = b->node_id;
        rp->leader_epoch = 0;
        rp->replica_nodes = node;
        rp->replica_nodes_len = 1;
        rp->isr_nodes = node;
        rp->isr_nodes_len = 1;
        rp->offline_replicas_len = 0;
        if (cn_partition_offline(b, t->partitions[i])) {
            rp->error_code = KAFKA_KAFKA_STORAGE_ERROR;
            rp->isr_nodes_len = 0;
            rp->offline_replicas = node;
            rp->offline_replicas_len = 1;
        }
    }
    return 0;
}

struct collect {
    struct cn_topic **topics;
    size_t n;
};

static void collect_one(struct cn_topic *t, void *arg)
{
    struct collect *c = arg;
    c->topics[c->n++] = t;
}

void cn_h_metadata(struct cn_broker *b, struct cn_req *req,
                   const struct cn_req_header *h, struct cn_rd *body)
{
    struct cn_metadata_request rq;
    int err = cn_metadata_request_decode(body, &req->arena, h->api_version,
                                         &rq);
    if (err) {
        cn_req_bad(req, h, err);
        return;
    }
    struct cn_metadata_response rs;
    cn_metadata_response_init(&rs);
    rs.brokers = cn_arena_alloc(&req->arena, sizeof *rs.brokers);
    if (!rs.brokers)
        goto nomem;
    cn_metadata_response_metadata_response_broker_init(rs.brokers);
    rs.brokers[0].node_id = b->node_id;
    const char *adv;
    cn_broker_advertised(b, req, &adv, &rs.brokers[0].port);
    rs.brokers[0].host = cn_bytes_str(adv);
    rs.brokers_len = 1;
    rs.cluster_id = cn_bytes_str(b->cluster_id);
    rs.controller_id = b->node_id;
    rs.cluster_authorized_operations = AUTHORIZED_OPS_OMITTED;

    /* v0 has no null: an empty list means all topics there. */
    bool all = rq.topics_len < 0 ||
               (h->api_version == 0 && rq.topics_len == 0);
    /* Before v4 there is no allow flag and auto-creation follows the broker
     * setting alone. */
    bool allow_create = h->api_version < 4 || rq.allow_auto_topic_creation;
    if (all) {
        struct collect c = {cn_arena_calloc(&req->arena, b->topic_count + 1,
                                            sizeof(struct cn_topic *)),
                            0};
        if (!c.topics)
            goto nomem;
        cn_topics_foreach(b, collect_one, &c);
        /* All topics: those the caller may not describe are left out. */
        size_t kept = 0;
        for (size_t i = 0; i < c.n; i++)
            if (cn_authz_quiet(b, req, CN_ACL_OP_DESCRIBE, CN_ACL_RT_TOPIC,
                               cn_bytes_str(c.topics[i]->name)))
                c.topics[kept++] = c.topics[i];
        c.n = kept;
        rs.topics = cn_arena_calloc(&req->arena, c.n + 1, sizeof *rs.topics);
        if (!rs.topics)
            goto nomem;
        for (size_t i = 0; i < c.n; i++) {
            cn_metadata_response_metadata_response_topic_init(&rs.topics[i]);
            rs.topics[i].topic_authorized_operations = AUTHORIZED_OPS_OMITTED;
            if (fill_topic(b, req, &rs.topics[i], c.topics[i]))
                goto nomem;
        }
        rs.topics_len = (int32_t)c.n;
    } else {
        rs.topics = cn_arena_calloc(&req->arena, (size_t)rq.topics_len + 1,
                                    sizeof *rs.topics);
        if (!rs.topics)
            goto nomem;
        rs.topics_len = rq.topics_len;
        for (int32_t i = 0; i < rq.topics_len; i++) {
            struct cn_metadata_response_metadata_response_topic *rt =
                &rs.topics[i];
            const struct cn_metadata_request_metadata_request_topic *qt =
                &rq.topics[i];
            cn_metadata_response_metadata_response_topic_init(rt);
            rt->topic_authorized_operations = AUTHORIZED_OPS_OMITTED;
            rt->name = qt->name;
            rt->partitions_len = 0;
            struct cn_topic *t = NULL;
            if (cn_bytes_is_null(qt->name)) {
                /* v10+: lookup by topic id. */
                t = cn_topic_find_id(b, &qt->topic_id);
                if (!t) {
                    rt->error_code = KAFKA_UNKNOWN_TOPIC_ID;
                    rt->topic_id = qt->topic_id;
                    continue;
                }
                if (!cn_authz_cstr(b, req, CN_ACL_OP_DESCRIBE, CN_ACL_RT_TOPIC,
                                   t->name)) {
                    rt->error_code = KAFKA_TOPIC_AUTHORIZATION_FAILED;
                    rt->topic_id = qt->topic_id;
                    continue;
                }
            } else if (!cn_authz(b, req, CN_ACL_OP_DESCRIBE, CN_ACL_RT_TOPIC,
                                 qt->name)) {
                rt->error_code = KAFKA_TOPIC_AUTHORIZATION_FAILED;
                continue;
            } else if (allow_create && !cn_topic_find(b, qt->name) &&
                       !cn_authz_quiet(b, req, CN_ACL_OP_CREATE,
                                       CN_ACL_RT_CLUSTER,
                                       cn_bytes_str(CN_ACL_CLUSTER_NAME)) &&
                       !cn_authz(b, req, CN_ACL_OP_CREATE, CN_ACL_RT_TOPIC,
                                 qt->name)) {
                /* Auto-creation needs CREATE on the cluster or topic. */
                rt->error_code = KAFKA_TOPIC_AUTHORIZATION_FAILED;
                continue;
            } else if (allow_create) {
                int16_t kerr = 0;
                t = cn_topic_autocreate(b, qt->name, &kerr);
                if (!t) {
                    rt->error_code = kerr;
                    continue;
                }
            } else {
                t = cn_topic_find(b, qt->name);
                if (!t) {
                    rt->error_code = cn_topic_name_check(qt->name)
                                         ? KAFKA_INVALID_TOPIC_EXCEPTION
                                         : KAFKA_UNKNOWN_TOPIC_OR_PARTITION;
                    continue;
                }
            }
            if (fill_topic(b, req, rt, t))
                goto nomem;
        }
    }
    cn_resp_begin(req, h);
    cn_metadata_response_encode(&req->resp, h->api_version, &rs);
    cn_req_done(req);
    return;
nomem:
    cn_req_bad(req, h, CN_ENOMEM);
}

void cn_h_describe_cluster(struct cn_broker *b, struct cn_req *req,
                           const struct cn_req_header *h, struct cn_rd *body)
{
    struct cn_describe_cluster_request rq;
    int err = cn_describe_cluster_request_decode(body, &req->arena,
                                                 h->api_version, &rq);
    if (err) {
        cn_req_bad(req, h, err);
        return;
    }
    struct cn_describe_cluster_response rs;
    cn_describe_cluster_response_init(&rs);
    rs.cluster_id = cn_bytes_str(b->cluster_id);
    rs.controller_id = b->node_id;
    rs.cluster_authorized_operations = AUTHORIZED_OPS_OMITTED;
    rs.endpoint_type = rq.endpoint_type;
    /* Endpoint type 1 is brokers, 2 controllers (KIP-919); this single node
     * is both. */
    if (rq.endpoint_type != 1 && rq.endpoint_type != 2) {
        rs.error_code = KAFKA_UNSUPPORTED_ENDPOINT_TYPE;
        rs.brokers_len = 0;
    } else {
        rs.brokers = cn_arena_alloc(&req->arena, sizeof *rs.brokers);
        if (!rs.brokers) {
            cn_req_bad(req, h, CN_ENOMEM);
            return;
        }
        cn_describe_cluster_response_describe_cluster_broker_init(rs.brokers);
        rs.brokers[0].broker_id = b->node_id;
        const char *adv;
        cn_broker_advertised(b, req, &adv, &rs.brokers[0].port);
        rs.brokers[0].host = cn_bytes_str(adv);
        rs.brokers_len = 1;
    }
    cn_resp_begin(req, h);
    cn_describe_cluster_response_encode(&req->resp, h->api_version, &rs);
    cn_req_done(req);
}
