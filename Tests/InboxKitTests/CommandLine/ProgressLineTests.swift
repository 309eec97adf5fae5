import Testing

@testable import InboxKit

/// The progress line of a long clean or import (`ProgressLine`), on a clock of the test's own.
@Suite struct ProgressLineTests {
    @Test func progressIsDrawnOnATerminalAtMostTenTimesASecond() {
        let written = Box<[String]>([])
        let time = Box<Duration>(.zero)
        let progress = ProgressLine(isTerminal: true, clock: { time.value }, write: { written.value.append($0) })
        for checked in 1...100_000 {
            time.value += .microseconds(10)  // a second in all
            progress.draw("cleaning… \(ProgressLine.grouped(checked)) entries checked")
        }
        #expect(written.value.count == 10)
        #expect(written.value.first == "\rinbox: cleaning… 10,000 entries checked")
        #expect(written.value.last == "\rinbox: cleaning… 100,000 entries checked")
        progress.clear()
        #expect(written.value.last == "\r\u{1B}[K")

        let quiet = Box<[String]>([])
        let elsewhere = ProgressLine(isTerminal: false, clock: { time.value }, write: { quiet.value.append($0) })
        for checked in 1...100_000 {
            time.value += .microseconds(10)
            elsewhere.draw("cleaning… \(checked) entries checked")
        }
        elsewhere.clear()
        #expect(quiet.value.isEmpty)
    }

    @Test func aShortCleanDrawsNothing() {
        let written = Box<[String]>([])
        let progress = ProgressLine(
            isTerminal: true, clock: { .milliseconds(5) }, write: { written.value.append($0) })
        for checked in 1...1000 { progress.draw("cleaning… \(checked) entries checked") }
        progress.clear()
        #expect(written.value.isEmpty)
    }
}

/// A value the test's closures share.
private final class Box<Value> {
    var value: Value
    init(_ value: Value) { self.value = value }
}
