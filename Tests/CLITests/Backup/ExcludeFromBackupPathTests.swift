import Foundation
import TestSupport
import Testing

/// `exclude-from-backup PATH` takes the paths `backup-plan` prints, besides absolute ones and ones from the working
/// folder (ARCHITECTURE.md, "The command line").
@Suite(.enabled(if: userAttributesWork, "needs user. extended attributes")) struct ExcludeFromBackupPathTests {
    /// `inbox ARGS…` run from the folder `cwd` (by `env -C`): status, stdout, stderr.
    private func run(in cwd: String, _ arguments: [String]) throws -> (Int32, String, String) {
        try runProgram("/usr/bin/env", ["-C", cwd, InboxProcess.binary] + arguments).parts
    }

    private func excluded(_ container: String) throws -> [String] {
        try InboxProcess.run("--container", container, "backup-plan").lines.filter { $0.hasPrefix("- Documents/") }
    }

    @Test func aPathAsBackupPlanPrintsItIsTakenFromTheContainer() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        try folder.file("container/Documents/big.iso", "iso")
        try folder.file("container/Documents/keep.txt", "txt")
        let plan = try InboxProcess.run("--container", container, "backup-plan").lines
        #expect(plan.contains { $0.hasPrefix("+ Documents/big.iso ") }, "\(plan)")

        // From a working folder outside the container.
        let (status, output, errors) = try run(
            in: folder.path, ["--container", container, "exclude-from-backup", "Documents/big.iso"])
        #expect(status == 0, "\(errors)")
        #expect(output == "excluded from backup: \(container)/Documents/big.iso\n")
        #expect(try excluded(container).map { $0.split(separator: " ")[1] } == ["Documents/big.iso"])

        let (undone, _, undoErrors) = try run(
            in: "/", ["--container", container, "exclude-from-backup", "./Documents/big.iso", "--undo"])
        #expect(undone == 0, "\(undoErrors)")
        #expect(try excluded(container).isEmpty)
    }

    @Test func theWorkingFolderComesFirstWhenThePathNamesSomethingThere() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        try folder.file("container/Documents/big.iso", "iso")
        try folder.file("container/Documents/Documents/big.iso", "nested")
        let documents = container + "/Documents"

        let (status, output, errors) = try run(
            in: documents, ["--container", container, "exclude-from-backup", "big.iso"])
        #expect(status == 0, "\(errors)")
        #expect(output == "excluded from backup: \(documents)/big.iso\n")
        // Here `Documents/big.iso` names the nested file, from the working folder.
        let (nested, nestedOutput, _) = try run(
            in: documents, ["--container", container, "exclude-from-backup", "Documents/big.iso"])
        #expect(nested == 0)
        #expect(nestedOutput == "excluded from backup: \(documents)/Documents/big.iso\n")
    }

    @Test func refusedAndMissingPathsKeepTheirStatuses() throws {
        let folder = try Scratch()
        let container = try folder.initContainer()
        try folder.file("container/Documents/keep.txt", "txt")
        for (path, expected) in [
            ("Documents/missing.iso", Int32(66)), ("Documents/../Documents/keep.txt", 77), ("../etc/passwd", 77),
        ] {
            let (status, output, errors) = try run(
                in: folder.path, ["--container", container, "exclude-from-backup", path])
            #expect(status == expected, "\(path): \(errors)")
            #expect(errors.hasPrefix("inbox: "))
            #expect(output.isEmpty)
        }
    }
}
