/*
 * test_ctl.c - the controller (meta/ctl.h), as a specification, then the
 * whole quorum on libraft's fixture (meta/fsm.h).
 *
 * Part 1 drives the bare machine: events in, actions checked; a proposal
 * is "committed" by applying its records to a real image at the next
 * offset and feeding CN_CTE_PROPOSED, as fsm.c does.
 * Part 2 runs 3 voters on raft/fixture.h (simulated time, in-memory I/O)
 * with the real fsm.c, image.c and ctl.c (meta_fixture.h).
 */
#include <stdlib.h>
#include <string.h>

#include "base/wr.h"
#include "meta/ctl.h"
#include "meta/image.h"
#include "meta_fixture.h"
#include "proto/kerr.h"
#include "unit.h"

#define SESSION_MS 9000
#define CLUSTER "cairn-test-cluster-id1"

static struct cn_ctl_config test_config(uint64_t seed)
{
    return (struct cn_ctl_config){
        .cluster_id = CLUSTER,
        .metadata_version = 21,
        .transaction_version = 2,
        .session_timeout_ms = SESSION_MS,
        .default_partitions = 1,
        .default_rf = 1,
        .pid_block = 1000,
        .seed = seed,
    };
}

/* ---- part 1: the bare machine ----------------------------------------- */

/* The machine, its image and what it did, with a fake commit. */
struct rig {
    struct cn_image *img;
    struct cn_ctl *ctl;
    struct cn_ctl_actions acts;
    int64_t now;
    int64_t offset;         /* the last entry's */
    bool hold;              /* leave proposals in flight */
    uint64_t held_seq;      /* the proposal left in flight */
    int nproposals;         /* entries proposed so far */
    int16_t last_types[64]; /* the last proposal's record types */
    size_t last_n;
    struct cn_ctl_answer ans[64]; /* every answer, in order */
    char msg[64][256];
    int nans;
    int nstandby;
    int64_t timer; /* the last step's timer_mono_ms */
};

static void rig_step(struct rig *r, const struct cn_ctl_event *ev);

static void rig_collect(struct rig *r)
{
    struct cn_ctl_actions *a = &r->acts;
    for (size_t i = 0; i < a->nanswers && r->nans < 64; i++) {
        r->ans[r->nans] = a->answers[i];
        snprintf(r->msg[r->nans], sizeof r->msg[0], "%s",
                 a->answers[i].message ? a->answers[i].message : "");
        r->ans[r->nans].message = r->msg[r->nans];
        r->nans++;
    }
    r->nstandby += (int)a->nstandbys;
    r->timer = a->timer_mono_ms;
    if (!a->propose) {
        cn_ctl_actions_reset(a);
        return;
    }
    r->nproposals++;
    r->last_n = a->nrecs;
    for (size_t i = 0; i < a->nrecs && i < 64; i++)
        r->last_types[i] = a->recs[i].type;
    uint64_t seq = a->seq;
    if (r->hold) {
        r->held_seq = seq;
        cn_ctl_actions_reset(a);
        return;
    }
    /* Commit: what fsm.c and libraft do on a working quorum. */
    int64_t off = ++r->offset;
    for (size_t i = 0; i < a->nrecs; i++)
        if (a->recs[i].type == CN_MREC_REGISTER_BROKER)
            a->recs[i].u.register_broker.broker_epoch = off;
    CHECK_EQ(cn_image_apply(r->img, off, a->recs, a->nrecs), 0);
    cn_ctl_actions_reset(a);
    struct cn_ctl_event ev = {.kind = CN_CTE_PROPOSED};
    ev.u.proposed.seq = seq;
    ev.u.proposed.offset = off;
    rig_step(r, &ev);
}

static void rig_step(struct rig *r, const struct cn_ctl_event *ev)
{
    cn_ctl_step(r->ctl, r->img, r->now, ev, &r->acts);
    rig_collect(r);
}

static void rig_init(struct rig *r, uint64_t seed)
{
    memset(r, 0, sizeof *r);
    struct cn_ctl_config cfg = test_config(seed);
    r->img = cn_image_new();
    r->ctl = cn_ctl_new(&cfg);
    cn_ctl_actions_init(&r->acts);
    r->now = 1000;
}

static void rig_fini(struct rig *r)
{
    cn_ctl_actions_fini(&r->acts);
    cn_ctl_free(r->ctl);
    cn_image_free(r->img);
}

static void rig_lead(struct rig *r)
{
    struct cn_ctl_event ev = {.kind = CN_CTE_LEADER, .u.term = 2};
    rig_step(r, &ev);
}

static void rig_tick(struct rig *r, int64_t now)
{
    r->now = now;
    struct cn_ctl_event ev = {.kind = CN_CTE_TICK};
    rig_step(r, &ev);
}

static const struct cn_ctl_answer *last_answer(struct rig *r)
{
    return r->nans ? &r->ans[r->nans - 1] : NULL;
}

static struct cn_uuid incarnation(int32_t id, int gen)
{
    struct cn_uuid u = {{0}};
    u.b[0] = (uint8_t)id;
    u.b[1] = (uint8_t)gen;
    u.b[15] = 1;
    return u;
}

static void rig_register_as(struct rig *r, int32_t id, int gen,
                            const char *cluster)
{
    static const struct cn_ctl_endpoint ep = {{(const uint8_t *)"PLAINTEXT",
                                               9},
                                              {(const uint8_t *)"127.0.0.1",
                                               9},
                                              9092,
                                              0};
    struct cn_ctl_event ev = {.kind = CN_CTE_REGISTER,
                              .token = (void *)(intptr_t)id};
    ev.u.reg.broker_id = id;
    ev.u.reg.cluster_id = cn_bytes_str(cluster);
    ev.u.reg.incarnation = incarnation(id, gen);
    ev.u.reg.eps = &ep;
    ev.u.reg.neps = 1;
    ev.u.reg.rack = CN_BYTES_NULL;
    rig_step(r, &ev);
}

/* Registers broker id; returns its epoch (from the answer). */
static int64_t rig_register(struct rig *r, int32_t id)
{
    rig_register_as(r, id, 1, CLUSTER);
    const struct cn_ctl_answer *a = last_answer(r);
    CHECK(a && a->kind == CN_CTE_REGISTER && a->error == 0);
    return a ? a->u.broker_epoch : -1;
}

static const struct cn_ctl_answer *rig_heartbeat(struct rig *r, int32_t id,
                                                 int64_t epoch, int64_t offset)
{
    struct cn_ctl_event ev = {.kind = CN_CTE_HEARTBEAT};
    ev.u.hb.broker_id = id;
    ev.u.hb.broker_epoch = epoch;
    ev.u.hb.metadata_offset = offset;
    rig_step(r, &ev);
    return last_answer(r);
}

static const struct cn_ctl_answer *rig_create(struct rig *r, const char *name,
                                              int32_t nparts, int16_t rf)
{
    struct cn_ctl_event ev = {.kind = CN_CTE_CREATE_TOPIC};
    ev.u.create.name = cn_bytes_str(name);
    ev.u.create.nparts = nparts;
    ev.u.create.rf = rf;
    rig_step(r, &ev);
    return last_answer(r);
}

/* A leader with n brokers registered and unfenced; epochs in ep[]. */
static void rig_cluster(struct rig *r, int n, int64_t *ep)
{
    rig_lead(r);
    for (int i = 1; i <= n; i++)
        ep[i] = rig_register(r, i);
    for (int i = 1; i <= n; i++)
        rig_heartbeat(r, i, ep[i], cn_image_offset(r->img));
}

static const struct cn_image_part *part_of(struct rig *r, const char *topic,
                                           int32_t p)
{
    const struct cn_image_topic *t = cn_image_topic_find(r->img,
                                                         cn_bytes_str(topic));
    return t && p < t->nparts ? &t->parts[p] : NULL;
}

UNIT_TEST(first_leader_bootstraps_the_cluster_id_and_features)
{
    struct rig r;
    rig_init(&r, 1);
    r.hold = true;
    rig_lead(&r);
    CHECK_EQ(r.nproposals, 1);
    CHECK_EQ(r.last_n, 3);
    CHECK_EQ(r.last_types[0], CN_MREC_CLUSTER_ID);
    CHECK_EQ(r.last_types[1], CN_MREC_FEATURE_LEVEL);
    CHECK_EQ(r.last_types[2], CN_MREC_FEATURE_LEVEL);
    /* A registration waits for the bootstrap to apply. */
    rig_register_as(&r, 1, 1, CLUSTER);
    CHECK_EQ(r.nproposals, 1);
    CHECK_EQ(cn_ctl_queued(r.ctl), 1);
    rig_fini(&r);

    rig_init(&r, 1);
    rig_lead(&r);
    CHECK(strcmp(cn_image_cluster_id(r.img), CLUSTER) == 0);
    CHECK_EQ(cn_image_feature(r.img, "metadata.version"), 21);
    CHECK_EQ(cn_image_feature(r.img, "transaction.version"), 2);
    /* A later leader finds the id and proposes nothing. */
    struct cn_ctl_event un = {.kind = CN_CTE_UNLEADER};
    rig_step(&r, &un);
    rig_lead(&r);
    CHECK_EQ(r.nproposals, 1);
    rig_fini(&r);
}

UNIT_TEST(own_proposal_retried_after_a_pause)
{
    struct rig r;
    rig_init(&r, 1);
    r.hold = true;
    rig_lead(&r);
    CHECK_EQ(r.nproposals, 1);
    /* Refused at once (a leader handing over): not proposed again at
     * once, which would spin the executor, but after 100 ms. */
    struct cn_ctl_event ev = {.kind = CN_CTE_PROPOSED};
    ev.u.proposed.seq = r.held_seq;
    ev.u.proposed.error = KAFKA_NOT_CONTROLLER;
    rig_step(&r, &ev);
    CHECK_EQ(r.nproposals, 1);
    CHECK_EQ(r.timer, r.now + 100);
    rig_tick(&r, r.now + 99);
    CHECK_EQ(r.nproposals, 1);
    rig_tick(&r, r.now + 1);
    CHECK_EQ(r.nproposals, 2);
    rig_fini(&r);
}

UNIT_TEST(one_proposal_in_flight_the_rest_queued)
{
    struct rig r;
    rig_init(&r, 1);
    rig_lead(&r);
    r.hold = true;
    rig_register_as(&r, 1, 1, CLUSTER);
    rig_register_as(&r, 2, 1, CLUSTER);
    rig_register_as(&r, 1, 2, CLUSTER); /* decided after the first */
    CHECK_EQ(r.nproposals, 2);          /* bootstrap + broker 1 */
    CHECK(cn_ctl_in_flight(r.ctl));
    CHECK_EQ(cn_ctl_queued(r.ctl), 2);
    CHECK_EQ(r.nans, 0); /* nothing is answered before it applies */
    /* The outcome is unknown: answered with a retriable error, the next
     * request is decided. */
    struct cn_ctl_event ev = {.kind = CN_CTE_PROPOSED};
    ev.u.proposed.seq = r.held_seq;
    ev.u.proposed.error = KAFKA_REQUEST_TIMED_OUT;
    rig_step(&r, &ev);
    CHECK_EQ(r.nans, 1);
    CHECK_EQ(r.ans[0].error, KAFKA_REQUEST_TIMED_OUT);
    CHECK_EQ(r.nproposals, 3);
    CHECK_EQ(cn_ctl_queued(r.ctl), 1);
    /* Losing the lead answers the queue NOT_CONTROLLER; the one in flight
     * waits for its outcome. */
    struct cn_ctl_event un = {.kind = CN_CTE_UNLEADER};
    rig_step(&r, &un);
    CHECK_EQ(r.nans, 2);
    CHECK_EQ(r.ans[1].error, KAFKA_NOT_CONTROLLER);
    CHECK(cn_ctl_in_flight(r.ctl));
    /* A request to a follower is refused at once. */
    rig_register_as(&r, 3, 1, CLUSTER);
    CHECK_EQ(last_answer(&r)->error, KAFKA_NOT_CONTROLLER);
    rig_fini(&r);
}

UNIT_TEST(registration_epoch_is_the_record_offset_and_starts_fenced)
{
    struct rig r;
    rig_init(&r, 1);
    rig_lead(&r);
    int64_t e1 = rig_register(&r, 1);
    CHECK_EQ(e1, cn_image_offset(r.img));
    const struct cn_image_broker *b = cn_image_broker_find(r.img, 1);
    CHECK(b && b->fenced && b->epoch == e1);
    CHECK_EQ(r.nstandby, 1); /* fsm.c adds it as a raft standby */
    /* A broker behind its own registration stays fenced. */
    const struct cn_ctl_answer *a = rig_heartbeat(&r, 1, e1, e1 - 1);
    CHECK(a->error == 0 && a->u.hb.fenced && !a->u.hb.caught_up);
    CHECK(cn_image_broker_find(r.img, 1)->fenced);
    /* Caught up: unfenced, answered after the record applied. */
    a = rig_heartbeat(&r, 1, e1, e1);
    CHECK(a->error == 0 && !a->u.hb.fenced && a->u.hb.caught_up);
    CHECK(!cn_image_broker_find(r.img, 1)->fenced);
    CHECK_EQ(r.last_types[0], CN_MREC_UNFENCE_BROKER);
    /* A live broker's heartbeat needs no proposal. */
    int before = r.nproposals;
    a = rig_heartbeat(&r, 1, e1, e1 + 1);
    CHECK(a->error == 0 && !a->u.hb.fenced);
    CHECK_EQ(r.nproposals, before);
    rig_fini(&r);
}

UNIT_TEST(registration_and_heartbeat_errors)
{
    struct rig r;
    int64_t ep[4];
    rig_init(&r, 1);
    rig_cluster(&r, 1, ep);
    rig_register_as(&r, 2, 1, "another-cluster");
    CHECK_EQ(last_answer(&r)->error, KAFKA_INCONSISTENT_CLUSTER_ID);
    /* Broker 1 is alive: another process with its id is refused. */
    rig_register_as(&r, 1, 9, CLUSTER);
    CHECK_EQ(last_answer(&r)->error, KAFKA_DUPLICATE_BROKER_REGISTRATION);
    CHECK_EQ(rig_heartbeat(&r, 1, ep[1] - 1, 100)->error,
             KAFKA_STALE_BROKER_EPOCH);
    CHECK_EQ(rig_heartbeat(&r, 7, 1, 100)->error,
             KAFKA_BROKER_ID_NOT_REGISTERED);
    /* The same process registering again (a retried request) gets a new
     * epoch and starts fenced; the old epoch is stale from then on. */
    rig_register_as(&r, 1, 1, CLUSTER);
    const struct cn_ctl_answer *a = last_answer(&r);
    CHECK(a->error == 0 && a->u.broker_epoch > ep[1]);
    CHECK(cn_image_broker_find(r.img, 1)->fenced);
    CHECK_EQ(rig_heartbeat(&r, 1, ep[1], 100)->error,
             KAFKA_STALE_BROKER_EPOCH);
    rig_fini(&r);
}

UNIT_TEST(silent_broker_fenced_after_the_session_not_before)
{
    struct rig r;
    int64_t ep[4];
    rig_init(&r, 1);
    rig_cluster(&r, 3, ep);
    const struct cn_ctl_answer *a = rig_create(&r, "t", 3, 3);
    CHECK_EQ(a->error, 0);
    int64_t t0 = r.now;
    /* 1 and 3 keep beating; 2 is silent. */
    for (int64_t t = t0 + 1000; t <= t0 + SESSION_MS; t += 1000) {
        r.now = t;
        rig_heartbeat(&r, 1, ep[1], r.offset);
        rig_heartbeat(&r, 3, ep[3], r.offset);
    }
    rig_tick(&r, t0 + SESSION_MS);
    CHECK(!cn_image_broker_find(r.img, 2)->fenced);
    rig_tick(&r, t0 + SESSION_MS + 1);
    CHECK(cn_image_broker_find(r.img, 2)->fenced);
    /* One entry: the partition changes, then the fence. */
    CHECK_EQ(r.last_types[r.last_n - 1], CN_MREC_FENCE_BROKER);
    CHECK(r.last_n >= 2);
    for (int32_t p = 0; p < 3; p++) {
        const struct cn_image_part *ip = part_of(&r, "t", p);
        CHECK(ip->leader != 2 && ip->leader >= 0);
        CHECK_EQ(ip->nisr, 2);
    }
    rig_fini(&r);
}

UNIT_TEST(queued_heartbeat_keeps_the_session)
{
    struct rig r;
    int64_t ep[4];
    rig_init(&r, 1);
    rig_cluster(&r, 2, ep);
    int64_t t0 = r.now;
    r.hold = true;
    rig_create(&r, "t", 1, 1); /* in flight for a long time */
    r.now = t0 + SESSION_MS - 10;
    rig_heartbeat(&r, 1, ep[1], r.offset);
    rig_heartbeat(&r, 2, ep[2], r.offset);
    CHECK_EQ(cn_ctl_queued(r.ctl), 2);
    /* Past the deadline of their previous heartbeats, the proposal fails;
     * the queued heartbeats counted from their arrival: no fence. */
    r.now = t0 + SESSION_MS + 100;
    int proposals = r.nproposals, answers = r.nans;
    struct cn_ctl_event ev = {.kind = CN_CTE_PROPOSED};
    ev.u.proposed.seq = r.held_seq;
    ev.u.proposed.error = KAFKA_REQUEST_TIMED_OUT;
    rig_step(&r, &ev);
    CHECK_EQ(r.nproposals, proposals);
    CHECK_EQ(r.nans, answers + 3);
    CHECK(!cn_image_broker_find(r.img, 1)->fenced);
    CHECK(!cn_image_broker_find(r.img, 2)->fenced);
    rig_fini(&r);
}

UNIT_TEST(last_isr_member_kept_and_leads_again_when_unfenced)
{
    struct rig r;
    int64_t ep[4];
    rig_init(&r, 1);
    rig_cluster(&r, 2, ep);
    CHECK_EQ(rig_create(&r, "t", 1, 2)->error, 0);
    const struct cn_image_part *ip = part_of(&r, "t", 0);
    int32_t first = ip->replicas[0], second = ip->replicas[1];
    int32_t le0 = ip->leader_epoch, pe0 = ip->part_epoch;
    CHECK_EQ(ip->leader, first);
    /* The leader goes silent: the other leads, epochs +1. */
    int64_t t0 = r.now;
    r.now = t0 + SESSION_MS / 2;
    rig_heartbeat(&r, second, ep[second], r.offset);
    rig_tick(&r, t0 + SESSION_MS + 1);
    ip = part_of(&r, "t", 0);
    CHECK_EQ(ip->leader, second);
    CHECK_EQ(ip->nisr, 1);
    CHECK_EQ(ip->leader_epoch, le0 + 1);
    CHECK_EQ(ip->part_epoch, pe0 + 1);
    /* Then the other too: it stays in the ISR, nobody leads; the fenced
     * first replica is not elected although it is first. */
    rig_tick(&r, t0 + SESSION_MS / 2 + SESSION_MS + 1);
    ip = part_of(&r, "t", 0);
    CHECK_EQ(ip->leader, -1);
    CHECK_EQ(ip->nisr, 1);
    CHECK_EQ(ip->isr[0], second);
    /* The first replica comes back: not in the ISR, so it does not lead. */
    int64_t e = rig_register(&r, first);
    rig_heartbeat(&r, first, e, r.offset);
    CHECK(!cn_image_broker_find(r.img, first)->fenced);
    CHECK_EQ(part_of(&r, "t", 0)->leader, -1);
    /* The last member comes back: it leads again. */
    e = rig_register(&r, second);
    rig_heartbeat(&r, second, e, r.offset);
    CHECK_EQ(part_of(&r, "t", 0)->leader, second);
    rig_fini(&r);
}

UNIT_TEST(assignment_is_kafkas_round_robin)
{
    /* AdminUtilsTest.testReplicaAssignment: brokers 0-4, 10 partitions,
     * RF 3, fixed start index 0 (and shift 0). */
    static const int32_t want[10][3] = {{0, 1, 2}, {1, 2, 3}, {2, 3, 4},
                                        {3, 4, 0}, {4, 0, 1}, {0, 2, 3},
                                        {1, 3, 4}, {2, 4, 0}, {3, 0, 1},
                                        {4, 1, 2}};
    int32_t brokers[] = {0, 1, 2, 3, 4}, out[30];
    cn_ctl_assign(brokers, 5, 0, 10, 3, 0, 0, out);
    CHECK(memcmp(out, want, sizeof out) == 0);
}

UNIT_TEST(create_topic_rules)
{
    struct rig r;
    int64_t ep[4];
    rig_init(&r, 7);
    rig_cluster(&r, 3, ep);
    const struct cn_ctl_answer *a = rig_create(&r, "t", 6, 3);
    CHECK_EQ(a->error, 0);
    CHECK_EQ(a->u.topic.nparts, 6);
    CHECK(!cn_uuid_is_zero(&a->u.topic.id));
    int leads[4] = {0};
    for (int32_t p = 0; p < 6; p++) {
        const struct cn_image_part *ip = part_of(&r, "t", p);
        CHECK_EQ(ip->nreplicas, 3);
        CHECK_EQ(ip->nisr, 3);
        CHECK(ip->replicas[0] != ip->replicas[1] &&
              ip->replicas[1] != ip->replicas[2] &&
              ip->replicas[0] != ip->replicas[2]);
        CHECK_EQ(ip->leader, ip->replicas[0]);
        leads[ip->leader]++;
    }
    CHECK(leads[1] == 2 && leads[2] == 2 && leads[3] == 2);
    CHECK_EQ(rig_create(&r, "t", 1, 1)->error, KAFKA_TOPIC_ALREADY_EXISTS);
    a = rig_create(&r, "u", 1, 4);
    CHECK_EQ(a->error, KAFKA_INVALID_REPLICATION_FACTOR);
    CHECK(strstr(a->message, "only 3 broker(s)") != NULL);
    CHECK_EQ(rig_create(&r, "u", 0, 1)->error, KAFKA_INVALID_PARTITIONS);
    CHECK_EQ(rig_create(&r, "u", 1, 0)->error,
             KAFKA_INVALID_REPLICATION_FACTOR);
    /* Defaults: num.partitions 1, default.replication.factor 1. */
    a = rig_create(&r, "d", -1, -1);
    CHECK(a->error == 0 && a->u.topic.nparts == 1 && a->u.topic.rf == 1);
    /* validate_only proposes nothing. */
    int before = r.nproposals;
    struct cn_ctl_event ev = {.kind = CN_CTE_CREATE_TOPIC};
    ev.u.create.name = cn_bytes_str("v");
    ev.u.create.nparts = 2;
    ev.u.create.rf = 2;
    ev.u.create.validate_only = true;
    rig_step(&r, &ev);
    CHECK_EQ(last_answer(&r)->error, 0);
    CHECK_EQ(r.nproposals, before);
    CHECK(!cn_image_topic_find(r.img, cn_bytes_str("v")));
    /* min.insync.replicas above RF is a config error. */
    struct cn_ctl_kv kv = {cn_bytes_str("min.insync.replicas"),
                           cn_bytes_str("3")};
    ev.u.create.validate_only = false;
    ev.u.create.configs = &kv;
    ev.u.create.nconfigs = 1;
    rig_step(&r, &ev);
    CHECK_EQ(last_answer(&r)->error, KAFKA_INVALID_CONFIG);
    rig_fini(&r);
}

UNIT_TEST(manual_assignment_rules)
{
    struct rig r;
    int64_t ep[4];
    rig_init(&r, 1);
    rig_cluster(&r, 3, ep);
    int32_t ok0[] = {3, 1}, ok1[] = {2, 3}, dup[] = {1, 1}, ghost[] = {1, 9};
    struct cn_ctl_replicas as[2] = {{ok0, 2}, {ok1, 2}};
    struct cn_ctl_event ev = {.kind = CN_CTE_CREATE_TOPIC};
    ev.u.create.name = cn_bytes_str("m");
    ev.u.create.nparts = -1;
    ev.u.create.rf = -1;
    ev.u.create.assign = as;
    ev.u.create.nassign = 2;
    rig_step(&r, &ev);
    CHECK_EQ(last_answer(&r)->error, 0);
    CHECK_EQ(part_of(&r, "m", 0)->leader, 3);
    CHECK_EQ(part_of(&r, "m", 1)->leader, 2);
    ev.u.create.name = cn_bytes_str("n");
    as[1] = (struct cn_ctl_replicas){dup, 2};
    rig_step(&r, &ev);
    CHECK_EQ(last_answer(&r)->error, KAFKA_INVALID_REPLICA_ASSIGNMENT);
    as[1] = (struct cn_ctl_replicas){ghost, 2};
    rig_step(&r, &ev);
    CHECK_EQ(last_answer(&r)->error, KAFKA_INVALID_REPLICA_ASSIGNMENT);
    CHECK(strstr(last_answer(&r)->message, "broker 9") != NULL);
    as[1] = (struct cn_ctl_replicas){ok1, 2};
    ev.u.create.rf = 2;
    rig_step(&r, &ev);
    CHECK_EQ(last_answer(&r)->error, KAFKA_INVALID_REQUEST);
    rig_fini(&r);
}

UNIT_TEST(delete_topic_and_create_partitions)
{
    struct rig r;
    int64_t ep[4];
    rig_init(&r, 3);
    rig_cluster(&r, 3, ep);
    CHECK_EQ(rig_create(&r, "t", 2, 2)->error, 0);
    struct cn_ctl_event ev = {.kind = CN_CTE_CREATE_PARTITIONS};
    ev.u.parts.name = cn_bytes_str("t");
    ev.u.parts.count = 5;
    rig_step(&r, &ev);
    CHECK_EQ(last_answer(&r)->error, 0);
    const struct cn_image_topic *t = cn_image_topic_find(r.img,
                                                         cn_bytes_str("t"));
    CHECK_EQ(t->nparts, 5);
    CHECK_EQ(t->parts[4].nreplicas, 2);
    ev.u.parts.count = 4;
    rig_step(&r, &ev);
    CHECK_EQ(last_answer(&r)->error, KAFKA_INVALID_PARTITIONS);
    ev.u.parts.name = cn_bytes_str("nope");
    rig_step(&r, &ev);
    CHECK_EQ(last_answer(&r)->error, KAFKA_UNKNOWN_TOPIC_OR_PARTITION);
    struct cn_ctl_event del = {.kind = CN_CTE_DELETE_TOPIC};
    del.u.del.name = cn_bytes_str("t");
    rig_step(&r, &del);
    CHECK_EQ(last_answer(&r)->error, 0);
    CHECK(!cn_image_topic_find(r.img, cn_bytes_str("t")));
    rig_step(&r, &del);
    CHECK_EQ(last_answer(&r)->error, KAFKA_UNKNOWN_TOPIC_OR_PARTITION);
    del.u.del.name = CN_BYTES_NULL;
    del.u.del.id.b[3] = 7;
    rig_step(&r, &del);
    CHECK_EQ(last_answer(&r)->error, KAFKA_UNKNOWN_TOPIC_ID);
    rig_fini(&r);
}

UNIT_TEST(alter_topic_configs)
{
    struct rig r;
    int64_t ep[4];
    rig_init(&r, 5);
    rig_cluster(&r, 3, ep);
    struct cn_ctl_kv created[2] = {{cn_bytes_str("cleanup.policy"),
                                    cn_bytes_str("compact")},
                                   {cn_bytes_str("retention.ms"),
                                    cn_bytes_str("1000")}};
    struct cn_ctl_event ct = {.kind = CN_CTE_CREATE_TOPIC};
    ct.u.create.name = cn_bytes_str("t");
    ct.u.create.nparts = 1;
    ct.u.create.rf = 3;
    ct.u.create.configs = created;
    ct.u.create.nconfigs = 2;
    rig_step(&r, &ct);
    CHECK_EQ(last_answer(&r)->error, 0);
    const struct cn_image_topic *t = cn_image_topic_find(r.img,
                                                         cn_bytes_str("t"));

    struct cn_ctl_event ev = {.kind = CN_CTE_ALTER_TOPIC_CONFIGS};
    ev.u.alter.name = cn_bytes_str("nope");
    int before = r.nproposals;
    rig_step(&r, &ev);
    CHECK_EQ(last_answer(&r)->kind, CN_CTE_ALTER_TOPIC_CONFIGS);
    CHECK_EQ(last_answer(&r)->error, KAFKA_UNKNOWN_TOPIC_OR_PARTITION);
    CHECK_EQ(r.nproposals, before);

    /* retention.ms changed, cleanup.policy kept, cleanup.policy gone,
     * segment.ms new: one entry with a record per changed key. */
    struct cn_ctl_kv after[2] = {{cn_bytes_str("retention.ms"),
                                  cn_bytes_str("2000")},
                                 {cn_bytes_str("segment.ms"),
                                  cn_bytes_str("60000")}};
    ev.u.alter.name = cn_bytes_str("t");
    ev.u.alter.configs = after;
    ev.u.alter.nconfigs = 2;
    ev.u.alter.validate_only = true;
    rig_step(&r, &ev);
    CHECK_EQ(last_answer(&r)->error, 0);
    CHECK_EQ(r.nproposals, before);
    t = cn_image_topic_find(r.img, cn_bytes_str("t"));
    CHECK(strcmp(cn_image_topic_config(t, "retention.ms"), "1000") == 0);
    CHECK(strcmp(cn_image_topic_config(t, "cleanup.policy"), "compact") == 0);

    ev.u.alter.validate_only = false;
    rig_step(&r, &ev);
    CHECK_EQ(last_answer(&r)->error, 0);
    CHECK_EQ(r.nproposals, before + 1);
    CHECK_EQ(r.last_n, 3);
    for (size_t i = 0; i < r.last_n; i++)
        CHECK_EQ(r.last_types[i], CN_MREC_CONFIG);
    t = cn_image_topic_find(r.img, cn_bytes_str("t"));
    CHECK_EQ(t->nconfigs, 2);
    CHECK(strcmp(cn_image_topic_config(t, "retention.ms"), "2000") == 0);
    CHECK(strcmp(cn_image_topic_config(t, "segment.ms"), "60000") == 0);
    CHECK(cn_image_topic_config(t, "cleanup.policy") == NULL);

    /* The same set again changes nothing, so nothing is proposed. */
    rig_step(&r, &ev);
    CHECK_EQ(last_answer(&r)->error, 0);
    CHECK_EQ(r.nproposals, before + 1);

    /* An empty set removes every override. */
    ev.u.alter.nconfigs = 0;
    rig_step(&r, &ev);
    CHECK_EQ(last_answer(&r)->error, 0);
    CHECK_EQ(r.nproposals, before + 2);
    CHECK_EQ(r.last_n, 2);
    t = cn_image_topic_find(r.img, cn_bytes_str("t"));
    CHECK_EQ(t->nconfigs, 0);
    rig_fini(&r);
}

UNIT_TEST(producer_id_blocks_follow_each_other_after_commit)
{
    struct rig r;
    int64_t ep[4];
    rig_init(&r, 1);
    rig_cluster(&r, 1, ep);
    struct cn_ctl_event ev = {.kind = CN_CTE_ALLOC_PIDS};
    ev.u.pids.broker_id = 1;
    ev.u.pids.broker_epoch = ep[1];
    int64_t next = cn_image_next_producer_id(r.img);
    for (int i = 0; i < 3; i++) {
        rig_step(&r, &ev);
        const struct cn_ctl_answer *a = last_answer(&r);
        CHECK(a->error == 0 && a->u.pids.start == next &&
              a->u.pids.len == 1000);
        next += 1000;
    }
    /* Outcome unknown: not answered with a block; the next block is
     * decided on the image, which does not hold the lost one. */
    r.hold = true;
    rig_step(&r, &ev);
    CHECK_EQ(r.nans, 2 + 3); /* registration, heartbeat, 3 blocks */
    struct cn_ctl_event out = {.kind = CN_CTE_PROPOSED};
    out.u.proposed.seq = r.held_seq;
    out.u.proposed.error = KAFKA_REQUEST_TIMED_OUT;
    rig_step(&r, &out);
    CHECK_EQ(last_answer(&r)->error, KAFKA_REQUEST_TIMED_OUT);
    ev.u.pids.broker_epoch = ep[1] + 1;
    r.hold = false;
    rig_step(&r, &ev);
    CHECK_EQ(last_answer(&r)->error, KAFKA_STALE_BROKER_EPOCH);
    rig_fini(&r);
}

/* ---- part 2: the quorum on libraft's fixture --------------------------- */

UNIT_TEST(fixture_election_and_failover)
{
    struct mfix x;
    mfix_init(&x, 3, 11);
    int l = mfix_until_leader(&x, 5000);
    CHECK(l >= 0);
    int64_t term = (int64_t)raft_current_term(mfix_raft(&x, l));
    CHECK(mfix_image_same(&x));
    mfix_kill(&x, l);
    int l2 = mfix_until_leader(&x, 10000);
    CHECK(l2 >= 0 && l2 != l);
    CHECK((int64_t)raft_current_term(mfix_raft(&x, l2)) > term);
    /* The new leader's barrier applied everything: the survivors agree. */
    CHECK(mfix_image_same(&x));
    mfix_fini(&x);
}

UNIT_TEST(fixture_registration_fencing_and_topics)
{
    struct mfix x;
    mfix_init(&x, 3, 12);
    int l = mfix_until_leader(&x, 5000);
    int64_t ep[4];
    for (int32_t b = 1; b <= 3; b++) {
        const struct cn_ctl_answer *a = mfix_register(&x, b, 1);
        CHECK(a && a->error == 0);
        ep[b] = a ? a->u.broker_epoch : -1;
        /* The epoch is the offset its record was applied at. */
        CHECK_EQ(ep[b], x.register_offset[b]);
        const struct cn_image_broker *ib = cn_image_broker_find(mfix_image(&x,
                                                                           l),
                                                                b);
        CHECK(ib && ib->fenced && ib->epoch == ep[b]);
    }
    for (int32_t b = 1; b <= 3; b++) {
        const struct cn_ctl_answer *a = mfix_heartbeat(&x, b, ep[b]);
        CHECK(a && a->error == 0 && !a->u.hb.fenced);
    }
    const struct cn_ctl_answer *a = mfix_create(&x, "t", 6, 3);
    CHECK(a && a->error == 0);
    a = mfix_create(&x, "u", 1, 4);
    CHECK(a && a->error == KAFKA_INVALID_REPLICATION_FACTOR);
    CHECK(a && strstr(a->message, "only 3 broker(s)"));
    const struct cn_image_topic *t = cn_image_topic_find(mfix_image(&x, l),
                                                         cn_bytes_str("t"));
    int leads[4] = {0};
    for (int32_t p = 0; t && p < 6; p++)
        leads[t->parts[p].leader]++;
    CHECK(leads[1] == 2 && leads[2] == 2 && leads[3] == 2);
    /* Broker 2 goes silent after one more heartbeat: fenced after the
     * session, not before. */
    int32_t le[6], pe[6], ld[6];
    for (int32_t p = 0; t && p < 6; p++) {
        le[p] = t->parts[p].leader_epoch;
        pe[p] = t->parts[p].part_epoch;
        ld[p] = t->parts[p].leader;
    }
    int64_t t2 = mfix_now(&x);
    mfix_heartbeat(&x, 2, ep[2]);
    while (mfix_now(&x) < t2 + SESSION_MS - 500) {
        mfix_run_for(&x, 500);
        mfix_heartbeat(&x, 1, ep[1]);
        mfix_heartbeat(&x, 3, ep[3]);
    }
    l = mfix_leader(&x);
    /* The controller wants a tick just past broker 2's deadline. */
    CHECK_EQ(cn_mfsm_timer_ms(x.m[l]), t2 + SESSION_MS + 1);
    mfix_run_until(&x, t2 + SESSION_MS);
    CHECK(!cn_image_broker_find(mfix_image(&x, l), 2)->fenced);
    mfix_run_for(&x, 300);
    l = mfix_leader(&x);
    CHECK(cn_image_broker_find(mfix_image(&x, l), 2)->fenced);
    t = cn_image_topic_find(mfix_image(&x, l), cn_bytes_str("t"));
    for (int32_t p = 0; t && p < 6; p++) {
        CHECK(t->parts[p].leader != 2 && t->parts[p].leader > 0);
        CHECK_EQ(t->parts[p].nisr, 2);
        /* The new leader is the first eligible replica in order. */
        int32_t want = t->parts[p].replicas[0] != 2 ? t->parts[p].replicas[0]
                                                    : t->parts[p].replicas[1];
        CHECK_EQ(t->parts[p].leader, want);
        /* Every partition lost 2 from its ISR: a new partition epoch; a
         * new leader epoch only where 2 led. */
        CHECK_EQ(t->parts[p].part_epoch, pe[p] + 1);
        CHECK_EQ(t->parts[p].leader_epoch, le[p] + (ld[p] == 2));
    }
    CHECK(mfix_image_same(&x));
    mfix_fini(&x);
}

UNIT_TEST(fixture_producer_ids_never_overlap_across_kills)
{
    uint64_t seed = mfix_seed(13);
    struct mfix x;
    mfix_init(&x, 3, seed);
    mfix_until_leader(&x, 5000);
    int64_t ep = mfix_register(&x, 1, 1)->u.broker_epoch;
    mfix_heartbeat(&x, 1, ep);
    int64_t starts[256];
    int n = 0, failed = 0, kills = 0;
    uint64_t rng = seed;
    for (int i = 0; i < 200; i++) {
        rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
        if ((rng >> 33) % 23 == 0 && kills < 6) {
            /* Kill the leader with a proposal in flight, revive it later. */
            int l = mfix_leader(&x);
            mfix_feed_pids(&x, 1, ep);
            mfix_run_for(&x, (int64_t)((rng >> 40) % 20));
            if (l >= 0) {
                mfix_kill(&x, l);
                kills++;
                mfix_until_leader(&x, 10000);
                mfix_revive(&x, l);
            }
            continue;
        }
        const struct cn_ctl_answer *a = mfix_alloc_pids(&x, 1, ep);
        if (a && a->error == 0 && n < 256)
            starts[n++] = a->u.pids.start;
        else
            failed++;
    }
    for (int i = 0; i < x.nanswers; i++)
        if (x.answers[i].kind == CN_CTE_ALLOC_PIDS &&
            x.answers[i].error == 0 && n < 256) {
            bool seen = false;
            for (int j = 0; j < n; j++)
                seen |= starts[j] == x.answers[i].u.pids.start;
            if (!seen)
                starts[n++] = x.answers[i].u.pids.start;
        }
    bool overlap = false;
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            overlap |= starts[i] < starts[j] + 1000 &&
                       starts[j] < starts[i] + 1000;
    if (overlap || n < 150 || getenv("CN_TEST_VERBOSE"))
        fprintf(stderr, "  seed %llu: %d blocks, %d failed, %d kills\n",
                (unsigned long long)seed, n, failed, kills);
    CHECK(!overlap);
    CHECK(n >= 150);
    mfix_fini(&x);
}

UNIT_TEST(fixture_snapshot_restore_is_byte_identical)
{
    struct mfix x;
    mfix_init(&x, 3, 14);
    for (unsigned i = 0; i < 3; i++) {
        raft_set_snapshot_threshold(mfix_raft(&x, (int)i), 8);
        raft_set_snapshot_trailing(mfix_raft(&x, (int)i), 4);
    }
    int l = mfix_until_leader(&x, 5000);
    int64_t ep = mfix_register(&x, 1, 1)->u.broker_epoch;
    mfix_heartbeat(&x, 1, ep);
    int victim = (l + 1) % 3;
    mfix_kill(&x, victim);
    char name[16];
    for (int i = 0; i < 25; i++) {
        snprintf(name, sizeof name, "t%d", i);
        CHECK_EQ(mfix_create(&x, name, 1, 1)->error, 0);
        CHECK_EQ(mfix_alloc_pids(&x, 1, ep)->error, 0);
    }
    int restores = x.restores[victim];
    mfix_revive(&x, victim);
    mfix_run_for(&x, 3000);
    CHECK(x.restores[victim] > restores);
    CHECK(mfix_image_same(&x));
    CHECK_EQ(cn_image_offset(mfix_image(&x, victim)),
             cn_image_offset(mfix_image(&x, mfix_leader(&x))));
    mfix_fini(&x);
}

UNIT_TEST(fixture_quorum_loss_and_back)
{
    struct mfix x;
    mfix_init(&x, 3, 15);
    int l = mfix_until_leader(&x, 5000);
    int64_t ep = mfix_register(&x, 1, 1)->u.broker_epoch;
    mfix_heartbeat(&x, 1, ep);
    CHECK_EQ(mfix_create(&x, "t", 1, 1)->error, 0);
    int a = (l + 1) % 3, b = (l + 2) % 3;
    mfix_kill(&x, a);
    mfix_kill(&x, b);
    const struct cn_ctl_answer *ans = mfix_create(&x, "u", 1, 1);
    CHECK(ans && (ans->error == KAFKA_REQUEST_TIMED_OUT ||
                  ans->error == KAFKA_NOT_CONTROLLER));
    /* The survivor still reads what it has. */
    CHECK(cn_image_topic_find(mfix_image(&x, l), cn_bytes_str("t")));
    CHECK(!mfix_leads(&x, l));
    mfix_revive(&x, a);
    CHECK(mfix_until_leader(&x, 10000) >= 0);
    ans = mfix_create(&x, "v", 1, 1);
    CHECK(ans && ans->error == 0);
    mfix_fini(&x);
}

UNIT_TEST(fixture_standby_applies_everything_never_votes)
{
    struct mfix x;
    mfix_init(&x, 3, 16);
    int l = mfix_until_leader(&x, 5000);
    int64_t ep = mfix_register(&x, 1, 1)->u.broker_epoch;
    mfix_heartbeat(&x, 1, ep);
    CHECK_EQ(mfix_create(&x, "t", 1, 1)->error, 0);
    int s = mfix_grow(&x); /* raft id 4, not in the configuration */
    /* Broker 4 registers: the controller adds it as a standby. */
    CHECK_EQ(mfix_register(&x, 4, 1)->error, 0);
    mfix_run_for(&x, 2000);
    int role = -1;
    const struct raft_configuration *c = &mfix_raft(&x, l)->configuration;
    for (unsigned i = 0; i < c->n; i++)
        if (c->servers[i].id == 4)
            role = c->servers[i].role;
    CHECK_EQ(role, RAFT_STANDBY);
    CHECK_EQ(mfix_create(&x, "u", 1, 1)->error, 0);
    mfix_run_for(&x, 1000);
    CHECK(cn_image_topic_find(mfix_image(&x, s), cn_bytes_str("u")));
    CHECK(cn_image_topic_find(mfix_image(&x, s), cn_bytes_str("t")));
    CHECK_EQ(cn_image_offset(mfix_image(&x, s)),
             cn_image_offset(mfix_image(&x, l)));
    /* Two voters gone: the standby does not make a quorum, nor lead. */
    mfix_kill(&x, (l + 1) % 3);
    mfix_kill(&x, (l + 2) % 3);
    mfix_kill(&x, l);
    mfix_run_for(&x, 5000);
    CHECK(raft_state(mfix_raft(&x, s)) != RAFT_LEADER);
    CHECK(raft_state(mfix_raft(&x, s)) != RAFT_CANDIDATE);
    mfix_fini(&x);
}

UNIT_MAIN(
    first_leader_bootstraps_the_cluster_id_and_features,
    own_proposal_retried_after_a_pause, one_proposal_in_flight_the_rest_queued,
    registration_epoch_is_the_record_offset_and_starts_fenced,
    registration_and_heartbeat_errors,
    silent_broker_fenced_after_the_session_not_before,
    queued_heartbeat_keeps_the_session,
    last_isr_member_kept_and_leads_again_when_unfenced,
    assignment_is_kafkas_round_robin, create_topic_rules,
    manual_assignment_rules, delete_topic_and_create_partitions,
    alter_topic_configs, producer_id_blocks_follow_each_other_after_commit,
    fixture_election_and_failover, fixture_registration_fencing_and_topics,
    fixture_producer_ids_never_overlap_across_kills,
    fixture_snapshot_restore_is_byte_identical, fixture_quorum_loss_and_back,
    fixture_standby_applies_everything_never_votes)
