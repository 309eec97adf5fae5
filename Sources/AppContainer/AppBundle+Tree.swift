import Glibc

/// Walking folder trees below an open root, never following a symbolic link: for the bundle's copy, seal and
/// resource lookup, and for one-time setup.
enum Tree {
    /// Deeper than this, a walk stops with an error rather than run out of descriptors.
    static let maxDepth = 128

    /// The names joined with `/`, for the `*at` calls.
    static func bytes(_ path: [FileName]) -> [UInt8] {
        Array(path.map(\.bytes).joined(separator: [0x2F]))
    }

    /// The names joined with `/` as text; bytes that are not UTF-8 become U+FFFD.
    static func text(_ path: [FileName]) -> String {
        path.map(\.string).joined(separator: "/")
    }

    /// A path's parts, without empty ones (`a//b/` is `a`, `b`).
    static func split(_ path: [UInt8]) -> [[UInt8]] {
        path.split(separator: 0x2F).map(Array.init)
    }

    /// Where `components` lead below the folder `root` when every symbolic link on the way is followed (each
    /// relative to the folder holding it), or nil when the path leaves `root`: `..` above it, an absolute
    /// link target, or more than 40 links. Parts that do not exist are taken as they are written.
    static func resolve(_ components: [[UInt8]], in root: CInt) -> [FileName]? {
        var resolved: [FileName] = []
        var pending = Array(components.reversed())
        var links = 0
        while let part = pending.popLast() {
            if part.isEmpty || part == [0x2E] { continue }
            if part == [0x2E, 0x2E] {
                guard !resolved.isEmpty else { return nil }
                resolved.removeLast()
                continue
            }
            guard let name = FileName(bytes: part) else { return nil }
            let candidate = resolved + [name]
            // Every name in `resolved` is a real folder or missing, so lstat follows no link on the way.
            guard (try? fileStatus(in: root, bytes(candidate)))?.kind == .symbolicLink else {
                resolved = candidate
                continue
            }
            links += 1
            guard links <= 40, let target = try? system_readlinkat(root, bytes(candidate)), !target.isEmpty,
                target.first != 0x2F
            else { return nil }
            pending.append(contentsOf: split(target).reversed())
        }
        return resolved
    }

    /// Calls `visit` for every entry below `folder`, each folder's entries sorted by name, never following a
    /// symbolic link. `visit` gets the folder holding the entry, the entry's path below the walk's root and its
    /// status, and returns whether to go into it when it is a folder; `leave` gets each such folder, open,
    /// once its entries are done.
    static func walk(
        _ folder: borrowing FileDescriptor, shown: String, below path: [FileName] = [],
        visit: (_ parent: CInt, _ path: [FileName], _ status: FileStatus) throws(ContainerError) -> Bool,
        leave: (_ folder: CInt, _ path: [FileName]) throws(ContainerError) -> Void = { _, _ in }
    ) throws(ContainerError) {
        guard path.count < maxDepth else {
            throw ContainerError(.badData, "'\(shown)/\(text(path))' is nested too deep (over \(maxDepth) folders)")
        }
        let names: [FileName]
        do {
            names = try folder.entries().sorted()
        } catch {
            throw error.failure("read the folder", path.isEmpty ? shown : shown + "/" + text(path))
        }
        for name in names {
            let entry = path + [name]
            let status: FileStatus
            do {
                status = try fileStatus(in: folder.rawValue, name)
            } catch .noSuchFile {
                continue
            } catch {
                throw error.failure("read", shown + "/" + text(entry))
            }
            guard try visit(folder.rawValue, entry, status), status.kind == .directory else { continue }
            let inner: FileDescriptor
            do {
                inner = try FileDescriptor(at: folder.rawValue, name, [.directory, .noFollow])
            } catch {
                throw error.failure("open the folder", shown + "/" + text(entry))
            }
            try walk(inner, shown: shown, below: entry, visit: visit, leave: leave)
            try leave(inner.rawValue, entry)
        }
    }

    /// Removes `name` in `folder` and, for a folder, everything in it, never following a symbolic link.
    /// Write bits are given back to folders on the way, so that a sealed tree can be removed too.
    static func remove(_ name: FileName, in folder: CInt) throws(Errno) {
        let status = try fileStatus(in: folder, name)
        guard status.kind == .directory else {
            try system_unlinkat(folder, name)
            return
        }
        let inner = try FileDescriptor(at: folder, name, [.directory, .noFollow])
        try system_fchmod(inner.rawValue, 0o700)
        for entry in try inner.entries() { try remove(entry, in: inner.rawValue) }
        try system_unlinkat(folder, name, removeDirectory: true)
    }
}
