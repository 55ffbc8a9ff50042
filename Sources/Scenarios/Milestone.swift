import Foundation
import Postgres
import ScenarioEngine
import TextCoding

extension SuppressionReason {
    /// A milestone reached by activities loaded in bulk, of long ago: not announced.
    public static let historyLoad = SuppressionReason("history_load")
}

/// Congratulates a peer mentor whose logged activities reach one of the organization's `milestones`
/// (default 25, 50, 100), once per milestone ever (event `activities_logged`, one per mentor per statement).
///
/// - A statement that passes several milestones announces the highest.
/// - Deleting and re-logging an activity never announces a milestone twice (the dedupe key names it).
/// - History loaded in bulk does not flood anyone: a statement of more than `byHand` activities, or for more than
///   one mentor (0044), counts only when the newest activity that reached it happened within `max_age_days`
///   (default 14); an operator may
///   also load with `SET mentor_push.events = 'off'`, which appends no events at all. A person logging a few
///   (the one they forgot three weeks ago) reaches the milestone whenever those happened: the age alone
///   left a 25th activity logged late unannounced for good, and milestones come once ever.
/// - The tap opens the mentor's statistics (`/statistics`).
public struct Milestone: EventScenario {
    public struct Settings: Sendable {
        public var milestones: [Int]
        public var maxAgeDays: Int
    }

    public struct Candidate {
        var milestone: Int
        var total: Int
        /// Reached by history loaded in bulk (see the type's doc): not announced, and the decision says so (there
        /// was none, so `why` could not tell why no congratulation came).
        var historyLoad: Bool
        var logged: Int
        var mentors: Int
        var latestOccurredAt: Date?
    }

    public init() {}

    /// At most this many activities in one statement, all of one mentor, are a person logging them, not history
    /// being loaded.
    static let byHand = 10

    public var key: String { "milestone" }
    public var jobName: String { "event-notify" }
    public var abstract: String { "Congratulate peer mentors when their logged activities reach a milestone." }
    public var category: NotificationCategory { .milestone }
    public var eventKinds: [String] { ["activities_logged"] }
    public var suppressionReasons: [SuppressionReason] { [.historyLoad] }

    public func settings(_ reader: SettingsReader) throws -> Settings {
        Settings(milestones: try reader.integers("milestones", in: 1...100_000), maxAgeDays: try reader.integer("max_age_days", in: 1...365))
    }

    public func candidateQuery(rules: [OrganizationRule<Settings>], events: EventSelection, now: Date) -> Query {
        var organizations: [UUID] = []
        var milestones: [Int] = []
        var ages: [Int] = []
        for rule in rules {
            for milestone in rule.settings.milestones {
                organizations.append(rule.organizationID)
                milestones.append(milestone)
                ages.append(rule.settings.maxAgeDays)
            }
        }
        return """
            SELECT DISTINCT ON (e.id) e.mentor_id AS user_id, 'milestone:' || r.milestone AS subject, r.milestone,
                   (e.payload->>'after')::int AS total,
                   -- An event from before 0044 (no `mentors`) counts as a load, as the filter this replaced had it.
                   NOT coalesce(((e.payload->>'after')::int - (e.payload->>'before')::int <= \(Milestone.byHand) AND (e.payload->>'mentors')::int = 1)
                                OR (e.payload->>'latest_occurred_at')::timestamptz > \(now)::timestamptz - make_interval(days => r.max_age_days), false)
                       AS history_load,
                   (e.payload->>'after')::int - (e.payload->>'before')::int AS logged, coalesce((e.payload->>'mentors')::int, 0) AS mentors,
                   (e.payload->>'latest_occurred_at')::timestamptz AS latest_occurred_at
              FROM events e
              JOIN users u ON u.id = e.mentor_id AND u.role = 'peer_mentor' AND u.deactivated_at IS NULL
              JOIN unnest(\(PostgresArray(organizations))::uuid[], \(PostgresArray(milestones))::int[], \(PostgresArray(ages))::int[])
                   AS r(organization_id, milestone, max_age_days) ON r.organization_id = u.organization_id
             WHERE \(events.condition) AND e.kind = 'activities_logged'
               AND r.milestone > (e.payload->>'before')::int AND r.milestone <= (e.payload->>'after')::int
               AND NOT EXISTS (SELECT 1 FROM notifications n WHERE n.dedupe_key = 'milestone:' || e.mentor_id || ':' || r.milestone)
             ORDER BY e.id, r.milestone DESC
            """
    }

    public func candidate(_ row: CandidateRow) throws -> Candidate {
        Candidate(milestone: try row.decode("milestone"), total: try row.decode("total"), historyLoad: try row.decode("history_load"),
                  logged: try row.decode("logged"), mentors: try row.decode("mentors"),
                  latestOccurredAt: try row.decode("latest_occurred_at", as: Date?.self))
    }

    public func decide(_ candidate: Candidate, recipient: Recipient, rule: OrganizationRule<Settings>, now: Date) -> Decision {
        if candidate.historyLoad {
            let newest = candidate.latestOccurredAt.map { "the newest happened \(Timestamp.iso8601($0))" } ?? "no date of when they happened"
            let how = candidate.mentors == 1 ? "\(candidate.logged) activities in one statement" : "activities for \(candidate.mentors == 0 ? "several" : String(candidate.mentors)) mentors in one statement"
            return .suppress(.historyLoad, detail: "milestone \(candidate.milestone) reached (\(candidate.total) activities) by history loaded in bulk (\(how); \(newest), more than max_age_days \(rule.settings.maxAgeDays) ago): a load congratulates nobody, and a milestone comes once")
        }
        let message = rule.messages.render(recipient.language, ["name": recipient.displayName, "milestone": candidate.milestone])
        return .notify(NotificationDraft(
            title: message.title,
            body: message.body,
            data: [("category", category.rawValue), ("route", "/statistics"), ("milestone", String(candidate.milestone))],
            dedupeKey: "milestone:\(recipient.userID.lowercasedString):\(candidate.milestone)",
            expiresAt: nil,
            why: "\(candidate.total) activities logged: milestone \(candidate.milestone) reached"))
    }
}
