import AppContainer
import Foundation
import Glibc

/// The main job on a fresh container, narrated: every sample attachment delivered through the library
/// hook, one moved into Documents for editing, then the listing and the event log.
public enum Demo {
    /// Runs the demo in a new container at `containerPath` with the files under `samples`; `say` prints a line.
    public static func run(samples: String, containerPath: String, say: (String) -> Void) throws(ContainerError) {
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
        say("")
        say("Delivering \(files.count) attachments through Inbox.deliver(contentsOf:):")
        for (file, relative) in files {
            let url = try inbox.deliver(contentsOf: file)
            say("  delivered  \(relative)  ->  Documents/Inbox/\(url.lastPathComponent)")
        }
        say("")
        let items = try inbox.items()
        if let first = items.first(where: { $0.name.string.hasPrefix("invoice") }) ?? items.first {
            let document = try first.prepareForEditing()
            say("Moved before editing: Documents/Inbox/\(first.name)  ->  Documents/\(document.name)")
            say("")
        }
        for place in [Place.inbox, .documents] {
            say("\(place.relativePath(appName: container.appName)):")
            for item in try container.list(place) {
                let size = String(item.size)
                say(
                    "  \(String(repeating: " ", count: max(0, 8 - size.count)))\(size)  \(item.modified.rfc3339)  \(item.name)"
                )
            }
            say("")
        }
        say("The event log (inbox --container '\(container.root)' log):")
        for record in try inbox.log.records() {
            say("  " + record.line)
        }
    }

    /// A new empty folder in the temporary folder.
    public static func freshFolder() throws(ContainerError) -> String {
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
            files.append((url, String(relative)))
        }
        return files.sorted { $0.relative < $1.relative }
    }
}
