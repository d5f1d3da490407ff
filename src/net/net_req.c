/*
 * net_req.c - what a request may learn and set of its connection: the
 * peer, the listener, TLS, the authenticated principal and SASL state.
 * Runs on: loop.
 */
#include <errno.h>
#include <string.h>

#include "net_int.h"

const char *cn_req_peer(const struct cn_req *req)
{
    return req->conn->peer;
}

int cn_req_listener(const struct cn_req *req)
{
    return req->conn->srv->cfg.listener;
}

bool cn_req_tls(const struct cn_req *req)
{
    return req->conn->ssl != NULL;
}

const char *cn_req_principal(const struct cn_req *req)
{
    return req->conn->principal;
}

int cn_req_set_principal(struct cn_req *req, const char *p)
{
    size_t n = strlen(p);
    if (n >= sizeof req->conn->principal)
        return -EINVAL;
    memcpy(req->conn->principal, p, n + 1);
    return 0;
}

bool cn_req_conn_sasl(const struct cn_req *req)
{
    return req->conn->srv->cfg.sasl;
}

bool cn_req_authenticated(const struct cn_req *req)
{
    return req->conn->authed;
}

int64_t cn_req_session_expiry_ms(const struct cn_req *req)
{
    return req->conn->session_expiry_ms;
}

void cn_req_set_authenticated(struct cn_req *req, bool on, int64_t expiry_ms)
{
    req->conn->authed = on;
    req->conn->session_expiry_ms = expiry_ms;
}

void *cn_req_auth_state(const struct cn_req *req)
{
    return req->conn->auth_state;
}

void cn_req_set_auth_state(struct cn_req *req, void *state,
                           void (*free_fn)(void *))
{
    struct cn_conn *c = req->conn;
    if (c->auth_state && c->auth_free && c->auth_state != state)
        c->auth_free(c->auth_state);
    c->auth_state = state;
    c->auth_free = free_fn;
}

void cn_req_set_raw_tokens(struct cn_req *req, bool on)
{
    req->conn->raw_tokens = on;
}
