/*
 * cmd_quotas.c - cairnctl quotas list|set|delete: DescribeClientQuotas and
 * AlterClientQuotas, with Kafka's entity types (user, client-id) and keys
 * (producer_byte_rate, consumer_byte_rate, request_percentage).  "<default>"
 * names the default entity, as kafka-configs.sh's --entity-default does.
 *
 * list prints one line per entity, sorted:
 *     user=alice,client-id=app producer_byte_rate=1024 request_percentage=25.5
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "proto/kerr.h"
#include "proto/quotas.h"

#define DEFAULT_NAME "<default>"

static int fail(const char *what, int16_t err, struct cn_bytes msg)
{
    fprintf(stderr, "cairnctl: %s: %s", what, cn_kerr_name(err));
    if (msg.len > 0)
        fprintf(stderr, " (%.*s)", msg.len, (const char *)msg.ptr);
    fputc('\n', stderr);
    return EXIT_FAIL;
}

static int16_t quota_version(struct cn_kclient *c, int16_t api,
                             const char *name)
{
    return cli_need_version(c, api, name);
}

/* The entity the options name: up to two parts. */
static int32_t entity_of(const struct opts *o, struct cn_cq_entity ents[2])
{
    int32_t n = 0;
    if (o->user) {
        ents[n].type = cn_bytes_str("user");
        ents[n++].name = strcmp(o->user, DEFAULT_NAME) == 0
                             ? CN_BYTES_NULL
                             : cn_bytes_str(o->user);
    }
    if (o->client_id) {
        ents[n].type = cn_bytes_str("client-id");
        ents[n++].name = strcmp(o->client_id, DEFAULT_NAME) == 0
                             ? CN_BYTES_NULL
                             : cn_bytes_str(o->client_id);
    }
    return n;
}

/* A value as an operator writes it: 1024, 25.5. */
static void put_value(FILE *f, double v)
{
    if (v == floor(v) && fabs(v) < 1e15)
        fprintf(f, "%.0f", v);
    else
        fprintf(f, "%.17g", v);
}

/* "user=alice,client-id=app" into buf (user first). */
static void entity_text(const struct cn_dcq_entry *e, char *buf, size_t n)
{
    size_t at = 0;
    buf[0] = '\0';
    for (int pass = 0; pass < 2; pass++)
        for (int32_t i = 0; i < e->entity_len; i++) {
            const struct cn_cq_entity *p = &e->entity[i];
            bool user = cn_bytes_eq_str(p->type, "user");
            if (user != (pass == 0))
                continue;
            int w = snprintf(buf + at, n - at, "%s%.*s=%.*s",
                             at ? "," : "", (int)p->type.len,
                             (const char *)p->type.ptr,
                             p->name.len < 0 ? (int)strlen(DEFAULT_NAME)
                                             : (int)p->name.len,
                             p->name.len < 0 ? DEFAULT_NAME
                                             : (const char *)p->name.ptr);
            if (w < 0 || (size_t)w >= n - at)
                return;
            at += (size_t)w;
        }
}

struct row {
    char entity[600];
    const struct cn_dcq_entry *e;
};

static int cmp_row(const void *a, const void *b)
{
    return strcmp(((const struct row *)a)->entity,
                  ((const struct row *)b)->entity);
}

static int describe(struct ctx *x, struct cn_kclient *c, bool exact,
                    struct cn_describe_client_quotas_response *rs)
{
    int16_t v = quota_version(c, CN_API_DESCRIBE_CLIENT_QUOTAS,
                              "DescribeClientQuotas");
    if (v < 0)
        return EXIT_FAIL;
    struct cn_cq_entity ents[2];
    int32_t n = entity_of(x->o, ents);
    struct cn_dcq_component comps[2];
    for (int32_t i = 0; i < n; i++) {
        comps[i].entity_type = ents[i].type;
        comps[i].match_type =
            ents[i].name.len < 0 ? CN_CQ_MATCH_DEFAULT : CN_CQ_MATCH_EXACT;
        comps[i].match = ents[i].name;
    }
    struct cn_describe_client_quotas_request rq = {comps, n, exact};
    if (cli_call(c, CN_API_DESCRIBE_CLIENT_QUOTAS, v, &rq, rs, &x->arena))
        return EXIT_FAIL;
    if (rs->error_code)
        return fail("DescribeClientQuotas", rs->error_code,
                    rs->error_message);
    return 0;
}

int cmd_quotas_list(struct ctx *x)
{
    struct cn_kclient *c = cli_admin_conn(x);
    if (!c)
        return EXIT_FAIL;
    struct cn_describe_client_quotas_response rs;
    int rc = describe(x, c, false, &rs);
    if (rc)
        return rc;
    int32_t n = rs.entries_len > 0 ? rs.entries_len : 0;
    struct row *rows = n ? calloc((size_t)n, sizeof *rows) : NULL;
    if (n && !rows) {
        fprintf(stderr, "cairnctl: out of memory\n");
        return EXIT_FAIL;
    }
    for (int32_t i = 0; i < n; i++) {
        rows[i].e = &rs.entries[i];
        entity_text(&rs.entries[i], rows[i].entity, sizeof rows[i].entity);
    }
    /* With no entries rows is NULL, which qsort must not be given. */
    if (n)
        qsort(rows, (size_t)n, sizeof *rows, cmp_row);
    if (x->o->json)
        putchar('[');
    for (int32_t i = 0; i < n; i++) {
        const struct cn_dcq_entry *e = rows[i].e;
        if (x->o->json) {
            printf("%s{\"entity\":{", i ? "," : "");
            for (int32_t j = 0; j < e->entity_len; j++) {
                printf("%s", j ? "," : "");
                cli_json_bytes(stdout, e->entity[j].type);
                putchar(':');
                if (e->entity[j].name.len < 0)
                    printf("null");
                else
                    cli_json_bytes(stdout, e->entity[j].name);
            }
            printf("},\"values\":{");
            for (int32_t j = 0; j < e->values_len; j++) {
                printf("%s", j ? "," : "");
                cli_json_bytes(stdout, e->values[j].key);
                putchar(':');
                put_value(stdout, e->values[j].value);
            }
            printf("}}");
            continue;
        }
        fputs(rows[i].entity, stdout);
        for (int32_t j = 0; j < e->values_len; j++) {
            printf(" %.*s=", (int)e->values[j].key.len,
                   (const char *)e->values[j].key.ptr);
            put_value(stdout, e->values[j].value);
        }
        putchar('\n');
    }
    if (x->o->json)
        printf("]\n");
    free(rows);
    return 0;
}

/* One AlterClientQuotas for the options' entity. */
static int alter(struct ctx *x, struct cn_kclient *c, struct cn_acq_op *ops,
                 int32_t nops)
{
    int16_t v = quota_version(c, CN_API_ALTER_CLIENT_QUOTAS,
                              "AlterClientQuotas");
    if (v < 0)
        return EXIT_FAIL;
    struct cn_cq_entity ents[2];
    struct cn_acq_entry e = {ents, entity_of(x->o, ents), ops, nops};
    struct cn_alter_client_quotas_request rq = {&e, 1, false};
    struct cn_alter_client_quotas_response rs;
    if (cli_call(c, CN_API_ALTER_CLIENT_QUOTAS, v, &rq, &rs, &x->arena))
        return EXIT_FAIL;
    for (int32_t i = 0; i < rs.entries_len; i++)
        if (rs.entries[i].error_code)
            return fail("AlterClientQuotas", rs.entries[i].error_code,
                        rs.entries[i].error_message);
    return 0;
}

int cmd_quotas_set(struct ctx *x)
{
    const struct opts *o = x->o;
    int32_t n = o->nsets + o->ndeletes;
    struct cn_acq_op *ops = cn_arena_calloc(&x->arena, (size_t)n, sizeof *ops);
    if (!ops) {
        fprintf(stderr, "cairnctl: out of memory\n");
        return EXIT_FAIL;
    }
    for (int i = 0; i < o->nsets; i++) {
        const char *eq = strchr(o->sets[i], '=');
        char *end = NULL;
        double v = eq ? strtod(eq + 1, &end) : 0;
        if (!eq || end == eq + 1 || *end || !isfinite(v)) {
            fprintf(stderr, "cairnctl: bad --set '%s' (want KEY=NUMBER)\n",
                    o->sets[i]);
            return EXIT_USAGE;
        }
        ops[i].key = (struct cn_bytes){(const uint8_t *)o->sets[i],
                                       (int32_t)(eq - o->sets[i])};
        ops[i].value = v;
    }
    for (int i = 0; i < o->ndeletes; i++) {
        ops[o->nsets + i].key = cn_bytes_str(o->deletes[i]);
        ops[o->nsets + i].remove = true;
    }
    struct cn_kclient *c = cli_admin_conn(x);
    if (!c)
        return EXIT_FAIL;
    return alter(x, c, ops, n);
}

int cmd_quotas_delete(struct ctx *x)
{
    const struct opts *o = x->o;
    struct cn_kclient *c = cli_admin_conn(x);
    if (!c)
        return EXIT_FAIL;
    if (o->ndeletes) {
        struct cn_acq_op *ops =
            cn_arena_calloc(&x->arena, (size_t)o->ndeletes, sizeof *ops);
        if (!ops)
            return EXIT_FAIL;
        for (int i = 0; i < o->ndeletes; i++) {
            ops[i].key = cn_bytes_str(o->deletes[i]);
            ops[i].remove = true;
        }
        return alter(x, c, ops, o->ndeletes);
    }
    /* Every key the entity has. */
    struct cn_describe_client_quotas_response rs;
    int rc = describe(x, c, true, &rs);
    if (rc)
        return rc;
    if (rs.entries_len <= 0) {
        fprintf(stderr, "cairnctl: no quotas set for that entity\n");
        return EXIT_FAIL;
    }
    const struct cn_dcq_entry *e = &rs.entries[0];
    struct cn_acq_op *ops = e->values_len > 0
                                ? cn_arena_calloc(&x->arena,
                                                  (size_t)e->values_len,
                                                  sizeof *ops)
                                : NULL;
    if (e->values_len > 0 && !ops)
        return EXIT_FAIL;
    for (int32_t i = 0; i < e->values_len; i++) {
        ops[i].key = e->values[i].key;
        ops[i].remove = true;
    }
    return alter(x, c, ops, e->values_len > 0 ? e->values_len : 0);
}
