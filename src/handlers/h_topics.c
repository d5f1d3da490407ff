/*
 * h_topics.c - CreateTopics, DeleteTopics and CreatePartitions.
 *
 * A single broker can hold replication factor 1 only; -1 means the
 * default (default.replication.factor).  Manual assignments must name this
 * broker.  Topic configs are validated with the same rules as
 * AlterConfigs, and nothing is created when any of them is bad.
 */
#include <stdio.h>
#include <string.h>

#include "node/authz.h"
#include "base/err.h"
#include "handlers/handlers.h"
#include "proto/gen/msgs.h"
#include "proto/kerr.h"

#define MSG_MAX 512

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
    cn_topic_config_init_defaults(&tc, b->cfg);
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
        if (cn_topic_config_set(&tc, key, val, msg, MSG_MAX) != 0)
            return KAFKA_INVALID_CONFIG;
    }
    int16_t unsupported = cn_topic_config_check(&tc, msg, MSG_MAX);
    if (unsupported)
        return unsupported;
    struct cn_topic *t = NULL;
    if (!validate_only) {
        kerr = cn_topic_create(b, qt->name, parts, &tc, &t, msg, MSG_MAX);
        if (kerr)
            return kerr;
        rt->topic_id = t->id;
    }
    rt->num_partitions = parts;
    rt->replication_factor = rf;
    /* v5+ reports the resulting configuration. */
    rt->configs = cn_arena_calloc(&req->arena, CN_TOPIC_NKEYS,
                                  sizeof *rt->configs);
    if (!rt->configs)
        return KAFKA_NONE;
    rt->configs_len = CN_TOPIC_NKEYS;
    for (int k = 0; k < CN_TOPIC_NKEYS; k++) {
        char *buf = cn_arena_alloc(&req->arena, 64);
        struct cn_config_entry e;
        cn_topic_config_describe(&tc, (enum cn_topic_key)k, buf, 64, &e);
        struct cn_create_topics_response_creatable_topic_configs *c =
            &rt->configs[k];
        c->name = cn_bytes_str(e.name);
        c->value = cn_bytes_str(e.value);
        c->read_only = e.read_only;
        c->config_source = (int8_t)e.source;
        c->is_sensitive = e.sensitive;
    }
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
