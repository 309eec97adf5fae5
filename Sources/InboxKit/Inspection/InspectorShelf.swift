import AppContainer
import Synchronization

/// The content inspectors of the process, lent one per call (ARCHITECTURE.md, "Many containers"): each holds a
/// libmagic handle (its database mapped, about 200 KiB of its own) and a read buffer, too much to keep one per
/// container when a process serves a thousand. There are never more than the calls under way at once: one for
/// a lone watcher, a few for a fleet.
final class InspectorShelf: Sendable {
    static let shared = InspectorShelf()

    /// An inspector on the shelf: only one caller at a time ever holds it.
    private struct Lent: @unchecked Sendable {
        let inspector: ContentInspector
    }

    private let idle = Mutex<[Lent]>([])

    /// `ContentInspector.inspect` by an idle inspector (made when none is), put back after.
    func inspect(_ fd: CInt, size: Int64?) throws(ContainerError) -> Inspection {
        let lent: Lent
        if let shelved = idle.withLock({ $0.popLast() }) {
            lent = shelved
        } else {
            lent = Lent(inspector: try ContentInspector())
        }
        defer { idle.withLock { $0.append(lent) } }
        return try lent.inspector.inspect(fd, size: size)
    }
}
