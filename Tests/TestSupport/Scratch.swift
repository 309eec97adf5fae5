import AppContainer
import Foundation
import Glibc
import InboxKit
import Testing

/// The one throwaway folder of the tests (swift-system's `FilePathTemp`, git's trash directory): a fresh folder
/// under the temporary folder, or under `root` (a FUSE mount point), removed by `remove()` or once no test holds it.
/// `Scratch.withInbox()` makes a container (`c`, app `Mail`) in it with its `Inbox`; `initContainer()` makes one with
/// `inbox init`, as a user does.
package final class Scratch: Sendable {
    /// The folder: the container's (`c`) and anything a test puts beside it.
    package let path: String
    private let madeInbox: Inbox?

    /// A fresh, empty folder below `root`.
    package convenience init(under root: String = FileManager.default.temporaryDirectory.path) throws {
        try self.init(under: root, appName: nil)
    }

    /// A fresh folder below `root` that holds a new container, `c`, made for the app `Mail`, and its `Inbox`.
    package static func withInbox(under root: String = FileManager.default.temporaryDirectory.path) throws
        -> Scratch
    {
        try Scratch(under: root, appName: "Mail")
    }

    private init(under root: String, appName: String?) throws {
        let path = root + "/inbox-tests-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        self.path = path
        madeInbox = try appName.map { try Inbox(container: Container.create(at: path + "/c", appName: $0)) }
    }

    deinit { remove() }

    /// Removes the folder and everything in it.
    package func remove() {
        try? FileManager.default.removeItem(atPath: path)
    }

    /// A path inside the folder.
    package func at(_ relative: String) -> String { path + "/" + relative }

    /// A path beside the container (`withInbox`), outside it.
    package func outside(_ relative: String) -> String { at(relative) }

    // MARK: - The container of `withInbox`

    /// The container's `Inbox`; only a scratch made by `withInbox` has one.
    package var inbox: Inbox {
        guard let madeInbox else { preconditionFailure("a Scratch made without a container has no Inbox") }
        return madeInbox
    }

    package var container: Container { inbox.container }

    package func inboxPath(_ name: String) -> String { container.path(.inbox) + "/" + name }

    package func documentsPath(_ name: String) -> String { container.path(.documents) + "/" + name }

    /// Renames the Inbox's `name` into Documents as a mover would (a crash set-up), then, with `renamedTo`, renames
    /// it there again as the user might.
    package func renameIntoDocuments(_ name: String, renamedTo: String? = nil) throws {
        try system_renameat2(currentDirectory, inboxPath(name), currentDirectory, documentsPath(name), .noReplace)
        if let renamedTo {
            try system_renameat2(
                currentDirectory, documentsPath(name), currentDirectory, documentsPath(renamedTo), .noReplace)
        }
    }

    /// Every name in the Inbox folder, staging names included.
    package func inboxEntries() throws -> [String] {
        try FileDescriptor(container.path(.inbox), [.directory]).entries().map(\.string).sorted()
    }

    /// Every name in Documents but the Inbox folder.
    package func documentsEntries() throws -> [String] {
        try FileDescriptor(container.path(.documents), [.directory]).entries().map(\.string).filter { $0 != "Inbox" }
            .sorted()
    }

    /// The intent records left in the move journal (its slots between two moves are not).
    package func journalEntries() throws -> [String] {
        try MoveJournal(container: container).entriesLeft()
    }

    /// Every name in the Inbox (claims included) and Documents that holds `bytes`, relative to the container.
    package func copies(of bytes: [UInt8]) throws -> [String] {
        let inbox = try inboxEntries().map { "Documents/Inbox/" + $0 }
        let documents = try documentsEntries().map { "Documents/" + $0 }
        return try (inbox + documents).filter {
            try status(container.root + "/" + $0).kind == .regular && readFile(container.root + "/" + $0) == bytes
        }
    }

    /// A child another test is spawning may hold a copy of a move journal record's descriptor until it execs:
    /// waits until every record's lock is free, as it is once every process that held it is gone.
    package func waitForDeadMoversLocks(sourceLocation: SourceLocation = #_sourceLocation) throws {
        let journal = container.stateDirectory + "/journal"
        for name in try journalEntries() {
            let record = try FileDescriptor(journal + "/" + name, [.readWrite, .noFollow])
            let free = waitUntil(timeout: 30, interval: 0.001) {
                (try? system_flock(record.rawValue, LOCK_EX | LOCK_NB)) != nil
            }
            #expect(free, "the record of a dead mover is unlocked", sourceLocation: sourceLocation)
            // Unlocked before the close: a process another test forks meanwhile shares this descriptor's lock
            // until its exec, and recovery would take the entry for a mover at work.
            if free { try system_flock(record.rawValue, LOCK_UN) }
        }
    }

    // MARK: - As a user makes them

    /// A fresh container made by `inbox init`, `container` in the folder; its path.
    package func initContainer() throws -> String {
        let root = path + "/container"
        let result = try InboxProcess.run("--container", root, "init")
        #expect(result.status == 0, "init failed: \(result.stderr)")
        return root
    }

    /// Writes a file of `contents` (its folders made) and returns its path.
    @discardableResult
    package func file(_ name: String, _ contents: String) throws -> String {
        let filePath = path + "/" + name
        try FileManager.default.createDirectory(
            atPath: (filePath as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try Data(contents.utf8).write(to: URL(fileURLWithPath: filePath))
        return filePath
    }
}

/// `count` files `f0.txt`, … ("file N\n") in a new folder beside the container; returns its path. Each is renamed
/// into the Inbox from there: one arrival each, with no write under way.
package func stageFiles(_ scratch: Scratch, count: Int) throws -> String {
    let staging = scratch.outside("staging")
    try FileManager.default.createDirectory(atPath: staging, withIntermediateDirectories: true)
    for index in 0..<count { try makeFile(staging + "/f\(index).txt", Array("file \(index)\n".utf8)) }
    return staging
}

/// The event log's records, oldest first, across rotated files.
package func records(_ scratch: Scratch) throws -> [EventRecord] {
    try scratch.inbox.log.records()
}
