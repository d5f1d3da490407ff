/*
 * failpoint.h - named fail points for crash and error tests.
 *
 * CAIRN_FAILPOINTS="name=crash,other=error" in the environment arms points.
 * An armed "crash" point kills the process on the spot (SIGKILL to itself,
 * so nothing is flushed, as with kill -9); an "error" point makes
 * CN_FAILPOINT() return CN_EFAILPOINT so the caller takes its error path.
 * "name=error/N" (or crash/N) fires on every Nth hit only.
 * "name=delay/MS" sleeps MS milliseconds (up to 1000000) on the thread
 * that hits it and goes on: holds a worker's job in flight for a test.
 * Unarmed points cost one load and a predictable branch.
 */
#ifndef CN_BASE_FAILPOINT_H
#define CN_BASE_FAILPOINT_H

#include <stdbool.h>

extern bool cn_failpoints_armed; /* any point armed at all */

/* Reads CAIRN_FAILPOINTS; returns 0 or CN_EINVAL naming the bad entry. */
int cn_failpoints_init(void);
/* Arms (or with action NULL disarms) one point; for unit tests. */
int cn_failpoint_set(const char *name, const char *action);
int cn_failpoint_hit(const char *name);

#define CN_FAILPOINT(name) (cn_failpoints_armed ? cn_failpoint_hit(name) : 0)

/* A planted bug for the history checker's self-test (tests/e2e/
 * test_verify.py): a fail point in a test build (CAIRN_TEST_BUGS, the
 * cairn-testbugs binary), and nothing at all, not even its name, in the
 * shipped broker. */
#ifdef CAIRN_TEST_BUGS
#define CN_TEST_BUG(name) CN_FAILPOINT(name)
#else
#define CN_TEST_BUG(name) 0
#endif

#endif
