import AppContainer
import Dispatch
import FoundationEssentials
import Synchronization

/// Runs the `--exec` command for each item of a batch, at most `jobs` at once: each by its name in the Inbox at
/// `inboxPath` and its open descriptor (the command's stdin); the outcomes in the order of `items`.
enum HookPool {
    static func run(_ hooks: HookRunner, on items: [(name: FileName, file: CInt)], inboxPath: [UInt8], jobs: Int)
        -> [HookOutcome]
    {
        let work = items.map {
            (path: inboxPath + [0x2F] + $0.name.bytes, name: $0.name, fd: $0.file)
        }
        let next = Mutex(0)
        let results = Mutex([HookOutcome?](repeating: nil, count: work.count))
        let done = DispatchGroup()
        let worker: @Sendable () -> Void = {
            while true {
                let index = next.withLock { value -> Int in
                    defer { value += 1 }
                    return value
                }
                guard index < work.count else { break }
                let item = work[index]
                let outcome = hooks.run(itemPath: item.path, name: item.name, file: item.fd)
                results.withLock { $0[index] = outcome }
            }
            done.leave()
        }
        for _ in 0..<max(1, min(jobs, work.count)) {
            done.enter()
            do throws(Errno) {
                try startDetachedThread(name: "inbox-hook", worker)
            } catch {
                worker()  // no thread to be had: this one takes its share
            }
        }
        done.wait()
        return results.withLock { $0 }.compactMap { $0 }  // every index was filled once
    }
}
