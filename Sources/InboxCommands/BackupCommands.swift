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

    static let needsFormats = true

    static func run(_ arguments: Arguments, containerPath: [UInt8]) throws(ContainerError) {
        try FormatsCommands.run(\.backupPlan, arguments, containerPath: containerPath)
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

    static let needsFormats = true

    static func run(_ arguments: Arguments, containerPath: [UInt8]) throws(ContainerError) {
        try FormatsCommands.run(\.excludeFromBackup, arguments, containerPath: containerPath)
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

    static let needsFormats = true

    static func run(_ arguments: Arguments, containerPath: [UInt8]) throws(ContainerError) {
        try FormatsCommands.run(\.backup, arguments, containerPath: containerPath)
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

    static let needsFormats = true

    static func run(_ arguments: Arguments, containerPath: [UInt8]) throws(ContainerError) {
        try FormatsCommands.run(\.restore, arguments, containerPath: containerPath)
    }
}
