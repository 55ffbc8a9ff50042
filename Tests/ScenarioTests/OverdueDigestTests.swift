import Foundation
import Postgres
import Scenarios
import ScenarioEngine
import Testing
import TestSupport

/// overdue-digest: one digest per coordinator and local day, only about the mentors in their scope.
@Suite struct OverdueDigestTests {
    let db: TestDatabase
    let f: Fixtures
    let org: UUID

    /// 2026-06-15T09:00 in Oslo (07:00 UTC): after the default send hour.
    static let morning = Date(timeIntervalSince1970: 1_781_506_800)

    init() throws {
        db = try TestCluster.shared().makeDatabase()
        f = try Fixtures(db, now: OverdueDigestTests.morning)
        org = try f.organization("Org")
    }

    func run(at instant: Date? = nil, _ extra: [String] = []) throws -> ProcessRunner.Result {
        let result = try Jobs.run("overdue-digest", ["--now", Jobs.iso(instant ?? f.now)] + extra, database: db)
        #expect(result.status == 0, "stderr: \(result.stderr)")
        return result
    }

    /// A coordinator with `overdue` mentors, each holding one assignment dispatched `days` ago.
    func coordinator(_ name: String, in organization: UUID? = nil, overdue: [(mentor: String, title: String, days: Double)]) throws -> UUID {
        let o = organization ?? org
        let coordinator = try f.user(o, name, role: "coordinator")
        try f.device(coordinator)
        for item in overdue {
            let mentor = try f.mentor(o, item.mentor, lastActivityDaysAgo: 1)
            try f.scope(o, coordinator: coordinator, mentor: mentor)
            try f.assignment(o, mentor: mentor, coordinator: coordinator, title: item.title, dispatchedDaysAgo: item.days)
        }
        return coordinator
    }

    @Test func oneCaseNamesTheMentorAndTheAssignment() throws {
        let linda = try coordinator("Linda", overdue: [("Ola Nordmann", "Ring ny deltaker", 12)])
        _ = try run()
        let inbox = try #require(try f.inbox(linda).first)
        #expect(inbox.category == "overdue_digest")
        #expect(inbox.title == "Et oppdrag er ikke bekreftet")
        #expect(inbox.body == "Ola Nordmann har ikke bekreftet oppdraget «Ring ny deltaker» etter 10 dager. Trykk for å følge opp.")
        let data = try JSONSerialization.jsonObject(with: Data(inbox.data.utf8)) as? [String: String]
        #expect(data?["route"] == "/assignments?filter=overdue")
        #expect(data?["count"] == "1")
        #expect(try f.decisionsWithSubjects(linda) == ["notified:notified@day:2026-06-15"])
    }

    /// A mentor whose name is empty is named "(uten navn)": the digest said " har ikke bekreftet…".
    @Test func aMentorWithoutANameIsSaidToHaveNone() throws {
        let linda = try coordinator("Linda", overdue: [("", "Ring ny deltaker", 12)])
        _ = try run()
        let inbox = try #require(try f.inbox(linda).first)
        #expect(inbox.body == "(uten navn) har ikke bekreftet oppdraget «Ring ny deltaker» etter 10 dager. Trykk for å følge opp.")
        let detail: String = try f.connection.query("SELECT detail FROM decisions WHERE user_id = \(linda)").first!.decode(0)
        #expect(detail.hasSuffix(": (no name) (\"Ring ny deltaker\")"), "the operator's detail too: \(detail)")
    }

    /// An organization administrator who coordinates mentors (scope rows) or dispatched a case is told as a
    /// coordinator is: they got no digest, and no decision said why.
    @Test func anOrganizationAdministratorWhoCoordinatesGetsTheDigest() throws {
        let admin = try f.user(org, "Anne Admin", role: "org_admin")
        try f.device(admin)
        let ola = try f.mentor(org, "Ola Nordmann", lastActivityDaysAgo: 1)
        try f.scope(org, coordinator: admin, mentor: ola)
        let linda = try f.user(org, "Linda", role: "coordinator")
        try f.assignment(org, mentor: ola, coordinator: linda, title: "Ring ny deltaker", dispatchedDaysAgo: 12)
        let kari = try f.mentor(org, "Kari", lastActivityDaysAgo: 1)
        try f.assignment(org, mentor: kari, coordinator: admin, title: "Besøk", dispatchedDaysAgo: 11)
        let bystander = try f.user(org, "Bo Admin", role: "org_admin")
        try f.device(bystander)
        _ = try run()
        let inbox = try #require(try f.inbox(admin).first)
        #expect(inbox.category == "overdue_digest")
        #expect(inbox.body.contains("Ola Nordmann") && inbox.body.contains("Kari"), "\(inbox.body)")
        #expect(try f.inbox(bystander).isEmpty, "an administrator who coordinates nobody is not told")
    }

    /// An assignment given to another mentor is overdue ten days after the hand-over (migration 0041), and a
    /// receipt from before it is the previous mentor's. Before, a case handed over minutes ago was listed at once
    /// (counted from the first dispatch), and one the first mentor had read was never listed again.
    @Test func anAssignmentGivenToAnotherMentorIsOverdueTenDaysAfterTheHandOver() throws {
        let linda = try coordinator("Linda", overdue: [])
        let kari = try f.mentor(org, "Kari", lastActivityDaysAgo: 1), per = try f.mentor(org, "Per", lastActivityDaysAgo: 1)
        try f.scope(org, coordinator: linda, mentor: per)
        let fresh = try f.assignment(org, mentor: kari, coordinator: linda, title: "Handed over today", dispatchedDaysAgo: 24)
        let read = try f.assignment(org, mentor: kari, coordinator: linda, title: "Read by Kari", dispatchedDaysAgo: 30)
        try f.acknowledge(read, daysAgo: 25)
        try f.connection.execute("UPDATE assignments SET mentor_id = \(per) WHERE id IN (\(fresh), \(read))")
        try f.connection.execute("UPDATE assignments SET mentor_assigned_at = \(f.daysAgo(0.1)) WHERE id = \(fresh)")
        try f.connection.execute("UPDATE assignments SET mentor_assigned_at = \(f.daysAgo(12)) WHERE id = \(read)")
        _ = try run()
        let inbox = try #require(try f.inbox(linda).first)
        #expect(inbox.body == "Per har ikke bekreftet oppdraget «Read by Kari» etter 10 dager. Trykk for å følge opp.")
    }

    @Test func anOverdueThresholdOfOneDayIsSaidInTheSingular() throws {
        try f.rule(org, scenario: "overdue_digest", settings: #"{"overdue_days": 1}"#)
        let linda = try coordinator("Linda", overdue: [("Ola Nordmann", "Ring ny deltaker", 2)])
        let per = try coordinator("Per", overdue: [("Anne", "A", 3), ("Bjørn", "B", 2)])
        let emma = try f.user(org, "Emma", role: "coordinator", locale: "en-GB")
        try f.device(emma)
        let mentor = try f.mentor(org, "Sam", lastActivityDaysAgo: 1)
        try f.scope(org, coordinator: emma, mentor: mentor)
        try f.assignment(org, mentor: mentor, coordinator: emma, title: "Call Kim", dispatchedDaysAgo: 2)
        _ = try run()
        #expect(try f.inbox(linda).first?.body == "Ola Nordmann har ikke bekreftet oppdraget «Ring ny deltaker» etter 1 dag. Trykk for å følge opp.")
        #expect(try f.inbox(per).first?.body == "Ikke bekreftet etter 1 dag: Anne («A») og Bjørn («B»). Trykk for å følge opp.")
        #expect(try f.inbox(emma).first?.body == "Sam has not acknowledged the assignment “Call Kim” after 1 day. Tap to follow up.")
    }

    @Test func severalCasesAreOneDigestNamingTheOldestThreeAndCountingTheRest() throws {
        let svein = try coordinator("Svein", overdue: [("Anne", "A", 30), ("Bjørn", "B", 25), ("Cecilie", "C", 20), ("Dag", "D", 15), ("Eva", "E", 11)])
        let result = try run()
        let inbox = try f.inbox(svein)
        #expect(inbox.count == 1)
        #expect(inbox.first?.title == "5 oppdrag er ikke bekreftet")
        #expect(inbox.first?.body == "Ikke bekreftet etter 10 dager: Anne («A»), Bjørn («B»), Cecilie («C») og 2 til. Trykk for å følge opp.")
        #expect(result.summary?["notified"] as? Int == 1)
        #expect(try f.count("notifications") == 1, "never one notification per case")
    }

    /// Overdue from the organization's local day `overdue_days` after the dispatch's: at 09:00 on June 15th,
    /// an assignment dispatched at 13:00 on June 5th (Oslo) is 10 days old (in 24-hour periods 9 days and 20
    /// hours, and the digest named it a day late); one dispatched at 01:00 on June 6th is 9 days old.
    @Test func theOverdueDaysAreTheOrganizationsCalendarDays() throws {
        let linda = try coordinator("Linda", overdue: [("Ola Nordmann", "Ring ny deltaker", 9 + 20.0 / 24), ("Kari", "Ikke ennå", 9 + 8.0 / 24)])
        let result = try run()
        #expect(result.summary?["notified"] as? Int == 1, "\(result.stdout)")
        #expect(try f.inbox(linda).first?.body == "Ola Nordmann har ikke bekreftet oppdraget «Ring ny deltaker» etter 10 dager. Trykk for å følge opp.")
    }

    @Test func noDigestWhenNothingIsOverdue() throws {
        let calm = try coordinator("Calm", overdue: [("Fresh", "Ny", 3)])
        let acknowledged = try f.assignment(org, mentor: try f.mentor(org, "Read it", lastActivityDaysAgo: 1), coordinator: calm, dispatchedDaysAgo: 20)
        try f.acknowledge(acknowledged, daysAgo: 19)
        let result = try run()
        #expect(result.summary?["candidates"] as? Int == 0)
        #expect(try f.count("notifications") == 0)
    }

    @Test func aDigestNamesOnlyTheMentorsInThatCoordinatorsScopeAndOrganization() throws {
        let mine = try coordinator("Mine", overdue: [("Scoped One", "Mitt oppdrag", 12), ("Scoped Two", "Mitt andre", 14)])
        let colleague = try coordinator("Colleague", overdue: [("Not Yours", "Kollegas oppdrag", 20)])
        let otherOrg = try f.organization("Other org")
        let stranger = try coordinator("Stranger", in: otherOrg, overdue: [("Other Org Mentor", "Annen organisasjon", 25)])
        _ = try run()
        let texts = try f.connection.query("SELECT title || ' ' || body || ' ' || data::text FROM notifications WHERE user_id = \(mine)").map { try $0.decode(0, as: String.self) }
        #expect(texts.count == 1)
        let text = try #require(texts.first)
        #expect(text.contains("Scoped One") && text.contains("Scoped Two"))
        for foreign in ["Not Yours", "Kollegas", "Other Org Mentor", "Annen organisasjon"] { #expect(!text.contains(foreign)) }
        let details = try f.connection.query("SELECT string_agg(detail, ' ') FROM decisions WHERE user_id = \(mine)").first!.decode(0, as: String.self)
        #expect(!details.contains("Not Yours") && !details.contains("Other Org Mentor"))
        #expect(try f.inbox(colleague).first?.body.contains("Not Yours") == true)
        #expect(try f.inbox(stranger).first?.body.contains("Other Org Mentor") == true)
        let recipients: [String] = try f.connection.query("SELECT DISTINCT u.role FROM decisions d JOIN users u ON u.id = d.user_id").map { try $0.decode(0) }
        #expect(recipients == ["coordinator"])
    }

    /// The coordinator who dispatched an assignment hears of it overdue, also when its mentor is in nobody's
    /// scope (it reached nobody) or in a colleague's (who hears of it too); once in their digest either way.
    @Test func theCoordinatorWhoDispatchedItHearsOfItEvenOutsideTheirScope() throws {
        let linda = try coordinator("Linda", overdue: [("Kari", "I Lindas scope", 12)])
        let mona = try coordinator("Mona", overdue: [("Ola", "I Monas scope", 12)])
        let unscoped = try f.mentor(org, "Per", lastActivityDaysAgo: 1)
        try f.assignment(org, mentor: unscoped, coordinator: linda, title: "Uten scope", dispatchedDaysAgo: 13)
        let ola: UUID = try f.connection.query("SELECT id FROM users WHERE display_name = 'Ola'").first!.decode(0)
        try f.assignment(org, mentor: ola, coordinator: linda, title: "Linda ga Ola", dispatchedDaysAgo: 11)
        _ = try run()
        let lindas = try #require(try f.inbox(linda).first)
        #expect(lindas.title == "3 oppdrag er ikke bekreftet", "\(lindas)")
        #expect(lindas.body.contains("Per («Uten scope»)") && lindas.body.contains("Ola («Linda ga Ola»)"), "\(lindas.body)")
        let monas = try #require(try f.inbox(mona).first)
        #expect(monas.title == "2 oppdrag er ikke bekreftet" && !monas.body.contains("Uten scope"), "\(monas)")
        #expect(try f.inbox(linda).count == 1 && f.inbox(mona).count == 1)
    }

    /// A digest still waiting to go out (the coordinator's quiet hours) is cancelled once every case it lists is
    /// settled (migration 0043): acknowledged, completed, given to another mentor. It went out as written,
    /// naming cases acknowledged since. One with a case still open goes.
    @Test func aWaitingDigestWhoseCasesAreAllSettledIsNotPushed() throws {
        try f.connection.execute("INSERT INTO organization_delivery_policies (organization_id, quiet_hours_start, quiet_hours_end) VALUES (\(org), '08:00', '11:00')")
        let linda = try coordinator("Linda", overdue: [("Kari", "Første", 12), ("Sigrid", "Andre", 14)])
        let mona = try coordinator("Mona", overdue: [("Ola", "Tredje", 12), ("Per", "Fjerde", 13)])
        let eva = try coordinator("Eva", overdue: [("Liv", "Femte", 12)])
        _ = try run()
        #expect(try f.deliveryStates(linda) == ["pending"] && f.deliveryStates(mona) == ["pending"], "deferred to 11:00")
        let listed: [String] = try f.connection.query("SELECT about_assignments::text FROM notifications WHERE user_id = \(linda)").map { try $0.decode(0) }
        #expect(listed.count == 1 && listed[0].split(separator: ",").count == 2, "\(listed)")
        let id = { (title: String) throws -> UUID in try self.f.connection.query("SELECT id FROM assignments WHERE title = \(title)").first!.decode(0) }

        try f.acknowledge(try id("Første"), daysAgo: 0)
        #expect(try f.deliveryStates(linda) == ["pending"], "Sigrid's case is still open")
        // What keeps it waiting, as the operator sees it.
        let story = try Jobs.run("why", [linda.uuidString], database: db)
        #expect(story.stdout.contains("lists 2 assignments: \"Andre\" (open), \"Første\" (acknowledged)"), "\(story.stdout)")
        let json = try Jobs.run("why", [linda.uuidString, "--format", "json"], database: db)
        #expect(json.stdout.contains(#""title":"Første","status":"acknowledged""#), "\(json.stdout)")
        try f.acknowledge(try id("Andre"), daysAgo: 0)
        #expect(try f.deliveryStates(linda) == ["cancelled"])
        let why = try f.connection.query("SELECT detail FROM delivery_events WHERE event = 'cancelled'").first?.decode(0, as: String.self)
        #expect(why == "every assignment it listed was acknowledged, closed or given to another mentor before the push went out")

        try f.connection.execute("UPDATE assignments SET state = 'completed' WHERE title = 'Tredje'")
        #expect(try f.deliveryStates(mona) == ["pending"])
        let other = try f.mentor(org, "Nils", lastActivityDaysAgo: 1)
        try f.connection.execute("UPDATE assignments SET mentor_id = \(other) WHERE title = 'Fjerde'")
        #expect(try f.deliveryStates(mona) == ["cancelled"])
        #expect(try f.deliveryStates(eva) == ["pending"])
    }

    /// The same for cases settled while the digest job decides (after it read them, before it recorded): its
    /// batch's recheck cancels the digest (0043).
    @Test func aDigestWhoseCasesWereSettledWhileTheJobDecidedIsNotPushed() throws {
        try f.connection.execute("INSERT INTO organization_delivery_policies (organization_id, quiet_hours_start, quiet_hours_end) VALUES (\(org), '08:00', '11:00')")
        let linda = try coordinator("Linda", overdue: [("Kari", "Første", 12)])
        let mona = try coordinator("Mona", overdue: [("Ola", "Andre", 12)])
        let result = try Jobs.runDecidingWhile(db, f, "overdue-digest") {
            let first: UUID = try f.connection.query("SELECT id FROM assignments WHERE title = 'Første'").first!.decode(0)
            try f.acknowledge(first, daysAgo: 0)
        }
        #expect(result.status == 0, "\(result.stderr)")
        #expect(try f.deliveryStates(linda) == ["cancelled"])
        #expect(try f.deliveryStates(mona) == ["pending"])
    }

    @Test func notBeforeTheSendHourAndAtMostOncePerLocalDay() throws {
        let c = try coordinator("C", overdue: [("M", "T", 12)])
        let early = Self.morning.addingTimeInterval(-3 * 3600) // 06:00 in Oslo
        let before = try run(at: early)
        #expect(before.summary?["not_due_organizations"] as? Int == 1)
        #expect(try f.count("notifications") == 0)
        let plan = try run(at: early, ["--dry-run"])
        #expect(plan.stdout.contains("LATER   Org"))
        #expect(plan.stdout.contains("the digest goes out from 08:00 Europe/Oslo (local time now 06:00)"))
        for hours in [0.0, 1, 6, 14] { _ = try run(at: Self.morning.addingTimeInterval(hours * 3600)) } // 09:00 … 23:00
        #expect(try f.inbox(c).count == 1)
        _ = try run(at: Self.morning.addingTimeInterval(24 * 3600)) // the next morning
        #expect(try f.inbox(c).count == 2)
        let keys: [String] = try f.connection.query("SELECT dedupe_key FROM notifications ORDER BY created_at").map { try $0.decode(0) }
        #expect(keys == ["overdue_digest:\(c.uuidString.lowercased()):2026-06-15", "overdue_digest:\(c.uuidString.lowercased()):2026-06-16"])
    }

    /// The days clocks change in Europe/Oslo: 2026-03-29 (02:00 → 03:00) and 2026-10-25 (03:00 → 02:00).
    @Test(arguments: [
        ("2026-03-29T05:59:00Z", "2026-03-29T06:00:00Z", 8, "2026-03-29"),   // 07:59 / 08:00 CEST
        ("2026-10-25T06:59:00Z", "2026-10-25T07:00:00Z", 8, "2026-10-25"),   // 07:59 / 08:00 CET
        ("2026-03-29T00:59:00Z", "2026-03-29T01:00:00Z", 2, "2026-03-29"),   // 01:59 CET, then 03:00 CEST: 02:00 never happens
        ("2026-10-24T23:59:00Z", "2026-10-25T00:00:00Z", 2, "2026-10-25"),   // 01:59, then the first 02:00 CEST
    ])
    func theSendHourHoldsOnTheDaysClocksChange(notYet: String, due: String, sendHour: Int, day: String) throws {
        try f.rule(org, scenario: "overdue_digest", settings: #"{"send_hour": \#(sendHour)}"#)
        let c = try coordinator("C", overdue: [("M", "T", 300)]) // dispatched long before either day
        _ = try run(at: Timestamp.parse(notYet)!)
        #expect(try f.count("notifications") == 0)
        _ = try run(at: Timestamp.parse(due)!)
        // Every hour for the rest of that local day, the second 02:00 of October included: nothing more.
        for hour in 1...20 { _ = try run(at: Timestamp.parse(due)!.addingTimeInterval(Double(hour) * 3600)) }
        let keys: [String] = try f.connection.query("SELECT dedupe_key FROM notifications").map { try $0.decode(0) }
        #expect(keys == ["overdue_digest:\(c.uuidString.lowercased()):\(day)"])
    }

    @Test func fourConcurrentRunsSendEachCoordinatorOneDigest() throws {
        var coordinators: [UUID] = []
        for i in 0..<40 { coordinators.append(try coordinator("C\(i)", overdue: [("M\(i)a", "T", 12), ("M\(i)b", "T", 15)])) }
        let results = Locked<[ProcessRunner.Result]>([])
        let database = db, now = f.now
        DispatchQueue.concurrentPerform(iterations: 4) { _ in
            if let result = try? Jobs.run("overdue-digest", ["--now", Jobs.iso(now)], database: database) { results.withLock { $0.append(result) } }
        }
        #expect(results.withLock { $0 }.allSatisfy { $0.status == 0 })
        #expect(try f.count("notifications") == 40)
        #expect(try f.connection.query("SELECT 1 FROM notifications GROUP BY user_id HAVING count(*) > 1").count == 0)
    }

    @Test func anInvalidSendHourExits78() throws {
        try f.ruleWrittenBeforeValidation(org, scenario: "overdue_digest", settings: #"{"send_hour": 24}"#)
        _ = try coordinator("C", overdue: [("M", "T", 12)])
        let result = try Jobs.run("overdue-digest", ["--now", Jobs.iso(f.now)], database: db)
        #expect(result.status == 78)
        #expect(result.stderr.contains("overdue_digest.send_hour must be an integer from 0 to 23, found 24"))
    }
}
