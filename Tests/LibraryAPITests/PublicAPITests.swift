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
    /// What `import InboxKit` brings (it re-exports AppContainer), at most: every public name is a promise.
    static let inboxKitLimit = 200

    /// One line a declaration of ours (`MODULE KIND PATH: DECLARATION`), sorted; synthesized and inherited
    /// members (`!=`, `hashValue`, the ranges of `Comparable`), which have no place in our sources, left out.
    static func publicDeclarations() throws -> [String] {
        var lines: [String] = []
        for graph in try SymbolGraph.libraries() {
            for symbol in graph.symbols where symbol.location != nil {
                let kind = symbol.kind.identifier.replacingOccurrences(of: "swift.", with: "")
                let declaration = symbol.declarationFragments?.map(\.spelling).joined() ?? ""
                lines.append("\(graph.module) \(kind) \(symbol.pathComponents.joined(separator: ".")): \(declaration)")
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
}
