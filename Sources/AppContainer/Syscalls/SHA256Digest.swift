import CNettle
import Glibc

/// SHA-256 through Nettle, with one context reused for every digest (ARCHITECTURE.md, "Dependencies", "The hot
/// path"): `begin`, `update` as the bytes come, `finish`. `hash(_:in:shown:)` does all three for a file, with one
/// reused read buffer.
///
/// libnettle is loaded on the first digest (`LazyLibrary`). Not thread-safe: make one per thread or walk.
package final class SHA256Digest {
    /// Nettle's SHA-256 functions, typed by their prototypes (`shim.h`), resolved on the first digest.
    private struct Functions {
        let initialize: inbox_sha256_init
        let update: inbox_sha256_update
        let digest: inbox_sha256_digest
    }

    /// libnettle's soname: its ABI has been 8 since Nettle 3.6.
    private static let functions = Result { () throws(ContainerError) in
        let library = try LazyLibrary("libnettle.so.8")
        return Functions(
            initialize: try library.function("nettle_sha256_init", as: inbox_sha256_init.self),
            update: try library.function("nettle_sha256_update", as: inbox_sha256_update.self),
            digest: try library.function("nettle_sha256_digest", as: inbox_sha256_digest.self))
    }

    /// Bytes asked of each `pread` by `hash(_:in:shown:)`.
    package static let chunkSize = 256 * 1024
    /// The length of a digest.
    package static let length = 32

    private let context: UnsafeMutablePointer<sha256_ctx>  // initialised again for each digest
    private var buffer: UnsafeMutableRawBufferPointer?  // for `hash`, made on its first call

    /// Makes the context every digest reuses.
    /// - Throws: never, since the context needs no more than memory; kept for callers that make one per run.
    package init() throws(ContainerError) {
        context = .allocate(capacity: 1)
        context.initialize(to: sha256_ctx())
    }

    deinit {
        buffer?.deallocate()
        context.deallocate()
    }

    /// Starts a new digest, dropping any unfinished one.
    package func begin() throws(ContainerError) {
        try Self.functions.get().initialize(context)
    }

    /// Adds `bytes` to the digest begun.
    package func update(_ bytes: UnsafeRawBufferPointer) throws(ContainerError) {
        guard let start = bytes.baseAddress, !bytes.isEmpty else { return }
        try Self.functions.get().update(context, bytes.count, start.assumingMemoryBound(to: UInt8.self))
    }

    /// The 32 bytes of the digest begun; `begin` again for the next.
    package func finish() throws(ContainerError) -> [UInt8] {
        let digest = try Self.functions.get().digest
        return [UInt8](unsafeUninitializedCapacity: Self.length) { out, count in
            digest(context, Self.length, out.baseAddress)
            count = Self.length
        }
    }

    /// The SHA-256 of the regular file `name` in `folder`, never following a symbolic link.
    /// `shown` names the file in messages.
    func hash(_ name: FileName, in folder: CInt, shown: String) throws(ContainerError) -> [UInt8] {
        let file: FileDescriptor
        do {
            file = FileDescriptor(owning: try system_openat(folder, name, [.noFollow, .nonBlocking]))
        } catch {
            throw error.failure("read", shown)
        }
        guard (try? file.fileStatus())?.kind == .regular else {
            throw ContainerError(.badData, "'\(shown)' is no longer a regular file")
        }
        return try hash(file.rawValue, from: 0, to: nil, shown: shown)
    }

    /// The SHA-256 of the bytes of the open file `fd` from `start` to `end` (its end when nil), read with
    /// `pread`, so the file's offset is left alone. `shown` names the file in messages.
    package func hash(_ fd: CInt, from start: Int64, to end: Int64?, shown: String) throws(ContainerError) -> [UInt8] {
        let buffer = self.buffer ?? .allocate(byteCount: Self.chunkSize, alignment: 4096)
        self.buffer = buffer
        try begin()
        var offset = start
        while end.map({ offset < $0 }) ?? true {
            let wanted = end.map { min(buffer.count, Int($0 - offset)) } ?? buffer.count
            let count: Int
            do {
                count = try system_pread(
                    fd, into: UnsafeMutableRawBufferPointer(rebasing: buffer[..<wanted]), at: offset)
            } catch {
                throw error.failure("read", shown)
            }
            if count == 0 { break }
            try update(UnsafeRawBufferPointer(rebasing: buffer[..<count]))
            offset += Int64(count)
        }
        return try finish()
    }

    /// Lowercase hex digits of `bytes`: how a digest is written.
    package static func hex(_ bytes: UnsafeRawBufferPointer) -> String {
        String(unsafeUninitializedCapacity: bytes.count * 2) { out in
            for (index, byte) in bytes.enumerated() {
                out[2 * index] = hexDigit(byte >> 4)
                out[2 * index + 1] = hexDigit(byte & 0x0F)
            }
            return bytes.count * 2
        }
    }

    /// Lowercase hex digits of `bytes`.
    package static func hex(_ bytes: [UInt8]) -> String {
        bytes.withUnsafeBytes { hex($0) }
    }

    private static func hexDigit(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + nibble - 10
    }
}
