import AppContainer
import Foundation
import Glibc
import TestSupport
import Testing

/// `UnnamedFile` (ARCHITECTURE.md, "Network and FUSE filesystems"): unnamed where the filesystem allows, staged under a
/// locked name on bindfs, which refuses `O_TMPFILE`; named without replacing; its staging name swept only once its
/// writer is gone.
@Suite(.serialized) struct UnnamedFileTests {
    @Test func aLocalFileIsUnnamedUntilNamed() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let folder = try FileDescriptor(folder: scratch.path)
        let file = try UnnamedFile(in: folder.rawValue, .writeOnly, mode: 0o600)
        let stagingName = file.stagingName
        #expect(stagingName == nil)
        try file.descriptor.writeAll(Array("whole".utf8))
        #expect(try FileManager.default.contentsOfDirectory(atPath: scratch.path).isEmpty)
        try file.name(try name("a.txt"))
        #expect(try readFile(scratch.at("a.txt")) == Array("whole".utf8))
    }

    /// Before Linux 6.10 an account without CAP_DAC_READ_SEARCH gets ENOENT from `linkat(AT_EMPTY_PATH)`: the
    /// file is linked through its /proc/self/fd name instead (the kernel's answer forced here: this one allows both).
    @Test func anAccountOnAnOlderKernelLinksThroughProc() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let folder = try FileDescriptor(folder: scratch.path)
        let file = try UnnamedFile(in: folder.rawValue, .writeOnly, mode: 0o600)
        try file.descriptor.writeAll(Array("whole".utf8))
        let plan = SyscallFaultPlan(only: "linkat", forcing: ("linkat", .noSuchFile))
        try plan.run { try file.name(try name("a.txt")) }
        #expect(plan.calls == ["linkat"], "the forced call is not counted: one more made")
        #expect(try readFile(scratch.at("a.txt")) == Array("whole".utf8))
    }

    @Test func onTheMountItIsStagedLockedAndNamedWithoutReplacing() throws {
        let mount = try FuseMount()
        let folder = try FileDescriptor(folder: mount.mountPoint)
        try makeFile(mount.mountPoint + "/taken.txt", Array("other".utf8))
        let file = try UnnamedFile(in: folder.rawValue, .writeOnly, mode: 0o600)
        let stagingName = file.stagingName
        let staging = try #require(stagingName)
        #expect(UnnamedFile.isStagingName(staging))
        try file.descriptor.writeAll(Array("whole".utf8))
        #expect(try !UnnamedFile.removeIfAbandoned(staging, in: folder.rawValue), "its writer holds it")
        var refused: Errno?
        let taken = try name("taken.txt")
        do throws(Errno) {
            try file.name(taken)
        } catch {
            refused = error
        }
        #expect(refused == .fileExists)
        #expect(try readFile(mount.backing + "/taken.txt") == Array("other".utf8))
        try file.name(try name("new.txt"))
        #expect(try readFile(mount.backing + "/new.txt") == Array("whole".utf8))
        // While the file is open, libfuse keeps its staging name as `.fuse_hidden…`: the client's, not ours.
        let names = try FileManager.default.contentsOfDirectory(atPath: mount.backing).filter {
            !$0.hasPrefix(".fuse_hidden")
        }
        #expect(names.sorted() == ["new.txt", "taken.txt"])
    }

    @Test func aStagingNameWhoseWriterIsGoneIsSwept() throws {
        let mount = try FuseMount()
        let folder = try FileDescriptor(folder: mount.mountPoint)
        let left = UnnamedFile.stagingName("1.2")
        try makeFile(mount.mountPoint + "/" + left.string, Array("half".utf8))
        try makeFile(mount.mountPoint + "/.other", Array("not ours".utf8))
        let held = try UnnamedFile(in: folder.rawValue, .writeOnly, mode: 0o600)
        let heldStaging = held.stagingName
        let heldName = try #require(heldStaging)
        let names = try FileDescriptor(folder: mount.mountPoint).entries()
        #expect(try UnnamedFile.sweep(names, in: folder.rawValue) == [left])
        // The sweep unlinks the name it holds open (locked): libfuse keeps it as `.fuse_hidden…` until the close.
        let kept = try FileManager.default.contentsOfDirectory(atPath: mount.backing).filter {
            !$0.hasPrefix(".fuse_hidden")
        }.sorted()
        #expect(kept == [".other", heldName.string].sorted())
        withExtendedLifetime(held) {}
    }
}
