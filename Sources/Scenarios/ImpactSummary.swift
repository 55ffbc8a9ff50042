import Foundation
import Postgres
import ScenarioEngine
import TextCoding

/// Tells a peer mentor that their annual impact summary is ready: once per mentor and year.
///
/// - Candidates: `impact_summaries` rows computed at most `max_age_days` (default 30) before now, of peer
///   mentors still in the organization, whose (mentor, year) was not announced before. A job that did not
///   run for a week catches up on everything computed meanwhile; a summary recomputed later is not
///   announced again (the dedupe key names the mentor and the year); a summary computed long ago is not
///   announced out of the blue on a fresh install.
/// - Pauses do not hold it back: it asks nothing of the mentor.
/// - The tap opens the summary (`/impact/<year>`).
public struct ImpactSummary: Scenario {
    public struct Settings: Sendable {
        public var maxAgeDays: Int
    }

    public struct Candidate {
        var year: Int
        var computedAt: Date
    }

    public init() {}

    public var key: String { "impact_summary" }
    public var jobName: String { "impact-summary" }
    public var abstract: String { "Tell peer mentors, once per year, that their annual impact summary is ready." }
    public var category: NotificationCategory { .impactSummary }

    public func settings(_ reader: SettingsReader) throws -> Settings {
        Settings(maxAgeDays: try reader.integer("max_age_days", in: 1...366))
    }

    public func candidateQuery(rules: [OrganizationRule<Settings>], now: Date) -> Query {
        let organizations = PostgresArray(rules.map(\.organizationID))
        let ages = PostgresArray(rules.map(\.settings.maxAgeDays))
        // impact_summaries_computed_idx drives this: one range scan over the summaries of the longest
        // max_age_days of any organization, then each organization's own limit.
        let oldest = now.addingTimeInterval(-TimeInterval(rules.map(\.settings.maxAgeDays).max() ?? 0) * 86_400)
        return """
            SELECT s.mentor_id AS user_id, 'year:' || s.year AS subject, s.year, s.computed_at
              FROM impact_summaries s
              JOIN users u ON u.id = s.mentor_id AND u.role = 'peer_mentor' AND u.deactivated_at IS NULL
              JOIN unnest(\(organizations)::uuid[], \(ages)::int[]) AS r(organization_id, max_age_days)
                ON r.organization_id = u.organization_id
             WHERE s.computed_at <= \(now) AND s.computed_at > \(oldest)
               AND s.computed_at > \(now)::timestamptz - make_interval(days => r.max_age_days)
               AND NOT EXISTS (SELECT 1 FROM notifications n WHERE n.dedupe_key = 'impact_summary:' || s.mentor_id || ':' || s.year)
            """
    }

    public func candidate(_ row: CandidateRow) throws -> Candidate {
        Candidate(year: try row.decode("year"), computedAt: try row.decode("computed_at"))
    }

    public func decide(_ candidate: Candidate, recipient: Recipient, rule: OrganizationRule<Settings>, now: Date) -> Decision {
        let message = rule.messages.render(recipient.language, ["name": recipient.displayName, "year": candidate.year])
        return .notify(NotificationDraft(
            title: message.title,
            body: message.body,
            data: [("category", category.rawValue), ("route", "/impact/\(candidate.year)"), ("year", String(candidate.year))],
            dedupeKey: "impact_summary:\(recipient.userID.lowercasedString):\(candidate.year)",
            expiresAt: now.addingTimeInterval(TimeInterval(rule.settings.maxAgeDays) * 86_400),
            why: "impact summary for \(candidate.year) computed \(LocalClock.day(of: candidate.computedAt, zone: recipient.timeZone)), not announced yet"))
    }
}
