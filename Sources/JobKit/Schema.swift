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

    /// Fails with exit 78 unless the database has been migrated to at least `requiredVersion`, every migration up
    /// to it applied (a migrate run from a folder that lacked one recorded the versions after it all the same).
    public static func check(_ connection: Connection) throws {
        let recorded: Recorded
        do {
            recorded = try read(connection, upTo: requiredVersion)
        } catch let error as PostgresError where error.sqlState == SQLState.undefinedTable {
            throw JobFailure(.config, "the database has not been migrated (no schema_migrations table): run \(migrateCommand)")
        }
        let version = recorded.newest
        seenVersion.withLock { $0 = version }
        guard version >= requiredVersion else {
            throw JobFailure(.config, "the database schema is at version \(version) but this build needs \(requiredVersion): run \(migrateCommand)")
        }
        guard recorded.missing.isEmpty else {
            throw JobFailure(.config, "the database schema lacks \(describe(missing: recorded.missing)), though later ones were applied (a migrate run from an incomplete migrations folder): run \(migrateCommand) with this build's folder")
        }
    }

    /// What `schema_migrations` records: its newest version and the versions from 1 to `version` it lacks.
    public struct Recorded: Sendable {
        public var newest: Int
        public var missing: [Int]
    }

    /// Reads `schema_migrations`. Fails with 78 when the table is another application's (a Rails or Django app's
    /// `schema_migrations` in the same schema: other columns, or versions that are dates), not with whatever
    /// error its columns would give a query of ours; an undefined table is thrown as PostgreSQL's error.
    public static func read(_ connection: Connection, upTo version: Int) throws -> Recorded {
        do {
            guard let row = try connection.query("""
                SELECT coalesce(max(version), 0)::int4,
                       coalesce(bool_and(checksum IS NOT NULL AND name IS NOT NULL AND version > 0), true),
                       (SELECT coalesce(string_agg(v::text, ',' ORDER BY v), '') FROM generate_series(1, \(version)) v
                         WHERE NOT EXISTS (SELECT FROM schema_migrations m WHERE m.version = v))
                  FROM schema_migrations
                """).first else { return Recorded(newest: 0, missing: []) }
            guard try row.decode(1, as: Bool.self) else { throw notOurs() }
            let missing = try row.decode(2, as: String.self).split(separator: ",").compactMap { Int($0) }
            return Recorded(newest: try row.decode(0), missing: missing)
        } catch let error as PostgresError where error.sqlState.map(notOursStates.contains) == true {
            throw notOurs()
        }
    }

    /// Undefined column or operator, a datatype mismatch, a value out of int4's range, text that is no number:
    /// what our query meets in another application's `schema_migrations`.
    private static let notOursStates: Set<String> = ["42703", "42883", "42804", "22003", "22P02", "42846"]

    private static func notOurs() -> JobFailure {
        JobFailure(.config, "the table schema_migrations in this database is not mentor-push's (another application's migrations?): give mentor-push a schema of its own (CREATE SCHEMA mentor_push, then options=-csearch_path%3Dmentor_push in the database URL's query)")
    }

    /// "migration 0030" or "migrations 0030, 0031".
    public static func describe(missing: [Int]) -> String {
        let names = missing.prefix(10).map { String(format: "%04d", $0) }.joined(separator: ", ")
        return (missing.count == 1 ? "migration " : "migrations ") + names + (missing.count > 10 ? " and \(missing.count - 10) more" : "")
    }
}
