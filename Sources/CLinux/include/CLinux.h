#ifndef INBOX_CLINUX_H
#define INBOX_CLINUX_H

#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <sys/types.h>

/// Linux calls and constants that Glibc hides from Swift behind _GNU_SOURCE.
int inbox_renameat2(int olddirfd, const char *oldpath, int newdirfd, const char *newpath, unsigned int flags);
ssize_t inbox_copy_file_range(int fd_in, int fd_out, size_t len);
/// syncfs(2): writes out everything cached for the filesystem that holds `fd`.
int inbox_syncfs(int fd);
/// sync_file_range(2) with SYNC_FILE_RANGE_WRITE over the whole file: starts writing its dirty pages out, without
/// waiting and without making anything durable (an fsync still must).
int inbox_start_writeback(int fd);

/// flock(fd, LOCK_EX), queued in the kernel behind the other waiters as a blocking flock is, cut short after
/// `milliseconds`: a timer of the calling thread's own (SIGEV_THREAD_ID) sends it a signal whose handler does
/// nothing and does not restart the call (a lock no one holds is taken at once, without one). 0 once held; -1 with
/// errno ETIMEDOUT past the time, else flock's errno.
int inbox_flock_within(int fd, long milliseconds);

int inbox_fsetxattr(int fd, const char *name, const void *value, size_t size, int flags);
ssize_t inbox_fgetxattr(int fd, const char *name, void *value, size_t size);
int inbox_fremovexattr(int fd, const char *name);

/// What statx(2) says of a file, in the fields the package reads; `born_known` is 0 where the filesystem
/// keeps no birth time. `changed` is the status-change time (ctime).
struct inbox_file_status {
    uint64_t device;
    uint64_t inode;
    uint64_t link_count;
    int64_t size;
    uint32_t mode;
    int32_t born_known;
    int64_t accessed_seconds, modified_seconds, born_seconds;
    uint32_t accessed_nanoseconds, modified_nanoseconds, born_nanoseconds;
    int64_t changed_seconds;
    uint32_t changed_nanoseconds;
    uint32_t owner, group;
};
/// statx(dirfd, path, AT_SYMLINK_NOFOLLOW, basic stats and birth time); an empty path describes dirfd itself. With
/// force_sync, AT_STATX_FORCE_SYNC: a network or FUSE client asks the server, and its cache then holds the answer.
int inbox_statx(int dirfd, const char *path, int force_sync, struct inbox_file_status *status);
/* getdents64(2): the next entries of the open folder fd as struct linux_dirent64 records; 0 at its end. */
long inbox_getdents64(int fd, void *buffer, size_t length);

/// fstatfs(2): the type of the filesystem that holds `fd` (`f_type`) in `type`.
int inbox_filesystem_type(int fd, int64_t *type);

/// unshare(CLONE_FS): the calling thread gets its own working folder, root and umask (no privilege needed).
int inbox_unshare_fs(void);

/// Takes and at once drops a read lease on `fd`: 0 when nobody has the file open for writing,
/// -1 with errno EAGAIN when someone has, -1 with another errno when leases are unavailable.
/// Read leases: take one (-1 with EAGAIN when the file is open for writing), ask whether it still holds (0
/// once an open for writing is breaking it, -1 with errno when that cannot be read), and drop it.
int inbox_take_read_lease(int fd);
int inbox_read_lease_held(int fd);
int inbox_release_lease(int fd);

extern const unsigned int inbox_RENAME_NOREPLACE;
extern const unsigned int inbox_RENAME_EXCHANGE;
extern const int inbox_O_TMPFILE;
extern const int inbox_O_PATH;
extern const int inbox_AT_EMPTY_PATH;

/// posix_spawn_file_actions_addclosefrom_np (glibc 2.34): the child closes every descriptor >= from (the CLI
/// tests start `inbox` so).
int inbox_posix_spawn_file_actions_addclosefrom_np(posix_spawn_file_actions_t *actions, int from);

/// pipe2(2).
int inbox_pipe2(int fds[2], int flags);

/// accept4(2), the peer's address not asked for.
int inbox_accept4(int fd, int flags);

/// Raises the soft limit on open descriptors (RLIMIT_NOFILE) to the hard limit, as a process serving many
/// containers needs (systemd starts services with 1024); hooks started by `inbox_spawn_supervised` after get
/// the soft limit back. 0, or -1 and errno.
int inbox_raise_open_file_limit(void);

/// Forks the hook supervisor (ARCHITECTURE.md, "The hook sandbox") and returns its pid, or -1 and errno. The
/// supervisor becomes a child subreaper and starts `path` with `argv` and `envp` (the hook): in its own process
/// group, with the three descriptors (each 3 or above) as 0, 1 and 2 and no other, an empty signal mask and
/// default handlers. It keeps only `control_fd`, its end of a stream socket pair. Once the hook has exited, or
/// the other end is shut down or closed, it kills every descendant, however detached, reaps them, sends 4
/// bytes (an int32 in host order: the hook's wait status, or -errno when the hook could not be started) and
/// exits 0.
pid_t inbox_spawn_supervised(const char *path, char *const argv[], char *const envp[], int stdin_fd, int stdout_fd,
                             int stderr_fd, int control_fd);

/// prctl(PR_SET_NO_NEW_PRIVS, 1): for the calling thread and everything it starts.
int inbox_set_no_new_privs(void);

/// pthread_setname_np(pthread_self(), name): the calling thread's name as ps and top show it (at most 15 bytes).
int inbox_set_thread_name(const char *name);
/// pthread_getname_np(pthread_self(), ...): the calling thread's name, into `name` (16 bytes with its NUL).
int inbox_thread_name(char *name);
/// sched_setscheduler(0, SCHED_BATCH) when `batch` (the calling thread, once woken, waits for the running thread's
/// turn to end instead of preempting it), else SCHED_OTHER. 0, or -1 with errno.
int inbox_set_thread_batch(int batch);
/// Whether the calling thread was last made SCHED_BATCH by inbox_set_thread_batch (a thread it starts inherits that).
int inbox_thread_is_batch(void);

/// landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION): the Landlock ABI version, or -1.
int inbox_landlock_abi_version(void);
/// landlock_create_ruleset for file-system rights only; the descriptor is close-on-exec.
int inbox_landlock_create_ruleset(uint64_t handled_access_fs);
/// landlock_add_rule(LANDLOCK_RULE_PATH_BENEATH): allows `allowed_access` beneath `parent_fd`.
int inbox_landlock_add_path_rule(int ruleset_fd, int parent_fd, uint64_t allowed_access);
/// landlock_restrict_self: the calling thread, and what it starts from now on, get the ruleset's domain.
int inbox_landlock_restrict_self(int ruleset_fd);

extern const uint64_t inbox_LANDLOCK_ACCESS_FS_WRITE_FILE;
extern const uint64_t inbox_LANDLOCK_ACCESS_FS_REMOVE_DIR;
extern const uint64_t inbox_LANDLOCK_ACCESS_FS_REMOVE_FILE;
extern const uint64_t inbox_LANDLOCK_ACCESS_FS_MAKE_CHAR;
extern const uint64_t inbox_LANDLOCK_ACCESS_FS_MAKE_DIR;
extern const uint64_t inbox_LANDLOCK_ACCESS_FS_MAKE_REG;
extern const uint64_t inbox_LANDLOCK_ACCESS_FS_MAKE_SOCK;
extern const uint64_t inbox_LANDLOCK_ACCESS_FS_MAKE_FIFO;
extern const uint64_t inbox_LANDLOCK_ACCESS_FS_MAKE_BLOCK;
extern const uint64_t inbox_LANDLOCK_ACCESS_FS_MAKE_SYM;
/// Landlock ABI 2.
extern const uint64_t inbox_LANDLOCK_ACCESS_FS_REFER;
/// Landlock ABI 3.
extern const uint64_t inbox_LANDLOCK_ACCESS_FS_TRUNCATE;

/// seccomp(SECCOMP_GET_ACTION_AVAIL, SECCOMP_RET_ERRNO): 0 when this kernel and CPU take the filter below.
int inbox_seccomp_filter_available(void);
/// seccomp(SECCOMP_SET_MODE_FILTER) on the calling thread: the chmod, chown, utime and xattr-setting calls
/// and the inode-flag ioctls fail with EPERM, as do system calls of another ABI (32-bit, x32).
int inbox_seccomp_deny_metadata_changes(void);

/// Handles `signal` by writing its number, one byte, to `write_fd` (async-signal-safe), with SA_RESTART; the
/// handling it had before goes to `previous`. One descriptor for all signals caught this way.
int inbox_catch_signal_to_pipe(int signal, int write_fd, struct sigaction *previous);

#endif
