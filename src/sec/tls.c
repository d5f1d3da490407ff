/*
 * tls.c - the server TLS context and principal mapping; see tls.h.
 */
#include "tls.h"

#include <ctype.h>
#include <errno.h>
#include <regex.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/pkcs12.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "base/err.h"

static void seterr(char *err, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void seterr(char *err, size_t len, const char *fmt, ...)
{
    va_list ap;
    if (!err || !len)
        return;
    va_start(ap, fmt);
    vsnprintf(err, len, fmt, ap);
    va_end(ap);
}

/* OpenSSL's last reason, for the end of a message. */
static const char *ssl_reason(void)
{
    unsigned long e = ERR_peek_last_error();
    const char *r = e ? ERR_reason_error_string(e) : NULL;
    return r ? r : "unknown OpenSSL error";
}

/* ---- principal mapping ------------------------------------------------ */

struct rule {
    bool is_default;
    const char *pat, *repl; /* into the rules text, not terminated */
    size_t pat_len, repl_len;
    char the_case;          /* 'L', 'U' or 0 */
};

/* Reads up to an unescaped '/' (Kafka: (\\.|[^\\/])*); NULL if none. */
static const char *upto_slash(const char *p)
{
    while (*p && *p != '/') {
        if (*p == '\\' && p[1])
            p++;
        p++;
    }
    return *p == '/' ? p : NULL;
}

/* Parses the rule at *pp and moves past it and its comma; 1 when there
 * are no more rules, 0 for one rule, CN_EINVAL with a reason. */
static int next_rule(const char **pp, struct rule *r, char *err,
                     size_t err_len)
{
    const char *p = *pp;
    while (isspace((unsigned char)*p))
        p++;
    if (!*p)
        return 1;
    memset(r, 0, sizeof *r);
    if (!strncmp(p, "DEFAULT", 7)) {
        r->is_default = true;
        p += 7;
    } else if (!strncmp(p, "RULE:", 5)) {
        r->pat = p + 5;
        const char *e = upto_slash(r->pat);
        if (!e) {
            seterr(err, err_len, "\"%s\": missing '/' after the pattern", p);
            return CN_EINVAL;
        }
        r->pat_len = (size_t)(e - r->pat);
        r->repl = e + 1;
        e = upto_slash(r->repl);
        if (!e) {
            seterr(err, err_len,
                   "\"%s\": missing '/' after the replacement", p);
            return CN_EINVAL;
        }
        r->repl_len = (size_t)(e - r->repl);
        p = e + 1;
        if (*p == 'L' || *p == 'U')
            r->the_case = *p++;
    } else {
        seterr(err, err_len,
               "\"%s\": expected DEFAULT or RULE:pattern/replacement/[LU]",
               p);
        return CN_EINVAL;
    }
    while (isspace((unsigned char)*p))
        p++;
    if (*p == ',')
        p++;
    else if (*p) {
        seterr(err, err_len, "unexpected \"%s\" after a rule", p);
        return CN_EINVAL;
    }
    *pp = p;
    return 0;
}

static int rule_compile(const struct rule *r, regex_t *re, char *err,
                        size_t err_len)
{
    char *pat = strndup(r->pat, r->pat_len);
    if (!pat)
        return CN_ENOMEM;
    int rc = regcomp(re, pat, REG_EXTENDED);
    if (rc) {
        char why[128];
        regerror(rc, re, why, sizeof why);
        seterr(err, err_len, "pattern \"%s\": %s", pat, why);
        free(pat);
        return CN_EINVAL;
    }
    free(pat);
    return 0;
}

int cn_tls_rules_check(const char *rules, char *err, size_t err_len)
{
    const char *p = rules;
    struct rule r;
    int rc;
    while ((rc = next_rule(&p, &r, err, err_len)) == 0) {
        if (r.is_default)
            continue;
        regex_t re;
        if ((rc = rule_compile(&r, &re, err, err_len)))
            return rc;
        regfree(&re);
    }
    return rc == 1 ? 0 : rc;
}

/* Appends the replacement with its $n taken from m over s. */
static int expand(const struct rule *r, const char *s, const regmatch_t *m,
                  char *out, size_t out_len, size_t *at)
{
    size_t o = *at;
    for (size_t i = 0; i < r->repl_len; i++) {
        char c = r->repl[i];
        const char *add = &r->repl[i];
        size_t n = 1;
        if (c == '\\' && i + 1 < r->repl_len) {
            add = &r->repl[++i];
        } else if (c == '$' && i + 1 < r->repl_len &&
                   isdigit((unsigned char)r->repl[i + 1])) {
            int g = r->repl[++i] - '0';
            if (m[g].rm_so < 0) {
                n = 0;
            } else {
                add = s + m[g].rm_so;
                n = (size_t)(m[g].rm_eo - m[g].rm_so);
            }
        }
        if (o + n >= out_len)
            return CN_ETOOBIG;
        memcpy(out + o, add, n);
        o += n;
    }
    out[o] = '\0';
    *at = o;
    return 0;
}

/* 0 and out set when r applies to dn, 1 when it does not. */
static int rule_apply(const struct rule *r, const char *dn, char *out,
                      size_t out_len)
{
    size_t len = strlen(dn);
    if (r->is_default) {
        if (len >= out_len)
            return CN_ETOOBIG;
        memcpy(out, dn, len + 1);
        return 0;
    }
    regex_t re;
    int rc = rule_compile(r, &re, NULL, 0);
    if (rc)
        return rc;
    regmatch_t m[10];
    rc = 1;
    /* Java's matches(): the whole DN (POSIX takes the longest match from
     * the leftmost start, so a whole-DN match is found if there is one). */
    if (regexec(&re, dn, 10, m, 0) == 0 && m[0].rm_so == 0 &&
        (size_t)m[0].rm_eo == len) {
        size_t at = 0;
        out[0] = '\0';
        rc = expand(r, dn, m, out, out_len, &at);
        /* replaceAll then finds an empty match at the end, if the pattern
         * allows one, and appends the replacement again ("(.*)"). */
        if (rc == 0 && len > 0 &&
            regexec(&re, dn + len, 10, m, REG_NOTBOL) == 0 &&
            m[0].rm_so == 0 && m[0].rm_eo == 0)
            rc = expand(r, dn + len, m, out, out_len, &at);
        if (rc == 0 && r->the_case)
            for (char *q = out; *q; q++)
                *q = (char)(r->the_case == 'L' ? tolower((unsigned char)*q)
                                               : toupper((unsigned char)*q));
    }
    regfree(&re);
    return rc;
}

int cn_tls_map_principal(const char *rules, const char *dn, char *out,
                         size_t out_len)
{
    const char *p = rules;
    struct rule r;
    int rc;
    if (!out_len)
        return CN_ETOOBIG;
    while ((rc = next_rule(&p, &r, NULL, 0)) == 0) {
        rc = rule_apply(&r, dn, out, out_len);
        if (rc <= 0)
            return rc;
    }
    return rc == 1 ? CN_ENOTFOUND : rc;
}

/* ---- subject DN ------------------------------------------------------- */

/* Java's RFC 2253 keywords (AVAKeyword with rfc2253Compliant). */
static const char *dn_keyword(int nid)
{
    switch (nid) {
    case NID_commonName: return "CN";
    case NID_countryName: return "C";
    case NID_localityName: return "L";
    case NID_stateOrProvinceName: return "ST";
    case NID_organizationName: return "O";
    case NID_organizationalUnitName: return "OU";
    case NID_streetAddress: return "STREET";
    case NID_domainComponent: return "DC";
    case NID_userId: return "UID";
    default: return NULL;
    }
}

struct dn_out {
    char *p;
    size_t len, at;
    bool full;
};

static void dn_put(struct dn_out *o, const char *s, size_t n)
{
    if (o->full || o->at + n >= o->len) {
        o->full = true;
        return;
    }
    memcpy(o->p + o->at, s, n);
    o->at += n;
    o->p[o->at] = '\0';
}

static void dn_value(struct dn_out *o, const ASN1_STRING *v)
{
    unsigned char *u = NULL;
    int n = ASN1_STRING_to_UTF8(&u, v);
    if (n < 0) {
        o->full = true;
        return;
    }
    int lead = 0, trail = n - 1;
    while (lead < n && (u[lead] == ' ' || u[lead] == '\r'))
        lead++;
    while (trail >= 0 && (u[trail] == ' ' || u[trail] == '\r'))
        trail--;
    for (int i = 0; i < n; i++) {
        char c = (char)u[i];
        if (c == '\0') {
            dn_put(o, "\\00", 3);
            continue;
        }
        if (strchr(",=+<>#;\"\\", c) || i < lead || i > trail)
            dn_put(o, "\\", 1);
        dn_put(o, &c, 1);
    }
    OPENSSL_free(u);
}

/* "#" and the DER of the value in hex, as Java writes an attribute it has
 * no RFC 2253 keyword for. */
static void dn_hex(struct dn_out *o, const ASN1_STRING *v)
{
    static const char hex[] = "0123456789abcdef";
    int n = ASN1_STRING_length(v);
    const unsigned char *d = ASN1_STRING_get0_data(v);
    unsigned char head[6];
    size_t h = 0;
    head[h++] = (unsigned char)ASN1_STRING_type(v);
    if (n < 0x80) {
        head[h++] = (unsigned char)n;
    } else {
        int bytes = n > 0xffffff ? 4 : n > 0xffff ? 3 : n > 0xff ? 2 : 1;
        head[h++] = (unsigned char)(0x80 | bytes);
        for (int i = bytes - 1; i >= 0; i--)
            head[h++] = (unsigned char)(n >> (8 * i));
    }
    dn_put(o, "#", 1);
    for (size_t i = 0; i < h + (size_t)n; i++) {
        unsigned char b = i < h ? head[i] : d[i - h];
        char two[2] = {hex[b >> 4], hex[b & 15]};
        dn_put(o, two, 2);
    }
}

int cn_tls_dn_rfc2253(const struct X509_name_st *name, char *out,
                      size_t out_len)
{
    struct dn_out o = {out, out_len, 0, out_len == 0};
    if (out_len)
        out[0] = '\0';
    int n = X509_NAME_entry_count(name);
    /* Last RDN first; one RDN is the run of entries sharing a set. */
    for (int end = n; end > 0;) {
        int set = X509_NAME_ENTRY_set(X509_NAME_get_entry(name, end - 1));
        int start = end - 1;
        while (start > 0 &&
               X509_NAME_ENTRY_set(X509_NAME_get_entry(name, start - 1)) ==
                   set)
            start--;
        if (end != n)
            dn_put(&o, ",", 1);
        for (int i = start; i < end; i++) {
            const X509_NAME_ENTRY *e = X509_NAME_get_entry(name, i);
            const ASN1_OBJECT *obj = X509_NAME_ENTRY_get_object(e);
            const ASN1_STRING *v = X509_NAME_ENTRY_get_data(e);
            const char *kw = dn_keyword(OBJ_obj2nid(obj));
            if (i > start)
                dn_put(&o, "+", 1);
            if (kw) {
                dn_put(&o, kw, strlen(kw));
                dn_put(&o, "=", 1);
                dn_value(&o, v);
            } else {
                char oid[128];
                OBJ_obj2txt(oid, sizeof oid, obj, 1);
                dn_put(&o, oid, strlen(oid));
                dn_put(&o, "=", 1);
                dn_hex(&o, v);
            }
        }
        end = start;
    }
    return o.full ? CN_ETOOBIG : 0;
}

int cn_tls_cert_principal(const struct x509_st *cert, const char *rules,
                          char *dn, size_t dn_len, char *out,
                          size_t out_len)
{
    int rc = cn_tls_dn_rfc2253(X509_get_subject_name(cert), dn, dn_len);
    if (rc)
        return rc;
    return cn_tls_map_principal(rules, dn, out, out_len);
}

/* ---- the context ------------------------------------------------------ */

static int pem_password(char *buf, int size, int rwflag, void *u)
{
    (void)rwflag;
    const char *pw = u;
    if (!pw)
        return 0;
    int n = (int)strlen(pw);
    if (n > size)
        n = size;
    memcpy(buf, pw, (size_t)n);
    return n;
}

/* Reads a whole file; NULL and errno set on failure. */
static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = NULL;
    size_t cap = 0, n = 0;
    for (;;) {
        if (n == cap) {
            char *nb = realloc(buf, cap = cap ? cap * 2 : 8192);
            if (!nb) {
                free(buf);
                fclose(f);
                errno = ENOMEM;
                return NULL;
            }
            buf = nb;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0)
            break;
    }
    bool bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        errno = EIO;
        return NULL;
    }
    *len = n;
    return buf;
}

static int load_pem_keystore(SSL_CTX *ctx, const struct cn_tls_opts *o,
                             char *err, size_t err_len)
{
    const char *path = o->keystore_location;
    size_t len;
    char *text = slurp(path, &len);
    if (!text) {
        seterr(err, err_len, "ssl.keystore.location: cannot read %s: %s",
               path, strerror(errno));
        return CN_EINVAL;
    }
    bool encrypted = memmem(text, len, "ENCRYPTED", 9) != NULL;
    int rc = CN_EINVAL;
    BIO *bio = BIO_new_mem_buf(text, (int)len);
    EVP_PKEY *key = NULL;
    if (!bio) {
        rc = CN_ENOMEM;
        goto out;
    }
    if (encrypted && !o->key_password) {
        seterr(err, err_len,
               "ssl.key.password: the private key in %s is encrypted and "
               "ssl.key.password is not set",
               path);
        goto out;
    }
    key = PEM_read_bio_PrivateKey(bio, NULL, pem_password,
                                  (void *)o->key_password);
    if (!key) {
        if (encrypted)
            seterr(err, err_len,
                   "ssl.key.password: cannot decrypt the private key in %s "
                   "(wrong password?): %s",
                   path, ssl_reason());
        else
            seterr(err, err_len,
                   "ssl.keystore.location: no private key in %s (it must "
                   "hold the private key and the certificate chain, PEM)",
                   path);
        goto out;
    }
    ERR_clear_error();
    if (SSL_CTX_use_certificate_chain_file(ctx, path) != 1) {
        seterr(err, err_len,
               "ssl.keystore.location: no certificate in %s: %s", path,
               ssl_reason());
        goto out;
    }
    if (SSL_CTX_use_PrivateKey(ctx, key) != 1 ||
        SSL_CTX_check_private_key(ctx) != 1) {
        seterr(err, err_len,
               "ssl.keystore.location: the private key in %s does not "
               "match its certificate",
               path);
        goto out;
    }
    rc = 0;
out:
    EVP_PKEY_free(key);
    BIO_free(bio);
    OPENSSL_cleanse(text, len);
    free(text);
    return rc;
}

static int load_p12_keystore(SSL_CTX *ctx, const struct cn_tls_opts *o,
                             char *err, size_t err_len)
{
    const char *path = o->keystore_location;
    FILE *f = fopen(path, "rb");
    if (!f) {
        seterr(err, err_len, "ssl.keystore.location: cannot read %s: %s",
               path, strerror(errno));
        return CN_EINVAL;
    }
    PKCS12 *p12 = d2i_PKCS12_fp(f, NULL);
    fclose(f);
    if (!p12) {
        seterr(err, err_len,
               "ssl.keystore.location: %s is not a PKCS12 file", path);
        return CN_EINVAL;
    }
    EVP_PKEY *key = NULL;
    X509 *cert = NULL;
    STACK_OF(X509) *ca = NULL;
    int rc = CN_EINVAL;
    if (!PKCS12_parse(p12, o->keystore_password ? o->keystore_password : "",
                      &key, &cert, &ca)) {
        seterr(err, err_len,
               "ssl.keystore.password: cannot open %s (wrong password?): %s",
               path, ssl_reason());
        goto out;
    }
    if (!key || !cert) {
        seterr(err, err_len,
               "ssl.keystore.location: %s lacks a private key or its "
               "certificate",
               path);
        goto out;
    }
    if (SSL_CTX_use_certificate(ctx, cert) != 1 ||
        SSL_CTX_use_PrivateKey(ctx, key) != 1 ||
        SSL_CTX_check_private_key(ctx) != 1) {
        seterr(err, err_len,
               "ssl.keystore.location: the private key in %s does not "
               "match its certificate",
               path);
        goto out;
    }
    for (int i = 0; ca && i < sk_X509_num(ca); i++) {
        X509 *c = sk_X509_value(ca, i);
        if (SSL_CTX_add1_chain_cert(ctx, c) != 1) {
            seterr(err, err_len, "ssl.keystore.location: %s: %s", path,
                   ssl_reason());
            goto out;
        }
    }
    rc = 0;
out:
    EVP_PKEY_free(key);
    X509_free(cert);
    sk_X509_pop_free(ca, X509_free);
    PKCS12_free(p12);
    return rc;
}

/* The next item of a comma list at *p: false at the end; else *n is the
 * bytes up to the next comma (where the caller moves *p) and *t the
 * item's length without trailing blanks (leading ones are skipped). */
static bool next_item(const char **p, size_t *n, size_t *t)
{
    while (isspace((unsigned char)**p) || **p == ',')
        (*p)++;
    *n = strcspn(*p, ",");
    *t = *n;
    while (*t && isspace((unsigned char)(*p)[*t - 1]))
        (*t)--;
    return *t > 0;
}

/* ssl.enabled.protocols to a version range. */
static int set_protocols(SSL_CTX *ctx, const char *list, char *err,
                         size_t err_len)
{
    int lo = 0, hi = 0;
    const char *p = list && *list ? list : "TLSv1.2,TLSv1.3";
    size_t n, t;
    while (next_item(&p, &n, &t)) {
        int v;
        if (t == 7 && !strncmp(p, "TLSv1.2", 7))
            v = TLS1_2_VERSION;
        else if (t == 7 && !strncmp(p, "TLSv1.3", 7))
            v = TLS1_3_VERSION;
        else {
            seterr(err, err_len,
                   "ssl.enabled.protocols: \"%.*s\" is not served (Cairn "
                   "serves TLSv1.2 and TLSv1.3)",
                   (int)t, p);
            return CN_EINVAL;
        }
        if (!lo || v < lo)
            lo = v;
        if (v > hi)
            hi = v;
        p += n;
    }
    if (!lo) {
        seterr(err, err_len, "ssl.enabled.protocols: empty");
        return CN_EINVAL;
    }
    SSL_CTX_set_min_proto_version(ctx, lo);
    SSL_CTX_set_max_proto_version(ctx, hi);
    return 0;
}

/* ssl.cipher.suites, IANA names as Java takes them: TLS 1.3 suites go to
 * the ciphersuites list, the rest are translated to OpenSSL's names. */
static int set_ciphers(SSL_CTX *ctx, const char *list, char *err,
                       size_t err_len)
{
    if (!list || !*list)
        return 0;
    size_t cap = strlen(list) * 2 + 64;
    char *v12 = calloc(1, cap), *v13 = calloc(1, cap);
    int rc = CN_EINVAL;
    if (!v12 || !v13) {
        rc = CN_ENOMEM;
        goto out;
    }
    const char *p = list;
    size_t n, t;
    while (next_item(&p, &n, &t)) {
        char name[128];
        if (t >= sizeof name) {
            seterr(err, err_len, "ssl.cipher.suites: name too long");
            goto out;
        }
        memcpy(name, p, t);
        name[t] = '\0';
        p += n;
        if (!strncmp(name, "TLS_AES_", 8) ||
            !strncmp(name, "TLS_CHACHA20_", 13)) {
            if (*v13)
                strcat(v13, ":");
            strcat(v13, name);
            continue;
        }
        const char *os = OPENSSL_cipher_name(name);
        if (!os || !strcmp(os, "(NONE)")) {
            seterr(err, err_len,
                   "ssl.cipher.suites: unknown cipher suite %s", name);
            goto out;
        }
        if (*v12)
            strcat(v12, ":");
        strncat(v12, os, cap - strlen(v12) - 1);
    }
    if (*v13 && SSL_CTX_set_ciphersuites(ctx, v13) != 1) {
        seterr(err, err_len, "ssl.cipher.suites: %s: %s", v13, ssl_reason());
        goto out;
    }
    if (*v12 && SSL_CTX_set_cipher_list(ctx, v12) != 1) {
        seterr(err, err_len, "ssl.cipher.suites: %s: %s", v12, ssl_reason());
        goto out;
    }
    rc = 0;
out:
    free(v12);
    free(v13);
    return rc;
}

int cn_tls_ctx_new(const struct cn_tls_opts *o, struct ssl_ctx_st **out,
                   char *err, size_t err_len)
{
    const char *ca = o->client_auth ? o->client_auth : "none";
    int verify;
    if (!strcasecmp(ca, "none"))
        verify = SSL_VERIFY_NONE;
    else if (!strcasecmp(ca, "requested"))
        verify = SSL_VERIFY_PEER;
    else if (!strcasecmp(ca, "required"))
        verify = SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
    else {
        seterr(err, err_len,
               "ssl.client.auth: \"%s\" is not none, requested or required",
               ca);
        return CN_EINVAL;
    }
    if (o->protocol && strcmp(o->protocol, "TLS") &&
        strcmp(o->protocol, "TLSv1.2") && strcmp(o->protocol, "TLSv1.3")) {
        seterr(err, err_len,
               "ssl.protocol: \"%s\" is not TLS, TLSv1.2 or TLSv1.3",
               o->protocol);
        return CN_EINVAL;
    }
    if (!o->keystore_location || !*o->keystore_location) {
        seterr(err, err_len,
               "ssl.keystore.location: not set; an SSL listener needs the "
               "server's private key and certificate");
        return CN_EINVAL;
    }
    bool p12 = o->keystore_type && !strcasecmp(o->keystore_type, "PKCS12");
    if (o->keystore_type && !p12 && strcasecmp(o->keystore_type, "PEM")) {
        seterr(err, err_len, "ssl.keystore.type: \"%s\" is not PEM or PKCS12",
               o->keystore_type);
        return CN_EINVAL;
    }
    if (o->truststore_type && strcasecmp(o->truststore_type, "PEM")) {
        seterr(err, err_len,
               "ssl.truststore.type: \"%s\" is not PEM (Cairn reads PEM "
               "truststores only)",
               o->truststore_type);
        return CN_EINVAL;
    }
    ERR_clear_error();
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx) {
        seterr(err, err_len, "TLS: %s", ssl_reason());
        return CN_ENOMEM;
    }
    int rc = set_protocols(ctx, o->enabled_protocols, err, err_len);
    if (!rc)
        rc = set_ciphers(ctx, o->cipher_suites, err, err_len);
    if (!rc)
        rc = p12 ? load_p12_keystore(ctx, o, err, err_len)
                 : load_pem_keystore(ctx, o, err, err_len);
    if (rc)
        goto fail;
    const char *ts = o->truststore_location;
    if (ts && *ts) {
        FILE *f = fopen(ts, "r");
        if (!f) {
            seterr(err, err_len,
                   "ssl.truststore.location: cannot read %s: %s", ts,
                   strerror(errno));
            rc = CN_EINVAL;
            goto fail;
        }
        fclose(f);
        ERR_clear_error();
        if (SSL_CTX_load_verify_locations(ctx, ts, NULL) != 1) {
            seterr(err, err_len,
                   "ssl.truststore.location: no CA certificate in %s: %s",
                   ts, ssl_reason());
            rc = CN_EINVAL;
            goto fail;
        }
        /* Tells clients which CAs their certificate may come from. */
        STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(ts);
        if (names)
            SSL_CTX_set_client_CA_list(ctx, names);
    } else if (verify != SSL_VERIFY_NONE) {
        seterr(err, err_len,
               "ssl.truststore.location: not set; ssl.client.auth=%s needs "
               "the CA certificates client certificates are checked against",
               ca);
        rc = CN_EINVAL;
        goto fail;
    }
    SSL_CTX_set_verify(ctx, verify, NULL);
    /* Client-initiated renegotiation costs the server a handshake per
     * request; Kafka's JSSE refuses it too. */
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION |
                                 SSL_OP_CIPHER_SERVER_PREFERENCE);
    /* Idle connections give their buffers back. */
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
    static const unsigned char sid[] = "cairn";
    SSL_CTX_set_session_id_context(ctx, sid, sizeof sid - 1);
    *out = ctx;
    return 0;
fail:
    SSL_CTX_free(ctx);
    return rc;
}

void cn_tls_ctx_free(struct ssl_ctx_st *ctx)
{
    SSL_CTX_free(ctx);
}
