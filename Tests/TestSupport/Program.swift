import Foundation

/// Runs `executable ARGS…` to its end, feeding `input` on stdin, with `environment` added to this process's (as
/// `InboxProcess.start`: arguments as given, no descriptor of this process inherited, signals at their defaults).
/// With `mergingStderr`, what it writes on stderr is in `stdout`, in the order written. The one runner of the
/// programs the tests run beside `inbox` (python3, tar, sha256sum, a shell).
package func runProgram(
    _ executable: String, _ arguments: [String], input: [UInt8] = [], environment: [String: String] = [:],
    mergingStderr: Bool = false
) throws -> InboxProcess.Result {
    try InboxProcess.run(
        arguments.map { Array($0.utf8) }, input: input, environment: environment, mergingStderr: mergingStderr,
        executable: executable)
}

/// The folders of the repository the tests read: its root, `Tests/Oracle` and `SampleAttachments`.
package enum TestPaths {
    /// The repository's root (this file is `Tests/TestSupport/Program.swift`).
    package static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().path

    /// `Tests/`.
    package static let tests = repository + "/Tests"

    /// `Tests/Oracle/NAME`: the mail rules again in Python, a TNEF generator.
    package static func oracle(_ name: String) -> String { tests + "/Oracle/" + name }

    /// `SampleAttachments/`.
    package static let samples = repository + "/SampleAttachments"
}
