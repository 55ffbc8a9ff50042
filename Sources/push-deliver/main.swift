import ArgumentParser
import Delivery
import Foundation
import JobKit

/// Sends every due delivery to APNs and FCM: new ones, retries, and rows a crashed run left.
@main
struct PushDeliverCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "push-deliver",
        abstract: "Send every due push delivery (new, retries, left by a crashed run) to APNs and FCM over HTTP/2.",
        discussion: "Many push-deliver processes may run at once against one database: each claims its own rows. Exit codes: 0 done, 64 bad flags, 65 bad data, 69 database or provider unreachable (or stopped for an outage), 70 bug, 75 statement timeout or lock, 77 a login refused or a privilege missing, 78 configuration (missing or malformed key, broken credentials). SIGTERM, SIGINT or SIGHUP: pushes in flight finish and are recorded, the rest is released for the next run, then it ends by that signal (143, 130, 129); a second SIGTERM or SIGINT ends it at once.")

    @Flag(name: .long, help: "List what would be sent; send nothing, write nothing.")
    var dryRun = false

    @Option(name: .long, help: "Output format for --dry-run: text or json.")
    var format: OutputFormat = .text

    @Option(name: .long, help: ArgumentHelp("PostgreSQL URL. Default: $DATABASE_URL, else libpq's PG* variables.", valueName: "url"))
    var databaseURL: String?

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Seconds a claimed delivery stays invisible to other push-deliver processes; after a crash it is due again once this passes. Each request times out within half of it.", valueName: "seconds"))
    var lease: Int = 300

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Engines side by side, each on its own thread with its own database and HTTP/2 connections. Env: PUSH_WORKERS.", valueName: "n"))
    var workers: Int?

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Cancel any statement running longer than this many seconds.", valueName: "seconds"))
    var statementTimeout: Int = JobDatabase.defaultStatementTimeout

    @Option(name: .long, help: ArgumentHelp("Log level on stderr.", valueName: "level"))
    var logLevel: LogLevelOption = .info

    @OptionGroup(title: "Push providers") var delivery: DeliveryOptions

    func validate() throws {
        guard (1...86_400).contains(lease) else { throw ValidationError("--lease must be from 1 to 86400 seconds (a day)") }
        try JobDatabase.validateStatementTimeout(statementTimeout)
        try JobDatabase.validateURLFlag(databaseURL)
        if let workers { guard (1...32).contains(workers) else { throw ValidationError("--workers must be from 1 to 32") } }
    }

    func run() throws {
        let workers: Int
        do {
            workers = try DeliverRunner.Options.workers(flag: self.workers)
        } catch let failure as JobFailure {
            throw ExitCode(JobEnvelope.failed("push-deliver", dryRun: dryRun, logLevel: logLevel, failure).rawValue)
        }
        let status = DeliverRunner.run(.init(databaseURL: databaseURL, dryRun: dryRun, format: format, lease: lease,
                                             statementTimeout: statementTimeout, logLevel: logLevel, delivery: delivery,
                                             workers: workers))
        if status != .ok { throw ExitCode(status.rawValue) }
    }
}
