/// The places of an app container (ARCHITECTURE.md, "Places and rules"), each with its rules.
public enum Place: String, CaseIterable, Sendable {
    /// `<App>.app`: sealed, read-only, never written by the library.
    case bundle
    /// `Documents`: the user's files; backed up.
    case documents
    /// `Documents/Inbox`: only a delivery writes here; the app may read, move out and delete.
    case inbox
    /// `Library`: backed up.
    case library
    /// `Library/Application Support`: the app's data and the service's state; backed up.
    case applicationSupport
    /// `Library/Caches`: not backed up, trimmed by cleanup.
    case caches
    /// `Library/Preferences`: `inbox.plist` among others; backed up.
    case preferences
    /// `tmp`: not backed up, old entries deleted by cleanup.
    case tmp

    /// The folder's path below the container root; the bundle is `<App>.app`.
    public func relativePath(appName: String) -> String {
        switch self {
        case .bundle: "\(appName).app"
        case .documents: "Documents"
        case .inbox: "Documents/Inbox"
        case .library: "Library"
        case .applicationSupport: "Library/Application Support"
        case .caches: "Library/Caches"
        case .preferences: "Library/Preferences"
        case .tmp: "tmp"
        }
    }

    /// What the app may do here, and what the system does with it: the table of ARCHITECTURE.md, "Places and rules".
    public var rules: PlaceRules {
        switch self {
        case .bundle:
            PlaceRules(mayCreate: false, mayWrite: false, mayDelete: false, isBackedUp: false, isPurgeable: false)
        case .inbox:
            PlaceRules(mayCreate: false, mayWrite: false, mayDelete: true, isBackedUp: true, isPurgeable: false)
        case .documents, .library, .applicationSupport, .preferences:
            PlaceRules(mayCreate: true, mayWrite: true, mayDelete: true, isBackedUp: true, isPurgeable: false)
        case .caches, .tmp:
            PlaceRules(mayCreate: true, mayWrite: true, mayDelete: true, isBackedUp: false, isPurgeable: true)
        }
    }

    /// The place that holds a path below the container root: the deepest place whose folder contains it.
    /// Nil for paths outside every place (the root itself, or stray entries beside the places).
    package static func containing(_ components: [FileName], appName: String) -> Place? {
        var best: (place: Place, depth: Int)?
        for place in Place.allCases {
            let folder = place.relativePath(appName: appName).split(separator: "/").map { Array($0.utf8) }
            guard components.count >= folder.count,
                zip(components, folder).allSatisfy({ $0.bytes == $1 })
            else { continue }
            if folder.count > (best?.depth ?? 0) { best = (place, folder.count) }
        }
        return best?.place
    }
}

/// The rules of one place. Every place may be read.
public struct PlaceRules: Sendable, Equatable {
    /// May the app create new files here?
    public let mayCreate: Bool
    /// May the app change files here?
    public let mayWrite: Bool
    /// May the app delete files here?
    public let mayDelete: Bool
    /// Does a backup hold it?
    public let isBackedUp: Bool
    /// May the system delete it to free space, or while the app is not running?
    public let isPurgeable: Bool
}
