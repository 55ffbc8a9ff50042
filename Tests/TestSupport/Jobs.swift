import Foundation

/// Runs the built job executables against a test database.
public enum Jobs {
    /// Runs `job` (an executable name) with `arguments`, pointing it at `database`.
    public static func run(_ job: String, _ arguments: [String], database: TestDatabase?, environment: [String: String] = [:]) throws -> ProcessRunner.Result {
        var arguments = arguments
        if let database { arguments += ["--database-url", database.url] }
        return try ProcessRunner.run(Paths.executable(job), arguments, environment: environment)
    }

    /// Runs inactivity-check as of `now`.
    public static func inactivityCheck(_ database: TestDatabase, now: Date, _ extra: [String] = [], environment: [String: String] = [:]) throws -> ProcessRunner.Result {
        try run("inactivity-check", ["--now", iso(now)] + extra, database: database, environment: environment)
    }

    /// Runs push-deliver against `database` with `environment` (usually a `PushEnvironment`'s variables).
    public static func pushDeliver(_ database: TestDatabase, _ extra: [String] = [], environment: [String: String]) throws -> ProcessRunner.Result {
        try run("push-deliver", extra, database: database, environment: environment)
    }

    public static func iso(_ date: Date) -> String {
        let formatter = ISO8601DateFormatter()
        return formatter.string(from: date)
    }
}
