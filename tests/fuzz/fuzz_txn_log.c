/*
 * fuzz_txn_log.c - libFuzzer target for __transaction_state records.
 *
 * Input layout: byte 0 holds the key length in its low 7 bits and, in its
 * top bit, whether the value is null (a tombstone); the key bytes follow,
 * then the value is everything after them.  A too-short input gives a
 * short key.  Whatever decodes is encoded again and must decode to the
 * same metadata (a Dead value comes back as a tombstone).  The partition
 * hash also runs over the raw input, which must never crash.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/wr.h"
#include "txn/txn_log.h"
#include "txn/txn_state.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_at(int cond, int line)
{
    if (!cond) {
        fprintf(stderr, "fuzz_txn_log.c:%d: check failed\n", line);
        abort();
    }
}
#define check(cond) check_at((cond), __LINE__)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct cn_txn_meta m, back;
    struct cn_bytes key, value;
    struct cn_wr k, v;
    size_t klen;
    bool tomb, tomb2;
    int err;

    if (size == 0)
        return 0;
    check(cn_txn_partition_for(data, size, 50) < 50);
    klen = data[0] & 0x7f;
    if (klen > size - 1)
        klen = size - 1;
    key = cn_bytes_of(data + 1, (int32_t)klen);
    if (data[0] & 0x80)
        value = CN_BYTES_NULL;
    else
        value = cn_bytes_of(data + 1 + klen, (int32_t)(size - 1 - klen));

    err = cn_txn_log_decode(key, value, &m, &tomb);
    if (err) {
        check(err == CN_ECORRUPT || err == CN_ENOMEM);
        return 0;
    }
    check(tomb == (value.len < 0));
    check(m.transactional_id != NULL);
    check(cn_txn_state_valid((int)m.state));
    for (size_t i = 0; i < m.npartitions; i++) {
        check(m.partitions[i].partition >= 0);
        if (i > 0) { /* a set: strictly increasing */
            int c = strcmp(m.partitions[i - 1].topic, m.partitions[i].topic);
            check(c < 0 || (c == 0 && m.partitions[i - 1].partition <
                                          m.partitions[i].partition));
        }
    }

    cn_wr_init(&k, 0);
    cn_wr_init(&v, 0);
    check(cn_txn_log_encode(&m, &k, &v, &tomb2) == 0);
    check(tomb2 == (m.state == CN_TXN_DEAD));
    err = cn_txn_log_decode(cn_bytes_of(k.buf, (int32_t)k.len),
                            tomb2 ? CN_BYTES_NULL
                                  : cn_bytes_of(v.buf, (int32_t)v.len),
                            &back, &tomb2);
    check(err == 0);
    if (m.state != CN_TXN_DEAD || tomb)
        check(cn_txn_meta_eq(&m, &back));
    else
        check(back.state == CN_TXN_DEAD && tomb2);
    cn_txn_meta_fini(&back);
    cn_txn_meta_fini(&m);
    cn_wr_fini(&k);
    cn_wr_fini(&v);
    return 0;
}
