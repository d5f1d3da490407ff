/*
 * quotas.h - client quotas in the broker (h_quotas.c): the store, the
 * two APIs, and the measuring calls the handlers make.  Each measuring
 * call returns the throttle time in ms (0: within the quota, or none set);
 * the caller puts it in throttle_time_ms and passes it to
 * cn_req_throttle(), as Kafka does since KIP-219.
 *
 * Quota user: the principal's name ("User:alice" is user "alice"; a
 * PLAINTEXT connection is "ANONYMOUS").  Client id: the request header's
 * (null is "").
 */
#ifndef CN_HANDLERS_QUOTAS_H
#define CN_HANDLERS_QUOTAS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "node/broker_int.h"
#include "proto/header.h"

/* Reads <data>/client-quotas; a damaged file fails naming it.  Runs on:
 * loop, at start. */
int cn_quotas_open(struct cn_broker *b, char *err, size_t err_len);
void cn_quotas_close(struct cn_broker *b);

/* As a Produce answer is made: producer_byte_rate counts the request's
 * bytes, request_percentage (not for acks=0) the rate so far.  Returns
 * the longer throttle, already applied to the connection. */
int32_t cn_quota_produce_answer(struct cn_broker *b, struct cn_req *req,
                                const struct cn_req_header *h, size_t bytes,
                                bool acks0);
/* As a Fetch answer is made: consumer_byte_rate counts its record bytes.
 * When either quota throttles, the caller sends the answer without
 * partitions (Kafka's getThrottledResponse) and the bytes are taken back.
 * Returns the throttle, already applied to the connection. */
int32_t cn_quota_fetch_answer(struct cn_broker *b, struct cn_req *req,
                              const struct cn_req_header *h, size_t bytes);
/* The most a fetch answer may carry under consumer_byte_rate (limit *
 * (quota.window.num - 1) windows), or -1 for no limit. */
int64_t cn_quota_fetch_max_bytes(struct cn_broker *b, struct cn_req *req,
                                 const struct cn_req_header *h);
/* request_percentage.  The names a request is measured under (struct
 * cn_quota_ids, broker_int.h); false when no quota is set. */
bool cn_quota_ids_get(struct cn_broker *b, struct cn_req *req,
                      const struct cn_req_header *h, struct cn_quota_ids *out);
/* The throttle the request rate asks for now (nothing recorded). */
int32_t cn_quota_request_throttle(struct cn_broker *b,
                                  const struct cn_quota_ids *id);

/*
 * request_percentage as Kafka applies it (sendResponseMaybeThrottle): a
 * request's loop-thread time is recorded when its answer is finished and
 * the throttle that leads to goes into THAT answer's throttle_time_ms;
 * the connection is then muted for it.  The dispatcher brackets each
 * handler call with _begin and _end.  When the answer is finished inside
 * the call, the time up to then is recorded as it is finished and the
 * rest at _end; an answer the handler gives later (a parked request) has
 * its first pass recorded at _end and carries the throttle the rate asks
 * for when it is finished.
 */
void cn_quota_request_begin(struct cn_broker *b, struct cn_req *req,
                            const struct cn_req_header *h);
void cn_quota_request_end(struct cn_broker *b);
/* For the handlers whose response has throttle_time_ms after its first
 * field (Produce, Fetch's throttled answer, ApiVersions, OffsetDelete):
 * records req's time and returns its throttle, already applied to the
 * connection.  Runs on: loop, as the answer is built. */
int32_t cn_quota_request_answer(struct cn_broker *b, struct cn_req *req,
                                const struct cn_req_header *h);
/* From the net layer's done_cb, before the answer is written: for every
 * other API, records the time, writes the throttle into the answer when
 * its body starts with throttle_time_ms (cn_api_throttle_first) and mutes
 * the connection for it. */
void cn_quota_request_done(struct cn_broker *b, struct cn_req *req);

#endif
