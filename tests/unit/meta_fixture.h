/*
 * meta_fixture.h - the metadata quorum on libraft's fixture, for tests.
 *
 * N servers on raft/fixture.h (in-memory I/O, simulated time in ms), each
 * with the production glue (meta/fsm.c, image.c, ctl.c).  After every
 * fixture step each live server's cn_mfsm_poll runs, as the broker's loop
 * will; requests go to the server whose controller leads and the helpers
 * step until the answer comes back.  The fixture traces to stderr by
 * default: each server gets a quiet tracer (plan §1).
 *
 * Header-only, for test_ctl.c alone.
 */
#ifndef CN_TESTS_META_FIXTURE_H
#define CN_TESTS_META_FIXTURE_H

#include <raft.h>
#include <raft/fixture.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/wr.h"
#include "meta/fsm.h"
#include "proto/kerr.h"

#define MFIX_ANSWERS 1024
#define MFIX_BROKERS 16

struct mfix;

struct mfix_srv {
    struct mfix *x;
    int i;
    int64_t prev_epoch[MFIX_BROKERS]; /* per broker, as this image had it */
};

struct mfix {
    struct raft_fixture f;
    unsigned n;
    struct cn_mfsm *m[RAFT_FIXTURE_MAX_SERVERS];
    struct mfix_srv srv[RAFT_FIXTURE_MAX_SERVERS];
    int (*restore[RAFT_FIXTURE_MAX_SERVERS])(struct raft_fsm *,
                                             struct raft_buffer *);
    int restores[RAFT_FIXTURE_MAX_SERVERS]; /* snapshot restores */
    uint64_t seed;
    uintptr_t next_token;
    struct cn_ctl_answer answers[MFIX_ANSWERS];
    char msgs[MFIX_ANSWERS][200];
    int nanswers;
    /* The offset of the entry that gave each broker its current epoch. */
    int64_t register_offset[MFIX_BROKERS];
};

static struct mfix *mfix_current; /* the restore wrapper's way back */

static void mfix_quiet_emit(struct raft_tracer *t, int type, const void *info)
{
    (void)t;
    (void)type;
    (void)info;
}

static struct raft_tracer mfix_quiet = {NULL, 2, mfix_quiet_emit};

static void mfix_answer(void *ctx, const struct cn_ctl_answer *ans)
{
    struct mfix_srv *s = ctx;
    struct mfix *x = s->x;
    if (x->nanswers >= MFIX_ANSWERS)
        return;
    int k = x->nanswers++;
    x->answers[k] = *ans;
    snprintf(x->msgs[k], sizeof x->msgs[k], "%s",
             ans->message ? ans->message : "");
    x->answers[k].message = x->msgs[k];
}

static void mfix_applied(void *ctx, int64_t offset)
{
    struct mfix_srv *s = ctx;
    const struct cn_image *img = cn_mfsm_image(s->x->m[s->i]);
    for (size_t i = 0; i < cn_image_broker_count(img); i++) {
        const struct cn_image_broker *b = cn_image_broker_at(img, i);
        if (b->id < 0 || b->id >= MFIX_BROKERS ||
            b->epoch == s->prev_epoch[b->id])
            continue;
        s->prev_epoch[b->id] = b->epoch;
        s->x->register_offset[b->id] = offset;
    }
}

static int mfix_restore(struct raft_fsm *fsm, struct raft_buffer *buf)
{
    struct mfix *x = mfix_current;
    for (unsigned i = 0; i < x->n; i++)
        if (cn_mfsm_raft_fsm(x->m[i]) == fsm) {
            x->restores[i]++;
            return x->restore[i](fsm, buf);
        }
    return RAFT_INVALID;
}

static uint64_t mfix_seed(uint64_t dflt)
{
    const char *s = getenv("CN_TEST_SEED");
    return s ? strtoull(s, NULL, 10) : dflt;
}

static void mfix_add(struct mfix *x, unsigned i)
{
    struct cn_ctl_config cfg = {
        .cluster_id = "cairn-fixture-cluster1",
        .metadata_version = 21,
        .transaction_version = 2,
        .session_timeout_ms = 9000,
        .default_partitions = 1,
        .default_rf = 1,
        .pid_block = 1000,
        .seed = x->seed * 31 + i,
    };
    x->srv[i] = (struct mfix_srv){x, (int)i, {0}};
    for (int b = 0; b < MFIX_BROKERS; b++)
        x->srv[i].prev_epoch[b] = -1;
    struct cn_mfsm_hooks hooks = {mfix_answer, mfix_applied, NULL, &x->srv[i]};
    if (cn_mfsm_new(&cfg, &hooks, &x->m[i]) != 0)
        abort();
    struct raft_fsm *fsm = cn_mfsm_raft_fsm(x->m[i]);
    x->restore[i] = fsm->restore;
    fsm->restore = mfix_restore;
    if (raft_fixture_grow(&x->f, fsm) != 0)
        abort();
    struct raft *r = raft_fixture_get(&x->f, i);
    r->tracer = &mfix_quiet;
    cn_mfsm_attach(x->m[i], r);
    x->n = i + 1;
}

static void mfix_init(struct mfix *x, unsigned n, uint64_t seed)
{
    memset(x, 0, sizeof *x);
    mfix_current = x;
    x->seed = seed;
    for (int b = 0; b < MFIX_BROKERS; b++)
        x->register_offset[b] = -1;
    if (raft_fixture_init(&x->f) != 0)
        abort();
    for (unsigned i = 0; i < n; i++)
        mfix_add(x, i);
    struct raft_configuration conf;
    if (raft_fixture_configuration(&x->f, n, &conf) != 0 ||
        raft_fixture_bootstrap(&x->f, &conf) != 0)
        abort();
    raft_configuration_close(&conf);
    if (raft_fixture_start(&x->f) != 0)
        abort();
}

static void mfix_fini(struct mfix *x)
{
    raft_fixture_close(&x->f);
    for (unsigned i = 0; i < x->n; i++)
        cn_mfsm_free(x->m[i]);
    mfix_current = NULL;
}

static int64_t mfix_now(struct mfix *x)
{
    return (int64_t)raft_fixture_time(&x->f);
}

static struct raft *mfix_raft(struct mfix *x, int i)
{
    return raft_fixture_get(&x->f, (unsigned)i);
}

static const struct cn_image *mfix_image(struct mfix *x, int i)
{
    return cn_mfsm_image(x->m[i]);
}

static bool mfix_leads(struct mfix *x, int i)
{
    return raft_fixture_alive(&x->f, (unsigned)i) && cn_mfsm_leads(x->m[i]) &&
           raft_state(mfix_raft(x, i)) == RAFT_LEADER;
}

static void mfix_poll(struct mfix *x)
{
    for (unsigned i = 0; i < x->n; i++)
        if (raft_fixture_alive(&x->f, i))
            cn_mfsm_poll(x->m[i], mfix_now(x));
}

static void mfix_step(struct mfix *x)
{
    raft_fixture_step(&x->f);
    mfix_poll(x);
}

static void mfix_run_until(struct mfix *x, int64_t t)
{
    while (mfix_now(x) < t)
        mfix_step(x);
}

static void mfix_run_for(struct mfix *x, int64_t ms)
{
    mfix_run_until(x, mfix_now(x) + ms);
}

static int mfix_leader(struct mfix *x)
{
    for (unsigned i = 0; i < x->n; i++)
        if (mfix_leads(x, (int)i))
            return (int)i;
    return -1;
}

static int mfix_until_leader(struct mfix *x, int64_t max_ms)
{
    int64_t end = mfix_now(x) + max_ms;
    int l;
    while ((l = mfix_leader(x)) < 0 && mfix_now(x) < end)
        mfix_step(x);
    return l;
}

static void mfix_kill(struct mfix *x, int i)
{
    raft_fixture_kill(&x->f, (unsigned)i);
}

static void mfix_revive(struct mfix *x, int i)
{
    raft_fixture_revive(&x->f, (unsigned)i);
}

/* A new server (raft id n+1), started, in no configuration yet. */
static int mfix_grow(struct mfix *x)
{
    unsigned i = x->n;
    mfix_add(x, i);
    if (raft_start(raft_fixture_get(&x->f, i)) != 0)
        abort();
    return (int)i;
}

/* Feeds ev to the leading controller (or any live server when none
 * leads) and returns its token. */
static void *mfix_feed(struct mfix *x, struct cn_ctl_event *ev)
{
    int l = mfix_leader(x);
    if (l < 0)
        l = mfix_until_leader(x, 3000);
    for (unsigned i = 0; l < 0 && i < x->n; i++)
        if (raft_fixture_alive(&x->f, i))
            l = (int)i;
    ev->token = (void *)++x->next_token;
    cn_mfsm_feed(x->m[l], mfix_now(x), ev);
    return ev->token;
}

static const struct cn_ctl_answer *mfix_find(struct mfix *x, void *token)
{
    for (int i = x->nanswers - 1; i >= 0; i--)
        if (x->answers[i].token == token)
            return &x->answers[i];
    return NULL;
}

/* Feeds ev and steps until it is answered (NULL after 15 s simulated). */
static const struct cn_ctl_answer *mfix_request(struct mfix *x,
                                                struct cn_ctl_event *ev)
{
    void *token = mfix_feed(x, ev);
    int64_t end = mfix_now(x) + 15000;
    const struct cn_ctl_answer *a;
    while (!(a = mfix_find(x, token)) && mfix_now(x) < end)
        mfix_step(x);
    return a;
}

static const struct cn_ctl_answer *mfix_register(struct mfix *x, int32_t id,
                                                 int gen)
{
    static const struct cn_ctl_endpoint ep = {{(const uint8_t *)"PLAINTEXT",
                                               9},
                                              {(const uint8_t *)"127.0.0.1",
                                               9},
                                              9092,
                                              0};
    struct cn_ctl_event ev = {.kind = CN_CTE_REGISTER};
    ev.u.reg.broker_id = id;
    ev.u.reg.cluster_id = cn_bytes_str("cairn-fixture-cluster1");
    ev.u.reg.incarnation.b[0] = (uint8_t)id;
    ev.u.reg.incarnation.b[1] = (uint8_t)gen;
    ev.u.reg.incarnation.b[15] = 1;
    ev.u.reg.eps = &ep;
    ev.u.reg.neps = 1;
    ev.u.reg.rack = CN_BYTES_NULL;
    return mfix_request(x, &ev);
}

static const struct cn_ctl_answer *mfix_heartbeat(struct mfix *x, int32_t id,
                                                  int64_t epoch)
{
    struct cn_ctl_event ev = {.kind = CN_CTE_HEARTBEAT};
    int l = mfix_leader(x);
    ev.u.hb.broker_id = id;
    ev.u.hb.broker_epoch = epoch;
    /* A broker that applies what the leader has. */
    ev.u.hb.metadata_offset = l >= 0 ? cn_image_offset(mfix_image(x, l)) : 0;
    return mfix_request(x, &ev);
}

static const struct cn_ctl_answer *
mfix_create(struct mfix *x, const char *name, int32_t nparts, int16_t rf)
{
    struct cn_ctl_event ev = {.kind = CN_CTE_CREATE_TOPIC};
    ev.u.create.name = cn_bytes_str(name);
    ev.u.create.nparts = nparts;
    ev.u.create.rf = rf;
    return mfix_request(x, &ev);
}

static void mfix_feed_pids(struct mfix *x, int32_t id, int64_t epoch)
{
    struct cn_ctl_event ev = {.kind = CN_CTE_ALLOC_PIDS};
    ev.u.pids.broker_id = id;
    ev.u.pids.broker_epoch = epoch;
    mfix_feed(x, &ev);
}

static const struct cn_ctl_answer *mfix_alloc_pids(struct mfix *x, int32_t id,
                                                   int64_t epoch)
{
    struct cn_ctl_event ev = {.kind = CN_CTE_ALLOC_PIDS};
    ev.u.pids.broker_id = id;
    ev.u.pids.broker_epoch = epoch;
    return mfix_request(x, &ev);
}

/* After followers caught up: every live server's image encodes to the
 * same bytes. */
static bool mfix_image_same(struct mfix *x)
{
    mfix_run_for(x, 1000);
    struct cn_wr first, wr;
    bool have = false, same = true;
    for (unsigned i = 0; i < x->n; i++) {
        if (!raft_fixture_alive(&x->f, i))
            continue;
        struct cn_wr *w = have ? &wr : &first;
        cn_wr_init(w, 1024);
        cn_image_encode(mfix_image(x, (int)i), w);
        if (have) {
            same &= wr.len == first.len &&
                    memcmp(wr.buf, first.buf, wr.len) == 0;
            cn_wr_fini(&wr);
        }
        have = true;
    }
    if (have)
        cn_wr_fini(&first);
    return same;
}

#endif
