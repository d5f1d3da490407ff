/*
 * scram_store.h - the broker's SCRAM credentials: in memory for lookups
 * (a SCRAM login does no PBKDF2 on the server), durable in
 * <log.dirs>/scram-credentials (the format in sec/sasl.h), replaced
 * atomically and fsynced on every change before the change is applied.
 *
 * One record per (user, mechanism), as Kafka's UserScramCredentialRecord,
 * so the metadata quorum can take the store over later.
 *
 * Runs on: loop (the broker), or main() before the loop (--add-scram).
 */
#ifndef CN_NODE_SCRAM_STORE_H
#define CN_NODE_SCRAM_STORE_H

#include <stdbool.h>
#include <stddef.h>

#include "sec/sasl.h"

#define CN_SCRAM_STORE_FILE "scram-credentials"

struct cn_scram_store {
    char dir[4096];              /* where the file lives */
    struct cn_scram_user *users; /* unordered */
    size_t n, cap;
};

/* Loads dir/scram-credentials (none: an empty store).  A damaged file is
 * an error naming it in err, so the broker refuses to start rather than
 * run with credentials missing. */
int cn_scram_store_open(struct cn_scram_store *st, const char *dir, char *err,
                        size_t err_len);
void cn_scram_store_fini(struct cn_scram_store *st);
/* cn_scram_lookup_fn over a store (opaque is the store). */
int cn_scram_store_lookup(void *opaque, const char *user, int mech,
                          struct cn_scram_cred *out);
/* Adds or replaces (user, cred->mech), or deletes (user, mech) when cred
 * is NULL, as a batch of n changes: the file is rewritten once, and only
 * once it is durable does memory change.  0 or -errno (nothing
 * changed). */
struct cn_scram_change {
    const char *user;
    int mech;
    const struct cn_scram_cred *cred; /* NULL: delete */
};
int cn_scram_store_apply(struct cn_scram_store *st,
                         const struct cn_scram_change *ch, size_t n);

#endif
