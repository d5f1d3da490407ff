/*
 * file.h - the log's file layer: every file syscall goes through one table.
 *
 * Why a table: tests swap cn_file_ops for one that fails with EIO or ENOSPC,
 * writes short, or loses unsynced bytes, without touching the log code
 * [SQLite os_unix.c].  Every entry returns 0 (or a byte count) on success
 * and -errno on failure, never -1 with errno, so callers need no errno.
 *
 * Runs on: loop and workers: a sync round's fdatasync, open and close
 * (cn_log_sync_run), a roll snapshot's whole write (open, pwrite,
 * fdatasync, rename, unlink, directory fsync); the table itself must not
 * be swapped while a worker uses it.
 */
#ifndef CN_LOG_FILE_H
#define CN_LOG_FILE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct cn_file_ops {
    int (*open)(const char *path, int flags, mode_t mode); /* fd or -errno */
    int (*close)(int fd);
    ssize_t (*pread)(int fd, void *buf, size_t n, off_t off);  /* bytes */
    ssize_t (*pwrite)(int fd, const void *buf, size_t n, off_t off);
    int (*fdatasync)(int fd);
    int (*fsync)(int fd); /* directories: fdatasync is not enough there */
    int (*ftruncate)(int fd, off_t len);
    int (*rename)(const char *from, const char *to);
    int (*unlink)(const char *path);
    int (*mkdir)(const char *path, mode_t mode);
    int (*rmdir)(const char *path);
    int (*fsize)(int fd, int64_t *size_out); /* fstat st_size */
};

/* The real syscalls, wrapped to return -errno. */
extern const struct cn_file_ops cn_file_ops_real;
/* What the log calls; points at cn_file_ops_real unless a test swaps it. */
extern const struct cn_file_ops *cn_file_ops;

/* Set by the log's descriptor cache: called when an open fails with EMFILE
 * or ENFILE, closes some cached descriptors and returns how many (0 when
 * it has none to give).  NULL until the cache is first used. */
extern size_t (*cn_file_reclaim)(void);
/* cn_file_ops->open, except that EMFILE or ENFILE first has cn_file_reclaim
 * close cached descriptors and then tries again.  Returns the fd or
 * -errno.  Runs on: loop (a worker calls cn_file_ops->open itself). */
int cn_file_open(const char *path, int flags, mode_t mode);

/* Writes all n bytes at off, looping over short writes and EINTR.  A write
 * that makes no progress counts as -EIO.  Returns 0 or -errno. */
int cn_file_pwrite_all(int fd, const void *buf, size_t n, int64_t off);
/* Reads up to n bytes at off, looping over short reads; stops early only at
 * end of file.  Returns the byte count or -errno. */
ssize_t cn_file_pread_all(int fd, void *buf, size_t n, int64_t off);
/* fsyncs a directory so entries created, renamed or removed in it survive a
 * power loss.  Returns 0 or -errno. */
int cn_file_sync_dir(const char *dir);
/* Replaces dir/name with buf atomically: writes dir/name.tmp, fdatasyncs,
 * renames over dir/name and fsyncs dir.  Returns 0 or -errno. */
int cn_file_write_atomic(const char *dir, const char *name, const void *buf,
                         size_t n);
/* Reads the whole of a small file (a store the broker keeps beside its
 * logs) into a malloc'd buffer the caller frees; *out is NULL for an empty
 * file.  Returns 0, -ENOENT when there is none, or -errno / CN_ENOMEM. */
int cn_file_read_all(const char *path, uint8_t **out, size_t *len);

#endif
