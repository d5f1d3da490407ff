/* test_http.c - the metrics endpoint's HTTP request parser and server. */
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "base/err.h"
#include "net/http.h"
#include "unit.h"

static int parse(const char *s, struct cn_http_req *r)
{
    return cn_http_parse(s, strlen(s), CN_HTTP_MAX_HEAD, r);
}

UNIT_TEST(parse_simple_get)
{
    struct cn_http_req r;
    const char *s = "GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\n"
                    "Accept: */*\r\n\r\nBODY";
    CHECK_EQ(parse(s, &r), 0);
    CHECK(strcmp(r.method, "GET") == 0);
    CHECK(strcmp(r.path, "/metrics") == 0);
    CHECK_EQ(r.minor_version, 1);
    CHECK_EQ(r.head_len, strlen(s) - 4);
}

UNIT_TEST(parse_bare_lf_and_leading_crlf)
{
    struct cn_http_req r;
    CHECK_EQ(parse("\r\nHEAD /healthz HTTP/1.0\nHost: x\n\n", &r), 0);
    CHECK(strcmp(r.method, "HEAD") == 0);
    CHECK(strcmp(r.path, "/healthz") == 0);
    CHECK_EQ(r.minor_version, 0);
    CHECK_EQ(parse("GET / HTTP/1.1\r\n\r\n", &r), 0);
    CHECK(strcmp(r.path, "/") == 0);
}

UNIT_TEST(parse_needs_more)
{
    struct cn_http_req r;
    static const char *const partial[] = {
        "", "G", "GET /metrics", "GET /metrics HTTP/1.1\r\n",
        "GET /metrics HTTP/1.1\r\nHost: a\r\n", "GET / HTTP/1.1\r\n\r",
    };
    for (size_t i = 0; i < sizeof partial / sizeof partial[0]; i++)
        CHECK_EQ(parse(partial[i], &r), CN_ETRUNC);
    /* Every prefix of a good head needs more; the whole one parses. */
    const char *s = "POST /x HTTP/1.1\r\nA: b\r\n\r\n";
    for (size_t n = 0; n < strlen(s); n++)
        CHECK_EQ(cn_http_parse(s, n, CN_HTTP_MAX_HEAD, &r), CN_ETRUNC);
    CHECK_EQ(parse(s, &r), 0);
}

UNIT_TEST(parse_rejects_garbage)
{
    struct cn_http_req r;
    static const char *const bad[] = {
        "\x16\x03\x01\x02\x05\x01\n", /* TLS hello */
        "\x16\x03\x01", /* the same, before any line end */
        "GET\r\n\r\n",
        "GET  / HTTP/1.1\r\n\r\n",
        "GET / HTTP/2.0\r\n\r\n",
        "GET / HTTP/1.1 extra\r\n\r\n",
        "GET http://h/ HTTP/1.1\r\n\r\n",
        "GET / HTTP/1.x\r\n\r\n",
        "VERYLONGMETHODNAME / HTTP/1.1\r\n\r\n",
        "GET / HTTP/1.1\r\nno colon here\r\n\r\n",
        "GET / HTTP/1.1\r\n: empty name\r\n\r\n",
        "GET / HTTP/1.1\r\nA: b\x01\r\n\r\n",
        "GET /\x7f HTTP/1.1\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = parse(bad[i], &r);
        if (rc != CN_EINVAL)
            fprintf(stderr, "  case %zu: rc %d\n", i, rc);
        CHECK_EQ(rc, CN_EINVAL);
    }
}

UNIT_TEST(parse_limits)
{
    struct cn_http_req r;
    size_t n = CN_HTTP_MAX_HEAD + 100;
    char *s = malloc(n + 1);
    /* A header that never ends. */
    strcpy(s, "GET / HTTP/1.1\r\nX: ");
    memset(s + strlen(s), 'a', n - strlen(s));
    s[n] = '\0';
    CHECK_EQ(cn_http_parse(s, n, CN_HTTP_MAX_HEAD, &r), CN_ETOOBIG);
    CHECK_EQ(cn_http_parse(s, CN_HTTP_MAX_HEAD, CN_HTTP_MAX_HEAD, &r),
             CN_ETOOBIG);
    CHECK_EQ(cn_http_parse(s, CN_HTTP_MAX_HEAD - 1, CN_HTTP_MAX_HEAD, &r),
             CN_ETRUNC);
    /* A request line that never ends. */
    strcpy(s, "GET /");
    memset(s + 5, 'b', n - 5);
    CHECK_EQ(cn_http_parse(s, n, CN_HTTP_MAX_HEAD, &r), CN_ETOOBIG);
    /* A target longer than the path buffer. */
    size_t tl = CN_HTTP_MAX_PATH + 10;
    memcpy(s, "GET /", 5);
    memset(s + 5, 'c', tl);
    strcpy(s + 5 + tl, " HTTP/1.1\r\n\r\n");
    CHECK_EQ(parse(s, &r), CN_EBADLEN);
    /* Exactly at the limit still parses. */
    const char *tail = "\r\n\r\n";
    memset(s, 0, n);
    strcpy(s, "GET / HTTP/1.1\r\nX: ");
    size_t fill = CN_HTTP_MAX_HEAD - strlen(s) - strlen(tail);
    memset(s + strlen(s), 'd', fill);
    strcat(s, tail);
    CHECK_EQ(strlen(s), CN_HTTP_MAX_HEAD);
    CHECK_EQ(parse(s, &r), 0);
    CHECK_EQ(r.head_len, CN_HTTP_MAX_HEAD);
    free(s);
}

/* ---- A live server and a libuv client on one loop ---- */

struct client {
    uv_tcp_t tcp;
    uv_connect_t conn;
    uv_write_t w;
    const char *req;
    size_t req_len;
    char resp[1 << 16];
    size_t have;
    bool eof;
    struct cn_http_server *srv;
    bool stop_server;
    bool closed;
};

static void on_handler(const struct cn_http_req *req,
                       struct cn_http_resp *resp, void *opaque)
{
    (void)opaque;
    if (strcmp(req->path, "/hello") == 0)
        cn_wr_raw(&resp->body, "hello\n", 6);
    else
        resp->status = 404;
}

static void c_alloc(uv_handle_t *h, size_t s, uv_buf_t *buf)
{
    struct client *c = h->data;
    (void)s;
    *buf = uv_buf_init(c->resp + c->have,
                       (unsigned)(sizeof c->resp - 1 - c->have));
}

static void c_closed(uv_handle_t *h)
{
    struct client *c = h->data;
    c->closed = true;
    if (c->stop_server)
        cn_http_stop(c->srv);
}

static void c_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    struct client *c = s->data;
    (void)buf;
    if (n > 0) {
        c->have += (size_t)n;
        return;
    }
    if (n < 0) {
        c->eof = n == UV_EOF;
        uv_close((uv_handle_t *)&c->tcp, c_closed);
    }
}

static void c_written(uv_write_t *w, int status)
{
    (void)w;
    (void)status;
}

static void c_connected(uv_connect_t *cr, int status)
{
    struct client *c = cr->data;
    if (status < 0) {
        uv_close((uv_handle_t *)&c->tcp, c_closed);
        return;
    }
    uv_read_start((uv_stream_t *)&c->tcp, c_alloc, c_read);
    if (c->req_len) {
        uv_buf_t b = uv_buf_init((char *)c->req, (unsigned)c->req_len);
        uv_write(&c->w, (uv_stream_t *)&c->tcp, &b, 1, c_written);
    }
}

static void client_start(uv_loop_t *loop, struct client *c,
                         struct cn_http_server *srv, const char *req,
                         size_t len)
{
    memset(c, 0, sizeof *c);
    c->req = req;
    c->req_len = len;
    c->srv = srv;
    uv_tcp_init(loop, &c->tcp);
    c->tcp.data = c;
    c->conn.data = c;
    struct sockaddr_in a;
    uv_ip4_addr("127.0.0.1", cn_http_port(srv), &a);
    uv_tcp_connect(&c->conn, &c->tcp, (struct sockaddr *)&a, c_connected);
}

/* Sends req to a fresh server and returns the whole response. */
static void roundtrip(const char *req, size_t len, struct client *c)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    struct cn_http_config cfg = {.host = "127.0.0.1", .port = 0};
    struct cn_http_server *srv = NULL;
    CHECK_EQ(cn_http_start(&loop, &cfg, on_handler, NULL, &srv), 0);
    client_start(&loop, c, srv, req, len);
    c->stop_server = true;
    uv_run(&loop, UV_RUN_DEFAULT);
    c->resp[c->have] = '\0';
    CHECK_EQ(uv_loop_close(&loop), 0);
}

static bool starts(const struct client *c, const char *prefix)
{
    bool ok = strncmp(c->resp, prefix, strlen(prefix)) == 0;
    if (!ok)
        fprintf(stderr, "  got: %.80s\n", c->resp);
    return ok;
}

UNIT_TEST(server_answers)
{
    static struct client c;
    const char *r = "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n";
    roundtrip(r, strlen(r), &c);
    CHECK(starts(&c, "HTTP/1.1 200 OK\r\n"));
    CHECK(strstr(c.resp, "Content-Length: 6\r\n") != NULL);
    CHECK(strstr(c.resp, "Connection: close\r\n") != NULL);
    CHECK(strstr(c.resp, "\r\n\r\nhello\n") != NULL);
    CHECK(c.eof);

    r = "HEAD /hello HTTP/1.1\r\n\r\n";
    roundtrip(r, strlen(r), &c);
    CHECK(starts(&c, "HTTP/1.1 200 OK\r\n"));
    CHECK(strstr(c.resp, "Content-Length: 6\r\n") != NULL);
    CHECK(strstr(c.resp, "hello") == NULL);

    r = "GET /nope HTTP/1.1\r\n\r\n";
    roundtrip(r, strlen(r), &c);
    CHECK(starts(&c, "HTTP/1.1 404 Not Found\r\n"));

    r = "POST /hello HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc";
    roundtrip(r, strlen(r), &c);
    CHECK(starts(&c, "HTTP/1.1 405 Method Not Allowed\r\n"));
    CHECK(strstr(c.resp, "Allow: GET, HEAD\r\n") != NULL);

    r = "\x16\x03\x01 garbage\n";
    roundtrip(r, strlen(r), &c);
    CHECK(starts(&c, "HTTP/1.1 400 Bad Request\r\n"));
}

UNIT_TEST(server_oversized_head)
{
    static struct client c;
    size_t n = 64 * 1024;
    char *r = malloc(n);
    memset(r, 'a', n);
    memcpy(r, "GET / HTTP/1.1\r\nX: ", 19);
    roundtrip(r, n, &c);
    CHECK(starts(&c, "HTTP/1.1 431 Request Header Fields Too Large\r\n"));
    free(r);
}

UNIT_TEST(server_closes_silent_client)
{
    /* A client that connects and says nothing is closed at the
     * deadline; the test's loop would otherwise never end. */
    uv_loop_t loop;
    uv_loop_init(&loop);
    struct cn_http_config cfg = {.port = 0, .idle_ms = 300};
    struct cn_http_server *srv = NULL;
    CHECK_EQ(cn_http_start(&loop, &cfg, on_handler, NULL, &srv), 0);
    static struct client c;
    client_start(&loop, &c, srv, NULL, 0);
    c.stop_server = true;
    uint64_t t0 = uv_hrtime();
    uv_run(&loop, UV_RUN_DEFAULT);
    double ms = (double)(uv_hrtime() - t0) / 1e6;
    CHECK(ms >= 250 && ms < 3000);
    CHECK_EQ(c.have, 0);
    CHECK_EQ(uv_loop_close(&loop), 0);
}

UNIT_TEST(server_limits_connections)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    struct cn_http_config cfg = {.port = 0, .max_conns = 2, .idle_ms = 400};
    struct cn_http_server *srv = NULL;
    CHECK_EQ(cn_http_start(&loop, &cfg, on_handler, NULL, &srv), 0);
    static struct client c[4];
    for (int i = 0; i < 4; i++)
        client_start(&loop, &c[i], srv, NULL, 0);
    /* Let all four connect; two are refused at accept. */
    for (int i = 0; i < 20; i++)
        uv_run(&loop, UV_RUN_NOWAIT);
    CHECK(cn_http_conn_count(srv) <= 2);
    /* The accepted ones are closed at their deadline. */
    while (!(c[0].closed && c[1].closed && c[2].closed && c[3].closed))
        uv_run(&loop, UV_RUN_ONCE);
    CHECK_EQ(cn_http_conn_count(srv), 0);
    cn_http_stop(srv);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ(uv_loop_close(&loop), 0);
}

UNIT_TEST(server_bind_conflict)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    struct cn_http_config cfg = {.port = 0};
    struct cn_http_server *a = NULL, *b = NULL;
    CHECK_EQ(cn_http_start(&loop, &cfg, on_handler, NULL, &a), 0);
    cfg.port = cn_http_port(a);
    CHECK(cn_http_start(&loop, &cfg, on_handler, NULL, &b) < 0);
    CHECK(b == NULL);
    cn_http_stop(a);
    cn_http_stop(NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    CHECK_EQ(uv_loop_close(&loop), 0);
}

UNIT_MAIN(parse_simple_get, parse_bare_lf_and_leading_crlf, parse_needs_more,
          parse_rejects_garbage, parse_limits, server_answers,
          server_oversized_head, server_closes_silent_client,
          server_limits_connections, server_bind_conflict)
