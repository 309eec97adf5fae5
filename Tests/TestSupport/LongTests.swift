import Foundation
import Testing

/// A test that runs in `make test-system` and not in `make test` (ARCHITECTURE.md, "Folders"): a sweep that kills or
/// fails a process at every call, a test of thousands of files or containers, a FUSE crash sweep, the consumer
/// package's build. `make test` stays the quick suite every change runs; `make test-system` sets
/// `INBOX_LONG_TESTS=1` and picks these out by name: `@Test(.long…)` or `@Suite(.long…)` on one line, the function
/// or type named on the lines just after (the Makefile reads them so).
extension Trait where Self == ConditionTrait {
    package static var long: Self {
        .enabled(
            if: ProcessInfo.processInfo.environment["INBOX_LONG_TESTS"] == "1", "a long test: make test-system runs it")
    }
}
