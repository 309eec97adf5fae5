import AppContainer
import InboxKit

/// A first pass over a message that follows its MIME structure as GMime's parser will (header blocks, boundaries,
/// forwarded messages) without building anything, so a message past a limit is refused before GMime holds a single
/// part in memory: 200,000 empty parts cost GMime about 270 MB (ARCHITECTURE.md, "Mail import"). Each header
/// block's Content-Type is read by GMime's own parser (`PartKind`), so the scan follows the type and boundary GMime
/// will follow however they are spelled. It also finds what GMime would hold in memory and the import never reads:
/// the multiparts' preambles and epilogues, and every header field but the first and last of those the import reads
/// (`readFields`); and what GMime would only scan for boundaries: the lines of a large leaf's content but its first,
/// its last and any that starts with `-` (`elided`). The parse reads the message without them (`kept`).
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

    /// The header fields GMime is given, the first and the last of each name: those that decide a part's type and
    /// name, and in the message's own header block those the import records (Message-ID) and reports (the
    /// headline: From, Subject, Date).
    private enum Field: Int, CaseIterable {
        case contentType, contentTransferEncoding, contentDisposition, messageID, from, subject, date

        /// Each field's name, lowercased, in the order of the cases.
        static let names = [
            "content-type", "content-transfer-encoding", "content-disposition", "message-id", "from", "subject",
            "date",
        ].map { Array($0.utf8) }

        /// Whether a part's header block (not the message's own) gives GMime this field.
        var isPartField: Bool { rawValue <= Field.contentDisposition.rawValue }
        /// Whether this is a field of the headline.
        var isHeadline: Bool { rawValue >= Field.from.rawValue }

        /// The field a name is, case-insensitively; nil for one GMime is not given.
        init?(name: UnsafeRawBufferPointer.SubSequence) {
            guard
                let index = Field.names.firstIndex(where: { wanted in
                    wanted.count == name.count && zip(wanted, name).allSatisfy { $0 == MimeParameters.lowercased($1) }
                })
            else { return nil }
            self.init(rawValue: index)
        }
    }

    private let fd: CInt
    private let limits: MailLimits
    /// Whether GMime is given the message's headline.
    private let headline: Bool
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
    /// The field being read, when GMime is given it, and where it starts.
    private var field: (name: Field?, start: Int64) = (nil, 0)
    /// The bytes of the field being read while they are few enough to keep (nil past that, or for a long line).
    private var fieldText: [UInt8]?
    /// The bytes of the fields of the names GMime is given, by where each starts in the file: the parse looks up its
    /// fields here rather than reading the file again (at most `keptFieldBytes` in all).
    private(set) var fields: [Int64: [UInt8]] = [:]
    private var fieldsBytes = 0
    static let keptFieldBytes = 64 * 1024
    /// The longest field kept.
    static let keptFieldLength = 4096
    /// Where the header block being read starts, and the first and last field of each name GMime is given (indexed
    /// by `Field`).
    private var blockStart: Int64
    private var readFields = [(first: Range<Int64>, last: Range<Int64>)?](repeating: nil, count: Field.allCases.count)
    private var isMessageBlock = true
    /// The file without the preambles and epilogues; `keptStart` is where the range being kept began.
    private(set) var kept: [Range<Int64>] = []
    private var keptStart: Int64
    /// The runs of leaf content left out of `kept`; each lies between two ranges of it.
    private(set) var elided: [Range<Int64>] = []
    /// The lines read of the leaf content being read, and the run of them GMime need not see: where it starts, and
    /// where its last line (which GMime is given) starts.
    private var leafLines = 0
    private var elidable: (start: Int64, lastLine: Int64)?

    /// The least run of a leaf's content worth leaving out (each costs GMime a stream).
    static let elisionMinimum: Int64 = 2048
    /// The most runs left out of a message: each is a range of GMime's view, a stream and its bookkeeping (a few
    /// hundred bytes), so a message of dashed lines never costs more memory than it saves parsing.
    static let elisionLimit = 1024

    /// The longest boundary followed; a message with a longer one is refused (RFC 2046 allows 70 bytes).
    static let boundaryLimit = LineReader.headLimit - 8

    private init(fd: CInt, start: Int64, end: Int64?, limits: MailLimits, headline: Bool) {
        self.fd = fd
        self.limits = limits
        self.headline = headline
        offset = start
        keptStart = start
        blockStart = start
        self.end = end
    }

    /// Scans the message in `range` of the file open at `fd`; throws `.notAMessage` or `.refused`, else returns
    /// the finished scan: the byte ranges for GMime to read (`kept`, with the headline's fields when `headline`),
    /// the runs of leaf content left out of them (`elided`) and the fields it read (`fields`).
    static func check(fd: CInt, start: Int64, end: Int64?, limits: MailLimits, headline: Bool = true) throws(MailError)
        -> StructureScan
    {
        var scan = StructureScan(fd: fd, start: start, end: end, limits: limits, headline: headline)
        try LineReader(fd: fd, start: start, end: end).forEachLine { (line) throws(MailError) in
            try scan.take(line)
            scan.offset += Int64(line.length)
            return true
        }
        if scan.firstLine { throw .notAMessage("the file is empty") }
        if case .headers = scan.state { scan.finishBlock() }  // the file ends inside a header block
        scan.elideRun()  // the file ends inside a leaf's content
        scan.keep(scan.keptStart..<scan.offset)
        return scan
    }

    private mutating func take(_ line: ScannedLine) throws(MailError) {
        switch state {
        case .headers(let depth, let inDigest):
            try takeHeaderLine(line, depth: depth, inDigest: inDigest)
        case .body(let face):
            if !face { takeLeafLine(line) }
            let isDelimiter = line.head.count >= 2 && line.head[0] == 0x2D && line.head[1] == 0x2D
            if isDelimiter, try takeBoundary(line) { return }
            if face { skip(line) }
        }
    }

    /// Notes a line of a leaf's content that GMime need not see: GMime only scans such a line for a boundary, which
    /// starts with `--`, and finds where the content starts and ends by its first line and its last.
    private mutating func takeLeafLine(_ line: ScannedLine) {
        defer { leafLines += 1 }
        guard leafLines > 0, line.head.first != UInt8(ascii: "-") else {
            elideRun()
            return
        }
        elidable = (elidable?.start ?? offset, offset)
    }

    /// Leaves the run of leaf content noted out of what GMime reads, but its last line, if it is large enough.
    private mutating func elideRun() {
        defer { elidable = nil }
        guard let run = elidable, run.lastLine - run.start >= Self.elisionMinimum, elided.count < Self.elisionLimit
        else { return }
        keep(keptStart..<run.start)
        keptStart = run.lastLine
        elided.append(run.start..<run.lastLine)
    }

    /// Leaves a preamble or epilogue line out of what GMime reads.
    private mutating func skip(_ line: ScannedLine) {
        keep(keptStart..<offset)
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
            try endHeaders(depth: depth, inDigest: inDigest, after: line)
        } else if bytes[0] == 0x20 || bytes[0] == 0x09 {
            fieldText = fieldText.flatMap { Self.appending(line, to: $0) }  // a folded line of the field being read
        } else if try takeBoundary(line) {
            return
        } else {
            endField()
            let name = Self.fieldName(line.head, truncated: line.truncated).flatMap(Field.init(name:))
            field = (
                name.flatMap { $0.isPartField || (isMessageBlock && (headline || !$0.isHeadline)) ? $0 : nil }, offset
            )
            fieldText = field.name == nil ? nil : Self.appending(line, to: [])
        }
    }

    /// `text` and the line's bytes after it (its `\n` too), if the line is whole and the field stays short.
    private static func appending(_ line: ScannedLine, to text: [UInt8]) -> [UInt8]? {
        guard !line.truncated, text.count + line.length <= keptFieldLength else { return nil }
        var text = text
        text += line.head
        if line.length > line.head.count { text.append(0x0A) }
        return text
    }

    /// The field read so far is complete: noted when GMime is to be given it.
    private mutating func endField() {
        if let name = field.name {
            let range = field.start..<offset
            readFields[name.rawValue] = (readFields[name.rawValue]?.first ?? range, range)
            if let text = fieldText, text.count == range.count, fieldsBytes + text.count <= Self.keptFieldBytes {
                fields[range.lowerBound] = text
                fieldsBytes += text.count
            }
        }
        field = (nil, offset)
        fieldText = nil
    }

    /// The header block read so far is complete (a blank line, a delimiter, or the end of the file ends it): the
    /// view keeps the fields noted and leaves out the rest of the block.
    private mutating func finishBlock() {
        endField()
        keep(keptStart..<blockStart)
        var ranges: [Range<Int64>] = []
        for case (let first, let last)? in readFields { ranges += first == last ? [first] : [first, last] }
        for range in ranges.sorted(by: { $0.lowerBound < $1.lowerBound }) { keep(range) }
        keptStart = offset
        for index in readFields.indices { readFields[index] = nil }
        blockBytes = 0
        isMessageBlock = false
    }

    /// Adds `range` to what GMime reads, joined to the range before it when they touch (fewer streams to read).
    private mutating func keep(_ range: Range<Int64>) {
        guard !range.isEmpty else { return }
        if let last = kept.last, last.upperBound == range.lowerBound {
            kept[kept.count - 1] = last.lowerBound..<range.upperBound
        } else {
            kept.append(range)
        }
    }

    /// A field's name as GMime reads names (before the `:`, without the blanks before it), from the head of its
    /// first line (or the whole head of a line too long to show the `:`); `ContentTypeReading` checks the name again
    /// on the whole field.
    private static func fieldName(_ head: UnsafeRawBufferPointer, truncated: Bool)
        -> UnsafeRawBufferPointer.SubSequence?
    {
        guard let colon = head.firstIndex(of: UInt8(ascii: ":")) ?? (truncated ? head.count : nil) else { return nil }
        var name = head[..<colon]
        while let last = name.last, last == 0x20 || last == 0x09 { name = name.dropLast() }
        return name
    }

    /// The end of a header block at its blank line: a multipart opens its boundary, a forwarded message starts its
    /// own headers.
    private mutating func endHeaders(depth: Int, inDigest: Bool, after line: ScannedLine) throws(MailError) {
        endField()
        let kind = reading.kind(
            contentType: try fieldBytes(readFields[Field.contentType.rawValue]?.last),
            transferEncoding: try fieldBytes(readFields[Field.contentTransferEncoding.rawValue]?.first),
            inDigest: inDigest)
        finishBlock()
        switch kind {
        case .leaf:
            state = .body(face: false)
            leafLines = 0
        case .message:
            try startPart(depth: depth + 1, inDigest: false, at: offset + Int64(line.length))
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
        if let text = fields[range.lowerBound], text.count == range.count { return text }
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
            let isClose = rest.elementsEqual([0x2D, 0x2D])
            guard isClose || rest.isEmpty else { continue }
            if case .headers = state { finishBlock() }  // a delimiter ends a header block early, as for GMime
            if isClose {
                open.removeSubrange(level...)
                state = .body(face: true)
            } else {
                let multipart = open[level]
                open.removeSubrange((level + 1)...)
                try startPart(depth: multipart.depth + 1, inDigest: multipart.isDigest, at: offset + Int64(line.length))
            }
            return true
        }
        return false
    }

    private mutating func startPart(depth: Int, inDigest: Bool, at start: Int64) throws(MailError) {
        parts += 1
        if parts > limits.maxParts { throw .refused("more than \(MailLimits.count(limits.maxParts)) parts") }
        if depth > limits.maxDepth { throw .refused("MIME parts nested deeper than \(limits.maxDepth) levels") }
        deepest = Swift.max(deepest, depth)
        state = .headers(depth: depth, inDigest: inDigest)
        blockStart = start
    }

    /// A header field: a name of printable ASCII but `:`, maybe spaces, then `:`.
    static func isHeaderField(_ line: UnsafeRawBufferPointer) -> Bool {
        guard let colon = line.firstIndex(of: UInt8(ascii: ":")), colon > 0 else { return false }
        var name = line[..<colon]
        while let last = name.last, last == 0x20 || last == 0x09 { name = name.dropLast() }
        return !name.isEmpty && name.allSatisfy { $0 > 0x20 && $0 < 0x7F }
    }
}
