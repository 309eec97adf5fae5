import AppContainer
import Glibc

/// The one line a long clean or import keeps up to date on a terminal, `inbox: cleaning… 53,120 entries
/// checked`, redrawn in place with `\r` at most once per `interval`. Nothing is written when the output is not
/// a terminal, nor by a run that ends within the first `interval`.
package final class ProgressLine {
    /// Whether the output is a terminal: nothing is drawn when it is not.
    package let isTerminal: Bool
    /// The least time between two redraws.
    package let interval: Duration
    private let write: (String) -> Void
    private let clock: () -> Duration
    private let start: Duration
    private var lastDrawn: Duration?
    private var shown = false

    /// - Parameters:
    ///   - isTerminal: whether to draw at all.
    ///   - clock: a monotonic time; the default is `ContinuousClock`'s.
    ///   - write: writes text to the terminal as it is, without adding a newline.
    package init(
        isTerminal: Bool, interval: Duration = .milliseconds(100), clock: (() -> Duration)? = nil,
        write: @escaping (String) -> Void
    ) {
        self.isTerminal = isTerminal
        self.interval = interval
        let origin = ContinuousClock.now
        let clock = clock ?? { ContinuousClock.now - origin }
        self.clock = clock
        self.write = write
        start = clock()
    }

    /// Progress on standard error, drawn only when it is a terminal (`isatty(2)`).
    package static func standardError() -> ProgressLine {
        ProgressLine(isTerminal: isatty(STDERR_FILENO) == 1) { text in
            let output = FileDescriptor(owning: STDERR_FILENO)
            try? output.writeAll(Array(text.utf8))
            _ = output.release()
        }
    }

    /// Redraws the line with `text` when `interval` has passed since it was last drawn (or since the start).
    package func draw(_ text: @autoclosure () -> String) {
        guard isTerminal else { return }
        let now = clock()
        guard now - (lastDrawn ?? start) >= interval else { return }
        lastDrawn = now
        shown = true
        write("\rinbox: " + text())
    }

    /// Erases the line, if drawn, so other output can follow; the next redraw brings it back.
    package func clear() {
        guard shown else { return }
        shown = false
        write("\r\u{1B}[K")
    }

    /// `53120` as `53,120`.
    package static func grouped(_ number: Int) -> String {
        var digits = String(number.magnitude)
        var index = digits.endIndex
        while digits.distance(from: digits.startIndex, to: index) > 3 {
            index = digits.index(index, offsetBy: -3)
            digits.insert(",", at: index)
        }
        return number < 0 ? "-" + digits : digits
    }
}
