extension Container {
    /// Where a path a user gave lies in the container, as names below the root.
    ///
    /// A relative path is taken from the working folder. `..` is refused rather than resolved, and
    /// nothing is looked up on disk: the caller opens each step with `openFolder`, which never
    /// follows a symbolic link. A path outside the container is refused (exit status 77).
    package func components(ofUserPath path: [UInt8]) throws(ContainerError) -> [FileName] {
        let shown = String(decoding: path, as: UTF8.self)
        var absolute = path
        if path.first != 0x2F {
            do {
                absolute = try system_getcwd() + [0x2F] + path
            } catch {
                throw error.failure("find the working folder for", shown)
            }
        }
        var components: [FileName] = []
        for part in absolute.split(separator: 0x2F) {
            if part.elementsEqual([0x2E]) { continue }
            if part.elementsEqual([0x2E, 0x2E]) {
                throw ContainerError(.refused, "'\(shown)' contains '..', which is not allowed in a container path")
            }
            if let name = FileName(bytes: part) { components.append(name) }
        }
        let rootComponents = rootBytes.split(separator: 0x2F).compactMap { FileName(bytes: $0) }
        guard components.count >= rootComponents.count, components.starts(with: rootComponents) else {
            throw ContainerError(.refused, "'\(shown)' is outside the container '\(root)'")
        }
        return Array(components.dropFirst(rootComponents.count))
    }

    /// The name of the Inbox item a user means: a bare name in the Inbox, or a path to an item inside it.
    package func inboxItemName(forUserPath path: [UInt8]) throws(ContainerError) -> FileName {
        let shown = String(decoding: path, as: UTF8.self)
        if !path.contains(0x2F), let name = FileName(bytes: path) {
            guard !name.isDotOrDotDot else {
                throw ContainerError(.refused, "'\(shown)' is not an item in the Inbox")
            }
            return name
        }
        let components = try components(ofUserPath: path)
        let inbox = Place.inbox.relativePath(appName: appName).split(separator: "/").compactMap { FileName(String($0)) }
        guard components.count == inbox.count + 1, components.starts(with: inbox), let name = components.last else {
            throw ContainerError(.refused, "'\(shown)' is not in the Inbox '\(self.path(.inbox))'")
        }
        return name
    }
}
