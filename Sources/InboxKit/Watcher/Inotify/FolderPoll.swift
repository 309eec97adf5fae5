import AppContainer
import Synchronization

/// Looks at a folder that inotify cannot watch, once a try (ARCHITECTURE.md, "libinotifytools"): whether it may
/// have changed since the last look, so that a scan is asked for only then. A name made, removed or renamed there
/// changes the folder's modification time, and a folder replaced is another inode. A time less than two seconds old
/// may share its clock tick with a change still to come, which would leave it as it is: it counts as changed until
/// it is older. A folder that cannot be looked at counts as changed the first time (the scan says why), not again
/// while it stays so.
final class FolderPoll: Sendable {
    private enum Seen: Equatable {
        case nothing, unreadable
        case look(FolderStamp)
    }

    /// How long a modification time counts as changed, in nanoseconds.
    static let settling: Int64 = 2_000_000_000
    private let last = Mutex(Seen.nothing)

    /// Whether the folder at `path` may have changed since the last look (the first look: always).
    func changed(_ path: some CStringConvertible) -> Bool {
        let seen: Seen
        do {
            let status = try fileStatus(in: currentDirectory, path)
            seen = .look(FolderStamp(status))
        } catch {
            // Not swallowed: the scan this asks for opens the folder and fails with the reason.
            seen = .unreadable
        }
        let now = Timestamp.now()
        return last.withLock { last in
            defer { last = seen }
            guard seen == last else { return true }
            guard case .look(let stamp) = seen else { return false }
            let age =
                (now.seconds - stamp.modified.seconds) * 1_000_000_000 + now.nanoseconds - stamp.modified.nanoseconds
            return age < Self.settling
        }
    }

    /// Forgets the last look: the next counts as changed.
    func forget() {
        last.withLock { $0 = .nothing }
    }
}
