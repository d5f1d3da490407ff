/*
 * ctl_isr.c - the controller's decisions on ISRs: AlterPartition from a
 * partition's leader, and a broker's controlled shutdown (see ctl.h).
 *
 * AlterPartition is checked in the order of Kafka's
 * ReplicationControlManager.alterPartition and validateAlterPartitionData
 * (v2+ error codes: topic ids, INELIGIBLE_REPLICA, NEW_LEADER_ELECTED).
 * Controlled shutdown follows BrokerHeartbeatManager.
 * calculateNextBrokerState: UNFENCED -> CONTROLLED_SHUTDOWN while the
 * broker leads partitions, -> SHUTDOWN_NOW (fenced, should_shut_down)
 * once it leads none and every active broker has applied the entry that
 * began it.
 */
#include <stdint.h>
#include <string.h>

#include "meta/ctl.h"
#include "meta/ctl_int.h"
#include "meta/elect.h"
#include "proto/kerr.h"

/* Kafka bumps the leader epoch when an ISR shrinks only below
 * metadata.version 3.6-IV0 (KAFKA-15021). */
#define MV_NO_EPOCH_BUMP_ON_SHRINK 12

static const struct cn_image_part *find_part(const struct cn_image *img,
                                             const struct cn_uuid *topic_id,
                                             int32_t partition,
                                             const struct cn_image_topic **t)
{
    *t = cn_image_topic_find_id(img, topic_id);
    if (!*t || partition < 0 || partition >= (*t)->nparts)
        return NULL;
    return &(*t)->parts[partition];
}

void ctl_answer_partition(const struct cn_image *img,
                          const struct cn_ctl_event *ev,
                          struct cn_ctl_actions *acts)
{
    const struct cn_ctl_alter_partition *ap = &ev->u.isr;
    const struct cn_image_topic *t;
    const struct cn_image_part *p = find_part(img, &ap->topic_id,
                                              ap->partition, &t);
    if (!p) {
        /* Deleted between the decision and its commit. */
        ctl_answer_error(acts, ev, KAFKA_UNKNOWN_TOPIC_ID, NULL);
        return;
    }
    if (p->leader != ap->broker_id) {
        /* The change elected another leader (the requester may not lead
         * any more): it must learn the new state from metadata first. */
        ctl_answer_error(acts, ev, KAFKA_NEW_LEADER_ELECTED, NULL);
        return;
    }
    if (p->nisr > CN_CTL_ISR_MAX) {
        ctl_answer_error(acts, ev, KAFKA_UNKNOWN_SERVER_ERROR,
                         "More than %d in-sync replicas", CN_CTL_ISR_MAX);
        return;
    }
    struct cn_ctl_answer *ans = ctl_push_answer(acts, ev, 0);
    if (!ans)
        return;
    ans->u.part.leader = p->leader;
    ans->u.part.leader_epoch = p->leader_epoch;
    ans->u.part.partition_epoch = p->part_epoch;
    ans->u.part.nisr = p->nisr;
    if (p->nisr > 0)
        memcpy(ans->u.part.isr, p->isr, (size_t)p->nisr * sizeof *p->isr);
}

/* Kafka's Replicas.validateIsr: members are replicas, each once. */
static bool isr_valid(const struct cn_image_part *p,
                      const struct cn_ctl_alter_partition *ap)
{
    for (int32_t i = 0; i < ap->nisr; i++) {
        int32_t id = ap->isr[i].id;
        if (id < 0 || !ctl_has_id(p->replicas, p->nreplicas, id))
            return false;
        for (int32_t j = 0; j < i; j++)
            if (ap->isr[j].id == id)
                return false;
    }
    return true;
}

static bool in_new_isr(const struct cn_ctl_alter_partition *ap, int32_t id)
{
    for (int32_t i = 0; i < ap->nisr; i++)
        if (ap->isr[i].id == id)
            return true;
    return false;
}

/* Kafka's ineligibleReplicasForIsr: the first member that may not be in
 * an ISR, with why in *why; -1 when all may. */
static int32_t ineligible(const struct cn_image *img,
                          const struct cn_ctl_alter_partition *ap,
                          const char **why)
{
    for (int32_t i = 0; i < ap->nisr; i++) {
        const struct cn_ctl_isr_member *m = &ap->isr[i];
        const struct cn_image_broker *b = cn_image_broker_find(img, m->id);
        *why = !b                          ? "not registered"
               : b->in_controlled_shutdown ? "shutting down"
               : b->fenced                 ? "fenced"
               : m->broker_epoch != -1 && m->broker_epoch != b->epoch
                   ? "broker epoch mismatch"
                   : NULL;
        if (*why)
            return m->id;
    }
    return -1;
}

bool ctl_decide_alter_partition(struct cn_ctl *c, const struct cn_image *img,
                                struct qreq *req, struct cn_ctl_actions *acts)
{
    const struct cn_ctl_event *ev = &req->ev;
    const struct cn_ctl_alter_partition *ap = &ev->u.isr;
    /* ClusterControlManager.checkBrokerEpoch: an unregistered broker is
     * a stale epoch too. */
    const struct cn_image_broker *rb = cn_image_broker_find(img,
                                                            ap->broker_id);
    if (!rb || rb->epoch != ap->broker_epoch) {
        ctl_answer_error(acts, ev, KAFKA_STALE_BROKER_EPOCH,
                         "Expected broker epoch %lld, but got broker epoch "
                         "%lld",
                         rb ? (long long)rb->epoch : -1LL,
                         (long long)ap->broker_epoch);
        return false;
    }
    const struct cn_image_topic *t = cn_image_topic_find_id(img,
                                                            &ap->topic_id);
    if (!t) {
        ctl_answer_error(acts, ev, KAFKA_UNKNOWN_TOPIC_ID, NULL);
        return false;
    }
    if (ap->partition < 0 || ap->partition >= t->nparts) {
        ctl_answer_error(acts, ev, KAFKA_UNKNOWN_TOPIC_OR_PARTITION, NULL);
        return false;
    }
    const struct cn_image_part *p = &t->parts[ap->partition];
    /* Epochs ahead of the image: the leader heard of a change this node
     * has not applied, so this node is likely not the controller any
     * more; the leader asks again, of whichever leads. */
    if (ap->leader_epoch > p->leader_epoch ||
        ap->partition_epoch > p->part_epoch) {
        ctl_answer_error(acts, ev, KAFKA_NOT_CONTROLLER, NULL);
        return false;
    }
    if (ap->leader_epoch < p->leader_epoch) {
        ctl_answer_error(acts, ev, KAFKA_FENCED_LEADER_EPOCH, NULL);
        return false;
    }
    if (ap->broker_id != p->leader) {
        ctl_answer_error(acts, ev, KAFKA_INVALID_REQUEST,
                         "Broker %d is not the leader of %s-%d (%d is)",
                         ap->broker_id, t->name, ap->partition, p->leader);
        return false;
    }
    if (ap->partition_epoch < p->part_epoch) {
        ctl_answer_error(acts, ev, KAFKA_INVALID_UPDATE_VERSION, NULL);
        return false;
    }
    if (!isr_valid(p, ap)) {
        ctl_answer_error(acts, ev, KAFKA_INVALID_REQUEST,
                         "Invalid ISR for %s-%d: a member twice or not a "
                         "replica",
                         t->name, ap->partition);
        return false;
    }
    if (!in_new_isr(ap, p->leader)) {
        ctl_answer_error(acts, ev, KAFKA_INVALID_REQUEST,
                         "The ISR of %s-%d must include its leader %d",
                         t->name, ap->partition, p->leader);
        return false;
    }
    const char *why = NULL;
    int32_t bad = ineligible(img, ap, &why);
    if (bad >= 0) {
        ctl_answer_error(acts, ev, KAFKA_INELIGIBLE_REPLICA,
                         "Replica %d is ineligible for the ISR: %s", bad, why);
        return false;
    }
    /* Replicas bound the ISR; this bounds what an answer carries. */
    if (ap->nisr > CN_CTL_ISR_MAX) {
        ctl_answer_error(acts, ev, KAFKA_INVALID_REQUEST,
                         "More than %d in-sync replicas are not supported",
                         CN_CTL_ISR_MAX);
        return false;
    }

    struct recs r = {.a = &acts->arena};
    int32_t *isr = cn_arena_calloc(r.a, (size_t)ap->nisr + 1, sizeof *isr);
    struct cn_elect_usable u = ctl_usable(img, r.a, -1, -1);
    if (!isr || !u.ids)
        goto oom;
    for (int32_t i = 0; i < ap->nisr; i++)
        isr[i] = ap->isr[i].id;
    /* PartitionChangeBuilder compares the lists, order included. */
    bool same = ap->nisr == p->nisr &&
                memcmp(isr, p->isr, (size_t)p->nisr * sizeof *isr) == 0;
    struct cn_elect_part after = {p->replicas, p->nreplicas, isr, ap->nisr,
                                  p->leader};
    int32_t leader = cn_elect_leader(&after, &u);
    if (same && leader == p->leader) {
        ctl_answer_partition(img, ev, acts);
        return false;
    }
    struct cn_mrec *m = ctl_rec_add(&r, CN_MREC_PARTITION_CHANGE);
    if (!m)
        goto oom;
    struct cn_partition_change_record *pc = &m->u.partition_change;
    cn_partition_change_record_init(pc);
    pc->topic_id = t->id;
    pc->partition_id = ap->partition;
    if (!same) {
        pc->isr = isr;
        pc->isr_len = ap->nisr;
    }
    if (leader != p->leader) {
        pc->leader = leader;
    } else if (cn_image_feature(img, "metadata.version") <
               MV_NO_EPOCH_BUMP_ON_SHRINK) {
        /* Naming the same leader starts a new leader epoch. */
        for (int32_t i = 0; i < p->nisr; i++)
            if (!in_new_isr(ap, p->isr[i]))
                pc->leader = p->leader;
    }
    ctl_propose(c, acts, &r, FLIGHT_REQ, req);
    return true;
oom:
    ctl_answer_error(acts, ev, KAFKA_UNKNOWN_SERVER_ERROR, NULL);
    return false;
}

/* ---- controlled shutdown ---------------------------------------------- */

static bool leads_any(const struct cn_image *img, int32_t id)
{
    const struct cn_image_topic *t = NULL;
    while ((t = cn_image_topic_next(img, t)))
        for (int32_t p = 0; p < t->nparts; p++)
            if (t->parts[p].leader == id)
                return true;
    return false;
}

/* Kafka's lowestActiveOffset: the least metadata offset among unfenced
 * brokers not shutting down (-1 for one not heard from by this leader),
 * INT64_MAX when there is none. */
static int64_t lowest_active_offset(struct cn_ctl *c,
                                    const struct cn_image *img, int64_t now_ms)
{
    int64_t low = INT64_MAX;
    size_t nb = cn_image_broker_count(img);
    for (size_t i = 0; i < nb; i++) {
        const struct cn_image_broker *b = cn_image_broker_at(img, i);
        if (b->fenced || b->in_controlled_shutdown)
            continue;
        struct session *s = ctl_session(c, b->id, now_ms);
        int64_t off = s ? s->metadata_offset : -1;
        if (off < low)
            low = off;
    }
    return low;
}

static void answer_hb(struct cn_ctl_actions *acts,
                      const struct cn_ctl_event *ev, bool fenced,
                      bool caught_up, bool shut_down)
{
    struct cn_ctl_answer *ans = ctl_push_answer(acts, ev, 0);
    if (!ans)
        return;
    ans->u.hb.fenced = fenced;
    ans->u.hb.caught_up = caught_up;
    ans->u.hb.should_shut_down = shut_down;
}

/* SHUTDOWN_NOW: the broker leaves every ISR it can and is fenced
 * (Kafka's handleBrokerFenced); answered should_shut_down once applied. */
static bool propose_shutdown_now(struct cn_ctl *c, const struct cn_image *img,
                                 struct qreq *req,
                                 const struct cn_image_broker *b,
                                 bool caught_up, struct cn_ctl_actions *acts)
{
    struct recs r = {.a = &acts->arena};
    struct cn_elect_usable u = ctl_usable(img, r.a, b->id, -1);
    if (!u.ids)
        return false;
    ctl_fence_changes(img, b->id, &u, &r);
    struct cn_mrec *m = ctl_rec_add(&r, CN_MREC_FENCE_BROKER);
    if (!m || r.oom)
        return false;
    cn_fence_broker_record_init(&m->u.fence_broker);
    m->u.fence_broker.id = b->id;
    m->u.fence_broker.epoch = b->epoch;
    ctl_propose(c, acts, &r, FLIGHT_REQ, req);
    c->flight.done.u.hb.fenced = true;
    c->flight.done.u.hb.caught_up = caught_up;
    c->flight.done.u.hb.should_shut_down = true;
    return true;
}

bool ctl_decide_shutdown(struct cn_ctl *c, const struct cn_image *img,
                         int64_t now_ms, struct qreq *req,
                         const struct cn_image_broker *b,
                         struct cn_ctl_actions *acts)
{
    const struct cn_ctl_event *ev = &req->ev;
    bool caught_up = ev->u.hb.metadata_offset >= b->epoch;
    if (b->fenced) {
        /* Leads nothing and is in no ISR it could leave: it may go. */
        answer_hb(acts, ev, true, caught_up, true);
        return false;
    }
    struct session *s = ctl_session(c, b->id, now_ms);
    if (!s)
        goto oom;
    bool leads = leads_any(img, b->id);
    if (!b->in_controlled_shutdown && !leads) {
        if (propose_shutdown_now(c, img, req, b, caught_up, acts))
            return true;
        goto oom;
    }
    struct recs r = {.a = &acts->arena};
    if (!b->in_controlled_shutdown) {
        /* Enter controlled shutdown: the registration change, then the
         * leaderships moved in the same entry (Kafka's
         * handleBrokerInControlledShutdown). */
        struct cn_mrec *m = ctl_rec_add(&r,
                                        CN_MREC_BROKER_REGISTRATION_CHANGE);
        if (!m)
            goto oom;
        struct cn_broker_registration_change_record *rc =
            &m->u.registration_change;
        cn_broker_registration_change_record_init(rc);
        rc->broker_id = b->id;
        rc->broker_epoch = b->epoch;
        rc->in_controlled_shutdown = 1;
        rc->log_dirs_len = 0;
        s->cs_offset = -1; /* set when the entry applies */
    }
    if (leads) {
        /* Partitions another ISR member can take; the others lose their
         * leader and keep this broker as their last ISR member (elect.h).
         * Once in controlled shutdown this finds work only after a
         * change this leader did not make (Kafka moves leaders once). */
        struct cn_elect_usable u = ctl_usable(img, r.a, b->id, -1);
        if (!u.ids)
            goto oom;
        ctl_fence_changes(img, b->id, &u, &r);
        if (r.oom)
            goto oom;
    }
    if (r.n > 0) {
        ctl_propose(c, acts, &r, FLIGHT_REQ, req);
        c->flight.done.u.hb.fenced = false;
        c->flight.done.u.hb.caught_up = caught_up;
        c->flight.done.u.hb.should_shut_down = false;
        return true;
    }
    if (leads) {
        answer_hb(acts, ev, false, caught_up, false);
        return false;
    }
    /* Leads nothing: it may go once every active broker knows the new
     * leaders.  A leader that did not see the entry applied (elected
     * since) counts from what it has applied. */
    if (s->cs_offset < 0)
        s->cs_offset = cn_image_offset(img);
    if (lowest_active_offset(c, img, now_ms) >= s->cs_offset) {
        if (propose_shutdown_now(c, img, req, b, caught_up, acts))
            return true;
        goto oom;
    }
    answer_hb(acts, ev, false, caught_up, false);
    return false;
oom:
    ctl_answer_error(acts, ev, KAFKA_UNKNOWN_SERVER_ERROR, NULL);
    return false;
}

void ctl_shutdown_applied(struct cn_ctl *c, const struct cn_image *img,
                          int64_t now_ms, const struct cn_ctl_event *ev,
                          int64_t offset)
{
    const struct cn_image_broker *b = cn_image_broker_find(img,
                                                           ev->u.hb.broker_id);
    if (!b || b->fenced || !b->in_controlled_shutdown)
        return;
    /* The latest entry that moved its leaderships: every active broker
     * must have applied it. */
    struct session *s = ctl_session(c, b->id, now_ms);
    if (s && offset > s->cs_offset)
        s->cs_offset = offset;
}
