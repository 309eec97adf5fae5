import AppContainer
import Glibc
import InboxCommands

// `inbox-formats`: the whole command line, with the commands that need InboxFormats (mail import, backups, the
// demo) installed; `inbox` hands those to it (ARCHITECTURE.md, "Two executables"). What a library prints on
// stdout (libytnef on a damaged winmail.dat) goes to stderr: stdout carries only the command's output.
do {
    try Output.keepStandardOutput()
} catch {
    Output.problem("cannot keep library output off stdout: \(error)")
    exit(75)
}
FormatsCommands.installed = FormatsCommands(
    importMail: ImportMail.run, backupPlan: BackupWork.backupPlan, excludeFromBackup: BackupWork.excludeFromBackup,
    backup: BackupWork.backup, restore: BackupWork.restore,
    demo: { arguments, containerPath throws(ContainerError) in
        let samples = arguments.string("--samples") ?? "SampleAttachments"
        try Demo.run(samples: samples, containerPath: containerPath) { Output.line($0) }
    }, lmtp: LMTPWork.run)
runInboxAndExit()
