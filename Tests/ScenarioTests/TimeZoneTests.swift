import Foundation
import Postgres
import Testing
import TestSupport

/// Time zones from the database are outside text: a typo written before migration 0016 checked them must not
/// stop a run (PostgreSQL refuses the zone in the daily cap's local day), and is reported.
@Suite struct TimeZoneTests {
    let db: TestDatabase
    let f: Fixtures
    let org: UUID

    init() throws {
        db = try TestCluster.shared().makeDatabase()
        f = try Fixtures(db, now: Date())
        org = try f.organization("Org")
        // A daily cap makes the candidate query count today's pushes in each user's local day.
        try f.connection.execute("INSERT INTO organization_delivery_policies (organization_id, daily_push_cap) VALUES (\(org), 3)")
    }

    @Test func theDatabaseRefusesAnUnknownTimeZone() throws {
        let kari = try f.mentor(org, "Kari", lastActivityDaysAgo: 20)
        #expect(throws: PostgresError.self) { try f.connection.execute("UPDATE users SET time_zone = 'Europe/Olso' WHERE id = \(kari)") }
        #expect(throws: PostgresError.self) { try f.connection.execute("UPDATE organizations SET time_zone = 'Mars/Olympus' WHERE id = \(org)") }
        try f.connection.execute("UPDATE users SET time_zone = 'America/New_York' WHERE id = \(kari)")
    }

    /// Every zone the database accepts means the same to PostgreSQL (the candidate queries' local days, the daily
    /// cap's) and to the jobs (quiet hours, the days counted in a message): 0016 took all of pg_timezone_names,
    /// 600 of them unknown to Foundation (posix/…, right/…, localtime: a user's was then reported on every run,
    /// and push-deliver read it as UTC), and CET, EET, MET and WET, which PostgreSQL reads as fixed abbreviations
    /// and Foundation as zones with summer time (a reminder a day early, saying 13 days). Offsets compared in
    /// winter and in summer.
    @Test func everyZoneTheDatabaseAcceptsMeansTheSameToTheJobs() throws {
        let rows = try f.connection.query("""
            SELECT name, extract(epoch FROM (w AT TIME ZONE name) - (w AT TIME ZONE 'UTC'))::int,
                         extract(epoch FROM (s AT TIME ZONE name) - (s AT TIME ZONE 'UTC'))::int
              FROM time_zone_names, (VALUES ('2026-01-15 12:00Z'::timestamptz, '2026-07-15 12:00Z'::timestamptz)) t(w, s)
             ORDER BY name
            """)
        #expect(rows.count > 300, "the zones are there")
        let winter = Date(timeIntervalSince1970: 1_768_478_400), summer = Date(timeIntervalSince1970: 1_784_116_800)
        var differ: [String] = []
        for row in rows {
            let name: String = try row.decode(0)
            guard let zone = TimeZone(identifier: name) else { differ.append("\(name) (unknown)"); continue }
            let (inWinter, inSummer): (Int, Int) = (try row.decode(1), try row.decode(2))
            if zone.secondsFromGMT(for: winter) != inWinter || zone.secondsFromGMT(for: summer) != inSummer {
                differ.append(name)
            }
        }
        #expect(differ.isEmpty, "\(differ.count): \(differ.filter { !$0.hasPrefix("posix/") }.prefix(60).joined(separator: ", "))")
    }

    /// Names written before the database checked them that it does not hold: a typo, and offsets Foundation
    /// reads as hours east of UTC (GMT+5, UTC+5) while PostgreSQL reads them as POSIX, hours west, or not at all.
    /// The jobs took those as known (their quiet hours five hours east) while the candidate queries and the daily
    /// cap used the organization's zone, and `why` said "unknown".
    static let zonesTheDatabaseDoesNotHold = ["Europe/Olso", "GMT+5", "UTC+5"]

    /// One mentor's zone is unknown: both mentors are reminded (hers with the organization's zone), and the run
    /// says which row to fix and exits 65 (bad data), instead of stopping at her with 70.
    @Test(arguments: zonesTheDatabaseDoesNotHold)
    func aUserWithAnUnknownTimeZoneIsDecidedWithTheOrganizationsAndReported(zone: String) throws {
        let kari = try f.mentor(org, "Kari", lastActivityDaysAgo: 20)
        let per = try f.mentor(org, "Per", lastActivityDaysAgo: 20)
        try f.timeZoneWrittenBeforeValidation("users", kari, zone)
        let result = try Jobs.inactivityCheck(db, now: f.now)
        #expect(result.status == 65, "stderr: \(result.stderr)")
        #expect(result.stderr.contains("\"\(zone)\" is not a known time zone") && result.stderr.contains(kari.uuidString.lowercased()), "\(result.stderr)")
        #expect(result.summary?["unknown_time_zones"] as? Int == 1, "\(result.stdout)")
        #expect(try f.inbox(kari).count == 1)
        #expect(try f.inbox(per).count == 1)
        let slots: Int = try f.connection.query("SELECT count(*) FROM daily_push_slots").first!.decode(0)
        #expect(slots == 2, "both pushes counted on the day")
    }

    /// The same row met by event-notify: the event is decided, not taken again and again by a service that
    /// fails on it.
    @Test func eventNotifyDecidesAnEventOfAUserWithAnUnknownTimeZone() throws {
        let kari = try f.mentor(org, "Kari", lastActivityDaysAgo: 1)
        let linda = try f.user(org, "Linda", role: "coordinator")
        try f.scope(org, coordinator: linda, mentor: kari)
        try f.timeZoneWrittenBeforeValidation("users", kari, "Europe/Olso")
        try f.connection.execute("INSERT INTO assignments (organization_id, mentor_id, coordinator_id, title) VALUES (\(org), \(kari), \(linda), 'Oppdrag')")
        let result = try Jobs.run("event-notify", ["--once"], database: db)
        #expect(result.status == 65, "stderr: \(result.stderr)")
        #expect(try f.inbox(kari).count == 1)
        let pending: Int = try f.connection.query("SELECT count(*) FROM events WHERE processed_at IS NULL").first!.decode(0)
        #expect(pending == 0)
    }

    /// An organization's zone is a typo: its mentors are skipped with a message naming the row (78), as for
    /// invalid settings; another organization's are reminded.
    @Test(arguments: zonesTheDatabaseDoesNotHold)
    func anOrganizationWithAnUnknownTimeZoneIsSkippedWith78(zone: String) throws {
        let other = try f.organization("Other")
        let kari = try f.mentor(org, "Kari", lastActivityDaysAgo: 20)
        let per = try f.mentor(other, "Per", lastActivityDaysAgo: 20)
        try f.timeZoneWrittenBeforeValidation("organizations", org, zone)
        let result = try Jobs.inactivityCheck(db, now: f.now)
        #expect(result.status == 78, "stderr: \(result.stderr)")
        #expect(result.stderr.contains("time_zone \"\(zone)\" is not a known time zone; fix its row in organizations"), "\(result.stderr)")
        #expect(try f.inbox(kari).isEmpty)
        #expect(try f.inbox(per).count == 1)
    }
}
