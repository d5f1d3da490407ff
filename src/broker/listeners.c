/*
 * listeners.c - one server per entry of `listeners`, TLS contexts for the
 * SSL ones, and the advertised address per listener.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/say.h"
#include "broker/wiring.h"
#include "node/broker_int.h"
#include "node/quorum.h"
#include "sec/tls.h"

/* ssl.principal.mapping.rules over the certificate's subject. */
static int map_principal(int listener, struct x509_st *cert, char *out,
                         size_t out_len, void *opaque)
{
    struct cn_broker *b = opaque;
    const char *rules = cn_config_listener_value(
        b->cfg, b->cfg->listener[listener].name, "ssl.principal.mapping.rules");
    char dn[CN_PRINCIPAL_MAX];
    int rc = cn_tls_cert_principal(cert, rules ? rules : "DEFAULT", dn,
                                   sizeof dn, out, out_len);
    if (rc == CN_ENOTFOUND)
        CN_WARN("no ssl.principal.mapping.rules rule applies to \"%s\"", dn);
    else if (rc)
        CN_WARN("client certificate subject \"%.200s\": %s", dn,
                cn_strerror(rc));
    return rc;
}

static int tls_context(struct cn_broker *b, const struct cn_listener *l,
                       struct ssl_ctx_st **out, char *err, size_t err_len)
{
    const struct cn_config *cfg = b->cfg;
#define LKEY(k) cn_config_listener_value(cfg, l->name, k)
    struct cn_tls_opts o = {
        .keystore_location = LKEY("ssl.keystore.location"),
        .keystore_type = LKEY("ssl.keystore.type"),
        .keystore_password = LKEY("ssl.keystore.password"),
        .key_password = LKEY("ssl.key.password"),
        .truststore_location = LKEY("ssl.truststore.location"),
        .truststore_type = LKEY("ssl.truststore.type"),
        .client_auth = LKEY("ssl.client.auth"),
        .enabled_protocols = LKEY("ssl.enabled.protocols"),
        .protocol = LKEY("ssl.protocol"),
        .cipher_suites = LKEY("ssl.cipher.suites"),
    };
#undef LKEY
    char why[512];
    if (cn_tls_ctx_new(&o, out, why, sizeof why)) {
        snprintf(err, err_len, "listener %s: %s", l->name, why);
        return CN_EINVAL;
    }
    return 0;
}

/* Raft's connections share a Kafka port (docs/cluster-plan.md §0.4). */
static bool raft_first_bytes(const uint8_t *bytes, size_t n, void *opaque)
{
    (void)opaque;
    return cn_quorum_is_handshake(bytes, n);
}

static int raft_take(uv_stream_t *s, const uint8_t *bytes, size_t n,
                     void *opaque)
{
    struct cn_broker *b = opaque;
    /* Before the quorum starts, or after it stopped: the peer retries. */
    if (!b->quorum || b->stopping)
        return -ENOTCONN;
    return cn_quorum_accept(b->quorum, s, bytes, n);
}

/* The listener raft's peers reach this node on: a voter's CONTROLLER
 * listener, a standby's first broker listener; -1 on a single node. */
static int raft_listener(const struct cn_broker *b)
{
    const struct cn_config *cfg = b->cfg;
    if (!cfg->cluster_mode)
        return -1;
    if (cfg->controller_role)
        return cfg->controller_listener;
    return 0;
}

int cn_broker_listen(struct cn_broker *b, const struct cn_server_config *tmpl,
                     char *err, size_t err_len)
{
    const struct cn_config *cfg = b->cfg;
    if (cfg->nlisteners == 0) {
        snprintf(err, err_len, "listeners: no listener to bind");
        return CN_EINVAL;
    }
    for (int i = 0; i < cfg->nlisteners; i++) {
        const struct cn_listener *l = &cfg->listener[i];
        const char *rules = cn_config_listener_value(
            cfg, l->name, "ssl.principal.mapping.rules");
        char why[256];
        if ((l->proto == CN_SEC_SSL || l->proto == CN_SEC_SASL_SSL) && rules &&
            cn_tls_rules_check(rules, why, sizeof why)) {
            snprintf(err, err_len, "ssl.principal.mapping.rules: %s", why);
            goto fail;
        }
        struct cn_server_config sc = *tmpl;
        sc.host = l->host;
        sc.port = l->port;
        sc.listener = i;
        /* queued.max.requests is broker-wide, not per listener. */
        sc.share_budget = i > 0 ? b->servers[0] : NULL;
        /* SASL_*: only ApiVersions and SaslHandshake before a login (the
         * gate is in dispatch); SASL_SSL's principal is the SASL one. */
        sc.sasl = l->proto == CN_SEC_SASL_PLAINTEXT ||
                  l->proto == CN_SEC_SASL_SSL;
        if (i == raft_listener(b)) {
            if (l->proto != CN_SEC_PLAINTEXT) {
                snprintf(err, err_len,
                         "listeners: %s carries the metadata quorum's raft "
                         "traffic and must be PLAINTEXT (TLS for it is not "
                         "supported yet)",
                         l->name);
                goto fail;
            }
            sc.first_bytes = raft_first_bytes;
            sc.take_conn = raft_take;
        }
        if (l->proto == CN_SEC_SSL || l->proto == CN_SEC_SASL_SSL) {
            if (tls_context(b, l, &b->tls_ctx[i], err, err_len))
                goto fail;
            sc.tls = b->tls_ctx[i];
            sc.tls_handshake_ms = cfg->cairn_ssl_handshake_timeout_ms;
            sc.tls_principal = map_principal;
        }
        int rc = cn_server_start(b->loop, &sc, cn_dispatch, b,
                                 &b->servers[i]);
        if (rc) {
            snprintf(err, err_len, "listeners: cannot listen on %s:%d (%s): %s",
                     l->host[0] ? l->host : "*", l->port, l->name,
                     uv_strerror(rc));
            goto fail;
        }
        b->nservers = i + 1;
        snprintf(b->adv_hosts[i], sizeof b->adv_hosts[i], "%s",
                 l->adv_host[0] ? l->adv_host
                 : l->host[0]   ? l->host
                                : "127.0.0.1");
        b->adv_ports[i] = l->adv_port ? l->adv_port
                                      : cn_server_port(b->servers[i]);
        CN_INFO("listener %s (%s) on %s:%d, advertised as %s:%d", l->name,
                cn_sec_proto_name(l->proto), l->host[0] ? l->host : "*",
                cn_server_port(b->servers[i]), b->adv_hosts[i],
                b->adv_ports[i]);
    }
    b->server = b->servers[0];
    return 0;
fail:
    cn_broker_unlisten(b);
    b->nservers = 0;
    cn_broker_listeners_free(b);
    return CN_EINVAL;
}

void cn_broker_unlisten(struct cn_broker *b)
{
    for (int i = 0; i < b->nservers; i++)
        if (b->servers[i])
            cn_server_stop(b->servers[i]);
}

void cn_broker_listeners_free(struct cn_broker *b)
{
    /* Connections hold their own references to a context. */
    for (int i = 0; i < CN_LISTENERS_MAX; i++) {
        cn_tls_ctx_free(b->tls_ctx[i]);
        b->tls_ctx[i] = NULL;
    }
}
