import AppContainer
import Glibc
import InboxKit

/// The rules that decide one path, apart from the walk so the restorer asks the same questions.
enum BackupRules {
    /// Files in the state folder that inbox re-creates or that mean nothing in another container: the locks
    /// of the log, the watcher, setup, cleanup, bundle install and import, the arrival checkpoint
    /// (`ArrivalPipeline+Recovery`), a cleanup intent (`CleanupJournal`: it names files by inode), with their
    /// temporaries, and the import index's WAL and shared-memory files (the index is archived as one snapshot
    /// that holds every committed import).
    static let recreatedStateFiles: Set<[UInt8]> = Set(
        [
            "events.lock", "watch.lock", "setup.lock", "cleanup.lock", "bundle.lock", "arrived.checkpoint",
            ".arrived.checkpoint.tmp",
            "cleanup.intent", ".cleanup.intent.tmp", "import.lock", "import.sqlite-wal", "import.sqlite-shm",
        ].map { Array($0.utf8) })
    /// Whether `path` (relative to the container) is the import index, which a backup archives from a snapshot.
    static func isImportIndex(_ path: [UInt8]) -> Bool {
        path == Array(ImportIndex.relativePath.utf8)
    }

    /// The move journal's folder (`MoveJournal`), re-created when empty.
    static let journalFolder = Array("journal".utf8)

    static let stateComponents = components(Container.stateRelativePath)

    static func components(_ relativePath: String) -> [FileName] {
        relativePath.split(separator: "/").compactMap { FileName(String($0)) }
    }

    static func joined(_ components: some Collection<FileName>) -> [UInt8] {
        Array(components.map(\.bytes).joined(separator: [0x2F]))
    }

    /// Whether inbox re-creates this path by itself, so a backup need not hold it. The move journal's intents
    /// name files of the container they were written in, by name and inode: they mean nothing elsewhere.
    static func isRecreated(_ components: [FileName], kind: FileKind) -> Bool {
        if isJournalEntry(components) { return true }
        guard components.count == stateComponents.count + 1, components.starts(with: stateComponents),
            let name = components.last
        else { return false }
        return (kind == .regular && recreatedStateFiles.contains(name.bytes))
            || (kind == .directory && name.bytes == journalFolder)
    }

    /// Whether this is an entry of the move journal's folder.
    static func isJournalEntry(_ components: [FileName]) -> Bool {
        components.count == stateComponents.count + 2 && components.starts(with: stateComponents)
            && components[stateComponents.count].bytes == journalFolder
    }

    static let inboxComponents = components(Place.inbox.relativePath(appName: ""))

    /// Whether this is a delivery under way in the Inbox (`Inbox.stagingName`): not yet an item, and written
    /// again by its deliverer (or swept, when abandoned).
    static func isDeliveryInProgress(_ components: [FileName], kind: FileKind) -> Bool {
        guard kind == .regular, components.count == inboxComponents.count + 1, components.starts(with: inboxComponents),
            let name = components.last
        else { return false }
        return Inbox.isStagingName(name) || Inbox.isImportStagingName(name)
    }

    /// Whether a link in `folder` to `target` surely stays in the container: relative, and any `..` comes
    /// first and climbs no higher than the root. (A `..` after a name could climb out through another link.)
    static func linkStaysInside(_ target: [UInt8], from folder: some Collection<FileName>) -> Bool {
        guard !target.isEmpty, target.first != 0x2F else { return false }
        var depth = folder.count
        var climbing = true
        for part in target.split(separator: 0x2F) where !part.elementsEqual([0x2E]) {
            if part.elementsEqual([0x2E, 0x2E]) {
                guard climbing, depth > 0 else { return false }
                depth -= 1
            } else {
                climbing = false
            }
        }
        return true
    }

    /// A name for kinds that are never backed up or restored.
    static func specialKindName(_ kind: FileKind) -> String? {
        switch kind {
        case .regular, .directory, .symbolicLink: nil
        case .fifo: "a FIFO"
        case .socket: "a socket"
        case .characterDevice, .blockDevice: "a device node"
        case .unknown: "a file of unknown kind"
        }
    }

    /// Included or not, and why. `flaggedBy` is the path that carries the exclusion flag: this one or a folder
    /// above it.
    static func decide(
        _ components: [FileName], kind: FileKind, appName: String, flaggedBy: [FileName]?, linkTarget: [UInt8]?
    ) -> (included: Bool, reason: String) {
        guard let place = Place.containing(components, appName: appName) else {
            return (false, "outside the places: not backed up")
        }
        let placePath = place.relativePath(appName: appName)
        guard place.rules.isBackedUp else { return (false, "\(placePath): not backed up") }
        if let special = specialKindName(kind) { return (false, "\(special): never backed up") }
        if isRecreated(components, kind: kind) { return (false, "re-created by inbox") }
        if isDeliveryInProgress(components, kind: kind) { return (false, "a delivery under way: not backed up") }
        if let flaggedBy {
            if flaggedBy == components { return (false, "flagged: excluded from backup") }
            let folder = String(decoding: joined(flaggedBy), as: UTF8.self)
            return (false, "\(folder)/ flagged: excluded from backup")
        }
        if kind == .symbolicLink, !linkStaysInside(linkTarget ?? [], from: components.dropLast()) {
            return (false, "a link that may lead out of the container: not backed up")
        }
        return (true, "\(placePath): backed up")
    }
}

/// What the restorer does with one archive entry, decided before anything is written.
enum RestoreVerdict: Equatable {
    /// Extract it at `path` (relative to the root); a hard link's target is `hardlink`, also relative.
    case restore(path: [UInt8], hardlink: [UInt8]?)
    /// Leave it out on purpose: `Library/Caches`, `tmp`, files inbox re-creates, the archive's root entry.
    case skip
    /// Never write it, for this reason.
    case refuse(String)
}

/// The checks an archive entry passes before libarchive sees it.
enum RestoreRules {
    /// The bytes of a C string from libarchive; empty for none.
    static func bytes(_ string: UnsafePointer<CChar>?) -> [UInt8] {
        guard let string else { return [] }
        return Array(UnsafeRawBufferPointer(start: string, count: strlen(string)))
    }

    /// The names of a relative path, without `.` and empty parts; nil when it is absolute or holds `..`.
    static func relativeComponents(_ path: [UInt8]) -> [FileName]? {
        guard path.first != 0x2F else { return nil }
        var components: [FileName] = []
        for part in path.split(separator: 0x2F) where !part.elementsEqual([0x2E]) {
            guard !part.elementsEqual([0x2E, 0x2E]), let name = FileName(bytes: part) else { return nil }
            components.append(name)
        }
        return components
    }

    /// The folders of the places and the service's state folder: an entry there must be a folder.
    static func isPlaceFolder(_ components: [FileName], appName: String) -> Bool {
        components == BackupRules.stateComponents
            || Place.allCases.contains { BackupRules.components($0.relativePath(appName: appName)) == components }
    }

    static func verdict(
        _ path: [UInt8], type: mode_t, symlink: [UInt8]?, hardlink: [UInt8]?, appName: String
    ) -> RestoreVerdict {
        guard !path.isEmpty else { return .refuse("an entry without a name") }
        guard path.first != 0x2F else { return .refuse("an absolute path") }
        guard let components = relativeComponents(path) else { return .refuse("a '..' in the path") }
        guard !components.isEmpty else { return .skip }  // the archive's own root, `./`
        guard components.count <= BackupWalk.maxDepth else {
            return .refuse("nested deeper than \(BackupWalk.maxDepth) folders, which no backup holds")
        }
        let kind = FileKind(mode: type)
        var target: [UInt8]?
        if let hardlink, !hardlink.isEmpty {
            let shown = String(decoding: hardlink, as: UTF8.self)
            guard let linked = relativeComponents(hardlink), !linked.isEmpty else {
                return .refuse("a hard link out of the container (to '\(shown)')")
            }
            guard let place = Place.containing(linked, appName: appName), place != .bundle, place.rules.isBackedUp
            else { return .refuse("a hard link to '\(shown)', which is not restored") }
            target = BackupRules.joined(linked)
        } else if let special = BackupRules.specialKindName(kind) {
            return .refuse("\(special) is never restored")
        }
        if kind == .symbolicLink, !BackupRules.linkStaysInside(symlink ?? [], from: components.dropLast()) {
            let shown = String(decoding: symlink ?? [], as: UTF8.self)
            return .refuse("a symbolic link that may lead out of the container (to '\(shown)')")
        }
        guard let place = Place.containing(components, appName: appName) else {
            return .refuse("outside the places of the container")
        }
        if place == .bundle { return .refuse("in the app bundle, which is sealed and never restored") }
        if kind != .directory, isPlaceFolder(components, appName: appName) {
            return .refuse("the folder of a place, which must be a folder")
        }
        if BackupRules.isJournalEntry(components) {
            // An archive inbox wrote holds none: a crafted one would make recovery act on files it names.
            return .refuse("a move journal intent, which names files of the container it was written in")
        }
        if !place.rules.isBackedUp || BackupRules.isRecreated(components, kind: kind)
            || BackupRules.isDeliveryInProgress(components, kind: kind)
        {
            return .skip
        }
        return .restore(path: BackupRules.joined(components), hardlink: target)
    }
}
