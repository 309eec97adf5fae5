/// One entry of a folder listing, with its size and modification date (ARCHITECTURE.md, "Bundle, backup and setup").
package struct ListedItem: Sendable {
    /// The entry's name in its folder.
    package let name: FileName
    /// The absolute path, exact to the byte.
    package let path: [UInt8]
    /// The entry's status, taken without following a symbolic link.
    package let status: FileStatus

    /// The size in bytes; for a symbolic link, the length of its target.
    package var size: Int64 { status.size }
    /// The last modification.
    package var modified: Timestamp { status.modified }
}

extension Container {
    /// The entries of a place's folder, sorted by name, without staging names (a leading `.`) and, for
    /// Documents, without the Inbox folder. Symbolic links are listed as links, never followed.
    package func list(_ place: Place) throws(ContainerError) -> [ListedItem] {
        let folder = try openFolder(place)
        let base = pathBytes(place) + [0x2F]
        var items: [ListedItem] = []
        do {
            for name in try folder.entries() where !name.isHidden {
                if place == .documents && name.string == "Inbox" { continue }
                guard let status = try? fileStatus(in: folder.rawValue, name) else { continue }
                items.append(ListedItem(name: name, path: base + name.bytes, status: status))
            }
        } catch {
            throw error.failure("list", path(place))
        }
        return items.sorted { $0.name < $1.name }
    }
}
