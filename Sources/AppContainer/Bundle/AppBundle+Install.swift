import FoundationEssentials
import Glibc

extension AppBundle {
    /// What `install(from:)` did.
    package enum InstallOutcome: Sendable, Equatable {
        /// The folder was copied in and sealed; the seal lists this many resources.
        case installed(resources: Int)
        /// The same bundle was already installed and its seal holds: nothing was done.
        case alreadyInstalled(resources: Int)
    }

    /// Installs the folder at `source` as the bundle and seals it (ARCHITECTURE.md, "Bundle, backup and setup"), once
    /// per container.
    ///
    /// The tree is copied without following any link: regular files, folders, and symbolic links that stay
    /// inside it (an absolute link, or one that leads out, is refused with exit status 77, as is any other kind
    /// of file). A `_CodeSignature` folder in `source` is not copied: the seal is written afresh. The copy is
    /// made beside the bundle, sealed (`_CodeSignature/CodeResources`, then every write bit dropped: files
    /// 0444, folders 0555, execute bits kept), synced, and swapped in with one `renameat2(RENAME_EXCHANGE)`,
    /// so the bundle is either the empty folder or the sealed copy. Where the filesystem refuses the exchange
    /// (NFS, SMB, FUSE), it is a journaled two-step rename (`exchange`), and an install cut short in it is rolled
    /// back by the next command that opens the container (`settleInterruptedInstall`) or the next install
    /// (ARCHITECTURE.md, "Network and FUSE filesystems"). One-time setup is marked to run again.
    ///
    /// Over an installed bundle: the same tree (by the seal's hashes) is `.alreadyInstalled`; another one is
    /// refused (77); a broken seal fails with 65. Names must be UTF-8 (65): a property list holds text.
    @discardableResult
    package func install(from sourcePath: some CStringConvertible) throws(ContainerError) -> InstallOutcome {
        let sourceBytes = sourcePath.pathBytes
        let source = String(decoding: sourceBytes, as: UTF8.self)
        let sourceFolder = try Self.openSource(sourceBytes)
        let state = try container.openFolder([])
        let lock = try Self.lock(container)
        defer { withExtendedLifetime(lock) {} }
        do {
            try rollBackExchange(state.rawValue, state.rawValue, intent: Self.exchangeIntent)
        } catch {
            throw error.failure("undo the install cut short in", container.root)
        }
        Self.sweepStaging(in: state.rawValue)
        let (report, sealed) = try check()
        switch report.state {
        case .broken:
            let first = report.problems.first.map { " (\($0))" } ?? ""
            throw ContainerError(
                .badData, "the seal of \(name) is broken\(first): run 'inbox verify'; nothing is installed over it")
        case .intact:
            let wanted = try Self.manifest(of: sourceFolder, shown: source, skipping: ["_CodeSignature"])
            guard wanted == sealed else {
                throw ContainerError(
                    .refused,
                    "\(name) is already installed and sealed, and '\(source)' differs from it: a bundle is installed once; use a new container"
                )
            }
            return .alreadyInstalled(resources: report.resources)
        case .notSealed:
            break
        }
        try Self.refuseContaining(sourceBytes, root: container.rootBytes)
        guard let staging = FileName(".inbox-bundle.\(getpid()).\(UInt64.random(in: 0...UInt64.max))"),
            let bundleName = FileName(name)
        else {
            throw ContainerError(.failure, "cannot name a staging folder")
        }
        let resources: Int
        do {
            resources = try sealCopy(of: sourceFolder, source: source, into: staging, in: state.rawValue)
            try Setup.forget(container)
            try exchange(state.rawValue, staging, state.rawValue, bundleName, intent: Self.exchangeIntent)
        } catch {
            // An exchange whose rollback failed keeps its items for the next install's rollback.
            if (try? isExchangePending(state.rawValue, intent: Self.exchangeIntent)) != false {
                throw ContainerError(
                    .failure, "cannot install the bundle into '\(path)': \(error); the next install undoes it")
            }
            try? FolderWalk.remove(staging, in: state.rawValue, shown: container.root + "/" + staging.string)
            if let error = error as? ContainerError { throw error }
            if let error = error as? Errno { throw error.failure("install the bundle into", path) }
            throw ContainerError(.failure, "cannot install the bundle into '\(path)': \(error)")
        }
        // The staging name now holds the empty folder the bundle was.
        try? FolderWalk.remove(staging, in: state.rawValue, shown: container.root + "/" + staging.string)
        do {
            try system_fsync(state.rawValue)
        } catch {
            throw error.failure("sync", container.root)
        }
        return .installed(resources: resources)
    }

    /// Copies `sourceFolder` into a new folder `staging` in `parent`, writes the seal, drops the write bits and
    /// syncs the filesystem; returns the number of resources sealed.
    private func sealCopy(
        of sourceFolder: borrowing FileDescriptor, source: String, into staging: FileName, in parent: CInt
    ) throws -> Int {
        try system_mkdirat(parent, staging, mode: 0o700)
        let copy = try FileDescriptor(at: parent, staging, [.directory, .noFollow])
        let shown = container.root + "/" + staging.string
        try TreeCopy(mode: .install, shown: source).copy(sourceFolder, into: copy)
        let manifest = try Self.manifest(of: copy, shown: shown, skipping: [], linksLeaving: source)
        try system_mkdirat(copy.rawValue, "_CodeSignature", mode: 0o755)
        let folder = try FileDescriptor(at: copy.rawValue, "_CodeSignature", [.directory, .noFollow])
        let seal = try FileDescriptor(
            at: folder.rawValue, "CodeResources", [.writeOnly, .create, .exclusive, .noFollow], mode: 0o644)
        try seal.writeAll(Array(try Self.codeResources(manifest)))
        try seal.close()
        try Self.dropWriteBits(copy, shown: shown)
        try system_syncfs(copy.rawValue)
        return manifest.count
    }

    /// Files become 0444 (execute bits kept), folders 0555, the root last.
    private static func dropWriteBits(_ root: borrowing FileDescriptor, shown: String) throws(ContainerError) {
        try Tree.walk.run(
            root, shown: shown, onError: FolderWalk.stop,
            visit: { entry throws(ContainerError) in
                guard entry.status.kind == .regular else { return entry.status.kind == .directory ? .enter : .next }
                do throws(Errno) {
                    let file = try FileDescriptor(at: entry.parent, entry.name, [.noFollow, .nonBlocking])
                    try system_fchmod(file.rawValue, 0o444 | (entry.status.mode & 0o111))
                } catch {
                    throw error.failure("seal", shown + "/" + Tree.text(entry.path))
                }
                return .next
            },
            leave: { entry, folder throws(ContainerError) in
                do throws(Errno) {
                    try system_fchmod(folder, 0o555)
                } catch {
                    throw error.failure("seal", shown + "/" + Tree.text(entry.path))
                }
            })
        do {
            try system_fchmod(root.rawValue, 0o555)
        } catch {
            throw error.failure("seal", shown)
        }
    }

    private static func openSource(_ sourceBytes: [UInt8]) throws(ContainerError) -> FileDescriptor {
        let source = String(decoding: sourceBytes, as: UTF8.self)
        do {
            return try FileDescriptor(sourceBytes, [.directory])
        } catch .noSuchFile {
            throw ContainerError(.noSuchItem, "no bundle folder at '\(source)'")
        } catch .notDirectory {
            throw ContainerError(.noSuchItem, "'\(source)' is not a folder: --bundle takes the bundle's folder")
        } catch {
            throw error.failure("open the bundle folder", source)
        }
    }

    /// Refuses a source folder that holds the container: the copy would never end.
    private static func refuseContaining(_ source: [UInt8], root: [UInt8]) throws(ContainerError) {
        guard let folder = try? system_realpath(source) else { return }
        if root == folder || root.starts(with: folder == [0x2F] ? [0x2F] : folder + [0x2F]) {
            let shown = String(decoding: source, as: UTF8.self)
            let shownRoot = String(decoding: root, as: UTF8.self)
            throw ContainerError(.refused, "'\(shown)' holds the container '\(shownRoot)': it cannot be its bundle")
        }
    }

    /// The intent of an exchange made in two steps, in the container root.
    static let exchangeIntent = FileName(".inbox-bundle-exchange").unsafelyUnwrapped

    /// Removes staging folders that an interrupted install left in the container root.
    private static func sweepStaging(in root: CInt) {
        guard let names = try? FileDescriptor(at: root, ".", [.directory]).entries() else { return }
        for name in names where name.string.hasPrefix(".inbox-bundle.") {
            try? FolderWalk.remove(name, in: root, shown: name.string)
        }
    }

    /// One install at a time per container: `bundle.lock` in the state folder.
    private static func lock(_ container: Container) throws(ContainerError) -> FileDescriptor {
        try container.lockStateFile("bundle.lock")
    }
}

extension Container {
    /// Takes an exclusive `flock` on the file `name` in the state folder (made when missing, never through a
    /// symbolic link), waiting for any other holder; it is held until the descriptor closes.
    package func lockStateFile(_ name: String) throws(ContainerError) -> FileDescriptor {
        let path = statePath(name)
        do {
            let file = try FileDescriptor(path, [.readWrite, .create, .noFollow], mode: 0o644)
            try system_flock(file.rawValue, LOCK_EX)
            return file
        } catch {
            throw error.failure("lock", path)
        }
    }

    /// `lockStateFile` without waiting: nil while another holds the lock.
    func lockStateFileIfFree(_ name: String) throws(ContainerError) -> FileDescriptor? {
        let path = statePath(name)
        do {
            let file = try FileDescriptor(path, [.readWrite, .create, .noFollow], mode: 0o644)
            do {
                try system_flock(file.rawValue, LOCK_EX | LOCK_NB)
            } catch .wouldBlock {
                return nil
            }
            return file
        } catch {
            throw error.failure("lock", path)
        }
    }

    /// Rolls back a bundle install cut short in its two-step exchange (ARCHITECTURE.md, "Network and FUSE
    /// filesystems"), so that the next command finds the bundle again, the old one or the new, whole: `open` and
    /// `create` call it. Under the install's lock, unless an install holds it: that one settles it first, or is in
    /// its own exchange. Costs one look at the root when there is no intent.
    func settleInterruptedInstall() throws(ContainerError) {
        let intent = rootBytes + [0x2F] + AppBundle.exchangeIntent.bytes
        do {
            guard try fileStatusIfPresent(in: currentDirectory, intent) != nil else { return }
        } catch {
            throw error.failure("look at", intent)
        }
        guard let lock = try lockStateFileIfFree("bundle.lock") else { return }
        defer { withExtendedLifetime(lock) {} }
        let folder = try openFolder([])
        do {
            try rollBackExchange(folder.rawValue, folder.rawValue, intent: AppBundle.exchangeIntent)
        } catch {
            throw error.failure("undo the bundle install cut short in", root)
        }
    }
}
