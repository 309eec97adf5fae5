import AppContainer
import CGMime
import Glibc
import InboxKit

/// One mail message read with GMime, its parts' contents left on disk (ARCHITECTURE.md, "Mail import").
///
/// The structure scan refuses a message past its limits before GMime reads it; GMime then parses it over the
/// caller's descriptor (without the multiparts' preambles and epilogues, or the middle of large leaves' contents) with
/// a persistent stream, so a part's content is a byte range of the file, decoded only when an attachment is asked
/// for. Not thread-safe; the descriptor must stay open, and its file offset is GMime's.
public final class MailMessage {
    /// The Message-ID without its angle brackets, when present.
    public let messageID: String?
    /// The decoded Subject (nil when not read: `headline` false).
    public let subject: String?
    /// The decoded From addresses, as `Name <address>`.
    public let from: String?
    /// The Date header's text.
    public let date: String?

    let limits: MailLimits
    let fd: CInt
    /// The byte ranges of the file GMime reads, one after the other (without preambles and epilogues).
    private let kept: [Range<Int64>]
    /// Header fields as the structure scan read them, by where each starts in the file.
    let fields: [Int64: [UInt8]]
    private let stream: GObjectReference<GMimeStream>
    private let parser: GObjectReference<GMimeParser>
    let message: GObjectReference<GMimeMessage>

    /// Parses the message in the regular file open at `fd`, in `range` of it (nil: all of it; an mbox entry
    /// without its `From ` line is a range). Without `headline`, its Subject, From and Date are not read (nor given
    /// to GMime): nil.
    /// - Throws: `.notAMessage` (no header field before the first blank line), `.refused` (a limit), `.io`.
    public init(reading fd: CInt, range: Range<Int64>? = nil, limits: MailLimits = MailLimits(), headline: Bool = true)
        throws(MailError)
    {
        let status: stat
        do {
            status = try system_fstat(fd)
        } catch {
            throw .io(error.failure("read", "the message"))
        }
        guard status.st_mode & S_IFMT == S_IFREG else {
            throw .io(ContainerError(.failure, "a message is read from a regular file (copy a stream to one first)"))
        }
        let start = range?.lowerBound ?? 0
        let scan = try StructureScan.check(
            fd: fd, start: start, end: range?.upperBound, limits: limits, headline: headline)
        GMimeLibrary.ensureInitialised()
        var kept = scan.kept
        var parse = try Self.parse(fd, kept, elided: scan.elided)
        if !parse.readEveryRun {
            // GMime did not read some content left out as a leaf's: read again with all of it, as if never left out.
            kept = Self.merged(kept, scan.elided)
            parse = try Self.parse(fd, kept, elided: [])
        }
        let message = parse.message
        self.fd = fd
        self.limits = limits
        self.kept = kept
        fields = scan.fields
        stream = parse.stream
        parser = parse.parser
        self.message = message
        messageID = GMimeLibrary.text(g_mime_message_get_message_id(message.pointer))
        guard headline else {
            (subject, from, date) = (nil, nil, nil)
            return
        }
        subject = GMimeLibrary.text(g_mime_message_get_subject(message.pointer))
        from = Self.addresses(g_mime_message_get_from(message.pointer))
        let object = inbox_gmime_message_as_object(message.pointer)
        date = GMimeLibrary.text(g_mime_object_get_header(object, "Date")).map(Self.trimmed)
    }

    /// The file offset of `offset` in what GMime reads; nil for none (GMime's -1 for an offset it does not know).
    func fileOffset(_ offset: Int64) -> Int64? {
        guard offset >= 0 else { return nil }
        var start: Int64 = 0
        for range in kept {
            let length = range.upperBound - range.lowerBound
            if offset < start + length { return range.lowerBound + offset - start }
            start += length
        }
        return nil
    }

    /// GMime's parse of the view of the file made of `kept`, whose gaps that are `elided` runs of leaf content a
    /// part's content may span; `readEveryRun` when each run was read inside a part's content, as the scan expects
    /// (else GMime parsed something other than the whole message would give).
    static func parse(_ fd: CInt, _ kept: [Range<Int64>], elided: [Range<Int64>]) throws(MailError) -> (
        stream: GObjectReference<GMimeStream>, parser: GObjectReference<GMimeParser>,
        message: GObjectReference<GMimeMessage>, readEveryRun: Bool
    ) {
        guard let rawStream = stream(fd, kept, elided: elided) else {
            throw .io(ContainerError(.failure, "GMime cannot read the message"))
        }
        let stream = GObjectReference(taking: rawStream)
        guard let rawParser = g_mime_parser_new_with_stream(stream.pointer) else {
            throw .io(ContainerError(.failure, "GMime cannot make a parser"))
        }
        let parser = GObjectReference(taking: rawParser)
        g_mime_parser_set_persist_stream(parser.pointer, 1)
        guard let rawMessage = g_mime_parser_construct_message(parser.pointer, nil) else {
            throw .notAMessage("GMime finds no message in it")
        }
        let message = GObjectReference(taking: rawMessage)
        return (stream, parser, message, elided.isEmpty || inbox_skip_stream_joins_spanned(stream.pointer) != 0)
    }

    /// The message for GMime: a view of the file without what the scan left out, whose offsets `fileOffset` maps
    /// back to the file's.
    private static func stream(_ fd: CInt, _ kept: [Range<Int64>], elided: [Range<Int64>])
        -> UnsafeMutablePointer<GMimeStream>?
    {
        let starts = kept.map { gint64($0.lowerBound) }
        let ends = kept.map { gint64($0.upperBound) }
        let elidedStarts = Set(elided.map(\.lowerBound))
        let joins = kept.map { gboolean(elidedStarts.contains($0.upperBound) ? 1 : 0) }
        return inbox_skip_stream_new(fd, starts, ends, joins, guint(kept.count))
    }

    /// `kept` with the `elided` runs between its ranges put back, ranges that touch joined.
    static func merged(_ kept: [Range<Int64>], _ elided: [Range<Int64>]) -> [Range<Int64>] {
        var merged: [Range<Int64>] = []
        for range in (kept + elided).sorted(by: { $0.lowerBound < $1.lowerBound }) {
            if let last = merged.last, last.upperBound == range.lowerBound {
                merged[merged.count - 1] = last.lowerBound..<range.upperBound
            } else {
                merged.append(range)
            }
        }
        return merged
    }

    private static func addresses(_ list: UnsafeMutablePointer<InternetAddressList>?) -> String? {
        guard let list, internet_address_list_length(list) > 0,
            let text = internet_address_list_to_string(list, nil, 0)
        else { return nil }
        defer { g_free(text) }
        return GMimeLibrary.text(text)
    }

    static func trimmed(_ text: String) -> String {
        // Most values are ASCII whitespace around something that starts and ends with printable ASCII, which no
        // whitespace joins into one character: the bytes are cut without walking characters.
        let bytes = text.utf8
        let isSpace = { (byte: UInt8) in byte == 0x20 || (0x09...0x0D).contains(byte) }
        let isPrintable = { (byte: UInt8) in byte > 0x20 && byte < 0x7F }
        var start = bytes.startIndex
        var end = bytes.endIndex
        while start < end && isSpace(bytes[start]) { bytes.formIndex(after: &start) }
        while start < end && isSpace(bytes[bytes.index(before: end)]) { bytes.formIndex(before: &end) }
        if start == end || (isPrintable(bytes[start]) && isPrintable(bytes[bytes.index(before: end)])) {
            return String(decoding: bytes[start..<end], as: UTF8.self)
        }
        return String(text.drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed())
    }
}
