import ArgumentParser
import Foundation
import JobKit
import Migrations

/// Applies the SQL migrations in sql/migrations that the database has not had yet.
@main
struct MigrateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "migrate",
        abstract: "Bring the database schema up to date (sql/migrations). Running it again changes nothing.",
        discussion: "Exit codes: 0 done, 64 bad flags, 69 database unreachable, 75 a statement timed out or a lock was not granted in time (try again, or with a longer --statement-timeout or --lock-timeout), 77 a privilege is missing, 78 a migration failed or was edited after it was applied, or the database was migrated by a newer build.")

    @Option(name: .long, help: ArgumentHelp("PostgreSQL URL. Default: $DATABASE_URL, else libpq's PG* variables.", valueName: "url"))
    var databaseURL: String?

    @Option(name: .long, help: ArgumentHelp("Folder of NNNN_name.sql files. Default: $MIGRATIONS_DIR, else <prefix>/share/mentor-push/migrations or sql/migrations found from this executable (never from the working folder).", valueName: "path"))
    var migrationsDir: String?

    @Flag(name: .long, help: "List the migrations that would be applied; change nothing.")
    var dryRun = false

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Longest any one statement may run, in seconds; 0 for no limit (an index build on a big table). Default 300.", valueName: "seconds"))
    var statementTimeout = JobDatabase.defaultStatementTimeout

    @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Longest a migration keeps trying to get the locks a running job holds, in seconds (each wait lasts at most 2 s, then it rolls back and tries again after a growing pause of 1 to 8 s, so the app is held up 2 s at a time; then exit 75: try again later); 0 for one wait with no limit. Default 60.", valueName: "seconds"))
    var lockTimeout = Migrator.defaultLockTimeout

    func validate() throws {
        try JobDatabase.validateURLFlag(databaseURL)
        // An empty path is the working folder (`--migrations-dir "$DIR"` with DIR unset): SQL run with the
        // migration role's rights from wherever migrate was started.
        if let migrationsDir, migrationsDir.trimmingCharacters(in: .whitespaces).isEmpty {
            throw ValidationError("--migrations-dir is empty: give the folder of NNNN_name.sql files, or leave the flag out")
        }
        if statementTimeout != 0 { try JobDatabase.validateStatementTimeout(statementTimeout) }
        guard (0...3600).contains(lockTimeout) else { throw ValidationError("--lock-timeout must be from 0 to 3600 seconds") }
    }

    func run() throws {
        let status = MigrateRunner.run(databaseURL: databaseURL, migrationsDir: migrationsDir, dryRun: dryRun, statementTimeout: statementTimeout,
                                       lockTimeout: lockTimeout)
        if status != .ok { throw ExitCode(status.rawValue) }
    }
}
