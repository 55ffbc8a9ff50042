import ArgumentParser
import Foundation
import JobKit
import Postgres

/// The flags every scenario job shares.
public struct JobOptions: ParsableArguments, Sendable {
    @Flag(name: .long, help: "Decide and print the plan (who, why, the message; the suppressed with reasons). Writes nothing and sends nothing.")
    public var dryRun = false

    @Option(name: .long, help: "Output format for the plan: text or json (one object per line).")
    public var format: OutputFormat = .text

    @Option(name: .long, help: ArgumentHelp("Evaluate as of this instant instead of now (ISO 8601, e.g. 2026-11-22T08:00:00Z).", valueName: "instant"))
    public var now: Instant?

    @Option(name: .customLong("org"), help: ArgumentHelp("Only this organization (repeatable).", valueName: "uuid"))
    public var organizations: [OrganizationID] = []

    @Option(name: .long, help: ArgumentHelp("PostgreSQL URL or key=value string. Default: $DATABASE_URL, else libpq's PG* variables, service file and .pgpass.", valueName: "url"))
    public var databaseURL: String?

    @Flag(name: .long, help: "Print EXPLAIN ANALYZE of the candidate query (read-only) and exit.")
    public var explain = false

    @Option(name: .long, help: ArgumentHelp("Cancel any statement running longer than this many seconds.", valueName: "seconds"))
    public var statementTimeout: Int = JobDatabase.defaultStatementTimeout

    @Option(name: .long, help: ArgumentHelp("Log level on stderr: trace, debug, info, notice, warning, error.", valueName: "level"))
    public var logLevel: LogLevelOption = .info

    public init() {}

    public mutating func validate() throws {
        try JobDatabase.validateStatementTimeout(statementTimeout)
        try JobDatabase.validateURLFlag(databaseURL)
        if explain && dryRun { throw ValidationError("--explain and --dry-run cannot be used together") }
    }

    /// The connection string: the flag, else `DATABASE_URL`, else nil (libpq's defaults).
    public var resolvedDatabaseURL: String? {
        JobDatabase.url(flag: databaseURL)
    }
}

/// The flags of a job that serves every organization and has no candidate query of its own to explain
/// (event-notify): the shared ones but `--org` and `--explain`, which its help no longer offers.
public struct EveryOrganizationJobOptions: ParsableArguments, Sendable {
    @Flag(name: .long, help: "Decide and print the plan (who, why, the message; the suppressed with reasons). Writes nothing and sends nothing.")
    public var dryRun = false

    @Option(name: .long, help: "Output format for the plan: text or json (one object per line).")
    public var format: OutputFormat = .text

    @Option(name: .long, help: ArgumentHelp("Evaluate as of this instant instead of now (ISO 8601, e.g. 2026-11-22T08:00:00Z).", valueName: "instant"))
    public var now: Instant?

    @Option(name: .long, help: ArgumentHelp("PostgreSQL URL or key=value string. Default: $DATABASE_URL, else libpq's PG* variables, service file and .pgpass.", valueName: "url"))
    public var databaseURL: String?

    @Option(name: .long, help: ArgumentHelp("Cancel any statement running longer than this many seconds.", valueName: "seconds"))
    public var statementTimeout: Int = JobDatabase.defaultStatementTimeout

    @Option(name: .long, help: ArgumentHelp("Log level on stderr: trace, debug, info, notice, warning, error.", valueName: "level"))
    public var logLevel: LogLevelOption = .info

    public init() {}

    public mutating func validate() throws {
        try JobDatabase.validateStatementTimeout(statementTimeout)
        try JobDatabase.validateURLFlag(databaseURL)
    }

    /// The same, as the shared options the engine reads (no organization filter, no explain).
    public var jobOptions: JobOptions {
        var options = JobOptions()
        options.dryRun = dryRun
        options.format = format
        options.now = now
        options.databaseURL = databaseURL
        options.statementTimeout = statementTimeout
        options.logLevel = logLevel
        return options
    }
}

/// An organization id given with `--org`.
public struct OrganizationID: ExpressibleByArgument, Sendable, Hashable {
    public var id: UUID
    public init?(argument: String) {
        guard let id = UUID(uuidString: argument) else { return nil }
        self.id = id
    }
}
