import Foundation
import Postgres
import ScenarioEngine
import TextCoding

/// Reminds peer mentors who have not logged an activity for longer than their organization's
/// threshold (default 14 days) to log what they have done.
///
/// The rule, once per inactivity stretch:
/// - A stretch starts at the mentor's last logged activity (or joining, if none), or at the end of
///   their latest lifted availability pause, whichever is later.
/// - A mentor is reminded when the stretch is at least `threshold_days` old, in calendar days on the
///   mentor's clock (`ElapsedDays`); paused mentors are not.
/// - A reminded mentor who stays inactive is reminded again only after another full threshold
///   from the last reminder, counted the same way. Logging an activity ends the stretch.
public struct InactivityCheck: Scenario {
    public struct Settings: Sendable {
        public var thresholdDays: Int
    }

    public struct Candidate {
        var lastActivity: Date?
        var joinedAt: Date
        var pauseLiftedAt: Date?
        /// Where the inactivity stretch starts (computed by the query, the one place the rule lives).
        var stretchStart: Date
        var pause: CurrentPause?
        var remindedAt: Date?
    }

    public init() {}

    public var key: String { "inactivity" }
    public var jobName: String { "inactivity-check" }
    public var abstract: String { "Remind peer mentors who have not logged an activity for longer than their organization's threshold." }
    public var category: NotificationCategory { .inactivity }
    public var suppressionReasons: [SuppressionReason] { [.paused] }

    public func settings(_ reader: SettingsReader) throws -> Settings {
        Settings(thresholdDays: try reader.integer("threshold_days", in: 1...365))
    }

    public func candidateQuery(rules: [OrganizationRule<Settings>], now: Date) -> Query {
        let organizations = PostgresArray(rules.map(\.organizationID))
        let thresholds = PostgresArray(rules.map(\.settings.thresholdDays))
        // The index users_inactivity_idx drives this: per organization, a range scan over the mentors
        // quiet since before the threshold. Pauses and earlier reminders only narrow that range.
        return """
            SELECT u.id AS user_id,
                   'stretch:' || CASE WHEN isfinite(s.stretch_start) THEN floor(extract(epoch FROM s.stretch_start))::bigint::text
                                      ELSE s.stretch_start::text END AS subject,
                   u.last_activity_logged_at AS last_activity, u.joined_at, lift.lifted_at, s.stretch_start,
                   \(CurrentPause.columns), reminder.reminded_at
              FROM unnest(\(organizations)::uuid[], \(thresholds)::int[]) AS r(organization_id, threshold_days)
              JOIN users u ON u.organization_id = r.organization_id
                          AND u.role = 'peer_mentor' AND u.deactivated_at IS NULL
                          AND \(ElapsedDays.possiblyAtLeast("r.threshold_days", before: now, since: "coalesce(u.last_activity_logged_at, u.joined_at)"))
              LEFT JOIN LATERAL (SELECT max(p.ends_at) AS lifted_at FROM availability_pauses p
                                  WHERE p.mentor_id = u.id AND p.ends_at <= \(now)) lift ON true
              CROSS JOIN LATERAL (SELECT greatest(coalesce(u.last_activity_logged_at, u.joined_at), lift.lifted_at) AS stretch_start) s
              CROSS JOIN LATERAL (SELECT \(Recipient.knownTimeZone) AS name) zone
              \(CurrentPause.join(mentor: "u.id", now: now))
              LEFT JOIN LATERAL (SELECT max(n.created_at) AS reminded_at FROM notifications n
                                  WHERE n.user_id = u.id AND n.category = 'inactivity') reminder ON true
             WHERE \(ElapsedDays.atLeast("r.threshold_days", before: now, since: "s.stretch_start", zone: "zone.name"))
            """
    }

    public func candidate(_ row: CandidateRow) throws -> Candidate {
        Candidate(
            lastActivity: try row.decode("last_activity", as: Date?.self),
            joinedAt: try row.decode("joined_at"),
            pauseLiftedAt: try row.decode("lifted_at", as: Date?.self),
            stretchStart: try row.decode("stretch_start"),
            pause: try CurrentPause(row),
            remindedAt: try row.decode("reminded_at", as: Date?.self))
    }

    public func decide(_ candidate: Candidate, recipient: Recipient, rule: OrganizationRule<Settings>, now: Date) -> Decision {
        // Days are counted on the mentor's clock, as the query counts them (`ElapsedDays`).
        let zone = recipient.timeZone
        func day(_ date: Date) -> String { LocalClock.day(of: date, zone: zone) }
        let thresholdDays = rule.settings.thresholdDays
        if let pause = candidate.pause { return .suppress(.paused, detail: pause.detail(in: zone)) }
        let stretchStart = candidate.stretchStart
        // `-infinity` (the app wrote it; 0047 refuses it since): no count of days means anything. The query stopped
        // the whole job on it (exit 70, nobody reminded).
        // The stretch may start at a pause's lift all the same: the days since the last activity are counted too.
        if (candidate.lastActivity ?? candidate.joinedAt) == .distantPast {
            let column = candidate.lastActivity == .distantPast ? "last_activity_logged_at" : "joined_at"
            return .suppress(.invalidData, detail: "users.\(column) is -infinity: no inactivity can be counted from it; skipped until the row is fixed")
        }
        var anchor = stretchStart
        if let reminded = candidate.remindedAt, reminded >= stretchStart {
            guard ElapsedDays.between(reminded, now, zone: zone) >= thresholdDays else {
                return .suppress(.alreadyNotified, detail: "reminded \(day(reminded)) in this inactivity stretch; next reminder from \(ElapsedDays.day(thresholdDays, after: reminded, zone: zone)) if still inactive")
            }
            anchor = reminded
        }
        let days = ElapsedDays.between(stretchStart, now, zone: zone)
        var why: String
        if let last = candidate.lastActivity, last >= (candidate.pauseLiftedAt ?? .distantPast) {
            why = "no activity logged for \(days) days (since \(day(last)); threshold \(rule.settings.thresholdDays))"
        } else if let lifted = candidate.pauseLiftedAt, lifted > (candidate.lastActivity ?? candidate.joinedAt) {
            why = "no activity logged in the \(days) days since a pause was lifted on \(day(lifted)) (threshold \(rule.settings.thresholdDays))"
        } else {
            why = "never logged an activity; joined \(days) days ago (threshold \(rule.settings.thresholdDays))"
        }
        if anchor != stretchStart { why += "; reminded \(day(anchor)), still inactive" }
        // The text says how long since the last activity (or joining), whatever a pause did to the stretch.
        let sinceLast = ElapsedDays.between(candidate.lastActivity ?? candidate.joinedAt, now, zone: zone)
        let message = rule.messages.render(recipient.language, ["name": recipient.displayName, "days": sinceLast, "one_day": sinceLast == 1,
                                                                     "never_active": candidate.lastActivity == nil])
        return .notify(NotificationDraft(
            title: message.title,
            body: message.body,
            data: [("category", category.rawValue), ("route", "/activities/new")],
            dedupeKey: "inactivity:\(recipient.userID.lowercasedString):\(Int(anchor.timeIntervalSince1970.rounded(.down)))",
            expiresAt: now.addingTimeInterval(TimeInterval(thresholdDays) * 86_400),
            why: why))
    }
}
