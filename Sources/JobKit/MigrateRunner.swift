import Foundation
import Postgres

/// The `migrate` command's body: find the migrations, connect, apply, report with an exit status.
public enum MigrateRunner {
    public static func run(databaseURL: String?, migrationsDir: String?, dryRun: Bool) -> ExitStatus {
        let logger = JobLogging.logger(job: "migrate", level: .info)
        do {
            guard let directory = migrationsDir.map({ URL(fileURLWithPath: $0) }) ?? Migrator.defaultDirectory() else {
                throw JobFailure(.config, "cannot find sql/migrations: pass --migrations-dir or set MIGRATIONS_DIR")
            }
            let migrator = try Migrator(directory: directory)
            let connection = try JobDatabase.connect(url: JobDatabase.url(flag: databaseURL), name: "migrate")
            let report = try migrator.apply(to: connection, dryRun: dryRun) { name in
                logger.info("\(dryRun ? "would apply" : "applying") \(name)")
            }
            let verb = dryRun ? "would apply" : "applied"
            Output.line("migrate: \(verb) \(report.applied.count) migration(s), \(report.alreadyApplied) already applied; schema version \(migrator.migrations.last!.version)")
            return .ok
        } catch let failure as JobFailure {
            logger.error("\(failure.message)")
            return failure.status
        } catch {
            let failure = JobRunner.classify(error)
            logger.error("\(failure.message)")
            return failure.status
        }
    }
}
