import Foundation
import JobKit
import Postgres
import TextCoding

/// The `why` command's body: one user's whole story (decisions, notifications, deliveries and their
/// events, devices, the rules and preferences in force), read in one read-only transaction. It writes
/// nothing, not even a `job_runs` row, and ends with the summary line every executable ends with.
public enum WhyRunner {
    public struct Options: Sendable {
        public var userID: UUID
        public var scenario: String?
        public var since: Date?
        public var format: OutputFormat
        public var databaseURL: String?
        public var statementTimeout: Int
        public var logLevel: LogLevelOption

        public init(userID: UUID, scenario: String?, since: Date?, format: OutputFormat, databaseURL: String?,
                    statementTimeout: Int = JobDatabase.defaultStatementTimeout, logLevel: LogLevelOption = .info) {
            self.userID = userID
            self.scenario = scenario
            self.since = since
            self.format = format
            self.databaseURL = databaseURL
            self.statementTimeout = statementTimeout
            self.logLevel = logLevel
        }
    }

    public static func run(_ options: Options) -> ExitStatus {
        JobEnvelope.run("why", logLevel: options.logLevel, writes: false) { run in
            let connection = try JobDatabase.connect(url: JobDatabase.url(flag: options.databaseURL), name: "why",
                                                     statementTimeout: options.statementTimeout)
            try Schema.check(connection)
            let report = try connection.transaction(.readOnly) {
                try WhyReport.load(connection, userID: options.userID, scenario: options.scenario, since: options.since)
            }
            switch options.format {
            case .text: Output.write(WhyText.render(report))
            case .json: Output.line(WhyJSON.render(report))
            }
            run.counts = {
                var writer = JSONWriter()
                writer.add("user_id", options.userID.lowercasedString)
                writer.add("decisions", report.decisions.count)
                writer.add("notifications", report.notifications.count)
                writer.add("deliveries", report.deliveryCount)
                writer.add("delivery_events", report.eventCount)
                writer.add("without_notification", report.decisionsWithoutNotification.count)
                return writer
            }
        }
    }
}
