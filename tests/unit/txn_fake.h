/*
 * txn_fake.h - the world around the transaction coordinator's state
 * machine (txn/coord.h), faked for unit tests: a clock moved by hand,
 * durability that completes or fails each APPEND when the test says, a
 * marker channel whose partitions answer when the test says, and producer
 * ids from a counter that can be told to run dry.
 *
 * The harness never feeds an event from inside the carrying out of
 * actions: a step's actions are copied out (records decoded, markers and
 * answers kept) and the test decides what comes next.  Every public fk_
 * call that steps the machine starts a new window; fk_new_*() look at
 * what the steps of the last call produced, fk_answer_for() at any
 * answer so far.
 *
 * Checked on every step, as CHECK failures of the running test:
 *  - every APPEND's record decodes, names the APPEND's id and part, and
 *    passes cn_txn_transition_ok(the id's last durable state, new state);
 *    an id absent from the log may only start Empty; one APPEND in flight
 *    per id (the busy rule);
 *  - no negative epoch in an APPEND, a marker send, or a successful
 *    InitProducerId / EndTxn answer;
 *  - everything an action points to lies inside the actions' arena;
 *  - a request is answered at most once (a PRODUCE_ADD not taken never);
 *  - after a TICK the timer asks for a later time (no busy loop).
 * And by fk_fini: every APPEND got exactly one WRITTEN, every marker
 * partition one result, every request one answer, unless the test said
 * it dropped them (fk_drop_*).
 *
 * Header-only, one harness per test binary (static state F).
 */
#ifndef CN_TESTS_TXN_FAKE_H
#define CN_TESTS_TXN_FAKE_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/say.h"
#include "base/wr.h"
#include "proto/kerr.h"
#include "txn/coord.h"
#include "txn/txn_log.h"
#include "txn/txn_state.h"
#include "unit.h"

#define FK_MAX 256 /* actions of each kind kept per test */
#define FK_TPS 16  /* partitions per request / marker send */
#define FK_IDS 64  /* ids whose durable state is tracked */
#define FK_ID_LEN 64

/* Marker failure default: what a partition leader that cannot append
 * answers. */
#define FK_MARKER_ERR KAFKA_KAFKA_STORAGE_ERROR

struct fk_app { /* one APPEND */
    char id[FK_ID_LEN];
    uint64_t seq;
    int32_t part;
    enum cn_txn_write_role role;
    bool tombstone;
    struct cn_txn_meta m; /* decoded record (state Dead: tombstone) */
    bool done, dropped;   /* WRITTEN fed / the test dropped it */
};

struct fk_mtp {
    char topic[FK_ID_LEN];
    int32_t partition;
    bool answered;
};

struct fk_mk { /* one SEND_MARKERS */
    char id[FK_ID_LEN];
    uint64_t seq;
    int64_t producer_id;
    int16_t producer_epoch;
    bool commit, first_after_decision;
    int32_t coordinator_epoch;
    size_t n;
    struct fk_mtp tp[FK_TPS];
    bool dropped;
};

struct fk_req { /* one request fed */
    enum cn_txn_req_kind kind;
    int answers;
    bool taken; /* PRODUCE_ADD: acts.taken */
    bool dropped;
};

struct fk_durable { /* the log's idea of an id */
    char id[FK_ID_LEN];
    enum cn_txn_state state;
    bool present;
};

static struct fk {
    struct cn_txn_coord *c;
    struct cn_txn_config cfg;
    struct cn_txn_pids pids;
    struct cn_txn_now now;
    struct cn_txn_actions acts;
    int64_t timer; /* the last step's timer_mono_ms */
    /* the last step's scalar results */
    bool taken, op_taken;
    bool adds;  /* cn_txn_produce_adds before the last PRODUCE_ADD */
    bool nomem; /* no action can be recorded: steps fail CN_ENOMEM */
    int16_t result;
    size_t resumed;
    /* producer ids */
    int64_t next_pid;
    bool pids_eagain;
    int pids_err;
    int pids_taken, want_pids;
    /* recorded actions; *_w: first index of the current window */
    struct fk_app app[FK_MAX];
    size_t napp, app_w;
    struct fk_mk mk[FK_MAX];
    size_t nmk, mk_w;
    struct cn_txn_answer ans[FK_MAX];
    size_t nans, ans_w;
    struct fk_req req[FK_MAX];
    size_t nreq;
    struct fk_durable dur[FK_IDS];
    size_t ndur;
    int steps;
} F;

/* ---- config and setup ------------------------------------------------- */

/* Today's defaults (config_keys.c) except a short abort check interval, so
 * tests move little time. */
static inline struct cn_txn_config fk_config(void)
{
    struct cn_txn_config cfg = {
        .nparts = 4,
        .transaction_version = 2,
        .verification_enable = true,
        .max_timeout_ms = 900000,
        .id_expiration_ms = 604800000,
        .abort_check_interval_ms = 10000,
        .expiry_check_interval_ms = 3600000,
        .park_max_ms = 1000,
        .marker_retry_ms = 1000,
    };
    return cfg;
}

static inline int fk_take_pid(void *ctx, int64_t *pid)
{
    (void)ctx;
    if (F.pids_eagain)
        return -EAGAIN;
    if (F.pids_err)
        return F.pids_err;
    *pid = F.next_pid++;
    F.pids_taken++;
    return 0;
}

static inline void fk_step(const struct cn_txn_event *ev);

static inline void fk_window(void)
{
    F.app_w = F.napp;
    F.mk_w = F.nmk;
    F.ans_w = F.nans;
}

static inline void fk_leader_epoch(int32_t part, int32_t coordinator_epoch)
{
    fk_window();
    struct cn_txn_event ev = {.kind = CN_TXE_LEADER, .now = F.now};
    ev.u.leader.part = part;
    ev.u.leader.coordinator_epoch = coordinator_epoch;
    fk_step(&ev);
}

static inline void fk_leader(int32_t part)
{
    fk_leader_epoch(part, 0);
}

/* A machine with cfg whose parts are not led yet (replay comes next). */
static inline void fk_init_loading(const struct cn_txn_config *cfg)
{
    memset(&F, 0, sizeof F);
    cn_say_max_level =
        CN_SAY_ERROR; /* the machine's log lines are noise here */
    F.cfg = *cfg;
    F.pids.take = fk_take_pid;
    F.next_pid = 1000;
    F.now.mono_ms = 50000;
    F.now.mono_us = F.now.mono_ms * 1000;
    F.now.wall_ms = 1700000000000LL;
    F.timer = INT64_MAX;
    cn_txn_actions_init(&F.acts);
    int rc = cn_txn_new(&F.cfg, &F.pids, &F.c);
    CHECK_EQ(rc, 0);
    if (rc)
        abort();
}

/* LEADER for every part. */
static inline void fk_lead_all(void)
{
    for (int32_t p = 0; p < F.cfg.nparts; p++)
        fk_leader(p);
}

/* A machine with cfg leading every part of an empty log. */
static inline void fk_init_cfg(const struct cn_txn_config *cfg)
{
    fk_init_loading(cfg);
    fk_lead_all();
}

static inline void fk_init(void)
{
    struct cn_txn_config cfg = fk_config();
    fk_init_cfg(&cfg);
}

/* ---- bookkeeping ------------------------------------------------------ */

static inline int32_t fk_part(const char *id)
{
    return cn_txn_partition_for((const uint8_t *)id, strlen(id), F.cfg.nparts);
}

static inline struct fk_durable *fk_dur(const char *id, bool make)
{
    for (size_t i = 0; i < F.ndur; i++)
        if (strcmp(F.dur[i].id, id) == 0)
            return &F.dur[i];
    if (!make || F.ndur == FK_IDS)
        return NULL;
    struct fk_durable *d = &F.dur[F.ndur++];
    size_t n = strnlen(id, sizeof d->id - 1);
    memmove(d->id, id, n); /* id may be one of F's own copies */
    d->id[n] = 0;
    return d;
}

/* p[0..n) lies inside one chunk of a's handed-out bytes.  The chunk layout
 * mirrors base/arena.c (same project; this is the test's only view). */
struct fk_chunk {
    struct fk_chunk *next;
    size_t used, cap;
    _Alignas(16) uint8_t data[];
};

static inline bool fk_in_arena(const struct cn_arena *a, const void *p,
                               size_t n)
{
    const uint8_t *q = p;
    for (const struct fk_chunk *ch = (const struct fk_chunk *)a->head; ch;
         ch = ch->next)
        if (q >= ch->data && q + n <= ch->data + ch->used)
            return true;
    return false;
}

static inline bool fk_str_in_arena(const char *s)
{
    return s && fk_in_arena(&F.acts.arena, s, strlen(s) + 1);
}

static inline void fk_record_append(const struct cn_txn_action *a)
{
    CHECK(F.napp < FK_MAX);
    if (F.napp == FK_MAX)
        return;
    struct fk_app *r = &F.app[F.napp++];
    memset(r, 0, sizeof *r);
    cn_txn_meta_init(&r->m);
    CHECK(fk_str_in_arena(a->u.append.id));
    CHECK(a->u.append.key.len > 0 &&
          fk_in_arena(&F.acts.arena, a->u.append.key.ptr,
                      (size_t)a->u.append.key.len));
    CHECK(a->u.append.value.len < 0 ||
          fk_in_arena(&F.acts.arena, a->u.append.value.ptr,
                      (size_t)a->u.append.value.len));
    snprintf(r->id, sizeof r->id, "%s", a->u.append.id ? a->u.append.id : "");
    r->seq = a->u.append.seq;
    r->part = a->u.append.part;
    r->role = a->u.append.role;
    int rc = cn_txn_log_decode(a->u.append.key, a->u.append.value, &r->m,
                               &r->tombstone);
    CHECK_EQ(rc, 0);
    if (rc)
        return;
    if (r->tombstone)
        r->m.state = CN_TXN_DEAD;
    CHECK(strcmp(r->m.transactional_id, r->id) == 0);
    CHECK_EQ(r->part, fk_part(r->id));
    if (!r->tombstone) {
        CHECK(r->m.producer_epoch >= 0);
        CHECK(r->m.producer_id >= 0);
    }
    /* One change in flight per id. */
    for (size_t i = 0; i + 1 < F.napp; i++)
        if (!F.app[i].done && !F.app[i].dropped &&
            strcmp(F.app[i].id, r->id) == 0) {
            fprintf(stderr, "  %s: a second APPEND while one is in flight\n",
                    r->id);
            CHECK(!"one APPEND in flight per id");
        }
    struct fk_durable *d = fk_dur(r->id, false);
    if (d && d->present) {
        if (!cn_txn_transition_ok(d->state, r->m.state)) {
            fprintf(stderr, "  %s: %s -> %s\n", r->id,
                    cn_txn_state_name(d->state),
                    cn_txn_state_name(r->m.state));
            CHECK(!"cn_txn_transition_ok(durable, appended)");
        }
    } else {
        CHECK_EQ(r->m.state, CN_TXN_EMPTY); /* a new id starts Empty */
    }
}

static inline void fk_record_markers(const struct cn_txn_action *a)
{
    CHECK(F.nmk < FK_MAX);
    if (F.nmk == FK_MAX)
        return;
    struct fk_mk *k = &F.mk[F.nmk++];
    memset(k, 0, sizeof *k);
    CHECK(fk_str_in_arena(a->u.markers.id));
    snprintf(k->id, sizeof k->id, "%s",
             a->u.markers.id ? a->u.markers.id : "");
    k->seq = a->u.markers.seq;
    k->producer_id = a->u.markers.producer_id;
    k->producer_epoch = a->u.markers.producer_epoch;
    k->commit = a->u.markers.commit;
    k->first_after_decision = a->u.markers.first_after_decision;
    k->coordinator_epoch = a->u.markers.coordinator_epoch;
    CHECK(k->producer_epoch >= 0);
    CHECK(a->u.markers.n >= 1 && a->u.markers.n <= FK_TPS);
    k->n = a->u.markers.n <= FK_TPS ? a->u.markers.n : FK_TPS;
    CHECK(fk_in_arena(&F.acts.arena, a->u.markers.tps,
                      k->n * sizeof *a->u.markers.tps));
    for (size_t i = 0; i < k->n; i++) {
        CHECK(fk_str_in_arena(a->u.markers.tps[i].topic));
        snprintf(k->tp[i].topic, sizeof k->tp[i].topic, "%s",
                 a->u.markers.tps[i].topic ? a->u.markers.tps[i].topic : "");
        k->tp[i].partition = a->u.markers.tps[i].partition;
    }
}

static inline void fk_record_answer(const struct cn_txn_action *a)
{
    const struct cn_txn_answer *an = &a->u.answer;
    CHECK(F.nans < FK_MAX);
    if (F.nans == FK_MAX)
        return;
    F.ans[F.nans++] = *an;
    size_t t = (size_t)(uintptr_t)an->token;
    CHECK(t >= 1 && t <= F.nreq);
    if (t >= 1 && t <= F.nreq) {
        struct fk_req *r = &F.req[t - 1];
        r->answers++;
        CHECK_EQ(r->answers, 1);
        CHECK_EQ(an->kind, r->kind);
    }
    CHECK(an->producer_epoch >= -1);
    if (an->error == KAFKA_NONE &&
        (an->kind == CN_TXN_REQ_INIT_PID ||
         (an->kind == CN_TXN_REQ_END && an->api_version >= 5))) {
        CHECK(an->producer_epoch >= 0);
        CHECK(an->producer_id >= 0);
    }
}

/* Steps once, copies the actions out, resets them. */
static inline void fk_step(const struct cn_txn_event *ev)
{
    cn_txn_actions_reset(&F.acts);
    F.acts.fail_push = F.nomem;
    int rc = cn_txn_step(F.c, ev, &F.acts);
    CHECK_EQ(rc, F.nomem ? CN_ENOMEM : 0);
    F.steps++;
    CHECK(F.acts.n <= F.acts.cap);
    for (size_t i = 0; i < F.acts.n; i++) {
        const struct cn_txn_action *a = &F.acts.v[i];
        switch (a->kind) {
        case CN_TXA_APPEND: fk_record_append(a); break;
        case CN_TXA_SEND_MARKERS: fk_record_markers(a); break;
        case CN_TXA_ANSWER: fk_record_answer(a); break;
        case CN_TXA_WANT_PIDS: F.want_pids++; break;
        default: CHECK(!"unknown action kind");
        }
    }
    F.timer = F.acts.timer_mono_ms;
    F.taken = F.acts.taken;
    F.op_taken = F.acts.op_taken;
    F.result = F.acts.result;
    F.resumed = F.acts.resumed;
    if (ev->kind == CN_TXE_TICK)
        CHECK(F.timer > F.now.mono_ms);
    cn_txn_actions_reset(&F.acts);
}

/* ---- requests --------------------------------------------------------- */

/* Parses "t:0 t:1 u:3" into tps (topics point into the static pool). */
static inline size_t fk_tps(const char *spec, struct cn_txn_tp *tps)
{
    static char pool[FK_TPS][FK_ID_LEN];
    size_t n = 0;
    const char *s = spec ? spec : "";
    while (*s && n < FK_TPS) {
        while (*s == ' ')
            s++;
        if (!*s)
            break;
        const char *colon = strchr(s, ':');
        if (!colon)
            break;
        snprintf(pool[n], sizeof pool[n], "%.*s", (int)(colon - s), s);
        tps[n].topic = pool[n];
        tps[n].partition = (int32_t)strtol(colon + 1, (char **)&s, 10);
        n++;
    }
    return n;
}

static inline struct cn_txn_request
fk_rq(enum cn_txn_req_kind kind, const char *id, int64_t pid, int16_t epoch)
{
    struct cn_txn_request r = {
        .kind = kind,
        .transactional_id = id,
        .producer_id = pid,
        .producer_epoch = epoch,
        .timeout_ms = 60000,
        .api_version = kind == CN_TXN_REQ_INIT_PID      ? 4
                       : kind == CN_TXN_REQ_END         ? 4
                       : kind == CN_TXN_REQ_ADD_BATCHED ? 4
                                                        : 3,
    };
    return r;
}

/* Feeds r (a copy: the machine must not keep pointers into it, so the
 * strings are scribbled over afterwards) and returns its token. */
static inline int fk_send(const struct cn_txn_request *r, const char *spec)
{
    static char idbuf[FK_ID_LEN];
    struct cn_txn_tp tps[FK_TPS];
    fk_window();
    CHECK(F.nreq < FK_MAX);
    struct fk_req *q = &F.req[F.nreq++];
    memset(q, 0, sizeof *q);
    q->kind = r->kind;
    struct cn_txn_event ev = {.kind = CN_TXE_REQUEST, .now = F.now};
    ev.u.request = *r;
    ev.u.request.token = (void *)(uintptr_t)F.nreq;
    if (r->transactional_id) {
        snprintf(idbuf, sizeof idbuf, "%s", r->transactional_id);
        ev.u.request.transactional_id = idbuf;
    }
    if (spec) {
        ev.u.request.ntps = fk_tps(spec, tps);
        ev.u.request.tps = tps;
    }
    if (r->kind == CN_TXN_REQ_PRODUCE_ADD)
        F.adds = cn_txn_produce_adds(F.c, &ev.u.request);
    fk_step(&ev);
    q->taken = F.taken;
    /* The handler skips the step when the query says no. */
    if (r->kind == CN_TXN_REQ_PRODUCE_ADD && F.taken)
        CHECK(F.adds);
    if (r->kind == CN_TXN_REQ_PRODUCE_ADD && !F.taken)
        CHECK_EQ(q->answers, 0);
    memset(idbuf, 'X', sizeof idbuf - 1);
    for (size_t i = 0; spec && i < ev.u.request.ntps; i++)
        memset(tps[i].topic, 'Y', strlen(tps[i].topic));
    return (int)F.nreq;
}

static inline int fk_init_pid_v(const char *id, int64_t pid, int16_t epoch,
                                int16_t version)
{
    struct cn_txn_request r = fk_rq(CN_TXN_REQ_INIT_PID, id, pid, epoch);
    r.api_version = version;
    return fk_send(&r, NULL);
}

static inline int fk_init_pid(const char *id)
{
    return fk_init_pid_v(id, -1, -1, 4);
}

static inline int fk_add(const char *id, int64_t pid, int16_t epoch,
                         const char *spec)
{
    struct cn_txn_request r = fk_rq(CN_TXN_REQ_ADD_PARTS, id, pid, epoch);
    return fk_send(&r, spec);
}

static inline int fk_add_offsets(const char *id, int64_t pid, int16_t epoch,
                                 const char *spec)
{
    struct cn_txn_request r = fk_rq(CN_TXN_REQ_ADD_OFFSETS, id, pid, epoch);
    return fk_send(&r, spec);
}

static inline int fk_batched(const char *id, int64_t pid, int16_t epoch,
                             const char *spec, int16_t version)
{
    struct cn_txn_request r = fk_rq(CN_TXN_REQ_ADD_BATCHED, id, pid, epoch);
    r.api_version = version;
    return fk_send(&r, spec);
}

static inline int fk_end(const char *id, int64_t pid, int16_t epoch,
                         bool commit, int16_t version)
{
    struct cn_txn_request r = fk_rq(CN_TXN_REQ_END, id, pid, epoch);
    r.commit = commit;
    r.api_version = version;
    return fk_send(&r, NULL);
}

/* A produce's implicit add; F.taken tells whether it was taken. */
static inline int fk_produce_add(int64_t pid, int16_t epoch, const char *spec,
                                 bool v12)
{
    struct cn_txn_request r = fk_rq(CN_TXN_REQ_PRODUCE_ADD, NULL, pid, epoch);
    r.produce_v12 = v12;
    r.api_version = v12 ? 12 : 11;
    return fk_send(&r, spec);
}

/* WriteTxnMarkers abort / hanging check; F.result and F.op_taken. */
static inline void fk_op_abort(int64_t pid, const char *topic,
                               int32_t partition)
{
    fk_window();
    struct cn_txn_event ev = {.kind = CN_TXE_OPERATOR_ABORT, .now = F.now};
    ev.u.op.producer_id = pid;
    ev.u.op.topic = topic;
    ev.u.op.partition = partition;
    fk_step(&ev);
}

/* ---- the other events ------------------------------------------------- */

static inline struct fk_app *fk_pending_append(void)
{
    for (size_t i = 0; i < F.napp; i++)
        if (!F.app[i].done && !F.app[i].dropped)
            return &F.app[i];
    return NULL;
}

static inline void fk_written(struct fk_app *r, int16_t err)
{
    r->done = true;
    if (err == KAFKA_NONE) {
        struct fk_durable *d = fk_dur(r->id, true);
        if (d) {
            d->present = !r->tombstone;
            d->state = r->m.state;
        }
    }
    char id[FK_ID_LEN];
    snprintf(id, sizeof id, "%s", r->id);
    struct cn_txn_event ev = {.kind = CN_TXE_WRITTEN, .now = F.now};
    ev.u.written.id = id;
    ev.u.written.seq = r->seq;
    ev.u.written.err = err;
    fk_step(&ev);
}

/* The oldest APPEND in flight becomes durable (err NONE) or fails.
 * False when none is in flight. */
static inline bool fk_durable(int16_t err)
{
    fk_window();
    struct fk_app *r = fk_pending_append();
    CHECK(r != NULL);
    if (!r)
        return false;
    fk_written(r, err);
    return true;
}

/* That APPEND becomes durable or fails (not necessarily the oldest). */
static inline void fk_durable_this(struct fk_app *r, int16_t err)
{
    fk_window();
    CHECK(!r->done && !r->dropped);
    fk_written(r, err);
}

/* The test decided an APPEND is lost (a crash, a fail point). */
static inline void fk_drop_append(void)
{
    struct fk_app *r = fk_pending_append();
    CHECK(r != NULL);
    if (r)
        r->dropped = true;
}

static inline size_t fk_pending_appends(void)
{
    size_t n = 0;
    for (size_t i = 0; i < F.napp; i++)
        n += !F.app[i].done && !F.app[i].dropped;
    return n;
}

/* k still waits for a result of some partition. */
static inline bool fk_mk_open(const struct fk_mk *k)
{
    if (k->dropped)
        return false;
    for (size_t j = 0; j < k->n; j++)
        if (!k->tp[j].answered)
            return true;
    return false;
}

static inline struct fk_mk *fk_pending_markers(void)
{
    for (size_t i = 0; i < F.nmk; i++)
        if (fk_mk_open(&F.mk[i]))
            return &F.mk[i];
    return NULL;
}

static inline size_t fk_pending_marker_sends(void)
{
    size_t n = 0;
    for (size_t i = 0; i < F.nmk; i++)
        n += fk_mk_open(&F.mk[i]);
    return n;
}

static inline void fk_marker_result(const char *id, uint64_t seq, size_t i,
                                    int16_t err)
{
    struct cn_txn_event ev = {.kind = CN_TXE_MARKER_RESULT, .now = F.now};
    ev.u.marker.id = id;
    ev.u.marker.seq = seq;
    ev.u.marker.i = i;
    ev.u.marker.err = err;
    fk_step(&ev);
}

/* Every partition of the oldest marker send with results outstanding
 * answers, in order: NONE, except index fail_at (-1: none) which answers
 * FK_MARKER_ERR.  False when no send is outstanding. */
static inline bool fk_markers(long fail_at)
{
    fk_window();
    struct fk_mk *k = fk_pending_markers();
    CHECK(k != NULL);
    if (!k)
        return false;
    for (size_t j = 0; j < k->n; j++) {
        if (k->tp[j].answered)
            continue;
        k->tp[j].answered = true;
        fk_marker_result(k->id, k->seq, j,
                         (long)j == fail_at ? FK_MARKER_ERR : KAFKA_NONE);
    }
    return true;
}

/* A MARKER_RESULT as given (a stale or unknown seq). */
static inline void fk_marker_raw(const char *id, uint64_t seq, size_t i,
                                 int16_t err)
{
    fk_window();
    fk_marker_result(id, seq, i, err);
}

/* The test decided a marker send is lost (no results will come). */
static inline void fk_drop_markers(void)
{
    struct fk_mk *k = fk_pending_markers();
    CHECK(k != NULL);
    if (k)
        k->dropped = true;
}

/* Completes every APPEND and answers every marker OK until nothing is in
 * flight (a bounded number of rounds). */
static inline void fk_settle(void)
{
    size_t app0 = F.napp, mk0 = F.nmk, ans0 = F.nans;
    for (int round = 0; round < 100; round++) {
        if (fk_pending_appends())
            fk_durable(KAFKA_NONE);
        else if (fk_pending_marker_sends())
            fk_markers(-1);
        else
            break;
    }
    F.app_w = app0, F.mk_w = mk0, F.ans_w = ans0;
}

/* Moves both clocks by ms, delivering a TICK each time the timer is due
 * on the way (at the time it asked for). */
static inline void fk_advance(int64_t ms)
{
    size_t app0 = F.napp, mk0 = F.nmk, ans0 = F.nans;
    int64_t until = F.now.mono_ms + ms;
    for (int n = 0; F.timer <= until; n++) {
        CHECK(n < 100000);
        if (n >= 100000)
            break;
        int64_t d = F.timer > F.now.mono_ms ? F.timer - F.now.mono_ms : 0;
        F.now.mono_ms += d;
        F.now.mono_us += d * 1000;
        F.now.wall_ms += d;
        struct cn_txn_event ev = {.kind = CN_TXE_TICK, .now = F.now};
        fk_step(&ev);
        if (F.timer <= F.now.mono_ms)
            break; /* fk_step failed the test: a timer that never moves */
    }
    int64_t d = until - F.now.mono_ms;
    F.now.mono_ms += d;
    F.now.mono_us += d * 1000;
    F.now.wall_ms += d;
    F.app_w = app0, F.mk_w = mk0, F.ans_w = ans0;
}

static inline void fk_event(enum cn_txn_event_kind kind, int32_t part)
{
    fk_window();
    struct cn_txn_event ev = {.kind = kind, .now = F.now};
    ev.u.leader.part = part;
    fk_step(&ev);
}

static inline void fk_stop(void)
{
    fk_event(CN_TXE_STOP, 0);
}

static inline void fk_pids_ready(void)
{
    fk_event(CN_TXE_PIDS_READY, 0);
}

static inline void fk_unleader(int32_t part)
{
    fk_event(CN_TXE_UNLEADER, part);
}

/* ---- replay ----------------------------------------------------------- */

/* A meta for replay: pid/epoch/state, partitions from spec, timeout 60 s,
 * started and updated now, client_tv 1.  Caller finis it. */
static inline void fk_meta(struct cn_txn_meta *m, const char *id, int64_t pid,
                           int16_t epoch, enum cn_txn_state s,
                           const char *spec)
{
    struct cn_txn_tp tps[FK_TPS];
    cn_txn_meta_init(m);
    cn_txn_meta_set_id(m, id);
    m->producer_id = pid;
    m->producer_epoch = epoch;
    m->timeout_ms = 60000;
    m->state = s;
    m->txn_start_ms = F.now.wall_ms;
    m->last_update_ms = F.now.wall_ms;
    m->client_tv = 1;
    size_t n = fk_tps(spec, tps);
    for (size_t i = 0; i < n; i++)
        cn_txn_meta_add_partition(m, tps[i].topic, tps[i].partition);
}

/* Replays m as the next record of its id's part (state Dead: a
 * tombstone). */
static inline void fk_replay(const struct cn_txn_meta *m)
{
    struct cn_wr key, value;
    cn_wr_init(&key, 64);
    cn_wr_init(&value, 128);
    bool tombstone = false;
    CHECK_EQ(cn_txn_log_encode(m, &key, &value, &tombstone), 0);
    int32_t part = fk_part(m->transactional_id);
    CHECK_EQ(cn_txn_load_record(F.c, part,
                                cn_bytes_of(key.buf, (int32_t)key.len),
                                tombstone ? CN_BYTES_NULL
                                          : cn_bytes_of(value.buf,
                                                        (int32_t)value.len)),
             0);
    struct fk_durable *d = fk_dur(m->transactional_id, true);
    if (d) {
        d->present = !tombstone;
        d->state = m->state;
    }
    cn_wr_fini(&key);
    cn_wr_fini(&value);
}

/* A machine (default config) whose log holds m (finied here; its times
 * stamped with the new machine's now), led. */
static inline void fk_init_replayed(struct cn_txn_meta *m)
{
    struct cn_txn_config cfg = fk_config();
    fk_init_loading(&cfg);
    m->txn_start_ms = m->last_update_ms = F.now.wall_ms;
    fk_replay(m);
    cn_txn_meta_fini(m);
    fk_lead_all();
}

/* fk_meta + fk_replay in one. */
static inline void fk_replay_state(const char *id, int64_t pid, int16_t epoch,
                                   enum cn_txn_state s, const char *spec)
{
    struct cn_txn_meta m;
    fk_meta(&m, id, pid, epoch, s, spec);
    fk_replay(&m);
    cn_txn_meta_fini(&m);
}

/* ---- looking at what happened ------------------------------------------ */

static inline size_t fk_nnew_appends(void)
{
    return F.napp - F.app_w;
}
static inline size_t fk_nnew_markers(void)
{
    return F.nmk - F.mk_w;
}
static inline size_t fk_nnew_answers(void)
{
    return F.nans - F.ans_w;
}

/* The i-th APPEND / marker send / answer of the window, or NULL (a CHECK
 * fails then). */
static inline const struct fk_app *fk_new_append(size_t i)
{
    CHECK(F.app_w + i < F.napp);
    return F.app_w + i < F.napp ? &F.app[F.app_w + i] : NULL;
}
static inline const struct fk_mk *fk_new_markers(size_t i)
{
    CHECK(F.mk_w + i < F.nmk);
    return F.mk_w + i < F.nmk ? &F.mk[F.mk_w + i] : NULL;
}
static inline const struct cn_txn_answer *fk_new_answer(size_t i)
{
    CHECK(F.ans_w + i < F.nans);
    return F.ans_w + i < F.nans ? &F.ans[F.ans_w + i] : NULL;
}

/* The answer to the request with this token, or NULL if not yet. */
static inline const struct cn_txn_answer *fk_answer_for(int token)
{
    for (size_t i = 0; i < F.nans; i++)
        if ((int)(uintptr_t)F.ans[i].token == token)
            return &F.ans[i];
    return NULL;
}

/* The answer's error, or -1 while unanswered. */
static inline int fk_err(int token)
{
    const struct cn_txn_answer *a = fk_answer_for(token);
    return a ? a->error : -1;
}

/* The last APPEND so far (any window), or NULL. */
static inline const struct fk_app *fk_last_append(void)
{
    return F.napp ? &F.app[F.napp - 1] : NULL;
}

static inline const struct fk_mk *fk_last_markers(void)
{
    return F.nmk ? &F.mk[F.nmk - 1] : NULL;
}

/* The last call produced nothing at all. */
static inline bool fk_no_actions(void)
{
    return fk_nnew_appends() == 0 && fk_nnew_markers() == 0 &&
           fk_nnew_answers() == 0;
}

/* An id "<prefix>-<n>" that lives in part (written into buf). */
static inline const char *fk_id_in_part(const char *prefix, int32_t part,
                                        char *buf, size_t len)
{
    for (int n = 0; n < 100000; n++) {
        snprintf(buf, len, "%s-%d", prefix, n);
        if (fk_part(buf) == part)
            return buf;
    }
    CHECK(!"no id found for the part");
    return buf;
}

static inline const struct cn_txn_meta *fk_find(const char *id)
{
    return cn_txn_find(F.c, id);
}

static inline struct cn_txn_stats fk_stats(void)
{
    struct cn_txn_stats s;
    cn_txn_get_stats(F.c, &s);
    return s;
}

/* A request the test leaves unanswered on purpose. */
static inline void fk_drop_request(int token)
{
    if (token >= 1 && (size_t)token <= F.nreq)
        F.req[token - 1].dropped = true;
}

/* ---- common openings -------------------------------------------------- */

struct fk_producer {
    int64_t pid;
    int16_t epoch;
};

/* InitProducerId for id, made durable; the producer it hands out. */
static inline struct fk_producer fk_new_producer(const char *id)
{
    int t = fk_init_pid(id);
    fk_settle();
    const struct cn_txn_answer *a = fk_answer_for(t);
    CHECK(a != NULL && a->error == KAFKA_NONE);
    struct fk_producer p = {-1, -1};
    if (a)
        p = (struct fk_producer){a->producer_id, a->producer_epoch};
    return p;
}

/* A producer of id with an Ongoing transaction on spec (AddPartitions
 * v3, durable). */
static inline struct fk_producer fk_ongoing(const char *id, const char *spec)
{
    struct fk_producer p = fk_new_producer(id);
    int t = fk_add(id, p.pid, p.epoch, spec);
    fk_settle();
    CHECK_EQ(fk_err(t), KAFKA_NONE);
    const struct cn_txn_meta *m = fk_find(id);
    CHECK(m && m->state == CN_TXN_ONGOING);
    return p;
}

/* A TV1 transaction of id on spec, ended with EndTxn v4 (decision
 * durable, answered) and its markers left out. */
static inline struct fk_producer fk_decided(const char *id, const char *spec,
                                            bool commit)
{
    struct fk_producer p = fk_ongoing(id, spec);
    int t = fk_end(id, p.pid, p.epoch, commit, 4);
    fk_durable(KAFKA_NONE);
    CHECK_EQ(fk_err(t), KAFKA_NONE);
    CHECK_EQ(fk_pending_marker_sends(), 1);
    return p;
}

/* ---- the end ---------------------------------------------------------- */

static inline void fk_fini(void)
{
    for (size_t i = 0; i < F.napp; i++) {
        if (!F.app[i].done && !F.app[i].dropped) {
            fprintf(stderr, "  APPEND %s seq %llu never WRITTEN\n",
                    F.app[i].id, (unsigned long long)F.app[i].seq);
            CHECK(!"every APPEND gets one WRITTEN");
        }
        cn_txn_meta_fini(&F.app[i].m);
    }
    if (fk_pending_marker_sends()) {
        const struct fk_mk *k = fk_pending_markers();
        fprintf(stderr, "  markers of %s seq %llu without a result\n", k->id,
                (unsigned long long)k->seq);
        CHECK(!"every marker partition gets one result");
    }
    for (size_t i = 0; i < F.nreq; i++) {
        const struct fk_req *r = &F.req[i];
        if (r->dropped)
            continue;
        bool want = r->kind != CN_TXN_REQ_PRODUCE_ADD || r->taken;
        if (r->answers != (want ? 1 : 0)) {
            fprintf(stderr, "  request %zu (kind %d): %d answers\n", i + 1,
                    r->kind, r->answers);
            CHECK(!"every request answered once");
        }
    }
    cn_txn_actions_fini(&F.acts);
    cn_txn_free(F.c);
    F.c = NULL;
}

#endif
