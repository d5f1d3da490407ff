/*
 * test_marker_queue.c - the cluster marker channel's decisions
 * (txn/marker_queue.h): routing, batching per destination, the unknown
 * destination, the error table, the stop condition, one result each.
 */
#include <stdlib.h>
#include <string.h>

#include "proto/kerr.h"
#include "txn/marker_queue.h"
#include "unit.h"

/* A fake image: topic "tN" partition p is led by leaders[N][p]. */
struct fake {
    int32_t leaders[4][8];
    int32_t txn_epoch[4]; /* this broker leads txn partition i at it (-1) */
};

static int32_t fake_leader(void *ctx, const char *topic, int32_t partition)
{
    struct fake *f = ctx;
    if (topic[0] != 't' || topic[1] < '0' || topic[1] > '3' || partition < 0 ||
        partition >= 8)
        return CN_MQ_GONE;
    return f->leaders[topic[1] - '0'][partition];
}

static bool fake_coordinates(void *ctx, int32_t txn_partition, int32_t epoch)
{
    struct fake *f = ctx;
    return f->txn_epoch[txn_partition] == epoch;
}

static struct cn_mq_view view_of(struct fake *f)
{
    return (struct cn_mq_view){fake_leader, fake_coordinates, f, 1};
}

static struct fake fake_init(void)
{
    struct fake f;
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 8; j++)
            f.leaders[i][j] = 2; /* broker 2 leads everything */
    for (int i = 0; i < 4; i++)
        f.txn_epoch[i] = 5;
    return f;
}

static struct cn_mq_marker marker(int64_t pid, const char *topic, int32_t part)
{
    return (struct cn_mq_marker){
        .producer_id = pid,
        .producer_epoch = 3,
        .commit = true,
        .coordinator_epoch = 5,
        .txn_partition = 0,
        .topic = topic,
        .partition = part,
    };
}

/* Results popped into res[index] (-100: none); returns how many. */
static int pop_all(struct cn_mq *q, int16_t *res, size_t n)
{
    int k = 0;
    void *owner;
    size_t i;
    int16_t kerr;
    while (cn_mq_pop_result(q, &owner, &i, &kerr)) {
        CHECK(i < n);
        CHECK(res[i] == -100); /* exactly one result each */
        res[i] = kerr;
        k++;
    }
    return k;
}

static void res_init(int16_t *res, size_t n)
{
    for (size_t i = 0; i < n; i++)
        res[i] = -100;
}

UNIT_TEST(batches_per_destination)
{
    struct fake f = fake_init();
    struct cn_mq_view v = view_of(&f);
    struct cn_mq *q = cn_mq_new();
    f.leaders[1][0] = 3;
    /* Two producers' markers: t0-0, t0-1 to broker 2; t1-0 to 3; t2-0
     * here. */
    int16_t res[8];
    res_init(res, 8);
    struct cn_mq_marker m = marker(10, "t0", 0);
    CHECK(cn_mq_add(q, &m, NULL, 0, 0));
    m = marker(11, "t0", 1);
    CHECK(cn_mq_add(q, &m, NULL, 1, 0));
    m = marker(11, "t1", 0);
    CHECK(cn_mq_add(q, &m, NULL, 2, 0));
    f.leaders[2][0] = 1;
    m = marker(10, "t2", 0);
    CHECK(cn_mq_add(q, &m, NULL, 3, 0));
    struct cn_mq_item *local[4];
    CHECK_EQ(cn_mq_route(q, &v, 0, local, 4), 1);
    CHECK_EQ(local[0]->index, 3);
    CHECK_EQ(local[0]->state, CN_MQ_LOCAL);
    int32_t dests[4];
    CHECK_EQ(cn_mq_ready(q, dests, 4), 2);
    struct cn_mq_item *items[8];
    CHECK_EQ(cn_mq_take(q, 2, items, 8), 2);
    CHECK_EQ(items[0]->m.producer_id, 10);
    CHECK_EQ(items[1]->m.producer_id, 11);
    CHECK_EQ(cn_mq_take(q, 2, items, 8), 0); /* busy */
    /* A marker coming in meanwhile waits for the next request. */
    m = marker(12, "t0", 2);
    CHECK(cn_mq_add(q, &m, NULL, 4, 0));
    CHECK_EQ(cn_mq_route(q, &v, 0, local, 4), 0);
    CHECK_EQ(cn_mq_ready(q, dests, 4), 1);
    CHECK_EQ(dests[0], 3);
    CHECK_EQ(cn_mq_take(q, 3, items + 2, 6), 1);
    CHECK(cn_mq_done(q, items[0], KAFKA_NONE, 1));
    CHECK(cn_mq_done(q, items[1], KAFKA_NONE, 1));
    cn_mq_answered(q, 2);
    CHECK_EQ(cn_mq_ready(q, dests, 4), 1);
    CHECK_EQ(dests[0], 2);
    CHECK_EQ(cn_mq_take(q, 2, items + 3, 5), 1);
    CHECK_EQ(items[3]->index, 4);
    CHECK(cn_mq_done(q, items[2], KAFKA_NONE, 1));
    CHECK(cn_mq_done(q, items[3], KAFKA_NONE, 1));
    CHECK(cn_mq_done(q, local[0], KAFKA_NONE, 1));
    CHECK_EQ(pop_all(q, res, 8), 5);
    for (int i = 0; i < 5; i++)
        CHECK_EQ(res[i], KAFKA_NONE);
    CHECK_EQ(cn_mq_pending(q), 0);
    struct cn_mq_stats st;
    cn_mq_stats(q, &st);
    CHECK_EQ(st.requests, 3);
    CHECK_EQ(st.retries, 0);
    cn_mq_free(q);
}

UNIT_TEST(unknown_destination_waits_for_a_leader)
{
    struct fake f = fake_init();
    struct cn_mq_view v = view_of(&f);
    struct cn_mq *q = cn_mq_new();
    f.leaders[0][0] = CN_MQ_NO_LEADER;
    struct cn_mq_marker m = marker(10, "t0", 0);
    CHECK(cn_mq_add(q, &m, NULL, 0, 1000));
    struct cn_mq_item *local[2], *items[2];
    int32_t dests[2];
    CHECK_EQ(cn_mq_route(q, &v, 1000, local, 2), 0);
    CHECK_EQ(cn_mq_ready(q, dests, 2), 0);
    struct cn_mq_stats st;
    cn_mq_stats(q, &st);
    CHECK_EQ(st.unknown_destination, 1);
    CHECK_EQ(cn_mq_next_due(q), 1000 + CN_MQ_RETRY_BACKOFF_MS);
    /* Not looked up again before the backoff... */
    f.leaders[0][0] = 3;
    CHECK_EQ(cn_mq_route(q, &v, 1050, local, 2), 0);
    CHECK_EQ(cn_mq_ready(q, dests, 2), 0);
    /* ...then sent to the leader the image names. */
    CHECK_EQ(cn_mq_route(q, &v, 1100, local, 2), 0);
    CHECK_EQ(cn_mq_ready(q, dests, 2), 1);
    CHECK_EQ(dests[0], 3);
    cn_mq_stats(q, &st);
    CHECK_EQ(st.unknown_destination, 0);
    CHECK_EQ(cn_mq_next_due(q), INT64_MAX);
    CHECK_EQ(cn_mq_take(q, 3, items, 2), 1);
    CHECK(cn_mq_done(q, items[0], KAFKA_NONE, 1200));
    int16_t res[1];
    res_init(res, 1);
    CHECK_EQ(pop_all(q, res, 1), 1);
    CHECK_EQ(res[0], KAFKA_NONE);
    cn_mq_free(q);
}

UNIT_TEST(deleted_topic_needs_no_marker)
{
    struct fake f = fake_init();
    struct cn_mq_view v = view_of(&f);
    struct cn_mq *q = cn_mq_new();
    struct cn_mq_marker m = marker(10, "gone", 0);
    CHECK(cn_mq_add(q, &m, NULL, 0, 0));
    struct cn_mq_item *local[1];
    CHECK_EQ(cn_mq_route(q, &v, 0, local, 1), 0);
    int16_t res[1];
    res_init(res, 1);
    CHECK_EQ(pop_all(q, res, 1), 1);
    CHECK_EQ(res[0], KAFKA_NONE);
    cn_mq_free(q);
}

UNIT_TEST(error_table)
{
    static const int16_t retried[] = {
        KAFKA_UNKNOWN_TOPIC_OR_PARTITION,
        KAFKA_NOT_LEADER_OR_FOLLOWER,
        KAFKA_NOT_ENOUGH_REPLICAS,
        KAFKA_NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        KAFKA_REQUEST_TIMED_OUT,
        KAFKA_KAFKA_STORAGE_ERROR,
        KAFKA_COORDINATOR_LOAD_IN_PROGRESS,
    };
    static const int16_t reported[] = {
        KAFKA_INVALID_PRODUCER_EPOCH,
        KAFKA_TRANSACTION_COORDINATOR_FENCED,
        KAFKA_CLUSTER_AUTHORIZATION_FAILED,
        KAFKA_INVALID_REQUEST,
    };
    for (size_t i = 0; i < sizeof retried / sizeof retried[0]; i++)
        CHECK(cn_mq_retriable(retried[i]));
    for (size_t i = 0; i < sizeof reported / sizeof reported[0]; i++)
        CHECK(!cn_mq_retriable(reported[i]));
    CHECK(!cn_mq_retriable(KAFKA_NONE));

    /* A retriable answer: looked up again after the backoff, at the new
     * leader; a fencing answer is reported. */
    struct fake f = fake_init();
    struct cn_mq_view v = view_of(&f);
    struct cn_mq *q = cn_mq_new();
    struct cn_mq_marker m = marker(10, "t0", 0);
    CHECK(cn_mq_add(q, &m, NULL, 0, 0));
    m = marker(10, "t0", 1);
    CHECK(cn_mq_add(q, &m, NULL, 1, 0));
    struct cn_mq_item *local[2], *items[2];
    int32_t dests[2];
    cn_mq_route(q, &v, 0, local, 2);
    CHECK_EQ(cn_mq_take(q, 2, items, 2), 2);
    CHECK(!cn_mq_done(q, items[0], KAFKA_NOT_LEADER_OR_FOLLOWER, 10));
    CHECK(cn_mq_done(q, items[1], KAFKA_TRANSACTION_COORDINATOR_FENCED, 10));
    cn_mq_answered(q, 2);
    struct cn_mq_stats st;
    cn_mq_stats(q, &st);
    CHECK_EQ(st.retry_waiting, 1);
    CHECK_EQ(st.retries, 1);
    CHECK_EQ(cn_mq_next_due(q), 10 + CN_MQ_RETRY_BACKOFF_MS);
    int16_t res[2];
    res_init(res, 2);
    CHECK_EQ(pop_all(q, res, 2), 1);
    CHECK_EQ(res[1], KAFKA_TRANSACTION_COORDINATOR_FENCED);
    f.leaders[0][0] = 3;
    cn_mq_route(q, &v, 50, local, 2);
    CHECK_EQ(cn_mq_ready(q, dests, 2), 0);
    cn_mq_route(q, &v, 110, local, 2);
    CHECK_EQ(cn_mq_ready(q, dests, 2), 1);
    CHECK_EQ(dests[0], 3);
    CHECK_EQ(cn_mq_take(q, 3, items, 2), 1);
    CHECK_EQ(items[0]->attempts, 2);
    /* The whole request failed (connection lost): retried too. */
    CHECK(!cn_mq_done(q, items[0], KAFKA_REQUEST_TIMED_OUT, 120));
    cn_mq_answered(q, 3);
    cn_mq_route(q, &v, 220, local, 2);
    CHECK_EQ(cn_mq_take(q, 3, items, 2), 1);
    CHECK(cn_mq_done(q, items[0], KAFKA_NONE, 230));
    cn_mq_answered(q, 3);
    CHECK_EQ(pop_all(q, res, 2), 1);
    CHECK_EQ(res[0], KAFKA_NONE);
    CHECK_EQ(cn_mq_pending(q), 0);
    cn_mq_free(q);
}

UNIT_TEST(local_errors_follow_the_table)
{
    struct fake f = fake_init();
    struct cn_mq_view v = view_of(&f);
    struct cn_mq *q = cn_mq_new();
    f.leaders[0][0] = 1;
    struct cn_mq_marker m = marker(10, "t0", 0);
    CHECK(cn_mq_add(q, &m, NULL, 0, 0));
    struct cn_mq_item *local[1], *items[1];
    CHECK_EQ(cn_mq_route(q, &v, 0, local, 1), 1);
    /* Not replicated in time here; meanwhile broker 2 took over. */
    CHECK(!cn_mq_done(q, local[0], KAFKA_NOT_ENOUGH_REPLICAS_AFTER_APPEND, 5));
    f.leaders[0][0] = 2;
    CHECK_EQ(cn_mq_route(q, &v, 105, local, 1), 0);
    CHECK_EQ(cn_mq_take(q, 2, items, 1), 1);
    CHECK(cn_mq_done(q, items[0], KAFKA_NONE, 110));
    int16_t res[1];
    res_init(res, 1);
    CHECK_EQ(pop_all(q, res, 1), 1);
    CHECK_EQ(res[0], KAFKA_NONE);
    cn_mq_free(q);
}

UNIT_TEST(local_room_is_bounded)
{
    struct fake f = fake_init();
    struct cn_mq_view v = view_of(&f);
    struct cn_mq *q = cn_mq_new();
    f.leaders[0][0] = f.leaders[0][1] = f.leaders[0][2] = 1;
    for (int i = 0; i < 3; i++) {
        struct cn_mq_marker m = marker(10, "t0", i);
        CHECK(cn_mq_add(q, &m, NULL, (size_t)i, 0));
    }
    struct cn_mq_item *local[2];
    CHECK_EQ(cn_mq_route(q, &v, 0, local, 2), 2);
    CHECK_EQ(cn_mq_next_due(q), 0);
    CHECK_EQ(cn_mq_route(q, &v, 0, local, 2), 1);
    CHECK_EQ(local[0]->index, 2);
    CHECK_EQ(cn_mq_fail_all(q, KAFKA_REQUEST_TIMED_OUT), 3);
    int16_t res[3];
    res_init(res, 3);
    CHECK_EQ(pop_all(q, res, 3), 3);
    cn_mq_free(q);
}

UNIT_TEST(stop_condition)
{
    struct fake f = fake_init();
    struct cn_mq_view v = view_of(&f);
    struct cn_mq *q = cn_mq_new();
    struct cn_mq_marker m = marker(10, "t0", 0);
    CHECK(cn_mq_add(q, &m, NULL, 0, 0));
    m = marker(10, "t0", 1);
    CHECK(cn_mq_add(q, &m, NULL, 1, 0));
    /* An operator's marker (no coordinator) is never stopped. */
    m = marker(11, "t0", 2);
    m.txn_partition = -1;
    CHECK(cn_mq_add(q, &m, NULL, 2, 0));
    struct cn_mq_item *local[3], *items[3];
    cn_mq_route(q, &v, 0, local, 3);
    CHECK_EQ(cn_mq_take(q, 2, items, 3), 3);
    CHECK(!cn_mq_done(q, items[0], KAFKA_NOT_LEADER_OR_FOLLOWER, 0));
    CHECK(!cn_mq_done(q, items[1], KAFKA_COORDINATOR_LOAD_IN_PROGRESS, 0));
    CHECK(!cn_mq_done(q, items[2], KAFKA_NOT_LEADER_OR_FOLLOWER, 0));
    cn_mq_answered(q, 2);
    /* The coordinator's partition moved to a newer epoch: its markers are
     * dropped before the retry, the operator's is sent. */
    f.txn_epoch[0] = 6;
    CHECK_EQ(cn_mq_route(q, &v, 200, local, 3), 0);
    int16_t res[3];
    res_init(res, 3);
    CHECK_EQ(pop_all(q, res, 3), 2);
    CHECK_EQ(res[0], KAFKA_NOT_COORDINATOR);
    CHECK_EQ(res[1], KAFKA_NOT_COORDINATOR);
    CHECK_EQ(cn_mq_take(q, 2, items, 3), 1);
    CHECK_EQ(items[0]->index, 2);
    /* A routed marker waiting for its destination is stopped too. */
    m = marker(10, "t0", 3);
    m.coordinator_epoch = 6;
    CHECK(cn_mq_add(q, &m, NULL, 0, 200));
    CHECK_EQ(cn_mq_route(q, &v, 200, local, 3), 0);
    f.txn_epoch[0] = -1;
    CHECK_EQ(cn_mq_route(q, &v, 200, local, 3), 0);
    res_init(res, 3);
    CHECK_EQ(pop_all(q, res, 3), 1);
    CHECK_EQ(res[0], KAFKA_NOT_COORDINATOR);
    CHECK(cn_mq_done(q, items[0], KAFKA_NONE, 210));
    res_init(res, 3);
    CHECK_EQ(pop_all(q, res, 3), 1);
    CHECK_EQ(res[2], KAFKA_NONE);
    cn_mq_free(q);
}

UNIT_TEST(exactly_one_result)
{
    /* Whatever happens, each item yields one result: done after finish is
     * ignored, fail_all covers every state, and a retried item is not
     * reported before it finishes. */
    struct fake f = fake_init();
    struct cn_mq_view v = view_of(&f);
    struct cn_mq *q = cn_mq_new();
    f.leaders[0][1] = 1;
    f.leaders[0][2] = CN_MQ_NO_LEADER;
    for (int i = 0; i < 5; i++) {
        struct cn_mq_marker m = marker(10, "t0", i);
        CHECK(cn_mq_add(q, &m, NULL, (size_t)i, 0));
    }
    struct cn_mq_item *local[5], *items[5];
    /* 0: in flight; 1: local; 2: unknown destination; 3: finished; 4:
     * queued for a retry. */
    CHECK_EQ(cn_mq_route(q, &v, 0, local, 5), 1);
    CHECK_EQ(cn_mq_take(q, 2, items, 5), 3);
    CHECK(cn_mq_done(q, items[1], KAFKA_NONE, 0));
    CHECK(!cn_mq_done(q, items[2], KAFKA_REQUEST_TIMED_OUT, 0));
    int16_t res[5];
    res_init(res, 5);
    CHECK_EQ(pop_all(q, res, 5), 1);
    CHECK_EQ(res[3], KAFKA_NONE);
    CHECK_EQ(cn_mq_pending(q), 4);
    CHECK_EQ(cn_mq_fail_all(q, KAFKA_NOT_COORDINATOR), 4);
    CHECK_EQ(cn_mq_pending(q), 0);
    CHECK_EQ(pop_all(q, res, 5), 4);
    for (int i = 0; i < 5; i++)
        CHECK(res[i] != -100);
    CHECK_EQ(res[0], KAFKA_NOT_COORDINATOR);
    CHECK_EQ(res[2], KAFKA_NOT_COORDINATOR);
    /* Nothing left to route or send. */
    CHECK_EQ(cn_mq_route(q, &v, 1000, local, 5), 0);
    int32_t dests[2];
    CHECK_EQ(cn_mq_ready(q, dests, 2), 0);
    CHECK_EQ(cn_mq_next_due(q), INT64_MAX);
    cn_mq_free(q);
}

UNIT_TEST(one_marker_per_producer_and_partition_per_request)
{
    struct fake f = fake_init();
    struct cn_mq_view v = view_of(&f);
    struct cn_mq *q = cn_mq_new();
    struct cn_mq_marker m = marker(10, "t0", 0);
    CHECK(cn_mq_add(q, &m, NULL, 0, 0));
    CHECK(cn_mq_add(q, &m, NULL, 1, 0)); /* the same marker again */
    m = marker(10, "t0", 1);
    m.commit = false; /* another result for the same producer */
    CHECK(cn_mq_add(q, &m, NULL, 2, 0));
    m = marker(10, "t0", 2);
    CHECK(cn_mq_add(q, &m, NULL, 3, 0));
    struct cn_mq_item *local[4], *items[4];
    cn_mq_route(q, &v, 0, local, 4);
    CHECK_EQ(cn_mq_take(q, 2, items, 4), 2);
    CHECK_EQ(items[0]->index, 0);
    CHECK_EQ(items[1]->index, 3);
    CHECK(cn_mq_done(q, items[0], KAFKA_NONE, 1));
    CHECK(cn_mq_done(q, items[1], KAFKA_NONE, 1));
    cn_mq_answered(q, 2);
    CHECK_EQ(cn_mq_take(q, 2, items, 4), 1);
    CHECK_EQ(items[0]->index, 1);
    CHECK(cn_mq_done(q, items[0], KAFKA_NONE, 1));
    cn_mq_answered(q, 2);
    CHECK_EQ(cn_mq_take(q, 2, items, 4), 1);
    CHECK_EQ(items[0]->index, 2);
    cn_mq_fail_all(q, KAFKA_NOT_COORDINATOR);
    int16_t res[4];
    res_init(res, 4);
    CHECK_EQ(pop_all(q, res, 4), 4);
    CHECK_EQ(res[2], KAFKA_NOT_COORDINATOR);
    cn_mq_free(q);
}

UNIT_MAIN(one_marker_per_producer_and_partition_per_request,
          batches_per_destination, unknown_destination_waits_for_a_leader,
          deleted_topic_needs_no_marker, error_table,
          local_errors_follow_the_table, local_room_is_bounded, stop_condition,
          exactly_one_result)
