import Postgres

/// The schema version this build needs, and the check every job runs before it reads anything.
public enum Schema {
    /// The highest migration number in `sql/migrations` that this build's queries rely on.
    /// A test keeps this equal to the newest migration file.
    public static let requiredVersion = 35

    /// The command that brings a database up to date, for messages.
    public static let migrateCommand = "migrate --database-url <url>   (or: make migrate)"

    /// Fails with exit 78 unless the database has been migrated to at least `requiredVersion`.
    public static func check(_ connection: Connection) throws {
        let version: Int
        do {
            version = try connection.query("SELECT coalesce(max(version), 0) FROM schema_migrations").first.map { try $0.decode(0) } ?? 0
        } catch let error as PostgresError where error.sqlState == SQLState.undefinedTable {
            throw JobFailure(.config, "the database has not been migrated (no schema_migrations table): run \(migrateCommand)")
        }
        guard version >= requiredVersion else {
            throw JobFailure(.config, "the database schema is at version \(version) but this build needs \(requiredVersion): run \(migrateCommand)")
        }
    }
}
