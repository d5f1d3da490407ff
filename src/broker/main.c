/*
 * main.c - the cairn broker's command line.
 *
 *     cairn [-c FILE] [--set key=value ...]
 *     cairn --help | --help-config | --version
 */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "base/config.h"
#include "base/failpoint.h"
#include "base/say.h"
#include "broker/broker.h"

#define CAIRN_VERSION "0.1.0"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: cairn [-c FILE] [--set key=value ...]\n"
            "       cairn --help-config   list every key and its default\n"
            "\n"
            "Runs a Kafka-compatible broker.  With no arguments it listens on\n"
            "127.0.0.1:9092 and keeps its data in ./data.\n");
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
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
    if (cn_failpoints_init() != 0)
        return 2;
    cn_say_max_level = (enum cn_say_level)cfg->cairn_log_level;
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
    cn_broker_free(b);
    uv_loop_close(loop);
    return 0;
}
