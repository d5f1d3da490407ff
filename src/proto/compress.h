/*
 * compress.h - Kafka's compression codecs for record batch payloads.
 *
 * The codec is bits 0-2 of a batch's attributes.  Decoding accepts what real
 * clients send: gzip (one or more gzip members), snappy either raw (as
 * librdkafka writes it) or in xerial framing (as the Java client writes it),
 * the LZ4 frame format, and zstd frames.  Encoding writes gzip, raw snappy,
 * an LZ4 frame with independent blocks, and a zstd frame.
 */
#ifndef CN_PROTO_COMPRESS_H
#define CN_PROTO_COMPRESS_H

#include <stddef.h>
#include <stdint.h>

#include "base/wr.h"

enum {
    CN_CODEC_NONE = 0,
    CN_CODEC_GZIP = 1,
    CN_CODEC_SNAPPY = 2,
    CN_CODEC_LZ4 = 3,
    CN_CODEC_ZSTD = 4,
    CN_CODEC_MAX = 4, /* highest defined value; 5..7 are unknown */
};

/* "none", "gzip", ... or "unknown". */
const char *cn_codec_name(int codec);

/*
 * Appends the decompressed form of in[0..in_len) to out.  Output beyond
 * max_out bytes fails with CN_ETOOBIG without producing much more than that,
 * which guards against decompression bombs.  Bad or truncated input fails
 * with CN_ECORRUPT, an unknown codec with CN_EUNSUPPORTED, allocation with
 * CN_ENOMEM.  On failure out->len is back where it was.  CN_CODEC_NONE
 * copies.  Runs on: any thread.
 */
int cn_decompress(int codec, const uint8_t *in, size_t in_len, size_t max_out,
                  struct cn_wr *out);

/*
 * Appends in[0..len) compressed with codec to out.  Returns 0, CN_ENOMEM,
 * CN_EUNSUPPORTED for an unknown codec, or CN_EINVAL if the library refused.
 */
int cn_compress(int codec, const uint8_t *in, size_t len, struct cn_wr *out);

/* The library's own default level, whatever the codec. */
#define CN_LEVEL_DEFAULT INT32_MIN

/*
 * cn_compress at a level (KIP-390): gzip 1..9, lz4 1..17 (3 and up is
 * LZ4HC), zstd as libzstd takes it; ignored by none and snappy.  The caller
 * checks the range (config does).
 */
int cn_compress_level(int codec, int level, const uint8_t *in, size_t len,
                      struct cn_wr *out);

#endif
