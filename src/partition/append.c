/*
 * append.c - the one write path to a partition (see partition.h): the
 * origin's checks, then append, roll snapshot, producer-state update and
 * the group-commit hand-off, for every batch of every origin.
 */
#include <errno.h>
#include <string.h>

#include "base/err.h"
#include "partition/epochs.h"
#include "partition/partition.h"
#include "proto/kerr.h"

/* What the partition's producer state says about a client's batch, as a
 * Kafka error; *dup set (with KAFKA_NONE) when it was appended before. */
static int16_t check_client(struct cn_partition *p,
                            const struct cn_part_append *a,
                            const struct cn_batch_hdr *hdr, bool *dup,
                            int64_t *dup_offset)
{
    *dup = false;
    if (!cn_batch_has_producer_id(hdr))
        return KAFKA_NONE;
    struct cn_pentry_info pe;
    bool open = cn_pstate_get(p->pstate, hdr->producer_id, &pe) &&
                pe.txn_first_offset >= 0 && pe.epoch == hdr->producer_epoch;
    /* A transactional batch that is not part of this epoch's open
     * transaction here must be part of one the coordinator holds Ongoing
     * (KIP-890 part 1).  Kafka asks before it looks at epochs and
     * sequences, so its answer wins. */
    if (!open && cn_batch_is_transactional(hdr) && a->verify) {
        int16_t kerr = a->verify(a->arg, hdr->producer_id,
                                 hdr->producer_epoch);
        if (kerr)
            return kerr;
    }
    switch (cn_pstate_check(p->pstate, hdr, dup_offset)) {
    case CN_PCHECK_APPEND: break;
    case CN_PCHECK_DUPLICATE:
        if (a->allow_duplicate)
            break;
        *dup = true;
        return KAFKA_NONE;
    case CN_PCHECK_FENCED:
        /* Since Kafka 2.7 (KIP-588) an old epoch on produce is
         * INVALID_PRODUCER_EPOCH at every version; PRODUCER_FENCED is for
         * the coordinator's APIs. */
        return KAFKA_INVALID_PRODUCER_EPOCH;
    case CN_PCHECK_OUT_OF_ORDER:
    default: return KAFKA_OUT_OF_ORDER_SEQUENCE_NUMBER;
    }
    /* A plain batch from a producer with an open transaction would land
     * inside that transaction's range without belonging to it. */
    if (!cn_batch_is_transactional(hdr))
        return open ? KAFKA_INVALID_TXN_STATE : KAFKA_NONE;
    return KAFKA_NONE;
}

/* A marker from an older epoch than the partition has seen is a zombie
 * coordinator's or a stale operator's (as Kafka). */
static int16_t check_operator(struct cn_partition *p,
                              const struct cn_batch_hdr *hdr)
{
    struct cn_pentry_info info;
    if (cn_pstate_get(p->pstate, hdr->producer_id, &info) &&
        hdr->producer_epoch < info.epoch)
        return KAFKA_INVALID_PRODUCER_EPOCH;
    return KAFKA_NONE;
}

/* A marker from a coordinator older than the last one that wrote this
 * producer's marker here is a deposed coordinator's (Kafka's
 * ProducerStateManager: TRANSACTION_COORDINATOR_FENCED).  Coordinator
 * epochs are __transaction_state leader epochs, so they only grow. */
static int16_t check_coordinator(struct cn_partition *p, const uint8_t *batch,
                                 size_t len, const struct cn_batch_hdr *hdr)
{
    struct cn_pentry_info info;
    int type = -1;
    int32_t coord_epoch = -1;
    if (!cn_batch_is_control(hdr) ||
        cn_batch_marker(batch, len, &type, &coord_epoch) != 0)
        return KAFKA_NONE;
    if (cn_pstate_get(p->pstate, hdr->producer_id, &info) &&
        info.coordinator_epoch > coord_epoch)
        return KAFKA_TRANSACTION_COORDINATOR_FENCED;
    return KAFKA_NONE;
}

/* A follower's batch keeps its leader's offsets, which must go on from
 * where its log (and the batches before it in the request) end. */
static int16_t check_replica(const struct cn_batch_hdr *hdr, int64_t *next)
{
    if (hdr->base_offset < *next)
        return KAFKA_OFFSET_OUT_OF_RANGE;
    *next = cn_batch_last_offset(hdr) + 1;
    return KAFKA_NONE;
}

/* The origin's checks over every batch, before anything is written. */
static int16_t check_all(struct cn_partition *p, struct cn_part_append *a)
{
    const uint8_t *pos = a->batches, *end = a->batches + a->len;
    int64_t next = cn_log_end_offset(p->log);
    while (pos < end) {
        struct cn_batch_hdr hdr;
        if (cn_batch_hdr_parse(pos, (size_t)(end - pos), &hdr) != 0)
            return KAFKA_CORRUPT_MESSAGE;
        int16_t kerr = KAFKA_NONE;
        bool dup = false;
        int64_t dup_offset = -1;
        if (a->origin == CN_PART_CLIENT)
            kerr = check_client(p, a, &hdr, &dup, &dup_offset);
        else if (a->origin == CN_PART_OPERATOR)
            kerr = check_operator(p, &hdr);
        else if (a->origin == CN_PART_COORDINATOR)
            kerr = check_coordinator(p, pos, cn_batch_size(&hdr), &hdr);
        else if (a->origin == CN_PART_REPLICA)
            kerr = check_replica(&hdr, &next);
        if (kerr)
            return kerr;
        if (dup) {
            a->duplicate = true;
            a->base_offset = dup_offset;
            return KAFKA_NONE;
        }
        pos += cn_batch_size(&hdr);
    }
    return KAFKA_NONE;
}

/* A refusal of this write, not a failing disk. */
static bool write_refused(int err)
{
    return err == CN_ENOMEM || err == CN_EINVAL || err == CN_ETOOBIG ||
           err == CN_ERANGE;
}

/* Appends one batch and keeps the derived state in step with it. */
static int append_one(struct cn_partition *p, const struct cn_part_env *env,
                      struct cn_part_append *a, uint8_t *batch, size_t len)
{
    bool replica = a->origin == CN_PART_REPLICA;
    /* The epoch of the leader that wrote it, which followers copy: how a
     * follower later finds where its log and a new leader's diverge. */
    int32_t epoch = p->leader_epoch < 0 ? 0 : p->leader_epoch;
    if (!replica)
        cn_batch_set_leader_epoch(batch, epoch);
    if (!replica && a->append_time >= 0)
        cn_batch_set_log_append_time(batch, len, a->append_time);
    int64_t base;
    int err;
    if (replica) {
        struct cn_batch_hdr h;
        err = cn_batch_hdr_parse(batch, len, &h) != 0 ? CN_EINVAL : 0;
        if (!err)
            err = cn_log_append_at(p->log, batch, len);
        base = err ? -1 : h.base_offset;
    } else {
        err = cn_log_append(p->log, batch, len, &base);
    }
    if (err) {
        if (err != -ENOSPC && !write_refused(err))
            env->dir_failed(env->ctx, a->what, err);
        return err;
    }
    if (a->base_offset < 0)
        a->base_offset = base;
    /* Roll first: a snapshot taken at the new segment's base must not
     * include the batch that starts it. */
    cn_partition_check_roll(p, env);
    struct cn_batch_hdr hdr;
    if (cn_batch_hdr_parse(batch, len, &hdr) != 0)
        return 0;
    /* The first batch of an epoch the cache has not seen starts it. */
    if (p->epochs && hdr.leader_epoch > cn_epochs_latest(p->epochs)) {
        err = cn_epochs_assign(p->epochs, hdr.leader_epoch, base);
        if (err) {
            /* The batch is in the log; a stale checkpoint would answer
             * OffsetsForLeaderEpoch wrongly after a restart. */
            env->dir_failed(env->ctx, "a leader-epoch checkpoint write", err);
            return err;
        }
    }
    err = cn_partition_record_batch(p, batch, len, &hdr);
    if (err) {
        /* The log has the batch and the producer state does not: only a
         * restart's replay puts them back in step. */
        env->dir_failed(env->ctx, "a producer-state update", err);
        return err;
    }
    return 0;
}

int cn_part_append(struct cn_partition *p, const struct cn_part_env *env,
                   struct cn_part_append *a)
{
    a->err = 0;
    a->duplicate = false;
    a->base_offset = -1;
    a->kerr = check_all(p, a);
    if (a->kerr)
        return -1;
    if (a->duplicate) {
        /* The original may not be synced yet, so a waiting answer still
         * waits for the next sync round. */
        if (!a->caller_syncs)
            env->appended(env->ctx, p);
        return 0;
    }
    if (a->prepare && a->origin != CN_PART_REPLICA) {
        a->kerr = a->prepare(a->arg, a);
        if (a->kerr)
            return -1;
    }
    uint8_t *pos = a->batches, *end = a->batches + a->len;
    while (pos < end && !a->err) {
        struct cn_batch_hdr hdr;
        if (cn_batch_hdr_parse(pos, (size_t)(end - pos), &hdr) != 0)
            break;
        size_t len = cn_batch_size(&hdr);
        a->err = append_one(p, env, a, pos, len);
        pos += len;
    }
    if (a->err == -ENOSPC)
        env->disk_full(env->ctx, p, true);
    else if (!a->err)
        env->disk_full(env->ctx, p, false);
    if (a->base_offset >= 0 && !a->caller_syncs)
        env->appended(env->ctx, p);
    return a->err;
}
