import Foundation
import JobKit
import Postgres

/// Writes decisions in batches. Each batch is one transaction and one statement: the inbox rows
/// (skipping any dedupe key already stored), one pending delivery per active device token of each
/// new row, and a `decisions` row for every candidate. A crash loses at most the batch in progress,
/// which the next run decides again.
struct DecisionRecorder {
    let connection: Connection
    let scenario: String
    let category: NotificationCategory
    let runID: Int
    let asOf: Date
    let batchSize: Int

    private var users: [UUID] = []
    private var subjects: [String?] = []
    private var outcomes: [String] = []
    private var reasons: [String] = []
    private var details: [String?] = []
    private var titles: [String?] = []
    private var bodies: [String?] = []
    private var data: [JSONText?] = []
    private var keys: [String?] = []
    private var expiries: [Date?] = []
    private var deliverAts: [Date?] = []
    private var pushes: [Bool] = []
    private var criticals: [Bool] = []

    init(connection: Connection, scenario: String, category: NotificationCategory, runID: Int, asOf: Date, batchSize: Int = 500) {
        self.connection = connection
        self.scenario = scenario
        self.category = category
        self.runID = runID
        self.asOf = asOf
        self.batchSize = batchSize
    }

    mutating func add(_ recipient: Recipient, subject: String?, _ decision: Decision, into summary: inout ScenarioSummary) throws {
        users.append(recipient.userID)
        subjects.append(subject)
        switch decision {
        case .notify(let draft):
            outcomes.append("notified")
            if let inboxOnly = draft.inboxOnly {
                reasons.append(inboxOnly.reason)
                details.append("\(draft.why); \(inboxOnly.detail)")
            } else if recipient.activeDevices == 0 {
                reasons.append(NotifiedReason.inboxOnlyNoDevice)
                details.append(draft.why)
            } else if let deliverAt = draft.deliverAt {
                reasons.append(NotifiedReason.deferredQuietHours)
                details.append("\(draft.why); the push waits for quiet hours to end: \(Timestamp.iso8601(deliverAt))")
            } else {
                reasons.append(NotifiedReason.notified)
                details.append(draft.why)
            }
            deliverAts.append(draft.deliverAt)
            pushes.append(draft.inboxOnly == nil)
            criticals.append(draft.critical)
            titles.append(draft.title)
            bodies.append(draft.body)
            data.append(JSONText(draft.dataJSON))
            keys.append(draft.dedupeKey)
            expiries.append(draft.expiresAt)
        case .suppress(let reason, let detail):
            outcomes.append("suppressed")
            reasons.append(reason.rawValue)
            details.append(detail)
            titles.append(nil)
            bodies.append(nil)
            data.append(nil)
            keys.append(nil)
            expiries.append(nil)
            deliverAts.append(nil)
            pushes.append(false)
            criticals.append(false)
        }
        if users.count >= batchSize { try flush(into: &summary) }
    }

    mutating func flush(into summary: inout ScenarioSummary) throws {
        guard !users.isEmpty else { return }
        let planned = outcomes.filter { $0 == "notified" }.count
        let category = category.rawValue
        let query: Query = """
            WITH input AS (
                SELECT * FROM unnest(\(PostgresArray(users))::uuid[], \(PostgresArray(outcomes))::text[],
                                     \(PostgresArray(reasons))::text[], \(PostgresArray(details))::text[],
                                     \(PostgresArray(titles))::text[], \(PostgresArray(bodies))::text[],
                                     \(PostgresArray(data))::jsonb[], \(PostgresArray(keys))::text[],
                                     \(PostgresArray(expiries))::timestamptz[], \(PostgresArray(subjects))::text[],
                                     \(PostgresArray(deliverAts))::timestamptz[], \(PostgresArray(pushes))::bool[],
                                     \(PostgresArray(criticals))::bool[])
                    AS t(user_id, outcome, reason, detail, title, body, data, dedupe_key, expires_at, subject, deliver_at, push, critical)
            ), inserted AS (
                INSERT INTO notifications (user_id, category, title, body, data, created_at, expires_at, dedupe_key, job_run_id, subject, critical)
                SELECT user_id, \(category), title, body, data, \(asOf), expires_at, dedupe_key, \(runID), subject, critical
                  FROM input WHERE outcome = 'notified'
                ON CONFLICT (dedupe_key) DO NOTHING
                RETURNING id, user_id, dedupe_key
            ), queued AS (
                INSERT INTO deliveries (notification_id, device_token_id, next_attempt_at)
                SELECT i.id, d.id, coalesce(t.deliver_at, now())
                  FROM inserted i
                  JOIN (SELECT DISTINCT ON (dedupe_key) dedupe_key, deliver_at, push FROM input WHERE outcome = 'notified'
                         ORDER BY dedupe_key) t ON t.dedupe_key = i.dedupe_key
                  JOIN active_device_tokens d ON d.user_id = i.user_id
                 WHERE t.push
                RETURNING 1
            ), decided AS (
                INSERT INTO decisions (job_run_id, scenario, user_id, outcome, reason, detail, notification_id, dedupe_key, decided_at, subject)
                SELECT \(runID), \(scenario), t.user_id,
                       CASE WHEN t.outcome = 'notified' AND i.id IS NULL THEN 'suppressed' ELSE t.outcome END,
                       CASE WHEN t.outcome = 'notified' AND i.id IS NULL THEN \(SuppressionReason.alreadyNotified.rawValue) ELSE t.reason END,
                       t.detail, i.id, t.dedupe_key, \(asOf), t.subject
                  FROM input t LEFT JOIN inserted i ON i.dedupe_key = t.dedupe_key
                RETURNING 1
            )
            SELECT (SELECT count(*) FROM inserted), (SELECT count(*) FROM queued), (SELECT count(*) FROM decided)
            """
        let counts = try connection.transaction { try connection.query(query) }
        guard let row = counts.first else { throw JobFailure(.software, "recording a batch returned no counts") }
        let inserted: Int = try row.decode(0)
        summary.inboxRows += inserted
        summary.deliveries += try row.decode(1)
        summary.duplicates += planned - inserted
        users.removeAll(keepingCapacity: true)
        subjects.removeAll(keepingCapacity: true)
        outcomes.removeAll(keepingCapacity: true)
        reasons.removeAll(keepingCapacity: true)
        details.removeAll(keepingCapacity: true)
        titles.removeAll(keepingCapacity: true)
        bodies.removeAll(keepingCapacity: true)
        data.removeAll(keepingCapacity: true)
        keys.removeAll(keepingCapacity: true)
        expiries.removeAll(keepingCapacity: true)
        deliverAts.removeAll(keepingCapacity: true)
        pushes.removeAll(keepingCapacity: true)
        criticals.removeAll(keepingCapacity: true)
    }
}
