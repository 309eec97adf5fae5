import AppContainer
import Foundation
import Glibc
import TestSupport
import Testing

@Suite struct ContainerTests {
    // MARK: create

    /// Each `statx` of `Container.open` failing in turn: the open fails, or finds the app's bundle; a failure to look
    /// at `Mail.app` is never taken for "no bundle" (the app then named `App`).
    @Test func aFailedLookAtTheBundleIsAnErrorNeverAnotherAppName() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        _ = try Container.create(at: scratch.at("c"), appName: "Mail")
        var failed = 0
        for call in 1...100 {
            let plan = SyscallFaultPlan(failing: call, only: "statx")
            let opened = Result { try plan.run { try Container.open(at: scratch.at("c")) } }
            guard plan.injected != nil else { break }
            switch opened {
            case .success(let container): #expect(container.appName == "Mail", "\(plan.summary)")
            case .failure: failed += 1
            }
        }
        #expect(failed > 0)
    }

    @Test func createMakesEveryPlaceAsAFolder() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let container = try Container.create(at: scratch.at("c"), appName: "Mail")

        #expect(container.appName == "Mail")
        #expect(container.root == scratch.at("c"))
        for place in Place.allCases {
            let folder = try status(container.path(place))
            #expect(folder.kind == .directory, "\(place) at \(container.path(place))")
            #expect(container.path(place) == container.root + "/" + place.relativePath(appName: "Mail"))
            #expect(container.url(place).path == container.path(place))
        }
        #expect(container.path(.bundle).hasSuffix("/Mail.app"))
        #expect(try status(container.stateDirectory).kind == .directory)
        #expect(container.stateDirectory == container.root + "/Library/Application Support/inbox")
    }

    @Test func createSetsTheRootTo0700AndTheBundleTo0555() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let container = try Container.create(at: scratch.at("c"))

        #expect(try status(container.root).mode == 0o700)
        #expect(try status(container.path(.bundle)).mode == 0o555)
        #expect(try status(container.path(.bundle)).mode & 0o222 == 0)
        #expect(try status(container.path(.documents)).mode & 0o200 != 0)
    }

    @Test func createWithoutAnAppNameUsesApp() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let container = try Container.create(at: scratch.at("c"))

        #expect(container.appName == "App")
        #expect(try status(scratch.at("c/App.app")).kind == .directory)
    }

    @Test func createMakesMissingParentFolders() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let container = try Container.create(at: scratch.at("a/b/c"), appName: "Mail")

        #expect(container.root == scratch.at("a/b/c"))
        #expect(try status(container.path(.inbox)).kind == .directory)
    }

    @Test func createIsIdempotentAndKeepsWhatIsThere() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let first = try Container.create(at: scratch.at("c"), appName: "Mail")
        try makeFile(first.path(.documents) + "/keep.txt", Array("kept".utf8))
        try makeFile(first.path(.inbox) + "/item.pdf", Array("item".utf8), mode: 0o444)
        let documents = try status(first.path(.documents))
        chmod(first.root, 0o755)

        let second = try Container.create(at: scratch.at("c"))
        let third = try Container.create(at: scratch.at("c"), appName: "Mail")

        for again in [second, third] {
            #expect(again.root == first.root)
            #expect(again.appName == "Mail")
        }
        #expect(try readFile(first.path(.documents) + "/keep.txt") == Array("kept".utf8))
        #expect(try readFile(first.path(.inbox) + "/item.pdf") == Array("item".utf8))
        #expect(try status(first.path(.inbox) + "/item.pdf").mode == 0o444)
        #expect(try status(first.path(.documents)).isSameFile(as: documents))
        #expect(try status(first.root).mode == 0o700)
        #expect(try status(first.path(.bundle)).mode == 0o555)
        let entries = try FileManager.default.contentsOfDirectory(atPath: first.root).sorted()
        #expect(entries == ["Documents", "Library", "Mail.app", "tmp"])
    }

    @Test func createCompletesAPartialLayout() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let container = try Container.create(at: scratch.at("c"), appName: "Mail")
        // Caches and tmp are purgeable: the system may delete them, and the app must be able to recreate them.
        try FileManager.default.removeItem(atPath: container.path(.caches))
        try FileManager.default.removeItem(atPath: container.path(.tmp))
        try FileManager.default.removeItem(atPath: container.path(.inbox))

        _ = try Container.create(at: scratch.at("c"))

        for place in [Place.caches, .tmp, .inbox] {
            #expect(try status(container.path(place)).kind == .directory, "\(place)")
        }
    }

    @Test func createRefusesAnotherAppName() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let container = try Container.create(at: scratch.at("c"), appName: "Mail")

        let error = expectError(.refused) { try Container.create(at: scratch.at("c"), appName: "Notes") }
        #expect(error?.exitStatus == 77)
        #expect(error?.message.contains("Mail.app") == true)
        #expect(!exists(scratch.at("c/Notes.app")))
        #expect(try status(container.path(.bundle)).kind == .directory)
    }

    @Test(arguments: ["", "a/b", ".hidden", "nul\u{0}byte"])
    func createRefusesAnInvalidAppName(_ appName: String) throws {
        let scratch = try Scratch()
        defer { scratch.remove() }

        let error = expectError(.usage) { try Container.create(at: scratch.at("c"), appName: appName) }
        #expect(error?.exitStatus == 64)
        #expect(!exists(scratch.at("c")))
    }

    // MARK: open

    @Test func openFindsACreatedContainer() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let created = try Container.create(at: scratch.at("c"), appName: "Mail")

        let opened = try Container.open(at: scratch.at("c"))
        let viaDots = try Container.open(at: scratch.at("c/Documents/.."))

        #expect(opened.root == created.root)
        #expect(opened.appName == "Mail")
        #expect(viaDots.root == created.root)
    }

    @Test func openResolvesASymbolicLinkToTheRoot() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let created = try Container.create(at: scratch.at("c"))
        #expect(symlink(created.root, scratch.at("link")) == 0)

        let opened = try Container.open(at: scratch.at("link"))

        #expect(opened.root == created.root)
        #expect(try status(opened.root).kind == .directory)
    }

    @Test func openOfAMissingPathFailsWithCannotCreate() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }

        let error = expectError(.cannotCreate) { try Container.open(at: scratch.at("missing")) }
        #expect(error?.exitStatus == 73)
        #expect(error?.message.contains("inbox init") == true)
        #expect(!exists(scratch.at("missing")))
    }

    @Test func openOfAFolderThatIsNoContainerFailsWithCannotCreate() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        try FileManager.default.createDirectory(
            atPath: scratch.at("plain/Documents"), withIntermediateDirectories: true)

        expectError(.cannotCreate) { try Container.open(at: scratch.at("plain")) }
        #expect(!exists(scratch.at("plain/Documents/Inbox")))
    }

    @Test func openFolderOpensEveryPlace() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let container = try Container.create(at: scratch.at("c"))
        try makeFile(container.path(.caches) + "/cached", [1, 2, 3])

        for place in Place.allCases {
            let folder = try container.openFolder(place)
            let opened = try folder.fileStatus()
            let expected = try status(container.path(place))
            #expect(opened.isSameFile(as: expected), "\(place)")
        }
        #expect(try container.openFolder(.caches).entries().map(\.string) == ["cached"])
    }

    // MARK: rules

    @Test func theInboxMayBeReadAndDeletedButNeverCreatedInOrWritten() {
        let rules = Place.inbox.rules
        #expect(!rules.mayCreate)
        #expect(!rules.mayWrite)
        #expect(rules.mayDelete)
        #expect(rules.isBackedUp)
        #expect(!rules.isPurgeable)
    }

    @Test(arguments: [Place.caches, .tmp])
    func cachesAndTmpArePurgeableAndNotBackedUp(_ place: Place) {
        let rules = place.rules
        #expect(rules.isPurgeable)
        #expect(!rules.isBackedUp)
        #expect(rules.mayCreate && rules.mayWrite && rules.mayDelete)
    }

    @Test func theBundleIsReadOnly() {
        let rules = Place.bundle.rules
        #expect(!rules.mayCreate)
        #expect(!rules.mayWrite)
        #expect(!rules.mayDelete)
        #expect(!rules.isBackedUp)
        #expect(!rules.isPurgeable)
    }

    @Test(arguments: [Place.documents, .library, .applicationSupport, .preferences])
    func userAndLibraryPlacesAreWritableAndBackedUp(_ place: Place) {
        let rules = place.rules
        #expect(rules.mayCreate && rules.mayWrite && rules.mayDelete)
        #expect(rules.isBackedUp)
        #expect(!rules.isPurgeable)
    }

    @Test func relativePathsFollowTheLayout() {
        let paths = Dictionary(uniqueKeysWithValues: Place.allCases.map { ($0, $0.relativePath(appName: "Mail")) })
        #expect(
            paths == [
                .bundle: "Mail.app", .documents: "Documents", .inbox: "Documents/Inbox", .library: "Library",
                .applicationSupport: "Library/Application Support", .caches: "Library/Caches",
                .preferences: "Library/Preferences", .tmp: "tmp",
            ])
    }

    // MARK: containing

    @Test(arguments: [
        ("Documents", Place.documents),
        ("Documents/report.pdf", .documents),
        ("Documents/Inbox", .inbox),
        ("Documents/Inbox/report.pdf", .inbox),
        ("Documents/Inboxes/report.pdf", .documents),
        ("Documents/sub/Inbox/x", .documents),
        ("Library", .library),
        ("Library/Other/x", .library),
        ("Library/Caches/thumbs/1.png", .caches),
        ("Library/Application Support", .applicationSupport),
        ("Library/Application Support/inbox/events.jsonl", .applicationSupport),
        ("Library/Preferences/app.plist", .preferences),
        ("tmp/x", .tmp),
        ("Mail.app", .bundle),
        ("Mail.app/Info.plist", .bundle),
    ])
    func containingFindsTheDeepestPlace(_ path: String, _ expected: Place) throws {
        let components = try path.split(separator: "/").map { try name(String($0)) }
        #expect(Place.containing(components, appName: "Mail") == expected)
    }

    @Test(arguments: ["", "stray.txt", "App.app/x", "Mail.app2", "documents/x", "tmpfile", "Library Caches"])
    func containingIsNilOutsideEveryPlace(_ path: String) throws {
        let components = try path.split(separator: "/").map { try name(String($0)) }
        #expect(Place.containing(components, appName: "Mail") == nil)
    }

    // MARK: default path

    @Test func defaultPathIsInboxContainerThenXDGDataHomeThenHome() {
        #expect(Container.defaultPath(environment: ["INBOX_CONTAINER": "/c", "XDG_DATA_HOME": "/x"]) == "/c")
        #expect(
            Container.defaultPath(environment: ["INBOX_CONTAINER": "", "XDG_DATA_HOME": "/x"]) == "/x/inbox/default")
        #expect(Container.defaultPath(environment: ["HOME": "/h"]) == "/h/.local/share/inbox/default")
        #expect(
            Container.defaultPath(environment: ["XDG_DATA_HOME": "", "HOME": "/h"]) == "/h/.local/share/inbox/default")
    }
}
