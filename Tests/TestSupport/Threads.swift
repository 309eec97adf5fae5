import Dispatch
import Foundation
import Glibc
import Synchronization

/// A value shared between threads.
package final class Guarded<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>

    package init(_ value: Value) { mutex = Mutex(value) }

    package func update<R: Sendable>(_ body: @Sendable (inout Value) -> R) -> R { mutex.withLock { body(&$0) } }

    package var value: Value { mutex.withLock { $0 } }
}

/// Runs `body(0)`, …, `body(count - 1)` each on its own thread, all let go at the same moment,
/// and returns when every one has finished. Threads, not tasks: the calls block in system calls.
package func onThreads(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) async {
    let gate = DispatchSemaphore(value: 0)
    let finished = DispatchGroup()
    for index in 0..<count {
        finished.enter()
        let thread = Thread {
            gate.wait()
            body(index)
            finished.leave()
        }
        thread.stackSize = 1 << 20
        thread.start()
    }
    for _ in 0..<count { gate.signal() }
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        finished.notify(queue: .global()) { continuation.resume() }
    }
}

/// The regular files under `folder` (a path ending in `/`) that this process holds open, by their paths now.
package func openDescriptors(under folder: String) -> [String] {
    let descriptors = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
    return descriptors.compactMap { descriptor in
        let link = "/proc/self/fd/\(descriptor)"
        var file = stat()
        guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: link), target.hasPrefix(folder),
            stat(link, &file) == 0, file.st_mode & S_IFMT == S_IFREG
        else { return nil }
        return String(target.dropFirst(folder.count))
    }.sorted()
}

/// The names of this process's threads.
package func threadNames() -> [String] {
    let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
    return tasks.compactMap { task in
        (try? String(contentsOfFile: "/proc/self/task/\(task)/comm", encoding: .utf8))?
            .trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
