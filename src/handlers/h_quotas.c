/*
 * h_quotas.c - client quotas in the broker: DescribeClientQuotas (48),
 * AlterClientQuotas (49), the durable store <log.dirs>/client-quotas,
 * and the calls Produce, Fetch and dispatch make to measure and throttle.
 *
 * Kafka's checks, read from its source (KafkaApis, ClientQuotasImage,
 * ClientQuotaControlManager): Describe needs DESCRIBE_CONFIGS on the
 * cluster, Alter ALTER_CONFIGS; entity types user, client-id (ip is
 * Kafka's too, for connection_creation_rate, which Cairn does not have);
 * a bad entity or key fails that entity only.
 *
 * An alteration is written (temporary file, fsync, rename) before it is
 * answered; if the write fails the values are put back as they were and
 * the altered entities answer UNKNOWN_SERVER_ERROR.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "node/authz.h"
#include "base/clock.h"
#include "base/say.h"
#include "handlers/handlers.h"
#include "log/file.h"
#include "proto/header.h"
#include "proto/kerr.h"
#include "proto/quotas.h"
#include "quota/quota_store.h"
#include "handlers/quotas.h"

#define QUOTA_FILE "client-quotas"

int cn_quotas_open(struct cn_broker *b, char *err, size_t err_len)
{
    struct cn_quota_cfg cfg = {
        .window_num = b->cfg->quota_window_num,
        .window_ms = (int64_t)b->cfg->quota_window_size_seconds * 1000,
    };
    int rc = cn_quota_new(&cfg, &b->quota);
    if (rc) {
        snprintf(err, err_len, "client quotas: %s", cn_strerror(rc));
        return rc;
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", b->data_dir, QUOTA_FILE);
    uint8_t *buf = NULL;
    size_t len = 0;
    rc = cn_file_read_all(path, &buf, &len);
    if (rc == -ENOENT)
        return 0;
    if (!rc)
        rc = cn_quota_store_decode(buf, len, b->quota);
    free(buf);
    if (rc) {
        snprintf(err, err_len,
                 "client quota store %s is %s; refusing to start with "
                 "quotas missing (restore it from a backup, or remove it "
                 "to start with no quotas)",
                 path, rc == CN_ECORRUPT ? "damaged" : cn_strerror(rc));
        cn_quota_free(b->quota);
        b->quota = NULL;
        return rc;
    }
    CN_INFO("client quotas: %zu entities from %s", cn_quota_count(b->quota),
            path);
    return 0;
}

void cn_quotas_close(struct cn_broker *b)
{
    cn_quota_free(b->quota);
    b->quota = NULL;
}

static int store_write(struct cn_broker *b)
{
    uint8_t *img = NULL;
    size_t len = 0;
    int rc = cn_quota_store_encode(b->quota, &img, &len);
    if (!rc)
        rc = cn_file_write_atomic(b->data_dir, QUOTA_FILE, img, len);
    free(img);
    return rc;
}

/* ---- measuring and throttling ----------------------------------------- */

/* Kafka's quota user is the principal's name: "User:alice" is "alice". */
static const char *quota_user(struct cn_req *req)
{
    const char *p = cn_req_principal(req);
    return strncmp(p, "User:", 5) == 0 ? p + 5 : p;
}

static void client_id(const struct cn_req_header *h, char *out, size_t n)
{
    if (!cn_wire_cstr(h->client_id, out, n))
        out[0] = '\0';
}

static int64_t quota_record(struct cn_broker *b, struct cn_req *req,
                            const struct cn_req_header *h, enum cn_quota_key k,
                            double value)
{
    if (!b->quota || cn_quota_count(b->quota) == 0)
        return 0;
    char cid[CN_QUOTA_NAME_MAX];
    client_id(h, cid, sizeof cid);
    int64_t ms = cn_quota_record(b->quota, k, quota_user(req), cid, value,
                                 cn_clock_mono_ms());
    if (ms > 0) {
        b->quota_throttled[k]++;
        b->quota_throttle_ms[k] += (uint64_t)ms;
    }
    return ms;
}

/* The longer of two throttles; the connection is held back for it. */
static int32_t throttle_apply(struct cn_req *req, int64_t a, int64_t b)
{
    int64_t ms = a > b ? a : b;
    if (ms > INT32_MAX)
        ms = INT32_MAX;
    if (ms > 0)
        cn_req_throttle(req, ms);
    return (int32_t)ms;
}

int32_t cn_quota_produce_answer(struct cn_broker *b, struct cn_req *req,
                                const struct cn_req_header *h, size_t bytes,
                                bool acks0)
{
    struct cn_quota_ids id;
    if (!cn_quota_ids_get(b, req, h, &id))
        return 0;
    int64_t bw = quota_record(b, req, h, CN_QK_PRODUCE, (double)bytes);
    /* Kafka exempts acks=0 from the request quota (there is no answer to
     * carry the time), not from the byte rate. */
    int64_t rq = acks0 ? 0 : cn_quota_request_answer(b, req, h);
    return throttle_apply(req, bw, rq);
}

int32_t cn_quota_fetch_answer(struct cn_broker *b, struct cn_req *req,
                              const struct cn_req_header *h, size_t bytes)
{
    struct cn_quota_ids id;
    if (!cn_quota_ids_get(b, req, h, &id))
        return 0;
    int64_t bw = quota_record(b, req, h, CN_QK_FETCH, (double)bytes);
    int64_t rq = cn_quota_request_answer(b, req, h);
    if (bw > 0 || rq > 0)
        /* The answer goes out empty: what it would have carried is not
         * counted (Kafka's unrecordQuotaSensor). */
        cn_quota_unrecord(b->quota, CN_QK_FETCH, id.user, id.client,
                          (double)bytes, cn_clock_mono_ms());
    return throttle_apply(req, bw, rq);
}

int64_t cn_quota_fetch_max_bytes(struct cn_broker *b, struct cn_req *req,
                                 const struct cn_req_header *h)
{
    if (!b->quota || cn_quota_count(b->quota) == 0)
        return -1;
    char cid[CN_QUOTA_NAME_MAX];
    client_id(h, cid, sizeof cid);
    double m = cn_quota_max_in_window(b->quota, CN_QK_FETCH, quota_user(req),
                                      cid);
    if (m < 0)
        return -1;
    return m >= (double)INT32_MAX ? INT32_MAX : (int64_t)m;
}

bool cn_quota_ids_get(struct cn_broker *b, struct cn_req *req,
                      const struct cn_req_header *h, struct cn_quota_ids *out)
{
    if (!b->quota || cn_quota_count(b->quota) == 0)
        return false;
    /* Before SASL authentication Kafka's authenticator answers
     * (ApiVersions included) and no quota applies: there is no user. */
    if (cn_req_conn_sasl(req) && !cn_req_authenticated(req))
        return false;
    snprintf(out->user, sizeof out->user, "%s", quota_user(req));
    client_id(h, out->client, sizeof out->client);
    return true;
}

static int32_t request_record(struct cn_broker *b,
                              const struct cn_quota_ids *id, double pct)
{
    int64_t ms = cn_quota_record(b->quota, CN_QK_REQUEST, id->user, id->client,
                                 pct, cn_clock_mono_ms());
    return (int32_t)ms;
}

int32_t cn_quota_request_throttle(struct cn_broker *b,
                                  const struct cn_quota_ids *id)
{
    int32_t ms = request_record(b, id, 0);
    if (ms > 0) {
        b->quota_throttled[CN_QK_REQUEST]++;
        b->quota_throttle_ms[CN_QK_REQUEST] += (uint64_t)ms;
    }
    return ms;
}

/* Kafka records request-thread time as a percentage of one thread:
 * nanos * 100 / 1e9, as a rate per second.  Returns the throttle after. */
static int32_t request_time(struct cn_broker *b, const struct cn_quota_ids *id,
                            int64_t us)
{
    return request_record(b, id, (double)(us < 0 ? 0 : us) * 100.0 / 1e6);
}

/* Kafka answers these without recording them in the request quota:
 * cluster actions (WriteTxnMarkers, sendResponseExemptThrottle) and the
 * SASL exchange, which Kafka's authenticator handles before any quota
 * applies. */
static bool request_exempt(int16_t key)
{
    return key == CN_API_WRITE_TXN_MARKERS || key == CN_API_SASL_HANDSHAKE ||
           key == CN_API_SASL_AUTHENTICATE;
}

/* Their handlers put throttle_time_ms in place (not the first field, or
 * Fetch's answer that drops its records when throttled). */
static bool request_self_placed(int16_t key)
{
    return key == CN_API_PRODUCE || key == CN_API_FETCH ||
           key == CN_API_API_VERSIONS || key == CN_API_OFFSET_DELETE;
}

void cn_quota_request_begin(struct cn_broker *b, struct cn_req *req,
                            const struct cn_req_header *h)
{
    b->quota_cur.req = NULL;
    if (request_exempt(h->api_key) ||
        !cn_quota_ids_get(b, req, h, &b->quota_cur.id))
        return;
    b->quota_cur.req = req;
    b->quota_cur.answered = false;
    b->quota_cur.since_us = cn_clock_mono_us();
}

void cn_quota_request_end(struct cn_broker *b)
{
    if (!b->quota_cur.req)
        return;
    b->quota_cur.req = NULL;
    if (!b->quota || cn_quota_count(b->quota) == 0)
        return;
    /* The rest of the handler's pass after its answer, or the first pass
     * of a request answered later: counted, its throttle goes to a later
     * answer (Kafka's recordNoThrottle). */
    request_time(b, &b->quota_cur.id,
                 cn_clock_mono_us() - b->quota_cur.since_us);
}

/* Records the time of the request being dispatched, if req is it, and
 * returns the throttle; else the throttle the rate asks for now. */
static int32_t request_answer_ids(struct cn_broker *b, struct cn_req *req,
                                  const struct cn_quota_ids *id)
{
    int32_t ms;
    if (b->quota_cur.req == req && !b->quota_cur.answered) {
        int64_t now = cn_clock_mono_us();
        ms = request_time(b, id, now - b->quota_cur.since_us);
        b->quota_cur.answered = true;
        b->quota_cur.since_us = now;
    } else {
        ms = request_record(b, id, 0);
    }
    if (ms > 0) {
        b->quota_throttled[CN_QK_REQUEST]++;
        b->quota_throttle_ms[CN_QK_REQUEST] += (uint64_t)ms;
        cn_req_throttle(req, ms);
    }
    return ms;
}

int32_t cn_quota_request_answer(struct cn_broker *b, struct cn_req *req,
                                const struct cn_req_header *h)
{
    struct cn_quota_ids id;
    if (!cn_quota_ids_get(b, req, h, &id))
        return 0;
    return request_answer_ids(b, req, &id);
}

/* The version whose wire format the answer has (dispatch.c's aliases). */
static int16_t wire_version(int16_t key, int16_t version)
{
    if (key == CN_API_TXN_OFFSET_COMMIT && version == 5)
        return 4;
    return version;
}

void cn_quota_request_done(struct cn_broker *b, struct cn_req *req)
{
    int16_t key = req->api_key;
    bool cur = b->quota_cur.req == req && !b->quota_cur.answered;
    if (req->no_response) {
        /* acks=0 and answers never sent are not counted, as in Kafka
         * (sendNoOpResponseExemptThrottle). */
        if (cur)
            b->quota_cur.req = NULL;
        return;
    }
    if (key < 0 || request_exempt(key) || request_self_placed(key) ||
        !b->quota || cn_quota_count(b->quota) == 0)
        return;
    struct cn_quota_ids id;
    if (cur) {
        id = b->quota_cur.id;
    } else {
        struct cn_rd rd;
        struct cn_req_header h;
        cn_rd_init(&rd, req->frame, req->frame_len);
        if (cn_req_header_decode(&rd, &h) < 0 ||
            !cn_quota_ids_get(b, req, &h, &id))
            return;
    }
    int32_t ms = request_answer_ids(b, req, &id);
    int16_t v = wire_version(key, req->api_version);
    if (ms <= 0 || !cn_resp_throttle_first(key, v))
        return; /* a version without the field: muted all the same */
    size_t off = 4 + (cn_resp_header_version(key, v) >= 1 ? 1 : 0);
    if (req->resp.err || req->resp.len < off + 4)
        return;
    const uint8_t *p = req->resp.buf + off;
    int32_t had = (int32_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
                            (uint32_t)p[2] << 8 | (uint32_t)p[3]);
    if (ms > had)
        cn_wr_patch_i32(&req->resp, off, ms);
}

/* ---- entities on the wire ---------------------------------------------- */

/* Kafka's validateEntity; 0 and *e filled, or a Kafka error and msg. */
static int16_t entity_from_wire(const struct cn_cq_entity *ents, int32_t n,
                                struct cn_quota_entity *e, char *msg,
                                size_t msg_len)
{
    memset(e, 0, sizeof *e);
    if (n <= 0) {
        snprintf(msg, msg_len, "Invalid empty client quota entity");
        return KAFKA_INVALID_REQUEST;
    }
    for (int32_t i = 0; i < n; i++) {
        const struct cn_cq_entity *p = &ents[i];
        enum cn_quota_part *part;
        char *name;
        if (cn_bytes_eq_str(p->type, CN_QUOTA_TYPE_USER)) {
            part = &e->user_part;
            name = e->user;
        } else if (cn_bytes_eq_str(p->type, CN_QUOTA_TYPE_CLIENT)) {
            part = &e->client_part;
            name = e->client;
        } else if (cn_bytes_eq_str(p->type, "ip")) {
            snprintf(msg, msg_len,
                     "Cairn has no ip quotas (connection_creation_rate)");
            return KAFKA_INVALID_REQUEST;
        } else {
            snprintf(msg, msg_len, "Unhandled client quota entity type: %.*s",
                     p->type.len > 0 ? (int)p->type.len : 0,
                     p->type.len > 0 ? (const char *)p->type.ptr : "");
            return KAFKA_INVALID_REQUEST;
        }
        /* A type given twice: the last one counts (Kafka reads the
         * entity into a map). */
        if (p->name.len < 0) {
            *part = CN_QP_DEFAULT;
            continue;
        }
        if (p->name.len == 0) {
            snprintf(msg, msg_len, "Empty %.*s not supported",
                     (int)p->type.len, (const char *)p->type.ptr);
            return KAFKA_INVALID_REQUEST;
        }
        if ((size_t)p->name.len >= CN_QUOTA_NAME_MAX ||
            memchr(p->name.ptr, 0, (size_t)p->name.len)) {
            snprintf(msg, msg_len, "Invalid %.*s name", (int)p->type.len,
                     (const char *)p->type.ptr);
            return KAFKA_INVALID_REQUEST;
        }
        memcpy(name, p->name.ptr, (size_t)p->name.len);
        name[p->name.len] = '\0';
        *part = CN_QP_NAME;
    }
    return 0;
}

/* The wire form of e, in the arena. */
static int entity_to_wire(struct cn_req *req, const struct cn_quota_entity *e,
                          struct cn_cq_entity **out, int32_t *n)
{
    *out = cn_arena_calloc(&req->arena, 2, sizeof **out);
    if (!*out)
        return CN_ENOMEM;
    *n = 0;
    if (e->user_part != CN_QP_NONE) {
        (*out)[*n].type = cn_bytes_str(CN_QUOTA_TYPE_USER);
        (*out)[*n].name = e->user_part == CN_QP_NAME ? cn_req_str(req, e->user)
                                                     : CN_BYTES_NULL;
        ++*n;
    }
    if (e->client_part != CN_QP_NONE) {
        (*out)[*n].type = cn_bytes_str(CN_QUOTA_TYPE_CLIENT);
        (*out)[*n].name = e->client_part == CN_QP_NAME
                              ? cn_req_str(req, e->client)
                              : CN_BYTES_NULL;
        ++*n;
    }
    return 0;
}

/* ---- DescribeClientQuotas ---------------------------------------------- */

/* A filter name longer than any stored one: the part matches nothing. */
#define MATCH_NOTHING (-1)

/* One filter part: how an entity's user or client-id part must look. */
struct filt {
    bool used;
    int8_t match_type;
    char name[CN_QUOTA_NAME_MAX];
};

static bool part_matches(const struct filt *f, enum cn_quota_part part,
                         const char *name)
{
    if (!f->used)
        return true;
    if (part == CN_QP_NONE)
        return false;
    switch (f->match_type) {
    case MATCH_NOTHING: return false;
    case CN_CQ_MATCH_EXACT:
        return part == CN_QP_NAME && strcmp(name, f->name) == 0;
    case CN_CQ_MATCH_DEFAULT: return part == CN_QP_DEFAULT;
    default: return true; /* any: the entity has the type */
    }
}

static void dcq_answer(struct cn_req *req, const struct cn_req_header *h,
                       struct cn_describe_client_quotas_response *rs)
{
    if (!rs->error_code && !rs->error_message.ptr)
        rs->error_message = CN_BYTES_NULL;
    cn_resp_begin(req, h);
    cn_dcq_response_encode(&req->resp, h->api_version, rs);
    cn_req_done(req);
}

static void dcq_error(struct cn_req *req, const struct cn_req_header *h,
                      int16_t code, const char *msg)
{
    struct cn_describe_client_quotas_response rs = {0};
    rs.error_code = code;
    rs.error_message = msg ? cn_req_str(req, msg) : CN_BYTES_NULL;
    rs.entries_len = -1;
    dcq_answer(req, h, &rs);
}

void cn_h_describe_client_quotas(struct cn_broker *b, struct cn_req *req,
                                 const struct cn_req_header *h,
                                 struct cn_rd *body)
{
    struct cn_describe_client_quotas_request rq;
    int err = cn_dcq_request_decode(body, &req->arena, h->api_version, &rq);
    if (err) {
        cn_req_bad(req, h, err);
        return;
    }
    if (!cn_authz_cluster(b, req, CN_ACL_OP_DESCRIBE_CONFIGS)) {
        dcq_error(req, h, KAFKA_CLUSTER_AUTHORIZATION_FAILED,
                  "Cluster authorization failed.");
        return;
    }
    /* ClientQuotasImage.describe's checks, in its order. */
    struct filt fu = {0}, fc = {0};
    bool ip_used = false;
    char msg[512];
    for (int32_t i = 0; i < rq.components_len; i++) {
        const struct cn_dcq_component *c = &rq.components[i];
        const char *type = (const char *)c->entity_type.ptr;
        int tl = (int)c->entity_type.len;
        struct filt *f = NULL;
        if (tl == 0) {
            dcq_error(req, h, KAFKA_INVALID_REQUEST,
                      "Invalid empty entity type.");
            return;
        }
        if (cn_bytes_eq_str(c->entity_type, CN_QUOTA_TYPE_USER))
            f = &fu;
        else if (cn_bytes_eq_str(c->entity_type, CN_QUOTA_TYPE_CLIENT))
            f = &fc;
        if (f && f->used) {
            snprintf(msg, sizeof msg,
                     "Entity type %.*s cannot appear more than once in the "
                     "filter.",
                     tl, type);
            dcq_error(req, h, KAFKA_INVALID_REQUEST, msg);
            return;
        }
        bool ip = !f && cn_bytes_eq_str(c->entity_type, "ip");
        if (ip && ip_used) {
            dcq_error(req, h, KAFKA_INVALID_REQUEST,
                      "Entity type ip cannot appear more than once in the "
                      "filter.");
            return;
        }
        if (!f && !ip) {
            snprintf(msg, sizeof msg, "Unsupported entity type %.*s", tl,
                     type);
            dcq_error(req, h, KAFKA_UNSUPPORTED_VERSION, msg);
            return;
        }
        switch (c->match_type) {
        case CN_CQ_MATCH_EXACT:
            if (c->match.len < 0) {
                dcq_error(req, h, KAFKA_INVALID_REQUEST,
                          "Request specified MATCH_TYPE_EXACT, but set match "
                          "string to null.");
                return;
            }
            break;
        case CN_CQ_MATCH_DEFAULT:
        case CN_CQ_MATCH_ANY:
            if (c->match.len >= 0) {
                snprintf(msg, sizeof msg,
                         "Request specified MATCH_TYPE_%s, but also "
                         "specified a match string.",
                         c->match_type == CN_CQ_MATCH_DEFAULT ? "DEFAULT"
                                                              : "SPECIFIED");
                dcq_error(req, h, KAFKA_INVALID_REQUEST, msg);
                return;
            }
            break;
        default:
            snprintf(msg, sizeof msg, "Unknown match type %d", c->match_type);
            dcq_error(req, h, KAFKA_INVALID_REQUEST, msg);
            return;
        }
        if (ip) {
            ip_used = true; /* Cairn keeps no ip quotas: matches none */
            continue;
        }
        f->used = true;
        f->match_type = c->match_type;
        if (c->match.len >= 0 &&
            !cn_wire_cstr(c->match, f->name, sizeof f->name)) {
            /* Longer than any name stored: matches nothing. */
            f->name[0] = '\0';
            f->match_type = MATCH_NOTHING;
        }
    }
    if (ip_used && (fu.used || fc.used)) {
        dcq_error(req, h, KAFKA_INVALID_REQUEST,
                  "Invalid entity filter component combination. IP filter "
                  "component should not be used with user or clientId "
                  "filter component.");
        return;
    }
    size_t n = ip_used ? 0 : cn_quota_count(b->quota);
    struct cn_describe_client_quotas_response rs = {0};
    rs.entries = n ? cn_arena_calloc(&req->arena, n, sizeof *rs.entries)
                   : NULL;
    if (n && !rs.entries) {
        cn_req_bad(req, h, CN_ENOMEM);
        return;
    }
    int nfilt = fu.used + fc.used;
    for (size_t i = 0; i < n; i++) {
        double vals[CN_QK_COUNT];
        bool has[CN_QK_COUNT];
        const struct cn_quota_entity *e = cn_quota_at(b->quota, i, vals, has);
        int parts = (e->user_part != CN_QP_NONE) +
                    (e->client_part != CN_QP_NONE);
        if (rq.strict && parts != nfilt)
            continue;
        if (!part_matches(&fu, e->user_part, e->user) ||
            !part_matches(&fc, e->client_part, e->client))
            continue;
        struct cn_dcq_entry *en = &rs.entries[rs.entries_len];
        if (entity_to_wire(req, e, &en->entity, &en->entity_len) != 0) {
            cn_req_bad(req, h, CN_ENOMEM);
            return;
        }
        en->values = cn_arena_calloc(&req->arena, CN_QK_COUNT,
                                     sizeof *en->values);
        if (!en->values) {
            cn_req_bad(req, h, CN_ENOMEM);
            return;
        }
        for (int k = 0; k < CN_QK_COUNT; k++)
            if (has[k]) {
                en->values[en->values_len].key = cn_bytes_str(
                    cn_quota_key_name(k));
                en->values[en->values_len++].value = vals[k];
            }
        rs.entries_len++;
    }
    dcq_answer(req, h, &rs);
}

/* ---- AlterClientQuotas ------------------------------------------------- */

/* Kafka's validateQuotaKeyValue for one set operation. */
static int16_t op_check(const struct cn_acq_op *op, int *key, char *msg,
                        size_t msg_len)
{
    int k = cn_quota_key_find((const char *)op->key.ptr,
                              op->key.len > 0 ? (size_t)op->key.len : 0);
    *key = k;
    if (k < 0 && op->remove)
        return 0; /* removing what cannot be set: nothing to do (Kafka) */
    if (k < 0) {
        snprintf(msg, msg_len, "Invalid configuration key %.*s",
                 op->key.len > 0 ? (int)op->key.len : 0,
                 op->key.len > 0 ? (const char *)op->key.ptr : "");
        return KAFKA_INVALID_REQUEST;
    }
    *key = k;
    if (op->remove)
        return 0;
    if (k == CN_QK_MUTATION) {
        snprintf(msg, msg_len,
                 "Cairn does not enforce controller_mutation_rate (KIP-599); "
                 "it is not accepted rather than silently ignored");
        return KAFKA_INVALID_REQUEST;
    }
    if (!isfinite(op->value) || op->value <= 0) {
        snprintf(msg, msg_len, "Quota %s must be greater than 0",
                 cn_quota_key_name(k));
        return KAFKA_INVALID_REQUEST;
    }
    if (cn_quota_key_is_long((enum cn_quota_key)k)) {
        if (op->value > 9.2233720368547758e18) {
            snprintf(msg, msg_len,
                     "Proposed value for %s is too large for a LONG.",
                     cn_quota_key_name(k));
            return KAFKA_INVALID_REQUEST;
        }
        double eps = 1e-6;
        int64_t lv = (int64_t)(op->value + eps);
        if (fabs((double)lv - op->value) > eps) {
            snprintf(msg, msg_len, "%s cannot be a fractional value.",
                     cn_quota_key_name(k));
            return KAFKA_INVALID_REQUEST;
        }
    }
    return 0;
}

void cn_h_alter_client_quotas(struct cn_broker *b, struct cn_req *req,
                              const struct cn_req_header *h,
                              struct cn_rd *body)
{
    struct cn_alter_client_quotas_request rq;
    int err = cn_acq_request_decode(body, &req->arena, h->api_version, &rq);
    if (err) {
        cn_req_bad(req, h, err);
        return;
    }
    struct cn_alter_client_quotas_response rs = {0};
    rs.entries_len = rq.entries_len;
    rs.entries = rq.entries_len
                     ? cn_arena_calloc(&req->arena, (size_t)rq.entries_len,
                                       sizeof *rs.entries)
                     : NULL;
    if (rq.entries_len && !rs.entries) {
        cn_req_bad(req, h, CN_ENOMEM);
        return;
    }
    bool authorized = cn_authz_cluster(b, req, CN_ACL_OP_ALTER_CONFIGS);
    /* The image before, to put back if the write fails. */
    uint8_t *before = NULL;
    size_t before_len = 0;
    bool changed = false;
    char msg[512];
    for (int32_t i = 0; i < rq.entries_len; i++) {
        const struct cn_acq_entry *en = &rq.entries[i];
        struct cn_acq_result *r = &rs.entries[i];
        r->entity = en->entity;
        r->entity_len = en->entity_len;
        r->error_message = CN_BYTES_NULL;
        if (!authorized) {
            r->error_code = KAFKA_CLUSTER_AUTHORIZATION_FAILED;
            r->error_message = cn_bytes_str("Cluster authorization failed.");
            continue;
        }
        struct cn_quota_entity e;
        int16_t code = entity_from_wire(en->entity, en->entity_len, &e, msg,
                                        sizeof msg);
        /* Answered with the entity as read (a repeated type once). */
        if (!code && entity_to_wire(req, &e, &r->entity, &r->entity_len)) {
            cn_req_bad(req, h, CN_ENOMEM);
            free(before);
            return;
        }
        int keys[64];
        for (int32_t j = 0; !code && j < en->ops_len; j++) {
            if (j >= 64) {
                snprintf(msg, sizeof msg, "Too many quota operations");
                code = KAFKA_INVALID_REQUEST;
                break;
            }
            code = op_check(&en->ops[j], &keys[j], msg, sizeof msg);
        }
        if (code) {
            r->error_code = code;
            r->error_message = cn_req_str(req, msg);
            continue;
        }
        if (rq.validate_only || en->ops_len == 0)
            continue;
        if (!changed &&
            cn_quota_store_encode(b->quota, &before, &before_len) != 0) {
            r->error_code = KAFKA_UNKNOWN_SERVER_ERROR;
            continue;
        }
        for (int32_t j = 0; j < en->ops_len; j++)
            if (keys[j] >= 0)
                cn_quota_set(b->quota, &e, (enum cn_quota_key)keys[j],
                             en->ops[j].value, en->ops[j].remove);
        changed = true;
    }
    if (changed) {
        int rc = store_write(b);
        if (rc) {
            CN_ERROR("cannot write %s/%s: %s; the quota change is undone",
                     b->data_dir, QUOTA_FILE, cn_strerror(rc));
            cn_quota_clear(b->quota);
            cn_quota_store_decode(before, before_len, b->quota);
            for (int32_t i = 0; i < rs.entries_len; i++)
                if (!rs.entries[i].error_code) {
                    rs.entries[i].error_code = KAFKA_UNKNOWN_SERVER_ERROR;
                    rs.entries[i].error_message = cn_bytes_str(
                        "the quota store could not be written");
                }
        } else {
            CN_INFO("client quotas altered by %s: %zu entities now",
                    cn_req_principal(req), cn_quota_count(b->quota));
        }
    }
    free(before);
    cn_resp_begin(req, h);
    cn_acq_response_encode(&req->resp, h->api_version, &rs);
    cn_req_done(req);
}
