/*
 * fuzz_sasl.c - libFuzzer target for the SASL server mechanisms (src/sec).
 *
 * Input:
 *
 *   offset  size  field
 *   0       1     selector: 0 PLAIN, 1 SCRAM-SHA-256, 2 SCRAM-SHA-512,
 *                 3 credential store file (others: selector % 4)
 *   1       ...   for SCRAM, up to two client messages split at the
 *                 first 0xff byte; otherwise the whole message / file
 *
 * Every call must return 0 or an error with a state that is consistent
 * (FAILED after an error, a reason written); nothing may crash or read
 * out of bounds.  The SCRAM user "user" exists with password "pencil".
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "sec/sasl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct cn_scram_cred creds[3];

static int lookup(void *opaque, const char *user, int mech,
                  struct cn_scram_cred *out)
{
    (void)opaque;
    if (strcmp(user, "user") || mech < 1 || mech > 2)
        return -1;
    *out = creds[mech];
    return 0;
}

static int count_add(void *opaque, const struct cn_scram_user *u)
{
    (void)u;
    ++*(size_t *)opaque;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int init;
    if (!init) {
        static const uint8_t salt[4] = {1, 2, 3, 4};
        cn_scram_cred_from_password(CN_SCRAM_SHA256, "pencil", 6, salt, 4,
                                    4096, &creds[1]);
        cn_scram_cred_from_password(CN_SCRAM_SHA512, "pencil", 6, salt, 4,
                                    4096, &creds[2]);
        cn_corrupt_hush();
        init = 1;
    }
    if (size < 1)
        return 0;
    int sel = data[0] % 4;
    const uint8_t *p = data + 1;
    size_t n = size - 1;
    char why[256], u[CN_SASL_NAME_MAX], pw[256];
    if (sel == 0) {
        why[0] = 0;
        if (cn_sasl_plain_parse(p, n, u, sizeof u, pw, sizeof pw, why,
                                sizeof why) != 0 && !why[0])
            abort();
        return 0;
    }
    if (sel == 3) {
        size_t count = 0;
        cn_scram_store_decode(p, n, count_add, &count);
        return 0;
    }
    struct cn_scram_server s;
    cn_scram_server_init(&s, sel);
    s.fixed_nonce = "srvnonce";
    const uint8_t *split = memchr(p, 0xff, n);
    size_t n1 = split ? (size_t)(split - p) : n;
    uint8_t out[512];
    size_t out_len;
    why[0] = 0;
    int rc = cn_scram_server_step(&s, p, n1, lookup, NULL, out, sizeof out,
                                  &out_len, why, sizeof why);
    if (rc != 0 && (s.state != CN_SCRAM_FAILED || !why[0]))
        abort();
    if (rc == 0 && s.state != CN_SCRAM_WANT_CLIENT_FINAL)
        abort();
    if (rc == 0 && split) {
        rc = cn_scram_server_step(&s, split + 1, n - n1 - 1, lookup, NULL,
                                  out, sizeof out, &out_len, why, sizeof why);
        if (rc != 0 && s.state != CN_SCRAM_FAILED)
            abort();
        if (rc == 0 && s.state != CN_SCRAM_DONE)
            abort();
    }
    return 0;
}
