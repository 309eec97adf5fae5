import AppContainer
import Foundation
import TestSupport
import Testing

@testable import InboxKit

/// The watcher writes its records straight into bytes (`EncodedEvents`); they must read exactly as the same
/// records made as `Event`s.
@Suite struct EventEncodingTests {
    static let names: [[UInt8]] = [
        Array("report.pdf".utf8), Array("a b \"quoted\" back\\slash\nnew\ttab\u{01}.txt".utf8),
        Array("é ✓ 日本.txt".utf8), [0x62, 0x61, 0x64, 0xFF, 0xFE], Array(repeating: UInt8(ascii: "x"), count: 255),
    ]

    @Test(arguments: names)
    func directFieldsMatchEvents(name: [UInt8]) throws {
        let name = try #require(FileName(bytes: name))
        let folder = Array("Documents/Inbox/".utf8)
        var status = stat()
        status.st_dev = 65024
        status.st_ino = 12
        status.st_mode = S_IFREG | 0o444
        status.st_size = 300
        status.st_mtim = timespec(tv_sec: 1_795_983_096, tv_nsec: 5_000)
        let identity = Identity(FileStatus(status))
        let modified = Timestamp(seconds: 1_795_983_096, nanoseconds: 199_279_360)

        var direct = EncodedEvents()
        direct.begin(.arrived)
        direct.field("path", folder: folder, name)
        direct.field("size", -42)
        direct.field("modified", time: modified)
        direct.field("id", identity: identity)
        direct.field("type", "text")
        direct.end()

        let event = Event(
            .arrived,
            [
                "path": .path(folder + name.bytes), "size": .int(-42), "modified": .string(modified.rfc3339),
                "id": .string(identity.text), "type": .string("text"),
            ])
        #expect(direct.bytes == EncodedEvents([event]).bytes)
        #expect(direct.ends == [direct.bytes.count])
    }

    @Test(arguments: [
        Timestamp(seconds: 0, nanoseconds: 0), Timestamp(seconds: 1_795_983_096, nanoseconds: 999_999_999),
        Timestamp(seconds: -1, nanoseconds: 1_000_000), Timestamp(seconds: 253_402_300_799, nanoseconds: 5),
        Timestamp(seconds: 253_402_300_800, nanoseconds: 0), Timestamp(seconds: -62_167_219_201, nanoseconds: 0),
    ])
    func timestampsReadAsRFC3339(time: Timestamp) {
        var bytes: [UInt8] = []
        EventEncoding.appendTimestamp(time, to: &bytes)
        #expect(String(decoding: bytes, as: UTF8.self) == "\"\(time.rfc3339)\"")
    }

    @Test(arguments: [Int64.min, Int64.min + 1, -10, -1, 0, 9, 10, 99, 100, 1_000_000, Int64.max])
    func integersReadAsDecimal(value: Int64) {
        var bytes: [UInt8] = []
        EventEncoding.appendInteger(value, to: &bytes)
        #expect(String(decoding: bytes, as: UTF8.self) == String(value))
    }
}
