/*
 * e2e_mockbroker: hosts librdkafka's built-in mock cluster in its own
 * process so the other e2e and bench programs (and kcat, Python clients)
 * can be checked against a known-good broker before Cairn exists.
 *
 *   e2e_mockbroker [--brokers N] [--topic NAME:PARTITIONS]...
 *                  [--watch-stdin]
 *
 * Prints "bootstrap <host:port,...>" on stdout once listening, then runs
 * until SIGTERM/SIGINT (or, with --watch-stdin, until stdin reaches EOF).
 * The mock cluster does not implement CreateTopics, so topics are made
 * here (or auto-created when a client first asks for them).
 */
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

int main(int argc, char **argv)
{
    char errstr[512];
    rd_kafka_conf_t *conf;
    rd_kafka_t *rk;
    rd_kafka_mock_cluster_t *mc;
    int nbrokers = 1;
    int watch_stdin = 0;
    int i;

    for (i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--brokers") && i + 1 < argc)
            nbrokers = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--watch-stdin"))
            watch_stdin = 1;
    }

    conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "log_level", "3", errstr, sizeof(errstr));
    /* The handle exists only to own the mock cluster's threads. */
    rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
    if (!rk) {
        fprintf(stderr, "rd_kafka_new: %s\n", errstr);
        return 1;
    }
    mc = rd_kafka_mock_cluster_new(rk, nbrokers);
    if (!mc) {
        fprintf(stderr, "mock cluster creation failed\n");
        return 1;
    }

    for (i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--topic") && i + 1 < argc) {
            char name[256];
            const char *spec = argv[++i];
            const char *colon = strchr(spec, ':');
            int parts = 1;
            size_t len = colon ? (size_t)(colon - spec) : strlen(spec);

            if (len >= sizeof(name))
                len = sizeof(name) - 1;
            memcpy(name, spec, len);
            name[len] = '\0';
            if (colon)
                parts = atoi(colon + 1);
            if (rd_kafka_mock_topic_create(mc, name, parts, 1)) {
                fprintf(stderr, "cannot create topic %s\n", name);
                return 1;
            }
        }
    }

    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    printf("bootstrap %s\n", rd_kafka_mock_cluster_bootstraps(mc));
    fflush(stdout);

    while (!stop) {
        struct pollfd pfd = { .fd = watch_stdin ? 0 : -1,
                              .events = POLLIN };
        char buf[256];

        if (poll(&pfd, 1, 200) > 0) {
            ssize_t n = read(0, buf, sizeof(buf));

            /* EOF on stdin means our parent went away. */
            if (n <= 0)
                break;
        }
    }

    rd_kafka_mock_cluster_destroy(mc);
    rd_kafka_destroy(rk);
    return 0;
}
