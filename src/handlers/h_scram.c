/*
 * h_scram.c - DescribeUserScramCredentials and AlterUserScramCredentials
 * (KIP-554) over the broker's credential store (scram_store.h).
 *
 * As Kafka: Describe needs DESCRIBE on the cluster, Alter needs ALTER on
 * the cluster (CLUSTER_AUTHORIZATION_FAILED otherwise).  Describe of no
 * users (null or empty) lists every user with a credential; a named user
 * without one is RESOURCE_NOT_FOUND, a name given twice DUPLICATE_RESOURCE.
 * Alter answers once per user, as Kafka's ScramControlManager: deletions
 * then upsertions are checked in order, a user's first error is its
 * answer and its later changes are ignored; a user changed twice (any
 * mechanisms: Kafka 4.4 refuses kafka-configs.sh's two mechanisms in one
 * --add-config too) is DUPLICATE_RESOURCE, an unknown mechanism UNSUPPORTED_SASL_MECHANISM,
 * iterations outside 4096..16384 or a bad salt UNACCEPTABLE_CREDENTIAL,
 * deleting what does not exist RESOURCE_NOT_FOUND.  The accepted changes
 * are written to disk together before they are used.
 */
#include <stdio.h>
#include <string.h>

#include "node/authz.h"
#include "base/say.h"
#include "handlers/handlers.h"
#include "proto/kerr.h"
#include "proto/scram_msgs.h"
#include "node/scram_store.h"
#include "sec/sasl.h"

static bool bytes_eq(struct cn_bytes a, struct cn_bytes b)
{
    return a.len == b.len &&
           (a.len <= 0 || !memcmp(a.ptr, b.ptr, (size_t)a.len));
}

void cn_h_describe_user_scram_credentials(struct cn_broker *b,
                                          struct cn_req *req,
                                          const struct cn_req_header *h,
                                          struct cn_rd *body)
{
    struct cn_describe_scram_req rq;
    if (cn_describe_scram_req_decode(body, &req->arena, &rq)) {
        cn_req_bad(req, h, CN_EINVAL);
        return;
    }
    struct cn_scram_store *st = cn_sasl_store(b);
    struct cn_describe_scram_resp resp;
    memset(&resp, 0, sizeof resp);
    resp.error_message = CN_BYTES_NULL;
    bool all = rq.users_len <= 0;
    size_t cap = all ? st->n : (size_t)rq.users_len;
    resp.results = cn_arena_calloc(&req->arena, cap ? cap : 1,
                                   sizeof *resp.results);
    if (!resp.results) {
        cn_req_bad(req, h, CN_ENOMEM);
        return;
    }
    if (!cn_authz_cluster(b, req, CN_ACL_OP_DESCRIBE)) {
        resp.error_code = KAFKA_CLUSTER_AUTHORIZATION_FAILED;
        goto out;
    }
    if (all) {
        /* One result per user, its mechanisms together. */
        for (size_t i = 0; i < st->n; i++) {
            struct cn_bytes name = cn_bytes_str(st->users[i].name);
            int32_t k;
            for (k = 0; k < resp.results_len; k++)
                if (bytes_eq(resp.results[k].user, name))
                    break;
            if (k == resp.results_len) {
                struct cn_describe_scram_result *r = &resp.results[k];
                r->user = cn_req_str(req, st->users[i].name);
                r->error_message = CN_BYTES_NULL;
                r->infos = cn_arena_calloc(&req->arena, 2, sizeof *r->infos);
                if (!r->infos) {
                    cn_req_bad(req, h, CN_ENOMEM);
                    return;
                }
                resp.results_len++;
            }
            struct cn_describe_scram_result *r = &resp.results[k];
            if (r->infos_len < 2) {
                r->infos[r->infos_len].mechanism =
                    (int8_t)st->users[i].cred.mech;
                r->infos[r->infos_len].iterations =
                    st->users[i].cred.iterations;
                r->infos_len++;
            }
        }
        goto out;
    }
    for (int32_t i = 0; i < rq.users_len; i++) {
        struct cn_describe_scram_result *r = &resp.results[resp.results_len];
        r->user = rq.users[i];
        r->error_message = CN_BYTES_NULL;
        bool dup = false;
        for (int32_t j = 0; j < rq.users_len; j++)
            dup = dup || (j != i && bytes_eq(rq.users[j], rq.users[i]));
        /* A duplicated name is answered once. */
        bool seen = false;
        for (int32_t k = 0; k < resp.results_len; k++)
            seen = seen || bytes_eq(resp.results[k].user, rq.users[i]);
        if (seen)
            continue;
        resp.results_len++;
        char name[CN_SASL_NAME_MAX], msg[CN_SASL_NAME_MAX + 128];
        bool ok = cn_wire_cstr(rq.users[i], name, sizeof name);
        if (dup) {
            r->error_code = KAFKA_DUPLICATE_RESOURCE;
            snprintf(msg, sizeof msg,
                     "Cannot describe SCRAM credentials for the same user "
                     "twice in a single request: %s",
                     ok ? name : "?");
            r->error_message = cn_req_str(req, msg);
            continue;
        }
        r->infos = cn_arena_calloc(&req->arena, 2, sizeof *r->infos);
        if (!r->infos) {
            cn_req_bad(req, h, CN_ENOMEM);
            return;
        }
        static const int mechs[] = {CN_SCRAM_SHA256, CN_SCRAM_SHA512};
        for (int m = 0; ok && m < 2; m++) {
            struct cn_scram_cred c;
            if (cn_scram_store_lookup(st, name, mechs[m], &c) == 0) {
                r->infos[r->infos_len].mechanism = (int8_t)mechs[m];
                r->infos[r->infos_len].iterations = c.iterations;
                r->infos_len++;
            }
        }
        if (r->infos_len == 0) {
            r->error_code = KAFKA_RESOURCE_NOT_FOUND;
            snprintf(msg, sizeof msg,
                     "Attempt to describe a user credential that does not "
                     "exist: %s",
                     ok ? name : "?");
            r->error_message = cn_req_str(req, msg);
        }
    }
out:
    cn_resp_begin(req, h);
    cn_describe_scram_resp_encode(&req->resp, &resp);
    cn_req_done(req);
}

/* One user's outcome in an Alter. */
struct alter_user {
    struct cn_bytes name;
    int16_t err;
    const char *msg;
    bool accepted; /* a change of the user passed its checks */
};

static struct alter_user *alter_user_get(struct alter_user *u, int32_t *n,
                                         struct cn_bytes name)
{
    for (int32_t i = 0; i < *n; i++)
        if (bytes_eq(u[i].name, name))
            return &u[i];
    u[*n].name = name;
    return &u[(*n)++];
}

static void alter_fail(struct alter_user *u, int16_t err, const char *msg)
{
    if (u->err)
        return;
    u->err = err;
    u->msg = msg;
}

void cn_h_alter_user_scram_credentials(struct cn_broker *b, struct cn_req *req,
                                       const struct cn_req_header *h,
                                       struct cn_rd *body)
{
    struct cn_alter_scram_req rq;
    if (cn_alter_scram_req_decode(body, &req->arena, &rq)) {
        cn_req_bad(req, h, CN_EINVAL);
        return;
    }
    int32_t total = rq.deletions_len + rq.upsertions_len, nu = 0;
    struct alter_user *users = cn_arena_calloc(&req->arena,
                                               total ? (size_t)total : 1,
                                               sizeof *users);
    struct cn_scram_change *ch = cn_arena_calloc(&req->arena,
                                                 total ? (size_t)total : 1,
                                                 sizeof *ch);
    struct cn_scram_cred *creds = cn_arena_calloc(
        &req->arena, rq.upsertions_len > 0 ? (size_t)rq.upsertions_len : 1,
        sizeof *creds);
    char **names = cn_arena_calloc(&req->arena, total ? (size_t)total : 1,
                                   sizeof *names);
    int *owner = cn_arena_calloc(&req->arena, total ? (size_t)total : 1,
                                 sizeof *owner);
    if (!users || !ch || !creds || !names || !owner) {
        cn_req_bad(req, h, CN_ENOMEM);
        return;
    }
    bool allowed = cn_authz_cluster(b, req, CN_ACL_OP_ALTER);
    struct cn_scram_store *st = cn_sasl_store(b);
    size_t nch = 0;
    for (int32_t i = 0; i < total; i++) {
        bool del = i < rq.deletions_len;
        const struct cn_scram_deletion *d = del ? &rq.deletions[i] : NULL;
        const struct cn_scram_upsertion *up =
            del ? NULL : &rq.upsertions[i - rq.deletions_len];
        struct cn_bytes name = del ? d->name : up->name;
        int mech = del ? d->mechanism : up->mechanism;
        struct alter_user *u = alter_user_get(users, &nu, name);
        owner[i] = (int)(u - users);
        if (!allowed) {
            alter_fail(u, KAFKA_CLUSTER_AUTHORIZATION_FAILED, NULL);
            continue;
        }
        if (u->err)
            continue; /* its first error is its answer */
        if (u->accepted) {
            alter_fail(u, KAFKA_DUPLICATE_RESOURCE,
                       "A user credential cannot be altered twice in the "
                       "same request");
            continue;
        }
        char *cname = cn_arena_alloc(&req->arena, CN_SASL_NAME_MAX);
        if (!cname || !cn_wire_cstr(name, cname, CN_SASL_NAME_MAX)) {
            alter_fail(u, KAFKA_UNACCEPTABLE_CREDENTIAL, "Username too long");
            continue;
        }
        names[i] = cname;
        if (!cname[0]) {
            alter_fail(u, KAFKA_UNACCEPTABLE_CREDENTIAL,
                       "Username must not be empty");
            continue;
        }
        if (!cn_scram_key_len(mech)) {
            alter_fail(u, KAFKA_UNSUPPORTED_SASL_MECHANISM,
                       "Unknown SCRAM mechanism");
            continue;
        }
        if (del) {
            struct cn_scram_cred c;
            if (cn_scram_store_lookup(st, cname, mech, &c) != 0) {
                alter_fail(u, KAFKA_RESOURCE_NOT_FOUND,
                           "Attempt to delete a user credential that does "
                           "not exist");
                continue;
            }
            ch[i].user = cname;
            ch[i].mech = mech;
            ch[i].cred = NULL;
            u->accepted = true;
            continue;
        }
        if (up->iterations < CN_SCRAM_ITER_MIN) {
            alter_fail(u, KAFKA_UNACCEPTABLE_CREDENTIAL, "Too few iterations");
            continue;
        }
        if (up->iterations > CN_SCRAM_ITER_MAX) {
            alter_fail(u, KAFKA_UNACCEPTABLE_CREDENTIAL,
                       "Too many iterations");
            continue;
        }
        struct cn_scram_cred *c = &creds[i - rq.deletions_len];
        if (cn_scram_cred_from_salted(mech, up->salted_password.ptr,
                                      (size_t)up->salted_password.len,
                                      up->salt.ptr, (size_t)up->salt.len,
                                      up->iterations, c) != 0) {
            alter_fail(u, KAFKA_UNACCEPTABLE_CREDENTIAL,
                       "Invalid salt or salted password");
            continue;
        }
        ch[i].user = cname;
        ch[i].mech = mech;
        ch[i].cred = c;
        u->accepted = true;
    }
    /* Only users whose every change is good are changed. */
    struct cn_scram_change *good = cn_arena_calloc(&req->arena,
                                                   total ? (size_t)total : 1,
                                                   sizeof *good);
    if (!good) {
        cn_req_bad(req, h, CN_ENOMEM);
        return;
    }
    for (int32_t i = 0; i < total; i++)
        if (!users[owner[i]].err && ch[i].user)
            good[nch++] = ch[i];
    if (nch) {
        int rc = cn_scram_store_apply(st, good, nch);
        if (rc) {
            CN_ERROR("cannot write %s/%s: %s", st->dir, CN_SCRAM_STORE_FILE,
                     cn_strerror(rc));
            for (int32_t k = 0; k < nu; k++)
                alter_fail(&users[k], KAFKA_UNKNOWN_SERVER_ERROR,
                           "cannot store the credential");
        } else {
            for (size_t i = 0; i < nch; i++)
                CN_INFO("SCRAM credential %s: user '%s' %s by %s from %s",
                        cn_scram_mech_name(good[i].mech), good[i].user,
                        good[i].cred ? "set" : "deleted",
                        cn_req_principal(req), cn_req_peer(req));
        }
    }
    struct cn_alter_scram_resp resp;
    memset(&resp, 0, sizeof resp);
    resp.results = cn_arena_calloc(&req->arena, nu ? (size_t)nu : 1,
                                   sizeof *resp.results);
    if (!resp.results) {
        cn_req_bad(req, h, CN_ENOMEM);
        return;
    }
    resp.results_len = nu;
    for (int32_t k = 0; k < nu; k++) {
        resp.results[k].user = users[k].name;
        resp.results[k].error_code = users[k].err;
        resp.results[k].error_message = users[k].msg
                                            ? cn_bytes_str(users[k].msg)
                                            : CN_BYTES_NULL;
    }
    cn_resp_begin(req, h);
    cn_alter_scram_resp_encode(&req->resp, &resp);
    cn_req_done(req);
}
