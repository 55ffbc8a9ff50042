import Foundation
import Postgres
import ScenarioEngine
import TextCoding

/// Reminds a peer mentor of an assignment they have not acknowledged: once per assignment, ever, when it
/// is still active and was dispatched at least `follow_up_days` (default 10) ago, counted in calendar days
/// on the mentor's clock (`ElapsedDays`).
///
/// - Candidates: active assignments with no read receipt, dispatched `follow_up_days` or more before now,
///   of peer mentors still in the organization, not reminded before (the dedupe key names the assignment).
/// - An assignment given to another mentor (0041) is dispatched to them then: the days count from the
///   hand-over, a receipt from before it is the previous mentor's, and the key names the mentor too, so the
///   new mentor is reminded in their turn.
/// - A mentor paused now is not reminded while the pause lasts; the decision names the pause. The
///   assignment stays a candidate, so the reminder comes on the first run after the pause ends, if it is
///   still unacknowledged by then.
/// - The tap opens the assignment (`/assignments/<id>`). A push still waiting when the assignment is
///   withdrawn, completed or acknowledged is cancelled by the database in that same transaction.
public struct AssignmentFollowUp: Scenario {
    public struct Settings: Sendable {
        public var followUpDays: Int
    }

    public struct Candidate {
        var assignmentID: UUID
        var title: String
        /// When the assignment was dispatched to this mentor: at its dispatch, or when it was handed over.
        var dispatchedAt: Date
        /// The end of its dedupe key (`Handover.keySuffix`).
        var keySuffix: String
        var pause: CurrentPause?
    }

    public init() {}

    public var key: String { "assignment_follow_up" }
    public var jobName: String { "assignment-follow-up" }
    public var abstract: String { "Remind peer mentors, once, of an assignment they have not acknowledged after their organization's follow-up days." }
    public var category: NotificationCategory { .assignmentFollowUp }
    public var suppressionReasons: [SuppressionReason] { [.paused] }

    public func settings(_ reader: SettingsReader) throws -> Settings {
        Settings(followUpDays: try reader.integer("follow_up_days", in: 1...90))
    }

    public func candidateQuery(rules: [OrganizationRule<Settings>], now: Date) -> Query {
        let organizations = PostgresArray(rules.map(\.organizationID))
        let days = PostgresArray(rules.map(\.settings.followUpDays))
        return """
            SELECT a.mentor_id AS user_id, 'assignment:' || a.id AS subject,
                   a.id AS assignment_id, a.title, \(Handover.dispatchedToMentor) AS dispatched_at,
                   \(Handover.keySuffix) AS key_suffix, \(CurrentPause.columns)
              FROM unnest(\(organizations)::uuid[], \(days)::int[]) AS r(organization_id, follow_up_days)
              JOIN assignments a ON a.organization_id = r.organization_id AND a.state = 'active'
                                AND \(ElapsedDays.possiblyAtLeast("r.follow_up_days", before: now, since: "a.dispatched_at"))
              JOIN users u ON u.id = a.mentor_id AND u.organization_id = a.organization_id
                          AND u.role = 'peer_mentor' AND u.deactivated_at IS NULL
              \(CurrentPause.join(mentor: "a.mentor_id", now: now))
              CROSS JOIN LATERAL (SELECT \(Recipient.knownTimeZone) AS name) zone
             WHERE \(ElapsedDays.atLeast("r.follow_up_days", before: now, since: Handover.dispatchedToMentor, zone: "zone.name"))
               AND NOT EXISTS (SELECT 1 FROM assignment_read_receipts rr
                                WHERE \(Handover.acknowledgedByMentor(before: now)))
               AND NOT EXISTS (SELECT 1 FROM notifications n
                                WHERE n.dedupe_key = 'assignment_follow_up:' || a.id || \(Handover.keySuffix))
            """
    }

    public func candidate(_ row: CandidateRow) throws -> Candidate {
        Candidate(assignmentID: try row.decode("assignment_id"), title: try row.decode("title"),
                  dispatchedAt: try row.decode("dispatched_at"), keySuffix: try row.decode("key_suffix"), pause: try CurrentPause(row))
    }

    public func decide(_ candidate: Candidate, recipient: Recipient, rule: OrganizationRule<Settings>, now: Date) -> Decision {
        // `-infinity` (written before 0054 refused it): the mentor was told "739949 days ago". (An `infinity` is never
        // due, like any dispatch in the future.)
        if candidate.dispatchedAt == .distantPast {
            return .suppress(.invalidData, detail: "assignments.dispatched_at of assignment \(candidate.assignmentID.lowercasedString) (\"\(candidate.title)\") is -infinity: no days can be counted from it; skipped until the row is fixed")
        }
        let days = ElapsedDays.between(candidate.dispatchedAt, now, zone: recipient.timeZone)
        if let pause = candidate.pause {
            return .suppress(.paused, detail: "\(pause.detail(in: recipient.timeZone)); reminded about \"\(candidate.title)\" once the pause is over, if still unacknowledged")
        }
        let id = candidate.assignmentID.lowercasedString
        let message = rule.messages.render(recipient.language, ["name": recipient.displayName, "title": candidate.title, "days": days, "one_day": days == 1])
        return .notify(NotificationDraft(
            title: message.title,
            body: message.body,
            data: [("category", category.rawValue), ("route", "/assignments/\(id)"), ("assignment_id", id)],
            dedupeKey: "assignment_follow_up:\(id)\(candidate.keySuffix)",
            expiresAt: nil,
            why: "assignment \"\(candidate.title)\" dispatched \(days) days ago (\(LocalClock.day(of: candidate.dispatchedAt, zone: recipient.timeZone))), not acknowledged (follow-up after \(rule.settings.followUpDays) days)"))
    }
}

