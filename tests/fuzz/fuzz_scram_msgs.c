/*
 * fuzz_scram_msgs.c - libFuzzer target for the KIP-554 codecs
 * (proto/scram_msgs.h).
 *
 * Input:
 *
 *   offset  size  field
 *   0       1     selector % 4: 0 DescribeUserScramCredentials request,
 *                 1 its response, 2 AlterUserScramCredentials request,
 *                 3 its response
 *   1       ...   the message body
 *
 * A decode either fails or succeeds; on success the message is encoded
 * again and that encoding must decode to the same bytes once more (the
 * codec is its own inverse on what it accepts).  Nothing may crash or read
 * out of bounds.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/rd.h"
#include "base/wr.h"
#include "proto/scram_msgs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Decodes p as sel, encodes it into out; 0 when it decoded. */
static int one(int sel, const uint8_t *p, size_t n, struct cn_arena *a,
               struct cn_wr *out)
{
    struct cn_rd rd;
    cn_rd_init(&rd, p, n);
    union {
        struct cn_describe_scram_req dq;
        struct cn_describe_scram_resp ds;
        struct cn_alter_scram_req aq;
        struct cn_alter_scram_resp as;
    } m;
    memset(&m, 0, sizeof m);
    int rc;
    switch (sel) {
    case 0:
        if (!(rc = cn_describe_scram_req_decode(&rd, a, &m.dq)))
            cn_describe_scram_req_encode(out, &m.dq);
        break;
    case 1:
        if (!(rc = cn_describe_scram_resp_decode(&rd, a, &m.ds)))
            cn_describe_scram_resp_encode(out, &m.ds);
        break;
    case 2:
        if (!(rc = cn_alter_scram_req_decode(&rd, a, &m.aq)))
            cn_alter_scram_req_encode(out, &m.aq);
        break;
    default:
        if (!(rc = cn_alter_scram_resp_decode(&rd, a, &m.as)))
            cn_alter_scram_resp_encode(out, &m.as);
        break;
    }
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int sel = data[0] % 4;
    struct cn_arena a1, a2;
    struct cn_wr w1, w2;
    cn_arena_init(&a1);
    cn_arena_init(&a2);
    cn_wr_init(&w1, 0);
    cn_wr_init(&w2, 0);
    if (one(sel, data + 1, size - 1, &a1, &w1) == 0 && !w1.err) {
        if (one(sel, w1.buf, w1.len, &a2, &w2) != 0 || w2.len != w1.len ||
            (w1.len && memcmp(w1.buf, w2.buf, w1.len)))
            abort();
    }
    cn_wr_fini(&w1);
    cn_wr_fini(&w2);
    cn_arena_fini(&a1);
    cn_arena_fini(&a2);
    return 0;
}
