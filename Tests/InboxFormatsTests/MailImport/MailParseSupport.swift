import AppContainer
import Foundation
import Glibc
import InboxFormats
import InboxKit
import TestSupport
import Testing

/// One attachment as the parser or the oracle sees it: name bytes, content type, decoded size and SHA-256.
struct SeenAttachment: Equatable, CustomStringConvertible {
    let name: [UInt8]
    let contentType: String
    let size: Int64
    let sha256: String

    var description: String {
        "\(String(decoding: name, as: UTF8.self)) (\(contentType), \(size) bytes, \(sha256.prefix(12)))"
    }
}

enum MailParse {
    static let oracle = TestPaths.oracle("mail_attachments.py")
    static let tnefGenerator = TestPaths.oracle("make_tnef.py")
    static let pythonCorpus = "/usr/lib/python3.11/test/test_email/data"

    /// Writes `text` (a message, `\n` line ends) to a new file in `folder`; returns its path.
    static func write(_ text: String, in folder: String, as name: String) throws -> String {
        let path = folder + "/" + name
        try makeFile(path, Array(text.utf8))
        return path
    }

    /// The message at `path` opened and parsed (a leading mbox `From ` line left out, as the importer does).
    static func open(_ path: String, limits: MailLimits = MailLimits()) throws -> (SharedDescriptor, MailMessage) {
        let file = SharedDescriptor(try FileDescriptor(path, [.noFollow]))
        let size = Int64(try file.descriptor.status().st_size)
        var start: Int64 = 0
        var head = [UInt8](repeating: 0, count: 4096)
        let count = try head.withUnsafeMutableBytes { try system_pread(file.rawValue, into: $0, at: 0) }
        if head[..<count].starts(with: "From ".utf8), let newline = head[..<count].firstIndex(of: 0x0A) {
            start = Int64(newline + 1)
        }
        let message = try MailMessage(reading: file.rawValue, range: start..<size, limits: limits)
        return (file, message)
    }

    /// Every attachment of the message at `path`, each decoded into a temporary file and hashed.
    static func attachments(_ path: String, limits: MailLimits = MailLimits()) throws -> [SeenAttachment] {
        let (file, message) = try open(path, limits: limits)
        defer { withExtendedLifetime(file) {} }
        var seen: [SeenAttachment] = []
        try message.forEachAttachment { (attachment) throws(MailError) in
            do {
                let out = try FileDescriptor(FileManager.default.temporaryDirectory.path, [.readWrite, .temporaryFile])
                let written = try attachment.decode(into: out.rawValue)
                let (size, digest) = try hash(out.rawValue)
                #expect(size == written)
                seen.append(
                    SeenAttachment(
                        name: attachment.name.bytes, contentType: attachment.contentType, size: size, sha256: digest))
            } catch let error as MailError {
                throw error
            } catch {
                throw .io(ContainerError(.failure, "\(error)"))
            }
        }
        return seen
    }

    /// The size and SHA-256 (hex) of the whole file open at `fd`.
    static func hash(_ fd: CInt) throws -> (Int64, String) {
        let digest = try SHA256Digest()
        try digest.begin()
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        var offset: Int64 = 0
        while true {
            let count = try buffer.withUnsafeMutableBytes { try system_pread(fd, into: $0, at: offset) }
            if count == 0 { break }
            try buffer.withUnsafeBytes { try digest.update(UnsafeRawBufferPointer(rebasing: $0[..<count])) }
            offset += Int64(count)
        }
        return (offset, try digest.finish().map { String(format: "%02x", $0) }.joined())
    }

    /// What the oracle (Python's email package with §12's rules) makes of each message, by path.
    static func oracleAttachments(_ paths: [String]) throws -> [String: [SeenAttachment]] {
        let (status, output, errors) = try runProgram("/usr/bin/python3", [oracle] + paths).parts
        try #require(status == 0, "the oracle failed: \(errors)")
        var result: [String: [SeenAttachment]] = [:]
        for line in output.split(separator: "\n") {
            let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            let file = try #require(object["file"] as? String)
            let list = try #require(object["attachments"] as? [[String: Any]])
            result[file] = try list.map { item in
                let hex = try #require(item["name_hex"] as? String)
                let name = try stride(from: 0, to: hex.count, by: 2).map { offset in
                    let start = hex.index(hex.startIndex, offsetBy: offset)
                    return try #require(UInt8(hex[start..<hex.index(start, offsetBy: 2)], radix: 16))
                }
                return SeenAttachment(
                    name: name, contentType: try #require(item["content_type"] as? String),
                    size: Int64(try #require(item["size"] as? Int)), sha256: try #require(item["sha256"] as? String))
            }
        }
        return result
    }
}
