#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <sys/xattr.h>
#include <unistd.h>
#include "CLinux.h"

int inbox_renameat2(int olddirfd, const char *oldpath, int newdirfd, const char *newpath, unsigned int flags) {
    return renameat2(olddirfd, oldpath, newdirfd, newpath, flags);
}

ssize_t inbox_copy_file_range(int fd_in, int fd_out, size_t len) {
    return copy_file_range(fd_in, NULL, fd_out, NULL, len, 0);
}

int inbox_fsetxattr(int fd, const char *name, const void *value, size_t size, int flags) {
    return fsetxattr(fd, name, value, size, flags);
}

ssize_t inbox_fgetxattr(int fd, const char *name, void *value, size_t size) {
    return fgetxattr(fd, name, value, size);
}

int inbox_probe_read_lease(int fd) {
    if (fcntl(fd, F_SETLEASE, F_RDLCK) == -1) return -1;
    fcntl(fd, F_SETLEASE, F_UNLCK);
    return 0;
}

const unsigned int inbox_RENAME_NOREPLACE = RENAME_NOREPLACE;
const unsigned int inbox_RENAME_EXCHANGE = RENAME_EXCHANGE;
const int inbox_O_TMPFILE = O_TMPFILE;
const int inbox_O_PATH = O_PATH;
const int inbox_AT_EMPTY_PATH = AT_EMPTY_PATH;
