/*
 * coord.c - the transaction coordinator's core; see coord.h.
 *
 * One entry per transactional id holds the metadata as last made durable.
 * A change is never applied first: it is encoded into an APPEND action,
 * kept as the entry's `pending`, and applied only when the executor says
 * it is durable (CN_TXE_WRITTEN); then the entry's `then` runs (answer,
 * markers, forget).  While a change or the markers of a decided
 * transaction are in flight the entry is busy and requests for it park
 * here, deep-copied, until it is idle (or their deadline passes).
 *
 * This file owns the table, the pid index, that one write path, parking,
 * replay, leadership, stop, the timer and the queries.  The decisions are
 * in coord_client.c (client APIs), coord_leader.c (partition leaders) and
 * coord_finish.c (markers, completion, the coordinator's own aborts,
 * expiry); they share coord_int.h.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/fnv.h"
#include "base/say.h"
#include "base/wr.h"
#include "proto/kerr.h"
#include "txn/coord_int.h"

/* The step asked for while answers stay owed. */
#define OWED_RETRY_MIN_MS 10
#define OWED_RETRY_MAX_MS 1000

/* ---- actions ------------------------------------------------------------ */

void cn_txn_actions_init(struct cn_txn_actions *a)
{
    memset(a, 0, sizeof *a);
    cn_arena_init(&a->arena);
    a->timer_mono_ms = INT64_MAX;
}

void cn_txn_actions_reset(struct cn_txn_actions *a)
{
    cn_arena_fini(&a->arena);
    cn_arena_init(&a->arena);
    a->n = 0;
    a->timer_mono_ms = INT64_MAX;
    a->taken = false;
    a->result = 0;
    a->op_taken = false;
    a->resumed = 0;
}

void cn_txn_actions_fini(struct cn_txn_actions *a)
{
    cn_arena_fini(&a->arena);
    free(a->v);
    memset(a, 0, sizeof *a);
}

struct cn_txn_action *cn_tc_push(struct txn_ctx *x,
                                 enum cn_txn_action_kind kind)
{
    struct cn_txn_actions *a = x->acts;
    if (a->fail_push) {
        x->rc = CN_ENOMEM;
        return NULL;
    }
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 8;
        struct cn_txn_action *v = realloc(a->v, cap * sizeof *v);
        if (!v) {
            x->rc = CN_ENOMEM;
            return NULL;
        }
        a->v = v;
        a->cap = cap;
    }
    struct cn_txn_action *act = &a->v[a->n++];
    memset(act, 0, sizeof *act);
    act->kind = kind;
    return act;
}

bool cn_tc_take_produce(struct txn_ctx *x)
{
    struct cn_txn_coord *c = x->c;
    size_t need = c->produce_taken + c->nowed + 1;
    if (need > c->owed_cap) {
        size_t cap = c->owed_cap ? c->owed_cap * 2 : 8;
        struct cn_txn_answer *v = realloc(c->owed, cap * sizeof *v);
        if (!v)
            return false;
        c->owed = v;
        c->owed_cap = cap;
    }
    c->produce_taken++;
    x->acts->taken = true;
    return true;
}

void cn_tc_answer_to(struct txn_ctx *x, const struct cn_txn_answer *a,
                     int16_t err, int64_t pid, int16_t epoch)
{
    struct cn_txn_coord *c = x->c;
    struct cn_txn_answer an = *a;
    an.error = err;
    an.producer_id = err ? -1 : pid;
    an.producer_epoch = err ? -1 : epoch;
    bool produce = a->kind == CN_TXN_REQ_PRODUCE_ADD && c->produce_taken;
    if (produce)
        c->produce_taken--;
    struct cn_txn_action *act = cn_tc_push(x, CN_TXA_ANSWER);
    if (act)
        act->u.answer = an;
    else if (produce)
        c->owed[c->nowed++] = an; /* room reserved at the take */
}

void cn_txn_pay_owed(struct cn_txn_coord *c,
                     void (*pay)(void *ctx, const struct cn_txn_answer *a),
                     void *ctx)
{
    for (size_t i = 0; i < c->nowed; i++)
        pay(ctx, &c->owed[i]);
    c->nowed = 0;
}

/* The owed answers first, in order, as far as they can be recorded. */
static void pay_owed(struct txn_ctx *x)
{
    struct cn_txn_coord *c = x->c;
    size_t i = 0;
    for (; i < c->nowed; i++) {
        struct cn_txn_action *act = cn_tc_push(x, CN_TXA_ANSWER);
        if (!act)
            break;
        act->u.answer = c->owed[i];
    }
    memmove(c->owed, c->owed + i, (c->nowed - i) * sizeof *c->owed);
    c->nowed -= i;
}

static struct cn_txn_answer answer_of(const struct cn_txn_request *rq)
{
    return (struct cn_txn_answer){.kind = rq->kind,
                                  .token = rq->token,
                                  .index = rq->index,
                                  .api_version = rq->api_version,
                                  .producer_id = -1,
                                  .producer_epoch = -1};
}

void cn_tc_answer(struct txn_ctx *x, const struct cn_txn_request *rq,
                  int16_t err, int64_t pid, int16_t epoch)
{
    struct cn_txn_answer a = answer_of(rq);
    cn_tc_answer_to(x, &a, err, pid, epoch);
}

/* ---- table -------------------------------------------------------------- */

bool cn_tc_tv2_on(const struct cn_txn_coord *c)
{
    return c->cfg.transaction_version >= 2;
}

static uint32_t id_hash(const char *s)
{
    return cn_fnv1a_str(s);
}

static int32_t part_of(const struct cn_txn_coord *c, const char *id)
{
    return cn_txn_partition_for((const uint8_t *)id, strlen(id),
                                c->cfg.nparts);
}

bool cn_tc_part_led(const struct cn_txn_coord *c, int32_t part)
{
    return part >= 0 && part < c->cfg.nparts &&
           c->part_state[part] == PART_LED;
}

bool cn_tc_entry_waits(const struct txn_entry *e)
{
    enum cn_txn_state s = e->meta.state;
    return e->busy || s == CN_TXN_PREPARE_COMMIT ||
           s == CN_TXN_PREPARE_ABORT || s == CN_TXN_PREPARE_EPOCH_FENCE;
}

struct txn_entry *cn_tc_entry_find(const struct cn_txn_coord *c,
                                   const char *id)
{
    if (!c->buckets || !id)
        return NULL;
    for (struct txn_entry *e = c->table[id_hash(id) % c->buckets]; e;
         e = e->next)
        if (strcmp(e->meta.transactional_id, id) == 0)
            return e;
    return NULL;
}

static int entry_insert(struct cn_txn_coord *c, struct txn_entry *e)
{
    if (c->count + 1 > c->buckets) {
        size_t nb = c->buckets ? c->buckets * 2 : 256;
        struct txn_entry **nt = calloc(nb, sizeof *nt);
        if (!nt)
            return CN_ENOMEM;
        for (size_t i = 0; i < c->buckets; i++)
            while (c->table[i]) {
                struct txn_entry *y = c->table[i];
                c->table[i] = y->next;
                uint32_t h = id_hash(y->meta.transactional_id) % nb;
                y->next = nt[h];
                nt[h] = y;
            }
        free(c->table);
        c->table = nt;
        c->buckets = nb;
    }
    uint32_t h = id_hash(e->meta.transactional_id) % c->buckets;
    e->next = c->table[h];
    c->table[h] = e;
    c->count++;
    e->part = part_of(c, e->meta.transactional_id);
    c->part_ids[e->part]++;
    return 0;
}

static void pid_unindex(struct cn_txn_coord *c, struct txn_entry *e)
{
    if (e->indexed_pid < 0)
        return;
    struct txn_entry **pp =
        &c->by_pid[(uint64_t)e->indexed_pid % TXN_PID_BUCKETS];
    while (*pp && *pp != e)
        pp = &(*pp)->pid_next;
    if (*pp)
        *pp = e->pid_next;
    e->indexed_pid = -1;
}

/* Keeps the producer id index in step with e->meta.producer_id. */
static void pid_reindex(struct cn_txn_coord *c, struct txn_entry *e)
{
    if (e->indexed_pid == e->meta.producer_id)
        return;
    pid_unindex(c, e);
    if (e->meta.producer_id < 0)
        return;
    struct txn_entry **head =
        &c->by_pid[(uint64_t)e->meta.producer_id % TXN_PID_BUCKETS];
    e->pid_next = *head;
    *head = e;
    e->indexed_pid = e->meta.producer_id;
}

struct txn_entry *cn_tc_entry_by_pid(const struct cn_txn_coord *c, int64_t pid)
{
    if (pid < 0)
        return NULL;
    for (struct txn_entry *e = c->by_pid[(uint64_t)pid % TXN_PID_BUCKETS]; e;
         e = e->pid_next)
        if (e->meta.producer_id == pid)
            return e;
    return NULL;
}

static struct txn_entry *entry_alloc(void)
{
    struct txn_entry *e = calloc(1, sizeof *e);
    if (!e)
        return NULL;
    cn_txn_meta_init(&e->meta);
    cn_txn_meta_init(&e->pending);
    e->indexed_pid = -1;
    return e;
}

static void entry_free(struct txn_entry *e)
{
    cn_txn_meta_fini(&e->meta);
    cn_txn_meta_fini(&e->pending);
    free(e);
}

struct txn_entry *cn_tc_entry_new(struct cn_txn_coord *c, const char *id)
{
    struct txn_entry *e = entry_alloc();
    if (!e)
        return NULL;
    if (cn_txn_meta_set_id(&e->meta, id) != 0 || entry_insert(c, e) != 0) {
        entry_free(e);
        return NULL;
    }
    e->meta.state = CN_TXN_EMPTY;
    return e;
}

static void park_forget(struct cn_txn_coord *c, struct txn_entry *e);

void cn_tc_entry_remove(struct cn_txn_coord *c, struct txn_entry *e)
{
    park_forget(c, e);
    pid_unindex(c, e);
    struct txn_entry **pp =
        &c->table[id_hash(e->meta.transactional_id) % c->buckets];
    while (*pp && *pp != e)
        pp = &(*pp)->next;
    if (*pp) {
        *pp = e->next;
        c->count--;
        c->part_ids[e->part]--;
    }
    if (e->marker_retry_mono_ms)
        c->retries--;
    entry_free(e);
}

/* ---- lifetime ----------------------------------------------------------- */

int cn_txn_new(const struct cn_txn_config *cfg, const struct cn_txn_pids *pids,
               struct cn_txn_coord **out)
{
    if (cfg->nparts <= 0)
        return CN_EINVAL;
    struct cn_txn_coord *c = calloc(1, sizeof *c);
    if (c)
        c->retry_due_mono_ms = INT64_MAX;
    if (!c)
        return CN_ENOMEM;
    c->cfg = *cfg;
    if (pids)
        c->pids = *pids;
    size_t n = (size_t)cfg->nparts;
    c->part_ids = calloc(n, sizeof *c->part_ids);
    c->part_state = calloc(n, sizeof *c->part_state);
    c->coordinator_epoch = calloc(n, sizeof *c->coordinator_epoch);
    if (!c->part_ids || !c->part_state || !c->coordinator_epoch) {
        cn_txn_free(c);
        return CN_ENOMEM;
    }
    *out = c;
    return 0;
}

static void parked_free(struct txn_parked *pk)
{
    free((char *)pk->rq.transactional_id);
    for (size_t i = 0; i < pk->rq.ntps; i++)
        free(pk->rq.tps[i].topic);
    free((struct cn_txn_tp *)pk->rq.tps);
    free(pk);
}

void cn_txn_free(struct cn_txn_coord *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->buckets; i++)
        while (c->table[i]) {
            struct txn_entry *e = c->table[i];
            c->table[i] = e->next;
            entry_free(e);
        }
    while (c->parked) {
        struct txn_parked *pk = c->parked;
        c->parked = pk->next;
        parked_free(pk);
    }
    free(c->table);
    free(c->part_ids);
    free(c->part_state);
    free(c->coordinator_epoch);
    free(c->owed);
    free(c);
}

void cn_txn_set_config(struct cn_txn_coord *c, const struct cn_txn_config *cfg)
{
    int32_t nparts = c->cfg.nparts;
    c->cfg = *cfg;
    c->cfg.nparts = nparts;
}

/* ---- producer ids ------------------------------------------------------- */

int cn_tc_take_pid(struct txn_ctx *x, int64_t *pid)
{
    struct cn_txn_coord *c = x->c;
    if (!c->pids.take)
        return CN_EINVAL;
    int rc = c->pids.take(c->pids.ctx, pid);
    if (rc == -EAGAIN && !c->pids_wanted) {
        if (cn_tc_push(x, CN_TXA_WANT_PIDS))
            c->pids_wanted = true;
    }
    return rc;
}

/* ---- requests waiting for a busy id ----------------------------------- */

static struct txn_parked *parked_copy(const struct cn_txn_request *rq)
{
    struct txn_parked *pk = calloc(1, sizeof *pk);
    if (!pk)
        return NULL;
    pk->rq = *rq;
    pk->rq.transactional_id = NULL;
    pk->rq.tps = NULL;
    pk->rq.ntps = 0;
    struct cn_txn_tp *tps = NULL;
    bool ok = true;
    if (rq->transactional_id) {
        pk->rq.transactional_id = strdup(rq->transactional_id);
        ok = pk->rq.transactional_id != NULL;
    }
    if (ok && rq->ntps) {
        tps = calloc(rq->ntps, sizeof *tps);
        ok = tps != NULL;
        pk->rq.tps = tps;
        for (size_t i = 0; ok && i < rq->ntps; i++) {
            tps[i].partition = rq->tps[i].partition;
            tps[i].topic = strdup(rq->tps[i].topic ? rq->tps[i].topic : "");
            ok = tps[i].topic != NULL;
            pk->rq.ntps = i + 1;
        }
    }
    if (!ok) {
        parked_free(pk);
        return NULL;
    }
    return pk;
}

bool cn_tc_park(struct txn_ctx *x, const struct cn_txn_request *rq,
                struct txn_entry *e, enum txn_park_reason reason)
{
    struct cn_txn_coord *c = x->c;
    if (c->stopping)
        return false;
    struct txn_parked *pk = parked_copy(rq);
    if (!pk)
        return false;
    pk->reason = reason;
    pk->e = e;
    pk->deadline_mono_ms = reason == PARK_BUSY
                               ? x->now->mono_ms + c->cfg.park_max_ms
                               : INT64_MAX;
    struct txn_parked **pp = &c->parked;
    while (*pp)
        pp = &(*pp)->next;
    *pp = pk;
    return true;
}

/* An entry is going away: its waiting requests run again at the next tick
 * and find it gone. */
static void park_forget(struct cn_txn_coord *c, struct txn_entry *e)
{
    for (struct txn_parked *pk = c->parked; pk; pk = pk->next)
        if (pk->reason == PARK_BUSY && pk->e == e) {
            pk->e = NULL;
            pk->deadline_mono_ms = 0;
        }
}

static bool coordinated(struct txn_ctx *x, const struct cn_txn_request *rq)
{
    int32_t part = part_of(x->c, rq->transactional_id);
    uint8_t st = part >= 0 ? x->c->part_state[part] : PART_NONE;
    if (st == PART_LED)
        return true;
    if (rq->kind == CN_TXN_REQ_PRODUCE_ADD)
        return false;
    cn_tc_answer(x, rq,
                 st == PART_LOADING ? KAFKA_COORDINATOR_LOAD_IN_PROGRESS
                                    : KAFKA_NOT_COORDINATOR,
                 -1, -1);
    return false;
}

/* One request, new (resumed false) or out of the parked list.  late: it
 * waited long enough, answer it now, do not park it again. */
static void process(struct txn_ctx *x, const struct cn_txn_request *rq,
                    bool resumed, bool late)
{
    if (rq->kind == CN_TXN_REQ_PRODUCE_ADD) {
        cn_tc_produce_add(x, rq, resumed, late);
        return;
    }
    /* An empty id is malformed for InitProducerId and the TV2 EndTxn
     * (h_txn.c did so); the others find no such id (their check
     * answers INVALID_PRODUCER_ID_MAPPING). */
    bool tv2_end = rq->kind == CN_TXN_REQ_END && rq->api_version >= 5 &&
                   cn_tc_tv2_on(x->c);
    if (!rq->transactional_id ||
        (!rq->transactional_id[0] &&
         (rq->kind == CN_TXN_REQ_INIT_PID || tv2_end))) {
        cn_tc_answer(x, rq, KAFKA_INVALID_REQUEST, -1, -1);
        return;
    }
    if (!coordinated(x, rq))
        return;
    switch (rq->kind) {
    case CN_TXN_REQ_INIT_PID: cn_tc_init_pid(x, rq, late); break;
    case CN_TXN_REQ_ADD_PARTS: cn_tc_add_parts(x, rq, late); break;
    case CN_TXN_REQ_ADD_BATCHED: cn_tc_add_batched(x, rq); break;
    case CN_TXN_REQ_ADD_OFFSETS: cn_tc_add_offsets(x, rq, late); break;
    case CN_TXN_REQ_END: cn_tc_end(x, rq, late); break;
    default: cn_tc_answer(x, rq, KAFKA_INVALID_REQUEST, -1, -1); break;
    }
}

/* Takes out of the parked list those that match: the BUSY ones of entry e
 * when it went idle (e non-NULL), the PIDS ones (pids), those past their
 * deadline, or all; and runs them in arrival order.  Requests parked
 * again meanwhile wait for the next round. */
enum unpark_which { UNPARK_ENTRY, UNPARK_PIDS, UNPARK_DUE, UNPARK_ALL };

static void unpark(struct txn_ctx *x, struct txn_entry *e,
                   enum unpark_which which)
{
    struct cn_txn_coord *c = x->c;
    struct txn_parked *ready = NULL, **tail = &ready;
    struct txn_parked **pp = &c->parked;
    while (*pp) {
        struct txn_parked *pk = *pp;
        bool go = which == UNPARK_ALL ||
                  (which == UNPARK_ENTRY && pk->reason == PARK_BUSY &&
                   pk->e == e) ||
                  (which == UNPARK_PIDS && pk->reason == PARK_PIDS) ||
                  (which == UNPARK_DUE && pk->reason == PARK_BUSY &&
                   pk->deadline_mono_ms <= x->now->mono_ms);
        if (go) {
            *pp = pk->next;
            pk->next = NULL;
            *tail = pk;
            tail = &pk->next;
        } else {
            pp = &pk->next;
        }
    }
    bool late = which == UNPARK_DUE || which == UNPARK_ALL;
    while (ready) {
        struct txn_parked *pk = ready;
        ready = pk->next;
        if (which == UNPARK_ALL && pk->reason == PARK_PIDS)
            cn_tc_answer(x, &pk->rq,
                         pk->rq.kind == CN_TXN_REQ_PRODUCE_ADD
                             ? KAFKA_CONCURRENT_TRANSACTIONS
                             : KAFKA_COORDINATOR_NOT_AVAILABLE,
                         -1, -1);
        else
            process(x, &pk->rq, true, late);
        parked_free(pk);
    }
}

/* ---- durable changes ---------------------------------------------------- */

static struct cn_bytes arena_bytes(struct txn_ctx *x, const struct cn_wr *w)
{
    uint8_t *p = cn_arena_alloc(&x->acts->arena, w->len ? w->len : 1);
    if (!p) {
        x->rc = CN_ENOMEM;
        return CN_BYTES_NULL;
    }
    memcpy(p, w->buf, w->len);
    return cn_bytes_of(p, (int32_t)w->len);
}

static void run_then(struct txn_ctx *x, struct txn_entry *e, int16_t err);

void cn_tc_write(struct txn_ctx *x, struct txn_entry *e,
                 struct cn_txn_meta *next, enum txn_then then,
                 const struct cn_txn_request *waiter,
                 enum cn_txn_write_role role)
{
    struct cn_txn_coord *c = x->c;
    e->then = then;
    e->has_waiter = waiter != NULL;
    if (waiter)
        e->waiter = answer_of(waiter);
    if (c->stopping) {
        /* Nothing more is written; a decided transaction is finished by
         * the next start's recovery. */
        cn_txn_meta_fini(next);
        run_then(x, e, KAFKA_COORDINATOR_NOT_AVAILABLE);
        return;
    }
    struct cn_wr key, value;
    cn_wr_init(&key, 64);
    cn_wr_init(&value, 128);
    bool tombstone = false;
    int rc = cn_txn_log_encode(next, &key, &value, &tombstone);
    struct cn_txn_action *act = NULL;
    if (!rc) {
        struct cn_bytes k = arena_bytes(x, &key);
        struct cn_bytes v = tombstone ? CN_BYTES_NULL : arena_bytes(x, &value);
        char *id = cn_arena_strdup(&x->acts->arena,
                                   cn_bytes_str(e->meta.transactional_id));
        act = (k.len >= 0 && id && (tombstone || v.len >= 0))
                  ? cn_tc_push(x, CN_TXA_APPEND)
                  : NULL;
        if (act) {
            act->u.append.part = e->part;
            act->u.append.id = id;
            act->u.append.seq = e->write_seq = ++c->next_seq;
            act->u.append.role = role;
            act->u.append.key = k;
            act->u.append.value = v;
        } else {
            rc = CN_ENOMEM;
            x->rc = CN_ENOMEM;
        }
    }
    cn_wr_fini(&key);
    cn_wr_fini(&value);
    if (rc) {
        CN_ERROR("cannot append to %s for transactional id %s: %s",
                 CN_TXN_TOPIC, e->meta.transactional_id, cn_strerror(rc));
        cn_txn_meta_fini(next);
        e->busy = false;
        run_then(x, e, KAFKA_COORDINATOR_NOT_AVAILABLE);
        return;
    }
    cn_txn_meta_fini(&e->pending);
    e->pending = *next;
    cn_txn_meta_init(next);
    e->busy = true;
    e->writing = true;
}

static void run_then(struct txn_ctx *x, struct txn_entry *e, int16_t err)
{
    const struct cn_txn_meta *m = &e->meta;
    bool rotating = m->next_producer_id >= 0;
    /* Taken off first: what follows may write again (a new waiter) or
     * free the entry (expiry). */
    bool has_waiter = e->has_waiter;
    struct cn_txn_answer waiter = e->waiter;
    e->has_waiter = false;
    switch (e->then) {
    case THEN_ANSWER:
        e->busy = false;
        if (has_waiter)
            cn_tc_answer_to(x, &waiter, err, m->producer_id,
                            m->producer_epoch);
        break;
    case THEN_END:
        /* v5 returns the producer id and epoch the client goes on with:
         * the bumped epoch, or the next producer id at epoch 0. */
        if (has_waiter)
            cn_tc_answer_to(x, &waiter, err,
                            rotating ? m->next_producer_id : m->producer_id,
                            rotating ? 0 : m->producer_epoch);
        if (err) {
            e->busy = false;
            break;
        }
        cn_tc_send_markers(x, e, e->commit, true);
        break;
    default: cn_tc_finish_written(x, e, e->then, err); break;
    }
}

static void on_written(struct txn_ctx *x, const char *id, uint64_t seq,
                       int16_t err)
{
    struct cn_txn_coord *c = x->c;
    struct txn_entry *e = cn_tc_entry_find(c, id);
    if (!e || !e->writing || e->write_seq != seq)
        return; /* its partition was lost meanwhile */
    e->writing = false;
    if (err) {
        cn_txn_meta_fini(&e->pending);
    } else {
        cn_txn_meta_fini(&e->meta);
        e->meta = e->pending;
        cn_txn_meta_init(&e->pending);
        pid_reindex(c, e);
    }
    run_then(x, e, err); /* may remove the entry (expiry) */
    e = cn_tc_entry_find(c, id);
    if (e && !e->busy && c->parked)
        unpark(x, e, UNPARK_ENTRY);
}

/* ---- replay and leadership ---------------------------------------------- */

int cn_txn_load_record(struct cn_txn_coord *c, int32_t part,
                       struct cn_bytes key, struct cn_bytes value)
{
    struct cn_txn_meta m;
    cn_txn_meta_init(&m);
    bool tombstone = false;
    if (cn_txn_log_decode(key, value, &m, &tombstone) != 0) {
        /* Not a record we know: skipped, as Kafka's loader does. */
        CN_DEBUG("%s-%d: skipping a record that does not decode", CN_TXN_TOPIC,
                 part);
        return 0;
    }
    if (part >= 0 && part < c->cfg.nparts && c->part_state[part] == PART_NONE)
        c->part_state[part] = PART_LOADING;
    struct txn_entry *e = cn_tc_entry_find(c, m.transactional_id);
    if (tombstone) {
        if (e)
            cn_tc_entry_remove(c, e);
        cn_txn_meta_fini(&m);
        return 0;
    }
    if (!e) {
        e = entry_alloc();
        if (!e) {
            cn_txn_meta_fini(&m);
            return CN_ENOMEM;
        }
        cn_txn_meta_fini(&e->meta);
        e->meta = m;
        if (entry_insert(c, e) != 0) {
            entry_free(e);
            return CN_ENOMEM;
        }
        pid_reindex(c, e);
        return 0;
    }
    cn_txn_meta_fini(&e->meta);
    e->meta = m;
    pid_reindex(c, e);
    return 0;
}

static void start_checks(struct txn_ctx *x)
{
    struct cn_txn_coord *c = x->c;
    if (c->checks_on)
        return;
    c->checks_on = true;
    c->next_abort_check_mono_ms = x->now->mono_ms +
                                  c->cfg.abort_check_interval_ms;
    c->next_expiry_check_mono_ms = x->now->mono_ms +
                                   c->cfg.expiry_check_interval_ms;
}

static void on_leader(struct txn_ctx *x, int32_t part, int32_t epoch)
{
    struct cn_txn_coord *c = x->c;
    if (part < 0 || part >= c->cfg.nparts)
        return;
    c->part_state[part] = PART_LED;
    c->coordinator_epoch[part] = epoch;
    start_checks(x);
    for (size_t i = 0; i < c->buckets; i++)
        for (struct txn_entry *e = c->table[i]; e; e = e->next) {
            /* The decision is durable: finish what it says. */
            if (e->part != part || e->busy ||
                (e->meta.state != CN_TXN_PREPARE_COMMIT &&
                 e->meta.state != CN_TXN_PREPARE_ABORT))
                continue;
            e->busy = true;
            e->decide_us = x->now->mono_us;
            x->acts->resumed++;
            cn_tc_send_markers(x, e, e->meta.state == CN_TXN_PREPARE_COMMIT,
                               false);
        }
}

static void on_unleader(struct txn_ctx *x, int32_t part)
{
    struct cn_txn_coord *c = x->c;
    if (part < 0 || part >= c->cfg.nparts)
        return;
    c->part_state[part] = PART_NONE;
    /* Its parked requests go first, while their entries still exist. */
    struct txn_parked **pp = &c->parked;
    while (*pp) {
        struct txn_parked *pk = *pp;
        bool mine = pk->rq.transactional_id
                        ? part_of(c, pk->rq.transactional_id) == part
                        : pk->e && pk->e->part == part;
        if (!mine) {
            pp = &pk->next;
            continue;
        }
        *pp = pk->next;
        cn_tc_answer(x, &pk->rq,
                     pk->rq.kind == CN_TXN_REQ_PRODUCE_ADD
                         ? KAFKA_CONCURRENT_TRANSACTIONS
                         : KAFKA_NOT_COORDINATOR,
                     -1, -1);
        parked_free(pk);
    }
    for (size_t i = 0; i < c->buckets; i++) {
        struct txn_entry *e = c->table[i];
        while (e) {
            struct txn_entry *next = e->next;
            /* A request whose write is in flight is answered now; its
             * WRITTEN will find nothing (as Kafka's append callback
             * answers when the coordinator went meanwhile). */
            if (e->part == part && e->has_waiter)
                cn_tc_answer_to(x, &e->waiter, KAFKA_NOT_COORDINATOR, -1, -1);
            if (e->part == part)
                cn_tc_entry_remove(c, e);
            e = next;
        }
    }
}

/* ---- the timer ---------------------------------------------------------- */

static int64_t interval(int64_t ms)
{
    return ms > 0 ? ms : 1;
}

static void on_tick(struct txn_ctx *x)
{
    struct cn_txn_coord *c = x->c;
    int64_t now = x->now->mono_ms;
    if (c->stopping)
        return;
    if (c->parked)
        unpark(x, NULL, UNPARK_DUE);
    if (c->retries && now >= c->retry_due_mono_ms)
        cn_tc_retry_markers(x);
    if (c->checks_on && now >= c->next_abort_check_mono_ms) {
        cn_tc_check_timeouts(x);
        while (c->next_abort_check_mono_ms <= now)
            c->next_abort_check_mono_ms += interval(
                c->cfg.abort_check_interval_ms);
    }
    if (c->checks_on && now >= c->next_expiry_check_mono_ms) {
        cn_tc_check_expiry(x);
        while (c->next_expiry_check_mono_ms <= now)
            c->next_expiry_check_mono_ms += interval(
                c->cfg.expiry_check_interval_ms);
    }
}

static int64_t next_timer(const struct cn_txn_coord *c)
{
    if (c->stopping)
        return INT64_MAX;
    int64_t t = INT64_MAX;
    if (c->checks_on) {
        if (c->next_abort_check_mono_ms < t)
            t = c->next_abort_check_mono_ms;
        if (c->next_expiry_check_mono_ms < t)
            t = c->next_expiry_check_mono_ms;
    }
    for (const struct txn_parked *pk = c->parked; pk; pk = pk->next)
        if (pk->reason == PARK_BUSY && pk->deadline_mono_ms < t)
            t = pk->deadline_mono_ms;
    if (c->retries && c->retry_due_mono_ms < t)
        t = c->retry_due_mono_ms;
    return t;
}

/* ---- the step ----------------------------------------------------------- */

int cn_txn_step(struct cn_txn_coord *c, const struct cn_txn_event *ev,
                struct cn_txn_actions *acts)
{
    struct txn_ctx x = {c, &ev->now, acts, 0};
    if (c->nowed)
        pay_owed(&x);
    switch (ev->kind) {
    case CN_TXE_REQUEST:
        if (c->stopping && ev->u.request.kind == CN_TXN_REQ_PRODUCE_ADD)
            break; /* not taken: the produce goes on */
        process(&x, &ev->u.request, false, c->stopping);
        break;
    case CN_TXE_WRITTEN:
        on_written(&x, ev->u.written.id, ev->u.written.seq, ev->u.written.err);
        break;
    case CN_TXE_MARKER_RESULT:
        cn_tc_marker_result(&x, ev->u.marker.id, ev->u.marker.seq,
                            ev->u.marker.i, ev->u.marker.err);
        break;
    case CN_TXE_TICK: on_tick(&x); break;
    case CN_TXE_PIDS_READY:
        c->pids_wanted = false;
        if (c->parked)
            unpark(&x, NULL, UNPARK_PIDS);
        break;
    case CN_TXE_LEADER:
        on_leader(&x, ev->u.leader.part, ev->u.leader.coordinator_epoch);
        break;
    case CN_TXE_UNLEADER: on_unleader(&x, ev->u.leader.part); break;
    case CN_TXE_OPERATOR_ABORT:
        cn_tc_operator_abort(&x, ev->u.op.producer_id, ev->u.op.topic,
                             ev->u.op.partition);
        break;
    case CN_TXE_STOP:
        /* Waiting requests are answered now (CONCURRENT_TRANSACTIONS, or
         * what a stopping coordinator says) rather than dropped. */
        c->stopping = true;
        if (c->parked)
            unpark(&x, NULL, UNPARK_ALL);
        break;
    }
    int64_t t = next_timer(c);
    if (c->nowed) {
        /* Out of memory may last: 10 ms, doubling to 1 s, not a busy
         * loop. */
        c->owed_retry_ms = c->owed_retry_ms
                               ? (c->owed_retry_ms >= OWED_RETRY_MAX_MS / 2
                                      ? OWED_RETRY_MAX_MS
                                      : c->owed_retry_ms * 2)
                               : OWED_RETRY_MIN_MS;
        if (ev->now.mono_ms + c->owed_retry_ms < t)
            t = ev->now.mono_ms + c->owed_retry_ms;
    } else
        c->owed_retry_ms = 0;
    acts->timer_mono_ms = t;
    return x.rc;
}

/* ---- queries ------------------------------------------------------------ */

static const struct txn_entry *led_entry(const struct cn_txn_coord *c,
                                         const struct txn_entry *e)
{
    return e && cn_tc_part_led(c, e->part) ? e : NULL;
}

const struct cn_txn_meta *cn_txn_find(const struct cn_txn_coord *c,
                                      const char *id)
{
    const struct txn_entry *e = led_entry(c, cn_tc_entry_find(c, id));
    return e ? &e->meta : NULL;
}

const struct cn_txn_meta *cn_txn_find_pid(const struct cn_txn_coord *c,
                                          int64_t pid)
{
    const struct txn_entry *e = led_entry(c, cn_tc_entry_by_pid(c, pid));
    return e ? &e->meta : NULL;
}

bool cn_txn_busy(const struct cn_txn_coord *c, const char *id)
{
    const struct txn_entry *e = led_entry(c, cn_tc_entry_find(c, id));
    return e && e->busy;
}

int cn_txn_foreach(const struct cn_txn_coord *c, int32_t part,
                   int (*fn)(void *arg, const struct cn_txn_meta *m),
                   void *arg)
{
    for (size_t i = 0; i < c->buckets; i++)
        for (const struct txn_entry *e = c->table[i]; e; e = e->next) {
            if ((part >= 0 && e->part != part) ||
                !cn_tc_part_led(c, e->part) || e->meta.state == CN_TXN_DEAD)
                continue;
            int rc = fn(arg, &e->meta);
            if (rc)
                return rc;
        }
    return 0;
}

size_t cn_txn_count(const struct cn_txn_coord *c, int32_t part)
{
    if (part < 0)
        return c->count;
    return part < c->cfg.nparts ? c->part_ids[part] : 0;
}

void cn_txn_get_stats(const struct cn_txn_coord *c, struct cn_txn_stats *out)
{
    memset(out, 0, sizeof *out);
    for (size_t i = 0; i < c->buckets; i++)
        for (const struct txn_entry *e = c->table[i]; e; e = e->next)
            if (cn_txn_state_valid((int)e->meta.state))
                out->ids_by_state[e->meta.state]++;
    out->commits = c->commits;
    out->aborts = c->aborts;
    out->timed_out_aborts = c->timed_out_aborts;
    out->fenced = c->fenced;
    out->marker_retry_queue = c->retries;
    for (const struct txn_parked *pk = c->parked; pk; pk = pk->next)
        if (pk->reason == PARK_BUSY)
            out->parked_requests++;
    out->commit_ms = c->commit_ms;
    out->abort_ms = c->abort_ms;
}
