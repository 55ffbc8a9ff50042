import Foundation
import JobKit
import Postgres

/// Applies the numbered SQL files in `sql/migrations` (`0001_name.sql`, …) in order, each in its own
/// transaction together with its row in `schema_migrations`. Running it again applies nothing; a file
/// changed after it was applied is refused. An advisory lock keeps two `migrate` runs from racing.
public struct Migrator {
    /// One migration file.
    public struct Migration: Sendable {
        public var version: Int
        public var name: String
        public var sql: String
        public var checksum: String
    }

    public let migrations: [Migration]

    /// Reads the migrations in `directory`. Fails with exit 78 on a missing folder or a badly named file.
    public init(directory: URL) throws {
        let files: [String]
        do {
            files = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        } catch {
            throw JobFailure(.config, "migrations folder \(directory.path): cannot be read (\(error.localizedDescription))")
        }
        var found: [Migration] = []
        for file in files.sorted() where file.hasSuffix(".sql") {
            let digits = file.prefix { $0.isNumber }
            guard !digits.isEmpty, let version = Int(digits), file.dropFirst(digits.count).first == "_" else {
                throw JobFailure(.config, "migration \(file): name must be NNNN_description.sql")
            }
            guard let sql = try? String(contentsOf: directory.appendingPathComponent(file), encoding: .utf8) else {
                throw JobFailure(.config, "migration \(file): cannot be read as UTF-8")
            }
            if let clash = found.first(where: { $0.version == version }) {
                throw JobFailure(.config, "migrations \(clash.name) and \(file) share version \(version)")
            }
            if let statement = TransactionControl.first(in: sql) {
                throw JobFailure(.config, "migration \(file): its own \(statement) would end the transaction migrate runs it in (what came before it would stay if a later statement failed, and the migration would not be recorded): remove it; each migration is applied as one transaction")
            }
            found.append(Migration(version: version, name: file, sql: sql, checksum: Migrator.checksum(sql)))
        }
        guard !found.isEmpty else { throw JobFailure(.config, "migrations folder \(directory.path): no NNNN_*.sql files") }
        found.sort { $0.version < $1.version }
        // A copy that lost a file would apply the others and record the schema as current without it.
        let missing = Set(1...found.last!.version).subtracting(found.map(\.version)).sorted()
        guard missing.isEmpty else {
            throw JobFailure(.config, "migrations folder \(directory.path) lacks \(Schema.describe(missing: missing)): its files are numbered from 0001 with no gap; use the complete folder this build came with")
        }
        migrations = found
    }

    /// Finds `sql/migrations`: `$MIGRATIONS_DIR`, else `../share/mentor-push/migrations` beside an installed
    /// binary, else upward from the executable (which finds the checkout from `.build/…/debug/migrate`). Never
    /// from the working folder: SQL run with the migration role's rights came from wherever `migrate` was
    /// started (`cd /tmp/x && migrate` applied a `/tmp/sql/migrations/9999_….sql` anybody could put there).
    /// The executable is found from /proc/self/exe: `CommandLine.arguments[0]` is only "migrate" when it is run
    /// by name from PATH, which resolved against the working folder all the same.
    public static func defaultDirectory(executable: String = Migrator.executablePath()) -> URL? {
        if let env = ProcessInfo.processInfo.environment["MIGRATIONS_DIR"], !env.trimmingCharacters(in: .whitespaces).isEmpty {
            return URL(fileURLWithPath: env)
        }
        guard executable.hasPrefix("/") else { return nil }
        let fm = FileManager.default
        let exe = URL(fileURLWithPath: executable).resolvingSymlinksInPath().deletingLastPathComponent()
        let shared = exe.deletingLastPathComponent().appendingPathComponent("share/mentor-push/migrations")
        if fm.fileExists(atPath: shared.path) { return shared }
        var dir = exe
        for _ in 0..<6 {
            let candidate = dir.appendingPathComponent("sql/migrations")
            if fm.fileExists(atPath: candidate.path) { return candidate }
            dir = dir.deletingLastPathComponent()
        }
        return nil
    }

    /// This process's executable, absolute (/proc/self/exe), else its `argv[0]`.
    public static func executablePath() -> String {
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    }

    /// Seconds a migration waits for a lock by default.
    public static let defaultLockTimeout = 60
    /// The longest one lock wait of a migration lasts. While it waits, the locks it took before hold up the app,
    /// and its own request, queued, holds up even the reads of its table: a try gives up soon, is rolled back,
    /// and is made again after a pause in which the app goes on, until `lockTimeout` has passed.
    public static let lockWait = 2

    /// What `apply` did.
    public struct Report: Sendable {
        public var applied: [String] = []
        public var alreadyApplied: Int = 0
    }

    /// Brings the database up to date. With `dryRun`, only reports what it would apply. A migration waits at
    /// most `lockWait` seconds for any one lock, and tries again for up to `lockTimeout` seconds (0: one wait
    /// with no limit): an `ALTER TABLE` queued behind a job's long transaction would hold up every other query
    /// on the table for as long, the app's among them. Then it fails (75, try again later). A database
    /// migrated by a newer build is refused (78).
    /// `done` hears the report so far, once the applied ones are counted and after each migration commits: a run
    /// that fails part of the way has still applied those before.
    public func apply(to connection: Connection, dryRun: Bool = false, lockTimeout: Int = Migrator.defaultLockTimeout,
                      progress: (String) -> Void = { _ in }, retrying: (String) -> Void = { _ in },
                      done: (Report) -> Void = { _ in }) throws -> Report {
        // One migrate at a time. A dry run only reads, and takes no lock: it waited behind a real migrate (an
        // index build, for as long), and held off one started while it looked.
        if !dryRun {
            try connection.execute("SELECT pg_advisory_lock(hashtext('mentor-push:migrate'))")
        }
        defer { if !dryRun { _ = try? connection.execute("SELECT pg_advisory_unlock(hashtext('mentor-push:migrate'))") } }
        if !dryRun {
            try connection.execute("""
                CREATE TABLE IF NOT EXISTS schema_migrations (
                    version     integer PRIMARY KEY,
                    name        text NOT NULL,
                    checksum    text NOT NULL,
                    applied_at  timestamptz NOT NULL DEFAULT now()
                )
                """)
        }
        var applied: [Int: (name: String, checksum: String)] = [:]
        let exists = try connection.query("SELECT to_regclass('schema_migrations') IS NOT NULL").first.map { try $0.decode(0, as: Bool.self) } ?? false
        if exists {
            _ = try Schema.read(connection, upTo: 0) // 78 when the table is another application's
            for row in try connection.query("SELECT version, name, checksum FROM schema_migrations") {
                applied[try row.decode(0)] = (try row.decode(1), try row.decode(2))
            }
        }
        var report = Report()
        report.alreadyApplied = migrations.filter { applied[$0.version] != nil }.count
        done(report)
        if let newest = applied.keys.max(), let known = migrations.last?.version, newest > known {
            throw JobFailure(.config, "the database is at schema version \(newest) (\(applied[newest]!.name)), newer than this build's \(known): a newer build migrated it; run that build's migrate and jobs, not this one")
        }
        for migration in migrations {
            if let earlier = applied[migration.version] {
                guard earlier.checksum == migration.checksum else {
                    throw JobFailure(.config, "migration \(migration.name) was changed after it was applied (as \(earlier.name)): add a new migration instead of editing an applied one")
                }
                continue
            }
            progress(migration.name)
            let giveUpAt = ContinuousClock.now + .seconds(lockTimeout)
            var tries = 1
            while !dryRun {
                do {
                    try connection.transaction {
                        let wait = lockTimeout == 0 ? 0 : min(lockTimeout, Migrator.lockWait)
                        try connection.execute("SELECT set_config('lock_timeout', \(String(wait * 1000)), true)")
                        try connection.runScript(migration.sql)
                        try connection.execute("INSERT INTO schema_migrations (version, name, checksum) VALUES (\(migration.version), \(migration.name), \(migration.checksum))")
                    }
                    break
                } catch let error as PostgresError where error.sqlState == SQLState.lockNotAvailable && lockTimeout > 0
                    && ContinuousClock.now + .seconds(Migrator.lockWait) < giveUpAt {
                    tries += 1
                    retrying("\(migration.name): a lock it needs is held by another session (a job's transaction): rolled back, trying again (try \(tries))")
                    // A growing pause (1, 2, 4, then 8 s, with jitter): the app is held up 2 s a try, and ever less often.
                    Thread.sleep(forTimeInterval: min(8, pow(2, Double(tries - 2))) * Double.random(in: 0.5...1.5))
                } catch let error as PostgresError {
                    // The migration's own SQL failing is a schema problem to fix (78); a statement timeout, a lock
                    // not granted, a lost connection or a missing privilege keep their own codes (75, 69, 77).
                    let classified = JobFailure(classifying: error)
                    let status: ExitStatus = classified.status == .software ? .config : classified.status
                    let tried = tries > 1 ? " (\(tries) tries in \(lockTimeout) s)" : ""
                    throw JobFailure(status, "migration \(migration.name) failed and was rolled back\(tried): \(classified.message)")
                }
            }
            report.applied.append(migration.name)
            done(report)
        }
        return report
    }

    /// FNV-1a, 64 bit: enough to notice an edited file; not a security boundary.
    static func checksum(_ text: String) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in text.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        let hex = String(hash, radix: 16)
        return "fnv1a64:" + String(repeating: "0", count: 16 - hex.count) + hex
    }
}
