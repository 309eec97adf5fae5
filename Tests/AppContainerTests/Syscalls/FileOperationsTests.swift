import AppContainer
import Foundation
import Glibc
import TestSupport
import Testing

@Suite struct FileOperationsTests {
    // MARK: ClashNaming

    @Test(arguments: [
        ("report.pdf", ClashNaming.inbox, 0, "report.pdf"),
        ("report.pdf", .inbox, 1, "report-1.pdf"),
        ("report.pdf", .inbox, 2, "report-2.pdf"),
        ("report.pdf", .inbox, 10, "report-10.pdf"),
        ("report.pdf", .documents, 0, "report.pdf"),
        ("report.pdf", .documents, 1, "report 2.pdf"),
        ("report.pdf", .documents, 2, "report 3.pdf"),
        ("README", .inbox, 1, "README-1"),
        ("README", .documents, 1, "README 2"),
        (".bashrc", .inbox, 1, ".bashrc-1"),
        (".bashrc", .documents, 2, ".bashrc 3"),
        (".config.json", .inbox, 1, ".config-1.json"),
        ("archive.tar.gz", .inbox, 1, "archive.tar-1.gz"),
        ("archive.tar.gz", .documents, 1, "archive.tar 2.gz"),
        ("trailing.", .inbox, 1, "trailing-1."),
        ("résumé.pdf", .documents, 1, "résumé 2.pdf"),
    ])
    func candidates(_ original: String, _ naming: ClashNaming, _ attempt: Int, _ expected: String) throws {
        #expect(naming.candidate(for: try name(original), attempt: attempt) == (try name(expected)))
    }

    @Test(arguments: [ClashNaming.inbox, .documents])
    func aLongNameStaysWithin255BytesAndKeepsItsExtension(_ naming: ClashNaming) throws {
        let long = try #require(FileName(String(repeating: "a", count: 251) + ".pdf"))
        #expect(long.bytes.count == 255)
        var seen: Set<FileName> = [long]
        for attempt in [1, 2, 9, 10, 99, 100, 999, 1000, 9999, 123_456] {
            let candidate = naming.candidate(for: long, attempt: attempt)
            #expect(candidate.bytes.count <= FileName.maxLength, "attempt \(attempt)")
            #expect(candidate.string.hasSuffix(".pdf"), "attempt \(attempt)")
            #expect(candidate.string.hasPrefix("aaaa"), "attempt \(attempt)")
            seen.insert(candidate)
        }
        #expect(seen.count == 11, "every attempt gives a new name")
    }

    @Test(arguments: [ClashNaming.inbox, .documents], ["é", "日", "😀", "aé"])
    func multibyteNamesAreNeverCutInHalf(_ naming: ClashNaming, _ unit: String) throws {
        var stem = ""
        while stem.utf8.count + unit.utf8.count <= 251 { stem += unit }
        let original = try name(stem + ".txt")
        for attempt in 1...12 {
            let candidate = naming.candidate(for: original, attempt: attempt)
            #expect(candidate.isValidUTF8, "\(unit) attempt \(attempt): \(candidate.bytes.suffix(12))")
            #expect(candidate.bytes.count <= FileName.maxLength)
            #expect(candidate.string.hasSuffix(".txt"))
        }
    }

    @Test func aHugeExtensionNeverLeavesHalfACharacter() throws {
        // The stem has room for two bytes only: a three-byte character cannot stay, and must not be cut.
        let original = try name("日." + String(repeating: "x", count: 250))
        #expect(original.bytes.count == 254)
        for naming in [ClashNaming.inbox, .documents] {
            let candidate = naming.candidate(for: original, attempt: 1)
            #expect(candidate.isValidUTF8, "\(candidate.bytes.prefix(6))")
            #expect(candidate.bytes.count <= FileName.maxLength)
            #expect(candidate != original)
        }
    }

    @Test func truncatedStepsBackToACharacterBoundary() {
        let text = Array("aé日😀".utf8)  // 1 + 2 + 3 + 4 bytes
        #expect(FileName.truncated(text, toAtMost: 100) == text)
        #expect(FileName.truncated(text, toAtMost: 10) == text)
        #expect(FileName.truncated(text, toAtMost: 9) == Array("aé日".utf8))
        #expect(FileName.truncated(text, toAtMost: 6) == Array("aé日".utf8))
        #expect(FileName.truncated(text, toAtMost: 5) == Array("aé".utf8))
        #expect(FileName.truncated(text, toAtMost: 2) == Array("a".utf8))
        #expect(FileName.truncated(text, toAtMost: 1) == Array("a".utf8))
        #expect(FileName.truncated(Array("日本".utf8), toAtMost: 2) == [])
        // Bytes that are not UTF-8 at all are cut at the limit.
        #expect(FileName.truncated([0x80, 0x80, 0x80], toAtMost: 2) == [0x80, 0x80])
        #expect(FileName.truncated([0x41, 0xFF, 0xFE, 0x42], toAtMost: 3) == [0x41, 0xFF, 0xFE])
    }

    @Test func stemAndExtension() throws {
        #expect(try name("report.pdf").stemAndExtension == (Array("report".utf8), Array(".pdf".utf8)))
        #expect(try name("README").stemAndExtension == (Array("README".utf8), []))
        #expect(try name(".profile").stemAndExtension == (Array(".profile".utf8), []))
        #expect(try name("a.b.c").stemAndExtension == (Array("a.b".utf8), Array(".c".utf8)))
    }

    // MARK: firstFree

    @Test func firstFreeTriesCandidatesUntilOneDoesNotClash() throws {
        var tried: [String] = []
        let taken: Set<String> = ["report.pdf", "report-1.pdf"]
        let chosen = try ClashNaming.inbox.firstFree(for: name("report.pdf")) { candidate throws(Errno) in
            tried.append(candidate.string)
            if taken.contains(candidate.string) { throw Errno.fileExists }
        }
        #expect(chosen == (try name("report-2.pdf")))
        #expect(tried == ["report.pdf", "report-1.pdf", "report-2.pdf"])
    }

    @Test func firstFreeStopsAtAnyOtherError() throws {
        var attempts = 0
        let error = #expect(throws: Errno.self) {
            try ClashNaming.documents.firstFree(for: name("a.txt")) { _ throws(Errno) in
                attempts += 1
                throw Errno.permissionDenied
            }
        }
        #expect(error == .permissionDenied)
        #expect(attempts == 1)
    }

    @Test func firstFreeNeverGivesUpWhileAFreeNameExists() throws {
        // 20,000 names taken (`a.txt`, `a-1.txt` … `a-19999.txt`): the next delivery still finds one, in a few
        // dozen tries rather than 20,000.
        var attempts = 0
        let chosen = try ClashNaming.inbox.firstFree(for: name("a.txt")) { candidate throws(Errno) in
            attempts += 1
            let stem = candidate.string.dropFirst(2).dropLast(4)
            if candidate.string == "a.txt" || (Int(stem).map { $0 < 20_000 } ?? false) { throw Errno.fileExists }
        }
        #expect(chosen.string == "a-25600.txt")
        #expect(attempts < 120)
    }

    @Test func firstFreeKeepsFindingNamesWhenEveryClashTakesTheNext() throws {
        // 10,000 mails that each carry an `attachment-1.bin`: every delivery takes the name the last one found
        // free, so the doubling numbers all fill up (they ran out at 157 names).
        var taken: Set<String> = []
        var most = 0
        for _ in 0..<1_000 {
            var attempts = 0
            let chosen = try ClashNaming.inbox.firstFree(for: name("attachment-1.bin")) { candidate throws(Errno) in
                attempts += 1
                guard taken.insert(candidate.string).inserted else { throw Errno.fileExists }
            }
            #expect(chosen.string.hasPrefix("attachment-1"))
            most = max(most, attempts)
        }
        #expect(taken.count == 1_000)
        #expect(most < 200, "a few hundred tries at most: \(most)")
    }

    @Test func firstFreeOnARealFolder() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let folder = try FileDescriptor(scratch.path, [.directory])
        var chosen: [String] = []
        for _ in 0..<3 {
            let used = try ClashNaming.documents.firstFree(for: name("report.pdf")) { candidate throws(Errno) in
                _ = try FileDescriptor(at: folder.rawValue, candidate, [.writeOnly, .create, .exclusive], mode: 0o644)
            }
            chosen.append(used.string)
        }
        #expect(chosen == ["report.pdf", "report 2.pdf", "report 3.pdf"])
        #expect(try folder.entries().map(\.string).sorted() == ["report 2.pdf", "report 3.pdf", "report.pdf"])
    }

    // MARK: entries

    @Test func entriesListsOddNamesExactly() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let folder = try FileDescriptor(scratch.path, [.directory])
        #expect(try folder.entries().isEmpty)
        let odd: [[UInt8]] = [
            Array("line\nbreak".utf8),
            [0x62, 0x61, 0x64, 0xFF, 0xFE],
            Array(repeating: 0x6C, count: 255),
            Array("with space.txt".utf8),
            Array("日本語.txt".utf8),
            Array(".hidden".utf8),
            Array("tab\there".utf8),
            Array("...".utf8),
        ]
        for bytes in odd {
            try #require(FileName(bytes: bytes) != nil)
            try makeFile(Array((scratch.path + "/").utf8) + bytes, bytes)
        }
        try FileManager.default.createDirectory(atPath: scratch.at("sub"), withIntermediateDirectories: false)

        let listed = try folder.entries()
        #expect(listed.count == odd.count + 1)
        #expect(Set(listed.map(\.bytes)) == Set(odd + [Array("sub".utf8)]))
        #expect(!listed.contains { $0.isDotOrDotDot })
        for entry in listed where entry.string != "sub" {
            // Each listed name reaches its file, byte for byte.
            let status = try fileStatus(in: folder.rawValue, entry)
            #expect(status.kind == .regular)
            #expect(try readFile(Array((scratch.path + "/").utf8) + entry.bytes) == entry.bytes)
        }
        #expect(listed.first { $0.bytes.count == 255 }?.isValidUTF8 == true)
        #expect(listed.first { $0.bytes.contains(0xFF) }?.isValidUTF8 == false)
    }

    @Test func entriesCanBeReadTwiceFromOneDescriptor() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        try makeFile(scratch.at("a"))
        let folder = try FileDescriptor(scratch.path, [.directory])
        #expect(try folder.entries().map(\.string) == ["a"])
        try makeFile(scratch.at("b"))
        #expect(try folder.entries().map(\.string).sorted() == ["a", "b"])
    }

    // MARK: copyContents

    /// Bytes that differ from offset to offset, so a misplaced or repeated block shows.
    private func pattern(_ count: Int) -> [UInt8] {
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        return (0..<count).map { _ in
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            return UInt8(truncatingIfNeeded: state)
        }
    }

    @Test func copyContentsOf3MiBIsByteIdentical() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let bytes = pattern(3 * 1024 * 1024)
        try makeFile(scratch.at("source"), bytes)
        let source = try FileDescriptor(scratch.at("source"), [.readOnly])
        let copy = try FileDescriptor(scratch.at("copy"), [.writeOnly, .create, .exclusive], mode: 0o600)

        try copy.copyContents(from: source)

        #expect(try copy.fileStatus().size == Int64(bytes.count))
        #expect(try readFile(scratch.at("copy")) == bytes)
        #expect(try readFile(scratch.at("source")) == bytes)
    }

    @Test func copyContentsStartsAtTheSourceOffsetAndAppends() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let bytes = pattern(3 * 1024 * 1024 + 17)
        try makeFile(scratch.at("source"), bytes)
        try makeFile(scratch.at("copy"), Array("head".utf8))
        let source = try FileDescriptor(scratch.at("source"), [.readOnly])
        var skipped = [UInt8](repeating: 0, count: 1000)
        let read = try skipped.withUnsafeMutableBytes { try source.read(into: $0) }
        #expect(read == 1000)
        // O_APPEND makes copy_file_range fail (EBADF): the read-and-write path must take over.
        let copy = try FileDescriptor(scratch.at("copy"), [.writeOnly, .append])

        try copy.copyContents(from: source)

        #expect(try readFile(scratch.at("copy")) == Array("head".utf8) + bytes[1000...])
    }

    @Test func restoreOwnerWriteAddsOnlyTheOwnerWriteBit() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        try makeFile(scratch.at("sealed"), [1], mode: 0o444)
        chmod(scratch.at("sealed"), 0o444)
        let file = try FileDescriptor(scratch.at("sealed"), [.readOnly])

        try file.restoreOwnerWrite()

        #expect(try status(scratch.at("sealed")).mode == 0o644)
    }

    // MARK: Errno → ContainerError

    @Test(arguments: [
        (Errno.noSuchFile, ContainerError.Code.noSuchItem),
        (.notDirectory, .noSuchItem),
        (.readOnlyFileSystem, .cannotCreate),
        (.noSpace, .ioError),
        (.quotaExceeded, .ioError),
        (.ioError, .ioError),
        (.tooManySymbolicLinks, .refused),
        (.permissionDenied, .refused),
        (.notPermitted, .refused),
        (.wouldBlock, .busy),
        (.noLocks, .busy),
        (.fileExists, .failure),
        (.invalidArgument, .failure),
        (.crossDevice, .failure),
    ])
    func errnoMapsToAnExitStatus(_ cause: Errno, _ code: ContainerError.Code) {
        let error = ContainerError(cause, doing: "open", path: "/c/Documents/a.pdf")
        #expect(error.code == code)
        #expect(error.exitStatus == code.rawValue)
        #expect(error.cause == cause)
        #expect(error.message.hasPrefix("cannot open '/c/Documents/a.pdf': \(cause.description)"))
        #expect(error.description == error.message)
        #expect(!error.message.contains("\n"))
        let viaErrno = cause.failure("open", "/c/Documents/a.pdf")
        #expect(viaErrno.code == code)
        #expect(viaErrno.message == error.message)
    }

    @Test func exitStatusesFollowSysexits() {
        let codes: [ContainerError.Code] = [
            .failure, .usage, .badData, .noSuchItem, .cannotCreate, .ioError, .busy, .refused,
        ]
        #expect(codes.map(\.rawValue) == [1, 64, 65, 66, 73, 74, 75, 77])
    }

    @Test func messagesGiveAHintWhereOneHelps() {
        let loop = ContainerError(.tooManySymbolicLinks, doing: "open", path: "/c/x")
        #expect(loop.message.hasSuffix("(a symbolic link is never followed)"))
        let full = ContainerError(.noSpace, doing: "write", path: "/c/x")
        #expect(full.message.hasSuffix("(free some space and try again)"))
        let quota = ContainerError(.quotaExceeded, doing: "write", path: "/c/x")
        #expect(quota.message.hasSuffix("(free some space and try again)"))
        let missing = ContainerError(.noSuchFile, doing: "read", path: "/c/x")
        #expect(missing.message == "cannot read '/c/x': \(Errno.noSuchFile.description)")
    }
}
