/// One LMTP session (RFC 2033, DESIGN §14) as a state machine with no I/O: bytes in, actions out.
///
/// The calling sequence: `step()` until it says `.read` or `.close`. On `.read`, read from the connection and hand
/// the bytes to `receive(_:)`, or call `endOfInput()` at its end, `timedOut()` when it was idle too long, or
/// `shutDown()` on SIGTERM; then `step()` again. Every other action is done before the next `step()`: `.send`
/// (replies may be gathered and written before the next read), `.lookUp` (answered with `answer(_:)`),
/// `.beginData` (open a temporary file), `.write` (append to it), `.deliver` (import the file for each accepted
/// recipient, answered with `delivered(_:)`). `.close` is the end: nothing more is said.
///
/// What the caller may assume: the data comes to `.write` dot-unstuffed, each line ended by one LF (a CRLF and a
/// bare LF alike), in chunks of at most `Limits.dataChunk` bytes, and ends only at CRLF . CRLF; nothing of the
/// input is held beyond the bytes handed to `receive` and one command line. A connection that ends, times out or
/// is shut down inside the data gets no `.deliver`: the file is to be dropped; so does data past
/// `Limits.messageBytes`, whose writes stop there and which is answered `552` without one. A shutdown waits for the
/// data in hand to be delivered and answered.
package struct LMTPProtocol {
    package struct Limits: Sendable {
        /// The longest command line, without its line end (`500 5.5.2` past it).
        package var commandLine = 2048
        /// Protocol errors in one session before it is closed (`421 4.7.0`).
        package var errors = 10
        /// Recipients a transaction (`452 4.5.3` past it).
        package var recipients = 100
        /// The bound `SIZE` advertises, and refuses a `MAIL FROM` over (`552 5.3.4`).
        package var messageBytes: Int64
        /// The largest `.write` chunk.
        package var dataChunk = 64 * 1024

        package init(messageBytes: Int64) { self.messageBytes = messageBytes }

        /// SIZE for `--max-bytes`, which bounds decoded attachments: base64 grows them by 4/3, plus 1 MiB for the
        /// rest of the message.
        package static func messageBytes(maxBytes: Int64) -> Int64 {
            let (grown, overflow) = maxBytes.multipliedReportingOverflow(by: 4)
            return overflow ? Int64.max : min(Int64.max - (1 << 20), grown / 3) + (1 << 20)
        }
    }

    /// A recipient as given in `RCPT TO`.
    package struct Recipient: Equatable, Sendable {
        /// The address between the angle brackets, as sent.
        package var address: [UInt8]
        /// Its local part, unquoted: what names a container under `--root`.
        package var localPart: [UInt8]
    }

    /// What a recipient's lookup found.
    package enum Verdict: Equatable, Sendable {
        /// It delivers into the container at this path.
        case accepted(container: [UInt8])
        /// No such container: `550 5.1.1`.
        case unknown(String)
        /// The lookup failed: `451 4.3.0`.
        case failed(String)
    }

    /// A recipient accepted for the transaction.
    package struct Accepted: Equatable, Sendable {
        package var recipient: Recipient
        package var container: [UInt8]
    }

    /// What importing the message did for one recipient (DESIGN §12's outcome of `import -`).
    package enum Outcome: Equatable, Sendable {
        /// Imported, a duplicate or without attachments, and durable: `250 2.0.0`.
        case delivered(String)
        /// Over `--max-bytes` or another limit: `552 5.3.4`.
        case overLimit(String)
        /// Not a message: `554 5.6.0`.
        case notAMessage(String)
        /// Anything else, for the MTA to retry: `451 4.3.0`.
        case failed(String)
    }

    package enum Action: Equatable {
        case send([UInt8])
        case read
        case lookUp(Recipient)
        case beginData
        case write([UInt8])
        case deliver([Accepted])
        case close
    }

    enum Phase: Equatable {
        case command
        /// A command line too long: its bytes are dropped up to its LF.
        case discarding
        case lookingUp(Recipient)
        case data
        case delivering
        case closing
        case closed
    }

    let limits: Limits
    private let host: String
    var phase = Phase.command
    /// Replies and other actions already decided, in order.
    private var queued: [Action]
    var input: [UInt8] = []
    var position = 0
    var inputEnded = false
    private var errors = 0
    private var greeted = false
    /// Whether a `MAIL FROM` opened a transaction.
    private var transaction = false
    private(set) var accepted: [Accepted] = []
    private var stopping = false
    var unstuffing = DataUnstuffing()
    /// The message's bytes so far, unstuffed: past `limits.messageBytes` nothing more is written, and the data gets
    /// `552 5.3.4` for each recipient once it ends, as a `MAIL FROM` with that `SIZE=` would have.
    var dataBytes: Int64 = 0

    /// A session that greets first; `host` names this side in the greeting and the `LHLO` reply.
    package init(host: String, limits: Limits) {
        self.host = host
        self.limits = limits
        queued = [.send(Self.reply("220 \(host) LMTP inbox ready"))]
    }

    /// Whether the session is inside a message's data (or delivering it): a shutdown waits for it.
    package var isInsideData: Bool { phase == .data || phase == .delivering }

    /// Bytes read from the connection.
    package mutating func receive(_ bytes: some Collection<UInt8>) {
        if position > 0 {
            input.removeFirst(position)
            position = 0
        }
        input.append(contentsOf: bytes)
    }

    /// The connection's end: what is left is read, then the session closes.
    package mutating func endOfInput() { inputEnded = true }

    /// Idle too long: `421 4.4.2`, and the session closes (inside the data, delivering nothing).
    package mutating func timedOut() { close(with: "421 4.4.2 \(host) idle too long, closing the session") }

    /// SIGTERM: `421 4.3.2` and the session closes, at once outside the data, else once the data is answered.
    package mutating func shutDown() {
        if isInsideData {
            stopping = true
        } else {
            close(with: "421 4.3.2 \(host) shutting down")
        }
    }

    /// The answer to `.lookUp`.
    package mutating func answer(_ verdict: Verdict) {
        guard case .lookingUp(let recipient) = phase else { preconditionFailure("no lookup asked") }
        phase = .command
        let shown = Self.shown(recipient.address)
        switch verdict {
        case .accepted(let container):
            accepted.append(Accepted(recipient: recipient, container: container))
            queued.append(.send(Self.reply("250 2.1.5 <\(shown)> OK")))
        case .unknown(let why): queued.append(.send(Self.reply("550 5.1.1 <\(shown)> \(why)")))
        case .failed(let why): queued.append(.send(Self.reply("451 4.3.0 <\(shown)> \(why)")))
        }
    }

    /// The answer to `.deliver`: one outcome per accepted recipient, in their order.
    package mutating func delivered(_ outcomes: [Outcome]) {
        precondition(phase == .delivering && outcomes.count == accepted.count, "one outcome per recipient")
        for (recipient, outcome) in zip(accepted, outcomes) {
            let address = "<\(Self.shown(recipient.recipient.address))>"
            let line =
                switch outcome {
                case .delivered(let what): "250 2.0.0 \(address) \(what)"
                case .overLimit(let why): "552 5.3.4 \(address) \(why)"
                case .notAMessage(let why): "554 5.6.0 \(address) \(why)"
                case .failed(let why): "451 4.3.0 \(address) \(why)"
                }
            queued.append(.send(Self.reply(line)))
        }
        resetTransaction()
        phase = .command
        if stopping { close(with: "421 4.3.2 \(host) shutting down") }
    }

    /// The next thing to do.
    package mutating func step() -> Action {
        while true {
            if !queued.isEmpty { return queued.removeFirst() }
            switch phase {
            case .closing:
                phase = .closed
                return .close
            case .closed:
                return .close
            case .lookingUp(let recipient):
                return .lookUp(recipient)
            case .delivering:
                return .deliver(accepted)
            case .data:
                if let action = stepData() { return action }
            case .command, .discarding:
                if let action = stepCommand() { return action }
            }
        }
    }

    /// The next command line, handled; nil when it queued something or changed phase; `.read` when a whole line
    /// has not come yet.
    private mutating func stepCommand() -> Action? {
        guard let newline = input[position...].firstIndex(of: 0x0A) else {
            if input.count - position > limits.commandLine {
                phase = .discarding
                position = input.count
            }
            if inputEnded {
                phase = .closing
                return nil
            }
            return .read
        }
        var line = input[position..<newline]
        position = newline + 1
        if line.last == 0x0D { line = line.dropLast() }
        if phase == .discarding || line.count > limits.commandLine {
            phase = .command
            error("500 5.5.2 line too long: at most \(limits.commandLine) bytes")
        } else {
            handle(line)
        }
        return nil
    }

    private mutating func handle(_ line: ArraySlice<UInt8>) {
        let space = line.firstIndex(of: 0x20) ?? line.endIndex
        let verb = String(decoding: line[..<space], as: UTF8.self).uppercased()
        let argument = line[space...].drop { $0 == 0x20 }
        switch verb {
        case "LHLO":
            guard !argument.isEmpty else { return error("501 5.5.4 LHLO needs a domain") }
            greeted = true
            resetTransaction()
            let extensions = [
                "PIPELINING", "ENHANCEDSTATUSCODES", "8BITMIME", "SMTPUTF8", "SIZE \(limits.messageBytes)",
            ]
            queued.append(
                .send(
                    Self.reply(["250-\(host)"] + extensions.dropLast().map { "250-" + $0 } + ["250 " + extensions[4]])))
        case "HELO", "EHLO": error("500 5.5.1 this is LMTP: say LHLO")
        case "MAIL": mail(argument)
        case "RCPT": recipient(argument)
        case "DATA":
            guard argument.isEmpty else { return error("501 5.5.4 DATA takes no argument") }
            guard transaction else { return error("503 5.5.1 MAIL first") }
            guard !accepted.isEmpty else { return error("503 5.5.1 no valid recipients") }
            queued.append(.send(Self.reply("354 send the message, ending with <CRLF>.<CRLF>")))
            queued.append(.beginData)
            unstuffing = DataUnstuffing()
            dataBytes = 0
            phase = .data
        case "RSET":
            guard argument.isEmpty else { return error("501 5.5.4 RSET takes no argument") }
            resetTransaction()
            queued.append(.send(Self.reply("250 2.0.0 OK")))
        case "NOOP": queued.append(.send(Self.reply("250 2.0.0 OK")))
        case "VRFY":
            guard !argument.isEmpty else { return error("501 5.5.4 VRFY needs an address") }
            queued.append(.send(Self.reply("252 2.5.0 cannot verify, but will take the message and try")))
        case "QUIT": close(with: "221 2.0.0 \(host) closing")
        case "BDAT": error("502 5.5.1 BDAT is not offered")
        default: error("500 5.5.2 command not recognized")
        }
    }

    /// `MAIL FROM:<path> [SIZE=n] [BODY=7BIT|8BITMIME] [SMTPUTF8]`.
    private mutating func mail(_ argument: ArraySlice<UInt8>) {
        guard greeted else { return error("503 5.5.1 LHLO first") }
        guard !transaction else { return error("503 5.5.1 a transaction is open: RSET first") }
        guard let (_, parameters) = Self.path(after: "FROM:", in: argument) else {
            return error("501 5.5.4 syntax: MAIL FROM:<address>")
        }
        for parameter in parameters {
            let (key, value) = Self.keyword(parameter)
            switch (key, value) {
            case ("SIZE", let value?):
                guard let size = Int64(value) else { return error("501 5.5.4 SIZE needs a number") }
                guard size <= limits.messageBytes else {
                    queued.append(
                        .send(
                            Self.reply(
                                "552 5.3.4 a message of \(size) bytes is over the limit of \(limits.messageBytes)")))
                    return
                }
            case ("BODY", "7BIT"?), ("BODY", "8BITMIME"?), ("SMTPUTF8", nil): break
            default: return error("555 5.5.4 parameter not supported: \(Self.shown(Array(parameter.utf8)))")
            }
        }
        transaction = true
        queued.append(.send(Self.reply("250 2.1.0 OK")))
    }

    /// `RCPT TO:<address>`: looked up once the count allows it.
    private mutating func recipient(_ argument: ArraySlice<UInt8>) {
        guard transaction else { return error("503 5.5.1 MAIL first") }
        guard let (address, parameters) = Self.path(after: "TO:", in: argument), !address.isEmpty else {
            return error("501 5.5.4 syntax: RCPT TO:<address>")
        }
        guard parameters.isEmpty else {
            return error("555 5.5.4 parameter not supported: \(Self.shown(Array(parameters[0].utf8)))")
        }
        guard accepted.count < limits.recipients else {
            queued.append(.send(Self.reply("452 4.5.3 too many recipients: at most \(limits.recipients)")))
            return
        }
        phase = .lookingUp(Recipient(address: address, localPart: Self.localPart(of: address)))
    }

    private mutating func resetTransaction() {
        transaction = false
        accepted = []
    }

    /// A protocol error's reply; the last one allowed closes the session.
    private mutating func error(_ line: String) {
        queued.append(.send(Self.reply(line)))
        errors += 1
        if errors >= limits.errors { close(with: "421 4.7.0 \(host) too many errors, closing the session") }
    }

    private mutating func close(with line: String) {
        queued.append(.send(Self.reply(line)))
        phase = .closing
    }
}
