/*
 * fuzz_sasl_client.c - libFuzzer target for what cairnctl reads that
 * someone else wrote: the SCRAM server messages (src/sec/sasl_client.c)
 * and the --command-config file (src/cli/client_props.c).
 *
 * Input:
 *
 *   offset  size  field
 *   0       1     selector: 0 SCRAM-SHA-256, 1 SCRAM-SHA-512, 2 properties
 *                 text (others: selector % 3)
 *   1       ...   SCRAM: server-first, then server-final after the first
 *                 0xff byte; properties: the file's text
 *
 * Every call returns 0 or an error with the client in its FAILED state
 * and a reason written; nothing may crash or read out of bounds.  The
 * client nonce is fixed ("fuzzclientnonce") so inputs can extend it.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "cli/client_props.c"
#include "cli/kclient.c"
#include "sec/sasl_client.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void scram(int mech, const uint8_t *p, size_t n)
{
    struct cn_scram_client c;
    uint8_t out[2048];
    size_t on = 0;
    char why[256];
    const uint8_t *sep = memchr(p, 0xff, n);
    size_t n1 = sep ? (size_t)(sep - p) : n;

    cn_scram_client_init(&c, mech, "user", "pencil");
    c.fixed_nonce = "fuzzclientnonce";
    if (cn_scram_client_first(&c, out, sizeof out, &on, why, sizeof why))
        abort();
    why[0] = '\0';
    if (cn_scram_client_final(&c, p, n1, out, sizeof out, &on, why,
                              sizeof why)) {
        if (c.state != CN_SCRAM_CLIENT_FAILED || !why[0])
            abort();
        return;
    }
    if (on > sizeof out || c.state != CN_SCRAM_CLIENT_WANT_SERVER_FINAL)
        abort();
    if (!sep)
        return;
    why[0] = '\0';
    if (cn_scram_client_verify(&c, sep + 1, n - n1 - 1, why, sizeof why) &&
        (c.state != CN_SCRAM_CLIENT_FAILED || !why[0]))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int sel = data[0] % 3;
    if (sel < 2) {
        scram(sel == 0 ? CN_SCRAM_SHA256 : CN_SCRAM_SHA512, data + 1,
              size - 1);
        return 0;
    }
    static struct cli_props props;
    char err[1024];
    char *text = malloc(size);
    if (!text)
        return 0;
    memcpy(text, data + 1, size - 1);
    text[size - 1] = '\0';
    err[0] = '\0';
    if (cli_props_parse(&props, text, "fuzz", NULL, err, sizeof err) &&
        !err[0])
        abort();
    free(text);
    return 0;
}
