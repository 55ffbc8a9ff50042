import Foundation
import Logging
import Postgres

/// The one run envelope of every executable (scenario jobs, `push-deliver`, `migrate`): a logger, the
/// stop signals of a writing run, the error-to-exit-code mapping, the `job_runs` row's end, and the
/// JSON summary line that is always the last line on stdout. After SIGTERM or SIGINT the job finishes
/// what is in flight, and the process then ends by that signal (see `StopRequest`).
public enum JobEnvelope {
    /// Runs `body` as one run of `job` and returns its exit status.
    /// - Parameter writes: true when the run may write (not a dry run): stop signals are then caught.
    public static func run(_ job: String, dryRun: Bool = false, asOf: Date = Date(), logLevel: LogLevelOption = .info,
                           writes: Bool, _ body: (JobRun) throws -> Void) -> ExitStatus {
        let logger = JobLogging.logger(job: job, level: logLevel)
        let clock = ContinuousClock()
        let started = clock.now
        let run = JobRun(job: job, dryRun: dryRun, asOf: asOf, logger: logger)
        if writes { StopRequest.shared.install() }
        do {
            try body(run)
        } catch {
            run.fail(JobFailure(classifying: error))
        }
        if run.stoppedBy != nil && run.outcome != "failed" { run.outcome = "stopped" }
        run.finishRecord()
        // A run skipped for another in progress leaves the metrics to that one: its success would hide a run
        // that hangs from the alert on the last success. So does a run limited to some organizations (by hand):
        // its success would hide scheduled runs that fail.
        if writes && run.outcome != "skipped" && !run.limited { run.publishMetrics(duration: clock.now - started) }
        Output.line(run.summaryLine(duration: clock.now - started))
        Output.flush()
        StopRequest.shared.endIfRequested()
        return run.status
    }

    /// A run that fails before it starts (a malformed setting read from the environment): it still ends
    /// with its summary line and, for a writing run, its metrics, so the alert on the last run sees it.
    public static func failed(_ job: String, dryRun: Bool = false, logLevel: LogLevelOption = .info, _ failure: JobFailure) -> ExitStatus {
        run(job, dryRun: dryRun, logLevel: logLevel, writes: !dryRun) { _ in throw failure }
    }
}

extension JobFailure {
    /// Any error as a message and an exit status.
    public init(classifying error: Error) {
        switch error {
        case let failure as JobFailure:
            self = failure
        case let error as PostgresError:
            switch error {
            case .invalidConnectionString:
                self.init(.config, "\(error) (check --database-url or DATABASE_URL)")
            case .invalidSettings:
                self.init(.config, "\(error) (check options= in --database-url or DATABASE_URL, and the PG* variables libpq reads: PGSERVICE and its service file, PGOPTIONS, PGSSLMODE, PGPORT, …; trying again will not help)")
            case .connectionFailed where error.refusedLogin == .login:
                self.init(.noPermission, "\(error) (the server refused the login: check the user and password of --database-url or DATABASE_URL, or PGUSER/PGPASSWORD/.pgpass, and pg_hba.conf; trying again will not help)")
            case .connectionFailed where error.refusedLogin == .connectPrivilege:
                self.init(.noPermission, "\(error) (the role may not connect to this database: GRANT CONNECT ON DATABASE to it; trying again will not help)")
            case .connectionFailed where error.refusedLogin == .tls:
                self.init(.config, "\(error) (the connection's TLS: check sslmode, sslrootcert and the host name in --database-url or DATABASE_URL, or PGSSLMODE/PGSSLROOTCERT; trying again will not help)")
            case .connectionFailed where error.refusedLogin == .database:
                self.init(.config, "\(error) (check the database name in --database-url or DATABASE_URL, or run migrate against the right database)")
            case .connectionFailed, .connectionLost:
                self.init(.unavailable, "\(error)")
            case .server(let server) where server.sqlState == SQLState.queryCanceled && server.message.contains("user request"):
                // pg_cancel_backend (an administrator, a client tool), not our timeout.
                self.init(.tempFail, "\(error) (cancelled from another session: try again)")
            case .server(let server) where server.sqlState == SQLState.queryCanceled:
                self.init(.tempFail, "\(error) (statement timeout: often a lock another session holds, which a longer timeout only waits on longer; else a slow statement, then raise --statement-timeout; try again later)")
            case .server(let server) where [SQLState.serializationFailure, SQLState.deadlockDetected, SQLState.lockNotAvailable].contains(server.sqlState):
                self.init(.tempFail, "\(error) (another transaction was in the way: try again)")
            case .server(let server) where server.sqlState == SQLState.insufficientPrivilege && server.message.hasPrefix("delivery_events"):
                // Our own guard (migrations 0002, 0007: the event log is append-only), not a missing grant: a
                // statement that should never have been made.
                self.init(.software, "\(error)")
            case .server(let server) where server.sqlState == SQLState.insufficientPrivilege:
                self.init(.noPermission, "\(error) (the database role lacks a privilege it needs: grant it, or run the job as the role that owns the tables)")
            case .server(let server) where server.sqlState.hasPrefix("08") || server.sqlState.hasPrefix("57P") || server.sqlState.hasPrefix("58"):
                self.init(.unavailable, "\(error)")
            case .server(let server) where server.sqlState == SQLState.readOnlyTransaction:
                // Not a bug: the server is a standby now (a failover, or a URL that reaches a replica).
                self.init(.tempFail, "\(error) (the database is read-only: a standby after a failover, or a URL that reaches a replica; try again against the primary)")
            case .server(let server) where server.sqlState.hasPrefix("53"):
                self.init(.tempFail, "\(error) (the database server is short of a resource: disk, memory or connections; try again later)")
            case .decoding:
                self.init(.dataError, "unexpected data in the database: \(error)")
            case .server where Schema.isNewerSchema(error):
                let version = Schema.seenVersion.withLock { $0 } ?? 0
                self.init(.config, "\(error) (the database schema is at version \(version), newer than this build's \(Schema.requiredVersion), and a migration since changed what this statement reads: run the build that matches the schema)")
            case .server, .encoding:
                self.init(.software, "\(error)")
            }
        default:
            self.init(.software, "unexpected error: \(error)")
        }
    }
}
