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
    /// Delivers a copy of the file at `url` atomically and returns its URL in the Inbox (DESIGN §3).
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
    public func deliver(_ sources: [DeliverySource]) throws(ContainerError) -> [InboxItem] {
        try container.checkWritable(components: container.components(of: .inbox), by: .delivery)
        let folder = try container.openFolder(.inbox)
        var delivered: [InboxItem] = []
        for source in sources {
            let (name, status) = try deliverOne(source, into: folder)
            delivered.append(InboxItem(inbox: self, name: name, status: status))
        }
        do {
            try folder.sync()
        } catch {
            throw error.failure("sync", container.path(.inbox))
        }
        try log.append(
            delivered.map { item in
                Event(.delivered, ["path": .path(loggedPath(.inbox, item.name)), "size": .int(item.size)])
            })
        return delivered
    }

    private func deliverOne(_ source: DeliverySource, into folder: borrowing FileDescriptor) throws(ContainerError)
        -> (FileName, FileStatus)
    {
        let staging = Inbox.stagingName()
        var shownSource = "standard input"
        do {
            let file = try FileDescriptor(
                at: folder.rawValue, staging, [.writeOnly, .create, .exclusive, .noFollow], mode: 0o444)
            defer { _ = try? system_unlinkat(folder.rawValue, staging) }
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
            let final = try ClashNaming.inbox.firstFree(for: name) { candidate throws(Errno) in
                try system_renameat2(folder.rawValue, staging, folder.rawValue, candidate, .noReplace)
            }
            return (final, status)
        } catch let error as ContainerError {
            throw error
        } catch let error as Errno {
            if error == .noSuchFile || error == .isDirectory {
                throw ContainerError(.noSuchItem, "cannot deliver '\(shownSource)': \(error)", cause: error)
            }
            throw error.failure("deliver", shownSource)
        } catch {
            throw ContainerError(.failure, "cannot deliver '\(shownSource)': \(error)")
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

    /// A suggested name made safe (DESIGN §3): no `/` or NUL (each becomes `_`), no leading `.`, not empty,
    /// at most 255 bytes with its extension kept.
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
    /// How long a staging file may sit before it counts as left by a crashed delivery (DESIGN §3).
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
