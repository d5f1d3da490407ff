/* unit.c - test harness; see unit.h. */
#include "unit.h"

#include <ftw.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int unit_failures;

void unit_fail(const char *file, int line, const char *expr)
{
    fprintf(stderr, "  FAIL %s:%d: %s\n", file, line, expr);
    unit_failures++;
}

int unit_run(const char *prog, const char *const *names,
             void (*const *fns)(void), int n, int argc, char **argv)
{
    int passed = 0, failed = 0;
    const char *only = argc > 1 ? argv[1] : NULL;
    for (int i = 0; i < n; i++) {
        if (only && strcmp(only, names[i]) != 0)
            continue;
        unit_failures = 0;
        fns[i]();
        if (unit_failures) {
            failed++;
            fprintf(stderr, "%s: %s FAILED\n", prog, names[i]);
        } else {
            passed++;
        }
    }
    printf("%s: %d passed, %d failed\n", prog, passed, failed);
    return failed ? 1 : 0;
}

char *unit_tmpdir(const char *tag)
{
    const char *base = getenv("TMPDIR");
    char *path = NULL;
    if (asprintf(&path, "%s/cn-%s-XXXXXX", base ? base : "/tmp", tag) < 0)
        abort();
    if (!mkdtemp(path))
        abort();
    return path;
}

static int rm_one(const char *p, const struct stat *st, int flag,
                  struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(p);
}

void unit_rmtree(const char *path)
{
    nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}
