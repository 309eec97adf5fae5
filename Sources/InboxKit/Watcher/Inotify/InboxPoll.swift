import AppContainer
import Glibc

/// The poll of an Inbox on a network or FUSE filesystem, where inotify never sees another host's writes
/// (ARCHITECTURE.md, "Network and FUSE filesystems"). Every `interval` (`idleInterval` once nothing has changed for
/// `idleAfter`) the Inbox's folder is looked at past the client's attribute cache and read; a name new to it is
/// looked at (opened, then its status asked of the server) at each poll until it holds still: its inode, size,
/// modification and change times the same across looks at least `settle` apart. Only then is it handed on, or at
/// once when it came by rename from a dot-name listed at the poll before (a writer that writes under a dot-name,
/// then renames). An Inbox unchanged since the last poll costs one `fstat`, and the read of the folder only where its
/// stamp (`FolderStamp`) moved since a read known complete for it. Names
/// a scan finds on such an Inbox go through the same gate (`admitted`); names inotify reports (this host's writes) do
/// not.
final class InboxPoll {
    /// What a look at an entry saw.
    private struct Look: Equatable {
        let inode: UInt64
        let size: Int64
        let modified: Timestamp
        let changed: Timestamp
    }

    private enum Entry {
        /// A dot-name: left alone, its inode remembered for the rename rule.
        case hidden(inode: UInt64)
        /// Handed on, or an item that had arrived already: not looked at again while the name holds this inode.
        case settled(inode: UInt64)
        /// Looked at, and the same since `since`.
        case settling(Look, since: ContinuousClock.Instant)
    }

    /// Why the Inbox is polled: the filesystem's name (`nfs4`, `fuse.sshfs`, `fuse`).
    let reason: String
    let interval: Duration
    let settle: Duration
    /// The interval once the Inbox has been idle for `idleAfter` (5 minutes): nothing listed changed and nothing
    /// settling.
    let idleInterval: Duration
    let idleAfter: Duration

    /// The coarsest timestamp a filesystem keeps (FAT's 2 s): a read is complete for a stamp only when made this long
    /// after the stamp was first seen, since a change in the same tick as an earlier one leaves the stamp as it was.
    let stampTick: Duration
    private var entries: [FileName: Entry] = [:]
    /// The folder's stamp, and when it was first seen.
    private var stampSeen: (stamp: FolderStamp, since: ContinuousClock.Instant)?
    /// The stamp the last read is complete for, and when that read was: another read is due at the latest an
    /// `idleInterval` later, in case a filesystem keeps no true folder times.
    private var completeRead: (stamp: FolderStamp, at: ContinuousClock.Instant)?
    /// The folder read last: another (the Inbox replaced and reopened) starts the entries afresh.
    private var folder: FileID?
    /// Whether the folder lists each name's own inode (`IdentityProbe`): where it does not (FUSE's "unknown"
    /// 4294967295 from a filesystem on libfuse's path API), nothing is keyed by a listed inode, and a name that came
    /// by rename from a dot-name cannot be told, so it settles like any other.
    private var listsInodes = true
    /// `listsInodes` as given (tests), else probed.
    private let givenListing: Bool?
    private var lastChange = ContinuousClock.now
    /// When the next poll is due: at once for the first.
    private(set) var nextPoll = ContinuousClock.now
    /// Whether some name is still settling (`watch --once` waits for it, as for a file being written).
    private(set) var isSettling = false

    init(
        reason: String, interval: Duration, settle: Duration, idleInterval: Duration = .seconds(30),
        idleAfter: Duration = .seconds(300), stampTick: Duration = .seconds(2), listsInodes: Bool? = nil
    ) {
        givenListing = listsInodes
        self.stampTick = stampTick
        self.reason = reason
        self.interval = interval
        self.settle = settle
        self.idleInterval = idleInterval
        self.idleAfter = idleAfter
    }

    /// The interval in force now.
    var currentInterval: Duration {
        !isSettling && ContinuousClock.now - lastChange >= idleAfter ? max(interval, idleInterval) : interval
    }

    /// Polls the Inbox open as `inbox`; returns the names ready to be handed on. Identities in `arrived` are items
    /// kept already: settled without being handed on. Throws `ESTALE` where the folder has no name left (replaced:
    /// a scan reopens it), or the failure of its read.
    func poll(_ inbox: borrowing FileDescriptor, arrived: Set<Identity>) throws(Errno) -> [FileName] {
        let now = ContinuousClock.now
        defer { nextPoll = Self.onTheGrid(now + currentInterval, interval: interval) }
        let status = try inbox.freshFileStatus()
        guard status.linkCount > 0 else { throw Errno(rawValue: ESTALE) }
        if folder != status.fileID {
            folder = status.fileID
            entries = [:]
            completeRead = nil
            listsInodes = givenListing ?? (IdentityProbe.verdict(in: inbox.rawValue) != .listsOtherInodes)
        }
        let stamp = FolderStamp(status)
        let readAt = ContinuousClock.now
        if stampSeen?.stamp != stamp { stampSeen = (stamp, readAt) }
        if !isSettling, let read = completeRead, read.stamp == stamp, readAt - read.at < max(idleInterval, interval) {
            return []
        }
        let listed = try inbox.entriesAndInodes()
        completeRead = readAt - (stampSeen?.since ?? readAt) >= stampTick ? (stamp, readAt) : nil
        let names = Set(listed.map(\.name))
        // The inodes of dot-names listed last time and gone now: a new name holding one came by rename.
        var renamedAway: Set<UInt64> = []
        for (name, entry) in entries where listsInodes {
            if case .hidden(let inode) = entry, inode != 0, !names.contains(name) { renamedAway.insert(inode) }
        }
        var next: [FileName: Entry] = [:]
        next.reserveCapacity(listed.count)
        var ready: [FileName] = []
        var changed = listed.count != entries.count
        for listing in listed {
            // Unknown (0) where the folder lists no true inodes: every name not yet settled is looked at.
            let (name, inode, type) = (listing.name, listsInodes ? listing.inode : 0, listing.type)
            if name.isHidden {
                next[name] = .hidden(inode: inode)
                if case .hidden(let old)? = entries[name], old == inode {} else { changed = true }
                continue
            }
            var since: (Look, ContinuousClock.Instant)?
            var wasSettled: UInt64?
            switch entries[name] {
            case .settled(let known)? where known == inode:
                next[name] = .settled(inode: inode)
                continue
            case .settled(let known)? where inode == 0:
                wasSettled = known
            case .settling(let look, let start)? where look.inode == inode || inode == 0:
                since = (look, start)
            default:
                changed = true
                if renamedAway.contains(inode) {
                    next[name] = .settled(inode: inode)
                    ready.append(name)
                    continue
                }
            }
            switch try look(inbox, name, type: type, arrived: arrived) {
            case .gone:
                changed = true
            case .handOn:
                next[name] = .settled(inode: inode)
                ready.append(name)
            case .arrived(let known):
                next[name] = .settled(inode: known)
            case .seen(let look) where look.inode == wasSettled:
                next[name] = .settled(inode: look.inode)
            case .seen(let look):
                if let (last, start) = since, last == look {
                    if now - start >= settle {
                        next[name] = .settled(inode: look.inode)
                        ready.append(name)
                    } else {
                        next[name] = .settling(look, since: start)
                    }
                } else {
                    changed = true
                    next[name] = .settling(look, since: now)
                }
            }
        }
        entries = next
        isSettling = next.values.contains { if case .settling = $0 { true } else { false } }
        if changed || isSettling { lastChange = now }
        return ready
    }

    /// Where the polls of one process fall: on a grid of an eighth of the interval (at most 250 ms), so that a pool's
    /// thread wakes once for the many containers due together, not once for each (a wake costs more than a poll).
    static func onTheGrid(_ due: ContinuousClock.Instant, interval: Duration) -> ContinuousClock.Instant {
        let grid = max(1, min(interval / 8, .milliseconds(250)).nanoseconds)
        let offset = gridOrigin.duration(to: due).nanoseconds
        return gridOrigin + .nanoseconds((offset + grid - 1) / grid * grid)
    }

    private static let gridOrigin = ContinuousClock.now

    /// Of the names a scan read, those the poll has handed on already (or found arrived): the others wait for it.
    func admitted(_ names: [FileName]) -> [FileName] {
        names.filter { if case .settled? = entries[$0] { true } else { false } }
    }

    private enum Seen {
        case gone
        /// Not a file nor a folder (a link, a FIFO, a device), or one that cannot be opened: the pipeline rejects it
        /// or says why it cannot arrive, and tries again.
        case handOn
        case arrived(inode: UInt64)
        case seen(Look)
    }

    /// Opens the entry (close-to-open: a network client then asks the server) and asks its status past the cache.
    private func look(_ inbox: borrowing FileDescriptor, _ name: FileName, type: UInt8, arrived: Set<Identity>)
        throws(Errno) -> Seen
    {
        if type != UInt8(DT_REG) && type != UInt8(DT_DIR) && type != UInt8(DT_UNKNOWN) { return .handOn }
        let status: FileStatus
        do {
            if type == UInt8(DT_UNKNOWN) {
                // Never opened before its kind is known: a device node is not opened.
                let kind = try fileStatus(in: inbox.rawValue, name).kind
                guard kind == .regular || kind == .directory else { return .handOn }
            }
            let file = try FileDescriptor(at: inbox.rawValue, name, [.noFollow, .nonBlocking])
            status = try file.freshFileStatus()
        } catch .noSuchFile {
            return .gone
        } catch {
            return .handOn
        }
        if !arrived.isEmpty && arrived.contains(Identity(status)) { return .arrived(inode: status.inode) }
        return .seen(Look(inode: status.inode, size: status.size, modified: status.modified, changed: status.changed))
    }
}
