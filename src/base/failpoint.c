/* failpoint.c - named fail points; see failpoint.h. */
#include "failpoint.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "err.h"

#define FAILPOINT_MAX 32
#define FAILPOINT_NAME_MAX 64

enum fp_action { FP_OFF, FP_CRASH, FP_ERROR, FP_DELAY };

struct failpoint {
    char name[FAILPOINT_NAME_MAX]; /* e.g. "log.mid_append" */
    enum fp_action action;
    unsigned every;                /* fires on every Nth hit; 1: each */
    unsigned delay_ms;             /* FP_DELAY: how long a hit sleeps */
    _Atomic unsigned hits;         /* hits since armed (workers hit too) */
};

bool cn_failpoints_armed;
static struct failpoint points[FAILPOINT_MAX];

static struct failpoint *find(const char *name, bool create)
{
    for (int i = 0; i < FAILPOINT_MAX; i++)
        if (points[i].name[0] && strcmp(points[i].name, name) == 0)
            return &points[i];
    if (!create)
        return NULL;
    for (int i = 0; i < FAILPOINT_MAX; i++)
        if (!points[i].name[0]) {
            snprintf(points[i].name, sizeof points[i].name, "%s", name);
            return &points[i];
        }
    return NULL;
}

static void recompute_armed(void)
{
    cn_failpoints_armed = false;
    for (int i = 0; i < FAILPOINT_MAX; i++)
        if (points[i].name[0] && points[i].action != FP_OFF)
            cn_failpoints_armed = true;
}

int cn_failpoint_set(const char *name, const char *action)
{
    if (!name[0] || strlen(name) >= FAILPOINT_NAME_MAX)
        return CN_EINVAL;
    enum fp_action a;
    unsigned every = 1, delay_ms = 0;
    char word[16];
    const char *slash = action ? strchr(action, '/') : NULL;
    if (slash) {
        /* "error/N": a fault now and then, so a test sees the rare path
         * many times in a run instead of once or never. */
        char *end;
        unsigned long n = strtoul(slash + 1, &end, 10);
        if (slash == action || (size_t)(slash - action) >= sizeof word ||
            *end || n < 1 || n > 1000000)
            return CN_EINVAL;
        memcpy(word, action, (size_t)(slash - action));
        word[slash - action] = '\0';
        action = word;
        every = (unsigned)n;
    }
    if (!action || strcmp(action, "off") == 0)
        a = FP_OFF;
    else if (strcmp(action, "crash") == 0)
        a = FP_CRASH;
    else if (strcmp(action, "error") == 0)
        a = FP_ERROR;
    else if (strcmp(action, "delay") == 0 && slash) {
        /* "delay/MS": holds the thread that hits it (a worker in a
         * round), so a test can act while that work is in flight. */
        a = FP_DELAY;
        delay_ms = every;
        every = 1;
    } else
        return CN_EINVAL;
    struct failpoint *fp = find(name, a != FP_OFF);
    if (!fp)
        return a == FP_OFF ? 0 : CN_ENOMEM;
    fp->action = a;
    fp->every = every;
    fp->delay_ms = delay_ms;
    fp->hits = 0;
    recompute_armed();
    return 0;
}

int cn_failpoints_init(void)
{
    const char *env = getenv("CAIRN_FAILPOINTS");
    if (!env || !*env)
        return 0;
    char *copy = strdup(env);
    if (!copy)
        return CN_ENOMEM;
    int err = 0;
    char *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(tok, '=');
        const char *action = "crash";
        if (eq) {
            *eq = '\0';
            action = eq + 1;
        }
        if (cn_failpoint_set(tok, action) != 0) {
            fprintf(stderr,
                    "cairn: CAIRN_FAILPOINTS: bad entry '%s' (want "
                    "name=crash|error[/N]|delay/MS)\n",
                    tok);
            err = CN_EINVAL;
            break;
        }
    }
    free(copy);
    return err;
}

int cn_failpoint_hit(const char *name)
{
    struct failpoint *fp = find(name, false);
    if (!fp || fp->action == FP_OFF)
        return 0;
    if (fp->every > 1 && ++fp->hits % fp->every != 0)
        return 0;
    if (fp->action == FP_DELAY) {
        usleep((useconds_t)fp->delay_ms * 1000);
        return 0;
    }
    if (fp->action == FP_CRASH) {
        fprintf(stderr, "cairn: fail point %s: crashing\n", name);
        kill(getpid(), SIGKILL);
        _exit(137);
    }
    return CN_EFAILPOINT;
}
