/*
 * metrics.h - the broker's HTTP endpoint (issue #6): GET /metrics in the
 * Prometheus text format 0.0.4, GET /healthz for liveness probes.
 *
 * Per partition: high watermark, last stable offset and LastStableOffsetLag
 * (high watermark minus LSO: how far read_committed readers lag because
 * of open transactions), oldest open transaction age, open transactions,
 * producer ids, log start and end.  From the transaction coordinator: ids
 * per state, commits, aborts, timeouts, fences, marker queues, parked
 * requests, commit and abort latency.  Per API: requests (also by request
 * version: which versions clients send) and latency from
 * the complete frame to cn_req_done().  Process: resident memory.
 *
 * Values are read when scraped, on the loop, so they are consistent with
 * each other within a partition.  The endpoint listens on http.listener
 * (default 127.0.0.1:9464; empty turns it off).  Failing to bind it is
 * logged as an error and the broker runs on without it, so a second
 * broker on one machine does not refuse to start over metrics.
 *
 * Runs on: loop.
 */
#ifndef CN_BROKER_METRICS_H
#define CN_BROKER_METRICS_H

#include <stdint.h>

#include "base/wr.h"
#include "node/broker_int.h"

struct cn_metrics;

/* Allocates b->metrics (counters start at zero).  Call before the Kafka
 * listener starts so every request is counted.  Returns 0 or CN_ENOMEM. */
int cn_metrics_init(struct cn_broker *b);
/* Starts the HTTP endpoint if http.listener is set; a failure to listen
 * is logged and leaves it off. */
void cn_metrics_start_http(struct cn_broker *b);
/* Stops the HTTP endpoint (idempotent); counters stay readable. */
void cn_metrics_stop(struct cn_broker *b);
/* Frees b->metrics; b->metrics may be NULL. */
void cn_metrics_free(struct cn_broker *b);
/* The HTTP port bound, or -1 when the endpoint is off. */
int cn_metrics_http_port(const struct cn_broker *b);

/* The net layer's done hook (struct cn_server_config.done_cb): counts
 * req under its API and records its latency.  opaque is the broker. */
void cn_metrics_request_done(struct cn_req *req, void *opaque);

/* Appends the whole exposition to out (what GET /metrics returns). */
void cn_metrics_render(struct cn_broker *b, struct cn_wr *out);

#endif
