import Glibc

/// An entry as its folder lists it: the name, the inode and `d_type` (`DT_UNKNOWN` where the filesystem does not say).
package struct FolderEntry: Sendable {
    package let name: FileName
    package let inode: UInt64
    package let type: UInt8
}

extension FileDescriptor {
    /// Writes `bytes` as the file `name` in this folder, atomically and durably: under a temporary name beside
    /// it (unique, `.<name>.<pid>.<random>`, unless `temporary` names one), fsynced, renamed over `name`, and
    /// the folder fsynced. No symbolic link is followed; the temporary is removed on failure.
    package func replaceFile(_ name: FileName, with bytes: [UInt8], temporary: FileName? = nil, mode: mode_t = 0o644)
        throws(Errno)
    {
        let unique = Array(".\(getpid()).\(UInt64.random(in: 0...UInt64.max))".utf8)
        let temporary =
            temporary ?? FileName(bytes: [0x2E] + name.bytes.prefix(FileName.maxLength - 1 - unique.count) + unique)
        guard let temporary else { throw .invalidArgument }
        do {
            let file = try FileDescriptor(
                at: rawValue, temporary, [.writeOnly, .create, .truncate, .noFollow], mode: mode)
            try file.writeAll(bytes)
            try file.sync()
            try file.close()
            try system_renameat2(rawValue, temporary, rawValue, name, [])
            try system_fsync(rawValue)
        } catch {
            _ = try? system_unlinkat(rawValue, temporary)
            throw error
        }
    }

    /// The names in this folder, without `.` and `..`, in no particular order.
    package func entries() throws(Errno) -> [FileName] {
        var names: [FileName] = []
        try forEachListed { entry throws(Errno) in
            names.append(entry.name)
            return true
        }
        return names
    }

    /// Reads this folder one name at a time (without `.` and `..`) until `body` returns false, so that
    /// a folder of any size is read in constant memory.
    package func forEachEntry(_ body: (FileName) throws(Errno) -> Bool) throws(Errno) {
        try forEachListed { entry throws(Errno) in try body(entry.name) }
    }

    /// Every entry of this folder (without `.` and `..`) with its inode and type as the folder lists them.
    package func entriesAndInodes() throws(Errno) -> [FolderEntry] {
        var entries: [FolderEntry] = []
        try forEachListed { entry throws(Errno) in
            entries.append(entry)
            return true
        }
        return entries
    }

    /// The one folder reader: reads this folder afresh (opened again, so from its start) with `getdents64`, an entry at
    /// a time (without `.` and `..`) until `body` returns false. Constant memory, and no more than an open, the reads
    /// and a close (a poll of a network filesystem's Inbox costs that: ARCHITECTURE.md, "Network and FUSE
    /// filesystems").
    package func forEachListed(_ body: (FolderEntry) throws(Errno) -> Bool) throws(Errno) {
        let copy = try FileDescriptor(owning: system_openat(rawValue, ".", [.directory]))
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 32_768, alignment: 8)
        defer { buffer.deallocate() }
        while true {
            let count = try system_getdents64(copy.rawValue, into: buffer)
            if count == 0 { return }
            var offset = 0
            // struct linux_dirent64: d_ino (8 bytes), d_off (8), d_reclen (2), d_type (1), d_name (NUL-terminated).
            while offset < count {
                let inode = buffer.load(fromByteOffset: offset, as: UInt64.self)
                let length = Int(buffer.load(fromByteOffset: offset + 16, as: UInt16.self))
                guard length > 19, offset + length <= count else { throw .ioError }  // never from a sound kernel
                let type = buffer[offset + 18]
                let name = buffer[(offset + 19)..<(offset + length)].prefix { $0 != 0 }
                offset += length
                guard let name = FileName(bytes: Array(name)), !name.isDotOrDotDot else { continue }
                if try !body(FolderEntry(name: name, inode: inode, type: type)) { return }
            }
        }
    }

    /// The regular files below this folder and their bytes, with the walk (ARCHITECTURE.md, "Walks and removal"),
    /// never following a symbolic link and at most `maxDepth` folders deep; the names in `leavingOut` at its top are
    /// left out. `onError` is the walk's error policy; `shown` names this folder in its messages.
    package func regularFiles(
        maxDepth: Int, leavingOut: Set<FileName> = [], shown: String,
        onError: (ContainerError) throws(ContainerError) -> Void
    ) throws(ContainerError) -> (files: Int, bytes: Int64) {
        var total = (files: 0, bytes: Int64(0))
        try FolderWalk(maxDepth: maxDepth, sameFilesystem: false).run(self, shown: shown, onError: onError) { entry in
            if entry.path.count == 1 && leavingOut.contains(entry.name) { return .next }
            if entry.status.kind == .regular {
                total.files += 1
                total.bytes += entry.status.size
            }
            return .enter
        }
        return total
    }

    /// The bytes of the regular files below this folder (at most 64 folders deep), or the first failure to read
    /// them.
    package func regularFileBytes() throws(ContainerError) -> Int64 {
        try regularFiles(maxDepth: 64, shown: "(folder)", onError: FolderWalk.stop).bytes
    }

    /// Copies everything from `source`'s offset to its end into this file at its offset,
    /// in the kernel where it can (`copy_file_range`), by read and write where it cannot.
    package func copyContents(from source: borrowing FileDescriptor) throws(Errno) {
        while true {
            do {
                if try system_copy_file_range(from: source.rawValue, to: rawValue, length: 1 << 30) == 0 { return }
            } catch .crossDevice, .invalidArgument, .notImplemented, .notSupported, .badFileDescriptor {
                break
            }
        }
        var buffer = [UInt8](repeating: 0, count: 256 * 1024)
        while true {
            let count = try buffer.withUnsafeMutableBytes { raw in
                Result(catching: { () throws(Errno) in try source.read(into: raw) })
            }.get()
            if count == 0 { return }
            try buffer.withUnsafeBytes { raw in
                Result(catching: { () throws(Errno) in try writeAll(UnsafeRawBufferPointer(rebasing: raw[..<count])) })
            }.get()
        }
    }

    /// A faithful, durable copy: the contents of `source` (whose status is `status`), its access and
    /// modification times, then fsync.
    package func copyFile(from source: borrowing FileDescriptor, status: FileStatus) throws(Errno) {
        try copyContents(from: source)
        let modified = timespec(tv_sec: Int(status.modified.seconds), tv_nsec: Int(status.modified.nanoseconds))
        let accessed = timespec(tv_sec: Int(status.accessed.seconds), tv_nsec: Int(status.accessed.nanoseconds))
        try system_futimens(rawValue, accessed: accessed, modified: modified)
        try sync()
    }

    /// Adds the owner's write bit, as a file moved out of the Inbox gets back.
    package func restoreOwnerWrite() throws(Errno) {
        let mode = try fileStatus().mode
        if mode & S_IWUSR == 0 { try system_fchmod(rawValue, mode | S_IWUSR) }
    }
}
