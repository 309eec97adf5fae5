#ifndef INBOX_CLINUX_H
#define INBOX_CLINUX_H

#include <sys/types.h>

/// Linux calls and constants that Glibc hides from Swift behind _GNU_SOURCE.
int inbox_renameat2(int olddirfd, const char *oldpath, int newdirfd, const char *newpath, unsigned int flags);
ssize_t inbox_copy_file_range(int fd_in, int fd_out, size_t len);

int inbox_fsetxattr(int fd, const char *name, const void *value, size_t size, int flags);
ssize_t inbox_fgetxattr(int fd, const char *name, void *value, size_t size);

/// Takes and at once drops a read lease on `fd`: 0 when nobody has the file open for writing,
/// -1 with errno EAGAIN when someone has, -1 with another errno when leases are unavailable.
int inbox_probe_read_lease(int fd);

extern const unsigned int inbox_RENAME_NOREPLACE;
extern const unsigned int inbox_RENAME_EXCHANGE;
extern const int inbox_O_TMPFILE;
extern const int inbox_O_PATH;
extern const int inbox_AT_EMPTY_PATH;

#endif
