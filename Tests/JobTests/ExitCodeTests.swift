import Foundation
import Logging
import JobKit
import Postgres
import Testing
import TestSupport

/// What an operator sees when something is wrong: a clear message and a sysexits code.
@Suite struct ExitCodeTests {
    @Test(arguments: [
        ["--format", "xml"],
        ["--now", "yesterday"],
        // Dates and times that do not exist are refused, not rolled over (2026-02-30 is not 2026-03-02).
        ["--now", "2026-02-30"],
        ["--now", "2026-11-01T25:61:00Z"],
        ["--now", "2026-11-01T10:00:00+99:99"],
        ["--org", "not-a-uuid"],
        ["--no-such-flag"],
        ["--statement-timeout", "0"],
        ["--dry-run", "--explain"],
    ])
    func badFlagsExit64(arguments: [String]) throws {
        let result = try Jobs.run("inactivity-check", arguments, database: nil)
        #expect(result.status == 64, "stderr: \(result.stderr)")
        #expect(result.stderr.contains("Error:"))
    }

    /// A lease is seconds a claim lasts: one past what the arithmetic on it holds crashed push-deliver, and one
    /// past PostgreSQL's intervals exited 70.
    @Test(arguments: ["0", "86401", "10000000000000", "100000000000000000"])
    func anOutOfRangeLeaseExits64(lease: String) throws {
        let result = try Jobs.run("push-deliver", ["--lease", lease], database: nil)
        #expect(result.status == 64, "stderr: \(result.stderr)")
        #expect(result.stderr.contains("--lease must be from 1 to 86400 seconds"), "\(result.stderr)")
    }

    /// A negative number given to a numeric flag was read as a flag of its own ("Missing value for
    /// '--statement-timeout'"): it gets the flag's own range message, as any other value out of range does.
    @Test(arguments: [
        ["inactivity-check", "--statement-timeout", "-5", "--statement-timeout must be from 1"],
        ["push-deliver", "--lease", "-5", "--lease must be from 1 to 86400"],
        ["push-deliver", "--push-concurrency", "-3", "--push-concurrency must be from 1"],
        ["prune", "--batch-size", "-5", "--batch-size must be from 1"],
        ["migrate", "--lock-timeout", "-2", "--lock-timeout must be from 0"],
        ["event-notify", "--poll-interval", "-1", "--poll-interval must be from 0.05"],
    ])
    func aNegativeNumberGetsItsFlagsRangeMessage(arguments: [String]) throws {
        let result = try Jobs.run(arguments[0], [arguments[1], arguments[2]], database: nil)
        #expect(result.status == 64, "stderr: \(result.stderr)")
        #expect(result.stderr.contains(arguments[3]), "\(result.stderr)")
    }

    /// `--database-url "$URL"` with `URL` unset would otherwise connect wherever libpq's defaults lead.
    @Test func anEmptyDatabaseURLFlagExits64InEveryExecutable() throws {
        for job in ["migrate", "inactivity-check", "push-deliver", "prune", "why", "rules"] {
            let user = job == "why" ? ["00000000-0000-4000-8000-000000000001"] : []
            let result = try Jobs.run(job, user + ["--database-url", ""], database: nil, environment: ["PGHOST": "/nonexistent-socket-dir"])
            #expect(result.status == 64, "\(job): \(result.stderr)")
            #expect(result.stderr.contains("--database-url is empty"), "\(job): \(result.stderr)")
        }
    }

    /// events-bench writes its load where it is pointed: an empty URL (an unset variable) would be libpq's defaults.
    @Test func eventsBenchRefusesAnEmptyDatabaseURL() throws {
        let result = try Jobs.run("events-bench", ["--database-url", "", "--rate", "1", "--seconds", "1"], database: nil,
                                  environment: ["PGHOST": "/nonexistent-socket-dir"])
        #expect(result.status == 64, "\(result.stderr)")
        #expect(result.stderr.contains("--database-url is empty"), "\(result.stderr)")
    }

    /// So with `DATABASE_URL=''` (a line of an environment file left empty): it quietly used libpq's defaults.
    @Test func anEmptyDatabaseURLVariableExits78InEveryExecutable() throws {
        for job in ["migrate", "inactivity-check", "push-deliver", "prune", "why", "rules", "event-notify"] {
            let user = job == "why" ? ["00000000-0000-4000-8000-000000000001"] : job == "event-notify" ? ["--once"] : []
            let result = try Jobs.run(job, user, database: nil, environment: ["DATABASE_URL": "", "PGHOST": "/nonexistent-socket-dir"])
            #expect(result.status == 78, "\(job): \(result.stderr)")
            #expect(result.stderr.contains("DATABASE_URL is set but empty"), "\(job): \(result.stderr)")
        }
    }

    /// A dry run is the step before the real run: push settings the real run refuses (78) are said (it said
    /// nothing). It goes on: run by hand, it may lack the key files the unit hands the job.
    @Test func aDryRunSaysWhichPushSettingsTheRealRunRefuses() throws {
        let db = try TestCluster.shared().makeDatabase()
        let broken = ["APNS_KEY_FILE": "/nonexistent/AuthKey.p8"]
        let real = try Jobs.run("inactivity-check", [], database: db, environment: broken)
        #expect(real.status == 78, "\(real.stderr)")
        let dry = try Jobs.run("inactivity-check", ["--dry-run"], database: db, environment: broken)
        #expect(dry.status == 0, "\(dry.stderr)")
        #expect(dry.stderr.contains("push settings: APNS_") && dry.stderr.contains("a real run would exit 78"), "\(dry.stderr)")
        let explain = try Jobs.run("inactivity-check", ["--explain"], database: db, environment: broken)
        #expect(explain.status == 0, "--explain reads the plan only: \(explain.stderr)")
    }

    /// An empty push flag quietly fell back to the environment's setting.
    @Test func anEmptyPushFlagExits64() throws {
        for job in ["push-deliver", "inactivity-check", "event-notify"] {
            let result = try Jobs.run(job, ["--apns-key-file", ""], database: nil)
            #expect(result.status == 64, "\(job): \(result.stderr)")
            #expect(result.stderr.contains("--apns-key-file is empty"), "\(job): \(result.stderr)")
        }
    }

    /// The event log's own guard answers with insufficient_privilege too, but a statement that trips it is
    /// a bug of ours (70), not a grant to give (77): granting would not help.
    @Test func theAppendOnlyGuardIsABugNotAMissingPrivilege() throws {
        let db = try TestCluster.shared().makeDatabase()
        let connection = try db.connect()
        do {
            try connection.execute("DELETE FROM delivery_events")
            Issue.record("the append-only guard let a DELETE through")
        } catch {
            let failure = JobFailure(classifying: error)
            #expect(failure.status == .software, "\(failure.message)")
            #expect(failure.message.contains("append-only") && !failure.message.contains("grant it"), "\(failure.message)")
        }
    }

    /// A role that may read but not write (a grant forgotten in production) exits 77, not 70 "a bug".
    @Test func aMissingPrivilegeExits77NamingIt() throws {
        let db = try TestCluster.shared().makeDatabase()
        let role = "mentor_push_reader"
        let admin = try db.connect()
        try admin.execute("DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'mentor_push_reader') THEN CREATE ROLE mentor_push_reader LOGIN; END IF; END $$")
        try admin.execute("GRANT USAGE ON SCHEMA public TO mentor_push_reader")
        try admin.execute("GRANT SELECT ON ALL TABLES IN SCHEMA public TO mentor_push_reader")
        // The test cluster's URLs name their user as a parameter (`?host=…&user=postgres`).
        let url = db.url.replacing(/user=[^&\s]+/, with: "user=\(role)")
        #expect(url.contains("user=\(role)"), "\(db.url)")
        let result = try Jobs.run("inactivity-check", ["--database-url", url], database: nil)
        #expect(result.status == 77, "stderr: \(result.stderr)")
        #expect(result.stderr.contains("permission denied") && result.stderr.contains("lacks a privilege"), "\(result.stderr)")
    }

    /// A role that may not connect to the database (REVOKE CONNECT … FROM PUBLIC) exited 69, "unavailable":
    /// the timers tried again every two minutes, and event-notify reconnected for ever. It is refused for good.
    @Test func aRoleWithoutConnectOnTheDatabaseExits77() throws {
        let db = try TestCluster.shared().makeDatabase()
        let admin = try db.connect()
        try admin.execute("DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'mentor_push_outsider') THEN CREATE ROLE mentor_push_outsider LOGIN; END IF; END $$")
        try admin.runScript("REVOKE CONNECT ON DATABASE \(db.name) FROM PUBLIC")
        let url = db.url.replacing(/user=[^&\s]+/, with: "user=mentor_push_outsider")
        for job in ["inactivity-check", "push-deliver", "event-notify"] {
            let result = try Jobs.run(job, ["--database-url", url] + (job == "event-notify" ? ["--once"] : []), database: nil)
            #expect(result.status == 77, "\(job): \(result.stderr)")
            #expect(result.stderr.contains("GRANT CONNECT ON DATABASE"), "\(job): \(result.stderr)")
        }
    }

    /// libpq's refusals of the URL's TLS setup are settings to fix (78), not a server to wait for (69, and
    /// event-notify reconnecting every 30 s for ever): their words as libpq 15 prints them.
    @Test(arguments: [
        "connection to server at \"10.0.0.5\", port 5432 failed: SSL error: certificate verify failed",
        "connection to server at \"10.0.0.5\", port 5432 failed: server certificate for \"localhost\" does not match host name \"db.example.org\"",
        "connection to server at \"10.0.0.5\", port 5432 failed: root certificate file \"/root/.postgresql/root.crt\" does not exist; Either provide the file, use the system's trusted roots with sslrootcert=system, or change sslmode to disable server certificate verification.",
        "connection to server at \"10.0.0.5\", port 5432 failed: server does not support SSL, but SSL was required",
    ])
    func aRefusedTLSSetupIsASettingToFix(message: String) {
        let error = PostgresError.connectionFailed(message: message)
        let failure = JobFailure(classifying: error)
        #expect(failure.status == .config, "\(failure.message)")
        #expect(failure.message.contains("check sslmode"), "\(failure.message)")
        // A transient TLS failure is not one of them, nor one host's refusal while another is down (a failover).
        #expect(JobFailure(classifying: PostgresError.connectionFailed(message: "SSL SYSCALL error: EOF detected")).status == .unavailable)
        let twoHosts = message + "; connection to server at \"10.0.0.6\", port 5432 failed: Connection refused; Is the server running on that host and accepting TCP/IP connections?"
        #expect(JobFailure(classifying: PostgresError.connectionFailed(message: twoHosts)).status == .unavailable)
        #expect(JobFailure(classifying: PostgresError.connectionFailed(message: message + "; " + message)).status == .config)
    }

    /// A statement cancelled from another session (pg_cancel_backend) was reported as our statement timeout,
    /// with the advice to raise it; a timeout is most often a lock another session holds, which a longer
    /// timeout only waits on longer.
    @Test func aCancelledStatementIsNotCalledATimeout() throws {
        let db = try TestCluster.shared().makeDatabase(migrated: false)
        let timedOut = try db.connect()
        do {
            try timedOut.execute("SET statement_timeout = 50")
            try timedOut.execute("SELECT pg_sleep(2)")
            Issue.record("no timeout")
        } catch {
            let failure = JobFailure(classifying: error)
            #expect(failure.status == .tempFail && failure.message.contains("statement timeout: often a lock"), "\(failure.message)")
        }
        let cancelled = try db.connect()
        let pid: Int = try cancelled.query("SELECT pg_backend_pid()").first!.decode(0)
        let url = db.url
        let canceller = Thread {
            // Once the statement runs (a cancel that comes first hits an idle session and cancels nothing).
            guard let admin = try? Connection(url: url, applicationName: "tests") else { return }
            let deadline = Date().addingTimeInterval(5)
            while Date() < deadline, (try? admin.query("SELECT 1 FROM pg_stat_activity WHERE pid = \(pid) AND state = 'active' AND query LIKE '%pg_sleep%'").count) != 1 {
                usleep(20_000)
            }
            _ = try? admin.execute("SELECT pg_cancel_backend(\(pid))")
        }
        canceller.start()
        do {
            try cancelled.execute("SELECT pg_sleep(5)")
            Issue.record("not cancelled")
        } catch {
            let failure = JobFailure(classifying: error)
            #expect(failure.status == .tempFail && failure.message.contains("cancelled from another session"), "\(failure.message)")
        }
    }

    @Test func unknownOrganizationExits64() throws {
        let db = try TestCluster.shared().makeDatabase()
        let result = try Jobs.run("inactivity-check", ["--org", "00000000-0000-4000-8000-000000000999"], database: db)
        #expect(result.status == 64)
        #expect(result.stderr.contains("--org 00000000-0000-4000-8000-000000000999: no such organization"))
    }

    /// `--now` ahead of the clock on a real run decided on tomorrow's facts and sent today: everybody inactive
    /// by then was pushed at once, and the decisions carried the future date. Only a dry run may look ahead; a
    /// real run as of an instant past (catching up after an outage) is allowed.
    @Test func aRealRunAsOfAnInstantThatHasNotComeExits64() throws {
        let db = try TestCluster.shared().makeDatabase()
        let f = try Fixtures(db, now: Date())
        let org = try f.organization("Org")
        let kari = try f.mentor(org, "Kari", lastActivityDaysAgo: 20)
        let tomorrowWeek = Jobs.iso(Date().addingTimeInterval(11 * 86_400))
        for job in ["inactivity-check", "assignment-follow-up", "overdue-digest", "impact-summary", "event-notify"] {
            let ahead = try Jobs.run(job, ["--now", tomorrowWeek], database: db)
            #expect(ahead.status == 64, "\(job): \(ahead.stderr)")
            // event-notify takes --now with --dry-run only, whichever way it points.
            let message = job == "event-notify" ? "--now is for --dry-run only" : "--now \(tomorrowWeek) is ahead of the clock: only a --dry-run may look ahead"
            #expect(ahead.stderr.contains(message), "\(job): \(ahead.stderr)")
        }
        #expect(try f.count("notifications") == 0)
        #expect(try f.count("decisions") == 0)
        let look = try Jobs.run("inactivity-check", ["--now", tomorrowWeek, "--dry-run"], database: db)
        #expect(look.status == 0, "\(look.stderr)")
        #expect(look.stdout.contains("Kari"), "the dry run looks ahead: \(look.stdout)")
        // --explain runs nothing either (bench-plan explains as of 08:30 Oslo, ahead of the clock before then).
        let explained = try Jobs.run("inactivity-check", ["--now", tomorrowWeek, "--explain"], database: db)
        #expect(explained.status == 0 && explained.stdout.contains("Execution Time"), "\(explained.stderr)")
        let anHourAgo = Jobs.iso(Date().addingTimeInterval(-3_600))
        let catchUp = try Jobs.run("inactivity-check", ["--now", anHourAgo], database: db)
        #expect(catchUp.status == 0, "\(catchUp.stderr)")
        #expect(try f.inbox(kari).count == 1, "a real run as of an hour ago")
        let decidedAt: Date = try f.connection.query("SELECT decided_at FROM decisions WHERE user_id = \(kari)").first!.decode(0)
        #expect(Jobs.iso(decidedAt) == anHourAgo)
    }

    @Test func unreachableDatabaseExits69WithAClearMessage() throws {
        let result = try Jobs.run("inactivity-check", ["--database-url", "postgresql:///nowhere?host=/nonexistent-socket-dir&connect_timeout=2"], database: nil)
        #expect(result.status == 69)
        #expect(result.stderr.contains("cannot connect to PostgreSQL"))
        #expect(result.stderr.contains("/nonexistent-socket-dir"))
        #expect(result.summary?["outcome"] as? String == "failed")
        #expect(result.summary?["exit_code"] as? Int == 69)
    }

    /// A login the server refuses or a database that does not exist will not change by trying again: 77 and
    /// 78, not 69, which a wrapper (and event-notify itself) retries for ever.
    @Test func aRefusedLoginExits77AndAMissingDatabase78() throws {
        let cluster = try TestCluster.shared()
        let refused = try Jobs.run("inactivity-check", ["--database-url", cluster.url(database: "postgres", user: "no_such_role")], database: nil)
        #expect(refused.status == 77, "stderr: \(refused.stderr)")
        #expect(refused.stderr.contains(#"role "no_such_role" does not exist"#) && refused.stderr.contains("the server refused the login"), "\(refused.stderr)")
        let missing = try Jobs.run("inactivity-check", ["--database-url", cluster.url(database: "no_such_database")], database: nil)
        #expect(missing.status == 78, "stderr: \(missing.stderr)")
        #expect(missing.stderr.contains(#"database "no_such_database" does not exist"#) && missing.stderr.contains("check the database name"), "\(missing.stderr)")
    }

    /// A password that is also a word of the server's answer ("role", "exist") was masked wherever it occurred:
    /// `FATAL:  *** "no_such_***" does not ***`, which told the password to whoever read it, and hid the
    /// refusal, so the run exited 69 (to be retried for ever) instead of 77. The same for a blank DATABASE_URL,
    /// read as a database named " " (69) instead of refused as empty (78).
    @Test(arguments: ["role", "exist", "a"])
    func aPasswordThatIsAWordOfTheAnswerIsNeitherMaskedInItNorHidesTheRefusal(password: String) throws {
        var components = URLComponents(string: try TestCluster.shared().url(database: "postgres", user: "no_such_role"))!
        components.queryItems = (components.queryItems ?? []) + [URLQueryItem(name: "password", value: password)]
        let refused = try Jobs.run("inactivity-check", ["--database-url", components.string!], database: nil)
        #expect(refused.status == 77, "stderr: \(refused.stderr)")
        // A quoted value that holds the password is still masked (the role name, when the password is "role").
        #expect(refused.stderr.contains(#"FATAL:  role ""#) && refused.stderr.contains(#"" does not exist (the server refused the login"#), "\(refused.stderr)")
        let blank = try Jobs.run("inactivity-check", ["--dry-run"], database: nil, environment: ["DATABASE_URL": " "])
        #expect(blank.status == 78, "stderr: \(blank.stderr)")
        #expect(blank.stderr.contains("DATABASE_URL is set but empty"), "\(blank.stderr)")
    }

    /// A service degraded batch after batch by a provider down all night: each batch's sentence carries its own
    /// counts, so none repeated another, and the run's message (its summary line, `job_runs.error`) grew by one
    /// per batch, to megabytes. Past 4 KB the later ones are counted, not kept; one said before is not said again.
    @Test func aRunsMessageStaysBoundedHoweverOftenItIsDegraded() {
        let run = JobRun(job: "event-notify", dryRun: false, asOf: Date(), logger: Logger(label: "test"))
        for batch in 1...2_000 { run.degrade(.unavailable, "push: 0 sent, \(batch) to retry; apns unavailable: connection refused") }
        run.degrade(.unavailable, "push: 0 sent, 1 to retry; apns unavailable: connection refused")
        let message = run.message ?? ""
        #expect(message.utf8.count < 4_200, "\(message.utf8.count) bytes")
        #expect(message.hasPrefix("push: 0 sent, 1 to retry; apns unavailable: connection refused; push: 0 sent, 2 to retry"))
        let kept = message.components(separatedBy: "apns unavailable").count - 1
        #expect(message.hasSuffix("; (and \(2_000 - kept) more not kept)"), "\(kept) kept: \(message.suffix(80))")
        #expect(run.status == .unavailable && run.outcome == "partial")
    }

    /// A full run waits for runs limited to some organizations only so long: then it ends with 75 (try again)
    /// saying why, and leaves the connection's lock timeout as it found it.
    @Test func aFullRunGivesUpWaitingForLimitedRunsWithTempFail() throws {
        let db = try TestCluster.shared().makeDatabase()
        let limited = try db.connect(), connection = try db.connect()
        try limited.execute("SELECT pg_advisory_lock_shared(hashtext('mentor-push:job:inactivity-check'))")
        let run = JobRun(job: "inactivity-check", dryRun: false, asOf: Date(), logger: Logger(label: "test"))
        // A statement timeout shorter than the wait (the jobs' default is 300 s, the wait 600): the wait is the lock's.
        try connection.execute("SET statement_timeout = '1s'")
        let settings: Query = "SELECT current_setting('lock_timeout') || ' ' || current_setting('statement_timeout')"
        let before: String = try connection.query(settings).first!.decode(0)
        let started = Date()
        do {
            _ = try run.claimExclusive(on: connection, wait: .seconds(3))
            Issue.record("the run went on while a limited run held the job")
        } catch let failure as JobFailure {
            #expect(failure.status == .tempFail)
            #expect(failure.message.contains("limited to some organizations (--org) were still in progress after 3 s: this run did nothing"), "\(failure)")
        }
        #expect(Date().timeIntervalSince(started) >= 2.9, "the whole wait")
        #expect(run.runID != nil, "on record while it waited (the envelope ends the row as failed)")
        let after: String = try connection.query(settings).first!.decode(0)
        #expect(after == before && after.hasSuffix(" 1s"), "\(after)")
        try limited.execute("SELECT pg_advisory_unlock_all()")
        #expect(try run.claimExclusive(on: connection, wait: .seconds(1)))
    }

    /// After a failover the URL may reach a standby, where every write fails with 25006: that was "a bug" (70),
    /// which wrappers do not retry. It is worth trying again (75), and the message says why.
    @Test func aReadOnlyDatabaseExits75() throws {
        let db = try TestCluster.shared().makeDatabase()
        let f = try Fixtures(db)
        let org = try f.organization("Org")
        try f.mentor(org, "Kari", lastActivityDaysAgo: 20)
        try f.connection.execute("DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET default_transaction_read_only = on', current_database()); END $$")
        let result = try Jobs.inactivityCheck(db, now: f.now)
        #expect(result.status == 75, "stderr: \(result.stderr)")
        #expect(result.stderr.contains("the database is read-only"), "\(result.stderr)")
    }

    @Test func passwordInTheURLNeverAppearsInTheMessage() throws {
        let result = try Jobs.run("inactivity-check", ["--database-url", "postgresql://someone:s3cret-pa55@127.0.0.1:1/db?connect_timeout=2"], database: nil)
        #expect(result.status == 69)
        #expect(!result.stderr.contains("s3cret-pa55"))
        #expect(!result.stdout.contains("s3cret-pa55"))
    }

    /// libpq quotes the string, or the piece that did not parse, in its message: for these that piece
    /// holds the password. Every executable opens its database the same way; each must redact it.
    @Test(arguments: [
        "postgresql://u:secret@[::1/db",
        "postgresql://u:secret%zz@/db",
        "postgresql://u@/db?password=secret%zz",
        "host=/nonexistent password=secret port",
        // Split by libpq where it sees fit, so the piece it quotes is part of the password.
        "host=/nonexistent password=my secret",
        "postgresql://u:secret/part@127.0.0.1:5432/db",
        "postgresql:/u:secret@h/db sslmode=require",
        // Values libpq refuses before trying a server: settings to fix, not a server to wait for.
        "postgresql://u@127.0.0.1:99999/db",
        "postgresql://u@127.0.0.1/db?sslmode=bogus",
        // One libpq reads only as it connects (it exited 69, which systemd retries for ever).
        "postgresql://u@127.0.0.1/db?connect_timeout=abc",
    ])
    func malformedURLExits78WithoutThePassword(url: String) throws {
        for job in ["migrate", "inactivity-check", "assignment-follow-up", "overdue-digest", "impact-summary", "push-deliver", "prune", "why"] {
            let user = job == "why" ? ["00000000-0000-4000-8000-000000000001"] : []
            let result = try Jobs.run(job, user + ["--database-url", url], database: nil)
            #expect(result.status == 78, "\(job): \(result.stderr)")
            #expect(result.stderr.contains("the database URL is malformed"), "\(job): \(result.stderr)")
            #expect(!result.stderr.contains("secret") && !result.stdout.contains("secret"), "\(job) printed the password: \(result.stderr)")
            #expect(result.summary?["exit_code"] as? Int == 78, "\(job)")
        }
    }

    /// Settings that are not the URL's text, refused for good: a PG* variable's value with no URL, a service that is
    /// not defined, startup options the server refuses. They exited 69 ("try again"), which systemd retries every two
    /// minutes for ever, and a PG* variable's value was blamed on "the database URL".
    @Test(arguments: [
        ([:], ["PGSERVICE": "no-such-service", "PGSERVICEFILE": "/nonexistent/pg_service.conf"]),
        ([:], ["PGSSLMODE": "bogus"]),
        // The same beside a URL that does not set it: it was "the database URL is malformed".
        (["url": true], ["PGSSLMODE": "bogus"]),
        (["url": true], ["PGCONNECT_TIMEOUT": "abc"]),
        (["url": true], ["PGOPTIONS": "-c bogus_param=1"]),
        (["url": true], ["PGOPTIONS": "-c work_mem=1"]),
        (["url": true], ["PGOPTIONS": "-c shared_buffers=1MB"]),
        (["url": true], ["PGOPTIONS": "-c transaction_read_only=maybe"]),
    ] as [([String: Bool], [String: String])])
    func connectionSettingsRefusedForGoodExit78NamingWhereToLook(url: [String: Bool], environment: [String: String]) throws {
        let database = url.isEmpty ? nil : try TestCluster.shared().makeDatabase(migrated: false)
        var environment = environment
        if database == nil { environment["DATABASE_URL"] = ProcessRunner.unset }
        for job in ["migrate", "inactivity-check", "push-deliver"] {
            let result = try Jobs.run(job, [], database: database, environment: environment)
            #expect(result.status == 78, "\(job): \(result.stderr)")
            #expect(result.stderr.contains("the connection settings were refused") && result.stderr.contains("PG* variables"), "\(job): \(result.stderr)")
            #expect(!result.stderr.contains("URL is malformed"), "\(job): \(result.stderr)")
            if database != nil, let variable = environment.keys.first(where: { ["PGSSLMODE", "PGCONNECT_TIMEOUT"].contains($0) }) {
                #expect(result.stderr.contains("\(variable) (not set in the URL)"), "names the variable: \(result.stderr)")
            }
        }
    }

    /// A value the URL itself sets is the URL's fault, whatever PG* variables are set beside it: the first check named
    /// any variable whose value stood in quotes in libpq's message (the server's address, a password equal to the
    /// refused value).
    @Test(arguments: [("connect_timeout=abc", "abc"), ("sslmode=prefer2", "prefer2"), ("sslmode=require1", "require1")])
    func aValueTheURLSetsIsBlamedOnTheURL(query: String, value: String) throws {
        let database = try TestCluster.shared().makeDatabase(migrated: false)
        let environment = ["PGHOST": "127.0.0.1", "PGAPPNAME": "prefer2", "PGPASSWORD": "require1", "DATABASE_URL": ProcessRunner.unset]
        let result = try Jobs.run("inactivity-check", ["--database-url", database.url + "&" + query], database: nil, environment: environment)
        #expect(result.status == 78, "\(result.stderr)")
        #expect(result.stderr.contains("the database URL is malformed"), "\(result.stderr)")
        for variable in environment.keys where variable.hasPrefix("PG") { #expect(!result.stderr.contains(variable), "\(result.stderr)") }
    }

    /// A password with an unencoded '@': libpq takes what follows it for the host and quotes that in its
    /// message. That part of the password is redacted too.
    @Test func aPasswordWithAnAtSignIsRedactedWhereLibpqTakesItForTheHost() throws {
        let result = try Jobs.run("inactivity-check", ["--database-url", "postgresql://u:pa55word@x7q@nonexistent.invalid/db?connect_timeout=2"], database: nil)
        #expect(result.status != 0)
        #expect(!result.stderr.contains("x7q@") && !result.stderr.contains("pa55word"), "\(result.stderr)")
        #expect(!result.stdout.contains("x7q@") && !result.stdout.contains("pa55word"), "\(result.stdout)")
    }

    /// What the redaction let through: a piece of one character (libpq quotes the piece it stopped at,
    /// however short) and, of a password holding a double quote, what followed the quote (`"***"cr%zz"`).
    @Test(arguments: [
        ("host=/nonexistent password=my s", ["\"s\""]),
        ("postgresql://u:x/y@127.0.0.1/db", ["\"x\""]),
        ("postgresql://u:se\"cr%zz@/db", ["cr%zz", "se\""]),
    ])
    func noPieceOfAPasswordIsPrinted(url: String, pieces: [String]) throws {
        let result = try Jobs.run("inactivity-check", ["--database-url", url], database: nil)
        #expect(result.status == 78, "\(result.stderr)")
        for piece in pieces {
            #expect(!result.stderr.contains(piece) && !result.stdout.contains(piece), "printed \(piece): \(result.stderr)")
        }
    }

    /// libpq's message on one line: its hint under a refused connection showed in the log as two U+FFFD
    /// ("Connection refused\u{FFFD}\u{FFFD}Is the server running…"), the log's mark for a line break.
    @Test func aRefusedConnectionIsReportedOnOneReadableLine() throws {
        let result = try Jobs.run("inactivity-check", ["--database-url", "postgresql://u@127.0.0.1:1/db?connect_timeout=2"], database: nil)
        #expect(result.status == 69, "\(result.stderr)")
        #expect(result.stderr.contains("Connection refused; Is the server running on that host"), "\(result.stderr)")
        #expect(!result.stderr.contains("\u{FFFD}"), "\(result.stderr)")
    }

    @Test func unmigratedDatabaseExits78AndNamesTheMigrateCommand() throws {
        let db = try TestCluster.shared().makeDatabase(migrated: false)
        let result = try Jobs.run("inactivity-check", [], database: db)
        #expect(result.status == 78)
        #expect(result.stderr.contains("has not been migrated"))
        #expect(result.stderr.contains("migrate --database-url"))
    }

    @Test func olderSchemaExits78() throws {
        let db = try TestCluster.shared().makeDatabase()
        let connection = try db.connect()
        try connection.execute("DELETE FROM schema_migrations")
        let result = try Jobs.run("inactivity-check", ["--dry-run"], database: db)
        #expect(result.status == 78)
        #expect(result.stderr.contains("schema is at version 0"))
    }

    /// A schema newer than the build, where a migration since changed what a statement reads: the statement
    /// failed as "a bug" (70). It is the deployment's mismatch: 78, naming both versions.
    @Test func aNewerSchemaThatChangedWhatAStatementReadsExits78() throws {
        let db = try TestCluster.shared().makeDatabase()
        let connection = try db.connect()
        let newer = Schema.requiredVersion + 1
        try connection.execute("INSERT INTO schema_migrations (version, name, checksum) VALUES (\(newer), 'from a later build', 'x')")
        try connection.execute("ALTER TABLE delivery_queue RENAME COLUMN lost_claims TO lost_claims_renamed")
        let result = try Jobs.run("push-deliver", ["--dry-run"], database: db)
        #expect(result.status == 78, "\(result.stderr)")
        #expect(result.stderr.contains("schema is at version \(newer), newer than this build's \(Schema.requiredVersion)"), "\(result.stderr)")
    }

    @Test func databaseURLFromTheEnvironmentIsUsed() throws {
        let db = try TestCluster.shared().makeDatabase()
        let result = try Jobs.run("inactivity-check", ["--dry-run"], database: nil, environment: ["DATABASE_URL": db.url])
        #expect(result.status == 0, "stderr: \(result.stderr)")
    }

    @Test func libpqConventionsApplyWithoutAURL() throws {
        let db = try TestCluster.shared().makeDatabase()
        // The PG* variables alone, as libpq reads them when no URL is given.
        guard let components = URLComponents(string: db.url),
              let host = components.queryItems?.first(where: { $0.name == "host" })?.value else {
            Issue.record("test database URL has no host: \(db.url)")
            return
        }
        let result = try Jobs.run("inactivity-check", ["--dry-run"], database: nil, environment: [
            "DATABASE_URL": ProcessRunner.unset, "PGHOST": host, "PGDATABASE": db.name, "PGUSER": "postgres",
        ])
        #expect(result.status == 0, "stderr: \(result.stderr)")
    }

    /// Year 0 (or a year 1 a job counts days back from) reached PostgreSQL as a date out of its range and ended
    /// the run as "a bug" (70): a bad flag (64), named, before anything is opened.
    @Test(arguments: ["0000-01-01", "0001-01-01", "1969-12-31T23:59:59Z", "9001-01-01"])
    func anInstantOutsideTheYearsAJobCanCountFromIsABadFlag(instant: String) throws {
        let user = "00000000-0000-4000-8000-000000000001"
        for (job, arguments) in [("inactivity-check", ["--dry-run", "--now", instant]), ("impact-summary", ["--now", instant]),
                                 ("why", [user, "--since", instant]), ("rules", ["--dry-run", "--set", "inactivity.threshold_days=7", "--now", instant])] {
            let result = try Jobs.run(job, arguments, database: nil)
            #expect(result.status == 64, "\(job): \(result.stderr)")
            #expect(result.stderr.contains("The value '\(instant)' is invalid for '--"), "\(job): \(result.stderr)")
        }
    }

    /// The developer tools took anything: fake-push listened on port 34463 for --port 99999 and crashed (132)
    /// on --threads 100000; push-bench crashed on --count -1 and reported "0 ok" for --window 0.
    @Test(arguments: [
        ("fake-push", ["--port", "99999"], "--port must be from 0 to 65535"),
        ("fake-push", ["--threads", "100000"], "--threads must be from 1 to 64"),
        ("fake-push", ["--latency", "nan"], "--latency must be from 0 to 60000"),
        // It exited 78, as for a configuration fault (operator review).
        ("fake-push", ["--initial-streams", "foo"], "--initial-streams must be a number from 1 to 10000, or widest"),
        ("push-bench", ["--count=-1"], "--count must be from 1"),
        ("push-bench", ["--window", "0"], "--window must be from 1 to 1000"),
    ])
    func aDeveloperToolsFlagOutOfRangeIsABadFlag(tool: String, arguments: [String], message: String) throws {
        let required = tool == "fake-push" ? ["--cert", "/nonexistent/cert.pem", "--key", "/nonexistent/key.pem"] : ["--endpoint", "https://127.0.0.1:1"]
        let result = try ProcessRunner.run(Paths.executable(tool), required + arguments)
        #expect(result.status == 64, "\(tool): \(result.stderr)")
        #expect(result.stderr.contains(message), "\(tool): \(result.stderr)")
    }

    @Test func helpListsTheSharedFlags() throws {
        let result = try Jobs.run("inactivity-check", ["--help"], database: nil)
        #expect(result.status == 0)
        for flag in ["--dry-run", "--format", "--now", "--org", "--database-url", "--explain"] {
            #expect(result.stdout.contains(flag))
        }
    }
}
