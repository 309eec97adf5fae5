import Dispatch

/// SIGINT and SIGTERM are the process's: the tests whose watchers catch them take turns, or one would find
/// another's handler where it expects the one from before.
package enum SignalTurns {
    private static let semaphore = DispatchSemaphore(value: 1)

    /// Waits for the turn without holding a thread of the tests' pool.
    package static func take() async {
        await withCheckedContinuation { (turn: CheckedContinuation<Void, Never>) in
            DispatchQueue.global().async {
                semaphore.wait()
                turn.resume()
            }
        }
    }

    package static func give() {
        semaphore.signal()
    }
}
