/*
 * h_configs.c - DescribeConfigs, AlterConfigs, IncrementalAlterConfigs.
 *
 * Topic configs can be read and changed; a change is validated whole on a
 * copy, persisted, and only then applied to the partition logs.  Broker
 * configs are read here and changed by dynconf.c (Kafka's dynamic keys, for
 * this broker's id or for "" the cluster default); this file only maps the
 * resource name to a layer, as Kafka's ConfigAdminManager does.
 *
 * In cluster mode a topic's configs are the image's ConfigRecords, so a
 * change goes to the controller (see "cluster mode" below); broker
 * resources stay this broker's.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "node/authz.h"
#include "base/err.h"
#include "handlers/handlers.h"
#include "node/ctlcall.h"
#include "node/quorum.h"
#include "proto/gen/msgs.h"
#include "proto/kerr.h"

#define RESOURCE_TOPIC 2
#define RESOURCE_BROKER 4
#define RESOURCE_BROKER_LOGGER 8

#define OP_SET 0
#define OP_DELETE 1
#define OP_APPEND 2
#define OP_SUBTRACT 3

#define MSG_MAX 512

static bool
wanted(const struct cn_describe_configs_request_describe_configs_resource *qr,
       const char *name)
{
    if (qr->configuration_keys_len < 0)
        return true;
    for (int32_t i = 0; i < qr->configuration_keys_len; i++)
        if (cn_bytes_eq_str(qr->configuration_keys[i], name))
            return true;
    return false;
}

static void fill_entry(
    struct cn_req *req, int16_t v, bool synonyms, bool docs,
    const struct cn_config_entry *e,
    struct cn_describe_configs_response_describe_configs_resource_result *c)
{
    cn_describe_configs_response_describe_configs_resource_result_init(c);
    c->name = cn_bytes_str(e->name);
    c->value = e->sensitive ? CN_BYTES_NULL : cn_req_str(req, e->value);
    c->read_only = e->read_only;
    c->is_default = e->source == CN_CFG_SRC_DEFAULT;
    c->config_source = (int8_t)e->source;
    c->is_sensitive = e->sensitive;
    c->config_type = (int8_t)e->kafka_type;
    c->documentation = docs ? cn_bytes_str(e->doc) : CN_BYTES_NULL;
    c->synonyms_len = 0;
    if (synonyms && v >= 1 && e->syn_count > 0) {
        c->synonyms = cn_arena_calloc(&req->arena, (size_t)e->syn_count,
                                      sizeof *c->synonyms);
        for (int i = 0; c->synonyms && i < e->syn_count; i++) {
            c->synonyms[i].name = cn_bytes_str(e->syn[i].name);
            c->synonyms[i].value = e->sensitive
                                       ? CN_BYTES_NULL
                                       : cn_req_str(req, e->syn[i].value);
            c->synonyms[i].source = (int8_t)e->syn[i].source;
            c->synonyms_len = i + 1;
        }
    } else if (synonyms && v >= 1 && e->synonyms) {
        /* A topic entry: its own layer only. */
        c->synonyms = cn_arena_calloc(&req->arena, 1, sizeof *c->synonyms);
        if (c->synonyms) {
            c->synonyms[0].name = c->name;
            c->synonyms[0].value = c->value;
            c->synonyms[0].source = c->config_source;
            c->synonyms_len = 1;
        }
    }
}

static void describe_topic(
    struct cn_broker *b, struct cn_req *req, int16_t v,
    const struct cn_describe_configs_request *rq,
    const struct cn_describe_configs_request_describe_configs_resource *qr,
    struct cn_describe_configs_response_describe_configs_result *rr)
{
    struct cn_topic *t = cn_topic_find(b, qr->resource_name);
    if (!t) {
        rr->error_code = KAFKA_UNKNOWN_TOPIC_OR_PARTITION;
        rr->error_message = cn_req_str(req, "Topic does not exist.");
        return;
    }
    rr->configs = cn_arena_calloc(&req->arena, CN_TOPIC_NKEYS,
                                  sizeof *rr->configs);
    if (!rr->configs)
        return;
    int32_t n = 0;
    for (int k = 0; k < CN_TOPIC_NKEYS; k++) {
        char buf[64];
        struct cn_config_entry e;
        cn_topic_config_describe(&t->config, (enum cn_topic_key)k, buf,
                                 sizeof buf, &e);
        if (!wanted(qr, e.name))
            continue;
        fill_entry(req, v, rq->include_synonyms, rq->include_documentation, &e,
                   &rr->configs[n++]);
    }
    rr->configs_len = n;
}

static void describe_broker(
    struct cn_broker *b, struct cn_req *req, int16_t v,
    const struct cn_describe_configs_request *rq,
    const struct cn_describe_configs_request_describe_configs_resource *qr,
    struct cn_describe_configs_response_describe_configs_result *rr)
{
    char id[16];
    snprintf(id, sizeof id, "%d", b->node_id);
    /* "" names the cluster-wide default layer: only what is set there. */
    bool deflt = qr->resource_name.len == 0;
    if (!deflt && !cn_bytes_eq_str(qr->resource_name, id)) {
        char msg[MSG_MAX], name[64];
        if (!cn_wire_cstr(qr->resource_name, name, sizeof name))
            snprintf(name, sizeof name, "?");
        snprintf(msg, sizeof msg,
                 "Unexpected broker id, expected %d or empty string, but "
                 "received %s",
                 b->node_id, name);
        rr->error_code = KAFKA_INVALID_REQUEST;
        rr->error_message = cn_req_str(req, msg);
        return;
    }
    size_t nk = cn_config_key_count();
    rr->configs = cn_arena_calloc(&req->arena, nk + 1, sizeof *rr->configs);
    if (!rr->configs)
        return;
    int32_t n = 0;
    for (size_t i = 0; i < nk; i++) {
        struct cn_config_entry e;
        if (!deflt)
            cn_config_describe(b->cfg, i, &e);
        else if (cn_config_describe_default(b->cfg, i, &e) != 0)
            continue;
        if (!wanted(qr, e.name))
            continue;
        fill_entry(req, v, rq->include_synonyms, rq->include_documentation, &e,
                   &rr->configs[n++]);
    }
    rr->configs_len = n;
}

/* Kafka's check for a config resource: op on the topic, or on the cluster
 * for broker and broker-logger resources; 0 when allowed, else the
 * resource's authorization error.  Other types are refused later as
 * unsupported. */
static int16_t config_authz(struct cn_broker *b, struct cn_req *req,
                            enum cn_acl_op op, int8_t type,
                            struct cn_bytes name)
{
    if (type == RESOURCE_TOPIC)
        return cn_authz(b, req, op, CN_ACL_RT_TOPIC, name)
                   ? KAFKA_NONE
                   : KAFKA_TOPIC_AUTHORIZATION_FAILED;
    if (type == RESOURCE_BROKER || type == RESOURCE_BROKER_LOGGER)
        return cn_authz_cluster(b, req, op)
                   ? KAFKA_NONE
                   : KAFKA_CLUSTER_AUTHORIZATION_FAILED;
    return KAFKA_NONE;
}

void cn_h_describe_configs(struct cn_broker *b, struct cn_req *req,
                           const struct cn_req_header *h, struct cn_rd *body)
{
    struct cn_describe_configs_request rq;
    int err = cn_describe_configs_request_decode(body, &req->arena,
                                                 h->api_version, &rq);
    if (err) {
        cn_req_bad(req, h, err);
        return;
    }
    struct cn_describe_configs_response rs;
    cn_describe_configs_response_init(&rs);
    int32_t n = rq.resources_len > 0 ? rq.resources_len : 0;
    rs.results = cn_arena_calloc(&req->arena, (size_t)n + 1,
                                 sizeof *rs.results);
    if (!rs.results) {
        cn_req_bad(req, h, CN_ENOMEM);
        return;
    }
    rs.results_len = n;
    for (int32_t i = 0; i < n; i++) {
        const struct cn_describe_configs_request_describe_configs_resource
            *qr = &rq.resources[i];
        struct cn_describe_configs_response_describe_configs_result *rr =
            &rs.results[i];
        cn_describe_configs_response_describe_configs_result_init(rr);
        rr->resource_type = qr->resource_type;
        rr->resource_name = qr->resource_name;
        rr->configs_len = 0;
        rr->error_code = config_authz(b, req, CN_ACL_OP_DESCRIBE_CONFIGS,
                                      qr->resource_type, qr->resource_name);
        if (rr->error_code)
            continue;
        switch (qr->resource_type) {
        case RESOURCE_TOPIC:
            describe_topic(b, req, h->api_version, &rq, qr, rr);
            break;
        case RESOURCE_BROKER:
            describe_broker(b, req, h->api_version, &rq, qr, rr);
            break;
        case RESOURCE_BROKER_LOGGER:
            /* No per-logger levels: an empty list, as for no loggers. */
            break;
        default:
            rr->error_code = KAFKA_INVALID_REQUEST;
            rr->error_message = cn_req_str(req, "Unsupported resource type.");
            break;
        }
    }
    cn_resp_begin(req, h);
    cn_describe_configs_response_encode(&req->resp, h->api_version, &rs);
    cn_req_done(req);
}

/* One requested change, normalized across the two Alter APIs. */
struct config_change {
    struct cn_bytes name;
    struct cn_bytes value;
    int8_t op;
};

/* Applies list APPEND / SUBTRACT to a comma list. */
static int list_edit(const char *cur, const char *arg, bool append, char *out,
                     size_t out_len)
{
    out[0] = '\0';
    size_t used = 0;
    char tmp[1024];
    snprintf(tmp, sizeof tmp, "%s", cur ? cur : "");
    char *save = NULL;
    for (char *tok = strtok_r(tmp, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        if (!append && strcmp(tok, arg) == 0)
            continue;
        used += (size_t)snprintf(out + used, out_len - used, "%s%s",
                                 used ? "," : "", tok);
        if (used >= out_len)
            return CN_ETOOBIG;
    }
    if (append) {
        /* Appending what is there already changes nothing. */
        char chk[1100];
        snprintf(chk, sizeof chk, ",%s,", out);
        char needle[1100];
        snprintf(needle, sizeof needle, ",%s,", arg);
        if (!strstr(chk, needle))
            used += (size_t)snprintf(out + used, out_len - used, "%s%s",
                                     used ? "," : "", arg);
    }
    return used < out_len ? 0 : CN_ETOOBIG;
}

/* Applies changes to *tc (the topic's config, a copy) and validates the
 * result.  Returns a Kafka error with msg. */
static int16_t topic_change(struct cn_broker *b, struct cn_topic_config *tc,
                            const struct config_change *ch, int32_t n,
                            bool replace_all, char *msg)
{
    if (replace_all)
        cn_topic_config_init_defaults(tc, b->cfg);
    for (int32_t i = 0; i < n; i++) {
        char key[256], val[1024];
        if (!cn_wire_cstr(ch[i].name, key, sizeof key)) {
            snprintf(msg, MSG_MAX, "Invalid config name.");
            return KAFKA_INVALID_CONFIG;
        }
        int k = cn_topic_config_key_find(key);
        if (k < 0) {
            snprintf(msg, MSG_MAX, "Unknown topic config name: %s", key);
            return KAFKA_INVALID_CONFIG;
        }
        if (ch[i].op == OP_DELETE ||
            (ch[i].op == OP_SET && cn_bytes_is_null(ch[i].value))) {
            cn_topic_config_delete(tc, key);
            continue;
        }
        if (!cn_wire_cstr(ch[i].value, val, sizeof val)) {
            snprintf(msg, MSG_MAX, "Invalid value for %s.", key);
            return KAFKA_INVALID_CONFIG;
        }
        if (ch[i].op == OP_APPEND || ch[i].op == OP_SUBTRACT) {
            const struct cn_config_key *row = cn_topic_config_key(
                (enum cn_topic_key)k);
            if (row->type != CN_CFG_LIST && row->type != CN_CFG_ENUM_LIST) {
                snprintf(msg, MSG_MAX,
                         "Config value append is not allowed for config "
                         "key: %s",
                         key);
                return KAFKA_INVALID_CONFIG;
            }
            char cur[64], edited[1024];
            struct cn_config_entry e;
            cn_topic_config_describe(tc, (enum cn_topic_key)k, cur, sizeof cur,
                                     &e);
            if (list_edit(e.value, val, ch[i].op == OP_APPEND, edited,
                          sizeof edited) != 0) {
                snprintf(msg, MSG_MAX, "Value too long for %s.", key);
                return KAFKA_INVALID_CONFIG;
            }
            snprintf(val, sizeof val, "%s", edited);
        } else if (ch[i].op != OP_SET) {
            snprintf(msg, MSG_MAX, "Unknown config operation %d.", ch[i].op);
            return KAFKA_INVALID_REQUEST;
        }
        if (cn_topic_config_set(tc, key, val, msg, MSG_MAX) != 0)
            return KAFKA_INVALID_CONFIG;
    }
    return cn_topic_config_check(tc, msg, MSG_MAX);
}

/* Validates and applies changes to a copy of the topic config; on success
 * persists and applies.  Returns a Kafka error with msg. */
static int16_t alter_topic(struct cn_broker *b, struct cn_bytes name,
                           const struct config_change *ch, int32_t n,
                           bool replace_all, bool validate_only, char *msg)
{
    struct cn_topic *t = cn_topic_find(b, name);
    if (!t) {
        snprintf(msg, MSG_MAX, "Topic does not exist.");
        return KAFKA_UNKNOWN_TOPIC_OR_PARTITION;
    }
    struct cn_topic_config tc = t->config;
    int16_t kerr = topic_change(b, &tc, ch, n, replace_all, msg);
    if (kerr || validate_only)
        return kerr;
    struct cn_topic_config old = t->config;
    t->config = tc;
    if (cn_topic_persist(b, t) != 0) {
        t->config = old;
        snprintf(msg, MSG_MAX, "Cannot persist topic config.");
        return KAFKA_KAFKA_STORAGE_ERROR;
    }
    cn_topic_apply_config(t);
    return KAFKA_NONE;
}

/* Kafka's ConfigAdminManager: "" is the cluster default, else the name
 * must be this broker's id. */
static int16_t alter_broker(struct cn_broker *b, struct cn_req *req,
                            struct cn_bytes name,
                            const struct config_change *ch, int32_t n,
                            bool replace_all, bool validate_only, char *msg)
{
    enum cn_config_layer layer = CN_CFG_LAYER_DEFAULT;
    if (name.len > 0) {
        char id[64];
        char *end = NULL;
        long v = -1;
        if (cn_wire_cstr(name, id, sizeof id))
            v = strtol(id, &end, 10);
        else
            snprintf(id, sizeof id, "?");
        if (!end || end == id || *end) {
            snprintf(msg, MSG_MAX, "Node id must be an integer, but it is: %s",
                     id);
            return KAFKA_INVALID_REQUEST;
        }
        if (v != b->node_id) {
            snprintf(msg, MSG_MAX,
                     "Unexpected broker id, expected %d, but received %s",
                     b->node_id, id);
            return KAFKA_INVALID_REQUEST;
        }
        layer = CN_CFG_LAYER_BROKER;
    }
    struct cn_config_change *cc = cn_arena_calloc(&req->arena, (size_t)n + 1,
                                                  sizeof *cc);
    if (!cc) {
        snprintf(msg, MSG_MAX, "Out of memory.");
        return KAFKA_UNKNOWN_SERVER_ERROR;
    }
    for (int32_t i = 0; i < n; i++) {
        /* Broker keys and values are short; longer is not a Cairn key. */
        char *key = cn_arena_calloc(&req->arena, 1, 256);
        char *val = cn_arena_calloc(&req->arena, 1, 1024);
        if (!key || !val) {
            snprintf(msg, MSG_MAX, "Out of memory.");
            return KAFKA_UNKNOWN_SERVER_ERROR;
        }
        if (!cn_wire_cstr(ch[i].name, key, 256)) {
            snprintf(msg, MSG_MAX, "Invalid config name.");
            return KAFKA_INVALID_CONFIG;
        }
        cc[i].key = key;
        cc[i].op = ch[i].op;
        cc[i].value = NULL;
        if (!cn_bytes_is_null(ch[i].value)) {
            if (!cn_wire_cstr(ch[i].value, val, 1024)) {
                snprintf(msg, MSG_MAX, "Invalid value for %s.", key);
                return KAFKA_INVALID_CONFIG;
            }
            cc[i].value = val;
        }
    }
    return cn_broker_alter_dynamic(b, layer, cc, (size_t)n, replace_all,
                                   validate_only, msg, MSG_MAX);
}

static int16_t alter_resource(struct cn_broker *b, struct cn_req *req,
                              int8_t type, struct cn_bytes name,
                              const struct config_change *ch, int32_t n,
                              bool replace_all, bool validate_only, char *msg)
{
    if (type == RESOURCE_TOPIC)
        return alter_topic(b, name, ch, n, replace_all, validate_only, msg);
    if (type == RESOURCE_BROKER)
        return alter_broker(b, req, name, ch, n, replace_all, validate_only,
                            msg);
    if (type == RESOURCE_BROKER_LOGGER) {
        snprintf(msg, MSG_MAX,
                 "Cairn has no per-logger levels: set cairn.log.level in "
                 "the properties file or with --set and restart.");
        return KAFKA_INVALID_REQUEST;
    }
    snprintf(msg, MSG_MAX, "Unsupported resource type %d.", type);
    return KAFKA_INVALID_REQUEST;
}

/* ---- cluster mode ------------------------------------------------------
 *
 * A topic resource is checked here (ACLs, keys, values: the config code
 * is the broker's) against the topic's configs in the image, and the
 * whole resulting override set goes to the controller, which proposes
 * the difference as ConfigRecords; every broker's publish then applies
 * them.  As for CreateTopics (h_topics.c): in-process when this node's
 * controller leads, NOT_CONTROLLER on a CONTROLLER listener that does not
 * lead, else the resources that passed are forwarded as one request of
 * the client's API and version, whose results are copied back.  The
 * controller recomputes the set from its own image, which holds every
 * earlier change.
 */

/* One request waiting for the controller (req->handler_state). */
struct cfg_call {
    struct cn_broker *b;
    struct cn_req *req;
    struct cn_req_header h;
    int pending;               /* in-process answers still to come */
    int32_t n;                 /* resources */
    int16_t **code;            /* resource i's, in the response */
    struct cn_bytes **message; /* resource i's, in the response */
    bool *go;                  /* resource i goes to the controller */
    struct cn_bytes *names;    /* its topic */
    struct cn_ctl_kv **kvs;    /* its resulting overrides */
    size_t *nkvs;
    int32_t *fwd_idx; /* response index of forwarded resource j */
    int32_t nfwd;
    void *rs; /* the response */
    void (*encode)(struct cfg_call *c);
};

struct cfg_waiter {
    struct cn_quorum_waiter w; /* first: done casts back */
    struct cfg_call *c;
    int32_t idx;
};

static struct cfg_call *cfg_new(struct cn_broker *b, struct cn_req *req,
                                const struct cn_req_header *h, int32_t n,
                                void *rs, void (*encode)(struct cfg_call *))
{
    struct cn_arena *a = &req->arena;
    struct cfg_call *c = cn_arena_calloc(a, 1, sizeof *c);
    if (!c || !rs)
        return NULL;
    size_t m = (size_t)n + 1;
    c->code = cn_arena_calloc(a, m, sizeof *c->code);
    c->message = cn_arena_calloc(a, m, sizeof *c->message);
    c->go = cn_arena_calloc(a, m, sizeof *c->go);
    c->names = cn_arena_calloc(a, m, sizeof *c->names);
    c->kvs = cn_arena_calloc(a, m, sizeof *c->kvs);
    c->nkvs = cn_arena_calloc(a, m, sizeof *c->nkvs);
    c->fwd_idx = cn_arena_calloc(a, m, sizeof *c->fwd_idx);
    if (!c->code || !c->message || !c->go || !c->names || !c->kvs ||
        !c->nkvs || !c->fwd_idx)
        return NULL;
    c->b = b;
    c->req = req;
    c->h = *h;
    c->n = n;
    c->rs = rs;
    c->encode = encode;
    req->handler_state = c;
    return c;
}

/* Checks topic resource i as described above; on success marks it to go
 * to the controller with its resulting overrides.  Returns a Kafka error
 * with msg. */
static int16_t cfg_topic(struct cfg_call *c, int32_t i, struct cn_bytes name,
                         const struct config_change *ch, int32_t n,
                         bool replace_all, char *msg)
{
    struct cn_broker *b = c->b;
    if (!cn_req_on_controller_listener(b, c->req) &&
        !cn_authz(b, c->req, CN_ACL_OP_ALTER_CONFIGS, CN_ACL_RT_TOPIC, name))
        return KAFKA_TOPIC_AUTHORIZATION_FAILED;
    const struct cn_image_topic *it =
        cn_image_topic_find(cn_quorum_image(b->quorum), name);
    if (!it) {
        snprintf(msg, MSG_MAX, "Topic does not exist.");
        return KAFKA_UNKNOWN_TOPIC_OR_PARTITION;
    }
    struct cn_topic_config tc;
    cn_topic_config_init_defaults(&tc, b->cfg);
    char ignored[MSG_MAX];
    /* A key this version does not know is left out, as publish.c leaves
     * it out of the local topic: the change then removes it. */
    for (size_t k = 0; k < it->nconfigs; k++)
        (void)cn_topic_config_set(&tc, it->configs[k].name,
                                  it->configs[k].value, ignored,
                                  sizeof ignored);
    int16_t kerr = topic_change(b, &tc, ch, n, replace_all, msg);
    if (kerr)
        return kerr;
    struct cn_ctl_kv *kv = cn_arena_calloc(&c->req->arena, CN_TOPIC_NKEYS,
                                           sizeof *kv);
    if (!kv) {
        snprintf(msg, MSG_MAX, "Out of memory.");
        return KAFKA_UNKNOWN_SERVER_ERROR;
    }
    size_t nkv = 0;
    for (int k = 0; k < CN_TOPIC_NKEYS; k++) {
        if (!cn_topic_config_is_override(&tc, (enum cn_topic_key)k))
            continue;
        char *buf = cn_arena_alloc(&c->req->arena, 64);
        if (!buf) {
            snprintf(msg, MSG_MAX, "Out of memory.");
            return KAFKA_UNKNOWN_SERVER_ERROR;
        }
        struct cn_config_entry e;
        cn_topic_config_describe(&tc, (enum cn_topic_key)k, buf, 64, &e);
        kv[nkv].name = cn_bytes_str(e.name);
        kv[nkv].value = cn_bytes_str(e.value);
        nkv++;
    }
    c->go[i] = true;
    c->names[i] = name;
    c->kvs[i] = kv;
    c->nkvs[i] = nkv;
    return KAFKA_NONE;
}

static void cfg_finish(struct cfg_call *c)
{
    for (int32_t i = 0; i < c->n; i++)
        if (c->code[i] && !*c->code[i])
            *c->message[i] = CN_BYTES_NULL;
    c->encode(c);
}

static void cfg_answered(struct cfg_call *c)
{
    if (--c->pending == 0)
        cfg_finish(c);
}

static void cfg_done(struct cn_quorum_waiter *w, const struct cn_ctl_answer *a)
{
    struct cfg_waiter *cw = (struct cfg_waiter *)w;
    struct cfg_call *c = cw->c;
    *c->code[cw->idx] = a->error;
    if (a->error && a->message)
        *c->message[cw->idx] = cn_req_str(c->req, a->message);
    cfg_answered(c);
}

/* Sends the marked resources to this node's controller, or answers
 * NOT_CONTROLLER for them, or answers when none is marked.  Returns true
 * when none of that applies: the caller forwards them. */
static bool cfg_route(struct cfg_call *c, bool validate_only)
{
    int32_t ngo = 0;
    for (int32_t i = 0; i < c->n; i++)
        ngo += c->go[i];
    if (ngo == 0) {
        cfg_finish(c);
        return false;
    }
    if (cn_quorum_leads(c->b->quorum)) {
        c->pending = 1;
        cn_req_park(c->req);
        for (int32_t i = 0; i < c->n; i++) {
            if (!c->go[i])
                continue;
            struct cfg_waiter *w = cn_arena_calloc(&c->req->arena, 1,
                                                   sizeof *w);
            if (!w) {
                *c->code[i] = KAFKA_UNKNOWN_SERVER_ERROR;
                continue;
            }
            struct cn_ctl_event ev;
            memset(&ev, 0, sizeof ev);
            ev.kind = CN_CTE_ALTER_TOPIC_CONFIGS;
            w->w.done = cfg_done;
            w->c = c;
            w->idx = i;
            c->pending++;
            ev.u.alter.name = c->names[i];
            ev.u.alter.configs = c->kvs[i];
            ev.u.alter.nconfigs = c->nkvs[i];
            ev.u.alter.validate_only = validate_only;
            cn_quorum_submit(c->b->quorum, &ev, &w->w);
        }
        cfg_answered(c);
        return false;
    }
    if (cn_req_on_controller_listener(c->b, c->req)) {
        for (int32_t i = 0; i < c->n; i++)
            if (c->go[i])
                *c->code[i] = KAFKA_NOT_CONTROLLER;
        cfg_finish(c);
        return false;
    }
    return true;
}

/* Resource i's result from the controller: its code and message (found),
 * or the call's failure. */
static void cfg_copy_back(struct cfg_call *c, int32_t i, int err, bool found,
                          int16_t code, struct cn_bytes message)
{
    if (!found) {
        const char *msg = "The controller did not answer for this resource.";
        *c->code[i] = err ? cn_ctlcall_error(err, &msg)
                          : KAFKA_UNKNOWN_SERVER_ERROR;
        *c->message[i] = cn_req_str(c->req, msg);
        return;
    }
    *c->code[i] = code;
    *c->message[i] = cn_bytes_is_null(message)
                         ? CN_BYTES_NULL
                         : cn_bytes_str(
                               cn_arena_strdup(&c->req->arena, message));
}

/* Kafka's default request.timeout.ms: the Alter APIs carry no timeout. */
#define CFG_FORWARD_TIMEOUT_MS 30000

static void ac_encode(struct cfg_call *c)
{
    cn_resp_begin(c->req, &c->h);
    cn_alter_configs_response_encode(&c->req->resp, c->h.api_version, c->rs);
    cn_req_done(c->req);
}

static bool ac_not_controller(const void *response)
{
    const struct cn_alter_configs_response *rs = response;
    for (int32_t i = 0; i < rs->responses_len; i++)
        if (rs->responses[i].error_code == KAFKA_NOT_CONTROLLER)
            return true;
    return false;
}

static void ac_forwarded(void *arg, int err, const void *response,
                         struct cn_arena *arena)
{
    (void)arena;
    struct cfg_call *c = arg;
    struct cn_alter_configs_response *rs = c->rs;
    const struct cn_alter_configs_response *fr = response;
    for (int32_t j = 0; j < c->nfwd; j++) {
        int32_t i = c->fwd_idx[j];
        const struct cn_alter_configs_response_alter_configs_resource_response
            *f = NULL;
        for (int32_t k = 0; !err && k < fr->responses_len && !f; k++)
            if (fr->responses[k].resource_type == RESOURCE_TOPIC &&
                cn_bytes_eq(fr->responses[k].resource_name,
                            rs->responses[i].resource_name))
                f = &fr->responses[k];
        cfg_copy_back(c, i, err, f != NULL, f ? f->error_code : 0,
                      f ? f->error_message : CN_BYTES_NULL);
    }
    cfg_finish(c);
}

static void ac_forward(struct cfg_call *c,
                       const struct cn_alter_configs_request *rq)
{
    struct cn_alter_configs_request *fq = cn_arena_calloc(&c->req->arena, 1,
                                                          sizeof *fq);
    if (!fq ||
        !(fq->resources = cn_arena_calloc(&c->req->arena, (size_t)c->n + 1,
                                          sizeof *fq->resources))) {
        cn_req_bad(c->req, &c->h, CN_ENOMEM);
        return;
    }
    fq->validate_only = rq->validate_only;
    for (int32_t i = 0; i < c->n; i++)
        if (c->go[i]) {
            c->fwd_idx[fq->resources_len] = i;
            fq->resources[fq->resources_len++] = rq->resources[i];
        }
    c->nfwd = fq->resources_len;
    cn_req_park(c->req);
    if (cn_ctlcall(c->b, CN_API_ALTER_CONFIGS, c->h.api_version, fq,
                   CFG_FORWARD_TIMEOUT_MS, ac_not_controller, ac_forwarded,
                   c) != 0)
        ac_forwarded(c, -ECONNREFUSED, NULL, NULL);
}

static void iac_encode(struct cfg_call *c)
{
    cn_resp_begin(c->req, &c->h);
    cn_incremental_alter_configs_response_encode(&c->req->resp,
                                                 c->h.api_version, c->rs);
    cn_req_done(c->req);
}

static bool iac_not_controller(const void *response)
{
    const struct cn_incremental_alter_configs_response *rs = response;
    for (int32_t i = 0; i < rs->responses_len; i++)
        if (rs->responses[i].error_code == KAFKA_NOT_CONTROLLER)
            return true;
    return false;
}

static void iac_forwarded(void *arg, int err, const void *response,
                          struct cn_arena *arena)
{
    (void)arena;
    struct cfg_call *c = arg;
    struct cn_incremental_alter_configs_response *rs = c->rs;
    const struct cn_incremental_alter_configs_response *fr = response;
    for (int32_t j = 0; j < c->nfwd; j++) {
        int32_t i = c->fwd_idx[j];
        const struct
            cn_incremental_alter_configs_response_alter_configs_resource_response
                *f = NULL;
        for (int32_t k = 0; !err && k < fr->responses_len && !f; k++)
            if (fr->responses[k].resource_type == RESOURCE_TOPIC &&
                cn_bytes_eq(fr->responses[k].resource_name,
                            rs->responses[i].resource_name))
                f = &fr->responses[k];
        cfg_copy_back(c, i, err, f != NULL, f ? f->error_code : 0,
                      f ? f->error_message : CN_BYTES_NULL);
    }
    cfg_finish(c);
}

static void iac_forward(struct cfg_call *c,
                        const struct cn_incremental_alter_configs_request *rq)
{
    struct cn_incremental_alter_configs_request *fq =
        cn_arena_calloc(&c->req->arena, 1, sizeof *fq);
    if (!fq ||
        !(fq->resources = cn_arena_calloc(&c->req->arena, (size_t)c->n + 1,
                                          sizeof *fq->resources))) {
        cn_req_bad(c->req, &c->h, CN_ENOMEM);
        return;
    }
    fq->validate_only = rq->validate_only;
    for (int32_t i = 0; i < c->n; i++)
        if (c->go[i]) {
            c->fwd_idx[fq->resources_len] = i;
            fq->resources[fq->resources_len++] = rq->resources[i];
        }
    c->nfwd = fq->resources_len;
    cn_req_park(c->req);
    if (cn_ctlcall(c->b, CN_API_INCREMENTAL_ALTER_CONFIGS, c->h.api_version,
                   fq, CFG_FORWARD_TIMEOUT_MS, iac_not_controller,
                   iac_forwarded, c) != 0)
        iac_forwarded(c, -ECONNREFUSED, NULL, NULL);
}

void cn_h_alter_configs(struct cn_broker *b, struct cn_req *req,
                        const struct cn_req_header *h, struct cn_rd *body)
{
    struct cn_alter_configs_request rq;
    int err = cn_alter_configs_request_decode(body, &req->arena,
                                              h->api_version, &rq);
    if (err) {
        cn_req_bad(req, h, err);
        return;
    }
    struct cn_alter_configs_response rs;
    cn_alter_configs_response_init(&rs);
    int32_t n = rq.resources_len > 0 ? rq.resources_len : 0;
    rs.responses = cn_arena_calloc(&req->arena, (size_t)n + 1,
                                   sizeof *rs.responses);
    if (!rs.responses) {
        cn_req_bad(req, h, CN_ENOMEM);
        return;
    }
    rs.responses_len = n;
    struct cfg_call *c = NULL;
    if (b->quorum &&
        !(c = cfg_new(b, req, h, n, cn_arena_calloc(&req->arena, 1, sizeof rs),
                      ac_encode))) {
        cn_req_bad(req, h, CN_ENOMEM);
        return;
    }
    for (int32_t i = 0; i < n; i++) {
        const struct cn_alter_configs_request_alter_configs_resource *qr =
            &rq.resources[i];
        struct cn_alter_configs_response_alter_configs_resource_response *r =
            &rs.responses[i];
        cn_alter_configs_response_alter_configs_resource_response_init(r);
        r->resource_type = qr->resource_type;
        r->resource_name = qr->resource_name;
        int32_t nc = qr->configs_len > 0 ? qr->configs_len : 0;
        struct config_change *ch = cn_arena_calloc(&req->arena, (size_t)nc + 1,
                                                   sizeof *ch);
        if (!ch) {
            cn_req_bad(req, h, CN_ENOMEM);
            return;
        }
        for (int32_t j = 0; j < nc; j++) {
            ch[j].name = qr->configs[j].name;
            ch[j].value = qr->configs[j].value;
            ch[j].op = OP_SET;
        }
        char msg[MSG_MAX] = "";
        if (c) {
            c->code[i] = &r->error_code;
            c->message[i] = &r->error_message;
        }
        if (c && qr->resource_type == RESOURCE_TOPIC) {
            r->error_code = cfg_topic(c, i, qr->resource_name, ch, nc, true,
                                      msg);
            if (r->error_code && msg[0])
                r->error_message = cn_req_str(req, msg);
            continue;
        }
        r->error_code = config_authz(b, req, CN_ACL_OP_ALTER_CONFIGS,
                                     qr->resource_type, qr->resource_name);
        if (r->error_code)
            continue;
        r->error_code = alter_resource(b, req, qr->resource_type,
                                       qr->resource_name, ch, nc, true,
                                       rq.validate_only, msg);
        if (r->error_code)
            r->error_message = cn_req_str(req, msg);
    }
    if (c) {
        *(struct cn_alter_configs_response *)c->rs = rs;
        if (cfg_route(c, rq.validate_only))
            ac_forward(c, &rq);
        return;
    }
    cn_resp_begin(req, h);
    cn_alter_configs_response_encode(&req->resp, h->api_version, &rs);
    cn_req_done(req);
}

void cn_h_incremental_alter_configs(struct cn_broker *b, struct cn_req *req,
                                    const struct cn_req_header *h,
                                    struct cn_rd *body)
{
    struct cn_incremental_alter_configs_request rq;
    int err = cn_incremental_alter_configs_request_decode(body, &req->arena,
                                                          h->api_version, &rq);
    if (err) {
        cn_req_bad(req, h, err);
        return;
    }
    struct cn_incremental_alter_configs_response rs;
    cn_incremental_alter_configs_response_init(&rs);
    int32_t n = rq.resources_len > 0 ? rq.resources_len : 0;
    rs.responses = cn_arena_calloc(&req->arena, (size_t)n + 1,
                                   sizeof *rs.responses);
    if (!rs.responses) {
        cn_req_bad(req, h, CN_ENOMEM);
        return;
    }
    rs.responses_len = n;
    struct cfg_call *c = NULL;
    if (b->quorum &&
        !(c = cfg_new(b, req, h, n, cn_arena_calloc(&req->arena, 1, sizeof rs),
                      iac_encode))) {
        cn_req_bad(req, h, CN_ENOMEM);
        return;
    }
    for (int32_t i = 0; i < n; i++) {
        const struct
            cn_incremental_alter_configs_request_alter_configs_resource *qr =
                &rq.resources[i];
        struct
            cn_incremental_alter_configs_response_alter_configs_resource_response
                *r = &rs.responses[i];
        cn_incremental_alter_configs_response_alter_configs_resource_response_init(
            r);
        r->resource_type = qr->resource_type;
        r->resource_name = qr->resource_name;
        int32_t nc = qr->configs_len > 0 ? qr->configs_len : 0;
        struct config_change *ch = cn_arena_calloc(&req->arena, (size_t)nc + 1,
                                                   sizeof *ch);
        if (!ch) {
            cn_req_bad(req, h, CN_ENOMEM);
            return;
        }
        for (int32_t j = 0; j < nc; j++) {
            ch[j].name = qr->configs[j].name;
            ch[j].value = qr->configs[j].value;
            ch[j].op = qr->configs[j].config_operation;
        }
        char msg[MSG_MAX] = "";
        if (c) {
            c->code[i] = &r->error_code;
            c->message[i] = &r->error_message;
        }
        if (c && qr->resource_type == RESOURCE_TOPIC) {
            r->error_code = cfg_topic(c, i, qr->resource_name, ch, nc, false,
                                      msg);
            if (r->error_code && msg[0])
                r->error_message = cn_req_str(req, msg);
            continue;
        }
        r->error_code = config_authz(b, req, CN_ACL_OP_ALTER_CONFIGS,
                                     qr->resource_type, qr->resource_name);
        if (r->error_code)
            continue;
        r->error_code = alter_resource(b, req, qr->resource_type,
                                       qr->resource_name, ch, nc, false,
                                       rq.validate_only, msg);
        if (r->error_code)
            r->error_message = cn_req_str(req, msg);
    }
    if (c) {
        *(struct cn_incremental_alter_configs_response *)c->rs = rs;
        if (cfg_route(c, rq.validate_only))
            iac_forward(c, &rq);
        return;
    }
    cn_resp_begin(req, h);
    cn_incremental_alter_configs_response_encode(&req->resp, h->api_version,
                                                 &rs);
    cn_req_done(req);
}
