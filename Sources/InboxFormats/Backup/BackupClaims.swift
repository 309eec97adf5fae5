import AppContainer
import Glibc
import InboxKit

/// Inbox items an `inbox move` had claimed when a backup ran (ARCHITECTURE.md, "Nothing lost"): a copy renames its
/// item to a hidden claim name (`Mover.claimPrefix`) until the copy in Documents has its name. Nothing handles a
/// hidden name in a restored Inbox, so a backup holds a claimed item under its own name, which the move's journal
/// intent gives (the next free Inbox clash name when another entry has it). A restore gives a claim name still in
/// an archive (one whose intent could not be read, or from an older inbox) a visible name: the claim name without
/// its prefix.
enum ClaimedItems {
    /// Whether `name` is a claim name.
    static func isClaim(_ name: FileName) -> Bool {
        name.bytes.count > Mover.claimPrefix.count && name.bytes.starts(with: Mover.claimPrefix)
    }

    /// For the claims among `names` (all the Inbox holds), the name each is archived under. A claim whose intent
    /// cannot be read is left out, archived under its claim name.
    static func archivedNames(_ names: [FileName], container: Container) -> [FileName: FileName] {
        var taken = Set(names)
        var archived: [FileName: FileName] = [:]
        let journal = MoveJournal(container: container)
        for claim in names where isClaim(claim) {
            guard let own = journal.claimedItem(claim) else { continue }
            do {
                let free = try ClashNaming.inbox.firstFree(for: own) { candidate throws(Errno) in
                    if taken.contains(candidate) { throw .fileExists }
                }
                taken.insert(free)
                archived[claim] = free
            } catch {
                continue  // no free name at all: it keeps its claim name, which a restore makes visible
            }
        }
        return archived
    }

    /// The visible name for a claim name nothing could map: what follows the prefix, without leading dots.
    static func visibleName(_ claim: FileName) -> FileName {
        let rest = claim.bytes.dropFirst(Mover.claimPrefix.count).drop { $0 == 0x2E }
        return FileName(bytes: rest) ?? FileName("claimed item").unsafelyUnwrapped
    }

    /// Renames each claim name in the staged Inbox (`staging/Documents/Inbox`) to its visible name, or the next
    /// free clash name, and updates `report`. The folder keeps the times the archive gave it.
    static func unclaim(inStaging staging: CInt, _ report: inout RestoreReport, shown: String) throws(ContainerError) {
        let inboxPath = Array("Documents/Inbox/".utf8)
        do throws(Errno) {
            guard try fileStatusIfPresent(in: staging, "Documents/Inbox")?.kind == .directory else { return }
            let inbox = try FileDescriptor(at: staging, "Documents/Inbox", [.directory, .noFollow])
            let claims = try inbox.entries().filter(isClaim)
            guard !claims.isEmpty else { return }
            let times = try inbox.fileStatus()
            for claim in claims {
                let visible = try ClashNaming.inbox.firstFree(for: visibleName(claim)) { candidate throws(Errno) in
                    try renameNoReplace(inbox.rawValue, claim, inbox.rawValue, candidate)
                }
                if let index = report.restored.firstIndex(of: inboxPath + claim.bytes) {
                    report.restored[index] = inboxPath + visible.bytes
                }
            }
            try system_futimens(
                inbox.rawValue, accessed: times.accessed.timespecValue, modified: times.modified.timespecValue)
        } catch {
            throw error.failure("name the claimed items of", shown + "/Documents/Inbox")
        }
    }
}
