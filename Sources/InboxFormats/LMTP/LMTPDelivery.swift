import AppContainer
import Glibc
import InboxKit
import Synchronization

/// A message received over LMTP imported into each recipient's container by the path `inbox import -` takes
/// (`MailImporter.importMessage(fromFile:)`), each outcome the reply §12's exit status maps to: 0 → 250, 65 → 552
/// or 554, 75 → 451 (DESIGN §14, "Replies"). The `imported` record's source is `lmtp`. The sessions delivering into
/// one container place their messages together (`ImportGroup`): they share its syncs.
package struct LMTPDelivery: Sendable {
    /// The limits of `--max-bytes`, as `import` has them.
    package let limits: MailLimits
    private let groups = Groups()

    package init(limits: MailLimits) { self.limits = limits }

    /// The source records name.
    static let source = "lmtp"

    /// What one session keeps from one message to the next: an importer for each container it delivered into
    /// lately (its index open, its crashed imports repaired once), while the container is still the one it opened.
    package final class Session {
        private let delivery: LMTPDelivery
        /// The most recently used last; at most `kept`.
        private var importers: [(path: [UInt8], identity: [FileID], importer: MailImporter)] = []
        /// How many importers a session keeps (each holds an index connection and the log open).
        static let kept = 8

        init(_ delivery: LMTPDelivery) { self.delivery = delivery }

        /// One outcome per recipient, in order; one recipient's failure never changes another's.
        package func deliver(_ file: CInt, to recipients: [LMTPProtocol.Accepted]) -> [LMTPProtocol.Outcome] {
            recipients.map { deliver(file, into: $0.container) }
        }

        /// The message in `file` imported into the container at `path`: the importer's answer once its records are
        /// durable, as for `import -`. An importer that failed is dropped: the next message opens the container
        /// afresh.
        func deliver(_ file: CInt, into path: [UInt8]) -> LMTPProtocol.Outcome {
            do throws(ContainerError) {
                let importer = try importer(for: path)
                do throws(ContainerError) {
                    return LMTPDelivery.outcome(try importer.importMessage(fromFile: file, source: LMTPDelivery.source))
                } catch {
                    importers.removeAll { $0.importer === importer }
                    throw error
                }
            } catch {
                return .failed(error.message)
            }
        }

        /// The importer kept for `path` while the container there is the one it opened (its root, state folder and
        /// Inbox the same files: not replaced, restored or recreated since); else one opened now.
        private func importer(for path: [UInt8]) throws(ContainerError) -> MailImporter {
            if let index = importers.firstIndex(where: { $0.path == path }) {
                let kept = importers.remove(at: index)
                // Not the same files, or not to be looked at: the container is opened afresh, as for a first message.
                if (try? LMTPDelivery.identity(of: path, kept.importer.inbox.container)) == kept.identity {
                    importers.append(kept)
                    return kept.importer
                }
            }
            let container = try Container.open(at: path)
            try container.requireSingleHost()
            let identity = try LMTPDelivery.identity(of: path, container)
            // The MTA waits for the reply: no lock is waited for longer than a delivery allows, as for `import -`
            // (ARCHITECTURE.md, "Nothing blocks an MTA"): past it, 451 naming the holder.
            let importer = try MailImporter(
                inbox: try Inbox(container: container, lockWait: .delivery), limits: delivery.limits,
                group: delivery.groups.group(for: Array(identity.dropFirst())))
            importer.describes = false  // no reply names a subject or an attachment's hash
            // Its Inbox kept open while the identity holds, if it is the folder the identity names (the descriptor
            // keeps that folder's inode from being reused).
            let folder = SharedDescriptor(try container.openFolder(.inbox))
            let opened: FileID
            do {
                opened = FileStatus(try system_fstat(folder.rawValue)).fileID
            } catch {
                throw error.failure("look at", container.path(.inbox))
            }
            if opened == identity.last { importer.keptInboxFolder = folder }
            if importers.count >= Self.kept { importers.removeFirst() }
            importers.append((path, identity, importer))
            return importer
        }
    }

    /// A session's own deliverer.
    package func session() -> Session { Session(self) }

    /// The files that make a container the one opened: the path as given, the root, its state folder, its Inbox.
    static func identity(of path: [UInt8], _ container: Container) throws(ContainerError) -> [FileID] {
        let state = container.rootBytes + Array("/\(Container.stateRelativePath)".utf8)
        var identity: [FileID] = []
        for path in [path, container.rootBytes, state, container.pathBytes(.inbox)] {
            do throws(Errno) {
                identity.append(try fileStatus(in: currentDirectory, path).fileID)
            } catch {
                throw error.failure("look at", path)
            }
        }
        return identity
    }

    /// The group of each container delivered into, by its root, state folder and Inbox: shared by every session of
    /// the server.
    private final class Groups: Sendable {
        private let groups = Mutex<[[FileID]: ImportGroup]>([:])

        func group(for identity: [FileID]) -> ImportGroup {
            groups.withLock { groups in
                if let group = groups[identity] { return group }
                let group = ImportGroup()
                groups[identity] = group
                return group
            }
        }
    }

    /// The reply for what importing did.
    static func outcome(_ message: ImportedMessage) -> LMTPProtocol.Outcome {
        let count = message.attachments.count
        switch message.status {
        case .imported where count > 0:
            return .delivered("imported: \(count) \(count == 1 ? "attachment" : "attachments") delivered")
        case .imported:
            return .delivered(message.found == 0 ? "no attachments: nothing to deliver" : "delivered before")
        case .duplicate:
            return .delivered("duplicate: imported before")
        case .refused:
            let reason = message.reason ?? "refused"
            return message.notAMessage ? .notAMessage(reason) : .overLimit("refused: \(reason)")
        }
    }
}
