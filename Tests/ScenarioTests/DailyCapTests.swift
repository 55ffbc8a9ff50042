import Foundation
import Postgres
@testable import ScenarioEngine
import Testing
import TestSupport

/// The daily cap of non-critical pushes per user and local day, across scenarios: over it the
/// notification is still in the inbox (without a push, decided `capped`); a higher-priority push takes
/// the slot of a lower-priority one still waiting; four jobs at once never overshoot.
@Suite struct DailyCapTests {
    let db: TestDatabase
    let f: Fixtures
    let org: UUID
    let coordinator: UUID

    init() throws {
        db = try TestCluster.shared().makeDatabase()
        f = try Fixtures(db, now: Date())
        org = try f.organization("Org")
        // A time zone where it is around noon now, so that no run of the test straddles a local midnight.
        let offset = max(-12, min(14, 12 - Calendar(identifier: .gregorian).dateComponents(in: TimeZone(identifier: "UTC")!, from: f.now).hour!))
        let zone = offset == 0 ? "Etc/GMT" : offset > 0 ? "Etc/GMT-\(offset)" : "Etc/GMT+\(-offset)"
        try f.connection.execute("UPDATE organizations SET time_zone = \(zone) WHERE id = \(org)")
        try f.connection.execute("INSERT INTO organization_delivery_policies (organization_id, daily_push_cap) VALUES (\(org), 1)")
        coordinator = try f.user(org, "Linda", role: "coordinator")
    }

    /// A mentor quiet for 20 days (inactivity) with an assignment unacknowledged for 12 (the follow-up).
    func mentorOfTwoScenarios(_ name: String) throws -> UUID {
        let mentor = try f.mentor(org, name, lastActivityDaysAgo: 20)
        try f.connection.execute("SET mentor_push.events = 'off'")
        try f.assignment(org, mentor: mentor, coordinator: coordinator, title: "Ring Per", dispatchedDaysAgo: 12)
        try f.connection.execute("RESET mentor_push.events")
        return mentor
    }

    @discardableResult
    func run(_ job: String, _ extra: [String] = []) throws -> ProcessRunner.Result {
        let result = try Jobs.run(job, ["--now", Jobs.iso(f.now)] + extra, database: db)
        #expect(result.status == 0, "\(job): \(result.stderr)")
        return result
    }

    /// "category:state" of each of the user's deliveries, sorted.
    func pushes(_ user: UUID) throws -> [String] {
        try f.connection.query("""
            SELECT n.category || ':' || d.state FROM deliveries d JOIN notifications n ON n.id = d.notification_id
             WHERE n.user_id = \(user) ORDER BY 1
            """).map { try $0.decode(0) }
    }

    @Test func overTheCapTheNotificationIsInTheInboxWithoutAPush() throws {
        let kari = try mentorOfTwoScenarios("Kari")
        try run("assignment-follow-up")
        let plan = try run("inactivity-check", ["--dry-run"])
        #expect(plan.stdout.contains("daily cap 1 reached (1 today): CAPPED"), "\(plan.stdout)")
        // The plan's summary counts it as the run's does (it said nothing of it).
        #expect(plan.stdout.contains("; 1 over the daily cap (inbox only)"), "\(plan.stdout)")
        let json = try run("inactivity-check", ["--dry-run", "--format", "json"])
        #expect(json.summary?["capped"] as? Int == 1, "\(json.stdout)")
        let result = try run("inactivity-check")
        #expect(result.summary?["capped"] as? Int == 1, "\(result.stdout)")
        #expect(try f.inbox(kari).map(\.category).sorted() == ["assignment_follow_up", "inactivity"], "both in the inbox")
        #expect(try pushes(kari) == ["assignment_follow_up:pending"], "one push")
        #expect(try f.decisions(kari) == ["notified:notified", "notified:capped"])
        let detail: String = try f.connection.query("SELECT detail FROM decisions WHERE user_id = \(kari) AND reason = 'capped'").first!.decode(0)
        #expect(detail.contains("the daily cap of 1 non-critical pushes on"), "\(detail)")
    }

    /// A catch-up run (`--now` a day back, after the timer was down) decides as of then, but its push goes now:
    /// its daily slot is today's. Counted on yesterday, it left today's free, and a user capped at one got two.
    @Test func aCatchUpRunsPushTakesTheSlotOfTheDayItGoes() throws {
        let kari = try mentorOfTwoScenarios("Kari")
        let yesterday = f.now.addingTimeInterval(-86_400)
        let catchUp = try Jobs.run("inactivity-check", ["--now", Jobs.iso(yesterday)], database: db)
        #expect(catchUp.status == 0, "\(catchUp.stderr)")
        let days: [String] = try f.connection.query("""
            SELECT s.local_day::text || ' ' || (now() AT TIME ZONE o.time_zone)::date::text FROM daily_push_slots s
              JOIN users u ON u.id = s.user_id JOIN organizations o ON o.id = u.organization_id WHERE s.user_id = \(kari)
            """).map { try $0.decode(0) }
        #expect(days.count == 1 && days[0].split(separator: " ").count == 2 && days[0].split(separator: " ")[0] == days[0].split(separator: " ")[1],
                "the slot is today's: \(days)")
        try run("assignment-follow-up")
        let all = try pushes(kari)
        #expect(all.filter { $0.hasSuffix(":pending") }.count == 1, "one push today, the cap's one: \(all)")
    }

    /// A push quiet hours defer to tomorrow, where the user's one slot is taken already: the dry run said
    /// "counts against the daily cap of 1 on <tomorrow>" (it knew today's slots only), the run capped it. It
    /// says CAPPED now, as the run does.
    @Test func aDryRunShowsAPushDeferredIntoAFullDayAsCapped() throws {
        let kari = try mentorOfTwoScenarios("Kari")
        // Around noon in the organization's zone: a window from 10:00 to 01:00 defers to tomorrow.
        try f.connection.execute("INSERT INTO push_notification_configs (user_id, quiet_hours_start, quiet_hours_end) VALUES (\(kari), '10:00', '01:00')")
        try run("assignment-follow-up") // the higher priority: the reminder gets no slot of it
        #expect(try f.decisions(kari) == ["notified:deferred_quiet_hours"])
        let plan = try run("inactivity-check", ["--dry-run"])
        #expect(plan.stdout.contains("daily cap 1 reached (1 today): CAPPED"), "\(plan.stdout)")
        #expect(plan.stdout.contains("; 1 over the daily cap (inbox only)"), "\(plan.stdout)")
        let result = try run("inactivity-check")
        #expect(result.summary?["capped"] as? Int == 1, "\(result.stdout)")
        #expect(try f.decisions(kari) == ["notified:deferred_quiet_hours", "notified:capped"])
    }

    /// A catch-up run of the overdue digest (`--now` yesterday) made a push that expired at yesterday's end, so
    /// push-deliver could only mark it expired, and it took today's slot: today's digest was capped. It takes no
    /// slot now, and today's goes.
    @Test func aCatchUpPushThatExpiredBeforeItCouldGoTakesNoSlot() throws {
        _ = try mentorOfTwoScenarios("Kari")
        _ = try f.device(coordinator, provider: "apns")
        let yesterday = Jobs.iso(f.now.addingTimeInterval(-86_400))
        let plan = try Jobs.run("overdue-digest", ["--now", yesterday, "--dry-run"], database: db)
        #expect(plan.status == 0, "\(plan.stderr)")
        #expect(!plan.stdout.contains("daily cap") && !plan.stdout.contains("daily slot"), "\(plan.stdout)")
        let catchUp = try Jobs.run("overdue-digest", ["--now", yesterday], database: db)
        #expect(catchUp.status == 0, "\(catchUp.stderr)")
        #expect(try f.connection.query("SELECT count(*) FROM daily_push_slots WHERE user_id = \(coordinator)").first!.decode(0, as: Int.self) == 0)
        try run("overdue-digest")
        #expect(try f.decisions(coordinator) == ["notified:notified", "notified:notified"], "today's is not capped")
        #expect(try f.connection.query("SELECT count(*) FROM daily_push_slots WHERE user_id = \(coordinator)").first!.decode(0, as: Int.self) == 1)
    }

    /// A push that went out keeps its slot, also when its delivery was cancelled on the way (state `cancelled`,
    /// `sent_at` set): cancelling the notification's other delivery freed it, and a second push went out that day.
    @Test func aPushThatWentOutAfterItsCancelKeepsItsSlot() throws {
        let kari = try f.mentor(org, "Kari", lastActivityDaysAgo: 20, devices: 2)
        try run("inactivity-check")
        #expect(try pushes(kari) == ["inactivity:pending", "inactivity:pending"])
        // One of the two went out while the app cancelled it (as push-deliver's outcome write records it).
        try f.connection.execute("""
            WITH one AS (DELETE FROM delivery_queue WHERE delivery_id = (SELECT min(delivery_id) FROM delivery_queue) RETURNING delivery_id)
            UPDATE deliveries SET state = 'cancelled', sent_at = now() WHERE id IN (SELECT delivery_id FROM one)
            """)
        try f.connection.execute("UPDATE notifications SET read_at = now() WHERE user_id = \(kari)") // cancels the other
        #expect(try pushes(kari) == ["inactivity:cancelled", "inactivity:cancelled"])
        #expect(try f.count("daily_push_slots") == 1, "the slot of the push that went out is kept")
    }

    @Test func aHigherPriorityPushTakesTheSlotOfALowerOneStillWaiting() throws {
        let kari = try mentorOfTwoScenarios("Kari")
        try run("inactivity-check")
        #expect(try pushes(kari) == ["inactivity:pending"])
        // The plan's summary says what the run will do: displace the waiting push, not cap the follow-up.
        let plan = try run("assignment-follow-up", ["--dry-run", "--format", "json"])
        #expect(plan.summary?["capped"] == nil && plan.summary?["displaced"] as? Int == 1, "\(plan.stdout)")
        let result = try run("assignment-follow-up")
        #expect(result.summary?["displaced"] as? Int == 1, "\(result.stdout)")
        #expect(result.summary?["capped"] == nil, "\(result.stdout)")
        #expect(try pushes(kari) == ["assignment_follow_up:pending", "inactivity:cancelled"], "the follow-up (priority 20) beats inactivity (50)")
        let why: String = try f.connection.query("""
            SELECT d.last_error FROM deliveries d JOIN notifications n ON n.id = d.notification_id WHERE n.user_id = \(kari) AND d.state = 'cancelled'
            """).first!.decode(0)
        #expect(why == "capped: gave its daily slot to a higher-priority assignment_follow_up push")
        #expect(try f.count("daily_push_slots") == 1)
    }

    /// A higher-priority push cancelled by the recheck of its batch (its assignment acknowledged while the job
    /// decided) takes no slot: the waiting push it would have displaced still goes out. Both were cancelled,
    /// and the mentor got neither push.
    @Test func aPushCancelledAsItsBatchIsRecordedDisplacesNone() throws {
        let kari = try mentorOfTwoScenarios("Kari")
        try run("inactivity-check")
        #expect(try pushes(kari) == ["inactivity:pending"])
        let assignment: UUID = try f.connection.query("SELECT id FROM assignments WHERE mentor_id = \(kari)").first!.decode(0)
        let result = try Jobs.runDecidingWhile(db, f, "assignment-follow-up") {
            try f.connection.execute("INSERT INTO assignment_read_receipts (assignment_id) VALUES (\(assignment))")
        }
        #expect(result.status == 0, "\(result.stderr)")
        #expect(try pushes(kari) == ["assignment_follow_up:cancelled", "inactivity:pending"], "the reminder keeps its push")
        #expect(result.summary?["displaced"] == nil, "\(result.stdout)")
        let slots: [String] = try f.connection.query("SELECT scenario FROM daily_push_slots WHERE user_id = \(kari)").map { try $0.decode(0) }
        #expect(slots == ["inactivity"])
        let detail: String = try f.connection.query("""
            SELECT detail FROM decisions WHERE user_id = \(kari) AND scenario = 'assignment_follow_up'
            """).first!.decode(0)
        #expect(!detail.contains("took the daily slot"), "\(detail)")
    }

    /// A push-only notification (not listed in the inbox) that gives its slot away loses its push: it is then
    /// listed in the inbox, or the user would never see it at all.
    @Test func aPushOnlyNotificationThatGivesItsSlotAwayIsListedInTheInbox() throws {
        try f.connection.execute("INSERT INTO organization_category_channels (organization_id, category, channels) VALUES (\(org), 'inactivity', 'push_only')")
        let kari = try mentorOfTwoScenarios("Kari")
        try run("inactivity-check")
        let listed = { (category: String) throws -> Bool in
            try f.connection.query("SELECT in_inbox FROM notifications WHERE user_id = \(kari) AND category = \(category)").first!.decode(0)
        }
        #expect(try !listed("inactivity"), "push only, while its push waits")
        try run("assignment-follow-up")
        #expect(try pushes(kari) == ["assignment_follow_up:pending", "inactivity:cancelled"])
        #expect(try listed("inactivity"), "its push given up: in the inbox instead")
    }

    /// A push cancelled before it went out (its assignment acknowledged) gives its slot back: the day's next
    /// push is sent, not capped for a push that never was.
    @Test func aPushCancelledBeforeItWentOutGivesItsSlotBack() throws {
        let kari = try mentorOfTwoScenarios("Kari")
        try run("assignment-follow-up")
        #expect(try f.count("daily_push_slots") == 1)
        let assignment: UUID = try f.connection.query("SELECT id FROM assignments WHERE mentor_id = \(kari)").first!.decode(0)
        try f.acknowledge(assignment, daysAgo: 0)
        #expect(try pushes(kari) == ["assignment_follow_up:cancelled"])
        #expect(try f.count("daily_push_slots") == 0)
        let result = try run("inactivity-check")
        #expect(result.summary?["capped"] == nil, "\(result.stdout)")
        #expect(try pushes(kari) == ["assignment_follow_up:cancelled", "inactivity:pending"])
    }

    /// A push push-deliver has claimed may be on the phone already: cancelled then, it keeps its slot.
    @Test func aClaimedPushCancelledKeepsItsSlot() throws {
        let kari = try mentorOfTwoScenarios("Kari")
        try run("assignment-follow-up")
        try f.connection.execute("UPDATE delivery_queue SET lease_until = now() + interval '5 minutes'") // claimed
        let assignment: UUID = try f.connection.query("SELECT id FROM assignments WHERE mentor_id = \(kari)").first!.decode(0)
        try f.acknowledge(assignment, daysAgo: 0)
        #expect(try pushes(kari) == ["assignment_follow_up:cancelled"])
        #expect(try f.count("daily_push_slots") == 1, "it may have gone out")
        let result = try run("inactivity-check")
        #expect(result.summary?["capped"] as? Int == 1, "\(result.stdout)")
    }

    @Test func aPushAlreadySentKeepsItsSlotAndAnOrganizationMayReorder() throws {
        // This organization puts inactivity first: the follow-up is the one capped.
        try f.connection.execute("INSERT INTO organization_scenario_rules (organization_id, scenario, priority) VALUES (\(org), 'inactivity', 5)")
        let kari = try mentorOfTwoScenarios("Kari")
        try run("assignment-follow-up")
        try run("inactivity-check")
        #expect(try pushes(kari) == ["assignment_follow_up:cancelled", "inactivity:pending"])

        // A push that has gone out is never taken back, whatever its priority.
        let ola = try mentorOfTwoScenarios("Ola")
        try f.connection.execute("DELETE FROM organization_scenario_rules")
        try run("inactivity-check")
        try f.connection.execute("""
            WITH sent AS (
                UPDATE deliveries d SET state = 'sent', attempts = 1, updated_at = now() FROM notifications n
                 WHERE n.id = d.notification_id AND n.user_id = \(ola)
                RETURNING d.id
            )
            DELETE FROM delivery_queue WHERE delivery_id IN (SELECT id FROM sent)
            """)
        try run("assignment-follow-up")
        #expect(try pushes(ola) == ["inactivity:sent"])
        #expect(try f.decisions(ola) == ["notified:notified", "notified:capped"])
    }

    @Test func aPushClaimedByPushDeliverKeepsItsSlot() throws {
        let kari = try mentorOfTwoScenarios("Kari")
        try run("inactivity-check")
        // push-deliver has claimed it and may be sending it right now: it is no longer waiting.
        try f.connection.execute("UPDATE delivery_queue SET lease_until = now() + interval '5 minutes'")
        let result = try run("assignment-follow-up")
        #expect((result.summary?["displaced"] as? Int ?? 0) == 0, "\(result.stdout)")
        #expect(try pushes(kari) == ["inactivity:pending"])
        #expect(try f.decisions(kari) == ["notified:notified", "notified:capped"])

        // A claim that ran out leaves its lease behind: the push may have gone out, so it still keeps the slot.
        let ola = try mentorOfTwoScenarios("Ola")
        try run("inactivity-check")
        try f.connection.execute("""
            UPDATE delivery_queue q SET lease_until = now() - interval '1 minute'
              FROM deliveries d JOIN notifications n ON n.id = d.notification_id
             WHERE d.id = q.delivery_id AND n.user_id = \(ola)
            """)
        #expect((try run("assignment-follow-up").summary?["displaced"] as? Int ?? 0) == 0)
        #expect(try f.decisions(ola) == ["notified:notified", "notified:capped"])
        #expect(try pushes(ola) == ["inactivity:pending"])
    }

    @Test func aUserMayLowerTheCapButNotRaiseItAndCriticalPushesAreNotCounted() throws {
        let raiser = try mentorOfTwoScenarios("Raiser")
        try f.connection.execute("INSERT INTO push_notification_configs (user_id, daily_push_cap) VALUES (\(raiser), 10)")
        let lowerer = try mentorOfTwoScenarios("Lowerer")
        try f.connection.execute("INSERT INTO push_notification_configs (user_id, daily_push_cap) VALUES (\(lowerer), 0)")
        try run("inactivity-check")
        try run("assignment-follow-up")
        #expect(try pushes(raiser) == ["assignment_follow_up:pending", "inactivity:cancelled"], "the organization's cap of 1, not their 10")
        #expect(try pushes(lowerer) == [], "their own 0: no push")
        #expect(try f.inbox(lowerer).count == 2, "and both in the inbox")

        try f.connection.execute("UPDATE organization_delivery_policies SET critical_categories = '{assignment_follow_up}'")
        let critical = try mentorOfTwoScenarios("Critical")
        try f.connection.execute("INSERT INTO push_notification_configs (user_id, daily_push_cap) VALUES (\(critical), 0)")
        try run("assignment-follow-up")
        #expect(try pushes(critical) == ["assignment_follow_up:pending"], "a critical push is not capped, even at 0")
        #expect(try f.count("daily_push_slots") == 1, "nor counted")
    }

    /// Four jobs at once, each with a notification for every one of 40 users whose cap is 2: every user
    /// ends with exactly two pushes, the two of highest priority, and all four notifications in the inbox.
    @Test func fourConcurrentJobsNeverOvershootTheCap() throws {
        try f.connection.execute("UPDATE organization_delivery_policies SET daily_push_cap = 2")
        var mentors: [UUID] = []
        for index in 0..<40 {
            let mentor = try mentorOfTwoScenarios("Mentor \(index)")
            try f.impactSummary(mentor, year: 2025, computedDaysAgo: 0.1)
            try f.scope(org, coordinator: coordinator, mentor: mentor)
            mentors.append(mentor)
        }
        // A new assignment each (an event for event-notify), dispatched now.
        try f.connection.execute("""
            INSERT INTO assignments (organization_id, mentor_id, coordinator_id, title, dispatched_at, state, state_changed_at)
            SELECT \(org), id, \(coordinator), 'Ny oppgave', now(), 'active', now() FROM unnest(\(PostgresArray(mentors))::uuid[]) AS m(id)
            """)
        let jobs = [("inactivity-check", ["--now", Jobs.iso(f.now)]), ("assignment-follow-up", ["--now", Jobs.iso(f.now)]),
                    ("impact-summary", ["--now", Jobs.iso(f.now)]), ("event-notify", ["--once"])]
        // A gate that makes them meet: deliveries locked against writes (reads go on), so each job decides
        // and then waits to record. Released once all four wait, they record at the same moment.
        let gate = try db.connect()
        try gate.execute("BEGIN")
        try gate.execute("LOCK TABLE deliveries IN EXCLUSIVE MODE")
        let running = try jobs.map { job, arguments in
            try ProcessRunner.start(Paths.executable(job), arguments + ["--database-url", db.url])
        }
        let waiting = try f.waitForLockWaiters(4)
        let activity: String = try f.connection.query("""
            SELECT string_agg(application_name || ' ' || coalesce(wait_event_type, '-') || ' ' || coalesce(wait_event, '-') || ' ' || left(query, 50), '; ')
              FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND application_name <> 'tests'
            """).first!.decode(0)
        #expect(waiting == 4, "the four jobs all reached the gate: \(activity)")
        try gate.execute("COMMIT")
        for (index, process) in running.enumerated() {
            let result = try process.wait()
            #expect(result.status == 0, "\(jobs[index].0): \(result.stderr)")
        }
        for mentor in mentors {
            #expect(try f.inbox(mentor).count == 4)
            #expect(try pushes(mentor).filter { !$0.hasSuffix(":cancelled") } == ["assignment_follow_up:pending", "new_assignment:pending"])
        }
        let slots: Int = try f.connection.query("SELECT max(n) FROM (SELECT count(*) AS n FROM daily_push_slots GROUP BY user_id, local_day) s").first!.decode(0)
        #expect(slots == 2)
    }

    @Test func slotsGoByPriorityWithinABatchAndOnlyWaitingLowerOnesGiveWay() {
        let user = UUID()
        func request(_ index: Int, priority: Int) -> DailySlots.Request {
            DailySlots.Request(index: index, user: user, slot: DailySlot(localDay: "2026-11-24", cap: 2, priority: priority, scenario: "s", takenWhenPlanned: nil))
        }
        func taken(priority: Int, waiting: Bool) -> DailySlots.Taken {
            DailySlots.Taken(notificationID: UUID(), user: user, localDay: "2026-11-24", priority: priority, scenario: "t", waiting: waiting)
        }
        // Three in one batch for a cap of 2: the two of highest priority.
        #expect(DailySlots.allocate([request(0, priority: 90), request(1, priority: 10), request(2, priority: 50)], taken: []).granted == [1, 2])
        // Full with a sent 90 and a waiting 60: a 50 takes the 60's slot, a 70 takes nothing.
        let sent = taken(priority: 90, waiting: false), waiting = taken(priority: 60, waiting: true)
        let allocation = DailySlots.allocate([request(0, priority: 70), request(1, priority: 50)], taken: [sent, waiting])
        #expect(allocation.granted == [1])
        #expect(allocation.displaced.map(\.victim) == [waiting])
        // Equal priority never displaces.
        #expect(DailySlots.allocate([request(0, priority: 60)], taken: [sent, waiting]).granted.isEmpty)
    }
}
