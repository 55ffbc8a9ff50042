import Postgres
import Synchronization

/// The schema version this build needs, and the check every job runs before it reads anything.
public enum Schema {
    /// The highest migration number in `sql/migrations` that this build's queries rely on.
    /// A test keeps this equal to the newest migration file.
    public static let requiredVersion = 54

    /// The command that brings a database up to date, for messages.
    public static let migrateCommand = "migrate --database-url <url>   (or: make migrate)"

    /// The database's schema version as `check` last read it, for telling a statement that meets a schema newer
    /// than this build (a column or table a later migration changed: 78, run the build that matches) from a bug (70).
    public static let seenVersion = Mutex<Int?>(nil)

    /// Whether `error` is a statement meeting a schema newer than this build: a table, column or function it
    /// names is gone or changed, and `check` saw a version above `requiredVersion`.
    public static func isNewerSchema(_ error: PostgresError) -> Bool {
        guard let state = error.sqlState, ["42P01", "42703", "42883"].contains(state) else { return false }
        return (seenVersion.withLock { $0 } ?? 0) > requiredVersion
    }

    /// Fails with exit 78 unless the database has been migrated to at least `requiredVersion`.
    public static func check(_ connection: Connection) throws {
        let version: Int
        do {
            version = try connection.query("SELECT coalesce(max(version), 0) FROM schema_migrations").first.map { try $0.decode(0) } ?? 0
        } catch let error as PostgresError where error.sqlState == SQLState.undefinedTable {
            throw JobFailure(.config, "the database has not been migrated (no schema_migrations table): run \(migrateCommand)")
        }
        seenVersion.withLock { $0 = version }
        guard version >= requiredVersion else {
            throw JobFailure(.config, "the database schema is at version \(version) but this build needs \(requiredVersion): run \(migrateCommand)")
        }
    }
}
