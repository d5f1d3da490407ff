/*
 * ctl_topics.c - the controller's topic decisions: CreateTopics,
 * DeleteTopics, CreatePartitions, topic configs (AlterConfigs) and
 * Kafka's replica assignment (see ctl.h for the rules every decision
 * keeps).
 */
#include <stdlib.h>
#include <string.h>

#include "meta/ctl.h"
#include "meta/ctl_int.h"
#include "meta/elect.h"
#include "proto/kerr.h"

#define TOPIC_RESOURCE 2 /* ConfigResource.Type.TOPIC */

void cn_ctl_assign(const int32_t *brokers, int32_t nb, int32_t first,
                   int32_t n, int32_t rf, int32_t start_index, int32_t shift,
                   int32_t *out)
{
    for (int32_t i = 0; i < n; i++) {
        int32_t p = first + i;
        /* Shifting the followers every round of brokers spreads the
         * replicas of a broker's partitions over all the others. */
        if (p > 0 && p % nb == 0)
            shift++;
        int32_t lead = (p + start_index) % nb;
        out[i * rf] = brokers[lead];
        for (int32_t j = 0; j < rf - 1; j++) {
            int32_t s = 1 + (shift + j) % (nb - 1);
            out[i * rf + 1 + j] = brokers[(lead + s) % nb];
        }
    }
}

static bool rf_fits(const struct cn_ctl_event *ev, int32_t rf,
                    const struct cn_image *img,
                    const struct cn_elect_usable *u,
                    struct cn_ctl_actions *acts)
{
    size_t total = cn_image_broker_count(img);
    if (u->n == 0) {
        ctl_answer_error(acts, ev, KAFKA_INVALID_REPLICATION_FACTOR,
                         "Unable to replicate the partition %d time(s): All "
                         "brokers are currently fenced.",
                         rf);
        return false;
    }
    if ((size_t)rf > u->n) {
        /* Kafka 4.4's text when too few are registered (a client may
         * match on it); Cairn places on unfenced brokers only, so it also
         * says when too few of those are left. */
        if ((size_t)rf > total)
            ctl_answer_error(acts, ev, KAFKA_INVALID_REPLICATION_FACTOR,
                             "Unable to replicate the partition %d time(s): "
                             "The target replication factor of %d cannot be "
                             "reached because only %zu broker(s) are "
                             "registered or some brokers have all their log "
                             "directories cordoned.",
                             rf, rf, total);
        else
            ctl_answer_error(acts, ev, KAFKA_INVALID_REPLICATION_FACTOR,
                             "Unable to replicate the partition %d time(s): "
                             "The target replication factor of %d cannot be "
                             "reached because only %zu broker(s) are "
                             "unfenced.",
                             rf, rf, u->n);
        return false;
    }
    return true;
}

/* Topic ids are random, never zero, never one in use. */
static struct cn_uuid new_topic_id(struct cn_ctl *c,
                                   const struct cn_image *img)
{
    struct cn_uuid id;
    for (;;) {
        uint64_t hi = ctl_rand(c), lo = ctl_rand(c);
        for (int i = 0; i < 8; i++) {
            id.b[i] = (uint8_t)(hi >> (56 - 8 * i));
            id.b[8 + i] = (uint8_t)(lo >> (56 - 8 * i));
        }
        id.b[6] = (uint8_t)((id.b[6] & 0x0f) | 0x40); /* version 4 */
        id.b[8] = (uint8_t)((id.b[8] & 0x3f) | 0x80);
        if (!cn_image_topic_find_id(img, &id))
            return id;
    }
}

/* Adds a PartitionRecord; the ISR is the usable replicas. */
static bool add_partition(struct recs *r, const struct cn_uuid *tid, int32_t p,
                          const int32_t *replicas, int32_t n,
                          const struct cn_elect_usable *u)
{
    struct cn_mrec *m = ctl_rec_add(r, CN_MREC_PARTITION);
    int32_t *rep = ctl_copy_ids(r->a, replicas, n);
    int32_t *isr = cn_arena_calloc(r->a, (size_t)n + 1, sizeof *isr);
    if (!m || !rep || !isr)
        return false;
    int32_t nisr = 0;
    for (int32_t i = 0; i < n; i++)
        if (cn_elect_is_usable(u, replicas[i]))
            isr[nisr++] = replicas[i];
    struct cn_partition_record *pr = &m->u.partition;
    cn_partition_record_init(pr);
    pr->topic_id = *tid;
    pr->partition_id = p;
    pr->replicas = rep;
    pr->replicas_len = n;
    pr->isr = isr;
    pr->isr_len = nisr;
    struct cn_elect_part ep = {rep, n, isr, nisr, -1};
    pr->leader = cn_elect_leader(&ep, u);
    pr->leader_epoch = 0;
    pr->partition_epoch = 0;
    return true;
}

static bool check_manual(const struct cn_ctl_event *ev,
                         const struct cn_image *img,
                         const struct cn_elect_usable *u,
                         struct cn_ctl_actions *acts)
{
    const struct cn_ctl_create_topic *ct = &ev->u.create;
    if (ct->nparts != -1 || ct->rf != -1) {
        ctl_answer_error(acts, ev, KAFKA_INVALID_REQUEST,
                         "A manual partition assignment was specified, but "
                         "%s was not set to -1.",
                         ct->nparts != -1 ? "numPartitions"
                                          : "replicationFactor");
        return false;
    }
    for (int32_t p = 0; p < ct->nassign; p++) {
        const struct cn_ctl_replicas *a = &ct->assign[p];
        if (a->n <= 0) {
            ctl_answer_error(
                acts, ev, KAFKA_INVALID_REPLICA_ASSIGNMENT,
                "The manual partition assignment includes an empty "
                "replica list.");
            return false;
        }
        bool any_usable = false;
        for (int32_t i = 0; i < a->n; i++) {
            if (ctl_has_id(a->ids, i, a->ids[i])) {
                ctl_answer_error(
                    acts, ev, KAFKA_INVALID_REPLICA_ASSIGNMENT,
                    "The manual partition assignment includes the "
                    "broker %d more than once.",
                    a->ids[i]);
                return false;
            }
            if (!cn_image_broker_find(img, a->ids[i])) {
                ctl_answer_error(
                    acts, ev, KAFKA_INVALID_REPLICA_ASSIGNMENT,
                    "The manual partition assignment includes broker "
                    "%d, but no such broker is registered.",
                    a->ids[i]);
                return false;
            }
            any_usable |= cn_elect_is_usable(u, a->ids[i]);
        }
        if (!any_usable) {
            ctl_answer_error(acts, ev, KAFKA_INVALID_REPLICA_ASSIGNMENT,
                             "All brokers specified in the manual partition "
                             "assignment for partition %d are fenced or in "
                             "controlled shutdown.",
                             p);
            return false;
        }
    }
    return true;
}

static bool check_configs(const struct cn_ctl_event *ev, int32_t rf,
                          struct cn_ctl_actions *acts)
{
    const struct cn_ctl_create_topic *ct = &ev->u.create;
    for (size_t i = 0; i < ct->nconfigs; i++) {
        if (!cn_bytes_eq_str(ct->configs[i].name, "min.insync.replicas"))
            continue;
        char v[24] = "";
        struct cn_bytes b = ct->configs[i].value;
        if (b.len > 0 && (size_t)b.len < sizeof v)
            memcpy(v, b.ptr, (size_t)b.len);
        char *end;
        long n = strtol(v, &end, 10);
        if (!v[0] || *end || n < 1 || n > rf) {
            ctl_answer_error(acts, ev, KAFKA_INVALID_CONFIG,
                             "Invalid value %s for configuration "
                             "min.insync.replicas: must be between 1 and the "
                             "replication factor %d",
                             v, rf);
            return false;
        }
    }
    return true;
}

bool ctl_decide_create_topic(struct cn_ctl *c, const struct cn_image *img,
                             struct qreq *req, struct cn_ctl_actions *acts)
{
    const struct cn_ctl_event *ev = &req->ev;
    const struct cn_ctl_create_topic *ct = &ev->u.create;
    if (cn_image_topic_find(img, ct->name)) {
        ctl_answer_error(acts, ev, KAFKA_TOPIC_ALREADY_EXISTS,
                         "Topic '%.*s' already exists.", (int)ct->name.len,
                         (const char *)ct->name.ptr);
        return false;
    }
    struct recs r = {.a = &acts->arena};
    struct cn_elect_usable u = ctl_usable(img, r.a, -1, -1);
    if (!u.ids)
        goto oom;
    int32_t nparts, rf;
    int32_t *assign = NULL;
    if (ct->assign) {
        if (!check_manual(ev, img, &u, acts))
            return false;
        nparts = ct->nassign;
        rf = ct->assign[0].n;
    } else {
        nparts = ct->nparts == -1 ? c->cfg.default_partitions : ct->nparts;
        rf = ct->rf == -1 ? c->cfg.default_rf : ct->rf;
        if (nparts <= 0) {
            ctl_answer_error(acts, ev, KAFKA_INVALID_PARTITIONS,
                             "Number of partitions was set to an invalid "
                             "non-positive value.");
            return false;
        }
        if (rf <= 0) {
            ctl_answer_error(
                acts, ev, KAFKA_INVALID_REPLICATION_FACTOR,
                "Replication factor must be larger than 0, or -1 to "
                "use the default value.");
            return false;
        }
        if (!rf_fits(ev, rf, img, &u, acts))
            return false;
        assign = cn_arena_calloc(r.a, (size_t)nparts * (size_t)rf,
                                 sizeof *assign);
        if (!assign)
            goto oom;
        int32_t nb = (int32_t)u.n;
        int32_t start = (int32_t)(ctl_rand(c) % (uint64_t)nb);
        int32_t shift = (int32_t)(ctl_rand(c) % (uint64_t)nb);
        cn_ctl_assign(u.ids, nb, 0, nparts, rf, start, shift, assign);
    }
    if (!check_configs(ev, rf, acts))
        return false;
    struct cn_uuid id = new_topic_id(c, img);
    if (ct->validate_only) {
        struct cn_ctl_answer *ans = ctl_push_answer(acts, ev, 0);
        if (ans) {
            ans->u.topic.nparts = nparts;
            ans->u.topic.rf = (int16_t)rf;
        }
        return false;
    }
    struct cn_mrec *m = ctl_rec_add(&r, CN_MREC_TOPIC);
    if (!m)
        goto oom;
    cn_topic_record_init(&m->u.topic);
    m->u.topic.name = ct->name;
    m->u.topic.topic_id = id;
    for (size_t i = 0; i < ct->nconfigs; i++) {
        m = ctl_rec_add(&r, CN_MREC_CONFIG);
        if (!m)
            goto oom;
        cn_config_record_init(&m->u.config);
        m->u.config.resource_type = TOPIC_RESOURCE;
        m->u.config.resource_name = ct->name;
        m->u.config.name = ct->configs[i].name;
        m->u.config.value = ct->configs[i].value;
    }
    for (int32_t p = 0; p < nparts; p++) {
        const int32_t *rep = ct->assign ? ct->assign[p].ids : assign + p * rf;
        int32_t n = ct->assign ? ct->assign[p].n : rf;
        if (!add_partition(&r, &id, p, rep, n, &u))
            goto oom;
    }
    if (r.oom)
        goto oom;
    ctl_propose(c, acts, &r, FLIGHT_REQ, req);
    c->flight.done.u.topic.id = id;
    c->flight.done.u.topic.nparts = nparts;
    c->flight.done.u.topic.rf = (int16_t)rf;
    return true;
oom:
    ctl_answer_error(acts, ev, KAFKA_UNKNOWN_SERVER_ERROR, NULL);
    return false;
}

bool ctl_decide_delete_topic(struct cn_ctl *c, const struct cn_image *img,
                             struct qreq *req, struct cn_ctl_actions *acts)
{
    const struct cn_ctl_event *ev = &req->ev;
    const struct cn_ctl_delete_topic *dt = &ev->u.del;
    const struct cn_image_topic *t;
    if (!cn_bytes_is_null(dt->name)) {
        t = cn_image_topic_find(img, dt->name);
        if (!t) {
            ctl_answer_error(acts, ev, KAFKA_UNKNOWN_TOPIC_OR_PARTITION, NULL);
            return false;
        }
    } else {
        t = cn_image_topic_find_id(img, &dt->id);
        if (!t) {
            ctl_answer_error(acts, ev, KAFKA_UNKNOWN_TOPIC_ID, NULL);
            return false;
        }
    }
    struct recs r = {.a = &acts->arena};
    struct cn_mrec *m = ctl_rec_add(&r, CN_MREC_REMOVE_TOPIC);
    if (!m) {
        ctl_answer_error(acts, ev, KAFKA_UNKNOWN_SERVER_ERROR, NULL);
        return false;
    }
    cn_remove_topic_record_init(&m->u.remove_topic);
    m->u.remove_topic.topic_id = t->id;
    ctl_propose(c, acts, &r, FLIGHT_REQ, req);
    c->flight.done.u.topic.id = t->id;
    return true;
}

static int cmp_id(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* Kafka's validateManualPartitionAssignment and the active-replica check
 * of createPartitions, list by list, in its order and with its texts:
 * the ids are walked sorted, so of several faults in one list the lowest
 * id's is the one named. */
static bool check_new_assignment(const struct cn_ctl_event *ev,
                                 const struct cn_image *img,
                                 const struct cn_elect_usable *u, int32_t rf,
                                 int32_t first, struct cn_arena *a,
                                 struct cn_ctl_actions *acts)
{
    const struct cn_ctl_create_partitions *cp = &ev->u.parts;
    for (int32_t p = 0; p < cp->nassign; p++) {
        const struct cn_ctl_replicas *r = &cp->assign[p];
        if (r->n <= 0) {
            ctl_answer_error(
                acts, ev, KAFKA_INVALID_REPLICA_ASSIGNMENT,
                "The manual partition assignment includes an empty "
                "replica list.");
            return false;
        }
        int32_t *sorted = ctl_copy_ids(a, r->ids, r->n);
        if (!sorted) {
            ctl_answer_error(acts, ev, KAFKA_UNKNOWN_SERVER_ERROR, NULL);
            return false;
        }
        qsort(sorted, (size_t)r->n, sizeof *sorted, cmp_id);
        for (int32_t i = 0; i < r->n; i++) {
            if (!cn_image_broker_find(img, sorted[i])) {
                ctl_answer_error(
                    acts, ev, KAFKA_INVALID_REPLICA_ASSIGNMENT,
                    "The manual partition assignment includes broker %d, "
                    "but no such broker is registered.",
                    sorted[i]);
                return false;
            }
            if (i > 0 && sorted[i] == sorted[i - 1]) {
                ctl_answer_error(
                    acts, ev, KAFKA_INVALID_REPLICA_ASSIGNMENT,
                    "The manual partition assignment includes the broker "
                    "%d more than once.",
                    sorted[i]);
                return false;
            }
        }
        if (r->n != rf) {
            ctl_answer_error(
                acts, ev, KAFKA_INVALID_REPLICA_ASSIGNMENT,
                "The manual partition assignment includes a partition with "
                "%d replica(s), but this is not consistent with previous "
                "partitions, which have %d replica(s).",
                r->n, rf);
            return false;
        }
        bool any_usable = false;
        for (int32_t i = 0; i < r->n; i++)
            any_usable |= cn_elect_is_usable(u, r->ids[i]);
        if (!any_usable) {
            ctl_answer_error(acts, ev, KAFKA_INVALID_REPLICA_ASSIGNMENT,
                             "All brokers specified in the manual partition "
                             "assignment for partition %d are fenced or in "
                             "controlled shutdown.",
                             first + p);
            return false;
        }
    }
    return true;
}

bool ctl_decide_create_partitions(struct cn_ctl *c, const struct cn_image *img,
                                  struct qreq *req,
                                  struct cn_ctl_actions *acts)
{
    const struct cn_ctl_event *ev = &req->ev;
    const struct cn_ctl_create_partitions *cp = &ev->u.parts;
    const struct cn_image_topic *t = cn_image_topic_find(img, cp->name);
    if (!t) {
        ctl_answer_error(acts, ev, KAFKA_UNKNOWN_TOPIC_OR_PARTITION, NULL);
        return false;
    }
    if (cp->count < t->nparts) {
        ctl_answer_error(acts, ev, KAFKA_INVALID_PARTITIONS,
                         "Topic currently has %d partitions, which is higher "
                         "than the requested %d.",
                         t->nparts, cp->count);
        return false;
    }
    if (cp->count == t->nparts) {
        ctl_answer_error(acts, ev, KAFKA_INVALID_PARTITIONS,
                         "Topic already has %d partitions.", t->nparts);
        return false;
    }
    int32_t add = cp->count - t->nparts;
    if (cp->assign && cp->nassign != add) {
        ctl_answer_error(acts, ev, KAFKA_INVALID_REPLICA_ASSIGNMENT,
                         "Attempted to add %d additional partition(s), but "
                         "only %d assignment(s) were specified.",
                         add, cp->nassign);
        return false;
    }
    struct recs r = {.a = &acts->arena};
    struct cn_elect_usable u = ctl_usable(img, r.a, -1, -1);
    int32_t rf = t->nparts > 0 ? t->parts[0].nreplicas : 1;
    if (!u.ids) {
        ctl_answer_error(acts, ev, KAFKA_UNKNOWN_SERVER_ERROR, NULL);
        return false;
    }
    int32_t *assign = cn_arena_calloc(r.a, (size_t)add * (size_t)rf,
                                      sizeof *assign);
    if (!assign) {
        ctl_answer_error(acts, ev, KAFKA_UNKNOWN_SERVER_ERROR, NULL);
        return false;
    }
    if (cp->assign) {
        /* As Kafka: a manual list may name fenced brokers as long as one
         * of its replicas can lead; the placer's rf check does not apply. */
        if (!check_new_assignment(ev, img, &u, rf, t->nparts, r.a, acts))
            return false;
        for (int32_t i = 0; i < add; i++)
            memcpy(assign + i * rf, cp->assign[i].ids,
                   (size_t)rf * sizeof *assign);
    } else {
        if (!rf_fits(ev, rf, img, &u, acts))
            return false;
        int32_t nb = (int32_t)u.n;
        /* Kafka continues the existing pattern from partition 0's
         * leader. */
        int32_t start = -1;
        for (int32_t i = 0; t->nparts > 0 && i < nb; i++)
            if (u.ids[i] >= t->parts[0].replicas[0]) {
                start = i;
                break;
            }
        if (start < 0)
            start = (int32_t)(ctl_rand(c) % (uint64_t)nb);
        cn_ctl_assign(u.ids, nb, t->nparts, add, rf, start, start, assign);
    }
    if (cp->validate_only) {
        struct cn_ctl_answer *ans = ctl_push_answer(acts, ev, 0);
        if (ans) {
            ans->u.topic.id = t->id;
            ans->u.topic.nparts = cp->count;
            ans->u.topic.rf = (int16_t)rf;
        }
        return false;
    }
    for (int32_t i = 0; i < add; i++)
        if (!add_partition(&r, &t->id, t->nparts + i, assign + i * rf, rf,
                           &u)) {
            ctl_answer_error(acts, ev, KAFKA_UNKNOWN_SERVER_ERROR, NULL);
            return false;
        }
    ctl_propose(c, acts, &r, FLIGHT_REQ, req);
    c->flight.done.u.topic.id = t->id;
    c->flight.done.u.topic.nparts = cp->count;
    c->flight.done.u.topic.rf = (int16_t)rf;
    return true;
}

static bool kv_has(const struct cn_ctl_alter_configs *ac, const char *name)
{
    for (size_t i = 0; i < ac->nconfigs; i++)
        if (cn_bytes_eq_str(ac->configs[i].name, name))
            return true;
    return false;
}

static bool add_config(struct recs *r, struct cn_bytes topic,
                       struct cn_bytes name, struct cn_bytes value)
{
    struct cn_mrec *m = ctl_rec_add(r, CN_MREC_CONFIG);
    if (!m)
        return false;
    cn_config_record_init(&m->u.config);
    m->u.config.resource_type = TOPIC_RESOURCE;
    m->u.config.resource_name = topic;
    m->u.config.name = name;
    m->u.config.value = value;
    return true;
}

bool ctl_decide_alter_configs(struct cn_ctl *c, const struct cn_image *img,
                              struct qreq *req, struct cn_ctl_actions *acts)
{
    const struct cn_ctl_event *ev = &req->ev;
    const struct cn_ctl_alter_configs *ac = &ev->u.alter;
    const struct cn_image_topic *t = cn_image_topic_find(img, ac->name);
    if (!t) {
        ctl_answer_error(acts, ev, KAFKA_UNKNOWN_TOPIC_OR_PARTITION,
                         "Topic '%.*s' does not exist.", (int)ac->name.len,
                         (const char *)ac->name.ptr);
        return false;
    }
    if (ac->validate_only) {
        ctl_push_answer(acts, ev, 0);
        return false;
    }
    /* Only the difference is proposed: an unchanged key would still be a
     * record every broker applies and every snapshot replays. */
    struct recs r = {.a = &acts->arena};
    for (size_t i = 0; i < ac->nconfigs; i++) {
        const struct cn_ctl_kv *kv = &ac->configs[i];
        char name[256];
        if (kv->name.len <= 0 || (size_t)kv->name.len >= sizeof name ||
            cn_bytes_is_null(kv->value)) {
            ctl_answer_error(acts, ev, KAFKA_INVALID_CONFIG,
                             "Invalid config name or value.");
            return false;
        }
        memcpy(name, kv->name.ptr, (size_t)kv->name.len);
        name[kv->name.len] = '\0';
        const char *cur = cn_image_topic_config(t, name);
        if (cur && cn_bytes_eq_str(kv->value, cur))
            continue;
        if (!add_config(&r, ac->name, kv->name, kv->value))
            goto oom;
    }
    for (size_t i = 0; i < t->nconfigs; i++) {
        if (kv_has(ac, t->configs[i].name))
            continue;
        /* The image's strings change when the records apply; the
         * proposal keeps its own. */
        char *name = cn_arena_strdup(r.a, cn_bytes_str(t->configs[i].name));
        if (!name ||
            !add_config(&r, ac->name, cn_bytes_str(name), CN_BYTES_NULL))
            goto oom;
    }
    if (r.oom)
        goto oom;
    if (r.n == 0) {
        ctl_push_answer(acts, ev, 0);
        return false;
    }
    ctl_propose(c, acts, &r, FLIGHT_REQ, req);
    c->flight.done.u.topic.id = t->id;
    return true;
oom:
    ctl_answer_error(acts, ev, KAFKA_UNKNOWN_SERVER_ERROR, NULL);
    return false;
}
