import Foundation
import JobKit
import Postgres

/// The person a candidate row is about, with what every policy may need: language, time zone,
/// preferences and active devices. The engine selects these itself around the scenario's query.
public struct Recipient: Sendable {
    public var userID: UUID
    public var organizationID: UUID
    public var displayName: String
    public var language: Language
    /// The user's IANA time zone, else the organization's.
    public var timeZone: String
    /// The user's own time zone when it is not one we know (a row written before migration 0016): the
    /// organization's is used instead, and the run reports it.
    public var unknownTimeZone: String?
    public var pushEnabled: Bool
    public var categoryEnabled: Bool
    public var activeDevices: Int
    /// The user's quiet hours (else the organization's), as seconds after local midnight, if any.
    public var quietHours: (start: Int, end: Int)?
    /// Whether the organization marks this notification's category critical.
    public var criticalCategory: Bool
    /// The user's daily cap of non-critical pushes (the lower of the organization's and their own), if any.
    public var dailyCap: Int?
    /// The daily slots already taken on the local day the run's pushes go (`now`, or the real time for a catch-up
    /// run), counted only when there is a cap.
    public var pushesToday: Int
    /// The daily slots already taken on the local day after that one (a push quiet hours defer may go then),
    /// counted only when there is a cap.
    public var pushesNextDay: Int
    /// The category's channels: the organization's (else the category's default), narrowed by the user's.
    public var channels: CategoryChannels

    /// The time zone of the user `u` (a `users` row joined as `u`) as PostgreSQL can use it: theirs if it knows
    /// it, else their organization's, else UTC.
    public static let knownTimeZone: Query = """
        coalesce((SELECT z.name FROM time_zone_names z WHERE z.name = u.time_zone),
                 (SELECT z.name FROM organizations o JOIN time_zone_names z ON z.name = o.time_zone WHERE o.id = u.organization_id),
                 'UTC')
        """

    /// The scenario's query wrapped with the recipient's columns, each named `recipient_…`.
    static func wrap(_ query: Query, category: NotificationCategory, now: Date) -> Query {
        // The slots taken on the day the run's pushes go: a catch-up run's go now (`CatchUp`), as `DailyCap` counts.
        let pushesGo = CatchUp.lateAt(asOf: now) ?? now
        return """
        SELECT c.*, u.organization_id AS recipient_organization_id, u.display_name AS recipient_name,
               u.locale AS recipient_locale, u.time_zone AS recipient_time_zone,
               coalesce(pc.enabled, true) AS recipient_push_enabled,
               coalesce(\(sql: category.preferenceColumn), true) AS recipient_category_enabled,
               (SELECT count(*) FROM active_device_tokens dt WHERE dt.user_id = u.id) AS recipient_devices,
               extract(epoch FROM coalesce(pc.quiet_hours_start, op.quiet_hours_start))::int AS recipient_quiet_start,
               extract(epoch FROM coalesce(pc.quiet_hours_end, op.quiet_hours_end))::int AS recipient_quiet_end,
               coalesce(\(category.rawValue) = ANY(op.critical_categories), false) AS recipient_critical,
               least(op.daily_push_cap, pc.daily_push_cap) AS recipient_daily_cap,
               slots.today AS recipient_pushes_today,
               coalesce(oc.channels, nc.channels, 'push_and_inbox') AS recipient_channels, uc.channels AS recipient_user_channels,
               EXISTS (SELECT FROM time_zone_names z WHERE z.name = u.time_zone) AS recipient_time_zone_held,
               slots.next_day AS recipient_pushes_next_day
          FROM (\(query)) c
          JOIN users u ON u.id = c.user_id
          LEFT JOIN push_notification_configs pc ON pc.user_id = u.id
          LEFT JOIN organization_delivery_policies op ON op.organization_id = u.organization_id
          LEFT JOIN notification_categories nc ON nc.category = \(category.rawValue)
          LEFT JOIN organization_category_channels oc ON oc.organization_id = u.organization_id AND oc.category = \(category.rawValue)
          LEFT JOIN user_category_channels uc ON uc.user_id = u.id AND uc.category = \(category.rawValue)
          -- The slots taken that day and the next (where quiet hours may defer a push), with a cap only: one range
          -- of the slots' index per user.
          LEFT JOIN LATERAL (
              SELECT count(*) FILTER (WHERE s.local_day = day.today) AS today, count(*) FILTER (WHERE s.local_day > day.today) AS next_day
                FROM (SELECT (\(pushesGo)::timestamptz AT TIME ZONE \(Recipient.knownTimeZone))::date AS today) day
                JOIN daily_push_slots s ON s.user_id = u.id AND s.local_day BETWEEN day.today AND day.today + 1
               WHERE op.daily_push_cap IS NOT NULL OR pc.daily_push_cap IS NOT NULL
          ) slots ON true
        """
    }

    /// The columns `wrap` adds, in its order, after the scenario's own: read by position from the end of
    /// the row (`ColumnIndex` checks the names once per query), not looked up by name for every row.
    static let columns = ["recipient_organization_id", "recipient_name", "recipient_locale", "recipient_time_zone",
                          "recipient_push_enabled", "recipient_category_enabled", "recipient_devices",
                          "recipient_quiet_start", "recipient_quiet_end", "recipient_critical", "recipient_daily_cap",
                          "recipient_pushes_today", "recipient_channels", "recipient_user_channels", "recipient_time_zone_held",
                          "recipient_pushes_next_day"]

    /// The recipient's organization, which picks the rule the rest of the row is read with.
    static func organizationID(of row: CandidateRow) throws -> UUID {
        try row.row.decode(try row.columns.recipientBase(), as: UUID.self)
    }

    init<S: Sendable>(_ row: CandidateRow, rule: OrganizationRule<S>) throws {
        let base = try row.columns.recipientBase()
        func column<T: PostgresDecodable>(_ offset: Int, as type: T.Type = T.self) throws -> T { try row.row.decode(base + offset, as: T.self) }
        func column<T: PostgresDecodable>(_ offset: Int, as type: T?.Type = T?.self) throws -> T? { try row.row.decode(base + offset, as: T?.self) }
        userID = try row.decode("user_id")
        organizationID = rule.organizationID
        displayName = try column(1)
        let locale = try column(2, as: String?.self)
        language = locale == nil ? rule.defaultLanguage : Language.resolve(locale, organizationDefault: rule.defaultLocale, available: rule.messages.languages)
        let ownZone = try column(3, as: String?.self)
        // Known to both sides: held by `time_zone_names` (what the candidate queries and the daily cap use,
        // `knownTimeZone`) and by Foundation. Foundation alone takes "GMT+5" as five hours east; PostgreSQL does not.
        if let ownZone, !(try column(14, as: Bool.self) && LocalClock.isKnown(ownZone)) {
            unknownTimeZone = ownZone
            timeZone = rule.timeZone
        } else {
            timeZone = ownZone ?? rule.timeZone
        }
        pushEnabled = try column(4)
        categoryEnabled = try column(5)
        activeDevices = try column(6)
        if let start = try column(7, as: Int?.self), let end = try column(8, as: Int?.self) {
            quietHours = (start, end)
        }
        criticalCategory = try column(9)
        dailyCap = try column(10, as: Int?.self)
        pushesToday = try column(11, as: Int?.self) ?? 0
        pushesNextDay = try column(15, as: Int?.self) ?? 0
        channels = CategoryChannels(try column(12))
        if let own = try column(13, as: String?.self) { channels.formIntersection(CategoryChannels(own)) }
    }
}

/// Where a category's notifications go: the inbox, a push, both, or (a user narrowing an organization's
/// choice to nothing) neither. Stored as `push_and_inbox`, `inbox_only` or `push_only`.
public struct CategoryChannels: Sendable, Equatable, CustomStringConvertible {
    public var push: Bool
    public var inbox: Bool

    public init(push: Bool, inbox: Bool) {
        self.push = push
        self.inbox = inbox
    }

    /// Reads the stored text (the database's check allows only the three values).
    public init(_ text: String) {
        push = text != "inbox_only"
        inbox = text != "push_only"
    }

    public mutating func formIntersection(_ other: CategoryChannels) {
        push = push && other.push
        inbox = inbox && other.inbox
    }

    public var description: String {
        switch (push, inbox) {
        case (true, true): return "push_and_inbox"
        case (false, true): return "inbox_only"
        case (true, false): return "push_only"
        case (false, false): return "none"
        }
    }
}

/// One row of a candidate query, read by column name. The names are looked up once per query, not
/// once per row (a streamed row is only valid inside its callback; `columns` outlives it).
public struct CandidateRow {
    let row: Row
    let columns: ColumnIndex

    public func decode<T: PostgresDecodable>(_ name: String, as type: T.Type = T.self) throws -> T {
        try row.decode(try columns.index(name), as: T.self)
    }

    public func decode<T: PostgresDecodable>(_ name: String, as type: T?.Type = T?.self) throws -> T? {
        try row.decode(try columns.index(name), as: T?.self)
    }
}

/// Column names to positions, learnt from the first row of a result.
final class ColumnIndex {
    private var positions: [String: Int] = [:]
    private var names: [String] = []
    private var base: Int?

    func learn(_ row: Row) {
        guard positions.isEmpty else { return }
        for column in 0..<row.count {
            names.append(row.name(column))
            positions[row.name(column)] = positions[row.name(column)] ?? column
        }
    }

    func index(_ name: String) throws -> Int {
        guard let index = positions[name] else {
            throw JobFailure(.software, "the candidate query has no column \"\(name)\" (it has: \(positions.keys.sorted().joined(separator: ", ")))")
        }
        return index
    }

    /// Where `Recipient.columns` start: the last columns of the row, checked by name once.
    func recipientBase() throws -> Int {
        if let base { return base }
        let start = names.count - Recipient.columns.count
        guard start >= 0, Array(names[start...]) == Recipient.columns else {
            throw JobFailure(.software, "the candidate query does not end with the recipient's columns (\(Recipient.columns.joined(separator: ", ")))")
        }
        base = start
        return start
    }
}
