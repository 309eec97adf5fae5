import AppContainer
import Glibc
import InboxKit

/// The work of the commands that need `InboxFormats` (GMime, libytnef, libarchive), which `inbox-formats` installs
/// before it runs the command line. `inbox` links none of those libraries: it parses such a command, answers
/// `--help` itself, and hands the whole command line to `inbox-formats` (ARCHITECTURE.md, "Two executables").
package struct FormatsCommands {
    /// One command's work, given its arguments and the container's path.
    package typealias Run = (Arguments, [UInt8]) throws(ContainerError) -> Void

    package var importMail: Run
    package var backupPlan: Run
    package var excludeFromBackup: Run
    package var backup: Run
    package var restore: Run
    package var demo: Run
    package var lmtp: Run

    package init(
        importMail: @escaping Run, backupPlan: @escaping Run, excludeFromBackup: @escaping Run, backup: @escaping Run,
        restore: @escaping Run, demo: @escaping Run, lmtp: @escaping Run
    ) {
        self.importMail = importMail
        self.lmtp = lmtp
        self.backupPlan = backupPlan
        self.excludeFromBackup = excludeFromBackup
        self.backup = backup
        self.restore = restore
        self.demo = demo
    }

    /// Set once by `inbox-formats`, before anything else runs; nil in `inbox`.
    nonisolated(unsafe) package static var installed: FormatsCommands?

    /// The name of the executable that holds them.
    static let executableName = "inbox-formats"

    /// Runs `work` of the installed commands.
    static func run(_ work: KeyPath<FormatsCommands, Run>, _ arguments: Arguments, containerPath: [UInt8])
        throws(ContainerError)
    {
        guard let installed else {
            throw ContainerError(.failure, "this command runs in \(executableName), which is not installed here")
        }
        try installed[keyPath: work](arguments, containerPath)
    }

    /// Set to the path of the program a hand-over runs: `inbox-formats` clears it; `inbox` finding it set was handed
    /// the command by itself (a copy or link of `inbox` in `inbox-formats`'s place), and stops the loop.
    static let handedOverVariable = "INBOX_HANDED_OVER"

    /// Throws 75 when this `inbox` was itself the target of a hand-over; in `inbox-formats`, forgets it, so that
    /// nothing it runs inherits it.
    static func checkHandedOver() throws(ContainerError) {
        guard let path = getenv(handedOverVariable) else { return }
        let shown = String(cString: path)
        unsetenv(handedOverVariable)
        guard installed == nil else { return }
        throw ContainerError(
            .busy, "this command runs in \(executableName), and '\(shown)' is inbox itself: install inbox-formats there"
        )
    }

    /// Replaces this process with `inbox-formats`, given the same arguments, environment and descriptors. It is
    /// looked for beside this executable (a build folder), then in `../libexec/inbox/` from it (`make install`).
    /// Throws when neither runs, with 75 (try again: an MTA keeps the message; the installation is at fault).
    static func handOver() throws(ContainerError) -> Never {
        var own: [UInt8] = []
        do {
            own = try system_readlinkat(currentDirectory, "/proc/self/exe")
        } catch {
            throw ContainerError(.busy, "cannot find \(executableName): cannot read /proc/self/exe: \(error)")
        }
        let folder = Array(own[..<(own.lastIndex(of: 0x2F) ?? own.startIndex)])
        let candidates = ["/", "/../libexec/inbox/"].map { folder + Array(($0 + executableName).utf8) }
        var failure = (path: candidates[0], cause: Errno.noSuchFile)
        for path in candidates {
            // Tells the program run that it was handed over to: one that is `inbox` again refuses at once.
            setenv(handedOverVariable, String(decoding: path, as: UTF8.self), 1)
            execv(path.map { CChar(bitPattern: $0) } + [0], CommandLine.unsafeArgv)
            let cause = Errno(rawValue: errno)
            if cause != .noSuchFile {
                failure = (path, cause)
                break
            }
        }
        unsetenv(handedOverVariable)
        let shown = String(decoding: failure.path, as: UTF8.self)
        throw ContainerError(
            .busy, "this command runs in \(executableName), and '\(shown)' does not run: \(failure.cause)")
    }
}
