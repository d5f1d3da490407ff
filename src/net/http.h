/*
 * http.h - a minimal HTTP/1.1 server on the broker's libuv loop, for the
 * metrics and health endpoints.
 *
 * One request per connection: the server reads the request head (request
 * line and headers, at most CN_HTTP_MAX_HEAD bytes), asks the handler for
 * a response, writes it with "Connection: close", half-closes and drains
 * what the client still sends before closing, so the client is not reset
 * before it has read the answer.  Only GET and HEAD reach the handler;
 * other methods get 405.  A head too large gets 431, a malformed one 400.
 * Every connection has a deadline (idle_ms from accept) and at most
 * max_conns are open at once; further ones are closed at accept.  The
 * handler runs synchronously on the loop and cannot wait.
 *
 * Like net.h, this sees only base/: it knows nothing of the broker.
 *
 * Runs on: loop, everything here.
 */
#ifndef CN_NET_HTTP_H
#define CN_NET_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "base/wr.h"

#define CN_HTTP_MAX_HEAD 8192  /* bytes of request line plus headers */
#define CN_HTTP_MAX_PATH 1024  /* bytes of the target, query included */

struct cn_http_server;

/* A parsed request head.  Only what the endpoints need is kept. */
struct cn_http_req {
    char method[16];                /* "GET", NUL-terminated */
    char path[CN_HTTP_MAX_PATH];    /* target without query, "/metrics" */
    int minor_version;              /* 0 or 1 of HTTP/1.x */
    size_t head_len;                /* bytes the head took, final CRLF in */
};

/* What a handler answers.  The server adds Content-Length and
 * Connection: close, and leaves the body out for HEAD. */
struct cn_http_resp {
    int status;               /* 200, 404, ... */
    const char *content_type; /* NULL: text/plain; charset=utf-8 */
    struct cn_wr body;        /* owned by the server */
};

/*
 * Parses a request head from buf[0..len).  Returns 0 with *out filled
 * when the head is complete; CN_ETRUNC when more bytes are needed;
 * CN_ETOOBIG when no complete head fits in max_head bytes (431);
 * CN_EBADLEN when the target is longer than CN_HTTP_MAX_PATH (414);
 * CN_EINVAL when it is not an HTTP/1.x request (400).  Bare LF line ends
 * are accepted, as RFC 9112 section 2.2 allows.
 */
int cn_http_parse(const char *buf, size_t len, size_t max_head,
                  struct cn_http_req *out);

/* The reason phrase for a status code ("Not Found"). */
const char *cn_http_reason(int status);

/* Fills resp for a request; resp->status starts at 200 and body empty. */
typedef void (*cn_http_cb)(const struct cn_http_req *req,
                           struct cn_http_resp *resp, void *opaque);

struct cn_http_config {
    const char *host; /* address to bind; "" or NULL: 127.0.0.1 */
    int port;         /* 0 picks a free port */
    int max_conns;    /* open connections at once; <=0: 64 */
    int64_t idle_ms;  /* whole-connection deadline; <=0: 5000 */
};

/* Starts listening.  Returns 0 or -errno / a negative uv error. */
int cn_http_start(uv_loop_t *loop, const struct cn_http_config *cfg,
                  cn_http_cb cb, void *opaque, struct cn_http_server **out);
/* The port actually bound (useful when cfg->port was 0), or -1. */
int cn_http_port(const struct cn_http_server *srv);
/* Open connections right now. */
size_t cn_http_conn_count(const struct cn_http_server *srv);
/* Stops listening and closes every connection; the server is freed once
 * the loop has run the close callbacks.  srv may be NULL. */
void cn_http_stop(struct cn_http_server *srv);

#endif
