/*
 * prom.c - Prometheus text sample lines; see prom.h.
 */
#include "cli/prom.h"

#include <stdlib.h>
#include <string.h>

static bool name_start(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
           c == ':';
}

static bool name_char(char c)
{
    return name_start(c) || (c >= '0' && c <= '9');
}

static size_t skip_blanks(const char *p, size_t i, size_t end)
{
    while (i < end && (p[i] == ' ' || p[i] == '\t'))
        i++;
    return i;
}

/*
 * One label pair of p[i..end): name, '=', a quoted value.  Sets the
 * name's and the raw value's spans and *next past the closing quote;
 * false when it is malformed.
 */
static bool label_pair(const char *p, size_t i, size_t end, size_t *next,
                       const char **n, size_t *nlen, const char **v,
                       size_t *vlen)
{
    size_t start = i;
    if (i >= end || !name_start(p[i]) || p[i] == ':')
        return false;
    while (i < end && name_char(p[i]) && p[i] != ':')
        i++;
    *n = p + start;
    *nlen = i - start;
    i = skip_blanks(p, i, end);
    if (i >= end || p[i] != '=')
        return false;
    i = skip_blanks(p, i + 1, end);
    if (i >= end || p[i] != '"')
        return false;
    start = ++i;
    while (i < end && p[i] != '"') {
        if (p[i] == '\\') {
            if (i + 1 >= end)
                return false;
            i++;
        }
        if (p[i] == '\n')
            return false;
        i++;
    }
    if (i >= end)
        return false;
    *v = p + start;
    *vlen = i - start;
    *next = i + 1;
    return true;
}

/* Walks the pairs of a label set (the text between the braces): calls fn
 * (if any) with each, stops at its true (*stopped).  Returns false when
 * the set is malformed. */
typedef bool (*pair_fn)(void *arg, const char *n, size_t nlen,
                        const char *v, size_t vlen);

static bool walk_labels(const char *p, size_t len, pair_fn fn, void *arg,
                        bool *stopped)
{
    size_t i = skip_blanks(p, 0, len);
    *stopped = false;
    while (i < len) {
        const char *n, *v;
        size_t nlen, vlen;
        if (!label_pair(p, i, len, &i, &n, &nlen, &v, &vlen))
            return false;
        if (fn && fn(arg, n, nlen, v, vlen)) {
            *stopped = true;
            return true;
        }
        i = skip_blanks(p, i, len);
        if (i < len) {
            if (p[i] != ',')
                return false;
            i = skip_blanks(p, i + 1, len);
        }
    }
    return true;
}

bool cli_prom_next(const char *text, size_t len, size_t *pos,
                   struct cli_prom_sample *s)
{
    while (*pos < len) {
        size_t start = *pos;
        const char *nl = memchr(text + start, '\n', len - start);
        size_t end = nl ? (size_t)(nl - text) : len;
        *pos = nl ? end + 1 : len;
        if (end > start && text[end - 1] == '\r')
            end--;
        size_t i = skip_blanks(text, start, end);
        if (i >= end || text[i] == '#' || !name_start(text[i]))
            continue;
        memset(s, 0, sizeof *s);
        s->name = text + i;
        while (i < end && name_char(text[i]))
            i++;
        s->name_len = (size_t)(text + i - s->name);
        /* Blanks may stand before the labels; without labels they are
         * the separator the value needs. */
        size_t brace = skip_blanks(text, i, end);
        if (brace < end && text[brace] == '{') {
            i = brace;
            /* The closing brace is the first one outside quotes. */
            size_t j = i + 1;
            bool quoted = false;
            for (; j < end; j++) {
                if (quoted && text[j] == '\\')
                    j++;
                else if (text[j] == '"')
                    quoted = !quoted;
                else if (!quoted && text[j] == '}')
                    break;
            }
            if (j >= end)
                continue;
            s->labels = text + i + 1;
            s->labels_len = j - i - 1;
            bool stopped;
            if (!walk_labels(s->labels, s->labels_len, NULL, NULL, &stopped))
                continue;
            i = j + 1;
        }
        size_t b = skip_blanks(text, i, end);
        if (b == i || b >= end)
            continue;
        size_t e = b;
        while (e < end && text[e] != ' ' && text[e] != '\t')
            e++;
        char num[64];
        if (e - b >= sizeof num)
            continue;
        memcpy(num, text + b, e - b);
        num[e - b] = '\0';
        char *stop;
        s->value = strtod(num, &stop);
        if (stop == num || *stop)
            continue;
        /* Then an optional timestamp (ms) and nothing else. */
        size_t t = skip_blanks(text, e, end), ts = t;
        if (t < end && text[t] == '-')
            t++;
        size_t digits = t;
        while (t < end && text[t] >= '0' && text[t] <= '9')
            t++;
        if (ts < end && t == digits)
            continue;
        if (skip_blanks(text, t, end) != end)
            continue;
        return true;
    }
    return false;
}

bool cli_prom_is(const struct cli_prom_sample *s, const char *name)
{
    size_t n = strlen(name);
    return s->name_len == n && memcmp(s->name, name, n) == 0;
}

struct find {
    const char *name;
    const char *v;
    size_t vlen;
};

static bool find_pair(void *arg, const char *n, size_t nlen, const char *v,
                      size_t vlen)
{
    struct find *f = arg;
    if (strlen(f->name) != nlen || memcmp(f->name, n, nlen) != 0)
        return false;
    f->v = v;
    f->vlen = vlen;
    return true;
}

bool cli_prom_label(const struct cli_prom_sample *s, const char *name,
                    char *out, size_t cap)
{
    struct find f = {.name = name};
    bool stopped;
    if (!s->labels || cap == 0 ||
        !walk_labels(s->labels, s->labels_len, find_pair, &f, &stopped) ||
        !stopped)
        return false;
    size_t o = 0;
    for (size_t i = 0; i < f.vlen; i++) {
        char c = f.v[i];
        if (c == '\\' && i + 1 < f.vlen) {
            c = f.v[++i];
            if (c == 'n')
                c = '\n';
        }
        if (o + 1 >= cap)
            return false;
        out[o++] = c;
    }
    out[o] = '\0';
    return true;
}
