/*
 * Internal to the configuration module (config.c, config_dyn.c,
 * config_listeners.c, config_cluster.c): the value checks, the listener lists and the
 * properties-text parser its files share.  Not part of the module's
 * interface.
 */
#ifndef CN_CONFIG_INT_H
#define CN_CONFIG_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"

#define WHY_MAX 256 /* bytes for a reason */
#define MSG_MAX 1024 /* bytes for a message before its location prefix */

/* A parsed value of any non-text type. */
union val {
    bool b;
    int32_t i32;
    int64_t i64;
    double d;
    int e;
    unsigned mask;
};

typedef int (*cfg_kv_fn)(void *ctx, const char *key, const char *value,
                         char *err, size_t err_len);

void cfg_seterr(char *err, size_t err_len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* s[0..n) without surrounding blanks, malloc'd; NULL when out of memory. */
char *cfg_dup_trim(const char *s, size_t n);
int cfg_check_value(const struct cn_config_key *k, const char *v,
                    union val *out, char *why, size_t why_len);
/* Index of broker key name, or -1. */
int cfg_key_index(const char *name);
bool cfg_is_set(const struct cn_config *cfg, const char *name);
/* The current text of broker key name (its strongest layer), or NULL. */
const char *cfg_cur(const struct cn_config *cfg, const char *name);
/* True when the comma list has word (case-insensitive, blanks ignored). */
bool cfg_list_has(const char *list, const char *word);
/* Parses controller.quorum.voters ("id@host:port,...") into out[0..*n);
 * why says what is wrong.  config_cluster.c. */
int cfg_parse_voters(const char *text, struct cn_cfg_voter *out, int max,
                     int *n, char *why, size_t why_len);
/* The cluster-mode checks of cn_config_check.  config_cluster.c. */
int cfg_check_cluster(const struct cn_config *cfg, char *err, size_t err_len);
/* Rederives the fields computed from several keys (listeners, retention). */
void cfg_recompute(struct cn_config *cfg);
/* Stores key i's current text (its strongest layer) into its field. */
void cfg_refresh_key(struct cn_config *cfg, int i);
/* Calls fn for each key=value of a properties text; origin names it in
 * errors. */
int cfg_parse_props(const char *text, const char *origin, cfg_kv_fn fn,
                    void *ctx, char *err, size_t err_len);
/* A `listeners`-style comma list, every entry checked (names unique, and
 * non-zero ports unique unless same_port_ok, as advertised.listeners may
 * repeat one); host/port get the first PLAINTEXT entry, else the first.
 * A bare reason on error. */
int cfg_parse_listener_list(const char *text, bool same_port_ok, char *host,
                            size_t host_len, int *port, char *why,
                            size_t why_len);
/* "PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL", then NULL: enum
 * cn_sec_proto's names. */
extern const char *const cfg_proto_names[];

#endif
