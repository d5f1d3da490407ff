/*
 * cli.h - what cairnctl's files share: the parsed command line, a
 * command's connections, output and table helpers, and the commands
 * (cli_util.c, cmd_topics.c, cmd_txn.c, cmd_groups.c; main and dispatch in
 * cairnctl.c).
 * Each command returns 0, EXIT_FAIL or EXIT_USAGE.
 */
#ifndef CN_CLI_CLI_H
#define CN_CLI_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "base/arena.h"
#include "base/bytes.h"
#include "cli/client_props.h"
#include "cli/kclient.h"
#include "proto/gen/msgs.h"


#define COORDINATOR_TRANSACTION 1 /* FindCoordinator key type */

#define RESOURCE_TOPIC 2
#define CONFIG_SRC_TOPIC 1
#define OP_SET 0
#define OP_DELETE 1

#define EXIT_FAIL 1
#define EXIT_USAGE 2

/* Options; each bit says it was given, so commands can reject strays.
 * The bit numbers follow opt_names[] in cairnctl.c. */
#define OPT_TOPIC            (UINT64_C(1) << 0)
#define OPT_PARTITIONS       (UINT64_C(1) << 1)
#define OPT_RF               (UINT64_C(1) << 2)
#define OPT_CONFIG           (UINT64_C(1) << 3)
#define OPT_SET              (UINT64_C(1) << 4)
#define OPT_DELETE           (UINT64_C(1) << 5)
#define OPT_ALL              (UINT64_C(1) << 6)
#define OPT_STATE            (UINT64_C(1) << 7)
#define OPT_PRODUCER_ID      (UINT64_C(1) << 8)
#define OPT_DURATION         (UINT64_C(1) << 9)
#define OPT_TXN_ID           (UINT64_C(1) << 10)
#define OPT_PARTITION        (UINT64_C(1) << 11)
#define OPT_BROKER           (UINT64_C(1) << 12)
#define OPT_MAX_TXN_TIMEOUT  (UINT64_C(1) << 13)
#define OPT_START_OFFSET     (UINT64_C(1) << 14)
#define OPT_PRODUCER_EPOCH   (UINT64_C(1) << 15)
#define OPT_COORD_EPOCH      (UINT64_C(1) << 16)
#define OPT_GROUP            (UINT64_C(1) << 17)
#define OPT_ALL_GROUPS       (UINT64_C(1) << 18)
#define OPT_ALL_TOPICS       (UINT64_C(1) << 19)
#define OPT_TO_EARLIEST      (UINT64_C(1) << 20)
#define OPT_TO_LATEST        (UINT64_C(1) << 21)
#define OPT_TO_OFFSET        (UINT64_C(1) << 22)
#define OPT_SHIFT_BY         (UINT64_C(1) << 23)
#define OPT_DRY_RUN          (UINT64_C(1) << 24)
#define OPT_EXECUTE          (UINT64_C(1) << 25)
#define OPT_RESOURCE         (UINT64_C(1) << 26)
#define OPT_PATTERN          (UINT64_C(1) << 27)
#define OPT_PRINCIPAL        (UINT64_C(1) << 28)
#define OPT_HOST             (UINT64_C(1) << 29)
#define OPT_OPERATION        (UINT64_C(1) << 30)
#define OPT_DENY             (UINT64_C(1) << 31)
#define OPT_USER             (UINT64_C(1) << 32)
#define OPT_CLIENT_ID        (UINT64_C(1) << 33)
#define OPT_PASSWORD         (UINT64_C(1) << 34)
#define OPT_MECHANISM        (UINT64_C(1) << 35)
#define OPT_ITERATIONS       (UINT64_C(1) << 36)
#define OPT_METRICS_URL      (UINT64_C(1) << 37)
#define OPT_UNDER_REPLICATED (UINT64_C(1) << 38)
#define OPT_UNAVAILABLE (UINT64_C(1) << 39)

struct opts {
    const char *bootstrap; /* HOST:PORT */
    const char *command_config; /* --command-config FILE, NULL none */
    int timeout_ms;        /* per socket step and per admin request */
    bool json;             /* machine output */
    bool help;             /* --help given */
    uint64_t seen;         /* OPT_* bits given */
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
    int32_t broker;        /* --broker: node id */
    int64_t max_txn_timeout_ms; /* --max-transaction-timeout (ms) */
    int64_t start_offset;  /* --start-offset */
    int32_t producer_epoch;     /* --producer-epoch */
    int32_t coordinator_epoch;  /* --coordinator-epoch */
    const char **groups;   /* --group G, argc slots */
    int ngroups;           /* entries in groups */
    int64_t to_offset;     /* --to-offset N */
    int64_t shift_by;      /* --shift-by N, may be negative */
    int ntopics;           /* times --topic was given */
    const char *resource;  /* --resource TYPE[:NAME] (acls) */
    const char *pattern;   /* --pattern-type literal|prefixed|match|any */
    const char *principal; /* --principal User:NAME */
    const char *host;      /* --host IP or * */
    const char *operation; /* --operation READ|WRITE|... */
    const char *user;      /* --user NAME (users; quotas: or <default>) */
    const char *client_id; /* --client-id ID|<default> (quotas) */
    const char *password;  /* --password P (else stdin) */
    const char *mechanism; /* --mechanism SCRAM-SHA-256|SCRAM-SHA-512 */
    int32_t iterations;    /* --iterations N, 0: 4096 */
    const char *metrics_url; /* --metrics-url URL (topics describe) */
};

/* One command's connections and the arena its responses live in. */
struct ctx {
    const struct opts *o;   /* parsed command line */
    struct cn_kclient boot; /* bootstrap broker */
    struct cn_kclient ctl;  /* controller, when it is another broker */
    struct cn_arena arena;  /* response frames and decoded replies */
    struct cli_props *props; /* --command-config, NULL without */
};

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

/* One partition to look at, with its leader. */
struct tp {
    struct cn_bytes topic;
    int32_t partition;
    int32_t leader;     /* node id, -1 none */
};

/* ---- cli_util.c ---- */
void cli_put_bytes(struct cn_bytes b);
void cli_json_bytes(FILE *f, struct cn_bytes b);
void cli_json_str(FILE *f, const char *s);
void cli_uuid_text(const struct cn_uuid *u, char out[23]);
void cli_json_ints(const int32_t *v, int32_t n);
void cli_text_ints(const int32_t *v, int32_t n);
const char *cli_config_source_name(int8_t s);
int cli_topic_error(const struct opts *o, const char *what,
                       const char *topic, int16_t code, struct cn_bytes msg);
int cli_ctx_open(struct ctx *x, const struct opts *o);
void cli_ctx_close(struct ctx *x);
int16_t cli_need_version(struct cn_kclient *c, int16_t api, const char *name);
int cli_call(struct cn_kclient *c, int16_t api, int16_t v, const void *rq,
                void *rs, struct cn_arena *arena);
struct cn_kclient *cli_admin_conn(struct ctx *x);
int32_t cli_admin_timeout(const struct opts *o);
int cli_fetch_metadata(struct ctx *x, const char *topic,
                          struct cn_metadata_response *rs);
int cli_cmp_bytes(struct cn_bytes a, struct cn_bytes b);
struct cn_metadata_response_metadata_response_topic **
cli_sorted_topics(struct ctx *x, const struct cn_metadata_response *rs, int32_t *n);
int cli_table_init(struct table *t, struct cn_arena *arena, int ncols,
                      int cap);
void cli_table_set(struct table *t, int col, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void cli_table_set_bytes(struct table *t, int col, struct cn_bytes b);
bool cli_table_row(struct table *t);
void cli_table_header(struct table *t, const char *const *names);
void cli_table_print(const struct table *t);
struct cn_kclient *cli_conn_to(struct ctx *x, struct cn_bytes host,
                                  int32_t port);
struct cn_kclient *cli_node_conn(struct ctx *x,
                                 const struct cn_metadata_response *md,
                                 int32_t node);
int cli_list_offset(struct cn_kclient *c, struct ctx *x, const struct tp *tp,
                    int8_t isolation, int64_t timestamp, int64_t *out);
int cli_find_coordinator(struct ctx *x, int8_t key_type, const char *id,
                         struct cn_kclient **out, int32_t *node,
                         int16_t *code, struct cn_bytes *msg);

/* ---- cleaner_view.c: the cleaner state from Cairn's /metrics ---- */
struct cli_cleaner_view {
    char *body;      /* /metrics text, NULL when it could not be read */
    size_t len;
    char url[800];   /* where it was read from, "" when none was found */
    char note[1024]; /* why it was not read, "" when it was */
};
/* Reads the metrics of broker node (--metrics-url, else its
 * http.listener); failures only fill cv->note. */
void cli_cleaner_view_load(struct ctx *x, const struct cn_metadata_response *md,
                           int32_t node, struct cli_cleaner_view *cv);
void cli_cleaner_view_fini(struct cli_cleaner_view *cv);
struct cli_cleaner_part {
    bool have;                  /* the cleaner reports the partition */
    double dirty_ratio;
    int64_t checkpoint;         /* first dirty offset, -1 unknown */
    int64_t since_last_pass_ms; /* -1: no pass since the broker started */
    char error[256];            /* the last pass's error, "" none */
};
void cli_cleaner_part_get(const struct cli_cleaner_view *cv,
                          struct cn_bytes topic, int32_t partition,
                          struct cli_cleaner_part *out);

/* ---- commands (cmd_topics.c, cmd_txn.c, cmd_groups.c) ---- */
int cmd_quotas_list(struct ctx *x);
int cmd_quotas_set(struct ctx *x);
int cmd_quotas_delete(struct ctx *x);
int cmd_groups_list(struct ctx *x);
int cmd_groups_describe(struct ctx *x);
int cmd_groups_reset_offsets(struct ctx *x);
int cmd_groups_delete(struct ctx *x);
int cmd_topics_list(struct ctx *x);
/* cmd_cluster.c */
int cmd_cluster_describe(struct ctx *x);
int cmd_topics_describe(struct ctx *x);
int cmd_topics_create(struct ctx *x);
int cmd_topics_delete(struct ctx *x);
int cmd_topics_alter(struct ctx *x);
int cmd_configs_describe(struct ctx *x);
int cmd_configs_alter(struct ctx *x);
int cmd_txn_list(struct ctx *x);
int cmd_txn_describe(struct ctx *x);
int cmd_txn_describe_producers(struct ctx *x);

/* ---- cmd_verify.c, verify_worker.c: own argument parsing ---- */
int cmd_verify(int argc, char **argv);
int cmd_verify_worker(int argc, char **argv);
/* Applies --command-config FILE (NULL: nothing) to a librdkafka
 * configuration; 0, or -1 after printing why. */
struct rd_kafka_conf_s;
int cli_verify_apply_sec(struct rd_kafka_conf_s *c, const char *path);
int cmd_txn_find_hanging(struct ctx *x);
int cmd_txn_abort(struct ctx *x);
int cmd_lso_gap(struct ctx *x);
/* cmd_acls.c */
int cmd_users_list(struct ctx *x);
int cmd_users_set(struct ctx *x);
int cmd_users_delete(struct ctx *x);
int cmd_acls_list(struct ctx *x);
int cmd_acls_add(struct ctx *x);
int cmd_acls_remove(struct ctx *x);

#endif
