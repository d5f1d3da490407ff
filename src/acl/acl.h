/*
 * acl.h - Kafka's ACL model and authorization decision, with no I/O.
 *
 * A binding is Kafka's AclBinding (resource pattern + access control
 * entry); the codes are Kafka's wire codes so requests, the store and
 * answers use one set.  The decision follows Kafka's StandardAuthorizer:
 *
 *   - super users are allowed everything;
 *   - any matching DENY wins;
 *   - an ALLOW of the operation, of ALL, or (for DESCRIBE) of READ,
 *     WRITE, DELETE or ALTER, or (for DESCRIBE_CONFIGS) of ALTER_CONFIGS
 *     allows; implication applies to ALLOW only;
 *   - with no binding at all on the resource, allow.everyone.if.no.acl.found
 *     decides (default deny).
 *
 * A binding matches a resource of its own type (a topic ACL never
 * authorizes a group of the same name) whose name equals its name (LITERAL),
 * any name (LITERAL "*"), or a name it prefixes (PREFIXED); its principal
 * equals the request's or is "User:*"; its host equals the peer address or
 * is "*".
 *
 * The on-disk form (cn_acl_encode/decode) carries the fields of Kafka's
 * AccessControlEntryRecord (KRaft metadata log), so a metadata quorum can
 * later take the bindings over unchanged:
 *
 *     off  size  field
 *     0    4     magic "CACL"
 *     4    2     format version (1)
 *     6    4     binding count N
 *     10   ...   N x { uuid id (16), int8 resource_type, str resource_name,
 *                       int8 pattern_type, str principal, str host,
 *                       int8 operation, int8 permission_type }
 *                str = uint16 length + bytes
 *     end-4 4    CRC32C of everything before
 */
#ifndef CN_ACL_ACL_H
#define CN_ACL_ACL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/bytes.h"

enum cn_acl_rtype {
    CN_ACL_RT_UNKNOWN = 0,
    CN_ACL_RT_ANY = 1,
    CN_ACL_RT_TOPIC = 2,
    CN_ACL_RT_GROUP = 3,
    CN_ACL_RT_CLUSTER = 4,
    CN_ACL_RT_TXN_ID = 5,
    CN_ACL_RT_DELEGATION_TOKEN = 6,
    CN_ACL_RT_USER = 7,
};

enum cn_acl_pattern {
    CN_ACL_PT_UNKNOWN = 0,
    CN_ACL_PT_ANY = 1,
    CN_ACL_PT_MATCH = 2,
    CN_ACL_PT_LITERAL = 3,
    CN_ACL_PT_PREFIXED = 4,
};

enum cn_acl_op {
    CN_ACL_OP_UNKNOWN = 0,
    CN_ACL_OP_ANY = 1,
    CN_ACL_OP_ALL = 2,
    CN_ACL_OP_READ = 3,
    CN_ACL_OP_WRITE = 4,
    CN_ACL_OP_CREATE = 5,
    CN_ACL_OP_DELETE = 6,
    CN_ACL_OP_ALTER = 7,
    CN_ACL_OP_DESCRIBE = 8,
    CN_ACL_OP_CLUSTER_ACTION = 9,
    CN_ACL_OP_DESCRIBE_CONFIGS = 10,
    CN_ACL_OP_ALTER_CONFIGS = 11,
    CN_ACL_OP_IDEMPOTENT_WRITE = 12,
    CN_ACL_OP_CREATE_TOKENS = 13,
    CN_ACL_OP_DESCRIBE_TOKENS = 14,
};

enum cn_acl_perm {
    CN_ACL_PERM_UNKNOWN = 0,
    CN_ACL_PERM_ANY = 1,
    CN_ACL_PERM_DENY = 2,
    CN_ACL_PERM_ALLOW = 3,
};

/* Kafka's name for the one cluster resource. */
#define CN_ACL_CLUSTER_NAME "kafka-cluster"
#define CN_ACL_STR_MAX 1024 /* longest name, principal or host stored */

struct cn_acl_binding {
    uint8_t id[16];  /* AccessControlEntryRecord.Id, random at creation */
    int8_t rtype;    /* enum cn_acl_rtype */
    int8_t pattern;  /* enum cn_acl_pattern */
    int8_t op;       /* enum cn_acl_op */
    int8_t perm;     /* enum cn_acl_perm */
    char *name;      /* owned; resource name, "*" = every name */
    char *principal; /* owned; "User:alice" or "User:*" */
    char *host;      /* owned; peer IP or "*" */
};

/* Describe/Delete filter: NULL strings and ANY codes match everything;
 * pattern MATCH matches the LITERAL, "*" and PREFIXED bindings that would
 * apply to a resource called name. */
struct cn_acl_filter {
    int8_t rtype, pattern, op, perm;
    const char *name, *principal, *host; /* NULL = any */
};

struct cn_acl_set {
    struct cn_acl_binding *v; /* owned, n used of cap */
    size_t n, cap;
};

void cn_acl_set_init(struct cn_acl_set *s);
void cn_acl_set_fini(struct cn_acl_set *s);

/* 0 when a binding with these fields may be created, else a short reason
 * (unknown or ANY codes, empty strings, a principal without "Type:",
 * a cluster resource not named kafka-cluster). */
const char *cn_acl_binding_invalid(const struct cn_acl_binding *bd);

/* Adds a copy of bd (strings copied) unless an equal one exists (then 0,
 * nothing changes).  0 or CN_ENOMEM. */
int cn_acl_set_add(struct cn_acl_set *s, const struct cn_acl_binding *bd);

bool cn_acl_filter_matches(const struct cn_acl_filter *f,
                           const struct cn_acl_binding *bd);
/* 0 when the filter is usable for Describe/Delete, else a reason. */
const char *cn_acl_filter_invalid(const struct cn_acl_filter *f);

/* Moves the bindings matching f into *removed (initialised by the
 * caller); 0 or CN_ENOMEM (then s is unchanged). */
int cn_acl_set_remove(struct cn_acl_set *s, const struct cn_acl_filter *f,
                      struct cn_acl_set *removed);

struct cn_acl_authorizer {
    bool enabled;                /* false: everything is allowed */
    bool allow_if_no_acl;        /* allow.everyone.if.no.acl.found */
    const char *super_users;     /* "User:a;User:b", not owned, may be NULL */
    struct cn_acl_set acls;
};

/* The decision for principal at host doing op on (rtype, name). */
bool cn_acl_authorize(const struct cn_acl_authorizer *az,
                      const char *principal, const char *host,
                      enum cn_acl_op op, enum cn_acl_rtype rtype,
                      const char *name);
/* KIP-679's authorizeByResourceType: could principal do op on some
 * resource of rtype (an ALLOW of op on any name, not covered by a DENY of
 * the same pattern or a wildcard/whole-type DENY)? */
bool cn_acl_authorize_any(const struct cn_acl_authorizer *az,
                          const char *principal, const char *host,
                          enum cn_acl_op op, enum cn_acl_rtype rtype);
bool cn_acl_is_super(const struct cn_acl_authorizer *az,
                     const char *principal);

/* Kafka's names (uppercase, as kafka-acls prints them). */
const char *cn_acl_op_name(int op);
const char *cn_acl_rtype_name(int rtype);
const char *cn_acl_pattern_name(int pt);
const char *cn_acl_perm_name(int perm);
/* Case-insensitive inverse of the above; 0 (UNKNOWN) if not a name. */
int cn_acl_op_parse(const char *s);
int cn_acl_rtype_parse(const char *s);
int cn_acl_pattern_parse(const char *s);
int cn_acl_perm_parse(const char *s);

/* The store image of s in a malloc'd buffer (*out, *len): 0 or CN_ENOMEM. */
int cn_acl_encode(const struct cn_acl_set *s, uint8_t **out, size_t *len);
/* Parses a store image into s (empty, initialised): 0, CN_ECORRUPT (bad
 * magic, CRC, lengths or codes) or CN_ENOMEM. */
int cn_acl_decode(const uint8_t *p, size_t len, struct cn_acl_set *s);

#endif
