import Glibc

/// A point in time as the kernel reports it, printed as RFC 3339 in UTC with milliseconds.
public struct Timestamp: Sendable, Hashable, Comparable {
    /// Seconds since the Unix epoch (`tv_sec`).
    public let seconds: Int64
    /// Nanoseconds past `seconds` (`tv_nsec`).
    public let nanoseconds: Int64

    /// A time of `seconds` since the epoch plus `nanoseconds`.
    public init(seconds: Int64, nanoseconds: Int64) {
        self.seconds = seconds
        self.nanoseconds = nanoseconds
    }

    /// A time as the kernel reports it in a `timespec`.
    package init(_ time: timespec) {
        self.init(seconds: Int64(time.tv_sec), nanoseconds: Int64(time.tv_nsec))
    }

    /// The time as the `*utimens` calls take it.
    package var timespecValue: timespec { timespec(tv_sec: Int(seconds), tv_nsec: Int(nanoseconds)) }

    /// The current wall-clock time.
    public static func now() -> Timestamp {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        return Timestamp(time)
    }

    /// `2026-11-29T16:37:38.123Z`
    public var rfc3339: String {
        var time = time_t(seconds)
        var parts = tm()
        gmtime_r(&time, &parts)
        func pad(_ value: Int32, _ width: Int) -> String {
            let digits = String(value)
            return String(repeating: "0", count: max(0, width - digits.count)) + digits
        }
        let millis = Int32(nanoseconds / 1_000_000)
        return "\(pad(parts.tm_year + 1900, 4))-\(pad(parts.tm_mon + 1, 2))-\(pad(parts.tm_mday, 2))"
            + "T\(pad(parts.tm_hour, 2)):\(pad(parts.tm_min, 2)):\(pad(parts.tm_sec, 2)).\(pad(millis, 3))Z"
    }

    /// Whether this time lies more than `maxAge` seconds before `now`, to the nanosecond: 2.2 s before is more than
    /// 2 s. A time so far back that the difference overflows is older than any age.
    package func isMore(than maxAge: Int64, secondsBefore now: Timestamp) -> Bool {
        let (age, overflow) = now.seconds.subtractingReportingOverflow(seconds)
        if overflow { return seconds < 0 }
        // `nanoseconds` lie in 0..<1e9 on both sides, so the whole seconds decide but for a tie.
        return age > maxAge || age == maxAge && now.nanoseconds > nanoseconds
    }

    /// Earlier first, to the nanosecond.
    public static func < (lhs: Timestamp, rhs: Timestamp) -> Bool {
        (lhs.seconds, lhs.nanoseconds) < (rhs.seconds, rhs.nanoseconds)
    }
}
