/*
 * verify_proxy.c - the frame-aware TCP proxy of `cairnctl verify` (see
 * verify_proxy.h): one thread, poll(2), non-blocking sockets.
 */
#include "cli/verify_proxy.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/clock.h"

#define MAX_CONNS 256
#define MAX_FRAME (100 * 1024 * 1024) /* socket.request.max.bytes */
#define CHUNK 65536

int cn_vproxy_frame(const uint8_t *buf, size_t len, int16_t *api_key,
                    size_t *frame_len)
{
    int32_t size;

    if (len < 6)
        return 0;
    size = (int32_t)((uint32_t)buf[0] << 24 | (uint32_t)buf[1] << 16 |
                     (uint32_t)buf[2] << 8 | buf[3]);
    /* api key, version, correlation id and the client id's length. */
    if (size < 10 || size > MAX_FRAME)
        return -1;
    *api_key = (int16_t)((uint16_t)buf[4] << 8 | buf[5]);
    *frame_len = (size_t)size + 4;
    return 1;
}

struct buf {
    uint8_t *data;
    size_t len, cap;
};

struct conn {
    int cfd, ufd;       /* client and upstream sockets, -1 when closed */
    struct buf c2u;     /* from the client, not yet sent on */
    size_t ok;          /* c2u bytes that may be sent (whole frames scanned) */
    bool raw;           /* not Kafka framing: forward untouched */
    int64_t hold_until; /* the frame at ok is held until then, 0: none */
    size_t held_len;    /* its length */
    struct buf u2c;     /* from the broker, not yet sent back */
    int64_t connecting; /* until when the broker side may connect, 0 once
                           connected */
};

struct cn_vproxy {
    int n;
    int lfd[CN_VPROXY_MAX];
    char target[CN_VPROXY_MAX][128];
    int target_of[MAX_CONNS]; /* unused slot: -1 */
    struct conn conns[MAX_CONNS];
    pthread_t thread;
    pthread_mutex_t mu;
    int16_t armed_key; /* -1: no hold armed */
    int64_t armed_ms;
    int holding;  /* connections holding a frame now */
    int64_t held; /* frames held so far */
    atomic_bool stop;
};

static int split_hostport(const char *s, char *host, size_t hlen, char *port,
                          size_t plen)
{
    const char *colon = strrchr(s, ':');

    if (!colon || (size_t)(colon - s) >= hlen || strlen(colon + 1) >= plen)
        return -1;
    memcpy(host, s, (size_t)(colon - s));
    host[colon - s] = '\0';
    snprintf(port, plen, "%s", colon + 1);
    return 0;
}

static int resolve(const char *s, struct addrinfo **ai)
{
    char host[128], port[16];
    struct addrinfo hints;

    if (split_hostport(s, host, sizeof host, port, sizeof port))
        return -1;
    memset(&hints, 0, sizeof hints);
    hints.ai_socktype = SOCK_STREAM;
    return getaddrinfo(host, port, &hints, ai) ? -1 : 0;
}

static void nonblock(int fd)
{
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

/* Starts connecting to target without waiting (a broker cut off the
 * network must not stall the other connections); the poll loop sees it
 * finish. */
static int dial(const char *target)
{
    struct addrinfo *ai = NULL;
    int fd;

    if (resolve(target, &ai))
        return -1;
    fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen) &&
        errno != EINPROGRESS) {
        close(fd);
        fd = -1;
    }
    freeaddrinfo(ai);
    return fd;
}

static int buf_read(struct buf *b, int fd)
{
    ssize_t got;

    if (b->cap - b->len < CHUNK) {
        size_t cap = b->cap ? b->cap * 2 : 2 * CHUNK;
        uint8_t *d = realloc(b->data, cap);
        if (!d)
            return -1;
        b->data = d;
        b->cap = cap;
    }
    got = read(fd, b->data + b->len, b->cap - b->len);
    if (got > 0) {
        b->len += (size_t)got;
        return 1;
    }
    if (got < 0 && (errno == EAGAIN || errno == EINTR))
        return 1;
    return got == 0 ? 0 : -1; /* EOF, error */
}

/* Sends up to n bytes of b's front; returns -1 on a dead socket. */
static int buf_write(struct buf *b, size_t n, int fd, size_t *sent)
{
    ssize_t put;

    *sent = 0;
    if (!n)
        return 0;
    put = send(fd, b->data, n, MSG_NOSIGNAL);
    if (put < 0)
        return errno == EAGAIN || errno == EINTR ? 0 : -1;
    memmove(b->data, b->data + put, b->len - (size_t)put);
    b->len -= (size_t)put;
    *sent = (size_t)put;
    return 0;
}

static void conn_close(struct cn_vproxy *p, int i)
{
    struct conn *c = &p->conns[i];

    if (c->cfd >= 0)
        close(c->cfd);
    if (c->ufd >= 0)
        close(c->ufd);
    if (c->hold_until) {
        pthread_mutex_lock(&p->mu);
        p->holding--;
        pthread_mutex_unlock(&p->mu);
    }
    free(c->c2u.data);
    free(c->u2c.data);
    memset(c, 0, sizeof *c);
    c->cfd = c->ufd = -1;
    p->target_of[i] = -1;
}

/* Moves c->ok over every whole frame header in c2u, stopping at one to
 * hold (an armed api key) or at an incomplete header. */
static void scan(struct cn_vproxy *p, struct conn *c, int64_t now)
{
    while (!c->raw && !c->hold_until && c->ok < c->c2u.len) {
        int16_t key;
        size_t flen;
        int rc = cn_vproxy_frame(c->c2u.data + c->ok, c->c2u.len - c->ok, &key,
                                 &flen);
        if (rc < 0) {
            c->raw = true;
            break;
        }
        if (rc == 0)
            break;
        pthread_mutex_lock(&p->mu);
        if (p->armed_key >= 0 && key == p->armed_key) {
            c->hold_until = now + p->armed_ms;
            c->held_len = flen;
            p->armed_key = -1;
            p->holding++;
            p->held++;
        }
        pthread_mutex_unlock(&p->mu);
        if (c->hold_until)
            break;
        c->ok += flen;
    }
}

/* What of c2u may go to the broker now. */
static size_t sendable(const struct conn *c)
{
    if (c->raw)
        return c->c2u.len;
    return c->ok < c->c2u.len ? c->ok : c->c2u.len;
}

static void on_accept(struct cn_vproxy *p, int li)
{
    int fd = accept4(p->lfd[li], NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    int i;

    if (fd < 0)
        return;
    for (i = 0; i < MAX_CONNS && p->target_of[i] >= 0; i++)
        ;
    if (i == MAX_CONNS) {
        close(fd);
        return;
    }
    p->conns[i].ufd = dial(p->target[li]);
    if (p->conns[i].ufd < 0) {
        close(fd);
        return;
    }
    p->conns[i].cfd = fd;
    p->conns[i].connecting = cn_clock_mono_ms() + 5000;
    p->target_of[i] = li;
}

static void *proxy_main(void *arg)
{
    struct cn_vproxy *p = arg;
    struct pollfd fds[CN_VPROXY_MAX + 2 * MAX_CONNS];
    int who[CN_VPROXY_MAX + 2 * MAX_CONNS];

    while (!p->stop) {
        int64_t now = cn_clock_mono_ms();
        int nf = 0;

        for (int i = 0; i < p->n; i++) {
            fds[nf] = (struct pollfd){.fd = p->lfd[i], .events = POLLIN};
            who[nf++] = -1 - i;
        }
        for (int i = 0; i < MAX_CONNS; i++) {
            struct conn *c = &p->conns[i];
            if (p->target_of[i] < 0)
                continue;
            if (c->hold_until && now >= c->hold_until) {
                c->ok += c->held_len;
                c->hold_until = 0;
                pthread_mutex_lock(&p->mu);
                p->holding--;
                pthread_mutex_unlock(&p->mu);
                scan(p, c, now);
            }
            /* The client left and all it sent is delivered (or the
             * broker never answered the connect): done. */
            if ((c->cfd < 0 && !c->hold_until && c->c2u.len == 0) ||
                (c->connecting && now > c->connecting)) {
                conn_close(p, i);
                continue;
            }
            if (c->cfd >= 0) {
                fds[nf] = (struct pollfd){
                    .fd = c->cfd,
                    .events = (short)(POLLIN | (c->u2c.len ? POLLOUT : 0))};
                who[nf++] = 2 * i;
            }
            fds[nf] = (struct pollfd){
                .fd = c->ufd,
                .events = (short)(c->connecting
                                      ? POLLOUT
                                      : POLLIN | (sendable(c) ? POLLOUT : 0))};
            who[nf++] = 2 * i + 1;
        }
        if (poll(fds, (nfds_t)nf, 50) <= 0)
            continue;
        now = cn_clock_mono_ms();
        for (int k = 0; k < nf; k++) {
            int i, w = who[k];
            struct conn *c;
            size_t sent;

            if (!fds[k].revents)
                continue;
            if (w < 0) {
                on_accept(p, -1 - w);
                continue;
            }
            i = w / 2;
            c = &p->conns[i];
            if (p->target_of[i] < 0)
                continue;
            if (w % 2 == 0 && c->cfd >= 0) { /* client side */
                if (fds[k].revents & (POLLIN | POLLHUP | POLLERR)) {
                    if (buf_read(&c->c2u, c->cfd) <= 0) {
                        /* Gone: what it sent is still delivered. */
                        close(c->cfd);
                        c->cfd = -1;
                        c->u2c.len = 0;
                    } else {
                        scan(p, c, now);
                    }
                }
                if (c->cfd >= 0 && (fds[k].revents & POLLOUT) &&
                    buf_write(&c->u2c, c->u2c.len, c->cfd, &sent)) {
                    close(c->cfd);
                    c->cfd = -1;
                }
            } else if (w % 2 == 1 && c->connecting) {
                int soerr = 0;
                socklen_t sl = sizeof soerr;
                if (getsockopt(c->ufd, SOL_SOCKET, SO_ERROR, &soerr, &sl) ||
                    soerr)
                    conn_close(p, i);
                else
                    c->connecting = 0;
            } else if (w % 2 == 1) { /* broker side */
                int rc = 0;
                if (fds[k].revents & (POLLIN | POLLHUP | POLLERR))
                    rc = buf_read(&c->u2c, c->ufd) <= 0 ? -1 : 0;
                if (!rc && (fds[k].revents & POLLOUT)) {
                    size_t n = sendable(c);
                    rc = buf_write(&c->c2u, n, c->ufd, &sent);
                    if (!c->raw)
                        c->ok -= sent;
                }
                if (c->cfd < 0)
                    c->u2c.len = 0;
                if (rc) /* the broker closed: so does the client */
                    conn_close(p, i);
            }
        }
    }
    return NULL;
}

struct cn_vproxy *cn_vproxy_start(int n, const char *const *addrs,
                                  const char *const *target, char *err,
                                  size_t err_len)
{
    struct cn_vproxy *p;

    if (n < 1 || n > CN_VPROXY_MAX) {
        snprintf(err, err_len, "1 to %d brokers", CN_VPROXY_MAX);
        return NULL;
    }
    p = calloc(1, sizeof *p);
    if (!p) {
        snprintf(err, err_len, "out of memory");
        return NULL;
    }
    p->armed_key = -1;
    pthread_mutex_init(&p->mu, NULL);
    for (int i = 0; i < MAX_CONNS; i++) {
        p->target_of[i] = -1;
        p->conns[i].cfd = p->conns[i].ufd = -1;
    }
    for (int i = 0; i < n; i++) {
        struct addrinfo *ai = NULL;
        int one = 1, fd = -1;

        snprintf(p->target[i], sizeof p->target[i], "%s", target[i]);
        if (!resolve(addrs[i], &ai))
            fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd >= 0) {
            setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
            if (bind(fd, ai->ai_addr, ai->ai_addrlen) || listen(fd, 64)) {
                close(fd);
                fd = -1;
            }
        }
        if (ai)
            freeaddrinfo(ai);
        if (fd < 0) {
            snprintf(err, err_len, "cannot listen on %s: %s", addrs[i],
                     strerror(errno));
            for (int j = 0; j < i; j++)
                close(p->lfd[j]);
            free(p);
            return NULL;
        }
        nonblock(fd);
        p->lfd[i] = fd;
        p->n = i + 1;
    }
    if (pthread_create(&p->thread, NULL, proxy_main, p)) {
        snprintf(err, err_len, "pthread_create failed");
        for (int j = 0; j < n; j++)
            close(p->lfd[j]);
        free(p);
        return NULL;
    }
    return p;
}

int cn_vproxy_hold(struct cn_vproxy *p, int16_t api_key, int64_t hold_ms)
{
    int rc = -1;

    pthread_mutex_lock(&p->mu);
    if (p->armed_key < 0 && p->holding == 0) {
        p->armed_key = api_key;
        p->armed_ms = hold_ms;
        rc = 0;
    }
    pthread_mutex_unlock(&p->mu);
    return rc;
}

int64_t cn_vproxy_held(struct cn_vproxy *p)
{
    int64_t n;

    pthread_mutex_lock(&p->mu);
    n = p->held;
    pthread_mutex_unlock(&p->mu);
    return n;
}

void cn_vproxy_stop(struct cn_vproxy *p)
{
    if (!p)
        return;
    p->stop = true;
    pthread_join(p->thread, NULL);
    for (int i = 0; i < MAX_CONNS; i++)
        if (p->target_of[i] >= 0)
            conn_close(p, i);
    for (int i = 0; i < p->n; i++)
        close(p->lfd[i]);
    pthread_mutex_destroy(&p->mu);
    free(p);
}
