import Foundation
import Glibc
import TestSupport
import Testing

/// Everything that runs in the booted tree, one test at a time: one test removes the package and installs it again,
/// and the units' tests start and stop watchers of the same system manager.
@Suite(.serialized, .enabled(if: BootedTree.unavailable == nil, Comment(rawValue: BootedTree.unavailable ?? "")))
struct BootedTreeTests {}

/// The Debian package of `make deb` (ARCHITECTURE.md, "Packages and services"): what it holds, what it depends on,
/// and what installing and removing it does on a clean Debian 12.
extension BootedTreeTests {
    @Suite struct PackageTests {
        /// `dpkg-deb --field PACKAGE FIELD`.
        static func field(_ name: String) throws -> String {
            let result = try InboxProcess.run(
                [Array("--field".utf8), Array(try #require(BootedTree.package).utf8), Array(name.utf8)],
                executable: "/usr/bin/dpkg-deb")
            return result.stdoutText.trimmingCharacters(in: .whitespacesAndNewlines)
        }

        @Test func lintianReportsNoError() throws {
            let result = try InboxProcess.run(
                [Array("--fail-on".utf8), Array("error".utf8), Array(try #require(BootedTree.package).utf8)],
                executable: "/usr/bin/lintian")
            #expect(result.status == 0, "\(result.stdoutText)\(result.stderr)")
            #expect(!result.stdoutText.split(separator: "\n").contains { $0.hasPrefix("E: ") }, "\(result.stdoutText)")
        }

        /// The binaries, man page, completions and units in Debian's places, the units' `ExecStart=` made for /usr.
        @Test func itHoldsEachFileInDebiansPlace() throws {
            let result = try InboxProcess.run(
                [Array("--contents".utf8), Array(try #require(BootedTree.package).utf8)],
                executable: "/usr/bin/dpkg-deb")
            let paths = Set(result.lines.compactMap { $0.split(separator: " ").last.map { String($0.dropFirst()) } })
            let expected = [
                "/usr/bin/inbox", "/usr/libexec/inbox/inbox-formats", "/usr/share/man/man1/inbox.1.gz",
                "/usr/share/bash-completion/completions/inbox", "/usr/share/zsh/site-functions/_inbox",
                "/usr/share/fish/vendor_completions.d/inbox.fish", "/usr/share/doc/inbox/copyright",
                "/usr/lib/systemd/system/inbox-watch@.service", "/usr/lib/systemd/system/inbox-drain@.service",
                "/usr/lib/systemd/system/inbox-drain@.path", "/usr/lib/systemd/system/inbox-drain@.timer",
                "/usr/lib/systemd/user/inbox-watch@.service", "/usr/lib/systemd/user/inbox-watch-all.service",
                "/usr/lib/systemd/user/inbox-drain@.service", "/usr/lib/systemd/user/inbox-drain@.path",
                "/usr/lib/systemd/user/inbox-drain@.timer", "/usr/lib/systemd/system/inbox-lmtp.socket",
                "/usr/lib/systemd/system/inbox-lmtp.service", "/usr/lib/systemd/user/inbox-lmtp.socket",
                "/usr/lib/systemd/user/inbox-lmtp.service", "/usr/lib/sysusers.d/inbox.conf",
                "/usr/lib/tmpfiles.d/inbox.conf",
            ]
            #expect(Set(expected).subtracting(paths).isEmpty, "missing: \(Set(expected).subtracting(paths).sorted())")
            #expect(!paths.contains { $0.hasPrefix("/usr/local") || $0.hasPrefix("/etc") }, "\(paths.sorted())")
        }

        /// Every library the binaries need is a dependency: those the loader loads (`${shlibs:Depends}`) and those
        /// opened on first use (`LazyLibrary("…")` in the sources), by the package that holds each; no `-dev`
        /// package and no Swift.
        @Test func itDependsOnEveryLibraryItLoadsAndNoBuildPackage() throws {
            let depends = try Self.field("Depends").split(separator: ",").map {
                String($0.trimmingCharacters(in: .whitespaces).split(separator: " ")[0])
            }
            #expect(!depends.contains { $0.hasSuffix("-dev") || $0.contains("swift") }, "\(depends)")
            for soname in try Self.lazyLibraries() {
                let owner = try InboxProcess.run(
                    [Array("-S".utf8), Array("*/\(soname)".utf8)], executable: "/usr/bin/dpkg")
                let package = owner.stdoutText.split(separator: ":").first.map(String.init) ?? "?"
                #expect(
                    depends.contains(package), "\(soname) (in \(package)) is opened but not depended on: \(depends)")
            }
            #expect(depends.contains("libinotifytools0") && depends.contains("libgmime-3.0-0"), "\(depends)")
        }

        /// The sonames the sources open with `LazyLibrary("…")` (or a constant `…Library = "…"` beside one).
        static func lazyLibraries() throws -> Set<String> {
            let sources = BootedTree.packageRoot + "/Sources"
            var sonames: Set<String> = []
            let enumerator = FileManager.default.enumerator(atPath: sources)
            while let relative = enumerator?.nextObject() as? String {
                guard relative.hasSuffix(".swift") else { continue }
                let text = try String(contentsOfFile: sources + "/" + relative, encoding: .utf8)
                guard text.contains("LazyLibrary(") else { continue }
                for piece in text.split(separator: "\"") where piece.hasPrefix("lib") && piece.contains(".so.") {
                    sonames.insert(String(piece))
                }
            }
            #expect(sonames.count >= 4, "\(sonames)")
            return sonames
        }

        /// Installed on the clean tree (before its boot) with `apt-get install ./inbox_….deb`: it runs, every
        /// library it loads is there, no Swift came with it, and no unit of it is enabled or running.
        @Test func installedOnACleanDebianItRunsWithNoToolchainAndNoUnitStarted() throws {
            let tree = try BootedTree.shared.get()
            #expect(try tree.mustRun(["inbox", "--version"]).stdoutText.hasPrefix("inbox "))
            let packages = try tree.mustRun(["dpkg-query", "-W", "-f", "${Package}\n"]).lines
            #expect(packages.contains("inbox"))
            #expect(!packages.contains { $0.contains("swift") || $0.hasSuffix("-dev") }, "\(packages)")
            for binary in ["/usr/bin/inbox", "/usr/libexec/inbox/inbox-formats"] {
                let libraries = try tree.mustRun(["ldd", binary]).stdoutText
                #expect(!libraries.contains("not found"), "\(binary): \(libraries)")
            }
            let cache = try tree.mustRun(["ldconfig", "-p"]).stdoutText
            for soname in try Self.lazyLibraries() {
                #expect(cache.contains(soname + " "), "\(soname) is not installed in the tree")
            }
            // "inbox-watch@.service disabled enabled": the unit's state, then Debian's preset.
            let units = try tree.systemctl(["list-unit-files", "--no-legend", "inbox*"]).lines
            #expect(units.count == 6, "\(units)")
            // indirect: inbox-lmtp.service, which only its socket starts.
            let states = ["disabled", "static", "indirect"]
            #expect(units.allSatisfy { states.contains(String($0.split(separator: " ")[1])) }, "\(units)")
            #expect(try tree.systemctl(["list-units", "--no-legend", "--all", "inbox*"]).lines.isEmpty)
            // The account inbox-lmtp.service runs as, and its folder, the account's alone.
            #expect(try tree.mustRun(["getent", "passwd", "inbox"]).stdoutText.contains(":/var/lib/inbox:"))
            let folder = try tree.mustRun(["stat", "-c", "%U %a", "/var/lib/inbox"]).stdoutText
            #expect(folder == "inbox 700\n", "\(folder)")
        }

        /// `apt-get remove` takes the package's files and leaves a container, its files and its log as they were;
        /// installing it again finds the container as it left it.
        @Test func removingThePackageLeavesEveryContainerAsItWas() throws {
            let tree = try BootedTree.shared.get()
            let container = "/srv/kept"
            try tree.mustRun(["inbox", "--container", container, "init"])
            try tree.mustRun(["sh", "-c", "echo kept > \(container)/Documents/Inbox/a.txt"])
            try tree.mustRun(["inbox", "--container", container, "move", container + "/Documents/Inbox/a.txt"])
            let before = try SystemCheck.Snapshot(container: tree.path(container))
            #expect(before.documents["a.txt"] == Data("kept\n".utf8), "\(before.documents.keys.sorted())")

            try tree.mustRun(["apt-get", "remove", "-y", "-qq", "inbox"])
            #expect(!FileManager.default.fileExists(atPath: tree.path("/usr/bin/inbox")))
            #expect(try SystemCheck.Snapshot(container: tree.path(container)) == before)
            try tree.mustRun(["apt-get", "install", "-y", "-qq", "/root/inbox.deb"])
            #expect(try SystemCheck.Snapshot(container: tree.path(container)) == before)
            let log = try tree.mustRun(["inbox", "--container", container, "log"])
            #expect(log.stdoutText.contains("a.txt"), "\(log.stdoutText)")
        }
    }
}
