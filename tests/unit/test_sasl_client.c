/*
 * test_sasl_client.c - the SCRAM and PLAIN client mechanisms (src/sec)
 * against RFC 7677's test vector and, in-process, against the server
 * state machine (cn_scram_server) for both hashes, wrong passwords, a
 * server that does not know the credential, and bad server messages.
 */
#include <errno.h>
#include <string.h>

#include "base/err.h"
#include "sec/sasl.h"
#include "sec/sasl_client.h"
#include "sec/scram_prim.h"
#include "unit.h"

/* RFC 7677 §3. */
#define RFC_CNONCE "rOprNGfwEbeRWgbNEkqO"
#define RFC_CFIRST "n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
#define RFC_SFIRST                                                       \
    "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7" \
    "soEsUEjb6gQ==,i=4096"
#define RFC_CFINAL                                                       \
    "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZ" \
    "apWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
#define RFC_SFINAL "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="

static int first(struct cn_scram_client *c, char *out, size_t cap)
{
    size_t n = 0;
    int rc = cn_scram_client_first(c, (uint8_t *)out, cap - 1, &n, NULL, 0);
    out[n] = '\0';
    return rc;
}

static int final(struct cn_scram_client *c, const char *in, char *out,
                 size_t cap, char *why)
{
    size_t n = 0;
    int rc = cn_scram_client_final(c, (const uint8_t *)in, strlen(in),
                                   (uint8_t *)out, cap - 1, &n, why, 256);
    out[n] = '\0';
    return rc;
}

static int verify(struct cn_scram_client *c, const char *in, char *why)
{
    return cn_scram_client_verify(c, (const uint8_t *)in, strlen(in), why,
                                  256);
}

UNIT_TEST(client_rfc7677_vector)
{
    struct cn_scram_client c;
    char out[512], why[256] = "";
    cn_scram_client_init(&c, CN_SCRAM_SHA256, "user", "pencil");
    c.fixed_nonce = RFC_CNONCE;
    CHECK_EQ(first(&c, out, sizeof out), 0);
    CHECK(!strcmp(out, RFC_CFIRST));
    CHECK_EQ(final(&c, RFC_SFIRST, out, sizeof out, why), 0);
    CHECK(!strcmp(out, RFC_CFINAL));
    CHECK_EQ(verify(&c, RFC_SFINAL, why), 0);
    CHECK_EQ(c.state, CN_SCRAM_CLIENT_DONE);

    /* The same exchange with a server signature one bit off. */
    cn_scram_client_init(&c, CN_SCRAM_SHA256, "user", "pencil");
    c.fixed_nonce = RFC_CNONCE;
    CHECK_EQ(first(&c, out, sizeof out), 0);
    CHECK_EQ(final(&c, RFC_SFIRST, out, sizeof out, why), 0);
    CHECK_EQ(verify(&c, "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95H4=",
                    why),
             CN_EINVAL);
    CHECK(strstr(why, "signature does not match"));
    CHECK_EQ(c.state, CN_SCRAM_CLIENT_FAILED);
}

/* ---- client <-> server in-process ----------------------------------- */

static struct cn_scram_cred creds[3]; /* by mech */
static const char *cred_user = "alice";

static int lookup(void *opaque, const char *user, int mech,
                  struct cn_scram_cred *out)
{
    (void)opaque;
    if (strcmp(user, cred_user) || mech < 1 || mech > 2 || !creds[mech].mech)
        return -1;
    *out = creds[mech];
    return 0;
}

/* Runs a whole exchange; returns the step that failed (0 none):
 * 1 client-first, 2 server on client-first, 3 client-final, 4 server on
 * client-final, 5 client verify. */
static int exchange(int mech, const char *user, const char *pw, char *why)
{
    struct cn_scram_client c;
    struct cn_scram_server s;
    uint8_t a[1024], b[1024];
    size_t an = 0, bn = 0;

    cn_scram_client_init(&c, mech, user, pw);
    cn_scram_server_init(&s, mech);
    if (cn_scram_client_first(&c, a, sizeof a, &an, why, 256))
        return 1;
    if (cn_scram_server_step(&s, a, an, lookup, NULL, b, sizeof b, &bn, why,
                             256))
        return 2;
    if (cn_scram_client_final(&c, b, bn, a, sizeof a, &an, why, 256))
        return 3;
    if (cn_scram_server_step(&s, a, an, lookup, NULL, b, sizeof b, &bn, why,
                             256))
        return 4;
    if (s.state != CN_SCRAM_DONE || strcmp(s.user, user))
        return 4;
    if (cn_scram_client_verify(&c, b, bn, why, 256))
        return 5;
    return c.state == CN_SCRAM_CLIENT_DONE ? 0 : 5;
}

UNIT_TEST(client_against_server_both_hashes)
{
    char why[256];
    for (int mech = CN_SCRAM_SHA256; mech <= CN_SCRAM_SHA512; mech++) {
        CHECK_EQ(cn_scram_cred_from_password(mech, "alice-secret", 12, NULL,
                                             0, 4096, &creds[mech]),
                 0);
        cred_user = "alice";
        CHECK_EQ(exchange(mech, "alice", "alice-secret", why), 0);
        /* Wrong password: the server refuses the proof. */
        CHECK_EQ(exchange(mech, "alice", "alice-secreT", why), 4);
        CHECK(strstr(why, "Invalid user credentials"));
        /* Unknown user: refused at client-first. */
        CHECK_EQ(exchange(mech, "bob", "alice-secret", why), 2);
    }
    /* A name needing escapes survives the trip (',' and '='). */
    CHECK_EQ(cn_scram_cred_from_password(CN_SCRAM_SHA512, "pw", 2, NULL, 0,
                                         8192, &creds[2]),
             0);
    cred_user = "a,b=c";
    CHECK_EQ(exchange(CN_SCRAM_SHA512, "a,b=c", "pw", why), 0);
    cred_user = "alice";
}

UNIT_TEST(client_catches_server_without_credential)
{
    /* A server that does not hold the real ServerKey (e.g. one that
     * accepts anything) cannot produce the signature. */
    struct cn_scram_cred real, fake;
    char why[256];
    CHECK_EQ(cn_scram_cred_from_password(CN_SCRAM_SHA256, "right", 5,
                                         (const uint8_t *)"salt1234", 8,
                                         4096, &real),
             0);
    fake = real;
    fake.server_key[0] ^= 1;
    creds[1] = fake;
    CHECK_EQ(exchange(CN_SCRAM_SHA256, "alice", "right", why), 5);
    CHECK(strstr(why, "signature does not match"));
    creds[1] = real;
    CHECK_EQ(exchange(CN_SCRAM_SHA256, "alice", "right", why), 0);
}

UNIT_TEST(client_refuses_bad_server_first)
{
    static const char *const bad[] = {
        "",
        "r=rOprNGfwEbeRWgbNEkqO,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096", /* no
                                                          server part */
        "r=XXprNGfwEbeRWgbNEkqOabc,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
        "r=rOprNGfwEbeRWgbNEkqOabc,s=W22ZaJ0SNY7soEsUEjb6gQ=,i=4096",
        "r=rOprNGfwEbeRWgbNEkqOabc,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4095",
        "r=rOprNGfwEbeRWgbNEkqOabc,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=99999999",
        "r=rOprNGfwEbeRWgbNEkqOabc,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=-4096",
        "r=rOprNGfwEbeRWgbNEkqOabc,s=W22ZaJ0SNY7soEsUEjb6gQ==",
        "s=W22ZaJ0SNY7soEsUEjb6gQ==,r=rOprNGfwEbeRWgbNEkqOabc,i=4096",
        "e=invalid-proof",
    };
    char out[512], why[256];
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        struct cn_scram_client c;
        cn_scram_client_init(&c, CN_SCRAM_SHA256, "user", "pencil");
        c.fixed_nonce = RFC_CNONCE;
        CHECK_EQ(first(&c, out, sizeof out), 0);
        why[0] = '\0';
        CHECK_EQ(final(&c, bad[i], out, sizeof out, why), CN_EINVAL);
        CHECK(why[0]);
        CHECK_EQ(c.state, CN_SCRAM_CLIENT_FAILED);
        /* Failed for good. */
        CHECK_EQ(verify(&c, RFC_SFINAL, why), CN_EINVAL);
    }
    /* Out of order: final before first. */
    struct cn_scram_client c;
    cn_scram_client_init(&c, CN_SCRAM_SHA256, "user", "pencil");
    CHECK_EQ(final(&c, RFC_SFIRST, out, sizeof out, why), CN_EINVAL);
}

UNIT_TEST(plain_build_and_escape)
{
    uint8_t b[64];
    size_t n = 0;
    char u[64], p[64], e[64];
    CHECK_EQ(cn_sasl_plain_build("alice", "s3cret", b, sizeof b, &n), 0);
    CHECK_EQ(n, 13);
    CHECK_EQ(cn_sasl_plain_parse(b, n, u, sizeof u, p, sizeof p, NULL, 0), 0);
    CHECK(!strcmp(u, "alice") && !strcmp(p, "s3cret"));
    CHECK_EQ(cn_sasl_plain_build("", "x", b, sizeof b, &n), CN_EINVAL);
    CHECK_EQ(cn_sasl_plain_build("a", "", b, sizeof b, &n), CN_EINVAL);
    CHECK_EQ(cn_sasl_plain_build("alice", "s3cret", b, 8, &n), CN_ETOOBIG);
    CHECK_EQ(cn_scram_escape_name("a,b=c", e, sizeof e), 0);
    CHECK(!strcmp(e, "a=2Cb=3Dc"));
    CHECK_EQ(cn_scram_unescape_name(e, strlen(e), u, sizeof u), 0);
    CHECK(!strcmp(u, "a,b=c"));
    CHECK_EQ(cn_scram_escape_name("", e, sizeof e), CN_EINVAL);
    CHECK_EQ(cn_scram_escape_name("a,b", e, 5), CN_ETOOBIG);
}

UNIT_MAIN(client_rfc7677_vector, client_against_server_both_hashes,
          client_catches_server_without_credential,
          client_refuses_bad_server_first, plain_build_and_escape)
