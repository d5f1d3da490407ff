/*
 * peer.h - a Kafka client connection to another broker, on the loop.
 *
 * What one broker sends another: registration and heartbeats to the
 * controller, forwarded admin requests, and later replica fetches and
 * WriteTxnMarkers.  A peer is one destination (host, port); calls are
 * encoded at once, queued, sent in order over one connection, and
 * answered through a callback with the decoded response.
 *
 * Connection handling follows Kafka's NetworkClient: connect on the first
 * call, reconnect after a failure with a backoff that doubles up to a
 * limit, and on a request timeout drop the connection (a response that
 * comes late would otherwise be read as the answer to a later request).
 * When a connection is lost, calls already sent fail with -ECONNRESET
 * (the caller decides whether a retry is safe) and calls not yet sent wait
 * for the next connection, each until its own deadline (or fail at once,
 * with fail_unsent).
 *
 * Plaintext only: the listener a peer reaches is one the brokers trust
 * (the CONTROLLER listener, or inter.broker.listener.name).
 *
 * Runs on: loop, everything here.  Callbacks run on the loop, never
 * inside cn_peer_call; a callback may call cn_peer_call or cn_peer_free.
 */
#ifndef CN_NODE_PEER_H
#define CN_NODE_PEER_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "base/arena.h"

struct cn_peer;

struct cn_peer_opts {
    const char *host; /* a name or an address; copied */
    int port;
    const char *client_id;   /* request header client_id; copied */
    int64_t backoff_ms;      /* first reconnect delay (Kafka's
                                 reconnect.backoff.ms: 50) */
    int64_t backoff_max_ms;  /* cap of the doubling (1000) */
    int32_t max_frame_bytes; /* a larger response closes the connection */
    /* A failed connect or a lost connection also fails the calls not yet
     * sent (with its error), as Kafka's inter-broker send threads do: for
     * callers that look the destination up again (a partition's leader,
     * a coordinator), which may have moved, rather than wait for this
     * one to come back. */
    bool fail_unsent;
};

/*
 * The answer to one call.  err 0: response is the decoded response body
 * (the API's generated struct), in arena, valid until the callback
 * returns.  Otherwise response is NULL and err is -ETIMEDOUT (no answer in
 * time), -ECONNRESET (sent, connection lost: the request may or may not
 * have been carried out), -ECONNREFUSED or another -errno (never sent),
 * CN_ECORRUPT (an answer that does not decode), or -ECANCELED (the peer
 * was freed).
 */
typedef void (*cn_peer_cb)(void *arg, int err, const void *response,
                           struct cn_arena *arena);

/* A peer on loop; no connection is made before the first call.
 * Returns 0 or CN_ENOMEM/CN_EINVAL; *out is set only on success. */
int cn_peer_new(uv_loop_t *loop, const struct cn_peer_opts *opts,
                struct cn_peer **out);

/*
 * Encodes request (the API's generated request struct) at api_version and
 * queues it; cb gets the answer or an error within timeout_ms.  The
 * request need not outlive the call.  Returns 0 (cb will run exactly
 * once), or CN_EUNSUPPORTED (no codec for that key and version),
 * CN_ENOMEM or the encoder's error (cb will not run).
 */
int cn_peer_call(struct cn_peer *p, int16_t api_key, int16_t api_version,
                 const void *request, int64_t timeout_ms, cn_peer_cb cb,
                 void *arg);

/* True while a connection is established. */
bool cn_peer_connected(const struct cn_peer *p);

/* Calls waiting for an answer, sent or not. */
size_t cn_peer_pending(const struct cn_peer *p);

/* Fails every pending call with -ECANCELED (callbacks run before this
 * returns) and frees p once its handles have closed (the loop must run). */
void cn_peer_free(struct cn_peer *p);

#endif
