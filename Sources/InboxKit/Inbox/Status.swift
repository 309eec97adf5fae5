import AppContainer
import FoundationEssentials

/// What `inbox status` reports: the watcher, each place's contents, overflows, the last scan, and the
/// inotify limits in force (read from /proc: libinotifytools' getter for the queue size is broken).
package struct ContainerStatus: Sendable {
    /// The regular files of one place and their bytes. Documents leaves out the Inbox and Library leaves out Caches;
    /// Library still holds Application Support and Preferences, so the places' totals overlap.
    package struct PlaceUsage: Sendable {
        /// The place counted.
        package let place: Place
        /// How many regular files it holds, at any depth.
        package let files: Int
        /// Their bytes.
        package let bytes: Int64
        /// How many entries or folders below it could not be read (or lay too deep), and are not counted.
        package let unreadable: Int
    }

    /// The container's root, exact to the byte.
    package let rootBytes: [UInt8]
    /// The container's root as text (U+FFFD for a byte that is not UTF-8).
    package var root: String { String(decoding: rootBytes, as: UTF8.self) }
    /// The process id of the watcher holding the container, or nil when none runs.
    package let watcherPID: Int32?
    /// Every place, in the order of `Place.allCases`.
    package let places: [PlaceUsage]
    /// How many `overflow` records the log holds: times the watcher lost inotify events and scanned instead.
    package let overflows: Int
    /// The time of the last `rescan` record, as the log wrote it; nil when there is none.
    package let lastScan: String?
    /// `max_queued_events`, `max_user_watches` and `max_user_instances` from `/proc/sys/fs/inotify/`; nil where
    /// unreadable.
    package let inotifyLimits: [(name: String, value: Int?)]
    /// The filesystem of the Inbox: whether the watcher polls it, and the mount's cache options (ARCHITECTURE.md,
    /// "Network and FUSE filesystems"); nil where the Inbox cannot be opened.
    package let filesystem: Filesystem?

    /// Reads the status of `container` now: its log, its watcher lock and a walk of every place.
    package static func read(_ container: Container) throws(ContainerError) -> ContainerStatus {
        let log = try EventLog(reading: container)
        let records = try log.records(kinds: [.overflow, .rescan])
        let overflows = records.filter { $0.kind == .overflow }.count
        let lastScan = records.last { $0.kind == .rescan }?.time
        let places = Place.allCases.map { place in
            let (files, bytes, unreadable) = usage(
                of: container.pathBytes(place), skipping: place == .documents ? "Inbox" : nil,
                stopAt: place == .library ? ["Caches"] : [])
            return PlaceUsage(place: place, files: files, bytes: bytes, unreadable: unreadable)
        }
        let limits = ["max_queued_events", "max_user_watches", "max_user_instances"].map { name in
            (
                name,
                (try? String(contentsOfFile: "/proc/sys/fs/inotify/" + name, encoding: .utf8))
                    .flatMap { Int($0.trimmingWhitespace) }
            )
        }
        let filesystem = try? Filesystem(of: container.openFolder(.inbox), named: true)
        return ContainerStatus(
            rootBytes: container.rootBytes, watcherPID: WatcherLock.holder(of: container), places: places,
            overflows: overflows, lastScan: lastScan, inotifyLimits: limits, filesystem: filesystem)
    }

    /// Files and bytes below `path`, never following a symbolic link; the names `skipping` and `stopAt` at its top
    /// are left out. What cannot be read is passed over and counted in `unreadable`.
    private static func usage(of path: [UInt8], skipping: String?, stopAt: Set<String>) -> (Int, Int64, Int) {
        guard let folder = try? FileDescriptor(path, [.directory, .noFollow]) else { return (0, 0, 0) }
        var unreadable = 0
        let names = Set(stopAt.union(skipping.map { [$0] } ?? []).compactMap { FileName($0) })
        let shown = String(decoding: path, as: UTF8.self)
        do {
            let total = try folder.regularFiles(maxDepth: maxDepth, leavingOut: names, shown: shown) { _ in
                unreadable += 1
            }
            return (total.files, total.bytes, unreadable)
        } catch {
            return (0, 0, unreadable + 1)  // the place's own folder could not be read
        }
    }

    /// How deep a place is counted: as deep as a backup goes.
    static let maxDepth = 256

    /// `{"watcher":{"running":…,"pid":…},"places":{…},"overflows":…,"last_scan":…,"inotify":{…}}`, every key
    /// snake_case like the log's (`application_support`), slashes unescaped.
    package var json: String {
        var places: [String: JSONValue] = [:]
        for usage in self.places {
            var counts: [String: JSONValue] = ["files": .integer(Int64(usage.files)), "bytes": .integer(usage.bytes)]
            if usage.unreadable > 0 { counts["unreadable"] = .integer(Int64(usage.unreadable)) }
            places[Self.snakeCase(usage.place.rawValue)] = .object(counts)
        }
        var limits: [String: JSONValue] = [:]
        for (name, value) in inotifyLimits { limits[name] = value.map { .integer(Int64($0)) } ?? .null }
        var fields: [String: JSONValue] = [
            "watcher": .object([
                "running": .bool(watcherPID != nil), "pid": watcherPID.map { .integer(Int64($0)) } ?? .null,
            ]),
            "container": .string(root),
            "overflows": .integer(Int64(overflows)),
            "last_scan": lastScan.map { .string($0) } ?? .null,
            "places": .object(places),
            "inotify": .object(limits),
        ]
        if let filesystem {
            fields["filesystem"] = .object([
                "type": .string(filesystem.name), "polling": filesystem.pollReason.map { .string($0) } ?? .null,
                "cache_options": .array(filesystem.cacheOptions.map { .string($0) }),
                "advice": Self.cacheAdvice(filesystem).map { .string($0) } ?? .null,
            ])
        }
        // A root that is not UTF-8 also comes exact, as paths do in the log (`<key>_b64`).
        if String(validating: rootBytes, as: UTF8.self) == nil {
            fields["container_b64"] = .string(Data(rootBytes).base64EncodedString())
        }
        let object: JSONValue = .object(fields)
        return object.json(escapingSlashes: false)
    }

    /// The report for a person.
    package var text: String {
        lines.map { String(decoding: $0, as: UTF8.self) }.joined(separator: "\n")
    }

    /// The report for a person, a line each, the container's path exact to the byte (`inbox status` escapes each on
    /// a terminal).
    package var lines: [[UInt8]] {
        [Array("container  ".utf8) + rootBytes] + details.map { Array($0.utf8) }
    }

    /// The lines of the report after the container's.
    private var details: [String] {
        var lines = ["watcher    " + (watcherPID.map { "running (pid \($0))" } ?? "not running")]
        for usage in places {
            let name = usage.place.relativePath(appName: "App").replacingEvery("App.app", with: "bundle")
            lines.append(
                "  \(name.padded(to: 30)) \(Self.count(usage.files, "file", "files")), \(Self.count(Int(usage.bytes), "byte", "bytes"))"
                    + (usage.unreadable > 0 ? ", \(usage.unreadable) unreadable (not counted)" : ""))
        }
        lines.append("overflows  \(overflows)")
        lines.append("last scan  \(lastScan ?? "never")")
        lines.append(
            "inotify    "
                + inotifyLimits.map { "\($0.name)=\($0.value.map(String.init) ?? "?")" }.joined(separator: " "))
        if let filesystem {
            let cache =
                filesystem.cacheOptions.isEmpty ? "" : ", cache \(filesystem.cacheOptions.joined(separator: ","))"
            lines.append(
                "filesystem \(filesystem.name)"
                    + (filesystem.pollReason.map {
                        ": polling (\($0): another host's writes raise no inotify event)"
                    } ?? ": inotify, never polled") + cache)
            if let advice = Self.cacheAdvice(filesystem) { lines.append("           \(advice)") }
        }
        return lines
    }

    /// On NFS, arrivals wait up to `acdirmax` (60 s by default) for the client's cached folder: the advice to mount
    /// with `lookupcache=positive,acdirmax=2`, unless it is so mounted.
    static func cacheAdvice(_ filesystem: Filesystem) -> String? {
        guard filesystem.name.hasPrefix("nfs") else { return nil }
        let options = Set(filesystem.options)
        guard !options.contains("lookupcache=positive") || !options.contains("acdirmax=2") else { return nil }
        return "advice: mount with lookupcache=positive,acdirmax=2, so that other hosts' files arrive within seconds"
    }

    /// `1 file`, `2 files`, `0 files`.
    static func count(_ number: Int, _ one: String, _ many: String) -> String {
        "\(number) \(number == 1 ? one : many)"
    }

    /// `applicationSupport` as `application_support`.
    static func snakeCase(_ name: String) -> String {
        name.reduce(into: "") { result, character in
            if character.isUppercase {
                result += "_" + character.lowercased()
            } else {
                result.append(character)
            }
        }
    }
}
