/*
 * isr.c - the leader's view of its followers (isr.h): follower fetch
 * state, the high watermark over the maximal ISR, ISR shrink and expand
 * decisions, AlterPartition answers.  Pure: no I/O, no clock.
 */
#include <assert.h>
#include <string.h>

#include "base/err.h"
#include "partition/isr.h"
#include "proto/kerr.h"

bool cn_isr_contains(const int32_t *ids, int32_t n, int32_t id)
{
    for (int32_t i = 0; i < n; i++)
        if (ids[i] == id)
            return true;
    return false;
}

static struct cn_isr_follower *find_follower(struct cn_isr *s, int32_t id)
{
    for (int32_t i = 0; i < s->nf; i++)
        if (s->f[i].id == id)
            return &s->f[i];
    return NULL;
}

static const struct cn_isr_follower *find_follower_c(const struct cn_isr *s,
                                                     int32_t id)
{
    for (int32_t i = 0; i < s->nf; i++)
        if (s->f[i].id == id)
            return &s->f[i];
    return NULL;
}

static bool has_duplicates(const int32_t *ids, int32_t n)
{
    for (int32_t i = 1; i < n; i++)
        if (cn_isr_contains(ids, i, ids[i]))
            return true;
    return false;
}

/* In the maximal ISR: committed, or added by the pending change (or one
 * to resend).  A member the change removes is still committed, so it
 * still counts. */
static bool in_maximal(const struct cn_isr *s, int32_t id)
{
    return cn_isr_contains(s->isr, s->nisr, id) ||
           ((s->pending || s->resend) &&
            cn_isr_contains(s->pending_isr, s->npending, id));
}

/* Replica.isCaughtUp: at the leader's LEO, or caught up recently enough. */
static bool caught_up(const struct cn_isr_follower *f, int64_t leader_leo,
                      int64_t now_ms, int64_t lag_max_ms)
{
    if (f->leo >= 0 && f->leo == leader_leo)
        return true;
    return f->last_caught_up_ms >= 0 &&
           now_ms - f->last_caught_up_ms <= lag_max_ms;
}

/* May the follower join the ISR (Partition.isReplicaIsrEligible in KRaft):
 * the image's broker epoch for it is unchecked (-1) or matches the one it
 * fetched with (or it fetched with -1); CN_ISR_INELIGIBLE never. */
static bool eligible(const struct cn_isr *s, const struct cn_isr_follower *f,
                     const int64_t *image_broker_epochs)
{
    int64_t img;

    if (!image_broker_epochs)
        return true;
    img = -1;
    for (int32_t i = 0; i < s->nreplicas; i++)
        if (s->replicas[i] == f->id)
            img = image_broker_epochs[i];
    if (img == CN_ISR_INELIGIBLE)
        return false;
    return img == -1 || f->broker_epoch == -1 || f->broker_epoch == img;
}

int cn_isr_reset(struct cn_isr *s, int32_t self, const int32_t *replicas,
                 int32_t nreplicas, const int32_t *isr, int32_t nisr,
                 int32_t leader_epoch, int32_t partition_epoch,
                 int64_t epoch_start_offset, int64_t hw, int64_t now_ms)
{
    struct cn_isr_follower nf[CN_ISR_MAX_REPLICAS];
    int32_t n = 0;
    bool new_leader, new_epoch;

    if (nreplicas < 1 || nreplicas > CN_ISR_MAX_REPLICAS || nisr < 0 ||
        nisr > nreplicas || has_duplicates(replicas, nreplicas) ||
        has_duplicates(isr, nisr) ||
        !cn_isr_contains(replicas, nreplicas, self))
        return CN_EINVAL;
    for (int32_t i = 0; i < nisr; i++)
        if (!cn_isr_contains(replicas, nreplicas, isr[i]))
            return CN_EINVAL;

    new_leader = !s->leading || s->self != self;
    if (!new_leader && (leader_epoch < s->leader_epoch ||
                        partition_epoch < s->partition_epoch))
        return 0; /* older than what we hold (makeLeader skips it too) */
    new_epoch = new_leader || leader_epoch != s->leader_epoch;

    for (int32_t i = 0; i < nreplicas; i++) {
        struct cn_isr_follower *old;
        bool in_isr = cn_isr_contains(isr, nisr, replicas[i]);

        if (replicas[i] == self)
            continue;
        old = new_leader ? NULL : find_follower(s, replicas[i]);
        if (old && !new_epoch) {
            nf[n++] = *old;
            continue;
        }
        nf[n] = (struct cn_isr_follower){
            .id = replicas[i],
            .broker_epoch = -1,
            .leo = -1,
            .last_caught_up_ms = in_isr ? now_ms : -1,
            .last_fetch_ms = -1,
            .last_fetch_leader_leo = -1,
        };
        if (old) {
            /* Re-elected without having followed anyone: the positions it
             * knows are still true, only the catch-up clock restarts from
             * this epoch's start (Replica.resetReplicaState). */
            nf[n].broker_epoch = old->broker_epoch;
            nf[n].leo = old->leo;
            nf[n].last_fetch_leader_leo = epoch_start_offset;
            nf[n].last_fetch_ms = in_isr ? now_ms : -1;
        }
        n++;
    }

    if (new_leader || new_epoch || partition_epoch > s->partition_epoch) {
        s->pending = false;
        s->resend = false;
        s->npending = 0;
    }
    if (new_epoch)
        s->epoch_start_offset = epoch_start_offset;
    if (new_leader || hw > s->hw)
        s->hw = hw;
    s->self = self;
    s->leader_epoch = leader_epoch;
    s->partition_epoch = partition_epoch;
    memmove(s->replicas, replicas, (size_t)nreplicas * sizeof *replicas);
    s->nreplicas = nreplicas;
    memmove(s->isr, isr, (size_t)nisr * sizeof *isr);
    s->nisr = nisr;
    memcpy(s->f, nf, (size_t)n * sizeof *nf);
    s->nf = n;
    s->leading = true;
    return 0;
}

void cn_isr_clear(struct cn_isr *s)
{
    memset(s, 0, sizeof *s);
}

int16_t cn_isr_on_fetch(struct cn_isr *s, int32_t replica_id,
                        int64_t broker_epoch, int64_t fetch_offset,
                        int64_t leader_leo, int64_t now_ms)
{
    struct cn_isr_follower *f = find_follower(s, replica_id);
    int64_t caught;

    if (!f)
        return KAFKA_UNKNOWN_LEADER_EPOCH;
    if (broker_epoch != -1 && f->broker_epoch > broker_epoch)
        return KAFKA_NOT_LEADER_OR_FOLLOWER;
    if (fetch_offset > leader_leo)
        return KAFKA_OFFSET_OUT_OF_RANGE;

    /* A follower that fetches at the leader's LEO is caught up now.  One
     * that reached the LEO the leader had at its previous fetch was
     * caught up then: under steady produce a fetch never sees the latest
     * LEO, yet such a follower is only one round trip behind. */
    caught = f->last_caught_up_ms;
    if (fetch_offset >= leader_leo) {
        if (now_ms > caught)
            caught = now_ms;
    } else if (f->last_fetch_leader_leo >= 0 &&
               fetch_offset >= f->last_fetch_leader_leo) {
        if (f->last_fetch_ms > caught)
            caught = f->last_fetch_ms;
    }
    f->last_caught_up_ms = caught;
    f->leo = fetch_offset;
    f->last_fetch_ms = now_ms;
    if (leader_leo > f->last_fetch_leader_leo)
        f->last_fetch_leader_leo = leader_leo;
    f->broker_epoch = broker_epoch;
    return 0;
}

static bool advance_hw(struct cn_isr *s, int64_t leader_end,
                       int64_t leader_leo, int64_t now_ms, int64_t lag_max_ms,
                       const int64_t *image_broker_epochs, bool wait_caught_up)
{
    int64_t hw = leader_end;

    for (int32_t i = 0; i < s->nf; i++) {
        const struct cn_isr_follower *f = &s->f[i];
        bool counts = in_maximal(s, f->id);

        if (!counts && wait_caught_up)
            counts = caught_up(f, leader_leo, now_ms, lag_max_ms) &&
                     eligible(s, f, image_broker_epochs);
        if (counts && f->leo < hw)
            hw = f->leo; /* -1 (unknown) holds it back */
    }
    if (hw <= s->hw)
        return false;
    s->hw = hw;
    return true;
}

bool cn_isr_advance_hw(struct cn_isr *s, int64_t leader_end)
{
    return advance_hw(s, leader_end, 0, 0, 0, NULL, false);
}

bool cn_isr_advance_hw_at(struct cn_isr *s, int64_t leader_end,
                          int64_t leader_leo, int64_t now_ms,
                          int64_t lag_max_ms,
                          const int64_t *image_broker_epochs)
{
    return advance_hw(s, leader_end, leader_leo, now_ms, lag_max_ms,
                      image_broker_epochs, true);
}

bool cn_isr_want_change_img(const struct cn_isr *s, int64_t now_ms,
                            int64_t lag_max_ms, int64_t leader_leo,
                            const int64_t *image_broker_epochs,
                            int32_t *out_isr, int32_t *out_n)
{
    int32_t n = 0;
    bool shrink = false;

    if (!s->leading || s->pending)
        return false;
    if (s->resend) {
        memcpy(out_isr, s->pending_isr, (size_t)s->npending * sizeof *out_isr);
        *out_n = s->npending;
        return true;
    }

    /* Shrink (getOutOfSyncReplicas): the leader stays whatever. */
    for (int32_t i = 0; i < s->nisr; i++) {
        const struct cn_isr_follower *f;

        if (s->isr[i] != s->self) {
            f = find_follower_c(s, s->isr[i]);
            if (!f || !caught_up(f, leader_leo, now_ms, lag_max_ms)) {
                shrink = true;
                continue;
            }
        }
        out_isr[n++] = s->isr[i];
    }
    if (shrink) {
        *out_n = n;
        return true;
    }

    /* Expand (maybeExpandIsr), in replicas order after the current ISR. */
    for (int32_t i = 0; i < s->nf; i++) {
        const struct cn_isr_follower *f = &s->f[i];

        if (cn_isr_contains(s->isr, s->nisr, f->id))
            continue;
        if (f->leo < 0 || f->leo < s->hw || f->leo < s->epoch_start_offset)
            continue;
        if (!eligible(s, f, image_broker_epochs))
            continue;
        out_isr[n++] = f->id;
    }
    if (n == s->nisr)
        return false;
    *out_n = n;
    return true;
}

bool cn_isr_want_change(const struct cn_isr *s, int64_t now_ms,
                        int64_t lag_max_ms, int64_t leader_leo,
                        int32_t *out_isr, int32_t *out_n)
{
    return cn_isr_want_change_img(s, now_ms, lag_max_ms, leader_leo, NULL,
                                  out_isr, out_n);
}

void cn_isr_change_sent(struct cn_isr *s, const int32_t *isr, int32_t n)
{
    assert(n >= 0 && n <= CN_ISR_MAX_REPLICAS);
    memmove(s->pending_isr, isr, (size_t)n * sizeof *isr);
    s->npending = n;
    s->pending = true;
    s->resend = false;
}

void cn_isr_change_done(struct cn_isr *s, int16_t kerr, const int32_t *isr,
                        int32_t n, int32_t leader_epoch,
                        int32_t partition_epoch)
{
    if (!s->pending)
        return;
    switch (kerr) {
    case KAFKA_NONE:
        /* Stale, or more members than can be: wait for the image. */
        if (leader_epoch != s->leader_epoch ||
            partition_epoch < s->partition_epoch || n < 0 ||
            n > CN_ISR_MAX_REPLICAS)
            return;
        memmove(s->isr, isr, (size_t)n * sizeof *isr);
        s->nisr = n;
        s->partition_epoch = partition_epoch;
        s->pending = false;
        s->resend = false;
        return;
    case KAFKA_OPERATION_NOT_ATTEMPTED:
    case KAFKA_INELIGIBLE_REPLICA:
        /* The controller says it applied nothing: safe to forget. */
        s->pending = false;
        s->resend = false;
        return;
    case KAFKA_FENCED_LEADER_EPOCH:
    case KAFKA_INVALID_UPDATE_VERSION:
    case KAFKA_NOT_LEADER_OR_FOLLOWER:
    case KAFKA_UNKNOWN_TOPIC_OR_PARTITION:
    case KAFKA_UNKNOWN_TOPIC_ID:
    case KAFKA_INVALID_REQUEST:
    case KAFKA_NEW_LEADER_ELECTED:
        /* Our epochs are out of date.  Resending would fail the same way;
         * forgetting it could let the HW pass a member the controller may
         * have added (an earlier attempt may have been applied).  Stay
         * pending until the image resets us. */
        s->resend = false;
        return;
    default:
        /* Timeout, no controller, ...: the same proposal again. */
        s->pending = false;
        s->resend = true;
        return;
    }
}

int32_t cn_isr_maximal_size(const struct cn_isr *s)
{
    int32_t n = s->nisr;

    if (s->pending || s->resend)
        for (int32_t i = 0; i < s->npending; i++)
            if (!cn_isr_contains(s->isr, s->nisr, s->pending_isr[i]))
                n++;
    return n;
}

bool cn_isr_under_replicated(const struct cn_isr *s)
{
    return s->nisr < s->nreplicas;
}

bool cn_isr_below_min(const struct cn_isr *s, int32_t min_isr)
{
    return s->nisr < min_isr;
}

int64_t cn_isr_follower_lag(const struct cn_isr *s, int32_t id,
                            int64_t leader_leo)
{
    const struct cn_isr_follower *f = find_follower_c(s, id);

    if (!f)
        return -1;
    if (f->leo < 0)
        return leader_leo;
    return f->leo < leader_leo ? leader_leo - f->leo : 0;
}
