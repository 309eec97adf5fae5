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
        var listening = listeners
        defer { listening.removeAll() }
        while true {
            let full = running.withLock { $0 } >= sessions
            var pollers = [stopping.read, ended.read].map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            if !full { pollers += listening.map { pollfd(fd: $0.socket.rawValue, events: Int16(POLLIN), revents: 0) } }
            do {
                _ = try system_poll(&pollers, timeout: -1)
            } catch {
                throw ContainerError(.failure, "cannot wait for LMTP connections: \(error)", cause: error)
            }
            if pollers[0].revents != 0 { break }
            if pollers[1].revents != 0 { drainEnded() }
            for (listener, poller) in zip(listening, pollers.dropFirst(2)) where poller.revents != 0 {
                accept(on: listener)
            }
        }
        // No more connections: a client now finds nothing listening and tries again later.
        listening.removeAll()
        while running.withLock({ $0 }) > 0 {
            var poller = [pollfd(fd: ended.read, events: Int16(POLLIN), revents: 0)]
            // Woken by the last session's byte; a failed poll (ENOMEM) looks again.
            _ = try? system_poll(&poller, timeout: -1)
            drainEnded()
        }
    }

    /// Takes one waiting connection and serves it on a thread of its own.
    private func accept(on listener: LMTPListener) {
        let connection: CInt
        do {
            connection = try system_accept(listener.socket.rawValue)
        } catch .wouldBlock, .connectionAborted {
            return
        } catch {
            session.settings.report("lmtp: cannot accept a connection on \(listener.address.description): \(error)")
            return
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
            try? system_close(connection)
        }
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
