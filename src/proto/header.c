/* header.c - request and response headers; see header.h. */
#include "header.h"

#include "base/err.h"
#include "gen/api.h"

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
    if (!cn_api_version_ok(out->api_key, out->api_version))
        return CN_REQ_HDR_UNKNOWN;
    if (cn_api_request_header_version(out->api_key, out->api_version) >= 2)
        cn_rd_skip_tags(rd);
    return rd->err;
}

void cn_req_header_encode(struct cn_wr *wr, const struct cn_req_header *h)
{
    cn_wr_i16(wr, h->api_key);
    cn_wr_i16(wr, h->api_version);
    cn_wr_i32(wr, h->correlation_id);
    cn_wr_str(wr, false, h->client_id);
    if (cn_api_request_header_version(h->api_key, h->api_version) >= 2)
        cn_wr_empty_tags(wr);
}

void cn_resp_header_encode(struct cn_wr *wr, int16_t api_key,
                           int16_t api_version, int32_t correlation_id)
{
    cn_wr_i32(wr, correlation_id);
    if (cn_api_response_header_version(api_key, api_version) >= 1)
        cn_wr_empty_tags(wr);
}
