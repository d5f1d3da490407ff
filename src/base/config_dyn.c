/*
 * Dynamic broker configuration (KIP-226): the per-broker and cluster-
 * default layers over the static configuration, which keys each layer
 * takes, applying a change whole or not at all, and the layers' file
 * text.  Declared in config.h with the rest of the module.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "config_int.h"
#include "err.h"

/* ---- Dynamic broker configuration ---- */

enum dyn_class {
    DYN_CLUSTER,    /* Kafka: per broker or cluster default; Cairn applies */
    DYN_CANNOT,     /* Kafka: dynamic; Cairn cannot apply it at runtime */
    DYN_PER_BROKER, /* Kafka: per broker only; Cairn cannot apply it */
};

struct dyn_row {
    const char *name;
    enum dyn_class cls;
    const char *why; /* DYN_CANNOT, DYN_PER_BROKER: the reason */
};

#define NO_POOL "Cairn serves everything from one event loop and has no " \
                "thread pool to resize"
#define NO_REBIND "Cairn binds its listener once at start: change it in " \
                  "the properties file and restart"

/*
 * Kafka 4.4's dynamic keys (DynamicBrokerConfig: DynamicLogConfig's topic
 * synonyms, DynamicProducerStateManagerConfig, the thread pools, the
 * listeners) that Cairn's key table has.  Every other key in the table is
 * read-only, as in Kafka.  The topic synonyms take effect on every topic
 * without its own override (the broker rebases them after a change); the
 * others are read where they are used.
 */
static const struct dyn_row dyn_rows[] = {
    {"compression.gzip.level", DYN_CLUSTER, NULL},
    {"compression.lz4.level", DYN_CLUSTER, NULL},
    {"compression.type", DYN_CLUSTER, NULL},
    {"compression.zstd.level", DYN_CLUSTER, NULL},
    {"listener.security.protocol.map", DYN_PER_BROKER, NO_REBIND},
    {"listeners", DYN_PER_BROKER, NO_REBIND},
    {"log.cleaner.backoff.ms", DYN_CLUSTER, NULL},
    {"log.cleaner.dedupe.buffer.size", DYN_CLUSTER, NULL},
    {"log.cleaner.delete.retention.ms", DYN_CLUSTER, NULL},
    {"log.cleaner.io.max.bytes.per.second", DYN_CLUSTER, NULL},
    {"log.cleaner.max.compaction.lag.ms", DYN_CLUSTER, NULL},
    {"log.cleaner.min.cleanable.ratio", DYN_CLUSTER, NULL},
    {"log.cleaner.min.compaction.lag.ms", DYN_CLUSTER, NULL},
    {"log.cleaner.threads", DYN_CANNOT,
     "Cairn starts its cleaner threads once: change it in the properties "
     "file and restart"},
    {"log.cleanup.policy", DYN_CLUSTER, NULL},
    {"log.flush.interval.messages", DYN_CLUSTER, NULL},
    {"log.flush.interval.ms", DYN_CLUSTER, NULL},
    {"log.index.interval.bytes", DYN_CLUSTER, NULL},
    {"log.index.size.max.bytes", DYN_CLUSTER, NULL},
    {"log.message.timestamp.after.max.ms", DYN_CLUSTER, NULL},
    {"log.message.timestamp.before.max.ms", DYN_CLUSTER, NULL},
    {"log.message.timestamp.difference.max.ms", DYN_CLUSTER, NULL},
    {"log.message.timestamp.type", DYN_CLUSTER, NULL},
    {"log.preallocate", DYN_CLUSTER, NULL},
    {"log.retention.bytes", DYN_CLUSTER, NULL},
    {"log.retention.ms", DYN_CLUSTER, NULL},
    {"log.roll.jitter.ms", DYN_CLUSTER, NULL},
    {"log.roll.ms", DYN_CLUSTER, NULL},
    {"log.segment.bytes", DYN_CLUSTER, NULL},
    {"log.segment.delete.delay.ms", DYN_CLUSTER, NULL},
    {"message.max.bytes", DYN_CLUSTER, NULL},
    {"min.insync.replicas", DYN_CLUSTER, NULL},
    {"num.io.threads", DYN_CANNOT, NO_POOL},
    {"num.network.threads", DYN_CANNOT, NO_POOL},
    {"num.recovery.threads.per.data.dir", DYN_CANNOT,
     "Cairn recovers its logs on one thread, at start only"},
    {"producer.id.expiration.ms", DYN_CLUSTER, NULL},
    {"transaction.partition.verification.enable", DYN_CLUSTER, NULL},
    {"unclean.leader.election.enable", DYN_CLUSTER, NULL},
};

static const struct dyn_row *dyn_row(const char *name)
{
    for (size_t i = 0; i < sizeof dyn_rows / sizeof dyn_rows[0]; i++)
        if (!strcmp(dyn_rows[i].name, name))
            return &dyn_rows[i];
    return NULL;
}

bool cn_config_key_is_dynamic(const char *key)
{
    const struct dyn_row *r = dyn_row(key);
    return r && r->cls == DYN_CLUSTER;
}

int cn_config_dyn_allowed(const char *key, enum cn_config_layer layer,
                          enum cn_config_refusal *refusal, char *err,
                          size_t err_len)
{
    const struct dyn_row *r = dyn_row(key);
    if (cfg_key_index(key) < 0) {
        /* Kafka keeps unknown keys for plugins; Cairn has none, so an
         * unknown key can only be a typo that would silently do nothing. */
        *refusal = CN_CFG_REFUSE_CONFIG;
        cfg_seterr(err, err_len,
               "Unknown broker config: %s (Cairn keeps no configs it does "
               "not use)",
               key);
        return CN_EINVAL;
    }
    if (!r) {
        *refusal = CN_CFG_REFUSE_REQUEST;
        cfg_seterr(err, err_len, "Cannot update these configs dynamically: [%s]",
               key);
        return CN_EINVAL;
    }
    if (r->cls == DYN_PER_BROKER && layer == CN_CFG_LAYER_DEFAULT) {
        *refusal = CN_CFG_REFUSE_REQUEST;
        cfg_seterr(err, err_len,
               "Cannot update these configs at default cluster level, "
               "broker id must be specified: [%s]",
               key);
        return CN_EINVAL;
    }
    if (r->cls != DYN_CLUSTER) {
        *refusal = CN_CFG_REFUSE_CONFIG;
        cfg_seterr(err, err_len,
               "%s is dynamic in Kafka but Cairn cannot change it at "
               "runtime: %s",
               key, r->why);
        return CN_EINVAL;
    }
    return 0;
}

/* Appends ", key" (or "key") to a bracketed list being built in buf. */
static void list_add(char *buf, size_t len, const char *key)
{
    size_t used = strlen(buf);
    snprintf(buf + used, len - used, "%s%s", used ? ", " : "", key);
}

int cn_config_alter_dynamic(struct cn_config *cfg, enum cn_config_layer layer,
                            const struct cn_config_change *ch, size_t n,
                            bool replace_all,
                            enum cn_config_refusal *refusal, char *err,
                            size_t err_len)
{
    char why[WHY_MAX], ro[MSG_MAX] = "";
    size_t nk = cn_config_key_count();

    /* Kafka's order: the request's shape (duplicates, null values,
     * appends), then the read-only keys all together, then each value. */
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < i; j++)
            if (!strcmp(ch[i].key, ch[j].key)) {
                *refusal = CN_CFG_REFUSE_REQUEST;
                cfg_seterr(err, err_len, "Error due to duplicate config keys");
                return CN_EINVAL;
            }
        if (ch[i].op == CN_CFG_OP_SET && !ch[i].value) {
            *refusal = CN_CFG_REFUSE_REQUEST;
            cfg_seterr(err, err_len, "Null value not supported for : %s",
                   ch[i].key);
            return CN_EINVAL;
        }
        if (ch[i].op == CN_CFG_OP_APPEND || ch[i].op == CN_CFG_OP_SUBTRACT) {
            /* The only list among the dynamic keys is log.cleanup.policy,
             * and Cairn takes only "delete" there. */
            *refusal = CN_CFG_REFUSE_CONFIG;
            cfg_seterr(err, err_len,
                   "Config value %s is not allowed for config key: %s",
                   ch[i].op == CN_CFG_OP_APPEND ? "append" : "subtract",
                   ch[i].key);
            return CN_EINVAL;
        }
        if (ch[i].op != CN_CFG_OP_SET && ch[i].op != CN_CFG_OP_DELETE) {
            *refusal = CN_CFG_REFUSE_REQUEST;
            cfg_seterr(err, err_len, "Unknown config operation %d", ch[i].op);
            return CN_EINVAL;
        }
    }
    for (size_t i = 0; i < n; i++) {
        int k = cfg_key_index(ch[i].key);
        if (k >= 0 && !dyn_row(ch[i].key))
            list_add(ro, sizeof ro, ch[i].key);
    }
    if (ro[0]) {
        *refusal = CN_CFG_REFUSE_REQUEST;
        cfg_seterr(err, err_len, "Cannot update these configs dynamically: [%s]",
               ro);
        return CN_EINVAL;
    }
    for (size_t i = 0; i < n; i++)
        if (cn_config_dyn_allowed(ch[i].key, layer, refusal, err, err_len))
            return CN_EINVAL;

    /* Every value parsed, then the whole result checked on new texts. */
    char **next = calloc(nk, sizeof *next);
    if (!next)
        return CN_ENOMEM;
    int rc = 0;
    for (size_t i = 0; i < nk && !replace_all; i++)
        if (cfg->dyn[layer][i] && !(next[i] = strdup(cfg->dyn[layer][i])))
            rc = CN_ENOMEM;
    for (size_t i = 0; i < n && !rc; i++) {
        int k = cfg_key_index(ch[i].key);
        free(next[k]);
        next[k] = NULL;
        if (ch[i].op == CN_CFG_OP_DELETE)
            continue;
        char *t = cfg_dup_trim(ch[i].value, strlen(ch[i].value));
        if (!t) {
            rc = CN_ENOMEM;
            break;
        }
        if (cfg_check_value(cn_config_key_at((size_t)k), t, NULL, why,
                        sizeof why)) {
            *refusal = CN_CFG_REFUSE_REQUEST;
            cfg_seterr(err, err_len,
                   "Invalid value %s for configuration %s: %s", t,
                   ch[i].key, why);
            free(t);
            rc = CN_EINVAL;
            break;
        }
        next[k] = t;
    }
    char **old = cfg->dyn[layer];
    if (!rc) {
        cfg->dyn[layer] = next;
        for (size_t i = 0; i < nk; i++)
            cfg_refresh_key(cfg, (int)i);
        if (cn_config_check(cfg, err, err_len)) {
            *refusal = CN_CFG_REFUSE_REQUEST;
            rc = CN_EINVAL;
        }
    }
    char **drop = rc ? next : old;
    if (rc && cfg->dyn[layer] == next) {
        cfg->dyn[layer] = old;
        for (size_t i = 0; i < nk; i++)
            cfg_refresh_key(cfg, (int)i);
    }
    for (size_t i = 0; i < nk; i++)
        free(drop[i]);
    free(drop);
    return rc;
}

static char **dup_texts(char *const *src, size_t n)
{
    char **out = calloc(n, sizeof *out);
    for (size_t i = 0; out && i < n; i++)
        if (src[i] && !(out[i] = strdup(src[i]))) {
            for (size_t j = 0; j < i; j++)
                free(out[j]);
            free(out);
            return NULL;
        }
    return out;
}

int cn_config_copy(struct cn_config *dst, const struct cn_config *src)
{
    size_t n = cn_config_key_count();
    *dst = *src;
    dst->text = dup_texts(src->text, n);
    dst->dyn[0] = dup_texts(src->dyn[0], n);
    dst->dyn[1] = dup_texts(src->dyn[1], n);
    dst->is_set = calloc(n, sizeof *dst->is_set);
    if (!dst->text || !dst->dyn[0] || !dst->dyn[1] || !dst->is_set) {
        cn_config_fini(dst);
        return CN_ENOMEM;
    }
    memcpy(dst->is_set, src->is_set, n * sizeof *dst->is_set);
    cfg_recompute(dst);
    return 0;
}

static const char *const layer_prefix[2] = {"broker.", "default."};

char *cn_config_dyn_serialize(const struct cn_config *cfg)
{
    size_t nk = cn_config_key_count(), cap = 1, used = 0;
    for (int l = 0; l < 2; l++)
        for (size_t i = 0; i < nk; i++)
            if (cfg->dyn[l][i])
                cap += strlen(layer_prefix[l]) +
                       strlen(cn_config_key_at(i)->name) +
                       strlen(cfg->dyn[l][i]) + 2;
    char *out = malloc(cap);
    if (!out)
        return NULL;
    out[0] = '\0';
    /* Values of dynamic keys are numbers, booleans and enum names, so
     * they need no properties escaping. */
    for (int l = 0; l < 2; l++)
        for (size_t i = 0; i < nk; i++)
            if (cfg->dyn[l][i])
                used += (size_t)snprintf(out + used, cap - used, "%s%s=%s\n",
                                         layer_prefix[l],
                                         cn_config_key_at(i)->name,
                                         cfg->dyn[l][i]);
    return out;
}

static int dyn_kv(void *ctx, const char *key, const char *value, char *err,
                  size_t err_len)
{
    for (int l = 0; l < 2; l++) {
        size_t pl = strlen(layer_prefix[l]);
        if (strncmp(key, layer_prefix[l], pl))
            continue;
        struct cn_config_change ch = {key + pl, value, CN_CFG_OP_SET};
        enum cn_config_refusal r;
        return cn_config_alter_dynamic(ctx, (enum cn_config_layer)l, &ch, 1,
                                       false, &r, err, err_len);
    }
    cfg_seterr(err, err_len,
           "\"%s\" is neither broker.KEY nor default.KEY", key);
    return CN_EINVAL;
}

int cn_config_dyn_parse(struct cn_config *cfg, const char *text,
                        const char *origin, char *err, size_t err_len)
{
    return cfg_parse_props(text, origin, dyn_kv, cfg, err, err_len);
}
