/*
 * ctl.c - the cluster controller's state machine (see ctl.h).
 *
 * The machine keeps only what the image cannot: whether it leads, the
 * queue of requests waiting for their turn, the one proposal in flight and
 * when each broker was last heard from (sessions are the leader's alone,
 * as in Kafka: a new leader gives every broker a fresh session).
 */
#include "meta/ctl.h"
#include "meta/ctl_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "meta/elect.h"
#include "proto/kerr.h"

/* After the machine's own proposal (bootstrap, fence) failed, the next
 * waits this long. */
#define RETRY_MS 100

/* ---- small helpers ---------------------------------------------------- */

uint64_t ctl_rand(struct cn_ctl *c)
{
    /* splitmix64: a seeded sequence, so a test can replay a run. */
    uint64_t z = (c->rng += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static struct cn_bytes dup_bytes(struct cn_arena *a, struct cn_bytes b)
{
    if (b.len <= 0)
        return b;
    uint8_t *p = cn_arena_alloc(a, (size_t)b.len);
    if (!p)
        return CN_BYTES_NULL;
    memcpy(p, b.ptr, (size_t)b.len);
    return cn_bytes_of(p, b.len);
}

bool ctl_has_id(const int32_t *ids, int32_t n, int32_t id)
{
    for (int32_t i = 0; i < n; i++)
        if (ids[i] == id)
            return true;
    return false;
}

void cn_ctl_actions_init(struct cn_ctl_actions *a)
{
    memset(a, 0, sizeof *a);
    cn_arena_init(&a->arena);
    a->timer_mono_ms = -1;
}

void cn_ctl_actions_reset(struct cn_ctl_actions *a)
{
    cn_arena_fini(&a->arena);
    cn_arena_init(&a->arena);
    a->propose = false;
    a->seq = 0;
    a->recs = NULL;
    a->nrecs = 0;
    a->nanswers = 0;
    a->nstandbys = 0;
    a->timer_mono_ms = -1;
}

void cn_ctl_actions_fini(struct cn_ctl_actions *a)
{
    cn_arena_fini(&a->arena);
    free(a->answers);
    free(a->standbys);
    memset(a, 0, sizeof *a);
}

struct cn_ctl_answer *ctl_push_answer(struct cn_ctl_actions *a,
                                      const struct cn_ctl_event *ev,
                                      int16_t error)
{
    if (a->nanswers == a->answers_cap) {
        size_t cap = a->answers_cap ? 2 * a->answers_cap : 8;
        struct cn_ctl_answer *n = realloc(a->answers, cap * sizeof *n);
        if (!n)
            return NULL; /* the caller's request times out client side */
        a->answers = n;
        a->answers_cap = cap;
    }
    struct cn_ctl_answer *ans = &a->answers[a->nanswers++];
    memset(ans, 0, sizeof *ans);
    ans->kind = ev->kind;
    ans->token = ev->token;
    ans->error = error;
    return ans;
}

void ctl_answer_error(struct cn_ctl_actions *a, const struct cn_ctl_event *ev,
                      int16_t error, const char *fmt, ...)
{
    struct cn_ctl_answer *ans = ctl_push_answer(a, ev, error);
    if (!ans || !fmt)
        return;
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    ans->message = cn_arena_strdup(&a->arena, cn_bytes_str(buf));
}

static void push_standby(struct cn_ctl_actions *a, int32_t id,
                         const char *addr)
{
    if (a->nstandbys == a->standbys_cap) {
        size_t cap = a->standbys_cap ? 2 * a->standbys_cap : 4;
        struct cn_ctl_standby *n = realloc(a->standbys, cap * sizeof *n);
        if (!n)
            return; /* the next registration asks again */
        a->standbys = n;
        a->standbys_cap = cap;
    }
    a->standbys[a->nstandbys].id = id;
    a->standbys[a->nstandbys].address = cn_arena_strdup(&a->arena,
                                                        cn_bytes_str(addr));
    a->nstandbys++;
}

/* ---- sessions --------------------------------------------------------- */

struct session *ctl_session(struct cn_ctl *c, int32_t id, int64_t now_ms)
{
    for (size_t i = 0; i < c->nsessions; i++)
        if (c->sessions[i].id == id)
            return &c->sessions[i];
    if (c->nsessions == c->sessions_cap) {
        size_t cap = c->sessions_cap ? 2 * c->sessions_cap : 8;
        struct session *n = realloc(c->sessions, cap * sizeof *n);
        if (!n)
            return NULL;
        c->sessions = n;
        c->sessions_cap = cap;
    }
    /* A broker first seen now gets a whole session: a new leader must not
     * fence brokers whose heartbeats went to the old one. */
    c->sessions[c->nsessions] = (struct session){id, now_ms, -1, -1};
    return &c->sessions[c->nsessions++];
}

static bool session_expired(struct cn_ctl *c, int32_t id, int64_t now_ms)
{
    struct session *s = ctl_session(c, id, now_ms);
    /* Kafka's hasValidSession: valid while now - last <= timeout. */
    return s && now_ms - s->last_ms > c->cfg.session_timeout_ms;
}

/* ---- image views ------------------------------------------------------ */

/* The brokers that may lead: registered, unfenced, not shutting down,
 * ascending; `except` (or -1) left out, `plus` (or -1) put in. */
struct cn_elect_usable ctl_usable(const struct cn_image *img,
                                  struct cn_arena *a, int32_t except,
                                  int32_t plus)
{
    size_t nb = cn_image_broker_count(img);
    int32_t *ids = cn_arena_calloc(a, nb + 1, sizeof *ids);
    size_t n = 0;
    for (size_t i = 0; ids && i < nb; i++) {
        const struct cn_image_broker *b = cn_image_broker_at(img, i);
        bool ok = !b->fenced && !b->in_controlled_shutdown;
        if ((ok && b->id != except) || b->id == plus)
            ids[n++] = b->id;
    }
    return (struct cn_elect_usable){ids, n};
}

static struct cn_elect_part elect_part(const struct cn_image_part *p)
{
    return (struct cn_elect_part){p->replicas, p->nreplicas, p->isr, p->nisr,
                                  p->leader};
}

/* ---- proposals -------------------------------------------------------- */

struct cn_mrec *ctl_rec_add(struct recs *r, int16_t type)
{
    if (r->n == r->cap) {
        size_t cap = r->cap ? 2 * r->cap : 8;
        struct cn_mrec *v = cn_arena_calloc(r->a, cap, sizeof *v);
        if (!v) {
            r->oom = true;
            return NULL;
        }
        if (r->n)
            memcpy(v, r->v, r->n * sizeof *v);
        r->v = v;
        r->cap = cap;
    }
    struct cn_mrec *m = &r->v[r->n++];
    memset(m, 0, sizeof *m);
    m->type = type;
    m->version = cn_mrec_version(type);
    return m;
}

void ctl_propose(struct cn_ctl *c, struct cn_ctl_actions *acts, struct recs *r,
                 enum flight_kind kind, struct qreq *req)
{
    acts->propose = true;
    acts->seq = ++c->next_seq;
    acts->recs = r->v;
    acts->nrecs = r->n;
    c->flight.active = true;
    c->flight.seq = acts->seq;
    c->flight.kind = kind;
    c->flight.req = req;
}

int32_t *ctl_copy_ids(struct cn_arena *a, const int32_t *ids, int32_t n)
{
    int32_t *v = cn_arena_calloc(a, (size_t)(n > 0 ? n : 1), sizeof *v);
    if (v && n > 0)
        memcpy(v, ids, (size_t)n * sizeof *v);
    return v;
}

/* Kafka's handleBrokerFenced (ctl_int.h). */
void ctl_fence_changes(const struct cn_image *img, int32_t id,
                       const struct cn_elect_usable *u, struct recs *r)
{
    const struct cn_image_topic *t = NULL;
    while ((t = cn_image_topic_next(img, t))) {
        for (int32_t p = 0; p < t->nparts; p++) {
            const struct cn_image_part *ip = &t->parts[p];
            struct cn_elect_part ep = elect_part(ip);
            if (!ctl_has_id(ip->isr, ip->nisr, id) && ip->leader != id)
                continue;
            int32_t *isr = cn_arena_calloc(r->a, (size_t)ip->nisr + 1,
                                           sizeof *isr);
            int32_t nisr, leader;
            if (!isr) {
                r->oom = true;
                return;
            }
            if (!cn_elect_on_fence(&ep, id, u, isr, &nisr, &leader))
                continue;
            struct cn_mrec *m = ctl_rec_add(r, CN_MREC_PARTITION_CHANGE);
            if (!m)
                return;
            struct cn_partition_change_record *pc = &m->u.partition_change;
            cn_partition_change_record_init(pc);
            pc->topic_id = t->id;
            pc->partition_id = p;
            if (nisr != ip->nisr) {
                pc->isr = isr;
                pc->isr_len = nisr;
            }
            if (leader != ip->leader)
                pc->leader = leader;
        }
    }
}

/* Leaderless partitions that broker `id` (in u now) can lead again. */
static void unfence_changes(const struct cn_image *img, int32_t id,
                            const struct cn_elect_usable *u, struct recs *r)
{
    const struct cn_image_topic *t = NULL;
    while ((t = cn_image_topic_next(img, t))) {
        for (int32_t p = 0; p < t->nparts; p++) {
            const struct cn_image_part *ip = &t->parts[p];
            struct cn_elect_part ep = elect_part(ip);
            int32_t leader;
            if (!ctl_has_id(ip->isr, ip->nisr, id) ||
                !cn_elect_on_unfence(&ep, u, &leader))
                continue;
            struct cn_mrec *m = ctl_rec_add(r, CN_MREC_PARTITION_CHANGE);
            if (!m)
                return;
            cn_partition_change_record_init(&m->u.partition_change);
            m->u.partition_change.topic_id = t->id;
            m->u.partition_change.partition_id = p;
            m->u.partition_change.leader = leader;
        }
    }
}

static bool propose_bootstrap(struct cn_ctl *c, struct cn_ctl_actions *acts)
{
    struct recs r = {.a = &acts->arena};
    char id[CN_META_CLUSTER_ID_MAX + 1];
    if (c->cluster_id[0]) {
        snprintf(id, sizeof id, "%s", c->cluster_id);
    } else {
        /* Kafka's ids are 22 characters of URL-safe base64. */
        static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopq"
                                  "rstuvwxyz0123456789-_";
        for (int i = 0; i < 22; i++)
            id[i] = b64[ctl_rand(c) % 64];
        id[22] = '\0';
    }
    struct cn_mrec *m = ctl_rec_add(&r, CN_MREC_CLUSTER_ID);
    if (!m)
        return false;
    m->u.cluster_id.id = dup_bytes(r.a, cn_bytes_str(id));
    m = ctl_rec_add(&r, CN_MREC_FEATURE_LEVEL);
    if (!m)
        return false;
    cn_feature_level_record_init(&m->u.feature_level);
    m->u.feature_level.name = cn_bytes_str("metadata.version");
    m->u.feature_level.feature_level = c->cfg.metadata_version;
    if (c->cfg.transaction_version > 0) {
        m = ctl_rec_add(&r, CN_MREC_FEATURE_LEVEL);
        if (!m)
            return false;
        cn_feature_level_record_init(&m->u.feature_level);
        m->u.feature_level.name = cn_bytes_str("transaction.version");
        m->u.feature_level.feature_level = c->cfg.transaction_version;
    }
    ctl_propose(c, acts, &r, FLIGHT_BOOT, NULL);
    return true;
}

/* Fences the first unfenced broker whose session ran out, if any. */
static bool propose_fence(struct cn_ctl *c, const struct cn_image *img,
                          int64_t now_ms, struct cn_ctl_actions *acts)
{
    size_t nb = cn_image_broker_count(img);
    for (size_t i = 0; i < nb; i++) {
        const struct cn_image_broker *b = cn_image_broker_at(img, i);
        if (b->fenced || !session_expired(c, b->id, now_ms))
            continue;
        struct recs r = {.a = &acts->arena};
        struct cn_elect_usable u = ctl_usable(img, r.a, b->id, -1);
        /* Partition changes first, as Kafka writes them: the fence record
         * closes the entry. */
        ctl_fence_changes(img, b->id, &u, &r);
        struct cn_mrec *m = ctl_rec_add(&r, CN_MREC_FENCE_BROKER);
        if (!m || r.oom || !u.ids)
            return false;
        cn_fence_broker_record_init(&m->u.fence_broker);
        m->u.fence_broker.id = b->id;
        m->u.fence_broker.epoch = b->epoch;
        ctl_propose(c, acts, &r, FLIGHT_FENCE, NULL);
        return true;
    }
    return false;
}

/* ---- decisions on requests -------------------------------------------- */

/* Each returns true when it proposed (req is then the flight's) and false
 * when it answered at once. */

static bool decide_register(struct cn_ctl *c, const struct cn_image *img,
                            int64_t now_ms, struct qreq *req,
                            struct cn_ctl_actions *acts)
{
    const struct cn_ctl_event *ev = &req->ev;
    const struct cn_ctl_register *rq = &ev->u.reg;
    const char *cid = cn_image_cluster_id(img);
    if (!cn_bytes_eq_str(rq->cluster_id, cid)) {
        ctl_answer_error(acts, ev, KAFKA_INCONSISTENT_CLUSTER_ID,
                         "Expected cluster ID %s, but got cluster ID %.*s.",
                         cid,
                         rq->cluster_id.len > 0 ? (int)rq->cluster_id.len : 0,
                         rq->cluster_id.len > 0
                             ? (const char *)rq->cluster_id.ptr
                             : "");
        return false;
    }
    const struct cn_image_broker *old = cn_image_broker_find(img,
                                                             rq->broker_id);
    if (old && !old->fenced && !session_expired(c, old->id, now_ms) &&
        memcmp(old->incarnation.b, rq->incarnation.b, 16) != 0) {
        ctl_answer_error(acts, ev, KAFKA_DUPLICATE_BROKER_REGISTRATION,
                         "Another broker is registered with that broker id.");
        return false;
    }
    struct recs r = {.a = &acts->arena};
    if (old && !old->fenced) {
        /* The new registration starts fenced: its old self must stop
         * leading first, in the same entry. */
        struct cn_elect_usable u = ctl_usable(img, r.a, old->id, -1);
        if (!u.ids)
            goto oom;
        ctl_fence_changes(img, old->id, &u, &r);
    }
    struct cn_mrec *m = ctl_rec_add(&r, CN_MREC_REGISTER_BROKER);
    if (!m || r.oom)
        goto oom;
    struct cn_register_broker_record *rb = &m->u.register_broker;
    cn_register_broker_record_init(rb);
    rb->broker_id = rq->broker_id;
    rb->incarnation_id = rq->incarnation;
    /* The entry's offset, which only the executor knows: it writes it
     * over the -1 when it proposes (KIP-631: the epoch is the offset). */
    rb->broker_epoch = -1;
    rb->end_points = cn_arena_calloc(r.a, rq->neps + 1,
                                     sizeof *rb->end_points);
    if (!rb->end_points)
        goto oom;
    for (size_t i = 0; i < rq->neps; i++) {
        rb->end_points[i].name = rq->eps[i].name;
        rb->end_points[i].host = rq->eps[i].host;
        rb->end_points[i].port = rq->eps[i].port;
        rb->end_points[i].security_protocol = rq->eps[i].security_protocol;
    }
    rb->end_points_len = (int32_t)rq->neps;
    rb->rack = rq->rack;
    rb->fenced = true;
    ctl_propose(c, acts, &r, FLIGHT_REQ, req);
    if (rq->neps > 0) {
        char addr[300];
        snprintf(addr, sizeof addr, "%.*s:%u", (int)rq->eps[0].host.len,
                 rq->eps[0].host.len > 0 ? (const char *)rq->eps[0].host.ptr
                                         : "",
                 (unsigned)rq->eps[0].port);
        c->flight.standby_addr = strdup(addr);
    }
    return true;
oom:
    ctl_answer_error(acts, ev, KAFKA_UNKNOWN_SERVER_ERROR, NULL);
    return false;
}

/* The broker's registration, or an answer saying why it has none. */
static const struct cn_image_broker *check_epoch(const struct cn_image *img,
                                                 const struct cn_ctl_event *ev,
                                                 int32_t id, int64_t epoch,
                                                 struct cn_ctl_actions *acts)
{
    const struct cn_image_broker *b = cn_image_broker_find(img, id);
    if (!b) {
        ctl_answer_error(acts, ev, KAFKA_BROKER_ID_NOT_REGISTERED,
                         "No registration found for broker %d", id);
        return NULL;
    }
    if (b->epoch != epoch) {
        ctl_answer_error(
            acts, ev, KAFKA_STALE_BROKER_EPOCH,
            "Expected broker epoch %lld, but got broker epoch %lld",
            (long long)b->epoch, (long long)epoch);
        return NULL;
    }
    return b;
}

static bool decide_heartbeat(struct cn_ctl *c, const struct cn_image *img,
                             int64_t now_ms, struct qreq *req,
                             struct cn_ctl_actions *acts)
{
    const struct cn_ctl_event *ev = &req->ev;
    const struct cn_ctl_heartbeat *hb = &ev->u.hb;
    const struct cn_image_broker *b = check_epoch(img, ev, hb->broker_id,
                                                  hb->broker_epoch, acts);
    if (!b)
        return false;
    /* Kafka's BrokerHeartbeatManager: a broker in controlled shutdown
     * stays there whatever its heartbeats ask. */
    if (hb->want_shut_down || (b->in_controlled_shutdown && !b->fenced))
        return ctl_decide_shutdown(c, img, now_ms, req, b, acts);
    /* Caught up: it has applied its own registration, so it knows the
     * cluster as of the moment it joined (KIP-631). */
    bool caught_up = hb->metadata_offset >= b->epoch;
    if (b->fenced && caught_up && !hb->want_fence) {
        struct recs r = {.a = &acts->arena};
        struct cn_mrec *m = ctl_rec_add(&r, CN_MREC_UNFENCE_BROKER);
        struct cn_elect_usable u = ctl_usable(img, r.a, -1, b->id);
        if (!m || !u.ids) {
            ctl_answer_error(acts, ev, KAFKA_UNKNOWN_SERVER_ERROR, NULL);
            return false;
        }
        cn_unfence_broker_record_init(&m->u.unfence_broker);
        m->u.unfence_broker.id = b->id;
        m->u.unfence_broker.epoch = b->epoch;
        unfence_changes(img, b->id, &u, &r);
        if (r.oom) {
            ctl_answer_error(acts, ev, KAFKA_UNKNOWN_SERVER_ERROR, NULL);
            return false;
        }
        ctl_propose(c, acts, &r, FLIGHT_REQ, req);
        c->flight.done.u.hb.fenced = false;
        c->flight.done.u.hb.caught_up = true;
        return true;
    }
    struct cn_ctl_answer *ans = ctl_push_answer(acts, ev, 0);
    if (ans) {
        ans->u.hb.fenced = b->fenced;
        ans->u.hb.caught_up = caught_up;
    }
    return false;
}

static bool decide_alloc_pids(struct cn_ctl *c, const struct cn_image *img,
                              struct qreq *req, struct cn_ctl_actions *acts)
{
    const struct cn_ctl_event *ev = &req->ev;
    const struct cn_ctl_alloc_pids *ap = &ev->u.pids;
    if (!check_epoch(img, ev, ap->broker_id, ap->broker_epoch, acts))
        return false;
    /* Decided against an image holding every earlier block (one proposal
     * in flight), so blocks never overlap; a block whose outcome was
     * unknown may have committed and is then simply skipped. */
    int64_t start = cn_image_next_producer_id(img);
    struct recs r = {.a = &acts->arena};
    struct cn_mrec *m = ctl_rec_add(&r, CN_MREC_PRODUCER_IDS);
    if (!m) {
        ctl_answer_error(acts, ev, KAFKA_UNKNOWN_SERVER_ERROR, NULL);
        return false;
    }
    cn_producer_ids_record_init(&m->u.producer_ids);
    m->u.producer_ids.broker_id = ap->broker_id;
    m->u.producer_ids.broker_epoch = ap->broker_epoch;
    m->u.producer_ids.next_producer_id = start + c->cfg.pid_block;
    ctl_propose(c, acts, &r, FLIGHT_REQ, req);
    c->flight.done.u.pids.start = start;
    c->flight.done.u.pids.len = c->cfg.pid_block;
    return true;
}

static bool decide(struct cn_ctl *c, const struct cn_image *img,
                   int64_t now_ms, struct qreq *req,
                   struct cn_ctl_actions *acts)
{
    switch (req->ev.kind) {
    case CN_CTE_REGISTER: return decide_register(c, img, now_ms, req, acts);
    case CN_CTE_HEARTBEAT: return decide_heartbeat(c, img, now_ms, req, acts);
    case CN_CTE_CREATE_TOPIC:
        return ctl_decide_create_topic(c, img, req, acts);
    case CN_CTE_DELETE_TOPIC:
        return ctl_decide_delete_topic(c, img, req, acts);
    case CN_CTE_CREATE_PARTITIONS:
        return ctl_decide_create_partitions(c, img, req, acts);
    case CN_CTE_ALLOC_PIDS: return decide_alloc_pids(c, img, req, acts);
    case CN_CTE_ALTER_TOPIC_CONFIGS:
        return ctl_decide_alter_configs(c, img, req, acts);
    case CN_CTE_ALTER_PARTITION:
        return ctl_decide_alter_partition(c, img, req, acts);
    default: return false;
    }
}

/* ---- the queue -------------------------------------------------------- */

static void qreq_free(struct qreq *q)
{
    if (!q)
        return;
    cn_arena_fini(&q->arena);
    free(q);
}

/* A deep copy of a request event: its views die when cn_ctl_step
 * returns. */

/* A manual assignment's copy in a, or NULL when out of memory. */
static const struct cn_ctl_replicas *
copy_assign(struct cn_arena *a, const struct cn_ctl_replicas *src, int32_t n)
{
    struct cn_ctl_replicas *as = cn_arena_calloc(a, (size_t)n + 1, sizeof *as);
    for (int32_t i = 0; as && i < n; i++) {
        as[i].n = src[i].n;
        as[i].ids = ctl_copy_ids(a, src[i].ids, src[i].n);
        if (!as[i].ids)
            return NULL;
    }
    return as;
}
static struct qreq *qreq_copy(const struct cn_ctl_event *ev)
{
    struct qreq *q = calloc(1, sizeof *q);
    if (!q)
        return NULL;
    cn_arena_init(&q->arena);
    struct cn_arena *a = &q->arena;
    q->ev = *ev;
    bool ok = true;
    switch (ev->kind) {
    case CN_CTE_REGISTER: {
        struct cn_ctl_register *r = &q->ev.u.reg;
        struct cn_ctl_endpoint *eps = cn_arena_calloc(a, r->neps + 1,
                                                      sizeof *eps);
        ok = eps != NULL;
        for (size_t i = 0; ok && i < r->neps; i++) {
            eps[i] = ev->u.reg.eps[i];
            eps[i].name = dup_bytes(a, eps[i].name);
            eps[i].host = dup_bytes(a, eps[i].host);
        }
        r->eps = eps;
        r->cluster_id = dup_bytes(a, r->cluster_id);
        r->rack = dup_bytes(a, r->rack);
        break;
    }
    case CN_CTE_CREATE_TOPIC: {
        struct cn_ctl_create_topic *t = &q->ev.u.create;
        t->name = dup_bytes(a, t->name);
        if (t->assign) {
            t->assign = copy_assign(a, t->assign, t->nassign);
            ok = t->assign != NULL;
        }
        struct cn_ctl_kv *kv = cn_arena_calloc(a, t->nconfigs + 1, sizeof *kv);
        ok = ok && kv;
        for (size_t i = 0; ok && i < t->nconfigs; i++) {
            kv[i].name = dup_bytes(a, ev->u.create.configs[i].name);
            kv[i].value = dup_bytes(a, ev->u.create.configs[i].value);
        }
        t->configs = kv;
        break;
    }
    case CN_CTE_DELETE_TOPIC:
        q->ev.u.del.name = dup_bytes(a, q->ev.u.del.name);
        break;
    case CN_CTE_CREATE_PARTITIONS: {
        struct cn_ctl_create_partitions *t = &q->ev.u.parts;
        t->name = dup_bytes(a, t->name);
        if (t->assign) {
            t->assign = copy_assign(a, t->assign, t->nassign);
            ok = t->assign != NULL;
        }
        break;
    }
    case CN_CTE_ALTER_TOPIC_CONFIGS: {
        struct cn_ctl_alter_configs *t = &q->ev.u.alter;
        t->name = dup_bytes(a, t->name);
        struct cn_ctl_kv *kv = cn_arena_calloc(a, t->nconfigs + 1, sizeof *kv);
        ok = kv != NULL;
        for (size_t i = 0; ok && i < t->nconfigs; i++) {
            kv[i].name = dup_bytes(a, ev->u.alter.configs[i].name);
            kv[i].value = dup_bytes(a, ev->u.alter.configs[i].value);
        }
        t->configs = kv;
        break;
    }
    case CN_CTE_ALTER_PARTITION: {
        struct cn_ctl_alter_partition *t = &q->ev.u.isr;
        int32_t n = t->nisr > 0 ? t->nisr : 0;
        struct cn_ctl_isr_member *m = cn_arena_calloc(a, (size_t)n + 1,
                                                      sizeof *m);
        ok = m != NULL;
        if (ok && n > 0)
            memcpy(m, ev->u.isr.isr, (size_t)n * sizeof *m);
        t->isr = m;
        break;
    }
    default: break;
    }
    if (!ok) {
        qreq_free(q);
        return NULL;
    }
    return q;
}

static void enqueue(struct cn_ctl *c, struct qreq *q)
{
    if (c->qtail)
        c->qtail->next = q;
    else
        c->qhead = q;
    c->qtail = q;
    c->nqueued++;
}

static struct qreq *dequeue(struct cn_ctl *c)
{
    struct qreq *q = c->qhead;
    if (!q)
        return NULL;
    c->qhead = q->next;
    if (!c->qhead)
        c->qtail = NULL;
    q->next = NULL;
    c->nqueued--;
    return q;
}

/* ---- the machine ------------------------------------------------------ */

struct cn_ctl *cn_ctl_new(const struct cn_ctl_config *cfg)
{
    struct cn_ctl *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->cfg = *cfg;
    c->cluster_id = strdup(cfg->cluster_id ? cfg->cluster_id : "");
    if (!c->cluster_id) {
        free(c);
        return NULL;
    }
    c->cfg.cluster_id = c->cluster_id;
    if (c->cfg.pid_block <= 0)
        c->cfg.pid_block = 1000;
    c->rng = cfg->seed;
    return c;
}

void cn_ctl_free(struct cn_ctl *c)
{
    if (!c)
        return;
    struct qreq *q;
    while ((q = dequeue(c)))
        qreq_free(q);
    qreq_free(c->flight.req);
    free(c->flight.standby_addr);
    free(c->sessions);
    free(c->cluster_id);
    free(c);
}

bool cn_ctl_is_leader(const struct cn_ctl *c)
{
    return c->leader;
}

bool cn_ctl_in_flight(const struct cn_ctl *c)
{
    return c->flight.active;
}

size_t cn_ctl_queued(const struct cn_ctl *c)
{
    return c->nqueued;
}

/* Decides what can be decided now: the bootstrap, a fence, then queued
 * requests, until one of them proposes. */
static void pump(struct cn_ctl *c, const struct cn_image *img, int64_t now_ms,
                 struct cn_ctl_actions *acts)
{
    while (c->leader && !c->flight.active) {
        /* The machine's own proposals wait a little after one failed: a
         * leader that refuses at once (a leadership transfer) must not
         * make the executor spin. */
        bool own = now_ms >= c->retry_ms;
        if (own && !cn_image_cluster_id(img)[0]) {
            propose_bootstrap(c, acts);
            return;
        }
        if (own && propose_fence(c, img, now_ms, acts))
            return;
        struct qreq *q = dequeue(c);
        if (!q)
            return;
        memset(&c->flight.done, 0, sizeof c->flight.done);
        if (!decide(c, img, now_ms, q, acts))
            qreq_free(q);
    }
}

static void resolve(struct cn_ctl *c, const struct cn_image *img,
                    int64_t now_ms, const struct cn_ctl_event *ev,
                    struct cn_ctl_actions *acts)
{
    struct flight *f = &c->flight;
    if (!f->active || ev->u.proposed.seq != f->seq)
        return;
    int16_t err = ev->u.proposed.error;
    if (err && !f->req)
        c->retry_ms = now_ms + RETRY_MS;
    if (f->req && !err && f->req->ev.kind == CN_CTE_ALTER_PARTITION) {
        /* Kafka answers with the partition after the change. */
        ctl_answer_partition(img, &f->req->ev, acts);
    } else if (f->req) {
        if (!err && f->req->ev.kind == CN_CTE_HEARTBEAT)
            ctl_shutdown_applied(c, img, now_ms, &f->req->ev,
                                 ev->u.proposed.offset);
        struct cn_ctl_answer *ans = ctl_push_answer(acts, &f->req->ev, err);
        if (ans && !err) {
            ans->u = f->done.u;
            if (f->req->ev.kind == CN_CTE_REGISTER) {
                /* The epoch is what the applied record says (the
                 * executor wrote the entry's offset into it). */
                const struct cn_image_broker *b =
                    cn_image_broker_find(img, f->req->ev.u.reg.broker_id);
                ans->u.broker_epoch = b ? b->epoch : ev->u.proposed.offset;
            }
        }
        if (!err && f->req->ev.kind == CN_CTE_REGISTER && f->standby_addr)
            push_standby(acts, f->req->ev.u.reg.broker_id, f->standby_addr);
    }
    qreq_free(f->req);
    free(f->standby_addr);
    memset(f, 0, sizeof *f);
}

static int64_t next_deadline(struct cn_ctl *c, const struct cn_image *img,
                             int64_t now_ms)
{
    int64_t t = -1;
    size_t nb = cn_image_broker_count(img);
    for (size_t i = 0; c->leader && i < nb; i++) {
        const struct cn_image_broker *b = cn_image_broker_at(img, i);
        struct session *s = b->fenced ? NULL : ctl_session(c, b->id, now_ms);
        if (!s)
            continue;
        int64_t d = s->last_ms + c->cfg.session_timeout_ms + 1;
        if (t < 0 || d < t)
            t = d;
    }
    if (c->leader && c->retry_ms > now_ms && (t < 0 || c->retry_ms < t))
        t = c->retry_ms;
    return t;
}

void cn_ctl_step(struct cn_ctl *c, const struct cn_image *img, int64_t now_ms,
                 const struct cn_ctl_event *ev, struct cn_ctl_actions *acts)
{
    switch (ev->kind) {
    case CN_CTE_LEADER:
        c->leader = true;
        c->term = ev->u.term;
        c->retry_ms = 0;
        c->nsessions = 0; /* every broker gets a fresh session */
        break;
    case CN_CTE_UNLEADER: {
        c->leader = false;
        c->nsessions = 0;
        struct qreq *q;
        while ((q = dequeue(c))) {
            ctl_answer_error(acts, &q->ev, KAFKA_NOT_CONTROLLER, NULL);
            qreq_free(q);
        }
        break;
    }
    case CN_CTE_PROPOSED: resolve(c, img, now_ms, ev, acts); break;
    case CN_CTE_COMMITTED:
    case CN_CTE_TICK: break;
    default: {
        if (!c->leader) {
            ctl_answer_error(acts, ev, KAFKA_NOT_CONTROLLER, NULL);
            break;
        }
        if (ev->kind == CN_CTE_HEARTBEAT) {
            /* The session counts from arrival, not from the decision: a
             * heartbeat waiting behind a proposal still keeps it alive. */
            const struct cn_image_broker *b =
                cn_image_broker_find(img, ev->u.hb.broker_id);
            struct session *s = b && b->epoch == ev->u.hb.broker_epoch
                                    ? ctl_session(c, b->id, now_ms)
                                    : NULL;
            if (s) {
                s->last_ms = now_ms;
                /* What it has applied: a controlled shutdown waits for
                 * every active broker to know the new leaders. */
                s->metadata_offset = ev->u.hb.metadata_offset;
            }
        }
        struct qreq *q = qreq_copy(ev);
        if (!q) {
            ctl_answer_error(acts, ev, KAFKA_UNKNOWN_SERVER_ERROR, NULL);
            break;
        }
        enqueue(c, q);
        break;
    }
    }
    pump(c, img, now_ms, acts);
    acts->timer_mono_ms = next_deadline(c, img, now_ms);
}
