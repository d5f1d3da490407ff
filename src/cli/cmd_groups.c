/*
 * cmd_groups.c - cairnctl groups list|describe|reset-offsets|delete,
 * modelled on kafka-consumer-groups.sh.
 *
 * describe adds what the Kafka tool leaves out: each partition's last
 * stable offset (ListOffsets latest, read_committed) and the lag against
 * it beside the lag against the high watermark.  A read_committed consumer
 * can only reach the LSO, so while a transaction is open the two lags
 * diverge and the gap between them is the open transaction's doing.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/rd.h"
#include "cli/cli.h"
#include "proto/kerr.h"

#define COORDINATOR_GROUP 0 /* FindCoordinator key type */

/* The group states in which Kafka lets offsets be reset (no members). */
static bool group_inactive(struct cn_bytes state)
{
    return cli_cmp_bytes(state, cn_bytes_str("Empty")) == 0 ||
           cli_cmp_bytes(state, cn_bytes_str("Dead")) == 0;
}

/* Kafka's DescribeGroups (up to v5) says Dead for a group it does not
 * have; there is no error code for it. */
static bool group_dead(struct cn_bytes state)
{
    return cli_cmp_bytes(state, cn_bytes_str("Dead")) == 0;
}

/*
 * Reports a failure about group on stderr and, with --json, as an object
 * on stdout.  code may be KAFKA_NONE when why says it all.  Returns the
 * exit code.
 */
static int group_error(const struct opts *o, const char *what,
                       const char *group, int16_t code, const char *why)
{
    if (code == KAFKA_GROUP_ID_NOT_FOUND && !why)
        why = "the group does not exist";
    else if (code == KAFKA_NON_EMPTY_GROUP && !why)
        why = "the group has active members; stop its consumers first";
    if (code && why)
        fprintf(stderr, "cairnctl: %s '%s': %s (%s)\n", what, group, why,
                cn_kerr_name(code));
    else if (code)
        fprintf(stderr, "cairnctl: %s '%s': %s\n", what, group,
                cn_kerr_name(code));
    else
        fprintf(stderr, "cairnctl: %s '%s': %s\n", what, group, why);
    if (o->json) {
        fputs("{\"group_id\":", stdout);
        cli_json_str(stdout, group);
        fputs(",\"error\":", stdout);
        cli_json_str(stdout, code ? cn_kerr_name(code) : why);
        printf(",\"error_code\":%d,\"message\":", code);
        if (why)
            cli_json_str(stdout, why);
        else
            fputs("null", stdout);
        fputs("}\n", stdout);
    }
    return EXIT_FAIL;
}

/* ---- list ---------------------------------------------------------------- */

/* One ListGroups result, tagged with the broker that coordinates it. */
struct group_row {
    int32_t coordinator; /* node id */
    const struct cn_list_groups_response_listed_group *g;
};

static int cmp_group_row(const void *a, const void *b)
{
    const struct group_row *ra = a, *rb = b;

    return cli_cmp_bytes(ra->g->group_id, rb->g->group_id);
}

/*
 * Every broker coordinates some groups, so ListGroups goes to each broker
 * (as Kafka's admin client does) and the answers are merged, sorted by
 * group id, into *rows (arena).
 */
static int list_groups(struct ctx *x, struct group_row **rows_out,
                       int32_t *n_out)
{
    struct cn_metadata_response md;
    struct cn_list_groups_request rq;
    struct cn_list_groups_response *rs;
    struct group_row *rows;
    int32_t nbrokers, n = 0, cap = 0;

    if (cli_fetch_metadata(x, NULL, &md))
        return EXIT_FAIL;
    nbrokers = md.brokers_len > 0 ? md.brokers_len : 0;
    if (nbrokers == 0) {
        fprintf(stderr, "cairnctl: Metadata lists no brokers\n");
        return EXIT_FAIL;
    }
    rs = cn_arena_calloc(&x->arena, (size_t)nbrokers, sizeof *rs);
    if (!rs) {
        fprintf(stderr, "cairnctl: out of memory\n");
        return EXIT_FAIL;
    }
    cn_list_groups_request_init(&rq);
    rq.states_filter_len = 0;
    rq.types_filter_len = 0;
    for (int32_t b = 0; b < nbrokers; b++) {
        const struct cn_metadata_response_metadata_response_broker *br =
            &md.brokers[b];
        struct cn_kclient *c = cli_conn_to(x, br->host, br->port);
        int16_t v;

        if (!c)
            return EXIT_FAIL;
        v = cli_need_version(c, CN_API_LIST_GROUPS, "ListGroups");
        if (v < 0)
            return EXIT_FAIL;
        if (cli_call(c, CN_API_LIST_GROUPS, v, &rq, &rs[b], &x->arena))
            return EXIT_FAIL;
        if (rs[b].error_code) {
            fprintf(stderr, "cairnctl: cannot list groups on broker %d: %s\n",
                    br->node_id, cn_kerr_name(rs[b].error_code));
            return EXIT_FAIL;
        }
        if (rs[b].groups_len > 0)
            cap += rs[b].groups_len;
    }
    rows = cn_arena_calloc(&x->arena, (size_t)cap + 1, sizeof *rows);
    if (!rows) {
        fprintf(stderr, "cairnctl: out of memory\n");
        return EXIT_FAIL;
    }
    for (int32_t b = 0; b < nbrokers; b++)
        for (int32_t i = 0; i < rs[b].groups_len; i++) {
            rows[n].coordinator = md.brokers[b].node_id;
            rows[n++].g = &rs[b].groups[i];
        }
    qsort(rows, (size_t)n, sizeof *rows, cmp_group_row);
    *rows_out = rows;
    *n_out = n;
    return 0;
}

/* An empty or null string shown as "-", so every table cell has a word. */
static struct cn_bytes or_dash(struct cn_bytes b)
{
    return b.len > 0 ? b : cn_bytes_str("-");
}

int cmd_groups_list(struct ctx *x)
{
    struct group_row *rows;
    struct table t;
    int32_t n;

    if (list_groups(x, &rows, &n))
        return EXIT_FAIL;
    if (x->o->json) {
        putchar('[');
        for (int32_t i = 0; i < n; i++) {
            printf("%s{\"group_id\":", i ? "," : "");
            cli_json_bytes(stdout, rows[i].g->group_id);
            fputs(",\"state\":", stdout);
            /* ListGroups v4 brought the state; older brokers leave it out. */
            cli_json_bytes(stdout, rows[i].g->group_state.len > 0
                                       ? rows[i].g->group_state
                                       : CN_BYTES_NULL);
            fputs(",\"protocol_type\":", stdout);
            cli_json_bytes(stdout, rows[i].g->protocol_type);
            printf(",\"coordinator_id\":%d}", rows[i].coordinator);
        }
        puts("]");
        return 0;
    }
    if (cli_table_init(&t, &x->arena, 3, n))
        return EXIT_FAIL;
    cli_table_header(&t, (const char *const[]){"GROUP", "STATE",
                                               "PROTOCOL-TYPE"});
    for (int32_t i = 0; i < n; i++) {
        cli_table_row(&t);
        cli_table_set_bytes(&t, 0, rows[i].g->group_id);
        cli_table_set_bytes(&t, 1, or_dash(rows[i].g->group_state));
        cli_table_set_bytes(&t, 2, or_dash(rows[i].g->protocol_type));
    }
    cli_table_print(&t);
    return 0;
}

/* ---- one group's state and offsets ---------------------------------------- */

/* A partition the group has an offset for or a member owns. */
struct part_row {
    struct tp tp;      /* topic, partition, leader (-1: not in metadata) */
    bool has_tp;       /* false: a member that owns no partition */
    int64_t committed; /* committed offset, -1 none */
    int64_t hw;        /* high watermark, -1 unknown */
    int64_t lso;       /* last stable offset, -1 unknown */
    int64_t earliest;  /* log start offset (reset only), -1 unknown */
    const struct cn_describe_groups_response_described_group_member *m;
};

/* What describe and reset-offsets learn about one group. */
struct group_view {
    const char *id;     /* as given */
    int32_t coordinator; /* node id */
    const struct cn_describe_groups_response_described_group *g;
    struct part_row *rows; /* sorted by topic, partition */
    int32_t nrows;
    int32_t cap;           /* rows allocated */
};

static int cmp_part_row(const void *a, const void *b)
{
    const struct part_row *ra = a, *rb = b;
    int c;

    if (ra->has_tp != rb->has_tp)
        return ra->has_tp ? -1 : 1;
    c = cli_cmp_bytes(ra->tp.topic, rb->tp.topic);
    if (c)
        return c;
    return (ra->tp.partition > rb->tp.partition) -
           (ra->tp.partition < rb->tp.partition);
}

/* The row for topic-partition, added (no offset, no owner) if new; NULL
 * when the table is full. */
static struct part_row *view_row(struct group_view *gv, struct cn_bytes topic,
                                 int32_t partition)
{
    struct part_row *r;

    for (int32_t i = 0; i < gv->nrows; i++)
        if (gv->rows[i].has_tp && gv->rows[i].tp.partition == partition &&
            cli_cmp_bytes(gv->rows[i].tp.topic, topic) == 0)
            return &gv->rows[i];
    if (gv->nrows >= gv->cap)
        return NULL;
    r = &gv->rows[gv->nrows++];
    memset(r, 0, sizeof *r);
    r->tp.topic = topic;
    r->tp.partition = partition;
    r->tp.leader = -1;
    r->has_tp = true;
    r->committed = r->hw = r->lso = r->earliest = -1;
    return r;
}

/* A member's assignment, when the group speaks the consumer protocol. */
static int member_assignment(
    struct ctx *x,
    const struct cn_describe_groups_response_described_group_member *m,
    struct cn_consumer_protocol_assignment *a)
{
    struct cn_rd rd;
    int16_t version;

    cn_consumer_protocol_assignment_init(a);
    a->assigned_partitions_len = 0;
    if (m->member_assignment.len < 2)
        return 0; /* not assigned yet (a rebalance is under way) */
    cn_rd_init(&rd, m->member_assignment.ptr,
               (size_t)m->member_assignment.len);
    version = cn_rd_i16(&rd);
    /* Newer versions only add fields at the end (KIP-341, KIP-429). */
    if (version > CN_CONSUMER_PROTOCOL_ASSIGNMENT_MAX_VERSION)
        version = CN_CONSUMER_PROTOCOL_ASSIGNMENT_MAX_VERSION;
    if (version < 0 ||
        cn_consumer_protocol_assignment_decode(&rd, &x->arena, version, a) ||
        rd.err) {
        cn_consumer_protocol_assignment_init(a);
        a->assigned_partitions_len = 0;
        return CN_ECORRUPT;
    }
    return 0;
}

/*
 * DescribeGroups and OffsetFetch at the group's coordinator, then the
 * rows: every partition with a committed offset or an owner.  Fills
 * gv->g and gv->rows; the offsets of each row are not looked up yet.
 * A group that does not exist is reported (and EXIT_FAIL returned) only
 * when must_exist.
 */
static int view_group(struct ctx *x, const char *id, bool must_exist,
                      struct group_view *gv)
{
    const struct opts *o = x->o;
    struct cn_describe_groups_request drq;
    struct cn_describe_groups_response drs;
    struct cn_offset_fetch_request frq;
    struct cn_offset_fetch_request_offset_fetch_request_group fg;
    struct cn_offset_fetch_response frs;
    struct cn_bytes gid = cn_bytes_str(id), msg;
    struct cn_consumer_protocol_assignment *as;
    struct cn_kclient *c;
    bool consumer;
    int32_t cap = 0, nparts;
    int16_t v, code;

    memset(gv, 0, sizeof *gv);
    gv->id = id;
    if (cli_find_coordinator(x, COORDINATOR_GROUP, id, &c, &gv->coordinator,
                             &code, &msg))
        return EXIT_FAIL;
    if (code)
        return group_error(o, "cannot find the coordinator of group", id,
                           code, NULL);
    v = cli_need_version(c, CN_API_DESCRIBE_GROUPS, "DescribeGroups");
    if (v < 0)
        return EXIT_FAIL;
    cn_describe_groups_request_init(&drq);
    drq.groups = &gid;
    drq.groups_len = 1;
    if (cli_call(c, CN_API_DESCRIBE_GROUPS, v, &drq, &drs, &x->arena))
        return EXIT_FAIL;
    if (drs.groups_len < 1) {
        fprintf(stderr, "cairnctl: DescribeGroups response has no result\n");
        return EXIT_FAIL;
    }
    /* drs.groups points into the arena, not into drs. */
    /* cppcheck-suppress autoVariables */
    gv->g = &drs.groups[0];
    if (gv->g->error_code)
        return group_error(o, "cannot describe group", id,
                           gv->g->error_code, NULL);
    if (must_exist && group_dead(gv->g->group_state))
        return group_error(o, "cannot describe group", id,
                           KAFKA_GROUP_ID_NOT_FOUND, NULL);

    v = cli_need_version(c, CN_API_OFFSET_FETCH, "OffsetFetch");
    if (v < 0)
        return EXIT_FAIL;
    if (v < 2) {
        /* Fetching every topic's offsets (a null list) came in v2. */
        fprintf(stderr, "cairnctl: broker %s:%d has no OffsetFetch v2\n",
                c->host, c->port);
        return EXIT_FAIL;
    }
    cn_offset_fetch_request_init(&frq);
    cn_offset_fetch_request_offset_fetch_request_group_init(&fg);
    /* v8 batches groups (KIP-709); older versions take one group. */
    frq.group_id = gid;
    frq.topics = NULL;
    frq.topics_len = -1;
    fg.group_id = gid;
    fg.topics = NULL;
    fg.topics_len = -1;
    frq.groups = &fg;
    frq.groups_len = 1;
    /* What is committed now; pending transactional commits wait. */
    frq.require_stable = false;
    if (cli_call(c, CN_API_OFFSET_FETCH, v, &frq, &frs, &x->arena))
        return EXIT_FAIL;
    code = frs.error_code;
    if (v >= 8) {
        if (frs.groups_len < 1) {
            fprintf(stderr, "cairnctl: OffsetFetch response has no "
                            "result\n");
            return EXIT_FAIL;
        }
        code = frs.groups[0].error_code;
    }
    if (code)
        return group_error(o, "cannot fetch the offsets of group", id, code,
                           NULL);

    /* Room for every committed partition and every assigned one. */
    consumer = cli_cmp_bytes(gv->g->protocol_type,
                             cn_bytes_str("consumer")) == 0;
    as = cn_arena_calloc(&x->arena,
                         (size_t)(gv->g->members_len > 0 ? gv->g->members_len
                                                         : 0) + 1,
                         sizeof *as);
    if (!as) {
        fprintf(stderr, "cairnctl: out of memory\n");
        return EXIT_FAIL;
    }
    for (int32_t i = 0; i < gv->g->members_len; i++) {
        if (consumer && member_assignment(x, &gv->g->members[i], &as[i]))
            fprintf(stderr, "cairnctl: warning: cannot decode the "
                            "assignment of member '%.*s'\n",
                    (int)or_dash(gv->g->members[i].member_id).len,
                    (const char *)or_dash(gv->g->members[i].member_id).ptr);
        cap++; /* a member that owns nothing gets a row of its own */
        for (int32_t t = 0; t < as[i].assigned_partitions_len; t++)
            if (as[i].assigned_partitions[t].partitions_len > 0)
                cap += as[i].assigned_partitions[t].partitions_len;
    }
    nparts = v >= 8 ? frs.groups[0].topics_len : frs.topics_len;
    for (int32_t t = 0; t < nparts; t++) {
        int32_t np = v >= 8 ? frs.groups[0].topics[t].partitions_len
                            : frs.topics[t].partitions_len;
        if (np > 0)
            cap += np;
    }
    gv->rows = cn_arena_calloc(&x->arena, (size_t)cap + 1, sizeof *gv->rows);
    if (!gv->rows) {
        fprintf(stderr, "cairnctl: out of memory\n");
        return EXIT_FAIL;
    }
    gv->cap = cap;
    for (int32_t t = 0; t < nparts; t++) {
        struct cn_bytes topic = v >= 8 ? frs.groups[0].topics[t].name
                                       : frs.topics[t].name;
        int32_t np = v >= 8 ? frs.groups[0].topics[t].partitions_len
                            : frs.topics[t].partitions_len;
        for (int32_t p = 0; p < np; p++) {
            int32_t part;
            int64_t off;
            int16_t err;
            if (v >= 8) {
                part = frs.groups[0].topics[t].partitions[p].partition_index;
                off = frs.groups[0].topics[t].partitions[p].committed_offset;
                err = frs.groups[0].topics[t].partitions[p].error_code;
            } else {
                part = frs.topics[t].partitions[p].partition_index;
                off = frs.topics[t].partitions[p].committed_offset;
                err = frs.topics[t].partitions[p].error_code;
            }
            if (err || off < 0)
                continue;
            view_row(gv, topic, part)->committed = off;
        }
    }
    for (int32_t i = 0; i < gv->g->members_len; i++) {
        bool owns = false;
        for (int32_t t = 0; t < as[i].assigned_partitions_len; t++) {
            const struct cn_consumer_protocol_assignment_topic_partition *ap =
                &as[i].assigned_partitions[t];
            for (int32_t p = 0; p < ap->partitions_len; p++) {
                view_row(gv, ap->topic, ap->partitions[p])->m =
                    &gv->g->members[i];
                owns = true;
            }
        }
        if (!owns && gv->nrows < gv->cap) {
            struct part_row *r = &gv->rows[gv->nrows++];
            memset(r, 0, sizeof *r);
            r->committed = r->hw = r->lso = r->earliest = -1;
            r->tp.leader = -1;
            r->m = &gv->g->members[i];
        }
    }
    qsort(gv->rows, (size_t)gv->nrows, sizeof *gv->rows, cmp_part_row);
    return 0;
}

/* Each row's leader from md; -1 for a topic or partition md lacks. */
static void view_leaders(struct group_view *gv,
                         const struct cn_metadata_response *md)
{
    for (int32_t i = 0; i < gv->nrows; i++) {
        struct part_row *r = &gv->rows[i];
        r->tp.leader = -1;
        for (int32_t t = 0; r->has_tp && t < md->topics_len; t++) {
            if (md->topics[t].error_code ||
                cli_cmp_bytes(md->topics[t].name, r->tp.topic) != 0)
                continue;
            for (int32_t p = 0; p < md->topics[t].partitions_len; p++)
                if (md->topics[t].partitions[p].partition_index ==
                    r->tp.partition)
                    r->tp.leader = md->topics[t].partitions[p].leader_id;
        }
    }
}

/*
 * The high watermark and LSO of each row with a leader (and the log start
 * when earliest), asked of the leader.  Rows without a leader (a topic
 * since deleted) keep -1: "-" in the output.
 */
static int view_offsets(struct ctx *x, const struct cn_metadata_response *md,
                        struct group_view *gv, bool earliest)
{
    for (int32_t i = 0; i < gv->nrows; i++) {
        struct part_row *r = &gv->rows[i];
        struct cn_kclient *c;

        if (r->tp.leader < 0)
            continue;
        c = cli_node_conn(x, md, r->tp.leader);
        if (!c)
            return EXIT_FAIL;
        if (cli_list_offset(c, x, &r->tp, 0, -1, &r->hw) ||
            cli_list_offset(c, x, &r->tp, 1, -1, &r->lso))
            return EXIT_FAIL;
        if (earliest && cli_list_offset(c, x, &r->tp, 0, -2, &r->earliest))
            return EXIT_FAIL;
    }
    return 0;
}

/* ---- describe ---------------------------------------------------------- */

static void json_i64_or_null(const char *name, int64_t v, bool known)
{
    if (known)
        printf(",\"%s\":%lld", name, (long long)v);
    else
        printf(",\"%s\":null", name);
}

static void describe_json(const struct group_view *gv, bool first)
{
    const struct cn_describe_groups_response_described_group *g = gv->g;

    fputs(first ? "{\"group_id\":" : ",{\"group_id\":", stdout);
    cli_json_str(stdout, gv->id);
    printf(",\"coordinator_id\":%d,\"state\":", gv->coordinator);
    cli_json_bytes(stdout, g->group_state);
    fputs(",\"protocol_type\":", stdout);
    cli_json_bytes(stdout, g->protocol_type);
    fputs(",\"protocol\":", stdout);
    cli_json_bytes(stdout, g->protocol_data);
    fputs(",\"members\":[", stdout);
    for (int32_t i = 0; i < g->members_len; i++) {
        const struct cn_describe_groups_response_described_group_member *m =
            &g->members[i];
        bool firstp = true;
        fputs(i ? ",{\"member_id\":" : "{\"member_id\":", stdout);
        cli_json_bytes(stdout, m->member_id);
        fputs(",\"group_instance_id\":", stdout);
        cli_json_bytes(stdout, m->group_instance_id);
        fputs(",\"client_id\":", stdout);
        cli_json_bytes(stdout, m->client_id);
        fputs(",\"host\":", stdout);
        cli_json_bytes(stdout, m->client_host);
        fputs(",\"assignment\":[", stdout);
        for (int32_t k = 0; k < gv->nrows; k++) {
            if (gv->rows[k].m != m || !gv->rows[k].has_tp)
                continue;
            fputs(firstp ? "{\"topic\":" : ",{\"topic\":", stdout);
            cli_json_bytes(stdout, gv->rows[k].tp.topic);
            printf(",\"partition\":%d}", gv->rows[k].tp.partition);
            firstp = false;
        }
        fputs("]}", stdout);
    }
    fputs("],\"partitions\":[", stdout);
    for (int32_t k = 0, n = 0; k < gv->nrows; k++) {
        const struct part_row *r = &gv->rows[k];
        bool c = r->committed >= 0;
        if (!r->has_tp)
            continue;
        fputs(n++ ? ",{\"topic\":" : "{\"topic\":", stdout);
        cli_json_bytes(stdout, r->tp.topic);
        printf(",\"partition\":%d", r->tp.partition);
        json_i64_or_null("current_offset", r->committed, c);
        json_i64_or_null("log_end_offset", r->hw, r->hw >= 0);
        json_i64_or_null("lag", r->hw - r->committed, c && r->hw >= 0);
        json_i64_or_null("last_stable_offset", r->lso, r->lso >= 0);
        json_i64_or_null("lag_lso", r->lso - r->committed, c && r->lso >= 0);
        fputs(",\"member_id\":", stdout);
        cli_json_bytes(stdout, r->m ? r->m->member_id : CN_BYTES_NULL);
        putchar('}');
    }
    fputs("]}", stdout);
}

/* Sets a table cell to v, or "-" when unknown (as Kafka's tool prints). */
static void cell_i64(struct table *t, int col, int64_t v, bool known)
{
    if (known)
        cli_table_set(t, col, "%lld", (long long)v);
    else
        cli_table_set(t, col, "-");
}

static void describe_rows(struct table *t, const struct group_view *gv)
{
    for (int32_t k = 0; k < gv->nrows; k++) {
        const struct part_row *r = &gv->rows[k];
        bool c = r->committed >= 0;

        cli_table_row(t);
        cli_table_set(t, 0, "%s", gv->id);
        if (r->has_tp) {
            cli_table_set_bytes(t, 1, r->tp.topic);
            cli_table_set(t, 2, "%d", r->tp.partition);
        } else {
            cli_table_set(t, 1, "-");
            cli_table_set(t, 2, "-");
        }
        cell_i64(t, 3, r->committed, c);
        cell_i64(t, 4, r->hw, r->hw >= 0);
        cell_i64(t, 5, r->hw - r->committed, c && r->hw >= 0);
        cell_i64(t, 6, r->lso, r->lso >= 0);
        cell_i64(t, 7, r->lso - r->committed, c && r->lso >= 0);
        cli_table_set_bytes(t, 8, or_dash(r->m ? r->m->member_id
                                               : CN_BYTES_NULL));
        cli_table_set_bytes(t, 9, or_dash(r->m ? r->m->client_host
                                               : CN_BYTES_NULL));
        cli_table_set_bytes(t, 10, or_dash(r->m ? r->m->client_id
                                                : CN_BYTES_NULL));
    }
}

/*
 * The groups named by --group, or every group with --all-groups, each
 * with its members and, per partition, the committed offset, the high
 * watermark and the LSO, and the lag against both.
 */
int cmd_groups_describe(struct ctx *x)
{
    const struct opts *o = x->o;
    struct cn_metadata_response md;
    struct group_view *gv;
    const char **ids = o->groups;
    int32_t n = o->ngroups, nrows = 0;
    struct table t;

    if (o->seen & OPT_ALL_GROUPS) {
        struct group_row *rows;
        if (list_groups(x, &rows, &n))
            return EXIT_FAIL;
        ids = cn_arena_calloc(&x->arena, (size_t)n + 1, sizeof *ids);
        if (!ids) {
            fprintf(stderr, "cairnctl: out of memory\n");
            return EXIT_FAIL;
        }
        for (int32_t i = 0; i < n; i++)
            ids[i] = cn_arena_strdup(&x->arena, rows[i].g->group_id);
    }
    gv = cn_arena_calloc(&x->arena, (size_t)n + 1, sizeof *gv);
    if (!gv) {
        fprintf(stderr, "cairnctl: out of memory\n");
        return EXIT_FAIL;
    }
    /* All coordinator requests first: a leader's connection may replace
     * the coordinator's (cli_conn_to keeps one spare connection). */
    for (int32_t i = 0; i < n; i++)
        if (view_group(x, ids[i], true, &gv[i]))
            return EXIT_FAIL;
    if (cli_fetch_metadata(x, NULL, &md))
        return EXIT_FAIL;
    for (int32_t i = 0; i < n; i++) {
        view_leaders(&gv[i], &md);
        if (view_offsets(x, &md, &gv[i], false))
            return EXIT_FAIL;
        nrows += gv[i].nrows;
    }
    if (o->json) {
        putchar('[');
        for (int32_t i = 0; i < n; i++)
            describe_json(&gv[i], i == 0);
        puts("]");
        return 0;
    }
    /* Kafka's tool says these on stderr too, keeping the table clean. */
    for (int32_t i = 0; i < n; i++) {
        struct cn_bytes st = gv[i].g->group_state;
        if (cli_cmp_bytes(st, cn_bytes_str("Empty")) == 0)
            fprintf(stderr, "Consumer group '%s' has no active members.\n",
                    gv[i].id);
        else if (cli_cmp_bytes(st, cn_bytes_str("PreparingRebalance")) == 0 ||
                 cli_cmp_bytes(st, cn_bytes_str("CompletingRebalance")) == 0)
            fprintf(stderr, "Warning: Consumer group '%s' is rebalancing.\n",
                    gv[i].id);
    }
    if (cli_table_init(&t, &x->arena, 11, nrows))
        return EXIT_FAIL;
    cli_table_header(&t, (const char *const[]){
                             "GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET",
                             "LOG-END-OFFSET", "LAG", "LSO", "LAG-LSO",
                             "CONSUMER-ID", "HOST", "CLIENT-ID"});
    for (int32_t i = 0; i < n; i++)
        describe_rows(&t, &gv[i]);
    cli_table_print(&t);
    return 0;
}

/* ---- reset-offsets ------------------------------------------------------- */

/*
 * Marks the rows --topic T or T:P,P,... names (all of T's partitions when
 * no list), adding rows as needed; the unmarked rows are dropped.  Every
 * named partition must exist.
 */
static int select_reset_rows(struct ctx *x,
                             const struct cn_metadata_response *md,
                             struct group_view *gv)
{
    const struct opts *o = x->o;
    const char *colon = strchr(o->topic, ':');
    struct cn_bytes topic = cn_bytes_of(
        o->topic, (int32_t)(colon ? (size_t)(colon - o->topic)
                                  : strlen(o->topic)));
    const struct cn_metadata_response_metadata_response_topic *mt = NULL;
    struct part_row *rows;
    int32_t n = 0, cap;

    for (int32_t t = 0; t < md->topics_len; t++)
        if (!md->topics[t].error_code &&
            cli_cmp_bytes(md->topics[t].name, topic) == 0)
            mt = &md->topics[t];
    if (!mt) {
        fprintf(stderr, "cairnctl: cannot reset offsets: topic '%.*s' does "
                        "not exist (%s)\n",
                (int)topic.len, (const char *)topic.ptr,
                cn_kerr_name(KAFKA_UNKNOWN_TOPIC_OR_PARTITION));
        return EXIT_FAIL;
    }
    cap = mt->partitions_len > 0 ? mt->partitions_len : 0;
    rows = cn_arena_calloc(&x->arena, (size_t)cap + 1, sizeof *rows);
    if (!rows) {
        fprintf(stderr, "cairnctl: out of memory\n");
        return EXIT_FAIL;
    }
    for (int32_t p = 0; p < cap; p++) {
        int32_t part = mt->partitions[p].partition_index;
        bool want = !colon;
        struct part_row *r = NULL;

        /* The list was checked in parse_topic_parts(); look part up. */
        for (const char *s = colon; s && !want; s = strchr(s + 1, ','))
            want = strtol(s + 1, NULL, 10) == part;
        if (!want)
            continue;
        for (int32_t i = 0; i < gv->nrows; i++)
            if (gv->rows[i].has_tp && gv->rows[i].tp.partition == part &&
                cli_cmp_bytes(gv->rows[i].tp.topic, topic) == 0)
                r = &gv->rows[i];
        if (r) {
            rows[n] = *r;
        } else {
            memset(&rows[n], 0, sizeof rows[n]);
            rows[n].tp.topic = mt->name;
            rows[n].tp.partition = part;
            rows[n].has_tp = true;
            rows[n].committed = -1;
        }
        rows[n].tp.leader = mt->partitions[p].leader_id;
        n++;
    }
    /* Every listed partition must have been found. */
    for (const char *s = colon; s; s = strchr(s + 1, ',')) {
        long want = strtol(s + 1, NULL, 10);
        bool found = false;
        for (int32_t i = 0; i < n; i++)
            found |= rows[i].tp.partition == want;
        if (!found) {
            fprintf(stderr,
                    "cairnctl: cannot reset offsets: partition %ld of topic "
                    "'%.*s' does not exist (%s)\n",
                    want, (int)topic.len, (const char *)topic.ptr,
                    cn_kerr_name(KAFKA_UNKNOWN_TOPIC_OR_PARTITION));
            return EXIT_FAIL;
        }
    }
    gv->rows = rows;
    gv->nrows = n;
    gv->cap = cap;
    return 0;
}

/*
 * The new offset for r per the --to-* option, clamped to the partition's
 * [log start, high watermark] with a warning as Kafka's tool does.
 * Returns 0, or EXIT_FAIL when --shift-by has no committed offset to
 * shift.
 */
static int reset_target(const struct opts *o, const struct part_row *r,
                        int64_t *out)
{
    int64_t want;

    if (o->seen & OPT_TO_EARLIEST) {
        want = r->earliest;
    } else if (o->seen & OPT_TO_LATEST) {
        want = r->hw;
    } else if (o->seen & OPT_TO_OFFSET) {
        want = o->to_offset;
    } else {
        if (r->committed < 0) {
            fprintf(stderr,
                    "cairnctl: cannot shift the offset of %.*s-%d: the "
                    "group has no committed offset there\n",
                    (int)r->tp.topic.len, (const char *)r->tp.topic.ptr,
                    r->tp.partition);
            return EXIT_FAIL;
        }
        /* No overflow: both are far from the int64 limits in practice,
         * and an absurd shift is clamped below anyway. */
        if (o->shift_by > 0 && r->committed > INT64_MAX - o->shift_by)
            want = INT64_MAX;
        else
            want = r->committed + o->shift_by;
    }
    if (want > r->hw) {
        fprintf(stderr,
                "cairnctl: warning: new offset %lld is above the high "
                "watermark of %.*s-%d; using %lld\n",
                (long long)want, (int)r->tp.topic.len,
                (const char *)r->tp.topic.ptr, r->tp.partition,
                (long long)r->hw);
        want = r->hw;
    } else if (want < r->earliest) {
        fprintf(stderr,
                "cairnctl: warning: new offset %lld is below the log start "
                "of %.*s-%d; using %lld\n",
                (long long)want, (int)r->tp.topic.len,
                (const char *)r->tp.topic.ptr, r->tp.partition,
                (long long)r->earliest);
        want = r->earliest;
    }
    *out = want;
    return 0;
}

/*
 * OffsetCommit of the new offsets as an admin does (generation -1, no
 * member id), which the coordinator accepts only for a group without
 * members.  new_off[i] belongs to gv->rows[i].
 */
static int commit_offsets(struct ctx *x, const struct group_view *gv,
                          const int64_t *new_off)
{
    const struct opts *o = x->o;
    struct cn_offset_commit_request rq;
    struct cn_offset_commit_request_offset_commit_request_topic *topics;
    struct cn_offset_commit_request_offset_commit_request_partition *parts;
    struct cn_offset_commit_response rs;
    struct cn_kclient *c;
    struct cn_bytes msg;
    int32_t node, nt = 0;
    int16_t v, code;
    int rc = 0;

    if (cli_find_coordinator(x, COORDINATOR_GROUP, gv->id, &c, &node, &code,
                             &msg))
        return EXIT_FAIL;
    if (code)
        return group_error(o, "cannot find the coordinator of group", gv->id,
                           code, NULL);
    v = cli_need_version(c, CN_API_OFFSET_COMMIT, "OffsetCommit");
    if (v < 0)
        return EXIT_FAIL;
    topics = cn_arena_calloc(&x->arena, (size_t)gv->nrows + 1,
                             sizeof *topics);
    parts = cn_arena_calloc(&x->arena, (size_t)gv->nrows + 1, sizeof *parts);
    if (!topics || !parts) {
        fprintf(stderr, "cairnctl: out of memory\n");
        return EXIT_FAIL;
    }
    /* The rows are sorted, so each topic's partitions are adjacent. */
    for (int32_t i = 0; i < gv->nrows; i++) {
        const struct part_row *r = &gv->rows[i];
        if (!nt || cli_cmp_bytes(topics[nt - 1].name, r->tp.topic) != 0) {
            cn_offset_commit_request_offset_commit_request_topic_init(
                &topics[nt]);
            topics[nt].name = r->tp.topic;
            topics[nt].partitions = &parts[i];
            topics[nt].partitions_len = 0;
            nt++;
        }
        cn_offset_commit_request_offset_commit_request_partition_init(
            &parts[i]);
        parts[i].partition_index = r->tp.partition;
        parts[i].committed_offset = new_off[i];
        parts[i].committed_leader_epoch = -1;
        parts[i].commit_timestamp = -1;
        parts[i].committed_metadata = cn_bytes_str("");
        topics[nt - 1].partitions_len++;
    }
    cn_offset_commit_request_init(&rq);
    rq.group_id = cn_bytes_str(gv->id);
    rq.generation_id_or_member_epoch = -1;
    rq.member_id = cn_bytes_str("");
    rq.group_instance_id = CN_BYTES_NULL;
    rq.retention_time_ms = -1;
    rq.topics = topics;
    rq.topics_len = nt;
    if (cli_call(c, CN_API_OFFSET_COMMIT, v, &rq, &rs, &x->arena))
        return EXIT_FAIL;
    for (int32_t t = 0; t < rs.topics_len; t++)
        for (int32_t p = 0; p < rs.topics[t].partitions_len; p++) {
            int16_t err = rs.topics[t].partitions[p].error_code;
            if (!err)
                continue;
            fprintf(stderr,
                    "cairnctl: cannot commit the offset of %.*s-%d for "
                    "group '%s': %s%s\n",
                    (int)rs.topics[t].name.len,
                    (const char *)rs.topics[t].name.ptr,
                    rs.topics[t].partitions[p].partition_index, gv->id,
                    cn_kerr_name(err),
                    err == KAFKA_UNKNOWN_MEMBER_ID ||
                            err == KAFKA_ILLEGAL_GENERATION
                        ? " (a consumer joined the group meanwhile)"
                        : "");
            rc = EXIT_FAIL;
        }
    return rc;
}

/*
 * Resets the committed offsets of an inactive group (Empty, or Dead: not
 * yet existing) on the partitions --topic or --all-topics names; prints
 * the plan (--dry-run) or commits it (--execute).  A group with members
 * is refused: their next commit would overwrite the reset (Kafka's tool
 * refuses too).
 */
int cmd_groups_reset_offsets(struct ctx *x)
{
    const struct opts *o = x->o;
    struct cn_metadata_response md;
    struct group_view gv;
    int64_t *new_off;
    bool execute = o->seen & OPT_EXECUTE;
    struct table t;

    if (view_group(x, o->groups[0], false, &gv))
        return EXIT_FAIL;
    if (!group_inactive(gv.g->group_state)) {
        char why[256];
        snprintf(why, sizeof why,
                 "offsets can only be reset while the group is inactive, "
                 "but its state is %.*s; stop its consumers first",
                 (int)gv.g->group_state.len,
                 (const char *)gv.g->group_state.ptr);
        return group_error(o, "cannot reset offsets of group", gv.id,
                           KAFKA_NONE, why);
    }
    if (cli_fetch_metadata(x, NULL, &md))
        return EXIT_FAIL;
    if (o->seen & OPT_TOPIC) {
        if (select_reset_rows(x, &md, &gv))
            return EXIT_FAIL;
    } else {
        /* --all-topics: the partitions the group has offsets for. */
        int32_t n = 0;
        for (int32_t i = 0; i < gv.nrows; i++)
            if (gv.rows[i].has_tp && gv.rows[i].committed >= 0)
                gv.rows[n++] = gv.rows[i];
        gv.nrows = n;
        view_leaders(&gv, &md);
        if (n == 0)
            return group_error(o, "cannot reset offsets of group", gv.id,
                               group_dead(gv.g->group_state)
                                   ? KAFKA_GROUP_ID_NOT_FOUND
                                   : KAFKA_NONE,
                               group_dead(gv.g->group_state)
                                   ? NULL
                                   : "the group has no committed offsets");
    }
    for (int32_t i = 0; i < gv.nrows; i++)
        if (gv.rows[i].tp.leader < 0) {
            fprintf(stderr, "cairnctl: cannot reset offsets: %.*s-%d has no "
                            "leader\n",
                    (int)gv.rows[i].tp.topic.len,
                    (const char *)gv.rows[i].tp.topic.ptr,
                    gv.rows[i].tp.partition);
            return EXIT_FAIL;
        }
    if (view_offsets(x, &md, &gv, true))
        return EXIT_FAIL;
    new_off = cn_arena_calloc(&x->arena, (size_t)gv.nrows + 1,
                              sizeof *new_off);
    if (!new_off) {
        fprintf(stderr, "cairnctl: out of memory\n");
        return EXIT_FAIL;
    }
    for (int32_t i = 0; i < gv.nrows; i++)
        if (reset_target(o, &gv.rows[i], &new_off[i]))
            return EXIT_FAIL;
    if (execute && commit_offsets(x, &gv, new_off))
        return EXIT_FAIL;
    if (o->json) {
        fputs("{\"group_id\":", stdout);
        cli_json_str(stdout, gv.id);
        printf(",\"executed\":%s,\"partitions\":[", execute ? "true" : "false");
        for (int32_t i = 0; i < gv.nrows; i++) {
            const struct part_row *r = &gv.rows[i];
            fputs(i ? ",{\"topic\":" : "{\"topic\":", stdout);
            cli_json_bytes(stdout, r->tp.topic);
            printf(",\"partition\":%d", r->tp.partition);
            json_i64_or_null("previous_offset", r->committed,
                             r->committed >= 0);
            printf(",\"new_offset\":%lld}", (long long)new_off[i]);
        }
        puts("]}");
        return 0;
    }
    if (cli_table_init(&t, &x->arena, 5, gv.nrows))
        return EXIT_FAIL;
    cli_table_header(&t, (const char *const[]){
                             "GROUP", "TOPIC", "PARTITION", "NEW-OFFSET",
                             "PREVIOUS-OFFSET"});
    for (int32_t i = 0; i < gv.nrows; i++) {
        cli_table_row(&t);
        cli_table_set(&t, 0, "%s", gv.id);
        cli_table_set_bytes(&t, 1, gv.rows[i].tp.topic);
        cli_table_set(&t, 2, "%d", gv.rows[i].tp.partition);
        cli_table_set(&t, 3, "%lld", (long long)new_off[i]);
        cell_i64(&t, 4, gv.rows[i].committed, gv.rows[i].committed >= 0);
    }
    cli_table_print(&t);
    if (!execute)
        fprintf(stderr, "(dry run: nothing committed; --execute commits "
                        "these offsets)\n");
    return 0;
}

/* ---- delete -------------------------------------------------------------- */

/* DeleteGroups at each group's coordinator; the broker refuses a group
 * with members (NON_EMPTY_GROUP) or unknown (GROUP_ID_NOT_FOUND). */
int cmd_groups_delete(struct ctx *x)
{
    const struct opts *o = x->o;

    for (int32_t i = 0; i < o->ngroups; i++) {
        struct cn_delete_groups_request rq;
        struct cn_delete_groups_response rs;
        struct cn_bytes gid = cn_bytes_str(o->groups[i]), msg;
        struct cn_kclient *c;
        int32_t node;
        int16_t v, code;

        if (cli_find_coordinator(x, COORDINATOR_GROUP, o->groups[i], &c,
                                 &node, &code, &msg))
            return EXIT_FAIL;
        if (code)
            return group_error(o, "cannot find the coordinator of group",
                               o->groups[i], code, NULL);
        v = cli_need_version(c, CN_API_DELETE_GROUPS, "DeleteGroups");
        if (v < 0)
            return EXIT_FAIL;
        cn_delete_groups_request_init(&rq);
        rq.groups_names = &gid;
        rq.groups_names_len = 1;
        if (cli_call(c, CN_API_DELETE_GROUPS, v, &rq, &rs, &x->arena))
            return EXIT_FAIL;
        if (rs.results_len < 1) {
            fprintf(stderr, "cairnctl: DeleteGroups response has no "
                            "result\n");
            return EXIT_FAIL;
        }
        if (rs.results[0].error_code)
            return group_error(o, "cannot delete group", o->groups[i],
                               rs.results[0].error_code, NULL);
        if (o->json) {
            fputs("{\"group_id\":", stdout);
            cli_json_str(stdout, o->groups[i]);
            puts(",\"deleted\":true}");
        } else {
            printf("Deleted group %s.\n", o->groups[i]);
        }
    }
    return 0;
}
