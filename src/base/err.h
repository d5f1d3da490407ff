/*
 * err.h - internal error codes.
 *
 * Functions return 0, a negative CN_E* code, or -errno.  Kafka's error codes
 * are a separate enum (proto/kerr.h); handlers map between the two.
 */
#ifndef CN_BASE_ERR_H
#define CN_BASE_ERR_H

enum {
    CN_EBASE = -10000,
    CN_ETRUNC,   /* input ended before the structure did */
    CN_EBADLEN,  /* a length or count that cannot be right */
    CN_ECORRUPT, /* checksum or structure mismatch in stored or sent data */
    CN_ENOMEM,
    CN_EINVAL,   /* a value out of its allowed range */
    CN_EOFFLINE, /* log directory taken offline after an I/O error */
    CN_ENOTFOUND,
    CN_EEXIST,
    CN_EFAILPOINT, /* a fail point configured as "error" fired */
    CN_EUNSUPPORTED,
    CN_ETOOBIG,
    CN_ERANGE,     /* offset outside the log */
    CN_ENOTLEADER, /* this broker does not (or no longer) lead the partition */
    CN_EREPLICAS,  /* too few in-sync replicas took a write, or in time */
};

const char *cn_strerror(int err);

/* Records where corruption was detected (file, line) and returns CN_ECORRUPT.
 * Keeping one funnel makes corruption greppable in logs and breakable in gdb.
 * It prints "cairn: corruption detected at FILE:LINE: WHAT" to stderr unless
 * the calling thread is inside cn_corrupt_hush(). */
int cn_corrupt_at(const char *file, int line, const char *what);
#define cn_corrupt(what) cn_corrupt_at(__FILE__, __LINE__, (what))

/* Start-up recovery expects corruption (a torn tail after a crash) and
 * reports each case itself, once, with the partition, file and offset; a
 * bare funnel line before that reads like an assertion failure.  Between
 * cn_corrupt_hush() and cn_corrupt_unhush() (nestable, per thread)
 * cn_corrupt_at() only records.  cn_corrupt_last() is the `what` of this
 * thread's latest corruption (a static string), or "corrupt data" if none. */
void cn_corrupt_hush(void);
void cn_corrupt_unhush(void);
const char *cn_corrupt_last(void);

#endif
