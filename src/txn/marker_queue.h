/*
 * marker_queue.h - the decisions of the cluster marker channel: where
 * each transaction marker goes, what is batched into one WriteTxnMarkers,
 * what an answer's error code means, when to stop retrying (Kafka's
 * TransactionMarkerChannelManager and TransactionMarkerRequestCompletion-
 * Handler).
 *
 * An item is one marker for one partition.  It lives here from
 * cn_mq_add until its one result is popped (cn_mq_pop_result), and is in
 * one of these states:
 *
 *  - queued: waiting to be routed (at first, and again after a retriable
 *    error, not before its due time: the retry backoff);
 *  - routed to a destination broker (dest >= 0) and waiting for the next
 *    request to it, or to no known broker (the unknown-destination queue:
 *    the partition has no leader in the image);
 *  - local: this broker leads the partition; the glue writes the marker
 *    here and reports the outcome with cn_mq_done;
 *  - in flight in a WriteTxnMarkers to its destination (cn_mq_take): the
 *    glue reports each partition's error code, or the whole request's
 *    failure, with cn_mq_done;
 *  - finished: its result (a Kafka error code) waits in the result list.
 *
 * Routing (cn_mq_route) asks a view of the cluster, the image, two
 * things: whether this broker still coordinates the marker's
 * __transaction_state partition at the marker's coordinator epoch (if
 * not, the marker is dropped with NOT_COORDINATOR: the newer coordinator
 * finishes the transaction), and who leads the partition (a partition
 * whose topic is gone needs no marker: NONE).  It is asked before every
 * send and every retry.
 *
 * At most one request is in flight per destination, so the markers that
 * come in meanwhile go together in the next one (batching across
 * transactions and producers).
 *
 * No I/O, no clock (time is an argument).  Runs on: any one thread.
 */
#ifndef CN_TXN_MARKER_QUEUE_H
#define CN_TXN_MARKER_QUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CN_MQ_RETRY_BACKOFF_MS 100 /* before a retriable error's retry */

/* What cn_mq_view.leader says besides a broker id. */
#define CN_MQ_NO_LEADER (-1) /* in the image without a leader: wait */
#define CN_MQ_GONE (-2)      /* not in the image: deleted, needs no marker */

/* The image as the queue sees it. */
struct cn_mq_view {
    /* The leader of topic-partition: a broker id, CN_MQ_NO_LEADER or
     * CN_MQ_GONE. */
    int32_t (*leader)(void *ctx, const char *topic, int32_t partition);
    /* Whether this broker leads __transaction_state partition
     * txn_partition at leader epoch coordinator_epoch (never asked for
     * txn_partition < 0: an operator's marker has no coordinator). */
    bool (*coordinates)(void *ctx, int32_t txn_partition,
                        int32_t coordinator_epoch);
    void *ctx;
    int32_t self; /* this broker's id */
};

struct cn_mq_marker {
    int64_t producer_id;
    int16_t producer_epoch;
    bool commit;
    int32_t coordinator_epoch;
    int32_t txn_partition; /* -1: none */
    const char *topic;     /* copied */
    int32_t partition;
};

enum cn_mq_state {
    CN_MQ_QUEUED,
    CN_MQ_ROUTED,
    CN_MQ_LOCAL,
    CN_MQ_INFLIGHT,
    CN_MQ_FINISHED,
};

/* One marker; read-only outside this module except owner/index. */
struct cn_mq_item {
    struct cn_mq_marker m; /* m.topic owned */
    void *owner;           /* the glue's: whom the result goes to */
    size_t index;          /* the glue's: which partition of owner */
    enum cn_mq_state state;
    int32_t dest;      /* ROUTED/INFLIGHT: broker id, or CN_MQ_NO_LEADER */
    int64_t due_ms;    /* QUEUED, or ROUTED to no leader: routed again
                           then */
    uint32_t attempts; /* sends so far (local or remote) */
    int16_t result;    /* FINISHED */
    struct cn_mq_item *prev, *next;
};

struct cn_mq_stats {
    size_t unknown_destination; /* routed to no known leader */
    size_t retry_waiting; /* queued again after a retriable error, not yet
                             sent again */
    size_t in_flight;     /* sent (remote) or being written (local) */
    uint64_t requests;    /* WriteTxnMarkers taken to send */
    uint64_t retries;     /* markers requeued after a retriable error */
};

struct cn_mq;

/* NULL when out of memory. */
struct cn_mq *cn_mq_new(void);
/* Frees every item, finished or not; results not popped are lost. */
void cn_mq_free(struct cn_mq *q);

/* Queues one marker, due at once.  NULL when out of memory (nothing
 * queued). */
struct cn_mq_item *cn_mq_add(struct cn_mq *q, const struct cn_mq_marker *m,
                             void *owner, size_t index, int64_t now_ms);

/*
 * Routes every queued item that is due, every routed one to a known
 * leader (which may have moved since), and every one routed to no known
 * leader that is due: finished (NOT_COORDINATOR, or
 * NONE for a deleted topic), LOCAL (appended to *local, up to nlocal;
 * more stay queued for the next call), or ROUTED.  Returns the number
 * of items put in *local.
 */
size_t cn_mq_route(struct cn_mq *q, const struct cn_mq_view *v, int64_t now_ms,
                   struct cn_mq_item **local, size_t nlocal);

/* Destinations with routed items and no request in flight: up to n of
 * them in *dests; returns how many. */
size_t cn_mq_ready(const struct cn_mq *q, int32_t *dests, size_t n);

/*
 * The next request to dest: every item routed there, up to max, marked
 * in flight (in *items), and dest busy until cn_mq_answered.  One
 * request carries at most one marker per producer id and partition, and
 * one transaction result and epoch pair per producer id (a leader
 * answers per producer id): the others wait for the next.  Returns how
 * many (0: nothing to send, dest not marked busy).
 */
size_t cn_mq_take(struct cn_mq *q, int32_t dest, struct cn_mq_item **items,
                  size_t max);

/* The request to dest has ended (every item of it given to cn_mq_done,
 * or about to be): dest may take another. */
void cn_mq_answered(struct cn_mq *q, int32_t dest);

/*
 * One item's outcome (LOCAL or INFLIGHT): a partition's error code, or
 * for a request that failed as a whole (no answer, connection lost)
 * REQUEST_TIMED_OUT.  The error table decides: finished with that code,
 * or queued again due at now_ms + CN_MQ_RETRY_BACKOFF_MS.  Returns true
 * when the item finished.
 */
bool cn_mq_done(struct cn_mq *q, struct cn_mq_item *it, int16_t kerr,
                int64_t now_ms);

/* The error table: whether a partition's code is retried by the channel
 * rather than reported. */
bool cn_mq_retriable(int16_t kerr);

/* A finished item's owner, index and result (returns false when none is
 * left); the item is freed. */
bool cn_mq_pop_result(struct cn_mq *q, void **owner, size_t *index,
                      int16_t *kerr);

/* Every unfinished item finishes with kerr, whatever its state: the
 * glue must not give a local or in-flight one to cn_mq_done after this
 * (at stop).  Returns how many finished. */
size_t cn_mq_fail_all(struct cn_mq *q, int16_t kerr);

/* When cn_mq_route next has work: the earliest due time of a queued item
 * or of one routed to no known leader (retried every
 * CN_MQ_RETRY_BACKOFF_MS); INT64_MAX when none. */
int64_t cn_mq_next_due(const struct cn_mq *q);

/* Items not yet finished. */
size_t cn_mq_pending(const struct cn_mq *q);

void cn_mq_stats(const struct cn_mq *q, struct cn_mq_stats *out);

#endif
