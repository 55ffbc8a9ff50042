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
        /// Whether it is pushed (a notification with a push, a policy letting it and a device to push to).
        var push: Bool
    }
    private var rows: [Row] = []
    /// The dedupe keys this batch stores (so each is on one `notified` row of the batch's statement): a second candidate with the same key (two events of one change, say)
    /// is the same notification. Its row took a daily slot from the user's others, the batch's statement picked
    /// its push and slot flags at random between the two (the capped one's, maybe: no push at all), and both
    /// decisions read `notified` with one notification.
    private var batchKeys: Set<String> = []

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
        case .notify(let draft) where batchKeys.contains(draft.dedupeKey):
            rows.append(Row(user: recipient.userID, subject: subject, reason: SuppressionReason.alreadyNotified.rawValue,
                            detail: draft.sameAsAnother, draft: nil, push: false))
            summary.duplicates += 1
        case .notify(let draft):
            batchKeys.insert(draft.dedupeKey)
            var (reason, detail) = (NotifiedReason.notified, draft.why)
            if let inboxOnly = draft.inboxOnly {
                (reason, detail) = (inboxOnly.reason, "\(draft.why); \(inboxOnly.detail)")
            } else if recipient.activeDevices == 0 {
                reason = NotifiedReason.inboxOnlyNoDevice
            } else if let deliverAt = draft.deliverAt {
                (reason, detail) = (NotifiedReason.deferredQuietHours, "\(draft.why); the push waits for quiet hours to end: \(Timestamp.iso8601(deliverAt))")
            }
            rows.append(Row(user: recipient.userID, subject: subject, reason: reason, detail: detail, draft: draft,
                            push: draft.inboxOnly == nil && recipient.activeDevices > 0))
        case .suppress(let reason, let detail):
            rows.append(Row(user: recipient.userID, subject: subject, reason: reason.rawValue, detail: detail, draft: nil, push: false))
        }
        if rows.count >= batchSize { try flush(into: &summary) }
    }

    mutating func flush(into summary: inout ScenarioSummary) throws {
        guard !rows.isEmpty else { return }
        // The daily slots' locks may meet an app transaction's (a withdrawn assignment cancelling its
        // pushes) in a deadlock, which PostgreSQL breaks by failing one side: the batch is then decided
        // again from the start. Only in a transaction of its own: inside the caller's (event-notify's batch)
        // the failure aborted the caller's transaction too, so the caller takes its batch again.
        let (decided, counted) = (rows, summary)
        let ownsTransaction = !connection.inTransaction
        for attempt in 1... {
            do {
                try connection.transaction {
                    let displaced = try takeDailySlots(into: &summary)
                    try record(displaced: displaced, into: &summary)
                }
                break
            } catch let error as PostgresError where error.sqlState == "40P01" && attempt < 3 && ownsTransaction {
                (rows, summary) = (decided, counted)
            }
        }
        rows.removeAll(keepingCapacity: true)
        batchKeys.removeAll(keepingCapacity: true)
    }

    /// Takes the daily slots the batch's capped pushes need; a push that gets none is stored without a
    /// push (`capped`). Returns the waiting pushes that are to give their slot up, with the dedupe key taking it.
    private mutating func takeDailySlots(into summary: inout ScenarioSummary) throws -> [Displacement] {
        let requests = rows.indices.compactMap { index -> DailySlots.Request? in
            guard rows[index].push, let slot = rows[index].draft?.dailySlot else { return nil }
            return DailySlots.Request(index: index, user: rows[index].user, slot: slot)
        }
        guard !requests.isEmpty else { return [] }
        let allocation = DailySlots.allocate(requests, taken: try DailySlots.lockAndRead(requests, on: connection))
        for request in requests where !allocation.granted.contains(request.index) {
            rows[request.index].push = false
            rows[request.index].reason = NotifiedReason.capped
            rows[request.index].detail += "; the daily cap of \(request.slot.cap) non-critical pushes on \(request.slot.localDay) is reached: inbox only, no push"
            summary.capped += 1
        }
        return allocation.displaced.map { victim, index in
            Displacement(victim: victim, by: rows[index].draft!.dedupeKey,
                         note: "; took the daily slot of a waiting \(victim.scenario) push (priority \(victim.priority), lower than \(rows[index].draft!.dailySlot!.priority))")
        }
    }

    /// A waiting push that gives its daily slot to the batch's push with dedupe key `by`, if that one still
    /// waits once the batch is checked again; `note` is added to the taker's decision then.
    struct Displacement {
        let victim: DailySlots.Taken
        let by: String
        let note: String
    }

    /// The batch's statement (inbox rows, deliveries, slots, decisions), the new pushes checked again, then
    /// the displaced pushes cancelled.
    private func record(displaced: [Displacement], into summary: inout ScenarioSummary) throws {
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
                                     \(PostgresArray(rows.map(\.push)))::bool[],
                                     \(PostgresArray(drafts.map { $0?.critical ?? false }))::bool[],
                                     \(PostgresArray(rows.map { $0.push ? $0.draft?.inInbox ?? true : true }))::bool[],
                                     \(PostgresArray(rows.map { $0.push ? $0.draft?.dailySlot?.localDay : nil }))::date[],
                                     \(PostgresArray(rows.map { $0.push ? $0.draft?.dailySlot?.priority : nil }))::int[],
                                     \(PostgresArray(drafts.map { $0.flatMap(\.aboutAssignmentsText) }))::text[])
                    AS t(user_id, outcome, reason, detail, title, body, data, dedupe_key, expires_at, subject, deliver_at, push, critical,
                         in_inbox, slot_day, slot_priority, about)
            ), inserted AS (
                INSERT INTO notifications (user_id, category, title, body, data, created_at, expires_at, dedupe_key, job_run_id, subject, critical, in_inbox,
                                           about_assignments)
                -- A push-only notification whose user has no device to push to any more (a token retired or moved
                -- since the candidates were read) is listed in the inbox, or the user never sees it.
                SELECT user_id, \(category), title, body, data, \(asOf), expires_at, dedupe_key, \(runID), subject, critical,
                       in_inbox OR NOT EXISTS (SELECT 1 FROM active_device_tokens d WHERE d.user_id = input.user_id),
                       string_to_array(about, ',')::uuid[]
                  FROM input WHERE outcome = 'notified'
                ON CONFLICT (dedupe_key) DO NOTHING
                RETURNING id, user_id, dedupe_key, in_inbox
            ), to_queue AS (
                SELECT i.id AS notification_id, d.id AS token_id, d.provider, coalesce(t.deliver_at, least(now(), \(asOf)::timestamptz)) AS due
                  FROM inserted i
                  JOIN input t ON t.dedupe_key = i.dedupe_key AND t.outcome = 'notified'
                  JOIN active_device_tokens d ON d.user_id = i.user_id
                 WHERE t.push
            ), queued AS (
                INSERT INTO deliveries (notification_id, device_token_id)
                SELECT notification_id, token_id FROM to_queue
                RETURNING id, notification_id, device_token_id
            ), enqueued AS (
                INSERT INTO delivery_queue (delivery_id, provider, next_attempt_at)
                SELECT q.id, w.provider, w.due
                  FROM queued q JOIN to_queue w ON w.notification_id = q.notification_id AND w.token_id = q.device_token_id
                RETURNING 1
            ), slotted AS (
                INSERT INTO daily_push_slots (notification_id, user_id, local_day, priority, scenario)
                SELECT i.id, i.user_id, t.slot_day, t.slot_priority, \(scenario)
                  FROM inserted i
                  JOIN input t ON t.dedupe_key = i.dedupe_key AND t.outcome = 'notified'
                 WHERE t.slot_day IS NOT NULL AND EXISTS (SELECT 1 FROM to_queue w WHERE w.notification_id = i.id) -- pushed only
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
            SELECT (SELECT count(*) FROM inserted), (SELECT count(*) FROM enqueued), (SELECT count(*) FROM decided),
                   (SELECT count(*) FROM slotted), (SELECT coalesce(array_agg(DISTINCT notification_id::text), '{}') FROM to_queue),
                   (SELECT count(*) FILTER (WHERE in_inbox) FROM inserted)
            """
        let counts = try connection.query(query)
        guard let row = counts.first else { throw JobFailure(.software, "recording a batch returned no counts") }
        let inserted: Int = try row.decode(0)
        let enqueued: Int = try row.decode(1)
        let pushed: [String] = try row.decode(4)
        if !pushed.isEmpty {
            // Checked again with a fresh snapshot: what the app committed since the candidates were read (a
            // pause, a deactivation, pushes switched off) found none of this batch's pushes to cancel (0028).
            try connection.execute("SELECT cancel_unwanted_new_pushes(\(PostgresArray(pushed))::uuid[])")
        }
        // Listed in the inbox: a push-only notification is stored for its push and not listed.
        summary.inboxRows += try row.decode(5, as: Int.self)
        summary.deliveries += enqueued
        summary.duplicates += planned - inserted
        summary.displaced += try cancel(displaced, pushed: pushed)
    }

    /// Cancels the pushes that gave their daily slot to one of the batch's new pushes (`pushed`), where that one
    /// still waits: one cancelled by the check above takes no slot, and the push it would have displaced goes
    /// out (both were lost). Returns how many gave their slot up.
    private func cancel(_ displaced: [Displacement], pushed: [String]) throws -> Int {
        guard !displaced.isEmpty, !pushed.isEmpty else { return 0 }
        let why = "capped: gave its daily slot to a higher-priority \(scenario) push"
        let freed = try connection.query("""
            WITH gave_up AS (
                SELECT v.id, n.id AS taker, v.note
                  FROM unnest(\(PostgresArray(displaced.map(\.victim.notificationID)))::uuid[], \(PostgresArray(displaced.map(\.by)))::text[],
                              \(PostgresArray(displaced.map(\.note)))::text[]) AS v(id, taken_by, note)
                  JOIN notifications n ON n.dedupe_key = v.taken_by AND n.id = ANY(\(PostgresArray(pushed))::uuid[])
                 WHERE EXISTS (SELECT 1 FROM deliveries d JOIN delivery_queue q ON q.delivery_id = d.id WHERE d.notification_id = n.id)
            ), slot_freed AS (
                DELETE FROM daily_push_slots s USING gave_up g WHERE s.notification_id = g.id
                RETURNING 1
            ), listed AS (
                -- A push-only notification that gave up its push is listed in the inbox, or the user never sees it.
                UPDATE notifications n SET in_inbox = true FROM gave_up g WHERE n.id = g.id AND NOT n.in_inbox
                RETURNING 1
            ), cancelled AS (
                UPDATE deliveries d SET state = 'cancelled', last_error = \(why), updated_at = now()
                  FROM gave_up g
                 WHERE d.notification_id = g.id AND d.state = 'pending'
                RETURNING d.id, d.attempts
            ), cancel_dequeued AS (
                DELETE FROM delivery_queue q USING cancelled c WHERE q.delivery_id = c.id
                RETURNING 1
            ), cancel_events AS (
                INSERT INTO delivery_events (delivery_id, event, attempt, detail)
                SELECT id, 'cancelled', attempts, \(why) FROM cancelled
                RETURNING 1
            ), noted AS (
                UPDATE decisions x SET detail = x.detail || g.note FROM gave_up g
                 WHERE x.notification_id = g.taker AND x.job_run_id = \(runID)
                RETURNING 1
            )
            SELECT count(*) FROM slot_freed
            """)
        return try freed.first!.decode(0)
    }
}
