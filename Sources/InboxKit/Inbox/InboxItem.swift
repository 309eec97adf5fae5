import AppContainer
import FoundationEssentials
import Glibc

/// A file in the Inbox. It can be read and deleted, never written: to edit it, move it into
/// Documents first (`moveToDocuments()` or `prepareForEditing()`), which returns a writable `Document`.
public struct InboxItem: Sendable {
    /// The Inbox the item is in.
    public let inbox: Inbox
    /// The exact name, bytes and all.
    public let name: FileName
    /// Its status when it was listed or looked up, taken without following a symbolic link; not updated.
    package let status: FileStatus

    /// The size in bytes, as listed.
    public var size: Int64 { status.size }
    /// The last modification, as listed.
    public var modified: Timestamp { status.modified }

    /// The absolute path, exact to the byte.
    public var path: [UInt8] { inbox.container.pathBytes(.inbox) + [0x2F] + name.bytes }

    /// The item's URL. A name that is not valid UTF-8 cannot be spelled in a URL exactly: use `path`.
    public var url: URL { inbox.container.url(.inbox).appendingPathComponent(name.string, isDirectory: false) }

    /// Opens the item for reading. A symbolic link is refused, never followed.
    public func open() throws(ContainerError) -> ReadOnlyFile {
        let folder = try inbox.container.openFolder(.inbox)
        do {
            let fd = try FileDescriptor(at: folder.rawValue, name, [.noFollow, .nonBlocking])
            guard try fd.fileStatus().kind == .regular else {
                throw ContainerError(.refused, "'\(inbox.itemPath(name))' is not a regular file")
            }
            return ReadOnlyFile(fd)
        } catch let error as ContainerError {
            throw error
        } catch let error as Errno {
            throw error.failure("open", inbox.itemPath(name))
        } catch {
            throw ContainerError(.failure, "cannot open '\(inbox.itemPath(name))': \(error)")
        }
    }

    /// The whole contents.
    public func contents() throws(ContainerError) -> Data {
        try open().readToEnd()
    }

    /// Deletes the item from the Inbox through the one mover (only this file, never one that took its name
    /// since), and logs `deleted` with `reason`.
    public func delete(reason: String = "deleted by the app") throws(ContainerError) {
        let mover = Mover(
            inbox: inbox, inboxFolder: SharedDescriptor(try inbox.container.openFolder(.inbox)),
            documents: SharedDescriptor(try inbox.container.openFolder(.documents)))
        let deleted: Bool
        do throws(Errno) {
            deleted = try mover.delete(name, expected: status)
        } catch .noSuchFile {
            throw ContainerError(.noSuchItem, "'\(inbox.itemPath(name))' is gone: another process moved or deleted it")
        } catch {
            throw error.failure("delete", inbox.itemPath(name))
        }
        guard deleted else {
            throw ContainerError(.noSuchItem, "'\(inbox.itemPath(name))' was replaced by another file; not deleted")
        }
        var record = EncodedEvents()
        record.appendDeleted(path: inbox.loggedPath(.inbox, name), reason: reason, identity: Identity(status))
        _ = try inbox.log.append(record, durable: false)
    }

    /// Moves the item into Documents and returns it as a writable document (ARCHITECTURE.md, "How an arrival flows").
    public func moveToDocuments() throws(ContainerError) -> Document {
        try inbox.moveToDocuments(name, reason: "move")
    }

    /// The edit path: an Inbox item is never edited in place, so this moves it into Documents first.
    public func prepareForEditing() throws(ContainerError) -> Document {
        try inbox.moveToDocuments(name, reason: "edit")
    }
}

/// An Inbox item opened for reading: it has read operations and no write operation.
public final class ReadOnlyFile {
    private let descriptor: FileDescriptor

    init(_ descriptor: consuming FileDescriptor) {
        self.descriptor = descriptor
    }

    /// The open file's status now; fails with the exit status of its errno.
    package var status: FileStatus {
        get throws(ContainerError) {
            do { return try descriptor.fileStatus() } catch { throw error.failure("read", "an Inbox item") }
        }
    }

    /// Reads up to `count` bytes; empty at the end of the file.
    public func read(upToCount count: Int) throws(ContainerError) -> Data {
        var buffer = Data(count: count)
        let read = try buffer.withUnsafeMutableBytes { raw in
            Result(catching: { () throws(Errno) in try descriptor.read(into: raw) })
        }.mapError { $0.failure("read", "an Inbox item") }.get()
        buffer.count = read
        return buffer
    }

    /// Reads from the current offset to the end.
    public func readToEnd() throws(ContainerError) -> Data {
        do { return Data(try descriptor.readToEnd()) } catch { throw error.failure("read", "an Inbox item") }
    }

    /// The raw descriptor, opened read-only, for APIs that take one; it stays owned by this object.
    public var fileDescriptor: CInt { descriptor.rawValue }
}

/// A file in Documents: the app's own, free to edit.
public struct Document: Sendable {
    /// The exact path, bytes and all.
    public let path: [UInt8]
    /// The document's name in Documents, which may be a clash name.
    public let name: FileName

    /// The document's URL. A name that is not valid UTF-8 cannot be spelled in a URL exactly: use `path`.
    public var url: URL { URL(fileURLWithPath: String(decoding: path, as: UTF8.self), isDirectory: false) }
}
