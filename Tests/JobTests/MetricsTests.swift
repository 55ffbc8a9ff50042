import Foundation
import Testing
import TestSupport

/// Each writing run leaves Prometheus text metrics for node_exporter's textfile collector in `METRICS_DIR`.
@Suite struct MetricsTests {
    let db: TestDatabase
    let f: Fixtures
    let directory: URL

    init() throws {
        db = try TestCluster.shared().makeDatabase()
        f = try Fixtures(db)
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("metrics-\(UUID().uuidString)")
    }

    func metrics(_ job: String) throws -> [String: Double] {
        let text = try String(contentsOf: directory.appendingPathComponent("mentor-push-\(job).prom"), encoding: .utf8)
        var values: [String: Double] = [:]
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            let parts = line.split(separator: " ")
            values[String(parts[0])] = Double(parts[1])
        }
        return values
    }

    /// A setting from the environment that cannot be read fails the run before it starts: it still ends with
    /// its summary line and its metrics (the file kept saying the last run succeeded, and nothing paged).
    @Test func aRunThatFailsOnItsSettingsStillSaysSo() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let push = try PushEnvironment()
        for (job, variable) in [("prune", "PRUNE_BATCH_SIZE"), ("push-deliver", "PUSH_WORKERS")] {
            var environment = push.variables
            environment["METRICS_DIR"] = directory.path
            let ok = try Jobs.run(job, [], database: db, environment: environment)
            #expect(ok.status == 0, "\(job): \(ok.stderr)")
            #expect(try metrics(job)["mentor_push_last_run_exit_code{mentor_push_job=\"\(job)\"}"] == 0, "\(job)")
            environment[variable] = "lots"
            let bad = try Jobs.run(job, [], database: db, environment: environment)
            #expect(bad.status == 78, "\(job): \(bad.stderr)")
            #expect(bad.stderr.contains(variable), "\(job): \(bad.stderr)")
            #expect(bad.summary?["exit_code"] as? Int == 78, "\(job): \(bad.stdout)")
            #expect(try metrics(job)["mentor_push_last_run_exit_code{mentor_push_job=\"\(job)\"}"] == 78, "\(job)")
        }
    }

    @Test func aRunWritesWhatItDidAndALaterFailureKeepsTheLastSuccess() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let org = try f.organization("Org")
        try f.mentor(org, "Kari", lastActivityDaysAgo: 20)
        try f.mentor(org, "Ola", lastActivityDaysAgo: 20)
        try f.preferences(try f.mentor(org, "Per", lastActivityDaysAgo: 20), master: false)
        let environment = ["METRICS_DIR": directory.path]
        let started = Date().timeIntervalSince1970
        #expect(try Jobs.inactivityCheck(db, now: f.now, environment: environment).status == 0)
        let first = try metrics("inactivity-check")
        let job = #"{mentor_push_job="inactivity-check"}"#
        let success = try #require(first["mentor_push_last_success_timestamp_seconds\(job)"])
        #expect(success >= started - 1 && success <= Date().timeIntervalSince1970 + 1)
        #expect(first["mentor_push_last_run_notified\(job)"] == 2)
        #expect(first["mentor_push_last_run_suppressed{mentor_push_job=\"inactivity-check\",reason=\"push_disabled\"}"] == 1)
        #expect(first["mentor_push_last_run_exit_code\(job)"] == 0)
        #expect(first["mentor_push_delivery_backlog_due\(job)"] == 2, "Kari's and Ola's pushes wait for push-deliver")
        #expect(first["mentor_push_last_run_outcome{mentor_push_job=\"inactivity-check\",outcome=\"ok\"}"] == 1)

        // A failing run (an organization's settings are invalid: 78) updates the run, not the success.
        try f.ruleWrittenBeforeValidation(org, settings: #"{"threshold_days": "fourteen"}"#)
        Thread.sleep(forTimeInterval: 1.1)
        #expect(try Jobs.inactivityCheck(db, now: f.now, environment: environment).status == 78)
        let second = try metrics("inactivity-check")
        #expect(second["mentor_push_last_success_timestamp_seconds\(job)"] == success)
        #expect(second["mentor_push_last_run_exit_code\(job)"] == 78)
        #expect(try #require(second["mentor_push_last_run_timestamp_seconds\(job)"]) > success)
        // Prometheus sets `job` and `instance` on what it scrapes and renames such labels of ours (exported_job):
        // the README's alert matches on mentor_push_job.
        let text = try String(contentsOf: directory.appendingPathComponent("mentor-push-inactivity-check.prom"), encoding: .utf8)
        #expect(!text.contains("{job=") && !text.contains(",job=") && !text.contains("instance="), "\(text)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path) == ["mentor-push-inactivity-check.prom"],
                "written to a temporary file and renamed: nothing else left behind")
    }

    /// The units run jobs with `UMask=0077`; node_exporter runs as another user and must still read the file.
    @Test func theMetricsFileIsReadableByTheCollectorWhateverTheUmask() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let prune = Paths.executable("prune")
        let result = try ProcessRunner.run("/bin/sh", ["-c", "umask 077; exec \"$0\" --database-url \"$1\"", prune, db.url],
                                           environment: ["METRICS_DIR": directory.path])
        #expect(result.status == 0, "stderr: \(result.stderr)")
        let attributes = try FileManager.default.attributesOfItem(atPath: directory.appendingPathComponent("mentor-push-prune.prom").path)
        #expect((attributes[.posixPermissions] as? Int).map { $0 & 0o044 } == 0o044, "\(String(describing: attributes[.posixPermissions]))")
    }

    /// A run skipped because another is in progress must not report a success: runs skipped behind one that
    /// hangs would keep the alert on the last success quiet for ever.
    @Test func aSkippedRunLeavesTheMetricsToTheRunInProgress() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let environment = ["METRICS_DIR": directory.path]
        #expect(try Jobs.inactivityCheck(db, now: f.now, environment: environment).status == 0)
        let file = directory.appendingPathComponent("mentor-push-inactivity-check.prom")
        let before = try String(contentsOf: file, encoding: .utf8)
        let inProgress = try db.connect()
        try inProgress.execute("SELECT pg_advisory_lock(hashtext('mentor-push:job:inactivity-check'))")
        Thread.sleep(forTimeInterval: 1.1)
        let skipped = try Jobs.inactivityCheck(db, now: f.now, environment: environment)
        #expect(skipped.status == 0 && skipped.summary?["outcome"] as? String == "skipped", "\(skipped.stdout)")
        #expect(try String(contentsOf: file, encoding: .utf8) == before, "the file is the run in progress's")
    }

    /// A run limited to some organizations (`--org`, by hand) is not the job's run: its success would keep the
    /// alert on the last success quiet while the scheduled runs fail. It writes no metrics, and its summary and
    /// job_runs row say it was limited.
    @Test func aRunLimitedToSomeOrganizationsLeavesTheMetricsToTheJob() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        let environment = ["METRICS_DIR": directory.path]
        let org = try f.organization("Org")
        let limited = try Jobs.inactivityCheck(db, now: f.now, ["--org", org.uuidString], environment: environment)
        #expect(limited.status == 0, "\(limited.stderr)")
        #expect(limited.summary?["limited_to"] as? [String] == [org.uuidString.lowercased()], "\(limited.stdout)")
        #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("mentor-push-inactivity-check.prom").path))
        let counts: String = try f.connection.query("SELECT counts::text FROM job_runs ORDER BY id DESC LIMIT 1").first!.decode(0)
        #expect(counts.contains(org.uuidString.lowercased()), "\(counts)")
    }

    /// A folder the job cannot write in (here /sys, where not even root may create a file) does not fail the
    /// run, and the log says why in the system's words: it said `Error Domain=NSCocoaErrorDomain Code=512 "(null)"`.
    @Test func aMetricsFolderThatCannotBeWrittenSaysWhy() throws {
        let result = try Jobs.run("prune", [], database: db, environment: ["METRICS_DIR": "/sys"])
        #expect(result.status == 0, "metrics never fail a run: \(result.stderr)")
        #expect(result.stderr.contains("could not write the metrics to /sys/mentor-push-prune.prom: cannot create /sys/mentor-push-prune.prom."), "\(result.stderr)")
        #expect(result.stderr.contains(": Permission denied") && !result.stderr.contains("NSCocoaErrorDomain"), "\(result.stderr)")
    }

    @Test func aDryRunWritesNoMetrics() throws {
        defer { try? FileManager.default.removeItem(at: directory) }
        #expect(try Jobs.inactivityCheck(db, now: f.now, ["--dry-run"], environment: ["METRICS_DIR": directory.path]).status == 0)
        #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("mentor-push-inactivity-check.prom").path))
    }
}
