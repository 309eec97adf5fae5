import AppContainer

/// What makes an arrival the same arrival (ARCHITECTURE.md, "Nothing twice"): device, inode and the inode's
/// birth time (a new file that reuses a deleted item's inode is born again), and for a file its size and
/// modification time; not the path.
struct Identity: Hashable, Sendable {
    private(set) var device: UInt64
    let inode: UInt64
    let size: Int64
    let modifiedSeconds: Int64
    let modifiedNanoseconds: Int64
    let born: Timestamp

    /// A file's identity; a folder's is its device and inode alone, since its size and time change with what it
    /// holds.
    init(_ status: FileStatus) {
        device = status.device
        inode = status.inode
        let isFolder = status.kind == .directory
        size = isFolder ? 0 : status.size
        modifiedSeconds = isFolder ? 0 : status.modified.seconds
        modifiedNanoseconds = isFolder ? 0 : status.modified.nanoseconds
        born = status.born
    }

    /// This identity with `device` for its device number: the same file seen under another mount of its network or
    /// FUSE filesystem, which gets a new number at every mount (ARCHITECTURE.md, "Network and FUSE filesystems").
    func onDevice(_ device: UInt64) -> Identity {
        var moved = self
        moved.device = device
        return moved
    }

    /// Whether `status` describes this file: the same `FileID` (device and inode).
    func isSameFile(as status: FileStatus) -> Bool {
        status.fileID == fileID
    }

    /// The file's place: its device and inode.
    var fileID: FileID { FileID(device: device, inode: inode) }

    /// `dev:ino:size:sec.nsec:born-sec.born-nsec`, as the `id` field of records.
    var text: String {
        "\(device):\(inode):\(size):\(modifiedSeconds).\(modifiedNanoseconds):\(born.seconds).\(born.nanoseconds)"
    }

    /// Reads `text`; an identity logged before birth times were kept (four fields) has a zero birth time.
    init?(text: some StringProtocol) {
        let parts = text.split(separator: ":")
        guard parts.count == 4 || parts.count == 5, let device = UInt64(parts[0]), let inode = UInt64(parts[1]),
            let size = Int64(parts[2]), let modified = Self.time(parts[3])
        else { return nil }
        guard let born = parts.count == 5 ? Self.time(parts[4]) : Timestamp(seconds: 0, nanoseconds: 0) else {
            return nil
        }
        self.device = device
        self.inode = inode
        self.size = size
        modifiedSeconds = modified.seconds
        modifiedNanoseconds = modified.nanoseconds
        self.born = born
    }

    private static func time(_ text: some StringProtocol) -> Timestamp? {
        let parts = text.split(separator: ".")
        guard parts.count == 2, let seconds = Int64(parts[0]), let nanoseconds = Int64(parts[1]) else { return nil }
        return Timestamp(seconds: seconds, nanoseconds: nanoseconds)
    }
}
