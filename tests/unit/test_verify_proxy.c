/*
 * test_verify_proxy.c - the request framing `cairnctl verify`'s proxy
 * reads (src/cli/verify_proxy.c, cn_vproxy_frame): a frame's api key and
 * length once its size and api key are in, nothing before, and a size no
 * Kafka request has is refused (the proxy then forwards untouched).  No
 * socket is opened.
 *
 * verify_proxy.c lives in src/cli (cairnctl's sources, not cairn_core),
 * so it is compiled into this test directly.
 */
#include "../../src/cli/verify_proxy.c"
#include "unit.h"

/* An EndTxn v3 request header: size 20, api key 26, version 3, ... */
static const uint8_t end_txn[] = {0, 0, 0, 20, 0, 26, 0, 3, 0, 0, 0, 7};

UNIT_TEST(test_frame_needs_size_and_key)
{
    int16_t key = -1;
    size_t len = 0;

    for (size_t n = 0; n < 6; n++)
        CHECK_EQ(cn_vproxy_frame(end_txn, n, &key, &len), 0);
    CHECK_EQ(cn_vproxy_frame(end_txn, 6, &key, &len), 1);
    CHECK_EQ(key, 26);
    CHECK_EQ(len, 24);
    CHECK_EQ(cn_vproxy_frame(end_txn, sizeof end_txn, &key, &len), 1);
    CHECK_EQ(key, 26);
}

UNIT_TEST(test_frame_produce_and_big_sizes)
{
    static const uint8_t produce[] = {0, 0x10, 0, 0, 0, 0, 0, 9};
    int16_t key = -1;
    size_t len = 0;

    CHECK_EQ(cn_vproxy_frame(produce, sizeof produce, &key, &len), 1);
    CHECK_EQ(key, 0);
    CHECK_EQ(len, (size_t)0x100000 + 4);
}

UNIT_TEST(test_frame_bad_sizes)
{
    static const uint8_t tiny[] = {0, 0, 0, 9, 0, 0};
    static const uint8_t negative[] = {0xff, 0xff, 0xff, 0xf0, 0, 0};
    static const uint8_t huge[] = {0x7f, 0, 0, 0, 0, 0};
    int16_t key;
    size_t len;

    CHECK_EQ(cn_vproxy_frame(tiny, sizeof tiny, &key, &len), -1);
    CHECK_EQ(cn_vproxy_frame(negative, sizeof negative, &key, &len), -1);
    CHECK_EQ(cn_vproxy_frame(huge, sizeof huge, &key, &len), -1);
}

UNIT_MAIN(test_frame_needs_size_and_key, test_frame_produce_and_big_sizes,
          test_frame_bad_sizes)
