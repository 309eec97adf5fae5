// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "inbox",
    products: [
        .library(name: "AppContainer", targets: ["AppContainer"]),
        .library(name: "InboxKit", targets: ["InboxKit"]),
        .executable(name: "inbox", targets: ["inbox"]),
    ],
    targets: [
        .systemLibrary(
            name: "CInotifyTools",
            providers: [.apt(["libinotifytools0-dev"])]
        ),
        .systemLibrary(
            name: "CCrypto",
            providers: [.apt(["libssl-dev"])]
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
        .target(name: "AppContainer", dependencies: ["CCrypto", "CLinux"]),
        .target(
            name: "InboxKit",
            dependencies: [
                "AppContainer", "CArchive", "CGMime", "CInotifyTools", "CLinux", "CMagic", "CSQLite", "CYtnef",
            ]),
        .executableTarget(name: "inbox", dependencies: ["InboxKit", "AppContainer"]),
        .testTarget(name: "AppContainerTests", dependencies: ["AppContainer"]),
        .testTarget(name: "InboxKitTests", dependencies: ["InboxKit", "AppContainer"]),
        .testTarget(name: "CLITests", dependencies: ["inbox", "InboxKit", "CLinux"]),
        // `import InboxKit` alone, as a library user writes it.
        .testTarget(name: "LibraryAPITests", dependencies: ["InboxKit"]),
    ]
)

// Warnings are errors in CI and `make` (`-Xswiftc -warnings-as-errors`), not here: SwiftPM refuses unsafe flags in
// a package that another depends on by version.
for target in package.targets where target.type != .system {
    var settings = target.swiftSettings ?? []
    settings.append(.enableUpcomingFeature("ExistentialAny"))
    target.swiftSettings = settings
}
