/* test_epochs.c - the leader-epoch cache (partition/epochs.c): Kafka's
 * assign rules, OffsetsForLeaderEpoch answers from KIP-101 and KIP-279,
 * truncation from either end, and the checkpoint file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/wr.h"
#include "partition/epochs.h"
#include "unit.h"

static char *ckpt_path(const char *dir)
{
    char *p;
    if (asprintf(&p, "%s/%s", dir, CN_EPOCHS_FILE) < 0)
        abort();
    return p;
}

static void write_file(const char *dir, const char *text)
{
    char *p = ckpt_path(dir);
    FILE *f = fopen(p, "w");
    CHECK(f != NULL);
    fputs(text, f);
    fclose(f);
    free(p);
}

static char *read_file(const char *dir)
{
    char *p = ckpt_path(dir);
    FILE *f = fopen(p, "r");
    free(p);
    if (!f)
        return NULL;
    char *buf = calloc(1, 4096);
    size_t n = fread(buf, 1, 4095, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static void check_entry(const struct cn_epochs *e, size_t i, int32_t epoch,
                        int64_t start)
{
    int32_t ep;
    int64_t st;
    cn_epochs_entry(e, i, &ep, &st);
    CHECK_EQ(ep, epoch);
    CHECK_EQ(st, start);
}

static void end_for(const struct cn_epochs *e, int32_t epoch, int64_t leo,
                    int32_t want_epoch, int64_t want_end)
{
    int32_t ep;
    int64_t end;
    cn_epochs_end_offset_for(e, epoch, leo, &ep, &end);
    CHECK_EQ(ep, want_epoch);
    CHECK_EQ(end, want_end);
}

UNIT_TEST(assign_rules)
{
    char *dir = unit_tmpdir("epochs");
    struct cn_epochs *e = cn_epochs_new_empty(dir);
    CHECK_EQ(cn_epochs_latest(e), -1);
    CHECK_EQ(cn_epochs_assign(e, 0, 0), 0);
    CHECK_EQ(cn_epochs_assign(e, 0, 5), 0); /* same epoch: kept as is */
    CHECK_EQ(cn_epochs_count(e), 1);
    CHECK_EQ(cn_epochs_start_of(e, 0), 0);
    CHECK_EQ(cn_epochs_assign(e, 2, 10), 0);
    CHECK_EQ(cn_epochs_assign(e, 1, 20), 0); /* older than the latest */
    CHECK_EQ(cn_epochs_count(e), 2);
    CHECK_EQ(cn_epochs_latest(e), 2);
    CHECK_EQ(cn_epochs_start_of(e, 1), -1);
    /* A newer epoch starting where the latest did: the latest wrote
     * nothing and goes. */
    CHECK_EQ(cn_epochs_assign(e, 3, 10), 0);
    CHECK_EQ(cn_epochs_count(e), 2);
    check_entry(e, 0, 0, 0);
    check_entry(e, 1, 3, 10);
    /* Starting below entries: they go too. */
    CHECK_EQ(cn_epochs_assign(e, 4, 5), 0);
    CHECK_EQ(cn_epochs_count(e), 2);
    check_entry(e, 1, 4, 5);
    CHECK_EQ(cn_epochs_assign(e, -1, 50), 0);
    CHECK_EQ(cn_epochs_count(e), 2);
    /* Every change was written. */
    char *text = read_file(dir);
    CHECK(text && strcmp(text, "0\n2\n0 0\n4 5\n") == 0);
    free(text);
    cn_epochs_free(e);
    unit_rmtree(dir);
    free(dir);
}

UNIT_TEST(end_offset_for_kip101)
{
    char *dir = unit_tmpdir("epochs");
    struct cn_epochs *e = cn_epochs_new_empty(dir);
    end_for(e, 0, 10, -1, -1); /* empty */
    CHECK_EQ(cn_epochs_assign(e, 1, 0), 0);
    CHECK_EQ(cn_epochs_assign(e, 3, 100), 0);
    CHECK_EQ(cn_epochs_assign(e, 5, 250), 0);
    end_for(e, 5, 300, 5, 300); /* the latest: the log end */
    end_for(e, 3, 300, 3, 250); /* ends where the next begins */
    end_for(e, 1, 300, 1, 100);
    end_for(e, 4, 300, 3, 250); /* unknown: the newest epoch below */
    end_for(e, 2, 300, 1, 100);
    end_for(e, 0, 300, 0, 0);   /* below all: where the log begins */
    end_for(e, 6, 300, -1, -1); /* above all: UNDEFINED */
    end_for(e, -1, 300, -1, -1);
    cn_epochs_free(e);
    unit_rmtree(dir);
    free(dir);
}

/* KIP-279: a leader fails twice in a row.  A wrote 0..9 at epoch 0 and
 * led at epoch 1 without writing (its epoch 1 starts at 10 and an
 * unreplicated batch is all it got); B led at epoch 2 from 10.  Whoever
 * asks for epoch 1 learns that it ended where epoch 2 began. */
UNIT_TEST(end_offset_for_kip279_double_failure)
{
    char *dir = unit_tmpdir("epochs");
    struct cn_epochs *b = cn_epochs_new_empty(dir);
    CHECK_EQ(cn_epochs_assign(b, 0, 0), 0);
    CHECK_EQ(cn_epochs_assign(b, 2, 10), 0);
    /* B never saw epoch 1: the answer for it is epoch 0, ending at 10. */
    end_for(b, 1, 15, 0, 10);
    end_for(b, 0, 15, 0, 10);
    end_for(b, 2, 15, 2, 15);
    /* A, which recorded epoch 1 at 10 and wrote 10..11 in it, asks B for
     * epoch 1 and truncates to 10; its cache then loses epoch 1. */
    struct cn_epochs *a = cn_epochs_new_empty(dir);
    CHECK_EQ(cn_epochs_assign(a, 0, 0), 0);
    CHECK_EQ(cn_epochs_assign(a, 1, 10), 0);
    int32_t ep;
    int64_t end;
    cn_epochs_end_offset_for(b, cn_epochs_latest(a), 15, &ep, &end);
    CHECK_EQ(ep, 0);
    CHECK_EQ(end, 10);
    CHECK_EQ(cn_epochs_truncate_from_end(a, end), 0);
    CHECK_EQ(cn_epochs_latest(a), 0);
    CHECK_EQ(cn_epochs_assign(a, 2, 10), 0);
    check_entry(a, 1, 2, 10);
    cn_epochs_free(a);
    cn_epochs_free(b);
    unit_rmtree(dir);
    free(dir);
}

UNIT_TEST(truncate_from_end_and_start)
{
    char *dir = unit_tmpdir("epochs");
    struct cn_epochs *e = cn_epochs_new_empty(dir);
    CHECK_EQ(cn_epochs_assign(e, 0, 0), 0);
    CHECK_EQ(cn_epochs_assign(e, 1, 10), 0);
    CHECK_EQ(cn_epochs_assign(e, 2, 20), 0);
    CHECK_EQ(cn_epochs_assign(e, 3, 30), 0);
    CHECK_EQ(cn_epochs_truncate_from_end(e, 31), 0); /* nothing at >= 31 */
    CHECK_EQ(cn_epochs_count(e), 4);
    CHECK_EQ(cn_epochs_truncate_from_end(e, 30), 0);
    CHECK_EQ(cn_epochs_count(e), 3);
    CHECK_EQ(cn_epochs_latest(e), 2);
    CHECK_EQ(cn_epochs_truncate_from_start(e, 5), 0);
    CHECK_EQ(cn_epochs_count(e), 3);
    check_entry(e, 0, 0, 5); /* spans the new start: starts there */
    CHECK_EQ(cn_epochs_truncate_from_start(e, 10), 0);
    CHECK_EQ(cn_epochs_count(e), 2);
    check_entry(e, 0, 1, 10); /* exactly at the start: kept */
    CHECK_EQ(cn_epochs_truncate_from_start(e, 25), 0);
    CHECK_EQ(cn_epochs_count(e), 1);
    check_entry(e, 0, 2, 25);
    char *text = read_file(dir);
    CHECK(text && strcmp(text, "0\n1\n2 25\n") == 0);
    free(text);
    CHECK_EQ(cn_epochs_truncate_from_end(e, 0), 0);
    CHECK_EQ(cn_epochs_count(e), 0);
    CHECK_EQ(cn_epochs_latest(e), -1);
    cn_epochs_free(e);
    unit_rmtree(dir);
    free(dir);
}

UNIT_TEST(checkpoint_round_trip)
{
    char *dir = unit_tmpdir("epochs");
    struct cn_epochs *e;
    CHECK_EQ(cn_epochs_open(dir, &e), 0); /* no file: empty */
    CHECK_EQ(cn_epochs_count(e), 0);
    CHECK_EQ(cn_epochs_assign(e, 0, 0), 0);
    CHECK_EQ(cn_epochs_assign(e, 7, 1234567890123LL), 0);
    cn_epochs_free(e);
    CHECK_EQ(cn_epochs_open(dir, &e), 0);
    CHECK_EQ(cn_epochs_count(e), 2);
    check_entry(e, 1, 7, 1234567890123LL);
    cn_epochs_free(e);
    /* Kafka's file, as it writes it, loads. */
    write_file(dir, "0\n3\n0 0\n4 17\n9 100\n");
    CHECK_EQ(cn_epochs_open(dir, &e), 0);
    CHECK_EQ(cn_epochs_count(e), 3);
    check_entry(e, 2, 9, 100);
    struct cn_wr w;
    cn_wr_init(&w, 64);
    CHECK_EQ(cn_epochs_format(e, &w), 0);
    CHECK(w.len == 19 && memcmp(w.buf, "0\n3\n0 0\n4 17\n9 100\n", 19) == 0);
    cn_wr_fini(&w);
    cn_epochs_free(e);
    unit_rmtree(dir);
    free(dir);
}

UNIT_TEST(checkpoint_corrupt)
{
    static const char *const bad[] = {
        "",                               /* empty */
        "1\n0\n",                         /* unknown version */
        "0\n2\n0 0\n",                    /* fewer entries than counted */
        "0\n1\n0 0\n1 5\n",               /* more */
        "0\n1\n0\n",                      /* one field */
        "0\n1\n-1 5\n",                   /* negative */
        "0\n1\n0 x\n",                    /* not a number */
        "0\n1\n0 99999999999999999999\n", /* overflow */
        "0\n1\n2147483648 0\n",           /* epoch past int32 */
    };
    char *dir = unit_tmpdir("epochs");
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_file(dir, bad[i]);
        struct cn_epochs *e = NULL;
        int rc = cn_epochs_open(dir, &e);
        if (rc != CN_ECORRUPT)
            fprintf(stderr, "  case %zu: rc %d\n", i, rc);
        CHECK_EQ(rc, CN_ECORRUPT);
        CHECK(e == NULL);
    }
    /* Out of order entries load as Kafka loads them (through assign). */
    write_file(dir, "0\n3\n0 0\n5 50\n3 20\n");
    struct cn_epochs *e;
    CHECK_EQ(cn_epochs_open(dir, &e), 0);
    CHECK_EQ(cn_epochs_count(e), 2);
    check_entry(e, 1, 5, 50);
    cn_epochs_free(e);
    unit_rmtree(dir);
    free(dir);
}

UNIT_MAIN(assign_rules, end_offset_for_kip101,
          end_offset_for_kip279_double_failure, truncate_from_end_and_start,
          checkpoint_round_trip, checkpoint_corrupt)
