import AppContainer
import Glibc
import InboxKit
import Synchronization

/// `inbox lmtp`'s accept loop (DESIGN §14): at most `sessions` connections served at once, each on a thread of its
/// own (more wait in the listen queue). `stop()` (SIGTERM) ends it: the listening sockets are closed, every session
/// outside a message's data gets `421 4.3.2` at once, those inside it finish and answer the data, and `run` returns
/// once all have ended.
package final class LMTPServer: Sendable {
    private let session: LMTPSession
    private let sessions: Int
    /// Readable for good once `stop()` wrote to it: the loop and every session outside the data poll it.
    private let stopping: (read: CInt, write: CInt)
    /// Written by each session that ends, to wake the loop.
    private let ended: (read: CInt, write: CInt)
    private let running = Mutex(0)

    package init(settings: LMTPSession.Settings, sessions: Int) throws(ContainerError) {
        session = LMTPSession(settings: settings)
        self.sessions = sessions
        do {
            stopping = try system_pipe()
            ended = try system_pipe()
            try system_fcntl_setfl(ended.read, O_NONBLOCK)
            try system_fcntl_setfl(ended.write, O_NONBLOCK)
        } catch {
            throw ContainerError(.failure, "cannot make the pipes of the LMTP server: \(error)", cause: error)
        }
    }

    deinit {
        for fd in [stopping.read, stopping.write, ended.read, ended.write] { try? system_close(fd) }
    }

    /// Asks `run` to stop; safe from any thread.
    package func stop() {
        do {
            _ = try [UInt8(1)].withUnsafeBytes { raw in
                Result { () throws(Errno) in try system_write(stopping.write, raw) }
            }.get()
        } catch {
            session.settings.report("lmtp: cannot stop: \(error)")
        }
    }

    /// Serves `listeners` until `stop()`, then waits for the sessions to end. Throws only when nothing can be
    /// accepted any more.
    package func run(_ listeners: [LMTPListener]) throws(ContainerError) {
        defer { for listener in listeners { listener.close() } }
        /// Set when a connection could not be taken (no descriptor, no thread): the listeners rest until a session
        /// ends or a second passes, rather than wake the loop again at once.
        var resting = false
        while true {
            let full = running.withLock { $0 } >= sessions
            var pollers = [stopping.read, ended.read].map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            if !full && !resting { pollers += listeners.map { pollfd(fd: $0.fd, events: Int16(POLLIN), revents: 0) } }
            do {
                _ = try system_poll(&pollers, timeout: resting ? 1000 : -1)
            } catch {
                throw ContainerError(.failure, "cannot wait for LMTP connections: \(error)", cause: error)
            }
            if pollers[0].revents != 0 { break }
            if pollers[1].revents != 0 { drainEnded() }
            if resting {
                resting = false
                continue
            }
            for (listener, poller) in zip(listeners, pollers.dropFirst(2)) where poller.revents != 0 {
                if !accept(on: listener) { resting = true }
            }
        }
        // No more connections: a client now finds nothing listening and tries again later.
        for listener in listeners { listener.close() }
        while running.withLock({ $0 }) > 0 {
            var poller = [pollfd(fd: ended.read, events: Int16(POLLIN), revents: 0)]
            // Woken by the last session's byte; a failed poll (ENOMEM) looks again.
            _ = try? system_poll(&poller, timeout: -1)
            drainEnded()
        }
    }

    /// Takes one waiting connection and serves it on a thread of its own; false when it could not (said on the
    /// report), and the connection waits or was closed.
    private func accept(on listener: LMTPListener) -> Bool {
        let connection: CInt
        do {
            connection = try system_accept(listener.fd)
        } catch .wouldBlock, .connectionAborted {
            return true
        } catch {
            session.settings.report("lmtp: cannot accept a connection on \(listener.address.description): \(error)")
            return false
        }
        running.withLock { $0 += 1 }
        do {
            try startDetachedThread(name: "inbox-lmtp") { [self] in
                session.serve(connection, stop: stopping.read)
                try? system_close(connection)
                running.withLock { $0 -= 1 }
                // The loop may be asleep on a full house.
                _ = try? [UInt8(1)].withUnsafeBytes { raw in
                    Result { () throws(Errno) in try system_write(ended.write, raw) }
                }.get()
            }
        } catch {
            running.withLock { $0 -= 1 }
            session.settings.report("lmtp: cannot start a session: \(error)")
            // The MTA finds the connection closed before a greeting and tries again later.
            try? system_close(connection)
            return false
        }
        return true
    }

    /// Empties the pipe sessions write to as they end (non-blocking: stops at EAGAIN).
    private func drainEnded() {
        var buffer = [UInt8](repeating: 0, count: 64)
        while true {
            let count = buffer.withUnsafeMutableBytes { raw in
                Result { () throws(Errno) in try system_read(ended.read, into: raw) }
            }
            guard case .success(let read) = count, read > 0 else { return }
        }
    }
}
