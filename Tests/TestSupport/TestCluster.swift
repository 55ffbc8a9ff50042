import Foundation
import JobKit
import Migrations
import Postgres

/// The PostgreSQL server the tests use: a throwaway cluster started once per test process
/// (`scripts/pg-cluster`, initdb into a temporary folder, unix socket only, fsync off), or the server
/// named by `TEST_DATABASE_URL`. A template database is migrated once; each test gets a fresh
/// database cloned from it. The cluster stops when the process exits (and a watchdog stops it if the
/// process dies). A missing PostgreSQL fails the test with the command that installs it.
public final class TestCluster: @unchecked Sendable {
    /// A connection URL to the maintenance database (`postgres`).
    public let adminURL: String
    private let directory: String?
    private let lock = NSLock()
    private var counter = 0
    static let template = "mentor_push_template"

    /// The shared cluster, started on first use.
    public static func shared() throws -> TestCluster {
        try sharedResult.get()
    }

    private static let sharedResult: Result<TestCluster, Error> = Result { try TestCluster() }

    /// A cluster of the test's own (never `TEST_DATABASE_URL`'s server), for tests that restart or stop the
    /// server. Call `stop()` when done; a watchdog stops it if the test process dies.
    public static func ownCluster() throws -> TestCluster {
        try TestCluster(own: true)
    }

    private init(own: Bool = false) throws {
        if !own, let url = ProcessInfo.processInfo.environment["TEST_DATABASE_URL"], !url.isEmpty {
            adminURL = url
            directory = nil
        } else {
            let dir = FileManager.default.temporaryDirectory.appendingPathComponent("mentor-push-tests-\(getpid())-\(UUID().uuidString.prefix(8))").path
            let result = try ProcessRunner.run(Paths.script("pg-cluster"), ["start", dir, "--watch", String(getpid())])
            guard result.status == 0 else {
                throw TestSetupError("could not start a throwaway PostgreSQL (exit \(result.status)): \(result.stderr)")
            }
            adminURL = result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            directory = dir
            if !own { TestCluster.stopAtExit(dir) }
        }
        try createTemplate()
    }

    private static func stopAtExit(_ dir: String) {
        ClusterStopper.directory = dir
        atexit {
            guard let dir = ClusterStopper.directory else { return }
            _ = try? ProcessRunner.run(Paths.script("pg-cluster"), ["stop", dir])
        }
    }

    private func createTemplate() throws {
        let admin = try Connection(url: adminURL, applicationName: "tests")
        try admin.execute("SELECT pg_advisory_lock(hashtext('mentor-push:test-template'))")
        defer { _ = try? admin.execute("SELECT pg_advisory_unlock(hashtext('mentor-push:test-template'))") }
        // Always rebuild: an external server may hold a template from an older schema.
        try admin.execute("DROP DATABASE IF EXISTS \(sql: "mentor_push_template") WITH (FORCE)")
        try admin.execute("CREATE DATABASE \(sql: "mentor_push_template")")
        let connection = try Connection(url: url(database: TestCluster.template), applicationName: "tests")
        _ = try Migrator(directory: Paths.root.appendingPathComponent("sql/migrations")).apply(to: connection)
    }

    /// Stops the server at once and starts it again (clients see their connections drop).
    public func restart() throws {
        guard let directory else { throw TestSetupError("restart needs a cluster of the test's own (TestCluster.ownCluster())") }
        let result = try ProcessRunner.run(Paths.script("pg-cluster"), ["restart", directory])
        guard result.status == 0 else { throw TestSetupError("pg-cluster restart failed: \(result.stderr)") }
    }

    /// Stops the server and deletes its folder.
    public func stop() {
        guard let directory else { return }
        _ = try? ProcessRunner.run(Paths.script("pg-cluster"), ["stop", directory])
    }

    /// A URL for `database` on this server (as `user`, when given, instead of the tests' own).
    public func url(database: String, user: String? = nil) -> String {
        if adminURL.hasPrefix("postgres://") || adminURL.hasPrefix("postgresql://") {
            var components = URLComponents(string: adminURL)!
            components.path = "/" + database
            if let user {
                // The user may be a query parameter (pg-cluster's URL: `?host=…&user=postgres`), which beats the
                // URL's user part.
                components.queryItems = (components.queryItems ?? []).filter { $0.name != "user" && $0.name != "password" } + [URLQueryItem(name: "user", value: user)]
                components.user = nil
                components.password = nil
            }
            return components.string!
        }
        return adminURL + " dbname=\(database)" + (user.map { " user=\($0)" } ?? "")
    }

    /// A fresh, migrated database of its own.
    public func makeDatabase(migrated: Bool = true) throws -> TestDatabase {
        let name: String = lock.withLock {
            counter += 1
            return "t\(getpid())_\(counter)_\(UUID().uuidString.prefix(6).lowercased())"
        }
        let admin = try Connection(url: adminURL, applicationName: "tests")
        // Identifiers cannot be parameters; `name` is made above from digits and hex only.
        try admin.runScript(migrated
            ? "CREATE DATABASE \(name) TEMPLATE \(TestCluster.template) STRATEGY FILE_COPY"
            : "CREATE DATABASE \(name)")
        return TestDatabase(name: name, url: url(database: name))
    }
}

enum ClusterStopper {
    nonisolated(unsafe) static var directory: String?
}

/// One test's own database.
public struct TestDatabase: Sendable {
    public let name: String
    public let url: String

    /// A new connection to it.
    public func connect() throws -> Connection {
        try Connection(url: url, applicationName: "tests")
    }
}

/// A test could not set up what it needs: the message says what to do.
public struct TestSetupError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
