import Foundation
import Postgres
import ScenarioEngine
import TextCoding

/// Tells a peer mentor, seconds after a coordinator dispatches it, that they have a new assignment
/// (event `assignment_dispatched`). Once per assignment; nothing when it was withdrawn, completed or
/// acknowledged before it was decided (and the database cancels a push still waiting when that happens).
/// An assignment given to another mentor is new to them (0041): they are told as well, once. Several events of one
/// assignment decided together (handed over twice before a run) are one candidate: its mentor now.
/// The tap opens the assignment (`/assignments/<id>`).
public struct NewAssignment: EventScenario {
    public struct Settings: Sendable {}

    public struct Candidate {
        var assignmentID: UUID
        var title: String
        var coordinatorName: String?
        /// The end of its dedupe key (`Handover.keySuffix`).
        var keySuffix: String
    }

    public init() {}

    public var key: String { "new_assignment" }
    public var jobName: String { "event-notify" }
    public var abstract: String { "Tell a peer mentor about a new assignment as soon as it is dispatched." }
    public var category: NotificationCategory { .newAssignment }
    public var eventKinds: [String] { ["assignment_dispatched"] }

    public func settings(_ reader: SettingsReader) throws -> Settings { Settings() }

    public func candidateQuery(rules: [OrganizationRule<Settings>], events: EventSelection, now: Date) -> Query {
        """
        SELECT DISTINCT ON (a.id) a.mentor_id AS user_id, 'assignment:' || a.id AS subject, a.id AS assignment_id, a.title, c.display_name AS coordinator_name,
               \(Handover.keySuffix) AS key_suffix
          FROM events e
          JOIN assignments a ON a.id = e.subject_id::uuid AND a.state = 'active'
          JOIN users u ON u.id = a.mentor_id AND u.role = 'peer_mentor' AND u.deactivated_at IS NULL
          LEFT JOIN users c ON c.id = a.coordinator_id
         WHERE \(events.condition) AND e.kind = 'assignment_dispatched'
           AND NOT EXISTS (SELECT 1 FROM assignment_read_receipts rr WHERE \(Handover.acknowledgedByMentor()))
         ORDER BY a.id, e.id DESC
        """
    }

    public func candidate(_ row: CandidateRow) throws -> Candidate {
        Candidate(assignmentID: try row.decode("assignment_id"), title: try row.decode("title"),
                  coordinatorName: try row.decode("coordinator_name", as: String?.self), keySuffix: try row.decode("key_suffix"))
    }

    public func decide(_ candidate: Candidate, recipient: Recipient, rule: OrganizationRule<Settings>, now: Date) -> Decision {
        let id = candidate.assignmentID.lowercasedString
        // No coordinator (or one without a name): the default text says "You have a new assignment" ("? has given
        // you" before).
        let coordinator = candidate.coordinatorName ?? ""
        let from = UnnamedPerson.isUnnamed(coordinator) ? "a coordinator without a name" : coordinator
        let message = rule.messages.render(recipient.language, ["title": candidate.title, "coordinator": coordinator])
        return .notify(NotificationDraft(
            title: message.title,
            body: message.body,
            data: [("category", category.rawValue), ("route", "/assignments/\(id)"), ("assignment_id", id)],
            dedupeKey: "new_assignment:\(id)\(candidate.keySuffix)",
            expiresAt: nil,
            why: "assignment \"\(candidate.title)\" dispatched by \(from)"))
    }
}
