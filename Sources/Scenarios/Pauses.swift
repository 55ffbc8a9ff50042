import Foundation
import Postgres
import ScenarioEngine

extension SuppressionReason {
    /// The peer mentor is on an availability pause now.
    public static let paused = SuppressionReason("paused")
}

/// The availability pause a mentor is on now, as the scenarios that respect pauses read it.
struct CurrentPause {
    var since: Date
    var until: Date?
    var reason: String?

    /// The select list that reads `u`'s current pause from the lateral join `pause` of `pauseJoin`.
    static let columns: Query = "pause.starts_at AS paused_since, pause.ends_at AS paused_until, pause.reason AS pause_reason"

    /// A lateral join on the latest pause of mentor `mentor` (an SQL expression) that covers `now`.
    static func join(mentor: StaticString, now: Date) -> Query {
        """
        LEFT JOIN LATERAL (SELECT p.starts_at, p.ends_at, p.reason FROM availability_pauses p
                            WHERE p.mentor_id = \(sql: mentor) AND p.starts_at <= \(now) AND (p.ends_at IS NULL OR p.ends_at > \(now))
                            ORDER BY p.starts_at DESC LIMIT 1) pause ON true
        """
    }

    /// A pause's `ends_at` as the scenarios use it: none (until further notice) when NULL or `infinity`.
    static func end(_ endsAt: Date?) -> Date? {
        endsAt == .distantFuture ? nil : endsAt
    }

    /// The pause of a candidate row that selected `columns`, if the mentor is paused.
    init?(_ row: CandidateRow) throws {
        guard let since = try row.decode("paused_since", as: Date?.self) else { return nil }
        self.since = since
        until = CurrentPause.end(try row.decode("paused_until", as: Date?.self))
        reason = try row.decode("pause_reason", as: String?.self)
    }

    /// "paused since 2026-06-01 until 2026-06-20 (Ferie)", for decisions and the plan: the dates on the
    /// mentor's clock (`zone`), so a pause from local midnight does not read as starting the day before.
    func detail(in zone: String) -> String {
        var text = "paused since \(LocalClock.day(of: since, zone: zone))"
        text += until.map { " until \(LocalClock.day(of: $0, zone: zone))" } ?? " until further notice"
        if let reason, !reason.isEmpty { text += " (\(reason))" }
        return text
    }
}
