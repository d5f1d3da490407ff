/*
 * quorum.c - this node's part in the metadata quorum: libraft on raft_uv,
 * on the broker's loop, with Cairn's own transport.
 *
 * The transport: raft's connections go through the listeners Kafka uses,
 * so a connection starts with a handshake a listener can tell from a
 * Kafka frame:
 *
 *   0  "CNRAFT01"
 *   8  u64 sender's raft id (big-endian)
 *  16  u16 cluster id length (0: not known yet), u16 address length
 *  20  u8 flags (1: the sender's image holds the cluster id, i.e. it
 *      applied the quorum's ClusterId record), 3 bytes zero
 *  24  cluster id, then the sender's raft address ("host:port")
 *
 * Nothing answers a handshake: a refused one is a closed connection, and
 * raft retries as for any lost peer.  Reads are exact-size so no byte of
 * raft's own traffic is consumed before the stream is handed to raft.
 * Streams given to raft are raft_malloc'd: raft closes and frees them.
 */
#include "node/quorum.h"

#include <errno.h>
#include <raft.h>
#include <raft/uv.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/clock.h"
#include "base/err.h"
#include "base/say.h"
#include "meta/fsm.h"
#include "proto/kerr.h"

#define HS_MAGIC "CNRAFT01"
#define HS_HEAD 24
#define HS_CID_MAX 64
#define HS_ADDR_MAX 300
#define HS_TIMEOUT_MS 10000

struct hs_in;  /* an incoming handshake being read */
struct hs_out; /* an outgoing connection being made */

/* An answer waiting to reach its waiter outside every raft/fsm call. */
struct pend_answer {
    struct cn_quorum_waiter *w;
    struct cn_ctl_answer ans;
    char *message;
};

struct cn_quorum {
    uv_loop_t *loop;
    int32_t node_id;
    bool voter;
    struct cn_quorum_voter *voters;
    size_t nvoters;
    char self_addr[300];
    char *dir;
    char cluster_id[HS_CID_MAX + 1];     /* known: configured or applied */
    char own_cluster_id[HS_CID_MAX + 1]; /* meta.properties' */
    struct cn_quorum_hooks hooks;

    struct raft raft;
    struct raft_io io;
    struct raft_uv_transport tr;
    struct cn_mfsm *m;
    bool raft_inited, io_inited, raft_started;

    raft_uv_accept_cb accept_cb;
    bool tr_closing;
    raft_uv_transport_close_cb tr_close_cb;
    struct hs_in *ins;
    struct hs_out *outs;

    uv_check_t check;
    uv_idle_t idle;
    uv_timer_t timer;
    int handles_open;
    bool woken;
    int seen_state;
    uint64_t seen_term;
    bool leads;
    bool stopping;
    bool raft_closed;
    char fatal[512];
    bool fatal_pending, fatal_sent;

    /* Requests fed and not yet answered (to answer NOT_CONTROLLER at
     * stop), and answers not yet delivered. */
    struct {
        struct cn_quorum_waiter *w;
        enum cn_ctl_ev_kind kind;
    } * open;
    size_t nopen, open_cap;
    struct pend_answer *pend;
    size_t npend, pend_cap;

    void (*stop_done)(void *arg);
    void *stop_arg;
};

/* ---- small helpers ------------------------------------------------- */

static void put_u16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

static uint16_t get_u16(const uint8_t *p)
{
    return (uint16_t)((p[0] << 8) | p[1]);
}

static void put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--) {
        p[i] = (uint8_t)v;
        v >>= 8;
    }
}

static uint64_t get_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = (v << 8) | p[i];
    return v;
}

bool cn_quorum_is_handshake(const uint8_t *bytes, size_t n)
{
    return n >= 8 && memcmp(bytes, HS_MAGIC, 8) == 0;
}

static void on_idle(uv_idle_t *i);
static void on_timer(uv_timer_t *t);

static void set_fatal(struct cn_quorum *q, const char *why)
{
    if (q->fatal_pending || q->fatal_sent)
        return;
    snprintf(q->fatal, sizeof(q->fatal), "%s", why);
    q->fatal_pending = true;
    q->woken = true;
    if (!q->stopping)
        uv_idle_start(&q->idle, on_idle);
}

/* ---- the transport: incoming --------------------------------------- */

struct hs_in {
    struct hs_in *next;
    struct cn_quorum *q;
    uv_tcp_t *tcp; /* raft_malloc'd */
    uv_timer_t timer;
    uint8_t buf[HS_HEAD + HS_CID_MAX + HS_ADDR_MAX];
    size_t have, need;
    bool done;
};

static void hs_in_unlink(struct hs_in *h)
{
    struct hs_in **pp = &h->q->ins;
    while (*pp && *pp != h)
        pp = &(*pp)->next;
    if (*pp)
        *pp = h->next;
}

static void hs_in_timer_closed(uv_handle_t *hd)
{
    struct hs_in *h = hd->data;
    struct cn_quorum *q = h->q;
    free(h);
    q->handles_open--;
    if (q->tr_closing && !q->ins && !q->outs && q->tr_close_cb) {
        raft_uv_transport_close_cb cb = q->tr_close_cb;
        q->tr_close_cb = NULL;
        cb(&q->tr);
    }
}

static void stream_free_cb(uv_handle_t *hd)
{
    raft_free(hd);
}

/* Ends an incoming handshake: give the stream to raft (ok) or close it. */
static void hs_in_finish(struct hs_in *h, bool ok, raft_id id,
                         const char *addr)
{
    struct cn_quorum *q = h->q;
    if (h->done)
        return;
    h->done = true;
    hs_in_unlink(h);
    uv_timer_stop(&h->timer);
    uv_read_stop((uv_stream_t *)h->tcp);
    if (ok && q->accept_cb && !q->tr_closing) {
        h->tcp->data = NULL;
        q->accept_cb(&q->tr, id, addr, (uv_stream_t *)h->tcp);
    } else {
        uv_close((uv_handle_t *)h->tcp, stream_free_cb);
    }
    h->tcp = NULL;
    uv_close((uv_handle_t *)&h->timer, hs_in_timer_closed);
}

static void hs_in_check(struct hs_in *h)
{
    struct cn_quorum *q = h->q;
    if (h->have < HS_HEAD)
        return;
    size_t cid_len = get_u16(h->buf + 16), addr_len = get_u16(h->buf + 18);
    if (cid_len > HS_CID_MAX || addr_len == 0 || addr_len >= HS_ADDR_MAX) {
        CN_WARN("quorum: a raft handshake with bad lengths: refused");
        hs_in_finish(h, false, 0, NULL);
        return;
    }
    h->need = HS_HEAD + cid_len + addr_len;
    if (h->have < h->need)
        return;
    uint64_t id = get_u64(h->buf + 8);
    char cid[HS_CID_MAX + 1], addr[HS_ADDR_MAX];
    memcpy(cid, h->buf + HS_HEAD, cid_len);
    cid[cid_len] = 0;
    memcpy(addr, h->buf + HS_HEAD + cid_len, addr_len);
    addr[addr_len] = 0;
    if (id == 0) {
        CN_WARN("quorum: a raft handshake from %s with id 0: refused", addr);
        hs_in_finish(h, false, 0, NULL);
        return;
    }
    if (cid_len > 0 && q->cluster_id[0] && strcmp(cid, q->cluster_id) != 0) {
        /* A peer that applied the quorum's id speaks for the quorum: a
         * node that never applied one holds another cluster's data. */
        if ((h->buf[20] & 1) && !cn_image_cluster_id(cn_mfsm_image(q->m))[0]) {
            char why[300];
            snprintf(why, sizeof(why),
                     "belongs to cluster %s, the quorum is cluster %s",
                     q->own_cluster_id, cid);
            set_fatal(q, why);
        }
        CN_WARN("quorum: node %llu at %s is in cluster %s, this node in %s: "
                "refused",
                (unsigned long long)id, addr, cid, q->cluster_id);
        hs_in_finish(h, false, 0, NULL);
        return;
    }
    hs_in_finish(h, true, (raft_id)id, addr);
}

static void hs_in_alloc(uv_handle_t *hd, size_t suggested, uv_buf_t *buf)
{
    struct hs_in *h = hd->data;
    (void)suggested;
    size_t want = (h->have < HS_HEAD ? HS_HEAD : h->need) - h->have;
    *buf = uv_buf_init((char *)h->buf + h->have, (unsigned)want);
}

static void hs_in_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    struct hs_in *h = s->data;
    (void)buf;
    if (nread < 0) {
        hs_in_finish(h, false, 0, NULL);
        return;
    }
    h->have += (size_t)nread;
    hs_in_check(h);
}

static void hs_in_timeout(uv_timer_t *t)
{
    struct hs_in *h = t->data;
    CN_WARN("quorum: a raft handshake did not finish in %d ms", HS_TIMEOUT_MS);
    hs_in_finish(h, false, 0, NULL);
}

int cn_quorum_accept(struct cn_quorum *q, uv_stream_t *stream,
                     const uint8_t *bytes, size_t n)
{
    if (q->stopping || q->tr_closing || !q->accept_cb)
        return -ESHUTDOWN;
    if (!cn_quorum_is_handshake(bytes, n) || n > HS_HEAD)
        return -EPROTO;
    struct hs_in *h = calloc(1, sizeof(*h));
    if (!h)
        return CN_ENOMEM;
    h->q = q;
    h->tcp = (uv_tcp_t *)stream;
    memcpy(h->buf, bytes, n);
    h->have = n;
    h->need = HS_HEAD;
    stream->data = h;
    uv_timer_init(q->loop, &h->timer);
    h->timer.data = h;
    q->handles_open++;
    int rc = uv_read_start(stream, hs_in_alloc, hs_in_read);
    if (rc < 0) {
        stream->data = NULL;
        h->tcp = NULL;
        h->done = true;
        uv_close((uv_handle_t *)&h->timer, hs_in_timer_closed);
        return rc;
    }
    uv_timer_start(&h->timer, hs_in_timeout, HS_TIMEOUT_MS, 0);
    h->next = q->ins;
    q->ins = h;
    if (n == HS_HEAD)
        hs_in_check(h);
    return 0;
}

/* ---- the transport: outgoing --------------------------------------- */

struct hs_out {
    struct hs_out *next;
    struct cn_quorum *q;
    struct raft_uv_connect *req;
    raft_uv_connect_cb cb;
    uv_getaddrinfo_t gai;
    uv_connect_t conn;
    uv_write_t wr;
    uv_tcp_t *tcp; /* raft_malloc'd, NULL until resolved */
    uint8_t buf[HS_HEAD + HS_CID_MAX + HS_ADDR_MAX];
    size_t len;
    char host[256], port[16];
    bool canceled;
    bool resolving;
};

static void hs_out_unlink(struct hs_out *o)
{
    struct hs_out **pp = &o->q->outs;
    while (*pp && *pp != o)
        pp = &(*pp)->next;
    if (*pp)
        *pp = o->next;
}

static void tr_maybe_closed(struct cn_quorum *q)
{
    if (q->tr_closing && !q->ins && !q->outs && q->tr_close_cb) {
        raft_uv_transport_close_cb cb = q->tr_close_cb;
        q->tr_close_cb = NULL;
        cb(&q->tr);
    }
}

/* Reports the outcome to raft and forgets o. */
static void hs_out_end(struct hs_out *o, uv_stream_t *stream, int status)
{
    struct cn_quorum *q = o->q;
    hs_out_unlink(o);
    o->cb(o->req, stream, status);
    free(o);
    tr_maybe_closed(q);
}

static void stream_free_cb(uv_handle_t *hd);

static void hs_out_tcp_closed(uv_handle_t *hd)
{
    struct hs_out *o = hd->data;
    raft_free(hd);
    o->tcp = NULL;
    hs_out_end(o, NULL, o->canceled ? RAFT_CANCELED : RAFT_NOCONNECTION);
}

static void hs_out_fail(struct hs_out *o)
{
    if (o->tcp && !uv_is_closing((uv_handle_t *)o->tcp)) {
        uv_close((uv_handle_t *)o->tcp, hs_out_tcp_closed);
        return;
    }
    if (!o->tcp)
        hs_out_end(o, NULL, o->canceled ? RAFT_CANCELED : RAFT_NOCONNECTION);
}

static void hs_out_written(uv_write_t *w, int status)
{
    struct hs_out *o = w->data;
    if (status < 0 || o->canceled) {
        hs_out_fail(o);
        return;
    }
    uv_tcp_t *tcp = o->tcp;
    tcp->data = NULL;
    o->tcp = NULL;
    hs_out_end(o, (uv_stream_t *)tcp, 0);
}

static void hs_out_connected(uv_connect_t *c, int status)
{
    struct hs_out *o = c->data;
    if (status < 0 || o->canceled) {
        hs_out_fail(o);
        return;
    }
    uv_buf_t b = uv_buf_init((char *)o->buf, (unsigned)o->len);
    o->wr.data = o;
    if (uv_write(&o->wr, (uv_stream_t *)o->tcp, &b, 1, hs_out_written) < 0)
        hs_out_fail(o);
}

/* Starts the TCP connect; 0 or an error (o not yet linked anywhere). */
static int hs_out_connect(struct hs_out *o, const struct sockaddr *sa)
{
    o->tcp = raft_malloc(sizeof(*o->tcp));
    if (!o->tcp)
        return UV_ENOMEM;
    uv_tcp_init(o->q->loop, o->tcp);
    o->tcp->data = o;
    uv_tcp_nodelay(o->tcp, 1);
    o->conn.data = o;
    return uv_tcp_connect(&o->conn, o->tcp, sa, hs_out_connected);
}

static void hs_out_resolved(uv_getaddrinfo_t *g, int status,
                            struct addrinfo *res)
{
    struct hs_out *o = g->data;
    o->resolving = false;
    if (status < 0 || o->canceled || !res) {
        if (res)
            uv_freeaddrinfo(res);
        hs_out_fail(o);
        return;
    }
    int rc = hs_out_connect(o, res->ai_addr);
    uv_freeaddrinfo(res);
    if (rc < 0)
        hs_out_fail(o);
}

static int split_addr(const char *address, char *host, size_t host_len,
                      char *port, size_t port_len)
{
    const char *colon = strrchr(address, ':');
    if (!colon || colon == address || !colon[1])
        return -1;
    const char *h = address;
    size_t hl = (size_t)(colon - address);
    if (h[0] == '[' && hl >= 2 && h[hl - 1] == ']') {
        h++;
        hl -= 2;
    }
    if (hl >= host_len || strlen(colon + 1) >= port_len)
        return -1;
    memcpy(host, h, hl);
    host[hl] = 0;
    snprintf(port, port_len, "%s", colon + 1);
    return 0;
}

static size_t hs_encode(struct cn_quorum *q, uint8_t *buf)
{
    size_t cid_len = strlen(q->cluster_id), addr_len = strlen(q->self_addr);
    memcpy(buf, HS_MAGIC, 8);
    put_u64(buf + 8, (uint64_t)q->node_id);
    put_u16(buf + 16, (uint16_t)cid_len);
    put_u16(buf + 18, (uint16_t)addr_len);
    memset(buf + 20, 0, 4);
    if (cn_image_cluster_id(cn_mfsm_image(q->m))[0])
        buf[20] = 1;
    memcpy(buf + HS_HEAD, q->cluster_id, cid_len);
    memcpy(buf + HS_HEAD + cid_len, q->self_addr, addr_len);
    return HS_HEAD + cid_len + addr_len;
}

/* raft_uv_init takes transport->data for itself. */
static struct cn_quorum *tr_quorum(struct raft_uv_transport *t)
{
    return (struct cn_quorum *)((char *)t - offsetof(struct cn_quorum, tr));
}

static int tr_init(struct raft_uv_transport *t, raft_id id, const char *addr)
{
    (void)t;
    (void)id;
    (void)addr;
    return 0;
}

static int tr_listen(struct raft_uv_transport *t, raft_uv_accept_cb cb)
{
    struct cn_quorum *q = tr_quorum(t);
    q->accept_cb = cb;
    return 0;
}

static int tr_connect(struct raft_uv_transport *t, struct raft_uv_connect *req,
                      raft_id id, const char *address, raft_uv_connect_cb cb)
{
    struct cn_quorum *q = tr_quorum(t);
    (void)id;
    if (q->tr_closing)
        return RAFT_CANCELED;
    struct hs_out *o = calloc(1, sizeof(*o));
    if (!o)
        return RAFT_NOMEM;
    if (split_addr(address, o->host, sizeof(o->host), o->port,
                   sizeof(o->port)) < 0) {
        free(o);
        snprintf(t->errmsg, sizeof(t->errmsg), "bad raft address %s", address);
        return RAFT_NOCONNECTION;
    }
    o->q = q;
    o->req = req;
    o->cb = cb;
    o->len = hs_encode(q, o->buf);
    o->gai.data = o;
    /* A numeric address needs no resolver thread. */
    struct sockaddr_storage ss;
    int portn = atoi(o->port);
    if (uv_ip4_addr(o->host, portn, (struct sockaddr_in *)&ss) == 0 ||
        uv_ip6_addr(o->host, portn, (struct sockaddr_in6 *)&ss) == 0) {
        o->next = q->outs;
        q->outs = o;
        if (hs_out_connect(o, (struct sockaddr *)&ss) < 0) {
            hs_out_unlink(o);
            if (o->tcp) {
                /* The handle closes on its own; raft hears of it now. */
                o->tcp->data = NULL;
                uv_close((uv_handle_t *)o->tcp, stream_free_cb);
            }
            free(o);
            return RAFT_NOCONNECTION;
        }
        return 0;
    }
    struct addrinfo hints = {0};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    int rc = uv_getaddrinfo(q->loop, &o->gai, hs_out_resolved, o->host,
                            o->port, &hints);
    if (rc < 0) {
        free(o);
        return RAFT_NOCONNECTION;
    }
    o->resolving = true;
    o->next = q->outs;
    q->outs = o;
    return 0;
}

static void tr_close(struct raft_uv_transport *t,
                     raft_uv_transport_close_cb cb)
{
    struct cn_quorum *q = tr_quorum(t);
    q->tr_closing = true;
    q->tr_close_cb = cb;
    q->accept_cb = NULL;
    for (struct hs_in *h = q->ins, *next; h; h = next) {
        next = h->next;
        hs_in_finish(h, false, 0, NULL);
    }
    for (struct hs_out *o = q->outs; o; o = o->next) {
        o->canceled = true;
        if (o->resolving)
            uv_cancel((uv_req_t *)&o->gai);
        else if (o->tcp && !uv_is_closing((uv_handle_t *)o->tcp))
            uv_close((uv_handle_t *)o->tcp, hs_out_tcp_closed);
    }
    tr_maybe_closed(q);
}

/* ---- answers and the machine's pace --------------------------------- */

static void open_remove(struct cn_quorum *q, struct cn_quorum_waiter *w)
{
    for (size_t i = 0; i < q->nopen; i++) {
        if (q->open[i].w == w) {
            q->open[i] = q->open[--q->nopen];
            return;
        }
    }
}

static void pend_push(struct cn_quorum *q, struct cn_quorum_waiter *w,
                      const struct cn_ctl_answer *ans)
{
    if (q->npend == q->pend_cap) {
        size_t cap = q->pend_cap ? q->pend_cap * 2 : 8;
        struct pend_answer *p = realloc(q->pend, cap * sizeof(*p));
        if (!p) {
            CN_ERROR("quorum: out of memory queueing an answer");
            abort();
        }
        q->pend = p;
        q->pend_cap = cap;
    }
    struct pend_answer *p = &q->pend[q->npend++];
    p->w = w;
    p->ans = *ans;
    p->message = ans->message ? strdup(ans->message) : NULL;
    p->ans.message = p->message;
    if (!q->stopping)
        uv_idle_start(&q->idle, on_idle);
}

static void deliver(struct cn_quorum *q)
{
    /* A done may submit again: take the batch first. */
    while (q->npend > 0) {
        struct pend_answer p = q->pend[0];
        memmove(q->pend, q->pend + 1, (q->npend - 1) * sizeof(*q->pend));
        q->npend--;
        p.w->done(p.w, &p.ans);
        free(p.message);
    }
}

static void on_answer(void *ctx, const struct cn_ctl_answer *ans)
{
    struct cn_quorum *q = ctx;
    struct cn_quorum_waiter *w = ans->token;
    if (!w)
        return;
    open_remove(q, w);
    pend_push(q, w, ans);
}

static void check_cluster_id(struct cn_quorum *q)
{
    const char *cid = cn_image_cluster_id(cn_mfsm_image(q->m));
    if (!cid[0])
        return;
    if (q->own_cluster_id[0] && strcmp(q->own_cluster_id, cid) != 0) {
        char why[300];
        snprintf(why, sizeof(why),
                 "belongs to cluster %s, the quorum is cluster %s",
                 q->own_cluster_id, cid);
        set_fatal(q, why);
        return;
    }
    if (!q->cluster_id[0])
        snprintf(q->cluster_id, sizeof(q->cluster_id), "%s", cid);
}

static void on_applied(void *ctx, int64_t offset)
{
    struct cn_quorum *q = ctx;
    check_cluster_id(q);
    if (q->fatal_pending)
        return;
    if (q->hooks.applied)
        q->hooks.applied(q->hooks.ctx, offset);
}

static void on_wake(void *ctx)
{
    struct cn_quorum *q = ctx;
    q->woken = true;
}

static void arm_timer(struct cn_quorum *q)
{
    if (q->stopping)
        return;
    int64_t at = cn_mfsm_timer_ms(q->m);
    if (at < 0) {
        uv_timer_stop(&q->timer);
        return;
    }
    /* A deadline already past means the machine waits on something else
     * (its fence proposal in flight): tick at a pace, never with 0, which
     * libuv would run again in the same timer pass, starving the loop. */
    int64_t now = cn_clock_mono_ms();
    uint64_t delay = at > now ? (uint64_t)(at - now) : 10;
    uv_timer_start(&q->timer, on_timer, delay, 0);
}

/* Runs the machine, then everything that must happen outside it. */
static void run(struct cn_quorum *q)
{
    if (q->stopping)
        return;
    q->woken = false;
    cn_mfsm_poll(q->m, cn_clock_mono_ms());
    arm_timer(q);
    bool leads = cn_mfsm_leads(q->m);
    if (leads != q->leads) {
        q->leads = leads;
        CN_INFO("quorum: node %d %s the active controller", q->node_id,
                leads ? "is now" : "is no longer");
        if (q->hooks.leading)
            q->hooks.leading(q->hooks.ctx, leads);
    }
    deliver(q);
    if (q->fatal_pending && !q->fatal_sent) {
        q->fatal_pending = false;
        q->fatal_sent = true;
        CN_ERROR("quorum: %s", q->fatal);
        if (q->hooks.fatal)
            q->hooks.fatal(q->hooks.ctx, q->fatal);
    }
}

static void on_timer(uv_timer_t *t)
{
    run(t->data);
}

static void on_check(uv_check_t *c)
{
    struct cn_quorum *q = c->data;
    if (q->stopping)
        return;
    /* libraft tells of no leadership change: the machine watches state
     * and term, so a change of either is work for it. */
    int state = raft_state(&q->raft);
    uint64_t term = raft_current_term(&q->raft);
    /* A leader whose machine does not lead yet: its barrier may have
     * been refused, and only a poll tries again. */
    if (state != q->seen_state || term != q->seen_term ||
        (state == RAFT_LEADER && !cn_mfsm_leads(q->m))) {
        q->seen_state = state;
        q->seen_term = term;
        q->woken = true;
    }
    if (q->woken || q->npend > 0 || q->fatal_pending)
        run(q);
}

static void on_idle(uv_idle_t *i)
{
    struct cn_quorum *q = i->data;
    uv_idle_stop(i);
    run(q);
}

/* ---- start and stop ------------------------------------------------- */

static int mkdir_p(const char *dir)
{
    char tmp[4096];
    if (snprintf(tmp, sizeof(tmp), "%s", dir) >= (int)sizeof(tmp))
        return -ENAMETOOLONG;
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = 0;
        if (mkdir(tmp, 0755) < 0 && errno != EEXIST)
            return -errno;
        *p = '/';
    }
    if (mkdir(tmp, 0755) < 0 && errno != EEXIST)
        return -errno;
    return 0;
}

static void q_free_all(struct cn_quorum *q)
{
    if (q->m)
        cn_mfsm_free(q->m);
    for (size_t i = 0; i < q->npend; i++)
        free(q->pend[i].message);
    free(q->pend);
    free(q->open);
    free(q->voters);
    free(q->dir);
    free(q);
}

static void fail_closed(void *arg)
{
    *(bool *)arg = true;
}

/* A start that failed after its handles exist: close them on the loop
 * (cn_quorum_start runs before the loop does, as broker.c calls it). */
static void fail_close(struct cn_quorum *q)
{
    bool closed = false;
    cn_quorum_stop(q, fail_closed, &closed);
    while (!closed)
        uv_run(q->loop, UV_RUN_ONCE);
    q_free_all(q);
}

int cn_quorum_start(uv_loop_t *loop, const struct cn_quorum_config *cfg,
                    const struct cn_quorum_hooks *hooks,
                    struct cn_quorum **out, char *err, size_t err_len)
{
    struct cn_quorum *q = calloc(1, sizeof(*q));
    if (!q) {
        snprintf(err, err_len, "out of memory");
        return CN_ENOMEM;
    }
    q->loop = loop;
    q->node_id = cfg->node_id;
    q->voter = cfg->voter;
    q->hooks = *hooks;
    q->dir = strdup(cfg->dir);
    q->voters = calloc(cfg->nvoters ? cfg->nvoters : 1, sizeof(*q->voters));
    if (!q->dir || !q->voters) {
        q_free_all(q);
        snprintf(err, err_len, "out of memory");
        return CN_ENOMEM;
    }
    memcpy(q->voters, cfg->voters, cfg->nvoters * sizeof(*q->voters));
    q->nvoters = cfg->nvoters;
    snprintf(q->self_addr, sizeof(q->self_addr), "%s:%d", cfg->self_host,
             cfg->self_port);
    if (cfg->cluster_id && strlen(cfg->cluster_id) > HS_CID_MAX) {
        q_free_all(q);
        snprintf(err, err_len, "cluster id %s is too long", cfg->cluster_id);
        return -EINVAL;
    }
    if (cfg->cluster_id) {
        snprintf(q->cluster_id, sizeof(q->cluster_id), "%s", cfg->cluster_id);
        snprintf(q->own_cluster_id, sizeof(q->own_cluster_id), "%s",
                 cfg->cluster_id);
    }

    int rc = mkdir_p(cfg->dir);
    if (rc < 0) {
        snprintf(err, err_len, "metadata.log.dir: cannot create %s: %s",
                 cfg->dir, strerror(-rc));
        q_free_all(q);
        return rc;
    }

    struct cn_mfsm_hooks mh = {
        .answer = on_answer,
        .applied = on_applied,
        .wake = on_wake,
        .ctx = q,
    };
    struct cn_ctl_config ctl = cfg->ctl;
    if (!ctl.cluster_id || !ctl.cluster_id[0])
        ctl.cluster_id = cfg->cluster_id;
    rc = cn_mfsm_new(&ctl, &mh, &q->m);
    if (rc < 0) {
        snprintf(err, err_len, "out of memory");
        q_free_all(q);
        return rc;
    }

    q->tr.version = 1;
    q->tr.init = tr_init;
    q->tr.listen = tr_listen;
    q->tr.connect = tr_connect;
    q->tr.close = tr_close;
    rc = raft_uv_init(&q->io, loop, q->dir, &q->tr);
    if (rc != 0) {
        snprintf(err, err_len, "metadata.log.dir: %s: %s", q->dir,
                 q->io.errmsg[0] ? q->io.errmsg : raft_strerror(rc));
        q_free_all(q);
        return -EIO;
    }
    /* Not 8 MiB x 3 preallocated per node. */
    raft_uv_set_segment_size(&q->io, 1 << 20);
    raft_uv_set_connect_retry_delay(&q->io, 200);
    rc = raft_init(&q->raft, &q->io, cn_mfsm_raft_fsm(q->m),
                   (raft_id)cfg->node_id, q->self_addr);
    if (rc != 0) {
        /* raft_init reads the directory's metadata files: say which
         * directory is unreadable. */
        snprintf(err, err_len, "metadata.log.dir: %s: %s", q->dir,
                 raft_errmsg(&q->raft));
        raft_uv_close(&q->io);
        q_free_all(q);
        return -EIO;
    }
    q->raft.data = q;
    /* With raft_uv's default threshold, a leader refused entries with
     * RAFT_NOSPACE at random, every time with 1 MiB segments [run]: a
     * majority's reported "capacity" was under it.  The metadata log is
     * small; a full disk fails the write itself. */
    raft_set_capacity_threshold(&q->raft, 0);
    cn_mfsm_attach(q->m, &q->raft);
    int64_t et = cfg->election_timeout_ms > 0 ? cfg->election_timeout_ms
                                              : 1000;
    int64_t ht = cfg->heartbeat_timeout_ms > 0 ? cfg->heartbeat_timeout_ms
                                               : et / 10;
    raft_set_election_timeout(&q->raft, (unsigned)et);
    raft_set_heartbeat_timeout(&q->raft, (unsigned)(ht > 0 ? ht : 1));

    uv_check_init(loop, &q->check);
    q->check.data = q;
    uv_check_start(&q->check, on_check);
    uv_unref((uv_handle_t *)&q->check);
    uv_idle_init(loop, &q->idle);
    q->idle.data = q;
    uv_timer_init(loop, &q->timer);
    q->timer.data = q;
    q->handles_open += 3;

    if (cfg->voter) {
        struct raft_configuration conf;
        raft_configuration_init(&conf);
        rc = 0;
        for (size_t i = 0; i < cfg->nvoters && rc == 0; i++) {
            char addr[300];
            snprintf(addr, sizeof(addr), "%s:%d", cfg->voters[i].host,
                     cfg->voters[i].port);
            rc = raft_configuration_add(&conf, (raft_id)cfg->voters[i].id,
                                        addr, RAFT_VOTER);
        }
        if (rc == 0)
            rc = raft_bootstrap(&q->raft, &conf);
        raft_configuration_close(&conf);
        if (rc == RAFT_CANTBOOTSTRAP)
            rc = 0;
        if (rc != 0) {
            snprintf(err, err_len, "metadata.log.dir: %s: bootstrap: %s",
                     q->dir, raft_errmsg(&q->raft));
            q->raft_inited = true;
            fail_close(q);
            return -EIO;
        }
    }
    q->raft_inited = true;
    rc = raft_start(&q->raft);
    if (rc != 0) {
        snprintf(err, err_len, "metadata.log.dir: %s: %s", q->dir,
                 raft_errmsg(&q->raft));
        fail_close(q);
        return -EIO;
    }
    q->raft_started = true;
    q->woken = true;
    uv_idle_start(&q->idle, on_idle);
    CN_INFO("quorum: node %d (%s) started raft at %s in %s", q->node_id,
            cfg->voter ? "voter" : "standby", q->self_addr, q->dir);
    *out = q;
    return 0;
}

static void handle_closed(uv_handle_t *h)
{
    struct cn_quorum *q = h->data;
    q->handles_open--;
    if (q->handles_open == 0 && q->raft_closed && q->stop_done)
        q->stop_done(q->stop_arg);
}

static void on_raft_closed(struct raft *r)
{
    struct cn_quorum *q = r->data;
    raft_uv_close(&q->io);
    q->raft_closed = true;
    uv_close((uv_handle_t *)&q->check, handle_closed);
    uv_close((uv_handle_t *)&q->idle, handle_closed);
    uv_close((uv_handle_t *)&q->timer, handle_closed);
}

void cn_quorum_stop(struct cn_quorum *q, void (*done)(void *arg), void *arg)
{
    if (q->stopping)
        return;
    q->stopping = true;
    q->stop_done = done;
    q->stop_arg = arg;
    uv_timer_stop(&q->timer);
    uv_idle_stop(&q->idle);
    deliver(q);
    /* Requests the machine still holds will never be decided here. */
    while (q->nopen > 0) {
        struct cn_ctl_answer ans = {0};
        ans.kind = q->open[0].kind;
        ans.token = q->open[0].w;
        ans.error = KAFKA_NOT_CONTROLLER;
        struct cn_quorum_waiter *w = q->open[0].w;
        q->open[0] = q->open[--q->nopen];
        w->done(w, &ans);
    }
    if (q->leads && q->hooks.leading) {
        q->leads = false;
        q->hooks.leading(q->hooks.ctx, false);
    }
    if (q->raft_inited) {
        raft_close(&q->raft, on_raft_closed);
    } else {
        q->raft_closed = true;
        uv_close((uv_handle_t *)&q->check, handle_closed);
        uv_close((uv_handle_t *)&q->idle, handle_closed);
        uv_close((uv_handle_t *)&q->timer, handle_closed);
    }
}

void cn_quorum_free(struct cn_quorum *q)
{
    if (q)
        q_free_all(q);
}

/* ---- queries and requests ------------------------------------------ */

const struct cn_image *cn_quorum_image(struct cn_quorum *q)
{
    return cn_mfsm_image(q->m);
}

int32_t cn_quorum_leader(const struct cn_quorum *q)
{
    if (q->stopping || !q->raft_started)
        return -1;
    raft_id id = 0;
    const char *addr = NULL;
    raft_leader((struct raft *)&q->raft, &id, &addr);
    return id ? (int32_t)id : -1;
}

bool cn_quorum_leads(const struct cn_quorum *q)
{
    return !q->stopping && cn_mfsm_leads(q->m);
}

void cn_quorum_submit(struct cn_quorum *q, const struct cn_ctl_event *ev,
                      struct cn_quorum_waiter *w)
{
    if (q->stopping) {
        /* Never inside submit: but a stopped quorum has no loop turn
         * left to answer from, so the caller must not submit after
         * stop; answer at once as the lesser evil. */
        struct cn_ctl_answer ans = {0};
        ans.kind = ev->kind;
        ans.token = w;
        ans.error = KAFKA_NOT_CONTROLLER;
        w->done(w, &ans);
        return;
    }
    if (q->nopen == q->open_cap) {
        size_t cap = q->open_cap ? q->open_cap * 2 : 8;
        void *p = realloc(q->open, cap * sizeof(*q->open));
        if (!p) {
            CN_ERROR("quorum: out of memory queueing a request");
            abort();
        }
        q->open = p;
        q->open_cap = cap;
    }
    q->open[q->nopen].w = w;
    q->open[q->nopen].kind = ev->kind;
    q->nopen++;
    struct cn_ctl_event e = *ev;
    e.token = w;
    cn_mfsm_feed(q->m, cn_clock_mono_ms(), &e);
    /* Answers given now wait in pend for the idle turn. */
    arm_timer(q);
    q->woken = true;
    uv_idle_start(&q->idle, on_idle);
}

void cn_quorum_describe(const struct cn_quorum *q, struct cn_quorum_state *out)
{
    memset(out, 0, sizeof(*out));
    out->leader_id = cn_quorum_leader(q);
    struct raft *r = (struct raft *)&q->raft;
    if (!q->raft_started || q->stopping) {
        out->term = -1;
        out->high_watermark = -1;
        return;
    }
    out->term = (int64_t)raft_current_term(r);
    out->high_watermark = (int64_t)raft_commit_index(r);
    bool leader = raft_state(r) == RAFT_LEADER;
    for (unsigned i = 0; i < r->configuration.n && out->nreplicas < 64; i++) {
        const struct raft_server *s = &r->configuration.servers[i];
        struct cn_quorum_replica *rep = &out->replicas[out->nreplicas++];
        rep->id = (int32_t)s->id;
        rep->voter = s->role == RAFT_VOTER;
        rep->log_end_offset = -1;
        rep->last_contact_ms = -1;
        raft_index idx = 0;
        if (s->id == r->id)
            rep->log_end_offset = (int64_t)raft_last_index(r);
        else if (leader && raft_match_index(r, s->id, &idx) == 0)
            rep->log_end_offset = (int64_t)idx;
    }
}
