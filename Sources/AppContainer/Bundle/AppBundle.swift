import FoundationEssentials
import Glibc

/// The app's bundle, `<App>.app` (ARCHITECTURE.md, "Places and rules", "Bundle, backup and setup"): installed once by
/// `install(from:)`, sealed by `_CodeSignature/CodeResources`, read-only ever after. The library never writes into it
/// (`Container.checkWritable(components:)` refuses with exit status 77).
package struct AppBundle: Sendable {
    /// The container the bundle belongs to.
    package let container: Container

    /// The seal's path below the bundle.
    package static let codeResourcesPath = "_CodeSignature/CodeResources"

    /// The bundle of `container`, installed or not: nothing is read until asked.
    package init(container: Container) {
        self.container = container
    }

    /// The bundle's folder, absolute, as text for messages.
    package var path: String { container.path(.bundle) }

    /// The bundle's folder, absolute, exact to the byte.
    package var pathBytes: [UInt8] { container.pathBytes(.bundle) }

    /// The bundle's folder as a file URL.
    package var url: URL { container.url(.bundle) }

    /// `<App>.app`, for messages.
    package var name: String { container.appName + ".app" }

    /// The URL of a resource, in the manner of Foundation's `Bundle.url(forResource:withExtension:subdirectory:)`.
    ///
    /// Resources are looked up relative to the bundle root, or to `subdirectory` below it (iOS bundles are
    /// flat: there is no `Resources/` search). `withExtension` may be given with or without its leading `.`;
    /// with a nil (or empty) `name`, the first entry by name with that extension is returned. The result is a
    /// regular file or a folder, with every symbolic link on the way resolved; nil for a missing resource and
    /// for any path that leaves the bundle (`..`, an absolute link, or a link out of it).
    package func url(forResource name: String?, withExtension ext: String?, subdirectory: String? = nil) -> URL? {
        guard let root = try? FileDescriptor(pathBytes, [.directory, .noFollow]) else { return nil }
        var ext = ext ?? ""
        if ext.hasPrefix(".") { ext.removeFirst() }
        let folder = Tree.split(Array((subdirectory ?? "").utf8))
        var components: [[UInt8]]
        if let name, !name.isEmpty {
            components = folder + Tree.split(Array((ext.isEmpty ? name : name + "." + ext).utf8))
        } else {
            guard !ext.isEmpty, let resolved = Tree.resolve(folder, in: root.rawValue),
                let inside = try? FileDescriptor(at: root.rawValue, Tree.bytes(resolved), [.directory, .noFollow]),
                let first = try? inside.entries().sorted().first(where: { $0.string.hasSuffix("." + ext) })
            else { return nil }
            components = resolved.map(\.bytes) + [first.bytes]
        }
        guard let resolved = Tree.resolve(components, in: root.rawValue),
            let status = try? fileStatus(in: root.rawValue, resolved.isEmpty ? [0x2E] : Tree.bytes(resolved)),
            status.kind == .regular || status.kind == .directory
        else { return nil }
        let full = resolved.isEmpty ? path : path + "/" + Tree.text(resolved)
        return URL(fileURLWithPath: full, isDirectory: status.kind == .directory)
    }
}

/// One difference between a bundle and its seal.
package struct SealProblem: Sendable, Equatable, CustomStringConvertible {
    /// How a resource differs from the seal.
    package enum Kind: String, Sendable {
        /// The resource differs from what was sealed: other bytes, another link target, another kind.
        case modified
        /// Not in the seal.
        case added
        /// In the seal, not in the bundle.
        case missing
        /// `_CodeSignature/CodeResources` cannot be read, or is not a seal.
        case unreadable
    }

    /// How the resource differs.
    package let kind: Kind
    /// The resource's path below the bundle root.
    package let path: String

    /// A problem of `kind` with the resource at `path` below the bundle root.
    package init(_ kind: Kind, _ path: String) {
        self.kind = kind
        self.path = path
    }

    /// `modified: Resources/config.json`, control characters shown as `?` so that one problem is one line.
    package var description: String {
        "\(kind.rawValue): "
            + String(path.unicodeScalars.map { $0.value < 0x20 || $0.value == 0x7F ? "?" : Character($0) })
    }
}

/// What `AppBundle.verify()` found.
package struct SealReport: Sendable, Equatable {
    /// The verdict on the bundle as a whole.
    package enum State: Sendable, Equatable {
        /// No seal and nothing in the bundle: a container made without a bundle. Nothing to verify.
        case notSealed
        /// Every resource is as sealed.
        case intact
        /// At least one problem.
        case broken
    }

    /// The verdict: `broken` whenever `problems` is not empty.
    package let state: State
    /// How many resources the seal lists.
    package let resources: Int
    /// Sorted by path.
    package let problems: [SealProblem]

    /// A report of `state`, with the number of `resources` sealed and the `problems` (`verify()` sorts them by path).
    package init(state: State, resources: Int, problems: [SealProblem]) {
        self.state = state
        self.resources = resources
        self.problems = problems
    }
}
