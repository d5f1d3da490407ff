/*
 * test_tls.c - ssl.principal.mapping.rules (src/sec/tls.c) with the cases
 * of Kafka's SslPrincipalMapper documentation and malformed rules.
 */
#include <string.h>

#include "base/err.h"
#include "sec/tls.h"
#include "unit.h"

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

UNIT_MAIN(default_rule_keeps_the_dn, rules_in_order_first_match_wins,
          replacement_escapes_and_replace_all, bad_rules_are_refused)
