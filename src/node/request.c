/*
 * request.c - what every layer that answers a request needs: wire strings,
 * the response header, the answer to a body that does not decode, and the
 * address a client should use for this broker.
 */
#include <string.h>

#include "base/say.h"
#include "node/broker_int.h"
#include "proto/gen/api.h"
#include "proto/header.h"

bool cn_wire_cstr(struct cn_bytes b, char *out, size_t out_len)
{
    if (b.len < 0 || (size_t)b.len >= out_len)
        return false;
    if (b.len)
        memcpy(out, b.ptr, (size_t)b.len);
    out[b.len] = '\0';
    return true;
}

struct cn_bytes cn_req_str(struct cn_req *req, const char *s)
{
    if (!s)
        return CN_BYTES_NULL;
    char *c = cn_arena_strdup(&req->arena, cn_bytes_str(s));
    return c ? cn_bytes_str(c) : CN_BYTES_NULL;
}

bool cn_req_on_controller_listener(const struct cn_broker *b,
                                   const struct cn_req *req)
{
    int li = cn_req_listener(req);
    return li >= 0 && li == b->cfg->controller_listener;
}

void cn_resp_begin(struct cn_req *req, const struct cn_req_header *h)
{
    cn_resp_header_encode(&req->resp, h->api_key, h->api_version,
                          h->correlation_id);
}

void cn_req_bad(struct cn_req *req, const struct cn_req_header *h, int err)
{
    CN_WARN("closing %s: malformed %s v%d request (%s)", cn_req_peer(req),
            cn_api_find(h->api_key) ? cn_api_find(h->api_key)->name : "?",
            h->api_version, cn_strerror(err));
    cn_req_close_conn(req);
    req->no_response = true;
    cn_req_done(req);
}

void cn_broker_advertised(const struct cn_broker *b, const struct cn_req *req,
                          const char **host, int *port)
{
    int i = cn_req_listener(req);
    if (i < 0 || i >= b->nservers) {
        *host = b->adv_host;
        *port = b->adv_port;
        return;
    }
    *host = b->adv_hosts[i];
    *port = b->adv_ports[i];
}
