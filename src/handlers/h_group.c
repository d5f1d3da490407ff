/*
 * h_group.c - the classic group protocol's APIs: JoinGroup, SyncGroup,
 * Heartbeat, LeaveGroup, DescribeGroups, ListGroups.  Decoding and
 * encoding only: src/group/group.c decides.  JoinGroup and SyncGroup park
 * until the state machine answers through cn_gc_join_done /
 * cn_gc_sync_done.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "node/authz.h"
#include "base/clock.h"
#include "base/say.h"
#include "node/group_coord.h"
#include "node/group_int.h"
#include "handlers/handlers.h"
#include "proto/gen/msgs.h"
#include "proto/kerr.h"

/* What a parked JoinGroup or SyncGroup remembers (in the request arena). */
struct parked {
    struct cn_req *req;
    struct cn_req_header h;
};

static struct cn_bytes str_or_null(const char *s)
{
    return s ? cn_bytes_str(s) : CN_BYTES_NULL;
}

static struct cn_bytes str_or_empty(const char *s)
{
    return cn_bytes_str(s ? s : "");
}

/* NULL for a null wire string, else an arena copy. */
static const char *opt_cstr(struct cn_req *req, struct cn_bytes s)
{
    return cn_bytes_is_null(s) ? NULL : cn_gc_cstr(req, s);
}

/* Kafka shows a member's host as "/address". */
static const char *client_host(struct cn_req *req)
{
    const char *peer = cn_req_peer(req);
    size_t n = strlen(peer);
    const char *colon = strrchr(peer, ':');
    if (colon)
        n = (size_t)(colon - peer);
    char *out = cn_arena_alloc(&req->arena, n + 2);
    if (!out)
        return "";
    out[0] = '/';
    memcpy(out + 1, peer, n);
    out[n + 1] = '\0';
    return out;
}

/* ---- JoinGroup -------------------------------------------------------- */

void cn_gc_join_done(void *waiter, const struct cn_join_result *r)
{
    struct parked *pk = waiter;
    struct cn_req *req = pk->req;
    struct cn_join_group_response rs;
    cn_join_group_response_init(&rs);
    rs.error_code = r->error;
    rs.generation_id = r->generation;
    rs.protocol_type = str_or_null(r->protocol_type);
    /* Before v7 the protocol name is not nullable. */
    rs.protocol_name = pk->h.api_version >= 7 ? str_or_null(r->protocol_name)
                                              : str_or_empty(r->protocol_name);
    rs.leader = str_or_empty(r->leader);
    rs.skip_assignment = r->skip_assignment;
    rs.member_id = str_or_empty(r->member_id);
    rs.members_len = 0;
    if (r->nmembers) {
        rs.members = cn_arena_calloc(&req->arena, r->nmembers,
                                     sizeof *rs.members);
        if (rs.members) {
            rs.members_len = (int32_t)r->nmembers;
            for (size_t i = 0; i < r->nmembers; i++) {
                rs.members[i].member_id = cn_bytes_str(
                    r->members[i].member_id);
                rs.members[i].group_instance_id = str_or_null(
                    r->members[i].instance_id);
                rs.members[i].metadata =
                    cn_bytes_of(r->members[i].metadata,
                                (int32_t)r->members[i].metadata_len);
            }
        } else {
            rs.error_code = KAFKA_COORDINATOR_NOT_AVAILABLE;
        }
    }
    cn_resp_begin(req, &pk->h);
    cn_join_group_response_encode(&req->resp, pk->h.api_version, &rs);
    cn_req_done(req);
}

void cn_h_join_group(struct cn_broker *b, struct cn_req *req,
                     const struct cn_req_header *h, struct cn_rd *body)
{
    struct cn_join_group_request rq;
    int err = cn_join_group_request_decode(body, &req->arena, h->api_version,
                                           &rq);
    if (err) {
        cn_req_bad(req, h, err);
        return;
    }
    struct parked *pk = cn_arena_calloc(&req->arena, 1, sizeof *pk);
    size_t np = rq.protocols_len > 0 ? (size_t)rq.protocols_len : 0;
    struct cn_join_protocol *protos = cn_arena_calloc(&req->arena, np + 1,
                                                      sizeof *protos);
    if (!pk || !protos) {
        cn_req_bad(req, h, CN_ENOMEM);
        return;
    }
    pk->req = req;
    pk->h = *h;
    for (size_t i = 0; i < np; i++) {
        protos[i].name = cn_gc_cstr(req, rq.protocols[i].name);
        protos[i].metadata = rq.protocols[i].metadata.ptr;
        protos[i].metadata_len = rq.protocols[i].metadata.len > 0
                                     ? (size_t)rq.protocols[i].metadata.len
                                     : 0;
    }
    struct cn_join_req jr = {
        .group_id = cn_gc_cstr(req, rq.group_id),
        .member_id = cn_gc_cstr(req, rq.member_id),
        .instance_id = opt_cstr(req, rq.group_instance_id),
        .client_id = cn_bytes_is_null(h->client_id)
                         ? ""
                         : cn_gc_cstr(req, h->client_id),
        .client_host = client_host(req),
        .protocol_type = cn_gc_cstr(req, rq.protocol_type),
        .session_timeout_ms = rq.session_timeout_ms,
        .rebalance_timeout_ms = h->api_version >= 1 ? rq.rebalance_timeout_ms
                                                    : -1,
        .version = h->api_version,
        .protocols = protos,
        .nprotocols = np,
    };
    if (!jr.group_id || !jr.member_id || !jr.client_id || !jr.protocol_type) {
        cn_req_bad(req, h, CN_ENOMEM);
        return;
    }
    if (!cn_authz(b, req, CN_ACL_OP_READ, CN_ACL_RT_GROUP, rq.group_id)) {
        struct cn_join_result r = {.error = KAFKA_GROUP_AUTHORIZATION_FAILED,
                                   .generation = -1,
                                   .member_id = jr.member_id};
        cn_gc_join_done(pk, &r);
        return;
    }
    if (!b->gc || !cn_group_coord_partition(b, rq.group_id)) {
        struct cn_join_result r = {.error = KAFKA_COORDINATOR_NOT_AVAILABLE,
                                   .generation = -1,
                                   .member_id = jr.member_id};
        cn_gc_join_done(pk, &r);
        return;
    }
    int16_t owner = cn_group_coord_check(b, rq.group_id);
    if (owner) {
        struct cn_join_result r = {.error = owner,
                                   .generation = -1,
                                   .member_id = jr.member_id};
        cn_gc_join_done(pk, &r);
        return;
    }
    /* The answer may wait for other members' requests: out of the
     * broker-wide budget, or a full budget could hold those back. */
    cn_req_park(req);
    cn_groups_join(b->gc->groups, &jr, pk, cn_clock_wall_ms());
    cn_gc_rearm(b);
}

/* ---- SyncGroup --------------------------------------------------------- */

void cn_gc_sync_done(void *waiter, const struct cn_sync_result *r)
{
    struct parked *pk = waiter;
    struct cn_req *req = pk->req;
    struct cn_sync_group_response rs;
    cn_sync_group_response_init(&rs);
    rs.error_code = r->error;
    rs.protocol_type = str_or_null(r->protocol_type);
    rs.protocol_name = str_or_null(r->protocol_name);
    rs.assignment = cn_bytes_of(r->assignment ? r->assignment
                                              : (const uint8_t *)"",
                                (int32_t)r->assignment_len);
    cn_resp_begin(req, &pk->h);
    cn_sync_group_response_encode(&req->resp, pk->h.api_version, &rs);
    cn_req_done(req);
}

void cn_h_sync_group(struct cn_broker *b, struct cn_req *req,
                     const struct cn_req_header *h, struct cn_rd *body)
{
    struct cn_sync_group_request rq;
    int err = cn_sync_group_request_decode(body, &req->arena, h->api_version,
                                           &rq);
    if (err) {
        cn_req_bad(req, h, err);
        return;
    }
    struct parked *pk = cn_arena_calloc(&req->arena, 1, sizeof *pk);
    size_t na = rq.assignments_len > 0 ? (size_t)rq.assignments_len : 0;
    struct cn_sync_assignment *as = cn_arena_calloc(&req->arena, na + 1,
                                                    sizeof *as);
    if (!pk || !as) {
        cn_req_bad(req, h, CN_ENOMEM);
        return;
    }
    pk->req = req;
    pk->h = *h;
    for (size_t i = 0; i < na; i++) {
        as[i].member_id = cn_gc_cstr(req, rq.assignments[i].member_id);
        as[i].assignment = rq.assignments[i].assignment.ptr;
        as[i].len = rq.assignments[i].assignment.len > 0
                        ? (size_t)rq.assignments[i].assignment.len
                        : 0;
    }
    struct cn_sync_req sr = {
        .group_id = cn_gc_cstr(req, rq.group_id),
        .member_id = cn_gc_cstr(req, rq.member_id),
        .instance_id = opt_cstr(req, rq.group_instance_id),
        .generation = rq.generation_id,
        .protocol_type = opt_cstr(req, rq.protocol_type),
        .protocol_name = opt_cstr(req, rq.protocol_name),
        .assignments = as,
        .nassignments = na,
    };
    if (!sr.group_id || !sr.member_id) {
        cn_req_bad(req, h, CN_ENOMEM);
        return;
    }
    if (!cn_authz(b, req, CN_ACL_OP_READ, CN_ACL_RT_GROUP, rq.group_id)) {
        struct cn_sync_result r = {.error = KAFKA_GROUP_AUTHORIZATION_FAILED};
        cn_gc_sync_done(pk, &r);
        return;
    }
    if (!b->gc) {
        struct cn_sync_result r = {.error = KAFKA_COORDINATOR_NOT_AVAILABLE};
        cn_gc_sync_done(pk, &r);
        return;
    }
    int16_t owner = cn_group_coord_check(b, rq.group_id);
    if (owner) {
        struct cn_sync_result r = {.error = owner};
        cn_gc_sync_done(pk, &r);
        return;
    }
    cn_req_park(req); /* may wait for the leader's SyncGroup */
    cn_groups_sync(b->gc->groups, &sr, pk, cn_clock_wall_ms());
    cn_gc_rearm(b);
}

/* ---- Heartbeat, LeaveGroup -------------------------------------------- */

void cn_h_heartbeat(struct cn_broker *b, struct cn_req *req,
                    const struct cn_req_header *h, struct cn_rd *body)
{
    struct cn_heartbeat_request rq;
    int err = cn_heartbeat_request_decode(body, &req->arena, h->api_version,
                                          &rq);
    if (err) {
        cn_req_bad(req, h, err);
        return;
    }
    struct cn_heartbeat_response rs;
    cn_heartbeat_response_init(&rs);
    const char *group = cn_gc_cstr(req, rq.group_id);
    const char *member = cn_gc_cstr(req, rq.member_id);
    if (!cn_authz(b, req, CN_ACL_OP_READ, CN_ACL_RT_GROUP, rq.group_id))
        rs.error_code = KAFKA_GROUP_AUTHORIZATION_FAILED;
    else if (!b->gc || !group || !member)
        rs.error_code = KAFKA_COORDINATOR_NOT_AVAILABLE;
    else if (!(rs.error_code = cn_group_coord_check(b, rq.group_id)))
        rs.error_code = cn_groups_heartbeat(
            b->gc->groups, group, member, opt_cstr(req, rq.group_instance_id),
            rq.generation_id, cn_clock_wall_ms());
    cn_gc_rearm(b);
    cn_resp_begin(req, h);
    cn_heartbeat_response_encode(&req->resp, h->api_version, &rs);
    cn_req_done(req);
}

void cn_h_leave_group(struct cn_broker *b, struct cn_req *req,
                      const struct cn_req_header *h, struct cn_rd *body)
{
    struct cn_leave_group_request rq;
    int err = cn_leave_group_request_decode(body, &req->arena, h->api_version,
                                            &rq);
    if (err) {
        cn_req_bad(req, h, err);
        return;
    }
    struct cn_leave_group_response rs;
    cn_leave_group_response_init(&rs);
    rs.members_len = 0;
    bool batched = h->api_version >= 3;
    size_t n = batched ? (rq.members_len > 0 ? (size_t)rq.members_len : 0) : 1;
    struct cn_leave_member *lm = cn_arena_calloc(&req->arena, n + 1,
                                                 sizeof *lm);
    const char *group = cn_gc_cstr(req, rq.group_id);
    if (!lm || !group) {
        cn_req_bad(req, h, CN_ENOMEM);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        if (batched) {
            lm[i].member_id = cn_gc_cstr(req, rq.members[i].member_id);
            lm[i].instance_id = opt_cstr(req, rq.members[i].group_instance_id);
        } else {
            lm[i].member_id = cn_gc_cstr(req, rq.member_id);
        }
        if (!lm[i].member_id) {
            cn_req_bad(req, h, CN_ENOMEM);
            return;
        }
    }
    if (!cn_authz(b, req, CN_ACL_OP_READ, CN_ACL_RT_GROUP, rq.group_id)) {
        rs.error_code = KAFKA_GROUP_AUTHORIZATION_FAILED;
    } else if (!b->gc) {
        rs.error_code = KAFKA_COORDINATOR_NOT_AVAILABLE;
    } else if ((rs.error_code = cn_group_coord_check(b, rq.group_id))) {
        /* another broker's group */
    } else {
        rs.error_code = cn_groups_leave(b->gc->groups, group, lm, n,
                                        cn_clock_wall_ms());
        cn_gc_rearm(b);
    }
    if (batched && rs.error_code == KAFKA_NONE) {
        rs.members = cn_arena_calloc(&req->arena, n + 1, sizeof *rs.members);
        if (!rs.members) {
            cn_req_bad(req, h, CN_ENOMEM);
            return;
        }
        rs.members_len = (int32_t)n;
        for (size_t i = 0; i < n; i++) {
            rs.members[i].member_id = rq.members[i].member_id;
            rs.members[i].group_instance_id = rq.members[i].group_instance_id;
            rs.members[i].error_code = lm[i].error;
        }
    } else if (!batched && rs.error_code == KAFKA_NONE) {
        rs.error_code = lm[0].error;
    }
    cn_resp_begin(req, h);
    cn_leave_group_response_encode(&req->resp, h->api_version, &rs);
    cn_req_done(req);
}

/* ---- DescribeGroups, ListGroups ---------------------------------------- */

static void describe_one(struct cn_broker *b, struct cn_req *req,
                         struct cn_bytes wire_id,
                         struct cn_describe_groups_response_described_group *d)
{
    cn_describe_groups_response_described_group_init(d);
    d->group_id = wire_id;
    d->authorized_operations = INT32_MIN;
    d->members_len = 0;
    const char *id = cn_gc_cstr(req, wire_id);
    const struct cn_group *g = b->gc && id ? cn_groups_find(b->gc->groups, id)
                                           : NULL;
    if (!b->gc) {
        d->error_code = KAFKA_COORDINATOR_NOT_AVAILABLE;
        return;
    }
    if ((d->error_code = cn_group_coord_check(b, wire_id)))
        return;
    if (!g) {
        /* Kafka describes a group it does not have as Dead, no error. */
        d->group_state = cn_bytes_str(cn_group_state_name(CN_GROUP_DEAD));
        d->protocol_type = cn_bytes_str("");
        d->protocol_data = cn_bytes_str("");
        return;
    }
    d->group_state = cn_bytes_str(cn_group_state_name(cn_group_state(g)));
    d->protocol_type = cn_bytes_str(cn_group_protocol_type(g));
    d->protocol_data = str_or_empty(
        cn_group_state(g) == CN_GROUP_STABLE ? cn_group_protocol(g) : NULL);
    size_t n = cn_group_nmembers(g);
    d->members = cn_arena_calloc(&req->arena, n + 1, sizeof *d->members);
    if (!d->members) {
        d->error_code = KAFKA_COORDINATOR_NOT_AVAILABLE;
        return;
    }
    d->members_len = (int32_t)n;
    for (size_t i = 0; i < n; i++) {
        struct cn_member_info mi;
        cn_group_describe_member(g, i, &mi);
        struct cn_describe_groups_response_described_group_member *m =
            &d->members[i];
        /* The strings live in the state machine until its next change;
         * the response is encoded before that. */
        m->member_id = cn_bytes_str(mi.member_id);
        m->group_instance_id = str_or_null(mi.instance_id);
        m->client_id = str_or_empty(mi.client_id);
        m->client_host = str_or_empty(mi.client_host);
        m->member_metadata = cn_bytes_of(mi.metadata ? mi.metadata
                                                     : (const uint8_t *)"",
                                         (int32_t)mi.metadata_len);
        m->member_assignment = cn_bytes_of(mi.assignment ? mi.assignment
                                                         : (const uint8_t *)"",
                                           (int32_t)mi.assignment_len);
    }
}

void cn_h_describe_groups(struct cn_broker *b, struct cn_req *req,
                          const struct cn_req_header *h, struct cn_rd *body)
{
    struct cn_describe_groups_request rq;
    int err = cn_describe_groups_request_decode(body, &req->arena,
                                                h->api_version, &rq);
    if (err) {
        cn_req_bad(req, h, err);
        return;
    }
    struct cn_describe_groups_response rs;
    cn_describe_groups_response_init(&rs);
    int32_t n = rq.groups_len > 0 ? rq.groups_len : 0;
    rs.groups = cn_arena_calloc(&req->arena, (size_t)n + 1, sizeof *rs.groups);
    if (!rs.groups) {
        cn_req_bad(req, h, CN_ENOMEM);
        return;
    }
    rs.groups_len = n;
    for (int32_t i = 0; i < n; i++) {
        if (cn_authz(b, req, CN_ACL_OP_DESCRIBE, CN_ACL_RT_GROUP,
                     rq.groups[i])) {
            describe_one(b, req, rq.groups[i], &rs.groups[i]);
            continue;
        }
        struct cn_describe_groups_response_described_group *d = &rs.groups[i];
        cn_describe_groups_response_described_group_init(d);
        d->group_id = rq.groups[i];
        d->error_code = KAFKA_GROUP_AUTHORIZATION_FAILED;
        d->group_state = cn_bytes_str("");
        d->protocol_type = cn_bytes_str("");
        d->protocol_data = cn_bytes_str("");
        d->members_len = 0;
        d->authorized_operations = INT32_MIN;
    }
    cn_resp_begin(req, h);
    cn_describe_groups_response_encode(&req->resp, h->api_version, &rs);
    cn_req_done(req);
}

/* Filter strings as NUL-terminated copies. */
static const char **filter_strs(struct cn_req *req, const struct cn_bytes *v,
                                int32_t n)
{
    const char **out = cn_arena_calloc(&req->arena,
                                       (size_t)(n > 0 ? n : 0) + 1,
                                       sizeof *out);
    for (int32_t i = 0; out && i < n; i++)
        if (!(out[i] = cn_gc_cstr(req, v[i])))
            return NULL;
    return out;
}

void cn_h_list_groups(struct cn_broker *b, struct cn_req *req,
                      const struct cn_req_header *h, struct cn_rd *body)
{
    struct cn_list_groups_request rq;
    int err = cn_list_groups_request_decode(body, &req->arena, h->api_version,
                                            &rq);
    if (err) {
        cn_req_bad(req, h, err);
        return;
    }
    struct cn_list_groups_response rs;
    cn_list_groups_response_init(&rs);
    rs.groups_len = 0;
    int32_t ns = rq.states_filter_len > 0 ? rq.states_filter_len : 0;
    int32_t nty = rq.types_filter_len > 0 ? rq.types_filter_len : 0;
    const char **states = filter_strs(req, rq.states_filter, ns);
    const char **types = filter_strs(req, rq.types_filter, nty);
    size_t total = b->gc ? cn_groups_count(b->gc->groups) : 0;
    rs.groups = cn_arena_calloc(&req->arena, total + 1, sizeof *rs.groups);
    if (!states || !types || !rs.groups) {
        cn_req_bad(req, h, CN_ENOMEM);
        return;
    }
    if (!b->gc)
        rs.error_code = KAFKA_COORDINATOR_NOT_AVAILABLE;
    /* Filtered, not refused: DESCRIBE on the cluster lists every group,
     * else only the groups the caller may DESCRIBE. */
    bool all = cn_authz_quiet(b, req, CN_ACL_OP_DESCRIBE, CN_ACL_RT_CLUSTER,
                              cn_bytes_str(CN_ACL_CLUSTER_NAME));
    for (const struct cn_group *g = b->gc ? cn_groups_next(b->gc->groups, NULL)
                                          : NULL;
         g; g = cn_groups_next(b->gc->groups, g)) {
        if (!cn_group_list_match(g, states, (size_t)ns, types, (size_t)nty))
            continue;
        /* In cluster mode a broker lists the groups it coordinates (it
         * loaded every group its local log has). */
        if (cn_group_coord_check(b, cn_bytes_str(cn_group_id(g))))
            continue;
        if (!all &&
            !cn_authz_quiet(b, req, CN_ACL_OP_DESCRIBE, CN_ACL_RT_GROUP,
                            cn_bytes_str(cn_group_id(g))))
            continue;
        struct cn_list_groups_response_listed_group *lg =
            &rs.groups[rs.groups_len++];
        cn_list_groups_response_listed_group_init(lg);
        lg->group_id = cn_bytes_str(cn_group_id(g));
        lg->protocol_type = cn_bytes_str(cn_group_protocol_type(g));
        lg->group_state = cn_bytes_str(cn_group_state_name(cn_group_state(g)));
        lg->group_type = cn_bytes_str(cn_group_type(g));
    }
    cn_resp_begin(req, h);
    cn_list_groups_response_encode(&req->resp, h->api_version, &rs);
    cn_req_done(req);
}
