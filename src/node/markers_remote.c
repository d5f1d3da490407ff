/*
 * markers_remote.c - the cluster marker channel: each marker to its
 * partition's leader, this broker's through the local path (answered
 * once the ISR holds it), other brokers' by WriteTxnMarkers; see
 * markers.h.
 *
 * The decisions (where a marker goes, what goes in one request, what an
 * answer's code means, when to give up) are txn/marker_queue.h's; this is
 * the glue: the image lookups, the peers, one timer.  The timer is the
 * only place results are handed back, routing done and requests sent
 * ("kick"): a send, an answer or a local write's end only arms it at 0,
 * so no result runs inside a caller's send and no kick inside another.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/say.h"
#include "meta/image.h"
#include "node/markers.h"
#include "node/replica.h"
#include "node/peer.h"
#include "node/quorum.h"
#include "proto/gen/api.h"
#include "proto/gen/msgs.h"
#include "proto/kerr.h"
#include "txn/coord.h"
#include "txn/marker_queue.h"

/* Kafka's TransactionMarkerChannelManager sends WriteTxnMarkers v1 (the
 * flexible version) to brokers that have it. */
#define MR_VERSION 1
/* Kafka's request.timeout.ms, which the channel's send thread uses. */
#define MR_TIMEOUT_MS 30000
/* At most this many markers in one request (and local writes per kick):
 * a bound on a request's size, not a batching policy. */
#define MR_BATCH_MAX 1024

/* The coordinator's callback for one send: shared by its items. */
struct mr_owner {
    void (*result)(struct cn_broker *b, void *arg, size_t i, int16_t kerr);
    void *arg;
    size_t refs;
};

struct mr_dest {
    int32_t node;
    char host[CN_CONFIG_HOST_MAX];
    int port;
    struct cn_peer *peer;
    struct mr_dest *next;
};

/* One local write waiting for its marker to be replicated.  item is NULL
 * once the channel stopped: the late answer is dropped. */
struct mr_local {
    struct cn_markers_remote *r;
    struct cn_mq_item *item;
    struct mr_local *prev, *next;
};

/* One WriteTxnMarkers out. */
struct mr_req {
    struct cn_markers_remote *r;
    int32_t dest;
    size_t n;
    struct cn_mq_item *items[];
};

struct cn_markers_remote {
    struct cn_broker *b;
    struct cn_mq *q;
    struct mr_dest *dests;
    struct mr_local *locals;
    uv_timer_t timer;
    int64_t timer_at; /* monotonic; INT64_MAX when not armed */
    bool stopped;
    char client_id[48];
};

static void on_timer(uv_timer_t *t);

static struct cn_markers_remote *remote_get(struct cn_broker *b)
{
    if (b->markers_remote)
        return b->markers_remote;
    if (b->stopping)
        return NULL;
    struct cn_markers_remote *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->q = cn_mq_new();
    if (!r->q) {
        free(r);
        return NULL;
    }
    r->b = b;
    r->timer_at = INT64_MAX;
    snprintf(r->client_id, sizeof r->client_id, "cairn-txn-marker-sender-%d",
             (int)b->node_id);
    uv_timer_init(b->loop, &r->timer);
    r->timer.data = r;
    b->markers_remote = r;
    return r;
}

static void arm(struct cn_markers_remote *r, int64_t at)
{
    if (r->stopped || at >= r->timer_at)
        return;
    int64_t now = cn_clock_mono_ms();
    r->timer_at = at;
    uv_timer_start(&r->timer, on_timer, (uint64_t)(at > now ? at - now : 0),
                   0);
}

/* ---- the image ---------------------------------------------------------- */

static const struct cn_image *image_of(struct cn_broker *b)
{
    return b->quorum ? cn_quorum_image(b->quorum) : NULL;
}

static int32_t view_leader(void *ctx, const char *topic, int32_t partition)
{
    const struct cn_image *img = image_of(ctx);
    const struct cn_image_topic *t =
        img ? cn_image_topic_find(img, cn_bytes_str(topic)) : NULL;
    /* Not in the image: deleted (the coordinator added only partitions
     * its image had), as the local path says. */
    if (!t || partition < 0 || partition >= t->nparts)
        return CN_MQ_GONE;
    int32_t leader = t->parts[partition].leader;
    return leader >= 0 ? leader : CN_MQ_NO_LEADER;
}

static bool view_coordinates(void *ctx, int32_t txn_partition,
                             int32_t coordinator_epoch)
{
    struct cn_broker *b = ctx;
    const struct cn_image *img = image_of(b);
    const struct cn_image_topic *t =
        img ? cn_image_topic_find(img, cn_bytes_str(CN_TXN_TOPIC)) : NULL;
    if (!t || txn_partition >= t->nparts)
        return false;
    const struct cn_image_part *ip = &t->parts[txn_partition];
    return ip->leader == b->node_id && ip->leader_epoch == coordinator_epoch;
}

static struct cn_peer *peer_for(struct cn_markers_remote *r, int32_t node)
{
    struct cn_broker *b = r->b;
    char host[CN_CONFIG_HOST_MAX];
    int port = -1;
    if (!cn_replica_broker_endpoint(b, node, host, sizeof host, &port))
        return NULL;
    struct mr_dest *d = r->dests;
    while (d && d->node != node)
        d = d->next;
    if (!d) {
        d = calloc(1, sizeof *d);
        if (!d)
            return NULL;
        d->node = node;
        d->next = r->dests;
        r->dests = d;
    }
    if (d->peer && d->port == port && strcmp(d->host, host) == 0)
        return d->peer;
    if (d->peer) {
        /* The broker moved (a restart on another port): its calls out
         * fail with -ECANCELED and are retried. */
        struct cn_peer *old = d->peer;
        d->peer = NULL;
        cn_peer_free(old);
    }
    struct cn_peer_opts o = {
        .host = host,
        .port = port,
        .client_id = r->client_id,
        .backoff_ms = 50,
        .backoff_max_ms = 1000,
        .max_frame_bytes = 16 << 20,
        .fail_unsent = true,
    };
    if (cn_peer_new(b->loop, &o, &d->peer) != 0) {
        d->peer = NULL;
        return NULL;
    }
    snprintf(d->host, sizeof d->host, "%s", host);
    d->port = port;
    return d->peer;
}

/* ---- local partitions --------------------------------------------------- */

static void local_unlink(struct cn_markers_remote *r, struct mr_local *l)
{
    if (l->prev)
        l->prev->next = l->next;
    else
        r->locals = l->next;
    if (l->next)
        l->next->prev = l->prev;
}

static void local_replicated(struct cn_broker *b, void *arg, int16_t kerr)
{
    struct mr_local *l = arg;
    struct cn_markers_remote *r = l->r;
    (void)b;
    if (l->item) {
        local_unlink(r, l);
        cn_mq_done(r->q, l->item, kerr, cn_clock_mono_ms());
        arm(r, 0);
    }
    free(l);
}

static void local_write(struct cn_markers_remote *r, struct cn_mq_item *it)
{
    struct cn_broker *b = r->b;
    const struct cn_mq_marker *m = &it->m;
    int64_t now = cn_clock_mono_ms();
    struct cn_partition *p = cn_partition_find(b, cn_bytes_str(m->topic),
                                               m->partition);
    /* The image says this broker leads it; publishing may not have
     * caught up yet. */
    if (!p || !cn_partition_led(b, p)) {
        cn_mq_done(r->q, it, KAFKA_NOT_LEADER_OR_FOLLOWER, now);
        return;
    }
    struct mr_local *l = calloc(1, sizeof *l);
    if (!l) {
        cn_mq_done(r->q, it, KAFKA_KAFKA_STORAGE_ERROR, now);
        return;
    }
    l->r = r;
    l->item = it;
    l->next = r->locals;
    if (r->locals)
        r->locals->prev = l;
    r->locals = l;
    int16_t kerr = cn_marker_write_replicated(b, p, CN_PART_COORDINATOR,
                                              m->producer_id,
                                              m->producer_epoch, m->commit,
                                              m->coordinator_epoch,
                                              local_replicated, l);
    if (kerr) {
        local_unlink(r, l);
        free(l);
        cn_mq_done(r->q, it, kerr, now);
    }
}

/* ---- WriteTxnMarkers ---------------------------------------------------- */

static int16_t answer_of(const struct cn_write_txn_markers_response *rs,
                         const struct cn_mq_item *it)
{
    for (int32_t i = 0; i < rs->markers_len; i++) {
        const struct cn_write_txn_markers_response_writable_txn_marker_result
            *mr = &rs->markers[i];
        if (mr->producer_id != it->m.producer_id)
            continue;
        for (int32_t j = 0; j < mr->topics_len; j++) {
            const struct
                cn_write_txn_markers_response_writable_txn_marker_topic_result
                    *t = &mr->topics[j];
            if (!cn_bytes_eq_str(t->name, it->m.topic))
                continue;
            for (int32_t k = 0; k < t->partitions_len; k++)
                if (t->partitions[k].partition_index == it->m.partition)
                    return t->partitions[k].error_code;
        }
    }
    /* The leader left it out: Kafka takes that for a broken broker.
     * Reported; the coordinator sends the round again. */
    return KAFKA_UNKNOWN_SERVER_ERROR;
}

static void on_answer(void *arg, int err, const void *response,
                      struct cn_arena *arena)
{
    struct mr_req *rq = arg;
    struct cn_markers_remote *r = rq->r;
    (void)arena;
    if (!r->stopped) {
        const struct cn_write_txn_markers_response *rs = response;
        int64_t now = cn_clock_mono_ms();
        if (err)
            CN_DEBUG("WriteTxnMarkers to broker %d: %d markers failed (%s), "
                     "retried",
                     rq->dest, (int)rq->n, cn_strerror(err));
        for (size_t i = 0; i < rq->n; i++) {
            /* No answer (timeout, connection lost, never sent): the
             * leader is looked up again and the marker sent again. */
            int16_t kerr = err ? KAFKA_REQUEST_TIMED_OUT
                               : answer_of(rs, rq->items[i]);
            if (kerr && !cn_mq_retriable(kerr))
                CN_WARN("WriteTxnMarkers to broker %d: marker of producer "
                        "%lld on %s-%d: %s",
                        rq->dest, (long long)rq->items[i]->m.producer_id,
                        rq->items[i]->m.topic, rq->items[i]->m.partition,
                        cn_kerr_name(kerr));
            cn_mq_done(r->q, rq->items[i], kerr, now);
        }
        cn_mq_answered(r->q, rq->dest);
        arm(r, 0);
    }
    free(rq);
}

/* Items of one request as a WriteTxnMarkers: one marker per producer id
 * (the queue put one result and epoch pair per producer in a request),
 * one topic entry per topic within it. */
static int build(struct cn_arena *a, struct cn_mq_item **items, size_t n,
                 struct cn_write_txn_markers_request *out)
{
    cn_write_txn_markers_request_init(out);
    struct cn_write_txn_markers_request_writable_txn_marker *ms =
        cn_arena_calloc(a, n, sizeof *ms);
    struct cn_write_txn_markers_request_writable_txn_marker_topic *ts =
        cn_arena_calloc(a, n, sizeof *ts);
    int32_t *parts = cn_arena_calloc(a, n, sizeof *parts);
    size_t *mi = cn_arena_calloc(a, n, sizeof *mi); /* item's marker */
    size_t *ti = cn_arena_calloc(a, n, sizeof *ti); /* item's topic */
    size_t *tm = cn_arena_calloc(a, n, sizeof *tm); /* topic's marker */
    size_t *tn = cn_arena_calloc(a, n, sizeof *tn); /* topic's items */
    if (!ms || !ts || !parts || !mi || !ti || !tm || !tn)
        return -1;
    size_t nm = 0, nt = 0;
    for (size_t i = 0; i < n; i++) {
        const struct cn_mq_marker *m = &items[i]->m;
        size_t j = 0;
        while (j < nm && ms[j].producer_id != m->producer_id)
            j++;
        if (j == nm) {
            cn_write_txn_markers_request_writable_txn_marker_init(&ms[j]);
            ms[j].producer_id = m->producer_id;
            ms[j].producer_epoch = m->producer_epoch;
            ms[j].transaction_result = m->commit;
            ms[j].coordinator_epoch = m->coordinator_epoch;
            nm++;
        }
        size_t t = 0;
        while (t < nt &&
               !(tm[t] == j && cn_bytes_eq_str(ts[t].name, m->topic)))
            t++;
        if (t == nt) {
            cn_write_txn_markers_request_writable_txn_marker_topic_init(
                &ts[t]);
            ts[t].name = cn_bytes_str(m->topic);
            tm[t] = j;
            nt++;
        }
        mi[i] = j;
        ti[i] = t;
        tn[t]++;
    }
    /* The topic entries laid out contiguously per marker, each with its
     * run of partitions. */
    struct cn_write_txn_markers_request_writable_txn_marker_topic *lay =
        cn_arena_calloc(a, nt, sizeof *lay);
    size_t *pos = cn_arena_calloc(a, nt, sizeof *pos); /* topic -> lay */
    if (!lay || !pos)
        return -1;
    size_t k = 0, off = 0;
    for (size_t j = 0; j < nm; j++) {
        ms[j].topics = &lay[k];
        ms[j].topics_len = 0;
        for (size_t t = 0; t < nt; t++) {
            if (tm[t] != j)
                continue;
            pos[t] = k;
            lay[k] = ts[t];
            lay[k].partition_indexes = &parts[off];
            lay[k].partition_indexes_len = 0;
            off += tn[t];
            ms[j].topics_len++;
            k++;
        }
    }
    for (size_t i = 0; i < n; i++) {
        struct cn_write_txn_markers_request_writable_txn_marker_topic *t =
            &lay[pos[ti[i]]];
        t->partition_indexes[t->partition_indexes_len++] =
            items[i]->m.partition;
    }
    out->markers = ms;
    out->markers_len = (int32_t)nm;
    return 0;
}

static void send_to(struct cn_markers_remote *r, int32_t dest)
{
    struct mr_req *rq = malloc(sizeof *rq + MR_BATCH_MAX * sizeof(void *));
    if (!rq)
        return; /* tried again at the next kick */
    rq->r = r;
    rq->dest = dest;
    rq->n = cn_mq_take(r->q, dest, rq->items, MR_BATCH_MAX);
    if (rq->n == 0) {
        free(rq);
        return;
    }
    struct cn_peer *peer = peer_for(r, dest);
    struct cn_arena arena;
    cn_arena_init(&arena);
    struct cn_write_txn_markers_request w;
    int rc = -1;
    if (peer && build(&arena, rq->items, rq->n, &w) == 0)
        rc = cn_peer_call(peer, CN_API_WRITE_TXN_MARKERS, MR_VERSION, &w,
                          MR_TIMEOUT_MS, on_answer, rq);
    cn_arena_fini(&arena);
    if (rc != 0) {
        /* No endpoint for it (yet), or out of memory: as a failed
         * request, retried after the backoff. */
        int64_t now = cn_clock_mono_ms();
        for (size_t i = 0; i < rq->n; i++)
            cn_mq_done(r->q, rq->items[i], KAFKA_REQUEST_TIMED_OUT, now);
        cn_mq_answered(r->q, dest);
        free(rq);
    }
}

/* ---- the kick ------------------------------------------------------------ */

static void deliver(struct cn_markers_remote *r)
{
    void *owner;
    size_t i;
    int16_t kerr;
    while (cn_mq_pop_result(r->q, &owner, &i, &kerr)) {
        struct mr_owner *o = owner;
        /* The owner lives until its last result: the callback may send
         * again (that only queues). */
        o->result(r->b, o->arg, i, kerr);
        if (--o->refs == 0)
            free(o);
    }
}

static void kick(struct cn_markers_remote *r)
{
    if (r->stopped)
        return;
    struct cn_mq_view v = {view_leader, view_coordinates, r->b, r->b->node_id};
    int64_t now = cn_clock_mono_ms();
    struct cn_mq_item *local[64];
    size_t nl;
    do {
        nl = cn_mq_route(r->q, &v, now, local, 64);
        for (size_t i = 0; i < nl; i++)
            local_write(r, local[i]);
    } while (nl == 64);
    /* One pass: a destination left over (more than fit here, or a
     * request that could not be made) goes at the next kick. */
    int32_t dests[64];
    size_t nd = cn_mq_ready(r->q, dests, 64);
    for (size_t i = 0; i < nd; i++)
        send_to(r, dests[i]);
    if (cn_mq_ready(r->q, dests, 1) > 0)
        arm(r, now + CN_MQ_RETRY_BACKOFF_MS);
    deliver(r);
    arm(r, cn_mq_next_due(r->q));
}

static void on_timer(uv_timer_t *t)
{
    struct cn_markers_remote *r = t->data;
    r->timer_at = INT64_MAX;
    kick(r);
}

static void cluster_send(struct cn_broker *b, const struct cn_marker_send *s)
{
    struct cn_markers_remote *r = remote_get(b);
    struct mr_owner *o = r ? calloc(1, sizeof *o) : NULL;
    if (!o) {
        for (size_t i = 0; i < s->n; i++)
            s->result(b, s->arg, i, KAFKA_KAFKA_STORAGE_ERROR);
        return;
    }
    o->result = s->result;
    o->arg = s->arg;
    o->refs = s->n;
    int64_t now = cn_clock_mono_ms();
    for (size_t i = 0; i < s->n; i++) {
        struct cn_mq_marker m = {
            .producer_id = s->producer_id,
            .producer_epoch = s->producer_epoch,
            .commit = s->commit,
            .coordinator_epoch = s->coordinator_epoch,
            .txn_partition = s->txn_partition,
            .topic = s->tps[i].topic,
            .partition = s->tps[i].partition,
        };
        if (!cn_mq_add(r->q, &m, o, i, now)) {
            s->result(b, s->arg, i, KAFKA_KAFKA_STORAGE_ERROR);
            if (--o->refs == 0)
                free(o);
        }
    }
    arm(r, 0);
}

const struct cn_marker_channel cn_marker_channel_cluster = {cluster_send};

void cn_markers_remote_counts(const struct cn_broker *b,
                              struct cn_markers_remote_counts *out)
{
    memset(out, 0, sizeof *out);
    const struct cn_markers_remote *r = b->markers_remote;
    if (!r)
        return;
    struct cn_mq_stats st;
    cn_mq_stats(r->q, &st);
    out->unknown_destination = st.unknown_destination;
    out->retry_waiting = st.retry_waiting;
    out->requests = st.requests;
    out->retries = st.retries;
}

static void on_closed(uv_handle_t *h)
{
    struct cn_markers_remote *r = h->data;
    cn_mq_free(r->q);
    free(r);
}

void cn_markers_remote_stop(struct cn_broker *b)
{
    struct cn_markers_remote *r = b->markers_remote;
    if (!r)
        return;
    /* Local writes still waiting drop their late answer. */
    for (struct mr_local *l = r->locals; l; l = l->next)
        l->item = NULL;
    r->locals = NULL;
    /* Every marker not yet answered fails now (the coordinator, stopped
     * before this, ignores them; its send's memory is freed). */
    cn_mq_fail_all(r->q, KAFKA_NOT_COORDINATOR);
    deliver(r);
    r->stopped = true;
    /* Their calls end with -ECANCELED inside cn_peer_free: on_answer
     * only frees them now. */
    for (struct mr_dest *d = r->dests, *next; d; d = next) {
        next = d->next;
        if (d->peer)
            cn_peer_free(d->peer);
        free(d);
    }
    r->dests = NULL;
    uv_timer_stop(&r->timer);
    uv_close((uv_handle_t *)&r->timer, on_closed);
    b->markers_remote = NULL;
}
