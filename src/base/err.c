/* err.c - internal error strings and the corruption funnel. */
#include "err.h"

#include <stdio.h>
#include <string.h>

const char *cn_strerror(int err)
{
    switch (err) {
    case 0: return "success";
    case CN_ETRUNC: return "truncated input";
    case CN_EBADLEN: return "invalid length or count";
    case CN_ECORRUPT: return "corrupt data";
    case CN_ENOMEM: return "out of memory";
    case CN_EINVAL: return "invalid value";
    case CN_EOFFLINE: return "log directory offline";
    case CN_ENOTFOUND: return "not found";
    case CN_EEXIST: return "already exists";
    case CN_EFAILPOINT: return "fail point";
    case CN_EUNSUPPORTED: return "unsupported";
    case CN_ETOOBIG: return "too big";
    case CN_ERANGE: return "out of range";
    case CN_ENOTLEADER: return "not the partition's leader";
    case CN_EREPLICAS: return "not enough in-sync replicas";
    default:
        if (err < 0 && err > -4096)
            return strerror(-err);
        return "unknown error";
    }
}

static _Thread_local int hushed;            /* cn_corrupt_hush() depth */
static _Thread_local const char *last_what; /* latest `what`, static */

int cn_corrupt_at(const char *file, int line, const char *what)
{
    last_what = what;
    if (!hushed)
        fprintf(stderr, "cairn: corruption detected at %s:%d: %s\n", file,
                line, what);
    return CN_ECORRUPT;
}

void cn_corrupt_hush(void)
{
    hushed++;
}

void cn_corrupt_unhush(void)
{
    if (hushed > 0)
        hushed--;
}

const char *cn_corrupt_last(void)
{
    return last_what ? last_what : "corrupt data";
}
