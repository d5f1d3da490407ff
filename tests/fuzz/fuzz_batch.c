/*
 * fuzz_batch.c - libFuzzer target for record batch v2.
 *
 * The input is a Produce partition's records blob.  It goes through
 * cn_batch_validate_set with every codec reachable (1 MiB decompression
 * limit).  Each batch of a valid set is then iterated and rebuilt
 * uncompressed by the builder; the rebuilt batch must validate and hold the
 * same records.  Inputs whose size has bit 1 set get their CRCs fixed
 * first so that mutations get past the checksum.  Whatever the validator
 * says, the header parser and the record iterator also run over the raw
 * input, which must never crash.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/wr.h"
#include "proto/batch.h"
#include "proto/compress.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct cn_wr scratch; /* reused across inputs, as the broker does */

static void check_at(int cond, int line)
{
    if (!cond) {
        fprintf(stderr, "fuzz_batch.c:%d: check failed\n", line);
        abort();
    }
}
#define check(cond) check_at((cond), __LINE__)

static struct cn_batch_limits lim = {
    .max_batch_bytes = 1 << 20,
    .max_uncompressed_bytes = 1 << 20,
};

/* Rebuilds one valid batch uncompressed and checks it matches. */
static int rebuild_cb(void *arg, const uint8_t *batch, size_t len,
                      const struct cn_batch_hdr *h)
{
    struct cn_batch_params pm = CN_BATCH_PARAMS_INIT;
    struct cn_batch_builder b;
    struct cn_record_iter it;
    struct cn_record r;
    struct cn_wr out, scratch2;
    (void)arg;

    pm.base_offset = h->base_offset;
    pm.leader_epoch = h->leader_epoch;
    pm.transactional = cn_batch_is_transactional(h);
    pm.control = cn_batch_is_control(h);
    pm.log_append_time = cn_batch_is_log_append_time(h);
    pm.producer_id = h->producer_id;
    pm.producer_epoch = h->producer_epoch;
    pm.base_sequence = h->base_sequence;
    cn_batch_builder_init(&b, &pm);
    check(cn_batch_records(batch, len, lim.max_uncompressed_bytes, &scratch,
                           NULL, &it) == 0);
    int n = 0;
    while (cn_record_iter_next(&it, &r) == 1) {
        /* Headers are copied raw: they were validated already. */
        struct cn_record_header hs[8];
        struct cn_rd rd;
        int nh = 0;
        if (r.headers_raw.len > 0)
            cn_rd_init(&rd, r.headers_raw.ptr, (size_t)r.headers_raw.len);
        else
            cn_rd_init(&rd, "", 0);
        while (nh < 8 && cn_record_header_next(&rd, &hs[nh].key,
                                               &hs[nh].value) == 1)
            nh++;
        if (nh < r.header_count)
            nh = 0; /* more than 8: drop them, the rest still checks */
        int64_t ts = h->base_timestamp + r.timestamp_delta;
        cn_batch_builder_add(&b, ts, r.key, r.value, hs, nh);
        n++;
    }
    check(n == h->records_count);
    cn_wr_init(&out, 0);
    check(cn_batch_builder_finish(&b, &out) == 0);
    cn_batch_builder_fini(&b);

    struct cn_batch_hdr h2;
    struct cn_batch_limits l2 = lim;
    l2.allow_control = true;
    l2.max_batch_bytes = 0;
    l2.max_uncompressed_bytes = 0;
    cn_wr_init(&scratch2, 0);
    check(cn_batch_validate(out.buf, out.len, &l2, &h2, &scratch2) == 0);
    check(h2.records_count == h->records_count);
    check(h2.base_offset == h->base_offset);
    check(h2.max_timestamp <= h->max_timestamp ||
          cn_batch_is_log_append_time(h));
    cn_wr_fini(&scratch2);
    cn_wr_fini(&out);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct cn_batch_hdr h;
    struct cn_record_iter it;
    struct cn_record r;

    /* Half the inputs get their CRCs fixed first, so mutations reach the
     * record parser instead of all dying at the checksum. */
    uint8_t *copy = malloc(size ? size : 1);
    memcpy(copy, data, size);
    if (size & 2) {
        size_t off = 0;
        while (cn_batch_hdr_parse(copy + off, size - off, &h) == 0) {
            size_t bs = cn_batch_size(&h);
            uint32_t crc = cn_batch_compute_crc(copy + off, bs);
            copy[off + 17] = (uint8_t)(crc >> 24);
            copy[off + 18] = (uint8_t)(crc >> 16);
            copy[off + 19] = (uint8_t)(crc >> 8);
            copy[off + 20] = (uint8_t)crc;
            off += bs;
        }
    }
    lim.allow_control = size & 1;
    int n = cn_batch_validate_set(copy, size, &lim, &scratch, rebuild_cb,
                                  NULL);
    free(copy);
    check(n != 0);
    check(n > 0 || n == CN_ECORRUPT || n == CN_EINVAL || n == CN_ETOOBIG ||
          n == CN_EUNSUPPORTED);

    /* Unvalidated iteration of the first batch must be memory-safe. */
    if (cn_batch_records(data, size, 1 << 20, &scratch, &h, &it) == 0) {
        int k = 0;
        while (cn_record_iter_next(&it, &r) == 1)
            k++;
        check(k <= (h.records_count > 0 ? h.records_count : 0));
    }
    return 0;
}
