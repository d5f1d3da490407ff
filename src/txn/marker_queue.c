/*
 * marker_queue.c - where transaction markers go and what their answers
 * mean; see marker_queue.h.
 */
#include <stdlib.h>
#include <string.h>

#include "proto/kerr.h"
#include "txn/marker_queue.h"

/* Destinations with a request in flight: few (the brokers), a small
 * array. */
struct busy {
    int32_t *v;
    size_t n, cap;
};

struct cn_mq {
    /* Every item, oldest first: routing and batching keep that order, so
     * a partition's markers go out in the order they came. */
    struct cn_mq_item *head, *tail;
    size_t pending; /* items not FINISHED */
    struct busy busy;
    uint64_t requests, retries;
};

struct cn_mq *cn_mq_new(void)
{
    return calloc(1, sizeof(struct cn_mq));
}

static void item_free(struct cn_mq_item *it)
{
    free((char *)it->m.topic);
    free(it);
}

void cn_mq_free(struct cn_mq *q)
{
    if (!q)
        return;
    for (struct cn_mq_item *it = q->head, *next; it; it = next) {
        next = it->next;
        item_free(it);
    }
    free(q->busy.v);
    free(q);
}

static void unlink_item(struct cn_mq *q, struct cn_mq_item *it)
{
    if (it->prev)
        it->prev->next = it->next;
    else
        q->head = it->next;
    if (it->next)
        it->next->prev = it->prev;
    else
        q->tail = it->prev;
    it->prev = it->next = NULL;
}

static void append_item(struct cn_mq *q, struct cn_mq_item *it)
{
    it->prev = q->tail;
    it->next = NULL;
    if (q->tail)
        q->tail->next = it;
    else
        q->head = it;
    q->tail = it;
}

struct cn_mq_item *cn_mq_add(struct cn_mq *q, const struct cn_mq_marker *m,
                             void *owner, size_t index, int64_t now_ms)
{
    struct cn_mq_item *it = calloc(1, sizeof *it);
    char *topic = strdup(m->topic ? m->topic : "");
    if (!it || !topic) {
        free(it);
        free(topic);
        return NULL;
    }
    it->m = *m;
    it->m.topic = topic;
    it->owner = owner;
    it->index = index;
    it->state = CN_MQ_QUEUED;
    it->dest = CN_MQ_NO_LEADER;
    it->due_ms = now_ms;
    append_item(q, it);
    q->pending++;
    return it;
}

/* A finished item moves to the end, so results come out in the order
 * items finished. */
static void finish(struct cn_mq *q, struct cn_mq_item *it, int16_t kerr)
{
    it->state = CN_MQ_FINISHED;
    it->result = kerr;
    q->pending--;
    unlink_item(q, it);
    append_item(q, it);
}

static bool dest_busy(const struct cn_mq *q, int32_t dest)
{
    for (size_t i = 0; i < q->busy.n; i++)
        if (q->busy.v[i] == dest)
            return true;
    return false;
}

size_t cn_mq_route(struct cn_mq *q, const struct cn_mq_view *v, int64_t now_ms,
                   struct cn_mq_item **local, size_t nlocal)
{
    size_t nl = 0;
    /* Items finished here move to the tail: stop at the tail as it was,
     * so none is looked at twice. */
    struct cn_mq_item *last = q->tail;
    for (struct cn_mq_item *it = q->head, *next; it; it = next) {
        next = it == last ? NULL : it->next;
        bool unknown = it->state == CN_MQ_ROUTED &&
                       it->dest == CN_MQ_NO_LEADER;
        if (it->state == CN_MQ_QUEUED || unknown) {
            if (it->due_ms > now_ms)
                continue;
        } else if (it->state != CN_MQ_ROUTED)
            continue;
        /* The stop condition: a coordinator deposed since (or moved to a
         * newer epoch) leaves the transaction to the new one. */
        if (it->m.txn_partition >= 0 &&
            !v->coordinates(v->ctx, it->m.txn_partition,
                            it->m.coordinator_epoch)) {
            finish(q, it, KAFKA_NOT_COORDINATOR);
            continue;
        }
        int32_t leader = v->leader(v->ctx, it->m.topic, it->m.partition);
        if (leader == CN_MQ_GONE) {
            finish(q, it, KAFKA_NONE);
            continue;
        }
        if (leader == v->self) {
            if (nl == nlocal) {
                /* No room this call: routed again at the next. */
                it->state = CN_MQ_QUEUED;
                it->due_ms = now_ms;
                continue;
            }
            it->state = CN_MQ_LOCAL;
            it->dest = leader;
            it->attempts++;
            local[nl++] = it;
            continue;
        }
        it->state = CN_MQ_ROUTED;
        if (leader < 0) {
            /* The unknown-destination queue: looked up again after the
             * backoff (the image may name a leader by then). */
            it->dest = CN_MQ_NO_LEADER;
            it->due_ms = now_ms + CN_MQ_RETRY_BACKOFF_MS;
        } else
            it->dest = leader;
    }
    return nl;
}

size_t cn_mq_ready(const struct cn_mq *q, int32_t *dests, size_t n)
{
    size_t k = 0;
    for (const struct cn_mq_item *it = q->head; it && k < n; it = it->next) {
        if (it->state != CN_MQ_ROUTED || it->dest < 0 ||
            dest_busy(q, it->dest))
            continue;
        bool seen = false;
        for (size_t i = 0; i < k && !seen; i++)
            seen = dests[i] == it->dest;
        if (!seen)
            dests[k++] = it->dest;
    }
    return k;
}

/* Whether it cannot go in the same request as items[0..k): a leader
 * answers per producer id (Kafka keys its answer by it), so one request
 * holds one marker per producer id and partition, all of one transaction
 * result and epochs. */
static bool clashes(const struct cn_mq_item *it, struct cn_mq_item **items,
                    size_t k)
{
    for (size_t i = 0; i < k; i++) {
        const struct cn_mq_marker *a = &items[i]->m, *m = &it->m;
        if (a->producer_id != m->producer_id)
            continue;
        if (a->producer_epoch != m->producer_epoch || a->commit != m->commit ||
            a->coordinator_epoch != m->coordinator_epoch ||
            (a->partition == m->partition && strcmp(a->topic, m->topic) == 0))
            return true;
    }
    return false;
}

size_t cn_mq_take(struct cn_mq *q, int32_t dest, struct cn_mq_item **items,
                  size_t max)
{
    if (dest < 0 || dest_busy(q, dest))
        return 0;
    if (q->busy.n == q->busy.cap) {
        size_t cap = q->busy.cap ? q->busy.cap * 2 : 8;
        int32_t *v = realloc(q->busy.v, cap * sizeof *v);
        if (!v)
            return 0; /* tried again at the next kick */
        q->busy.v = v;
        q->busy.cap = cap;
    }
    size_t k = 0;
    for (struct cn_mq_item *it = q->head; it && k < max; it = it->next) {
        if (it->state != CN_MQ_ROUTED || it->dest != dest ||
            clashes(it, items, k))
            continue;
        it->state = CN_MQ_INFLIGHT;
        it->attempts++;
        items[k++] = it;
    }
    if (k) {
        q->busy.v[q->busy.n++] = dest;
        q->requests++;
    }
    return k;
}

void cn_mq_answered(struct cn_mq *q, int32_t dest)
{
    for (size_t i = 0; i < q->busy.n; i++)
        if (q->busy.v[i] == dest) {
            q->busy.v[i] = q->busy.v[--q->busy.n];
            return;
        }
}

bool cn_mq_retriable(int16_t kerr)
{
    /* TransactionMarkerRequestCompletionHandler: the leader moved or is
     * not ready, or the write did not reach the ISR in time; looked up
     * and sent again.  INVALID_PRODUCER_EPOCH and
     * TRANSACTION_COORDINATOR_FENCED mean this coordinator was deposed:
     * reported, as is anything unexpected (the coordinator retries the
     * whole round after its own backoff). */
    switch (kerr) {
    case KAFKA_UNKNOWN_TOPIC_OR_PARTITION:
    case KAFKA_NOT_LEADER_OR_FOLLOWER:
    case KAFKA_NOT_ENOUGH_REPLICAS:
    case KAFKA_NOT_ENOUGH_REPLICAS_AFTER_APPEND:
    case KAFKA_REQUEST_TIMED_OUT:
    case KAFKA_KAFKA_STORAGE_ERROR:
    case KAFKA_COORDINATOR_LOAD_IN_PROGRESS: return true;
    default: return false;
    }
}

bool cn_mq_done(struct cn_mq *q, struct cn_mq_item *it, int16_t kerr,
                int64_t now_ms)
{
    if (it->state != CN_MQ_LOCAL && it->state != CN_MQ_INFLIGHT)
        return it->state == CN_MQ_FINISHED;
    if (kerr == KAFKA_NONE || !cn_mq_retriable(kerr)) {
        finish(q, it, kerr);
        return true;
    }
    it->state = CN_MQ_QUEUED;
    it->dest = CN_MQ_NO_LEADER;
    it->due_ms = now_ms + CN_MQ_RETRY_BACKOFF_MS;
    q->retries++;
    return false;
}

bool cn_mq_pop_result(struct cn_mq *q, void **owner, size_t *index,
                      int16_t *kerr)
{
    /* Finished items gather at the tail: the first finished one from the
     * head is the oldest result. */
    for (struct cn_mq_item *it = q->head; it; it = it->next) {
        if (it->state != CN_MQ_FINISHED)
            continue;
        *owner = it->owner;
        *index = it->index;
        *kerr = it->result;
        unlink_item(q, it);
        item_free(it);
        return true;
    }
    return false;
}

size_t cn_mq_fail_all(struct cn_mq *q, int16_t kerr)
{
    size_t n = 0;
    struct cn_mq_item *last = q->tail;
    for (struct cn_mq_item *it = q->head, *next; it; it = next) {
        next = it == last ? NULL : it->next;
        if (it->state == CN_MQ_FINISHED)
            continue;
        finish(q, it, kerr);
        n++;
    }
    q->busy.n = 0;
    return n;
}

int64_t cn_mq_next_due(const struct cn_mq *q)
{
    int64_t due = INT64_MAX;
    for (const struct cn_mq_item *it = q->head; it; it = it->next) {
        bool waits = it->state == CN_MQ_QUEUED ||
                     (it->state == CN_MQ_ROUTED &&
                      it->dest == CN_MQ_NO_LEADER);
        if (waits && it->due_ms < due)
            due = it->due_ms;
    }
    return due;
}

size_t cn_mq_pending(const struct cn_mq *q)
{
    return q->pending;
}

void cn_mq_stats(const struct cn_mq *q, struct cn_mq_stats *out)
{
    memset(out, 0, sizeof *out);
    for (const struct cn_mq_item *it = q->head; it; it = it->next) {
        switch (it->state) {
        case CN_MQ_QUEUED:
            if (it->attempts)
                out->retry_waiting++;
            break;
        case CN_MQ_ROUTED:
            if (it->dest < 0)
                out->unknown_destination++;
            else if (it->attempts)
                out->retry_waiting++;
            break;
        case CN_MQ_LOCAL:
        case CN_MQ_INFLIGHT: out->in_flight++; break;
        case CN_MQ_FINISHED: break;
        }
    }
    out->requests = q->requests;
    out->retries = q->retries;
}
