/*
 * config_cluster.c - the keys of cluster mode (process.roles set): the
 * voter list and the checks that tie process.roles, node.id,
 * controller.quorum.voters, controller.listener.names and the broker
 * session keys together.  Part of the configuration module (config.c).
 */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "config_int.h"
#include "err.h"

/* Parses controller.quorum.voters ("id@host:port,..."); why says what is
 * wrong. */
int cfg_parse_voters(const char *text, struct cn_cfg_voter *out, int max,
                     int *n, char *why, size_t why_len)
{
    *n = 0;
    if (!text)
        return 0;
    for (const char *p = text; *p;) {
        while (*p == ',' || isspace((unsigned char)*p))
            p++;
        if (!*p)
            break;
        const char *e = p;
        while (*e && *e != ',')
            e++;
        const char *t = e;
        while (t > p && isspace((unsigned char)t[-1]))
            t--;
        char ent[CN_CONFIG_HOST_MAX + 32];
        if ((size_t)(t - p) >= sizeof ent) {
            snprintf(why, why_len, "an entry is too long");
            return CN_EINVAL;
        }
        memcpy(ent, p, (size_t)(t - p));
        ent[t - p] = '\0';
        p = e;
        if (*n == max) {
            snprintf(why, why_len, "more than %d voters", max);
            return CN_EINVAL;
        }
        char *at = strchr(ent, '@');
        char *colon = strrchr(ent, ':');
        if (!at || !colon || colon < at) {
            snprintf(why, why_len, "\"%.200s\" is not id@host:port", ent);
            return CN_EINVAL;
        }
        *at = '\0';
        *colon = '\0';
        char *end;
        errno = 0;
        long id = strtol(ent, &end, 10);
        if (!ent[0] || *end || errno || id < 1 || id > INT32_MAX) {
            snprintf(why, why_len,
                     "voter id \"%.32s\" is not a number >= 1 (raft ids must "
                     "be positive)",
                     ent);
            return CN_EINVAL;
        }
        long port = strtol(colon + 1, &end, 10);
        if (!colon[1] || *end || port < 1 || port > 65535) {
            snprintf(why, why_len, "voter %ld: port \"%.16s\" is not 1..65535",
                     id, colon + 1);
            return CN_EINVAL;
        }
        char *host = at + 1;
        size_t hl = strlen(host);
        if (hl >= 2 && host[0] == '[' && host[hl - 1] == ']') {
            host[hl - 1] = '\0';
            host++;
        }
        if (!host[0]) {
            snprintf(why, why_len, "voter %ld has no host", id);
            return CN_EINVAL;
        }
        for (int i = 0; i < *n; i++)
            if (out[i].id == (int32_t)id) {
                snprintf(why, why_len, "voter id %ld appears twice", id);
                return CN_EINVAL;
            }
        out[*n].id = (int32_t)id;
        snprintf(out[*n].host, sizeof out[*n].host, "%s", host);
        out[*n].port = (int)port;
        (*n)++;
    }
    return 0;
}

/* Cluster mode's keys (docs/cluster-plan.md §5); nothing to check on a
 * single node, whose behaviour must not change. */
int cfg_check_cluster(const struct cn_config *cfg, char *err, size_t err_len)
{
    const char *roles = cfg_cur(cfg, "process.roles");
    if (!roles || !roles[0])
        return 0;
    if (!cfg_list_has(roles, "broker")) {
        cfg_seterr(err, err_len,
                   "invalid value \"%s\" for process.roles: Cairn runs "
                   "controllers inside brokers; use broker,controller",
                   roles);
        return CN_EINVAL;
    }
    /* The controller's APIs are cluster actions: with an authorizer the
     * brokers' registrations would need a principal of their own on the
     * plaintext connections between brokers, which Cairn does not have
     * yet.  Refused rather than a cluster whose brokers never register. */
    const char *authorizer = cfg_cur(cfg, "authorizer.class.name");
    if (authorizer && authorizer[0]) {
        cfg_seterr(err, err_len,
                   "authorizer.class.name: not yet supported in cluster mode "
                   "(process.roles=%s): the brokers could not register with "
                   "the controller; unset one of the two",
                   roles);
        return CN_EINVAL;
    }
    if (cfg->node_id < 1) {
        cfg_seterr(err, err_len,
                   "invalid value \"%d\" for node.id: must be >= 1 in "
                   "cluster mode (raft ids are positive)",
                   cfg->node_id);
        return CN_EINVAL;
    }
    struct cn_cfg_voter v[CN_VOTERS_MAX];
    int nv;
    char why[256];
    const char *vt = cfg_cur(cfg, "controller.quorum.voters");
    if (cfg_parse_voters(vt, v, CN_VOTERS_MAX, &nv, why, sizeof why)) {
        cfg_seterr(err, err_len,
                   "invalid value \"%s\" for controller.quorum.voters: %s", vt,
                   why);
        return CN_EINVAL;
    }
    if (nv == 0) {
        cfg_seterr(err, err_len,
                   "controller.quorum.voters: must list the voters "
                   "(id@host:port,...) when process.roles is set");
        return CN_EINVAL;
    }
    const struct cn_cfg_voter *self = NULL;
    for (int i = 0; i < nv; i++)
        if (v[i].id == cfg->node_id)
            self = &v[i];
    if (cfg->controller_role && !self) {
        cfg_seterr(err, err_len,
                   "controller.quorum.voters: does not include this node's "
                   "id %d (process.roles=%s)",
                   cfg->node_id, roles);
        return CN_EINVAL;
    }
    if (!cfg->controller_role && self) {
        cfg_seterr(err, err_len,
                   "controller.quorum.voters: includes this node's id %d, "
                   "but process.roles=broker does not vote; use "
                   "broker,controller",
                   cfg->node_id);
        return CN_EINVAL;
    }
    if (cfg->broker_session_timeout_ms <= cfg->broker_heartbeat_interval_ms) {
        cfg_seterr(err, err_len,
                   "invalid value \"%lld\" for broker.session.timeout.ms: "
                   "must be greater than broker.heartbeat.interval.ms "
                   "(%lld)",
                   (long long)cfg->broker_session_timeout_ms,
                   (long long)cfg->broker_heartbeat_interval_ms);
        return CN_EINVAL;
    }
    if (!cfg->metadata_log_dir[0]) {
        cfg_seterr(err, err_len,
                   "metadata.log.dir: no directory (log.dirs is empty or the "
                   "path is too long)");
        return CN_EINVAL;
    }
    int brokers = 0;
    for (int i = 0; i < cfg->nlisteners; i++)
        if (i != cfg->controller_listener)
            brokers++;
    if (brokers == 0) {
        cfg_seterr(err, err_len,
                   "invalid listeners \"%s\": a cluster node needs a "
                   "broker listener besides the controller listener",
                   cfg->listeners);
        return CN_EINVAL;
    }
    if (!cfg->controller_role)
        return 0;
    const char *cn = cfg_cur(cfg, "controller.listener.names");
    if (!cn || !cn[0]) {
        cfg_seterr(err, err_len,
                   "controller.listener.names: must name the CONTROLLER "
                   "listener when process.roles has controller");
        return CN_EINVAL;
    }
    if (cfg->controller_listener < 0) {
        cfg_seterr(err, err_len,
                   "invalid value \"%s\" for controller.listener.names: no "
                   "listener of that name in listeners (%s)",
                   cn, cfg->listeners);
        return CN_EINVAL;
    }
    const struct cn_listener *cl = &cfg->listener[cfg->controller_listener];
    if (cl->port != self->port) {
        cfg_seterr(err, err_len,
                   "controller.listener.names: listener %s has port %d, but "
                   "this node's entry in controller.quorum.voters (%d@%s:%d) "
                   "has port %d",
                   cl->name, cl->port, self->id, self->host, self->port,
                   self->port);
        return CN_EINVAL;
    }
    return 0;
}
