/*
 * txn_remote.c - KIP-890 checks asked of another broker's coordinator;
 * see txn_remote.h.
 *
 * A check waits in its destination's list until no request is in flight
 * there, then goes with every other waiting check in one
 * AddPartitionsToTxn.  Answers are handed back through a zero timer, so
 * no caller's done runs inside its own call (or inside another caller's
 * call that happened to replace its check); an answer from the
 * coordinator runs them at once, from the peer's callback.
 */
#include "node/replica.h"
#include "node/txn_remote.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/say.h"
#include "meta/image.h"
#include "node/peer.h"
#include "node/quorum.h"
#include "proto/gen/api.h"
#include "proto/gen/msgs.h"
#include "proto/kerr.h"
#include "txn/coord.h"
#include "txn/txn_state.h"

/* Kafka's AddPartitionsToTxnRequest.Builder.forBroker asks for the latest
 * version; 5 only adds TRANSACTION_ABORTABLE to what 4 may answer, and
 * VerifyOnly says, per transaction, verify or add. */
#define TR_VERSION 5
/* Kafka's request.timeout.ms, which the manager's send thread uses. */
#define TR_TIMEOUT_MS 30000

struct tr_dest;

struct tr_check {
    struct tr_dest *d;
    char *txn_id; /* owned copy */
    int64_t producer_id;
    int16_t producer_epoch;
    bool add;
    struct cn_txn_remote_tp *tps; /* the caller's */
    size_t n;
    void (*done)(struct cn_broker *b, void *arg);
    void *arg;
    struct tr_check *next;
};

struct tr_dest {
    struct cn_txn_remote *r;
    int32_t node;
    char host[CN_CONFIG_HOST_MAX];
    int port;
    struct cn_peer *peer;
    struct tr_check *waiting;  /* not sent yet, in arrival order */
    struct tr_check *inflight; /* the request out, or NULL */
    struct tr_dest *next;
};

struct cn_txn_remote {
    struct cn_broker *b;
    struct tr_dest *dests;
    struct tr_check *answered; /* errors set, done due from the timer */
    uv_timer_t timer;
    bool stopping;
    char client_id[48];
};

/* ---- the decisions ------------------------------------------------------- */

bool cn_txn_remote_batch_needs_check(const struct cn_batch_hdr *hdr,
                                     const struct cn_pentry_info *pe)
{
    if (!cn_batch_has_producer_id(hdr) || !cn_batch_is_transactional(hdr))
        return false;
    bool open = pe && pe->producer_id == hdr->producer_id &&
                pe->txn_first_offset >= 0 && pe->epoch == hdr->producer_epoch;
    return !open;
}

int16_t cn_txn_remote_coord_error(int16_t err, bool default_error)
{
    /* AddPartitionsToTxnManager.AddPartitionsToTxnHandler.onComplete. */
    if (err == KAFKA_PRODUCER_FENCED)
        return KAFKA_INVALID_PRODUCER_EPOCH;
    if (err == KAFKA_TRANSACTION_ABORTABLE && default_error)
        return KAFKA_INVALID_TXN_STATE;
    return err;
}

int16_t cn_txn_remote_produce_error(int16_t err, bool add)
{
    /* ReplicaManager.appendRecords' postVerificationCallback (Kafka 4.x):
     * "Transaction verification can fail with a retriable error that
     * older clients may not retry correctly ... We pick
     * NOT_ENOUGH_REPLICAS because it does not trigger a metadata
     * refresh"; CONCURRENT_TRANSACTIONS stays for TV2, common during a
     * commit and clearer to the client. */
    switch (err) {
    case KAFKA_NETWORK_EXCEPTION:
    case KAFKA_COORDINATOR_LOAD_IN_PROGRESS:
    case KAFKA_COORDINATOR_NOT_AVAILABLE:
    case KAFKA_NOT_COORDINATOR: return KAFKA_NOT_ENOUGH_REPLICAS;
    case KAFKA_CONCURRENT_TRANSACTIONS:
        return add ? err : KAFKA_NOT_ENOUGH_REPLICAS;
    default: return err;
    }
}

/* ---- where the coordinator is -------------------------------------------- */

/* The image's leader of the id's __transaction_state partition, if it is
 * a registered, unfenced broker (Kafka's getTransactionCoordinator:
 * metadataCache.getAliveBrokerNode); -1 otherwise. */
static int32_t coordinator_of(struct cn_broker *b, struct cn_bytes txn_id)
{
    if (!b->cfg->cluster_mode || !b->quorum)
        return -1;
    const struct cn_image *img = cn_quorum_image(b->quorum);
    const struct cn_image_topic *t =
        img ? cn_image_topic_find(img, cn_bytes_str(CN_TXN_TOPIC)) : NULL;
    if (!t || t->nparts <= 0)
        return -1;
    int32_t part = cn_txn_partition_for(
        txn_id.len > 0 ? txn_id.ptr : (const uint8_t *)"",
        txn_id.len > 0 ? (size_t)txn_id.len : 0, t->nparts);
    if (part < 0 || part >= t->nparts)
        return -1;
    int32_t leader = t->parts[part].leader;
    if (leader < 0)
        return -1;
    const struct cn_image_broker *ib = cn_image_broker_find(img, leader);
    if (!ib || ib->fenced)
        return -1;
    return leader;
}

bool cn_txn_remote_coordinator_is_remote(struct cn_broker *b,
                                         struct cn_bytes txn_id, int32_t *node)
{
    int32_t c = coordinator_of(b, txn_id);
    if (node)
        *node = c;
    return c >= 0 && c != b->node_id;
}

/* ---- answering ------------------------------------------------------------ */

static void set_all(struct tr_check *c, int16_t err)
{
    for (size_t i = 0; i < c->n; i++)
        c->tps[i].error = err;
}

static void check_free(struct tr_check *c)
{
    free(c->txn_id);
    free(c);
}

/* done now: from the timer, or at stop. */
static void check_done(struct cn_broker *b, struct tr_check *c)
{
    void (*done)(struct cn_broker *, void *) = c->done;
    void *arg = c->arg;
    check_free(c);
    done(b, arg);
}

static void on_timer(uv_timer_t *t);

/* c is answered (its errors set): its done runs from the timer, or at
 * once (now: from the answer's callback, which no caller is inside, so
 * the append follows the coordinator's word with nothing between; or
 * while stopping, which must not return before). */
static void check_answer(struct cn_txn_remote *r, struct tr_check *c, bool now)
{
    if (now || r->stopping) {
        check_done(r->b, c);
        return;
    }
    c->next = NULL;
    struct tr_check **tail = &r->answered;
    while (*tail)
        tail = &(*tail)->next;
    *tail = c;
    uv_timer_start(&r->timer, on_timer, 0, 0);
}

static void on_timer(uv_timer_t *t)
{
    struct cn_txn_remote *r = t->data;
    /* A done may ask again (a new check lands in answered and restarts
     * the timer): take the list first. */
    struct tr_check *list = r->answered;
    r->answered = NULL;
    while (list) {
        struct tr_check *c = list;
        list = c->next;
        check_done(r->b, c);
    }
}

static void answer_list(struct cn_txn_remote *r, struct tr_check *list,
                        int16_t err, bool now)
{
    while (list) {
        struct tr_check *c = list;
        list = c->next;
        set_all(c, err);
        check_answer(r, c, now);
    }
}

/* ---- sending ----------------------------------------------------------- */

static void dest_send(struct tr_dest *d);

typedef struct cn_add_partitions_to_txn_response_add_partitions_to_txn_result
    tr_result;

/* The answer's codes for one check.  A partition the answer does not name
 * stays unverified (NETWORK_EXCEPTION: the producer retries), rather than
 * taken as verified. */
static void read_result(struct tr_check *c, const tr_result *res)
{
    for (int32_t i = 0; i < res->topic_results_len; i++) {
        const struct
            cn_add_partitions_to_txn_response_add_partitions_to_txn_topic_result
                *tr = &res->topic_results[i];
        for (int32_t j = 0; j < tr->results_by_partition_len; j++) {
            const struct
                cn_add_partitions_to_txn_response_add_partitions_to_txn_partition_result
                    *pr = &tr->results_by_partition[j];
            for (size_t k = 0; k < c->n; k++)
                if (c->tps[k].partition == pr->partition_index &&
                    cn_bytes_eq_str(tr->name, c->tps[k].topic))
                    c->tps[k].error = pr->partition_error_code;
        }
    }
}

static void on_answer(void *arg, int err, const void *response,
                      struct cn_arena *arena)
{
    struct tr_dest *d = arg;
    struct cn_txn_remote *r = d->r;
    struct tr_check *list = d->inflight;
    d->inflight = NULL;
    (void)arena;
    if (err) {
        /* Disconnected, timed out, not decodable, or stopping: Kafka's
         * manager answers NETWORK_EXCEPTION. */
        CN_DEBUG("AddPartitionsToTxn to broker %d failed: %s", (int)d->node,
                 cn_strerror(err));
        answer_list(r, list, KAFKA_NETWORK_EXCEPTION, true);
    } else {
        const struct cn_add_partitions_to_txn_response *rs = response;
        if (rs->error_code) {
            /* The client must not see CLUSTER_AUTHORIZATION_FAILED: the
             * verification did not complete (Kafka: INVALID_TXN_STATE). */
            answer_list(r, list,
                        rs->error_code == KAFKA_CLUSTER_AUTHORIZATION_FAILED
                            ? KAFKA_INVALID_TXN_STATE
                            : rs->error_code,
                        true);
        } else {
            while (list) {
                struct tr_check *c = list;
                list = c->next;
                set_all(c, KAFKA_NETWORK_EXCEPTION);
                for (int32_t i = 0; i < rs->results_by_transaction_len; i++)
                    if (cn_bytes_eq_str(
                            rs->results_by_transaction[i].transactional_id,
                            c->txn_id))
                        read_result(c, &rs->results_by_transaction[i]);
                check_answer(r, c, true);
            }
        }
    }
    if (!r->stopping)
        dest_send(d);
}

/* The connection to d's broker where the image has it now; false when the
 * broker has no address there. */
static bool dest_peer(struct tr_dest *d)
{
    struct cn_broker *b = d->r->b;
    char host[CN_CONFIG_HOST_MAX];
    int port = 0;
    if (!cn_replica_broker_endpoint(b, d->node, host, sizeof host, &port))
        return false;
    if (d->peer && port == d->port && strcmp(host, d->host) == 0)
        return true;
    if (d->peer) {
        /* Nothing is in flight (dest_send checked): nothing fails. */
        struct cn_peer *old = d->peer;
        d->peer = NULL;
        cn_peer_free(old);
    }
    struct cn_peer_opts o = {
        .host = host,
        .port = port,
        .client_id = d->r->client_id,
        .backoff_ms = 50,
        .backoff_max_ms = 1000,
        .max_frame_bytes = b->cfg->socket_request_max_bytes,
        .fail_unsent = true,
    };
    if (cn_peer_new(b->loop, &o, &d->peer) != 0) {
        d->peer = NULL;
        return false;
    }
    snprintf(d->host, sizeof d->host, "%s", host);
    d->port = port;
    return true;
}

typedef struct
    cn_add_partitions_to_txn_request_add_partitions_to_txn_transaction tr_txn;
typedef struct cn_add_partitions_to_txn_request_add_partitions_to_txn_topic
    tr_topic;

/* One transaction of the request: c's partitions grouped by topic. */
static bool build_txn(struct cn_arena *a, const struct tr_check *c, tr_txn *t)
{
    memset(t, 0, sizeof *t);
    t->transactional_id = cn_bytes_str(c->txn_id);
    t->producer_id = c->producer_id;
    t->producer_epoch = c->producer_epoch;
    t->verify_only = !c->add;
    t->topics = cn_arena_calloc(a, c->n + 1, sizeof *t->topics);
    if (!t->topics)
        return false;
    for (size_t i = 0; i < c->n; i++) {
        tr_topic *tt = NULL;
        for (int32_t j = 0; j < t->topics_len && !tt; j++)
            if (cn_bytes_eq_str(t->topics[j].name, c->tps[i].topic))
                tt = &t->topics[j];
        if (!tt) {
            tt = &t->topics[t->topics_len++];
            tt->name = cn_bytes_str(c->tps[i].topic);
            tt->partitions = cn_arena_calloc(a, c->n + 1,
                                             sizeof *tt->partitions);
            if (!tt->partitions)
                return false;
        }
        tt->partitions[tt->partitions_len++] = c->tps[i].partition;
    }
    return true;
}

/* Sends what waits for d, unless a request is out already. */
static void dest_send(struct tr_dest *d)
{
    struct cn_txn_remote *r = d->r;
    if (d->inflight || !d->waiting)
        return;
    struct tr_check *list = d->waiting;
    d->waiting = NULL;
    if (!dest_peer(d)) {
        /* Registered without an address we can use: no coordinator. */
        answer_list(r, list, KAFKA_COORDINATOR_NOT_AVAILABLE, false);
        return;
    }
    struct cn_arena a;
    cn_arena_init(&a);
    size_t nt = 0;
    for (struct tr_check *c = list; c; c = c->next)
        nt++;
    struct cn_add_partitions_to_txn_request rq;
    cn_add_partitions_to_txn_request_init(&rq);
    rq.transactions = cn_arena_calloc(&a, nt + 1, sizeof *rq.transactions);
    bool ok = rq.transactions != NULL;
    for (struct tr_check *c = list; c && ok; c = c->next)
        ok = build_txn(&a, c, &rq.transactions[rq.transactions_len++]);
    d->inflight = list;
    int err = ok ? cn_peer_call(d->peer, CN_API_ADD_PARTITIONS_TO_TXN,
                                TR_VERSION, &rq, TR_TIMEOUT_MS, on_answer, d)
                 : CN_ENOMEM;
    cn_arena_fini(&a);
    if (err) {
        d->inflight = NULL;
        CN_WARN("AddPartitionsToTxn to broker %d not sent: %s", (int)d->node,
                cn_strerror(err));
        answer_list(r, list, KAFKA_NETWORK_EXCEPTION, false);
    }
}

/* ---- the API ------------------------------------------------------------- */

static struct cn_txn_remote *remote_get(struct cn_broker *b)
{
    if (b->txn_remote)
        return b->txn_remote;
    struct cn_txn_remote *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->b = b;
    snprintf(r->client_id, sizeof r->client_id, "cairn-txn-verifier-%d",
             (int)b->node_id);
    uv_timer_init(b->loop, &r->timer);
    r->timer.data = r;
    b->txn_remote = r;
    return r;
}

static struct tr_dest *dest_get(struct cn_txn_remote *r, int32_t node)
{
    for (struct tr_dest *d = r->dests; d; d = d->next)
        if (d->node == node)
            return d;
    struct tr_dest *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    d->r = r;
    d->node = node;
    d->port = -1;
    d->next = r->dests;
    r->dests = d;
    return d;
}

/* Kafka's addTxnData: at most one waiting check per transactional id.
 * False: c is answered (fenced by the waiting one). */
static bool replace_waiting(struct cn_txn_remote *r, struct tr_dest *d,
                            struct tr_check *c)
{
    for (struct tr_check **pp = &d->waiting; *pp; pp = &(*pp)->next) {
        struct tr_check *old = *pp;
        if (strcmp(old->txn_id, c->txn_id) != 0)
            continue;
        if (old->producer_epoch > c->producer_epoch) {
            set_all(c, KAFKA_INVALID_PRODUCER_EPOCH);
            check_answer(r, c, false);
            return false;
        }
        *pp = old->next;
        set_all(old, old->producer_epoch < c->producer_epoch
                         ? KAFKA_INVALID_PRODUCER_EPOCH
                         : KAFKA_NETWORK_EXCEPTION);
        check_answer(r, old, false);
        return true;
    }
    return true;
}

bool cn_txn_remote_check(struct cn_broker *b, struct cn_bytes txn_id,
                         int64_t producer_id, int16_t producer_epoch, bool add,
                         struct cn_txn_remote_tp *tps, size_t n,
                         void (*done)(struct cn_broker *b, void *arg),
                         void *arg)
{
    for (size_t i = 0; i < n; i++)
        tps[i].error = KAFKA_COORDINATOR_NOT_AVAILABLE;
    int32_t node = coordinator_of(b, txn_id);
    if (node < 0 || node == b->node_id || b->stopping || n == 0 ||
        txn_id.len <= 0)
        return false;
    struct cn_txn_remote *r = remote_get(b);
    if (!r || r->stopping)
        return false;
    struct tr_dest *d = dest_get(r, node);
    struct tr_check *c = d ? calloc(1, sizeof *c) : NULL;
    char *id = c ? malloc((size_t)txn_id.len + 1) : NULL;
    if (!id) {
        free(c);
        return false;
    }
    memcpy(id, txn_id.ptr, (size_t)txn_id.len);
    id[txn_id.len] = '\0';
    *c = (struct tr_check){.d = d,
                           .txn_id = id,
                           .producer_id = producer_id,
                           .producer_epoch = producer_epoch,
                           .add = add,
                           .tps = tps,
                           .n = n,
                           .done = done,
                           .arg = arg};
    if (!replace_waiting(r, d, c))
        return true; /* answered from the timer */
    struct tr_check **tail = &d->waiting;
    while (*tail)
        tail = &(*tail)->next;
    *tail = c;
    dest_send(d);
    return true;
}

static void on_timer_closed(uv_handle_t *h)
{
    free(h->data);
}

void cn_txn_remote_stop(struct cn_broker *b)
{
    struct cn_txn_remote *r = b->txn_remote;
    if (!r)
        return;
    r->stopping = true;
    /* Answered already: their done now. */
    on_timer(&r->timer);
    while (r->dests) {
        struct tr_dest *d = r->dests;
        r->dests = d->next;
        struct tr_check *list = d->waiting;
        d->waiting = NULL;
        answer_list(r, list, KAFKA_NETWORK_EXCEPTION, true);
        /* The request in flight fails with -ECANCELED: on_answer answers
         * its checks, and sends nothing more while stopping. */
        if (d->peer)
            cn_peer_free(d->peer);
        else
            answer_list(r, d->inflight, KAFKA_NETWORK_EXCEPTION, true);
        free(d);
    }
    b->txn_remote = NULL;
    uv_timer_stop(&r->timer);
    uv_close((uv_handle_t *)&r->timer, on_timer_closed);
}
