/*
 * test_prom.c - cairnctl's reader of Cairn's /metrics: the Prometheus
 * text line parser (prom.c), the URL parser and the plain-HTTP GET
 * (http_get.c) against a socket that answers what a test says.
 *
 * prom.c, http_get.c and kclient.c belong to the cairnctl executable, so
 * they are compiled in here directly.
 */
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cli/http_get.c"
#include "cli/kclient.c"
#include "cli/prom.c"
#include "unit.h"

/* All samples of text as "name|labels|value" lines. */
static char *samples(const char *text)
{
    static char out[4096];
    size_t pos = 0, o = 0;
    struct cli_prom_sample s;
    out[0] = '\0';
    while (cli_prom_next(text, strlen(text), &pos, &s))
        o += (size_t)snprintf(out + o, sizeof out - o, "%.*s|%.*s|%g\n",
                              (int)s.name_len, s.name,
                              s.labels ? (int)s.labels_len : 0,
                              s.labels ? s.labels : "", s.value);
    return out;
}

UNIT_TEST(prom_lines)
{
    CHECK(strcmp(samples("# HELP a x\n# TYPE a gauge\na 1\n"
                         "b{x=\"1\",y=\"2\"} 2.5\r\n\n  c 3 1700000000\n"
                         "d{} -4\ne{x=\"a}b\"} 5\n"
                         "f {x=\"1\"} 6"),
                 "a||1\nb|x=\"1\",y=\"2\"|2.5\nc||3\nd||-4\n"
                 "e|x=\"a}b\"|5\nf|x=\"1\"|6\n") == 0);
    size_t pos = 0;
    struct cli_prom_sample s;
    const char *t = "n +Inf\nm NaN\n";
    CHECK(cli_prom_next(t, strlen(t), &pos, &s) && isinf(s.value));
    CHECK(cli_prom_next(t, strlen(t), &pos, &s) && isnan(s.value));
    CHECK(!cli_prom_next(t, strlen(t), &pos, &s));
}

UNIT_TEST(prom_malformed_skipped)
{
    /* Each bad line is skipped and the next one still read. */
    CHECK(strcmp(samples("a\nb{x=\"1\" 2\nc{x=1} 3\nd{x=\"1\"}4\ne x\n"
                         "f{x=\"\\\"} 5\n9g 1\ng{x=\"1\"y=\"2\"} 6\n"
                         "h{x=\"1\"} 1 2 3\ni 1x\nj 1 -\nk 1 2x\nok 7 -12"),
                 "ok||7\n") == 0);
    /* No NUL terminator needed: len bounds every read. */
    char buf[4] = {'a', ' ', '1', '2'};
    size_t pos = 0;
    struct cli_prom_sample s;
    CHECK(cli_prom_next(buf, 3, &pos, &s) && s.value == 1);
}

UNIT_TEST(prom_labels)
{
    const char *t = "m{topic=\"a\\\"b\\\\c\\nd\", partition=\"3\",error=\"\","
                    "} 1\n";
    size_t pos = 0;
    struct cli_prom_sample s;
    char v[16];
    CHECK(cli_prom_next(t, strlen(t), &pos, &s));
    CHECK(cli_prom_is(&s, "m") && !cli_prom_is(&s, "mm"));
    CHECK(cli_prom_label(&s, "topic", v, sizeof v));
    CHECK(strcmp(v, "a\"b\\c\nd") == 0);
    CHECK(cli_prom_label(&s, "partition", v, sizeof v) && !strcmp(v, "3"));
    CHECK(cli_prom_label(&s, "error", v, sizeof v) && v[0] == '\0');
    CHECK(!cli_prom_label(&s, "part", v, sizeof v));
    CHECK(!cli_prom_label(&s, "topic", v, 7)); /* does not fit */
}

UNIT_TEST(url_parse)
{
    struct cli_url u;
    char err[256];
    CHECK_EQ(cli_url_parse("http://h:1234/m", &u, err, sizeof err), 0);
    CHECK(!strcmp(u.host, "h") && u.port == 1234 && !strcmp(u.path, "/m"));
    CHECK_EQ(cli_url_parse("http://h", &u, err, sizeof err), 0);
    CHECK(u.port == 80 && !strcmp(u.path, "/metrics"));
    CHECK_EQ(cli_url_parse("[::1]:9464", &u, err, sizeof err), 0);
    CHECK(!strcmp(u.host, "::1") && u.port == 9464);
    CHECK_EQ(cli_url_parse("h", &u, err, sizeof err), CN_EINVAL);
    CHECK(strstr(err, "no port") != NULL);
    CHECK_EQ(cli_url_parse("https://h:1", &u, err, sizeof err), CN_EINVAL);
    CHECK(strstr(err, "only http://") != NULL);
    CHECK_EQ(cli_url_parse("h:0", &u, err, sizeof err), CN_EINVAL);
    CHECK_EQ(cli_url_parse("h:99999", &u, err, sizeof err), CN_EINVAL);
    CHECK_EQ(cli_url_parse("h:1x", &u, err, sizeof err), CN_EINVAL);
    CHECK_EQ(cli_url_parse("[::1", &u, err, sizeof err), CN_EINVAL);
    CHECK_EQ(cli_url_parse("h:1/a b", &u, err, sizeof err), CN_EINVAL);
}

/* A one-connection server: reads the request, writes reply (NULL: says
 * nothing and holds the connection until the client gives up). */
struct fake {
    int lfd;
    const char *reply;
    char req[1024];
};

static void *serve(void *arg)
{
    struct fake *f = arg;
    int c = accept(f->lfd, NULL, NULL);
    if (c < 0)
        return NULL;
    ssize_t n = recv(c, f->req, sizeof f->req - 1, 0);
    f->req[n > 0 ? n : 0] = '\0';
    if (f->reply) {
        (void)!write(c, f->reply, strlen(f->reply));
    } else {
        char b[16];
        while (recv(c, b, sizeof b, 0) > 0)
            ;
    }
    close(c);
    return NULL;
}

static int get(const char *reply, int timeout_ms, char **body, size_t *len,
               char *err, struct fake *f)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    f->lfd = socket(AF_INET, SOCK_STREAM, 0);
    f->reply = reply;
    CHECK(f->lfd >= 0 && bind(f->lfd, (struct sockaddr *)&a, sizeof a) == 0 &&
          listen(f->lfd, 1) == 0 &&
          getsockname(f->lfd, (struct sockaddr *)&a, &al) == 0);
    pthread_t th;
    CHECK_EQ(pthread_create(&th, NULL, serve, f), 0);
    struct cli_url u = {.host = "127.0.0.1", .port = ntohs(a.sin_port),
                        .path = "/metrics"};
    int rc = cli_http_get(&u, timeout_ms, body, len, err, 256);
    pthread_join(th, NULL);
    close(f->lfd);
    return rc;
}

UNIT_TEST(http_get_ok_and_errors)
{
    struct fake f;
    char *body, err[256];
    size_t len;
    CHECK_EQ(get("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\na 1\n",
                 5000, &body, &len, err, &f), 0);
    CHECK(len == 4 && strcmp(body, "a 1\n") == 0);
    const char *want = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1:";
    CHECK(strncmp(f.req, want, strlen(want)) == 0);
    free(body);
    CHECK(get("HTTP/1.1 404 Not Found\r\n\r\nno", 5000, &body, &len, err,
              &f) != 0);
    CHECK(body == NULL && strstr(err, "HTTP status 404") != NULL);
    CHECK(get("SSH-2.0-x\r\n", 5000, &body, &len, err, &f) != 0);
    CHECK(strstr(err, "did not answer with HTTP") != NULL);
    CHECK(get("HTTP/1.1 200 OK\r\nX: y", 5000, &body, &len, err, &f) != 0);
    CHECK_EQ(get(NULL, 300, &body, &len, err, &f), -ETIMEDOUT);
    CHECK(strstr(err, "timed out") != NULL);
}

UNIT_MAIN(prom_lines, prom_malformed_skipped, prom_labels, url_parse,
          http_get_ok_and_errors)
