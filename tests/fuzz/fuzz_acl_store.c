/*
 * fuzz_acl_store.c - libFuzzer target for the ACL store image (acl.h).
 *
 * Any bytes either fail to decode, with nothing left allocated, or decode
 * to a set whose encoding decodes again to the same encoding.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "acl/acl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct cn_acl_set s, s2;
    cn_acl_set_init(&s);
    if (cn_acl_decode(data, size, &s) != 0) {
        if (s.n || s.v)
            abort(); /* a refused image leaves nothing behind */
        return 0;
    }
    uint8_t *p, *p2;
    size_t n, n2;
    if (cn_acl_encode(&s, &p, &n) != 0)
        abort();
    cn_acl_set_init(&s2);
    if (cn_acl_decode(p, n, &s2) != 0 || cn_acl_encode(&s2, &p2, &n2) != 0 ||
        n2 != n || memcmp(p, p2, n) != 0)
        abort(); /* our own image must round-trip */
    free(p);
    free(p2);
    cn_acl_set_fini(&s);
    cn_acl_set_fini(&s2);
    return 0;
}
