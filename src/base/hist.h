/*
 * hist.h - a latency histogram with fixed bucket bounds, cheap enough to
 * record on the loop for every request, rendered as a Prometheus
 * histogram by the metrics endpoint.
 *
 * Bounds are in milliseconds; a sample goes into the first bucket whose
 * upper bound is >= it (and always into the count and sum).
 */
#ifndef CN_BASE_HIST_H
#define CN_BASE_HIST_H

#include <stdint.h>

#define CN_HIST_BUCKETS 14

/* Upper bounds, ms: 0.25 0.5 1 2 5 10 25 50 100 250 500 1000 2500 +Inf. */
extern const double cn_hist_bounds_ms[CN_HIST_BUCKETS];

struct cn_hist {
    uint64_t buckets[CN_HIST_BUCKETS]; /* not cumulative */
    uint64_t count;
    double sum_ms;
};

void cn_hist_record(struct cn_hist *h, double ms);

#endif
