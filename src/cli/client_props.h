/*
 * client_props.h - cairnctl's --command-config FILE: a Kafka client
 * properties file (the names Kafka's Java client and librdkafka use) read
 * into a struct cn_kclient_sec.
 *
 * Understood (Kafka name / librdkafka name):
 *   security.protocol                 PLAINTEXT SSL SASL_PLAINTEXT SASL_SSL
 *   ssl.truststore.location / ssl.ca.location        PEM CA certificates
 *   ssl.truststore.type               PEM only (JKS, PKCS12: refused)
 *   ssl.keystore.location             PEM with private key and chain
 *   / ssl.certificate.location + ssl.key.location
 *   ssl.keystore.type                 PEM only
 *   ssl.key.password                  for an encrypted key
 *   ssl.endpoint.identification.algorithm   https (default), "" or none
 *   sasl.mechanism / sasl.mechanisms  PLAIN SCRAM-SHA-256 SCRAM-SHA-512
 *   sasl.jaas.config                  ...PlainLoginModule or
 *                                     ...ScramLoginModule required
 *                                     username="U" password="P";
 *   sasl.username, sasl.password      (librdkafka)
 * Client properties that do not change how cairnctl connects (client.id,
 * timeouts, ssl.enabled.protocols, trust store passwords, ...) get a
 * warning on stderr and are ignored, as Kafka's tools ignore unused keys.
 * Any other key is an error naming it: a misspelt security key must not
 * quietly give a less secure connection.
 */
#ifndef CN_CLI_CLIENT_PROPS_H
#define CN_CLI_CLIENT_PROPS_H

#include <stddef.h>
#include <stdio.h>

#include "cli/kclient.h"

#define CLI_PROPS_VAL_MAX 4096

/* Parsed file; sec's strings point into this struct. */
struct cli_props {
    struct cn_kclient_sec sec;
    char ca_file[CLI_PROPS_VAL_MAX];
    char cert_file[CLI_PROPS_VAL_MAX];
    char key_file[CLI_PROPS_VAL_MAX];
    char key_password[CLI_PROPS_VAL_MAX];
    char user[CLI_PROPS_VAL_MAX];
    char password[CLI_PROPS_VAL_MAX];
    /* internal: what the file said, checked together at the end */
    int mech_set;       /* sasl.mechanism given: enum cn_kclient_sasl */
    FILE *warn;         /* where warnings go (stderr), NULL: nowhere */
};

/*
 * Parses properties text (origin names it in errors) into p, initialised
 * here.  0, or CN_EINVAL with "origin:LINE: key: reason" or, for what only
 * the whole file can say, "origin: reason" in err.
 */
int cli_props_parse(struct cli_props *p, const char *text,
                    const char *origin, FILE *warn, char *err,
                    size_t err_len);
/* Reads FILE and parses it as above; "cannot read FILE: reason".  p is
 * initialised (and may be given to cn_kclient_sec_fini) even then. */
int cli_props_load(struct cli_props *p, const char *path, FILE *warn,
                   char *err, size_t err_len);

/* The same settings in librdkafka's names (security.protocol,
 * ssl.ca.location, ssl.certificate.location, ssl.key.location,
 * ssl.key.password, ssl.endpoint.identification.algorithm,
 * sasl.mechanisms, sasl.username, sasl.password), one set() call each,
 * for `cairnctl verify`'s librdkafka clients.  Stops at the first nonzero
 * set() and returns it. */
int cli_props_each_rdkafka(const struct cli_props *p,
                           int (*set)(void *ctx, const char *key,
                                      const char *value),
                           void *ctx);

#endif
