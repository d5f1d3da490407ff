/*
 * txn_exec.c - the transaction coordinator's executor; see txn_exec.h.
 *
 * One feed function steps the machine: it reads the clocks, steps, and
 * carries out the actions in order (append and sync a record, send
 * markers, answer, ask for producer ids, arm the timer).  Carrying them
 * out can produce events at once (a sync that completes inside the
 * append when group commit is off; the local marker channel's results
 * before its send returns): those are queued, their strings copied, and
 * stepped after the current step's actions are done, in order.  The
 * machine is never stepped from inside its own step.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/failpoint.h"
#include "base/say.h"
#include "node/istore.h"
#include "node/markers.h"
#include "proto/batch.h"
#include "proto/kerr.h"
#include "txn/txn_log.h"
#include "txn/txn_state.h"
#include "node/txn_exec.h"

/* A request waits at most this long for its busy id (then
 * CONCURRENT_TRANSACTIONS), and failed markers are sent again after this
 * long. */
#define PARK_MAX_MS 1000
#define MARKER_RETRY_MS 1000
/* Markers carry the coordinator epoch; one broker has always led. */
#define COORDINATOR_EPOCH 0

/* An event waiting for the step in progress to finish. */
struct exec_q {
    struct cn_txn_event ev;
    int32_t part;          /* WRITTEN: the append's partition */
    struct cn_arena arena; /* the event's strings and partitions */
    void *mem;             /* freed with it: itself, or the write it is in */
    struct exec_q *next;
};

struct cn_txn_exec {
    struct cn_broker *b;
    struct cn_txn_coord *coord;
    struct cn_txn_actions acts;
    uv_timer_t *timer; /* freed in its close callback */
    int64_t timer_at;  /* monotonic ms it is armed for; INT64_MAX none */
    bool draining;     /* a step's actions are being carried out */
    struct exec_q *head, **tail;
    struct cn_istore *store; /* __transaction_state */
    int32_t nparts;          /* its partitions */
    bool *compact_due;       /* per partition: a durable WRITTEN stepped */
    /* Cluster mode, per partition: the leader epoch it was led at, -1
     * when this broker does not coordinate it (cn_txn_exec_lead). */
    int32_t *led_epoch;
    const struct cn_marker_channel *markers;
    const struct cn_txn_verifier *verifier;
};

/* What a step said besides its actions. */
struct step_out {
    bool stepped;
    bool taken;
    int16_t result;
    bool op_taken;
    size_t resumed;
};

/* A record being made durable. */
struct exec_write {
    struct cn_istore_wait iw; /* first: the store's handle */
    struct cn_broker *b;
    int32_t part;
    uint64_t seq;
    /* Its WRITTEN waits here while a step is in progress: queueing it
     * cannot fail, as a lost one would let a checkpoint replace the
     * durable record with older state (checkpoint()). */
    struct exec_q q;
    char id[];
};

/* One send through the marker channel and its results still to come. */
struct exec_send {
    uint64_t seq;
    size_t base;    /* index of its first partition in the action's */
    size_t pending; /* results not yet in */
    char id[];
};

static void exec_feed(struct cn_txn_exec *x, const struct cn_txn_event *ev,
                      int32_t part, struct step_out *out);

/* ---- configuration ------------------------------------------------------ */

static void config_of(const struct cn_broker *b, int32_t nparts,
                      struct cn_txn_config *out)
{
    const struct cn_config *cfg = b->cfg;
    memset(out, 0, sizeof *out);
    out->nparts = nparts;
    out->transaction_version = (int16_t)cfg->cairn_transaction_version;
    out->verification_enable = cfg->transaction_partition_verification_enable;
    out->max_timeout_ms = cfg->transaction_max_timeout_ms;
    out->id_expiration_ms = cfg->transactional_id_expiration_ms;
    out->abort_check_interval_ms =
        cfg->transaction_abort_timed_out_transaction_cleanup_interval_ms;
    out->expiry_check_interval_ms =
        cfg->transaction_remove_expired_transaction_cleanup_interval_ms;
    out->park_max_ms = PARK_MAX_MS;
    out->marker_retry_ms = MARKER_RETRY_MS;
}

/* ---- the queue --------------------------------------------------------- */

static const char *q_str(struct cn_arena *a, const char *s, bool *nomem)
{
    if (!s)
        return NULL;
    char *c = cn_arena_strdup(a, cn_bytes_str(s));
    if (!c)
        *nomem = true;
    return c;
}

/* A copy of ev whose strings live in q's arena. */
static int q_copy(struct exec_q *q, const struct cn_txn_event *ev)
{
    bool nomem = false;
    q->ev = *ev;
    switch (ev->kind) {
    case CN_TXE_REQUEST: {
        struct cn_txn_request *r = &q->ev.u.request;
        r->transactional_id = q_str(&q->arena, r->transactional_id, &nomem);
        struct cn_txn_tp *tps = cn_arena_calloc(&q->arena, r->ntps + 1,
                                                sizeof *tps);
        if (!tps)
            return CN_ENOMEM;
        for (size_t i = 0; i < r->ntps; i++) {
            tps[i].topic = (char *)q_str(&q->arena, r->tps[i].topic, &nomem);
            tps[i].partition = r->tps[i].partition;
        }
        r->tps = tps;
        break;
    }
    case CN_TXE_WRITTEN:
        q->ev.u.written.id = q_str(&q->arena, ev->u.written.id, &nomem);
        break;
    case CN_TXE_MARKER_RESULT:
        q->ev.u.marker.id = q_str(&q->arena, ev->u.marker.id, &nomem);
        break;
    case CN_TXE_OPERATOR_ABORT:
        q->ev.u.op.topic = q_str(&q->arena, ev->u.op.topic, &nomem);
        break;
    default: break;
    }
    return nomem ? CN_ENOMEM : 0;
}

static void q_link(struct cn_txn_exec *x, struct exec_q *q)
{
    q->next = NULL;
    *x->tail = q;
    x->tail = &q->next;
}

static void q_free(struct exec_q *q)
{
    cn_arena_fini(&q->arena);
    free(q->mem);
}

static void enqueue(struct cn_txn_exec *x, const struct cn_txn_event *ev,
                    int32_t part)
{
    /* The fail point stands for running out of memory here. */
    struct exec_q *q = CN_FAILPOINT("txn.enqueue") ? NULL
                                                   : calloc(1, sizeof *q);
    if (q) {
        cn_arena_init(&q->arena);
        q->mem = q;
        q->part = part;
        if (q_copy(q, ev) != 0) {
            cn_arena_fini(&q->arena);
            free(q);
            q = NULL;
        }
    }
    if (!q) {
        /* Lost: the id it concerns stays busy until the next start. */
        CN_ERROR("transaction coordinator: out of memory queueing an event "
                 "(kind %d)",
                 (int)ev->kind);
        return;
    }
    q_link(x, q);
}

/* ---- carrying out actions ---------------------------------------------- */

static struct cn_txn_event written_event(const char *id, uint64_t seq,
                                         int16_t err)
{
    struct cn_txn_event ev = {.kind = CN_TXE_WRITTEN};
    ev.u.written.id = id;
    ev.u.written.seq = seq;
    ev.u.written.err = err;
    return ev;
}

static void feed_written(struct cn_txn_exec *x, const char *id, uint64_t seq,
                         int32_t part, int16_t err)
{
    struct cn_txn_event ev = written_event(id, seq, err);
    exec_feed(x, &ev, part, NULL);
}

/* What a failed write of __transaction_state means to the machine (and
 * to the client waiting on it), as Kafka's TransactionStateManager maps
 * its append errors: another leader has the partition -> NOT_COORDINATOR
 * (the client looks for the coordinator again); too few in-sync replicas
 * or none in time, a failed sync (the log directory is offline: the
 * record is not known to be durable) -> COORDINATOR_NOT_AVAILABLE, which
 * clients retry. */
static int16_t written_kerr(int err)
{
    switch (err) {
    case 0: return KAFKA_NONE;
    case CN_ENOTLEADER: return KAFKA_NOT_COORDINATOR;
    default: return KAFKA_COORDINATOR_NOT_AVAILABLE;
    }
}

static void write_done(struct cn_istore_wait *iw, int err)
{
    struct exec_write *w = (struct exec_write *)iw;
    struct cn_txn_exec *x = w->b->txn;
    int16_t kerr = written_kerr(err);
    if (x && x->draining) {
        struct exec_q *q = &w->q;
        cn_arena_init(&q->arena);
        q->mem = w;
        q->part = w->part;
        q->ev = written_event(w->id, w->seq, kerr);
        q_link(x, q);
        return;
    }
    if (x)
        feed_written(x, w->id, w->seq, w->part, kerr);
    free(w);
}

static void written_failed(struct cn_txn_exec *x, const char *id, uint64_t seq,
                           int32_t part, int err)
{
    feed_written(x, id, seq, part, written_kerr(err));
}

/* The record appended to its partition and synced whatever the flush
 * policy for data says. */
static void do_append(struct cn_txn_exec *x, int32_t part, const char *id,
                      uint64_t seq, struct cn_bytes key, struct cn_bytes value)
{
    /* Shutting down: nothing more is written; a decided transaction is
     * finished by the next start's recovery. */
    size_t idlen = strlen(id);
    struct exec_write *w = x->b->stopping ? NULL
                                          : calloc(1, sizeof *w + idlen + 1);
    if (!w) {
        written_failed(x, id, seq, part, CN_ENOMEM);
        return;
    }
    w->iw.done = write_done;
    w->b = x->b;
    w->part = part;
    w->seq = seq;
    memcpy(w->id, id, idlen + 1);
    /* write_done may run before this returns (group commit off): it
     * queues its event. */
    int rc = cn_istore_write(x->store, part, &key, &value, 1, -1, -1, &w->iw);
    if (rc) {
        free(w);
        written_failed(x, id, seq, part, rc);
    }
}

static void feed_marker(struct cn_txn_exec *x, const char *id, uint64_t seq,
                        size_t i, int16_t err)
{
    struct cn_txn_event ev = {.kind = CN_TXE_MARKER_RESULT};
    ev.u.marker.id = id;
    ev.u.marker.seq = seq;
    ev.u.marker.i = i;
    ev.u.marker.err = err;
    exec_feed(x, &ev, -1, NULL);
}

static void marker_result(struct cn_broker *b, void *arg, size_t i,
                          int16_t kerr)
{
    struct exec_send *s = arg;
    if (b->txn)
        feed_marker(b->txn, s->id, s->seq, s->base + i, kerr);
    if (--s->pending == 0)
        free(s);
}

/* Partitions [from, from + n) of the action get an error without being
 * sent (the log directory is offline, or a fail point). */
static void markers_fail(struct cn_txn_exec *x, const char *id, uint64_t seq,
                         size_t from, size_t n)
{
    for (size_t i = from; i < from + n; i++)
        feed_marker(x, id, seq, i, KAFKA_KAFKA_STORAGE_ERROR);
}

static void send_some(struct cn_txn_exec *x, struct cn_marker_send *s,
                      const char *id, uint64_t seq, size_t base)
{
    size_t idlen = strlen(id);
    struct exec_send *es = calloc(1, sizeof *es + idlen + 1);
    if (!es) {
        markers_fail(x, id, seq, base, s->n);
        return;
    }
    es->seq = seq;
    es->base = base;
    es->pending = s->n;
    memcpy(es->id, id, idlen + 1);
    s->arg = es;
    x->markers->send(x->b, s);
}

static void do_markers(struct cn_txn_exec *x, const struct cn_txn_action *a)
{
    const char *id = a->u.markers.id;
    uint64_t seq = a->u.markers.seq;
    size_t n = a->u.markers.n;
    /* Decision durable, no marker written: the transaction stays busy
     * until the next start's recovery finishes it. */
    if (a->u.markers.first_after_decision &&
        CN_FAILPOINT("txn.after_prepare_sync"))
        return;
    if (n == 0)
        return;
    if (x->b->log_dir_offline) {
        markers_fail(x, id, seq, 0, n);
        return;
    }
    struct cn_marker_tp *tps = calloc(n, sizeof *tps);
    if (!tps) {
        markers_fail(x, id, seq, 0, n);
        return;
    }
    for (size_t i = 0; i < n; i++)
        tps[i] = (struct cn_marker_tp){a->u.markers.tps[i].topic,
                                       a->u.markers.tps[i].partition};
    struct cn_marker_send s = {
        .producer_id = a->u.markers.producer_id,
        .producer_epoch = a->u.markers.producer_epoch,
        .commit = a->u.markers.commit,
        .coordinator_epoch = a->u.markers.coordinator_epoch,
        .txn_partition = cn_txn_partition_for((const uint8_t *)id, strlen(id),
                                              x->nparts),
        .tps = tps,
        .n = n,
        .result = marker_result,
    };
    size_t first = 0;
    if (n > 1) {
        /* The first marker alone, so a crash can be planted between it
         * and the others. */
        s.n = 1;
        send_some(x, &s, id, seq, 0);
        if (CN_FAILPOINT("txn.after_some_markers")) {
            markers_fail(x, id, seq, 1, n - 1);
            free(tps);
            return;
        }
        first = 1;
        s.tps = tps + 1;
        s.n = n - 1;
    }
    send_some(x, &s, id, seq, first);
    free(tps);
}

static void do_actions(struct cn_txn_exec *x)
{
    const struct cn_txn_actions *acts = &x->acts;
    for (size_t i = 0; i < acts->n; i++) {
        const struct cn_txn_action *a = &acts->v[i];
        switch (a->kind) {
        case CN_TXA_APPEND:
            /* Every marker is durable and Complete is not written: the
             * next start's recovery writes it. */
            if (a->u.append.role == CN_TXN_WRITE_COMPLETE &&
                CN_FAILPOINT("txn.after_markers_before_complete"))
                break;
            do_append(x, a->u.append.part, a->u.append.id, a->u.append.seq,
                      a->u.append.key, a->u.append.value);
            break;
        case CN_TXA_SEND_MARKERS: do_markers(x, a); break;
        case CN_TXA_ANSWER: x->b->txn_answer(x->b, &a->u.answer); break;
        case CN_TXA_WANT_PIDS: cn_pids_refill(x->b); break;
        }
    }
}

/* ---- the timer ----------------------------------------------------------- */

static void on_timer(uv_timer_t *t)
{
    struct cn_txn_exec *x = t->data;
    x->timer_at = INT64_MAX;
    struct cn_txn_event ev = {.kind = CN_TXE_TICK};
    exec_feed(x, &ev, -1, NULL);
}

static void arm_timer(struct cn_txn_exec *x, int64_t at, int64_t now)
{
    if (!x->timer || at == x->timer_at)
        return;
    x->timer_at = at;
    if (at == INT64_MAX) {
        uv_timer_stop(x->timer);
        return;
    }
    /* A millisecond late rather than early: the loop's clock may lag. */
    uint64_t delay = at > now ? (uint64_t)(at - now) + 1 : 1;
    uv_timer_start(x->timer, on_timer, delay, 0);
}

static void on_timer_closed(uv_handle_t *h)
{
    free(h);
}

/* ---- compaction by checkpoint ------------------------------------------- */

/* The store's policy: more records than one per live id plus the slack. */
static bool want_compact(void *ctx, int32_t part, int64_t start, int64_t end)
{
    struct cn_txn_exec *x = ctx;
    size_t ids = cn_txn_count(x->coord, part);
    return end - start >=
           (int64_t)ids + x->b->cfg->cairn_internal_compact_slack_records;
}

struct checkpoint {
    struct cn_batch_builder *bb;
    struct cn_wr key, value;
    int64_t now_ms;
    size_t live;
};

static int checkpoint_one(void *arg, const struct cn_txn_meta *m)
{
    struct checkpoint *ck = arg;
    bool tombstone = false;
    cn_wr_reset(&ck->key);
    cn_wr_reset(&ck->value);
    int rc = cn_txn_log_encode(m, &ck->key, &ck->value, &tombstone);
    if (!rc && !tombstone) {
        cn_batch_builder_add(
            ck->bb, ck->now_ms, cn_bytes_of(ck->key.buf, (int32_t)ck->key.len),
            cn_bytes_of(ck->value.buf, (int32_t)ck->value.len), NULL, 0);
        ck->live++;
    }
    return rc;
}

static bool written_queued(const struct cn_txn_exec *x, int32_t part)
{
    for (const struct exec_q *q = x->head; q; q = q->next)
        if (q->ev.kind == CN_TXE_WRITTEN && q->part == part)
            return true;
    return false;
}

/*
 * The machine holds the newest state of every id, so the checkpoint is
 * one record per live id.  Not while a durable WRITTEN of the partition
 * waits in the queue: its record is in the log but not yet in the
 * machine, and the checkpoint would replace it with older state.
 */
static int checkpoint(void *ctx, int32_t part, struct cn_batch_builder *bb,
                      int64_t now_ms, size_t *live)
{
    struct cn_txn_exec *x = ctx;
    if (written_queued(x, part))
        return CN_EEXIST;
    struct checkpoint ck = {.bb = bb, .now_ms = now_ms};
    cn_wr_init(&ck.key, 64);
    cn_wr_init(&ck.value, 128);
    int rc = cn_txn_foreach(x->coord, part, checkpoint_one, &ck);
    cn_wr_fini(&ck.key);
    cn_wr_fini(&ck.value);
    *live = ck.live;
    return rc;
}

/* One partition a durable WRITTEN was stepped for since the last call is
 * offered to the store for compaction; false when there was none. */
static bool compact_next(struct cn_txn_exec *x)
{
    for (int32_t i = 0; i < x->nparts; i++)
        if (x->compact_due[i]) {
            x->compact_due[i] = false;
            cn_istore_maybe_compact(x->store, i);
            return true;
        }
    return false;
}

/* ---- the feed ------------------------------------------------------------ */

static void step_one(struct cn_txn_exec *x, const struct cn_txn_event *in,
                     int32_t part, struct step_out *out)
{
    struct cn_txn_event ev = *in;
    ev.now.wall_ms = cn_clock_wall_ms();
    ev.now.mono_us = cn_clock_mono_us();
    ev.now.mono_ms = ev.now.mono_us / 1000;
    struct cn_txn_config cfg;
    config_of(x->b, x->nparts, &cfg);
    cn_txn_set_config(x->coord, &cfg);
    int rc = cn_txn_step(x->coord, &ev, &x->acts);
    /* Out of memory part way: the machine's state matches the actions it
     * recorded, so they are carried out all the same. */
    if (rc)
        CN_ERROR("transaction coordinator: out of memory taking an event "
                 "(kind %d); an id may stay busy until the next start",
                 (int)ev.kind);
    if (out) {
        out->stepped = true;
        out->taken = x->acts.taken;
        /* An operator abort the machine could not take is refused,
         * rather than its marker written beside the transaction. */
        out->result = rc && !x->acts.op_taken ? KAFKA_COORDINATOR_NOT_AVAILABLE
                                              : x->acts.result;
        out->op_taken = x->acts.op_taken;
        out->resumed = x->acts.resumed;
    }
    if (ev.kind == CN_TXE_WRITTEN && ev.u.written.err == KAFKA_NONE &&
        part >= 0 && part < x->nparts)
        x->compact_due[part] = true;
    int64_t at = x->acts.timer_mono_ms;
    do_actions(x);
    cn_txn_actions_reset(&x->acts);
    arm_timer(x, at, ev.now.mono_ms);
}

/* Steps ev now, or (while a step's actions are being carried out) after
 * it.  out, if given, gets what the step said; only an event stepped now
 * fills it (out->stepped). */
static void exec_feed(struct cn_txn_exec *x, const struct cn_txn_event *ev,
                      int32_t part, struct step_out *out)
{
    if (x->draining) {
        enqueue(x, ev, part);
        return;
    }
    x->draining = true;
    step_one(x, ev, part, out);
    /* Compaction only with the queue empty: a durable WRITTEN still in it
     * is not in the machine yet, so a checkpoint would lose it. */
    do {
        while (x->head) {
            struct exec_q *q = x->head;
            x->head = q->next;
            if (!x->head)
                x->tail = &x->head;
            step_one(x, &q->ev, q->part, NULL);
            q_free(q);
        }
    } while (compact_next(x));
    x->draining = false;
}

/* ---- the seams ----------------------------------------------------------- */

/* Producer ids from the durable reservation, as idempotent producers take
 * them (no request: -EAGAIN parks inside the machine instead). */
static int pids_take(void *ctx, int64_t *pid)
{
    return cn_pids_take(ctx, NULL, NULL, NULL, NULL, pid);
}

static int16_t verify_local(struct cn_broker *b, struct cn_bytes txn_id,
                            int64_t producer_id, int16_t producer_epoch,
                            const char *topic, int32_t partition)
{
    if (!b->cfg->transaction_partition_verification_enable)
        return KAFKA_NONE;
    char id[1024];
    const char *idp = NULL;
    if (!cn_bytes_is_null(txn_id) && txn_id.len > 0) {
        if (!cn_wire_cstr(txn_id, id, sizeof id))
            return KAFKA_INVALID_PRODUCER_ID_MAPPING;
        idp = id;
    }
    /* No coordinator yet: no id is known, which Kafka's coordinator
     * answers as it does for any unknown id (cn_txn_verify). */
    const struct cn_txn_coord *c = cn_txn_exec_coord(b);
    if (!c)
        return idp ? KAFKA_INVALID_PRODUCER_ID_MAPPING
                   : KAFKA_INVALID_TXN_STATE;
    return cn_txn_verify(c, idp, producer_id, producer_epoch, topic,
                         partition);
}

const struct cn_txn_verifier cn_txn_verifier_local = {verify_local};

int16_t cn_txn_exec_verify(struct cn_broker *b, struct cn_bytes txn_id,
                           int64_t producer_id, int16_t producer_epoch,
                           const char *topic, int32_t partition)
{
    const struct cn_txn_verifier *v = b->txn ? b->txn->verifier
                                             : &cn_txn_verifier_local;
    return v->verify(b, txn_id, producer_id, producer_epoch, topic, partition);
}

/* ---- requests ------------------------------------------------------------ */

void cn_txn_exec_request(struct cn_broker *b, const struct cn_txn_request *rq)
{
    struct cn_txn_event ev = {.kind = CN_TXE_REQUEST};
    ev.u.request = *rq;
    if (!b->txn) {
        struct cn_txn_answer a = {.kind = rq->kind,
                                  .token = rq->token,
                                  .index = rq->index,
                                  .api_version = rq->api_version,
                                  .error = KAFKA_COORDINATOR_NOT_AVAILABLE,
                                  .producer_id = -1,
                                  .producer_epoch = -1};
        b->txn_answer(b, &a);
        return;
    }
    exec_feed(b->txn, &ev, -1, NULL);
}

bool cn_txn_exec_produce_add(struct cn_broker *b,
                             const struct cn_txn_request *rq)
{
    struct cn_txn_exec *x = b->txn;
    /* Asked from inside a step (not done today): the answer could not be
     * told apart from the step's, so the request goes on unadded. */
    if (!x || x->draining)
        return false;
    struct cn_txn_event ev = {.kind = CN_TXE_REQUEST};
    ev.u.request = *rq;
    struct step_out out = {0};
    exec_feed(x, &ev, -1, &out);
    return out.stepped && out.taken;
}

int16_t cn_txn_exec_operator_abort(struct cn_broker *b, int64_t producer_id,
                                   const char *topic, int32_t partition,
                                   bool *taken)
{
    struct cn_txn_exec *x = b->txn;
    *taken = false;
    if (!x)
        return KAFKA_NONE;
    if (x->draining)
        return KAFKA_CONCURRENT_TRANSACTIONS;
    struct cn_txn_event ev = {.kind = CN_TXE_OPERATOR_ABORT};
    ev.u.op.producer_id = producer_id;
    ev.u.op.topic = topic;
    ev.u.op.partition = partition;
    struct step_out out = {0};
    exec_feed(x, &ev, -1, &out);
    *taken = out.op_taken;
    return out.result;
}

void cn_txn_exec_pids_ready(struct cn_broker *b)
{
    if (!b->txn)
        return;
    struct cn_txn_event ev = {.kind = CN_TXE_PIDS_READY};
    exec_feed(b->txn, &ev, -1, NULL);
}

const struct cn_txn_coord *cn_txn_exec_coord(const struct cn_broker *b)
{
    return b->txn ? b->txn->coord : NULL;
}

/* ---- start, replay, stop ------------------------------------------------- */

static int load_record(void *ctx, int32_t part, struct cn_bytes key,
                       struct cn_bytes value, int64_t producer_id, bool txn)
{
    struct cn_txn_exec *x = ctx;
    (void)producer_id;
    (void)txn;
    return cn_txn_load_record(x->coord, part, key, value);
}

bool cn_txn_exec_log_ready(struct cn_broker *b)
{
    return b->txn && cn_istore_partition(b->txn->store, 0, true) != NULL;
}

int cn_txn_exec_start(struct cn_broker *b)
{
    struct cn_txn_exec *x = calloc(1, sizeof *x);
    if (!x)
        return CN_ENOMEM;
    x->b = b;
    x->tail = &x->head;
    x->timer_at = INT64_MAX;
    /* In a cluster some partitions are led by other brokers. */
    x->markers = b->cfg->cluster_mode ? &cn_marker_channel_cluster
                                      : &cn_marker_channel_local;
    x->verifier = &cn_txn_verifier_local;
    cn_txn_actions_init(&x->acts);
    /* The topic is made at the first write. */
    static const struct cn_istore_ops store_ops = {
        .record = load_record,
        .want_compact = want_compact,
        .checkpoint = checkpoint,
    };
    int rc = cn_istore_open(b, CN_TXN_TOPIC,
                            b->cfg->transaction_state_log_num_partitions,
                            &store_ops, x, false, &x->store);
    if (!rc) {
        x->nparts = cn_istore_nparts(x->store);
        size_t np = (size_t)(x->nparts > 0 ? x->nparts : 1);
        x->compact_due = calloc(np, sizeof *x->compact_due);
        x->led_epoch = malloc(np * sizeof *x->led_epoch);
        if (!x->compact_due || !x->led_epoch)
            rc = CN_ENOMEM;
        for (size_t i = 0; !rc && i < np; i++)
            x->led_epoch[i] = -1;
    }
    struct cn_txn_config cfg;
    config_of(b, x->nparts, &cfg);
    static const struct cn_txn_pids pids0 = {pids_take, NULL};
    struct cn_txn_pids pids = pids0;
    pids.ctx = b;
    if (!rc)
        rc = cn_txn_new(&cfg, &pids, &x->coord);
    if (rc) {
        cn_txn_actions_fini(&x->acts);
        cn_istore_free(x->store);
        free(x->compact_due);
        free(x->led_epoch);
        free(x);
        return rc;
    }
    b->txn = x;
    /* In cluster mode the image says which partitions this broker
     * coordinates: publish.c leads them (cn_txn_exec_lead), each replayed
     * then, not here. */
    bool cluster = b->cfg->cluster_mode;
    bool existed = cn_istore_partition(x->store, 0, false) != NULL;
    int64_t t0 = cn_clock_mono_ms();
    struct cn_istore_counts n = {0, 0};
    for (int32_t i = 0; i < x->nparts && !cluster; i++) {
        rc = cn_istore_replay(x->store, i, &n);
        if (rc)
            return rc;
    }
    if (n.bad)
        CN_WARN("%s: %zu records could not be read and were skipped",
                CN_TXN_TOPIC, n.bad);
    x->timer = calloc(1, sizeof *x->timer);
    if (!x->timer)
        return CN_ENOMEM;
    uv_timer_init(b->loop, x->timer);
    x->timer->data = x;
    /* Coordinator of every partition: decided transactions are finished
     * (their markers sent again, then Complete written). */
    size_t resumed = 0;
    for (int32_t i = 0; i < x->nparts && !cluster; i++) {
        struct cn_txn_event ev = {.kind = CN_TXE_LEADER};
        ev.u.leader.part = i;
        ev.u.leader.coordinator_epoch = COORDINATOR_EPOCH;
        struct step_out out = {0};
        exec_feed(x, &ev, -1, &out);
        resumed += out.resumed;
    }
    if (existed && !cluster)
        CN_INFO("loaded %zu transactional ids from %s in %lld ms; %zu "
                "decided transactions being completed",
                cn_txn_count(x->coord, -1), CN_TXN_TOPIC,
                (long long)(cn_clock_mono_ms() - t0), resumed);
    return 0;
}

static void pay_owed(void *ctx, const struct cn_txn_answer *a)
{
    struct cn_broker *b = ctx;
    b->txn_answer(b, a);
}

void cn_txn_exec_stop(struct cn_broker *b)
{
    struct cn_txn_exec *x = b->txn;
    if (!x || !x->timer)
        return;
    /* Waiting requests are answered now rather than dropped. */
    struct cn_txn_event ev = {.kind = CN_TXE_STOP};
    exec_feed(x, &ev, -1, NULL);
    /* Answers still owed (out of memory) would never be paid: no step
     * comes after this one. */
    cn_txn_pay_owed(x->coord, pay_owed, b);
    uv_timer_stop(x->timer);
    uv_close((uv_handle_t *)x->timer, on_timer_closed);
    x->timer = NULL;
}

void cn_txn_exec_free(struct cn_broker *b)
{
    struct cn_txn_exec *x = b->txn;
    if (!x)
        return;
    if (x->timer) {
        /* Never stopped (a failed start): the loop closes it later. */
        uv_timer_stop(x->timer);
        uv_close((uv_handle_t *)x->timer, on_timer_closed);
    }
    while (x->head) {
        struct exec_q *q = x->head;
        x->head = q->next;
        q_free(q);
    }
    cn_txn_free(x->coord);
    cn_txn_actions_fini(&x->acts);
    cn_istore_free(x->store);
    free(x->compact_due);
    free(x->led_epoch);
    free(x);
    b->txn = NULL;
}

void cn_txn_exec_lead(struct cn_broker *b, int32_t part, bool leads,
                      int32_t epoch)
{
    struct cn_txn_exec *x = b->txn;
    if (!x || !x->timer || part < 0 || part >= x->nparts)
        return;
    int32_t was = x->led_epoch[part];
    if (leads ? was == epoch : was < 0)
        return;
    if (leads && was >= 0 && epoch == was + 1) {
        /* Led on at the next epoch (KAFKA-15468): every leader change
         * bumps the epoch once, so nobody else led it in between and the
         * state held is the log's; only the markers' epoch moves.  A
         * reload would drop the writes in flight. */
        struct cn_txn_event ev = {.kind = CN_TXE_LEADER};
        ev.u.leader.part = part;
        ev.u.leader.coordinator_epoch = epoch;
        exec_feed(x, &ev, -1, NULL);
        x->led_epoch[part] = epoch;
        CN_INFO("%s-%d: transaction coordinator at epoch %d (was %d)",
                CN_TXN_TOPIC, part, epoch, was);
        return;
    }
    if (was >= 0) {
        /* Also when it leads again at a newer epoch: what another leader
         * did in between is in the log, so the state is reloaded. */
        struct cn_txn_event ev = {.kind = CN_TXE_UNLEADER};
        ev.u.leader.part = part;
        ev.u.leader.coordinator_epoch = was;
        exec_feed(x, &ev, -1, NULL);
        x->led_epoch[part] = -1;
        CN_INFO("%s-%d: no longer its transaction coordinator", CN_TXN_TOPIC,
                part);
    }
    if (!leads)
        return;
    struct cn_istore_counts n = {0, 0};
    int64_t t0 = cn_clock_mono_ms();
    int rc = cn_istore_replay(x->store, part, &n);
    if (rc) {
        /* Not led: its ids answer NOT_COORDINATOR; the next leadership
         * change tries again. */
        CN_ERROR("%s-%d: cannot replay it (%s); not coordinating it",
                 CN_TXN_TOPIC, part, cn_strerror(rc));
        return;
    }
    if (n.bad)
        CN_WARN("%s-%d: %zu records could not be read and were skipped",
                CN_TXN_TOPIC, part, n.bad);
    struct cn_txn_event ev = {.kind = CN_TXE_LEADER};
    ev.u.leader.part = part;
    ev.u.leader.coordinator_epoch = epoch;
    struct step_out out = {0};
    exec_feed(x, &ev, -1, &out);
    x->led_epoch[part] = epoch;
    CN_INFO("%s-%d: transaction coordinator at epoch %d (%zu records in "
            "%lld ms, %zu decided transactions being completed)",
            CN_TXN_TOPIC, part, epoch, n.records,
            (long long)(cn_clock_mono_ms() - t0), out.resumed);
}
