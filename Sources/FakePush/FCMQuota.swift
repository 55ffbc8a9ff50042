import Foundation

/// A sliding one-minute window of FCM sends, in one-second buckets.
struct QuotaWindow {
    private var counts = [Int](repeating: 0, count: 60)
    private var seconds = [Int64](repeating: -1, count: 60)

    /// Counts one send at `now` if the window has room; otherwise returns the seconds until it has.
    mutating func admit(now: Date, limit: Int) -> Int? {
        let second = Int64(now.timeIntervalSince1970.rounded(.down))
        var used = 0
        var oldest = second
        for index in 0..<60 where seconds[index] > second - 60 && counts[index] > 0 {
            used += counts[index]
            oldest = min(oldest, seconds[index])
        }
        if used >= limit { return Int(max(1, oldest + 60 - second)) }
        let slot = Int(second % 60)
        if seconds[slot] != second {
            seconds[slot] = second
            counts[slot] = 0
        }
        counts[slot] += 1
        return nil
    }
}
