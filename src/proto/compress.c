/*
 * compress.c - gzip, snappy, lz4 and zstd glue; see compress.h.
 *
 * Every decoder writes straight into the caller's cn_wr and is never given
 * room for more than max_out + 1 bytes in total: producing that one extra
 * byte is how an over-limit payload is noticed without inflating it all.
 *
 * xerial snappy framing (Java client):
 *   0   8  magic 0x82 'S' 'N' 'A' 'P' 'P' 'Y' 0x00
 *   8   4  version (int32, 1)
 *   12  4  minimum compatible version (int32, 1)
 *   16  ...blocks: int32 big-endian length, then that many bytes of raw
 *          snappy
 */
#include "compress.h"

#include <limits.h>
#include <lz4frame.h>
#include <snappy-c.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>
#include <zstd_errors.h>

#include "base/err.h"

#define MIN_GROW (64 * 1024) /* first output chunk when the size is unknown */
#define MAX_FIRST_GROW (4 << 20) /* cap on the guess from the input size */

const char *cn_codec_name(int codec)
{
    switch (codec) {
    case CN_CODEC_NONE: return "none";
    case CN_CODEC_GZIP: return "gzip";
    case CN_CODEC_SNAPPY: return "snappy";
    case CN_CODEC_LZ4: return "lz4";
    case CN_CODEC_ZSTD: return "zstd";
    default: return "unknown";
    }
}

/* Output state shared by the decoders. */
struct sink {
    struct cn_wr *out; /* destination */
    size_t start;      /* out->len on entry */
    size_t max_out;    /* limit on bytes appended */
};

static size_t sink_produced(const struct sink *s)
{
    return s->out->len - s->start;
}

/*
 * Makes room at out->buf + out->len and returns how much may be written: at
 * least one byte, never past max_out + 1 produced in total.  Returns 0 only
 * on allocation failure.
 */
static size_t sink_room(struct sink *s, size_t hint)
{
    size_t produced = sink_produced(s);
    size_t cap_left = s->max_out + 1 - produced;
    size_t want = hint > MIN_GROW ? hint : MIN_GROW;
    if (want > MAX_FIRST_GROW)
        want = MAX_FIRST_GROW; /* a large input may still be a lie */
    if (want < produced)
        want = produced; /* double as we go */
    if (want > cap_left)
        want = cap_left;
    if (!cn_wr_ensure(s->out, want))
        return 0;
    size_t room = s->out->cap - s->out->len;
    return room < cap_left ? room : cap_left;
}

static int sink_fail(struct sink *s, int rc)
{
    s->out->len = s->start;
    return rc;
}

static int gzip_decompress(struct sink *s, const uint8_t *in, size_t in_len)
{
    z_stream zs;
    int rc = 0;

    if (in_len > UINT_MAX)
        return CN_ETOOBIG;
    memset(&zs, 0, sizeof zs);
    if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK)
        return CN_ENOMEM;
    zs.next_in = (Bytef *)(uintptr_t)in;
    zs.avail_in = (uInt)in_len;
    for (;;) {
        size_t room = sink_room(s, in_len * 4);
        if (!room) {
            rc = CN_ENOMEM;
            break;
        }
        if (room > UINT_MAX)
            room = UINT_MAX;
        zs.next_out = s->out->buf + s->out->len;
        zs.avail_out = (uInt)room;
        int r = inflate(&zs, Z_NO_FLUSH);
        s->out->len += room - zs.avail_out;
        if (sink_produced(s) > s->max_out) {
            rc = CN_ETOOBIG;
            break;
        }
        if (r == Z_OK)
            continue;
        if (r == Z_STREAM_END) {
            if (zs.avail_in == 0)
                break;
            /* Another gzip member may follow (gzip -c a b > c). */
            if (zs.avail_in >= 2 && zs.next_in[0] == 0x1f &&
                zs.next_in[1] == 0x8b && inflateReset(&zs) == Z_OK)
                continue;
            rc = CN_ECORRUPT;
            break;
        }
        /* Z_BUF_ERROR here means input ran out mid-stream. */
        rc = r == Z_MEM_ERROR ? CN_ENOMEM : CN_ECORRUPT;
        break;
    }
    inflateEnd(&zs);
    return rc;
}

static int snappy_raw(struct sink *s, const uint8_t *in, size_t in_len)
{
    size_t ulen;
    if (snappy_uncompressed_length((const char *)in, in_len, &ulen) !=
        SNAPPY_OK)
        return CN_ECORRUPT;
    if (ulen > s->max_out - sink_produced(s))
        return CN_ETOOBIG;
    if (!cn_wr_ensure(s->out, ulen))
        return CN_ENOMEM;
    size_t got = ulen;
    if (snappy_uncompress((const char *)in, in_len,
                          (char *)s->out->buf + s->out->len,
                          &got) != SNAPPY_OK || got != ulen)
        return CN_ECORRUPT;
    s->out->len += got;
    return 0;
}

static const uint8_t xerial_magic[8] = {0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0};

static int snappy_decompress(struct sink *s, const uint8_t *in, size_t in_len)
{
    if (in_len < 16 || memcmp(in, xerial_magic, 8) != 0)
        return snappy_raw(s, in, in_len);
    size_t pos = 16;
    while (pos < in_len) {
        if (in_len - pos < 4)
            return CN_ECORRUPT;
        uint32_t blen = ((uint32_t)in[pos] << 24) |
                        ((uint32_t)in[pos + 1] << 16) |
                        ((uint32_t)in[pos + 2] << 8) | in[pos + 3];
        pos += 4;
        if (blen > in_len - pos)
            return CN_ECORRUPT;
        int rc = snappy_raw(s, in + pos, blen);
        if (rc)
            return rc;
        pos += blen;
    }
    return 0;
}

static int lz4_decompress(struct sink *s, const uint8_t *in, size_t in_len)
{
    LZ4F_dctx *d;
    int rc = 0;

    if (LZ4F_isError(LZ4F_createDecompressionContext(&d, LZ4F_VERSION)))
        return CN_ENOMEM;
    for (;;) {
        size_t room = sink_room(s, in_len * 4);
        if (!room) {
            rc = CN_ENOMEM;
            break;
        }
        size_t dst = room, src = in_len;
        size_t hint = LZ4F_decompress(d, s->out->buf + s->out->len, &dst,
                                      in, &src, NULL);
        if (LZ4F_isError(hint)) {
            rc = CN_ECORRUPT;
            break;
        }
        in += src;
        in_len -= src;
        s->out->len += dst;
        if (sink_produced(s) > s->max_out) {
            rc = CN_ETOOBIG;
            break;
        }
        /* hint 0: a frame ended; another may follow in the input. */
        if (hint == 0 && in_len == 0)
            break;
        if (dst == 0 && src == 0) {
            rc = CN_ECORRUPT; /* truncated: no progress possible */
            break;
        }
    }
    LZ4F_freeDecompressionContext(d);
    return rc;
}

static int zstd_decompress(struct sink *s, const uint8_t *in, size_t in_len)
{
    ZSTD_DCtx *d = ZSTD_createDCtx();
    ZSTD_inBuffer ib = {in, in_len, 0};
    int rc = 0;

    if (!d)
        return CN_ENOMEM;
    for (;;) {
        size_t room = sink_room(s, in_len * 4);
        if (!room) {
            rc = CN_ENOMEM;
            break;
        }
        ZSTD_outBuffer ob = {s->out->buf + s->out->len, room, 0};
        size_t in_before = ib.pos;
        size_t r = ZSTD_decompressStream(d, &ob, &ib);
        if (ZSTD_isError(r)) {
            rc = ZSTD_getErrorCode(r) == ZSTD_error_memory_allocation
                     ? CN_ENOMEM
                     : CN_ECORRUPT;
            break;
        }
        s->out->len += ob.pos;
        if (sink_produced(s) > s->max_out) {
            rc = CN_ETOOBIG;
            break;
        }
        if (r == 0 && ib.pos == ib.size)
            break;
        if (ob.pos == 0 && ib.pos == in_before) {
            rc = CN_ECORRUPT; /* truncated */
            break;
        }
    }
    ZSTD_freeDCtx(d);
    return rc;
}

int cn_decompress(int codec, const uint8_t *in, size_t in_len, size_t max_out,
                  struct cn_wr *out)
{
    struct sink s = {out, out->len, max_out < SIZE_MAX ? max_out
                                                       : SIZE_MAX - 1};
    int rc;

    if (out->err)
        return CN_ENOMEM;
    switch (codec) {
    case CN_CODEC_NONE:
        if (in_len > s.max_out)
            return CN_ETOOBIG;
        cn_wr_raw(out, in, in_len);
        rc = 0;
        break;
    case CN_CODEC_GZIP: rc = gzip_decompress(&s, in, in_len); break;
    case CN_CODEC_SNAPPY: rc = snappy_decompress(&s, in, in_len); break;
    case CN_CODEC_LZ4: rc = lz4_decompress(&s, in, in_len); break;
    case CN_CODEC_ZSTD: rc = zstd_decompress(&s, in, in_len); break;
    default: return CN_EUNSUPPORTED;
    }
    if (!rc && out->err)
        rc = CN_ENOMEM;
    if (rc) {
        out->err = 0; /* the writer stays usable after our failure */
        return sink_fail(&s, rc);
    }
    return 0;
}

static int gzip_compress(const uint8_t *in, size_t len, int level,
                         struct cn_wr *out)
{
    z_stream zs;
    int rc = 0;

    if (len > UINT_MAX)
        return CN_ETOOBIG;
    memset(&zs, 0, sizeof zs);
    if (deflateInit2(&zs,
                     level == CN_LEVEL_DEFAULT ? Z_DEFAULT_COMPRESSION : level,
                     Z_DEFLATED, 16 + MAX_WBITS, 8,
                     Z_DEFAULT_STRATEGY) != Z_OK)
        return CN_ENOMEM;
    size_t bound = deflateBound(&zs, (uLong)len);
    if (bound > UINT_MAX || !cn_wr_ensure(out, bound)) {
        rc = CN_ENOMEM;
        goto out_end;
    }
    zs.next_in = (Bytef *)(uintptr_t)in;
    zs.avail_in = (uInt)len;
    zs.next_out = out->buf + out->len;
    zs.avail_out = (uInt)bound;
    if (deflate(&zs, Z_FINISH) != Z_STREAM_END) {
        rc = CN_EINVAL;
        goto out_end;
    }
    out->len += bound - zs.avail_out;
out_end:
    deflateEnd(&zs);
    return rc;
}

static int snappy_compress_to(const uint8_t *in, size_t len,
                              struct cn_wr *out)
{
    size_t bound = snappy_max_compressed_length(len);
    if (!cn_wr_ensure(out, bound))
        return CN_ENOMEM;
    size_t got = bound;
    if (snappy_compress((const char *)in, len,
                        (char *)out->buf + out->len, &got) != SNAPPY_OK)
        return CN_EINVAL;
    out->len += got;
    return 0;
}

static int lz4_compress(const uint8_t *in, size_t len, int level,
                        struct cn_wr *out)
{
    LZ4F_preferences_t prefs;
    memset(&prefs, 0, sizeof prefs);
    /* Independent blocks: what Kafka's Java LZ4 reader expects. */
    prefs.frameInfo.blockMode = LZ4F_blockIndependent;
    /* 0 is lz4's fast default; 3 and up select LZ4HC at that level. */
    prefs.compressionLevel = level == CN_LEVEL_DEFAULT ? 0 : level;
    size_t bound = LZ4F_compressFrameBound(len, &prefs);
    if (!cn_wr_ensure(out, bound))
        return CN_ENOMEM;
    size_t got = LZ4F_compressFrame(out->buf + out->len, bound, in, len,
                                    &prefs);
    if (LZ4F_isError(got))
        return CN_EINVAL;
    out->len += got;
    return 0;
}

static int zstd_compress(const uint8_t *in, size_t len, int level,
                         struct cn_wr *out)
{
    size_t bound = ZSTD_compressBound(len);
    if (!cn_wr_ensure(out, bound))
        return CN_ENOMEM;
    size_t got = ZSTD_compress(out->buf + out->len, bound, in, len,
                               level == CN_LEVEL_DEFAULT ? ZSTD_CLEVEL_DEFAULT
                                                         : level);
    if (ZSTD_isError(got))
        return CN_EINVAL;
    out->len += got;
    return 0;
}

int cn_compress(int codec, const uint8_t *in, size_t len, struct cn_wr *out)
{
    return cn_compress_level(codec, CN_LEVEL_DEFAULT, in, len, out);
}

int cn_compress_level(int codec, int level, const uint8_t *in, size_t len,
                      struct cn_wr *out)
{
    int rc;

    if (out->err)
        return CN_ENOMEM;
    switch (codec) {
    case CN_CODEC_NONE:
        cn_wr_raw(out, in, len);
        rc = out->err ? CN_ENOMEM : 0;
        break;
    case CN_CODEC_GZIP: rc = gzip_compress(in, len, level, out); break;
    case CN_CODEC_SNAPPY: rc = snappy_compress_to(in, len, out); break;
    case CN_CODEC_LZ4: rc = lz4_compress(in, len, level, out); break;
    case CN_CODEC_ZSTD: rc = zstd_compress(in, len, level, out); break;
    default: return CN_EUNSUPPORTED;
    }
    return rc;
}
