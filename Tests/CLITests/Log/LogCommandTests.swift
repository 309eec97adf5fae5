import Foundation
import TestSupport
import Testing

/// `inbox log` against a log that real commands wrote.
@Suite struct LogCommandTests {
    /// A container whose log holds seq 1 to 5: one-time setup (run by `init`), the deliveries of `names` and the
    /// move of the second.
    static func loggedContainer(_ folder: Scratch, _ names: [String] = ["a.txt", "b.txt", "c.txt"]) throws
        -> String
    {
        let container = try folder.initContainer()
        let files = try names.map { try folder.file($0, $0) }
        #expect(
            try InboxProcess.run((["--container", container, "deliver"] + files).map { Array($0.utf8) }).status == 0)
        #expect(try InboxProcess.run("--container", container, "move", names[1]).status == 0)
        return container
    }

    private func loggedContainer(_ folder: Scratch) throws -> String { try Self.loggedContainer(folder) }

    @Test func jsonPrintsEveryRecordInOrder() throws {
        let folder = try Scratch()
        let container = try loggedContainer(folder)
        let result = try InboxProcess.run("--container", container, "log", "--json")
        #expect(result.status == 0)
        let records = try result.lines.map { line in
            try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        }
        #expect(
            records.compactMap { $0["event"] as? String } == ["setup", "delivered", "delivered", "delivered", "moved"])
        #expect(records.compactMap { $0["seq"] as? Int } == [1, 2, 3, 4, 5])
        #expect(records.last?["from"] as? String == "Documents/Inbox/b.txt")
        #expect(records.last?["to"] as? String == "Documents/b.txt")
        #expect(records.allSatisfy { ($0["time"] as? String)?.hasSuffix("Z") == true })
        #expect(result.lines.first?.hasPrefix(#"{"seq":1,"time":""#) == true, "keys in a stable order")
    }

    @Test func sinceAndEventFilter() throws {
        let folder = try Scratch()
        let container = try loggedContainer(folder)
        let since = try InboxProcess.run("--container", container, "log", "--json", "--since", "3")
        #expect(since.lines.count == 2)
        #expect(since.lines.first?.hasPrefix(#"{"seq":4,"#) == true)
        let moved = try InboxProcess.run("--container", container, "log", "--event", "moved")
        #expect(moved.status == 0)
        #expect(moved.lines.count == 1)
        #expect(moved.lines.first?.contains("moved") == true)
        #expect(
            moved.lines.first?.contains(
                #"moved  from="Documents/Inbox/b.txt" to="Documents/b.txt" reason="move" id=""#) == true,
            "fields in the record's order, the item's identity last: \(moved.lines)")
        let two = try InboxProcess.run("--container", container, "log", "--json", "--event", "moved,delivered")
        #expect(two.lines.count == 4)
    }

    @Test func followPrintsRecordsAsTheyAreAppended() throws {
        let folder = try Scratch()
        let container = try loggedContainer(folder)
        let follower = try InboxProcess.start(
            ["--container", container, "log", "--follow", "--json", "--since", "5"].map { Array($0.utf8) })
        let late = try folder.file("late.txt", "late")
        #expect(try InboxProcess.run("--container", container, "deliver", late).status == 0)
        let seen = follower.readStdout { $0.contains("late.txt") }
        _ = follower.terminate()
        #expect(seen.contains(#""seq":6"#))
        #expect(seen.contains("Documents/Inbox/late.txt"))
        #expect(!seen.contains(#""seq":5"#), "--since is honoured while following")
    }
}
