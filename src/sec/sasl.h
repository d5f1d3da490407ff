/*
 * sasl.h - SASL mechanisms on the server side: PLAIN (RFC 4616) and
 * SCRAM-SHA-256/512 (RFC 5802, RFC 7677), over Kafka's credential model.
 *
 * Pure: no sockets, no loop, no files.  Messages in, messages out; the
 * caller finds credentials (cn_scram_lookup_fn) and moves the bytes.  A
 * credential is what Kafka's UserScramCredentialRecord holds: salt,
 * StoredKey, ServerKey and iterations, never the password.
 *
 * Every parser here reads bytes from the network: malformed input gives
 * CN_EINVAL and a reason for SaslAuthenticate's error_message, never an
 * assert.
 *
 * Not yet wired into the broker (no listener serves SASL yet); see the
 * report of the session that added it.
 *
 * Runs on: any thread; cn_scram_cred_from_password and
 * cn_sasl_plain_check do PBKDF2 (milliseconds) and belong on a worker.
 */
#ifndef CN_SEC_SASL_H
#define CN_SEC_SASL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Kafka's ScramMechanism type numbers (UserScramCredentialRecord). */
enum cn_scram_mech {
    CN_SCRAM_SHA256 = 1,
    CN_SCRAM_SHA512 = 2,
};

#define CN_SCRAM_KEY_MAX 64      /* SHA-512 digest bytes */
#define CN_SCRAM_SALT_MAX 128    /* bytes of salt we accept */
#define CN_SCRAM_ITER_MIN 4096   /* Kafka's ScramMechanism minimum */
#define CN_SCRAM_ITER_MAX 16384  /* ScramControlManager.MAX_ITERATIONS */
#define CN_SASL_NAME_MAX 256     /* user name bytes, unescaped, incl. NUL */

struct cn_scram_cred {
    int mech;                            /* enum cn_scram_mech */
    uint8_t salt[CN_SCRAM_SALT_MAX];
    size_t salt_len;                     /* bytes of salt used */
    uint8_t stored_key[CN_SCRAM_KEY_MAX]; /* H(HMAC(SaltedPassword,
                                             "Client Key")) */
    uint8_t server_key[CN_SCRAM_KEY_MAX]; /* HMAC(SaltedPassword,
                                             "Server Key") */
    int32_t iterations;                  /* PBKDF2 rounds */
};

/* Digest bytes of mech (32 or 64), 0 when mech is unknown. */
size_t cn_scram_key_len(int mech);
/* "SCRAM-SHA-256" / "SCRAM-SHA-512", NULL when unknown. */
const char *cn_scram_mech_name(int mech);
/* The mechanism named by s[0..n) (exact, as Kafka compares), or 0. */
int cn_scram_mech_parse(const char *s, size_t n);

/* Derives a credential from the SaltedPassword a client computed
 * (AlterUserScramCredentials, KIP-554).  CN_EINVAL for an unknown
 * mechanism, a salt too long or empty, iterations outside
 * CN_SCRAM_ITER_MIN..MAX, or salted of the wrong length. */
int cn_scram_cred_from_salted(int mech, const uint8_t *salted,
                              size_t salted_len, const uint8_t *salt,
                              size_t salt_len, int32_t iterations,
                              struct cn_scram_cred *out);
/* PBKDF2 of the password with salt (random CN_SCRAM_SALT_DEFAULT bytes
 * when salt is NULL), then as cn_scram_cred_from_salted. */
#define CN_SCRAM_SALT_DEFAULT 32
int cn_scram_cred_from_password(int mech, const char *pw, size_t pw_len,
                                const uint8_t *salt, size_t salt_len,
                                int32_t iterations, struct cn_scram_cred *out);
/* The SaltedPassword (PBKDF2 of pw; cn_scram_key_len(mech) bytes into
 * out), what a client sends in AlterUserScramCredentials. */
int cn_scram_salt_password(int mech, const char *pw, size_t pw_len,
                           const uint8_t *salt, size_t salt_len,
                           int32_t iterations, uint8_t *out);

/*
 * Parses kafka-storage format's --add-scram argument:
 *   SCRAM-SHA-512=[name=alice,password=alice-secret]
 *   SCRAM-SHA-256=[name=alice,iterations=8192,salt="MWx...",
 *                  saltedpassword="mT0y..."]
 * (salt and saltedpassword base64; values may be double-quoted;
 * iterations default 4096; salt random when absent).  Fills user and cred
 * (PBKDF2 when a password is given).  CN_EINVAL with a reason in why.
 */
int cn_scram_parse_add_arg(const char *arg, char *user, size_t user_cap,
                           struct cn_scram_cred *cred, char *why,
                           size_t why_len);

/* True when pw is the password cred was made from (PBKDF2 with its salt
 * and iterations; constant-time compare).  Used for PLAIN logins. */
bool cn_scram_cred_check(const struct cn_scram_cred *cred, const char *pw,
                         size_t pw_len);

/*
 * PLAIN: "authzid NUL authcid NUL password".  On success copies the user
 * (authcid) and the password into the caller's buffers (NUL-terminated).
 * As Kafka's PlainSaslServer: exactly three fields, user and password not
 * empty, and the authzid empty or equal to the user.
 */
int cn_sasl_plain_parse(const uint8_t *msg, size_t len, char *user,
                        size_t user_cap, char *pw, size_t pw_cap, char *why,
                        size_t why_len);

/* Finds the credential of user for mech; 0, or nonzero when there is none. */
typedef int (*cn_scram_lookup_fn)(void *opaque, const char *user, int mech,
                                  struct cn_scram_cred *out);

enum cn_scram_state {
    CN_SCRAM_WANT_CLIENT_FIRST,
    CN_SCRAM_WANT_CLIENT_FINAL,
    CN_SCRAM_DONE,   /* authenticated: user is the principal's name */
    CN_SCRAM_FAILED, /* closed for good; the caller closes the connection */
};

#define CN_SCRAM_MSG_MAX 1024 /* client-first-bare / server-first bytes */

/* One exchange, in caller memory (cn_scram_server_init). */
struct cn_scram_server {
    int mech;
    enum cn_scram_state state;
    char user[CN_SASL_NAME_MAX];        /* unescaped saslname */
    char gs2[CN_SASL_NAME_MAX + 8];     /* GS2 header as sent, "n,," */
    char client_first_bare[CN_SCRAM_MSG_MAX];
    char server_first[CN_SCRAM_MSG_MAX];
    char nonce[CN_SCRAM_MSG_MAX];       /* client nonce + server nonce */
    struct cn_scram_cred cred;
    const char *fixed_nonce;            /* tests: server nonce to use
                                           instead of random bytes */
};

void cn_scram_server_init(struct cn_scram_server *s, int mech);
/*
 * Feeds one client message and writes the answer into out (out_cap bytes,
 * *out_len set).  Returns 0 (answer in out; state says whether the
 * exchange is done), or CN_EINVAL / -EACCES with a reason in why (state
 * is then CN_SCRAM_FAILED: answer SASL_AUTHENTICATION_FAILED and close).
 * -EACCES: well-formed but unknown user or wrong proof; the reason does
 * not say which, as Kafka does not.
 */
int cn_scram_server_step(struct cn_scram_server *s, const uint8_t *in,
                         size_t in_len, cn_scram_lookup_fn lookup,
                         void *opaque, uint8_t *out, size_t out_cap,
                         size_t *out_len, char *why, size_t why_len);

/*
 * Credential store file (durable form of the credentials, one record per
 * (user, mechanism), the fields of Kafka's UserScramCredentialRecord):
 *
 *   offset  size  field
 *   0       8     magic "CNSCRAM1"
 *   8       4     record count N (big-endian)
 *   12      ...   N records:
 *                   2  name length L, then L bytes of name
 *                   1  mechanism
 *                   1  salt length S, then S bytes of salt
 *                   K  stored key, K  server key (K = digest bytes)
 *                   4  iterations
 *   end-4   4     CRC32C of every byte before it
 *
 * cn_scram_store_decode calls add for each record; CN_ECORRUPT for a bad
 * magic, CRC, length or field (nothing is then trusted).
 */
struct cn_scram_user {
    char name[CN_SASL_NAME_MAX];
    struct cn_scram_cred cred;
};

struct cn_wr;
void cn_scram_store_encode(struct cn_wr *wr, const struct cn_scram_user *u,
                           size_t n);
int cn_scram_store_decode(const uint8_t *p, size_t len,
                          int (*add)(void *opaque,
                                     const struct cn_scram_user *u),
                          void *opaque);

#endif
