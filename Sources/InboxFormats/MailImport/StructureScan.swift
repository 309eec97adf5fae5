import AppContainer
import InboxKit

/// A first pass over a message that follows its MIME structure as GMime's parser will (header blocks, boundaries,
/// forwarded messages) without building anything, so a message past a limit is refused before GMime holds a single
/// part in memory: 200,000 empty parts cost GMime about 270 MB (ARCHITECTURE.md, "Mail import"). Each header
/// block's Content-Type is read by GMime's own parser (`PartKind`), so the scan follows the type and boundary GMime
/// will follow however they are spelled. It also finds the multiparts' preambles and epilogues, which GMime would
/// hold in memory: the parse reads the message without them (`kept`).
struct StructureScan {
    private struct OpenMultipart {
        let delimiter: [UInt8]  // "--" + boundary
        let depth: Int
        let isDigest: Bool
    }

    private enum State {
        case headers(depth: Int, inDigest: Bool)
        /// A leaf's content, or with `face` a multipart's preamble or epilogue.
        case body(face: Bool)
    }

    /// Which header a field is, by its name as GMime reads names.
    private enum Field {
        case contentType
        case transferEncoding
        case other
    }

    private let fd: CInt
    private let limits: MailLimits
    private let reading = ContentTypeReading()
    private var state = State.headers(depth: 0, inDigest: false)
    private var open: [OpenMultipart] = []
    private var firstLine = true
    private(set) var parts = 1
    private(set) var deepest = 0
    private var headerBytes = 0
    private var blockBytes = 0
    /// The file offset of the line being read.
    private var offset: Int64
    private let end: Int64?
    /// The field being read: what it is and where it starts.
    private var field: (kind: Field, start: Int64) = (.other, 0)
    /// The block's last Content-Type field and first Content-Transfer-Encoding field, as GMime picks them.
    private var contentType: Range<Int64>?
    private var transferEncoding: Range<Int64>?
    /// The file without the preambles and epilogues; `keptStart` is where the range being kept began.
    private(set) var kept: [Range<Int64>] = []
    private var keptStart: Int64

    /// The longest boundary followed; a message with a longer one is refused (RFC 2046 allows 70 bytes).
    static let boundaryLimit = LineReader.headLimit - 8

    private init(fd: CInt, start: Int64, end: Int64?, limits: MailLimits) {
        self.fd = fd
        self.limits = limits
        offset = start
        keptStart = start
        self.end = end
    }

    /// Scans the message in `range` of the file open at `fd`; throws `.notAMessage` or `.refused`, else returns
    /// its parts, its depth and the byte ranges for GMime to read.
    static func check(fd: CInt, start: Int64, end: Int64?, limits: MailLimits) throws(MailError) -> (
        parts: Int, depth: Int, kept: [Range<Int64>]
    ) {
        var scan = StructureScan(fd: fd, start: start, end: end, limits: limits)
        try LineReader(fd: fd, start: start, end: end).forEachLine { (line) throws(MailError) in
            try scan.take(line)
            scan.offset += Int64(line.length)
            return true
        }
        if scan.firstLine { throw .notAMessage("the file is empty") }
        if scan.keptStart < scan.offset { scan.kept.append(scan.keptStart..<scan.offset) }
        return (scan.parts, scan.deepest, scan.kept)
    }

    private mutating func take(_ line: ScannedLine) throws(MailError) {
        switch state {
        case .headers(let depth, let inDigest):
            try takeHeaderLine(line, depth: depth, inDigest: inDigest)
        case .body(let face):
            let isDelimiter = line.head.count >= 2 && line.head[0] == 0x2D && line.head[1] == 0x2D
            if isDelimiter, try takeBoundary(line) { return }
            if face { skip(line) }
        }
    }

    /// Leaves a preamble or epilogue line out of what GMime reads.
    private mutating func skip(_ line: ScannedLine) {
        if keptStart < offset { kept.append(keptStart..<offset) }
        keptStart = offset + Int64(line.length)
    }

    private mutating func takeHeaderLine(_ line: ScannedLine, depth: Int, inDigest: Bool) throws(MailError) {
        headerBytes += line.length
        blockBytes += line.length
        if blockBytes > limits.maxHeaderBlockBytes {
            throw .refused("a header block over \(MailLimits.size(limits.maxHeaderBlockBytes))")
        }
        if headerBytes > limits.maxHeaderBytes {
            throw .refused("headers over \(MailLimits.size(limits.maxHeaderBytes)) in all")
        }
        var bytes = line.head
        if let last = bytes.last, last == 0x0D { bytes = UnsafeRawBufferPointer(rebasing: bytes.dropLast()) }
        if firstLine {
            firstLine = false
            guard Self.isHeaderField(bytes) else { throw .notAMessage("no header field before the first blank line") }
        }
        if bytes.isEmpty && !line.truncated {
            endField()
            try endHeaders(depth: depth, inDigest: inDigest)
        } else if bytes[0] == 0x20 || bytes[0] == 0x09 {
            return  // a folded line of the field being read
        } else if try takeBoundary(line) {
            return
        } else {
            endField()
            field = (Self.field(named: line.head, truncated: line.truncated), offset)
        }
    }

    /// The field read so far is complete: keeps it when it is one GMime decides the part's type by.
    private mutating func endField() {
        switch field.kind {
        case .contentType: contentType = field.start..<offset
        case .transferEncoding: if transferEncoding == nil { transferEncoding = field.start..<offset }
        case .other: break
        }
        field = (.other, offset)
    }

    /// Forgets the header block read so far (a delimiter may end one early, as it does for GMime).
    private mutating func startBlock() {
        field = (.other, offset)
        contentType = nil
        transferEncoding = nil
        blockBytes = 0
    }

    /// The kind of field a line starts, by the name before its `:` (or the whole head of a line too long to show it);
    /// `PartKind` checks the name again on the whole field as GMime does.
    private static func field(named head: UnsafeRawBufferPointer, truncated: Bool) -> Field {
        guard let colon = head.firstIndex(of: UInt8(ascii: ":")) ?? (truncated ? head.count : nil) else {
            return .other
        }
        var name = head[..<colon]
        while let last = name.last, last == 0x20 || last == 0x09 { name = name.dropLast() }
        let lowered = name.map(MimeParameters.lowercased)
        if lowered.elementsEqual("content-type".utf8) { return .contentType }
        if lowered.elementsEqual("content-transfer-encoding".utf8) { return .transferEncoding }
        return .other
    }

    /// The end of a header block: a multipart opens its boundary, a forwarded message starts its own headers.
    private mutating func endHeaders(depth: Int, inDigest: Bool) throws(MailError) {
        let kind = reading.kind(
            contentType: try fieldBytes(contentType), transferEncoding: try fieldBytes(transferEncoding),
            inDigest: inDigest)
        startBlock()
        switch kind {
        case .leaf:
            state = .body(face: false)
        case .message:
            try startPart(depth: depth + 1, inDigest: false)
        case .multipart(let boundary, let isDigest):
            state = .body(face: true)
            guard let boundary else { return }  // GMime reads all of it as the preamble
            guard boundary.count <= Self.boundaryLimit else {
                throw .refused("a boundary longer than \(Self.boundaryLimit) bytes")
            }
            open.append(OpenMultipart(delimiter: Array("--".utf8) + boundary, depth: depth, isDigest: isDigest))
        }
    }

    /// The bytes of a field in the file (at most a header block's limit).
    private func fieldBytes(_ range: Range<Int64>?) throws(MailError) -> [UInt8]? {
        guard let range else { return nil }
        let bytes = try Self.bytes(fd, range)
        guard bytes.count == range.count else {
            throw .io(ContainerError(.failure, "the message changed while it was read"))
        }
        return bytes
    }

    /// The bytes of `range` of the file open at `fd`: fewer where the file ends first.
    static func bytes(_ fd: CInt, _ range: Range<Int64>) throws(MailError) -> [UInt8] {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: range.count, alignment: 1)
        defer { buffer.deallocate() }
        var done = 0
        while done < buffer.count {
            let count: Int
            do {
                count = try system_pread(
                    fd, into: UnsafeMutableRawBufferPointer(rebasing: buffer[done...]),
                    at: range.lowerBound + Int64(done))
            } catch {
                throw .io(error.failure("read", "the message"))
            }
            if count == 0 { break }
            done += count
        }
        return Array(buffer[..<done])
    }

    /// Whether `line` is a delimiter of an open multipart: opens its next part, or closes it and those inside.
    @discardableResult
    private mutating func takeBoundary(_ line: ScannedLine) throws(MailError) -> Bool {
        guard !open.isEmpty, !line.truncated || line.restIsWhitespace else { return false }
        var text = line.head[...]
        while let last = text.last, LineReader.isWhitespace(last) { text = text.dropLast() }
        for level in open.indices.reversed() {
            let delimiter = open[level].delimiter
            guard text.starts(with: delimiter) else { continue }
            let rest = text.dropFirst(delimiter.count)
            if rest.elementsEqual([0x2D, 0x2D]) {
                open.removeSubrange(level...)
                startBlock()
                state = .body(face: true)
                return true
            }
            if rest.isEmpty {
                let multipart = open[level]
                open.removeSubrange((level + 1)...)
                startBlock()
                try startPart(depth: multipart.depth + 1, inDigest: multipart.isDigest)
                return true
            }
        }
        return false
    }

    private mutating func startPart(depth: Int, inDigest: Bool) throws(MailError) {
        parts += 1
        if parts > limits.maxParts { throw .refused("more than \(MailLimits.count(limits.maxParts)) parts") }
        if depth > limits.maxDepth { throw .refused("MIME parts nested deeper than \(limits.maxDepth) levels") }
        deepest = Swift.max(deepest, depth)
        state = .headers(depth: depth, inDigest: inDigest)
    }

    /// A header field: a name of printable ASCII but `:`, maybe spaces, then `:`.
    static func isHeaderField(_ line: UnsafeRawBufferPointer) -> Bool {
        guard let colon = line.firstIndex(of: UInt8(ascii: ":")), colon > 0 else { return false }
        var name = line[..<colon]
        while let last = name.last, last == 0x20 || last == 0x09 { name = name.dropLast() }
        return !name.isEmpty && name.allSatisfy { $0 > 0x20 && $0 < 0x7F }
    }
}
