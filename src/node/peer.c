/*
 * peer.c - a Kafka client connection to another broker (peer.h).
 *
 * Calls wait in one list in the order they were made; the sent ones are
 * always a prefix of it, because everything queued is written as soon as a
 * connection is up.  Kafka answers a connection's requests in order, so
 * the first sent call is the only one a response frame can answer: any
 * other correlation id means the stream cannot be trusted, and the
 * connection is dropped.
 *
 * One connection at a time, each in its own struct peer_conn so a closing
 * one (its handle still open until libuv's close callback) never mixes with
 * the next.  A write owns its frame until libuv is done with it, so a call
 * that times out while its bytes are still being written frees nothing the
 * write needs.
 */
#include "node/peer.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/rd.h"
#include "base/wr.h"
#include "proto/gen/api.h"
#include "proto/header.h"

enum peer_state {
    PEER_IDLE,       /* no connection, nothing to send */
    PEER_RESOLVING,  /* uv_getaddrinfo in flight */
    PEER_CONNECTING, /* uv_tcp_connect in flight */
    PEER_UP,
    PEER_BACKOFF, /* the last attempt failed; next one at retry_at_ms */
};

struct peer_call {
    struct peer_call *next;
    int32_t correlation_id;
    int16_t api_key;
    int16_t api_version;
    uint8_t *frame; /* size field included; NULL once handed to a write */
    size_t frame_len;
    int64_t deadline_ms; /* loop time */
    bool sent;
    cn_peer_cb cb;
    void *arg;
};

struct peer_conn {
    uv_tcp_t tcp;
    uv_connect_t connect;
    struct cn_peer *peer;
    bool closing;
};

struct peer_write {
    uv_write_t req;
    uint8_t *frame;
    struct cn_peer *peer;
};

struct cn_peer {
    uv_loop_t *loop;
    char *host;
    int port;
    char *client_id;
    int64_t backoff_first_ms;
    int64_t backoff_max_ms;
    int32_t max_frame_bytes;
    bool fail_unsent;

    enum peer_state state;
    struct peer_conn *conn; /* the current connection, or NULL */
    uv_getaddrinfo_t gai;
    uv_timer_t timer; /* the next deadline or reconnect */
    int64_t backoff_ms;
    int64_t retry_at_ms;

    struct peer_call *head, *tail;
    size_t ncalls;
    int32_t next_correlation_id;

    uint8_t *rbuf; /* bytes read and not yet a whole frame */
    size_t rlen, rcap;

    bool freeing;
    int busy; /* handles and requests whose callbacks are still to come */
};

static void peer_arm(struct cn_peer *p);
static void peer_connect(struct cn_peer *p);

static void peer_maybe_release(struct cn_peer *p)
{
    if (!p->freeing || p->busy > 0)
        return;
    free(p->rbuf);
    free(p->host);
    free(p->client_id);
    free(p);
}

static void call_free(struct peer_call *c)
{
    free(c->frame);
    free(c);
}

/* Takes c out of the list (it must be there). */
static void unlink_call(struct cn_peer *p, struct peer_call *c)
{
    struct peer_call **pp = &p->head, *prev = NULL;
    while (*pp && *pp != c) {
        prev = *pp;
        pp = &(*pp)->next;
    }
    if (!*pp)
        return;
    *pp = c->next;
    if (p->tail == c)
        p->tail = prev;
    p->ncalls--;
}

/* Answers c, which is already unlinked, and frees it.  False when the
 * callback freed the peer: the caller must not go on with it. */
static bool finish_call(struct cn_peer *p, struct peer_call *c, int err,
                        const void *resp, struct cn_arena *arena)
{
    c->cb(c->arg, err, resp, arena);
    call_free(c);
    return !p->freeing;
}

static void on_conn_closed(uv_handle_t *h)
{
    struct peer_conn *conn = h->data;
    struct cn_peer *p = conn->peer;
    free(conn);
    p->busy--;
    peer_maybe_release(p);
}

/* Closes the current connection and fails what it had sent: the
 * expired ones with -ETIMEDOUT, the others with err.  Unsent calls stay
 * for the next connection, unless p->fail_unsent. */
static void drop_connection(struct cn_peer *p, int err)
{
    struct peer_conn *conn = p->conn;
    if (conn && !conn->closing) {
        conn->closing = true;
        uv_close((uv_handle_t *)&conn->tcp, on_conn_closed);
    }
    p->conn = NULL;
    p->rlen = 0;
    p->state = PEER_BACKOFF;
    p->retry_at_ms = (int64_t)uv_now(p->loop) + p->backoff_ms;
    p->backoff_ms = p->backoff_ms * 2 > p->backoff_max_ms ? p->backoff_max_ms
                                                          : p->backoff_ms * 2;

    int64_t now = (int64_t)uv_now(p->loop);
    /* Only the calls there now: a callback may queue new ones, which get
     * the next connection. */
    size_t n = 0;
    for (struct peer_call *c = p->head; c; c = c->next)
        n++;
    while (n-- > 0 && p->head && (p->head->sent || p->fail_unsent)) {
        struct peer_call *c = p->head;
        unlink_call(p, c);
        if (!finish_call(p, c, now >= c->deadline_ms ? -ETIMEDOUT : err, NULL,
                         NULL))
            return;
    }
    peer_arm(p);
}

static void on_write(uv_write_t *req, int status)
{
    struct peer_write *w = (struct peer_write *)req;
    struct cn_peer *p = w->peer;
    uv_stream_t *stream = req->handle;
    free(w->frame);
    free(w);
    p->busy--;
    if (status < 0 && !p->freeing && p->conn &&
        (uv_stream_t *)&p->conn->tcp == stream)
        drop_connection(p, -ECONNRESET);
    peer_maybe_release(p);
}

/* Writes every unsent call; on a failed write the connection is dropped. */
static void send_queued(struct cn_peer *p)
{
    for (struct peer_call *c = p->head; c && p->state == PEER_UP;
         c = c->next) {
        if (c->sent)
            continue;
        struct peer_write *w = calloc(1, sizeof *w);
        if (!w) {
            drop_connection(p, CN_ENOMEM);
            return;
        }
        w->frame = c->frame;
        w->peer = p;
        c->frame = NULL;
        c->sent = true;
        uv_buf_t buf = uv_buf_init((char *)w->frame, (unsigned)c->frame_len);
        int rc = uv_write(&w->req, (uv_stream_t *)&p->conn->tcp, &buf, 1,
                          on_write);
        if (rc < 0) {
            free(w->frame);
            free(w);
            drop_connection(p, rc);
            return;
        }
        p->busy++;
    }
}

/* The response to the first sent call, `len` bytes at frame (size field
 * excluded).  False when the connection was dropped or the peer freed. */
static bool answer_frame(struct cn_peer *p, const uint8_t *frame, size_t len)
{
    struct peer_call *c = p->head;
    struct cn_rd rd;
    cn_rd_init(&rd, frame, len);
    int32_t corr = cn_rd_i32(&rd);
    if (rd.err || !c || !c->sent || corr != c->correlation_id) {
        drop_connection(p, -ECONNRESET);
        return false;
    }
    unlink_call(p, c);

    const struct cn_api_info *api = cn_api_find(c->api_key);
    struct cn_arena arena;
    cn_arena_init(&arena);
    void *resp = cn_arena_alloc(&arena, api->response_size);
    int err = resp ? 0 : CN_ENOMEM;
    if (!err) {
        if (cn_resp_header_version(c->api_key, c->api_version) >= 1)
            cn_rd_skip_tags(&rd);
        api->init_response(resp);
        if (!rd.err)
            err = api->decode_response(&rd, &arena, c->api_version, resp);
        if (!err && rd.err)
            err = rd.err;
        if (err && err != CN_ENOMEM)
            err = CN_ECORRUPT;
    }
    bool alive = finish_call(p, c, err, err ? NULL : resp, &arena);
    cn_arena_fini(&arena);
    return alive && p->state == PEER_UP;
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct peer_conn *conn = h->data;
    struct cn_peer *p = conn->peer;
    (void)suggested;
    size_t want = 64 * 1024;
    if (p->rcap - p->rlen < want) {
        size_t cap = p->rcap ? p->rcap : want;
        while (cap - p->rlen < want)
            cap *= 2;
        uint8_t *nb = realloc(p->rbuf, cap);
        if (!nb) {
            *buf = uv_buf_init(NULL, 0); /* libuv reports UV_ENOBUFS */
            return;
        }
        p->rbuf = nb;
        p->rcap = cap;
    }
    *buf = uv_buf_init((char *)p->rbuf + p->rlen,
                       (unsigned)(p->rcap - p->rlen));
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    struct peer_conn *conn = s->data;
    struct cn_peer *p = conn->peer;
    (void)buf;
    if (conn != p->conn)
        return;
    if (n < 0) {
        drop_connection(p, -ECONNRESET);
        return;
    }
    p->rlen += (size_t)n;
    size_t off = 0;
    while (p->rlen - off >= 4) {
        const uint8_t *q = p->rbuf + off;
        int32_t size = (int32_t)((uint32_t)q[0] << 24 | (uint32_t)q[1] << 16 |
                                 (uint32_t)q[2] << 8 | q[3]);
        if (size < 4 || size > p->max_frame_bytes) {
            drop_connection(p, -ECONNRESET);
            return;
        }
        if (p->rlen - off - 4 < (size_t)size)
            break;
        /* The callback may send (appending to nothing we read from) or
         * free the peer: it reads its frame before anything moves. */
        size_t at = off + 4;
        off += 4 + (size_t)size;
        if (!answer_frame(p, p->rbuf + at, (size_t)size))
            return;
    }
    memmove(p->rbuf, p->rbuf + off, p->rlen - off);
    p->rlen -= off;
    peer_arm(p);
}

static void on_connect(uv_connect_t *req, int status)
{
    struct peer_conn *conn = req->data;
    struct cn_peer *p = conn->peer;
    p->busy--;
    if (conn != p->conn || p->freeing) {
        peer_maybe_release(p);
        return;
    }
    if (status < 0) {
        drop_connection(p, status);
        return;
    }
    int rc = uv_read_start((uv_stream_t *)&conn->tcp, on_alloc, on_read);
    if (rc < 0) {
        drop_connection(p, rc);
        return;
    }
    p->state = PEER_UP;
    p->backoff_ms = p->backoff_first_ms;
    send_queued(p);
    peer_arm(p);
}

static void on_resolved(uv_getaddrinfo_t *req, int status,
                        struct addrinfo *res)
{
    struct cn_peer *p = req->data;
    p->busy--;
    if (p->freeing) {
        uv_freeaddrinfo(res);
        peer_maybe_release(p);
        return;
    }
    if (status < 0 || !res) {
        uv_freeaddrinfo(res);
        drop_connection(p, status < 0 ? status : -EHOSTUNREACH);
        return;
    }
    struct peer_conn *conn = calloc(1, sizeof *conn);
    if (!conn) {
        uv_freeaddrinfo(res);
        drop_connection(p, CN_ENOMEM);
        return;
    }
    conn->peer = p;
    conn->tcp.data = conn;
    conn->connect.data = conn;
    uv_tcp_init(p->loop, &conn->tcp);
    p->busy++; /* the handle, until on_conn_closed */
    p->conn = conn;
    uv_tcp_nodelay(&conn->tcp, 1);
    int rc = uv_tcp_connect(&conn->connect, &conn->tcp, res->ai_addr,
                            on_connect);
    uv_freeaddrinfo(res);
    if (rc < 0) {
        drop_connection(p, rc);
        return;
    }
    p->busy++;
    p->state = PEER_CONNECTING;
}

static void peer_connect(struct cn_peer *p)
{
    char port[16];
    struct addrinfo hints;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    snprintf(port, sizeof port, "%d", p->port);
    p->gai.data = p;
    int rc = uv_getaddrinfo(p->loop, &p->gai, on_resolved, p->host, port,
                            &hints);
    if (rc < 0) {
        drop_connection(p, rc);
        return;
    }
    p->busy++;
    p->state = PEER_RESOLVING;
}

static void on_timer(uv_timer_t *t)
{
    struct cn_peer *p = t->data;
    int64_t now = (int64_t)uv_now(p->loop);

    /* A sent call past its deadline: Kafka drops the connection, which
     * fails it (and the other sent calls) in drop_connection. */
    for (struct peer_call *c = p->head; c && c->sent; c = c->next)
        if (now >= c->deadline_ms) {
            drop_connection(p, -ECONNRESET);
            if (p->freeing)
                return;
            break;
        }
    for (struct peer_call *c = p->head, *next; c; c = next) {
        next = c->next;
        if (c->sent || now < c->deadline_ms)
            continue;
        unlink_call(p, c);
        if (!finish_call(p, c, -ETIMEDOUT, NULL, NULL))
            return;
        next = p->head; /* the callback may have changed the list */
    }
    if (p->state == PEER_BACKOFF && now >= p->retry_at_ms) {
        if (p->head)
            peer_connect(p);
        else
            p->state = PEER_IDLE;
    }
    peer_arm(p);
}

/* Sets the timer to the next deadline or reconnect, whichever is first. */
static void peer_arm(struct cn_peer *p)
{
    if (p->freeing)
        return;
    int64_t at = INT64_MAX;
    for (struct peer_call *c = p->head; c; c = c->next)
        if (c->deadline_ms < at)
            at = c->deadline_ms;
    if (p->state == PEER_BACKOFF && p->head && p->retry_at_ms < at)
        at = p->retry_at_ms;
    if (at == INT64_MAX) {
        uv_timer_stop(&p->timer);
        if (p->state == PEER_BACKOFF)
            p->state = PEER_IDLE;
        return;
    }
    int64_t now = (int64_t)uv_now(p->loop);
    uv_timer_start(&p->timer, on_timer, at > now ? (uint64_t)(at - now) : 0,
                   0);
}

int cn_peer_new(uv_loop_t *loop, const struct cn_peer_opts *opts,
                struct cn_peer **out)
{
    if (!opts->host || opts->port <= 0 || opts->port > 65535)
        return CN_EINVAL;
    struct cn_peer *p = calloc(1, sizeof *p);
    if (!p)
        return CN_ENOMEM;
    p->loop = loop;
    p->host = strdup(opts->host);
    p->client_id = strdup(opts->client_id ? opts->client_id : "cairn");
    if (!p->host || !p->client_id) {
        free(p->host);
        free(p->client_id);
        free(p);
        return CN_ENOMEM;
    }
    p->port = opts->port;
    p->backoff_first_ms = opts->backoff_ms > 0 ? opts->backoff_ms : 50;
    p->backoff_max_ms = opts->backoff_max_ms >= p->backoff_first_ms
                            ? opts->backoff_max_ms
                            : p->backoff_first_ms;
    p->backoff_ms = p->backoff_first_ms;
    p->max_frame_bytes = opts->max_frame_bytes > 4 ? opts->max_frame_bytes
                                                   : 100 * 1024 * 1024;
    p->fail_unsent = opts->fail_unsent;
    p->state = PEER_IDLE;
    uv_timer_init(loop, &p->timer);
    p->timer.data = p;
    p->busy = 1; /* the timer handle */
    *out = p;
    return 0;
}

int cn_peer_call(struct cn_peer *p, int16_t api_key, int16_t api_version,
                 const void *request, int64_t timeout_ms, cn_peer_cb cb,
                 void *arg)
{
    const struct cn_api_info *api = cn_api_find(api_key);
    if (!api || api_version < api->min_version ||
        api_version > api->max_version || p->freeing)
        return CN_EUNSUPPORTED;
    struct peer_call *c = calloc(1, sizeof *c);
    if (!c)
        return CN_ENOMEM;

    struct cn_req_header h = {
        .api_key = api_key,
        .api_version = api_version,
        .correlation_id = p->next_correlation_id,
        .client_id = cn_bytes_str(p->client_id),
    };
    struct cn_wr wr;
    cn_wr_init(&wr, 256);
    size_t size_at = cn_wr_reserve(&wr, 4);
    cn_req_header_encode(&wr, &h);
    api->encode_request(&wr, api_version, request);
    if (wr.err || wr.len - 4 > INT32_MAX) {
        int err = wr.err ? wr.err : CN_ETOOBIG;
        cn_wr_fini(&wr);
        free(c);
        return err;
    }
    cn_wr_patch_i32(&wr, size_at, (int32_t)(wr.len - 4));
    c->frame = cn_wr_steal(&wr, &c->frame_len);
    cn_wr_fini(&wr);
    if (!c->frame) {
        free(c);
        return CN_ENOMEM;
    }
    /* Correlation ids wrap as Kafka's do; only the first sent call is
     * ever matched, so a repeat after 2^31 calls is harmless. */
    p->next_correlation_id = p->next_correlation_id == INT32_MAX
                                 ? 0
                                 : p->next_correlation_id + 1;
    c->correlation_id = h.correlation_id;
    c->api_key = api_key;
    c->api_version = api_version;
    c->deadline_ms = (int64_t)uv_now(p->loop) + timeout_ms;
    c->cb = cb;
    c->arg = arg;
    if (p->tail)
        p->tail->next = c;
    else
        p->head = c;
    p->tail = c;
    p->ncalls++;

    if (p->state == PEER_UP)
        send_queued(p);
    else if (p->state == PEER_IDLE)
        peer_connect(p);
    peer_arm(p);
    return 0;
}

bool cn_peer_connected(const struct cn_peer *p)
{
    return p->state == PEER_UP;
}

size_t cn_peer_pending(const struct cn_peer *p)
{
    return p->ncalls;
}

static void on_timer_closed(uv_handle_t *h)
{
    struct cn_peer *p = h->data;
    p->busy--;
    peer_maybe_release(p);
}

void cn_peer_free(struct cn_peer *p)
{
    if (!p || p->freeing)
        return;
    p->freeing = true;
    while (p->head) {
        struct peer_call *c = p->head;
        unlink_call(p, c);
        c->cb(c->arg, -ECANCELED, NULL, NULL);
        call_free(c);
    }
    if (p->state == PEER_RESOLVING)
        uv_cancel((uv_req_t *)&p->gai);
    if (p->conn && !p->conn->closing) {
        p->conn->closing = true;
        uv_close((uv_handle_t *)&p->conn->tcp, on_conn_closed);
    }
    p->conn = NULL;
    uv_close((uv_handle_t *)&p->timer, on_timer_closed);
}
