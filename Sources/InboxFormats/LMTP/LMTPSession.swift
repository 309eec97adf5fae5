import AppContainer
import Glibc
import InboxKit

/// One LMTP connection served on the calling thread: `LMTPProtocol` driven over the socket, the data streamed to
/// an unnamed temporary file, each recipient looked up and delivered into (DESIGN §14).
package struct LMTPSession: Sendable {
    /// What every session of a server shares.
    package struct Settings: Sendable {
        /// This host's name, in the greeting.
        package var host: String
        package var limits: LMTPProtocol.Limits
        /// How long a session may say nothing before it is closed (`421 4.4.2`).
        package var idle: Duration = .seconds(300)
        package var recipients: LMTPRecipients
        package var delivery: LMTPDelivery
        /// Where lines about failed deliveries go (stderr, the journal).
        package var report: @Sendable (String) -> Void = { _ in }

        package init(host: String, limits: LMTPProtocol.Limits, recipients: LMTPRecipients, delivery: LMTPDelivery) {
            self.host = host
            self.limits = limits
            self.recipients = recipients
            self.delivery = delivery
        }
    }

    package let settings: Settings

    package init(settings: Settings) { self.settings = settings }

    /// Serves the connected `socket` until the session closes; `stop` becomes readable on SIGTERM.
    package func serve(_ socket: CInt, stop: CInt) {
        var machine = LMTPProtocol(host: settings.host, limits: settings.limits)
        var connection = Connection(socket: socket, idle: settings.idle)
        var message: Message?
        /// The file the last message was written into, for the next.
        var spool: SharedDescriptor?
        let delivery = settings.delivery.session()
        while true {
            switch machine.step() {
            case .send(let reply):
                connection.queue(reply)
            case .read:
                guard connection.flush() else { return }
                switch connection.wait(stop: machine.isInsideData ? nil : stop) {
                case .bytes(let bytes): machine.receive(bytes)
                case .ended: machine.endOfInput()
                case .idle: machine.timedOut()
                case .stopping: machine.shutDown()
                }
            case .lookUp(let recipient):
                machine.answer(settings.recipients.lookUp(recipient.localPart))
            case .beginData:
                message = Message(reusing: spool)
            case .write(let bytes):
                message?.write(bytes)
            case .deliver(let recipients):
                let outcomes =
                    message?.deliver(to: recipients, by: delivery)
                    ?? recipients.map { _ in .failed("no data") }
                spool = message?.spool
                message = nil
                for (recipient, outcome) in zip(recipients, outcomes) { report(outcome, recipient) }
                machine.delivered(outcomes)
            case .close:
                _ = connection.flush()
                return
            }
        }
    }

    /// A line for each recipient not answered 250.
    private func report(_ outcome: LMTPProtocol.Outcome, _ recipient: LMTPProtocol.Accepted) {
        let why: String
        switch outcome {
        case .delivered: return
        case .overLimit(let reason), .notAMessage(let reason): why = "refused: " + reason
        case .failed(let reason): why = "not delivered (the MTA tries again): " + reason
        }
        settings.report("lmtp: a message for <\(LMTPProtocol.shown(recipient.recipient.address))> \(why)")
    }
}

/// The message of a transaction, in an unnamed temporary file; a failure to write it fails every recipient's
/// delivery (451), but the data is still read to its end. A session writes each message into the file of the one
/// before, from its start (a file made and removed a message costs the filesystem an inode each time), unless that
/// one grew past `keptBytes`.
private struct Message {
    private var file: SharedDescriptor?
    private var written: Int64 = 0
    private var failure: ContainerError?

    /// The largest file a session keeps for its next message.
    static let keptBytes: Int64 = 4 << 20

    /// A message written into `spool` (the last message's file, if kept), else into a new file.
    init(reusing spool: SharedDescriptor?) {
        if let spool {
            file = spool
            return
        }
        do {
            file = try TemporaryCopy.empty(shown: "a message received over LMTP")
        } catch {
            failure = error
        }
    }

    mutating func write(_ bytes: [UInt8]) {
        guard let file else { return }
        do {
            try file.descriptor.writeAll(bytes, at: written)
            written += Int64(bytes.count)
        } catch {
            fail(error)
        }
    }

    /// Cuts what an earlier, longer message left past this one's end, then imports the file for each recipient.
    mutating func deliver(to recipients: [LMTPProtocol.Accepted], by delivery: LMTPDelivery.Session)
        -> [LMTPProtocol.Outcome]
    {
        if let file {
            do throws(Errno) { try system_ftruncate(file.rawValue, written) } catch { fail(error) }
        }
        guard let file else { return recipients.map { _ in .failed(failure?.message ?? "no message") } }
        return delivery.deliver(file.rawValue, to: recipients)
    }

    /// The file for the session's next message: this one, unless it grew past `keptBytes` or failed.
    var spool: SharedDescriptor? { written <= Self.keptBytes ? file : nil }

    private mutating func fail(_ error: Errno) {
        failure = error.failure("write a message received over LMTP into", "a temporary file")
        file = nil
    }
}

/// The socket of a session: replies gathered and sent before each read, reads waited for up to the idle time.
private struct Connection {
    let socket: CInt
    let idle: Duration
    private var outgoing: [UInt8] = []
    private var buffer = [UInt8](repeating: 0, count: 64 * 1024)

    init(socket: CInt, idle: Duration) {
        self.socket = socket
        self.idle = idle
    }

    enum Input {
        case bytes(ArraySlice<UInt8>)
        case ended
        case idle
        case stopping
    }

    mutating func queue(_ bytes: [UInt8]) { outgoing += bytes }

    /// Sends what is queued; false when the peer is gone or stopped reading for the idle time.
    mutating func flush() -> Bool {
        defer { outgoing.removeAll(keepingCapacity: true) }
        var sent = 0
        while sent < outgoing.count {
            do {
                sent += try outgoing[sent...].withUnsafeBytes { raw in
                    Result { () throws(Errno) in try system_send(socket, raw) }
                }.get()
            } catch .wouldBlock {
                // The peer's buffer is full: wait until it reads, at most the idle time.
                var poller = [pollfd(fd: socket, events: Int16(POLLOUT), revents: 0)]
                do {
                    guard try system_poll(&poller, timeout: milliseconds) == 1 else { return false }
                } catch {
                    return false
                }
            } catch {
                return false
            }
        }
        return true
    }

    /// The next bytes read, the connection's end, the idle time passed, or `stop` readable.
    mutating func wait(stop: CInt?) -> Input {
        var pollers = [pollfd(fd: socket, events: Int16(POLLIN), revents: 0)]
        if let stop { pollers.append(pollfd(fd: stop, events: Int16(POLLIN), revents: 0)) }
        do {
            guard try system_poll(&pollers, timeout: milliseconds) > 0 else { return .idle }
            if pollers.count > 1 && pollers[1].revents != 0 { return .stopping }
            let count = try buffer.withUnsafeMutableBytes { raw in
                Result { () throws(Errno) in try system_read(socket, into: raw) }
            }.get()
            return count == 0 ? .ended : .bytes(buffer[..<count])
        } catch {
            // A reset connection (ECONNRESET) or any other failure to read ends it.
            return .ended
        }
    }

    private var milliseconds: CInt {
        let (seconds, attoseconds) = idle.components
        return CInt(clamping: seconds * 1000 + attoseconds / 1_000_000_000_000_000)
    }
}
