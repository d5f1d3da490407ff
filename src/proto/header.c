/* header.c - request and response headers; see header.h. */
#include "header.h"

#include "base/err.h"
#include "gen/api.h"

/* APIs whose codecs are written by hand (no generated schema): key,
 * versions; every version is flexible (header v2, response header v1). */
static const struct {
    int16_t key, min, max;
} hand_apis[] = {
    {50, 0, 0}, /* DescribeUserScramCredentials, proto/scram_msgs.h */
    {51, 0, 0}, /* AlterUserScramCredentials */
};

static bool hand_api(int16_t key, int16_t version)
{
    for (size_t i = 0; i < sizeof hand_apis / sizeof hand_apis[0]; i++)
        if (hand_apis[i].key == key)
            return version >= hand_apis[i].min &&
                   version <= hand_apis[i].max;
    return false;
}

int cn_req_header_decode(struct cn_rd *rd, struct cn_req_header *out)
{
    out->api_key = cn_rd_i16(rd);
    out->api_version = cn_rd_i16(rd);
    out->correlation_id = cn_rd_i32(rd);
    out->client_id = CN_BYTES_NULL;
    if (rd->err)
        return rd->err;
    /* client_id stays a classic int16 string even in header v2, so it can
     * be read before we know whether the version is one we serve. */
    out->client_id = cn_rd_str(rd, false);
    if (rd->err)
        return rd->err;
    bool hand = hand_api(out->api_key, out->api_version);
    if (!hand && !cn_api_version_ok(out->api_key, out->api_version))
        return CN_REQ_HDR_UNKNOWN;
    if (hand ||
        cn_api_request_header_version(out->api_key, out->api_version) >= 2)
        cn_rd_skip_tags(rd);
    return rd->err;
}

void cn_req_header_encode(struct cn_wr *wr, const struct cn_req_header *h)
{
    cn_wr_i16(wr, h->api_key);
    cn_wr_i16(wr, h->api_version);
    cn_wr_i32(wr, h->correlation_id);
    cn_wr_str(wr, false, h->client_id);
    if (hand_api(h->api_key, h->api_version) ||
        cn_api_request_header_version(h->api_key, h->api_version) >= 2)
        cn_wr_empty_tags(wr);
}

void cn_resp_header_encode(struct cn_wr *wr, int16_t api_key,
                           int16_t api_version, int32_t correlation_id)
{
    cn_wr_i32(wr, correlation_id);
    if (hand_api(api_key, api_version) ||
        cn_api_response_header_version(api_key, api_version) >= 1)
        cn_wr_empty_tags(wr);
}
