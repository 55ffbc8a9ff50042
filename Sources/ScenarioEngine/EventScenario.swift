import Foundation
import Postgres

/// A scenario the database wakes instead of a timer: its candidates come from rows of `events` (appended
/// by triggers in the same transaction as the change they announce), not from a scan of the domain.
/// Everything else is a scenario's as usual: settings, the policies, the decision, the message.
///
/// The candidate query reads `events e` and keeps `\(events.condition)` in its WHERE clause: the events
/// the engine claimed for this batch, or, for a dry run, every event not processed yet.
public protocol EventScenario: Scenario, EventHandling {
    /// The `events.kind` values it answers.
    var eventKinds: [String] { get }

    /// The candidates the selected events give, as of `now`.
    func candidateQuery(rules: [OrganizationRule<Settings>], events: EventSelection, now: Date) -> Query
}

extension EventScenario {
    /// Most event scenarios decide each event on its own.
    public var decidesBySubject: Bool { false }

    /// As a scheduled scenario sees it (`--explain`): every event not processed yet.
    public func candidateQuery(rules: [OrganizationRule<Settings>], now: Date) -> Query {
        candidateQuery(rules: rules, events: .pending, now: now)
    }
}

/// Which events a candidate query reads (as a condition on `events e`).
public struct EventSelection {
    public let condition: Query

    /// Every event not processed yet (dry runs and `--explain`).
    public static var pending: EventSelection { EventSelection(condition: "e.processed_at IS NULL") }

    /// The events this batch claimed.
    public static func claimed(_ ids: [Int]) -> EventSelection {
        EventSelection(condition: "e.id = ANY(\(PostgresArray(ids))::bigint[])")
    }

    /// The organizations of the selected events of `kinds` (their mentors'): the only ones whose rules
    /// the events need, and whose invalid settings they can be passed over for.
    func organizations(kinds: [String], on connection: Connection) throws -> [UUID] {
        try connection.query("""
            SELECT DISTINCT u.organization_id FROM events e JOIN users u ON u.id = e.mentor_id
             WHERE \(condition) AND e.kind = ANY(\(PostgresArray(kinds))::text[])
            """).map { try $0.decode(0) }
    }
}
