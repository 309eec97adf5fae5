import AppContainer
import Glibc
import InboxKit
import Testing

// SyscallFaultPlan is in debug builds only (AppContainer/SyscallFaults.swift); `swift build -c release` builds this
// target too.
#if DEBUG
    /// Runs an operation once counting its system calls (N), then again for every call i in 1…N and every error that
    /// fits that call, on a fresh setup each time with call i failing, and checks the invariants after each run.
    package struct FaultSweep<Context> {
        /// A fresh, throwaway world for one run.
        package let setup: () throws -> Context
        /// The operation under test; what it throws is its outcome.
        package let operation: (Context) throws -> Void
        /// The invariants, given the outcome and the plan (whose `summary` says which call failed).
        package let check: (Context, Result<Void, any Error>, SyscallFaultPlan) throws -> Void
        package let teardown: (Context) -> Void

        package init(
            setup: @escaping () throws -> Context, operation: @escaping (Context) throws -> Void,
            check: @escaping (Context, Result<Void, any Error>, SyscallFaultPlan) throws -> Void,
            teardown: @escaping (Context) -> Void
        ) {
            self.setup = setup
            self.operation = operation
            self.check = check
            self.teardown = teardown
        }

        /// The errors a sweep injects; EXDEV only into the calls that can return it.
        package static var errors: [Errno] {
            [ENOSPC, EIO, EXDEV, EACCES, EPERM, EROFS, EMFILE, EINTR].map(Errno.init)
        }

        package static func fits(_ error: Errno, _ call: String) -> Bool {
            error != .crossDevice || ["renameat2", "linkat", "copy_file_range"].contains(call)
        }

        /// Runs the sweep; returns how many faulty runs it made (and prints it, with `label`). With `collapsingRepeats`,
        /// of calls of one name in a row (a loop's) only the first and the last are made to fail. With a `lane`, the
        /// watcher's worker threads run as threads, and only the calls of the threads of that name are counted and
        /// failed (`SyscallFaultPlan.lane`): how many a run makes there may differ from the counting run's.
        @discardableResult
        package func run(
            _ label: String, only: String? = nil, errors: [Errno] = Self.errors,
            forcing: (name: String, error: Errno)? = nil, collapsingRepeats: Bool = false, lane: String? = nil
        ) throws -> Int {
            let counting = SyscallFaultPlan(only: only, forcing: forcing, threaded: lane != nil, lane: lane)
            try once(counting)
            let calls = counting.calls
            #expect(!calls.isEmpty, "\(label): the operation made no counted call")
            var runs = 0
            for (offset, call) in calls.enumerated() {
                if collapsingRepeats, offset > 0, offset < calls.count - 1, calls[offset - 1] == call,
                    calls[offset + 1] == call
                {
                    continue
                }
                for error in errors where Self.fits(error, call) {
                    try once(
                        SyscallFaultPlan(
                            failing: offset + 1, only: only, with: error, forcing: forcing, threaded: lane != nil,
                            lane: lane))
                    runs += 1
                }
            }
            print("fault sweep \(label): \(calls.count) calls, \(runs) faulty runs")
            return runs
        }

        private func once(_ plan: SyscallFaultPlan) throws {
            let context = try setup()
            defer { teardown(context) }
            let outcome = Result { try plan.run { try operation(context) } }
            try check(context, outcome, plan)
        }
    }

    /// The outcome's error is clear: a `ContainerError` of one line naming the injected error. A run may also
    /// succeed (the fault retried, absorbed by a fallback, or in a call whose failure is harmless).
    package func expectClearError(
        _ outcome: Result<Void, any Error>, _ plan: SyscallFaultPlan, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        guard case .failure(let error) = outcome else { return }
        guard let error = error as? ContainerError else {
            Issue.record("\(plan.summary): not a ContainerError: \(error)", sourceLocation: sourceLocation)
            return
        }
        #expect(plan.injected != nil, "\(plan.summary): failed with no fault: \(error)", sourceLocation: sourceLocation)
        #expect(
            error.message.contains(plan.error.description) && !error.message.contains("\n"),
            "\(plan.summary): unclear error: \(error.message)", sourceLocation: sourceLocation)
    }

    /// An injected EINTR is retried by every wrapper but `close`: the operation must succeed.
    package func expectRetriedInterrupt(
        _ outcome: Result<Void, any Error>, _ plan: SyscallFaultPlan, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        let unretried = ["close"]
        guard plan.error == .interrupted, let injected = plan.injected, !unretried.contains(injected.name) else {
            return
        }
        if case .failure(let error) = outcome, !["realpath", "getcwd"].contains(injected.name) {
            Issue.record("\(plan.summary): EINTR was not retried: \(error)", sourceLocation: sourceLocation)
        }
    }
#endif
