import Foundation
import Glibc
import TestSupport

/// The debug `inbox` and `inbox-formats`, copied where any user may run them, for the tests that run them as
/// another user: the build folder may sit under a folder only its owner may enter (a Debian home is 0700).
enum SharedBinaries {
    static let folder = "/tmp/inbox-test-binaries"
    static var inbox: String { folder + "/inbox" }

    struct CopyFailure: Error, CustomStringConvertible {
        var description: String
    }

    /// Copied once a test process.
    private static let copied = Result { try copy() }

    /// The path of the copied `inbox`, copied first when it is not yet.
    static func ready() throws -> String {
        try copied.get()
        return inbox
    }

    /// Copies the binaries beside the test bundle (see `InboxProcess.binary`) into `folder`, each under a
    /// temporary name first, so a process running the copy meanwhile never finds half a file.
    private static func copy() throws {
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        guard chmod(folder, 0o755) == 0 else { throw CopyFailure(description: "chmod \(folder): errno \(errno)") }
        let built = (InboxProcess.binary as NSString).deletingLastPathComponent
        for name in ["inbox", "inbox-formats"] {
            let copy = folder + "/." + name + ".new"
            if FileManager.default.fileExists(atPath: copy) { try FileManager.default.removeItem(atPath: copy) }
            try FileManager.default.copyItem(atPath: built + "/" + name, toPath: copy)
            guard chmod(copy, 0o755) == 0, rename(copy, folder + "/" + name) == 0 else {
                throw CopyFailure(description: "cannot place \(name) in \(folder): errno \(errno)")
            }
        }
    }
}
