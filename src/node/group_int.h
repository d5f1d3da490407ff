/*
 * group_int.h - what group_coord.c (offsets, loading) and h_group.c
 * (membership APIs) share.  Included by src/node and src/handlers only.
 */
#ifndef CN_NODE_GROUP_INT_H
#define CN_NODE_GROUP_INT_H

#include <uv.h>

#include "node/broker_int.h"
#include "group/group.h"
#include "group/offsets.h"

struct cn_group_coord {
    struct cn_groups *groups;   /* membership state machine */
    struct cn_offsets *offsets; /* committed offsets */
    uv_timer_t timer;           /* next membership deadline */
    uv_timer_t retention_timer; /* offsets.retention.check.interval.ms */
    bool timers_armed;
    struct cn_broker *b;
    struct cn_istore *store; /* __consumer_offsets */
    int64_t *next_check;     /* per partition: end offset at which
                                   compaction is considered again */
    int64_t load_now_ms;     /* the wall clock of the last replay */
    int32_t *loaded_epoch;   /* per partition: the leader epoch its groups
                                are held at (0 on a single node), -1 when
                                not loaded here */
};

/* A NUL-terminated copy of a wire string in the request's arena ("" for
 * null); NULL only when memory is short. */
char *cn_gc_cstr(struct cn_req *req, struct cn_bytes s);
/*
 * Appends records (a value with len -1 is a tombstone) to p as one batch
 * (transactional when producer_id >= 0) through the store (istore.h);
 * w->finish runs once durable (w->err 0) or failed (w->err: istore.h's
 * errors; cn_gc_write_kerr).  Returns 0 or an error, with w not called.
 */
int cn_gc_write(struct cn_broker *b, struct cn_partition *p,
                const struct cn_bytes *keys, const struct cn_bytes *values,
                size_t n, int64_t producer_id, int16_t producer_epoch,
                struct cn_sync_waiter *w);
/* What a client hears of a failed offset write (w->err after
 * cn_gc_write): another leader has the partition -> NOT_COORDINATOR (the
 * client looks for the coordinator again); too few in-sync replicas, an
 * offline log directory -> COORDINATOR_NOT_AVAILABLE, which it retries
 * (Kafka's GroupMetadataManager maps NOT_ENOUGH_REPLICAS so). */
int16_t cn_gc_write_kerr(int err);
/* A finished writer's bytes copied into the request's arena (null when
 * memory is short or the writer failed). */
struct cn_bytes cn_gc_arena_bytes(struct cn_req *req, const struct cn_wr *w);
/* Compacts p by checkpoint when it has grown past its live keys plus
 * cairn.internal.compact.slack.records and nothing of it is in flight. */
void cn_gc_maybe_compact(struct cn_broker *b, struct cn_partition *p);
/* Whether this broker serves the groups of p (a __consumer_offsets
 * partition) now: loaded here and, in cluster mode, led at the epoch it
 * was loaded at.  A durable write of a partition no longer served is not
 * applied (the new coordinator loads it from the log). */
bool cn_gc_serves(struct cn_broker *b, const struct cn_partition *p);
/* Re-arms the membership timer at the state machine's next deadline;
 * call after every call that may change it. */
void cn_gc_rearm(struct cn_broker *b);

#endif
