import AppContainer
import Foundation
import Glibc
import TestSupport
import Testing

/// `exchange` on a real FUSE filesystem (bindfs), which refuses `RENAME_EXCHANGE`: a journaled two-step rename.
@Suite(.serialized) struct PortableExchangeTests {
    static let intent = FileName(".exchange").unsafelyUnwrapped
    static let (new, old) = (FileName("new").unsafelyUnwrapped, FileName("old").unsafelyUnwrapped)

    /// Makes `new` and `old` in `path`, files or folders holding one file, with the contents "new" and "old".
    static func makeItems(_ path: String, folders: Bool) throws {
        #expect(mkdir(path, 0o755) == 0)
        for name in ["new", "old"] {
            if folders {
                #expect(mkdir(path + "/" + name, 0o755) == 0)
                try makeFile(path + "/" + name + "/page", Array(name.utf8))
            } else {
                try makeFile(path + "/" + name, Array(name.utf8))
            }
        }
    }

    /// The contents of `new` and `old` in `path` (as the backing folder holds them), and every name there.
    static func items(_ path: String, folders: Bool) throws -> (new: String, old: String, names: [String]) {
        func text(_ name: String) throws -> String {
            String(decoding: try readFile(path + "/" + name + (folders ? "/page" : "")), as: UTF8.self)
        }
        let names = try FileManager.default.contentsOfDirectory(atPath: path).sorted()
        return (try text("new"), try text("old"), names)
    }

    @Test(arguments: [false, true]) func twoItemsAreExchangedOnTheMount(folders: Bool) throws {
        let mount = try FuseMount()
        try Self.makeItems(mount.mountPoint + "/items", folders: folders)
        let folder = try FileDescriptor(folder: mount.mountPoint + "/items")
        #expect(throws: Errno.invalidArgument) {
            try system_renameat2(folder.rawValue, "new", folder.rawValue, "old", .exchange)
        }
        try exchange(folder.rawValue, Self.new, folder.rawValue, Self.old, intent: Self.intent)
        let after = try Self.items(mount.backing + "/items", folders: folders)
        #expect(after.new == "old" && after.old == "new" && after.names == ["new", "old"])
        #expect(RenameFlagSupport.isKnownRefusing(folder.rawValue))
        // Known now: the next exchange asks the filesystem no more (a folder's moves are each a plain rename).
        let plan = SyscallFaultPlan()
        try plan.run { try exchange(folder.rawValue, Self.new, folder.rawValue, Self.old, intent: Self.intent) }
        #expect(plan.calls.filter { $0 == "renameat2" }.count == (folders ? 3 : 0), "\(plan.calls)")
        let back = try Self.items(mount.backing + "/items", folders: folders)
        #expect(back.new == "new" && back.old == "old" && back.names == ["new", "old"])
    }

    /// Each call of the two-step made to fail in turn: the exchange throws, and after the recovery's rollback
    /// each item is at its own name, once; nothing else is left.
    @Test(arguments: [false, true]) func everyCallFailedInTurnLeavesEachItemOnce(folders: Bool) throws {
        let mount = try FuseMount()
        var failed = 0
        for call in 1...200 {
            let items = "items\(call)"
            try Self.makeItems(mount.mountPoint + "/" + items, folders: folders)
            let folder = try FileDescriptor(folder: mount.mountPoint + "/" + items)
            let plan = SyscallFaultPlan(failing: call)
            let thrown = plan.run { () -> Errno? in
                do throws(Errno) {
                    try exchange(folder.rawValue, Self.new, folder.rawValue, Self.old, intent: Self.intent)
                    return nil
                } catch {
                    return error
                }
            }
            guard plan.injected != nil else {
                #expect(thrown == nil)
                let after = try Self.items(mount.backing + "/" + items, folders: folders)
                #expect(after.new == "old" && after.old == "new" && after.names == ["new", "old"])
                break
            }
            failed += 1
            // Thrown and rolled back; or, where the failed call only asked whether the flags are known, done.
            #expect(thrown == nil || thrown == .ioError, "\(plan.summary)")
            // The next start's recovery.
            try rollBackExchange(folder.rawValue, folder.rawValue, intent: Self.intent)
            let after = try Self.items(mount.backing + "/" + items, folders: folders)
            let (new, old) = thrown == nil ? ("old", "new") : ("new", "old")
            #expect(after.new == new && after.old == old && after.names == ["new", "old"], "\(plan.summary)")
        }
        #expect(failed >= 10)
    }

    /// The state a kill leaves after each move of the two-step, and after the half of each fallback move (both
    /// names on one inode after `link`; an empty folder after `mkdir`): the recovery puts each item back, once.
    @Test(arguments: [false, true]) func aKillAfterAnyStepIsRolledBack(folders: Bool) throws {
        let mount = try FuseMount()
        // The moves: old → aside, new → old, aside → new.
        let moves = [("old", ".exchange.aside"), ("new", "old"), (".exchange.aside", "new")]
        var cases = 0
        for done in 0...moves.count {
            for half in [false, true] where !(half && done == moves.count) {
                cases += 1
                let items = "items\(cases)"
                let path = mount.mountPoint + "/" + items
                try Self.makeItems(path, folders: folders)
                let folder = try FileDescriptor(folder: path)
                // The intent as `exchange` writes it, then the moves a kill let happen.
                let ids = try ["new", "old"].map { try status(path + "/" + $0) }.map { "\($0.device) \($0.inode)" }
                let record = Array(["new", "old", ids[0], ids[1]].map { Array($0.utf8) + [0] }.joined())
                try makeFile(path + "/.exchange", record)
                for (from, to) in moves.prefix(done) { #expect(rename(path + "/" + from, path + "/" + to) == 0) }
                if half {
                    let (from, to) = moves[done]
                    if folders {
                        #expect(mkdir(path + "/" + to, 0o700) == 0)
                    } else {
                        #expect(link(path + "/" + from, path + "/" + to) == 0)
                    }
                }
                try rollBackExchange(folder.rawValue, folder.rawValue, intent: Self.intent)
                let after = try Self.items(mount.backing + "/" + items, folders: folders)
                #expect(
                    after.new == "new" && after.old == "old" && after.names == ["new", "old"],
                    "after \(done) moves\(half ? " and half of the next" : "")")
            }
        }
    }

    /// Another file took the old name while the old item was aside: rolled back with an Inbox's naming, the old
    /// item takes the first free name beside it; without, the intent stays and nothing moves.
    @Test func anOldNameTakenMeanwhileGivesTheOldItemAFreeName() throws {
        let mount = try FuseMount()
        let path = mount.mountPoint + "/items"
        try Self.makeItems(path, folders: false)
        let folder = try FileDescriptor(folder: path)
        let ids = try ["new", "old"].map { try status(path + "/" + $0) }.map { "\($0.device) \($0.inode)" }
        try makeFile(path + "/.exchange", Array(["new", "old", ids[0], ids[1]].map { Array($0.utf8) + [0] }.joined()))
        #expect(rename(path + "/old", path + "/.exchange.aside") == 0)
        try makeFile(path + "/old", Array("foreign".utf8))
        #expect(throws: Errno.fileExists) {
            try rollBackExchange(folder.rawValue, folder.rawValue, intent: Self.intent)
        }
        #expect(exists(mount.backing + "/items/.exchange") && exists(mount.backing + "/items/.exchange.aside"))
        try rollBackExchange(folder.rawValue, folder.rawValue, intent: Self.intent, naming: .inbox)
        let names = try FileManager.default.contentsOfDirectory(atPath: mount.backing + "/items").sorted()
        #expect(names == ["new", "old", "old-1"])
        #expect(try readFile(mount.backing + "/items/old-1") == Array("old".utf8))
        #expect(try readFile(mount.backing + "/items/old") == Array("foreign".utf8))
        #expect(try readFile(mount.backing + "/items/new") == Array("new".utf8))
    }

    @Test func aLocalFilesystemKeepsTheAtomicExchange() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        try Self.makeItems(scratch.at("items"), folders: false)
        let folder = try FileDescriptor(folder: scratch.at("items"))
        let plan = SyscallFaultPlan()
        try plan.run { try exchange(folder.rawValue, Self.new, folder.rawValue, Self.old, intent: Self.intent) }
        #expect(plan.calls.filter { $0 != "fstat" } == ["renameat2"])
        #expect(!RenameFlagSupport.isKnownRefusing(folder.rawValue))
        let after = try Self.items(scratch.at("items"), folders: false)
        #expect(after.new == "old" && after.old == "new" && after.names == ["new", "old"])
    }
}
