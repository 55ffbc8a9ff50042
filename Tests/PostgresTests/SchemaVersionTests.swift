import Foundation
import JobKit
import Migrations
import Testing
import TestSupport

@Test func requiredSchemaVersionIsTheNewestMigration() throws {
    let migrator = try Migrator(directory: Paths.root.appendingPathComponent("sql/migrations"))
    #expect(migrator.migrations.last?.version == Schema.requiredVersion)
}

/// Every table has a primary key: a logical-replication publication `FOR ALL TABLES` (a replica, an upgrade
/// by replication) refuses the UPDATE and DELETE of a table without one, and the job that ran them fails.
@Test func everyTableHasAPrimaryKey() throws {
    let db = try TestCluster.shared().makeDatabase()
    let connection = try db.connect()
    let keyless: [String] = try connection.query("""
        SELECT c.relname::text FROM pg_class c JOIN pg_namespace s ON s.oid = c.relnamespace
         WHERE s.nspname = 'public' AND c.relkind IN ('r', 'p')
           AND NOT EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.oid AND i.indisprimary)
         ORDER BY 1
        """).map { try $0.decode(0) }
    #expect(keyless == [], "tables without a primary key: \(keyless)")
}
