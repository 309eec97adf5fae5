// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "inbox",
    products: [
        .library(name: "AppContainer", targets: ["AppContainer"]),
        .library(name: "InboxKit", targets: ["InboxKit"]),
        .library(name: "InboxFormats", targets: ["InboxFormats"]),
        .executable(name: "inbox", targets: ["inbox"]),
        .executable(name: "inbox-formats", targets: ["inbox-formats"]),
    ],
    targets: [
        .systemLibrary(
            name: "CInotifyTools",
            providers: [.apt(["libinotifytools0-dev"])]
        ),
        .systemLibrary(
            name: "CNettle",
            providers: [.apt(["nettle-dev"])]
        ),
        .systemLibrary(
            name: "CMagic",
            providers: [.apt(["libmagic-dev"])]
        ),
        .systemLibrary(
            name: "CArchive",
            providers: [.apt(["libarchive-dev"])]
        ),
        .systemLibrary(
            name: "CSQLite",
            providers: [.apt(["libsqlite3-dev"])]
        ),
        .systemLibrary(
            name: "CGMime",
            pkgConfig: "gmime-3.0",
            providers: [.apt(["libgmime-3.0-dev"])]
        ),
        .systemLibrary(
            name: "CYtnef",
            providers: [.apt(["libytnef0-dev"])]
        ),
        .target(name: "CLinux"),
        .target(name: "AppContainer", dependencies: ["CNettle", "CLinux"]),
        .target(name: "InboxKit", dependencies: ["AppContainer", "CInotifyTools", "CLinux", "CMagic", "CSQLite"]),
        // Mail import (GMime, TNEF) and backup archives (libarchive): a module of their own, so that what links
        // InboxKit alone (the watcher, `inbox`) never loads those libraries (ARCHITECTURE.md, "Two executables").
        .target(name: "InboxFormats", dependencies: ["InboxKit", "CArchive", "CGMime", "CLinux", "CYtnef"]),
        // The commands, shared by the two executables: `inbox` runs all but those that need InboxFormats, which
        // it hands to `inbox-formats` whole.
        .target(name: "InboxCommands", dependencies: ["InboxKit"]),
        .executableTarget(name: "inbox", dependencies: ["InboxCommands"]),
        .executableTarget(name: "inbox-formats", dependencies: ["InboxCommands", "InboxFormats"]),
        // The helpers every test target shares (Tests/TestSupport): one scratch folder, the file helpers, one
        // process runner, one wait with a deadline, the fault and crash sweeps, real FUSE mounts (bindfs, rclone,
        // sshfs) and an OpenSSH server on loopback to mount, the built `inbox` run as a process, and the mail and
        // backup fixtures.
        .target(name: "TestSupport", dependencies: ["InboxKit", "CLinux"], path: "Tests/TestSupport"),
        .testTarget(name: "AppContainerTests", dependencies: ["AppContainer", "TestSupport"]),
        .testTarget(name: "InboxKitTests", dependencies: ["InboxKit", "AppContainer", "TestSupport"]),
        // Mail import (MIME, TNEF), LMTP and backup archives: the tests of InboxFormats.
        .testTarget(name: "InboxFormatsTests", dependencies: ["InboxFormats", "InboxKit", "TestSupport"]),
        .testTarget(
            name: "CLITests",
            dependencies: ["inbox", "inbox-formats", "InboxCommands", "InboxKit", "CLinux", "TestSupport"]
        ),
        // The tests that need the real parts (`make test-system`; `make test` skips them): servers they start
        // themselves and the network and FUSE filesystems mounted over them, `inbox` run as a user runs it.
        .testTarget(name: "SystemTests", dependencies: ["inbox", "inbox-formats", "TestSupport"]),
        // `import InboxKit` (and `import InboxFormats` for mail and backups), as a library user writes it.
        // PublicAPI.txt: the public API as checked in (PublicAPITests).
        .testTarget(
            name: "LibraryAPITests", dependencies: ["InboxKit", "InboxFormats", "TestSupport"],
            exclude: ["PublicAPI.txt"]
        ),
    ]
)

// Warnings are errors in CI and `make` (`-Xswiftc -warnings-as-errors`), not here: SwiftPM refuses unsafe flags in
// a package that another depends on by version.
for target in package.targets where target.type != .system {
    var settings = target.swiftSettings ?? []
    settings.append(.enableUpcomingFeature("ExistentialAny"))
    target.swiftSettings = settings
}
