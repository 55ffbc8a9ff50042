import ArgumentParser
import Foundation
import JobKit
import Operations

/// Tells an operator one user's whole story: why they got, or did not get, each notification.
@main
struct WhyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "why",
        abstract: "Tell one user's whole story: every decision with its reason, the notifications stored, each delivery with its attempts and provider answers, the devices (retired when and why), the organization's rules and the user's preferences in force.",
        discussion: """
            Reads only, in one read-only transaction; writes nothing (no job_runs row). Device tokens show only \
            their last six characters. Text for a person; --format json prints one JSON object on one line for \
            tools. Either way the last line is the summary line every executable ends with.
            Exit codes: 0 done, 64 bad flags or a user or scenario that does not exist, 69 database unreachable, \
            75 statement timeout or lock, 77 a login refused or a privilege missing, 78 configuration (malformed URL, unmigrated database).
            """)

    @Argument(help: ArgumentHelp("The user's id.", valueName: "user-uuid"))
    var user: UserID

    @Option(name: .long, help: ArgumentHelp("Only this scenario's decisions and notifications (inactivity, assignment_follow_up, …).", valueName: "key"))
    var scenario: String?

    @Option(name: .long, help: ArgumentHelp("Only decisions and notifications from this instant on (ISO 8601: 2026-11-01 or 2026-11-01T08:00:00Z; years 1970 to 9000); a notification's deliveries and events come with it.", valueName: "date"))
    var since: Instant?

    @Option(name: .long, help: "text (for a person) or json (one object, for tools).")
    var format: OutputFormat = .text

    @Option(name: .long, help: ArgumentHelp("PostgreSQL URL. Default: $DATABASE_URL, else libpq's PG* variables.", valueName: "url"))
    var databaseURL: String?

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Cancel any statement running longer than this many seconds.", valueName: "seconds"))
    var statementTimeout: Int = JobDatabase.defaultStatementTimeout

    @Option(name: .long, help: ArgumentHelp("Log level on stderr.", valueName: "level"))
    var logLevel: LogLevelOption = .info

    func validate() throws {
        try JobDatabase.validateStatementTimeout(statementTimeout)
        try JobDatabase.validateURLFlag(databaseURL)
    }

    func run() throws {
        let status = WhyRunner.run(.init(userID: user.id, scenario: scenario, since: since?.date, format: format,
                                         databaseURL: databaseURL, statementTimeout: statementTimeout, logLevel: logLevel))
        if status != .ok { throw ExitCode(status.rawValue) }
    }
}

/// A user id on the command line: a malformed one is a usage error (64) before anything connects.
struct UserID: ExpressibleByArgument {
    var id: UUID
    init?(argument: String) {
        guard let id = UUID(uuidString: argument) else { return nil }
        self.id = id
    }
}
