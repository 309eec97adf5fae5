import AppContainer
import FoundationEssentials
import Glibc

/// What to deliver: a file, bytes in memory, or standard input, each under a suggested name.
public enum DeliverySource: Sendable {
    /// A file by path (bytes, exact); its own name is used when `name` is nil.
    case file(path: [UInt8], name: FileName?)
    /// Bytes in memory, delivered under `name`.
    case data(Data, name: FileName)
    /// Standard input read to its end, delivered under `name`.
    case standardInput(name: FileName)
}

extension Inbox {
    /// Delivers a copy of the file at `url` atomically and returns its URL in the Inbox (ARCHITECTURE.md, "Delivery").
    /// A URL that is not a `file:` URL is refused (exit status 64): only a file on this machine can be delivered.
    public func deliver(contentsOf url: URL, suggestedName: String? = nil) throws(ContainerError) -> URL {
        guard url.isFileURL else {
            throw ContainerError(.usage, "cannot deliver '\(url.absoluteString)': not a file URL (file:///…)")
        }
        let name = suggestedName.map { Inbox.sanitizedName(Array($0.utf8)) }
        return try deliver([.file(path: Array(url.path.utf8), name: name)])[0].url
    }

    /// Delivers `data` atomically under a sanitised form of `suggestedName` and returns its URL in the Inbox.
    public func deliver(data: Data, suggestedName: String) throws(ContainerError) -> URL {
        try deliver([.data(data, name: Inbox.sanitizedName(Array(suggestedName.utf8)))])[0].url
    }

    /// Delivers each source atomically: written under a staging name the watcher ignores, fsynced, then renamed
    /// into the Inbox under a unique name (`report.pdf`, `report-1.pdf`, …). The batch's files are fsynced together,
    /// and share one fsync of the Inbox folder, after which each delivery is logged. No reader ever sees a partial file in the Inbox.
    /// When a source fails, the ones before it stay delivered (and logged); `deliverReporting` tells which.
    public func deliver(_ sources: [DeliverySource]) throws(ContainerError) -> [InboxItem] {
        let outcome = deliverReporting(sources)
        if let error = outcome.error { throw error }
        return outcome.delivered
    }

    /// What a batch did: the items placed in the Inbox, each with its `delivered` record, in order, and the
    /// error that stopped the batch, if one did.
    package struct DeliveryOutcome: Sendable {
        /// The items placed in the Inbox, in the order of their sources.
        package let delivered: [InboxItem]
        /// What stopped the batch; nil when every source was delivered.
        package let error: ContainerError?
    }

    /// How many files are placed under one hold of the event log's lock, with one folder fsync.
    package static let deliveryChunk = 256

    /// Delivers like `deliver(_:)`, and reports what was delivered even when a source fails midway.
    ///
    /// Files are staged a chunk at a time; then, holding the event log's lock (so the watcher's `arrived`
    /// cannot come before), they are renamed into the Inbox, the folder is fsynced and `delivered` logged. A file
    /// whose record cannot be written goes back out of the Inbox: none is there without its record, but one that
    /// cannot be taken back out, which is then reported delivered.
    package func deliverReporting(_ sources: [DeliverySource]) -> DeliveryOutcome {
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
                let writes = StagedWrites()
                for source in chunk {
                    do {
                        staged.append(try stage(source, in: folder, writes: writes))
                    } catch {
                        failure = error
                        break
                    }
                }
                let placement = place(staged, writes: writes, in: folder.rawValue)
                delivered += placement.items
                // Only a hidden staging file can stay behind; `sweepAbandonedStaging` removes it later.
                for index in placement.notPlaced { _ = try? system_unlinkat(folder.rawValue, staged[index].staging) }
                if let error = failure ?? placement.error { throw error }
            }
        } catch {
            return DeliveryOutcome(delivered: delivered, error: error)
        }
        return DeliveryOutcome(delivered: delivered, error: nil)
    }

    /// Writes one source under a staging name in the Inbox, handed to `writes` to be synced; removes it on failure.
    private func stage(_ source: DeliverySource, in folder: borrowing FileDescriptor, writes: StagedWrites)
        throws(ContainerError) -> StagedDelivery
    {
        let name: FileName
        let shown: String
        switch source {
        case .file(let path, let suggested):
            shown = String(decoding: path, as: UTF8.self)
            name = suggested ?? Inbox.sanitizedName(Array(path.split(separator: 0x2F).last ?? []))
        case .data(_, let suggested), .standardInput(let suggested):
            shown = "standard input"
            name = suggested
        }
        do {
            return try stage(Inbox.stagingName(), named: name, shown: shown, in: folder.rawValue, writes: writes) {
                file in
                switch source {
                case .file(let path, _):
                    try file.copyContents(from: try Inbox.openSource(path))
                case .data(let data, _):
                    try data.withUnsafeBytes { raw in
                        Result(catching: { () throws(Errno) in try file.writeAll(raw) })
                    }.get()
                case .standardInput:
                    try file.copyContents(from: FileDescriptor(owning: try system_dup(STDIN_FILENO)))
                }
            }
        } catch {
            if let error = error as? ContainerError { throw error }
            guard let error = error as? Errno else {
                throw ContainerError(.failure, "cannot deliver '\(shown)': \(error)")
            }
            if error == .noSuchFile || error == .isDirectory {
                throw ContainerError(.noSuchItem, "cannot deliver '\(shown)': \(error)", cause: error)
            }
            if error.rawValue == ENXIO {
                // A socket cannot be opened: one rule with a FIFO, which can.
                throw ContainerError(.noSuchItem, "cannot deliver '\(shown)': not a regular file", cause: error)
            }
            throw error.failure("deliver", shown)
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
    package static func isStagingName(_ name: FileName) -> Bool {
        name.bytes.starts(with: stagingPrefix.utf8)
    }

    package static let importStagingPrefix = ".inbox-import."

    /// Whether `name` is one `importStagingName` makes.
    package static func isImportStagingName(_ name: FileName) -> Bool {
        name.bytes.starts(with: importStagingPrefix.utf8)
    }

    /// A fresh staging name for an imported attachment. Not one `sweepAbandonedStaging` removes: the import index
    /// may name it (see `placeOnce`).
    package static func importStagingName() -> FileName {
        FileName(importStagingPrefix + "\(getpid()).\(UInt64.random(in: 0...UInt64.max))")
            ?? FileName(bytes: Array(".inbox-import".utf8)).unsafelyUnwrapped
    }

    /// A suggested name made safe (ARCHITECTURE.md, "Delivery"): no `/` or NUL (each becomes `_`), no leading `.`, not
    /// empty, at most 255 bytes with its extension kept.
    package static func sanitizedName(_ suggested: [UInt8]) -> FileName {
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
    package static let stagingMaxAge: Int64 = 36 * 3600

    /// Removes staging files older than `maxAge` seconds, left by deliveries and imports that crashed; returns
    /// their names. An import's staging file that the import index names is left for the next import of its
    /// message, which settles it (see `placeOnce`).
    @discardableResult
    package func sweepAbandonedStaging(olderThan maxAge: Int64 = Inbox.stagingMaxAge, now: Timestamp = .now())
        throws(ContainerError) -> [FileName]
    {
        let folder = try container.openFolder(.inbox)
        let names: [FileName]
        do {
            names = try folder.entries()
        } catch {
            throw error.failure("sweep staging files in", container.path(.inbox))
        }
        let finished = try finishInterruptedPlacements(names, in: folder.rawValue)
        var old: [FileName] = []
        for name in names where Self.isStagingName(name) || Self.isImportStagingName(name) {
            guard !finished.contains(name), let status = try? fileStatus(in: folder.rawValue, name),
                status.kind == .regular, status.modified.isMore(than: maxAge, secondsBefore: now)
            else { continue }
            old.append(name)
        }
        let placing =
            old.contains(where: Self.isImportStagingName)
            ? try ImportIndex.placingStagingNames(of: container, lockWait: lockWait) : []
        let swept = old.filter { !placing.contains($0) }
        do {
            _ = try UnnamedFile.sweep(names, in: folder.rawValue)  // copies, never items: not logged
            for name in swept { try system_unlinkat(folder.rawValue, name) }
        } catch {
            throw error.failure("sweep staging files in", container.path(.inbox))
        }
        var records = EncodedEvents(reservingCapacity: swept.count)
        for name in swept { records.appendDeleted(path: loggedPath(.inbox, name), reason: "abandoned staging") }
        if !records.isEmpty { _ = try log.append(records, durable: false) }
        return swept
    }
}
