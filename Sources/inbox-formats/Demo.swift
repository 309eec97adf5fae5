import AppContainer
import Dispatch
import FoundationEssentials
import Glibc
import InboxCommands
import InboxFormats
import Synchronization

/// The main job on a fresh container, narrated: every sample attachment delivered through the library
/// hook, one moved into Documents for editing, then the listing and the event log.
enum Demo {
    /// Runs the demo in a new container at `containerPath` with the files under `samples`; `say` prints a line.
    static func run(samples: String, containerPath: [UInt8], say: @escaping @Sendable (String) -> Void)
        throws(ContainerError)
    {
        let files = sampleFiles(under: samples)
        guard !files.isEmpty else {
            throw ContainerError(.noSuchItem, "no sample attachments in '\(samples)': pass --samples DIR")
        }
        if let existing = try? FileDescriptor(containerPath, [.directory]).entries(), !existing.isEmpty {
            let shown = String(decoding: containerPath, as: UTF8.self)
            throw ContainerError(.cannotCreate, "'\(shown)' is not empty: the demo needs a fresh folder")
        }
        let container = try Container.create(at: containerPath, appName: "Demo")
        let inbox = try Inbox(container: container)
        say("A fresh container: \(container.root)")
        var options = WatchOptions()
        options.onArrival = .move
        let watcher = Watcher(inbox: inbox, options: options, handler: MoveEverything())
        let finished = DispatchSemaphore(value: 0)
        let failure = Mutex<ContainerError?>(nil)
        do throws(Errno) {
            try startDetachedThread {
                do throws(ContainerError) { try watcher.runBlocking() } catch { failure.withLock { $0 = error } }
                finished.signal()
            }
        } catch {
            throw error.failure("start a thread for", "the demo's watcher")
        }
        var shown = DemoLog(log: inbox.log, width: files.map(\.relative.count).max() ?? 0, say: say)
        do {
            // The start first, whole: the start-up scan and one-time setup run side by side.
            try wait(for: [.watchStarted, .rescan, .setup], count: 1, in: inbox.log) { failure.withLock { $0 } }
            try shown.printStart()
            say(
                "Its handler moves each arrival into Documents. Each sample, delivered one at a time, and its log records:"
            )
            var moves = 0
            for (file, relative) in files {
                let delivered = try inbox.deliver(contentsOf: file)
                moves += 1
                try wait(for: [.moved], count: moves, in: inbox.log) { failure.withLock { $0 } }
                try shown.printStep(labels: [delivered.lastPathComponent: relative])
            }
            // Mail, too: each message's attachments delivered once, a forwarded message walked into.
            let importer = try MailImporter(inbox: inbox)
            for message in mailFiles(under: samples) {
                var labels: [String: String] = [:]
                try importer.importSource(message.path) { result in
                    for attachment in result.attachments {
                        labels[attachment.item.name.string] = "  " + attachment.item.name.string
                    }
                }
                moves += labels.count
                try wait(for: [.moved], count: moves, in: inbox.log) { failure.withLock { $0 } }
                try shown.printStep(labels: labels, message: "mail/" + message.lastPathComponent)
            }
        } catch {
            failure.withLock { $0 = $0 ?? error }
        }
        watcher.stop()
        finished.wait()
        if let error = failure.withLock({ $0 }) { throw error }
        try shown.printStop()
        for place in [Place.inbox, .documents] {
            let items = try container.list(place)
            let count = items.count == 1 ? "1 item" : "\(items.count) items"
            let heading = place.relativePath(appName: container.appName)
            say(
                items.isEmpty
                    ? "\(heading) now holds nothing: every arrival was moved." : "\(heading) now holds \(count):")
            for item in items {
                let size = String(item.size)
                let padded = String(repeating: " ", count: max(0, 8 - size.count)) + size
                say("  \(padded)  \(item.modified.rfc3339)  \(item.name)")
            }
        }
        say("Read the whole log with: \(invocation) --container \(ShellCompletion.quoted(container.root)) log")
    }

    /// How to run `inbox` again as the user ran it: `inbox` when found on the PATH, else the path it was run by, which
    /// the hand-over to `inbox-formats` keeps as the first argument (this binary's own path would name
    /// `inbox-formats`).
    private static var invocation: String {
        let first = CommandLine.arguments.first ?? "inbox"
        return first.contains("/") ? ShellCompletion.quoted(first) : first
    }

    /// Waits until the log holds `count` records of each of `kinds`, or fails after a minute or when the watcher
    /// failed.
    private static func wait(
        for kinds: [EventKind], count: Int, in log: EventLog, failure: () -> ContainerError?
    ) throws(ContainerError) {
        let deadline = ContinuousClock.now + .seconds(60)
        for kind in kinds {
            while try log.records(kinds: [kind]).count < count {
                if let error = failure() { throw error }
                guard ContinuousClock.now < deadline else {
                    throw ContainerError(.failure, "the demo waited a minute for \(count) '\(kind.rawValue)' records")
                }
                usleep(20_000)
            }
        }
    }

    /// The regular files under `folder`, recursively, sorted by path; hidden files and the generator are skipped.
    static func sampleFiles(under folder: String) -> [(url: URL, relative: String)] {
        let root = URL(fileURLWithPath: folder, isDirectory: true).standardizedFileURL
        var files: [(url: URL, relative: String)] = []
        var folders = [""]  // below root, never through a symbolic link
        while let relative = folders.popLast() {
            let path = relative.isEmpty ? root.path : root.path + "/" + relative
            for name in (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? [] where !name.hasPrefix(".") {
                let inner = relative.isEmpty ? name : relative + "/" + name
                guard let status = try? fileStatus(in: currentDirectory, path + "/" + name) else { continue }
                if status.kind == .directory {
                    folders.append(inner)
                    continue
                }
                // Messages under mail/ are imported, not delivered as files.
                guard status.kind == .regular, !name.hasSuffix(".py"), !name.hasSuffix(".md"), !inner.hasPrefix("mail/")
                else { continue }
                files.append((root.appendingPathComponent(inner), inner))
            }
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

/// Tells what the log recorded after each step of the demo, a line a file: the kinds of its records in order, each
/// file's together even when the watcher took two in one batch, so the demo reads the same every time.
struct DemoLog {
    let log: EventLog
    /// The width of the first column, the samples' names.
    let width: Int
    let say: @Sendable (String) -> Void
    /// The last record told.
    private var cursor: UInt64 = 0

    init(log: EventLog, width: Int, say: @escaping @Sendable (String) -> Void) {
        self.log = log
        self.width = width
        self.say = say
    }

    /// `watch-started`, `rescan` and `setup`, whichever of the last two came first.
    mutating func printStart() throws(ContainerError) {
        let records = try log.records(since: cursor)
        cursor = records.last?.seq ?? cursor
        let found = records.first { $0.kind == .rescan }?.fields["found"] ?? "?"
        say(
            "The watcher started (watch-started), found \(found) items in the Inbox (rescan), ran one-time setup (setup)."
        )
    }

    /// `watch-stopped`.
    mutating func printStop() throws(ContainerError) {
        let records = try log.records(since: cursor)
        cursor = records.last?.seq ?? cursor
        say("The watcher stopped (\(records.map(\.event).joined(separator: ", "))).")
    }

    /// A line for each Inbox item the records since the last step name, in the order of its first record, and
    /// first the message they came in, if any. `labels` names the sample each delivered name came from.
    mutating func printStep(labels: [String: String], message: String? = nil) throws(ContainerError) {
        let records = try log.records(since: cursor)
        cursor = records.last?.seq ?? cursor
        var order: [String] = []
        var items: [String: [EventRecord]] = [:]
        for record in records {
            guard let path = record.fields["path"] ?? record.fields["from"] else {
                let detail = DemoLog.fragment(record)
                say("  " + (message ?? "").padded(to: width) + "  " + detail)
                continue
            }
            if items[path] == nil { order.append(path) }
            items[path, default: []].append(record)
        }
        for path in order {
            let name = String(path.split(separator: "/").last ?? "")
            let label = (labels[name] ?? name).padded(to: width)
            say("  " + label + "  " + (items[path] ?? []).map(DemoLog.fragment).joined(separator: ", "))
        }
    }

    /// One record, briefly: `arrived (pdf, 1174 bytes)`, `moved to Documents/page.pdf`.
    static func fragment(_ record: EventRecord) -> String {
        let fields = record.fields
        switch record.kind {
        case .arrived: return "arrived (\(fields["type"] ?? "?"), \(fields["size"] ?? "?") bytes)"
        case .handled: return "handled: \(fields["disposition"] ?? "?")"
        case .moved: return "moved to " + (fields["to"] ?? "?")
        case .imported:
            return "imported: \(fields["attachments"] ?? "?") attachments, each delivered once"
        case .error: return "error: " + (fields["message"] ?? "?")
        default: return record.event + (fields["reason"].map { " (\($0))" } ?? "")
        }
    }
}
