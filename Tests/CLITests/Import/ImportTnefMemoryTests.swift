import Foundation
import Glibc
import TestSupport
import Testing

/// A winmail.dat within `inbox import`'s 64 MiB for any message (ARCHITECTURE.md, "Mail import", TNEF): one over
/// the bound delivered as it is with `not_expanded` in its record, several decoded one at a time, small ones
/// expanded as before. The peak is the import process's own (`InboxProcess.runMeasuringPeak`).
@Suite struct ImportTnefMemoryTests {
    static let generator = TestPaths.oracle("tnef_message.py")
    static let memoryBound = 64 << 20

    /// Writes a message of winmail.dat parts (`Tests/Oracle/tnef_message.py`: each an array of file names and
    /// sizes) and returns its path and what the generator says of it: `winmail` and `files`, each with `size` and
    /// `sha256` (and `name` for a file).
    static func message(in folder: Scratch, as name: String = "winmail.eml", _ winmails: [[(String, Int)]])
        throws -> (path: String, winmail: [[String: Any]], files: [[String: Any]])
    {
        let path = folder.path + "/" + name
        let python = try runProgram(
            "/usr/bin/python3",
            [generator, path] + winmails.map { $0.map { "\($0.0):\($0.1)" }.joined(separator: ",") })
        try #require(python.status == 0)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(python.stdout)) as? [String: Any])
        return (
            path, try #require(object["winmail"] as? [[String: Any]]), try #require(object["files"] as? [[String: Any]])
        )
    }

    static func attachments(_ result: InboxProcess.Result) throws -> [[String: Any]] {
        let objects = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout)) as? [[String: Any]])
        try #require(objects.count == 1)
        #expect(objects[0]["status"] as? String == "imported")
        return try #require(objects[0]["attachments"] as? [[String: Any]])
    }

    @Test func aWinmailDatOverTheBoundIsDeliveredAsItIsWithARecordUnder64MiB() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        // Over the bound (16 MiB); just under it, the most an expanded one costs; small.
        let (path, winmail, files) = try Self.message(
            in: folder,
            [
                [("big.bin", 40 << 20)], [("at-bound.bin", (16 << 20) - 1024)],
                [("report.txt", 100), ("figure.png", 70_000)],
            ])

        let (result, peak) = try InboxProcess.runMeasuringPeak(["--container", container, "import", "--json", path])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(peak < Self.memoryBound, "peak RSS \(peak >> 20) MiB")
        let attachments = try Self.attachments(result)
        // The large one as it is, the others replaced by their files, as before.
        #expect(
            attachments.map { $0["name"] as? String } == ["winmail.dat", "at-bound.bin", "report.txt", "figure.png"])
        #expect(
            attachments.map { $0["sha256"] as? String }
                == [winmail[0]["sha256"], files[1]["sha256"], files[2]["sha256"], files[3]["sha256"]].map {
                    $0 as? String
                })
        #expect(attachments.first?["size"] as? Int == winmail[0]["size"] as? Int)
        #expect(
            try MailFixtures.contents(container)
                == attachments.compactMap { $0["sha256"] as? String }.sorted(), "each delivered once")

        let delivered = logRecords(container, event: "delivered")
        #expect(delivered.map { $0["not_expanded"] as? String } == ["a winmail.dat over 16 MiB", nil, nil, nil])
        #expect(logRecords(container, event: "imported").map { $0["attachments"] as? Int } == [4])
        #expect(logRecords(container, event: "rejected").isEmpty, "never refused for its size")
    }

    @Test func tenWinmailDatsOfSixMiBAreExpandedOneAtATimeUnder64MiB() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        let (path, _, files) = try Self.message(in: folder, (0..<10).map { [("part-\($0).bin", 6 << 20)] })
        // One alone, into a container of its own: what ten cost when each is freed before the next.
        let (one, _, _) = try Self.message(in: folder, as: "one.eml", [[("alone.bin", 6 << 20)]])
        let otherFolder = try Scratch()
        let (alone, peakOfOne) = try InboxProcess.runMeasuringPeak(
            ["--container", try otherFolder.initContainer(), "import", "--json", one])
        #expect(alone.status == 0, "\(alone.stderr)")

        let (result, peak) = try InboxProcess.runMeasuringPeak(["--container", container, "import", "--json", path])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(peak < Self.memoryBound, "peak RSS \(peak >> 20) MiB")
        // Held together (or left to the heap's fragments), ten cost 12 MiB more than one: measured before.
        #expect(peak < peakOfOne + (4 << 20), "ten \(peak >> 20) MiB, one \(peakOfOne >> 20) MiB")
        let attachments = try Self.attachments(result)
        #expect(attachments.map { $0["name"] as? String } == files.map { $0["name"] as? String })
        #expect(attachments.map { $0["sha256"] as? String } == files.map { $0["sha256"] as? String })
        #expect(
            try MailFixtures.contents(container) == files.compactMap { $0["sha256"] as? String }.sorted(),
            "each delivered once")
        #expect(logRecords(container, event: "delivered").allSatisfy { $0["not_expanded"] == nil })
    }
}
