import FoundationEssentials

/// One name in a folder, as the exact bytes Linux stores: any byte but `/` and NUL,
/// so names that are not valid UTF-8 survive every step unchanged.
public struct FileName: Hashable, Sendable, Comparable, CustomStringConvertible {
    /// The name's bytes: never empty, no `/` and no NUL.
    public let bytes: [UInt8]

    /// The longest name Linux allows (NAME_MAX).
    package static let maxLength = 255

    /// A name from raw bytes; nil for an empty name or one holding `/` or NUL.
    public init?(bytes: some Sequence<UInt8>) {
        let bytes = Array(bytes)
        guard !bytes.isEmpty, !bytes.contains(0x2F), !bytes.contains(0) else { return nil }
        self.bytes = bytes
    }

    /// A name from a string; nil for an empty name or one holding `/` or NUL.
    public init?(_ string: String) {
        self.init(bytes: Array(string.utf8))
    }

    /// The name as text; bytes that are not UTF-8 become U+FFFD.
    public var string: String { String(decoding: bytes, as: UTF8.self) }

    /// Whether the bytes are valid UTF-8, so `string` holds the name exactly.
    package var isValidUTF8: Bool { String(validating: bytes, as: UTF8.self) != nil }

    /// The name as text, as `string` gives it.
    public var description: String { string }

    /// `.` or `..`: names that point at a folder, never at an item.
    package var isDotOrDotDot: Bool { bytes == [0x2E] || bytes == [0x2E, 0x2E] }

    /// Names that begin with `.` are in-progress staging, ignored by the watcher.
    public var isHidden: Bool { bytes.first == 0x2E }

    /// Whether this is a name the client of a filesystem of `f_type` `type` made for a file removed while open:
    /// on NFS, `.nfs` and 16 or more hex digits (its silly rename); on FUSE, `.fuse_hidden` and hex digits. The
    /// client removes it when the file is closed, and every walk leaves it alone; on any other filesystem such a name
    /// is a user's like any other (ARCHITECTURE.md, "Network and FUSE filesystems").
    package func isClientLeftover(onFilesystem type: Int64) -> Bool {
        func hexDigits(after prefix: String, atLeast count: Int) -> Bool {
            guard bytes.starts(with: prefix.utf8) else { return false }
            let rest = bytes.dropFirst(prefix.utf8.count)
            return rest.count >= count && rest.allSatisfy { Character(Unicode.Scalar($0)).isHexDigit }
        }
        switch type {
        case Filesystem.nfsType: return hexDigits(after: ".nfs", atLeast: 16)
        case Filesystem.fuseType: return hexDigits(after: ".fuse_hidden", atLeast: 8)
        default: return false
        }
    }

    /// The name split at its last `.`, where that `.` is not the first byte: ("report", ".pdf").
    package var stemAndExtension: (stem: [UInt8], ext: [UInt8]) {
        if let dot = bytes.lastIndex(of: 0x2E), dot > 0 {
            return (Array(bytes[..<dot]), Array(bytes[dot...]))
        }
        return (bytes, [])
    }

    /// The bytes hashed at once, not one by one.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(bytes.count)
        bytes.withUnsafeBytes { hasher.combine(bytes: $0) }
    }

    /// Byte order, as `ls` sorts in the C locale.
    public static func < (lhs: FileName, rhs: FileName) -> Bool {
        lhs.bytes.lexicographicallyPrecedes(rhs.bytes)
    }
}

extension Array where Element == UInt8 {
    /// Calls `body` with the bytes as a NUL-terminated C string, copied to the stack for a name's length.
    package func withCPath<R, E: Error>(_ body: (UnsafePointer<CChar>) throws(E) -> R) throws(E) -> R {
        try withUnsafeTemporaryAllocation(of: UInt8.self, capacity: count + 1) { terminated throws(E) in
            _ = terminated.initialize(fromContentsOf: self)
            terminated[count] = 0
            return try body(
                UnsafeRawPointer(terminated.baseAddress.unsafelyUnwrapped).assumingMemoryBound(to: CChar.self))
        }
    }
}

/// Anything that can be passed to a system call as a path. It hands over its bytes, not a closure's generic result:
/// a call through the protocol, where the caller is not specialized (another module's), then instantiates no generic
/// type's metadata at run time, as wrapping a typed error in a `Result` did at every call.
public protocol CStringConvertible {
    /// The bytes of the path, without a terminating NUL.
    var pathBytes: [UInt8] { get }
}

extension FileName: CStringConvertible {
    /// The name's bytes.
    public var pathBytes: [UInt8] { bytes }
}

extension Array: CStringConvertible where Element == UInt8 {
    /// The bytes themselves.
    public var pathBytes: [UInt8] { self }
}

extension String: CStringConvertible {
    /// The UTF-8 up to a NUL it holds, where a C string of it would end.
    public var pathBytes: [UInt8] { Array(utf8.prefix { $0 != 0 }) }
}

extension FileName {
    /// A copy of `bytes` cut to at most `limit` bytes without splitting a UTF-8 sequence.
    package static func truncated(_ bytes: [UInt8], toAtMost limit: Int) -> [UInt8] {
        guard bytes.count > limit else { return bytes }
        var end = Swift.max(limit, 0)
        // Step back over continuation bytes (10xxxxxx) so a character is never cut in half.
        while end > 0 && bytes[end] & 0xC0 == 0x80 { end -= 1 }
        // Back at 0: the first character does not fit (keep nothing), or the bytes are not UTF-8 (cut at the limit).
        if end == 0 && bytes[0] & 0xC0 == 0x80 { end = Swift.max(limit, 0) }
        return Array(bytes[..<end])
    }
}
