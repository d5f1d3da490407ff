/*
 * client_props.c - --command-config parsing; see client_props.h.
 */
#include "cli/client_props.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/config.h"
#include "base/err.h"

#define JAAS_SCRAM "org.apache.kafka.common.security.scram.ScramLoginModule"
#define JAAS_PLAIN "org.apache.kafka.common.security.plain.PlainLoginModule"

/* Known Kafka / librdkafka client keys that do not change how cairnctl
 * connects or authenticates. */
static const char *const ignored_keys[] = {
    "client.id",
    "client.dns.lookup",
    "request.timeout.ms",
    "default.api.timeout.ms",
    "retries",
    "retry.backoff.ms",
    "retry.backoff.max.ms",
    "reconnect.backoff.ms",
    "reconnect.backoff.max.ms",
    "socket.connection.setup.timeout.ms",
    "socket.connection.setup.timeout.max.ms",
    "connections.max.idle.ms",
    "metadata.max.age.ms",
    "receive.buffer.bytes",
    "send.buffer.bytes",
    "bootstrap.servers",
    "ssl.protocol",
    "ssl.enabled.protocols",
    "ssl.cipher.suites",
    "ssl.truststore.password",
    "ssl.keystore.password",
    "ssl.keymanager.algorithm",
    "ssl.trustmanager.algorithm",
    "ssl.secure.random.implementation",
    "ssl.engine.factory.class",
    "sasl.login.refresh.window.factor",
    "sasl.login.refresh.window.jitter",
    "sasl.login.refresh.min.period.seconds",
    "sasl.login.refresh.buffer.seconds",
    "sasl.kerberos.service.name",
    "enable.ssl.certificate.verification",
};

static int seterr(char *err, size_t err_len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int seterr(char *err, size_t err_len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, err_len, fmt, ap);
    va_end(ap);
    return CN_EINVAL;
}

static int copy(char *dst, const char *key, const char *val, char *err,
                size_t err_len)
{
    if (!*val)
        return seterr(err, err_len, "%s: empty value", key);
    if (strlen(val) >= CLI_PROPS_VAL_MAX)
        return seterr(err, err_len, "%s: value too long", key);
    strcpy(dst, val);
    return 0;
}

/* Only PEM files: JKS and PKCS12 would need Java's key store formats. */
static int pem_only(const char *key, const char *val, char *err,
                    size_t err_len)
{
    if (strcasecmp(val, "PEM") == 0)
        return 0;
    return seterr(err, err_len,
                  "%s: '%s' is not supported, only PEM (convert with "
                  "openssl, or keytool -importkeystore to PKCS12 then "
                  "openssl pkcs12)",
                  key, val);
}

/* One JAAS option value at *s: "quoted" (backslash escapes as Java's
 * StreamTokenizer reads them) or a bare word. */
static bool jaas_value(const char **s, char *out, size_t cap)
{
    const char *p = *s;
    size_t o = 0;
    if (*p == '"') {
        for (p++; *p && *p != '"'; p++) {
            char ch = *p;
            if (ch == '\\' && p[1]) {
                ch = *++p;
                ch = ch == 'n' ? '\n' : ch == 't' ? '\t' : ch;
            }
            if (o + 1 >= cap)
                return false;
            out[o++] = ch;
        }
        if (*p != '"')
            return false;
        p++;
    } else {
        while (*p && !isspace((unsigned char)*p) && *p != ';') {
            if (o + 1 >= cap)
                return false;
            out[o++] = *p++;
        }
        if (o == 0)
            return false;
    }
    out[o] = '\0';
    *s = p;
    return true;
}

static const char *skip_ws(const char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    return s;
}

/* "<LoginModule class> <flag> name=value ... ;" as Kafka's JaasConfig
 * reads one login context entry. */
static int parse_jaas(struct cli_props *p, const char *key, const char *val,
                      char *err, size_t err_len)
{
    const char *s = skip_ws(val), *e;
    char cls[256], flag[32];
    size_t n;

    e = s;
    while (*e && !isspace((unsigned char)*e))
        e++;
    n = (size_t)(e - s);
    if (n == 0 || n >= sizeof cls)
        return seterr(err, err_len, "%s: no login module class", key);
    memcpy(cls, s, n);
    cls[n] = '\0';
    if (strcmp(cls, JAAS_SCRAM) && strcmp(cls, JAAS_PLAIN))
        return seterr(err, err_len,
                      "%s: login module %s is not supported (want "
                      "%s or %s)",
                      key, cls, JAAS_PLAIN, JAAS_SCRAM);
    s = skip_ws(e);
    e = s;
    while (*e && !isspace((unsigned char)*e) && *e != ';')
        e++;
    n = (size_t)(e - s);
    if (n == 0 || n >= sizeof flag)
        return seterr(err, err_len, "%s: no control flag after %s", key,
                      cls);
    memcpy(flag, s, n);
    flag[n] = '\0';
    if (strcasecmp(flag, "required") && strcasecmp(flag, "requisite") &&
        strcasecmp(flag, "sufficient") && strcasecmp(flag, "optional"))
        return seterr(err, err_len,
                      "%s: bad control flag '%s' (want required)", key, flag);
    s = skip_ws(e);
    bool have_user = false, have_pw = false;
    while (*s && *s != ';') {
        char name[64], v[CLI_PROPS_VAL_MAX];
        e = s;
        while (*e && *e != '=' && !isspace((unsigned char)*e) && *e != ';')
            e++;
        n = (size_t)(e - s);
        if (n == 0 || n >= sizeof name || *e != '=')
            return seterr(err, err_len,
                          "%s: expected name=\"value\" at '%.20s'", key, s);
        memcpy(name, s, n);
        name[n] = '\0';
        s = e + 1;
        if (!jaas_value(&s, v, sizeof v))
            return seterr(err, err_len, "%s: bad value for %s", key, name);
        if (!strcmp(name, "username")) {
            strcpy(p->user, v);
            have_user = true;
        } else if (!strcmp(name, "password")) {
            strcpy(p->password, v);
            have_pw = true;
        }
        /* Other options (e.g. tokenauth) a login module may take: Kafka
         * passes them on; none changes PLAIN or SCRAM here. */
        s = skip_ws(s);
    }
    if (*s != ';')
        return seterr(err, err_len, "%s: missing ';' at the end", key);
    if (*skip_ws(s + 1))
        return seterr(err, err_len,
                      "%s: more than one login module is not supported", key);
    if (!have_user || !have_pw)
        return seterr(err, err_len, "%s: needs username=\"...\" and "
                                    "password=\"...\"",
                      key);
    return 0;
}

static int props_kv(void *ctx, const char *key, const char *val, char *err,
                    size_t err_len)
{
    struct cli_props *p = ctx;
    struct cn_kclient_sec *sec = &p->sec;

    if (!strcmp(key, "security.protocol")) {
        if (!strcasecmp(val, "PLAINTEXT")) {
            sec->tls = false;
            sec->sasl = CN_KCLIENT_SASL_NONE;
        } else if (!strcasecmp(val, "SSL")) {
            sec->tls = true;
            sec->sasl = CN_KCLIENT_SASL_NONE;
        } else if (!strcasecmp(val, "SASL_PLAINTEXT")) {
            sec->tls = false;
            sec->sasl = -1; /* mechanism comes later */
        } else if (!strcasecmp(val, "SASL_SSL")) {
            sec->tls = true;
            sec->sasl = -1;
        } else {
            return seterr(err, err_len,
                          "%s: '%s' is not one of PLAINTEXT, SSL, "
                          "SASL_PLAINTEXT, SASL_SSL",
                          key, val);
        }
        return 0;
    }
    if (!strcmp(key, "ssl.truststore.location") ||
        !strcmp(key, "ssl.ca.location"))
        return copy(p->ca_file, key, val, err, err_len);
    if (!strcmp(key, "ssl.truststore.type") ||
        !strcmp(key, "ssl.keystore.type"))
        return pem_only(key, val, err, err_len);
    if (!strcmp(key, "ssl.keystore.location") ||
        !strcmp(key, "ssl.certificate.location"))
        return copy(p->cert_file, key, val, err, err_len);
    if (!strcmp(key, "ssl.key.location"))
        return copy(p->key_file, key, val, err, err_len);
    if (!strcmp(key, "ssl.key.password"))
        return copy(p->key_password, key, val, err, err_len);
    if (!strcmp(key, "ssl.endpoint.identification.algorithm")) {
        if (!*val || !strcasecmp(val, "none"))
            sec->no_verify_host = true;
        else if (!strcasecmp(val, "https"))
            sec->no_verify_host = false;
        else
            return seterr(err, err_len,
                          "%s: '%s' is not https or empty (no host name "
                          "check)",
                          key, val);
        return 0;
    }
    if (!strcmp(key, "ssl.truststore.certificates") ||
        !strcmp(key, "ssl.keystore.certificate.chain") ||
        !strcmp(key, "ssl.keystore.key"))
        return seterr(err, err_len,
                      "%s: PEM in the properties file is not supported; put "
                      "it in a file and use ssl.truststore.location / "
                      "ssl.keystore.location",
                      key);
    if (!strcmp(key, "sasl.mechanism") || !strcmp(key, "sasl.mechanisms")) {
        if (!strcmp(val, "PLAIN"))
            p->mech_set = CN_KCLIENT_SASL_PLAIN;
        else if (!strcmp(val, "SCRAM-SHA-256"))
            p->mech_set = CN_KCLIENT_SASL_SCRAM_SHA256;
        else if (!strcmp(val, "SCRAM-SHA-512"))
            p->mech_set = CN_KCLIENT_SASL_SCRAM_SHA512;
        else
            return seterr(err, err_len,
                          "%s: '%s' is not supported (PLAIN, SCRAM-SHA-256, "
                          "SCRAM-SHA-512)",
                          key, val);
        return 0;
    }
    if (!strcmp(key, "sasl.jaas.config"))
        return parse_jaas(p, key, val, err, err_len);
    if (!strcmp(key, "sasl.username"))
        return copy(p->user, key, val, err, err_len);
    if (!strcmp(key, "sasl.password"))
        return copy(p->password, key, val, err, err_len);
    for (size_t i = 0; i < sizeof ignored_keys / sizeof *ignored_keys; i++)
        if (!strcmp(key, ignored_keys[i])) {
            if (p->warn)
                fprintf(p->warn,
                        "cairnctl: warning: command config '%s' is not used "
                        "by cairnctl; ignored\n",
                        key);
            return 0;
        }
    return seterr(err, err_len, "%s: unknown client property", key);
}

int cli_props_parse(struct cli_props *p, const char *text,
                    const char *origin, FILE *warn, char *err,
                    size_t err_len)
{
    struct cn_kclient_sec *sec = &p->sec;
    int rc;

    memset(p, 0, sizeof *p);
    p->warn = warn;
    rc = cn_props_parse(text, origin, props_kv, p, err, err_len);
    if (rc)
        return rc;
    if (sec->sasl) {
        if (!p->mech_set)
            return seterr(err, err_len,
                          "%s: security.protocol is SASL but sasl.mechanism "
                          "is not set (Kafka's default, GSSAPI, is not "
                          "supported; use PLAIN, SCRAM-SHA-256 or "
                          "SCRAM-SHA-512)",
                          origin);
        sec->sasl = p->mech_set;
        if (!p->user[0] || !p->password[0])
            return seterr(err, err_len,
                          "%s: sasl.mechanism %s needs sasl.jaas.config "
                          "(username=\"...\" password=\"...\") or "
                          "sasl.username and sasl.password",
                          origin,
                          p->mech_set == CN_KCLIENT_SASL_PLAIN ? "PLAIN"
                                                               : "SCRAM");
        sec->user = p->user;
        sec->password = p->password;
    }
    if (p->key_file[0] && !p->cert_file[0])
        return seterr(err, err_len,
                      "%s: ssl.key.location needs ssl.certificate.location",
                      origin);
    sec->ca_file = p->ca_file[0] ? p->ca_file : NULL;
    sec->cert_file = p->cert_file[0] ? p->cert_file : NULL;
    sec->key_file = p->key_file[0] ? p->key_file : NULL;
    sec->key_password = p->key_password[0] ? p->key_password : NULL;
    return 0;
}

int cli_props_load(struct cli_props *p, const char *path, FILE *warn,
                   char *err, size_t err_len)
{
    FILE *f = fopen(path, "rb");
    char *buf;
    size_t len = 0, cap = 8192;
    int rc;

    /* Defined even when the file cannot be read: the caller finis it. */
    memset(p, 0, sizeof *p);
    if (!f)
        return seterr(err, err_len, "cannot read %s: %s", path,
                      strerror(errno));
    buf = malloc(cap);
    while (buf) {
        len += fread(buf + len, 1, cap - len - 1, f);
        if (len < cap - 1)
            break;
        cap *= 2;
        char *nb = realloc(buf, cap);
        if (!nb)
            free(buf);
        buf = nb;
    }
    if (!buf || ferror(f)) {
        rc = seterr(err, err_len, "cannot read %s: %s", path,
                    buf ? strerror(errno) : "out of memory");
        free(buf);
        fclose(f);
        return rc;
    }
    fclose(f);
    buf[len] = '\0';
    if (memchr(buf, '\0', len)) {
        free(buf);
        return seterr(err, err_len, "%s: not a text file", path);
    }
    rc = cli_props_parse(p, buf, path, warn, err, err_len);
    free(buf);
    return rc;
}

int cli_props_each_rdkafka(const struct cli_props *p,
                           int (*set)(void *ctx, const char *key,
                                      const char *value),
                           void *ctx)
{
    const struct cn_kclient_sec *sec = &p->sec;
    static const char *const mech[] = {NULL, "PLAIN", "SCRAM-SHA-256",
                                       "SCRAM-SHA-512"};
    int rc = set(ctx, "security.protocol", cn_kclient_sec_protocol(sec));

    if (!rc && sec->tls) {
        if (sec->ca_file)
            rc = set(ctx, "ssl.ca.location", sec->ca_file);
        if (!rc && sec->cert_file)
            rc = set(ctx, "ssl.certificate.location", sec->cert_file);
        if (!rc && sec->cert_file)
            rc = set(ctx, "ssl.key.location",
                     sec->key_file ? sec->key_file : sec->cert_file);
        if (!rc && sec->key_password)
            rc = set(ctx, "ssl.key.password", sec->key_password);
        if (!rc)
            rc = set(ctx, "ssl.endpoint.identification.algorithm",
                     sec->no_verify_host ? "none" : "https");
    }
    if (!rc && sec->sasl > 0 && sec->sasl <= CN_KCLIENT_SASL_SCRAM_SHA512) {
        rc = set(ctx, "sasl.mechanisms", mech[sec->sasl]);
        if (!rc)
            rc = set(ctx, "sasl.username", sec->user);
        if (!rc)
            rc = set(ctx, "sasl.password", sec->password);
    }
    return rc;
}
