import AppContainer
import Foundation
import Glibc
import TestSupport
import Testing

/// `inbox init --bundle`, `inbox verify`, the watcher's seal check and one-time setup, run as real processes.
@Suite struct BundleCommandTests {
    /// A bundle folder: Info.plist, Resources/config.json, and `templates` files in Templates/many.
    private func makeBundle(_ folder: Scratch, templates: Int = 2) throws -> String {
        let source = folder.path + "/Source.app"
        try folder.file("Source.app/Info.plist", "<plist>info</plist>\n")
        try folder.file("Source.app/Resources/config.json", #"{"greeting":"hello"}"#)
        try folder.file("Source.app/Templates/welcome.txt", "Welcome!\n")
        try writeFiles(templates, in: source + "/Templates/many", prefix: "t")
        return source
    }

    /// A container "Mail" with the bundle installed and sealed by `inbox init --bundle`.
    private func sealedContainer(_ folder: Scratch) throws -> String {
        let root = folder.path + "/c"
        let result = try InboxProcess.run("--container", root, "init", "--app", "Mail", "--bundle", makeBundle(folder))
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.lines == [root])
        return root
    }

    @Test func initWithABundleSealsItAndVerifyHolds() throws {
        let folder = try Scratch()
        let root = try sealedContainer(folder)

        let result = try InboxProcess.run("--container", root, "verify")
        #expect(result.status == 0)
        #expect(result.lines == ["verify: the seal of Mail.app holds (5 resources)"])
        #expect(result.stderr.isEmpty)
        let attributes = try FileManager.default.attributesOfItem(atPath: root + "/Mail.app/Resources/config.json")
        #expect(attributes[.posixPermissions] as? Int == 0o444)
        // One-time setup ran: the templates are in Application Support, the preferences written.
        let support = root + "/Library/Application Support"
        #expect(try String(contentsOfFile: support + "/welcome.txt", encoding: .utf8) == "Welcome!\n")
        #expect(FileManager.default.fileExists(atPath: support + "/many/t1.txt"))
        #expect(FileManager.default.fileExists(atPath: root + "/Library/Preferences/inbox.plist"))
        #expect(FileManager.default.fileExists(atPath: support + "/inbox/setup.done"))
        #expect(logRecords(root, event: "setup").first?["templates"] as? Int == 3)
    }

    @Test(arguments: [
        ("change", "modified: Resources/config.json"), ("add", "added: Resources/extra.json"),
        ("remove", "missing: Info.plist"),
    ])
    func verifyNamesWhatChanged(change: String, line: String) throws {
        let folder = try Scratch()
        let root = try sealedContainer(folder)
        let bundle = root + "/Mail.app"
        switch change {
        case "change":
            // One byte, the size unchanged.
            var bytes = try Data(contentsOf: URL(fileURLWithPath: bundle + "/Resources/config.json"))
            bytes[2] ^= 0x20
            try bytes.write(to: URL(fileURLWithPath: bundle + "/Resources/config.json"))
        case "add":
            try Data("{}".utf8).write(to: URL(fileURLWithPath: bundle + "/Resources/extra.json"))
        default:
            try FileManager.default.removeItem(atPath: bundle + "/Info.plist")
        }

        let result = try InboxProcess.run("--container", root, "verify")
        #expect(result.status == 65)
        #expect(result.lines == [line])
        let errors = result.stderr.split(separator: "\n")
        #expect(errors.count == 1)
        #expect(errors.first?.hasPrefix("inbox: the seal of Mail.app is broken") == true)
    }

    @Test func aMissingOrUnreadableSealIsBroken() throws {
        let folder = try Scratch()
        let root = try sealedContainer(folder)
        let seal = root + "/Mail.app/_CodeSignature/CodeResources"

        try Data("<plist>".utf8).write(to: URL(fileURLWithPath: seal))
        let unreadable = try InboxProcess.run("--container", root, "verify")
        #expect(unreadable.status == 65)
        #expect(unreadable.lines == ["unreadable: _CodeSignature/CodeResources"])

        try FileManager.default.removeItem(atPath: seal)
        let missing = try InboxProcess.run("--container", root, "verify")
        #expect(missing.status == 65)
        #expect(missing.lines == ["missing: _CodeSignature/CodeResources"])
    }

    @Test func aContainerWithoutABundleHasNothingToVerify() throws {
        let folder = try Scratch()
        let root = try folder.initContainer()

        let result = try InboxProcess.run("--container", root, "verify")
        #expect(result.status == 0)
        #expect(result.lines == ["verify: App.app holds no seal and nothing to verify"])
        let watch = try InboxProcess.run("--container", root, "watch", "--once")
        #expect(watch.status == 0, "\(watch.stderr)")
    }

    @Test func initAgainLeavesTheSealAndABundleIsInstalledOnce() throws {
        let folder = try Scratch()
        let root = try sealedContainer(folder)
        let seal = root + "/Mail.app/_CodeSignature/CodeResources"
        let before = try FileManager.default.attributesOfItem(atPath: seal)[.systemFileNumber] as? Int

        #expect(try InboxProcess.run("--container", root, "init").status == 0)
        let same = try InboxProcess.run("--container", root, "init", "--bundle", folder.path + "/Source.app")
        #expect(same.status == 0, "the same bundle again: \(same.stderr)")
        #expect(try FileManager.default.attributesOfItem(atPath: seal)[.systemFileNumber] as? Int == before)

        try folder.file("Source.app/Info.plist", "<plist>another</plist>\n")
        let other = try InboxProcess.run("--container", root, "init", "--bundle", folder.path + "/Source.app")
        #expect(other.status == 77)
        #expect(other.stderr.hasPrefix("inbox: Mail.app is already installed and sealed"))
        #expect(try InboxProcess.run("--container", root, "verify").status == 0)
        #expect(logRecords(root, event: "setup").count == 1, "setup ran once")
    }

    @Test func initRefusesALinkOutOfTheBundle() throws {
        let folder = try Scratch()
        let source = try makeBundle(folder)
        #expect(symlink("../../secret", source + "/Resources/secret") == 0)

        let result = try InboxProcess.run("--container", folder.path + "/c", "init", "--bundle", source)
        #expect(result.status == 77)
        #expect(result.stderr.contains("Resources/secret"))
        #expect(result.stderr.split(separator: "\n").count == 1)
        let verify = try InboxProcess.run("--container", folder.path + "/c", "verify")
        #expect(verify.lines == ["verify: App.app holds no seal and nothing to verify"])
    }

    @Test func verifyHasHelp() throws {
        let result = try InboxProcess.run("verify", "--help")
        #expect(result.status == 0)
        #expect(result.stdoutText.contains("USAGE: inbox [--container DIR] verify"))
        #expect(try InboxProcess.run("--help").stdoutText.contains("  verify "))
        #expect(try InboxProcess.run("init", "--help").stdoutText.contains("--bundle DIR"))
    }

    // MARK: the watcher

    @Test func watchRefusesABrokenSealAndStartsOnAnIntactOne() throws {
        let folder = try Scratch()
        let root = try sealedContainer(folder)

        let watcher = try WatchProcess(root)
        #expect(try InboxProcess.run("--container", root, "deliver", try folder.file("a.txt", "a")).status == 0)
        #expect(waitUntil { logRecords(root, event: "arrived").count == 1 })
        #expect(try watcher.stop().status == 0)

        let config = root + "/Mail.app/Resources/config.json"
        var bytes = try Data(contentsOf: URL(fileURLWithPath: config))
        bytes[bytes.count - 1] ^= 0x01
        try bytes.write(to: URL(fileURLWithPath: config))
        for arguments in [["watch"], ["watch", "--once"]] {
            let result = try InboxProcess.run((["--container", root] + arguments).map { Array($0.utf8) })
            #expect(result.status == 65)
            let lines = result.stderr.split(separator: "\n")
            #expect(lines.count == 1, "\(result.stderr)")
            #expect(
                lines.first?.hasPrefix("inbox: the seal of Mail.app is broken (modified: Resources/config.json)")
                    == true)
            #expect(lines.first?.contains("inbox verify") == true)
        }
        #expect(logRecords(root, event: "watch-started").count == 1, "the refused watchers never started")
    }

    @Test func setupNeverDelaysTheWatchersFirstArrival() throws {
        let folder = try Scratch()
        let root = folder.path + "/c"
        // Installed through the library, so that setup has not run: the watcher's start is the first launch.
        let container = try Container.create(at: root, appName: "Mail")
        try AppBundle(container: container).install(from: try makeBundle(folder, templates: 20_000))
        #expect(!Setup.isDone(container))

        let watcher = try WatchProcess(root)
        #expect(try InboxProcess.run("--container", root, "deliver", try folder.file("first.txt", "first")).status == 0)
        #expect(waitUntil { logRecords(root, event: "arrived").count == 1 })
        #expect(waitUntil(timeout: 180) { logRecords(root, event: "setup").count == 1 })
        #expect(try watcher.stop().status == 0)

        let arrived = try #require(logRecords(root, event: "arrived").first?["seq"] as? Int)
        let setup = try #require(logRecords(root, event: "setup").first)
        #expect(arrived < (setup["seq"] as? Int ?? 0), "the arrival is logged before setup completes")
        #expect(setup["templates"] as? Int == 20_001)
        #expect(Setup.isDone(container))
    }

    @Test(.long) func setupKilledHalfwayRunsAgainAndCompletes() throws {
        let folder = try Scratch()
        let root = folder.path + "/c"
        let source = try makeBundle(folder, templates: 20_000)
        let copies = root + "/Library/Application Support/many"
        let marker = root + "/Library/Application Support/inbox/setup.done"

        let child = try InboxProcess.start(
            ["--container", root, "init", "--app", "Mail", "--bundle", source].map { Array($0.utf8) })
        let partial = waitUntil(timeout: 120) {
            ((try? FileManager.default.contentsOfDirectory(atPath: copies))?.count ?? 0) > 100
        }
        kill(child.pid, SIGKILL)
        #expect(try child.finish().status == CrashSweep.killed)
        #expect(partial, "setup was under way when killed")
        let copied = try FileManager.default.contentsOfDirectory(atPath: copies).count
        #expect(copied < 20_000, "killed halfway: \(copied) copies")
        #expect(!FileManager.default.fileExists(atPath: marker))
        #expect(logRecords(root, event: "setup").isEmpty)

        let again = try InboxProcess.run("--container", root, "init")
        #expect(again.status == 0, "\(again.stderr)")
        #expect(FileManager.default.fileExists(atPath: marker))
        let names = try FileManager.default.contentsOfDirectory(atPath: copies)
        #expect(names.count == 20_000, "no temporary or partial file left")
        for index in 0..<20_000 {
            let bytes = FileManager.default.contents(atPath: copies + "/t\(index).txt")
            if bytes != Data("t number \(index)\n".utf8) {
                Issue.record("t\(index).txt differs from its template")
                break
            }
        }
        let logged = logRecords(root, event: "setup")
        #expect(logged.count == 1)
        #expect(logged.first?["kept"] as? Int == copied)

        #expect(try InboxProcess.run("--container", root, "init").status == 0)
        #expect(logRecords(root, event: "setup").count == 1, "a completed setup never runs again")
    }
}
