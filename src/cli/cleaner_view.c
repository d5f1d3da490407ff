/*
 * cleaner_view.c - the log cleaner's state per compacted partition for
 * `cairnctl topics describe`, read from Cairn's /metrics: Kafka has no API
 * for it.  The endpoint is --metrics-url, else the broker's http.listener
 * (DescribeConfigs of the broker), with the broker's advertised host when
 * it listens on every interface.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/http_get.h"
#include "cli/prom.h"

#define RESOURCE_BROKER 4

/* http.listener of node (its first entry), into out; false with why in
 * note. */
static bool http_listener(struct ctx *x, const struct cn_metadata_response *md,
                          int32_t node, char *out, size_t cap, char *note,
                          size_t note_size)
{
    struct cn_kclient *c = cli_node_conn(x, md, node);
    if (!c) {
        snprintf(note, note_size, "cannot connect to broker %d", node);
        return false;
    }
    int16_t v = cn_kclient_version(c, CN_API_DESCRIBE_CONFIGS);
    if (v < 0) {
        snprintf(note, note_size, "the broker has no DescribeConfigs");
        return false;
    }
    char name[16];
    snprintf(name, sizeof name, "%" PRId32, node);
    struct cn_bytes key = cn_bytes_str("http.listener");
    struct cn_describe_configs_request_describe_configs_resource r = {
        .resource_type = RESOURCE_BROKER,
        .resource_name = cn_bytes_str(name),
        .configuration_keys = &key,
        .configuration_keys_len = 1,
    };
    struct cn_describe_configs_request rq;
    struct cn_describe_configs_response rs;
    cn_describe_configs_request_init(&rq);
    rq.resources = &r;
    rq.resources_len = 1;
    if (cli_call(c, CN_API_DESCRIBE_CONFIGS, v, &rq, &rs, &x->arena)) {
        snprintf(note, note_size, "DescribeConfigs of broker %d failed",
                 node);
        return false;
    }
    for (int32_t i = 0; i < rs.results_len; i++) {
        const struct cn_describe_configs_response_describe_configs_result
            *res = &rs.results[i];
        for (int32_t j = 0; !res->error_code && j < res->configs_len; j++) {
            const struct
                cn_describe_configs_response_describe_configs_resource_result
                    *e = &res->configs[j];
            if (!cn_bytes_eq_str(e->name, "http.listener"))
                continue;
            if (e->value.len <= 0) {
                snprintf(note, note_size, "the metrics endpoint of broker "
                         "%d is off (http.listener is empty)", node);
                return false;
            }
            if ((size_t)e->value.len >= cap) {
                snprintf(note, note_size, "broker %d has an overlong "
                         "http.listener", node);
                return false;
            }
            memcpy(out, e->value.ptr, (size_t)e->value.len);
            out[e->value.len] = '\0';
            out[strcspn(out, ",")] = '\0';
            return true;
        }
    }
    snprintf(note, note_size, "broker %d does not report http.listener "
             "(not Cairn?); give --metrics-url", node);
    return false;
}

/* Where node's metrics are: false with why in note. */
static bool metrics_url(struct ctx *x, const struct cn_metadata_response *md,
                        int32_t node, struct cli_url *u, char *note,
                        size_t note_size)
{
    char err[512], listener[512];
    if (x->o->metrics_url) {
        if (cli_url_parse(x->o->metrics_url, u, err, sizeof err) == 0)
            return true;
        snprintf(note, note_size, "bad --metrics-url %s", err);
        return false;
    }
    if (!http_listener(x, md, node, listener, sizeof listener, note,
                       note_size))
        return false;
    /* A listener may carry a NAME:// prefix like Kafka's listeners. */
    const char *hp = strstr(listener, "://");
    hp = hp ? hp + 3 : listener;
    if (cli_url_parse(hp, u, err, sizeof err) != 0) {
        snprintf(note, note_size, "broker %d: http.listener %s", node, err);
        return false;
    }
    /* Listening on every interface: reach it where the broker is
     * advertised. */
    if (!u->host[0] || strcmp(u->host, "0.0.0.0") == 0 ||
        strcmp(u->host, "::") == 0) {
        for (int32_t i = 0; i < md->brokers_len; i++) {
            const struct cn_bytes h = md->brokers[i].host;
            if (md->brokers[i].node_id != node || h.len <= 0 ||
                (size_t)h.len >= sizeof u->host)
                continue;
            memcpy(u->host, h.ptr, (size_t)h.len);
            u->host[h.len] = '\0';
        }
    }
    return true;
}

void cli_cleaner_view_load(struct ctx *x, const struct cn_metadata_response *md,
                           int32_t node, struct cli_cleaner_view *cv)
{
    struct cli_url u;
    char err[600];

    memset(cv, 0, sizeof *cv);
    if (!metrics_url(x, md, node, &u, cv->note, sizeof cv->note))
        return;
    snprintf(cv->url, sizeof cv->url, "http://%s%s%s:%d%s",
             strchr(u.host, ':') ? "[" : "", u.host,
             strchr(u.host, ':') ? "]" : "", u.port, u.path);
    if (cli_http_get(&u, x->o->timeout_ms, &cv->body, &cv->len, err,
                     sizeof err) != 0) {
        snprintf(cv->note, sizeof cv->note, "cannot read the metrics "
                 "endpoint: %s", err);
        return;
    }
    /* Another server answering: say so rather than show nothing. */
    size_t pos = 0;
    struct cli_prom_sample s;
    bool cairn = false;
    while (!cairn && cli_prom_next(cv->body, cv->len, &pos, &s))
        cairn = cli_prom_is(&s, "cairn_cleaner_threads");
    if (!cairn) {
        snprintf(cv->note, sizeof cv->note, "%s has no cairn_cleaner_* "
                 "metrics", cv->url);
        free(cv->body);
        cv->body = NULL;
        cv->len = 0;
    }
}

void cli_cleaner_view_fini(struct cli_cleaner_view *cv)
{
    free(cv->body);
    cv->body = NULL;
}

/* A gauge's value as an offset or a duration; -1 for what is none (NaN,
 * out of range: the text came off the network). */
static int64_t as_int64(double v)
{
    return v >= 0 && v < 9.2e18 ? (int64_t)v : -1;
}

/* Whether s has topic and partition as its labels. */
static bool is_partition(const struct cli_prom_sample *s, struct cn_bytes topic,
                         int32_t partition)
{
    char t[512], p[16], want[16];
    if (!cli_prom_label(s, "topic", t, sizeof t) ||
        !cli_prom_label(s, "partition", p, sizeof p))
        return false;
    snprintf(want, sizeof want, "%" PRId32, partition);
    return cn_bytes_eq_str(topic, t) && strcmp(p, want) == 0;
}

void cli_cleaner_part_get(const struct cli_cleaner_view *cv,
                          struct cn_bytes topic, int32_t partition,
                          struct cli_cleaner_part *out)
{
    size_t pos = 0;
    struct cli_prom_sample s;

    memset(out, 0, sizeof *out);
    out->checkpoint = -1;
    out->since_last_pass_ms = -1;
    while (cv->body && cli_prom_next(cv->body, cv->len, &pos, &s)) {
        if (s.name_len < 23 || memcmp(s.name, "cairn_cleaner_partition", 23) ||
            !is_partition(&s, topic, partition))
            continue;
        if (cli_prom_is(&s, "cairn_cleaner_partition_dirty_ratio")) {
            out->have = true;
            out->dirty_ratio = s.value;
        } else if (cli_prom_is(&s,
                               "cairn_cleaner_partition_first_dirty_offset")) {
            out->checkpoint = as_int64(s.value);
        } else if (cli_prom_is(
                       &s, "cairn_cleaner_partition_time_since_last_pass_ms")) {
            out->since_last_pass_ms = as_int64(s.value);
        } else if (cli_prom_is(&s, "cairn_cleaner_partition_last_error") &&
                   s.value == 1) {
            if (!cli_prom_label(&s, "error", out->error, sizeof out->error))
                snprintf(out->error, sizeof out->error, "(unreadable)");
        }
    }
}
