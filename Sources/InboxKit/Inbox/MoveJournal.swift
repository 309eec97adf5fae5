import AppContainer
import FoundationEssentials
import Glibc

/// Intent records for the moves of `inbox move` and the library (ARCHITECTURE.md, "One mover"), so that a
/// crash at any step is finished or rolled back at the next start: never lost, never two copies, and never
/// a move without its `moved` record. A rename's intent names the item and its identity; a copy's (a file
/// with other hard links, or Documents on another filesystem) also the claim it renamed the item to.
///
/// Each intent is a file in `Library/Application Support/inbox/journal`, locked by its mover for
/// the whole move. An intent that can be locked by someone else has lost its mover.
package struct MoveJournal {
    let directory: String

    package init(container: Container) {
        directory = container.stateDirectory + "/journal"
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
    }

    /// The open, locked record of one intent.
    final class Record {
        let file: FileDescriptor
        let recordName: FileName

        init(file: consuming FileDescriptor, recordName: FileName) {
            self.file = file
            self.recordName = recordName
        }
    }

    /// Writes an intent durably, locked, before the move touches anything.
    func begin(_ intent: Intent) throws(Errno) -> Record {
        do {
            try system_mkdirat(currentDirectory, directory, mode: 0o755)
        } catch .fileExists {}
        let folder = try FileDescriptor(directory, [.directory])
        let file = try FileDescriptor(at: folder.rawValue, ".", [.temporaryFile, .writeOnly], mode: 0o600)
        try system_flock(file.rawValue, LOCK_EX)
        var text = line("name", intent.name) + Array("seq \(intent.seq)\n".utf8)
        if let claim = intent.claim { text += line("claim", claim) }
        if let identity = intent.identity { text += Array("id \(identity.text)\n".utf8) }
        try file.writeAll(text)
        try file.sync()
        let unique = intent.claim?.string ?? "move.\(getpid()).\(UInt64.random(in: 0...UInt64.max))"
        let recordName = FileName("\(unique).intent") ?? intent.name
        try system_linkOpenFile(file.rawValue, folder.rawValue, recordName)
        try folder.sync()
        return Record(file: file, recordName: recordName)
    }

    /// Notes, durably, a step of the move: a name about to be tried, or the name that took.
    func note(_ key: String, _ name: FileName, in record: Record) throws(Errno) {
        try record.file.writeAll(line(key, name))
        try record.file.sync()
    }

    /// Removes a finished intent.
    func end(_ record: Record) throws(Errno) {
        try system_unlinkat(currentDirectory, directory + "/" + record.recordName.string)
    }

    /// Renames an intent that must not be acted on to `<name>.refused`, which recovery never reads.
    func setAside(_ record: Record) throws(Errno) {
        let path = directory + "/" + record.recordName.string
        try system_renameat2(currentDirectory, path, currentDirectory, path + ".refused", .noReplace)
    }

    /// Calls `body` with each intent whose mover is gone, locked for the caller, and its record to `end`.
    func forEachAbandoned(_ body: (Intent, Record) -> Void) {
        guard let folder = try? FileDescriptor(directory, [.directory]), let names = try? folder.entries() else {
            return
        }
        for recordName in names where recordName.string.hasSuffix(".intent") {
            guard let file = try? FileDescriptor(at: folder.rawValue, recordName, [.readWrite, .noFollow]) else {
                continue
            }
            guard (try? system_flock(file.rawValue, LOCK_EX | LOCK_NB)) != nil,
                let text = try? file.readToEnd(),
                let intent = parse(text)
            else { continue }
            body(intent, Record(file: file, recordName: recordName))
        }
    }

    /// The item the move whose claim is `claim` is moving, as its intent names it (read without its lock, which
    /// the mover holds); nil when no intent names it, or names a hidden name.
    package func claimedItem(_ claim: FileName) -> FileName? {
        guard let recordName = FileName(bytes: claim.bytes + Array(".intent".utf8)) else { return nil }
        let text: [UInt8]
        do {
            let path = Array((directory + "/").utf8) + recordName.bytes
            let file = try FileDescriptor(path, [.readOnly, .noFollow, .nonBlocking])
            text = try file.readToEnd(limit: 64 * 1024)
        } catch {
            return nil  // the claim keeps its name in the archive, and a restore gives it a visible one
        }
        guard let intent = parse(text), intent.claim == claim, !intent.name.isHidden else { return nil }
        return intent.name
    }

    private func line(_ key: String, _ name: FileName) -> [UInt8] {
        Array("\(key) \(Data(name.bytes).base64EncodedString())\n".utf8)
    }

    private func parse(_ text: [UInt8]) -> Intent? {
        var fields: [(String, FileName)] = []
        var seq: UInt64 = 0
        var identity: Identity?
        for line in text.split(separator: 0x0A) {
            let parts = line.split(separator: 0x20, maxSplits: 1)
            guard parts.count == 2 else { continue }
            let key = String(decoding: parts[0], as: UTF8.self)
            let value = String(decoding: parts[1], as: UTF8.self)
            if key == "seq" { seq = UInt64(value) ?? 0 }
            if key == "id" { identity = Identity(text: value) }
            guard let data = Data(base64Encoded: Data(parts[1])), let name = FileName(bytes: data) else { continue }
            fields.append((key, name))
        }
        guard let name = fields.first(where: { $0.0 == "name" })?.1 else { return nil }
        var intent = Intent(
            name: name, claim: fields.first(where: { $0.0 == "claim" })?.1, identity: identity, seq: seq)
        intent.tried = fields.filter { $0.0 == "try" }.map(\.1)
        intent.linked = fields.first(where: { $0.0 == "linked" })?.1
        return intent
    }
}
