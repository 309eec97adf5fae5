import Foundation
// The built binary's runner (`InboxProcess`) and the FUSE fixtures, shared with SystemTests, for every file here.
@_exported import FuseSupport
import Glibc
import Testing

/// A throwaway folder, removed when the test ends.
final class TemporaryFolder {
    let path: String

    init() throws {
        var template = Array("/tmp/inbox-cli-test.XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw POSIXError(.EIO) }
        path = String(cString: made)
    }

    deinit {
        try? FileManager.default.removeItem(atPath: path)
    }

    /// A fresh container made by `inbox init`.
    func container() throws -> String {
        let root = path + "/container"
        let result = try InboxProcess.run("--container", root, "init")
        #expect(result.status == 0, "init failed: \(result.stderr)")
        return root
    }

    /// Writes a file of `contents` and returns its path.
    @discardableResult
    func file(_ name: String, _ contents: String) throws -> String {
        let filePath = path + "/" + name
        try FileManager.default.createDirectory(
            atPath: (filePath as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try Data(contents.utf8).write(to: URL(fileURLWithPath: filePath))
        return filePath
    }
}
