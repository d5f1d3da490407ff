/* test_follow.c - a follower's decision on one partition's Fetch response
 * (partition/follow.h), case by case: append and the HW and log start
 * that follow, truncation on a diverging epoch (KIP-320, KIP-279),
 * OFFSET_OUT_OF_RANGE with and without the leader's offsets, and the
 * errors that only need a backoff or new metadata. */
#include "partition/follow.h"
#include "proto/kerr.h"
#include "unit.h"

/* A follower with offsets [10, 100), HW 80. */
static const struct cn_follow_log LOG = {.leo = 100,
                                         .log_start = 10,
                                         .hw = 80};

/* A plain answer: no error, leader HW 120, leader start 10, no
 * divergence, nothing known besides. */
static struct cn_follow_resp resp(int16_t error)
{
    return (struct cn_follow_resp){
        .error = error,
        .high_watermark = 120,
        .log_start_offset = 10,
        .diverging_epoch = -1,
        .diverging_end_offset = -1,
        .has_records = true,
        .own_epoch = -1,
        .own_end_offset = -1,
        .leader_leo = -1,
    };
}

static struct cn_follow_action decide(const struct cn_follow_log *log,
                                      const struct cn_follow_resp *r)
{
    struct cn_follow_action a = {.kind = CN_FOLLOW_APPEND, .offset = 42};

    cn_follow_decide(log, r, &a);
    return a;
}

UNIT_TEST(append_then_settle_hw)
{
    struct cn_follow_resp r = resp(KAFKA_NONE);
    struct cn_follow_log after = LOG;
    struct cn_follow_action a = decide(&LOG, &r);
    int64_t hw, start;

    CHECK_EQ(a.kind, CN_FOLLOW_APPEND);
    CHECK_EQ(a.offset, -1);
    CHECK(!a.await_metadata);
    /* Appended up to 110: HW = min(leader HW 120, LEO 110). */
    after.leo = 110;
    cn_follow_settle(&after, &r, &hw, &start);
    CHECK_EQ(hw, 110);
    CHECK_EQ(start, 10);
    /* Caught up to 130: the leader's HW. */
    after.leo = 130;
    cn_follow_settle(&after, &r, &hw, &start);
    CHECK_EQ(hw, 120);
    /* A leader HW below ours (a new leader's, not caught up): taken. */
    r.high_watermark = 70;
    cn_follow_settle(&after, &r, &hw, &start);
    CHECK_EQ(hw, 70);
    /* ... but never below our log start. */
    r.high_watermark = 5;
    cn_follow_settle(&after, &r, &hw, &start);
    CHECK_EQ(hw, 10);
    /* None in the response: ours stays. */
    r.high_watermark = -1;
    cn_follow_settle(&after, &r, &hw, &start);
    CHECK_EQ(hw, 80);
}

UNIT_TEST(append_without_records)
{
    struct cn_follow_resp r = resp(KAFKA_NONE);
    struct cn_follow_action a;
    int64_t hw, start;

    r.has_records = false;
    a = decide(&LOG, &r);
    CHECK_EQ(a.kind, CN_FOLLOW_APPEND);
    cn_follow_settle(&LOG, &r, &hw, &start);
    CHECK_EQ(hw, 100);
    CHECK_EQ(start, 10);
}

UNIT_TEST(log_start_follows_leader)
{
    struct cn_follow_resp r = resp(KAFKA_NONE);
    struct cn_follow_log after = LOG;
    int64_t hw, start;

    /* DeleteRecords on the leader moved its start to 50. */
    r.log_start_offset = 50;
    cn_follow_settle(&LOG, &r, &hw, &start);
    CHECK_EQ(start, 50);
    /* Never backwards. */
    r.log_start_offset = 5;
    cn_follow_settle(&LOG, &r, &hw, &start);
    CHECK_EQ(start, 10);
    /* Never past the HW. */
    after.leo = 60;
    r.log_start_offset = 90;
    r.high_watermark = 120;
    cn_follow_settle(&after, &r, &hw, &start);
    CHECK_EQ(hw, 60);
    CHECK_EQ(start, 60);
}

UNIT_TEST(diverging_same_epoch)
{
    struct cn_follow_resp r = resp(KAFKA_NONE);
    struct cn_follow_action a;

    /* The leader's epoch 4 ends at 90; ours ends at 95. */
    r.diverging_epoch = 4;
    r.diverging_end_offset = 90;
    r.own_epoch = 4;
    r.own_end_offset = 95;
    a = decide(&LOG, &r);
    CHECK_EQ(a.kind, CN_FOLLOW_TRUNCATE);
    CHECK_EQ(a.offset, 90);
    /* Ours ends first. */
    r.own_end_offset = 85;
    a = decide(&LOG, &r);
    CHECK_EQ(a.kind, CN_FOLLOW_TRUNCATE);
    CHECK_EQ(a.offset, 85);
    /* Both past our LEO: the LEO (epochs after it still go). */
    r.diverging_end_offset = 150;
    r.own_end_offset = 140;
    a = decide(&LOG, &r);
    CHECK_EQ(a.kind, CN_FOLLOW_TRUNCATE);
    CHECK_EQ(a.offset, 100);
}

UNIT_TEST(diverging_epoch_unknown_here)
{
    struct cn_follow_resp r = resp(KAFKA_NONE);
    struct cn_follow_action a;

    /* KIP-279: the leader answers epoch 3 (ending at 90); this log has no
     * epoch 3, its largest below is 2, ending at 70: cut there, ask
     * again with the next fetch. */
    r.diverging_epoch = 3;
    r.diverging_end_offset = 90;
    r.own_epoch = 2;
    r.own_end_offset = 70;
    a = decide(&LOG, &r);
    CHECK_EQ(a.kind, CN_FOLLOW_TRUNCATE);
    CHECK_EQ(a.offset, 70);
    /* Even when the leader's end is lower. */
    r.diverging_end_offset = 60;
    a = decide(&LOG, &r);
    CHECK_EQ(a.offset, 70);
}

UNIT_TEST(diverging_without_own_epochs)
{
    struct cn_follow_resp r = resp(KAFKA_NONE);
    struct cn_follow_action a;

    /* No epoch cache here: the leader's end, capped at our LEO. */
    r.diverging_epoch = 4;
    r.diverging_end_offset = 90;
    a = decide(&LOG, &r);
    CHECK_EQ(a.kind, CN_FOLLOW_TRUNCATE);
    CHECK_EQ(a.offset, 90);
    r.diverging_end_offset = 200;
    a = decide(&LOG, &r);
    CHECK_EQ(a.offset, 100);
    /* An epoch without an end: cut nothing, yet still TRUNCATE at the
     * LEO so stale epochs go. */
    r.diverging_end_offset = -1;
    a = decide(&LOG, &r);
    CHECK_EQ(a.kind, CN_FOLLOW_TRUNCATE);
    CHECK_EQ(a.offset, 100);
    /* An end without an epoch is divergence too. */
    r.diverging_epoch = -1;
    r.diverging_end_offset = 50;
    a = decide(&LOG, &r);
    CHECK_EQ(a.kind, CN_FOLLOW_TRUNCATE);
    CHECK_EQ(a.offset, 50);
}

UNIT_TEST(diverging_below_log_start)
{
    struct cn_follow_resp r = resp(KAFKA_NONE);
    struct cn_follow_action a;

    r.diverging_epoch = 1;
    r.diverging_end_offset = 5;
    r.own_epoch = 1;
    r.own_end_offset = 8;
    r.log_start_offset = 0;
    a = decide(&LOG, &r);
    CHECK_EQ(a.kind, CN_FOLLOW_TRUNCATE_FULLY);
    CHECK_EQ(a.offset, 5);
    /* The leader's start above the cut: restart there. */
    r.log_start_offset = 7;
    a = decide(&LOG, &r);
    CHECK_EQ(a.kind, CN_FOLLOW_TRUNCATE_FULLY);
    CHECK_EQ(a.offset, 7);
    /* Exactly at our start: an ordinary truncation to an empty log. */
    r.diverging_end_offset = 10;
    r.own_end_offset = 10;
    a = decide(&LOG, &r);
    CHECK_EQ(a.kind, CN_FOLLOW_TRUNCATE);
    CHECK_EQ(a.offset, 10);
}

UNIT_TEST(out_of_range_behind_leader_start)
{
    struct cn_follow_resp r = resp(KAFKA_OFFSET_OUT_OF_RANGE);
    struct cn_follow_action a;

    r.log_start_offset = 500;
    a = decide(&LOG, &r);
    CHECK_EQ(a.kind, CN_FOLLOW_TRUNCATE_FULLY);
    CHECK_EQ(a.offset, 500);
    r.leader_leo = 900; /* known or not, the same */
    a = decide(&LOG, &r);
    CHECK_EQ(a.kind, CN_FOLLOW_TRUNCATE_FULLY);
    CHECK_EQ(a.offset, 500);
}

UNIT_TEST(out_of_range_ahead_of_leader_end)
{
    struct cn_follow_resp r = resp(KAFKA_OFFSET_OUT_OF_RANGE);
    struct cn_follow_action a;

    /* Kafka's error answer carries no offsets: ask. */
    r.log_start_offset = -1;
    r.high_watermark = -1;
    a = decide(&LOG, &r);
    CHECK_EQ(a.kind, CN_FOLLOW_LIST_OFFSETS);
    /* The leader ends at 95, below our 100. */
    r.leader_leo = 95;
    a = decide(&LOG, &r);
    CHECK_EQ(a.kind, CN_FOLLOW_TRUNCATE);
    CHECK_EQ(a.offset, 95);
    /* ... or below our start. */
    r.leader_leo = 4;
    r.log_start_offset = 0;
    a = decide(&LOG, &r);
    CHECK_EQ(a.kind, CN_FOLLOW_TRUNCATE_FULLY);
    CHECK_EQ(a.offset, 4);
}

UNIT_TEST(out_of_range_in_range_now)
{
    struct cn_follow_resp r = resp(KAFKA_OFFSET_OUT_OF_RANGE);
    struct cn_follow_action a;

    /* Start known and below our LEO, end unknown: ask for it. */
    a = decide(&LOG, &r);
    CHECK_EQ(a.kind, CN_FOLLOW_LIST_OFFSETS);
    /* End known, start unknown: we may be behind it, ask. */
    r.log_start_offset = -1;
    r.leader_leo = 150;
    a = decide(&LOG, &r);
    CHECK_EQ(a.kind, CN_FOLLOW_LIST_OFFSETS);
    /* Both known, our LEO within: fetch again. */
    r.log_start_offset = 10;
    a = decide(&LOG, &r);
    CHECK_EQ(a.kind, CN_FOLLOW_BACKOFF);
    CHECK(!a.await_metadata);
    r.leader_leo = 100;
    a = decide(&LOG, &r);
    CHECK_EQ(a.kind, CN_FOLLOW_BACKOFF);
}

UNIT_TEST(errors_back_off)
{
    static const int16_t meta[] = {KAFKA_NOT_LEADER_OR_FOLLOWER,
                                   KAFKA_FENCED_LEADER_EPOCH,
                                   KAFKA_UNKNOWN_TOPIC_OR_PARTITION,
                                   KAFKA_UNKNOWN_TOPIC_ID,
                                   KAFKA_INCONSISTENT_TOPIC_ID};
    static const int16_t wait[] = {KAFKA_UNKNOWN_LEADER_EPOCH,
                                   KAFKA_UNKNOWN_SERVER_ERROR,
                                   KAFKA_KAFKA_STORAGE_ERROR,
                                   KAFKA_REPLICA_NOT_AVAILABLE};
    struct cn_follow_resp r;
    struct cn_follow_action a;

    for (size_t i = 0; i < sizeof meta / sizeof meta[0]; i++) {
        r = resp(meta[i]);
        r.diverging_epoch = 1; /* ignored with an error */
        r.diverging_end_offset = 5;
        a = decide(&LOG, &r);
        CHECK_EQ(a.kind, CN_FOLLOW_BACKOFF);
        CHECK(a.await_metadata);
        CHECK_EQ(a.offset, -1);
    }
    for (size_t i = 0; i < sizeof wait / sizeof wait[0]; i++) {
        r = resp(wait[i]);
        a = decide(&LOG, &r);
        CHECK_EQ(a.kind, CN_FOLLOW_BACKOFF);
        CHECK(!a.await_metadata);
    }
}

UNIT_MAIN(append_then_settle_hw, append_without_records,
          log_start_follows_leader, diverging_same_epoch,
          diverging_epoch_unknown_here, diverging_without_own_epochs,
          diverging_below_log_start, out_of_range_behind_leader_start,
          out_of_range_ahead_of_leader_end, out_of_range_in_range_now,
          errors_back_off)
