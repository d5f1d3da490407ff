/*
 * h_sasl.c - SASL on a SASL_PLAINTEXT listener: the authentication gate,
 * SaslHandshake (v0-1), SaslAuthenticate (v0-2, KIP-152), the bare-token
 * form after SaslHandshake v0, and re-authentication (KIP-368).
 *
 * Per connection the net layer carries the exchange (struct exch below,
 * freed with the connection), the authenticated flag and the session's
 * expiry; this file decides.  As Kafka's SaslServerAuthenticator: before
 * authentication only ApiVersions, SaslHandshake and then SaslAuthenticate
 * are served, anything else closes the connection; a failed
 * authentication answers SASL_AUTHENTICATION_FAILED with a message (bare
 * tokens cannot carry one) and closes.
 *
 * PLAIN: Cairn has no JAAS password list; the password is checked against
 * the user's stored SCRAM credential (SCRAM-SHA-512, else SCRAM-SHA-256)
 * by PBKDF2, which takes milliseconds, so it runs on a libuv worker while
 * the request waits.  SCRAM needs no PBKDF2 on the server: lookups are in
 * memory.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include "base/clock.h"
#include "base/say.h"
#include "handlers/handlers.h"
#include "proto/gen/msgs.h"
#include "proto/kerr.h"
#include "node/scram_store.h"
#include "sec/sasl.h"

enum mech { MECH_PLAIN = 1, MECH_SCRAM256, MECH_SCRAM512 };

static const char *const mech_names[] = {NULL, "PLAIN", "SCRAM-SHA-256",
                                         "SCRAM-SHA-512"};

struct cn_sasl_srv {
    struct cn_scram_store store;
    int enabled[3]; /* enum mech, in the configured order */
    int n_enabled;
    int64_t reauth_ms;         /* connections.max.reauth.ms; 0 off */
    uint64_t ok[4], failed[4]; /* authentications by enum mech */
    int64_t log_ms;            /* window of the failure-line rate limit */
    int log_n;                 /* failure lines in that window */
    long log_hushed;           /* failures not logged since */
};

/* A few failure lines a second, then a count: a password-guessing client
 * must not flood the log (as authz.c's audit lines). */
#define FAIL_LINES_PER_S 20

/* One connection's exchange, from SaslHandshake to the end. */
struct exch {
    int mech;      /* enum mech */
    bool raw;      /* SaslHandshake v0: bare tokens follow */
    bool reauth;   /* begun on an authenticated connection */
    bool busy;     /* a PLAIN check is on a worker */
    bool done;     /* authenticated; kept for the mechanism */
    int prev_mech; /* re-authentication: the session's mechanism,
                              which it may not change (as Kafka) */
    struct cn_scram_server scram;
};

static void exch_free(void *p)
{
    if (p)
        OPENSSL_cleanse(p, sizeof(struct exch));
    free(p);
}

static int mech_by_name(const char *s, size_t n)
{
    for (int m = MECH_PLAIN; m <= MECH_SCRAM512; m++)
        if (strlen(mech_names[m]) == n && !memcmp(s, mech_names[m], n))
            return m;
    return 0;
}

int cn_sasl_open(struct cn_broker *b, char *err, size_t err_len)
{
    struct cn_sasl_srv *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, err_len, "out of memory");
        return CN_ENOMEM;
    }
    int rc = cn_scram_store_open(&s->store, b->data_dir, err, err_len);
    if (rc) {
        free(s);
        return rc;
    }
    bool any_sasl = false;
    for (int i = 0; i < b->cfg->nlisteners; i++)
        any_sasl = any_sasl ||
                   b->cfg->listener[i].proto == CN_SEC_SASL_PLAINTEXT ||
                   b->cfg->listener[i].proto == CN_SEC_SASL_SSL;
    const char *v = NULL;
    cn_config_get(b->cfg, "connections.max.reauth.ms", &v, NULL);
    s->reauth_ms = v ? strtoll(v, NULL, 10) : 0;
    v = NULL;
    cn_config_get(b->cfg, "sasl.enabled.mechanisms", &v, NULL);
    const char *p = v ? v : "";
    while (*p) {
        while (*p == ' ' || *p == ',')
            p++;
        const char *e = p;
        while (*e && *e != ',' && *e != ' ')
            e++;
        if (e == p)
            break;
        int m = mech_by_name(p, (size_t)(e - p));
        if (!m && any_sasl) {
            snprintf(err, err_len,
                     "sasl.enabled.mechanisms: '%.*s' is not supported "
                     "(Cairn has PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)",
                     (int)(e - p), p);
            cn_scram_store_fini(&s->store);
            free(s);
            return CN_EINVAL;
        }
        bool dup = false;
        for (int i = 0; i < s->n_enabled; i++)
            dup = dup || s->enabled[i] == m;
        if (m && !dup)
            s->enabled[s->n_enabled++] = m;
        p = e;
    }
    if (any_sasl && s->n_enabled == 0) {
        snprintf(err, err_len,
                 "sasl.enabled.mechanisms: empty, but the "
                 "a listener is SASL_PLAINTEXT or SASL_SSL");
        cn_scram_store_fini(&s->store);
        free(s);
        return CN_EINVAL;
    }
    if (any_sasl)
        CN_INFO("SASL listeners: %d mechanisms, %zu SCRAM "
                "credentials, re-authentication %s",
                s->n_enabled, s->store.n,
                s->reauth_ms > 0 ? "every connections.max.reauth.ms" : "off");
    b->sasl = s;
    return 0;
}

void cn_sasl_close(struct cn_broker *b)
{
    if (!b->sasl)
        return;
    cn_scram_store_fini(&b->sasl->store);
    free(b->sasl);
    b->sasl = NULL;
}

struct cn_scram_store *cn_sasl_store(struct cn_broker *b)
{
    return &b->sasl->store;
}

void cn_sasl_metrics(struct cn_broker *b, uint64_t ok[4], uint64_t failed[4])
{
    for (int i = 0; i < 4; i++) {
        ok[i] = b->sasl ? b->sasl->ok[i] : 0;
        failed[i] = b->sasl ? b->sasl->failed[i] : 0;
    }
}

const char *cn_sasl_mech_name(int m)
{
    return m >= MECH_PLAIN && m <= MECH_SCRAM512 ? mech_names[m] : "?";
}

static bool mech_enabled(const struct cn_sasl_srv *s, int m)
{
    for (int i = 0; i < s->n_enabled; i++)
        if (s->enabled[i] == m)
            return true;
    return false;
}

static void close_now(struct cn_req *req)
{
    cn_req_close_conn(req);
    req->no_response = true;
    cn_req_done(req);
}

/* ---- the gate --------------------------------------------------------- */

bool cn_sasl_gate(struct cn_broker *b, struct cn_req *req,
                  const struct cn_req_header *h)
{
    (void)b;
    if (!cn_req_conn_sasl(req))
        return true;
    struct exch *x = cn_req_auth_state(req);
    bool authed = cn_req_authenticated(req);
    if (authed && !(x && x->reauth)) {
        int64_t exp = cn_req_session_expiry_ms(req);
        /* KIP-368, as Kafka's Processor: a SaslHandshake begins
         * re-authentication; any other request after the session's end
         * closes the connection. */
        if (exp > 0 && cn_clock_mono_ms() >= exp &&
            h->api_key != CN_API_SASL_HANDSHAKE) {
            CN_INFO("closing %s: SASL session of %s expired "
                    "(connections.max.reauth.ms) and it did not "
                    "re-authenticate",
                    cn_req_peer(req), cn_req_principal(req));
            close_now(req);
            return false;
        }
        return true;
    }
    if (h->api_key == CN_API_API_VERSIONS ||
        h->api_key == CN_API_SASL_HANDSHAKE ||
        h->api_key == CN_API_SASL_AUTHENTICATE)
        return true;
    const struct cn_api_info *ai = cn_api_info_get(h->api_key);
    CN_WARN("closing %s: %s request before SASL authentication",
            cn_req_peer(req), ai ? ai->name : "unknown");
    close_now(req);
    return false;
}

/* ---- SaslHandshake ---------------------------------------------------- */

/* The enabled mechanisms go with success and UNSUPPORTED_SASL_MECHANISM;
 * Kafka's ILLEGAL_SASL_STATE answer (KafkaApis) has an empty list. */
static void handshake_answer(struct cn_broker *b, struct cn_req *req,
                             const struct cn_req_header *h, int16_t err,
                             bool close)
{
    struct cn_sasl_srv *s = b->sasl;
    struct cn_sasl_handshake_response resp;
    cn_sasl_handshake_response_init(&resp);
    resp.error_code = err;
    resp.mechanisms = cn_arena_calloc(&req->arena, 3, sizeof *resp.mechanisms);
    if (!resp.mechanisms) {
        cn_req_bad(req, h, CN_ENOMEM);
        return;
    }
    int n = err == KAFKA_ILLEGAL_SASL_STATE ? 0 : s->n_enabled;
    for (int i = 0; i < n; i++)
        resp.mechanisms[i] = cn_bytes_str(mech_names[s->enabled[i]]);
    resp.mechanisms_len = n;
    cn_resp_begin(req, h);
    cn_sasl_handshake_response_encode(&req->resp, h->api_version, &resp);
    if (close)
        cn_req_close_after_response(req);
    cn_req_done(req);
}

void cn_h_sasl_handshake(struct cn_broker *b, struct cn_req *req,
                         const struct cn_req_header *h, struct cn_rd *body)
{
    struct cn_sasl_handshake_request rq;
    if (cn_sasl_handshake_request_decode(body, &req->arena, h->api_version,
                                         &rq)) {
        cn_req_bad(req, h, CN_EINVAL);
        return;
    }
    struct cn_sasl_srv *s = b->sasl;
    struct exch *x = cn_req_auth_state(req);
    if (!cn_req_conn_sasl(req)) {
        /* Kafka's KafkaApis answers a handshake on a listener without
         * SASL this way. */
        handshake_answer(b, req, h, KAFKA_ILLEGAL_SASL_STATE, false);
        return;
    }
    bool authed = cn_req_authenticated(req);
    if (authed &&
        (s->reauth_ms <= 0 || h->api_version < 1 || (x && x->reauth))) {
        /* Re-authentication needs KIP-368 on and SaslAuthenticate
         * framing; without, a second handshake is out of order. */
        handshake_answer(b, req, h, KAFKA_ILLEGAL_SASL_STATE, false);
        return;
    }
    if (!authed && x) {
        CN_WARN("closing %s: a second SaslHandshake during authentication",
                cn_req_peer(req));
        handshake_answer(b, req, h, KAFKA_ILLEGAL_SASL_STATE, true);
        return;
    }
    int m = rq.mechanism.len > 0 ? mech_by_name((const char *)rq.mechanism.ptr,
                                                (size_t)rq.mechanism.len)
                                 : 0;
    if (!m || !mech_enabled(s, m)) {
        CN_WARN("authentication failed: peer=%s mechanism=%.*s: not "
                "enabled (sasl.enabled.mechanisms)",
                cn_req_peer(req),
                rq.mechanism.len > 0 ? (int)rq.mechanism.len : 0,
                rq.mechanism.len > 0 ? (const char *)rq.mechanism.ptr : "");
        handshake_answer(b, req, h, KAFKA_UNSUPPORTED_SASL_MECHANISM, true);
        return;
    }
    int prev = authed && x && x->done ? x->mech : 0;
    x = calloc(1, sizeof *x);
    if (!x) {
        cn_req_bad(req, h, CN_ENOMEM);
        return;
    }
    x->mech = m;
    x->raw = h->api_version == 0;
    x->reauth = authed;
    x->prev_mech = prev;
    if (m != MECH_PLAIN)
        cn_scram_server_init(&x->scram, m == MECH_SCRAM512 ? CN_SCRAM_SHA512
                                                           : CN_SCRAM_SHA256);
    cn_req_set_auth_state(req, x, exch_free);
    if (x->raw)
        cn_req_set_raw_tokens(req, true);
    handshake_answer(b, req, h, KAFKA_NONE, false);
}

/* ---- SaslAuthenticate and bare tokens --------------------------------- */

/* What a step's answer needs: the request header for the framed form,
 * none for a bare token. */
struct step_ctx {
    struct cn_req_header h;
    bool raw;
};

static void auth_answer(struct cn_broker *b, struct cn_req *req,
                        const struct step_ctx *sc, int16_t err,
                        const char *msg, const uint8_t *tok, size_t tok_len,
                        int64_t lifetime_ms, bool close)
{
    (void)b;
    if (sc->raw) {
        if (err || close) {
            close_now(req);
            return;
        }
        cn_wr_raw(&req->resp, tok, tok_len);
        cn_req_done(req);
        return;
    }
    struct cn_sasl_authenticate_response resp;
    cn_sasl_authenticate_response_init(&resp);
    resp.error_code = err;
    resp.error_message = msg ? cn_req_str(req, msg) : CN_BYTES_NULL;
    resp.auth_bytes.ptr = tok;
    resp.auth_bytes.len = (int32_t)tok_len;
    resp.session_lifetime_ms = lifetime_ms;
    cn_resp_begin(req, &sc->h);
    cn_sasl_authenticate_response_encode(&req->resp, sc->h.api_version, &resp);
    if (close)
        cn_req_close_after_response(req);
    cn_req_done(req);
}

static void auth_fail(struct cn_broker *b, struct cn_req *req,
                      const struct step_ctx *sc, struct exch *x,
                      const char *user, const char *why)
{
    struct cn_sasl_srv *s = b->sasl;
    s->failed[x->mech]++;
    int64_t now = cn_clock_mono_ms();
    if (now - s->log_ms >= 1000) {
        if (s->log_hushed)
            CN_WARN("authentication failed: %ld more failures not logged",
                    s->log_hushed);
        s->log_ms = now;
        s->log_n = 0;
        s->log_hushed = 0;
    }
    if (s->log_n++ < FAIL_LINES_PER_S)
        CN_WARN("authentication failed: principal=User:%s mechanism=%s "
                "peer=%s: %s",
                user && *user ? user : "?", mech_names[x->mech],
                cn_req_peer(req), why);
    else
        s->log_hushed++;
    cn_req_set_authenticated(req, false, 0);
    cn_req_set_raw_tokens(req, false);
    auth_answer(b, req, sc, KAFKA_SASL_AUTHENTICATION_FAILED, why, NULL, 0, 0,
                true);
}

/* The exchange ended well for user: the principal, the session. */
static void auth_ok(struct cn_broker *b, struct cn_req *req,
                    const struct step_ctx *sc, struct exch *x,
                    const char *user, const uint8_t *tok, size_t tok_len)
{
    char principal[CN_PRINCIPAL_MAX];
    snprintf(principal, sizeof principal, "User:%s", user);
    if (x->reauth && strcmp(principal, cn_req_principal(req)) != 0) {
        char why[2 * CN_PRINCIPAL_MAX + 64];
        snprintf(why, sizeof why,
                 "Cannot change principals during re-authentication from "
                 "%s: %s",
                 cn_req_principal(req), principal);
        auth_fail(b, req, sc, x, user, why);
        return;
    }
    if (cn_req_set_principal(req, principal) != 0) {
        auth_fail(b, req, sc, x, user, "user name too long");
        return;
    }
    int64_t life = b->sasl->reauth_ms;
    cn_req_set_authenticated(req, true,
                             life > 0 ? cn_clock_mono_ms() + life : 0);
    b->sasl->ok[x->mech]++;
    CN_DEBUG("%s authenticated as %s (%s%s)", cn_req_peer(req), principal,
             mech_names[x->mech], x->reauth ? ", re-authentication" : "");
    if (sc->raw)
        cn_req_set_raw_tokens(req, false);
    /* The exchange stays, done, for the mechanism a re-authentication
     * must keep; its SCRAM state is wiped. */
    OPENSSL_cleanse(&x->scram, sizeof x->scram);
    x->done = true;
    x->reauth = false;
    const uint8_t *copy = tok;
    auth_answer(b, req, sc, KAFKA_NONE, NULL, copy, copy ? tok_len : 0,
                life > 0 ? life : 0, false);
}

/* PLAIN's PBKDF2 on a worker. */
struct plain_work {
    uv_work_t w;
    struct cn_broker *b;
    struct cn_req *req;
    struct step_ctx sc;
    struct cn_scram_cred cred;
    bool have; /* the user has a credential */
    bool ok;   /* the password matched */
    char user[CN_SASL_NAME_MAX];
    char pw[1024];
};

static void plain_work(uv_work_t *w)
{
    struct plain_work *pw = w->data;
    /* An unknown user costs the same PBKDF2 as a known one, so timing
     * does not tell which names exist. */
    pw->ok = cn_scram_cred_check(&pw->cred, pw->pw, strlen(pw->pw)) &&
             pw->have;
}

static void plain_done(uv_work_t *w, int status)
{
    struct plain_work *pw = w->data;
    struct cn_req *req = pw->req;
    struct cn_broker *b = pw->b;
    struct exch *x = cn_req_auth_state(req);
    OPENSSL_cleanse(pw->pw, sizeof pw->pw);
    if (cn_req_conn_closed(req) || !x) {
        req->no_response = true;
        cn_req_done(req);
    } else {
        x->busy = false;
        if (status == 0 && pw->ok)
            auth_ok(b, req, &pw->sc, x, pw->user, NULL, 0);
        else
            auth_fail(b, req, &pw->sc, x, pw->user,
                      "Authentication failed: Invalid username or "
                      "password");
    }
    OPENSSL_cleanse(pw, sizeof *pw);
    free(pw);
}

static void plain_step(struct cn_broker *b, struct cn_req *req,
                       const struct step_ctx *sc, struct exch *x,
                       const uint8_t *tok, size_t len)
{
    struct plain_work *pw = calloc(1, sizeof *pw);
    if (!pw) {
        auth_fail(b, req, sc, x, NULL, "out of memory");
        return;
    }
    char why[256];
    if (cn_sasl_plain_parse(tok, len, pw->user, sizeof pw->user, pw->pw,
                            sizeof pw->pw, why, sizeof why) != 0) {
        OPENSSL_cleanse(pw, sizeof *pw);
        free(pw);
        auth_fail(b, req, sc, x, NULL, why);
        return;
    }
    struct cn_scram_store *st = &b->sasl->store;
    pw->have = cn_scram_store_lookup(st, pw->user, CN_SCRAM_SHA512,
                                     &pw->cred) == 0 ||
               cn_scram_store_lookup(st, pw->user, CN_SCRAM_SHA256,
                                     &pw->cred) == 0;
    if (!pw->have) {
        uint8_t salt[16];
        RAND_bytes(salt, sizeof salt);
        cn_scram_cred_from_salted(CN_SCRAM_SHA512, (const uint8_t[64]){0}, 64,
                                  salt, sizeof salt, CN_SCRAM_ITER_MIN,
                                  &pw->cred);
    }
    pw->b = b;
    pw->req = req;
    pw->sc = *sc;
    pw->w.data = pw;
    x->busy = true;
    if (uv_queue_work(b->loop, &pw->w, plain_work, plain_done) != 0) {
        x->busy = false;
        OPENSSL_cleanse(pw, sizeof *pw);
        free(pw);
        auth_fail(b, req, sc, x, NULL, "cannot queue the password check");
    }
}

static void step(struct cn_broker *b, struct cn_req *req,
                 const struct step_ctx *sc, const uint8_t *tok, size_t len)
{
    struct exch *x = cn_req_auth_state(req);
    if (!tok)
        tok = (const uint8_t *)""; /* an empty token has no pointer */
    if (!cn_req_conn_sasl(req) ||
        (cn_req_authenticated(req) && !(x && x->reauth))) {
        /* As Kafka's KafkaApis, the connection stays. */
        auth_answer(b, req, sc, KAFKA_ILLEGAL_SASL_STATE,
                    "SaslAuthenticate request received after successful "
                    "authentication",
                    NULL, 0, 0, false);
        return;
    }
    if (!x || x->busy || x->raw != sc->raw) {
        CN_WARN("closing %s: SaslAuthenticate %s", cn_req_peer(req),
                !x        ? "before SaslHandshake"
                : x->busy ? "while the last one is being checked"
                          : "in the wrong framing for the handshake");
        auth_answer(b, req, sc, KAFKA_ILLEGAL_SASL_STATE,
                    "Unexpected SaslAuthenticate request: no SASL "
                    "mechanism chosen by SaslHandshake, or one in progress",
                    NULL, 0, 0, true);
        return;
    }
    if (x->prev_mech && x->prev_mech != x->mech) {
        char why[160];
        snprintf(why, sizeof why,
                 "SASL mechanism '%s' requested by client is not supported "
                 "for re-authentication of mechanism '%s'",
                 mech_names[x->mech], mech_names[x->prev_mech]);
        auth_fail(b, req, sc, x, NULL, why);
        return;
    }
    if (x->mech == MECH_PLAIN) {
        plain_step(b, req, sc, x, tok, len);
        return;
    }
    uint8_t *out = cn_arena_alloc(&req->arena, CN_SCRAM_MSG_MAX);
    if (!out) {
        auth_fail(b, req, sc, x, NULL, "out of memory");
        return;
    }
    size_t out_len = 0;
    char why[256] = "";
    int rc = cn_scram_server_step(&x->scram, tok, len, cn_scram_store_lookup,
                                  &b->sasl->store, out, CN_SCRAM_MSG_MAX,
                                  &out_len, why, sizeof why);
    if (rc) {
        char msg[320];
        if (rc == -EACCES)
            snprintf(msg, sizeof msg,
                     "Authentication failed during authentication due to "
                     "invalid credentials with SASL mechanism %s",
                     mech_names[x->mech]);
        else
            snprintf(msg, sizeof msg, "%s", why[0] ? why : "bad message");
        auth_fail(b, req, sc, x, x->scram.user, msg);
        return;
    }
    if (x->scram.state == CN_SCRAM_DONE) {
        char user[CN_SASL_NAME_MAX];
        snprintf(user, sizeof user, "%s", x->scram.user);
        auth_ok(b, req, sc, x, user, out, out_len);
        return;
    }
    auth_answer(b, req, sc, KAFKA_NONE, NULL, out, out_len, 0, false);
}

void cn_h_sasl_authenticate(struct cn_broker *b, struct cn_req *req,
                            const struct cn_req_header *h, struct cn_rd *body)
{
    struct cn_sasl_authenticate_request rq;
    if (cn_sasl_authenticate_request_decode(body, &req->arena, h->api_version,
                                            &rq)) {
        cn_req_bad(req, h, CN_EINVAL);
        return;
    }
    struct step_ctx sc = {.h = *h, .raw = false};
    step(b, req, &sc, rq.auth_bytes.ptr,
         rq.auth_bytes.len > 0 ? (size_t)rq.auth_bytes.len : 0);
}

void cn_sasl_raw_token(struct cn_broker *b, struct cn_req *req)
{
    struct exch *x = cn_req_auth_state(req);
    struct step_ctx sc = {.raw = true};
    if (!x || !x->raw || x->done) {
        CN_WARN("closing %s: bare SASL token outside an exchange",
                cn_req_peer(req));
        close_now(req);
        return;
    }
    step(b, req, &sc, req->frame, req->frame_len);
}
