/*
 * verify_net.h - network namespaces for `cairnctl verify --cluster
 * --netns PREFIX` (issue #15): each broker runs in a namespace of its own,
 * joined to the others and to the checker by a bridge, so partition-broker
 * can cut one broker off from everyone (its veth set down) and heal it
 * (set up) while its process goes on, as a real network partition does.
 *
 * Layout for PREFIX "cnv" and three brokers (Linux interface names are at
 * most 15 characters, hence the short names and the 8-character prefix):
 *
 *   bridge  cnv-br   10.77.0.254/24, in the root namespace (the checker,
 *                    its workers and clients reach the brokers through it)
 *   broker  i = 0..  namespace cnv-<i+1>, veth cnv-h<i+1> (root side, on
 *                    the bridge) to cnv-n<i+1> (inside, 10.77.0.<i+1>/24)
 *
 * The plan functions are pure (the ip(8) command lines of each step), so
 * the unit test checks them without root; cn_vnet_run runs them.  Runs on
 * the main thread of `cairnctl verify`; needs root (CAP_NET_ADMIN).
 */
#ifndef CN_CLI_VERIFY_NET_H
#define CN_CLI_VERIFY_NET_H

#include <stdbool.h>
#include <stddef.h>

#define CN_VNET_MAX 9        /* brokers at most (cmd_verify's MAX_BROKERS) */
#define CN_VNET_PREFIX_MAX 8 /* longest PREFIX */
#define CN_VNET_CMD_LEN 160  /* longest command line */
#define CN_VNET_MAX_CMDS 96  /* longest plan (setup of CN_VNET_MAX) */

enum cn_vnet_step {
    CN_VNET_SETUP,    /* bridge, namespaces, veths, addresses, all up */
    CN_VNET_TEARDOWN, /* delete all of it, for up to CN_VNET_MAX brokers */
    CN_VNET_CUT,      /* broker `which` loses the network */
    CN_VNET_HEAL,     /* ... and gets it back */
};

/* True when prefix is 1..CN_VNET_PREFIX_MAX of [a-z0-9]. */
bool cn_vnet_prefix_ok(const char *prefix);

/* The address broker i (0-based) listens on: "10.77.0.<i+1>". */
void cn_vnet_addr(int i, char *buf, size_t len);

/* The namespace broker i runs in: "<prefix>-<i+1>". */
void cn_vnet_ns(const char *prefix, int i, char *buf, size_t len);

/* The ip(8) command lines of step for n brokers (which: the broker CUT
 * and HEAL act on), words separated by single spaces, into
 * cmds[0..cap-1].  Returns how many, or -1 for bad arguments. */
int cn_vnet_plan(enum cn_vnet_step step, const char *prefix, int n, int which,
                 char (*cmds)[CN_VNET_CMD_LEN], int cap);

/* Runs the plan of step, each command with stdout and stderr to log (or
 * /dev/null when NULL).  TEARDOWN also kills (-9) every process left in
 * the namespaces, the brokers of an earlier run of the same prefix that
 * died without cleaning up, and ignores failures (what it deletes may
 * not exist); the other steps stop at the first failure.  Returns 0 or
 * -1. */
int cn_vnet_run(enum cn_vnet_step step, const char *prefix, int n, int which,
                const char *log);

#endif
