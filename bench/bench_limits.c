/*
 * bench_limits: measures what this machine allows, so broker figures can
 * be read as a fraction of the hardware rather than as raw numbers.
 *
 *   bench_limits --dir D [--seconds S] [--only disk]
 *
 * Prints one JSON object per line:
 *   disk_write_fdatasync  256 KiB appends, fdatasync after each: MB/s,
 *                         and MB/s per whole second ("series_mb_per_s")
 *   fdatasync_4k          4 KiB appends, fdatasync after each: p50/p99
 *   tcp_loopback          one TCP stream over 127.0.0.1: MB/s
 * The files are made in D (use the broker's filesystem) and removed.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define CHUNK (256 * 1024)
#define SMALL 4096
#define MAX_SAMPLES 200000
#define MAX_SERIES 3600

static double series[MAX_SERIES]; /* synced bytes per second */

static double seconds = 2.5;

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int write_all(int fd, const char *buf, size_t len)
{
    while (len) {
        ssize_t n = write(fd, buf, len);

        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

static int bench_disk(const char *dir)
{
    char path[4096];
    char *buf = malloc(CHUNK);
    double t0, t;
    long chunks = 0;
    int fd;

    snprintf(path, sizeof(path), "%s/bench_limits.seq", dir);
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) {
        perror(path);
        free(buf);
        return -1;
    }
    memset(buf, 0x5a, CHUNK);
    t0 = now_s();
    t = t0;
    do {
        long sec;

        if (write_all(fd, buf, CHUNK) || fdatasync(fd)) {
            perror("write/fdatasync");
            break;
        }
        chunks++;
        t = now_s();
        sec = (long)(t - t0);
        if (sec < MAX_SERIES)
            series[sec] += CHUNK;
    } while (t - t0 < seconds);
    /* The per-second series shows whether a cache in front of the disk
     * absorbed the first seconds: the steady rate is the later ones. */
    printf("{\"test\": \"disk_write_fdatasync\", \"chunk_bytes\": %d, "
           "\"seconds\": %.3f, \"bytes\": %ld, \"mb_per_s\": %.1f, "
           "\"series_mb_per_s\": [",
           CHUNK, t - t0, chunks * CHUNK, chunks * CHUNK / (t - t0) / 1e6);
    for (long i = 0; i < (long)(t - t0) && i < MAX_SERIES; i++)
        printf("%s%.1f", i ? ", " : "", series[i] / 1e6);
    printf("]}\n");
    close(fd);
    unlink(path);
    free(buf);
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

static int bench_sync_latency(const char *dir)
{
    char path[4096];
    char buf[SMALL];
    double *lat = malloc(sizeof(*lat) * MAX_SAMPLES);
    double t0;
    long n = 0;
    int fd;

    snprintf(path, sizeof(path), "%s/bench_limits.small", dir);
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0600);
    if (fd < 0) {
        perror(path);
        free(lat);
        return -1;
    }
    memset(buf, 0xa5, sizeof(buf));
    t0 = now_s();
    while (n < MAX_SAMPLES && now_s() - t0 < seconds) {
        double s = now_s();

        if (write_all(fd, buf, sizeof(buf)) || fdatasync(fd)) {
            perror("write/fdatasync");
            break;
        }
        lat[n++] = (now_s() - s) * 1e6;
    }
    if (n) {
        qsort(lat, (size_t)n, sizeof(*lat), cmp_double);
        printf("{\"test\": \"fdatasync_4k\", \"count\": %ld, "
               "\"p50_us\": %.1f, \"p99_us\": %.1f, \"max_us\": %.1f}\n",
               n, lat[n / 2], lat[n * 99 / 100], lat[n - 1]);
    }
    close(fd);
    unlink(path);
    free(lat);
    return 0;
}

static void *sink_thread(void *arg)
{
    int lfd = *(int *)arg;
    int fd = accept(lfd, NULL, NULL);
    char *buf = malloc(CHUNK);

    if (fd >= 0) {
        while (read(fd, buf, CHUNK) > 0)
            ;
        close(fd);
    }
    free(buf);
    return NULL;
}

static int bench_tcp(void)
{
    struct sockaddr_in sa;
    socklen_t slen = sizeof(sa);
    pthread_t th;
    char *buf = malloc(CHUNK);
    double t0, t;
    long bytes = 0;
    int lfd, fd;

    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    lfd = socket(AF_INET, SOCK_STREAM, 0);
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) ||
        listen(lfd, 1) || getsockname(lfd, (struct sockaddr *)&sa, &slen)) {
        perror("listen");
        free(buf);
        return -1;
    }
    pthread_create(&th, NULL, sink_thread, &lfd);
    fd = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
        perror("connect");
        free(buf);
        return -1;
    }
    memset(buf, 0x33, CHUNK);
    t0 = now_s();
    t = t0;
    do {
        if (write_all(fd, buf, CHUNK))
            break;
        bytes += CHUNK;
        t = now_s();
    } while (t - t0 < seconds * 0.8);
    close(fd);
    pthread_join(th, NULL);
    close(lfd);
    printf("{\"test\": \"tcp_loopback\", \"seconds\": %.3f, \"bytes\": %ld, "
           "\"mb_per_s\": %.1f}\n", t - t0, bytes, bytes / (t - t0) / 1e6);
    free(buf);
    return 0;
}

int main(int argc, char **argv)
{
    const char *dir = ".", *only = NULL;
    int i, rc = 0;

    for (i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--dir"))
            dir = argv[i + 1];
        else if (!strcmp(argv[i], "--seconds"))
            seconds = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--only"))
            only = argv[i + 1];
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    rc |= bench_disk(dir);
    /* --only disk: the sustained synced rate alone, for a long run. */
    if (only && !strcmp(only, "disk"))
        return rc ? 1 : 0;
    rc |= bench_sync_latency(dir);
    rc |= bench_tcp();
    return rc ? 1 : 0;
}
