/*
 * fsm.c - the metadata quorum's glue to libraft (see fsm.h).
 */
#include "meta/fsm.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/wr.h"
#include "proto/kerr.h"

/* A raft_apply in flight, and what its outcome answers. */
struct prop {
    struct raft_apply req;
    struct cn_mfsm *m;
    uint64_t seq;
};

struct leader_barrier {
    struct raft_barrier req;
    struct cn_mfsm *m;
    raft_term term; /* the term it was issued in */
};

struct change {
    struct raft_change req;
    struct cn_mfsm *m;
    raft_id id;
    bool assigned; /* raft_assign issued: the next outcome ends it */
};

struct standby {
    int32_t id;
    char *address; /* heap */
};

struct cn_mfsm {
    struct raft_fsm fsm;
    struct raft *raft;
    struct cn_image *img;
    struct cn_ctl *ctl;
    struct cn_mfsm_hooks hooks;
    struct cn_ctl_actions acts;
    bool stepping; /* inside cn_ctl_step and its actions */
    /* Events raft's callbacks queued, run by the next poll. */
    struct cn_ctl_event *evq;
    size_t evq_head, evq_len, evq_cap;
    /* Leadership as fed to the machine. */
    raft_term barrier_term; /* a barrier was issued in this term */
    raft_term led_term;     /* LEADER was fed for this term; 0: not */
    /* A snapshot restored inside raft_start or an InstallSnapshot: its
     * index is known only after restore returns (raft sets last_applied
     * then), so the image is decoded again at that offset. */
    struct raft_buffer restored;
    /* Standby adds, one configuration change at a time. */
    struct standby *standbys;
    size_t nstandbys, standbys_cap;
    struct change *change; /* in flight, or NULL */
    int64_t timer_ms;
};

/* ---- the event queue --------------------------------------------------- */

static void queue_event(struct cn_mfsm *m, const struct cn_ctl_event *ev)
{
    if (m->evq_head > 0 && m->evq_head == m->evq_len)
        m->evq_head = m->evq_len = 0;
    if (m->evq_len == m->evq_cap) {
        size_t cap = m->evq_cap ? 2 * m->evq_cap : 16;
        struct cn_ctl_event *n = realloc(m->evq, cap * sizeof *n);
        if (!n)
            abort(); /* losing a proposal's outcome would wedge the
                        controller: stop instead */
        m->evq = n;
        m->evq_cap = cap;
    }
    m->evq[m->evq_len++] = *ev;
    if (m->hooks.wake)
        m->hooks.wake(m->hooks.ctx);
}

/* ---- raft_fsm ---------------------------------------------------------- */

static void fix_restored(struct cn_mfsm *m)
{
    if (!m->restored.base || !m->raft)
        return;
    struct cn_image *img = NULL;
    int64_t at = (int64_t)raft_last_applied(m->raft);
    if (cn_image_decode(m->restored.base, m->restored.len, at, &img) == 0) {
        cn_image_free(m->img);
        m->img = img;
    }
    raft_free(m->restored.base);
    m->restored.base = NULL;
}

static int fsm_apply(struct raft_fsm *fsm, const struct raft_buffer *buf,
                     void **result)
{
    struct cn_mfsm *m = fsm->data;
    fix_restored(m);
    /* apply gets no index: barrier and configuration entries take
     * indexes without reaching it, so count from raft. */
    int64_t offset = (int64_t)raft_last_applied(m->raft) + 1;
    int err = cn_image_apply_entry(m->img, offset, buf->base, buf->len);
    if (err)
        return err == CN_ENOMEM ? RAFT_NOMEM : RAFT_MALFORMED;
    *result = (void *)(uintptr_t)offset;
    struct cn_ctl_event ev = {.kind = CN_CTE_COMMITTED, .u.offset = offset};
    queue_event(m, &ev);
    if (m->hooks.applied)
        m->hooks.applied(m->hooks.ctx, offset);
    return 0;
}

static int fsm_snapshot(struct raft_fsm *fsm, struct raft_buffer *bufs[],
                        unsigned *n_bufs)
{
    struct cn_mfsm *m = fsm->data;
    fix_restored(m);
    struct cn_wr wr;
    cn_wr_init(&wr, 4096);
    cn_image_encode(m->img, &wr);
    struct raft_buffer *b = raft_malloc(sizeof *b);
    void *base = wr.err ? NULL : raft_malloc(wr.len ? wr.len : 1);
    if (!b || !base) {
        raft_free(b);
        raft_free(base);
        cn_wr_fini(&wr);
        return RAFT_NOMEM;
    }
    memcpy(base, wr.buf, wr.len);
    b->base = base;
    b->len = wr.len;
    cn_wr_fini(&wr);
    /* raft frees both with raft_free (no snapshot_finalize). */
    *bufs = b;
    *n_bufs = 1;
    return 0;
}

static int fsm_restore(struct raft_fsm *fsm, struct raft_buffer *buf)
{
    struct cn_mfsm *m = fsm->data;
    struct cn_image *img;
    /* Decoded now to refuse a bad snapshot; the offset is put right by
     * fix_restored once raft has set last_applied. */
    int err = cn_image_decode(buf->base, buf->len, -1, &img);
    if (err)
        return err == CN_ENOMEM ? RAFT_NOMEM : RAFT_MALFORMED;
    cn_image_free(m->img);
    m->img = img;
    if (m->restored.base)
        raft_free(m->restored.base);
    m->restored = *buf; /* ours now: raft_free'd by fix_restored */
    return 0;
}

/* ---- carrying out actions --------------------------------------------- */

static int16_t kafka_error(int raft_status)
{
    switch (raft_status) {
    case 0: return 0;
    case RAFT_NOTLEADER: return KAFKA_NOT_CONTROLLER;
    default:
        /* LEADERSHIPLOST, SHUTDOWN, CANCELED: the entry may or may not
         * commit; the client retries and every record is safe twice. */
        return KAFKA_REQUEST_TIMED_OUT;
    }
}

static void apply_cb(struct raft_apply *req, int status, void *result)
{
    struct prop *p = req->data;
    struct cn_ctl_event ev = {.kind = CN_CTE_PROPOSED};
    ev.u.proposed.seq = p->seq;
    ev.u.proposed.error = kafka_error(status);
    ev.u.proposed.offset = status == 0 ? (int64_t)(uintptr_t)result : -1;
    queue_event(p->m, &ev);
    free(p);
}

static void propose(struct cn_mfsm *m, struct cn_ctl_actions *a)
{
    struct cn_ctl_event ev = {.kind = CN_CTE_PROPOSED};
    ev.u.proposed.seq = a->seq;
    /* raft_apply appends at the next index at once, so a registration's
     * epoch (the offset of its record, KIP-631) is known here. */
    raft_index next = raft_last_index(m->raft) + 1;
    for (size_t i = 0; i < a->nrecs; i++)
        if (a->recs[i].type == CN_MREC_REGISTER_BROKER &&
            a->recs[i].u.register_broker.broker_epoch < 0)
            a->recs[i].u.register_broker.broker_epoch = (int64_t)next;
    struct cn_wr wr;
    cn_wr_init(&wr, 512);
    cn_meta_entry_encode(&wr, a->recs, a->nrecs);
    struct prop *p = calloc(1, sizeof *p);
    struct raft_buffer buf = {NULL, wr.len};
    if (!wr.err && p)
        buf.base = raft_malloc(wr.len);
    if (!buf.base) {
        free(p);
        cn_wr_fini(&wr);
        ev.u.proposed.error = KAFKA_UNKNOWN_SERVER_ERROR;
        queue_event(m, &ev);
        return;
    }
    assert(wr.len % 8 == 0); /* records.c pads (canonical/raft#189) */
    memcpy(buf.base, wr.buf, wr.len);
    cn_wr_fini(&wr);
    p->m = m;
    p->seq = a->seq;
    p->req.data = p;
    int rv = raft_apply(m->raft, &p->req, &buf, 1, apply_cb);
    if (rv != 0) {
        raft_free(buf.base);
        free(p);
        ev.u.proposed.error = kafka_error(rv);
        queue_event(m, &ev);
    }
}

static bool in_configuration(struct cn_mfsm *m, raft_id id, int *role)
{
    const struct raft_configuration *c = &m->raft->configuration;
    for (unsigned i = 0; i < c->n; i++)
        if (c->servers[i].id == id) {
            *role = c->servers[i].role;
            return true;
        }
    return false;
}

static void next_standby(struct cn_mfsm *m);

static void change_cb(struct raft_change *req, int status)
{
    struct change *ch = req->data;
    struct cn_mfsm *m = ch->m;
    bool more = false;
    if (status == 0 && !ch->assigned) {
        ch->assigned = true;
        more = raft_assign(m->raft, &ch->req, ch->id, RAFT_STANDBY,
                           change_cb) == 0;
    }
    if (!more) {
        /* Done or failed: a failed add is asked again at the broker's
         * next registration. */
        m->change = NULL;
        free(ch);
        next_standby(m);
    }
}

static void next_standby(struct cn_mfsm *m)
{
    while (!m->change && m->nstandbys > 0 &&
           raft_state(m->raft) == RAFT_LEADER) {
        struct standby sb = m->standbys[0];
        memmove(m->standbys, m->standbys + 1,
                --m->nstandbys * sizeof *m->standbys);
        int role;
        bool member = in_configuration(m, (raft_id)sb.id, &role);
        struct change *ch = calloc(1, sizeof *ch);
        int rv = -1;
        if (ch && sb.id > 0 && (!member || role == RAFT_SPARE)) {
            ch->m = m;
            ch->id = (raft_id)sb.id;
            ch->req.data = ch;
            ch->assigned = member;
            m->change = ch;
            rv = member ? raft_assign(m->raft, &ch->req, ch->id, RAFT_STANDBY,
                                      change_cb)
                        : raft_add(m->raft, &ch->req, ch->id, sb.address,
                                   change_cb);
        }
        if (rv != 0) {
            m->change = NULL;
            free(ch);
        }
        free(sb.address);
    }
}

static void add_standby(struct cn_mfsm *m, const struct cn_ctl_standby *s)
{
    if (m->nstandbys == m->standbys_cap) {
        size_t cap = m->standbys_cap ? 2 * m->standbys_cap : 4;
        struct standby *n = realloc(m->standbys, cap * sizeof *n);
        if (!n)
            return;
        m->standbys = n;
        m->standbys_cap = cap;
    }
    struct standby *sb = &m->standbys[m->nstandbys];
    sb->address = strdup(s->address ? s->address : "");
    if (!sb->address)
        return;
    sb->id = s->id;
    m->nstandbys++;
}

static void step(struct cn_mfsm *m, int64_t now_ms,
                 const struct cn_ctl_event *ev)
{
    assert(!m->stepping);
    m->stepping = true;
    struct cn_ctl_actions *a = &m->acts;
    cn_ctl_step(m->ctl, m->img, now_ms, ev, a);
    if (a->propose)
        propose(m, a);
    for (size_t i = 0; i < a->nanswers; i++)
        if (m->hooks.answer)
            m->hooks.answer(m->hooks.ctx, &a->answers[i]);
    for (size_t i = 0; i < a->nstandbys; i++)
        add_standby(m, &a->standbys[i]);
    m->timer_ms = a->timer_mono_ms;
    cn_ctl_actions_reset(a);
    m->stepping = false;
    next_standby(m);
}

/* ---- leadership -------------------------------------------------------- */

static void barrier_cb(struct raft_barrier *req, int status)
{
    struct leader_barrier *b = req->data;
    struct cn_mfsm *m = b->m;
    if (status == 0) {
        struct cn_ctl_event ev = {.kind = CN_CTE_LEADER};
        ev.u.term = (int64_t)b->term;
        queue_event(m, &ev);
    } else if (m->barrier_term == b->term) {
        m->barrier_term = 0; /* still leader? the next poll tries again */
    }
    free(b);
}

static void watch_leadership(struct cn_mfsm *m, int64_t now_ms)
{
    bool leads = raft_state(m->raft) == RAFT_LEADER;
    raft_term term = raft_current_term(m->raft);
    if (m->led_term && (!leads || term != m->led_term)) {
        m->led_term = 0;
        struct cn_ctl_event ev = {.kind = CN_CTE_UNLEADER};
        step(m, now_ms, &ev);
    }
    if (!leads || m->led_term || m->barrier_term == term)
        return;
    /* Entries of earlier terms commit only with one of this term; the
     * barrier is that entry, so the image is whole before deciding. */
    struct leader_barrier *b = calloc(1, sizeof *b);
    if (!b)
        return;
    b->m = m;
    b->term = term;
    b->req.data = b;
    m->barrier_term = term;
    if (raft_barrier(m->raft, &b->req, barrier_cb) != 0) {
        m->barrier_term = 0;
        free(b);
    }
}

/* ---- the public face --------------------------------------------------- */

int cn_mfsm_new(const struct cn_ctl_config *cfg,
                const struct cn_mfsm_hooks *hooks, struct cn_mfsm **out)
{
    struct cn_mfsm *m = calloc(1, sizeof *m);
    if (!m)
        return CN_ENOMEM;
    m->img = cn_image_new();
    m->ctl = cn_ctl_new(cfg);
    if (!m->img || !m->ctl) {
        cn_image_free(m->img);
        cn_ctl_free(m->ctl);
        free(m);
        return CN_ENOMEM;
    }
    if (hooks)
        m->hooks = *hooks;
    cn_ctl_actions_init(&m->acts);
    m->timer_ms = -1;
    m->fsm.version = 2; /* no snapshot_finalize: raft frees the buffers */
    m->fsm.data = m;
    m->fsm.apply = fsm_apply;
    m->fsm.snapshot = fsm_snapshot;
    m->fsm.restore = fsm_restore;
    *out = m;
    return 0;
}

void cn_mfsm_free(struct cn_mfsm *m)
{
    if (!m)
        return;
    if (m->restored.base)
        raft_free(m->restored.base);
    for (size_t i = 0; i < m->nstandbys; i++)
        free(m->standbys[i].address);
    free(m->standbys);
    free(m->evq);
    cn_ctl_actions_fini(&m->acts);
    cn_ctl_free(m->ctl);
    cn_image_free(m->img);
    free(m);
}

struct raft_fsm *cn_mfsm_raft_fsm(struct cn_mfsm *m)
{
    return &m->fsm;
}

void cn_mfsm_attach(struct cn_mfsm *m, struct raft *r)
{
    m->raft = r;
    /* Without pre-vote a server back from a partition wins an election
     * at a higher term and deposes a working leader [run: plan §1]. */
    raft_set_pre_vote(r, true);
}

void cn_mfsm_poll(struct cn_mfsm *m, int64_t now_ms)
{
    fix_restored(m);
    /* Events queued while these run (a refused proposal's outcome) are
     * run too, but a bounded number of times: the machine backs off its
     * own proposals, and a request is consumed by each refusal. */
    for (int n = 0; n < 4096; n++) {
        watch_leadership(m, now_ms);
        if (m->evq_head == m->evq_len)
            break;
        struct cn_ctl_event ev = m->evq[m->evq_head++];
        if (ev.kind == CN_CTE_LEADER) {
            /* Fed only if still leading in the barrier's term. */
            if (m->led_term || raft_state(m->raft) != RAFT_LEADER ||
                (int64_t)raft_current_term(m->raft) != ev.u.term)
                continue;
            m->led_term = (raft_term)ev.u.term;
        }
        step(m, now_ms, &ev);
    }
    if (m->evq_head == m->evq_len)
        m->evq_head = m->evq_len = 0;
    struct cn_ctl_event tick = {.kind = CN_CTE_TICK};
    step(m, now_ms, &tick);
}

void cn_mfsm_feed(struct cn_mfsm *m, int64_t now_ms,
                  const struct cn_ctl_event *ev)
{
    /* Earlier outcomes first, so the request meets the freshest image. */
    cn_mfsm_poll(m, now_ms);
    step(m, now_ms, ev);
}

int64_t cn_mfsm_timer_ms(const struct cn_mfsm *m)
{
    return m->timer_ms;
}

const struct cn_image *cn_mfsm_image(struct cn_mfsm *m)
{
    fix_restored(m);
    return m->img;
}

bool cn_mfsm_leads(const struct cn_mfsm *m)
{
    return cn_ctl_is_leader(m->ctl);
}
