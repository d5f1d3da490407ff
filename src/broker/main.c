/*
 * main.c - the cairn broker's command line.
 *
 *     cairn [-c FILE] [--set key=value ...]
 *     cairn --verify-logs [-c FILE] [--set key=value ...]
 *     cairn --add-scram 'SCRAM-SHA-512=[name=N,password=P]' ... [--set ...]
 *     cairn --help | --help-config | --version
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdbool.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <uv.h>

#include "base/config.h"
#include "base/err.h"
#include "base/failpoint.h"
#include "base/say.h"
#include "broker/broker.h"
#include "node/scram_store.h"
#include "log/log.h"

#define CAIRN_VERSION "0.1.0"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: cairn [-c FILE] [--set key=value ...]\n"
            "       cairn --verify-logs [-c FILE] [--set key=value ...]\n"
            "       cairn --add-scram 'SCRAM-SHA-512=[name=N,password=P]' "
            "[-c FILE] [--set ...]\n"
            "       cairn --help-config   list every key and its default\n"
            "\n"
            "Runs a Kafka-compatible broker.  With no arguments it listens on\n"
            "127.0.0.1:9092 and keeps its data in ./data.\n"
            "\n"
            "--verify-logs checks the CRC and records of every batch in every\n"
            "partition under log.dirs, reading only, and reports the first\n"
            "bad batch of each segment (file, byte, offset) and offset gaps;\n"
            "exit 0 when every batch is good, 1 otherwise.\n"
            "\n"
            "--add-scram (repeatable, kafka-storage format's syntax; also\n"
            "iterations=, salt=, saltedpassword= in base64) stores a SCRAM\n"
            "credential in <log.dirs>/scram-credentials and exits; the broker\n"
            "must not be running.\n");
}

static void print_line(void *arg, const char *line)
{
    (void)arg;
    printf("%s\n", line);
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* cairn --verify-logs: cn_log_verify() over each partition directory of
 * log.dirs, in name order.  A broker is not needed (nor stopped): the
 * check reads only.  Returns the exit code. */
static int verify_logs(const char *data_dir)
{
    DIR *d = opendir(data_dir);
    if (!d) {
        fprintf(stderr, "cairn: cannot read log.dirs %s: %s\n", data_dir,
                strerror(errno));
        return 1;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            char **nn = realloc(names, cap * sizeof *names);
            if (!nn)
                break;
            names = nn;
        }
        names[n] = strdup(de->d_name);
        if (names[n])
            n++;
    }
    closedir(d);
    if (n > 1)
        qsort(names, n, sizeof *names, cmp_name);
    int rc = 0;
    long parts = 0, segs = 0, bad = 0, gaps = 0;
    long long batches = 0, bytes = 0;
    for (size_t i = 0; i < n; i++) {
        char dir[8192];
        snprintf(dir, sizeof dir, "%s/%s", data_dir, names[i]);
        struct cn_log_verify v;
        int err = cn_log_verify(dir, print_line, NULL, &v);
        if (err == -ENOTDIR || (!err && v.segments == 0))
            continue; /* a file, or a directory holding no segments */
        parts++;
        segs += v.segments;
        batches += v.batches;
        bytes += v.bytes;
        bad += v.bad_segments;
        gaps += v.gaps;
        if (err) {
            printf("%s: not verified: %s\n", dir, cn_strerror(err));
            rc = 1;
        } else if (v.bad_segments) {
            printf("%s: BAD: %d of %d segments have a bad batch\n", dir,
                   v.bad_segments, v.segments);
            rc = 1;
        } else if (v.batches > 0 || v.gaps) {
            /* Empty partitions (most coordinator ones) only count. */
            printf("%s: ok: %d segments, %lld batches, %lld bytes%s\n", dir,
                   v.segments, (long long)v.batches, (long long)v.bytes,
                   v.gaps ? " (with offset gaps, see above)" : "");
        }
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    printf("cairn --verify-logs: %ld partitions, %ld segments, %lld "
           "batches, %lld bytes checked; %ld bad segments, %ld gaps\n",
           parts, segs, batches, bytes, bad, gaps);
    return rc;
}

/* Raises the soft open-file limit to the hard one (the default soft limit,
 * 1,024, is meant for select() users) and sizes the partition logs'
 * descriptor cache from the result. */
static void raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) {
        CN_WARN("getrlimit(RLIMIT_NOFILE): %s", strerror(errno));
        return;
    }
    rlim_t was = rl.rlim_cur;
    if (rl.rlim_cur != rl.rlim_max) {
        struct rlimit want = {rl.rlim_max, rl.rlim_max};
        if (setrlimit(RLIMIT_NOFILE, &want) == 0)
            rl.rlim_cur = rl.rlim_max;
        else
            CN_WARN("cannot raise the open-file limit from %llu to %llu: %s",
                    (unsigned long long)rl.rlim_cur,
                    (unsigned long long)rl.rlim_max, strerror(errno));
    }
    uint64_t now = rl.rlim_cur == RLIM_INFINITY ? 1u << 20
                                                : (uint64_t)rl.rlim_cur;
    size_t budget = cn_log_fd_budget_for_limit(now);
    cn_log_set_fd_budget(budget);
    if (was != rl.rlim_cur)
        CN_INFO("open-file limit raised from %llu to %llu (the hard limit); "
                "partition logs keep at most %zu files open",
                (unsigned long long)was, (unsigned long long)now, budget);
    else
        CN_INFO("open-file limit %llu; partition logs keep at most %zu "
                "files open",
                (unsigned long long)now, budget);
}

/* cairn --add-scram: the first users, before the broker runs (Kafka's
 * kafka-storage format --add-scram).  Returns the exit code. */
static int add_scram(const char *data_dir, char **args, int n)
{
    struct cn_scram_user *u = calloc((size_t)n, sizeof *u);
    struct cn_scram_change *ch = calloc((size_t)n, sizeof *ch);
    int rc = 2;
    if (!u || !ch) {
        fprintf(stderr, "cairn: out of memory\n");
        goto out;
    }
    for (int i = 0; i < n; i++) {
        char why[256];
        if (cn_scram_parse_add_arg(args[i], u[i].name, sizeof u[i].name,
                                   &u[i].cred, why, sizeof why) != 0) {
            fprintf(stderr, "cairn: --add-scram: %s\n", why);
            goto out;
        }
        ch[i].user = u[i].name;
        ch[i].cred = &u[i].cred;
    }
    if (mkdir(data_dir, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "cairn: log.dirs: cannot create %s: %s\n", data_dir,
                strerror(errno));
        goto out;
    }
    /* The broker holds this lock while it runs; its credentials in
     * memory would not see the change. */
    char lock_path[4200];
    snprintf(lock_path, sizeof lock_path, "%s/.lock", data_dir);
    int fd = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) != 0) {
        fprintf(stderr,
                "cairn: --add-scram: '%s' is in use by a running broker; "
                "use AlterUserScramCredentials (cairnctl users set, "
                "kafka-configs.sh) instead\n",
                data_dir);
        if (fd >= 0)
            close(fd);
        goto out;
    }
    struct cn_scram_store st;
    char err[1024] = "";
    if (cn_scram_store_open(&st, data_dir, err, sizeof err) != 0) {
        fprintf(stderr, "cairn: %s\n", err);
        close(fd);
        goto out;
    }
    int e = cn_scram_store_apply(&st, ch, (size_t)n);
    if (e != 0) {
        fprintf(stderr, "cairn: cannot write %s/%s: %s\n", data_dir,
                CN_SCRAM_STORE_FILE, cn_strerror(e));
    } else {
        for (int i = 0; i < n; i++)
            printf("stored %s credential for user '%s' in %s/%s\n",
                   cn_scram_mech_name(u[i].cred.mech), u[i].name, data_dir,
                   CN_SCRAM_STORE_FILE);
        rc = 0;
    }
    cn_scram_store_fini(&st);
    close(fd);
out:
    if (u)
        memset(u, 0, (size_t)n * sizeof *u);
    free(u);
    free(ch);
    return rc;
}

int main(int argc, char **argv)
{
    bool verify = false;
    char **scram_args = calloc((size_t)argc + 1, sizeof *scram_args);
    int n_scram = 0;
    if (!scram_args)
        return 2;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--add-scram") ||
            !strncmp(argv[i], "--add-scram=", 12)) {
            int take = argv[i][11] == '=' ? 1 : 2;
            if (take == 2 && i + 1 >= argc) {
                fprintf(stderr, "cairn: --add-scram needs an argument\n");
                return 2;
            }
            scram_args[n_scram++] =
                take == 1 ? argv[i] + 12 : argv[i + 1];
            memmove(argv + i, argv + i + take,
                    (size_t)(argc - i - take + 1) * sizeof *argv);
            argc -= take;
            i--;
            continue;
        }
        if (!strcmp(argv[i], "--verify-logs")) {
            /* Taken out so the config parser sees only its own options. */
            memmove(argv + i, argv + i + 1,
                    (size_t)(argc - i) * sizeof *argv);
            argc--;
            i--;
            verify = true;
            continue;
        }
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(argv[i], "--help-config")) {
            cn_config_print_help(stdout);
            return 0;
        }
        if (!strcmp(argv[i], "--version")) {
            printf("cairn %s\n", CAIRN_VERSION);
            return 0;
        }
    }
    struct cn_config *cfg = calloc(1, sizeof *cfg);
    char err[1024] = "";
    if (!cfg || cn_config_init(cfg) != 0) {
        fprintf(stderr, "cairn: out of memory\n");
        return 1;
    }
    if (cn_config_from_args(cfg, argc, argv, err, sizeof err) != 0) {
        fprintf(stderr, "cairn: %s\n", err);
        cn_config_fini(cfg);
        free(cfg);
        return 2;
    }
    if (n_scram) {
        int rc = add_scram(cfg->data_dir, scram_args, n_scram);
        free(scram_args);
        cn_config_fini(cfg);
        free(cfg);
        return rc;
    }
    free(scram_args);
    if (verify) {
        int rc = verify_logs(cfg->data_dir);
        cn_config_fini(cfg);
        free(cfg);
        return rc;
    }
    if (cn_failpoints_init() != 0)
        return 2;
    cn_say_max_level = (enum cn_say_level)cfg->cairn_log_level;
    raise_nofile();
    /* Produce and fetch buffers are megabytes each.  Left to glibc's
     * defaults they come from fresh mmaps or a trimmed heap, and every
     * 4 KiB of them costs a page fault on first touch; keeping freed
     * memory in the heap makes reuse free.  What a burst leaves free
     * beyond 64 MiB is given back once a second (broker.c, on_trim). */
    mallopt(M_MMAP_THRESHOLD, 256 * 1024 * 1024);
    mallopt(M_TRIM_THRESHOLD, 512 * 1024 * 1024);
    /* A peer that vanishes mid-write must not kill the broker. */
    signal(SIGPIPE, SIG_IGN);
    /* libuv's workers run the fdatasyncs: up to three group-commit rounds
     * of four each at once (sync.c).  Read before the first work item, so
     * set here; the environment still wins. */
    setenv("UV_THREADPOOL_SIZE", "12", 0);

    uv_loop_t *loop = uv_default_loop();
    struct cn_broker *b = NULL;
    if (cn_broker_start(loop, cfg, &b, err, sizeof err) != 0) {
        fprintf(stderr, "cairn: %s\n", err[0] ? err : "start-up failed");
        return 2;
    }
    uv_run(loop, UV_RUN_DEFAULT);
    int status = cn_broker_free(b);
    uv_loop_close(loop);
    return status;
}
