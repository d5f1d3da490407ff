/*
 * config.c - parsing, validation and lookup of broker and topic settings;
 * see config.h.  The key tables live in config_keys.c, the dynamic layers
 * in config_dyn.c, the listener lists in config_listeners.c, cluster mode's
 * voters and checks in config_cluster.c.
 *
 * The text of each explicitly set broker key is the source of truth; typed
 * fields are written when a key is set and derived fields (precedence,
 * aliases, listeners) are recomputed after every change.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config_int.h"
#include "err.h"

#define NONE SIZE_MAX


void cfg_seterr(char *err, size_t err_len, const char *fmt, ...)
{
    va_list ap;
    if (!err || !err_len)
        return;
    va_start(ap, fmt);
    vsnprintf(err, err_len, fmt, ap);
    va_end(ap);
}

/* Copies s[0..n) without leading and trailing whitespace; NULL on ENOMEM. */
char *cfg_dup_trim(const char *s, size_t n)
{
    while (n && isspace((unsigned char)*s)) {
        s++;
        n--;
    }
    while (n && isspace((unsigned char)s[n - 1]))
        n--;
    char *out = malloc(n + 1);
    if (!out)
        return NULL;
    memcpy(out, s, n);
    out[n] = '\0';
    return out;
}

/* ---- Scalars ---- */

/* Decimal integer with optional sign, nothing else (Java's parseLong). */
static int parse_i64(const char *s, int64_t *out, char *why, size_t why_len)
{
    const char *p = s;
    bool neg = false;
    uint64_t v = 0;
    uint64_t lim = (uint64_t)INT64_MAX;

    if (*p == '+' || *p == '-')
        neg = *p++ == '-';
    if (neg)
        lim += 1;
    if (!isdigit((unsigned char)*p)) {
        cfg_seterr(why, why_len, "not an integer");
        return CN_EINVAL;
    }
    for (; isdigit((unsigned char)*p); p++) {
        unsigned d = (unsigned)(*p - '0');
        if (v > (lim - d) / 10) {
            cfg_seterr(why, why_len, "out of range for a 64-bit integer");
            return CN_EINVAL;
        }
        v = v * 10 + d;
    }
    if (*p) {
        cfg_seterr(why, why_len, "not an integer");
        return CN_EINVAL;
    }
    if (neg)
        *out = v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v;
    else
        *out = (int64_t)v;
    return 0;
}

/* Out-of-range message for k's [min, max]. */
static int range_err(const struct cn_config_key *k, char *why, size_t why_len)
{
    int64_t top = k->type == CN_CFG_INT16   ? INT16_MAX
                  : k->type == CN_CFG_INT32 ? INT32_MAX
                                            : INT64_MAX;
    const char *sep = k->range_why ? " (" : "";
    const char *reason = k->range_why ? k->range_why : "";
    const char *end = k->range_why ? ")" : "";
    if (k->or_minus_one)
        cfg_seterr(why, why_len, "must be between %lld and %lld, or -1",
                   (long long)k->min, (long long)k->max);
    else if (k->max == top)
        cfg_seterr(why, why_len, "must be at least %lld%s%s%s",
               (long long)k->min, sep, reason, end);
    else
        cfg_seterr(why, why_len, "must be between %lld and %lld%s%s%s",
               (long long)k->min, (long long)k->max, sep, reason, end);
    return CN_EINVAL;
}

static int enum_index(const char *const *enums, const char *s, size_t n)
{
    for (int i = 0; enums[i]; i++)
        if (strlen(enums[i]) == n && !memcmp(enums[i], s, n))
            return i;
    return -1;
}

static void enum_choices(const char *const *enums, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; enums[i] && used < len; i++) {
        int n = snprintf(buf + used, len - used, "%s%s", i ? ", " : "",
                         enums[i]);
        if (n < 0)
            break;
        used += (size_t)n;
    }
}

/* ---- Values ---- */

/*
 * Validates v (already trimmed) for key k.  Non-text types are returned in
 * *out.  On error writes a bare reason to why.
 */
int cfg_check_value(const struct cn_config_key *k, const char *v,
                       union val *out, char *why, size_t why_len)
{
    int64_t i;
    union val tmp;
    if (!out)
        out = &tmp;

    switch (k->type) {
    case CN_CFG_BOOL:
        if (!strcasecmp(v, "true"))
            out->b = true;
        else if (!strcasecmp(v, "false"))
            out->b = false;
        else {
            cfg_seterr(why, why_len, "not a boolean (true or false)");
            return CN_EINVAL;
        }
        return 0;
    case CN_CFG_INT16:
    case CN_CFG_INT32:
    case CN_CFG_INT64:
        if (parse_i64(v, &i, why, why_len))
            return CN_EINVAL;
        if (k->type == CN_CFG_INT16 && (i < INT16_MIN || i > INT16_MAX)) {
            cfg_seterr(why, why_len, "out of range for a 16-bit integer");
            return CN_EINVAL;
        }
        if (k->type == CN_CFG_INT32 && (i < INT32_MIN || i > INT32_MAX)) {
            cfg_seterr(why, why_len, "out of range for a 32-bit integer");
            return CN_EINVAL;
        }
        if ((i < k->min || i > k->max) && !(k->or_minus_one && i == -1))
            return range_err(k, why, why_len);
        if (k->type == CN_CFG_INT64)
            out->i64 = i;
        else
            out->i32 = (int32_t)i;
        return 0;
    case CN_CFG_DOUBLE: {
        char *end;
        errno = 0;
        double d = strtod(v, &end);
        if (!*v || *end || errno || !isfinite(d)) {
            cfg_seterr(why, why_len, "not a number");
            return CN_EINVAL;
        }
        /* INT64_MIN/MAX bounds mean none: a double's range is wider
         * (log.cleaner.io.max.bytes.per.second defaults to Double.MAX). */
        if ((k->min != INT64_MIN && d < (double)k->min) ||
            (k->max != INT64_MAX && d > (double)k->max))
            return range_err(k, why, why_len);
        out->d = d;
        return 0;
    }
    case CN_CFG_ENUM: {
        int e = enum_index(k->enums, v, strlen(v));
        if (e < 0) {
            char c[WHY_MAX];
            enum_choices(k->enums, c, sizeof c);
            cfg_seterr(why, why_len, "must be one of: %s", c);
            return CN_EINVAL;
        }
        out->e = e;
        return 0;
    }
    case CN_CFG_ENUM_LIST: {
        unsigned mask = 0;
        const char *p = v;
        for (;;) {
            const char *comma = strchr(p, ',');
            const char *s = p, *e = comma ? comma : p + strlen(p);
            while (s < e && isspace((unsigned char)*s))
                s++;
            while (e > s && isspace((unsigned char)e[-1]))
                e--;
            int x = enum_index(k->enums, s, (size_t)(e - s));
            if (x < 0) {
                char c[WHY_MAX];
                enum_choices(k->enums, c, sizeof c);
                cfg_seterr(why, why_len,
                       "must be a comma-separated list of: %s", c);
                return CN_EINVAL;
            }
            mask |= 1u << x;
            if (!comma)
                break;
            p = comma + 1;
        }
        out->mask = mask;
        return 0;
    }
    case CN_CFG_LISTENERS: {
        char h[CN_CONFIG_HOST_MAX];
        int port;
        if (!*v) {
            if (k->min == 0)
                return 0;
            cfg_seterr(why, why_len, "must not be empty");
            return CN_EINVAL;
        }
        return cfg_parse_listener_list(v, strcmp(k->name, "listeners") != 0,
                                     h, sizeof h, &port, why, why_len);
    }
    case CN_CFG_STRING:
    case CN_CFG_LIST:
        return 0;
    }
    cfg_seterr(why, why_len, "unknown type");
    return CN_EINVAL;
}

/* Writes a validated non-text value into its typed field at base + off. */
static void store(void *base, const struct cn_config_key *k,
                  const union val *v)
{
    char *p = (char *)base + k->off;
    switch (k->type) {
    case CN_CFG_BOOL:
        memcpy(p, &v->b, sizeof v->b);
        break;
    case CN_CFG_INT16:
    case CN_CFG_INT32:
        memcpy(p, &v->i32, sizeof v->i32);
        break;
    case CN_CFG_INT64:
        memcpy(p, &v->i64, sizeof v->i64);
        break;
    case CN_CFG_DOUBLE:
        memcpy(p, &v->d, sizeof v->d);
        break;
    case CN_CFG_ENUM:
        memcpy(p, &v->e, sizeof v->e);
        break;
    case CN_CFG_ENUM_LIST:
        memcpy(p, &v->mask, sizeof v->mask);
        break;
    default:
        break;
    }
}

static void load(const void *base, size_t off, enum cn_config_type type,
                 union val *v)
{
    const char *p = (const char *)base + off;
    memset(v, 0, sizeof *v);
    switch (type) {
    case CN_CFG_BOOL:
        memcpy(&v->b, p, sizeof v->b);
        break;
    case CN_CFG_INT16:
    case CN_CFG_INT32:
        memcpy(&v->i32, p, sizeof v->i32);
        break;
    case CN_CFG_INT64:
        memcpy(&v->i64, p, sizeof v->i64);
        break;
    case CN_CFG_DOUBLE:
        memcpy(&v->d, p, sizeof v->d);
        break;
    case CN_CFG_ENUM:
        memcpy(&v->e, p, sizeof v->e);
        break;
    case CN_CFG_ENUM_LIST:
        memcpy(&v->mask, p, sizeof v->mask);
        break;
    default:
        break;
    }
}

/* Text of a typed value, as DescribeConfigs and serialization show it. */
static void format_val(const struct cn_config_key *k, const union val *v,
                       char *buf, size_t len)
{
    switch (k->type) {
    case CN_CFG_BOOL:
        snprintf(buf, len, "%s", v->b ? "true" : "false");
        break;
    case CN_CFG_INT16:
    case CN_CFG_INT32:
        snprintf(buf, len, "%d", (int)v->i32);
        break;
    case CN_CFG_INT64:
        snprintf(buf, len, "%lld", (long long)v->i64);
        break;
    case CN_CFG_DOUBLE:
        /* Shortest of the two that reads back to the same double. */
        snprintf(buf, len, "%.15g", v->d);
        if (strtod(buf, NULL) != v->d)
            snprintf(buf, len, "%.17g", v->d);
        break;
    case CN_CFG_ENUM:
        snprintf(buf, len, "%s", k->enums[v->e]);
        break;
    case CN_CFG_ENUM_LIST: {
        size_t used = 0;
        buf[0] = '\0';
        for (int i = 0; k->enums[i] && used < len; i++) {
            if (!(v->mask & (1u << i)))
                continue;
            int n = snprintf(buf + used, len - used, "%s%s",
                             used ? "," : "", k->enums[i]);
            if (n < 0)
                break;
            used += (size_t)n;
        }
        break;
    }
    default:
        buf[0] = '\0';
        break;
    }
}

int cn_config_kafka_type(const struct cn_config_key *k)
{
    switch (k->type) {
    case CN_CFG_BOOL: return CN_KTYPE_BOOLEAN;
    case CN_CFG_INT16: return CN_KTYPE_SHORT;
    case CN_CFG_INT32: return CN_KTYPE_INT;
    case CN_CFG_INT64: return CN_KTYPE_LONG;
    case CN_CFG_DOUBLE: return CN_KTYPE_DOUBLE;
    case CN_CFG_LIST:
    case CN_CFG_ENUM_LIST: return CN_KTYPE_LIST;
    case CN_CFG_STRING:
    case CN_CFG_ENUM:
    case CN_CFG_LISTENERS: return CN_KTYPE_STRING;
    }
    return CN_KTYPE_UNKNOWN;
}

static const char *type_name(enum cn_config_type t)
{
    switch (t) {
    case CN_CFG_BOOL: return "bool";
    case CN_CFG_INT16: return "short";
    case CN_CFG_INT32: return "int";
    case CN_CFG_INT64: return "long";
    case CN_CFG_DOUBLE: return "double";
    case CN_CFG_STRING: return "string";
    case CN_CFG_LIST: return "list";
    case CN_CFG_ENUM: return "enum";
    case CN_CFG_ENUM_LIST: return "enum list";
    case CN_CFG_LISTENERS: return "listeners";
    }
    return "?";
}

/* ---- Broker configuration ---- */

/* The group of broker keys that name one setting (log.retention.ms,
 * .minutes, .hours), strongest first, or NULL for a key on its own.  The
 * topic table's synonym lists are exactly Kafka's groups. */
static const char *const *broker_synonyms(const char *name)
{
    for (int t = 0; t < CN_TOPIC_NKEYS; t++) {
        const char *const *syn = cn_topic_config_key(t)->synonyms;
        if (!syn || !syn[1])
            continue;
        for (int i = 0; syn[i]; i++)
            if (!strcmp(syn[i], name))
                return syn;
    }
    return NULL;
}

int cfg_key_index(const char *name)
{
    size_t n = cn_config_key_count();
    for (size_t i = 0; i < n; i++)
        if (!strcmp(cn_config_key_at(i)->name, name))
            return (int)i;
    return -1;
}

const struct cn_config_key *cn_config_key_find(const char *name)
{
    int i = cfg_key_index(name);
    return i < 0 ? NULL : cn_config_key_at((size_t)i);
}

/* Current text of key i: dynamic per broker, dynamic default, explicit
 * value, else default (may be NULL). */
static const char *cur_text(const struct cn_config *cfg, int i)
{
    if (i < 0)
        return NULL;
    if (cfg->dyn[CN_CFG_LAYER_BROKER][i])
        return cfg->dyn[CN_CFG_LAYER_BROKER][i];
    if (cfg->dyn[CN_CFG_LAYER_DEFAULT][i])
        return cfg->dyn[CN_CFG_LAYER_DEFAULT][i];
    return cfg->text[i] ? cfg->text[i] : cn_config_key_at((size_t)i)->def;
}

/* Source of the value cur_text returns. */
static int cur_source(const struct cn_config *cfg, int i)
{
    if (cfg->dyn[CN_CFG_LAYER_BROKER][i])
        return CN_CFG_SRC_DYNAMIC_BROKER;
    if (cfg->dyn[CN_CFG_LAYER_DEFAULT][i])
        return CN_CFG_SRC_DYNAMIC_DEFAULT_BROKER;
    return cfg->is_set[i] ? CN_CFG_SRC_STATIC_BROKER : CN_CFG_SRC_DEFAULT;
}

const char *cfg_cur(const struct cn_config *cfg, const char *name)
{
    return cur_text(cfg, cfg_key_index(name));
}

bool cfg_is_set(const struct cn_config *cfg, const char *name)
{
    int i = cfg_key_index(name);
    return i >= 0 && cfg->is_set[i];
}

/* Integer value of a key known to be valid, or dflt when it is null. */
static int64_t cur_int(const struct cn_config *cfg, const char *name,
                       int64_t dflt)
{
    const char *t = cfg_cur(cfg, name);
    int64_t v;
    if (!t || parse_i64(t, &v, NULL, 0))
        return dflt;
    return v;
}

/* Copies the first comma-separated entry of s, trimmed. */
static int first_entry(const char *s, char *out, size_t len)
{
    const char *e = strchr(s, ',');
    size_t n = e ? (size_t)(e - s) : strlen(s);
    while (n && isspace((unsigned char)*s)) {
        s++;
        n--;
    }
    while (n && isspace((unsigned char)s[n - 1]))
        n--;
    if (n == 0 || n >= len)
        return CN_EINVAL;
    memcpy(out, s, n);
    out[n] = '\0';
    return 0;
}

/* True when the comma list `list` holds `word` (case-insensitive). */
bool cfg_list_has(const char *list, const char *word)
{
    size_t wl = strlen(word);
    for (const char *p = list; p && *p;) {
        while (*p == ',' || isspace((unsigned char)*p))
            p++;
        const char *e = p;
        while (*e && *e != ',')
            e++;
        const char *t = e;
        while (t > p && isspace((unsigned char)t[-1]))
            t--;
        if ((size_t)(t - p) == wl && !strncasecmp(p, word, wl))
            return true;
        p = e;
    }
    return false;
}

/* Recomputes every field that depends on more than one key. */
void cfg_recompute(struct cn_config *cfg)
{
    const char *roles = cfg_cur(cfg, "process.roles");
    cfg->cluster_mode = roles && roles[0];
    cfg->controller_role = cfg->cluster_mode &&
                           cfg_list_has(roles, "controller");
    cfg->listeners = cfg_cur(cfg, "listeners");
    cfg_parse_listener_list(cfg->listeners, false, cfg->listen_host,
                        sizeof cfg->listen_host, &cfg->listen_port, NULL, 0);
    cfg->advertised_listeners = cfg_cur(cfg, "advertised.listeners");
    const char *cnames = cfg_cur(cfg, "controller.listener.names");
    if (cn_config_resolve_listeners_ex(
            cfg->listeners, cfg_cur(cfg, "listener.security.protocol.map"),
            cfg->advertised_listeners, cnames, cfg->controller_role,
            cfg->listener, CN_LISTENERS_MAX, &cfg->nlisteners, NULL, 0))
        cfg->nlisteners = 0;
    cfg->controller_listener = -1;
    if (cfg->controller_role && cnames)
        for (int i = 0; i < cfg->nlisteners; i++)
            if (cfg_list_has(cnames, cfg->listener[i].name)) {
                cfg->controller_listener = i;
                break;
            }
    if (!cfg->advertised_listeners)
        cfg->advertised_listeners = cfg->listeners;
    cfg_parse_listener_list(cfg->advertised_listeners, false, cfg->advertised_host,
                        sizeof cfg->advertised_host, &cfg->advertised_port,
                        NULL, 0);
    cfg->http_listener = cfg_cur(cfg, "http.listener");
    cfg->http_host[0] = '\0';
    cfg->http_port = 0;
    if (cfg->http_listener[0])
        cfg_parse_listener_list(cfg->http_listener, false, cfg->http_host,
                            sizeof cfg->http_host, &cfg->http_port, NULL, 0);

    cfg->log_dirs = cfg_cur(cfg, "log.dirs");
    if (!cfg->log_dirs)
        cfg->log_dirs = cfg_cur(cfg, "log.dir");
    if (first_entry(cfg->log_dirs, cfg->data_dir, sizeof cfg->data_dir))
        cfg->data_dir[0] = '\0';

    if (!cfg_is_set(cfg, "node.id") && cfg_is_set(cfg, "broker.id"))
        cfg->node_id = (int32_t)cur_int(cfg, "broker.id", 1);
    else
        cfg->node_id = (int32_t)cur_int(cfg, "node.id", 1);

    char why[256];
    if (cfg_parse_voters(cfg_cur(cfg, "controller.quorum.voters"), cfg->voters,
                         CN_VOTERS_MAX, &cfg->nvoters, why, sizeof why))
        cfg->nvoters = 0;
    cfg->broker_heartbeat_interval_ms = cur_int(cfg,
                                                "broker.heartbeat.interval.ms",
                                                2000);
    cfg->broker_session_timeout_ms = cur_int(cfg, "broker.session.timeout.ms",
                                             9000);
    cfg->controller_quorum_election_timeout_ms =
        cur_int(cfg, "controller.quorum.election.timeout.ms", 1000);
    const char *mld = cfg_cur(cfg, "metadata.log.dir");
    if (mld && mld[0])
        snprintf(cfg->metadata_log_dir, sizeof cfg->metadata_log_dir, "%s",
                 mld);
    else if (snprintf(cfg->metadata_log_dir, sizeof cfg->metadata_log_dir,
                      "%s/__cluster_metadata-0",
                      cfg->data_dir) >= (int)sizeof cfg->metadata_log_dir)
        cfg->metadata_log_dir[0] = '\0';

    /* Kafka's precedence: .ms, then .minutes, then .hours. */
    if (cfg_cur(cfg, "log.roll.ms"))
        cfg->log_roll_ms = cur_int(cfg, "log.roll.ms", 0);
    else
        cfg->log_roll_ms = cur_int(cfg, "log.roll.hours", 168) * 3600000;
    int64_t ret;
    if (cfg_cur(cfg, "log.retention.ms"))
        ret = cur_int(cfg, "log.retention.ms", 0);
    else if (cfg_cur(cfg, "log.retention.minutes"))
        ret = cur_int(cfg, "log.retention.minutes", 0) * 60000;
    else
        ret = cur_int(cfg, "log.retention.hours", 168) * 3600000;
    cfg->log_retention_ms = ret < 0 ? -1 : ret;
    cfg->log_flush_interval_ms =
        cur_int(cfg, "log.flush.interval.ms",
                cfg->log_flush_scheduler_interval_ms);
}

int cn_config_init(struct cn_config *cfg)
{
    size_t n = cn_config_key_count();
    memset(cfg, 0, sizeof *cfg);
    cfg->text = calloc(n, sizeof *cfg->text);
    cfg->is_set = calloc(n, sizeof *cfg->is_set);
    cfg->dyn[0] = calloc(n, sizeof *cfg->dyn[0]);
    cfg->dyn[1] = calloc(n, sizeof *cfg->dyn[1]);
    if (!cfg->text || !cfg->is_set || !cfg->dyn[0] || !cfg->dyn[1]) {
        cn_config_fini(cfg);
        return CN_ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        const struct cn_config_key *k = cn_config_key_at(i);
        union val v;
        if (k->off == NONE || !k->def)
            continue;
        int rc = cfg_check_value(k, k->def, &v, NULL, 0);
        (void)rc;
        store(cfg, k, &v);
    }
    cfg_recompute(cfg);
    return 0;
}

void cn_config_fini(struct cn_config *cfg)
{
    for (size_t i = 0; i < cn_config_key_count(); i++) {
        if (cfg->text)
            free(cfg->text[i]);
        for (int l = 0; l < 2; l++)
            if (cfg->dyn[l])
                free(cfg->dyn[l][i]);
    }
    free(cfg->text);
    free(cfg->is_set);
    free(cfg->dyn[0]);
    free(cfg->dyn[1]);
    memset(cfg, 0, sizeof *cfg);
}

/* Rewrites key i's typed field from its current text (a dynamic value may
 * hide the one just set) and the derived fields. */
void cfg_refresh_key(struct cn_config *cfg, int i)
{
    const struct cn_config_key *k = cn_config_key_at((size_t)i);
    const char *t = cur_text(cfg, i);
    union val v;
    if (k->off != NONE && t && cfg_check_value(k, t, &v, NULL, 0) == 0)
        store(cfg, k, &v);
    cfg_recompute(cfg);
}

/* node.id and broker.id name the same thing; refuse two different values. */
static int check_alias(const struct cn_config *cfg, const char *key,
                       const char *value, char *why, size_t why_len)
{
    const char *other;
    if (!strcmp(key, "node.id"))
        other = "broker.id";
    else if (!strcmp(key, "broker.id"))
        other = "node.id";
    else
        return 0;
    if (!cfg_is_set(cfg, other))
        return 0;
    int64_t a = 0, b = cur_int(cfg, other, 0);
    parse_i64(value, &a, NULL, 0);
    if (a != b) {
        cfg_seterr(why, why_len, "conflicts with %s=%lld", other, (long long)b);
        return CN_EINVAL;
    }
    return 0;
}

/* Data directory keys must leave a usable first entry. */
static int check_dir(const char *key, const char *value, char *why,
                     size_t why_len)
{
    char tmp[CN_CONFIG_PATH_MAX];
    if (strcmp(key, "log.dir") && strcmp(key, "log.dirs"))
        return 0;
    if (first_entry(value, tmp, sizeof tmp)) {
        cfg_seterr(why, why_len, "first directory is empty or too long");
        return CN_EINVAL;
    }
    return 0;
}

/* Kafka's listener.name.<name>.ssl.*: only the ssl.* keys, which are
 * what a listener's channel reads with its prefix. */
static int set_listener_key(struct cn_config *cfg, const char *key,
                            const char *value, char *err, size_t err_len)
{
    const char *name = key + 14, *dot = strchr(name, '.');
    size_t nl = dot ? (size_t)(dot - name) : 0;
    int i = dot ? cfg_key_index(dot + 1) : -1;
    if (!nl || nl >= CN_LISTENER_NAME_MAX || i < 0 ||
        strncmp(dot + 1, "ssl.", 4)) {
        cfg_seterr(err, err_len,
                   "unknown config key \"%s\" (listener.name.<listener>. "
                   "takes the ssl.* keys)",
                   key);
        return CN_EINVAL;
    }
    if (!value) {
        cfg_seterr(err, err_len, "missing value for %s", key);
        return CN_EINVAL;
    }
    char why[WHY_MAX];
    char *t = cfg_dup_trim(value, strlen(value));
    if (!t) {
        cfg_seterr(err, err_len, "out of memory setting %s", key);
        return CN_ENOMEM;
    }
    int rc = CN_EINVAL;
    if (cfg_check_value(cn_config_key_at((size_t)i), t, NULL, why,
                        sizeof why)) {
        cfg_seterr(err, err_len, "invalid value \"%s\" for %s: %s", t, key,
                   why);
        goto out;
    }
    if (strlen(t) >= CN_CONFIG_PATH_MAX) {
        cfg_seterr(err, err_len, "invalid value for %s: too long", key);
        goto out;
    }
    char up[CN_LISTENER_NAME_MAX];
    for (size_t j = 0; j < nl; j++)
        up[j] = (char)toupper((unsigned char)name[j]);
    up[nl] = '\0';
    int k = 0;
    while (k < cfg->nlkeys &&
           (cfg->lkeys[k].key != i || strcmp(cfg->lkeys[k].listener, up)))
        k++;
    if (k == CN_LISTENER_KEYS_MAX) {
        cfg_seterr(err, err_len, "%s: more than %d listener.name. keys", key,
                   CN_LISTENER_KEYS_MAX);
        goto out;
    }
    strcpy(cfg->lkeys[k].listener, up);
    cfg->lkeys[k].key = i;
    strcpy(cfg->lkeys[k].value, t);
    if (k == cfg->nlkeys)
        cfg->nlkeys++;
    rc = 0;
out:
    free(t);
    return rc;
}

const char *cn_config_listener_value(const struct cn_config *cfg,
                                     const char *listener, const char *key)
{
    int i = cfg_key_index(key);
    for (int k = 0; i >= 0 && k < cfg->nlkeys; k++)
        if (cfg->lkeys[k].key == i &&
            !strcasecmp(cfg->lkeys[k].listener, listener))
            return cfg->lkeys[k].value;
    return cur_text(cfg, i);
}

int cn_config_set(struct cn_config *cfg, const char *key, const char *value,
                  char *err, size_t err_len)
{
    char why[WHY_MAX];
    union val v;
    int i = cfg_key_index(key);
    if (i < 0 && !strncmp(key, "listener.name.", 14))
        return set_listener_key(cfg, key, value, err, err_len);
    if (i < 0) {
        cfg_seterr(err, err_len, "unknown config key \"%s\"", key);
        return CN_EINVAL;
    }
    const struct cn_config_key *k = cn_config_key_at((size_t)i);
    if (!value) {
        cfg_seterr(err, err_len, "missing value for %s", key);
        return CN_EINVAL;
    }
    char *t = cfg_dup_trim(value, strlen(value));
    if (!t) {
        cfg_seterr(err, err_len, "out of memory setting %s", key);
        return CN_EINVAL;
    }
    if (cfg_check_value(k, t, &v, why, sizeof why) ||
        check_alias(cfg, key, t, why, sizeof why) ||
        check_dir(key, t, why, sizeof why)) {
        cfg_seterr(err, err_len, "invalid value \"%s\" for %s: %s", t, key, why);
        free(t);
        return CN_EINVAL;
    }
    free(cfg->text[i]);
    cfg->text[i] = t;
    cfg->is_set[i] = true;
    cfg_refresh_key(cfg, i);
    return 0;
}

int cn_config_get(const struct cn_config *cfg, const char *key,
                  const char **value, bool *set)
{
    int i = cfg_key_index(key);
    if (i < 0)
        return CN_ENOTFOUND;
    *value = cur_text(cfg, i);
    if (set)
        *set = cfg->is_set[i];
    return 0;
}

void cn_config_describe(const struct cn_config *cfg, size_t i,
                        struct cn_config_entry *out)
{
    const struct cn_config_key *k = cn_config_key_at(i);
    memset(out, 0, sizeof *out);
    out->name = k->name;
    out->value = cur_text(cfg, (int)i);
    out->source = cur_source(cfg, (int)i);
    out->read_only = !cn_config_key_is_dynamic(k->name);
    out->sensitive = k->sensitive;
    out->kafka_type = cn_config_kafka_type(k);
    out->doc = k->doc;
    /* Kafka's ConfigHelper.configSynonyms: layer by layer (dynamic per
     * broker, dynamic default, static, built-in), each synonym key with a
     * value there; then the leading ones of other names are dropped, so
     * a key with no value of its own lists none. */
    const char *one[] = {k->name, NULL};
    const char *const *syn = broker_synonyms(k->name);
    if (!syn)
        syn = one;
    static const int srcs[4] = {CN_CFG_SRC_DYNAMIC_BROKER,
                                CN_CFG_SRC_DYNAMIC_DEFAULT_BROKER,
                                CN_CFG_SRC_STATIC_BROKER, CN_CFG_SRC_DEFAULT};
    for (int l = 0; l < 4; l++)
        for (int s = 0; syn[s] && out->syn_count < CN_CONFIG_SYN_MAX; s++) {
            int j = cfg_key_index(syn[s]);
            if (j < 0)
                continue;
            const struct cn_config_key *sk = cn_config_key_at((size_t)j);
            const char *v = l == 0   ? cfg->dyn[CN_CFG_LAYER_BROKER][j]
                            : l == 1 ? cfg->dyn[CN_CFG_LAYER_DEFAULT][j]
                            : l == 2 ? cfg->text[j]
                                     : sk->def;
            if (!v || (out->syn_count == 0 && j != (int)i))
                continue;
            out->syn[out->syn_count].name = sk->name;
            out->syn[out->syn_count].value = v;
            out->syn[out->syn_count].source = srcs[l];
            out->syn_count++;
        }
}

int cn_config_describe_default(const struct cn_config *cfg, size_t i,
                               struct cn_config_entry *out)
{
    const struct cn_config_key *k = cn_config_key_at(i);
    const char *v = cfg->dyn[CN_CFG_LAYER_DEFAULT][i];
    if (!v)
        return CN_ENOTFOUND;
    memset(out, 0, sizeof *out);
    out->name = k->name;
    out->value = v;
    out->source = CN_CFG_SRC_DYNAMIC_DEFAULT_BROKER;
    out->read_only = false;
    out->sensitive = k->sensitive;
    out->kafka_type = cn_config_kafka_type(k);
    out->doc = k->doc;
    out->syn[0].name = k->name;
    out->syn[0].value = v;
    out->syn[0].source = CN_CFG_SRC_DYNAMIC_DEFAULT_BROKER;
    out->syn_count = 1;
    return 0;
}

int cn_config_describe_key(const struct cn_config *cfg, const char *name,
                           struct cn_config_entry *out)
{
    int i = cfg_key_index(name);
    if (i < 0)
        return CN_ENOTFOUND;
    cn_config_describe(cfg, (size_t)i, out);
    return 0;
}

/* Kafka's KafkaConfig listener checks, for what one node can check: the
 * inter-broker keys name a listener that exists. */
static int check_listeners(const struct cn_config *cfg, char *err,
                           size_t err_len)
{
    struct cn_listener l[CN_LISTENERS_MAX];
    int n;
    int rc = cn_config_resolve_listeners(
        cfg->listeners, cfg_cur(cfg, "listener.security.protocol.map"),
        cfg_cur(cfg, "advertised.listeners"),
        cfg_cur(cfg, "controller.listener.names"), l, CN_LISTENERS_MAX, &n,
        err, err_len);
    if (rc)
        return rc;
    bool by_name = cfg_is_set(cfg, "inter.broker.listener.name");
    bool by_proto = cfg_is_set(cfg, "security.inter.broker.protocol");
    if (by_name && by_proto) {
        cfg_seterr(err, err_len,
                   "inter.broker.listener.name and "
                   "security.inter.broker.protocol are both set; only one "
                   "of them may be, as in Kafka");
        return CN_EINVAL;
    }
    if (!by_name && !by_proto)
        return 0;
    const char *key = by_name ? "inter.broker.listener.name"
                              : "security.inter.broker.protocol";
    const char *want = cfg_cur(cfg, key);
    if (by_proto) {
        int i = 0;
        while (cfg_proto_names[i] && strcasecmp(cfg_proto_names[i], want))
            i++;
        if (!cfg_proto_names[i]) {
            cfg_seterr(err, err_len,
                       "invalid value \"%s\" for %s: not one of PLAINTEXT, "
                       "SSL, SASL_PLAINTEXT, SASL_SSL",
                       want, key);
            return CN_EINVAL;
        }
    }
    /* Kafka: the listener named like the protocol, for the protocol key. */
    for (int i = 0; i < n; i++)
        if (!strcasecmp(l[i].name, want))
            return 0;
    cfg_seterr(err, err_len,
               "invalid value \"%s\" for %s: no listener of that name in "
               "listeners (%s)",
               want, key, cfg->listeners);
    return CN_EINVAL;
}

int cn_config_check(const struct cn_config *cfg, char *err, size_t err_len)
{
    if (check_listeners(cfg, err, err_len))
        return CN_EINVAL;
    if (cfg_check_cluster(cfg, err, err_len))
        return CN_EINVAL;
    /* Kafka's KafkaConfig.validateValues: the retention that wins by
     * precedence must be -1 or at least 1 ms; 0 would delete every
     * segment as soon as it rolled. */
    if (cfg->log_retention_ms == 0) {
        const char *key = cfg_cur(cfg, "log.retention.ms") ? "log.retention.ms"
                          : cfg_cur(cfg, "log.retention.minutes")
                              ? "log.retention.minutes"
                              : "log.retention.hours";
        cfg_seterr(err, err_len,
               "invalid value \"0\" for %s: log.retention.ms must be "
               "unlimited (-1) or at least 1 ms, as in Kafka (0 would delete "
               "every segment as soon as it rolls)",
               key);
        return CN_EINVAL;
    }
    return 0;
}

/* ---- Properties text ---- */


/* Appends the UTF-8 encoding of code point c. */
static size_t put_utf8(char *o, unsigned c)
{
    if (c < 0x80) {
        o[0] = (char)c;
        return 1;
    }
    if (c < 0x800) {
        o[0] = (char)(0xc0 | (c >> 6));
        o[1] = (char)(0x80 | (c & 0x3f));
        return 2;
    }
    o[0] = (char)(0xe0 | (c >> 12));
    o[1] = (char)(0x80 | ((c >> 6) & 0x3f));
    o[2] = (char)(0x80 | (c & 0x3f));
    return 3;
}

/*
 * Unescapes s[0..n) into o (at least n bytes; \uXXXX shrinks from 6 to at
 * most 3), Java Properties style.  Returns the length written.
 */
static size_t unescape(const char *s, size_t n, char *o)
{
    size_t j = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '\\' || i + 1 == n) {
            o[j++] = s[i];
            continue;
        }
        char c = s[++i];
        switch (c) {
        case 't': o[j++] = '\t'; break;
        case 'n': o[j++] = '\n'; break;
        case 'r': o[j++] = '\r'; break;
        case 'f': o[j++] = '\f'; break;
        case 'u': {
            unsigned cp = 0;
            size_t k;
            for (k = 0; k < 4 && i + 1 + k < n &&
                        isxdigit((unsigned char)s[i + 1 + k]);
                 k++) {
                char h = s[i + 1 + k];
                cp = cp * 16 + (unsigned)(isdigit((unsigned char)h)
                                              ? h - '0'
                                              : (tolower((unsigned char)h) -
                                                 'a' + 10));
            }
            if (k == 4) {
                j += put_utf8(o + j, cp);
                i += 4;
            } else {
                o[j++] = 'u';
            }
            break;
        }
        default: o[j++] = c; break;
        }
    }
    return j;
}

/* Splits one logical line (continuations joined, leading space gone) into
 * key and value and hands them to fn. */
static int handle_line(char *line, size_t n, cfg_kv_fn fn, void *ctx, char *msg,
                       size_t msg_len)
{
    size_t i = 0;
    while (i < n && line[i] != '=' && line[i] != ':' &&
           !isspace((unsigned char)line[i])) {
        if (line[i] == '\\' && i + 1 < n)
            i++;
        i++;
    }
    size_t klen = i;
    while (i < n && isspace((unsigned char)line[i]))
        i++;
    if (i < n && (line[i] == '=' || line[i] == ':'))
        i++;
    while (i < n && isspace((unsigned char)line[i]))
        i++;

    char *key = malloc(klen + 1), *val = malloc(n - i + 1);
    int rc = CN_EINVAL;
    if (!key || !val) {
        cfg_seterr(msg, msg_len, "out of memory");
        goto out_free;
    }
    key[unescape(line, klen, key)] = '\0';
    size_t vlen = unescape(line + i, n - i, val);
    while (vlen && isspace((unsigned char)val[vlen - 1]))
        vlen--;
    val[vlen] = '\0';
    if (!key[0]) {
        cfg_seterr(msg, msg_len, "missing key before '%c'", line[0]);
        goto out_free;
    }
    rc = fn(ctx, key, val, msg, msg_len);
out_free:
    free(key);
    free(val);
    return rc;
}

int cfg_parse_props(const char *text, const char *origin, cfg_kv_fn fn,
                       void *ctx, char *err, size_t err_len)
{
    char msg[MSG_MAX];
    size_t cap = 256, len = 0;
    char *buf = malloc(cap);
    const char *p = text;
    int line = 0, start = 0, rc = 0;
    bool cont = false;

    if (!buf) {
        cfg_seterr(err, err_len, "%s: out of memory", origin ? origin : "config");
        return CN_EINVAL;
    }
    while (*p || cont) {
        const char *e = strchr(p, '\n');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        const char *s = p;
        line++;
        p = e ? e + 1 : p + n;
        if (n && s[n - 1] == '\r')
            n--;
        while (n && isspace((unsigned char)*s)) {
            s++;
            n--;
        }
        if (!cont) {
            start = line;
            len = 0;
            if (n == 0 || *s == '#' || *s == '!')
                goto next;
        }
        /* An odd number of trailing backslashes continues the line. */
        size_t bs = 0;
        while (bs < n && s[n - 1 - bs] == '\\')
            bs++;
        bool more = bs % 2 == 1;
        if (more)
            n--;
        if (len + n + 1 > cap) {
            char *nb;
            while (len + n + 1 > cap)
                cap *= 2;
            nb = realloc(buf, cap);
            if (!nb) {
                cfg_seterr(err, err_len, "%s: out of memory",
                       origin ? origin : "config");
                rc = CN_EINVAL;
                goto out_free;
            }
            buf = nb;
        }
        memcpy(buf + len, s, n);
        len += n;
        cont = more && (e != NULL);
        if (cont)
            continue;
        if (len && handle_line(buf, len, fn, ctx, msg, sizeof msg)) {
            cfg_seterr(err, err_len, "%s:%d: %s", origin ? origin : "line",
                   start, msg);
            rc = CN_EINVAL;
            goto out_free;
        }
    next:
        cont = false;
        if (!e)
            break;
    }
out_free:
    free(buf);
    return rc;
}

int cn_props_parse(const char *text, const char *origin, cn_props_fn fn,
                   void *ctx, char *err, size_t err_len)
{
    return cfg_parse_props(text, origin, fn, ctx, err, err_len);
}

static int broker_kv(void *ctx, const char *key, const char *value,
                     char *err, size_t err_len)
{
    return cn_config_set(ctx, key, value, err, err_len);
}

int cn_config_load_text(struct cn_config *cfg, const char *text,
                        const char *origin, char *err, size_t err_len)
{
    return cfg_parse_props(text, origin, broker_kv, cfg, err, err_len);
}

int cn_config_load_file(struct cn_config *cfg, const char *path, char *err,
                        size_t err_len)
{
    return cn_config_load_file_with(cfg, path, cn_config_load_text, err,
                                    err_len);
}

int cn_config_load_file_with(struct cn_config *cfg, const char *path,
                             cn_config_parse_fn parse, char *err,
                             size_t err_len)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    size_t len = 0, cap = 0;
    int rc = CN_EINVAL;

    if (!f) {
        cfg_seterr(err, err_len, "cannot open config file %s: %s", path,
               strerror(errno));
        return CN_EINVAL;
    }
    for (;;) {
        if (cap - len < 4096) {
            cap = cap ? cap * 2 : 8192;
            char *nb = realloc(buf, cap);
            if (!nb) {
                cfg_seterr(err, err_len, "%s: out of memory", path);
                goto out_close;
            }
            buf = nb;
        }
        size_t got = fread(buf + len, 1, cap - len - 1, f);
        len += got;
        if (got == 0)
            break;
    }
    if (ferror(f)) {
        cfg_seterr(err, err_len, "cannot read config file %s: %s", path,
               strerror(errno));
        goto out_close;
    }
    buf[len] = '\0';
    if (strlen(buf) != len) {
        cfg_seterr(err, err_len, "%s: contains a NUL byte", path);
        goto out_close;
    }
    rc = parse(cfg, buf, path, err, err_len);
out_close:
    free(buf);
    fclose(f);
    return rc;
}

int cn_config_set_arg(struct cn_config *cfg, const char *kv, char *err,
                      size_t err_len)
{
    char msg[MSG_MAX];
    /* Callers pass a string (argv[i], i < argc); the analyzer thinks
     * argv may hold NULLs. */
    /* NOLINTNEXTLINE(clang-analyzer-core.NonNullParamChecker) */
    const char *eq = strchr(kv, '=');
    if (!eq) {
        cfg_seterr(err, err_len, "--set: expected key=value, got \"%s\"", kv);
        return CN_EINVAL;
    }
    char *key = cfg_dup_trim(kv, (size_t)(eq - kv));
    if (!key) {
        cfg_seterr(err, err_len, "--set: out of memory");
        return CN_EINVAL;
    }
    int rc = cn_config_set(cfg, key, eq + 1, msg, sizeof msg);
    if (rc)
        cfg_seterr(err, err_len, "--set: %s", msg);
    free(key);
    return rc;
}

int cn_config_from_args(struct cn_config *cfg, int argc, char **argv,
                        char *err, size_t err_len)
{
    const char *file = NULL;
    int i;

    /* The file goes first wherever -c appears: --set always wins. */
    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool is_file = !strcmp(a, "-c") || !strcmp(a, "--config");
        const char *path = NULL;
        if (is_file || !strcmp(a, "--set")) {
            if (i + 1 >= argc) {
                cfg_seterr(err, err_len, "%s needs an argument", a);
                return CN_EINVAL;
            }
            if (is_file)
                path = argv[i + 1];
            i++;
        } else if (!strncmp(a, "--config=", 9)) {
            path = a + 9;
        } else if (strncmp(a, "--set=", 6)) {
            cfg_seterr(err, err_len, "unknown argument \"%s\"", a);
            return CN_EINVAL;
        }
        if (path && file) {
            cfg_seterr(err, err_len, "only one config file allowed");
            return CN_EINVAL;
        }
        if (path)
            file = path;
    }
    if (file && cn_config_load_file(cfg, file, err, err_len))
        return CN_EINVAL;
    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        /* argv[i] is not NULL for i < argc; the analyzer does not know. */
        /* NOLINTNEXTLINE(clang-analyzer-core.NonNullParamChecker) */
        if (!strcmp(a, "--set")) {
            if (cn_config_set_arg(cfg, argv[++i], err, err_len))
                return CN_EINVAL;
        } else if (!strncmp(a, "--set=", 6)) {
            if (cn_config_set_arg(cfg, a + 6, err, err_len))
                return CN_EINVAL;
        } else if (!strcmp(a, "-c") || !strcmp(a, "--config")) {
            i++;
        }
    }
    return cn_config_check(cfg, err, err_len);
}

void cn_config_print_help(FILE *f)
{
    size_t n = cn_config_key_count();
    fprintf(f, "Broker keys (cairn -c FILE, --set key=value):\n\n");
    for (size_t i = 0; i < n; i++) {
        const struct cn_config_key *k = cn_config_key_at(i);
        fprintf(f, "  %s (%s, default: %s)\n      %s\n", k->name,
                type_name(k->type), k->def ? (k->def[0] ? k->def : "\"\"")
                                           : "null",
                k->doc);
    }
    fprintf(f, "\nTopic keys (CreateTopics, IncrementalAlterConfigs):\n\n");
    for (int t = 0; t < CN_TOPIC_NKEYS; t++) {
        const struct cn_config_key *k = cn_topic_config_key(t);
        fprintf(f, "  %s (%s, default: %s from %s)\n      %s\n", k->name,
                type_name(k->type), k->def, k->synonyms[0], k->doc);
    }
}

/* ---- Topic configuration ---- */

int cn_topic_config_key_find(const char *name)
{
    for (int t = 0; t < CN_TOPIC_NKEYS; t++)
        if (!strcmp(cn_topic_config_key(t)->name, name))
            return t;
    return -1;
}

static void topic_reset(struct cn_topic_config *tc, int t)
{
    const struct cn_config_key *k = cn_topic_config_key(t);
    union val v;
    if (tc->broker) {
        load(tc->broker, k->syn_off, k->type, &v);
    } else {
        int rc = cfg_check_value(k, k->def, &v, NULL, 0);
        (void)rc;
    }
    store(tc, k, &v);
    tc->overrides &= ~(1u << t);
}

void cn_topic_config_init_defaults(struct cn_topic_config *tc,
                                   const struct cn_config *broker)
{
    memset(tc, 0, sizeof *tc);
    tc->broker = broker;
    for (int t = 0; t < CN_TOPIC_NKEYS; t++)
        topic_reset(tc, t);
}

/* Validates one topic key; fills *t and *v on success. */
static int topic_check(const char *key, const char *value, int *t,
                       union val *v, char *err, size_t err_len)
{
    char why[WHY_MAX];
    *t = cn_topic_config_key_find(key);
    if (*t < 0) {
        cfg_seterr(err, err_len, "unknown topic config key \"%s\"", key);
        return CN_EINVAL;
    }
    if (!value) {
        cfg_seterr(err, err_len, "missing value for %s", key);
        return CN_EINVAL;
    }
    char *trim = cfg_dup_trim(value, strlen(value));
    if (!trim) {
        cfg_seterr(err, err_len, "out of memory setting %s", key);
        return CN_EINVAL;
    }
    int rc = cfg_check_value(cn_topic_config_key(*t), trim, v, why, sizeof why);
    if (rc)
        cfg_seterr(err, err_len, "invalid value \"%s\" for %s: %s", trim, key,
               why);
    free(trim);
    return rc;
}

int cn_topic_config_validate(const char *key, const char *value, char *err,
                             size_t err_len)
{
    int t;
    union val v;
    return topic_check(key, value, &t, &v, err, err_len);
}

int cn_topic_config_set(struct cn_topic_config *tc, const char *key,
                        const char *value, char *err, size_t err_len)
{
    int t;
    union val v;
    if (topic_check(key, value, &t, &v, err, err_len))
        return CN_EINVAL;
    store(tc, cn_topic_config_key(t), &v);
    tc->overrides |= 1u << t;
    return 0;
}

void cn_topic_config_rebase(struct cn_topic_config *tc)
{
    for (int t = 0; t < CN_TOPIC_NKEYS; t++)
        if (!cn_topic_config_is_override(tc, t))
            topic_reset(tc, t);
}

int cn_topic_config_delete(struct cn_topic_config *tc, const char *key)
{
    int t = cn_topic_config_key_find(key);
    if (t < 0)
        return CN_ENOTFOUND;
    topic_reset(tc, t);
    return 0;
}

bool cn_topic_config_is_override(const struct cn_topic_config *tc,
                                 enum cn_topic_key k)
{
    return (unsigned)k < CN_TOPIC_NKEYS && (tc->overrides & (1u << k));
}

void cn_topic_config_describe(const struct cn_topic_config *tc,
                              enum cn_topic_key t, char *buf, size_t buf_len,
                              struct cn_config_entry *out)
{
    const struct cn_config_key *k = cn_topic_config_key(t);
    union val v;

    memset(out, 0, sizeof *out);
    load(tc, k->off, k->type, &v);
    format_val(k, &v, buf, buf_len);
    out->name = k->name;
    out->value = buf;
    out->source = CN_CFG_SRC_DEFAULT;
    if (cn_topic_config_is_override(tc, t)) {
        out->source = CN_CFG_SRC_TOPIC;
    } else if (tc->broker) {
        /* The strongest layer of any synonym (sources count down). */
        for (int i = 0; k->synonyms[i]; i++) {
            int j = cfg_key_index(k->synonyms[i]);
            int src = j < 0 ? CN_CFG_SRC_DEFAULT : cur_source(tc->broker, j);
            if (src < out->source)
                out->source = src;
        }
    }
    out->read_only = k->read_only;
    out->sensitive = k->sensitive;
    out->kafka_type = cn_config_kafka_type(k);
    out->doc = k->doc;
    out->synonyms = k->synonyms;
}

char *cn_topic_config_serialize(const struct cn_topic_config *tc)
{
    /* Every value is a number or an enum name, so a line is < 128 bytes. */
    char out[CN_TOPIC_NKEYS * 128 + 1];
    size_t used = 0;
    out[0] = '\0';
    for (int t = 0; t < CN_TOPIC_NKEYS; t++) {
        char val[96];
        union val v;
        const struct cn_config_key *k = cn_topic_config_key(t);
        if (!cn_topic_config_is_override(tc, t))
            continue;
        load(tc, k->off, k->type, &v);
        format_val(k, &v, val, sizeof val);
        int n = snprintf(out + used, sizeof out - used, "%s=%s\n", k->name,
                         val);
        if (n > 0)
            used += (size_t)n;
    }
    return strdup(out);
}

static int topic_kv(void *ctx, const char *key, const char *value, char *err,
                    size_t err_len)
{
    return cn_topic_config_set(ctx, key, value, err, err_len);
}

int cn_topic_config_parse(struct cn_topic_config *tc, const char *text,
                          const char *origin, char *err, size_t err_len)
{
    return cfg_parse_props(text, origin, topic_kv, tc, err, err_len);
}
