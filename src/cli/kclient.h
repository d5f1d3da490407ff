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

struct cn_kclient {
    int fd;                         /* connected socket, -1 when closed */
    char host[CN_KCLIENT_HOST_MAX]; /* as given to connect, no brackets */
    int port;                       /* TCP port */
    int timeout_ms;                 /* limit for connect, send, recv each */
    int32_t next_correlation_id;    /* next request's correlation id */
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

/* Sets up c unconnected (fd -1) with the default timeout. */
void cn_kclient_init(struct cn_kclient *c);

/*
 * Connects to host:port within timeout_ms (<= 0 means the default) and
 * negotiates API versions.  On failure returns a negative code, leaves c
 * closed and explains in c->err ("cannot connect to HOST:PORT: reason").
 */
int cn_kclient_connect(struct cn_kclient *c, const char *host, int port,
                       int timeout_ms);

/* Parses addr (see cn_kclient_parse_addr) and connects to it. */
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
