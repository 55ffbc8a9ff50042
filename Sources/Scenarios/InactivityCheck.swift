import Foundation
import TextCoding
import JobKit
import Postgres

/// Reminds peer mentors who have not logged an activity for longer than their organization's
/// threshold (default 14 days) to log what they have done.
///
/// The rule, once per inactivity stretch:
/// - A stretch starts at the mentor's last logged activity (or joining, if none), or at the end of
///   their latest lifted availability pause, whichever is later.
/// - A mentor is reminded when the stretch is at least `threshold_days` old; paused mentors are not.
/// - A reminded mentor who stays inactive is reminded again only after another full threshold
///   from the last reminder. Logging an activity ends the stretch.
public struct InactivityCheck: Scenario {
    public struct Settings: Sendable {
        public var thresholdDays: Int
    }

    public struct Candidate {
        var lastActivity: Date?
        var joinedAt: Date
        var pauseLiftedAt: Date?
        var pausedSince: Date?
        var pausedUntil: Date?
        var pauseReason: String?
        var remindedAt: Date?
    }

    public init() {}

    public var key: String { "inactivity" }
    public var jobName: String { "inactivity-check" }
    public var category: NotificationCategory { .inactivity }

    public func settings(_ reader: SettingsReader) throws -> Settings {
        Settings(thresholdDays: try reader.integer("threshold_days", in: 1...365))
    }

    public func candidateQuery(rules: [OrganizationRule<Settings>], now: Date) -> Query {
        let organizations = PostgresArray(rules.map(\.organizationID))
        let thresholds = PostgresArray(rules.map(\.settings.thresholdDays))
        // The index users_inactivity_idx drives this: per organization, a range scan over the mentors
        // quiet since before the threshold. Pauses and earlier reminders only narrow that range.
        return """
            SELECT \(Recipient.columns(for: category)),
                   u.last_activity_logged_at, u.joined_at, lift.lifted_at,
                   pause.starts_at, pause.ends_at, pause.reason, reminder.reminded_at
              FROM unnest(\(organizations)::uuid[], \(thresholds)::int[]) AS r(organization_id, threshold_days)
              JOIN users u ON u.organization_id = r.organization_id
                          AND u.role = 'peer_mentor' AND u.deactivated_at IS NULL
                          AND coalesce(u.last_activity_logged_at, u.joined_at) <= \(now)::timestamptz - make_interval(days => r.threshold_days)
              LEFT JOIN push_notification_configs pc ON pc.user_id = u.id
              LEFT JOIN LATERAL (SELECT max(p.ends_at) AS lifted_at FROM availability_pauses p
                                  WHERE p.mentor_id = u.id AND p.ends_at <= \(now)) lift ON true
              LEFT JOIN LATERAL (SELECT p.starts_at, p.ends_at, p.reason FROM availability_pauses p
                                  WHERE p.mentor_id = u.id AND p.starts_at <= \(now) AND (p.ends_at IS NULL OR p.ends_at > \(now))
                                  ORDER BY p.starts_at DESC LIMIT 1) pause ON true
              LEFT JOIN LATERAL (SELECT max(n.created_at) AS reminded_at FROM notifications n
                                  WHERE n.user_id = u.id AND n.category = 'inactivity') reminder ON true
             WHERE greatest(coalesce(u.last_activity_logged_at, u.joined_at), lift.lifted_at)
                   <= \(now)::timestamptz - make_interval(days => r.threshold_days)
            """
    }

    public func candidate(_ row: Row, recipient: Recipient) throws -> Candidate {
        let base = Recipient.columnCount
        return Candidate(
            lastActivity: try row.decode(base, as: Date?.self),
            joinedAt: try row.decode(base + 1),
            pauseLiftedAt: try row.decode(base + 2, as: Date?.self),
            pausedSince: try row.decode(base + 3, as: Date?.self),
            pausedUntil: try row.decode(base + 4, as: Date?.self),
            pauseReason: try row.decode(base + 5, as: String?.self),
            remindedAt: try row.decode(base + 6, as: Date?.self))
    }

    public func decide(_ candidate: Candidate, recipient: Recipient, rule: OrganizationRule<Settings>, now: Date) -> Decision {
        let threshold = TimeInterval(rule.settings.thresholdDays) * 86_400
        if let since = candidate.pausedSince {
            var detail = "paused since \(day(since))"
            detail += candidate.pausedUntil.map { " until \(day($0))" } ?? " until further notice"
            if let reason = candidate.pauseReason, !reason.isEmpty { detail += " (\(reason))" }
            return .suppress(.paused, detail: detail)
        }
        let stretchStart = max(candidate.lastActivity ?? candidate.joinedAt, candidate.pauseLiftedAt ?? .distantPast)
        var anchor = stretchStart
        if let reminded = candidate.remindedAt, reminded >= stretchStart {
            guard now.timeIntervalSince(reminded) >= threshold else {
                return .suppress(.alreadyNotified, detail: "reminded \(day(reminded)) in this inactivity stretch; next reminder from \(day(reminded.addingTimeInterval(threshold))) if still inactive")
            }
            anchor = reminded
        }
        let days = Int(now.timeIntervalSince(stretchStart) / 86_400)
        var why: String
        if let last = candidate.lastActivity, last >= (candidate.pauseLiftedAt ?? .distantPast) {
            why = "no activity logged for \(days) days (since \(day(last)); threshold \(rule.settings.thresholdDays))"
        } else if let lifted = candidate.pauseLiftedAt, lifted > (candidate.lastActivity ?? candidate.joinedAt) {
            why = "no activity logged in the \(days) days since a pause was lifted on \(day(lifted)) (threshold \(rule.settings.thresholdDays))"
        } else {
            why = "never logged an activity; joined \(days) days ago (threshold \(rule.settings.thresholdDays))"
        }
        if anchor != stretchStart { why += "; reminded \(day(anchor)), still inactive" }
        let message = InactivityCheck.message(language: recipient.language, name: recipient.displayName,
                                              days: days, neverActive: candidate.lastActivity == nil)
        return .notify(NotificationDraft(
            title: message.title,
            body: message.body,
            data: [("category", category.rawValue), ("route", "/activities/new")],
            dedupeKey: "inactivity:\(recipient.userID.lowercasedString):\(Int(anchor.timeIntervalSince1970.rounded(.down)))",
            expiresAt: now.addingTimeInterval(threshold),
            why: why))
    }

    /// The reminder in the user's language.
    static func message(language: Language, name: String, days: Int, neverActive: Bool) -> (title: String, body: String) {
        switch language {
        case .norwegianBokmal:
            return ("Har du noe å registrere?", neverActive
                ? "Hei \(name)! Du har ikke registrert noen aktiviteter ennå. Trykk her for å registrere din første."
                : "Hei \(name)! Det er \(days) dager siden du sist registrerte en aktivitet. Trykk her for å registrere samtaler og møter, så blir statistikken riktig.")
        case .english:
            return ("Anything to log?", neverActive
                ? "Hi \(name)! You haven't logged any activities yet. Tap here to log your first one."
                : "Hi \(name)! It's been \(days) days since you last logged an activity. Tap here to log your conversations and meetings so your statistics stay accurate.")
        }
    }

    private func day(_ date: Date) -> String { String(Timestamp.iso8601(date).prefix(10)) }
}
