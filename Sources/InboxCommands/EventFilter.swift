import Glibc
import InboxKit

/// What `inbox log` selects beyond `since` and kinds (ARCHITECTURE.md, "The command line"): records up to a seq,
/// and records whose `path`, `from` or `to` matches a shell pattern.
package struct EventFilter: Sendable {
    /// Only records with seq at most this.
    package var until: UInt64?
    /// An `fnmatch(3)` pattern without flags, so `*` matches `/` too: `*.pdf` matches a PDF in any folder.
    package var pathPattern: [UInt8]?

    /// A filter; with neither argument it selects every record.
    package init(until: UInt64? = nil, pathPattern: [UInt8]? = nil) {
        self.until = until
        self.pathPattern = pathPattern
    }

    /// Whether `record` is at most `until`, and has a `path`, `from` or `to` that matches `pathPattern` (when set).
    /// Paths are matched as their exact bytes, also those logged as `<key>_b64`.
    package func matches(_ record: EventRecord) -> Bool {
        if let until, record.seq > until { return false }
        guard let pathPattern else { return true }
        let pattern = pathPattern + [0]
        return ["path", "from", "to"].contains { key in
            guard let path = record.pathBytes(key) else { return false }
            let subject = path + [0]
            return pattern.withUnsafeBufferPointer { p in
                subject.withUnsafeBufferPointer { s in
                    p.withMemoryRebound(to: CChar.self) { pattern in
                        s.withMemoryRebound(to: CChar.self) { subject in
                            fnmatch(pattern.baseAddress, subject.baseAddress, 0) == 0
                        }
                    }
                }
            }
        }
    }
}
