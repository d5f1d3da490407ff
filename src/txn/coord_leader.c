/*
 * coord_leader.c - what partition leaders ask of the coordinator
 * (KIP-890): AddPartitionsToTxn v4-5 (batched; VerifyOnly through the
 * queries), the TV2 add on the produce path, and cn_txn_verify.  Keeping
 * them apart from the client APIs keeps the broker-to-broker rules (which
 * error codes, when an add is implicit) in one place.
 */
#include <string.h>

#include "proto/kerr.h"
#include "txn/coord_int.h"

int cn_tc_build_add(const struct txn_entry *e, const struct cn_txn_tp *tps,
                    size_t n, int64_t wall_ms, struct cn_txn_meta *next,
                    bool *changed)
{
    cn_txn_meta_init(next);
    int rc = cn_txn_meta_copy(next, &e->meta);
    bool open = e->meta.state == CN_TXN_ONGOING;
    *changed = !open;
    if (!rc && !open)
        cn_txn_meta_clear_partitions(next);
    /* A second add of a partition is a no-op that leaves the count. */
    for (size_t i = 0; i < n && !rc; i++) {
        size_t before = next->npartitions;
        rc = cn_txn_meta_add_partition(next, tps[i].topic, tps[i].partition);
        *changed |= next->npartitions != before;
    }
    if (rc) {
        cn_txn_meta_fini(next);
        return rc;
    }
    if (!open)
        next->txn_start_ms = wall_ms;
    next->state = CN_TXN_ONGOING;
    next->last_update_ms = wall_ms;
    return 0;
}

void cn_tc_add_write(struct txn_ctx *x, struct txn_entry *e,
                     const struct cn_txn_request *rq, int client_tv)
{
    if (rq->has_unknown) {
        /* Nothing is added when any partition is bad. */
        cn_tc_answer(x, rq, KAFKA_OPERATION_NOT_ATTEMPTED, -1, -1);
        return;
    }
    struct cn_txn_meta next;
    bool changed = false;
    if (cn_tc_build_add(e, rq->tps, rq->ntps, x->now->wall_ms, &next,
                        &changed) != 0) {
        cn_tc_answer(x, rq, KAFKA_COORDINATOR_NOT_AVAILABLE, -1, -1);
        return;
    }
    if (!changed) {
        cn_txn_meta_fini(&next);
        cn_tc_answer(x, rq, KAFKA_NONE, -1, -1);
        return;
    }
    if (client_tv >= 0)
        next.client_tv = (int8_t)client_tv;
    cn_tc_write(x, e, &next, THEN_ANSWER, rq, CN_TXN_WRITE_CHANGE);
}

/* ---- AddPartitionsToTxn v4-5: batched, from a partition leader --------- */

/* The producer check of a batched transaction; *out set with NONE. */
static int16_t check_batched(const struct cn_txn_coord *c, const char *id,
                             int64_t pid, int16_t epoch,
                             const struct txn_entry **out)
{
    const struct txn_entry *e = cn_tc_entry_find(c, id);
    if (!e || !cn_tc_part_led(c, e->part) || e->meta.state == CN_TXN_DEAD ||
        e->meta.producer_id != pid)
        return KAFKA_INVALID_PRODUCER_ID_MAPPING;
    if (e->meta.producer_epoch != epoch)
        return KAFKA_PRODUCER_FENCED;
    if (cn_tc_entry_waits(e))
        return KAFKA_CONCURRENT_TRANSACTIONS;
    *out = e;
    return KAFKA_NONE;
}

int16_t cn_txn_check_batched(const struct cn_txn_coord *c, const char *id,
                             int64_t producer_id, int16_t producer_epoch)
{
    const struct txn_entry *e = NULL;
    return check_batched(c, id, producer_id, producer_epoch, &e);
}

/* One transaction of the batch: added (the write answers later), or
 * refused.  It never parks: a broker asking retries. */
void cn_tc_add_batched(struct txn_ctx *x, const struct cn_txn_request *rq)
{
    const struct txn_entry *ce = NULL;
    int16_t kerr = check_batched(x->c, rq->transactional_id, rq->producer_id,
                                 rq->producer_epoch, &ce);
    if (kerr) {
        cn_tc_answer(x, rq, kerr, -1, -1);
        return;
    }
    /* v5 is what a broker sends for a TV2 client's produce. */
    cn_tc_add_write(x, (struct txn_entry *)ce, rq,
                    rq->api_version >= 5 ? 2 : -1);
}

/* ---- TV2: the partition leader adds the partition (produce path) ------ */

/* Not taken (a new request goes on at once), or, for one that was taken
 * earlier, answered with err. */
static void produce_not_added(struct txn_ctx *x,
                              const struct cn_txn_request *rq, bool resumed,
                              int16_t err)
{
    if (resumed)
        cn_tc_answer(x, rq, err, -1, -1);
}

/* The entry a PRODUCE_ADD would add rq's partitions to, or NULL when
 * nothing is added (it goes on at once). */
static struct txn_entry *produce_entry(const struct cn_txn_coord *c,
                                       const struct cn_txn_request *rq)
{
    if (!cn_tc_tv2_on(c) || rq->ntps == 0)
        return NULL;
    struct txn_entry *e = cn_tc_entry_by_pid(c, rq->producer_id);
    /* Only at the current epoch (an older one is fenced by the
     * verification), and for Produce v12 or a producer already seen using
     * TV2 in this instance. */
    if (!e || !cn_tc_part_led(c, e->part) || e->meta.state == CN_TXN_DEAD ||
        rq->producer_epoch != e->meta.producer_epoch ||
        (!rq->produce_v12 && e->meta.client_tv != 2))
        return NULL;
    if (e->meta.state != CN_TXN_ONGOING)
        return e;
    for (size_t i = 0; i < rq->ntps; i++)
        if (!cn_txn_meta_has_partition(&e->meta, rq->tps[i].topic,
                                       rq->tps[i].partition))
            return e;
    return NULL;
}

bool cn_txn_produce_adds(const struct cn_txn_coord *c,
                         const struct cn_txn_request *rq)
{
    return produce_entry(c, rq) != NULL;
}

void cn_tc_produce_add(struct txn_ctx *x, const struct cn_txn_request *rq,
                       bool resumed, bool late)
{
    struct txn_entry *e = produce_entry(x->c, rq);
    if (!e) {
        produce_not_added(x, rq, resumed, KAFKA_NONE);
        return;
    }
    if (cn_tc_entry_waits(e)) {
        /* Waited long enough: the produce goes on unadded, and the
         * verification answers it. */
        if (late) {
            produce_not_added(x, rq, resumed, KAFKA_CONCURRENT_TRANSACTIONS);
            return;
        }
        if (!resumed && !cn_tc_take_produce(x))
            return; /* not taken: goes on unadded */
        if (!cn_tc_park(x, rq, e, PARK_BUSY))
            cn_tc_answer(x, rq, KAFKA_CONCURRENT_TRANSACTIONS, -1, -1);
        return;
    }
    struct cn_txn_meta next;
    bool changed = false;
    if (cn_tc_build_add(e, rq->tps, rq->ntps, x->now->wall_ms, &next,
                        &changed) != 0) {
        produce_not_added(x, rq, resumed, KAFKA_COORDINATOR_NOT_AVAILABLE);
        return;
    }
    if (!changed) {
        cn_txn_meta_fini(&next);
        produce_not_added(x, rq, resumed, KAFKA_NONE);
        return;
    }
    next.client_tv = 2;
    if (!resumed && !cn_tc_take_produce(x)) {
        cn_txn_meta_fini(&next);
        return; /* not taken: goes on unadded */
    }
    cn_tc_write(x, e, &next, THEN_ANSWER, rq, CN_TXN_WRITE_CHANGE);
}

/* ---- partition leaders asking (KIP-890 part 1) -------------------------- */

int16_t cn_txn_verify(const struct cn_txn_coord *c, const char *id,
                      int64_t producer_id, int16_t producer_epoch,
                      const char *topic, int32_t partition)
{
    if (!c->cfg.verification_enable)
        return KAFKA_NONE;
    const struct txn_entry *e = NULL;
    if (id && id[0]) {
        e = cn_tc_entry_find(c, id);
        if (e && !cn_tc_part_led(c, e->part))
            e = NULL;
        if (!e || e->meta.producer_id != producer_id)
            return KAFKA_INVALID_PRODUCER_ID_MAPPING;
    } else {
        e = cn_tc_entry_by_pid(c, producer_id);
        if (!e || !cn_tc_part_led(c, e->part))
            return KAFKA_INVALID_TXN_STATE;
    }
    /* Kafka checks the epoch next: any other epoch is fenced (its
     * coordinator's PRODUCER_FENCED, which the leader passes on as
     * INVALID_PRODUCER_EPOCH). */
    if (producer_epoch != e->meta.producer_epoch)
        return KAFKA_INVALID_PRODUCER_EPOCH;
    if (e->meta.state != CN_TXN_ONGOING ||
        !cn_txn_meta_has_partition(&e->meta, topic, partition))
        return KAFKA_INVALID_TXN_STATE;
    return KAFKA_NONE;
}
