import AppContainer
import Glibc
import InboxKit

/// What a backup of a container holds (ARCHITECTURE.md, "Places and rules", "Bundle, backup and setup"): every file,
/// symbolic link and empty folder, each included or excluded with the reason. Folders are walked, links are listed as
/// links and never followed.
///
/// A path is excluded when its place is not backed up (the bundle, `Library/Caches`, `tmp`, anything beside
/// the places), when it is a FIFO, socket or device node, when inbox re-creates it (its locks and checkpoint,
/// an empty `journal/`), when it or a folder above it carries the exclusion flag
/// (`Container.setExcludedFromBackup`), or when it is a link that may lead out of the container. An Inbox item a
/// move has claimed is included under its own name (`ClaimedItems`).
public struct BackupPlan: Sendable {
    /// One path of the container, included in the backup or excluded, and why.
    public struct Entry: Sendable {
        /// The path below the container root, exact to the byte, without a trailing `/`.
        public let path: [UInt8]
        /// Its status, taken without following a symbolic link.
        package let status: FileStatus
        /// Whether the backup holds it.
        public let isIncluded: Bool
        /// Why: `Documents: backed up`, `Library/Caches: not backed up`, `re-created by inbox`, ….
        public let reason: String
        /// Where a symbolic link points, as stored; nil for anything else.
        public let linkTarget: [UInt8]?
        /// The owner's user and group ids, for the archive.
        let owner: (uid: UInt32, gid: UInt32)
        /// The path the archive holds it under: `path`, but for a claimed Inbox item.
        public let archivedPath: [UInt8]

        /// The path as listed: a folder's ends with `/`.
        public var listedPath: [UInt8] { status.kind == .directory ? path + [0x2F] : path }
    }

    /// In walk order: each folder's names sorted by their bytes, a folder's contents right after it.
    public let entries: [Entry]

    /// Walks the container now.
    public init(container: Container) throws(ContainerError) {
        var entries: [Entry] = []
        try BackupWalk(container: container).run { entry, _, _, _ throws(ContainerError) in entries.append(entry) }
        self.entries = entries
    }

    /// The entries the backup holds, in walk order.
    public var included: [Entry] { entries.filter(\.isIncluded) }

    /// `[{"path":…,"included":…,"reason":…}, …]`, paths relative to the container (ARCHITECTURE.md, "The command
    /// line").
    public var json: String { "[" + entries.map(\.json).joined(separator: ",") + "]" }
}

extension BackupPlan.Entry {
    /// This Inbox item, claimed by a move, archived under `name` in the Inbox.
    func archived(as name: FileName) -> BackupPlan.Entry {
        let path = BackupRules.joined(BackupRules.inboxComponents + [name])
        let shown = String(decoding: path, as: UTF8.self)
        return BackupPlan.Entry(
            path: self.path, status: status, isIncluded: true, reason: "an item being moved: backed up as \(shown)",
            linkTarget: nil, owner: owner, archivedPath: path)
    }

    /// `+ Documents/report.pdf  (Documents: backed up)`; `-` when excluded; a link shows ` -> target`.
    public var line: [UInt8] {
        var line = Array((isIncluded ? "+ " : "- ").utf8) + listedPath
        if let linkTarget { line += Array(" -> ".utf8) + linkTarget }
        return line + Array("  (\(reason))".utf8)
    }

    /// `{"path":…,"included":…,"reason":…}`, with `path_b64` too when the path is not UTF-8.
    public var json: String {
        var buffer: [UInt8] = [UInt8(ascii: "{")]
        EventEncoding.appendPathMember("path", listedPath, to: &buffer)
        EventEncoding.appendLiteral(",\"included\":", to: &buffer)
        EventEncoding.appendLiteral(isIncluded ? "true" : "false", to: &buffer)
        EventEncoding.appendLiteral(",\"reason\":", to: &buffer)
        EventEncoding.appendString(reason, to: &buffer)
        buffer.append(UInt8(ascii: "}"))
        return String(decoding: buffer, as: UTF8.self)
    }
}

/// The walk behind `BackupPlan` and the archive writer: the folder walk (ARCHITECTURE.md, "Walks and removal"),
/// names sorted, stopped by its first failure, and a folder listed itself only when it holds nothing.
struct BackupWalk {
    let container: Container
    /// Deeper folders are an error rather than a descriptor per level without end.
    static let maxDepth = 256
    static let walk = FolderWalk(maxDepth: maxDepth, sameFilesystem: false, sorted: true)

    /// A folder above an entry, for the archive's folder headers.
    struct Folder {
        let path: [UInt8]
        let status: FileStatus
        let owner: (uid: UInt32, gid: UInt32)
    }

    /// Called for each entry with the folder that holds it (open), its name, and the folders above it.
    typealias Visit = (BackupPlan.Entry, CInt, FileName, [Folder]) throws(ContainerError) -> Void

    /// A folder being walked: what it inherits, and whether anything was found in it.
    private struct Level {
        let flag: [FileName]?
        let claims: [FileName: FileName]
        var holdsSomething = false
    }

    func run(_ visit: Visit) throws(ContainerError) {
        let root = try container.openFolder([])
        var above: [Folder] = []
        var levels = [Level(flag: nil, claims: [:])]
        try Self.walk.run(
            root, shown: container.root, onError: FolderWalk.stop,
            visit: { found throws(ContainerError) in
                levels[levels.count - 1].holdsSomething = true
                let (path, status, name, parent) = (found.path, found.status, found.name, found.parent)
                if status.kind == .directory { return .enter }
                let level = levels[levels.count - 1]
                let target = status.kind == .symbolicLink ? try? system_readlinkat(parent, name) : nil
                var listed = entry(path, status, flag: level.flag, target: target)
                if listed.isIncluded, status.kind == .regular, BackupFlag.isSet(in: parent, name) {
                    listed = entry(path, status, flag: path, target: nil)
                }
                if listed.isIncluded, let own = level.claims[name] { listed = listed.archived(as: own) }
                try visit(listed, parent, name, above)
                return .next
            },
            enter: { found, folder throws(ContainerError) in
                let path = found.path
                let flag = levels[levels.count - 1].flag ?? (BackupFlag.isSet(on: folder) ? path : nil)
                var claims: [FileName: FileName] = [:]
                if path == BackupRules.inboxComponents {
                    do throws(Errno) {
                        let names = try FileDescriptor(at: folder, ".", [.directory]).entries().sorted()
                        claims = ClaimedItems.archivedNames(names, container: container)
                    } catch {
                        throw error.failure("read the folder", absolute(path))
                    }
                }
                levels.append(Level(flag: flag, claims: claims))
                above.append(Folder(path: BackupRules.joined(path), status: found.status, owner: owner(found.status)))
            },
            leave: { found, _ throws(ContainerError) in
                let level = levels.removeLast()
                above.removeLast()
                if !level.holdsSomething {
                    try visit(
                        entry(found.path, found.status, flag: level.flag, target: nil), found.parent, found.name, above)
                }
            })
    }

    private func owner(_ status: FileStatus) -> (uid: UInt32, gid: UInt32) {
        (status.owner, status.group)
    }

    private func entry(_ components: [FileName], _ status: FileStatus, flag: [FileName]?, target: [UInt8]?)
        -> BackupPlan.Entry
    {
        let (included, reason) = BackupRules.decide(
            components, kind: status.kind, appName: container.appName, flaggedBy: flag, linkTarget: target)
        let path = BackupRules.joined(components)
        return BackupPlan.Entry(
            path: path, status: status, isIncluded: included, reason: reason, linkTarget: target, owner: owner(status),
            archivedPath: path)
    }

    private func absolute(_ components: [FileName]) -> String {
        container.root + "/" + String(decoding: BackupRules.joined(components), as: UTF8.self)
    }
}
