/*
 * config_keys.c - the broker and topic key tables; see config.h.
 *
 * Defaults are Kafka's (3.x) unless the doc says "Cairn:".  Keys marked
 * "informational" are validated by type and shown by DescribeConfigs so a
 * typical single-node KRaft server.properties loads, but Cairn does not act
 * on them.  A broker row's read_only flag is not what DescribeConfigs
 * reports: that comes from the dynamic key list in config.c (Kafka's
 * dynamic keys that Cairn applies at runtime are not read-only).
 */
#include "config.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define NONE SIZE_MAX
#define I32_MAX INT32_MAX
#define I64_MAX INT64_MAX
#define LONG_MAX_TEXT "9223372036854775807"

/* A broker key with a typed field in struct cn_config. */
#define B(name, type, def, lo, hi, en, field, doc)                         \
    {name, type, def, lo, hi, en, doc, true, false,                        \
     offsetof(struct cn_config, field), NULL, NONE, NULL, false}
/* B whose range also admits -1 (a library's default level). */
#define BM1(name, type, def, lo, hi, en, field, doc)                       \
    {name, type, def, lo, hi, en, doc, true, false,                        \
     offsetof(struct cn_config, field), NULL, NONE, NULL, true}
/* B with the reason for its range, told with an out-of-range value. */
#define BR(name, type, def, lo, hi, en, field, doc, why)                   \
    {name, type, def, lo, hi, en, doc, true, false,                        \
     offsetof(struct cn_config, field), NULL, NONE, why, false}
/* A broker key without its own typed field (derived or informational). */
#define BX(name, type, def, lo, hi, en, doc)                                \
    {name, type, def, lo, hi, en, doc, true, false, NONE, NULL, NONE, NULL, \
     false}
/* BX for a secret: DescribeConfigs shows it as null. */
#define BXS(name, type, def, doc)                                           \
    {name, type, def, 0, 0, NULL, doc, true, true, NONE, NULL, NONE, NULL,  \
     false}
/* BX with the reason for its range. */
#define BXR(name, type, def, lo, hi, en, doc, why)                          \
    {name, type, def, lo, hi, en, doc, true, false, NONE, NULL, NONE, why, false}
/* A topic key: field in struct cn_topic_config, default from the broker's
 * effective field bfield. */
#define T(name, type, def, lo, hi, en, field, syn, bfield, doc)             \
    {name, type, def, lo, hi, en, doc, false, false,                       \
     offsetof(struct cn_topic_config, field), syn,                         \
     offsetof(struct cn_config, bfield), NULL, false}
/* T whose range also admits -1 (a library's default level). */
#define TM1(name, type, def, lo, hi, en, field, syn, bfield, doc)           \
    {name, type, def, lo, hi, en, doc, false, false,                       \
     offsetof(struct cn_topic_config, field), syn,                         \
     offsetof(struct cn_config, bfield), NULL, true}

/* Kafka takes only -1 as "keep forever" (topic retention.ms is
 * atLeast(-1)); another negative value is a typo, not a meaning. */
#define RETENTION_WHY "-1 keeps data forever; no other negative value means " \
                      "anything"

static const char *const cleanup_enums[] = {"delete", "compact", NULL};
static const char *const ts_enums[] = {"CreateTime", "LogAppendTime", NULL};
static const char *const compression_enums[] = {
    "producer", "gzip", "snappy", "lz4", "zstd", "uncompressed", NULL};
static const char *const level_enums[] = {"error", "warn", "info", "debug",
                                          NULL};
static const char *const roles_enums[] = {"broker", "controller", NULL};
static const char *const client_auth_enums[] = {"none", "requested",
                                                "required", NULL};
static const char *const store_type_enums[] = {"PEM", "PKCS12", NULL};

/* Keep sorted by name: DescribeConfigs lists them in this order. */
static const struct cn_config_key broker_keys[] = {
    B("advertised.listeners", CN_CFG_LISTENERS, NULL, 1, 0, NULL,
      advertised_listeners,
      "Listener given to clients in Metadata; default: listeners. The "
      "entry is picked as for listeners"),
    B("allow.everyone.if.no.acl.found", CN_CFG_BOOL, "false", 0, 0, NULL,
      allow_everyone_if_no_acl_found,
      "With an authorizer on, allow a request on a resource that has no "
      "ACL at all"),
    BX("authorizer.class.name", CN_CFG_STRING, "", 0, 0, NULL,
       "Empty: no authorization (everything allowed). "
       "org.apache.kafka.metadata.authorizer.StandardAuthorizer: Kafka's "
       "ACL authorization, ACLs in <data>/acls"),
    B("auto.create.topics.enable", CN_CFG_BOOL, "true", 0, 0, NULL,
      auto_create_topics_enable,
      "Create a missing topic when a client asks for it in Metadata"),
    BX("auto.leader.rebalance.enable", CN_CFG_BOOL, "true", 0, 0, NULL,
       "Informational (single node)"),
    BX("broker.heartbeat.interval.ms", CN_CFG_INT64, "2000", 1, I64_MAX, NULL,
       "Cluster mode: how often a broker heartbeats the controller"),
    BX("broker.id", CN_CFG_INT32, NULL, 0, I32_MAX, NULL,
       "Alias of node.id; must match node.id when both are set"),
    BX("broker.session.timeout.ms", CN_CFG_INT64, "9000", 1, I64_MAX, NULL,
       "Cluster mode: a broker silent this long is fenced; must exceed "
       "broker.heartbeat.interval.ms"),
    B("cairn.connection.max.inflight.requests", CN_CFG_INT32, "100", 1,
      I32_MAX, NULL, cairn_connection_max_inflight_requests,
      "Cairn: requests one connection may have read and not yet answered "
      "(response written to its socket), parked ones included; past it the "
      "connection is not read until answers drain"),
    B("cairn.connection.max.queued.bytes", CN_CFG_INT64, "8388608", 1, I64_MAX,
      NULL, cairn_connection_max_queued_bytes,
      "Cairn: request bytes one connection holds plus its response bytes "
      "not yet written; past it the connection is not read (one larger "
      "request or response still goes through); bytes"),
    B("cairn.fsync.group.commit", CN_CFG_BOOL, "true", 0, 0, NULL,
      cairn_fsync_group_commit,
      "Cairn: batch fsyncs of concurrent appends into one"),
    B("cairn.internal.compact.slack.records", CN_CFG_INT32, "10000", 1,
      I32_MAX, NULL, cairn_internal_compact_slack_records,
      "Cairn: records a __transaction_state partition may hold beyond one "
      "per id before it is compacted"),
    B("cairn.log.level", CN_CFG_ENUM, "info", 0, 0, level_enums,
      cairn_log_level, "Cairn: broker log verbosity: error|warn|info|debug"),
    B("cairn.replica.sync", CN_CFG_BOOL, "true", 0, 0, NULL,
      cairn_replica_sync,
      "Cairn: a follower fsyncs what it fetched (group commit) before its "
      "next fetch, so the high watermark and acks=all count only copies on "
      "disk: an acknowledged record survives kill -9 of every broker at "
      "once. false counts appended copies (Kafka's behaviour): faster, "
      "and safe only while fewer than min.insync.replicas brokers fail"),
    B("cairn.ssl.handshake.timeout.ms", CN_CFG_INT64, "10000", 1, I64_MAX,
      NULL, cairn_ssl_handshake_timeout_ms,
      "Cairn: close a TLS connection whose handshake has not finished "
      "this long after it was accepted (Kafka waits for "
      "connections.max.idle.ms)"),
    B("cairn.transaction.hanging.check.interval.ms", CN_CFG_INT32, "60000", 10,
      I32_MAX, NULL, cairn_transaction_hanging_check_interval_ms,
      "Cairn: how often partitions are checked for hanging transactions"),
    B("cairn.transaction.hanging.margin.ms", CN_CFG_INT64, "60000", 0, I64_MAX,
      NULL, cairn_transaction_hanging_margin_ms,
      "Cairn: a transaction open longer than transaction.max.timeout.ms "
      "plus this, that no coordinator holds, is hanging"),
    B("cairn.transaction.operator.commit.enable", CN_CFG_BOOL, "false", 0, 0,
      NULL, cairn_transaction_operator_commit_enable,
      "Cairn: accept a COMMIT WriteTxnMarkers from a client for a producer "
      "id no coordinator knows (an audited repair); Kafka tools only abort"),
    B("cairn.transaction.version", CN_CFG_INT16, "2", 0, 2, NULL,
      cairn_transaction_version,
      "Cairn: finalized transaction.version feature level (KIP-890); 0/1 "
      "keep clients on transaction version 1"),
    BM1("compression.gzip.level", CN_CFG_INT32, "-1", 1, 9, NULL,
        compression_gzip_level,
        "Default gzip level when compression.type=gzip: 1..9, -1 zlib's "
        "default (6)"),
    B("compression.lz4.level", CN_CFG_INT32, "9", 1, 17, NULL,
      compression_lz4_level,
      "Default lz4 level when compression.type=lz4: 1..17 (3 and up is "
      "LZ4HC)"),
    B("compression.type", CN_CFG_ENUM, "producer", 0, 0, compression_enums,
      compression_type,
      "Default topic compression: producer|gzip|snappy|lz4|zstd|"
      "uncompressed"),
    B("compression.zstd.level", CN_CFG_INT32, "3", -131072, 22, NULL,
      compression_zstd_level,
      "Default zstd level when compression.type=zstd: -131072..22"),
    B("connections.max.idle.ms", CN_CFG_INT64, "600000", -1, I64_MAX, NULL,
      connections_max_idle_ms, "Close connections idle this long; -1 never"),
    BX("connections.max.reauth.ms", CN_CFG_INT64, "0", 0, I64_MAX, NULL,
       "KIP-368: a SASL session lasts this long; the client must "
       "re-authenticate before, or its next request closes the "
       "connection; 0: sessions never expire"),
    BX("controller.listener.names", CN_CFG_STRING, NULL, 0, 0, NULL,
       "Cluster mode: the listener (CONTROLLER) a voter serves the quorum "
       "and the controller APIs on; its port is this node's voter port"),
    BX("controller.quorum.bootstrap.servers", CN_CFG_LIST, "", 0, 0, NULL,
       "Informational (KRaft)"),
    BX("controller.quorum.election.timeout.ms", CN_CFG_INT64, "1000", 100,
       I64_MAX, NULL, "Cluster mode: raft's election timeout"),
    BX("controller.quorum.voters", CN_CFG_LIST, "", 0, 0, NULL,
       "Cluster mode: the voters, id@host:port,... (ids unique, >= 1)"),
    B("default.replication.factor", CN_CFG_INT32, "1", 1, I32_MAX, NULL,
      default_replication_factor,
      "Replication factor for auto-created topics"),
    B("delete.topic.enable", CN_CFG_BOOL, "true", 0, 0, NULL,
      delete_topic_enable, "Allow DeleteTopics"),
    B("fetch.max.bytes", CN_CFG_INT32, "57671680", 1024, I32_MAX, NULL,
      fetch_max_bytes, "Upper bound on a Fetch response's size; bytes"),
    B("group.initial.rebalance.delay.ms", CN_CFG_INT32, "3000", 0, I32_MAX,
      NULL, group_initial_rebalance_delay_ms,
      "Wait this long for more members before the first rebalance"),
    B("group.max.session.timeout.ms", CN_CFG_INT32, "1800000", 1, I32_MAX,
      NULL, group_max_session_timeout_ms,
      "Largest session timeout a consumer group member may ask for"),
    B("group.max.size", CN_CFG_INT32, "2147483647", 1, I32_MAX, NULL,
      group_max_size, "Most members one consumer group may have"),
    B("group.min.session.timeout.ms", CN_CFG_INT32, "6000", 1, I32_MAX, NULL,
      group_min_session_timeout_ms,
      "Smallest session timeout a consumer group member may ask for"),
    BX("http.listener", CN_CFG_LISTENERS, "127.0.0.1:9464", 0, 0, NULL,
       "Cairn: host:port of the HTTP metrics/health endpoint; empty "
       "disables it"),
    BX("inter.broker.listener.name", CN_CFG_STRING, NULL, 0, 0, NULL,
       "Informational (single node)"),
    BX("listener.security.protocol.map", CN_CFG_STRING,
       "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,"
       "SASL_SSL:SASL_SSL",
       0, 0, NULL, "Listener name to security protocol, NAME:PROTOCOL,..."),
    BX("listeners", CN_CFG_LISTENERS, "PLAINTEXT://127.0.0.1:9092", 1, 0, NULL,
       "Addresses to bind, NAME://host:port,... (Cairn: loopback by "
       "default); names unique, mapped by listener.security.protocol.map; "
       "controller.listener.names are not bound"),
    B("log.cleaner.backoff.ms", CN_CFG_INT64, "15000", 0, I64_MAX, NULL,
      log_cleaner_backoff_ms,
      "How long the cleaner waits when no log needs cleaning"),
    B("log.cleaner.dedupe.buffer.size", CN_CFG_INT64, "134217728", INT64_MIN,
      I64_MAX, NULL, log_cleaner_dedupe_buffer_size,
      "Memory for the cleaners' key maps, all threads together; bytes"),
    B("log.cleaner.delete.retention.ms", CN_CFG_INT64, "86400000", 0, I64_MAX,
      NULL, log_cleaner_delete_retention_ms,
      "Keep delete tombstones this long in compacted topics"),
    B("log.cleaner.enable", CN_CFG_BOOL, "true", 0, 0, NULL,
      log_cleaner_enable,
      "Run the log cleaner for compacted topics (deprecated in Kafka)"),
    B("log.cleaner.io.max.bytes.per.second", CN_CFG_DOUBLE,
      "1.7976931348623157E308", INT64_MIN, I64_MAX, NULL,
      log_cleaner_io_max_bytes_per_second,
      "Cap on the cleaners' read plus write rate; bytes per second"),
    B("log.cleaner.max.compaction.lag.ms", CN_CFG_INT64, LONG_MAX_TEXT, 1,
      I64_MAX, NULL, log_cleaner_max_compaction_lag_ms,
      "Longest a record stays uncompacted"),
    B("log.cleaner.min.cleanable.ratio", CN_CFG_DOUBLE, "0.5", 0, 1, NULL,
      log_cleaner_min_cleanable_ratio,
      "Dirty/total ratio that makes a log eligible for cleaning"),
    B("log.cleaner.min.compaction.lag.ms", CN_CFG_INT64, "0", 0, I64_MAX, NULL,
      log_cleaner_min_compaction_lag_ms,
      "Shortest a record stays uncompacted"),
    B("log.cleaner.threads", CN_CFG_INT32, "1", 0, I32_MAX, NULL,
      log_cleaner_threads, "Cleaner worker threads; 0 cleans nothing"),
    B("log.cleanup.policy", CN_CFG_ENUM_LIST, "delete", 0, 0, cleanup_enums,
      log_cleanup_policy, "Default topic cleanup policy: delete,compact"),
    BX("log.dir", CN_CFG_STRING, "./data", 0, 0, NULL,
       "Data directory, used when log.dirs is not set"),
    BX("log.dirs", CN_CFG_LIST, NULL, 0, 0, NULL,
       "Data directories; Cairn uses the first; default: log.dir"),
    B("log.flush.interval.messages", CN_CFG_INT64, LONG_MAX_TEXT, 1, I64_MAX,
      NULL, log_flush_interval_messages,
      "Fsync a partition after this many messages"),
    BX("log.flush.interval.ms", CN_CFG_INT64, NULL, 0, I64_MAX, NULL,
       "Fsync a partition after this long; default: "
       "log.flush.scheduler.interval.ms"),
    B("log.flush.scheduler.interval.ms", CN_CFG_INT64, LONG_MAX_TEXT, 0,
      I64_MAX, NULL, log_flush_scheduler_interval_ms,
      "How often to check for partitions due a time-based flush"),
    B("log.index.interval.bytes", CN_CFG_INT32, "4096", 0, I32_MAX, NULL,
      log_index_interval_bytes, "Bytes between offset index entries"),
    B("log.index.size.max.bytes", CN_CFG_INT32, "10485760", 4, I32_MAX, NULL,
      log_index_size_max_bytes, "Largest offset index file; bytes"),
    B("log.message.timestamp.after.max.ms", CN_CFG_INT64, LONG_MAX_TEXT, 0,
      I64_MAX, NULL, log_message_timestamp_after_max_ms,
      "Reject batches stamped this far ahead of broker time (CreateTime)"),
    B("log.message.timestamp.before.max.ms", CN_CFG_INT64, LONG_MAX_TEXT, 0,
      I64_MAX, NULL, log_message_timestamp_before_max_ms,
      "Reject batches stamped this far behind broker time (CreateTime)"),
    B("log.message.timestamp.difference.max.ms", CN_CFG_INT64, LONG_MAX_TEXT,
      0, I64_MAX, NULL, log_message_timestamp_difference_max_ms,
      "Deprecated by the before/after keys (KIP-937)"),
    B("log.message.timestamp.type", CN_CFG_ENUM, "CreateTime", 0, 0, ts_enums,
      log_message_timestamp_type,
      "Default timestamp type: CreateTime|LogAppendTime"),
    B("log.preallocate", CN_CFG_BOOL, "false", 0, 0, NULL, log_preallocate,
      "Preallocate new segment files"),
    B("log.retention.bytes", CN_CFG_INT64, "-1", INT64_MIN, I64_MAX, NULL,
      log_retention_bytes,
      "Delete old segments beyond this partition size; -1 unlimited"),
    B("log.retention.check.interval.ms", CN_CFG_INT64, "300000", 1, I64_MAX,
      NULL, log_retention_check_interval_ms,
      "How often retention is enforced"),
    BXR("log.retention.hours", CN_CFG_INT32, "168", -1, I32_MAX, NULL,
        "Retention in hours; used when neither .ms nor .minutes is set; "
        "-1 unlimited",
        RETENTION_WHY),
    BXR("log.retention.minutes", CN_CFG_INT32, NULL, -1, I32_MAX, NULL,
        "Retention in minutes; used when log.retention.ms is not set; -1 "
        "unlimited",
        RETENTION_WHY),
    BXR("log.retention.ms", CN_CFG_INT64, NULL, -1, I64_MAX, NULL,
        "Retention in ms; takes precedence; -1 unlimited", RETENTION_WHY),
    BX("log.roll.hours", CN_CFG_INT32, "168", 1, I32_MAX, NULL,
       "Roll a segment this old; used when log.roll.ms is not set"),
    B("log.roll.jitter.ms", CN_CFG_INT64, "0", 0, I64_MAX, NULL,
      log_roll_jitter_ms, "Random jitter subtracted from segment roll time"),
    BX("log.roll.ms", CN_CFG_INT64, NULL, 1, I64_MAX, NULL,
       "Roll a segment this old; takes precedence over log.roll.hours"),
    B("log.segment.bytes", CN_CFG_INT32, "1073741824", 14, I32_MAX, NULL,
      log_segment_bytes, "Roll a segment at this size; bytes"),
    B("log.segment.delete.delay.ms", CN_CFG_INT64, "60000", 0, I64_MAX, NULL,
      log_segment_delete_delay_ms,
      "Wait this long before deleting a removed segment's files"),
    B("message.max.bytes", CN_CFG_INT32, "1048588", 0, I32_MAX, NULL,
      message_max_bytes, "Largest record batch accepted; bytes"),
    BX("metadata.log.dir", CN_CFG_STRING, NULL, 0, 0, NULL,
       "Cluster mode: the metadata quorum's raft directory; default "
       "<first log.dirs entry>/__cluster_metadata-0"),
    B("min.insync.replicas", CN_CFG_INT32, "1", 1, I32_MAX, NULL,
      min_insync_replicas, "Minimum ISR size for acks=all"),
    BX("node.id", CN_CFG_INT32, "1", 0, I32_MAX, NULL,
       "This broker's id (Cairn default 1); broker.id is an alias"),
    B("num.io.threads", CN_CFG_INT32, "8", 1, I32_MAX, NULL, num_io_threads,
      "Informational"),
    B("num.network.threads", CN_CFG_INT32, "3", 1, I32_MAX, NULL,
      num_network_threads, "Informational (one libuv loop serves all)"),
    B("num.partitions", CN_CFG_INT32, "1", 1, I32_MAX, NULL, num_partitions,
      "Partitions of an auto-created topic"),
    BX("num.recovery.threads.per.data.dir", CN_CFG_INT32, "1", 1, I32_MAX,
       NULL, "Informational"),
    B("offsets.retention.check.interval.ms", CN_CFG_INT64, "600000", 1,
      I64_MAX, NULL, offsets_retention_check_interval_ms,
      "How often empty groups' expired offsets are removed"),
    B("offsets.retention.minutes", CN_CFG_INT32, "10080", 1, I32_MAX, NULL,
      offsets_retention_minutes,
      "Keep committed offsets of empty groups this long"),
    B("offsets.topic.num.partitions", CN_CFG_INT32, "50", 1, I32_MAX, NULL,
      offsets_topic_num_partitions, "Partitions of __consumer_offsets"),
    B("offsets.topic.replication.factor", CN_CFG_INT16, "3", 1, INT16_MAX,
      NULL, offsets_topic_replication_factor,
      "Replicas of __consumer_offsets in a cluster (at most the brokers "
      "there are)"),
    BX("process.roles", CN_CFG_ENUM_LIST, NULL, 0, 0, roles_enums,
       "Unset: a single node.  broker: a cluster member that does not "
       "vote; broker,controller: a voter of controller.quorum.voters"),
    B("producer.id.expiration.check.interval.ms", CN_CFG_INT32, "600000", 1,
      I32_MAX, NULL, producer_id_expiration_check_interval_ms,
      "How often idle producer ids are expired"),
    B("producer.id.expiration.ms", CN_CFG_INT32, "86400000", 1, I32_MAX, NULL,
      producer_id_expiration_ms, "Forget a producer id idle this long"),
    B("queued.max.request.bytes", CN_CFG_INT64, "-1", -1, I64_MAX, NULL,
      queued_max_request_bytes,
      "Bytes of requests read and not yet handled, all connections, before "
      "no more requests are read; -1 no limit"),
    B("queued.max.requests", CN_CFG_INT32, "500", 1, I32_MAX, NULL,
      queued_max_requests,
      "Requests read and not yet handled, all connections, before no more "
      "are read (parked long-poll fetches and rebalances excepted)"),
    B("quota.window.num", CN_CFG_INT32, "11", 1, I32_MAX, NULL,
      quota_window_num, "Samples the client quota rates are measured over"),
    B("quota.window.size.seconds", CN_CFG_INT32, "1", 1, I32_MAX, NULL,
      quota_window_size_seconds, "Length of each client quota sample"),
    B("replica.fetch.backoff.ms", CN_CFG_INT32, "1000", 0, I32_MAX, NULL,
      replica_fetch_backoff_ms,
      "Wait after a follower's fetch failed before it fetches again; ms"),
    B("replica.fetch.max.bytes", CN_CFG_INT32, "1048576", 0, I32_MAX, NULL,
      replica_fetch_max_bytes,
      "Bytes a follower asks for per partition in one fetch (one batch "
      "still comes when larger)"),
    B("replica.fetch.response.max.bytes", CN_CFG_INT32, "10485760", 0, I32_MAX,
      NULL, replica_fetch_response_max_bytes,
      "Bytes a follower asks for in one whole fetch"),
    B("replica.fetch.wait.max.ms", CN_CFG_INT32, "500", 0, I32_MAX, NULL,
      replica_fetch_wait_max_ms,
      "How long a leader holds a follower's fetch that finds no new data; "
      "ms"),
    B("replica.lag.time.max.ms", CN_CFG_INT64, "30000", 1, I64_MAX, NULL,
      replica_lag_time_max_ms,
      "A follower that has not caught up to the leader's log end for this "
      "long leaves the ISR; ms"),
    BX("sasl.enabled.mechanisms", CN_CFG_LIST, "SCRAM-SHA-512,SCRAM-SHA-256",
       0, 0, NULL,
       "Mechanisms SASL_PLAINTEXT and SASL_SSL listeners offer: "
       "SCRAM-SHA-512, "
       "SCRAM-SHA-256, PLAIN (Cairn's default is the SCRAM pair; Kafka's "
       "is GSSAPI, which Cairn does not have)"),
    BX("security.inter.broker.protocol", CN_CFG_STRING, "PLAINTEXT", 0, 0,
       NULL,
       "Checked against listeners when set (single node: no inter-broker "
       "traffic)"),
    BX("share.coordinator.state.topic.min.isr", CN_CFG_INT16, "2", 1,
       INT16_MAX, NULL, "Informational"),
    BX("share.coordinator.state.topic.replication.factor", CN_CFG_INT16, "3",
       1, INT16_MAX, NULL, "Informational"),
    B("socket.receive.buffer.bytes", CN_CFG_INT32, "102400", -1, I32_MAX, NULL,
      socket_receive_buffer_bytes, "SO_RCVBUF; -1 OS default"),
    BR("socket.request.max.bytes", CN_CFG_INT32, "104857600",
       CN_CONFIG_MIN_REQUEST_BYTES, I32_MAX, NULL, socket_request_max_bytes,
       "Largest request accepted; bytes",
       "a smaller limit refuses clients' first requests, ApiVersions and "
       "Metadata, and closes every connection; Kafka's floor of 1 starts "
       "such a broker"),
    B("socket.send.buffer.bytes", CN_CFG_INT32, "102400", -1, I32_MAX, NULL,
      socket_send_buffer_bytes, "SO_SNDBUF; -1 OS default"),
    BX("ssl.cipher.suites", CN_CFG_LIST, "", 0, 0, NULL,
       "TLS cipher suites by their standard (IANA) names, as Kafka takes "
       "them; empty: OpenSSL's defaults"),
    BX("ssl.client.auth", CN_CFG_ENUM, "none", 0, 0, client_auth_enums,
       "Client certificates on SSL listeners: none|requested|required"),
    BX("ssl.enabled.protocols", CN_CFG_LIST, "TLSv1.2,TLSv1.3", 0, 0, NULL,
       "TLS versions served: TLSv1.2 and/or TLSv1.3"),
    BX("ssl.endpoint.identification.algorithm", CN_CFG_STRING, "https", 0, 0,
       NULL, "Informational (a client-side setting)"),
    BXS("ssl.key.password", CN_CFG_STRING, NULL,
        "Password of the encrypted private key in ssl.keystore.location"),
    BX("ssl.keystore.location", CN_CFG_STRING, NULL, 0, 0, NULL,
       "PEM file with the private key and certificate chain (or a PKCS12 "
       "file, ssl.keystore.type=PKCS12); required by SSL listeners"),
    BXS("ssl.keystore.password", CN_CFG_STRING, NULL,
        "Password of a PKCS12 keystore"),
    BX("ssl.keystore.type", CN_CFG_ENUM, "PEM", 0, 0, store_type_enums,
       "PEM|PKCS12 (Cairn: PEM by default; Kafka's JKS cannot be read)"),
    BX("ssl.principal.mapping.rules", CN_CFG_STRING, "DEFAULT", 0, 0, NULL,
       "Client certificate subject DN to principal name: DEFAULT, "
       "RULE:pattern/replacement/[LU], comma-separated, first match wins"),
    BX("ssl.protocol", CN_CFG_STRING, "TLSv1.3", 0, 0, NULL,
       "TLS, TLSv1.2 or TLSv1.3; ssl.enabled.protocols decides what is "
       "served"),
    BX("ssl.truststore.location", CN_CFG_STRING, NULL, 0, 0, NULL,
       "PEM file of CA certificates client certificates are checked "
       "against"),
    BXS("ssl.truststore.password", CN_CFG_STRING, NULL,
        "Informational (PEM truststores have no password)"),
    BX("ssl.truststore.type", CN_CFG_ENUM, "PEM", 0, 0, store_type_enums,
       "PEM (PKCS12 truststores: Cairn reads only PEM)"),
    BX("super.users", CN_CFG_STRING, "", 0, 0, NULL,
       "Principals allowed everything by the authorizer, ';'-separated "
       "(User:admin;User:ops)"),
    B("transaction.abort.timed.out.transaction.cleanup.interval.ms",
      CN_CFG_INT32, "10000", 1, I32_MAX, NULL,
      transaction_abort_timed_out_transaction_cleanup_interval_ms,
      "How often timed-out transactions are aborted"),
    B("transaction.hanging.auto.abort", CN_CFG_BOOL, "false", 0, 0, NULL,
      transaction_hanging_auto_abort,
      "Cairn: abort hanging transactions the periodic check finds"),
    B("transaction.max.timeout.ms", CN_CFG_INT32, "900000", 1, I32_MAX, NULL,
      transaction_max_timeout_ms, "Largest transaction timeout allowed"),
    B("transaction.partition.verification.enable", CN_CFG_BOOL, "true", 0, 0,
      NULL, transaction_partition_verification_enable,
      "Verify a transactional produce joined the transaction (KIP-890)"),
    B("transaction.remove.expired.transaction.cleanup.interval.ms",
      CN_CFG_INT32, "3600000", 1, I32_MAX, NULL,
      transaction_remove_expired_transaction_cleanup_interval_ms,
      "How often expired transactional ids are removed"),
    B("transaction.state.log.min.isr", CN_CFG_INT32, "2", 1, I32_MAX, NULL,
      transaction_state_log_min_isr,
      "min.insync.replicas of __transaction_state in a cluster (at most its "
      "replicas)"),
    B("transaction.state.log.num.partitions", CN_CFG_INT32, "50", 1, I32_MAX,
      NULL, transaction_state_log_num_partitions,
      "Partitions of __transaction_state"),
    B("transaction.state.log.replication.factor", CN_CFG_INT16, "3", 1,
      INT16_MAX, NULL, transaction_state_log_replication_factor,
      "Replicas of __transaction_state in a cluster (at most the brokers "
      "there are)"),
    B("transactional.id.expiration.ms", CN_CFG_INT32, "604800000", 1, I32_MAX,
      NULL, transactional_id_expiration_ms,
      "Forget a transactional id idle this long"),
    B("unclean.leader.election.enable", CN_CFG_BOOL, "false", 0, 0, NULL,
      unclean_leader_election_enable, "Informational (single node)"),
    BX("zookeeper.connect", CN_CFG_STRING, NULL, 0, 0, NULL,
       "Ignored (accepted so old server.properties files load)"),
    BX("zookeeper.connection.timeout.ms", CN_CFG_INT32, NULL, 0, I32_MAX, NULL,
       "Ignored (accepted so old server.properties files load)"),
};

static const char *const syn_cleanup[] = {"log.cleanup.policy", NULL};
static const char *const syn_compression[] = {"compression.type", NULL};
static const char *const syn_gzip_level[] = {"compression.gzip.level", NULL};
static const char *const syn_lz4_level[] = {"compression.lz4.level", NULL};
static const char *const syn_zstd_level[] = {"compression.zstd.level", NULL};
static const char *const syn_delete_ret[] = {
    "log.cleaner.delete.retention.ms", NULL};
static const char *const syn_file_delay[] = {"log.segment.delete.delay.ms",
                                             NULL};
static const char *const syn_flush_msgs[] = {"log.flush.interval.messages",
                                             NULL};
static const char *const syn_flush_ms[] = {"log.flush.interval.ms",
                                           "log.flush.scheduler.interval.ms",
                                           NULL};
static const char *const syn_index_int[] = {"log.index.interval.bytes", NULL};
static const char *const syn_max_lag[] = {
    "log.cleaner.max.compaction.lag.ms", NULL};
static const char *const syn_max_msg[] = {"message.max.bytes", NULL};
static const char *const syn_ts_after[] = {
    "log.message.timestamp.after.max.ms", NULL};
static const char *const syn_ts_before[] = {
    "log.message.timestamp.before.max.ms", NULL};
static const char *const syn_ts_diff[] = {
    "log.message.timestamp.difference.max.ms", NULL};
static const char *const syn_ts_type[] = {"log.message.timestamp.type", NULL};
static const char *const syn_ratio[] = {"log.cleaner.min.cleanable.ratio",
                                        NULL};
static const char *const syn_min_lag[] = {
    "log.cleaner.min.compaction.lag.ms", NULL};
static const char *const syn_min_isr[] = {"min.insync.replicas", NULL};
static const char *const syn_prealloc[] = {"log.preallocate", NULL};
static const char *const syn_ret_bytes[] = {"log.retention.bytes", NULL};
static const char *const syn_ret_ms[] = {
    "log.retention.ms", "log.retention.minutes", "log.retention.hours", NULL};
static const char *const syn_seg_bytes[] = {"log.segment.bytes", NULL};
static const char *const syn_seg_index[] = {"log.index.size.max.bytes",
                                            NULL};
static const char *const syn_jitter[] = {"log.roll.jitter.ms", NULL};
static const char *const syn_seg_ms[] = {"log.roll.ms", "log.roll.hours",
                                         NULL};
static const char *const syn_unclean[] = {"unclean.leader.election.enable",
                                          NULL};

/* Indexed by enum cn_topic_key; keep in that (alphabetical) order. */
static const struct cn_config_key topic_keys[CN_TOPIC_NKEYS] = {
    T("cleanup.policy", CN_CFG_ENUM_LIST, "delete", 0, 0, cleanup_enums,
      cleanup_policy, syn_cleanup, log_cleanup_policy,
      "delete, compact or both"),
    TM1("compression.gzip.level", CN_CFG_INT32, "-1", 1, 9, NULL,
        compression_gzip_level, syn_gzip_level, compression_gzip_level,
        "gzip level when compression.type=gzip: 1..9, -1 default"),
    T("compression.lz4.level", CN_CFG_INT32, "9", 1, 17, NULL,
      compression_lz4_level, syn_lz4_level, compression_lz4_level,
      "lz4 level when compression.type=lz4: 1..17"),
    T("compression.type", CN_CFG_ENUM, "producer", 0, 0, compression_enums,
      compression_type, syn_compression, compression_type,
      "producer|gzip|snappy|lz4|zstd|uncompressed"),
    T("compression.zstd.level", CN_CFG_INT32, "3", -131072, 22, NULL,
      compression_zstd_level, syn_zstd_level, compression_zstd_level,
      "zstd level when compression.type=zstd: -131072..22"),
    T("delete.retention.ms", CN_CFG_INT64, "86400000", 0, I64_MAX, NULL,
      delete_retention_ms, syn_delete_ret, log_cleaner_delete_retention_ms,
      "Keep delete tombstones this long (compacted topics)"),
    T("file.delete.delay.ms", CN_CFG_INT64, "60000", 0, I64_MAX, NULL,
      file_delete_delay_ms, syn_file_delay, log_segment_delete_delay_ms,
      "Wait before deleting a removed segment's files"),
    T("flush.messages", CN_CFG_INT64, LONG_MAX_TEXT, 1, I64_MAX, NULL,
      flush_messages, syn_flush_msgs, log_flush_interval_messages,
      "Fsync after this many messages"),
    T("flush.ms", CN_CFG_INT64, LONG_MAX_TEXT, 0, I64_MAX, NULL, flush_ms,
      syn_flush_ms, log_flush_interval_ms, "Fsync after this long"),
    T("index.interval.bytes", CN_CFG_INT32, "4096", 0, I32_MAX, NULL,
      index_interval_bytes, syn_index_int, log_index_interval_bytes,
      "Bytes between offset index entries"),
    T("max.compaction.lag.ms", CN_CFG_INT64, LONG_MAX_TEXT, 1, I64_MAX, NULL,
      max_compaction_lag_ms, syn_max_lag, log_cleaner_max_compaction_lag_ms,
      "Longest a record stays uncompacted"),
    T("max.message.bytes", CN_CFG_INT32, "1048588", 0, I32_MAX, NULL,
      max_message_bytes, syn_max_msg, message_max_bytes,
      "Largest record batch accepted; bytes"),
    T("message.timestamp.after.max.ms", CN_CFG_INT64, LONG_MAX_TEXT, 0,
      I64_MAX, NULL, message_timestamp_after_max_ms, syn_ts_after,
      log_message_timestamp_after_max_ms,
      "Reject batches stamped this far in the future"),
    T("message.timestamp.before.max.ms", CN_CFG_INT64, LONG_MAX_TEXT, 0,
      I64_MAX, NULL, message_timestamp_before_max_ms, syn_ts_before,
      log_message_timestamp_before_max_ms,
      "Reject batches stamped this far in the past"),
    T("message.timestamp.difference.max.ms", CN_CFG_INT64, LONG_MAX_TEXT, 0,
      I64_MAX, NULL, message_timestamp_difference_max_ms, syn_ts_diff,
      log_message_timestamp_difference_max_ms, "Deprecated (KIP-937)"),
    T("message.timestamp.type", CN_CFG_ENUM, "CreateTime", 0, 0, ts_enums,
      message_timestamp_type, syn_ts_type, log_message_timestamp_type,
      "CreateTime|LogAppendTime"),
    T("min.cleanable.dirty.ratio", CN_CFG_DOUBLE, "0.5", 0, 1, NULL,
      min_cleanable_dirty_ratio, syn_ratio, log_cleaner_min_cleanable_ratio,
      "Dirty ratio that makes the log eligible for cleaning"),
    T("min.compaction.lag.ms", CN_CFG_INT64, "0", 0, I64_MAX, NULL,
      min_compaction_lag_ms, syn_min_lag, log_cleaner_min_compaction_lag_ms,
      "Shortest a record stays uncompacted"),
    T("min.insync.replicas", CN_CFG_INT32, "1", 1, I32_MAX, NULL,
      min_insync_replicas, syn_min_isr, min_insync_replicas,
      "Minimum ISR size for acks=all"),
    T("preallocate", CN_CFG_BOOL, "false", 0, 0, NULL, preallocate,
      syn_prealloc, log_preallocate, "Preallocate new segment files"),
    T("retention.bytes", CN_CFG_INT64, "-1", INT64_MIN, I64_MAX, NULL,
      retention_bytes, syn_ret_bytes, log_retention_bytes,
      "Partition size limit; -1 unlimited"),
    T("retention.ms", CN_CFG_INT64, "604800000", -1, I64_MAX, NULL,
      retention_ms, syn_ret_ms, log_retention_ms,
      "Delete segments older than this; -1 unlimited"),
    T("segment.bytes", CN_CFG_INT32, "1073741824", 14, I32_MAX, NULL,
      segment_bytes, syn_seg_bytes, log_segment_bytes,
      "Roll a segment at this size; bytes"),
    T("segment.index.bytes", CN_CFG_INT32, "10485760", 4, I32_MAX, NULL,
      segment_index_bytes, syn_seg_index, log_index_size_max_bytes,
      "Largest offset index file; bytes"),
    T("segment.jitter.ms", CN_CFG_INT64, "0", 0, I64_MAX, NULL,
      segment_jitter_ms, syn_jitter, log_roll_jitter_ms,
      "Random jitter subtracted from the roll time"),
    T("segment.ms", CN_CFG_INT64, "604800000", 1, I64_MAX, NULL, segment_ms,
      syn_seg_ms, log_roll_ms, "Roll a segment this old"),
    T("unclean.leader.election.enable", CN_CFG_BOOL, "false", 0, 0, NULL,
      unclean_leader_election_enable, syn_unclean,
      unclean_leader_election_enable, "Informational (single node)"),
};

size_t cn_config_key_count(void)
{
    return sizeof broker_keys / sizeof broker_keys[0];
}

const struct cn_config_key *cn_config_key_at(size_t i)
{
    return i < cn_config_key_count() ? &broker_keys[i] : NULL;
}

const struct cn_config_key *cn_topic_config_key(enum cn_topic_key k)
{
    return (unsigned)k < CN_TOPIC_NKEYS ? &topic_keys[k] : NULL;
}
