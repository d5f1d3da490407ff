/*
 * test_peer.c - the broker-to-broker client (node/peer.h) over loopback.
 *
 * A small server on the same loop reads Kafka frames and answers
 * BrokerHeartbeat (a flexible API: response header v1) as a test
 * tells it to: at once, never, with a wrong correlation id, with bytes
 * that do not decode, or by hanging up.  Every wait is a bounded run of
 * the loop.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "base/err.h"
#include "base/rd.h"
#include "base/wr.h"
#include "node/peer.h"
#include "proto/gen/api.h"
#include "proto/gen/msgs.h"
#include "proto/header.h"
#include "unit.h"

enum answer_mode {
    ANSWER,   /* a heartbeat response naming the request's broker */
    SILENT,   /* read, never answer */
    WRONG_ID, /* answer with correlation id + 1000 */
    GARBAGE,  /* a header and a body too short to decode */
    HANG_UP,  /* close the connection on the first request */
};

struct server {
    uv_loop_t *loop;
    uv_tcp_t listener;
    bool listening;
    int port;
    enum answer_mode mode;
    int requests;    /* frames read */
    int connections; /* accepted */
    uv_tcp_t *clients[8];
    int nclients;
};

struct sconn {
    uv_tcp_t tcp;
    struct server *srv;
    uint8_t buf[1 << 16];
    size_t len;
};

struct result {
    int calls;      /* callbacks seen */
    int err;        /* the last one's */
    int32_t broker; /* decoded from the response (is_fenced carries
                         nothing; error_code carries the broker id) */
    int order[64];  /* broker ids in callback order */
    struct cn_peer *free_on_answer; /* freed from inside the callback */
};

static void on_sconn_closed(uv_handle_t *h)
{
    free(h->data);
}

static void sconn_write_done(uv_write_t *w, int status)
{
    (void)status;
    free(w->data);
    free(w);
}

static void sconn_send(struct sconn *sc, struct cn_wr *wr)
{
    uv_write_t *w = calloc(1, sizeof *w);
    size_t len;
    uint8_t *bytes = cn_wr_steal(wr, &len);
    w->data = bytes;
    uv_buf_t b = uv_buf_init((char *)bytes, (unsigned)len);
    uv_write(w, (uv_stream_t *)&sc->tcp, &b, 1, sconn_write_done);
}

/* One request frame (size field excluded): answer it per the mode. */
static void serve(struct sconn *sc, const uint8_t *frame, size_t len)
{
    struct server *srv = sc->srv;
    struct cn_rd rd;
    struct cn_req_header h;
    struct cn_arena arena;
    struct cn_broker_heartbeat_request req;

    srv->requests++;
    cn_rd_init(&rd, frame, len);
    CHECK_EQ(cn_req_header_decode(&rd, &h), 0);
    CHECK_EQ(h.api_key, CN_API_BROKER_HEARTBEAT);
    cn_arena_init(&arena);
    cn_broker_heartbeat_request_init(&req);
    CHECK_EQ(cn_broker_heartbeat_request_decode(&rd, &arena, h.api_version,
                                                &req),
             0);
    cn_arena_fini(&arena);
    if (srv->mode == SILENT)
        return;
    if (srv->mode == HANG_UP) {
        if (!uv_is_closing((uv_handle_t *)&sc->tcp))
            uv_close((uv_handle_t *)&sc->tcp, on_sconn_closed);
        return;
    }
    struct cn_wr wr;
    cn_wr_init(&wr, 64);
    size_t at = cn_wr_reserve(&wr, 4);
    int32_t corr = h.correlation_id + (srv->mode == WRONG_ID ? 1000 : 0);
    cn_resp_header_encode(&wr, h.api_key, h.api_version, corr);
    if (srv->mode == GARBAGE) {
        cn_wr_i16(&wr, 0); /* half a throttle time */
    } else {
        struct cn_broker_heartbeat_response resp;
        cn_broker_heartbeat_response_init(&resp);
        resp.error_code = (int16_t)req.broker_id;
        resp.is_fenced = true;
        cn_broker_heartbeat_response_encode(&wr, h.api_version, &resp);
    }
    cn_wr_patch_i32(&wr, at, (int32_t)(wr.len - 4));
    sconn_send(sc, &wr);
    cn_wr_fini(&wr);
}

static void sconn_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct sconn *sc = h->data;
    (void)suggested;
    *buf = uv_buf_init((char *)sc->buf + sc->len,
                       (unsigned)(sizeof sc->buf - sc->len));
}

static void sconn_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    struct sconn *sc = s->data;
    (void)buf;
    if (n < 0) {
        if (!uv_is_closing((uv_handle_t *)s))
            uv_close((uv_handle_t *)s, on_sconn_closed);
        return;
    }
    sc->len += (size_t)n;
    size_t off = 0;
    while (sc->len - off >= 4 && !uv_is_closing((uv_handle_t *)s)) {
        const uint8_t *q = sc->buf + off;
        uint32_t size = (uint32_t)q[0] << 24 | (uint32_t)q[1] << 16 |
                        (uint32_t)q[2] << 8 | q[3];
        if (sc->len - off - 4 < size)
            break;
        serve(sc, q + 4, size);
        off += 4 + size;
    }
    memmove(sc->buf, sc->buf + off, sc->len - off);
    sc->len -= off;
}

static void on_connection(uv_stream_t *l, int status)
{
    struct server *srv = l->data;
    CHECK_EQ(status, 0);
    struct sconn *sc = calloc(1, sizeof *sc);
    sc->srv = srv;
    uv_tcp_init(srv->loop, &sc->tcp);
    sc->tcp.data = sc;
    CHECK_EQ(uv_accept(l, (uv_stream_t *)&sc->tcp), 0);
    srv->connections++;
    if (srv->nclients < 8)
        srv->clients[srv->nclients++] = &sc->tcp;
    uv_read_start((uv_stream_t *)&sc->tcp, sconn_alloc, sconn_read);
}

/* Listens on port (0: any) of 127.0.0.1. */
static void server_start(struct server *srv, uv_loop_t *loop, int port)
{
    struct sockaddr_in addr;
    int len = sizeof addr;
    srv->loop = loop;
    uv_tcp_init(loop, &srv->listener);
    srv->listener.data = srv;
    uv_ip4_addr("127.0.0.1", port, &addr);
    CHECK_EQ(uv_tcp_bind(&srv->listener, (struct sockaddr *)&addr, 0), 0);
    CHECK_EQ(uv_listen((uv_stream_t *)&srv->listener, 16, on_connection), 0);
    uv_tcp_getsockname(&srv->listener, (struct sockaddr *)&addr, &len);
    srv->port = ntohs(addr.sin_port);
    srv->listening = true;
}

static void server_stop(struct server *srv)
{
    for (int i = 0; i < srv->nclients; i++)
        if (!uv_is_closing((uv_handle_t *)srv->clients[i]))
            uv_close((uv_handle_t *)srv->clients[i], on_sconn_closed);
    srv->nclients = 0;
    if (srv->listening)
        uv_close((uv_handle_t *)&srv->listener, NULL);
    srv->listening = false;
}

static void on_answer(void *arg, int err, const void *response,
                      struct cn_arena *arena)
{
    struct result *r = arg;
    (void)arena;
    r->err = err;
    r->broker = -1;
    if (!err) {
        const struct cn_broker_heartbeat_response *resp = response;
        CHECK(resp->is_fenced);
        r->broker = resp->error_code;
    }
    if (r->calls < 64)
        r->order[r->calls] = r->broker;
    r->calls++;
    if (r->free_on_answer) {
        cn_peer_free(r->free_on_answer);
        r->free_on_answer = NULL;
    }
}

static int call(struct cn_peer *p, int32_t broker, int64_t timeout_ms,
                struct result *r)
{
    struct cn_broker_heartbeat_request req;
    cn_broker_heartbeat_request_init(&req);
    req.broker_id = broker;
    req.broker_epoch = 7;
    return cn_peer_call(p, CN_API_BROKER_HEARTBEAT, 1, &req, timeout_ms,
                        on_answer, r);
}

/* Runs the loop until *count reaches want or 5 s of loop time pass. */
static void run_until(uv_loop_t *loop, const int *count, int want)
{
    uint64_t end = uv_now(loop) + 5000;
    while (*count < want && uv_now(loop) < end)
        uv_run(loop, UV_RUN_ONCE);
}

static struct cn_peer *peer_to(uv_loop_t *loop, int port)
{
    struct cn_peer_opts o = {.host = "127.0.0.1",
                             .port = port,
                             .client_id = "test",
                             .backoff_ms = 10,
                             .backoff_max_ms = 40};
    struct cn_peer *p = NULL;
    CHECK_EQ(cn_peer_new(loop, &o, &p), 0);
    return p;
}

/* Closes what is left and checks nothing leaked a handle. */
static void finish(uv_loop_t *loop, struct server *srv, struct cn_peer *p)
{
    if (p)
        cn_peer_free(p);
    server_stop(srv);
    for (int i = 0; i < 100 && uv_run(loop, UV_RUN_NOWAIT); i++)
        ;
    CHECK_EQ(uv_loop_close(loop), 0);
}

UNIT_TEST(answers_are_decoded_in_call_order)
{
    uv_loop_t loop;
    struct server srv = {.mode = ANSWER};
    struct result r = {0};
    uv_loop_init(&loop);
    server_start(&srv, &loop, 0);
    struct cn_peer *p = peer_to(&loop, srv.port);
    CHECK(!cn_peer_connected(p));
    for (int i = 0; i < 50; i++)
        CHECK_EQ(call(p, 100 + i, 5000, &r), 0);
    CHECK_EQ(r.calls, 0); /* never inside the call */
    CHECK_EQ(cn_peer_pending(p), 50);
    run_until(&loop, &r.calls, 50);
    CHECK_EQ(r.calls, 50);
    for (int i = 0; i < 50; i++)
        CHECK_EQ(r.order[i], 100 + i);
    CHECK_EQ(r.err, 0);
    CHECK(cn_peer_connected(p));
    CHECK_EQ(cn_peer_pending(p), 0);
    CHECK_EQ(srv.connections, 1);
    finish(&loop, &srv, p);
}

UNIT_TEST(refused_then_reconnects_when_the_server_comes)
{
    uv_loop_t loop;
    struct server srv = {.mode = ANSWER};
    struct result r = {0};
    uv_loop_init(&loop);
    /* A port that was free a moment ago, nobody listening yet. */
    server_start(&srv, &loop, 0);
    int port = srv.port;
    server_stop(&srv);
    uv_run(&loop, UV_RUN_NOWAIT);
    struct cn_peer *p = peer_to(&loop, port);
    CHECK_EQ(call(p, 1, 3000, &r), 0);
    /* Let a few attempts fail (backoff 10, 20, 40 ms), then listen. */
    uint64_t until = uv_now(&loop) + 100;
    while (uv_now(&loop) < until)
        uv_run(&loop, UV_RUN_ONCE);
    CHECK_EQ(r.calls, 0);
    server_start(&srv, &loop, port);
    run_until(&loop, &r.calls, 1);
    CHECK_EQ(r.calls, 1);
    CHECK_EQ(r.err, 0);
    CHECK_EQ(r.broker, 1);
    finish(&loop, &srv, p);
}

UNIT_TEST(never_connected_times_out)
{
    uv_loop_t loop;
    struct server srv = {.mode = ANSWER};
    struct result r = {0};
    uv_loop_init(&loop);
    server_start(&srv, &loop, 0);
    int port = srv.port;
    server_stop(&srv);
    uv_run(&loop, UV_RUN_NOWAIT);
    struct cn_peer *p = peer_to(&loop, port);
    CHECK_EQ(call(p, 1, 80, &r), 0);
    run_until(&loop, &r.calls, 1);
    CHECK_EQ(r.calls, 1);
    CHECK_EQ(r.err, -ETIMEDOUT);
    CHECK_EQ(cn_peer_pending(p), 0);
    finish(&loop, &srv, p);
}

/* fail_unsent (the marker and verification senders): a refused connect
 * fails the calls waiting for it at once, not at their deadline, so the
 * caller can look up a destination that moved. */
UNIT_TEST(fail_unsent_fails_at_the_refused_connect)
{
    uv_loop_t loop;
    struct server srv = {.mode = ANSWER};
    struct result r = {0};
    uv_loop_init(&loop);
    server_start(&srv, &loop, 0);
    int port = srv.port;
    server_stop(&srv);
    uv_run(&loop, UV_RUN_NOWAIT);
    struct cn_peer_opts o = {.host = "127.0.0.1",
                             .port = port,
                             .client_id = "test",
                             .backoff_ms = 10,
                             .backoff_max_ms = 40,
                             .fail_unsent = true};
    struct cn_peer *p = NULL;
    CHECK_EQ(cn_peer_new(&loop, &o, &p), 0);
    CHECK_EQ(call(p, 1, 60000, &r), 0);
    CHECK_EQ(call(p, 2, 60000, &r), 0);
    run_until(&loop, &r.calls, 2);
    CHECK_EQ(r.calls, 2);
    CHECK_EQ(r.err, -ECONNREFUSED);
    CHECK_EQ(cn_peer_pending(p), 0);
    /* The next call tries again, and goes once the server is there. */
    server_start(&srv, &loop, port);
    CHECK_EQ(call(p, 3, 5000, &r), 0);
    run_until(&loop, &r.calls, 3);
    CHECK_EQ(r.calls, 3);
    CHECK_EQ(r.err, 0);
    CHECK_EQ(r.broker, 3);
    finish(&loop, &srv, p);
}

UNIT_TEST(timeout_drops_the_connection_and_the_next_call_reconnects)
{
    uv_loop_t loop;
    struct server srv = {.mode = SILENT};
    struct result first = {0}, second = {0}, third = {0};
    uv_loop_init(&loop);
    server_start(&srv, &loop, 0);
    struct cn_peer *p = peer_to(&loop, srv.port);
    CHECK_EQ(call(p, 1, 80, &first), 0);
    CHECK_EQ(call(p, 2, 4000, &second), 0);
    run_until(&loop, &second.calls, 1);
    /* The expired call times out; the other one sent on the same
     * connection is lost with it, well before its own deadline. */
    CHECK_EQ(first.calls, 1);
    CHECK_EQ(first.err, -ETIMEDOUT);
    CHECK_EQ(second.calls, 1);
    CHECK_EQ(second.err, -ECONNRESET);
    CHECK_EQ(srv.requests, 2);
    srv.mode = ANSWER;
    CHECK_EQ(call(p, 3, 4000, &third), 0);
    run_until(&loop, &third.calls, 1);
    CHECK_EQ(third.err, 0);
    CHECK_EQ(third.broker, 3);
    CHECK_EQ(srv.connections, 2);
    finish(&loop, &srv, p);
}

UNIT_TEST(hang_up_fails_sent_calls_with_connreset)
{
    uv_loop_t loop;
    struct server srv = {.mode = HANG_UP};
    struct result r = {0};
    uv_loop_init(&loop);
    server_start(&srv, &loop, 0);
    struct cn_peer *p = peer_to(&loop, srv.port);
    CHECK_EQ(call(p, 1, 4000, &r), 0);
    run_until(&loop, &r.calls, 1);
    CHECK_EQ(r.calls, 1);
    CHECK_EQ(r.err, -ECONNRESET);
    CHECK(!cn_peer_connected(p));
    finish(&loop, &srv, p);
}

UNIT_TEST(wrong_correlation_id_drops_the_connection)
{
    uv_loop_t loop;
    struct server srv = {.mode = WRONG_ID};
    struct result r = {0};
    uv_loop_init(&loop);
    server_start(&srv, &loop, 0);
    struct cn_peer *p = peer_to(&loop, srv.port);
    CHECK_EQ(call(p, 1, 4000, &r), 0);
    run_until(&loop, &r.calls, 1);
    CHECK_EQ(r.err, -ECONNRESET);
    finish(&loop, &srv, p);
}

UNIT_TEST(undecodable_answer_is_corrupt)
{
    uv_loop_t loop;
    struct server srv = {.mode = GARBAGE};
    struct result r = {0};
    uv_loop_init(&loop);
    server_start(&srv, &loop, 0);
    struct cn_peer *p = peer_to(&loop, srv.port);
    CHECK_EQ(call(p, 1, 4000, &r), 0);
    run_until(&loop, &r.calls, 1);
    CHECK_EQ(r.err, CN_ECORRUPT);
    finish(&loop, &srv, p);
}

UNIT_TEST(free_cancels_pending_calls)
{
    uv_loop_t loop;
    struct server srv = {.mode = SILENT};
    struct result r = {0};
    uv_loop_init(&loop);
    server_start(&srv, &loop, 0);
    struct cn_peer *p = peer_to(&loop, srv.port);
    for (int i = 0; i < 3; i++)
        CHECK_EQ(call(p, i, 4000, &r), 0);
    run_until(&loop, &srv.requests, 3); /* all three sent */
    CHECK_EQ(srv.requests, 3);
    cn_peer_free(p);
    CHECK_EQ(r.calls, 3);
    CHECK_EQ(r.err, -ECANCELED);
    finish(&loop, &srv, NULL);
}

UNIT_TEST(free_while_connecting)
{
    uv_loop_t loop;
    struct server srv = {.mode = ANSWER};
    struct result r = {0};
    uv_loop_init(&loop);
    server_start(&srv, &loop, 0);
    struct cn_peer *p = peer_to(&loop, srv.port);
    CHECK_EQ(call(p, 1, 4000, &r), 0);
    cn_peer_free(p); /* address lookup still in flight */
    CHECK_EQ(r.calls, 1);
    CHECK_EQ(r.err, -ECANCELED);
    finish(&loop, &srv, NULL);
}

UNIT_TEST(callback_may_free_the_peer)
{
    uv_loop_t loop;
    struct server srv = {.mode = ANSWER};
    struct result r = {0};
    uv_loop_init(&loop);
    server_start(&srv, &loop, 0);
    struct cn_peer *p = peer_to(&loop, srv.port);
    r.free_on_answer = p;
    CHECK_EQ(call(p, 1, 4000, &r), 0);
    CHECK_EQ(call(p, 2, 4000, &r), 0);
    run_until(&loop, &r.calls, 2);
    /* The first answer freed the peer; the second call was cancelled. */
    CHECK_EQ(r.calls, 2);
    CHECK_EQ(r.order[0], 1);
    CHECK_EQ(r.err, -ECANCELED);
    finish(&loop, &srv, NULL);
}

UNIT_TEST(unknown_api_version_is_refused_at_once)
{
    uv_loop_t loop;
    struct server srv = {.mode = ANSWER};
    uv_loop_init(&loop);
    server_start(&srv, &loop, 0);
    struct cn_peer *p = peer_to(&loop, srv.port);
    struct cn_broker_heartbeat_request req;
    cn_broker_heartbeat_request_init(&req);
    CHECK_EQ(cn_peer_call(p, CN_API_BROKER_HEARTBEAT, 99, &req, 1000,
                          on_answer, NULL),
             CN_EUNSUPPORTED);
    CHECK_EQ(cn_peer_pending(p), 0);
    finish(&loop, &srv, p);
}

UNIT_MAIN(answers_are_decoded_in_call_order,
          fail_unsent_fails_at_the_refused_connect,
          refused_then_reconnects_when_the_server_comes,
          never_connected_times_out,
          timeout_drops_the_connection_and_the_next_call_reconnects,
          hang_up_fails_sent_calls_with_connreset,
          wrong_correlation_id_drops_the_connection,
          undecodable_answer_is_corrupt, free_cancels_pending_calls,
          free_while_connecting, callback_may_free_the_peer,
          unknown_api_version_is_refused_at_once)
