import Foundation
import TestSupport
import Testing

/// `inbox deliver` with a file missing in the middle: it prints what it delivered, then the error.
@Suite struct DeliverBatchCommandTests {
    @Test func printsWhatItPlacedBeforeTheError() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        let first = try folder.file("a.txt", "a")
        let last = try folder.file("b.txt", "b")

        let result = try InboxProcess.run("--container", container, "deliver", first, folder.path + "/gone.txt", last)

        #expect(result.status == 66)
        #expect(result.lines == [container + "/Documents/Inbox/a.txt"])
        #expect(result.stderr.hasPrefix("inbox: ") && result.stderr.contains("gone.txt"), "\(result.stderr)")
        let log = try InboxProcess.run("--container", container, "log", "--event", "delivered")
        #expect(log.lines.count == 1 && log.lines[0].contains("Documents/Inbox/a.txt"), "\(log.lines)")
    }
}
