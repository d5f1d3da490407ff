/*
 * test_group.c - the classic group membership state machine, with time
 * driven by hand.  Every JoinGroup/SyncGroup waiter records how often it
 * was answered; each test ends by checking every one was answered exactly
 * once.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/rd.h"
#include "base/wr.h"
#include "group/group.h"
#include "proto/kerr.h"
#include "unit.h"

#define MAX_WAITERS 256

struct jw {
    int called;
    int16_t error;
    int32_t generation;
    char member_id[160];
    char leader[160];
    char protocol[32];
    size_t nmembers;
    char first_meta[32]; /* metadata of members[0], leader only */
    bool skip;
};

struct sw {
    int called;
    int16_t error;
    char assignment[64];
    size_t len;
};

static struct jw jws[MAX_WAITERS];
static struct sw sws[MAX_WAITERS];
static int njw, nsw, nstores;
static enum cn_group_state store_state;

static struct jw *new_jw(void)
{
    struct jw *w = &jws[njw++];
    memset(w, 0, sizeof *w);
    return w;
}

static struct sw *new_sw(void)
{
    struct sw *w = &sws[nsw++];
    memset(w, 0, sizeof *w);
    return w;
}

static void on_join(void *waiter, const struct cn_join_result *r)
{
    struct jw *w = waiter;
    w->called++;
    w->error = r->error;
    w->generation = r->generation;
    snprintf(w->member_id, sizeof w->member_id, "%s", r->member_id);
    snprintf(w->leader, sizeof w->leader, "%s", r->leader);
    snprintf(w->protocol, sizeof w->protocol, "%s",
             r->protocol_name ? r->protocol_name : "(null)");
    w->nmembers = r->nmembers;
    w->skip = r->skip_assignment;
    if (r->nmembers)
        snprintf(w->first_meta, sizeof w->first_meta, "%.*s",
                 (int)r->members[0].metadata_len,
                 (const char *)r->members[0].metadata);
}

static void on_sync(void *waiter, const struct cn_sync_result *r)
{
    struct sw *w = waiter;
    w->called++;
    w->error = r->error;
    w->len = r->assignment_len;
    snprintf(w->assignment, sizeof w->assignment, "%.*s",
             (int)r->assignment_len, (const char *)r->assignment);
}

static void on_store(void *arg, const struct cn_group *g)
{
    (void)arg;
    nstores++;
    store_state = cn_group_state(g);
}

static struct cn_groups *setup_ops(const struct cn_groups_ops *ops,
                                   int32_t max_size)
{
    struct cn_groups_config cfg;
    cn_groups_config_default(&cfg);
    cfg.seed = 42;
    if (max_size)
        cfg.max_size = max_size;
    njw = nsw = nstores = 0;
    return cn_groups_new(&cfg, ops);
}

static struct cn_groups *setup(int32_t max_size)
{
    struct cn_groups_ops ops = {on_join, on_sync, on_store, NULL, NULL, NULL};
    return setup_ops(&ops, max_size);
}

/* Every waiter handed out in this test was answered exactly once. */
static void check_all_answered(void)
{
    int i;
    for (i = 0; i < njw; i++) {
        if (jws[i].called != 1)
            fprintf(stderr, "  join waiter %d answered %d times\n", i,
                    jws[i].called);
        CHECK_EQ(jws[i].called, 1);
    }
    for (i = 0; i < nsw; i++) {
        if (sws[i].called != 1)
            fprintf(stderr, "  sync waiter %d answered %d times\n", i,
                    sws[i].called);
        CHECK_EQ(sws[i].called, 1);
    }
}

static struct cn_join_protocol protos_for(const char *client, char *buf)
{
    struct cn_join_protocol p;
    snprintf(buf, 32, "meta-%s", client);
    p.name = "range";
    p.metadata = (const uint8_t *)buf;
    p.metadata_len = strlen(buf);
    return p;
}

struct joinopt {
    const char *instance;
    const char *type;
    const char *proto;
    int32_t session;
    int16_t version;
};

static struct jw *join_ex(struct cn_groups *gs, const char *group,
                          const char *member_id, const char *client,
                          const struct joinopt *o, int64_t now)
{
    char buf[32];
    struct cn_join_protocol p = protos_for(client, buf);
    struct cn_join_req rq = {
        .group_id = group,
        .member_id = member_id,
        .instance_id = o ? o->instance : NULL,
        .client_id = client,
        .client_host = "/127.0.0.1",
        .protocol_type = o && o->type ? o->type : "consumer",
        .session_timeout_ms = o && o->session ? o->session : 10000,
        .rebalance_timeout_ms = 20000,
        .version = o && o->version ? o->version : 5,
        .protocols = &p,
        .nprotocols = 1,
    };
    struct jw *w = new_jw();
    if (o && o->proto)
        p.name = o->proto;
    cn_groups_join(gs, &rq, w, now);
    return w;
}

static struct jw *join(struct cn_groups *gs, const char *group,
                       const char *member_id, const char *client,
                       int64_t now)
{
    return join_ex(gs, group, member_id, client, NULL, now);
}

/* KIP-394 first round trip, then the real join with the given id. */
static struct jw *join_new(struct cn_groups *gs, const char *group,
                           const char *client, int64_t now)
{
    struct jw *w = join(gs, group, "", client, now);
    CHECK_EQ(w->called, 1);
    CHECK_EQ(w->error, KAFKA_MEMBER_ID_REQUIRED);
    CHECK(strncmp(w->member_id, client, strlen(client)) == 0);
    return join(gs, group, w->member_id, client, now);
}

static struct sw *sync_ex(struct cn_groups *gs, const char *group,
                          const char *member_id, const char *instance,
                          int32_t gen, const struct cn_sync_assignment *a,
                          size_t na, int64_t now)
{
    struct cn_sync_req rq = {
        .group_id = group,
        .member_id = member_id,
        .instance_id = instance,
        .generation = gen,
        .protocol_type = "consumer",
        .protocol_name = "range",
        .assignments = a,
        .nassignments = na,
    };
    struct sw *w = new_sw();
    cn_groups_sync(gs, &rq, w, now);
    return w;
}

static struct sw *sync_(struct cn_groups *gs, const char *group,
                        const char *member_id, int32_t gen, int64_t now)
{
    return sync_ex(gs, group, member_id, NULL, gen, NULL, 0, now);
}

/* Three members A, B, C in a Stable group "g" at generation 1; member ids
 * copied to ids[3]; A is the leader; assignments "asg-A", "asg-B" and
 * "asg-C".  Returns the time reached. */
static int64_t make_stable3(struct cn_groups *gs, char ids[3][160])
{
    struct jw *a = join_new(gs, "g", "A", 0);
    struct jw *b = join_new(gs, "g", "B", 100);
    struct jw *c = join_new(gs, "g", "C", 200);
    struct cn_sync_assignment asg[3];
    struct sw *sa, *sb, *sc;

    cn_groups_tick(gs, 3000);
    cn_groups_tick(gs, 6000);
    CHECK_EQ(a->error, KAFKA_NONE);
    snprintf(ids[0], 160, "%s", a->member_id);
    snprintf(ids[1], 160, "%s", b->member_id);
    snprintf(ids[2], 160, "%s", c->member_id);
    asg[0] = (struct cn_sync_assignment){ids[0], (const uint8_t *)"asg-A", 5};
    asg[1] = (struct cn_sync_assignment){ids[1], (const uint8_t *)"asg-B", 5};
    asg[2] = (struct cn_sync_assignment){ids[2], (const uint8_t *)"asg-C", 5};
    sb = sync_(gs, "g", ids[1], 1, 6001);
    sc = sync_(gs, "g", ids[2], 1, 6001);
    sa = sync_ex(gs, "g", ids[0], NULL, 1, asg, 3, 6002);
    CHECK_EQ(sa->error, KAFKA_NONE);
    CHECK_EQ(sb->error, KAFKA_NONE);
    CHECK_EQ(sc->error, KAFKA_NONE);
    CHECK_EQ(cn_groups_state(gs, "g"), CN_GROUP_STABLE);
    return 6002;
}

UNIT_TEST(test_three_members_join_sync)
{
    struct cn_groups *gs = setup(0);
    struct jw *a, *b, *c;
    struct sw *sa, *sb, *sc;
    struct cn_sync_assignment asg[2];
    const struct cn_group *g;

    a = join_new(gs, "g", "A", 0);
    CHECK_EQ(cn_groups_state(gs, "g"), CN_GROUP_PREPARING_REBALANCE);
    CHECK_EQ(cn_groups_next_deadline(gs), 3000);
    b = join_new(gs, "g", "B", 1000);
    c = join_new(gs, "g", "C", 2000);
    /* Everyone is in, but the initial delay still runs. */
    cn_groups_tick(gs, 2999);
    CHECK_EQ(a->called + b->called + c->called, 0);
    /* New members arrived during the first step: one more step. */
    cn_groups_tick(gs, 3000);
    CHECK_EQ(a->called, 0);
    CHECK_EQ(cn_groups_next_deadline(gs), 6000);
    cn_groups_tick(gs, 6000);
    CHECK_EQ(a->called, 1);
    CHECK_EQ(b->called, 1);
    CHECK_EQ(c->called, 1);
    CHECK_EQ(a->error, KAFKA_NONE);
    CHECK_EQ(a->generation, 1);
    CHECK_EQ(b->generation, 1);
    CHECK(strcmp(a->leader, a->member_id) == 0);
    CHECK(strcmp(b->leader, a->member_id) == 0);
    CHECK(strcmp(a->protocol, "range") == 0);
    CHECK_EQ(a->nmembers, 3);
    CHECK(strcmp(a->first_meta, "meta-A") == 0);
    CHECK_EQ(b->nmembers, 0);
    CHECK_EQ(c->nmembers, 0);
    CHECK_EQ(cn_groups_state(gs, "g"), CN_GROUP_COMPLETING_REBALANCE);

    /* Followers wait for the leader. */
    sb = sync_(gs, "g", b->member_id, 1, 6100);
    sc = sync_(gs, "g", c->member_id, 1, 6100);
    CHECK_EQ(sb->called, 0);
    CHECK_EQ(sc->called, 0);
    asg[0] = (struct cn_sync_assignment){a->member_id,
                                         (const uint8_t *)"asg-A", 5};
    asg[1] = (struct cn_sync_assignment){b->member_id,
                                         (const uint8_t *)"asg-B", 5};
    nstores = 0;
    sa = sync_ex(gs, "g", a->member_id, NULL, 1, asg, 2, 6200);
    CHECK_EQ(nstores, 1);
    CHECK_EQ(sa->error, KAFKA_NONE);
    CHECK(strcmp(sa->assignment, "asg-A") == 0);
    CHECK(strcmp(sb->assignment, "asg-B") == 0);
    CHECK_EQ(sc->error, KAFKA_NONE);
    CHECK_EQ(sc->len, 0); /* left out by the leader */
    CHECK_EQ(cn_groups_state(gs, "g"), CN_GROUP_STABLE);

    CHECK_EQ(cn_groups_heartbeat(gs, "g", b->member_id, NULL, 1, 7000),
             KAFKA_NONE);
    /* A Stable follower's repeated SyncGroup gets its assignment again. */
    sb = sync_(gs, "g", b->member_id, 1, 7000);
    CHECK(strcmp(sb->assignment, "asg-B") == 0);

    g = cn_groups_find(gs, "g");
    CHECK(g != NULL);
    CHECK(strcmp(cn_group_leader(g), a->member_id) == 0);
    CHECK_EQ(cn_group_nmembers(g), 3);
    cn_groups_free(gs);
    check_all_answered();
}

UNIT_TEST(test_leave_rebalance)
{
    struct cn_groups *gs = setup(0);
    char ids[3][160];
    struct cn_leave_member lm[2];
    struct jw *a, *b;
    int64_t t = make_stable3(gs, ids);

    lm[0] = (struct cn_leave_member){ids[2], NULL, -1};
    lm[1] = (struct cn_leave_member){"nobody", NULL, -1};
    CHECK_EQ(cn_groups_leave(gs, "g", lm, 2, t + 10), KAFKA_NONE);
    CHECK_EQ(lm[0].error, KAFKA_NONE);
    CHECK_EQ(lm[1].error, KAFKA_UNKNOWN_MEMBER_ID);
    CHECK_EQ(cn_groups_state(gs, "g"), CN_GROUP_PREPARING_REBALANCE);
    CHECK_EQ(cn_groups_heartbeat(gs, "g", ids[1], NULL, 1, t + 20),
             KAFKA_REBALANCE_IN_PROGRESS);
    CHECK_EQ(cn_groups_heartbeat(gs, "g", ids[2], NULL, 1, t + 20),
             KAFKA_UNKNOWN_MEMBER_ID);
    a = join(gs, "g", ids[0], "A", t + 30);
    CHECK_EQ(a->called, 0);
    b = join(gs, "g", ids[1], "B", t + 40);
    /* All known members are back: no waiting for the timeout. */
    CHECK_EQ(a->called, 1);
    CHECK_EQ(b->called, 1);
    CHECK_EQ(a->generation, 2);
    CHECK_EQ(b->generation, 2);
    CHECK(strcmp(a->leader, ids[0]) == 0);
    CHECK_EQ(a->nmembers, 2);
    cn_groups_free(gs);
    check_all_answered();
}

UNIT_TEST(test_session_expiry)
{
    struct cn_groups *gs = setup(0);
    char ids[3][160];
    int64_t t = make_stable3(gs, ids), end = t + 15000;
    struct jw *a, *b;

    for (; t < end; t += 3000) {
        CHECK_EQ(cn_groups_heartbeat(gs, "g", ids[0], NULL, 1, t),
                 KAFKA_NONE);
        CHECK_EQ(cn_groups_heartbeat(gs, "g", ids[1], NULL, 1, t),
                 KAFKA_NONE);
        cn_groups_tick(gs, t);
    }
    /* C's session (10 s) ran out. */
    CHECK_EQ(cn_groups_state(gs, "g"), CN_GROUP_PREPARING_REBALANCE);
    CHECK_EQ(cn_group_nmembers(cn_groups_find(gs, "g")), 2);
    a = join(gs, "g", ids[0], "A", t);
    b = join(gs, "g", ids[1], "B", t);
    CHECK_EQ(a->generation, 2);
    CHECK_EQ(b->generation, 2);
    cn_groups_free(gs);
    check_all_answered();
}

UNIT_TEST(test_rebalance_timeout)
{
    struct cn_groups *gs = setup(0);
    char ids[3][160];
    int64_t t = make_stable3(gs, ids);
    struct jw *a, *b;
    int64_t i;

    /* The leader rejoins: that forces a rebalance. */
    a = join(gs, "g", ids[0], "A", t);
    CHECK_EQ(cn_groups_state(gs, "g"), CN_GROUP_PREPARING_REBALANCE);
    b = join(gs, "g", ids[1], "B", t + 100);
    CHECK_EQ(a->called, 0);
    /* C keeps heartbeating but never rejoins. */
    for (i = 1; i < 7; i++) {
        CHECK_EQ(cn_groups_heartbeat(gs, "g", ids[2], NULL, 1, t + i * 3000),
                 KAFKA_REBALANCE_IN_PROGRESS);
        cn_groups_tick(gs, t + i * 3000);
    }
    CHECK_EQ(a->called, 0);
    cn_groups_tick(gs, t + 20000);
    CHECK_EQ(a->called, 1);
    CHECK_EQ(b->called, 1);
    CHECK_EQ(a->generation, 2);
    CHECK_EQ(a->nmembers, 2);
    CHECK_EQ(cn_groups_heartbeat(gs, "g", ids[2], NULL, 2, t + 20001),
             KAFKA_UNKNOWN_MEMBER_ID);
    cn_groups_free(gs);
    check_all_answered();
}

UNIT_TEST(test_member_id_required)
{
    struct cn_groups *gs = setup(0);
    struct joinopt v3 = {.version = 3};
    struct jw *w, *x;

    w = join(gs, "g", "", "cli", 0);
    CHECK_EQ(w->error, KAFKA_MEMBER_ID_REQUIRED);
    CHECK(strncmp(w->member_id, "cli-", 4) == 0);
    CHECK_EQ(strlen(w->member_id), 4 + 22);
    /* The pending id is not a member yet. */
    CHECK_EQ(cn_group_nmembers(cn_groups_find(gs, "g")), 0);
    CHECK_EQ(cn_groups_heartbeat(gs, "g", w->member_id, NULL, 0, 1),
             KAFKA_UNKNOWN_MEMBER_ID);
    x = join(gs, "g", "made-up", "cli", 1);
    CHECK_EQ(x->error, KAFKA_UNKNOWN_MEMBER_ID);
    CHECK(strcmp(x->member_id, "made-up") == 0);
    /* Unknown member id for a group that does not exist. */
    x = join(gs, "nogroup", "made-up", "cli", 1);
    CHECK_EQ(x->error, KAFKA_UNKNOWN_MEMBER_ID);
    CHECK(!cn_groups_exists(gs, "nogroup"));
    /* Before v4 the member is added straight away. */
    x = join_ex(gs, "g", "", "old", &v3, 2);
    CHECK_EQ(x->called, 0);
    CHECK_EQ(cn_group_nmembers(cn_groups_find(gs, "g")), 1);
    /* The pending id expires after its session timeout. */
    cn_groups_tick(gs, 10001);
    cn_groups_tick(gs, 20000);
    CHECK_EQ(x->called, 1);
    CHECK_EQ(x->generation, 1);
    w = join(gs, "g", w->member_id, "cli", 20001);
    CHECK_EQ(w->error, KAFKA_UNKNOWN_MEMBER_ID);
    cn_groups_free(gs);
    check_all_answered();
}

UNIT_TEST(test_pending_member_delays_join)
{
    struct cn_groups *gs = setup(0);
    char ids[3][160];
    int64_t t = make_stable3(gs, ids);
    struct jw *d, *a, *b, *c, *d2;

    /* D gets an id (pending); the leader rejoins; B and C too.  The join
     * phase waits for D, which then joins with its id. */
    d = join(gs, "g", "", "D", t);
    CHECK_EQ(d->error, KAFKA_MEMBER_ID_REQUIRED);
    a = join(gs, "g", ids[0], "A", t + 1);
    b = join(gs, "g", ids[1], "B", t + 2);
    c = join(gs, "g", ids[2], "C", t + 3);
    CHECK_EQ(a->called, 0);
    d2 = join(gs, "g", d->member_id, "D", t + 4);
    CHECK_EQ(a->called, 1);
    CHECK_EQ(d2->called, 1);
    CHECK_EQ(a->nmembers, 4);
    CHECK_EQ(d2->generation, 2);
    CHECK_EQ(b->generation + c->generation, 4);
    cn_groups_free(gs);
    check_all_answered();
}

UNIT_TEST(test_static_member_rejoin)
{
    struct cn_groups *gs = setup(0);
    struct joinopt st = {.instance = "inst-1"};
    struct cn_sync_assignment asg[2];
    struct jw *s, *a, *s2;
    struct sw *ss, *sa;
    char old_id[160];
    struct cn_leave_member lm;
    struct cn_member_info mi;
    const struct cn_group *g;

    /* Static members get their id at once (no MEMBER_ID_REQUIRED). */
    s = join_ex(gs, "g", "", "S", &st, 0);
    CHECK_EQ(s->called, 0);
    a = join_new(gs, "g", "A", 0);
    cn_groups_tick(gs, 3000);
    cn_groups_tick(gs, 6000);
    CHECK_EQ(s->error, KAFKA_NONE);
    CHECK(strncmp(s->member_id, "inst-1-", 7) == 0);
    CHECK(strcmp(s->leader, s->member_id) == 0);
    asg[0] = (struct cn_sync_assignment){s->member_id,
                                         (const uint8_t *)"asg-S", 5};
    asg[1] = (struct cn_sync_assignment){a->member_id,
                                         (const uint8_t *)"asg-A", 5};
    sa = sync_(gs, "g", a->member_id, 1, 6001);
    ss = sync_ex(gs, "g", s->member_id, "inst-1", 1, asg, 2, 6002);
    CHECK_EQ(cn_groups_state(gs, "g"), CN_GROUP_STABLE);
    CHECK(strcmp(sa->assignment, "asg-A") == 0);
    CHECK(strcmp(ss->assignment, "asg-S") == 0);
    snprintf(old_id, sizeof old_id, "%s", s->member_id);

    /* The static member restarts: new id, same generation, no
     * rebalance; as leader it is told to skip the assignment. */
    nstores = 0;
    s2 = join_ex(gs, "g", "", "S", &st, 7000);
    CHECK_EQ(s2->called, 1);
    CHECK_EQ(s2->error, KAFKA_NONE);
    CHECK_EQ(s2->generation, 1);
    CHECK(strcmp(s2->member_id, old_id) != 0);
    CHECK(strcmp(s2->leader, s2->member_id) == 0);
    CHECK(s2->skip);
    CHECK_EQ(nstores, 1);
    CHECK_EQ(cn_groups_state(gs, "g"), CN_GROUP_STABLE);
    CHECK_EQ(cn_groups_heartbeat(gs, "g", old_id, "inst-1", 1, 7001),
             KAFKA_FENCED_INSTANCE_ID);
    CHECK_EQ(cn_groups_heartbeat(gs, "g", s2->member_id, "inst-1", 1, 7001),
             KAFKA_NONE);
    CHECK_EQ(cn_groups_heartbeat(gs, "g", a->member_id, NULL, 1, 7001),
             KAFKA_NONE);
    ss = sync_ex(gs, "g", s2->member_id, "inst-1", 1, NULL, 0, 7002);
    CHECK(strcmp(ss->assignment, "asg-S") == 0);
    ss = sync_ex(gs, "g", old_id, "inst-1", 1, NULL, 0, 7002);
    CHECK_EQ(ss->error, KAFKA_FENCED_INSTANCE_ID);
    CHECK_EQ(cn_groups_check_commit(gs, "g", 1, old_id, "inst-1", false,
                                    7003),
             KAFKA_FENCED_INSTANCE_ID);
    g = cn_groups_find(gs, "g");
    cn_group_member(g, 0, &mi);
    CHECK(strcmp(mi.member_id, s2->member_id) == 0);
    CHECK(strcmp(mi.instance_id, "inst-1") == 0);

    /* Leave by instance id alone (LeaveGroup v3+ admin removal). */
    lm = (struct cn_leave_member){"", "inst-1", -1};
    CHECK_EQ(cn_groups_leave(gs, "g", &lm, 1, 8000), KAFKA_NONE);
    CHECK_EQ(lm.error, KAFKA_NONE);
    CHECK_EQ(cn_groups_state(gs, "g"), CN_GROUP_PREPARING_REBALANCE);
    lm = (struct cn_leave_member){"", "inst-1", -1};
    CHECK_EQ(cn_groups_leave(gs, "g", &lm, 1, 8001), KAFKA_NONE);
    CHECK_EQ(lm.error, KAFKA_UNKNOWN_MEMBER_ID);
    a = join(gs, "g", a->member_id, "A", 8002);
    CHECK_EQ(a->generation, 2);
    CHECK(strcmp(a->leader, a->member_id) == 0);
    cn_groups_free(gs);
    check_all_answered();
}

UNIT_TEST(test_errors)
{
    struct cn_groups *gs = setup(0);
    char ids[3][160];
    struct joinopt bad_session = {.session = 1000};
    struct joinopt other_type = {.type = "connect"};
    struct joinopt other_proto = {.proto = "roundrobin"};
    struct jw *w;
    struct sw *s;
    struct cn_sync_req rq;
    int64_t t;

    w = join_ex(gs, "g", "", "A", &bad_session, 0);
    CHECK_EQ(w->error, KAFKA_INVALID_SESSION_TIMEOUT);
    w = join(gs, "", "", "A", 0);
    CHECK_EQ(w->error, KAFKA_INVALID_GROUP_ID);
    t = make_stable3(gs, ids);
    w = join_ex(gs, "g", "", "X", &other_type, t);
    CHECK_EQ(w->error, KAFKA_INCONSISTENT_GROUP_PROTOCOL);
    w = join_ex(gs, "g", "", "X", &other_proto, t);
    CHECK_EQ(w->error, KAFKA_INCONSISTENT_GROUP_PROTOCOL);
    s = sync_(gs, "g", ids[1], 7, t);
    CHECK_EQ(s->error, KAFKA_ILLEGAL_GENERATION);
    s = sync_(gs, "g", "who", 1, t);
    CHECK_EQ(s->error, KAFKA_UNKNOWN_MEMBER_ID);
    s = sync_(gs, "nogroup", "who", 1, t);
    CHECK_EQ(s->error, KAFKA_UNKNOWN_MEMBER_ID);
    /* v5 names a different protocol. */
    rq = (struct cn_sync_req){.group_id = "g", .member_id = ids[1],
                              .generation = 1, .protocol_type = "consumer",
                              .protocol_name = "sticky"};
    s = new_sw();
    cn_groups_sync(gs, &rq, s, t);
    CHECK_EQ(s->error, KAFKA_INCONSISTENT_GROUP_PROTOCOL);
    CHECK_EQ(cn_groups_heartbeat(gs, "g", ids[1], NULL, 0, t),
             KAFKA_ILLEGAL_GENERATION);
    CHECK_EQ(cn_groups_heartbeat(gs, "g", "who", NULL, 1, t),
             KAFKA_UNKNOWN_MEMBER_ID);
    CHECK_EQ(cn_groups_heartbeat(gs, "nogroup", "who", NULL, 1, t),
             KAFKA_UNKNOWN_MEMBER_ID);
    CHECK_EQ(cn_groups_heartbeat(gs, "g", ids[1], "inst", 1, t),
             KAFKA_UNKNOWN_MEMBER_ID);
    /* SyncGroup during PreparingRebalance. */
    w = join(gs, "g", ids[0], "A", t + 1);
    s = sync_(gs, "g", ids[1], 1, t + 2);
    CHECK_EQ(s->error, KAFKA_REBALANCE_IN_PROGRESS);
    /* The leader re-sends JoinGroup: the first one is answered. */
    struct jw *w2 = join(gs, "g", ids[0], "A", t + 3);
    CHECK_EQ(w->called, 1);
    CHECK_EQ(w->error, KAFKA_REBALANCE_IN_PROGRESS);
    CHECK_EQ(w2->called, 0);
    cn_groups_free(gs);
    check_all_answered();
    CHECK_EQ(w2->error, KAFKA_COORDINATOR_NOT_AVAILABLE);
}

UNIT_TEST(test_max_size)
{
    struct cn_groups *gs = setup(2);
    struct jw *a, *b, *c;

    a = join_new(gs, "g", "A", 0);
    b = join_new(gs, "g", "B", 0);
    /* Two members await the join: a third is turned away at once. */
    c = join(gs, "g", "", "C", 0);
    CHECK_EQ(c->called, 1);
    CHECK_EQ(c->error, KAFKA_GROUP_MAX_SIZE_REACHED);
    CHECK(strcmp(c->member_id, "") == 0);
    cn_groups_tick(gs, 3000);
    cn_groups_tick(gs, 6000);
    CHECK_EQ(a->generation, 1);
    CHECK_EQ(b->generation, 1);
    CHECK_EQ(a->nmembers, 2);
    c = join(gs, "g", "", "C", 6001);
    CHECK_EQ(c->error, KAFKA_GROUP_MAX_SIZE_REACHED);
    cn_groups_free(gs);
    check_all_answered();
}

UNIT_TEST(test_describe_list_delete)
{
    struct cn_groups *gs = setup(0);
    char ids[3][160];
    struct cn_leave_member lm[3];
    struct cn_member_info mi;
    const struct cn_group *g;
    const char *stable[] = {"stable"};
    const char *empty[] = {" Empty "};
    const char *classic[] = {"Classic"};
    const char *consumer[] = {"consumer"};
    int64_t t = make_stable3(gs, ids);
    size_t n = 0;

    CHECK_EQ(cn_groups_touch(gs, "simple", t), 0);
    for (g = cn_groups_next(gs, NULL); g; g = cn_groups_next(gs, g))
        n++;
    CHECK_EQ(n, 2);
    CHECK_EQ(cn_groups_count(gs), 2);
    g = cn_groups_find(gs, "g");
    CHECK(strcmp(cn_group_state_name(cn_group_state(g)), "Stable") == 0);
    CHECK(strcmp(cn_group_protocol_type(g), "consumer") == 0);
    CHECK(strcmp(cn_group_protocol(g), "range") == 0);
    CHECK(strcmp(cn_group_type(g), "classic") == 0);
    CHECK_EQ(cn_group_generation(g), 1);
    cn_group_describe_member(g, 1, &mi);
    CHECK(strcmp(mi.member_id, ids[1]) == 0);
    CHECK(strcmp(mi.client_id, "B") == 0);
    CHECK(strcmp(mi.client_host, "/127.0.0.1") == 0);
    CHECK(mi.instance_id == NULL);
    CHECK_EQ(mi.metadata_len, 6);
    CHECK(memcmp(mi.metadata, "meta-B", 6) == 0);
    CHECK_EQ(mi.assignment_len, 5);
    CHECK(cn_group_list_match(g, stable, 1, classic, 1));
    CHECK(!cn_group_list_match(g, empty, 1, NULL, 0));
    CHECK(!cn_group_list_match(g, NULL, 0, consumer, 1));
    CHECK(cn_group_list_match(cn_groups_find(gs, "simple"), empty, 1, NULL,
                              0));
    CHECK(strcmp(cn_group_protocol_type(cn_groups_find(gs, "simple")), "") ==
          0);
    CHECK(strcmp(cn_group_state_name(cn_groups_state(gs, "none")), "Dead") ==
          0);
    CHECK(strcmp(cn_group_state_name(CN_GROUP_PREPARING_REBALANCE),
                 "PreparingRebalance") == 0);
    CHECK(strcmp(cn_group_state_name(CN_GROUP_COMPLETING_REBALANCE),
                 "CompletingRebalance") == 0);

    CHECK_EQ(cn_groups_delete(gs, "g"), KAFKA_NON_EMPTY_GROUP);
    CHECK_EQ(cn_groups_delete(gs, "none"), KAFKA_GROUP_ID_NOT_FOUND);
    CHECK_EQ(cn_groups_delete(gs, ""), KAFKA_INVALID_GROUP_ID);

    /* Everyone leaves: the rebalance ends Empty at generation 2. */
    lm[0] = (struct cn_leave_member){ids[0], NULL, -1};
    lm[1] = (struct cn_leave_member){ids[1], NULL, -1};
    lm[2] = (struct cn_leave_member){ids[2], NULL, -1};
    nstores = 0;
    CHECK_EQ(cn_groups_leave(gs, "g", lm, 3, t + 1), KAFKA_NONE);
    CHECK_EQ(cn_groups_state(gs, "g"), CN_GROUP_EMPTY);
    CHECK_EQ(nstores, 1);
    CHECK_EQ(store_state, CN_GROUP_EMPTY);
    g = cn_groups_find(gs, "g");
    CHECK_EQ(cn_group_generation(g), 2);
    CHECK(cn_group_protocol(g) == NULL);
    CHECK(cn_group_leader(g) == NULL);
    /* Empty but keeps its protocol type, as Kafka. */
    CHECK(strcmp(cn_group_protocol_type(g), "consumer") == 0);
    CHECK_EQ(cn_groups_delete(gs, "g"), KAFKA_NONE);
    CHECK(!cn_groups_exists(gs, "g"));
    CHECK_EQ(cn_groups_state(gs, "g"), CN_GROUP_DEAD);
    CHECK_EQ(cn_groups_count(gs), 1);
    cn_groups_free(gs);
    check_all_answered();
}

UNIT_TEST(test_record_round_trip)
{
    struct cn_groups *gs = setup(0), *gs2;
    struct joinopt st = {.instance = "inst-9"};
    char ids[3][160];
    struct cn_wr key, val, key2, val2, off;
    const struct cn_group *g1, *g2;
    struct cn_member_info m1, m2;
    struct cn_rd rd;
    struct jw *s;
    size_t i;
    int64_t t;

    t = make_stable3(gs, ids);
    /* Make C static to carry an instance id through. */
    (void)st;
    g1 = cn_groups_find(gs, "g");
    cn_wr_init(&key, 64);
    cn_wr_init(&val, 256);
    CHECK_EQ(cn_group_metadata_record(g1, &key, &val), 0);
    cn_rd_init(&rd, key.buf, key.len);
    CHECK_EQ(cn_rd_i16(&rd), 2);
    cn_rd_init(&rd, val.buf, val.len);
    CHECK_EQ(cn_rd_i16(&rd), 3);

    gs2 = setup(0);
    /* An offset commit key (version 1) is skipped. */
    cn_wr_init(&off, 16);
    cn_wr_i16(&off, 1);
    cn_wr_str(&off, false, cn_bytes_str("g"));
    CHECK_EQ(cn_groups_load_record(gs2, off.buf, off.len, val.buf, 3, t), 0);
    CHECK(!cn_groups_exists(gs2, "g"));
    CHECK(cn_groups_load_record(gs2, key.buf, key.len, val.buf, 5, t) < 0);
    CHECK_EQ(cn_groups_load_record(gs2, key.buf, key.len, val.buf, val.len,
                                   t),
             0);
    g2 = cn_groups_find(gs2, "g");
    CHECK(g2 != NULL);
    CHECK_EQ(cn_group_state(g2), CN_GROUP_STABLE);
    CHECK_EQ(cn_group_generation(g2), cn_group_generation(g1));
    CHECK(strcmp(cn_group_protocol(g2), "range") == 0);
    CHECK(strcmp(cn_group_protocol_type(g2), "consumer") == 0);
    CHECK(strcmp(cn_group_leader(g2), cn_group_leader(g1)) == 0);
    CHECK_EQ(cn_group_nmembers(g2), 3);
    for (i = 0; i < 3; i++) {
        cn_group_describe_member(g1, i, &m1);
        cn_group_describe_member(g2, i, &m2);
        CHECK(strcmp(m1.member_id, m2.member_id) == 0);
        CHECK(strcmp(m1.client_id, m2.client_id) == 0);
        CHECK(strcmp(m1.client_host, m2.client_host) == 0);
        CHECK(m2.instance_id == NULL);
        CHECK_EQ(m1.session_timeout_ms, m2.session_timeout_ms);
        CHECK_EQ(m1.rebalance_timeout_ms, m2.rebalance_timeout_ms);
        CHECK_EQ(m1.metadata_len, m2.metadata_len);
        CHECK(memcmp(m1.metadata, m2.metadata, m1.metadata_len) == 0);
        CHECK_EQ(m1.assignment_len, m2.assignment_len);
        CHECK(memcmp(m1.assignment, m2.assignment, m1.assignment_len) == 0);
    }
    /* Re-encoding the loaded group gives the same bytes. */
    cn_wr_init(&key2, 64);
    cn_wr_init(&val2, 256);
    CHECK_EQ(cn_group_metadata_record(g2, &key2, &val2), 0);
    CHECK_EQ(val2.len, val.len);
    CHECK(memcmp(val2.buf, val.buf, val.len) == 0);

    /* Loaded members heartbeat; a silent one expires. */
    CHECK_EQ(cn_groups_heartbeat(gs2, "g", ids[0], NULL, 1, t + 5000),
             KAFKA_NONE);
    CHECK_EQ(cn_groups_heartbeat(gs2, "g", ids[1], NULL, 1, t + 5000),
             KAFKA_NONE);
    cn_groups_tick(gs2, t + 10000);
    CHECK_EQ(cn_groups_state(gs2, "g"), CN_GROUP_PREPARING_REBALANCE);
    CHECK_EQ(cn_group_nmembers(cn_groups_find(gs2, "g")), 2);

    /* Tombstone removes it. */
    CHECK_EQ(cn_groups_load_record(gs2, key.buf, key.len, NULL, 0, t), 0);
    CHECK(!cn_groups_exists(gs2, "g"));

    /* A static member and an Empty group round-trip too. */
    cn_groups_free(gs2);
    gs2 = setup(0);
    s = join_ex(gs2, "h", "", "S", &st, 0);
    cn_groups_tick(gs2, 3000);
    CHECK_EQ(s->error, KAFKA_NONE);
    cn_wr_reset(&key2);
    cn_wr_reset(&val2);
    CHECK_EQ(cn_group_metadata_record(cn_groups_find(gs2, "h"), &key2, &val2),
             0);
    cn_groups_free(gs2);
    check_all_answered();
    gs2 = setup(0);
    CHECK_EQ(cn_groups_load_record(gs2, key2.buf, key2.len, val2.buf,
                                   val2.len, 0),
             0);
    cn_group_member(cn_groups_find(gs2, "h"), 0, &m2);
    CHECK(strcmp(m2.instance_id, "inst-9") == 0);
    CHECK_EQ(cn_groups_heartbeat(gs2, "h", s->member_id, "inst-9", 1, 1),
             KAFKA_NONE);
    cn_groups_free(gs2);

    cn_wr_fini(&key);
    cn_wr_fini(&val);
    cn_wr_fini(&key2);
    cn_wr_fini(&val2);
    cn_wr_fini(&off);
    cn_groups_free(gs);
}

UNIT_TEST(test_shutdown_answers_waiters)
{
    struct cn_groups *gs = setup(0);
    char ids[3][160];
    int64_t t = make_stable3(gs, ids);
    struct jw *a, *b, *x;
    struct sw *s;

    /* Group g: A and B waiting in JoinGroup. */
    a = join(gs, "g", ids[0], "A", t);
    b = join(gs, "g", ids[1], "B", t);
    CHECK_EQ(a->called + b->called, 0);
    /* Group h: a follower waiting in SyncGroup. */
    x = join_new(gs, "h", "X", t);
    struct jw *y = join_new(gs, "h", "Y", t);
    cn_groups_tick(gs, t + 3000);
    cn_groups_tick(gs, t + 6000);
    CHECK_EQ(y->called, 1);
    s = sync_(gs, "h", y->member_id, 1, t + 6001);
    CHECK_EQ(s->called, 0);
    cn_groups_shutdown(gs);
    CHECK_EQ(a->error, KAFKA_COORDINATOR_NOT_AVAILABLE);
    CHECK_EQ(b->error, KAFKA_COORDINATOR_NOT_AVAILABLE);
    CHECK_EQ(s->error, KAFKA_COORDINATOR_NOT_AVAILABLE);
    CHECK_EQ(x->called, 1);
    x = join(gs, "g", "", "Z", t + 6002);
    CHECK_EQ(x->error, KAFKA_COORDINATOR_NOT_AVAILABLE);
    CHECK_EQ(cn_groups_heartbeat(gs, "g", ids[0], NULL, 1, t),
             KAFKA_COORDINATOR_NOT_AVAILABLE);
    CHECK_EQ(cn_groups_next_deadline(gs), INT64_MAX);
    cn_groups_shutdown(gs);
    cn_groups_free(gs);
    check_all_answered();
}

UNIT_TEST(test_commit_check)
{
    struct cn_groups *gs = setup(0);
    char ids[3][160];
    int64_t t;
    struct jw *a;

    CHECK_EQ(cn_groups_check_commit(gs, "simple", -1, "", NULL, false, 0),
             KAFKA_NONE);
    CHECK_EQ(cn_groups_state(gs, "simple"), CN_GROUP_EMPTY);
    CHECK_EQ(cn_groups_check_commit(gs, "simple", -1, "", NULL, false, 0),
             KAFKA_NONE);
    CHECK_EQ(cn_groups_check_commit(gs, "missing", 3, "m", NULL, false, 0),
             KAFKA_ILLEGAL_GENERATION);
    CHECK(!cn_groups_exists(gs, "missing"));
    t = make_stable3(gs, ids);
    CHECK_EQ(cn_groups_check_commit(gs, "g", -1, "", NULL, false, t),
             KAFKA_UNKNOWN_MEMBER_ID);
    CHECK_EQ(cn_groups_check_commit(gs, "g", -1, "", NULL, true, t),
             KAFKA_NONE);
    CHECK_EQ(cn_groups_check_commit(gs, "g", 1, ids[1], NULL, false, t),
             KAFKA_NONE);
    CHECK_EQ(cn_groups_check_commit(gs, "g", 2, ids[1], NULL, false, t),
             KAFKA_ILLEGAL_GENERATION);
    CHECK_EQ(cn_groups_check_commit(gs, "g", 1, "who", NULL, false, t),
             KAFKA_UNKNOWN_MEMBER_ID);
    /* Commits count as heartbeats: C survives on commits alone. */
    CHECK_EQ(cn_groups_check_commit(gs, "g", 1, ids[2], NULL, false,
                                     t + 8000),
             KAFKA_NONE);
    CHECK_EQ(cn_groups_heartbeat(gs, "g", ids[0], NULL, 1, t + 8000),
             KAFKA_NONE);
    CHECK_EQ(cn_groups_heartbeat(gs, "g", ids[1], NULL, 1, t + 8000),
             KAFKA_NONE);
    cn_groups_tick(gs, t + 12000);
    CHECK_EQ(cn_groups_state(gs, "g"), CN_GROUP_STABLE);
    /* PreparingRebalance with the right generation passes (Kafka);
     * CompletingRebalance does not, except for transactions. */
    a = join(gs, "g", ids[0], "A", t + 12001);
    CHECK_EQ(cn_groups_check_commit(gs, "g", 1, ids[1], NULL, false,
                                     t + 12002),
             KAFKA_NONE);
    join(gs, "g", ids[1], "B", t + 12003);
    join(gs, "g", ids[2], "C", t + 12003);
    CHECK_EQ(a->generation, 2);
    CHECK_EQ(cn_groups_state(gs, "g"), CN_GROUP_COMPLETING_REBALANCE);
    CHECK_EQ(cn_groups_check_commit(gs, "g", 2, ids[1], NULL, false,
                                     t + 12004),
             KAFKA_REBALANCE_IN_PROGRESS);
    CHECK_EQ(cn_groups_check_commit(gs, "g", 2, ids[1], NULL, true,
                                     t + 12004),
             KAFKA_NONE);
    cn_groups_free(gs);
    check_all_answered();
}

UNIT_TEST(test_pending_sync_expiry)
{
    struct cn_groups *gs = setup(0);
    struct jw *a, *b, *a2;
    struct sw *sa;
    int64_t t;

    a = join_new(gs, "g", "A", 0);
    b = join_new(gs, "g", "B", 0);
    cn_groups_tick(gs, 3000);
    cn_groups_tick(gs, 6000);
    CHECK_EQ(b->generation, 1);
    sa = sync_(gs, "g", a->member_id, 1, 6001);
    CHECK_EQ(sa->error, KAFKA_NONE);
    CHECK_EQ(cn_groups_state(gs, "g"), CN_GROUP_STABLE);
    /* B never sends SyncGroup (though it heartbeats): once the rebalance
     * timeout (20 s) has passed it is removed and the group rebalances. */
    for (t = 9000; t < 26000; t += 5000) {
        CHECK_EQ(cn_groups_heartbeat(gs, "g", b->member_id, NULL, 1, t),
                 KAFKA_NONE);
        CHECK_EQ(cn_groups_heartbeat(gs, "g", a->member_id, NULL, 1, t),
                 KAFKA_NONE);
        cn_groups_tick(gs, t);
    }
    CHECK_EQ(cn_groups_state(gs, "g"), CN_GROUP_STABLE);
    cn_groups_tick(gs, 26000);
    CHECK_EQ(cn_groups_state(gs, "g"), CN_GROUP_PREPARING_REBALANCE);
    CHECK_EQ(cn_groups_heartbeat(gs, "g", b->member_id, NULL, 1, 26001),
             KAFKA_UNKNOWN_MEMBER_ID);
    a2 = join(gs, "g", a->member_id, "A", 26002);
    CHECK_EQ(a2->generation, 2);
    CHECK_EQ(a2->nmembers, 1);
    cn_groups_free(gs);
    check_all_answered();
}

UNIT_TEST(test_protocol_vote)
{
    struct cn_groups *gs = setup(0);
    struct cn_join_protocol pa[2] = {{"rr", NULL, 0}, {"range", NULL, 0}};
    struct cn_join_protocol pb[2] = {{"range", NULL, 0}, {"rr", NULL, 0}};
    struct cn_join_protocol pc[1] = {{"range", NULL, 0}};
    struct cn_join_req rq = {.group_id = "g", .member_id = "",
                             .client_id = "c", .protocol_type = "consumer",
                             .session_timeout_ms = 10000,
                             .rebalance_timeout_ms = -1, .version = 3};
    struct jw *a = new_jw(), *b = new_jw(), *c = new_jw();

    rq.protocols = pa;
    rq.nprotocols = 2;
    cn_groups_join(gs, &rq, a, 0);
    rq.protocols = pb;
    cn_groups_join(gs, &rq, b, 0);
    rq.protocols = pc;
    rq.nprotocols = 1;
    cn_groups_join(gs, &rq, c, 0);
    /* Initial delay is capped by the rebalance timeout (v0: session). */
    cn_groups_tick(gs, 3000);
    CHECK_EQ(a->called, 0);
    cn_groups_tick(gs, 6000);
    CHECK_EQ(a->called, 1);
    /* Only "range" is common, whatever A prefers. */
    CHECK(strcmp(a->protocol, "range") == 0);
    CHECK(strcmp(c->protocol, "range") == 0);
    cn_groups_free(gs);
    check_all_answered();
}

static uint64_t last_token;
static int nstore_syncs;

static void on_store_sync(void *arg, const struct cn_group *g, uint64_t token)
{
    (void)arg;
    (void)g;
    nstore_syncs++;
    last_token = token;
}

/* With store_sync, nobody hears of the leader's assignment before the
 * write is reported durable; a failed write is answered with its error
 * and the group rebalances; a report for an older write is ignored. */
UNIT_TEST(test_sync_waits_for_store)
{
    struct cn_groups_ops ops = {on_join,       on_sync, on_store,
                                on_store_sync, NULL,    NULL};
    nstore_syncs = 0;
    struct cn_groups *gs = setup_ops(&ops, 0);
    struct jw *a = join_new(gs, "g", "A", 0);
    struct jw *b = join_new(gs, "g", "B", 100);
    cn_groups_tick(gs, 3000);
    cn_groups_tick(gs, 6000);
    CHECK_EQ(a->error, KAFKA_NONE);
    struct cn_sync_assignment asg[2] = {
        {a->member_id, (const uint8_t *)"asg-A", 5},
        {b->member_id, (const uint8_t *)"asg-B", 5},
    };
    struct sw *sb = sync_(gs, "g", b->member_id, 1, 6001);
    struct sw *sa = sync_ex(gs, "g", a->member_id, NULL, 1, asg, 2, 6002);
    CHECK_EQ(nstore_syncs, 1);
    uint64_t t1 = last_token;
    CHECK(t1 != 0);
    CHECK_EQ(sa->called + sb->called, 0);
    CHECK_EQ(cn_groups_state(gs, "g"), CN_GROUP_COMPLETING_REBALANCE);
    /* The leader sends it again: the first write no longer counts. */
    sa = sync_ex(gs, "g", a->member_id, NULL, 1, asg, 2, 6003);
    CHECK_EQ(nstore_syncs, 2);
    uint64_t t2 = last_token;
    cn_groups_stored(gs, "g", t1, KAFKA_NONE, 6004);
    CHECK_EQ(sa->called + sb->called, 0);
    cn_groups_stored(gs, "g", t2, KAFKA_NONE, 6005);
    CHECK_EQ(sa->called, 1);
    CHECK_EQ(sa->error, KAFKA_NONE);
    CHECK(strcmp(sa->assignment, "asg-A") == 0);
    CHECK(strcmp(sb->assignment, "asg-B") == 0);
    CHECK_EQ(cn_groups_state(gs, "g"), CN_GROUP_STABLE);

    /* Next generation: the write fails. */
    struct jw *a2 = join(gs, "g", a->member_id, "A", 7000);
    struct jw *b2 = join(gs, "g", b->member_id, "B", 7001);
    CHECK_EQ(a2->error, KAFKA_NONE);
    CHECK_EQ(a2->generation, 2);
    CHECK_EQ(b2->called, 1);
    sb = sync_(gs, "g", b->member_id, 2, 7002);
    sa = sync_ex(gs, "g", a->member_id, NULL, 2, asg, 2, 7003);
    CHECK_EQ(sa->called + sb->called, 0);
    cn_groups_stored(gs, "g", last_token, KAFKA_NOT_COORDINATOR, 7004);
    CHECK_EQ(sa->error, KAFKA_NOT_COORDINATOR);
    CHECK_EQ(sb->error, KAFKA_NOT_COORDINATOR);
    CHECK_EQ(sa->len, 0);
    CHECK_EQ(cn_groups_state(gs, "g"), CN_GROUP_PREPARING_REBALANCE);
    /* A late report of that write changes nothing. */
    cn_groups_stored(gs, "g", last_token, KAFKA_NONE, 7005);
    CHECK_EQ(cn_groups_state(gs, "g"), CN_GROUP_PREPARING_REBALANCE);
    cn_groups_shutdown(gs);
    check_all_answered();
    cn_groups_free(gs);
}

static int ncreated;

static void on_store_created(void *arg, const struct cn_group *g,
                             uint64_t token)
{
    (void)arg;
    (void)g;
    ncreated++;
    last_token = token;
}

/* With store_created, a group whose creation could not be made durable
 * goes again (Kafka undoes the creation with its failed write): a member
 * still waiting in it gets the error, a KIP-394 member id handed out
 * before is unknown.  A write that succeeded, or that ended after another
 * generation, changes nothing. */
UNIT_TEST(test_failed_creation_removes_group)
{
    struct cn_groups_ops ops = {on_join, on_sync, on_store,
                                NULL,    NULL,    on_store_created};
    ncreated = 0;
    struct cn_groups *gs = setup_ops(&ops, 0);
    /* v0 waits in the join phase (no MEMBER_ID_REQUIRED). */
    struct joinopt v0 = {.version = 1};
    struct jw *a = join_ex(gs, "g", "", "A", &v0, 0);
    CHECK_EQ(ncreated, 1);
    CHECK_EQ(nstores, 0);
    CHECK_EQ(a->called, 0);
    cn_groups_stored(gs, "g", last_token, KAFKA_NOT_COORDINATOR, 10);
    CHECK_EQ(a->called, 1);
    CHECK_EQ(a->error, KAFKA_NOT_COORDINATOR);
    CHECK_EQ(cn_groups_state(gs, "g"), CN_GROUP_DEAD);

    /* KIP-394: the id was handed out, then the group went. */
    struct jw *b = join(gs, "h", "", "B", 20);
    CHECK_EQ(b->error, KAFKA_MEMBER_ID_REQUIRED);
    CHECK_EQ(ncreated, 2);
    cn_groups_stored(gs, "h", last_token, KAFKA_NOT_COORDINATOR, 30);
    struct jw *b2 = join(gs, "h", b->member_id, "B", 40);
    CHECK_EQ(b2->error, KAFKA_UNKNOWN_MEMBER_ID);

    /* Durable: the group stays and goes on. */
    struct jw *c = join_new(gs, "k", "C", 50);
    cn_groups_stored(gs, "k", last_token, KAFKA_NONE, 60);
    CHECK(cn_groups_state(gs, "k") != CN_GROUP_DEAD);
    cn_groups_tick(gs, 10000);
    CHECK_EQ(c->called, 1);
    CHECK_EQ(c->error, KAFKA_NONE);
    cn_groups_free(gs);
    check_all_answered();
}

static bool match_prefix(void *arg, const char *group_id)
{
    return strncmp(group_id, arg, strlen(arg)) == 0;
}

/* A __consumer_offsets partition this broker no longer leads: its groups
 * go from memory, their waiting members get NOT_COORDINATOR, a store
 * report for them is ignored; the other groups go on. */
UNIT_TEST(test_unload_answers_and_forgets)
{
    struct cn_groups_ops ops = {on_join,       on_sync, on_store,
                                on_store_sync, NULL,    NULL};
    nstore_syncs = 0;
    struct cn_groups *gs = setup_ops(&ops, 0);
    /* "lost-a": A and B in JoinGroup, then B waiting in SyncGroup while
     * the leader's assignment is being stored. */
    struct jw *a = join_new(gs, "lost-a", "A", 0);
    struct jw *b = join_new(gs, "lost-a", "B", 0);
    cn_groups_tick(gs, 3000);
    cn_groups_tick(gs, 6000);
    CHECK_EQ(a->error, KAFKA_NONE);
    struct cn_sync_assignment asg[2] = {
        {a->member_id, (const uint8_t *)"asg-A", 5},
        {b->member_id, (const uint8_t *)"asg-B", 5},
    };
    struct sw *sb = sync_(gs, "lost-a", b->member_id, 1, 6001);
    struct sw *sa = sync_ex(gs, "lost-a", a->member_id, NULL, 1, asg, 2, 6002);
    uint64_t token = last_token;
    CHECK_EQ(sa->called + sb->called, 0);
    /* "lost-b": one member waiting in its first JoinGroup. */
    struct jw *c = join_new(gs, "lost-b", "C", 6003);
    CHECK_EQ(c->called, 0);
    /* "kept": a member waiting too, on another partition. */
    struct jw *k = join_new(gs, "kept", "K", 6003);
    CHECK_EQ(cn_groups_count(gs), 3);

    CHECK_EQ(cn_groups_unload(gs, match_prefix, "lost-",
                              KAFKA_NOT_COORDINATOR),
             2);
    CHECK_EQ(sa->error, KAFKA_NOT_COORDINATOR);
    CHECK_EQ(sb->error, KAFKA_NOT_COORDINATOR);
    CHECK_EQ(c->error, KAFKA_NOT_COORDINATOR);
    CHECK_EQ(k->called, 0);
    CHECK_EQ(cn_groups_count(gs), 1);
    CHECK_EQ(cn_groups_state(gs, "lost-a"), CN_GROUP_DEAD);
    CHECK_EQ(cn_groups_state(gs, "lost-b"), CN_GROUP_DEAD);
    CHECK_EQ(cn_groups_state(gs, "kept"), CN_GROUP_PREPARING_REBALANCE);
    /* The write that was in flight ends after the unload: ignored. */
    cn_groups_stored(gs, "lost-a", token, KAFKA_NONE, 6004);
    CHECK_EQ(cn_groups_state(gs, "lost-a"), CN_GROUP_DEAD);
    /* Nothing of the unloaded groups is left for the timers. */
    cn_groups_tick(gs, 6003 + 3000);
    CHECK_EQ(k->called, 1);
    CHECK_EQ(k->error, KAFKA_NONE);
    CHECK_EQ(cn_groups_unload(gs, match_prefix, "lost-",
                              KAFKA_NOT_COORDINATOR),
             0);
    cn_groups_shutdown(gs);
    check_all_answered();
    cn_groups_free(gs);
}

UNIT_MAIN(test_three_members_join_sync, test_leave_rebalance,
          test_session_expiry, test_rebalance_timeout, test_member_id_required,
          test_pending_member_delays_join, test_static_member_rejoin,
          test_errors, test_max_size, test_describe_list_delete,
          test_record_round_trip, test_shutdown_answers_waiters,
          test_commit_check, test_pending_sync_expiry, test_protocol_vote,
          test_sync_waits_for_store, test_failed_creation_removes_group,
          test_unload_answers_and_forgets)
