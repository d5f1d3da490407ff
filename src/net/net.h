/*
 * net.h - Kafka-framed TCP connections on a libuv loop.
 *
 * The net layer accepts connections, splits the byte stream into frames
 * (int32 size, then that many bytes), and hands each frame to the broker as
 * a struct cn_req.  Responses go back in request order even when a later
 * request finishes first: each connection keeps its requests in a queue
 * and writes from the head as soon as the head is complete.
 *
 * The frame size is checked against the limit before any of the body is
 * read (socket.request.max.bytes), so a lying size costs nothing.  The net
 * layer knows nothing of APIs: it sees only base/ and proto/.
 *
 * Runs on: loop, everything here.
 */
#ifndef CN_NET_NET_H
#define CN_NET_NET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "base/arena.h"
#include "base/wr.h"

struct cn_server;
struct cn_conn;

/* One request frame and, once the handler is done, its response. */
struct cn_req {
    struct cn_conn *conn;  /* owner; its memory outlives the request */
    struct cn_req *next;   /* next in the connection's response order */
    uint8_t *frame;        /* request bytes after the size field, owned */
    size_t frame_len;      /* bytes in frame */
    struct cn_arena arena; /* decoded request, freed with the request */
    struct cn_wr resp;     /* response bytes, size field excluded; runs
                              in resp.refs are sent in place */
    struct cn_wr payload;  /* memory resp.refs point into, freed with
                              the request */
    bool done;             /* handler finished; resp is final */
    bool no_response;      /* acks=0 produce: send nothing, keep order */
    int64_t start_us;      /* monotonic time the frame was complete */
    int16_t api_key;       /* set by the handler side for done_cb, -1
                              until then; the net layer only carries it */
    void *handler_state;   /* the broker's, for requests that wait */
};

/* Called for each complete frame.  The handler owns nothing: it fills
 * req->resp (or sets no_response) and calls cn_req_done(), now or later. */
typedef void (*cn_req_cb)(struct cn_req *req, void *opaque);

struct cn_server_config {
    const char *host;         /* address to bind; "" or NULL: all */
    int port;                 /* 0 picks a free port */
    size_t max_request_bytes; /* socket.request.max.bytes */
    int64_t idle_ms;          /* connections.max.idle.ms, <0 never */
    int max_inflight;         /* per connection; reading pauses past it */
    /* NULL, or called once as each request is finished (metrics); not
     * for requests whose connection has already closed. */
    void (*done_cb)(struct cn_req *req, void *opaque);
};

/* Starts listening.  Returns 0 or -errno (e.g. -EADDRINUSE). */
int cn_server_start(uv_loop_t *loop, const struct cn_server_config *cfg,
                    cn_req_cb cb, void *opaque, struct cn_server **out);
/* The port actually bound (useful when cfg->port was 0). */
int cn_server_port(const struct cn_server *srv);
/* Stops accepting, closes every connection; the server is freed when the
 * loop has run the close callbacks.  Requests still waiting in handlers
 * stay valid until they call cn_req_done(), which then just frees them. */
void cn_server_stop(struct cn_server *srv);
size_t cn_server_conn_count(const struct cn_server *srv);

/* Marks the request finished; sends what can be sent in order. */
void cn_req_done(struct cn_req *req);
/* True once the connection is gone: a waiting handler may give up early. */
bool cn_req_conn_closed(const struct cn_req *req);
/* Closes the request's connection (protocol violation).  The request must
 * still be finished with cn_req_done(). */
void cn_req_close_conn(struct cn_req *req);
/* Peer address as text, for log lines. */
const char *cn_req_peer(const struct cn_req *req);

#endif
