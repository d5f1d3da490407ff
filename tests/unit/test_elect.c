/* test_elect.c - Kafka's partition leader rule, as tables. */
#include <string.h>

#include "meta/elect.h"
#include "unit.h"

#define END -99 /* ends an id list in a table row */

static int32_t list(const int32_t *src, int32_t *dst)
{
    int32_t n = 0;
    while (src[n] != END) {
        dst[n] = src[n];
        n++;
    }
    return n;
}

struct leader_row {
    const char *why;
    int32_t replicas[6], isr[6], usable[6];
    int32_t leader, want;
};

UNIT_TEST(leader_rule)
{
    static const struct leader_row rows[] = {
        {"a working leader stays, even if not first",
         {1, 2, 3, END},
         {1, 2, 3, END},
         {1, 2, 3, END},
         2,
         2},
        {"a fenced leader hands over to the first eligible in order",
         {3, 1, 2, END},
         {1, 2, 3, END},
         {1, 2, END},
         3,
         1},
        {"assignment order decides, not ISR order",
         {2, 1, 3, END},
         {1, 3, 2, END},
         {1, 2, END},
         3,
         2},
        {"a usable replica outside the ISR is never elected",
         {1, 2, 3, END},
         {3, END},
         {1, 2, END},
         3,
         -1},
        {"a fenced ISR member is skipped",
         {1, 2, 3, END},
         {1, 2, 3, END},
         {3, END},
         1,
         3},
        {"a leader outside the ISR is replaced",
         {1, 2, 3, END},
         {2, 3, END},
         {1, 2, 3, END},
         1,
         2},
        {"nobody eligible: no leader (no unclean election)",
         {1, 2, 3, END},
         {1, END},
         {2, 3, END},
         1,
         -1},
        {"no leader yet: the first eligible",
         {1, 2, 3, END},
         {2, 3, END},
         {1, 2, 3, END},
         -1,
         2},
        {"an unregistered broker is not usable",
         {4, 5, END},
         {4, 5, END},
         {5, END},
         -1,
         5},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const struct leader_row *r = &rows[i];
        int32_t rep[6], isr[6], us[6];
        struct cn_elect_part p = {rep, list(r->replicas, rep), isr,
                                  list(r->isr, isr), r->leader};
        struct cn_elect_usable u = {us, (size_t)list(r->usable, us)};
        int32_t got = cn_elect_leader(&p, &u);
        if (got != r->want)
            fprintf(stderr, "  row %zu (%s): leader %d, want %d\n", i, r->why,
                    got, r->want);
        CHECK_EQ(got, r->want);
    }
}

struct fence_row {
    const char *why;
    int32_t replicas[6], isr[6], usable[6]; /* usable: without `fenced` */
    int32_t leader, fenced;
    int32_t want_isr[6];
    int32_t want_leader;
    bool changed;
};

UNIT_TEST(fence_rule)
{
    static const struct fence_row rows[] = {
        {"the fenced leader leaves the ISR, the next in order leads",
         {1, 2, 3, END},
         {1, 2, 3, END},
         {2, 3, END},
         1,
         1,
         {2, 3, END},
         2,
         true},
        {"a fenced follower leaves the ISR, the leader stays",
         {1, 2, 3, END},
         {1, 2, 3, END},
         {1, 3, END},
         1,
         2,
         {1, 3, END},
         1,
         true},
        {"the last ISR member stays in the ISR, leaderless",
         {1, 2, 3, END},
         {2, END},
         {1, 3, END},
         2,
         2,
         {2, END},
         -1,
         true},
        {"a broker outside the ISR changes nothing",
         {1, 2, 3, END},
         {1, 3, END},
         {1, 3, END},
         1,
         2,
         {1, 3, END},
         1,
         false},
        {"the next in ISR order is not what counts: assignment order is",
         {3, 2, 1, END},
         {1, 2, 3, END},
         {1, 2, END},
         3,
         3,
         {1, 2, END},
         2,
         true},
        {"a leaderless partition stays leaderless when the other is fenced",
         {1, 2, END},
         {1, END},
         {2, END},
         -1,
         1,
         {1, END},
         -1,
         false},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const struct fence_row *r = &rows[i];
        int32_t rep[6], isr[6], us[6], want[6], out[6], nout, leader;
        struct cn_elect_part p = {rep, list(r->replicas, rep), isr,
                                  list(r->isr, isr), r->leader};
        struct cn_elect_usable u = {us, (size_t)list(r->usable, us)};
        int32_t nwant = list(r->want_isr, want);
        bool ch = cn_elect_on_fence(&p, r->fenced, &u, out, &nout, &leader);
        bool ok = ch == r->changed && leader == r->want_leader &&
                  nout == nwant &&
                  memcmp(out, want, sizeof(int32_t) * (size_t)nwant) == 0;
        if (!ok)
            fprintf(stderr, "  row %zu (%s): leader %d changed %d nisr %d\n",
                    i, r->why, leader, ch, nout);
        CHECK(ok);
    }
}

UNIT_TEST(isr_never_emptied)
{
    int32_t out[3];
    CHECK_EQ(cn_elect_isr_without((const int32_t[]){4}, 1, 4, out), 1);
    CHECK_EQ(out[0], 4);
    CHECK_EQ(cn_elect_isr_without((const int32_t[]){4, 5}, 2, 4, out), 1);
    CHECK_EQ(out[0], 5);
    CHECK_EQ(cn_elect_isr_without((const int32_t[]){4, 5}, 2, 6, out), 2);
}

UNIT_TEST(unfence_brings_back_the_last_member)
{
    int32_t rep[] = {1, 2, 3}, isr[] = {2}, us[] = {1, 2, 3}, leader;
    struct cn_elect_part p = {rep, 3, isr, 1, -1};
    struct cn_elect_usable u = {us, 3};
    CHECK(cn_elect_on_unfence(&p, &u, &leader));
    CHECK_EQ(leader, 2);
    /* A led partition is left alone: no leader epoch bump for nothing. */
    p.leader = 2;
    CHECK(!cn_elect_on_unfence(&p, &u, &leader));
    CHECK_EQ(leader, 2);
    /* Still nobody usable in the ISR: still no leader. */
    int32_t us2[] = {1, 3};
    struct cn_elect_usable u2 = {us2, 2};
    p.leader = -1;
    CHECK(!cn_elect_on_unfence(&p, &u2, &leader));
    CHECK_EQ(leader, -1);
}

UNIT_MAIN(leader_rule, fence_rule, isr_never_emptied,
          unfence_brings_back_the_last_member)
