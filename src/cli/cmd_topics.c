/*
 * cmd_topics.c - cairnctl topics list|describe|create|delete|alter and
 * configs describe|alter, modelled on kafka-topics.sh and kafka-configs.sh.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/err.h"
#include "cli/cli.h"
#include "proto/kerr.h"

/* ---- topics list -----------------------------------------------------------
 */

int cmd_topics_list(struct ctx *x)
{
    struct cn_metadata_response rs;
    struct cn_metadata_response_metadata_response_topic **v;
    int32_t n;
    char id[23];

    if (cli_fetch_metadata(x, NULL, &rs))
        return EXIT_FAIL;
    v = cli_sorted_topics(x, &rs, &n);
    if (!v) {
        fprintf(stderr, "cairnctl: out of memory\n");
        return EXIT_FAIL;
    }
    if (x->o->json)
        putchar('[');
    for (int32_t i = 0; i < n; i++) {
        if (!x->o->json) {
            cli_put_bytes(v[i]->name);
            putchar('\n');
            continue;
        }
        cli_uuid_text(&v[i]->topic_id, id);
        printf("%s{\"name\":", i ? "," : "");
        cli_json_bytes(stdout, v[i]->name);
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
    int16_t v = cn_kclient_version(&x->boot, CN_API_DESCRIBE_CONFIGS);
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
    if (cli_call(&x->boot, CN_API_DESCRIBE_CONFIGS, v, &rq, out, &x->arena))
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

/* A user topic the log cleaner cleans (cleanup.policy has compact); the
 * internal topics compact by checkpoint instead, see cleaner.h. */
static bool is_compacted(
    const struct cn_metadata_response_metadata_response_topic *t,
    const struct cn_describe_configs_response_describe_configs_result *cr)
{
    for (int32_t i = 0; !t->is_internal && cr && !cr->error_code &&
                        i < cr->configs_len; i++) {
        struct cn_bytes v = cr->configs[i].value;
        if (!cn_bytes_eq_str(cr->configs[i].name, "cleanup.policy") ||
            v.len <= 0)
            continue;
        for (int32_t j = 0; j + 7 <= v.len; j++)
            if (memcmp(v.ptr + j, "compact", 7) == 0)
                return true;
    }
    return false;
}

static void cleaner_text(const struct cli_cleaner_view *cv,
                         struct cn_bytes topic, int32_t partition)
{
    struct cli_cleaner_part cp;
    cli_cleaner_part_get(cv, topic, partition, &cp);
    if (!cp.have)
        return;
    printf("\tCleanerDirtyRatio: %.3f\tCleanerCheckpoint: %" PRId64
           "\tCleanerLastPassMsAgo: ",
           cp.dirty_ratio, cp.checkpoint);
    if (cp.since_last_pass_ms < 0)
        fputs("never", stdout);
    else
        printf("%" PRId64, cp.since_last_pass_ms);
    fputs("\tCleanerLastError: ", stdout);
    fputs(cp.error[0] ? cp.error : "none", stdout);
}

static void cleaner_json(const struct cli_cleaner_view *cv,
                         struct cn_bytes topic, int32_t partition)
{
    struct cli_cleaner_part cp;
    cli_cleaner_part_get(cv, topic, partition, &cp);
    fputs(",\"cleaner\":", stdout);
    if (!cp.have) {
        fputs("null", stdout);
        return;
    }
    if (isfinite(cp.dirty_ratio))
        printf("{\"dirty_ratio\":%.6g", cp.dirty_ratio);
    else
        fputs("{\"dirty_ratio\":null", stdout);
    printf(",\"checkpoint\":%" PRId64 ",\"ms_since_last_pass\":",
           cp.checkpoint);
    if (cp.since_last_pass_ms < 0)
        fputs("null", stdout);
    else
        printf("%" PRId64, cp.since_last_pass_ms);
    fputs(",\"last_error\":", stdout);
    if (cp.error[0])
        cli_json_str(stdout, cp.error);
    else
        fputs("null", stdout);
    putchar('}');
}

/* kafka-topics --describe's filters: with --under-replicated-partitions
 * only partitions whose ISR is smaller than their replica set, with
 * --unavailable-partitions only those without a live leader; without
 * either, every partition. */
static bool filtered(const struct opts *o)
{
    return o->seen & (OPT_UNDER_REPLICATED | OPT_UNAVAILABLE);
}

static bool partition_shown(
    const struct opts *o,
    const struct cn_metadata_response_metadata_response_partition *pp)
{
    if (!filtered(o))
        return true;
    if ((o->seen & OPT_UNDER_REPLICATED) &&
        pp->isr_nodes_len < pp->replica_nodes_len)
        return true;
    return (o->seen & OPT_UNAVAILABLE) && pp->leader_id < 0;
}

static void describe_one_text(
    const struct opts *o,
    const struct cn_metadata_response_metadata_response_topic *t,
    const struct cn_describe_configs_response_describe_configs_result *cr,
    int16_t cv, const struct cli_cleaner_view *clv)
{
    char id[23];
    int rf = t->partitions_len > 0 && t->partitions[0].replica_nodes_len > 0
                 ? t->partitions[0].replica_nodes_len
                 : 0;
    int printed = 0;

    cli_uuid_text(&t->topic_id, id);
    /* Filtered, kafka-topics prints the matching partitions alone. */
    if (filtered(o))
        goto partitions;
    fputs("Topic: ", stdout);
    cli_put_bytes(t->name);
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
        cli_put_bytes(e->name);
        putchar('=');
        if (e->is_sensitive)
            fputs("(sensitive)", stdout);
        else
            cli_put_bytes(e->value);
    }
    putchar('\n');
partitions:
    for (int32_t p = 0; p < t->partitions_len; p++) {
        const struct cn_metadata_response_metadata_response_partition *pp =
            &t->partitions[p];
        if (!partition_shown(o, pp))
            continue;
        fputs("\tTopic: ", stdout);
        cli_put_bytes(t->name);
        printf("\tPartition: %d\tLeader: ", pp->partition_index);
        if (pp->leader_id < 0)
            fputs("none", stdout);
        else
            printf("%d", pp->leader_id);
        fputs("\tReplicas: ", stdout);
        cli_text_ints(pp->replica_nodes, pp->replica_nodes_len);
        fputs("\tIsr: ", stdout);
        cli_text_ints(pp->isr_nodes, pp->isr_nodes_len);
        /* kafka-topics leaves it out; an operator following a failover
         * wants to see that the leadership changed. */
        if (pp->leader_epoch >= 0)
            printf("\tLeader epoch: %d", pp->leader_epoch);
        if (pp->offline_replicas_len > 0) {
            fputs("\tOffline: ", stdout);
            cli_text_ints(pp->offline_replicas, pp->offline_replicas_len);
        }
        if (pp->error_code)
            printf("\tError: %s", cn_kerr_name(pp->error_code));
        if (clv)
            cleaner_text(clv, t->name, pp->partition_index);
        putchar('\n');
    }
}

static void describe_one_json(
    const struct opts *o,
    const struct cn_metadata_response_metadata_response_topic *t,
    const struct cn_describe_configs_response_describe_configs_result *cr,
    int16_t cv, const struct cli_cleaner_view *clv)
{
    char id[23];
    int rf = t->partitions_len > 0 && t->partitions[0].replica_nodes_len > 0
                 ? t->partitions[0].replica_nodes_len
                 : 0;
    int printed = 0;

    cli_uuid_text(&t->topic_id, id);
    fputs("{\"name\":", stdout);
    cli_json_bytes(stdout, t->name);
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
        cli_json_bytes(stdout, e->name);
        putchar(':');
        cli_json_bytes(stdout, e->value);
    }
    fputs("},\"partition_info\":[", stdout);
    int shown = 0;
    for (int32_t p = 0; p < t->partitions_len; p++) {
        const struct cn_metadata_response_metadata_response_partition *pp =
            &t->partitions[p];
        if (!partition_shown(o, pp))
            continue;
        printf("%s{\"partition\":%d,\"leader\":%d,\"leader_epoch\":%d,"
               "\"under_replicated\":%s,\"replicas\":",
               shown++ ? "," : "", pp->partition_index, pp->leader_id,
               pp->leader_epoch,
               pp->isr_nodes_len < pp->replica_nodes_len ? "true" : "false");
        cli_json_ints(pp->replica_nodes, pp->replica_nodes_len);
        fputs(",\"isr\":", stdout);
        cli_json_ints(pp->isr_nodes, pp->isr_nodes_len);
        fputs(",\"offline_replicas\":", stdout);
        cli_json_ints(pp->offline_replicas, pp->offline_replicas_len);
        printf(",\"error\":");
        if (pp->error_code)
            cli_json_str(stdout, cn_kerr_name(pp->error_code));
        else
            fputs("null", stdout);
        if (clv)
            cleaner_json(clv, t->name, pp->partition_index);
        putchar('}');
    }
    putchar(']');
    if (clv) {
        fputs(",\"cleaner_note\":", stdout);
        if (clv->note[0])
            cli_json_str(stdout, clv->note);
        else
            fputs("null", stdout);
    }
    putchar('}');
}

int cmd_topics_describe(struct ctx *x)
{
    struct cn_metadata_response rs;
    struct cn_describe_configs_response crs;
    bool have_configs = false;
    const char **names;
    struct cn_metadata_response_metadata_response_topic **v;
    int32_t n;
    int16_t cv = 0;
    int rc;

    if (cli_fetch_metadata(x, x->o->topic, &rs))
        return EXIT_FAIL;
    if (x->o->topic) {
        if (rs.topics_len < 1)
            return cli_topic_error(x->o, "cannot describe topic", x->o->topic,
                               KAFKA_UNKNOWN_TOPIC_OR_PARTITION, CN_BYTES_NULL);
        if (rs.topics[0].error_code)
            return cli_topic_error(x->o, "cannot describe topic", x->o->topic,
                               rs.topics[0].error_code, CN_BYTES_NULL);
    }
    v = cli_sorted_topics(x, &rs, &n);
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
    /* The cleaner state, when a compacted topic is shown: from the
     * metrics of the broker leading its first partition (one node). */
    struct cli_cleaner_view view;
    bool want_view = false;
    int32_t node = -1;
    memset(&view, 0, sizeof view);
    for (int32_t i = 0; i < n && !want_view; i++) {
        const struct cn_describe_configs_response_describe_configs_result *cr =
            have_configs ? find_result(&crs, v[i]->name) : NULL;
        if (!is_compacted(v[i], cr))
            continue;
        want_view = true;
        node = v[i]->partitions_len > 0 ? v[i]->partitions[0].leader_id : -1;
    }
    if (want_view) {
        if (node < 0 && rs.brokers_len > 0)
            node = rs.brokers[0].node_id;
        cli_cleaner_view_load(x, &rs, node, &view);
        /* A note, not a failure: the describe itself worked. */
        if (view.note[0])
            fprintf(stderr, "cairnctl: note: cleaner state not shown: %s\n",
                    view.note);
    }
    if (x->o->json)
        putchar('[');
    for (int32_t i = 0; i < n; i++) {
        const struct cn_describe_configs_response_describe_configs_result *cr =
            have_configs ? find_result(&crs, v[i]->name) : NULL;
        const struct cli_cleaner_view *clv =
            is_compacted(v[i], cr) ? &view : NULL;
        if (x->o->json) {
            if (i)
                putchar(',');
            describe_one_json(x->o, v[i], cr, cv, clv);
        } else {
            describe_one_text(x->o, v[i], cr, cv, clv);
        }
    }
    if (x->o->json)
        puts("]");
    cli_cleaner_view_fini(&view);
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

/*
 * The one-topic answer of an admin request: EXIT_FAIL when the response
 * has no result or names an error (reported as cli_topic_error does), else
 * 0 and the caller prints its success line.
 */
static int topic_result(const struct opts *o, const char *api, int32_t len,
                        const char *what, int16_t code, struct cn_bytes msg)
{
    if (len < 1) {
        fprintf(stderr, "cairnctl: %s response has no result\n", api);
        return EXIT_FAIL;
    }
    if (code)
        return cli_topic_error(o, what, o->topic, code, msg);
    return 0;
}

int cmd_topics_create(struct ctx *x)
{
    const struct opts *o = x->o;
    struct cn_create_topics_request rq;
    struct cn_create_topics_request_creatable_topic t;
    struct cn_create_topics_response rs;
    struct cn_kclient *c;
    const struct cn_create_topics_response_creatable_topic_result *r;
    int16_t v;
    char id[23];

    c = cli_admin_conn(x);
    if (!c)
        return EXIT_FAIL;
    v = cli_need_version(c, CN_API_CREATE_TOPICS, "CreateTopics");
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
    rq.timeout_ms = cli_admin_timeout(o);
    rq.validate_only = false;
    if (cli_call(c, CN_API_CREATE_TOPICS, v, &rq, &rs, &x->arena))
        return EXIT_FAIL;
    if (rs.topics_len < 1 || rs.topics[0].error_code)
        return topic_result(o, "CreateTopics", rs.topics_len,
                            "cannot create topic",
                            rs.topics_len ? rs.topics[0].error_code : 0,
                            rs.topics_len ? rs.topics[0].error_message
                                          : CN_BYTES_NULL);
    r = &rs.topics[0];
    if (!o->json) {
        printf("Created topic %s.\n", o->topic);
        return 0;
    }
    cli_uuid_text(&r->topic_id, id);
    fputs("{\"topic\":", stdout);
    cli_json_str(stdout, o->topic);
    printf(",\"created\":true,\"topic_id\":\"%s\"", id);
    /* Partition count and factor are only reported from v5. */
    if (v >= 5)
        printf(",\"partitions\":%d,\"replication_factor\":%d",
               r->num_partitions, r->replication_factor);
    puts("}");
    return 0;
}

int cmd_topics_delete(struct ctx *x)
{
    const struct opts *o = x->o;
    struct cn_delete_topics_request rq;
    struct cn_delete_topics_request_delete_topic_state t;
    struct cn_delete_topics_response rs;
    struct cn_bytes name = cn_bytes_str(o->topic);
    struct cn_kclient *c;
    int16_t v;

    c = cli_admin_conn(x);
    if (!c)
        return EXIT_FAIL;
    v = cli_need_version(c, CN_API_DELETE_TOPICS, "DeleteTopics");
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
    rq.timeout_ms = cli_admin_timeout(o);
    if (cli_call(c, CN_API_DELETE_TOPICS, v, &rq, &rs, &x->arena))
        return EXIT_FAIL;
    if (rs.responses_len < 1 ||
        rs.responses[0].error_code)
        return topic_result(o, "DeleteTopics", rs.responses_len,
                            "cannot delete topic",
                            rs.responses_len ? rs.responses[0].error_code : 0,
                            rs.responses_len ? rs.responses[0].error_message
                                             : CN_BYTES_NULL);
    if (o->json) {
        fputs("{\"topic\":", stdout);
        cli_json_str(stdout, o->topic);
        puts(",\"deleted\":true}");
    } else {
        printf("Deleted topic %s.\n", o->topic);
    }
    return 0;
}

int cmd_topics_alter(struct ctx *x)
{
    const struct opts *o = x->o;
    struct cn_create_partitions_request rq;
    struct cn_create_partitions_request_create_partitions_topic t;
    struct cn_create_partitions_response rs;
    struct cn_kclient *c;
    int16_t v;

    c = cli_admin_conn(x);
    if (!c)
        return EXIT_FAIL;
    v = cli_need_version(c, CN_API_CREATE_PARTITIONS, "CreatePartitions");
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
    rq.timeout_ms = cli_admin_timeout(o);
    rq.validate_only = false;
    if (cli_call(c, CN_API_CREATE_PARTITIONS, v, &rq, &rs, &x->arena))
        return EXIT_FAIL;
    if (rs.results_len < 1 || rs.results[0].error_code)
        return topic_result(o, "CreatePartitions", rs.results_len,
                            "cannot alter topic",
                            rs.results_len ? rs.results[0].error_code : 0,
                            rs.results_len ? rs.results[0].error_message
                                           : CN_BYTES_NULL);
    if (o->json) {
        fputs("{\"topic\":", stdout);
        cli_json_str(stdout, o->topic);
        printf(",\"partitions\":%d}\n", o->partitions);
    } else {
        printf("Altered partition count of topic %s to %d.\n", o->topic,
               o->partitions);
    }
    return 0;
}

/* ---- configs
 * ----------------------------------------------------------------- */

int cmd_configs_describe(struct ctx *x)
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
        return cli_topic_error(o, "cannot describe configs of topic", name,
                           r->error_code, r->error_message);
    if (o->json) {
        fputs("{\"topic\":", stdout);
        cli_json_str(stdout, name);
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
            cli_json_bytes(stdout, e->name);
            fputs(",\"value\":", stdout);
            cli_json_bytes(stdout, e->value);
            printf(",\"source\":\"%s\",\"default\":%s,\"read_only\":%s,"
                   "\"sensitive\":%s}",
                   cli_config_source_name(e->config_source),
                   e->is_default ? "true" : "false",
                   e->read_only ? "true" : "false",
                   e->is_sensitive ? "true" : "false");
            continue;
        }
        fputs("  ", stdout);
        cli_put_bytes(e->name);
        putchar('=');
        if (e->is_sensitive)
            fputs("(sensitive)", stdout);
        else
            cli_put_bytes(e->value);
        printf(" sensitive=%s source=%s\n", e->is_sensitive ? "true" : "false",
               cli_config_source_name(e->config_source));
    }
    if (o->json)
        puts("]}");
    return 0;
}

int cmd_configs_alter(struct ctx *x)
{
    const struct opts *o = x->o;
    struct cn_incremental_alter_configs_request rq;
    struct cn_incremental_alter_configs_request_alter_configs_resource res;
    struct cn_incremental_alter_configs_response rs;
    struct cn_kclient *c;
    struct cn_incremental_alter_configs_request_alterable_config *cf;
    int16_t v;
    int n = 0;

    c = cli_admin_conn(x);
    if (!c)
        return EXIT_FAIL;
    v = cli_need_version(c, CN_API_INCREMENTAL_ALTER_CONFIGS,
                     "IncrementalAlterConfigs");
    if (v < 0)
        return EXIT_FAIL;
    cf = cn_arena_calloc(&x->arena, (size_t)o->nsets + (size_t)o->ndeletes,
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
    if (cli_call(c, CN_API_INCREMENTAL_ALTER_CONFIGS, v, &rq, &rs, &x->arena))
        return EXIT_FAIL;
    if (rs.responses_len < 1 || rs.responses[0].error_code)
        return topic_result(o, "IncrementalAlterConfigs", rs.responses_len,
                            "cannot alter configs of topic",
                            rs.responses_len ? rs.responses[0].error_code : 0,
                            rs.responses_len ? rs.responses[0].error_message
                                             : CN_BYTES_NULL);
    if (o->json) {
        fputs("{\"topic\":", stdout);
        cli_json_str(stdout, o->topic);
        puts(",\"altered\":true}");
    } else {
        printf("Completed updating config for topic %s.\n", o->topic);
    }
    return 0;
}
