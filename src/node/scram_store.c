/*
 * scram_store.c - SCRAM credentials in memory and in
 * <log.dirs>/scram-credentials; see scram_store.h.
 */
#include "node/scram_store.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "base/err.h"
#include "base/wr.h"
#include "log/file.h"

static int store_add(void *opaque, const struct cn_scram_user *u)
{
    struct cn_scram_store *st = opaque;
    if (st->n == st->cap) {
        size_t cap = st->cap ? st->cap * 2 : 8;
        struct cn_scram_user *nu = realloc(st->users, cap * sizeof *nu);
        if (!nu)
            return CN_ENOMEM;
        st->users = nu;
        st->cap = cap;
    }
    st->users[st->n++] = *u;
    return 0;
}

int cn_scram_store_open(struct cn_scram_store *st, const char *dir, char *err,
                        size_t err_len)
{
    memset(st, 0, sizeof *st);
    snprintf(st->dir, sizeof st->dir, "%s", dir);
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, CN_SCRAM_STORE_FILE);
    uint8_t *buf = NULL;
    size_t len = 0;
    int rc = cn_file_read_all(path, &buf, &len);
    if (rc == -ENOENT)
        return 0;
    if (rc) {
        snprintf(err, err_len, "cannot read %s: %s", path, cn_strerror(rc));
        return rc;
    }
    rc = cn_scram_store_decode(buf, len, store_add, st);
    free(buf);
    if (rc) {
        snprintf(err, err_len,
                 "SCRAM credential store %s is %s; refusing to start with "
                 "credentials missing (restore it from a backup, or remove "
                 "it and add the users again)",
                 path, rc == CN_ECORRUPT ? "damaged" : cn_strerror(rc));
        cn_scram_store_fini(st);
        return rc;
    }
    return 0;
}

void cn_scram_store_fini(struct cn_scram_store *st)
{
    if (st->users)
        OPENSSL_cleanse(st->users, st->cap * sizeof *st->users);
    free(st->users);
    st->users = NULL;
    st->n = st->cap = 0;
}

static struct cn_scram_user *find(struct cn_scram_user *u, size_t n,
                                  const char *user, int mech)
{
    for (size_t i = 0; i < n; i++)
        if (u[i].cred.mech == mech && !strcmp(u[i].name, user))
            return &u[i];
    return NULL;
}

int cn_scram_store_lookup(void *opaque, const char *user, int mech,
                          struct cn_scram_cred *out)
{
    struct cn_scram_store *st = opaque;
    struct cn_scram_user *u = find(st->users, st->n, user, mech);
    if (!u)
        return -ENOENT;
    *out = u->cred;
    return 0;
}

int cn_scram_store_apply(struct cn_scram_store *st,
                         const struct cn_scram_change *ch, size_t n)
{
    /* The new set is built aside, written, then swapped in. */
    size_t cap = st->n + n;
    struct cn_scram_user *nu = calloc(cap ? cap : 1, sizeof *nu);
    if (!nu)
        return CN_ENOMEM;
    if (st->n)
        memcpy(nu, st->users, st->n * sizeof *nu);
    size_t nn = st->n;
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        int mech = ch[i].cred ? ch[i].cred->mech : ch[i].mech;
        struct cn_scram_user *u = find(nu, nn, ch[i].user, mech);
        if (!ch[i].cred) {
            if (u)
                *u = nu[--nn];
            continue;
        }
        if (strlen(ch[i].user) >= CN_SASL_NAME_MAX) {
            rc = CN_EINVAL;
            break;
        }
        if (!u) {
            u = &nu[nn++];
            snprintf(u->name, sizeof u->name, "%s", ch[i].user);
        }
        u->cred = *ch[i].cred;
    }
    if (!rc) {
        struct cn_wr wr;
        cn_wr_init(&wr, 0);
        cn_scram_store_encode(&wr, nu, nn);
        rc = wr.err ? wr.err
                    : cn_file_write_atomic(st->dir, CN_SCRAM_STORE_FILE,
                                           wr.buf, wr.len);
        if (wr.buf)
            OPENSSL_cleanse(wr.buf, wr.len);
        cn_wr_fini(&wr);
    }
    if (rc) {
        OPENSSL_cleanse(nu, cap * sizeof *nu);
        free(nu);
        return rc;
    }
    cn_scram_store_fini(st);
    st->users = nu;
    st->n = nn;
    st->cap = cap ? cap : 1;
    return 0;
}
