import Foundation
import Glibc
import TestSupport
import Testing

/// `.nfs…` and `.fuse_hidden…` names are left alone only where their client makes them (ARCHITECTURE.md, "Network
/// and FUSE filesystems"): on NFS and on FUSE. On any other filesystem they are a user's files and folders, in the
/// backup, its plan and `status`'s counts like any other.
@Suite struct HiddenNamesTests {
    static let nfsName = ".nfs000000000012345600000001"
    static let fuseName = ".fuse_hidden0000000a00000002"

    /// Puts a 5-byte `.nfs…` file and a `.fuse_hidden…` folder holding a 7-byte file in `container`'s Documents.
    static func writeHiddenNames(in container: String) throws {
        let documents = container + "/Documents"
        try Data("12345".utf8).write(to: URL(fileURLWithPath: documents + "/" + nfsName))
        try FileManager.default.createDirectory(
            atPath: documents + "/" + fuseName, withIntermediateDirectories: false)
        try Data("1234567".utf8).write(to: URL(fileURLWithPath: documents + "/" + fuseName + "/notes"))
    }

    /// What `backup-plan`, GNU tar's listing of `backup`'s archive and `status --json` say of Documents.
    struct Seen {
        var plan: [String]
        var archive: String
        var documents: [String: Int]
    }

    static func look(at container: String, archive: String) throws -> Seen {
        let plan = try InboxProcess.run("--container", container, "backup-plan")
        #expect(plan.status == 0, "\(plan.stderr)")
        let backup = try InboxProcess.run("--container", container, "backup", "--to", archive)
        #expect(backup.status == 0, "\(backup.stderr)")
        let listing = try InboxProcess.run(["-tf", archive].map { Array($0.utf8) }, executable: "/usr/bin/tar")
        #expect(listing.status == 0, "\(listing.stderr)")
        let status = try InboxProcess.run("--container", container, "status", "--json")
        #expect(status.status == 0, "\(status.stderr)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(status.stdout)) as? [String: Any])
        let places = try #require(object["places"] as? [String: [String: Int]])
        return Seen(plan: plan.lines, archive: listing.stdoutText, documents: places["documents"] ?? [:])
    }

    @Test func onALocalDiskTheyAreAUsersFiles() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        try Self.writeHiddenNames(in: container)

        let seen = try Self.look(at: container, archive: folder.path + "/backup.tar")

        #expect(seen.plan.contains("+ Documents/\(Self.nfsName)  (Documents: backed up)"), "\(seen.plan)")
        #expect(seen.plan.contains("+ Documents/\(Self.fuseName)/notes  (Documents: backed up)"), "\(seen.plan)")
        #expect(seen.archive.contains("Documents/\(Self.nfsName)\n"), "\(seen.archive)")
        #expect(seen.archive.contains("Documents/\(Self.fuseName)/notes\n"), "\(seen.archive)")
        #expect(seen.documents == ["files": 2, "bytes": 12])
    }

    /// On bindfs a `.fuse_hidden…` name is the FUSE client's, left alone; a `.nfs…` name is a user's there.
    @Test func onAFuseMountTheFuseClientsNameIsLeftAlone() throws {
        let mount = try FuseMount()
        let container = mount.mountPoint + "/c"
        let made = try InboxProcess.run("--container", container, "init")
        #expect(made.status == 0, "\(made.stderr)")
        try Self.writeHiddenNames(in: mount.backing + "/c")

        let seen = try Self.look(at: container, archive: mount.root + "/backup.tar")

        #expect(seen.plan.contains("+ Documents/\(Self.nfsName)  (Documents: backed up)"), "\(seen.plan)")
        #expect(!seen.plan.contains { $0.contains(Self.fuseName) }, "\(seen.plan)")
        #expect(seen.archive.contains("Documents/\(Self.nfsName)\n"), "\(seen.archive)")
        #expect(!seen.archive.contains(Self.fuseName), "\(seen.archive)")
        #expect(seen.documents == ["files": 1, "bytes": 5])
        withExtendedLifetime(mount) {}
    }
}
