/*
 * wiring.h - what the broker process's own files share: the API table's
 * dispatch and the listeners (broker.c starts both).
 *
 * Runs on: loop.
 */
#ifndef CN_BROKER_WIRING_H
#define CN_BROKER_WIRING_H

#include "node/broker_int.h"

/* dispatch.c */
void cn_dispatch(struct cn_req *req, void *opaque);

/* listeners.c: starts one server per configured listener from tmpl (the
 * settings they share), with a TLS context for SSL ones.  The error names
 * the key and the reason. */
int cn_broker_listen(struct cn_broker *b, const struct cn_server_config *tmpl,
                     char *err, size_t err_len);
void cn_broker_unlisten(struct cn_broker *b);
void cn_broker_listeners_free(struct cn_broker *b);

#endif
