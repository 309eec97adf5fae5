import AppContainer
import Dispatch
import Foundation
import Glibc
import Synchronization
import TestSupport
import Testing

@testable import InboxKit

/// The threads that fsync the folders of applied batches and then append their records (ARCHITECTURE.md, "The
/// folders fsynced beside"), on real folders and real logs.
@Suite struct FolderSyncerTests {
    /// An owner: a log of its own and the folder fsynced for its batches.
    struct Owner {
        let id: ObjectIdentifier
        let log: EventLog
        let folder: SharedDescriptor
        private let token: AnyObject

        init(_ scratch: Scratch, _ name: String) throws {
            let directory = scratch.outside(name)
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            log = try EventLog(directory: directory)
            folder = SharedDescriptor(try FileDescriptor(directory, [.directory]))
            let token = NSObject()
            self.token = token
            id = ObjectIdentifier(token)
        }

        /// A batch of one record that names `mark`, its answer handed to `done`.
        func batch(
            _ mark: String, durable: Bool = false, folders: [SharedDescriptor]? = nil,
            done: @escaping @Sendable (Result<FolderSyncer.Appended, ContainerError>) -> Void
        ) -> FolderSyncer.Batch {
            FolderSyncer.Batch(
                owner: id, folders: folders ?? [folder], shown: log.directory, log: log,
                records: EncodedEvents([Event(.rescan, ["reason": .string(mark)])]), durable: durable, done: done)
        }

        /// The marks of the log's records, with their seqs, in order.
        func marks() throws -> [(mark: String, seq: UInt64)] {
            try log.records(kinds: [.rescan]).map { ($0.fields["reason"] ?? "", $0.seq) }
        }
    }

    /// While the syncer's one thread is busy with an owner's batch, the owner's next five wait together: they share
    /// one fsync and one append, and each is answered with the seq of its own record, in order.
    @Test func batchesThatWaitTogetherShareOneFsyncAndOneAppend() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let owner = try Owner(scratch, "a")
        let syncer = try FolderSyncer(name: "test-sync")
        let held = DispatchSemaphore(value: 0)
        let answers = Guarded<[(mark: String, seq: UInt64, durable: Bool)]>([])
        let answered = DispatchSemaphore(value: 0)
        func answer(_ mark: String) -> @Sendable (Result<FolderSyncer.Appended, ContainerError>) -> Void {
            { result in
                if mark == "0" { held.wait() }
                if case .success(let appended) = result {
                    answers.update { $0.append((mark, appended.lastSeq, appended.durable)) }
                }
                answered.signal()
            }
        }
        syncer.submit(owner.batch("0", done: answer("0")))
        // The first batch's answer holds the thread until the others are in.
        #expect(waitUntil(timeout: 10, interval: 0.001) { (try? owner.marks().count) == 1 })
        for index in 1...5 { syncer.submit(owner.batch("\(index)", durable: index == 3, done: answer("\(index)"))) }
        held.signal()
        for _ in 0...5 { answered.wait() }
        syncer.stop()

        #expect(syncer.groupsDone == 2)
        let logged = try owner.marks()
        #expect(logged.map(\.mark) == (0...5).map { "\($0)" })
        #expect(answers.value.map(\.mark) == logged.map(\.mark))
        #expect(answers.value.map(\.seq) == logged.map(\.seq))
        // One of the five asked for a durable append: the whole group's was.
        #expect(answers.value.map(\.durable) == [false, true, true, true, true, true])
    }

    /// Three threads, four owners, fifty batches each handed in turn: each owner's are answered once each, in the
    /// order handed in, with the seqs of its own log.
    @Test func eachOwnersBatchesAreDoneInOrderBesideTheOthers() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let owners = try (0..<4).map { try Owner(scratch, "o\($0)") }
        let syncer = try FolderSyncer(name: "test-sync", threads: 3)
        let answers = Guarded<[Int: [(mark: String, seq: UInt64)]]>([:])
        let answered = DispatchSemaphore(value: 0)
        let count = 50
        for index in 0..<count {
            for (number, owner) in owners.enumerated() {
                syncer.submit(
                    owner.batch("\(index)") { result in
                        if case .success(let appended) = result {
                            answers.update { $0[number, default: []].append(("\(index)", appended.lastSeq)) }
                        }
                        answered.signal()
                    })
            }
        }
        for _ in 0..<(count * owners.count) { answered.wait() }
        syncer.stop()

        for (number, owner) in owners.enumerated() {
            let logged = try owner.marks()
            #expect(logged.map(\.mark) == (0..<count).map { "\($0)" })
            let answered = answers.value[number] ?? []
            #expect(answered.map(\.mark) == logged.map(\.mark))
            #expect(answered.map(\.seq) == logged.map(\.seq))
        }
        #expect(syncer.groupsDone <= count * owners.count)
    }

    /// Batches linger before their fsyncs: an owner's batches handed in meanwhile make one group, done at once when
    /// the owner hurries them (its thread is about to wait for the answers); another owner's still linger, until the
    /// syncer is stopped, which lets none linger.
    @Test func lingeringBatchesMakeOneGroupDoneWhenTheirOwnerHurriesOrTheSyncerStops() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let first = try Owner(scratch, "first")
        let second = try Owner(scratch, "second")
        let syncer = try FolderSyncer(name: "test-sync", threads: 2, linger: .seconds(600))
        let answered = Guarded<[String]>([])
        for mark in ["a", "b", "c"] { syncer.submit(first.batch(mark) { _ in answered.update { $0.append(mark) } }) }
        syncer.submit(second.batch("x") { _ in answered.update { $0.append("x") } })
        // Nothing is done within ten minutes of its handing in but for a hurry or a stop.
        #expect(syncer.groupsDone == 0 && answered.value.isEmpty)

        syncer.hurry(first.id)
        #expect(waitUntil(timeout: 10, interval: 0.001) { answered.value.count == 3 })
        #expect(answered.value == ["a", "b", "c"])
        #expect(syncer.groupsDone == 1)
        #expect(try first.marks().map(\.mark) == ["a", "b", "c"] && second.marks().isEmpty)

        let stopped = Guarded(false)
        DispatchQueue.global().async {
            syncer.stop()
            stopped.update { $0 = true }
        }
        #expect(waitUntil(timeout: 10, interval: 0.001) { stopped.value })
        #expect(answered.value == ["a", "b", "c", "x"])
        #expect(try second.marks().map(\.mark) == ["x"])
    }

    /// Two owners' lingering batches are done side by side: the thread that takes the first owner's group hands the
    /// watch over the second's to another thread. Here the first group's answer holds its thread until the second's
    /// is answered: one after the other, that never comes. The second is handed in once one thread sleeps until the
    /// first is due (so no other is woken for it then).
    @Test func lingeringBatchesOfTwoOwnersAreDoneSideBySide() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let first = try Owner(scratch, "first")
        let second = try Owner(scratch, "second")
        let syncer = try FolderSyncer(name: "test-sync", threads: 2, linger: .milliseconds(300))
        defer { syncer.stop() }
        let secondDone = DispatchSemaphore(value: 0)
        let firstSawSecond = Guarded<Bool?>(nil)
        syncer.submit(
            first.batch("a") { _ in
                let came = secondDone.wait(timeout: .now() + .seconds(10)) == .success
                firstSawSecond.update { $0 = came }
            })
        #expect(waitUntil(timeout: 10, interval: 0.001) { syncer.watchesTheTime })
        syncer.submit(second.batch("b") { _ in secondDone.signal() })
        #expect(waitUntil(timeout: 30, interval: 0.001) { firstSawSecond.value != nil })
        #expect(firstSawSecond.value == true)
        #expect(try first.marks().map(\.mark) == ["a"] && second.marks().map(\.mark) == ["b"])
    }

    /// A batch no one hurries is done once its lingering is over.
    @Test func aBatchNoOneHurriesIsDoneOnceItsLingeringEnds() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let owner = try Owner(scratch, "alone")
        let syncer = try FolderSyncer(name: "test-sync", linger: .milliseconds(20))
        defer { syncer.stop() }
        let answered = Guarded(0)
        syncer.submit(owner.batch("lone") { _ in answered.update { $0 += 1 } })
        #expect(waitUntil(timeout: 10, interval: 0.001) { answered.value == 1 })
        #expect(try owner.marks().map(\.mark) == ["lone"])
    }

    /// A syncer stopped already (its owner's run over) does a batch handed in on the calling thread, at once.
    @Test func aStoppedSyncerDoesABatchOnTheCallingThread() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let owner = try Owner(scratch, "late")
        let syncer = try FolderSyncer(name: "test-sync")
        syncer.stop()
        let caller = pthread_self()
        let answered = Guarded<[Bool]>([])
        syncer.submit(
            owner.batch("late", durable: true) { result in
                let here = pthread_equal(pthread_self(), caller) != 0
                answered.update { $0.append(here && (try? result.get())?.durable == true) }
            })
        #expect(answered.value == [true])
        #expect(try owner.marks().map(\.mark) == ["late"])
    }

    /// A folder whose fsync fails (a pipe: EINVAL) fails every batch waiting with it, and their records are not
    /// appended; another owner's batch goes on.
    @Test func aFailedFsyncFailsItsBatchesAndAppendsNothing() throws {
        let scratch = try Scratch.withInbox()
        defer { scratch.remove() }
        let failing = try Owner(scratch, "failing")
        let other = try Owner(scratch, "other")
        var ends: [CInt] = [0, 0]
        try #require(pipe(&ends) == 0)
        let pipeEnd = SharedDescriptor(FileDescriptor(owning: ends[0]))
        defer { close(ends[1]) }
        let syncer = try FolderSyncer(name: "test-sync")
        let failures = Guarded<[String]>([])
        let successes = Guarded(0)
        let answered = DispatchSemaphore(value: 0)
        let record: @Sendable (Result<FolderSyncer.Appended, ContainerError>) -> Void = { result in
            switch result {
            case .success: successes.update { $0 += 1 }
            case .failure(let error): failures.update { $0.append(error.message) }
            }
            answered.signal()
        }
        syncer.submit(failing.batch("x", folders: [failing.folder, pipeEnd], done: record))
        syncer.submit(other.batch("y", done: record))
        for _ in 0..<2 { answered.wait() }
        syncer.stop()

        #expect(successes.value == 1)
        #expect(failures.value.count == 1)
        #expect(failures.value.first?.contains(failing.log.directory) == true, "\(failures.value)")
        #expect(try failing.marks().isEmpty)
        #expect(try other.marks().map(\.mark) == ["y"])
    }

    /// The answers come in order, a take that waits gets one put from another thread, and a take that does not wait
    /// looks at the list alone: no sleep in the kernel (a context switch each) when nothing came, as a semaphore's
    /// wait with no time to wait had on every look at 1,000 files/s.
    @Test func answersComeInOrderAndALookThatDoesNotWaitNeverSleeps() throws {
        let answers = FolderSyncer.Answers()
        let switchesBefore = try voluntaryContextSwitches()
        for _ in 0..<1_000 { #expect(answers.take(waiting: false) == nil) }
        #expect(try voluntaryContextSwitches() - switchesBefore < 50)

        answers.put(.success(FolderSyncer.Appended(lastSeq: 1, durable: true)))
        answers.put(.success(FolderSyncer.Appended(lastSeq: 2, durable: false)))
        #expect(try answers.take(waiting: false)?.get().lastSeq == 1)
        #expect(try answers.take(waiting: true)?.get().lastSeq == 2)
        #expect(answers.take(waiting: false) == nil)
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(20)) {
            answers.put(.success(FolderSyncer.Appended(lastSeq: 3, durable: true)))
        }
        #expect(try answers.take(waiting: true)?.get().lastSeq == 3)
        #expect(answers.take(waiting: false) == nil)
    }
}

/// How many times this thread gave up the processor of its own accord (`voluntary_ctxt_switches`).
private func voluntaryContextSwitches() throws -> Int {
    let status = try String(contentsOfFile: "/proc/thread-self/status", encoding: .utf8)
    let line = try #require(status.split(separator: "\n").first { $0.hasPrefix("voluntary_ctxt_switches:") })
    return try #require(Int(line.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)))
}
