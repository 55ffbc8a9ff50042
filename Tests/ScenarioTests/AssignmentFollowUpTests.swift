import Foundation
import Postgres
import Scenarios
import ScenarioEngine
import Testing
import TestSupport

/// assignment-follow-up: one reminder per unacknowledged assignment, ever, with a deep link to it.
@Suite struct AssignmentFollowUpTests {
    let db: TestDatabase
    let f: Fixtures
    let org: UUID
    let coordinator: UUID

    init() throws {
        db = try TestCluster.shared().makeDatabase()
        f = try Fixtures(db)
        org = try f.organization("Org")
        coordinator = try f.user(org, "Koordinator", role: "coordinator")
    }

    func run(daysLater: Double = 0, _ extra: [String] = [], environment: [String: String] = [:]) throws -> ProcessRunner.Result {
        let result = try Jobs.run("assignment-follow-up", ["--now", Jobs.iso(f.now.addingTimeInterval(daysLater * 86_400))] + extra,
                                  database: db, environment: environment)
        #expect(result.status == 0, "stderr: \(result.stderr)")
        return result
    }

    /// The reminder the mentor read long ago is the record that it was sent: `prune` keeps it, so the
    /// assignment is not followed up again every time the inbox is tidied.
    @Test func pruningTheReadInboxDoesNotFollowUpTheSameAssignmentAgain() throws {
        let mentor = try f.mentor(org, "Kari", lastActivityDaysAgo: 1)
        try f.assignment(org, mentor: mentor, coordinator: coordinator, dispatchedDaysAgo: 12)
        _ = try run()
        #expect(try f.inbox(mentor).count == 1)
        try f.connection.execute("UPDATE notifications SET created_at = created_at - interval '40 days', read_at = now() - interval '35 days'")
        try f.connection.execute("UPDATE deliveries SET state = 'sent'")
        try f.connection.execute("DELETE FROM delivery_queue")
        let pruned = try Jobs.run("prune", [], database: db)
        #expect(pruned.status == 0, "stderr: \(pruned.stderr)")
        let again = try run(daysLater: 1)
        #expect(again.summary?["candidates"] as? Int == 0, "\(again.stdout)")
        let count: Int = try f.connection.query("SELECT count(*) FROM notifications WHERE category = 'assignment_follow_up'").first!.decode(0)
        #expect(count == 1)
    }

    /// An assignment dispatched at `-infinity` (written before 0054, which refuses it now) was followed up "739949
    /// days ago" on the mentor's phone. It is skipped with the decision `invalid_data` naming the column, the others
    /// are followed up, and the run exits 65. New writes of infinity to either date, or to an activity's, are refused.
    @Test func anAssignmentDispatchedAtMinusInfinityIsSkippedAndTheOthersFollowedUp() throws {
        let kari = try f.mentor(org, "Kari", lastActivityDaysAgo: 1)
        let ola = try f.mentor(org, "Ola", lastActivityDaysAgo: 1)
        try f.assignment(org, mentor: kari, coordinator: coordinator, dispatchedDaysAgo: 12)
        let broken = try f.assignment(org, mentor: ola, coordinator: coordinator, title: "Besøk", dispatchedDaysAgo: 12)
        // Handed over at -infinity: followed up from its dispatch (its key's number stopped the whole job, exit 70).
        let per = try f.mentor(org, "Per", lastActivityDaysAgo: 1)
        let handedOver = try f.assignment(org, mentor: per, coordinator: coordinator, dispatchedDaysAgo: 12)
        try f.connection.execute("ALTER TABLE assignments DISABLE TRIGGER assignments_dates_finite") // written before 0054
        try f.connection.execute("UPDATE assignments SET dispatched_at = '-infinity' WHERE id = \(broken)")
        try f.connection.execute("UPDATE assignments SET mentor_assigned_at = '-infinity' WHERE id = \(handedOver)")
        try f.connection.execute("ALTER TABLE assignments ENABLE TRIGGER assignments_dates_finite")

        let result = try Jobs.run("assignment-follow-up", ["--now", Jobs.iso(f.now)], database: db)
        #expect(result.status == 65, "\(result.stderr)")
        #expect(result.stderr.contains("assignments.dispatched_at of assignment \(broken.uuidString.lowercased()) (\"Besøk\") is -infinity"), "\(result.stderr)")
        #expect(try f.inbox(kari).count == 1)
        #expect(try f.inbox(per).count == 1, "followed up from the dispatch")
        #expect(try f.inbox(ola).isEmpty)
        #expect(try f.decisions(ola) == ["suppressed:invalid_data"])

        // The overdue digest names it among the cases; its age is no number of days.
        try f.scope(org, coordinator: coordinator, mentor: ola)
        let digest = try Jobs.run("overdue-digest", ["--dry-run", "--now", Jobs.iso(f.now)], database: db)
        #expect(digest.stdout.contains("oldest a dispatched_at of -infinity, a row to fix") && !digest.stdout.contains("739"), "\(digest.stdout)")

        for write in ["UPDATE assignments SET dispatched_at = '-infinity' WHERE mentor_id = \(kari)",
                      "UPDATE assignments SET mentor_assigned_at = 'infinity' WHERE mentor_id = \(kari)",
                      "INSERT INTO activities (mentor_id, occurred_at) VALUES (\(kari), 'infinity')"] as [Query] {
            #expect(throws: PostgresError.self) { try f.connection.execute(write) }
        }
        try f.connection.execute("UPDATE assignments SET title = 'Besøk hos Ola' WHERE id = \(broken)") // the row's other columns still change
        try f.connection.execute("ALTER TABLE activities DISABLE TRIGGER activities_date_finite")
        let old: Int = try f.connection.query("INSERT INTO activities (mentor_id, occurred_at) VALUES (\(kari), 'infinity') RETURNING id").first!.decode(0)
        try f.connection.execute("ALTER TABLE activities ENABLE TRIGGER activities_date_finite")
        try f.connection.execute("UPDATE activities SET kind = kind, occurred_at = occurred_at WHERE id = \(old)") // a whole-row write of one written before
    }

    /// An assignment given to another mentor is dispatched to them then (migration 0041). Kari was reminded and
    /// read it; handed to Per four days ago, it is his to be reminded of ten days after the hand-over, counted
    /// from then. Before, Kari's receipt counted as his and her reminder's key as his: never reminded.
    @Test func anAssignmentGivenToAnotherMentorIsFollowedUpFromTheHandOver() throws {
        let kari = try f.mentor(org, "Kari", lastActivityDaysAgo: 1)
        let per = try f.mentor(org, "Per", lastActivityDaysAgo: 1)
        let visit = try f.assignment(org, mentor: kari, coordinator: coordinator, title: "Besøk hos Ola", dispatchedDaysAgo: 24)
        _ = try run(daysLater: -14)
        #expect(try f.inbox(kari).count == 1, "Kari's reminder, ten days after the dispatch")
        try f.acknowledge(visit, daysAgo: 12)
        try f.connection.execute("UPDATE assignments SET mentor_id = \(per) WHERE id = \(visit)")
        try f.connection.execute("UPDATE assignments SET mentor_assigned_at = \(f.daysAgo(4)) WHERE id = \(visit)")

        #expect(try run().summary?["notified"] as? Int == 0, "four days after the hand-over")
        let due = try run(daysLater: 6)
        #expect(due.summary?["notified"] as? Int == 1, "\(due.stdout)")
        let reminder = try #require(try f.inbox(per).first)
        #expect(reminder.body.contains("10 dager"), "counted from the hand-over: \(reminder.body)")
        let key: String = try f.connection.query("SELECT dedupe_key FROM notifications WHERE user_id = \(per)").first!.decode(0)
        #expect(key.hasPrefix("assignment_follow_up:\(visit.uuidString.lowercased()):\(per.uuidString.lowercased())@"), "\(key)")
        #expect(try run(daysLater: 7).summary?["notified"] as? Int == 0, "once")

        // Per acknowledges: the app moves the one receipt's time (an upsert), and his waiting reminder is cancelled.
        try f.connection.execute("UPDATE deliveries SET state = 'pending'")
        try f.connection.execute("UPDATE assignment_read_receipts SET acknowledged_at = now() WHERE assignment_id = \(visit)")
        let states: [String] = try f.connection.query("""
            SELECT d.state FROM deliveries d JOIN notifications n ON n.id = d.notification_id WHERE n.user_id = \(per)
            """).map { try $0.decode(0) }
        #expect(!states.isEmpty && states.allSatisfy { $0 == "cancelled" }, "\(states)")
    }

    /// A coordinator's title is outside input: in the on-call engineer's dry-run plan it cannot clear the
    /// terminal, start a forged plan line, or reverse the text after it.
    @Test func aHostileTitleCannotForgeOrHideLinesOfTheDryRunPlan() throws {
        let mentor = try f.mentor(org, "Kari", lastActivityDaysAgo: 1)
        try f.assignment(org, mentor: mentor, coordinator: coordinator, title: "a\u{1b}[2Jb\nSKIP    forged\u{202E}txet", dispatchedDaysAgo: 12)
        let plan = try run(["--dry-run"])
        #expect(!plan.stdout.unicodeScalars.contains { $0.value == 0x1B || $0.value == 0x202E }, "\(plan.stdout)")
        #expect(!plan.stdout.split(separator: "\n").contains { $0.hasPrefix("SKIP    forged") }, "\(plan.stdout)")
        #expect(plan.stdout.contains("\\u{1b}[2Jb\\u{a}SKIP"), "shown escaped: \(plan.stdout)")
    }

    /// Days are counted on the mentor's clock: dispatched at 14:00 on June 5th (Oslo), the assignment is 10 days
    /// old all through June 15th, so that morning's run reminds (counted in 24-hour periods, it found 9 days and
    /// 20 hours, and the reminder came a day late). Dispatched at 01:00 on June 6th in Oslo, it is 9 days old
    /// there, and 10 days old for a mentor in New York, where it was still June 5th.
    @Test func theTenthDayOnTheMentorsClockRemindsWhateverTheHour() throws {
        let kari = try f.mentor(org, "Kari", lastActivityDaysAgo: 1)
        let per = try f.mentor(org, "Per", lastActivityDaysAgo: 1)
        let ann = try f.mentor(org, "Ann", lastActivityDaysAgo: 1, locale: "en-GB")
        try f.connection.execute("UPDATE users SET time_zone = 'America/New_York' WHERE id = \(ann)")
        try f.assignment(org, mentor: kari, coordinator: coordinator, title: "Ring Per", dispatchedDaysAgo: 9 + 20.0 / 24)
        try f.assignment(org, mentor: per, coordinator: coordinator, title: "Ring Kari", dispatchedDaysAgo: 9 + 9.0 / 24)
        try f.assignment(org, mentor: ann, coordinator: coordinator, title: "Call Sam", dispatchedDaysAgo: 9 + 9.0 / 24)
        let result = try run()
        #expect(try f.inbox(kari).first?.body == "Hei Kari! Du fikk oppdraget «Ring Per» for 10 dager siden. Trykk her for å se det og bekrefte at du har lest det.")
        #expect(try f.inbox(per).isEmpty)
        #expect(try f.inbox(ann).first?.body == "Hi Ann! You were given the assignment “Call Sam” 10 days ago. Tap here to open it and confirm you have read it.")
        #expect(result.summary?["notified"] as? Int == 2, "\(result.stdout)")
        let why: String = try f.connection.query("SELECT detail FROM decisions WHERE user_id = \(kari)").first!.decode(0)
        #expect(why.contains("dispatched 10 days ago (2026-06-05)"), "\(why)")
    }

    /// A pause's dates in the decision are the mentor's: one from midnight on June 10th in Oslo (22:00 UTC on
    /// the 9th) does not read as starting on the 9th.
    @Test func aPausesDatesAreSaidOnTheMentorsClock() throws {
        let kari = try f.mentor(org, "Kari", lastActivityDaysAgo: 1)
        try f.assignment(org, mentor: kari, coordinator: coordinator, dispatchedDaysAgo: 12)
        // 2026-06-10T00:00+02:00 and 2026-06-20T00:00+02:00.
        try f.connection.execute("""
            INSERT INTO availability_pauses (mentor_id, starts_at, ends_at, reason)
            VALUES (\(kari), '2026-06-09 22:00:00+00', '2026-06-19 22:00:00+00', 'Ferie')
            """)
        _ = try run()
        let detail: String = try f.connection.query("SELECT detail FROM decisions WHERE user_id = \(kari)").first!.decode(0)
        #expect(detail.hasPrefix("paused since 2026-06-10 until 2026-06-20 (Ferie)"), "\(detail)")
    }

    @Test func oneDayIsSaidInTheSingular() throws {
        try f.rule(org, scenario: "assignment_follow_up", settings: #"{"follow_up_days": 1}"#)
        let mentor = try f.mentor(org, "Kari", lastActivityDaysAgo: 1)
        try f.assignment(org, mentor: mentor, coordinator: coordinator, title: "Ring Per", dispatchedDaysAgo: 1.2)
        _ = try run()
        #expect(try f.inbox(mentor).first?.body == "Hei Kari! Du fikk oppdraget «Ring Per» for 1 dag siden. Trykk her for å se det og bekrefte at du har lest det.")
    }

    @Test func anUnacknowledgedAssignmentIsFollowedUpOnceEverWithALinkToIt() throws {
        let mentor = try f.mentor(org, "Kari", lastActivityDaysAgo: 1)
        let assignment = try f.assignment(org, mentor: mentor, coordinator: coordinator, title: "Ring Per etter operasjonen", dispatchedDaysAgo: 12)
        let first = try run()
        let inbox = try #require(try f.inbox(mentor).first)
        #expect(inbox.category == "assignment_follow_up")
        #expect(inbox.title == "Et oppdrag venter på deg")
        #expect(inbox.body == "Hei Kari! Du fikk oppdraget «Ring Per etter operasjonen» for 12 dager siden. Trykk her for å se det og bekrefte at du har lest det.")
        let data = try JSONSerialization.jsonObject(with: Data(inbox.data.utf8)) as? [String: String]
        #expect(data?["route"] == "/assignments/\(assignment.uuidString.lowercased())")
        #expect(data?["assignment_id"] == assignment.uuidString.lowercased())
        #expect(try f.decisionsWithSubjects(mentor) == ["notified:notified@assignment:\(assignment.uuidString.lowercased())"])
        #expect(first.summary?["inbox_rows"] as? Int == 1)
        #expect(first.summary?["deliveries"] as? Int == 1)
        for later in [1.0, 5, 30] {
            let again = try run(daysLater: later)
            #expect(again.summary?["candidates"] as? Int == 0)
        }
        #expect(try f.inbox(mentor).count == 1)
    }

    @Test func tooRecentWithdrawnCompletedAcknowledgedOrDeactivatedGetNothing() throws {
        let mentor = try f.mentor(org, "Mentor", lastActivityDaysAgo: 1)
        try f.assignment(org, mentor: mentor, coordinator: coordinator, dispatchedDaysAgo: 9)
        try f.assignment(org, mentor: mentor, coordinator: coordinator, dispatchedDaysAgo: 20, state: "withdrawn")
        try f.assignment(org, mentor: mentor, coordinator: coordinator, dispatchedDaysAgo: 20, state: "completed")
        let acknowledged = try f.assignment(org, mentor: mentor, coordinator: coordinator, dispatchedDaysAgo: 20)
        try f.acknowledge(acknowledged, daysAgo: 18)
        let gone = try f.mentor(org, "Left us", lastActivityDaysAgo: 1)
        try f.assignment(org, mentor: gone, coordinator: coordinator, dispatchedDaysAgo: 20)
        try f.connection.execute("UPDATE users SET deactivated_at = \(f.daysAgo(2)) WHERE id = \(gone)")
        let result = try run()
        #expect(result.summary?["candidates"] as? Int == 0)
        #expect(try f.count("notifications") == 0)
        #expect(try f.count("decisions") == 0)
    }

    @Test func aPausedMentorIsRemindedOnceThePauseIsOver() throws {
        let mentor = try f.mentor(org, "On holiday", lastActivityDaysAgo: 1)
        let assignment = try f.assignment(org, mentor: mentor, coordinator: coordinator, dispatchedDaysAgo: 14)
        try f.pause(mentor, startedDaysAgo: 3, endsDaysAgo: -5, reason: "Ferie til 20. juni")
        let during = try run(["--dry-run", "--format", "json"])
        let skip = try #require(during.stdout.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }.first { $0["decision"] != nil })
        #expect(skip["reason"] as? String == "paused")
        #expect((skip["detail"] as? String)?.contains("until 2026-06-20 (Ferie til 20. juni)") == true)
        _ = try run()
        #expect(try f.inbox(mentor).isEmpty)
        #expect(try f.decisions(mentor) == ["suppressed:paused"])
        _ = try run(daysLater: 6)
        #expect(try f.inbox(mentor).count == 1)
        #expect(try f.decisionsWithSubjects(mentor).last == "notified:notified@assignment:\(assignment.uuidString.lowercased())")
    }

    @Test func eachOrganizationItsOwnFollowUpDaysAndTheUsersLanguage() throws {
        let strict = try f.organization("Strict", locale: "en")
        let strictCoordinator = try f.user(strict, "Coord", role: "coordinator")
        try f.rule(strict, scenario: "assignment_follow_up", settings: #"{"follow_up_days": 7}"#)
        let inDefault = try f.mentor(org, "Default", lastActivityDaysAgo: 1)
        try f.assignment(org, mentor: inDefault, coordinator: coordinator, dispatchedDaysAgo: 8)
        let inStrict = try f.mentor(strict, "Emma", lastActivityDaysAgo: 1)
        try f.assignment(strict, mentor: inStrict, coordinator: strictCoordinator, title: "Call Sam", dispatchedDaysAgo: 8)
        _ = try run()
        #expect(try f.inbox(inDefault).isEmpty)
        #expect(try f.inbox(inStrict).first?.body == "Hi Emma! You were given the assignment “Call Sam” 8 days ago. Tap here to open it and confirm you have read it.")
    }

    @Test func preferencesAndTheOrganizationSwitchApplyThroughTheEngine() throws {
        let masterOff = try f.mentor(org, "Master off", lastActivityDaysAgo: 1)
        try f.preferences(masterOff, master: false)
        let categoryOff = try f.mentor(org, "Category off", lastActivityDaysAgo: 1)
        try f.categoryOff(categoryOff, "assignment_follow_up")
        let offOrg = try f.organization("Off")
        try f.rule(offOrg, scenario: "assignment_follow_up", enabled: false)
        let offCoordinator = try f.user(offOrg, "C", role: "coordinator")
        let inOffOrg = try f.mentor(offOrg, "In off org", lastActivityDaysAgo: 1)
        for (o, m, c) in [(org, masterOff, coordinator), (org, categoryOff, coordinator), (offOrg, inOffOrg, offCoordinator)] {
            try f.assignment(o, mentor: m, coordinator: c, dispatchedDaysAgo: 15)
        }
        let outcome = try ScenarioHarness.run(AssignmentFollowUp(), db, now: f.now)
        #expect(outcome.summary.suppressed[.pushDisabled] == 1)
        #expect(outcome.summary.suppressed[.categoryDisabled] == 1)
        #expect(outcome.summary.suppressed[.organizationScenarioOff] == 1)
        #expect(try f.count("notifications") == 0)
        #expect(try f.decisions(inOffOrg) == ["suppressed:organization_scenario_off"])
    }

    @Test func aPushAboutAnAssignmentWithdrawnOrAcknowledgedBeforeItWentOutIsCancelledNotSent() throws {
        let push = try PushEnvironment()
        let withdrawnMentor = try f.mentor(org, "Withdrawn", lastActivityDaysAgo: 1, devices: 2)
        let withdrawn = try f.assignment(org, mentor: withdrawnMentor, coordinator: coordinator, dispatchedDaysAgo: 12)
        let ackMentor = try f.mentor(org, "Acknowledged", lastActivityDaysAgo: 1)
        let acknowledged = try f.assignment(org, mentor: ackMentor, coordinator: coordinator, dispatchedDaysAgo: 12)
        let stillOpen = try f.mentor(org, "Still open", lastActivityDaysAgo: 1)
        try f.assignment(org, mentor: stillOpen, coordinator: coordinator, dispatchedDaysAgo: 12)
        _ = try run() // no push provider configured: the deliveries wait for push-deliver
        #expect(try f.count("deliveries") == 4)

        try f.connection.execute("UPDATE assignments SET state = 'withdrawn', state_changed_at = now() WHERE id = \(withdrawn)")
        try f.connection.execute("INSERT INTO assignment_read_receipts (assignment_id) VALUES (\(acknowledged))")
        let deliver = try Jobs.pushDeliver(db, environment: push.variables)
        #expect(deliver.status == 0, "stderr: \(deliver.stderr)")

        #expect(try f.deliveryStates(withdrawnMentor) == ["cancelled", "cancelled"])
        #expect(try f.deliveryStates(ackMentor) == ["cancelled"])
        #expect(try f.deliveryStates(stillOpen) == ["sent"])
        #expect(push.server.requests().filter { $0.provider != .oauth }.count == 1, "only the open assignment is pushed")
        let events: [String] = try f.connection.query("SELECT detail FROM delivery_events WHERE event = 'cancelled' ORDER BY id").map { try $0.decode(0) }
        #expect(events.count == 3)
        #expect(events.contains("the assignment was withdrawn before the push went out"))
        #expect(events.contains("the assignment was acknowledged before the push went out"))
        #expect(try f.inbox(withdrawnMentor).count == 1, "the inbox row stays; the app shows the assignment as gone")
    }

    @Test func fourConcurrentRunsRemindEachAssignmentOnce() throws {
        var mentors: [UUID] = []
        for i in 0..<100 {
            let mentor = try f.mentor(org, "Mentor \(i)", lastActivityDaysAgo: 1)
            try f.assignment(org, mentor: mentor, coordinator: coordinator, dispatchedDaysAgo: 11)
            try f.assignment(org, mentor: mentor, coordinator: coordinator, dispatchedDaysAgo: 13)
            mentors.append(mentor)
        }
        let results = Locked<[ProcessRunner.Result]>([])
        let database = db, now = f.now
        DispatchQueue.concurrentPerform(iterations: 4) { _ in
            if let result = try? Jobs.run("assignment-follow-up", ["--now", Jobs.iso(now)], database: database) { results.withLock { $0.append(result) } }
        }
        let all = results.withLock { $0 }
        #expect(all.count == 4 && all.allSatisfy { $0.status == 0 })
        #expect(try f.count("notifications") == 200)
        #expect(all.compactMap { $0.summary?["inbox_rows"] as? Int }.reduce(0, +) == 200)
        #expect(try f.connection.query("SELECT count(DISTINCT subject) FROM notifications").first!.decode(0, as: Int.self) == 200)
    }

    /// An organization's name is outside text, and the log line that names it went to the journal raw: a line
    /// break in it forged a log line of its own, an escape sequence rewrote the terminal of whoever tailed it.
    @Test func anOrganizationsNameCannotForgeALogLine() throws {
        let bad = try f.organization("Evil\nassignment-follow-up: all organizations are fine\u{1b}[2J")
        try f.ruleWrittenBeforeValidation(bad, scenario: "assignment_follow_up", settings: #"{"follow_up_dayz": 7}"#)
        let result = try Jobs.run("assignment-follow-up", ["--now", Jobs.iso(f.now)], database: db)
        #expect(result.status == 78, "stderr: \(result.stderr)")
        #expect(!result.stderr.split(separator: "\n").contains { $0.hasPrefix("assignment-follow-up: all organizations") }, "\(result.stderr)")
        #expect(!result.stderr.unicodeScalars.contains { $0.value == 0x1B }, "\(result.stderr)")
        #expect(result.stderr.contains("Evil\u{FFFD}assignment-follow-up: all organizations are fine\u{FFFD}[2J"), "\(result.stderr)")
    }

    @Test(arguments: [(#"{"follow_up_days": "ten"}"#, #"assignment_follow_up.follow_up_days must be an integer from 1 to 90, found "ten""#),
                      (#"{"follow_up_dayz": 7}"#, "assignment_follow_up.follow_up_dayz is not a setting of assignment_follow_up (its settings: follow_up_days)")])
    func invalidSettingsExit78NamingTheOrganizationAndKeyAndTheOthersStillRun(settings: String, message: String) throws {
        let bad = try f.organization("Broken org")
        try f.ruleWrittenBeforeValidation(bad, scenario: "assignment_follow_up", settings: settings)
        let badCoordinator = try f.user(bad, "C", role: "coordinator")
        let inBad = try f.mentor(bad, "In broken", lastActivityDaysAgo: 1)
        try f.assignment(bad, mentor: inBad, coordinator: badCoordinator, dispatchedDaysAgo: 20)
        let inGood = try f.mentor(org, "In good", lastActivityDaysAgo: 1)
        try f.assignment(org, mentor: inGood, coordinator: coordinator, dispatchedDaysAgo: 20)
        let result = try Jobs.run("assignment-follow-up", ["--now", Jobs.iso(f.now)], database: db)
        #expect(result.status == 78)
        #expect(result.stderr.contains(#"organization "Broken org""#))
        #expect(result.stderr.contains(message), "stderr: \(result.stderr)")
        #expect(try f.inbox(inGood).count == 1)
        #expect(try f.inbox(inBad).isEmpty)
        #expect(result.summary?["outcome"] as? String == "partial")
    }
}
