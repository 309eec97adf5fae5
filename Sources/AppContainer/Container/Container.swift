import FoundationEssentials
import Glibc

/// An app container on disk (ARCHITECTURE.md, "Places and rules"): the folder that holds the bundle, Documents, Library
/// and tmp.
public struct Container: Sendable {
    /// The container's folder, absolute and free of symbolic links, as its exact bytes: the path every system call
    /// is given (ARCHITECTURE.md, "Paths are bytes").
    public let rootBytes: [UInt8]
    /// The root as text, for messages: a byte that is not UTF-8 shows as U+FFFD. Never handed to a system call.
    public var root: String { String(decoding: rootBytes, as: UTF8.self) }
    /// The app's name: the bundle is `<appName>.app`.
    public let appName: String

    /// The service's own state: event log, locks, journal.
    package static let stateRelativePath = "Library/Application Support/inbox"

    /// The container a command uses: `--container`, else `$INBOX_CONTAINER`, else `$XDG_DATA_HOME/inbox/default`,
    /// else `~/.local/share/inbox/default`; each variable read as its exact bytes.
    package static func defaultPath(variable: (String) -> [UInt8]? = environmentVariable) -> [UInt8] {
        if let path = variable("INBOX_CONTAINER"), !path.isEmpty { return path }
        if let data = variable("XDG_DATA_HOME"), !data.isEmpty { return data + Array("/inbox/default".utf8) }
        let home = variable("HOME") ?? homeFolder()
        return home + Array("/.local/share/inbox/default".utf8)
    }

    /// `defaultPath` from variables given as text.
    package static func defaultPath(environment: [String: String]) -> String {
        String(decoding: defaultPath { environment[$0].map { Array($0.utf8) } }, as: UTF8.self)
    }

    /// The value of an environment variable of this process, as its exact bytes.
    package static func environmentVariable(_ name: String) -> [UInt8]? {
        guard let value = getenv(name) else { return nil }
        return Array(UnsafeRawBufferPointer(start: value, count: strlen(value)))
    }

    /// The user's home folder from the password database, as its exact bytes.
    private static func homeFolder() -> [UInt8] {
        guard let entry = getpwuid(getuid()), let home = entry.pointee.pw_dir else { return Array("/".utf8) }
        return Array(UnsafeRawBufferPointer(start: home, count: strlen(home)))
    }

    /// Opens an existing container; fails with exit status 73 when `path` holds none. A restore cut short is
    /// settled first (`RestoreSwitch`), and a bundle install cut short in its exchange rolled back
    /// (`settleInterruptedInstall`).
    public static func open(at path: some CStringConvertible) throws(ContainerError) -> Container {
        let path = path.pathBytes
        let shown = String(decoding: path, as: UTF8.self)
        let root: [UInt8]
        do {
            root = try system_realpath(path)
        } catch {
            throw ContainerError(
                .cannotCreate, "no container at '\(shown)': run 'inbox init' to create one", cause: error)
        }
        // Before the container check: every command names a filesystem no container can live on.
        try refuseUnsafeFilesystem(root)
        // Settled before the app's name is read: an install cut short in a two-step exchange may hold the bundle
        // aside, and a restore cut short in one the state folder (which the install's lock is in).
        let settling = Container(rootBytes: root, appName: "")
        if try !holdsStateFolder(root), try RestoreSwitch.isCutShortInExchange(settling) {
            try settling.settleInterruptedRestore()
        }
        guard try holdsStateFolder(root) else {
            throw ContainerError(.cannotCreate, "'\(shown)' is not a container: run 'inbox init' to create one")
        }
        try settling.settleInterruptedInstall()
        let container = Container(rootBytes: root, appName: try findAppName(root: root) ?? "App")
        try container.settleInterruptedRestore()
        return container
    }

    /// Whether `path` holds a container: the service's state folder marks one (`inbox init` makes it last; a
    /// missing Inbox is recreated by the watcher).
    public static func isContainer(at path: some CStringConvertible) -> Bool {
        let state = path.pathBytes + Array("/\(stateRelativePath)".utf8)
        return (try? fileStatus(in: currentDirectory, state))?.kind == .directory
    }

    /// `isContainer`, where a failure to look throws (never taken for "not a container").
    private static func holdsStateFolder(_ root: [UInt8]) throws(ContainerError) -> Bool {
        let state = root + Array("/\(stateRelativePath)".utf8)
        do {
            return try fileStatusIfPresent(in: currentDirectory, state)?.kind == .directory
        } catch .notDirectory {
            return false
        } catch {
            throw error.failure("look at", state)
        }
    }

    /// Creates the layout, or completes it; an existing container is left as it is, but for a restore or a bundle
    /// install cut short, which is settled (`RestoreSwitch`, `settleInterruptedInstall`). The root is mode 0700.
    public static func create(at path: some CStringConvertible, appName: String? = nil) throws(ContainerError)
        -> Container
    {
        if let appName, FileName(appName) == nil || appName.hasPrefix(".") {
            throw ContainerError(.usage, "'\(appName)' is not a valid app name")
        }
        let path = path.pathBytes
        let shown = String(decoding: path, as: UTF8.self)
        // Before anything is made: a container nothing could use is never built, not even its folder.
        try refuseUnsafeFilesystem(nearestExisting(path), named: path)
        try makeFolders(path)
        let root: [UInt8]
        let foreign: [FileName]
        do {
            root = try system_realpath(path)
            let rootFolder = try FileDescriptor(root, [.directory, .noFollow])
            // Never someone else's folder (`/`, a home): only an empty one, or a container (made or half made, or
            // with what an install cut short left: `.inbox-bundle…`, which the next install settles).
            foreign = try rootFolder.entries().filter {
                !layoutNames.contains($0.string) && !$0.string.hasSuffix(".app") && $0 != RestoreSwitch.stagingName
                    && !$0.string.hasPrefix(".inbox-bundle") && !$0.string.hasPrefix(IdentityProbe.prefix)
            }
            if foreign.isEmpty { try system_fchmod(rootFolder.rawValue, 0o700) }
        } catch .notDirectory {
            throw ContainerError(.cannotCreate, "cannot create a container at '\(shown)': it is not a folder")
        } catch {
            throw error.failure("create the container", shown)
        }
        let shownRoot = String(decoding: root, as: UTF8.self)
        if let first = foreign.first {
            throw ContainerError(
                .cannotCreate,
                "'\(shownRoot)' holds other things ('\(first)'): a container is made only in an empty folder")
        }
        try Container(rootBytes: root, appName: "").settleInterruptedInstall()
        let existing = try findAppName(root: root)
        if let existing, let appName, existing != appName {
            throw ContainerError(
                .refused, "the container at '\(shownRoot)' already holds \(existing).app, not \(appName).app")
        }
        let container = Container(rootBytes: root, appName: existing ?? appName ?? "App")
        for place in Place.allCases {
            let folder = container.pathBytes(place)
            try makeFolders(folder)
            if place == .bundle, existing == nil {
                do {
                    let bundle = try FileDescriptor(folder: folder)
                    try system_fchmod(bundle.rawValue, 0o555)
                } catch {
                    throw error.failure("seal the bundle", container.path(place))
                }
            }
        }
        try makeFolders(container.stateDirectoryBytes)
        try container.settleInterruptedRestore()
        return container
    }

    /// The absolute path of a place, as text for messages (`root`); `pathBytes` is the exact one.
    public func path(_ place: Place) -> String {
        root + "/" + place.relativePath(appName: appName)
    }

    /// The absolute path of a place, exact to the byte.
    public func pathBytes(_ place: Place) -> [UInt8] {
        rootBytes + Array(("/" + place.relativePath(appName: appName)).utf8)
    }

    /// The folder of a place as a file URL.
    public func url(_ place: Place) -> URL {
        URL(fileURLWithPath: path(place), isDirectory: true)
    }

    /// `Library/Application Support/inbox`: the event log, locks and journal, as text for messages.
    package var stateDirectory: String { root + "/" + Container.stateRelativePath }

    /// `stateDirectory`, exact to the byte.
    package var stateDirectoryBytes: [UInt8] { rootBytes + Array(("/" + Container.stateRelativePath).utf8) }

    /// `name` in the state folder, exact to the byte.
    package func statePath(_ name: String) -> [UInt8] { stateDirectoryBytes + Array(("/" + name).utf8) }

    /// Opens a place's folder for `*at` calls, refusing a symbolic link at any step below the root.
    package func openFolder(_ place: Place) throws(ContainerError) -> FileDescriptor {
        let components = place.relativePath(appName: appName).split(separator: "/").compactMap { FileName(String($0)) }
        return try openFolder(components)
    }

    /// Opens the folder at `components` below the root, one step at a time, never following a symbolic link.
    package func openFolder(_ components: [FileName]) throws(ContainerError) -> FileDescriptor {
        var folder: FileDescriptor
        do {
            folder = try FileDescriptor(rootBytes, [.directory])
        } catch {
            throw error.failure("open the container", root)
        }
        var walked = root
        for component in components {
            walked += "/" + component.string
            do {
                folder = try FileDescriptor(folder: component, at: folder.rawValue)
            } catch .tooManySymbolicLinks {
                throw ContainerError(.refused, "'\(walked)' is a symbolic link, which is never followed")
            } catch {
                throw error.failure("open", walked)
            }
        }
        return folder
    }

    private static func findAppName(root: [UInt8]) throws(ContainerError) -> String? {
        do {
            let folder = try FileDescriptor(root, [.directory])
            for name in try folder.entries() where name.bytes.count > 4 && name.string.hasSuffix(".app") {
                if try fileStatusIfPresent(in: folder.rawValue, name)?.kind == .directory {
                    return String(name.string.dropLast(4))
                }
            }
        } catch {
            throw error.failure("read the container", String(decoding: root, as: UTF8.self))
        }
        return nil
    }

    /// The names a container holds at its root, besides `<App>.app`.
    private static let layoutNames: Set<String> = ["Documents", "Library", "tmp"]

    /// `path` if it exists, else its nearest parent that does (`.` for a relative path none of whose parents does).
    private static func nearestExisting(_ path: [UInt8]) -> [UInt8] {
        var candidate = path
        while !candidate.isEmpty {
            if (try? fileStatusIfPresent(in: currentDirectory, candidate)) != nil { return candidate }
            guard let slash = candidate.lastIndex(of: 0x2F) else { break }
            candidate = slash == candidate.startIndex ? [0x2F] : Array(candidate[..<slash])
            if candidate == [0x2F] { return candidate }
        }
        return [0x2E]
    }

    /// `mkdir -p`.
    private static func makeFolders(_ path: [UInt8]) throws(ContainerError) {
        var walked: [UInt8] = path.first == 0x2F ? [] : [0x2E]
        for component in path.split(separator: 0x2F) {
            walked += [0x2F] + component
            do {
                try system_mkdirat(currentDirectory, walked, mode: 0o755)
            } catch .fileExists {
                continue
            } catch {
                let failure = error.failure("create", walked)
                throw failure.code == .ioError ? failure : ContainerError(.cannotCreate, failure.message, cause: error)
            }
        }
    }
}
