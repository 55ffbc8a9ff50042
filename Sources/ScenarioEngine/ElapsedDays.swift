import Foundation

extension Date {
    /// Whole days (24-hour periods) from `start` to this moment, as a person counts them: exactly 20 days
    /// after `start` is 20. The interval is rounded to the millisecond first: the job's clock carries
    /// nanoseconds, PostgreSQL keeps microseconds, and a `Date` is a floating-point count of seconds, so an
    /// interval of exactly 20 days can come out a hair short of it, which plain flooring counts as 19.
    public func wholeDays(since start: Date) -> Int {
        let milliseconds = (timeIntervalSince(start) * 1_000).rounded()
        return Int(milliseconds) / 86_400_000
    }
}
