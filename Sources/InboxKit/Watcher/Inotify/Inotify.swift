import AppContainer
import CInotifyTools
import Glibc

/// One inotify event, copied out of libinotifytools' static buffer before the next call overwrites it.
struct InotifyEvent: Sendable {
    let watch: CInt
    let mask: UInt32
    let name: [UInt8]

    /// Flags the kernel reports on its own, apart from the events asked for.
    var isOverflow: Bool { mask & UInt32(IN_Q_OVERFLOW) != 0 }
    /// The watched folder is gone or no longer watched: `IN_IGNORED`, `IN_DELETE_SELF`, `IN_MOVE_SELF`, `IN_UNMOUNT`.
    var watchEnded: Bool { mask & UInt32(IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF | IN_UNMOUNT) != 0 }
}

/// The events asked for on the Inbox folder.
struct InotifyMask: OptionSet {
    let rawValue: UInt32

    /// `IN_CLOSE_WRITE`: a file written in place is complete.
    static let closeWrite = InotifyMask(rawValue: UInt32(IN_CLOSE_WRITE))
    /// `IN_MOVED_TO`: a file renamed in is complete.
    static let movedTo = InotifyMask(rawValue: UInt32(IN_MOVED_TO))
    /// `IN_CREATE`: links, FIFOs, folders and hard links appear without a close.
    static let create = InotifyMask(rawValue: UInt32(IN_CREATE))
    /// `IN_DELETE_SELF`
    static let deleteSelf = InotifyMask(rawValue: UInt32(IN_DELETE_SELF))
    /// `IN_MOVE_SELF`
    static let moveSelf = InotifyMask(rawValue: UInt32(IN_MOVE_SELF))
    /// `IN_ONLYDIR`: refuse to watch anything but a folder.
    static let onlyDirectory = InotifyMask(rawValue: UInt32(IN_ONLYDIR))
    /// `IN_DONT_FOLLOW`: never watch through a symbolic link.
    static let dontFollow = InotifyMask(rawValue: UInt32(IN_DONT_FOLLOW))

    /// `IN_DELETE`
    static let delete = InotifyMask(rawValue: UInt32(IN_DELETE))
    /// `IN_MOVED_FROM`
    static let movedFrom = InotifyMask(rawValue: UInt32(IN_MOVED_FROM))

    static let inbox: InotifyMask = [
        .closeWrite, .movedTo, .create, .deleteSelf, .moveSelf, .onlyDirectory, .dontFollow,
    ]
    /// On Documents, to see the Inbox folder itself go or come: `IN_DELETE_SELF` waits until nobody
    /// has the deleted folder open, which the watcher does while it works.
    static let inboxParent: InotifyMask = [.delete, .movedFrom, .create, .onlyDirectory, .dontFollow]
}

/// libinotifytools, which has one global, thread-unsafe instance: only the watcher's event thread uses this.
enum Inotify {
    /// Initialises the library. Its wait is a fortified `select()`, which aborts the process for a descriptor
    /// from `FD_SETSIZE` (1024) up: a process serving many containers holds thousands, and the library's own
    /// descriptor, made anew at each restart, could land there. Then it is let go and this fails (the hub tries
    /// again shortly, when a lower descriptor may be free).
    static func initialize() throws(ContainerError) {
        let before = inotifyDescriptors()
        guard inotifytools_initialize() != 0 else {
            let error = Errno(rawValue: inotifytools_error())
            throw ContainerError(
                .failure, "cannot start inotify: \(error) (see /proc/sys/fs/inotify/max_user_instances)")
        }
        let ours = inotifyDescriptors().subtracting(before)
        if let high = ours.first(where: { $0 >= FD_SETSIZE }) {
            inotifytools_cleanup()
            throw ContainerError(
                .failure, "cannot start inotify: its descriptor \(high) is past what select() takes (\(FD_SETSIZE))")
        }
    }

    /// The process's inotify descriptors, from /proc/self/fd (empty when it cannot be read).
    private static func inotifyDescriptors() -> Set<CInt> {
        var found: Set<CInt> = []
        do {
            let folder = try FileDescriptor("/proc/self/fd", [.directory])
            try folder.forEachEntry { name throws(Errno) in
                if let number = CInt(name.string),
                    (try? system_readlinkat(folder.rawValue, name)) == Array("anon_inode:inotify".utf8)
                {
                    found.insert(number)
                }
                return true
            }
        } catch {
            // Without /proc nothing is known; the descriptor is taken as it comes.
        }
        return found
    }

    /// Drops every watch and the library's stale state, as after `IN_IGNORED`.
    static func cleanup() {
        inotifytools_cleanup()
    }

    /// Watches `path`; returns the watch descriptor.
    static func watch(_ path: [UInt8], _ mask: InotifyMask) throws(Errno) -> CInt {
        guard path.withCPath({ inotifytools_watch_file($0, Int32(bitPattern: mask.rawValue)) }) != 0 else {
            throw Errno(rawValue: inotifytools_error())
        }
        // The library keeps folder names with a trailing slash.
        let watch = (path.last == 0x2F ? path : path + [0x2F]).withCPath { inotifytools_wd_from_filename($0) }
        return watch > 0 ? watch : path.withCPath { inotifytools_wd_from_filename($0) }
    }

    /// The next event, or nil after `seconds` without one. EINTR is retried.
    static func next(timeoutSeconds seconds: Int) throws(Errno) -> InotifyEvent? {
        while true {
            guard let event = inotifytools_next_event(seconds) else {
                let error = inotifytools_error()
                if error == 0 { return nil }
                if error == EINTR { continue }
                throw Errno(rawValue: error)
            }
            var name: [UInt8] = []
            if event.pointee.len > 0, let cName = inbox_inotify_event_name(event) {
                name = Array(UnsafeRawBufferPointer(start: cName, count: strlen(cName)))
            }
            return InotifyEvent(watch: event.pointee.wd, mask: event.pointee.mask, name: name)
        }
    }
}
