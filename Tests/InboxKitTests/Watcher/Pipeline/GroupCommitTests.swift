import AppContainer
import Dispatch
import Foundation
import Glibc
import TestSupport
import Testing

@testable import InboxKit

/// The group commit of a watcher's batches (ARCHITECTURE.md, "Group commit across batches", "The folders fsynced
/// beside"), on a real container's log and folders: which fsync makes a batch's records durable, the arrivals handed
/// on in order only then, the batches handed to a syncer lingering to share its fsyncs, and what a failure leaves.
@Suite struct GroupCommitTests {
    /// A group commit on a scratch container's log, committing batches of one `rescan` record each, named by a mark.
    struct Setting {
        let scratch: Scratch
        let group: GroupCommit
        let documents: SharedDescriptor
        let inbox: SharedDescriptor
        let reports = Guarded<[String]>([])

        init(syncer: FolderSyncer? = nil) throws {
            scratch = try Scratch.withInbox()
            documents = SharedDescriptor(try scratch.container.openFolder(.documents))
            inbox = SharedDescriptor(try scratch.container.openFolder(.inbox))
            let reports = reports
            group = GroupCommit(
                log: scratch.inbox.log, journal: MoveJournal(container: scratch.container), syncer: syncer,
                settlesArrivals: true, wake: {}, report: { line in reports.update { $0.append(line) } })
            // The log's file made and fsynced with its folder once, so that each test counts only its own fsyncs.
            try group.append(Self.records("start"), durable: true)
        }

        static func records(_ mark: String) -> EncodedEvents {
            EncodedEvents([Event(.rescan, ["reason": .string(mark)])])
        }

        /// Commits the batch `mark` (its folders fsynced, its record appended), settling `arrivals`.
        func commit(
            _ mark: String, syncLater: Bool = false, arrivals: [Arrival] = [], inbox: SharedDescriptor? = nil
        ) throws {
            try group.commitApplied(
                Self.records(mark), documents: documents, inbox: inbox ?? self.inbox, shown: "the folders",
                syncLater: syncLater, settling: arrivals)
        }

        /// A file `name` made in the Inbox, as it arrived.
        func arrival(_ file: String) throws -> Arrival {
            try makeFile(scratch.inboxPath(file), Array(file.utf8))
            let item = InboxItem(
                inbox: scratch.inbox, name: try name(file), status: try status(scratch.inboxPath(file)))
            return Arrival(item: item, sha256: "", type: "text")
        }

        /// The marks of the log's records after "start", with their seqs.
        func marks() throws -> [(mark: String, seq: UInt64)] {
            try scratch.inbox.log.records(kinds: [.rescan]).map { ($0.fields["reason"] ?? "", $0.seq) }
                .filter { $0.mark != "start" }
        }

        func names(_ arrivals: [Arrival]) -> [String] { arrivals.map(\.item.name.string) }
    }

    /// Counts the `fsync` calls `body` makes on this thread.
    func fsyncs(_ body: () throws -> Void) throws -> Int {
        let plan = SyscallFaultPlan()
        try plan.run(body)
        return plan.calls.filter { $0 == "fsync" }.count
    }

    /// On this thread, a batch committed for later costs the fsyncs of its two folders and none of the log: its record
    /// is written, not durable, and must be within the group commit's window. The next append that fsyncs the log makes
    /// it durable too, and only then are its arrivals handed on.
    @Test func aBatchCommittedForLaterIsMadeDurableByTheNextFsyncOfTheLog() throws {
        let setting = try Setting()
        defer { setting.scratch.remove() }
        let group = setting.group
        let a = try setting.arrival("a.txt")

        let before = ContinuousClock.now
        #expect(try fsyncs { try setting.commit("a", syncLater: true, arrivals: [a]) } == 2)
        let after = ContinuousClock.now
        let seqA = try #require(try setting.marks().first?.seq)
        #expect(group.lastSeq == seqA)
        #expect(group.durableThrough < seqA && group.unsyncedThrough == seqA)
        let due = try #require(group.syncDue)
        #expect(due >= before + GroupCommit.syncDelay && due <= after + GroupCommit.syncDelay)
        #expect(setting.group.takeSettled().isEmpty)

        // A later batch's phase 1, fsynced: one fsync makes both durable.
        #expect(try fsyncs { try group.append(Setting.records("b"), durable: true) } == 1)
        #expect(group.durableThrough == seqA + 1 && group.syncDue == nil)
        #expect(setting.names(group.takeSettled()) == ["a.txt"])
        #expect(group.takeSettled().isEmpty)
    }

    /// When no batch comes to share its fsync, `sync` fsyncs the log once for every record waiting, and hands on their
    /// arrivals in the order applied; with nothing waiting it fsyncs nothing. A batch not committed for later (a
    /// pool's) is durable at once: three fsyncs.
    @Test func syncMakesTheWaitingRecordsDurableOnceAndHandsOnTheirArrivalsInOrder() throws {
        let setting = try Setting()
        defer { setting.scratch.remove() }
        let group = setting.group
        let (a, b, c) = (try setting.arrival("a.txt"), try setting.arrival("b.txt"), try setting.arrival("c.txt"))
        try setting.commit("a", syncLater: true, arrivals: [a])
        try setting.commit("b", syncLater: true, arrivals: [b])
        #expect(group.takeSettled().isEmpty)

        #expect(try fsyncs { try group.sync() } == 1)
        let lastB = try setting.marks().last?.seq
        #expect(group.syncDue == nil && group.durableThrough == lastB)
        #expect(setting.names(group.takeSettled()) == ["a.txt", "b.txt"])
        #expect(try fsyncs { try group.sync() } == 0)

        #expect(try fsyncs { try setting.commit("c", arrivals: [c]) } == 3)
        #expect(group.syncDue == nil)
        #expect(setting.names(group.takeSettled()) == ["c.txt"])
    }

    /// A copy's journal intent makes its batch durable at once though committed for later, and is ended only after
    /// that fsync; beside this thread, only once the syncer's answer is taken.
    @Test func aCopysIntentIsEndedOnlyOnceItsRecordIsDurable() throws {
        for beside in [false, true] {
            let syncer = beside ? try FolderSyncer(name: "test-sync", linger: .seconds(60)) : nil
            let setting = try Setting(syncer: syncer)
            defer { setting.scratch.remove() }
            let group = setting.group
            let journal = MoveJournal(container: setting.scratch.container)
            let intent = try journal.begin(MoveJournal.Intent(name: name("a.txt"), seq: 1))
            let left = try setting.scratch.journalEntries()
            try #require(left.count == 1)

            group.endWhenDurable(intent)
            try setting.commit("a", syncLater: true)
            if beside {
                #expect(try setting.scratch.journalEntries() == left, "ended before its answer was taken")
                try group.finish(waiting: true)
            }
            let seqA = try setting.marks().first?.seq
            #expect(group.durableThrough == seqA && group.syncDue == nil)
            #expect(try setting.scratch.journalEntries().isEmpty)
            #expect(setting.reports.value.isEmpty)
            group.letGoOfSyncer(stopping: true)
        }
    }

    /// Batches handed to a syncer linger within the window (here a long one) and are done as one group once their
    /// owner waits for the answers: one fsync of each folder and one append, answered in order, their arrivals handed
    /// on in the order applied.
    @Test(.timeLimit(.minutes(1))) func batchesHandedToTheSyncerLingerAndShareOneGroupWhenHurried() throws {
        let syncer = try FolderSyncer(name: "test-sync", linger: .seconds(60))
        let setting = try Setting(syncer: syncer)
        defer { setting.scratch.remove() }
        let group = setting.group
        for mark in ["a", "b", "c"] {
            try setting.commit(mark, syncLater: true, arrivals: [try setting.arrival(mark + ".txt")])
        }
        #expect(group.waitingForSyncer == 3)
        // Its thread sleeps until their lingering ends: nothing is fsynced or appended yet.
        let deadline = ContinuousClock.now + .seconds(10)
        while !syncer.watchesTheTime && ContinuousClock.now < deadline { usleep(1_000) }
        #expect(syncer.watchesTheTime)
        try group.finish(waiting: false)
        #expect(syncer.groupsDone == 0 && group.waitingForSyncer == 3)
        #expect(try setting.marks().isEmpty && group.takeSettled().isEmpty)

        try group.finish(waiting: true)
        #expect(group.waitingForSyncer == 0)
        let marks = try setting.marks()
        #expect(marks.map(\.mark) == ["a", "b", "c"])
        // Committed for later: written, not durable, and due within the window.
        #expect(group.lastSeq == marks.last?.seq && group.durableThrough < (marks.first?.seq ?? 0))
        #expect(group.syncDue != nil)
        try group.sync()
        #expect(setting.names(group.takeSettled()) == ["a.txt", "b.txt", "c.txt"])
        group.letGoOfSyncer(stopping: true)
        // Its thread counts the group once it has answered: stopped, it has.
        #expect(syncer.groupsDone == 1)
    }

    /// At most `maxHandedToSyncer` batches wait for the syncer: the next one's commit waits for the first's answer
    /// (hurrying the lingering ones) and then lingers itself.
    @Test(.timeLimit(.minutes(1))) func theBatchPastTheBoundWaitsForTheFirst() throws {
        let syncer = try FolderSyncer(name: "test-sync", linger: .seconds(60))
        let setting = try Setting(syncer: syncer)
        defer { setting.scratch.remove() }
        let group = setting.group
        let bound = GroupCommit.maxHandedToSyncer
        for index in 0..<bound { try setting.commit("\(index)") }
        #expect(group.waitingForSyncer == bound)
        #expect(try setting.marks().isEmpty)

        try setting.commit("\(bound)")
        let marks = try setting.marks()
        #expect(marks.map(\.mark) == (0..<bound).map { "\($0)" })
        #expect(group.durableThrough >= (marks.first?.seq ?? .max))
        #expect((1...bound).contains(group.waitingForSyncer))

        group.letGoOfSyncer(stopping: true)
        #expect(try setting.marks().map(\.mark) == (0...bound).map { "\($0)" })
        #expect(syncer.groupsDone == 2 && group.waitingForSyncer == 0)
    }

    /// A folder whose fsync fails (a pipe: EINVAL) fails the batch, here or beside: its record is not written, its
    /// copy's intent is not ended (recovery settles it), and its arrivals are never handed on.
    @Test(.timeLimit(.minutes(1))) func aFailedFsyncWritesNothingAndEndsNoIntent() throws {
        for beside in [false, true] {
            let syncer = beside ? try FolderSyncer(name: "test-sync", linger: .seconds(60)) : nil
            let setting = try Setting(syncer: syncer)
            defer { setting.scratch.remove() }
            let group = setting.group
            var ends: [CInt] = [0, 0]
            try #require(pipe(&ends) == 0)
            let pipeEnd = SharedDescriptor(FileDescriptor(owning: ends[0]))
            defer { close(ends[1]) }
            let intent = try MoveJournal(container: setting.scratch.container).begin(
                MoveJournal.Intent(name: name("a.txt"), seq: 1))
            group.endWhenDurable(intent)

            let failure = #expect(throws: ContainerError.self) {
                try setting.commit("a", arrivals: [try setting.arrival("a.txt")], inbox: pipeEnd)
                try group.finish(waiting: true)
            }
            #expect(failure?.message.contains("the folders") == true, "\(String(describing: failure))")
            #expect(try setting.marks().isEmpty)
            #expect(try setting.scratch.journalEntries().count == 1)
            #expect(group.takeSettled().isEmpty)
            group.letGoOfSyncer(stopping: true)
        }
    }
}
