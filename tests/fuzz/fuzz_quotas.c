/*
 * fuzz_quotas.c - libFuzzer target for the hand-written client-quota
 * codecs (src/proto/quotas.c) and the quota store image (broker's
 * <log.dirs>/client-quotas, cn_quota_store_decode).
 *
 * Input:
 *
 *   offset  size  field
 *   0       1     selector % 6: DescribeClientQuotas request, response,
 *                 AlterClientQuotas request, response, ClientQuotaRecord,
 *                 store image
 *   1       1     version (bit 0) for the API messages
 *   2       ...   the bytes
 *
 * A message that decodes is encoded again and decoded once more; the second
 * encoding must equal the first (decode then encode normalises).  Nothing
 * may crash or read out of bounds.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/rd.h"
#include "base/wr.h"
#include "quota/quota_store.h"
#include "proto/quotas.h"
#include "quota/quota.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FIXED_POINT(type, dec, enc)                                          \
    do {                                                                     \
        type m1, m2;                                                         \
        cn_rd_init(&rd, p, n);                                               \
        if (dec(&rd, &a, v, &m1) != 0)                                       \
            break;                                                           \
        enc(&w1, v, &m1);                                                    \
        if (w1.err)                                                          \
            break;                                                           \
        cn_rd_init(&rd, w1.len ? w1.buf : p, w1.len);                        \
        if (dec(&rd, &a, v, &m2) != 0 || cn_rd_left(&rd) != 0)               \
            abort();                                                         \
        enc(&w2, v, &m2);                                                    \
        if (w2.len != w1.len || (w1.len && memcmp(w1.buf, w2.buf, w1.len))) \
            abort();                                                         \
    } while (0)

static int rec_dec(struct cn_rd *rd, struct cn_arena *a, int16_t v,
                   struct cn_client_quota_record *out)
{
    (void)v;
    return cn_client_quota_record_decode(rd, a, out);
}

static void rec_enc(struct cn_wr *wr, int16_t v,
                    const struct cn_client_quota_record *in)
{
    (void)v;
    cn_client_quota_record_encode(wr, in);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    int sel = data[0] % 6;
    int16_t v = data[1] & 1;
    const uint8_t *p = data + 2;
    size_t n = size - 2;
    struct cn_arena a;
    struct cn_wr w1, w2;
    struct cn_rd rd;
    cn_arena_init(&a);
    cn_wr_init(&w1, 0);
    cn_wr_init(&w2, 0);
    switch (sel) {
    case 0:
        FIXED_POINT(struct cn_describe_client_quotas_request,
                    cn_dcq_request_decode, cn_dcq_request_encode);
        break;
    case 1:
        FIXED_POINT(struct cn_describe_client_quotas_response,
                    cn_dcq_response_decode, cn_dcq_response_encode);
        break;
    case 2:
        FIXED_POINT(struct cn_alter_client_quotas_request,
                    cn_acq_request_decode, cn_acq_request_encode);
        break;
    case 3:
        FIXED_POINT(struct cn_alter_client_quotas_response,
                    cn_acq_response_decode, cn_acq_response_encode);
        break;
    case 4:
        FIXED_POINT(struct cn_client_quota_record, rec_dec, rec_enc);
        break;
    default: {
        struct cn_quota_cfg cfg = {.window_num = 11, .window_ms = 1000};
        struct cn_quota *q = NULL;
        if (cn_quota_new(&cfg, &q) != 0)
            abort();
        if (cn_quota_store_decode(p, n, q) == 0) {
            /* What loaded must encode and load to the same image. */
            uint8_t *img = NULL;
            size_t len = 0;
            if (cn_quota_store_encode(q, &img, &len) == 0) {
                struct cn_quota *q2 = NULL;
                if (cn_quota_new(&cfg, &q2) != 0 ||
                    cn_quota_store_decode(img, len, q2) != 0 ||
                    cn_quota_count(q2) != cn_quota_count(q))
                    abort();
                cn_quota_free(q2);
            }
            free(img);
        }
        cn_quota_free(q);
    }
    }
    cn_wr_fini(&w1);
    cn_wr_fini(&w2);
    cn_arena_fini(&a);
    return 0;
}
