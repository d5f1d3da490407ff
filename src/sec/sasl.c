/*
 * sasl.c - PLAIN and SCRAM server mechanisms, credential store codec; see
 * sasl.h.  Hashes, HMAC, PBKDF2 and randomness come from OpenSSL's
 * libcrypto.
 *
 * SCRAM messages (RFC 5802 §7), as Kafka's ScramMessages reads them:
 *   client-first  gs2-header client-first-bare
 *                 gs2-header = "n,," | "y,," | "n,a=<authzid>," (no "p=")
 *                 client-first-bare = "n=<saslname>,r=<nonce>"
 *   server-first  "r=<cnonce+snonce>,s=<base64 salt>,i=<iterations>"
 *   client-final  "c=<base64 gs2-header>,r=<nonce>,p=<base64 proof>"
 *   server-final  "v=<base64 ServerSignature>"
 * Extensions are refused: the only one Kafka takes (tokenauth) needs
 * delegation tokens, which Cairn does not have.
 */
#include "sasl.h"
#include "scram_prim.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include "base/crc32c.h"
#include "base/err.h"
#include "base/rd.h"
#include "base/wr.h"

static void seterr(char *why, size_t why_len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void seterr(char *why, size_t why_len, const char *fmt, ...)
{
    if (!why || !why_len)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, why_len, fmt, ap);
    va_end(ap);
}

static const EVP_MD *mech_md(int mech)
{
    switch (mech) {
    case CN_SCRAM_SHA256: return EVP_sha256();
    case CN_SCRAM_SHA512: return EVP_sha512();
    default: return NULL;
    }
}

size_t cn_scram_key_len(int mech)
{
    return mech == CN_SCRAM_SHA256 ? 32 : mech == CN_SCRAM_SHA512 ? 64 : 0;
}

const char *cn_scram_mech_name(int mech)
{
    return mech == CN_SCRAM_SHA256   ? "SCRAM-SHA-256"
           : mech == CN_SCRAM_SHA512 ? "SCRAM-SHA-512"
                                     : NULL;
}

int cn_scram_mech_parse(const char *s, size_t n)
{
    for (int m = CN_SCRAM_SHA256; m <= CN_SCRAM_SHA512; m++) {
        const char *name = cn_scram_mech_name(m);
        if (strlen(name) == n && !memcmp(s, name, n))
            return m;
    }
    return 0;
}

static int hmac(int mech, const uint8_t *key, size_t key_len,
                const void *msg, size_t len, uint8_t *out)
{
    unsigned int n = 0;
    if (!HMAC(mech_md(mech), key, (int)key_len, msg, len, out, &n))
        return CN_ENOMEM;
    return 0;
}

static int digest(int mech, const uint8_t *p, size_t len, uint8_t *out)
{
    unsigned int n = 0;
    if (!EVP_Digest(p, len, out, &n, mech_md(mech), NULL))
        return CN_ENOMEM;
    return 0;
}

int cn_scram_cred_from_salted(int mech, const uint8_t *salted,
                              size_t salted_len, const uint8_t *salt,
                              size_t salt_len, int32_t iterations,
                              struct cn_scram_cred *out)
{
    size_t k = cn_scram_key_len(mech);
    if (!k || salted_len != k || salt_len == 0 ||
        salt_len > CN_SCRAM_SALT_MAX || iterations < CN_SCRAM_ITER_MIN ||
        iterations > CN_SCRAM_ITER_MAX)
        return CN_EINVAL;
    struct cn_scram_cred c;
    memset(&c, 0, sizeof c);
    c.mech = mech;
    memcpy(c.salt, salt, salt_len);
    c.salt_len = salt_len;
    c.iterations = iterations;
    uint8_t client_key[CN_SCRAM_KEY_MAX];
    if (hmac(mech, salted, k, "Client Key", 10, client_key) ||
        digest(mech, client_key, k, c.stored_key) ||
        hmac(mech, salted, k, "Server Key", 10, c.server_key))
        return CN_ENOMEM;
    OPENSSL_cleanse(client_key, sizeof client_key);
    *out = c;
    return 0;
}

static int salted_password(int mech, const char *pw, size_t pw_len,
                           const uint8_t *salt, size_t salt_len, int32_t iter,
                           uint8_t *out)
{
    if (!PKCS5_PBKDF2_HMAC(pw, (int)pw_len, salt, (int)salt_len, iter,
                           mech_md(mech), (int)cn_scram_key_len(mech), out))
        return CN_ENOMEM;
    return 0;
}

int cn_scram_cred_from_password(int mech, const char *pw, size_t pw_len,
                                const uint8_t *salt, size_t salt_len,
                                int32_t iterations, struct cn_scram_cred *out)
{
    uint8_t rnd[CN_SCRAM_SALT_DEFAULT], sp[CN_SCRAM_KEY_MAX];
    if (!cn_scram_key_len(mech) || iterations < CN_SCRAM_ITER_MIN ||
        iterations > CN_SCRAM_ITER_MAX || pw_len > INT32_MAX)
        return CN_EINVAL;
    if (!salt) {
        if (RAND_bytes(rnd, sizeof rnd) != 1)
            return CN_ENOMEM;
        salt = rnd;
        salt_len = sizeof rnd;
    }
    if (salt_len == 0 || salt_len > CN_SCRAM_SALT_MAX)
        return CN_EINVAL;
    int rc = salted_password(mech, pw, pw_len, salt, salt_len, iterations, sp);
    if (rc == 0)
        rc = cn_scram_cred_from_salted(mech, sp, cn_scram_key_len(mech), salt,
                                       salt_len, iterations, out);
    OPENSSL_cleanse(sp, sizeof sp);
    return rc;
}

bool cn_scram_cred_check(const struct cn_scram_cred *cred, const char *pw,
                         size_t pw_len)
{
    struct cn_scram_cred c;
    if (cn_scram_cred_from_password(cred->mech, pw, pw_len, cred->salt,
                                    cred->salt_len, cred->iterations, &c))
        return false;
    size_t k = cn_scram_key_len(cred->mech);
    return CRYPTO_memcmp(c.stored_key, cred->stored_key, k) == 0 &&
           CRYPTO_memcmp(c.server_key, cred->server_key, k) == 0;
}

/* ---- PLAIN ------------------------------------------------------------ */

int cn_sasl_plain_parse(const uint8_t *msg, size_t len, char *user,
                        size_t user_cap, char *pw, size_t pw_cap, char *why,
                        size_t why_len)
{
    const uint8_t *f[3];
    size_t flen[3];
    size_t nf = 0, start = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i < len && msg[i] != 0)
            continue;
        if (nf == 3) {
            seterr(why, why_len, "Invalid SASL/PLAIN response: expected 3 "
                                 "tokens, got more");
            return CN_EINVAL;
        }
        f[nf] = msg + start;
        flen[nf++] = i - start;
        start = i + 1;
    }
    if (nf != 3) {
        seterr(why, why_len,
               "Invalid SASL/PLAIN response: expected 3 tokens, got %zu", nf);
        return CN_EINVAL;
    }
    if (flen[1] == 0) {
        seterr(why, why_len, "Authentication failed: username not specified");
        return CN_EINVAL;
    }
    if (flen[2] == 0) {
        seterr(why, why_len, "Authentication failed: password not specified");
        return CN_EINVAL;
    }
    if (flen[0] && (flen[0] != flen[1] || memcmp(f[0], f[1], flen[1]))) {
        seterr(why, why_len,
               "Authentication failed: Client requested an authorization id "
               "that is different from username");
        return CN_EINVAL;
    }
    if (flen[1] >= user_cap || flen[2] >= pw_cap) {
        seterr(why, why_len, "Authentication failed: name or password too "
                             "long");
        return CN_EINVAL;
    }
    memcpy(user, f[1], flen[1]);
    user[flen[1]] = '\0';
    memcpy(pw, f[2], flen[2]);
    pw[flen[2]] = '\0';
    return 0;
}

/* ---- base64 ----------------------------------------------------------- */

/* Encodes into out (NUL-terminated); 0 or CN_ETOOBIG. */
static int b64_enc(const uint8_t *p, size_t n, char *out, size_t cap)
{
    if ((n + 2) / 3 * 4 + 1 > cap)
        return CN_ETOOBIG;
    EVP_EncodeBlock((unsigned char *)out, p, (int)n);
    return 0;
}

/* Strict decode of s[0..n): canonical padding only.  The length or -1. */
static int b64_dec(const char *s, size_t n, uint8_t *out, size_t cap)
{
    if (n == 0 || n % 4 || n / 4 * 3 > cap || n > 4096)
        return -1;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        bool ok = (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
                  (ch >= '0' && ch <= '9') || ch == '+' || ch == '/' ||
                  (ch == '=' && i >= n - 2 && (i == n - 1 || s[n - 1] == '='));
        if (!ok)
            return -1;
    }
    int m = EVP_DecodeBlock(out, (const unsigned char *)s, (int)n);
    if (m < 0)
        return -1;
    /* EVP_DecodeBlock counts the padding as zero bytes. */
    if (s[n - 1] == '=')
        m--;
    if (s[n - 2] == '=')
        m--;
    return m;
}

/* ---- kafka-storage --add-scram ----------------------------------------- */

int cn_scram_salt_password(int mech, const char *pw, size_t pw_len,
                           const uint8_t *salt, size_t salt_len,
                           int32_t iterations, uint8_t *out)
{
    if (!cn_scram_key_len(mech) || iterations < CN_SCRAM_ITER_MIN ||
        iterations > CN_SCRAM_ITER_MAX || pw_len > INT32_MAX ||
        salt_len == 0 || salt_len > CN_SCRAM_SALT_MAX)
        return CN_EINVAL;
    return salted_password(mech, pw, pw_len, salt, salt_len, iterations,
                           out);
}

/* Value of one key=value, quotes removed, into out; false if too long. */
static bool add_arg_value(const char *v, size_t n, char *out, size_t cap)
{
    if (n >= 2 && v[0] == '"' && v[n - 1] == '"') {
        v++;
        n -= 2;
    }
    if (n >= cap)
        return false;
    memcpy(out, v, n);
    out[n] = '\0';
    return true;
}

int cn_scram_parse_add_arg(const char *arg, char *user, size_t user_cap,
                           struct cn_scram_cred *cred, char *why,
                           size_t why_len)
{
    const char *eq = strchr(arg, '=');
    size_t alen = strlen(arg);
    if (!eq || eq[1] != '[' || alen < 2 || arg[alen - 1] != ']') {
        seterr(why, why_len,
               "expected MECHANISM=[name=...,password=...] (or "
               "iterations=, salt=, saltedpassword=)");
        return CN_EINVAL;
    }
    int mech = cn_scram_mech_parse(arg, (size_t)(eq - arg));
    if (!mech) {
        seterr(why, why_len, "unknown SCRAM mechanism '%.*s' (SCRAM-SHA-256 "
               "or SCRAM-SHA-512)", (int)(eq - arg), arg);
        return CN_EINVAL;
    }
    char name[CN_SASL_NAME_MAX] = "", pw[1024] = "", salt64[512] = "",
         salted64[512] = "", iters[16] = "";
    bool have_pw = false, have_salted = false;
    int32_t iterations = CN_SCRAM_ITER_MIN;
    const char *p = eq + 2, *end = arg + alen - 1;
    while (p < end) {
        const char *comma = p;
        bool quoted = false;
        while (comma < end && (quoted || *comma != ',')) {
            if (*comma == '"')
                quoted = !quoted;
            comma++;
        }
        const char *ke = memchr(p, '=', (size_t)(comma - p));
        if (!ke) {
            seterr(why, why_len, "'%.*s' is not key=value", (int)(comma - p),
                   p);
            return CN_EINVAL;
        }
        size_t kl = (size_t)(ke - p), vl = (size_t)(comma - ke - 1);
        const char *v = ke + 1;
        bool ok;
        if (kl == 4 && !memcmp(p, "name", 4))
            ok = add_arg_value(v, vl, name, sizeof name);
        else if (kl == 8 && !memcmp(p, "password", 8))
            ok = have_pw = add_arg_value(v, vl, pw, sizeof pw);
        else if (kl == 4 && !memcmp(p, "salt", 4))
            ok = add_arg_value(v, vl, salt64, sizeof salt64);
        else if (kl == 14 && !memcmp(p, "saltedpassword", 14))
            ok = have_salted = add_arg_value(v, vl, salted64,
                                             sizeof salted64);
        else if (kl == 10 && !memcmp(p, "iterations", 10))
            ok = add_arg_value(v, vl, iters, sizeof iters);
        else {
            seterr(why, why_len, "unknown key '%.*s' (name, password, salt, "
                   "saltedpassword, iterations)", (int)kl, p);
            return CN_EINVAL;
        }
        if (!ok) {
            seterr(why, why_len, "value of '%.*s' too long", (int)kl, p);
            return CN_EINVAL;
        }
        p = comma < end ? comma + 1 : end;
    }
    if (!name[0] || strlen(name) >= user_cap) {
        seterr(why, why_len, "name= missing or too long");
        return CN_EINVAL;
    }
    if (have_pw == have_salted) {
        seterr(why, why_len, "give exactly one of password= and "
                             "saltedpassword=");
        return CN_EINVAL;
    }
    if (iters[0]) {
        char *e;
        long it = strtol(iters, &e, 10);
        if (*e || it < CN_SCRAM_ITER_MIN || it > CN_SCRAM_ITER_MAX) {
            seterr(why, why_len, "iterations must be %d..%d", CN_SCRAM_ITER_MIN,
                   CN_SCRAM_ITER_MAX);
            return CN_EINVAL;
        }
        iterations = (int32_t)it;
    }
    uint8_t salt[CN_SCRAM_SALT_MAX];
    int salt_len = 0;
    if (salt64[0]) {
        salt_len = b64_dec(salt64, strlen(salt64), salt, sizeof salt);
        if (salt_len <= 0) {
            seterr(why, why_len, "salt= is not base64 of 1..%d bytes",
                   CN_SCRAM_SALT_MAX);
            return CN_EINVAL;
        }
    } else if (have_salted) {
        seterr(why, why_len, "saltedpassword= needs salt=");
        return CN_EINVAL;
    }
    int rc;
    if (have_pw) {
        rc = cn_scram_cred_from_password(mech, pw, strlen(pw),
                                         salt_len ? salt : NULL,
                                         (size_t)salt_len, iterations, cred);
        OPENSSL_cleanse(pw, sizeof pw);
    } else {
        uint8_t sp[CN_SCRAM_KEY_MAX];
        int spl = b64_dec(salted64, strlen(salted64), sp, sizeof sp);
        if (spl < 0 || (size_t)spl != cn_scram_key_len(mech)) {
            seterr(why, why_len, "saltedpassword= must be base64 of %zu "
                   "bytes", cn_scram_key_len(mech));
            return CN_EINVAL;
        }
        rc = cn_scram_cred_from_salted(mech, sp, (size_t)spl, salt,
                                       (size_t)salt_len, iterations, cred);
    }
    if (rc) {
        seterr(why, why_len, "cannot derive the credential: %s",
               cn_strerror(rc));
        return rc;
    }
    strcpy(user, name);
    return 0;
}

/* ---- SCRAM ------------------------------------------------------------ */

void cn_scram_server_init(struct cn_scram_server *s, int mech)
{
    memset(s, 0, sizeof s[0]);
    s->mech = mech;
    s->state = CN_SCRAM_WANT_CLIENT_FIRST;
}

/* RFC 5802 saslname: "=2C" is ',', "=3D" is '='; other '=' and ','
 * are invalid.  0 or CN_EINVAL. */
static int unescape_name(const char *s, size_t n, char *out, size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (ch == ',' || ch == '\0')
            return CN_EINVAL;
        if (ch == '=') {
            if (n - i < 3)
                return CN_EINVAL;
            if (s[i + 1] == '2' && s[i + 2] == 'C')
                ch = ',';
            else if (s[i + 1] == '3' && s[i + 2] == 'D')
                ch = '=';
            else
                return CN_EINVAL;
            i += 2;
        }
        if (o + 1 >= cap)
            return CN_EINVAL;
        out[o++] = ch;
    }
    if (o == 0)
        return CN_EINVAL;
    out[o] = '\0';
    return 0;
}

/* A printable nonce without ',' (RFC 5802 "printable"). */
static bool nonce_ok(const char *s, size_t n)
{
    if (n == 0)
        return false;
    for (size_t i = 0; i < n; i++)
        if (s[i] < 0x21 || s[i] > 0x7e || s[i] == ',')
            return false;
    return true;
}

static int fail(struct cn_scram_server *s, int rc, char *why, size_t why_len,
                const char *msg)
{
    s->state = CN_SCRAM_FAILED;
    seterr(why, why_len, "%s", msg);
    return rc;
}

static int client_first(struct cn_scram_server *s, const char *m, size_t n,
                        cn_scram_lookup_fn lookup, void *opaque, uint8_t *out,
                        size_t out_cap, size_t *out_len, char *why,
                        size_t why_len)
{
    const char *end = m + n;
    const char *bad = "Invalid SCRAM client first message";
    /* gs2-cbind-flag: no channel binding on Kafka's listeners. */
    if (n < 3 || (m[0] != 'n' && m[0] != 'y') || m[1] != ',')
        return fail(s, CN_EINVAL, why, why_len, bad);
    const char *p = m + 2;
    const char *c = memchr(p, ',', (size_t)(end - p));
    if (!c)
        return fail(s, CN_EINVAL, why, why_len, bad);
    char authzid[CN_SASL_NAME_MAX] = "";
    if (c > p) {
        if (c - p < 3 || p[0] != 'a' || p[1] != '=' ||
            unescape_name(p + 2, (size_t)(c - p - 2), authzid, sizeof authzid))
            return fail(s, CN_EINVAL, why, why_len, bad);
    }
    size_t gl = (size_t)(c + 1 - m);
    if (gl >= sizeof s->gs2)
        return fail(s, CN_EINVAL, why, why_len, bad);
    memcpy(s->gs2, m, gl);
    s->gs2[gl] = '\0';
    const char *bare = c + 1;
    size_t bl = (size_t)(end - bare);
    if (bl >= sizeof s->client_first_bare || bl < 6 || bare[0] != 'n' ||
        bare[1] != '=')
        return fail(s, CN_EINVAL, why, why_len, bad);
    const char *nc = memchr(bare, ',', bl);
    if (!nc || unescape_name(bare + 2, (size_t)(nc - bare - 2), s->user,
                             sizeof s->user))
        return fail(s, CN_EINVAL, why, why_len, bad);
    const char *r = nc + 1;
    if (end - r < 3 || r[0] != 'r' || r[1] != '=')
        return fail(s, CN_EINVAL, why, why_len, bad);
    const char *rn = r + 2;
    const char *rend = memchr(rn, ',', (size_t)(end - rn));
    if (rend)
        return fail(s, CN_EINVAL, why, why_len,
                    "Unsupported extensions in SCRAM client first message");
    if (!nonce_ok(rn, (size_t)(end - rn)))
        return fail(s, CN_EINVAL, why, why_len, bad);
    if (authzid[0] && strcmp(authzid, s->user))
        return fail(s, CN_EINVAL, why, why_len,
                    "Authentication failed: Client requested an "
                    "authorization id that is different from username");
    memcpy(s->client_first_bare, bare, bl);
    s->client_first_bare[bl] = '\0';

    if (!lookup || lookup(opaque, s->user, s->mech, &s->cred) != 0 ||
        s->cred.mech != s->mech)
        return fail(s, -EACCES, why, why_len,
                    "Authentication failed: Invalid user credentials");

    char snonce[64];
    if (s->fixed_nonce) {
        snprintf(snonce, sizeof snonce, "%s", s->fixed_nonce);
    } else if (cn_scram_nonce(snonce, sizeof snonce)) {
        return fail(s, CN_ENOMEM, why, why_len, "no randomness");
    }
    size_t cnl = (size_t)(end - rn);
    if (cnl + strlen(snonce) >= sizeof s->nonce)
        return fail(s, CN_EINVAL, why, why_len, bad);
    memcpy(s->nonce, rn, cnl);
    strcpy(s->nonce + cnl, snonce);

    char salt64[CN_SCRAM_SALT_MAX * 2];
    b64_enc(s->cred.salt, s->cred.salt_len, salt64, sizeof salt64);
    int w = snprintf(s->server_first, sizeof s->server_first,
                     "r=%s,s=%s,i=%d", s->nonce, salt64,
                     (int)s->cred.iterations);
    if (w < 0 || (size_t)w >= sizeof s->server_first || (size_t)w > out_cap)
        return fail(s, CN_EINVAL, why, why_len, bad);
    memcpy(out, s->server_first, (size_t)w);
    *out_len = (size_t)w;
    s->state = CN_SCRAM_WANT_CLIENT_FINAL;
    return 0;
}

static int client_final(struct cn_scram_server *s, const char *m, size_t n,
                        uint8_t *out, size_t out_cap, size_t *out_len,
                        char *why, size_t why_len)
{
    const char *end = m + n;
    const char *bad = "Invalid SCRAM client final message";
    /* c=<b64>,r=<nonce>,p=<b64>: the proof is last, everything before
     * ",p=" is client-final-message-without-proof. */
    const char *pp = NULL;
    for (const char *q = m; q + 3 <= end; q++)
        if (q[0] == ',' && q[1] == 'p' && q[2] == '=')
            pp = q;
    if (!pp || n < 2 || m[0] != 'c' || m[1] != '=')
        return fail(s, CN_EINVAL, why, why_len, bad);
    const char *c1 = memchr(m, ',', (size_t)(end - m));
    if (!c1 || c1 > pp)
        return fail(s, CN_EINVAL, why, why_len, bad);
    uint8_t cb[sizeof s->gs2];
    int cbl = b64_dec(m + 2, (size_t)(c1 - m - 2), cb, sizeof cb);
    if (cbl < 0 || (size_t)cbl != strlen(s->gs2) ||
        memcmp(cb, s->gs2, (size_t)cbl))
        return fail(s, CN_EINVAL, why, why_len, bad);
    const char *r = c1 + 1;
    if (pp - r < 2 || r[0] != 'r' || r[1] != '=')
        return fail(s, CN_EINVAL, why, why_len, bad);
    const char *rend = memchr(r, ',', (size_t)(pp + 1 - r));
    if (rend != pp)
        return fail(s, CN_EINVAL, why, why_len,
                    "Unsupported extensions in SCRAM client final message");
    /* The nonce must END with the server-first one, not equal it:
     * librdkafka before 2.6.1 (its issue #4895, Debian 12 ships 2.0.2)
     * sends its client nonce twice (r=<cnonce><cnonce><snonce>).  Kafka
     * 4.4.0 compares exactly and refuses those clients (measured: the
     * SCRAM login of confluent-kafka 2.0.2 fails against it); Cairn lets
     * them in on purpose.  The fresh server nonce still ends the value
     * and the proof covers the message as sent, so a replayed or forged
     * final message still fails. */
    size_t rl = (size_t)(pp - r - 2), nl = strlen(s->nonce);
    if (rl < nl || memcmp(r + 2 + (rl - nl), s->nonce, nl))
        return fail(s, CN_EINVAL, why, why_len,
                    "Invalid SCRAM client final message: nonce mismatch");
    size_t k = cn_scram_key_len(s->mech);
    uint8_t proof[CN_SCRAM_KEY_MAX + 3];
    int pl = b64_dec(pp + 3, (size_t)(end - pp - 3), proof, sizeof proof);
    if (pl < 0 || (size_t)pl != k)
        return fail(s, CN_EINVAL, why, why_len, bad);

    /* AuthMessage = client-first-bare "," server-first "," final-no-proof */
    size_t a1 = strlen(s->client_first_bare), a2 = strlen(s->server_first);
    size_t a3 = (size_t)(pp - m);
    uint8_t auth[3 * CN_SCRAM_MSG_MAX + 8];
    if (a1 + a2 + a3 + 2 > sizeof auth)
        return fail(s, CN_EINVAL, why, why_len, bad);
    memcpy(auth, s->client_first_bare, a1);
    auth[a1] = ',';
    memcpy(auth + a1 + 1, s->server_first, a2);
    auth[a1 + 1 + a2] = ',';
    memcpy(auth + a1 + a2 + 2, m, a3);
    size_t al = a1 + a2 + a3 + 2;

    uint8_t sig[CN_SCRAM_KEY_MAX], ckey[CN_SCRAM_KEY_MAX],
        stored[CN_SCRAM_KEY_MAX];
    if (hmac(s->mech, s->cred.stored_key, k, auth, al, sig))
        return fail(s, CN_ENOMEM, why, why_len, "out of memory");
    for (size_t i = 0; i < k; i++)
        ckey[i] = proof[i] ^ sig[i];
    if (digest(s->mech, ckey, k, stored))
        return fail(s, CN_ENOMEM, why, why_len, "out of memory");
    OPENSSL_cleanse(ckey, sizeof ckey);
    if (CRYPTO_memcmp(stored, s->cred.stored_key, k) != 0)
        return fail(s, -EACCES, why, why_len,
                    "Authentication failed: Invalid user credentials");
    if (hmac(s->mech, s->cred.server_key, k, auth, al, sig))
        return fail(s, CN_ENOMEM, why, why_len, "out of memory");
    char v64[CN_SCRAM_KEY_MAX * 2];
    b64_enc(sig, k, v64, sizeof v64);
    size_t vl = strlen(v64);
    if (vl + 2 > out_cap)
        return fail(s, CN_EINVAL, why, why_len, "answer buffer too small");
    out[0] = 'v';
    out[1] = '=';
    memcpy(out + 2, v64, vl);
    *out_len = vl + 2;
    s->state = CN_SCRAM_DONE;
    return 0;
}

int cn_scram_server_step(struct cn_scram_server *s, const uint8_t *in,
                         size_t in_len, cn_scram_lookup_fn lookup,
                         void *opaque, uint8_t *out, size_t out_cap,
                         size_t *out_len, char *why, size_t why_len)
{
    *out_len = 0;
    if (!cn_scram_key_len(s->mech))
        return fail(s, CN_EINVAL, why, why_len, "unknown SCRAM mechanism");
    /* Text messages: a NUL inside is malformed, never a terminator. */
    if ((in_len && memchr(in, '\0', in_len)) || in_len > CN_SCRAM_MSG_MAX)
        return fail(s, CN_EINVAL, why, why_len, "Invalid SCRAM message");
    const char *m = (const char *)in;
    switch (s->state) {
    case CN_SCRAM_WANT_CLIENT_FIRST:
        return client_first(s, m, in_len, lookup, opaque, out, out_cap,
                            out_len, why, why_len);
    case CN_SCRAM_WANT_CLIENT_FINAL:
        return client_final(s, m, in_len, out, out_cap, out_len, why,
                            why_len);
    default:
        return fail(s, CN_EINVAL, why, why_len,
                    "SCRAM exchange already finished");
    }
}

/* ---- credential store ------------------------------------------------- */

static const char store_magic[8] = {'C', 'N', 'S', 'C', 'R', 'A', 'M', '1'};

void cn_scram_store_encode(struct cn_wr *wr, const struct cn_scram_user *u,
                           size_t n)
{
    size_t start = wr->len;
    cn_wr_raw(wr, store_magic, sizeof store_magic);
    cn_wr_u32(wr, (uint32_t)n);
    for (size_t i = 0; i < n; i++) {
        size_t nl = strlen(u[i].name), k = cn_scram_key_len(u[i].cred.mech);
        cn_wr_u16(wr, (uint16_t)nl);
        cn_wr_raw(wr, u[i].name, nl);
        cn_wr_i8(wr, (int8_t)u[i].cred.mech);
        cn_wr_i8(wr, (int8_t)u[i].cred.salt_len);
        cn_wr_raw(wr, u[i].cred.salt, u[i].cred.salt_len);
        cn_wr_raw(wr, u[i].cred.stored_key, k);
        cn_wr_raw(wr, u[i].cred.server_key, k);
        cn_wr_i32(wr, u[i].cred.iterations);
    }
    if (!wr->err)
        cn_wr_u32(wr, cn_crc32c(0, wr->buf + start, wr->len - start));
}

int cn_scram_store_decode(const uint8_t *p, size_t len,
                          int (*add)(void *opaque,
                                     const struct cn_scram_user *u),
                          void *opaque)
{
    if (len < sizeof store_magic + 8 ||
        memcmp(p, store_magic, sizeof store_magic))
        return cn_corrupt("SCRAM credential store: bad magic");
    uint32_t crc = ((uint32_t)p[len - 4] << 24) |
                   ((uint32_t)p[len - 3] << 16) |
                   ((uint32_t)p[len - 2] << 8) | p[len - 1];
    if (cn_crc32c(0, p, len - 4) != crc)
        return cn_corrupt("SCRAM credential store: CRC mismatch");
    struct cn_rd rd;
    cn_rd_init(&rd, p + sizeof store_magic, len - sizeof store_magic - 4);
    uint32_t n = cn_rd_u32(&rd);
    for (uint32_t i = 0; i < n && !rd.err; i++) {
        struct cn_scram_user u;
        memset(&u, 0, sizeof u);
        uint16_t nl = cn_rd_u16(&rd);
        struct cn_bytes name = cn_rd_raw(&rd, nl);
        int mech = cn_rd_i8(&rd);
        uint8_t sl = (uint8_t)cn_rd_i8(&rd);
        struct cn_bytes salt = cn_rd_raw(&rd, sl);
        size_t k = cn_scram_key_len(mech);
        struct cn_bytes sk = cn_rd_raw(&rd, k);
        struct cn_bytes vk = cn_rd_raw(&rd, k);
        int32_t iter = cn_rd_i32(&rd);
        if (rd.err)
            break;
        if (!k || nl == 0 || nl >= sizeof u.name || sl == 0 ||
            sl > CN_SCRAM_SALT_MAX || iter < CN_SCRAM_ITER_MIN ||
            iter > CN_SCRAM_ITER_MAX)
            return cn_corrupt("SCRAM credential store: bad record");
        memcpy(u.name, name.ptr, nl);
        u.cred.mech = mech;
        memcpy(u.cred.salt, salt.ptr, sl);
        u.cred.salt_len = sl;
        memcpy(u.cred.stored_key, sk.ptr, k);
        memcpy(u.cred.server_key, vk.ptr, k);
        u.cred.iterations = iter;
        int rc = add(opaque, &u);
        if (rc)
            return rc;
    }
    if (rd.err || cn_rd_left(&rd) != 0)
        return cn_corrupt("SCRAM credential store: bad length");
    return 0;
}

/* ---- primitives shared with the client (scram_prim.h) ----------------- */

int cn_scram_hmac(int mech, const uint8_t *key, size_t key_len,
                  const void *msg, size_t len, uint8_t *out)
{
    if (!mech_md(mech))
        return CN_EINVAL;
    return hmac(mech, key, key_len, msg, len, out);
}

int cn_scram_hash(int mech, const uint8_t *p, size_t len, uint8_t *out)
{
    if (!mech_md(mech))
        return CN_EINVAL;
    return digest(mech, p, len, out);
}

int cn_scram_salted_password(int mech, const char *pw, size_t pw_len,
                             const uint8_t *salt, size_t salt_len,
                             int32_t iterations, uint8_t *out)
{
    if (!mech_md(mech) || pw_len > INT32_MAX || salt_len > INT32_MAX ||
        iterations < 1)
        return CN_EINVAL;
    return salted_password(mech, pw, pw_len, salt, salt_len, iterations, out);
}

int cn_scram_b64_enc(const uint8_t *p, size_t n, char *out, size_t cap)
{
    return b64_enc(p, n, out, cap);
}

int cn_scram_b64_dec(const char *s, size_t n, uint8_t *out, size_t cap)
{
    return b64_dec(s, n, out, cap);
}

int cn_scram_nonce(char *out, size_t cap)
{
    uint8_t rnd[18];
    if (RAND_bytes(rnd, sizeof rnd) != 1)
        return CN_ENOMEM;
    return b64_enc(rnd, sizeof rnd, out, cap);
}

int cn_scram_escape_name(const char *name, char *out, size_t cap)
{
    size_t o = 0;
    if (!*name)
        return CN_EINVAL;
    for (const char *p = name; *p; p++) {
        const char *rep = *p == ',' ? "=2C" : *p == '=' ? "=3D" : NULL;
        size_t n = rep ? 3 : 1;
        if (o + n + 1 > cap)
            return CN_ETOOBIG;
        memcpy(out + o, rep ? rep : p, n);
        o += n;
    }
    out[o] = '\0';
    return 0;
}

int cn_scram_unescape_name(const char *s, size_t n, char *out, size_t cap)
{
    return unescape_name(s, n, out, cap);
}
