/*
 * test_tls.c - ssl.principal.mapping.rules (src/sec/tls.c) with the cases
 * of Kafka's SslPrincipalMapper documentation and malformed rules.
 */
#include <string.h>

#include <openssl/x509.h>

#include "base/err.h"
#include "sec/tls.h"
#include "unit.h"

#include <stdbool.h>

static char out[256];

static const char *map(const char *rules, const char *dn)
{
    int rc = cn_tls_map_principal(rules, dn, out, sizeof out);
    if (rc == CN_ENOTFOUND)
        return "<none>";
    if (rc)
        return "<error>";
    return out;
}

UNIT_TEST(default_rule_keeps_the_dn)
{
    CHECK(!strcmp(map("DEFAULT", "CN=alice,OU=eng,O=acme"),
                  "CN=alice,OU=eng,O=acme"));
    CHECK(!strcmp(map("", "CN=alice"), "<none>"));
}

UNIT_TEST(rules_in_order_first_match_wins)
{
    const char *r = "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,DEFAULT";
    CHECK(!strcmp(map(r, "CN=duke,OU=ServiceUsers,O=Org,C=US"), "duke"));
    CHECK(!strcmp(map(r, "CN=duke,OU=JavaSoft,O=Sun Microsystems"),
                  "CN=duke,OU=JavaSoft,O=Sun Microsystems"));
    r = "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,"
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L,DEFAULT";
    CHECK(!strcmp(map(r, "CN=Duke,OU=JavaSoft,O=Sun Microsystems,"
                         "L=Santa Clara,ST=CA,C=US"),
                  "duke@javasoft"));
    CHECK(!strcmp(map(r, "OU=x,CN=Bob.Smith,O=y"), "bob.smith"));
    CHECK(!strcmp(map("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/U",
                      "CN=duke,OU=ServiceUsers,O=Org"),
                  "DUKE"));
    /* Spaces around rules and commas inside a pattern. */
    CHECK(!strcmp(map("  RULE:^CN=([^,]*),O=acme$/user-$1/ , DEFAULT",
                      "CN=alice,O=acme"),
                  "user-alice"));
    /* The pattern must match the whole DN (Java's matches()). */
    CHECK(!strcmp(map("RULE:CN=alice/x/", "CN=alice,O=acme"), "<none>"));
    CHECK(!strcmp(map("RULE:^CN=alice$/x/", "CN=bob"), "<none>"));
}

UNIT_TEST(replacement_escapes_and_replace_all)
{
    CHECK(!strcmp(map("RULE:^CN=(.*)$/\\$1-$1/", "CN=a"), "$1-a"));
    CHECK(!strcmp(map("RULE:^CN=(.*)$/a\\/b/", "CN=a"), "a/b"));
    /* replaceAll also replaces the empty match at the end when the
     * pattern allows one, as Kafka's Java does. */
    CHECK(!strcmp(map("RULE:(.*)/x$1/", "CN=a"), "xCN=ax"));
    char tiny[4];
    CHECK_EQ(cn_tls_map_principal("DEFAULT", "CN=alice", tiny, sizeof tiny),
             CN_ETOOBIG);
}

UNIT_TEST(bad_rules_are_refused)
{
    char err[256];
    CHECK_EQ(cn_tls_rules_check("DEFAULT", err, sizeof err), 0);
    CHECK_EQ(cn_tls_rules_check("RULE:^CN=(.*)$/$1/L, DEFAULT", err,
                                sizeof err),
             0);
    CHECK_EQ(cn_tls_rules_check("DEFAUL", err, sizeof err), CN_EINVAL);
    CHECK(strstr(err, "expected DEFAULT or RULE"));
    CHECK_EQ(cn_tls_rules_check("RULE:^CN=(.*)$", err, sizeof err),
             CN_EINVAL);
    CHECK(strstr(err, "missing '/'"));
    CHECK_EQ(cn_tls_rules_check("RULE:^CN=(.*)$/$1", err, sizeof err),
             CN_EINVAL);
    CHECK(strstr(err, "after the replacement"));
    CHECK_EQ(cn_tls_rules_check("RULE:^CN=(.*$/$1/", err, sizeof err),
             CN_EINVAL);
    CHECK(strstr(err, "pattern"));
    CHECK_EQ(cn_tls_rules_check("RULE:a/b/X", err, sizeof err), CN_EINVAL);
    CHECK(strstr(err, "unexpected"));
    CHECK_EQ(cn_tls_map_principal("RULE:(/x/", "CN=a", out, sizeof out),
             CN_EINVAL);
}

/* Adds one attribute; multi adds it to the last RDN instead of a new one. */
static void add(X509_NAME *n, const char *field, const char *value, bool multi)
{
    X509_NAME_add_entry_by_txt(n, field, MBSTRING_UTF8,
                               (const unsigned char *)value, -1, -1,
                               multi ? -1 : 0);
}

static const char *dn(X509_NAME *n)
{
    int rc = cn_tls_dn_rfc2253(n, out, sizeof out);
    X509_NAME_free(n);
    return rc ? "<error>" : out;
}

/* Expected strings are what Java 17's X500Principal.getName(RFC2253)
 * printed for certificates with these subjects. */
UNIT_TEST(subject_dn_as_java_writes_it)
{
    X509_NAME *n = X509_NAME_new();
    add(n, "O", "acme", false);
    add(n, "OU", "eng", false);
    add(n, "CN", "alice", false);
    CHECK(!strcmp(dn(n), "CN=alice,OU=eng,O=acme"));

    n = X509_NAME_new();
    add(n, "C", "US", false);
    add(n, "O", "Acme, Inc.", false);
    add(n, "CN", "bob", false);
    add(n, "UID", "42", true);
    CHECK(!strcmp(dn(n), "CN=bob+UID=42,O=Acme\\, Inc.,C=US"));

    n = X509_NAME_new();
    add(n, "O", "acme", false);
    add(n, "CN", "carol", false);
    X509_NAME_add_entry_by_txt(n, "emailAddress", MBSTRING_ASC,
                               (const unsigned char *)"c@acme.io", -1, -1, 0);
    CHECK(!strcmp(dn(n), "1.2.840.113549.1.9.1=#1609634061636d652e696f,"
                         "CN=carol,O=acme"));

    n = X509_NAME_new();
    add(n, "O", "\xc3\x84rger", false);
    add(n, "CN", "d\xc3\xb6rte", false);
    CHECK(!strcmp(dn(n), "CN=d\xc3\xb6rte,O=\xc3\x84rger"));

    n = X509_NAME_new();
    add(n, "CN", "a=b;c <d>", false);
    CHECK(!strcmp(dn(n), "CN=a\\=b\\;c \\<d\\>"));

    n = X509_NAME_new();
    add(n, "CN", " #x ", false);
    CHECK(!strcmp(dn(n), "CN=\\ \\#x\\ "));

    char tiny[8];
    n = X509_NAME_new();
    add(n, "CN", "alice", false);
    CHECK_EQ(cn_tls_dn_rfc2253(n, tiny, sizeof tiny), CN_ETOOBIG);
    X509_NAME_free(n);
}

UNIT_MAIN(subject_dn_as_java_writes_it, default_rule_keeps_the_dn, rules_in_order_first_match_wins,
          replacement_escapes_and_replace_all, bad_rules_are_refused)
