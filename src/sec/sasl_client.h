/*
 * sasl_client.h - SASL mechanisms on the client side (cairnctl): PLAIN
 * (RFC 4616) and SCRAM-SHA-256/512 (RFC 5802, RFC 7677), as Kafka's
 * ScramSaslClient speaks them: no channel binding ("n,,"), no authzid, no
 * extensions.
 *
 * Pure like sasl.h: messages in, messages out; the caller carries them in
 * SaslAuthenticate.  The primitives are sasl.c's (scram_prim.h).
 *
 * A SCRAM exchange:
 *   cn_scram_client_first   -> client-first    "n,,n=<user>,r=<cnonce>"
 *   cn_scram_client_final   <- server-first    "r=<nonce>,s=<salt>,i=<n>"
 *                           -> client-final    "c=biws,r=<nonce>,p=<proof>"
 *   cn_scram_client_verify  <- server-final    "v=<ServerSignature>"
 * The last step matters: only it proves the server knew the credential.
 *
 * Runs on: any thread; cn_scram_client_final does PBKDF2 (milliseconds).
 */
#ifndef CN_SEC_SASL_CLIENT_H
#define CN_SEC_SASL_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "sec/sasl.h"

/* PLAIN's one message, "NUL user NUL password", into out.  0, or
 * CN_EINVAL for an empty user or password (Kafka refuses both) or one
 * holding NUL, CN_ETOOBIG when out is too small. */
int cn_sasl_plain_build(const char *user, const char *pw, uint8_t *out,
                        size_t cap, size_t *out_len);

enum cn_scram_client_state {
    CN_SCRAM_CLIENT_START,
    CN_SCRAM_CLIENT_WANT_SERVER_FIRST,
    CN_SCRAM_CLIENT_WANT_SERVER_FINAL,
    CN_SCRAM_CLIENT_DONE,   /* the server proved it knows the credential */
    CN_SCRAM_CLIENT_FAILED, /* for good */
};

struct cn_scram_client {
    int mech;                           /* enum cn_scram_mech */
    enum cn_scram_client_state state;
    const char *user;                   /* caller's, unescaped */
    const char *pw;                     /* caller's; kept until final */
    char client_first_bare[CN_SCRAM_MSG_MAX];
    char cnonce[64];
    uint8_t server_sig[CN_SCRAM_KEY_MAX]; /* expected in server-final */
    const char *fixed_nonce;            /* tests: client nonce to use */
};

/* user and pw must outlive the exchange. */
void cn_scram_client_init(struct cn_scram_client *c, int mech,
                          const char *user, const char *pw);

/*
 * Each writes the next client message into out (cap bytes; *out_len set)
 * or, for verify, only checks.  Returns 0, or CN_EINVAL with a reason in
 * why (state is then CN_SCRAM_CLIENT_FAILED): a malformed server message,
 * a nonce that does not extend ours, iterations outside
 * CN_SCRAM_ITER_MIN..CN_SCRAM_ITER_MAX (Kafka's limits; a bound also
 * keeps a hostile server from buying our CPU), a server-final "e=" error,
 * or a server signature that does not match.
 */
int cn_scram_client_first(struct cn_scram_client *c, uint8_t *out,
                          size_t cap, size_t *out_len, char *why,
                          size_t why_len);
int cn_scram_client_final(struct cn_scram_client *c, const uint8_t *in,
                          size_t in_len, uint8_t *out, size_t cap,
                          size_t *out_len, char *why, size_t why_len);
int cn_scram_client_verify(struct cn_scram_client *c, const uint8_t *in,
                           size_t in_len, char *why, size_t why_len);

#endif
