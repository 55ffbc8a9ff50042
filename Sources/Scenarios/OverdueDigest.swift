import Foundation
import Postgres
import ScenarioEngine
import TextCoding

/// Tells each coordinator, in one digest a day, which assignments of the peer mentors in their scope
/// are still unacknowledged `overdue_days` (default 10) after dispatch.
///
/// - Cases: active assignments with no read receipt, dispatched `overdue_days` or more before now, whose
///   mentor is in the coordinator's `coordinator_scopes` (which the schema keeps inside one organization), or
///   which the coordinator dispatched (`assignments.coordinator_id`): a case whose mentor is in nobody's scope
///   reached nobody, and the seed asks that "the responsible coordinator" hears of it.
///   A mentor who has since left still counts: the assignment is still nobody's. An organization administrator
///   with scope rows, or who dispatched, coordinates them and gets the digest as a coordinator does.
///   An assignment given to another mentor counts from the hand-over, and a receipt from before it is the
///   previous mentor's (0041).
/// - One notification per coordinator per organization-local day, however many cases and runs (the dedupe
///   key names the coordinator and the local date); none when there is nothing overdue. One case names the
///   mentor and the assignment; several list the oldest three and "and N more".
/// - Not before the organization-local hour `send_hour` (default 8): the timer may run hourly. The local
///   date and hour come from the organization's time zone, so the days clocks change are ordinary days.
/// - The tap opens the assignment status screen filtered to overdue (`/assignments?filter=overdue`).
public struct OverdueDigest: Scenario {
    public struct Settings: Sendable {
        public var overdueDays: Int
        public var sendHour: Int
    }

    public struct Candidate {
        var cases: Int
        var mentorNames: [String]
        var titles: [String]
        var assignmentIDs: [String]
        /// Every case, for the notification's `about_assignments` (0043).
        var allAssignmentIDs: [String]
        var oldestDispatch: Date
        var localDay: String
    }

    /// How many cases a digest names before "and N more".
    static let named = 3

    public init() {}

    public var key: String { "overdue_digest" }
    public var jobName: String { "overdue-digest" }
    public var abstract: String { "Send each coordinator one daily digest of the assignments in their scope still unacknowledged after the overdue threshold." }
    public var category: NotificationCategory { .overdueDigest }

    public func settings(_ reader: SettingsReader) throws -> Settings {
        Settings(overdueDays: try reader.integer("overdue_days", in: 1...90), sendHour: try reader.integer("send_hour", in: 0...23))
    }

    public func notDue(_ rule: OrganizationRule<Settings>, now: Date) -> String? {
        let local = LocalTime(now, zone: rule.timeZone)
        guard local.hour < rule.settings.sendHour else { return nil }
        return String(format: "the digest goes out from %02d:00 %@ (local time now %02d:%02d)",
                      rule.settings.sendHour, rule.timeZone, local.hour, local.minute)
    }

    public func candidateQuery(rules: [OrganizationRule<Settings>], now: Date) -> Query {
        let organizations = PostgresArray(rules.map(\.organizationID))
        let days = PostgresArray(rules.map(\.settings.overdueDays))
        let localDays = PostgresArray(rules.map { LocalTime(now, zone: $0.timeZone).isoDate })
        // Overdue from the organization's local day `overdue_days` after the dispatch's (`ElapsedDays`).
        let dispatchedBefore = PostgresArray(rules.map { ElapsedDays.startOfDay($0.settings.overdueDays - 1, before: now, zone: $0.timeZone) })
        return """
            SELECT c.coordinator_id AS user_id, 'day:' || c.local_day AS subject, c.local_day,
                   count(*) AS cases, min(c.dispatched_at) AS oldest_dispatch,
                   (array_agg(c.mentor_name ORDER BY c.dispatched_at, c.id))[1:\(OverdueDigest.named)] AS mentor_names,
                   (array_agg(c.title ORDER BY c.dispatched_at, c.id))[1:\(OverdueDigest.named)] AS titles,
                   (array_agg(c.id::text ORDER BY c.dispatched_at, c.id))[1:\(OverdueDigest.named)] AS assignment_ids,
                   array_agg(c.id::text ORDER BY c.dispatched_at, c.id) AS all_assignment_ids
              FROM (SELECT s.coordinator_id, r.local_day, a.id, a.title, \(Handover.dispatchedToMentor) AS dispatched_at, m.display_name AS mentor_name
                      FROM unnest(\(organizations)::uuid[], \(days)::int[], \(localDays)::text[], \(dispatchedBefore)::timestamptz[])
                           AS r(organization_id, overdue_days, local_day, dispatched_before)
                      JOIN assignments a ON a.organization_id = r.organization_id AND a.state = 'active'
                                        AND a.dispatched_at < r.dispatched_before AND \(Handover.dispatchedToMentor) < r.dispatched_before
                      JOIN users m ON m.id = a.mentor_id AND m.organization_id = a.organization_id
                      CROSS JOIN LATERAL (SELECT sc.coordinator_id FROM coordinator_scopes sc
                                           WHERE sc.mentor_id = a.mentor_id AND sc.organization_id = a.organization_id
                                          UNION SELECT a.coordinator_id) s
                     WHERE NOT EXISTS (SELECT 1 FROM assignment_read_receipts rr WHERE \(Handover.acknowledgedByMentor(before: now)))) c
              JOIN users co ON co.id = c.coordinator_id AND co.role IN ('coordinator', 'org_admin') AND co.deactivated_at IS NULL
             WHERE NOT EXISTS (SELECT 1 FROM notifications n
                                WHERE n.dedupe_key = 'overdue_digest:' || c.coordinator_id || ':' || c.local_day)
             GROUP BY c.coordinator_id, c.local_day
            """
    }

    public func candidate(_ row: CandidateRow) throws -> Candidate {
        Candidate(cases: try row.decode("cases"), mentorNames: try row.decode("mentor_names"), titles: try row.decode("titles"),
                  assignmentIDs: try row.decode("assignment_ids"), allAssignmentIDs: try row.decode("all_assignment_ids"), oldestDispatch: try row.decode("oldest_dispatch"),
                  localDay: try row.decode("local_day"))
    }

    public func decide(_ candidate: Candidate, recipient: Recipient, rule: OrganizationRule<Settings>, now: Date) -> Decision {
        // A dispatch at `-infinity` (written before 0054 refused it) is overdue all the same; its age is no number.
        let oldest = candidate.oldestDispatch == .distantPast ? "a dispatched_at of -infinity, a row to fix"
            : "\(ElapsedDays.between(candidate.oldestDispatch, now, zone: rule.timeZone)) days"
        let message = rule.messages.render(recipient.language, OverdueDigest.values(candidate, days: rule.settings.overdueDays, language: recipient.language))
        var data = [("category", category.rawValue), ("route", "/assignments?filter=overdue"), ("count", String(candidate.cases))]
        if candidate.cases == 1, let id = candidate.assignmentIDs.first { data.append(("assignment_id", id)) }
        let named = zip(candidate.mentorNames, candidate.titles).map { "\(UnnamedPerson.shown($0, in: .english)) (\"\($1)\")" }.joined(separator: ", ")
        var draft = NotificationDraft(
            title: message.title,
            body: message.body,
            data: data,
            dedupeKey: "overdue_digest:\(recipient.userID.lowercasedString):\(candidate.localDay)",
            expiresAt: LocalTime(now, zone: rule.timeZone).nextMidnight,
            why: "\(candidate.cases) assignment(s) in scope or dispatched by this coordinator unacknowledged for \(rule.settings.overdueDays)+ days (oldest \(oldest)): \(named)\(candidate.cases > candidate.mentorNames.count ? " and \(candidate.cases - candidate.mentorNames.count) more" : "")")
        draft.aboutAssignments = candidate.allAssignmentIDs.compactMap(UUID.init(uuidString:))
        return .notify(draft)
    }

    /// The template's values: the single case, or the cases named (the first three) and how many more.
    static func values(_ candidate: Candidate, days: Int, language: Language) -> [String: Any] {
        var values: [String: Any] = ["days": days, "one_day": days == 1, "count": candidate.cases, "single": candidate.cases == 1]
        let named = Array(zip(candidate.mentorNames.map { UnnamedPerson.shown($0, in: language) }, candidate.titles))
        if let first = named.first { (values["mentor"], values["title"]) = (first.0, first.1) }
        values["cases"] = named.enumerated().map { index, item in
            ["mentor": item.0, "title": item.1, "first": index == 0, "last": index == named.count - 1] as [String: Any]
        }
        if candidate.cases > named.count { values["more"] = candidate.cases - named.count }
        return values
    }
}

/// An instant as the clock on the wall of a time zone shows it (an unknown zone reads as UTC).
struct LocalTime {
    let hour: Int
    let minute: Int
    let isoDate: String
    /// The next local midnight after the instant.
    let nextMidnight: Date

    init(_ instant: Date, zone: String) {
        let calendar = LocalClock.calendar(zone)
        let parts = calendar.dateComponents([.year, .month, .day, .hour, .minute], from: instant)
        hour = parts.hour!
        minute = parts.minute!
        isoDate = String(format: "%04d-%02d-%02d", parts.year!, parts.month!, parts.day!)
        let startOfDay = calendar.startOfDay(for: instant)
        nextMidnight = calendar.date(byAdding: .day, value: 1, to: startOfDay) ?? instant.addingTimeInterval(86_400)
    }
}
