import AppContainer
import FoundationEssentials
import Glibc

/// Intent records for the moves of `inbox move` and the library (ARCHITECTURE.md, "One mover"), so that a
/// crash at any step is finished or rolled back at the next start: never lost, never two copies, and never
/// a move without its `moved` record. A rename's intent names the item and its identity; a copy's (a file
/// with other hard links, or Documents on another filesystem) also the claim it renamed the item to.
///
/// Each intent is a file in `Library/Application Support/inbox/journal`, locked by its mover for the whole
/// move. An intent that can be locked by someone else has lost its mover. A move that starts without a claim
/// writes its intent into a slot (`slot-N.intent`), a file kept from one move to the next and written over in
/// place, so that it allocates no inode and syncs no folder; a copy's own intent is a new file named after its
/// claim (`claimedItem` finds it so), as is a move's when every slot is taken.
///
/// An intent is written in frames, each a few lines and a `sum` line (the hash of every byte before it) that
/// makes the frame count once it is whole: the first frame at `begin`, one a step (`note`). A frame torn by a
/// crash, and whatever an earlier intent left after the last frame of a slot, counts for nothing; that is
/// safe, since the step a frame announces is taken only once the frame is synced.
package struct MoveJournal {
    /// `journal` in the state folder, exact to the byte.
    let directoryBytes: [UInt8]
    /// `directoryBytes` as text, for messages.
    var directory: String { String(decoding: directoryBytes, as: UTF8.self) }
    /// The slots a container's movers share, at most as many moves at once before one writes a file of its own.
    static let slotCount = 8

    package init(container: Container) {
        directoryBytes = container.statePath("journal")
    }

    /// A move in progress: the item, what it claimed (a copy) and the names it tried in Documents.
    struct Intent {
        var name: FileName
        var claim: FileName?
        /// The item's identity, for the `moved` record recovery writes.
        var identity: Identity?
        /// The log's last seq when the move began: a `moved` record after it means the move was logged.
        var seq: UInt64 = 0
        var tried: [FileName] = []
        var linked: FileName?
        /// The intent's own random id (hex), which no other intent has: a file's private name on a filesystem
        /// without rename flags is named after it (`privateName`).
        var nonce: String?

        /// `.inbox-move.<nonce>`: where a file this intent moves stays between its `rename` and its `link`
        /// (ARCHITECTURE.md, "Moves without rename flags"); nil for an intent written without a nonce.
        var privateName: FileName? { nonce.map(privateMoveName) }
    }

    /// The open, locked record of one intent, and where its next frame goes.
    final class Record {
        let file: FileDescriptor
        let recordName: FileName
        private(set) var frames = Frames()
        /// The intent's nonce (`Intent.nonce`), once `begin` wrote it.
        fileprivate(set) var nonce = ""

        /// `Intent.privateName` of the intent this record holds.
        var privateName: FileName { privateMoveName(nonce) }

        /// `written`: the frames already in the file.
        init(file: consuming FileDescriptor, recordName: FileName, written: [UInt8] = []) {
            self.file = file
            self.recordName = recordName
            frames.add(written)
        }

        /// Whether the file is a slot, kept for the next move once this one ends.
        var isSlot: Bool { MoveJournal.isSlot(recordName) }

        /// Writes `lines` and their `sum` line after the frames so far, and syncs them.
        func writeFrame(_ lines: [UInt8]) throws(Errno) {
            let frame = frames.sealed(lines)
            try file.writeAll(frame, at: Int64(frames.length))
            try file.sync()
            frames.add(frame)
        }
    }

    /// Writes an intent durably, locked, before the move touches anything.
    func begin(_ intent: Intent) throws(Errno) -> Record {
        do {
            try system_mkdirat(currentDirectory, directoryBytes, mode: 0o755)
        } catch .fileExists {}
        let folder = try FileDescriptor(folder: directoryBytes)
        var text = line("name", intent.name) + Array("seq \(intent.seq)\n".utf8)
        if let claim = intent.claim { text += line("claim", claim) }
        if let identity = intent.identity { text += Array("id \(identity.text)\n".utf8) }
        // Two intents of one slot never share a first frame, so no frame an earlier one left counts for this one.
        let nonce = String(UInt64.random(in: 0...UInt64.max), radix: 16)
        text += Array("nonce \(nonce)\n".utf8)
        if intent.claim == nil, let slot = freeSlot(in: folder) {
            try slot.record.writeFrame(text)
            if slot.created { try folder.sync() }
            slot.record.nonce = nonce
            return slot.record
        }
        // Named only once its first frame is whole; a unique name, so renamed plainly where it is staged.
        let file = try UnnamedFile(in: folder.rawValue, .writeOnly, mode: 0o600)
        try system_flock(file.descriptor.rawValue, LOCK_EX)
        let unique = intent.claim?.string ?? "move.\(getpid()).\(UInt64.random(in: 0...UInt64.max))"
        let recordName = FileName("\(unique).intent") ?? intent.name
        let frame = Frames().sealed(text)
        do throws(Errno) {
            try file.descriptor.writeAll(frame, at: 0)
            try file.descriptor.sync()
            try file.name(recordName, unique: true)
        } catch {
            try file.discard()
            throw error
        }
        let record = Record(file: file.take(), recordName: recordName, written: frame)
        record.nonce = nonce
        try folder.sync()
        return record
    }

    /// The first slot no mover holds, locked; created when missing. A slot that is not a plain file of one link,
    /// or that another process renamed or removed before the lock was taken, is passed over: a crafted state file
    /// is never written, and no intent goes where recovery would not read it. Nil when none is free.
    private func freeSlot(in folder: borrowing FileDescriptor) -> (record: Record, created: Bool)? {
        for index in 0..<Self.slotCount {
            let name = FileName("slot-\(index).intent").unsafelyUnwrapped
            let file: FileDescriptor
            var created = false
            do {
                file = try FileDescriptor(at: folder.rawValue, name, [.readWrite, .noFollow, .nonBlocking])
            } catch .noSuchFile {
                do {
                    file = try FileDescriptor(
                        at: folder.rawValue, name, [.readWrite, .create, .exclusive, .noFollow], mode: 0o600)
                    created = true
                } catch {
                    continue  // another mover made it first, or it cannot be made: the next one
                }
            } catch {
                continue
            }
            do throws(Errno) {
                try system_flock(file.rawValue, LOCK_EX | LOCK_NB)
                let status = try file.fileStatus()
                guard status.kind == .regular, status.linkCount == 1,
                    try fileStatusIfPresent(in: folder.rawValue, name)?.isSameFile(as: status) == true
                else { continue }
            } catch {
                continue  // held by another mover (or unreadable): the next one
            }
            return (Record(file: file, recordName: name), created)
        }
        return nil
    }

    /// Notes, durably, a step of the move: a name about to be tried, or the name that took.
    func note(_ key: String, _ name: FileName, in record: Record) throws(Errno) {
        try record.writeFrame(line(key, name))
    }

    /// Removes a finished intent; a slot's is spoilt in place (its first bytes written over, so that no frame of
    /// it counts), without a sync: should a crash undo that, recovery settles the finished move as nothing.
    func end(_ record: Record) throws(Errno) {
        if record.isSlot {
            try record.file.writeAll(Array("done".utf8), at: 0)
        } else {
            let folder = try FileDescriptor(folder: directoryBytes)
            try system_unlinkat(folder.rawValue, record.recordName)
        }
    }

    /// Renames the entry `recordName`, which must not be acted on, to `<name>.refused` (or `<name>-1.refused`,
    /// and so on, when that is taken), which recovery never reads.
    func setAside(_ recordName: FileName) throws(Errno) {
        let folder = try FileDescriptor(folder: directoryBytes)
        _ = try AppContainer.setAside(recordName, in: folder.rawValue, suffix: ".refused")
    }

    /// What recovery finds in the journal.
    enum Finding {
        /// An intent whose mover is gone, locked for the caller, with its record to `end`.
        case abandoned(Intent, Record)
        /// An entry (nil: the journal itself) that could not be read now, kept for the next try; or one that no mover
        /// of ours wrote, set aside and never acted on.
        case failed(FileName?, ContainerError)
    }

    /// Calls `body` with each intent whose mover is gone, and each entry that cannot be read or is not ours.
    func forEachAbandoned(_ body: (Finding) -> Void) {
        let names: [FileName]
        let folder: FileDescriptor
        do {
            folder = try FileDescriptor(folder: directoryBytes)
        } catch .noSuchFile {
            return  // no move has begun yet
        } catch {
            return body(.failed(nil, error.failure("read the move journal", directory)))
        }
        do {
            names = try folder.entries()
        } catch {
            return body(.failed(nil, error.failure("read the move journal", directory)))
        }
        do {
            // An intent a crash left unnamed is no move yet: nothing was touched after it.
            _ = try UnnamedFile.sweep(names, in: folder.rawValue)
        } catch {
            body(.failed(nil, error.failure("sweep the move journal", directory)))
        }
        for recordName in names where recordName.string.hasSuffix(".intent") {
            if let finding = examine(recordName, in: folder) { body(finding) }
        }
    }

    /// What the entry `recordName` holds; nil when it is held by its mover, gone, or a slot between two moves.
    private func examine(_ recordName: FileName, in folder: borrowing FileDescriptor) -> Finding? {
        let path = directory + "/" + recordName.string
        let file: FileDescriptor
        do {
            file = try FileDescriptor(at: folder.rawValue, recordName, [.readWrite, .noFollow, .nonBlocking])
        } catch .noSuchFile {
            return nil  // ended since the folder was read
        } catch {
            // A symbolic link, a folder or a socket cannot be opened so, and is no intent of ours.
            do {
                guard let status = try fileStatusIfPresent(in: folder.rawValue, recordName) else { return nil }
                if status.kind != .regular { return refuse(recordName, "is not a plain file") }
            } catch {}  // what it is cannot be told: the open's failure is reported
            return .failed(recordName, error.failure("read the move journal entry", path))
        }
        let text: [UInt8]
        do {
            // A FIFO or a device is never read, nor a file with other names, which ending the intent would write.
            let status = try file.fileStatus()
            if status.linkCount == 0 { return nil }  // ended by its mover since it was opened
            guard status.kind == .regular, status.linkCount == 1 else {
                return refuse(recordName, "is not a plain file of one link")
            }
            do {
                try system_flock(file.rawValue, LOCK_EX | LOCK_NB)
            } catch .wouldBlock {
                return nil  // its mover is at work
            }
            text = try file.readToEnd(limit: Self.readLimit)
        } catch {
            return .failed(recordName, error.failure("read the move journal entry", path))
        }
        guard text.count < Self.readLimit else { return refuse(recordName, "is larger than any intent of ours") }
        guard let intent = parse(text, isSlot: Self.isSlot(recordName)) else {
            return Self.isSlot(recordName) ? nil : refuse(recordName, "holds no intent")
        }
        return .abandoned(intent, Record(file: file, recordName: recordName))
    }

    /// Sets aside the entry `recordName`, which no mover of ours wrote, as the error that says so; nil when it
    /// is gone.
    private func refuse(_ recordName: FileName, _ why: String) -> Finding? {
        let path = directory + "/" + recordName.string
        do {
            try setAside(recordName)
        } catch .noSuchFile {
            return nil
        } catch {
            return .failed(recordName, error.failure("set aside the move journal entry", path))
        }
        return .failed(
            recordName, ContainerError(.badData, "the move journal entry '\(path)' \(why): set aside, not acted on"))
    }

    /// The journal's entries, sorted, but for the slots that hold no intent (between two moves, or torn before
    /// their first frame was whole): what is left for recovery to look at. Read without the movers' locks.
    package func entriesLeft() throws(Errno) -> [String] {
        let folder: FileDescriptor
        do {
            folder = try FileDescriptor(folder: directoryBytes)
        } catch .noSuchFile {
            return []
        }
        var left: [String] = []
        for name in try folder.entries() {
            if Self.isSlot(name),
                let file = try? FileDescriptor(at: folder.rawValue, name, [.readOnly, .noFollow, .nonBlocking]),
                try file.fileStatus().kind == .regular,
                parse(try file.readToEnd(limit: Self.readLimit), isSlot: true) == nil
            {
                continue
            }
            left.append(name.string)
        }
        return left.sorted()
    }

    /// The item the move whose claim is `claim` is moving, as its intent names it (read without its lock, which
    /// the mover holds); nil when no intent names it, or names a hidden name.
    package func claimedItem(_ claim: FileName) -> FileName? {
        guard let recordName = FileName(bytes: claim.bytes + Array(".intent".utf8)) else { return nil }
        let text: [UInt8]
        do {
            let path = directoryBytes + [0x2F] + recordName.bytes
            let file = try FileDescriptor(path, [.readOnly, .noFollow, .nonBlocking])
            text = try file.readToEnd(limit: Self.readLimit)
        } catch {
            return nil  // the claim keeps its name in the archive, and a restore gives it a visible one
        }
        guard let intent = parse(text, isSlot: false), intent.claim == claim, !intent.name.isHidden else { return nil }
        return intent.name
    }

    private func line(_ key: String, _ name: FileName) -> [UInt8] {
        Array("\(key) \(Data(name.bytes).base64EncodedString())\n".utf8)
    }

    /// More than any intent of ours holds, even a copy's that tried every clash name.
    static let readLimit = 16 << 20

    /// Whether `recordName` is a slot's (`slot-N.intent`; a slot set aside is `slot-N.intent.refused`).
    static func isSlot(_ recordName: FileName) -> Bool {
        recordName.string.hasPrefix("slot-") && recordName.string.hasSuffix(".intent")
    }

    /// The intent `text` holds: the lines of its whole frames. A slot's counts only in frames; another file's
    /// without any `sum` line (one an earlier inbox wrote, named only once whole) counts line by line.
    private func parse(_ text: [UInt8], isSlot: Bool) -> Intent? {
        var lines: [ArraySlice<UInt8>] = []
        var frame: [ArraySlice<UInt8>] = []
        var hash = Frames()
        var framed = false
        var start = text.startIndex
        while let end = text[start...].firstIndex(of: 0x0A) {
            let line = text[start..<end]
            if line.starts(with: Array("sum ".utf8)) {
                framed = true
                guard UInt64(String(decoding: line.dropFirst(4), as: UTF8.self), radix: 16) == hash.sum else { break }
                lines += frame
                frame = []
            } else {
                frame.append(line)
            }
            hash.add(text[start...end])
            start = end + 1
        }
        if !framed && !isSlot { lines = text.split(separator: 0x0A) }
        return intent(lines)
    }

    private func intent(_ lines: [ArraySlice<UInt8>]) -> Intent? {
        var fields: [(String, FileName)] = []
        var seq: UInt64 = 0
        var identity: Identity?
        var nonce: String?
        for line in lines {
            let parts = line.split(separator: 0x20, maxSplits: 1)
            guard parts.count == 2 else { continue }
            let key = String(decoding: parts[0], as: UTF8.self)
            let value = String(decoding: parts[1], as: UTF8.self)
            if key == "seq" { seq = UInt64(value) ?? 0 }
            if key == "id" { identity = Identity(text: value) }
            if key == "nonce", value.allSatisfy(\.isHexDigit) { nonce = value }
            guard let data = Data(base64Encoded: Data(parts[1])), let name = FileName(bytes: data) else { continue }
            fields.append((key, name))
        }
        guard let name = fields.first(where: { $0.0 == "name" })?.1 else { return nil }
        var intent = Intent(
            name: name, claim: fields.first(where: { $0.0 == "claim" })?.1, identity: identity, seq: seq)
        intent.tried = fields.filter { $0.0 == "try" }.map(\.1)
        intent.linked = fields.first(where: { $0.0 == "linked" })?.1
        intent.nonce = nonce
        return intent
    }
}

/// The bytes of an intent's frames so far and their hash (64-bit FNV-1a: it finds a torn frame or another intent's
/// bytes, not an attacker, whose crafted intent recovery checks against the files it names).
struct Frames {
    private(set) var length = 0
    private(set) var sum: UInt64 = 0xcbf2_9ce4_8422_2325

    mutating func add(_ bytes: some Sequence<UInt8>) {
        for byte in bytes {
            sum = (sum ^ UInt64(byte)) &* 0x100_0000_01b3
            length += 1
        }
    }

    /// `lines` and the `sum` line that closes them as a frame after these bytes.
    func sealed(_ lines: [UInt8]) -> [UInt8] {
        var next = self
        next.add(lines)
        return lines + Array("sum \(String(next.sum, radix: 16))\n".utf8)
    }
}
