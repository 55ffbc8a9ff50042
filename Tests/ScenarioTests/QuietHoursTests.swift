import Foundation
import Postgres
import ScenarioEngine
import Testing
import TestSupport

/// Quiet hours: the inbox row at once, the push when the window ends (in the user's local time), and
/// never a push that would outlive its notification.
@Suite struct QuietHoursTests {
    static func at(_ iso: String) -> Date { ISO8601DateFormatter().date(from: iso)! }
    static let nightWindow = (start: 22 * 3600, end: 7 * 3600)

    @Test func theWindowEndsAtTheNextLocalEndTime() {
        // 23:30 in Oslo (summer): until 07:00 the next morning.
        #expect(QuietHours.end(of: Self.nightWindow, at: Self.at("2026-06-15T21:30:00Z"), zone: "Europe/Oslo") == Self.at("2026-06-16T05:00:00Z"))
        // 03:00 in Oslo: the same morning.
        #expect(QuietHours.end(of: Self.nightWindow, at: Self.at("2026-06-16T01:00:00Z"), zone: "Europe/Oslo") == Self.at("2026-06-16T05:00:00Z"))
        // Noon: outside.
        #expect(QuietHours.end(of: Self.nightWindow, at: Self.at("2026-06-16T10:00:00Z"), zone: "Europe/Oslo") == nil)
        // A window within one day.
        #expect(QuietHours.end(of: (9 * 3600, 17 * 3600), at: Self.at("2026-06-16T08:00:00Z"), zone: "Europe/Oslo") == Self.at("2026-06-16T15:00:00Z"))
    }

    /// PostgreSQL's `time` takes 24:00 (the end of the day): a window 22:00–24:00 ends at midnight, and one
    /// from 24:00 starts at midnight. 86,400 seconds matched no clock time, so such a push went out inside
    /// the window it was meant to wait out.
    @Test func twentyFourHundredIsMidnight() {
        // 23:30 in Oslo (summer), window 22:00–24:00: until midnight.
        #expect(QuietHours.end(of: (22 * 3600, 24 * 3600), at: Self.at("2026-06-15T21:30:00Z"), zone: "Europe/Oslo") == Self.at("2026-06-15T22:00:00Z"))
        // 01:00, window 24:00–07:00: until 07:00.
        #expect(QuietHours.end(of: (24 * 3600, 7 * 3600), at: Self.at("2026-06-15T23:00:00Z"), zone: "Europe/Oslo") == Self.at("2026-06-16T05:00:00Z"))
        // 00:00–24:00 is no window at all (start and end the same instant), not a day that never ends.
        #expect(QuietHours.end(of: (0, 24 * 3600), at: Self.at("2026-06-15T10:00:00Z"), zone: "Europe/Oslo") == nil)
    }

    @Test func theDaysClocksChangeInOsloEndAtOneWellDefinedInstant() {
        let window = (start: 22 * 3600, end: 2 * 3600 + 30 * 60) // 22:00–02:30
        // 2026-03-29: 02:00 CET jumps to 03:00 CEST, so 02:30 never happens: the first instant after the gap.
        #expect(QuietHours.end(of: window, at: Self.at("2026-03-29T00:30:00Z"), zone: "Europe/Oslo") == Self.at("2026-03-29T01:00:00Z"))
        // 2026-10-25: 03:00 CEST goes back to 02:00 CET, so 02:30 happens twice: the first one.
        #expect(QuietHours.end(of: window, at: Self.at("2026-10-24T23:00:00Z"), zone: "Europe/Oslo") == Self.at("2026-10-25T00:30:00Z"))
        // Inside the repeated hour's second pass (02:10 CET, after 02:30 CEST has gone by): the window ends at
        // 02:30 CET, twenty minutes on, not at tomorrow's 02:30.
        #expect(QuietHours.end(of: window, at: Self.at("2026-10-25T01:10:00Z"), zone: "Europe/Oslo") == Self.at("2026-10-25T01:30:00Z"))
        // An ordinary night's end on either day.
        #expect(QuietHours.end(of: Self.nightWindow, at: Self.at("2026-03-28T22:00:00Z"), zone: "Europe/Oslo") == Self.at("2026-03-29T05:00:00Z"))
        #expect(QuietHours.end(of: Self.nightWindow, at: Self.at("2026-10-24T22:00:00Z"), zone: "Europe/Oslo") == Self.at("2026-10-25T06:00:00Z"))
    }

    /// A window that begins inside the repeated hour (02:30–07:00) began at its first pass, 02:30 summer time: at
    /// 02:10 winter time, forty minutes later, it is inside, not open for an hour until the clock reads 02:30
    /// again. Before and after, as any night.
    @Test func aWindowBegunInTheRepeatedHoursFirstPassHoldsThroughItsSecond() {
        let window = (start: 2 * 3600 + 30 * 60, end: 7 * 3600) // 02:30–07:00
        #expect(QuietHours.end(of: window, at: Self.at("2026-10-25T00:20:00Z"), zone: "Europe/Oslo") == nil, "02:20 summer time: not begun")
        #expect(QuietHours.end(of: window, at: Self.at("2026-10-25T00:40:00Z"), zone: "Europe/Oslo") == Self.at("2026-10-25T06:00:00Z"))
        #expect(QuietHours.end(of: window, at: Self.at("2026-10-25T01:10:00Z"), zone: "Europe/Oslo") == Self.at("2026-10-25T06:00:00Z"), "02:10 winter time")
        #expect(QuietHours.end(of: window, at: Self.at("2026-10-25T01:40:00Z"), zone: "Europe/Oslo") == Self.at("2026-10-25T06:00:00Z"))
        #expect(QuietHours.end(of: window, at: Self.at("2026-10-25T06:10:00Z"), zone: "Europe/Oslo") == nil, "07:10: ended")
        #expect(QuietHours.end(of: window, at: Self.at("2026-06-15T23:00:00Z"), zone: "Europe/Oslo") == nil, "01:00 on a summer night")
        #expect(QuietHours.end(of: window, at: Self.at("2026-06-16T00:30:00Z"), zone: "Europe/Oslo") == Self.at("2026-06-16T05:00:00Z"))
    }

    /// A window that lies inside the hour clocks skip (02:00–03:00, 02:15–02:45 on 2026-03-29 in Oslo) never
    /// happens that night: after the gap the clock reads outside it, so nothing waits. Its start read as the
    /// first instant after the gap made every push of the rest of that day wait for the next night's end.
    @Test(arguments: [(2 * 3600, 3 * 3600), (2 * 3600 + 15 * 60, 2 * 3600 + 45 * 60), (2 * 3600 + 30 * 60, 6 * 3600)])
    func aWindowStartingInTheSkippedHourHoldsNothingAfterItsEnd(start: Int, end: Int) {
        let window = (start: start, end: end)
        for instant in ["2026-03-29T09:00:00Z", "2026-03-29T12:00:00Z", "2026-03-29T20:30:00Z"] {
            #expect(QuietHours.end(of: window, at: Self.at(instant), zone: "Europe/Oslo") == nil, "\(instant)")
        }
        // The day before and after, as any day.
        #expect(QuietHours.end(of: window, at: Self.at("2026-03-28T12:00:00Z"), zone: "Europe/Oslo") == nil)
        #expect(QuietHours.end(of: window, at: Self.at("2026-03-30T12:00:00Z"), zone: "Europe/Oslo") == nil)
    }

    /// A window that starts in the gap and ends after it holds from the gap's end (03:00 summer time) to its end.
    @Test func aWindowStartingInTheSkippedHourHoldsFromTheGapToItsEnd() {
        let window = (start: 2 * 3600 + 30 * 60, end: 6 * 3600) // 02:30–06:00
        #expect(QuietHours.end(of: window, at: Self.at("2026-03-29T01:30:00Z"), zone: "Europe/Oslo") == Self.at("2026-03-29T04:00:00Z"), "03:30 summer time")
        #expect(QuietHours.end(of: window, at: Self.at("2026-03-29T04:30:00Z"), zone: "Europe/Oslo") == nil, "06:30")
    }
}

/// Quiet hours through the jobs: the organization's window, a user's own, the dry run, expiry.
@Suite struct QuietHoursJobTests {
    let db: TestDatabase
    let f: Fixtures
    let org: UUID
    /// 23:30 in Oslo on a summer evening.
    static let evening = QuietHoursTests.at("2026-06-15T21:30:00Z")

    init() throws {
        db = try TestCluster.shared().makeDatabase()
        f = try Fixtures(db, now: QuietHoursJobTests.evening)
        org = try f.organization("Org")
        try f.connection.execute("INSERT INTO organization_delivery_policies (organization_id, quiet_hours_start, quiet_hours_end) VALUES (\(org), '22:00', '07:00')")
    }

    func nextAttempts(_ user: UUID) throws -> [String] {
        try f.connection.query("""
            SELECT to_char(q.next_attempt_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') FROM deliveries d
              JOIN delivery_queue q ON q.delivery_id = d.id JOIN notifications n ON n.id = d.notification_id WHERE n.user_id = \(user)
            """).map { try $0.decode(0) }
    }

    @Test func aPushDecidedInQuietHoursIsStoredAtOnceAndWaitsForTheMorning() throws {
        let kari = try f.mentor(org, "Kari", lastActivityDaysAgo: 20)
        let plan = try Jobs.inactivityCheck(db, now: f.now, ["--dry-run"])
        #expect(plan.stdout.contains("DEFER the push until 2026-06-16T05:00:00Z (quiet hours)"), "\(plan.stdout)")
        #expect(try Jobs.inactivityCheck(db, now: f.now).status == 0)
        #expect(try f.inbox(kari).count == 1, "in the inbox at once")
        #expect(try nextAttempts(kari) == ["2026-06-16T05:00:00Z"], "07:00 in Oslo")
        #expect(try f.decisions(kari) == ["notified:deferred_quiet_hours"])
    }

    /// A window of the whole day (00:00–24:00: PostgreSQL's `time` takes 24:00) is refused like an empty one
    /// (migration 0029): it passed 0010's check and was read as no window at all, so pushes went out all day.
    /// 22:00–24:00 and 24:00–07:00 are still windows.
    @Test func theDatabaseRefusesAWindowOfTheWholeDay() throws {
        let owl = try f.mentor(org, "Night owl", lastActivityDaysAgo: 20)
        func refused(_ statement: Query) -> Bool {
            do { try f.connection.execute(statement) } catch let error as PostgresError { return error.sqlState == "23514" } catch { return false }
            return false
        }
        for (start, end) in [("00:00", "24:00"), ("24:00", "00:00"), ("24:00", "24:00"), ("07:00", "07:00")] {
            #expect(refused("INSERT INTO push_notification_configs (user_id, quiet_hours_start, quiet_hours_end) VALUES (\(owl), \(start)::time, \(end)::time)"),
                    "\(start)–\(end)")
            #expect(refused("UPDATE organization_delivery_policies SET quiet_hours_start = \(start)::time, quiet_hours_end = \(end)::time"), "\(start)–\(end)")
            #expect(try f.connection.query("SELECT count(*) FROM push_notification_configs").first!.decode(0, as: Int.self) == 0)
        }
        try f.connection.execute("INSERT INTO push_notification_configs (user_id, quiet_hours_start, quiet_hours_end) VALUES (\(owl), '22:00', '24:00')")
        try f.connection.execute("UPDATE organization_delivery_policies SET quiet_hours_start = '24:00', quiet_hours_end = '07:00'")
    }

    @Test func aUsersOwnWindowBeatsTheOrganizations() throws {
        let owl = try f.mentor(org, "Night owl", lastActivityDaysAgo: 20)
        try f.connection.execute("INSERT INTO push_notification_configs (user_id, quiet_hours_start, quiet_hours_end) VALUES (\(owl), '01:00', '06:00')")
        #expect(try Jobs.inactivityCheck(db, now: f.now).status == 0)
        let due: [Bool] = try f.connection.query("""
            SELECT q.next_attempt_at <= \(f.now) FROM deliveries d JOIN delivery_queue q ON q.delivery_id = d.id
              JOIN notifications n ON n.id = d.notification_id WHERE n.user_id = \(owl)
            """).map { try $0.decode(0) }
        #expect(due == [true], "not in their own window: due at once (as of the run, not deferred to their 06:00)")
        #expect(try f.decisions(owl) == ["notified:notified"])
    }

    @Test func aNotificationThatExpiresBeforeTheWindowEndsGoesToTheInboxOnly() throws {
        // The overdue digest expires at local midnight, before 07:00.
        let linda = try f.user(org, "Linda", role: "coordinator")
        try f.device(linda)
        let ola = try f.mentor(org, "Ola", lastActivityDaysAgo: 1)
        try f.scope(org, coordinator: linda, mentor: ola)
        try f.assignment(org, mentor: ola, coordinator: linda, dispatchedDaysAgo: 12)
        let result = try Jobs.run("overdue-digest", ["--now", Jobs.iso(f.now)], database: db)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(try f.inbox(linda).count == 1)
        #expect(try nextAttempts(linda).isEmpty, "no push that would outlive its notification")
        #expect(try f.decisions(linda) == ["notified:inbox_only_quiet_hours"])
    }
}
