import Foundation
import Glibc
import TestSupport
import Testing

/// What the system tests check the same way on each filesystem.
enum SystemCheck {
    /// `result` is a refusal: exit `status`, and exactly one line on stderr, naming the filesystem (`fuse.sshfs`).
    static func expectRefused(
        _ result: InboxProcess.Result, _ command: String, naming filesystem: String, status: Int32 = 73,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        #expect(
            result.status == status, "\(command): \(result.status) \(result.stderr)", sourceLocation: sourceLocation)
        let lines = result.stderr.split(separator: "\n")
        #expect(lines.count == 1, "\(command): \(lines)", sourceLocation: sourceLocation)
        #expect(
            lines.first?.contains(filesystem) == true, "\(command): \(result.stderr)", sourceLocation: sourceLocation)
    }

    /// The mount is its program's filesystem (the mount table's type) and serves its backing folder: a file written
    /// there is read through the mount with the same bytes, and one written through the mount lands there.
    static func expectTheMountServesTheBacking(_ mount: FuseMount) throws {
        let table = try String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8)
        let line = table.split(separator: "\n").first {
            $0.split(separator: " ").dropFirst(4).first == mount.mountPoint[...]
        }
        let fields = line?.split(separator: " ") ?? []
        let mountType = fields.firstIndex(of: "-").flatMap { fields.dropFirst($0 + 1).first }
        #expect(mountType.map(String.init) == mount.program.mountType, "\(line ?? "no line for \(mount.mountPoint)")")
        let bytes = Data((0..<70_000).map { UInt8(truncatingIfNeeded: $0 &* 2_654_435_761 >> 7) })
        try bytes.write(to: URL(fileURLWithPath: mount.backing + "/from-server"))
        #expect(FileManager.default.contents(atPath: mount.mountPoint + "/from-server") == bytes)
        try Data("from the client".utf8).write(to: URL(fileURLWithPath: mount.mountPoint + "/from-client"))
        // rclone writes a file back to its remote once it is closed, a moment later.
        let deadline = Date().addingTimeInterval(30)
        while FileManager.default.contents(atPath: mount.backing + "/from-client") != Data("from the client".utf8),
            Date() < deadline
        {
            usleep(50_000)
        }
        #expect(FileManager.default.contents(atPath: mount.backing + "/from-client") == Data("from the client".utf8))
    }

    /// What a container holds on the server's side that a refused command must leave as it was: every file and
    /// folder of Documents (the Inbox within it), by path, and the event log's files (`events.jsonl` and those
    /// rotated), by name. Equal before and after: nothing moved, nothing logged.
    struct Snapshot: Equatable {
        var documents: [String: Data]
        var log: [String: Data]

        init(container: String) throws {
            documents = Self.files(below: container + "/Documents")
            log = Self.files(below: container + "/Library/Application Support/inbox").filter {
                $0.key.hasPrefix("events.")
            }
        }

        /// Every entry below `folder` by its path there: a file's bytes, an empty value for a folder.
        private static func files(below folder: String) -> [String: Data] {
            var entries: [String: Data] = [:]
            let enumerator = FileManager.default.enumerator(atPath: folder)
            while let relative = enumerator?.nextObject() as? String {
                var isFolder: ObjCBool = false
                _ = FileManager.default.fileExists(atPath: folder + "/" + relative, isDirectory: &isFolder)
                entries[relative] =
                    isFolder.boolValue ? Data() : FileManager.default.contents(atPath: folder + "/" + relative)
            }
            return entries
        }
    }
}
