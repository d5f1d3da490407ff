/* test_isr.c - the leader's view of its followers (partition/isr.h) as
 * scripts of events with a fake clock: fetches move follower LEOs and
 * catch-up times, the high watermark follows the maximal ISR, shrink and
 * expand decisions, every kind of AlterPartition answer, image resets. */
#include <string.h>

#include "base/err.h"
#include "partition/isr.h"
#include "proto/kerr.h"
#include "unit.h"

#define LAG 30000 /* replica.lag.time.max.ms */
#define T0 1000   /* the fake clock's start, ms */

static const int32_t R3[] = {1, 2, 3};

/* Broker 1 leads {1,2,3} at leader epoch 5, partition epoch 10; the epoch
 * began at offset 100 and the HW is 100. */
static void lead(struct cn_isr *s, const int32_t *isr, int32_t nisr)
{
    memset(s, 0, sizeof *s);
    CHECK_EQ(cn_isr_reset(s, 1, R3, 3, isr, nisr, 5, 10, 100, 100, T0), 0);
}

static bool same(const int32_t *a, int32_t na, const int32_t *b, int32_t nb)
{
    return na == nb && memcmp(a, b, (size_t)na * sizeof *a) == 0;
}

#define CHECK_ISR(got, ngot, ...)                               \
    do {                                                        \
        static const int32_t want_[] = {__VA_ARGS__};           \
        CHECK(same(got, ngot, want_,                            \
                   (int32_t)(sizeof want_ / sizeof want_[0]))); \
    } while (0)

UNIT_TEST(hw_is_min_over_isr)
{
    struct cn_isr s;

    lead(&s, R3, 3);
    CHECK_EQ(cn_isr_on_fetch(&s, 2, 7, 150, 200, T0 + 10), 0);
    CHECK(!cn_isr_advance_hw(&s, 200)); /* 3 unknown: holds it */
    CHECK_EQ(s.hw, 100);
    CHECK_EQ(cn_isr_on_fetch(&s, 3, 7, 180, 200, T0 + 20), 0);
    CHECK(cn_isr_advance_hw(&s, 200));
    CHECK_EQ(s.hw, 150);
    /* The leader's own durable end can be the smallest. */
    CHECK_EQ(cn_isr_on_fetch(&s, 2, 7, 200, 200, T0 + 30), 0);
    CHECK(cn_isr_advance_hw(&s, 170));
    CHECK_EQ(s.hw, 170);
    CHECK(cn_isr_advance_hw(&s, 200));
    CHECK_EQ(s.hw, 180);
}

UNIT_TEST(hw_ignores_followers_outside_isr)
{
    static const int32_t isr[] = {1, 2};
    struct cn_isr s;

    lead(&s, isr, 2);
    CHECK_EQ(cn_isr_on_fetch(&s, 2, 7, 190, 200, T0), 0);
    CHECK_EQ(cn_isr_on_fetch(&s, 3, 7, 110, 200, T0), 0);
    CHECK(cn_isr_advance_hw(&s, 200));
    CHECK_EQ(s.hw, 190);
}

UNIT_TEST(hw_counts_pending_expand_and_pending_removal)
{
    static const int32_t isr12[] = {1, 2}, isr123[] = {1, 2, 3};
    struct cn_isr s;

    /* A pending expand: the new member counts before it is committed. */
    lead(&s, isr12, 2);
    CHECK_EQ(cn_isr_on_fetch(&s, 2, 7, 200, 200, T0), 0);
    CHECK_EQ(cn_isr_on_fetch(&s, 3, 7, 120, 200, T0), 0);
    cn_isr_change_sent(&s, isr123, 3);
    CHECK_EQ(cn_isr_maximal_size(&s), 3);
    CHECK(cn_isr_advance_hw(&s, 200));
    CHECK_EQ(s.hw, 120);

    /* A pending shrink: the member leaving counts until committed. */
    lead(&s, isr123, 3);
    CHECK_EQ(cn_isr_on_fetch(&s, 2, 7, 200, 200, T0), 0);
    CHECK_EQ(cn_isr_on_fetch(&s, 3, 7, 130, 200, T0), 0);
    cn_isr_change_sent(&s, isr12, 2);
    CHECK_EQ(cn_isr_maximal_size(&s), 3);
    CHECK(cn_isr_advance_hw(&s, 200));
    CHECK_EQ(s.hw, 130);
    cn_isr_change_done(&s, KAFKA_NONE, isr12, 2, 5, 11);
    CHECK(cn_isr_advance_hw(&s, 200));
    CHECK_EQ(s.hw, 200);
}

UNIT_TEST(hw_never_decreases)
{
    static const int32_t isr[] = {1, 2};
    struct cn_isr s;

    lead(&s, isr, 2);
    CHECK_EQ(cn_isr_on_fetch(&s, 2, 7, 160, 200, T0), 0);
    CHECK(cn_isr_advance_hw(&s, 200));
    CHECK_EQ(s.hw, 160);
    CHECK(!cn_isr_advance_hw(&s, 150)); /* leader end below the HW */
    CHECK_EQ(s.hw, 160);
    /* A pending expand adding a follower below the HW. */
    CHECK_EQ(cn_isr_on_fetch(&s, 3, 7, 120, 200, T0), 0);
    {
        static const int32_t isr123[] = {1, 2, 3};
        cn_isr_change_sent(&s, isr123, 3);
    }
    CHECK(!cn_isr_advance_hw(&s, 200));
    CHECK_EQ(s.hw, 160);
    /* An image still leading with an older HW. */
    CHECK_EQ(cn_isr_reset(&s, 1, R3, 3, isr, 2, 5, 11, 100, 90, T0), 0);
    CHECK_EQ(s.hw, 160);
}

UNIT_TEST(last_caught_up_rules)
{
    struct cn_isr s;
    struct cn_isr_follower *f;

    lead(&s, R3, 3);
    f = &s.f[0];
    CHECK_EQ(f->id, 2);
    CHECK_EQ(f->last_caught_up_ms, T0); /* grace: in the ISR at election */
    /* At the leader's LEO: caught up now. */
    CHECK_EQ(cn_isr_on_fetch(&s, 2, 7, 200, 200, 2000), 0);
    CHECK_EQ(f->last_caught_up_ms, 2000);
    /* Behind, but past the LEO of its previous fetch (200): caught up as
     * of that fetch (2000). */
    CHECK_EQ(cn_isr_on_fetch(&s, 2, 7, 250, 300, 3000), 0);
    CHECK_EQ(f->last_caught_up_ms, 2000);
    CHECK_EQ(cn_isr_on_fetch(&s, 2, 7, 300, 400, 4000), 0);
    CHECK_EQ(f->last_caught_up_ms, 3000);
    /* Behind the previous fetch's LEO (400): unchanged. */
    CHECK_EQ(cn_isr_on_fetch(&s, 2, 7, 350, 500, 5000), 0);
    CHECK_EQ(f->last_caught_up_ms, 3000);
    CHECK_EQ(f->leo, 350);
    CHECK_EQ(f->last_fetch_ms, 5000);
    CHECK_EQ(f->last_fetch_leader_leo, 500);
    CHECK_EQ(cn_isr_on_fetch(&s, 2, 7, 500, 500, 6000), 0);
    CHECK_EQ(f->last_caught_up_ms, 6000);
}

UNIT_TEST(shrink_after_lag_max_only)
{
    int32_t out[CN_ISR_MAX_REPLICAS], n = -1;
    struct cn_isr s;
    int64_t t;

    lead(&s, R3, 3);
    /* 2 keeps up; 3 never fetches. */
    for (t = T0; t <= T0 + LAG + 1; t += 1000)
        CHECK_EQ(cn_isr_on_fetch(&s, 2, 7, 200, 200, t), 0);
    CHECK(!cn_isr_want_change(&s, T0 + LAG, LAG, 200, out, &n));
    CHECK(cn_isr_want_change(&s, T0 + LAG + 1, LAG, 200, out, &n));
    CHECK_ISR(out, n, 1, 2);

    /* A slow follower: fetches all the time, never reaches the leader's
     * LEO of its previous fetch. */
    lead(&s, R3, 3);
    for (t = T0; t <= T0 + 2 * LAG; t += 1000) {
        CHECK_EQ(cn_isr_on_fetch(&s, 2, 7, 200 + t, 200 + t, t), 0);
        CHECK_EQ(cn_isr_on_fetch(&s, 3, 7, 100 + t / 2, 200 + t, t), 0);
    }
    CHECK(cn_isr_want_change(&s, T0 + 2 * LAG, LAG, 200 + T0 + 2 * LAG, out,
                             &n));
    CHECK_ISR(out, n, 1, 2);
}

UNIT_TEST(no_shrink_at_leader_leo)
{
    int32_t out[CN_ISR_MAX_REPLICAS], n = -1;
    struct cn_isr s;

    lead(&s, R3, 3);
    CHECK_EQ(cn_isr_on_fetch(&s, 2, 7, 200, 200, T0), 0);
    CHECK_EQ(cn_isr_on_fetch(&s, 3, 7, 200, 200, T0), 0);
    /* Nothing produced for long: both still at the leader's LEO. */
    CHECK(!cn_isr_want_change(&s, T0 + 10 * LAG, LAG, 200, out, &n));
    /* One record arrives: now they are out of sync. */
    CHECK(cn_isr_want_change(&s, T0 + 10 * LAG, LAG, 201, out, &n));
    CHECK_ISR(out, n, 1);
}

UNIT_TEST(leader_never_shrunk)
{
    static const int32_t isr[] = {2, 1, 3};
    int32_t out[CN_ISR_MAX_REPLICAS], n = -1;
    struct cn_isr s;

    lead(&s, isr, 3);
    CHECK(cn_isr_want_change(&s, T0 + LAG + 1, LAG, 200, out, &n));
    CHECK_ISR(out, n, 1);
}

UNIT_TEST(expand_past_hw_and_epoch_start)
{
    static const int32_t isr[] = {1, 2};
    int32_t out[CN_ISR_MAX_REPLICAS], n = -1;
    struct cn_isr s;

    /* The epoch began at 150, above the HW (100). */
    memset(&s, 0, sizeof s);
    CHECK_EQ(cn_isr_reset(&s, 1, R3, 3, isr, 2, 5, 10, 150, 100, T0), 0);
    CHECK_EQ(cn_isr_on_fetch(&s, 2, 7, 200, 200, T0), 0);
    CHECK(!cn_isr_want_change(&s, T0, LAG, 200, out, &n)); /* no 3 */
    CHECK_EQ(cn_isr_on_fetch(&s, 3, 7, 149, 200, T0), 0);
    CHECK(!cn_isr_want_change(&s, T0, LAG, 200, out, &n));
    CHECK_EQ(cn_isr_on_fetch(&s, 3, 7, 150, 200, T0), 0);
    CHECK(cn_isr_want_change(&s, T0, LAG, 200, out, &n));
    CHECK_ISR(out, n, 1, 2, 3);

    /* The HW (100) above the epoch start (50). */
    memset(&s, 0, sizeof s);
    CHECK_EQ(cn_isr_reset(&s, 1, R3, 3, isr, 2, 5, 10, 50, 100, T0), 0);
    CHECK_EQ(cn_isr_on_fetch(&s, 3, 7, 99, 200, T0), 0);
    CHECK(!cn_isr_want_change(&s, T0, LAG, 200, out, &n));
    CHECK_EQ(cn_isr_on_fetch(&s, 3, 7, 100, 200, T0), 0);
    CHECK(cn_isr_want_change(&s, T0, LAG, 200, out, &n));
    CHECK_ISR(out, n, 1, 2, 3);
}

UNIT_TEST(expand_checks_broker_epoch)
{
    static const int32_t isr[] = {1, 2};
    /* parallel to replicas {1, 2, 3} */
    static const int64_t img8[] = {-1, -1, 8}, img7[] = {-1, -1, 7},
                         any[] = {-1, -1, -1},
                         fenced[] = {-1, -1, CN_ISR_INELIGIBLE};
    int32_t out[CN_ISR_MAX_REPLICAS], n = -1;
    struct cn_isr s;

    lead(&s, isr, 2);
    CHECK_EQ(cn_isr_on_fetch(&s, 3, 7, 100, 200, T0), 0);
    CHECK(!cn_isr_want_change_img(&s, T0, LAG, 200, img8, out, &n));
    CHECK(!cn_isr_want_change_img(&s, T0, LAG, 200, fenced, out, &n));
    CHECK(cn_isr_want_change_img(&s, T0, LAG, 200, img7, out, &n));
    CHECK_ISR(out, n, 1, 2, 3);
    CHECK(cn_isr_want_change_img(&s, T0, LAG, 200, any, out, &n));
    CHECK(cn_isr_want_change(&s, T0, LAG, 200, out, &n));
    /* A fetch without a broker epoch is not checked (Kafka: -1). */
    CHECK_EQ(cn_isr_on_fetch(&s, 3, -1, 100, 200, T0), 0);
    CHECK(cn_isr_want_change_img(&s, T0, LAG, 200, img8, out, &n));
    CHECK(!cn_isr_want_change_img(&s, T0, LAG, 200, fenced, out, &n));
}

UNIT_TEST(shrink_before_expand)
{
    static const int32_t isr[] = {1, 2};
    static const int32_t r4[] = {1, 2, 3, 4};
    int32_t out[CN_ISR_MAX_REPLICAS], n = -1;
    struct cn_isr s;

    memset(&s, 0, sizeof s);
    CHECK_EQ(cn_isr_reset(&s, 1, r4, 4, isr, 2, 5, 10, 100, 100, T0), 0);
    CHECK_EQ(cn_isr_on_fetch(&s, 3, 7, 100, 100, T0), 0);
    CHECK_EQ(cn_isr_on_fetch(&s, 4, 7, 100, 100, T0), 0);
    CHECK(cn_isr_want_change(&s, T0, LAG, 100, out, &n));
    CHECK_ISR(out, n, 1, 2, 3, 4); /* both at once, replicas order */
    CHECK(cn_isr_want_change(&s, T0 + LAG + 1, LAG, 300, out, &n));
    CHECK_ISR(out, n, 1); /* 2 is out of sync: the shrink goes first */
}

UNIT_TEST(pending_blocks_new_proposals)
{
    static const int32_t isr12[] = {1, 2};
    int32_t out[CN_ISR_MAX_REPLICAS], n = -1;
    struct cn_isr s;

    lead(&s, R3, 3);
    CHECK_EQ(cn_isr_on_fetch(&s, 2, 7, 200, 200, T0 + LAG), 0);
    CHECK(cn_isr_want_change(&s, T0 + LAG + 1, LAG, 200, out, &n));
    cn_isr_change_sent(&s, out, n);
    CHECK(s.pending);
    /* 2 now also lags, but nothing new while the shrink is in flight. */
    CHECK(!cn_isr_want_change(&s, T0 + 3 * LAG, LAG, 300, out, &n));
    cn_isr_change_done(&s, KAFKA_NONE, isr12, 2, 5, 11);
    CHECK(!s.pending);
    CHECK(cn_isr_want_change(&s, T0 + 3 * LAG, LAG, 300, out, &n));
    CHECK_ISR(out, n, 1);
}

/* Leader with ISR {1,2}, follower 3 caught up, expand {1,2,3} sent. */
static void expand_sent(struct cn_isr *s)
{
    static const int32_t isr[] = {1, 2};
    int32_t out[CN_ISR_MAX_REPLICAS], n = -1;

    lead(s, isr, 2);
    CHECK_EQ(cn_isr_on_fetch(s, 2, 7, 200, 200, T0), 0);
    CHECK_EQ(cn_isr_on_fetch(s, 3, 7, 150, 200, T0), 0);
    CHECK(cn_isr_want_change(s, T0, LAG, 200, out, &n));
    CHECK_ISR(out, n, 1, 2, 3);
    cn_isr_change_sent(s, out, n);
    CHECK(!cn_isr_want_change(s, T0, LAG, 200, out, &n));
}

UNIT_TEST(answer_success)
{
    static const int32_t isr123[] = {1, 2, 3};
    struct cn_isr s;

    expand_sent(&s);
    cn_isr_change_done(&s, KAFKA_NONE, isr123, 3, 5, 11);
    CHECK(!s.pending);
    CHECK_ISR(s.isr, s.nisr, 1, 2, 3);
    CHECK_EQ(s.partition_epoch, 11);
    CHECK_EQ(s.leader_epoch, 5);
    /* The image that follows, at the same partition epoch, changes
     * nothing; one behind it is ignored. */
    {
        static const int32_t isr12[] = {1, 2};
        CHECK_EQ(cn_isr_reset(&s, 1, R3, 3, isr12, 2, 5, 10, 100, 100, T0), 0);
        CHECK_ISR(s.isr, s.nisr, 1, 2, 3);
        CHECK_EQ(s.partition_epoch, 11);
    }
}

UNIT_TEST(answer_stale_success_waits_for_image)
{
    static const int32_t isr123[] = {1, 2, 3};
    int32_t out[CN_ISR_MAX_REPLICAS], n = -1;
    struct cn_isr s;

    expand_sent(&s);
    cn_isr_change_done(&s, KAFKA_NONE, isr123, 3, 6, 11); /* other epoch */
    CHECK(s.pending);
    CHECK_ISR(s.isr, s.nisr, 1, 2);
    cn_isr_change_done(&s, KAFKA_NONE, isr123, 3, 5, 9); /* older */
    CHECK(s.pending);
    CHECK(!cn_isr_want_change(&s, T0, LAG, 200, out, &n));
}

UNIT_TEST(answer_not_applied_returns_to_committed)
{
    static const int16_t errs[] = {KAFKA_OPERATION_NOT_ATTEMPTED,
                                   KAFKA_INELIGIBLE_REPLICA};
    int32_t out[CN_ISR_MAX_REPLICAS], n = -1;
    struct cn_isr s;

    for (size_t i = 0; i < sizeof errs / sizeof errs[0]; i++) {
        expand_sent(&s);
        cn_isr_change_done(&s, errs[i], NULL, 0, -1, -1);
        CHECK(!s.pending);
        CHECK_ISR(s.isr, s.nisr, 1, 2);
        CHECK_EQ(cn_isr_maximal_size(&s), 2);
        CHECK(cn_isr_want_change(&s, T0, LAG, 200, out, &n));
    }
}

UNIT_TEST(answer_out_of_date_waits_for_image)
{
    static const int16_t errs[] = {KAFKA_FENCED_LEADER_EPOCH,
                                   KAFKA_INVALID_UPDATE_VERSION,
                                   KAFKA_NOT_LEADER_OR_FOLLOWER,
                                   KAFKA_UNKNOWN_TOPIC_OR_PARTITION,
                                   KAFKA_UNKNOWN_TOPIC_ID,
                                   KAFKA_INVALID_REQUEST,
                                   KAFKA_NEW_LEADER_ELECTED};
    static const int32_t isr123[] = {1, 2, 3};
    int32_t out[CN_ISR_MAX_REPLICAS], n = -1;
    struct cn_isr s;

    for (size_t i = 0; i < sizeof errs / sizeof errs[0]; i++) {
        expand_sent(&s);
        cn_isr_change_done(&s, errs[i], NULL, 0, -1, -1);
        CHECK(s.pending);
        CHECK(!cn_isr_want_change(&s, T0, LAG, 200, out, &n));
        /* The proposed member still holds the HW. */
        CHECK(cn_isr_advance_hw(&s, 200));
        CHECK_EQ(s.hw, 150);
        /* The image, at a newer partition epoch, settles it. */
        CHECK_EQ(cn_isr_reset(&s, 1, R3, 3, isr123, 3, 5, 11, 100, 100, T0),
                 0);
        CHECK(!s.pending);
        CHECK_ISR(s.isr, s.nisr, 1, 2, 3);
        /* A late answer then changes nothing. */
        cn_isr_change_done(&s, KAFKA_OPERATION_NOT_ATTEMPTED, NULL, 0, -1, -1);
        CHECK_ISR(s.isr, s.nisr, 1, 2, 3);
    }
}

UNIT_TEST(answer_retriable_resends_same)
{
    static const int16_t errs[] = {KAFKA_REQUEST_TIMED_OUT,
                                   KAFKA_NOT_CONTROLLER,
                                   KAFKA_UNKNOWN_SERVER_ERROR};
    int32_t out[CN_ISR_MAX_REPLICAS], n = -1;
    struct cn_isr s;

    for (size_t i = 0; i < sizeof errs / sizeof errs[0]; i++) {
        expand_sent(&s);
        cn_isr_change_done(&s, errs[i], NULL, 0, -1, -1);
        /* Not in flight any more, yet its new member still counts. */
        CHECK(!s.pending);
        CHECK(s.resend);
        CHECK_EQ(cn_isr_maximal_size(&s), 3);
        CHECK(cn_isr_advance_hw(&s, 200));
        CHECK_EQ(s.hw, 150);
        /* Even with 2 now lagging, the same proposal goes again. */
        CHECK(cn_isr_want_change(&s, T0 + 2 * LAG, LAG, 900, out, &n));
        CHECK_ISR(out, n, 1, 2, 3);
        cn_isr_change_sent(&s, out, n);
        CHECK(s.pending);
        CHECK(!s.resend);
        CHECK(!cn_isr_want_change(&s, T0 + 2 * LAG, LAG, 900, out, &n));
    }
    /* An image at a newer partition epoch ends the resend too. */
    expand_sent(&s);
    cn_isr_change_done(&s, KAFKA_REQUEST_TIMED_OUT, NULL, 0, -1, -1);
    CHECK_EQ(cn_isr_reset(&s, 1, R3, 3, R3, 3, 5, 11, 100, 100, T0), 0);
    CHECK(!s.resend);
    CHECK(!s.pending);
    CHECK_EQ(cn_isr_maximal_size(&s), 3);
}

UNIT_TEST(image_newer_epoch_clears_pending_same_keeps)
{
    static const int32_t isr12[] = {1, 2};
    struct cn_isr s;

    expand_sent(&s);
    /* Same partition epoch (another field of the image changed): our
     * proposal is still the question. */
    CHECK_EQ(cn_isr_reset(&s, 1, R3, 3, isr12, 2, 5, 10, 100, 100, T0), 0);
    CHECK(s.pending);
    CHECK_EQ(cn_isr_reset(&s, 1, R3, 3, isr12, 2, 5, 12, 100, 100, T0), 0);
    CHECK(!s.pending);
    /* The answer that then arrives is ignored. */
    {
        static const int32_t isr123[] = {1, 2, 3};
        cn_isr_change_done(&s, KAFKA_NONE, isr123, 3, 5, 11);
        CHECK_ISR(s.isr, s.nisr, 1, 2);
        CHECK_EQ(s.partition_epoch, 12);
    }
}

UNIT_TEST(reset_keeps_follower_state)
{
    static const int32_t isr12[] = {1, 2}, r124[] = {1, 2, 4};
    struct cn_isr s;
    struct cn_isr_follower f2;

    lead(&s, R3, 3);
    CHECK_EQ(cn_isr_on_fetch(&s, 2, 7, 180, 200, 2000), 0);
    CHECK_EQ(cn_isr_on_fetch(&s, 3, 8, 170, 200, 2000), 0);
    f2 = s.f[0];

    /* Same leader epoch, ISR shrunk by the image: all kept. */
    CHECK_EQ(cn_isr_reset(&s, 1, R3, 3, isr12, 2, 5, 11, 999, 100, 5000), 0);
    CHECK(memcmp(&s.f[0], &f2, sizeof f2) == 0);
    CHECK_EQ(s.f[1].leo, 170);
    CHECK_EQ(s.epoch_start_offset, 100); /* fixed for the epoch */

    /* Reassignment: 3 leaves, 4 arrives unknown. */
    CHECK_EQ(cn_isr_reset(&s, 1, r124, 3, isr12, 2, 5, 12, 100, 100, 6000), 0);
    CHECK_EQ(s.nf, 2);
    CHECK(memcmp(&s.f[0], &f2, sizeof f2) == 0);
    CHECK_EQ(s.f[1].id, 4);
    CHECK_EQ(s.f[1].leo, -1);
    CHECK_EQ(s.f[1].last_caught_up_ms, -1); /* not in the ISR: no grace */
    CHECK_EQ(cn_isr_follower_lag(&s, 3, 200), -1);

    /* Re-elected at a new leader epoch: positions kept, catch-up clock
     * restarted for ISR members. */
    CHECK_EQ(cn_isr_reset(&s, 1, r124, 3, isr12, 2, 6, 13, 210, 100, 7000), 0);
    CHECK_EQ(s.f[0].leo, 180);
    CHECK_EQ(s.f[0].broker_epoch, 7);
    CHECK_EQ(s.f[0].last_caught_up_ms, 7000);
    CHECK_EQ(s.f[0].last_fetch_ms, 7000);
    CHECK_EQ(s.f[0].last_fetch_leader_leo, 210);
    CHECK_EQ(s.epoch_start_offset, 210);

    /* An image older than what we hold is ignored. */
    CHECK_EQ(cn_isr_reset(&s, 1, R3, 3, R3, 3, 5, 11, 100, 100, 8000), 0);
    CHECK_EQ(s.leader_epoch, 6);
    CHECK_EQ(s.nf, 2);

    /* Leadership lost, then won again: nothing known. */
    cn_isr_clear(&s);
    CHECK(!s.leading);
    CHECK_EQ(cn_isr_reset(&s, 1, r124, 3, isr12, 2, 8, 15, 300, 250, 9000), 0);
    CHECK_EQ(s.f[0].leo, -1);
    CHECK_EQ(s.f[0].broker_epoch, -1);
    CHECK_EQ(s.f[0].last_caught_up_ms, 9000);
    CHECK_EQ(s.hw, 250);
}

UNIT_TEST(broker_zero_leading_again_knows_nothing)
{
    static const int32_t r01[] = {0, 1};
    struct cn_isr s;

    /* Broker 0 leads; a zeroed struct has self = 0 too, so only the
     * leading flag says this is a new term. */
    memset(&s, 0, sizeof s);
    CHECK_EQ(cn_isr_reset(&s, 0, r01, 2, r01, 2, 0, 0, 0, 0, T0), 0);
    CHECK_EQ(cn_isr_on_fetch(&s, 1, 7, 50, 50, T0), 0);
    cn_isr_clear(&s);
    CHECK_EQ(cn_isr_reset(&s, 0, r01, 2, r01, 2, 2, 3, 40, 40, T0), 0);
    CHECK_EQ(s.f[0].leo, -1);
    CHECK(!cn_isr_advance_hw(&s, 60));
    CHECK_EQ(s.hw, 40);
}

UNIT_TEST(rf1_hw_is_leader_end)
{
    static const int32_t one[] = {1};
    int32_t out[CN_ISR_MAX_REPLICAS], n = -1;
    struct cn_isr s;

    memset(&s, 0, sizeof s);
    CHECK_EQ(cn_isr_reset(&s, 1, one, 1, one, 1, 0, 0, 0, 0, T0), 0);
    CHECK_EQ(s.nf, 0);
    CHECK(cn_isr_advance_hw(&s, 42));
    CHECK_EQ(s.hw, 42);
    CHECK(cn_isr_advance_hw_at(&s, 43, 50, T0, LAG, NULL));
    CHECK_EQ(s.hw, 43);
    CHECK(!cn_isr_want_change(&s, T0 + 10 * LAG, LAG, 50, out, &n));
    CHECK(!cn_isr_under_replicated(&s));
    CHECK(!cn_isr_below_min(&s, 1));
    CHECK(cn_isr_below_min(&s, 2));
}

UNIT_TEST(fetch_errors)
{
    struct cn_isr s, before;

    lead(&s, R3, 3);
    CHECK_EQ(cn_isr_on_fetch(&s, 2, 7, 150, 200, T0), 0);
    memcpy(&before, &s, sizeof s);
    CHECK_EQ(cn_isr_on_fetch(&s, 9, 7, 150, 200, T0 + 1),
             KAFKA_UNKNOWN_LEADER_EPOCH);
    CHECK_EQ(cn_isr_on_fetch(&s, 1, 7, 150, 200, T0 + 1),
             KAFKA_UNKNOWN_LEADER_EPOCH); /* self */
    CHECK_EQ(cn_isr_on_fetch(&s, 2, 6, 190, 200, T0 + 1),
             KAFKA_NOT_LEADER_OR_FOLLOWER); /* an older incarnation */
    CHECK_EQ(cn_isr_on_fetch(&s, 2, 7, 201, 200, T0 + 1),
             KAFKA_OFFSET_OUT_OF_RANGE);
    CHECK(memcmp(&s, &before, sizeof s) == 0);
    CHECK_EQ(cn_isr_on_fetch(&s, 2, 8, 190, 200, T0 + 1), 0); /* restarted */
    CHECK_EQ(cn_isr_on_fetch(&s, 2, -1, 195, 200, T0 + 2), 0);
}

UNIT_TEST(reset_refuses_bad_input)
{
    int32_t many[CN_ISR_MAX_REPLICAS + 1];
    static const int32_t dup[] = {1, 2, 2}, r12[] = {1, 2}, isr4[] = {1, 4};
    struct cn_isr s, before;

    for (int32_t i = 0; i <= CN_ISR_MAX_REPLICAS; i++)
        many[i] = i + 1;
    lead(&s, R3, 3);
    memcpy(&before, &s, sizeof s);
    CHECK_EQ(cn_isr_reset(&s, 1, many, CN_ISR_MAX_REPLICAS + 1, many, 1, 6, 11,
                          0, 0, T0),
             CN_EINVAL);
    CHECK_EQ(cn_isr_reset(&s, 1, many, CN_ISR_MAX_REPLICAS, many, 1, 6, 11, 0,
                          0, T0),
             0);
    memcpy(&s, &before, sizeof s);
    CHECK_EQ(cn_isr_reset(&s, 1, R3, 0, R3, 0, 6, 11, 0, 0, T0), CN_EINVAL);
    CHECK_EQ(cn_isr_reset(&s, 1, dup, 3, r12, 2, 6, 11, 0, 0, T0), CN_EINVAL);
    CHECK_EQ(cn_isr_reset(&s, 1, R3, 3, dup + 1, 2, 6, 11, 0, 0, T0),
             CN_EINVAL);
    CHECK_EQ(cn_isr_reset(&s, 4, R3, 3, R3, 3, 6, 11, 0, 0, T0), CN_EINVAL);
    CHECK_EQ(cn_isr_reset(&s, 1, R3, 3, isr4, 2, 6, 11, 0, 0, T0), CN_EINVAL);
    CHECK(memcmp(&s, &before, sizeof s) == 0);
}

UNIT_TEST(hw_waits_for_caught_up_follower_outside_isr)
{
    static const int32_t isr[] = {1, 2};
    static const int64_t fenced[] = {-1, -1, CN_ISR_INELIGIBLE};
    struct cn_isr s;

    lead(&s, isr, 2);
    CHECK_EQ(cn_isr_on_fetch(&s, 2, 7, 300, 300, 2000), 0);
    CHECK_EQ(cn_isr_on_fetch(&s, 3, 7, 300, 300, 2000), 0);
    CHECK_EQ(cn_isr_on_fetch(&s, 3, 7, 310, 400, 3000), 0);
    CHECK_EQ(s.f[1].last_caught_up_ms, 2000);
    /* 3 caught up 1 s ago: the HW waits for it... */
    CHECK(cn_isr_advance_hw_at(&s, 400, 400, 3000, LAG, NULL));
    CHECK_EQ(s.hw, 300);
    {
        struct cn_isr t;
        memcpy(&t, &s, sizeof t);
        CHECK_EQ(cn_isr_on_fetch(&t, 2, 7, 400, 400, 3000), 0);
        CHECK(cn_isr_advance_hw(&t, 400));
        CHECK_EQ(t.hw, 400); /* the plain rule does not wait for 3 */
    }
    CHECK_EQ(cn_isr_on_fetch(&s, 2, 7, 400, 400, 3000), 0);
    CHECK(cn_isr_advance_hw_at(&s, 400, 400, 3000, LAG, NULL));
    CHECK_EQ(s.hw, 310);
    /* ... unless it may not join, or lagged too long. */
    CHECK(cn_isr_advance_hw_at(&s, 400, 400, 3000, LAG, fenced));
    CHECK_EQ(s.hw, 400);
}

UNIT_TEST(hw_stops_waiting_after_lag)
{
    static const int32_t isr[] = {1, 2};
    struct cn_isr s;

    lead(&s, isr, 2);
    CHECK_EQ(cn_isr_on_fetch(&s, 2, 7, 400, 400, 2000), 0);
    CHECK_EQ(cn_isr_on_fetch(&s, 3, 7, 300, 300, 2000), 0);
    CHECK(cn_isr_advance_hw_at(&s, 400, 400, 2000 + LAG, LAG, NULL));
    CHECK_EQ(s.hw, 300);
    CHECK(cn_isr_advance_hw_at(&s, 400, 400, 2001 + LAG, LAG, NULL));
    CHECK_EQ(s.hw, 400);
}

UNIT_TEST(metrics)
{
    static const int32_t isr[] = {1, 2};
    struct cn_isr s;

    lead(&s, isr, 2);
    CHECK(cn_isr_under_replicated(&s));
    CHECK(!cn_isr_below_min(&s, 2));
    CHECK(cn_isr_below_min(&s, 3));
    CHECK_EQ(cn_isr_follower_lag(&s, 3, 200), 200); /* unknown LEO */
    CHECK_EQ(cn_isr_on_fetch(&s, 3, 7, 150, 200, T0), 0);
    CHECK_EQ(cn_isr_follower_lag(&s, 3, 200), 50);
    CHECK_EQ(cn_isr_follower_lag(&s, 3, 140), 0);
    CHECK_EQ(cn_isr_follower_lag(&s, 1, 200), -1); /* self */
    CHECK_EQ(cn_isr_maximal_size(&s), 2);
    lead(&s, R3, 3);
    CHECK(!cn_isr_under_replicated(&s));
}

UNIT_MAIN(hw_is_min_over_isr, hw_ignores_followers_outside_isr,
          hw_counts_pending_expand_and_pending_removal, hw_never_decreases,
          last_caught_up_rules, shrink_after_lag_max_only,
          no_shrink_at_leader_leo, leader_never_shrunk,
          expand_past_hw_and_epoch_start, expand_checks_broker_epoch,
          shrink_before_expand, pending_blocks_new_proposals, answer_success,
          answer_stale_success_waits_for_image,
          answer_not_applied_returns_to_committed,
          answer_out_of_date_waits_for_image, answer_retriable_resends_same,
          image_newer_epoch_clears_pending_same_keeps,
          reset_keeps_follower_state, broker_zero_leading_again_knows_nothing,
          rf1_hw_is_leader_end, fetch_errors, reset_refuses_bad_input,
          hw_waits_for_caught_up_follower_outside_isr,
          hw_stops_waiting_after_lag, metrics)
