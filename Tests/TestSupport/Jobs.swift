import Foundation
import Postgres

/// Runs the built job executables against a test database.
public enum Jobs {
    /// Runs `job` (an executable name) with `arguments`, pointing it at `database`.
    public static func run(_ job: String, _ arguments: [String], database: TestDatabase?, environment: [String: String] = [:]) throws -> ProcessRunner.Result {
        var arguments = arguments
        if let database { arguments += ["--database-url", database.url] }
        let result = try ProcessRunner.run(Paths.executable(job), arguments, environment: environment)
        if let database { try checkQueue(database, after: job) }
        return result
    }

    /// The outbox's invariant, checked after every job a test runs: a delivery has a `delivery_queue` row
    /// exactly while it is pending or retrying. Each statement that opens or closes a delivery keeps it.
    public static func checkQueue(_ database: TestDatabase, after job: String) throws {
        let connection = try database.connect()
        guard try connection.query("SELECT to_regclass('delivery_queue') IS NOT NULL").first!.decode(0, as: Bool.self) else { return }
        let broken: [String] = try connection.query("""
            SELECT d.id || ' ' || d.state || CASE WHEN q.delivery_id IS NULL THEN ' (not queued)' ELSE ' (queued)' END
              FROM deliveries d LEFT JOIN delivery_queue q ON q.delivery_id = d.id
             WHERE (d.state IN ('pending', 'retrying')) <> (q.delivery_id IS NOT NULL)
             ORDER BY d.id LIMIT 10
            """).map { try $0.decode(0) }
        if !broken.isEmpty { throw QueueInvariantBroken(description: "after \(job), deliveries and their queue rows disagree: \(broken.joined(separator: ", "))") }
    }

    public struct QueueInvariantBroken: Error, CustomStringConvertible {
        public let description: String
    }

    /// Runs inactivity-check as of `now`.
    public static func inactivityCheck(_ database: TestDatabase, now: Date, _ extra: [String] = [], environment: [String: String] = [:]) throws -> ProcessRunner.Result {
        try run("inactivity-check", ["--now", iso(now)] + extra, database: database, environment: environment)
    }

    /// Runs push-deliver against `database` with `environment` (usually a `PushEnvironment`'s variables).
    public static func pushDeliver(_ database: TestDatabase, _ extra: [String] = [], environment: [String: String]) throws -> ProcessRunner.Result {
        try run("push-deliver", extra, database: database, environment: environment)
    }

    /// Runs `job` (as of the fixtures' now) up to the write of its first batch, held there by a gate (deliveries
    /// locked against writes; reads go on), does `meanwhile` as the app would, then lets it record.
    public static func runDecidingWhile(_ database: TestDatabase, _ f: Fixtures, _ job: String,
                                        meanwhile: () throws -> Void) throws -> ProcessRunner.Result {
        let gate = try database.connect()
        try gate.execute("BEGIN")
        try gate.execute("LOCK TABLE deliveries IN EXCLUSIVE MODE")
        let running = try ProcessRunner.start(Paths.executable(job), ["--now", iso(f.now), "--database-url", database.url])
        guard try f.waitForLockWaiters(1) == 1 else { throw GateNotReached(job: job) }
        try meanwhile()
        try gate.execute("COMMIT")
        return try running.wait()
    }

    public struct GateNotReached: Error, CustomStringConvertible {
        public let job: String
        public var description: String { "\(job) did not reach the gate (no lock waiter within the timeout)" }
    }

    public static func iso(_ date: Date) -> String {
        let formatter = ISO8601DateFormatter()
        return formatter.string(from: date)
    }
}
