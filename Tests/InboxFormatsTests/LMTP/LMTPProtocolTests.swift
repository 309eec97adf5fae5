import TestSupport
import Testing

@testable import InboxFormats

/// LMTP's state machine (DESIGN §14, "Protocol"), driven directly: bytes in, replies and actions out, with no socket.
@Suite struct LMTPProtocolTests {
    /// A session driven as `LMTPSession` drives it, with lookups and deliveries answered by the test.
    struct Driven {
        var machine: LMTPProtocol
        var lookUp: (LMTPProtocol.Recipient) -> LMTPProtocol.Verdict = { .accepted(container: $0.localPart) }
        var outcome: (LMTPProtocol.Accepted) -> LMTPProtocol.Outcome = { _ in .delivered("imported") }
        /// Every reply line, in order.
        var lines: [String] = []
        var data: [UInt8] = []
        var chunks: [Int] = []
        var began = 0
        var deliveries: [[LMTPProtocol.Accepted]] = []
        var closed = false

        init(limits: LMTPProtocol.Limits = LMTPProtocol.Limits(messageBytes: 1000)) {
            machine = LMTPProtocol(host: "test.example", limits: limits)
            run()
        }

        /// Steps until the machine asks for input or closes.
        mutating func run() {
            while !closed {
                switch machine.step() {
                case .send(let bytes):
                    let text = String(decoding: bytes, as: UTF8.self)
                    #expect(text.hasSuffix("\r\n"), "\(text)")
                    lines += text.split(separator: "\r\n").map(String.init)
                case .read: return
                case .lookUp(let recipient): machine.answer(lookUp(recipient))
                case .beginData:
                    began += 1
                    data = []
                case .write(let bytes):
                    #expect(bytes.count <= machine.limits.dataChunk)
                    chunks.append(bytes.count)
                    data += bytes
                case .deliver(let recipients):
                    deliveries.append(recipients)
                    machine.delivered(recipients.map(outcome))
                case .close: closed = true
                }
            }
        }

        /// Hands `text` over in one piece, or a byte at a time with `bytewise`.
        mutating func send(_ text: String, bytewise: Bool = false) {
            send(Array(text.utf8), bytewise: bytewise)
        }

        mutating func send(_ bytes: [UInt8], bytewise: Bool = false) {
            for piece in bytewise ? bytes.map({ [$0] }) : [bytes] {
                machine.receive(piece)
                run()
            }
        }

        /// The reply lines since the last call.
        mutating func replies() -> [String] {
            defer { lines = [] }
            return lines
        }

        /// The codes of the reply lines since the last call (`250`, `550`, …).
        mutating func codes() -> [String] { replies().map { String($0.prefix(3)) } }

        /// Greeted, with a transaction open.
        mutating func open() {
            send("LHLO mta.example\r\nMAIL FROM:<sender@example.org>\r\n")
            _ = replies()
        }
    }

    @Test func theGreetingAndLHLOOfferWhatDesignSaysAndNoBDAT() {
        var session = Driven(
            limits: LMTPProtocol.Limits(messageBytes: LMTPProtocol.Limits.messageBytes(maxBytes: 1 << 30)))
        #expect(session.replies() == ["220 test.example LMTP inbox ready"])
        session.send("LHLO mta.example\r\n")
        #expect(
            session.replies() == [
                "250-test.example", "250-PIPELINING", "250-ENHANCEDSTATUSCODES", "250-8BITMIME", "250-SMTPUTF8",
                "250 SIZE \((4 << 30) / 3 + (1 << 20))",
            ])
        session.send("BDAT 10 LAST\r\nHELO x\r\nEHLO x\r\nLHLO\r\n")
        #expect(
            session.replies() == [
                "502 5.5.1 BDAT is not offered", "500 5.5.1 this is LMTP: say LHLO", "500 5.5.1 this is LMTP: say LHLO",
                "501 5.5.4 LHLO needs a domain",
            ])
    }

    @Test func theSizeBoundIsFourThirdsOfMaxBytesAndAMebibyte() {
        #expect(LMTPProtocol.Limits.messageBytes(maxBytes: 3 << 20) == (4 << 20) + (1 << 20))
        #expect(LMTPProtocol.Limits.messageBytes(maxBytes: .max) == .max)
    }

    /// A client that sends no `SIZE=` cannot pass the bound with its data: what comes past it is read to the end
    /// but written nowhere, nothing is delivered, each recipient gets `552 5.3.4`, and the session goes on.
    @Test func dataPastTheSizeBoundIsReadToItsEndWrittenNoMoreAnd552() {
        var session = Driven(limits: LMTPProtocol.Limits(messageBytes: 100))
        session.open()
        session.send("RCPT TO:<me@x>\r\nRCPT TO:<you@x>\r\nDATA\r\n")
        #expect(session.codes() == ["250", "250", "354"])
        session.send(String(repeating: "0123456789\r\n", count: 30) + ".\r\n")
        #expect(
            session.replies()
                == Array(
                    repeating: "552 5.3.4 a message over 100 bytes is over the limit", count: 2
                ).enumerated().map { number, line in
                    line.replacingOccurrences(of: "552 5.3.4 ", with: "552 5.3.4 <\(number == 0 ? "me" : "you")@x> ")
                })
        #expect(session.deliveries.isEmpty)
        #expect(session.data.count <= 100)
        session.send("MAIL FROM:<a@x>\r\nRCPT TO:<me@x>\r\nDATA\r\nsmall\r\n.\r\n")
        #expect(session.codes() == ["250", "250", "354", "250"])
        #expect(session.deliveries.count == 1)
    }

    /// One pipelined transaction: each RCPT answered as its lookup says, the data dot-unstuffed, one reply per
    /// accepted recipient in RCPT order, each code the outcome's.
    @Test func aPipelinedTransactionGetsOneReplyPerAcceptedRecipientInOrder() {
        var session = Driven()
        session.lookUp = { recipient in
            switch String(decoding: recipient.localPart, as: UTF8.self) {
            case "nobody": .unknown("no container 'nobody' here")
            case "broken": .failed("cannot look: Permission denied")
            default: .accepted(container: Array("/srv/".utf8) + recipient.localPart)
            }
        }
        session.outcome = { accepted in
            switch String(decoding: accepted.recipient.localPart, as: UTF8.self) {
            case "big": .overLimit("refused: attachments over --max-bytes 1K")
            case "odd": .notAMessage("not a message: no header field")
            case "full": .failed("cannot write: No space left on device")
            default: .delivered("imported: 1 attachment delivered")
            }
        }
        _ = session.replies()
        session.send(
            "LHLO mta\r\nMAIL FROM:<a@x> SIZE=500 BODY=8BITMIME SMTPUTF8\r\nRCPT TO:<me@x>\r\nRCPT TO:<nobody@x>\r\n"
                + "RCPT TO:<big@x>\r\nRCPT TO:<broken@x>\r\nRCPT TO:<odd@x>\r\nRCPT TO:<full@x>\r\nDATA\r\n")
        #expect(
            session.codes() == Array(repeating: "250", count: 8) + ["550", "250", "451", "250", "250", "354"])
        #expect(session.began == 1)
        session.send("Subject: s\r\n\r\n..a dot\r\n.\r\nQUIT\r\n")
        #expect(session.data == Array("Subject: s\n\n.a dot\n".utf8))
        #expect(session.deliveries.count == 1)
        #expect(
            session.deliveries[0].map { String(decoding: $0.container, as: UTF8.self) } == [
                "/srv/me", "/srv/big", "/srv/odd", "/srv/full",
            ])
        #expect(
            session.replies() == [
                "250 2.0.0 <me@x> imported: 1 attachment delivered",
                "552 5.3.4 <big@x> refused: attachments over --max-bytes 1K",
                "554 5.6.0 <odd@x> not a message: no header field",
                "451 4.3.0 <full@x> cannot write: No space left on device", "221 2.0.0 test.example closing",
            ])
        #expect(session.closed)
    }

    /// The data ends only at CRLF . CRLF: a dot line after a bare LF, or ended by a bare LF, is a line of the message
    /// (unstuffed), the same whether the bytes come at once or one at a time.
    @Test(arguments: [false, true])
    func theDataEndsOnlyAtCRLFDotCRLF(bytewise: Bool) {
        var session = Driven()
        session.open()
        session.send("RCPT TO:<me@x>\r\nDATA\r\n")
        _ = session.replies()
        let body = "A: b\r\n\r\nbare\n.\r\nlf dot\r\n.\nbare cr\rhere\r\n.. \r\n...\r\n\r\n"
        session.send(body + ".\r\n", bytewise: bytewise)
        #expect(String(decoding: session.data, as: UTF8.self) == "A: b\n\nbare\n\nlf dot\n\nbare cr\rhere\n. \n..\n\n")
        #expect(session.codes() == ["250"])
        #expect(!session.closed)
    }

    @Test func emptyDataIsAMessageOfNoBytes() {
        var session = Driven()
        session.open()
        session.send("RCPT TO:<me@x>\r\nDATA\r\n.\r\n")
        #expect(session.codes() == ["250", "354", "250"])
        #expect(session.data.isEmpty && session.deliveries.count == 1)
    }

    @Test func theDataComesInChunksOfAtMostTheLimitAndIsNeverHeldWhole() {
        var limits = LMTPProtocol.Limits(messageBytes: 1 << 30)
        limits.dataChunk = 1000
        var session = Driven(limits: limits)
        session.open()
        session.send("RCPT TO:<me@x>\r\nDATA\r\n")
        let line = String(repeating: "x", count: 99) + "\r\n"
        session.send(String(repeating: line, count: 100))
        #expect(session.chunks.count >= 10 && session.chunks.allSatisfy { $0 <= 1000 }, "\(session.chunks)")
        session.send(".\r\n")
        #expect(session.data.count == 100 * 100)
    }

    @Test func aBareCRAtAChunksEndStaysWithinTheLimit() {
        // A bare CR is held back until the byte after it: the two are written together, still within the chunk.
        for chunk in 2...9 {
            var limits = LMTPProtocol.Limits(messageBytes: 1 << 30)
            limits.dataChunk = chunk
            var session = Driven(limits: limits)
            session.open()
            session.send("RCPT TO:<me@x>\r\nDATA\r\n")
            session.send(String(repeating: "ab\rc\r\r\n.\rd\r\n", count: 20) + ".\r\n")
            #expect(session.chunks.allSatisfy { $0 <= chunk }, "\(chunk): \(session.chunks)")
            #expect(session.data == Array(String(repeating: "ab\rc\r\n\rd\n", count: 20).utf8))
        }
    }

    @Test func transactionsOutOfOrderAre503() {
        var session = Driven()
        _ = session.replies()
        session.send("MAIL FROM:<a@x>\r\nLHLO m\r\nRCPT TO:<me@x>\r\nDATA\r\nMAIL FROM:<a@x>\r\nDATA\r\n")
        #expect(
            session.replies() == [
                "503 5.5.1 LHLO first", "250-test.example", "250-PIPELINING", "250-ENHANCEDSTATUSCODES",
                "250-8BITMIME", "250-SMTPUTF8", "250 SIZE 1000", "503 5.5.1 MAIL first", "503 5.5.1 MAIL first",
                "250 2.1.0 OK", "503 5.5.1 no valid recipients",
            ])
        session.send("MAIL FROM:<b@x>\r\nRCPT TO:<me@x>\r\nRSET\r\nDATA\r\n")
        #expect(session.codes() == ["503", "250", "250", "503"])
        #expect(session.began == 0)
    }

    @Test func mailParametersAndTheSizeBound() {
        var session = Driven()
        _ = session.replies()
        session.send("LHLO m\r\nMAIL FROM:<a@x> SIZE=1001\r\nMAIL FROM:<a@x> SIZE=ten\r\nMAIL FROM:<a@x> AUTH=<>\r\n")
        #expect(
            session.replies().dropFirst(6) == [
                "552 5.3.4 a message of 1001 bytes is over the limit of 1000", "501 5.5.4 SIZE needs a number",
                "555 5.5.4 parameter not supported: AUTH=<>",
            ])
        session.send("MAIL FROM:<> SIZE=1000\r\nRCPT TO:<me@x> NOTIFY=NEVER\r\nRCPT TO:me@x\r\nRCPT TO:<>\r\n")
        #expect(session.codes() == ["250", "555", "501", "501"])
    }

    @Test func aCommandLineOverTheLimitIs500AndTheSessionGoesOn() {
        var session = Driven()
        _ = session.replies()
        session.send("NOOP " + String(repeating: "x", count: 2043) + "\r\n")
        #expect(session.codes() == ["250"], "2,048 bytes are a line")
        session.send("NOOP " + String(repeating: "x", count: 2044) + "\r\n")
        #expect(session.replies() == ["500 5.5.2 line too long: at most 2048 bytes"])
        // A line longer than any read is dropped as it comes, never held.
        for _ in 0..<10 { session.send(String(repeating: "y", count: 1000)) }
        session.send("\r\nNOOP\r\n")
        #expect(session.codes() == ["500", "250"])
        #expect(!session.closed)
    }

    @Test func theTenthErrorClosesTheSessionWith421() {
        var session = Driven()
        _ = session.replies()
        session.send(String(repeating: "WHAT\r\n", count: 9))
        #expect(session.codes() == Array(repeating: "500", count: 9))
        session.send("WHAT\r\nNOOP\r\n")
        #expect(
            session.replies() == [
                "500 5.5.2 command not recognized", "421 4.7.0 test.example too many errors, closing the session",
            ])
        #expect(session.closed)
    }

    @Test func recipientsPastOneHundredAre452() {
        var session = Driven()
        session.open()
        session.send(String(repeating: "RCPT TO:<me@x>\r\n", count: 101))
        let codes = session.codes()
        #expect(codes.dropLast() == ArraySlice(Array(repeating: "250", count: 100)))
        #expect(session.machine.isInsideData == false)
        session.send("RCPT TO:<me@x>\r\n")
        #expect(session.replies() == ["452 4.5.3 too many recipients: at most 100"])
        #expect(codes.last == "452")
    }

    @Test func vrfyNoopRsetAndQuit() {
        var session = Driven()
        _ = session.replies()
        session.send("VRFY me\r\nVRFY\r\nNOOP anything\r\nRSET now\r\nQUIT\r\nNOOP\r\n")
        #expect(
            session.replies() == [
                "252 2.5.0 cannot verify, but will take the message and try", "501 5.5.4 VRFY needs an address",
                "250 2.0.0 OK", "501 5.5.4 RSET takes no argument", "221 2.0.0 test.example closing",
            ])
        #expect(session.closed)
    }

    @Test func idleTooLongIs421AndInsideTheDataDeliversNothing() {
        var waiting = Driven()
        _ = waiting.replies()
        waiting.machine.timedOut()
        waiting.run()
        #expect(waiting.replies() == ["421 4.4.2 test.example idle too long, closing the session"])
        #expect(waiting.closed)

        var inData = Driven()
        inData.open()
        inData.send("RCPT TO:<me@x>\r\nDATA\r\nSubject: half\r\n")
        inData.machine.timedOut()
        inData.run()
        #expect(inData.codes() == ["250", "354", "421"])
        #expect(inData.closed && inData.deliveries.isEmpty)
    }

    @Test func aConnectionEndingInsideTheDataDeliversNothing() {
        var session = Driven()
        session.open()
        session.send("RCPT TO:<me@x>\r\nDATA\r\nSubject: half\r\n.")
        session.machine.endOfInput()
        session.run()
        #expect(session.closed && session.deliveries.isEmpty)
        #expect(session.codes() == ["250", "354"])
    }

    /// SIGTERM: at once outside the data; inside it, the message is read, delivered and answered first.
    @Test func aShutdownWaitsForTheDataInHand() {
        var idle = Driven()
        _ = idle.replies()
        idle.machine.shutDown()
        idle.run()
        #expect(idle.replies() == ["421 4.3.2 test.example shutting down"] && idle.closed)

        var inData = Driven()
        inData.open()
        inData.send("RCPT TO:<me@x>\r\nRCPT TO:<you@x>\r\nDATA\r\nSubject: s\r\n")
        #expect(inData.machine.isInsideData)
        inData.machine.shutDown()
        inData.run()
        #expect(!inData.closed)
        inData.send("\r\nbody\r\n.\r\n")
        #expect(inData.deliveries.count == 1)
        #expect(inData.codes() == ["250", "250", "354", "250", "250", "421"])
        #expect(inData.closed)
    }

    @Test func theLocalPartIsUnquotedAndASourceRouteDropped() {
        let path = LMTPProtocol.path(after: "TO:", in: ArraySlice("to: <@relay,@hop:\"a b\\\"c\"@x.org> ".utf8))
        #expect(path.map { String(decoding: $0.address, as: UTF8.self) } == "\"a b\\\"c\"@x.org")
        #expect(path.map { LMTPProtocol.localPart(of: $0.address) } == Array("a b\"c".utf8))
        #expect(LMTPProtocol.localPart(of: Array("postmaster".utf8)) == Array("postmaster".utf8))
        #expect(LMTPProtocol.localPart(of: Array("me+inbox@x".utf8)) == Array("me+inbox".utf8))
        #expect(LMTPProtocol.path(after: "TO:", in: ArraySlice("TO:<a@x>junk".utf8)) == nil)
    }

    @Test func replyTextIsPrintableASCII() {
        #expect(LMTPProtocol.shown(Array("é\u{1B}[2Jx".utf8)) == "\\xC3\\xA9\\x1B[2Jx")
        #expect(LMTPProtocol.reply(String(repeating: "z", count: 600)).count == 512)
    }

    /// The unstuffing (which copies runs and whole line ends at once) gives what the rules give read a line at a time,
    /// for data with dots, bare CRs and bare LFs anywhere, in any split and any chunk limit.
    @Test func unstuffingReadsAsTheRulesDoLineByLine() {
        let pieces = ["ab", "c", ".", "..", "\r", "\n", "\r\n", "\r\n.", "\n.", ".\r", "x\ry", "\r\n..\r\n"].map {
            Array($0.utf8)
        }
        for round in 0..<300 {
            let noise = pattern(500, seed: UInt64(round + 1))
            var data: [UInt8] = []
            for index in 0..<(Int(noise[0]) + 20) { data += pieces[Int(noise[1 + index]) % pieces.count] }
            data += Array("\r\n.\r\n".utf8)
            let expected = Self.unstuffedByTheRules(data)
            let split = 1 + Int(noise[490]) % 40
            let limit = 1 + Int(noise[491]) % 50
            var unstuffing = DataUnstuffing()
            var output: [UInt8] = []
            var end: Int?
            var start = 0
            while end == nil && start < data.count {
                let input = Array(data[start..<min(start + split, data.count)])
                var position = 0
                while position < input.count && end == nil {
                    var chunk: [UInt8] = []
                    if unstuffing.read(input, from: &position, into: &chunk, limit: limit) { end = start + position }
                    #expect(chunk.count <= limit + 1)
                    output += chunk
                }
                start += input.count
            }
            #expect(output == expected.output, "round \(round)")
            #expect(end == expected.end, "round \(round)")
        }
    }

    /// RFC 5321 4.5.2 read a line at a time: a line is up to LF, its end CRLF or a bare LF (either written as LF);
    /// a dot starting a line is dropped; the data ends at a line "." ended by CRLF after a CRLF (or at the start).
    static func unstuffedByTheRules(_ data: [UInt8]) -> (output: [UInt8], end: Int?) {
        var output: [UInt8] = []
        var start = 0
        var afterCRLF = true
        while let newline = data[start...].firstIndex(of: 0x0A) {
            var line = data[start..<newline]
            let crlf = line.last == 0x0D
            if crlf { line = line.dropLast() }
            if afterCRLF && crlf && line.elementsEqual([UInt8(ascii: ".")]) { return (output, newline + 1) }
            if line.first == UInt8(ascii: ".") { line = line.dropFirst() }
            output += line + [0x0A]
            afterCRLF = crlf
            start = newline + 1
        }
        return (output, nil)
    }
}
