import Foundation
import TestSupport
import Testing

/// The public API, as the compiler sees it (the symbol graph of each library module, read from this build by
/// `swift-symbolgraph-extract`), against the list checked in beside this file: a change to what library users may
/// call is a decision made in review, never an accident. After a deliberate change, write the list again with
/// `INBOX_WRITE_PUBLIC_API=1 swift test --filter PublicAPITests` and commit it.
struct PublicAPITests {
    static let listPath = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("PublicAPI.txt").path
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../..").standardized.path
    static let modules = ["AppContainer", "InboxKit", "InboxFormats"]
    /// What `import InboxKit` brings (it re-exports AppContainer), at most: every public name is a promise.
    static let inboxKitLimit = 200

    /// One line a declaration of ours (`MODULE KIND PATH: DECLARATION`), sorted; synthesized and inherited
    /// members (`!=`, `hashValue`, the ranges of `Comparable`), which have no place in our sources, left out.
    static func publicDeclarations() throws -> [String] {
        // The test bundle lies in the build folder (or a folder below it), beside the modules it was built with.
        var folder = Bundle.main.bundleURL
        while !FileManager.default.fileExists(atPath: folder.path + "/Modules"), folder.path != "/" {
            folder.deleteLastPathComponent()
        }
        let build = folder.path
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("inbox-api-\(UUID())").path
        try FileManager.default.createDirectory(atPath: output, withIntermediateDirectories: false)
        defer { try? FileManager.default.removeItem(atPath: output) }
        let systemLibraries = ["CInotifyTools", "CMagic", "CSQLite", "CNettle", "CGMime", "CYtnef", "CArchive"]
        for module in modules {
            var arguments = [
                "swift-symbolgraph-extract", "-module-name", module, "-I", build + "/Modules", "-Xcc",
                "-fmodule-map-file=\(build)/CLinux.build/module.modulemap", "-minimum-access-level", "public",
                "-target", "x86_64-unknown-linux-gnu", "-output-dir", output,
            ]
            arguments += systemLibraries.flatMap { ["-I", repository + "/Sources/" + $0] }
            arguments += try pkgConfigIncludes("gmime-3.0").flatMap { ["-Xcc", $0] }
            let status = try run(arguments)
            #expect(status.code == 0, "swift-symbolgraph-extract \(module): \(status.output)")
        }
        var lines: [String] = []
        for file in try FileManager.default.contentsOfDirectory(atPath: output) where file.hasSuffix(".symbols.json") {
            let module = String(file.prefix { $0 != "." && $0 != "@" })
            let data = try Data(contentsOf: URL(fileURLWithPath: output + "/" + file))
            let graph = try JSONDecoder().decode(SymbolGraph.self, from: data)
            for symbol in graph.symbols where symbol.location != nil {
                let kind = symbol.kind.identifier.replacingOccurrences(of: "swift.", with: "")
                let declaration = symbol.declarationFragments?.map(\.spelling).joined() ?? ""
                lines.append("\(module) \(kind) \(symbol.pathComponents.joined(separator: ".")): \(declaration)")
            }
        }
        return lines.sorted()
    }

    @Test func thePublicAPIIsTheListCheckedIn() throws {
        let current = try Self.publicDeclarations()
        if ProcessInfo.processInfo.environment["INBOX_WRITE_PUBLIC_API"] == "1" {
            try (current.joined(separator: "\n") + "\n").write(toFile: Self.listPath, atomically: true, encoding: .utf8)
        }
        let listed = try String(contentsOfFile: Self.listPath, encoding: .utf8).split(separator: "\n").map(String.init)
        let added = Set(current).subtracting(listed).sorted()
        let removed = Set(listed).subtracting(current).sorted()
        #expect(
            added.isEmpty && removed.isEmpty,
            """
            the public API changed; if on purpose, write the list again (INBOX_WRITE_PUBLIC_API=1 swift test \
            --filter PublicAPITests) and commit it.
            added:
            \(added.joined(separator: "\n"))
            removed:
            \(removed.joined(separator: "\n"))
            """)
        let inboxKit = current.filter { $0.hasPrefix("AppContainer ") || $0.hasPrefix("InboxKit ") }
        #expect(inboxKit.count < Self.inboxKitLimit, "import InboxKit brings \(inboxKit.count) declarations")
    }

    /// The `-I` flags `pkg-config --cflags-only-I` gives for `package`.
    static func pkgConfigIncludes(_ package: String) throws -> [String] {
        let result = try run(["pkg-config", "--cflags-only-I", package])
        #expect(result.code == 0, "pkg-config: \(result.output)")
        return result.output.split(whereSeparator: \.isWhitespace).map(String.init)
    }

    /// Runs a program found on PATH; its exit status and what it wrote (stdout and stderr).
    static func run(_ arguments: [String]) throws -> (code: Int32, output: String) {
        let process = try runProgram("/usr/bin/env", arguments, mergingStderr: true)
        return (process.status, process.stdoutText)
    }
}

/// The parts of a symbol graph file the list reads.
private struct SymbolGraph: Decodable {
    struct Symbol: Decodable {
        struct Kind: Decodable { let identifier: String }
        struct Fragment: Decodable { let spelling: String }
        struct Location: Decodable { let uri: String }
        let kind: Kind
        let pathComponents: [String]
        let declarationFragments: [Fragment]?
        let location: Location?
    }
    let symbols: [Symbol]
}
