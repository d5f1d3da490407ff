/*
 * test_client_props.c - cairnctl's --command-config parser: Kafka's and
 * librdkafka's client property names into a struct cn_kclient_sec, the
 * sasl.jaas.config syntax, and the errors a bad file gets (key named).
 *
 * client_props.c and kclient.c belong to the cairnctl executable, so they
 * are compiled in here directly.
 */
#include <stdlib.h>

#include "cli/client_props.c"
#include "cli/kclient.c"
#include "unit.h"

static struct cli_props props;
static char err[1024];

static int parse(const char *text)
{
    err[0] = '\0';
    return cli_props_parse(&props, text, "f.properties", NULL, err,
                           sizeof err);
}

UNIT_TEST(kafka_names_sasl_ssl_scram)
{
    CHECK_EQ(parse("# a comment\n"
                   "security.protocol=SASL_SSL\n"
                   "sasl.mechanism=SCRAM-SHA-512\n"
                   "sasl.jaas.config=org.apache.kafka.common.security.scram."
                   "ScramLoginModule required \\\n"
                   "    username=\"alice\" password=\"a \\\\\"q\\\\\" b\";\n"
                   "ssl.truststore.type=PEM\n"
                   "ssl.truststore.location=/etc/ca.pem\n"
                   "ssl.keystore.type=PEM\n"
                   "ssl.keystore.location=/etc/me.pem\n"
                   "ssl.key.password=kp\n"
                   "ssl.endpoint.identification.algorithm=\n"),
             0);
    CHECK(props.sec.tls);
    CHECK_EQ(props.sec.sasl, CN_KCLIENT_SASL_SCRAM_SHA512);
    CHECK(!strcmp(props.sec.user, "alice"));
    CHECK(!strcmp(props.sec.password, "a \"q\" b"));
    CHECK(!strcmp(props.sec.ca_file, "/etc/ca.pem"));
    CHECK(!strcmp(props.sec.cert_file, "/etc/me.pem"));
    CHECK(props.sec.key_file == NULL);
    CHECK(!strcmp(props.sec.key_password, "kp"));
    CHECK(props.sec.no_verify_host);
    CHECK(!strcmp(cn_kclient_sec_protocol(&props.sec), "SASL_SSL"));
}

UNIT_TEST(plain_ssl_and_librdkafka_names)
{
    CHECK_EQ(parse("security.protocol=sasl_plaintext\n"
                   "sasl.mechanisms=PLAIN\n"
                   "sasl.username=bob\n"
                   "sasl.password=pw\n"),
             0);
    CHECK(!props.sec.tls);
    CHECK_EQ(props.sec.sasl, CN_KCLIENT_SASL_PLAIN);
    CHECK(!strcmp(props.sec.user, "bob") && !strcmp(props.sec.password, "pw"));

    CHECK_EQ(parse("security.protocol: SSL\n"
                   "ssl.ca.location /ca.pem\n"
                   "ssl.certificate.location=/c.pem\n"
                   "ssl.key.location=/k.pem\n"),
             0);
    CHECK(props.sec.tls && !props.sec.sasl && !props.sec.no_verify_host);
    CHECK(!strcmp(props.sec.ca_file, "/ca.pem"));
    CHECK(!strcmp(props.sec.key_file, "/k.pem"));

    CHECK_EQ(parse("sasl.jaas.config=org.apache.kafka.common.security.plain."
                   "PlainLoginModule required username=u password=p;\n"
                   "security.protocol=SASL_PLAINTEXT\n"
                   "sasl.mechanism=PLAIN\n"),
             0);
    CHECK(!strcmp(props.sec.user, "u") && !strcmp(props.sec.password, "p"));
    /* Nothing set: plaintext, as Kafka's default. */
    CHECK_EQ(parse(""), 0);
    CHECK(!props.sec.tls && !props.sec.sasl);
}

UNIT_TEST(unknown_key_is_an_error_naming_it)
{
    CHECK_EQ(parse("security.protocol=SSL\n\nssl.trustore.location=/x\n"),
             CN_EINVAL);
    CHECK(strstr(err, "f.properties:3:"));
    CHECK(strstr(err, "ssl.trustore.location: unknown client property"));
}

UNIT_TEST(ignored_keys_warn)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *w = open_memstream(&buf, &len);
    CHECK_EQ(cli_props_parse(&props, "client.id=x\nssl.truststore.password=y\n",
                             "f", w, err, sizeof err),
             0);
    fclose(w);
    CHECK(buf && strstr(buf, "'client.id' is not used"));
    CHECK(buf && strstr(buf, "'ssl.truststore.password' is not used"));
    free(buf);
}

UNIT_TEST(bad_values_name_key_and_reason)
{
    static const struct {
        const char *text, *want;
    } bad[] = {
        {"security.protocol=TLS\n", "security.protocol: 'TLS' is not one"},
        {"ssl.truststore.type=JKS\n", "ssl.truststore.type: 'JKS' is not "
                                      "supported, only PEM"},
        {"ssl.keystore.type=PKCS12\n", "ssl.keystore.type: 'PKCS12'"},
        {"sasl.mechanism=GSSAPI\n", "sasl.mechanism: 'GSSAPI' is not "
                                    "supported"},
        {"ssl.endpoint.identification.algorithm=ldap\n",
         "ssl.endpoint.identification.algorithm: 'ldap'"},
        {"ssl.truststore.location=\n", "ssl.truststore.location: empty"},
        {"ssl.truststore.certificates=-----BEGIN\n",
         "ssl.truststore.certificates: PEM in the properties file"},
        {"sasl.jaas.config=org.apache.kafka.common.security.scram."
         "ScramLoginModule required username=\"a\" password=\"b\"\n",
         "sasl.jaas.config: missing ';'"},
        {"sasl.jaas.config=com.sun.security.auth.module.Krb5LoginModule "
         "required;\n",
         "login module com.sun.security.auth.module.Krb5LoginModule is not "
         "supported"},
        {"sasl.jaas.config=org.apache.kafka.common.security.scram."
         "ScramLoginModule required username=\"a\";\n",
         "needs username=\"...\" and password"},
        {"sasl.jaas.config=org.apache.kafka.common.security.scram."
         "ScramLoginModule username=\"a\" password=\"b\";\n",
         "bad control flag"},
        {"sasl.jaas.config=org.apache.kafka.common.security.scram."
         "ScramLoginModule required username=\"a password=\"b\";\n",
         "sasl.jaas.config:"},
        {"security.protocol=SASL_SSL\nsasl.username=a\nsasl.password=b\n",
         "sasl.mechanism is not set"},
        {"security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-256\n",
         "needs sasl.jaas.config"},
        {"ssl.key.location=/k\n", "ssl.key.location needs"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        CHECK_EQ(parse(bad[i].text), CN_EINVAL);
        if (!strstr(err, bad[i].want))
            fprintf(stderr, "  case %zu: got '%s'\n", i, err);
        CHECK(strstr(err, bad[i].want));
    }
}

static char seen[1024];

static int record(void *ctx, const char *k, const char *v)
{
    (void)ctx;
    size_t n = strlen(seen);
    snprintf(seen + n, sizeof seen - n, "%s=%s\n", k, v);
    return 0;
}

UNIT_TEST(librdkafka_mapping_and_file)
{
    CHECK_EQ(parse("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-256"
                   "\nsasl.username=a\nsasl.password=b\n"
                   "ssl.truststore.location=/ca\n"
                   "ssl.keystore.location=/me\n"),
             0);
    seen[0] = '\0';
    CHECK_EQ(cli_props_each_rdkafka(&props, record, NULL), 0);
    CHECK(!strcmp(seen, "security.protocol=SASL_SSL\n"
                        "ssl.ca.location=/ca\n"
                        "ssl.certificate.location=/me\n"
                        "ssl.key.location=/me\n"
                        "ssl.endpoint.identification.algorithm=https\n"
                        "sasl.mechanisms=SCRAM-SHA-256\n"
                        "sasl.username=a\nsasl.password=b\n"));
    CHECK_EQ(cli_props_load(&props, "/nonexistent/x.properties", NULL, err,
                            sizeof err),
             CN_EINVAL);
    CHECK(strstr(err, "cannot read /nonexistent/x.properties"));
    /* A CA file that is not PEM is caught before any connection. */
    CHECK_EQ(parse("security.protocol=SSL\n"
                   "ssl.truststore.location=/etc/hostname\n"),
             0);
    CHECK_EQ(cn_kclient_sec_load(&props.sec, err, sizeof err), CN_EINVAL);
    CHECK(strstr(err, "cannot load CA certificates from /etc/hostname"));
    cn_kclient_sec_fini(&props.sec);
}

UNIT_MAIN(kafka_names_sasl_ssl_scram, plain_ssl_and_librdkafka_names,
          unknown_key_is_an_error_naming_it, ignored_keys_warn,
          bad_values_name_key_and_reason, librdkafka_mapping_and_file)
