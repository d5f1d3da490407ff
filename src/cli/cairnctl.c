/*
 * cairnctl.c - operator CLI: topics, configs and transactions over the Kafka
 * protocol.
 *
 * Speaks only Kafka's wire protocol (through kclient.h), so it works against
 * any Kafka-compatible broker.  Output imitates kafka-topics.sh,
 * kafka-configs.sh and kafka-transactions.sh (KIP-664); --json prints one
 * JSON document on stdout instead.
 * Exit codes: 0 success, 1 the operation failed, 2 bad usage.
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "base/clock.h"
#include "base/err.h"
#include "cli/kclient.h"
#include "proto/gen/msgs.h"
#include "proto/kerr.h"

#define API_METADATA 3
#define API_FIND_COORDINATOR 10
#define API_CREATE_TOPICS 19
#define API_DELETE_TOPICS 20
#define API_DESCRIBE_CONFIGS 32
#define API_CREATE_PARTITIONS 37
#define API_INCREMENTAL_ALTER_CONFIGS 44
#define API_DESCRIBE_PRODUCERS 61
#define API_DESCRIBE_TRANSACTIONS 65
#define API_LIST_TRANSACTIONS 66

#define COORDINATOR_TRANSACTION 1 /* FindCoordinator key type */

#define RESOURCE_TOPIC 2
#define CONFIG_SRC_TOPIC 1
#define OP_SET 0
#define OP_DELETE 1

#define EXIT_FAIL 1
#define EXIT_USAGE 2

/* Options; each bit says it was given, so commands can reject strays. */
enum {
    OPT_TOPIC = 1 << 0,
    OPT_PARTITIONS = 1 << 1,
    OPT_RF = 1 << 2,
    OPT_CONFIG = 1 << 3,
    OPT_SET = 1 << 4,
    OPT_DELETE = 1 << 5,
    OPT_ALL = 1 << 6,
    OPT_STATE = 1 << 7,
    OPT_PRODUCER_ID = 1 << 8,
    OPT_DURATION = 1 << 9,
    OPT_TXN_ID = 1 << 10,
    OPT_PARTITION = 1 << 11,
};

struct opts {
    const char *bootstrap; /* HOST:PORT */
    int timeout_ms;        /* per socket step and per admin request */
    bool json;             /* machine output */
    bool help;             /* --help given */
    unsigned seen;         /* OPT_* bits given */
    const char *words[2];  /* "topics", "list" */
    int nwords;            /* positional words seen (may exceed 2) */
    const char *extra;     /* first positional word beyond two */
    const char *topic;     /* --topic */
    int32_t partitions;    /* --partitions */
    int32_t rf;            /* --replication-factor */
    const char **configs;  /* --config k=v, argc slots */
    int nconfigs;          /* entries in configs */
    const char **sets;     /* --set k=v */
    int nsets;             /* entries in sets */
    const char **deletes;  /* --delete k */
    int ndeletes;          /* entries in deletes */
    const char **states;   /* --state S, argc slots */
    int nstates;           /* entries in states */
    int64_t *pids;         /* --producer-id N, argc slots */
    int npids;             /* entries in pids */
    int64_t duration_ms;   /* --duration-ms: open at least this long (ms) */
    const char *txn_id;    /* --transactional-id */
    int32_t partition;     /* --partition */
};

/* One command's connections and the arena its responses live in. */
struct ctx {
    const struct opts *o;   /* parsed command line */
    struct cn_kclient boot; /* bootstrap broker */
    struct cn_kclient ctl;  /* controller, when it is another broker */
    struct cn_arena arena;  /* response frames and decoded replies */
};

static const char usage_text[] =
    "Usage: cairnctl [--bootstrap-server HOST:PORT] [--json] [--timeout MS]\n"
    "                <command> [options]\n"
    "\n"
    "Commands:\n"
    "  topics list\n"
    "  topics describe [--topic T]\n"
    "  topics create --topic T [--partitions N] [--replication-factor N]\n"
    "                [--config k=v ...]\n"
    "  topics delete --topic T\n"
    "  topics alter --topic T --partitions N\n"
    "  configs describe --topic T [--all]\n"
    "  configs alter --topic T [--set k=v ...] [--delete k ...]\n"
    "  txn list [--state S ...] [--producer-id N ...] [--duration-ms N]\n"
    "  txn describe --transactional-id ID\n"
    "  txn describe-producers --topic T --partition P\n"
    "\n"
    "Global options (before or after the command):\n"
    "  --bootstrap-server HOST:PORT  broker to talk to (default "
    "127.0.0.1:9092;\n"
    "                                IPv6 as [ADDR]:PORT)\n"
    "  --json                        machine-readable output on stdout\n"
    "  --timeout MS                  network timeout (default 10000)\n"
    "  --help                        this text\n";

/* Prints a usage error (printf-style) and returns the usage exit code. */
__attribute__((format(printf, 1, 2)))
static int usage_error(const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "cairnctl: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry 'cairnctl --help'.\n");
    return EXIT_USAGE;
}

static bool parse_int32(const char *s, int32_t min, int32_t *out)
{
    char *end;
    long v;

    errno = 0;
    v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < min || v > INT32_MAX)
        return false;
    *out = (int32_t)v;
    return true;
}

static bool parse_int64(const char *s, int64_t min, int64_t *out)
{
    char *end;
    long long v;

    errno = 0;
    v = strtoll(s, &end, 10);
    if (errno || end == s || *end || v < min)
        return false;
    *out = (int64_t)v;
    return true;
}

/* Returns 0, or an exit code after printing the usage error. */
static int parse_args(int argc, char **argv, struct opts *o)
{
    static const char *const with_value[] = {
        "--bootstrap-server",   "--timeout", "--topic", "--partitions",
        "--replication-factor", "--config",  "--set",   "--delete",
        "--state",              "--producer-id", "--duration-ms",
        "--transactional-id",   "--partition",
    };

    o->bootstrap = "127.0.0.1:9092";
    o->timeout_ms = CN_KCLIENT_TIMEOUT_MS;
    o->partitions = -1;
    o->rf = -1;
    o->configs = calloc((size_t)argc + 1, sizeof *o->configs);
    o->sets = calloc((size_t)argc + 1, sizeof *o->sets);
    o->deletes = calloc((size_t)argc + 1, sizeof *o->deletes);
    o->states = calloc((size_t)argc + 1, sizeof *o->states);
    o->pids = calloc((size_t)argc + 1, sizeof *o->pids);
    o->partition = -1;
    if (!o->configs || !o->sets || !o->deletes || !o->states || !o->pids) {
        fprintf(stderr, "cairnctl: out of memory\n");
        return EXIT_FAIL;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = NULL;
        char name[64];
        const char *eq;
        bool takes = false;

        if (strncmp(a, "--", 2) != 0 || strcmp(a, "--") == 0) {
            if (a[0] == '-' && a[1])
                return usage_error("unknown option '%s'", a);
            if (o->nwords < 2)
                o->words[o->nwords] = a;
            else if (!o->extra)
                o->extra = a;
            o->nwords++;
            continue;
        }
        eq = strchr(a, '=');
        if (eq && (size_t)(eq - a) < sizeof name) {
            memcpy(name, a, (size_t)(eq - a));
            name[eq - a] = '\0';
            val = eq + 1;
        } else {
            snprintf(name, sizeof name, "%s", a);
        }
        for (size_t k = 0; k < sizeof with_value / sizeof *with_value; k++)
            if (strcmp(name, with_value[k]) == 0)
                takes = true;
        if (takes && !val) {
            if (i + 1 >= argc)
                return usage_error("option '%s' needs a value", name);
            val = argv[++i];
        } else if (!takes && val) {
            return usage_error("option '%s' takes no value", name);
        }

        if (strcmp(name, "--help") == 0) {
            o->help = true;
        } else if (strcmp(name, "--json") == 0) {
            o->json = true;
        } else if (strcmp(name, "--all") == 0) {
            o->seen |= OPT_ALL;
        } else if (strcmp(name, "--bootstrap-server") == 0) {
            o->bootstrap = val;
        } else if (strcmp(name, "--timeout") == 0) {
            int32_t t;
            if (!parse_int32(val, 1, &t))
                return usage_error("bad --timeout '%s' (milliseconds)", val);
            o->timeout_ms = t;
        } else if (strcmp(name, "--topic") == 0) {
            if (!*val)
                return usage_error("empty --topic");
            o->topic = val;
            o->seen |= OPT_TOPIC;
        } else if (strcmp(name, "--partitions") == 0) {
            if (!parse_int32(val, 1, &o->partitions))
                return usage_error("bad --partitions '%s' (want a number "
                                   ">= 1)",
                                   val);
            o->seen |= OPT_PARTITIONS;
        } else if (strcmp(name, "--replication-factor") == 0) {
            int32_t rf;
            if (!parse_int32(val, 1, &rf) || rf > INT16_MAX)
                return usage_error("bad --replication-factor '%s' (want a "
                                   "number >= 1)",
                                   val);
            o->rf = rf;
            o->seen |= OPT_RF;
        } else if (strcmp(name, "--config") == 0) {
            if (!strchr(val, '=') || val[0] == '=')
                return usage_error("bad --config '%s' (want key=value)", val);
            o->configs[o->nconfigs++] = val;
            o->seen |= OPT_CONFIG;
        } else if (strcmp(name, "--set") == 0) {
            if (!strchr(val, '=') || val[0] == '=')
                return usage_error("bad --set '%s' (want key=value)", val);
            o->sets[o->nsets++] = val;
            o->seen |= OPT_SET;
        } else if (strcmp(name, "--delete") == 0) {
            if (!*val)
                return usage_error("empty --delete");
            o->deletes[o->ndeletes++] = val;
            o->seen |= OPT_DELETE;
        } else if (strcmp(name, "--state") == 0) {
            if (!*val)
                return usage_error("empty --state");
            o->states[o->nstates++] = val;
            o->seen |= OPT_STATE;
        } else if (strcmp(name, "--producer-id") == 0) {
            if (!parse_int64(val, 0, &o->pids[o->npids]))
                return usage_error("bad --producer-id '%s' (want a number "
                                   ">= 0)",
                                   val);
            o->npids++;
            o->seen |= OPT_PRODUCER_ID;
        } else if (strcmp(name, "--duration-ms") == 0) {
            if (!parse_int64(val, 0, &o->duration_ms))
                return usage_error("bad --duration-ms '%s' (want a number "
                                   ">= 0)",
                                   val);
            o->seen |= OPT_DURATION;
        } else if (strcmp(name, "--transactional-id") == 0) {
            if (!*val)
                return usage_error("empty --transactional-id");
            o->txn_id = val;
            o->seen |= OPT_TXN_ID;
        } else if (strcmp(name, "--partition") == 0) {
            if (!parse_int32(val, 0, &o->partition))
                return usage_error("bad --partition '%s' (want a number "
                                   ">= 0)",
                                   val);
            o->seen |= OPT_PARTITION;
        } else {
            return usage_error("unknown option '%s'", name);
        }
    }
    return 0;
}

/* ---- output helpers ---------------------------------------------------- */

static void put_bytes(struct cn_bytes b)
{
    if (b.len > 0)
        fwrite(b.ptr, 1, (size_t)b.len, stdout);
}

static void json_bytes(FILE *f, struct cn_bytes b)
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

static void json_str(FILE *f, const char *s)
{
    json_bytes(f, cn_bytes_str(s));
}

/* Kafka prints topic ids as URL-safe base64 without padding (22 chars). */
static void uuid_text(const struct cn_uuid *u, char out[23])
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

static void json_ints(const int32_t *v, int32_t n)
{
    putchar('[');
    for (int32_t i = 0; i < n; i++)
        printf("%s%d", i ? "," : "", v[i]);
    putchar(']');
}

static void text_ints(const int32_t *v, int32_t n)
{
    for (int32_t i = 0; i < n; i++)
        printf("%s%d", i ? "," : "", v[i]);
}

static const char *config_source_name(int8_t s)
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
static int topic_error(const struct opts *o, const char *what,
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
        json_str(stdout, topic);
        fputs(",\"error\":", stdout);
        json_str(stdout, cn_kerr_name(code));
        fputs(",\"error_code\":", stdout);
        printf("%d,\"message\":", code);
        json_bytes(stdout, msg.len > 0 ? msg : CN_BYTES_NULL);
        fputs("}\n", stdout);
    }
    return EXIT_FAIL;
}

/* ---- connections -------------------------------------------------------- */

static int ctx_open(struct ctx *x, const struct opts *o)
{
    x->o = o;
    cn_kclient_init(&x->boot);
    cn_kclient_init(&x->ctl);
    cn_arena_init(&x->arena);
    if (cn_kclient_bootstrap(&x->boot, o->bootstrap, o->timeout_ms)) {
        fprintf(stderr, "cairnctl: %s\n", x->boot.err);
        return EXIT_FAIL;
    }
    return 0;
}

static void ctx_close(struct ctx *x)
{
    cn_kclient_close(&x->boot);
    cn_kclient_close(&x->ctl);
    cn_arena_fini(&x->arena);
}

/* The negotiated version of api on c, or -1 after saying why not. */
static int16_t need_version(struct cn_kclient *c, int16_t api, const char *name)
{
    int16_t v = cn_kclient_version(c, api);

    if (v < 0)
        fprintf(stderr, "cairnctl: broker %s:%d does not support %s\n", c->host,
                c->port, name);
    return v;
}

static int call(struct cn_kclient *c, int16_t api, int16_t v, const void *rq,
                void *rs, struct cn_arena *arena)
{
    int err = cn_kclient_call(c, api, v, rq, rs, arena);

    if (err)
        fprintf(stderr, "cairnctl: %s\n", c->err);
    return err;
}

/* Connection to the controller for admin requests, or NULL after an error. */
static struct cn_kclient *admin_conn(struct ctx *x)
{
    struct cn_kclient *c;

    if (cn_kclient_controller(&x->boot, &x->ctl, &c)) {
        fprintf(stderr, "cairnctl: %s\n", x->boot.err);
        return NULL;
    }
    return c;
}

/* Broker timeout for admin requests: below ours so its answer arrives. */
static int32_t admin_timeout(const struct opts *o)
{
    return o->timeout_ms > 2000 ? o->timeout_ms - 1000 : o->timeout_ms / 2;
}

/* ---- metadata ------------------------------------------------------------ */

/* Metadata for one topic, or all when topic is NULL. */
static int fetch_metadata(struct ctx *x, const char *topic,
                          struct cn_metadata_response *rs)
{
    struct cn_metadata_request rq;
    struct cn_metadata_request_metadata_request_topic t;
    int16_t v = need_version(&x->boot, API_METADATA, "Metadata");

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
    if (call(&x->boot, API_METADATA, v, &rq, rs, &x->arena))
        return EXIT_FAIL;
    return 0;
}

static int cmp_bytes(struct cn_bytes a, struct cn_bytes b)
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

    return cmp_bytes((*ta)->name, (*tb)->name);
}

static int cmp_part(const void *a, const void *b)
{
    const struct cn_metadata_response_metadata_response_partition *pa = a;
    const struct cn_metadata_response_metadata_response_partition *pb = b;

    return (pa->partition_index > pb->partition_index) -
           (pa->partition_index < pb->partition_index);
}

/* Topics without error, sorted by name, in arena; NULL on no memory. */
static struct cn_metadata_response_metadata_response_topic **
sorted_topics(struct ctx *x, const struct cn_metadata_response *rs, int32_t *n)
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

/* ---- topics list -----------------------------------------------------------
 */

static int cmd_topics_list(struct ctx *x)
{
    struct cn_metadata_response rs;
    struct cn_metadata_response_metadata_response_topic **v;
    int32_t n;
    char id[23];

    if (fetch_metadata(x, NULL, &rs))
        return EXIT_FAIL;
    v = sorted_topics(x, &rs, &n);
    if (!v) {
        fprintf(stderr, "cairnctl: out of memory\n");
        return EXIT_FAIL;
    }
    if (x->o->json)
        putchar('[');
    for (int32_t i = 0; i < n; i++) {
        if (!x->o->json) {
            put_bytes(v[i]->name);
            putchar('\n');
            continue;
        }
        uuid_text(&v[i]->topic_id, id);
        printf("%s{\"name\":", i ? "," : "");
        json_bytes(stdout, v[i]->name);
        printf(",\"topic_id\":\"%s\",\"partitions\":%d,\"internal\":%s}", id,
               v[i]->partitions_len > 0 ? v[i]->partitions_len : 0,
               v[i]->is_internal ? "true" : "false");
    }
    if (x->o->json)
        puts("]");
    return 0;
}

/* ---- topics describe
 * --------------------------------------------------------- */

/*
 * DescribeConfigs for n topics; *out is the response (results may be fewer
 * or in another order).  Returns 0, or -1 when the broker lacks the API (the
 * caller then shows no configs), or an exit code.
 */
static int describe_configs(struct ctx *x, const char *const *names, int32_t n,
                            struct cn_describe_configs_response *out,
                            int16_t *vout)
{
    struct cn_describe_configs_request rq;
    int16_t v = cn_kclient_version(&x->boot, API_DESCRIBE_CONFIGS);
    struct cn_describe_configs_request_describe_configs_resource *r;

    *vout = v;
    if (v < 0)
        return -1;
    cn_describe_configs_request_init(&rq);
    r = cn_arena_calloc(&x->arena, (size_t)(n > 0 ? n : 1), sizeof *r);
    if (!r) {
        fprintf(stderr, "cairnctl: out of memory\n");
        return EXIT_FAIL;
    }
    for (int32_t i = 0; i < n; i++) {
        r[i].resource_type = RESOURCE_TOPIC;
        r[i].resource_name = cn_bytes_str(names[i]);
        r[i].configuration_keys = NULL;
        r[i].configuration_keys_len = -1; /* all keys */
    }
    rq.resources = r;
    rq.resources_len = n;
    rq.include_synonyms = false;
    rq.include_documentation = false;
    if (call(&x->boot, API_DESCRIBE_CONFIGS, v, &rq, out, &x->arena))
        return EXIT_FAIL;
    return 0;
}

/* A topic override, as kafka-topics.sh --describe lists them. */
static bool config_is_override(
    const struct cn_describe_configs_response_describe_configs_resource_result
        *e,
    int16_t v)
{
    if (v >= 1)
        return e->config_source == CONFIG_SRC_TOPIC;
    return !e->is_default;
}

static const struct cn_describe_configs_response_describe_configs_result *
find_result(const struct cn_describe_configs_response *rs, struct cn_bytes name)
{
    for (int32_t i = 0; rs && i < rs->results_len; i++)
        if (cn_bytes_eq(rs->results[i].resource_name, name))
            return &rs->results[i];
    return NULL;
}

static void describe_one_text(
    const struct cn_metadata_response_metadata_response_topic *t,
    const struct cn_describe_configs_response_describe_configs_result *cr,
    int16_t cv)
{
    char id[23];
    int rf = t->partitions_len > 0 && t->partitions[0].replica_nodes_len > 0
                 ? t->partitions[0].replica_nodes_len
                 : 0;
    int printed = 0;

    uuid_text(&t->topic_id, id);
    fputs("Topic: ", stdout);
    put_bytes(t->name);
    printf("\tTopicId: %s\tPartitionCount: %d\tReplicationFactor: %d"
           "\tConfigs: ",
           id, t->partitions_len > 0 ? t->partitions_len : 0, rf);
    for (int32_t i = 0; cr && !cr->error_code && i < cr->configs_len; i++) {
        const struct
            cn_describe_configs_response_describe_configs_resource_result *e =
                &cr->configs[i];
        if (!config_is_override(e, cv))
            continue;
        printf("%s", printed++ ? "," : "");
        put_bytes(e->name);
        putchar('=');
        if (e->is_sensitive)
            fputs("(sensitive)", stdout);
        else
            put_bytes(e->value);
    }
    putchar('\n');
    for (int32_t p = 0; p < t->partitions_len; p++) {
        const struct cn_metadata_response_metadata_response_partition *pp =
            &t->partitions[p];
        fputs("\tTopic: ", stdout);
        put_bytes(t->name);
        printf("\tPartition: %d\tLeader: ", pp->partition_index);
        if (pp->leader_id < 0)
            fputs("none", stdout);
        else
            printf("%d", pp->leader_id);
        fputs("\tReplicas: ", stdout);
        text_ints(pp->replica_nodes, pp->replica_nodes_len);
        fputs("\tIsr: ", stdout);
        text_ints(pp->isr_nodes, pp->isr_nodes_len);
        if (pp->offline_replicas_len > 0) {
            fputs("\tOffline: ", stdout);
            text_ints(pp->offline_replicas, pp->offline_replicas_len);
        }
        if (pp->error_code)
            printf("\tError: %s", cn_kerr_name(pp->error_code));
        putchar('\n');
    }
}

static void describe_one_json(
    const struct cn_metadata_response_metadata_response_topic *t,
    const struct cn_describe_configs_response_describe_configs_result *cr,
    int16_t cv)
{
    char id[23];
    int rf = t->partitions_len > 0 && t->partitions[0].replica_nodes_len > 0
                 ? t->partitions[0].replica_nodes_len
                 : 0;
    int printed = 0;

    uuid_text(&t->topic_id, id);
    fputs("{\"name\":", stdout);
    json_bytes(stdout, t->name);
    printf(",\"topic_id\":\"%s\",\"internal\":%s,\"partitions\":%d,"
           "\"replication_factor\":%d,\"configs\":{",
           id, t->is_internal ? "true" : "false",
           t->partitions_len > 0 ? t->partitions_len : 0, rf);
    for (int32_t i = 0; cr && !cr->error_code && i < cr->configs_len; i++) {
        const struct
            cn_describe_configs_response_describe_configs_resource_result *e =
                &cr->configs[i];
        if (!config_is_override(e, cv))
            continue;
        printf("%s", printed++ ? "," : "");
        json_bytes(stdout, e->name);
        putchar(':');
        json_bytes(stdout, e->value);
    }
    fputs("},\"partition_info\":[", stdout);
    for (int32_t p = 0; p < t->partitions_len; p++) {
        const struct cn_metadata_response_metadata_response_partition *pp =
            &t->partitions[p];
        printf("%s{\"partition\":%d,\"leader\":%d,\"leader_epoch\":%d,"
               "\"replicas\":",
               p ? "," : "", pp->partition_index, pp->leader_id,
               pp->leader_epoch);
        json_ints(pp->replica_nodes, pp->replica_nodes_len);
        fputs(",\"isr\":", stdout);
        json_ints(pp->isr_nodes, pp->isr_nodes_len);
        fputs(",\"offline_replicas\":", stdout);
        json_ints(pp->offline_replicas, pp->offline_replicas_len);
        printf(",\"error\":");
        if (pp->error_code)
            json_str(stdout, cn_kerr_name(pp->error_code));
        else
            fputs("null", stdout);
        putchar('}');
    }
    fputs("]}", stdout);
}

static int cmd_topics_describe(struct ctx *x)
{
    struct cn_metadata_response rs;
    struct cn_describe_configs_response crs;
    bool have_configs = false;
    const char **names;
    struct cn_metadata_response_metadata_response_topic **v;
    int32_t n;
    int16_t cv;
    int rc;

    if (fetch_metadata(x, x->o->topic, &rs))
        return EXIT_FAIL;
    if (x->o->topic) {
        if (rs.topics_len < 1)
            return topic_error(x->o, "cannot describe topic", x->o->topic,
                               KAFKA_UNKNOWN_TOPIC_OR_PARTITION, CN_BYTES_NULL);
        if (rs.topics[0].error_code)
            return topic_error(x->o, "cannot describe topic", x->o->topic,
                               rs.topics[0].error_code, CN_BYTES_NULL);
    }
    v = sorted_topics(x, &rs, &n);
    names = cn_arena_calloc(&x->arena, (size_t)(n > 0 ? n : 1), sizeof *names);
    if (!v || !names) {
        fprintf(stderr, "cairnctl: out of memory\n");
        return EXIT_FAIL;
    }
    for (int32_t i = 0; i < n; i++)
        names[i] = cn_arena_strdup(&x->arena, v[i]->name);
    if (n > 0) {
        rc = describe_configs(x, names, n, &crs, &cv);
        if (rc > 0)
            return rc;
        have_configs = rc == 0;
    }
    if (x->o->json)
        putchar('[');
    for (int32_t i = 0; i < n; i++) {
        const struct cn_describe_configs_response_describe_configs_result *cr =
            have_configs ? find_result(&crs, v[i]->name) : NULL;
        if (x->o->json) {
            if (i)
                putchar(',');
            describe_one_json(v[i], cr, cv);
        } else {
            describe_one_text(v[i], cr, cv);
        }
    }
    if (x->o->json)
        puts("]");
    return 0;
}

/* ---- topics create / delete / alter -----------------------------------------
 */

/* Splits "k=v" into views (the option was checked to contain '='). */
static void split_kv(const char *kv, struct cn_bytes *k, struct cn_bytes *v)
{
    const char *eq = strchr(kv, '=');

    *k = cn_bytes_of(kv, (int32_t)(eq - kv));
    *v = cn_bytes_str(eq + 1);
}

static int cmd_topics_create(struct ctx *x)
{
    const struct opts *o = x->o;
    struct cn_create_topics_request rq;
    struct cn_create_topics_request_creatable_topic t;
    struct cn_create_topics_response rs;
    struct cn_kclient *c;
    const struct cn_create_topics_response_creatable_topic_result *r;
    int16_t v;
    char id[23];

    c = admin_conn(x);
    if (!c)
        return EXIT_FAIL;
    v = need_version(c, API_CREATE_TOPICS, "CreateTopics");
    if (v < 0)
        return EXIT_FAIL;
    cn_create_topics_request_init(&rq);
    memset(&t, 0, sizeof t);
    t.name = cn_bytes_str(o->topic);
    /* -1 asks for the broker's defaults (KIP-464, v4+). */
    t.num_partitions =
        o->seen & OPT_PARTITIONS ? o->partitions : (v >= 4 ? -1 : 1);
    t.replication_factor =
        o->seen & OPT_RF ? (int16_t)o->rf : (v >= 4 ? -1 : 1);
    t.assignments = NULL;
    t.assignments_len = 0;
    t.configs =
        cn_arena_calloc(&x->arena, (size_t)o->nconfigs + 1, sizeof *t.configs);
    if (!t.configs) {
        fprintf(stderr, "cairnctl: out of memory\n");
        return EXIT_FAIL;
    }
    for (int i = 0; i < o->nconfigs; i++)
        split_kv(o->configs[i], &t.configs[i].name, &t.configs[i].value);
    t.configs_len = o->nconfigs;
    rq.topics = &t;
    rq.topics_len = 1;
    rq.timeout_ms = admin_timeout(o);
    rq.validate_only = false;
    if (call(c, API_CREATE_TOPICS, v, &rq, &rs, &x->arena))
        return EXIT_FAIL;
    if (rs.topics_len < 1) {
        fprintf(stderr, "cairnctl: CreateTopics response has no result\n");
        return EXIT_FAIL;
    }
    r = &rs.topics[0];
    if (r->error_code)
        return topic_error(o, "cannot create topic", o->topic, r->error_code,
                           r->error_message);
    if (!o->json) {
        printf("Created topic %s.\n", o->topic);
        return 0;
    }
    uuid_text(&r->topic_id, id);
    fputs("{\"topic\":", stdout);
    json_str(stdout, o->topic);
    printf(",\"created\":true,\"topic_id\":\"%s\"", id);
    /* Partition count and factor are only reported from v5. */
    if (v >= 5)
        printf(",\"partitions\":%d,\"replication_factor\":%d",
               r->num_partitions, r->replication_factor);
    puts("}");
    return 0;
}

static int cmd_topics_delete(struct ctx *x)
{
    const struct opts *o = x->o;
    struct cn_delete_topics_request rq;
    struct cn_delete_topics_request_delete_topic_state t;
    struct cn_delete_topics_response rs;
    struct cn_bytes name = cn_bytes_str(o->topic);
    struct cn_kclient *c;
    int16_t v;

    c = admin_conn(x);
    if (!c)
        return EXIT_FAIL;
    v = need_version(c, API_DELETE_TOPICS, "DeleteTopics");
    if (v < 0)
        return EXIT_FAIL;
    cn_delete_topics_request_init(&rq);
    memset(&t, 0, sizeof t);
    t.name = name;
    /* v6 names topics in a struct array (KIP-516), older in a string list. */
    rq.topics = &t;
    rq.topics_len = 1;
    rq.topic_names = &name;
    rq.topic_names_len = 1;
    rq.timeout_ms = admin_timeout(o);
    if (call(c, API_DELETE_TOPICS, v, &rq, &rs, &x->arena))
        return EXIT_FAIL;
    if (rs.responses_len < 1) {
        fprintf(stderr, "cairnctl: DeleteTopics response has no result\n");
        return EXIT_FAIL;
    }
    if (rs.responses[0].error_code)
        return topic_error(o, "cannot delete topic", o->topic,
                           rs.responses[0].error_code,
                           rs.responses[0].error_message);
    if (o->json) {
        fputs("{\"topic\":", stdout);
        json_str(stdout, o->topic);
        puts(",\"deleted\":true}");
    } else {
        printf("Deleted topic %s.\n", o->topic);
    }
    return 0;
}

static int cmd_topics_alter(struct ctx *x)
{
    const struct opts *o = x->o;
    struct cn_create_partitions_request rq;
    struct cn_create_partitions_request_create_partitions_topic t;
    struct cn_create_partitions_response rs;
    struct cn_kclient *c;
    int16_t v;

    c = admin_conn(x);
    if (!c)
        return EXIT_FAIL;
    v = need_version(c, API_CREATE_PARTITIONS, "CreatePartitions");
    if (v < 0)
        return EXIT_FAIL;
    cn_create_partitions_request_init(&rq);
    memset(&t, 0, sizeof t);
    t.name = cn_bytes_str(o->topic);
    t.count = o->partitions;
    t.assignments = NULL;
    t.assignments_len = -1; /* null: the broker places the new partitions */
    rq.topics = &t;
    rq.topics_len = 1;
    rq.timeout_ms = admin_timeout(o);
    rq.validate_only = false;
    if (call(c, API_CREATE_PARTITIONS, v, &rq, &rs, &x->arena))
        return EXIT_FAIL;
    if (rs.results_len < 1) {
        fprintf(stderr, "cairnctl: CreatePartitions response has no result\n");
        return EXIT_FAIL;
    }
    if (rs.results[0].error_code)
        return topic_error(o, "cannot alter topic", o->topic,
                           rs.results[0].error_code,
                           rs.results[0].error_message);
    if (o->json) {
        fputs("{\"topic\":", stdout);
        json_str(stdout, o->topic);
        printf(",\"partitions\":%d}\n", o->partitions);
    } else {
        printf("Altered partition count of topic %s to %d.\n", o->topic,
               o->partitions);
    }
    return 0;
}

/* ---- configs
 * ----------------------------------------------------------------- */

static int cmd_configs_describe(struct ctx *x)
{
    const struct opts *o = x->o;
    struct cn_describe_configs_response rs;
    const char *name = o->topic;
    const struct cn_describe_configs_response_describe_configs_result *r;
    bool all = o->seen & OPT_ALL;
    int printed = 0;
    int16_t v;
    int rc;

    rc = describe_configs(x, &name, 1, &rs, &v);
    if (rc < 0) {
        fprintf(stderr,
                "cairnctl: broker %s:%d does not support "
                "DescribeConfigs\n",
                x->boot.host, x->boot.port);
        return EXIT_FAIL;
    }
    if (rc)
        return rc;
    r = find_result(&rs, cn_bytes_str(name));
    if (!r) {
        fprintf(stderr,
                "cairnctl: DescribeConfigs response has no result "
                "for topic '%s'\n",
                name);
        return EXIT_FAIL;
    }
    if (r->error_code)
        return topic_error(o, "cannot describe configs of topic", name,
                           r->error_code, r->error_message);
    if (o->json) {
        fputs("{\"topic\":", stdout);
        json_str(stdout, name);
        fputs(",\"configs\":[", stdout);
    } else {
        printf("%s configs for topic %s are:\n", all ? "All" : "Dynamic", name);
    }
    for (int32_t i = 0; i < r->configs_len; i++) {
        const struct
            cn_describe_configs_response_describe_configs_resource_result *e =
                &r->configs[i];
        if (!all && !config_is_override(e, v))
            continue;
        if (o->json) {
            printf("%s{\"name\":", printed++ ? "," : "");
            json_bytes(stdout, e->name);
            fputs(",\"value\":", stdout);
            json_bytes(stdout, e->value);
            printf(",\"source\":\"%s\",\"default\":%s,\"read_only\":%s,"
                   "\"sensitive\":%s}",
                   config_source_name(e->config_source),
                   e->is_default ? "true" : "false",
                   e->read_only ? "true" : "false",
                   e->is_sensitive ? "true" : "false");
            continue;
        }
        fputs("  ", stdout);
        put_bytes(e->name);
        putchar('=');
        if (e->is_sensitive)
            fputs("(sensitive)", stdout);
        else
            put_bytes(e->value);
        printf(" sensitive=%s source=%s\n", e->is_sensitive ? "true" : "false",
               config_source_name(e->config_source));
    }
    if (o->json)
        puts("]}");
    return 0;
}

static int cmd_configs_alter(struct ctx *x)
{
    const struct opts *o = x->o;
    struct cn_incremental_alter_configs_request rq;
    struct cn_incremental_alter_configs_request_alter_configs_resource res;
    struct cn_incremental_alter_configs_response rs;
    struct cn_kclient *c;
    struct cn_incremental_alter_configs_request_alterable_config *cf;
    int16_t v;
    int n = 0;

    c = admin_conn(x);
    if (!c)
        return EXIT_FAIL;
    v = need_version(c, API_INCREMENTAL_ALTER_CONFIGS,
                     "IncrementalAlterConfigs");
    if (v < 0)
        return EXIT_FAIL;
    cf = cn_arena_calloc(&x->arena, (size_t)(o->nsets + o->ndeletes),
                         sizeof *cf);
    if (!cf) {
        fprintf(stderr, "cairnctl: out of memory\n");
        return EXIT_FAIL;
    }
    for (int i = 0; i < o->nsets; i++, n++) {
        split_kv(o->sets[i], &cf[n].name, &cf[n].value);
        cf[n].config_operation = OP_SET;
    }
    for (int i = 0; i < o->ndeletes; i++, n++) {
        cf[n].name = cn_bytes_str(o->deletes[i]);
        cf[n].value = CN_BYTES_NULL;
        cf[n].config_operation = OP_DELETE;
    }
    cn_incremental_alter_configs_request_init(&rq);
    memset(&res, 0, sizeof res);
    res.resource_type = RESOURCE_TOPIC;
    res.resource_name = cn_bytes_str(o->topic);
    res.configs = cf;
    res.configs_len = n;
    rq.resources = &res;
    rq.resources_len = 1;
    rq.validate_only = false;
    if (call(c, API_INCREMENTAL_ALTER_CONFIGS, v, &rq, &rs, &x->arena))
        return EXIT_FAIL;
    if (rs.responses_len < 1) {
        fprintf(stderr, "cairnctl: IncrementalAlterConfigs response has no "
                        "result\n");
        return EXIT_FAIL;
    }
    if (rs.responses[0].error_code)
        return topic_error(o, "cannot alter configs of topic", o->topic,
                           rs.responses[0].error_code,
                           rs.responses[0].error_message);
    if (o->json) {
        fputs("{\"topic\":", stdout);
        json_str(stdout, o->topic);
        puts(",\"altered\":true}");
    } else {
        printf("Completed updating config for topic %s.\n", o->topic);
    }
    return 0;
}

/* ---- txn ----------------------------------------------------------------- */

/*
 * A text table: the first row is the header.  Columns are padded to their
 * widest cell and separated by two spaces, so a reader can cut rows at the
 * header's column offsets even when a cell is blank.
 */
#define TABLE_COLS_MAX 16

struct table {
    int ncols;              /* columns per row, <= TABLE_COLS_MAX */
    int nrows;              /* rows filled, header included */
    int cap;                /* rows allocated */
    const char **cells;     /* nrows * ncols cells, row-major */
    struct cn_arena *arena; /* where cells and their text live */
};

static int table_init(struct table *t, struct cn_arena *arena, int ncols,
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
static void table_set(struct table *t, int col, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    t->cells[(t->nrows - 1) * t->ncols + col] =
        cn_arena_strdup(t->arena, cn_bytes_str(buf));
}

static void table_set_bytes(struct table *t, int col, struct cn_bytes b)
{
    t->cells[(t->nrows - 1) * t->ncols + col] = cn_arena_strdup(t->arena, b);
}

/* Starts a new row; false when full (callers size the table up front). */
static bool table_row(struct table *t)
{
    if (t->nrows >= t->cap)
        return false;
    t->nrows++;
    return true;
}

static void table_print(const struct table *t)
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
 * else x->ctl (re)connected.  NULL after printing why not.
 */
static struct cn_kclient *conn_to(struct ctx *x, struct cn_bytes host,
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
    cn_kclient_close(&x->ctl);
    if (cn_kclient_connect(&x->ctl, h, port, x->o->timeout_ms)) {
        fprintf(stderr, "cairnctl: %s\n", x->ctl.err);
        return NULL;
    }
    return &x->ctl;
}

/* Prints a Kafka error about a transactional id; returns the exit code. */
static int txn_error(const struct opts *o, const char *what, const char *id,
                     int16_t code, struct cn_bytes msg)
{
    if (msg.len > 0)
        fprintf(stderr, "cairnctl: %s '%s': %s: %.*s\n", what, id,
                cn_kerr_name(code), (int)msg.len, (const char *)msg.ptr);
    else
        fprintf(stderr, "cairnctl: %s '%s': %s\n", what, id,
                cn_kerr_name(code));
    if (o->json) {
        fputs("{\"transactional_id\":", stdout);
        json_str(stdout, id);
        fputs(",\"error\":", stdout);
        json_str(stdout, cn_kerr_name(code));
        printf(",\"error_code\":%d,\"message\":", code);
        json_bytes(stdout, msg.len > 0 ? msg : CN_BYTES_NULL);
        fputs("}\n", stdout);
    }
    return EXIT_FAIL;
}

/* One ListTransactions result, tagged with the broker that answered. */
struct txn_row {
    int32_t coordinator; /* node id of the answering broker */
    const struct cn_list_transactions_response_transaction_state *s;
};

static int cmp_txn_row(const void *a, const void *b)
{
    const struct txn_row *ra = a, *rb = b;

    return cmp_bytes(ra->s->transactional_id, rb->s->transactional_id);
}

/*
 * Every broker coordinates some transactional ids, so ListTransactions goes
 * to each broker in the cluster (as Kafka's admin client does) and the
 * answers are merged.
 */
static int cmd_txn_list(struct ctx *x)
{
    const struct opts *o = x->o;
    struct cn_metadata_response md;
    struct cn_list_transactions_request rq;
    struct cn_list_transactions_response *rs;
    struct txn_row *rows;
    struct cn_bytes *states;
    int32_t nbrokers, nrows = 0, cap = 0;
    bool warned = false;
    struct table t;

    if (fetch_metadata(x, NULL, &md))
        return EXIT_FAIL;
    nbrokers = md.brokers_len > 0 ? md.brokers_len : 0;
    if (nbrokers == 0) {
        fprintf(stderr, "cairnctl: Metadata lists no brokers\n");
        return EXIT_FAIL;
    }
    rs = cn_arena_calloc(&x->arena, (size_t)nbrokers, sizeof *rs);
    states = cn_arena_calloc(&x->arena, (size_t)o->nstates + 1,
                             sizeof *states);
    if (!rs || !states) {
        fprintf(stderr, "cairnctl: out of memory\n");
        return EXIT_FAIL;
    }
    for (int i = 0; i < o->nstates; i++)
        states[i] = cn_bytes_str(o->states[i]);
    cn_list_transactions_request_init(&rq);
    rq.state_filters = states;
    rq.state_filters_len = o->nstates;
    rq.producer_id_filters = o->pids;
    rq.producer_id_filters_len = o->npids;
    /* -1 means no duration filter (v1); v0 has no such field. */
    rq.duration_filter = o->seen & OPT_DURATION ? o->duration_ms : -1;
    for (int32_t b = 0; b < nbrokers; b++) {
        const struct cn_metadata_response_metadata_response_broker *br =
            &md.brokers[b];
        struct cn_kclient *c = conn_to(x, br->host, br->port);
        int16_t v;

        if (!c)
            return EXIT_FAIL;
        v = need_version(c, API_LIST_TRANSACTIONS, "ListTransactions");
        if (v < 0)
            return EXIT_FAIL;
        if ((o->seen & OPT_DURATION) && v < 1) {
            fprintf(stderr,
                    "cairnctl: broker %s:%d supports only ListTransactions "
                    "v0; --duration-ms needs v1\n",
                    c->host, c->port);
            return EXIT_FAIL;
        }
        if (call(c, API_LIST_TRANSACTIONS, v, &rq, &rs[b], &x->arena))
            return EXIT_FAIL;
        if (rs[b].error_code) {
            fprintf(stderr,
                    "cairnctl: cannot list transactions on broker %d: %s\n",
                    br->node_id, cn_kerr_name(rs[b].error_code));
            return EXIT_FAIL;
        }
        /* Every broker reports the same unknown filters; say it once. */
        for (int32_t i = 0; !warned && i < rs[b].unknown_state_filters_len;
             i++)
            fprintf(stderr, "cairnctl: warning: unknown transaction state "
                            "filter '%.*s'\n",
                    (int)(rs[b].unknown_state_filters[i].len > 0
                              ? rs[b].unknown_state_filters[i].len
                              : 0),
                    (const char *)rs[b].unknown_state_filters[i].ptr);
        if (rs[b].unknown_state_filters_len > 0)
            warned = true;
        if (rs[b].transaction_states_len > 0)
            cap += rs[b].transaction_states_len;
    }
    rows = cn_arena_calloc(&x->arena, (size_t)cap + 1, sizeof *rows);
    if (!rows) {
        fprintf(stderr, "cairnctl: out of memory\n");
        return EXIT_FAIL;
    }
    for (int32_t b = 0; b < nbrokers; b++)
        for (int32_t i = 0; i < rs[b].transaction_states_len; i++) {
            rows[nrows].coordinator = md.brokers[b].node_id;
            rows[nrows++].s = &rs[b].transaction_states[i];
        }
    qsort(rows, (size_t)nrows, sizeof *rows, cmp_txn_row);
    if (o->json) {
        putchar('[');
        for (int32_t i = 0; i < nrows; i++) {
            printf("%s{\"transactional_id\":", i ? "," : "");
            json_bytes(stdout, rows[i].s->transactional_id);
            printf(",\"coordinator_id\":%d,\"producer_id\":%lld,"
                   "\"transaction_state\":",
                   rows[i].coordinator, (long long)rows[i].s->producer_id);
            json_bytes(stdout, rows[i].s->transaction_state);
            putchar('}');
        }
        puts("]");
        return 0;
    }
    if (table_init(&t, &x->arena, 4, nrows))
        return EXIT_FAIL;
    table_row(&t);
    table_set(&t, 0, "TransactionalId");
    table_set(&t, 1, "Coordinator");
    table_set(&t, 2, "ProducerId");
    table_set(&t, 3, "TransactionState");
    for (int32_t i = 0; i < nrows; i++) {
        table_row(&t);
        table_set_bytes(&t, 0, rows[i].s->transactional_id);
        table_set(&t, 1, "%d", rows[i].coordinator);
        table_set(&t, 2, "%lld", (long long)rows[i].s->producer_id);
        table_set_bytes(&t, 3, rows[i].s->transaction_state);
    }
    table_print(&t);
    return 0;
}

/* The transaction coordinator for id: its connection and node id. */
static int find_txn_coordinator(struct ctx *x, const char *id,
                                struct cn_kclient **out, int32_t *node)
{
    struct cn_find_coordinator_request rq;
    struct cn_find_coordinator_response rs;
    struct cn_bytes key = cn_bytes_str(id);
    struct cn_bytes host, msg;
    int32_t port;
    int16_t err;
    int16_t v = need_version(&x->boot, API_FIND_COORDINATOR,
                             "FindCoordinator");

    if (v < 0)
        return EXIT_FAIL;
    cn_find_coordinator_request_init(&rq);
    /* v4+ batches keys (KIP-699); older versions take one key. */
    rq.key = key;
    rq.key_type = COORDINATOR_TRANSACTION;
    rq.coordinator_keys = &key;
    rq.coordinator_keys_len = 1;
    if (call(&x->boot, API_FIND_COORDINATOR, v, &rq, &rs, &x->arena))
        return EXIT_FAIL;
    if (v >= 4) {
        if (rs.coordinators_len < 1) {
            fprintf(stderr, "cairnctl: FindCoordinator response has no "
                            "result\n");
            return EXIT_FAIL;
        }
        err = rs.coordinators[0].error_code;
        msg = rs.coordinators[0].error_message;
        *node = rs.coordinators[0].node_id;
        host = rs.coordinators[0].host;
        port = rs.coordinators[0].port;
    } else {
        err = rs.error_code;
        msg = rs.error_message;
        *node = rs.node_id;
        host = rs.host;
        port = rs.port;
    }
    if (err)
        return txn_error(x->o, "cannot find the coordinator of", id, err, msg);
    *out = conn_to(x, host, port);
    return *out ? 0 : EXIT_FAIL;
}

static void describe_txn_json(
    int32_t node,
    const struct cn_describe_transactions_response_transaction_state *s,
    int64_t now)
{
    bool first = true;

    printf("{\"coordinator_id\":%d,\"transactional_id\":", node);
    json_bytes(stdout, s->transactional_id);
    printf(",\"producer_id\":%lld,\"producer_epoch\":%d,"
           "\"transaction_state\":",
           (long long)s->producer_id, s->producer_epoch);
    json_bytes(stdout, s->transaction_state);
    printf(",\"transaction_timeout_ms\":%d", s->transaction_timeout_ms);
    if (s->transaction_start_time_ms >= 0)
        printf(",\"transaction_start_time_ms\":%lld,"
               "\"transaction_duration_ms\":%lld",
               (long long)s->transaction_start_time_ms,
               (long long)(now - s->transaction_start_time_ms));
    else
        fputs(",\"transaction_start_time_ms\":null,"
              "\"transaction_duration_ms\":null",
              stdout);
    fputs(",\"topic_partitions\":[", stdout);
    for (int32_t i = 0; i < s->topics_len; i++)
        for (int32_t p = 0; p < s->topics[i].partitions_len; p++) {
            fputs(first ? "{\"topic\":" : ",{\"topic\":", stdout);
            json_bytes(stdout, s->topics[i].topic);
            printf(",\"partition\":%d}", s->topics[i].partitions[p]);
            first = false;
        }
    puts("]}");
}

static int cmd_txn_describe(struct ctx *x)
{
    const struct opts *o = x->o;
    struct cn_describe_transactions_request rq;
    struct cn_describe_transactions_response rs;
    const struct cn_describe_transactions_response_transaction_state *s;
    struct cn_bytes id = cn_bytes_str(o->txn_id);
    struct cn_kclient *c = NULL;
    struct table t;
    char tp[1024];
    size_t len = 0;
    int32_t node;
    int64_t now;
    int16_t v;
    int rc;

    rc = find_txn_coordinator(x, o->txn_id, &c, &node);
    if (rc)
        return rc;
    v = need_version(c, API_DESCRIBE_TRANSACTIONS, "DescribeTransactions");
    if (v < 0)
        return EXIT_FAIL;
    cn_describe_transactions_request_init(&rq);
    rq.transactional_ids = &id;
    rq.transactional_ids_len = 1;
    if (call(c, API_DESCRIBE_TRANSACTIONS, v, &rq, &rs, &x->arena))
        return EXIT_FAIL;
    if (rs.transaction_states_len < 1) {
        fprintf(stderr, "cairnctl: DescribeTransactions response has no "
                        "result\n");
        return EXIT_FAIL;
    }
    s = &rs.transaction_states[0];
    if (s->error_code)
        return txn_error(o, "cannot describe transaction", o->txn_id,
                         s->error_code, CN_BYTES_NULL);
    now = cn_clock_wall_ms();
    if (o->json) {
        describe_txn_json(node, s, now);
        return 0;
    }
    tp[0] = '\0';
    for (int32_t i = 0; i < s->topics_len; i++)
        for (int32_t p = 0; p < s->topics[i].partitions_len; p++) {
            int n = snprintf(tp + len, sizeof tp - len, "%s%.*s-%d",
                             len ? "," : "",
                             (int)(s->topics[i].topic.len > 0
                                       ? s->topics[i].topic.len
                                       : 0),
                             (const char *)s->topics[i].topic.ptr,
                             s->topics[i].partitions[p]);
            /* A huge transaction is cut short rather than overflowing. */
            if (n < 0 || (size_t)n >= sizeof tp - len) {
                tp[len] = '\0';
                break;
            }
            len += (size_t)n;
        }
    if (table_init(&t, &x->arena, 9, 1))
        return EXIT_FAIL;
    table_row(&t);
    table_set(&t, 0, "CoordinatorId");
    table_set(&t, 1, "TransactionalId");
    table_set(&t, 2, "ProducerId");
    table_set(&t, 3, "ProducerEpoch");
    table_set(&t, 4, "TransactionState");
    table_set(&t, 5, "TransactionTimeoutMs");
    table_set(&t, 6, "CurrentTransactionStartTimeMs");
    table_set(&t, 7, "TransactionDurationMs");
    table_set(&t, 8, "TopicPartitions");
    table_row(&t);
    table_set(&t, 0, "%d", node);
    table_set_bytes(&t, 1, s->transactional_id);
    table_set(&t, 2, "%lld", (long long)s->producer_id);
    table_set(&t, 3, "%d", s->producer_epoch);
    table_set_bytes(&t, 4, s->transaction_state);
    table_set(&t, 5, "%d", s->transaction_timeout_ms);
    if (s->transaction_start_time_ms >= 0) {
        table_set(&t, 6, "%lld", (long long)s->transaction_start_time_ms);
        table_set(&t, 7, "%lld",
                  (long long)(now - s->transaction_start_time_ms));
    }
    table_set(&t, 8, "%s", tp);
    table_print(&t);
    return 0;
}

/* Producer state lives with the partition's leader, so ask it. */
static int cmd_txn_describe_producers(struct ctx *x)
{
    const struct opts *o = x->o;
    struct cn_metadata_response md;
    struct cn_describe_producers_request rq;
    struct cn_describe_producers_request_topic_request tr;
    struct cn_describe_producers_response rs;
    const struct cn_describe_producers_response_partition_response *pr = NULL;
    const struct cn_metadata_response_metadata_response_topic *mt;
    struct cn_kclient *c = NULL;
    int32_t part = o->partition;
    int32_t leader = -1;
    struct table t;
    int16_t v;

    if (fetch_metadata(x, o->topic, &md))
        return EXIT_FAIL;
    if (md.topics_len < 1)
        return topic_error(o, "cannot describe producers", o->topic,
                           KAFKA_UNKNOWN_TOPIC_OR_PARTITION, CN_BYTES_NULL);
    mt = &md.topics[0];
    if (mt->error_code)
        return topic_error(o, "cannot describe producers", o->topic,
                           mt->error_code, CN_BYTES_NULL);
    for (int32_t i = 0; i < mt->partitions_len; i++)
        if (mt->partitions[i].partition_index == o->partition)
            leader = mt->partitions[i].leader_id;
    if (leader < 0) {
        fprintf(stderr,
                "cairnctl: cannot describe producers: partition %d of "
                "topic '%s' does not exist or has no leader (%s)\n",
                o->partition, o->topic,
                cn_kerr_name(KAFKA_UNKNOWN_TOPIC_OR_PARTITION));
        return EXIT_FAIL;
    }
    for (int32_t i = 0; i < md.brokers_len; i++)
        if (md.brokers[i].node_id == leader)
            c = conn_to(x, md.brokers[i].host, md.brokers[i].port);
    if (!c) {
        fprintf(stderr, "cairnctl: cannot reach leader %d of %s-%d\n", leader,
                o->topic, o->partition);
        return EXIT_FAIL;
    }
    v = need_version(c, API_DESCRIBE_PRODUCERS, "DescribeProducers");
    if (v < 0)
        return EXIT_FAIL;
    cn_describe_producers_request_init(&rq);
    memset(&tr, 0, sizeof tr);
    tr.name = cn_bytes_str(o->topic);
    tr.partition_indexes = &part;
    tr.partition_indexes_len = 1;
    rq.topics = &tr;
    rq.topics_len = 1;
    if (call(c, API_DESCRIBE_PRODUCERS, v, &rq, &rs, &x->arena))
        return EXIT_FAIL;
    for (int32_t i = 0; i < rs.topics_len; i++)
        for (int32_t p = 0; p < rs.topics[i].partitions_len; p++)
            if (rs.topics[i].partitions[p].partition_index == o->partition)
                pr = &rs.topics[i].partitions[p];
    if (!pr) {
        fprintf(stderr, "cairnctl: DescribeProducers response has no "
                        "result\n");
        return EXIT_FAIL;
    }
    if (pr->error_code)
        return topic_error(o, "cannot describe producers of topic", o->topic,
                           pr->error_code, pr->error_message);
    if (o->json) {
        fputs("{\"topic\":", stdout);
        json_str(stdout, o->topic);
        printf(",\"partition\":%d,\"producers\":[", o->partition);
        for (int32_t i = 0; i < pr->active_producers_len; i++) {
            const struct cn_describe_producers_response_producer_state *s =
                &pr->active_producers[i];
            printf("%s{\"producer_id\":%lld,\"producer_epoch\":%d,"
                   "\"latest_coordinator_epoch\":%d,\"last_sequence\":%d,"
                   "\"last_timestamp\":%lld,"
                   "\"current_transaction_start_offset\":%lld}",
                   i ? "," : "", (long long)s->producer_id,
                   s->producer_epoch, s->coordinator_epoch, s->last_sequence,
                   (long long)s->last_timestamp,
                   (long long)s->current_txn_start_offset);
        }
        puts("]}");
        return 0;
    }
    if (table_init(&t, &x->arena, 6,
                   pr->active_producers_len > 0 ? pr->active_producers_len
                                                : 0))
        return EXIT_FAIL;
    table_row(&t);
    table_set(&t, 0, "ProducerId");
    table_set(&t, 1, "ProducerEpoch");
    table_set(&t, 2, "LatestCoordinatorEpoch");
    table_set(&t, 3, "LastSequence");
    table_set(&t, 4, "LastTimestamp");
    table_set(&t, 5, "CurrentTransactionStartOffset");
    for (int32_t i = 0; i < pr->active_producers_len; i++) {
        const struct cn_describe_producers_response_producer_state *s =
            &pr->active_producers[i];
        table_row(&t);
        table_set(&t, 0, "%lld", (long long)s->producer_id);
        table_set(&t, 1, "%d", s->producer_epoch);
        table_set(&t, 2, "%d", s->coordinator_epoch);
        table_set(&t, 3, "%d", s->last_sequence);
        table_set(&t, 4, "%lld", (long long)s->last_timestamp);
        table_set(&t, 5, "%lld", (long long)s->current_txn_start_offset);
    }
    table_print(&t);
    return 0;
}

/* ---- dispatch
 * ---------------------------------------------------------------- */

struct command {
    const char *group;  /* first word */
    const char *action; /* second word */
    unsigned allowed;   /* OPT_* accepted */
    unsigned required;  /* OPT_* that must be given */
    int (*run)(struct ctx *x);
};

static const struct command commands[] = {
    {"topics", "list", 0, 0, cmd_topics_list},
    {"topics", "describe", OPT_TOPIC, 0, cmd_topics_describe},
    {"topics", "create", OPT_TOPIC | OPT_PARTITIONS | OPT_RF | OPT_CONFIG,
     OPT_TOPIC, cmd_topics_create},
    {"topics", "delete", OPT_TOPIC, OPT_TOPIC, cmd_topics_delete},
    {"topics", "alter", OPT_TOPIC | OPT_PARTITIONS, OPT_TOPIC | OPT_PARTITIONS,
     cmd_topics_alter},
    {"configs", "describe", OPT_TOPIC | OPT_ALL, OPT_TOPIC,
     cmd_configs_describe},
    {"configs", "alter", OPT_TOPIC | OPT_SET | OPT_DELETE, OPT_TOPIC,
     cmd_configs_alter},
    {"txn", "list", OPT_STATE | OPT_PRODUCER_ID | OPT_DURATION, 0,
     cmd_txn_list},
    {"txn", "describe", OPT_TXN_ID, OPT_TXN_ID, cmd_txn_describe},
    {"txn", "describe-producers", OPT_TOPIC | OPT_PARTITION,
     OPT_TOPIC | OPT_PARTITION, cmd_txn_describe_producers},
};

static const char *const opt_names[] = {
    "--topic",  "--partitions", "--replication-factor", "--config", "--set",
    "--delete", "--all", "--state", "--producer-id", "--duration-ms",
    "--transactional-id", "--partition",
};

static int run(int argc, char **argv, struct opts *o)
{
    const struct command *cmd = NULL;
    struct ctx x;
    int rc;

    rc = parse_args(argc, argv, o);
    if (rc)
        return rc;
    if (o->help) {
        fputs(usage_text, stdout);
        return 0;
    }
    if (o->nwords == 0)
        return usage_error("no command given");
    if (o->nwords == 1)
        return usage_error("'%s' needs a subcommand", o->words[0]);
    if (o->extra)
        return usage_error("unexpected argument '%s'", o->extra);
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        if (strcmp(commands[i].group, o->words[0]) == 0 &&
            strcmp(commands[i].action, o->words[1]) == 0)
            cmd = &commands[i];
    if (!cmd) {
        fprintf(stderr,
                "cairnctl: unknown command '%s %s'\n"
                "Try 'cairnctl --help'.\n",
                o->words[0], o->words[1]);
        return EXIT_USAGE;
    }
    for (size_t b = 0; b < sizeof opt_names / sizeof *opt_names; b++) {
        unsigned bit = 1u << b;
        if ((o->seen & bit) && !(cmd->allowed & bit)) {
            fprintf(stderr,
                    "cairnctl: option %s is not valid for '%s %s'\n"
                    "Try 'cairnctl --help'.\n",
                    opt_names[b], cmd->group, cmd->action);
            return EXIT_USAGE;
        }
        if ((cmd->required & bit) && !(o->seen & bit)) {
            fprintf(stderr,
                    "cairnctl: '%s %s' needs %s\n"
                    "Try 'cairnctl --help'.\n",
                    cmd->group, cmd->action, opt_names[b]);
            return EXIT_USAGE;
        }
    }
    if (cmd->run == cmd_configs_alter && o->nsets + o->ndeletes == 0)
        return usage_error("'configs alter' needs --set or --delete");

    rc = ctx_open(&x, o);
    if (!rc)
        rc = cmd->run(&x);
    ctx_close(&x);
    if (fflush(stdout) != 0 && !rc) {
        fprintf(stderr, "cairnctl: cannot write output: %s\n", strerror(errno));
        rc = EXIT_FAIL;
    }
    return rc;
}

int main(int argc, char **argv)
{
    struct opts o;
    int rc;

    memset(&o, 0, sizeof o);
    rc = run(argc, argv, &o);
    free(o.configs);
    free(o.sets);
    free(o.deletes);
    free(o.states);
    free(o.pids);
    return rc;
}
