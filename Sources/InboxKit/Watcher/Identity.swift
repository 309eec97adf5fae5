import AppContainer

/// What makes an arrival the same arrival (DESIGN §2): device, inode, size and modification time, not the path.
struct Identity: Hashable, Sendable {
    let device: UInt64
    let inode: UInt64
    let size: Int64
    let modifiedSeconds: Int64
    let modifiedNanoseconds: Int64

    /// A file's identity; a folder's is its device and inode alone, since its size and time change with what it
    /// holds.
    init(_ status: FileStatus) {
        device = status.device
        inode = status.inode
        let isFolder = status.kind == .directory
        size = isFolder ? 0 : status.size
        modifiedSeconds = isFolder ? 0 : status.modified.seconds
        modifiedNanoseconds = isFolder ? 0 : status.modified.nanoseconds
    }

    /// Whether `status` describes this file: the same device and inode.
    func isSameFile(as status: FileStatus) -> Bool {
        status.device == device && status.inode == inode
    }

    /// `dev:ino:size:sec.nsec`, as the `id` field of `arrived` records.
    var text: String { "\(device):\(inode):\(size):\(modifiedSeconds).\(modifiedNanoseconds)" }

    init?(text: some StringProtocol) {
        let parts = text.split(separator: ":")
        let time = parts.count == 4 ? parts[3].split(separator: ".") : []
        guard parts.count == 4, time.count == 2, let device = UInt64(parts[0]), let inode = UInt64(parts[1]),
            let size = Int64(parts[2]), let seconds = Int64(time[0]), let nanoseconds = Int64(time[1])
        else { return nil }
        self.device = device
        self.inode = inode
        self.size = size
        modifiedSeconds = seconds
        modifiedNanoseconds = nanoseconds
    }
}
