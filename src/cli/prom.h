/*
 * prom.h - the few parts of the Prometheus text exposition format (0.0.4)
 * cairnctl reads from Cairn's /metrics: sample lines, their labels, their
 * values.  The text comes off the network, so any bytes are safe: a line
 * that does not parse is skipped, nothing is read past len, nothing is
 * allocated.
 */
#ifndef CN_CLI_PROM_H
#define CN_CLI_PROM_H

#include <stdbool.h>
#include <stddef.h>

struct cli_prom_sample {
    const char *name;   /* metric name, not NUL-terminated */
    size_t name_len;
    const char *labels; /* between the braces, raw; NULL without braces */
    size_t labels_len;
    double value;       /* NaN and +-Inf as strtod reads them */
};

/*
 * The next sample line of text[0..len) at or after *pos (moved past it);
 * comments, blank and malformed lines are skipped.  Returns false at the
 * end.
 */
bool cli_prom_next(const char *text, size_t len, size_t *pos,
                   struct cli_prom_sample *s);

/* Whether s is the metric name. */
bool cli_prom_is(const struct cli_prom_sample *s, const char *name);

/*
 * Label name's value of s, unescaped (\\, \", \n) into out (cap bytes,
 * NUL-terminated).  Returns false when s has no such label or the value
 * does not fit.
 */
bool cli_prom_label(const struct cli_prom_sample *s, const char *name,
                    char *out, size_t cap);

#endif
