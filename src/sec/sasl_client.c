/*
 * sasl_client.c - PLAIN and SCRAM client mechanisms; see sasl_client.h.
 */
#include "sasl_client.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "base/err.h"
#include "scram_prim.h"

int cn_sasl_plain_build(const char *user, const char *pw, uint8_t *out,
                        size_t cap, size_t *out_len)
{
    size_t ul = strlen(user), pl = strlen(pw);
    if (ul == 0 || pl == 0)
        return CN_EINVAL;
    if (ul + pl + 2 > cap)
        return CN_ETOOBIG;
    out[0] = 0;
    memcpy(out + 1, user, ul);
    out[1 + ul] = 0;
    memcpy(out + 2 + ul, pw, pl);
    *out_len = ul + pl + 2;
    return 0;
}

void cn_scram_client_init(struct cn_scram_client *c, int mech,
                          const char *user, const char *pw)
{
    memset(c, 0, sizeof *c);
    c->mech = mech;
    c->user = user;
    c->pw = pw;
    c->state = CN_SCRAM_CLIENT_START;
}

static int fail(struct cn_scram_client *c, char *why, size_t why_len,
                const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int fail(struct cn_scram_client *c, char *why, size_t why_len,
                const char *fmt, ...)
{
    c->state = CN_SCRAM_CLIENT_FAILED;
    if (why && why_len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, why_len, fmt, ap);
        va_end(ap);
    }
    return CN_EINVAL;
}

int cn_scram_client_first(struct cn_scram_client *c, uint8_t *out,
                          size_t cap, size_t *out_len, char *why,
                          size_t why_len)
{
    char name[CN_SASL_NAME_MAX * 3];

    if (c->state != CN_SCRAM_CLIENT_START || !cn_scram_key_len(c->mech))
        return fail(c, why, why_len, "SCRAM client used out of order");
    if (cn_scram_escape_name(c->user, name, sizeof name))
        return fail(c, why, why_len, "bad SCRAM user name");
    if (c->fixed_nonce)
        snprintf(c->cnonce, sizeof c->cnonce, "%s", c->fixed_nonce);
    else if (cn_scram_nonce(c->cnonce, sizeof c->cnonce))
        return fail(c, why, why_len, "no randomness for the SCRAM nonce");
    int w = snprintf(c->client_first_bare, sizeof c->client_first_bare,
                     "n=%s,r=%s", name, c->cnonce);
    if (w < 0 || (size_t)w >= sizeof c->client_first_bare ||
        (size_t)w + 3 > cap)
        return fail(c, why, why_len, "SCRAM user name too long");
    memcpy(out, "n,,", 3);
    memcpy(out + 3, c->client_first_bare, (size_t)w);
    *out_len = (size_t)w + 3;
    c->state = CN_SCRAM_CLIENT_WANT_SERVER_FIRST;
    return 0;
}

/* The value of attribute `a` at *p ("a=value," or to end); advances *p
 * past the comma.  False when the attribute is not next. */
static bool attr(const char **p, const char *end, char a, const char **v,
                 size_t *vl)
{
    const char *s = *p;
    if (end - s < 2 || s[0] != a || s[1] != '=')
        return false;
    s += 2;
    const char *c = memchr(s, ',', (size_t)(end - s));
    *v = s;
    *vl = (size_t)((c ? c : end) - s);
    *p = c ? c + 1 : end;
    return true;
}

int cn_scram_client_final(struct cn_scram_client *c, const uint8_t *in,
                          size_t in_len, uint8_t *out, size_t cap,
                          size_t *out_len, char *why, size_t why_len)
{
    const char *m = (const char *)in, *end = m + in_len, *p = m;
    const char *nonce, *salt64, *iter_s;
    size_t nl, sl, il;
    uint8_t salt[CN_SCRAM_SALT_MAX + 3];
    size_t k = cn_scram_key_len(c->mech);

    if (c->state != CN_SCRAM_CLIENT_WANT_SERVER_FIRST)
        return fail(c, why, why_len, "SCRAM client used out of order");
    if (in_len > CN_SCRAM_MSG_MAX || memchr(in, '\0', in_len))
        return fail(c, why, why_len, "Invalid SCRAM server first message");
    /* A server may refuse here with "e=..." in place of the nonce. */
    if (in_len >= 2 && m[0] == 'e' && m[1] == '=')
        return fail(c, why, why_len, "SCRAM server error: %.*s",
                    (int)(in_len - 2 > 200 ? 200 : in_len - 2), m + 2);
    if (!attr(&p, end, 'r', &nonce, &nl) || !attr(&p, end, 's', &salt64, &sl) ||
        !attr(&p, end, 'i', &iter_s, &il))
        return fail(c, why, why_len, "Invalid SCRAM server first message");
    size_t cl = strlen(c->cnonce);
    if (nl <= cl || memcmp(nonce, c->cnonce, cl))
        return fail(c, why, why_len,
                    "Invalid SCRAM server first message: the server nonce "
                    "does not extend the client nonce");
    for (size_t i = 0; i < nl; i++)
        if (nonce[i] < 0x21 || nonce[i] > 0x7e)
            return fail(c, why, why_len,
                        "Invalid SCRAM server first message: bad nonce");
    int saltn = cn_scram_b64_dec(salt64, sl, salt, sizeof salt);
    if (saltn <= 0 || saltn > CN_SCRAM_SALT_MAX)
        return fail(c, why, why_len,
                    "Invalid SCRAM server first message: bad salt");
    char num[16];
    if (il == 0 || il >= sizeof num)
        return fail(c, why, why_len,
                    "Invalid SCRAM server first message: bad iterations");
    memcpy(num, iter_s, il);
    num[il] = '\0';
    char *ep;
    long iter = strtol(num, &ep, 10);
    if (*ep || num[0] < '0' || num[0] > '9')
        return fail(c, why, why_len,
                    "Invalid SCRAM server first message: bad iterations");
    if (iter < CN_SCRAM_ITER_MIN || iter > CN_SCRAM_ITER_MAX)
        return fail(c, why, why_len,
                    "SCRAM server asks for %ld iterations (accepted: %d to "
                    "%d)",
                    iter, CN_SCRAM_ITER_MIN, CN_SCRAM_ITER_MAX);

    /* client-final-message-without-proof; "biws" is base64("n,,"). */
    char fwp[CN_SCRAM_MSG_MAX + 16];
    int fl = snprintf(fwp, sizeof fwp, "c=biws,r=%.*s", (int)nl, nonce);
    if (fl < 0 || (size_t)fl >= sizeof fwp)
        return fail(c, why, why_len, "Invalid SCRAM server first message");

    /* AuthMessage = client-first-bare "," server-first "," final-no-proof */
    size_t a1 = strlen(c->client_first_bare), al = a1 + in_len + (size_t)fl + 2;
    char auth[3 * CN_SCRAM_MSG_MAX + 32];
    if (al > sizeof auth)
        return fail(c, why, why_len, "Invalid SCRAM server first message");
    memcpy(auth, c->client_first_bare, a1);
    auth[a1] = ',';
    memcpy(auth + a1 + 1, m, in_len);
    auth[a1 + 1 + in_len] = ',';
    memcpy(auth + a1 + 2 + in_len, fwp, (size_t)fl);

    uint8_t sp[CN_SCRAM_KEY_MAX], ckey[CN_SCRAM_KEY_MAX],
        stored[CN_SCRAM_KEY_MAX], skey[CN_SCRAM_KEY_MAX],
        csig[CN_SCRAM_KEY_MAX];
    int rc = cn_scram_salted_password(c->mech, c->pw, strlen(c->pw), salt,
                                      (size_t)saltn, (int32_t)iter, sp);
    if (!rc)
        rc = cn_scram_hmac(c->mech, sp, k, "Client Key", 10, ckey);
    if (!rc)
        rc = cn_scram_hash(c->mech, ckey, k, stored);
    if (!rc)
        rc = cn_scram_hmac(c->mech, sp, k, "Server Key", 10, skey);
    if (!rc)
        rc = cn_scram_hmac(c->mech, stored, k, auth, al, csig);
    if (!rc)
        rc = cn_scram_hmac(c->mech, skey, k, auth, al, c->server_sig);
    OPENSSL_cleanse(sp, sizeof sp);
    OPENSSL_cleanse(skey, sizeof skey);
    if (rc) {
        OPENSSL_cleanse(ckey, sizeof ckey);
        return fail(c, why, why_len, "SCRAM computation failed");
    }
    uint8_t proof[CN_SCRAM_KEY_MAX];
    for (size_t i = 0; i < k; i++)
        proof[i] = ckey[i] ^ csig[i];
    OPENSSL_cleanse(ckey, sizeof ckey);
    char p64[CN_SCRAM_KEY_MAX * 2];
    cn_scram_b64_enc(proof, k, p64, sizeof p64);
    size_t pl = strlen(p64);
    if ((size_t)fl + 3 + pl > cap)
        return fail(c, why, why_len, "SCRAM answer buffer too small");
    memcpy(out, fwp, (size_t)fl);
    memcpy(out + fl, ",p=", 3);
    memcpy(out + fl + 3, p64, pl);
    *out_len = (size_t)fl + 3 + pl;
    c->pw = NULL;
    c->state = CN_SCRAM_CLIENT_WANT_SERVER_FINAL;
    return 0;
}

int cn_scram_client_verify(struct cn_scram_client *c, const uint8_t *in,
                           size_t in_len, char *why, size_t why_len)
{
    const char *m = (const char *)in, *end = m + in_len, *p = m, *v;
    size_t vl, k = cn_scram_key_len(c->mech);
    uint8_t sig[CN_SCRAM_KEY_MAX + 3];

    if (c->state != CN_SCRAM_CLIENT_WANT_SERVER_FINAL)
        return fail(c, why, why_len, "SCRAM client used out of order");
    if (in_len > CN_SCRAM_MSG_MAX || memchr(in, '\0', in_len))
        return fail(c, why, why_len, "Invalid SCRAM server final message");
    if (attr(&p, end, 'e', &v, &vl))
        return fail(c, why, why_len, "SCRAM server error: %.*s",
                    (int)(vl > 200 ? 200 : vl), v);
    if (!attr(&p, end, 'v', &v, &vl))
        return fail(c, why, why_len, "Invalid SCRAM server final message");
    int n = cn_scram_b64_dec(v, vl, sig, sizeof sig);
    if (n < 0 || (size_t)n != k ||
        CRYPTO_memcmp(sig, c->server_sig, k) != 0)
        return fail(c, why, why_len,
                    "SCRAM server signature does not match: the server "
                    "does not know this user's credential");
    c->state = CN_SCRAM_CLIENT_DONE;
    return 0;
}
