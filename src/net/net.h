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
 * Back-pressure (Kafka "mutes" a channel): before each new frame a
 * connection is checked against its own limits and the broker-wide budget;
 * past one, it is not read any more (the bytes already read wait in its
 * buffer) until what it holds drains.
 *   - Per connection: requests read and not yet answered (response written
 *     to the socket, or dropped), parked ones included, at most
 *     max_inflight; request bytes held plus response bytes not yet written,
 *     at most max_conn_bytes.  Both are checked before a frame is read, so
 *     one request or response larger than the limit still goes through.
 *     A peer that never reads therefore pins at most about max_conn_bytes
 *     plus one response.
 *   - Broker-wide (queued.max.requests, queued.max.request.bytes): requests
 *     read and not yet finished by their handler, and their frame bytes.
 *     A request a handler parks for an event of the client's choosing
 *     (cn_req_park: a long-poll fetch, a rebalance) stops counting, as
 *     Kafka's purgatory is outside its request queue, so parked requests
 *     cannot starve the broker.  Connections stopped by the budget wait in
 *     one FIFO and are resumed in that order as it frees; a connection
 *     that is reading does not overtake them.
 * Resuming happens from an idle handle, never inside a handler's call
 * into this layer, so handlers are not re-entered.
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
struct ssl_ctx_st;
struct x509_st;

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
    int16_t api_version;   /* likewise, the request header's version */
    bool close_after;      /* close the connection once this response
                              is written (cn_req_close_after_response) */
    bool raw_token;        /* read while the connection took bare SASL
                              tokens (after SaslHandshake v0): no request
                              header, and the answer is a bare token */
    void *handler_state;   /* the broker's, for requests that wait */
    /* The net layer's accounting; handlers leave these alone. */
    bool queued;           /* counted in the broker-wide budget */
    size_t resp_held;      /* bytes counted for the response once done */
};

/* Called for each complete frame.  The handler owns nothing: it fills
 * req->resp (or sets no_response) and calls cn_req_done(), now or later. */
typedef void (*cn_req_cb)(struct cn_req *req, void *opaque);

struct cn_server_config {
    const char *host;         /* address to bind; "" or NULL: all */
    int port;                 /* 0 picks a free port */
    size_t max_request_bytes; /* socket.request.max.bytes */
    int64_t idle_ms;          /* connections.max.idle.ms, <0 never; also
                                 closes a connection whose pending
                                 response takes no byte for this long */
    int max_inflight;         /* per connection: requests read and not
                                 yet answered; <=0: 100 */
    size_t max_conn_bytes;    /* per connection: request bytes held plus
                                 response bytes unwritten; 0: 8 MiB */
    int max_queued;           /* queued.max.requests, broker-wide; <=0:
                                 500 */
    int64_t max_queued_bytes; /* queued.max.request.bytes, broker-wide;
                                 <=0 no limit */
    /* NULL, or called once as each request is finished (metrics); not
     * for requests whose connection has already closed. */
    void (*done_cb)(struct cn_req *req, void *opaque);
    /* NULL, or called for each request still with its handler after its
     * connection closed, from the loop's idle phase (never from inside
     * a call into this layer), so the handler can give up a wait and
     * free the request early.  It may finish req (cn_req_done) now or
     * later. */
    void (*abandon_cb)(struct cn_req *req, void *opaque);
    /* The caller's number for this listener, for cn_req_listener(). */
    int listener;
    /* NULL, or a running server whose broker-wide budget (max_queued,
     * max_queued_bytes: its values, not these) this one shares, so the
     * limits hold for all listeners together.  Each server keeps its own
     * wait FIFO.  Servers sharing a budget are stopped together. */
    struct cn_server *share_budget;
    /* NULL: plaintext.  Else every connection is TLS with this OpenSSL
     * SSL_CTX (not owned; it must outlive the server), driven through
     * memory BIOs so the handshake never blocks the loop.  Frames inside
     * are the same; response bytes, payload runs included, are copied
     * through SSL_write (no writing in place). */
    struct ssl_ctx_st *tls;
    int64_t tls_handshake_ms;  /* close a TLS connection whose handshake
                                  is not done this long after accept;
                                  <=0: 10 s */
    /* With tls: the principal name after "User:" of a client certificate
     * (an OpenSSL X509) on this server's `listener`; nonzero closes the
     * connection.  Required when tls is set; not called with sasl. */
    int (*tls_principal)(int listener, struct x509_st *cert, char *out,
                         size_t out_len, void *opaque);
    bool sasl;                /* connections must authenticate (SASL);
                                 until then frames are limited to
                                 SASL_MAX_RECEIVE_BYTES; the broker gates
                                 the APIs */
    /* NULL: every connection speaks Kafka.  Else (plaintext servers
     * only) a new connection's first 8 bytes are offered to first_bytes
     * before they are read as a frame; when it returns true the
     * connection stops being the net layer's (no longer counted, never
     * read again) and take_conn gets a new heap (malloc) uv_tcp_t on the
     * same socket, not reading, with the 8 bytes.  take_conn returning
     * 0 means it owns the handle (closes it and frees it with free());
     * nonzero: the net layer closes it.  Another protocol (the metadata
     * quorum's raft) can so share a Kafka port. */
    bool (*first_bytes)(const uint8_t *bytes, size_t n, void *opaque);
    int (*take_conn)(uv_stream_t *stream, const uint8_t *bytes, size_t n,
                     void *opaque);
};

/* Kafka's sasl.server.max.receive.size default: the largest frame an
 * unauthenticated connection may send. */
#define CN_SASL_MAX_RECEIVE_BYTES 524288

/* Back-pressure state, for metrics and memory policy. */
struct cn_server_stats {
    size_t queued;          /* requests counted against queued.max.requests
                               (the shared budget's, with share_budget) */
    size_t queued_bytes;    /* their frame bytes */
    size_t held_bytes;      /* request and response bytes held, all
                               connections */
    size_t muted;           /* connections not being read by a limit */
    size_t throttled;       /* of those, waiting out a quota throttle */
    uint64_t mutes_total;   /* times a connection was muted */
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
void cn_server_get_stats(const struct cn_server *srv,
                         struct cn_server_stats *out);

/* The response is final but cn_req_done() must wait (a handle inside the
 * request is still closing): its bytes count against the connection from
 * now, so answers finished together see each other in cn_req_conn_room(). */
void cn_req_hold_response(struct cn_req *req);
/* Marks the request finished; sends what can be sent in order. */
void cn_req_done(struct cn_req *req);
/* The handler will answer req later, on an event or timer of the client's
 * choosing (a long-poll fetch, a rebalance): it stops counting against the
 * broker-wide budget, and still counts against its connection's limits. */
void cn_req_park(struct cn_req *req);
/* True once the connection is gone: a waiting handler may give up early. */
bool cn_req_conn_closed(const struct cn_req *req);
/* Bytes of answer the request's connection has room for, given the
 * answers of its other requests not yet written (SIZE_MAX when there are
 * none: one answer may exceed the limit).  A handler whose answer waited
 * (a parked fetch) sizes it by this, so requests a client pipelined while
 * they were cheap cannot all come back at full size. */
size_t cn_req_conn_room(const struct cn_req *req);
/* Client quotas (KIP-219): the answer goes out at once, carrying the
 * throttle time, and the connection is then not read for ms (from now),
 * so a client that ignores the field is held back all the same.  Composes
 * with the back-pressure mutes: the connection is read again only when
 * every reason to mute it has passed.  A later call extends, never
 * shortens, the time. */
void cn_req_throttle(struct cn_req *req, int64_t ms);
/* Closes the request's connection (protocol violation).  The request must
 * still be finished with cn_req_done(). */
void cn_req_close_conn(struct cn_req *req);
/* Sends req's response, then closes the connection (an error answer
 * Kafka sends before it hangs up, e.g. a failed authentication); nothing
 * more is read from the connection from now on. */
void cn_req_close_after_response(struct cn_req *req);
/* Peer address as text, for log lines. */
const char *cn_req_peer(const struct cn_req *req);
/* cn_server_config.listener of the server the request came in on (which
 * advertised address to answer with). */
int cn_req_listener(const struct cn_req *req);
/* True if the request came over TLS. */
bool cn_req_tls(const struct cn_req *req);

/* The authenticated principal of the request's connection, as Kafka
 * writes it ("User:alice").  A connection starts as "User:ANONYMOUS", what
 * Kafka gives PLAINTEXT; authentication (SASL, a TLS client certificate)
 * replaces it.  Authorization reads it for every request. */
#define CN_PRINCIPAL_MAX 256
const char *cn_req_principal(const struct cn_req *req);
/* -EINVAL when p does not fit CN_PRINCIPAL_MAX (the old one stays). */
int cn_req_set_principal(struct cn_req *req, const char *p);

/*
 * Per-connection authentication state, carried for the broker (which
 * knows the APIs and mechanisms; the net layer only keeps the bytes).
 * cn_req_conn_sasl: the connection's server requires SASL.  A connection
 * starts unauthenticated; the broker marks it authenticated with the
 * session's expiry (monotonic ms, 0 for none, KIP-368).
 */
bool cn_req_conn_sasl(const struct cn_req *req);
bool cn_req_authenticated(const struct cn_req *req);
int64_t cn_req_session_expiry_ms(const struct cn_req *req);
void cn_req_set_authenticated(struct cn_req *req, bool on,
                              int64_t expiry_ms);
/* The SASL exchange in progress (the broker's; NULL when none).  Setting
 * it frees the previous one with its free_fn; the last one is freed when
 * the connection is. */
void *cn_req_auth_state(const struct cn_req *req);
void cn_req_set_auth_state(struct cn_req *req, void *state,
                           void (*free_fn)(void *));
/* From the next frame on, frames are bare SASL tokens (any size from 0,
 * no request header; req->raw_token set), until turned off again. */
void cn_req_set_raw_tokens(struct cn_req *req, bool on);

#endif
