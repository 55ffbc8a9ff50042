import TextCoding
import Foundation
import Postgres

/// One notification scenario: which users are candidates, what each is told, and why the others are
/// not. A scenario is one file of rules; `JobRunner` does everything else (flags, run claiming, rules,
/// preferences, recording, the plan, the summary).
///
/// The candidate query must select `Recipient.columns(for:)` first (from `users u` and
/// `LEFT JOIN push_notification_configs pc ON pc.user_id = u.id`), then the scenario's own columns
/// from index `Recipient.columnCount` on. Organization defaults come from the rules, not the query.
public protocol Scenario: Sendable {
    associatedtype Settings: Sendable
    associatedtype Candidate

    /// The scenario's key in `scenario_defaults` and `organization_scenario_rules`.
    var key: String { get }
    /// The executable's name, also the run-lock key and `application_name`.
    var jobName: String { get }
    /// The inbox category, and the `push_notification_configs` switch that silences it.
    var category: NotificationCategory { get }

    /// Reads and validates an organization's merged settings for this scenario.
    func settings(_ reader: SettingsReader) throws -> Settings

    /// The one set-based query that finds every candidate of the given organizations, as of `now`.
    func candidateQuery(rules: [OrganizationRule<Settings>], now: Date) -> Query

    /// Decodes one row of the candidate query (the recipient columns are decoded by the runner).
    func candidate(_ row: Row, recipient: Recipient) throws -> Candidate

    /// Decides for a candidate whose organization has the scenario on and whose preferences allow it.
    func decide(_ candidate: Candidate, recipient: Recipient, rule: OrganizationRule<Settings>, now: Date) -> Decision
}

/// The inbox categories. Each has a switch in `push_notification_configs`.
public enum NotificationCategory: String, Sendable, CaseIterable {
    case inactivity
    case assignmentFollowUp = "assignment_follow_up"
    case overdueDigest = "overdue_digest"
    case milestone
    case honorarium
    case impactSummary = "impact_summary"
    case availabilityChange = "availability_change"
    case newAssignment = "new_assignment"
    case activityReminder = "activity_reminder"

    /// The preference column, fixed at compile time so it can be spliced into SQL.
    public var preferenceColumn: StaticString {
        switch self {
        case .inactivity: return "pc.inactivity"
        case .assignmentFollowUp: return "pc.assignment_follow_up"
        case .overdueDigest: return "pc.overdue_digest"
        case .milestone: return "pc.milestone"
        case .honorarium: return "pc.honorarium"
        case .impactSummary: return "pc.impact_summary"
        case .availabilityChange: return "pc.availability_change"
        case .newAssignment: return "pc.new_assignment"
        case .activityReminder: return "pc.activity_reminder"
        }
    }
}

/// The person a candidate row is about, with the preferences every scenario honors.
public struct Recipient: Sendable {
    public var userID: UUID
    public var organizationID: UUID
    public var displayName: String
    public var language: Language
    /// The user's IANA time zone, else the organization's.
    public var timeZone: String
    public var pushEnabled: Bool
    public var categoryEnabled: Bool
    public var activeDevices: Int

    /// How many columns `columns(for:)` selects.
    public static let columnCount = 8

    /// The select list every candidate query starts with.
    public static func columns(for category: NotificationCategory) -> Query {
        """
        u.id, u.organization_id, u.display_name, u.locale, u.time_zone,
        coalesce(pc.enabled, true), coalesce(\(sql: category.preferenceColumn), true),
        (SELECT count(*) FROM device_tokens dt WHERE dt.user_id = u.id AND dt.retired_at IS NULL)
        """
    }

    /// The organization this row belongs to, read before the rest of the row.
    static func organization(of row: Row) throws -> UUID { try row.decode(1) }

    init<S: Sendable>(row: Row, rule: OrganizationRule<S>) throws {
        userID = try row.decode(0)
        organizationID = rule.organizationID
        displayName = try row.decode(2)
        let locale = try row.decode(3, as: String?.self)
        language = locale == nil ? rule.defaultLanguage : Language.resolve(locale, organizationDefault: rule.defaultLocale)
        timeZone = try row.decode(4, as: String?.self) ?? rule.timeZone
        pushEnabled = try row.decode(5)
        categoryEnabled = try row.decode(6)
        activeDevices = try row.decode(7)
    }
}

/// What a scenario decided for one candidate.
public enum Decision: Sendable {
    case notify(NotificationDraft)
    case suppress(SuppressionReason, detail: String)
}

/// Why a candidate was not notified. The raw value is what `decisions.reason` stores.
public enum SuppressionReason: String, Sendable, CaseIterable {
    case organizationScenarioOff = "organization_scenario_off"
    case pushDisabled = "push_disabled"
    case categoryDisabled = "category_disabled"
    case paused
    case alreadyNotified = "already_notified"
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

    public init(title: String, body: String, data: [(String, String)], dedupeKey: String, expiresAt: Date?, why: String) {
        self.title = title
        self.body = body
        self.data = data
        self.dedupeKey = dedupeKey
        self.expiresAt = expiresAt
        self.why = why
    }

    /// `data` as a JSON object.
    public var dataJSON: String {
        var writer = JSONWriter()
        for (key, value) in data { writer.add(key, value) }
        return writer.json
    }
}
