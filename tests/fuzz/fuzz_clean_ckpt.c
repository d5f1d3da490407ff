/*
 * fuzz_clean_ckpt.c - libFuzzer target for the cleaner-offset-checkpoint
 * decoder (src/log/log_clean.c), the one file of the cleaner read back
 * from disk: whatever parses must format and parse again to the same
 * entries, and format to the same bytes a second time.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/wr.h"
#include "log/log_clean.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_at(int cond, int line)
{
    if (!cond) {
        fprintf(stderr, "fuzz_clean_ckpt.c:%d: check failed\n", line);
        abort();
    }
}
#define check(c) check_at((c) != 0, __LINE__)

static bool same(const struct cn_clean_ckpt_entry *a,
                 const struct cn_clean_ckpt_entry *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(a[i].topic, b[i].topic) ||
            a[i].partition != b[i].partition || a[i].offset != b[i].offset)
            return false;
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static bool hushed;
    if (!hushed) {
        cn_corrupt_hush();
        hushed = true;
    }
    struct cn_clean_ckpt_entry *e, *e2;
    size_t n, n2;
    int rc = cn_clean_ckpt_parse((const char *)data, size, &e, &n);
    check(rc == 0 || rc == CN_ECORRUPT || rc == CN_ENOMEM);
    if (rc)
        return 0;
    struct cn_wr w1, w2;
    cn_wr_init(&w1, 64);
    cn_wr_init(&w2, 64);
    check(cn_clean_ckpt_format(e, n, &w1) == 0);
    check(cn_clean_ckpt_parse((const char *)w1.buf, w1.len, &e2, &n2) == 0);
    check(n2 == n && same(e, e2, n));
    check(cn_clean_ckpt_format(e2, n2, &w2) == 0);
    check(w1.len == w2.len && !memcmp(w1.buf, w2.buf, w1.len));
    cn_wr_fini(&w1);
    cn_wr_fini(&w2);
    free(e);
    free(e2);
    return 0;
}
