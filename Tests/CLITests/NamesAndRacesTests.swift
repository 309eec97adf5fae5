import Foundation
import Glibc
import TestSupport
import Testing

/// Byte-exact names and several processes at once, through the built binary.
@Suite struct NamesAndRacesTests {
    static let oddNames: [[UInt8]] = [
        Array("quarterly report final.pdf".utf8),
        Array("two\nlines.txt".utf8),
        [0x62, 0x61, 0x64, 0xFF, 0xFE, 0x2E, 0x62, 0x69, 0x6E],  // "bad\xff\xfe.bin"
        Array(String(repeating: "é", count: 125).utf8) + Array("x.pdf".utf8),  // 255 bytes
    ]

    @Test func tenThousandClashesStillFindAFreeName() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        // `same.txt` and `same-1.txt` … `same-10099.txt` taken in the Inbox; `same.txt` … `same 10100.txt` in
        // Documents. Clash naming used to give up at 10,000 tries.
        for (place, name) in [
            ("/Documents/Inbox/", { $0 == 0 ? "same.txt" : "same-\($0).txt" }),
            ("/Documents/", { $0 == 0 ? "same.txt" : "same \($0 + 1).txt" }),
        ] as [(String, (Int) -> String)] {
            for index in 0..<10_100 {
                let fd = open(container + place + name(index), O_CREAT | O_WRONLY | O_EXCL | O_CLOEXEC, 0o444)
                #expect(fd >= 0)
                close(fd)
            }
        }
        let source = try folder.file("same.txt", "one more")
        let delivered = try InboxProcess.run("--container", container, "deliver", source)
        #expect(delivered.status == 0, "\(delivered.stderr)")
        #expect(delivered.stdoutText == container + "/Documents/Inbox/same-12800.txt\n")
        let moved = try InboxProcess.run("--container", container, "move", "same.txt")
        #expect(moved.status == 0, "\(moved.stderr)")
        #expect(moved.stdoutText == container + "/Documents/same 12801.txt\n")
        #expect(!FileManager.default.fileExists(atPath: container + "/Documents/Inbox/same.txt"))
    }

    @Test(arguments: oddNames)
    func oddNamesSurviveDeliverMoveAndLogExactly(name: [UInt8]) throws {
        #expect(name.count <= 255)
        let folder = try Scratch()
        let container = try folder.initContainer()
        let source = Array(folder.path.utf8) + [0x2F] + name
        try writeFile(source, contents: Array("contents of an odd name".utf8))

        let delivered = try InboxProcess.run([
            Array("--container".utf8), Array(container.utf8), Array("deliver".utf8), source,
        ])
        #expect(delivered.status == 0, "\(delivered.stderr)")
        let inboxPath = Array((container + "/Documents/Inbox/").utf8) + name
        #expect(delivered.stdout == inboxPath + [0x0A])

        let moved = try InboxProcess.run([Array("--container".utf8), Array(container.utf8), Array("move".utf8), name])
        #expect(moved.status == 0, "\(moved.stderr)")
        let documentPath = Array((container + "/Documents/").utf8) + name
        #expect(moved.stdout == documentPath + [0x0A])
        #expect(try readFile(documentPath) == Array("contents of an odd name".utf8))

        let log = try InboxProcess.run("--container", container, "log", "--json", "--event", "moved")
        let record = try #require(
            try JSONSerialization.jsonObject(with: Data(log.stdout.split(separator: 0x0A).last ?? [])) as? [String: Any]
        )
        #expect(try loggedBytes(record, "from") == Array("Documents/Inbox/".utf8) + name)
        #expect(try loggedBytes(record, "to") == Array("Documents/".utf8) + name)
    }

    /// A logged path's exact bytes: `KEY_b64` when the name is not UTF-8, else `KEY`.
    private func loggedBytes(_ record: [String: Any], _ key: String) throws -> [UInt8] {
        if let encoded = record[key + "_b64"] as? String {
            #expect((record[key] as? String)?.contains("\u{FFFD}") == true)
            return Array(try #require(Data(base64Encoded: encoded)))
        }
        return Array(try #require(record[key] as? String).utf8)
    }

    @Test(arguments: [false, true])
    func sixteenProcessesMovingOneItemOneWins(hardLinked: Bool) throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        let source = try folder.file("contested.pdf", "%PDF-1.4 contested")
        if hardLinked {
            try FileManager.default.linkItem(atPath: source, toPath: container + "/Documents/Inbox/contested.pdf")
        } else {
            #expect(try InboxProcess.run("--container", container, "deliver", source).status == 0)
        }
        let children = try (0..<16).map { _ in
            try InboxProcess.start(["--container", container, "move", "contested.pdf"].map { Array($0.utf8) })
        }
        let results = try children.map { try $0.finish() }
        #expect(results.filter { $0.status == 0 }.count == 1, "\(results.map(\.stderr))")
        let losers = results.filter { $0.status != 0 }
        #expect(losers.count == 15)
        #expect(losers.allSatisfy { $0.status == 66 && $0.stderr.hasPrefix("inbox: ") })
        let documents = try FileManager.default.contentsOfDirectory(atPath: container + "/Documents").sorted()
        #expect(documents == ["Inbox", "contested.pdf"])
        let inbox = try FileManager.default.contentsOfDirectory(atPath: container + "/Documents/Inbox")
        #expect(inbox.isEmpty, "no claim or staging left: \(inbox)")
        #expect(
            try String(contentsOfFile: container + "/Documents/contested.pdf", encoding: .utf8) == "%PDF-1.4 contested")
    }

    @Test func fourProcessesAppendingAThousandRecordsEach() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        var batches: [[String]] = []
        for process in 0..<4 {
            batches.append(
                try (0..<1000).map { index in try folder.file("p\(process)/f\(index).txt", "\(process)-\(index)") })
        }
        let children = try batches.map { files in
            try InboxProcess.start((["--container", container, "deliver"] + files).map { Array($0.utf8) })
        }
        for result in try children.map({ try $0.finish() }) {
            #expect(result.status == 0, "\(result.stderr)")
            #expect(result.lines.count == 1000)
        }
        let log = try String(
            contentsOfFile: container + "/Library/Application Support/inbox/events.jsonl", encoding: .utf8)
        let lines = log.split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines.last == "", "the log ends with a newline")
        var seqs: [Int] = []
        var delivered = 0
        for line in lines.dropLast() {
            let record = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            seqs.append(try #require(record["seq"] as? Int))
            if record["event"] as? String == "delivered" { delivered += 1 }
        }
        #expect(delivered == 4000)
        #expect(zip(seqs, seqs.dropFirst()).allSatisfy { $0 < $1 }, "seq strictly increases in file order")
        #expect(Set(seqs).count == seqs.count)
        let inbox = try FileManager.default.contentsOfDirectory(atPath: container + "/Documents/Inbox")
        #expect(inbox.count == 4000, "f0.txt from four folders: unique names, nothing lost")
    }

    private func writeFile(_ path: [UInt8], contents: [UInt8]) throws {
        let fd = (path.map { CChar(bitPattern: $0) } + [0]).withUnsafeBufferPointer {
            open($0.baseAddress!, O_CREAT | O_WRONLY | O_EXCL | O_CLOEXEC, 0o644)
        }
        guard fd >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        defer { close(fd) }
        #expect(contents.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) } == contents.count)
    }

    private func readFile(_ path: [UInt8]) throws -> [UInt8] {
        let fd = (path.map { CChar(bitPattern: $0) } + [0]).withUnsafeBufferPointer {
            open($0.baseAddress!, O_RDONLY | O_CLOEXEC)
        }
        guard fd >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 65536)
        let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        return Array(buffer[..<max(count, 0)])
    }
}
