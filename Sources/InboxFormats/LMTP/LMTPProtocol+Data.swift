import Glibc

/// The data of a message as it streams in (RFC 5321 4.5.2): a dot at the start of a line dropped, each line end (CRLF,
/// or a bare LF, read like one) written as one LF, and the end only at CRLF . CRLF, so that inbox and the MTA never
/// disagree on where a message ends. A bare CR inside a line stays. Its state carries over from one input to the
/// next, a byte at a time.
struct DataUnstuffing: Equatable {
    enum State: Equatable {
        /// At the start of a line; `afterCRLF` when the line before ended with CRLF (the data's start counts).
        case lineStart(afterCRLF: Bool)
        /// A line that began with a dot, the dot dropped.
        case dot(afterCRLF: Bool)
        /// `.` then CR.
        case dotCR(afterCRLF: Bool)
        case middle
        /// A CR inside a line, not yet written: a line end if LF follows.
        case carriageReturn
    }

    var state = State.lineStart(afterCRLF: true)

    /// Reads `input` from `position`, appending the message's bytes to `output` until it holds `limit` bytes (one
    /// more when a CR held back is written with the byte after it) or the input ends; returns true at the end of the
    /// data, `position` then just past it.
    mutating func read(_ input: [UInt8], from position: inout Int, into output: inout [UInt8], limit: Int) -> Bool {
        while position < input.count && output.count < limit {
            if state == .middle {
                // Inside a line every byte but CR and LF is the message's: copied as a run.
                let end = min(input.count, position + limit - output.count)
                let stop = input.withUnsafeBytes { bytes in
                    // The first CR or LF before `end`, found by memchr: the line's end, or a CR inside it.
                    let run = UnsafeRawBufferPointer(rebasing: bytes[position..<end])
                    guard let from = run.baseAddress else { return position }
                    let lf = memchr(from, 0x0A, run.count).map { UnsafeRawPointer($0) - from } ?? run.count
                    let cr = memchr(from, 0x0D, lf).map { UnsafeRawPointer($0) - from } ?? lf
                    return position + cr
                }
                output.append(contentsOf: input[position..<stop])
                position = stop
                if stop == end { continue }
                // A line end followed by a byte that is not a dot: the next line starts inside a run, as `feed` would
                // leave it (only a dot at a line's start means anything).
                let lineEnd = input[stop] == 0x0D ? 2 : 1
                if stop + lineEnd < input.count, input[stop + lineEnd - 1] == 0x0A,
                    input[stop + lineEnd] != UInt8(ascii: ".")
                {
                    output.append(0x0A)
                    position = stop + lineEnd
                    continue
                }
            }
            let byte = input[position]
            position += 1
            if feed(byte, into: &output) { return true }
        }
        return false
    }

    /// One byte; true when it ends the data.
    private mutating func feed(_ byte: UInt8, into output: inout [UInt8]) -> Bool {
        let cr: UInt8 = 0x0D
        let lf: UInt8 = 0x0A
        switch state {
        case .middle:
            if byte == cr {
                state = .carriageReturn
            } else if byte == lf {
                output.append(lf)
                state = .lineStart(afterCRLF: false)
            } else {
                output.append(byte)
            }
        case .carriageReturn:
            if byte == lf {
                output.append(lf)
                state = .lineStart(afterCRLF: true)
            } else {
                output.append(cr)
                state = .middle
                return feed(byte, into: &output)
            }
        case .lineStart(let afterCRLF):
            if byte == UInt8(ascii: ".") {
                state = .dot(afterCRLF: afterCRLF)
            } else {
                state = .middle
                return feed(byte, into: &output)
            }
        case .dot(let afterCRLF):
            if byte == cr {
                state = .dotCR(afterCRLF: afterCRLF)
            } else {
                state = .middle
                return feed(byte, into: &output)
            }
        case .dotCR(let afterCRLF):
            if byte == lf {
                if afterCRLF { return true }
                output.append(lf)
                state = .lineStart(afterCRLF: true)
            } else {
                output.append(cr)
                state = .middle
                return feed(byte, into: &output)
            }
        }
        return false
    }
}

extension LMTPProtocol {
    /// The data read so far, handed on a chunk at a time; `.deliver` once it ends; nil when the phase changed.
    mutating func stepData() -> Action? {
        var chunk: [UInt8] = []
        chunk.reserveCapacity(min(limits.dataChunk, input.count - position + 1))
        // One byte short of the chunk's bound: a CR held back may come with the byte after it.
        let ended = unstuffing.read(input, from: &position, into: &chunk, limit: max(limits.dataChunk - 1, 1))
        let over = dataBytes > limits.messageBytes
        dataBytes += Int64(chunk.count)
        if over || dataBytes > limits.messageBytes {
            // Past the bound: read to the end, written no more, refused whole.
            chunk = []
            if ended {
                phase = .delivering
                delivered(
                    accepted.map { _ in .overLimit("a message over \(limits.messageBytes) bytes is over the limit") })
                return nil
            }
        }
        if ended {
            phase = .delivering
            return chunk.isEmpty ? nil : .write(chunk)
        }
        if !chunk.isEmpty { return .write(chunk) }
        guard !inputEnded else {
            // The connection ended inside the data: nothing is delivered.
            phase = .closing
            return nil
        }
        return .read
    }
}
