/*
 * test_net.c - the net layer's back-pressure, over loopback.
 *
 * The server runs on a private loop driven one non-blocking turn at a
 * time; clients are plain sockets, so a test decides exactly when a client
 * reads.  Frames are 8 bytes: a 4-byte sequence number and 4 spare bytes.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include "base/clock.h"
#include "net/net.h"
#include "unit.h"

#define MAX_HELD 512

/* What the test handler saw and still holds. */
struct fixture {
    uv_loop_t loop;
    struct cn_server *srv;
    struct cn_req *held[MAX_HELD]; /* requests not yet finished */
    int nheld;
    int handled;         /* requests the handler was given */
    int from[MAX_HELD];  /* client port of each, in order */
    size_t answer_bytes; /* >0: answer at once with this many bytes */
    bool park;           /* cn_req_park every held request */
    int abandoned;       /* abandon_cb calls */
    bool set_raw;        /* turn bare SASL tokens on at each request */
    int raw_seen;        /* requests read as bare tokens */
};

static void on_request(struct cn_req *req, void *opaque)
{
    struct fixture *f = opaque;
    const char *peer = cn_req_peer(req);
    const char *colon = strrchr(peer, ':');
    if (f->handled < MAX_HELD)
        f->from[f->handled] = colon ? atoi(colon + 1) : -1;
    f->handled++;
    if (req->raw_token)
        f->raw_seen++;
    if (f->set_raw)
        cn_req_set_raw_tokens(req, true);
    if (f->answer_bytes) {
        uint8_t *zeros = calloc(1, f->answer_bytes);
        cn_wr_raw(&req->resp, req->frame, 4); /* echo the sequence */
        cn_wr_raw(&req->resp, zeros, f->answer_bytes - 4);
        free(zeros);
        cn_req_done(req);
        return;
    }
    if (f->park)
        cn_req_park(req);
    if (f->nheld < MAX_HELD)
        f->held[f->nheld++] = req;
}

static void on_abandon(struct cn_req *req, void *opaque)
{
    struct fixture *f = opaque;
    f->abandoned++;
    for (int i = 0; i < f->nheld; i++)
        if (f->held[i] == req) {
            f->held[i] = f->held[--f->nheld];
            break;
        }
    req->no_response = true;
    cn_req_done(req);
}

static void fixture_start(struct fixture *f, struct cn_server_config cfg)
{
    memset(f, 0, sizeof *f);
    uv_loop_init(&f->loop);
    cfg.host = "127.0.0.1";
    cfg.max_request_bytes = 1 << 20;
    cfg.idle_ms = cfg.idle_ms ? cfg.idle_ms : -1;
    cfg.abandon_cb = on_abandon;
    CHECK_EQ(cn_server_start(&f->loop, &cfg, on_request, f, &f->srv), 0);
}

static void turns(struct fixture *f, int n)
{
    for (int i = 0; i < n; i++) {
        uv_run(&f->loop, UV_RUN_NOWAIT);
        usleep(200);
    }
}

/* Finishes the oldest held request with a small answer. */
static void finish_oldest(struct fixture *f)
{
    if (f->nheld == 0)
        return;
    struct cn_req *req = f->held[0];
    memmove(f->held, f->held + 1, (size_t)(f->nheld - 1) * sizeof *f->held);
    f->nheld--;
    cn_wr_raw(&req->resp, req->frame, 4);
    cn_req_done(req);
}

static void fixture_stop(struct fixture *f)
{
    cn_server_stop(f->srv);
    /* Requests still held are the handler's: finish them as a broker's
     * shutdown does; each is then just freed. */
    while (f->nheld > 0) {
        struct cn_req *req = f->held[--f->nheld];
        req->no_response = true;
        cn_req_done(req);
    }
    uv_run(&f->loop, UV_RUN_DEFAULT);
    CHECK_EQ(uv_loop_close(&f->loop), 0);
}

/* A plain non-blocking client socket; rcvbuf > 0 shrinks its window. */
static int client_connect(struct fixture *f, int rcvbuf, int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (rcvbuf > 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons(
                                (uint16_t)cn_server_port(f->srv))};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK_EQ(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    struct sockaddr_in me;
    socklen_t len = sizeof me;
    getsockname(fd, (struct sockaddr *)&me, &len);
    *port = ntohs(me.sin_port);
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    return fd;
}

/* Sends frames first..first+n-1 in one write (they fit the socket). */
static void send_frames(int fd, uint32_t first, int n)
{
    uint8_t *buf = calloc((size_t)n, 12);
    for (int i = 0; i < n; i++) {
        uint8_t *p = buf + 12 * i;
        uint32_t seq = first + (uint32_t)i;
        p[3] = 8;
        p[4] = (uint8_t)(seq >> 24);
        p[5] = (uint8_t)(seq >> 16);
        p[6] = (uint8_t)(seq >> 8);
        p[7] = (uint8_t)seq;
    }
    CHECK_EQ(send(fd, buf, (size_t)n * 12, 0), n * 12);
    free(buf);
}

/* Reads whatever is there; returns complete responses seen so far and
 * checks they come back in sequence order. */
struct reader {
    uint8_t hdr[8];
    size_t have; /* bytes of the current response's size + seq */
    size_t left; /* body bytes of it still to skip */
    int count;
    uint32_t next_seq;
    bool in_order;
};

static void drain(int fd, struct reader *r)
{
    uint8_t buf[65536];
    for (;;) {
        ssize_t n = recv(fd, buf, sizeof buf, 0);
        if (n <= 0)
            return;
        for (ssize_t i = 0; i < n;) {
            if (r->have < 8) {
                r->hdr[r->have++] = buf[i++];
                if (r->have == 8) {
                    uint32_t size = ((uint32_t)r->hdr[0] << 24) |
                                    ((uint32_t)r->hdr[1] << 16) |
                                    ((uint32_t)r->hdr[2] << 8) | r->hdr[3];
                    uint32_t seq = ((uint32_t)r->hdr[4] << 24) |
                                   ((uint32_t)r->hdr[5] << 16) |
                                   ((uint32_t)r->hdr[6] << 8) | r->hdr[7];
                    if (seq != r->next_seq)
                        r->in_order = false;
                    r->next_seq = seq + 1;
                    r->left = size - 4;
                    if (r->left == 0) {
                        r->count++;
                        r->have = 0;
                    }
                }
                continue;
            }
            size_t take = (size_t)(n - i) < r->left ? (size_t)(n - i)
                                                    : r->left;
            r->left -= take;
            i += (ssize_t)take;
            if (r->left == 0) {
                r->count++;
                r->have = 0;
            }
        }
    }
}

UNIT_TEST(inflight_limit_counts_until_written)
{
    static struct fixture f;
    fixture_start(&f, (struct cn_server_config){.max_inflight = 4});
    int port;
    int fd = client_connect(&f, 0, &port);
    send_frames(fd, 0, 20);
    turns(&f, 50);
    CHECK_EQ(f.handled, 4);
    struct cn_server_stats st;
    cn_server_get_stats(f.srv, &st);
    CHECK_EQ(st.muted, 1);
    CHECK_EQ(st.queued, 4);
    /* Two answers: two more requests are read once they are written. */
    finish_oldest(&f);
    finish_oldest(&f);
    turns(&f, 50);
    CHECK_EQ(f.handled, 6);
    while (f.handled < 20 && f.nheld > 0) {
        finish_oldest(&f);
        turns(&f, 5);
    }
    while (f.nheld > 0)
        finish_oldest(&f);
    turns(&f, 20);
    CHECK_EQ(f.handled, 20);
    struct reader r = {.in_order = true};
    drain(fd, &r);
    CHECK_EQ(r.count, 20);
    CHECK(r.in_order);
    close(fd);
    fixture_stop(&f);
}

/* A peer that never reads: the connection holds about max_conn_bytes of
 * answers plus what the kernel took, not everything it asked for. */
UNIT_TEST(unread_responses_mute_the_connection)
{
    static struct fixture f;
    size_t limit = 2u << 20;
    fixture_start(&f, (struct cn_server_config){.max_inflight = 1000,
                                                .max_conn_bytes = limit});
    f.answer_bytes = 1u << 20;
    int port;
    int fd = client_connect(&f, 32 << 10, &port);
    send_frames(fd, 0, 200);
    turns(&f, 200);
    struct cn_server_stats st;
    cn_server_get_stats(f.srv, &st);
    /* The kernel's send buffer (tcp_wmem max, 4 MiB on Linux by
     * default) and the small receive window take a few; the rest wait
     * unread in the socket. */
    if (f.handled >= 60)
        fprintf(stderr, "  %d of 200 handled\n", f.handled);
    CHECK(f.handled < 60);
    CHECK(st.held_bytes <= limit + 2 * f.answer_bytes);
    CHECK_EQ(st.muted, 1);
    /* Reading drains it: every request gets its answer, in order. */
    struct reader r = {.in_order = true};
    for (int i = 0; i < 20000 && r.count < 200; i++) {
        drain(fd, &r);
        uv_run(&f.loop, UV_RUN_NOWAIT);
    }
    CHECK_EQ(f.handled, 200);
    CHECK_EQ(r.count, 200);
    CHECK(r.in_order);
    close(fd);
    fixture_stop(&f);
}

UNIT_TEST(one_answer_larger_than_the_limit_still_goes)
{
    static struct fixture f;
    fixture_start(&f, (struct cn_server_config){.max_conn_bytes = 1024});
    f.answer_bytes = 300000;
    int port;
    int fd = client_connect(&f, 0, &port);
    send_frames(fd, 0, 3);
    struct reader r = {.in_order = true};
    for (int i = 0; i < 20000 && r.count < 3; i++) {
        drain(fd, &r);
        uv_run(&f.loop, UV_RUN_NOWAIT);
    }
    CHECK_EQ(r.count, 3);
    CHECK(r.in_order);
    close(fd);
    fixture_stop(&f);
}

/* queued.max.requests: with the budget full no connection is read; as it
 * frees, the waiting connections take turns in the order they waited. */
UNIT_TEST(budget_is_shared_in_turn)
{
    static struct fixture f;
    fixture_start(&f, (struct cn_server_config){.max_queued = 3});
    int pa, pb;
    int a = client_connect(&f, 0, &pa);
    send_frames(a, 0, 10);
    turns(&f, 50);
    CHECK_EQ(f.handled, 3);
    int b = client_connect(&f, 0, &pb);
    send_frames(b, 100, 10);
    turns(&f, 50);
    CHECK_EQ(f.handled, 3);
    struct cn_server_stats st;
    cn_server_get_stats(f.srv, &st);
    CHECK_EQ(st.muted, 2);
    CHECK_EQ(st.queued, 3);
    for (int k = 0; k < 8; k++) {
        int before = f.handled;
        finish_oldest(&f);
        turns(&f, 20);
        CHECK_EQ(f.handled, before + 1);
        /* a waited first, then b: they alternate. */
        CHECK_EQ(f.from[before], k % 2 == 0 ? pa : pb);
    }
    close(a);
    close(b);
    fixture_stop(&f);
}

/* Two listeners' servers, one budget: queued.max.requests is broker-wide. */
UNIT_TEST(budget_shared_by_servers)
{
    static struct fixture f;
    fixture_start(&f, (struct cn_server_config){.max_queued = 3});
    struct cn_server *first = f.srv, *second;
    struct cn_server_config cfg = {.host = "127.0.0.1",
                                   .max_request_bytes = 1 << 20,
                                   .idle_ms = -1,
                                   .max_queued = 100, /* first's counts */
                                   .abandon_cb = on_abandon,
                                   .listener = 1,
                                   .share_budget = first};
    CHECK_EQ(cn_server_start(&f.loop, &cfg, on_request, &f, &second), 0);
    int pa, pb;
    int a = client_connect(&f, 0, &pa);
    send_frames(a, 0, 10);
    turns(&f, 50);
    CHECK_EQ(f.handled, 3);
    f.srv = second;
    int b = client_connect(&f, 0, &pb);
    f.srv = first;
    send_frames(b, 100, 10);
    turns(&f, 50);
    /* Without sharing, the second server would take 3 more. */
    CHECK_EQ(f.handled, 3);
    struct cn_server_stats st;
    cn_server_get_stats(second, &st);
    CHECK_EQ(st.queued, 3);
    CHECK_EQ(st.muted, 1);
    /* Each finished request lets one more in, from either server. */
    for (int k = 0; k < 6; k++) {
        int before = f.handled;
        finish_oldest(&f);
        turns(&f, 20);
        CHECK_EQ(f.handled, before + 1);
    }
    bool from_b = false;
    for (int i = 0; i < f.handled; i++)
        from_b = from_b || f.from[i] == pb;
    CHECK(from_b);
    close(a);
    close(b);
    cn_server_stop(second);
    fixture_stop(&f);
}

UNIT_TEST(request_bytes_budget)
{
    static struct fixture f;
    fixture_start(&f, (struct cn_server_config){.max_queued_bytes = 20});
    int port;
    int fd = client_connect(&f, 0, &port);
    send_frames(fd, 0, 10);
    turns(&f, 50);
    /* 8-byte frames: 0, 8, 16 are under 20, 24 is not. */
    CHECK_EQ(f.handled, 3);
    finish_oldest(&f);
    turns(&f, 50);
    CHECK_EQ(f.handled, 4);
    close(fd);
    fixture_stop(&f);
}

/* Parked requests leave the budget, not their connection's limit. */
UNIT_TEST(parked_requests_leave_the_budget)
{
    static struct fixture f;
    fixture_start(&f, (struct cn_server_config){.max_queued = 2,
                                                .max_inflight = 50});
    f.park = true;
    int pa, pb;
    int a = client_connect(&f, 0, &pa);
    send_frames(a, 0, 60);
    turns(&f, 50);
    CHECK_EQ(f.handled, 50);
    /* Another connection is not held back by a's parked requests. */
    int b = client_connect(&f, 0, &pb);
    send_frames(b, 0, 5);
    turns(&f, 50);
    CHECK_EQ(f.handled, 55);
    struct cn_server_stats st;
    cn_server_get_stats(f.srv, &st);
    CHECK_EQ(st.queued, 0);
    close(a);
    close(b);
    fixture_stop(&f);
}

/* A closed connection's requests still in the handler are offered to
 * abandon_cb from the idle phase, and freed (ASan: no leak). */
UNIT_TEST(closed_connection_abandons_waits)
{
    static struct fixture f;
    fixture_start(&f, (struct cn_server_config){.max_queued = 100});
    int port;
    int fd = client_connect(&f, 0, &port);
    send_frames(fd, 0, 5);
    turns(&f, 50);
    CHECK_EQ(f.handled, 5);
    close(fd);
    turns(&f, 50);
    CHECK_EQ(f.abandoned, 5);
    CHECK_EQ(f.nheld, 0);
    CHECK_EQ(cn_server_conn_count(f.srv), 0);
    struct cn_server_stats st;
    cn_server_get_stats(f.srv, &st);
    CHECK_EQ(st.queued, 0);
    CHECK_EQ(st.held_bytes, 0);
    fixture_stop(&f);
}

/* A muted connection is not read, so its peer's close is found by the
 * periodic check; its waits are then abandoned as above. */
UNIT_TEST(muted_connection_closed_by_peer)
{
    static struct fixture f;
    fixture_start(&f, (struct cn_server_config){.max_inflight = 4,
                                                .idle_ms = 10000});
    int port;
    int fd = client_connect(&f, 0, &port);
    send_frames(fd, 0, 10);
    turns(&f, 50);
    CHECK_EQ(f.handled, 4);
    close(fd);
    /* The check runs every 100 ms at this idle_ms; allow 5 s. */
    for (int i = 0; i < 5000 && f.abandoned < 4; i++) {
        uv_run(&f.loop, UV_RUN_NOWAIT);
        usleep(1000);
    }
    CHECK_EQ(f.abandoned, 4);
    CHECK_EQ(cn_server_conn_count(f.srv), 0);
    fixture_stop(&f);
}

/* Stopping with a muted connection and unwritten answers frees all. */
UNIT_TEST(stop_with_pending_writes)
{
    static struct fixture f;
    fixture_start(&f, (struct cn_server_config){.max_conn_bytes = 1 << 20});
    f.answer_bytes = 1u << 20;
    int port;
    int fd = client_connect(&f, 16 << 10, &port);
    send_frames(fd, 0, 50);
    turns(&f, 100);
    struct cn_server_stats st;
    cn_server_get_stats(f.srv, &st);
    CHECK(st.held_bytes > 0); /* answers still unwritten */
    fixture_stop(&f);
    close(fd);
}

/* True once the peer has closed (recv sees EOF or a reset). */
static bool peer_closed(int fd)
{
    uint8_t buf[4096];
    ssize_t n;
    while ((n = recv(fd, buf, sizeof buf, 0)) > 0)
        ;
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

/* An answer marked close-after goes out whole, then the connection
 * closes, and nothing the client sent after is handled. */
UNIT_TEST(close_after_response_sends_then_closes)
{
    static struct fixture f;
    fixture_start(&f, (struct cn_server_config){0});
    int port;
    int fd = client_connect(&f, 0, &port);
    send_frames(fd, 0, 1);
    turns(&f, 20);
    CHECK_EQ(f.nheld, 1);
    struct cn_req *req = f.held[--f.nheld];
    cn_wr_raw(&req->resp, req->frame, 4);
    cn_req_close_after_response(req);
    cn_req_done(req);
    send_frames(fd, 1, 1);
    struct reader r = {.in_order = true};
    for (int i = 0; i < 50 && r.count < 1; i++) {
        turns(&f, 2);
        drain(fd, &r);
    }
    CHECK_EQ(r.count, 1);
    bool closed = false;
    for (int i = 0; i < 50 && !closed; i++) {
        turns(&f, 2);
        closed = peer_closed(fd);
    }
    CHECK(closed);
    CHECK_EQ(f.handled, 1);
    fixture_stop(&f);
    close(fd);
}

/* After cn_req_set_raw_tokens, frames under 8 bytes are handed over as
 * bare tokens; without it they close the connection. */
UNIT_TEST(raw_tokens_take_small_frames)
{
    static struct fixture f;
    fixture_start(&f, (struct cn_server_config){0});
    f.answer_bytes = 8;
    f.set_raw = true;
    int port;
    int fd = client_connect(&f, 0, &port);
    send_frames(fd, 0, 1);
    turns(&f, 20);
    static const uint8_t tiny[] = {0, 0, 0, 4, 0, 0, 0, 9};
    CHECK_EQ(send(fd, tiny, sizeof tiny, 0), (ssize_t)sizeof tiny);
    turns(&f, 20);
    CHECK_EQ(f.handled, 2);
    CHECK_EQ(f.raw_seen, 1);
    CHECK(!peer_closed(fd));
    close(fd);
    f.set_raw = false;
    fd = client_connect(&f, 0, &port);
    CHECK_EQ(send(fd, tiny, sizeof tiny, 0), (ssize_t)sizeof tiny);
    bool closed = false;
    for (int i = 0; i < 50 && !closed; i++) {
        turns(&f, 2);
        closed = peer_closed(fd);
    }
    CHECK(closed);
    CHECK_EQ(f.handled, 2);
    fixture_stop(&f);
    close(fd);
}

/* connections.max.idle.ms is measured on the clock seam: with the fake
 * clock standing still a silent connection stays however long the test
 * runs, and it is closed once the test moves the clock past the limit,
 * without the test waiting the limit out. */
UNIT_TEST(idle_close_follows_the_fake_clock)
{
    static struct fixture f;
    cn_clock_fake(1700000000000, 1000000);
    fixture_start(&f, (struct cn_server_config){.idle_ms = 10000});
    int port;
    int fd = client_connect(&f, 0, &port);
    turns(&f, 50);
    CHECK_EQ(cn_server_conn_count(f.srv), 1);
    cn_clock_advance_ms(9000);
    /* Several idle checks (every 100 ms) run; none may close it. */
    for (int i = 0; i < 300; i++) {
        uv_run(&f.loop, UV_RUN_NOWAIT);
        usleep(1000);
    }
    CHECK_EQ(cn_server_conn_count(f.srv), 1);
    cn_clock_advance_ms(1001);
    for (int i = 0; i < 5000 && cn_server_conn_count(f.srv) > 0; i++) {
        uv_run(&f.loop, UV_RUN_NOWAIT);
        usleep(1000);
    }
    CHECK_EQ(cn_server_conn_count(f.srv), 0);
    close(fd);
    fixture_stop(&f);
    cn_clock_real();
}

/* ---- first bytes: another protocol on a Kafka port ---- */

/* What the hook took: the stream and the bytes read after the hand-over. */
struct taken {
    uv_stream_t *stream;
    uint8_t first[8];
    size_t nfirst;
    char rest[64];
    size_t nrest;
    bool eof;
    uv_write_t wr;
};
static struct taken taken;

static bool magic_first(const uint8_t *bytes, size_t n, void *opaque)
{
    (void)opaque;
    return n >= 8 && memcmp(bytes, "CNRAFT01", 8) == 0;
}

static void taken_alloc(uv_handle_t *h, size_t sz, uv_buf_t *buf)
{
    (void)h;
    (void)sz;
    *buf = uv_buf_init(taken.rest + taken.nrest,
                       (unsigned)(sizeof taken.rest - taken.nrest));
}

static void taken_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    (void)buf;
    if (nread < 0) {
        taken.eof = true;
        uv_read_stop(s);
        return;
    }
    taken.nrest += (size_t)nread;
}

static int take_it(uv_stream_t *stream, const uint8_t *bytes, size_t n,
                   void *opaque)
{
    (void)opaque;
    taken.stream = stream;
    memcpy(taken.first, bytes, n < 8 ? n : 8);
    taken.nfirst = n;
    return uv_read_start(stream, taken_alloc, taken_read);
}

static void taken_free(uv_handle_t *h)
{
    free(h);
}

static void taken_written(uv_write_t *w, int status)
{
    (void)w;
    (void)status;
}

/* A connection whose first 8 bytes the hook takes leaves the net layer
 * (uncounted, never framed) and its socket goes on under the taker, with
 * no byte after the 8 consumed; a Kafka connection on the same server is
 * framed as before. */
UNIT_TEST(first_bytes_hand_over)
{
    static struct fixture f;
    memset(&taken, 0, sizeof taken);
    fixture_start(&f, (struct cn_server_config){.first_bytes = magic_first,
                                                .take_conn = take_it});
    int port;
    int fd = client_connect(&f, 0, &port);
    CHECK_EQ(send(fd, "CNRAFT01", 8, 0), 8);
    CHECK_EQ(send(fd, "hello", 5, 0), 5);
    for (int i = 0; i < 5000 && taken.nrest < 5; i++)
        turns(&f, 1);
    CHECK(taken.stream != NULL);
    CHECK_EQ(taken.nfirst, 8);
    CHECK(!memcmp(taken.first, "CNRAFT01", 8));
    CHECK_EQ(taken.nrest, 5);
    CHECK(!memcmp(taken.rest, "hello", 5));
    CHECK_EQ(cn_server_conn_count(f.srv), 0);
    CHECK_EQ(f.handled, 0);
    /* The taker writes on it; the client reads it. */
    if (taken.stream) {
        uv_buf_t b = uv_buf_init("pong", 4);
        CHECK_EQ(uv_write(&taken.wr, taken.stream, &b, 1, taken_written), 0);
    }
    char in[8];
    ssize_t got = -1;
    for (int i = 0; i < 5000 && got <= 0; i++) {
        turns(&f, 1);
        got = recv(fd, in, sizeof in, 0);
    }
    CHECK_EQ(got, 4);
    CHECK(got == 4 && !memcmp(in, "pong", 4));

    /* Kafka beside it: a frame of 8 bytes (size 8, then 8 bytes). */
    int kport;
    int kfd = client_connect(&f, 0, &kport);
    send_frames(kfd, 0, 1);
    for (int i = 0; i < 5000 && f.handled < 1; i++)
        turns(&f, 1);
    CHECK_EQ(f.handled, 1);
    CHECK_EQ(cn_server_conn_count(f.srv), 1);

    close(fd);
    for (int i = 0; i < 5000 && !taken.eof; i++)
        turns(&f, 1);
    CHECK(taken.eof);
    if (taken.stream)
        uv_close((uv_handle_t *)taken.stream, taken_free);
    close(kfd);
    fixture_stop(&f);
}

UNIT_MAIN(inflight_limit_counts_until_written,
          unread_responses_mute_the_connection,
          one_answer_larger_than_the_limit_still_goes,
          budget_is_shared_in_turn, budget_shared_by_servers,
          request_bytes_budget, parked_requests_leave_the_budget,
          closed_connection_abandons_waits, muted_connection_closed_by_peer,
          stop_with_pending_writes, close_after_response_sends_then_closes,
          raw_tokens_take_small_frames, idle_close_follows_the_fake_clock,
          first_bytes_hand_over)
