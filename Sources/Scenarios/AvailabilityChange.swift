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

/// Tells every coordinator (or organization administrator) whose scope holds a peer mentor that the mentor started a pause, lifted one,
/// changed one's dates or called one off, seconds after it was saved (events `pause_started`, `pause_lifted`,
/// `pause_changed`, `pause_withdrawn`).
///
/// - The body names the mentor and the action; a pause's reason and its end date, when given, are in it.
/// - A pause lifted before its start was announced: the coordinator is pushed only the net state. When
///   both events are decided together, the start is suppressed (`superseded`) and the lift says how long
///   the pause lasted; when the start was already stored but its push had not gone out, the database
///   cancels that push as the pause is lifted (the inbox keeps both, the phone shows only the lift).
/// - A pause lifted while another pause of the mentor covers now is no return: nobody is told the mentor is
///   available again (`still_paused`; the other pause's start was announced when it was saved).
/// - A change says the pause's dates now; a pause deleted while it held is a lift, one deleted before it
///   started is called off (0042). A change or call-off is `superseded` when a later event of the same pause
///   says what holds, or when the pause's start is announced with it (its start then names the dates now, or
///   nothing, as a pause called off before it was announced is nobody's news).
/// - The tap opens the mentor (`/mentors/<id>`).
public struct AvailabilityChange: EventScenario {
    public struct Settings: Sendable {}

    /// What happened to the pause, by event kind.
    enum Change: String {
        case started = "pause_started", lifted = "pause_lifted", changed = "pause_changed", withdrawn = "pause_withdrawn"
    }

    public struct Candidate {
        var eventID: Int
        var change: Change
        /// A later event of the same pause, or its start announced with this one, or a later lift of the mentor's
        /// (two pauses ended together) that will be decided (its pause still there): this one has nothing to add.
        var superseded: Bool
        /// When the change was saved (the event's `created_at`).
        var eventAt: Date
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
    public var eventKinds: [String] { ["pause_started", "pause_lifted", "pause_changed", "pause_withdrawn"] }
    /// A notice reads the pause as it is now: a pause's events are decided together or one batch after another,
    /// so a start pending beside a change is in the change's batch and names the dates now, and a start decided
    /// in an earlier batch did not see the change.
    public var decidesBySubject: Bool { true }

    public func settings(_ reader: SettingsReader) throws -> Settings { Settings() }

    public func candidateQuery(rules: [OrganizationRule<Settings>], events: EventSelection, now: Date) -> Query {
        // A pause called off is gone: its event carries what the notice says (0042). The pause is the event's
        // mentor's (the triggers write it so): an event naming another mentor's pause tells nobody of it, since the
        // recipients are the named mentor's coordinators (organization scope is a boundary).
        """
        SELECT s.coordinator_id AS user_id, 'pause:' || e.subject_id AS subject, e.id AS event_id, e.kind,
               m.id AS mentor_id, m.display_name AS mentor_name, e.subject_id::bigint AS pause_id,
               coalesce(p.starts_at, (e.payload->>'starts_at')::timestamptz) AS starts_at,
               CASE WHEN p.id IS NULL THEN (e.payload->>'ends_at')::timestamptz ELSE p.ends_at END AS ends_at,
               CASE WHEN p.id IS NULL THEN e.payload->>'reason' ELSE p.reason END AS reason,
               (e.kind IN ('pause_changed', 'pause_withdrawn') AND (
                   EXISTS (SELECT 1 FROM events l WHERE l.subject_id = e.subject_id AND l.mentor_id = e.mentor_id AND l.kind LIKE 'pause%' AND l.id > e.id)
                   OR EXISTS (SELECT 1 FROM events st WHERE st.subject_id = e.subject_id AND st.mentor_id = e.mentor_id AND st.kind LIKE 'pause%' AND st.kind = 'pause_started'
                                AND st.id < e.id AND st.processed_at IS NULL)))
               OR (e.kind = 'pause_lifted' AND EXISTS (
                   SELECT 1 FROM events l WHERE l.processed_at IS NULL AND l.id > e.id AND l.mentor_id = e.mentor_id AND l.kind = 'pause_lifted'
                      AND EXISTS (SELECT 1 FROM availability_pauses lp WHERE lp.id = l.subject_id::bigint AND lp.mentor_id = l.mentor_id)))
                   AS superseded, e.created_at AS event_at,
               \(CurrentPause.columns)
          FROM events e
          LEFT JOIN availability_pauses p ON p.id = e.subject_id::bigint AND p.mentor_id = e.mentor_id
          JOIN users m ON m.id = e.mentor_id
          \(CurrentPause.join(mentor: "m.id", now: now))
          JOIN coordinator_scopes s ON s.mentor_id = m.id AND s.organization_id = m.organization_id
          JOIN users c ON c.id = s.coordinator_id AND c.role IN ('coordinator', 'org_admin') AND c.deactivated_at IS NULL
         WHERE \(events.condition) AND e.kind IN ('pause_started', 'pause_lifted', 'pause_changed', 'pause_withdrawn')
           AND (p.id IS NOT NULL OR e.kind = 'pause_withdrawn')
        """
    }

    public func candidate(_ row: CandidateRow) throws -> Candidate {
        let kind: String = try row.decode("kind")
        return Candidate(eventID: try row.decode("event_id"), change: Change(rawValue: kind) ?? .started, superseded: try row.decode("superseded"),
                         eventAt: try row.decode("event_at"),
                         mentorID: try row.decode("mentor_id"), mentorName: try row.decode("mentor_name"), pauseID: try row.decode("pause_id"),
                         startsAt: try row.decode("starts_at"), endsAt: CurrentPause.end(try row.decode("ends_at", as: Date?.self)),
                         reason: try row.decode("reason", as: String?.self), otherPause: try CurrentPause(row))
    }

    public func decide(_ candidate: Candidate, recipient: Recipient, rule: OrganizationRule<Settings>, now: Date) -> Decision {
        var candidate = candidate
        let who = UnnamedPerson.shown(candidate.mentorName, in: .english) // in the details, for operators
        // A pause deleted while it held ended then: a lift. Whether it held is as of its deletion, not of this run:
        // one called off before its start and decided after it (a backlog) was never a pause to return from.
        if candidate.change == .withdrawn && candidate.startsAt <= candidate.eventAt { candidate.change = .lifted }
        if candidate.change == .started, let end = candidate.endsAt, end <= now {
            return .suppress(.superseded, detail: "\(who)'s pause had ended (\(Timestamp.iso8601(end))) before its start was announced: nothing to announce now (a lift the app saved is announced on its own)")
        }
        if candidate.superseded {
            let what = [Change.started: "started", .lifted: "was lifted", .changed: "changed", .withdrawn: "was called off"][candidate.change]!
            return .suppress(.superseded, detail: "\(who)'s pause \(candidate.pauseID) \(what), but a later event says what holds (a later change or lift, or its start announced with it)")
        }
        if candidate.change == .lifted, let other = candidate.otherPause {
            return .suppress(.stillPaused, detail: "\(who)'s pause \(candidate.pauseID) was lifted, but another covers now (\(other.detail(in: recipient.timeZone))): not available again")
        }
        let values = AvailabilityChange.values(candidate, language: recipient.language, zone: recipient.timeZone, now: now)
        // An organization's own template written before 0042 knows no call-off or change: it would say the
        // mentor is taking a break. The default says what happened.
        let flag = candidate.change == .withdrawn ? "withdrawn" : candidate.change == .changed ? "changed" : nil
        let message = flag.map { rule.messages.render(recipient.language, values, naming: $0) }
            ?? { let (title, body) = rule.messages.render(recipient.language, values); return (title: title, body: body, ownBypassed: false) }()
        // Said in the decision (`why`, the dry run's plan): the organization's own text was not sent, and why.
        let bypassed = message.ownBypassed
            ? "; the organization's own template does not name {{#\(flag!)}}, so the default text was sent (add a {{#\(flag!)}} section to use their own)" : ""
        let mentor = candidate.mentorID.lowercasedString
        let verb = [Change.started: "started", .lifted: "lifted", .changed: "changed", .withdrawn: "called off"][candidate.change]!
        return .notify(NotificationDraft(
            title: message.title,
            body: message.body,
            data: [("category", category.rawValue), ("route", "/mentors/\(mentor)"), ("mentor_id", mentor), ("pause_id", String(candidate.pauseID))],
            dedupeKey: "availability_change:\(recipient.userID.lowercasedString):\(candidate.eventID)",
            expiresAt: nil,
            why: "\(who) \(verb) a pause (event \(candidate.eventID)), in this coordinator's scope\(bypassed)"))
    }

    /// The template's values: dates as people in the recipient's time zone write them.
    static func values(_ candidate: Candidate, language: Language, zone: String, now: Date) -> [String: Any] {
        var values: [String: Any] = ["mentor": UnnamedPerson.shown(candidate.mentorName, in: language), "lifted": candidate.change == .lifted,
                                     "changed": candidate.change == .changed, "withdrawn": candidate.change == .withdrawn,
                                     "started": LocalDate.text(candidate.startsAt, zone: zone, language: language)]
        // A change or call-off says "from" of a pause that had not started when it was saved.
        let reference = candidate.change == .started ? now : candidate.eventAt
        if candidate.change != .lifted && candidate.startsAt > reference { values["from"] = LocalDate.text(candidate.startsAt, zone: zone, language: language) }
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
