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
 *
 * Back-pressure (see net.h): conn_admit() runs before each new frame; a
 * connection that may not take one is muted (uv_read_stop) with its
 * unparsed bytes left in rbuf.  A connection muted by its own limits goes
 * on the resume list when one of its requests is freed; one muted by the
 * broker-wide budget goes on the wait FIFO.  The idle handle resumes them
 * (resume list first, then the FIFO in order while the budget allows)
 * outside every handler, and stops itself when there is nothing to do.
 *
 * TLS (cfg.tls): OpenSSL with two memory BIOs per connection.  Bytes read
 * from the socket go into rbio; SSL_read takes plaintext out into rbuf (or
 * straight into a large frame's buffer) and the framing above is the same.
 * What OpenSSL writes to wbio (handshake, records) is taken out in chunks
 * of at most TLS_CHUNK and handed to uv_write, so a large response never
 * sits whole in the BIO.  A muted TLS connection keeps undecrypted bytes
 * in rbio; resuming decrypts them before reading the socket again.
 */
#include "net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "base/clock.h"
#include "base/err.h"
#include "base/say.h"

#define READ_BUF_BYTES (64 * 1024)
#define DIRECT_READ_MIN (16 * 1024)
#define DEFAULT_MAX_INFLIGHT 100
#define DEFAULT_MAX_CONN_BYTES (8u << 20)
#define DEFAULT_MAX_QUEUED 500
#define DEFAULT_TLS_HANDSHAKE_MS 10000
#define TLS_CHUNK (64 * 1024) /* plaintext per wbio drain */
#define TLS_STAGE (16 * 1024) /* small pieces gathered into one record */

#include "net_int.h"

static void conn_close(struct cn_conn *c);
static void conn_flush(struct cn_conn *c);
static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);
static void on_resume_idle(uv_idle_t *h);
static void on_throttle_end(uv_timer_t *t);
static void tls_pump(struct cn_conn *c);

/* ---- lists and the budget --------------------------------------------- */

static void list_push(struct conn_list *l, struct cn_conn *c)
{
    c->list = l;
    c->lnext = NULL;
    c->lprev = l->tail;
    if (l->tail)
        l->tail->lnext = c;
    else
        l->head = c;
    l->tail = c;
    l->n++;
}

static void list_remove(struct cn_conn *c)
{
    struct conn_list *l = c->list;
    if (!l)
        return;
    if (c->lprev)
        c->lprev->lnext = c->lnext;
    else
        l->head = c->lnext;
    if (c->lnext)
        c->lnext->lprev = c->lprev;
    else
        l->tail = c->lprev;
    l->n--;
    c->list = NULL;
    c->lprev = c->lnext = NULL;
}

static struct cn_conn *list_pop(struct conn_list *l)
{
    struct cn_conn *c = l->head;
    if (c)
        list_remove(c);
    return c;
}

static bool budget_full(const struct cn_server *srv)
{
    const struct cn_server *b = srv->bud;
    if (b->queued >= (size_t)b->cfg.max_queued)
        return true;
    return b->cfg.max_queued_bytes > 0 &&
           b->queued_bytes >= (uint64_t)b->cfg.max_queued_bytes;
}

static bool resume_needed(const struct cn_server *srv)
{
    return srv->resume.head || srv->abandoned.head ||
           (srv->wait.head && !budget_full(srv));
}

/* Starts the idle handle if a list has work it can do now. */
static void kick(struct cn_server *srv)
{
    if (srv->stopping || srv->resume_on || !resume_needed(srv))
        return;
    srv->resume_on = true;
    uv_idle_start(&srv->resume_idle, on_resume_idle);
}

/* The budget freed: connections of every server sharing it may go on. */
static void kick_budget(struct cn_server *srv)
{
    for (struct cn_server *s = srv->bud; s; s = s->peer_next)
        kick(s);
}

/* Takes req out of the broker-wide budget (finished, parked or dropped). */
static void uncount(struct cn_req *req)
{
    struct cn_server *srv = req->conn->srv;
    if (!req->queued)
        return;
    req->queued = false;
    srv->bud->queued--;
    srv->bud->queued_bytes -= req->frame_len;
    kick_budget(srv);
}

/* What a finished request still holds until it is freed: response bytes,
 * the record data they refer to, and the decoded request. */
static size_t resp_bytes(const struct cn_req *req)
{
    return req->resp.cap + req->payload.cap +
           req->resp.refs_cap * sizeof *req->resp.refs + req->arena.total;
}

enum gate { GATE_OPEN, GATE_CONN, GATE_BUDGET, GATE_THROTTLE };

static void throttle_arm(struct cn_server *srv);

static enum gate conn_gate(const struct cn_conn *c)
{
    const struct cn_server *srv = c->srv;
    /* A throttle first: its end is known, the other gates are re-checked
     * when it passes. */
    if (c->throttle_until_ms && cn_clock_mono_ms() < c->throttle_until_ms)
        return GATE_THROTTLE;
    if (c->live >= srv->cfg.max_inflight || c->held >= srv->cfg.max_conn_bytes)
        return GATE_CONN;
    /* Connections already waiting for the budget go first. */
    if (budget_full(srv) || (srv->wait.head && !c->resuming))
        return GATE_BUDGET;
    return GATE_OPEN;
}

static void conn_mute(struct cn_conn *c, enum gate g)
{
    struct cn_server *srv = c->srv;
    if (c->reading) {
        c->reading = false;
        uv_read_stop((uv_stream_t *)&c->tcp);
    }
    if (!c->muted) {
        c->muted = true;
        srv->muted++;
        srv->mutes_total++;
    }
    if (g == GATE_BUDGET && c->list != &srv->wait) {
        list_remove(c);
        list_push(&srv->wait, c);
    }
    if (g == GATE_THROTTLE && c->list != &srv->throttled) {
        list_remove(c);
        list_push(&srv->throttled, c);
        throttle_arm(srv);
    }
    kick(srv);
}

/* Arms the timer for the earliest throttle end among the throttled. */
static void throttle_arm(struct cn_server *srv)
{
    if (srv->stopping)
        return;
    int64_t first = INT64_MAX;
    for (struct cn_conn *c = srv->throttled.head; c; c = c->lnext)
        if (c->throttle_until_ms < first)
            first = c->throttle_until_ms;
    if (first == INT64_MAX) {
        uv_timer_stop(&srv->throttle_timer);
        return;
    }
    int64_t now = cn_clock_mono_ms();
    uv_timer_start(&srv->throttle_timer, on_throttle_end,
                   first > now ? (uint64_t)(first - now) : 0, 0);
}

/* Throttles that have ended go to the resume list, where the other gates
 * are checked again. */
static void on_throttle_end(uv_timer_t *t)
{
    struct cn_server *srv = t->data;
    int64_t now = cn_clock_mono_ms();
    struct cn_conn *c = srv->throttled.head;
    while (c) {
        struct cn_conn *next = c->lnext;
        if (c->throttle_until_ms <= now) {
            c->throttle_until_ms = 0;
            list_remove(c);
            list_push(&srv->resume, c);
        }
        c = next;
    }
    kick(srv);
    throttle_arm(srv);
}

void cn_req_throttle(struct cn_req *req, int64_t ms)
{
    struct cn_conn *c = req->conn;
    if (c->closed || ms <= 0)
        return;
    int64_t until = cn_clock_mono_ms() + ms;
    if (until > c->throttle_until_ms)
        c->throttle_until_ms = until;
    /* Muted now rather than at the next frame, so bytes the client
     * already sent wait too; a connection muted for another reason is
     * moved to the throttled list (its other gate is checked after). */
    if (c->list != &c->srv->throttled)
        conn_mute(c, GATE_THROTTLE);
    else
        throttle_arm(c->srv);
}

/* Called before each new frame: true if c may read one now; else c is
 * muted and the caller keeps what it has not parsed. */
static bool conn_admit(struct cn_conn *c)
{
    enum gate g = conn_gate(c);
    if (g == GATE_OPEN)
        return true;
    conn_mute(c, g);
    return false;
}

static void conn_unref(struct cn_conn *c)
{
    if (--c->refs > 0)
        return;
    SSL_free(c->ssl); /* frees the BIOs too */
    if (c->auth_state && c->auth_free)
        c->auth_free(c->auth_state);
    free(c->rbuf);
    free(c->frame);
    free(c);
}

static void req_free(struct cn_req *req)
{
    struct cn_conn *c = req->conn;
    size_t resp = req->resp_held, bytes = req->frame_len + resp;
    cn_arena_fini(&req->arena);
    cn_wr_fini(&req->resp);
    cn_wr_fini(&req->payload);
    free(req->frame);
    free(req);
    c->live--;
    c->held -= bytes;
    c->resp_held -= resp;
    /* After close the server itself may be gone: only c is safe. */
    if (!c->closed) {
        c->srv->held_bytes -= bytes;
        if (c->muted && !c->list) {
            list_push(&c->srv->resume, c);
            kick(c->srv);
        }
    }
    conn_unref(c);
}

/* ---- writing ---------------------------------------------------------- */

/* Frees a write and its TLS chunks (not its request). */
static void cw_free(struct conn_write *cw)
{
    for (size_t i = 0; i < cw->ntls; i++)
        free(cw->tls[i].base);
    free(cw->tls);
    free(cw);
}

static void on_write(uv_write_t *w, int status)
{
    struct conn_write *cw = (struct conn_write *)w;
    struct cn_conn *c = cw->conn;
    c->refs++;
    c->writes_pending--;
    c->last_write_ms = cn_clock_mono_ms();
    bool close_after = cw->req && cw->req->close_after;
    if (cw->req)
        req_free(cw->req);
    cw_free(cw);
    if (close_after && !c->closed)
        conn_close(c);
    if (status < 0 && !c->closed) {
        CN_DEBUG("write to %s failed: %s", c->peer, uv_strerror(status));
        conn_close(c);
    }
    conn_unref(c);
}

/* ---- TLS output ------------------------------------------------------- */

/* Moves what OpenSSL wrote to wbio into cw's chunks. */
static int tls_take(struct cn_conn *c, struct conn_write *cw)
{
    size_t n;
    while ((n = BIO_ctrl_pending(c->wbio)) > 0) {
        if (cw->ntls == cw->tls_cap) {
            size_t cap = cw->tls_cap ? cw->tls_cap * 2 : 4;
            uv_buf_t *nb = realloc(cw->tls, cap * sizeof *nb);
            if (!nb)
                return CN_ENOMEM;
            cw->tls = nb;
            cw->tls_cap = cap;
        }
        char *buf = malloc(n);
        if (!buf)
            return CN_ENOMEM;
        int got = BIO_read(c->wbio, buf, (int)n);
        if (got <= 0) {
            free(buf);
            return CN_EINVAL;
        }
        cw->tls[cw->ntls++] = uv_buf_init(buf, (unsigned)got);
    }
    return 0;
}

/* Writes cw's chunks to the socket (or frees cw, and req with it, when
 * there are none).  On failure everything is freed and c closed. */
static void tls_submit(struct cn_conn *c, struct conn_write *cw)
{
    int rc = cw->ntls == 0 ? 0
             : uv_write(&cw->w, (uv_stream_t *)&c->tcp, cw->tls,
                        (unsigned)cw->ntls, on_write);
    if (cw->ntls == 0 || rc < 0) {
        bool close_after = cw->req && cw->req->close_after;
        if (cw->req)
            req_free(cw->req);
        cw_free(cw);
        if (rc < 0 || close_after)
            conn_close(c);
        return;
    }
    if (c->writes_pending++ == 0)
        c->last_write_ms = cn_clock_mono_ms();
}

/* Sends whatever OpenSSL has for the peer (handshake, alerts, tickets). */
static void tls_flush_out(struct cn_conn *c)
{
    if (c->closed || BIO_ctrl_pending(c->wbio) == 0)
        return;
    struct conn_write *cw = calloc(1, sizeof *cw);
    if (!cw || tls_take(c, cw)) {
        if (cw)
            cw_free(cw);
        conn_close(c);
        return;
    }
    cw->conn = c;
    tls_submit(c, cw);
}

/* Plaintext gathered for SSL_write: the loop thread is the only user. */
struct tls_out {
    struct cn_conn *c;
    struct conn_write *cw;
    uint8_t stage[TLS_STAGE];
    size_t staged;
    size_t since_take; /* plaintext written since wbio was last drained */
};
static struct tls_out tls_out;

static int tls_write_raw(struct tls_out *o, const uint8_t *p, size_t n)
{
    while (n > 0) {
        size_t k = n > TLS_CHUNK ? TLS_CHUNK : n;
        int w = SSL_write(o->c->ssl, p, (int)k);
        if (w <= 0)
            return CN_EINVAL;
        p += w;
        n -= (size_t)w;
        o->since_take += (size_t)w;
        if (o->since_take >= TLS_CHUNK) {
            if (tls_take(o->c, o->cw))
                return CN_ENOMEM;
            o->since_take = 0;
        }
    }
    return 0;
}

static int tls_stage_flush(struct tls_out *o)
{
    int rc = o->staged ? tls_write_raw(o, o->stage, o->staged) : 0;
    o->staged = 0;
    return rc;
}

/* Small pieces (size field, headers between payload runs) share records;
 * large ones go to SSL_write without another copy. */
static int tls_put(struct tls_out *o, const uint8_t *p, size_t n)
{
    if (o->staged + n <= TLS_STAGE) {
        memcpy(o->stage + o->staged, p, n);
        o->staged += n;
        return 0;
    }
    int rc = tls_stage_flush(o);
    if (rc)
        return rc;
    if (n >= TLS_STAGE)
        return tls_write_raw(o, p, n);
    memcpy(o->stage, p, n);
    o->staged = n;
    return 0;
}

/* Encrypts req's response (size field, bytes and payload runs in order)
 * into cw's chunks. */
static int tls_encode_resp(struct cn_conn *c, struct conn_write *cw)
{
    const struct cn_wr *r = &cw->req->resp;
    struct tls_out *o = &tls_out;
    o->c = c;
    o->cw = cw;
    o->staged = o->since_take = 0;
    int rc = tls_put(o, cw->size, 4);
    size_t at = 0;
    for (size_t i = 0; i < r->nrefs && !rc; i++) {
        if (r->refs[i].pos > at)
            rc = tls_put(o, r->buf + at, r->refs[i].pos - at);
        if (!rc)
            rc = tls_put(o, r->refs[i].ptr, r->refs[i].len);
        at = r->refs[i].pos;
    }
    if (!rc && r->len > at)
        rc = tls_put(o, r->buf + at, r->len - at);
    if (!rc)
        rc = tls_stage_flush(o);
    if (!rc)
        rc = tls_take(c, cw);
    o->c = NULL;
    o->cw = NULL;
    return rc;
}

/* Sends every finished request at the head of the queue, in order.  A
 * request counts against its connection until its write completes. */
static void conn_flush(struct cn_conn *c)
{
    if (c->abandoning)
        return;
    /* Freeing a request may drop the last other reference to c. */
    c->refs++;
    while (c->head && c->head->done) {
        struct cn_req *req = c->head;
        c->head = req->next;
        if (!c->head)
            c->tail = NULL;
        if (c->closed || req->no_response || req->resp.err) {
            if ((req->resp.err || req->close_after) && !c->closed)
                conn_close(c);
            req_free(req);
            continue;
        }
        struct conn_write *cw = calloc(1, sizeof *cw);
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
        if (c->ssl) {
            if (tls_encode_resp(c, cw)) {
                CN_WARN("closing %s: TLS write failed", c->peer);
                cw_free(cw);
                req_free(req);
                conn_close(c);
                continue;
            }
            tls_submit(c, cw);
            continue;
        }
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
        if (c->writes_pending++ == 0)
            c->last_write_ms = cn_clock_mono_ms();
    }
    conn_unref(c);
}

/* Counts the response's bytes against its connection (once; again only
 * for what it grew by since). */
static void hold_response(struct cn_req *req)
{
    struct cn_conn *c = req->conn;
    size_t now = resp_bytes(req);
    if (now <= req->resp_held)
        return;
    c->held += now - req->resp_held;
    c->resp_held += now - req->resp_held;
    c->srv->held_bytes += now - req->resp_held;
    req->resp_held = now;
}

void cn_req_hold_response(struct cn_req *req)
{
    if (!req->done && !req->conn->closed)
        hold_response(req);
}

void cn_req_done(struct cn_req *req)
{
    struct cn_conn *c = req->conn;
    /* After close the server itself may be gone: only c is safe. */
    if (!req->done && !c->closed) {
        if (c->srv->cfg.done_cb)
            c->srv->cfg.done_cb(req, c->srv->opaque);
        uncount(req);
        hold_response(req);
    }
    req->done = true;
    conn_flush(req->conn);
}

void cn_req_park(struct cn_req *req)
{
    if (!req->conn->closed)
        uncount(req);
}

bool cn_req_conn_closed(const struct cn_req *req)
{
    return req->conn->closed;
}

size_t cn_req_conn_room(const struct cn_req *req)
{
    const struct cn_conn *c = req->conn;
    size_t max = c->srv->cfg.max_conn_bytes;
    size_t others = c->resp_held - req->resp_held;
    if (others == 0)
        return SIZE_MAX; /* one answer may exceed the limit */
    return others < max ? max - others : 0;
}

void cn_req_close_conn(struct cn_req *req)
{
    conn_close(req->conn);
}

void cn_req_close_after_response(struct cn_req *req)
{
    struct cn_conn *c = req->conn;
    req->close_after = true;
    if (c->closed)
        return;
    c->close_pending = true;
    c->rpos = c->rlen = 0;
    if (c->reading) {
        c->reading = false;
        uv_read_stop((uv_stream_t *)&c->tcp);
    }
}

/* ---- closing ---------------------------------------------------------- */

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
    list_remove(c);
    if (c->muted)
        srv->muted--;
    srv->held_bytes -= c->held;
    /* Finished requests are dropped now; unfinished ones leave the budget
     * now and are freed by cn_req_done() when their handler gets to them
     * (abandon_cb asks it to hurry). */
    bool unfinished = false;
    struct cn_req **pp = &c->head;
    c->tail = NULL;
    while (*pp) {
        struct cn_req *r = *pp;
        if (r->done) {
            *pp = r->next;
            req_free(r);
        } else {
            if (r->queued) {
                r->queued = false;
                srv->bud->queued--;
                srv->bud->queued_bytes -= r->frame_len;
            }
            unfinished = true;
            c->tail = r;
            pp = &r->next;
        }
    }
    if (unfinished && srv->cfg.abandon_cb && !srv->stopping) {
        c->refs++;
        list_push(&srv->abandoned, c);
    }
    kick_budget(srv);
    srv->pending_closes++;
    uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
}

/* Offers each of a closed connection's unfinished requests to abandon_cb.
 * Nothing is freed while this runs, so the walk stays valid whatever the
 * callback finishes; what it finished is freed after. */
static void conn_abandon(struct cn_server *srv, struct cn_conn *c)
{
    c->abandoning = true;
    for (struct cn_req *r = c->head; r; r = r->next)
        if (!r->done)
            srv->cfg.abandon_cb(r, srv->opaque);
    c->abandoning = false;
    conn_flush(c);
}

/* ---- reading ---------------------------------------------------------- */

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)suggested;
    struct cn_conn *c = h->data;
    /* Exactly the first bytes: what follows may belong to another
     * protocol's reader. */
    if (c->sniffing) {
        c->direct = false;
        *buf = uv_buf_init((char *)c->sniff + c->sniff_have,
                           (unsigned)(sizeof c->sniff - c->sniff_have));
        return;
    }
    if (!c->ssl && c->frame &&
        c->frame_len - c->frame_have >= DIRECT_READ_MIN) {
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
    struct cn_server *srv = c->srv;
    req->conn = c;
    req->frame = c->frame;
    req->frame_len = c->frame_len;
    req->start_us = cn_clock_mono_us();
    req->api_key = -1;
    req->api_version = -1;
    req->raw_token = c->raw_tokens;
    cn_arena_init(&req->arena);
    cn_wr_init(&req->resp, 0);
    cn_wr_init(&req->payload, 0);
    c->frame = NULL;
    c->frame_len = c->frame_have = 0;
    c->size_have = 0;
    c->refs++;
    c->live++;
    c->held += req->frame_len;
    srv->held_bytes += req->frame_len;
    req->queued = true;
    srv->bud->queued++;
    srv->bud->queued_bytes += req->frame_len;
    if (c->tail)
        c->tail->next = req;
    else
        c->head = req;
    c->tail = req;
    srv->cb(req, srv->opaque);
}

/* Feeds bytes from the read buffer into the framing state machine.  If
 * the connection is muted at a frame boundary, the rest stays in rbuf. */
static void consume(struct cn_conn *c, const uint8_t *p, size_t n)
{
    c->rpos = c->rlen = 0;
    while (n > 0 && !c->closed && !c->close_pending) {
        if (!c->frame && c->size_have == 0 && !conn_admit(c)) {
            c->rpos = (size_t)(p - c->rbuf);
            c->rlen = c->rpos + n;
            return;
        }
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
            /* Smallest request: api key, version, correlation id; a bare
             * SASL token has no header.  Before authentication Kafka
             * takes at most sasl.server.max.receive.size. */
            uint32_t min = c->raw_tokens ? 0 : 8;
            size_t max = c->srv->cfg.max_request_bytes;
            if (c->srv->cfg.sasl && !c->authed &&
                max > CN_SASL_MAX_RECEIVE_BYTES)
                max = CN_SASL_MAX_RECEIVE_BYTES;
            if (size < min || size > max || size > INT32_MAX) {
                CN_WARN("closing %s: request size %u outside %u..%zu",
                        c->peer, size, min, max);
                conn_close(c);
                return;
            }
            c->frame = malloc(size ? size : 1);
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

/* ---- TLS input -------------------------------------------------------- */

/* OpenSSL's reasons for a failed handshake, for the log line. */
static void tls_why(struct cn_conn *c, char *out, size_t len)
{
    unsigned long e = ERR_get_error();
    out[0] = '\0';
    if (e)
        ERR_error_string_n(e, out, len);
    /* The usual cause: a client configured for PLAINTEXT. */
    if (e && ERR_GET_REASON(e) == SSL_R_WRONG_VERSION_NUMBER) {
        size_t n = strlen(out);
        snprintf(out + n, len - n,
                 " (not TLS: a client using PLAINTEXT on a TLS listener?)");
    }
    long v = SSL_get_verify_result(c->ssl);
    if (v != X509_V_OK) {
        size_t n = strlen(out);
        snprintf(out + n, len - n, "%sclient certificate: %s",
                 n ? "; " : "", X509_verify_cert_error_string(v));
    }
    if (!out[0])
        snprintf(out, len, "the peer closed or sent no TLS");
    ERR_clear_error();
}

/* After the handshake: the principal from a client certificate. */
static int tls_auth(struct cn_conn *c)
{
    X509 *cert = SSL_get0_peer_certificate(c->ssl);
    if (!cert)
        return 0; /* ssl.client.auth none/requested: User:ANONYMOUS */
    struct cn_server *srv = c->srv;
    /* SASL_SSL: the principal is the SASL login's, as in Kafka; the
     * certificate only had to verify, its mapping rules do not apply. */
    if (srv->cfg.sasl)
        return 0;
    char name[CN_PRINCIPAL_MAX];
    int rc = srv->cfg.tls_principal
                 ? srv->cfg.tls_principal(srv->cfg.listener, cert, name,
                                          sizeof name, srv->opaque)
                 : CN_EINVAL;
    if (rc) {
        CN_WARN("closing %s: no principal for its client certificate",
                c->peer);
        return rc;
    }
    if ((size_t)snprintf(c->principal, sizeof c->principal, "User:%s",
                         name) >= sizeof c->principal) {
        CN_WARN("closing %s: principal of its certificate too long", c->peer);
        return CN_ETOOBIG;
    }
    CN_DEBUG("%s authenticated by certificate as %s", c->peer, c->principal);
    return 0;
}

/* The alert of a failed handshake (a few bytes) is written now, not
 * queued: closing cancels queued writes, and the alert is how the peer
 * learns why (a PLAINTEXT client gets a TLS record back, as from Kafka,
 * and can say "this is a TLS listener").  Best effort. */
static void tls_send_alert_now(struct cn_conn *c)
{
    char buf[512];
    int n;
    /* OpenSSL sends no alert when the very first record is not TLS; Java's
     * SSLEngine (Kafka) does: a fatal unexpected_message, made here. */
    if (BIO_ctrl_pending(c->wbio) == 0 &&
        ERR_GET_REASON(ERR_peek_error()) == SSL_R_WRONG_VERSION_NUMBER) {
        static const char alert[] = {0x15, 0x03, 0x03, 0x00, 0x02, 0x02,
                                     0x0a};
        uv_buf_t b = uv_buf_init((char *)alert, sizeof alert);
        (void)uv_try_write((uv_stream_t *)&c->tcp, &b, 1);
        return;
    }
    while ((n = BIO_read(c->wbio, buf, (int)sizeof buf)) > 0) {
        uv_buf_t b = uv_buf_init(buf, (unsigned)n);
        if (uv_try_write((uv_stream_t *)&c->tcp, &b, 1) != n)
            break;
    }
}

/* Runs the handshake, then decrypts into the framing until OpenSSL wants
 * more bytes or the connection is muted or closed. */
static void tls_pump(struct cn_conn *c)
{
    if (!c->tls_ready) {
        int r = SSL_do_handshake(c->ssl);
        if (r != 1) {
            int e = SSL_get_error(c->ssl, r);
            if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
                tls_flush_out(c); /* our flight */
                return;
            }
            tls_send_alert_now(c);
            char why[256];
            tls_why(c, why, sizeof why);
            CN_WARN("closing %s: TLS handshake failed: %s", c->peer, why);
            conn_close(c);
            return;
        }
        c->tls_ready = true;
        tls_flush_out(c);
        if (tls_auth(c)) {
            conn_close(c);
            return;
        }
    }
    while (!c->closed && !c->muted && !c->close_pending) {
        bool direct = c->frame &&
                      c->frame_len - c->frame_have >= DIRECT_READ_MIN;
        uint8_t *dst = direct ? c->frame + c->frame_have : c->rbuf;
        size_t cap = direct ? c->frame_len - c->frame_have : READ_BUF_BYTES;
        if (cap > INT32_MAX)
            cap = INT32_MAX;
        int n = SSL_read(c->ssl, dst, (int)cap);
        if (n <= 0) {
            int e = SSL_get_error(c->ssl, n);
            if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
                break;
            if (e == SSL_ERROR_ZERO_RETURN) {
                CN_DEBUG("%s sent TLS close_notify", c->peer);
            } else {
                char why[256];
                tls_why(c, why, sizeof why);
                CN_INFO("closing %s: TLS error: %s", c->peer, why);
            }
            tls_flush_out(c);
            conn_close(c);
            return;
        }
        if (direct) {
            c->frame_have += (size_t)n;
            if (c->frame_have == c->frame_len)
                frame_complete(c);
        } else {
            consume(c, c->rbuf, (size_t)n);
        }
    }
    /* Post-handshake messages (TLS 1.3 tickets, key updates). */
    tls_flush_out(c);
}

static void taken_closed(uv_handle_t *h)
{
    free(h);
}

/* Gives the connection's socket to cfg.take_conn: a duplicate descriptor
 * in a handle of its own, because the connection's handle lives inside
 * struct cn_conn and closes with it. */
static void conn_hand_over(struct cn_conn *c)
{
    struct cn_server *srv = c->srv;
    uint8_t first[sizeof c->sniff];
    memcpy(first, c->sniff, sizeof first);
    uv_read_stop((uv_stream_t *)&c->tcp);
    c->reading = false;
    uv_os_fd_t fd;
    int nfd = -1;
    if (uv_fileno((const uv_handle_t *)&c->tcp, &fd) == 0)
        nfd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    conn_close(c);
    if (nfd < 0) {
        CN_WARN("cannot hand over a connection: %s", strerror(errno));
        return;
    }
    uv_tcp_t *t = malloc(sizeof *t);
    if (!t) {
        close(nfd);
        return;
    }
    uv_tcp_init(srv->loop, t);
    if (uv_tcp_open(t, nfd) != 0) {
        close(nfd);
        uv_close((uv_handle_t *)t, taken_closed);
        return;
    }
    if (srv->cfg.take_conn((uv_stream_t *)t, first, sizeof first,
                           srv->opaque) != 0)
        uv_close((uv_handle_t *)t, taken_closed);
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
    if (nread == 0 || c->close_pending)
        return;
    c->last_active_ms = cn_clock_mono_ms();
    if (c->sniffing) {
        c->sniff_have += (size_t)nread;
        if (c->sniff_have < sizeof c->sniff)
            return;
        c->sniffing = false;
        if (c->srv->cfg.first_bytes(c->sniff, sizeof c->sniff,
                                    c->srv->opaque)) {
            conn_hand_over(c);
            return;
        }
        memcpy(c->rbuf, c->sniff, sizeof c->sniff);
        consume(c, c->rbuf, sizeof c->sniff);
        return;
    }
    if (c->ssl) {
        if (BIO_write(c->rbio, c->rbuf, (int)nread) != (int)nread) {
            conn_close(c);
            return;
        }
        tls_pump(c);
        return;
    }
    if (c->direct) {
        c->frame_have += (size_t)nread;
        if (c->frame_have == c->frame_len)
            frame_complete(c);
        return;
    }
    consume(c, c->rbuf, (size_t)nread);
}

/* Takes c off a list and reads it again if its limits and the budget now
 * allow: first what was left in rbuf, then the socket. */
static void conn_resume(struct cn_conn *c, bool from_wait)
{
    if (c->closed || !c->muted || c->close_pending)
        return;
    c->refs++;
    c->resuming = from_wait;
    enum gate g = conn_gate(c);
    if (g != GATE_OPEN) {
        conn_mute(c, g);
    } else {
        c->muted = false;
        c->srv->muted--;
        if (c->rlen > c->rpos)
            consume(c, c->rbuf + c->rpos, c->rlen - c->rpos);
        if (c->ssl && !c->closed && !c->muted)
            tls_pump(c);
        if (!c->closed && !c->muted) {
            c->reading = true;
            uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, read_cb);
        }
    }
    c->resuming = false;
    conn_unref(c);
}

static void on_resume_idle(uv_idle_t *h)
{
    struct cn_server *srv = h->data;
    struct cn_conn *c;
    /* Closed connections first: their parked requests hold memory. */
    while (!srv->stopping && (c = list_pop(&srv->abandoned))) {
        conn_abandon(srv, c);
        conn_unref(c);
    }
    /* Each list once over: what is muted again waits for the next turn. */
    for (size_t n = srv->resume.n; n > 0 && !srv->stopping; n--) {
        if (!(c = list_pop(&srv->resume)))
            break;
        conn_resume(c, false);
    }
    for (size_t n = srv->wait.n; n > 0 && !srv->stopping; n--) {
        if (budget_full(srv) || !(c = list_pop(&srv->wait)))
            break;
        conn_resume(c, true);
    }
    if (srv->stopping || !resume_needed(srv)) {
        srv->resume_on = false;
        uv_idle_stop(h);
    }
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
    strcpy(c->principal, "User:ANONYMOUS");
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
    c->accepted_ms = cn_clock_mono_ms();
    if (srv->cfg.tls) {
        c->ssl = SSL_new(srv->cfg.tls);
        c->rbio = BIO_new(BIO_s_mem());
        c->wbio = BIO_new(BIO_s_mem());
        if (!c->ssl || !c->rbio || !c->wbio) {
            BIO_free(c->rbio);
            BIO_free(c->wbio);
            SSL_free(c->ssl);
            c->ssl = NULL;
            srv->pending_closes++;
            c->closed = true;
            uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
            return;
        }
        /* Empty means "wait for more", not end of stream. */
        BIO_set_mem_eof_return(c->rbio, -1);
        BIO_set_mem_eof_return(c->wbio, -1);
        SSL_set_bio(c->ssl, c->rbio, c->wbio);
        SSL_set_accept_state(c->ssl);
    }
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
    c->sniffing = srv->cfg.first_bytes && srv->cfg.take_conn && !c->ssl;
    c->reading = true;
    uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, read_cb);
}

/* True if the peer of a muted connection has closed: a muted connection
 * is not read, so it would never see the EOF (its unread requests may
 * come before it), and requests parked for it would wait out their time.
 * TCP_INFO tells from the state alone (FIN received: CLOSE_WAIT). */
static bool peer_gone(const struct cn_conn *c)
{
    uv_os_fd_t fd;
    if (uv_fileno((const uv_handle_t *)&c->tcp, &fd) != 0)
        return false;
    struct tcp_info ti;
    socklen_t len = sizeof ti;
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0)
        return false;
    return ti.tcpi_state == TCP_CLOSE_WAIT || ti.tcpi_state == TCP_CLOSE ||
           ti.tcpi_state == TCP_LAST_ACK;
}

/* Closes connections idle for connections.max.idle.ms: nothing read and
 * no request outstanding, or a response pending that the peer has taken
 * no byte of for that long (it is not reading; Kafka closes those too);
 * and muted connections whose peer has gone. */
static void idle_check(uv_timer_t *t)
{
    struct cn_server *srv = t->data;
    int64_t now = cn_clock_mono_ms();
    struct cn_conn *c = srv->conns;
    while (c) {
        struct cn_conn *next = c->next;
        if (c->muted && peer_gone(c)) {
            CN_DEBUG("closing %s: the peer closed while it was not read",
                     c->peer);
            conn_close(c);
        } else if (c->ssl && !c->tls_ready &&
                   now - c->accepted_ms > srv->cfg.tls_handshake_ms) {
            CN_WARN("closing %s: TLS handshake not done after %lld ms "
                    "(cairn.ssl.handshake.timeout.ms)",
                    c->peer, (long long)(now - c->accepted_ms));
            conn_close(c);
        } else if (srv->cfg.idle_ms < 0) {
            /* never idle */
        } else if (!c->head && now - c->last_active_ms > srv->cfg.idle_ms) {
            CN_DEBUG("closing idle connection %s", c->peer);
            conn_close(c);
        } else if (c->writes_pending > 0 &&
                   now - c->last_write_ms > srv->cfg.idle_ms) {
            CN_INFO("closing %s: it has read no response for %lld ms",
                    c->peer, (long long)(now - c->last_write_ms));
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
        srv->cfg.max_inflight = DEFAULT_MAX_INFLIGHT;
    if (srv->cfg.max_conn_bytes == 0)
        srv->cfg.max_conn_bytes = DEFAULT_MAX_CONN_BYTES;
    if (srv->cfg.max_queued <= 0)
        srv->cfg.max_queued = DEFAULT_MAX_QUEUED;
    if (srv->cfg.tls_handshake_ms <= 0)
        srv->cfg.tls_handshake_ms = DEFAULT_TLS_HANDSHAKE_MS;
    srv->cb = cb;
    srv->opaque = opaque;
    srv->bud = srv;
    if (cfg->share_budget) {
        srv->bud = cfg->share_budget->bud;
        srv->peer_next = srv->bud->peer_next;
    }
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
    uint64_t every = (cfg->idle_ms >= 0 && cfg->idle_ms <= 10000) ||
                             (cfg->tls && srv->cfg.tls_handshake_ms <= 10000)
                         ? 100
                         : 1000;
    uv_timer_start(&srv->idle_timer, idle_check, every, every);
    uv_idle_init(loop, &srv->resume_idle);
    srv->resume_idle.data = srv;
    uv_timer_init(loop, &srv->throttle_timer);
    srv->throttle_timer.data = srv;
    if (srv->bud != srv)
        srv->bud->peer_next = srv;
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

void cn_server_get_stats(const struct cn_server *srv,
                         struct cn_server_stats *out)
{
    out->queued = srv->bud->queued;
    out->queued_bytes = srv->bud->queued_bytes;
    out->held_bytes = srv->held_bytes;
    out->muted = srv->muted;
    out->throttled = srv->throttled.n;
    out->mutes_total = srv->mutes_total;
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
    /* The broker ends its waits itself on the way down. */
    struct cn_conn *c;
    while ((c = list_pop(&srv->abandoned)))
        conn_unref(c);
    srv->pending_closes += 4;
    uv_timer_stop(&srv->idle_timer);
    uv_timer_stop(&srv->throttle_timer);
    uv_close((uv_handle_t *)&srv->throttle_timer, on_server_handle_closed);
    uv_idle_stop(&srv->resume_idle);
    uv_close((uv_handle_t *)&srv->idle_timer, on_server_handle_closed);
    uv_close((uv_handle_t *)&srv->resume_idle, on_server_handle_closed);
    uv_close((uv_handle_t *)&srv->listener, on_server_handle_closed);
}
