/*
 * tls.h - the server's TLS context from Kafka's ssl.* keys, and Kafka's
 * mapping of a client certificate's subject to a principal.
 *
 * The context is OpenSSL's SSL_CTX; net/ drives connections with it
 * through memory BIOs.  Only PEM keystores (one file: private key and
 * certificate chain, as Kafka's ssl.keystore.type=PEM reads it) and PKCS12
 * keystores, and PEM truststores.
 *
 * Principal mapping (ssl.principal.mapping.rules) is pure: Kafka's
 * SslPrincipalMapper syntax, "DEFAULT" and "RULE:pattern/replacement/[LU]"
 * separated by commas, the first rule whose pattern matches the whole DN
 * wins.  Patterns are POSIX extended regular expressions (Java's lazy
 * quantifiers such as .*? are taken as greedy); replacements use $1..$9
 * and \ escapes, as Java's replaceAll does.
 *
 * Runs on: loop (start-up and handshakes); cn_tls_map_principal anywhere.
 */
#ifndef CN_SEC_TLS_H
#define CN_SEC_TLS_H

#include <stddef.h>

struct ssl_ctx_st;
struct X509_name_st;
struct x509_st;

/* The ssl.* values of one listener; NULL means unset. */
struct cn_tls_opts {
    const char *keystore_location;
    const char *keystore_type;     /* PEM (NULL too) or PKCS12 */
    const char *keystore_password; /* PKCS12 */
    const char *key_password;      /* an encrypted PEM private key */
    const char *truststore_location;
    const char *truststore_type;   /* PEM (NULL too) */
    const char *client_auth;       /* none (NULL too), requested, required */
    const char *enabled_protocols; /* "TLSv1.2,TLSv1.3" (NULL too) */
    const char *protocol;          /* ssl.protocol: TLS, TLSv1.2, TLSv1.3 */
    const char *cipher_suites;     /* IANA names, comma list; NULL/"" all */
};

/* Builds a server context.  The error names the key and the reason
 * ("ssl.keystore.location: cannot read /x.pem: No such file"). */
int cn_tls_ctx_new(const struct cn_tls_opts *o, struct ssl_ctx_st **out,
                   char *err, size_t err_len);
void cn_tls_ctx_free(struct ssl_ctx_st *ctx);

/*
 * Writes a DN as Kafka sees it: Java's X500Principal.getName(RFC2253).
 * Last RDN first, the values of a multi-valued RDN in encoded order joined
 * by '+', the keywords CN C L ST O OU STREET DC UID and the dotted OID
 * with "#" and the hex DER value for any other attribute (emailAddress
 * too), UTF-8 unescaped, and ,=+<>#;"\ escaped with a backslash, as are
 * leading and trailing spaces.  CN_ETOOBIG when it does not fit.
 */
int cn_tls_dn_rfc2253(const struct X509_name_st *name, char *out,
                      size_t out_len);
/* The principal name of a client certificate: its subject by
 * cn_tls_dn_rfc2253, mapped by rules (cn_tls_map_principal's returns);
 * dn gets the subject for log lines. */
int cn_tls_cert_principal(const struct x509_st *cert, const char *rules,
                          char *dn, size_t dn_len, char *out,
                          size_t out_len);

/* Validates ssl.principal.mapping.rules; CN_EINVAL and a reason. */
int cn_tls_rules_check(const char *rules, char *err, size_t err_len);
/*
 * Maps the subject DN (RFC 2253, "CN=alice,OU=eng,O=acme") to a principal
 * name by rules.  0 and out set; CN_ENOTFOUND when no rule applies (Kafka
 * then fails the authentication); CN_EINVAL for bad rules; CN_ETOOBIG when
 * the name does not fit out_len.
 */
int cn_tls_map_principal(const char *rules, const char *dn, char *out,
                         size_t out_len);

#endif
