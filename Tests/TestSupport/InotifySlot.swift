import Glibc

/// One lasting in-process watcher at a time across test targets (they share the process's inotify thread, whose
/// restarts rescan every watcher): a `flock` on a fixed file, held while the value lives.
package final class InotifySlot {
    private let fd: CInt

    private init(fd: CInt) {
        self.fd = fd
    }

    /// Waits for the slot without blocking a thread of the cooperative pool, whose other tasks the holder may need.
    package static func take() async -> InotifySlot {
        let fd = open("/tmp/inbox-tests-inotify.lock", O_CREAT | O_RDWR | O_CLOEXEC, 0o666)
        while flock(fd, LOCK_EX | LOCK_NB) != 0 { try? await Task.sleep(for: .milliseconds(20)) }
        return InotifySlot(fd: fd)
    }

    deinit {
        flock(fd, LOCK_UN)
        close(fd)
    }
}
