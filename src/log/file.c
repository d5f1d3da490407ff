/* file.c - the log's replaceable syscall table; see file.h. */
#include "file.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/err.h"

static int real_open(const char *path, int flags, mode_t mode)
{
    int fd;
    do
        fd = open(path, flags | O_CLOEXEC, mode);
    while (fd < 0 && errno == EINTR);
    return fd < 0 ? -errno : fd;
}

static int real_close(int fd)
{
    /* Linux closes the fd even when close() fails; never retry. */
    return close(fd) < 0 ? -errno : 0;
}

static ssize_t real_pread(int fd, void *buf, size_t n, off_t off)
{
    ssize_t r = pread(fd, buf, n, off);
    return r < 0 ? -errno : r;
}

static ssize_t real_pwrite(int fd, const void *buf, size_t n, off_t off)
{
    ssize_t r = pwrite(fd, buf, n, off);
    return r < 0 ? -errno : r;
}

static int real_fdatasync(int fd)
{
    return fdatasync(fd) < 0 ? -errno : 0;
}

static int real_fsync(int fd)
{
    return fsync(fd) < 0 ? -errno : 0;
}

static int real_ftruncate(int fd, off_t len)
{
    return ftruncate(fd, len) < 0 ? -errno : 0;
}

static int real_rename(const char *from, const char *to)
{
    return rename(from, to) < 0 ? -errno : 0;
}

static int real_unlink(const char *path)
{
    return unlink(path) < 0 ? -errno : 0;
}

static int real_mkdir(const char *path, mode_t mode)
{
    return mkdir(path, mode) < 0 ? -errno : 0;
}

static int real_rmdir(const char *path)
{
    return rmdir(path) < 0 ? -errno : 0;
}

static int real_fsize(int fd, int64_t *size_out)
{
    struct stat st;
    if (fstat(fd, &st) < 0)
        return -errno;
    *size_out = (int64_t)st.st_size;
    return 0;
}

const struct cn_file_ops cn_file_ops_real = {
    .open = real_open,
    .close = real_close,
    .pread = real_pread,
    .pwrite = real_pwrite,
    .fdatasync = real_fdatasync,
    .fsync = real_fsync,
    .ftruncate = real_ftruncate,
    .rename = real_rename,
    .unlink = real_unlink,
    .mkdir = real_mkdir,
    .rmdir = real_rmdir,
    .fsize = real_fsize,
};

const struct cn_file_ops *cn_file_ops = &cn_file_ops_real;

size_t (*cn_file_reclaim)(void);

int cn_file_open(const char *path, int flags, mode_t mode)
{
    int fd = cn_file_ops->open(path, flags, mode);
    /* A few rounds: what one reclaim frees, a socket may take. */
    for (int i = 0; i < 4 && (fd == -EMFILE || fd == -ENFILE) &&
                    cn_file_reclaim && cn_file_reclaim() > 0;
         i++)
        fd = cn_file_ops->open(path, flags, mode);
    return fd;
}

int cn_file_pwrite_all(int fd, const void *buf, size_t n, int64_t off)
{
    const uint8_t *p = buf;
    while (n > 0) {
        size_t chunk = n > (size_t)INT_MAX ? (size_t)INT_MAX : n;
        ssize_t r = cn_file_ops->pwrite(fd, p, chunk, (off_t)off);
        if (r == -EINTR)
            continue;
        if (r < 0)
            return (int)r;
        if (r == 0)
            return -EIO;
        p += r;
        n -= (size_t)r;
        off += r;
    }
    return 0;
}

ssize_t cn_file_pread_all(int fd, void *buf, size_t n, int64_t off)
{
    uint8_t *p = buf;
    size_t done = 0;
    while (done < n) {
        size_t chunk = n - done > (size_t)INT_MAX ? (size_t)INT_MAX : n - done;
        ssize_t r = cn_file_ops->pread(fd, p + done, chunk, (off_t)off);
        if (r == -EINTR)
            continue;
        if (r < 0)
            return r;
        if (r == 0)
            break;
        done += (size_t)r;
        off += r;
    }
    return (ssize_t)done;
}

int cn_file_sync_dir(const char *dir)
{
    int fd = cn_file_open(dir, O_RDONLY | O_DIRECTORY, 0);
    if (fd < 0)
        return fd;
    int err = cn_file_ops->fsync(fd);
    cn_file_ops->close(fd);
    return err;
}

int cn_file_write_atomic(const char *dir, const char *name, const void *buf,
                         size_t n)
{
    char tmp[PATH_MAX], dst[PATH_MAX];
    if (snprintf(tmp, sizeof tmp, "%s/%s.tmp", dir, name) >= (int)sizeof tmp ||
        snprintf(dst, sizeof dst, "%s/%s", dir, name) >= (int)sizeof dst)
        return -ENAMETOOLONG;
    int fd = cn_file_open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        return fd;
    int err = cn_file_pwrite_all(fd, buf, n, 0);
    if (!err)
        err = cn_file_ops->fdatasync(fd);
    cn_file_ops->close(fd);
    if (!err)
        err = cn_file_ops->rename(tmp, dst);
    if (err) {
        cn_file_ops->unlink(tmp);
        return err;
    }
    return cn_file_sync_dir(dir);
}

int cn_file_read_all(const char *path, uint8_t **out, size_t *len)
{
    *out = NULL;
    *len = 0;
    int fd = cn_file_open(path, O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0)
        return fd;
    uint8_t *buf = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    for (;;) {
        if (n == cap) {
            cap = cap ? cap * 2 : 4096;
            uint8_t *nb = realloc(buf, cap);
            if (!nb) {
                rc = CN_ENOMEM;
                break;
            }
            buf = nb;
        }
        size_t want = cap - n;
        ssize_t got = cn_file_pread_all(fd, buf + n, want, (int64_t)n);
        if (got < 0) {
            rc = (int)got;
            break;
        }
        n += (size_t)got;
        if ((size_t)got < want)
            break; /* end of file */
    }
    cn_file_ops->close(fd);
    if (rc) {
        free(buf);
        return rc;
    }
    *out = buf;
    *len = n;
    return 0;
}
