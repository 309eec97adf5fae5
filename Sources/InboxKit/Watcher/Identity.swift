import AppContainer

/// What makes an arrival the same arrival (DESIGN §2): device, inode, size and modification time, not the path.
struct Identity: Hashable, Sendable {
    let device: UInt64
    let inode: UInt64
    let size: Int64
    let modifiedSeconds: Int64
    let modifiedNanoseconds: Int64

    init(_ status: FileStatus) {
        device = status.device
        inode = status.inode
        size = status.size
        modifiedSeconds = status.modified.seconds
        modifiedNanoseconds = status.modified.nanoseconds
    }

    /// A folder's identity: device and inode alone, since its size and time change with what it holds.
    init(folder status: FileStatus) {
        device = status.device
        inode = status.inode
        size = 0
        modifiedSeconds = 0
        modifiedNanoseconds = 0
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
