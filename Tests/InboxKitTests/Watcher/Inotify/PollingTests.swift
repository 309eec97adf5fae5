import AppContainer
import Foundation
import Glibc
import TestSupport
import Testing

@testable import InboxKit

/// The watcher on a FUSE filesystem (ARCHITECTURE.md, "Network and FUSE filesystems"): a file written into the
/// mount's backing folder is another host's, and raises no inotify event on the mount; only the poll finds it.
@Suite(.serialized) struct PollingTests {
    /// A container on a bindfs mount, watched, each settled arrival noted with its size and time.
    final class Polled {
        let mount: FuseMount
        /// The watcher; its Inbox is let go with it, before the mount is unmounted (an open log keeps it busy).
        private var running: InProcessWatcher?
        var inbox: Inbox { running!.watcher.inbox }
        let arrivals = Guarded<[(name: String, size: Int64, at: ContinuousClock.Instant)]>([])

        init(mountOptions: [String] = [], interval: Duration = .milliseconds(200), settle: Duration = .seconds(1))
            throws
        {
            mount = try FuseMount(options: mountOptions)
            let inbox = try Inbox(container: Container.create(at: mount.mountPoint + "/c", appName: "Mail"))
            var options = WatchOptions()
            options.pollInterval = interval
            options.settle = settle
            options.cleanInterval = nil
            options.singleHost = true
            options.streamsArrivals = false
            options.onSettled = { [arrivals] settled in
                let now = ContinuousClock.now
                arrivals.update { $0 += settled.map { ($0.item.name.string, $0.item.size, now) } }
                return true
            }
            running = try InProcessWatcher(Watcher(inbox: inbox, options: options))
        }

        /// Where "another host" writes the Inbox's `name`: the backing folder, behind the mount's back.
        func remote(_ name: String) -> String {
            mount.backing + inbox.container.path(.inbox).dropFirst(mount.mountPoint.count) + "/" + name
        }

        /// The arrivals of `name` so far.
        func arrived(_ name: String) -> [(name: String, size: Int64, at: ContinuousClock.Instant)] {
            arrivals.value.filter { $0.name == name }
        }

        /// Waits (20 s at most) until `name` has arrived; returns its arrivals.
        func waitForArrival(_ name: String) throws -> [(name: String, size: Int64, at: ContinuousClock.Instant)] {
            try #require(waitUntil(timeout: 20, interval: 0.001) { !arrived(name).isEmpty }, "\(name) never arrived")
            return arrived(name)
        }

        deinit {
            running?.stop()
            running = nil
        }
    }

    /// Writes `bytes` at `path` in one go, closed before it returns.
    private func write(_ path: String, _ bytes: [UInt8]) throws {
        try Data(bytes).write(to: URL(fileURLWithPath: path))
    }

    @Test func aRemoteFileArrivesOnceItHasSettled() async throws {
        let slot = await InotifySlot.take()
        defer { withExtendedLifetime(slot) {} }
        let polled = try Polled()
        let written = ContinuousClock.now
        try write(polled.remote("report.pdf"), pattern(10_000))
        let first = try polled.waitForArrival("report.pdf")
        #expect(first.count == 1)
        #expect(first[0].size == 10_000)
        // Not before it held still for the settle time (two looks 1 s apart).
        #expect(first[0].at - written >= .seconds(1))
        // Once: a second remote file arrives after it, and the first has still arrived once.
        try write(polled.remote("second.pdf"), pattern(10))
        _ = try polled.waitForArrival("second.pdf")
        #expect(polled.arrived("report.pdf").count == 1)
        #expect(try polled.inbox.log.records(kinds: [.arrived]).count == 2)
    }

    /// A remote writer writing in 10 chunks 300 ms apart: the file arrives whole, once.
    private func chunkedWriteArrivesWhole(_ polled: Polled) throws {
        let chunk = 4096
        let bytes = pattern(10 * chunk)
        try #require(FileManager.default.createFile(atPath: polled.remote("scan.tiff"), contents: nil))
        let file = try FileHandle(forWritingTo: URL(fileURLWithPath: polled.remote("scan.tiff")))
        for index in 0..<10 {
            if index > 0 { usleep(300_000) }  // the writer's pace, not a wait for the watcher
            try file.write(contentsOf: bytes[index * chunk..<(index + 1) * chunk])
            // Nothing arrives while it is being written.
            #expect(polled.arrived("scan.tiff").isEmpty)
        }
        try file.close()
        let arrivals = try polled.waitForArrival("scan.tiff")
        #expect(arrivals.count == 1)
        #expect(arrivals.first?.size == Int64(bytes.count))
        _ = try #require(try polled.inbox.log.records(kinds: [.arrived]).first)
        try write(polled.remote("after.txt"), pattern(10))
        _ = try polled.waitForArrival("after.txt")
        #expect(polled.arrived("scan.tiff").count == 1)
    }

    @Test func aFileWrittenInTenChunksArrivesWholeOnce() async throws {
        let slot = await InotifySlot.take()
        defer { withExtendedLifetime(slot) {} }
        try chunkedWriteArrivesWhole(try Polled())
    }

    /// With an NFS-like attribute cache (30 s), the size is still read afresh: the file arrives whole, once.
    @Test func underALongAttributeCacheAChunkedFileStillArrivesWhole() async throws {
        let slot = await InotifySlot.take()
        defer { withExtendedLifetime(slot) {} }
        try chunkedWriteArrivesWhole(try Polled(mountOptions: ["attr_timeout=30", "entry_timeout=30"]))
    }

    @Test func aFileRenamedInFromADotNameArrivesWithoutWaitingToSettle() async throws {
        let slot = await InotifySlot.take()
        defer { withExtendedLifetime(slot) {} }
        let polled = try Polled(settle: .seconds(5))
        try write(polled.remote(".report.pdf.part"), pattern(5000))
        try write(polled.remote("marker.txt"), pattern(10))
        // The marker settled: the poll has listed the dot-name since.
        _ = try polled.waitForArrival("marker.txt")
        let renamed = ContinuousClock.now
        #expect(rename(polled.remote(".report.pdf.part"), polled.remote("report.pdf")) == 0)
        let arrivals = try polled.waitForArrival("report.pdf")
        #expect(arrivals.count == 1)
        #expect(arrivals.first?.size == 5000)
        #expect(arrivals[0].at - renamed < .seconds(4))
    }

    @Test func watchStartedAndStatusSayPollingAndWhy() async throws {
        let slot = await InotifySlot.take()
        defer { withExtendedLifetime(slot) {} }
        let polled = try Polled(mountOptions: ["attr_timeout=30"])
        let started = try #require(try polled.inbox.log.records(kinds: [.watchStarted]).last)
        #expect(started.fields["polling"] == "fuse")
        // bindfs keeps its cache options to itself (the mount table shows none of them): shown empty.
        #expect(started.fields["cache_options"] == "")
        let status = try ContainerStatus.read(polled.inbox.container)
        #expect(status.filesystem?.pollReason == "fuse")
        #expect(status.json.contains(#""polling":"fuse""#))
        #expect(status.json.contains(#""cache_options":[]"#))
        #expect(status.text.contains("filesystem fuse: polling"))
    }

    @Test func aLocalContainerIsNeverPolled() async throws {
        let slot = await InotifySlot.take()
        defer { withExtendedLifetime(slot) {} }
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let running = try InProcessWatcher(Watcher(inbox: scratch.inbox))
        defer { running.stop() }
        let started = try #require(try scratch.inbox.log.records(kinds: [.watchStarted]).last)
        #expect(started.fields["polling"] == nil)
        let status = try ContainerStatus.read(scratch.container)
        #expect(status.filesystem?.pollReason == nil)
        #expect(status.json.contains(#""polling":null"#))
        #expect(status.text.contains("never polled"))
    }

    @Test func nfsMountsAreAdvisedAShortDirectoryCache() {
        let nfs = Filesystem(type: 0x6969, mountType: "nfs4", options: ["rw", "acdirmax=60"])
        #expect(ContainerStatus.cacheAdvice(nfs)?.contains("lookupcache=positive,acdirmax=2") == true)
        let tuned = Filesystem(type: 0x6969, mountType: "nfs4", options: ["lookupcache=positive", "acdirmax=2"])
        #expect(ContainerStatus.cacheAdvice(tuned) == nil)
        #expect(ContainerStatus.cacheAdvice(Filesystem(type: 0xEF53, mountType: "ext4", options: [])) == nil)
    }
}
