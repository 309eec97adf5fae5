import InboxKit

/// Streaming decoders of the Content-Transfer-Encodings (ARCHITECTURE.md, "Mail import"): each takes the encoded bytes a
/// chunk at a time, in any split, and appends what it decodes, so no part is ever whole in memory. GMime's own
/// decoders stop at base64 padding in the middle of a part and lose uuencode lines whose trailing spaces were
/// stripped; these read both in full (ARCHITECTURE.md, "Mail import").
protocol TransferDecoder {
    mutating func decode(_ input: UnsafeRawBufferPointer, into output: inout [UInt8])
    /// What is left at the end of the part.
    mutating func finish(into output: inout [UInt8])
}

/// Base64 as a careful reader takes it: bytes outside the alphabet are skipped, `=` ends a quantum (which may be
/// followed by more), and an unpadded last quantum of 2 or 3 characters still counts.
struct Base64Decoder: TransferDecoder {
    /// For each byte and each of a quantum's four places, the byte's 6 bits shifted to that place in the quantum's
    /// 24 (`places[256 * place + byte]`); bit 31 marks a byte outside the alphabet. The last place's is the value.
    private static let places: [UInt32] = {
        var table = [UInt32](repeating: 0x8000_0000, count: 4 * 256)
        for (value, byte) in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8.enumerated() {
            for place in 0..<4 { table[256 * place + Int(byte)] = UInt32(value) << (18 - 6 * place) }
        }
        return table
    }()

    private var quantum: UInt32 = 0
    private var count = 0

    mutating func decode(_ input: UnsafeRawBufferPointer, into output: inout [UInt8]) {
        // Room for three bytes for every four characters, counting those of the quantum begun before and rounding up
        // (a quantum cut short by `=` holds fewer), trimmed to what was written at the end.
        guard let bytes = input.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return }
        let start = output.count
        output.append(contentsOf: repeatElement(0, count: (count + input.count + 3) / 4 * 3))
        var written = start
        output.withUnsafeMutableBufferPointer { out in
            Self.places.withUnsafeBufferPointer { places in
                var position = 0
                while position < input.count {
                    // Between quanta, four characters of the alphabet in a row are three bytes at once.
                    while count == 0 && input.count - position >= 4 {
                        let word =
                            places[Int(bytes[position])] | places[256 + Int(bytes[position + 1])]
                            | places[512 + Int(bytes[position + 2])] | places[768 + Int(bytes[position + 3])]
                        if word & 0x8000_0000 != 0 { break }
                        out[written] = UInt8(truncatingIfNeeded: word >> 16)
                        out[written + 1] = UInt8(truncatingIfNeeded: word >> 8)
                        out[written + 2] = UInt8(truncatingIfNeeded: word)
                        written += 3
                        position += 4
                    }
                    guard position < input.count else { break }
                    let byte = bytes[position]
                    position += 1
                    let value = places[768 + Int(byte)]
                    if value < 64 {
                        quantum = quantum << 6 | value
                        count += 1
                        if count == 4 {
                            out[written] = UInt8(truncatingIfNeeded: quantum >> 16)
                            out[written + 1] = UInt8(truncatingIfNeeded: quantum >> 8)
                            out[written + 2] = UInt8(truncatingIfNeeded: quantum)
                            written += 3
                            quantum = 0
                            count = 0
                        }
                    } else if byte == UInt8(ascii: "=") && count >= 2 {
                        written += Self.partial(
                            quantum, count, into: UnsafeMutableBufferPointer(rebasing: out[written...]))
                        quantum = 0
                        count = 0
                    }
                }
            }
        }
        output.removeLast(output.count - written)
    }

    mutating func finish(into output: inout [UInt8]) {
        flushPartial(into: &output)
    }

    /// A quantum of 2 or 3 characters holds 1 or 2 bytes; a lone character holds none.
    private mutating func flushPartial(into output: inout [UInt8]) {
        var bytes: (UInt8, UInt8) = (0, 0)
        let written = withUnsafeMutableBytes(of: &bytes) { raw in
            Self.partial(quantum, count, into: raw.bindMemory(to: UInt8.self))
        }
        if written > 0 { output.append(bytes.0) }
        if written > 1 { output.append(bytes.1) }
        quantum = 0
        count = 0
    }

    /// Writes the bytes of a quantum of `count` characters cut short (2 or 3 of them: 1 or 2 bytes; else none)
    /// into `out`; returns how many.
    private static func partial(_ quantum: UInt32, _ count: Int, into out: UnsafeMutableBufferPointer<UInt8>) -> Int {
        switch count {
        case 2:
            out[0] = UInt8(truncatingIfNeeded: quantum >> 4)
            return 1
        case 3:
            out[0] = UInt8(truncatingIfNeeded: quantum >> 10)
            out[1] = UInt8(truncatingIfNeeded: quantum >> 2)
            return 2
        default:
            return 0
        }
    }
}

/// Quoted-printable as Python's `binascii.a2b_qp` reads it, and as RFC 2045 §6.7 asks: `=` and two hex digits
/// is a byte, `=` before the end of a line (spaces and tabs between allowed) is a soft line break, and any
/// other `=` stays as it is.
struct QuotedPrintableDecoder: TransferDecoder {
    private enum State {
        case text
        case equals
        case hex(UInt8)
        case padding([UInt8])  // `=` then spaces or tabs: a soft break if the line ends here
        case skipToNewline  // `=\r`: a soft break up to the `\n`
    }

    private static let paddingLimit = 1024
    private var state = State.text

    mutating func decode(_ input: UnsafeRawBufferPointer, into output: inout [UInt8]) {
        for byte in input { take(byte, into: &output) }
    }

    private mutating func take(_ byte: UInt8, into output: inout [UInt8]) {
        switch state {
        case .text:
            if byte == UInt8(ascii: "=") { state = .equals } else { output.append(byte) }
        case .equals:
            switch byte {
            case 0x0A: state = .text
            case 0x0D: state = .skipToNewline
            case UInt8(ascii: "="):
                output.append(byte)
                state = .text
            case 0x20, 0x09: state = .padding([byte])
            default:
                if MimeParameters.hexValue(byte) != nil {
                    state = .hex(byte)
                } else {
                    output.append(UInt8(ascii: "="))
                    state = .text
                    take(byte, into: &output)
                }
            }
        case .hex(let first):
            state = .text
            if let high = MimeParameters.hexValue(first), let low = MimeParameters.hexValue(byte) {
                output.append(high << 4 | low)
            } else {
                output.append(UInt8(ascii: "="))
                output.append(first)
                take(byte, into: &output)
            }
        case .padding(var spaces):
            if byte == 0x0A {
                state = .text
            } else if byte == 0x0D {
                state = .skipToNewline
            } else if (byte == 0x20 || byte == 0x09) && spaces.count < Self.paddingLimit {
                spaces.append(byte)
                state = .padding(spaces)
            } else {
                output.append(UInt8(ascii: "="))
                output += spaces
                state = .text
                take(byte, into: &output)
            }
        case .skipToNewline:
            if byte == 0x0A { state = .text }
        }
    }

    /// A `=` at the very end is dropped, as `a2b_qp` does; `=` and a hex digit stay as they are.
    mutating func finish(into output: inout [UInt8]) {
        if case .hex(let first) = state { output += [UInt8(ascii: "="), first] }
        state = .text
    }
}
