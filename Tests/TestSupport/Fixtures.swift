import Foundation
import Postgres

/// Builds the rows a test needs, with times relative to a fixed `now` that the test then passes
/// to the job with `--now`.
public final class Fixtures {
    public let connection: Connection
    public let now: Date
    private var tokenCounter = 0

    public init(_ database: TestDatabase, now: Date = Fixtures.defaultNow) throws {
        connection = try database.connect()
        self.now = now
    }

    /// 2026-06-15T08:00:00Z: a Monday morning.
    public static let defaultNow = Date(timeIntervalSince1970: 1_781_510_400)

    public func daysAgo(_ days: Double) -> Date { now.addingTimeInterval(-days * 86_400) }

    @discardableResult
    public func organization(_ name: String, locale: String = "nb") throws -> UUID {
        try connection.query("INSERT INTO organizations (name, default_locale) VALUES (\(name), \(locale)) RETURNING id").first!.decode(0)
    }

    /// Sets an organization's rule for a scenario (`settings` is a JSON object).
    public func rule(_ organization: UUID, scenario: String = "inactivity", enabled: Bool? = nil, settings: String = "{}") throws {
        try connection.execute("""
            INSERT INTO organization_scenario_rules (organization_id, scenario, enabled, settings)
            VALUES (\(organization), \(scenario), \(enabled), \(settings)::jsonb)
            """)
    }

    /// An organization's rule as it could have been written before migration 0009 made the database check
    /// settings: the jobs must still refuse it.
    public func ruleWrittenBeforeValidation(_ organization: UUID, scenario: String = "inactivity", settings: String) throws {
        try connection.execute("ALTER TABLE organization_scenario_rules DISABLE TRIGGER organization_scenario_rules_valid")
        defer { _ = try? connection.execute("ALTER TABLE organization_scenario_rules ENABLE TRIGGER organization_scenario_rules_valid") }
        try rule(organization, scenario: scenario, settings: settings)
    }

    /// Sets a time zone the database would refuse today (a row written before migration 0016 checked it).
    public func timeZoneWrittenBeforeValidation(_ table: String, _ id: UUID, _ zone: String) throws {
        precondition(table == "users" || table == "organizations")
        try connection.execute("SET session_replication_role = replica") // no foreign-key checks
        defer { _ = try? connection.execute("SET session_replication_role = origin") }
        if table == "users" {
            try connection.execute("UPDATE users SET time_zone = \(zone) WHERE id = \(id)")
        } else {
            try connection.execute("UPDATE organizations SET time_zone = \(zone) WHERE id = \(id)")
        }
    }

    @discardableResult
    public func user(_ organization: UUID, _ name: String, role: String = "peer_mentor", locale: String? = nil,
                     joinedDaysAgo: Double = 400) throws -> UUID {
        try connection.query("""
            INSERT INTO users (organization_id, role, display_name, locale, joined_at)
            VALUES (\(organization), \(role), \(name), \(locale), \(daysAgo(joinedDaysAgo))) RETURNING id
            """).first!.decode(0)
    }

    /// A peer mentor whose last logged activity was `lastActivityDaysAgo` days before `now`.
    @discardableResult
    public func mentor(_ organization: UUID, _ name: String, lastActivityDaysAgo: Double?, locale: String? = nil,
                       joinedDaysAgo: Double = 400, devices: Int = 1) throws -> UUID {
        let id = try user(organization, name, locale: locale, joinedDaysAgo: joinedDaysAgo)
        if let days = lastActivityDaysAgo { try activity(id, daysAgo: days) }
        for index in 0..<devices { try device(id, provider: index % 2 == 0 ? "apns" : "fcm") }
        return id
    }

    public func activity(_ mentor: UUID, daysAgo days: Double) throws {
        try connection.execute("INSERT INTO activities (mentor_id, occurred_at, logged_at) VALUES (\(mentor), \(daysAgo(days + 1)), \(daysAgo(days)))")
    }

    public func pause(_ mentor: UUID, startedDaysAgo: Double, endsDaysAgo: Double?, reason: String? = nil) throws {
        try connection.execute("""
            INSERT INTO availability_pauses (mentor_id, starts_at, ends_at, reason)
            VALUES (\(mentor), \(daysAgo(startedDaysAgo)), \(endsDaysAgo.map { daysAgo($0) }), \(reason))
            """)
    }

    /// A registered device token: APNs tokens are 64 hex characters, FCM tokens look like real registration tokens.
    public struct Device: Sendable {
        public var id: Int
        public var token: String
    }

    @discardableResult
    public func device(_ user: UUID, provider: String = "apns", environment: String = "production", retired: Bool = false) throws -> Device {
        tokenCounter += 1
        let random = (UUID().uuidString + UUID().uuidString).replacingOccurrences(of: "-", with: "").lowercased()
        let token: String
        switch provider {
        case "apns": token = random
        default: token = String(random.prefix(22)) + ":APA91b" + String(repeating: random, count: 3).prefix(134)
        }
        let id: Int = try connection.query("""
            INSERT INTO device_tokens (user_id, provider, token, apns_environment, app_id, retired_at, retired_reason)
            VALUES (\(user), \(provider), \(token), \(provider == "apns" ? environment : nil), 'no.likeperson.app',
                    \(retired ? daysAgo(1) : nil), \(retired ? "Unregistered" : nil))
            RETURNING id
            """).first!.decode(0)
        return Device(id: id, token: token)
    }

    public func preferences(_ user: UUID, master: Bool = true, inactivity: Bool = true) throws {
        try connection.execute("INSERT INTO push_notification_configs (user_id, enabled, inactivity) VALUES (\(user), \(master), \(inactivity))")
    }

    // MARK: - Reading what users would see

    /// Inbox rows of a user: (category, title, body, data JSON text).
    public func inbox(_ user: UUID) throws -> [(category: String, title: String, body: String, data: String)] {
        try connection.query("SELECT category, title, body, data::text FROM notifications WHERE user_id = \(user) ORDER BY created_at").map {
            (try $0.decode(0), try $0.decode(1), try $0.decode(2), try $0.decode(3))
        }
    }

    /// Pending deliveries of a user's notifications.
    public func deliveries(_ user: UUID) throws -> Int {
        try connection.query("""
            SELECT count(*) FROM deliveries d JOIN notifications n ON n.id = d.notification_id
             WHERE n.user_id = \(user) AND d.state = 'pending'
            """).first!.decode(0)
    }

    /// Makes the queued deliveries that `condition` (on `d`, the deliveries row) selects due `secondsAgo`
    /// seconds ago, as if their wait (a retry's backoff, the morning after quiet hours) were over.
    public func makeDue(where condition: Query = "true", secondsAgo: Int = 0) throws {
        try connection.execute("""
            UPDATE delivery_queue q SET next_attempt_at = now() - make_interval(secs => \(secondsAgo))
              FROM deliveries d WHERE d.id = q.delivery_id AND \(condition)
            """)
    }

    /// Reopens the deliveries that `condition` (on `d`) selects: pending again and queued, due now.
    public func reopen(where condition: Query = "true") throws {
        try connection.execute("""
            WITH reopened AS (
                UPDATE deliveries d SET state = 'pending' WHERE \(condition) AND d.state NOT IN ('pending', 'retrying')
                RETURNING d.id, d.device_token_id
            )
            INSERT INTO delivery_queue (delivery_id, provider)
            SELECT r.id, t.provider FROM reopened r JOIN device_tokens t ON t.id = r.device_token_id
            """)
    }

    /// The reasons recorded for a user's decisions, oldest first.
    public func decisions(_ user: UUID) throws -> [String] {
        try connection.query("SELECT outcome || ':' || reason FROM decisions WHERE user_id = \(user) ORDER BY id").map { try $0.decode(0) }
    }

    public func count(_ table: StaticString) throws -> Int {
        try connection.query("SELECT count(*) FROM \(sql: table)").first!.decode(0)
    }

    /// Waits (up to `timeout` seconds) until `count` sessions of this database wait for a lock (a job held at a
    /// test's gate), and returns how many do. Asked on this connection, outside the gate's transaction (which
    /// would see one snapshot).
    @discardableResult
    public func waitForLockWaiters(_ count: Int, timeout: TimeInterval = 60) throws -> Int {
        func waiting() throws -> Int {
            try connection.query("SELECT count(*)::int FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'").first!.decode(0)
        }
        let deadline = Date().addingTimeInterval(timeout)
        while try waiting() < count && Date() < deadline { usleep(20_000) }
        return try waiting()
    }

    /// A fingerprint of every row of every table in the public schema, to prove a run changed nothing.
    public func fingerprint() throws -> [String: String] {
        var result: [String: String] = [:]
        let rows = try connection.query("""
            SELECT tablename, md5(query_to_xml(format('SELECT * FROM %I t ORDER BY t::text', tablename), true, false, '')::text)
              FROM pg_tables WHERE schemaname = 'public'
            """)
        for row in rows { result[try row.decode(0)] = try row.decode(1) }
        return result
    }
}

// MARK: - Assignments, scopes, summaries

extension Fixtures {
    /// Puts `mentor` in `coordinator`'s scope (both of `organization`).
    public func scope(_ organization: UUID, coordinator: UUID, mentor: UUID) throws {
        try connection.execute("""
            INSERT INTO coordinator_scopes (organization_id, coordinator_id, mentor_id) VALUES (\(organization), \(coordinator), \(mentor))
            """)
    }

    /// An assignment dispatched `dispatchedDaysAgo` days before `now`.
    @discardableResult
    public func assignment(_ organization: UUID, mentor: UUID, coordinator: UUID, title: String = "Ring ny deltaker",
                           dispatchedDaysAgo: Double, state: String = "active") throws -> UUID {
        try connection.query("""
            INSERT INTO assignments (organization_id, mentor_id, coordinator_id, title, dispatched_at, state, state_changed_at)
            VALUES (\(organization), \(mentor), \(coordinator), \(title), \(daysAgo(dispatchedDaysAgo)), \(state), \(daysAgo(dispatchedDaysAgo)))
            RETURNING id
            """).first!.decode(0)
    }

    /// The mentor's read receipt for an assignment.
    public func acknowledge(_ assignment: UUID, daysAgo days: Double) throws {
        try connection.execute("INSERT INTO assignment_read_receipts (assignment_id, acknowledged_at) VALUES (\(assignment), \(daysAgo(days)))")
    }

    @discardableResult
    public func impactSummary(_ mentor: UUID, year: Int, computedDaysAgo: Double) throws -> Int {
        try connection.query("""
            INSERT INTO impact_summaries (mentor_id, year, computed_at) VALUES (\(mentor), \(year), \(daysAgo(computedDaysAgo))) RETURNING id
            """).first!.decode(0)
    }

    /// Turns one category switch off (`column` is a `push_notification_configs` column).
    public func categoryOff(_ user: UUID, _ column: StaticString) throws {
        try connection.execute("""
            INSERT INTO push_notification_configs (user_id) VALUES (\(user)) ON CONFLICT (user_id) DO NOTHING;
            """)
        try connection.execute("UPDATE push_notification_configs SET \(sql: column) = false WHERE user_id = \(user)")
    }

    /// Decisions with their subjects: "outcome:reason@subject", oldest first.
    public func decisionsWithSubjects(_ user: UUID) throws -> [String] {
        try connection.query("SELECT outcome || ':' || reason || '@' || coalesce(subject, '-') FROM decisions WHERE user_id = \(user) ORDER BY id").map { try $0.decode(0) }
    }

    /// Each delivery state of a user's notifications, sorted.
    public func deliveryStates(_ user: UUID) throws -> [String] {
        try connection.query("""
            SELECT d.state FROM deliveries d JOIN notifications n ON n.id = d.notification_id WHERE n.user_id = \(user) ORDER BY d.state
            """).map { try $0.decode(0) }
    }
}
