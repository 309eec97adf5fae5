import AppContainer
import Glibc

/// The import's "exactly once" for one container (ARCHITECTURE.md, "Mail import"): its import index, `import.lock`,
/// the placing of staged messages (`placeOnce`) and the repair of what a crashed import left. An importer parses
/// and stages; its ledger places each batch, together with the other ledgers of its `ImportGroup` when it has one.
/// One ledger serves one thread.
package final class ImportLedger {
    package let inbox: Inbox
    let index: ImportIndex
    private let group: ImportGroup?

    /// At most this many messages, or attachments, are placed together.
    package static let batchMessages = 64
    package static let batchAttachments = Inbox.deliveryChunk

    /// The ledger of `inbox`'s container: its index open (rebuilt from the event log when missing or damaged), and
    /// what a crashed import left repaired. Its locks are waited for as `inbox.lockWait` says.
    /// - Throws: SQLite's failure to open or make the index, with the exit status that matches it.
    package convenience init(inbox: Inbox, group: ImportGroup? = nil) throws(ContainerError) {
        let index = try ImportIndex(container: inbox.container, lockWait: inbox.lockWait)
        self.init(inbox: inbox, index: index, group: group)
        try inbox.repairInterruptedImports(index: index)
    }

    /// A ledger over an index already open, nothing repaired yet.
    init(inbox: Inbox, index: ImportIndex, group: ImportGroup? = nil) {
        self.inbox = inbox
        self.index = index
        self.group = group
    }

    /// Whether every attachment of the message keyed `key` was delivered: its import needs nothing staged.
    package func isComplete(_ key: [UInt8]) throws(ContainerError) -> Bool {
        try index.isComplete(key)
    }

    /// Places `messages` (distinct keys) staged in the Inbox folder open at `folder` with `writes`, as `placeOnce`
    /// does, with the other ledgers of the group if there is one. Returns what became of each message, in order.
    package func place(_ messages: [StagedMessage], writes: StagedWrites, folder: CInt) -> [ImportPlacement] {
        guard let group else { return placeOnce(messages, writes: writes, folder: folder) }
        return group.place(messages, writes: writes, by: self, folder: folder)
    }
}
