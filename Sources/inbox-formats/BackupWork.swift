import AppContainer
import InboxCommands
import InboxFormats

/// The work of the backup commands.
enum BackupWork {
    /// `inbox backup-plan`: each file of the container, included in a backup or not, and why.
    static func backupPlan(_ arguments: Arguments, containerPath: [UInt8]) throws(ContainerError) {
        let plan = try BackupPlan(container: try Container.open(at: containerPath))
        if arguments.flags.contains("--json") {
            Output.line(plan.json)
            return
        }
        for entry in plan.entries { Output.line(names: entry.line) }
    }

    /// `inbox exclude-from-backup`: sets or clears a file's or folder's exclusion flag.
    static func excludeFromBackup(_ arguments: Arguments, containerPath: [UInt8]) throws(ContainerError) {
        let container = try Container.open(at: containerPath)
        let components = try container.components(ofBackupPath: arguments.positionals[0])
        let undo = arguments.flags.contains("--undo")
        try container.setExcludedFromBackup(!undo, at: components)
        let path = container.rootBytes + components.flatMap { [0x2F] + $0.bytes }
        Output.line(names: Array((undo ? "exclusion flag cleared: " : "excluded from backup: ").utf8) + path)
    }

    /// `inbox backup`: a tar archive of what the backup plan includes.
    static func backup(_ arguments: Arguments, containerPath: [UInt8]) throws(ContainerError) {
        guard let path = arguments.path("--to") else { throw ContainerError(.usage, "'--to FILE.tar' is required") }
        let summary = try BackupArchive(path: path).write(from: try Container.open(at: containerPath))
        Output.name(summary.pathBytes)
    }

    /// `inbox restore`: an archive restored into a fresh container; each entry refused is named.
    static func restore(_ arguments: Arguments, containerPath: [UInt8]) throws(ContainerError) {
        let container = try Container.open(at: containerPath)
        let archive = BackupArchive(path: arguments.positionals[0])
        let report = try archive.restore(into: container)
        Output.name(container.rootBytes)
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
