/*
 * header.h - request and response headers.
 *
 * Request header (all integers big-endian):
 *
 *   offset  size  field            versions
 *   0       2     api_key          0+
 *   2       2     api_version      0+
 *   4       4     correlation_id   0+
 *   8       2+n   client_id        1+, int16 length, -1 null; never compact
 *   ...     1+    tagged fields    2+ (uvarint count, then tag/size/value)
 *
 * The header version follows from api_key and api_version: v2 for flexible
 * request versions, else v1 (ControlledShutdown v0's header v0 is not
 * served).  Response header: correlation_id, plus an empty tag section in
 * v1 (flexible versions; never for ApiVersions, KIP-511).
 */
#ifndef CN_PROTO_HEADER_H
#define CN_PROTO_HEADER_H

#include <stdint.h>

#include "base/bytes.h"
#include "base/rd.h"
#include "base/wr.h"

struct cn_req_header {
    int16_t api_key;          /* which API, see gen/api.h */
    int16_t api_version;      /* version of the request body */
    int32_t correlation_id;   /* echoed back in the response */
    struct cn_bytes client_id; /* view into the frame; len -1 when null */
};

/* cn_req_header_decode() result when the key or version is not one we know:
 * the header was read as v1 and the caller should answer UNSUPPORTED_VERSION
 * (ApiVersions gets a v0 response listing what we do support). */
#define CN_REQ_HDR_UNKNOWN 1

/*
 * Reads a request header from the start of a frame body.  Returns 0 when the
 * API and version are known (rd then points at the body), CN_REQ_HDR_UNKNOWN
 * when they are not (api_key, api_version and correlation_id are still set,
 * and client_id if present), or a negative CN_E* if the bytes run out before
 * the correlation id or client id.  client_id is a view into the frame.
 * Runs on: loop.
 */
int cn_req_header_decode(struct cn_rd *rd, struct cn_req_header *out);

/* Writes a request header in the version the table gives; for clients and
 * tests. */
void cn_req_header_encode(struct cn_wr *wr, const struct cn_req_header *h);

/* The API's table row: the generated table's, else a hand-written
 * codec's (DescribeClientQuotas, AlterClientQuotas: proto/quotas.h).
 * NULL when Cairn has no codec for the key. */
struct cn_api_info;
const struct cn_api_info *cn_api_find(int16_t api_key);
/* Response header version (0 or 1) for any API cn_api_find() knows. */
int cn_resp_header_version(int16_t api_key, int16_t api_version);
/* True when the response body of this key and version starts with
 * throttle_time_ms (cn_api_throttle_first, and the hand-written APIs). */
bool cn_resp_throttle_first(int16_t api_key, int16_t api_version);

/* Writes the response header for a reply to api_key/api_version. */
void cn_resp_header_encode(struct cn_wr *wr, int16_t api_key,
                           int16_t api_version, int32_t correlation_id);

#endif
