import Foundation
import Postgres
import Testing
import TestSupport

@Suite struct MigrateTests {
    /// A folder of this repository's migrations (those numbered below `before`, when given), to add to or to
    /// migrate a database only part of the way; the caller deletes it.
    func migrationsCopy(before: String? = nil) throws -> URL {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("migrations-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let source = Paths.root.appendingPathComponent("sql/migrations")
        for file in try FileManager.default.contentsOfDirectory(atPath: source.path) where before.map({ file < $0 }) ?? true {
            try FileManager.default.copyItem(at: source.appendingPathComponent(file), to: dir.appendingPathComponent(file))
        }
        return dir
    }

    /// How many migrations this repository ships (numbered 0001 to that, with no gap).
    static let shipped = (try? FileManager.default.contentsOfDirectory(atPath: Paths.root.appendingPathComponent("sql/migrations").path)
        .filter { $0.hasSuffix(".sql") }.count) ?? 0

    /// The file name of the `k`-th migration after the shipped ones: a test's own, numbered as the next would be.
    static func next(_ k: Int, _ name: String) -> String { String(format: "%04d_%@.sql", shipped + k, name) }

    /// A fresh database migrated up to, not including, the migration numbered `before`: an older deployment.
    func databaseMigrated(before: String) throws -> TestDatabase {
        let db = try TestCluster.shared().makeDatabase(migrated: false)
        let dir = try migrationsCopy(before: before)
        defer { try? FileManager.default.removeItem(at: dir) }
        let result = try Jobs.run("migrate", ["--migrations-dir", dir.path], database: db)
        #expect(result.status == 0, "stderr: \(result.stderr)")
        return db
    }

    @Test func migrateAppliesOnceAndRunningAgainChangesNothing() throws {
        let db = try TestCluster.shared().makeDatabase(migrated: false)
        let files = try FileManager.default.contentsOfDirectory(atPath: Paths.root.appendingPathComponent("sql/migrations").path)
            .filter { $0.hasSuffix(".sql") }.count
        #expect(files >= 3)
        let first = try Jobs.run("migrate", [], database: db)
        #expect(first.status == 0, "stderr: \(first.stderr)")
        #expect(first.stdout.contains("applied \(files) migration(s), 0 already applied"))
        let fixtures = try Fixtures(db)
        let before = try fixtures.fingerprint()
        let second = try Jobs.run("migrate", [], database: db)
        #expect(second.status == 0)
        #expect(second.stdout.contains("applied 0 migration(s), \(files) already applied"))
        // Only the run history grows: every run of every executable leaves its job_runs row.
        var after = try fixtures.fingerprint()
        after["job_runs"] = before["job_runs"]
        #expect(after == before)
        let runs = try fixtures.connection.query("SELECT outcome, counts->>'already_applied' FROM job_runs WHERE job = 'migrate' ORDER BY id")
        #expect(runs.count == 2)
        #expect(try runs.map { try $0.decode(0, as: String.self) } == ["ok", "ok"])
        #expect(try runs.map { try $0.decode(1, as: String.self) } == ["0", "\(files)"])
        #expect(second.summary?["job"] as? String == "migrate")
    }

    /// SQL with the migration role's rights came from wherever `migrate` was started: from a folder holding
    /// `sql/migrations/9999_….sql` (anybody can make one under /tmp), it applied that file. It looks beside
    /// its own executable only, and says which folder it used.
    @Test func migrationsInTheWorkingFolderAreNotRun() throws {
        let db = try TestCluster.shared().makeDatabase()
        let work = FileManager.default.temporaryDirectory.appendingPathComponent("work-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: work.appendingPathComponent("sql/migrations"), withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: work) }
        try "CREATE TABLE planted (x int);".write(to: work.appendingPathComponent("sql/migrations/9999_planted.sql"), atomically: true, encoding: .utf8)
        // Run by name from PATH, as an operator types it: argv[0] is then "migrate", which resolved against the
        // working folder too.
        let bin = URL(fileURLWithPath: Paths.executable("migrate")).deletingLastPathComponent().path
        let command = "cd \"$1\" && PATH=\"$2:/usr/bin:/bin\" exec migrate --database-url \"$3\""
        try FileManager.default.createDirectory(at: work.appendingPathComponent("work/sql/migrations"), withIntermediateDirectories: true)
        try "CREATE TABLE planted (x int);".write(to: work.appendingPathComponent("work/sql/migrations/9999_planted.sql"), atomically: true, encoding: .utf8)
        let result = try ProcessRunner.run("/bin/sh", ["-c", command, "sh", work.appendingPathComponent("work").path, bin, db.url])
        #expect(result.status == 0, "stderr: \(result.stderr)")
        #expect(result.stdout.contains("applied 0 migration(s)") && result.stdout.contains("(from \(Paths.root.appendingPathComponent("sql/migrations").path))"),
                "\(result.stdout)")
        let planted: Bool = try db.connect().query("SELECT to_regclass('planted') IS NOT NULL").first!.decode(0)
        #expect(!planted)
    }

    /// `--migrations-dir ""` (`"$DIR"` with DIR unset) meant the working folder: from one holding a planted
    /// `9999_planted.sql`, it would have applied it. Refused as a bad flag; a blank MIGRATIONS_DIR is unset.
    @Test func anEmptyMigrationsDirIsRefusedNotTheWorkingFolder() throws {
        let db = try TestCluster.shared().makeDatabase()
        let work = FileManager.default.temporaryDirectory.appendingPathComponent("work-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: work) }
        try "CREATE TABLE planted (x int);".write(to: work.appendingPathComponent("9999_planted.sql"), atomically: true, encoding: .utf8)
        let command = "cd \"$1\" && exec \"$2\" --database-url \"$3\" --migrations-dir \"$4\""
        for flag in ["", " "] {
            let result = try ProcessRunner.run("/bin/sh", ["-c", command, "sh", work.path, Paths.executable("migrate"), db.url, flag])
            #expect(result.status == 64, "\(result.stdout) \(result.stderr)")
            #expect(result.stderr.contains("--migrations-dir is empty"), "\(result.stderr)")
        }
        let blank = try ProcessRunner.run("/bin/sh", ["-c", "cd \"$1\" && MIGRATIONS_DIR=' ' exec \"$2\" --database-url \"$3\"", "sh",
                                                      work.path, Paths.executable("migrate"), db.url])
        #expect(blank.status == 0, "\(blank.stderr)")
        let planted: Bool = try db.connect().query("SELECT to_regclass('planted') IS NOT NULL").first!.decode(0)
        #expect(!planted)
    }

    /// A dry run only reads: it waited behind a real migrate's lock (an index build, for as long) and held
    /// off one started while it looked. It takes no lock.
    @Test func aDryRunDoesNotWaitForARunningMigrate() throws {
        let db = try TestCluster.shared().makeDatabase()
        let holder = try db.connect()
        try holder.execute("SELECT pg_advisory_lock(hashtext('mentor-push:migrate'))")
        let result = try ProcessRunner.run(Paths.executable("migrate"), ["--dry-run", "--database-url", db.url], timeout: 30)
        #expect(result.status == 0, "stderr: \(result.stderr)")
        #expect(result.stdout.contains("would apply 0 migration(s)"), "\(result.stdout)")
    }

    @Test func aMigrationEditedAfterItWasAppliedIsRefused() throws {
        let db = try TestCluster.shared().makeDatabase()
        let connection = try db.connect()
        try connection.execute("UPDATE schema_migrations SET checksum = 'fnv1a64:0000000000000000' WHERE version = 1")
        let result = try Jobs.run("migrate", [], database: db)
        #expect(result.status == 78)
        #expect(result.stderr.contains("was changed after it was applied"))
    }

    /// A migration that outruns the statement timeout is rolled back and exits 75 (try again, or with a
    /// longer --statement-timeout), not 78 as if its SQL were wrong; with the limit lifted it goes through.
    @Test func aMigrationThatTimesOutExits75AndGoesThroughWithoutTheLimit() throws {
        let db = try TestCluster.shared().makeDatabase()
        let dir = try migrationsCopy()
        defer { try? FileManager.default.removeItem(at: dir) }
        try "CREATE TABLE slow_build (id int); SELECT pg_sleep(2);".write(to: dir.appendingPathComponent(Self.next(1, "slow")), atomically: true, encoding: .utf8)
        let result = try Jobs.run("migrate", ["--migrations-dir", dir.path, "--statement-timeout", "1"], database: db)
        #expect(result.status == 75, "stderr: \(result.stderr)")
        #expect(result.stderr.contains("\(Self.next(1, "slow")) failed and was rolled back") && result.stderr.contains("statement timeout"), "\(result.stderr)")
        let again = try Jobs.run("migrate", ["--migrations-dir", dir.path, "--statement-timeout", "0"], database: db)
        #expect(again.status == 0, "stderr: \(again.stderr)")
        #expect(try Jobs.run("migrate", ["--statement-timeout", "-1"], database: db).status == 64)
    }

    /// A database, a copy of the migrations with one more altering `users`, and a job's read of `users` holding
    /// ACCESS SHARE until `holder` ends its transaction (the caller removes `dir`).
    func migrationBehindAJobsRead() throws -> (db: TestDatabase, dir: URL, holder: Connection) {
        let db = try TestCluster.shared().makeDatabase()
        let dir = try migrationsCopy()
        try "ALTER TABLE users ADD COLUMN nickname text;".write(to: dir.appendingPathComponent(Self.next(1, "nickname")), atomically: true, encoding: .utf8)
        let holder = try db.connect()
        try holder.execute("BEGIN")
        try holder.execute("SELECT count(*) FROM users")
        return (db, dir, holder)
    }

    /// A migration queued behind a job's long transaction would hold up every other query on its table (the
    /// app's too) for as long as it waits: it gives up after --lock-timeout and exits 75, changing nothing.
    @Test func aMigrationThatCannotGetItsLockInTimeExits75() throws {
        let (db, dir, holder) = try migrationBehindAJobsRead()
        defer { try? FileManager.default.removeItem(at: dir) }
        let started = Date()
        let result = try Jobs.run("migrate", ["--migrations-dir", dir.path, "--lock-timeout", "1"], database: db)
        #expect(result.status == 75, "\(result.stderr)")
        #expect(result.stderr.contains("lock timeout"), "\(result.stderr)")
        #expect(Date().timeIntervalSince(started) < 20)
        try holder.execute("ROLLBACK")
        let version: Int = try db.connect().query("SELECT max(version) FROM schema_migrations").first!.decode(0)
        #expect(version <= Self.shipped, "rolled back")
        #expect(try Jobs.run("migrate", ["--migrations-dir", dir.path], database: db).status == 0, "goes through once the lock is free")
    }

    /// While a migration waits for a lock, the locks it took before and its own queued request hold up the app
    /// (even the reads of that table) for as long: one wait of 10 s stalled the app's writes 10 s, and a
    /// migration of five tables up to 50 s. Each wait now lasts at most 2 s; then the try is rolled back, the
    /// app goes on, and migrate tries again until it gets through (or --lock-timeout has passed).
    @Test func aMigrationWaitingForALockHoldsTheAppUpTwoSecondsAtMostAndTriesAgain() throws {
        let (db, dir, holder) = try migrationBehindAJobsRead()
        defer { try? FileManager.default.removeItem(at: dir) }
        let migrate = try ProcessRunner.start(Paths.executable("migrate"), ["--database-url", db.url, "--migrations-dir", dir.path, "--lock-timeout", "30"])
        defer { kill(migrate.pid, SIGKILL) }
        let watcher = try db.connect()
        let deadline = Date().addingTimeInterval(20)
        while try watcher.query("""
            SELECT count(*)::int FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'
            """).first!.decode(0, as: Int.self) == 0 && Date() < deadline { usleep(20_000) }
        let app = BlockedStatement("UPDATE users SET display_name = display_name", on: db)
        #expect(app.finish(within: 4) == nil, "the app's write waited behind the migration's lock request")
        usleep(3_000_000) // the job's read goes on for a while
        try holder.execute("ROLLBACK")
        let result = try migrate.wait(timeout: 30)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stderr.contains("trying again (try 2)"), "\(result.stderr)")
        let version: Int = try db.connect().query("SELECT max(version) FROM schema_migrations").first!.decode(0)
        #expect(version == Self.shipped + 1)
    }

    /// A migrations folder that lost a file (a copy, a package) was applied without it and the schema recorded
    /// as current: every job then ran, and failed (70) on what the lost migration makes. Refused before anything
    /// is applied.
    @Test func aFolderLackingAMigrationIsRefusedBeforeAnythingRuns() throws {
        let db = try TestCluster.shared().makeDatabase(migrated: false)
        let dir = try migrationsCopy()
        defer { try? FileManager.default.removeItem(at: dir) }
        let lost = try #require(try FileManager.default.contentsOfDirectory(atPath: dir.path).first { $0.hasPrefix("0030_") })
        try FileManager.default.removeItem(at: dir.appendingPathComponent(lost))
        let result = try Jobs.run("migrate", ["--migrations-dir", dir.path], database: db)
        #expect(result.status == 78, "\(result.stderr)")
        #expect(result.stderr.contains("lacks migration 0030: its files are numbered from 0001 with no gap"), "\(result.stderr)")
        let made: Bool = try db.connect().query("SELECT to_regclass('schema_migrations') IS NOT NULL").first!.decode(0)
        #expect(!made, "nothing applied")
    }

    /// A database such a folder migrated (before it was refused) has its newest version, one below it missing:
    /// the jobs checked the newest only. They now exit 78 naming the missing one, and migrate applies it.
    @Test func aDatabaseLackingAMigrationBelowItsNewestIsRefusedByTheJobsAndMendedByMigrate() throws {
        let db = try TestCluster.shared().makeDatabase()
        try db.connect().execute("DELETE FROM schema_migrations WHERE version = 53") // 0053 can be applied again
        let job = try Jobs.run("inactivity-check", ["--dry-run"], database: db)
        #expect(job.status == 78, "\(job.stderr)")
        #expect(job.stderr.contains("the database schema lacks migration 0053, though later ones were applied"), "\(job.stderr)")
        let mend = try Jobs.run("migrate", [], database: db)
        #expect(mend.status == 0, "\(mend.stderr)")
        #expect(mend.stdout.contains("applied 1 migration(s)"), "\(mend.stdout)")
        let after = try Jobs.run("inactivity-check", ["--dry-run"], database: db)
        #expect(after.status == 0, "\(after.stderr)")
    }

    /// Another application's `schema_migrations` in the same schema (Rails: a text `version`; golang-migrate: a
    /// bigint one and `dirty`): migrate and the jobs failed with 70 on its columns, or said its date-like version
    /// was newer than this build. They now say the table is not ours and how to give mentor-push its own schema,
    /// and leave the table alone.
    @Test(arguments: ["CREATE TABLE schema_migrations (version varchar PRIMARY KEY); INSERT INTO schema_migrations VALUES ('20240101000000')",
                      "CREATE TABLE schema_migrations (version bigint PRIMARY KEY, dirty boolean NOT NULL); INSERT INTO schema_migrations VALUES (20240101000000, false)"])
    func anotherApplicationsSchemaMigrationsIsNamedAndLeftAlone(table: String) throws {
        let db = try TestCluster.shared().makeDatabase(migrated: false)
        let connection = try db.connect()
        try connection.runScript(table)
        for job in ["migrate", "inactivity-check"] {
            for flags in [[], ["--dry-run"]] {
                let result = try Jobs.run(job, flags, database: db)
                #expect(result.status == 78, "\(job) \(flags): \(result.stderr)")
                #expect(result.stderr.contains("the table schema_migrations in this database is not mentor-push's"), "\(job) \(flags): \(result.stderr)")
                #expect(result.stderr.contains("options=-csearch_path%3Dmentor_push"), "\(result.stderr)")
            }
        }
        let rows: Int = try connection.query("SELECT count(*) FROM schema_migrations").first!.decode(0)
        let users: Bool = try connection.query("SELECT to_regclass('users') IS NOT NULL").first!.decode(0)
        #expect(rows == 1 && !users, "its table as it was, none of ours made")
    }

    /// An older build's migrate must not report success on a database a newer build migrated.
    @Test func aDatabaseMigratedByANewerBuildIsRefused() throws {
        let db = try TestCluster.shared().makeDatabase()
        try db.connect().execute("INSERT INTO schema_migrations (version, name, checksum) VALUES (9999, '9999_from_the_future.sql', 'x')")
        let result = try Jobs.run("migrate", [], database: db)
        #expect(result.status == 78, "\(result.stderr)")
        #expect(result.stderr.contains("schema version 9999 (9999_from_the_future.sql), newer than this build's"), "\(result.stderr)")
    }

    @Test func aFailingMigrationIsRolledBackAndExits78() throws {
        let db = try TestCluster.shared().makeDatabase()
        let dir = try migrationsCopy()
        defer { try? FileManager.default.removeItem(at: dir) }
        try "CREATE TABLE done_first (id int);".write(to: dir.appendingPathComponent(Self.next(1, "good")), atomically: true, encoding: .utf8)
        try "CREATE TABLE half_done (id int); SELECT * FROM no_such_table;".write(to: dir.appendingPathComponent(Self.next(2, "broken")), atomically: true, encoding: .utf8)
        let result = try Jobs.run("migrate", ["--migrations-dir", dir.path], database: db)
        #expect(result.status == 78)
        #expect(result.stderr.contains("migration \(Self.next(2, "broken")) failed and was rolled back"))
        #expect(result.stderr.contains("42P01"))
        let exists: Bool = try db.connect().query("SELECT to_regclass('half_done') IS NOT NULL").first!.decode(0)
        #expect(!exists)
        // The summary says what did change: the good one before it was applied (it said "applied": [] and
        // "already_applied": 0, as if nothing had), and all the others were there already.
        let shipped = try FileManager.default.contentsOfDirectory(atPath: Paths.root.appendingPathComponent("sql/migrations").path)
            .filter { $0.hasSuffix(".sql") }.count
        #expect(result.summary?["applied"] as? [String] == [Self.next(1, "good")], "\(result.stdout)")
        #expect(result.summary?["already_applied"] as? Int == shipped, "\(result.stdout)")
    }

    /// A migration with its own COMMIT: migrate said "failed and was rolled back", but the part before the COMMIT
    /// stayed (and the next migrate failed on it). Such a file is refused before anything is applied.
    @Test func aMigrationThatWouldEndItsOwnTransactionIsRefusedBeforeAnythingRuns() throws {
        let db = try TestCluster.shared().makeDatabase()
        let dir = try migrationsCopy()
        defer { try? FileManager.default.removeItem(at: dir) }
        try "CREATE TABLE done_first (id int);".write(to: dir.appendingPathComponent(Self.next(1, "good")), atomically: true, encoding: .utf8)
        try "CREATE TABLE zz_test (id int);\nCOMMIT;\nSELECT * FROM no_such_table;".write(to: dir.appendingPathComponent(Self.next(2, "commits")), atomically: true, encoding: .utf8)
        let result = try Jobs.run("migrate", ["--migrations-dir", dir.path], database: db)
        #expect(result.status == 78, "\(result.stderr)")
        #expect(result.stderr.contains("migration \(Self.next(2, "commits")): its own COMMIT would end the transaction migrate runs it in"), "\(result.stderr)")
        let made: Int = try db.connect().query("SELECT count(*) FROM pg_class WHERE relname IN ('zz_test', 'done_first')").first!.decode(0)
        #expect(made == 0, "nothing applied")
    }

    @Test func theUpgradeToTheQueueTableMovesEveryOpenDeliveryAndNothingElse() throws {
        // A database at 0014, with deliveries in every state.
        let db = try databaseMigrated(before: "0015")
        let f = try Fixtures(db)
        let kari = try f.mentor(try f.organization("Org"), "Kari", lastActivityDaysAgo: 20, devices: 0)
        let iphone = try f.device(kari, provider: "apns"), android = try f.device(kari, provider: "fcm")
        try f.connection.execute("""
            WITH n AS (
                INSERT INTO notifications (user_id, category, title, body, dedupe_key)
                SELECT \(kari)::uuid, 'inactivity', 't', 'b', 'k' || g FROM generate_series(1, 4) g RETURNING id, dedupe_key
            )
            INSERT INTO deliveries (notification_id, device_token_id, state, attempts, next_attempt_at)
            SELECT n.id, CASE WHEN n.dedupe_key = 'k2' THEN \(android.id)::bigint ELSE \(iphone.id)::bigint END,
                   CASE n.dedupe_key WHEN 'k1' THEN 'pending' WHEN 'k2' THEN 'retrying' WHEN 'k3' THEN 'sent' ELSE 'cancelled' END,
                   CASE WHEN n.dedupe_key = 'k1' THEN 0 ELSE 1 END, '2030-01-02T03:04:05Z'
              FROM n
            """)

        let upgrade = try Jobs.run("migrate", [], database: db)
        #expect(upgrade.status == 0, "stderr: \(upgrade.stderr)")
        let queued: [String] = try f.connection.query("""
            SELECT d.state || ' ' || q.provider || ' ' || to_char(q.next_attempt_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS') || ' ' || (q.lease_until IS NULL)
              FROM delivery_queue q JOIN deliveries d ON d.id = q.delivery_id ORDER BY d.state
            """).map { try $0.decode(0) }
        #expect(queued == ["pending apns 2030-01-02T03:04:05 true", "retrying fcm 2030-01-02T03:04:05 true"])
        #expect(try f.count("deliveries") == 4, "every delivery is kept")
    }

    /// Deliveries queued for a Web Push or Expo token (never sent: no job sends to them) are settled as failed
    /// by the upgrade, with the reason and an event; the APNs one stays queued.
    /// A whole-day quiet window stored before 0029 is set to no window, what every job read it as: kept
    /// under a NOT VALID check, its row refused every later update (a user switching pushes off got 23514).
    @Test func theUpgradeClearsAWholeDayQuietWindowAndItsRowCanChange() throws {
        let db = try databaseMigrated(before: "0029")
        let f = try Fixtures(db)
        let org = try f.organization("Org")
        let kari = try f.mentor(org, "Kari", lastActivityDaysAgo: 20)
        try f.connection.execute("INSERT INTO push_notification_configs (user_id, quiet_hours_start, quiet_hours_end) VALUES (\(kari), '00:00', '24:00')")
        try f.connection.execute("INSERT INTO organization_delivery_policies (organization_id, quiet_hours_start, quiet_hours_end) VALUES (\(org), '22:00', '07:00')")
        let upgrade = try Jobs.run("migrate", [], database: db)
        #expect(upgrade.status == 0, "stderr: \(upgrade.stderr)")
        let windows: [String] = try f.connection.query("""
            SELECT coalesce(quiet_hours_start::text, 'none') FROM push_notification_configs
            UNION ALL SELECT coalesce(quiet_hours_start::text, 'none') FROM organization_delivery_policies
            """).map { try $0.decode(0) }
        #expect(windows == ["none", "22:00:00"])
        try f.connection.execute("UPDATE push_notification_configs SET enabled = false WHERE user_id = \(kari)")
    }

    /// 0036 takes out the zone names the jobs read otherwise than PostgreSQL: rows naming one keep their zone
    /// under its own name (posix/Europe/Oslo is Europe/Oslo; CET is Europe/Brussels), a user's `localtime` (the
    /// server's, not hers) becomes the organization's, and the names are refused from then on.
    @Test func theUpgradeGivesZonesTheirOwnNames() throws {
        let db = try databaseMigrated(before: "0036")
        let f = try Fixtures(db)
        let org = try f.organization("Org")
        try f.connection.execute("UPDATE organizations SET time_zone = 'posix/Europe/Oslo'")
        let kari = try f.mentor(org, "Kari", lastActivityDaysAgo: 20)
        let per = try f.mentor(org, "Per", lastActivityDaysAgo: 20)
        let liv = try f.mentor(org, "Liv", lastActivityDaysAgo: 20)
        try f.connection.execute("UPDATE users SET time_zone = 'CET' WHERE id = \(kari)")
        try f.connection.execute("UPDATE users SET time_zone = 'localtime' WHERE id = \(per)")
        try f.connection.execute("UPDATE users SET time_zone = 'posix/EET' WHERE id = \(liv)")
        let upgrade = try Jobs.run("migrate", [], database: db)
        #expect(upgrade.status == 0, "stderr: \(upgrade.stderr)")
        let zones: [String] = try f.connection.query("""
            SELECT coalesce(time_zone, 'none') FROM organizations
            UNION ALL (SELECT coalesce(time_zone, 'none') FROM users WHERE id = ANY(\(PostgresArray([kari, per, liv]))::uuid[])
                       ORDER BY display_name)
            """).map { try $0.decode(0) }
        #expect(zones == ["Europe/Oslo", "Europe/Brussels", "Europe/Athens", "none"], "org, Kari, Liv, Per: \(zones)")
        #expect(throws: PostgresError.self) { try f.connection.execute("UPDATE users SET time_zone = 'CET' WHERE id = \(kari)") }
        #expect(throws: PostgresError.self) { try f.connection.execute("UPDATE users SET time_zone = 'posix/Europe/Oslo' WHERE id = \(kari)") }
    }

    @Test func theUpgradeSettlesDeliveriesNoJobCouldSend() throws {
        let db = try databaseMigrated(before: "0018")
        let f = try Fixtures(db)
        let kari = try f.mentor(try f.organization("Org"), "Kari", lastActivityDaysAgo: 20, devices: 0)
        let iphone = try f.device(kari, provider: "apns")
        let browser: Int = try f.connection.query("""
            INSERT INTO device_tokens (user_id, provider, token, app_id) VALUES (\(kari), 'webpush', 'https://push.example/abc', 'web') RETURNING id
            """).first!.decode(0)
        try f.connection.execute("""
            WITH n AS (
                INSERT INTO notifications (user_id, category, title, body, dedupe_key) VALUES (\(kari), 'inactivity', 't', 'b', 'k') RETURNING id
            ), d AS (
                INSERT INTO deliveries (notification_id, device_token_id)
                SELECT n.id, t FROM n, unnest(ARRAY[\(iphone.id)::bigint, \(browser)::bigint]) t RETURNING id, device_token_id
            )
            INSERT INTO delivery_queue (delivery_id, provider) SELECT id, CASE WHEN device_token_id = \(browser) THEN 'webpush' ELSE 'apns' END FROM d
            """)
        let upgrade = try Jobs.run("migrate", [], database: db)
        #expect(upgrade.status == 0, "stderr: \(upgrade.stderr)")
        let states: [String] = try f.connection.query("""
            SELECT t.provider || ' ' || d.state || ' ' || (q.delivery_id IS NOT NULL) FROM deliveries d
              JOIN device_tokens t ON t.id = d.device_token_id LEFT JOIN delivery_queue q ON q.delivery_id = d.id ORDER BY 1
            """).map { try $0.decode(0) }
        #expect(states == ["apns pending true", "webpush failed false"])
        let events: [String] = try f.connection.query("SELECT event || ': ' || detail FROM delivery_events").map { try $0.decode(0) }
        #expect(events == ["failed: no sender for this device's provider (only APNs and FCM are pushed to)"])
    }

    @Test func unreachableDatabaseExits69() throws {
        let result = try Jobs.run("migrate", ["--database-url", "postgresql:///x?host=/nonexistent-socket-dir"], database: nil)
        #expect(result.status == 69)
    }
}
