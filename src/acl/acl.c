/*
 * acl.c - ACL bindings, filters, Kafka's authorization decision and the
 * store image.  See acl.h for the rules; nothing here does I/O.
 */
#include "acl/acl.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/crc32c.h"
#include "base/err.h"

#define STORE_MAGIC "CACL"
#define STORE_VERSION 1

void cn_acl_set_init(struct cn_acl_set *s)
{
    memset(s, 0, sizeof *s);
}

static void binding_free(struct cn_acl_binding *bd)
{
    free(bd->name);
    free(bd->principal);
    free(bd->host);
}

void cn_acl_set_fini(struct cn_acl_set *s)
{
    for (size_t i = 0; i < s->n; i++)
        binding_free(&s->v[i]);
    free(s->v);
    memset(s, 0, sizeof *s);
}

static bool str_ok(const char *s)
{
    return s && *s && strlen(s) <= CN_ACL_STR_MAX;
}

const char *cn_acl_binding_invalid(const struct cn_acl_binding *bd)
{
    if (bd->rtype < CN_ACL_RT_TOPIC || bd->rtype > CN_ACL_RT_USER)
        return "Invalid resource type";
    if (bd->pattern != CN_ACL_PT_LITERAL && bd->pattern != CN_ACL_PT_PREFIXED)
        return "Invalid pattern type";
    if (bd->op < CN_ACL_OP_ALL || bd->op > CN_ACL_OP_DESCRIBE_TOKENS)
        return "Invalid operation";
    if (bd->perm != CN_ACL_PERM_DENY && bd->perm != CN_ACL_PERM_ALLOW)
        return "Invalid permission type";
    if (!str_ok(bd->name))
        return "Resource name should not be empty";
    if (!str_ok(bd->host))
        return "Invalid host";
    /* Kafka's principal is "Type:name" (KafkaPrincipal). */
    const char *colon = bd->principal ? strchr(bd->principal, ':') : NULL;
    if (!str_ok(bd->principal) || !colon || colon == bd->principal ||
        colon[1] == '\0')
        return "Invalid principal";
    if (bd->rtype == CN_ACL_RT_CLUSTER &&
        (bd->pattern != CN_ACL_PT_LITERAL ||
         strcmp(bd->name, CN_ACL_CLUSTER_NAME) != 0))
        return "The only valid name for the CLUSTER resource is "
               "kafka-cluster";
    return NULL;
}

static bool binding_eq(const struct cn_acl_binding *a,
                       const struct cn_acl_binding *b)
{
    return a->rtype == b->rtype && a->pattern == b->pattern &&
           a->op == b->op && a->perm == b->perm &&
           strcmp(a->name, b->name) == 0 &&
           strcmp(a->principal, b->principal) == 0 &&
           strcmp(a->host, b->host) == 0;
}

int cn_acl_set_add(struct cn_acl_set *s, const struct cn_acl_binding *bd)
{
    for (size_t i = 0; i < s->n; i++)
        if (binding_eq(&s->v[i], bd))
            return 0;
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 16;
        struct cn_acl_binding *v = realloc(s->v, cap * sizeof *v);
        if (!v)
            return CN_ENOMEM;
        s->v = v;
        s->cap = cap;
    }
    struct cn_acl_binding c = *bd;
    c.name = strdup(bd->name);
    c.principal = strdup(bd->principal);
    c.host = strdup(bd->host);
    if (!c.name || !c.principal || !c.host) {
        binding_free(&c);
        return CN_ENOMEM;
    }
    s->v[s->n++] = c;
    return 0;
}

/* Does the binding's resource pattern cover a resource called name? */
static bool pattern_covers(const struct cn_acl_binding *bd, const char *name)
{
    if (bd->pattern == CN_ACL_PT_LITERAL)
        return strcmp(bd->name, "*") == 0 || strcmp(bd->name, name) == 0;
    if (bd->pattern == CN_ACL_PT_PREFIXED)
        return strncmp(bd->name, name, strlen(bd->name)) == 0;
    return false;
}

bool cn_acl_filter_matches(const struct cn_acl_filter *f,
                           const struct cn_acl_binding *bd)
{
    if (f->rtype != CN_ACL_RT_ANY && f->rtype != bd->rtype)
        return false;
    if (f->pattern == CN_ACL_PT_MATCH) {
        if (f->name && !pattern_covers(bd, f->name))
            return false;
    } else {
        if (f->pattern != CN_ACL_PT_ANY && f->pattern != bd->pattern)
            return false;
        if (f->name && strcmp(f->name, bd->name) != 0)
            return false;
    }
    if (f->principal && strcmp(f->principal, bd->principal) != 0)
        return false;
    if (f->host && strcmp(f->host, bd->host) != 0)
        return false;
    if (f->op != CN_ACL_OP_ANY && f->op != bd->op)
        return false;
    if (f->perm != CN_ACL_PERM_ANY && f->perm != bd->perm)
        return false;
    return true;
}

const char *cn_acl_filter_invalid(const struct cn_acl_filter *f)
{
    if (f->rtype < CN_ACL_RT_ANY || f->rtype > CN_ACL_RT_USER)
        return "Invalid resource type";
    if (f->pattern < CN_ACL_PT_ANY || f->pattern > CN_ACL_PT_PREFIXED)
        return "Invalid pattern type";
    if (f->op < CN_ACL_OP_ANY || f->op > CN_ACL_OP_DESCRIBE_TOKENS)
        return "Invalid operation";
    if (f->perm < CN_ACL_PERM_ANY || f->perm > CN_ACL_PERM_ALLOW)
        return "Invalid permission type";
    return NULL;
}

int cn_acl_set_remove(struct cn_acl_set *s, const struct cn_acl_filter *f,
                      struct cn_acl_set *removed)
{
    size_t need = removed->n;
    for (size_t i = 0; i < s->n; i++)
        need += cn_acl_filter_matches(f, &s->v[i]);
    if (need > removed->cap) {
        struct cn_acl_binding *v =
            realloc(removed->v, need * sizeof *v);
        if (!v)
            return CN_ENOMEM;
        removed->v = v;
        removed->cap = need;
    }
    size_t keep = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (cn_acl_filter_matches(f, &s->v[i]))
            removed->v[removed->n++] = s->v[i];
        else
            s->v[keep++] = s->v[i];
    }
    s->n = keep;
    return 0;
}

bool cn_acl_is_super(const struct cn_acl_authorizer *az,
                     const char *principal)
{
    const char *p = az->super_users;
    size_t plen = strlen(principal);
    while (p && *p) {
        while (*p == ';' || *p == ' ')
            p++;
        const char *e = strchr(p, ';');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        while (n && p[n - 1] == ' ')
            n--;
        if (n == plen && strncmp(p, principal, n) == 0)
            return true;
        p = e;
    }
    return false;
}

static bool who_matches(const struct cn_acl_binding *bd,
                        const char *principal, const char *host)
{
    return (strcmp(bd->principal, "User:*") == 0 ||
            strcmp(bd->principal, principal) == 0) &&
           (strcmp(bd->host, "*") == 0 || strcmp(bd->host, host) == 0);
}

/* Does an ALLOW of granted allow op?  (Kafka's implied operations.) */
static bool allow_implies(int granted, int op)
{
    if (granted == op || granted == CN_ACL_OP_ALL)
        return true;
    if (op == CN_ACL_OP_DESCRIBE)
        return granted == CN_ACL_OP_READ || granted == CN_ACL_OP_WRITE ||
               granted == CN_ACL_OP_DELETE || granted == CN_ACL_OP_ALTER;
    if (op == CN_ACL_OP_DESCRIBE_CONFIGS)
        return granted == CN_ACL_OP_ALTER_CONFIGS;
    return false;
}

static bool deny_covers(int denied, int op)
{
    return denied == op || denied == CN_ACL_OP_ALL;
}

bool cn_acl_authorize(const struct cn_acl_authorizer *az,
                      const char *principal, const char *host,
                      enum cn_acl_op op, enum cn_acl_rtype rtype,
                      const char *name)
{
    if (!az->enabled || cn_acl_is_super(az, principal))
        return true;
    bool any = false, allowed = false;
    for (size_t i = 0; i < az->acls.n; i++) {
        const struct cn_acl_binding *bd = &az->acls.v[i];
        if (bd->rtype != (int8_t)rtype || !pattern_covers(bd, name))
            continue;
        any = true;
        if (!who_matches(bd, principal, host))
            continue;
        if (bd->perm == CN_ACL_PERM_DENY && deny_covers(bd->op, op))
            return false;
        if (bd->perm == CN_ACL_PERM_ALLOW && allow_implies(bd->op, op))
            allowed = true;
    }
    return allowed || (!any && az->allow_if_no_acl);
}

/* Would DENY d cover every resource the ALLOW a covers? */
static bool deny_shadows(const struct cn_acl_binding *d,
                         const struct cn_acl_binding *a)
{
    if (d->pattern == CN_ACL_PT_LITERAL)
        return strcmp(d->name, "*") == 0 ||
               (a->pattern == CN_ACL_PT_LITERAL &&
                strcmp(d->name, a->name) == 0);
    return strncmp(d->name, a->name, strlen(d->name)) == 0;
}

bool cn_acl_authorize_any(const struct cn_acl_authorizer *az,
                          const char *principal, const char *host,
                          enum cn_acl_op op, enum cn_acl_rtype rtype)
{
    if (!az->enabled || cn_acl_is_super(az, principal))
        return true;
    bool any = false;
    for (size_t i = 0; i < az->acls.n; i++) {
        const struct cn_acl_binding *a = &az->acls.v[i];
        if (a->rtype != (int8_t)rtype)
            continue;
        any = true;
        if (a->perm != CN_ACL_PERM_ALLOW || !allow_implies(a->op, op) ||
            !who_matches(a, principal, host))
            continue;
        bool shadowed = false;
        for (size_t j = 0; j < az->acls.n && !shadowed; j++) {
            const struct cn_acl_binding *d = &az->acls.v[j];
            shadowed = d->rtype == (int8_t)rtype &&
                       d->perm == CN_ACL_PERM_DENY &&
                       deny_covers(d->op, op) &&
                       who_matches(d, principal, host) && deny_shadows(d, a);
        }
        if (!shadowed)
            return true;
    }
    return !any && az->allow_if_no_acl;
}

static const char *const op_names[] = {
    "UNKNOWN", "ANY", "ALL", "READ", "WRITE", "CREATE", "DELETE", "ALTER",
    "DESCRIBE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS",
    "IDEMPOTENT_WRITE", "CREATE_TOKENS", "DESCRIBE_TOKENS",
};
static const char *const rtype_names[] = {
    "UNKNOWN", "ANY", "TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID",
    "DELEGATION_TOKEN", "USER",
};
static const char *const pattern_names[] = {
    "UNKNOWN", "ANY", "MATCH", "LITERAL", "PREFIXED",
};
static const char *const perm_names[] = {"UNKNOWN", "ANY", "DENY", "ALLOW"};

#define NAME_OF(tab, v)                                                      \
    ((v) >= 0 && (size_t)(v) < sizeof(tab) / sizeof(tab)[0] ? (tab)[v]       \
                                                             : "UNKNOWN")

const char *cn_acl_op_name(int op) { return NAME_OF(op_names, op); }
const char *cn_acl_rtype_name(int rt) { return NAME_OF(rtype_names, rt); }
const char *cn_acl_pattern_name(int pt) { return NAME_OF(pattern_names, pt); }
const char *cn_acl_perm_name(int pm) { return NAME_OF(perm_names, pm); }

static int parse_in(const char *const *tab, size_t n, const char *s)
{
    for (size_t i = 1; s && i < n; i++)
        if (strcasecmp(tab[i], s) == 0)
            return (int)i;
    return 0;
}

#define PARSE_IN(tab, s) parse_in((tab), sizeof(tab) / sizeof(tab)[0], (s))

int cn_acl_op_parse(const char *s) { return PARSE_IN(op_names, s); }
int cn_acl_rtype_parse(const char *s) { return PARSE_IN(rtype_names, s); }
int cn_acl_pattern_parse(const char *s) { return PARSE_IN(pattern_names, s); }
int cn_acl_perm_parse(const char *s) { return PARSE_IN(perm_names, s); }

/* A small growable buffer: the store image is written once per change. */
struct obuf {
    uint8_t *p;
    size_t n, cap;
    bool oom;
};

static void put(struct obuf *o, const void *p, size_t n)
{
    if (o->oom)
        return;
    if (o->n + n > o->cap) {
        size_t cap = o->cap ? o->cap : 256;
        while (cap < o->n + n)
            cap *= 2;
        uint8_t *q = realloc(o->p, cap);
        if (!q) {
            o->oom = true;
            return;
        }
        o->p = q;
        o->cap = cap;
    }
    memcpy(o->p + o->n, p, n);
    o->n += n;
}

static void put_be(struct obuf *o, uint32_t v, size_t bytes)
{
    uint8_t b[4];
    for (size_t i = 0; i < bytes; i++)
        b[i] = (uint8_t)(v >> (8 * (bytes - 1 - i)));
    put(o, b, bytes);
}

static void put_str(struct obuf *o, const char *s)
{
    size_t n = strlen(s);
    put_be(o, (uint32_t)n, 2);
    put(o, s, n);
}

int cn_acl_encode(const struct cn_acl_set *s, uint8_t **out, size_t *len)
{
    struct obuf o = {0};
    put(&o, STORE_MAGIC, 4);
    put_be(&o, STORE_VERSION, 2);
    put_be(&o, (uint32_t)s->n, 4);
    for (size_t i = 0; i < s->n; i++) {
        const struct cn_acl_binding *bd = &s->v[i];
        uint8_t b;
        put(&o, bd->id, 16);
        b = (uint8_t)bd->rtype;
        put(&o, &b, 1);
        put_str(&o, bd->name);
        b = (uint8_t)bd->pattern;
        put(&o, &b, 1);
        put_str(&o, bd->principal);
        put_str(&o, bd->host);
        b = (uint8_t)bd->op;
        put(&o, &b, 1);
        b = (uint8_t)bd->perm;
        put(&o, &b, 1);
    }
    if (!o.oom)
        put_be(&o, cn_crc32c(0, o.p, o.n), 4);
    if (o.oom) {
        free(o.p);
        return CN_ENOMEM;
    }
    *out = o.p;
    *len = o.n;
    return 0;
}

struct ibuf {
    const uint8_t *p, *end;
    bool bad;
};

static uint32_t get_be(struct ibuf *in, size_t bytes)
{
    uint32_t v = 0;
    if (in->bad || (size_t)(in->end - in->p) < bytes) {
        in->bad = true;
        return 0;
    }
    for (size_t i = 0; i < bytes; i++)
        v = v << 8 | *in->p++;
    return v;
}

static char *get_str(struct ibuf *in)
{
    size_t n = get_be(in, 2);
    if (in->bad || (size_t)(in->end - in->p) < n) {
        in->bad = true;
        return NULL;
    }
    char *s = malloc(n + 1);
    if (s) {
        memcpy(s, in->p, n);
        s[n] = '\0';
    }
    in->p += n;
    return s;
}

int cn_acl_decode(const uint8_t *p, size_t len, struct cn_acl_set *s)
{
    if (len < 14 || memcmp(p, STORE_MAGIC, 4) != 0)
        return CN_ECORRUPT;
    struct ibuf crc = {p + len - 4, p + len, false};
    if (get_be(&crc, 4) != cn_crc32c(0, p, len - 4))
        return CN_ECORRUPT;
    struct ibuf in = {p + 4, p + len - 4, false};
    if (get_be(&in, 2) != STORE_VERSION)
        return CN_ECORRUPT;
    uint32_t n = get_be(&in, 4);
    int rc = 0;
    for (uint32_t i = 0; i < n && !in.bad && !rc; i++) {
        struct cn_acl_binding bd = {0};
        if ((size_t)(in.end - in.p) < 16) {
            in.bad = true;
            break;
        }
        memcpy(bd.id, in.p, 16);
        in.p += 16;
        bd.rtype = (int8_t)get_be(&in, 1);
        bd.name = get_str(&in);
        bd.pattern = (int8_t)get_be(&in, 1);
        bd.principal = get_str(&in);
        bd.host = get_str(&in);
        bd.op = (int8_t)get_be(&in, 1);
        bd.perm = (int8_t)get_be(&in, 1);
        if (!in.bad && (!bd.name || !bd.principal || !bd.host))
            rc = CN_ENOMEM;
        else if (!in.bad && cn_acl_binding_invalid(&bd))
            rc = CN_ECORRUPT;
        else if (!in.bad)
            rc = cn_acl_set_add(s, &bd);
        binding_free(&bd);
    }
    if (!rc && (in.bad || in.p != in.end))
        rc = CN_ECORRUPT;
    if (rc)
        cn_acl_set_fini(s);
    return rc;
}
