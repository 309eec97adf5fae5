import Glibc

/// Paths below an open root, never following a symbolic link: for the bundle's copy, seal and
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

    /// The walk of the bundle's copy, seal and resource lookup, and of one-time setup: sorted, so that the same
    /// tree is always read in the same order, and stopped by its first failure.
    static let walk = FolderWalk(maxDepth: maxDepth, sameFilesystem: false, sorted: true)
}
