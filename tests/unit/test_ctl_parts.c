/*
 * test_ctl_parts.c - the controller's CreatePartitions with manual
 * assignments (meta/ctl.h, CN_CTE_CREATE_PARTITIONS with assign), on the
 * bare machine: events in, answers and the applied image checked.  A
 * proposal is "committed" by applying its records to a real image at the
 * next offset and feeding CN_CTE_PROPOSED, as fsm.c does.
 */
#include <stdlib.h>
#include <string.h>

#include "meta/ctl.h"
#include "meta/image.h"
#include "proto/kerr.h"
#include "unit.h"

#define SESSION_MS 9000
#define CLUSTER "cairn-test-cluster-id1"

struct rig {
    struct cn_image *img;
    struct cn_ctl *ctl;
    struct cn_ctl_actions acts;
    int64_t now;
    int64_t offset;     /* the last entry's */
    bool hold;          /* leave the next proposal in flight */
    uint64_t held_seq;  /* the proposal left in flight */
    int nproposals;     /* entries proposed so far */
    int16_t last_error; /* the last answer's */
    char last_msg[512]; /* the last answer's message, "" for none */
    int nans;           /* answers so far */
};

static void rig_step(struct rig *r, const struct cn_ctl_event *ev);

static void rig_commit(struct rig *r, uint64_t seq)
{
    struct cn_ctl_actions *a = &r->acts;
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

static void rig_collect(struct rig *r)
{
    struct cn_ctl_actions *a = &r->acts;
    for (size_t i = 0; i < a->nanswers; i++) {
        r->last_error = a->answers[i].error;
        snprintf(r->last_msg, sizeof r->last_msg, "%s",
                 a->answers[i].message ? a->answers[i].message : "");
        r->nans++;
    }
    if (!a->propose) {
        cn_ctl_actions_reset(a);
        return;
    }
    r->nproposals++;
    if (r->hold) {
        r->hold = false;
        r->held_seq = a->seq;
        cn_ctl_actions_reset(a);
        return;
    }
    rig_commit(r, a->seq);
}

static void rig_step(struct rig *r, const struct cn_ctl_event *ev)
{
    cn_ctl_step(r->ctl, r->img, r->now, ev, &r->acts);
    rig_collect(r);
}

/* A leader with brokers 1..n registered and unfenced; epochs in ep[]. */
static void rig_init(struct rig *r, int n, int64_t *ep)
{
    memset(r, 0, sizeof *r);
    struct cn_ctl_config cfg = {
        .cluster_id = CLUSTER,
        .metadata_version = 21,
        .transaction_version = 2,
        .session_timeout_ms = SESSION_MS,
        .default_partitions = 1,
        .default_rf = 1,
        .pid_block = 1000,
        .seed = 5,
    };
    r->img = cn_image_new();
    r->ctl = cn_ctl_new(&cfg);
    cn_ctl_actions_init(&r->acts);
    r->now = 1000;
    struct cn_ctl_event lead = {.kind = CN_CTE_LEADER, .u.term = 2};
    rig_step(r, &lead);
    static const struct cn_ctl_endpoint eph = {{(const uint8_t *)"PLAINTEXT",
                                                9},
                                               {(const uint8_t *)"127.0.0.1",
                                                9},
                                               9092,
                                               0};
    for (int i = 1; i <= n; i++) {
        struct cn_ctl_event ev = {.kind = CN_CTE_REGISTER};
        ev.u.reg.broker_id = i;
        ev.u.reg.cluster_id = cn_bytes_str(CLUSTER);
        ev.u.reg.incarnation.b[0] = (uint8_t)i;
        ev.u.reg.incarnation.b[15] = 1;
        ev.u.reg.eps = &eph;
        ev.u.reg.neps = 1;
        ev.u.reg.rack = CN_BYTES_NULL;
        rig_step(r, &ev);
        CHECK_EQ(r->last_error, 0);
        ep[i] = cn_image_broker_find(r->img, i)->epoch;
    }
    for (int i = 1; i <= n; i++) {
        struct cn_ctl_event hb = {.kind = CN_CTE_HEARTBEAT};
        hb.u.hb.broker_id = i;
        hb.u.hb.broker_epoch = ep[i];
        hb.u.hb.metadata_offset = cn_image_offset(r->img);
        rig_step(r, &hb);
        CHECK(!cn_image_broker_find(r->img, i)->fenced);
    }
}

static void rig_fini(struct rig *r)
{
    cn_ctl_actions_fini(&r->acts);
    cn_ctl_free(r->ctl);
    cn_image_free(r->img);
}

static void rig_create(struct rig *r, const char *name, int32_t nparts,
                       int16_t rf)
{
    struct cn_ctl_event ev = {.kind = CN_CTE_CREATE_TOPIC};
    ev.u.create.name = cn_bytes_str(name);
    ev.u.create.nparts = nparts;
    ev.u.create.rf = rf;
    rig_step(r, &ev);
    CHECK_EQ(r->last_error, 0);
}

static struct cn_ctl_event parts_event(const char *name, int32_t count,
                                       const struct cn_ctl_replicas *as,
                                       int32_t nas)
{
    struct cn_ctl_event ev = {.kind = CN_CTE_CREATE_PARTITIONS};
    ev.u.parts.name = cn_bytes_str(name);
    ev.u.parts.count = count;
    ev.u.parts.assign = as;
    ev.u.parts.nassign = nas;
    return ev;
}

static const struct cn_image_part *part_of(struct rig *r, const char *topic,
                                           int32_t p)
{
    const struct cn_image_topic *t = cn_image_topic_find(r->img,
                                                         cn_bytes_str(topic));
    return t && p < t->nparts ? &t->parts[p] : NULL;
}

static int32_t nparts_of(struct rig *r, const char *topic)
{
    const struct cn_image_topic *t = cn_image_topic_find(r->img,
                                                         cn_bytes_str(topic));
    return t ? t->nparts : -1;
}

static bool replicas_are(const struct cn_image_part *p, const int32_t *ids,
                         int32_t n)
{
    if (!p || p->nreplicas != n)
        return false;
    for (int32_t i = 0; i < n; i++)
        if (p->replicas[i] != ids[i])
            return false;
    return true;
}

UNIT_TEST(manual_assignment_of_new_partitions_used)
{
    struct rig r;
    int64_t ep[4];
    rig_init(&r, 3, ep);
    rig_create(&r, "t", 1, 2);
    /* The round robin would start from partition 0's leader; these
     * orders are not what it makes. */
    static const int32_t a1[] = {3, 1}, a2[] = {2, 3};
    const struct cn_ctl_replicas as[] = {{a1, 2}, {a2, 2}};
    struct cn_ctl_event ev = parts_event("t", 3, as, 2);
    ev.u.parts.validate_only = true;
    int before = r.nproposals;
    rig_step(&r, &ev);
    CHECK_EQ(r.last_error, 0);
    CHECK_EQ(r.nproposals, before);
    CHECK_EQ(nparts_of(&r, "t"), 1);

    ev.u.parts.validate_only = false;
    rig_step(&r, &ev);
    CHECK_EQ(r.last_error, 0);
    CHECK_EQ(nparts_of(&r, "t"), 3);
    const struct cn_image_part *p1 = part_of(&r, "t", 1);
    const struct cn_image_part *p2 = part_of(&r, "t", 2);
    CHECK(replicas_are(p1, a1, 2));
    CHECK(replicas_are(p2, a2, 2));
    CHECK(p1 && p1->leader == 3 && p1->nisr == 2);
    CHECK(p2 && p2->leader == 2 && p2->nisr == 2);
    rig_fini(&r);
}

UNIT_TEST(manual_assignment_queued_behind_a_proposal)
{
    struct rig r;
    int64_t ep[4];
    rig_init(&r, 3, ep);
    rig_create(&r, "t", 1, 1);
    /* Decided only after the proposal in flight applies: the assignment
     * is read then, from the caller's memory (ctl.h). */
    r.hold = true;
    rig_create(&r, "u", 1, 1);
    static const int32_t a1[] = {2};
    const struct cn_ctl_replicas as[] = {{a1, 1}};
    struct cn_ctl_event ev = parts_event("t", 2, as, 1);
    rig_step(&r, &ev);
    CHECK_EQ(cn_ctl_queued(r.ctl), 1);
    int answers = r.nans;
    rig_commit(&r, r.held_seq);
    CHECK_EQ(r.nans, answers + 2);
    CHECK_EQ(r.last_error, 0);
    CHECK(replicas_are(part_of(&r, "t", 1), a1, 1));
    CHECK_EQ(part_of(&r, "t", 1)->leader, 2);
    rig_fini(&r);
}

UNIT_TEST(bad_manual_assignments_refused_with_kafkas_texts)
{
    struct rig r;
    int64_t ep[4];
    rig_init(&r, 3, ep);
    rig_create(&r, "t", 1, 2);
    static const int32_t ok[] = {1, 2}, unknown[] = {1, 7}, dup[] = {2, 2},
                         short1[] = {3}, dup_and_unknown[] = {9, 3, 3};
    struct {
        const struct cn_ctl_replicas as[2];
        int32_t nas;
        const char *msg;
    } cases[] = {
        {{{ok, 2}},
         1,
         "Attempted to add 2 additional partition(s), but only 1 "
         "assignment(s) were specified."},
        {{{ok, 2}},
         0,
         "Attempted to add 2 additional partition(s), but only 0 "
         "assignment(s) were specified."},
        {{{ok, 2}, {unknown, 2}},
         2,
         "The manual partition assignment includes broker 7, but no such "
         "broker is registered."},
        {{{dup, 2}, {ok, 2}},
         2,
         "The manual partition assignment includes the broker 2 more than "
         "once."},
        {{{ok, 2}, {short1, 1}},
         2,
         "The manual partition assignment includes a partition with 1 "
         "replica(s), but this is not consistent with previous partitions, "
         "which have 2 replica(s)."},
        {{{ok, 2}, {ok, 0}},
         2,
         "The manual partition assignment includes an empty replica list."},
        /* Sorted, as Kafka walks them: 3 twice comes before 9. */
        {{{dup_and_unknown, 3}, {ok, 2}},
         2,
         "The manual partition assignment includes the broker 3 more than "
         "once."},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct cn_ctl_event ev = parts_event("t", 3, cases[i].as,
                                             cases[i].nas);
        int before = r.nproposals;
        rig_step(&r, &ev);
        if (r.last_error != KAFKA_INVALID_REPLICA_ASSIGNMENT ||
            strcmp(r.last_msg, cases[i].msg) != 0)
            fprintf(stderr, "  case %zu: %d \"%s\"\n", i, r.last_error,
                    r.last_msg);
        CHECK_EQ(r.last_error, KAFKA_INVALID_REPLICA_ASSIGNMENT);
        CHECK(strcmp(r.last_msg, cases[i].msg) == 0);
        CHECK_EQ(r.nproposals, before);
    }
    CHECK_EQ(nparts_of(&r, "t"), 1);
    rig_fini(&r);
}

UNIT_TEST(manual_assignment_needs_one_replica_that_can_lead)
{
    struct rig r;
    int64_t ep[4];
    rig_init(&r, 3, ep);
    rig_create(&r, "t", 1, 2);
    /* Only broker 1 keeps beating: 2 and 3 are fenced at the session's
     * end. */
    int64_t t0 = r.now;
    for (int64_t t = t0 + 1000; t <= t0 + SESSION_MS + 1; t += 1000) {
        r.now = t;
        struct cn_ctl_event hb = {.kind = CN_CTE_HEARTBEAT};
        hb.u.hb.broker_id = 1;
        hb.u.hb.broker_epoch = ep[1];
        hb.u.hb.metadata_offset = cn_image_offset(r.img);
        rig_step(&r, &hb);
    }
    r.now = t0 + SESSION_MS + 1;
    struct cn_ctl_event tick = {.kind = CN_CTE_TICK};
    rig_step(&r, &tick);
    CHECK(cn_image_broker_find(r.img, 2)->fenced);
    CHECK(cn_image_broker_find(r.img, 3)->fenced);

    static const int32_t fenced[] = {2, 3}, one_live[] = {3, 1};
    const struct cn_ctl_replicas bad[] = {{fenced, 2}};
    struct cn_ctl_event ev = parts_event("t", 2, bad, 1);
    rig_step(&r, &ev);
    CHECK_EQ(r.last_error, KAFKA_INVALID_REPLICA_ASSIGNMENT);
    CHECK(strcmp(r.last_msg,
                 "All brokers specified in the manual partition assignment "
                 "for partition 1 are fenced or in controlled shutdown.") ==
          0);
    /* A fenced broker may be named when another replica can lead (the
     * round robin would refuse rf 2 with one broker unfenced). */
    const struct cn_ctl_replicas good[] = {{one_live, 2}};
    ev = parts_event("t", 2, good, 1);
    rig_step(&r, &ev);
    CHECK_EQ(r.last_error, 0);
    const struct cn_image_part *p = part_of(&r, "t", 1);
    CHECK(replicas_are(p, one_live, 2));
    CHECK(p && p->leader == 1 && p->nisr == 1 && p->isr[0] == 1);
    rig_fini(&r);
}

UNIT_MAIN(manual_assignment_of_new_partitions_used,
          manual_assignment_queued_behind_a_proposal,
          bad_manual_assignments_refused_with_kafkas_texts,
          manual_assignment_needs_one_replica_that_can_lead)
