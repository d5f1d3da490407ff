/*
 * h_metadata.c - Metadata and DescribeCluster.  On a single node: one
 * broker, every partition led by it, replication factor 1.  In cluster
 * mode the brokers and the controller come from the image (the unfenced
 * brokers, each with its endpoint for the listener the request came in
 * on, as Kafka answers), and so do topics and partitions (leaders,
 * epochs, replicas, ISR): a topic this broker holds no replica of is
 * still the cluster's.  Metadata may auto-create topics
 * (auto.create.topics.enable and the request's allow flag, v4+): on a
 * single node at once, in cluster mode by asking the controller and
 * answering LEADER_NOT_AVAILABLE meanwhile, as Kafka does.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "node/authz.h"
#include "base/say.h"
#include "handlers/handlers.h"
#include "node/ctlcall.h"
#include "node/quorum.h"
#include "proto/gen/msgs.h"
#include "proto/kerr.h"

/* One broker as a client should see it. */
struct seen_broker {
    int32_t id;
    const char *host;
    int32_t port;
    const char *rack; /* NULL: none */
};

/*
 * The brokers to list: in cluster mode the image's unfenced brokers that
 * have an endpoint named like the listener req came in on (a broker
 * without one cannot be reached by this client, and Kafka leaves it out);
 * on a single node this node.  *out is in req's arena.
 */
static int seen_brokers(struct cn_broker *b, struct cn_req *req,
                        struct seen_broker **out, size_t *n)
{
    *n = 0;
    if (!b->quorum) {
        *out = cn_arena_calloc(&req->arena, 1, sizeof **out);
        if (!*out)
            return CN_ENOMEM;
        const char *adv;
        int port;
        cn_broker_advertised(b, req, &adv, &port);
        (*out)[0] = (struct seen_broker){b->node_id, adv, port, NULL};
        *n = 1;
        return 0;
    }
    const struct cn_image *img = cn_quorum_image(b->quorum);
    size_t nb = cn_image_broker_count(img);
    *out = cn_arena_calloc(&req->arena, nb + 1, sizeof **out);
    if (!*out)
        return CN_ENOMEM;
    int li = cn_req_listener(req);
    const char *lname = li >= 0 && li < b->cfg->nlisteners
                            ? b->cfg->listener[li].name
                            : NULL;
    for (size_t i = 0; i < nb; i++) {
        const struct cn_image_broker *ib = cn_image_broker_at(img, i);
        if (ib->fenced)
            continue;
        const struct cn_image_endpoint *ep = NULL;
        for (size_t j = 0; j < ib->neps && !ep; j++)
            if (!lname || strcasecmp(ib->eps[j].name, lname) == 0)
                ep = &ib->eps[j];
        if (!ep)
            continue;
        (*out)[(*n)++] = (struct seen_broker){ib->id, ep->host, ep->port,
                                              ib->rack};
    }
    return 0;
}

static const char *seen_cluster_id(const struct cn_broker *b)
{
    if (b->quorum) {
        const char *id = cn_image_cluster_id(cn_quorum_image(b->quorum));
        if (id[0])
            return id;
    }
    return b->cluster_id;
}

/* The active controller; -1 while none is known (Kafka's MetadataResponse
 * says -1 then too). */
static int32_t seen_controller(const struct cn_broker *b)
{
    return b->quorum ? cn_quorum_leader(b->quorum) : b->node_id;
}

static struct cn_bytes opt_str(const char *s)
{
    return s ? cn_bytes_str(s) : CN_BYTES_NULL;
}

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

/* ---- cluster mode: topics from the image ------------------------------ */

static bool is_internal_name(const char *name)
{
    return strcmp(name, "__consumer_offsets") == 0 ||
           strcmp(name, "__transaction_state") == 0;
}

/* A replica that cannot serve: its broker is fenced or not registered. */
static bool replica_offline(const struct cn_image *img, int32_t id)
{
    const struct cn_image_broker *ib = cn_image_broker_find(img, id);
    return !ib || ib->fenced;
}

/* Topic it as the image has it: every partition with its leader, epochs,
 * replicas and ISR, whether this broker holds a replica or not. */
static int
fill_image_topic(struct cn_broker *b, struct cn_req *req,
                 const struct cn_image *img,
                 struct cn_metadata_response_metadata_response_topic *rt,
                 const struct cn_image_topic *it)
{
    rt->name = cn_bytes_str(it->name);
    rt->topic_id = it->id;
    rt->is_internal = is_internal_name(it->name);
    rt->partitions = cn_arena_calloc(&req->arena, (size_t)it->nparts + 1,
                                     sizeof *rt->partitions);
    if (!rt->partitions)
        return CN_ENOMEM;
    rt->partitions_len = it->nparts;
    for (int32_t i = 0; i < it->nparts; i++) {
        const struct cn_image_part *ip = &it->parts[i];
        struct cn_metadata_response_metadata_response_partition *rp =
            &rt->partitions[i];
        cn_metadata_response_metadata_response_partition_init(rp);
        rp->partition_index = i;
        rp->leader_id = ip->leader;
        rp->leader_epoch = ip->leader_epoch;
        rp->replica_nodes = ip->replicas;
        rp->replica_nodes_len = ip->nreplicas;
        rp->isr_nodes = ip->isr;
        rp->isr_nodes_len = ip->nisr;
        rp->offline_replicas = cn_arena_calloc(&req->arena,
                                               (size_t)ip->nreplicas + 1,
                                               sizeof(int32_t));
        if (!rp->offline_replicas)
            return CN_ENOMEM;
        rp->offline_replicas_len = 0;
        for (int32_t r = 0; r < ip->nreplicas; r++)
            if (replica_offline(img, ip->replicas[r]))
                rp->offline_replicas[rp->offline_replicas_len++] =
                    ip->replicas[r];
        if (ip->leader < 0) {
            rp->error_code = KAFKA_LEADER_NOT_AVAILABLE;
        } else if (ip->leader == b->node_id) {
            /* This broker leads it: its own log's health counts. */
            struct cn_partition *p = cn_partition_find(b,
                                                       cn_bytes_str(it->name),
                                                       i);
            if (p && cn_partition_offline(b, p))
                rp->error_code = KAFKA_KAFKA_STORAGE_ERROR;
        }
    }
    return 0;
}

/* A topic the image lacks: Kafka's brokers ask the controller to create
 * it (when allowed) and answer LEADER_NOT_AVAILABLE meanwhile, so the
 * client asks again. */
static int16_t cluster_missing_topic(struct cn_broker *b, struct cn_bytes name,
                                     bool allow_create)
{
    if (cn_topic_name_check(name))
        return KAFKA_INVALID_TOPIC_EXCEPTION;
    if (!allow_create || !b->cfg->auto_create_topics_enable)
        return KAFKA_UNKNOWN_TOPIC_OR_PARTITION;
    char cname[CN_TOPIC_NAME_MAX + 1];
    if (!cn_wire_cstr(name, cname, sizeof cname))
        return KAFKA_INVALID_TOPIC_EXCEPTION;
    if (strcmp(cname, "__consumer_offsets") == 0)
        cn_ctlcall_ensure_topic(
            b, cname, b->cfg->offsets_topic_num_partitions,
            (int16_t)b->cfg->offsets_topic_replication_factor, true);
    else if (strcmp(cname, "__transaction_state") == 0)
        cn_ctlcall_ensure_topic(
            b, cname, b->cfg->transaction_state_log_num_partitions,
            (int16_t)b->cfg->transaction_state_log_replication_factor, true);
    else
        cn_ctlcall_ensure_topic(b, cname, -1, -1, false);
    return KAFKA_LEADER_NOT_AVAILABLE;
}

/* Metadata's topics in cluster mode (rs->topics*). */
static int cluster_topics(struct cn_broker *b, struct cn_req *req,
                          const struct cn_metadata_request *rq, bool all,
                          bool allow_create, struct cn_metadata_response *rs)
{
    const struct cn_image *img = cn_quorum_image(b->quorum);
    if (all) {
        size_t nt = cn_image_topic_count(img);
        rs->topics = cn_arena_calloc(&req->arena, nt + 1, sizeof *rs->topics);
        if (!rs->topics)
            return CN_ENOMEM;
        size_t k = 0;
        for (const struct cn_image_topic *it = cn_image_topic_next(img, NULL);
             it && k < nt; it = cn_image_topic_next(img, it)) {
            /* All topics: those the caller may not describe are left
             * out. */
            if (!cn_authz_quiet(b, req, CN_ACL_OP_DESCRIBE, CN_ACL_RT_TOPIC,
                                cn_bytes_str(it->name)))
                continue;
            struct cn_metadata_response_metadata_response_topic *rt =
                &rs->topics[k++];
            cn_metadata_response_metadata_response_topic_init(rt);
            rt->topic_authorized_operations = AUTHORIZED_OPS_OMITTED;
            if (fill_image_topic(b, req, img, rt, it))
                return CN_ENOMEM;
        }
        rs->topics_len = (int32_t)k;
        return 0;
    }
    rs->topics = cn_arena_calloc(&req->arena, (size_t)rq->topics_len + 1,
                                 sizeof *rs->topics);
    if (!rs->topics)
        return CN_ENOMEM;
    rs->topics_len = rq->topics_len;
    for (int32_t i = 0; i < rq->topics_len; i++) {
        struct cn_metadata_response_metadata_response_topic *rt =
            &rs->topics[i];
        const struct cn_metadata_request_metadata_request_topic *qt =
            &rq->topics[i];
        cn_metadata_response_metadata_response_topic_init(rt);
        rt->topic_authorized_operations = AUTHORIZED_OPS_OMITTED;
        rt->name = qt->name;
        rt->partitions_len = 0;
        const struct cn_image_topic *it;
        if (cn_bytes_is_null(qt->name)) {
            /* v10+: lookup by topic id. */
            it = cn_image_topic_find_id(img, &qt->topic_id);
            if (!it || !cn_authz_cstr(b, req, CN_ACL_OP_DESCRIBE,
                                      CN_ACL_RT_TOPIC, it->name)) {
                rt->error_code = it ? KAFKA_TOPIC_AUTHORIZATION_FAILED
                                    : KAFKA_UNKNOWN_TOPIC_ID;
                rt->topic_id = qt->topic_id;
                continue;
            }
        } else if (!cn_authz(b, req, CN_ACL_OP_DESCRIBE, CN_ACL_RT_TOPIC,
                             qt->name)) {
            rt->error_code = KAFKA_TOPIC_AUTHORIZATION_FAILED;
            continue;
        } else if (!(it = cn_image_topic_find(img, qt->name))) {
            if (allow_create && b->cfg->auto_create_topics_enable &&
                !cn_authz_quiet(b, req, CN_ACL_OP_CREATE, CN_ACL_RT_CLUSTER,
                                cn_bytes_str(CN_ACL_CLUSTER_NAME)) &&
                !cn_authz(b, req, CN_ACL_OP_CREATE, CN_ACL_RT_TOPIC,
                          qt->name)) {
                /* Auto-creation needs CREATE on the cluster or topic. */
                rt->error_code = KAFKA_TOPIC_AUTHORIZATION_FAILED;
                continue;
            }
            rt->error_code = cluster_missing_topic(b, qt->name, allow_create);
            continue;
        }
        if (fill_image_topic(b, req, img, rt, it))
            return CN_ENOMEM;
    }
    return 0;
}

/* ---- single node ---------------------------------------------------------- */

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
    struct seen_broker *sb;
    size_t nsb;
    if (seen_brokers(b, req, &sb, &nsb))
        goto nomem;
    rs.brokers = cn_arena_calloc(&req->arena, nsb + 1, sizeof *rs.brokers);
    if (!rs.brokers)
        goto nomem;
    for (size_t i = 0; i < nsb; i++) {
        cn_metadata_response_metadata_response_broker_init(&rs.brokers[i]);
        rs.brokers[i].node_id = sb[i].id;
        rs.brokers[i].host = cn_bytes_str(sb[i].host);
        rs.brokers[i].port = sb[i].port;
        rs.brokers[i].rack = opt_str(sb[i].rack);
    }
    rs.brokers_len = (int32_t)nsb;
    rs.cluster_id = cn_bytes_str(seen_cluster_id(b));
    rs.controller_id = seen_controller(b);
    rs.cluster_authorized_operations = AUTHORIZED_OPS_OMITTED;

    /* v0 has no null: an empty list means all topics there. */
    bool all = rq.topics_len < 0 ||
               (h->api_version == 0 && rq.topics_len == 0);
    /* Before v4 there is no allow flag and auto-creation follows the broker
     * setting alone. */
    bool allow_create = h->api_version < 4 || rq.allow_auto_topic_creation;
    if (b->quorum) {
        if (cluster_topics(b, req, &rq, all, allow_create, &rs))
            goto nomem;
    } else if (all) {
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

/* KIP-919 endpoint type 2: the voters at their controller endpoints, from
 * controller.quorum.voters. */
static int fill_controllers(struct cn_broker *b, struct cn_req *req,
                            struct cn_describe_cluster_response *rs)
{
    const struct cn_config *cfg = b->cfg;
    rs->brokers = cn_arena_calloc(&req->arena, (size_t)cfg->nvoters + 1,
                                  sizeof *rs->brokers);
    if (!rs->brokers)
        return CN_ENOMEM;
    for (int i = 0; i < cfg->nvoters; i++) {
        struct cn_describe_cluster_response_describe_cluster_broker *d =
            &rs->brokers[i];
        cn_describe_cluster_response_describe_cluster_broker_init(d);
        d->broker_id = cfg->voters[i].id;
        d->host = cn_bytes_str(cfg->voters[i].host);
        d->port = cfg->voters[i].port;
        d->rack = CN_BYTES_NULL;
    }
    rs->brokers_len = cfg->nvoters;
    return 0;
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
    rs.cluster_id = cn_bytes_str(seen_cluster_id(b));
    rs.controller_id = seen_controller(b);
    rs.cluster_authorized_operations = AUTHORIZED_OPS_OMITTED;
    rs.endpoint_type = rq.endpoint_type;
    /* Endpoint type 1 is brokers, 2 controllers (KIP-919); this single node
     * is both. */
    if (rq.endpoint_type != 1 && rq.endpoint_type != 2) {
        rs.error_code = KAFKA_UNSUPPORTED_ENDPOINT_TYPE;
        rs.brokers_len = 0;
    } else if (b->quorum && rq.endpoint_type == 2) {
        if (fill_controllers(b, req, &rs)) {
            cn_req_bad(req, h, CN_ENOMEM);
            return;
        }
    } else {
        struct seen_broker *sb;
        size_t nsb;
        if (seen_brokers(b, req, &sb, &nsb) ||
            !(rs.brokers = cn_arena_calloc(&req->arena, nsb + 1,
                                           sizeof *rs.brokers))) {
            cn_req_bad(req, h, CN_ENOMEM);
            return;
        }
        for (size_t i = 0; i < nsb; i++) {
            cn_describe_cluster_response_describe_cluster_broker_init(
                &rs.brokers[i]);
            rs.brokers[i].broker_id = sb[i].id;
            rs.brokers[i].host = cn_bytes_str(sb[i].host);
            rs.brokers[i].port = sb[i].port;
            rs.brokers[i].rack = opt_str(sb[i].rack);
        }
        rs.brokers_len = (int32_t)nsb;
    }
    cn_resp_begin(req, h);
    cn_describe_cluster_response_encode(&req->resp, h->api_version, &rs);
    cn_req_done(req);
}
