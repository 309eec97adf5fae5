import AppContainer
import Foundation
import Glibc

/// Whether the temporary folder keeps `user.` extended attributes (where the exclusion flag is), probed by setting
/// one on a new file there.
package let userAttributesWork: Bool = {
    let path = FileManager.default.temporaryDirectory.path + "/inbox-xattr-probe-\(UUID().uuidString)"
    guard let file = try? FileDescriptor(path, [.writeOnly, .create, .exclusive], mode: 0o644) else { return false }
    defer { unlink(path) }
    return (try? system_fsetxattr(file.rawValue, "user.inbox-probe", [1])) != nil
}()
