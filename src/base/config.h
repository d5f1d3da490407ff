/*
 * config.h - broker settings and per-topic settings.
 *
 * The broker reads a Kafka-style .properties file (`cairn -c FILE`) and then
 * applies `--set key=value` overrides in order.  Key names and defaults are
 * Kafka's wherever Kafka has the key; Cairn's own keys start with "cairn.".
 * Every key is described by a row in a static table (config_keys.c) that
 * drives parsing, validation, DescribeConfigs and `cairn --help-config`.
 *
 * Topic settings use Kafka's topic key names (retention.ms, ...).  A topic's
 * default for each key comes from its broker synonym (log.retention.ms, ...);
 * explicit per-topic overrides are persisted by the broker as a small
 * properties text (cn_topic_config_serialize / _parse).
 *
 * Errors: every function that can fail returns 0 or CN_EINVAL (CN_ENOMEM
 * where noted) and writes one line to the caller's `err` buffer naming the
 * key, the value and the reason, prefixed with "FILE:LINE: " for a file and
 * "--set: " for an override.  `err` may be NULL when err_len is 0.
 *
 * Runs on: the loop thread at start-up and in config-changing handlers; the
 * structures are not locked.
 */
#ifndef CN_BASE_CONFIG_H
#define CN_BASE_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Value types of the key table. */
enum cn_config_type {
    CN_CFG_BOOL,      /* "true" / "false" (any case), stored as bool */
    CN_CFG_INT16,     /* stored as int32_t; Kafka type SHORT */
    CN_CFG_INT32,     /* int32_t */
    CN_CFG_INT64,     /* int64_t */
    CN_CFG_DOUBLE,    /* double */
    CN_CFG_STRING,    /* const char * into cfg-owned text */
    CN_CFG_LIST,      /* comma list, stored as const char * (normalized) */
    CN_CFG_ENUM,      /* one of `enums`, stored as int (index) */
    CN_CFG_ENUM_LIST, /* comma list of `enums`, stored as unsigned bitmask */
    CN_CFG_LISTENERS, /* comma list of listeners, stored as const char * */
};

/* DescribeConfigs ConfigSource (DescribeConfigsResponse.json v1+). */
enum cn_config_source {
    CN_CFG_SRC_UNKNOWN = 0,
    CN_CFG_SRC_TOPIC = 1, /* DYNAMIC_TOPIC_CONFIG: a topic override */
    CN_CFG_SRC_DYNAMIC_BROKER = 2,
    CN_CFG_SRC_DYNAMIC_DEFAULT_BROKER = 3,
    CN_CFG_SRC_STATIC_BROKER = 4, /* set in the file or by --set */
    CN_CFG_SRC_DEFAULT = 5,       /* built-in default */
    CN_CFG_SRC_DYNAMIC_BROKER_LOGGER = 6,
};

/* DescribeConfigs ConfigType (v3+). */
enum cn_config_kafka_type {
    CN_KTYPE_UNKNOWN = 0,
    CN_KTYPE_BOOLEAN = 1,
    CN_KTYPE_STRING = 2,
    CN_KTYPE_INT = 3,
    CN_KTYPE_SHORT = 4,
    CN_KTYPE_LONG = 5,
    CN_KTYPE_DOUBLE = 6,
    CN_KTYPE_LIST = 7,
    CN_KTYPE_CLASS = 8,
    CN_KTYPE_PASSWORD = 9,
};

/* Bits of log.cleanup.policy / cleanup.policy. */
#define CN_CLEANUP_DELETE 1u
#define CN_CLEANUP_COMPACT 2u

/* log.message.timestamp.type / message.timestamp.type. */
enum cn_ts_type { CN_TS_CREATE_TIME = 0, CN_TS_LOG_APPEND_TIME = 1 };

/* compression.type (topic and broker). */
enum cn_compression_cfg {
    CN_COMPRESSION_PRODUCER = 0, /* keep what the producer sent */
    CN_COMPRESSION_GZIP,
    CN_COMPRESSION_SNAPPY,
    CN_COMPRESSION_LZ4,
    CN_COMPRESSION_ZSTD,
    CN_COMPRESSION_UNCOMPRESSED,
};

/* cairn.log.level; same order as enum cn_say_level in say.h. */
enum cn_cfg_log_level {
    CN_CFG_LOG_ERROR,
    CN_CFG_LOG_WARN,
    CN_CFG_LOG_INFO,
    CN_CFG_LOG_DEBUG
};

#define CN_CONFIG_HOST_MAX 256  /* bytes for a host name, with NUL */
#define CN_CONFIG_PATH_MAX 1024 /* bytes for the data directory, with NUL */
/* Smallest socket.request.max.bytes: room for any client's ApiVersions,
 * Metadata, FindCoordinator and a produce of a small batch; bytes. */
#define CN_CONFIG_MIN_REQUEST_BYTES 1024

/* One row of a key table.  Tables are static and never change. */
struct cn_config_key {
    const char *name;            /* Kafka key name */
    enum cn_config_type type;
    const char *def;             /* default as text; NULL: no value (null) */
    int64_t min, max;            /* inclusive range for numbers; for
                                    LISTENERS min 0 allows "" */
    const char *const *enums;    /* NULL-terminated; ENUM and ENUM_LIST */
    const char *doc;             /* one line for --help-config */
    bool read_only;              /* DescribeConfigs read_only */
    bool sensitive;              /* DescribeConfigs is_sensitive */
    size_t off;                  /* offset of the typed field (struct
                                    cn_config or cn_topic_config), or
                                    SIZE_MAX when there is none */
    const char *const *synonyms; /* topic keys: NULL-terminated broker keys
                                    it defaults from, strongest first */
    size_t syn_off;              /* topic keys: offset of the broker's
                                    effective field in struct cn_config */
    const char *range_why;       /* why min/max are what they are, added
                                    to an out-of-range message; or NULL */
    bool or_minus_one;           /* -1 is valid too, outside [min, max]
                                    (Kafka's "[1,...,9] or -1") */
};

/*
 * The broker's settings.  Typed fields are the effective values (aliases and
 * precedence already applied); strings point into text owned by the struct
 * and stay valid until that key is set again or cn_config_fini().
 */
/* Kafka's security protocols (SecurityProtocol ids). */
enum cn_sec_proto {
    CN_SEC_PLAINTEXT = 0,
    CN_SEC_SSL = 1,
    CN_SEC_SASL_PLAINTEXT = 2,
    CN_SEC_SASL_SSL = 3,
};

#define CN_LISTENERS_MAX 8
#define CN_LISTENER_NAME_MAX 64

/* One entry of `listeners`, with its protocol (through
 * listener.security.protocol.map) and its advertised address. */
struct cn_listener {
    char name[CN_LISTENER_NAME_MAX]; /* upper case, as Kafka normalises */
    char host[CN_CONFIG_HOST_MAX];   /* "" = all interfaces */
    int port;                        /* 0 picks a free port */
    int proto;                       /* enum cn_sec_proto */
    char adv_host[CN_CONFIG_HOST_MAX]; /* "" = host, or 127.0.0.1 */
    int adv_port;                    /* 0 = the port bound */
};

/* A listener-prefixed ssl.* key, Kafka's listener.name.<name>.<key>: the
 * value wins over the plain key for that listener.  Held inline so the
 * struct copies by value. */
#define CN_LISTENER_KEYS_MAX 16
struct cn_listener_key {
    char listener[CN_LISTENER_NAME_MAX]; /* upper case */
    int key;                             /* index in the broker key table */
    char value[CN_CONFIG_PATH_MAX];
};

/* One entry of controller.quorum.voters, "id@host:port". */
#define CN_VOTERS_MAX 16
struct cn_cfg_voter {
    int32_t id;
    char host[CN_CONFIG_HOST_MAX];
    int port;
};

struct cn_config {
    /* Listeners.  Every entry of `listeners` is bound except those named
     * in controller.listener.names, which are bound only on a node whose
     * process.roles has controller (cluster mode).
     * listen_host/port are the first PLAINTEXT one, else the first. */
    const char *listeners;          /* text as configured */
    char listen_host[CN_CONFIG_HOST_MAX]; /* "" = all interfaces */
    int listen_port;
    struct cn_listener listener[CN_LISTENERS_MAX]; /* to bind, in order */
    int nlisteners;                 /* 0 while the keys disagree (see
                                       cn_config_check) */
    struct cn_listener_key lkeys[CN_LISTENER_KEYS_MAX];
    int nlkeys;
    const char *advertised_listeners; /* effective (defaults to listeners) */
    char advertised_host[CN_CONFIG_HOST_MAX];
    int advertised_port;
    const char *http_listener;      /* "" = metrics endpoint disabled */
    char http_host[CN_CONFIG_HOST_MAX];
    int http_port;                  /* 0 when disabled */

    const char *log_dirs;           /* effective: log.dirs, else log.dir */
    char data_dir[CN_CONFIG_PATH_MAX]; /* first entry of log_dirs */
    int32_t node_id;                /* node.id (broker.id alias) */

    /* Cluster mode (process.roles set); single node when false. */
    bool cluster_mode;
    bool controller_role; /* process.roles has controller */
    struct cn_cfg_voter voters[CN_VOTERS_MAX]; /* controller.quorum.voters */
    int nvoters;
    int controller_listener; /* index in listener[] of this node's
                                       CONTROLLER listener, -1 none */
    int64_t broker_heartbeat_interval_ms;
    int64_t broker_session_timeout_ms;
    int64_t controller_quorum_election_timeout_ms;
    char metadata_log_dir[CN_CONFIG_PATH_MAX]; /* effective: the key, else
                                       <first log dir>/__cluster_metadata-0 */

    /* Topics and log defaults. */
    int32_t num_partitions;
    int32_t default_replication_factor;
    bool auto_create_topics_enable;
    bool delete_topic_enable;
    int32_t log_segment_bytes;      /* bytes */
    int64_t log_roll_ms;            /* effective: ms, else hours; ms */
    int64_t log_roll_jitter_ms;     /* ms */
    int64_t log_retention_ms;       /* effective; -1 = unlimited; ms */
    int64_t log_retention_bytes;    /* -1 = unlimited; bytes */
    int64_t log_retention_check_interval_ms;
    int32_t log_index_interval_bytes;
    int32_t log_index_size_max_bytes;
    int64_t log_flush_interval_messages;
    int64_t log_flush_interval_ms;  /* effective: else scheduler interval */
    int64_t log_flush_scheduler_interval_ms;
    int64_t log_segment_delete_delay_ms;
    bool log_preallocate;
    int log_message_timestamp_type; /* enum cn_ts_type */
    int64_t log_message_timestamp_difference_max_ms;
    int64_t log_message_timestamp_before_max_ms;
    int64_t log_message_timestamp_after_max_ms;
    unsigned log_cleanup_policy;    /* CN_CLEANUP_* bits */
    int64_t log_cleaner_delete_retention_ms;
    int64_t log_cleaner_min_compaction_lag_ms;
    int64_t log_cleaner_max_compaction_lag_ms;
    double log_cleaner_min_cleanable_ratio;
    bool log_cleaner_enable;
    int32_t log_cleaner_threads;
    int64_t log_cleaner_backoff_ms;
    double log_cleaner_io_max_bytes_per_second;
    int64_t log_cleaner_dedupe_buffer_size;
    int compression_type;           /* enum cn_compression_cfg */
    int32_t compression_gzip_level; /* -1: zlib's default */
    int32_t compression_lz4_level;
    int32_t compression_zstd_level;
    int32_t message_max_bytes;      /* bytes */
    int32_t min_insync_replicas;
    bool unclean_leader_election_enable;

    /* Network. */
    int32_t socket_request_max_bytes;
    int32_t socket_send_buffer_bytes;    /* -1 = OS default */
    int32_t socket_receive_buffer_bytes; /* -1 = OS default */
    int64_t connections_max_idle_ms;
    int32_t queued_max_requests;       /* broker-wide */
    int64_t queued_max_request_bytes;  /* broker-wide; -1 no limit */
    int32_t quota_window_num;          /* client quotas (src/quota) */
    int32_t quota_window_size_seconds;
    int32_t cairn_connection_max_inflight_requests;
    int64_t cairn_connection_max_queued_bytes;
    int32_t fetch_max_bytes;
    int32_t num_io_threads;         /* informational */
    int32_t num_network_threads;    /* informational */

    /* Group coordinator. */
    int32_t group_initial_rebalance_delay_ms;
    int32_t group_min_session_timeout_ms;
    int32_t group_max_session_timeout_ms;
    int32_t group_max_size;
    int64_t offsets_retention_check_interval_ms;
    int32_t offsets_topic_num_partitions;
    int32_t offsets_topic_replication_factor;
    int32_t offsets_retention_minutes;

    /* Transactions and producer ids. */
    int32_t transaction_state_log_num_partitions;
    int32_t transaction_state_log_replication_factor;
    int32_t transaction_state_log_min_isr;
    int32_t transaction_max_timeout_ms;
    int32_t transactional_id_expiration_ms;
    int32_t transaction_abort_timed_out_transaction_cleanup_interval_ms;
    int32_t transaction_remove_expired_transaction_cleanup_interval_ms;
    int32_t producer_id_expiration_ms;
    int32_t producer_id_expiration_check_interval_ms;
    bool transaction_partition_verification_enable;
    bool transaction_hanging_auto_abort; /* Cairn: abort what the check
                                            finds */

    /* Authorization (authorizer.class.name and super.users are read
     * with cn_config_get). */
    bool allow_everyone_if_no_acl_found;

    /* Replication (cluster mode). */
    int64_t replica_lag_time_max_ms;
    int32_t replica_fetch_wait_max_ms;
    int32_t replica_fetch_max_bytes;
    int32_t replica_fetch_response_max_bytes;
    int32_t replica_fetch_backoff_ms;

    /* Cairn's own. */
    bool cairn_fsync_group_commit;
    bool cairn_replica_sync; /* a follower syncs before it counts */
    int32_t cairn_internal_compact_slack_records;
    int cairn_log_level;            /* enum cn_cfg_log_level */
    int64_t cairn_ssl_handshake_timeout_ms;
    int32_t cairn_transaction_hanging_check_interval_ms; /* ms */
    int64_t cairn_transaction_hanging_margin_ms; /* beyond transaction.max.
                                                    timeout.ms; ms */
    bool cairn_transaction_operator_commit_enable; /* COMMIT markers from
                                                      clients, for unknown
                                                      producer ids only */
    int32_t cairn_transaction_version; /* finalized transaction.version
                                          feature level, 0..2 */

    /* Generic view, one slot per broker key table row. */
    char **text;                    /* owned value text; NULL = default */
    bool *is_set;                   /* set by file or --set */
    char **dyn[2];                  /* owned dynamic text per enum
                                       cn_config_layer; NULL = unset.
                                       Wins over text: per broker, then
                                       cluster default, then static */
};

/* The two dynamic layers of IncrementalAlterConfigs on a BROKER resource:
 * its node id, and "" for the cluster-wide default. */
enum cn_config_layer {
    CN_CFG_LAYER_BROKER = 0,  /* DYNAMIC_BROKER_CONFIG */
    CN_CFG_LAYER_DEFAULT = 1, /* DYNAMIC_DEFAULT_BROKER_CONFIG */
};

/* How a dynamic change may be refused; the handler maps these to Kafka's
 * codes (Kafka answers INVALID_REQUEST for read-only keys and bad values,
 * INVALID_CONFIG for an append to a non-list). */
enum cn_config_refusal {
    CN_CFG_REFUSE_REQUEST = 1, /* as Kafka: read-only key, bad value,
                                  null value, duplicate key */
    CN_CFG_REFUSE_CONFIG = 2,  /* Cairn cannot apply it, unknown key,
                                  append/subtract */
};

/* One change of IncrementalAlterConfigs, ops as on the wire. */
#define CN_CFG_OP_SET 0
#define CN_CFG_OP_DELETE 1
#define CN_CFG_OP_APPEND 2
#define CN_CFG_OP_SUBTRACT 3
struct cn_config_change {
    const char *key;
    const char *value; /* NULL: a null value (DELETE needs none) */
    int op;            /* CN_CFG_OP_* */
};

/* One DescribeConfigs synonym; strings as in cn_config_entry. */
struct cn_config_synonym {
    const char *name;
    const char *value;              /* NULL for a null value */
    int source;                     /* enum cn_config_source */
};
/* Synonym keys (log.retention.ms, .minutes, .hours) times 4 layers. */
#define CN_CONFIG_SYN_MAX 12

/* One DescribeConfigs entry.  Strings point into static or config text. */
struct cn_config_entry {
    const char *name;
    const char *value;              /* NULL for a null value */
    int source;                     /* enum cn_config_source */
    bool read_only;
    bool sensitive;
    int kafka_type;                 /* enum cn_config_kafka_type */
    const char *doc;
    const char *const *synonyms;    /* topic entries: broker keys, else NULL */
    /* Broker entries: every layer holding a value of the key or of its
     * synonyms, strongest first, as Kafka lists them. */
    struct cn_config_synonym syn[CN_CONFIG_SYN_MAX];
    int syn_count;
};

/* Fills cfg with defaults.  Returns 0 or CN_ENOMEM; then cn_config_fini(). */
int cn_config_init(struct cn_config *cfg);
void cn_config_fini(struct cn_config *cfg);

/* Validates and applies one key.  Unknown key, bad type, range, enum value
 * or listener give CN_EINVAL and leave cfg as it was. */
int cn_config_set(struct cn_config *cfg, const char *key, const char *value,
                  char *err, size_t err_len);

/* Parses properties text (Java Properties syntax: key=value, key: value or
 * key value; # and ! comments; backslash continuation and escapes; values
 * trimmed).  `origin` (a file name) prefixes errors with "origin:LINE: ".
 * Stops at the first bad line; earlier lines stay applied. */
int cn_config_load_text(struct cn_config *cfg, const char *text,
                        const char *origin, char *err, size_t err_len);
/* Reads and parses a file.  An unreadable file is CN_EINVAL too. */
int cn_config_load_file(struct cn_config *cfg, const char *path, char *err,
                        size_t err_len);
/* The same with another parser of the text (cn_config_dyn_parse). */
typedef int (*cn_config_parse_fn)(struct cn_config *cfg, const char *text,
                                  const char *origin, char *err,
                                  size_t err_len);
int cn_config_load_file_with(struct cn_config *cfg, const char *path,
                             cn_config_parse_fn parse, char *err,
                             size_t err_len);
/* The properties-text parser alone, for other Kafka-style files
 * (cairnctl's --command-config): fn gets each key and value, its error
 * comes back prefixed "origin:LINE: ". */
typedef int (*cn_props_fn)(void *ctx, const char *key, const char *value,
                           char *err, size_t err_len);
int cn_props_parse(const char *text, const char *origin, cn_props_fn fn,
                   void *ctx, char *err, size_t err_len);
/*
 * Checks what no single key can: settings that each parse but together
 * leave a broker that cannot work (log.retention.* resolving to 0, which
 * Kafka refuses too).  Returns 0 or CN_EINVAL with the key and the reason
 * in err.  cn_config_from_args runs it once every key is applied.
 */
int cn_config_check(const struct cn_config *cfg, char *err, size_t err_len);

/* Applies one "--set" argument of the form key=value. */
int cn_config_set_arg(struct cn_config *cfg, const char *kv, char *err,
                      size_t err_len);

/*
 * Handles the command line: `-c FILE` / `--config FILE` / `--config=FILE`
 * is loaded first, then each `--set key=value` / `--set=key=value` in order.
 * Any other argument is an error (the caller handles --help and friends
 * before calling).  cfg must be initialised.  Returns 0 or CN_EINVAL.
 */
int cn_config_from_args(struct cn_config *cfg, int argc, char **argv,
                        char *err, size_t err_len);

/* Current text of a broker key (NULL for a null value) and whether it was
 * set explicitly.  Returns CN_ENOTFOUND for an unknown key.  is_set may be
 * NULL. */
int cn_config_get(const struct cn_config *cfg, const char *key,
                  const char **value, bool *is_set);

/* Broker key table, for iteration (DescribeConfigs with no names). */
size_t cn_config_key_count(void);
const struct cn_config_key *cn_config_key_at(size_t i);
/* Row for a broker key, or NULL. */
const struct cn_config_key *cn_config_key_find(const char *name);
/* The Kafka ConfigType for a table row. */
int cn_config_kafka_type(const struct cn_config_key *k);

/* DescribeConfigs entry for broker key i (< cn_config_key_count()). */
void cn_config_describe(const struct cn_config *cfg, size_t i,
                        struct cn_config_entry *out);
/* Same by name; CN_ENOTFOUND for an unknown key. */
int cn_config_describe_key(const struct cn_config *cfg, const char *name,
                           struct cn_config_entry *out);

/* ---- Dynamic broker configs (KIP-226) ----
 *
 * Kafka's dynamic keys that Cairn applies at runtime can be set per broker
 * or as the cluster default; they win over the file and --set (static).
 * Read-only keys, keys Kafka changes at runtime but Cairn cannot (thread
 * pools, listeners) and unknown keys are refused with a message naming
 * them.  The broker persists both layers (cn_config_dyn_serialize) and
 * reads them back at start (cn_config_dyn_parse).
 */

/* Whether key may be changed dynamically at that layer: 0, or CN_EINVAL
 * with the refusal and the reason in err. */
int cn_config_dyn_allowed(const char *key, enum cn_config_layer layer,
                          enum cn_config_refusal *refusal, char *err,
                          size_t err_len);
/* True for a key Kafka and Cairn change at runtime (DescribeConfigs
 * read_only false). */
bool cn_config_key_is_dynamic(const char *key);

/*
 * Applies changes to one layer of cfg, all or nothing: every change is
 * checked (key, op, value, then cn_config_check on the result) before
 * anything changes.  replace_all (AlterConfigs) first empties the layer.
 * Returns 0, or CN_EINVAL with *refusal and the message in err, or
 * CN_ENOMEM.  Callers wanting more checks on the result (topic defaults)
 * run this on a cn_config_copy first.
 */
int cn_config_alter_dynamic(struct cn_config *cfg, enum cn_config_layer layer,
                            const struct cn_config_change *ch, size_t n,
                            bool replace_all,
                            enum cn_config_refusal *refusal, char *err,
                            size_t err_len);

/* Deep copy of src into dst (uninitialised); 0 or CN_ENOMEM.  Then
 * cn_config_fini(dst). */
int cn_config_copy(struct cn_config *dst, const struct cn_config *src);

/* DescribeConfigs entry of broker key i for resource "" (the cluster
 * default layer): CN_ENOTFOUND when the layer has no value for it. */
int cn_config_describe_default(const struct cn_config *cfg, size_t i,
                               struct cn_config_entry *out);

/* Both dynamic layers as "broker.KEY=VALUE" / "default.KEY=VALUE" lines.
 * Returns a malloc'd string the caller frees, or NULL on no memory. */
char *cn_config_dyn_serialize(const struct cn_config *cfg);
/* Applies text written by cn_config_dyn_serialize; errors start with
 * "origin:LINE: ".  Every key is checked as by cn_config_alter_dynamic. */
int cn_config_dyn_parse(struct cn_config *cfg, const char *text,
                        const char *origin, char *err, size_t err_len);

/* Lists every broker and topic key with type, default and doc. */
void cn_config_print_help(FILE *f);

/*
 * Parses one listener: "PLAINTEXT://host:port", "host:port", "[::1]:port";
 * an empty host (":9092", "PLAINTEXT://:9092") means all interfaces and
 * gives host "".  The name is not checked against a protocol map here
 * (cn_config_resolve_listeners does that).  Brackets are removed from IPv6
 * hosts.  Port 0 (ephemeral) is allowed.  For a comma list use
 * cn_config_parse_listeners.
 */
int cn_config_parse_listener(const char *text, char *host, size_t host_len,
                             int *port, char *err, size_t err_len);
/* Validates every entry of a comma list (names unique, non-zero ports
 * unique) and returns the first PLAINTEXT (or scheme-less) entry, else the
 * first entry. */
int cn_config_parse_listeners(const char *text, char *host, size_t host_len,
                              int *port, char *err, size_t err_len);
/*
 * Kafka's listener keys together: `listeners` (scheme-less entries are
 * PLAINTEXT), `listener.security.protocol.map` (NAME:PROTOCOL, every name
 * must be mapped), `advertised.listeners` (NULL: the listeners; matched by
 * name, a listener absent from it advertises its own address) and
 * `controller.listener.names` (NULL or a comma list; those listeners are
 * not bound: Cairn has no controller).  Fills out[0..*n) in listener
 * order.  The error names the key and the reason.
 */
int cn_config_resolve_listeners(const char *listeners, const char *map,
                                const char *advertised,
                                const char *controller_names,
                                struct cn_listener *out, int max, int *n,
                                char *err, size_t err_len);
/* The same; with bind_controller (a cluster voter) the controller
 * listeners are bound too (PLAINTEXT when the map does not name them). */
int cn_config_resolve_listeners_ex(const char *listeners, const char *map,
                                   const char *advertised,
                                   const char *controller_names,
                                   bool bind_controller,
                                   struct cn_listener *out, int max, int *n,
                                   char *err, size_t err_len);
/* The value of an ssl.* key for one listener: listener.name.<name>.<key>
 * if set, else the key's own value (NULL when unset). */
const char *cn_config_listener_value(const struct cn_config *cfg,
                                     const char *listener, const char *key);
/* "PLAINTEXT", "SSL", ... for enum cn_sec_proto. */
const char *cn_sec_proto_name(int proto);

/* ---- Topic settings ---- */

enum cn_topic_key {
    CN_TOPIC_CLEANUP_POLICY,
    CN_TOPIC_COMPRESSION_GZIP_LEVEL,
    CN_TOPIC_COMPRESSION_LZ4_LEVEL,
    CN_TOPIC_COMPRESSION_TYPE,
    CN_TOPIC_COMPRESSION_ZSTD_LEVEL,
    CN_TOPIC_DELETE_RETENTION_MS,
    CN_TOPIC_FILE_DELETE_DELAY_MS,
    CN_TOPIC_FLUSH_MESSAGES,
    CN_TOPIC_FLUSH_MS,
    CN_TOPIC_INDEX_INTERVAL_BYTES,
    CN_TOPIC_MAX_COMPACTION_LAG_MS,
    CN_TOPIC_MAX_MESSAGE_BYTES,
    CN_TOPIC_MESSAGE_TIMESTAMP_AFTER_MAX_MS,
    CN_TOPIC_MESSAGE_TIMESTAMP_BEFORE_MAX_MS,
    CN_TOPIC_MESSAGE_TIMESTAMP_DIFFERENCE_MAX_MS,
    CN_TOPIC_MESSAGE_TIMESTAMP_TYPE,
    CN_TOPIC_MIN_CLEANABLE_DIRTY_RATIO,
    CN_TOPIC_MIN_COMPACTION_LAG_MS,
    CN_TOPIC_MIN_INSYNC_REPLICAS,
    CN_TOPIC_PREALLOCATE,
    CN_TOPIC_RETENTION_BYTES,
    CN_TOPIC_RETENTION_MS,
    CN_TOPIC_SEGMENT_BYTES,
    CN_TOPIC_SEGMENT_INDEX_BYTES,
    CN_TOPIC_SEGMENT_JITTER_MS,
    CN_TOPIC_SEGMENT_MS,
    CN_TOPIC_UNCLEAN_LEADER_ELECTION_ENABLE,
    CN_TOPIC_NKEYS
};

/*
 * One topic's effective settings.  A plain value: copy it freely.  `broker`
 * must outlive it (it supplies defaults on delete and describe).
 */
struct cn_topic_config {
    unsigned cleanup_policy;        /* CN_CLEANUP_* bits */
    int32_t compression_gzip_level; /* -1: zlib's default */
    int32_t compression_lz4_level;
    int compression_type;           /* enum cn_compression_cfg */
    int32_t compression_zstd_level;
    int64_t delete_retention_ms;
    int64_t file_delete_delay_ms;
    int64_t flush_messages;         /* fsync after this many messages */
    int64_t flush_ms;               /* fsync after this long; ms */
    int32_t index_interval_bytes;
    int64_t max_compaction_lag_ms;
    int32_t max_message_bytes;      /* largest batch accepted; bytes */
    int64_t message_timestamp_after_max_ms;
    int64_t message_timestamp_before_max_ms;
    int64_t message_timestamp_difference_max_ms;
    int message_timestamp_type;     /* enum cn_ts_type */
    double min_cleanable_dirty_ratio;
    int64_t min_compaction_lag_ms;
    int32_t min_insync_replicas;
    bool preallocate;
    int64_t retention_bytes;        /* -1 = unlimited */
    int64_t retention_ms;           /* -1 = unlimited */
    int32_t segment_bytes;
    int32_t segment_index_bytes;
    int64_t segment_jitter_ms;
    int64_t segment_ms;
    bool unclean_leader_election_enable;

    uint32_t overrides;             /* bit (1u << enum cn_topic_key) */
    const struct cn_config *broker; /* defaults; may be NULL: built-ins */
};

/* Every key takes the broker's effective value (built-in defaults when
 * broker is NULL); no overrides. */
void cn_topic_config_init_defaults(struct cn_topic_config *tc,
                                   const struct cn_config *broker);
/* Validates and applies one topic override.  Unknown key or bad value is
 * CN_EINVAL with tc unchanged. */
int cn_topic_config_set(struct cn_topic_config *tc, const char *key,
                        const char *value, char *err, size_t err_len);
/* Validates without applying (CreateTopics validate_only, AlterConfigs). */
int cn_topic_config_validate(const char *key, const char *value, char *err,
                             size_t err_len);
/* Re-reads every key without a topic override from the broker, after a
 * dynamic broker change. */
void cn_topic_config_rebase(struct cn_topic_config *tc);
/* Reverts one key to its default.  CN_ENOTFOUND for an unknown key. */
int cn_topic_config_delete(struct cn_topic_config *tc, const char *key);
bool cn_topic_config_is_override(const struct cn_topic_config *tc,
                                 enum cn_topic_key k);

/* Topic key table. */
const struct cn_config_key *cn_topic_config_key(enum cn_topic_key k);
/* Returns the key id, or -1 for an unknown name. */
int cn_topic_config_key_find(const char *name);

/*
 * DescribeConfigs entry for topic key k.  The value is formatted into buf
 * (64 bytes is always enough) and out->value points at it.  Source is
 * TOPIC for an override, STATIC_BROKER when the broker synonym was set,
 * else DEFAULT.
 */
void cn_topic_config_describe(const struct cn_topic_config *tc,
                              enum cn_topic_key k, char *buf, size_t buf_len,
                              struct cn_config_entry *out);

/* Writes the overrides as "key=value\n" lines in table order.  Returns a
 * malloc'd NUL-terminated string the caller frees, or NULL on no memory. */
char *cn_topic_config_serialize(const struct cn_topic_config *tc);
/* Applies the overrides in `text` (properties syntax) on top of tc.  On
 * error the lines before the bad one stay applied. */
int cn_topic_config_parse(struct cn_topic_config *tc, const char *text,
                          const char *origin, char *err, size_t err_len);

#endif
