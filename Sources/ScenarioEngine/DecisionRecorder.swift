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

    /// One decided candidate, as it will be written.
    private struct Row {
        var user: UUID
        var subject: String?
        var reason: String
        var detail: String
        /// The notification to store (nil: suppressed).
        var draft: NotificationDraft?
    }
    private var rows: [Row] = []

    init(connection: Connection, scenario: String, category: NotificationCategory, runID: Int, asOf: Date, batchSize: Int = 500) {
        self.connection = connection
        self.scenario = scenario
        self.category = category
        self.runID = runID
        self.asOf = asOf
        self.batchSize = batchSize
    }

    mutating func add(_ recipient: Recipient, subject: String?, _ decision: Decision, into summary: inout ScenarioSummary) throws {
        switch decision {
        case .notify(let draft):
            var (reason, detail) = (NotifiedReason.notified, draft.why)
            if let inboxOnly = draft.inboxOnly {
                (reason, detail) = (inboxOnly.reason, "\(draft.why); \(inboxOnly.detail)")
            } else if recipient.activeDevices == 0 {
                reason = NotifiedReason.inboxOnlyNoDevice
            } else if let deliverAt = draft.deliverAt {
                (reason, detail) = (NotifiedReason.deferredQuietHours, "\(draft.why); the push waits for quiet hours to end: \(Timestamp.iso8601(deliverAt))")
            }
            rows.append(Row(user: recipient.userID, subject: subject, reason: reason, detail: detail, draft: draft))
        case .suppress(let reason, let detail):
            rows.append(Row(user: recipient.userID, subject: subject, reason: reason.rawValue, detail: detail, draft: nil))
        }
        if rows.count >= batchSize { try flush(into: &summary) }
    }

    mutating func flush(into summary: inout ScenarioSummary) throws {
        guard !rows.isEmpty else { return }
        let drafts = rows.map(\.draft)
        let planned = drafts.filter { $0 != nil }.count
        let category = category.rawValue
        let query: Query = """
            WITH input AS (
                SELECT * FROM unnest(\(PostgresArray(rows.map(\.user)))::uuid[],
                                     \(PostgresArray(drafts.map { $0 == nil ? "suppressed" : "notified" }))::text[],
                                     \(PostgresArray(rows.map(\.reason)))::text[], \(PostgresArray(rows.map(\.detail)))::text[],
                                     \(PostgresArray(drafts.map { $0?.title }))::text[], \(PostgresArray(drafts.map { $0?.body }))::text[],
                                     \(PostgresArray(drafts.map { $0.map { JSONText($0.dataJSON) } }))::jsonb[],
                                     \(PostgresArray(drafts.map { $0?.dedupeKey }))::text[],
                                     \(PostgresArray(drafts.map { $0?.expiresAt }))::timestamptz[], \(PostgresArray(rows.map(\.subject)))::text[],
                                     \(PostgresArray(drafts.map { $0?.deliverAt }))::timestamptz[],
                                     \(PostgresArray(drafts.map { $0.map { $0.inboxOnly == nil } ?? false }))::bool[],
                                     \(PostgresArray(drafts.map { $0?.critical ?? false }))::bool[])
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
        rows.removeAll(keepingCapacity: true)
    }
}
