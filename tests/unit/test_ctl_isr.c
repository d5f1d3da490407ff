/*
 * test_ctl_isr.c - the controller's ISR changes (CN_CTE_ALTER_PARTITION)
 * and controlled shutdown (CN_CTE_HEARTBEAT with want_shut_down), on the
 * bare machine (meta/ctl.h): events in, answers and the applied image
 * checked.  A proposal is "committed" by applying its records to a real
 * image at the next offset and feeding CN_CTE_PROPOSED, as fsm.c does.
 * The expectations are Kafka's ReplicationControlManager.alterPartition
 * and BrokerHeartbeatManager.calculateNextBrokerState.
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
    int64_t offset;         /* the last entry's */
    bool hold;              /* leave the next proposal in flight */
    uint64_t held_seq;      /* the proposal left in flight */
    int nproposals;         /* entries proposed so far */
    int16_t last_types[64]; /* the last proposal's record types */
    size_t last_n;
    struct cn_ctl_answer last; /* the last answer (ISR copied in) */
    char last_msg[256];
    int nans;
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
        r->last = a->answers[i];
        snprintf(r->last_msg, sizeof r->last_msg, "%s",
                 a->answers[i].message ? a->answers[i].message : "");
        r->last.message = r->last_msg;
        r->nans++;
    }
    if (!a->propose) {
        cn_ctl_actions_reset(a);
        return;
    }
    r->nproposals++;
    r->last_n = a->nrecs;
    for (size_t i = 0; i < a->nrecs && i < 64; i++)
        r->last_types[i] = a->recs[i].type;
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

static void rig_init_mv(struct rig *r, int16_t mv)
{
    memset(r, 0, sizeof *r);
    struct cn_ctl_config cfg = {
        .cluster_id = CLUSTER,
        .metadata_version = mv,
        .transaction_version = 2,
        .session_timeout_ms = SESSION_MS,
        .default_partitions = 1,
        .default_rf = 1,
        .pid_block = 1000,
        .seed = 7,
    };
    r->img = cn_image_new();
    r->ctl = cn_ctl_new(&cfg);
    cn_ctl_actions_init(&r->acts);
    r->now = 1000;
    struct cn_ctl_event ev = {.kind = CN_CTE_LEADER, .u.term = 2};
    rig_step(r, &ev);
}

static void rig_init(struct rig *r)
{
    rig_init_mv(r, 21);
}

static void rig_fini(struct rig *r)
{
    cn_ctl_actions_fini(&r->acts);
    cn_ctl_free(r->ctl);
    cn_image_free(r->img);
}

static void rig_register_ev(struct rig *r, int32_t id)
{
    static const struct cn_ctl_endpoint ep = {{(const uint8_t *)"PLAINTEXT",
                                               9},
                                              {(const uint8_t *)"127.0.0.1",
                                               9},
                                              9092,
                                              0};
    struct cn_ctl_event ev = {.kind = CN_CTE_REGISTER};
    ev.u.reg.broker_id = id;
    ev.u.reg.cluster_id = cn_bytes_str(CLUSTER);
    ev.u.reg.incarnation.b[0] = (uint8_t)id;
    ev.u.reg.incarnation.b[15] = 1;
    ev.u.reg.eps = &ep;
    ev.u.reg.neps = 1;
    ev.u.reg.rack = CN_BYTES_NULL;
    rig_step(r, &ev);
}

static int64_t rig_register(struct rig *r, int32_t id)
{
    rig_register_ev(r, id);
    CHECK(r->last.kind == CN_CTE_REGISTER && r->last.error == 0);
    return r->last.u.broker_epoch;
}

/* A heartbeat at the image's offset; want: want_shut_down. */
static const struct cn_ctl_answer *hb(struct rig *r, int32_t id, int64_t epoch,
                                      bool want)
{
    struct cn_ctl_event ev = {.kind = CN_CTE_HEARTBEAT};
    ev.u.hb.broker_id = id;
    ev.u.hb.broker_epoch = epoch;
    ev.u.hb.metadata_offset = cn_image_offset(r->img);
    ev.u.hb.want_shut_down = want;
    rig_step(r, &ev);
    CHECK_EQ(r->last.kind, CN_CTE_HEARTBEAT);
    return &r->last;
}

/* n brokers (ids 1..n) registered and unfenced; epochs in ep[1..n]. */
static void rig_cluster(struct rig *r, int n, int64_t *ep)
{
    for (int i = 1; i <= n; i++)
        ep[i] = rig_register(r, i);
    for (int i = 1; i <= n; i++)
        hb(r, i, ep[i], false);
}

/* Topic `name` with partition i on replicas as[i] (preferred first). */
static const struct cn_image_topic *rig_topic(struct rig *r, const char *name,
                                              const struct cn_ctl_replicas *as,
                                              int32_t n)
{
    struct cn_ctl_event ev = {.kind = CN_CTE_CREATE_TOPIC};
    ev.u.create.name = cn_bytes_str(name);
    ev.u.create.nparts = -1;
    ev.u.create.rf = -1;
    ev.u.create.assign = as;
    ev.u.create.nassign = n;
    rig_step(r, &ev);
    CHECK_EQ(r->last.error, 0);
    return cn_image_topic_find(r->img, cn_bytes_str(name));
}

static const struct cn_image_part *part(struct rig *r, const char *name,
                                        int32_t p)
{
    const struct cn_image_topic *t = cn_image_topic_find(r->img,
                                                         cn_bytes_str(name));
    return t && p < t->nparts ? &t->parts[p] : NULL;
}

/* An AlterPartition for name-p from `from` at the image's epochs (plus
 * the deltas), ISR ids with epochs eps (NULL: each one's registered). */
struct ap {
    int32_t from;
    int64_t from_epoch; /* 0: the registered one */
    int32_t le_delta, pe_delta;
    struct cn_uuid topic; /* zero: name's */
    int32_t partition;
    const int32_t *isr;
    const int64_t *eps;
    int32_t nisr;
};

static const struct cn_ctl_answer *alter(struct rig *r, const char *name,
                                         struct ap a)
{
    const struct cn_image_topic *t = cn_image_topic_find(r->img,
                                                         cn_bytes_str(name));
    struct cn_ctl_isr_member m[16];
    for (int32_t i = 0; i < a.nisr; i++) {
        const struct cn_image_broker *b = cn_image_broker_find(r->img,
                                                               a.isr[i]);
        m[i].id = a.isr[i];
        m[i].broker_epoch = a.eps ? a.eps[i] : b ? b->epoch : -1;
    }
    const struct cn_image_broker *fb = cn_image_broker_find(r->img, a.from);
    struct cn_ctl_event ev = {.kind = CN_CTE_ALTER_PARTITION};
    ev.u.isr.broker_id = a.from;
    ev.u.isr.broker_epoch = a.from_epoch ? a.from_epoch : fb ? fb->epoch : -1;
    static const struct cn_uuid zero;
    ev.u.isr.topic_id = memcmp(a.topic.b, zero.b, 16) ? a.topic : t->id;
    ev.u.isr.partition = a.partition;
    const struct cn_image_part *ip = a.partition < t->nparts
                                         ? &t->parts[a.partition]
                                         : &t->parts[0];
    ev.u.isr.leader_epoch = ip->leader_epoch + a.le_delta;
    ev.u.isr.partition_epoch = ip->part_epoch + a.pe_delta;
    ev.u.isr.isr = m;
    ev.u.isr.nisr = a.nisr;
    rig_step(r, &ev);
    CHECK_EQ(r->last.kind, CN_CTE_ALTER_PARTITION);
    return &r->last;
}

static bool isr_is(const struct cn_image_part *p, const int32_t *ids, int n)
{
    return p && p->nisr == n &&
           memcmp(p->isr, ids, (size_t)n * sizeof *ids) == 0;
}

static bool led_by(struct rig *r, int32_t id)
{
    const struct cn_image_topic *t = NULL;
    while ((t = cn_image_topic_next(r->img, t)))
        for (int32_t p = 0; p < t->nparts; p++)
            if (t->parts[p].leader == id)
                return true;
    return false;
}

static bool in_an_isr(struct rig *r, int32_t id)
{
    const struct cn_image_topic *t = NULL;
    while ((t = cn_image_topic_next(r->img, t)))
        for (int32_t p = 0; p < t->nparts; p++)
            for (int32_t i = 0; i < t->parts[p].nisr; i++)
                if (t->parts[p].isr[i] == id)
                    return true;
    return false;
}

static const int32_t r123[] = {1, 2, 3};

/* ---- AlterPartition ---------------------------------------------------- */

UNIT_TEST(alter_partition_checks_in_kafkas_order)
{
    struct rig r;
    int64_t ep[5];
    rig_init(&r);
    rig_cluster(&r, 4, ep);
    const struct cn_ctl_replicas as[] = {{r123, 3}};
    rig_topic(&r, "t", as, 1);
    const struct cn_image_part *p = part(&r, "t", 0);
    CHECK(p && p->leader == 1 && isr_is(p, r123, 3));
    int before = r.nproposals;
    static const int32_t i12[] = {1, 2}, i21[] = {2, 1}, i23[] = {2, 3},
                         i14[] = {1, 4}, i11[] = {1, 1};

    /* The broker epoch first, for the whole request; an unregistered
     * broker's is stale too (checkBrokerEpoch). */
    CHECK_EQ(alter(&r, "t",
                   (struct ap){1, ep[1] + 7, 0, 0, {{0}}, 0, i12, NULL, 2})
                 ->error,
             KAFKA_STALE_BROKER_EPOCH);
    CHECK_EQ(
        alter(&r, "t", (struct ap){9, 5, 0, 0, {{0}}, 0, i12, NULL, 2})->error,
        KAFKA_STALE_BROKER_EPOCH);
    /* Stale epoch wins over everything else wrong. */
    CHECK_EQ(alter(&r, "t",
                   (struct ap){2, ep[2] + 7, -1, -1, {{0}}, 0, i23, NULL, 2})
                 ->error,
             KAFKA_STALE_BROKER_EPOCH);
    struct cn_uuid nope = {{9, 9, 9}};
    CHECK_EQ(
        alter(&r, "t", (struct ap){1, 0, 0, 0, nope, 0, i12, NULL, 2})->error,
        KAFKA_UNKNOWN_TOPIC_ID);
    CHECK_EQ(
        alter(&r, "t", (struct ap){1, 0, 0, 0, {{0}}, 5, i12, NULL, 2})->error,
        KAFKA_UNKNOWN_TOPIC_OR_PARTITION);
    /* Epochs ahead of the controller's image: ask another controller. */
    CHECK_EQ(
        alter(&r, "t", (struct ap){1, 0, 1, 0, {{0}}, 0, i12, NULL, 2})->error,
        KAFKA_NOT_CONTROLLER);
    CHECK_EQ(
        alter(&r, "t", (struct ap){1, 0, 0, 1, {{0}}, 0, i12, NULL, 2})->error,
        KAFKA_NOT_CONTROLLER);
    /* An older leader epoch comes before "not the leader"... */
    CHECK_EQ(alter(&r, "t", (struct ap){2, 0, -1, 0, {{0}}, 0, i21, NULL, 2})
                 ->error,
             KAFKA_FENCED_LEADER_EPOCH);
    /* ... which comes before an older partition epoch. */
    CHECK_EQ(alter(&r, "t", (struct ap){2, 0, 0, -1, {{0}}, 0, i21, NULL, 2})
                 ->error,
             KAFKA_INVALID_REQUEST);
    CHECK_EQ(alter(&r, "t", (struct ap){1, 0, 0, -1, {{0}}, 0, i12, NULL, 2})
                 ->error,
             KAFKA_INVALID_UPDATE_VERSION);
    /* Not a replica, twice the same, the leader left out. */
    CHECK_EQ(
        alter(&r, "t", (struct ap){1, 0, 0, 0, {{0}}, 0, i14, NULL, 2})->error,
        KAFKA_INVALID_REQUEST);
    CHECK_EQ(
        alter(&r, "t", (struct ap){1, 0, 0, 0, {{0}}, 0, i11, NULL, 2})->error,
        KAFKA_INVALID_REQUEST);
    CHECK_EQ(
        alter(&r, "t", (struct ap){1, 0, 0, 0, {{0}}, 0, i23, NULL, 2})->error,
        KAFKA_INVALID_REQUEST);
    CHECK(strstr(r.last_msg, "must include its leader 1") != NULL);
    /* A member whose broker epoch is not its registration's. */
    const int64_t bad[] = {ep[1], ep[2] + 1};
    CHECK_EQ(
        alter(&r, "t", (struct ap){1, 0, 0, 0, {{0}}, 0, i12, bad, 2})->error,
        KAFKA_INELIGIBLE_REPLICA);
    CHECK(strstr(r.last_msg, "epoch mismatch") != NULL);
    /* -1: not checked (requests before v3). */
    const int64_t unchecked[] = {-1, -1};
    CHECK_EQ(r.nproposals, before);
    CHECK_EQ(alter(&r, "t",
                   (struct ap){1, 0, 0, 0, {{0}}, 0, i12, unchecked, 2})
                 ->error,
             0);
    CHECK_EQ(r.nproposals, before + 1);
    rig_fini(&r);
}

UNIT_TEST(fenced_member_is_ineligible)
{
    struct rig r;
    int64_t ep[4];
    rig_init(&r);
    rig_cluster(&r, 3, ep);
    const struct cn_ctl_replicas as[] = {{r123, 3}};
    rig_topic(&r, "t", as, 1);
    static const int32_t i12[] = {1, 2}, i123[] = {1, 2, 3};
    CHECK_EQ(
        alter(&r, "t", (struct ap){1, 0, 0, 0, {{0}}, 0, i12, NULL, 2})->error,
        0);
    /* Broker 3 goes silent and is fenced: it may not come back in. */
    r.now += SESSION_MS / 2;
    hb(&r, 1, ep[1], false);
    hb(&r, 2, ep[2], false);
    r.now += SESSION_MS / 2 + 2;
    struct cn_ctl_event tick = {.kind = CN_CTE_TICK};
    rig_step(&r, &tick);
    CHECK(cn_image_broker_find(r.img, 3)->fenced);
    CHECK_EQ(alter(&r, "t", (struct ap){1, 0, 0, 0, {{0}}, 0, i123, NULL, 3})
                 ->error,
             KAFKA_INELIGIBLE_REPLICA);
    CHECK(strstr(r.last_msg, "fenced") != NULL);
    rig_fini(&r);
}

UNIT_TEST(isr_shrink_and_expand_write_one_record)
{
    struct rig r;
    int64_t ep[4];
    rig_init(&r);
    rig_cluster(&r, 3, ep);
    const struct cn_ctl_replicas as[] = {{r123, 3}};
    rig_topic(&r, "t", as, 1);
    const struct cn_image_part *p = part(&r, "t", 0);
    int32_t le = p->leader_epoch, pe = p->part_epoch;
    int before = r.nproposals;
    static const int32_t i13[] = {1, 3}, i132[] = {1, 3, 2};
    const struct cn_ctl_answer *a =
        alter(&r, "t", (struct ap){1, 0, 0, 0, {{0}}, 0, i13, NULL, 2});
    CHECK_EQ(a->error, 0);
    CHECK_EQ(r.nproposals, before + 1);
    CHECK_EQ(r.last_n, 1);
    CHECK_EQ(r.last_types[0], CN_MREC_PARTITION_CHANGE);
    p = part(&r, "t", 0);
    CHECK(isr_is(p, i13, 2));
    CHECK_EQ(p->leader, 1);
    /* metadata.version 21: a shrink keeps the leader epoch. */
    CHECK_EQ(p->leader_epoch, le);
    CHECK_EQ(p->part_epoch, pe + 1);
    /* The answer is the partition as committed. */
    CHECK_EQ(a->u.part.leader, 1);
    CHECK_EQ(a->u.part.leader_epoch, le);
    CHECK_EQ(a->u.part.partition_epoch, pe + 1);
    CHECK_EQ(a->u.part.nisr, 2);
    CHECK(a->u.part.isr[0] == 1 && a->u.part.isr[1] == 3);
    /* The same ISR again: answered from the image, nothing proposed. */
    a = alter(&r, "t", (struct ap){1, 0, 0, 0, {{0}}, 0, i13, NULL, 2});
    CHECK_EQ(a->error, 0);
    CHECK_EQ(r.nproposals, before + 1);
    CHECK_EQ(a->u.part.partition_epoch, pe + 1);
    CHECK_EQ(a->u.part.nisr, 2);
    /* The old partition epoch is now refused. */
    a = alter(&r, "t", (struct ap){1, 0, 0, -1, {{0}}, 0, i132, NULL, 3});
    CHECK_EQ(a->error, KAFKA_INVALID_UPDATE_VERSION);
    /* Expanding, v3 epochs checked. */
    a = alter(&r, "t", (struct ap){1, 0, 0, 0, {{0}}, 0, i132, NULL, 3});
    CHECK_EQ(a->error, 0);
    CHECK_EQ(r.nproposals, before + 2);
    p = part(&r, "t", 0);
    CHECK(isr_is(p, i132, 3));
    CHECK_EQ(p->part_epoch, pe + 2);
    CHECK_EQ(p->leader_epoch, le);
    CHECK_EQ(a->u.part.nisr, 3);
    rig_fini(&r);
}

UNIT_TEST(old_metadata_version_bumps_the_leader_epoch_on_shrink)
{
    struct rig r;
    int64_t ep[4];
    rig_init_mv(&r, 11); /* 3.5-IV2: before KAFKA-15021's fix */
    rig_cluster(&r, 3, ep);
    const struct cn_ctl_replicas as[] = {{r123, 3}};
    rig_topic(&r, "t", as, 1);
    const struct cn_image_part *p = part(&r, "t", 0);
    int32_t le = p->leader_epoch;
    static const int32_t i12[] = {1, 2}, i123[] = {1, 2, 3};
    CHECK_EQ(
        alter(&r, "t", (struct ap){1, 0, 0, 0, {{0}}, 0, i12, NULL, 2})->error,
        0);
    CHECK_EQ(part(&r, "t", 0)->leader_epoch, le + 1);
    CHECK_EQ(r.last.u.part.leader_epoch, le + 1);
    /* An expansion never does. */
    CHECK_EQ(alter(&r, "t", (struct ap){1, 0, 0, 0, {{0}}, 0, i123, NULL, 3})
                 ->error,
             0);
    CHECK_EQ(part(&r, "t", 0)->leader_epoch, le + 1);
    rig_fini(&r);
}

UNIT_TEST(queued_alter_partition_keeps_its_isr)
{
    struct rig r;
    int64_t ep[4];
    rig_init(&r);
    rig_cluster(&r, 3, ep);
    const struct cn_ctl_replicas as[] = {{r123, 3}};
    rig_topic(&r, "t", as, 1);
    r.hold = true;
    rig_register_ev(&r, 9); /* in flight */
    CHECK(cn_ctl_in_flight(r.ctl));
    const struct cn_image_topic *t = cn_image_topic_find(r.img,
                                                         cn_bytes_str("t"));
    struct cn_ctl_isr_member m[2] = {{1, ep[1]}, {2, ep[2]}};
    struct cn_ctl_event ev = {.kind = CN_CTE_ALTER_PARTITION};
    ev.u.isr.broker_id = 1;
    ev.u.isr.broker_epoch = ep[1];
    ev.u.isr.topic_id = t->id;
    ev.u.isr.partition = 0;
    ev.u.isr.leader_epoch = t->parts[0].leader_epoch;
    ev.u.isr.partition_epoch = t->parts[0].part_epoch;
    ev.u.isr.isr = m;
    ev.u.isr.nisr = 2;
    int nans = r.nans;
    rig_step(&r, &ev);
    CHECK_EQ(r.nans, nans);
    CHECK_EQ(cn_ctl_queued(r.ctl), 1);
    m[1].id = 3; /* the caller's array dies with the step */
    rig_commit(&r, r.held_seq);
    static const int32_t i12[] = {1, 2};
    CHECK_EQ(r.last.kind, CN_CTE_ALTER_PARTITION);
    CHECK_EQ(r.last.error, 0);
    CHECK(isr_is(part(&r, "t", 0), i12, 2));
    rig_fini(&r);
}

UNIT_TEST(alter_partition_to_a_follower_is_not_controller)
{
    struct rig r;
    rig_init(&r);
    struct cn_ctl_event un = {.kind = CN_CTE_UNLEADER};
    rig_step(&r, &un);
    struct cn_ctl_event ev = {.kind = CN_CTE_ALTER_PARTITION};
    rig_step(&r, &ev);
    CHECK_EQ(r.last.kind, CN_CTE_ALTER_PARTITION);
    CHECK_EQ(r.last.error, KAFKA_NOT_CONTROLLER);
    rig_fini(&r);
}

/* ---- controlled shutdown ----------------------------------------------- */

UNIT_TEST(controlled_shutdown_moves_leaders_then_lets_go)
{
    struct rig r;
    int64_t ep[4];
    rig_init(&r);
    rig_cluster(&r, 3, ep);
    /* Broker 1 leads p0 and p1, follows p2. */
    static const int32_t r132[] = {1, 3, 2}, r213[] = {2, 1, 3};
    const struct cn_ctl_replicas as[] = {{r123, 3}, {r132, 3}, {r213, 3}};
    rig_topic(&r, "t", as, 3);
    int32_t le0 = part(&r, "t", 0)->leader_epoch;
    int32_t le2 = part(&r, "t", 2)->leader_epoch;
    int before = r.nproposals;
    const struct cn_ctl_answer *a = hb(&r, 1, ep[1], true);
    CHECK_EQ(a->error, 0);
    CHECK(!a->u.hb.fenced && !a->u.hb.should_shut_down);
    /* One entry: the registration change first, then every partition it
     * leads or is in the ISR of. */
    CHECK_EQ(r.nproposals, before + 1);
    CHECK_EQ(r.last_n, 4);
    CHECK_EQ(r.last_types[0], CN_MREC_BROKER_REGISTRATION_CHANGE);
    CHECK_EQ(r.last_types[1], CN_MREC_PARTITION_CHANGE);
    int64_t cs_entry = r.offset;
    const struct cn_image_broker *b1 = cn_image_broker_find(r.img, 1);
    CHECK(b1->in_controlled_shutdown && !b1->fenced);
    CHECK(!led_by(&r, 1));
    CHECK(!in_an_isr(&r, 1));
    /* The next ISR member in assignment order leads, epoch +1; the
     * follower partition only lost an ISR member. */
    CHECK_EQ(part(&r, "t", 0)->leader, 2);
    CHECK_EQ(part(&r, "t", 0)->leader_epoch, le0 + 1);
    CHECK_EQ(part(&r, "t", 1)->leader, 3);
    CHECK_EQ(part(&r, "t", 2)->leader, 2);
    CHECK_EQ(part(&r, "t", 2)->leader_epoch, le2);
    /* Not yet: the others have not heartbeated the new leaders. */
    a = hb(&r, 1, ep[1], true);
    CHECK(!a->u.hb.should_shut_down && !a->u.hb.fenced);
    CHECK_EQ(r.nproposals, before + 1);
    /* A broker in controlled shutdown is not taken back into an ISR. */
    static const int32_t i21[] = {2, 1, 3};
    CHECK_EQ(
        alter(&r, "t", (struct ap){2, 0, 0, 0, {{0}}, 0, i21, NULL, 3})->error,
        KAFKA_INELIGIBLE_REPLICA);
    CHECK(strstr(r.last_msg, "shutting down") != NULL);
    hb(&r, 2, ep[2], false);
    a = hb(&r, 1, ep[1], true);
    CHECK(!a->u.hb.should_shut_down);
    CHECK(cn_image_offset(r.img) >= cs_entry);
    hb(&r, 3, ep[3], false);
    /* Every active broker knows: fenced, and it may go. */
    a = hb(&r, 1, ep[1], true);
    CHECK_EQ(a->error, 0);
    CHECK(a->u.hb.should_shut_down && a->u.hb.fenced);
    CHECK_EQ(r.last_types[r.last_n - 1], CN_MREC_FENCE_BROKER);
    CHECK(cn_image_broker_find(r.img, 1)->fenced);
    /* And so it stays. */
    int n = r.nproposals;
    a = hb(&r, 1, ep[1], true);
    CHECK(a->u.hb.should_shut_down && a->u.hb.fenced);
    CHECK_EQ(r.nproposals, n);
    rig_fini(&r);
}

UNIT_TEST(last_isr_member_keeps_it_and_still_goes)
{
    struct rig r;
    int64_t ep[3];
    rig_init(&r);
    rig_cluster(&r, 2, ep);
    static const int32_t only1[] = {1}, r12[] = {1, 2};
    const struct cn_ctl_replicas as[] = {{only1, 1}, {r12, 2}};
    rig_topic(&r, "t", as, 2);
    /* p1's follower fell out of the ISR: 1 is its last member too. */
    CHECK_EQ(alter(&r, "t", (struct ap){1, 0, 0, 0, {{0}}, 1, only1, NULL, 1})
                 ->error,
             0);
    const struct cn_ctl_answer *a = hb(&r, 1, ep[1], true);
    CHECK(!a->u.hb.should_shut_down);
    /* Nobody else can lead: no leader, and the ISR keeps broker 1 (the
     * last in-sync replica, whom the partition waits for). */
    for (int32_t i = 0; i < 2; i++) {
        const struct cn_image_part *p = part(&r, "t", i);
        CHECK_EQ(p->leader, -1);
        CHECK(isr_is(p, only1, 1));
    }
    /* Kafka lets it go: it leads nothing now (once the others know). */
    hb(&r, 2, ep[2], false);
    a = hb(&r, 1, ep[1], true);
    CHECK(a->u.hb.should_shut_down && a->u.hb.fenced);
    CHECK(isr_is(part(&r, "t", 0), only1, 1));
    rig_fini(&r);
}

UNIT_TEST(single_broker_shuts_down_after_one_round)
{
    struct rig r;
    int64_t ep[2];
    rig_init(&r);
    rig_cluster(&r, 1, ep);
    static const int32_t only1[] = {1};
    const struct cn_ctl_replicas as[] = {{only1, 1}};
    rig_topic(&r, "t", as, 1);
    CHECK(!hb(&r, 1, ep[1], true)->u.hb.should_shut_down);
    CHECK_EQ(part(&r, "t", 0)->leader, -1);
    /* No active broker is left to wait for. */
    CHECK(hb(&r, 1, ep[1], true)->u.hb.should_shut_down);
    rig_fini(&r);
}

UNIT_TEST(broker_leading_nothing_goes_at_once)
{
    struct rig r;
    int64_t ep[3];
    rig_init(&r);
    rig_cluster(&r, 2, ep);
    static const int32_t r21[] = {2, 1};
    const struct cn_ctl_replicas as[] = {{r21, 2}};
    rig_topic(&r, "t", as, 1);
    int before = r.nproposals;
    /* Kafka's SHUTDOWN_NOW: out of the ISRs and fenced, in one entry. */
    const struct cn_ctl_answer *a = hb(&r, 1, ep[1], true);
    CHECK_EQ(a->error, 0);
    CHECK(a->u.hb.should_shut_down && a->u.hb.fenced);
    CHECK_EQ(r.nproposals, before + 1);
    CHECK_EQ(r.last_n, 2);
    CHECK_EQ(r.last_types[0], CN_MREC_PARTITION_CHANGE);
    CHECK_EQ(r.last_types[1], CN_MREC_FENCE_BROKER);
    CHECK(!in_an_isr(&r, 1));
    CHECK_EQ(part(&r, "t", 0)->leader, 2);
    rig_fini(&r);
}

UNIT_TEST(fenced_broker_may_go_without_a_proposal)
{
    struct rig r;
    rig_init(&r);
    int64_t e = rig_register(&r, 1); /* registered, still fenced */
    int before = r.nproposals;
    struct cn_ctl_event ev = {.kind = CN_CTE_HEARTBEAT};
    ev.u.hb.broker_id = 1;
    ev.u.hb.broker_epoch = e;
    ev.u.hb.metadata_offset = cn_image_offset(r.img);
    ev.u.hb.want_shut_down = true;
    rig_step(&r, &ev);
    CHECK(r.last.error == 0 && r.last.u.hb.should_shut_down &&
          r.last.u.hb.fenced);
    /* Not unfenced although caught up. */
    CHECK_EQ(r.nproposals, before);
    CHECK(cn_image_broker_find(r.img, 1)->fenced);
    rig_fini(&r);
}

UNIT_TEST(new_controller_waits_for_active_brokers_again)
{
    struct rig r;
    int64_t ep[3];
    rig_init(&r);
    rig_cluster(&r, 2, ep);
    static const int32_t r12[] = {1, 2};
    const struct cn_ctl_replicas as[] = {{r12, 2}};
    rig_topic(&r, "t", as, 1);
    CHECK(!hb(&r, 1, ep[1], true)->u.hb.should_shut_down);
    CHECK_EQ(part(&r, "t", 0)->leader, 2);
    /* Leadership moves (the same machine stands in for a new one: fresh
     * sessions, no controlled-shutdown offset). */
    struct cn_ctl_event un = {.kind = CN_CTE_UNLEADER};
    rig_step(&r, &un);
    struct cn_ctl_event le = {.kind = CN_CTE_LEADER, .u.term = 3};
    rig_step(&r, &le);
    /* The image says controlled shutdown even without want_shut_down;
     * broker 2 has not been heard from by this leader. */
    CHECK(!hb(&r, 1, ep[1], false)->u.hb.should_shut_down);
    hb(&r, 2, ep[2], false);
    CHECK(hb(&r, 1, ep[1], true)->u.hb.should_shut_down);
    rig_fini(&r);
}

UNIT_MAIN(alter_partition_checks_in_kafkas_order, fenced_member_is_ineligible,
          isr_shrink_and_expand_write_one_record,
          old_metadata_version_bumps_the_leader_epoch_on_shrink,
          queued_alter_partition_keeps_its_isr,
          alter_partition_to_a_follower_is_not_controller,
          controlled_shutdown_moves_leaders_then_lets_go,
          last_isr_member_keeps_it_and_still_goes,
          single_broker_shuts_down_after_one_round,
          broker_leading_nothing_goes_at_once,
          fenced_broker_may_go_without_a_proposal,
          new_controller_waits_for_active_brokers_again)
