/* header.c - request and response headers; see header.h. */
#include "header.h"

#include "base/err.h"
#include "gen/api.h"
#include "quotas.h"
#include "scram_msgs.h"

const struct cn_api_info *cn_api_find(int16_t api_key)
{
    const struct cn_api_info *a = cn_api_info_get(api_key);
    if (a)
        return a;
    /* The APIs whose codecs are hand-written (no schema in
     * ../shared/kafka-protocol/messages). */
    for (size_t i = 0; i < sizeof cn_quota_api_infos /
                               sizeof cn_quota_api_infos[0]; i++)
        if (cn_quota_api_infos[i].api_key == api_key)
            return &cn_quota_api_infos[i];
    for (size_t i = 0; i < sizeof cn_scram_api_infos /
                               sizeof cn_scram_api_infos[0]; i++)
        if (cn_scram_api_infos[i].api_key == api_key)
            return &cn_scram_api_infos[i];
    return NULL;
}

/* 1 flexible, 0 not, -1 not a hand-written API version. */
static int hand_flexible(int16_t key, int16_t version)
{
    if (cn_api_info_get(key))
        return -1;
    const struct cn_api_info *a = cn_api_find(key);
    if (!a || version < a->min_version || version > a->max_version)
        return -1;
    return a->flexible_min >= 0 && version >= a->flexible_min;
}

int cn_resp_header_version(int16_t api_key, int16_t api_version)
{
    int hf = hand_flexible(api_key, api_version);
    return hf >= 0 ? hf : cn_api_response_header_version(api_key, api_version);
}

bool cn_resp_throttle_first(int16_t api_key, int16_t api_version)
{
    /* Every hand-written response (client quotas, SCRAM credentials)
     * starts with ThrottleTimeMs in all its versions. */
    int hf = hand_flexible(api_key, api_version);
    return hf >= 0 || cn_api_throttle_first(api_key, api_version);
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
    int hf = hand_flexible(out->api_key, out->api_version);
    if (hf < 0 && !cn_api_version_ok(out->api_key, out->api_version))
        return CN_REQ_HDR_UNKNOWN;
    if (hf > 0 || (hf < 0 && cn_api_request_header_version(
                                 out->api_key, out->api_version) >= 2))
        cn_rd_skip_tags(rd);
    return rd->err;
}

void cn_req_header_encode(struct cn_wr *wr, const struct cn_req_header *h)
{
    cn_wr_i16(wr, h->api_key);
    cn_wr_i16(wr, h->api_version);
    cn_wr_i32(wr, h->correlation_id);
    cn_wr_str(wr, false, h->client_id);
    int hf = hand_flexible(h->api_key, h->api_version);
    if (hf > 0 || (hf < 0 && cn_api_request_header_version(
                                 h->api_key, h->api_version) >= 2))
        cn_wr_empty_tags(wr);
}

void cn_resp_header_encode(struct cn_wr *wr, int16_t api_key,
                           int16_t api_version, int32_t correlation_id)
{
    cn_wr_i32(wr, correlation_id);
    if (cn_resp_header_version(api_key, api_version) >= 1)
        cn_wr_empty_tags(wr);
}
