/*
 * config_listeners.c - the listener keys: `listeners`,
 * `advertised.listeners`, `listener.security.protocol.map` and
 * `controller.listener.names` parsed and resolved into the listener array;
 * see config.h.  Part of the configuration module (config_int.h).
 */
#include "config.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config_int.h"
#include "err.h"

/* ---- Listeners ---- */

/* Parses one trimmed listener of n bytes; writes a bare reason on error.
 * *plain says whether it is PLAINTEXT or scheme-less; name (NULL: not
 * wanted) gets the listener name in upper case, "" when scheme-less. */
static int parse_one_listener(const char *s, size_t n, char *host,
                              size_t host_len, int *port, bool *plain,
                              char *name, char *why, size_t why_len)
{
    const char *end = s + n, *hs, *he, *ps;
    const char *sep = NULL;

    for (const char *p = s; p + 2 < end; p++)
        if (p[0] == ':' && p[1] == '/' && p[2] == '/') {
            sep = p;
            break;
        }
    *plain = true;
    if (name)
        name[0] = '\0';
    if (sep) {
        size_t sl = (size_t)(sep - s);
        if (sl == 0) {
            cfg_seterr(why, why_len, "empty listener name");
            return CN_EINVAL;
        }
        if (sl >= CN_LISTENER_NAME_MAX) {
            cfg_seterr(why, why_len, "listener name too long");
            return CN_EINVAL;
        }
        for (size_t i = 0; i < sl; i++)
            if (!isalnum((unsigned char)s[i]) && s[i] != '_' &&
                s[i] != '-') {
                cfg_seterr(why, why_len, "bad listener name");
                return CN_EINVAL;
            }
        if (name) {
            for (size_t i = 0; i < sl; i++)
                name[i] = (char)toupper((unsigned char)s[i]);
            name[sl] = '\0';
        }
        *plain = sl == 9 && !strncasecmp(s, "PLAINTEXT", 9);
        s = sep + 3;
    }
    if (s < end && *s == '[') {
        hs = s + 1;
        he = memchr(hs, ']', (size_t)(end - hs));
        if (!he) {
            cfg_seterr(why, why_len, "missing ']' after IPv6 address");
            return CN_EINVAL;
        }
        if (he + 1 >= end || he[1] != ':') {
            cfg_seterr(why, why_len, "missing port (expected [host]:port)");
            return CN_EINVAL;
        }
        ps = he + 2;
    } else {
        const char *colon = NULL;
        int colons = 0;
        for (const char *p = s; p < end; p++)
            if (*p == ':') {
                colon = p;
                colons++;
            }
        if (!colon) {
            cfg_seterr(why, why_len, "missing port (expected host:port)");
            return CN_EINVAL;
        }
        if (colons > 1) {
            cfg_seterr(why, why_len, "IPv6 address must be in brackets");
            return CN_EINVAL;
        }
        hs = s;
        he = colon;
        ps = colon + 1;
    }
    for (const char *p = hs; p < he; p++)
        if (isspace((unsigned char)*p) || *p == '/' || *p == '[' ||
            *p == ']' || *p == ',') {
            cfg_seterr(why, why_len, "bad character in host");
            return CN_EINVAL;
        }
    if ((size_t)(he - hs) >= host_len) {
        cfg_seterr(why, why_len, "host name too long");
        return CN_EINVAL;
    }
    if (ps >= end) {
        cfg_seterr(why, why_len, "missing port");
        return CN_EINVAL;
    }
    long v = 0;
    for (const char *p = ps; p < end; p++) {
        if (!isdigit((unsigned char)*p) || v > 65535) {
            cfg_seterr(why, why_len, "port is not a number in 0..65535");
            return CN_EINVAL;
        }
        v = v * 10 + (*p - '0');
    }
    if (v > 65535) {
        cfg_seterr(why, why_len, "port is not a number in 0..65535");
        return CN_EINVAL;
    }
    memcpy(host, hs, (size_t)(he - hs));
    host[he - hs] = '\0';
    *port = (int)v;
    return 0;
}

/* Calls fn for each trimmed entry of a comma list; a bare reason on
 * error (an empty entry, or what fn says). */
typedef int (*entry_fn)(const char *s, size_t n, void *ctx, char *why,
                        size_t why_len);
static int each_entry(const char *text, entry_fn fn, void *ctx, char *why,
                      size_t why_len)
{
    const char *p = text;
    for (;;) {
        const char *comma = strchr(p, ',');
        const char *e = comma ? comma : p + strlen(p);
        const char *s = p;
        while (s < e && isspace((unsigned char)*s))
            s++;
        while (e > s && isspace((unsigned char)e[-1]))
            e--;
        if (s == e) {
            cfg_seterr(why, why_len, "empty listener");
            return CN_EINVAL;
        }
        int rc = fn(s, (size_t)(e - s), ctx, why, why_len);
        if (rc)
            return rc;
        if (!comma)
            return 0;
        p = comma + 1;
    }
}

struct list_ctx {
    struct cn_listener l[CN_LISTENERS_MAX];
    int n;
    int pick;        /* first plaintext entry, else 0 */
    bool found;
    bool same_port_ok; /* advertised.listeners may repeat a port */
};

static int list_entry(const char *s, size_t n, void *ctx, char *why,
                      size_t why_len)
{
    struct list_ctx *lc = ctx;
    struct cn_listener *l;
    bool plain;
    char w[WHY_MAX];
    if (lc->n == CN_LISTENERS_MAX) {
        cfg_seterr(why, why_len, "more than %d listeners", CN_LISTENERS_MAX);
        return CN_EINVAL;
    }
    l = &lc->l[lc->n];
    memset(l, 0, sizeof *l);
    if (parse_one_listener(s, n, l->host, sizeof l->host, &l->port, &plain,
                           l->name, w, sizeof w)) {
        cfg_seterr(why, why_len, "\"%.*s\": %s", (int)n, s, w);
        return CN_EINVAL;
    }
    /* Kafka: a scheme-less entry is PLAINTEXT. */
    if (!l->name[0])
        strcpy(l->name, "PLAINTEXT");
    for (int i = 0; i < lc->n; i++) {
        if (!strcmp(lc->l[i].name, l->name)) {
            cfg_seterr(why, why_len, "listener name %s is used twice",
                       l->name);
            return CN_EINVAL;
        }
        if (l->port && lc->l[i].port == l->port && !lc->same_port_ok) {
            cfg_seterr(why, why_len, "port %d is used by %s and %s",
                       l->port, lc->l[i].name, l->name);
            return CN_EINVAL;
        }
    }
    if (plain && !lc->found) {
        lc->pick = lc->n;
        lc->found = true;
    }
    lc->n++;
    return 0;
}

static int parse_list(const char *text, struct list_ctx *lc,
                      bool same_port_ok, char *why, size_t why_len)
{
    memset(lc, 0, sizeof *lc);
    lc->same_port_ok = same_port_ok;
    return each_entry(text, list_entry, lc, why, why_len);
}

/* Comma list; picks the first plaintext entry, else the first.  A bare
 * reason on error. */
int cfg_parse_listener_list(const char *text, bool same_port_ok, char *host,
                            size_t host_len, int *port, char *why,
                            size_t why_len)
{
    struct list_ctx *lc = malloc(sizeof *lc);
    if (!lc) {
        cfg_seterr(why, why_len, "out of memory");
        return CN_ENOMEM;
    }
    int rc = parse_list(text, lc, same_port_ok, why, why_len);
    if (rc == 0) {
        const struct cn_listener *l = &lc->l[lc->pick];
        if (strlen(l->host) >= host_len) {
            cfg_seterr(why, why_len, "host name too long");
            rc = CN_EINVAL;
        } else {
            strcpy(host, l->host);
            *port = l->port;
        }
    }
    free(lc);
    return rc;
}

const char *const cfg_proto_names[] = {"PLAINTEXT", "SSL",
                                          "SASL_PLAINTEXT", "SASL_SSL", NULL};

const char *cn_sec_proto_name(int proto)
{
    return proto >= 0 && proto < 4 ? cfg_proto_names[proto] : "?";
}

/* Protocol of listener `name` in a NAME:PROTOCOL comma list; a bare
 * reason when the map is malformed or does not name it. */
static int map_lookup(const char *map, const char *name, int *proto,
                      char *why, size_t why_len)
{
    const char *p = map;
    bool found = false;
    while (*p) {
        const char *comma = strchr(p, ',');
        const char *e = comma ? comma : p + strlen(p);
        const char *s = p;
        while (s < e && isspace((unsigned char)*s))
            s++;
        while (e > s && isspace((unsigned char)e[-1]))
            e--;
        const char *colon = memchr(s, ':', (size_t)(e - s));
        if (s == e || !colon || colon == s || colon + 1 == e) {
            cfg_seterr(why, why_len,
                       "\"%.*s\" is not NAME:PROTOCOL", (int)(e - s), s);
            return CN_EINVAL;
        }
        size_t nl = (size_t)(colon - s), pl = (size_t)(e - colon - 1);
        int pr = -1;
        for (int i = 0; cfg_proto_names[i]; i++)
            if (strlen(cfg_proto_names[i]) == pl &&
                !strncasecmp(colon + 1, cfg_proto_names[i], pl))
                pr = i;
        if (pr < 0) {
            cfg_seterr(why, why_len,
                       "unknown security protocol \"%.*s\" (one of "
                       "PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)",
                       (int)pl, colon + 1);
            return CN_EINVAL;
        }
        if (!found && strlen(name) == nl && !strncasecmp(s, name, nl)) {
            *proto = pr;
            found = true;
        }
        if (!comma)
            break;
        p = comma + 1;
    }
    if (!found) {
        cfg_seterr(why, why_len, "listener name %s is not mapped", name);
        return CN_ENOTFOUND;
    }
    return 0;
}

/* True if name is an entry of the comma list (case-insensitive). */
static bool in_list(const char *list, const char *name)
{
    size_t nl = strlen(name);
    const char *p = list;
    while (p && *p) {
        const char *comma = strchr(p, ',');
        const char *e = comma ? comma : p + strlen(p);
        while (p < e && isspace((unsigned char)*p))
            p++;
        while (e > p && isspace((unsigned char)e[-1]))
            e--;
        if ((size_t)(e - p) == nl && !strncasecmp(p, name, nl))
            return true;
        p = comma ? comma + 1 : NULL;
    }
    return false;
}

int cn_config_resolve_listeners(const char *listeners, const char *map,
                                const char *advertised,
                                const char *controller_names,
                                struct cn_listener *out, int max, int *n,
                                char *err, size_t err_len)
{
    return cn_config_resolve_listeners_ex(listeners, map, advertised,
                                          controller_names, false, out, max, n,
                                          err, err_len);
}

int cn_config_resolve_listeners_ex(const char *listeners, const char *map,
                                   const char *advertised,
                                   const char *controller_names,
                                   bool bind_controller,
                                   struct cn_listener *out, int max, int *n,
                                   char *err, size_t err_len)
{
    char why[WHY_MAX];
    int rc = CN_EINVAL;
    struct list_ctx *lc = malloc(2 * sizeof *lc);
    if (!lc)
        return CN_ENOMEM;
    struct list_ctx *ac = lc + 1;
    *n = 0;
    if (parse_list(listeners, lc, false, why, sizeof why)) {
        cfg_seterr(err, err_len, "invalid listeners \"%s\": %s", listeners,
                   why);
        goto out;
    }
    if (advertised && parse_list(advertised, ac, true, why, sizeof why)) {
        cfg_seterr(err, err_len, "invalid advertised.listeners \"%s\": %s",
                   advertised, why);
        goto out;
    }
    for (int i = 0; i < lc->n; i++) {
        struct cn_listener *l = &lc->l[i];
        /* Not bound, so their protocol does not matter here (Kafka maps
         * an unmapped controller listener to PLAINTEXT). */
        if (controller_names && in_list(controller_names, l->name)) {
            if (bind_controller &&
                map_lookup(map, l->name, &l->proto, why, sizeof why))
                l->proto = CN_SEC_PLAINTEXT;
            continue;
        }
        if (map_lookup(map, l->name, &l->proto, why, sizeof why)) {
            cfg_seterr(err, err_len,
                       "invalid listener.security.protocol.map \"%s\": %s%s",
                       map, why,
                       strstr(why, "not mapped") ? " (listeners uses it)" : "");
            goto out;
        }
    }
    if (advertised)
        for (int j = 0; j < ac->n; j++) {
            int i = 0;
            while (i < lc->n && strcmp(lc->l[i].name, ac->l[j].name))
                i++;
            if (i == lc->n) {
                cfg_seterr(err, err_len,
                           "invalid advertised.listeners \"%s\": listener "
                           "name %s is not in listeners",
                           advertised, ac->l[j].name);
                goto out;
            }
            strcpy(lc->l[i].adv_host, ac->l[j].host);
            lc->l[i].adv_port = ac->l[j].port;
        }
    int k = 0;
    for (int i = 0; i < lc->n; i++) {
        if (!bind_controller && controller_names &&
            in_list(controller_names, lc->l[i].name))
            continue;
        if (k == max) {
            cfg_seterr(err, err_len, "invalid listeners: more than %d", max);
            goto out;
        }
        out[k++] = lc->l[i];
    }
    if (k == 0) {
        cfg_seterr(err, err_len,
                   "invalid listeners \"%s\": every listener is a "
                   "controller listener (controller.listener.names); Cairn "
                   "serves only broker listeners",
                   listeners);
        goto out;
    }
    *n = k;
    rc = 0;
out:
    free(lc);
    return rc;
}

int cn_config_parse_listener(const char *text, char *host, size_t host_len,
                             int *port, char *err, size_t err_len)
{
    char why[WHY_MAX];
    bool plain;
    const char *s = text, *e = text + strlen(text);
    while (s < e && isspace((unsigned char)*s))
        s++;
    while (e > s && isspace((unsigned char)e[-1]))
        e--;
    if (s == e) {
        cfg_seterr(err, err_len, "invalid listener \"%s\": empty", text);
        return CN_EINVAL;
    }
    if (parse_one_listener(s, (size_t)(e - s), host, host_len, port, &plain,
                           NULL, why, sizeof why)) {
        cfg_seterr(err, err_len, "invalid listener \"%s\": %s", text, why);
        return CN_EINVAL;
    }
    return 0;
}

int cn_config_parse_listeners(const char *text, char *host, size_t host_len,
                              int *port, char *err, size_t err_len)
{
    char why[WHY_MAX];
    if (cfg_parse_listener_list(text, false, host, host_len, port, why, sizeof why)) {
        cfg_seterr(err, err_len, "invalid listeners \"%s\": %s", text, why);
        return CN_EINVAL;
    }
    return 0;
}
