import Foundation
import Postgres
import Testing
import TestSupport

/// The libpq wrapper against a real server.
@Suite struct ConnectionTests {
    let connection: Connection

    init() throws {
        connection = try TestCluster.shared().makeDatabase(migrated: false).connect()
    }

    @Test func decodesTheTypesTheJobsRead() throws {
        let id = UUID()
        let row = try #require(try connection.query("""
            SELECT 'héllo 👋'::text, 42::int, -7::bigint, true, false, \(id)::uuid,
                   '2026-11-22 08:30:15.123456+00'::timestamptz, '{"a": [1, "x"]}'::jsonb,
                   ARRAY['a', 'b,c', 'd "e"', 'f\\g']::text[], ARRAY[25, 50, 100]::int[], NULL::text
            """).first)
        #expect(try row.decode(0, as: String.self) == "héllo 👋")
        #expect(try row.decode(1, as: Int.self) == 42)
        #expect(try row.decode(2, as: Int.self) == -7)
        #expect(try row.decode(3, as: Bool.self))
        #expect(try !row.decode(4, as: Bool.self))
        #expect(try row.decode(5, as: UUID.self) == id)
        let date = try row.decode(6, as: Date.self)
        #expect(abs(date.timeIntervalSince1970 - 1_795_336_215.123456) < 0.000001)
        #expect(try row.decode(7, as: JSONValue.self).text == #"{"a": [1, "x"]}"#)
        #expect(try row.decode(8, as: [String].self) == ["a", "b,c", #"d "e""#, #"f\g"#])
        #expect(try row.decode(9, as: [Int].self) == [25, 50, 100])
        #expect(try row.decode(10, as: String?.self) == nil)
        #expect(throws: PostgresError.self) { try row.decode(10, as: String.self) }
        #expect(throws: PostgresError.self) { try row.decode(0, as: Int.self) }
    }

    @Test(arguments: [
        "plain",
        "quote ' and double \" and backslash \\",
        "'); DROP TABLE x; --",
        "emoji 🎉👩‍👩‍👧 and RTL שלום",
        "$1 $2 and {braces,commas}",
        "",
    ])
    func parametersRoundTripUnchanged(value: String) throws {
        let row = try #require(try connection.query("SELECT \(value)::text, (\(PostgresArray([value, "other"])))::text[]").first)
        #expect(try row.decode(0, as: String.self) == value)
        #expect(try row.decode(1, as: [String].self) == [value, "other"])
    }

    @Test func timestampsRoundTripWithMicroseconds() throws {
        for seconds in [0.0, 1_781_510_400.5, 1_795_336_215.123456, -86_400.25] {
            let date = Date(timeIntervalSince1970: seconds)
            let back = try connection.query("SELECT \(date)::timestamptz").first!.decode(0, as: Date.self)
            #expect(abs(back.timeIntervalSince1970 - seconds) < 0.000001)
        }
    }

    /// PostgreSQL's infinities read as `Date.distantPast` / `.distantFuture`, are written back as themselves
    /// and shown as "-infinity" / "infinity" (`why` showed a joined_at of -infinity as 0000-12-30T00:00:00Z).
    @Test func infinitiesRoundTripAndAreShownAsSuch() throws {
        let row = try #require(try connection.query("SELECT '-infinity'::timestamptz, 'infinity'::timestamptz").first)
        let (past, future) = (try row.decode(0, as: Date.self), try row.decode(1, as: Date.self))
        #expect(past == .distantPast && future == .distantFuture)
        let back: String = try connection.query("SELECT \(past)::timestamptz::text || ' ' || \(future)::timestamptz::text").first!.decode(0)
        #expect(back == "-infinity infinity")
        #expect(Timestamp.iso8601(past) == "-infinity" && Timestamp.iso8601(future) == "infinity")
    }

    @Test func serverErrorsCarrySQLStateButNeverTheBoundValue() throws {
        try connection.execute("CREATE TABLE secrets (token text PRIMARY KEY)")
        try connection.execute("INSERT INTO secrets VALUES (\("TOKEN-abc123-very-secret"))")
        do {
            try connection.execute("INSERT INTO secrets VALUES (\("TOKEN-abc123-very-secret"))")
            Issue.record("a duplicate key was accepted")
        } catch let error as PostgresError {
            #expect(error.sqlState == "23505")
            #expect(!error.description.contains("TOKEN-abc123"))
            #expect(error.description.contains("secrets_pkey"))
        }
    }

    @Test func nulBytesAreRefusedNotTruncated() throws {
        #expect(throws: PostgresError.self) { try connection.query("SELECT \("before\u{0}after")::text") }
    }

    @Test func readOnlyTransactionsCannotWrite() throws {
        try connection.execute("CREATE TABLE t (x int)")
        do {
            try connection.transaction(.readOnly) { try connection.execute("INSERT INTO t VALUES (1)") }
            Issue.record("a read-only transaction wrote")
        } catch let error as PostgresError {
            #expect(error.sqlState == SQLState.readOnlyTransaction)
        }
        #expect(try connection.query("SELECT count(*) FROM t").first!.decode(0, as: Int.self) == 0)
    }

    @Test func aFailedTransactionIsRolledBack() throws {
        try connection.execute("CREATE TABLE t2 (x int)")
        struct Boom: Error {}
        #expect(throws: Boom.self) {
            try connection.transaction {
                try connection.execute("INSERT INTO t2 VALUES (1)")
                throw Boom()
            }
        }
        #expect(try connection.query("SELECT count(*) FROM t2").first!.decode(0, as: Int.self) == 0)
    }

    @Test func statementTimeoutCancelsLongStatements() throws {
        let db = try TestCluster.shared().makeDatabase(migrated: false)
        let short = try Connection(url: db.url, applicationName: "timeout-test", statementTimeout: .milliseconds(200))
        do {
            try short.execute("SELECT pg_sleep(5)")
            Issue.record("the statement was not cancelled")
        } catch let error as PostgresError {
            #expect(error.sqlState == SQLState.queryCanceled)
        }
    }

    @Test func applicationNameIsSet() throws {
        let db = try TestCluster.shared().makeDatabase(migrated: false)
        let named = try Connection(url: db.url, applicationName: "inactivity-check")
        #expect(try named.query("SELECT current_setting('application_name')").first!.decode(0, as: String.self) == "inactivity-check")
        #expect(try named.query("SELECT current_setting('TimeZone')").first!.decode(0, as: String.self) == "UTC")
    }

    @Test func streamingDeliversEveryRowAndCanStopEarly() throws {
        var sum = 0
        try connection.stream("SELECT g FROM generate_series(1, 100000) g") { row in sum += try row.decode(0, as: Int.self) }
        #expect(sum == 5_000_050_000)
        struct Enough: Error {}
        var seen = 0
        #expect(throws: Enough.self) {
            try connection.stream("SELECT g FROM generate_series(1, 10000000) g") { _ in
                seen += 1
                if seen == 10 { throw Enough() }
            }
        }
        // The connection is usable again after the cancelled stream.
        #expect(try connection.query("SELECT 1").first!.decode(0, as: Int.self) == 1)
    }

    @Test func interpolatedQueriesNestWithRenumberedParameters() throws {
        let inner: Query = "SELECT \(1)::int AS a, '$1 stays' AS literal"
        let outer: Query = "SELECT \(10)::int + q.a, q.literal FROM (\(inner)) q WHERE \(true)"
        #expect(outer.sql == "SELECT $1::int + q.a, q.literal FROM (SELECT $2::int AS a, '$1 stays' AS literal) q WHERE $3")
        let row = try #require(try connection.query(outer).first)
        #expect(try row.decode(0, as: Int.self) == 11)
        #expect(try row.decode(1, as: String.self) == "$1 stays")
    }
}

@Suite struct BinaryStreamingTests {
    @Test func streamingInBinaryDecodesTheSameValuesAsText() throws {
        let connection = try TestCluster.shared().makeDatabase(migrated: false).connect()
        let id = UUID()
        let query: Query = """
            SELECT 'héllo 👋'::text, 42::int4, -7::int8, 3::int2, true, \(id)::uuid,
                   '2026-11-22 08:30:15.123456+00'::timestamptz, '1999-12-31 23:59:59.5+00'::timestamptz,
                   '{"a": 1}'::jsonb, 1.5::float8, NULL::text
            """
        var rows: [[String]] = []
        for binary in [false, true] {
            try connection.stream(query, binary: binary) { row in
                rows.append([
                    try row.decode(0, as: String.self), String(try row.decode(1, as: Int.self)), String(try row.decode(2, as: Int.self)),
                    String(try row.decode(3, as: Int.self)), String(try row.decode(4, as: Bool.self)), try row.decode(5, as: UUID.self).uuidString,
                    String(try row.decode(6, as: Date.self).timeIntervalSince1970), String(try row.decode(7, as: Date.self).timeIntervalSince1970),
                    try row.decode(8, as: JSONValue.self).text, String(try row.decode(9, as: Double.self)),
                    String(describing: try row.decode(10, as: String?.self)),
                ])
            }
        }
        #expect(rows.count == 2)
        #expect(rows[0] == rows[1])
        #expect(rows[1][0] == "héllo 👋")
        #expect(rows[1][5] == id.uuidString)
        #expect(rows[1][8] == #"{"a": 1}"#)
    }

    @Test func aBinaryColumnOfAnotherTypeIsADecodingErrorNotGarbage() throws {
        let connection = try TestCluster.shared().makeDatabase(migrated: false).connect()
        #expect(throws: PostgresError.self) {
            try connection.stream("SELECT 42::int4", binary: true) { row in _ = try row.decode(0, as: UUID.self) }
        }
    }

    /// The throwaway cluster's URL names its socket folder: one whose path has a space, & or # (a TMPDIR like
    /// that) gave a URL that broke at it. The folder is percent-encoded now.
    @Test func aThrowawayClusterInAFolderWithASpaceGivesAURLThatWorks() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("pg a&b #\(UUID().uuidString.prefix(6))").path
        let start = try ProcessRunner.run(Paths.script("pg-cluster"), ["start", dir, "--watch", String(getpid())])
        defer { _ = try? ProcessRunner.run(Paths.script("pg-cluster"), ["stop", dir]) }
        #expect(start.status == 0, "\(start.stderr)")
        let url = start.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(URLComponents(string: url) != nil, "\(url)")
        let one: Int = try Connection(url: url, applicationName: "tests").query("SELECT 1").first!.decode(0)
        #expect(one == 1)
    }

    /// `start` into a folder that holds somebody's files (another run's cluster) failed in initdb and then
    /// deleted the folder, files, running cluster and all; `stop` deleted whatever folder it was given. Both
    /// now leave a folder they did not make alone.
    @Test func theThrowawayClusterNeverDeletesAFolderItDidNotMake() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("not-a-cluster-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("somebody's.txt")
        try Data("keep me".utf8).write(to: file)
        let start = try ProcessRunner.run(Paths.script("pg-cluster"), ["start", dir.path])
        #expect(start.status == 73, "\(start.stderr)")
        #expect(start.stderr.contains("is not an empty folder"), "\(start.stderr)")
        let stop = try ProcessRunner.run(Paths.script("pg-cluster"), ["stop", dir.path])
        #expect(stop.status == 64, "\(stop.stderr)")
        #expect(FileManager.default.fileExists(atPath: file.path), "the folder's file was deleted")
    }
}

/// A peer gone without a word (its host lost power, a firewall forgot the connection) is noticed in about a
/// minute each way, not after the system's two hours of TCP keepalive: the job's rerun at boot found its own
/// lock still held by the dead session ("already running", exit 0) and the day's run was lost.
@Suite struct KeepaliveTests {
    @Test func bothEndsProbeASilentConnectionAndTheURLMaySayOtherwise() throws {
        let db = try TestCluster.shared().makeDatabase(migrated: false)
        let connection = try db.connect()
        #expect(connection.option("keepalives") == "1")
        #expect(connection.option("keepalives_idle") == "30")
        #expect(connection.option("keepalives_interval") == "10")
        #expect(connection.option("keepalives_count") == "3")
        #expect(connection.option("tcp_user_timeout") == "60000")
        // The server's side is set for the session (over this test's Unix socket it reads 0, as documented).
        let sources: [String] = try connection.query("""
            SELECT name || '=' || source FROM pg_settings
             WHERE name IN ('tcp_keepalives_idle', 'tcp_keepalives_interval', 'tcp_keepalives_count', 'tcp_user_timeout') ORDER BY name
            """).map { try $0.decode(0) }
        #expect(sources == ["tcp_keepalives_count=session", "tcp_keepalives_idle=session", "tcp_keepalives_interval=session", "tcp_user_timeout=session"])
        let own = try Connection(url: db.url + (db.url.contains("?") ? "&" : " ") + "keepalives_idle=5", applicationName: "tests")
        #expect(own.option("keepalives_idle") == "5")
    }
}

/// What event-notify sets aside one event at a time (the rows at fault) and what it does not (the statement's
/// or the server's fault, which no event is to blame for).
@Suite struct DataAtFaultTests {
    @Test func dataExceptionsBrokenConstraintsAndUnreadableColumnsAreTheDatasFault() throws {
        let connection = try TestCluster.shared().makeDatabase(migrated: false).connect()
        try connection.execute("CREATE TABLE t (id int PRIMARY KEY, name text NOT NULL)")
        try connection.execute("INSERT INTO t VALUES (1, 'a')")
        func error(_ body: () throws -> Void) -> PostgresError? {
            do { try body(); return nil } catch { return error as? PostgresError }
        }
        let atFault = [
            error { try connection.execute("SELECT 1 / 0") },                              // 22012
            error { try connection.execute("SELECT 'x'::uuid") },                          // 22P02
            error { try connection.execute("INSERT INTO t VALUES (1, 'b')") },             // 23505
            error { try connection.execute("INSERT INTO t VALUES (2, NULL)") },            // 23502
            error { _ = try connection.query("SELECT NULL::text").first!.decode(0, as: String.self) },
        ]
        #expect(atFault.allSatisfy { $0?.isDataAtFault == true }, "\(atFault)")
        let notAtFault = [
            error { try connection.execute("SELECT * FROM no_such_table") },              // 42P01
            error { try connection.execute("SET statement_timeout = 1; SELECT pg_sleep(1)") }, // 57014
        ]
        #expect(notAtFault.allSatisfy { $0 != nil && $0?.isDataAtFault == false }, "\(notAtFault)")
    }
}
