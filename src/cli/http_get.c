/*
 * http_get.c - a plain-HTTP GET; see http_get.h.
 */
#include "cli/http_get.h"

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/err.h"
#include "cli/kclient.h"

int cli_url_parse(const char *s, struct cli_url *u, char *err,
                  size_t err_size)
{
    const char *p = s, *host, *host_end, *rest;
    int default_port = -1;

    memset(u, 0, sizeof *u);
    if (strncmp(p, "http://", 7) == 0) {
        p += 7;
        default_port = 80;
    } else if (strstr(p, "://")) {
        snprintf(err, err_size, "'%s': only http:// URLs (the metrics "
                 "endpoint has no TLS)", s);
        return CN_EINVAL;
    }
    if (*p == '[') {
        host = p + 1;
        host_end = strchr(host, ']');
        if (!host_end) {
            snprintf(err, err_size, "'%s': no ']' after an IPv6 address", s);
            return CN_EINVAL;
        }
        rest = host_end + 1;
    } else {
        host = p;
        host_end = p + strcspn(p, ":/");
        rest = host_end;
    }
    if (host_end == host || (size_t)(host_end - host) >= sizeof u->host) {
        snprintf(err, err_size, "'%s': bad host", s);
        return CN_EINVAL;
    }
    memcpy(u->host, host, (size_t)(host_end - host));
    u->port = default_port;
    if (*rest == ':') {
        char *end;
        long port;
        errno = 0;
        port = strtol(rest + 1, &end, 10);
        if (errno || end == rest + 1 || port < 1 || port > 65535 ||
            (*end && *end != '/')) {
            snprintf(err, err_size, "'%s': bad port", s);
            return CN_EINVAL;
        }
        u->port = (int)port;
        rest = end;
    }
    if (u->port < 0) {
        snprintf(err, err_size, "'%s': no port (want HOST:PORT or "
                 "http://HOST[:PORT]/PATH)", s);
        return CN_EINVAL;
    }
    if (*rest && *rest != '/') {
        snprintf(err, err_size, "'%s': bad URL", s);
        return CN_EINVAL;
    }
    if (strlen(rest) >= sizeof u->path) {
        snprintf(err, err_size, "'%s': path too long", s);
        return CN_EINVAL;
    }
    snprintf(u->path, sizeof u->path, "%s", *rest ? rest : "/metrics");
    for (const char *c = u->path; *c; c++)
        if ((unsigned char)*c <= ' ' || *c == 0x7f) {
            snprintf(err, err_size, "'%s': spaces or control characters "
                     "in the path", s);
            return CN_EINVAL;
        }
    return 0;
}

/* Waits for events on fd until deadline; 0, -ETIMEDOUT or -errno. */
static int wait_for(int fd, short events, int64_t deadline)
{
    struct pollfd pfd = {.fd = fd, .events = events};
    for (;;) {
        int64_t left = deadline - cn_clock_mono_ms();
        if (left <= 0)
            return -ETIMEDOUT;
        int n = poll(&pfd, 1, left > INT32_MAX ? INT32_MAX : (int)left);
        if (n > 0)
            return 0;
        if (n == 0)
            return -ETIMEDOUT;
        if (errno != EINTR)
            return -errno;
    }
}

/* The status code of "HTTP/1.x NNN ..." and where the body starts; false
 * when the head is not complete or not HTTP. */
static bool parse_head(const char *buf, size_t len, int *status,
                       size_t *body_at)
{
    const char *end = NULL;
    for (size_t i = 0; i + 1 < len && !end; i++) {
        if (buf[i] == '\n' && buf[i + 1] == '\n')
            end = buf + i + 2;
        else if (i + 3 < len && memcmp(buf + i, "\r\n\r\n", 4) == 0)
            end = buf + i + 4;
    }
    if (!end || len < 12 || memcmp(buf, "HTTP/1.", 7) != 0 ||
        buf[8] != ' ' || buf[9] < '1' || buf[9] > '5' || buf[10] < '0' ||
        buf[10] > '9' || buf[11] < '0' || buf[11] > '9')
        return false;
    *status = (buf[9] - '0') * 100 + (buf[10] - '0') * 10 + (buf[11] - '0');
    *body_at = (size_t)(end - buf);
    return true;
}

int cli_http_get(const struct cli_url *u, int timeout_ms, char **body,
                 size_t *len, char *err, size_t err_size)
{
    int64_t deadline = cn_clock_mono_ms() + (timeout_ms > 0 ? timeout_ms
                                                            : 10000);
    char req[1024];
    int fd = -1, rc;
    char *buf = NULL;
    size_t n = 0, cap = 0, off = 0;
    bool v6 = strchr(u->host, ':') != NULL;

    *body = NULL;
    *len = 0;
    int reqlen = snprintf(req, sizeof req,
                          "GET %s HTTP/1.0\r\nHost: %s%s%s:%d\r\n"
                          "Accept: text/plain\r\nConnection: close\r\n\r\n",
                          u->path, v6 ? "[" : "", u->host, v6 ? "]" : "",
                          u->port);
    if (reqlen < 0 || (size_t)reqlen >= sizeof req) {
        snprintf(err, err_size, "URL too long");
        return CN_EINVAL;
    }
    rc = cn_kclient_tcp_connect(u->host, u->port, deadline, &fd, err,
                                err_size);
    if (rc)
        return rc < 0 ? rc : -ECONNREFUSED;
    while (off < (size_t)reqlen) {
        ssize_t w = send(fd, req + off, (size_t)reqlen - off, MSG_NOSIGNAL);
        if (w > 0) {
            off += (size_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            rc = wait_for(fd, POLLOUT, deadline);
            if (rc)
                goto fail;
            continue;
        }
        rc = w < 0 ? -errno : -EPIPE;
        goto fail;
    }
    for (;;) {
        if (cap - n < 4096) {
            size_t ncap = cap ? cap * 2 : 65536;
            if (ncap > CLI_HTTP_BODY_MAX + 4096) {
                snprintf(err, err_size, "response from %s:%d larger than "
                         "%zu bytes", u->host, u->port, CLI_HTTP_BODY_MAX);
                rc = CN_EINVAL;
                goto out;
            }
            char *nb = realloc(buf, ncap);
            if (!nb) {
                rc = CN_ENOMEM;
                snprintf(err, err_size, "out of memory");
                goto out;
            }
            buf = nb;
            cap = ncap;
        }
        ssize_t r = recv(fd, buf + n, cap - n - 1, 0);
        if (r > 0) {
            n += (size_t)r;
            continue;
        }
        if (r == 0)
            break;
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            rc = wait_for(fd, POLLIN, deadline);
            if (rc)
                goto fail;
            continue;
        }
        rc = -errno;
        goto fail;
    }
    int status;
    size_t body_at;
    if (!buf || !parse_head(buf, n, &status, &body_at)) {
        snprintf(err, err_size, "%s:%d did not answer with HTTP", u->host,
                 u->port);
        rc = CN_EINVAL;
        goto out;
    }
    if (status != 200) {
        snprintf(err, err_size, "GET http://%s:%d%s: HTTP status %d",
                 u->host, u->port, u->path, status);
        rc = CN_EINVAL;
        goto out;
    }
    memmove(buf, buf + body_at, n - body_at);
    *len = n - body_at;
    buf[*len] = '\0';
    *body = buf;
    buf = NULL;
    rc = 0;
    goto out;
fail:
    snprintf(err, err_size, "GET http://%s:%d%s: %s", u->host, u->port,
             u->path, rc == -ETIMEDOUT ? "timed out" : strerror(-rc));
out:
    free(buf);
    close(fd);
    return rc;
}
