import AppContainer
import FoundationEssentials
import Glibc

/// The Inbox of one container: where other programs hand files to the app (ARCHITECTURE.md, "How an arrival flows",
/// "Delivery").
public final class Inbox: Sendable {
    /// The container whose Inbox this is.
    public let container: Container
    /// The container's event log, where every delivery, arrival and move is recorded.
    public let log: EventLog

    /// How long this Inbox's work waits for `events.lock` and `import.lock` while another holds them: bounded for a
    /// delivery an MTA waits on (ARCHITECTURE.md, "Nothing blocks an MTA").
    package let lockWait: LockWait

    /// The Inbox of an open container, with its event log.
    public init(container: Container) throws(ContainerError) {
        self.container = container
        self.lockWait = .unbounded
        self.log = try EventLog(container: container)
    }

    /// The Inbox of an open container, whose log and import index wait for their locks as `lockWait` says:
    /// `.delivery` for what an MTA drives (`inbox import -`, `inbox deliver`, an LMTP delivery).
    package init(container: Container, lockWait: LockWait) throws(ContainerError) {
        self.container = container
        self.lockWait = lockWait
        self.log = try EventLog(container: container, lockWait: lockWait)
    }

    /// Opens the Inbox of the container at `path`.
    public convenience init(containerPath path: some CStringConvertible) throws(ContainerError) {
        try self.init(container: try Container.open(at: path))
    }

    /// The Inbox's items, sorted by name. Staging names (a leading `.`) are not items.
    public func items() throws(ContainerError) -> [InboxItem] {
        let folder = try container.openFolder(.inbox)
        var items: [InboxItem] = []
        do {
            for name in try folder.entries() where !name.isHidden {
                do {
                    items.append(InboxItem(inbox: self, name: name, status: try fileStatus(in: folder.rawValue, name)))
                } catch .noSuchFile {
                    continue  // gone since the folder was read
                }
            }
        } catch {
            throw error.failure("list", container.path(.inbox))
        }
        return items.sorted { $0.name < $1.name }
    }

    /// The item called `name`; exit status 66 when there is none.
    public func item(named name: FileName) throws(ContainerError) -> InboxItem {
        let folder = try container.openFolder(.inbox)
        do {
            return InboxItem(inbox: self, name: name, status: try fileStatus(in: folder.rawValue, name))
        } catch .noSuchFile {
            throw ContainerError(.noSuchItem, "no item '\(name)' in the Inbox '\(container.path(.inbox))'")
        } catch {
            throw error.failure("read", itemPath(name))
        }
    }

    /// The absolute path of `name` in the Inbox, for messages.
    func itemPath(_ name: FileName) -> String {
        container.path(.inbox) + "/" + name.string
    }

    /// `Documents/Inbox/<name>` as bytes: how the event log names an Inbox item.
    func loggedPath(_ place: Place, _ name: FileName) -> [UInt8] {
        Array(place.relativePath(appName: container.appName).utf8) + [0x2F] + name.bytes
    }
}
