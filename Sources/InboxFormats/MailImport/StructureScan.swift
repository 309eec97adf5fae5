import InboxKit

/// A first pass over a message that follows its MIME structure the way GMime's parser will (header blocks,
/// boundaries, forwarded messages) without building anything, so a message past a limit is refused before GMime
/// holds a single part in memory: 200,000 empty parts cost GMime about 270 MB (ARCHITECTURE.md, "Mail import").
struct StructureScan {
    private struct OpenMultipart {
        let delimiter: [UInt8]  // "--" + boundary
        let depth: Int
    }

    private enum State {
        case headers(depth: Int)
        case body
    }

    private let limits: MailLimits
    private var state = State.headers(depth: 0)
    private var open: [OpenMultipart] = []
    private var contentType: [UInt8] = []
    private var inContentType = false
    private var firstLine = true
    private(set) var parts = 1
    private(set) var deepest = 0
    private var headerBytes = 0

    /// The longest Content-Type value kept; the rest of a longer one is ignored.
    private static let contentTypeLimit = 64 * 1024
    /// The longest boundary followed; a message with a longer one is refused (RFC 2046 allows 70 bytes).
    static let boundaryLimit = LineReader.headLimit - 8

    private init(limits: MailLimits) {
        self.limits = limits
    }

    /// Scans the message in `reader`; throws `.notAMessage` or `.refused`, else returns its parts and depth.
    static func check(_ reader: LineReader, limits: MailLimits) throws(MailError) -> (parts: Int, depth: Int) {
        var scan = StructureScan(limits: limits)
        try reader.forEachLine { (line) throws(MailError) in
            try scan.take(line)
            return true
        }
        if scan.firstLine { throw .notAMessage("the file is empty") }
        return (scan.parts, scan.deepest)
    }

    private mutating func take(_ line: ScannedLine) throws(MailError) {
        if case .headers(let depth) = state {
            try takeHeaderLine(line, depth: depth)
        } else if line.head.count >= 2 && line.head[0] == 0x2D && line.head[1] == 0x2D {
            try takeBoundary(line)
        }
    }

    private mutating func takeHeaderLine(_ line: ScannedLine, depth: Int) throws(MailError) {
        headerBytes += line.length
        if headerBytes > limits.maxHeaderBytes {
            throw .refused("its headers take more than \(limits.maxHeaderBytes) bytes")
        }
        var bytes = line.head
        if let last = bytes.last, last == 0x0D { bytes = UnsafeRawBufferPointer(rebasing: bytes.dropLast()) }
        if firstLine {
            firstLine = false
            guard Self.isHeaderField(bytes) else { throw .notAMessage("no header field before the first blank line") }
        }
        if bytes.isEmpty && !line.truncated {
            try endHeaders(depth: depth)
        } else if bytes[0] == 0x20 || bytes[0] == 0x09 {
            if inContentType { appendContentType(bytes) }
        } else if try takeBoundary(line) {
            return
        } else if let colon = bytes.firstIndex(of: UInt8(ascii: ":")) {
            let name = bytes[..<colon].map(MimeParameters.lowercased).filter { !MimeParameters.isSpace($0) }
            inContentType = name == Array("content-type".utf8)
            if inContentType {
                contentType = []
                appendContentType(UnsafeRawBufferPointer(rebasing: bytes[(colon + 1)...]))
            }
        }
    }

    private mutating func appendContentType(_ bytes: UnsafeRawBufferPointer) {
        contentType += bytes.prefix(Swift.max(Self.contentTypeLimit - contentType.count, 0))
    }

    /// The end of a header block: a multipart opens its boundary, a forwarded message starts its own headers.
    private mutating func endHeaders(depth: Int) throws(MailError) {
        let (mediaType, parameters) = MimeParameters.parse(contentType)
        contentType = []
        inContentType = false
        state = .body
        if mediaType.starts(with: Array("multipart/".utf8)) {
            guard let boundary = MimeParameters.value(of: "boundary", in: parameters), !boundary.isEmpty else { return }
            guard boundary.count <= Self.boundaryLimit else {
                throw .refused("a boundary longer than \(Self.boundaryLimit) bytes")
            }
            open.append(OpenMultipart(delimiter: Array("--".utf8) + boundary, depth: depth))
        } else if Self.isForwardedMessage(mediaType) {
            try startPart(depth: depth + 1)
        }
    }

    /// GMime reads these `message/` types as a message of their own; the others are leaves.
    static func isForwardedMessage(_ mediaType: [UInt8]) -> Bool {
        guard mediaType.starts(with: Array("message/".utf8)) else { return false }
        let subtype = mediaType.dropFirst(8)
        return !["partial", "external-body", "delivery-status"].contains { subtype.elementsEqual($0.utf8) }
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
            if rest.isEmpty {
                let depth = open[level].depth
                open.removeSubrange((level + 1)...)
                try startPart(depth: depth + 1)
                return true
            }
            if rest.elementsEqual([0x2D, 0x2D]) {
                open.removeSubrange(level...)
                state = .body
                return true
            }
        }
        return false
    }

    private mutating func startPart(depth: Int) throws(MailError) {
        parts += 1
        if parts > limits.maxParts { throw .refused("more than \(limits.maxParts) MIME parts") }
        if depth > limits.maxDepth { throw .refused("MIME parts nested deeper than \(limits.maxDepth) levels") }
        deepest = Swift.max(deepest, depth)
        contentType = []
        inContentType = false
        state = .headers(depth: depth)
    }

    /// A header field: a name of printable ASCII but `:`, maybe spaces, then `:`.
    static func isHeaderField(_ line: UnsafeRawBufferPointer) -> Bool {
        guard let colon = line.firstIndex(of: UInt8(ascii: ":")), colon > 0 else { return false }
        var name = line[..<colon]
        while let last = name.last, last == 0x20 || last == 0x09 { name = name.dropLast() }
        return !name.isEmpty && name.allSatisfy { $0 > 0x20 && $0 < 0x7F }
    }
}
