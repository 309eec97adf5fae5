import Foundation
import Glibc
import TestSupport
import Testing

/// `inbox lmtp` as a real process, spoken to over its socket (DESIGN §14). It never runs as root, so these tests
/// (which run as root) start it as user 65534 with `setpriv`, serving containers that user owns, as a service
/// account would.
@Suite(
    .enabled(if: getuid() == 0, "needs root, to run inbox lmtp as another user"),
    .enabled(if: FileManager.default.isExecutableFile(atPath: LMTPSite.setpriv), "needs setpriv"))
struct LMTPCommandTests {
    @Test func aMessageIsDeliveredOnceAndEveryRetryIsADuplicate() throws {
        let site = try LMTPSite(containers: ["alice"])
        let server = try site.start()
        let client = try server.client()
        #expect(
            client.transaction(MailFixtures.message, to: ["alice+inbox@example.org"])
                == ["250", "250", "250", "354", "250"])
        let path = try site.folder.file("report.eml", MailFixtures.message)
        let expected = try MailFixtures.oracle(path).compactMap { $0["sha256"] as? String }.sorted()
        #expect(expected.count == 3)
        #expect(try MailFixtures.contents(site.container("alice")) == expected)
        // The MTA's retry, then the same message through the pipe: one message, nothing delivered twice.
        #expect(client.transaction(MailFixtures.message, to: ["alice@example.org"], greet: false).suffix(1) == ["250"])
        let piped = try site.run(["--container", site.container("alice"), "import", "-"], input: MailFixtures.message)
        #expect(piped.status == 0, "\(piped.stderr)")
        #expect(try MailFixtures.contents(site.container("alice")) == expected)
        let imported = logRecords(site.container("alice"), event: "imported")
        #expect(imported.map { $0["source"] as? String } == ["lmtp", "lmtp", "-"])
        #expect(imported.map { $0["duplicate"] as? Bool } == [false, true, true])
        #expect(try server.stop().status == 0)
    }

    @Test func aNameWithNoContainerUnderTheRootIsRefusedAtRCPTAndTheOthersDelivered() throws {
        let site = try LMTPSite(containers: ["alice"])
        let server = try site.start()
        let client = try server.client()
        client.send("LHLO test.example\r\nMAIL FROM:<s@example.org>\r\nRCPT TO:<bob+inbox@example.org>\r\n")
        #expect(client.replies(3).last?.hasPrefix("550 5.1.1 <bob+inbox@example.org>") == true)
        client.send("RCPT TO:<alice+inbox@example.org>\r\nDATA\r\n")
        #expect(client.codes(2) == ["250", "354"])
        client.send(LMTPClient.data(MailFixtures.message))
        #expect(client.codes() == ["250"])
        #expect(try MailFixtures.contents(site.container("alice")).count == 3)
        #expect(!FileManager.default.fileExists(atPath: site.root + "/bob"), "nothing made for bob")
        #expect(try server.stop().status == 0)
    }

    @Test func aMessageOverMaxBytesIs552NamingTheLimitWithARejectedRecord() throws {
        let site = try LMTPSite(containers: ["alice"])
        let server = try site.start(["--max-bytes", "10"])
        let client = try server.client()
        client.send("LHLO test.example\r\nMAIL FROM:<s@example.org>\r\nRCPT TO:<alice@example.org>\r\nDATA\r\n")
        _ = client.replies(4)
        client.send(LMTPClient.data(MailFixtures.message))
        let reply = client.replies().last ?? ""
        #expect(reply.hasPrefix("552 5.3.4 <alice@example.org> ") && reply.hasSuffix("over --max-bytes 10"), "\(reply)")
        let rejected = logRecords(site.container("alice"), event: "rejected")
        #expect(rejected.count == 1 && (rejected.first?["reason"] as? String)?.contains("--max-bytes 10") == true)
        #expect(try MailFixtures.contents(site.container("alice")).isEmpty)
        #expect(try server.stop().status == 0)
    }

    /// SIGTERM: no new connection, 421 at once to a session waiting for a command, the data in hand read to its
    /// end and answered, then exit 0.
    @Test func sigtermAnswersTheDataInHandAndClosesTheRest() throws {
        let site = try LMTPSite(containers: ["alice"])
        let server = try site.start()
        let waiting = try server.client()
        let inData = try server.client()
        waiting.send("LHLO test.example\r\n")
        #expect(waiting.codes() == ["250"])
        inData.send("LHLO test.example\r\nMAIL FROM:<s@example.org>\r\nRCPT TO:<alice@example.org>\r\nDATA\r\n")
        #expect(inData.codes(4) == ["250", "250", "250", "354"])
        let data = LMTPClient.data(MailFixtures.message)
        let half = data.index(data.startIndex, offsetBy: data.count / 2)
        inData.send(String(data[..<half]))
        kill(server.child.pid, SIGTERM)
        #expect(waiting.replies() == ["421 4.3.2 \(site.host) shutting down"])
        #expect(waiting.isClosed())
        #expect(waitUntil(timeout: 30) { (try? LMTPClient(unixPath: site.socket)) == nil }, "no longer accepting")
        inData.send(String(data[half...]))
        #expect(inData.codes(2) == ["250", "421"])
        let result = try server.child.finish()
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stderr.contains("stopping on SIGTERM"))
        #expect(try MailFixtures.contents(site.container("alice")).count == 3)
        #expect(!FileManager.default.fileExists(atPath: site.socket), "its socket removed")
    }

    /// A kill -9 inside the data delivers nothing; the restarted server replaces the socket left behind, and the
    /// MTA's retry delivers the message once.
    @Test func killedInsideTheDataThenSentAgainIsDeliveredExactlyOnce() throws {
        let site = try LMTPSite(containers: ["alice"])
        let first = try site.start()
        let client = try first.client()
        client.send("LHLO test.example\r\nMAIL FROM:<s@example.org>\r\nRCPT TO:<alice@example.org>\r\nDATA\r\n")
        #expect(client.codes(4).last == "354")
        let data = LMTPClient.data(MailFixtures.message)
        client.send(String(data.prefix(data.count - 40)))
        kill(first.child.pid, SIGKILL)
        _ = try first.child.finish()
        #expect(client.isClosed())
        #expect(try MailFixtures.contents(site.container("alice")).isEmpty)
        #expect(FileManager.default.fileExists(atPath: site.socket), "the killed server's socket is still there")

        let second = try site.start()
        let retry = try second.client()
        #expect(retry.transaction(MailFixtures.message, to: ["alice@example.org"]).last == "250")
        #expect(retry.transaction(MailFixtures.message, to: ["alice@example.org"], greet: false).last == "250")
        #expect(try MailFixtures.contents(site.container("alice")).count == 3)
        #expect(logRecords(site.container("alice"), event: "delivered").count == 3)
        #expect(
            logRecords(site.container("alice"), event: "imported").map { $0["duplicate"] as? Bool } == [false, true])
        #expect(try second.stop().status == 0)
    }

    @Test func theSocketIsMode0660AndTheStartSaysWhatItServes() throws {
        let site = try LMTPSite(containers: ["alice", "carol"])
        try FileManager.default.createDirectory(
            atPath: site.root + "/not-a-container", withIntermediateDirectories: false)
        let server = try site.start()
        let mode = try FileManager.default.attributesOfItem(atPath: site.socket)[.posixPermissions] as? Int
        #expect(mode == 0o660)
        let result = try server.stop()
        #expect(result.status == 0)
        #expect(
            result.stderr.split(separator: "\n").first
                == "inbox: serving LMTP on unix:\(site.socket) for 2 containers under \(site.root)")
    }

    @Test func aLoopbackInetAddressServesAndAnyOtherIsAUsageError() throws {
        let site = try LMTPSite(containers: ["alice"])
        let port = try freePort()
        let server = try site.start(["--listen", "inet:127.0.0.1:\(port)"], waitFor: { try LMTPClient(port: port) })
        let client = try LMTPClient(port: port)
        #expect(client.codes() == ["220"])
        #expect(client.transaction(MailFixtures.message, to: ["alice@example.org"]).last == "250")
        #expect(try server.stop().stderr.hasPrefix("inbox: serving LMTP on inet:127.0.0.1:\(port) for 1 container"))
        for address in ["inet:192.0.2.1:24", "inet:0.0.0.0:24", "inet:[::]:24", "tcp:127.0.0.1:24", "inet:127.0.0.1:0"]
        {
            let refused = try site.run(["lmtp", "--root", site.root, "--listen", address])
            #expect(refused.status == 64, "\(address): \(refused.stderr)")
        }
    }

    /// 64 without an address (no --listen, no socket from systemd) and for --root with --container; 73 for a
    /// --container with no container and for a path that holds a file, not a socket; 75 when something listens on
    /// the socket already; 77 as root.
    @Test func itsExitStatusesBeforeServing() throws {
        let site = try LMTPSite(containers: ["alice"])
        let noAddress = try site.run(["lmtp", "--root", site.root])
        #expect(noAddress.status == 64, "\(noAddress.stderr)")
        let both = try site.run([
            "lmtp", "--root", site.root, "--container", site.container("alice"), "--listen", "unix:" + site.socket,
        ])
        #expect(both.status == 64, "\(both.stderr)")
        let missing = try site.run(["lmtp", "--container", site.root + "/nobody", "--listen", "unix:" + site.socket])
        #expect(missing.status == 73, "\(missing.stderr)")
        let file = try site.folder.file("run/file", "not a socket")
        let notSocket = try site.run(["lmtp", "--root", site.root, "--listen", "unix:" + file])
        #expect(notSocket.status == 73 && notSocket.stderr.contains("File exists"), "\(notSocket.stderr)")
        #expect(FileManager.default.contents(atPath: file) == Data("not a socket".utf8), "left as it was")
        let server = try site.start()
        let busy = try site.run(["lmtp", "--root", site.root, "--listen", "unix:" + site.socket])
        #expect(busy.status == 75, "\(busy.stderr)")
        #expect(try server.stop().status == 0)
        let asRoot = try InboxProcess.run(
            ["lmtp", "--root", site.root, "--listen", "unix:" + site.socket].map { Array($0.utf8) })
        #expect(asRoot.status == 77)
        #expect(
            asRoot.stderr.split(separator: "\n").count == 1 && asRoot.stderr.hasPrefix("inbox: lmtp never runs as root")
        )
    }

    /// Socket activation as systemd does it: `systemd-socket-activate` binds the socket and hands it over in
    /// LISTEN_FDS (at the first connection, as inbox-lmtp.socket does), and that socket is served. One handed over a
    /// connection at a time (`--accept`, a socket unit's Accept=yes) is a usage error, 64.
    @Test(
        .enabled(if: FileManager.default.isExecutableFile(atPath: LMTPSite.activate), "needs systemd-socket-activate"))
    func aSocketSystemdHandsOverIsServed() throws {
        let site = try LMTPSite(containers: ["alice"])
        let server = try site.startActivated()
        let client = try #require(site.connectOnceListening())
        #expect(client.codes() == ["220"])
        #expect(client.transaction(MailFixtures.message, to: ["alice@example.org"]).last == "250")
        #expect(try MailFixtures.contents(site.container("alice")).count == 3)
        let stopped = try server.stop()
        #expect(stopped.status == 0, "\(stopped.stderr)")
        #expect(
            stopped.stderr.contains("inbox: serving LMTP on unix:\(site.socket) for 1 container under \(site.root)\n"))

        let perConnection = try site.startActivated(["--accept"])
        let refused = try #require(site.connectOnceListening())
        #expect(refused.isClosed() && refused.replies().isEmpty)
        let said = try perConnection.stop().stderr
        #expect(said.contains("inbox: descriptor 3 from systemd is not a listening stream socket"), "\(said)")
        #expect(said.contains("Usage: inbox lmtp"), "a usage error, 64: \(said)")
    }

    /// Without --root or --container it serves the folder of the default container, `$XDG_DATA_HOME/inbox`, as
    /// the user units do; `$INBOX_CONTAINER` is not consulted.
    @Test func itServesTheDefaultContainersFolderWhateverInboxContainerSays() throws {
        let site = try LMTPSite(containers: ["alice"])
        let data = site.folder.path + "/data"
        for made in [data, data + "/inbox"] {
            try FileManager.default.createDirectory(atPath: made, withIntermediateDirectories: false)
            #expect(chown(made, 65534, 65534) == 0)
        }
        #expect(try site.run(["--container", data + "/inbox/me", "init"]).status == 0)
        let environment = ["XDG_DATA_HOME": data, "INBOX_CONTAINER": site.container("alice")]
        let server = try site.start(arguments: ["lmtp", "--listen", "unix:" + site.socket], environment: environment)
        let client = try server.client()
        #expect(
            client.transaction(MailFixtures.message, to: ["me+inbox@example.org", "alice@example.org"]).last == "250")
        #expect(try MailFixtures.contents(data + "/inbox/me").count == 3)
        #expect(try MailFixtures.contents(site.container("alice")).isEmpty)
        let said = try server.stop().stderr
        #expect(said.hasPrefix("inbox: serving LMTP on unix:\(site.socket) for 1 container under \(data)/inbox\n"))
    }

    /// A TCP port nothing listens on now.
    private func freePort() throws -> UInt16 {
        let probe = socket(AF_INET, CInt(SOCK_STREAM.rawValue), 0)
        defer { close(probe) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(probe, $0, length) == 0 && getsockname(probe, $0, &length) == 0
            }
        }
        guard bound else { throw LMTPClient.Failure(description: "no free port: errno \(errno)") }
        return UInt16(bigEndian: address.sin_port)
    }
}

/// A folder of containers user 65534 owns (`root/NAME`, made by `inbox init` as that user) and a folder for the
/// socket it may write.
struct LMTPSite {
    static let setpriv = "/usr/bin/setpriv"
    static let asNobody = ["--reuid=65534", "--regid=65534", "--clear-groups"]
    let folder: Scratch
    let root: String
    let socket: String
    /// The name the server gives itself in its replies.
    let host: String

    init(containers: [String]) throws {
        folder = try Scratch()
        #expect(chmod(folder.path, 0o755) == 0)
        root = folder.path + "/root"
        socket = folder.path + "/run/lmtp.sock"
        for made in [root, folder.path + "/run"] {
            try FileManager.default.createDirectory(atPath: made, withIntermediateDirectories: false)
            #expect(chown(made, 65534, 65534) == 0)
        }
        var name = [CChar](repeating: 0, count: 256)
        gethostname(&name, 255)
        host = String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        for container in containers {
            let made = try run(["--container", root + "/" + container, "init"])
            #expect(made.status == 0, "\(made.stderr)")
        }
    }

    func container(_ name: String) -> String { root + "/" + name }

    /// `inbox ARGS…` to its end, as user 65534.
    func run(_ arguments: [String], input: String = "") throws -> InboxProcess.Result {
        try InboxProcess.run(
            (Self.asNobody + [try SharedBinaries.ready()] + arguments).map { Array($0.utf8) }, input: Array(input.utf8),
            executable: Self.setpriv)
    }

    static let activate = "/usr/bin/systemd-socket-activate"

    /// `systemd-socket-activate OPTIONS -l SOCKET inbox lmtp --root ROOT` as user 65534, once the socket is there
    /// (the first connection starts inbox).
    func startActivated(_ options: [String] = []) throws -> RunningLMTP {
        try? FileManager.default.removeItem(atPath: socket)
        let child = try InboxProcess.start(
            (Self.asNobody + [Self.activate] + options + [
                "-l", socket, try SharedBinaries.ready(), "lmtp", "--root", root,
            ])
            .map { Array($0.utf8) }, executable: Self.setpriv)
        return RunningLMTP(child: child, socket: socket)
    }

    /// A connection to the socket, once something listens there (nil after 30 seconds).
    func connectOnceListening() -> LMTPClient? {
        var client: LMTPClient?
        _ = waitUntil(timeout: 30) {
            client = try? LMTPClient(unixPath: socket)
            return client != nil
        }
        return client
    }

    /// `inbox lmtp --root ROOT --listen unix:SOCKET ARGS…` as user 65534, once it answers (`waitFor` connects).
    func start(_ arguments: [String] = [], waitFor: (() throws -> LMTPClient)? = nil) throws -> RunningLMTP {
        let listen = arguments.contains("--listen") ? [] : ["--listen", "unix:" + socket]
        return try start(arguments: ["lmtp", "--root", root] + listen + arguments, waitFor: waitFor)
    }

    /// `inbox ARGUMENTS…` (an `lmtp` command line) as user 65534, once it answers.
    func start(
        arguments: [String], environment: [String: String] = [:], waitFor: (() throws -> LMTPClient)? = nil
    ) throws -> RunningLMTP {
        let child = try InboxProcess.start(
            (Self.asNobody + [try SharedBinaries.ready()] + arguments).map { Array($0.utf8) }, environment: environment,
            executable: Self.setpriv)
        let server = RunningLMTP(child: child, socket: socket)
        let connect = waitFor ?? { try LMTPClient(unixPath: socket) }
        let answering = waitUntil(timeout: 30) {
            guard let probe = try? connect() else { return false }
            return probe.replies().first?.hasPrefix("220 ") == true
        }
        #expect(answering, "inbox lmtp answers")
        return server
    }
}

/// A running `inbox lmtp`.
struct RunningLMTP {
    let child: InboxProcess.Child
    let socket: String

    /// A new connection, its greeting read.
    func client() throws -> LMTPClient {
        let client = try LMTPClient(unixPath: socket)
        #expect(client.codes() == ["220"])
        return client
    }

    /// SIGTERM, then the exit status and what it said.
    func stop() throws -> InboxProcess.Result {
        kill(child.pid, SIGTERM)
        return try child.finish()
    }
}
