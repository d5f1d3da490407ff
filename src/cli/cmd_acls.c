/*
 * cmd_acls.c - cairnctl acls list|add|remove: DescribeAcls, CreateAcls and
 * DeleteAcls, with Kafka's names for resource types, patterns, operations
 * and permissions (as kafka-acls.sh prints them).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acl/acl.h"
#include "cli/cli.h"
#include "proto/kerr.h"

/* The options as a filter (list, remove) or a binding (add). */
struct acl_args {
    int8_t rtype, pattern, op, perm;
    const char *name; /* NULL = any */
};

static int parse_args(struct ctx *x, bool binding, struct acl_args *a)
{
    const struct opts *o = x->o;
    char type[64];
    memset(a, 0, sizeof *a);
    a->rtype = CN_ACL_RT_ANY;
    if (o->resource) {
        const char *colon = strchr(o->resource, ':');
        size_t n = colon ? (size_t)(colon - o->resource) : strlen(o->resource);
        if (n >= sizeof type)
            n = sizeof type - 1;
        memcpy(type, o->resource, n);
        type[n] = '\0';
        a->rtype = (int8_t)cn_acl_rtype_parse(type);
        a->name = colon ? colon + 1 : NULL;
        if (a->rtype == CN_ACL_RT_CLUSTER && !a->name)
            a->name = CN_ACL_CLUSTER_NAME;
        if (!a->rtype) {
            fprintf(stderr, "cairnctl: unknown resource type '%s'\n", type);
            return EXIT_USAGE;
        }
        if (binding && !a->name) {
            fprintf(stderr, "cairnctl: --resource needs TYPE:NAME\n");
            return EXIT_USAGE;
        }
    }
    a->pattern = o->pattern ? (int8_t)cn_acl_pattern_parse(o->pattern)
                 : binding  ? CN_ACL_PT_LITERAL
                 : a->name  ? CN_ACL_PT_LITERAL
                            : CN_ACL_PT_ANY;
    a->op = o->operation ? (int8_t)cn_acl_op_parse(o->operation)
                         : CN_ACL_OP_ANY;
    a->perm = (o->seen & OPT_DENY) ? CN_ACL_PERM_DENY
              : binding            ? CN_ACL_PERM_ALLOW
                                   : CN_ACL_PERM_ANY;
    if (!a->pattern || !a->op) {
        fprintf(stderr, "cairnctl: unknown %s '%s'\n",
                a->pattern ? "operation" : "pattern type",
                a->pattern ? o->operation : o->pattern);
        return EXIT_USAGE;
    }
    return 0;
}

static int16_t acl_version(struct cn_kclient *c, int16_t api,
                           const char *name)
{
    int16_t v = cli_need_version(c, api, name);
    return v > 3 ? 3 : v;
}

static int fail(const char *what, int16_t err, struct cn_bytes msg)
{
    fprintf(stderr, "cairnctl: %s: %s", what, cn_kerr_name(err));
    if (msg.len > 0)
        fprintf(stderr, " (%.*s)", msg.len, (const char *)msg.ptr);
    fputc('\n', stderr);
    return EXIT_FAIL;
}

int cmd_acls_list(struct ctx *x)
{
    const struct opts *o = x->o;
    struct acl_args a;
    int rc = parse_args(x, false, &a);
    if (rc)
        return rc;
    struct cn_kclient *c = cli_admin_conn(x);
    if (!c)
        return EXIT_FAIL;
    int16_t v = acl_version(c, CN_API_DESCRIBE_ACLS, "DescribeAcls");
    if (v < 0)
        return EXIT_FAIL;
    struct cn_describe_acls_request rq;
    struct cn_describe_acls_response rs;
    cn_describe_acls_request_init(&rq);
    rq.resource_type_filter = a.rtype;
    rq.resource_name_filter = a.name ? cn_bytes_str(a.name) : CN_BYTES_NULL;
    rq.pattern_type_filter = a.pattern;
    rq.principal_filter =
        o->principal ? cn_bytes_str(o->principal) : CN_BYTES_NULL;
    rq.host_filter = o->host ? cn_bytes_str(o->host) : CN_BYTES_NULL;
    rq.operation = a.op;
    rq.permission_type = a.perm;
    if (cli_call(c, CN_API_DESCRIBE_ACLS, v, &rq, &rs, &x->arena))
        return EXIT_FAIL;
    if (rs.error_code)
        return fail("DescribeAcls", rs.error_code, rs.error_message);
    struct table t;
    int32_t nrows = 0;
    for (int32_t i = 0; i < rs.resources_len; i++)
        nrows += rs.resources[i].acls_len > 0 ? rs.resources[i].acls_len : 0;
    if (o->json)
        putchar('[');
    else if (cli_table_init(&t, &x->arena, 7, nrows + 1))
        return EXIT_FAIL;
    if (!o->json)
        cli_table_header(&t, (const char *const[]){
                                 "ResourceType", "Name", "PatternType",
                                 "Principal", "Host", "Operation",
                                 "Permission"});
    bool first = true;
    for (int32_t i = 0; i < rs.resources_len; i++) {
        const struct cn_describe_acls_response_describe_acls_resource *r =
            &rs.resources[i];
        for (int32_t j = 0; j < r->acls_len; j++) {
            const struct cn_describe_acls_response_acl_description *d =
                &r->acls[j];
            if (o->json) {
                printf("%s{\"resource_type\":\"%s\",\"name\":",
                       first ? "" : ",", cn_acl_rtype_name(r->resource_type));
                cli_json_bytes(stdout, r->resource_name);
                printf(",\"pattern_type\":\"%s\",\"principal\":",
                       cn_acl_pattern_name(r->pattern_type));
                cli_json_bytes(stdout, d->principal);
                fputs(",\"host\":", stdout);
                cli_json_bytes(stdout, d->host);
                printf(",\"operation\":\"%s\",\"permission\":\"%s\"}",
                       cn_acl_op_name(d->operation),
                       cn_acl_perm_name(d->permission_type));
                first = false;
                continue;
            }
            cli_table_row(&t);
            cli_table_set(&t, 0, "%s", cn_acl_rtype_name(r->resource_type));
            cli_table_set_bytes(&t, 1, r->resource_name);
            cli_table_set(&t, 2, "%s", cn_acl_pattern_name(r->pattern_type));
            cli_table_set_bytes(&t, 3, d->principal);
            cli_table_set_bytes(&t, 4, d->host);
            cli_table_set(&t, 5, "%s", cn_acl_op_name(d->operation));
            cli_table_set(&t, 6, "%s", cn_acl_perm_name(d->permission_type));
        }
    }
    if (o->json)
        puts("]");
    else
        cli_table_print(&t);
    return 0;
}

int cmd_acls_add(struct ctx *x)
{
    const struct opts *o = x->o;
    struct acl_args a;
    int rc = parse_args(x, true, &a);
    if (rc)
        return rc;
    struct cn_kclient *c = cli_admin_conn(x);
    if (!c)
        return EXIT_FAIL;
    int16_t v = acl_version(c, CN_API_CREATE_ACLS, "CreateAcls");
    if (v < 0)
        return EXIT_FAIL;
    struct cn_create_acls_request rq;
    struct cn_create_acls_request_acl_creation cr;
    struct cn_create_acls_response rs;
    cn_create_acls_request_init(&rq);
    cn_create_acls_request_acl_creation_init(&cr);
    cr.resource_type = a.rtype;
    cr.resource_name = cn_bytes_str(a.name);
    cr.resource_pattern_type = a.pattern;
    cr.principal = cn_bytes_str(o->principal);
    cr.host = cn_bytes_str(o->host ? o->host : "*");
    cr.operation = a.op;
    cr.permission_type = a.perm;
    rq.creations = &cr;
    rq.creations_len = 1;
    if (cli_call(c, CN_API_CREATE_ACLS, v, &rq, &rs, &x->arena))
        return EXIT_FAIL;
    if (rs.results_len < 1)
        return fail("CreateAcls", KAFKA_UNKNOWN_SERVER_ERROR, CN_BYTES_NULL);
    if (rs.results[0].error_code)
        return fail("CreateAcls", rs.results[0].error_code,
                    rs.results[0].error_message);
    if (o->json)
        puts("{\"added\":1}");
    else
        printf("Added ACL: %s %s %s:%s for %s from %s.\n",
               cn_acl_perm_name(a.perm), cn_acl_op_name(a.op),
               cn_acl_rtype_name(a.rtype), a.name, o->principal,
               o->host ? o->host : "*");
    return 0;
}

int cmd_acls_remove(struct ctx *x)
{
    const struct opts *o = x->o;
    struct acl_args a;
    int rc = parse_args(x, false, &a);
    if (rc)
        return rc;
    struct cn_kclient *c = cli_admin_conn(x);
    if (!c)
        return EXIT_FAIL;
    int16_t v = acl_version(c, CN_API_DELETE_ACLS, "DeleteAcls");
    if (v < 0)
        return EXIT_FAIL;
    struct cn_delete_acls_request rq;
    struct cn_delete_acls_request_delete_acls_filter f;
    struct cn_delete_acls_response rs;
    cn_delete_acls_request_init(&rq);
    cn_delete_acls_request_delete_acls_filter_init(&f);
    f.resource_type_filter = a.rtype;
    f.resource_name_filter = a.name ? cn_bytes_str(a.name) : CN_BYTES_NULL;
    f.pattern_type_filter = a.pattern;
    f.principal_filter =
        o->principal ? cn_bytes_str(o->principal) : CN_BYTES_NULL;
    f.host_filter = o->host ? cn_bytes_str(o->host) : CN_BYTES_NULL;
    f.operation = a.op;
    f.permission_type = a.perm;
    rq.filters = &f;
    rq.filters_len = 1;
    if (cli_call(c, CN_API_DELETE_ACLS, v, &rq, &rs, &x->arena))
        return EXIT_FAIL;
    if (rs.filter_results_len < 1)
        return fail("DeleteAcls", KAFKA_UNKNOWN_SERVER_ERROR, CN_BYTES_NULL);
    if (rs.filter_results[0].error_code)
        return fail("DeleteAcls", rs.filter_results[0].error_code,
                    rs.filter_results[0].error_message);
    int32_t n = rs.filter_results[0].matching_acls_len;
    if (o->json)
        printf("{\"removed\":%d}\n", n > 0 ? n : 0);
    else
        printf("Removed %d ACL%s.\n", n > 0 ? n : 0, n == 1 ? "" : "s");
    return 0;
}
