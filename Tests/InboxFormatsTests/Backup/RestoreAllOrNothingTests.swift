import AppContainer
import Foundation
import Glibc
import TestSupport
import Testing

@testable import InboxFormats
@testable import InboxKit

/// A restore is all or nothing (issue 9; ARCHITECTURE.md, "Bundle, backup and setup"): a truncated archive, a failed
/// call or a switch cut short leaves the container as it was, still fresh; an item a move had claimed comes back
/// under a visible name.
@Suite struct RestoreAllOrNothingTests {
    /// A container with files in Documents, the Inbox and Library, backed up to `backup.tar` beside it.
    private func source(_ scratch: Scratch) throws -> BackupArchive {
        _ = try scratch.inbox.deliver(data: Data(pattern(3_000, seed: 1)), suggestedName: "scan.pdf")
        try makeFile(scratch.documentsPath("letter.txt"), Array("dear".utf8))
        try FileManager.default.createDirectory(
            atPath: scratch.documentsPath("Deep/er"), withIntermediateDirectories: true)
        try makeFile(scratch.documentsPath("Deep/er/big.bin"), pattern(200_000, seed: 2))
        try makeFile(scratch.container.root + "/Library/Preferences/app.plist", Array("<plist/>".utf8))
        let archive = BackupArchive(path: scratch.outside("backup.tar"))
        _ = try archive.write(from: scratch.container)
        return archive
    }

    /// Where each member of a tar archive begins and where its data ends (read with python3's tarfile).
    private func members(_ path: String) throws -> [(header: Int, data: Int, end: Int)] {
        let script = """
            import sys, tarfile
            for m in tarfile.open(sys.argv[1]).getmembers(): print(m.offset, m.offset_data, m.offset_data + m.size)
            """
        let (code, output, errors) = try runProgram("/usr/bin/python3", ["-c", script, path]).parts
        try #require(code == 0, "\(errors)")
        return output.split(separator: "\n").map { line in
            let numbers = line.split(separator: " ").compactMap { Int($0) }
            return (numbers[0], numbers[1], numbers[2])
        }
    }

    @Test func aTruncatedArchiveRestoresNothingAndTheWholeOneThenRestoresEverything() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let archive = try source(scratch)
        let whole = try readFile(archive.path)
        let members = try members(archive.path)
        let last = try #require(members.last)
        // In half; in a header; in a file's data; and at an entry's end, where libarchive alone sees a whole archive.
        var cuts: Set<Int> = [whole.count / 2, 100, last.end, (last.end + 511) / 512 * 512]
        for member in members.dropFirst() { cuts.formUnion([member.header, member.header + 200, member.data + 1]) }
        let target = try Container.create(at: scratch.outside("target"), appName: "Mail")
        let before = try treeListing(target.root)

        for cut in cuts.sorted() {
            let cutPath = scratch.outside("cut-\(cut).tar")
            try makeFile(cutPath, Array(whole[..<cut]))
            let error = expectError(.badData) { try BackupArchive(path: cutPath).restore(into: target) }
            #expect(error?.message.contains(cutPath) == true, "cut at \(cut): \(error?.message ?? "")")
            #expect(error?.message.contains("\n") == false)
            #expect(try treeListing(target.root) == before, "cut at \(cut): the container changed")
        }

        let report = try archive.restore(into: target)
        #expect(report.refused.isEmpty && report.warnings.isEmpty)
        #expect(try readFile(target.root + "/Documents/Deep/er/big.bin") == pattern(200_000, seed: 2))
        #expect(try readFile(target.root + "/Documents/Inbox/scan.pdf") == pattern(3_000, seed: 1))
        #expect(try readFile(target.root + "/Library/Preferences/app.plist") == Array("<plist/>".utf8))
        #expect(!exists(target.root + "/" + RestoreSwitch.stagingName.string))
    }

    /// The second exchange fails: the first is swapped back, and the container is fresh for the next restore.
    @Test func aFailedSecondExchangeIsSwappedBack() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let archive = try source(scratch)
        let target = try Container.create(at: scratch.outside("target"), appName: "Mail")
        let before = try treeListing(target.root)
        // renameat2: the switch marker's rename, then the exchanges of Documents and of Library.
        let plan = SyscallFaultPlan(failing: 3, only: "renameat2", with: .ioError)

        let error = expectError(.ioError) { try plan.run { try archive.restore(into: target) } }

        #expect(plan.injected?.name == "renameat2", "\(plan.summary)")
        #expect(error?.message.contains(target.root) == true, "\(error?.message ?? "")")
        #expect(try treeListing(target.root) == before)
        _ = try archive.restore(into: target)
        #expect(try readFile(target.root + "/Documents/letter.txt") == Array("dear".utf8))
    }

    /// A restore killed between its two exchanges: the next open of the container swaps the first back.
    @Test func aSwitchCutShortIsSwappedBackByTheNextOpen() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let archive = try source(scratch)
        let target = try Container.create(at: scratch.outside("target"), appName: "Mail")
        let before = try treeListing(target.root)
        // What the kill leaves: the staged folders, `switch` naming them, and Documents exchanged.
        let staging = target.root + "/" + RestoreSwitch.stagingName.string
        #expect(mkdir(staging, 0o700) == 0)
        for folder in ["Documents", "Documents/Inbox", "Library"] { #expect(mkdir(staging + "/" + folder, 0o755) == 0) }
        try makeFile(staging + "/Documents/restored.txt", Array("restored".utf8))
        let marker = try ["Documents", "Library"].map { name in
            let id = try status(staging + "/" + name)
            return "\(name) \(id.device) \(id.inode)\n"
        }.joined()
        try makeFile(staging + "/switch", Array(marker.utf8))
        try system_renameat2(
            currentDirectory, staging + "/Documents", currentDirectory, target.path(.documents), .exchange)
        #expect(exists(target.root + "/Documents/restored.txt"))

        _ = try Container.open(at: target.root)

        #expect(try treeListing(target.root) == before, "the half switch was swapped back and the staging removed")
        _ = try archive.restore(into: target)
        #expect(try readFile(target.root + "/Documents/letter.txt") == Array("dear".utf8))
    }

    /// The state of `inbox move` copying a hard-linked item: the item under a claim name, its intent in the journal.
    @Test func anItemBeingMovedIsBackedUpAndRestoredUnderItsOwnName() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        _ = try scratch.inbox.deliver(data: Data("claimed".utf8), suggestedName: "report.pdf")
        #expect(link(scratch.inboxPath("report.pdf"), scratch.outside("other.pdf")) == 0)
        let claim = try name(".inbox-claim.4242.77")
        let claimed = try status(scratch.inboxPath("report.pdf"))
        let record = try MoveJournal(container: scratch.container).begin(
            MoveJournal.Intent(name: try name("report.pdf"), claim: claim, identity: Identity(claimed)))
        #expect(rename(scratch.inboxPath("report.pdf"), scratch.inboxPath(claim.string)) == 0)
        // A later delivery took the name meanwhile.
        _ = try scratch.inbox.deliver(data: Data("newer".utf8), suggestedName: "report.pdf")

        let entries = try BackupPlan(container: scratch.container).entries
        let entry = try #require(entries.first { $0.path == Array("Documents/Inbox/\(claim)".utf8) })
        #expect(entry.isIncluded)
        #expect(entry.reason == "an item being moved: backed up as Documents/Inbox/report-1.pdf")
        let archive = BackupArchive(path: scratch.outside("backup.tar"))
        _ = try archive.write(from: scratch.container)
        let target = try Container.create(at: scratch.outside("target"), appName: "Mail")
        let report = try archive.restore(into: target)

        #expect(
            try FileDescriptor(target.path(.inbox), [.directory]).entries().map(\.string).sorted() == [
                "report-1.pdf", "report.pdf",
            ])
        #expect(try readFile(target.path(.inbox) + "/report-1.pdf") == Array("claimed".utf8))
        #expect(try readFile(target.path(.inbox) + "/report.pdf") == Array("newer".utf8))
        #expect(report.restored.contains(Array("Documents/Inbox/report-1.pdf".utf8)))
        withExtendedLifetime(record) {}
    }

    /// An archive that holds a claim name (no intent to read, or an older inbox): the item gets a visible name, and
    /// the Inbox folder keeps its time.
    @Test func aClaimNameInAnArchiveComesBackVisible() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        try makeFile(scratch.inboxPath(".inbox-claim.12.34"), Array("claimed".utf8), mode: 0o444)
        try makeFile(scratch.inboxPath("12.34"), Array("other".utf8), mode: 0o444)
        let inboxTime = try status(scratch.container.path(.inbox)).modified
        let archive = BackupArchive(path: scratch.outside("backup.tar"))
        _ = try archive.write(from: scratch.container)
        let target = try Container.create(at: scratch.outside("target"), appName: "Mail")

        let report = try archive.restore(into: target)

        #expect(
            try FileDescriptor(target.path(.inbox), [.directory]).entries().map(\.string).sorted() == [
                "12-1.34", "12.34",
            ])
        #expect(try readFile(target.path(.inbox) + "/12-1.34") == Array("claimed".utf8))
        #expect(report.restored.contains(Array("Documents/Inbox/12-1.34".utf8)))
        #expect(!report.restored.contains(Array("Documents/Inbox/.inbox-claim.12.34".utf8)))
        #expect(try status(target.path(.inbox)).modified == inboxTime)
    }
}

extension RestoreAllOrNothingTests {
    /// A path deeper than any backup goes is refused: removing what a restore staged never runs out of descriptors.
    @Test func aPathDeeperThanABackupGoesIsRefused() {
        let deepest = Array(repeating: "d", count: BackupWalk.maxDepth - 1).joined(separator: "/")
        #expect(
            RestoreRules.verdict(
                Array("Documents/\(deepest)".utf8), type: S_IFREG, symlink: nil, hardlink: nil, appName: "Mail")
                == .restore(path: Array("Documents/\(deepest)".utf8), hardlink: nil))
        #expect(
            RestoreRules.verdict(
                Array("Documents/\(deepest)/x".utf8), type: S_IFREG, symlink: nil, hardlink: nil, appName: "Mail")
                == .refuse("nested deeper than 256 folders, which no backup holds"))
    }
}
