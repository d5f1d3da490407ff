/*
 * authz.c - the authorizer as the handlers see it, the ACL store in
 * <data>/acls, and CreateAcls / DescribeAcls / DeleteAcls (v0-3).
 *
 * The store holds the whole binding set in acl.h's image (the fields of
 * Kafka's AccessControlEntryRecord, CRC32C-checked), rewritten with
 * cn_file_write_atomic on every change before the change is applied, so
 * a crash leaves the old or the new set and an answer never reports a
 * binding that is not on disk.  A damaged file stops start-up: running
 * with fewer DENY bindings than the operator wrote would open access.
 */
#include "node/authz.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/rand.h"
#include "base/say.h"
#include "node/broker_int.h"
#include "log/file.h"
#include "proto/gen/msgs.h"
#include "proto/kerr.h"

#define ACL_FILE "acls"
#define AUDIT_LINES_PER_S 20

int cn_authz_open(struct cn_broker *b, char *err, size_t err_len)
{
    const char *cls = NULL, *supers = NULL;
    cn_config_get(b->cfg, "authorizer.class.name", &cls, NULL);
    cn_config_get(b->cfg, "super.users", &supers, NULL);
    struct cn_acl_authorizer *az = &b->authz;
    cn_acl_set_init(&az->acls);
    az->enabled = false;
    if (!cls || !*cls)
        return 0;
    if (strcmp(cls, CN_AUTHZ_STANDARD) != 0 &&
        strcmp(cls, "kafka.security.authorizer.AclAuthorizer") != 0) {
        snprintf(err, err_len,
                 "authorizer.class.name: unknown authorizer '%s' (Cairn "
                 "has %s, or empty for none)",
                 cls, CN_AUTHZ_STANDARD);
        return CN_EINVAL;
    }
    az->enabled = true;
    az->allow_if_no_acl = b->cfg->allow_everyone_if_no_acl_found;
    az->super_users = supers; /* text the config owns, never altered */

    char path[4200];
    snprintf(path, sizeof path, "%s/%s", b->data_dir, ACL_FILE);
    uint8_t *buf = NULL;
    size_t len = 0;
    int rc = cn_file_read_all(path, &buf, &len);
    if (rc == -ENOENT)
        return 0;
    if (rc) {
        snprintf(err, err_len, "cannot read %s: %s", path, cn_strerror(rc));
        return rc;
    }
    rc = cn_acl_decode(buf, len, &az->acls);
    free(buf);
    if (rc) {
        snprintf(err, err_len,
                 "ACL store %s is %s; refusing to start with ACLs missing "
                 "(restore it from a backup, or remove it to start with "
                 "no ACLs)",
                 path, rc == CN_ECORRUPT ? "damaged" : cn_strerror(rc));
        return rc;
    }
    CN_INFO("authorizer on: %zu ACL bindings from %s", az->acls.n, path);
    return 0;
}

void cn_authz_close(struct cn_broker *b)
{
    cn_acl_set_fini(&b->authz.acls);
}

bool cn_authz_enabled(const struct cn_broker *b)
{
    return b->authz.enabled;
}

/* The peer's address without the port, as ACL hosts name it. */
static void peer_host(struct cn_req *req, char *out, size_t out_len)
{
    snprintf(out, out_len, "%s", cn_req_peer(req));
    char *colon = strrchr(out, ':');
    if (colon)
        *colon = '\0';
}

static bool decide(struct cn_broker *b, struct cn_req *req, enum cn_acl_op op,
                   enum cn_acl_rtype rt, const char *name, bool audit)
{
    if (!b->authz.enabled)
        return true;
    char host[64];
    peer_host(req, host, sizeof host);
    const char *who = cn_req_principal(req);
    bool ok = name ? cn_acl_authorize(&b->authz, who, host, op, rt, name)
                   : cn_acl_authorize_any(&b->authz, who, host, op, rt);
    if (ok || !audit)
        return ok;
    /* An audit line per refusal, but a client retrying in a loop must
     * not flood the log: a few a second, then a count. */
    int64_t now = cn_clock_mono_ms();
    if (now - b->authz_log_ms >= 1000) {
        if (b->authz_log_hushed)
            CN_WARN("authorization: %ld more refusals not logged",
                    b->authz_log_hushed);
        b->authz_log_ms = now;
        b->authz_log_n = 0;
        b->authz_log_hushed = 0;
    }
    if (b->authz_log_n++ < AUDIT_LINES_PER_S)
        CN_WARN("authorization: DENIED principal=%s host=%s operation=%s "
                "resource=%s:%s",
                who, host, cn_acl_op_name(op), cn_acl_rtype_name(rt),
                name ? name : "(any)");
    else
        b->authz_log_hushed++;
    return false;
}

static bool decide_bytes(struct cn_broker *b, struct cn_req *req,
                         enum cn_acl_op op, enum cn_acl_rtype rt,
                         struct cn_bytes name, bool audit)
{
    if (!b->authz.enabled)
        return true;
    char buf[CN_ACL_STR_MAX + 1];
    if (!cn_wire_cstr(name, buf, sizeof buf))
        buf[0] = '\0';
    return decide(b, req, op, rt, buf, audit);
}

bool cn_authz(struct cn_broker *b, struct cn_req *req, enum cn_acl_op op,
              enum cn_acl_rtype rt, struct cn_bytes name)
{
    return decide_bytes(b, req, op, rt, name, true);
}

bool cn_authz_quiet(struct cn_broker *b, struct cn_req *req, enum cn_acl_op op,
                    enum cn_acl_rtype rt, struct cn_bytes name)
{
    return decide_bytes(b, req, op, rt, name, false);
}

bool cn_authz_cstr(struct cn_broker *b, struct cn_req *req, enum cn_acl_op op,
                   enum cn_acl_rtype rt, const char *name)
{
    return decide(b, req, op, rt, name, true);
}

bool cn_authz_any(struct cn_broker *b, struct cn_req *req, enum cn_acl_op op,
                  enum cn_acl_rtype rt)
{
    return decide(b, req, op, rt, NULL, true);
}

int cn_authz_store_write(struct cn_broker *b, const struct cn_acl_set *s)
{
    uint8_t *img;
    size_t len;
    int rc = cn_acl_encode(s, &img, &len);
    if (!rc) {
        rc = cn_file_write_atomic(b->data_dir, ACL_FILE, img, len);
        free(img);
    }
    if (rc)
        CN_ERROR("cannot write %s/%s: %s", b->data_dir, ACL_FILE,
                 cn_strerror(rc));
    return rc;
}

int cn_authz_set_copy(struct cn_acl_set *dst, const struct cn_acl_set *src)
{
    cn_acl_set_init(dst);
    for (size_t i = 0; i < src->n; i++) {
        int rc = cn_acl_set_add(dst, &src->v[i]);
        if (rc) {
            cn_acl_set_fini(dst);
            return rc;
        }
    }
    return 0;
}
