/*
 * test_lifecycle.c - the broker lifecycle machine (node/lifecycle.h) as a
 * script of events with a fake clock: what a broker sends its controller
 * and when.
 */
#include "node/lifecycle.h"
#include "proto/kerr.h"
#include "unit.h"

static struct cn_lc fresh(void)
{
    struct cn_lc lc;
    cn_lc_init(&lc, 500, 50, 400);
    return lc;
}

UNIT_TEST(registers_first_then_heartbeats)
{
    struct cn_lc lc = fresh();
    CHECK_EQ(cn_lc_poll(&lc, 0, true), CN_LCA_REGISTER);
    /* One request at a time. */
    CHECK_EQ(cn_lc_poll(&lc, 10, true), CN_LCA_NONE);
    cn_lc_registered(&lc, 20, 0, 42);
    CHECK_EQ(lc.epoch, 42);
    CHECK(lc.fenced);
    /* The first heartbeat goes at once: it is what unfences. */
    CHECK_EQ(cn_lc_poll(&lc, 20, true), CN_LCA_HEARTBEAT);
    cn_lc_heartbeat(&lc, 25, 0, false, true);
    CHECK(!lc.fenced);
    CHECK(lc.caught_up);
    CHECK_EQ(cn_lc_poll(&lc, 524, true), CN_LCA_NONE);
    CHECK_EQ(cn_lc_poll(&lc, 525, true), CN_LCA_HEARTBEAT);
}

UNIT_TEST(fenced_heartbeats_come_sooner)
{
    struct cn_lc lc = fresh();
    cn_lc_poll(&lc, 0, true);
    cn_lc_registered(&lc, 0, 0, 7);
    cn_lc_poll(&lc, 0, true);
    cn_lc_heartbeat(&lc, 0, 0, true, false);
    CHECK_EQ(cn_lc_poll(&lc, 99, true), CN_LCA_NONE);
    CHECK_EQ(cn_lc_poll(&lc, 100, true), CN_LCA_HEARTBEAT);
}

UNIT_TEST(no_controller_backs_off)
{
    struct cn_lc lc = fresh();
    CHECK_EQ(cn_lc_poll(&lc, 0, false), CN_LCA_NONE);
    CHECK(!lc.in_flight);
    CHECK_EQ(lc.next_ms, 50);
    CHECK_EQ(cn_lc_poll(&lc, 49, true), CN_LCA_NONE);
    CHECK_EQ(cn_lc_poll(&lc, 50, false), CN_LCA_NONE);
    CHECK_EQ(lc.next_ms, 150); /* doubled */
    CHECK_EQ(cn_lc_poll(&lc, 150, true), CN_LCA_REGISTER);
}

UNIT_TEST(not_controller_rediscovers_with_capped_backoff)
{
    struct cn_lc lc = fresh();
    int64_t t = 0;
    int64_t waits[6];
    for (int i = 0; i < 6; i++) {
        CHECK_EQ(cn_lc_poll(&lc, t, true), CN_LCA_REGISTER);
        cn_lc_registered(&lc, t, CN_LC_ERR_TRANSPORT, -1);
        waits[i] = lc.next_ms - t;
        t = lc.next_ms;
    }
    CHECK_EQ(waits[0], 50);
    CHECK_EQ(waits[1], 100);
    CHECK_EQ(waits[2], 200);
    CHECK_EQ(waits[3], 400);
    CHECK_EQ(waits[4], 400);
    CHECK_EQ(lc.state, CN_LC_UNREGISTERED);
    /* Success resets the backoff. */
    cn_lc_poll(&lc, t, true);
    cn_lc_registered(&lc, t, 0, 3);
    cn_lc_poll(&lc, t, true);
    cn_lc_heartbeat(&lc, t, CN_LC_ERR_TRANSPORT, false, false);
    CHECK_EQ(lc.next_ms - t, 50);
    CHECK_EQ(lc.state, CN_LC_REGISTERED);
}

UNIT_TEST(stale_epoch_registers_again)
{
    struct cn_lc lc = fresh();
    cn_lc_poll(&lc, 0, true);
    cn_lc_registered(&lc, 0, 0, 10);
    cn_lc_poll(&lc, 0, true);
    cn_lc_heartbeat(&lc, 0, 0, false, true);
    CHECK_EQ(cn_lc_poll(&lc, 500, true), CN_LCA_HEARTBEAT);
    cn_lc_heartbeat(&lc, 501, KAFKA_STALE_BROKER_EPOCH, false, false);
    CHECK_EQ(lc.state, CN_LC_UNREGISTERED);
    CHECK_EQ(lc.epoch, -1);
    CHECK(lc.fenced);
    CHECK_EQ(cn_lc_poll(&lc, 501, true), CN_LCA_REGISTER);
    cn_lc_registered(&lc, 502, 0, 20);
    CHECK_EQ(lc.epoch, 20);
    CHECK_EQ(lc.registrations, 2);
}

UNIT_TEST(unregistered_id_registers_again)
{
    struct cn_lc lc = fresh();
    cn_lc_poll(&lc, 0, true);
    cn_lc_registered(&lc, 0, 0, 10);
    cn_lc_poll(&lc, 0, true);
    cn_lc_heartbeat(&lc, 3, KAFKA_BROKER_ID_NOT_REGISTERED, false, false);
    CHECK_EQ(cn_lc_poll(&lc, 3, true), CN_LCA_REGISTER);
}

UNIT_TEST(refused_registration_retries)
{
    struct cn_lc lc = fresh();
    cn_lc_poll(&lc, 0, true);
    cn_lc_registered(&lc, 0, KAFKA_DUPLICATE_BROKER_REGISTRATION, -1);
    CHECK_EQ(lc.state, CN_LC_UNREGISTERED);
    CHECK_EQ(cn_lc_poll(&lc, 49, true), CN_LCA_NONE);
    CHECK_EQ(cn_lc_poll(&lc, 50, true), CN_LCA_REGISTER);
}

UNIT_TEST(fenced_again_is_remembered)
{
    struct cn_lc lc = fresh();
    cn_lc_poll(&lc, 0, true);
    cn_lc_registered(&lc, 0, 0, 1);
    cn_lc_poll(&lc, 0, true);
    cn_lc_heartbeat(&lc, 0, 0, false, true);
    CHECK(!lc.fenced);
    cn_lc_poll(&lc, 500, true);
    cn_lc_heartbeat(&lc, 500, 0, true, true);
    CHECK(lc.fenced);
    CHECK_EQ(lc.state, CN_LC_REGISTERED);
}

UNIT_MAIN(registers_first_then_heartbeats, fenced_heartbeats_come_sooner,
          no_controller_backs_off,
          not_controller_rediscovers_with_capped_backoff,
          stale_epoch_registers_again, unregistered_id_registers_again,
          refused_registration_retries, fenced_again_is_remembered)
