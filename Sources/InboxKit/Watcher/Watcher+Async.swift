import AppContainer
import Dispatch
import FoundationEssentials
import Synchronization

/// A library handler that may `await` while it decides.
public protocol AsyncArrivalHandler: Sendable {
    /// What becomes of `arrival`. Asked at most once per arrival (ARCHITECTURE.md, "Each answer once"), from the
    /// watcher's own thread, which waits for the answer.
    func handle(_ arrival: Arrival) async -> Disposition
}

extension Watcher {
    /// A watcher whose handler is asynchronous: the pipeline's own thread waits for each answer, so the handler
    /// may await anything but the watcher itself.
    public convenience init(inbox: Inbox, options: WatchOptions = WatchOptions(), asyncHandler: any AsyncArrivalHandler)
    {
        self.init(inbox: inbox, options: options, handler: AwaitedHandler(handler: asyncHandler))
    }

    /// Runs as `runBlocking()` does, on a thread of its own, so the calling task's thread stays free (for a task that reads
    /// `arrivals`, say). Cancelling the task stops the watcher as `stop()` does.
    public func run() async throws(ContainerError) {
        let outcome: Result<Void, ContainerError> = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                do throws(Errno) {
                    try startDetachedThread { [self] in
                        continuation.resume(returning: Result { () throws(ContainerError) in try runBlocking() })
                    }
                } catch {
                    continuation.resume(returning: .failure(error.failure("start a thread for", "the watcher")))
                }
            }
        } onCancel: {
            stop()
        }
        try outcome.get()
    }
}

/// An `AsyncArrivalHandler` asked from the pipeline's thread, which waits for its answer.
private struct AwaitedHandler: ArrivalHandler {
    let handler: any AsyncArrivalHandler

    func handle(_ arrival: Arrival) -> Disposition {
        let answer = Mutex(Disposition.keep)
        let answered = DispatchSemaphore(value: 0)
        Task {
            let disposition = await handler.handle(arrival)
            answer.withLock { $0 = disposition }
            answered.signal()
        }
        answered.wait()
        return answer.withLock { $0 }
    }
}
