import Glibc

/// An open file descriptor with one owner, closed when the owner goes away.
package struct FileDescriptor: ~Copyable {
    /// The descriptor, valid while its owner lives.
    package let rawValue: CInt

    /// Takes ownership of an open descriptor: it is closed with this value.
    package init(owning rawValue: CInt) {
        self.rawValue = rawValue
    }

    /// Opens `path` relative to the folder `directory` (`currentDirectory` for the working folder).
    package init(
        at directory: CInt = currentDirectory, _ path: some CStringConvertible, _ flags: OpenFlags, mode: mode_t = 0
    ) throws(Errno) {
        rawValue = try system_openat(directory, path, flags, mode: mode)
    }

    /// Opens the folder `path` relative to `directory` for reading, never through a symbolic link: one there fails
    /// with ELOOP (with O_DIRECTORY, Linux reports it as ENOTDIR, which would read as "not a folder").
    package init(folder path: some CStringConvertible, at directory: CInt = currentDirectory) throws(Errno) {
        do {
            rawValue = try system_openat(directory, path, [.directory, .noFollow], mode: 0)
        } catch .notDirectory where (try? AppContainer.fileStatus(in: directory, path))?.kind == .symbolicLink {
            throw .tooManySymbolicLinks
        }
    }

    deinit {
        try? system_close(rawValue)
    }

    /// Closes now, reporting a failure (which can mean a lost write on some filesystems).
    package consuming func close() throws(Errno) {
        let fd = rawValue
        discard self
        try system_close(fd)
    }

    /// Gives up ownership without closing: the caller now owns the raw descriptor.
    package consuming func release() -> CInt {
        let fd = rawValue
        discard self
        return fd
    }

    /// `fstat` of the open file.
    package func status() throws(Errno) -> stat { try system_fstat(rawValue) }

    /// `fsync`: the file's data and metadata on disk.
    package func sync() throws(Errno) { try system_fsync(rawValue) }

    /// Writes all of `bytes`, continuing after short writes.
    package func writeAll(_ bytes: UnsafeRawBufferPointer) throws(Errno) {
        try AppContainer.writeAll(bytes, to: rawValue)
    }

    /// Writes all of `bytes`, continuing after short writes.
    package func writeAll(_ bytes: [UInt8]) throws(Errno) {
        try AppContainer.writeAll(bytes, to: rawValue)
    }

    /// Writes all of `bytes` at `offset` (`pwrite`), continuing after short writes; the file offset stays.
    package func writeAll(_ bytes: [UInt8], at offset: Int64) throws(Errno) {
        var written = 0
        while written < bytes.count {
            written += try system_pwrite(rawValue, Array(bytes[written...]), at: offset + Int64(written))
        }
    }

    /// Reads up to `buffer.count` bytes; 0 at the end of the file.
    package func read(into buffer: UnsafeMutableRawBufferPointer) throws(Errno) -> Int {
        try system_read(rawValue, into: buffer)
    }

    /// Reads from the current offset to the end of the file.
    package func readToEnd(limit: Int = Int.max) throws(Errno) -> [UInt8] {
        var result: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while result.count < limit {
            let count = try chunk.withUnsafeMutableBytes { buffer in
                Result(catching: { () throws(Errno) in try read(into: buffer) })
            }.get()
            if count == 0 { break }
            result.append(contentsOf: chunk[..<count])
        }
        return result
    }
}

/// A shared handle on a descriptor, for places a `~Copyable` owner cannot go (stored and replaced in a class,
/// captured by closures). Closed when the last reference goes.
package final class SharedDescriptor {
    /// The owned descriptor, closed with the last reference.
    package let descriptor: FileDescriptor
    /// The raw descriptor, valid while this handle lives.
    package var rawValue: CInt { descriptor.rawValue }

    /// Takes the descriptor over from its owner.
    package init(_ descriptor: consuming FileDescriptor) {
        self.descriptor = descriptor
    }

    /// `fsync`: the file's data and metadata on disk.
    package func sync() throws(Errno) { try descriptor.sync() }
}

/// Writes all of `bytes` to `fd`, continuing after short writes: the one such loop, for a descriptor held raw too
/// (the event log's).
package func writeAll(_ bytes: UnsafeRawBufferPointer, to fd: CInt) throws(Errno) {
    var offset = 0
    while offset < bytes.count {
        offset += try system_write(fd, UnsafeRawBufferPointer(rebasing: bytes[offset...]))
    }
}

/// `writeAll(_:to:)` for an array.
package func writeAll(_ bytes: [UInt8], to fd: CInt) throws(Errno) {
    try bytes.withUnsafeBytes { buffer in
        Result(catching: { () throws(Errno) in try writeAll(buffer, to: fd) })
    }.get()
}
