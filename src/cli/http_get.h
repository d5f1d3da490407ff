/*
 * http_get.h - cairnctl's plain-HTTP GET, for Cairn's metrics endpoint
 * (which has no TLS): one request, HTTP/1.0 with Connection: close, the
 * body read until the server closes, all within one timeout.
 */
#ifndef CN_CLI_HTTP_GET_H
#define CN_CLI_HTTP_GET_H

#include <stddef.h>

/* Larger bodies are refused: /metrics is far smaller. */
#define CLI_HTTP_BODY_MAX ((size_t)64 << 20)

struct cli_url {
    char host[256]; /* no brackets */
    int port;
    char path[512]; /* from the first '/', "/metrics" when none */
};

/*
 * "http://HOST[:PORT][/PATH]" or "HOST:PORT[/PATH]" ([V6ADDR] for IPv6;
 * port 80 with http:// and no port).  Returns 0, or CN_EINVAL with why
 * in err.
 */
int cli_url_parse(const char *s, struct cli_url *u, char *err,
                  size_t err_size);

/*
 * GETs u within timeout_ms.  On success (status 200) returns 0 and sets
 * *body (malloc'd, NUL-terminated, the caller frees) and *len.  Otherwise
 * returns a negative code with why in err ("cannot connect to ...", "HTTP
 * status 404", "timed out").
 */
int cli_http_get(const struct cli_url *u, int timeout_ms, char **body,
                 size_t *len, char *err, size_t err_size);

#endif
