import Testing

@testable import InboxKit

/// `UnwatchedStreak`: a streak of failed tries to watch again is news once, and so is its end.
@Suite struct UnwatchedStreakTests {
    @Test func theFirstFailureAndTheRescanThatEndsItAreNewsAndNothingBetween() {
        let streak = UnwatchedStreak()
        #expect(!streak.rescanned(overflow: false), "no streak yet")
        #expect(streak.failed())
        #expect(!streak.failed() && !streak.failed(), "the tries after the first are not news")
        #expect(!streak.rescanned(overflow: true), "an overflow's rescan does not end it")
        #expect(streak.rescanned(overflow: false))
        #expect(!streak.rescanned(overflow: false), "ended once")
        #expect(streak.failed(), "a new streak")
    }
}
