import ArgumentParser
import Foundation
import JobKit
import Postgres

/// The flags every job that decides shares: the scenario jobs (with ``JobOptions``'s `--org` and `--explain`) and
/// event-notify (which serves every organization and has no query of its own to explain).
public struct SharedJobFlags: ParsableArguments, Sendable {
    @Flag(name: .long, help: "Decide and print the plan (who, why, the message; the suppressed with reasons). Writes nothing and sends nothing.")
    public var dryRun = false

    @Option(name: .long, help: "Output format for the plan: text or json (one object per line).")
    public var format: OutputFormat = .text

    @Option(name: .long, help: ArgumentHelp("Evaluate as of this instant instead of now (ISO 8601, e.g. 2026-11-22T08:00:00Z; without an offset, UTC; years 1970 to 9000). A real run may not be ahead of the clock; --dry-run may.", valueName: "instant"))
    public var now: Instant?

    @Option(name: .long, help: ArgumentHelp("PostgreSQL URL or key=value string. Default: $DATABASE_URL, else libpq's PG* variables, service file and .pgpass.", valueName: "url"))
    public var databaseURL: String?

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Cancel any statement running longer than this many seconds.", valueName: "seconds"))
    public var statementTimeout: Int = JobDatabase.defaultStatementTimeout

    @Option(name: .long, help: ArgumentHelp("Log level on stderr: trace, debug, info, notice, warning, error.", valueName: "level"))
    public var logLevel: LogLevelOption = .info

    public init() {}

    public mutating func validate() throws {
        try JobDatabase.validateStatementTimeout(statementTimeout)
        try JobDatabase.validateURLFlag(databaseURL)
    }

    /// Refuses a real run as of an instant that has not come: it decides on tomorrow's facts (everybody inactive
    /// by then) and sends today, and its decisions and dedupe keys carry that future date. Looking ahead is what
    /// the dry run (and a scenario job's `--explain`, which runs nothing) is for; an instant past is a catch-up
    /// run, and allowed. Called by the commands' own `validate`, which know whether they run for real.
    public func refuseNowAheadOfTheClock() throws {
        if !dryRun, let now, now.date > Date().addingTimeInterval(SharedJobFlags.clockSkew) {
            throw ValidationError("--now \(Timestamp.iso8601(now.date)) is ahead of the clock: only a --dry-run may look ahead (a real run would notify today as of then)")
        }
    }

    /// How far ahead of this machine's clock `--now` may be for a real run (the clocks of two machines).
    static let clockSkew: TimeInterval = 300
}

/// The flags every scenario job shares: ``SharedJobFlags``, and the organizations to decide for and the
/// candidate query to explain.
public struct JobOptions: ParsableArguments, Sendable {
    @OptionGroup public var shared: SharedJobFlags

    @Option(name: .customLong("org"), help: ArgumentHelp("Only this organization (repeatable).", valueName: "uuid"))
    public var organizations: [OrganizationID] = []

    @Flag(name: .long, help: "Print EXPLAIN ANALYZE of the candidate query (read-only) and exit.")
    public var explain = false

    /// For parsing only: its `shared` group holds no value until the command line is parsed.
    public init() {}

    /// Options made in code (every organization, no explain unless set): how event-notify and the what-if run
    /// the engine.
    public init(_ shared: SharedJobFlags) {
        self.shared = shared
    }

    public mutating func validate() throws {
        if explain && dryRun { throw ValidationError("--explain and --dry-run cannot be used together") }
        if !explain { try shared.refuseNowAheadOfTheClock() }
        // Named twice is named once (the summary's `limited_to` listed it twice).
        var named = Set<OrganizationID>()
        organizations = organizations.filter { named.insert($0).inserted }
    }

    public var dryRun: Bool { get { shared.dryRun } set { shared.dryRun = newValue } }
    public var format: OutputFormat { get { shared.format } set { shared.format = newValue } }
    public var now: Instant? { get { shared.now } set { shared.now = newValue } }
    public var databaseURL: String? { get { shared.databaseURL } set { shared.databaseURL = newValue } }
    public var statementTimeout: Int { get { shared.statementTimeout } set { shared.statementTimeout = newValue } }
    public var logLevel: LogLevelOption { get { shared.logLevel } set { shared.logLevel = newValue } }

    /// The connection string: the flag, else `DATABASE_URL`, else nil (libpq's defaults).
    public var resolvedDatabaseURL: String? {
        JobDatabase.url(flag: databaseURL)
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
