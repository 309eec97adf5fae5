import Foundation
import Glibc
import TestSupport
import Testing

/// The package's units under the booted tree's own systemd (ARCHITECTURE.md, "Packages and services"): the system
/// watcher for a container root owns and for one a service account owns, the user units under an ordinary user's
/// lingering manager, and the drain's path unit.
extension BootedTreeTests {
    @Suite struct ServiceTests {
        /// The drop-in that makes a watcher move every arrival into Documents.
        static func moveDropIn(_ command: String = "watch") -> String {
            "[Service]\nExecStart=\nExecStart=/usr/bin/inbox \(command) --on-arrival move\n"
        }

        /// `TEMPLATE` instantiated for `container` (`systemd-escape --path --template`).
        static func unit(_ template: String, _ container: String, in tree: BootedTree) throws -> String {
            try tree.mustRun(["systemd-escape", "--path", "--template=\(template)", container]).stdoutText
                .trimmingCharacters(in: .newlines)
        }

        /// Writes drop-in `name` of `unit` for the system manager (or for `user`'s) and reloads that manager.
        static func dropIn(_ unit: String, _ name: String, _ text: String, user: String? = nil, in tree: BootedTree)
            throws
        {
            let folder = user.map { "/home/\($0)/.config/systemd/user/\(unit).d" } ?? "/etc/systemd/system/\(unit).d"
            try tree.mustRun(["mkdir", "-p", folder], as: user)
            try tree.mustRun(["sh", "-c", "cat > '\(folder)/\(name).conf'"], as: user, input: text)
            try #require(try tree.systemctl(["daemon-reload"], user: user).status == 0)
        }

        /// The event log's records of `container` (in the tree), each as its JSON object.
        static func records(_ container: String, in tree: BootedTree) -> [[String: Any]] {
            let path = tree.path(container + "/Library/Application Support/inbox/events.jsonl")
            let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
            return text.split(separator: "\n").compactMap {
                try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
            }
        }

        static func events(_ container: String, in tree: BootedTree) -> [String] {
            records(container, in: tree).compactMap { $0["event"] as? String }
        }

        /// Writes `name` into the Inbox of `container` as `user` (root when nil), the way a delivering program does.
        static func deliver(_ name: String, to container: String, as user: String? = nil, in tree: BootedTree) throws {
            try tree.mustRun(
                [
                    "sh", "-c", "printf '%s' \"$1\" > \"$2\"", "deliver", "contents of \(name)",
                    container + "/Documents/Inbox/" + name,
                ], as: user)
        }

        /// Waits until `name` is in Documents with its contents and no longer in the Inbox.
        static func expectMoved(
            _ name: String, in container: String, tree: BootedTree,
            sourceLocation: SourceLocation = #_sourceLocation
        ) throws {
            let moved = tree.waitUntil {
                FileManager.default.contents(atPath: tree.path(container + "/Documents/" + name))
                    == Data("contents of \(name)".utf8)
                    && !FileManager.default.fileExists(atPath: tree.path(container + "/Documents/Inbox/" + name))
            }
            #expect(moved, "\(name) was not moved: \(events(container, in: tree))", sourceLocation: sourceLocation)
        }

        /// A root-owned container: `systemctl start` returns once the watcher said READY=1 (its watch-started is
        /// logged by then), a delivered file is moved, `kill -9` of the watcher is restarted by `Restart=`, and
        /// `stop` ends it cleanly.
        @Test func theSystemUnitWatchesARootOwnedContainerAndIsRestartedAfterKill9() throws {
            let tree = try BootedTree.shared.get()
            let container = "/srv/root-owned"
            try tree.mustRun(["inbox", "--container", container, "init"])
            let unit = try Self.unit("inbox-watch@.service", container, in: tree)
            try Self.dropIn(unit, "move", Self.moveDropIn(), in: tree)

            try tree.mustRun(["systemctl", "start", unit])
            #expect(try tree.property("ActiveState", of: unit) == "active")
            #expect(try tree.property("SubState", of: unit) == "running")
            #expect(Self.events(container, in: tree).contains("watch-started"), "READY=1 came before watch-started")
            try Self.deliver("first.txt", to: container, in: tree)
            try Self.expectMoved("first.txt", in: container, tree: tree)

            let killed = try tree.property("MainPID", of: unit)
            try tree.mustRun(["sh", "-c", "kill -9 \"$1\"", "kill", killed])
            let restarted = try tree.waitUntil {
                try tree.property("NRestarts", of: unit) == "1" && tree.property("ActiveState", of: unit) == "active"
                    && tree.property("MainPID", of: unit) != killed
            }
            let status = try tree.systemctl(["status", "--no-pager", unit]).stdoutText
            #expect(restarted, "not restarted: \(status)")
            try Self.deliver("second.txt", to: container, in: tree)
            try Self.expectMoved("second.txt", in: container, tree: tree)

            try tree.mustRun(["systemctl", "stop", unit])
            #expect(try tree.property("Result", of: unit) == "success")
            #expect(Self.events(container, in: tree).last == "watch-stopped")
        }

        /// `stop` while the watcher works through 20,000 waiting files ends within `TimeoutStopSec` (the unit's
        /// Result is not `timeout`) with exit 0; every file is then in the Inbox or in Documents, once, and the
        /// next start moves the rest.
        @Test func stopWithA20000FileBacklogEndsInTimeAndLosesNothing() throws {
            let tree = try BootedTree.shared.get()
            let container = "/srv/backlog"
            try tree.mustRun(["inbox", "--container", container, "init"])
            let unit = try Self.unit("inbox-watch@.service", container, in: tree)
            try Self.dropIn(unit, "move", Self.moveDropIn(), in: tree)
            let names = (0..<20_000).map { String(format: "file-%05d.txt", $0) }
            try tree.mustRun(
                [
                    "sh", "-c",
                    "cd \"$1/Documents/Inbox\" && seq -f 'file-%05g.txt' 0 19999 | while read n; do "
                        + "printf '%s' \"contents of $n\" > \"$n\"; done", "backlog", container,
                ])

            try tree.mustRun(["systemctl", "start", unit])
            try tree.mustRun(["systemctl", "stop", unit])
            #expect(try tree.property("Result", of: unit) == "success")
            #expect(try tree.property("ExecMainStatus", of: unit) == "0")
            try Self.expectEachOnce(names, in: container, tree: tree)

            try tree.mustRun(["systemctl", "start", unit])
            let drained = try tree.waitUntil(timeout: 300) {
                try FileManager.default.contentsOfDirectory(atPath: tree.path(container + "/Documents/Inbox")).isEmpty
            }
            #expect(drained, "the Inbox still holds files")
            try tree.mustRun(["systemctl", "stop", unit])
            try Self.expectEachOnce(names, in: container, tree: tree)
        }

        /// Every one of `names` is in the Inbox or in Documents, not both, with its own contents, and nothing else
        /// is there.
        static func expectEachOnce(_ names: [String], in container: String, tree: BootedTree) throws {
            let inbox = try FileManager.default.contentsOfDirectory(atPath: tree.path(container + "/Documents/Inbox"))
            let documents = try FileManager.default.contentsOfDirectory(atPath: tree.path(container + "/Documents"))
                .filter { $0 != "Inbox" }
            #expect(Set(inbox).isDisjoint(with: documents), "in both: \(Set(inbox).intersection(documents).sorted())")
            #expect((inbox + documents).sorted() == names, "\(inbox.count) + \(documents.count) of \(names.count)")
            for name in names.shuffled().prefix(200) {
                let folder = inbox.contains(name) ? "/Documents/Inbox/" : "/Documents/"
                #expect(
                    FileManager.default.contents(atPath: tree.path(container + folder + name))
                        == Data("contents of \(name)".utf8), "\(name)")
            }
        }

        /// A container a service account owns: the unit as it ships cannot look into it (root without capabilities
        /// in its own user namespace: exit 77, not restarted); with `User=` and `Group=` in an instance drop-in
        /// (README.md, "Running as a service") it watches it as that account, as safely rated.
        @Test func aServiceAccountsContainerIsWatchedWithUserAndGroupInADropIn() throws {
            let tree = try BootedTree.shared.get()
            try tree.mustRun(["useradd", "--system", "--create-home", "--home-dir", "/srv/mailapp", "mailapp"])
            let container = "/srv/mailapp/c"
            try tree.mustRun(["inbox", "--container", container, "init"], as: "mailapp")
            let unit = try Self.unit("inbox-watch@.service", container, in: tree)

            try tree.run(["systemctl", "start", unit])
            let refused = try tree.waitUntil {
                try tree.property("ActiveState", of: unit) == "failed"
            }
            #expect(refused)
            #expect(try tree.property("ExecMainStatus", of: unit) == "77")
            #expect(try tree.property("NRestarts", of: unit) == "0")
            let journal = try tree.mustRun(["journalctl", "--no-pager", "-o", "cat", "-u", unit]).stdoutText
            #expect(journal.contains("with User= and Group= in a drop-in"), "\(journal)")
            try tree.mustRun(["systemctl", "reset-failed", unit])

            try Self.dropIn(unit, "account", "[Service]\nUser=mailapp\nGroup=mailapp\n", in: tree)
            try Self.dropIn(unit, "move", Self.moveDropIn(), in: tree)
            try tree.mustRun(["systemctl", "start", unit])
            #expect(try tree.property("ActiveState", of: unit) == "active")
            try Self.deliver("for-the-app.txt", to: container, as: "mailapp", in: tree)
            try Self.expectMoved("for-the-app.txt", in: container, tree: tree)
            let uid = try tree.mustRun(["id", "-u", "mailapp"]).stdoutText.trimmingCharacters(in: .newlines)
            #expect(
                try tree.mustRun(["stat", "-c", "%u", container + "/Documents/for-the-app.txt"]).stdoutText == uid
                    + "\n")
            try tree.mustRun(["systemctl", "stop", unit])

            let rootOwned = try Self.unit("inbox-watch@.service", "/srv/root-owned", in: tree)
            #expect(try Self.exposure(unit, in: tree) <= Self.exposure(rootOwned, in: tree))
        }

        /// `systemd-analyze security UNIT`'s overall exposure (0.0 safe to 10.0 exposed).
        static func exposure(_ unit: String, in tree: BootedTree) throws -> Double {
            let output = try tree.run(["systemd-analyze", "security", "--no-pager", unit]).stdoutText
            // "→ Overall exposure level for inbox-watch@srv-x.service: 0.9 SAFE :-}"
            let line = try #require(output.split(separator: "\n").first { $0.contains("Overall exposure level") })
            let score = try #require(line.range(of: ".service: ")).upperBound
            return try #require(line[score...].split(separator: " ").first.flatMap { Double($0) }, "\(line)")
        }

        /// An ordinary user's units under the manager `loginctl enable-linger` starts at boot, with no login:
        /// inbox-watch@ for the default container, and inbox-watch-all serving two containers under
        /// ~/.local/share/inbox at once.
        @Test func theUserUnitsRunUnderALingeringUsersManager() throws {
            let tree = try BootedTree.shared.get()
            let user = "alice"
            try tree.mustRun(["useradd", "--create-home", "--shell", "/bin/sh", user])
            try tree.mustRun(["loginctl", "enable-linger", user])
            let uid = try tree.mustRun(["id", "-u", user]).stdoutText.trimmingCharacters(in: .newlines)
            let manager = try tree.waitUntil {
                try tree.property("ActiveState", of: "user@\(uid).service") == "active"
            }
            try #require(manager, "user@\(uid).service did not start")

            let data = "/home/\(user)/.local/share/inbox"
            try tree.mustRun(["inbox", "init"], as: user)
            let unit = try Self.unit("inbox-watch@.service", data + "/default", in: tree)
            try Self.dropIn(unit, "move", Self.moveDropIn(), user: user, in: tree)
            try tree.systemctl(["start", unit], user: user)
            #expect(try tree.property("ActiveState", of: unit, user: user) == "active")
            try Self.deliver("mine.txt", to: data + "/default", as: user, in: tree)
            try Self.expectMoved("mine.txt", in: data + "/default", tree: tree)
            try tree.systemctl(["stop", unit], user: user)

            for name in ["a", "b"] { try tree.mustRun(["inbox", "--container", data + "/" + name, "init"], as: user) }
            try tree.systemctl(["start", "inbox-watch-all.service"], user: user)
            for name in ["a", "b"] { try Self.deliver("to-\(name).txt", to: data + "/" + name, as: user, in: tree) }
            for name in ["a", "b"] {
                let arrived = tree.waitUntil {
                    Self.records(data + "/" + name, in: tree).contains {
                        $0["event"] as? String == "arrived"
                            && ($0["path"] as? String)?.hasSuffix("to-\(name).txt") == true
                    }
                }
                #expect(arrived, "\(name): \(Self.events(data + "/" + name, in: tree))")
            }
            try tree.systemctl(["stop", "inbox-watch-all.service"], user: user)
            #expect(try tree.property("Result", of: "inbox-watch-all.service", user: user) == "success")
        }

        /// inbox-drain@.path starts the drain (`inbox watch --once`) when a file is delivered: the first drain runs
        /// at once (the timer), the next only because the path unit saw the Inbox change (the timer's next is five
        /// minutes away).
        @Test func theDrainsPathUnitStartsTheDrainWhenAFileIsDelivered() throws {
            let tree = try BootedTree.shared.get()
            let container = "/srv/drained"
            try tree.mustRun(["inbox", "--container", container, "init"])
            let path = try Self.unit("inbox-drain@.path", container, in: tree)
            let drain = try Self.unit("inbox-drain@.service", container, in: tree)
            try Self.dropIn(drain, "move", Self.moveDropIn("watch --once"), in: tree)

            try tree.mustRun(["systemctl", "start", path])
            let firstRun = try tree.waitUntil {
                try tree.property("ExecMainExitTimestampMonotonic", of: drain) != "0"
                    && tree.property("ActiveState", of: drain) == "inactive"
            }
            try #require(firstRun, "the timer's first drain did not run")
            let first = try tree.property("ExecMainStartTimestampMonotonic", of: drain)

            try Self.deliver("dropped.txt", to: container, in: tree)
            try Self.expectMoved("dropped.txt", in: container, tree: tree)
            #expect(try tree.property("ExecMainStartTimestampMonotonic", of: drain) != first)
            #expect(try tree.property("Result", of: drain) == "success")
            try tree.mustRun(["systemctl", "stop", path])
        }
    }
}
