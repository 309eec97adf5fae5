import AppContainer
import Dispatch
import Foundation
import Glibc
import InboxKit
import Synchronization

/// The main job on a fresh container, narrated: every sample attachment delivered through the library
/// hook, one moved into Documents for editing, then the listing and the event log.
enum Demo {
    /// Runs the demo in a new container at `containerPath` with the files under `samples`; `say` prints a line.
    static func run(samples: String, containerPath: String, say: @escaping @Sendable (String) -> Void)
        throws(ContainerError)
    {
        let files = sampleFiles(under: samples)
        guard !files.isEmpty else {
            throw ContainerError(.noSuchItem, "no sample attachments in '\(samples)': pass --samples DIR")
        }
        if let existing = try? FileManager.default.contentsOfDirectory(atPath: containerPath), !existing.isEmpty {
            throw ContainerError(.cannotCreate, "'\(containerPath)' is not empty: the demo needs a fresh folder")
        }
        let container = try Container.create(at: containerPath, appName: "Demo")
        let inbox = try Inbox(container: container)
        say("A fresh container: \(container.root)")
        say("The watcher moves each arrival into Documents; every event is shown as it is logged:")
        let live = LiveLog(log: inbox.log, say: say)
        var options = WatchOptions()
        options.onArrival = .move
        let watcher = Watcher(inbox: inbox, options: options, handler: MoveEverything())
        let finished = DispatchSemaphore(value: 0)
        let failure = Mutex<ContainerError?>(nil)
        Thread.detachNewThread {
            do throws(ContainerError) { try watcher.run() } catch { failure.withLock { $0 = error } }
            finished.signal()
        }
        do {
            try wait(for: .watchStarted, count: 1, in: inbox.log) { failure.withLock { $0 } }
            for (file, _) in files {
                _ = try inbox.deliver(contentsOf: file)
            }
            // Mail, too: each message's attachments delivered once, a forwarded message walked into.
            let importer = try MailImporter(inbox: inbox)
            var attachments = 0
            for message in mailFiles(under: samples) {
                try importer.importSource(message.path) { attachments += $0.attachments.count }
            }
            try wait(for: .moved, count: files.count + attachments, in: inbox.log) { failure.withLock { $0 } }
        } catch {
            failure.withLock { $0 = $0 ?? error }
        }
        watcher.stop()
        finished.wait()
        live.stop()
        if let error = failure.withLock({ $0 }) { throw error }
        say("")
        for place in [Place.inbox, .documents] {
            say("\(place.relativePath(appName: container.appName)):")
            for item in try container.list(place) {
                let size = String(item.size)
                let padded = String(repeating: " ", count: max(0, 8 - size.count)) + size
                say("  \(padded)  \(item.modified.rfc3339)  \(item.name)")
            }
            say("")
        }
        say("Read the log again with: inbox --container '\(container.root)' log")
    }

    /// Waits until the log holds `count` records of `kind`, or fails after a minute or when the watcher failed.
    private static func wait(
        for kind: EventKind, count: Int, in log: EventLog, failure: () -> ContainerError?
    ) throws(ContainerError) {
        let deadline = ContinuousClock.now + .seconds(60)
        while try log.records(kinds: [kind.rawValue]).count < count {
            if let error = failure() { throw error }
            guard ContinuousClock.now < deadline else {
                throw ContainerError(.failure, "the demo waited a minute for \(count) '\(kind.rawValue)' records")
            }
            usleep(20_000)
        }
    }

    /// A new empty folder in the temporary folder.
    static func freshFolder() throws(ContainerError) -> String {
        var template = Array("/tmp/inbox-demo.XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else {
            throw ContainerError(.cannotCreate, "cannot create a folder for the demo in /tmp")
        }
        return String(cString: made)
    }

    /// The regular files under `folder`, recursively, sorted by path; hidden files and the generator are skipped.
    static func sampleFiles(under folder: String) -> [(url: URL, relative: String)] {
        let root = URL(fileURLWithPath: folder, isDirectory: true).standardizedFileURL
        guard
            let walker = FileManager.default.enumerator(
                at: root, includingPropertiesForKeys: [.isRegularFileKey], options: [.skipsHiddenFiles])
        else { return [] }
        var files: [(url: URL, relative: String)] = []
        for case let url as URL in walker {
            guard (try? url.resourceValues(forKeys: [.isRegularFileKey]))?.isRegularFile == true,
                !["py", "md"].contains(url.pathExtension)
            else { continue }
            let relative = url.standardizedFileURL.path.dropFirst(root.path.count).drop(while: { $0 == "/" })
            // Messages under mail/ are imported, not delivered as files.
            guard !relative.hasPrefix("mail/") else { continue }
            files.append((url, String(relative)))
        }
        return files.sorted { $0.relative < $1.relative }
    }
}

extension Demo {
    /// The sample messages to import: the `.eml` files under `mail/`, in order.
    static func mailFiles(under folder: String) -> [URL] {
        let mail = URL(fileURLWithPath: folder, isDirectory: true).appendingPathComponent("mail")
        let names = (try? FileManager.default.contentsOfDirectory(atPath: mail.path)) ?? []
        return names.filter { $0.hasSuffix(".eml") }.sorted().map { mail.appendingPathComponent($0) }
    }
}

/// The demo's library handler: every arrival goes into Documents.
struct MoveEverything: ArrivalHandler {
    func handle(_ arrival: Arrival) -> Disposition { .move }
}

/// Prints each record of the log as it is appended, on a thread of its own, until stopped.
final class LiveLog: Sendable {
    private let stopping = Mutex(false)
    private let done = DispatchSemaphore(value: 0)

    init(log: EventLog, say: @escaping @Sendable (String) -> Void) {
        Thread.detachNewThread { [self] in
            try? log.follow(shouldStop: { self.stopping.withLock { $0 } }) { record in
                say("  " + LiveLog.line(record))
                return true
            }
            self.done.signal()
        }
    }

    /// Stops following once what is already logged has been printed.
    func stop() {
        let first = stopping.withLock { stopping -> Bool in
            defer { stopping = true }
            return !stopping
        }
        if first { done.wait() }
    }

    /// `12 moved      Documents/Inbox/a.pdf -> Documents/a.pdf`
    static func line(_ record: EventRecord) -> String {
        let event = record.event.padding(toLength: 13, withPad: " ", startingAt: 0)
        var detail = record.fields["path"] ?? record.fields["from"] ?? ""
        if let to = record.fields["to"] { detail += " -> " + to }
        if let type = record.fields["type"] { detail += "  (\(type), \(record.fields["size"] ?? "?") bytes)" }
        if let reason = record.fields["reason"] { detail += "  [\(reason)]" }
        if let disposition = record.fields["disposition"] { detail += "  -> \(disposition)" }
        return "\(record.seq) ".padding(toLength: 5, withPad: " ", startingAt: 0) + event + detail
    }
}
