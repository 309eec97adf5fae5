import AppContainer
import Foundation
import Glibc
import InboxKit
import TestSupport
import Testing

/// One-time setup (ARCHITECTURE.md, "Bundle, backup and setup"): templates copied, default preferences written,
/// completion recorded once.
@Suite struct SetupTests {
    /// A bundle with `Templates/` (files, a folder, a link inside, a link out, and an `inbox` folder that must
    /// not be copied) installed into the scratch container; returns the template files by relative path.
    @discardableResult
    private func installBundle(_ scratch: Scratch, extra: Int = 0) throws -> [String: [UInt8]] {
        let source = scratch.outside("Mail.app")
        let templates = source + "/Templates"
        for folder in ["letters", "inbox", "many"] {
            try FileManager.default.createDirectory(atPath: templates + "/" + folder, withIntermediateDirectories: true)
        }
        var files: [String: [UInt8]] = [
            "welcome.txt": Array("Welcome!\n".utf8), "letters/thanks.txt": Array("Thank you.\n".utf8),
            "letters/blank.bin": pattern(70_000),
        ]
        for index in 0..<extra { files["many/t\(index).txt"] = Array("template \(index)\n".utf8) }
        for (path, bytes) in files { try makeFile(templates + "/" + path, bytes) }
        try makeFile(templates + "/inbox/events.jsonl", Array("forged\n".utf8))
        try makeFile(source + "/Info.plist", Array("info".utf8))
        #expect(symlink("letters/thanks.txt", templates + "/thanks-link") == 0)
        #expect(symlink("../Info.plist", templates + "/info-link") == 0)
        try AppBundle(container: scratch.container).install(from: source)
        return files
    }

    private func supportPath(_ scratch: Scratch, _ relative: String) -> String {
        scratch.container.path(.applicationSupport) + "/" + relative
    }

    @Test func setupCopiesTemplatesWritesPreferencesAndRecordsItOnce() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let files = try installBundle(scratch)
        #expect(!Setup.isDone(scratch.container))

        let report = try #require(try scratch.inbox.runSetup())

        #expect(report == Setup.Report(templatesCopied: 4, templatesKept: 0, preferencesWritten: true))
        for (path, bytes) in files {
            #expect(try readFile(supportPath(scratch, path)) == bytes, "\(path)")
            #expect(try status(supportPath(scratch, path)).mode == 0o644, "writable copies: \(path)")
        }
        #expect(
            try FileManager.default.destinationOfSymbolicLink(atPath: supportPath(scratch, "thanks-link"))
                == "letters/thanks.txt")
        #expect(!exists(supportPath(scratch, "info-link")), "a link out of Templates is not copied")
        let log = String(decoding: try readFile(supportPath(scratch, "inbox/events.jsonl")), as: UTF8.self)
        #expect(!log.contains("forged"), "the service's own folder is never copied over")
        #expect(try Preferences.load(scratch.container) == Preferences())
        #expect(exists(Preferences.path(scratch.container)))
        #expect(Setup.isDone(scratch.container))
        let logged = try scratch.inbox.log.records(kinds: [.setup])
        #expect(logged.count == 1)
        #expect(logged.first?.fields["templates"] == "4")
        #expect(logged.first?.fields["preferences"] == "true")

        #expect(try scratch.inbox.runSetup() == nil, "never again")
        #expect(try scratch.inbox.log.records(kinds: [.setup]).count == 1)
    }

    @Test func setupNeverOverwritesAnExistingFile() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        try installBundle(scratch)
        try makeFile(supportPath(scratch, "welcome.txt"), Array("mine".utf8))
        var preferences = Data()
        preferences.append(
            contentsOf: Array(
                #"<plist version="1.0"><dict><key>tmpMaxAge</key><integer>60</integer></dict></plist>"#.utf8))
        try preferences.write(to: URL(fileURLWithPath: Preferences.path(scratch.container)))

        let report = try #require(try scratch.inbox.runSetup())

        #expect(report.templatesKept == 1)
        #expect(report.templatesCopied == 3)
        #expect(try readFile(supportPath(scratch, "welcome.txt")) == Array("mine".utf8))
        #expect(try Preferences.load(scratch.container).tmpMaxAge == 60, "a value already there is kept")
    }

    @Test func anInterruptedSetupRunsAgainAndCompletes() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let files = try installBundle(scratch, extra: 200)
        var asked = 0

        let error = #expect(throws: ContainerError.self) {
            try scratch.inbox.runSetup {
                asked += 1
                return asked <= 50
            }
        }
        #expect(error?.exitStatus == 1)
        #expect(!Setup.isDone(scratch.container))
        #expect(try scratch.inbox.log.records(kinds: [.setup]).isEmpty)
        let partial = files.keys.filter { exists(supportPath(scratch, $0)) }
        #expect(partial.count == 50, "whole files only, as many as allowed")
        for path in partial { #expect(try readFile(supportPath(scratch, path)) == files[path]) }

        let report = try #require(try scratch.inbox.runSetup())
        #expect(report.templatesCopied == files.count + 1 - 50)
        #expect(report.templatesKept == 50)
        for (path, bytes) in files { #expect(try readFile(supportPath(scratch, path)) == bytes, "\(path)") }
        #expect(Setup.isDone(scratch.container))
        #expect(try scratch.inbox.log.records(kinds: [.setup]).count == 1)

        #expect(try scratch.inbox.runSetup() == nil)
        #expect(try scratch.inbox.log.records(kinds: [.setup]).count == 1)
    }

    @Test func installingABundleMakesSetupRunAgain() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        // A container made without a bundle: setup has nothing to copy, and completes.
        #expect(try scratch.inbox.runSetup()?.templatesCopied == 0)
        #expect(Setup.isDone(scratch.container))

        try installBundle(scratch)

        #expect(!Setup.isDone(scratch.container))
        #expect(try scratch.inbox.runSetup()?.templatesCopied == 4)
        #expect(try scratch.inbox.log.records(kinds: [.setup]).count == 2)
    }

    @Test func theMarkerIsWrittenAtomically() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        try scratch.inbox.runSetup()

        let state = try FileDescriptor(scratch.container.stateDirectory, [.directory]).entries().map(\.string)
        #expect(state.contains("setup.done"))
        #expect(!state.contains { $0.hasPrefix(".setup.done") }, "no temporary name left")
        #expect(Setup.markerPath(scratch.container) == scratch.container.stateDirectory + "/setup.done")
    }

    @Test func aStateFolderThatIsASymbolicLinkIsRefusedAsOne() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let state = scratch.container.stateDirectory
        let elsewhere = scratch.outside("elsewhere")
        #expect(rename(state, elsewhere) == 0 && symlink(elsewhere, state) == 0)

        let failure = #expect(throws: ContainerError.self) { try scratch.inbox.runSetup() }
        #expect(failure?.code == .refused, "refused (77), not taken for a missing folder (66)")
        #expect(failure?.message.contains("a symbolic link is never followed") == true, "\(failure?.message ?? "")")
        #expect(!exists(elsewhere + "/setup.done"), "nothing written through the link")
    }
}
