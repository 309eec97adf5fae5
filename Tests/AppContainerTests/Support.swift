import AppContainer
import Foundation
import Glibc
import Testing

/// A throwaway folder under the temporary directory; `remove()` deletes it and everything in it.
struct Scratch {
    let path: String

    init() throws {
        path = FileManager.default.temporaryDirectory.path + "/appcontainer-tests-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    func remove() {
        try? FileManager.default.removeItem(atPath: path)
    }

    /// A path inside the scratch folder.
    func at(_ relative: String) -> String { path + "/" + relative }
}

/// The status of `path`, never following a symbolic link.
func status(_ path: String) throws -> FileStatus {
    try fileStatus(in: currentDirectory, path)
}

/// Whether anything (a link included) is at `path`.
func exists(_ path: String) -> Bool {
    (try? fileStatus(in: currentDirectory, path)) != nil
}

/// Creates a file at `path` holding `bytes`.
func makeFile(_ path: some CStringConvertible, _ bytes: [UInt8] = [], mode: mode_t = 0o644) throws {
    let file = try FileDescriptor(path, [.writeOnly, .create, .exclusive], mode: mode)
    try file.writeAll(bytes)
}

/// The whole contents of the file at `path`.
func readFile(_ path: some CStringConvertible) throws -> [UInt8] {
    try FileDescriptor(path, [.noFollow]).readToEnd()
}

/// A name from a literal, or a test failure.
func name(_ string: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> FileName {
    try #require(FileName(string), sourceLocation: sourceLocation)
}

/// Expects `body` to throw a `ContainerError` with `code`, and returns it.
@discardableResult
func expectError<R: ~Copyable>(
    _ code: ContainerError.Code, sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> R
) -> ContainerError? {
    let error = #expect(throws: ContainerError.self, sourceLocation: sourceLocation) { _ = try body() }
    #expect(error?.code == code, "\(error?.message ?? "no error")", sourceLocation: sourceLocation)
    return error
}
