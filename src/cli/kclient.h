/*
 * kclient.h - a small blocking Kafka protocol client for cairnctl.
 *
 * One struct cn_kclient is one TCP connection to one broker.  It speaks only
 * the Kafka wire protocol through the generated codecs (proto/gen), so it
 * works against any Kafka-compatible broker.  Every socket step waits at
 * most timeout_ms (poll-based), so a dead broker cannot hang the CLI.
 *
 * Frames on the wire:
 *
 *   offset  size  field
 *   0       4     size of what follows (int32, big-endian)
 *   4       ...   request header (v1 or v2) then body, or
 *                 response header (v0: correlation_id; v1: plus tags) then body
 *
 * At connect the client sends ApiVersions v3 (v0 if the broker answers
 * UNSUPPORTED_VERSION) and keeps each API's version range, so callers can
 * ask cn_kclient_version() for the highest version both sides speak.
 *
 * With c->sec set (cn_kclient_sec), each connection is secured as Kafka's
 * security.protocol says, every connection alike (bootstrap, controller,
 * coordinators, partition leaders): TLS right after TCP connect (the
 * server certificate checked against the CA file and, unless disabled,
 * the host name; a client certificate for mutual TLS), then ApiVersions,
 * then SASL: SaslHandshake v1 and SaslAuthenticate (PLAIN, or the SCRAM
 * exchange of src/sec/sasl_client.h).  Each step is bounded by
 * timeout_ms like the rest, so a broker that rejects a login and hangs up
 * gives an error, not a wait.
 *
 * OpenSSL writes without MSG_NOSIGNAL, so a process that uses TLS here
 * ignores SIGPIPE (cairnctl's main does).
 *
 * Not thread-safe; one request in flight at a time.
 */
#ifndef CN_CLI_KCLIENT_H
#define CN_CLI_KCLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/arena.h"
#include "proto/gen/api.h"

#define CN_KCLIENT_TIMEOUT_MS 10000
#define CN_KCLIENT_HOST_MAX 256
/* Largest response frame accepted; larger sizes mean a confused peer. */
#define CN_KCLIENT_FRAME_MAX (256 * 1024 * 1024)

struct ssl_ctx_st;
struct ssl_st;

enum cn_kclient_sasl {
    CN_KCLIENT_SASL_NONE,
    CN_KCLIENT_SASL_PLAIN,
    CN_KCLIENT_SASL_SCRAM_SHA256,
    CN_KCLIENT_SASL_SCRAM_SHA512,
};

/*
 * How to secure connections: security.protocol is PLAINTEXT (tls false,
 * sasl NONE), SSL, SASL_PLAINTEXT or SASL_SSL.  Strings are the caller's
 * and must outlive every connection.  One per process, shared by every
 * cn_kclient that points at it; cn_kclient_sec_fini() when done.
 */
struct cn_kclient_sec {
    bool tls;                 /* TLS on the TCP connection */
    const char *ca_file;      /* PEM CA certificates; NULL: system's */
    const char *cert_file;    /* PEM with our key and certificate chain,
                                 for mutual TLS; NULL: none */
    const char *key_file;     /* the key when not in cert_file; NULL */
    const char *key_password; /* for an encrypted key; NULL: none */
    bool no_verify_host;      /* ssl.endpoint.identification.algorithm="" */
    int sasl;                 /* enum cn_kclient_sasl */
    const char *user;         /* SASL user and password */
    const char *password;
    struct ssl_ctx_st *ssl_ctx; /* built by cn_kclient_sec_load */
};

/* Loads the CA, certificate and key files into sec->ssl_ctx (when tls).
 * 0, or CN_EINVAL with the file and OpenSSL's reason in err. */
int cn_kclient_sec_load(struct cn_kclient_sec *sec, char *err,
                        size_t err_len);
void cn_kclient_sec_fini(struct cn_kclient_sec *sec);
/* "SSL", "SASL_SSL", ... for sec (PLAINTEXT for NULL). */
const char *cn_kclient_sec_protocol(const struct cn_kclient_sec *sec);

struct cn_kclient {
    int fd;                         /* connected socket, -1 when closed */
    struct cn_kclient_sec *sec;     /* NULL: plaintext, no SASL */
    struct ssl_st *ssl;             /* TLS session on fd, NULL without */
    char host[CN_KCLIENT_HOST_MAX]; /* as given to connect, no brackets */
    int port;                       /* TCP port */
    int timeout_ms;                 /* limit for connect, send, recv each */
    int32_t next_correlation_id;    /* next request's correlation id */
    int32_t first_corr;             /* first request after the login */
    int16_t api_min[CN_API_KEY_MAX + 1]; /* broker's min version per key */
    int16_t api_max[CN_API_KEY_MAX + 1]; /* broker's max, -1 unsupported */
    char err[512];                       /* last failure in words, for humans */
};

/*
 * Splits "HOST:PORT" or "[V6ADDR]:PORT" into host (no brackets) and port.
 * A bare host gets port 9092.  Returns 0 or CN_EINVAL.
 */
int cn_kclient_parse_addr(const char *addr, char *host, size_t host_size,
                          int *port);

/* Sets up c unconnected (fd -1) with the default timeout, no security
 * (set c->sec after this). */
void cn_kclient_init(struct cn_kclient *c);

/*
 * Connects to host:port within timeout_ms (<= 0 means the default) and
 * negotiates API versions, with TLS and SASL as c->sec says (loaded with
 * cn_kclient_sec_load first, or here on first use).  On failure returns a
 * negative code (-EPROTO for TLS failures, -EACCES for a refused login),
 * leaves c closed and explains in c->err ("cannot connect to HOST:PORT:
 * reason").
 */
int cn_kclient_connect(struct cn_kclient *c, const char *host, int port,
                       int timeout_ms);

/*
 * A plain TCP connection to host:port (every address it resolves to, in
 * turn) before deadline (CLOCK_MONOTONIC ms, as cn_clock_mono_ms); *fd is
 * non-blocking.  On failure returns CN_ENOTFOUND or -errno and says why in err ("cannot
 * connect to HOST:PORT: reason").  cairnctl's metrics GET uses it too.
 */
int cn_kclient_tcp_connect(const char *host, int port, int64_t deadline,
                           int *fd, char *err, size_t err_size);

/* Connects to the first server of addr ("HOST:PORT[,HOST:PORT...]", each
 * as cn_kclient_parse_addr takes) that accepts; err names the last
 * failure. */
int cn_kclient_bootstrap(struct cn_kclient *c, const char *addr,
                         int timeout_ms);

/* Closes the socket; c may be reused with cn_kclient_connect(). */
void cn_kclient_close(struct cn_kclient *c);

/*
 * Highest version of api_key that both the broker (per ApiVersions) and our
 * generated codec support, skipping a codec version marked unstable; -1 if
 * there is none.
 */
int16_t cn_kclient_version(const struct cn_kclient *c, int16_t api_key);

/*
 * Sends request (the generated struct for api_key, e.g. struct
 * cn_metadata_request) at version and decodes the reply into response (the
 * matching response struct).  The response frame is allocated in arena, and
 * decoded strings and arrays point into it, so they live until the arena is
 * freed.  Returns 0, CN_EUNSUPPORTED if our codec lacks the version, -errno
 * or CN_ETRUNC for socket trouble, CN_ECORRUPT for a mismatched correlation
 * id or undecodable body; c->err says which.  After a socket error or
 * timeout the connection is closed, since its framing is lost.
 */
int cn_kclient_call(struct cn_kclient *c, int16_t api_key, int16_t version,
                    const void *request, void *response,
                    struct cn_arena *arena);

/*
 * As cn_kclient_call for an API whose codec is written by hand (always
 * flexible: header v2, response header v1): body is the encoded request
 * body; on success *resp is positioned at the response body, which lives
 * in arena.
 */
struct cn_wr;
struct cn_rd;
int cn_kclient_call_raw(struct cn_kclient *c, int16_t api_key,
                        int16_t version, const struct cn_wr *body,
                        struct cn_arena *arena, struct cn_rd *resp);

/*
 * Finds the controller from a Metadata reply on c and returns a connection
 * to it in *out: c itself when the controller is the broker c talks to (or
 * cannot be told apart, e.g. the broker reports no controller), else ctl,
 * newly connected with c's timeout.  Admin requests (CreateTopics,
 * DeleteTopics, CreatePartitions, IncrementalAlterConfigs) go there.  The
 * caller closes ctl (harmless if unused).  ctl must be initialised.
 */
int cn_kclient_controller(struct cn_kclient *c, struct cn_kclient *ctl,
                          struct cn_kclient **out);

#endif
