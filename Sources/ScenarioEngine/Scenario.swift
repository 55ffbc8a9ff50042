import Foundation
import Postgres
import TextCoding

/// One notification scenario, as a declaration: only what is its own. `ScenarioRunner` does the rest
/// (flags, run claim, rules, the policies, recording, delivery, the plan, the summary, stop on signal).
///
/// The candidate query selects, by name, `user_id` (the recipient), `subject` (what the notification
/// is about: `Subject`'s text form) and the scenario's own columns. The engine joins the recipient's
/// organization, name, language, time zone, preferences and devices itself, and hands the scenario only
/// rows of organizations it has a rule for.
public protocol Scenario: Sendable {
    associatedtype Settings: Sendable
    associatedtype Candidate

    /// The scenario's key in `scenario_defaults` and `organization_scenario_rules`.
    var key: String { get }
    /// The executable's name, also the run-lock key and `application_name`.
    var jobName: String { get }
    /// One line for `--help`: what the job does.
    var abstract: String { get }
    /// The inbox category, and the `push_notification_configs` switch that silences it.
    var category: NotificationCategory { get }
    /// The reasons of its own this scenario may suppress with, in the order summaries list them.
    var suppressionReasons: [SuppressionReason] { get }

    /// Reads and validates an organization's merged settings for this scenario.
    func settings(_ reader: SettingsReader) throws -> Settings

    /// Why the organization is not due at `now` (a digest before its send hour), or nil when it is.
    /// Organizations not due are left out of the candidate query and named in the log and the plan.
    func notDue(_ rule: OrganizationRule<Settings>, now: Date) -> String?

    /// The one set-based query that finds every candidate of the given organizations, as of `now`.
    func candidateQuery(rules: [OrganizationRule<Settings>], now: Date) -> Query

    /// Reads the scenario's own columns of one candidate row.
    func candidate(_ row: CandidateRow) throws -> Candidate

    /// Decides for a candidate that every policy before the scenario let through.
    func decide(_ candidate: Candidate, recipient: Recipient, rule: OrganizationRule<Settings>, now: Date) -> Decision
}

extension Scenario {
    public var suppressionReasons: [SuppressionReason] { [] }
    public func notDue(_ rule: OrganizationRule<Settings>, now: Date) -> String? { nil }
}

/// What a notification or decision is about, stored as `kind:id` in `subject` columns. A push about a
/// subject that is gone (`assignment:<id>` withdrawn) is cancelled by the database before it goes out.
public struct Subject: Sendable, Hashable, CustomStringConvertible {
    public var text: String
    public init(_ text: String) { self.text = text }
    public static func assignment(_ id: UUID) -> Subject { Subject("assignment:" + id.lowercasedString) }
    public static func year(_ year: Int) -> Subject { Subject("year:\(year)") }
    public static func day(_ isoDate: String) -> Subject { Subject("day:" + isoDate) }
    public var description: String { text }
}

/// What was decided for one candidate.
public enum Decision: Sendable {
    case notify(NotificationDraft)
    case suppress(SuppressionReason, detail: String)
}

/// A notification a scenario wants stored in a user's inbox and pushed to their devices.
public struct NotificationDraft: Sendable {
    public var title: String
    public var body: String
    /// Deep-link data for the app: string values only (FCM's `data` takes strings only).
    public var data: [(String, String)]
    /// Names the scenario, the subject and the period: the same key is never stored twice.
    public var dedupeKey: String
    public var expiresAt: Date?
    /// Why this user is told, for the plan and `decisions.detail`.
    public var why: String
    /// When the push may go (quiet hours); nil: at once. The inbox row is stored at once either way.
    public var deliverAt: Date?
    /// Why the notification goes to the inbox only, without a push (a policy's reason), if it does.
    public var inboxOnly: NotifiedReason.InboxOnly?
    /// A critical category's notification: time-sensitive on the phone, not held by quiet hours or the cap.
    public var critical = false
    /// Listed in the user's inbox (false: a push-only category's notification, stored for its deliveries).
    public var inInbox = true
    /// The daily slot this push must take (`DailyCap`); nil: not counted against a cap.
    public var dailySlot: DailySlot?
    /// The assignments the notification lists (an overdue digest's cases): a waiting push whose every one is
    /// settled is cancelled (migration 0043).
    public var aboutAssignments: [UUID] = []

    public init(title: String, body: String, data: [(String, String)], dedupeKey: String, expiresAt: Date?, why: String) {
        self.title = title
        self.body = body
        self.data = data
        self.dedupeKey = dedupeKey
        self.expiresAt = expiresAt
        self.why = why
    }

    /// `aboutAssignments` as the recorder passes them: comma-separated; nil for none.
    var aboutAssignmentsText: String? {
        aboutAssignments.isEmpty ? nil : aboutAssignments.map(\.lowercasedString).joined(separator: ",")
    }

    /// `data` as a JSON object.
    public var dataJSON: String {
        var writer = JSONWriter()
        for (key, value) in data { writer.add(key, value) }
        return writer.json
    }
}

/// Why a candidate was or was not notified: what `decisions.reason` stores. Open like postgres-nio's
/// `PSQLError.Code`: the engine and its policies declare theirs here, each scenario its own beside it.
public struct SuppressionReason: Sendable, Hashable, CustomStringConvertible {
    public let rawValue: String
    public init(_ rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }

    /// Another run stored the same dedupe key first (or earlier).
    public static let alreadyNotified = SuppressionReason("already_notified")
    /// The candidate's rows hold what cannot be (a date of `-infinity`): nothing is decided for them; the run
    /// exits 65 and the decision's detail names the column to fix.
    public static let invalidData = SuppressionReason("invalid_data")
}

/// The reasons a notified decision is stored with.
public enum NotifiedReason {
    public static let notified = "notified"
    /// Stored in the inbox; the user has no active device to push to.
    public static let inboxOnlyNoDevice = "inbox_only_no_device"
    /// Stored in the inbox at once; the push waits for the user's quiet hours to end.
    public static let deferredQuietHours = "deferred_quiet_hours"
    /// Stored in the inbox without a push: the user's daily cap of non-critical pushes is reached.
    public static let capped = "capped"
    /// Stored in the inbox without a push: the category's channels are the inbox only.
    public static let inboxOnlyChannel = "inbox_only_channel"

    /// A policy's reason to store a notification without pushing it, with the detail for people.
    public struct InboxOnly: Sendable {
        public var reason: String
        public var detail: String
        public init(reason: String, detail: String) {
            self.reason = reason
            self.detail = detail
        }
    }
}

/// The inbox categories. Each has a switch (a column) in `push_notification_configs`, so a new one comes
/// with a migration and a line here.
public struct NotificationCategory: Sendable, Hashable, CustomStringConvertible {
    public let rawValue: String
    /// The preference column, fixed at compile time so it can be spliced into SQL.
    public let preferenceColumn: StaticString

    init(_ rawValue: String, column: StaticString) {
        self.rawValue = rawValue
        self.preferenceColumn = column
    }

    public static func == (a: Self, b: Self) -> Bool { a.rawValue == b.rawValue }
    public func hash(into hasher: inout Hasher) { hasher.combine(rawValue) }
    public var description: String { rawValue }

    public static let inactivity = NotificationCategory("inactivity", column: "pc.inactivity")
    public static let assignmentFollowUp = NotificationCategory("assignment_follow_up", column: "pc.assignment_follow_up")
    public static let overdueDigest = NotificationCategory("overdue_digest", column: "pc.overdue_digest")
    public static let milestone = NotificationCategory("milestone", column: "pc.milestone")
    public static let honorarium = NotificationCategory("honorarium", column: "pc.honorarium")
    public static let impactSummary = NotificationCategory("impact_summary", column: "pc.impact_summary")
    public static let availabilityChange = NotificationCategory("availability_change", column: "pc.availability_change")
    public static let newAssignment = NotificationCategory("new_assignment", column: "pc.new_assignment")
    public static let activityReminder = NotificationCategory("activity_reminder", column: "pc.activity_reminder")
}

extension NotificationDraft {
    /// Why a second candidate of this notification in one run is decided already notified (`already_notified`),
    /// as the recorder records it and the dry run's plan says it.
    var sameAsAnother: String { "\(why); the same notification as another candidate of this run (\(dedupeKey))" }
}
