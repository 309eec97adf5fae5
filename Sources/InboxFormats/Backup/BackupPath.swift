import AppContainer
import InboxKit

extension Container {
    /// Where a PATH given to `exclude-from-backup` lies (ARCHITECTURE.md, "The command line"): an absolute path
    /// as it is; a relative one from the working folder when that names an item inside the container, else from
    /// the container's root, as `backup-plan` prints paths (`Documents/big.iso`). `..` is refused either way.
    public func components(ofBackupPath path: [UInt8]) throws(ContainerError) -> [FileName] {
        guard path.first != 0x2F else { return try components(ofUserPath: path) }
        if let fromWorkingFolder = try? components(ofUserPath: path), exists(fromWorkingFolder) {
            return fromWorkingFolder
        }
        if path.split(separator: 0x2F).contains(where: { $0.elementsEqual([0x2E, 0x2E]) }) {
            return try components(ofUserPath: path)  // refused with the path as given
        }
        return try components(ofUserPath: rootBytes + [0x2F] + path)
    }

    /// Whether something (a link included, never followed) is at `components` below the root.
    private func exists(_ components: [FileName]) -> Bool {
        let path = rootBytes + components.flatMap { [0x2F] + $0.bytes }
        return (try? fileStatus(in: currentDirectory, path)) != nil
    }
}
