import Glibc

extension Container {
    /// Who writes: the app, bound by each place's rules, or a delivery, the one way into the Inbox (ARCHITECTURE.md,
    /// "Delivery").
    package enum Writer: Sendable {
        /// The app, bound by each place's rules: never the bundle nor the Inbox.
        case app
        /// A delivery (`Inbox.deliver`), the one writer the Inbox accepts.
        case delivery
    }

    /// The names of a place's folder below the root.
    package func components(of place: Place) -> [FileName] {
        place.relativePath(appName: appName).split(separator: "/").compactMap { FileName(String($0)) }
    }

    /// Refuses, with exit status 77, to create or write at `components` (names below the root) where the rules
    /// of the place holding it (`Place.containing`, `Place.rules`) forbid it: anywhere in the bundle, which is
    /// sealed; in the Inbox, but for a delivery; and outside every place. Returns the place. Every library
    /// operation that creates or writes asks this first.
    @discardableResult
    package func checkWritable(components: [FileName], by writer: Writer = .app) throws(ContainerError) -> Place {
        let shown = components.isEmpty ? root : root + "/" + components.map(\.string).joined(separator: "/")
        guard let place = Place.containing(components, appName: appName) else {
            throw ContainerError(.refused, "'\(shown)' is not in any place of the container: nothing is written there")
        }
        let rules = place.rules
        if rules.mayCreate && rules.mayWrite { return place }
        switch place {
        case .bundle:
            throw ContainerError(.refused, "the bundle is sealed: '\(shown)' cannot be created or written")
        case .inbox where writer == .delivery:
            return place
        case .inbox:
            throw ContainerError(
                .refused,
                "'\(shown)' is in the Inbox, where only deliveries create files: move the item into Documents first")
        default:
            throw ContainerError(.refused, "'\(shown)' is in \(place.rawValue), where nothing is created or written")
        }
    }

    /// Writes `bytes` as the file at `components` below the root, atomically and durably (`replaceFile`), after
    /// `checkWritable`. No symbolic link is followed on the way; the folder must exist. The file is mode 0644.
    package func write(_ bytes: [UInt8], to components: [FileName]) throws(ContainerError) {
        try checkWritable(components: components)
        guard let name = components.last else { throw ContainerError(.refused, "'\(root)' is not a file") }
        let folder = try openFolder(Array(components.dropLast()))
        let shown = root + "/" + components.map(\.string).joined(separator: "/")
        do {
            try folder.replaceFile(name, with: bytes)
        } catch {
            throw error.failure("write", shown)
        }
    }
}
