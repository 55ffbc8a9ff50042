import ArgumentParser
import Foundation
import Postgres

/// How every executable finds and opens its database, so they all behave the same.
public enum JobDatabase {
    /// The connection string: the flag, else `DATABASE_URL` (an empty one as it is: ``connect(url:name:statementTimeout:)``
    /// refuses it), else nil (libpq's own conventions).
    public static func url(flag: String?, environment: [String: String] = ProcessInfo.processInfo.environment) -> String? {
        flag ?? environment["DATABASE_URL"]
    }

    /// Seconds any one statement may run, unless `--statement-timeout` says otherwise.
    public static let defaultStatementTimeout = 300

    /// Opens a connection: a malformed URL exits 78, a server that cannot be reached 69, each with
    /// libpq's message (never the URL's password).
    public static func connect(url: String?, name: String, statementTimeout: Int = defaultStatementTimeout) throws -> Connection {
        if url?.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty == true {
            // An empty flag is refused when the flags are read (64): this is `DATABASE_URL=''` (a line of an environment
            // file, a unit), a mistake, not a wish for libpq's defaults, which may reach another database.
            throw JobFailure(.config, "DATABASE_URL is set but empty (or blank): give the database's URL (postgresql://…), or unset it to use libpq's PG* variables")
        }
        do {
            return try Connection(url: url, applicationName: name, statementTimeout: .seconds(statementTimeout))
        } catch {
            throw JobFailure(classifying: error)
        }
    }

    /// Throws the usage error for an empty `--database-url` (`--database-url "$URL"` with `URL` unset): it
    /// would otherwise mean libpq's defaults, some other database than the one meant.
    public static func validateURLFlag(_ flag: String?) throws {
        if let flag, flag.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty {
            throw ValidationError("--database-url is empty: give the database's URL, or leave the flag out to use DATABASE_URL")
        }
    }

    /// PostgreSQL's `statement_timeout` is at most 2,147,483,647 ms: a larger `--statement-timeout` is a
    /// bad flag (64), not a database failure a wrapper would retry forever.
    public static let maxStatementTimeout = 2_147_483

    /// Throws the usage error for a `--statement-timeout` outside 1…`maxStatementTimeout` seconds.
    public static func validateStatementTimeout(_ seconds: Int) throws {
        guard (1...maxStatementTimeout).contains(seconds) else {
            throw ValidationError("--statement-timeout must be from 1 to \(maxStatementTimeout) seconds")
        }
    }
}
