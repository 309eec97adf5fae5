import AppContainer
import Foundation
import Glibc
import TestSupport
import Testing

@testable import InboxKit

/// Where a watcher serves a container, cleanup deletes only the Inbox items the watcher is done with
/// (ARCHITECTURE.md, "Settled before cleaned"), whichever process cleans.
@Suite struct SettledCleanupTests {
    /// A container a watcher has served: `kept.txt` arrived and kept; then `new.txt` delivered and not yet
    /// arrived, `decided.txt` arrived to be moved (as a failed move leaves it), `asked.txt` arrived with its
    /// hook not yet answered.
    private func servedContainer() throws -> Scratch {
        let scratch = try Scratch.withInbox()
        _ = try scratch.inbox.deliver(data: Data("kept\n".utf8), suggestedName: "kept.txt")
        var options = WatchOptions()
        options.once = true
        try Watcher(inbox: scratch.inbox, options: options).runBlocking()
        for item in ["new.txt", "decided.txt", "asked.txt"] {
            _ = try scratch.inbox.deliver(data: Data(item.utf8), suggestedName: item)
        }
        func arrived(_ item: String, _ field: String, _ value: String) throws -> Event {
            let id = Identity(try status(scratch.inboxPath(item))).text
            return Event(
                .arrived,
                [
                    "path": .path(scratch.inbox.loggedPath(.inbox, try name(item))), "id": .string(id),
                    field: .string(value),
                ])
        }
        _ = try scratch.inbox.log.append(
            [try arrived("decided.txt", "disposition", "move"), try arrived("asked.txt", "handler", "exec")])
        return scratch
    }

    /// An hour from now, when every item is older than an age limit of 0 (a ctime cannot be set back).
    private let inAnHour = Timestamp(seconds: Int64(time(nil)) + 3600, nanoseconds: 0)

    @Test(arguments: ["age", "size"])
    func onlyTheItemsTheWatcherIsDoneWithGo(rule: String) throws {
        let scratch = try servedContainer()
        defer { scratch.remove() }
        var policy = Preferences()
        if rule == "age" { policy.inboxMaxAge = 0 } else { policy.inboxMaxBytes = 0 }
        // From another process's point of view: no watcher runs now.
        let plan = CleanupPlan(container: scratch.container, policy: policy, appIsRunning: false, now: inAnHour)
        #expect(try plan.entries().map { $0.components.map(\.string) } == [["kept.txt"]])
        let summary = try plan.execute(log: scratch.inbox.log) { _ in }
        #expect(summary.deleted == 1)
        #expect(try scratch.inboxEntries().sorted() == ["asked.txt", "decided.txt", "new.txt"])
    }

    @Test func whereNoWatcherServesEveryItemMayGo() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        for item in ["a.txt", "b.txt"] { _ = try scratch.inbox.deliver(data: Data(item.utf8), suggestedName: item) }
        var policy = Preferences()
        policy.inboxMaxBytes = 0
        let summary = try CleanupPlan(container: scratch.container, policy: policy, appIsRunning: false)
            .execute(log: scratch.inbox.log) { _ in }
        #expect(summary.deleted == 2)
        #expect(try scratch.inboxEntries().isEmpty)
    }
}
