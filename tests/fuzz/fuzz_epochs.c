/*
 * fuzz_epochs.c - libFuzzer target for the leader-epoch-checkpoint parser
 * (src/partition/epochs.c), a file read back from disk at every open:
 * whatever parses is a monotonic cache that formats and parses again to
 * the same entries and the same bytes.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/wr.h"
#include "partition/epochs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_at(int cond, int line)
{
    if (!cond) {
        fprintf(stderr, "fuzz_epochs.c:%d: check failed\n", line);
        abort();
    }
}
#define check(c) check_at((c) != 0, __LINE__)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct cn_epochs *e = cn_epochs_new_empty("/nonexistent");
    struct cn_epochs *e2 = cn_epochs_new_empty("/nonexistent");
    check(e && e2);
    int rc = cn_epochs_parse(e, data, size);
    check(rc == 0 || rc == CN_ECORRUPT || rc == CN_ENOMEM);
    if (rc == 0) {
        /* Epochs increase, start offsets do not decrease. */
        for (size_t i = 1; i < cn_epochs_count(e); i++) {
            int32_t a, b;
            int64_t sa, sb;
            cn_epochs_entry(e, i - 1, &a, &sa);
            cn_epochs_entry(e, i, &b, &sb);
            check(a < b && sa < sb);
        }
        struct cn_wr w1, w2;
        cn_wr_init(&w1, 64);
        cn_wr_init(&w2, 64);
        check(cn_epochs_format(e, &w1) == 0);
        check(cn_epochs_parse(e2, w1.buf, w1.len) == 0);
        check(cn_epochs_count(e2) == cn_epochs_count(e));
        check(cn_epochs_format(e2, &w2) == 0);
        check(w1.len == w2.len && !memcmp(w1.buf, w2.buf, w1.len));
        cn_wr_fini(&w1);
        cn_wr_fini(&w2);
    }
    cn_epochs_free(e);
    cn_epochs_free(e2);
    return 0;
}
