/*
 * test_kclient.c - cairnctl's blocking Kafka client against a scripted
 * fake broker on 127.0.0.1 (a thread), for what a real broker will not do:
 * refuse ApiVersions v3, lie about correlation ids, hang, hang up; and a
 * SASL listener whose SaslAuthenticate runs the server state machine
 * (src/sec), for the client's login steps and their errors.
 *
 * kclient.c belongs to the cairnctl executable, not cairn_core, so it is
 * compiled into this test directly.
 */
#include <arpa/inet.h>
#include <pthread.h>

#include "cli/kclient.c"
#include "sec/sasl.h"
#include "unit.h"

/* ---- fake broker ------------------------------------------------------ */

struct fake {
    int lfd;                    /* listening socket */
    int port;                   /* its port */
    pthread_t thread;           /* runs script */
    void (*script)(int fd);     /* the conversation, on the accepted fd */
};

static bool read_full(int fd, uint8_t *p, size_t n)
{
    while (n > 0) {
        ssize_t r = recv(fd, p, n, 0);
        if (r <= 0)
            return false;
        p += r;
        n -= (size_t)r;
    }
    return true;
}

/*
 * Reads one request frame; returns its header and leaves the body in *body
 * (a view into *buf, which the caller frees).  False when the peer closed.
 */
static bool srv_read(int fd, struct cn_req_header *h, uint8_t **buf,
                     struct cn_rd *body)
{
    uint8_t sz[4];
    uint32_t len;

    *buf = NULL;
    if (!read_full(fd, sz, 4))
        return false;
    len = (uint32_t)sz[0] << 24 | (uint32_t)sz[1] << 16 |
          (uint32_t)sz[2] << 8 | sz[3];
    *buf = malloc(len ? len : 1);
    if (!*buf || !read_full(fd, *buf, len))
        return false;
    cn_rd_init(body, *buf, len);
    return cn_req_header_decode(body, h) >= 0;
}

/* Sends correlation id (+ empty tags when flex_hdr) and body as a frame. */
static void srv_reply(int fd, int32_t corr, bool flex_hdr,
                      const struct cn_wr *body)
{
    struct cn_wr wr;
    size_t off;

    cn_wr_init(&wr, 64);
    off = cn_wr_reserve(&wr, 4);
    cn_wr_i32(&wr, corr);
    if (flex_hdr)
        cn_wr_empty_tags(&wr);
    cn_wr_raw(&wr, body->buf, body->len);
    cn_wr_patch_i32(&wr, off, (int32_t)(wr.len - 4));
    CHECK(send(fd, wr.buf, wr.len, MSG_NOSIGNAL) == (ssize_t)wr.len);
    cn_wr_fini(&wr);
}

static void *fake_main(void *arg)
{
    struct fake *f = arg;
    int fd = accept(f->lfd, NULL, NULL);

    if (fd >= 0) {
        f->script(fd);
        close(fd);
    }
    return NULL;
}

static void fake_start(struct fake *f, void (*script)(int fd))
{
    struct sockaddr_in sa;
    socklen_t len = sizeof sa;

    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    f->lfd = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(f->lfd >= 0);
    CHECK(bind(f->lfd, (struct sockaddr *)&sa, sizeof sa) == 0);
    CHECK(listen(f->lfd, 4) == 0);
    CHECK(getsockname(f->lfd, (struct sockaddr *)&sa, &len) == 0);
    f->port = ntohs(sa.sin_port);
    f->script = script;
    CHECK(pthread_create(&f->thread, NULL, fake_main, f) == 0);
}

static void fake_stop(struct fake *f)
{
    pthread_join(f->thread, NULL);
    close(f->lfd);
}

/* ApiVersions v0 body listing Metadata 0-9, ApiVersions 0-3 and
 * CreateTopics 2-99 (more than our codec knows). */
static void api_versions_v0(struct cn_wr *wr, int16_t error)
{
    struct cn_api_versions_response rs;
    struct cn_api_versions_response_api_version keys[3] = {
        {3, 0, 9}, {18, 0, 3}, {19, 2, 99}};

    cn_api_versions_response_init(&rs);
    rs.error_code = error;
    rs.api_keys = keys;
    rs.api_keys_len = 3;
    cn_api_versions_response_encode(wr, 0, &rs);
}

/* ---- scripts ---------------------------------------------------------- */

static void script_old_broker(int fd)
{
    struct cn_req_header h;
    struct cn_rd body;
    struct cn_wr wr;
    uint8_t *buf;

    /* 1: v3 is refused the way Kafka does it, with a v0 body. */
    CHECK(srv_read(fd, &h, &buf, &body));
    CHECK_EQ(h.api_key, 18);
    CHECK_EQ(h.api_version, 3);
    CHECK(cn_bytes_eq_str(h.client_id, "cairnctl"));
    cn_wr_init(&wr, 64);
    api_versions_v0(&wr, KAFKA_UNSUPPORTED_VERSION);
    srv_reply(fd, h.correlation_id, false, &wr);
    cn_wr_fini(&wr);
    free(buf);

    /* 2: the v0 retry. */
    CHECK(srv_read(fd, &h, &buf, &body));
    CHECK_EQ(h.api_key, 18);
    CHECK_EQ(h.api_version, 0);
    cn_wr_init(&wr, 64);
    api_versions_v0(&wr, 0);
    srv_reply(fd, h.correlation_id, false, &wr);
    cn_wr_fini(&wr);
    free(buf);

    /* 3: Metadata at the negotiated v9 (flexible: response header v1). */
    CHECK(srv_read(fd, &h, &buf, &body));
    CHECK_EQ(h.api_key, 3);
    CHECK_EQ(h.api_version, 9);
    {
        struct cn_metadata_request rq;
        struct cn_metadata_response rs;
        struct cn_metadata_response_metadata_response_broker br = {
            7, cn_bytes_str("fakehost"), 9092, CN_BYTES_NULL};
        struct cn_metadata_response_metadata_response_topic t;
        struct cn_arena a;

        cn_arena_init(&a);
        CHECK_EQ(cn_metadata_request_decode(&body, &a, 9, &rq), 0);
        CHECK_EQ(rq.topics_len, 1);
        CHECK(rq.topics_len == 1 &&
              cn_bytes_eq_str(rq.topics[0].name, "t1"));
        cn_arena_fini(&a);

        cn_metadata_response_init(&rs);
        cn_metadata_response_metadata_response_topic_init(&t);
        t.name = cn_bytes_str("t1");
        t.partitions_len = 0;
        rs.brokers = &br;
        rs.brokers_len = 1;
        rs.controller_id = 7;
        rs.cluster_id = cn_bytes_str("fake-cluster");
        rs.topics = &t;
        rs.topics_len = 1;
        cn_wr_init(&wr, 64);
        cn_metadata_response_encode(&wr, 9, &rs);
        srv_reply(fd, h.correlation_id, true, &wr);
        cn_wr_fini(&wr);
    }
    free(buf);

    /* 4: an answer to someone else's request. */
    CHECK(srv_read(fd, &h, &buf, &body));
    cn_wr_init(&wr, 64);
    cn_wr_i32(&wr, 0);
    srv_reply(fd, h.correlation_id + 100, true, &wr);
    cn_wr_fini(&wr);
    free(buf);
}

/* Reads the request and never answers, until the client gives up. */
static void script_silent(int fd)
{
    char b[256];

    while (recv(fd, b, sizeof b, 0) > 0)
        ;
}

static void script_hang_up(int fd)
{
    (void)fd;
}

/* A SASL listener: ApiVersions (v3 refused, v0), SaslHandshake v1
 * offering sasl_offer, then SaslAuthenticate v2 rounds through
 * cn_scram_server with sasl_cred for "alice"; a refusal is answered with
 * SASL_AUTHENTICATION_FAILED and a hang-up, as Kafka does. */
static const char *sasl_offer;
static struct cn_scram_cred sasl_cred;

static int sasl_lookup(void *opaque, const char *user, int mech,
                       struct cn_scram_cred *out)
{
    (void)opaque;
    if (strcmp(user, "alice") || mech != sasl_cred.mech)
        return -1;
    *out = sasl_cred;
    return 0;
}

static void script_sasl(int fd)
{
    struct cn_req_header h;
    struct cn_rd body;
    struct cn_wr wr;
    struct cn_arena a;
    uint8_t *buf;
    struct cn_api_versions_response av;
    struct cn_api_versions_response_api_version keys[4] = {
        {3, 0, 9}, {17, 0, 1}, {18, 0, 3}, {36, 0, 2}};

    for (int16_t code = KAFKA_UNSUPPORTED_VERSION;; code = 0) {
        if (!srv_read(fd, &h, &buf, &body))
            return;
        free(buf);
        cn_api_versions_response_init(&av);
        av.error_code = code;
        av.api_keys = keys;
        av.api_keys_len = 4;
        cn_wr_init(&wr, 64);
        cn_api_versions_response_encode(&wr, 0, &av);
        srv_reply(fd, h.correlation_id, false, &wr);
        cn_wr_fini(&wr);
        if (!code)
            break;
    }

    struct cn_sasl_handshake_request hq;
    struct cn_sasl_handshake_response hs;
    struct cn_bytes offer = cn_bytes_str(sasl_offer);
    cn_arena_init(&a);
    if (!srv_read(fd, &h, &buf, &body))
        goto out;
    CHECK_EQ(h.api_key, 17);
    CHECK_EQ(h.api_version, 1);
    CHECK_EQ(cn_sasl_handshake_request_decode(&body, &a, 1, &hq), 0);
    cn_sasl_handshake_response_init(&hs);
    hs.mechanisms = &offer;
    hs.mechanisms_len = 1;
    if (!cn_bytes_eq(hq.mechanism, offer))
        hs.error_code = KAFKA_UNSUPPORTED_SASL_MECHANISM;
    free(buf); /* hq points into it */
    cn_wr_init(&wr, 64);
    cn_sasl_handshake_response_encode(&wr, 1, &hs);
    srv_reply(fd, h.correlation_id, false, &wr);
    cn_wr_fini(&wr);
    if (hs.error_code)
        goto out;

    struct cn_scram_server ss;
    cn_scram_server_init(&ss, sasl_cred.mech);
    while (ss.state != CN_SCRAM_DONE) {
        struct cn_sasl_authenticate_request aq;
        struct cn_sasl_authenticate_response as;
        uint8_t ans[1024];
        size_t n = 0;
        char why[256] = "";
        if (!srv_read(fd, &h, &buf, &body))
            goto out;
        CHECK_EQ(h.api_key, 36);
        CHECK_EQ(h.api_version, 2);
        CHECK_EQ(cn_sasl_authenticate_request_decode(&body, &a, 2, &aq), 0);
        int rc = cn_scram_server_step(&ss, aq.auth_bytes.ptr,
                                      (size_t)aq.auth_bytes.len, sasl_lookup,
                                      NULL, ans, sizeof ans, &n, why,
                                      sizeof why);
        free(buf);
        cn_sasl_authenticate_response_init(&as);
        if (rc) {
            as.error_code = KAFKA_SASL_AUTHENTICATION_FAILED;
            as.error_message = cn_bytes_str(why);
        } else {
            as.auth_bytes.ptr = ans;
            as.auth_bytes.len = (int32_t)n;
        }
        cn_wr_init(&wr, 64);
        cn_sasl_authenticate_response_encode(&wr, 2, &as);
        srv_reply(fd, h.correlation_id, true, &wr);
        cn_wr_fini(&wr);
        if (rc)
            goto out;
    }
out:
    cn_arena_fini(&a);
}

static int sasl_connect(int mech, const char *offer, const char *pw,
                        bool bad_server_key, char *err, size_t err_len)
{
    struct fake f;
    struct cn_kclient c;
    struct cn_kclient_sec sec;
    int rc;

    CHECK_EQ(cn_scram_cred_from_password(CN_SCRAM_SHA256, "alice-secret",
                                         12, NULL, 0, 4096, &sasl_cred),
             0);
    if (bad_server_key)
        sasl_cred.server_key[3] ^= 0x10;
    sasl_offer = offer;
    memset(&sec, 0, sizeof sec);
    sec.sasl = mech;
    sec.user = "alice";
    sec.password = pw;
    fake_start(&f, script_sasl);
    cn_kclient_init(&c);
    c.sec = &sec;
    rc = cn_kclient_connect(&c, "127.0.0.1", f.port, 5000);
    snprintf(err, err_len, "%s", c.err);
    cn_kclient_close(&c);
    fake_stop(&f);
    return rc;
}

UNIT_TEST(sasl_scram_login_and_refusals)
{
    char err[512];

    CHECK_EQ(sasl_connect(CN_KCLIENT_SASL_SCRAM_SHA256, "SCRAM-SHA-256",
                          "alice-secret", false, err, sizeof err),
             0);
    CHECK_EQ(sasl_connect(CN_KCLIENT_SASL_SCRAM_SHA256, "SCRAM-SHA-256",
                          "wrong", false, err, sizeof err),
             -EACCES);
    CHECK(strstr(err, "SASL authentication failed: "
                      "SASL_AUTHENTICATION_FAILED: Authentication failed"));
    /* A server that does not know the credential is caught by us. */
    CHECK_EQ(sasl_connect(CN_KCLIENT_SASL_SCRAM_SHA256, "SCRAM-SHA-256",
                          "alice-secret", true, err, sizeof err),
             CN_EINVAL);
    CHECK(strstr(err, "SCRAM-SHA-256: SCRAM server signature does not "
                      "match"));
    CHECK_EQ(sasl_connect(CN_KCLIENT_SASL_SCRAM_SHA512, "SCRAM-SHA-256",
                          "alice-secret", false, err, sizeof err),
             -EACCES);
    CHECK(strstr(err, "UNSUPPORTED_SASL_MECHANISM: the broker enables "
                      "[SCRAM-SHA-256], not SCRAM-SHA-512"));
    CHECK(strstr(err, "cannot connect to 127.0.0.1:"));
}

/* ---- tests ------------------------------------------------------------ */

UNIT_TEST(parse_addr)
{
    char host[64];
    int port = 0;

    CHECK_EQ(cn_kclient_parse_addr("127.0.0.1:9092", host, sizeof host,
                                   &port), 0);
    CHECK(strcmp(host, "127.0.0.1") == 0);
    CHECK_EQ(port, 9092);
    CHECK_EQ(cn_kclient_parse_addr("[::1]:19092", host, sizeof host, &port),
             0);
    CHECK(strcmp(host, "::1") == 0);
    CHECK_EQ(port, 19092);
    CHECK_EQ(cn_kclient_parse_addr("broker-1", host, sizeof host, &port), 0);
    CHECK(strcmp(host, "broker-1") == 0);
    CHECK_EQ(port, 9092);
    CHECK_EQ(cn_kclient_parse_addr("[fe80::1]", host, sizeof host, &port),
             0);
    CHECK(strcmp(host, "fe80::1") == 0);

    CHECK_EQ(cn_kclient_parse_addr("", host, sizeof host, &port), CN_EINVAL);
    CHECK_EQ(cn_kclient_parse_addr(":9092", host, sizeof host, &port),
             CN_EINVAL);
    CHECK_EQ(cn_kclient_parse_addr("h:0", host, sizeof host, &port),
             CN_EINVAL);
    CHECK_EQ(cn_kclient_parse_addr("h:65536", host, sizeof host, &port),
             CN_EINVAL);
    CHECK_EQ(cn_kclient_parse_addr("h:12x", host, sizeof host, &port),
             CN_EINVAL);
    CHECK_EQ(cn_kclient_parse_addr("[::1", host, sizeof host, &port),
             CN_EINVAL);
    CHECK_EQ(cn_kclient_parse_addr("[::1]x", host, sizeof host, &port),
             CN_EINVAL);
    CHECK_EQ(cn_kclient_parse_addr("averyveryverylonghostname:1", host, 8,
                                   &port),
             CN_EINVAL);
}

UNIT_TEST(version_fallback_call_and_bad_correlation)
{
    struct fake f;
    struct cn_kclient c, ctl, *out = NULL;
    struct cn_metadata_request rq;
    struct cn_metadata_request_metadata_request_topic t;
    struct cn_metadata_response rs;
    struct cn_arena a;

    fake_start(&f, script_old_broker);
    cn_kclient_init(&c);
    cn_kclient_init(&ctl);
    CHECK_EQ(cn_kclient_connect(&c, "127.0.0.1", f.port, 5000), 0);

    /* Highest common version, capped by our codec. */
    CHECK_EQ(cn_kclient_version(&c, 3), 9);
    CHECK_EQ(cn_kclient_version(&c, 19),
             cn_api_info_get(19)->max_version -
                 (cn_api_info_get(19)->latest_unstable ? 1 : 0));
    CHECK_EQ(cn_kclient_version(&c, 0), -1); /* Produce: not offered */
    CHECK_EQ(cn_kclient_version(&c, 1000), -1);

    cn_arena_init(&a);
    cn_metadata_request_init(&rq);
    memset(&t, 0, sizeof t);
    t.name = cn_bytes_str("t1");
    rq.topics = &t;
    rq.topics_len = 1;
    CHECK_EQ(cn_kclient_call(&c, 3, 9, &rq, &rs, &a), 0);
    CHECK_EQ(rs.controller_id, 7);
    CHECK_EQ(rs.brokers_len, 1);
    CHECK(rs.brokers_len == 1 &&
          cn_bytes_eq_str(rs.brokers[0].host, "fakehost"));
    CHECK(cn_bytes_eq_str(rs.cluster_id, "fake-cluster"));
    CHECK(rs.topics_len == 1 && cn_bytes_eq_str(rs.topics[0].name, "t1"));

    /* Versions our codec does not have are refused before sending. */
    CHECK_EQ(cn_kclient_call(&c, 3, 99, &rq, &rs, &a), CN_EUNSUPPORTED);

    CHECK_EQ(cn_kclient_call(&c, 3, 9, &rq, &rs, &a), CN_ECORRUPT);
    CHECK(strstr(c.err, "correlation id") != NULL);
    CHECK_EQ(c.fd, -1);
    /* A closed client fails cleanly, without touching the network. */
    CHECK_EQ(cn_kclient_controller(&c, &ctl, &out), CN_EINVAL);
    cn_arena_fini(&a);
    cn_kclient_close(&c);
    cn_kclient_close(&ctl);
    fake_stop(&f);
}

UNIT_TEST(silent_broker_times_out)
{
    struct fake f;
    struct cn_kclient c;

    fake_start(&f, script_silent);
    cn_kclient_init(&c);
    CHECK_EQ(cn_kclient_connect(&c, "127.0.0.1", f.port, 200), -ETIMEDOUT);
    CHECK(strstr(c.err, "cannot connect to 127.0.0.1:") != NULL);
    CHECK(strstr(c.err, "timed out") != NULL);
    CHECK_EQ(c.fd, -1);
    fake_stop(&f);
}

UNIT_TEST(broker_hangs_up)
{
    struct fake f;
    struct cn_kclient c;

    fake_start(&f, script_hang_up);
    cn_kclient_init(&c);
    CHECK(cn_kclient_connect(&c, "127.0.0.1", f.port, 2000) < 0);
    CHECK(strstr(c.err, "cannot connect to 127.0.0.1:") != NULL);
    CHECK_EQ(c.fd, -1);
    fake_stop(&f);
}

UNIT_TEST(connection_refused)
{
    struct fake f;
    struct cn_kclient c;
    int port;

    /* A port that was just ours and is now closed. */
    fake_start(&f, script_hang_up);
    port = f.port;
    {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in sa = {.sin_family = AF_INET,
                                 .sin_port = htons((uint16_t)port),
                                 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        CHECK(connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0);
        close(fd);
    }
    fake_stop(&f);
    cn_kclient_init(&c);
    CHECK_EQ(cn_kclient_connect(&c, "127.0.0.1", port, 2000), -ECONNREFUSED);
    CHECK(strstr(c.err, "Connection refused") != NULL);
    CHECK_EQ(cn_kclient_bootstrap(&c, "nonsense:port", 2000), CN_EINVAL);
    CHECK(strstr(c.err, "bad bootstrap server") != NULL);
}

UNIT_MAIN(parse_addr, version_fallback_call_and_bad_correlation,
          silent_broker_times_out, broker_hangs_up, connection_refused,
          sasl_scram_login_and_refusals)
