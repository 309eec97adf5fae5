import AppContainer
import Foundation
import Glibc
import TestSupport
import Testing

/// The one folder walk and the one remover (ARCHITECTURE.md, "Walks and removal").
@Suite struct FolderWalkTests {
    /// Makes `root/a/x`, `root/a/b/y`, `root/c`, `root/link -> a` and `depth` folders `d/d/…` holding `bottom`.
    private func makeTree(_ root: String, depth: Int = 0) throws {
        try FileManager.default.createDirectory(atPath: root + "/a/b", withIntermediateDirectories: true)
        try makeFile(root + "/a/x", [1])
        try makeFile(root + "/a/b/y", [1, 2])
        try makeFile(root + "/c", [1, 2, 3])
        #expect(symlink("a", root + "/link") == 0)
        guard depth > 0 else { return }
        let deep = root + "/" + Array(repeating: "d", count: depth).joined(separator: "/")
        try FileManager.default.createDirectory(atPath: deep, withIntermediateDirectories: true)
        try makeFile(deep + "/bottom", [1])
    }

    /// The paths the walk visits, entering every folder, and the failures reported.
    private func visited(
        _ walk: FolderWalk, _ root: String, stop: Bool = false
    ) throws(ContainerError) -> (paths: [String], reported: [ContainerError]) {
        var paths: [String] = []
        var reported: [ContainerError] = []
        let folder: FileDescriptor
        do { folder = try FileDescriptor(root, [.directory, .noFollow]) } catch { throw error.failure("open", root) }
        let report = { (error: ContainerError) throws(ContainerError) in
            if stop { throw error }
            reported.append(error)
        }
        try walk.run(folder, shown: root, onError: report) { entry in
            paths.append(entry.path.map(\.string).joined(separator: "/"))
            return .enter
        }
        return (paths, reported)
    }

    @Test func everyEntryIsVisitedOnceSortedAndNoLinkIsFollowed() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        try makeTree(scratch.path)
        let walk = FolderWalk(maxDepth: 8, sameFilesystem: true, sorted: true)
        let (paths, reported) = try visited(walk, scratch.path)
        #expect(paths == ["a", "a/b", "a/b/y", "a/x", "c", "link"])
        #expect(reported.isEmpty)
        let unsorted = try visited(FolderWalk(maxDepth: 8, sameFilesystem: false), scratch.path)
        #expect(unsorted.paths.sorted() == paths)
    }

    /// A client's hidden name is passed over only in a folder on its filesystem: `.fuse_hidden…` in the local
    /// backing folder is visited, and the same name seen through the bindfs mount below it is not. The filesystem is
    /// asked once for the root and once for the mount point, never per entry.
    @Test func aClientsHiddenNameIsPassedOverOnlyOnItsFilesystem() throws {
        let mount = try FuseMount()
        let hidden = ".fuse_hidden0000000a00000001"
        try makeFile(mount.backing + "/" + hidden, [1])
        try makeFile(mount.backing + "/.nfs000000000012345600000001", [1])
        let plan = SyscallFaultPlan()
        let (paths, reported) = try plan.run { try visited(FolderWalk(maxDepth: 8, sameFilesystem: false), mount.root) }
        #expect(
            paths.sorted() == [
                "backing", "backing/" + hidden, "backing/.nfs000000000012345600000001", "mount",
                "mount/.nfs000000000012345600000001",
            ])
        #expect(reported.isEmpty)
        #expect(plan.calls.filter { $0 == "fstatfs" }.count == 2, "\(plan.calls)")
        let local = SyscallFaultPlan()
        _ = try local.run { try visited(FolderWalk(maxDepth: 8, sameFilesystem: false), mount.backing) }
        #expect(local.calls.filter { $0 == "fstatfs" } == ["fstatfs"], "one walk of a local folder, one fstatfs")
    }

    @Test func enterAndLeaveBracketEachFolderAndStopEndsTheWalk() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        try makeTree(scratch.path)
        let root = try FileDescriptor(scratch.path, [.directory])
        var events: [String] = []
        let finished = try FolderWalk(maxDepth: 8, sameFilesystem: true, sorted: true).run(
            root, shown: scratch.path, onError: FolderWalk.stop,
            visit: { entry in
                events.append(entry.path.map(\.string).joined(separator: "/"))
                return entry.name.string == "x" ? .stop : .enter
            },
            enter: { entry, _ in events.append("enter " + entry.name.string) },
            leave: { entry, _ in events.append("leave " + entry.name.string) })
        #expect(!finished)
        #expect(events == ["a", "enter a", "a/b", "enter b", "a/b/y", "leave b", "a/x"])
    }

    /// The bound's violation is a failure: thrown with `stop`, reported with a report-and-skip policy, never passed
    /// over in silence (the cleanup's walks stopped at their bound without a word).
    @Test func aFolderBeyondTheDepthBoundIsAFailureNeverASilentSkip() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        try makeTree(scratch.path, depth: 5)
        let walk = FolderWalk(maxDepth: 3, sameFilesystem: true, sorted: true)
        let (paths, reported) = try visited(walk, scratch.path)
        #expect(paths.contains("d/d/d"))
        #expect(!paths.contains { $0.hasPrefix("d/d/d/") })
        #expect(reported.count == 1)
        #expect(reported.first?.code == .badData)
        #expect(reported.first?.message == "'\(scratch.path)/d/d/d' is nested too deep (over 3 folders)")
        let error = expectError(.badData) { try visited(walk, scratch.path, stop: true) }
        #expect(error?.message == reported.first?.message)
        // Deep enough, nothing is reported.
        let whole = try visited(FolderWalk(maxDepth: 6, sameFilesystem: true), scratch.path)
        #expect(whole.paths.contains("d/d/d/d/d/bottom") && whole.reported.isEmpty)
    }

    /// A tmpfs mounted below the walk's root: `/dev/shm` below `/dev`, where it is its own filesystem.
    static let otherFilesystem: Bool = {
        guard let dev = try? fileStatus(in: currentDirectory, "/dev"),
            let shm = try? fileStatus(in: currentDirectory, "/dev/shm"), shm.kind == .directory
        else { return false }
        return dev.device != shm.device && access("/dev/shm", W_OK) == 0
    }()

    @Test(
        .enabled(
            if: otherFilesystem,
            "needs /dev/shm mounted as a filesystem of its own (a tmpfs) below /dev, and writable; none is here"))
    func aFolderOnAnotherFilesystemIsVisitedButEnteredOnlyWhenAsked() throws {
        let mine = "folderwalk-\(UUID().uuidString)"
        try makeFile("/dev/shm/" + mine)
        defer { unlink("/dev/shm/" + mine) }
        for sameFilesystem in [true, false] {
            let root = try FileDescriptor("/dev", [.directory])
            var paths: Set<String> = []
            try FolderWalk(maxDepth: 2, sameFilesystem: sameFilesystem).run(
                root, shown: "/dev", onError: FolderWalk.stop
            ) { entry in
                paths.insert(entry.path.map(\.string).joined(separator: "/"))
                return entry.path.count == 1 && entry.name.string == "shm" ? .enter : .next
            }
            #expect(paths.contains("shm"))
            #expect(paths.contains("shm/" + mine) == !sameFilesystem, "sameFilesystem: \(sameFilesystem)")
        }
    }

    /// Through the fault seam, every call of a walk failed in turn: with report-and-skip, a failure below the root
    /// is reported and the rest walked; a failure reading the root is thrown; with `stop`, every failure is thrown.
    /// Only a close, whose failure loses nothing read, may pass without a word.
    @Test func everyFailureIsThrownOrReportedNeverSwallowed() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        try makeTree(scratch.path, depth: 2)
        let walk = FolderWalk(maxDepth: 8, sameFilesystem: true)
        let counting = SyscallFaultPlan()
        let all = try counting.run { try visited(walk, scratch.path) }
        #expect(all.reported.isEmpty)
        #expect(counting.calls.count > 10)
        for call in 1...counting.calls.count {
            for stop in [false, true] {
                let plan = SyscallFaultPlan(failing: call)
                let outcome = Result { try plan.run { try visited(walk, scratch.path, stop: stop) } }
                let injected = try #require(plan.injected, "call \(call)")
                if injected.name == "close" { continue }
                switch outcome {
                case .success(let result):
                    #expect(!stop, "\(plan.summary): not thrown")
                    #expect(result.reported.count == 1, "\(plan.summary): \(result.reported)")
                    #expect(result.reported.first?.cause == .ioError, "\(plan.summary)")
                case .failure(let error):
                    #expect((error as? ContainerError)?.cause == .ioError, "\(plan.summary): \(error)")
                }
            }
        }
    }

    @Test func theRemoverTakesASealedTreeWithItsLinksButNothingTheyPointAt() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        try FileManager.default.createDirectory(atPath: scratch.at("keep"), withIntermediateDirectories: true)
        try makeFile(scratch.at("keep/target"), [1])
        try makeTree(scratch.at("tree"), depth: 3)
        #expect(symlink(scratch.at("keep"), scratch.at("tree/a/out")) == 0)
        for folder in ["tree/a/b", "tree/a", "tree/d/d/d", "tree/d/d", "tree/d", "tree"] {
            #expect(chmod(scratch.at(folder), 0o555) == 0)
        }
        let root = try FileDescriptor(scratch.path, [.directory])
        try FolderWalk.remove(try name("tree"), in: root.rawValue, shown: scratch.at("tree"))
        #expect(!exists(scratch.at("tree")))
        #expect(try readFile(scratch.at("keep/target")) == [1])
    }

    @Test func theRemoverLeavesAFileThatIsNotTheOneExpected() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        try makeTree(scratch.at("tree"))
        let other = try status(scratch.at("tree/c")).fileID
        let root = try FileDescriptor(scratch.path, [.directory])
        try FolderWalk.remove(try name("tree"), in: root.rawValue, shown: scratch.at("tree"), expected: other)
        #expect(exists(scratch.at("tree/a/b/y")))
        let error = expectError(.noSuchItem) {
            try FolderWalk.remove(try name("gone"), in: root.rawValue, shown: scratch.at("gone"))
        }
        #expect(error?.cause == .noSuchFile)
    }

    /// A removal that fails part way goes on with the rest and throws the first failure: what stays is only what
    /// the failure kept.
    @Test func theRemoverGoesOnPastAFailureAndThrowsTheFirst() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        try makeTree(scratch.at("tree"))
        let root = try FileDescriptor(scratch.path, [.directory])
        let counting = SyscallFaultPlan(only: "unlinkat")
        try counting.run { try FolderWalk.remove(try name("tree"), in: root.rawValue, shown: scratch.at("tree")) }
        #expect(counting.calls.count == 7)  // a/b/y, a/x, a/b, a, c, link and the tree
        for call in 1...7 {
            try makeTree(scratch.at("tree"))
            let plan = SyscallFaultPlan(failing: call, only: "unlinkat")
            let error = expectError(.ioError) {
                try plan.run { try FolderWalk.remove(try name("tree"), in: root.rawValue, shown: scratch.at("tree")) }
            }
            // What stays is the entry that failed and the folders holding it, no more.
            let failed = try #require(error?.message.split(separator: "'").dropFirst().first.map(String.init))
            var kept = [scratch.at("tree")]
            for part in failed.dropFirst(kept[0].count).split(separator: "/") { kept.append(kept.last! + "/" + part) }
            var left = [scratch.at("tree")].filter(exists)
            if let enumerator = FileManager.default.enumerator(atPath: scratch.at("tree")) {
                while let path = enumerator.nextObject() as? String { left.append(scratch.at("tree/" + path)) }
            }
            #expect(Set(left) == Set(kept).filter(exists), "call \(call): \(error?.message ?? "")")
            #expect(exists(failed), "call \(call)")
            _ = try? FileManager.default.removeItem(atPath: scratch.at("tree"))
        }
    }
}
