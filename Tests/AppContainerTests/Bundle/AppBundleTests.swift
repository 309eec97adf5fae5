import AppContainer
import Foundation
import Glibc
import TestSupport
import Testing

/// The sealed bundle of ARCHITECTURE.md, "Bundle, backup and setup": install, seal, verify, resource lookup, and the
/// refusal of writes into it.
@Suite struct AppBundleTests {
    /// A bundle folder beside the container: files at the top and below, an executable, a link inside it.
    private func makeSource(_ scratch: Scratch) throws -> String {
        let source = scratch.at("Source.app")
        for folder in ["Resources/images", "Templates/letters"] {
            try FileManager.default.createDirectory(atPath: source + "/" + folder, withIntermediateDirectories: true)
        }
        try makeFile(source + "/Info.plist", Array("<plist>info</plist>\n".utf8))
        try makeFile(source + "/Resources/config.json", Array(#"{"greeting":"hello"}"#.utf8))
        try makeFile(source + "/Resources/images/logo.png", [0x89, 0x50, 0x4E, 0x47, 0, 1, 2, 3])
        try makeFile(source + "/Templates/letters/welcome.txt", Array("Welcome!\n".utf8))
        try makeFile(source + "/run.sh", Array("#!/bin/sh\necho run\n".utf8), mode: 0o755)
        #expect(chmod(source + "/run.sh", 0o755) == 0)
        #expect(symlink("Resources/config.json", source + "/config-link") == 0)
        return source
    }

    private static let resources = [
        "Info.plist", "Resources/config.json", "Resources/images/logo.png", "Templates/letters/welcome.txt",
        "config-link", "run.sh",
    ]

    /// A container "Mail" with the source installed.
    private func installed(_ scratch: Scratch) throws -> AppBundle {
        let container = try Container.create(at: scratch.at("c"), appName: "Mail")
        let bundle = AppBundle(container: container)
        #expect(try bundle.install(from: try makeSource(scratch)) == .installed(resources: Self.resources.count))
        return bundle
    }

    // MARK: install and seal

    @Test func installCopiesTheTreeAndKeepsLinksAsLinks() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let bundle = try installed(scratch)

        for path in Self.resources where path != "config-link" {
            #expect(try readFile(bundle.path + "/" + path) == readFile(scratch.at("Source.app/" + path)), "\(path)")
        }
        #expect(try status(bundle.path + "/config-link").kind == .symbolicLink)
        #expect(
            try FileManager.default.destinationOfSymbolicLink(atPath: bundle.path + "/config-link")
                == "Resources/config.json")
        #expect(bundle.isSealed)
        // Nothing left beside the places: the staging folder was swapped in and the old folder removed.
        let entries = try FileManager.default.contentsOfDirectory(atPath: bundle.container.root).sorted()
        #expect(entries == ["Documents", "Library", "Mail.app", "tmp"])
    }

    @Test func codeResourcesIsAnXMLPropertyListOfFiles2AndHash2() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let bundle = try installed(scratch)

        let data = try Data(contentsOf: URL(fileURLWithPath: bundle.path + "/_CodeSignature/CodeResources"))
        #expect(String(decoding: data.prefix(5), as: UTF8.self) == "<?xml")
        var format = PropertyListSerialization.PropertyListFormat.binary
        let plist = try #require(
            try PropertyListSerialization.propertyList(from: data, format: &format) as? [String: Any])
        #expect(format == .xml)
        #expect((plist["files"] as? [String: Any])?.isEmpty == true)
        let files2 = try #require(plist["files2"] as? [String: Any])
        #expect(files2.keys.sorted() == Self.resources.sorted())
        let config = try #require(files2["Resources/config.json"] as? [String: Any])
        let hash = try #require(config["hash2"] as? Data)
        #expect(hash.count == 32)
        #expect(
            hash.map { String(format: "%02x", $0) }.joined() == (try sha256sum(bundle.path + "/Resources/config.json")))
        let link = try #require(files2["config-link"] as? [String: Any])
        #expect(link["symlink"] as? String == "Resources/config.json")
        #expect(link["hash2"] == nil)
    }

    @Test func everyWriteBitIsDroppedAndExecuteBitsKept() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let bundle = try installed(scratch)

        var checked = 0
        let walker = try #require(FileManager.default.enumerator(atPath: bundle.path))
        for case let relative as String in walker {
            let entry = try status(bundle.path + "/" + relative)
            switch entry.kind {
            case .directory: #expect(entry.mode == 0o555, "\(relative)")
            case .regular: #expect(entry.mode == (relative == "run.sh" ? 0o555 : 0o444), "\(relative)")
            default: #expect(entry.kind == .symbolicLink, "\(relative)")
            }
            checked += 1
        }
        #expect(checked >= Self.resources.count + 4)
        #expect(try status(bundle.path).mode == 0o555)
    }

    @Test func anIntactSealHoldsAndCheckSealPasses() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let bundle = try installed(scratch)

        let report = try bundle.verify()
        #expect(report == SealReport(state: .intact, resources: Self.resources.count, problems: []))
        try bundle.checkSeal()
    }

    // MARK: verify

    @Test func theSealCatchesOneChangedByte() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let bundle = try installed(scratch)
        let file = bundle.path + "/Resources/config.json"
        var bytes = try readFile(file)
        bytes[3] ^= 0x01
        let size = bytes.count
        try Data(bytes).write(to: URL(fileURLWithPath: file))  // root ignores the 0444
        #expect(try status(file).size == Int64(size))

        let report = try bundle.verify()
        #expect(report.state == .broken)
        #expect(report.problems == [SealProblem(.modified, "Resources/config.json")])
        let error = expectError(.badData) { try bundle.checkSeal() }
        #expect(error?.exitStatus == 65)
        #expect(error?.message.contains("modified: Resources/config.json") == true)
        #expect(error?.message.contains("inbox verify") == true)
    }

    @Test func theSealCatchesOneAddedFile() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let bundle = try installed(scratch)
        try makeFile(bundle.path + "/Resources/images/extra.png", [1])

        #expect(try bundle.verify().problems == [SealProblem(.added, "Resources/images/extra.png")])
    }

    @Test func theSealCatchesOneRemovedFile() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let bundle = try installed(scratch)
        #expect(unlink(bundle.path + "/Info.plist") == 0)

        let report = try bundle.verify()
        #expect(report.state == .broken)
        #expect(report.problems == [SealProblem(.missing, "Info.plist")])
    }

    @Test func theSealCatchesALinkRetargetedAndAFileTurnedIntoALink() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let bundle = try installed(scratch)
        #expect(unlink(bundle.path + "/config-link") == 0)
        #expect(symlink("Info.plist", bundle.path + "/config-link") == 0)
        #expect(unlink(bundle.path + "/run.sh") == 0)
        #expect(symlink("Info.plist", bundle.path + "/run.sh") == 0)

        #expect(
            try bundle.verify().problems == [SealProblem(.modified, "config-link"), SealProblem(.modified, "run.sh")])
    }

    @Test func aMissingOrUnreadableSealIsBroken() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let bundle = try installed(scratch)
        let seal = bundle.path + "/_CodeSignature/CodeResources"

        try Data("not a property list".utf8).write(to: URL(fileURLWithPath: seal))
        #expect(try bundle.verify().problems == [SealProblem(.unreadable, "_CodeSignature/CodeResources")])
        expectError(.badData) { try bundle.checkSeal() }

        #expect(unlink(seal) == 0)
        let report = try bundle.verify()
        #expect(report.state == .broken)
        #expect(report.problems == [SealProblem(.missing, "_CodeSignature/CodeResources")])
        expectError(.badData) { try bundle.checkSeal() }
    }

    @Test func aBundleNeverSealedIsNotBroken() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let bundle = AppBundle(container: try Container.create(at: scratch.at("c"), appName: "Mail"))

        #expect(try bundle.verify() == SealReport(state: .notSealed, resources: 0, problems: []))
        #expect(!bundle.isSealed)
        try bundle.checkSeal()
        // Files put there by hand, with no seal: broken.
        try makeFile(bundle.path + "/stray", [1])
        #expect(try bundle.verify().problems == [SealProblem(.missing, "_CodeSignature/CodeResources")])
    }

    // MARK: install, refused

    @Test(arguments: ["../../outside", "/etc/passwd", "../Resources/../../x"])
    func installRefusesALinkThatLeavesTheBundle(_ target: String) throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let source = try makeSource(scratch)
        #expect(symlink(target, source + "/Resources/escape") == 0)
        let bundle = AppBundle(container: try Container.create(at: scratch.at("c"), appName: "Mail"))

        let error = expectError(.refused) { try bundle.install(from: source) }
        #expect(error?.message.contains("Resources/escape") == true)
        #expect(try bundle.verify().state == .notSealed, "nothing installed")
        #expect(try FileManager.default.contentsOfDirectory(atPath: bundle.path).isEmpty)
        let entries = try FileManager.default.contentsOfDirectory(atPath: bundle.container.root).sorted()
        #expect(entries == ["Documents", "Library", "Mail.app", "tmp"], "the staging folder is gone")
    }

    @Test func installKeepsALinkThatStaysInside() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let source = try makeSource(scratch)
        #expect(symlink("../Resources/./images/../config.json", source + "/Templates/config") == 0)
        let bundle = AppBundle(container: try Container.create(at: scratch.at("c"), appName: "Mail"))

        #expect(try bundle.install(from: source) == .installed(resources: Self.resources.count + 1))
    }

    @Test func installRefusesASpecialFile() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let source = try makeSource(scratch)
        #expect(mkfifo(source + "/Resources/pipe", 0o644) == 0)
        let bundle = AppBundle(container: try Container.create(at: scratch.at("c"), appName: "Mail"))

        let error = expectError(.refused) { try bundle.install(from: source) }
        #expect(error?.message.contains("Resources/pipe") == true)
        #expect(!bundle.isSealed)
    }

    @Test func installingAgainIsIdempotentForTheSameTreeAndRefusedForAnother() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let bundle = try installed(scratch)
        let seal = try status(bundle.path + "/_CodeSignature/CodeResources")

        #expect(
            try bundle.install(from: scratch.at("Source.app")) == .alreadyInstalled(resources: Self.resources.count))
        #expect(try status(bundle.path + "/_CodeSignature/CodeResources").isSameFile(as: seal), "left as it was")

        try Data("changed".utf8).write(to: URL(fileURLWithPath: scratch.at("Source.app/Info.plist")))
        let error = expectError(.refused) { try bundle.install(from: scratch.at("Source.app")) }
        #expect(error?.exitStatus == 77)
        #expect(try status(bundle.path + "/_CodeSignature/CodeResources").isSameFile(as: seal))
        #expect(try bundle.verify().state == .intact)
    }

    @Test func installOverABrokenSealFailsWithBadData() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let bundle = try installed(scratch)
        #expect(unlink(bundle.path + "/Info.plist") == 0)

        expectError(.badData) { try bundle.install(from: scratch.at("Source.app")) }
    }

    // MARK: resource lookup

    @Test func lookupFindsResourcesAtTheRootAndInSubdirectories() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let bundle = try installed(scratch)

        #expect(bundle.url(forResource: "Info", withExtension: "plist")?.path == bundle.path + "/Info.plist")
        #expect(
            bundle.url(forResource: "config", withExtension: ".json", subdirectory: "Resources")?.path
                == bundle.path + "/Resources/config.json")
        #expect(
            bundle.url(forResource: "logo", withExtension: "png", subdirectory: "Resources/images")?.path
                == bundle.path + "/Resources/images/logo.png")
        #expect(
            bundle.url(forResource: "images", withExtension: nil, subdirectory: "Resources")?.hasDirectoryPath == true)
        #expect(
            bundle.url(forResource: nil, withExtension: "png", subdirectory: "Resources/images")?.lastPathComponent
                == "logo.png")
        #expect(bundle.url(forResource: "run.sh", withExtension: nil)?.path == bundle.path + "/run.sh")
    }

    @Test func lookupOfAMissingResourceIsNil() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let bundle = try installed(scratch)

        #expect(bundle.url(forResource: "config", withExtension: "xml", subdirectory: "Resources") == nil)
        #expect(bundle.url(forResource: "config", withExtension: "json") == nil, "not at the root")
        #expect(bundle.url(forResource: "config", withExtension: "json", subdirectory: "Nowhere") == nil)
        #expect(bundle.url(forResource: nil, withExtension: "gif", subdirectory: "Resources/images") == nil)
        #expect(bundle.url(forResource: nil, withExtension: nil) == nil)
    }

    @Test func lookupFollowsLinksInsideTheBundleAndNeverOneThatLeaves() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        // Made by hand: install would refuse the links that leave.
        let container = try Container.create(at: scratch.at("c"), appName: "Mail")
        let bundle = AppBundle(container: container)
        try makeFile(scratch.at("secret.txt"), Array("outside".utf8))
        try makeFile(bundle.path + "/inside.txt", Array("inside".utf8))
        try FileManager.default.createDirectory(atPath: bundle.path + "/Sub", withIntermediateDirectories: true)
        #expect(symlink("../inside.txt", bundle.path + "/Sub/alias.txt") == 0)
        #expect(symlink("../../secret.txt", bundle.path + "/escape.txt") == 0)
        #expect(symlink(scratch.at("secret.txt"), bundle.path + "/absolute.txt") == 0)
        #expect(symlink(scratch.path, bundle.path + "/Outside") == 0)

        #expect(
            bundle.url(forResource: "alias", withExtension: "txt", subdirectory: "Sub")?.path == bundle.path
                + "/inside.txt")
        #expect(bundle.url(forResource: "escape", withExtension: "txt") == nil)
        #expect(bundle.url(forResource: "absolute", withExtension: "txt") == nil)
        #expect(bundle.url(forResource: "secret", withExtension: "txt", subdirectory: "Outside") == nil)
        #expect(bundle.url(forResource: "secret", withExtension: "txt", subdirectory: "..") == nil)
        #expect(bundle.url(forResource: "../secret", withExtension: "txt") == nil)
    }

    // MARK: writes into the bundle

    @Test func checkWritableRefusesTheBundleAndFollowsEachPlacesRules() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let container = try Container.create(at: scratch.at("c"), appName: "Mail")
        let names = { (path: String) in path.split(separator: "/").compactMap { FileName(String($0)) } }

        for path in ["Mail.app", "Mail.app/Resources/config.json", "Mail.app/_CodeSignature/CodeResources"] {
            for writer in [Container.Writer.app, .delivery] {
                let error = expectError(.refused) { try container.checkWritable(components: names(path), by: writer) }
                #expect(error?.exitStatus == 77)
                #expect(error?.message.hasPrefix("the bundle is sealed: ") == true, "\(path)")
            }
        }
        expectError(.refused) { try container.checkWritable(components: names("Documents/Inbox/a.pdf")) }
        #expect(try container.checkWritable(components: names("Documents/Inbox"), by: .delivery) == .inbox)
        expectError(.refused) { try container.checkWritable(components: names("stray/file")) }
        expectError(.refused) { try container.checkWritable(components: []) }
        for (path, place) in [
            ("Documents/a.txt", Place.documents), ("Library/Caches/c", .caches), ("tmp/t", .tmp),
            ("Library/Application Support/x", .applicationSupport), ("Library/Preferences/p.plist", .preferences),
        ] {
            #expect(try container.checkWritable(components: names(path)) == place)
        }
    }

    @Test func aLibraryWriteIntoTheBundleIsRefused() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let bundle = try installed(scratch)
        let container = bundle.container
        let before = try readFile(bundle.path + "/Resources/config.json")

        for path in ["Mail.app/Resources/config.json", "Mail.app/new.txt"] {
            let components = path.split(separator: "/").compactMap { FileName(String($0)) }
            let error = expectError(.refused) { try container.write(Array("evil".utf8), to: components) }
            #expect(error?.exitStatus == 77)
            #expect(error?.message.contains("the bundle is sealed") == true)
        }
        #expect(try readFile(bundle.path + "/Resources/config.json") == before)
        #expect(!exists(bundle.path + "/new.txt"))
        #expect(try bundle.verify().state == .intact)

        // The same call where the rules allow it.
        let note = try #require(FileName("note.txt"))
        try container.write(Array("a note".utf8), to: [try #require(FileName("Documents")), note])
        #expect(try readFile(container.path(.documents) + "/note.txt") == Array("a note".utf8))
        #expect(try status(container.path(.documents) + "/note.txt").mode == 0o644)
    }

    /// The digest /usr/bin/sha256sum prints for `path`.
    private func sha256sum(_ path: String) throws -> String {
        let process = try runProgram("/usr/bin/sha256sum", [path])
        return process.stdoutText.split(separator: " ").first.map(String.init) ?? ""
    }
}
