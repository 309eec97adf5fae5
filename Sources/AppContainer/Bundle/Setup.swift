import Glibc

/// One-time setup (ARCHITECTURE.md, "Bundle, backup and setup"): on the app's first launch, the bundle's `Templates/`
/// folder is copied into `Library/Application Support/` and the default preferences are written; then `setup.done` in
/// the state folder records that it is done. An interrupted setup has no `setup.done` and runs again; a completed one
/// never does (until a bundle is installed: that is a first launch again).
package enum Setup {
    /// What one run did.
    package struct Report: Sendable, Equatable {
        /// Template files and links created in Application Support.
        package let templatesCopied: Int
        /// Template files and links not copied because Application Support already had their name.
        package let templatesKept: Int
        /// Whether `Library/Preferences/inbox.plist` was written (with every key, existing values kept).
        package let preferencesWritten: Bool

        /// A report of what one run did.
        package init(templatesCopied: Int, templatesKept: Int, preferencesWritten: Bool) {
            self.templatesCopied = templatesCopied
            self.templatesKept = templatesKept
            self.preferencesWritten = preferencesWritten
        }
    }

    /// The bundle's folder of templates.
    package static let templatesFolder = "Templates"
    static let markerName = "setup.done"
    static let lockName = "setup.lock"

    /// `Library/Application Support/inbox/setup.done`.
    package static func markerPath(_ container: Container) -> String {
        container.stateDirectory + "/" + markerName
    }

    /// Whether setup has completed in this container.
    package static func isDone(_ container: Container) -> Bool {
        (try? fileStatus(in: currentDirectory, container.statePath(markerName)))?.kind == .regular
    }

    /// Runs setup unless it is done; returns nil when it was. One run at a time per container (`setup.lock`):
    /// a second caller waits, then finds it done.
    ///
    /// Templates are copied without replacing anything: each file is written unnamed (`O_TMPFILE`; a hidden
    /// name where the filesystem has none) and given its name only when whole, so a run cut short (even by
    /// SIGKILL) leaves whole files and the next run copies the rest. `Templates/inbox`, the name of the
    /// service's own state, is not copied. Then the filesystem is synced and `setup.done` written under a
    /// temporary name, fsynced and renamed.
    ///
    /// - Parameter shouldContinue: asked before each template file; when it returns false, setup stops
    ///   unfinished (exit status 1) and runs again next time.
    package static func run(_ container: Container, shouldContinue: () -> Bool = { true }) throws(ContainerError)
        -> Report?
    {
        let state = try openState(container)
        let lock = try takeLock(state, container)
        defer { withExtendedLifetime(lock) {} }
        if isDone(container) { return nil }
        let support = try container.openFolder(.applicationSupport)
        var copied = 0
        var kept = 0
        if let templates = try openTemplates(container) {
            let shown = container.path(.bundle) + "/" + templatesFolder
            try withoutActuallyEscaping(shouldContinue) { shouldContinue throws(ContainerError) in
                let copy = TreeCopy(mode: .templates, shown: shown, shouldContinue: shouldContinue)
                try copy.copy(templates, into: support)
                copied = copy.copied
                kept = copy.kept
            }
        }
        try Preferences.writeDefaults(container)
        do {
            try system_syncfs(support.rawValue)
        } catch {
            throw error.failure("sync", container.path(.applicationSupport))
        }
        try writeMarker(state, container, text: "templates \(copied)\nkept \(kept)\n")
        return Report(templatesCopied: copied, templatesKept: kept, preferencesWritten: true)
    }

    /// Removes `setup.done`, so that setup runs again: for a newly installed bundle.
    static func forget(_ container: Container) throws(ContainerError) {
        let state = try openState(container)
        let lock = try takeLock(state, container)
        defer { withExtendedLifetime(lock) {} }
        do {
            try system_unlinkat(state.rawValue, markerName)
            try system_fsync(state.rawValue)
        } catch .noSuchFile {
            return
        } catch {
            throw error.failure("remove", markerPath(container))
        }
    }

    /// The bundle's `Templates` folder, or nil when there is none (or it is not a folder).
    private static func openTemplates(_ container: Container) throws(ContainerError) -> FileDescriptor? {
        let templates = container.pathBytes(.bundle) + Array("/\(templatesFolder)".utf8)
        do {
            guard try fileStatus(in: currentDirectory, templates).kind == .directory else {
                return nil
            }
        } catch .noSuchFile {
            return nil
        } catch {
            throw error.failure("read", templates)
        }
        do {
            return try FileDescriptor(folder: templates)
        } catch {
            throw error.failure("open", templates)
        }
    }

    private static func openState(_ container: Container) throws(ContainerError) -> FileDescriptor {
        do {
            return try FileDescriptor(folder: container.stateDirectoryBytes)
        } catch {
            throw error.failure("open", container.stateDirectory)
        }
    }

    private static func takeLock(_ state: borrowing FileDescriptor, _ container: Container) throws(ContainerError)
        -> FileDescriptor
    {
        do {
            let file = try FileDescriptor(at: state.rawValue, lockName, [.readWrite, .create, .noFollow], mode: 0o644)
            try system_flock(file.rawValue, LOCK_EX)
            return file
        } catch {
            throw error.failure("lock", container.stateDirectory + "/" + lockName)
        }
    }

    /// `setup.done`, atomically and durably (`replaceFile`).
    private static func writeMarker(_ state: borrowing FileDescriptor, _ container: Container, text: String)
        throws(ContainerError)
    {
        do {
            try state.replaceFile(
                FileName(markerName).unsafelyUnwrapped,
                with: Array("setup done \(Timestamp.now().rfc3339)\n\(text)".utf8))
        } catch {
            throw error.failure("write", markerPath(container))
        }
    }
}
