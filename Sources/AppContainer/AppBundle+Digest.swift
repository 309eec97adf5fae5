import CCrypto
import Glibc

/// SHA-256 through libcrypto, with one context and one read buffer reused for every file (DESIGN §10, §11).
/// Not thread-safe: make one per walk.
final class SHA256Digest {
    private static let chunkSize = 256 * 1024

    private let digest: OpaquePointer  // EVP_MD for SHA-256
    private let context: OpaquePointer  // EVP_MD_CTX, initialised again for each file
    private let buffer: UnsafeMutableRawBufferPointer

    init() throws(ContainerError) {
        guard let digest = EVP_MD_fetch(nil, "SHA256", nil) else {
            throw ContainerError(.failure, "libcrypto has no SHA-256 (EVP_MD_fetch failed)")
        }
        guard let context = EVP_MD_CTX_new() else {
            EVP_MD_free(digest)
            throw ContainerError(.failure, "cannot make a SHA-256 context (EVP_MD_CTX_new failed)")
        }
        self.digest = digest
        self.context = context
        buffer = .allocate(byteCount: Self.chunkSize, alignment: 4096)
    }

    deinit {
        buffer.deallocate()
        EVP_MD_CTX_free(context)
        EVP_MD_free(digest)
    }

    /// The 32-byte SHA-256 of the regular file `name` in `folder`, never following a symbolic link.
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
        guard EVP_DigestInit_ex(context, digest, nil) == 1 else { throw Self.failure("EVP_DigestInit_ex") }
        var offset: Int64 = 0
        while true {
            let count: Int
            do {
                count = try system_pread(file.rawValue, into: buffer, at: offset)
            } catch {
                throw error.failure("read", shown)
            }
            if count == 0 { break }
            guard EVP_DigestUpdate(context, buffer.baseAddress, count) == 1 else {
                throw Self.failure("EVP_DigestUpdate")
            }
            offset += Int64(count)
        }
        var result = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: CUnsignedInt = 0
        guard EVP_DigestFinal_ex(context, &result, &length) == 1, length == 32 else {
            throw Self.failure("EVP_DigestFinal_ex")
        }
        return Array(result[..<32])
    }

    private static func failure(_ function: String) -> ContainerError {
        ContainerError(.failure, "cannot compute a SHA-256: \(function) failed in libcrypto")
    }
}
