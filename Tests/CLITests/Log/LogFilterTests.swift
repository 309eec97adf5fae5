import Foundation
import Glibc
import TestSupport
import Testing

/// `log -n`, `--until`, `--path`, and `--follow` ending with its reader (ARCHITECTURE.md, "The command line").
@Suite struct LogFilterTests {
    /// seq 1 setup, 2–4 delivered a.txt, b.pdf, c.pdf, 5 moved b.pdf.
    private func loggedContainer(_ folder: Scratch) throws -> String {
        try LogCommandTests.loggedContainer(folder, ["a.txt", "b.pdf", "c.pdf"])
    }

    private func seqs(_ container: String, _ arguments: String...) throws -> [Int] {
        let result = try InboxProcess.run(
            (["--container", container, "log", "--json"] + arguments).map { Array($0.utf8) })
        #expect(result.status == 0, "\(arguments): \(result.stderr)")
        return try result.lines.map { line in
            let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            return try #require(object["seq"] as? Int)
        }
    }

    @Test func lastUntilAndPathSelectRecords() throws {
        let folder = try Scratch()
        let container = try loggedContainer(folder)
        #expect(try seqs(container, "-n", "2") == [4, 5])
        #expect(try seqs(container, "-n", "0") == [])
        #expect(try seqs(container, "-n", "99") == [1, 2, 3, 4, 5])
        #expect(try seqs(container, "--until", "3") == [1, 2, 3])
        #expect(try seqs(container, "--since", "2", "--until", "4") == [3, 4])
        #expect(try seqs(container, "--until", "4", "-n", "1") == [4])
        #expect(try seqs(container, "--path", "*.pdf") == [3, 4, 5], "path, from or to")
        #expect(try seqs(container, "--path", "Documents/b.pdf") == [5], "the move's `to`")
        #expect(try seqs(container, "--path", "Documents/Inbox/?.txt") == [2])
        #expect(try seqs(container, "--path", "*.pdf", "--event", "delivered", "-n", "1") == [4])
        let bad = try InboxProcess.run("--container", container, "log", "-n", "many")
        #expect(bad.status == 64)
    }

    @Test func aShortOptionTakesItsValueAttached() throws {
        let folder = try Scratch()
        let container = try loggedContainer(folder)
        #expect(try seqs(container, "-n2") == [4, 5])
        #expect(try seqs(container, "-n0") == [])
        #expect(try seqs(container, "--until", "4", "-n1") == [4])
        let bad = try InboxProcess.run("--container", container, "log", "-nmany")
        #expect(bad.status == 64)
        #expect(bad.stderr.hasPrefix("inbox: '-n' needs a whole number, not 'many'"), "\(bad.stderr)")
        // A flag takes nothing attached: `-0x` is not `-0` with a value.
        let flag = try InboxProcess.run("--container", container, "deliver", "-0x", "/nonexistent")
        #expect(flag.status == 64)
        #expect(flag.stderr.hasPrefix("inbox: unknown option '-0x'"), "\(flag.stderr)")
    }

    @Test func followWithLastPrintsTheLastNThenNewRecords() throws {
        let folder = try Scratch()
        let container = try loggedContainer(folder)
        let follower = try InboxProcess.start(
            ["--container", container, "log", "--follow", "--json", "-n", "1"].map { Array($0.utf8) })
        _ = follower.readStdout { $0.contains(#""seq":5"#) }
        #expect(try InboxProcess.run("--container", container, "deliver", try folder.file("d.txt", "d")).status == 0)
        let seen = follower.readStdout { $0.contains("d.txt") }
        _ = follower.terminate()
        #expect(seen.contains(#""seq":6"#))
        #expect(!seen.contains(#""seq":4"#))
    }

    @Test func followUntilStopsOnceTheLogIsPastIt() throws {
        let folder = try Scratch()
        let container = try loggedContainer(folder)
        let done = try InboxProcess.run("--container", container, "log", "--follow", "--until", "3")
        #expect(done.status == 0)
        #expect(done.lines.count == 3)
        let follower = try InboxProcess.start(
            ["--container", container, "log", "--follow", "--json", "--until", "6"].map { Array($0.utf8) })
        #expect(try InboxProcess.run("--container", container, "deliver", try folder.file("d.txt", "d")).status == 0)
        let status = follower.exitStatus(within: 20)
        #expect(status == 0, "exits on its own once seq 6 is read")
        if status == nil { _ = follower.terminate() }
        // Record 7 is a move, not a delivery: the follower still stops there, printing nothing of it.
        let kind = try InboxProcess.start(
            ["--container", container, "log", "--follow", "--event", "delivered", "--since", "6", "--until", "7"].map {
                Array($0.utf8)
            })
        #expect(try InboxProcess.run("--container", container, "move", "d.txt").status == 0)
        let kindStatus = kind.exitStatus(within: 20)
        #expect(kindStatus == 0, "stops at seq 7 though it is of another kind")
        if kindStatus == nil { _ = kind.terminate() }
    }

    /// `inbox log --follow | head -1`: once head has its line and closes the pipe, the follower exits though
    /// no new record comes for it to fail writing (with `--since 4` it has printed all it had), and exits 0
    /// too when the reader leaves while it is still writing.
    @Test(arguments: [["--since", "4"], []])
    func followExitsWhenItsReaderClosesThePipe(arguments: [String]) throws {
        let folder = try Scratch()
        let container = try loggedContainer(folder)
        let follower = try InboxProcess.start(
            (["--container", container, "log", "--follow"] + arguments).map { Array($0.utf8) })
        let first = follower.readStdout { $0.contains("\n") }
        #expect(first.hasPrefix(arguments.isEmpty ? "1  " : "5  "))
        follower.closeStdout()
        let status = follower.exitStatus(within: 10)
        #expect(status == 0, "still running 10 s after its reader left, or killed")
        if status == nil { _ = follower.terminate() }
    }
}
