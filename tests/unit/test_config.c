/* test_config.c - broker and topic configuration. */
#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "base/config.h"
#include "base/err.h"
#include "unit.h"

static char err[1024];

/* True when the error message contains every one of the given pieces. */
static bool err_has(const char *a, const char *b)
{
    bool ok = strstr(err, a) && (!b || strstr(err, b));
    if (!ok)
        fprintf(stderr, "  error was: %s\n", err);
    return ok;
}

UNIT_TEST(defaults_match_kafka)
{
    struct cn_config cfg;
    CHECK_EQ(cn_config_init(&cfg), 0);
    CHECK_EQ(cfg.num_partitions, 1);
    CHECK_EQ(cfg.default_replication_factor, 1);
    CHECK(cfg.auto_create_topics_enable);
    CHECK(cfg.delete_topic_enable);
    CHECK_EQ(cfg.log_segment_bytes, 1073741824);
    CHECK_EQ(cfg.log_roll_ms, 168LL * 3600 * 1000);
    CHECK_EQ(cfg.log_retention_ms, 168LL * 3600 * 1000);
    CHECK_EQ(cfg.log_retention_bytes, -1);
    CHECK_EQ(cfg.log_retention_check_interval_ms, 300000);
    CHECK_EQ(cfg.log_index_interval_bytes, 4096);
    CHECK_EQ(cfg.log_flush_interval_messages, INT64_MAX);
    CHECK_EQ(cfg.log_flush_interval_ms, INT64_MAX);
    CHECK_EQ(cfg.message_max_bytes, 1048588);
    CHECK_EQ(cfg.socket_request_max_bytes, 104857600);
    CHECK_EQ(cfg.connections_max_idle_ms, 600000);
    CHECK_EQ(cfg.fetch_max_bytes, 57671680);
    CHECK_EQ(cfg.queued_max_requests, 500);
    CHECK_EQ(cfg.group_initial_rebalance_delay_ms, 3000);
    CHECK_EQ(cfg.offsets_topic_num_partitions, 50);
    CHECK_EQ(cfg.offsets_topic_replication_factor, 3);
    CHECK_EQ(cfg.transaction_state_log_replication_factor, 3);
    CHECK_EQ(cfg.transaction_state_log_min_isr, 2);
    CHECK_EQ(cfg.transaction_state_log_num_partitions, 50);
    CHECK_EQ(cfg.transaction_max_timeout_ms, 900000);
    CHECK_EQ(cfg.transactional_id_expiration_ms, 604800000);
    CHECK_EQ(cfg.transaction_abort_timed_out_transaction_cleanup_interval_ms,
             10000);
    CHECK_EQ(cfg.transaction_remove_expired_transaction_cleanup_interval_ms,
             3600000);
    CHECK_EQ(cfg.producer_id_expiration_ms, 86400000);
    CHECK_EQ(cfg.producer_id_expiration_check_interval_ms, 600000);
    CHECK(cfg.transaction_partition_verification_enable);
    CHECK_EQ(cfg.min_insync_replicas, 1);
    CHECK(!cfg.unclean_leader_election_enable);
    CHECK_EQ(cfg.log_message_timestamp_type, CN_TS_CREATE_TIME);
    CHECK_EQ(cfg.log_cleanup_policy, CN_CLEANUP_DELETE);
    CHECK_EQ(cfg.compression_type, CN_COMPRESSION_PRODUCER);
    CHECK(cfg.log_cleaner_min_cleanable_ratio == 0.5);
    CHECK(cfg.log_cleaner_enable);
    CHECK_EQ(cfg.log_cleaner_threads, 1);
    CHECK_EQ(cfg.log_cleaner_backoff_ms, 15000);
    CHECK(cfg.log_cleaner_io_max_bytes_per_second == DBL_MAX);
    CHECK_EQ(cfg.log_cleaner_dedupe_buffer_size, 134217728);
    CHECK_EQ(cfg.compression_gzip_level, -1);
    CHECK_EQ(cfg.compression_lz4_level, 9);
    CHECK_EQ(cfg.compression_zstd_level, 3);
    CHECK_EQ(cfg.node_id, 1);
    CHECK(!strcmp(cfg.listeners, "PLAINTEXT://127.0.0.1:9092"));
    CHECK(!strcmp(cfg.listen_host, "127.0.0.1"));
    CHECK_EQ(cfg.listen_port, 9092);
    CHECK(!strcmp(cfg.advertised_host, "127.0.0.1"));
    CHECK_EQ(cfg.advertised_port, 9092);
    CHECK(!strcmp(cfg.http_host, "127.0.0.1"));
    CHECK_EQ(cfg.http_port, 9464);
    CHECK(!strcmp(cfg.data_dir, "./data"));
    CHECK(cfg.cairn_fsync_group_commit);
    CHECK_EQ(cfg.cairn_log_level, CN_CFG_LOG_INFO);

    const char *v;
    bool set = true;
    CHECK_EQ(cn_config_get(&cfg, "log.retention.hours", &v, &set), 0);
    CHECK(v && !strcmp(v, "168"));
    CHECK(!set);
    CHECK_EQ(cn_config_get(&cfg, "log.retention.ms", &v, &set), 0);
    CHECK(v == NULL);
    CHECK_EQ(cn_config_get(&cfg, "no.such.key", &v, &set), CN_ENOTFOUND);
    cn_config_fini(&cfg);
}

UNIT_TEST(table_defaults_all_parse)
{
    /* Every default in both tables must pass its own validation. */
    struct cn_config cfg;
    CHECK_EQ(cn_config_init(&cfg), 0);
    for (size_t i = 0; i < cn_config_key_count(); i++) {
        const struct cn_config_key *k = cn_config_key_at(i);
        if (i > 0)
            CHECK(strcmp(cn_config_key_at(i - 1)->name, k->name) < 0);
        if (!k->def)
            continue;
        if (cn_config_set(&cfg, k->name, k->def, err, sizeof err)) {
            fprintf(stderr, "  %s\n", err);
            CHECK(0);
        }
    }
    for (int t = 0; t < CN_TOPIC_NKEYS; t++) {
        const struct cn_config_key *k = cn_topic_config_key(t);
        CHECK_EQ(cn_topic_config_key_find(k->name), t);
        CHECK(cn_config_key_find(k->synonyms[0]) != NULL);
        CHECK_EQ(cn_topic_config_validate(k->name, k->def, err, sizeof err),
                 0);
    }
    cn_config_fini(&cfg);
}

UNIT_TEST(file_parsing)
{
    static const char text[] =
        "# a comment\n"
        "! another comment\n"
        "\n"
        "   num.partitions = 3   \n"
        "log.segment.bytes: 1048576\n"
        "auto.create.topics.enable\tfalse\n"
        "\tlog.dirs=/var/lib/cairn,/other\r\n"
        "log.cleanup.policy = compact, \\\n"
        "      delete\n"
        "message.max.bytes=2000000";
    struct cn_config cfg;
    CHECK_EQ(cn_config_init(&cfg), 0);
    CHECK_EQ(cn_config_load_text(&cfg, text, "t.properties", err, sizeof err),
             0);
    CHECK_EQ(cfg.num_partitions, 3);
    CHECK_EQ(cfg.log_segment_bytes, 1048576);
    CHECK(!cfg.auto_create_topics_enable);
    CHECK(!strcmp(cfg.data_dir, "/var/lib/cairn"));
    CHECK_EQ(cfg.log_cleanup_policy, CN_CLEANUP_COMPACT | CN_CLEANUP_DELETE);
    CHECK_EQ(cfg.message_max_bytes, 2000000);

    struct cn_config_entry e;
    CHECK_EQ(cn_config_describe_key(&cfg, "num.partitions", &e), 0);
    CHECK(!strcmp(e.value, "3"));
    CHECK_EQ(e.source, CN_CFG_SRC_STATIC_BROKER);
    CHECK_EQ(e.kafka_type, CN_KTYPE_INT);
    CHECK(e.read_only);
    CHECK_EQ(cn_config_describe_key(&cfg, "fetch.max.bytes", &e), 0);
    CHECK(!strcmp(e.value, "57671680"));
    CHECK_EQ(e.source, CN_CFG_SRC_DEFAULT);
    CHECK_EQ(cn_config_describe_key(&cfg, "log.cleanup.policy", &e), 0);
    CHECK_EQ(e.kafka_type, CN_KTYPE_LIST);
    cn_config_fini(&cfg);
}

UNIT_TEST(file_error_names_file_and_line)
{
    static const char text[] = "# header\n"
                               "num.partitions=2\n"
                               "\n"
                               "num.io.threads=abc\n";
    struct cn_config cfg;
    CHECK_EQ(cn_config_init(&cfg), 0);
    CHECK_EQ(cn_config_load_text(&cfg, text, "srv.properties", err,
                                 sizeof err),
             CN_EINVAL);
    CHECK(err_has("srv.properties:4:", "num.io.threads"));
    CHECK(err_has("\"abc\"", "not an integer"));
    cn_config_fini(&cfg);
}

UNIT_TEST(load_file_and_missing_file)
{
    char *dir = unit_tmpdir("config");
    char path[512];
    snprintf(path, sizeof path, "%s/server.properties", dir);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    fputs("node.id=7\nlisteners=PLAINTEXT://:19092\nbogus.key=1\n", f);
    fclose(f);
    struct cn_config cfg;
    CHECK_EQ(cn_config_init(&cfg), 0);
    CHECK_EQ(cn_config_load_file(&cfg, path, err, sizeof err), CN_EINVAL);
    CHECK(err_has(path, ":3:"));
    CHECK(err_has("unknown", "bogus.key"));
    CHECK_EQ(cfg.node_id, 7);
    CHECK(!strcmp(cfg.listen_host, ""));
    CHECK_EQ(cfg.listen_port, 19092);
    cn_config_fini(&cfg);

    snprintf(path, sizeof path, "%s/missing.properties", dir);
    CHECK_EQ(cn_config_init(&cfg), 0);
    CHECK_EQ(cn_config_load_file(&cfg, path, err, sizeof err), CN_EINVAL);
    CHECK(err_has("missing.properties", NULL));
    cn_config_fini(&cfg);
    unit_rmtree(dir);
    free(dir);
}

UNIT_TEST(set_overrides_file)
{
    char *dir = unit_tmpdir("config");
    char path[512];
    snprintf(path, sizeof path, "%s/c.properties", dir);
    FILE *f = fopen(path, "w");
    fputs("num.partitions=4\nlog.retention.hours=1\n", f);
    fclose(f);
    /* --set before -c still wins: the file is always applied first. */
    char *argv[] = {"cairn", "--set", "num.partitions=9", "-c", path,
                    "--set=cairn.log.level=debug"};
    struct cn_config cfg;
    CHECK_EQ(cn_config_init(&cfg), 0);
    CHECK_EQ(cn_config_from_args(&cfg, 6, argv, err, sizeof err), 0);
    CHECK_EQ(cfg.num_partitions, 9);
    CHECK_EQ(cfg.log_retention_ms, 3600000);
    CHECK_EQ(cfg.cairn_log_level, CN_CFG_LOG_DEBUG);
    cn_config_fini(&cfg);

    char *bad[] = {"cairn", "--set", "num.partitions"};
    CHECK_EQ(cn_config_init(&cfg), 0);
    CHECK_EQ(cn_config_from_args(&cfg, 3, bad, err, sizeof err), CN_EINVAL);
    CHECK(err_has("--set", "key=value"));
    char *bad2[] = {"cairn", "--frobnicate"};
    CHECK_EQ(cn_config_from_args(&cfg, 2, bad2, err, sizeof err), CN_EINVAL);
    CHECK(err_has("--frobnicate", NULL));
    char *bad3[] = {"cairn", "--set", "num.partitions=0"};
    CHECK_EQ(cn_config_from_args(&cfg, 3, bad3, err, sizeof err), CN_EINVAL);
    CHECK(err_has("--set: ", "num.partitions"));
    CHECK(err_has("at least 1", NULL));
    cn_config_fini(&cfg);
    unit_rmtree(dir);
    free(dir);
}

UNIT_TEST(unknown_key_named)
{
    struct cn_config cfg;
    CHECK_EQ(cn_config_init(&cfg), 0);
    CHECK_EQ(cn_config_set(&cfg, "num.partition", "1", err, sizeof err),
             CN_EINVAL);
    CHECK(err_has("unknown", "\"num.partition\""));
    CHECK_EQ(cn_config_set_arg(&cfg, "retention.ms=5", err, sizeof err),
             CN_EINVAL);
    CHECK(err_has("retention.ms", NULL));
    cn_config_fini(&cfg);
}

UNIT_TEST(bad_ints)
{
    struct cn_config cfg;
    CHECK_EQ(cn_config_init(&cfg), 0);
    CHECK_EQ(cn_config_set(&cfg, "num.partitions", "abc", err, sizeof err),
             CN_EINVAL);
    CHECK(err_has("num.partitions", "\"abc\""));
    CHECK(err_has("not an integer", NULL));
    CHECK_EQ(cn_config_set(&cfg, "num.partitions", "1.5", err, sizeof err),
             CN_EINVAL);
    CHECK(err_has("\"1.5\"", "not an integer"));
    CHECK_EQ(cn_config_set(&cfg, "num.partitions", "", err, sizeof err),
             CN_EINVAL);
    CHECK_EQ(cn_config_set(&cfg, "num.partitions", "2147483648", err,
                           sizeof err),
             CN_EINVAL);
    CHECK(err_has("num.partitions", "32-bit"));
    CHECK_EQ(cn_config_set(&cfg, "log.retention.bytes",
                           "9223372036854775808", err, sizeof err),
             CN_EINVAL);
    CHECK(err_has("log.retention.bytes", "64-bit"));
    CHECK_EQ(cn_config_set(&cfg, "log.retention.bytes",
                           "-9223372036854775808", err, sizeof err),
             0);
    CHECK_EQ(cfg.log_retention_bytes, INT64_MIN);
    CHECK_EQ(cn_config_set(&cfg, "log.segment.bytes", "13", err, sizeof err),
             CN_EINVAL);
    CHECK(err_has("log.segment.bytes", "at least 14"));
    CHECK_EQ(cn_config_set(&cfg, "offsets.topic.replication.factor",
                           "40000", err, sizeof err),
             CN_EINVAL);
    CHECK(err_has("16-bit", NULL));
    CHECK_EQ(cn_config_set(&cfg, "log.cleaner.min.cleanable.ratio", "1.5",
                           err, sizeof err),
             CN_EINVAL);
    CHECK(err_has("between 0 and 1", NULL));
    CHECK_EQ(cn_config_set(&cfg, "delete.topic.enable", "yes", err,
                           sizeof err),
             CN_EINVAL);
    CHECK(err_has("delete.topic.enable", "boolean"));
    CHECK_EQ(cn_config_set(&cfg, "delete.topic.enable", " FALSE ", err,
                           sizeof err),
             0);
    CHECK(!cfg.delete_topic_enable);
    /* A failed set leaves the old value. */
    CHECK_EQ(cfg.num_partitions, 1);
    CHECK_EQ(cfg.log_segment_bytes, 1073741824);
    cn_config_fini(&cfg);
}

UNIT_TEST(enum_values)
{
    struct cn_config cfg;
    CHECK_EQ(cn_config_init(&cfg), 0);
    CHECK_EQ(cn_config_set(&cfg, "log.message.timestamp.type", "createtime",
                           err, sizeof err),
             CN_EINVAL);
    CHECK(err_has("log.message.timestamp.type", "CreateTime, LogAppendTime"));
    CHECK_EQ(cn_config_set(&cfg, "log.message.timestamp.type",
                           "LogAppendTime", err, sizeof err),
             0);
    CHECK_EQ(cfg.log_message_timestamp_type, CN_TS_LOG_APPEND_TIME);
    CHECK_EQ(cn_config_set(&cfg, "log.cleanup.policy", "delete,purge", err,
                           sizeof err),
             CN_EINVAL);
    CHECK(err_has("\"delete,purge\"", "delete, compact"));
    CHECK_EQ(cn_config_set(&cfg, "cairn.log.level", "trace", err,
                           sizeof err),
             CN_EINVAL);
    CHECK_EQ(cn_config_set(&cfg, "compression.type", "zstd", err,
                           sizeof err),
             0);
    CHECK_EQ(cfg.compression_type, CN_COMPRESSION_ZSTD);
    cn_config_fini(&cfg);
}

UNIT_TEST(retention_precedence)
{
    struct cn_config cfg;
    CHECK_EQ(cn_config_init(&cfg), 0);
    CHECK_EQ(cn_config_set(&cfg, "log.retention.hours", "2", err, sizeof err),
             0);
    CHECK_EQ(cfg.log_retention_ms, 2 * 3600000);
    CHECK_EQ(cn_config_set(&cfg, "log.retention.minutes", "3", err,
                           sizeof err),
             0);
    CHECK_EQ(cfg.log_retention_ms, 3 * 60000);
    CHECK_EQ(cn_config_set(&cfg, "log.retention.ms", "1234", err, sizeof err),
             0);
    CHECK_EQ(cfg.log_retention_ms, 1234);
    /* Set in the other order: ms still wins. */
    CHECK_EQ(cn_config_set(&cfg, "log.retention.hours", "5", err, sizeof err),
             0);
    CHECK_EQ(cfg.log_retention_ms, 1234);
    CHECK_EQ(cn_config_set(&cfg, "log.retention.ms", "-1", err, sizeof err),
             0);
    CHECK_EQ(cfg.log_retention_ms, -1);
    cn_config_fini(&cfg);

    CHECK_EQ(cn_config_init(&cfg), 0);
    CHECK_EQ(cn_config_set(&cfg, "log.retention.hours", "-1", err, sizeof err),
             0);
    CHECK_EQ(cfg.log_retention_ms, -1);
    CHECK_EQ(cn_config_set(&cfg, "log.roll.hours", "1", err, sizeof err), 0);
    CHECK_EQ(cfg.log_roll_ms, 3600000);
    CHECK_EQ(cn_config_set(&cfg, "log.roll.ms", "500", err, sizeof err), 0);
    CHECK_EQ(cfg.log_roll_ms, 500);
    CHECK_EQ(cn_config_set(&cfg, "log.flush.scheduler.interval.ms", "700",
                           err, sizeof err),
             0);
    CHECK_EQ(cfg.log_flush_interval_ms, 700);
    CHECK_EQ(cn_config_set(&cfg, "log.flush.interval.ms", "50", err,
                           sizeof err),
             0);
    CHECK_EQ(cfg.log_flush_interval_ms, 50);
    cn_config_fini(&cfg);
}

UNIT_TEST(aliases)
{
    struct cn_config cfg;
    CHECK_EQ(cn_config_init(&cfg), 0);
    CHECK_EQ(cn_config_set(&cfg, "broker.id", "4", err, sizeof err), 0);
    CHECK_EQ(cfg.node_id, 4);
    CHECK_EQ(cn_config_set(&cfg, "node.id", "5", err, sizeof err), CN_EINVAL);
    CHECK(err_has("node.id", "broker.id"));
    CHECK_EQ(cn_config_set(&cfg, "node.id", "4", err, sizeof err), 0);
    CHECK_EQ(cn_config_set(&cfg, "log.dir", "/a", err, sizeof err), 0);
    CHECK(!strcmp(cfg.data_dir, "/a"));
    CHECK_EQ(cn_config_set(&cfg, "log.dirs", " /b , /c", err, sizeof err), 0);
    CHECK(!strcmp(cfg.data_dir, "/b"));
    CHECK_EQ(cn_config_set(&cfg, "log.dirs", "", err, sizeof err), CN_EINVAL);
    CHECK_EQ(cn_config_set(&cfg, "advertised.listeners",
                           "PLAINTEXT://broker.example:9092", err, sizeof err),
             0);
    CHECK(!strcmp(cfg.advertised_host, "broker.example"));
    CHECK(!strcmp(cfg.listen_host, "127.0.0.1"));
    CHECK_EQ(cn_config_set(&cfg, "http.listener", "", err, sizeof err), 0);
    CHECK_EQ(cfg.http_port, 0);
    CHECK_EQ(cn_config_set(&cfg, "listeners", "", err, sizeof err),
             CN_EINVAL);
    cn_config_fini(&cfg);
}

UNIT_TEST(kraft_server_properties_loads)
{
    /* The shape of Kafka's config/server.properties for a single node. */
    static const char text[] =
        "process.roles=broker,controller\n"
        "node.id=1\n"
        "controller.quorum.bootstrap.servers=localhost:9093\n"
        "controller.quorum.voters=1@localhost:9093\n"
        "listeners=PLAINTEXT://:9092,CONTROLLER://:9093\n"
        "inter.broker.listener.name=PLAINTEXT\n"
        "advertised.listeners=PLAINTEXT://localhost:9092,"
        "CONTROLLER://localhost:9093\n"
        "controller.listener.names=CONTROLLER\n"
        "listener.security.protocol.map=CONTROLLER:PLAINTEXT,"
        "PLAINTEXT:PLAINTEXT,SSL:SSL\n"
        "num.network.threads=3\n"
        "num.io.threads=8\n"
        "socket.send.buffer.bytes=102400\n"
        "socket.receive.buffer.bytes=102400\n"
        "socket.request.max.bytes=104857600\n"
        "log.dirs=/tmp/kraft-combined-logs\n"
        "num.partitions=1\n"
        "num.recovery.threads.per.data.dir=1\n"
        "offsets.topic.replication.factor=1\n"
        "share.coordinator.state.topic.replication.factor=1\n"
        "share.coordinator.state.topic.min.isr=1\n"
        "transaction.state.log.replication.factor=1\n"
        "transaction.state.log.min.isr=1\n"
        "log.retention.hours=168\n"
        "log.segment.bytes=1073741824\n"
        "log.retention.check.interval.ms=300000\n"
        "group.initial.rebalance.delay.ms=0\n";
    struct cn_config cfg;
    CHECK_EQ(cn_config_init(&cfg), 0);
    CHECK_EQ(cn_config_load_text(&cfg, text, "server.properties", err,
                                 sizeof err),
             0);
    CHECK(!strcmp(cfg.listen_host, ""));
    CHECK_EQ(cfg.listen_port, 9092);
    CHECK(!strcmp(cfg.advertised_host, "localhost"));
    CHECK_EQ(cfg.advertised_port, 9092);
    CHECK_EQ(cfg.group_initial_rebalance_delay_ms, 0);
    cn_config_fini(&cfg);
}

UNIT_TEST(listener_variants)
{
    char host[CN_CONFIG_HOST_MAX];
    int port = -1;
    CHECK_EQ(cn_config_parse_listener("PLAINTEXT://127.0.0.1:9092", host,
                                      sizeof host, &port, err, sizeof err),
             0);
    CHECK(!strcmp(host, "127.0.0.1"));
    CHECK_EQ(port, 9092);
    CHECK_EQ(cn_config_parse_listener("localhost:1234", host, sizeof host,
                                      &port, err, sizeof err),
             0);
    CHECK(!strcmp(host, "localhost"));
    CHECK_EQ(port, 1234);
    CHECK_EQ(cn_config_parse_listener("[::1]:9093", host, sizeof host, &port,
                                      err, sizeof err),
             0);
    CHECK(!strcmp(host, "::1"));
    CHECK_EQ(port, 9093);
    CHECK_EQ(cn_config_parse_listener("plaintext://[fe80::1]:0", host,
                                      sizeof host, &port, err, sizeof err),
             0);
    CHECK(!strcmp(host, "fe80::1"));
    CHECK_EQ(port, 0);
    CHECK_EQ(cn_config_parse_listener("PLAINTEXT://:9092", host, sizeof host,
                                      &port, err, sizeof err),
             0);
    CHECK(!strcmp(host, ""));
    CHECK_EQ(cn_config_parse_listener(":7", host, sizeof host, &port, err,
                                      sizeof err),
             0);
    CHECK_EQ(port, 7);
    /* Comma list: the first plaintext entry is the one bound. */
    CHECK_EQ(cn_config_parse_listeners("CONTROLLER://:9093, PLAINTEXT://h:1",
                                       host, sizeof host, &port, err,
                                       sizeof err),
             0);
    CHECK(!strcmp(host, "h"));
    CHECK_EQ(port, 1);
}

UNIT_TEST(listener_errors)
{
    char host[CN_CONFIG_HOST_MAX];
    char tiny[4];
    int port;
    /* SSL and SASL_* are served now: the parser takes any name. */
    CHECK_EQ(cn_config_parse_listener("SSL://host:9093", host, sizeof host,
                                      &port, err, sizeof err),
             0);
    CHECK_EQ(port, 9093);
    CHECK_EQ(cn_config_parse_listeners("PLAINTEXT://:1,SSL://:1", host,
                                       sizeof host, &port, err, sizeof err),
             CN_EINVAL);
    CHECK(err_has("port 1", "used by PLAINTEXT and SSL"));
    CHECK_EQ(cn_config_parse_listeners("ssl://:1,SSL://:2", host,
                                       sizeof host, &port, err, sizeof err),
             CN_EINVAL);
    CHECK(err_has("SSL", "used twice"));
    CHECK_EQ(cn_config_parse_listener("host", host, sizeof host, &port, err,
                                      sizeof err),
             CN_EINVAL);
    CHECK(err_has("\"host\"", "missing port"));
    CHECK_EQ(cn_config_parse_listener("host:", host, sizeof host, &port, err,
                                      sizeof err),
             CN_EINVAL);
    CHECK_EQ(cn_config_parse_listener("host:65536", host, sizeof host, &port,
                                      err, sizeof err),
             CN_EINVAL);
    CHECK(err_has("port", NULL));
    CHECK_EQ(cn_config_parse_listener("host:12x", host, sizeof host, &port,
                                      err, sizeof err),
             CN_EINVAL);
    CHECK_EQ(cn_config_parse_listener("::1:9092", host, sizeof host, &port,
                                      err, sizeof err),
             CN_EINVAL);
    CHECK(err_has("brackets", NULL));
    CHECK_EQ(cn_config_parse_listener("[::1:9092", host, sizeof host, &port,
                                      err, sizeof err),
             CN_EINVAL);
    CHECK_EQ(cn_config_parse_listener("[::1]9092", host, sizeof host, &port,
                                      err, sizeof err),
             CN_EINVAL);
    CHECK_EQ(cn_config_parse_listener("://h:1", host, sizeof host, &port,
                                      err, sizeof err),
             CN_EINVAL);
    CHECK_EQ(cn_config_parse_listener("", host, sizeof host, &port, err,
                                      sizeof err),
             CN_EINVAL);
    CHECK_EQ(cn_config_parse_listener("longhost:1", tiny, sizeof tiny, &port,
                                      err, sizeof err),
             CN_EINVAL);
    CHECK_EQ(cn_config_parse_listeners("PLAINTEXT://:1,,x:2", host,
                                       sizeof host, &port, err, sizeof err),
             CN_EINVAL);

    struct cn_config cfg;
    CHECK_EQ(cn_config_init(&cfg), 0);
    CHECK_EQ(cn_config_set(&cfg, "listeners",
                           "PLAINTEXT://:9092,SSL://:9092", err, sizeof err),
             CN_EINVAL);
    CHECK(err_has("listeners", "port 9092"));
    CHECK_EQ(cfg.listen_port, 9092);
    cn_config_fini(&cfg);
}

UNIT_TEST(listener_resolve)
{
    struct cn_listener l[CN_LISTENERS_MAX];
    int n;
    const char *kmap = "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:"
                       "SASL_PLAINTEXT,SASL_SSL:SASL_SSL";
    CHECK_EQ(cn_config_resolve_listeners(
                 "PLAINTEXT://127.0.0.1:9092, ssl://:9093,SASL_SSL://h:9094",
                 kmap, "SSL://public.example:443", NULL, l, CN_LISTENERS_MAX,
                 &n, err, sizeof err),
             0);
    CHECK_EQ(n, 3);
    CHECK(!strcmp(l[0].name, "PLAINTEXT"));
    CHECK_EQ(l[0].proto, CN_SEC_PLAINTEXT);
    CHECK(!strcmp(l[0].host, "127.0.0.1"));
    CHECK(!strcmp(l[0].adv_host, ""));
    CHECK(!strcmp(l[1].name, "SSL"));
    CHECK_EQ(l[1].proto, CN_SEC_SSL);
    CHECK_EQ(l[1].port, 9093);
    CHECK(!strcmp(l[1].adv_host, "public.example"));
    CHECK_EQ(l[1].adv_port, 443);
    CHECK_EQ(l[2].proto, CN_SEC_SASL_SSL);
    /* A custom name must be mapped; the message names the key. */
    CHECK_EQ(cn_config_resolve_listeners("CLIENT://:1", kmap, NULL, NULL, l,
                                         CN_LISTENERS_MAX, &n, err,
                                         sizeof err),
             CN_EINVAL);
    CHECK(err_has("listener.security.protocol.map", "CLIENT is not mapped"));
    CHECK_EQ(cn_config_resolve_listeners("CLIENT://:1,INTERNAL://:2",
                                         "CLIENT:SSL,INTERNAL:PLAINTEXT",
                                         NULL, NULL, l, CN_LISTENERS_MAX, &n,
                                         err, sizeof err),
             0);
    CHECK_EQ(n, 2);
    CHECK_EQ(l[0].proto, CN_SEC_SSL);
    CHECK_EQ(l[1].proto, CN_SEC_PLAINTEXT);
    CHECK_EQ(cn_config_resolve_listeners("CLIENT://:1", "CLIENT:TLS", NULL,
                                         NULL, l, CN_LISTENERS_MAX, &n, err,
                                         sizeof err),
             CN_EINVAL);
    CHECK(err_has("unknown security protocol", "TLS"));
    CHECK_EQ(cn_config_resolve_listeners("CLIENT://:1", "CLIENT", NULL, NULL,
                                         l, CN_LISTENERS_MAX, &n, err,
                                         sizeof err),
             CN_EINVAL);
    CHECK(err_has("NAME:PROTOCOL", NULL));
    /* Advertised names must be listeners. */
    CHECK_EQ(cn_config_resolve_listeners("PLAINTEXT://:1", kmap, "SSL://h:2",
                                         NULL, l, CN_LISTENERS_MAX, &n, err,
                                         sizeof err),
             CN_EINVAL);
    CHECK(err_has("advertised.listeners", "SSL is not in listeners"));
    /* Controller listeners are not bound, mapped or not. */
    CHECK_EQ(cn_config_resolve_listeners("PLAINTEXT://:1,CONTROLLER://:2",
                                         kmap, NULL, "CONTROLLER", l,
                                         CN_LISTENERS_MAX, &n, err,
                                         sizeof err),
             0);
    CHECK_EQ(n, 1);
    CHECK_EQ(cn_config_resolve_listeners("CONTROLLER://:2", kmap, NULL,
                                         "CONTROLLER", l, CN_LISTENERS_MAX,
                                         &n, err, sizeof err),
             CN_EINVAL);
    CHECK(err_has("controller listener", NULL));

    /* Start-up check: the inter-broker keys name a listener. */
    struct cn_config cfg;
    CHECK_EQ(cn_config_init(&cfg), 0);
    CHECK_EQ(cn_config_set(&cfg, "listeners",
                           "PLAINTEXT://:9092,SSL://:9093", err, sizeof err),
             0);
    CHECK_EQ(cfg.nlisteners, 2);
    CHECK_EQ(cn_config_check(&cfg, err, sizeof err), 0);
    CHECK_EQ(cn_config_set(&cfg, "inter.broker.listener.name", "INTERNAL",
                           err, sizeof err),
             0);
    CHECK_EQ(cn_config_check(&cfg, err, sizeof err), CN_EINVAL);
    CHECK(err_has("inter.broker.listener.name", "no listener"));
    CHECK_EQ(cn_config_set(&cfg, "inter.broker.listener.name", "ssl", err,
                           sizeof err),
             0);
    CHECK_EQ(cn_config_check(&cfg, err, sizeof err), 0);
    CHECK_EQ(cn_config_set(&cfg, "security.inter.broker.protocol", "SSL",
                           err, sizeof err),
             0);
    CHECK_EQ(cn_config_check(&cfg, err, sizeof err), CN_EINVAL);
    CHECK(err_has("both set", NULL));
    CHECK_EQ(cn_config_set(&cfg, "listeners", "CLIENT://:9092", err,
                           sizeof err),
             0);
    CHECK_EQ(cfg.nlisteners, 0);
    CHECK_EQ(cn_config_check(&cfg, err, sizeof err), CN_EINVAL);
    CHECK(err_has("CLIENT is not mapped", NULL));
    cn_config_fini(&cfg);
}

UNIT_TEST(listener_prefixed_ssl_keys)
{
    struct cn_config cfg;
    CHECK_EQ(cn_config_init(&cfg), 0);
    CHECK_EQ(cn_config_set(&cfg, "ssl.keystore.location", "/all.pem", err,
                           sizeof err),
             0);
    CHECK_EQ(cn_config_set(&cfg, "listener.name.client.ssl.keystore.location",
                           " /client.pem ", err, sizeof err),
             0);
    CHECK_EQ(cn_config_set(&cfg, "listener.name.client.ssl.client.auth",
                           "required", err, sizeof err),
             0);
    /* Set again: replaced, not added. */
    CHECK_EQ(cn_config_set(&cfg, "listener.name.CLIENT.ssl.client.auth",
                           "requested", err, sizeof err),
             0);
    CHECK_EQ(cfg.nlkeys, 2);
    CHECK(!strcmp(cn_config_listener_value(&cfg, "CLIENT",
                                           "ssl.keystore.location"),
                  "/client.pem"));
    CHECK(!strcmp(cn_config_listener_value(&cfg, "client", "ssl.client.auth"),
                  "requested"));
    CHECK(!strcmp(cn_config_listener_value(&cfg, "SSL",
                                           "ssl.keystore.location"),
                  "/all.pem"));
    CHECK(!strcmp(cn_config_listener_value(&cfg, "SSL", "ssl.client.auth"),
                  "none"));
    /* The copy (dynamic config) keeps them. */
    struct cn_config copy;
    CHECK_EQ(cn_config_copy(&copy, &cfg), 0);
    CHECK(!strcmp(cn_config_listener_value(&copy, "CLIENT",
                                           "ssl.keystore.location"),
                  "/client.pem"));
    cn_config_fini(&copy);
    CHECK_EQ(cn_config_set(&cfg, "listener.name.client.ssl.client.auth",
                           "maybe", err, sizeof err),
             CN_EINVAL);
    CHECK(err_has("listener.name.client.ssl.client.auth", "maybe"));
    CHECK_EQ(cn_config_set(&cfg, "listener.name.client.log.dirs", "/x", err,
                           sizeof err),
             CN_EINVAL);
    CHECK(err_has("unknown config key", "ssl.*"));
    CHECK_EQ(cn_config_set(&cfg, "listener.name.client", "/x", err,
                           sizeof err),
             CN_EINVAL);
    cn_config_fini(&cfg);
}

UNIT_TEST(topic_defaults_follow_broker)
{
    struct cn_config cfg;
    struct cn_topic_config tc;
    struct cn_config_entry e;
    char buf[64];

    cn_topic_config_init_defaults(&tc, NULL);
    CHECK_EQ(tc.retention_ms, 604800000);
    CHECK_EQ(tc.segment_bytes, 1073741824);
    CHECK_EQ(tc.max_message_bytes, 1048588);
    CHECK_EQ(tc.flush_ms, INT64_MAX);
    CHECK(tc.min_cleanable_dirty_ratio == 0.5);

    CHECK_EQ(cn_config_init(&cfg), 0);
    CHECK_EQ(cn_config_set(&cfg, "log.retention.minutes", "10", err,
                           sizeof err),
             0);
    CHECK_EQ(cn_config_set(&cfg, "log.roll.hours", "2", err, sizeof err), 0);
    CHECK_EQ(cn_config_set(&cfg, "message.max.bytes", "5000", err,
                           sizeof err),
             0);
    cn_topic_config_init_defaults(&tc, &cfg);
    CHECK_EQ(tc.retention_ms, 600000);
    CHECK_EQ(tc.segment_ms, 7200000);
    CHECK_EQ(tc.max_message_bytes, 5000);
    CHECK_EQ(tc.flush_ms, INT64_MAX);
    CHECK_EQ(tc.overrides, 0);

    cn_topic_config_describe(&tc, CN_TOPIC_RETENTION_MS, buf, sizeof buf, &e);
    CHECK(!strcmp(e.name, "retention.ms"));
    CHECK(!strcmp(e.value, "600000"));
    CHECK_EQ(e.source, CN_CFG_SRC_STATIC_BROKER);
    CHECK(!e.read_only);
    CHECK_EQ(e.kafka_type, CN_KTYPE_LONG);
    CHECK(!strcmp(e.synonyms[0], "log.retention.ms"));
    cn_topic_config_describe(&tc, CN_TOPIC_SEGMENT_BYTES, buf, sizeof buf,
                             &e);
    CHECK(!strcmp(e.value, "1073741824"));
    CHECK_EQ(e.source, CN_CFG_SRC_DEFAULT);

    CHECK_EQ(cn_topic_config_set(&tc, "retention.ms", "1000", err,
                                 sizeof err),
             0);
    CHECK_EQ(tc.retention_ms, 1000);
    CHECK(cn_topic_config_is_override(&tc, CN_TOPIC_RETENTION_MS));
    cn_topic_config_describe(&tc, CN_TOPIC_RETENTION_MS, buf, sizeof buf, &e);
    CHECK(!strcmp(e.value, "1000"));
    CHECK_EQ(e.source, CN_CFG_SRC_TOPIC);

    CHECK_EQ(cn_topic_config_delete(&tc, "retention.ms"), 0);
    CHECK_EQ(tc.retention_ms, 600000);
    CHECK(!cn_topic_config_is_override(&tc, CN_TOPIC_RETENTION_MS));
    CHECK_EQ(cn_topic_config_delete(&tc, "nope"), CN_ENOTFOUND);
    cn_config_fini(&cfg);
}

UNIT_TEST(topic_validation)
{
    struct cn_topic_config tc;
    cn_topic_config_init_defaults(&tc, NULL);
    CHECK_EQ(cn_topic_config_set(&tc, "retention.ms", "-2", err, sizeof err),
             CN_EINVAL);
    CHECK(err_has("retention.ms", "at least -1"));
    CHECK_EQ(cn_topic_config_set(&tc, "segment.bytes", "10", err, sizeof err),
             CN_EINVAL);
    CHECK(err_has("segment.bytes", "\"10\""));
    CHECK_EQ(cn_topic_config_set(&tc, "cleanup.policy", "shred", err,
                                 sizeof err),
             CN_EINVAL);
    CHECK_EQ(cn_topic_config_set(&tc, "compression.type", "brotli", err,
                                 sizeof err),
             CN_EINVAL);
    CHECK(err_has("compression.type", "producer"));
    /* Kafka's level ranges (KIP-390): gzip [1,...,9] or -1. */
    struct cn_topic_config lv;
    cn_topic_config_init_defaults(&lv, NULL);
    CHECK_EQ(lv.compression_gzip_level, -1);
    CHECK_EQ(lv.compression_lz4_level, 9);
    CHECK_EQ(lv.compression_zstd_level, 3);
    CHECK_EQ(cn_topic_config_set(&lv, "compression.gzip.level", "0", err,
                                 sizeof err),
             CN_EINVAL);
    CHECK(err_has("compression.gzip.level", "between 1 and 9, or -1"));
    CHECK_EQ(cn_topic_config_set(&lv, "compression.gzip.level", "-1", err,
                                 sizeof err),
             0);
    CHECK_EQ(cn_topic_config_set(&lv, "compression.gzip.level", "9", err,
                                 sizeof err),
             0);
    CHECK_EQ(lv.compression_gzip_level, 9);
    CHECK_EQ(cn_topic_config_set(&lv, "compression.lz4.level", "18", err,
                                 sizeof err),
             CN_EINVAL);
    CHECK_EQ(cn_topic_config_set(&lv, "compression.zstd.level", "-131072",
                                 err, sizeof err),
             0);
    CHECK_EQ(lv.compression_zstd_level, -131072);
    CHECK_EQ(cn_topic_config_set(&lv, "compression.zstd.level", "23", err,
                                 sizeof err),
             CN_EINVAL);
    CHECK_EQ(cn_topic_config_set(&tc, "log.retention.ms", "1", err,
                                 sizeof err),
             CN_EINVAL);
    CHECK(err_has("unknown", "log.retention.ms"));
    /* Kafka 4.x dropped the 3.x message-format keys (KIP-724): its
     * LogConfig no longer knows them, so they are unknown there as here. */
    CHECK_EQ(cn_topic_config_set(&tc, "message.format.version", "2.0", err,
                                 sizeof err),
             CN_EINVAL);
    CHECK(err_has("unknown", "message.format.version"));
    CHECK_EQ(cn_topic_config_set(&tc, "message.downconversion.enable",
                                 "true", err, sizeof err),
             CN_EINVAL);
    CHECK_EQ(cn_topic_config_set(&tc, "min.cleanable.dirty.ratio", "x", err,
                                 sizeof err),
             CN_EINVAL);
    CHECK_EQ(cn_topic_config_validate("max.message.bytes", "-1", err,
                                      sizeof err),
             CN_EINVAL);
    CHECK_EQ(cn_topic_config_validate("max.message.bytes", "100", err,
                                      sizeof err),
             0);
    CHECK_EQ(tc.overrides, 0);
    CHECK_EQ(tc.segment_bytes, 1073741824);
}

UNIT_TEST(topic_serialize_round_trip)
{
    struct cn_topic_config tc, back;
    cn_topic_config_init_defaults(&tc, NULL);
    CHECK_EQ(cn_topic_config_set(&tc, "cleanup.policy", "compact,delete", err,
                                 sizeof err),
             0);
    CHECK_EQ(cn_topic_config_set(&tc, "retention.ms", "-1", err, sizeof err),
             0);
    CHECK_EQ(cn_topic_config_set(&tc, "min.cleanable.dirty.ratio", "0.1",
                                 err, sizeof err),
             0);
    CHECK_EQ(cn_topic_config_set(&tc, "message.timestamp.type",
                                 "LogAppendTime", err, sizeof err),
             0);
    CHECK_EQ(cn_topic_config_set(&tc, "preallocate", "true", err, sizeof err),
             0);
    CHECK_EQ(cn_topic_config_set(&tc, "compression.type", "lz4", err,
                                 sizeof err),
             0);
    char *text = cn_topic_config_serialize(&tc);
    CHECK(text != NULL);
    CHECK(strstr(text, "cleanup.policy=delete,compact\n") != NULL);
    CHECK(strstr(text, "retention.ms=-1\n") != NULL);
    CHECK(strstr(text, "min.cleanable.dirty.ratio=0.1\n") != NULL);
    CHECK(strstr(text, "segment.bytes") == NULL);

    cn_topic_config_init_defaults(&back, NULL);
    CHECK_EQ(cn_topic_config_parse(&back, text, "topic.properties", err,
                                   sizeof err),
             0);
    CHECK(memcmp(&tc, &back, sizeof tc) == 0);
    CHECK_EQ(back.overrides, tc.overrides);
    CHECK_EQ(back.cleanup_policy, CN_CLEANUP_COMPACT | CN_CLEANUP_DELETE);
    CHECK(back.min_cleanable_dirty_ratio == 0.1);
    CHECK_EQ(back.compression_type, CN_COMPRESSION_LZ4);
    free(text);

    cn_topic_config_init_defaults(&back, NULL);
    text = cn_topic_config_serialize(&back);
    CHECK(text && text[0] == '\0');
    free(text);
    CHECK_EQ(cn_topic_config_parse(&back, "# x\nsegment.ms=abc\n", "t", err,
                                   sizeof err),
             CN_EINVAL);
    CHECK(err_has("t:2:", "segment.ms"));
}

UNIT_TEST(properties_escapes)
{
    static const char text[] = "log.dir = /data/with\\ space\\\\\n"
                               "cairn.log.level=\\u0064ebug\n"
                               "inter.broker.listener.name=A\\:B\\=C\n";
    struct cn_config cfg;
    CHECK_EQ(cn_config_init(&cfg), 0);
    CHECK_EQ(cn_config_load_text(&cfg, text, "e", err, sizeof err), 0);
    CHECK(!strcmp(cfg.data_dir, "/data/with space\\"));
    CHECK_EQ(cfg.cairn_log_level, CN_CFG_LOG_DEBUG);
    const char *v;
    CHECK_EQ(cn_config_get(&cfg, "inter.broker.listener.name", &v, NULL), 0);
    CHECK(v && !strcmp(v, "A:B=C"));
    cn_config_fini(&cfg);
}

UNIT_TEST(help_lists_keys)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CHECK(f != NULL);
    cn_config_print_help(f);
    fclose(f);
    CHECK(strstr(buf, "log.retention.hours (int, default: 168)") != NULL);
    CHECK(strstr(buf, "retention.ms") != NULL);
    CHECK(strstr(buf, "cairn.fsync.group.commit") != NULL);
    free(buf);
}

/* Issue #11: values that parse but start a broker that cannot work. */
UNIT_TEST(unworkable_values_refused)
{
    struct cn_config cfg;
    CHECK_EQ(cn_config_init(&cfg), 0);
    /* Kafka's atLeast(1) starts a broker that closes every connection. */
    CHECK_EQ(cn_config_set(&cfg, "socket.request.max.bytes", "1", err,
                           sizeof err),
             CN_EINVAL);
    CHECK(err_has("socket.request.max.bytes", "at least 1024"));
    CHECK(err_has("ApiVersions", "closes every connection"));
    CHECK_EQ(cn_config_set(&cfg, "socket.request.max.bytes", "1023", err,
                           sizeof err),
             CN_EINVAL);
    CHECK_EQ(cfg.socket_request_max_bytes, 104857600);
    CHECK_EQ(cn_config_set(&cfg, "socket.request.max.bytes", "1024", err,
                           sizeof err),
             0);
    CHECK_EQ(cfg.socket_request_max_bytes, 1024);

    /* Only -1 means forever. */
    static const char *const keys[] = {"log.retention.ms",
                                       "log.retention.minutes",
                                       "log.retention.hours"};
    static const char *const bad[] = {"-5", "-2", "-2147483648"};
    for (size_t i = 0; i < 3; i++) {
        for (size_t j = 0; j < 3; j++) {
            CHECK_EQ(cn_config_set(&cfg, keys[i], bad[j], err, sizeof err),
                     CN_EINVAL);
            CHECK(err_has(keys[i], bad[j]));
            CHECK(err_has("at least -1", "forever"));
        }
    }
    CHECK_EQ(cfg.log_retention_ms, 168LL * 3600 * 1000);
    CHECK_EQ(cn_config_check(&cfg, err, sizeof err), 0);
    for (size_t i = 0; i < 3; i++) {
        struct cn_config c2;
        CHECK_EQ(cn_config_init(&c2), 0);
        CHECK_EQ(cn_config_set(&c2, keys[i], "-1", err, sizeof err), 0);
        CHECK_EQ(c2.log_retention_ms, -1);
        CHECK_EQ(cn_config_check(&c2, err, sizeof err), 0);
        cn_config_fini(&c2);
    }
    cn_config_fini(&cfg);

    /* A retention of 0, by whichever key wins, is refused as Kafka does;
     * a 0 that another key overrides is harmless. */
    for (size_t i = 0; i < 3; i++) {
        char arg[64];
        snprintf(arg, sizeof arg, "%s=0", keys[i]);
        char *argv[] = {"cairn", "--set", arg};
        CHECK_EQ(cn_config_init(&cfg), 0);
        CHECK_EQ(cn_config_from_args(&cfg, 3, argv, err, sizeof err),
                 CN_EINVAL);
        CHECK(err_has(keys[i], "unlimited (-1) or at least 1 ms"));
        cn_config_fini(&cfg);
    }
    char *ok[] = {"cairn", "--set", "log.retention.hours=0", "--set",
                  "log.retention.ms=5"};
    CHECK_EQ(cn_config_init(&cfg), 0);
    CHECK_EQ(cn_config_from_args(&cfg, 5, ok, err, sizeof err), 0);
    CHECK_EQ(cfg.log_retention_ms, 5);
    cn_config_fini(&cfg);
}

/* One change on a layer: 0 or the refusal (CN_CFG_REFUSE_*). */
static int dyn1(struct cn_config *cfg, enum cn_config_layer layer,
                const char *key, int op, const char *value)
{
    struct cn_config_change ch = {key, value, op};
    enum cn_config_refusal r = 0;
    int rc = cn_config_alter_dynamic(cfg, layer, &ch, 1, false, &r, err,
                                     sizeof err);
    return rc ? (int)r : 0;
}

UNIT_TEST(dynamic_layers_and_synonyms)
{
    struct cn_config cfg;
    struct cn_config_entry e;
    CHECK_EQ(cn_config_init(&cfg), 0);
    CHECK_EQ(cn_config_set(&cfg, "message.max.bytes", "3000", err,
                           sizeof err), 0);
    CHECK_EQ(dyn1(&cfg, CN_CFG_LAYER_DEFAULT, "message.max.bytes",
                  CN_CFG_OP_SET, "2000"), 0);
    CHECK_EQ(cfg.message_max_bytes, 2000);
    CHECK_EQ(dyn1(&cfg, CN_CFG_LAYER_BROKER, "message.max.bytes",
                  CN_CFG_OP_SET, " 1000 "), 0);
    CHECK_EQ(cfg.message_max_bytes, 1000);
    /* Kafka's order: per broker, default, static, built-in. */
    CHECK_EQ(cn_config_describe_key(&cfg, "message.max.bytes", &e), 0);
    CHECK(!strcmp(e.value, "1000"));
    CHECK_EQ(e.source, CN_CFG_SRC_DYNAMIC_BROKER);
    CHECK(!e.read_only);
    CHECK_EQ(e.syn_count, 4);
    int want_src[] = {CN_CFG_SRC_DYNAMIC_BROKER,
                      CN_CFG_SRC_DYNAMIC_DEFAULT_BROKER,
                      CN_CFG_SRC_STATIC_BROKER, CN_CFG_SRC_DEFAULT};
    const char *want_val[] = {"1000", "2000", "3000", "1048588"};
    for (int i = 0; i < 4 && i < e.syn_count; i++) {
        CHECK_EQ(e.syn[i].source, want_src[i]);
        CHECK(!strcmp(e.syn[i].value, want_val[i]));
        CHECK(!strcmp(e.syn[i].name, "message.max.bytes"));
    }
    /* The default layer alone, for resource "". */
    size_t nk = cn_config_key_count(), shown = 0;
    for (size_t i = 0; i < nk; i++)
        if (cn_config_describe_default(&cfg, i, &e) == 0) {
            shown++;
            CHECK(!strcmp(e.name, "message.max.bytes"));
            CHECK(!strcmp(e.value, "2000"));
            CHECK_EQ(e.source, CN_CFG_SRC_DYNAMIC_DEFAULT_BROKER);
        }
    CHECK_EQ(shown, 1);
    /* A delete goes back to the layer below, twice. */
    CHECK_EQ(dyn1(&cfg, CN_CFG_LAYER_BROKER, "message.max.bytes",
                  CN_CFG_OP_DELETE, NULL), 0);
    CHECK_EQ(cfg.message_max_bytes, 2000);
    CHECK_EQ(dyn1(&cfg, CN_CFG_LAYER_DEFAULT, "message.max.bytes",
                  CN_CFG_OP_DELETE, NULL), 0);
    CHECK_EQ(cfg.message_max_bytes, 3000);
    CHECK_EQ(cn_config_describe_key(&cfg, "message.max.bytes", &e), 0);
    CHECK_EQ(e.source, CN_CFG_SRC_STATIC_BROKER);
    /* Deleting what is not there is fine, as in Kafka. */
    CHECK_EQ(dyn1(&cfg, CN_CFG_LAYER_BROKER, "log.roll.ms",
                  CN_CFG_OP_DELETE, NULL), 0);

    /* A synonym group: a dynamic log.retention.ms wins over the hours
     * and is listed before them. */
    CHECK_EQ(dyn1(&cfg, CN_CFG_LAYER_DEFAULT, "log.retention.ms",
                  CN_CFG_OP_SET, "5000"), 0);
    CHECK_EQ(cfg.log_retention_ms, 5000);
    CHECK_EQ(cn_config_describe_key(&cfg, "log.retention.ms", &e), 0);
    CHECK_EQ(e.syn_count, 2);
    CHECK(!strcmp(e.syn[0].name, "log.retention.ms"));
    CHECK_EQ(e.syn[0].source, CN_CFG_SRC_DYNAMIC_DEFAULT_BROKER);
    CHECK(!strcmp(e.syn[1].name, "log.retention.hours"));
    CHECK_EQ(e.syn[1].source, CN_CFG_SRC_DEFAULT);
    /* The hours list starts at their own name: the ms before it drop. */
    CHECK_EQ(cn_config_describe_key(&cfg, "log.retention.hours", &e), 0);
    CHECK_EQ(e.syn_count, 1);
    CHECK(!strcmp(e.syn[0].name, "log.retention.hours"));
    /* A key without a value of its own anywhere lists no synonyms. */
    CHECK_EQ(cn_config_describe_key(&cfg, "log.roll.ms", &e), 0);
    CHECK(e.value == NULL);
    CHECK_EQ(e.syn_count, 0);

    /* Topics without an override follow after a rebase; overrides stay. */
    struct cn_topic_config tc, own;
    cn_topic_config_init_defaults(&tc, &cfg);
    cn_topic_config_init_defaults(&own, &cfg);
    CHECK_EQ(cn_topic_config_set(&own, "retention.ms", "77", err,
                                 sizeof err), 0);
    CHECK_EQ(dyn1(&cfg, CN_CFG_LAYER_BROKER, "log.retention.ms",
                  CN_CFG_OP_SET, "6000"), 0);
    cn_topic_config_rebase(&tc);
    cn_topic_config_rebase(&own);
    CHECK_EQ(tc.retention_ms, 6000);
    CHECK_EQ(own.retention_ms, 77);
    char buf[64];
    cn_topic_config_describe(&tc, CN_TOPIC_RETENTION_MS, buf, sizeof buf, &e);
    CHECK_EQ(e.source, CN_CFG_SRC_DYNAMIC_BROKER);
    cn_config_fini(&cfg);
}

UNIT_TEST(dynamic_refusals)
{
    struct cn_config cfg;
    CHECK_EQ(cn_config_init(&cfg), 0);
    /* Read-only keys, all named together, as Kafka does. */
    struct cn_config_change two[] = {
        {"num.partitions", "3", CN_CFG_OP_SET},
        {"log.dirs", "/x", CN_CFG_OP_SET},
    };
    enum cn_config_refusal r = 0;
    CHECK_EQ(cn_config_alter_dynamic(&cfg, CN_CFG_LAYER_BROKER, two, 2, false,
                                     &r, err, sizeof err), CN_EINVAL);
    CHECK_EQ(r, CN_CFG_REFUSE_REQUEST);
    CHECK(err_has("Cannot update these configs dynamically: "
                  "[num.partitions, log.dirs]", NULL));
    CHECK_EQ(cfg.num_partitions, 1);
    CHECK_EQ(dyn1(&cfg, CN_CFG_LAYER_DEFAULT, "transaction.max.timeout.ms",
                  CN_CFG_OP_SET, "1000"), CN_CFG_REFUSE_REQUEST);
    CHECK_EQ(dyn1(&cfg, CN_CFG_LAYER_BROKER, "foo.bar", CN_CFG_OP_SET, "1"),
             CN_CFG_REFUSE_CONFIG);
    CHECK(err_has("Unknown broker config: foo.bar", NULL));
    /* Kafka changes these at runtime; Cairn says why it cannot. */
    CHECK_EQ(dyn1(&cfg, CN_CFG_LAYER_BROKER, "num.io.threads", CN_CFG_OP_SET,
                  "4"), CN_CFG_REFUSE_CONFIG);
    CHECK(err_has("num.io.threads", "thread pool"));
    CHECK_EQ(dyn1(&cfg, CN_CFG_LAYER_BROKER, "listeners", CN_CFG_OP_SET,
                  "PLAINTEXT://:1"), CN_CFG_REFUSE_CONFIG);
    CHECK(err_has("listeners", "restart"));
    CHECK_EQ(dyn1(&cfg, CN_CFG_LAYER_DEFAULT, "listeners", CN_CFG_OP_SET,
                  "PLAINTEXT://:1"), CN_CFG_REFUSE_REQUEST);
    CHECK(err_has("at default cluster level, broker id must be specified",
                  "[listeners]"));
    /* Values: the config file's checks. */
    CHECK_EQ(dyn1(&cfg, CN_CFG_LAYER_BROKER, "message.max.bytes",
                  CN_CFG_OP_SET, "abc"), CN_CFG_REFUSE_REQUEST);
    CHECK(err_has("Invalid value abc for configuration message.max.bytes",
                  "not an integer"));
    CHECK_EQ(dyn1(&cfg, CN_CFG_LAYER_BROKER, "log.retention.ms",
                  CN_CFG_OP_SET, "-5"), CN_CFG_REFUSE_REQUEST);
    CHECK_EQ(dyn1(&cfg, CN_CFG_LAYER_BROKER, "log.retention.ms",
                  CN_CFG_OP_SET, "0"), CN_CFG_REFUSE_REQUEST);
    CHECK(err_has("unlimited (-1) or at least 1 ms", NULL));
    CHECK_EQ(cfg.log_retention_ms, 168LL * 3600 * 1000);
    CHECK_EQ(dyn1(&cfg, CN_CFG_LAYER_BROKER, "log.roll.ms", CN_CFG_OP_SET,
                  NULL), CN_CFG_REFUSE_REQUEST);
    CHECK(err_has("Null value not supported for : log.roll.ms", NULL));
    CHECK_EQ(dyn1(&cfg, CN_CFG_LAYER_BROKER, "log.retention.ms",
                  CN_CFG_OP_APPEND, "5"), CN_CFG_REFUSE_CONFIG);
    CHECK(err_has("append is not allowed for config key: log.retention.ms",
                  NULL));
    /* All or nothing: a bad second value leaves the first unapplied. */
    struct cn_config_change mixed[] = {
        {"message.max.bytes", "5000", CN_CFG_OP_SET},
        {"log.segment.bytes", "x", CN_CFG_OP_SET},
    };
    CHECK_EQ(cn_config_alter_dynamic(&cfg, CN_CFG_LAYER_BROKER, mixed, 2,
                                     false, &r, err, sizeof err), CN_EINVAL);
    CHECK_EQ(cfg.message_max_bytes, 1048588);
    struct cn_config_change dup[] = {
        {"message.max.bytes", "5000", CN_CFG_OP_SET},
        {"message.max.bytes", "6000", CN_CFG_OP_SET},
    };
    CHECK_EQ(cn_config_alter_dynamic(&cfg, CN_CFG_LAYER_BROKER, dup, 2,
                                     false, &r, err, sizeof err), CN_EINVAL);
    CHECK(err_has("duplicate config keys", NULL));
    cn_config_fini(&cfg);
}

UNIT_TEST(dynamic_serialize_round_trip)
{
    struct cn_config a, b, c;
    CHECK_EQ(cn_config_init(&a), 0);
    CHECK_EQ(dyn1(&a, CN_CFG_LAYER_BROKER, "log.retention.ms", CN_CFG_OP_SET,
                  "1000"), 0);
    CHECK_EQ(dyn1(&a, CN_CFG_LAYER_DEFAULT, "log.message.timestamp.type",
                  CN_CFG_OP_SET, "LogAppendTime"), 0);
    char *text = cn_config_dyn_serialize(&a);
    CHECK(text != NULL);
    CHECK(!strcmp(text, "broker.log.retention.ms=1000\n"
                        "default.log.message.timestamp.type=LogAppendTime\n"));
    CHECK_EQ(cn_config_init(&b), 0);
    CHECK_EQ(cn_config_dyn_parse(&b, text, "dyn", err, sizeof err), 0);
    CHECK_EQ(b.log_retention_ms, 1000);
    CHECK_EQ(b.log_message_timestamp_type, CN_TS_LOG_APPEND_TIME);
    /* A copy is deep: changing it leaves the original alone. */
    CHECK_EQ(cn_config_copy(&c, &b), 0);
    CHECK_EQ(dyn1(&c, CN_CFG_LAYER_BROKER, "log.retention.ms",
                  CN_CFG_OP_DELETE, NULL), 0);
    CHECK_EQ(b.log_retention_ms, 1000);
    cn_config_fini(&c);
    free(text);
    /* A damaged file names itself, the line and the reason. */
    CHECK_EQ(cn_config_dyn_parse(&b, "broker.log.retention.ms=1\n"
                                     "broker.num.partitions=3\n",
                                 "/d/dynamic-configs", err, sizeof err),
             CN_EINVAL);
    CHECK(err_has("/d/dynamic-configs:2:", "num.partitions"));
    CHECK_EQ(cn_config_dyn_parse(&b, "garbage\n", "/d/dynamic-configs", err,
                                 sizeof err), CN_EINVAL);
    CHECK(err_has("/d/dynamic-configs:1:", "garbage"));
    cn_config_fini(&a);
    cn_config_fini(&b);
}

/* Runs cn_config_from_args on "cairn --set a --set b ..." (NULL-ended);
 * returns its result, the config left in *cfg (fini by the caller). */
static int cluster_args(struct cn_config *cfg, const char *const *sets)
{
    char *argv[64];
    int argc = 0;
    argv[argc++] = "cairn";
    for (int i = 0; sets[i] && argc < 62; i++) {
        argv[argc++] = "--set";
        argv[argc++] = (char *)sets[i];
    }
    CHECK_EQ(cn_config_init(cfg), 0);
    return cn_config_from_args(cfg, argc, argv, err, sizeof err);
}

#define VOTERS3 \
    "controller.quorum.voters=1@127.0.0.1:19091,2@127.0.0.1:19092,3@h3:19093"

UNIT_TEST(cluster_mode_keys)
{
    struct cn_config cfg;
    /* Unset: a single node, nothing of the cluster checked or bound. */
    CHECK_EQ(cluster_args(&cfg, (const char *const[]){NULL}), 0);
    CHECK(!cfg.cluster_mode);
    CHECK(!cfg.controller_role);
    CHECK_EQ(cfg.controller_listener, -1);
    CHECK_EQ(cfg.broker_heartbeat_interval_ms, 2000);
    CHECK_EQ(cfg.broker_session_timeout_ms, 9000);
    CHECK_EQ(cfg.controller_quorum_election_timeout_ms, 1000);
    cn_config_fini(&cfg);

    /* A voter: its CONTROLLER listener is bound, on its voter port. */
    CHECK_EQ(cluster_args(&cfg,
                          (const char *const[]){
                              "node.id=2", "process.roles=broker,controller",
                              "listeners=PLAINTEXT://127.0.0.1:9092,"
                              "CONTROLLER://127.0.0.1:19092",
                              "controller.listener.names=CONTROLLER", VOTERS3,
                              "log.dirs=/tmp/x", NULL}),
             0);
    CHECK(cfg.cluster_mode && cfg.controller_role);
    CHECK_EQ(cfg.nlisteners, 2);
    CHECK_EQ(cfg.controller_listener, 1);
    CHECK_EQ(cfg.listener[1].proto, CN_SEC_PLAINTEXT);
    CHECK_EQ(cfg.nvoters, 3);
    CHECK_EQ(cfg.voters[2].id, 3);
    CHECK(!strcmp(cfg.voters[2].host, "h3"));
    CHECK_EQ(cfg.voters[2].port, 19093);
    CHECK(!strcmp(cfg.metadata_log_dir, "/tmp/x/__cluster_metadata-0"));
    cn_config_fini(&cfg);

    /* A standby (broker only) binds no controller listener. */
    CHECK_EQ(cluster_args(&cfg,
                          (const char *const[]){
                              "node.id=4", "process.roles=broker",
                              "listeners=PLAINTEXT://127.0.0.1:9094,"
                              "CONTROLLER://127.0.0.1:19094",
                              "controller.listener.names=CONTROLLER", VOTERS3,
                              "metadata.log.dir=/tmp/m", NULL}),
             0);
    CHECK(cfg.cluster_mode && !cfg.controller_role);
    CHECK_EQ(cfg.nlisteners, 1);
    CHECK(!strcmp(cfg.metadata_log_dir, "/tmp/m"));
    cn_config_fini(&cfg);

    /* Each bad value names its key and why. */
    static const struct {
        const char *sets[8];
        const char *key, *why;
    } bad[] = {
        {{"process.roles=controller", VOTERS3, NULL},
         "process.roles",
         "Cairn runs controllers inside brokers; use broker,controller"},
        {{"process.roles=broker,controller", "node.id=4", VOTERS3, NULL},
         "controller.quorum.voters",
         "does not include this node's id 4"},
        {{"process.roles=broker", "node.id=1", VOTERS3, NULL},
         "controller.quorum.voters",
         "includes this node's id 1"},
        {{"process.roles=broker", "node.id=4", NULL},
         "controller.quorum.voters",
         "must list the voters"},
        {{"process.roles=broker", "node.id=4",
          "controller.quorum.voters=1@h:1,1@h:2", NULL},
         "controller.quorum.voters",
         "appears twice"},
        {{"process.roles=broker", "node.id=4",
          "controller.quorum.voters=0@h:1", NULL},
         "controller.quorum.voters",
         ">= 1"},
        {{"process.roles=broker", "node.id=4", "controller.quorum.voters=1@h",
          NULL},
         "controller.quorum.voters",
         "id@host:port"},
        {{"process.roles=broker", "node.id=0", VOTERS3, NULL},
         "node.id",
         ">= 1"},
        {{"process.roles=broker", "node.id=4", VOTERS3,
          "authorizer.class.name=org.apache.kafka.metadata.authorizer."
          "StandardAuthorizer",
          NULL},
         "authorizer.class.name",
         "not yet supported in cluster mode"},
        {{"process.roles=broker", "node.id=4", VOTERS3,
          "broker.session.timeout.ms=2000", NULL},
         "broker.session.timeout.ms",
         "broker.heartbeat.interval.ms"},
        {{"controller.quorum.election.timeout.ms=99", NULL},
         "controller.quorum.election.timeout.ms",
         "100"},
        {{"process.roles=broker,controller", "node.id=1", VOTERS3,
          "listeners=PLAINTEXT://127.0.0.1:9092", NULL},
         "controller.listener.names",
         "CONTROLLER"},
        {{"process.roles=broker,controller", "node.id=1", VOTERS3,
          "listeners=PLAINTEXT://127.0.0.1:9092",
          "controller.listener.names=CONTROLLER", NULL},
         "controller.listener.names",
         "no listener of that name"},
        {{"process.roles=broker,controller", "node.id=1", VOTERS3,
          "listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://:19999",
          "controller.listener.names=CONTROLLER", NULL},
         "controller.listener.names",
         "port 19091"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        CHECK_EQ(cluster_args(&cfg, bad[i].sets), CN_EINVAL);
        CHECK(err_has(bad[i].key, bad[i].why));
        cn_config_fini(&cfg);
    }
}

UNIT_MAIN(defaults_match_kafka, table_defaults_all_parse, file_parsing,
          file_error_names_file_and_line, load_file_and_missing_file,
          set_overrides_file, unknown_key_named, bad_ints, enum_values,
          retention_precedence, aliases, kraft_server_properties_loads,
          listener_variants, listener_errors, listener_resolve,
          listener_prefixed_ssl_keys, topic_defaults_follow_broker,
          topic_validation, topic_serialize_round_trip, properties_escapes,
          help_lists_keys, unworkable_values_refused,
          dynamic_layers_and_synonyms, dynamic_refusals,
          dynamic_serialize_round_trip, cluster_mode_keys)
