/*
 * authz.h - authorization for the handlers: Kafka's StandardAuthorizer
 * decision (src/acl) applied to the request's principal and peer address,
 * with an audit line for every refusal, and the durable ACL store.
 *
 * Off (authorizer.class.name empty, the default) every check passes and
 * the ACL APIs answer SECURITY_DISABLED, as Kafka does without an
 * authorizer.
 */
#ifndef CN_NODE_AUTHZ_H
#define CN_NODE_AUTHZ_H

#include "acl/acl.h"
#include "node/broker_int.h"

#define CN_AUTHZ_STANDARD \
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer"

/* Reads the authorizer keys and <data>/acls.  An unknown authorizer class
 * or a damaged store fails with err naming it.  Runs on: loop, at start. */
int cn_authz_open(struct cn_broker *b, char *err, size_t err_len);
void cn_authz_close(struct cn_broker *b);

bool cn_authz_enabled(const struct cn_broker *b);
/* Writes s as the store (<data>/acls, atomically); 0 or an error, logged.
 * A change reaches disk before it replaces b->authz.acls. */
int cn_authz_store_write(struct cn_broker *b, const struct cn_acl_set *s);
/* A copy of src into dst (initialized here), for a change that must reach
 * disk first.  0 or CN_ENOMEM (dst then empty). */
int cn_authz_set_copy(struct cn_acl_set *dst, const struct cn_acl_set *src);
/* May the request's principal do op on (rt, name)?  A refusal is logged
 * (principal, peer, operation, resource; at most a few lines a second). */
bool cn_authz(struct cn_broker *b, struct cn_req *req, enum cn_acl_op op,
              enum cn_acl_rtype rt, struct cn_bytes name);
bool cn_authz_cstr(struct cn_broker *b, struct cn_req *req, enum cn_acl_op op,
                   enum cn_acl_rtype rt, const char *name);
/* The same check without an audit line: for results that are filtered
 * (ListTransactions, ListGroups, Metadata of all topics), not refused. */
bool cn_authz_quiet(struct cn_broker *b, struct cn_req *req, enum cn_acl_op op,
                    enum cn_acl_rtype rt, struct cn_bytes name);
/* KIP-679: op allowed on some resource of type rt. */
bool cn_authz_any(struct cn_broker *b, struct cn_req *req, enum cn_acl_op op,
                  enum cn_acl_rtype rt);
static inline bool cn_authz_cluster(struct cn_broker *b, struct cn_req *req,
                                    enum cn_acl_op op)
{
    return cn_authz_cstr(b, req, op, CN_ACL_RT_CLUSTER, CN_ACL_CLUSTER_NAME);
}

#endif
