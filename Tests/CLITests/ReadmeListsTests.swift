import Foundation
import TestSupport
import Testing

/// The README's lists that the code could contradict, checked against the code: the command table against each
/// command's usage as `inbox help` prints it, the libraries it names against the packages `Package.swift` links.
struct ReadmeListsTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../..")

    static func text(_ name: String) throws -> String {
        try String(contentsOf: root.appendingPathComponent(name), encoding: .utf8)
    }

    /// The lines of the README's section `heading`, up to the next section.
    static func section(_ heading: String) throws -> [Substring] {
        let lines = try text("README.md").split(separator: "\n", omittingEmptySubsequences: false)
        let start = try #require(lines.firstIndex(of: Substring(heading)), "the README has '\(heading)'")
        let rest = lines[(start + 1)...]
        return Array(rest.prefix { !$0.hasPrefix("## ") })
    }

    /// The command names of `inbox help`'s overview.
    static func commandNames() throws -> [String] {
        let overview = try InboxProcess.run(["help"].map { Array($0.utf8) }, environment: ["COLUMNS": "400"])
        #expect(overview.status == 0)
        let lines = overview.stdoutText.split(separator: "\n")
        let start = try #require(lines.firstIndex(of: "COMMANDS:"))
        return lines[(start + 1)...].prefix { $0.hasPrefix("  ") }.compactMap { $0.split(separator: " ").first }
            .map(String.init)
    }

    @Test func theCommandTableIsEveryCommandsUsage() throws {
        var usages: [String] = []
        for name in try Self.commandNames() {
            let help = try InboxProcess.run(["help", name].map { Array($0.utf8) }, environment: ["COLUMNS": "400"])
            let line = try #require(help.stdoutText.split(separator: "\n").first { $0.hasPrefix("USAGE: ") })
            usages.append(String(line.dropFirst("USAGE: inbox [--container DIR] ".count)))
        }
        #expect(usages.count >= 18, "\(usages)")
        let rows = try Self.section("## The command line").compactMap { line -> String? in
            guard line.hasPrefix("| `"), let end = line.range(of: "` |") else { return nil }
            return line[line.index(line.startIndex, offsetBy: 3)..<end.lowerBound].replacingOccurrences(
                of: "\\|", with: "|")
        }
        // The JSON table's rows (`deliver --json`) follow in the same section.
        let table = rows.filter { !$0.hasSuffix(" --json") }
        #expect(table.sorted() == usages.sorted(), "README's command table against `inbox help COMMAND`")
    }

    @Test func theLibrariesNamedAreThoseThePackageLinks() throws {
        let manifest = try Self.text("Package.swift")
        let linked = Set(manifest.matches(of: /\.apt\(\["([^"]+)"\]\)/).map { String($0.output.1) })
        #expect(linked.count == 7, "\(linked)")
        let install = try Self.section("## Install and try it").joined(separator: "\n")
        let sentence = try #require(
            install.range(of: "The build links Debian's").map { install[$0.lowerBound...] }?
                .prefix { $0 != ";" })
        let named = Set(sentence.matches(of: /`([a-z0-9.+-]+-dev)`/).map { String($0.output.1) })
        #expect(named == linked, "README, \"Install and try it\", against Package.swift's system libraries")
    }
}
