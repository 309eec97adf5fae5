import Glibc

/// How long a taker of an exclusive `flock` waits while another process holds it (ARCHITECTURE.md, "Nothing blocks
/// an MTA"). An MTA that hands a message to a delivery (`inbox import -`, `inbox deliver`, an LMTP delivery) waits
/// for our answer, and a holder that hangs (an `inbox import` stopped with ^Z, a process stuck on a filesystem) would
/// hold every later delivery: so a delivery waits at most `deliveryBound` for each lock, then fails with exit status
/// 75 in one line naming the holder (`FlockHolder`), and the MTA keeps the message and tries again later. Every other
/// taker (the watcher, a command a person runs) waits until the lock is free.
///
/// The bounded wait is a blocking `flock`, queued behind the other waiters as any is (so it gets the lock in its
/// turn, however busy the lock), cut short at the bound by a timer of the waiting thread's own whose signal reaches
/// that thread alone (`inbox_flock_within`).
package struct LockWait: Sendable, Equatable {
    /// How long at most; nil: until the lock is free.
    package let bound: Duration?

    package init(bound: Duration?) {
        self.bound = bound
    }

    /// Until the lock is free: one blocking `flock`.
    package static let unbounded = LockWait(bound: nil)

    /// What a delivery an MTA waits on allows for each lock (`deliveryBound`).
    package static let delivery = LockWait(bound: deliveryBound)

    /// 5 seconds: far above any hold of `import.lock` or `events.lock` by a process that runs (a batch's placement,
    /// its syncs included), far below what an MTA allows a delivery (Postfix's `pipe` gives a command 1,000 s).
    package static let deliveryBound: Duration = .seconds(5)

    /// Takes an exclusive `flock` on the open lock file `fd` (`path`, for messages), waiting as this says. Past the
    /// bound, fails with exit status 75 naming who holds the lock; any other failure of `flock` is
    /// `cannot <doing> '<path>'` with the status its errno gives.
    package func lockExclusive(_ fd: CInt, doing: String, path: String) throws(ContainerError) {
        guard let bound else {
            do {
                try system_flock(fd, LOCK_EX)
            } catch {
                throw error.failure(doing, path)
            }
            return
        }
        let (seconds, attoseconds) = bound.components
        do {
            try system_flock(fd, exclusiveWithin: Int(seconds) * 1000 + Int(attoseconds / 1_000_000_000_000_000))
        } catch .timedOut {
            let holder = FlockHolder(holding: fd).map(\.description) ?? FlockHolder.unknown
            throw ContainerError(
                .busy,
                "cannot \(doing) '\(path)' within \(Self.shown(bound)): \(holder) holds it; try again once it lets go")
        } catch {
            throw error.failure(doing, path)
        }
    }

    /// `5 s`, `250 ms`.
    static func shown(_ duration: Duration) -> String {
        let (seconds, attoseconds) = duration.components
        return attoseconds == 0 ? "\(seconds) s" : "\(seconds * 1000 + attoseconds / 1_000_000_000_000_000) ms"
    }
}

/// The process that holds an exclusive `flock`, as the kernel tells it in `/proc/locks`, and what it is (its command
/// line): the one way a lock's holder is named, by the watcher's lock (`WatcherLock`) and by the bounded wait
/// (`LockWait`). The pid is the one that took the lock; a descriptor it handed to a child it has outlived keeps the
/// lock under that pid. Nil where `/proc/locks` does not say (no `/proc`, a holder on another host, or through another
/// path to the file on FUSE, or in another pid namespace).
package struct FlockHolder: Sendable, Equatable, CustomStringConvertible {
    /// The holder's pid.
    package let pid: Int32
    /// Its command line (`/proc/PID/cmdline`, arguments joined by spaces, cut at 120 bytes); nil when it has ended.
    package let command: String?

    /// What a holder `/proc/locks` does not name is called.
    package static let unknown = "a process /proc/locks does not name (on another host, or through another path)"

    /// The holder of an exclusive `flock` on the file open at `fd` (any open of it).
    package init?(holding fd: CInt) {
        guard let status = try? FileStatus(system_fstat(fd)),
            let bytes = try? FileDescriptor("/proc/locks", [.readOnly]).readToEnd()
        else { return nil }
        let (major, minor) = FileID.majorMinor(status.device)
        // "2: FLOCK  ADVISORY  WRITE 22378 fe:00:16245949 0 EOF"; a waiting lock's line has "->" after the number.
        for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n") {
            let fields = line.split(separator: " ")
            guard fields.count >= 6, fields[1] == "FLOCK", fields[3] == "WRITE" else { continue }
            let file = fields[5].split(separator: ":")
            guard file.count == 3, UInt64(file[0], radix: 16) == major, UInt64(file[1], radix: 16) == minor,
                UInt64(file[2]) == status.inode, let pid = Int32(fields[4]), pid > 0
            else { continue }
            self.init(pid: pid, command: Self.commandLine(of: pid))
            return
        }
        return nil
    }

    package init(pid: Int32, command: String?) {
        self.pid = pid
        self.command = command
    }

    /// `pid 4242 (inbox import big.mbox)`, or `pid 4242` when its command line cannot be read.
    package var description: String { "pid \(pid)" + (command.map { " (\($0))" } ?? "") }

    /// The command line of `pid`, its arguments joined by spaces and cut at 120 bytes (at a character); nil when it
    /// cannot be read or is empty (a process that has ended).
    static func commandLine(of pid: Int32) -> String? {
        guard let bytes = try? FileDescriptor("/proc/\(pid)/cmdline", [.readOnly]).readToEnd(limit: 4096) else {
            return nil
        }
        let words = bytes.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
        guard !words.isEmpty else { return nil }
        let line = words.joined(separator: " ")
        guard line.utf8.count > 120 else { return line }
        var cut = ""
        for character in line {
            guard cut.utf8.count + character.utf8.count <= 119 else { break }
            cut.append(character)
        }
        return cut + "…"
    }
}
