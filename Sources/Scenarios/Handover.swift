import Foundation
import Postgres
import TextCoding

/// An assignment given to another mentor is dispatched to that mentor then (migration 0041): the scenarios
/// about an assignment `a` count from the hand-over, take a read receipt from before it for the previous
/// mentor's, and key the new mentor's notifications apart from the first one's.
enum Handover {
    /// When assignment `a` was dispatched to its mentor: at its dispatch, or when it was given to them.
    static let dispatchedToMentor: Query = "greatest(a.dispatched_at, a.mentor_assigned_at)"

    /// Whether the read receipt `rr` says assignment `a`'s mentor acknowledged it by `now`.
    static func acknowledgedByMentor(before now: Date? = nil) -> Query {
        let by: Query = now.map { "rr.acknowledged_at <= \($0) AND " } ?? ""
        return "rr.assignment_id = a.id AND \(by)rr.acknowledged_at >= coalesce(a.mentor_assigned_at, '-infinity')"
    }

    /// The end of assignment `a`'s dedupe keys: `:<mentor id>@<hand-over, epoch µs>` once it was handed over, so
    /// each hand-over is its own (a second turn of the same mentor too); nothing for one its mentor has had from
    /// its dispatch (the keys written before 0041 stay theirs). A hand-over at ±infinity (written before 0054 refused
    /// it) is keyed by its text: converting it to a number stopped the whole job (exit 70). Selected as `key_suffix` by the candidate queries,
    /// so the decision writes exactly what the query looked for.
    static let keySuffix: Query = """
        CASE WHEN a.mentor_assigned_at IS NULL THEN ''
             WHEN NOT isfinite(a.mentor_assigned_at) THEN ':' || a.mentor_id || '@' || a.mentor_assigned_at::text
             ELSE ':' || a.mentor_id || '@' || (extract(epoch FROM a.mentor_assigned_at) * 1000000)::bigint END
        """
}
