import AppContainer
import Foundation
import Glibc

/// What to deliver: a file, bytes in memory, or standard input, each under a suggested name.
public enum DeliverySource: Sendable {
    /// A file by path (bytes, exact); its own name is used when `name` is nil.
    case file(path: [UInt8], name: FileName?)
    case data(Data, name: FileName)
    case standardInput(name: FileName)
}

extension Inbox {
    /// Delivers a copy of the file at `url` atomically and returns its URL in the Inbox (ARCHITECTURE.md, "Delivery").
    public func deliver(contentsOf url: URL, suggestedName: String? = nil) throws(ContainerError) -> URL {
        let name = suggestedName.map { Inbox.sanitizedName(Array($0.utf8)) }
        return try deliver([.file(path: Array(url.path.utf8), name: name)])[0].url
    }

    /// Delivers `data` atomically under a sanitised form of `suggestedName` and returns its URL in the Inbox.
    public func deliver(data: Data, suggestedName: String) throws(ContainerError) -> URL {
        try deliver([.data(data, name: Inbox.sanitizedName(Array(suggestedName.utf8)))])[0].url
    }

    /// Delivers each source atomically: written under a staging name the watcher ignores, fsynced, then renamed
    /// into the Inbox under a unique name (`report.pdf`, `report-1.pdf`, …). The batch shares one fsync of the
    /// Inbox folder, after which each delivery is logged. No reader ever sees a partial file in the Inbox.
    /// When a source fails, the ones before it stay delivered (and logged); `deliverReporting` tells which.
    public func deliver(_ sources: [DeliverySource]) throws(ContainerError) -> [InboxItem] {
        let outcome = deliverReporting(sources)
        if let error = outcome.error { throw error }
        return outcome.delivered
    }

    /// What a batch did: the items placed in the Inbox, each with its `delivered` record, in order, and the
    /// error that stopped the batch, if one did.
    public struct DeliveryOutcome: Sendable {
        public let delivered: [InboxItem]
        public let error: ContainerError?
    }

    /// How many files are placed under one hold of the event log's lock, with one folder fsync.
    static let deliveryChunk = 256

    /// Delivers like `deliver(_:)`, and reports what was delivered even when a source fails midway.
    ///
    /// Files are staged a chunk at a time; then, holding the event log's lock (so the watcher's `arrived`
    /// cannot come before), they are renamed into the Inbox, the folder is fsynced and `delivered` logged. A file
    /// whose record cannot be written goes back out of the Inbox: none is there without its record, but one that
    /// cannot be taken back out, which is then reported delivered.
    public func deliverReporting(_ sources: [DeliverySource]) -> DeliveryOutcome {
        var delivered: [InboxItem] = []
        do throws(ContainerError) {
            try container.checkWritable(components: container.components(of: .inbox), by: .delivery)
            let folder = try container.openFolder(.inbox)
            var next = sources.startIndex
            while next < sources.endIndex {
                let chunk = sources[next..<min(next + Self.deliveryChunk, sources.endIndex)]
                next = chunk.endIndex
                var staged: [StagedDelivery] = []
                var failure: ContainerError?
                for source in chunk {
                    do {
                        staged.append(try stage(source, in: folder))
                    } catch {
                        failure = error
                        break
                    }
                }
                let placed = place(staged, in: folder.rawValue)
                delivered += placed.items
                if let error = failure ?? placed.error { throw error }
            }
        } catch {
            return DeliveryOutcome(delivered: delivered, error: error)
        }
        return DeliveryOutcome(delivered: delivered, error: nil)
    }

    /// A file written and fsynced under a staging name, and the name it is to have.
    private struct StagedDelivery {
        let staging: FileName
        let name: FileName
        let status: FileStatus
        let shown: String
    }

    /// Under the event log's lock: renames the staged files into the Inbox (stopping at the first that fails),
    /// fsyncs the folder and logs `delivered` for each. If the folder or the records fail, the files go back out.
    /// A staged file not placed is removed.
    private func place(_ staged: [StagedDelivery], in folder: CInt) -> (items: [InboxItem], error: ContainerError?) {
        var placed: [(name: FileName, status: FileStatus)] = []
        // Placed files that could not be taken back out after a failure: still delivered, and reported so.
        var stuck: Set<FileName> = []
        var renamed = 0
        var failure: ContainerError?
        do throws(ContainerError) {
            try log.appendWhileLocked(
                { () throws(ContainerError) -> [Event] in
                    for file in staged {
                        do throws(Errno) {
                            let final = try ClashNaming.inbox.firstFree(for: file.name) { candidate throws(Errno) in
                                try system_renameat2(folder, file.staging, folder, candidate, .noReplace)
                            }
                            placed.append((final, file.status))
                            renamed += 1
                        } catch {
                            failure = error.failure("deliver", file.shown)
                            break
                        }
                    }
                    guard !placed.isEmpty else { return [] }
                    do throws(Errno) {
                        try system_fsync(folder)
                    } catch {
                        stuck = takeBack(placed.map(\.name), in: folder)
                        throw error.failure("sync", container.path(.inbox))
                    }
                    return placed.map { file in
                        Event(
                            .delivered, ["path": .path(loggedPath(.inbox, file.name)), "size": .int(file.status.size)])
                    }
                }, undo: { stuck = takeBack(placed.map(\.name), in: folder) })
        } catch {
            placed.removeAll { !stuck.contains($0.name) }
            failure = error
        }
        for file in staged.dropFirst(renamed) {
            // Only a hidden staging file can stay behind; `sweepAbandonedStaging` removes it later.
            _ = try? system_unlinkat(folder, file.staging)
        }
        return (placed.map { InboxItem(inbox: self, name: $0.name, status: $0.status) }, failure)
    }

    /// Takes files out of the Inbox whose `delivered` record could not be written: each is renamed to a staging
    /// name (which the watcher ignores), then removed. Returns those that could not be renamed: they stay in
    /// the Inbox, delivered after all, for the watcher to arrive.
    private func takeBack(_ names: [FileName], in folder: CInt) -> Set<FileName> {
        var stuck: Set<FileName> = []
        for name in names {
            let staging = Inbox.stagingName()
            do throws(Errno) {
                try system_renameat2(folder, name, folder, staging, .noReplace)
            } catch {
                stuck.insert(name)
                continue
            }
            // Under a staging name it is no item any more; one left behind is swept with abandoned staging.
            _ = try? system_unlinkat(folder, staging)
        }
        // Unsynced, a crash may bring a file back under its name: then it arrives, and nothing is lost.
        _ = try? system_fsync(folder)
        return stuck
    }

    /// Writes one source under a staging name in the Inbox, fsynced and closed; removes it on failure.
    private func stage(_ source: DeliverySource, in folder: borrowing FileDescriptor) throws(ContainerError)
        -> StagedDelivery
    {
        let staging = Inbox.stagingName()
        var shownSource = "standard input"
        var created = false
        do {
            let file = try FileDescriptor(
                at: folder.rawValue, staging, [.writeOnly, .create, .exclusive, .noFollow], mode: 0o444)
            created = true
            let name: FileName
            switch source {
            case .file(let path, let suggested):
                shownSource = String(decoding: path, as: UTF8.self)
                let input = try Inbox.openSource(path)
                try file.copyContents(from: input)
                name = suggested ?? Inbox.sanitizedName(Array(path.split(separator: 0x2F).last ?? []))
            case .data(let data, let suggested):
                try data.withUnsafeBytes { raw in
                    Result(catching: { () throws(Errno) in try file.writeAll(raw) })
                }.get()
                name = suggested
            case .standardInput(let suggested):
                let input = FileDescriptor(owning: try system_dup(STDIN_FILENO))
                try file.copyContents(from: input)
                name = suggested
            }
            try file.sync()
            let status = try file.fileStatus()
            // Closed before the rename: a watcher finds no writer on the file it sees arrive.
            try file.close()
            return StagedDelivery(staging: staging, name: name, status: status, shown: shownSource)
        } catch {
            // A hidden staging file the unlink misses is swept later (`sweepAbandonedStaging`).
            if created { _ = try? system_unlinkat(folder.rawValue, staging) }
            if let error = error as? ContainerError { throw error }
            guard let error = error as? Errno else {
                throw ContainerError(.failure, "cannot deliver '\(shownSource)': \(error)")
            }
            if error == .noSuchFile || error == .isDirectory {
                throw ContainerError(.noSuchItem, "cannot deliver '\(shownSource)': \(error)", cause: error)
            }
            if error.rawValue == ENXIO {
                // A socket cannot be opened: one rule with a FIFO, which can.
                throw ContainerError(.noSuchItem, "cannot deliver '\(shownSource)': not a regular file", cause: error)
            }
            throw error.failure("deliver", shownSource)
        }
    }

    /// Opens a file to deliver: a regular file, read-only.
    private static func openSource(_ path: [UInt8]) throws -> FileDescriptor {
        let shown = String(decoding: path, as: UTF8.self)
        let input = try FileDescriptor(path, [.nonBlocking])
        guard try input.fileStatus().kind == .regular else {
            throw ContainerError(.noSuchItem, "cannot deliver '\(shown)': not a regular file")
        }
        return input
    }

    private static let stagingPrefix = ".inbox-staging."

    /// A fresh name for a delivery in progress; the leading `.` keeps the watcher away from it.
    static func stagingName() -> FileName {
        FileName(stagingPrefix + "\(getpid()).\(UInt64.random(in: 0...UInt64.max))")
            ?? FileName(bytes: Array(".inbox-staging".utf8)).unsafelyUnwrapped
    }

    /// Whether `name` is one `stagingName` makes.
    static func isStagingName(_ name: FileName) -> Bool {
        name.bytes.starts(with: stagingPrefix.utf8)
    }

    /// A suggested name made safe (ARCHITECTURE.md, "Delivery"): no `/` or NUL (each becomes `_`), no leading `.`, not
    /// empty, at most 255 bytes with its extension kept.
    public static func sanitizedName(_ suggested: [UInt8]) -> FileName {
        var bytes = suggested.map { $0 == 0x2F || $0 == 0 ? UInt8(ascii: "_") : $0 }
        while bytes.first == 0x2E { bytes.removeFirst() }
        if bytes.isEmpty { bytes = Array("attachment".utf8) }
        if bytes.count > FileName.maxLength, let long = FileName(bytes: bytes) {
            let (stem, ext) = long.stemAndExtension
            let keptExt = ext.count < 32 ? ext : []
            bytes = FileName.truncated(stem, toAtMost: FileName.maxLength - keptExt.count) + keptExt
        }
        return FileName(bytes: bytes) ?? FileName("attachment").unsafelyUnwrapped
    }
}

extension Inbox {
    /// How long a staging file may sit before it counts as left by a crashed delivery (ARCHITECTURE.md, "Delivery").
    public static let stagingMaxAge: Int64 = 36 * 3600

    /// Removes staging files older than `maxAge` seconds, left by deliveries that crashed; returns their names.
    @discardableResult
    public func sweepAbandonedStaging(olderThan maxAge: Int64 = Inbox.stagingMaxAge, now: Timestamp = .now())
        throws(ContainerError) -> [FileName]
    {
        let folder = try container.openFolder(.inbox)
        var swept: [FileName] = []
        do {
            for name in try folder.entries() where Self.isStagingName(name) {
                guard let status = try? fileStatus(in: folder.rawValue, name), status.kind == .regular,
                    now.seconds - status.modified.seconds > maxAge
                else { continue }
                try system_unlinkat(folder.rawValue, name)
                swept.append(name)
            }
        } catch {
            throw error.failure("sweep staging files in", container.path(.inbox))
        }
        try log.append(
            swept.map {
                Event(.deleted, ["path": .path(loggedPath(.inbox, $0)), "reason": .string("abandoned staging")])
            })
        return swept
    }
}
