/*
 * test_quorum.c - three quorum members on one loop, over real raft_uv and
 * Cairn's handshake transport, each behind a small listener of its own
 * that does what the broker's net layer does: read the first 8 bytes and
 * hand a raft handshake to cn_quorum_accept.
 *
 * Every wait is for a condition, bounded in loop time, so a busy machine
 * makes the test slower, not flaky.
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "node/quorum.h"
#include "proto/kerr.h"
#include "unit.h"

#define NNODES 3
#define WAIT_MS 30000

struct node {
    int32_t id;
    uv_loop_t *loop;
    uv_tcp_t listener;
    int port;
    char *dir;
    struct cn_quorum *q;
    bool stopped;    /* quorum stop asked */
    bool closed;     /* quorum stop done */
    int64_t applied; /* last applied offset */
    bool fatal;
};

/* A connection accepted by a node's listener, reading its first bytes. */
struct sniff {
    struct node *n;
    uv_tcp_t *tcp; /* malloc'd: raft frees what it is given */
    uint8_t buf[8];
    size_t have;
};

static void free_handle(uv_handle_t *h)
{
    free(h);
}

static void sniff_alloc(uv_handle_t *h, size_t sz, uv_buf_t *buf)
{
    struct sniff *s = h->data;
    (void)sz;
    *buf = uv_buf_init((char *)s->buf + s->have,
                       (unsigned)(sizeof s->buf - s->have));
}

static void sniff_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
    struct sniff *s = st->data;
    (void)buf;
    if (nread < 0) {
        uv_close((uv_handle_t *)st, free_handle);
        free(s);
        return;
    }
    s->have += (size_t)nread;
    if (s->have < sizeof s->buf)
        return;
    uv_read_stop(st);
    struct node *n = s->n;
    if (!cn_quorum_is_handshake(s->buf, s->have) || !n->q || n->stopped ||
        cn_quorum_accept(n->q, st, s->buf, s->have) != 0)
        uv_close((uv_handle_t *)st, free_handle);
    free(s);
}

static void on_conn(uv_stream_t *l, int status)
{
    struct node *n = l->data;
    if (status < 0)
        return;
    uv_tcp_t *t = malloc(sizeof *t);
    struct sniff *s = calloc(1, sizeof *s);
    uv_tcp_init(n->loop, t);
    if (uv_accept(l, (uv_stream_t *)t) != 0) {
        uv_close((uv_handle_t *)t, free_handle);
        free(s);
        return;
    }
    s->n = n;
    s->tcp = t;
    t->data = s;
    uv_read_start((uv_stream_t *)t, sniff_alloc, sniff_read);
}

static void on_applied(void *ctx, int64_t offset)
{
    struct node *n = ctx;
    n->applied = offset;
}

static void on_fatal(void *ctx, const char *why)
{
    struct node *n = ctx;
    fprintf(stderr, "  node %d fatal: %s\n", n->id, why);
    n->fatal = true;
}

static void on_stopped(void *arg)
{
    struct node *n = arg;
    n->closed = true;
}

static void tick_cb(uv_timer_t *t)
{
    (void)t;
}

/* Runs the loop until cond(ctx) or WAIT_MS of loop time; the 10 ms timer
 * keeps the loop turning so the condition is checked often. */
static bool wait_for(uv_loop_t *loop, bool (*cond)(void *), void *ctx)
{
    uv_timer_t t;
    uv_timer_init(loop, &t);
    uv_timer_start(&t, tick_cb, 10, 10);
    uv_update_time(loop);
    uint64_t end = uv_now(loop) + WAIT_MS;
    bool ok;
    while (!(ok = cond(ctx)) && uv_now(loop) < end)
        uv_run(loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&t, NULL);
    uv_run(loop, UV_RUN_NOWAIT);
    return ok;
}

struct cluster {
    uv_loop_t loop;
    struct node nodes[NNODES];
    struct cn_quorum_voter voters[NNODES];
};

static int cluster_leader(struct cluster *c)
{
    int found = -1, count = 0;
    for (int i = 0; i < NNODES; i++)
        if (c->nodes[i].q && !c->nodes[i].stopped &&
            cn_quorum_leads(c->nodes[i].q)) {
            found = i;
            count++;
        }
    return count == 1 ? found : -1;
}

static bool has_leader(void *ctx)
{
    return cluster_leader(ctx) >= 0;
}

static void cluster_init(struct cluster *c)
{
    memset(c, 0, sizeof *c);
    CHECK_EQ(uv_loop_init(&c->loop), 0);
    for (int i = 0; i < NNODES; i++) {
        struct node *n = &c->nodes[i];
        n->id = i + 1;
        n->loop = &c->loop;
        n->applied = -1;
        n->dir = unit_tmpdir("quorum");
        uv_tcp_init(&c->loop, &n->listener);
        n->listener.data = n;
        struct sockaddr_in sa;
        uv_ip4_addr("127.0.0.1", 0, &sa);
        CHECK_EQ(uv_tcp_bind(&n->listener, (struct sockaddr *)&sa, 0), 0);
        CHECK_EQ(uv_listen((uv_stream_t *)&n->listener, 16, on_conn), 0);
        struct sockaddr_in got;
        int len = sizeof got;
        uv_tcp_getsockname(&n->listener, (struct sockaddr *)&got, &len);
        n->port = ntohs(got.sin_port);
        c->voters[i].id = n->id;
        strcpy(c->voters[i].host, "127.0.0.1");
        c->voters[i].port = n->port;
    }
    for (int i = 0; i < NNODES; i++) {
        struct node *n = &c->nodes[i];
        char sub[4200];
        snprintf(sub, sizeof sub, "%s/__cluster_metadata-0", n->dir);
        struct cn_quorum_config qc = {
            .node_id = n->id,
            .voter = true,
            .voters = c->voters,
            .nvoters = NNODES,
            .self_host = "127.0.0.1",
            .self_port = n->port,
            .dir = sub,
            .cluster_id = "",
            .election_timeout_ms = 200,
            .heartbeat_timeout_ms = 20,
            .ctl =
                {
                    .metadata_version = 21,
                    .transaction_version = 2,
                    .session_timeout_ms = 9000,
                    .default_partitions = 1,
                    .default_rf = 1,
                    .pid_block = 1000,
                    .seed = (uint64_t)n->id,
                },
        };
        struct cn_quorum_hooks hooks = {
            .applied = on_applied,
            .fatal = on_fatal,
            .ctx = n,
        };
        char err[256] = "";
        int rc = cn_quorum_start(&c->loop, &qc, &hooks, &n->q, err,
                                 sizeof err);
        if (rc)
            fprintf(stderr, "  start %d: %s\n", n->id, err);
        CHECK_EQ(rc, 0);
    }
}

static void node_stop(struct node *n)
{
    if (n->stopped)
        return;
    n->stopped = true;
    cn_quorum_stop(n->q, on_stopped, n);
    uv_close((uv_handle_t *)&n->listener, NULL);
}

static bool all_closed(void *ctx)
{
    struct cluster *c = ctx;
    for (int i = 0; i < NNODES; i++)
        if (!c->nodes[i].closed)
            return false;
    return true;
}

static void cluster_fini(struct cluster *c)
{
    for (int i = 0; i < NNODES; i++)
        node_stop(&c->nodes[i]);
    CHECK(wait_for(&c->loop, all_closed, c));
    uv_run(&c->loop, UV_RUN_DEFAULT);
    for (int i = 0; i < NNODES; i++) {
        cn_quorum_free(c->nodes[i].q);
        unit_rmtree(c->nodes[i].dir);
        free(c->nodes[i].dir);
    }
    CHECK_EQ(uv_loop_close(&c->loop), 0);
}

/* ---- a request through cn_quorum_submit ---- */

struct reg_waiter {
    struct cn_quorum_waiter w; /* first: done gets &w */
    bool in_submit;
    bool done;
    bool done_inside;
    int16_t error;
    int64_t epoch;
};

static void reg_done(struct cn_quorum_waiter *w, const struct cn_ctl_answer *a)
{
    struct reg_waiter *r = (struct reg_waiter *)w;
    r->done_inside = r->in_submit;
    r->done = true;
    r->error = a->error;
    r->epoch = a->kind == CN_CTE_REGISTER ? a->u.broker_epoch : -1;
}

static bool reg_answered(void *ctx)
{
    return ((struct reg_waiter *)ctx)->done;
}

struct seen_ctx {
    struct cluster *c;
    int32_t broker;
};

static bool all_see_broker(void *ctx)
{
    struct seen_ctx *s = ctx;
    for (int i = 0; i < NNODES; i++) {
        struct node *n = &s->c->nodes[i];
        if (!cn_image_broker_find(cn_quorum_image(n->q), s->broker))
            return false;
    }
    return true;
}

static void submit_register(struct cn_quorum *q, int32_t id,
                            struct reg_waiter *r)
{
    static const struct cn_ctl_endpoint ep = {{(const uint8_t *)"PLAINTEXT",
                                               9},
                                              {(const uint8_t *)"127.0.0.1",
                                               9},
                                              9092,
                                              0};
    const char *cid = cn_image_cluster_id(cn_quorum_image(q));
    struct cn_ctl_event ev = {.kind = CN_CTE_REGISTER};
    ev.u.reg.broker_id = id;
    ev.u.reg.cluster_id = cn_bytes_str(cid);
    memset(ev.u.reg.incarnation.b, id, sizeof ev.u.reg.incarnation.b);
    ev.u.reg.eps = &ep;
    ev.u.reg.neps = 1;
    ev.u.reg.rack = CN_BYTES_NULL;
    memset(r, 0, sizeof *r);
    r->w.done = reg_done;
    r->in_submit = true;
    cn_quorum_submit(q, &ev, &r->w);
    r->in_submit = false;
}

/* ---- a raw client naming another cluster ---- */

struct raw {
    uv_tcp_t tcp;
    uv_connect_t conn;
    uv_write_t wr;
    uint8_t hs[64];
    size_t len;
    char rbuf[64];
    bool eof;
    bool closed;
};

static void raw_closed(uv_handle_t *h)
{
    ((struct raw *)h->data)->closed = true;
}

static void raw_alloc(uv_handle_t *h, size_t sz, uv_buf_t *buf)
{
    struct raw *r = h->data;
    (void)sz;
    *buf = uv_buf_init(r->rbuf, sizeof r->rbuf);
}

static void raw_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    struct raw *r = s->data;
    (void)buf;
    if (nread < 0) {
        r->eof = true;
        uv_read_stop(s);
    }
}

static void raw_written(uv_write_t *w, int status)
{
    (void)w;
    (void)status;
}

static void raw_connected(uv_connect_t *c, int status)
{
    struct raw *r = c->data;
    if (status < 0) {
        r->eof = true;
        return;
    }
    uv_buf_t b = uv_buf_init((char *)r->hs, (unsigned)r->len);
    uv_write(&r->wr, (uv_stream_t *)&r->tcp, &b, 1, raw_written);
    uv_read_start((uv_stream_t *)&r->tcp, raw_alloc, raw_read);
}

static bool raw_eof(void *ctx)
{
    return ((struct raw *)ctx)->eof;
}

static bool raw_is_closed(void *ctx)
{
    return ((struct raw *)ctx)->closed;
}

/* The handshake layout of quorum.c, naming cluster cid. */
static size_t make_handshake(uint8_t *p, uint64_t id, const char *cid,
                             const char *addr)
{
    size_t cl = strlen(cid), al = strlen(addr);
    memcpy(p, "CNRAFT01", 8);
    for (int i = 0; i < 8; i++)
        p[8 + i] = (uint8_t)(id >> (56 - 8 * i));
    p[16] = (uint8_t)(cl >> 8);
    p[17] = (uint8_t)cl;
    p[18] = (uint8_t)(al >> 8);
    p[19] = (uint8_t)al;
    memset(p + 20, 0, 4);
    memcpy(p + 24, cid, cl);
    memcpy(p + 24 + cl, addr, al);
    return 24 + cl + al;
}

static bool knows_cluster_id(void *ctx)
{
    return cn_image_cluster_id(cn_quorum_image(ctx))[0] != '\0';
}

/* ---- tests ---- */

UNIT_TEST(test_quorum_handshake_magic)
{
    CHECK(cn_quorum_is_handshake((const uint8_t *)"CNRAFT01xyz", 11));
    CHECK(!cn_quorum_is_handshake((const uint8_t *)"CNRAFT0", 7));
    CHECK(!cn_quorum_is_handshake((const uint8_t *)"CNRAFT02", 8));
    /* A Kafka frame starts with a 4-byte size: never the magic. */
    CHECK(
        !cn_quorum_is_handshake((const uint8_t *)"\0\0\0\x20\0\x12\0\x03", 8));
}

UNIT_TEST(test_quorum_three_nodes)
{
    /* Peers hang up on each other, as in the broker (main.c). */
    signal(SIGPIPE, SIG_IGN);
    struct cluster *c = calloc(1, sizeof *c);
    cluster_init(c);

    /* A leader is elected and its controller leads. */
    CHECK(wait_for(&c->loop, has_leader, c));
    int l = cluster_leader(c);
    CHECK(l >= 0);
    if (l < 0)
        goto out;
    CHECK_EQ(cn_quorum_leader(c->nodes[l].q), c->nodes[l].id);
    struct cn_quorum_state st;
    cn_quorum_describe(c->nodes[l].q, &st);
    CHECK_EQ(st.leader_id, c->nodes[l].id);
    CHECK(st.term >= 1);
    CHECK_EQ(st.nreplicas, NNODES);

    /* A registration through submit: answered (never inside submit) and
     * applied on every image.  It names the cluster, so first the first
     * leader's ClusterId record. */
    CHECK(wait_for(&c->loop, knows_cluster_id, c->nodes[l].q));
    struct reg_waiter r;
    submit_register(c->nodes[l].q, 7, &r);
    CHECK(!r.done);
    CHECK(wait_for(&c->loop, reg_answered, &r));
    CHECK(!r.done_inside);
    CHECK_EQ(r.error, 0);
    CHECK(r.epoch > 0);
    struct seen_ctx sc = {c, 7};
    CHECK(wait_for(&c->loop, all_see_broker, &sc));
    const char *cid = cn_image_cluster_id(cn_quorum_image(c->nodes[l].q));
    CHECK(cid[0] != '\0');
    for (int i = 0; i < NNODES; i++) {
        CHECK(c->nodes[i].applied >= 0);
        CHECK(
            !strcmp(cn_image_cluster_id(cn_quorum_image(c->nodes[i].q)), cid));
    }

    /* A follower answers NOT_CONTROLLER, later too. */
    int f = (l + 1) % NNODES;
    struct reg_waiter rf;
    submit_register(c->nodes[f].q, 8, &rf);
    CHECK(!rf.done);
    CHECK(wait_for(&c->loop, reg_answered, &rf));
    CHECK_EQ(rf.error, KAFKA_NOT_CONTROLLER);

    /* A handshake naming another cluster is refused: the connection is
     * closed, and nobody goes fatal (the sender's flag says it never
     * applied an id). */
    struct raw *raw = calloc(1, sizeof *raw);
    raw->len = make_handshake(raw->hs, 9, "AnotherClusterId000000",
                              "127.0.0.1:1");
    uv_tcp_init(&c->loop, &raw->tcp);
    raw->tcp.data = raw;
    raw->conn.data = raw;
    struct sockaddr_in sa;
    uv_ip4_addr("127.0.0.1", c->nodes[f].port, &sa);
    uv_tcp_connect(&raw->conn, &raw->tcp, (struct sockaddr *)&sa,
                   raw_connected);
    CHECK(wait_for(&c->loop, raw_eof, raw));
    uv_close((uv_handle_t *)&raw->tcp, raw_closed);
    CHECK(wait_for(&c->loop, raw_is_closed, raw));
    free(raw);
    for (int i = 0; i < NNODES; i++)
        CHECK(!c->nodes[i].fatal);

    /* Stopping the leader's quorum elects another. */
    node_stop(&c->nodes[l]);
    CHECK(wait_for(&c->loop, has_leader, c));
    int l2 = cluster_leader(c);
    CHECK(l2 >= 0 && l2 != l);
    if (l2 >= 0) {
        /* The new controller holds what the old one committed. */
        const struct cn_image *img = cn_quorum_image(c->nodes[l2].q);
        if (!cn_image_broker_find(img, 7))
            fprintf(stderr, "  node %d: image offset %lld, %zu brokers\n",
                    c->nodes[l2].id, (long long)cn_image_offset(img),
                    cn_image_broker_count(img));
        CHECK(cn_image_broker_find(img, 7));
        struct reg_waiter r2;
        submit_register(c->nodes[l2].q, 9, &r2);
        CHECK(wait_for(&c->loop, reg_answered, &r2));
        CHECK_EQ(r2.error, 0);
    }
out:
    cluster_fini(c);
    free(c);
}

UNIT_MAIN(test_quorum_handshake_magic, test_quorum_three_nodes)
