import Foundation
import JobKit
import Migrations
import Testing
import TestSupport

@Test func requiredSchemaVersionIsTheNewestMigration() throws {
    let migrator = try Migrator(directory: Paths.root.appendingPathComponent("sql/migrations"))
    #expect(migrator.migrations.last?.version == Schema.requiredVersion)
}
