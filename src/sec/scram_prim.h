/*
 * scram_prim.h - the SCRAM building blocks the server (sasl.c) and the
 * client (scram_client.c) share: HMAC, H, PBKDF2 (Hi), base64, nonces and
 * saslname escaping (RFC 5802 §2.2, §5.1).  Defined in sasl.c, next to the
 * server that was their first user.
 *
 * mech is an enum cn_scram_mech; buffers are CN_SCRAM_KEY_MAX bytes.
 * Each returns 0, or CN_EINVAL / CN_ETOOBIG / CN_ENOMEM.
 */
#ifndef CN_SEC_SCRAM_PRIM_H
#define CN_SEC_SCRAM_PRIM_H

#include <stddef.h>
#include <stdint.h>

/* HMAC(key, msg) of mech's hash into out (cn_scram_key_len bytes). */
int cn_scram_hmac(int mech, const uint8_t *key, size_t key_len,
                  const void *msg, size_t len, uint8_t *out);
/* H(p) of mech's hash into out. */
int cn_scram_hash(int mech, const uint8_t *p, size_t len, uint8_t *out);
/* SaltedPassword = Hi(password, salt, iterations) into out. */
int cn_scram_salted_password(int mech, const char *pw, size_t pw_len,
                             const uint8_t *salt, size_t salt_len,
                             int32_t iterations, uint8_t *out);
/* Base64 of p[0..n) into out, NUL-terminated. */
int cn_scram_b64_enc(const uint8_t *p, size_t n, char *out, size_t cap);
/* Strict base64 decode of s[0..n) (canonical padding): length, or -1. */
int cn_scram_b64_dec(const char *s, size_t n, uint8_t *out, size_t cap);
/* A fresh random printable nonce without ',' (base64 of 18 random
 * bytes, 24 characters) into out. */
int cn_scram_nonce(char *out, size_t cap);
/* saslname: ',' as "=2C", '=' as "=3D"; out NUL-terminated.  CN_EINVAL
 * for an empty name or one holding NUL. */
int cn_scram_escape_name(const char *name, char *out, size_t cap);
/* The reverse; CN_EINVAL for a stray '=' or ',' or an empty name. */
int cn_scram_unescape_name(const char *s, size_t n, char *out, size_t cap);

#endif
