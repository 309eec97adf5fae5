import FoundationEssentials
import Glibc

/// An app container on disk (ARCHITECTURE.md, "Places and rules"): the folder that holds the bundle, Documents, Library
/// and tmp.
public struct Container: Sendable {
    /// The container's folder, absolute and free of symbolic links.
    public let root: String
    /// The app's name: the bundle is `<appName>.app`.
    public let appName: String

    /// The service's own state: event log, locks, journal.
    public static let stateRelativePath = "Library/Application Support/inbox"

    /// The container a command uses: `--container`, else `$INBOX_CONTAINER`, else `$XDG_DATA_HOME/inbox/default`.
    public static func defaultPath(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        if let path = environment["INBOX_CONTAINER"], !path.isEmpty { return path }
        if let data = environment["XDG_DATA_HOME"], !data.isEmpty { return data + "/inbox/default" }
        let home = environment["HOME"] ?? FileManager.default.homeDirectoryForCurrentUser.path
        return home + "/.local/share/inbox/default"
    }

    /// Opens an existing container; fails with exit status 73 when `path` holds none. A restore cut short is
    /// settled first (`RestoreSwitch`).
    public static func open(at path: String) throws(ContainerError) -> Container {
        let root: String
        do {
            root = String(decoding: try system_realpath(path), as: UTF8.self)
        } catch {
            throw ContainerError(
                .cannotCreate, "no container at '\(path)': run 'inbox init' to create one", cause: error)
        }
        let container = Container(root: root, appName: try findAppName(root: root) ?? "App")
        // The service's state folder marks a container; a missing Inbox is recreated by the watcher.
        guard (try? fileStatus(in: currentDirectory, container.stateDirectory))?.kind == .directory else {
            throw ContainerError(.cannotCreate, "'\(path)' is not a container: run 'inbox init' to create one")
        }
        try container.settleInterruptedRestore()
        return container
    }

    /// Creates the layout, or completes it; an existing container is left as it is, but for a restore cut short,
    /// which is settled (`RestoreSwitch`). The root is mode 0700.
    public static func create(at path: String, appName: String? = nil) throws(ContainerError) -> Container {
        if let appName, FileName(appName) == nil || appName.hasPrefix(".") {
            throw ContainerError(.usage, "'\(appName)' is not a valid app name")
        }
        try makeFolders(path)
        let root: String
        let foreign: [FileName]
        do {
            root = String(decoding: try system_realpath(path), as: UTF8.self)
            let rootFolder = try FileDescriptor(root, [.directory, .noFollow])
            // Never someone else's folder (`/`, a home): only an empty one, or a container (made or half made).
            foreign = try rootFolder.entries().filter {
                !layoutNames.contains($0.string) && !$0.string.hasSuffix(".app") && $0 != RestoreSwitch.stagingName
            }
            if foreign.isEmpty { try system_fchmod(rootFolder.rawValue, 0o700) }
        } catch .notDirectory {
            throw ContainerError(.cannotCreate, "cannot create a container at '\(path)': it is not a folder")
        } catch {
            throw error.failure("create the container", path)
        }
        if let first = foreign.first {
            throw ContainerError(
                .cannotCreate, "'\(root)' holds other things ('\(first)'): a container is made only in an empty folder")
        }
        let existing = try findAppName(root: root)
        if let existing, let appName, existing != appName {
            throw ContainerError(
                .refused, "the container at '\(root)' already holds \(existing).app, not \(appName).app")
        }
        let container = Container(root: root, appName: existing ?? appName ?? "App")
        for place in Place.allCases {
            let folder = container.path(place)
            try makeFolders(folder)
            if place == .bundle, existing == nil {
                do {
                    let bundle = try FileDescriptor(folder: folder)
                    try system_fchmod(bundle.rawValue, 0o555)
                } catch {
                    throw error.failure("seal the bundle", folder)
                }
            }
        }
        try makeFolders(container.stateDirectory)
        try container.settleInterruptedRestore()
        return container
    }

    /// The absolute path of a place.
    public func path(_ place: Place) -> String {
        root + "/" + place.relativePath(appName: appName)
    }

    /// The folder of a place as a file URL.
    public func url(_ place: Place) -> URL {
        URL(fileURLWithPath: path(place), isDirectory: true)
    }

    /// `Library/Application Support/inbox`: the event log, locks and journal.
    public var stateDirectory: String { root + "/" + Container.stateRelativePath }

    /// Opens a place's folder for `*at` calls, refusing a symbolic link at any step below the root.
    public func openFolder(_ place: Place) throws(ContainerError) -> FileDescriptor {
        let components = place.relativePath(appName: appName).split(separator: "/").compactMap { FileName(String($0)) }
        return try openFolder(components)
    }

    /// Opens the folder at `components` below the root, one step at a time, never following a symbolic link.
    public func openFolder(_ components: [FileName]) throws(ContainerError) -> FileDescriptor {
        var folder: FileDescriptor
        do {
            folder = try FileDescriptor(root, [.directory])
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

    private static func findAppName(root: String) throws(ContainerError) -> String? {
        do {
            let folder = try FileDescriptor(root, [.directory])
            for name in try folder.entries() where name.bytes.count > 4 && name.string.hasSuffix(".app") {
                if (try? fileStatus(in: folder.rawValue, name))?.kind == .directory {
                    return String(name.string.dropLast(4))
                }
            }
        } catch {
            throw error.failure("read the container", root)
        }
        return nil
    }

    /// The names a container holds at its root, besides `<App>.app`.
    private static let layoutNames: Set<String> = ["Documents", "Library", "tmp"]

    /// `mkdir -p`.
    private static func makeFolders(_ path: String) throws(ContainerError) {
        var walked = path.hasPrefix("/") ? "" : "."
        for component in path.split(separator: "/") {
            walked += "/" + component
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
