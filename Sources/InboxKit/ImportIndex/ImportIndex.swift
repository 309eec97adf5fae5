import AppContainer
import Glibc

/// The import index (ARCHITECTURE.md, "Mail import"): which messages were imported and which of their
/// attachments were delivered, keyed by the SHA-256 of the message's bytes, in SQLite at
/// `Library/Application Support/inbox/import.sqlite`. A lookup costs an index probe, not memory, however
/// many messages were imported. Writes are durable (`synchronous=FULL`) before they return.
package final class ImportIndex {
    /// What the index says of one attachment of a message, by its place in the message (its ordinal).
    package enum Part: Equatable {
        /// About to be renamed into the Inbox from `staging`, which held the file `device`/`inode`.
        case placing(staging: FileName, device: UInt64, inode: UInt64)
        /// In the Inbox under `name` (it may have moved on since); nil when a crash kept the name from the index.
        case delivered(name: FileName?)
    }

    /// The open database; a new one once damage met by a lookup or a commit had it rebuilt (`recovering`).
    private(set) var database: SQLiteDatabase
    /// The state folder the index lies in, and the file it had open there: nil for one being built.
    private let stateFolder: [UInt8]?
    private var opened: FileID?
    /// Whether this index's process holds `import.lock` now, through `locked`.
    private var holdingLock = false
    /// How long this index waits for `import.lock`, for `events.lock` when it logs, and for SQLite's own locks
    /// (`busyTimeout`): bounded for a delivery an MTA waits on (ARCHITECTURE.md, "Nothing blocks an MTA").
    let lockWait: LockWait

    static let fileName = "import.sqlite"
    /// Held (`flock`) by whoever places, repairs or rebuilds: one at a time per container, across processes.
    static let lockName = "import.lock"
    /// Where the index lies in a container.
    package static let relativePath = Container.stateRelativePath + "/" + fileName

    /// The index's path, as text for messages (`pathBytes` is the exact one).
    package static func path(_ container: Container) -> String { container.root + "/" + relativePath }

    package static func pathBytes(_ container: Container) -> [UInt8] {
        container.rootBytes + Array("/\(relativePath)".utf8)
    }

    /// A consistent copy of the container's index, as of one committed state (`VACUUM INTO`), made in `folder`
    /// under the hidden name `name`, opened and unlinked at once; nil when the container has no index. A copy a
    /// crash leaves there is the caller's to sweep.
    package static func snapshot(of container: Container, in folder: [UInt8], as name: FileName)
        throws(ContainerError) -> SharedDescriptor?
    {
        let target = folder + [0x2F] + name.bytes
        guard try exists(in: container) else { return nil }
        // The name as its exact bytes: SQLite hands a text's bytes to open(2) as they are.
        try ImportIndex(container: container).recovering { database throws(ContainerError) in
            try database.query("VACUUM INTO CAST(? AS TEXT)", [.blob(target)])
        }
        defer { _ = try? system_unlinkat(currentDirectory, target) }
        do {
            return SharedDescriptor(try FileDescriptor(target, [.readOnly, .noFollow]))
        } catch {
            throw error.failure("read", target)
        }
    }

    /// Opens the container's index; one missing, damaged, foreign or unreadable is rebuilt from the event log first
    /// (see `openDatabase`). It waits for its locks as `lockWait` says.
    package convenience init(container: Container, lockWait: LockWait = .unbounded) throws(ContainerError) {
        try self.init(stateFolder: container.stateDirectoryBytes, lockWait: lockWait)
    }

    /// Opens the index of the state folder `folder` (see `openDatabase`).
    init(stateFolder folder: [UInt8], lockWait: LockWait = .unbounded) throws(ContainerError) {
        stateFolder = folder
        self.lockWait = lockWait
        database = try Self.openDatabase(inStateFolder: folder, lockWait: lockWait) { body throws(ContainerError) in
            let path = folder + Array("/\(Self.lockName)".utf8)
            let lock = try Self.lock(path, lockWait)
            defer { _ = lock.rawValue }
            try body()
        }
        opened = try Self.identity(inStateFolder: folder)
    }

    /// An index being built: damage it meets is an error.
    init(building database: SQLiteDatabase) {
        self.database = database
        stateFolder = nil
        lockWait = .unbounded
    }

    /// Runs `body` holding `import.lock` (one placement, repair or rebuild at a time per container).
    package func locked<R>(_ body: () throws(ContainerError) -> R) throws(ContainerError) -> R {
        guard let stateFolder, !holdingLock else { return try body() }
        let lock = try Self.lock(stateFolder + Array("/\(Self.lockName)".utf8), lockWait)
        holdingLock = true
        defer {
            holdingLock = false
            _ = lock.rawValue
        }
        return try body()
    }

    /// Runs `body` on the database. Damage it meets (SQLite's `CORRUPT` or `NOTADB`: the open reads only the
    /// header and the schema, so damage deeper in is found where it is read) has the index set aside and rebuilt
    /// from the log under `import.lock`, and `body` runs once more on the new one. Under the lock, an index file
    /// that is no longer the one this index opened (another process rebuilt it first) is opened as it is.
    func recovering<R>(_ body: (SQLiteDatabase) throws(ContainerError) -> R) throws(ContainerError) -> R {
        do {
            return try body(database)
        } catch  where error.code == .badData && stateFolder != nil {
            let reason = error.message
            try locked { () throws(ContainerError) in
                guard let stateFolder else { return }
                if try Self.identity(inStateFolder: stateFolder) == opened {
                    try Self.rebuild(
                        inStateFolder: stateFolder, settingAside: reason, during: "read the import index",
                        lockWait: lockWait)
                }
                database = try Self.openHoldingLock(stateFolder, lockWait: lockWait)
                opened = try Self.identity(inStateFolder: stateFolder)
            }
            return try body(database)
        }
    }

    /// Holds the lock file at `path` (made when missing) until the descriptor goes, waiting for it as `wait` says.
    private static func lock(_ path: [UInt8], _ wait: LockWait) throws(ContainerError) -> FileDescriptor {
        let lock: FileDescriptor
        do {
            lock = try FileDescriptor(path, [.readWrite, .create, .noFollow], mode: 0o644)
        } catch {
            throw error.failure("lock the import index", path)
        }
        try wait.lockExclusive(
            lock.rawValue, doing: "lock the import index", path: String(decoding: path, as: UTF8.self))
        return lock
    }

    /// How long SQLite waits for another connection's lock on the index, in milliseconds: `wait`'s bound, else a
    /// minute. Writers hold `import.lock`, so two never wait for each other here: this is a commit waiting for a
    /// reader (a backup's snapshot) or a reader for a commit, of an index kept with a rollback journal (a network or
    /// FUSE filesystem), or a connection waiting for another to recover the write-ahead log.
    static func busyTimeout(_ wait: LockWait) -> CInt {
        guard let bound = wait.bound else { return 60_000 }
        let (seconds, attoseconds) = bound.components
        return CInt(clamping: seconds * 1000 + attoseconds / 1_000_000_000_000_000)
    }

    /// The device and inode of the index file in the state folder `directory`, if there is one.
    private static func identity(inStateFolder directory: [UInt8]) throws(ContainerError) -> FileID? {
        let path = directory + Array("/\(fileName)".utf8)
        do {
            return try fileStatusIfPresent(in: currentDirectory, path)?.fileID
        } catch {
            throw error.failure("read", path)
        }
    }

    /// Whether the container has an index file (sound or not).
    package static func exists(in container: Container) throws(ContainerError) -> Bool {
        let path = pathBytes(container)
        do {
            return try fileStatusIfPresent(in: currentDirectory, path) != nil
        } catch {
            throw error.failure("read", path)
        }
    }

    /// The staging names of the container's attachments recorded as placing; none when it has no index.
    static func placingStagingNames(of container: Container, lockWait: LockWait) throws(ContainerError)
        -> Set<FileName>
    {
        guard try exists(in: container) else { return [] }
        var names: Set<FileName> = []
        try ImportIndex(container: container, lockWait: lockWait).recovering { database throws(ContainerError) in
            try database.query("SELECT staging FROM parts WHERE delivered = 0") { row in
                if let name = FileName(bytes: row.blob(0)) { names.insert(name) }
            }
        }
        return names
    }

    /// Forgets every placing record of the index at `path`, if there is one: restored from a backup, they name
    /// staging files of another container (which backups leave out), so their messages' next import delivers
    /// what is missing. It may deliver again one that was renamed just before the backup: twice, never lost.
    /// A damaged one is rebuilt from the restored log (no lock: nothing else touches a restore's staging).
    package static func forgetPlacements(ofIndexAt path: [UInt8]) throws(ContainerError) {
        do {
            guard try fileStatusIfPresent(in: currentDirectory, path) != nil else { return }
        } catch {
            throw error.failure("read", path)
        }
        let folder = Array(path[..<(path.lastIndex(of: 0x2F) ?? path.startIndex)])
        try ImportIndex(stateFolder: folder).recovering { database throws(ContainerError) in
            try database.execute("DELETE FROM parts WHERE delivered = 0")
        }
    }

    /// Whether every attachment of the message was delivered.
    package func isComplete(_ key: [UInt8]) throws(ContainerError) -> Bool {
        try recovering { database throws(ContainerError) in
            var complete = false
            try database.query("SELECT complete FROM messages WHERE key = ?", [.blob(key)]) { row in
                complete = row.integer(0) != 0
            }
            return complete
        }
    }

    /// A message imported whole, as the index knows it: what `inbox import` names a duplicate's original by.
    package struct Imported: Sendable, Equatable {
        /// Its `Message-ID`, without angle brackets; nil when it had none (or the index was rebuilt without it).
        package let messageID: String?
        /// How many attachments it had.
        package let attachments: Int
    }

    /// The message with `key` when it was imported whole (`isComplete`); nil otherwise.
    package func imported(_ key: [UInt8]) throws(ContainerError) -> Imported? {
        try recovering { database throws(ContainerError) in
            var imported: Imported?
            try database.query(
                "SELECT message_id, attachments FROM messages WHERE key = ? AND complete = 1", [.blob(key)]
            ) { row in
                imported = Imported(
                    messageID: row.isNull(0) ? nil : String(decoding: row.blob(0), as: UTF8.self),
                    attachments: Int(row.integer(1)))
            }
            return imported
        }
    }

    /// The attachments of the message the index knows of, by ordinal.
    package func parts(of key: [UInt8]) throws(ContainerError) -> [Int: Part] {
        try recovering { database throws(ContainerError) in
            var parts: [Int: Part] = [:]
            try database.query(
                "SELECT ordinal, delivered, staging, device, inode, name FROM parts WHERE key = ?", [.blob(key)]
            ) { row in
                let ordinal = Int(row.integer(0))
                if row.integer(1) != 0 {
                    parts[ordinal] = .delivered(name: FileName(bytes: row.blob(5)))
                } else if let staging = FileName(bytes: row.blob(2)) {
                    parts[ordinal] = .placing(
                        staging: staging, device: UInt64(bitPattern: row.integer(3)),
                        inode: UInt64(bitPattern: row.integer(4)))
                }
            }
            return parts
        }
    }

    /// A message whose attachments are being placed: what its `imported` record needs should a crash leave the
    /// record to the repair (`Inbox.settlePlacingRecords`).
    package struct PendingMessage: Equatable {
        package let key: [UInt8]
        package let messageID: String?
        /// The source as given, byte for byte.
        package let source: [UInt8]
        /// The message's attachments in all.
        package let count: Int

        package init(key: [UInt8], messageID: String?, source: [UInt8], count: Int) {
            self.key = key
            self.messageID = messageID
            self.source = source
            self.count = count
        }
    }

    /// Records, durably and in one commit, that these staged files (of one message or several, each described in
    /// `messages`) are about to be renamed into the Inbox; for a winmail.dat delivered as it is, why
    /// (`notExpanded`), which a `delivered` record written by a repair carries too.
    package func markPlacing(
        _ parts: [(key: [UInt8], ordinal: Int, staged: StagedDelivery, notExpanded: String?)],
        of messages: [PendingMessage]
    ) throws(ContainerError) {
        try recovering { database throws(ContainerError) in
            guard !parts.isEmpty else { return }
            try database.transaction { () throws(ContainerError) in
                for message in messages {
                    try database.query(
                        """
                        INSERT INTO messages(key, message_id, attachments, complete, source) VALUES (?, ?, ?, 0, ?)
                        ON CONFLICT(key) DO NOTHING
                        """,
                        [
                            .blob(message.key), message.messageID.map { .text($0) } ?? .null,
                            .integer(Int64(message.count)), .blob(message.source),
                        ])
                }
                for (key, ordinal, file, notExpanded) in parts {
                    try database.query(
                        """
                        INSERT OR REPLACE INTO parts(key, ordinal, delivered, staging, device, inode, not_expanded)
                        VALUES (?, ?, 0, ?, ?, ?, ?)
                        """,
                        [
                            .blob(key), .integer(Int64(ordinal)), .blob(file.staging.bytes),
                            .integer(Int64(bitPattern: file.status.device)),
                            .integer(Int64(bitPattern: file.status.inode)), notExpanded.map { .text($0) } ?? .null,
                        ])
                }
            }
        }
    }

    /// The message `markPlacing` described, while it is not complete.
    package func pendingMessage(_ key: [UInt8]) throws(ContainerError) -> PendingMessage? {
        try recovering { database throws(ContainerError) in
            var pending: PendingMessage?
            try database.query(
                "SELECT message_id, attachments, source FROM messages WHERE key = ? AND complete = 0", [.blob(key)]
            ) { row in
                pending = PendingMessage(
                    key: key, messageID: row.isNull(0) ? nil : String(decoding: row.blob(0), as: UTF8.self),
                    source: row.blob(2), count: Int(row.integer(1)))
            }
            return pending
        }
    }

    /// An attachment recorded as placing.
    package struct PlacingPart {
        package let key: [UInt8]
        package let ordinal: Int
        package let staging: FileName
        package let device: UInt64
        package let inode: UInt64
        /// Why a winmail.dat is delivered as it is, as `markPlacing` recorded it.
        package let notExpanded: String?

        /// The staged file's place, as recorded.
        package var fileID: FileID { FileID(device: device, inode: inode) }
    }

    /// Every attachment recorded as placing, of any message.
    package func placingParts() throws(ContainerError) -> [PlacingPart] {
        try recovering { database throws(ContainerError) in
            var parts: [PlacingPart] = []
            try database.query(
                "SELECT key, ordinal, staging, device, inode, not_expanded FROM parts WHERE delivered = 0"
            ) { row in
                guard let staging = FileName(bytes: row.blob(2)) else { return }
                parts.append(
                    PlacingPart(
                        key: row.blob(0), ordinal: Int(row.integer(1)), staging: staging,
                        device: UInt64(bitPattern: row.integer(3)), inode: UInt64(bitPattern: row.integer(4)),
                        notExpanded: row.isNull(5) ? nil : String(decoding: row.blob(5), as: UTF8.self)))
            }
            return parts
        }
    }

    /// What became of a message's attachments recorded as placing.
    package struct Settlement {
        let key: [UInt8]
        /// Delivered, each with its name in the Inbox (nil when a crash kept it from the index).
        package var delivered: [(ordinal: Int, name: FileName?)] = []
        /// Not placed after all: their placing records are forgotten.
        package var notPlaced: [Int] = []
        /// Whether every attachment of the message is now delivered.
        package var complete = false
        /// The message's attachments in all.
        let count: Int
        let messageID: String?

        package init(
            key: [UInt8], delivered: [(ordinal: Int, name: FileName?)] = [], notPlaced: [Int] = [],
            complete: Bool = false, count: Int, messageID: String?
        ) {
            self.key = key
            self.delivered = delivered
            self.notPlaced = notPlaced
            self.complete = complete
            self.count = count
            self.messageID = messageID
        }
    }

    /// Records, in one commit, each message's attachments delivered, those not placed after all, and whether the
    /// message is now complete. Synced only when it forgets a placing record (its staging file is removed next,
    /// and a record left behind would take the missing file for placed); otherwise a crash that loses it leaves
    /// the placing records, which the next import settles the same way by their names.
    package func settle(_ settlements: [Settlement]) throws(ContainerError) {
        try recovering { database throws(ContainerError) in
            guard !settlements.isEmpty else { return }
            let durable = settlements.contains { !$0.notPlaced.isEmpty }
            try database.transaction(durable: durable) { () throws(ContainerError) in
                for settlement in settlements { try settle(settlement) }
            }
        }
    }

    private func settle(_ settlement: Settlement) throws(ContainerError) {
        let key = settlement.key
        for (ordinal, name) in settlement.delivered {
            try database.query(
                "INSERT OR REPLACE INTO parts(key, ordinal, delivered, name) VALUES (?, ?, 1, ?)",
                [.blob(key), .integer(Int64(ordinal)), name.map { .blob($0.bytes) } ?? .null])
        }
        for ordinal in settlement.notPlaced {
            try database.query(
                "DELETE FROM parts WHERE key = ? AND ordinal = ?", [.blob(key), .integer(Int64(ordinal))])
        }
        guard settlement.complete else { return }
        try database.query(
            "INSERT OR REPLACE INTO messages(key, message_id, attachments, complete) VALUES (?, ?, ?, 1)",
            [.blob(key), settlement.messageID.map { .text($0) } ?? .null, .integer(Int64(settlement.count))])
        // A complete message needs no part rows: its key alone answers every later import.
        try database.query("DELETE FROM parts WHERE key = ?", [.blob(key)])
    }
}
