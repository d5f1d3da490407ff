/*
 * dynconf.c - dynamic broker configs (KIP-226): applying a change to the
 * running broker, and keeping both layers in <data>/dynamic-configs.
 *
 * The rules (which keys, which layer, each value) are config.c's; this file
 * adds what needs the broker: the change must also leave valid defaults
 * for the topics (cn_topic_config_check), it is written to disk before it is applied,
 * and every topic without its own override then takes the new defaults.
 *
 * The file is properties text, one line per dynamic value:
 *
 *     broker.log.retention.ms=60000      the broker's own (node id) layer
 *     default.message.max.bytes=2000000  the cluster default ("") layer
 *
 * written whole to a temporary file, fsynced and renamed (cn_file_write_
 * atomic), so a crash leaves the old or the new version.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/say.h"
#include "node/broker_int.h"
#include "node/cleaner.h"
#include "log/file.h"
#include "proto/kerr.h"

#define DYN_FILE "dynamic-configs"

static void rebase_topic(struct cn_topic *t, void *arg)
{
    (void)arg;
    cn_topic_config_rebase(&t->config);
    cn_topic_apply_config(t);
}

/* The topic defaults cfg gives must be ones Cairn can honour. */
static int16_t check_topic_defaults(const struct cn_config *cfg, char *msg,
                                    size_t msg_len)
{
    struct cn_topic_config tc;
    cn_topic_config_init_defaults(&tc, cfg);
    return cn_topic_config_check(&tc, msg, msg_len);
}

static int16_t refusal_code(enum cn_config_refusal r)
{
    return r == CN_CFG_REFUSE_CONFIG ? KAFKA_INVALID_CONFIG
                                     : KAFKA_INVALID_REQUEST;
}

int16_t cn_broker_alter_dynamic(struct cn_broker *b,
                                enum cn_config_layer layer,
                                const struct cn_config_change *ch, size_t n,
                                bool replace_all, bool validate_only,
                                char *msg, size_t msg_len)
{
    struct cn_config trial;
    enum cn_config_refusal refusal = CN_CFG_REFUSE_REQUEST;
    if (cn_config_copy(&trial, b->cfg) != 0) {
        snprintf(msg, msg_len, "Out of memory.");
        return KAFKA_UNKNOWN_SERVER_ERROR;
    }
    int rc = cn_config_alter_dynamic(&trial, layer, ch, n, replace_all,
                                     &refusal, msg, msg_len);
    int16_t kerr = KAFKA_NONE;
    if (rc == CN_ENOMEM) {
        snprintf(msg, msg_len, "Out of memory.");
        kerr = KAFKA_UNKNOWN_SERVER_ERROR;
    } else if (rc) {
        kerr = refusal_code(refusal);
    } else {
        kerr = check_topic_defaults(&trial, msg, msg_len);
    }
    if (kerr || validate_only)
        goto out_trial;
    char *text = cn_config_dyn_serialize(&trial);
    if (!text) {
        snprintf(msg, msg_len, "Out of memory.");
        kerr = KAFKA_UNKNOWN_SERVER_ERROR;
        goto out_trial;
    }
    rc = cn_file_write_atomic(b->data_dir, DYN_FILE, text, strlen(text));
    free(text);
    if (rc) {
        CN_ERROR("cannot write %s/%s: %s", b->data_dir, DYN_FILE,
                 cn_strerror(rc));
        snprintf(msg, msg_len, "Cannot persist dynamic broker configs.");
        kerr = KAFKA_KAFKA_STORAGE_ERROR;
        goto out_trial;
    }
    /* The same change on the live config passes as it did on the copy;
     * only the layer's texts and typed fields change, so pointers others
     * hold into the static texts stay valid. */
    rc = cn_config_alter_dynamic(b->cfg, layer, ch, n, replace_all, &refusal,
                                 msg, msg_len);
    if (rc) {
        CN_ERROR("dynamic config change passed on a copy but not live: %s",
                 msg);
        kerr = KAFKA_UNKNOWN_SERVER_ERROR;
        goto out_trial;
    }
    cn_topics_foreach(b, rebase_topic, NULL);
    cn_cleaner_config_changed(b);
    cn_broker_warn_config(b->cfg);
    CN_INFO("dynamic broker configs changed (%s layer, %zu keys)",
            layer == CN_CFG_LAYER_DEFAULT ? "cluster default" : "broker", n);
out_trial:
    cn_config_fini(&trial);
    return kerr;
}

int cn_broker_dynconf_load(struct cn_broker *b, char *err, size_t err_len)
{
    char path[4200], why[1024];
    snprintf(path, sizeof path, "%s/%s", b->data_dir, DYN_FILE);
    FILE *f = fopen(path, "rb");
    if (!f) {
        if (errno == ENOENT)
            return 0;
        snprintf(err, err_len, "cannot read %s: %s", path, strerror(errno));
        return -errno;
    }
    fclose(f);
    /* A file of ours that does not parse is refused, not skipped: the
     * broker would otherwise run with settings its operator changed. */
    if (cn_config_load_file_with(b->cfg, path, cn_config_dyn_parse, why,
                                 sizeof why) != 0) {
        snprintf(err, err_len,
                 "dynamic broker configs %s are unreadable (%s); fix or "
                 "remove the file (its values are lost) and restart",
                 path, why);
        return CN_ECORRUPT;
    }
    int16_t kerr = check_topic_defaults(b->cfg, why, sizeof why);
    if (kerr) {
        snprintf(err, err_len, "dynamic broker configs %s: %s", path, why);
        return CN_EINVAL;
    }
    return 0;
}

void cn_broker_warn_config(const struct cn_config *cfg)
{
    /* Settings Kafka accepts too, that leave part of the broker unable to
     * work on one node: said loudly, at start and after a dynamic change. */
    if (cfg->min_insync_replicas > 1)
        CN_WARN("min.insync.replicas=%d: this single broker is one in-sync "
                "replica, so every acks=all produce to a topic without its "
                "own min.insync.replicas=1 is refused with "
                "NOT_ENOUGH_REPLICAS",
                (int)cfg->min_insync_replicas);
    if (cfg->socket_request_max_bytes < cfg->message_max_bytes)
        CN_WARN("socket.request.max.bytes=%d is below message.max.bytes=%d: "
                "a produce request carrying a batch near message.max.bytes "
                "closes its connection",
                (int)cfg->socket_request_max_bytes,
                (int)cfg->message_max_bytes);
}
