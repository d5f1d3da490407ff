/*
 * cli_util.c - cairnctl's shared pieces: JSON and text output, the
 * bootstrap/controller connections, Metadata, and text tables.
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/err.h"
#include "cli/cli.h"
#include "proto/kerr.h"

/* ---- output helpers ---------------------------------------------------- */

void cli_put_bytes(struct cn_bytes b)
{
    if (b.len > 0)
        fwrite(b.ptr, 1, (size_t)b.len, stdout);
}

void cli_json_bytes(FILE *f, struct cn_bytes b)
{
    if (b.len < 0) {
        fputs("null", f);
        return;
    }
    fputc('"', f);
    for (int32_t i = 0; i < b.len; i++) {
        uint8_t ch = b.ptr[i];
        if (ch == '"' || ch == '\\')
            fprintf(f, "\\%c", ch);
        else if (ch == '\n')
            fputs("\\n", f);
        else if (ch == '\t')
            fputs("\\t", f);
        else if (ch < 0x20)
            fprintf(f, "\\u%04x", ch);
        else
            fputc(ch, f);
    }
    fputc('"', f);
}

void cli_json_str(FILE *f, const char *s)
{
    cli_json_bytes(f, cn_bytes_str(s));
}

/* Kafka prints topic ids as URL-safe base64 without padding (22 chars). */
void cli_uuid_text(const struct cn_uuid *u, char out[23])
{
    static const char alpha[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    int o = 0;

    for (int i = 0; i < 16; i += 3) {
        uint32_t v = (uint32_t)u->b[i] << 16;
        if (i + 1 < 16)
            v |= (uint32_t)u->b[i + 1] << 8;
        if (i + 2 < 16)
            v |= u->b[i + 2];
        out[o++] = alpha[(v >> 18) & 63];
        out[o++] = alpha[(v >> 12) & 63];
        if (i + 1 < 16)
            out[o++] = alpha[(v >> 6) & 63];
        if (i + 2 < 16)
            out[o++] = alpha[v & 63];
    }
    out[o] = '\0';
}

void cli_json_ints(const int32_t *v, int32_t n)
{
    putchar('[');
    for (int32_t i = 0; i < n; i++)
        printf("%s%d", i ? "," : "", v[i]);
    putchar(']');
}

void cli_text_ints(const int32_t *v, int32_t n)
{
    for (int32_t i = 0; i < n; i++)
        printf("%s%d", i ? "," : "", v[i]);
}

const char *cli_config_source_name(int8_t s)
{
    static const char *const names[] = {
        "UNKNOWN",
        "DYNAMIC_TOPIC_CONFIG",
        "DYNAMIC_BROKER_CONFIG",
        "DYNAMIC_DEFAULT_BROKER_CONFIG",
        "STATIC_BROKER_CONFIG",
        "DEFAULT_CONFIG",
        "DYNAMIC_BROKER_LOGGER_CONFIG",
        "CLIENT_METRICS_CONFIG",
        "GROUP_CONFIG",
    };
    if (s < 0 || (size_t)s >= sizeof names / sizeof *names)
        return "UNKNOWN";
    return names[s];
}

/*
 * Reports a Kafka error for topic on stderr and, with --json, as an object
 * on stdout.  Returns the exit code.
 */
int cli_topic_error(const struct opts *o, const char *what,
                       const char *topic, int16_t code, struct cn_bytes msg)
{
    if (code == KAFKA_UNKNOWN_TOPIC_OR_PARTITION)
        fprintf(stderr, "cairnctl: %s: topic '%s' does not exist (%s)\n", what,
                topic, cn_kerr_name(code));
    else if (msg.len > 0)
        fprintf(stderr, "cairnctl: %s '%s': %s: %.*s\n", what, topic,
                cn_kerr_name(code), (int)msg.len, (const char *)msg.ptr);
    else
        fprintf(stderr, "cairnctl: %s '%s': %s\n", what, topic,
                cn_kerr_name(code));
    if (o->json) {
        fputs("{\"topic\":", stdout);
        cli_json_str(stdout, topic);
        fputs(",\"error\":", stdout);
        cli_json_str(stdout, cn_kerr_name(code));
        fputs(",\"error_code\":", stdout);
        printf("%d,\"message\":", code);
        cli_json_bytes(stdout, msg.len > 0 ? msg : CN_BYTES_NULL);
        fputs("}\n", stdout);
    }
    return EXIT_FAIL;
}

/* ---- connections -------------------------------------------------------- */

int cli_ctx_open(struct ctx *x, const struct opts *o)
{
    char err[1024];

    x->o = o;
    x->props = NULL;
    cn_kclient_init(&x->boot);
    cn_kclient_init(&x->ctl);
    cn_arena_init(&x->arena);
    if (o->command_config) {
        x->props = calloc(1, sizeof *x->props);
        if (!x->props) {
            fprintf(stderr, "cairnctl: out of memory\n");
            return EXIT_FAIL;
        }
        /* A file that cannot be used is a usage error, like a bad
         * option: nothing was tried on the network. */
        if (cli_props_load(x->props, o->command_config, stderr, err,
                           sizeof err) ||
            cn_kclient_sec_load(&x->props->sec, err, sizeof err)) {
            fprintf(stderr, "cairnctl: --command-config %s\n", err);
            return EXIT_USAGE;
        }
        x->boot.sec = &x->props->sec;
        x->ctl.sec = &x->props->sec;
    }
    if (cn_kclient_bootstrap(&x->boot, o->bootstrap, o->timeout_ms)) {
        fprintf(stderr, "cairnctl: %s\n", x->boot.err);
        return EXIT_FAIL;
    }
    return 0;
}

void cli_ctx_close(struct ctx *x)
{
    cn_kclient_close(&x->boot);
    cn_kclient_close(&x->ctl);
    cn_arena_fini(&x->arena);
    if (x->props)
        cn_kclient_sec_fini(&x->props->sec);
    free(x->props);
    x->props = NULL;
}

/* The negotiated version of api on c, or -1 after saying why not. */
int16_t cli_need_version(struct cn_kclient *c, int16_t api, const char *name)
{
    int16_t v = cn_kclient_version(c, api);

    if (v < 0)
        fprintf(stderr, "cairnctl: broker %s:%d does not support %s\n", c->host,
                c->port, name);
    return v;
}

int cli_call(struct cn_kclient *c, int16_t api, int16_t v, const void *rq,
                void *rs, struct cn_arena *arena)
{
    int err = cn_kclient_call(c, api, v, rq, rs, arena);

    if (err)
        fprintf(stderr, "cairnctl: %s\n", c->err);
    return err;
}

/* Connection to the controller for admin requests, or NULL after an error. */
struct cn_kclient *cli_admin_conn(struct ctx *x)
{
    struct cn_kclient *c;

    if (cn_kclient_controller(&x->boot, &x->ctl, &c)) {
        fprintf(stderr, "cairnctl: %s\n", x->boot.err);
        return NULL;
    }
    return c;
}

/* Broker timeout for admin requests: below ours so its answer arrives. */
int32_t cli_admin_timeout(const struct opts *o)
{
    return o->timeout_ms > 2000 ? o->timeout_ms - 1000 : o->timeout_ms / 2;
}

/* ---- metadata ------------------------------------------------------------ */

/* Metadata for one topic, or all when topic is NULL. */
int cli_fetch_metadata(struct ctx *x, const char *topic,
                          struct cn_metadata_response *rs)
{
    struct cn_metadata_request rq;
    struct cn_metadata_request_metadata_request_topic t;
    int16_t v = cli_need_version(&x->boot, CN_API_METADATA, "Metadata");

    if (v < 0)
        return EXIT_FAIL;
    cn_metadata_request_init(&rq);
    if (topic) {
        memset(&t, 0, sizeof t);
        t.name = cn_bytes_str(topic);
        rq.topics = &t;
        rq.topics_len = 1;
    } else {
        rq.topics = NULL;
        rq.topics_len = -1; /* null: every topic (v0 sends an empty list) */
    }
    rq.allow_auto_topic_creation = false;
    if (cli_call(&x->boot, CN_API_METADATA, v, &rq, rs, &x->arena))
        return EXIT_FAIL;
    return 0;
}

int cli_cmp_bytes(struct cn_bytes a, struct cn_bytes b)
{
    int32_t al = a.len > 0 ? a.len : 0, bl = b.len > 0 ? b.len : 0;
    int c = memcmp(al ? (const void *)a.ptr : "", bl ? (const void *)b.ptr : "",
                   (size_t)(al < bl ? al : bl));
    return c ? c : (al > bl) - (al < bl);
}

static int cmp_topic(const void *a, const void *b)
{
    const struct cn_metadata_response_metadata_response_topic *const *ta = a;
    const struct cn_metadata_response_metadata_response_topic *const *tb = b;

    return cli_cmp_bytes((*ta)->name, (*tb)->name);
}

static int cmp_part(const void *a, const void *b)
{
    const struct cn_metadata_response_metadata_response_partition *pa = a;
    const struct cn_metadata_response_metadata_response_partition *pb = b;

    return (pa->partition_index > pb->partition_index) -
           (pa->partition_index < pb->partition_index);
}

/* Topics without error, sorted by name, in arena; NULL on no memory. */
struct cn_metadata_response_metadata_response_topic **
cli_sorted_topics(struct ctx *x, const struct cn_metadata_response *rs, int32_t *n)
{
    struct cn_metadata_response_metadata_response_topic **v;

    *n = 0;
    v = cn_arena_calloc(&x->arena,
                        (size_t)(rs->topics_len > 0 ? rs->topics_len : 1),
                        sizeof *v);
    if (!v)
        return NULL;
    for (int32_t i = 0; i < rs->topics_len; i++)
        if (!rs->topics[i].error_code && rs->topics[i].name.len > 0)
            v[(*n)++] = &rs->topics[i];
    qsort(v, (size_t)*n, sizeof *v, cmp_topic);
    for (int32_t i = 0; i < *n; i++)
        if (v[i]->partitions_len > 0)
            qsort(v[i]->partitions, (size_t)v[i]->partitions_len,
                  sizeof *v[i]->partitions, cmp_part);
    return v;
}




int cli_table_init(struct table *t, struct cn_arena *arena, int ncols,
                      int cap)
{
    if (ncols > TABLE_COLS_MAX)
        ncols = TABLE_COLS_MAX; /* callers pass constants well below */
    t->ncols = ncols;
    t->nrows = 0;
    t->cap = cap + 1;
    t->arena = arena;
    t->cells = cn_arena_calloc(arena, (size_t)t->cap * (size_t)ncols,
                               sizeof *t->cells);
    if (!t->cells) {
        fprintf(stderr, "cairnctl: out of memory\n");
        return EXIT_FAIL;
    }
    return 0;
}

/* Sets cell col of the current (last added) row, printf-style. */
__attribute__((format(printf, 3, 4)))
void cli_table_set(struct table *t, int col, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    t->cells[(t->nrows - 1) * t->ncols + col] =
        cn_arena_strdup(t->arena, cn_bytes_str(buf));
}

void cli_table_set_bytes(struct table *t, int col, struct cn_bytes b)
{
    t->cells[(t->nrows - 1) * t->ncols + col] = cn_arena_strdup(t->arena, b);
}

/* The header row: one name per column (t->ncols of them). */
void cli_table_header(struct table *t, const char *const *names)
{
    if (!cli_table_row(t))
        return;
    for (int c = 0; c < t->ncols; c++)
        cli_table_set_bytes(t, c, cn_bytes_str(names[c]));
}

/* Starts a new row; false when full (callers size the table up front). */
bool cli_table_row(struct table *t)
{
    if (t->nrows >= t->cap)
        return false;
    t->nrows++;
    return true;
}

void cli_table_print(const struct table *t)
{
    size_t w[TABLE_COLS_MAX] = {0};

    for (int r = 0; r < t->nrows; r++)
        for (int c = 0; c < t->ncols; c++) {
            const char *s = t->cells[r * t->ncols + c];
            size_t n = s ? strlen(s) : 0;
            if (n > w[c])
                w[c] = n;
        }
    for (int r = 0; r < t->nrows; r++) {
        int last = -1; /* last non-blank cell: no padding after it */

        for (int c = 0; c < t->ncols; c++) {
            const char *s = t->cells[r * t->ncols + c];
            if (s && *s)
                last = c;
        }
        for (int c = 0; c <= last; c++) {
            const char *s = t->cells[r * t->ncols + c];
            if (c < last)
                printf("%-*s  ", (int)w[c], s ? s : "");
            else
                fputs(s, stdout);
        }
        putchar('\n');
    }
}

/*
 * A connection to host:port: the bootstrap one when it is the same address,
 * else x->ctl, connected anew unless it is already there.  NULL after
 * printing why not.
 */
struct cn_kclient *cli_conn_to(struct ctx *x, struct cn_bytes host,
                                  int32_t port)
{
    char h[CN_KCLIENT_HOST_MAX];

    if (host.len <= 0 || (size_t)host.len >= sizeof h) {
        fprintf(stderr, "cairnctl: broker has a bad host name\n");
        return NULL;
    }
    memcpy(h, host.ptr, (size_t)host.len);
    h[host.len] = '\0';
    if (x->boot.fd >= 0 && port == x->boot.port && strcmp(h, x->boot.host) == 0)
        return &x->boot;
    /* Kept while the next broker asked is the same one (a command going
     * over the partitions of one leader, or to one coordinator). */
    if (x->ctl.fd >= 0 && port == x->ctl.port && strcmp(h, x->ctl.host) == 0)
        return &x->ctl;
    cn_kclient_close(&x->ctl);
    if (cn_kclient_connect(&x->ctl, h, port, x->o->timeout_ms)) {
        fprintf(stderr, "cairnctl: %s\n", x->ctl.err);
        return NULL;
    }
    return &x->ctl;
}

/* A broker's connection by node id from a Metadata reply, or NULL after
 * printing why. */
struct cn_kclient *cli_node_conn(struct ctx *x,
                                 const struct cn_metadata_response *md,
                                 int32_t node)
{
    for (int32_t i = 0; i < md->brokers_len; i++)
        if (md->brokers[i].node_id == node)
            return cli_conn_to(x, md->brokers[i].host, md->brokers[i].port);
    fprintf(stderr, "cairnctl: broker %d is not in the cluster's metadata\n",
            node);
    return NULL;
}

/*
 * One ListOffsets for one partition on c: timestamp -1 latest (the high
 * watermark read_uncommitted, the LSO read_committed), -2 earliest.
 */
int cli_list_offset(struct cn_kclient *c, struct ctx *x, const struct tp *tp,
                    int8_t isolation, int64_t timestamp, int64_t *out)
{
    struct cn_list_offsets_request rq;
    struct cn_list_offsets_request_list_offsets_topic t;
    struct cn_list_offsets_request_list_offsets_partition p;
    struct cn_list_offsets_response rs;
    int16_t v = cli_need_version(c, CN_API_LIST_OFFSETS, "ListOffsets");

    if (v < 0)
        return EXIT_FAIL;
    if (v < 2) {
        fprintf(stderr, "cairnctl: broker %s:%d has no ListOffsets v2 "
                        "(isolation levels)\n",
                c->host, c->port);
        return EXIT_FAIL;
    }
    cn_list_offsets_request_init(&rq);
    cn_list_offsets_request_list_offsets_topic_init(&t);
    cn_list_offsets_request_list_offsets_partition_init(&p);
    p.partition_index = tp->partition;
    p.timestamp = timestamp;
    t.name = tp->topic;
    t.partitions = &p;
    t.partitions_len = 1;
    rq.replica_id = -1;
    rq.isolation_level = isolation;
    rq.topics = &t;
    rq.topics_len = 1;
    if (cli_call(c, CN_API_LIST_OFFSETS, v, &rq, &rs, &x->arena))
        return EXIT_FAIL;
    if (rs.topics_len < 1 || rs.topics[0].partitions_len < 1) {
        fprintf(stderr, "cairnctl: ListOffsets response has no result\n");
        return EXIT_FAIL;
    }
    if (rs.topics[0].partitions[0].error_code) {
        fprintf(stderr, "cairnctl: ListOffsets for %.*s-%d: %s\n",
                (int)tp->topic.len, (const char *)tp->topic.ptr,
                tp->partition,
                cn_kerr_name(rs.topics[0].partitions[0].error_code));
        return EXIT_FAIL;
    }
    *out = rs.topics[0].partitions[0].offset;
    return 0;
}

/*
 * FindCoordinator for key (a group or transactional id, per key_type) and a
 * connection to it.  Returns 0 with *code set: KAFKA_NONE and *out, *node
 * filled, or the broker's error and *msg; EXIT_FAIL after printing a
 * transport failure.
 */
int cli_find_coordinator(struct ctx *x, int8_t key_type, const char *id,
                         struct cn_kclient **out, int32_t *node,
                         int16_t *code, struct cn_bytes *msg)
{
    struct cn_find_coordinator_request rq;
    struct cn_find_coordinator_response rs;
    struct cn_bytes key = cn_bytes_str(id);
    struct cn_bytes host;
    int32_t port;
    int16_t v = cli_need_version(&x->boot, CN_API_FIND_COORDINATOR,
                                 "FindCoordinator");

    if (v < 0)
        return EXIT_FAIL;
    cn_find_coordinator_request_init(&rq);
    /* v4+ batches keys (KIP-699); older versions take one key. */
    rq.key = key;
    rq.key_type = key_type;
    rq.coordinator_keys = &key;
    rq.coordinator_keys_len = 1;
    if (cli_call(&x->boot, CN_API_FIND_COORDINATOR, v, &rq, &rs, &x->arena))
        return EXIT_FAIL;
    if (v >= 4) {
        if (rs.coordinators_len < 1) {
            fprintf(stderr, "cairnctl: FindCoordinator response has no "
                            "result\n");
            return EXIT_FAIL;
        }
        *code = rs.coordinators[0].error_code;
        *msg = rs.coordinators[0].error_message;
        *node = rs.coordinators[0].node_id;
        host = rs.coordinators[0].host;
        port = rs.coordinators[0].port;
    } else {
        *code = rs.error_code;
        *msg = rs.error_message;
        *node = rs.node_id;
        host = rs.host;
        port = rs.port;
    }
    if (*code)
        return 0;
    *out = cli_conn_to(x, host, port);
    return *out ? 0 : EXIT_FAIL;
}
