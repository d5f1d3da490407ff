/*
 * test_verify_cluster.c - the `cairnctl verify` checker's cluster-mode
 * side (issue #14) on hand-made histories: idempotent writers' one-record
 * "transactions" (S, then W and C once acknowledged), a tailing
 * read_uncommitted reader whose reads must stay in the final log, acked
 * offsets that must hold their value, and the per-partition ack stall.
 *
 * The checker lives in src/cli (cairnctl's sources, not cairn_core), so
 * it is compiled into this test directly.
 */
#include <string.h>

#include "../../src/cli/verify_check.c"
#include "unit.h"

/* w0 sent four records to in/0: three acknowledged at offsets 0..2, the
 * fourth's send failed (S only); the tailing reader saw offsets 0 and 1. */
static struct cn_vcheck *clean(void)
{
    static const char *const lines[] = {
        "S w0.0.0\n", "W w0.0.0 in 0 0 w0.0.0.0\n", "C w0.0.0\n",
        "S w0.0.1\n", "W w0.0.1 in 0 1 w0.0.1.0\n", "C w0.0.1\n",
        "S w0.0.2\n", "W w0.0.2 in 0 2 w0.0.2.0\n", "C w0.0.2\n",
        "S w0.0.3\n",
    };
    struct cn_vcheck *vc = cn_vcheck_new();

    CHECK(vc != NULL);
    for (size_t i = 0; i < sizeof lines / sizeof *lines; i++)
        CHECK_EQ(cn_vcheck_history(vc, lines[i]), 0);
    cn_vcheck_read(vc, CN_VC_TAIL_RU, "in", 0, 0, "w0.0.0.0");
    cn_vcheck_read(vc, CN_VC_TAIL_RU, "in", 0, 1, "w0.0.1.0");
    return vc;
}

/* The final passes, over what final[] names at offsets 0, 1, ... */
static void final_log(struct cn_vcheck *vc, const char *const *values, int n)
{
    for (int s = CN_VC_FINAL_RU; s <= CN_VC_FINAL_RC; s++)
        for (int i = 0; i < n; i++)
            cn_vcheck_read(vc, s, "in", 0, i, values[i]);
}

static struct cn_vc_report run(struct cn_vcheck *vc)
{
    struct cn_vc_report rep;

    CHECK_EQ(cn_vcheck_run(vc, &rep), 0);
    for (int i = 0; i < CN_VC_NKINDS; i++)
        for (int j = 0; j < rep.nexamples[i]; j++)
            fprintf(stderr, "  %s: %s\n", cn_vc_kind_name(i),
                    rep.example[i][j]);
    cn_vcheck_free(vc);
    return rep;
}

UNIT_TEST(test_idempotent_clean_passes)
{
    static const char *const log[] = {"w0.0.0.0", "w0.0.1.0", "w0.0.2.0"};
    struct cn_vcheck *vc = clean();
    struct cn_vc_report rep;

    final_log(vc, log, 3);
    cn_vcheck_ack_stall(vc, "in", 0, 5000, 20000);
    rep = run(vc);
    CHECK_EQ(rep.anomalies, 0);
    CHECK_EQ(rep.writes_acked, 3);
    CHECK_EQ(rep.txn_committed, 3);
    CHECK_EQ(rep.txn_unknown, 1); /* the failed send */
    CHECK_EQ(rep.reads_tail, 2);
}

UNIT_TEST(test_failed_send_may_appear)
{
    /* A send reported failed may still have been written. */
    static const char *const log[] = {"w0.0.0.0", "w0.0.1.0", "w0.0.2.0",
                                      "w0.0.3.0"};
    struct cn_vcheck *vc = clean();

    final_log(vc, log, 4);
    CHECK_EQ(run(vc).anomalies, 0);
}

UNIT_TEST(test_acked_record_lost)
{
    /* A failover truncated offset 2, and someone else's record took it. */
    static const char *const log[] = {"w0.0.0.0", "w0.0.1.0", "w1.0.0.0"};
    struct cn_vcheck *vc = clean();
    struct cn_vc_report rep;

    cn_vcheck_history(vc, "S w1.0.0\n");
    final_log(vc, log, 3);
    rep = run(vc);
    CHECK_EQ(rep.count[CN_VC_LOST], 1);
    CHECK_EQ(rep.anomalies, 1);
    CHECK(strstr(rep.example[CN_VC_LOST][0], "w0.0.2.0") != NULL);
}

UNIT_TEST(test_tail_read_vanished)
{
    /* The reader saw offset 1 hold w0.0.1.0; the final log has w1.0.0.0
     * there (w0.0.1.0 moved to 2: its acked offset no longer holds it). */
    static const char *const log[] = {"w0.0.0.0", "w1.0.0.0", "w0.0.1.0",
                                      "w0.0.2.0"};
    struct cn_vcheck *vc = clean();
    struct cn_vc_report rep;

    cn_vcheck_history(vc, "S w1.0.0\n");
    final_log(vc, log, 4);
    rep = run(vc);
    /* The tail read at 1, and the acks of w0.0.1.0 (at 1) and w0.0.2.0
     * (at 2): found elsewhere. */
    CHECK_EQ(rep.count[CN_VC_VANISHED], 3);
    CHECK_EQ(rep.anomalies, 3);
}

UNIT_TEST(test_tail_read_beyond_final_end)
{
    static const char *const log[] = {"w0.0.0.0"};
    struct cn_vcheck *vc = clean();
    struct cn_vc_report rep;

    final_log(vc, log, 1);
    rep = run(vc);
    /* The tail's read of offset 1, and the two acked records lost. */
    CHECK_EQ(rep.count[CN_VC_VANISHED], 1);
    CHECK(strstr(rep.example[CN_VC_VANISHED][0], "nothing") != NULL);
    CHECK_EQ(rep.count[CN_VC_LOST], 2);
    CHECK_EQ(rep.anomalies, 3);
}

UNIT_TEST(test_tail_duplicate)
{
    static const char *const log[] = {"w0.0.0.0", "w0.0.1.0", "w0.0.2.0"};
    struct cn_vcheck *vc = clean();
    struct cn_vc_report rep;

    /* Read again after a reset to the start: the same value twice. */
    cn_vcheck_read(vc, CN_VC_TAIL_RU, "in", 0, 0, "w0.0.0.0");
    final_log(vc, log, 3);
    rep = run(vc);
    CHECK_EQ(rep.count[CN_VC_DUPLICATE], 1);
    CHECK_EQ(rep.anomalies, 1);
}

UNIT_TEST(test_ack_stall_past_bound)
{
    static const char *const log[] = {"w0.0.0.0", "w0.0.1.0", "w0.0.2.0"};
    struct cn_vcheck *vc = clean();
    struct cn_vc_report rep;

    final_log(vc, log, 3);
    cn_vcheck_ack_stall(vc, "in", 2, 25000, 20000);
    rep = run(vc);
    CHECK_EQ(rep.count[CN_VC_STALL], 1);
    CHECK_EQ(rep.anomalies, 1);
    CHECK(strstr(rep.example[CN_VC_STALL][0], "in 2") != NULL);
}

UNIT_MAIN(test_idempotent_clean_passes, test_failed_send_may_appear,
          test_acked_record_lost, test_tail_read_vanished,
          test_tail_read_beyond_final_end, test_tail_duplicate,
          test_ack_stall_past_bound)
