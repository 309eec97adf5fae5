import CCrypto
import Glibc

/// SHA-256 through libcrypto, with one context reused for every digest (ARCHITECTURE.md, "Dependencies", "The hot
/// path"): `begin`, `update` as the bytes come, `finish`. `hash(_:in:shown:)` does all three for a file, with one
/// reused read buffer.
///
/// Not thread-safe: make one per thread or walk.
public final class SHA256Digest {
    /// Bytes asked of each `pread` by `hash(_:in:shown:)`.
    public static let chunkSize = 256 * 1024
    /// The length of a digest.
    public static let length = 32

    private let digest: OpaquePointer  // EVP_MD for SHA-256
    private let context: OpaquePointer  // EVP_MD_CTX, initialised again for each digest
    private var buffer: UnsafeMutableRawBufferPointer?  // for `hash`, made on its first call

    /// Fetches libcrypto's SHA-256 and makes the context every digest reuses.
    /// - Throws: `.failure` when libcrypto has no SHA-256 or cannot make a context.
    public init() throws(ContainerError) {
        guard let digest = EVP_MD_fetch(nil, "SHA256", nil) else {
            throw ContainerError(.failure, "libcrypto has no SHA-256 (EVP_MD_fetch failed)")
        }
        guard let context = EVP_MD_CTX_new() else {
            EVP_MD_free(digest)
            throw ContainerError(.failure, "cannot make a SHA-256 context (EVP_MD_CTX_new failed)")
        }
        self.digest = digest
        self.context = context
    }

    deinit {
        buffer?.deallocate()
        EVP_MD_CTX_free(context)
        EVP_MD_free(digest)
    }

    /// Starts a new digest, dropping any unfinished one.
    public func begin() throws(ContainerError) {
        guard EVP_DigestInit_ex(context, digest, nil) == 1 else { throw Self.failure("EVP_DigestInit_ex") }
    }

    /// Adds `bytes` to the digest begun.
    public func update(_ bytes: UnsafeRawBufferPointer) throws(ContainerError) {
        guard EVP_DigestUpdate(context, bytes.baseAddress, bytes.count) == 1 else {
            throw Self.failure("EVP_DigestUpdate")
        }
    }

    /// The 32 bytes of the digest begun; `begin` again for the next.
    public func finish() throws(ContainerError) -> [UInt8] {
        var result = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: CUnsignedInt = 0
        guard EVP_DigestFinal_ex(context, &result, &length) == 1, length == Self.length else {
            throw Self.failure("EVP_DigestFinal_ex")
        }
        result.removeLast(result.count - Self.length)
        return result
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
    public func hash(_ fd: CInt, from start: Int64, to end: Int64?, shown: String) throws(ContainerError) -> [UInt8] {
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
    public static func hex(_ bytes: UnsafeRawBufferPointer) -> String {
        String(unsafeUninitializedCapacity: bytes.count * 2) { out in
            for (index, byte) in bytes.enumerated() {
                out[2 * index] = hexDigit(byte >> 4)
                out[2 * index + 1] = hexDigit(byte & 0x0F)
            }
            return bytes.count * 2
        }
    }

    /// Lowercase hex digits of `bytes`.
    public static func hex(_ bytes: [UInt8]) -> String {
        bytes.withUnsafeBytes { hex($0) }
    }

    private static func hexDigit(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + nibble - 10
    }

    private static func failure(_ function: String) -> ContainerError {
        ContainerError(.failure, "cannot compute a SHA-256: \(function) failed in libcrypto")
    }
}
