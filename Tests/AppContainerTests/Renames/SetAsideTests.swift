import AppContainer
import Foundation
import Glibc
import TestSupport
import Testing

/// `setAside`, the one way a damaged state file is put aside (ARCHITECTURE.md, "The event log").
@Suite struct SetAsideTests {
    @Test func aSecondFileSetAsideGoesBesideTheFirstNeverOverIt() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let folder = try FileDescriptor(folder: scratch.path)
        let name = try #require(FileName("state"))
        try makeFile(scratch.path + "/state", Array("first".utf8))
        let first = try setAside(name, in: folder.rawValue, suffix: ".damaged-7")
        try makeFile(scratch.path + "/state", Array("second".utf8))
        let second = try setAside(name, in: folder.rawValue, suffix: ".damaged-7")
        #expect(first.string == "state.damaged-7" && second.string == "state-1.damaged-7")
        #expect(try readFile(scratch.path + "/" + first.string) == Array("first".utf8))
        #expect(try readFile(scratch.path + "/" + second.string) == Array("second".utf8))
        #expect(!exists(scratch.path + "/state"))
    }

    @Test func companionsGoWithItAndAloneUnderTheNameItWouldHaveHad() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let folder = try FileDescriptor(folder: scratch.path)
        let name = try #require(FileName("index.sqlite"))
        for file in ["index.sqlite", "index.sqlite-wal"] { try makeFile(scratch.path + "/" + file, [1]) }
        let aside = try setAside(name, in: folder.rawValue, suffix: ".old", companions: ["-wal", "-shm"])
        #expect(aside.string == "index.sqlite.old")
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: scratch.path).sorted()
                == ["index.sqlite.old", "index.sqlite.old-wal"])
        // Only a companion left (the database itself gone): it is set aside under the name the file would have had.
        try makeFile(scratch.path + "/index.sqlite-shm", [2])
        #expect(
            try setAside(name, in: folder.rawValue, suffix: ".older", companions: ["-wal", "-shm"]).string
                == "index.sqlite.older")
        #expect(exists(scratch.path + "/index.sqlite.older-shm"))
        #expect(throws: Errno.noSuchFile) {
            try setAside(name, in: folder.rawValue, suffix: ".oldest", companions: ["-wal", "-shm"])
        }
    }

    @Test func aLongNameIsCutToFitItsSuffix() throws {
        let scratch = try Scratch()
        defer { scratch.remove() }
        let folder = try FileDescriptor(folder: scratch.path)
        let long = String(repeating: "n", count: 255)
        try makeFile(scratch.path + "/" + long, [1])
        let aside = try setAside(try #require(FileName(long)), in: folder.rawValue, suffix: ".refused")
        #expect(aside.string == String(repeating: "n", count: 247) + ".refused")
        #expect(exists(scratch.path + "/" + aside.string))
    }
}
