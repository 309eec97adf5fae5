import AppContainer
import Foundation
import Glibc

/// Intent records for moves that copy rather than rename (a file with other hard links, or
/// Documents on another filesystem), so that a crash at any step is finished or rolled back
/// at the next start: never lost, never two copies.
///
/// Each intent is a file in `Library/Application Support/inbox/journal`, locked by its mover for
/// the whole move. An intent that can be locked by someone else has lost its mover.
struct MoveJournal {
    let directory: String

    init(container: Container) {
        directory = container.stateDirectory + "/journal"
    }

    /// A move in progress: what it claimed and the names it tried in Documents.
    struct Intent {
        var name: FileName
        var claim: FileName
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
        try? system_mkdirat(currentDirectory, directory, mode: 0o755)
        let folder = try FileDescriptor(directory, [.directory])
        let file = try FileDescriptor(at: folder.rawValue, ".", [.temporaryFile, .writeOnly], mode: 0o600)
        try system_flock(file.rawValue, LOCK_EX)
        try file.writeAll(line("name", intent.name) + line("claim", intent.claim))
        try file.sync()
        let recordName = FileName("\(intent.claim.string).intent") ?? intent.claim
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
    func end(_ record: Record) {
        try? system_unlinkat(currentDirectory, directory + "/" + record.recordName.string)
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

    private func line(_ key: String, _ name: FileName) -> [UInt8] {
        Array("\(key) \(Data(name.bytes).base64EncodedString())\n".utf8)
    }

    private func parse(_ text: [UInt8]) -> Intent? {
        var fields: [(String, FileName)] = []
        for line in text.split(separator: 0x0A) {
            let parts = line.split(separator: 0x20, maxSplits: 1)
            guard parts.count == 2, let data = Data(base64Encoded: Data(parts[1])),
                let name = FileName(bytes: data)
            else { continue }
            fields.append((String(decoding: parts[0], as: UTF8.self), name))
        }
        guard let name = fields.first(where: { $0.0 == "name" })?.1,
            let claim = fields.first(where: { $0.0 == "claim" })?.1
        else { return nil }
        var intent = Intent(name: name, claim: claim)
        intent.tried = fields.filter { $0.0 == "try" }.map(\.1)
        intent.linked = fields.first(where: { $0.0 == "linked" })?.1
        return intent
    }
}
