/*
 * test_verify_net.c - the ip(8) plans of `cairnctl verify --netns`
 * (src/cli/verify_net.c): names fit Linux's 15-character interface limit,
 * every broker gets its namespace, veth and address, teardown deletes
 * what setup makes (for more brokers than this run had too), cut and heal
 * touch only the one broker's root-side link, and bad arguments are
 * refused.  No command is run.
 *
 * verify_net.c lives in src/cli (cairnctl's sources, not cairn_core), so
 * it is compiled into this test directly.
 */
#include <string.h>

#include "../../src/cli/verify_net.c"
#include "unit.h"

typedef char cmd_t[CN_VNET_CMD_LEN];

static bool has(cmd_t *cmds, int n, const char *line)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(cmds[i], line))
            return true;
    return false;
}

/* Every word naming an interface (after "dev", "link add", "peer name",
 * "set", "del", "master") is at most 15 characters: checked loosely, by
 * the longest word of every line that is not "ip"'s own. */
static size_t longest_word(const char *line)
{
    size_t best = 0, cur = 0;

    for (const char *p = line;; p++) {
        if (*p == ' ' || !*p) {
            if (cur > best)
                best = cur;
            cur = 0;
            if (!*p)
                break;
        } else {
            cur++;
        }
    }
    return best;
}

UNIT_TEST(test_prefix_rule)
{
    CHECK(cn_vnet_prefix_ok("cnv"));
    CHECK(cn_vnet_prefix_ok("abcdefg8"));
    CHECK(!cn_vnet_prefix_ok("abcdefghi"));
    CHECK(!cn_vnet_prefix_ok(""));
    CHECK(!cn_vnet_prefix_ok(NULL));
    CHECK(!cn_vnet_prefix_ok("a-b"));
    CHECK(!cn_vnet_prefix_ok("A"));
    CHECK(!cn_vnet_prefix_ok("a;rm"));
}

UNIT_TEST(test_setup_makes_everything)
{
    cmd_t cmds[CN_VNET_MAX_CMDS];
    int n = cn_vnet_plan(CN_VNET_SETUP, "cnv", 3, 0, cmds, CN_VNET_MAX_CMDS);
    char addr[32], ns[32];

    CHECK(n > 0);
    CHECK(!strcmp(cmds[0], "ip link add cnv-br type bridge"));
    CHECK(has(cmds, n, "ip addr add 10.77.0.254/24 dev cnv-br"));
    CHECK(has(cmds, n, "ip netns add cnv-3"));
    CHECK(has(cmds, n, "ip link add cnv-h2 type veth peer name cnv-n2"));
    CHECK(has(cmds, n, "ip link set cnv-n2 netns cnv-2"));
    CHECK(has(cmds, n, "ip link set cnv-h1 master cnv-br"));
    CHECK(has(cmds, n,
              "ip netns exec cnv-1 ip addr add 10.77.0.1/24 dev "
              "cnv-n1"));
    CHECK(has(cmds, n, "ip netns exec cnv-3 ip link set cnv-n3 up"));
    CHECK(!has(cmds, n, "ip netns add cnv-4"));
    cn_vnet_addr(2, addr, sizeof addr);
    CHECK(!strcmp(addr, "10.77.0.3"));
    cn_vnet_ns("cnv", 2, ns, sizeof ns);
    CHECK(!strcmp(ns, "cnv-3"));
}

UNIT_TEST(test_names_fit_ifnamsiz)
{
    cmd_t cmds[CN_VNET_MAX_CMDS];
    int n = cn_vnet_plan(CN_VNET_SETUP, "abcdefgh", CN_VNET_MAX, 0, cmds,
                         CN_VNET_MAX_CMDS);

    CHECK(n > 0);
    for (int i = 0; i < n; i++)
        CHECK(longest_word(cmds[i]) <= 15);
}

UNIT_TEST(test_teardown_covers_setup)
{
    cmd_t set[CN_VNET_MAX_CMDS], down[CN_VNET_MAX_CMDS];
    int ns = cn_vnet_plan(CN_VNET_SETUP, "cnv", 3, 0, set, CN_VNET_MAX_CMDS);
    int nd = cn_vnet_plan(CN_VNET_TEARDOWN, "cnv", 3, 0, down,
                          CN_VNET_MAX_CMDS);
    char want[CN_VNET_CMD_LEN];

    CHECK(ns > 0 && nd > 0);
    CHECK(has(down, nd, "ip link del cnv-br"));
    /* Every namespace and root-side link, up to CN_VNET_MAX: a killed
     * earlier run may have had more brokers than this one. */
    for (int i = 1; i <= CN_VNET_MAX; i++) {
        snprintf(want, sizeof want, "ip netns del cnv-%d", i);
        CHECK(has(down, nd, want));
        snprintf(want, sizeof want, "ip link del cnv-h%d", i);
        CHECK(has(down, nd, want));
    }
    /* The bridge goes last, once nothing is attached. */
    CHECK(!strcmp(down[nd - 1], "ip link del cnv-br"));
}

UNIT_TEST(test_cut_and_heal_one_link)
{
    cmd_t cmds[CN_VNET_MAX_CMDS];
    int n = cn_vnet_plan(CN_VNET_CUT, "cnv", 3, 1, cmds, CN_VNET_MAX_CMDS);

    CHECK_EQ(n, 1);
    CHECK(!strcmp(cmds[0], "ip link set cnv-h2 down"));
    n = cn_vnet_plan(CN_VNET_HEAL, "cnv", 3, 1, cmds, CN_VNET_MAX_CMDS);
    CHECK_EQ(n, 1);
    CHECK(!strcmp(cmds[0], "ip link set cnv-h2 up"));
}

UNIT_TEST(test_bad_arguments)
{
    cmd_t cmds[CN_VNET_MAX_CMDS];

    CHECK_EQ(cn_vnet_plan(CN_VNET_CUT, "cnv", 3, 3, cmds, CN_VNET_MAX_CMDS),
             -1);
    CHECK_EQ(cn_vnet_plan(CN_VNET_HEAL, "cnv", 3, -1, cmds, CN_VNET_MAX_CMDS),
             -1);
    CHECK_EQ(cn_vnet_plan(CN_VNET_SETUP, "cnv", 0, 0, cmds, CN_VNET_MAX_CMDS),
             -1);
    CHECK_EQ(cn_vnet_plan(CN_VNET_SETUP, "cnv", CN_VNET_MAX + 1, 0, cmds,
                          CN_VNET_MAX_CMDS),
             -1);
    CHECK_EQ(cn_vnet_plan(CN_VNET_SETUP, "bad name", 3, 0, cmds,
                          CN_VNET_MAX_CMDS),
             -1);
    /* Too small a buffer is an error, not a truncated plan. */
    CHECK_EQ(cn_vnet_plan(CN_VNET_SETUP, "cnv", 3, 0, cmds, 4), -1);
}

UNIT_MAIN(test_prefix_rule, test_setup_makes_everything,
          test_names_fit_ifnamsiz, test_teardown_covers_setup,
          test_cut_and_heal_one_link, test_bad_arguments)
