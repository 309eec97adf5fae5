#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/landlock.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "CLinux.h"

int inbox_renameat2(int olddirfd, const char *oldpath, int newdirfd, const char *newpath, unsigned int flags) {
    return renameat2(olddirfd, oldpath, newdirfd, newpath, flags);
}

ssize_t inbox_copy_file_range(int fd_in, int fd_out, size_t len) {
    return copy_file_range(fd_in, NULL, fd_out, NULL, len, 0);
}

int inbox_syncfs(int fd) {
    return syncfs(fd);
}

int inbox_start_writeback(int fd) {
    return sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE);
}

/* The signal of inbox_flock_within's timers: one no other part of the process uses (glibc keeps the first two
 * real-time signals below SIGRTMIN for itself). */
#define INBOX_LOCK_TIMER_SIGNAL (SIGRTMIN + 3)

static void inbox_lock_timer_fired(int signal) { (void)signal; }

static pthread_once_t inbox_lock_timer_once = PTHREAD_ONCE_INIT;
static int inbox_lock_timer_ready = -1;

static void inbox_install_lock_timer_handler(void) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = inbox_lock_timer_fired;
    sigemptyset(&action.sa_mask);
    /* No SA_RESTART: the blocked flock returns EINTR. */
    inbox_lock_timer_ready = sigaction(INBOX_LOCK_TIMER_SIGNAL, &action, NULL);
}

static int64_t inbox_monotonic_ms(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

int inbox_flock_within(int fd, long milliseconds) {
    /* A lock no one holds is taken without a timer. */
    if (flock(fd, LOCK_EX | LOCK_NB) == 0) return 0;
    if (errno != EWOULDBLOCK) return -1;
    pthread_once(&inbox_lock_timer_once, inbox_install_lock_timer_handler);
    if (inbox_lock_timer_ready != 0) {
        errno = ENOSYS;
        return -1;
    }
    struct sigevent event;
    memset(&event, 0, sizeof event);
    event.sigev_notify = SIGEV_THREAD_ID;
    event.sigev_signo = INBOX_LOCK_TIMER_SIGNAL;
    event._sigev_un._tid = (pid_t)syscall(SYS_gettid);
    timer_t timer;
    if (timer_create(CLOCK_MONOTONIC, &event, &timer) != 0) return -1;
    /* Fires at the deadline, then every 10 ms: a signal that came just before flock blocked is followed by
     * another. */
    struct itimerspec when = {
        .it_value = {.tv_sec = milliseconds / 1000, .tv_nsec = (milliseconds % 1000) * 1000000},
        .it_interval = {.tv_sec = 0, .tv_nsec = 10 * 1000000},
    };
    if (milliseconds <= 0) when.it_value.tv_nsec = 1;
    sigset_t unblocked, saved;
    sigemptyset(&unblocked);
    sigaddset(&unblocked, INBOX_LOCK_TIMER_SIGNAL);
    pthread_sigmask(SIG_UNBLOCK, &unblocked, &saved);
    int64_t deadline = inbox_monotonic_ms() + milliseconds;
    int result = timer_settime(timer, 0, &when, NULL);
    int error = errno;
    while (result == 0) {
        if (flock(fd, LOCK_EX) == 0) break;
        error = errno;
        if (error != EINTR) {
            result = -1;
        } else if (inbox_monotonic_ms() >= deadline) {
            error = ETIMEDOUT;
            result = -1;
        }
    }
    /* A signal still pending is taken by the handler as this call returns. */
    timer_delete(timer);
    pthread_sigmask(SIG_SETMASK, &saved, NULL);
    errno = error;
    return result;
}

int inbox_fsetxattr(int fd, const char *name, const void *value, size_t size, int flags) {
    return fsetxattr(fd, name, value, size, flags);
}

ssize_t inbox_fgetxattr(int fd, const char *name, void *value, size_t size) {
    return fgetxattr(fd, name, value, size);
}

int inbox_fremovexattr(int fd, const char *name) {
    return fremovexattr(fd, name);
}

int inbox_unshare_fs(void) {
    return unshare(CLONE_FS);
}

int inbox_take_read_lease(int fd) { return fcntl(fd, F_SETLEASE, F_RDLCK); }

int inbox_read_lease_held(int fd) {
    int lease = fcntl(fd, F_GETLEASE);
    return lease == -1 ? -1 : lease == F_RDLCK;
}

int inbox_release_lease(int fd) { return fcntl(fd, F_SETLEASE, F_UNLCK); }

const unsigned int inbox_RENAME_NOREPLACE = RENAME_NOREPLACE;
const unsigned int inbox_RENAME_EXCHANGE = RENAME_EXCHANGE;
const int inbox_O_TMPFILE = O_TMPFILE;
const int inbox_O_PATH = O_PATH;
const int inbox_AT_EMPTY_PATH = AT_EMPTY_PATH;

// MARK: - Spawning

int inbox_posix_spawn_file_actions_addclosefrom_np(posix_spawn_file_actions_t *actions, int from) {
    return posix_spawn_file_actions_addclosefrom_np(actions, from);
}

int inbox_pipe2(int fds[2], int flags) {
    return pipe2(fds, flags);
}

int inbox_accept4(int fd, int flags) {
    return accept4(fd, NULL, NULL, flags);
}

int inbox_set_no_new_privs(void) {
    return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
}

int inbox_set_thread_name(const char *name) {
    return pthread_setname_np(pthread_self(), name);
}

int inbox_thread_name(char *name) {
    return pthread_getname_np(pthread_self(), name, 16);
}

static _Thread_local int thread_is_batch;

int inbox_set_thread_batch(int batch) {
    struct sched_param none = {0};
    int result = sched_setscheduler(0, batch ? SCHED_BATCH : SCHED_OTHER, &none);
    if (result == 0) thread_is_batch = batch;
    return result;
}

int inbox_thread_is_batch(void) {
    return thread_is_batch;
}

// MARK: - Landlock

#ifndef LANDLOCK_ACCESS_FS_REFER
#define LANDLOCK_ACCESS_FS_REFER (1ULL << 13)
#endif
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif
#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#define SYS_landlock_add_rule 445
#define SYS_landlock_restrict_self 446
#endif

int inbox_landlock_abi_version(void) {
    return (int)syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
}

int inbox_landlock_create_ruleset(uint64_t handled_access_fs) {
    struct landlock_ruleset_attr attr = {.handled_access_fs = handled_access_fs};
    return (int)syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0);
}

int inbox_landlock_add_path_rule(int ruleset_fd, int parent_fd, uint64_t allowed_access) {
    struct landlock_path_beneath_attr rule = {.allowed_access = allowed_access, .parent_fd = parent_fd};
    return (int)syscall(SYS_landlock_add_rule, ruleset_fd, LANDLOCK_RULE_PATH_BENEATH, &rule, 0);
}

int inbox_landlock_restrict_self(int ruleset_fd) {
    return (int)syscall(SYS_landlock_restrict_self, ruleset_fd, 0);
}

const uint64_t inbox_LANDLOCK_ACCESS_FS_WRITE_FILE = LANDLOCK_ACCESS_FS_WRITE_FILE;
const uint64_t inbox_LANDLOCK_ACCESS_FS_REMOVE_DIR = LANDLOCK_ACCESS_FS_REMOVE_DIR;
const uint64_t inbox_LANDLOCK_ACCESS_FS_REMOVE_FILE = LANDLOCK_ACCESS_FS_REMOVE_FILE;
const uint64_t inbox_LANDLOCK_ACCESS_FS_MAKE_CHAR = LANDLOCK_ACCESS_FS_MAKE_CHAR;
const uint64_t inbox_LANDLOCK_ACCESS_FS_MAKE_DIR = LANDLOCK_ACCESS_FS_MAKE_DIR;
const uint64_t inbox_LANDLOCK_ACCESS_FS_MAKE_REG = LANDLOCK_ACCESS_FS_MAKE_REG;
const uint64_t inbox_LANDLOCK_ACCESS_FS_MAKE_SOCK = LANDLOCK_ACCESS_FS_MAKE_SOCK;
const uint64_t inbox_LANDLOCK_ACCESS_FS_MAKE_FIFO = LANDLOCK_ACCESS_FS_MAKE_FIFO;
const uint64_t inbox_LANDLOCK_ACCESS_FS_MAKE_BLOCK = LANDLOCK_ACCESS_FS_MAKE_BLOCK;
const uint64_t inbox_LANDLOCK_ACCESS_FS_MAKE_SYM = LANDLOCK_ACCESS_FS_MAKE_SYM;
const uint64_t inbox_LANDLOCK_ACCESS_FS_REFER = LANDLOCK_ACCESS_FS_REFER;
const uint64_t inbox_LANDLOCK_ACCESS_FS_TRUNCATE = LANDLOCK_ACCESS_FS_TRUNCATE;

// MARK: - seccomp: Landlock does not cover chmod, chown, utimes, xattrs or inode flags, nor the calls that go
// around the file rules (ARCHITECTURE.md, "The hook sandbox")

#if defined(__x86_64__)
#define INBOX_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define INBOX_AUDIT_ARCH AUDIT_ARCH_AARCH64
#endif

// System calls newer than Debian 12's headers; these numbers are the same on every architecture.
#ifndef __NR_fchmodat2
#define __NR_fchmodat2 452
#endif
#ifndef __NR_setxattrat
#define __NR_setxattrat 463
#endif
#ifndef __NR_removexattrat
#define __NR_removexattrat 466
#endif

// ioctl request numbers (the kernel reads them as 32 bits): FS_IOC_SETFLAGS, FS_IOC32_SETFLAGS, FS_IOC_FSSETXATTR.
#define INBOX_FS_IOC_SETFLAGS 0x40086602u
#define INBOX_FS_IOC32_SETFLAGS 0x40046602u
#define INBOX_FS_IOC_FSSETXATTR 0x401c5820u

#define INBOX_RET_EPERM BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA))
#define INBOX_DENY(nr) BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 1), INBOX_RET_EPERM

int inbox_seccomp_filter_available(void) {
#ifdef INBOX_AUDIT_ARCH
    uint32_t action = SECCOMP_RET_ERRNO;
    return (int)syscall(SYS_seccomp, SECCOMP_GET_ACTION_AVAIL, 0, &action);
#else
    errno = ENOSYS;
    return -1;
#endif
}

int inbox_seccomp_deny_metadata_changes(void) {
#ifdef INBOX_AUDIT_ARCH
    struct sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, INBOX_AUDIT_ARCH, 1, 0),
        INBOX_RET_EPERM,
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
#ifdef __x86_64__
        BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000u, 0, 1),  // x32
        INBOX_RET_EPERM,
        INBOX_DENY(__NR_chmod),
        INBOX_DENY(__NR_chown),
        INBOX_DENY(__NR_lchown),
        INBOX_DENY(__NR_utime),
        INBOX_DENY(__NR_utimes),
        INBOX_DENY(__NR_futimesat),
#endif
        INBOX_DENY(__NR_fchmod),
        INBOX_DENY(__NR_fchmodat),
        INBOX_DENY(__NR_fchmodat2),
        INBOX_DENY(__NR_fchown),
        INBOX_DENY(__NR_fchownat),
        INBOX_DENY(__NR_utimensat),
        INBOX_DENY(__NR_setxattr),
        INBOX_DENY(__NR_lsetxattr),
        INBOX_DENY(__NR_fsetxattr),
        INBOX_DENY(__NR_setxattrat),
        INBOX_DENY(__NR_removexattr),
        INBOX_DENY(__NR_lremovexattr),
        INBOX_DENY(__NR_fremovexattr),
        INBOX_DENY(__NR_removexattrat),
        // Ways around the file rules: io_uring does file operations the filter never sees; ptrace and
        // process_vm_writev reach into another process; handles open files without a path; userfaultfd and
        // bpf are not for hooks; personality changes how later calls behave; the new mount API.
        INBOX_DENY(__NR_io_uring_setup),
        INBOX_DENY(__NR_io_uring_enter),
        INBOX_DENY(__NR_io_uring_register),
        INBOX_DENY(__NR_ptrace),
        INBOX_DENY(__NR_process_vm_writev),
        INBOX_DENY(__NR_process_vm_readv),
        INBOX_DENY(__NR_name_to_handle_at),
        INBOX_DENY(__NR_open_by_handle_at),
        INBOX_DENY(__NR_userfaultfd),
        INBOX_DENY(__NR_bpf),
        INBOX_DENY(__NR_personality),
        INBOX_DENY(__NR_open_tree),
        INBOX_DENY(__NR_move_mount),
        INBOX_DENY(__NR_fsopen),
        INBOX_DENY(__NR_fsconfig),
        INBOX_DENY(__NR_fsmount),
        INBOX_DENY(__NR_fspick),
        INBOX_DENY(__NR_mount_setattr),
        INBOX_DENY(__NR_mount),
        INBOX_DENY(__NR_umount2),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_ioctl, 0, 5),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[1])),  // low half (little-endian)
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, INBOX_FS_IOC_SETFLAGS, 2, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, INBOX_FS_IOC32_SETFLAGS, 1, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, INBOX_FS_IOC_FSSETXATTR, 0, 1),
        INBOX_RET_EPERM,
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog program = {.len = (unsigned short)(sizeof filter / sizeof filter[0]), .filter = filter};
    return (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &program);
#else
    errno = ENOSYS;
    return -1;
#endif
}

int inbox_statx(int dirfd, const char *path, int force_sync, struct inbox_file_status *status) {
    struct statx raw;
    int flags = AT_SYMLINK_NOFOLLOW | (path[0] == 0 ? AT_EMPTY_PATH : 0) | (force_sync ? AT_STATX_FORCE_SYNC : 0);
    if (statx(dirfd, path, flags, STATX_BASIC_STATS | STATX_BTIME, &raw) == -1) return -1;
    status->device = makedev(raw.stx_dev_major, raw.stx_dev_minor);
    status->inode = raw.stx_ino;
    status->link_count = raw.stx_nlink;
    status->size = (int64_t)raw.stx_size;
    status->mode = raw.stx_mode;
    status->born_known = (raw.stx_mask & STATX_BTIME) != 0;
    status->accessed_seconds = raw.stx_atime.tv_sec;
    status->accessed_nanoseconds = raw.stx_atime.tv_nsec;
    status->modified_seconds = raw.stx_mtime.tv_sec;
    status->modified_nanoseconds = raw.stx_mtime.tv_nsec;
    status->born_seconds = raw.stx_btime.tv_sec;
    status->born_nanoseconds = raw.stx_btime.tv_nsec;
    status->changed_seconds = raw.stx_ctime.tv_sec;
    status->changed_nanoseconds = raw.stx_ctime.tv_nsec;
    status->owner = raw.stx_uid;
    status->group = raw.stx_gid;
    return 0;
}

int inbox_filesystem_type(int fd, int64_t *type) {
    struct statfs raw;
    if (fstatfs(fd, &raw) == -1) return -1;
    *type = (int64_t)raw.f_type;
    return 0;
}

// MARK: - Termination signals to a pipe (ARCHITECTURE.md, "The command line")

static _Atomic int inbox_signal_pipe = -1;

static void inbox_signal_to_pipe(int signal) {
    int saved = errno;
    unsigned char number = (unsigned char)signal;
    int fd = inbox_signal_pipe;
    if (fd >= 0) (void)write(fd, &number, 1);
    errno = saved;
}

int inbox_catch_signal_to_pipe(int signal, int write_fd, struct sigaction *previous) {
    inbox_signal_pipe = write_fd;
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = inbox_signal_to_pipe;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    return sigaction(signal, &action, previous);
}

long inbox_getdents64(int fd, void *buffer, size_t length) {
    return syscall(SYS_getdents64, fd, buffer, length);
}
