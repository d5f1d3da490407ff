/*
 * cairnctl.c - operator CLI: topics, configs and transactions over the Kafka
 * protocol.
 *
 * Speaks only Kafka's wire protocol (through kclient.h), so it works against
 * any Kafka-compatible broker.  Output imitates kafka-topics.sh,
 * kafka-configs.sh, kafka-consumer-groups.sh and kafka-transactions.sh
 * (KIP-664); --json prints one JSON document on stdout instead.
 * Exit codes: 0 success, 1 the operation failed, 2 bad usage.
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/err.h"
#include "cli/cli.h"
#include "proto/kerr.h"

static const char usage_text[] =
    "Usage: cairnctl [--bootstrap-server HOST:PORT] [--json] [--timeout MS]\n"
    "                [--command-config FILE] <command> [options]\n"
    "\n"
    "Commands:\n"
    "  topics list\n"
    "  topics describe [--topic T] [--metrics-url URL]\n"
    "                  [--under-replicated-partitions]\n"
    "                  [--unavailable-partitions]\n"
    "    compacted topics show the cleaner state per partition, from\n"
    "    Cairn's metrics endpoint (found via the broker's http.listener)\n"
    "  topics create --topic T [--partitions N] [--replication-factor N]\n"
    "                [--config k=v ...]\n"
    "  topics delete --topic T\n"
    "  topics alter --topic T --partitions N\n"
    "  configs describe --topic T [--all]\n"
    "  configs alter --topic T [--set k=v ...] [--delete k ...]\n"
    "  txn list [--state S ...] [--producer-id N ...] [--duration-ms N]\n"
    "  txn describe --transactional-id ID\n"
    "  txn describe-producers --topic T --partition P\n"
    "  verify --duration S [--faults LIST] [--broker-cmd CMD] (see verify "
    "--help)\n"
    "  txn find-hanging [--broker N | --topic T [--partition P]]\n"
    "                   [--max-transaction-timeout MS]\n"
    "  txn abort --topic T --partition P --start-offset N\n"
    "  txn abort --topic T --partition P --producer-id N --producer-epoch E\n"
    "            [--coordinator-epoch C]\n"
    "  lso-gap [--topic T]\n"
    "  groups list\n"
    "  groups describe (--group G ... | --all-groups)\n"
    "  groups reset-offsets --group G (--topic T[:P,P...] | --all-topics)\n"
    "                (--to-earliest | --to-latest | --to-offset N |\n"
    "                 --shift-by N) (--dry-run | --execute)\n"
    "  groups delete --group G\n"
    "  acls list [--resource TYPE[:NAME]] [--pattern-type P] [--principal P]\n"
    "            [--host H] [--operation OP]\n"
    "  acls add --resource TYPE[:NAME] --principal User:U --operation OP\n"
    "           [--pattern-type literal|prefixed] [--host H] [--deny]\n"
    "  acls remove --resource TYPE[:NAME] [--pattern-type P] [--principal P]\n"
    "              [--host H] [--operation OP] [--deny]\n"
    "    TYPE: topic, group, transactional_id, cluster (Kafka's names)\n"
    "  quotas list [--user U] [--client-id C]\n"
    "  quotas set (--user U | --client-id C | both) --set KEY=VALUE ...\n"
    "             [--delete KEY ...]\n"
    "  quotas delete (--user U | --client-id C | both) [--delete KEY ...]\n"
    "    U, C: a name or <default>; KEY: producer_byte_rate,\n"
    "    consumer_byte_rate, request_percentage (Kafka's quota keys)\n"
    "  users list [--user NAME]\n"
    "  users set --user NAME [--password P] [--mechanism M] [--iterations N]\n"
    "    SCRAM credential (M: SCRAM-SHA-512, the default, or SCRAM-SHA-256);\n"
    "    salted here, the password is read from stdin without --password\n"
    "  users delete --user NAME [--mechanism M]\n"
    "  cluster describe\n"
    "    brokers, the controller and the metadata quorum (leader, epoch,\n"
    "    high watermark, each voter's log end offset and lag)\n"
    "\n"
    "Global options (before or after the command):\n"
    "  --bootstrap-server HOST:PORT  broker to talk to (default "
    "127.0.0.1:9092;\n"
    "                                IPv6 as [ADDR]:PORT)\n"
    "  --json                        machine-readable output on stdout\n"
    "  --timeout MS                  network timeout (default 10000)\n"
    "  --command-config FILE         Kafka client properties for secured\n"
    "                                listeners: security.protocol, ssl.*,\n"
    "                                sasl.mechanism, sasl.jaas.config\n"
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
        "--transactional-id",   "--partition", "--broker",
        "--max-transaction-timeout", "--start-offset", "--producer-epoch",
        "--coordinator-epoch", "--group", "--to-offset", "--shift-by",
        "--resource", "--pattern-type", "--principal", "--host",
        "--operation", "--user", "--client-id", "--password",
        "--mechanism", "--iterations", "--command-config",
        "--metrics-url",
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
    o->groups = calloc((size_t)argc + 1, sizeof *o->groups);
    o->partition = -1;
    o->broker = -1;
    o->max_txn_timeout_ms = 900000; /* Kafka's transaction.max.timeout.ms */
    o->start_offset = -1;
    o->producer_epoch = -1;
    o->coordinator_epoch = -1;
    if (!o->configs || !o->sets || !o->deletes || !o->states || !o->pids ||
        !o->groups) {
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
        } else if (strcmp(name, "--command-config") == 0) {
            if (!*val)
                return usage_error("empty --command-config");
            o->command_config = val;
        } else if (strcmp(name, "--timeout") == 0) {
            int32_t t;
            if (!parse_int32(val, 1, &t))
                return usage_error("bad --timeout '%s' (milliseconds)", val);
            o->timeout_ms = t;
        } else if (strcmp(name, "--topic") == 0) {
            if (!*val)
                return usage_error("empty --topic");
            o->topic = val;
            o->ntopics++;
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
        } else if (strcmp(name, "--broker") == 0) {
            if (!parse_int32(val, 0, &o->broker))
                return usage_error("bad --broker '%s' (want a node id >= 0)",
                                   val);
            o->seen |= OPT_BROKER;
        } else if (strcmp(name, "--max-transaction-timeout") == 0) {
            if (!parse_int64(val, 0, &o->max_txn_timeout_ms))
                return usage_error("bad --max-transaction-timeout '%s' (want "
                                   "milliseconds >= 0)",
                                   val);
            o->seen |= OPT_MAX_TXN_TIMEOUT;
        } else if (strcmp(name, "--start-offset") == 0) {
            if (!parse_int64(val, 0, &o->start_offset))
                return usage_error("bad --start-offset '%s' (want a number "
                                   ">= 0)",
                                   val);
            o->seen |= OPT_START_OFFSET;
        } else if (strcmp(name, "--producer-epoch") == 0) {
            if (!parse_int32(val, 0, &o->producer_epoch) ||
                o->producer_epoch > INT16_MAX)
                return usage_error("bad --producer-epoch '%s' (want 0 to "
                                   "32767)",
                                   val);
            o->seen |= OPT_PRODUCER_EPOCH;
        } else if (strcmp(name, "--coordinator-epoch") == 0) {
            if (!parse_int32(val, 0, &o->coordinator_epoch))
                return usage_error("bad --coordinator-epoch '%s' (want a "
                                   "number >= 0)",
                                   val);
            o->seen |= OPT_COORD_EPOCH;
        } else if (strcmp(name, "--group") == 0) {
            if (!*val)
                return usage_error("empty --group");
            o->groups[o->ngroups++] = val;
            o->seen |= OPT_GROUP;
        } else if (strcmp(name, "--user") == 0) {
            if (!*val)
                return usage_error("empty --user");
            o->user = val;
            o->seen |= OPT_USER;
        } else if (strcmp(name, "--client-id") == 0) {
            if (!*val)
                return usage_error("empty --client-id");
            o->client_id = val;
            o->seen |= OPT_CLIENT_ID;
        } else if (strcmp(name, "--all-groups") == 0) {
            o->seen |= OPT_ALL_GROUPS;
        } else if (strcmp(name, "--all-topics") == 0) {
            o->seen |= OPT_ALL_TOPICS;
        } else if (strcmp(name, "--to-earliest") == 0) {
            o->seen |= OPT_TO_EARLIEST;
        } else if (strcmp(name, "--to-latest") == 0) {
            o->seen |= OPT_TO_LATEST;
        } else if (strcmp(name, "--to-offset") == 0) {
            if (!parse_int64(val, 0, &o->to_offset))
                return usage_error("bad --to-offset '%s' (want a number "
                                   ">= 0)",
                                   val);
            o->seen |= OPT_TO_OFFSET;
        } else if (strcmp(name, "--shift-by") == 0) {
            if (!parse_int64(val, INT64_MIN, &o->shift_by))
                return usage_error("bad --shift-by '%s' (want a number, "
                                   "negative to go back)",
                                   val);
            o->seen |= OPT_SHIFT_BY;
        } else if (strcmp(name, "--under-replicated-partitions") == 0) {
            o->seen |= OPT_UNDER_REPLICATED;
        } else if (strcmp(name, "--unavailable-partitions") == 0) {
            o->seen |= OPT_UNAVAILABLE;
        } else if (strcmp(name, "--dry-run") == 0) {
            o->seen |= OPT_DRY_RUN;
        } else if (strcmp(name, "--execute") == 0) {
            o->seen |= OPT_EXECUTE;
        } else if (strcmp(name, "--resource") == 0) {
            o->resource = val;
            o->seen |= OPT_RESOURCE;
        } else if (strcmp(name, "--pattern-type") == 0) {
            o->pattern = val;
            o->seen |= OPT_PATTERN;
        } else if (strcmp(name, "--principal") == 0) {
            o->principal = val;
            o->seen |= OPT_PRINCIPAL;
        } else if (strcmp(name, "--host") == 0) {
            o->host = val;
            o->seen |= OPT_HOST;
        } else if (strcmp(name, "--operation") == 0) {
            o->operation = val;
            o->seen |= OPT_OPERATION;
        } else if (strcmp(name, "--deny") == 0) {
            o->seen |= OPT_DENY;
        } else if (strcmp(name, "--password") == 0) {
            o->password = val;
            o->seen |= OPT_PASSWORD;
        } else if (strcmp(name, "--mechanism") == 0) {
            o->mechanism = val;
            o->seen |= OPT_MECHANISM;
        } else if (strcmp(name, "--iterations") == 0) {
            if (!parse_int32(val, 1, &o->iterations))
                return usage_error("bad --iterations '%s'", val);
            o->seen |= OPT_ITERATIONS;
        } else if (strcmp(name, "--metrics-url") == 0) {
            if (!*val)
                return usage_error("empty --metrics-url");
            o->metrics_url = val;
            o->seen |= OPT_METRICS_URL;
        } else {
            return usage_error("unknown option '%s'", name);
        }
    }
    return 0;
}

/* ---- dispatch
 * ---------------------------------------------------------------- */

struct command {
    const char *group;  /* first word */
    const char *action; /* second word */
    uint64_t allowed;   /* OPT_* accepted */
    uint64_t required;  /* OPT_* that must be given */
    int (*run)(struct ctx *x);
};

static const struct command commands[] = {
    {"topics", "list", 0, 0, cmd_topics_list},
    {"cluster", "describe", 0, 0, cmd_cluster_describe},
    {"topics", "describe",
     OPT_TOPIC | OPT_METRICS_URL | OPT_UNDER_REPLICATED | OPT_UNAVAILABLE, 0,
     cmd_topics_describe},
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
    {"txn", "find-hanging",
     OPT_BROKER | OPT_TOPIC | OPT_PARTITION | OPT_MAX_TXN_TIMEOUT, 0,
     cmd_txn_find_hanging},
    {"txn", "abort",
     OPT_TOPIC | OPT_PARTITION | OPT_START_OFFSET | OPT_PRODUCER_ID |
         OPT_PRODUCER_EPOCH | OPT_COORD_EPOCH,
     OPT_TOPIC | OPT_PARTITION, cmd_txn_abort},
    {"groups", "list", 0, 0, cmd_groups_list},
    {"groups", "describe", OPT_GROUP | OPT_ALL_GROUPS, 0, cmd_groups_describe},
    {"groups", "reset-offsets",
     OPT_GROUP | OPT_TOPIC | OPT_ALL_TOPICS | OPT_TO_EARLIEST | OPT_TO_LATEST |
         OPT_TO_OFFSET | OPT_SHIFT_BY | OPT_DRY_RUN | OPT_EXECUTE,
     OPT_GROUP, cmd_groups_reset_offsets},
    {"groups", "delete", OPT_GROUP, OPT_GROUP, cmd_groups_delete},
    {"acls", "list",
     OPT_RESOURCE | OPT_PATTERN | OPT_PRINCIPAL | OPT_HOST | OPT_OPERATION |
         OPT_DENY,
     0, cmd_acls_list},
    {"acls", "add",
     OPT_RESOURCE | OPT_PATTERN | OPT_PRINCIPAL | OPT_HOST | OPT_OPERATION |
         OPT_DENY,
     OPT_RESOURCE | OPT_PRINCIPAL | OPT_OPERATION, cmd_acls_add},
    {"acls", "remove",
     OPT_RESOURCE | OPT_PATTERN | OPT_PRINCIPAL | OPT_HOST | OPT_OPERATION |
         OPT_DENY,
     OPT_RESOURCE, cmd_acls_remove},
    {"quotas", "list", OPT_USER | OPT_CLIENT_ID, 0, cmd_quotas_list},
    {"quotas", "set", OPT_USER | OPT_CLIENT_ID | OPT_SET | OPT_DELETE, 0,
     cmd_quotas_set},
    {"quotas", "delete", OPT_USER | OPT_CLIENT_ID | OPT_DELETE, 0,
     cmd_quotas_delete},
    {"users", "list", OPT_USER, 0, cmd_users_list},
    {"users", "set", OPT_USER | OPT_PASSWORD | OPT_MECHANISM | OPT_ITERATIONS,
     OPT_USER, cmd_users_set},
    {"users", "delete", OPT_USER | OPT_MECHANISM, OPT_USER, cmd_users_delete},
    /* One word: the action is NULL. */
    {"lso-gap", NULL, OPT_TOPIC, 0, cmd_lso_gap},
};

static const char *const opt_names[] = {
    "--topic",
    "--partitions",
    "--replication-factor",
    "--config",
    "--set",
    "--delete",
    "--all",
    "--state",
    "--producer-id",
    "--duration-ms",
    "--transactional-id",
    "--partition",
    "--broker",
    "--max-transaction-timeout",
    "--start-offset",
    "--producer-epoch",
    "--coordinator-epoch",
    "--group",
    "--all-groups",
    "--all-topics",
    "--to-earliest",
    "--to-latest",
    "--to-offset",
    "--shift-by",
    "--dry-run",
    "--execute",
    "--resource",
    "--pattern-type",
    "--principal",
    "--host",
    "--operation",
    "--deny",
    "--user",
    "--client-id",
    "--password",
    "--mechanism",
    "--iterations",
    "--metrics-url",
    "--under-replicated-partitions",
    "--unavailable-partitions",
};

/* How many of the OPT_* bits in mask were given. */
static int count_opts(const struct opts *o, uint64_t mask)
{
    return __builtin_popcountll(o->seen & mask);
}

/* "T" or "T:P,P,...": a topic name and, after the colon, partitions. */
static bool topic_parts_ok(const char *s)
{
    const char *colon = strchr(s, ':');
    int32_t p;

    if (colon == s)
        return false;
    if (!colon)
        return true;
    for (const char *q = colon + 1;; q = strchr(q, ',') + 1) {
        char num[16];
        size_t n = strcspn(q, ",");
        if (n == 0 || n >= sizeof num)
            return false;
        memcpy(num, q, n);
        num[n] = '\0';
        if (!parse_int32(num, 0, &p))
            return false;
        if (!q[n])
            return true;
    }
}

/* The choices the groups commands need that the option table cannot say:
 * exactly one of each set. */
static int check_groups_args(int (*run)(struct ctx *), const struct opts *o)
{
    if (run == cmd_groups_describe &&
        (o->ngroups > 0) == !!(o->seen & OPT_ALL_GROUPS))
        return usage_error("'groups describe' needs --group G (one or "
                           "more) or --all-groups");
    if (run == cmd_groups_delete && o->ngroups != 1)
        return usage_error("'groups delete' takes one --group");
    if (run != cmd_groups_reset_offsets)
        return 0;
    if (o->ngroups != 1)
        return usage_error("'groups reset-offsets' takes one --group");
    if (count_opts(o, OPT_TOPIC | OPT_ALL_TOPICS) != 1)
        return usage_error("'groups reset-offsets' needs --topic T[:P,...] "
                           "or --all-topics");
    if (o->ntopics > 1)
        return usage_error("'groups reset-offsets' takes one --topic "
                           "(list partitions as T:P,P,...)");
    if ((o->seen & OPT_TOPIC) && !topic_parts_ok(o->topic))
        return usage_error("bad --topic '%s' (want TOPIC or "
                           "TOPIC:PARTITION,PARTITION,...)",
                           o->topic);
    if (count_opts(o, OPT_TO_EARLIEST | OPT_TO_LATEST | OPT_TO_OFFSET |
                          OPT_SHIFT_BY) != 1)
        return usage_error("'groups reset-offsets' needs one of "
                           "--to-earliest, --to-latest, --to-offset N, "
                           "--shift-by N");
    if (count_opts(o, OPT_DRY_RUN | OPT_EXECUTE) != 1)
        return usage_error("'groups reset-offsets' needs --dry-run or "
                           "--execute");
    return 0;
}

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
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        if (strcmp(commands[i].group, o->words[0]) == 0 &&
            !commands[i].action) {
            if (o->nwords > 1)
                return usage_error("unexpected argument '%s'", o->words[1]);
            cmd = &commands[i];
        }
    if (!cmd && o->nwords == 1)
        return usage_error("'%s' needs a subcommand", o->words[0]);
    if (o->extra)
        return usage_error("unexpected argument '%s'", o->extra);
    for (size_t i = 0; !cmd && i < sizeof commands / sizeof *commands; i++)
        if (commands[i].action &&
            strcmp(commands[i].group, o->words[0]) == 0 &&
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
        uint64_t bit = UINT64_C(1) << b;
        if ((o->seen & bit) && !(cmd->allowed & bit)) {
            fprintf(stderr,
                    "cairnctl: option %s is not valid for '%s %s'\n"
                    "Try 'cairnctl --help'.\n",
                    opt_names[b], cmd->group,
                    cmd->action ? cmd->action : "");
            return EXIT_USAGE;
        }
        if ((cmd->required & bit) && !(o->seen & bit)) {
            fprintf(stderr,
                    "cairnctl: '%s %s' needs %s\n"
                    "Try 'cairnctl --help'.\n",
                    cmd->group, cmd->action ? cmd->action : "",
                    opt_names[b]);
            return EXIT_USAGE;
        }
    }
    if ((cmd->run == cmd_quotas_set || cmd->run == cmd_quotas_delete) &&
        !count_opts(o, OPT_USER | OPT_CLIENT_ID))
        return usage_error("'quotas %s' needs --user and/or --client-id",
                           cmd->action);
    if (cmd->run == cmd_quotas_set && o->nsets + o->ndeletes == 0)
        return usage_error("'quotas set' needs --set KEY=VALUE or "
                           "--delete KEY");
    if (cmd->run == cmd_configs_alter && o->nsets + o->ndeletes == 0)
        return usage_error("'configs alter' needs --set or --delete");
    if (cmd->run == cmd_txn_find_hanging && (o->seen & OPT_BROKER) &&
        (o->seen & OPT_TOPIC))
        return usage_error("'txn find-hanging' takes --broker or --topic, "
                           "not both");
    if (cmd->run == cmd_txn_find_hanging && (o->seen & OPT_PARTITION) &&
        !(o->seen & OPT_TOPIC))
        return usage_error("'txn find-hanging --partition' needs --topic");
    if (cmd->run == cmd_txn_abort) {
        bool by_offset = o->seen & OPT_START_OFFSET;
        bool by_pid = o->seen & OPT_PRODUCER_ID;
        if (by_offset == by_pid)
            return usage_error("'txn abort' needs either --start-offset or "
                               "--producer-id with --producer-epoch");
        if (by_offset && (o->seen & (OPT_PRODUCER_EPOCH | OPT_COORD_EPOCH)))
            return usage_error("'txn abort --start-offset' takes the "
                               "producer and its epochs from the partition");
        if (by_pid && (o->npids != 1 || !(o->seen & OPT_PRODUCER_EPOCH)))
            return usage_error("'txn abort --producer-id' needs exactly one "
                               "--producer-id and --producer-epoch");
    }

    rc = check_groups_args(cmd->run, o);
    if (rc)
        return rc;

    rc = cli_ctx_open(&x, o);
    if (!rc)
        rc = cmd->run(&x);
    cli_ctx_close(&x);
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

    /* OpenSSL writes to the socket without MSG_NOSIGNAL: a broker that
     * hangs up mid-request must give EPIPE, not kill us. */
    signal(SIGPIPE, SIG_IGN);
    /* verify parses its own options (and its workers are a hidden
     * command); the global ones may come before it. */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "verify"))
            return cmd_verify(argc, argv);
        if (!strcmp(argv[i], "verify-worker"))
            return cmd_verify_worker(argc, argv);
        if (!strcmp(argv[i], "--bootstrap-server") ||
            !strcmp(argv[i], "--timeout") ||
            !strcmp(argv[i], "--command-config"))
            i++;
        else if (argv[i][0] != '-')
            break;
    }
    memset(&o, 0, sizeof o);
    rc = run(argc, argv, &o);
    free(o.configs);
    free(o.sets);
    free(o.deletes);
    free(o.states);
    free(o.pids);
    free(o.groups);
    return rc;
}
