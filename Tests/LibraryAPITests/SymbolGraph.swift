import Foundation
import TestSupport
import Testing

/// The library modules' public declarations as the compiler sees them: the symbol graph of each, read from this
/// build by `swift-symbolgraph-extract`, once for the tests that read it (`PublicAPITests`, `DocCommentTests`).
struct SymbolGraph: Decodable {
    struct Symbol: Decodable {
        struct Kind: Decodable { let identifier: String }
        struct Fragment: Decodable { let spelling: String }
        struct Location: Decodable {
            struct Position: Decodable { let line: Int }
            let uri: String
            let position: Position
        }
        /// The declaration's own doc comment (extracted with `-skip-inherited-docs`: never a requirement's).
        struct DocComment: Decodable {
            struct Line: Decodable { let text: String }
            let lines: [Line]
        }
        let kind: Kind
        let pathComponents: [String]
        let declarationFragments: [Fragment]?
        /// Nil for what our sources do not declare: synthesized and inherited members (`!=`, `hashValue`).
        let location: Location?
        let docComment: DocComment?

        /// `Sources/…:LINE` (1-based), where the declaration is.
        var place: String {
            guard let location else { return "?" }
            let path = URL(string: location.uri)?.path ?? location.uri
            let relative = path.range(of: "/Sources/").map { "Sources/" + path[$0.upperBound...] } ?? path
            return "\(relative):\(location.position.line + 1)"
        }
    }
    /// The module's name, taken from the file's name.
    var module = ""
    let symbols: [Symbol]

    private enum CodingKeys: String, CodingKey { case symbols }

    static let modules = ["AppContainer", "InboxKit", "InboxFormats"]
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../..").standardized.path

    /// Every library module's graph, extracted once per test process.
    static func libraries() throws -> [SymbolGraph] { try extracted.get() }

    private static let extracted = Result { try extract() }

    private static func extract() throws -> [SymbolGraph] {
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
                "-target", "x86_64-unknown-linux-gnu", "-skip-inherited-docs", "-output-dir", output,
            ]
            arguments += systemLibraries.flatMap { ["-I", repository + "/Sources/" + $0] }
            arguments += try pkgConfigIncludes("gmime-3.0").flatMap { ["-Xcc", $0] }
            let status = try run(arguments)
            #expect(status.code == 0, "swift-symbolgraph-extract \(module): \(status.output)")
        }
        var graphs: [SymbolGraph] = []
        for file in try FileManager.default.contentsOfDirectory(atPath: output).sorted()
        where file.hasSuffix(".symbols.json") {
            let data = try Data(contentsOf: URL(fileURLWithPath: output + "/" + file))
            var graph = try JSONDecoder().decode(SymbolGraph.self, from: data)
            graph.module = String(file.prefix { $0 != "." && $0 != "@" })
            graphs.append(graph)
        }
        return graphs
    }

    /// The `-I` flags `pkg-config --cflags-only-I` gives for `package`.
    private static func pkgConfigIncludes(_ package: String) throws -> [String] {
        let result = try run(["pkg-config", "--cflags-only-I", package])
        #expect(result.code == 0, "pkg-config: \(result.output)")
        return result.output.split(whereSeparator: \.isWhitespace).map(String.init)
    }

    /// Runs a program found on PATH; its exit status and what it wrote (stdout and stderr).
    private static func run(_ arguments: [String]) throws -> (code: Int32, output: String) {
        let process = try runProgram("/usr/bin/env", arguments, mergingStderr: true)
        return (process.status, process.stdoutText)
    }
}
