/*
 * h_acls.c - CreateAcls, DescribeAcls and DeleteAcls: changes reach the
 * ACL store (node/authz.c) on disk before they take effect.
 */
#include <string.h>

#include "base/rand.h"
#include "base/say.h"
#include "handlers/handlers.h"
#include "node/authz.h"
#include "proto/gen/msgs.h"
#include "proto/kerr.h"

static struct cn_bytes msg_bytes(struct cn_req *req, const char *m)
{
    return m ? cn_req_str(req, m) : CN_BYTES_NULL;
}

/* Why the ACL APIs refuse this request as a whole, or KAFKA_NONE: Kafka
 * answers SECURITY_DISABLED with no authorizer, and needs op (ALTER to
 * change, DESCRIBE to list) on the cluster. */
static int16_t acl_api_refusal(struct cn_broker *b, struct cn_req *req,
                               enum cn_acl_op op, const char **msg)
{
    if (!b->authz.enabled) {
        *msg = "No Authorizer is configured.";
        return KAFKA_SECURITY_DISABLED;
    }
    if (!cn_authz_cluster(b, req, op))
        return KAFKA_CLUSTER_AUTHORIZATION_FAILED;
    return KAFKA_NONE;
}

void cn_h_create_acls(struct cn_broker *b, struct cn_req *req,
                      const struct cn_req_header *h, struct cn_rd *body)
{
    struct cn_create_acls_request rq;
    int err = cn_create_acls_request_decode(body, &req->arena, h->api_version,
                                            &rq);
    if (err) {
        cn_req_bad(req, h, err);
        return;
    }
    struct cn_create_acls_response rs;
    cn_create_acls_response_init(&rs);
    int32_t n = rq.creations_len > 0 ? rq.creations_len : 0;
    rs.results = cn_arena_calloc(&req->arena, (size_t)n + 1,
                                 sizeof *rs.results);
    if (!rs.results) {
        cn_req_bad(req, h, CN_ENOMEM);
        return;
    }
    rs.results_len = n;
    const char *all_msg = NULL;
    int16_t all_err = acl_api_refusal(b, req, CN_ACL_OP_ALTER, &all_msg);
    struct cn_acl_set next;
    bool changed = false;
    if (!all_err && cn_authz_set_copy(&next, &b->authz.acls) != 0) {
        all_err = KAFKA_UNKNOWN_SERVER_ERROR;
        all_msg = "Out of memory.";
    }
    for (int32_t i = 0; i < n; i++) {
        cn_create_acls_response_acl_creation_result_init(&rs.results[i]);
        if (all_err) {
            rs.results[i].error_code = all_err;
            rs.results[i].error_message = msg_bytes(req, all_msg);
            continue;
        }
        const struct cn_create_acls_request_acl_creation *c = &rq.creations[i];
        struct cn_acl_binding bd = {
            .rtype = c->resource_type,
            .pattern = h->api_version == 0 ? CN_ACL_PT_LITERAL
                                           : c->resource_pattern_type,
            .op = c->operation,
            .perm = c->permission_type,
            .name = cn_arena_strdup(&req->arena, c->resource_name),
            .principal = cn_arena_strdup(&req->arena, c->principal),
            .host = cn_arena_strdup(&req->arena, c->host),
        };
        if (cn_rand_bytes(bd.id, sizeof bd.id) != 0)
            memset(bd.id, 0, sizeof bd.id);
        const char *why = cn_acl_binding_invalid(&bd);
        if (why) {
            rs.results[i].error_code = KAFKA_INVALID_REQUEST;
            rs.results[i].error_message = msg_bytes(req, why);
            continue;
        }
        if (cn_acl_set_add(&next, &bd) != 0) {
            rs.results[i].error_code = KAFKA_UNKNOWN_SERVER_ERROR;
            continue;
        }
        changed = true;
    }
    if (!all_err) {
        if (changed && cn_authz_store_write(b, &next) != 0) {
            for (int32_t i = 0; i < n; i++)
                if (!rs.results[i].error_code) {
                    rs.results[i].error_code = KAFKA_KAFKA_STORAGE_ERROR;
                    rs.results[i].error_message =
                        msg_bytes(req, "Cannot persist ACLs.");
                }
            cn_acl_set_fini(&next);
        } else {
            if (changed)
                CN_INFO("ACLs changed by %s: %zu bindings",
                        cn_req_principal(req), next.n);
            struct cn_acl_set old = b->authz.acls;
            b->authz.acls = next;
            cn_acl_set_fini(&old);
        }
    }
    cn_resp_begin(req, h);
    cn_create_acls_response_encode(&req->resp, h->api_version, &rs);
    cn_req_done(req);
}

/* Filter fields from the wire; v0 knows only literal patterns. */
static void filter_from(struct cn_req *req, int16_t version,
                        struct cn_acl_filter *f, int8_t rt,
                        struct cn_bytes name, int8_t pt,
                        struct cn_bytes principal, struct cn_bytes host,
                        int8_t op, int8_t perm)
{
    f->rtype = rt;
    f->pattern = version == 0 ? CN_ACL_PT_LITERAL : pt;
    f->op = op;
    f->perm = perm;
    f->name = cn_arena_strdup(&req->arena, name);
    f->principal = cn_arena_strdup(&req->arena, principal);
    f->host = cn_arena_strdup(&req->arena, host);
}

void cn_h_describe_acls(struct cn_broker *b, struct cn_req *req,
                        const struct cn_req_header *h, struct cn_rd *body)
{
    struct cn_describe_acls_request rq;
    int err = cn_describe_acls_request_decode(body, &req->arena,
                                              h->api_version, &rq);
    if (err) {
        cn_req_bad(req, h, err);
        return;
    }
    struct cn_describe_acls_response rs;
    cn_describe_acls_response_init(&rs);
    struct cn_acl_filter f;
    filter_from(req, h->api_version, &f, rq.resource_type_filter,
                rq.resource_name_filter, rq.pattern_type_filter,
                rq.principal_filter, rq.host_filter, rq.operation,
                rq.permission_type);
    const char *why = cn_acl_filter_invalid(&f);
    const char *refused_msg = NULL;
    int16_t refused = acl_api_refusal(b, req, CN_ACL_OP_DESCRIBE,
                                      &refused_msg);
    if (refused) {
        rs.error_code = refused;
        if (refused_msg)
            rs.error_message = msg_bytes(req, refused_msg);
    } else if (why) {
        rs.error_code = KAFKA_INVALID_REQUEST;
        rs.error_message = msg_bytes(req, why);
    } else {
        /* One resource entry per binding: Kafka groups them by resource,
         * which clients flatten again; grouping adjacent equal ones keeps
         * the common case compact. */
        const struct cn_acl_set *s = &b->authz.acls;
        rs.resources = cn_arena_calloc(&req->arena, s->n + 1,
                                       sizeof *rs.resources);
        struct cn_describe_acls_response_acl_description *d =
            cn_arena_calloc(&req->arena, s->n + 1, sizeof *d);
        if (!rs.resources || !d) {
            cn_req_bad(req, h, CN_ENOMEM);
            return;
        }
        int32_t nr = 0;
        for (size_t i = 0; i < s->n; i++) {
            const struct cn_acl_binding *bd = &s->v[i];
            if (!cn_acl_filter_matches(&f, bd))
                continue;
            struct cn_describe_acls_response_describe_acls_resource *r =
                &rs.resources[nr++];
            cn_describe_acls_response_describe_acls_resource_init(r);
            r->resource_type = bd->rtype;
            r->resource_name = cn_bytes_str(bd->name);
            r->pattern_type = bd->pattern;
            r->acls = d++;
            r->acls_len = 1;
            cn_describe_acls_response_acl_description_init(r->acls);
            r->acls->principal = cn_bytes_str(bd->principal);
            r->acls->host = cn_bytes_str(bd->host);
            r->acls->operation = bd->op;
            r->acls->permission_type = bd->perm;
        }
        rs.resources_len = nr;
    }
    cn_resp_begin(req, h);
    cn_describe_acls_response_encode(&req->resp, h->api_version, &rs);
    cn_req_done(req);
}

void cn_h_delete_acls(struct cn_broker *b, struct cn_req *req,
                      const struct cn_req_header *h, struct cn_rd *body)
{
    struct cn_delete_acls_request rq;
    int err = cn_delete_acls_request_decode(body, &req->arena, h->api_version,
                                            &rq);
    if (err) {
        cn_req_bad(req, h, err);
        return;
    }
    struct cn_delete_acls_response rs;
    cn_delete_acls_response_init(&rs);
    int32_t n = rq.filters_len > 0 ? rq.filters_len : 0;
    rs.filter_results = cn_arena_calloc(&req->arena, (size_t)n + 1,
                                        sizeof *rs.filter_results);
    if (!rs.filter_results) {
        cn_req_bad(req, h, CN_ENOMEM);
        return;
    }
    rs.filter_results_len = n;
    const char *all_msg = NULL;
    int16_t all_err = acl_api_refusal(b, req, CN_ACL_OP_ALTER, &all_msg);
    struct cn_acl_set next;
    bool changed = false;
    struct cn_acl_set *removed = n ? cn_arena_calloc(&req->arena, (size_t)n,
                                                     sizeof *removed)
                                   : NULL;
    if (!all_err && n && !removed) {
        all_err = KAFKA_UNKNOWN_SERVER_ERROR;
        all_msg = "Out of memory.";
    } else if (!all_err && cn_authz_set_copy(&next, &b->authz.acls) != 0) {
        all_err = KAFKA_UNKNOWN_SERVER_ERROR;
        all_msg = "Out of memory.";
    }
    for (int32_t i = 0; i < n; i++) {
        struct cn_delete_acls_response_delete_acls_filter_result *fr =
            &rs.filter_results[i];
        cn_delete_acls_response_delete_acls_filter_result_init(fr);
        if (all_err) {
            fr->error_code = all_err;
            fr->error_message = msg_bytes(req, all_msg);
            continue;
        }
        const struct cn_delete_acls_request_delete_acls_filter *q =
            &rq.filters[i];
        struct cn_acl_filter f;
        filter_from(req, h->api_version, &f, q->resource_type_filter,
                    q->resource_name_filter, q->pattern_type_filter,
                    q->principal_filter, q->host_filter, q->operation,
                    q->permission_type);
        const char *why = cn_acl_filter_invalid(&f);
        cn_acl_set_init(&removed[i]);
        if (why) {
            fr->error_code = KAFKA_INVALID_REQUEST;
            fr->error_message = msg_bytes(req, why);
            continue;
        }
        if (cn_acl_set_remove(&next, &f, &removed[i]) != 0) {
            fr->error_code = KAFKA_UNKNOWN_SERVER_ERROR;
            continue;
        }
        changed |= removed[i].n > 0;
    }
    if (!all_err) {
        bool failed = changed && cn_authz_store_write(b, &next) != 0;
        for (int32_t i = 0; i < n; i++) {
            struct cn_delete_acls_response_delete_acls_filter_result *fr =
                &rs.filter_results[i];
            if (failed && !fr->error_code) {
                fr->error_code = KAFKA_KAFKA_STORAGE_ERROR;
                fr->error_message = msg_bytes(req, "Cannot persist ACLs.");
            }
            size_t m = fr->error_code ? 0 : removed[i].n;
            fr->matching_acls = cn_arena_calloc(&req->arena, m + 1,
                                                sizeof *fr->matching_acls);
            for (size_t j = 0; fr->matching_acls && j < m; j++) {
                const struct cn_acl_binding *bd = &removed[i].v[j];
                struct cn_delete_acls_response_delete_acls_matching_acl *ma =
                    &fr->matching_acls[j];
                cn_delete_acls_response_delete_acls_matching_acl_init(ma);
                ma->resource_type = bd->rtype;
                ma->resource_name = cn_req_str(req, bd->name);
                ma->pattern_type = bd->pattern;
                ma->principal = cn_req_str(req, bd->principal);
                ma->host = cn_req_str(req, bd->host);
                ma->operation = bd->op;
                ma->permission_type = bd->perm;
            }
            fr->matching_acls_len = fr->matching_acls ? (int32_t)m : 0;
            cn_acl_set_fini(&removed[i]);
        }
        if (failed) {
            cn_acl_set_fini(&next);
        } else {
            if (changed)
                CN_INFO("ACLs changed by %s: %zu bindings",
                        cn_req_principal(req), next.n);
            struct cn_acl_set old = b->authz.acls;
            b->authz.acls = next;
            cn_acl_set_fini(&old);
        }
    }
    cn_resp_begin(req, h);
    cn_delete_acls_response_encode(&req->resp, h->api_version, &rs);
    cn_req_done(req);
}
