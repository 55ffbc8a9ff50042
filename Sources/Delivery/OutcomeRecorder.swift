import Foundation
import Postgres

/// Buffers delivery outcomes and writes them in one statement per flush: the deliveries' new state
/// and one `delivery_events` row each; retired tokens, with their other open deliveries settled.
final class OutcomeRecorder {
    let connection: Connection
    /// One delivery's new state. `state`, `nextAttempt`, `error`, `messageID` nil keep the stored value;
    /// `event` nil writes no event (a release).
    private struct Outcome {
        var id: Int
        var state: String?
        var attempts: Int
        var nextAttempt: Date?
        var error: String?
        var messageID: String?
        var event: String?
        var status: Int?
        var lease: String
    }
    private var outcomes: [Outcome] = []
    private var retirements: [(tokenID: Int, reason: String, since: Date?, deliveryID: Int)] = []

    init(connection: Connection) { self.connection = connection }

    var pending: Int { outcomes.count }

    /// Whether a release is among the outcomes (a claim must not overtake it: it would miss the row).
    private(set) var hasReleases = false

    func settle(_ claimed: OutboxEngine.Claimed, state: String, event: String, error: String?, status: Int?,
                messageID: String? = nil, attempts attempt: Int? = nil, nextAttempt: Date? = nil) {
        outcomes.append(Outcome(id: claimed.deliveryID, state: state, attempts: attempt ?? claimed.attempts, nextAttempt: nextAttempt,
                                error: error, messageID: messageID, event: event, status: status, lease: claimed.lease))
    }

    /// The deliveries buffered as sent (for a message when they cannot be recorded).
    var sentIDs: [Int] { outcomes.filter { $0.state == "sent" }.map(\.id) }

    /// Gives a claimed delivery back unsent, due now, with no attempt counted.
    func release(_ claimed: OutboxEngine.Claimed) {
        outcomes.append(Outcome(id: claimed.deliveryID, state: nil, attempts: claimed.attempts, nextAttempt: Date(),
                                error: nil, messageID: nil, event: nil, status: nil, lease: claimed.lease))
        hasReleases = true
    }

    func retire(tokenID: Int, reason: String, since: Date?, deliveryID: Int) {
        retirements.append((tokenID, reason, since, deliveryID))
    }

    /// Writes what is buffered; returns how many tokens were retired.
    func flush() throws -> Int {
        guard !outcomes.isEmpty || !retirements.isEmpty else { return 0 }
        var retired = 0
        try connection.transaction {
            if !outcomes.isEmpty {
                let ids = PostgresArray(outcomes.map(\.id))
                // Lock in id order, so two engines flushing overlapping rows cannot deadlock; and find the rows
                // by primary key, one index probe each, whatever the planner estimates (a hash join read the whole
                // table for them, and a bitmap scan per row costs more than the probe).
                try connection.execute("SELECT 1 FROM deliveries WHERE id = ANY(\(ids)::bigint[]) ORDER BY id FOR UPDATE")
                try connection.execute("""
                    SELECT set_config('enable_hashjoin', 'off', true), set_config('enable_mergejoin', 'off', true),
                           set_config('enable_bitmapscan', 'off', true)
                    """)
                // Written only while the claim is still ours (next_attempt_at unchanged since the claim) and
                // the delivery still open; a push that went out is recorded as sent even after a lost claim.
                // The event rows come from the update's own RETURNING: what was not written logs nothing.
                try connection.execute("""
                    WITH updated AS (
                        UPDATE deliveries d
                           SET state = coalesce(i.state, d.state), attempts = greatest(d.attempts, i.attempts),
                               next_attempt_at = coalesce(i.next_attempt_at, d.next_attempt_at),
                               last_error = coalesce(i.error, d.last_error),
                               provider_message_id = coalesce(i.message_id, d.provider_message_id),
                               sent_at = CASE WHEN i.state = 'sent' THEN now() ELSE d.sent_at END,
                               updated_at = now()
                          FROM unnest(\(ids)::bigint[], \(PostgresArray(outcomes.map(\.state)))::text[],
                                      \(PostgresArray(outcomes.map(\.attempts)))::int[], \(PostgresArray(outcomes.map(\.nextAttempt)))::timestamptz[],
                                      \(PostgresArray(outcomes.map(\.error)))::text[], \(PostgresArray(outcomes.map(\.messageID)))::text[],
                                      \(PostgresArray(outcomes.map(\.event)))::text[], \(PostgresArray(outcomes.map(\.status)))::int[],
                                      \(PostgresArray(outcomes.map(\.lease)))::text[])
                               AS i(id, state, attempts, next_attempt_at, error, message_id, event, status, lease)
                         WHERE d.id = i.id AND d.state IN ('pending', 'retrying')
                           AND (d.next_attempt_at = i.lease::timestamptz OR i.state = 'sent')
                        RETURNING d.id, i.event, i.attempts, i.status, i.error
                    )
                    INSERT INTO delivery_events (delivery_id, event, attempt, provider_status, detail)
                    SELECT id, event, attempts, status, error FROM updated WHERE event IS NOT NULL
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
        outcomes.removeAll(keepingCapacity: true)
        retirements.removeAll()
        return retired
    }
}
