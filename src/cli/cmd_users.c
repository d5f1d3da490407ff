/*
 * cmd_users.c - cairnctl users list|set|delete: SCRAM credentials through
 * DescribeUserScramCredentials and AlterUserScramCredentials (KIP-554).
 *
 * set salts the password here, with PBKDF2 (as kafka-configs.sh does), so
 * only the salt and SaltedPassword cross the wire and the broker never sees
 * the password.  Without --password the password is read from stdin (one
 * line), which keeps it out of ps and shell history.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include "base/rd.h"
#include "base/wr.h"
#include "cli/cli.h"
#include "proto/kerr.h"
#include "proto/scram_msgs.h"
#include "sec/sasl.h"

static int mech_of(const struct ctx *x, int *out)
{
    const char *m = x->o->mechanism ? x->o->mechanism : "SCRAM-SHA-512";
    *out = cn_scram_mech_parse(m, strlen(m));
    if (!*out) {
        fprintf(stderr, "cairnctl: unknown mechanism '%s' (SCRAM-SHA-256 or "
                        "SCRAM-SHA-512)\n",
                m);
        return EXIT_USAGE;
    }
    return 0;
}

static struct cn_kclient *users_conn(struct ctx *x, int16_t api,
                                     const char *name)
{
    struct cn_kclient *c = cli_admin_conn(x);
    if (!c)
        return NULL;
    /* Our codec is hand-written (v0), so the negotiated range is checked
     * here rather than against a generated one. */
    if (c->api_min[api] > 0 || c->api_max[api] < 0) {
        fprintf(stderr, "cairnctl: broker %s:%d does not support %s v0\n",
                c->host, c->port, name);
        return NULL;
    }
    return c;
}

static int call(struct ctx *x, struct cn_kclient *c, int16_t api,
                const struct cn_wr *body, struct cn_rd *rd)
{
    if (body->err) {
        fprintf(stderr, "cairnctl: out of memory\n");
        return EXIT_FAIL;
    }
    if (cn_kclient_call_raw(c, api, 0, body, &x->arena, rd)) {
        fprintf(stderr, "cairnctl: %s\n", c->err);
        return EXIT_FAIL;
    }
    return 0;
}

static void print_err(const char *user, int16_t code, struct cn_bytes msg)
{
    fprintf(stderr, "cairnctl: user '%s': %s", user, cn_kerr_name(code));
    if (msg.len > 0)
        fprintf(stderr, " (%.*s)", msg.len, (const char *)msg.ptr);
    fputc('\n', stderr);
}

int cmd_users_list(struct ctx *x)
{
    const struct opts *o = x->o;
    struct cn_kclient *c =
        users_conn(x, CN_API_DESCRIBE_USER_SCRAM_CREDENTIALS,
                   "DescribeUserScramCredentials");
    if (!c)
        return EXIT_FAIL;
    struct cn_bytes one = o->user ? cn_bytes_str(o->user) : CN_BYTES_NULL;
    struct cn_describe_scram_req rq = {o->user ? 1 : -1, o->user ? &one : NULL};
    struct cn_wr wr;
    cn_wr_init(&wr, 64);
    cn_describe_scram_req_encode(&wr, &rq);
    struct cn_rd rd;
    int rc = call(x, c, CN_API_DESCRIBE_USER_SCRAM_CREDENTIALS, &wr, &rd);
    cn_wr_fini(&wr);
    if (rc)
        return rc;
    struct cn_describe_scram_resp rs;
    if (cn_describe_scram_resp_decode(&rd, &x->arena, &rs)) {
        fprintf(stderr, "cairnctl: cannot decode the "
                        "DescribeUserScramCredentials response\n");
        return EXIT_FAIL;
    }
    if (rs.error_code) {
        print_err(o->user ? o->user : "*", rs.error_code, rs.error_message);
        return EXIT_FAIL;
    }
    struct table t;
    if (!o->json) {
        int rows = 1;
        for (int32_t i = 0; i < rs.results_len; i++)
            rows += rs.results[i].infos_len > 0 ? rs.results[i].infos_len : 1;
        if (cli_table_init(&t, &x->arena, 3, rows))
            return EXIT_FAIL;
        cli_table_header(&t, (const char *const[]){"User", "Mechanism",
                                                   "Iterations"});
    } else {
        putchar('[');
    }
    rc = 0;
    bool first = true;
    for (int32_t i = 0; i < rs.results_len; i++) {
        const struct cn_describe_scram_result *r = &rs.results[i];
        if (r->error_code) {
            char u[CN_SASL_NAME_MAX];
            snprintf(u, sizeof u, "%.*s", r->user.len > 0 ? r->user.len : 0,
                     r->user.len > 0 ? (const char *)r->user.ptr : "");
            print_err(u, r->error_code, r->error_message);
            rc = EXIT_FAIL;
            continue;
        }
        for (int32_t j = 0; j < r->infos_len; j++) {
            const char *mn = cn_scram_mech_name(r->infos[j].mechanism);
            if (o->json) {
                printf("%s{\"user\":", first ? "" : ",");
                cli_json_bytes(stdout, r->user);
                printf(",\"mechanism\":\"%s\",\"iterations\":%d}",
                       mn ? mn : "UNKNOWN", (int)r->infos[j].iterations);
                first = false;
                continue;
            }
            cli_table_row(&t);
            cli_table_set_bytes(&t, 0, r->user);
            cli_table_set(&t, 1, "%s", mn ? mn : "UNKNOWN");
            cli_table_set(&t, 2, "%d", (int)r->infos[j].iterations);
        }
    }
    if (o->json)
        puts("]");
    else
        cli_table_print(&t);
    return rc;
}

/* One alteration (set or delete) and its answer. */
static int alter(struct ctx *x, const struct cn_alter_scram_req *rq)
{
    struct cn_kclient *c =
        users_conn(x, CN_API_ALTER_USER_SCRAM_CREDENTIALS,
                   "AlterUserScramCredentials");
    if (!c)
        return EXIT_FAIL;
    struct cn_wr wr;
    cn_wr_init(&wr, 256);
    cn_alter_scram_req_encode(&wr, rq);
    struct cn_rd rd;
    int rc = call(x, c, CN_API_ALTER_USER_SCRAM_CREDENTIALS, &wr, &rd);
    OPENSSL_cleanse(wr.buf, wr.len);
    cn_wr_fini(&wr);
    if (rc)
        return rc;
    struct cn_alter_scram_resp rs;
    if (cn_alter_scram_resp_decode(&rd, &x->arena, &rs)) {
        fprintf(stderr, "cairnctl: cannot decode the "
                        "AlterUserScramCredentials response\n");
        return EXIT_FAIL;
    }
    for (int32_t i = 0; i < rs.results_len; i++)
        if (rs.results[i].error_code) {
            print_err(x->o->user, rs.results[i].error_code,
                      rs.results[i].error_message);
            rc = EXIT_FAIL;
        }
    return rc;
}

int cmd_users_set(struct ctx *x)
{
    const struct opts *o = x->o;
    /* --user is required by the command table (cairnctl.c). */
    int mech, rc = mech_of(x, &mech);
    if (rc)
        return rc;
    int32_t iter = o->iterations > 0 ? o->iterations : CN_SCRAM_ITER_MIN;
    char pw[1024];
    if (o->password) {
        snprintf(pw, sizeof pw, "%s", o->password);
    } else if (!fgets(pw, sizeof pw, stdin)) {
        fprintf(stderr, "cairnctl: 'users set' needs --password P or the "
                        "password on stdin\n");
        return EXIT_USAGE;
    }
    pw[strcspn(pw, "\r\n")] = '\0';
    if (!pw[0]) {
        fprintf(stderr, "cairnctl: empty password\n");
        return EXIT_USAGE;
    }
    uint8_t salt[CN_SCRAM_SALT_DEFAULT], salted[CN_SCRAM_KEY_MAX];
    if (RAND_bytes(salt, sizeof salt) != 1 ||
        cn_scram_salt_password(mech, pw, strlen(pw), salt, sizeof salt, iter,
                               salted) != 0) {
        OPENSSL_cleanse(pw, sizeof pw);
        fprintf(stderr, "cairnctl: cannot salt the password (iterations "
                        "must be %d..%d)\n",
                CN_SCRAM_ITER_MIN, CN_SCRAM_ITER_MAX);
        return EXIT_USAGE;
    }
    OPENSSL_cleanse(pw, sizeof pw);
    struct cn_scram_upsertion up = {
        .name = cn_bytes_str(o->user),
        .mechanism = (int8_t)mech,
        .iterations = iter,
        .salt = {salt, (int32_t)sizeof salt},
        .salted_password = {salted, (int32_t)cn_scram_key_len(mech)},
    };
    struct cn_alter_scram_req rq = {0, NULL, 1, &up};
    rc = alter(x, &rq);
    OPENSSL_cleanse(salted, sizeof salted);
    if (!rc)
        printf("set %s credential for user '%s'\n", cn_scram_mech_name(mech),
               o->user);
    return rc;
}

int cmd_users_delete(struct ctx *x)
{
    int mech, rc = mech_of(x, &mech);
    if (rc)
        return rc;
    struct cn_scram_deletion d = {cn_bytes_str(x->o->user), (int8_t)mech};
    struct cn_alter_scram_req rq = {1, &d, 0, NULL};
    rc = alter(x, &rq);
    if (!rc)
        printf("deleted %s credential of user '%s'\n",
               cn_scram_mech_name(mech), x->o->user);
    return rc;
}
