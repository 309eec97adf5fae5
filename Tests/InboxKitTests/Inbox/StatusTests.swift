import AppContainer
import Foundation
import TestSupport
import Testing

@testable import InboxKit

/// `inbox status` counts each place with the one walk (ARCHITECTURE.md, "Walks and removal"): what it cannot read or
/// what lies deeper than a backup goes is said, never counted in silence.
@Suite struct StatusTests {
    @Test func whatLiesTooDeepToCountIsSaidNotPassedOverInSilence() throws {
        let scratch = try Scratch.withInbox()
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

/// Where the mount table has no line for it, a filesystem is named from its `f_type` (issue 49).
@Suite struct FilesystemNameTests {
    @Test func aTypeWithoutAMountLineIsNamedFromItsMagicNumber() {
        let named = { (type: Int64) in Filesystem(type: type, mountType: nil, options: []).name }
        #expect(named(0xEF53) == "ext2/ext3/ext4")
        #expect(named(0x0102_1994) == "tmpfs")
        #expect(named(0x5846_5342) == "xfs")
        #expect(named(0x9123_683E) == "btrfs")
        #expect(named(Filesystem.fuseType) == "fuse")
        #expect(named(Filesystem.nfsType) == "nfs")
        #expect(named(0x1234_5678) == "filesystem type 0x12345678")
        #expect(Filesystem(type: 0xEF53, mountType: "ext4", options: []).name == "ext4", "the mount table first")
    }
}
