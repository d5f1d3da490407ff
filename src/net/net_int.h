/*
 * net_int.h - the net layer's own structures: a server, its connections
 * and their queued writes.  Shared by net.c (framing, budget, TLS,
 * closing) and net_req.c (a request's view of its connection).  Not part
 * of the layer's interface (net.h).
 */
#ifndef CN_NET_NET_INT_H
#define CN_NET_NET_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include <openssl/ssl.h>

#include "net.h"

/* An intrusive list of connections (through cn_conn.lprev/lnext); a
 * connection is on at most one at a time, named by cn_conn.list. */
struct conn_list {
    struct cn_conn *head, *tail;
    size_t n;
};

struct cn_server {
    uv_loop_t *loop;
    uv_tcp_t listener;
    uv_timer_t idle_timer;
    uv_idle_t resume_idle;     /* runs the lists below; on only when needed */
    uv_timer_t throttle_timer; /* fires when the first throttle ends */
    bool resume_on;
    struct cn_server_config cfg;
    cn_req_cb cb;
    void *opaque;
    struct cn_conn *conns; /* all open connections */
    size_t conn_count;
    bool stopping;
    int pending_closes; /* handles whose close callback has not run */
    /* The broker-wide budget lives in bud (this server, or the one named
     * by cfg.share_budget); from bud, peer_next lists the servers sharing
     * it. */
    struct cn_server *bud;
    struct cn_server *peer_next;
    size_t queued;       /* bud only: requests read, not finished, not
                            parked */
    size_t queued_bytes; /* bud only: their frame bytes */
    size_t held_bytes;   /* sum of open connections' held bytes */
    size_t muted;        /* open connections muted */
    uint64_t mutes_total;
    struct conn_list resume;    /* muted by own limits, maybe under now */
    struct conn_list wait;      /* muted by the budget, in mute order */
    struct conn_list throttled; /* muted by a quota until throttle_until */
    struct conn_list abandoned; /* closed with requests in handlers; each
                                   holds a reference */
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
    size_t rpos, rlen;           /* unparsed bytes rbuf[rpos..rlen) kept
                                    while muted */
    bool direct;                 /* last alloc handed out frame memory */
    struct cn_req *head, *tail;  /* requests in arrival order */
    int live;                    /* requests read and not yet freed */
    size_t held;                 /* their frame bytes + done responses'
                                    bytes (see resp_bytes) */
    size_t resp_held;            /* the responses' part of held */
    int writes_pending;          /* uv_write calls outstanding */
    bool reading;                /* uv_read_start in effect */
    bool muted;                  /* stopped by a limit (not reading) */
    bool resuming;               /* taken off the wait FIFO just now */
    bool abandoning;             /* conn_abandon running: keep requests */
    bool closed;                 /* uv_close called */
    int refs;                    /* 1 for the handle + 1 per live request
                                    + 1 while on the abandoned list */
    int64_t last_active_ms;      /* monotonic, for the idle check */
    int64_t throttle_until_ms;   /* monotonic: not read before (quotas) */
    int64_t last_write_ms;       /* monotonic: a write last completed, or
                                    the first of the pending ones began */
    struct conn_list *list;      /* the server list c is on, or NULL */
    struct cn_conn *lprev, *lnext;
    char peer[64];
    char principal[CN_PRINCIPAL_MAX]; /* see cn_req_principal */
    SSL *ssl;                         /* TLS connections only */
    BIO *rbio, *wbio;                 /* network side of ssl: in, out */
    bool tls_ready;                   /* handshake done */
    int64_t accepted_ms;       /* monotonic, for the handshake timeout */
    bool close_pending;        /* a response will close it: read no
                                    more */
    bool authed;               /* SASL done (see cn_req_authenticated) */
    bool raw_tokens;           /* frames are bare SASL tokens */
    int64_t session_expiry_ms; /* monotonic; 0: none */
    void *auth_state;          /* the broker's SASL exchange, or NULL */
    void (*auth_free)(void *); /* frees auth_state */
    bool sniffing;             /* reading the first bytes for
                                    cfg.first_bytes */
    uint8_t sniff[8];
    size_t sniff_have;
};

/* One uv_write: a plaintext response (bufs built on the fly), or TLS
 * records in malloc'd chunks (tls[0..ntls)). */
struct conn_write {
    uv_write_t w;
    struct cn_conn *conn;
    struct cn_req *req; /* NULL for handshake records */
    uint8_t size[4];
    uv_buf_t *tls;
    size_t ntls, tls_cap;
};

#endif
