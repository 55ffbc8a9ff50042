import Foundation
import Postgres
import ScenarioEngine

/// Buffers delivery outcomes and writes them in one statement per flush: the deliveries' new state
/// and one `delivery_events` row each; retired tokens, with their other open deliveries settled.
final class OutcomeRecorder {
    /// Where `flush` writes: the writer's connection of the moment, set when the write starts (it may have
    /// reconnected since this recorder was made).
    var connection: Connection
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
    /// Deliveries to cancel as the app's own cancels do (0025's `cancel_deliveries`), by reason.
    private var cancellations: [String: [(id: Int, lease: String)]] = [:]
    /// Endpoints whose provider named when to come back (0030's `endpoint_holds`), by endpoint.
    private var holds: [String: (until: Date, reason: String)] = [:]
    /// Setups a push just proved right (0035's `confirmed_setups`), by endpoint.
    private var confirmations: [String: String] = [:]
    /// Postponed pushes and the recipient's local day (yyyy-mm-dd) they now go on: their daily slot moves there.
    private var slotMoves: [(id: Int, day: String)] = []
    /// Where what goes wrong on the side is said (the engine's log).
    var warn: (String) -> Void = { _ in }

    init(connection: Connection) { self.connection = connection }

    var pending: Int { outcomes.count + cancellations.values.reduce(0) { $0 + $1.count } }

    /// Whether a release is among the outcomes (a claim must not overtake it: it would miss the row).
    private(set) var hasReleases = false

    func settle(_ claimed: OutboxEngine.Claimed, state: String, event: String, error: String?, status: Int?,
                messageID: String? = nil, attempts attempt: Int? = nil, nextAttempt: Date? = nil) {
        outcomes.append(Outcome(id: claimed.deliveryID, state: state, attempts: attempt ?? claimed.attempts, nextAttempt: nextAttempt,
                                error: error, messageID: messageID, event: event, status: status, lease: claimed.lease))
    }

    /// The deliveries buffered as sent (for a message when they cannot be recorded).
    var sentIDs: [Int] { outcomes.filter { $0.state == "sent" }.map(\.id) }

    /// Gives a claimed delivery back unsent, with no attempt counted: its lease cleared, it is due again at once.
    func release(_ claimed: OutboxEngine.Claimed) {
        outcomes.append(Outcome(id: claimed.deliveryID, state: nil, attempts: claimed.attempts, nextAttempt: nil,
                                error: nil, messageID: nil, event: nil, status: nil, lease: claimed.lease))
        hasReleases = true
    }

    /// Gives a claimed delivery back unsent, due at `until`, with no attempt counted (its recipient's quiet hours).
    /// Its history says so with a `postponed` event (migration 0027).
    /// Its daily slot, if it took one on an earlier day, moves to the day it now goes on (`moveSlots`).
    func postpone(_ claimed: OutboxEngine.Claimed, until: Date) {
        outcomes.append(Outcome(id: claimed.deliveryID, state: nil, attempts: claimed.attempts, nextAttempt: until,
                                error: "inside its recipient's quiet hours: due when they end, \(Timestamp.iso8601(until))",
                                messageID: nil, event: "postponed", status: nil, lease: claimed.lease))
        if let zone = claimed.quietHours?.zone, LocalClock.isKnown(zone) {
            slotMoves.append((claimed.deliveryID, LocalClock.day(of: until, zone: zone)))
        }
    }

    /// Moves the daily slots of pushes postponed past their local midnight to the day they now go on (0052): counted
    /// on the day decided, the next day let its whole cap go out beside them. Only a push whose postponement was
    /// written (still queued, its lease cleared) and none of whose notification's pushes went out or is on its way.
    /// After the outcome write, in a transaction of its own that takes the old and the new day's locks as the jobs'
    /// recorder does (`DailySlots`: per user and day, in one sorted order, before any row) and holds no queue row, so
    /// it cannot close a circle with a recorder that waits for queue rows. A failure is logged, never thrown: the
    /// outcomes are written, and writing them again would repeat their events.
    private func moveSlots() {
        guard !slotMoves.isEmpty else { return }
        let ids = PostgresArray(slotMoves.map(\.id)), days = PostgresArray(slotMoves.map(\.day))
        let moving: Query = """
            SELECT DISTINCT s.notification_id, s.user_id, s.local_day, m.day
              FROM unnest(\(ids)::bigint[], \(days)::date[]) AS m(delivery_id, day)
              JOIN deliveries d ON d.id = m.delivery_id
              JOIN delivery_queue q ON q.delivery_id = d.id AND q.lease_until IS NULL
              JOIN daily_push_slots s ON s.notification_id = d.notification_id AND s.local_day < m.day
             WHERE NOT EXISTS (SELECT 1 FROM deliveries o WHERE o.notification_id = d.notification_id AND (o.state = 'sent' OR o.sent_at IS NOT NULL))
               AND NOT EXISTS (SELECT 1 FROM deliveries o JOIN delivery_queue oq ON oq.delivery_id = o.id
                                WHERE o.notification_id = d.notification_id AND oq.lease_until IS NOT NULL)
            """
        do {
            try connection.transaction {
                _ = try connection.query("""
                    SELECT pg_advisory_xact_lock(k) FROM (
                        SELECT DISTINCT hashtextextended('daily_push_slots:' || user_id || ':' || to_char(day, 'YYYY-MM-DD'), 0) AS k
                          FROM (\(moving)) AS moving(notification_id, user_id, local_day, target)
                         CROSS JOIN LATERAL (VALUES (local_day), (target)) AS days(day)
                         ORDER BY 1) keys
                    """)
                try connection.execute("""
                    UPDATE daily_push_slots s SET local_day = m.target, moved_from = coalesce(s.moved_from, s.local_day)
                      FROM (\(moving)) AS m(notification_id, user_id, local_day, target)
                     WHERE s.notification_id = m.notification_id
                    """)
            }
        } catch {
            warn("the daily slots of \(slotMoves.count) postponed push(es) stay on the day they were decided: \(error)")
        }
    }

    /// Cancels a claimed delivery, never sent: taken out of the queue, `cancelled` with an event saying why, its
    /// daily slot freed, and a push-only notification with no other push listed in the inbox (0026).
    func cancel(_ claimed: OutboxEngine.Claimed, reason: String) {
        cancellations[reason, default: []].append((claimed.deliveryID, claimed.lease))
    }

    func retire(tokenID: Int, reason: String, since: Date?, deliveryID: Int) {
        retirements.append((tokenID, reason, since, deliveryID))
    }

    /// Holds an endpoint's pushes, in every run, until `until` (a Retry-After it was answered).
    func hold(_ endpoint: String, until: Date, reason: String) {
        if let held = holds[endpoint], held.until >= until { return }
        holds[endpoint] = (until, reason)
    }

    /// Notes that a push to `endpoint` succeeded with `setup` (0035).
    func confirm(_ endpoint: String, setup: String) {
        confirmations[endpoint] = setup
    }

    /// Withdraws every proof of `endpoint`'s setup (0035): too many of its tokens answered as if it were wrong.
    func withdrawProof(_ endpoint: String) {
        withdrawals.insert(endpoint)
    }
    private var withdrawals = Set<String>()

    /// Writes what is buffered; returns how many tokens were retired.
    func flush() throws -> Int {
        guard !outcomes.isEmpty || !retirements.isEmpty || !cancellations.isEmpty || !holds.isEmpty || !confirmations.isEmpty
                || !withdrawals.isEmpty else { return 0 }
        var retired = 0
        try connection.transaction {
            if !outcomes.isEmpty && !cancellations.isEmpty {
                // Two passes over queue rows (the outcomes', then the cancels'): all locked in id order first.
                let all = (outcomes.map(\.id) + cancellations.values.joined().map(\.id)).sorted()
                try connection.execute("SELECT delivery_id FROM delivery_queue WHERE delivery_id = ANY(\(PostgresArray(all))::bigint[]) ORDER BY delivery_id FOR UPDATE")
            }
            if !outcomes.isEmpty {
                outcomes.sort { $0.id < $1.id }
                let ids = PostgresArray(outcomes.map(\.id))
                // Rows are found by primary key, one index probe each in the order of `ids`, whatever the planner
                // estimates (a hash join read the whole table for them, and a bitmap scan per row costs more than
                // the probe). So the statement below locks its rows in id order, and two engines flushing
                // overlapping rows cannot deadlock, unless one flush both takes rows out of the queue and keeps
                // others in: those are two passes, so such a flush locks all of its rows in id order first.
                let keeps = outcomes.contains { $0.state == nil || $0.state == "retrying" }
                let takesOut = outcomes.contains { $0.state != nil && $0.state != "retrying" }
                if keeps && takesOut {
                    try connection.execute("SELECT delivery_id FROM delivery_queue WHERE delivery_id = ANY(\(ids)::bigint[]) ORDER BY delivery_id FOR UPDATE")
                }
                try connection.execute("""
                    SELECT set_config('enable_hashjoin', 'off', true), set_config('enable_mergejoin', 'off', true),
                           set_config('enable_bitmapscan', 'off', true)
                    """)
                // Written only while the claim is still ours (the queue row's lease unchanged since the claim): a
                // final outcome takes the row out of the queue, a retry moves it to its next attempt, a release
                // clears the lease. A push that went out is recorded as sent even after a lost claim, as long as
                // the delivery is still queued; nothing reopens a delivery that left the queue. Only the rows
                // written get their deliveries update and their event. One that went out after its delivery left the
                // queue (cancelled by the app while the push was on the wire, settled with its retired token, sent
                // by another engine after a lost claim) keeps its state and the time it got it (`updated_at`), but its
                // history says it went out, and when (`sent_at`, its attempt, a `sent` event): it said cancelled, and
                // nothing of the push that reached the phone.
                try connection.execute("""
                    WITH i AS (
                        SELECT * FROM unnest(\(ids)::bigint[], \(PostgresArray(outcomes.map(\.state)))::text[],
                                      \(PostgresArray(outcomes.map(\.attempts)))::int[], \(PostgresArray(outcomes.map(\.nextAttempt)))::timestamptz[],
                                      \(PostgresArray(outcomes.map(\.error)))::text[], \(PostgresArray(outcomes.map(\.messageID)))::text[],
                                      \(PostgresArray(outcomes.map(\.event)))::text[], \(PostgresArray(outcomes.map(\.status)))::int[],
                                      \(PostgresArray(outcomes.map(\.lease)))::text[])
                               AS i(id, state, attempts, next_attempt_at, error, message_id, event, status, lease)
                    ), dequeued AS (
                        DELETE FROM delivery_queue q USING i
                         WHERE q.delivery_id = i.id AND i.state <> 'retrying'
                           AND (q.lease_until = i.lease::timestamptz OR i.state = 'sent')
                        RETURNING i.*
                    ), requeued AS (
                        UPDATE delivery_queue q SET next_attempt_at = coalesce(i.next_attempt_at, q.next_attempt_at), lease_until = NULL,
                                                    lost_in_a_row = CASE WHEN i.state IS NULL THEN q.lost_in_a_row ELSE 0 END
                          FROM i
                         WHERE q.delivery_id = i.id AND (i.state IS NULL OR i.state = 'retrying') AND q.lease_until = i.lease::timestamptz
                        RETURNING i.*
                    ), updated AS (
                        UPDATE deliveries d
                           SET state = k.state, attempts = greatest(d.attempts, k.attempts),
                               last_error = coalesce(k.error, d.last_error),
                               provider_message_id = coalesce(k.message_id, d.provider_message_id),
                               sent_at = CASE WHEN k.state = 'sent' THEN now() ELSE d.sent_at END,
                               updated_at = now()
                          FROM (SELECT * FROM dequeued UNION ALL SELECT * FROM requeued WHERE state IS NOT NULL) k
                         WHERE d.id = k.id
                        RETURNING d.id, k.event, k.attempts, k.status, k.error
                    ), late AS (
                        UPDATE deliveries d
                           SET sent_at = coalesce(d.sent_at, now()), provider_message_id = coalesce(d.provider_message_id, k.message_id),
                               attempts = greatest(d.attempts, k.attempts)
                          FROM i k
                         WHERE d.id = k.id AND k.state = 'sent' AND k.id NOT IN (SELECT id FROM dequeued)
                        RETURNING d.id, k.attempts, k.status, d.state
                    )
                    INSERT INTO delivery_events (delivery_id, event, attempt, provider_status, detail)
                    SELECT id, event, attempts, status, error FROM updated WHERE event IS NOT NULL
                    UNION ALL
                    SELECT id, event, attempts, status, error FROM requeued WHERE state IS NULL AND event IS NOT NULL
                    UNION ALL
                    SELECT id, 'sent', attempts, status, 'the push went out after the delivery was ' || state || ': it was already on its way' FROM late
                    """)
            }
            for (reason, rows) in cancellations.sorted(by: { $0.key < $1.key }) {
                let rows = rows.sorted { $0.id < $1.id }
                // Only rows still ours, their claim given up first: a claimed push cancelled keeps its daily slot
                // (it may be on the wire, 0025), and this one never left.
                let mine: [Int] = try connection.query("""
                    UPDATE delivery_queue q SET lease_until = NULL
                      FROM unnest(\(PostgresArray(rows.map(\.id)))::bigint[], \(PostgresArray(rows.map(\.lease)))::text[]) AS c(id, lease)
                     WHERE q.delivery_id = c.id AND q.lease_until = c.lease::timestamptz
                    RETURNING q.delivery_id
                    """).map { try $0.decode(0) }
                guard !mine.isEmpty else { continue }
                let list = PostgresArray(mine.sorted())
                try connection.execute("SELECT cancel_deliveries(\(list)::bigint[], \(reason))")
                try connection.execute("SELECT list_unpushed(array(SELECT DISTINCT notification_id FROM deliveries WHERE id = ANY(\(list)::bigint[])))")
            }
            for retirement in retirements {
                let reason = "device token retired: \(retirement.reason)"
                // The token's other queued deliveries are settled as failed: their queue rows locked in id order
                // first, like a flush does, then taken out of the queue. A row someone holds is skipped: this is a
                // second pass after the outcome write's (out of id order), and the app cancelling those pushes at
                // that moment locks them, then the write's next; waiting closed a circle. Its holder settles it, or
                // the next claim finds its token retired.
                // The token's row is taken with SKIP LOCKED: this write already holds queue rows, and the app
                // changing the token (moving it to another user: 0025's cancel, which locks its queue rows)
                // holds the row first; waiting could close a circle. A token the app is changing at that very
                // moment (registering it again, moving it) is left as it is: the delivery is settled all the same.
                let result = try connection.query("""
                    WITH token AS (
                        SELECT id FROM device_tokens WHERE id = \(retirement.tokenID) FOR NO KEY UPDATE SKIP LOCKED
                    ), retired AS (
                        UPDATE device_tokens SET retired_at = now(), retired_reason = \(retirement.reason)
                         WHERE id IN (SELECT id FROM token) AND retired_at IS NULL
                           AND (\(retirement.since)::timestamptz IS NULL OR last_seen_at <= \(retirement.since)::timestamptz)
                        RETURNING id
                    ), open AS (
                        SELECT q.delivery_id FROM delivery_queue q JOIN deliveries d ON d.id = q.delivery_id
                         WHERE d.device_token_id IN (SELECT id FROM retired) AND d.id <> \(retirement.deliveryID)
                         ORDER BY q.delivery_id
                           FOR UPDATE OF q SKIP LOCKED
                    ), dequeued AS (
                        DELETE FROM delivery_queue q USING open o WHERE q.delivery_id = o.delivery_id
                        RETURNING q.delivery_id
                    ), settled AS (
                        UPDATE deliveries SET state = 'failed', last_error = \(reason), updated_at = now()
                         WHERE id IN (SELECT delivery_id FROM dequeued)
                        RETURNING id, attempts
                    ), logged AS (
                        INSERT INTO delivery_events (delivery_id, event, attempt, detail)
                        SELECT id, 'failed', attempts, \(reason) FROM settled
                    )
                    SELECT count(*) FROM retired
                    """)
                retired += try result.first!.decode(0, as: Int.self)
            }
            // Last, after every queue row this write locks: two flushes holding the same endpoint wait for each
            // other here, never in a circle. A hold is only ever lengthened.
            for (endpoint, hold) in holds.sorted(by: { $0.key < $1.key }) {
                try connection.execute("""
                    INSERT INTO endpoint_holds (endpoint, held_until, reason) VALUES (\(endpoint), \(hold.until)::timestamptz, \(hold.reason))
                    ON CONFLICT (endpoint) DO UPDATE SET held_until = EXCLUDED.held_until, reason = EXCLUDED.reason, held_at = now()
                     WHERE endpoint_holds.held_until < EXCLUDED.held_until
                    """)
            }
            // Last: the rows locked above come first in every writer, so two writers never wait on each other here.
            for endpoint in withdrawals.sorted() {
                try connection.execute("DELETE FROM confirmed_setups WHERE endpoint = \(endpoint)")
            }
            for (endpoint, setup) in confirmations.sorted(by: { $0.key < $1.key }) {
                try connection.execute("""
                    INSERT INTO confirmed_setups (endpoint, setup) VALUES (\(endpoint), \(setup))
                    ON CONFLICT (endpoint, setup) DO UPDATE SET confirmed_at = now()
                    """)
            }
        }
        moveSlots()
        outcomes.removeAll(keepingCapacity: true)
        retirements.removeAll()
        cancellations.removeAll()
        holds.removeAll()
        confirmations.removeAll()
        withdrawals.removeAll()
        slotMoves.removeAll()
        return retired
    }
}
