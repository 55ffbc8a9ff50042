import Foundation
import Postgres
import ScenarioEngine
import TextCoding

extension SuppressionReason {
    /// The pause was already lifted when its start came to be announced: the lift is announced instead.
    public static let superseded = SuppressionReason("superseded")
    /// The pause was lifted, but another pause of the mentor covers now: the mentor is not available again.
    public static let stillPaused = SuppressionReason("still_paused")
}

/// Tells every coordinator whose scope holds a peer mentor that the mentor started a pause or lifted one,
/// seconds after it was saved (events `pause_started`, `pause_lifted`).
///
/// - The body names the mentor and the action; a pause's reason and its end date, when given, are in it.
/// - A pause lifted before its start was announced: the coordinator is pushed only the net state. When
///   both events are decided together, the start is suppressed (`superseded`) and the lift says how long
///   the pause lasted; when the start was already stored but its push had not gone out, the database
///   cancels that push as the pause is lifted (the inbox keeps both, the phone shows only the lift).
/// - A pause lifted while another pause of the mentor covers now is no return: nobody is told the mentor is
///   available again (`still_paused`; the other pause's start was announced when it was saved).
/// - The tap opens the mentor (`/mentors/<id>`).
public struct AvailabilityChange: EventScenario {
    public struct Settings: Sendable {}

    public struct Candidate {
        var eventID: Int
        var lifted: Bool
        var mentorID: UUID
        var mentorName: String
        var pauseID: Int
        var startsAt: Date
        var endsAt: Date?
        var reason: String?
        /// Another pause of the mentor that covers now (for a lift: the mentor is not back).
        var otherPause: CurrentPause?
    }

    public init() {}

    public var key: String { "availability_change" }
    public var jobName: String { "event-notify" }
    public var abstract: String { "Tell coordinators when a peer mentor in their scope starts or lifts a pause." }
    public var category: NotificationCategory { .availabilityChange }
    public var suppressionReasons: [SuppressionReason] { [.superseded, .stillPaused] }
    public var eventKinds: [String] { ["pause_started", "pause_lifted"] }

    public func settings(_ reader: SettingsReader) throws -> Settings { Settings() }

    public func candidateQuery(rules: [OrganizationRule<Settings>], events: EventSelection, now: Date) -> Query {
        """
        SELECT s.coordinator_id AS user_id, 'pause:' || p.id AS subject, e.id AS event_id, e.kind = 'pause_lifted' AS lifted,
               m.id AS mentor_id, m.display_name AS mentor_name, p.id AS pause_id, p.starts_at, p.ends_at, p.reason, \(CurrentPause.columns)
          FROM events e
          JOIN availability_pauses p ON p.id = e.subject_id::bigint
          JOIN users m ON m.id = e.mentor_id
          \(CurrentPause.join(mentor: "m.id", now: now))
          JOIN coordinator_scopes s ON s.mentor_id = m.id AND s.organization_id = m.organization_id
          JOIN users c ON c.id = s.coordinator_id AND c.role = 'coordinator' AND c.deactivated_at IS NULL
         WHERE \(events.condition) AND e.kind IN ('pause_started', 'pause_lifted')
        """
    }

    public func candidate(_ row: CandidateRow) throws -> Candidate {
        Candidate(eventID: try row.decode("event_id"), lifted: try row.decode("lifted"), mentorID: try row.decode("mentor_id"),
                  mentorName: try row.decode("mentor_name"), pauseID: try row.decode("pause_id"), startsAt: try row.decode("starts_at"),
                  endsAt: CurrentPause.end(try row.decode("ends_at", as: Date?.self)), reason: try row.decode("reason", as: String?.self),
                  otherPause: try CurrentPause(row))
    }

    public func decide(_ candidate: Candidate, recipient: Recipient, rule: OrganizationRule<Settings>, now: Date) -> Decision {
        if !candidate.lifted, let end = candidate.endsAt, end <= now {
            return .suppress(.superseded, detail: "\(candidate.mentorName)'s pause had ended (\(Timestamp.iso8601(end))) before its start was announced: nothing to announce now (a lift the app saved is announced on its own)")
        }
        if candidate.lifted, let other = candidate.otherPause {
            return .suppress(.stillPaused, detail: "\(candidate.mentorName)'s pause \(candidate.pauseID) was lifted, but another covers now (\(other.detail(in: recipient.timeZone))): not available again")
        }
        let message = rule.messages.render(recipient.language, AvailabilityChange.values(candidate, language: recipient.language, zone: recipient.timeZone, now: now))
        let mentor = candidate.mentorID.lowercasedString
        return .notify(NotificationDraft(
            title: message.title,
            body: message.body,
            data: [("category", category.rawValue), ("route", "/mentors/\(mentor)"), ("mentor_id", mentor), ("pause_id", String(candidate.pauseID))],
            dedupeKey: "availability_change:\(recipient.userID.lowercasedString):\(candidate.eventID)",
            expiresAt: nil,
            why: "\(candidate.mentorName) \(candidate.lifted ? "lifted" : "started") a pause (event \(candidate.eventID)), in this coordinator's scope"))
    }

    /// The template's values: dates as people in the recipient's time zone write them.
    static func values(_ candidate: Candidate, language: Language, zone: String, now: Date) -> [String: Any] {
        var values: [String: Any] = ["mentor": candidate.mentorName, "lifted": candidate.lifted,
                                     "started": LocalDate.text(candidate.startsAt, zone: zone, language: language)]
        if !candidate.lifted && candidate.startsAt > now { values["from"] = LocalDate.text(candidate.startsAt, zone: zone, language: language) }
        if let endsAt = candidate.endsAt { values["until"] = LocalDate.text(endsAt, zone: zone, language: language) }
        if let reason = candidate.reason, !reason.isEmpty { values["reason"] = reason }
        return values
    }
}

/// A date as people in a time zone write it: "15.03.2027" in Norwegian, "15 Mar 2027" in English, and
/// in another language as Foundation's medium style for it.
enum LocalDate {
    static func text(_ date: Date, zone: String, language: Language) -> String {
        let calendar = LocalClock.calendar(zone)
        let parts = calendar.dateComponents([.year, .month, .day], from: date)
        switch language {
        case .norwegianBokmal:
            return String(format: "%02d.%02d.%04d", parts.day!, parts.month!, parts.year!)
        case .english:
            let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
            return "\(parts.day!) \(months[parts.month! - 1]) \(parts.year!)"
        default:
            let formatter = DateFormatter()
            formatter.locale = Locale(identifier: language.rawValue)
            formatter.timeZone = calendar.timeZone
            formatter.dateStyle = .medium
            return formatter.string(from: date)
        }
    }
}
