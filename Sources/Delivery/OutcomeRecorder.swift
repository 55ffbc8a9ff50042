import Foundation
import Postgres

/// Buffers delivery outcomes and writes them in one statement per flush: the deliveries' new state
/// and one `delivery_events` row each; retired tokens, with their other open deliveries settled.
final class OutcomeRecorder {
    let connection: Connection
    private var ids: [Int] = []
    private var states: [String?] = []
    private var attempts: [Int] = []
    private var nextAttempts: [Date?] = []
    private var errors: [String?] = []
    private var messageIDs: [String?] = []
    private var events: [String?] = []
    private var statuses: [Int?] = []
    private var leases: [String] = []
    private var retirements: [(tokenID: Int, reason: String, since: Date?, deliveryID: Int)] = []

    init(connection: Connection) { self.connection = connection }

    var pending: Int { ids.count }

    func settle(_ claimed: OutboxEngine.Claimed, state: String, event: String, error: String?, status: Int?,
                messageID: String? = nil, attempts attempt: Int? = nil, nextAttempt: Date? = nil) {
        ids.append(claimed.deliveryID)
        states.append(state)
        attempts.append(attempt ?? claimed.attempts)
        nextAttempts.append(nextAttempt)
        errors.append(error)
        messageIDs.append(messageID)
        events.append(event)
        statuses.append(status)
        leases.append(claimed.lease)
    }

    /// The deliveries buffered as sent (for a message when they cannot be recorded).
    var sentIDs: [Int] { zip(ids, states).filter { $0.1 == "sent" }.map(\.0) }

    /// Gives a claimed delivery back unsent, due now, with no attempt counted.
    func release(_ claimed: OutboxEngine.Claimed) {
        ids.append(claimed.deliveryID)
        states.append(nil)
        attempts.append(claimed.attempts)
        nextAttempts.append(Date())
        errors.append(nil)
        messageIDs.append(nil)
        events.append(nil)
        statuses.append(nil)
        leases.append(claimed.lease)
    }

    func retire(tokenID: Int, reason: String, since: Date?, deliveryID: Int) {
        retirements.append((tokenID, reason, since, deliveryID))
    }

    /// Writes what is buffered; returns how many tokens were retired.
    func flush() throws -> Int {
        guard !ids.isEmpty || !retirements.isEmpty else { return 0 }
        var retired = 0
        try connection.transaction {
            if !ids.isEmpty {
                // Lock in id order, so two engines flushing overlapping rows cannot deadlock.
                try connection.execute("SELECT 1 FROM deliveries WHERE id = ANY(\(PostgresArray(ids))::bigint[]) ORDER BY id FOR UPDATE")
                // Written only while the claim is still ours (next_attempt_at unchanged since the claim) and
                // the delivery still open; a push that went out is recorded as sent even after a lost claim.
                try connection.execute("""
                    WITH input AS (
                        SELECT * FROM unnest(\(PostgresArray(ids))::bigint[], \(PostgresArray(states))::text[], \(PostgresArray(attempts))::int[],
                                             \(PostgresArray(nextAttempts))::timestamptz[], \(PostgresArray(errors))::text[],
                                             \(PostgresArray(messageIDs))::text[], \(PostgresArray(events))::text[], \(PostgresArray(statuses))::int[],
                                             \(PostgresArray(leases))::text[])
                            AS t(id, state, attempts, next_attempt_at, error, message_id, event, status, lease)
                    ), updated AS (
                        UPDATE deliveries d
                           SET state = coalesce(i.state, d.state), attempts = greatest(d.attempts, i.attempts),
                               next_attempt_at = coalesce(i.next_attempt_at, d.next_attempt_at),
                               last_error = coalesce(i.error, d.last_error),
                               provider_message_id = coalesce(i.message_id, d.provider_message_id),
                               sent_at = CASE WHEN i.state = 'sent' THEN now() ELSE d.sent_at END,
                               updated_at = now()
                          FROM input i
                         WHERE d.id = i.id AND d.state IN ('pending', 'retrying')
                           AND (d.next_attempt_at = i.lease::timestamptz OR i.state = 'sent')
                        RETURNING d.id
                    )
                    INSERT INTO delivery_events (delivery_id, event, attempt, provider_status, detail)
                    SELECT i.id, i.event, i.attempts, i.status, i.error FROM input i JOIN updated u ON u.id = i.id
                     WHERE i.event IS NOT NULL
                    """)
            }
            for retirement in retirements {
                let reason = "device token retired: \(retirement.reason)"
                let result = try connection.query("""
                    WITH retired AS (
                        UPDATE device_tokens SET retired_at = now(), retired_reason = \(retirement.reason)
                         WHERE id = \(retirement.tokenID) AND retired_at IS NULL
                           AND (\(retirement.since)::timestamptz IS NULL OR last_seen_at <= \(retirement.since)::timestamptz)
                        RETURNING id
                    ), settled AS (
                        UPDATE deliveries SET state = 'failed', last_error = \(reason), updated_at = now()
                         WHERE device_token_id IN (SELECT id FROM retired) AND state IN ('pending', 'retrying')
                           AND id <> \(retirement.deliveryID)
                        RETURNING id, attempts
                    ), logged AS (
                        INSERT INTO delivery_events (delivery_id, event, attempt, detail)
                        SELECT id, 'failed', attempts, \(reason) FROM settled
                    )
                    SELECT count(*) FROM retired
                    """)
                retired += try result.first!.decode(0, as: Int.self)
            }
        }
        ids.removeAll(keepingCapacity: true)
        states.removeAll(keepingCapacity: true)
        attempts.removeAll(keepingCapacity: true)
        nextAttempts.removeAll(keepingCapacity: true)
        errors.removeAll(keepingCapacity: true)
        messageIDs.removeAll(keepingCapacity: true)
        events.removeAll(keepingCapacity: true)
        statuses.removeAll(keepingCapacity: true)
        leases.removeAll(keepingCapacity: true)
        retirements.removeAll()
        return retired
    }
}
