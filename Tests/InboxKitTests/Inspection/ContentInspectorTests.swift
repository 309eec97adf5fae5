import AppContainer
import Foundation
import Glibc
import InboxKit
import TestSupport
import Testing

@Suite struct ContentInspectorTests {
    /// The type of every file in SampleAttachments, by path inside it.
    static let sampleTypes: [String: String] = [
        "README.md": "text",
        "drafts/page.pdf": "pdf",
        "empty.txt": "empty",
        "expenses-q3.csv": "csv",
        "forwarded-message.eml": "eml",
        "mail/quarterly-mail.eml": "eml",
        "invoice-2026-11.pdf": "pdf",
        "jane-doe.vcf": "vcard",
        "make-samples.py": "text",
        "meeting-notes.txt": "text",
        "party-invite.gif": "gif",
        "quarterly-report.docx": "office",
        "receipt-scan.jpg": "jpeg",
        "scans/page.pdf": "pdf",
        "team-offsite.ics": "calendar",
        "team-photo.png": "png",
        "Ångström résumé 2026.txt": "text",
    ]

    // MARK: - Samples

    @Test func everySampleGetsItsTypeAndTheDigestOfSha256sum() throws {
        let inspector = try ContentInspector()
        let samples = try Self.sampleFiles()
        #expect(Set(samples) == Set(Self.sampleTypes.keys), "a sample was added or removed: update sampleTypes")
        for sample in samples {
            let path = Self.samplesFolder + "/" + sample
            let inspection = try Self.inspect(path, with: inspector)
            #expect(inspection.type == Self.sampleTypes[sample], "\(sample): libmagic said \(inspection.mime)")
            #expect(inspection.sha256 == (try Self.sha256sum(path)), "\(sample)")
        }
    }

    @Test func emptyFileHasTheDigestOfNothing() throws {
        try Self.withFolder { folder in
            let path = try Self.write([], to: folder + "/empty")
            let inspection = try Self.inspect(path, with: ContentInspector())
            #expect(inspection.type == "empty")
            #expect(inspection.sha256 == (try Self.sha256sum(path)))
            #expect(inspection.sha256.count == 64)
        }
    }

    // MARK: - Large files

    /// Sizes on and off a multiple of the chunk size, so the last read is full in one and short in the other.
    @Test(arguments: [5 << 20, (5 << 20) + 12_345])
    func largeFileIsHashedChunkByChunk(size: Int) throws {
        try Self.withFolder { folder in
            let path = try Self.write(Self.pseudoRandomBytes(size), to: folder + "/random.bin")
            let inspection = try Self.inspect(path, with: ContentInspector())
            #expect(inspection.sha256 == (try Self.sha256sum(path)))
            #expect(inspection.type == "other")
            #expect(inspection.mime == "application/octet-stream")
        }
    }

    // MARK: - Reuse and descriptors

    @Test func oneInspectorReusedAnswersLikeFreshOnes() throws {
        try Self.withFolder { folder in
            var paths = try Self.sampleFiles().map { Self.samplesFolder + "/" + $0 }
            paths.append(try Self.write(Self.pseudoRandomBytes(700_000), to: folder + "/random.bin"))
            paths.append(try Self.write([], to: folder + "/empty"))

            var fresh: [String: Inspection] = [:]
            for path in paths { fresh[path] = try Self.inspect(path, with: ContentInspector()) }

            let reused = try ContentInspector()
            for path in paths + paths.reversed() + paths {
                #expect(try Self.inspect(path, with: reused) == fresh[path], "\(path)")
            }
        }
    }

    @Test func readsFromTheStartWhateverTheDescriptorsOffset() throws {
        try Self.withFolder { folder in
            let path = try Self.write(Self.pseudoRandomBytes(300_000), to: folder + "/random.bin")
            let fd = try FileDescriptor(path, .readOnly).release()
            defer { close(fd) }
            #expect(lseek(fd, 1_000, SEEK_SET) == 1_000)
            let inspection = try ContentInspector().inspect(fd)
            #expect(inspection.sha256 == (try Self.sha256sum(path)))
            #expect(lseek(fd, 0, SEEK_CUR) == 1_000, "the descriptor's offset is left alone")

            // libmagic, too, sees the file from its start.
            let pdfFD = try FileDescriptor(Self.samplesFolder + "/invoice-2026-11.pdf", .readOnly).release()
            defer { close(pdfFD) }
            #expect(lseek(pdfFD, 16, SEEK_SET) == 16)
            #expect(try ContentInspector().inspect(pdfFD).type == "pdf")
        }
    }

    /// The size `fstat` gave only spares the last read of 0 bytes: a file longer than that is read to its end,
    /// and a shorter one to its end too.
    @Test(arguments: [0, 299, 300, 301, 1 << 18, (1 << 18) + 1])
    func sizeGivenNeverCutsTheFileShort(given: Int) throws {
        try Self.withFolder { folder in
            for size in [0, 300, 1 << 18, (1 << 18) + 700] {
                let path = try Self.write(Self.pseudoRandomBytes(size), to: folder + "/random-\(size).bin")
                let file = try FileDescriptor(path, .readOnly)
                let inspection = try ContentInspector().inspect(file.rawValue, size: Int64(given))
                #expect(inspection.sha256 == (try Self.sha256sum(path)), "size \(size), given \(given)")
            }
        }
    }

    // MARK: - Names libmagic leaves vague

    @Test func firstBytesNameWhatTheMIMETypeDoesNot() throws {
        let bom: [UInt8] = [0xEF, 0xBB, 0xBF]
        let cases: [(name: String, bytes: [UInt8], type: String)] = [
            ("bom.ics", bom + Array("BEGIN:VCALENDAR\r\nVERSION:2.0\r\nEND:VCALENDAR\r\n".utf8), "calendar"),
            ("bom.vcf", bom + Array("BEGIN:VCARD\r\nVERSION:3.0\r\nFN:Jane\r\nEND:VCARD\r\n".utf8), "vcard"),
            ("lower.eml", Array("received: from a by b\r\nfrom: x@example.com\r\n\r\nhi\r\n".utf8), "eml"),
            ("ooxml.zip", Self.storedZip(["[Content_Types].xml": "<Types/>", "a.xml": "<a/>"]), "office"),
            ("odf.zip", Self.storedZip(["mimetype": "application/x-unknown", "a.xml": "<a/>"]), "office"),
            ("plain.zip", Self.storedZip(["notes.txt": "hello", "more.txt": "world"]), "zip"),
            ("notes.txt", Array("To: the team\nFrom: me\n".utf8), "text"),
        ]
        try Self.withFolder { folder in
            let inspector = try ContentInspector()
            for entry in cases {
                let inspection = try Self.inspect(
                    try Self.write(entry.bytes, to: folder + "/" + entry.name), with: inspector)
                #expect(inspection.type == entry.type, "\(entry.name): libmagic said \(inspection.mime)")
            }
        }
    }

    // MARK: - libmagic loaded lazily

    @Test func signaturesAndTextNeverLoadLibmagic() throws {
        try Self.withFolder { folder in
            let inspector = try ContentInspector()
            for sample in ["team-photo.png", "invoice-2026-11.pdf", "meeting-notes.txt", "empty.txt"] {
                _ = try Self.inspect(Self.samplesFolder + "/" + sample, with: inspector)
            }
            _ = try Self.inspect(try Self.write(Array("just words\n".utf8), to: folder + "/words.txt"), with: inspector)
            #expect(!inspector.hasLoadedMagic)
        }
    }

    @Test func aTypeTheSnifferLeavesLoadsLibmagicOnceAndNamesIt() throws {
        try Self.withFolder { folder in
            let inspector = try ContentInspector()
            let noise = try Self.write(Self.pseudoRandomBytes(4096), to: folder + "/noise.bin")
            let first = try Self.inspect(noise, with: inspector)
            #expect(inspector.hasLoadedMagic)
            #expect(first.mime == "application/octet-stream")
            #expect(first.type == "other")
            // The handle is kept: a second file that needs it, and then a PNG, on the same one.
            #expect(try Self.inspect(noise, with: inspector) == first)
            #expect(try Self.inspect(Self.samplesFolder + "/team-photo.png", with: inspector).type == "png")
            #expect(inspector.hasLoadedMagic)
        }
    }

    @Test func aDatabaseThatCannotBeLoadedFailsAtTheFirstFileThatNeedsIt() throws {
        try Self.withFolder { folder in
            // Readable, so the inspector is made; not a database, so loading it fails.
            let broken = try Self.write(Array("not a magic database".utf8), to: folder + "/broken.mgc")
            let inspector = try ContentInspector(database: broken)
            #expect(try Self.inspect(Self.samplesFolder + "/team-photo.png", with: inspector).type == "png")
            let noise = try Self.write(Self.pseudoRandomBytes(4096), to: folder + "/noise.bin")
            let error = #expect(throws: ContainerError.self) { try Self.inspect(noise, with: inspector) }
            #expect(error?.message.contains("cannot load the libmagic database '\(broken)'") == true)
            #expect(!inspector.hasLoadedMagic)
        }
    }

    // MARK: - Failures

    @Test func missingMagicDatabaseIsAClearError() throws {
        let error = #expect(throws: ContainerError.self) { try ContentInspector(database: "/nonexistent/magic.mgc") }
        #expect(error?.message.contains("cannot load the libmagic database '/nonexistent/magic.mgc'") == true)
    }

    @Test func unreadableDescriptorIsAnError() throws {
        let fd = try FileDescriptor("/", [.directory]).release()
        defer { close(fd) }
        let error = #expect(throws: ContainerError.self) { try ContentInspector().inspect(fd) }
        #expect(error?.cause == .isDirectory)
    }
}

// MARK: - Helpers

extension ContentInspectorTests {
    static let samplesFolder = TestPaths.samples

    /// Every regular file under SampleAttachments, as a path inside it.
    static func sampleFiles() throws -> [String] {
        let all = try FileManager.default.subpathsOfDirectory(atPath: samplesFolder)
        return all.filter { (try? fileStatus(in: currentDirectory, samplesFolder + "/" + $0).kind) == .regular }
            .sorted()
    }

    static func inspect(_ path: String, with inspector: ContentInspector) throws -> Inspection {
        let file = try FileDescriptor(path, .readOnly)
        return try inspector.inspect(file.rawValue)
    }

    /// The digest `/usr/bin/sha256sum` prints for the file, given on its standard input.
    static func sha256sum(_ path: String) throws -> String {
        let process = try runProgram("/usr/bin/sha256sum", [], input: try readFile(path))
        #expect(process.status == 0)
        return String(decoding: process.stdout.prefix(64), as: UTF8.self)
    }

    static func withFolder(_ body: (String) throws -> Void) throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        try body(scratch.path)
    }

    @discardableResult
    static func write(_ bytes: [UInt8], to path: String) throws -> String {
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return path
    }

    /// Bytes from SplitMix64: the same on every run, with no pattern libmagic would name.
    static func pseudoRandomBytes(_ count: Int, seed: UInt64 = 0x0123_4567_89AB_CDEF) -> [UInt8] {
        var state = seed
        var bytes: [UInt8] = []
        bytes.reserveCapacity(count + 8)
        while bytes.count < count {
            state &+= 0x9E37_79B9_7F4A_7C15
            var mixed = (state ^ (state >> 30)) &* 0xBF58_476D_1CE4_E5B9
            mixed = (mixed ^ (mixed >> 27)) &* 0x94D0_49BB_1331_11EB
            mixed ^= mixed >> 31
            withUnsafeBytes(of: mixed.littleEndian) { bytes.append(contentsOf: $0) }
        }
        return Array(bytes.prefix(count))
    }

    /// A zip of stored (uncompressed) entries, in the order of their names, with its central directory.
    static func storedZip(_ entries: KeyValuePairs<String, String>) -> [UInt8] {
        func le16(_ value: Int) -> [UInt8] { [UInt8(value & 0xFF), UInt8(value >> 8 & 0xFF)] }
        func le32(_ value: UInt32) -> [UInt8] { (0..<4).map { UInt8(value >> (8 * $0) & 0xFF) } }
        var zip: [UInt8] = []
        var central: [UInt8] = []
        for (name, text) in entries {
            let name = Array(name.utf8)
            let data = Array(text.utf8)
            let fields =
                le16(20) + le16(0) + le16(0) + le16(0) + le16(0x21) + le32(crc32(data))
                + le32(UInt32(data.count)) + le32(UInt32(data.count)) + le16(name.count) + le16(0)
            central +=
                le32(0x0201_4B50) + le16(20) + fields + le16(0) + le16(0) + le16(0) + le32(0)
                + le32(UInt32(zip.count)) + name
            zip += le32(0x0403_4B50) + fields + name + data
        }
        let end =
            le32(0x0605_4B50) + le16(0) + le16(0) + le16(entries.count) + le16(entries.count)
            + le32(UInt32(central.count)) + le32(UInt32(zip.count)) + le16(0)
        return zip + central + end
    }

    static func crc32(_ bytes: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 == 1 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1 }
        }
        return ~crc
    }
}
