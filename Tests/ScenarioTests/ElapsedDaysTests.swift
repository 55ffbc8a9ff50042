import Foundation
import Postgres
import ScenarioEngine
import Testing
import TestSupport

/// Days since an event are calendar days on the recipient's clock, as a person counts them: the daily run of
/// the tenth day reminds, whatever its hour. The database's condition and the job's count agree.
struct ElapsedDaysTests {
    static func instant(_ text: String) throws -> Date { try #require(Timestamp.parse(text)) }

    /// The time review's case: dispatched 14:00 on the 1st, the run at 10:15 on the 11th found 9 days and 20
    /// hours, and the 10-day reminder came on the 12th.
    @Test func aDispatchAtTwoOnTheFirstIsTenDaysOldAllThroughTheEleventh() throws {
        let dispatched = try Self.instant("2026-11-01 14:00:00+01")
        #expect(ElapsedDays.between(dispatched, try Self.instant("2026-11-11 10:15:00+01"), zone: "Europe/Oslo") == 10)
        #expect(ElapsedDays.between(dispatched, try Self.instant("2026-11-11 00:00:01+01"), zone: "Europe/Oslo") == 10)
        #expect(ElapsedDays.between(dispatched, try Self.instant("2026-11-11 23:59:59+01"), zone: "Europe/Oslo") == 10)
        #expect(ElapsedDays.between(dispatched, try Self.instant("2026-11-10 23:59:59+01"), zone: "Europe/Oslo") == 9)
        #expect(ElapsedDays.between(dispatched, dispatched, zone: "Europe/Oslo") == 0)
    }

    /// The day is the zone's: 23:30 UTC on the 4th is already the 5th in Oslo.
    @Test func theDayIsTheOneOnTheWallOfTheZone() throws {
        let lateEvening = try Self.instant("2026-11-04 23:30:00+00")
        let morning = try Self.instant("2026-11-05 09:00:00+00")
        #expect(ElapsedDays.between(lateEvening, morning, zone: "Europe/Oslo") == 0)
        #expect(ElapsedDays.between(lateEvening, morning, zone: "UTC") == 1)
        #expect(ElapsedDays.day(10, after: lateEvening, zone: "Europe/Oslo") == "2026-11-15")
        #expect(ElapsedDays.day(10, after: lateEvening, zone: "UTC") == "2026-11-14")
    }

    /// The spring clock change makes a day of 23 hours: noon to 11:00 the next day (22 hours) is a day.
    @Test func aDayOfTwentyThreeHoursIsADay() throws {
        #expect(ElapsedDays.between(try Self.instant("2026-03-28 12:00:00+01"), try Self.instant("2026-03-29 11:00:00+02"), zone: "Europe/Oslo") == 1)
        #expect(ElapsedDays.startOfDay(1, before: try Self.instant("2026-03-30 09:00:00+02"), zone: "Europe/Oslo")
                == (try Self.instant("2026-03-29 00:00:00+01")))
    }

    /// Where clocks spring forward at midnight (Chile, 2026-09-06), that day starts at 01:00: the cut counted back
    /// from it kept the 01:00, so an assignment dispatched at 00:30 nine days before was counted ten days old
    /// (the overdue digest a day early, while assignment-follow-up, counting in SQL, rightly waited).
    @Test func daysCountedBackFromADayThatStartsAtOneStartAtMidnight() throws {
        let now = try Self.instant("2026-09-06 13:05:00+00")
        #expect(ElapsedDays.startOfDay(9, before: now, zone: "America/Santiago") == (try Self.instant("2026-08-28 00:00:00-04")))
        #expect(ElapsedDays.startOfDay(0, before: now, zone: "America/Santiago") == (try Self.instant("2026-09-06 01:00:00-03")))
    }

    /// `ElapsedDays.atLeast` as PostgreSQL runs it says what `between` says, for every pair of a grid of
    /// instants around a clock change, in zones with half-hour, three-quarter-hour and two-hour offsets and
    /// shifts, and for thresholds of 1 and 10 days; and `startOfDay` is its cut for an organization.
    @Test func theDatabaseCountsAsTheJobDoes() throws {
        let db = try TestCluster.shared().makeDatabase()
        let connection = try db.connect()
        let zones = ["Europe/Oslo", "America/St_Johns", "Pacific/Chatham", "Antarctica/Troll", "UTC"]
        let start = try Self.instant("2026-03-10 00:00:00+00")
        let instants = stride(from: 0.0, to: 30 * 86_400, by: 97 * 60).map { start.addingTimeInterval($0) }
        var disagreements: [String] = []
        for now in try ["2026-03-29 00:40:00+00", "2026-03-29 23:10:00+00", "2026-04-01 11:00:00+00"].map(Self.instant) {
            let rows = try connection.query("""
                SELECT t, z, d, \(ElapsedDays.atLeast("d", before: now, since: "t", zone: "z"))
                  FROM unnest(\(PostgresArray(instants))::timestamptz[]) t, unnest(\(PostgresArray(zones))::text[]) z, unnest(ARRAY[1, 10]) d
                """)
            for row in rows {
                let (instant, zone, days, said): (Date, String, Int, Bool) = (try row.decode(0), try row.decode(1), try row.decode(2), try row.decode(3))
                let counted = ElapsedDays.between(instant, now, zone: zone) >= days
                let cut = instant < ElapsedDays.startOfDay(days - 1, before: now, zone: zone)
                if said != counted || cut != counted { disagreements.append("\(zone) \(instant) → \(now), \(days) days: database \(said), job \(counted), cut \(cut)") }
            }
            #expect(rows.count == instants.count * zones.count * 2)
        }
        #expect(disagreements.isEmpty, "\(disagreements.count): \(disagreements.prefix(5))")
    }
}
