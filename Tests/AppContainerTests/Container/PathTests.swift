import AppContainer
import Foundation
import Glibc
import TestSupport
import Testing

/// Paths a user gives (`inbox move FILE`) and the walk from the root that never follows a symbolic link.
///
/// Tests run in parallel in one process, so none of them changes the working folder: absolute paths
/// are built from `container.root`, and relative ones reach a container made below the working folder.
@Suite struct PathTests {
    /// A writable folder below the working folder (the package's `.build`), for relative paths.
    static let folderBelowWorkingFolder: String? = {
        guard let cwd = try? system_getcwd() else { return nil }
        let build = String(decoding: cwd, as: UTF8.self) + "/.build"
        guard (try? status(build))?.kind == .directory, access(build, W_OK) == 0 else { return nil }
        return build
    }()

    private func bytes(_ path: String) -> [UInt8] { Array(path.utf8) }

    private func names(_ strings: String...) throws -> [FileName] {
        try strings.map { try name($0) }
    }

    /// A fresh container `Mail` in a scratch folder, which the caller removes.
    private func makeContainer() throws -> (Container, Scratch) {
        let scratch = try Scratch()
        do {
            return (try Container.create(at: scratch.at("c"), appName: "Mail"), scratch)
        } catch {
            scratch.remove()
            throw error
        }
    }

    // MARK: components(ofUserPath:)

    @Test func absolutePathsGiveTheNamesBelowTheRoot() throws {
        let (container, scratch) = try makeContainer()
        defer { scratch.remove() }
        let root = container.root
        #expect(try container.components(ofUserPath: bytes(root)) == [])
        #expect(try container.components(ofUserPath: bytes(root + "/")) == [])
        #expect(try container.components(ofUserPath: bytes(root + "/Documents")) == names("Documents"))
        #expect(
            try container.components(ofUserPath: bytes(root + "/Documents/Inbox/a.pdf"))
                == names("Documents", "Inbox", "a.pdf"))
        #expect(
            try container.components(ofUserPath: bytes(root + "//Documents/./Inbox//")) == names("Documents", "Inbox"))
        #expect(
            try container.components(ofUserPath: bytes(root + "/Documents/a..b/..c"))
                == names("Documents", "a..b", "..c"))
    }

    @Test func namesThatAreNotUTF8AreKeptExactly() throws {
        let (container, scratch) = try makeContainer()
        defer { scratch.remove() }
        let odd: [UInt8] = [0x66, 0xFF, 0xFE, 0x0A, 0x67]
        let components = try container.components(ofUserPath: bytes(container.root + "/Documents/") + odd)
        #expect(components.map(\.bytes) == [Array("Documents".utf8), odd])
    }

    @Test(arguments: ["/Documents/../Documents/Inbox/a.pdf", "/..", "/Documents/Inbox/..", "/../c/Documents"])
    func dotDotIsRefused(_ suffix: String) throws {
        let (container, scratch) = try makeContainer()
        defer { scratch.remove() }
        let error = expectError(.refused) { try container.components(ofUserPath: bytes(container.root + suffix)) }
        #expect(error?.message.contains("'..'") == true)
        expectError(.refused) { try container.inboxItemName(forUserPath: bytes(container.root + suffix)) }
    }

    @Test func dotDotInARelativePathIsRefused() throws {
        let (container, scratch) = try makeContainer()
        defer { scratch.remove() }
        expectError(.refused) { try container.components(ofUserPath: bytes("../Documents/Inbox/a.pdf")) }
        expectError(.refused) { try container.inboxItemName(forUserPath: bytes("Inbox/../a.pdf")) }
    }

    @Test func pathsOutsideTheContainerAreRefused() throws {
        let (container, scratch) = try makeContainer()
        defer { scratch.remove() }
        for outside in [
            "/etc/passwd", "/", scratch.path, scratch.path + "/other/Documents/Inbox/a.pdf",
            container.root + "-sibling/Documents/Inbox/a.pdf", container.root + "x",
        ] {
            let error = expectError(.refused) { try container.components(ofUserPath: bytes(outside)) }
            #expect(error?.message.contains("outside the container") == true, "\(outside)")
            #expect(error?.exitStatus == 77)
        }
    }

    @Test func aRelativePathOutsideTheContainerIsRefused() throws {
        // The working folder is never inside a throwaway container.
        let (container, scratch) = try makeContainer()
        defer { scratch.remove() }
        expectError(.refused) { try container.components(ofUserPath: bytes("Documents/Inbox/a.pdf")) }
        expectError(.refused) { try container.inboxItemName(forUserPath: bytes("Documents/Inbox/a.pdf")) }
    }

    @Test(.enabled(if: PathTests.folderBelowWorkingFolder != nil, "needs a writable .build below the working folder"))
    func relativePathsStartAtTheWorkingFolder() throws {
        let base = try #require(PathTests.folderBelowWorkingFolder)
        let path = base + "/inbox-path-test-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: path) }
        let container = try Container.create(at: path, appName: "Mail")
        let cwd = String(decoding: try system_getcwd(), as: UTF8.self)
        try #require(container.root.hasPrefix(cwd + "/"))
        let relative = String(container.root.dropFirst(cwd.count + 1))

        #expect(
            try container.components(ofUserPath: bytes(relative + "/Documents/Inbox/a.pdf"))
                == names("Documents", "Inbox", "a.pdf"))
        #expect(try container.components(ofUserPath: bytes("./" + relative + "/./Documents")) == names("Documents"))
        #expect(try container.components(ofUserPath: bytes(relative)) == [])
        #expect(try container.inboxItemName(forUserPath: bytes(relative + "/Documents/Inbox/a.pdf")) == name("a.pdf"))
        expectError(.refused) { try container.inboxItemName(forUserPath: bytes(relative + "/Documents/a.pdf")) }
        expectError(.refused) { try container.components(ofUserPath: bytes(relative + "/../x")) }
    }

    // MARK: inboxItemName(forUserPath:)

    @Test func aBareNameIsAnInboxItem() throws {
        let (container, scratch) = try makeContainer()
        defer { scratch.remove() }
        #expect(try container.inboxItemName(forUserPath: bytes("report.pdf")) == name("report.pdf"))
        #expect(try container.inboxItemName(forUserPath: bytes("my report (1).pdf")) == name("my report (1).pdf"))
        #expect(try container.inboxItemName(forUserPath: bytes("..hidden")) == name("..hidden"))
        let odd: [UInt8] = [0x72, 0xFF, 0xFE, 0x0A]
        #expect(try container.inboxItemName(forUserPath: odd).bytes == odd)
        // A bare name is never looked up: it need not exist.
        #expect(!exists(container.path(.inbox) + "/report.pdf"))
    }

    @Test(arguments: [".", ".."])
    func dotAndDotDotAreNoItems(_ bare: String) throws {
        let (container, scratch) = try makeContainer()
        defer { scratch.remove() }
        let error = expectError(.refused) { try container.inboxItemName(forUserPath: bytes(bare)) }
        #expect(error?.message.contains("not an item") == true)
    }

    @Test func aPathInsideTheInboxGivesTheItemName() throws {
        let (container, scratch) = try makeContainer()
        defer { scratch.remove() }
        let inbox = container.path(.inbox)
        #expect(try container.inboxItemName(forUserPath: bytes(inbox + "/report.pdf")) == name("report.pdf"))
        #expect(try container.inboxItemName(forUserPath: bytes(inbox + "/./report.pdf")) == name("report.pdf"))
        #expect(try container.inboxItemName(forUserPath: bytes(inbox + "//a b.pdf")) == name("a b.pdf"))
        let odd: [UInt8] = [0xC3, 0x28, 0x0A]
        #expect(try container.inboxItemName(forUserPath: bytes(inbox + "/") + odd).bytes == odd)
    }

    @Test func pathsInsideTheContainerButNotInTheInboxAreRefused() throws {
        let (container, scratch) = try makeContainer()
        defer { scratch.remove() }
        let root = container.root
        for path in [
            root + "/Documents/report.pdf", root + "/Documents/Inbox", root + "/Documents/Inbox/sub/a.pdf",
            root + "/Library/Caches/a.pdf", root + "/Mail.app/Inbox/a.pdf", root, root + "/a.pdf",
        ] {
            let error = expectError(.refused) { try container.inboxItemName(forUserPath: bytes(path)) }
            #expect(error?.message.contains("not in the Inbox") == true, "\(path)")
        }
    }

    // MARK: openFolder never follows a symbolic link

    @Test func aSymlinkedInboxIsRefused() throws {
        let (container, scratch) = try makeContainer()
        defer { scratch.remove() }
        let elsewhere = scratch.at("elsewhere")
        try FileManager.default.createDirectory(atPath: elsewhere, withIntermediateDirectories: false)
        try makeFile(elsewhere + "/secret.txt", Array("secret".utf8))
        try FileManager.default.removeItem(atPath: container.path(.inbox))
        #expect(symlink(elsewhere, container.path(.inbox)) == 0)

        let error = expectError(.refused) { try container.openFolder(.inbox) }
        #expect(error?.message.contains("symbolic link") == true)
        #expect(error?.exitStatus == 77)
        expectError(.refused) { try container.list(.inbox) }
        expectError(.refused) { try container.openFolder(names("Documents", "Inbox")) }

        #expect(try status(container.path(.inbox)).kind == .symbolicLink)
        #expect(try readFile(elsewhere + "/secret.txt") == Array("secret".utf8))
    }

    @Test func aSymlinkedFolderHigherUpIsRefused() throws {
        let (container, scratch) = try makeContainer()
        defer { scratch.remove() }
        let elsewhere = scratch.at("elsewhere")
        try FileManager.default.createDirectory(atPath: elsewhere + "/Inbox", withIntermediateDirectories: true)
        try FileManager.default.removeItem(atPath: container.path(.documents))
        #expect(symlink(elsewhere, container.path(.documents)) == 0)

        expectError(.refused) { try container.openFolder(.documents) }
        expectError(.refused) { try container.openFolder(.inbox) }
        #expect(try status(elsewhere + "/Inbox").kind == .directory)
    }

    @Test func aSymlinkBelowAPlaceIsRefused() throws {
        let (container, scratch) = try makeContainer()
        defer { scratch.remove() }
        let real = container.path(.documents) + "/real"
        try FileManager.default.createDirectory(atPath: real, withIntermediateDirectories: false)
        #expect(symlink("real", container.path(.documents) + "/alias") == 0)

        let opened = try container.openFolder(names("Documents", "real"))
        #expect(try opened.fileStatus().isSameFile(as: status(real)))
        expectError(.refused) { try container.openFolder(names("Documents", "alias")) }
    }

    @Test func aFileOrNothingWhereAFolderShouldBeIsNoSuchItem() throws {
        let (container, scratch) = try makeContainer()
        defer { scratch.remove() }
        try FileManager.default.removeItem(atPath: container.path(.caches))
        expectError(.noSuchItem) { try container.openFolder(.caches) }

        try makeFile(container.path(.caches), [0x41])
        expectError(.noSuchItem) { try container.openFolder(.caches) }
    }
}
