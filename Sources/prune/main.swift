import ArgumentParser
import Foundation
import JobKit
import Operations

/// Deletes what is past its retention, in bounded batches.
@main
struct PruneCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "prune",
        abstract: "Delete what is past its retention, in bounded batches (each its own short transaction): old decisions, read or deleted inbox rows, expired notifications, old delivery events and job runs, retired device tokens.",
        discussion: """
            Order, which keeps every foreign key satisfied: decisions; notifications (only with no push still \
            pending or retrying, together with their deliveries and delivery events; their decisions keep the \
            reason and dedupe key); delivery events; daily push slots of a local day more than a week past; retired tokens no delivery references; finished job runs no \
            decision or notification references. Processed events are event-notify's to prune.
            Each setting: the flag, else its environment variable, else the default shown.
            Exit codes: 0 done (also when another prune was running), 64 bad flags, 69 database unreachable, \
            75 statement timeout or lock, 77 a login refused or a privilege missing, 78 configuration (malformed variable or URL, unmigrated database). SIGTERM, SIGINT or SIGHUP: it stops between \
            batches, records what it deleted, then ends by that signal (143, 130, 129).
            """)

    @Flag(name: .long, help: "Print how many rows each rule would delete; delete nothing (read-only transaction).")
    var dryRun = false

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Decisions decided more than this many days ago. Env: PRUNE_DECISIONS_DAYS. Default: 90.", valueName: "days"))
    var decisionsDays: Int?

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Inbox rows read or deleted by the user and created more than this many days ago. Env: PRUNE_INBOX_DAYS. Default: 30.", valueName: "days"))
    var inboxDays: Int?

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Notifications expired more than this many days ago. Env: PRUNE_EXPIRED_DAYS. Default: 7.", valueName: "days"))
    var expiredDays: Int?

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("delivery_events older than this many days (at least 7: the database refuses younger). Env: PRUNE_EVENTS_DAYS. Default: 180.", valueName: "days"))
    var eventsDays: Int?

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Finished job_runs started more than this many days ago, once nothing refers to them. Env: PRUNE_RUNS_DAYS. Default: 180.", valueName: "days"))
    var runsDays: Int?

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Retired device tokens this many days after retirement, once no delivery refers to them. Env: PRUNE_TOKEN_GRACE_DAYS. Default: 30.", valueName: "days"))
    var tokenGraceDays: Int?

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Rows per batch (one short transaction each). Env: PRUNE_BATCH_SIZE. Default: 5000.", valueName: "n"))
    var batchSize: Int?

    @Option(name: .long, help: ArgumentHelp("PostgreSQL URL. Default: $DATABASE_URL, else libpq's PG* variables.", valueName: "url"))
    var databaseURL: String?

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Cancel any statement running longer than this many seconds.", valueName: "seconds"))
    var statementTimeout: Int = JobDatabase.defaultStatementTimeout

    @Option(name: .long, help: ArgumentHelp("Log level on stderr.", valueName: "level"))
    var logLevel: LogLevelOption = .info

    var flags: [String: Int] {
        let given: [(String, Int?)] = [
            ("decisions-days", decisionsDays), ("inbox-days", inboxDays), ("expired-days", expiredDays), ("events-days", eventsDays),
            ("runs-days", runsDays), ("token-grace-days", tokenGraceDays), ("batch-size", batchSize),
        ]
        return Dictionary(uniqueKeysWithValues: given.compactMap { name, value in value.map { (name, $0) } })
    }

    func validate() throws {
        try JobDatabase.validateStatementTimeout(statementTimeout)
        try JobDatabase.validateURLFlag(databaseURL)
        for (flag, value) in flags {
            if let problem = PruneSettings.problem(flag: flag, value: value) { throw ValidationError(problem) }
        }
    }

    func run() throws {
        let settings: PruneSettings
        do {
            settings = try PruneSettings.resolve(flags: flags)
        } catch let failure as JobFailure {
            throw ExitCode(JobEnvelope.failed("prune", dryRun: dryRun, logLevel: logLevel, failure).rawValue)
        }
        let status = PruneRunner.run(.init(settings: settings, dryRun: dryRun, databaseURL: databaseURL,
                                           statementTimeout: statementTimeout, logLevel: logLevel))
        if status != .ok { throw ExitCode(status.rawValue) }
    }
}
