import Foundation
import Postgres

/// Days since an event as a person counts them: calendar days on the wall of a time zone. An assignment
/// dispatched at 14:00 on the 1st is 10 days old all through the 11th, so the daily run of the 11th reminds,
/// whatever its hour (counted in 24-hour periods, a run at 10:15 on the 11th found 9 days and 20 hours,
/// and the reminder came on the 12th: a day late).
public enum ElapsedDays {
    /// Local days from the day `start` falls on to the day `end` falls on, in `zone` (an unknown zone reads
    /// as UTC): 0 on the same day, 1 from any time yesterday.
    public static func between(_ start: Date, _ end: Date, zone: String) -> Int {
        dayNumber(end, zone: zone) - dayNumber(start, zone: zone)
    }

    /// The local date `days` days after the day `instant` falls on, in `zone`, as yyyy-mm-dd.
    public static func day(_ days: Int, after instant: Date, zone: String) -> String {
        let calendar = LocalClock.calendar(zone)
        return LocalClock.day(of: calendar.date(byAdding: .day, value: days, to: instant) ?? instant, zone: zone)
    }

    /// The start of the local day `days` days before the day `now` falls on, in `zone`: an instant before it
    /// fell at least `days + 1` days before `now`, as `between` counts.
    public static func startOfDay(_ days: Int, before now: Date, zone: String) -> Date {
        // The day first, then its start: where clocks spring forward at midnight (Santiago, Havana, Beirut) the
        // day of the change starts at 01:00, and days counted back from that instant kept its 01:00, an hour late
        // (a dispatch at 00:30 counted a day early).
        let calendar = LocalClock.calendar(zone)
        let day = calendar.date(byAdding: .day, value: -days, to: calendar.startOfDay(for: now)) ?? now.addingTimeInterval(-Double(days) * 86_400)
        return calendar.startOfDay(for: day)
    }

    /// An SQL condition: the instant `column` fell on a local day at least `days` (an SQL integer) before
    /// the local day of `now`, in `zone` (an SQL time zone name PostgreSQL knows), as `between` counts. The
    /// first comparison, in 24-hour periods less one day and a daylight-saving shift at most, holds for every
    /// row the second does: an index on `column` serves it, and the time zone is worked out only for the rows
    /// it lets through.
    public static func atLeast(_ days: Query, before now: Date, since column: Query, zone: Query) -> Query {
        """
        (\(possiblyAtLeast(days, before: now, since: column))
         AND \(column) < ((\(now)::timestamptz AT TIME ZONE \(zone))::date - (\(days) - 1))::timestamp AT TIME ZONE \(zone))
        """
    }

    /// `atLeast`'s first comparison alone, for a query that narrows its rows by an index before it knows
    /// their time zone: true for every row `atLeast` is true for, and for a few more.
    public static func possiblyAtLeast(_ days: Query, before now: Date, since column: Query) -> Query {
        "\(column) < \(now)::timestamptz - make_interval(days => \(days) - 1) + interval '2 hours'"
    }

    /// Days since 1970-01-01 on the wall of `zone` at `instant`.
    static func dayNumber(_ instant: Date, zone: String) -> Int {
        let offset = LocalClock.calendar(zone).timeZone.secondsFromGMT(for: instant)
        return Int(((instant.timeIntervalSince1970 + Double(offset)) / 86_400).rounded(.down))
    }
}
