import FoundationEssentials
import Glibc

/// What a seal records of one resource: a regular file's SHA-256 or a link's target. Folders are not
/// resources; any other kind of file is never sealed, so it always shows as a change.
enum SealedResource: Equatable {
    case file(sha256: [UInt8])
    case symlink(target: [UInt8])
    case other
}

/// The resources of a bundle by their path below its root.
typealias Manifest = [String: SealedResource]

extension AppBundle {
    /// Re-hashes the bundle and compares it with its seal (ARCHITECTURE.md, "Bundle, backup and setup").
    ///
    /// A bundle with no seal and nothing in it (a container made without `--bundle`) is `.notSealed`. A
    /// missing seal beside anything else, or a seal that is not a property list of the `files2` layout, is
    /// broken. Fails only when the bundle cannot be read.
    package func verify() throws(ContainerError) -> SealReport {
        let (report, _) = try check()
        return report
    }

    /// Whether the bundle holds `_CodeSignature/CodeResources`, whatever its state.
    package var isSealed: Bool {
        guard let root = try? FileDescriptor(pathBytes, [.directory, .noFollow]) else { return false }
        // A seal that cannot be read now is still a seal.
        if case .missing = try? readSeal(root.rawValue) { return false }
        return true
    }

    /// Refuses a broken seal with exit status 65, naming the first problem; a bundle never sealed passes.
    package func checkSeal() throws(ContainerError) {
        let report = try verify()
        guard report.state == .broken, let first = report.problems.first else { return }
        let more = report.problems.count > 1 ? " and \(report.problems.count - 1) more" : ""
        throw ContainerError(
            .badData, "the seal of \(name) is broken (\(first)\(more)): run 'inbox verify' to see what changed")
    }

    /// The report, and the manifest the seal holds (nil when there is none to read).
    func check() throws(ContainerError) -> (SealReport, Manifest?) {
        let root: FileDescriptor
        do {
            root = try FileDescriptor(pathBytes, [.directory, .noFollow])
        } catch .noSuchFile {
            return (SealReport(state: .notSealed, resources: 0, problems: []), nil)
        } catch {
            throw error.failure("open the bundle", path)
        }
        let sealed: Manifest
        let seal: SealFile
        do {
            seal = try readSeal(root.rawValue)
        } catch {
            throw error.failure("read the seal of", path)
        }
        switch seal {
        case .missing:
            let empty: Bool
            do {
                empty = try root.entries().isEmpty
            } catch {
                throw error.failure("read the bundle", path)
            }
            let problems = empty ? [] : [SealProblem(.missing, Self.codeResourcesPath)]
            return (SealReport(state: empty ? .notSealed : .broken, resources: 0, problems: problems), nil)
        case .unreadable:
            return (
                SealReport(state: .broken, resources: 0, problems: [SealProblem(.unreadable, Self.codeResourcesPath)]),
                nil
            )
        case .manifest(let manifest):
            sealed = manifest
        }
        let current = try Self.manifest(of: root, shown: path, skipping: [Self.codeResourcesPath])
        var problems: [SealProblem] = []
        for (path, resource) in sealed {
            if let now = current[path] {
                if now != resource { problems.append(SealProblem(.modified, path)) }
            } else {
                problems.append(SealProblem(.missing, path))
            }
        }
        for path in current.keys where sealed[path] == nil { problems.append(SealProblem(.added, path)) }
        problems.sort { $0.path.utf8.lexicographicallyPrecedes($1.path.utf8) }
        return (
            SealReport(state: problems.isEmpty ? .intact : .broken, resources: sealed.count, problems: problems), sealed
        )
    }

    private enum SealFile {
        case missing, unreadable
        case manifest(Manifest)
    }

    /// Reads `_CodeSignature/CodeResources` below the bundle folder `root`, following no link. A link or another
    /// kind of file in its place is unreadable (a broken seal); a failure to read (EIO, EMFILE…) is thrown, for
    /// it says nothing of the seal.
    private func readSeal(_ root: CInt) throws(Errno) -> SealFile {
        let bytes: [UInt8]
        do {
            let folder = try FileDescriptor(at: root, "_CodeSignature", [.directory, .noFollow])
            let file = try FileDescriptor(at: folder.rawValue, "CodeResources", [.noFollow, .nonBlocking])
            guard try file.fileStatus().kind == .regular else { return .unreadable }
            bytes = try file.readToEnd(limit: 256 << 20)
        } catch .noSuchFile {
            return .missing
        } catch .notDirectory, .tooManySymbolicLinks, .isDirectory {
            return .unreadable
        }
        return Self.parseCodeResources(Data(bytes)).map { .manifest($0) } ?? .unreadable
    }

    // MARK: - Manifests and CodeResources

    /// Every resource below `root` (never following a link), but the paths in `skipping`, which may name folders.
    /// With `linksLeaving` set, a symbolic link that leads out of `root` (or is absolute) is refused (exit
    /// status 77), named as `linksLeaving` + its path.
    static func manifest(
        of root: borrowing FileDescriptor, shown: String, skipping: Set<String>, linksLeaving: String? = nil
    ) throws(ContainerError) -> Manifest {
        let digest = try SHA256Digest()
        var manifest: Manifest = [:]
        let rootFD = root.rawValue
        try Tree.walk.run(root, shown: shown, onError: FolderWalk.stop) { entry throws(ContainerError) in
            let (parent, path, name) = (entry.parent, entry.path, entry.name)
            let key = Tree.text(path)
            guard !skipping.contains(key) else { return .next }
            switch entry.status.kind {
            case .directory:
                return .enter
            case .regular:
                manifest[key] = .file(sha256: try digest.hash(name, in: parent, shown: shown + "/" + key))
            case .symbolicLink:
                let target: [UInt8]
                do throws(Errno) {
                    target = try system_readlinkat(parent, name)
                } catch {
                    throw error.failure("read the link", shown + "/" + key)
                }
                if let source = linksLeaving,
                    target.first == 0x2F
                        || Tree.resolve(path.dropLast().map(\.bytes) + Tree.split(target), in: rootFD) == nil
                {
                    let shownTarget = String(decoding: target, as: UTF8.self)
                    throw ContainerError(
                        .refused,
                        "'\(source)/\(key)' is a symbolic link to '\(shownTarget)', outside the bundle: only links that stay inside it are installed"
                    )
                }
                manifest[key] = .symlink(target: target)
            default:
                manifest[key] = .other
            }
            return .next
        }
        return manifest
    }

    /// `{"files": {}, "files2": {path: {"hash2": <data>} or {"symlink": target}}}` as an XML property list.
    static func codeResources(_ manifest: Manifest) throws(ContainerError) -> Data {
        var files2: [String: CodeResource] = [:]
        for (path, resource) in manifest {
            switch resource {
            case .file(let sha256): files2[path] = CodeResource(hash2: Data(sha256))
            case .symlink(let target): files2[path] = CodeResource(symlink: String(decoding: target, as: UTF8.self))
            case .other: continue
            }
        }
        do {
            let encoder = PropertyListEncoder()
            encoder.outputFormat = .xml
            return try encoder.encode(CodeResources(files2: files2))
        } catch {
            throw ContainerError(.failure, "cannot write the bundle's seal: \(error)")
        }
    }

    /// The manifest in a CodeResources property list, or nil when it is not one of the `files2` layout.
    static func parseCodeResources(_ data: Data) -> Manifest? {
        guard let plist = try? PropertyListDecoder().decode(CodeResources.self, from: data) else { return nil }
        var manifest: Manifest = [:]
        for (path, entry) in plist.files2 {
            if let hash = entry.hash2, hash.count == 32 {
                manifest[path] = .file(sha256: Array(hash))
            } else if let target = entry.symlink {
                manifest[path] = .symlink(target: Array(target.utf8))
            } else {
                return nil
            }
        }
        return manifest
    }
}

/// `_CodeSignature/CodeResources`: `files` is always empty, written for the layout's sake and never read.
private struct CodeResources: Codable {
    var files: [String: CodeResource] = [:]
    var files2: [String: CodeResource]

    init(files2: [String: CodeResource]) { self.files2 = files2 }

    init(from decoder: any Decoder) throws {
        files2 = try decoder.container(keyedBy: CodingKeys.self).decode([String: CodeResource].self, forKey: .files2)
    }
}

/// One entry of `files2`: a file's SHA-256 or a link's target. A value of another type reads as absent.
private struct CodeResource: Codable {
    var hash2: Data?
    var symlink: String?

    init(hash2: Data? = nil, symlink: String? = nil) {
        self.hash2 = hash2
        self.symlink = symlink
    }

    init(from decoder: any Decoder) throws {
        let entry = try decoder.container(keyedBy: CodingKeys.self)
        hash2 = (try? entry.decodeIfPresent(Data.self, forKey: .hash2)) ?? nil
        symlink = (try? entry.decodeIfPresent(String.self, forKey: .symlink)) ?? nil
    }
}
