/*
 * hanging.c - operator aborts and the periodic hanging-transaction check;
 * see hanging.h.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/err.h"
#include "base/say.h"
#include "node/hanging.h"
#include "node/markers.h"
#include "proto/kerr.h"
#include "txn/txn_state.h"
#include "node/txn_exec.h"

struct cn_hanging {
    struct cn_broker *b;
    uv_timer_t timer;
};

int16_t cn_hanging_abort(struct cn_broker *b, struct cn_partition *p,
                         int64_t producer_id, int16_t producer_epoch,
                         int32_t coordinator_epoch,
                         void (*done)(struct cn_broker *b, void *arg,
                                      int16_t kerr),
                         void *arg, bool *by_coordinator)
{
    int16_t err = cn_txn_exec_operator_abort(b, producer_id, p->topic->name,
                                             p->index, by_coordinator);
    if (err)
        return err;
    if (*by_coordinator) {
        if (done)
            done(b, arg, KAFKA_NONE);
        return KAFKA_NONE;
    }
    return cn_marker_write_replicated(b, p, CN_PART_OPERATOR, producer_id,
                                      producer_epoch, false, coordinator_epoch,
                                      done, arg);
}

/* ---- the periodic check ------------------------------------------------ */

struct suspect {
    struct cn_partition *p;
    int64_t producer_id;
    int64_t first_offset;
    int64_t start_ms;
};

struct scan {
    struct cn_broker *b;
    int64_t now_ms;
    int64_t threshold_ms;   /* open longer than this: a suspect */
    struct cn_partition *p; /* partition being scanned */
    struct suspect *v;      /* suspects found */
    size_t n, cap;
    bool nomem;
};

static int scan_open(void *arg, int64_t producer_id, int64_t first_offset,
                     int64_t start_ms)
{
    struct scan *s = arg;

    if (s->now_ms - start_ms <= s->threshold_ms)
        return 0;
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 16;
        struct suspect *v = realloc(s->v, cap * sizeof *v);
        if (!v) {
            s->nomem = true;
            return 1;
        }
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = (struct suspect){s->p, producer_id, first_offset, start_ms};
    return 0;
}

static void scan_topic(struct cn_topic *t, void *arg)
{
    struct scan *s = arg;

    for (int32_t i = 0; i < t->partition_count && !s->nomem; i++) {
        s->p = t->partitions[i];
        /* A follower's copy is its leader's to judge (and to abort). */
        if (!s->p || !cn_partition_led(s->b, s->p) ||
            cn_pstate_open_count(s->p->pstate) == 0)
            continue;
        cn_pstate_foreach_open(s->p->pstate, scan_open, s);
    }
}

static bool live_state(enum cn_txn_state st)
{
    return st == CN_TXN_ONGOING || st == CN_TXN_PREPARE_COMMIT ||
           st == CN_TXN_PREPARE_ABORT || st == CN_TXN_PREPARE_EPOCH_FENCE;
}

/* Why the coordinator will not close it, in words for the log. */
static void coord_words(const struct cn_txn_meta *v, bool has_partition,
                        bool cluster, char *out, size_t len)
{
    if (!v && cluster)
        snprintf(out, len,
                 "unknown to this broker's coordinator (another "
                 "broker may coordinate it)");
    else if (!v)
        snprintf(out, len, "unknown to the coordinator");
    else if (live_state(v->state) && !has_partition)
        snprintf(out, len,
                 "coordinator has transactional id '%s' %s at epoch %d "
                 "without this partition",
                 v->transactional_id, cn_txn_state_name(v->state),
                 v->producer_epoch);
    else
        snprintf(out, len,
                 "coordinator has transactional id '%s' %s at epoch %d",
                 v->transactional_id, cn_txn_state_name(v->state),
                 v->producer_epoch);
}

int cn_hanging_check_now(struct cn_broker *b, bool auto_abort)
{
    const struct cn_config *cfg = b->cfg;
    struct scan s;
    int found = 0;

    if (b->stopping || b->log_dir_offline)
        return 0;
    memset(&s, 0, sizeof s);
    s.b = b;
    s.now_ms = cn_clock_wall_ms();
    s.threshold_ms = (int64_t)cfg->transaction_max_timeout_ms +
                     cfg->cairn_transaction_hanging_margin_ms;
    cn_topics_foreach(b, scan_topic, &s);
    if (s.nomem)
        CN_WARN("hanging-transaction check: out of memory; only %zu open "
                "transactions were looked at",
                s.n);
    /* Acting only now: an abort changes the open lists scanned above. */
    const struct cn_txn_coord *c = cn_txn_exec_coord(b);
    for (size_t i = 0; i < s.n; i++) {
        const struct suspect *x = &s.v[i];
        struct cn_partition *p = x->p;
        struct cn_pentry_info info;
        bool has_partition, by_coord = false;
        char why[400];

        const struct cn_txn_meta *v = c ? cn_txn_find_pid(c, x->producer_id)
                                        : NULL;
        bool known = v != NULL;
        has_partition = v &&
                        cn_txn_meta_has_partition(v, p->topic->name, p->index);
        if (known && has_partition && live_state(v->state))
            continue; /* the coordinator will close it */
        if (!cn_pstate_get(p->pstate, x->producer_id, &info))
            continue;
        found++;
        coord_words(v, has_partition, b->cfg->cluster_mode, why, sizeof why);
        CN_WARN("hanging transaction on %s-%d: producer id %" PRId64
                " epoch %d%s%s%s, first offset %" PRId64 ", open %" PRId64
                " ms (threshold %" PRId64
                " ms), %s; read_committed readers are stuck at offset %" PRId64
                " (high watermark %" PRId64 "); see 'cairnctl txn "
                "find-hanging'",
                p->topic->name, p->index, x->producer_id, info.epoch,
                known ? ", transactional id '" : "",
                known ? v->transactional_id : "", known ? "'" : "",
                x->first_offset, s.now_ms - x->start_ms, s.threshold_ms, why,
                cn_partition_lso(p), p->high_watermark);
        if (!auto_abort)
            continue;
        /*
         * In a cluster only the producer's own coordinator can say the
         * transaction is dead, and this check asks the local one only: a
         * producer it does not know may belong to a transaction another
         * broker's coordinator is committing (its markers late while that
         * coordinator fails over), which an abort marker here would tear
         * apart.  Left to the operator (cairnctl txn find-hanging asks
         * every coordinator).
         */
        if (b->cfg->cluster_mode && !known) {
            CN_WARN("transaction.hanging.auto.abort: not aborting producer "
                    "id %" PRId64 " on %s-%d: its coordinator is not on "
                    "this broker",
                    x->producer_id, p->topic->name, p->index);
            continue;
        }
        int16_t err = cn_hanging_abort(b, p, x->producer_id, info.epoch,
                                       info.coordinator_epoch, NULL, NULL,
                                       &by_coord);
        CN_WARN("audit: transaction.hanging.auto.abort: aborting producer id "
                "%" PRId64 " epoch %d on %s-%d (first offset %" PRId64 "): %s",
                x->producer_id, info.epoch, p->topic->name, p->index,
                x->first_offset,
                err        ? cn_kerr_name(err)
                : by_coord ? "the coordinator aborts its transaction"
                           : "abort marker written");
    }
    free(s.v);
    if (found > 0)
        b->counters.hanging_found += (uint64_t)found;
    b->counters.hanging_now = (uint64_t)found;
    return found;
}

static void on_check(uv_timer_t *t)
{
    struct cn_hanging *h = t->data;

    cn_hanging_check_now(h->b, h->b->cfg->transaction_hanging_auto_abort);
}

int cn_hanging_start(struct cn_broker *b, struct cn_hanging **out)
{
    struct cn_hanging *h = calloc(1, sizeof *h);
    uint64_t every = (uint64_t)
                         b->cfg->cairn_transaction_hanging_check_interval_ms;

    if (!h)
        return CN_ENOMEM;
    h->b = b;
    uv_timer_init(b->loop, &h->timer);
    h->timer.data = h;
    uv_timer_start(&h->timer, on_check, every, every);
    *out = h;
    return 0;
}

static void on_closed(uv_handle_t *handle)
{
    free(handle->data);
}

void cn_hanging_stop(struct cn_hanging *h)
{
    if (!h)
        return;
    uv_timer_stop(&h->timer);
    uv_close((uv_handle_t *)&h->timer, on_closed);
}
