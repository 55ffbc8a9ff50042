import Foundation
import Postgres
import ScenarioEngine
import Testing

/// Days since an event are whole days as a person counts them, even where the clock's nanoseconds and
/// PostgreSQL's microseconds disagree by a fraction.
struct ElapsedDaysTests {
    @Test func twentyDaysBeforeNowAsTheDatabaseStoresItIsTwentyDays() throws {
        // The job's `now` carries nanoseconds; the database keeps "now − 20 days" to the microsecond, so the
        // stored moment can lie a fraction of a microsecond after it: flooring that interval gave 19.
        var shortOnes: [Double] = []
        for step in 0..<2_000 {
            let now = Date(timeIntervalSince1970: 1_795_336_215 + Double(step) * 0.000_000_37)
            let stored = try #require(Timestamp.parse(Timestamp.format(now.addingTimeInterval(-20 * 86_400))))
            if now.wholeDays(since: stored) != 20 { shortOnes.append(now.timeIntervalSince1970) }
        }
        #expect(shortOnes.isEmpty, "\(shortOnes.count) counted short, e.g. now = \(shortOnes.prefix(3))")
    }

    @Test func aSecondShortOfTheDayIsTheDayBefore() throws {
        let now = try #require(Timestamp.parse("2026-11-24 23:10:00.000000+00"))
        let start = try #require(Timestamp.parse("2026-11-04 23:10:01.000000+00"))
        #expect(now.wholeDays(since: start) == 19)
        #expect(start.wholeDays(since: start) == 0)
    }
}
