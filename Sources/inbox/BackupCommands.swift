import AppContainer
import InboxKit

struct BackupPlanCommand: Command {
    static let name = "backup-plan"
    static let abstract = "List each file of the container as included in a backup or not, and why."
    static let usage = "backup-plan [--json]"
    static let options = [
        ("--json", "print a JSON array of {path, included, reason}, paths relative to the container")
    ]
    static let spec = Arguments.Spec(flags: ["--json"])

    static func run(_ arguments: Arguments, containerPath: String) throws(ContainerError) {
        let plan = try BackupPlan(container: try Container.open(at: containerPath))
        if arguments.flags.contains("--json") {
            Output.line(plan.json)
            return
        }
        for entry in plan.entries { Output.line(names: entry.line) }
    }
}

struct ExcludeFromBackupCommand: Command {
    static let name = "exclude-from-backup"
    static let abstract = "Exclude a file or folder (and all it holds) from backups; --undo clears the flag."
    static let usage = "exclude-from-backup PATH [--undo]"
    static let options = [
        (
            "PATH",
            "a file or folder in the container (never a symbolic link): absolute, from the working folder, or from the container as backup-plan prints it"
        ),
        ("--undo", "clear the flag instead of setting it"),
    ]
    static let spec = Arguments.Spec(flags: ["--undo"], positionals: 1...1)

    static func run(_ arguments: Arguments, containerPath: String) throws(ContainerError) {
        let container = try Container.open(at: containerPath)
        let components = try container.components(ofBackupPath: arguments.positionals[0])
        let undo = arguments.flags.contains("--undo")
        try container.setExcludedFromBackup(!undo, at: components)
        let path = Array(container.root.utf8) + components.flatMap { [0x2F] + $0.bytes }
        Output.line(bytes: Array((undo ? "exclusion flag cleared: " : "excluded from backup: ").utf8) + path)
    }
}

struct BackupCommand: Command {
    static let name = "backup"
    static let abstract = "Write a tar archive (pax) of what backup-plan includes; prints the archive's path."
    static let usage = "backup --to FILE.tar"
    static let options = [
        ("--to FILE.tar", "the archive to write, replaced if it exists; outside the container, or in tmp or Caches")
    ]
    static let spec = Arguments.Spec(valued: ["--to"])

    static func run(_ arguments: Arguments, containerPath: String) throws(ContainerError) {
        guard let path = arguments.string("--to") else { throw ContainerError(.usage, "'--to FILE.tar' is required") }
        let summary = try BackupArchive(path: path).write(from: try Container.open(at: containerPath))
        Output.line(summary.path)
    }
}

struct RestoreCommand: Command {
    static let name = "restore"
    static let abstract = "Restore a backup archive into a fresh container; prints the container's root."
    static let usage = "restore FILE.tar"
    static let options = [
        ("FILE.tar", "an archive written by 'inbox backup'; the container must be new from 'inbox init'")
    ]
    static let spec = Arguments.Spec(positionals: 1...1)

    static func run(_ arguments: Arguments, containerPath: String) throws(ContainerError) {
        let container = try Container.open(at: containerPath)
        let archive = BackupArchive(path: String(decoding: arguments.positionals[0], as: UTF8.self))
        let report = try archive.restore(into: container)
        Output.line(container.root)
        for warning in report.warnings { Output.problem(warning) }
        for refusal in report.refused {
            Output.problem("refused '\(String(decoding: refusal.path, as: UTF8.self))': \(refusal.reason)")
        }
        guard report.refused.isEmpty else {
            throw ContainerError(
                .badData,
                "refused \(report.refused.count == 1 ? "1 entry" : "\(report.refused.count) entries") of '\(archive.path)' (listed above); the rest is restored"
            )
        }
    }
}
