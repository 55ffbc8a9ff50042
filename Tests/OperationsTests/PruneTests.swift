import Foundation
import Postgres
import Testing
import TestSupport

/// `prune` end to end: rows on both sides of each retention, written with their ages, then the built
/// executable, and what is left in the database.
@Suite struct PruneTests {
    let db: TestDatabase
    let f: Fixtures
    let user: UUID
    let run: Int

    init() throws {
        db = try TestCluster.shared().makeDatabase()
        f = try Fixtures(db, now: Date())
        let org = try f.organization("Org")
        user = try f.mentor(org, "Kari", lastActivityDaysAgo: 1, devices: 0)
        run = try PruneTests.jobRun(f, daysAgo: 1)
    }

    // MARK: - Rows of a given age

    func jobRun(daysAgo days: Double) throws -> Int {
        try PruneTests.jobRun(f, daysAgo: days)
    }

    static func jobRun(_ f: Fixtures, daysAgo days: Double, outcome: String = "ok") throws -> Int {
        try f.connection.query("""
            INSERT INTO job_runs (job, started_at, finished_at, as_of, outcome) VALUES ('inactivity-check', \(f.daysAgo(days)), \(f.daysAgo(days)), \(f.daysAgo(days)), \(outcome))
            RETURNING id
            """).first!.decode(0)
    }

    @discardableResult
    func decision(daysAgo days: Double, run: Int? = nil, notification: UUID? = nil) throws -> Int {
        try f.connection.query("""
            INSERT INTO decisions (job_run_id, scenario, user_id, outcome, reason, notification_id, decided_at)
            VALUES (\(run ?? self.run), 'inactivity', \(user), \(notification == nil ? "suppressed" : "notified"), 'paused', \(notification), \(f.daysAgo(days)))
            RETURNING id
            """).first!.decode(0)
    }

    func notification(daysAgo days: Double, readDaysAgo: Double? = nil, deletedDaysAgo: Double? = nil, expiredDaysAgo: Double? = nil,
                      run: Int? = nil) throws -> UUID {
        try f.connection.query("""
            INSERT INTO notifications (user_id, category, title, body, created_at, read_at, deleted_at, expires_at, dedupe_key, job_run_id)
            VALUES (\(user), 'inactivity', 't', 'b', \(f.daysAgo(days)), \(readDaysAgo.map(f.daysAgo)), \(deletedDaysAgo.map(f.daysAgo)),
                    \(expiredDaysAgo.map(f.daysAgo)), \(UUID().uuidString), \(run ?? self.run))
            RETURNING id
            """).first!.decode(0)
    }

    @discardableResult
    func delivery(_ notification: UUID, token: Int? = nil, state: String = "sent", eventDaysAgo: [Double] = []) throws -> Int {
        let token = try token ?? f.device(user).id
        let id: Int = try f.connection.query("""
            WITH d AS (
                INSERT INTO deliveries (notification_id, device_token_id, state, attempts) VALUES (\(notification), \(token), \(state), 1) RETURNING id, state
            ), queued AS (
                INSERT INTO delivery_queue (delivery_id, provider)
                SELECT d.id, t.provider FROM d JOIN device_tokens t ON t.id = \(token) WHERE d.state IN ('pending', 'retrying')
            )
            SELECT id FROM d
            """).first!.decode(0)
        for days in eventDaysAgo { try event(id, daysAgo: days) }
        return id
    }

    func event(_ delivery: Int, daysAgo days: Double) throws {
        try f.connection.execute("INSERT INTO delivery_events (delivery_id, event, attempt, at) VALUES (\(delivery), 'sent', 1, \(f.daysAgo(days)))")
    }

    func retiredToken(daysAgo days: Double) throws -> Int {
        let device = try f.device(user)
        try f.connection.execute("UPDATE device_tokens SET retired_at = \(f.daysAgo(days)), retired_reason = 'Unregistered' WHERE id = \(device.id)")
        return device.id
    }

    func exists(_ table: StaticString, _ id: some PostgresEncodable) throws -> Bool {
        try f.connection.query("SELECT count(*) FROM \(sql: table) WHERE id = \(id)").first!.decode(0, as: Int.self) == 1
    }

    func prune(_ arguments: [String] = [], environment: [String: String] = [:]) throws -> ProcessRunner.Result {
        try Jobs.run("prune", arguments, database: db, environment: environment)
    }

    func deleted(_ result: ProcessRunner.Result, _ key: String = "deleted") -> [String: Int] {
        (result.summary?[key] as? [String: Int]) ?? [:]
    }

    // MARK: - The rows of every rule, on both sides of its retention

    struct Rows {
        var oldDecision = 0, youngDecision = 0
        var readOld = UUID(), unreadOld = UUID(), deletedOld = UUID(), readYoung = UUID(), openOld = UUID(), expired = UUID(),
            expiredYesterday = UUID(), youngEventOld = UUID()
        var readOldDecision = 0, readOldDelivery = 0, unreadOldDelivery = 0
        var retiredFree = 0, retiredReferenced = 0, retiredRecently = 0, active = 0
        var oldRun = 0, oldRunReferenced = 0, youngRun = 0
    }

    func rows() throws -> Rows {
        var r = Rows()
        r.oldDecision = try decision(daysAgo: 100)
        r.youngDecision = try decision(daysAgo: 10)

        r.readOld = try notification(daysAgo: 40, readDaysAgo: 39)
        r.readOldDecision = try decision(daysAgo: 40, notification: r.readOld)
        r.readOldDelivery = try delivery(r.readOld, eventDaysAgo: [40, 39])
        r.unreadOld = try notification(daysAgo: 40)
        r.unreadOldDelivery = try delivery(r.unreadOld, eventDaysAgo: [200, 100]) // the 200-day event goes by the events rule
        r.deletedOld = try notification(daysAgo: 40, deletedDaysAgo: 35)
        r.readYoung = try notification(daysAgo: 10, readDaysAgo: 9)
        r.openOld = try notification(daysAgo: 40, readDaysAgo: 39)
        try delivery(r.openOld, state: "retrying", eventDaysAgo: [39])
        r.expired = try notification(daysAgo: 12, expiredDaysAgo: 10)
        r.expiredYesterday = try notification(daysAgo: 3, expiredDaysAgo: 1)
        r.youngEventOld = try notification(daysAgo: 40, readDaysAgo: 39)
        try delivery(r.youngEventOld, eventDaysAgo: [3]) // settled only three days ago: its events are still protected

        r.retiredFree = try retiredToken(daysAgo: 40)
        r.retiredReferenced = try retiredToken(daysAgo: 40)
        try delivery(r.unreadOld, token: r.retiredReferenced)
        r.retiredRecently = try retiredToken(daysAgo: 10)
        r.active = try f.device(user).id

        r.oldRun = try jobRun(daysAgo: 200)
        r.oldRunReferenced = try jobRun(daysAgo: 200)
        try decision(daysAgo: 10, run: r.oldRunReferenced)
        r.youngRun = try jobRun(daysAgo: 10)
        return r
    }

    /// What `rows()` leaves for deletion under the default settings.
    let expected = ["decisions": 1, "notifications": 3, "deliveries": 1, "delivery_events": 3, "device_tokens": 1, "job_runs": 1,
                    "device_token_values": 1, "daily_push_slots": 0]

    @Test func eachRuleDeletesWhatIsPastItsRetentionAndKeepsTheRest() throws {
        let r = try rows()
        let result = try prune()
        #expect(result.status == 0, "stderr: \(result.stderr)")
        #expect(deleted(result) == expected, "\(result.stdout)")

        #expect(try !exists("decisions", r.oldDecision))
        #expect(try exists("decisions", r.youngDecision))
        // A pruned notification goes with its deliveries and events; its decision stays, unlinked.
        for gone in [r.readOld, r.deletedOld, r.expired] { #expect(try !exists("notifications", gone)) }
        #expect(try !exists("deliveries", r.readOldDelivery))
        let unlinked = try f.connection.query("SELECT notification_id IS NULL, dedupe_key FROM decisions WHERE id = \(r.readOldDecision)").first!
        #expect(try unlinked.decode(0, as: Bool.self))
        for kept in [r.unreadOld, r.readYoung, r.openOld, r.expiredYesterday, r.youngEventOld] { #expect(try exists("notifications", kept)) }
        let openState: String = try f.connection.query("SELECT state FROM deliveries WHERE notification_id = \(r.openOld)").first!.decode(0)
        #expect(openState == "retrying", "a notification with a push still open is never deleted")
        // The events rule: the 200-day event goes, the 100-day one and the delivery stay.
        let ages: [Int] = try f.connection.query("""
            SELECT (extract(epoch FROM now() - at) / 86400)::int FROM delivery_events WHERE delivery_id = \(r.unreadOldDelivery)
            """).map { try $0.decode(0) }
        #expect(ages == [100])

        #expect(try !exists("device_tokens", r.retiredFree))
        for kept in [r.retiredReferenced, r.retiredRecently, r.active] { #expect(try exists("device_tokens", kept)) }
        // A retired token a kept delivery still references keeps its row, not the device's identifier.
        let values: [Int: String] = Dictionary(uniqueKeysWithValues: try f.connection.query("""
            SELECT id, token FROM device_tokens WHERE id = ANY(\(PostgresArray([r.retiredReferenced, r.retiredRecently, r.active]))::bigint[])
            """).map { (try $0.decode(0, as: Int.self), try $0.decode(1, as: String.self)) })
        #expect(values[r.retiredReferenced] == "pruned:\(r.retiredReferenced)")
        #expect(values[r.retiredRecently]?.hasPrefix("pruned:") == false)
        #expect(values[r.active]?.hasPrefix("pruned:") == false)
        // `why` says the value was erased; it showed its tail, "…ned:<id>", as if it were a token's.
        let story = try Jobs.run("why", [user.uuidString.lowercased()], database: db)
        #expect(story.stdout.contains("device \(r.retiredReferenced) apns (value erased by prune)") && !story.stdout.contains("ned:"), "\(story.stdout)")
        #expect(try !exists("job_runs", r.oldRun))
        for kept in [r.oldRunReferenced, r.youngRun, run] { #expect(try exists("job_runs", kept)) }

        let summary = try #require(result.summary)
        #expect(summary["job"] as? String == "prune")
        #expect(summary["outcome"] as? String == "ok")
        let runID = try #require(summary["run_id"] as? Int)
        let recorded: String = try f.connection.query("SELECT outcome || ' ' || (counts->'deleted'->>'notifications') FROM job_runs WHERE id = \(runID)").first!.decode(0)
        #expect(recorded == "ok 3")

        let again = try prune()
        let second = deleted(again)
        #expect(!second.isEmpty && second.values.allSatisfy { $0 == 0 }, "a second run finds nothing more: \(second)")
    }

    /// A daily push slot counts only toward its own local day's cap: one a week past goes, though its
    /// notification (a record kept for ever) stays; today's and yesterday's stay.
    /// A push-only notification (never listed in the inbox, so never read or deleted there) whose push has
    /// finished was kept for ever, with its deliveries and its run: it goes after the inbox's retention like a
    /// read one. One whose push still waits stays, and so does a young one.
    @Test func aPushOnlyNotificationGoesOnceItsPushHasFinished() throws {
        func pushOnly(daysAgo days: Double, state: String) throws -> UUID {
            let id = try notification(daysAgo: days)
            // Not an inactivity reminder: the user's latest is kept whatever its age.
            try f.connection.execute("UPDATE notifications SET in_inbox = false, category = 'new_assignment' WHERE id = \(id)")
            try delivery(id, state: state)
            return id
        }
        let pushed = try pushOnly(daysAgo: 40, state: "sent")
        let waiting = try pushOnly(daysAgo: 40, state: "pending")
        let young = try pushOnly(daysAgo: 10, state: "sent")
        let result = try prune()
        #expect(result.status == 0, "\(result.stderr)")
        #expect(try !exists("notifications", pushed))
        #expect(try exists("notifications", waiting), "its push still waits")
        #expect(try exists("notifications", young))
    }

    /// The dry run counted a run as deleted whose only decision the real run keeps (old, but written after the
    /// first decision young enough to stay, where the real run's batches stop): it says what the run does.
    @Test func theDryRunKeepsTheRunsOfDecisionsTheRealRunKeeps() throws {
        let oldRun = try jobRun(daysAgo: 200)
        try decision(daysAgo: 10)                // young: the real run's batches stop below it
        try decision(daysAgo: 100, run: oldRun)  // old, written after it: kept, and its run with it
        let plan = try prune(["--dry-run"])
        #expect(plan.status == 0, "\(plan.stderr)")
        let real = try prune()
        #expect(real.status == 0, "\(real.stderr)")
        #expect(try exists("job_runs", oldRun))
        #expect(deleted(plan, "would_delete")["job_runs"] == deleted(real)["job_runs"], "\(plan.stdout) \(real.stdout)")
        #expect(deleted(plan, "would_delete")["decisions"] == deleted(real)["decisions"])
    }

    @Test func dailyPushSlotsOfDaysLongPastGo() throws {
        let kept = try notification(daysAgo: 400, readDaysAgo: 399)
        try f.connection.execute("UPDATE notifications SET dedupe_key = 'milestone:' || id WHERE id = \(kept)") // kept for ever
        let today = try notification(daysAgo: 0)
        let yesterday = try notification(daysAgo: 1)
        for (id, days) in [(kept, 400), (today, 0), (yesterday, 1)] {
            try f.connection.execute("""
                INSERT INTO daily_push_slots (notification_id, user_id, local_day, priority, scenario)
                VALUES (\(id), \(user), current_date - \(days)::int, 50, 'inactivity')
                """)
        }
        let dry = try prune(["--dry-run"])
        #expect(deleted(dry, "would_delete")["daily_push_slots"] == 1, "\(dry.stdout)")
        let result = try prune(["--batch-size", "1"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(deleted(result)["daily_push_slots"] == 1)
        let left: [UUID] = try f.connection.query("SELECT notification_id FROM daily_push_slots ORDER BY local_day").map { try $0.decode(0) }
        #expect(left == [yesterday, today])
        #expect(try exists("notifications", kept), "the record itself stays")
    }

    /// The last batch of an age rule stops at the first row young enough to stay: it read every younger row
    /// looking for more (no index on the time), which at scale timed out every night. Counted by what the
    /// prune process read from delivery_events: 20,000 young rows behind 3 old ones.
    @Test func anAgeRuleReadsNoneOfTheYoungerRows() throws {
        let kept = try delivery(try notification(daysAgo: 1))
        try f.connection.execute("""
            INSERT INTO delivery_events (delivery_id, event, attempt, at) SELECT \(kept), 'sent', 1, now() - interval '400 days' FROM generate_series(1, 3)
            """)
        try f.connection.execute("""
            INSERT INTO delivery_events (delivery_id, event, attempt, at) SELECT \(kept), 'sent', 1, now() FROM generate_series(1, 20000)
            """)
        try f.connection.execute("ANALYZE delivery_events")
        func read() throws -> Int {
            try f.connection.execute("SELECT pg_stat_clear_snapshot()")
            return try f.connection.query("""
                SELECT coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0) FROM pg_stat_user_tables WHERE relname = 'delivery_events'
                """).first!.decode(0)
        }
        let before = try read()
        let result = try prune(["--batch-size", "2"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(deleted(result)["delivery_events"] == 3)
        #expect(try f.connection.query("SELECT count(*) FROM delivery_events").first!.decode(0, as: Int.self) == 20_000)
        var used = try read() - before
        for _ in 0..<50 where used == 0 { usleep(100_000); used = try read() - before } // the statistics arrive after the process ends
        #expect(used > 0, "the statistics arrived")
        #expect(used < 1_000, "prune read \(used) rows of delivery_events to delete 3")
    }

    /// A decision dated ahead of the clock (a run with `--now` in the future, which releases before stop 23
    /// allowed) held every later decision from pruning until its date had come and gone: the age rule stops
    /// below the first row that stays. It stays itself; the old ones after it go, in the dry run's count too.
    @Test func aDecisionDatedAheadOfTheClockDoesNotHoldBackTheOnesAfterIt() throws {
        let early = try decision(daysAgo: 500)
        let ahead = try decision(daysAgo: -365)
        let old = try (0..<3).map { _ in try decision(daysAgo: 400) }
        let young = try decision(daysAgo: 1)
        let dry = try prune(["--dry-run"])
        #expect(dry.status == 0, "stderr: \(dry.stderr)")
        #expect(deleted(dry, "would_delete")["decisions"] == 4, "\(dry.stdout)")
        let result = try prune()
        #expect(result.status == 0, "stderr: \(result.stderr)")
        #expect(deleted(result)["decisions"] == 4, "\(result.stdout)")
        #expect(try !exists("decisions", early) && old.allSatisfy { try !exists("decisions", $0) })
        #expect(try exists("decisions", ahead) && exists("decisions", young))
    }

    @Test func dryRunReportsWhatARunWouldDeleteAndDeletesNothing() throws {
        _ = try rows()
        let before = try f.fingerprint()
        let dry = try prune(["--dry-run"])
        #expect(dry.status == 0, "stderr: \(dry.stderr)")
        #expect(try f.fingerprint() == before, "--dry-run deletes nothing and records no run")
        #expect(deleted(dry, "would_delete") == expected)
        #expect(dry.summary?["dry_run"] as? Bool == true)
        #expect(dry.stdout.contains("prune: would delete 3 notifications"))
        #expect(dry.stdout.contains("prune: would delete 1 job runs"))

        let real = try prune()
        #expect(deleted(real) == deleted(dry, "would_delete"), "the dry run counted what the run then deleted")
    }

    @Test func batchesAreBoundedAndAllAreTaken() throws {
        for _ in 0..<5 { try decision(daysAgo: 100) }
        let result = try prune(["--batch-size", "2"])
        #expect(result.status == 0, "stderr: \(result.stderr)")
        #expect(deleted(result)["decisions"] == 5)
        #expect(result.summary?["batches"] as? Int == 3, "2 + 2 + 1")
        #expect(try f.count("decisions") == 0)
    }

    @Test func sigtermStopsBetweenBatchesAndRecordsWhatWasDeleted() throws {
        try f.connection.execute("""
            INSERT INTO decisions (job_run_id, scenario, user_id, outcome, reason, decided_at)
            SELECT \(run), 'inactivity', \(user), 'suppressed', 'paused', now() - interval '100 days' FROM generate_series(1, 20000)
            """)
        let running = try ProcessRunner.start(Paths.executable("prune"), ["--database-url", db.url, "--batch-size", "1"])
        let deadline = Date().addingTimeInterval(30)
        while try f.count("decisions") > 19_990 && Date() < deadline { usleep(10_000) }
        kill(running.pid, SIGTERM)
        let result = try running.wait()
        #expect(result.signal == SIGTERM, "stderr: \(result.stderr)")
        let summary = try #require(result.summary)
        #expect(summary["outcome"] as? String == "stopped")
        #expect(summary["stopped_by"] as? String == "SIGTERM")
        let deleted = try #require(deleted(result)["decisions"])
        #expect(deleted > 0 && deleted < 20_000, "stopped part way")
        #expect(try f.count("decisions") == 20_000 - deleted, "the summary counts exactly what went")
        let runID = try #require(summary["run_id"] as? Int)
        let outcome: String = try f.connection.query("SELECT outcome FROM job_runs WHERE id = \(runID)").first!.decode(0)
        #expect(outcome == "stopped")
    }

    /// The batches that committed before a failure are gone: the summary and the run's row say so. A rule cut
    /// off (here by a lock) is left for the next run, and the rules after it go on: one slow rule skipped them all.
    /// A lock held elsewhere is given up on after a few seconds (it waited out the statement timeout, 300 s by
    /// default, holding its batch's rows).
    @Test func aRunThatFailsPartWayReportsWhatItDeleted() throws {
        for _ in 0..<3 { try decision(daysAgo: 100) }
        let oldRun = try jobRun(daysAgo: 200)
        // Another session holds device_tokens: the decisions go, the retired-token rules give up on the lock.
        let blocker = try db.connect()
        try blocker.execute("BEGIN")
        try blocker.execute("LOCK TABLE device_tokens IN ACCESS EXCLUSIVE MODE")
        let started = Date()
        let result = try prune(["--batch-size", "1"])
        try blocker.execute("ROLLBACK")
        #expect(Date().timeIntervalSince(started) < 60, "given up on the lock, not waited out the statement timeout")
        #expect(result.stderr.contains("55P03"), "\(result.stderr)")
        #expect(result.status == 75, "stderr: \(result.stderr)")
        #expect(try f.count("decisions") == 0)
        #expect(deleted(result)["decisions"] == 3, "\(result.stdout)")
        #expect(try !exists("job_runs", oldRun), "the last rule ran all the same")
        #expect(result.stderr.contains("device_tokens: ") && result.stderr.contains("the rules after it go on"), "\(result.stderr)")
        #expect(result.summary?["batches"] as? Int == 4)
        let runID = try #require(result.summary?["run_id"] as? Int)
        let recorded: String = try f.connection.query("SELECT counts::text FROM job_runs WHERE id = \(runID)").first!.decode(0)
        #expect(recorded.contains(#""decisions": 3"#) || recorded.contains(#""decisions":3"#), "\(recorded)")
    }

    /// What the scenarios' own rules read stays: a once-ever notification (its dedupe key is the only record
    /// that it was said) and each user's latest inactivity reminder (the next one is timed from it).
    @Test func theRecordsTheScenariosRulesReadAreKept() throws {
        let olderReminder = try notification(daysAgo: 100, readDaysAgo: 99)
        let latestReminder = try notification(daysAgo: 45, readDaysAgo: 40)
        let followUp: UUID = try f.connection.query("""
            INSERT INTO notifications (user_id, category, title, body, created_at, read_at, dedupe_key, job_run_id)
            VALUES (\(user), 'assignment_follow_up', 't', 'b', \(f.daysAgo(45)), \(f.daysAgo(40)), \("assignment_follow_up:" + UUID().uuidString.lowercased()), \(run))
            RETURNING id
            """).first!.decode(0)
        let result = try prune()
        #expect(result.status == 0, "stderr: \(result.stderr)")
        #expect(try !exists("notifications", olderReminder))
        #expect(try exists("notifications", latestReminder))
        #expect(try exists("notifications", followUp))
        #expect(deleted(result)["notifications"] == 1)
    }

    @Test func settingsComeFromFlagsThenTheEnvironment() throws {
        try decision(daysAgo: 40)
        let kept = try prune(["--dry-run"])
        #expect(deleted(kept, "would_delete")["decisions"] == 0)
        let fromEnvironment = try prune(["--dry-run"], environment: ["PRUNE_DECISIONS_DAYS": "30"])
        #expect(deleted(fromEnvironment, "would_delete")["decisions"] == 1)
        #expect((fromEnvironment.summary?["settings"] as? [String: Int])?["decisions_days"] == 30)
        let flagWins = try prune(["--dry-run", "--decisions-days", "60"], environment: ["PRUNE_DECISIONS_DAYS": "30"])
        #expect(deleted(flagWins, "would_delete")["decisions"] == 0)
    }

    @Test func badSettingsExitWithAMessage() throws {
        let short = try prune(["--events-days", "3"])
        #expect(short.status == 64)
        #expect(short.stderr.contains("--events-days must be from 7"))
        let zero = try prune(["--batch-size", "0"])
        #expect(zero.status == 64)
        let malformed = try prune([], environment: ["PRUNE_BATCH_SIZE": "lots"])
        #expect(malformed.status == 78)
        #expect(malformed.stderr.contains("PRUNE_BATCH_SIZE must be a whole number"))
    }

    // MARK: - delivery_events: append-only but for retention

    @Test func deliveryEventsRefuseUpdateAndDeleteOutsideRetention() throws {
        let n = try notification(daysAgo: 300, readDaysAgo: 300)
        let d = try delivery(n, eventDaysAgo: [300, 2])
        let c = f.connection

        #expect(throws: PostgresError.self) { try c.execute("DELETE FROM delivery_events WHERE at < now() - interval '100 days'") }
        #expect(throws: PostgresError.self) { try c.execute("DELETE FROM delivery_events WHERE false") }
        #expect(throws: PostgresError.self) { try c.execute("UPDATE delivery_events SET detail = 'edited'") }
        do {
            try c.execute("DELETE FROM delivery_events")
            Issue.record("a plain DELETE went through")
        } catch let error as PostgresError {
            #expect("\(error)".contains("delivery_events is append-only"))
        }
        // Retention's way: only inside a transaction that says so, never for an UPDATE, never for a young row.
        try c.transaction {
            try c.execute("SET LOCAL mentor_push.retention = 'on'")
            #expect(throws: PostgresError.self) { try c.execute("UPDATE delivery_events SET detail = 'edited'") }
        }
        #expect(throws: PostgresError.self) {
            try c.transaction {
                try c.execute("SET LOCAL mentor_push.retention = 'on'")
                try c.execute("DELETE FROM delivery_events WHERE delivery_id = \(d)")
            }
        }
        let old = try c.transaction {
            try c.execute("SET LOCAL mentor_push.retention = 'on'")
            return try c.execute("DELETE FROM delivery_events WHERE at < now() - interval '100 days'")
        }
        #expect(old == 1)
        // SET LOCAL ended with that transaction.
        #expect(throws: PostgresError.self) { try c.execute("DELETE FROM delivery_events") }
        #expect(try f.count("delivery_events") == 1)

        // And after prune has run, the protection still holds. (This old row is written after a younger one, as
        // only a hand-written row can be: prune's age rules stop at the first row young enough to stay, so it
        // waits until the rows below it go.)
        try event(d, daysAgo: 250)
        #expect(deleted(try prune(["--dry-run"]), "would_delete")["delivery_events"] == 0, "the dry run counts as the run takes")
        let result = try prune()
        #expect(deleted(result)["delivery_events"] == 0)
        #expect(throws: PostgresError.self) { try c.execute("DELETE FROM delivery_events") }
        #expect(try f.count("delivery_events") == 2)
    }
}
