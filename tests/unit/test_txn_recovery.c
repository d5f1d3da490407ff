/*
 * test_txn_recovery.c - the transaction coordinator's machine (txn/coord.h)
 * over time and failure: timeouts, expiry, recovery from a replayed log
 * in each state, markers that fail and are retried, writes that fail,
 * parked requests, stop, producer ids running out, losing a partition,
 * and the one timer.
 *
 * Expected values are the broker's coordinator before the machine
 * (src/broker/txn_coord.c, txn_markers.c, h_txn.c at 1ba53e9), cited where
 * not obvious; the harness (txn_fake.h) fakes time, durability, markers
 * and producer ids and checks every record against the transition table.
 */
#include "txn_fake.h"

#define ID "txn-r"
#define P 7
#define E 5
#define LAST CN_TXN_EPOCH_LAST_USABLE

/* A machine whose log holds id in state s at (P, E) (partitions t:0 t:1
 * unless Empty/Complete), client_tv tv, led from now. */
static void replayed(enum cn_txn_state s, int8_t tv)
{
    bool open = s == CN_TXN_ONGOING || s == CN_TXN_PREPARE_COMMIT ||
                s == CN_TXN_PREPARE_ABORT || s == CN_TXN_PREPARE_EPOCH_FENCE;
    struct cn_txn_meta m;
    fk_meta(&m, ID, P, E, s, open ? "t:0 t:1" : NULL);
    m.client_tv = tv;
    fk_init_replayed(&m);
}

/* ---- 3. timeouts -------------------------------------------------------- */

/* An Ongoing transaction open longer than its timeout is aborted on the
 * first check after, with one bump: PrepareAbort at E+1, abort markers,
 * CompleteAbort (txn_markers.c:231-261; "longer": :242 is <=). */
UNIT_TEST(test_timeout_abort)
{
    fk_init();
    struct fk_producer p = fk_ongoing(ID, "t:0");
    fk_advance(60000); /* exactly the timeout: not yet */
    CHECK_EQ(fk_nnew_appends(), 0);
    fk_advance(F.cfg.abort_check_interval_ms);
    const struct fk_app *r = fk_new_append(0);
    CHECK(r && r->m.state == CN_TXN_PREPARE_ABORT &&
          r->m.producer_epoch == p.epoch + 1 &&
          r->role == CN_TXN_WRITE_DECISION);
    fk_durable(KAFKA_NONE);
    CHECK_EQ(fk_stats().timed_out_aborts, 1);
    const struct fk_mk *k = fk_new_markers(0);
    CHECK(k && !k->commit && k->producer_epoch == p.epoch + 1);
    fk_markers(-1);
    r = fk_new_append(0);
    CHECK(r && r->m.state == CN_TXN_COMPLETE_ABORT);
    fk_durable(KAFKA_NONE);
    CHECK_EQ(fk_stats().aborts, 1);
    fk_fini();
}

/* A transaction whose change is being written is not timed out by that
 * check (txn_markers.c:241), only by a later one. */
UNIT_TEST(test_timeout_skips_busy)
{
    fk_init();
    struct fk_producer p = fk_ongoing(ID, "t:0");
    fk_advance(60000);
    fk_add(ID, p.pid, p.epoch, "t:1"); /* in flight over the next check */
    fk_advance(F.cfg.abort_check_interval_ms);
    CHECK_EQ(fk_nnew_appends(), 0);
    fk_durable(KAFKA_NONE);
    fk_advance(F.cfg.abort_check_interval_ms);
    CHECK(fk_last_append() &&
          fk_last_append()->m.state == CN_TXN_PREPARE_ABORT);
    fk_settle();
    fk_fini();
}

/* After a timeout abort a TV2 client's EndTxn(abort) at the old epoch E
 * is the retry of the abort: NONE with E+1, which is how the Java client
 * recovers; a commit at E is INVALID_TXN_STATE (txn_markers.c:200-213,
 * h_txn.c:601-636). */
UNIT_TEST(test_timeout_then_tv2_retry)
{
    replayed(CN_TXN_ONGOING, 2);
    fk_advance(60000 + F.cfg.abort_check_interval_ms);
    fk_settle();
    CHECK(fk_find(ID) && fk_find(ID)->state == CN_TXN_COMPLETE_ABORT);
    int t = fk_end(ID, P, E, false, 5);
    const struct cn_txn_answer *a = fk_answer_for(t);
    CHECK(a && a->error == KAFKA_NONE && a->producer_id == P &&
          a->producer_epoch == E + 1);
    CHECK_EQ(fk_err(fk_end(ID, P, E, true, 5)), KAFKA_INVALID_TXN_STATE);
    CHECK_EQ(fk_nnew_appends(), 0);
    fk_fini();
}

/* KAFKA-19690: after the bump the epoch is checked before the state: a
 * leader verifying E hears INVALID_PRODUCER_EPOCH (txn_verify.c:319-323). */
UNIT_TEST(test_epoch_before_state)
{
    replayed(CN_TXN_ONGOING, 2);
    fk_advance(60000 + F.cfg.abort_check_interval_ms);
    fk_settle();
    CHECK_EQ(cn_txn_verify(F.c, ID, P, E, "t", 0),
             KAFKA_INVALID_PRODUCER_EPOCH);
    CHECK_EQ(cn_txn_verify(F.c, ID, P, E + 1, "t", 0),
             KAFKA_INVALID_TXN_STATE);
    fk_fini();
}

/* ---- 4. expiry ---------------------------------------------------------- */

static void expiry_config(void)
{
    struct cn_txn_config cfg = fk_config();
    cfg.id_expiration_ms = 30000;
    cfg.expiry_check_interval_ms = 1000;
    fk_init_cfg(&cfg);
}

/* An idle Empty/Complete id unused for longer than the expiration is
 * written as a tombstone and forgotten once that is durable
 * (txn_coord.c:466-510). */
UNIT_TEST(test_expiry)
{
    expiry_config();
    fk_new_producer(ID);
    fk_advance(30000); /* exactly the expiration: not yet */
    CHECK_EQ(fk_nnew_appends(), 0);
    fk_advance(1000);
    const struct fk_app *r = fk_new_append(0);
    CHECK(r && r->tombstone && r->role == CN_TXN_WRITE_CHANGE);
    CHECK(fk_find(ID) != NULL); /* until durable */
    fk_durable(KAFKA_NONE);
    CHECK(fk_find(ID) == NULL);
    CHECK_EQ(cn_txn_count(F.c, -1), 0);
    fk_fini();
}

/* An Ongoing transaction never expires (it times out instead). */
UNIT_TEST(test_expiry_not_ongoing)
{
    expiry_config();
    fk_ongoing(ID, "t:0"); /* timeout 60 s > expiration 30 s */
    fk_advance(50000);
    CHECK_EQ(fk_nnew_appends(), 0);
    CHECK(fk_find(ID) && fk_find(ID)->state == CN_TXN_ONGOING);
    fk_fini();
}

/* A tombstone that fails keeps the id, idle, and a later check tries
 * again. */
UNIT_TEST(test_expiry_failed_keeps_id)
{
    expiry_config();
    fk_new_producer(ID);
    fk_advance(31000);
    CHECK(fk_last_append() && fk_last_append()->tombstone);
    fk_durable(KAFKA_COORDINATOR_NOT_AVAILABLE);
    CHECK(fk_find(ID) && fk_find(ID)->state == CN_TXN_EMPTY);
    CHECK(!cn_txn_busy(F.c, ID));
    fk_advance(1000);
    CHECK(fk_nnew_appends() == 1 && fk_new_append(0)->tombstone);
    fk_durable(KAFKA_NONE);
    CHECK(fk_find(ID) == NULL);
    fk_fini();
}

/* ---- 5. recovery from the log ------------------------------------------- */

/* A decided transaction in the log is finished at LEADER: markers with
 * the stored producer and epoch (not a "first after decision" send: the
 * fail point after the decision's sync is the live path's,
 * txn_coord.c:609-614), then Complete (acts.resumed counts it). */
static void replay_decided(bool commit)
{
    replayed(commit ? CN_TXN_PREPARE_COMMIT : CN_TXN_PREPARE_ABORT, 1);
    CHECK(cn_txn_busy(F.c, ID));
    const struct fk_mk *k = fk_last_markers();
    CHECK(k && k->commit == commit && k->producer_id == P &&
          k->producer_epoch == E && k->n == 2 && !k->first_after_decision);
    fk_markers(-1);
    const struct fk_app *r = fk_last_append();
    CHECK(r &&
          r->m.state ==
              (commit ? CN_TXN_COMPLETE_COMMIT : CN_TXN_COMPLETE_ABORT) &&
          r->m.producer_epoch == E && r->role == CN_TXN_WRITE_COMPLETE);
    fk_durable(KAFKA_NONE);
    CHECK(!cn_txn_busy(F.c, ID));
    fk_fini();
}

UNIT_TEST(test_replay_prepare_commit_completes)
{
    replay_decided(true);
}

UNIT_TEST(test_replay_prepare_abort_completes)
{
    replay_decided(false);
}

/* acts.resumed counts the decided transactions of the part led. */
UNIT_TEST(test_replay_resumed_count)
{
    struct cn_txn_config cfg = fk_config();
    fk_init_loading(&cfg);
    char a[32], b[32];
    fk_id_in_part("r", 1, a, sizeof a);
    fk_id_in_part("s", 1, b, sizeof b);
    fk_replay_state(a, 1, 0, CN_TXN_PREPARE_COMMIT, "t:0");
    fk_replay_state(b, 2, 0, CN_TXN_PREPARE_ABORT, "t:1");
    fk_leader(0);
    CHECK_EQ(F.resumed, 0);
    fk_leader(1);
    CHECK_EQ(F.resumed, 2);
    CHECK_EQ(fk_nnew_markers(), 2);
    fk_leader(2);
    fk_leader(3);
    fk_settle();
    fk_fini();
}

/* Idle states replay idle: nothing is sent or written at LEADER. */
UNIT_TEST(test_replay_idle_states)
{
    static const enum cn_txn_state idle[] = {CN_TXN_EMPTY,
                                             CN_TXN_COMPLETE_COMMIT,
                                             CN_TXN_COMPLETE_ABORT,
                                             CN_TXN_ONGOING,
                                             CN_TXN_PREPARE_EPOCH_FENCE};
    for (size_t i = 0; i < sizeof idle / sizeof idle[0]; i++) {
        replayed(idle[i], 1);
        CHECK_EQ(F.napp, 0);
        CHECK_EQ(F.nmk, 0);
        CHECK_EQ(F.resumed, 0);
        const struct cn_txn_meta *m = fk_find(ID);
        CHECK(m && m->state == idle[i] && m->producer_id == P &&
              m->producer_epoch == E);
        CHECK(!cn_txn_busy(F.c, ID));
        fk_fini();
    }
}

/* A replayed Ongoing transaction is open and times out as a live one. */
UNIT_TEST(test_replay_ongoing_times_out)
{
    replayed(CN_TXN_ONGOING, 1);
    CHECK_EQ(cn_txn_verify(F.c, ID, P, E, "t", 1), KAFKA_NONE);
    fk_advance(60000 + F.cfg.abort_check_interval_ms);
    CHECK(fk_last_append() &&
          fk_last_append()->m.state == CN_TXN_PREPARE_ABORT);
    fk_settle();
    fk_fini();
}

/* A tombstone removes the id; the last record of an id wins; a record
 * that does not decode is skipped (txn_coord.c:514-549). */
UNIT_TEST(test_replay_last_record_wins)
{
    struct cn_txn_config cfg = fk_config();
    fk_init_loading(&cfg);
    fk_replay_state(ID, P, E, CN_TXN_ONGOING, "t:0");
    fk_replay_state(ID, P, E, CN_TXN_COMPLETE_COMMIT, NULL);
    fk_replay_state("gone", 3, 0, CN_TXN_EMPTY, NULL);
    fk_replay_state("gone", 3, 0, CN_TXN_DEAD, NULL);
    static const uint8_t junk[] = {0, 9, 1, 2, 3};
    CHECK_EQ(cn_txn_load_record(F.c, fk_part(ID), cn_bytes_of(junk, 5),
                                cn_bytes_of(junk, 5)),
             0);
    fk_lead_all();
    const struct cn_txn_meta *m = fk_find(ID);
    CHECK(m && m->state == CN_TXN_COMPLETE_COMMIT);
    CHECK(fk_find("gone") == NULL);
    CHECK(cn_txn_find_pid(F.c, 3) == NULL);
    CHECK_EQ(cn_txn_count(F.c, -1), 1);
    CHECK_EQ(F.napp + F.nmk, 0);
    fk_fini();
}

/* A replayed PrepareCommit with a NextProducerId (TV2 overflow) sends
 * its markers as (P, 32767) and completes onto (Q, 0, prev P)
 * (txn_markers.c:80-87). */
UNIT_TEST(test_replay_rotation)
{
    struct cn_txn_meta m;
    fk_meta(&m, ID, P, INT16_MAX, CN_TXN_PREPARE_COMMIT, "t:0");
    m.next_producer_id = 555;
    m.client_tv = 2;
    fk_init_replayed(&m);
    const struct fk_mk *k = fk_last_markers();
    CHECK(k && k->producer_id == P && k->producer_epoch == INT16_MAX);
    fk_markers(-1);
    const struct fk_app *r = fk_last_append();
    CHECK(r && r->m.state == CN_TXN_COMPLETE_COMMIT &&
          r->m.producer_id == 555 && r->m.producer_epoch == 0 &&
          r->m.prev_producer_id == P && r->m.next_producer_id == -1);
    fk_durable(KAFKA_NONE);
    CHECK(cn_txn_find_pid(F.c, 555) != NULL);
    CHECK_EQ(F.pids_taken, 0);
    fk_fini();
}

/* The newest marker send of id since the window, or NULL. */
static const struct fk_mk *markers_of(const char *id)
{
    for (size_t i = F.nmk; i-- > F.mk_w;)
        if (!strcmp(F.mk[i].id, id))
            return &F.mk[i];
    return NULL;
}

/* Markers carry the coordinator epoch their id's part was led with (each
 * part led at its own epoch), retries too. */
UNIT_TEST(test_markers_carry_coordinator_epoch)
{
    struct cn_txn_config cfg = fk_config();
    fk_init_loading(&cfg);
    char a[32], b[32];
    fk_id_in_part("a", 1, a, sizeof a);
    fk_id_in_part("b", 3, b, sizeof b);
    fk_replay_state(a, P, E, CN_TXN_PREPARE_COMMIT, "t:0");
    fk_replay_state(b, P + 1, E, CN_TXN_PREPARE_ABORT, "t:1");
    size_t mk0 = F.nmk;
    for (int32_t i = 0; i < F.cfg.nparts; i++)
        fk_leader_epoch(i, 10 + i);
    F.mk_w = mk0;
    CHECK_EQ(fk_nnew_markers(), 2);
    const struct fk_mk *ka = markers_of(a), *kb = markers_of(b);
    CHECK(ka && ka->coordinator_epoch == 11 && ka->commit);
    CHECK(kb && kb->coordinator_epoch == 13 && !kb->commit);
    uint64_t seq_a = ka ? ka->seq : 0;
    fk_markers(0); /* the oldest send (a's) fails */
    fk_advance(F.cfg.marker_retry_ms);
    CHECK_EQ(fk_nnew_markers(), 1);
    ka = markers_of(a);
    CHECK(ka && ka->seq != seq_a && ka->coordinator_epoch == 11);
    fk_settle();
    fk_fini();
}

/* ---- 6. markers failing, writes failing ---------------------------------- */

/* One partition's marker fails: no Complete; after marker_retry_ms every
 * partition is sent again (a repeated marker is harmless,
 * txn_markers.c:108-129); one Complete in the end. */
UNIT_TEST(test_marker_retry)
{
    fk_init();
    fk_decided(ID, "t:0 t:1 t:2", true);
    const struct fk_mk *k = fk_last_markers();
    CHECK(k && k->n == 3 && k->first_after_decision);
    uint64_t seq0 = k ? k->seq : 0;
    fk_markers(1);
    CHECK_EQ(fk_nnew_appends(), 0);
    CHECK_EQ(fk_stats().marker_retry_queue, 1);
    fk_advance(F.cfg.marker_retry_ms - 1);
    CHECK_EQ(fk_nnew_markers(), 0);
    fk_advance(1);
    CHECK_EQ(fk_nnew_markers(), 1);
    k = fk_last_markers();
    CHECK(k && k->n == 3 && !k->first_after_decision && k->commit &&
          k->seq != seq0);
    CHECK_EQ(fk_stats().marker_retry_queue, 0);
    fk_markers(-1);
    CHECK_EQ(fk_nnew_appends(), 1);
    fk_durable(KAFKA_NONE);
    CHECK(fk_find(ID) && fk_find(ID)->state == CN_TXN_COMPLETE_COMMIT);
    CHECK_EQ(fk_stats().commits, 1);
    fk_fini();
}

/* A result for an older send, or for an unknown id, changes nothing. */
/* Among many ids, two marker retries due at different times: the timer
 * asks for each in turn (the machine keeps the earliest due, it does not
 * scan for it), and each retry sends only its own id's markers. */
UNIT_TEST(test_marker_retry_among_many)
{
    fk_init();
    char id[16];
    for (int i = 0; i < 40; i++) {
        snprintf(id, sizeof id, "n%d", i);
        fk_new_producer(id);
    }
    int64_t t0 = F.now.mono_ms;
    fk_decided("a", "t:0", true);
    fk_markers(0);
    CHECK_EQ(F.timer, t0 + F.cfg.marker_retry_ms);
    fk_advance(300);
    fk_decided("b", "t:1", false);
    fk_markers(0);
    CHECK_EQ(F.timer, t0 + F.cfg.marker_retry_ms);
    CHECK_EQ(fk_stats().marker_retry_queue, 2);
    fk_advance(F.cfg.marker_retry_ms - 300 - 1);
    CHECK_EQ(fk_nnew_markers(), 0);
    fk_advance(1);
    CHECK_EQ(fk_nnew_markers(), 1);
    CHECK(fk_last_markers() && !strcmp(fk_last_markers()->id, "a"));
    CHECK_EQ(F.timer, t0 + 300 + F.cfg.marker_retry_ms);
    fk_markers(-1);
    fk_advance(300);
    CHECK_EQ(fk_nnew_markers(), 1);
    CHECK(fk_last_markers() && !strcmp(fk_last_markers()->id, "b"));
    fk_markers(-1);
    CHECK_EQ(fk_stats().marker_retry_queue, 0);
    CHECK_EQ(F.timer, t0 + F.cfg.abort_check_interval_ms);
    fk_settle();
    fk_fini();
}

UNIT_TEST(test_marker_stale_seq_ignored)
{
    fk_init();
    fk_decided(ID, "t:0 t:1", true);
    uint64_t seq0 = fk_last_markers() ? fk_last_markers()->seq : 0;
    fk_markers(0);
    fk_advance(F.cfg.marker_retry_ms);
    CHECK_EQ(fk_nnew_markers(), 1);
    size_t n0 = F.napp + F.nmk + F.nans;
    fk_marker_raw(ID, seq0, 0, KAFKA_NONE);
    fk_marker_raw(ID, seq0, 1, KAFKA_NONE);
    fk_marker_raw("nobody", 1, 0, KAFKA_NONE);
    CHECK_EQ(F.napp + F.nmk + F.nans, n0);
    fk_markers(-1);
    CHECK_EQ(fk_nnew_appends(), 1);
    fk_settle();
    fk_fini();
}

/* A failed change answers the client COORDINATOR_NOT_AVAILABLE and
 * leaves the id as it was, idle (txn_coord.c:278-280, h_txn.c:275-281). */
UNIT_TEST(test_durable_fail)
{
    fk_init();
    struct fk_producer p = fk_new_producer(ID);
    int t = fk_add(ID, p.pid, p.epoch, "t:0");
    fk_durable(KAFKA_COORDINATOR_NOT_AVAILABLE);
    CHECK_EQ(fk_err(t), KAFKA_COORDINATOR_NOT_AVAILABLE);
    CHECK(fk_find(ID) && fk_find(ID)->state == CN_TXN_EMPTY);
    CHECK(!cn_txn_busy(F.c, ID));
    t = fk_add(ID, p.pid, p.epoch, "t:0");
    fk_settle();
    CHECK_EQ(fk_err(t), KAFKA_NONE);
    fk_fini();
}

/* A failed decision: the client hears it, no markers, still Ongoing
 * (h_txn.c:650-656). */
UNIT_TEST(test_durable_fail_decision)
{
    fk_init();
    struct fk_producer p = fk_ongoing(ID, "t:0");
    int t = fk_end(ID, p.pid, p.epoch, true, 4);
    fk_durable(KAFKA_COORDINATOR_NOT_AVAILABLE);
    CHECK_EQ(fk_err(t), KAFKA_COORDINATOR_NOT_AVAILABLE);
    CHECK_EQ(fk_nnew_markers(), 0);
    CHECK(fk_find(ID) && fk_find(ID)->state == CN_TXN_ONGOING);
    CHECK(!cn_txn_busy(F.c, ID));
    fk_fini();
}

/* A failed Complete (the transaction log below min ISR, say) is written
 * again after marker_retry_ms, without the markers, which are all in;
 * the id stays busy in PrepareCommit until it is durable (Kafka's log-
 * append retry queue), and requests meanwhile wait out park_max_ms. */
UNIT_TEST(test_complete_fail_retried)
{
    fk_init();
    fk_decided(ID, "t:0", true);
    fk_markers(-1);
    fk_durable(KAFKA_COORDINATOR_NOT_AVAILABLE);
    CHECK(cn_txn_busy(F.c, ID));
    CHECK(fk_find(ID) && fk_find(ID)->state == CN_TXN_PREPARE_COMMIT);
    CHECK_EQ(fk_stats().marker_retry_queue, 1);
    int t = fk_init_pid(ID);
    fk_advance(F.cfg.marker_retry_ms - 1);
    CHECK_EQ(fk_nnew_appends() + fk_nnew_markers(), 0);
    fk_advance(1);
    CHECK_EQ(fk_nnew_markers(), 0);
    CHECK_EQ(fk_nnew_appends(), 1);
    CHECK_EQ(fk_stats().marker_retry_queue, 0);
    fk_durable(KAFKA_COORDINATOR_NOT_AVAILABLE); /* and again */
    fk_advance(F.cfg.marker_retry_ms);
    CHECK_EQ(fk_nnew_appends(), 1);
    fk_durable(KAFKA_NONE);
    CHECK(fk_find(ID) && fk_find(ID)->state == CN_TXN_COMPLETE_COMMIT);
    CHECK_EQ(fk_stats().commits, 1);
    /* The InitPid parked at the first failure waited its longest. */
    CHECK_EQ(fk_err(t), KAFKA_CONCURRENT_TRANSACTIONS);
    t = fk_init_pid(ID);
    fk_settle();
    CHECK_EQ(fk_err(t), KAFKA_NONE);
    fk_fini();
}

/* A Complete refused because the partition has another leader is not
 * retried: the new coordinator finishes the transaction from its
 * PrepareCommit, and this one is about to forget the partition. */
UNIT_TEST(test_complete_fail_not_coordinator)
{
    fk_init();
    fk_decided(ID, "t:0", true);
    fk_markers(-1);
    fk_durable(KAFKA_NOT_COORDINATOR);
    CHECK(cn_txn_busy(F.c, ID));
    CHECK_EQ(fk_stats().marker_retry_queue, 0);
    fk_advance(3 * F.cfg.marker_retry_ms);
    CHECK_EQ(fk_nnew_appends() + fk_nnew_markers(), 0);
    fk_fini();
}

/* ---- 9. parking, stop, producer ids, leadership, the timer -------------- */

/* Parked requests run in arrival order when the id goes idle: the
 * EndTxn retry first (NONE), then InitPid (its bump would fence the
 * retry).  Each waits at most park_max_ms from its own arrival. */
UNIT_TEST(test_park_order)
{
    fk_init();
    struct fk_producer p = fk_decided(ID, "t:0", true);
    int ta = fk_end(ID, p.pid, p.epoch, true, 4);
    int tb = fk_init_pid(ID);
    CHECK_EQ(fk_stats().parked_requests, 2);
    fk_settle();
    CHECK_EQ(fk_err(ta), KAFKA_NONE);
    const struct cn_txn_answer *b = fk_answer_for(tb);
    CHECK(b && b->error == KAFKA_NONE && b->producer_epoch == p.epoch + 1);
    fk_fini();
}

UNIT_TEST(test_park_deadline)
{
    fk_init();
    struct fk_producer p = fk_decided(ID, "t:0", true);
    int ta = fk_end(ID, p.pid, p.epoch, true, 4);
    fk_advance(500);
    int tb = fk_init_pid(ID);
    fk_advance(F.cfg.park_max_ms - 500);
    CHECK_EQ(fk_err(ta), KAFKA_CONCURRENT_TRANSACTIONS);
    CHECK_EQ(fk_err(tb), -1);
    CHECK_EQ(fk_stats().parked_requests, 1);
    fk_advance(500);
    CHECK_EQ(fk_err(tb), KAFKA_CONCURRENT_TRANSACTIONS);
    CHECK_EQ(fk_stats().parked_requests, 0);
    fk_settle();
    fk_fini();
}

/* STOP answers the parked (CONCURRENT_TRANSACTIONS, as the re-run with
 * no_park did, txn_coord.c:649-652); afterwards nothing parks and a
 * write fails at once with COORDINATOR_NOT_AVAILABLE (:308-327). */
UNIT_TEST(test_stop_answers_parked)
{
    fk_init();
    fk_decided(ID, "t:0", true);
    int t = fk_init_pid(ID);
    fk_stop();
    CHECK_EQ(fk_err(t), KAFKA_CONCURRENT_TRANSACTIONS);
    int t2 = fk_init_pid(ID);
    CHECK_EQ(fk_err(t2), KAFKA_CONCURRENT_TRANSACTIONS);
    int t3 = fk_init_pid("other");
    CHECK_EQ(fk_err(t3), KAFKA_COORDINATOR_NOT_AVAILABLE);
    CHECK_EQ(fk_nnew_appends(), 0);
    fk_drop_markers(); /* the executor no longer delivers them */
    fk_fini();
}

/* No producer id left: InitPid parks (no answer, no record), WANT_PIDS
 * once, and PIDS_READY runs the waiting requests in order. */
UNIT_TEST(test_pids_eagain)
{
    fk_init();
    F.pids_eagain = true;
    int t1 = fk_init_pid(ID);
    int t2 = fk_init_pid("other");
    CHECK_EQ(F.napp, 0);
    CHECK_EQ(F.nans, 0);
    CHECK_EQ(F.want_pids, 1);
    F.pids_eagain = false;
    fk_pids_ready();
    fk_settle();
    const struct cn_txn_answer *a1 = fk_answer_for(t1);
    const struct cn_txn_answer *a2 = fk_answer_for(t2);
    CHECK(a1 && a1->error == KAFKA_NONE && a1->producer_id == 1000);
    CHECK(a2 && a2->error == KAFKA_NONE && a2->producer_id == 1001);
    fk_fini();
}

/* The TV2 overflow's EndTxn waits for a producer id the same way. */
UNIT_TEST(test_pids_eagain_overflow_end)
{
    struct cn_txn_meta m;
    fk_meta(&m, ID, P, LAST, CN_TXN_ONGOING, "t:0");
    m.client_tv = 2;
    fk_init_replayed(&m);
    F.pids_eagain = true;
    int t = fk_end(ID, P, LAST, true, 5);
    CHECK_EQ(F.want_pids, 1);
    CHECK_EQ(F.napp + F.nans, 0);
    F.pids_eagain = false;
    fk_pids_ready();
    fk_settle();
    const struct cn_txn_answer *a = fk_answer_for(t);
    CHECK(a && a->error == KAFKA_NONE && a->producer_id == 1000);
    fk_fini();
}

/* Another error of the seam: COORDINATOR_NOT_AVAILABLE (coord.h). */
UNIT_TEST(test_pids_error)
{
    fk_init();
    F.pids_err = -EIO;
    int t = fk_init_pid(ID);
    CHECK_EQ(fk_err(t), KAFKA_COORDINATOR_NOT_AVAILABLE);
    CHECK_EQ(F.napp, 0);
    fk_fini();
}

/* Losing a part forgets its ids, answers its parked NOT_COORDINATOR and
 * ignores its late marker results; other parts are untouched. */
UNIT_TEST(test_unleader_drops_part)
{
    fk_init();
    char a[32], b[32];
    fk_id_in_part("a", 0, a, sizeof a);
    fk_id_in_part("b", 1, b, sizeof b);
    struct fk_producer pb = fk_ongoing(b, "t:1");
    fk_decided(a, "t:0", true);
    int t = fk_init_pid(a);
    fk_unleader(0);
    CHECK_EQ(fk_err(t), KAFKA_NOT_COORDINATOR);
    CHECK(fk_find(a) == NULL);
    CHECK_EQ(cn_txn_count(F.c, 0), 0);
    fk_markers(-1);
    CHECK(fk_no_actions());
    CHECK_EQ(fk_err(fk_init_pid(a)), KAFKA_NOT_COORDINATOR);
    CHECK(fk_find(b) && fk_find(b)->state == CN_TXN_ONGOING);
    int tb = fk_end(b, pb.pid, pb.epoch, true, 4);
    fk_settle();
    CHECK_EQ(fk_err(tb), KAFKA_NONE);
    fk_fini();
}

/* KAFKA-18137: a part replayed but not yet led answers
 * COORDINATOR_LOAD_IN_PROGRESS, and losing another part does not touch
 * what it loaded. */
UNIT_TEST(test_loading_part)
{
    struct cn_txn_config cfg = fk_config();
    fk_init_loading(&cfg);
    char a[32], c[32];
    fk_id_in_part("a", 0, a, sizeof a);
    fk_id_in_part("c", 2, c, sizeof c);
    fk_replay_state(c, P, E, CN_TXN_EMPTY, NULL);
    fk_leader(0);
    fk_leader(1);
    fk_leader(3);
    CHECK_EQ(fk_err(fk_init_pid(c)), KAFKA_COORDINATOR_LOAD_IN_PROGRESS);
    fk_unleader(0);
    fk_leader(2);
    CHECK(fk_find(c) && fk_find(c)->producer_id == P);
    int t = fk_init_pid(c);
    fk_settle();
    CHECK_EQ(fk_err(t), KAFKA_NONE);
    CHECK_EQ(fk_err(fk_init_pid(a)), KAFKA_NOT_COORDINATOR);
    fk_fini();
}

/* The one timer asks for the earliest of: the next periodic check
 * (start + interval), a parked request's deadline, a marker retry. */
UNIT_TEST(test_timer_action)
{
    struct cn_txn_config cfg = fk_config();
    cfg.park_max_ms = 700;
    cfg.marker_retry_ms = 300;
    fk_init_cfg(&cfg);
    int64_t t0 = F.now.mono_ms;
    CHECK_EQ(F.timer, t0 + cfg.abort_check_interval_ms);
    fk_decided(ID, "t:0", true);
    CHECK_EQ(F.timer, t0 + cfg.abort_check_interval_ms);
    fk_init_pid(ID);
    CHECK_EQ(F.timer, t0 + 700);
    fk_markers(0);
    CHECK_EQ(F.timer, t0 + 300);
    fk_advance(300); /* the retry goes out */
    CHECK_EQ(fk_nnew_markers(), 1);
    CHECK_EQ(F.timer, t0 + 700);
    fk_settle();
    CHECK_EQ(F.timer, t0 + cfg.abort_check_interval_ms);
    fk_fini();
}

/* A request whose write is in flight when its part is lost still gets
 * one answer, NOT_COORDINATOR (Kafka completes pending appends of a lost
 * coordinator so), whether its WRITTEN comes later or not. */
UNIT_TEST(test_unleader_answers_writer)
{
    fk_init();
    char a[32];
    fk_id_in_part("a", 0, a, sizeof a);
    struct fk_producer p = fk_new_producer(a);
    int t = fk_add(a, p.pid, p.epoch, "t:0");
    fk_unleader(0);
    fk_durable(KAFKA_NONE);
    CHECK_EQ(fk_err(t), KAFKA_NOT_COORDINATOR);
    fk_fini();
}

/* STOP answers the requests waiting for producer ids too. */
UNIT_TEST(test_stop_answers_pids_parked)
{
    fk_init();
    F.pids_eagain = true;
    int t = fk_init_pid(ID);
    CHECK_EQ(fk_err(t), -1); /* parked */
    fk_stop();
    CHECK_EQ(fk_err(t), KAFKA_COORDINATOR_NOT_AVAILABLE);
    CHECK_EQ(fk_nnew_appends(), 0);
    /* Answered once: ids coming later resume nothing. */
    F.pids_eagain = false;
    fk_pids_ready();
    CHECK_EQ(fk_nnew_answers(), 0);
    CHECK_EQ(fk_nnew_appends(), 0);
    fk_fini();
}

/* Ids of part (cn_txn_foreach / cn_txn_count), Dead never listed. */
static int count_cb(void *arg, const struct cn_txn_meta *m)
{
    (void)m;
    (*(int *)arg)++;
    return 0;
}

UNIT_TEST(test_foreach_by_part)
{
    fk_init();
    char a[32], b[32];
    fk_id_in_part("a", 0, a, sizeof a);
    fk_id_in_part("b", 3, b, sizeof b);
    fk_new_producer(a);
    fk_new_producer(b);
    int n0 = 0, n3 = 0, all = 0;
    cn_txn_foreach(F.c, 0, count_cb, &n0);
    cn_txn_foreach(F.c, 3, count_cb, &n3);
    cn_txn_foreach(F.c, -1, count_cb, &all);
    CHECK_EQ(n0, 1);
    CHECK_EQ(n3, 1);
    CHECK_EQ(all, 2);
    CHECK_EQ(cn_txn_count(F.c, 3), 1);
    CHECK_EQ(cn_txn_count(F.c, 1), 0);
    fk_fini();
}

/* Losing a part while it loads forgets what it loaded: led again
 * without a replay, the id is unknown. */
UNIT_TEST(test_unleader_loading_part_forgets)
{
    struct cn_txn_config cfg = fk_config();
    fk_init_loading(&cfg);
    fk_replay_state(ID, P, E, CN_TXN_EMPTY, NULL);
    fk_unleader(fk_part(ID));
    fk_lead_all();
    CHECK(fk_find(ID) == NULL);
    CHECK_EQ(fk_err(fk_add(ID, P, E, "t:0")),
             KAFKA_INVALID_PRODUCER_ID_MAPPING);
    fk_fini();
}

UNIT_MAIN(test_timeout_abort, test_timeout_skips_busy,
          test_timeout_then_tv2_retry, test_epoch_before_state, test_expiry,
          test_expiry_not_ongoing, test_expiry_failed_keeps_id,
          test_replay_prepare_commit_completes,
          test_replay_prepare_abort_completes, test_replay_resumed_count,
          test_replay_idle_states, test_replay_ongoing_times_out,
          test_replay_last_record_wins, test_replay_rotation,
          test_markers_carry_coordinator_epoch, test_marker_retry,
          test_marker_retry_among_many, test_marker_stale_seq_ignored,
          test_durable_fail, test_durable_fail_decision,
          test_complete_fail_retried, test_complete_fail_not_coordinator,
          test_park_order, test_park_deadline, test_stop_answers_parked,
          test_pids_eagain, test_pids_eagain_overflow_end, test_pids_error,
          test_unleader_drops_part, test_loading_part, test_timer_action,
          test_unleader_answers_writer, test_stop_answers_pids_parked,
          test_foreach_by_part, test_unleader_loading_part_forgets)
