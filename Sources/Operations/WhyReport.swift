import Foundation
import JobKit
import Postgres
import Push
import ScenarioEngine
import TextCoding

/// Everything `why` tells about one user: who they are, their preferences, the organization's rules in
/// force, their devices, and every decision, notification, delivery and delivery event, read in one
/// read-only transaction so the story is one consistent snapshot. Device tokens are kept only redacted.
public struct WhyReport {
    /// How a token's value is shown: its last characters, or, for one `prune` erased (`pruned:<id>`, `PruneRunner`), that
    /// it was erased (its tail "…ned:35" read as a real token's).
    static func shownToken(_ value: String) -> String {
        value.hasPrefix("pruned:") ? "(value erased by prune)" : PushTarget.redact(value)
    }

    public struct User {
        public var id: UUID
        public var name: String
        public var role: String
        public var organizationID: UUID
        public var organizationName: String
        public var locale: String?
        public var organizationLocale: String
        public var timeZone: String?
        public var organizationTimeZone: String
        public var joinedAt: Date
        public var deactivatedAt: Date?
        public var lastActivityAt: Date?
        /// Whether the zones are ones the jobs know (`time_zone_names`, 0016): a row written before may name
        /// another. The user's unknown: the jobs use the organization's (65); the organization's: they skip it (78).
        public var timeZoneKnown = true
        public var organizationTimeZoneKnown = true
    }

    /// The user's `push_notification_configs` row; nil: no row, everything on.
    public struct Preferences {
        /// The master switch (`enabled`).
        public var enabled: Bool
        /// Every category column and its switch, by name.
        public var categories: [(name: String, on: Bool)]
        public var updatedAt: Date
        public var categoriesOff: [String] { categories.filter { !$0.on }.map(\.name) }
    }

    /// How the user's pushes are delivered (issue 9's policies), as the engine reads them: each with whose it is.
    public struct DeliveryPolicy {
        /// The quiet-hours window (local times, "22:00"), and whether it is the user's own (else the organization's).
        public var quietHours: (start: String, end: String, own: Bool)?
        /// The zone the engine reads the user's local times in (theirs, else the organization's, else UTC).
        public var timeZone = "UTC"
        /// The daily cap of non-critical pushes, and whether it is the user's own (lower than the organization's).
        public var dailyCap: (cap: Int, own: Bool)?
        /// The organization's critical categories (through quiet hours and the category switch, never capped).
        public var criticalCategories: [String]
        /// Categories whose channels are not push and inbox: the organization's choice, narrowed by the user's.
        public var channels: [(category: String, categoryDefault: String, organization: String?, user: String?)]
    }

    /// One scenario's effective rule for the user's organization, merged as the engine merges it.
    public struct Rule {
        public var scenario: String
        public var enabled: Bool
        /// `scenario_defaults.settings` overridden key by key by the organization's row (JSON text).
        public var settings: String
        /// The organization's own row, when it has one: its `enabled` (nil: the default) and `settings`.
        public var organizationRow: (enabled: Bool?, settings: String, updatedAt: Date)?
        /// The scenario's priority for daily slots (1 comes first): the organization's, else the default.
        public var priority: Int = 50
        /// What is wrong with the merged settings, as the database checks a rule written (0009's
        /// `scenario_settings_problem`): a row written before that check, which the jobs skip. nil: valid.
        public var problem: String? = nil
    }

    public struct Device {
        public var id: Int
        public var provider: String
        /// The token's last six characters only (`PushTarget.redact`), or that `prune` erased it.
        public var token: String
        public var environment: String?
        public var appID: String
        public var registeredAt: Date
        public var lastSeenAt: Date
        public var retiredAt: Date?
        public var retiredReason: String?
    }

    public struct Decision {
        public var id: Int
        public var runID: Int
        public var job: String
        public var scenario: String
        public var outcome: String
        public var reason: String
        public var detail: String?
        public var subject: String?
        public var notificationID: UUID?
        public var dedupeKey: String?
        public var decidedAt: Date
    }

    public struct Event {
        public var id: Int
        public var event: String
        public var attempt: Int
        public var providerStatus: Int?
        public var detail: String?
        public var at: Date
    }

    public struct Delivery {
        public var id: Int
        public var deviceID: Int
        public var provider: String
        public var token: String
        public var environment: String?
        public var state: String
        public var attempts: Int
        /// When it is next due; nil once it left the queue (sent, failed, dead, expired, cancelled).
        public var nextAttemptAt: Date?
        /// The lease of the engine that claimed it, while a claim's outcome is not yet written.
        public var claimedUntil: Date?
        public var lastError: String?
        public var providerMessageID: String?
        public var createdAt: Date
        public var updatedAt: Date
        public var sentAt: Date?
        public var events: [Event] = []
    }

    public struct Notification {
        public var id: UUID
        public var scenario: String
        public var category: String
        public var title: String
        public var body: String
        public var data: String
        public var route: String?
        public var createdAt: Date
        public var readAt: Date?
        public var deletedAt: Date?
        public var expiresAt: Date?
        public var dedupeKey: String
        public var subject: String?
        public var runID: Int?
        public var deliveries: [Delivery] = []
        /// The assignments it lists (a digest's cases, 0043), each with its state now.
        public var listed: [Listed] = []
    }

    /// An assignment a notification lists, and whether it is still open for it: `open`, `acknowledged`, `given to
    /// another mentor` (since the notification), its state when no longer active, or `gone`.
    public struct Listed {
        public var id: String
        public var title: String?
        public var status: String
    }

    public var user: User
    public var scenario: String?
    public var since: Date?
    public var preferences: Preferences?
    public var deliveryPolicy = DeliveryPolicy(criticalCategories: [], channels: [])
    public var rules: [Rule]
    public var devices: [Device]
    /// Oldest first.
    public var decisions: [Decision]
    /// Oldest first, each with its deliveries and their events in order.
    public var notifications: [Notification]
    /// The last push-deliver run on record (not a dry run): why a delivery long due may still wait.
    public var lastDeliveryRun: (id: Int, startedAt: Date, outcome: String, error: String?)?
    /// When this report was read (the database's clock).
    public var readAt = Date()

    /// A delivery still queued more than 5 minutes past its time, and not held by a claim: push-deliver (every
    /// minute) has not sent it. A claim that ran out (its run crashed or was killed) holds nothing.
    public func isOverdue(_ delivery: Delivery) -> Bool {
        guard delivery.state == "pending" || delivery.state == "retrying", !isClaimed(delivery),
              let due = delivery.nextAttemptAt else { return false }
        return readAt.timeIntervalSince(due) > 300
    }

    /// Whether a running push-deliver holds the delivery now (its lease has not run out).
    public func isClaimed(_ delivery: Delivery) -> Bool {
        delivery.claimedUntil.map { $0 > readAt } ?? false
    }

    /// The decisions whose notification is one of `notifications`, by notification id.
    public func decisions(of notification: Notification) -> [Decision] {
        decisions.filter { $0.notificationID == notification.id }
    }

    /// Decisions that led to no notification shown here: suppressed ones, and notified ones whose inbox row
    /// is gone (pruned) or outside the filter.
    public var decisionsWithoutNotification: [Decision] {
        let shown = Set(notifications.map(\.id))
        return decisions.filter { $0.notificationID.map { !shown.contains($0) } ?? true }
    }

    public var deliveryCount: Int { notifications.reduce(0) { $0 + $1.deliveries.count } }
    public var eventCount: Int { notifications.reduce(0) { $0 + $1.deliveries.reduce(0) { $0 + $1.events.count } } }
}

extension WhyReport {
    /// Reads the report of `userID`, limited to `scenario` and to what happened from `since` on. Call it
    /// inside a read-only transaction. A user or scenario that does not exist is a usage error (64), as
    /// `--org` naming no organization is for the scenario jobs.
    public static func load(_ connection: Connection, userID: UUID, scenario: String?, since: Date?) throws -> WhyReport {
        guard let row = try connection.query("""
            SELECT u.id, u.display_name, u.role, o.id, o.name, u.locale, o.default_locale, u.time_zone, o.time_zone,
                   u.joined_at, u.deactivated_at, u.last_activity_logged_at,
                   u.time_zone IS NULL OR EXISTS (SELECT FROM time_zone_names z WHERE z.name = u.time_zone),
                   EXISTS (SELECT FROM time_zone_names z WHERE z.name = o.time_zone)
              FROM users u JOIN organizations o ON o.id = u.organization_id
             WHERE u.id = \(userID)
            """).first else {
            throw JobFailure(.usage, "no such user: \(userID.lowercasedString) (no row in users)")
        }
        let user = User(id: try row.decode(0), name: try row.decode(1), role: try row.decode(2), organizationID: try row.decode(3),
                        organizationName: try row.decode(4), locale: try row.decode(5), organizationLocale: try row.decode(6),
                        timeZone: try row.decode(7), organizationTimeZone: try row.decode(8), joinedAt: try row.decode(9),
                        deactivatedAt: try row.decode(10), lastActivityAt: try row.decode(11),
                        timeZoneKnown: try row.decode(12), organizationTimeZoneKnown: try row.decode(13))
        if let scenario {
            let known: [String] = try connection.query("SELECT scenario FROM scenario_defaults ORDER BY scenario").map { try $0.decode(0) }
            guard known.contains(scenario) else {
                throw JobFailure(.usage, "--scenario \(scenario): no such scenario (scenarios: \(known.joined(separator: ", ")))")
            }
        }
        var report = WhyReport(user: user, scenario: scenario, since: since, preferences: try preferences(connection, userID),
                               rules: try rules(connection, user.organizationID, scenario: scenario),
                               devices: try devices(connection, userID), decisions: [], notifications: [])
        report.deliveryPolicy = try deliveryPolicy(connection, userID)
        report.decisions = try decisions(connection, userID, scenario: scenario, since: since)
        report.notifications = try notifications(connection, userID, scenario: scenario, since: since)
        report.readAt = try connection.query("SELECT now()").first!.decode(0)
        if let run = try connection.query("""
            SELECT id, started_at, outcome, error FROM job_runs WHERE job = 'push-deliver' AND NOT dry_run ORDER BY started_at DESC LIMIT 1
            """).first {
            report.lastDeliveryRun = (try run.decode(0), try run.decode(1), try run.decode(2), try run.decode(3))
        }
        return report
    }

    static func preferences(_ connection: Connection, _ userID: UUID) throws -> Preferences? {
        // Every boolean column (the switches), so a category added later shows without a change here.
        guard let row = try connection.query("""
            SELECT p.updated_at, (SELECT coalesce(jsonb_object_agg(key, value), '{}') FROM jsonb_each(to_jsonb(p))
                                   WHERE jsonb_typeof(value) = 'boolean')::text
              FROM push_notification_configs p WHERE p.user_id = \(userID)
            """).first else { return nil }
        let json: String = try row.decode(1)
        guard let switches = try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Bool] else {
            throw JobFailure(.dataError, "push_notification_configs of \(userID.lowercasedString) holds a column that is not a switch")
        }
        return Preferences(enabled: switches["enabled"] ?? true,
                           categories: switches.filter { $0.key != "enabled" }.sorted { $0.key < $1.key }.map { ($0.key, $0.value) },
                           updatedAt: try row.decode(0))
    }

    static func deliveryPolicy(_ connection: Connection, _ userID: UUID) throws -> DeliveryPolicy {
        // The engine's reading (Recipient.wrap): the user's window beats the organization's, the lower cap applies.
        let row = try connection.query("""
            SELECT to_char(coalesce(pc.quiet_hours_start, op.quiet_hours_start), 'HH24:MI'),
                   to_char(coalesce(pc.quiet_hours_end, op.quiet_hours_end), 'HH24:MI'), pc.quiet_hours_start IS NOT NULL,
                   least(op.daily_push_cap, pc.daily_push_cap), pc.daily_push_cap IS NOT NULL AND pc.daily_push_cap <= coalesce(op.daily_push_cap, 100),
                   array_to_string(coalesce(op.critical_categories, '{}'), ','), \(Recipient.knownTimeZone)
              FROM users u
              LEFT JOIN push_notification_configs pc ON pc.user_id = u.id
              LEFT JOIN organization_delivery_policies op ON op.organization_id = u.organization_id
             WHERE u.id = \(userID)
            """).first!
        var policy = DeliveryPolicy(criticalCategories: [], channels: [])
        if let start = try row.decode(0, as: String?.self), let end = try row.decode(1, as: String?.self) {
            policy.quietHours = (start, end, try row.decode(2))
        }
        if let cap = try row.decode(3, as: Int?.self) { policy.dailyCap = (cap, try row.decode(4)) }
        let critical: String = try row.decode(5)
        policy.criticalCategories = critical.isEmpty ? [] : critical.split(separator: ",").map(String.init)
        policy.timeZone = try row.decode(6)
        policy.channels = try connection.query("""
            SELECT c.category, c.channels, oc.channels, uc.channels
              FROM notification_categories c
              JOIN users u ON u.id = \(userID)
              LEFT JOIN organization_category_channels oc ON oc.organization_id = u.organization_id AND oc.category = c.category
              LEFT JOIN user_category_channels uc ON uc.user_id = u.id AND uc.category = c.category
             WHERE coalesce(oc.channels, c.channels, 'push_and_inbox') <> 'push_and_inbox' OR coalesce(uc.channels, 'push_and_inbox') <> 'push_and_inbox'
             ORDER BY c.category
            """).map { (try $0.decode(0), try $0.decode(1), try $0.decode(2, as: String?.self), try $0.decode(3, as: String?.self)) }
        return policy
    }

    public static func rules(_ connection: Connection, _ organization: UUID, scenario: String?) throws -> [Rule] {
        // The engine's merge (RuleLoader): the organization's enabled unless NULL, its settings over the defaults.
        try connection.query("""
            SELECT d.scenario, coalesce(r.enabled, d.enabled), (d.settings || coalesce(r.settings, '{}'))::text,
                   r.organization_id IS NOT NULL, r.enabled, r.settings::text, r.updated_at, coalesce(r.priority, d.priority),
                   scenario_settings_problem(d.scenario, d.settings || coalesce(r.settings, '{}'))
              FROM scenario_defaults d
              LEFT JOIN organization_scenario_rules r ON r.scenario = d.scenario AND r.organization_id = \(organization)
             WHERE \(scenario)::text IS NULL OR d.scenario = \(scenario)
             ORDER BY d.scenario
            """).map { row in
            let hasRow: Bool = try row.decode(3)
            return Rule(scenario: try row.decode(0), enabled: try row.decode(1), settings: try row.decode(2),
                        organizationRow: hasRow ? (try row.decode(4, as: Bool?.self), try row.decode(5), try row.decode(6)) : nil,
                        priority: try row.decode(7), problem: try row.decode(8))
        }
    }

    static func devices(_ connection: Connection, _ userID: UUID) throws -> [Device] {
        try connection.query("""
            SELECT id, provider, token, apns_environment, app_id, created_at, last_seen_at, retired_at, retired_reason
              FROM device_tokens WHERE user_id = \(userID) ORDER BY id
            """).map { row in
            Device(id: try row.decode(0), provider: try row.decode(1), token: WhyReport.shownToken(try row.decode(2)),
                   environment: try row.decode(3), appID: try row.decode(4), registeredAt: try row.decode(5),
                   lastSeenAt: try row.decode(6), retiredAt: try row.decode(7), retiredReason: try row.decode(8))
        }
    }

    static func decisions(_ connection: Connection, _ userID: UUID, scenario: String?, since: Date?) throws -> [Decision] {
        try connection.query("""
            SELECT d.id, d.job_run_id, r.job, d.scenario, d.outcome, d.reason, d.detail, d.subject, d.notification_id,
                   d.dedupe_key, d.decided_at
              FROM decisions d JOIN job_runs r ON r.id = d.job_run_id
             WHERE d.user_id = \(userID)
               AND (\(scenario)::text IS NULL OR d.scenario = \(scenario))
               AND (\(since)::timestamptz IS NULL OR d.decided_at >= \(since))
             ORDER BY d.decided_at, d.id
            """).map { row in
            Decision(id: try row.decode(0), runID: try row.decode(1), job: try row.decode(2), scenario: try row.decode(3),
                     outcome: try row.decode(4), reason: try row.decode(5), detail: try row.decode(6), subject: try row.decode(7),
                     notificationID: try row.decode(8), dedupeKey: try row.decode(9), decidedAt: try row.decode(10))
        }
    }

    /// The user's notifications with their deliveries and events. A notification's scenario is the one its
    /// decision names, else the first part of its dedupe key (every key starts with its scenario).
    static func notifications(_ connection: Connection, _ userID: UUID, scenario: String?, since: Date?) throws -> [Notification] {
        var notifications = try connection.query("""
            SELECT * FROM (
                SELECT n.id, coalesce(dd.scenario, split_part(n.dedupe_key, ':', 1)) AS scenario, n.category, n.title, n.body,
                       n.data::text, n.data->>'route', n.created_at, n.read_at, n.deleted_at, n.expires_at, n.dedupe_key,
                       n.subject, n.job_run_id
                  FROM notifications n
                  LEFT JOIN LATERAL (SELECT d.scenario FROM decisions d WHERE d.notification_id = n.id ORDER BY d.id LIMIT 1) dd ON true
                 WHERE n.user_id = \(userID) AND (\(since)::timestamptz IS NULL OR n.created_at >= \(since))
            ) s
             WHERE \(scenario)::text IS NULL OR s.scenario = \(scenario)
             ORDER BY s.created_at, s.id
            """).map { row in
            Notification(id: try row.decode(0), scenario: try row.decode(1), category: try row.decode(2), title: try row.decode(3),
                         body: try row.decode(4), data: try row.decode(5), route: try row.decode(6), createdAt: try row.decode(7),
                         readAt: try row.decode(8), deletedAt: try row.decode(9), expiresAt: try row.decode(10),
                         dedupeKey: try row.decode(11), subject: try row.decode(12), runID: try row.decode(13))
        }
        guard !notifications.isEmpty else { return [] }
        let listed = try connection.query("""
            SELECT n.id, c.id::text, a.title, CASE WHEN a.id IS NULL THEN 'gone' ELSE listed_assignment_status(a, n.created_at) END
              FROM notifications n CROSS JOIN LATERAL unnest(n.about_assignments) WITH ORDINALITY AS c(id, position)
              LEFT JOIN assignments a ON a.id = c.id
             WHERE n.id = ANY(\(PostgresArray(notifications.map(\.id)))::uuid[]) AND n.about_assignments IS NOT NULL
             ORDER BY n.id, c.position
            """).map { row -> (UUID, Listed) in
            (try row.decode(0), Listed(id: try row.decode(1), title: try row.decode(2), status: try row.decode(3)))
        }
        let listedBy = Dictionary(grouping: listed, by: \.0)
        for index in notifications.indices { notifications[index].listed = listedBy[notifications[index].id]?.map(\.1) ?? [] }
        var deliveries = try connection.query("""
            SELECT d.id, d.notification_id, d.device_token_id, t.provider, t.token, t.apns_environment, d.state, d.attempts,
                   q.next_attempt_at, d.last_error, d.provider_message_id, d.created_at, d.updated_at, d.sent_at, q.lease_until
              FROM deliveries d JOIN device_tokens t ON t.id = d.device_token_id LEFT JOIN delivery_queue q ON q.delivery_id = d.id
             WHERE d.notification_id = ANY(\(PostgresArray(notifications.map(\.id)))::uuid[])
             ORDER BY d.id
            """).map { row -> (UUID, Delivery) in
            (try row.decode(1),
             Delivery(id: try row.decode(0), deviceID: try row.decode(2), provider: try row.decode(3), token: WhyReport.shownToken(try row.decode(4)),
                      environment: try row.decode(5), state: try row.decode(6), attempts: try row.decode(7), nextAttemptAt: try row.decode(8), claimedUntil: try row.decode(14),
                      lastError: try row.decode(9), providerMessageID: try row.decode(10), createdAt: try row.decode(11),
                      updatedAt: try row.decode(12), sentAt: try row.decode(13)))
        }
        if !deliveries.isEmpty {
            let events = try connection.query("""
                SELECT delivery_id, id, event, attempt, provider_status, detail, at FROM delivery_events
                 WHERE delivery_id = ANY(\(PostgresArray(deliveries.map(\.1.id)))::bigint[])
                 ORDER BY at, id
                """).map { row -> (Int, Event) in
                (try row.decode(0), Event(id: try row.decode(1), event: try row.decode(2), attempt: try row.decode(3),
                                          providerStatus: try row.decode(4), detail: try row.decode(5), at: try row.decode(6)))
            }
            let byDelivery = Dictionary(grouping: events, by: \.0)
            for index in deliveries.indices { deliveries[index].1.events = byDelivery[deliveries[index].1.id]?.map(\.1) ?? [] }
        }
        let byNotification = Dictionary(grouping: deliveries, by: \.0)
        for index in notifications.indices { notifications[index].deliveries = byNotification[notifications[index].id]?.map(\.1) ?? [] }
        return notifications
    }
}
