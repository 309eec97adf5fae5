import AppContainer
import Glibc
import InboxKit

/// Which container a recipient delivers into (DESIGN §14, "Recipients"): the one of `--container`, or under
/// `--root DIR` the container `DIR/NAME`, NAME the local part up to its first `+`.
package enum LMTPRecipients: Sendable {
    case container([UInt8])
    case root([UInt8])

    /// The verdict on a recipient at `RCPT`: `550` (unknown) for a name that cannot be a container's, or names
    /// nothing that holds inbox's state folder in a readable root; `451` (failed) for any other failure to look.
    /// Whatever else is wrong with a container is found at delivery.
    package func lookUp(_ localPart: [UInt8]) -> LMTPProtocol.Verdict {
        switch self {
        case .container(let path):
            return .accepted(container: path)
        case .root(let root):
            let name = Array(localPart.prefix { $0 != UInt8(ascii: "+") })
            let shown = LMTPProtocol.shown(name)
            guard Self.canName(name) else { return .unknown("'\(shown)' cannot name a container") }
            let folder: FileDescriptor
            do {
                folder = try FileDescriptor(root, [.readOnly, .directory])
            } catch {
                return .failed("cannot read the containers' folder: \(error)")
            }
            do {
                guard try fileStatusIfPresent(in: folder.rawValue, name) != nil else {
                    return .unknown("no container '\(shown)' here")
                }
                let state = name + Array("/\(Container.stateRelativePath)".utf8)
                guard try fileStatusIfPresent(in: folder.rawValue, state)?.kind == .directory else {
                    return .unknown("'\(shown)' is not a container")
                }
            } catch .notDirectory {
                return .unknown("'\(shown)' is not a container")
            } catch {
                return .failed("cannot look up the container '\(shown)': \(error)")
            }
            return .accepted(container: root + [UInt8(ascii: "/")] + name)
        }
    }

    /// Whether `name` may name a folder under the root: not empty, valid UTF-8, no `/` or NUL, no leading `.`.
    static func canName(_ name: [UInt8]) -> Bool {
        guard let first = name.first, first != UInt8(ascii: "."), !name.contains(0x2F), !name.contains(0) else {
            return false
        }
        return String(validating: name, as: UTF8.self) != nil
    }

    /// How many containers the root holds now, for the line said at start; 1 for `--container`.
    package func count() throws(ContainerError) -> Int {
        guard case .root(let root) = self else { return 1 }
        do {
            let folder = try FileDescriptor(root, [.readOnly, .directory])
            return try folder.entries().filter { name in
                !name.isHidden && Container.isContainer(at: root + [UInt8(ascii: "/")] + name.bytes)
            }.count
        } catch {
            throw error.failure("read the containers' folder", root)
        }
    }
}
