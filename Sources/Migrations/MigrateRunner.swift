import Foundation
import JobKit
import Postgres
import TextCoding

/// The `migrate` command's body: find the migrations, connect, apply, and record the run like every
/// other job (its `job_runs` row is written once the table exists, that is after the first migration).
public enum MigrateRunner {
    /// `statementTimeout`: seconds, 0 for none (an index build on a big table may take longer than a job's
    /// statements ever do).
    public static func run(databaseURL: String?, migrationsDir: String?, dryRun: Bool, statementTimeout: Int = JobDatabase.defaultStatementTimeout,
                           lockTimeout: Int = Migrator.defaultLockTimeout) -> ExitStatus {
        JobEnvelope.run("migrate", dryRun: dryRun, writes: false) { run in
            guard let directory = migrationsDir.map({ URL(fileURLWithPath: $0) }) ?? Migrator.defaultDirectory() else {
                throw JobFailure(.config, "cannot find the migrations (<prefix>/share/mentor-push/migrations, or sql/migrations above this executable; never the working folder): pass --migrations-dir or set MIGRATIONS_DIR")
            }
            let migrator = try Migrator(directory: directory)
            let connection = try JobDatabase.connect(url: JobDatabase.url(flag: databaseURL), name: "migrate", statementTimeout: statementTimeout)
            var applied: [String] = []
            var alreadyApplied = 0
            run.counts = {
                var writer = JSONWriter()
                writer.add("applied", strings: applied)
                writer.add("already_applied", alreadyApplied)
                return writer
            }
            do {
                let report = try migrator.apply(to: connection, dryRun: dryRun, lockTimeout: lockTimeout, progress: { name in
                    run.logger.info("\(dryRun ? "would apply" : "applying") \(name)")
                }, retrying: { run.logger.notice("\($0)") }, done: { applied = $0.applied; alreadyApplied = $0.alreadyApplied })
                applied = report.applied
                alreadyApplied = report.alreadyApplied
            } catch {
                // What did apply stays applied; record the failed run where the table exists.
                if !dryRun { try? recordIfPossible(run, connection) }
                throw error
            }
            let verb = dryRun ? "would apply" : "applied"
            Output.line("migrate: \(verb) \(applied.count) migration(s), \(alreadyApplied) already applied; schema version \(migrator.migrations.last!.version) (from \(directory.path))")
            if !dryRun { try recordIfPossible(run, connection) }
        }
    }

    private static func recordIfPossible(_ run: JobRun, _ connection: Connection) throws {
        let exists: Bool = try connection.query("SELECT to_regclass('job_runs') IS NOT NULL").first!.decode(0)
        if exists { try run.record(on: connection) }
    }
}
