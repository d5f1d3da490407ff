/*
 * verify_net.c - network namespaces for `cairnctl verify --netns` (see
 * verify_net.h).
 */
#include "cli/verify_net.h"

#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define SUBNET "10.77.0"

bool cn_vnet_prefix_ok(const char *prefix)
{
    size_t n = prefix ? strlen(prefix) : 0;

    if (n < 1 || n > CN_VNET_PREFIX_MAX)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((prefix[i] >= 'a' && prefix[i] <= 'z') ||
              (prefix[i] >= '0' && prefix[i] <= '9')))
            return false;
    return true;
}

void cn_vnet_addr(int i, char *buf, size_t len)
{
    snprintf(buf, len, SUBNET ".%d", i + 1);
}

void cn_vnet_ns(const char *prefix, int i, char *buf, size_t len)
{
    snprintf(buf, len, "%s-%d", prefix, i + 1);
}

struct plan {
    char (*cmds)[CN_VNET_CMD_LEN];
    int cap, n;
    bool full; /* a command did not fit */
};

__attribute__((format(printf, 2, 3))) static void add(struct plan *p,
                                                      const char *fmt, ...)
{
    va_list ap;
    int len;

    if (p->n >= p->cap) {
        p->full = true;
        return;
    }
    va_start(ap, fmt);
    len = vsnprintf(p->cmds[p->n], CN_VNET_CMD_LEN, fmt, ap);
    va_end(ap);
    if (len < 0 || len >= CN_VNET_CMD_LEN)
        p->full = true;
    else
        p->n++;
}

int cn_vnet_plan(enum cn_vnet_step step, const char *prefix, int n, int which,
                 char (*cmds)[CN_VNET_CMD_LEN], int cap)
{
    struct plan p = {.cmds = cmds, .cap = cap};
    const char *x = prefix;

    if (!cn_vnet_prefix_ok(prefix) || n < 1 || n > CN_VNET_MAX)
        return -1;
    if ((step == CN_VNET_CUT || step == CN_VNET_HEAL) &&
        (which < 0 || which >= n))
        return -1;
    switch (step) {
    case CN_VNET_SETUP:
        add(&p, "ip link add %s-br type bridge", x);
        add(&p, "ip addr add " SUBNET ".254/24 dev %s-br", x);
        add(&p, "ip link set %s-br up", x);
        for (int i = 1; i <= n; i++) {
            add(&p, "ip netns add %s-%d", x, i);
            add(&p, "ip netns exec %s-%d ip link set lo up", x, i);
            add(&p, "ip link add %s-h%d type veth peer name %s-n%d", x, i, x,
                i);
            add(&p, "ip link set %s-n%d netns %s-%d", x, i, x, i);
            add(&p, "ip link set %s-h%d master %s-br", x, i, x);
            add(&p, "ip link set %s-h%d up", x, i);
            add(&p,
                "ip netns exec %s-%d ip addr add " SUBNET ".%d/24 dev "
                "%s-n%d",
                x, i, i, x, i);
            add(&p, "ip netns exec %s-%d ip link set %s-n%d up", x, i, x, i);
        }
        break;
    case CN_VNET_TEARDOWN:
        /* Every index, not just n: a crashed earlier run may have had
         * more brokers.  Deleting a namespace deletes its veth pair; the
         * link deletions catch a pair whose end never moved in. */
        for (int i = 1; i <= CN_VNET_MAX; i++) {
            add(&p, "ip netns del %s-%d", x, i);
            add(&p, "ip link del %s-h%d", x, i);
        }
        add(&p, "ip link del %s-br", x);
        break;
    case CN_VNET_CUT: add(&p, "ip link set %s-h%d down", x, which + 1); break;
    case CN_VNET_HEAL: add(&p, "ip link set %s-h%d up", x, which + 1); break;
    }
    return p.full ? -1 : p.n;
}

/* Runs one command line (words split on spaces), output to fd; returns
 * its exit status, or -1. */
static int run_line(const char *line, int fd)
{
    char buf[CN_VNET_CMD_LEN], *argv[32], *save = NULL;
    int argc = 0, st;
    pid_t pid;

    size_t len = strnlen(line, sizeof buf - 1);

    memcpy(buf, line, len);
    buf[len] = '\0';
    for (char *w = strtok_r(buf, " ", &save); w && argc < 31;
         w = strtok_r(NULL, " ", &save))
        argv[argc++] = w;
    argv[argc] = NULL;
    if (argc == 0)
        return -1;
    fflush(NULL);
    pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        dup2(fd, 1);
        dup2(fd, 2);
        execvp(argv[0], argv);
        _exit(127);
    }
    if (waitpid(pid, &st, 0) != pid)
        return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* SIGKILL every process in namespace ns (`ip netns pids`). */
static void kill_inside(const char *ns)
{
    char cmd[64], line[32];
    FILE *f;

    snprintf(cmd, sizeof cmd, "ip netns pids %s 2>/dev/null", ns);
    f = popen(cmd, "r");
    if (!f)
        return;
    while (fgets(line, sizeof line, f)) {
        long pid = strtol(line, NULL, 10);
        if (pid > 1 && pid != (long)getpid())
            kill((pid_t)pid, SIGKILL);
    }
    pclose(f);
}

int cn_vnet_run(enum cn_vnet_step step, const char *prefix, int n, int which,
                const char *log)
{
    char cmds[CN_VNET_MAX_CMDS][CN_VNET_CMD_LEN];
    int k = cn_vnet_plan(step, prefix, n, which, cmds, CN_VNET_MAX_CMDS);
    int fd, rc = 0;

    if (k < 0)
        return -1;
    fd = open(log ? log : "/dev/null",
              O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0)
        return -1;
    if (step == CN_VNET_TEARDOWN) {
        for (int i = 0; i < CN_VNET_MAX; i++) {
            char ns[32];
            cn_vnet_ns(prefix, i, ns, sizeof ns);
            kill_inside(ns);
        }
    }
    for (int i = 0; i < k; i++) {
        if (log)
            dprintf(fd, "+ %s\n", cmds[i]);
        if (run_line(cmds[i], fd) != 0 && step != CN_VNET_TEARDOWN) {
            rc = -1;
            break;
        }
    }
    close(fd);
    return rc;
}
