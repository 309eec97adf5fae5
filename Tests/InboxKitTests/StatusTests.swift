import AppContainer
import Foundation
import Testing

@testable import InboxKit

/// `inbox status` counts each place with the one walk (ARCHITECTURE.md, "Walks and removal"): what it cannot read or
/// what lies deeper than a backup goes is said, never counted in silence.
@Suite struct StatusTests {
    @Test func whatLiesTooDeepToCountIsSaidNotPassedOverInSilence() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let documents = scratch.container.path(.documents)
        try makeFile(documents + "/top", pattern(3))
        let deep = documents + "/" + Array(repeating: "d", count: ContainerStatus.maxDepth).joined(separator: "/")
        try FileManager.default.createDirectory(atPath: deep, withIntermediateDirectories: true)
        try makeFile(deep + "/bottom", pattern(5))

        let status = try ContainerStatus.read(scratch.container)
        let usage = try #require(status.places.first { $0.place == .documents })
        #expect(usage.files == 1 && usage.bytes == 3 && usage.unreadable == 1)
        #expect(status.text.contains("1 file, 3 bytes, 1 unreadable (not counted)"))
        #expect(status.json.contains(#""documents":{"bytes":3,"files":1,"unreadable":1}"#))
        // Every other place reads whole, and says nothing of it.
        #expect(status.places.filter { $0.place != .documents }.allSatisfy { $0.unreadable == 0 })
    }
}
