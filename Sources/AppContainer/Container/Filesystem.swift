import Glibc

/// What inbox needs to know of the filesystem that holds a folder (ARCHITECTURE.md, "Network and FUSE
/// filesystems"): whether this host's inotify sees every change there, whether its locks cross hosts, and the
/// mount's cache options. Told by `fstatfs`'s `f_type` and, for FUSE filesystems, which all share one type, by the
/// mount's line in `/proc/self/mountinfo`.
package struct Filesystem: Sendable, Equatable {
    /// `f_type` of `fstatfs`.
    package let type: Int64
    /// The type as the mount table names it (`nfs4`, `fuse.sshfs`, `fuse`, `ext4` when asked for by `named`); nil
    /// for a local filesystem not `named` (the mount table is not read for it) or one without a line.
    package let mountType: String?
    /// The mount's options, its own and its superblock's (`rw`, `vers=4.2`, `acdirmax=60`, `attr_timeout=30`).
    package let options: [String]
    /// What tells this mount from another that got its device number after it was unmounted: the mount table's
    /// mount ID, mount point and source; nil where the table was not read.
    package let mount: String?

    /// The filesystem that holds the open file or folder `fd`. `named`: the mount table is read for a local
    /// filesystem too, for its `name` (`status`), where others make do with `f_type`.
    package init(of fd: CInt, named: Bool = false) throws(Errno) {
        type = try system_fstatfsType(fd)
        guard named || Self.networkTypes.contains(type) || type == Self.fuseType else {
            // A local filesystem: its type is all there is to know, and costs one call (every import asks).
            mountType = nil
            options = []
            mount = nil
            return
        }
        let line = Self.mountLine(device: FileStatus(try system_fstat(fd)).device)
        mountType = line?.type
        options = line?.options ?? []
        mount = line?.mount
    }

    /// The filesystem that holds the open file or folder `descriptor`.
    package init(of descriptor: borrowing FileDescriptor, named: Bool = false) throws(Errno) {
        try self.init(of: descriptor.rawValue, named: named)
    }

    /// A filesystem as given, for tests.
    package init(type: Int64, mountType: String?, options: [String]) {
        self.type = type
        self.mountType = mountType
        self.options = options
        mount = nil
    }

    /// Why this filesystem is polled (`nfs4`, `fuse.sshfs`): another host's writes raise no inotify event here.
    /// Nil for a local filesystem, which is never polled.
    package var pollReason: String? {
        Self.networkTypes.contains(type) || type == Self.fuseType ? name : nil
    }

    /// Why an `flock` here may not reach other hosts or another path to the same files (`FUSE`, `nolock`,
    /// `local_lock=all`), so that a container here must be declared single-host before anything writes to it; nil
    /// where it does (NFS, SMB) or where no other host writes (a local filesystem). Every FUSE filesystem is one: no
    /// client can tell whether the filesystem forwards locks (bindfs does not by default, sshfs and rclone never).
    package var localLockReason: String? {
        guard pollReason != nil else { return nil }
        if let option = options.first(where: {
            $0 == "nolock" || $0.hasPrefix("local_lock=") && $0 != "local_lock=none"
        }) {
            return option
        }
        return type == Self.fuseType ? "FUSE" : nil
    }

    /// The options that set how long the client caches attributes and names (`acdirmax=60`, `lookupcache=all`,
    /// `attr_timeout=30`), for `status` to show.
    package var cacheOptions: [String] {
        guard pollReason != nil else { return [] }
        let names = [
            "ac", "noac", "actimeo", "acregmin", "acregmax", "acdirmin", "acdirmax", "lookupcache", "attr_timeout",
            "entry_timeout", "negative_timeout", "cache",
        ]
        return options.filter { option in
            let name = option.split(separator: "=", maxSplits: 1).first.map(String.init) ?? option
            return names.contains(name)
        }
    }

    /// Shown in messages and `status`: the mount table's name for the type (`ext4`, `fuse.sshfs`), else the name
    /// of its `f_type` (`tmpfs`, `fuse`), else the `f_type` as hex.
    package var name: String {
        mountType ?? Self.typeNames[type] ?? "filesystem type 0x" + String(UInt64(bitPattern: type), radix: 16)
    }

    /// `linux/magic.h`'s `FUSE_SUPER_MAGIC`.
    package static let fuseType: Int64 = 0x6573_5546

    /// `linux/magic.h`'s `NFS_SUPER_MAGIC`.
    package static let nfsType: Int64 = 0x6969

    /// The `f_type`s of network filesystems: NFS, SMB (smbfs, CIFS, SMB2), 9p, Ceph, AFS (two), Coda, NCP, Lustre,
    /// GPFS. GlusterFS, sshfs and rclone are FUSE filesystems.
    static let networkTypes: Set<Int64> = [
        nfsType, 0x517B, 0xFF53_4D42, 0xFE53_4D42, 0x0102_1997, 0x00C3_6400, 0x5346_414F, 0x6B41_4653, 0x7375_7245,
        0x564C, 0x0BD0_0BD0, 0x4750_4653,
    ]

    /// `linux/magic.h`'s names for the `f_type`s of common filesystems, for where the mount table has no line
    /// (ext2, ext3 and ext4 share one).
    static let typeNames: [Int64: String] = [
        0xEF53: "ext2/ext3/ext4", 0x0102_1994: "tmpfs", 0x5846_5342: "xfs", 0x9123_683E: "btrfs", 0x2FC1_2FC1: "zfs",
        0xF2F5_2010: "f2fs", 0xCA45_1A4E: "bcachefs", 0x794C_7630: "overlay", 0x8584_58F6: "ramfs",
        0x7371_7368: "squashfs", 0x4D44: "vfat", 0x2011_BAB0: "exfat", 0x5346_544E: "ntfs", 0x7366_746E: "ntfs3",
        0x9660: "iso9660", 0x1501_3346: "udf", 0x3153_464A: "jfs", 0x5265_4973: "reiserfs", fuseType: "fuse",
        nfsType: "nfs", 0x517B: "smbfs", 0xFF53_4D42: "cifs", 0xFE53_4D42: "smb2", 0x0102_1997: "9p",
        0x00C3_6400: "ceph", 0x5346_414F: "afs", 0x6B41_4653: "afs", 0x7375_7245: "coda", 0x564C: "ncp",
        0x0BD0_0BD0: "lustre", 0x4750_4653: "gpfs",
    ]

    /// The type and options of the mount of `device`, the last such line of `/proc/self/mountinfo` (a later mount
    /// hides an earlier one); nil when it cannot be read or has no line.
    private static func mountLine(device: UInt64) -> (type: String, options: [String], mount: String)? {
        let bytes: [UInt8]
        do {
            bytes = try FileDescriptor("/proc/self/mountinfo", [.readOnly]).readToEnd(limit: 64 << 20)
        } catch {
            return nil  // No mount table (a sandbox without /proc): the f_type alone tells.
        }
        let (major, minor) = FileID.majorMinor(device)
        let wanted = "\(major):\(minor)"
        var found: (type: String, options: [String], mount: String)?
        // "36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue"
        for line in bytes.split(separator: UInt8(ascii: "\n")) {
            let fields = line.split(separator: UInt8(ascii: " "))
            guard fields.count >= 10, String(decoding: fields[2], as: UTF8.self) == wanted,
                let dash = fields.firstIndex(where: { $0.elementsEqual("-".utf8) }), dash + 3 < fields.count
            else { continue }
            func words(_ field: ArraySlice<UInt8>) -> [String] {
                field.split(separator: UInt8(ascii: ",")).map { String(decoding: $0, as: UTF8.self) }
            }
            let mount = [fields[0], fields[4], fields[dash + 2]].map { String(decoding: $0, as: UTF8.self) }
            found = (
                String(decoding: fields[dash + 1], as: UTF8.self), words(fields[5]) + words(fields[dash + 3]),
                mount.joined(separator: " ")
            )
        }
        return found
    }
}

extension FileID {
    /// A device number's major and minor, as the kernel splits it (`gnu_dev_major`, `gnu_dev_minor`).
    package static func majorMinor(_ device: UInt64) -> (major: UInt64, minor: UInt64) {
        ((device >> 8) & 0xFFF | (device >> 32) & ~0xFFF, device & 0xFF | (device >> 12) & ~0xFF)
    }
}
