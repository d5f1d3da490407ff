/*
 * fuzz_offsets.c - libFuzzer target for __consumer_offsets records and the
 * offsets store they are replayed into.
 *
 * Input: a sequence of records, each
 *
 *   offset  size  field
 *   0       1     flags: bit 0 value is null (tombstone), bit 1 from a
 *                 transactional batch, bits 2-3 producer id (0..3),
 *                 bit 4 end that producer's transaction afterwards,
 *                 bit 5 ... with commit (else abort), bit 6 expire the
 *                 record's group afterwards
 *   1       1     key length K
 *   2       1     value length V
 *   3       K     key bytes
 *   3+K     V     value bytes
 *
 * A short tail gives short keys and values.  Every load must return 0,
 * CN_OFFSETS_NOT_OFFSET or CN_ECORRUPT (CN_ENOMEM aside); whatever loads
 * as a plain commit must read back, encode again and load again to the
 * same value; the store's counts must agree with its walks throughout.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/err.h"
#include "base/rd.h"
#include "base/wr.h"
#include "group/offsets.h"
#include "proto/gen/offset_commit_key.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_at(int cond, int line)
{
    if (!cond) {
        fprintf(stderr, "fuzz_offsets.c:%d: check failed\n", line);
        abort();
    }
}
#define check(cond) check_at((cond), __LINE__)

struct walk {
    const struct cn_offsets *os;
    size_t n, nnull;
    const char *group;
};

static int count_key(void *arg, const char *topic, int32_t partition,
                     const struct cn_offset_value *v)
{
    struct walk *w = arg;

    check(topic != NULL && partition >= 0);
    w->n++;
    if (!v) {
        w->nnull++;
        check(cn_offsets_has_pending(w->os, w->group, topic, partition));
    }
    return 0;
}

static int check_group(void *arg, const char *group, size_t ncommitted,
                       size_t npending)
{
    const struct cn_offsets *os = arg;
    struct walk w = {os, 0, 0, group};

    check(ncommitted + npending > 0); /* empty groups are freed */
    check(cn_offsets_count(os, group) == ncommitted);
    check(cn_offsets_pending_count(os, group) == npending);
    check(cn_offsets_foreach_key(os, group, count_key, &w) == 0);
    check(w.n - w.nnull == ncommitted);
    check(w.nnull <= npending);
    return 0;
}

/* The group and topic of a key that loaded, as C strings (no NUL inside
 * by then).  Returns the partition. */
static int32_t key_names(const uint8_t *key, size_t len, char **group,
                         char **topic)
{
    struct cn_offset_commit_key k;
    struct cn_arena arena;
    struct cn_rd rd;
    int16_t version;

    cn_rd_init(&rd, key, len);
    version = cn_rd_i16(&rd);
    cn_arena_init(&arena);
    check(cn_offset_commit_key_decode(&rd, &arena, version, &k) == 0);
    *group = cn_arena_strdup(&arena, k.group);
    *topic = cn_arena_strdup(&arena, k.topic);
    check(*group && *topic);
    *group = strdup(*group);
    *topic = strdup(*topic);
    check(*group && *topic);
    cn_arena_fini(&arena);
    return k.partition;
}

static void roundtrip(const struct cn_offsets *os, const uint8_t *key,
                      size_t klen)
{
    struct cn_offset_value v, back;
    struct cn_offsets *os2;
    struct cn_wr kw, vw;
    char *group, *topic;
    int32_t partition = key_names(key, klen, &group, &topic);

    check(cn_offsets_get(os, group, topic, partition, &v) == 0);
    cn_wr_init(&kw, 0);
    cn_wr_init(&vw, 0);
    check(cn_offsets_record(&kw, &vw, group, topic, partition, &v) == 0);
    os2 = cn_offsets_new();
    check(os2 != NULL);
    check(cn_offsets_load_record(os2, kw.buf, kw.len, vw.buf, vw.len, -1,
                                 false) == 0);
    check(cn_offsets_get(os2, group, topic, partition, &back) == 0);
    check(back.offset == v.offset);
    check(back.leader_epoch == v.leader_epoch);
    check(back.commit_timestamp_ms == v.commit_timestamp_ms);
    check(back.expire_timestamp_ms == -1); /* never written */
    check(cn_bytes_eq(back.metadata, v.metadata));
    cn_offsets_free(os2);
    cn_wr_fini(&kw);
    cn_wr_fini(&vw);
    free(group);
    free(topic);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct cn_offsets *os = cn_offsets_new();
    size_t pos = 0;

    check(os != NULL);
    while (pos < size) {
        uint8_t flags = data[pos];
        size_t klen = pos + 1 < size ? data[pos + 1] : 0;
        size_t vlen = pos + 2 < size ? data[pos + 2] : 0;
        const uint8_t *key, *value;
        int64_t pid = (flags >> 2) & 3;
        bool txn = flags & 2;
        int err;

        pos = pos + 3 < size ? pos + 3 : size;
        if (klen > size - pos)
            klen = size - pos;
        key = data + pos;
        pos += klen;
        if (vlen > size - pos)
            vlen = size - pos;
        value = data + pos;
        pos += vlen;

        err = cn_offsets_load_record(os, key, klen,
                                     (flags & 1) ? NULL : value, vlen, pid,
                                     txn);
        check(err == 0 || err == CN_OFFSETS_NOT_OFFSET ||
              err == CN_ECORRUPT || err == CN_ENOMEM);
        if (err == 0 && !(flags & 1) && !txn)
            roundtrip(os, key, klen);
        if (err == 0 && (flags & 1)) {
            char *group, *topic;
            int32_t p = key_names(key, klen, &group, &topic);
            struct cn_offset_value v;
            check(cn_offsets_get(os, group, topic, p, &v) == CN_ENOTFOUND);
            check(!cn_offsets_has_pending(os, group, topic, p));
            free(group);
            free(topic);
        }
        if (err == 0 && (flags & 0x40)) {
            char *group, *topic;
            (void)key_names(key, klen, &group, &topic);
            check(cn_offsets_expire(os, group, INT64_C(1) << 40,
                                    INT64_C(1) << 30, NULL, NULL) >= 0);
            free(group);
            free(topic);
        }
        if (flags & 0x10)
            cn_offsets_txn_complete(os, pid, flags & 0x20);
        check(cn_offsets_foreach_group(os, check_group, os) == 0);
    }
    cn_offsets_free(os);
    return 0;
}
