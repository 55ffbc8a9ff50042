import Foundation
@testable import Migrations
import Testing

/// A migration's own COMMIT (or BEGIN, ROLLBACK, …) is found as PostgreSQL's lexer would read the file: not
/// inside a function's body, a string, a quoted name or a comment.
@Suite struct TransactionControlTests {
    @Test(arguments: [
        ("CREATE TABLE t (id int);\nCOMMIT;\nSELECT 1;", "COMMIT"),
        ("create table t (id int); commit", "COMMIT"),
        ("BEGIN; CREATE TABLE t (id int); END;", "BEGIN"),
        ("CREATE TABLE t (id int);\n  rollback ;", "ROLLBACK"),
        ("SELECT 1; START TRANSACTION ISOLATION LEVEL SERIALIZABLE;", "START TRANSACTION"),
        ("SELECT 1; PREPARE TRANSACTION 'x';", "PREPARE TRANSACTION"),
        ("SELECT 1; /* a comment; */ SAVEPOINT a;", "SAVEPOINT"),
        ("SELECT 'it''s; COMMIT'; ABORT;", "ABORT"),
    ])
    func aStatementThatEndsTheTransactionIsFound(sql: String, expected: String) {
        #expect(TransactionControl.first(in: sql) == expected)
    }

    @Test(arguments: [
        "CREATE FUNCTION f() RETURNS void LANGUAGE plpgsql AS $$\nBEGIN\n  PERFORM 1;\nEND $$;",
        "DO $body$ BEGIN COMMIT; END $body$;",
        "SELECT 'COMMIT; BEGIN';",
        "SELECT E'\\'; COMMIT';",
        "-- COMMIT;\nSELECT 1;",
        "/* outer /* COMMIT; */ still a comment; ROLLBACK; */ SELECT 1;",
        "CREATE TABLE \"begin\" (\"end\" int); SELECT \"end\" FROM \"begin\";",
        "PREPARE q AS SELECT $1::int;",
        "CREATE FUNCTION g() RETURNS int LANGUAGE sql BEGIN ATOMIC SELECT 1; END;",
        "SELECT 1 AS begin_date, 2 AS commit_count;",
    ])
    func nothingElseIs(sql: String) {
        #expect(TransactionControl.first(in: sql) == nil, "\(sql)")
    }

    @Test func noShippedMigrationHasOne() throws {
        let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("sql/migrations")
        _ = try Migrator(directory: folder)
    }
}
