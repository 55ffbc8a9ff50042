import Foundation
import Postgres
import ScenarioEngine
import TextCoding

/// Tells a peer mentor, as their Nth assignment is dispatched (organization setting `assignment_count`,
/// 3 for Blindeforbundet), that they are about to become eligible for an honorarium (event
/// `assignment_dispatched`). Off by default; on for the organizations that pay one. Withdrawn
/// assignments do not count. Once per mentor and count. The tap opens `/honorarium`. An assignment given to
/// the mentor by another's counts from the hand-over (0041).
public struct Honorarium: EventScenario {
    public struct Settings: Sendable {
        public var assignmentCount: Int
    }

    public struct Candidate {
        var count: Int
    }

    public init() {}

    public var key: String { "honorarium" }
    public var jobName: String { "event-notify" }
    public var abstract: String { "Tell a peer mentor when their Nth assignment makes them eligible for an honorarium." }
    public var category: NotificationCategory { .honorarium }
    public var eventKinds: [String] { ["assignment_dispatched"] }

    public func settings(_ reader: SettingsReader) throws -> Settings {
        Settings(assignmentCount: try reader.integer("assignment_count", in: 1...1000))
    }

    public func candidateQuery(rules: [OrganizationRule<Settings>], events: EventSelection, now: Date) -> Query {
        let organizations = PostgresArray(rules.map(\.organizationID))
        let counts = PostgresArray(rules.map(\.settings.assignmentCount))
        return """
            SELECT a.mentor_id AS user_id, 'honorarium:' || r.assignment_count AS subject, r.assignment_count AS count
              FROM events e
              JOIN assignments a ON a.id = e.subject_id::uuid AND a.state <> 'withdrawn'
              JOIN users u ON u.id = a.mentor_id AND u.role = 'peer_mentor' AND u.deactivated_at IS NULL
              JOIN unnest(\(organizations)::uuid[], \(counts)::int[]) AS r(organization_id, assignment_count)
                ON r.organization_id = u.organization_id
             WHERE \(events.condition) AND e.kind = 'assignment_dispatched'
               AND (SELECT count(*) FROM assignments x
                     WHERE x.mentor_id = a.mentor_id AND x.state <> 'withdrawn'
                       AND (greatest(x.dispatched_at, x.mentor_assigned_at), x.id) <= (\(Handover.dispatchedToMentor), a.id)) = r.assignment_count
               AND NOT EXISTS (SELECT 1 FROM notifications n
                                WHERE n.dedupe_key = 'honorarium:' || a.mentor_id || ':' || r.assignment_count)
            """
    }

    public func candidate(_ row: CandidateRow) throws -> Candidate {
        Candidate(count: try row.decode("count"))
    }

    public func decide(_ candidate: Candidate, recipient: Recipient, rule: OrganizationRule<Settings>, now: Date) -> Decision {
        let message = rule.messages.render(recipient.language, ["name": recipient.displayName, "count": candidate.count])
        return .notify(NotificationDraft(
            title: message.title,
            body: message.body,
            data: [("category", category.rawValue), ("route", "/honorarium"), ("assignments", String(candidate.count))],
            dedupeKey: "honorarium:\(recipient.userID.lowercasedString):\(candidate.count)",
            expiresAt: nil,
            why: "assignment number \(candidate.count) dispatched (the organization's honorarium threshold)"))
    }
}
