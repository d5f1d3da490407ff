/*
 * rand.h - randomness for ids (cluster id, topic ids, ACL binding ids,
 * group member ids), reached only through here so tests can make it
 * repeatable.  Secrets (SCRAM salts, nonces, TLS) keep OpenSSL's
 * generator and do not come through here.
 *
 * Runs on: any thread.  The fake is for single-threaded unit tests.
 */
#ifndef CN_BASE_RAND_H
#define CN_BASE_RAND_H

#include <stddef.h>
#include <stdint.h>

/* Fills buf with n random bytes.  0 or -errno. */
int cn_rand_bytes(void *buf, size_t n);
/* From now on cn_rand_bytes returns the same sequence for the same seed. */
void cn_rand_fake(uint64_t seed);
/* Back to the system's generator. */
void cn_rand_real(void);

#endif
