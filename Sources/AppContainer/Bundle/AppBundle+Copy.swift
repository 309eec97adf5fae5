import Glibc

/// Copies a folder tree into another, never following a symbolic link: a bundle into its staging folder
/// (`.install`), the bundle's templates into Application Support (`.templates`), or a folder item into its
/// staging folder in Documents (`.item`: the mover's copy, ARCHITECTURE.md, "One mover").
package final class TreeCopy {
    package enum Mode {
        /// Into a new, private folder: every file is created, `_CodeSignature` at the top is left out, a name
        /// that is not UTF-8 or a special file is refused. Links are copied as they are, and checked as the copy is sealed.
        case install
        /// Into a folder with content of its own: nothing there is replaced, each file appears whole (an
        /// unnamed file given its name when complete), files get their owner's write bit, links are copied only
        /// when they stay inside the source, special files and `inbox` at the top are left out.
        case templates
        /// Into a new, private folder, as `.install`, but whole: every name and mode kept (with the owner's write
        /// bit, as a moved file gets back), nothing left out; a special file is refused.
        case item
    }

    let mode: Mode
    /// The source folder, for messages.
    let shown: String
    /// Asked before each file in `.templates` mode; false interrupts the copy (exit status 1).
    let shouldContinue: () -> Bool
    /// Files and links created.
    private(set) var copied = 0
    /// Files and links left as they were because something already had their name.
    private(set) var kept = 0
    /// The target folders where files were staged, and abandoned staging names swept.
    private var swept: Set<FileID> = []

    package init(mode: Mode, shown: String, shouldContinue: @escaping () -> Bool = { true }) {
        self.mode = mode
        self.shown = shown
        self.shouldContinue = shouldContinue
    }

    /// Copies `source` into `target` with the bundle's walk (ARCHITECTURE.md, "Walks and removal"): each folder
    /// made and entered in both trees at once, its target open while its entries are copied.
    package func copy(_ source: borrowing FileDescriptor, into target: borrowing FileDescriptor)
        throws(ContainerError)
    {
        let root = source.rawValue
        // The open target folders, the innermost last; `made` is a folder made and not yet entered.
        var targets: [CInt] = [target.rawValue]
        var made: CInt?
        defer {
            if let made { try? system_close(made) }
            for folder in targets.dropFirst() { try? system_close(folder) }
        }
        try Tree.walk.run(
            source, shown: shown, onError: FolderWalk.stop,
            visit: { entry throws(ContainerError) in
                if let folder = made { try? system_close(folder) }  // the walk did not go into it: gone since
                made = nil
                let path = entry.path
                if mode != .item, path.count == 1, entry.name.string == (mode == .install ? "_CodeSignature" : "inbox")
                {
                    return .next
                }
                do {
                    made = try copyEntry(entry, into: targets[targets.count - 1], root: root)
                } catch let error as ContainerError {
                    throw error
                } catch let error as Errno {
                    throw error.failure("copy", shown + "/" + Tree.text(path))
                } catch {
                    throw ContainerError(.failure, "cannot copy '\(shown)/\(Tree.text(path))': \(error)")
                }
                return made == nil ? .next : .enter
            },
            enter: { _, _ in
                targets.append(made.unsafelyUnwrapped)
                made = nil
            },
            leave: { _, _ in try? system_close(targets.removeLast()) })
    }

    /// Copies one entry; for a folder, makes it and returns it open (the caller closes it).
    private func copyEntry(_ found: FolderWalk.Entry, into target: CInt, root: CInt) throws -> CInt? {
        let (name, entry, source, status) = (found.name, found.path, found.parent, found.status)
        let shownEntry = shown + "/" + Tree.text(entry)
        if mode == .install && !name.isValidUTF8 {
            throw ContainerError(.badData, "'\(shownEntry)' has a name that is not UTF-8, which a seal cannot hold")
        }
        switch status.kind {
        case .directory:
            do {
                let folderMode: mode_t =
                    switch mode {
                    case .install: 0o700
                    case .templates: 0o755
                    case .item: status.mode & 0o7777 | S_IRWXU
                    }
                try system_mkdirat(target, name, mode: folderMode)
            } catch {
                guard error == .fileExists, mode == .templates else { throw error }
            }
            let innerTarget: CInt
            do {
                innerTarget = try system_openat(target, name, [.directory, .noFollow])
            } catch {
                // A file or a link has the name: kept, and never followed.
                guard mode == .templates, error == .notDirectory || error == .tooManySymbolicLinks else { throw error }
                return nil
            }
            return innerTarget
        case .regular:
            if mode == .templates {
                if try fileStatusIfPresent(in: target, name) != nil {
                    kept += 1
                    return nil
                }
                guard shouldContinue() else {
                    throw ContainerError(.failure, "the copy of '\(shown)' was interrupted")
                }
            }
            try copyFile(name, status, from: source, into: target)
        case .symbolicLink:
            let link = try system_readlinkat(source, name)
            if mode == .templates {
                let leads = Tree.resolve(entry.dropLast().map(\.bytes) + Tree.split(link), in: root)
                guard link.first != 0x2F, leads != nil else { return nil }
                guard shouldContinue() else {
                    throw ContainerError(.failure, "the copy of '\(shown)' was interrupted")
                }
            }
            do {
                try system_symlinkat(link, target, name)
                copied += 1
            } catch {
                guard error == .fileExists, mode == .templates else { throw error }
                kept += 1
            }
        default:
            guard mode != .templates else { return nil }
            let holder = mode == .install ? "a bundle" : "a folder moved by a copy"
            throw ContainerError(
                .refused, "'\(shownEntry)' is not a file, folder or link: \(holder) holds nothing else")
        }
        return nil
    }

    /// Creates the file whole: `O_EXCL` in `.install` mode, an `UnnamedFile` named at the end otherwise.
    private func copyFile(_ name: FileName, _ status: FileStatus, from source: CInt, into target: CInt) throws {
        let input = try FileDescriptor(at: source, name, [.noFollow, .nonBlocking])
        guard try input.fileStatus().kind == .regular else { return }
        guard mode == .templates else {
            let output = try FileDescriptor(
                at: target, name, [.writeOnly, .create, .exclusive, .noFollow], mode: 0o600)
            let kept = mode == .item ? status.mode & 0o7777 | S_IWUSR : 0o600 | (status.mode & 0o111)
            try Self.fill(output, from: input, mode: kept, times: status)
            copied += 1
            return
        }
        let output = try UnnamedFile(in: target, .writeOnly, mode: 0o600)
        if output.stagingName != nil, swept.insert(try FileStatus(system_fstat(target)).fileID).inserted {
            // Files a setup cut short left staged here (setup runs one at a time, under its lock).
            _ = try UnnamedFile.sweep(FileDescriptor(folder: ".", at: target).entries(), in: target)
        }
        do throws(Errno) {
            try Self.fill(output.descriptor, from: input, mode: 0o644 | (status.mode & 0o111), times: status)
            try output.name(name)
            copied += 1
        } catch {
            try output.discard()
            guard error == .fileExists else { throw error }
            kept += 1
        }
    }

    /// The contents of `input` from its start, then `mode` and the access and modification times of `times`.
    private static func fill(
        _ output: borrowing FileDescriptor, from input: borrowing FileDescriptor, mode: mode_t, times: FileStatus
    ) throws(Errno) {
        try output.copyContents(from: input)
        try system_fchmod(output.rawValue, mode)
        let accessed = timespec(tv_sec: Int(times.accessed.seconds), tv_nsec: Int(times.accessed.nanoseconds))
        let modified = timespec(tv_sec: Int(times.modified.seconds), tv_nsec: Int(times.modified.nanoseconds))
        try system_futimens(output.rawValue, accessed: accessed, modified: modified)
    }
}
