/*
 * kclient.c - blocking Kafka protocol client: sockets with poll timeouts,
 * TLS (OpenSSL) and SASL, framing, ApiVersions negotiation and controller
 * lookup.
 */
#include "cli/kclient.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "base/clock.h"
#include "base/err.h"
#include "base/rd.h"
#include "base/wr.h"
#include "proto/gen/msgs.h"
#include "proto/header.h"
#include "proto/kerr.h"
#include "sec/sasl_client.h"

static const char client_id[] = "cairnctl";

static const char *describe_err(int err)
{
    if (err > -10000 && err < 0)
        return strerror(-err);
    return cn_strerror(err);
}

int cn_kclient_parse_addr(const char *addr, char *host, size_t host_size,
                          int *port)
{
    const char *h = addr, *colon;
    size_t hlen;
    char *end;
    long p = 9092;

    if (!addr || !*addr)
        return CN_EINVAL;
    if (*addr == '[') {
        const char *close = strchr(addr, ']');
        if (!close)
            return CN_EINVAL;
        h = addr + 1;
        hlen = (size_t)(close - h);
        colon = close[1] == ':' ? close + 1 : NULL;
        if (close[1] && !colon)
            return CN_EINVAL;
    } else {
        colon = strrchr(addr, ':');
        /* Two colons and no brackets: a bare IPv6 address, no port. */
        if (colon && strchr(addr, ':') != colon)
            colon = NULL;
        hlen = colon ? (size_t)(colon - addr) : strlen(addr);
    }
    if (hlen == 0 || hlen >= host_size)
        return CN_EINVAL;
    if (colon) {
        errno = 0;
        p = strtol(colon + 1, &end, 10);
        if (errno || end == colon + 1 || *end || p <= 0 || p > 65535)
            return CN_EINVAL;
    }
    memcpy(host, h, hlen);
    host[hlen] = '\0';
    *port = (int)p;
    return 0;
}

void cn_kclient_init(struct cn_kclient *c)
{
    memset(c, 0, sizeof *c);
    c->fd = -1;
    c->timeout_ms = CN_KCLIENT_TIMEOUT_MS;
    c->next_correlation_id = 1;
    for (int i = 0; i <= CN_API_KEY_MAX; i++)
        c->api_max[i] = -1;
}

void cn_kclient_close(struct cn_kclient *c)
{
    /* No close_notify: it could block, and Kafka does not wait for it. */
    if (c->ssl)
        SSL_free(c->ssl);
    c->ssl = NULL;
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
}

/* Waits until fd is ready for events or the deadline passes. */
static int wait_fd(int fd, short events, int64_t deadline)
{
    struct pollfd pfd = {.fd = fd, .events = events};

    for (;;) {
        int64_t left = deadline - cn_clock_mono_ms();
        if (left <= 0)
            return -ETIMEDOUT;
        int n = poll(&pfd, 1, (int)left);
        if (n > 0)
            return 0;
        if (n == 0)
            return -ETIMEDOUT;
        if (errno != EINTR)
            return -errno;
    }
}

/* Non-blocking connect to one resolved address, bounded by deadline. */
static int connect_one(const struct addrinfo *ai, int64_t deadline, int *out)
{
    int fd, err, one = 1;
    socklen_t len = sizeof err;

    fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                ai->ai_protocol);
    if (fd < 0)
        return -errno;
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0) {
        if (errno != EINPROGRESS) {
            err = -errno;
            goto out_close;
        }
        err = wait_fd(fd, POLLOUT, deadline);
        if (err)
            goto out_close;
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0) {
            err = -errno;
            goto out_close;
        }
        if (err) {
            err = -err;
            goto out_close;
        }
    }
    /* Requests are small and answered one at a time: no Nagle delay. */
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    *out = fd;
    return 0;

out_close:
    close(fd);
    return err;
}

/*
 * OpenSSL's queue of errors in words, into c->err; "" when it is empty.
 * The verify result says more than "certificate verify failed" alone.
 */
static void tls_reason(struct cn_kclient *c)
{
    unsigned long e = ERR_get_error();
    char buf[256];

    c->err[0] = '\0';
    if (c->ssl && SSL_get_verify_result(c->ssl) != X509_V_OK) {
        snprintf(c->err, sizeof c->err, "certificate verify failed: %s",
                 X509_verify_cert_error_string(
                     SSL_get_verify_result(c->ssl)));
    } else if (e) {
        int r = ERR_GET_REASON(e);
        /* TLS 1.3 servers refuse a missing client certificate only after
         * the handshake, so this shows on the first read: say what the
         * alert means. */
        bool want_cert = (r == SSL_R_SSLV3_ALERT_BAD_CERTIFICATE ||
                          r == SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED) &&
                         c->sec && !c->sec->cert_file;
        ERR_error_string_n(e, buf, sizeof buf);
        snprintf(c->err, sizeof c->err, "%s%s", buf,
                 want_cert ? " (the broker wants a client certificate: set "
                             "ssl.keystore.location)"
                           : "");
    }
    ERR_clear_error();
}

/*
 * After a failed SSL_read/SSL_write/SSL_connect returning ret: the poll
 * event to wait for in *ev and 0, or CN_ETRUNC for a closed connection,
 * or -EPROTO with the reason in c->err.
 */
static int tls_want(struct cn_kclient *c, int ret, short *ev)
{
    int e = SSL_get_error(c->ssl, ret);

    switch (e) {
    case SSL_ERROR_WANT_READ:
        *ev = POLLIN;
        return 0;
    case SSL_ERROR_WANT_WRITE:
        *ev = POLLOUT;
        return 0;
    case SSL_ERROR_ZERO_RETURN:
        return CN_ETRUNC;
    case SSL_ERROR_SSL:
#ifdef SSL_R_UNEXPECTED_EOF_WHILE_READING
        if (ERR_GET_REASON(ERR_peek_error()) ==
            SSL_R_UNEXPECTED_EOF_WHILE_READING) {
            ERR_clear_error();
            return CN_ETRUNC;
        }
#endif
        break;
    case SSL_ERROR_SYSCALL:
        if (ERR_peek_error() == 0) {
            int err = errno;
            return err && err != EPIPE && err != ECONNRESET ? -err
                                                             : CN_ETRUNC;
        }
        break;
    default:
        break;
    }
    tls_reason(c);
    if (!c->err[0])
        return CN_ETRUNC;
    return -EPROTO;
}

static int send_all(struct cn_kclient *c, const uint8_t *p, size_t n)
{
    int64_t deadline = cn_clock_mono_ms() + c->timeout_ms;

    while (n > 0) {
        if (c->ssl) {
            short ev = POLLOUT;
            ERR_clear_error();
            int w = SSL_write(c->ssl, p, n > INT32_MAX ? INT32_MAX : (int)n);
            if (w > 0) {
                p += w;
                n -= (size_t)w;
                continue;
            }
            int err = tls_want(c, w, &ev);
            if (!err)
                err = wait_fd(c->fd, ev, deadline);
            if (err)
                return err;
            continue;
        }
        ssize_t w = send(c->fd, p, n, MSG_NOSIGNAL);
        if (w > 0) {
            p += w;
            n -= (size_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
            return -errno;
        int err = wait_fd(c->fd, POLLOUT, deadline);
        if (err)
            return err;
    }
    return 0;
}

static int recv_all(struct cn_kclient *c, uint8_t *p, size_t n,
                    int64_t deadline)
{
    while (n > 0) {
        if (c->ssl) {
            short ev = POLLIN;
            ERR_clear_error();
            int r = SSL_read(c->ssl, p, n > INT32_MAX ? INT32_MAX : (int)n);
            if (r > 0) {
                p += r;
                n -= (size_t)r;
                continue;
            }
            int err = tls_want(c, r, &ev);
            if (!err)
                err = wait_fd(c->fd, ev, deadline);
            if (err)
                return err;
            continue;
        }
        ssize_t r = recv(c->fd, p, n, 0);
        if (r > 0) {
            p += r;
            n -= (size_t)r;
            continue;
        }
        if (r == 0)
            return CN_ETRUNC; /* peer closed the connection */
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return -errno;
        int err = wait_fd(c->fd, POLLIN, deadline);
        if (err)
            return err;
    }
    return 0;
}

/* Records a socket failure and closes, since framing is lost after it. */
static int io_fail(struct cn_kclient *c, const char *what, int err)
{
    char tls[256];

    snprintf(tls, sizeof tls, "TLS error: %.200s", c->err);
    snprintf(c->err, sizeof c->err, "%s %.200s:%d failed: %s", what, c->host,
             c->port,
             err == CN_ETRUNC    ? "connection closed by broker"
             : err == -ETIMEDOUT ? "timed out"
             : err == -EPROTO    ? tls
                                 : describe_err(err));
    cn_kclient_close(c);
    return err;
}

/*
 * Sends one request and reads the reply, leaving *body positioned after the
 * response header.  The frame lives in arena.  raw (when not NULL) is an
 * already encoded body of a flexible API without a generated codec.
 */
static int exchange(struct cn_kclient *c, int16_t api_key, int16_t version,
                    const void *request, const struct cn_wr *raw,
                    struct cn_arena *arena, struct cn_rd *body)
{
    const struct cn_api_info *api = cn_api_find(api_key);
    struct cn_req_header h;
    struct cn_wr wr;
    uint8_t sz[4];
    uint8_t *frame;
    int32_t corr, len;
    size_t off;
    int err;

    if (c->fd < 0) {
        snprintf(c->err, sizeof c->err, "not connected to %s:%d", c->host,
                 c->port);
        return CN_EINVAL;
    }
    if (!raw &&
        (!api || version < api->min_version || version > api->max_version)) {
        snprintf(c->err, sizeof c->err,
                 "API key %d version %d is not supported by this client",
                 api_key, version);
        return CN_EUNSUPPORTED;
    }
    corr = c->next_correlation_id++;
    h.api_key = api_key;
    h.api_version = version;
    h.correlation_id = corr;
    h.client_id = cn_bytes_str(client_id);

    cn_wr_init(&wr, 256);
    off = cn_wr_reserve(&wr, 4);
    cn_req_header_encode(&wr, &h);
    if (raw)
        cn_wr_raw(&wr, raw->buf, raw->len);
    else
        api->encode_request(&wr, version, request);
    if (wr.err || wr.len - 4 > INT32_MAX) {
        err = wr.err ? wr.err : CN_ETOOBIG;
        cn_wr_fini(&wr);
        snprintf(c->err, sizeof c->err, "cannot encode %s request: %s",
                 api->name, cn_strerror(err));
        return err;
    }
    cn_wr_patch_i32(&wr, off, (int32_t)(wr.len - 4));
    err = send_all(c, wr.buf, wr.len);
    cn_wr_fini(&wr);
    if (err)
        return io_fail(c, "sending to", err);

    int64_t deadline = cn_clock_mono_ms() + c->timeout_ms;
    err = recv_all(c, sz, 4, deadline);
    /* A SASL listener answers ApiVersions, then hangs up on anything but
     * SaslHandshake: the likeliest cause when the first request dies. */
    if (err == CN_ETRUNC && corr == c->first_corr &&
        !(c->sec && c->sec->sasl)) {
        io_fail(c, "reading from", err);
        size_t n = strlen(c->err);
        snprintf(c->err + n, sizeof c->err - n,
                 " (a SASL listener does that to a client that does not log "
                 "in: check security.protocol in --command-config)");
        return err;
    }
    if (err)
        return io_fail(c, "reading from", err);
    len = (int32_t)((uint32_t)sz[0] << 24 | (uint32_t)sz[1] << 16 |
                    (uint32_t)sz[2] << 8 | sz[3]);
    if (len < 4 || len > CN_KCLIENT_FRAME_MAX) {
        /* A TLS record (alert 0x15 or handshake 0x16, version 3.x): a TLS
         * listener answering plaintext. */
        bool tls = !c->ssl && (sz[0] == 0x15 || sz[0] == 0x16) && sz[1] == 3;
        snprintf(c->err, sizeof c->err,
                 "%s:%d sent a response frame of %d bytes (%s)", c->host,
                 c->port, len,
                 tls ? "a TLS listener: set security.protocol=SSL or "
                       "SASL_SSL in --command-config"
                     : "not Kafka?");
        cn_kclient_close(c);
        return CN_EBADLEN;
    }
    frame = cn_arena_alloc(arena, (size_t)len);
    if (!frame) {
        snprintf(c->err, sizeof c->err, "out of memory");
        cn_kclient_close(c);
        return CN_ENOMEM;
    }
    err = recv_all(c, frame, (size_t)len, deadline);
    if (err)
        return io_fail(c, "reading from", err);

    cn_rd_init(body, frame, (size_t)len);
    int32_t got = cn_rd_i32(body);
    if (got != corr) {
        snprintf(c->err, sizeof c->err,
                 "%s:%d answered correlation id %d, expected %d", c->host,
                 c->port, got, corr);
        cn_kclient_close(c);
        return CN_ECORRUPT;
    }
    if (cn_resp_header_version(api_key, version) >= 1)
        cn_rd_skip_tags(body);
    if (body->err) {
        snprintf(c->err, sizeof c->err, "bad %s response header from %s:%d",
                 api->name, c->host, c->port);
        return body->err;
    }
    return 0;
}

static int decode_body(struct cn_kclient *c, int16_t api_key, int16_t version,
                       struct cn_rd *body, void *response,
                       struct cn_arena *arena)
{
    const struct cn_api_info *api = cn_api_find(api_key);
    int err;

    api->init_response(response);
    err = api->decode_response(body, arena, version, response);
    if (!err)
        err = body->err;
    if (err) {
        snprintf(c->err, sizeof c->err,
                 "cannot decode %s v%d response from %s:%d: %s", api->name,
                 version, c->host, c->port, cn_strerror(err));
        return err;
    }
    return 0;
}

int cn_kclient_call(struct cn_kclient *c, int16_t api_key, int16_t version,
                    const void *request, void *response, struct cn_arena *arena)
{
    struct cn_rd body;
    int err;

    err = exchange(c, api_key, version, request, NULL, arena, &body);
    if (err)
        return err;
    return decode_body(c, api_key, version, &body, response, arena);
}

int cn_kclient_call_raw(struct cn_kclient *c, int16_t api_key,
                        int16_t version, const struct cn_wr *body,
                        struct cn_arena *arena, struct cn_rd *resp)
{
    return exchange(c, api_key, version, NULL, body, arena, resp);
}

/*
 * ApiVersions at v3, falling back to v0 when the broker does not know v3.
 * A broker that rejects our version answers in v0 form, so the error code
 * is read before the body is decoded at the version we sent.
 */
static int negotiate(struct cn_kclient *c)
{
    struct cn_api_versions_request rq;
    struct cn_api_versions_response rs;
    struct cn_arena arena;
    struct cn_rd body;
    int16_t version = 3;
    int err;

    cn_arena_init(&arena);
    cn_api_versions_request_init(&rq);
    rq.client_software_name = cn_bytes_str(client_id);
    rq.client_software_version = cn_bytes_str("0.1");
    for (;;) {
        err = exchange(c, CN_API_API_VERSIONS, version, &rq, NULL, &arena,
                       &body);
        if (err)
            goto out;
        struct cn_rd peek = body;
        int16_t code = cn_rd_i16(&peek);
        if (code == KAFKA_UNSUPPORTED_VERSION && version > 0) {
            version = 0;
            continue;
        }
        err = decode_body(c, CN_API_API_VERSIONS, version, &body, &rs, &arena);
        if (err)
            goto out;
        if (rs.error_code) {
            snprintf(c->err, sizeof c->err, "ApiVersions to %s:%d failed: %s",
                     c->host, c->port, cn_kerr_name(rs.error_code));
            err = CN_EUNSUPPORTED;
            goto out;
        }
        break;
    }
    for (int i = 0; i <= CN_API_KEY_MAX; i++)
        c->api_max[i] = -1;
    for (int32_t i = 0; i < rs.api_keys_len; i++) {
        const struct cn_api_versions_response_api_version *a = &rs.api_keys[i];
        if (a->api_key < 0 || a->api_key > CN_API_KEY_MAX)
            continue;
        c->api_min[a->api_key] = a->min_version;
        c->api_max[a->api_key] = a->max_version;
    }
out:
    cn_arena_fini(&arena);
    return err;
}

/* ---- security: TLS context, handshake, SASL login ---------------------- */

const char *cn_kclient_sec_protocol(const struct cn_kclient_sec *sec)
{
    if (!sec)
        return "PLAINTEXT";
    if (sec->sasl)
        return sec->tls ? "SASL_SSL" : "SASL_PLAINTEXT";
    return sec->tls ? "SSL" : "PLAINTEXT";
}

/* OpenSSL asks for the key's password through this. */
static int key_password_cb(char *buf, int size, int rwflag, void *u)
{
    /* No password is an empty one: memcpy must not get NULL, even for 0. */
    const char *pw = u ? (const char *)u : "";
    size_t n = strlen(pw);

    (void)rwflag;
    if (n >= (size_t)size)
        return 0;
    memcpy(buf, pw, n);
    return (int)n;
}

static int sec_fail(char *err, size_t err_len, const char *what,
                    const char *file)
{
    unsigned long e = ERR_get_error();
    char buf[256] = "unknown error";

    if (e)
        ERR_error_string_n(e, buf, sizeof buf);
    ERR_clear_error();
    snprintf(err, err_len, "%s %s: %s", what, file, buf);
    return CN_EINVAL;
}

int cn_kclient_sec_load(struct cn_kclient_sec *sec, char *err, size_t err_len)
{
    SSL_CTX *ctx;
    const char *key;

    if (!sec->tls || sec->ssl_ctx)
        return 0;
    ctx = SSL_CTX_new(TLS_client_method());
    if (!ctx)
        return sec_fail(err, err_len, "cannot set up TLS", "");
    /* Kafka 4's ssl.enabled.protocols: TLSv1.2 and TLSv1.3. */
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    if (sec->ca_file) {
        if (SSL_CTX_load_verify_locations(ctx, sec->ca_file, NULL) != 1) {
            SSL_CTX_free(ctx);
            return sec_fail(err, err_len, "cannot load CA certificates from",
                            sec->ca_file);
        }
    } else if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
        SSL_CTX_free(ctx);
        return sec_fail(err, err_len, "cannot load the system's CA",
                        "certificates");
    }
    if (sec->cert_file) {
        key = sec->key_file ? sec->key_file : sec->cert_file;
        SSL_CTX_set_default_passwd_cb(ctx, key_password_cb);
        SSL_CTX_set_default_passwd_cb_userdata(ctx,
                                               (void *)sec->key_password);
        if (SSL_CTX_use_certificate_chain_file(ctx, sec->cert_file) != 1) {
            SSL_CTX_free(ctx);
            return sec_fail(err, err_len, "cannot load the certificate from",
                            sec->cert_file);
        }
        if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1) {
            SSL_CTX_free(ctx);
            return sec_fail(err, err_len,
                            "cannot load the private key (wrong "
                            "ssl.key.password?) from",
                            key);
        }
        if (SSL_CTX_check_private_key(ctx) != 1) {
            SSL_CTX_free(ctx);
            return sec_fail(err, err_len,
                            "the private key does not match the certificate "
                            "in",
                            key);
        }
    }
    sec->ssl_ctx = ctx;
    return 0;
}

void cn_kclient_sec_fini(struct cn_kclient_sec *sec)
{
    if (sec->ssl_ctx)
        SSL_CTX_free(sec->ssl_ctx);
    sec->ssl_ctx = NULL;
}

/* TLS client handshake on c->fd, checking the certificate chain and,
 * unless disabled, that it names the host we dialled (DNS name or IP, as
 * Kafka's "https" endpoint identification). */
static int tls_handshake(struct cn_kclient *c, int64_t deadline)
{
    struct cn_kclient_sec *sec = c->sec;
    unsigned char ip[16];
    bool is_ip = inet_pton(AF_INET, c->host, ip) == 1 ||
                 inet_pton(AF_INET6, c->host, ip) == 1;
    int err;

    if (!sec->ssl_ctx) {
        err = cn_kclient_sec_load(sec, c->err, sizeof c->err);
        if (err)
            return err;
    }
    ERR_clear_error();
    c->ssl = SSL_new(sec->ssl_ctx);
    if (!c->ssl || SSL_set_fd(c->ssl, c->fd) != 1) {
        tls_reason(c);
        return -EPROTO;
    }
    if (!is_ip)
        SSL_set_tlsext_host_name(c->ssl, c->host);
    if (!sec->no_verify_host) {
        int ok = is_ip ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(c->ssl),
                                                       c->host)
                       : SSL_set1_host(c->ssl, c->host);
        if (ok != 1) {
            tls_reason(c);
            return -EPROTO;
        }
    }
    for (;;) {
        short ev = POLLIN;
        ERR_clear_error();
        int r = SSL_connect(c->ssl);
        if (r == 1)
            return 0;
        err = tls_want(c, r, &ev);
        if (err == CN_ETRUNC) {
            snprintf(c->err, sizeof c->err,
                     "TLS handshake failed: connection closed by broker (is "
                     "the listener TLS?)");
            return -EPROTO;
        }
        if (err == -EPROTO) {
            char why[sizeof c->err];
            snprintf(why, sizeof why, "%s", c->err);
            snprintf(c->err, sizeof c->err, "TLS handshake failed: %.400s",
                     why);
            return err;
        }
        if (!err)
            err = wait_fd(c->fd, ev, deadline);
        if (err == -ETIMEDOUT) {
            snprintf(c->err, sizeof c->err, "TLS handshake timed out");
            return err;
        }
        if (err) {
            snprintf(c->err, sizeof c->err, "TLS handshake failed: %s",
                     describe_err(err));
            return err;
        }
    }
}

/* One SaslAuthenticate round: sends in, returns the server's bytes in
 * *out (in arena).  A refusal is -EACCES with Kafka's message in c->err. */
static int sasl_round(struct cn_kclient *c, int16_t v, const uint8_t *in,
                      size_t in_len, struct cn_bytes *out,
                      struct cn_arena *arena)
{
    struct cn_sasl_authenticate_request rq;
    struct cn_sasl_authenticate_response rs;
    int err;

    cn_sasl_authenticate_request_init(&rq);
    rq.auth_bytes.ptr = in;
    rq.auth_bytes.len = (int32_t)in_len;
    err = cn_kclient_call(c, CN_API_SASL_AUTHENTICATE, v, &rq, &rs, arena);
    if (err)
        return err;
    if (rs.error_code) {
        snprintf(c->err, sizeof c->err, "SASL authentication failed: %s%s%.*s",
                 cn_kerr_name(rs.error_code),
                 rs.error_message.len > 0 ? ": " : "",
                 rs.error_message.len > 0 ? (int)rs.error_message.len : 0,
                 rs.error_message.len > 0 ? (const char *)rs.error_message.ptr
                                          : "");
        return -EACCES;
    }
    *out = rs.auth_bytes;
    return 0;
}

static const char *sasl_mech_name(int m)
{
    switch (m) {
    case CN_KCLIENT_SASL_PLAIN: return "PLAIN";
    case CN_KCLIENT_SASL_SCRAM_SHA256: return "SCRAM-SHA-256";
    case CN_KCLIENT_SASL_SCRAM_SHA512: return "SCRAM-SHA-512";
    default: return "?";
    }
}

/* SaslHandshake v1 then SaslAuthenticate (KIP-152), after ApiVersions. */
static int sasl_login(struct cn_kclient *c)
{
    struct cn_kclient_sec *sec = c->sec;
    const char *mech = sasl_mech_name(sec->sasl);
    struct cn_sasl_handshake_request hq;
    struct cn_sasl_handshake_response hs;
    struct cn_arena arena;
    struct cn_bytes got;
    uint8_t msg[CN_SCRAM_MSG_MAX + 256];
    size_t n = 0;
    char why[256] = "";
    int16_t hv = cn_kclient_version(c, CN_API_SASL_HANDSHAKE);
    int16_t av = cn_kclient_version(c, CN_API_SASL_AUTHENTICATE);
    int err;

    if (hv < 1 || av < 0) {
        snprintf(c->err, sizeof c->err,
                 "broker does not offer SaslHandshake v1 and "
                 "SaslAuthenticate (is the listener SASL?)");
        return CN_EUNSUPPORTED;
    }
    cn_arena_init(&arena);
    cn_sasl_handshake_request_init(&hq);
    hq.mechanism = cn_bytes_str(mech);
    err = cn_kclient_call(c, CN_API_SASL_HANDSHAKE, hv, &hq, &hs, &arena);
    if (err)
        goto out;
    if (hs.error_code && hs.mechanisms_len <= 0) {
        snprintf(c->err, sizeof c->err,
                 "SASL handshake failed: %s: the listener does not take "
                 "SASL (security.protocol PLAINTEXT or SSL?)",
                 cn_kerr_name(hs.error_code));
        err = -EACCES;
        goto out;
    }
    if (hs.error_code) {
        size_t o = 0;
        char list[200] = "";
        for (int32_t i = 0; i < hs.mechanisms_len && o < sizeof list; i++)
            o += (size_t)snprintf(list + o, sizeof list - o, "%s%.*s",
                                  i ? ", " : "", (int)hs.mechanisms[i].len,
                                  (const char *)hs.mechanisms[i].ptr);
        snprintf(c->err, sizeof c->err,
                 "SASL handshake failed: %s: the broker enables [%s], not "
                 "%s",
                 cn_kerr_name(hs.error_code), list, mech);
        err = -EACCES;
        goto out;
    }
    if (sec->sasl == CN_KCLIENT_SASL_PLAIN) {
        if (!sec->user || !sec->password ||
            cn_sasl_plain_build(sec->user, sec->password, msg, sizeof msg,
                                &n)) {
            snprintf(c->err, sizeof c->err,
                     "SASL/PLAIN needs a user name and a password");
            err = CN_EINVAL;
            goto out;
        }
        err = sasl_round(c, av, msg, n, &got, &arena);
        goto out;
    }

    struct cn_scram_client sc;
    cn_scram_client_init(&sc,
                         sec->sasl == CN_KCLIENT_SASL_SCRAM_SHA256
                             ? CN_SCRAM_SHA256
                             : CN_SCRAM_SHA512,
                         sec->user ? sec->user : "",
                         sec->password ? sec->password : "");
    err = cn_scram_client_first(&sc, msg, sizeof msg, &n, why, sizeof why);
    if (!err) {
        err = sasl_round(c, av, msg, n, &got, &arena);
        if (err)
            goto out;
        err = cn_scram_client_final(&sc, got.ptr, (size_t)got.len, msg,
                                    sizeof msg, &n, why, sizeof why);
    }
    if (!err) {
        err = sasl_round(c, av, msg, n, &got, &arena);
        if (err)
            goto out;
        err = cn_scram_client_verify(&sc, got.ptr, (size_t)got.len, why,
                                     sizeof why);
    }
    if (err)
        snprintf(c->err, sizeof c->err, "%s: %s", mech, why);
out:
    cn_arena_fini(&arena);
    return err;
}

int cn_kclient_tcp_connect(const char *host, int port, int64_t deadline,
                           int *fd, char *err, size_t err_size)
{
    struct addrinfo hints, *res, *ai;
    char portstr[16];
    int rc;

    snprintf(portstr, sizeof portstr, "%d", port);
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    rc = getaddrinfo(host, portstr, &hints, &res);
    if (rc) {
        snprintf(err, err_size, "cannot connect to %s:%d: %s", host, port,
                 gai_strerror(rc));
        return CN_ENOTFOUND;
    }
    rc = -ECONNREFUSED;
    for (ai = res; ai; ai = ai->ai_next) {
        rc = connect_one(ai, deadline, fd);
        if (!rc)
            break;
    }
    freeaddrinfo(res);
    if (rc)
        snprintf(err, err_size, "cannot connect to %s:%d: %s", host, port,
                 rc == -ETIMEDOUT ? "timed out" : describe_err(rc));
    return rc;
}

int cn_kclient_connect(struct cn_kclient *c, const char *host, int port,
                       int timeout_ms)
{
    int64_t deadline;
    int err, fd = -1;

    cn_kclient_close(c);
    if (timeout_ms > 0)
        c->timeout_ms = timeout_ms;
    snprintf(c->host, sizeof c->host, "%s", host);
    c->port = port;
    deadline = cn_clock_mono_ms() + c->timeout_ms;
    err = cn_kclient_tcp_connect(host, port, deadline, &fd, c->err,
                                 sizeof c->err);
    if (err)
        return err;
    c->fd = fd;
    err = c->sec && c->sec->tls ? tls_handshake(c, deadline) : 0;
    if (!err)
        err = negotiate(c);
    if (!err && c->sec && c->sec->sasl)
        err = sasl_login(c);
    c->first_corr = c->next_correlation_id;
    if (err) {
        char why[sizeof c->err];
        snprintf(why, sizeof why, "%s", c->err);
        snprintf(c->err, sizeof c->err, "cannot connect to %.150s:%d: %.300s",
                 host, port, why);
        cn_kclient_close(c);
    }
    return err;
}

int cn_kclient_bootstrap(struct cn_kclient *c, const char *addr, int timeout_ms)
{
    char one[CN_KCLIENT_HOST_MAX + 16];
    char host[CN_KCLIENT_HOST_MAX];
    int port;
    int rc = CN_EINVAL;

    /* A list, as Kafka's tools take: the first server that answers is
     * the bootstrap, the rest are only tried when it does not. */
    for (const char *p = addr;;) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        bool fits = n < sizeof one;
        if (fits)
            snprintf(one, sizeof one, "%.*s", (int)n, p);
        if (!fits || cn_kclient_parse_addr(one, host, sizeof host, &port)) {
            snprintf(c->err, sizeof c->err,
                     "bad bootstrap server '%.*s' (want HOST:PORT)",
                     (int)(n < 200 ? n : 200), p);
            return CN_EINVAL;
        }
        rc = cn_kclient_connect(c, host, port, timeout_ms);
        if (rc == 0 || !end)
            return rc;
        p = end + 1;
    }
}

int16_t cn_kclient_version(const struct cn_kclient *c, int16_t api_key)
{
    const struct cn_api_info *api = cn_api_find(api_key);
    int16_t ours_max, hi, lo;

    if (!api || api_key < 0 || api_key > CN_API_KEY_MAX)
        return -1;
    if (c->api_max[api_key] < 0)
        return -1;
    ours_max = api->max_version;
    if (api->latest_unstable && ours_max > api->min_version)
        ours_max--;
    hi = c->api_max[api_key] < ours_max ? c->api_max[api_key] : ours_max;
    lo = c->api_min[api_key] > api->min_version ? c->api_min[api_key]
                                                : api->min_version;
    return hi >= lo ? hi : -1;
}

int cn_kclient_controller(struct cn_kclient *c, struct cn_kclient *ctl,
                          struct cn_kclient **out)
{
    struct cn_metadata_request rq;
    struct cn_metadata_response rs;
    const struct cn_metadata_response_metadata_response_broker *b = NULL;
    struct cn_arena arena;
    char host[CN_KCLIENT_HOST_MAX];
    int16_t v = cn_kclient_version(c, CN_API_METADATA);
    int err;

    /* ControllerId arrived in Metadata v1. */
    if (v < 1) {
        *out = c;
        return 0;
    }
    cn_arena_init(&arena);
    cn_metadata_request_init(&rq);
    rq.topics = NULL;
    rq.topics_len = 0; /* no topics: we only want brokers and controller */
    err = cn_kclient_call(c, CN_API_METADATA, v, &rq, &rs, &arena);
    if (err)
        goto out;
    for (int32_t i = 0; i < rs.brokers_len; i++)
        if (rs.brokers[i].node_id == rs.controller_id)
            b = &rs.brokers[i];
    if (!b || rs.brokers_len == 1 || b->host.len <= 0 ||
        (size_t)b->host.len >= sizeof host) {
        *out = c;
        goto out;
    }
    memcpy(host, b->host.ptr, (size_t)b->host.len);
    host[b->host.len] = '\0';
    if (strcmp(host, c->host) == 0 && b->port == c->port) {
        *out = c;
        goto out;
    }
    err = cn_kclient_connect(ctl, host, b->port, c->timeout_ms);
    if (err) {
        snprintf(c->err, sizeof c->err, "controller %d: %.400s", b->node_id,
                 ctl->err);
        goto out;
    }
    *out = ctl;
out:
    cn_arena_fini(&arena);
    return err;
}
