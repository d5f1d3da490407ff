/*
 * verify_proxy.h - the frame-aware TCP proxy of `cairnctl verify --cluster
 * --proxy` (issue #15): the writers reach each broker's client listener
 * through it, so delay-produce and delay-endtxn can hold one Produce (api
 * key 0) or EndTxn (26) request, and everything after it on that
 * connection, past the transaction timeout before forwarding it: the
 * KIP-890 race (KAFKA-17754), a request arriving after the client gave up
 * on it.  A held connection whose client closes is still delivered to the
 * broker once the hold ends, as a slow network would.
 *
 * The brokers must advertise the proxy's addresses on the listener the
 * proxy forwards to, and talk to each other on another one
 * (inter.broker.listener.name), so only the writers' traffic passes here.
 *
 * cn_vproxy_frame is pure (tested without sockets).  The proxy runs on a
 * thread of its own; cn_vproxy_hold and cn_vproxy_held may be called from
 * any thread.
 */
#ifndef CN_CLI_VERIFY_PROXY_H
#define CN_CLI_VERIFY_PROXY_H

#include <stddef.h>
#include <stdint.h>

#define CN_VPROXY_MAX 9 /* proxied brokers at most */

/* The first request frame in buf[0..len): sets *api_key and *frame_len
 * (with its 4-byte size) and returns 1 once its size and api key are in,
 * 0 while they are not, -1 for a size no Kafka request has (the proxy
 * then forwards the connection untouched). */
int cn_vproxy_frame(const uint8_t *buf, size_t len, int16_t *api_key,
                    size_t *frame_len);

struct cn_vproxy;

/* Listens on addrs[i] ("HOST:PORT") and forwards each connection to
 * target[i], for i < n.  NULL on failure, with the reason in err. */
struct cn_vproxy *cn_vproxy_start(int n, const char *const *addrs,
                                  const char *const *target, char *err,
                                  size_t err_len);

/* Arms a hold: the next request with api_key on any connection waits
 * hold_ms before it (and what follows it on its connection) is sent on.
 * Returns 0, or -1 when a hold is still armed or running. */
int cn_vproxy_hold(struct cn_vproxy *p, int16_t api_key, int64_t hold_ms);

/* How many requests were held so far. */
int64_t cn_vproxy_held(struct cn_vproxy *p);

/* Stops the thread and closes every socket.  NULL is fine. */
void cn_vproxy_stop(struct cn_vproxy *p);

#endif
