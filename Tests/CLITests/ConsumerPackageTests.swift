import Foundation
import Glibc
import InboxKit
import TestSupport
import Testing

/// The README's library examples as a package of one's own holds them: the README's `Package.swift` beside a link
/// named `inbox` to this repository, each example the `main.swift` as it stands (the inputs a reader's program has,
/// `containerPath` and the like, in a file beside it), built by SwiftPM and run. The package lies in
/// `.build/readme-consumer`, so a second run builds only what changed.
@Suite(.long, .serialized) struct ConsumerPackageTests {
    static let repository = TestPaths.repository

    /// The README's Swift blocks, in order.
    static func swiftBlocks() throws -> [String] {
        let readme = try String(contentsOfFile: repository + "/README.md", encoding: .utf8)
        var blocks: [String] = []
        var block: [Substring]?
        for line in readme.split(separator: "\n", omittingEmptySubsequences: false) {
            if line == "```swift" {
                block = []
            } else if line == "```", let lines = block {
                blocks.append(lines.joined(separator: "\n") + "\n")
                block = nil
            } else {
                block?.append(line)
            }
        }
        return blocks
    }

    /// The consumer package's folder, its manifest the README's, with a link to this repository beside it.
    static func package(manifest: String) throws -> String {
        let folder = repository + "/.build/readme-consumer"
        let package = folder + "/MyApp"
        try FileManager.default.createDirectory(
            atPath: package + "/Sources/MyApp", withIntermediateDirectories: true)
        let link = folder + "/inbox"
        if (try? FileManager.default.destinationOfSymbolicLink(atPath: link)) != repository {
            try? FileManager.default.removeItem(atPath: link)
            try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: repository)
        }
        try write(manifest, to: package + "/Package.swift")
        // SwiftPM builds a path dependency again as it changed, but not where its files were added, moved or
        // removed ("missing inputs"): then the package is built afresh.
        let sources = try sourceFiles().joined(separator: "\n") + "\n"
        if (try? String(contentsOfFile: folder + "/sources", encoding: .utf8)) != sources {
            try? FileManager.default.removeItem(atPath: package + "/.build")
            try sources.write(toFile: folder + "/sources", atomically: true, encoding: .utf8)
        }
        return package
    }

    /// The repository's source files, by path.
    static func sourceFiles() throws -> [String] {
        let sources = repository + "/Sources"
        return try FileManager.default.subpathsOfDirectory(atPath: sources).sorted()
    }

    /// Writes `text` unless the file holds it already (SwiftPM rebuilds what changed).
    static func write(_ text: String, to path: String) throws {
        guard (try? String(contentsOfFile: path, encoding: .utf8)) != text else { return }
        try text.write(toFile: path, atomically: true, encoding: .utf8)
    }

    /// Builds the package with `example` as its `main.swift` and `given` beside it; the executable's path.
    static func build(_ package: String, example: String, given: String) throws -> String {
        try write(example, to: package + "/Sources/MyApp/main.swift")
        try write("import Foundation\nimport InboxKit\n\n" + given, to: package + "/Sources/MyApp/Given.swift")
        let built = try InboxProcess.run(
            ["swift", "build", "--package-path", package].map { Array($0.utf8) }, executable: "/usr/bin/env")
        try #require(built.status == 0, "swift build:\n\(built.stdoutText)\n\(built.stderr)")
        return package + "/.build/debug/MyApp"
    }

    static func names(_ folder: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: folder).sorted()
    }

    @Test func theReadmeExamplesBuildAndRunAsPrinted() throws {
        let blocks = try Self.swiftBlocks()
        #expect(blocks.count == 4, "a Package.swift and three examples")
        let manifest = try #require(blocks.first { $0.hasPrefix("// swift-tools-version") })
        let delivery = try #require(blocks.first { $0.contains("inbox.deliver(") })
        let watching = try #require(blocks.first { $0.contains("Watcher(") })
        let importing = try #require(blocks.first { $0.contains("MailImporter(") })
        let package = try Self.package(manifest: manifest)
        let folder = try Scratch()
        defer { folder.remove() }
        let scratch = folder.path

        // The delivery example makes its container from code.
        var app = try Self.build(
            package, example: delivery,
            given: """
                let containerPath = CommandLine.arguments[1]
                let invoicePath = CommandLine.arguments[2]
                let attachments = [(name: "notes.txt", bytes: Data("notes\\n".utf8))]

                """)
        let invoice = scratch + "/invoice.pdf"
        try Data("%PDF-1.4 invoice\n".utf8).write(to: URL(fileURLWithPath: invoice))
        let made = scratch + "/made"
        var run = try InboxProcess.run([made, invoice].map { Array($0.utf8) }, executable: app)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.lines.filter { $0.hasPrefix("delivered ") }.count == 1, "\(run.stdoutText)")
        #expect(FileManager.default.fileExists(atPath: made + "/Mail.app"))
        #expect(try Self.names(made + "/Documents/Inbox") == ["hi.txt", "notes.txt"])
        #expect(try Self.names(made + "/Documents") == ["Inbox", "invoice-1.pdf", "invoice.pdf"])

        // The watcher example moves a PDF out, and a SIGTERM ends it with 0.
        app = try Self.build(package, example: watching, given: "let containerPath = CommandLine.arguments[1]\n")
        let watched = try Container.create(at: scratch + "/watched", appName: "Watched")
        _ = try Inbox(container: watched).deliver(data: Data("%PDF-1.4\n%%EOF\n".utf8), suggestedName: "a.pdf")
        let watcher = try InboxProcess.start([Array(watched.root.utf8)], executable: app)
        let moved = try waitUntil(timeout: 60) { try Self.names(watched.root + "/Documents").contains("a.pdf") }
        #expect(moved, "the watcher example moved the PDF into Documents")
        kill(watcher.pid, SIGTERM)
        run = try watcher.finish()
        #expect(run.status == 0, "\(run.stderr)")

        // The import example imports one message and a mailbox.
        app = try Self.build(
            package, example: importing,
            given: """
                let containerPath = CommandLine.arguments[1]
                let messageBytes = try! Data(contentsOf: URL(fileURLWithPath: CommandLine.arguments[2]))
                let mailboxPath = CommandLine.arguments[3]

                """)
        let message = """
            Subject: hello
            MIME-Version: 1.0
            Content-Type: multipart/mixed; boundary="b"

            --b
            Content-Type: text/plain; name="a.txt"
            Content-Disposition: attachment; filename="a.txt"

            attached
            --b--

            """
        try message.write(toFile: scratch + "/message.eml", atomically: false, encoding: .utf8)
        let mailbox = "From x Mon Jan  1 00:00:00 2024\n" + message.replacingOccurrences(of: "a.txt", with: "b.txt")
        try mailbox.write(toFile: scratch + "/mbox", atomically: false, encoding: .utf8)
        run = try InboxProcess.run(
            [watched.root, scratch + "/message.eml", scratch + "/mbox"].map { Array($0.utf8) }, executable: app)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(run.lines.contains("imported hello"), "\(run.stdoutText)")
        #expect(try Self.names(watched.root + "/Documents/Inbox") == ["a.txt", "b.txt"])
    }
}
