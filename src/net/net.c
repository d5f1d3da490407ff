/*
 * net.c - connections, framing and in-order responses; see net.h.
 *
 * Reading: small frames are copied out of a per-connection read buffer;
 * once a frame's size is known and much of it is still to come, libuv
 * reads straight into the frame's own buffer, so large produce requests
 * are not copied twice.
 *
 * Lifetime: a connection is freed when its handle is closed and no request
 * still points at it (refs counts requests not yet freed).
 */
#include "net.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/say.h"

#define READ_BUF_BYTES (64 * 1024)
#define DIRECT_READ_MIN (16 * 1024)

struct cn_server {
    uv_loop_t *loop;
    uv_tcp_t listener;
    uv_timer_t idle_timer;
    struct cn_server_config cfg;
    cn_req_cb cb;
    void *opaque;
    struct cn_conn *conns; /* all open connections */
    size_t conn_count;
    bool stopping;
    int pending_closes; /* handles whose close callback has not run */
};

struct cn_conn {
    uv_tcp_t tcp;
    struct cn_server *srv;
    struct cn_conn *prev, *next; /* server's list */
    uint8_t size_buf[4];         /* frame size being assembled */
    size_t size_have;            /* bytes of size_buf filled */
    uint8_t *frame;              /* frame body being read, or NULL */
    size_t frame_len;            /* its full length */
    size_t frame_have;           /* bytes of it read so far */
    uint8_t *rbuf;               /* READ_BUF_BYTES, for small reads */
    bool direct;                 /* last alloc handed out frame memory */
    struct cn_req *head, *tail;  /* requests in arrival order */
    int inflight;                /* requests not yet written */
    int writes_pending;          /* uv_write calls outstanding */
    bool reading;
    bool closed;                 /* uv_close called */
    int refs;                    /* 1 for the handle + 1 per live request */
    int64_t last_active_ms;      /* monotonic, for the idle check */
    char peer[64];
};

struct conn_write {
    uv_write_t w;
    struct cn_conn *conn;
    struct cn_req *req;
    uint8_t size[4];
};

static void conn_close(struct cn_conn *c);
static void conn_flush(struct cn_conn *c);
static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);

static void conn_unref(struct cn_conn *c)
{
    if (--c->refs > 0)
        return;
    free(c->rbuf);
    free(c->frame);
    free(c);
}

static void req_free(struct cn_req *req)
{
    struct cn_conn *c = req->conn;
    cn_arena_fini(&req->arena);
    cn_wr_fini(&req->resp);
    cn_wr_fini(&req->payload);
    free(req->frame);
    free(req);
    conn_unref(c);
}

static void update_reading(struct cn_conn *c)
{
    if (c->closed)
        return;
    bool want = c->inflight < c->srv->cfg.max_inflight;
    if (want && !c->reading) {
        c->reading = true;
        uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, read_cb);
    } else if (!want && c->reading) {
        c->reading = false;
        uv_read_stop((uv_stream_t *)&c->tcp);
    }
}

static void on_write(uv_write_t *w, int status)
{
    struct conn_write *cw = (struct conn_write *)w;
    struct cn_conn *c = cw->conn;
    c->refs++;
    c->writes_pending--;
    req_free(cw->req);
    free(cw);
    if (status < 0 && !c->closed) {
        CN_DEBUG("write to %s failed: %s", c->peer, uv_strerror(status));
        conn_close(c);
    }
    conn_unref(c);
}

/* Sends every finished request at the head of the queue, in order. */
static void conn_flush(struct cn_conn *c)
{
    /* Freeing a request may drop the last other reference to c. */
    c->refs++;
    while (c->head && c->head->done) {
        struct cn_req *req = c->head;
        c->head = req->next;
        if (!c->head)
            c->tail = NULL;
        c->inflight--;
        if (c->closed || req->no_response || req->resp.err) {
            if (req->resp.err && !c->closed)
                conn_close(c);
            req_free(req);
            continue;
        }
        struct conn_write *cw = malloc(sizeof *cw);
        if (!cw) {
            req_free(req);
            conn_close(c);
            continue;
        }
        cw->conn = c;
        cw->req = req;
        const struct cn_wr *r = &req->resp;
        uint32_t n = (uint32_t)(r->len + r->ref_bytes);
        cw->size[0] = (uint8_t)(n >> 24);
        cw->size[1] = (uint8_t)(n >> 16);
        cw->size[2] = (uint8_t)(n >> 8);
        cw->size[3] = (uint8_t)n;
        /* The response's own bytes interleaved with the runs it refers to
         * (record data sent without another copy); libuv copies this
         * array, so it can live on the stack when small. */
        uv_buf_t small[8], *bufs = small;
        size_t nb = 2 + 2 * r->nrefs;
        if (nb > 8 && !(bufs = malloc(nb * sizeof *bufs))) {
            free(cw);
            req_free(req);
            conn_close(c);
            continue;
        }
        size_t k = 0, at = 0;
        bufs[k++] = uv_buf_init((char *)cw->size, 4);
        for (size_t i = 0; i < r->nrefs; i++) {
            if (r->refs[i].pos > at)
                bufs[k++] = uv_buf_init((char *)r->buf + at,
                                        (unsigned)(r->refs[i].pos - at));
            bufs[k++] = uv_buf_init((char *)r->refs[i].ptr,
                                    (unsigned)r->refs[i].len);
            at = r->refs[i].pos;
        }
        if (r->len > at)
            bufs[k++] = uv_buf_init((char *)r->buf + at,
                                    (unsigned)(r->len - at));
        int rc = uv_write(&cw->w, (uv_stream_t *)&c->tcp, bufs,
                          (unsigned)k, on_write);
        if (bufs != small)
            free(bufs);
        if (rc < 0) {
            free(cw);
            req_free(req);
            conn_close(c);
            continue;
        }
        c->writes_pending++;
    }
    update_reading(c);
    conn_unref(c);
}

void cn_req_done(struct cn_req *req)
{
    struct cn_conn *c = req->conn;
    /* After close the server itself may be gone: only c is safe. */
    if (!req->done && !c->closed && c->srv->cfg.done_cb)
        c->srv->cfg.done_cb(req, c->srv->opaque);
    req->done = true;
    conn_flush(req->conn);
}

bool cn_req_conn_closed(const struct cn_req *req)
{
    return req->conn->closed;
}

void cn_req_close_conn(struct cn_req *req)
{
    conn_close(req->conn);
}

const char *cn_req_peer(const struct cn_req *req)
{
    return req->conn->peer;
}

/* The server is freed by whichever close callback comes last after stop. */
static void server_close_done(struct cn_server *srv)
{
    if (--srv->pending_closes == 0 && srv->stopping)
        free(srv);
}

static void on_conn_closed(uv_handle_t *h)
{
    struct cn_conn *c = h->data;
    struct cn_server *srv = c->srv;
    conn_unref(c);
    server_close_done(srv);
}

static void conn_close(struct cn_conn *c)
{
    if (c->closed)
        return;
    c->closed = true;
    struct cn_server *srv = c->srv;
    if (c->prev)
        c->prev->next = c->next;
    else
        srv->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    srv->conn_count--;
    /* Finished requests are dropped now; unfinished ones are freed by
     * cn_req_done() when their handler gets to them. */
    struct cn_req **pp = &c->head;
    c->tail = NULL;
    while (*pp) {
        struct cn_req *r = *pp;
        if (r->done) {
            *pp = r->next;
            c->inflight--;
            req_free(r);
        } else {
            c->tail = r;
            pp = &r->next;
        }
    }
    srv->pending_closes++;
    uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
}

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    struct cn_conn *c = h->data;
    if (c->frame && c->frame_len - c->frame_have >= DIRECT_READ_MIN) {
        c->direct = true;
        *buf = uv_buf_init((char *)c->frame + c->frame_have,
                           (unsigned)(c->frame_len - c->frame_have));
        return;
    }
    c->direct = false;
    *buf = uv_buf_init((char *)c->rbuf, READ_BUF_BYTES);
}

static void frame_complete(struct cn_conn *c)
{
    struct cn_req *req = calloc(1, sizeof *req);
    if (!req) {
        conn_close(c);
        return;
    }
    req->conn = c;
    req->frame = c->frame;
    req->frame_len = c->frame_len;
    req->start_us = cn_clock_mono_us();
    req->api_key = -1;
    cn_arena_init(&req->arena);
    cn_wr_init(&req->resp, 0);
    cn_wr_init(&req->payload, 0);
    c->frame = NULL;
    c->frame_len = c->frame_have = 0;
    c->size_have = 0;
    c->refs++;
    c->inflight++;
    if (c->tail)
        c->tail->next = req;
    else
        c->head = req;
    c->tail = req;
    c->srv->cb(req, c->srv->opaque);
}

/* Feeds bytes from the read buffer into the framing state machine. */
static void consume(struct cn_conn *c, const uint8_t *p, size_t n)
{
    while (n > 0 && !c->closed) {
        if (!c->frame) {
            size_t take = 4 - c->size_have;
            if (take > n)
                take = n;
            memcpy(c->size_buf + c->size_have, p, take);
            c->size_have += take;
            p += take;
            n -= take;
            if (c->size_have < 4)
                return;
            uint32_t size = ((uint32_t)c->size_buf[0] << 24) |
                            ((uint32_t)c->size_buf[1] << 16) |
                            ((uint32_t)c->size_buf[2] << 8) | c->size_buf[3];
            /* Smallest request: api key, version, correlation id. */
            if (size < 8 || size > c->srv->cfg.max_request_bytes ||
                size > INT32_MAX) {
                CN_WARN("closing %s: request size %u outside 8..%zu", c->peer,
                        size, c->srv->cfg.max_request_bytes);
                conn_close(c);
                return;
            }
            c->frame = malloc(size);
            if (!c->frame) {
                conn_close(c);
                return;
            }
            c->frame_len = size;
            c->frame_have = 0;
        }
        size_t take = c->frame_len - c->frame_have;
        if (take > n)
            take = n;
        memcpy(c->frame + c->frame_have, p, take);
        c->frame_have += take;
        p += take;
        n -= take;
        if (c->frame_have == c->frame_len)
            frame_complete(c);
    }
}

static void read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    struct cn_conn *c = s->data;
    (void)buf;
    if (nread < 0) {
        if (nread != UV_EOF)
            CN_DEBUG("read from %s: %s", c->peer, uv_strerror((int)nread));
        conn_close(c);
        return;
    }
    if (nread == 0)
        return;
    c->last_active_ms = cn_clock_mono_ms();
    if (c->direct) {
        c->frame_have += (size_t)nread;
        if (c->frame_have == c->frame_len)
            frame_complete(c);
        return;
    }
    consume(c, c->rbuf, (size_t)nread);
}

static void on_connection(uv_stream_t *ls, int status)
{
    struct cn_server *srv = ls->data;
    if (status < 0)
        return;
    struct cn_conn *c = calloc(1, sizeof *c);
    if (!c)
        return;
    c->rbuf = malloc(READ_BUF_BYTES);
    if (!c->rbuf) {
        free(c);
        return;
    }
    c->srv = srv;
    c->refs = 1;
    uv_tcp_init(srv->loop, &c->tcp);
    c->tcp.data = c;
    c->closed = false;
    if (uv_accept(ls, (uv_stream_t *)&c->tcp) < 0) {
        srv->pending_closes++;
        c->closed = true;
        uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    struct sockaddr_storage ss;
    int len = sizeof ss;
    snprintf(c->peer, sizeof c->peer, "?");
    if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &len) == 0) {
        char host[48] = "?";
        int port = 0;
        if (ss.ss_family == AF_INET) {
            struct sockaddr_in *in = (struct sockaddr_in *)&ss;
            uv_ip4_name(in, host, sizeof host);
            port = ntohs(in->sin_port);
        } else if (ss.ss_family == AF_INET6) {
            struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
            uv_ip6_name(in6, host, sizeof host);
            port = ntohs(in6->sin6_port);
        }
        snprintf(c->peer, sizeof c->peer, "%s:%d", host, port);
    }
    c->last_active_ms = cn_clock_mono_ms();
    c->next = srv->conns;
    if (srv->conns)
        srv->conns->prev = c;
    srv->conns = c;
    srv->conn_count++;
    c->reading = true;
    uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, read_cb);
}

static void idle_check(uv_timer_t *t)
{
    struct cn_server *srv = t->data;
    if (srv->cfg.idle_ms < 0)
        return;
    int64_t now = cn_clock_mono_ms();
    struct cn_conn *c = srv->conns;
    while (c) {
        struct cn_conn *next = c->next;
        if (!c->head && now - c->last_active_ms > srv->cfg.idle_ms) {
            CN_DEBUG("closing idle connection %s", c->peer);
            conn_close(c);
        }
        c = next;
    }
}

int cn_server_start(uv_loop_t *loop, const struct cn_server_config *cfg,
                    cn_req_cb cb, void *opaque, struct cn_server **out)
{
    struct cn_server *srv = calloc(1, sizeof *srv);
    if (!srv)
        return -ENOMEM;
    srv->loop = loop;
    srv->cfg = *cfg;
    if (srv->cfg.max_inflight <= 0)
        srv->cfg.max_inflight = 100;
    srv->cb = cb;
    srv->opaque = opaque;
    struct sockaddr_storage addr;
    const char *host = cfg->host && cfg->host[0] ? cfg->host : "0.0.0.0";
    int rc = uv_ip4_addr(host, cfg->port, (struct sockaddr_in *)&addr);
    if (rc < 0)
        rc = uv_ip6_addr(host, cfg->port, (struct sockaddr_in6 *)&addr);
    if (rc < 0) {
        free(srv);
        return rc;
    }
    uv_tcp_init(loop, &srv->listener);
    srv->listener.data = srv;
    rc = uv_tcp_bind(&srv->listener, (struct sockaddr *)&addr, 0);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&srv->listener, 1024, on_connection);
    if (rc < 0) {
        uv_close((uv_handle_t *)&srv->listener, NULL);
        uv_run(loop, UV_RUN_NOWAIT);
        free(srv);
        return rc;
    }
    uv_timer_init(loop, &srv->idle_timer);
    srv->idle_timer.data = srv;
    if (cfg->idle_ms >= 0) {
        uint64_t every = cfg->idle_ms > 10000 ? 1000 : 100;
        uv_timer_start(&srv->idle_timer, idle_check, every, every);
    }
    *out = srv;
    return 0;
}

int cn_server_port(const struct cn_server *srv)
{
    struct sockaddr_storage ss;
    int len = sizeof ss;
    if (uv_tcp_getsockname(&srv->listener, (struct sockaddr *)&ss, &len) < 0)
        return -1;
    if (ss.ss_family == AF_INET6)
        return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    return ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

size_t cn_server_conn_count(const struct cn_server *srv)
{
    return srv->conn_count;
}

static void on_server_handle_closed(uv_handle_t *h)
{
    server_close_done(h->data);
}

void cn_server_stop(struct cn_server *srv)
{
    if (srv->stopping)
        return;
    srv->stopping = true;
    while (srv->conns)
        conn_close(srv->conns);
    srv->pending_closes += 2;
    uv_timer_stop(&srv->idle_timer);
    uv_close((uv_handle_t *)&srv->idle_timer, on_server_handle_closed);
    uv_close((uv_handle_t *)&srv->listener, on_server_handle_closed);
}
