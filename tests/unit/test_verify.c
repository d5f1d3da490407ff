/*
 * test_verify.c - the `cairnctl verify` history checker on hand-made
 * histories: a clean one passes, each planted anomaly is reported under
 * its kind.
 *
 * The checker lives in src/cli (cairnctl's sources, not cairn_core), so
 * it is compiled into this test directly.
 */
#include <string.h>

#include "../../src/cli/verify_check.c"
#include "unit.h"

/* Two committed writer transactions over in/0 and in/1, one aborted one
 * (read uncommitted only), and one rpw transaction processing the first. */
static struct cn_vcheck *clean(void)
{
    static const char *const lines[] = {
        "W w0.0.0 in 0 0 w0.0.0.0\n", "W w0.0.0 in 1 0 w0.0.0.1\n",
        "S w0.0.0\n",                  "C w0.0.0\n",
        "W w0.0.1 in 0 2 w0.0.1.0\n", "A w0.0.1\n",
        "W w0.0.2 in 0 4 w0.0.2.0\n", "W w0.0.2 in 0 5 w0.0.2.1\n",
        "S w0.0.2\n",                  "C w0.0.2\n",
        "W r0.0.0 out 0 0 r0.0.0.0:w0.0.0.0\n",
        "W r0.0.0 out 1 0 r0.0.0.1:w0.0.0.1\n",
        "S r0.0.0\n",                  "C r0.0.0\n",
        "W w0.0.3 in 0 7 w0.0.3.", /* torn by a kill -9 */
    };
    struct cn_vcheck *vc = cn_vcheck_new();

    CHECK(vc != NULL);
    cn_vcheck_set_rpw(vc, "in", "out");
    for (size_t i = 0; i < sizeof lines / sizeof *lines; i++)
        cn_vcheck_history(vc, lines[i]);
    for (int s = CN_VC_FINAL_RU; s <= CN_VC_FINAL_RC; s++) {
        bool rc = s == CN_VC_FINAL_RC;
        cn_vcheck_read(vc, s, "in", 0, 0, "w0.0.0.0");
        if (!rc)
            cn_vcheck_read(vc, s, "in", 0, 2, "w0.0.1.0");
        cn_vcheck_read(vc, s, "in", 0, 4, "w0.0.2.0");
        cn_vcheck_read(vc, s, "in", 0, 5, "w0.0.2.1");
        cn_vcheck_read(vc, s, "in", 1, 0, "w0.0.0.1");
        cn_vcheck_read(vc, s, "out", 0, 0, "r0.0.0.0:w0.0.0.0");
        cn_vcheck_read(vc, s, "out", 1, 0, "r0.0.0.1:w0.0.0.1");
    }
    return vc;
}

/* Adds the rpw outputs for w0.0.2 so the clean history is complete. */
static void finish_rpw(struct cn_vcheck *vc)
{
    cn_vcheck_history(vc, "W r0.0.1 out 0 2 r0.0.1.0:w0.0.2.0\n");
    cn_vcheck_history(vc, "W r0.0.1 out 0 3 r0.0.1.1:w0.0.2.1\n");
    cn_vcheck_history(vc, "C r0.0.1\n");
    cn_vcheck_read(vc, CN_VC_FINAL_RC, "out", 0, 2, "r0.0.1.0:w0.0.2.0");
    cn_vcheck_read(vc, CN_VC_FINAL_RC, "out", 0, 3, "r0.0.1.1:w0.0.2.1");
    cn_vcheck_group_offset(vc, "in", 0, 7, 6, 7);
    cn_vcheck_group_offset(vc, "in", 1, 1, 1, 2);
}

static int64_t only(struct cn_vcheck *vc, enum cn_vc_kind k)
{
    struct cn_vc_report rep;
    int64_t n;

    CHECK_EQ(cn_vcheck_run(vc, &rep), 0);
    n = rep.count[k];
    if (rep.anomalies != n) {
        for (int i = 0; i < CN_VC_NKINDS; i++)
            for (int j = 0; j < rep.nexamples[i]; j++)
                fprintf(stderr, "  %s: %s\n", cn_vc_kind_name(i),
                        rep.example[i][j]);
    }
    CHECK_EQ(rep.anomalies, n);
    cn_vcheck_free(vc);
    return n;
}

UNIT_TEST(test_clean_history_passes)
{
    struct cn_vcheck *vc = clean();
    struct cn_vc_report rep;

    finish_rpw(vc);
    cn_vcheck_stall(vc, 100, 1000);
    CHECK_EQ(cn_vcheck_run(vc, &rep), 0);
    CHECK_EQ(rep.anomalies, 0);
    CHECK_EQ(rep.writes_acked, 9);
    CHECK_EQ(rep.txn_committed, 4);
    CHECK_EQ(rep.txn_aborted, 1);
    CHECK_EQ(rep.txn_open, 0); /* w0.0.3 left only a torn line */
    for (int i = 0; i < CN_VC_NKINDS; i++)
        for (int j = 0; j < rep.nexamples[i]; j++)
            fprintf(stderr, "  %s: %s\n", cn_vc_kind_name(i),
                    rep.example[i][j]);
    cn_vcheck_free(vc);
}

UNIT_TEST(test_lost_committed_write)
{
    struct cn_vcheck *vc = clean();

    finish_rpw(vc);
    cn_vcheck_history(vc, "W w1.0.0 in 1 1 w1.0.0.0\n");
    cn_vcheck_history(vc, "C w1.0.0\n");
    cn_vcheck_group_offset(vc, "in", 1, 2, 2, 2); /* rpw saw nothing */
    CHECK_EQ(only(vc, CN_VC_LOST), 1);
}

UNIT_TEST(test_aborted_visible)
{
    struct cn_vcheck *vc = clean();

    finish_rpw(vc);
    /* The tailing reader saw the aborted w0.0.1, and a never-committed
     * transaction of a killed worker shows up in the final read. */
    cn_vcheck_read(vc, CN_VC_TAIL_RC, "in", 0, 2, "w0.0.1.0");
    cn_vcheck_history(vc, "W w2.0.0 in 1 1 w2.0.0.0\n");
    cn_vcheck_read(vc, CN_VC_FINAL_RU, "in", 1, 1, "w2.0.0.0");
    cn_vcheck_read(vc, CN_VC_FINAL_RC, "out", 1, 9, "w2.0.0.0");
    CHECK_EQ(only(vc, CN_VC_ABORTED), 2);
}

UNIT_TEST(test_duplicate)
{
    struct cn_vcheck *vc = clean();

    finish_rpw(vc);
    cn_vcheck_read(vc, CN_VC_FINAL_RU, "in", 0, 6, "w0.0.2.1");
    CHECK_EQ(only(vc, CN_VC_DUPLICATE), 1);
}

UNIT_TEST(test_order)
{
    struct cn_vcheck *vc = cn_vcheck_new();

    cn_vcheck_history(vc, "W w0.0.0 in 0 0 w0.0.0.0\n");
    cn_vcheck_history(vc, "W w0.0.0 in 0 1 w0.0.0.1\n");
    cn_vcheck_history(vc, "C w0.0.0\n");
    cn_vcheck_history(vc, "W w0.1.0 in 0 3 w0.1.0.0\n");
    cn_vcheck_history(vc, "C w0.1.0\n");
    /* Later incarnation first, then the in-transaction order swapped. */
    cn_vcheck_read(vc, CN_VC_FINAL_RC, "in", 0, 0, "w0.1.0.0");
    cn_vcheck_read(vc, CN_VC_FINAL_RC, "in", 0, 1, "w0.0.0.1");
    cn_vcheck_read(vc, CN_VC_FINAL_RC, "in", 0, 2, "w0.0.0.0");
    CHECK_EQ(only(vc, CN_VC_ORDER), 2);
}

UNIT_TEST(test_torn_transaction)
{
    struct cn_vcheck *vc = cn_vcheck_new();

    /* One committed, one unknown outcome: each seen in part. */
    cn_vcheck_history(vc, "W w0.0.0 in 0 0 w0.0.0.0\n");
    cn_vcheck_history(vc, "W w0.0.0 in 1 0 w0.0.0.1\n");
    cn_vcheck_history(vc, "C w0.0.0\n");
    cn_vcheck_history(vc, "W w0.0.1 in 0 2 w0.0.1.0\n");
    cn_vcheck_history(vc, "W w0.0.1 in 1 2 w0.0.1.1\n");
    cn_vcheck_history(vc, "S w0.0.1\n");
    cn_vcheck_read(vc, CN_VC_FINAL_RC, "in", 0, 0, "w0.0.0.0");
    cn_vcheck_read(vc, CN_VC_FINAL_RC, "in", 1, 2, "w0.0.1.1");
    CHECK_EQ(only(vc, CN_VC_TORN), 2);
}

UNIT_TEST(test_unknown_outcome_all_or_nothing)
{
    struct cn_vcheck *vc = cn_vcheck_new();
    struct cn_vc_report rep;

    cn_vcheck_history(vc, "W w0.0.0 in 0 0 w0.0.0.0\n");
    cn_vcheck_history(vc, "S w0.0.0\n");
    cn_vcheck_history(vc, "W w0.0.1 in 0 2 w0.0.1.0\n");
    cn_vcheck_history(vc, "S w0.0.1\n");
    cn_vcheck_read(vc, CN_VC_FINAL_RC, "in", 0, 0, "w0.0.0.0");
    CHECK_EQ(cn_vcheck_run(vc, &rep), 0);
    CHECK_EQ(rep.anomalies, 0);
    CHECK_EQ(rep.txn_unknown, 2);
    cn_vcheck_free(vc);
}

UNIT_TEST(test_rpw_exactly_once)
{
    struct cn_vcheck *vc = clean();

    /* w0.0.2.0 processed twice, w0.0.2.1 never, offsets short. */
    cn_vcheck_history(vc, "W r0.0.1 out 0 2 r0.0.1.0:w0.0.2.0\n");
    cn_vcheck_history(vc, "C r0.0.1\n");
    cn_vcheck_history(vc, "W r0.1.0 out 0 4 r0.1.0.0:w0.0.2.0\n");
    cn_vcheck_history(vc, "C r0.1.0\n");
    cn_vcheck_read(vc, CN_VC_FINAL_RC, "out", 0, 2, "r0.0.1.0:w0.0.2.0");
    cn_vcheck_read(vc, CN_VC_FINAL_RC, "out", 0, 4, "r0.1.0.0:w0.0.2.0");
    cn_vcheck_group_offset(vc, "in", 0, 5, 6, 7);
    CHECK_EQ(only(vc, CN_VC_RPW), 3);
}

UNIT_TEST(test_stall)
{
    struct cn_vcheck *vc = clean();

    finish_rpw(vc);
    cn_vcheck_stall(vc, 31000, 30000);
    CHECK_EQ(only(vc, CN_VC_STALL), 1);
}

UNIT_TEST(test_bad_lines_ignored)
{
    struct cn_vcheck *vc = cn_vcheck_new();

    CHECK_EQ(cn_vcheck_history(vc, "W w0.0.0 in 0 0 w0.0.0.0"), CN_EINVAL);
    CHECK_EQ(cn_vcheck_history(vc, "W w0.0.0 in 0 0 w0.0.1.0\n"),
             CN_EINVAL);
    CHECK_EQ(cn_vcheck_history(vc, "X w0.0.0\n"), CN_EINVAL);
    CHECK_EQ(cn_vcheck_history(vc, "\n"), CN_EINVAL);
    CHECK_EQ(cn_vcheck_history(vc, "C w0.0.0\n"), 0);
    cn_vcheck_free(vc);
}

UNIT_MAIN(test_clean_history_passes, test_lost_committed_write,
          test_aborted_visible, test_duplicate, test_order,
          test_torn_transaction, test_unknown_outcome_all_or_nothing,
          test_rpw_exactly_once, test_stall, test_bad_lines_ignored)
