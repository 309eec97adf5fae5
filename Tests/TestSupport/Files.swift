import AppContainer
import Foundation
import Glibc
import Testing

/// The status of `path`, never following a symbolic link.
package func status(_ path: String) throws -> FileStatus {
    try fileStatus(in: currentDirectory, path)
}

/// Whether anything (a link included) is at `path`.
package func exists(_ path: String) -> Bool {
    (try? fileStatus(in: currentDirectory, path)) != nil
}

/// Creates a file at `path` holding `bytes`, with exactly `mode` (whatever the umask).
package func makeFile(_ path: some CStringConvertible, _ bytes: [UInt8] = [], mode: mode_t = 0o644) throws {
    let file = try FileDescriptor(path, [.writeOnly, .create, .exclusive], mode: mode)
    try file.writeAll(bytes)
    try system_fchmod(file.rawValue, mode)
}

/// The whole contents of the file at `path`.
package func readFile(_ path: some CStringConvertible) throws -> [UInt8] {
    try FileDescriptor(path, [.noFollow]).readToEnd()
}

/// A name from a literal, or a test failure.
package func name(_ string: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> FileName {
    try #require(FileName(string), sourceLocation: sourceLocation)
}

/// Expects `body` to throw a `ContainerError` with `code`, and returns it.
@discardableResult
package func expectError<R: ~Copyable>(
    _ code: ContainerError.Code, sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> R
) -> ContainerError? {
    let error = #expect(throws: ContainerError.self, sourceLocation: sourceLocation) { _ = try body() }
    #expect(error?.code == code, "\(error?.message ?? "no error")", sourceLocation: sourceLocation)
    return error
}

/// Bytes that differ from offset to offset, so a misplaced or repeated block shows.
package func pattern(_ count: Int, seed: UInt64 = 0x9E37_79B9_7F4A_7C15) -> [UInt8] {
    var state = seed | 1
    return (0..<count).map { _ in
        state ^= state << 13
        state ^= state >> 7
        state ^= state << 17
        return UInt8(truncatingIfNeeded: state)
    }
}

/// Every entry below `root` as `path/` for a folder, `path file SIZE`, `path -> TARGET`, or `path KIND`, never
/// following a link, sorted: the tree as a before-and-after comparison sees it.
package func treeListing(_ root: String) throws -> [String] {
    var lines: [String] = []
    func walk(_ relative: String) throws {
        let folder = try FileDescriptor(root + relative, [.directory, .noFollow])
        for entry in try folder.entries() {
            let path = relative + "/" + entry.string
            let status = try fileStatus(in: folder.rawValue, entry)
            switch status.kind {
            case .regular:
                lines.append("\(path) file \(status.size)")
            case .directory:
                lines.append(path + "/")
                try walk(path)
            case .symbolicLink:
                lines.append(
                    "\(path) -> \(String(decoding: try system_readlinkat(folder.rawValue, entry), as: UTF8.self))")
            default:
                lines.append("\(path) \(status.kind)")
            }
        }
    }
    try walk("")
    return lines.sorted()
}
