import AppContainer
import TestSupport
import Testing

@testable import InboxKit

/// The queue between the event thread and the processor keeps names in one buffer (ARCHITECTURE.md, "The hot path").
@Suite struct WatchQueueTests {
    private func names(_ strings: [String]) throws -> [FileName] {
        try strings.map { try #require(FileName($0)) }
    }

    @Test func namesComeOutInOrderAcrossManyTakesAndAgainAfterTheQueueEmpties() throws {
        let queue = WatchQueue()
        let pushed = try names((0..<1_000).map { "file-\($0).txt" })
        for name in pushed { queue.push(name) }
        var taken: [FileName] = []
        // Takes of 7 move the front past half the buffer again and again, so the buffer is compacted many times.
        while queue.hasNames { taken += queue.take(limit: 7).names }
        #expect(taken == pushed)
        #expect(queue.take(limit: 7).names.isEmpty)

        let again = try names(["x", "y"])
        for name in again { queue.push(name) }
        #expect(queue.take(limit: 10).names == again)
    }

    @Test func aNameRightAfterItselfIsKeptOnceAndFartherApartTwice() throws {
        let queue = WatchQueue()
        let (a, b) = (try #require(FileName("a")), try #require(FileName("b")))
        for name in [a, a, b, b, a] { queue.push(name) }
        #expect(queue.take(limit: 1).names == [a])
        // The last `a` is still queued: pushed again, it is kept once.
        queue.push(a)
        #expect(queue.take(limit: 10).names == [b, a])
        // Taken, it is gone from the queue: pushed again, it is a new arrival to look at.
        queue.push(a)
        #expect(queue.take(limit: 10).names == [a])
    }

    @Test func aNameThatExtendsTheLastIsNotTakenForIt() throws {
        let queue = WatchQueue()
        let pushed = try names(["ab", "abc", "ab", "b"])
        for name in pushed { queue.push(name) }
        #expect(queue.take(limit: 10).names == pushed)
    }

    @Test func longAndNonUTF8NamesComeOutByteForByte() throws {
        let queue = WatchQueue()
        let longest = try #require(FileName(bytes: [UInt8](repeating: 0x61, count: FileName.maxLength)))
        let notUTF8 = try #require(FileName(bytes: [0xFF, 0xFE, 0x2E, 0x74, 0x78, 0x74]))
        let one = try #require(FileName("1"))
        for name in [longest, notUTF8, one] { queue.push(name) }
        #expect(queue.take(limit: 2).names == [longest, notUTF8])
        #expect(queue.take(limit: 2).names == [one])
    }

    @Test func pastTheLimitTheNamesGiveWayToOneRescan() throws {
        let queue = WatchQueue(maxNames: 4)
        for name in try names(["1", "2", "3", "4", "5", "6"]) { queue.push(name) }
        let batch = queue.take(limit: 10)
        // The fifth push found 4 queued: they were dropped for a rescan, and the sixth queued after it.
        #expect(batch.rescan == "backlog")
        #expect(batch.names == (try names(["6"])))
        #expect(!queue.hasWork)
    }
}
