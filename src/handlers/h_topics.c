/*
 * h_topics.c - CreateTopics, DeleteTopics and CreatePartitions.
 *
 * A single broker can hold replication factor 1 only; -1 means the
 * default (default.replication.factor).  Manual assignments must name this
 * broker.  Topic configs are validated with the same rules as
 * AlterConfigs, and nothing is created when any of them is bad.
 *
 * In cluster mode the controller decides (placement over the registered
 * brokers, replication factor, manual assignments naming any registered
 * broker): see "cluster mode" below.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "node/authz.h"
#include "base/err.h"
#include "handlers/handlers.h"
#include "node/ctlcall.h"
#include "node/quorum.h"
#include "proto/gen/msgs.h"
#include "proto/kerr.h"

#define MSG_MAX 512

/* Cluster mode: the topics go to the controller (below). */
struct cn_create_topics_request;
struct cn_delete_topics_request;
struct cn_create_partitions_request;
static void cl_create_topics(struct cn_broker *b, struct cn_req *req,
                             const struct cn_req_header *h,
                             const struct cn_create_topics_request *rq);
static void cl_delete_topics(struct cn_broker *b, struct cn_req *req,
                             const struct cn_req_header *h,
                             const struct cn_delete_topics_request *rq);
static void
cl_create_partitions(struct cn_broker *b, struct cn_req *req,
                     const struct cn_req_header *h,
                     const struct cn_create_partitions_request *rq);

/* The request's topic configs over the broker's defaults, checked as
 * AlterConfigs checks them.  Returns a Kafka error code with msg. */
static int16_t
parse_configs(struct cn_broker *b,
              const struct cn_create_topics_request_creatable_topic *qt,
              struct cn_topic_config *tc, char *msg)
{
    cn_topic_config_init_defaults(tc, b->cfg);
    for (int32_t i = 0; i < (qt->configs_len > 0 ? qt->configs_len : 0); i++) {
        char key[256], val[4096];
        if (!cn_wire_cstr(qt->configs[i].name, key, sizeof key)) {
            snprintf(msg, MSG_MAX, "Invalid config name.");
            return KAFKA_INVALID_CONFIG;
        }
        if (cn_bytes_is_null(qt->configs[i].value)) {
            /* A null value leaves the default. */
            continue;
        }
        if (!cn_wire_cstr(qt->configs[i].value, val, sizeof val)) {
            snprintf(msg, MSG_MAX, "Invalid value for %s.", key);
            return KAFKA_INVALID_CONFIG;
        }
        if (cn_topic_config_set(tc, key, val, msg, MSG_MAX) != 0)
            return KAFKA_INVALID_CONFIG;
    }
    return cn_topic_config_check(tc, msg, MSG_MAX);
}

/* v5+ reports the resulting configuration (left out when out of memory:
 * the topic exists either way). */
static void
fill_configs(struct cn_req *req,
             struct cn_create_topics_response_creatable_topic_result *rt,
             const struct cn_topic_config *tc)
{
    rt->configs = cn_arena_calloc(&req->arena, CN_TOPIC_NKEYS,
                                  sizeof *rt->configs);
    if (!rt->configs)
        return;
    rt->configs_len = CN_TOPIC_NKEYS;
    for (int k = 0; k < CN_TOPIC_NKEYS; k++) {
        char *buf = cn_arena_alloc(&req->arena, 64);
        struct cn_config_entry e;
        cn_topic_config_describe(tc, (enum cn_topic_key)k, buf, 64, &e);
        struct cn_create_topics_response_creatable_topic_configs *c =
            &rt->configs[k];
        c->name = cn_bytes_str(e.name);
        c->value = cn_bytes_str(e.value);
        c->read_only = e.read_only;
        c->config_source = (int8_t)e.source;
        c->is_sensitive = e.sensitive;
    }
}

static int16_t
create_one(struct cn_broker *b, struct cn_req *req,
           const struct cn_create_topics_request_creatable_topic *qt,
           bool validate_only,
           struct cn_create_topics_response_creatable_topic_result *rt,
           char *msg)
{
    int32_t parts = qt->num_partitions;
    int16_t rf = qt->replication_factor;
    if (qt->assignments_len > 0) {
        if (parts != -1 || rf != -1) {
            snprintf(msg, MSG_MAX,
                     "Both numPartitions or replicationFactor "
                     "and replicasAssignments were set.");
            return KAFKA_INVALID_REQUEST;
        }
        parts = qt->assignments_len;
        for (int32_t i = 0; i < qt->assignments_len; i++) {
            const struct cn_create_topics_request_creatable_replica_assignment
                *a = &qt->assignments[i];
            if (a->partition_index != i) {
                snprintf(msg, MSG_MAX,
                         "Partitions should be a consecutive "
                         "0-based integer sequence.");
                return KAFKA_INVALID_REPLICA_ASSIGNMENT;
            }
            if (a->broker_ids_len != 1 || a->broker_ids[0] != b->node_id) {
                snprintf(msg, MSG_MAX,
                         "Replica assignment for partition %d must be "
                         "exactly [%d]: this cluster has one broker.",
                         i, b->node_id);
                return KAFKA_INVALID_REPLICA_ASSIGNMENT;
            }
        }
        rf = 1;
    }
    if (parts == -1)
        parts = b->cfg->num_partitions;
    if (rf == -1)
        rf = (int16_t)b->cfg->default_replication_factor;
    if (parts <= 0) {
        snprintf(msg, MSG_MAX, "Number of partitions must be larger than 0.");
        return KAFKA_INVALID_PARTITIONS;
    }
    if (rf <= 0) {
        snprintf(msg, MSG_MAX, "Replication factor must be larger than 0.");
        return KAFKA_INVALID_REPLICATION_FACTOR;
    }
    if (rf > 1) {
        snprintf(msg, MSG_MAX,
                 "Unable to replicate the partition %d time(s): The target "
                 "replication factor of %d cannot be reached because only 1 "
                 "broker(s) are registered.",
                 rf, rf);
        return KAFKA_INVALID_REPLICATION_FACTOR;
    }
    int16_t kerr = cn_topic_name_check(qt->name);
    if (kerr) {
        snprintf(msg, MSG_MAX, "Topic name is illegal.");
        return kerr;
    }
    if (cn_topic_find(b, qt->name)) {
        snprintf(msg, MSG_MAX, "Topic '%.*s' already exists.", qt->name.len,
                 (const char *)qt->name.ptr);
        return KAFKA_TOPIC_ALREADY_EXISTS;
    }
    struct cn_topic_config tc;
    kerr = parse_configs(b, qt, &tc, msg);
    if (kerr)
        return kerr;
    struct cn_topic *t = NULL;
    if (!validate_only) {
        kerr = cn_topic_create(b, qt->name, parts, &tc, &t, msg, MSG_MAX);
        if (kerr)
            return kerr;
        rt->topic_id = t->id;
    }
    rt->num_partitions = parts;
    rt->replication_factor = rf;
    fill_configs(req, rt, &tc);
    return KAFKA_NONE;
}

/* A CreateTopics naming a deleted topic whose logs are not reaped yet (a
 * sync round, cleaner pass or snapshot write still uses them): it waits for
 * the reap or its timeout_ms, then runs again from the start. */
struct create_wait {
    struct cn_reap_waiter w; /* first: container_of by cast */
    uv_timer_t timer;
    struct cn_broker *b;
    struct cn_req *req;
    struct cn_req_header h;
    struct cn_rd body; /* undecoded, to run again */
    bool expired;      /* those still doomed answer REQUEST_TIMED_OUT */
};

static void on_create_wait_closed(uv_handle_t *hd)
{
    struct create_wait *cw = hd->data;
    if (cw->req->no_response) {
        cn_req_done(cw->req);
        return;
    }
    struct cn_rd body = cw->body;
    cn_h_create_topics(cw->b, cw->req, &cw->h, &body);
}

/* The timer handle lives in the request: it runs again once it closed. */
static void create_wait_finish(struct create_wait *cw)
{
    cn_reap_wait_cancel(cw->b, &cw->w);
    uv_timer_stop(&cw->timer);
    uv_close((uv_handle_t *)&cw->timer, on_create_wait_closed);
}

static void on_create_reaped(struct cn_broker *b, struct cn_reap_waiter *w)
{
    (void)b;
    create_wait_finish((struct create_wait *)w);
}

static void on_create_wait_timeout(uv_timer_t *t)
{
    struct create_wait *cw = t->data;
    cw->expired = true;
    create_wait_finish(cw);
}

/* Parks req if it would create a topic over a deleted one's logs; false
 * when it goes on now (also when it ran out of time: then those topics
 * answer REQUEST_TIMED_OUT). */
static bool create_must_wait(struct cn_broker *b, struct cn_req *req,
                             const struct cn_req_header *h,
                             const struct cn_rd *body,
                             const struct cn_create_topics_request *rq)
{
    if (rq->validate_only || req->handler_state)
        return false;
    bool doomed = false;
    for (int32_t i = 0; i < rq->topics_len && !doomed; i++)
        doomed = cn_topic_doomed(b, rq->topics[i].name);
    if (!doomed)
        return false;
    struct create_wait *cw = cn_arena_calloc(&req->arena, 1, sizeof *cw);
    if (!cw)
        return false; /* cn_topic_create refuses them, retriable */
    req->handler_state = cw;
    cw->b = b;
    cw->req = req;
    cw->h = *h;
    cw->body = *body;
    if (rq->timeout_ms <= 0 || b->stopping) {
        cw->expired = true;
        return false;
    }
    cw->w.wake = on_create_reaped;
    cn_reap_wait(b, &cw->w);
    cn_req_park(req);
    uv_timer_init(b->loop, &cw->timer);
    cw->timer.data = cw;
    uv_timer_start(&cw->timer, on_create_wait_timeout,
                   (uint64_t)rq->timeout_ms, 0);
    return true;
}

void cn_create_topics_cancel_all(struct cn_broker *b)
{
    for (struct cn_reap_waiter *w = b->reap_waiters, *next; w; w = next) {
        next = w->next;
        if (w->wake != on_create_reaped)
            continue;
        struct create_wait *cw = (struct create_wait *)w;
        cw->req->no_response = true;
        create_wait_finish(cw);
    }
}

void cn_h_create_topics(struct cn_broker *b, struct cn_req *req,
                        const struct cn_req_header *h, struct cn_rd *body)
{
    struct cn_rd body0 = *body;
    struct cn_create_topics_request rq;
    int err = cn_create_topics_request_decode(body, &req->arena,
                                              h->api_version, &rq);
    if (err) {
        cn_req_bad(req, h, err);
        return;
    }
    if (b->quorum) {
        cl_create_topics(b, req, h, &rq);
        return;
    }
    if (create_must_wait(b, req, h, &body0, &rq))
        return;
    const struct create_wait *cw = req->handler_state;
    struct cn_create_topics_response rs;
    cn_create_topics_response_init(&rs);
    int32_t n = rq.topics_len > 0 ? rq.topics_len : 0;
    rs.topics = cn_arena_calloc(&req->arena, (size_t)n + 1, sizeof *rs.topics);
    if (!rs.topics) {
        cn_req_bad(req, h, CN_ENOMEM);
        return;
    }
    rs.topics_len = n;
    /* As Kafka's controller: CREATE on the cluster covers every topic. */
    bool cluster_create = cn_authz_quiet(b, req, CN_ACL_OP_CREATE,
                                         CN_ACL_RT_CLUSTER,
                                         cn_bytes_str(CN_ACL_CLUSTER_NAME));
    for (int32_t i = 0; i < n; i++) {
        struct cn_create_topics_response_creatable_topic_result *rt =
            &rs.topics[i];
        cn_create_topics_response_creatable_topic_result_init(rt);
        rt->name = rq.topics[i].name;
        rt->num_partitions = -1;
        rt->replication_factor = -1;
        rt->configs_len = -1;
        /* A name given twice in one request is an error for both. */
        bool dup = false;
        for (int32_t j = 0; j < n; j++)
            if (j != i && cn_bytes_eq(rq.topics[j].name, rq.topics[i].name))
                dup = true;
        char msg[MSG_MAX] = "";
        if (dup) {
            rt->error_code = KAFKA_INVALID_REQUEST;
            snprintf(msg, sizeof msg, "Duplicate topic name.");
        } else if (!cluster_create &&
                   !cn_authz(b, req, CN_ACL_OP_CREATE, CN_ACL_RT_TOPIC,
                             rq.topics[i].name)) {
            rt->error_code = KAFKA_TOPIC_AUTHORIZATION_FAILED;
            snprintf(msg, sizeof msg, "Authorization failed.");
        } else if (cw && cw->expired && cn_topic_doomed(b, rt->name)) {
            /* As Kafka's controller when the create does not finish in
             * time. */
            rt->error_code = KAFKA_REQUEST_TIMED_OUT;
            snprintf(msg, sizeof msg,
                     "The deleted topic's logs were not removed within "
                     "timeout_ms; try again.");
        } else {
            rt->error_code = create_one(b, req, &rq.topics[i],
                                        rq.validate_only, rt, msg);
        }
        if (rt->error_code) {
            rt->error_message = cn_req_str(req, msg);
            rt->configs_len = -1;
            rt->num_partitions = -1;
            rt->replication_factor = -1;
        } else if (!cn_authz_quiet(b, req, CN_ACL_OP_DESCRIBE_CONFIGS,
                                   CN_ACL_RT_TOPIC, rt->name)) {
            /* Created, but the configs are not the caller's to see: an
             * empty list, Kafka's default for the field. */
            rt->configs_len = 0;
            rt->topic_config_error_code = KAFKA_TOPIC_AUTHORIZATION_FAILED;
        }
    }
    cn_resp_begin(req, h);
    cn_create_topics_response_encode(&req->resp, h->api_version, &rs);
    cn_req_done(req);
}

void cn_h_delete_topics(struct cn_broker *b, struct cn_req *req,
                        const struct cn_req_header *h, struct cn_rd *body)
{
    struct cn_delete_topics_request rq;
    int err = cn_delete_topics_request_decode(body, &req->arena,
                                              h->api_version, &rq);
    if (err) {
        cn_req_bad(req, h, err);
        return;
    }
    if (b->quorum) {
        cl_delete_topics(b, req, h, &rq);
        return;
    }
    /* v0-5 send names; v6 sends (name or id) states. */
    bool by_state = h->api_version >= 6;
    int32_t n = by_state ? rq.topics_len : rq.topic_names_len;
    if (n < 0)
        n = 0;
    struct cn_delete_topics_response rs;
    cn_delete_topics_response_init(&rs);
    rs.responses = cn_arena_calloc(&req->arena, (size_t)n + 1,
                                   sizeof *rs.responses);
    if (!rs.responses) {
        cn_req_bad(req, h, CN_ENOMEM);
        return;
    }
    rs.responses_len = n;
    /* As Kafka's controller: DELETE on the cluster covers every topic;
     * otherwise a topic the caller may not DESCRIBE is refused whether
     * it exists or not, so its existence is not revealed. */
    bool cluster_delete = cn_authz_quiet(b, req, CN_ACL_OP_DELETE,
                                         CN_ACL_RT_CLUSTER,
                                         cn_bytes_str(CN_ACL_CLUSTER_NAME));
    for (int32_t i = 0; i < n; i++) {
        struct cn_delete_topics_response_deletable_topic_result *r =
            &rs.responses[i];
        cn_delete_topics_response_deletable_topic_result_init(r);
        struct cn_topic *t;
        if (by_state && cn_bytes_is_null(rq.topics[i].name)) {
            r->topic_id = rq.topics[i].topic_id;
            t = cn_topic_find_id(b, &rq.topics[i].topic_id);
            if (!t) {
                r->error_code = KAFKA_UNKNOWN_TOPIC_ID;
                continue;
            }
            if (!cluster_delete && !cn_authz_cstr(b, req, CN_ACL_OP_DESCRIBE,
                                                  CN_ACL_RT_TOPIC, t->name)) {
                r->error_code = KAFKA_TOPIC_AUTHORIZATION_FAILED;
                continue;
            }
        } else {
            r->name = by_state ? rq.topics[i].name : rq.topic_names[i];
            if (!cluster_delete && !cn_authz(b, req, CN_ACL_OP_DESCRIBE,
                                             CN_ACL_RT_TOPIC, r->name)) {
                r->error_code = KAFKA_TOPIC_AUTHORIZATION_FAILED;
                continue;
            }
            t = cn_topic_find(b, r->name);
            if (!t) {
                r->error_code = KAFKA_UNKNOWN_TOPIC_OR_PARTITION;
                continue;
            }
        }
        r->topic_id = t->id;
        r->name = cn_bytes_str(
            cn_arena_strdup(&req->arena, cn_bytes_str(t->name)));
        if (!cluster_delete &&
            !cn_authz(b, req, CN_ACL_OP_DELETE, CN_ACL_RT_TOPIC, r->name)) {
            r->error_code = KAFKA_TOPIC_AUTHORIZATION_FAILED;
            continue;
        }
        if (!b->cfg->delete_topic_enable) {
            r->error_code = KAFKA_TOPIC_DELETION_DISABLED;
            continue;
        }
        if (t->internal) {
            r->error_code = KAFKA_INVALID_TOPIC_EXCEPTION;
            r->error_message = cn_req_str(req, "Internal topics cannot be "
                                               "deleted.");
            continue;
        }
        r->error_code = cn_topic_delete(b, t);
    }
    cn_resp_begin(req, h);
    cn_delete_topics_response_encode(&req->resp, h->api_version, &rs);
    cn_req_done(req);
}

static bool assignments_ok(
    struct cn_broker *b,
    const struct cn_create_partitions_request_create_partitions_topic *qt)
{
    for (int32_t j = 0; j < qt->assignments_len; j++) {
        const struct cn_create_partitions_request_create_partitions_assignment
            *a = &qt->assignments[j];
        if (a->broker_ids_len != 1 || a->broker_ids[0] != b->node_id)
            return false;
    }
    return true;
}

void cn_h_create_partitions(struct cn_broker *b, struct cn_req *req,
                            const struct cn_req_header *h, struct cn_rd *body)
{
    struct cn_create_partitions_request rq;
    int err = cn_create_partitions_request_decode(body, &req->arena,
                                                  h->api_version, &rq);
    if (err) {
        cn_req_bad(req, h, err);
        return;
    }
    if (b->quorum) {
        cl_create_partitions(b, req, h, &rq);
        return;
    }
    struct cn_create_partitions_response rs;
    cn_create_partitions_response_init(&rs);
    int32_t n = rq.topics_len > 0 ? rq.topics_len : 0;
    rs.results = cn_arena_calloc(&req->arena, (size_t)n + 1,
                                 sizeof *rs.results);
    if (!rs.results) {
        cn_req_bad(req, h, CN_ENOMEM);
        return;
    }
    rs.results_len = n;
    for (int32_t i = 0; i < n; i++) {
        const struct cn_create_partitions_request_create_partitions_topic *qt =
            &rq.topics[i];
        struct cn_create_partitions_response_create_partitions_topic_result
            *r = &rs.results[i];
        cn_create_partitions_response_create_partitions_topic_result_init(r);
        r->name = qt->name;
        char msg[MSG_MAX] = "";
        struct cn_topic *t = cn_topic_find(b, qt->name);
        if (!cn_authz(b, req, CN_ACL_OP_ALTER, CN_ACL_RT_TOPIC, qt->name)) {
            r->error_code = KAFKA_TOPIC_AUTHORIZATION_FAILED;
        } else if (!t) {
            r->error_code = KAFKA_UNKNOWN_TOPIC_OR_PARTITION;
        } else if (qt->count <= t->partition_count) {
            r->error_code = KAFKA_INVALID_PARTITIONS;
            snprintf(msg, sizeof msg,
                     "Topic currently has %d partitions, which is higher "
                     "than or equal to the requested %d.",
                     t->partition_count, qt->count);
        } else if (qt->count > 100000) {
            r->error_code = KAFKA_INVALID_PARTITIONS;
            snprintf(msg, sizeof msg, "At most 100000 partitions.");
        } else if (qt->assignments_len >= 0 &&
                   qt->assignments_len != qt->count - t->partition_count) {
            r->error_code = KAFKA_INVALID_REPLICA_ASSIGNMENT;
            snprintf(msg, sizeof msg,
                     "Increasing the number of partitions by %d but %d "
                     "assignments provided.",
                     qt->count - t->partition_count, qt->assignments_len);
        } else if (!assignments_ok(b, qt)) {
            r->error_code = KAFKA_INVALID_REPLICA_ASSIGNMENT;
            snprintf(msg, sizeof msg,
                     "Each new partition must be assigned to [%d]: this "
                     "cluster has one broker.",
                     b->node_id);
        } else if (!rq.validate_only) {
            r->error_code = cn_topic_add_partitions(b, t, qt->count);
        }
        if (r->error_code && msg[0])
            r->error_message = cn_req_str(req, msg);
    }
    cn_resp_begin(req, h);
    cn_create_partitions_response_encode(&req->resp, h->api_version, &rs);
    cn_req_done(req);
}

/* ---- cluster mode ------------------------------------------------------
 *
 * The checks that need no cluster view run here as on a single node
 * (names, configs, ACLs, duplicates); every topic that passes them goes
 * to the controller.  On the node whose controller leads, each is one
 * event to it, in-process; elsewhere the passing topics are forwarded as
 * one request of the client's version (cn_ctlcall) and the controller's
 * results copied back.  A request that reaches a CONTROLLER listener of a
 * node that does not lead is answered NOT_CONTROLLER, which the
 * forwarding broker takes as "ask the next one".  ACLs are checked where
 * the client connected: the controller trusts brokers on its CONTROLLER
 * listener (docs/cluster-plan.md §7.2).
 */

/* One request waiting for the controller (req->handler_state). */
struct cl_call {
    struct cn_broker *b;
    struct cn_req *req;
    struct cn_req_header h;
    int pending;      /* in-process answers still to come */
    void *rs;         /* the response being filled */
    void *fwd;        /* the forwarded request (its topics) */
    int32_t *fwd_idx; /* response index of forwarded topic i */
    int32_t nfwd;
    struct cn_topic_config *tcs; /* CreateTopics: each topic's configs */
    void (*finish)(struct cl_call *c);
};

/* One in-process event's waiter; lives in the request's arena. */
struct cl_waiter {
    struct cn_quorum_waiter w; /* first: done casts back */
    struct cl_call *c;
    int32_t idx; /* in the response */
};

/* ACLs as on a single node, except on the CONTROLLER listener (the
 * forwarding broker checked them). */
static bool cl_authz(struct cn_broker *b, struct cn_req *req,
                     enum cn_acl_op op, enum cn_acl_rtype rt,
                     struct cn_bytes name, bool quiet)
{
    if (cn_req_on_controller_listener(b, req))
        return true;
    return quiet ? cn_authz_quiet(b, req, op, rt, name)
                 : cn_authz(b, req, op, rt, name);
}

static struct cn_bytes cl_dup(struct cn_req *req, struct cn_bytes s)
{
    if (cn_bytes_is_null(s))
        return CN_BYTES_NULL;
    char *d = cn_arena_strdup(&req->arena, s);
    return d ? cn_bytes_str(d) : CN_BYTES_NULL;
}

static bool is_internal_name(struct cn_bytes name)
{
    return cn_bytes_eq_str(name, "__consumer_offsets") ||
           cn_bytes_eq_str(name, "__transaction_state");
}

static struct cl_call *cl_new(struct cn_broker *b, struct cn_req *req,
                              const struct cn_req_header *h, void *rs)
{
    struct cl_call *c = cn_arena_calloc(&req->arena, 1, sizeof *c);
    if (!c)
        return NULL;
    c->b = b;
    c->req = req;
    c->h = *h;
    c->rs = rs;
    req->handler_state = c;
    return c;
}

static int64_t cl_timeout(int32_t timeout_ms)
{
    /* Kafka's default request.timeout.ms when the client gives none. */
    return timeout_ms > 0 ? timeout_ms : 30000;
}

/* ---- CreateTopics ---- */

static void ct_finish(struct cl_call *c)
{
    struct cn_create_topics_response *rs = c->rs;
    struct cn_req *req = c->req;
    for (int32_t i = 0; i < rs->topics_len; i++) {
        struct cn_create_topics_response_creatable_topic_result *rt =
            &rs->topics[i];
        /* Kafka's message is null when there is no error. */
        if (!rt->error_code)
            rt->error_message = CN_BYTES_NULL;
        if (rt->error_code) {
            rt->configs_len = -1;
            rt->num_partitions = -1;
            rt->replication_factor = -1;
        } else if (!cl_authz(c->b, req, CN_ACL_OP_DESCRIBE_CONFIGS,
                             CN_ACL_RT_TOPIC, rt->name, true)) {
            rt->configs_len = 0;
            rt->topic_config_error_code = KAFKA_TOPIC_AUTHORIZATION_FAILED;
        }
    }
    cn_resp_begin(req, &c->h);
    cn_create_topics_response_encode(&req->resp, c->h.api_version, rs);
    cn_req_done(req);
}

static void cl_answered(struct cl_call *c)
{
    if (--c->pending == 0)
        c->finish(c);
}

static void ct_done(struct cn_quorum_waiter *w, const struct cn_ctl_answer *a)
{
    struct cl_waiter *cw = (struct cl_waiter *)w;
    struct cl_call *c = cw->c;
    struct cn_create_topics_response *rs = c->rs;
    struct cn_create_topics_response_creatable_topic_result *rt =
        &rs->topics[cw->idx];
    rt->error_code = a->error;
    if (a->error) {
        rt->error_message = cn_req_str(c->req, a->message);
    } else {
        rt->topic_id = a->u.topic.id;
        rt->num_partitions = a->u.topic.nparts;
        rt->replication_factor = a->u.topic.rf;
        fill_configs(c->req, rt, &c->tcs[cw->idx]);
    }
    cl_answered(c);
}

static void ct_forwarded(void *arg, int err, const void *response,
                         struct cn_arena *arena)
{
    (void)arena;
    struct cl_call *c = arg;
    struct cn_req *req = c->req;
    struct cn_create_topics_response *rs = c->rs;
    const struct cn_create_topics_response *fr = response;
    for (int32_t i = 0; i < c->nfwd; i++) {
        struct cn_create_topics_response_creatable_topic_result *rt =
            &rs->topics[c->fwd_idx[i]];
        const struct cn_create_topics_response_creatable_topic_result *r =
            NULL;
        for (int32_t j = 0; !err && j < fr->topics_len && !r; j++)
            if (cn_bytes_eq(fr->topics[j].name, rt->name))
                r = &fr->topics[j];
        if (!r) {
            const char *msg = "The controller did not answer for this topic.";
            rt->error_code = err ? cn_ctlcall_error(err, &msg)
                                 : KAFKA_UNKNOWN_SERVER_ERROR;
            rt->error_message = cn_req_str(req, msg);
            continue;
        }
        rt->error_code = r->error_code;
        rt->error_message = cl_dup(req, r->error_message);
        rt->topic_id = r->topic_id;
        rt->num_partitions = r->num_partitions;
        rt->replication_factor = r->replication_factor;
        rt->topic_config_error_code = r->topic_config_error_code;
        rt->configs_len = r->configs_len;
        if (r->configs_len > 0) {
            rt->configs = cn_arena_calloc(&req->arena, (size_t)r->configs_len,
                                          sizeof *rt->configs);
            if (!rt->configs) {
                rt->configs_len = 0;
                continue;
            }
            for (int32_t k = 0; k < r->configs_len; k++) {
                rt->configs[k] = r->configs[k];
                rt->configs[k].name = cl_dup(req, r->configs[k].name);
                rt->configs[k].value = cl_dup(req, r->configs[k].value);
            }
        }
    }
    c->finish(c);
}

/* The checks of one topic that need no cluster view; 0 or a Kafka error
 * with msg.  *tc gets its configs. */
static int16_t
ct_check(struct cn_broker *b,
         const struct cn_create_topics_request_creatable_topic *qt,
         struct cn_topic_config *tc, char *msg)
{
    int16_t kerr = cn_topic_name_check(qt->name);
    if (kerr) {
        snprintf(msg, MSG_MAX, "Topic name is illegal.");
        return kerr;
    }
    int32_t rf = qt->replication_factor;
    for (int32_t i = 0; i < qt->assignments_len; i++) {
        const struct cn_create_topics_request_creatable_replica_assignment *a =
            &qt->assignments[i];
        if (a->partition_index != i) {
            snprintf(msg, MSG_MAX,
                     "Partitions should be a consecutive 0-based integer "
                     "sequence.");
            return KAFKA_INVALID_REPLICA_ASSIGNMENT;
        }
        if (a->broker_ids_len != qt->assignments[0].broker_ids_len) {
            snprintf(msg, MSG_MAX,
                     "All partitions in the manual partition assignment "
                     "must have the same number of replicas.");
            return KAFKA_INVALID_REPLICA_ASSIGNMENT;
        }
        rf = (int16_t)a->broker_ids_len;
    }
    kerr = parse_configs(b, qt, tc, msg);
    if (kerr)
        return kerr;
    /* The controller applies its own default to -1, so only a factor the
     * request names is checked here; the controller checks the rest. */
    if (rf > 0 && tc->min_insync_replicas > rf) {
        snprintf(msg, MSG_MAX,
                 "Invalid value %d for configuration min.insync.replicas: "
                 "must be between 1 and the replication factor %d",
                 tc->min_insync_replicas, rf);
        return KAFKA_INVALID_CONFIG;
    }
    return 0;
}

/* The controller's event for topic qt, in the request's arena. */
static int ct_event(struct cn_req *req,
                    const struct cn_create_topics_request_creatable_topic *qt,
                    bool validate_only, struct cn_ctl_event *ev)
{
    memset(ev, 0, sizeof *ev);
    ev->kind = CN_CTE_CREATE_TOPIC;
    struct cn_ctl_create_topic *ct = &ev->u.create;
    ct->name = qt->name;
    ct->nparts = qt->num_partitions;
    ct->rf = qt->replication_factor;
    ct->validate_only = validate_only;
    int32_t na = qt->assignments_len > 0 ? qt->assignments_len : 0;
    if (na > 0) {
        struct cn_ctl_replicas *as = cn_arena_calloc(&req->arena, (size_t)na,
                                                     sizeof *as);
        if (!as)
            return CN_ENOMEM;
        for (int32_t i = 0; i < na; i++) {
            as[i].ids = qt->assignments[i].broker_ids;
            as[i].n = qt->assignments[i].broker_ids_len;
        }
        ct->assign = as;
        ct->nassign = na;
    }
    int32_t nc = qt->configs_len > 0 ? qt->configs_len : 0;
    struct cn_ctl_kv *kv = cn_arena_calloc(&req->arena, (size_t)nc + 1,
                                           sizeof *kv);
    if (!kv)
        return CN_ENOMEM;
    size_t k = 0;
    for (int32_t i = 0; i < nc; i++) {
        /* A null value means the default: nothing to record. */
        if (cn_bytes_is_null(qt->configs[i].value))
            continue;
        kv[k].name = qt->configs[i].name;
        kv[k].value = qt->configs[i].value;
        k++;
    }
    ct->configs = kv;
    ct->nconfigs = k;
    return 0;
}

static void cl_create_topics(struct cn_broker *b, struct cn_req *req,
                             const struct cn_req_header *h,
                             const struct cn_create_topics_request *rq)
{
    struct cn_create_topics_response *rs = cn_arena_calloc(&req->arena, 1,
                                                           sizeof *rs);
    if (!rs)
        goto nomem;
    cn_create_topics_response_init(rs);
    int32_t n = rq->topics_len > 0 ? rq->topics_len : 0;
    rs->topics = cn_arena_calloc(&req->arena, (size_t)n + 1,
                                 sizeof *rs->topics);
    struct cl_call *c = cl_new(b, req, h, rs);
    if (!rs->topics || !c)
        goto nomem;
    rs->topics_len = n;
    c->finish = ct_finish;
    c->tcs = cn_arena_calloc(&req->arena, (size_t)n + 1, sizeof *c->tcs);
    bool *go = cn_arena_calloc(&req->arena, (size_t)n + 1, sizeof *go);
    c->fwd_idx = cn_arena_calloc(&req->arena, (size_t)n + 1,
                                 sizeof *c->fwd_idx);
    if (!c->tcs || !go || !c->fwd_idx)
        goto nomem;
    bool cluster_create = cl_authz(b, req, CN_ACL_OP_CREATE, CN_ACL_RT_CLUSTER,
                                   cn_bytes_str(CN_ACL_CLUSTER_NAME), true);
    int32_t ngo = 0;
    for (int32_t i = 0; i < n; i++) {
        struct cn_create_topics_response_creatable_topic_result *rt =
            &rs->topics[i];
        cn_create_topics_response_creatable_topic_result_init(rt);
        rt->name = rq->topics[i].name;
        rt->num_partitions = -1;
        rt->replication_factor = -1;
        rt->configs_len = -1;
        bool dup = false;
        for (int32_t j = 0; j < n; j++)
            if (j != i && cn_bytes_eq(rq->topics[j].name, rq->topics[i].name))
                dup = true;
        char msg[MSG_MAX] = "";
        if (dup) {
            rt->error_code = KAFKA_INVALID_REQUEST;
            snprintf(msg, sizeof msg, "Duplicate topic name.");
        } else if (!cluster_create &&
                   !cl_authz(b, req, CN_ACL_OP_CREATE, CN_ACL_RT_TOPIC,
                             rq->topics[i].name, false)) {
            rt->error_code = KAFKA_TOPIC_AUTHORIZATION_FAILED;
            snprintf(msg, sizeof msg, "Authorization failed.");
        } else {
            rt->error_code = ct_check(b, &rq->topics[i], &c->tcs[i], msg);
        }
        if (rt->error_code)
            rt->error_message = cn_req_str(req, msg);
        else
            go[i] = true, ngo++;
    }
    if (ngo == 0) {
        ct_finish(c);
        return;
    }
    if (cn_quorum_leads(b->quorum)) {
        c->pending = 1; /* held until every event is submitted */
        cn_req_park(req);
        for (int32_t i = 0; i < n; i++) {
            if (!go[i])
                continue;
            struct cl_waiter *w = cn_arena_calloc(&req->arena, 1, sizeof *w);
            struct cn_ctl_event ev;
            if (!w || ct_event(req, &rq->topics[i], rq->validate_only, &ev)) {
                rs->topics[i].error_code = KAFKA_UNKNOWN_SERVER_ERROR;
                continue;
            }
            w->w.done = ct_done;
            w->c = c;
            w->idx = i;
            c->pending++;
            cn_quorum_submit(b->quorum, &ev, &w->w);
        }
        cl_answered(c);
        return;
    }
    if (cn_req_on_controller_listener(b, req)) {
        for (int32_t i = 0; i < n; i++)
            if (go[i])
                rs->topics[i].error_code = KAFKA_NOT_CONTROLLER;
        ct_finish(c);
        return;
    }
    struct cn_create_topics_request *fq = cn_arena_calloc(&req->arena, 1,
                                                          sizeof *fq);
    if (!fq)
        goto nomem;
    *fq = *rq;
    fq->topics = cn_arena_calloc(&req->arena, (size_t)ngo, sizeof *fq->topics);
    if (!fq->topics)
        goto nomem;
    fq->topics_len = 0;
    for (int32_t i = 0; i < n; i++)
        if (go[i]) {
            c->fwd_idx[fq->topics_len] = i;
            fq->topics[fq->topics_len++] = rq->topics[i];
        }
    c->nfwd = fq->topics_len;
    c->fwd = fq;
    cn_req_park(req);
    if (cn_ctlcall(b, CN_API_CREATE_TOPICS, h->api_version, fq,
                   cl_timeout(rq->timeout_ms), cn_ctlcall_create_topics_retry,
                   ct_forwarded, c) != 0)
        ct_forwarded(c, -ECONNREFUSED, NULL, NULL);
    return;
nomem:
    cn_req_bad(req, h, CN_ENOMEM);
}

/* ---- DeleteTopics ---- */

static bool dt_not_controller(const void *response)
{
    const struct cn_delete_topics_response *rs = response;
    for (int32_t i = 0; i < rs->responses_len; i++)
        if (rs->responses[i].error_code == KAFKA_NOT_CONTROLLER)
            return true;
    return false;
}

static void dt_finish(struct cl_call *c)
{
    struct cn_delete_topics_response *rs = c->rs;
    for (int32_t i = 0; i < rs->responses_len; i++)
        if (!rs->responses[i].error_code)
            rs->responses[i].error_message = CN_BYTES_NULL;
    cn_resp_begin(c->req, &c->h);
    cn_delete_topics_response_encode(&c->req->resp, c->h.api_version, c->rs);
    cn_req_done(c->req);
}

static void dt_done(struct cn_quorum_waiter *w, const struct cn_ctl_answer *a)
{
    struct cl_waiter *cw = (struct cl_waiter *)w;
    struct cl_call *c = cw->c;
    struct cn_delete_topics_response *rs = c->rs;
    struct cn_delete_topics_response_deletable_topic_result *r =
        &rs->responses[cw->idx];
    r->error_code = a->error;
    if (a->error)
        r->error_message = cn_req_str(c->req, a->message);
    else
        r->topic_id = a->u.topic.id;
    cl_answered(c);
}

static void dt_forwarded(void *arg, int err, const void *response,
                         struct cn_arena *arena)
{
    (void)arena;
    struct cl_call *c = arg;
    struct cn_req *req = c->req;
    struct cn_delete_topics_response *rs = c->rs;
    const struct cn_delete_topics_response *fr = response;
    for (int32_t i = 0; i < c->nfwd; i++) {
        struct cn_delete_topics_response_deletable_topic_result *r =
            &rs->responses[c->fwd_idx[i]];
        /* Results come in the request's order (Kafka's too). */
        const struct cn_delete_topics_response_deletable_topic_result *fr1 =
            !err && i < fr->responses_len ? &fr->responses[i] : NULL;
        if (!fr1) {
            const char *msg = "The controller did not answer for this topic.";
            r->error_code = err ? cn_ctlcall_error(err, &msg)
                                : KAFKA_UNKNOWN_SERVER_ERROR;
            r->error_message = cn_req_str(req, msg);
            continue;
        }
        r->error_code = fr1->error_code;
        r->error_message = cl_dup(req, fr1->error_message);
        if (!cn_uuid_is_zero(&fr1->topic_id))
            r->topic_id = fr1->topic_id;
        if (cn_bytes_is_null(r->name) && !cn_bytes_is_null(fr1->name))
            r->name = cl_dup(req, fr1->name);
    }
    c->finish(c);
}

static void cl_delete_topics(struct cn_broker *b, struct cn_req *req,
                             const struct cn_req_header *h,
                             const struct cn_delete_topics_request *rq)
{
    bool by_state = h->api_version >= 6;
    int32_t n = by_state ? rq->topics_len : rq->topic_names_len;
    if (n < 0)
        n = 0;
    const struct cn_image *img = cn_quorum_image(b->quorum);
    struct cn_delete_topics_response *rs = cn_arena_calloc(&req->arena, 1,
                                                           sizeof *rs);
    if (!rs)
        goto nomem;
    cn_delete_topics_response_init(rs);
    rs->responses = cn_arena_calloc(&req->arena, (size_t)n + 1,
                                    sizeof *rs->responses);
    struct cl_call *c = cl_new(b, req, h, rs);
    bool *go = cn_arena_calloc(&req->arena, (size_t)n + 1, sizeof *go);
    if (!rs->responses || !c || !go ||
        !(c->fwd_idx = cn_arena_calloc(&req->arena, (size_t)n + 1,
                                       sizeof *c->fwd_idx)))
        goto nomem;
    rs->responses_len = n;
    c->finish = dt_finish;
    bool cluster_delete = cl_authz(b, req, CN_ACL_OP_DELETE, CN_ACL_RT_CLUSTER,
                                   cn_bytes_str(CN_ACL_CLUSTER_NAME), true);
    int32_t ngo = 0;
    for (int32_t i = 0; i < n; i++) {
        struct cn_delete_topics_response_deletable_topic_result *r =
            &rs->responses[i];
        cn_delete_topics_response_deletable_topic_result_init(r);
        if (by_state && cn_bytes_is_null(rq->topics[i].name)) {
            r->topic_id = rq->topics[i].topic_id;
            r->name = CN_BYTES_NULL;
            /* The name is needed for the ACLs: the image has it. */
            const struct cn_image_topic *it =
                cn_image_topic_find_id(img, &rq->topics[i].topic_id);
            if (!it) {
                r->error_code = KAFKA_UNKNOWN_TOPIC_ID;
                continue;
            }
            r->name = cn_req_str(req, it->name);
            if (!cluster_delete &&
                !cl_authz(b, req, CN_ACL_OP_DESCRIBE, CN_ACL_RT_TOPIC, r->name,
                          false)) {
                r->error_code = KAFKA_TOPIC_AUTHORIZATION_FAILED;
                continue;
            }
        } else {
            r->name = by_state ? rq->topics[i].name : rq->topic_names[i];
            if (!cluster_delete &&
                !cl_authz(b, req, CN_ACL_OP_DESCRIBE, CN_ACL_RT_TOPIC, r->name,
                          false)) {
                r->error_code = KAFKA_TOPIC_AUTHORIZATION_FAILED;
                continue;
            }
        }
        if (!cluster_delete && !cl_authz(b, req, CN_ACL_OP_DELETE,
                                         CN_ACL_RT_TOPIC, r->name, false)) {
            r->error_code = KAFKA_TOPIC_AUTHORIZATION_FAILED;
            continue;
        }
        if (!b->cfg->delete_topic_enable) {
            r->error_code = KAFKA_TOPIC_DELETION_DISABLED;
            continue;
        }
        if (is_internal_name(r->name)) {
            r->error_code = KAFKA_INVALID_TOPIC_EXCEPTION;
            r->error_message = cn_req_str(req, "Internal topics cannot be "
                                               "deleted.");
            continue;
        }
        go[i] = true;
        ngo++;
    }
    if (ngo == 0) {
        dt_finish(c);
        return;
    }
    if (cn_quorum_leads(b->quorum)) {
        c->pending = 1;
        cn_req_park(req);
        for (int32_t i = 0; i < n; i++) {
            if (!go[i])
                continue;
            struct cl_waiter *w = cn_arena_calloc(&req->arena, 1, sizeof *w);
            if (!w) {
                rs->responses[i].error_code = KAFKA_UNKNOWN_SERVER_ERROR;
                continue;
            }
            struct cn_ctl_event ev;
            memset(&ev, 0, sizeof ev);
            ev.kind = CN_CTE_DELETE_TOPIC;
            if (by_state && cn_bytes_is_null(rq->topics[i].name)) {
                ev.u.del.name = CN_BYTES_NULL;
                ev.u.del.id = rq->topics[i].topic_id;
            } else {
                ev.u.del.name = rs->responses[i].name;
            }
            w->w.done = dt_done;
            w->c = c;
            w->idx = i;
            c->pending++;
            cn_quorum_submit(b->quorum, &ev, &w->w);
        }
        cl_answered(c);
        return;
    }
    if (cn_req_on_controller_listener(b, req)) {
        for (int32_t i = 0; i < n; i++)
            if (go[i])
                rs->responses[i].error_code = KAFKA_NOT_CONTROLLER;
        dt_finish(c);
        return;
    }
    struct cn_delete_topics_request *fq = cn_arena_calloc(&req->arena, 1,
                                                          sizeof *fq);
    if (!fq)
        goto nomem;
    *fq = *rq;
    if (by_state) {
        fq->topics = cn_arena_calloc(&req->arena, (size_t)ngo,
                                     sizeof *fq->topics);
        if (!fq->topics)
            goto nomem;
        fq->topics_len = 0;
    } else {
        fq->topic_names = cn_arena_calloc(&req->arena, (size_t)ngo,
                                          sizeof *fq->topic_names);
        if (!fq->topic_names)
            goto nomem;
        fq->topic_names_len = 0;
    }
    for (int32_t i = 0; i < n; i++) {
        if (!go[i])
            continue;
        c->fwd_idx[c->nfwd++] = i;
        if (by_state)
            fq->topics[fq->topics_len++] = rq->topics[i];
        else
            fq->topic_names[fq->topic_names_len++] = rq->topic_names[i];
    }
    c->fwd = fq;
    cn_req_park(req);
    if (cn_ctlcall(b, CN_API_DELETE_TOPICS, h->api_version, fq,
                   cl_timeout(rq->timeout_ms), dt_not_controller, dt_forwarded,
                   c) != 0)
        dt_forwarded(c, -ECONNREFUSED, NULL, NULL);
    return;
nomem:
    cn_req_bad(req, h, CN_ENOMEM);
}

/* ---- CreatePartitions ---- */

static bool cp_not_controller(const void *response)
{
    const struct cn_create_partitions_response *rs = response;
    for (int32_t i = 0; i < rs->results_len; i++)
        if (rs->results[i].error_code == KAFKA_NOT_CONTROLLER)
            return true;
    return false;
}

static void cp_finish(struct cl_call *c)
{
    struct cn_create_partitions_response *rs = c->rs;
    for (int32_t i = 0; i < rs->results_len; i++)
        if (!rs->results[i].error_code)
            rs->results[i].error_message = CN_BYTES_NULL;
    cn_resp_begin(c->req, &c->h);
    cn_create_partitions_response_encode(&c->req->resp, c->h.api_version,
                                         c->rs);
    cn_req_done(c->req);
}

static void cp_done(struct cn_quorum_waiter *w, const struct cn_ctl_answer *a)
{
    struct cl_waiter *cw = (struct cl_waiter *)w;
    struct cl_call *c = cw->c;
    struct cn_create_partitions_response *rs = c->rs;
    rs->results[cw->idx].error_code = a->error;
    if (a->error)
        rs->results[cw->idx].error_message = cn_req_str(c->req, a->message);
    cl_answered(c);
}

static void cp_forwarded(void *arg, int err, const void *response,
                         struct cn_arena *arena)
{
    (void)arena;
    struct cl_call *c = arg;
    struct cn_req *req = c->req;
    struct cn_create_partitions_response *rs = c->rs;
    const struct cn_create_partitions_response *fr = response;
    for (int32_t i = 0; i < c->nfwd; i++) {
        struct cn_create_partitions_response_create_partitions_topic_result
            *r = &rs->results[c->fwd_idx[i]];
        const struct
            cn_create_partitions_response_create_partitions_topic_result *f =
                NULL;
        for (int32_t j = 0; !err && j < fr->results_len && !f; j++)
            if (cn_bytes_eq(fr->results[j].name, r->name))
                f = &fr->results[j];
        if (!f) {
            const char *msg = "The controller did not answer for this topic.";
            r->error_code = err ? cn_ctlcall_error(err, &msg)
                                : KAFKA_UNKNOWN_SERVER_ERROR;
            r->error_message = cn_req_str(req, msg);
            continue;
        }
        r->error_code = f->error_code;
        r->error_message = cl_dup(req, f->error_message);
    }
    c->finish(c);
}

/* The controller's event for topic qt; its assignment lives in the
 * request's arena, which outlives the controller's reads of it (ctl.h). */
static int
cp_event(struct cn_req *req,
         const struct cn_create_partitions_request_create_partitions_topic *qt,
         bool validate_only, struct cn_ctl_event *ev)
{
    memset(ev, 0, sizeof *ev);
    ev->kind = CN_CTE_CREATE_PARTITIONS;
    struct cn_ctl_create_partitions *cp = &ev->u.parts;
    cp->name = qt->name;
    cp->count = qt->count;
    cp->validate_only = validate_only;
    /* A null list lets the controller place them; an empty one is a
     * list of the wrong length, as in Kafka. */
    if (qt->assignments_len < 0)
        return 0;
    struct cn_ctl_replicas *as = cn_arena_calloc(
        &req->arena, (size_t)qt->assignments_len + 1, sizeof *as);
    if (!as)
        return CN_ENOMEM;
    for (int32_t i = 0; i < qt->assignments_len; i++) {
        as[i].ids = qt->assignments[i].broker_ids;
        as[i].n = qt->assignments[i].broker_ids_len > 0
                      ? qt->assignments[i].broker_ids_len
                      : 0;
    }
    cp->assign = as;
    cp->nassign = qt->assignments_len;
    return 0;
}

static void cl_create_partitions(struct cn_broker *b, struct cn_req *req,
                                 const struct cn_req_header *h,
                                 const struct cn_create_partitions_request *rq)
{
    int32_t n = rq->topics_len > 0 ? rq->topics_len : 0;
    struct cn_create_partitions_response *rs = cn_arena_calloc(&req->arena, 1,
                                                               sizeof *rs);
    if (!rs)
        goto nomem;
    cn_create_partitions_response_init(rs);
    rs->results = cn_arena_calloc(&req->arena, (size_t)n + 1,
                                  sizeof *rs->results);
    struct cl_call *c = cl_new(b, req, h, rs);
    bool *go = cn_arena_calloc(&req->arena, (size_t)n + 1, sizeof *go);
    if (!rs->results || !c || !go ||
        !(c->fwd_idx = cn_arena_calloc(&req->arena, (size_t)n + 1,
                                       sizeof *c->fwd_idx)))
        goto nomem;
    rs->results_len = n;
    c->finish = cp_finish;
    int32_t ngo = 0;
    for (int32_t i = 0; i < n; i++) {
        const struct cn_create_partitions_request_create_partitions_topic *qt =
            &rq->topics[i];
        struct cn_create_partitions_response_create_partitions_topic_result
            *r = &rs->results[i];
        cn_create_partitions_response_create_partitions_topic_result_init(r);
        r->name = qt->name;
        bool dup = false;
        for (int32_t j = 0; j < n; j++)
            if (j != i && cn_bytes_eq(rq->topics[j].name, qt->name))
                dup = true;
        if (dup) {
            r->error_code = KAFKA_INVALID_REQUEST;
            r->error_message = cn_req_str(req, "Duplicate topic name.");
        } else if (!cl_authz(b, req, CN_ACL_OP_ALTER, CN_ACL_RT_TOPIC,
                             qt->name, false)) {
            r->error_code = KAFKA_TOPIC_AUTHORIZATION_FAILED;
        } else if (qt->count > 100000) {
            r->error_code = KAFKA_INVALID_PARTITIONS;
            r->error_message = cn_req_str(req, "At most 100000 partitions.");
        } else {
            go[i] = true;
            ngo++;
        }
    }
    if (ngo == 0) {
        cp_finish(c);
        return;
    }
    if (cn_quorum_leads(b->quorum)) {
        c->pending = 1;
        cn_req_park(req);
        for (int32_t i = 0; i < n; i++) {
            if (!go[i])
                continue;
            struct cl_waiter *w = cn_arena_calloc(&req->arena, 1, sizeof *w);
            struct cn_ctl_event ev;
            if (!w || cp_event(req, &rq->topics[i], rq->validate_only, &ev)) {
                rs->results[i].error_code = KAFKA_UNKNOWN_SERVER_ERROR;
                continue;
            }
            w->w.done = cp_done;
            w->c = c;
            w->idx = i;
            c->pending++;
            cn_quorum_submit(b->quorum, &ev, &w->w);
        }
        cl_answered(c);
        return;
    }
    if (cn_req_on_controller_listener(b, req)) {
        for (int32_t i = 0; i < n; i++)
            if (go[i])
                rs->results[i].error_code = KAFKA_NOT_CONTROLLER;
        cp_finish(c);
        return;
    }
    struct cn_create_partitions_request *fq = cn_arena_calloc(&req->arena, 1,
                                                              sizeof *fq);
    if (!fq)
        goto nomem;
    *fq = *rq;
    fq->topics = cn_arena_calloc(&req->arena, (size_t)ngo, sizeof *fq->topics);
    if (!fq->topics)
        goto nomem;
    fq->topics_len = 0;
    for (int32_t i = 0; i < n; i++)
        if (go[i]) {
            c->fwd_idx[fq->topics_len] = i;
            fq->topics[fq->topics_len++] = rq->topics[i];
        }
    c->nfwd = fq->topics_len;
    c->fwd = fq;
    cn_req_park(req);
    if (cn_ctlcall(b, CN_API_CREATE_PARTITIONS, h->api_version, fq,
                   cl_timeout(rq->timeout_ms), cp_not_controller, cp_forwarded,
                   c) != 0)
        cp_forwarded(c, -ECONNREFUSED, NULL, NULL);
    return;
nomem:
    cn_req_bad(req, h, CN_ENOMEM);
}
