import Foundation

/// Wall-clock questions about an instant in a time zone, answered once per (zone, instant, question) and
/// remembered: a run asks them of every candidate, nearly always with the same `now` and a handful of
/// zones, and Foundation's calendar arithmetic costs microseconds a call (making a `TimeZone` from its
/// identifier costs more). The memory is small and bounded (cleared when it fills).
public enum LocalClock {
    /// A Gregorian calendar in `zone` (an unknown zone reads as UTC).
    public static func calendar(_ zone: String) -> Calendar {
        calendars.value(for: zone) {
            var calendar = Calendar(identifier: .gregorian)
            calendar.timeZone = TimeZone(identifier: zone) ?? TimeZone(identifier: "UTC")!
            return calendar
        }
    }

    /// Whether `zone` names a time zone we know (remembered): a row written before the database checked it
    /// may hold a typo.
    public static func isKnown(_ zone: String) -> Bool {
        known.value(for: zone) { TimeZone(identifier: zone) != nil }
    }

    /// The date `instant` falls on in `zone`, as yyyy-mm-dd.
    public static func day(of instant: Date, zone: String) -> String {
        days.value(for: Key(zone: zone, instant: instant, start: -1, end: -1)) {
            let parts = calendar(zone).dateComponents([.year, .month, .day], from: instant)
            return String(format: "%04d-%02d-%02d", parts.year!, parts.month!, parts.day!)
        }
    }

    /// `compute`'s answer for a quiet-hours window at an instant, remembered.
    static func windowEnd(_ window: (start: Int, end: Int), at instant: Date, zone: String, _ compute: () -> Date?) -> Date? {
        ends.value(for: Key(zone: zone, instant: instant, start: window.start, end: window.end), compute)
    }

    struct Key: Hashable {
        var zone: String
        var instant: Date
        var start: Int
        var end: Int
    }

    private static let calendars = Memo<String, Calendar>()
    private static let known = Memo<String, Bool>()
    private static let days = Memo<Key, String>()
    private static let ends = Memo<Key, Date?>()

    final class Memo<K: Hashable, V>: @unchecked Sendable {
        private let lock = NSLock()
        private var values: [K: V] = [:]

        func value(for key: K, _ compute: () -> V) -> V {
            lock.lock()
            if let value = values[key] {
                lock.unlock()
                return value
            }
            lock.unlock()
            let value = compute()
            lock.lock()
            if values.count >= 4096 { values.removeAll(keepingCapacity: true) }
            values[key] = value
            lock.unlock()
            return value
        }
    }
}
