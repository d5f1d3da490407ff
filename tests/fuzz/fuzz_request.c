/*
 * fuzz_request.c - libFuzzer target for request frames.
 *
 * The input is a frame body (what follows the int32 size): request header,
 * then the body for a known key and version, decoded through the API table.
 * A body that decodes is encoded again and decoded once more: the second
 * decode must succeed and re-encode to the same bytes, since decode followed
 * by encode normalises a frame (unknown tags dropped, defaults left out).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/rd.h"
#include "base/wr.h"
#include "proto/gen/api.h"
#include "proto/header.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct cn_rd rd;
    struct cn_req_header h;
    struct cn_arena a;
    struct cn_wr w1, w2;

    cn_rd_init(&rd, data, size);
    if (cn_req_header_decode(&rd, &h) != 0)
        return 0;
    const struct cn_api_info *api = cn_api_find(h.api_key);
    if (!api)
        abort(); /* the header said the key was known */

    cn_arena_init(&a);
    void *m = cn_arena_alloc(&a, api->request_size);
    if (!m || api->decode_request(&rd, &a, h.api_version, m) != 0) {
        cn_arena_fini(&a);
        return 0;
    }
    cn_wr_init(&w1, 0);
    cn_wr_init(&w2, 0);
    api->encode_request(&w1, h.api_version, m);
    if (!w1.err) {
        void *m2 = cn_arena_alloc(&a, api->request_size);
        struct cn_rd rd2;
        /* An empty body leaves buf NULL; NULL + 0 is undefined. */
        cn_rd_init(&rd2, w1.len ? w1.buf : data, w1.len);
        if (!m2 || api->decode_request(&rd2, &a, h.api_version, m2) != 0 ||
            cn_rd_left(&rd2) != 0)
            abort(); /* our own encoding must decode */
        api->encode_request(&w2, h.api_version, m2);
        if (w2.err || w2.len != w1.len ||
            (w1.len && memcmp(w1.buf, w2.buf, w1.len)))
            abort(); /* encode(decode(x)) must be a fixed point */
    }
    cn_wr_fini(&w1);
    cn_wr_fini(&w2);
    cn_arena_fini(&a);
    return 0;
}
