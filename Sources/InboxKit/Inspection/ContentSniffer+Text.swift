// MARK: - Text

extension ContentSniffer {
    /// Header names that, first in a text, mark a mail message.
    static let mailHeaders = ["from:", "received:", "return-path:", "delivered-to:", "message-id:", "mime-version:"]

    /// The type of UTF-8 text by its first lines, or nil for openings that libmagic names better than `text`:
    /// JSON, XML and other markup but HTML (SVG is an image to libmagic), PostScript and PGP armour.
    static func textType(_ head: UnsafeRawBufferPointer) -> Sniffed? {
        let text = UnsafeRawBufferPointer(rebasing: head[startOfText(head)...])
        if startsIgnoringCase(text, "begin:vcalendar") { return Sniffed(type: "calendar", mime: "text/calendar") }
        if startsIgnoringCase(text, "begin:vcard") { return Sniffed(type: "vcard", mime: "text/vcard") }
        if looksLikeMail(text) { return Sniffed(type: "eml", mime: "message/rfc822") }
        if startsIgnoringCase(text, "<!doctype html") || startsIgnoringCase(text, "<html") {
            return Sniffed(type: "text", mime: "text/html")
        }
        if let first = text.first, "{[<".utf8.contains(first) { return nil }
        if text.starts(with: "%!".utf8) || text.starts(with: "-----BEGIN PGP".utf8) { return nil }
        if looksLikeCSV(text) { return Sniffed(type: "csv", mime: "text/csv") }
        return Sniffed(type: "text", mime: "text/plain")
    }

    /// Whether `head` is UTF-8 (a sequence cut by the end counts) with no control characters but tab, line feed,
    /// form feed and carriage return, and a few (one in 64 bytes) of those libmagic also allows in text.
    static func looksLikeText(_ head: UnsafeRawBufferPointer) -> Bool {
        var index = 0
        var oddControls = 0
        while index < head.count {
            if index + 8 <= head.count, isPlainASCII(head.loadUnaligned(fromByteOffset: index, as: UInt64.self)) {
                index += 8
                continue
            }
            // Byte by byte to the end of these 8; a multibyte sequence may run past it.
            let end = min(index + 8, head.count)
            while index < end {
                let byte = head[index]
                if byte >= 0x80 {
                    guard let length = sequenceLength(head, at: index) else { return false }
                    index += length
                    continue
                }
                switch byte {
                case 0x20..<0x7F, 0x09, 0x0A, 0x0C, 0x0D: break
                case 0x07, 0x08, 0x0B, 0x1B: oddControls += 1  // bell, backspace, vertical tab, escape
                default: return false
                }
                index += 1
            }
        }
        return oddControls <= head.count / 64
    }

    /// Whether all 8 bytes of `word` are printable ASCII, tab, line feed, form feed or carriage return.
    private static func isPlainASCII(_ word: UInt64) -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let high: UInt64 = 0x8080_8080_8080_8080
        // Exact for bytes below 0x80: setting each high bit first keeps a subtraction from borrowing across bytes.
        func bytesEqual(_ byte: UInt64) -> UInt64 { ~(((word ^ (byte &* ones)) | high) &- ones) & high }
        let controls = ~((word | high) &- 0x20 &* ones) & high
        let allowed = bytesEqual(0x09) | bytesEqual(0x0A) | bytesEqual(0x0C) | bytesEqual(0x0D)
        return (word & high) | (controls & ~allowed) | bytesEqual(0x7F) == 0
    }

    /// The length of the UTF-8 sequence that starts at `index`, or nil when it is not valid UTF-8.
    /// A sequence cut short by the end of `head` counts up to the end.
    private static func sequenceLength(_ head: UnsafeRawBufferPointer, at index: Int) -> Int? {
        var length = 3
        // Narrower ranges for the second byte rule out overlong forms, surrogates and code points past U+10FFFF.
        var second: ClosedRange<UInt8> = 0x80...0xBF
        switch head[index] {
        case 0xC2...0xDF: length = 2
        case 0xE0: second = 0xA0...0xBF
        case 0xE1...0xEC, 0xEE...0xEF: break
        case 0xED: second = 0x80...0x9F
        case 0xF0: (length, second) = (4, 0x90...0xBF)
        case 0xF1...0xF3: length = 4
        case 0xF4: (length, second) = (4, 0x80...0x8F)
        default: return nil
        }
        let available = min(length, head.count - index)
        for offset in 1..<available {
            let range = offset == 1 ? second : 0x80...0xBF
            guard range.contains(head[index + offset]) else { return nil }
        }
        return available
    }

    /// Whether the first line is a mail header: one of `mailHeaders`, or `Date:` or `Subject:` when the header
    /// block has both.
    static func looksLikeMail(_ text: UnsafeRawBufferPointer) -> Bool {
        if mailHeaders.contains(where: { startsIgnoringCase(text, $0) }) { return true }
        guard startsIgnoringCase(text, "date:") || startsIgnoringCase(text, "subject:") else { return false }
        var hasDate = false
        var hasSubject = false
        var start = 0
        while start < text.count, !(hasDate && hasSubject) {
            let end = text[start...].firstIndex(of: UInt8(ascii: "\n")) ?? text.count
            let line = UnsafeRawBufferPointer(rebasing: text[start..<end])
            start = end + 1
            if line.first == UInt8(ascii: " ") || line.first == UInt8(ascii: "\t") { continue }  // folded
            guard isHeaderLine(line) else { break }
            hasDate = hasDate || startsIgnoringCase(line, "date:")
            hasSubject = hasSubject || startsIgnoringCase(line, "subject:")
        }
        return hasDate && hasSubject
    }

    /// Whether `line` begins with a header name, printable ASCII but `:`, and a colon.
    private static func isHeaderLine(_ line: UnsafeRawBufferPointer) -> Bool {
        guard let colon = line.firstIndex(where: { !(0x21...0x7E).contains($0) || $0 == UInt8(ascii: ":") }) else {
            return false
        }
        return colon > 0 && line[colon] == UInt8(ascii: ":")
    }

    /// Whether the first lines, at least 2 and up to 10, have the same number, at least 1, of commas outside
    /// double quotes. A quoted field may hold line breaks. A last line without a line break, perhaps cut,
    /// counts only when its commas match.
    static func looksLikeCSV(_ text: UnsafeRawBufferPointer) -> Bool {
        var lines = 0
        var commas = 0
        var commasPerLine = 0
        var quoted = false
        for byte in text {
            switch byte {
            case UInt8(ascii: "\""): quoted.toggle()
            case UInt8(ascii: ",") where !quoted: commas += 1
            case UInt8(ascii: "\n") where !quoted:
                guard commas > 0, lines == 0 || commas == commasPerLine else { return false }
                (lines, commasPerLine, commas) = (lines + 1, commas, 0)
                if lines == 10 { return true }
            default: break
            }
        }
        let lastLineIsOpen = text.last.map { $0 != UInt8(ascii: "\n") } ?? false
        if lastLineIsOpen, lines > 0, commas == commasPerLine { lines += 1 }
        return lines >= 2
    }

    /// The index after a UTF-8 byte order mark and leading ASCII white space.
    static func startOfText(_ head: UnsafeRawBufferPointer) -> Int {
        var index = head.starts(with: [0xEF, 0xBB, 0xBF]) ? 3 : 0
        while index < head.count {
            switch head[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return index
            }
        }
        return index
    }

    /// Whether `bytes` begin with `prefix` (lowercase ASCII), ignoring ASCII case.
    static func startsIgnoringCase(_ bytes: UnsafeRawBufferPointer, _ prefix: String) -> Bool {
        var index = 0
        for expected in prefix.utf8 {
            guard index < bytes.count else { return false }
            let byte = bytes[index]
            let lowered = (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) ? byte + 32 : byte
            guard lowered == expected else { return false }
            index += 1
        }
        return true
    }
}
