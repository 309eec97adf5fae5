import AppContainer
import CGMime
import Glibc
import InboxKit

/// Where a part's still-encoded content lies in the message file, and how it is encoded.
struct PartContent {
    enum Encoding {
        case identity  // 7bit, 8bit, binary, or one not known: delivered as it is, as Python does
        case base64
        case quotedPrintable
        case uuencode

        /// From a Content-Transfer-Encoding value, as Python's `get_payload(decode=True)` names them.
        init(header: String?) {
            switch header.map({ MailMessage.trimmed($0).lowercased() }) {
            case "base64": self = .base64
            case "quoted-printable": self = .quotedPrintable
            case "x-uuencode", "uuencode", "uue", "x-uue": self = .uuencode
            default: self = .identity
            }
        }
    }

    let start: Int64
    /// nil: to the end of the file.
    let end: Int64?
    let encoding: Encoding
}

/// Receives decoded bytes (an attachment, or a winmail.dat for libytnef to read).
protocol DecodedSink {
    mutating func write(_ bytes: UnsafeRawBufferPointer) throws(MailError)
}

/// Writes to an open descriptor, stopping with `.refused` (naming the limit by `limitText`) once `limit` bytes would
/// be passed; adds what it writes to `digest` when there is one.
struct DescriptorSink: DecodedSink {
    let fd: CInt
    let limit: Int64
    let limitText: String
    let digest: SHA256Digest?
    private(set) var written: Int64 = 0

    init(fd: CInt, limit: Int64, limitText: String, digest: SHA256Digest? = nil) {
        self.fd = fd
        self.limit = limit
        self.limitText = limitText
        self.digest = digest
    }

    mutating func write(_ bytes: UnsafeRawBufferPointer) throws(MailError) {
        guard Int64(bytes.count) <= limit - written else { throw .refused("attachments over \(limitText)") }
        var offset = 0
        while offset < bytes.count {
            do {
                offset += try system_write(fd, UnsafeRawBufferPointer(rebasing: bytes[offset...]))
            } catch {
                throw .io(error.failure("write", "an attachment"))
            }
        }
        do throws(ContainerError) {
            try digest?.update(bytes)
        } catch {
            throw .io(error)
        }
        written += Int64(bytes.count)
    }
}

extension PartContent {
    /// Bytes read from the file at a time; what they decode to is written before the next read.
    static let chunkSize = 256 * 1024

    /// Decodes the content into `sink`, a chunk at a time.
    func decode(from fd: CInt, into sink: inout some DecodedSink) throws(MailError) {
        switch encoding {
        case .identity: try run(Optional<Base64Decoder>.none, fd, &sink)
        case .base64: try run(Base64Decoder(), fd, &sink)
        case .quotedPrintable: try run(QuotedPrintableDecoder(), fd, &sink)
        case .uuencode:
            // No `begin` line: not uuencoded after all, so delivered as it is (Python returns it undecoded too).
            if try !run(UUDecoder(), fd, &sink) { try run(Optional<Base64Decoder>.none, fd, &sink) }
        }
    }

    /// Returns false when a uuencode decoder found no `begin` (and so wrote nothing).
    @discardableResult
    private func run<D: TransferDecoder>(_ decoder: D?, _ fd: CInt, _ sink: inout some DecodedSink) throws(MailError)
        -> Bool
    {
        var decoder = decoder
        // No larger than the part: most are a few KiB, and a 256 KiB buffer each would churn the heap.
        let size = end.map { Int(Swift.min(Int64(Self.chunkSize), Swift.max($0 - start, 1))) } ?? Self.chunkSize
        let input = UnsafeMutableRawBufferPointer.allocate(byteCount: size, alignment: 16)
        defer { input.deallocate() }
        var output: [UInt8] = []
        output.reserveCapacity(size)
        var offset = start
        while true {
            var want = size
            if let end { want = Int(Swift.min(Int64(want), Swift.max(end - offset, 0))) }
            if want == 0 { break }
            let count: Int
            do {
                count = try system_pread(fd, into: UnsafeMutableRawBufferPointer(rebasing: input[..<want]), at: offset)
            } catch {
                throw .io(error.failure("read", "the message"))
            }
            if count == 0 { break }
            offset += Int64(count)
            let chunk = UnsafeRawBufferPointer(rebasing: input[..<count])
            guard decoder != nil else {
                try sink.write(chunk)
                continue
            }
            output.removeAll(keepingCapacity: true)
            decoder?.decode(chunk, into: &output)
            try output.withBytes { (bytes) throws(MailError) in try sink.write(bytes) }
        }
        output.removeAll(keepingCapacity: true)
        decoder?.finish(into: &output)
        if let uu = decoder as? UUDecoder, !uu.foundBegin { return false }
        try output.withBytes { (bytes) throws(MailError) in try sink.write(bytes) }
        return true
    }
}

extension Array where Element == UInt8 {
    /// `withUnsafeBytes` for a body that throws `MailError` (`rethrows` would widen it to `any Error`).
    func withBytes(_ body: (UnsafeRawBufferPointer) throws(MailError) -> Void) throws(MailError) {
        try withUnsafeBytes { buffer in Result { () throws(MailError) in try body(buffer) } }.get()
    }
}
