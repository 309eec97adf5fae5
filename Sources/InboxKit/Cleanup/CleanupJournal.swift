import AppContainer
import Glibc

/// What makes a cleanup's deletions and its `deleted` records agree across a crash: `cleanup.intent` in the
/// state folder names one batch of entries before any is touched.
///
/// A batch goes: the intent, written and fsynced; each entry renamed aside in its folder
/// (`.inbox-clean.<inode>`), where no one else names a file, and checked to be the file planned; one durable
/// append of the `deleted` records; the asides removed; the folders and the intent's removal fsynced. So a
/// crash leaves either no intent, or an intent whose asides `recover` settles: deleted when the log holds
/// their record, else renamed back. Nothing is deleted without a record, and no record is written for a file
/// that stays. `cleanup.lock` keeps one clean at a time per container.
struct CleanupJournal {
    static let intentName = "cleanup.intent"
    static let lockName = "cleanup.lock"
    private static let asidePrefix = Array(".inbox-clean.".utf8)

    /// One planned deletion, as the intent holds it.
    struct Item: Equatable {
        /// The names below the container root; the last is the entry's.
        var components: [FileName]
        var reason: String
        var device: UInt64
        var inode: UInt64

        var folder: [FileName] { Array(components.dropLast()) }
        var path: [UInt8] { Array(components.map(\.bytes).joined(separator: [0x2F])) }
        /// The name the entry has while its batch is under way.
        var aside: FileName { CleanupJournal.asideName(inode: inode) }
    }

    let container: Container
    let state: SharedDescriptor

    init(container: Container) throws(ContainerError) {
        self.container = container
        do {
            state = SharedDescriptor(try FileDescriptor(container.stateDirectoryBytes, [.directory, .noFollow]))
        } catch {
            throw error.failure("open", container.stateDirectory)
        }
    }

    /// `.inbox-clean.<inode in hex>`.
    static func asideName(inode: UInt64) -> FileName {
        FileName(bytes: asidePrefix + Array(String(inode, radix: 16).utf8)).unsafelyUnwrapped
    }

    /// Whether `name` is an entry set aside by a clean under way: walks pass over it.
    static func isAside(_ name: FileName) -> Bool {
        name.bytes.starts(with: asidePrefix)
    }

    /// Takes the container's cleanup lock; nil when `wait` is false and another clean holds it.
    func lock(wait: Bool) throws(ContainerError) -> SharedDescriptor? {
        let shown = container.stateDirectory + "/" + Self.lockName
        do {
            let file = try FileDescriptor(
                at: state.rawValue, Self.lockName, [.readWrite, .create, .noFollow], mode: 0o644)
            do {
                try system_flock(file.rawValue, wait ? LOCK_EX : LOCK_EX | LOCK_NB)
            } catch .wouldBlock {
                return nil
            }
            return SharedDescriptor(file)
        } catch {
            throw error.failure("lock", shown)
        }
    }

    /// Writes the intent for `items`, appended to the log after `seq`, atomically and durably.
    func write(_ items: [Item], after seq: UInt64) throws(ContainerError) {
        var text = Array("inbox cleanup intent 1\nseq \(seq)\n".utf8)
        for item in items {
            text += Array("\(item.device) \(item.inode) ".utf8) + Self.hex(Array(item.reason.utf8))
            text += [0x20] + Self.hex(item.path) + [0x0A]
        }
        do {
            try state.descriptor.replaceFile(
                FileName(Self.intentName).unsafelyUnwrapped, with: text,
                temporary: FileName("." + Self.intentName + ".tmp"))
        } catch {
            throw error.failure("write", intentPath)
        }
    }

    /// The intent left by a clean that did not finish: the seq it follows and its items. Nil when there is none.
    func read() throws(ContainerError) -> (seq: UInt64, items: [Item])? {
        let bytes: [UInt8]
        do {
            let file = try FileDescriptor(at: state.rawValue, Self.intentName, [.noFollow])
            bytes = try file.readToEnd(limit: 64 << 20)
        } catch .noSuchFile {
            return nil
        } catch {
            throw error.failure("read", intentPath)
        }
        let lines = bytes.split(separator: 0x0A)
        guard lines.count >= 2, lines[0].elementsEqual("inbox cleanup intent 1".utf8),
            let seq = UInt64(String(decoding: lines[1].dropFirst(4), as: UTF8.self)),
            lines[1].starts(with: "seq ".utf8)
        else {
            throw ContainerError(.badData, "'\(intentPath)' is not a cleanup intent: move it away and clean again")
        }
        var items: [Item] = []
        for line in lines.dropFirst(2) {
            let fields = line.split(separator: 0x20)
            guard fields.count == 4, let device = UInt64(String(decoding: fields[0], as: UTF8.self)),
                let inode = UInt64(String(decoding: fields[1], as: UTF8.self)),
                let reason = Self.unhex(fields[2]), let path = Self.unhex(fields[3])
            else {
                throw ContainerError(.badData, "'\(intentPath)' holds a damaged line: move it away and clean again")
            }
            let components = path.split(separator: 0x2F).compactMap { FileName(bytes: $0) }
            guard !components.isEmpty, !components.contains(where: { $0.bytes == [0x2E, 0x2E] }) else { continue }
            items.append(
                Item(
                    components: components, reason: String(decoding: reason, as: UTF8.self), device: device,
                    inode: inode))
        }
        return (seq, items)
    }

    /// Settles the batch an interrupted clean left: each aside whose `deleted` record is in the log (after
    /// the intent's seq) is deleted, as is a planned name the record covers whose rename a power cut undid;
    /// every other aside goes back under its name. Then the intent is removed.
    func recover(log: EventLog) throws(ContainerError) {
        guard let intent = try read() else { return }
        struct Key: Hashable {
            var path: [UInt8]
            var reason: String
        }
        var logged = Set<Key>()
        for record in try log.records(since: intent.seq, kinds: [.deleted]) {
            guard let path = record.pathBytes("path") else { continue }
            logged.insert(Key(path: path, reason: record.fields["reason"] ?? ""))
        }
        var touched: [SharedDescriptor] = []
        var unsettled: ContainerError?
        for item in intent.items {
            let shown = container.root + "/" + String(decoding: item.path, as: UTF8.self)
            let open: SharedDescriptor
            do {
                open = SharedDescriptor(try container.openFolder(item.folder))
            } catch {
                if error.cause == .noSuchFile { continue }  // the folder is gone, and the entry with it
                unsettled = unsettled ?? error
                continue
            }
            do throws(Errno) {
                if logged.contains(Key(path: item.path, reason: item.reason)) {
                    // In case a power cut undid the rename: a name still holding the file planned goes aside.
                    if case .failure(let error) = item.setAside(in: open.rawValue), error != .noSuchFile {
                        throw error
                    }
                    if try fileStatusIfPresent(in: open.rawValue, item.aside) != nil {
                        do throws(ContainerError) { try item.remove(in: open.rawValue, shown: shown) } catch {
                            unsettled = unsettled ?? error
                            continue
                        }
                    }
                } else if try removeFolderPlaceholder(in: open.rawValue, item.aside) {
                    // A folder's aside cut between the `mkdir` and the `rename` of the fallback (ARCHITECTURE.md,
                    // "Network and FUSE filesystems"): the folder still has its name, and the empty aside goes.
                } else if let status = try fileStatusIfPresent(in: open.rawValue, item.aside), item.matches(status) {
                    try item.putBack(in: open.rawValue)
                }
                touched.append(open)
            } catch {
                unsettled = unsettled ?? error.failure("settle the interrupted clean of", shown)
            }
        }
        for folder in touched {
            do { try system_fsync(folder.rawValue) } catch {
                unsettled = unsettled ?? error.failure("sync", intentPath)
            }
        }
        // The intent stays while anything is unsettled: the next clean tries again.
        if let unsettled { throw unsettled }
        try remove()
    }

    /// Removes the intent, durably: the batch is settled.
    func remove() throws(ContainerError) {
        do {
            try system_unlinkat(state.rawValue, Self.intentName)
            try system_fsync(state.rawValue)
        } catch .noSuchFile {
            return
        } catch {
            throw error.failure("remove", intentPath)
        }
    }

    private var intentPath: String { container.stateDirectory + "/" + Self.intentName }

    private static func hex(_ bytes: [UInt8]) -> [UInt8] {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = [0x2D]  // `-` so that an empty field is still a field
        out.reserveCapacity(1 + bytes.count * 2)
        for byte in bytes { out += [digits[Int(byte >> 4)], digits[Int(byte & 0x0F)]] }
        return out
    }

    private static func unhex(_ text: ArraySlice<UInt8>) -> [UInt8]? {
        guard text.first == 0x2D, text.count % 2 == 1 else { return nil }
        var bytes: [UInt8] = []
        var high: UInt8?
        for character in text.dropFirst() {
            guard let value = hexValue(character) else { return nil }
            if let first = high {
                bytes.append(first << 4 | value)
                high = nil
            } else {
                high = value
            }
        }
        return bytes
    }

    private static func hexValue(_ character: UInt8) -> UInt8? {
        switch character {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): character - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): character - UInt8(ascii: "a") + 10
        default: nil
        }
    }
}

extension CleanupJournal.Item {
    /// Whether `status` describes the file planned.
    func matches(_ status: FileStatus) -> Bool {
        status.fileID == fileID
    }

    /// The file planned.
    var fileID: FileID { FileID(device: device, inode: inode) }

    /// Renames the entry aside in `folder` with the one checked rename: true once the file planned is aside,
    /// false when the name holds another file (a file that took the name meanwhile goes back).
    func setAside(in folder: CInt) -> Result<Bool, Errno> {
        guard let name = components.last else { return .failure(.noSuchFile) }
        do throws(Errno) {
            guard matches(try fileStatus(in: folder, name)) else { return .success(false) }
            let taken = try checkedRename(
                name, in: folder, into: folder, as: aside, naming: .inbox,
                expected: fileID)
            // An aside a crashed clean left holds the name: the entry went beside it, so it goes back.
            if let taken, taken != aside {
                try AppContainer.putBack(taken, from: folder, into: folder, as: name)
                return .failure(.fileExists)
            }
            return .success(taken != nil)
        } catch {
            return .failure(error)
        }
    }

    /// Renames the aside back to its name, or to a free name beside it (`name-1`, …) when that is taken.
    func putBack(in folder: CInt) throws(Errno) {
        guard let name = components.last else { return }
        try AppContainer.putBack(aside, from: folder, into: folder, as: name)
    }

    /// Deletes the aside in `folder` while it is the file planned; a folder goes with everything in it.
    func remove(in folder: CInt, shown: String) throws(ContainerError) {
        try FolderWalk.remove(aside, in: folder, shown: shown, expected: fileID)
    }
}
