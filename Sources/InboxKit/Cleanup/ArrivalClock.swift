import AppContainer
import Glibc

/// When Inbox items arrived, for the cleanup policy (ARCHITECTURE.md, "Age from arrival"): the later of an item's
/// status-change time (ctime, which nobody can set back) and its latest `delivered` or `arrived` record for the
/// same identity, never the file's own dates. Where the filesystem does not keep a real ctime, only the record
/// counts. Every doubt makes an item younger, never older.
struct ArrivalClock {
    /// Whether the Inbox's filesystem keeps a real ctime.
    let keepsChangeTime: Bool
    /// The Inbox's device number, where its filesystem (network or FUSE) gets a new one at every mount: a record
    /// logged under an earlier mount is read as of this one (ARCHITECTURE.md, "Network and FUSE filesystems").
    private let remountedDevice: UInt64?
    private let container: Container

    /// The clock of the Inbox open as `folder`.
    init(container: Container, inbox folder: borrowing FileDescriptor) throws(ContainerError) {
        self.container = container
        do {
            let filesystem = try Filesystem(of: folder)
            keepsChangeTime = Self.keepsChangeTime(filesystemType: filesystem.type)
            remountedDevice = filesystem.pollReason == nil ? nil : try folder.fileStatus().device
        } catch {
            throw error.failure("read", container.path(.inbox))
        }
    }

    /// FUSE filesystems (sshfs and rclone among them) report the modification time as ctime, so none of them is
    /// trusted with it.
    static func keepsChangeTime(filesystemType: Int64) -> Bool {
        filesystemType != Filesystem.fuseType
    }

    /// An item's arrival: the later of `changed` (where the filesystem keeps it) and `record`, the time of its
    /// latest record; nil where neither is known, and the item is then never old.
    func arrival(changed: Timestamp, record: Timestamp?) -> Timestamp? {
        guard keepsChangeTime else { return record }
        guard let record else { return changed }
        return max(changed, record)
    }

    /// The time of the latest `delivered` or `arrived` record of each of `items` that has one, keyed by device and
    /// inode: one pass over the log, across its rotated files, holding only what `items` asks for.
    func latestRecords(for items: some Sequence<Identity>) throws(ContainerError) -> [FileID: Timestamp] {
        var wanted: [FileID: Identity] = [:]
        for item in items { wanted[item.fileID] = item }
        guard !wanted.isEmpty else { return [:] }
        var latest: [FileID: Timestamp] = [:]
        let kinds: Set<EventKind> = [.delivered, .arrived]
        let log = try EventLog(container: container)
        let now = Timestamp.now()
        try log.forEachRecord(kinds: kinds) { record in
            guard let logged = record.fields["id"].flatMap(Identity.init(text:)) else { return true }
            let id = remountedDevice.map { logged.onDevice($0) } ?? logged
            guard let item = wanted[id.fileID],
                Self.isSame(id, as: item)
            else { return true }
            // A time that cannot be read makes the item as young as can be.
            let time = Timestamp(rfc3339: record.time) ?? now
            latest[id.fileID] = max(latest[id.fileID] ?? time, time)
            return true
        }
        return latest
    }

    /// Whether a record's identity names the item: device, inode and birth time; where either has no birth time,
    /// its size and modification time too, so that a record of a deleted file whose inode the item reuses is not
    /// taken for the item's.
    static func isSame(_ record: Identity, as item: Identity) -> Bool {
        guard record.fileID == item.fileID else { return false }
        let unknown = Timestamp(seconds: 0, nanoseconds: 0)
        guard record.born != unknown, item.born != unknown else { return record == item }
        return record.born == item.born
    }
}

extension Timestamp {
    /// Reads `2026-11-29T16:37:38.123Z`, as the log writes times (`rfc3339`); nil for anything else.
    init?(rfc3339 text: String) {
        let bytes = Array(text.utf8)
        guard bytes.count == 24, bytes[23] == UInt8(ascii: "Z") else { return nil }
        func number(_ start: Int, _ count: Int) -> Int32? {
            var value: Int32 = 0
            for byte in bytes[start..<start + count] {
                guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
                value = value * 10 + Int32(byte - UInt8(ascii: "0"))
            }
            return value
        }
        let separators: [(Int, Character)] = [(4, "-"), (7, "-"), (10, "T"), (13, ":"), (16, ":"), (19, ".")]
        guard separators.allSatisfy({ bytes[$0.0] == $0.1.asciiValue }),
            let year = number(0, 4), let month = number(5, 2), let day = number(8, 2), let hour = number(11, 2),
            let minute = number(14, 2), let second = number(17, 2), let millis = number(20, 3)
        else { return nil }
        var parts = tm()
        parts.tm_year = year - 1900
        parts.tm_mon = month - 1
        parts.tm_mday = day
        parts.tm_hour = hour
        parts.tm_min = minute
        parts.tm_sec = second
        self.init(seconds: Int64(timegm(&parts)), nanoseconds: Int64(millis) * 1_000_000)
    }
}
