import Foundation
import Testing
import TestSupport

@Suite struct MigrateTests {
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

    @Test func aMigrationEditedAfterItWasAppliedIsRefused() throws {
        let db = try TestCluster.shared().makeDatabase()
        let connection = try db.connect()
        try connection.execute("UPDATE schema_migrations SET checksum = 'fnv1a64:0000000000000000' WHERE version = 1")
        let result = try Jobs.run("migrate", [], database: db)
        #expect(result.status == 78)
        #expect(result.stderr.contains("was changed after it was applied"))
    }

    @Test func aFailingMigrationIsRolledBackAndExits78() throws {
        let db = try TestCluster.shared().makeDatabase()
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("migrations-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let source = Paths.root.appendingPathComponent("sql/migrations")
        for file in try FileManager.default.contentsOfDirectory(atPath: source.path) {
            try FileManager.default.copyItem(at: source.appendingPathComponent(file), to: dir.appendingPathComponent(file))
        }
        try "CREATE TABLE half_done (id int); SELECT * FROM no_such_table;".write(to: dir.appendingPathComponent("0999_broken.sql"), atomically: true, encoding: .utf8)
        let result = try Jobs.run("migrate", ["--migrations-dir", dir.path], database: db)
        #expect(result.status == 78)
        #expect(result.stderr.contains("migration 0999_broken.sql failed and was rolled back"))
        #expect(result.stderr.contains("42P01"))
        let exists: Bool = try db.connect().query("SELECT to_regclass('half_done') IS NOT NULL").first!.decode(0)
        #expect(!exists)
    }

    @Test func unreachableDatabaseExits69() throws {
        let result = try Jobs.run("migrate", ["--database-url", "postgresql:///x?host=/nonexistent-socket-dir"], database: nil)
        #expect(result.status == 69)
    }
}
