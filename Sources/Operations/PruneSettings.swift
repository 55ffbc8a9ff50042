import Foundation
import JobKit

/// How long `prune` keeps each kind of row, and how many rows one batch deletes. Each setting is a flag,
/// else an environment variable (for the systemd unit and the crontab, which run `prune` without flags and
/// read /etc/mentor-push/env), else its default.
public struct PruneSettings: Sendable, Equatable {
    /// Decisions decided more than this many days ago (they grow by every suppressed candidate of every run).
    public var decisionsDays = 90
    /// Inbox rows read or deleted by the user and created more than this many days ago.
    public var inboxDays = 30
    /// Notifications whose `expires_at` passed more than this many days ago.
    public var expiredDays = 7
    /// delivery_events older than this; never below `eventsFloorDays`.
    public var eventsDays = 180
    /// Finished job_runs started more than this many days ago that nothing references any more.
    public var runsDays = 180
    /// Retired device tokens, this many days after they were retired, once no delivery references them.
    public var tokenGraceDays = 30
    /// Rows per batch; each batch is its own short transaction.
    public var batchSize = 5000

    /// The database refuses to delete a delivery event younger than this (migration 0007).
    public static let eventsFloorDays = 7

    public init() {}

    /// One setting: its flag, its variable, its default and its range.
    public struct Setting {
        public let flag: String
        public let variable: String
        public let range: ClosedRange<Int>
        let keyPath: WritableKeyPath<PruneSettings, Int>
        public var defaultValue: Int { PruneSettings()[keyPath: keyPath] }
    }

    public static var all: [Setting] {
        [
            Setting(flag: "decisions-days", variable: "PRUNE_DECISIONS_DAYS", range: 1...36_500, keyPath: \.decisionsDays),
            Setting(flag: "inbox-days", variable: "PRUNE_INBOX_DAYS", range: 1...36_500, keyPath: \.inboxDays),
            Setting(flag: "expired-days", variable: "PRUNE_EXPIRED_DAYS", range: 0...36_500, keyPath: \.expiredDays),
            Setting(flag: "events-days", variable: "PRUNE_EVENTS_DAYS", range: eventsFloorDays...36_500, keyPath: \.eventsDays),
            Setting(flag: "runs-days", variable: "PRUNE_RUNS_DAYS", range: 1...36_500, keyPath: \.runsDays),
            Setting(flag: "token-grace-days", variable: "PRUNE_TOKEN_GRACE_DAYS", range: 0...36_500, keyPath: \.tokenGraceDays),
            Setting(flag: "batch-size", variable: "PRUNE_BATCH_SIZE", range: 1...100_000, keyPath: \.batchSize),
        ]
    }

    /// The usage error for a flag outside its range, or nil.
    public static func problem(flag: String, value: Int) -> String? {
        guard let setting = all.first(where: { $0.flag == flag }), !setting.range.contains(value) else { return nil }
        return "--\(flag) must be from \(setting.range.lowerBound) to \(setting.range.upperBound)"
            + (flag == "events-days" ? " (the database keeps delivery events at least \(eventsFloorDays) days)" : "")
    }

    /// Flags (by name, without the dashes) first, then the environment, then the defaults. A malformed or
    /// out-of-range variable is a configuration error (78) naming it, never silently the default.
    public static func resolve(flags: [String: Int], environment: [String: String] = ProcessInfo.processInfo.environment) throws -> PruneSettings {
        var settings = PruneSettings()
        for setting in all {
            if let value = flags[setting.flag] {
                if let problem = problem(flag: setting.flag, value: value) { throw JobFailure(.usage, problem) }
                settings[keyPath: setting.keyPath] = value
            } else if let text = environment[setting.variable], !text.isEmpty {
                guard let value = Int(text), setting.range.contains(value) else {
                    throw JobFailure(.config, "\(setting.variable) must be a whole number from \(setting.range.lowerBound) to \(setting.range.upperBound), found \"\(text)\"")
                }
                settings[keyPath: setting.keyPath] = value
            }
        }
        return settings
    }
}
