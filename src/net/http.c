/*
 * http.c - the metrics endpoint's HTTP/1.1 server; see http.h.
 *
 * A connection goes READING (head bytes collect in a buffer of
 * CN_HTTP_MAX_HEAD) -> WRITING (one response, then close) -> DRAINING
 * (write side shut down; what the client still sends is read and dropped
 * until it closes, so the kernel does not answer unread bytes with a RST
 * that could destroy the response before the client reads it).  A
 * server-wide timer closes connections past their deadline, which bounds
 * every state.
 */
#include "net/http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/err.h"
#include "base/say.h"

#define DEFAULT_MAX_CONNS 64
#define DEFAULT_IDLE_MS 5000
#define LINGER_MS 1000       /* longest drain after the response */
#define CHECK_EVERY_MS 250   /* deadline timer period */

enum conn_state { READING, WRITING, DRAINING };

struct http_conn {
    uv_tcp_t tcp;
    uv_write_t write_req;
    uv_shutdown_t shutdown_req;
    struct cn_http_server *srv;
    struct http_conn *prev, *next; /* server's list */
    enum conn_state state;
    bool closed;                   /* uv_close called */
    int64_t deadline_ms;           /* monotonic; closed when passed */
    size_t have;                   /* bytes of buf filled */
    char buf[CN_HTTP_MAX_HEAD];    /* request head being read */
    char head[512];                /* response status line and headers */
    struct cn_http_resp resp;
};

struct cn_http_server {
    uv_loop_t *loop;
    uv_tcp_t listener;
    uv_timer_t timer;
    struct cn_http_config cfg;
    cn_http_cb cb;
    void *opaque;
    struct http_conn *conns;
    size_t conn_count;
    bool stopping;
    int pending_closes; /* handles whose close callback has not run */
};

/* ---- Parsing ---- */

static bool is_tchar(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c >= '0' && c <= '9') || (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* Checks the request line buf[0..n) (line end excluded) into out. */
static int parse_request_line(const char *s, size_t n, struct cn_http_req *out)
{
    const char *end = s + n, *p = s;
    if (n > 0 && end[-1] == '\r')
        end--;
    while (p < end && is_tchar(*p))
        p++;
    size_t mlen = (size_t)(p - s);
    if (mlen == 0 || mlen >= sizeof out->method || p == end || *p != ' ')
        return CN_EINVAL;
    memcpy(out->method, s, mlen);
    out->method[mlen] = '\0';
    const char *t = ++p;
    while (p < end && *p > 0x20 && *p < 0x7f)
        p++;
    size_t tlen = (size_t)(p - t);
    if (tlen == 0 || p == end || *p != ' ')
        return CN_EINVAL;
    /* Origin form only ("/path?query"); nothing here proxies. */
    if (*t != '/')
        return CN_EINVAL;
    if (tlen >= sizeof out->path)
        return CN_EBADLEN;
    size_t plen = strcspn(t, "?# ");
    if (plen > tlen)
        plen = tlen;
    memcpy(out->path, t, plen);
    out->path[plen] = '\0';
    p++;
    if (end - p != 8 || memcmp(p, "HTTP/1.", 7) != 0 || p[7] < '0' ||
        p[7] > '9')
        return CN_EINVAL;
    out->minor_version = p[7] - '0';
    return 0;
}

/* A header line (line end excluded) must be "name: value"; the values
 * themselves are not needed. */
static int check_header_line(const char *s, size_t n)
{
    if (n > 0 && s[n - 1] == '\r')
        n--;
    size_t i = 0;
    while (i < n && is_tchar(s[i]))
        i++;
    if (i == 0 || i == n || s[i] != ':')
        return CN_EINVAL;
    for (; i < n; i++)
        if ((unsigned char)s[i] < 0x20 && s[i] != '\t')
            return CN_EINVAL;
    return 0;
}

int cn_http_parse(const char *buf, size_t len, size_t max_head,
                  struct cn_http_req *out)
{
    size_t limit = len < max_head ? len : max_head;
    size_t pos = 0;
    /* RFC 9112 2.2: empty lines before the request line are ignored. */
    while (pos < limit && (buf[pos] == '\r' || buf[pos] == '\n'))
        pos++;
    const char *line = buf + pos;
    const char *nl = memchr(line, '\n', limit - pos);
    if (!nl) {
        /* Refuse a non-HTTP client (TLS, Kafka) at its first bytes
         * instead of waiting for a line end that may never come. */
        for (const char *p = line; p < buf + limit && *p != ' '; p++)
            if (!is_tchar(*p))
                return CN_EINVAL;
        return len >= max_head ? CN_ETOOBIG : CN_ETRUNC;
    }
    int rc = parse_request_line(line, (size_t)(nl - line), out);
    if (rc)
        return rc;
    pos = (size_t)(nl - buf) + 1;
    for (;;) {
        nl = memchr(buf + pos, '\n', limit - pos);
        if (!nl)
            return len >= max_head ? CN_ETOOBIG : CN_ETRUNC;
        size_t n = (size_t)(nl - (buf + pos));
        if (n == 0 || (n == 1 && buf[pos] == '\r')) {
            out->head_len = pos + n + 1;
            return 0;
        }
        rc = check_header_line(buf + pos, n);
        if (rc)
            return rc;
        pos += n + 1;
    }
}

const char *cn_http_reason(int status)
{
    switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 414: return "URI Too Long";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    }
    return "Unknown";
}

/* ---- Connections ---- */

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf);
static void read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);

static void server_close_done(struct cn_http_server *srv)
{
    if (--srv->pending_closes == 0 && srv->stopping)
        free(srv);
}

static void on_conn_closed(uv_handle_t *h)
{
    struct http_conn *c = h->data;
    struct cn_http_server *srv = c->srv;
    cn_wr_fini(&c->resp.body);
    free(c);
    server_close_done(srv);
}

static void conn_close(struct http_conn *c)
{
    if (c->closed)
        return;
    c->closed = true;
    struct cn_http_server *srv = c->srv;
    if (c->prev)
        c->prev->next = c->next;
    else
        srv->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    srv->conn_count--;
    srv->pending_closes++;
    uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
}

static void on_shutdown(uv_shutdown_t *sd, int status)
{
    struct http_conn *c = sd->data;
    if (c->closed)
        return;
    if (status < 0) {
        conn_close(c);
        return;
    }
    c->state = DRAINING;
    int64_t linger = cn_clock_mono_ms() + LINGER_MS;
    if (linger < c->deadline_ms)
        c->deadline_ms = linger;
}

static void on_write(uv_write_t *w, int status)
{
    struct http_conn *c = w->data;
    if (c->closed)
        return;
    c->shutdown_req.data = c;
    if (status < 0 ||
        uv_shutdown(&c->shutdown_req, (uv_stream_t *)&c->tcp,
                    on_shutdown) < 0)
        conn_close(c);
}

/* Answers the request in c->buf (parse result rc) and starts the write. */
static void respond(struct http_conn *c, int rc, const struct cn_http_req *req)
{
    struct cn_http_server *srv = c->srv;
    struct cn_http_resp *resp = &c->resp;
    bool head_only = false, allow = false;
    c->state = WRITING;
    resp->status = 200;
    resp->content_type = NULL;
    switch (rc) {
    case 0:
        head_only = strcmp(req->method, "HEAD") == 0;
        if (!head_only && strcmp(req->method, "GET") != 0) {
            resp->status = 405;
            allow = true;
        } else {
            srv->cb(req, resp, srv->opaque);
        }
        break;
    case CN_ETOOBIG: resp->status = 431; break;
    case CN_EBADLEN: resp->status = 414; break;
    default: resp->status = 400; break;
    }
    if (resp->body.err) {
        cn_wr_reset(&resp->body);
        resp->status = 500;
    }
    if (resp->status != 200 && resp->body.len == 0) {
        const char *r = cn_http_reason(resp->status);
        cn_wr_raw(&resp->body, r, strlen(r));
        cn_wr_raw(&resp->body, "\n", 1);
    }
    int n = snprintf(c->head, sizeof c->head,
                     "HTTP/1.1 %d %s\r\n"
                     "Content-Type: %s\r\n"
                     "Content-Length: %zu\r\n"
                     "Connection: close\r\n"
                     "%s\r\n",
                     resp->status, cn_http_reason(resp->status),
                     resp->content_type ? resp->content_type
                                        : "text/plain; charset=utf-8",
                     resp->body.len, allow ? "Allow: GET, HEAD\r\n" : "");
    if (n < 0 || (size_t)n >= sizeof c->head) {
        conn_close(c);
        return;
    }
    uv_buf_t bufs[2];
    unsigned nb = 0;
    bufs[nb++] = uv_buf_init(c->head, (unsigned)n);
    if (!head_only && resp->body.len)
        bufs[nb++] = uv_buf_init((char *)resp->body.buf,
                                 (unsigned)resp->body.len);
    c->write_req.data = c;
    if (uv_write(&c->write_req, (uv_stream_t *)&c->tcp, bufs, nb,
                 on_write) < 0)
        conn_close(c);
}

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    /* After the head, bytes are only read to be dropped; one buffer
     * serves every connection because the loop reads one at a time. */
    static char discard[4096];
    struct http_conn *c = h->data;
    (void)suggested;
    if (c->state == READING && c->have < sizeof c->buf)
        *buf = uv_buf_init(c->buf + c->have,
                           (unsigned)(sizeof c->buf - c->have));
    else
        *buf = uv_buf_init(discard, sizeof discard);
}

static void read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    struct http_conn *c = s->data;
    (void)buf;
    if (c->closed)
        return;
    if (nread < 0) {
        conn_close(c);
        return;
    }
    if (nread == 0 || c->state != READING)
        return;
    c->have += (size_t)nread;
    struct cn_http_req req;
    int rc = cn_http_parse(c->buf, c->have, sizeof c->buf, &req);
    if (rc == CN_ETRUNC)
        return;
    respond(c, rc, &req);
}

static void on_connection(uv_stream_t *ls, int status)
{
    struct cn_http_server *srv = ls->data;
    if (status < 0 || srv->stopping)
        return;
    struct http_conn *c = calloc(1, sizeof *c);
    if (!c)
        return;
    c->srv = srv;
    cn_wr_init(&c->resp.body, 0);
    uv_tcp_init(srv->loop, &c->tcp);
    c->tcp.data = c;
    /* Link first so conn_close can unlink on every path below. */
    c->next = srv->conns;
    if (srv->conns)
        srv->conns->prev = c;
    srv->conns = c;
    srv->conn_count++;
    if (uv_accept(ls, (uv_stream_t *)&c->tcp) < 0) {
        conn_close(c);
        return;
    }
    if (srv->conn_count > (size_t)srv->cfg.max_conns) {
        CN_DEBUG("http: %zu connections open, refusing another",
                 srv->conn_count - 1);
        conn_close(c);
        return;
    }
    c->deadline_ms = cn_clock_mono_ms() + srv->cfg.idle_ms;
    if (uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, read_cb) < 0)
        conn_close(c);
}

static void on_timer(uv_timer_t *t)
{
    struct cn_http_server *srv = t->data;
    int64_t now = cn_clock_mono_ms();
    struct http_conn *c = srv->conns;
    while (c) {
        struct http_conn *next = c->next;
        if (now >= c->deadline_ms)
            conn_close(c);
        c = next;
    }
}

int cn_http_start(uv_loop_t *loop, const struct cn_http_config *cfg,
                  cn_http_cb cb, void *opaque, struct cn_http_server **out)
{
    struct cn_http_server *srv = calloc(1, sizeof *srv);
    if (!srv)
        return -ENOMEM;
    srv->loop = loop;
    srv->cfg = *cfg;
    if (srv->cfg.max_conns <= 0)
        srv->cfg.max_conns = DEFAULT_MAX_CONNS;
    if (srv->cfg.idle_ms <= 0)
        srv->cfg.idle_ms = DEFAULT_IDLE_MS;
    srv->cb = cb;
    srv->opaque = opaque;
    struct sockaddr_storage addr;
    const char *host = cfg->host && cfg->host[0] ? cfg->host : "127.0.0.1";
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
        rc = uv_listen((uv_stream_t *)&srv->listener, 128, on_connection);
    if (rc < 0) {
        /* Running the loop once lets the close finish before free. */
        uv_close((uv_handle_t *)&srv->listener, NULL);
        uv_run(loop, UV_RUN_NOWAIT);
        free(srv);
        return rc;
    }
    uv_timer_init(loop, &srv->timer);
    srv->timer.data = srv;
    uv_timer_start(&srv->timer, on_timer, CHECK_EVERY_MS, CHECK_EVERY_MS);
    *out = srv;
    return 0;
}

int cn_http_port(const struct cn_http_server *srv)
{
    struct sockaddr_storage ss;
    int len = sizeof ss;
    if (uv_tcp_getsockname(&srv->listener, (struct sockaddr *)&ss, &len) < 0)
        return -1;
    if (ss.ss_family == AF_INET6)
        return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    return ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

size_t cn_http_conn_count(const struct cn_http_server *srv)
{
    return srv->conn_count;
}

static void on_server_handle_closed(uv_handle_t *h)
{
    server_close_done(h->data);
}

void cn_http_stop(struct cn_http_server *srv)
{
    if (!srv || srv->stopping)
        return;
    srv->stopping = true;
    while (srv->conns)
        conn_close(srv->conns);
    srv->pending_closes += 2;
    uv_timer_stop(&srv->timer);
    uv_close((uv_handle_t *)&srv->timer, on_server_handle_closed);
    uv_close((uv_handle_t *)&srv->listener, on_server_handle_closed);
}
