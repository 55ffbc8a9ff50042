import Foundation
import JobKit
import Postgres
import Scenarios
import ScenarioEngine
import Testing
import TestSupport

/// What the engine gives every scenario: policies that join without touching a scenario, one run
/// envelope with a job_runs row for every executable, abandoned runs closed, unknown settings refused.
@Suite struct EngineTests {
    let db: TestDatabase
    let f: Fixtures

    init() throws {
        db = try TestCluster.shared().makeDatabase()
        f = try Fixtures(db)
    }

    /// A policy of a test's own: nobody called "Do Not Disturb" is told anything.
    struct NameBlock: Policy {
        static let blocked = SuppressionReason("blocked_by_test_policy")
        var reasons: [SuppressionReason] { [NameBlock.blocked] }
        func screen(_ c: PolicyContext) -> Suppression? {
            c.recipient.displayName == "Do Not Disturb" ? Suppression(NameBlock.blocked, "blocked") : nil
        }
        func shape(_ draft: inout NotificationDraft, _ c: PolicyContext) -> Suppression? {
            draft.title = "[policy] " + draft.title
            return nil
        }
    }

    /// A scenario whose query finds every candidate twice: two candidates that make one notification (two
    /// events of one change, say) in one batch.
    struct TwiceOver: Scenario {
        let inner = InactivityCheck()
        var key: String { inner.key }
        var jobName: String { inner.jobName }
        var abstract: String { inner.abstract }
        var category: NotificationCategory { inner.category }
        var suppressionReasons: [SuppressionReason] { inner.suppressionReasons }
        func settings(_ reader: SettingsReader) throws -> InactivityCheck.Settings { try inner.settings(reader) }
        func notDue(_ rule: OrganizationRule<InactivityCheck.Settings>, now: Date) -> String? { nil }
        func candidateQuery(rules: [OrganizationRule<InactivityCheck.Settings>], now: Date) -> Query {
            let once = inner.candidateQuery(rules: rules, now: now)
            return "\(once) UNION ALL \(once)"
        }
        func candidate(_ row: CandidateRow) throws -> InactivityCheck.Candidate { try inner.candidate(row) }
        func decide(_ candidate: InactivityCheck.Candidate, recipient: Recipient, rule: OrganizationRule<InactivityCheck.Settings>, now: Date) -> Decision {
            inner.decide(candidate, recipient: recipient, rule: rule, now: now)
        }
    }

    /// The second of two candidates making the same notification in one batch took a daily slot from the
    /// user's others, the batch's statement took the push and slot flags of either (the capped one's: no push
    /// at all), and both decisions read `notified`. The second is now the one already notified.
    @Test func twoCandidatesOfOneNotificationInABatchStoreAndPushItOnce() throws {
        // As of now: a run as of the fixtures' day in June is a catch-up whose pushes expire before they go,
        // and take no slot.
        let f = try Fixtures(db, now: Date())
        let org = try f.organization("Org")
        try f.connection.execute("INSERT INTO organization_delivery_policies (organization_id, daily_push_cap) VALUES (\(org), 1)")
        let kari = try f.mentor(org, "Kari", lastActivityDaysAgo: 20)
        let outcome = try ScenarioHarness.run(TwiceOver(), db, now: f.now)
        #expect(try f.decisions(kari) == ["notified:notified", "suppressed:already_notified"])
        #expect(try f.inbox(kari).count == 1)
        #expect(try f.deliveries(kari) == 1, "pushed, with the one slot it took")
        #expect(try f.count("daily_push_slots") == 1)
        #expect(outcome.summary.duplicates == 1 && outcome.summary.capped == 0, "\(outcome.summary)")
    }

    /// The dry run's plan says what the run then does when a run's own pushes meet: a user's second push of
    /// the day under a cap of one is capped (the plan said "daily slot 1 of 1" for both), and a second
    /// candidate of one notification is the one already notified (the plan said NOTIFY twice).
    @Test func thePlanCountsTheRunsOwnSlotsAndNotifications() throws {
        let org = try f.organization("Org")
        try f.connection.execute("INSERT INTO organization_delivery_policies (organization_id, daily_push_cap) VALUES (\(org), 1)")
        let coordinator = try f.user(org, "C", role: "coordinator")
        let kari = try f.mentor(org, "Kari", lastActivityDaysAgo: 1)
        try f.assignment(org, mentor: kari, coordinator: coordinator, title: "A", dispatchedDaysAgo: 12)
        try f.assignment(org, mentor: kari, coordinator: coordinator, title: "B", dispatchedDaysAgo: 11)
        let plan = try ScenarioHarness.run(AssignmentFollowUp(), db, now: f.now, dryRun: true).plan.filter { $0["decision"] as? String == "notify" }
        #expect(plan.count == 2)
        #expect(plan.filter { $0["capped"] as? Bool == true }.count == 1, "\(plan)")
        _ = try ScenarioHarness.run(AssignmentFollowUp(), db, now: f.now)
        #expect(try f.decisions(kari).sorted() == ["notified:capped", "notified:notified"])
        #expect(try f.deliveries(kari) == 1)

        let ola = try f.mentor(org, "Ola", lastActivityDaysAgo: 20)
        let twice = try ScenarioHarness.run(TwiceOver(), db, now: f.now, dryRun: true).plan.filter { $0["user_id"] as? String == ola.uuidString.lowercased() }
        #expect(twice.map { $0["decision"] as? String } == ["notify", "suppress"], "\(twice)")
        #expect(twice.last?["reason"] as? String == "already_notified")
    }

    @Test func aNewPolicyAppliesToEveryScenarioWithoutTouchingOne() throws {
        let org = try f.organization("Org")
        let coordinator = try f.user(org, "C", role: "coordinator")
        let blocked = try f.mentor(org, "Do Not Disturb", lastActivityDaysAgo: 20)
        let open = try f.mentor(org, "Open", lastActivityDaysAgo: 20)
        for mentor in [blocked, open] {
            try f.assignment(org, mentor: mentor, coordinator: coordinator, dispatchedDaysAgo: 12)
            try f.impactSummary(mentor, year: 2025, computedDaysAgo: 1)
        }
        let policies = Policies.standard + [NameBlock()]
        let inactivity = try ScenarioHarness.run(InactivityCheck(), db, now: f.now, policies: policies)
        let followUp = try ScenarioHarness.run(AssignmentFollowUp(), db, now: f.now, policies: policies)
        let impact = try ScenarioHarness.run(ImpactSummary(), db, now: f.now, policies: policies)
        for outcome in [inactivity, followUp, impact] {
            #expect(outcome.summary.suppressed[NameBlock.blocked] == 1)
            #expect(outcome.summary.notified == 1)
        }
        #expect(try f.inbox(blocked).isEmpty)
        #expect(try f.inbox(open).map(\.title).allSatisfy { $0.hasPrefix("[policy] ") })
        #expect(try f.inbox(open).count == 3)
        #expect(try f.decisions(blocked) == Array(repeating: "suppressed:blocked_by_test_policy", count: 3))
    }

    @Test func aDryRunInProcessReturnsThePlanAndWritesNothing() throws {
        let org = try f.organization("Org")
        let mentor = try f.mentor(org, "Kari", lastActivityDaysAgo: 1)
        try f.impactSummary(mentor, year: 2025, computedDaysAgo: 1)
        let before = try f.fingerprint()
        let outcome = try ScenarioHarness.run(ImpactSummary(), db, now: f.now, dryRun: true)
        #expect(try f.fingerprint() == before)
        #expect(outcome.plan.count == 1)
        #expect(outcome.plan.first?["subject"] as? String == "year:2025")
        #expect(outcome.plan.first?["title"] as? String == "Året ditt som likeperson")
    }

    @Test func aRunWhoseProcessDiedIsClosedAsAbandonedByTheNextRun() throws {
        // A run row with no live session holding its lock: its process was killed, or its connection lost.
        let orphan: Int = try f.connection.query("INSERT INTO job_runs (job, as_of) VALUES ('push-deliver', now()) RETURNING id").first!.decode(0)
        // A run that is still alive (its lock is held by a session) is left alone.
        let alive: Int = try f.connection.query("INSERT INTO job_runs (job, as_of) VALUES ('inactivity-check', now()) RETURNING id").first!.decode(0)
        let holder = try db.connect()
        try holder.execute("SELECT pg_advisory_lock(1836021362, \(alive)::int)")
        let result = try Jobs.inactivityCheck(db, now: f.now)
        #expect(result.status == 0, "stderr: \(result.stderr)")
        #expect(result.stderr.contains("job_runs \(orphan) (push-deliver) was left running by a process that is gone: closed as abandoned"))
        let outcomes: [String] = try f.connection.query("SELECT outcome FROM job_runs WHERE id IN (\(orphan), \(alive)) ORDER BY id").map { try $0.decode(0) }
        #expect(outcomes == ["abandoned", "running"])
    }

    @Test func everyExecutableLeavesAJobRunRow() throws {
        let push = try PushEnvironment()
        let org = try f.organization("Org")
        try f.mentor(org, "Quiet", lastActivityDaysAgo: 20)
        for job in ["inactivity-check", "assignment-follow-up", "overdue-digest", "impact-summary"] {
            let result = try Jobs.run(job, ["--now", Jobs.iso(f.now)], database: db)
            #expect(result.status == 0, "\(job): \(result.stderr)")
            #expect(result.summary?["run_id"] as? Int != nil, "\(job)")
        }
        let deliver = try Jobs.pushDeliver(db, environment: push.variables)
        #expect(deliver.status == 0, "stderr: \(deliver.stderr)")
        // (The reminder made as of June expired long ago in real time: claimed, and settled as expired.)
        #expect((deliver.summary?["push"] as? [String: Any])?["claimed"] as? Int == 1)
        let runs: [String] = try f.connection.query("SELECT job || ':' || outcome FROM job_runs ORDER BY id").map { try $0.decode(0) }
        #expect(runs == ["inactivity-check:ok", "assignment-follow-up:ok", "overdue-digest:ok", "impact-summary:ok", "push-deliver:ok"])
        let counts: Int = try f.connection.query("SELECT (counts->'push'->>'claimed')::int FROM job_runs WHERE job = 'push-deliver'").first!.decode(0)
        #expect(counts == 1)
    }

    @Test func anUnknownSettingsKeyIsReportedNotIgnored() throws {
        let org = try f.organization("Typo org")
        try f.ruleWrittenBeforeValidation(org, settings: #"{"threshold_dayz": 7}"#)
        try f.mentor(org, "Quiet", lastActivityDaysAgo: 20)
        let result = try Jobs.inactivityCheck(db, now: f.now)
        #expect(result.status == 78)
        #expect(result.stderr.contains("inactivity.threshold_dayz is not a setting of inactivity (its settings: threshold_days)"))
        #expect(try f.count("notifications") == 0)
    }
}
