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
    cn_lc_heartbeat(&lc, 25, 0, false, true, false);
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
    cn_lc_heartbeat(&lc, 0, 0, true, false, false);
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
    cn_lc_heartbeat(&lc, t, CN_LC_ERR_TRANSPORT, false, false, false);
    CHECK_EQ(lc.next_ms - t, 50);
    CHECK_EQ(lc.state, CN_LC_REGISTERED);
}

UNIT_TEST(stale_epoch_registers_again)
{
    struct cn_lc lc = fresh();
    cn_lc_poll(&lc, 0, true);
    cn_lc_registered(&lc, 0, 0, 10);
    cn_lc_poll(&lc, 0, true);
    cn_lc_heartbeat(&lc, 0, 0, false, true, false);
    CHECK_EQ(cn_lc_poll(&lc, 500, true), CN_LCA_HEARTBEAT);
    cn_lc_heartbeat(&lc, 501, KAFKA_STALE_BROKER_EPOCH, false, false, false);
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
    cn_lc_heartbeat(&lc, 3, KAFKA_BROKER_ID_NOT_REGISTERED, false, false,
                    false);
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
    cn_lc_heartbeat(&lc, 0, 0, false, true, false);
    CHECK(!lc.fenced);
    cn_lc_poll(&lc, 500, true);
    cn_lc_heartbeat(&lc, 500, 0, true, true, false);
    CHECK(lc.fenced);
    CHECK_EQ(lc.state, CN_LC_REGISTERED);
}

/* A running broker: registered and unfenced, nothing in flight, the next
 * heartbeat due at 500. */
static struct cn_lc running(void)
{
    struct cn_lc lc = fresh();
    cn_lc_poll(&lc, 0, true);
    cn_lc_registered(&lc, 0, 0, 1);
    cn_lc_poll(&lc, 0, true);
    cn_lc_heartbeat(&lc, 0, 0, false, true, false);
    return lc;
}

UNIT_TEST(controlled_shutdown_heartbeats_until_approved)
{
    struct cn_lc lc = running();
    CHECK(!cn_lc_begin_shutdown(&lc, 100));
    CHECK(lc.want_shut_down);
    /* The first want_shut_down goes at once, not at 500. */
    CHECK_EQ(cn_lc_poll(&lc, 100, true), CN_LCA_HEARTBEAT);
    cn_lc_heartbeat(&lc, 110, 0, false, true, false);
    CHECK(!lc.shut_down);
    /* Then sooner than the interval (capped at 250 ms). */
    CHECK_EQ(cn_lc_poll(&lc, 359, true), CN_LCA_NONE);
    CHECK_EQ(cn_lc_poll(&lc, 360, true), CN_LCA_HEARTBEAT);
    /* A lost answer is retried like any heartbeat. */
    cn_lc_heartbeat(&lc, 360, CN_LC_ERR_TRANSPORT, false, false, false);
    CHECK(!lc.shut_down);
    CHECK_EQ(cn_lc_poll(&lc, 410, true), CN_LCA_HEARTBEAT);
    cn_lc_heartbeat(&lc, 420, 0, true, true, true);
    CHECK(lc.shut_down);
    /* Nothing more is sent. */
    CHECK_EQ(cn_lc_poll(&lc, 100000, true), CN_LCA_NONE);
    /* Asking again changes nothing. */
    CHECK(cn_lc_begin_shutdown(&lc, 100001));
}

UNIT_TEST(controlled_shutdown_waits_for_the_heartbeat_in_flight)
{
    struct cn_lc lc = running();
    CHECK_EQ(cn_lc_poll(&lc, 500, true), CN_LCA_HEARTBEAT);
    CHECK(!cn_lc_begin_shutdown(&lc, 505));
    CHECK_EQ(cn_lc_poll(&lc, 505, true), CN_LCA_NONE);
    /* That answer (to a heartbeat without want_shut_down) schedules the
     * next within the shutdown pace. */
    cn_lc_heartbeat(&lc, 510, 0, false, true, false);
    CHECK_EQ(cn_lc_poll(&lc, 760, true), CN_LCA_HEARTBEAT);
}

UNIT_TEST(nothing_to_move_shuts_down_at_once)
{
    /* Not registered yet. */
    struct cn_lc lc = fresh();
    CHECK(cn_lc_begin_shutdown(&lc, 0));
    CHECK_EQ(cn_lc_poll(&lc, 0, true), CN_LCA_NONE);
    /* Registered but fenced: it leads nothing. */
    lc = fresh();
    cn_lc_poll(&lc, 0, true);
    cn_lc_registered(&lc, 0, 0, 1);
    CHECK(cn_lc_begin_shutdown(&lc, 1));
    /* The controller forgot the registration meanwhile. */
    lc = running();
    CHECK(!cn_lc_begin_shutdown(&lc, 10));
    CHECK_EQ(cn_lc_poll(&lc, 10, true), CN_LCA_HEARTBEAT);
    cn_lc_heartbeat(&lc, 11, KAFKA_STALE_BROKER_EPOCH, false, false, false);
    CHECK(lc.shut_down);
    CHECK_EQ(cn_lc_poll(&lc, 11, true), CN_LCA_NONE);
}

UNIT_MAIN(registers_first_then_heartbeats, fenced_heartbeats_come_sooner,
          no_controller_backs_off,
          not_controller_rediscovers_with_capped_backoff,
          stale_epoch_registers_again, unregistered_id_registers_again,
          refused_registration_retries, fenced_again_is_remembered,
          controlled_shutdown_heartbeats_until_approved,
          controlled_shutdown_waits_for_the_heartbeat_in_flight,
          nothing_to_move_shuts_down_at_once)
