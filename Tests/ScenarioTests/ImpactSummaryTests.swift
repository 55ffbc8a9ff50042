import Foundation
import Postgres
import Scenarios
import ScenarioEngine
import Testing
import TestSupport

/// impact-summary: each (mentor, year) is announced once, with a link to that year's summary.
@Suite struct ImpactSummaryTests {
    let db: TestDatabase
    let f: Fixtures
    let org: UUID

    init() throws {
        db = try TestCluster.shared().makeDatabase()
        f = try Fixtures(db)
        org = try f.organization("Org")
    }

    func run(daysLater: Double = 0) throws -> ProcessRunner.Result {
        let result = try Jobs.run("impact-summary", ["--now", Jobs.iso(f.now.addingTimeInterval(daysLater * 86_400))], database: db)
        #expect(result.status == 0, "stderr: \(result.stderr)")
        return result
    }

    @Test func aComputedSummaryIsAnnouncedOnceAndARecomputedOneNotAgain() throws {
        let mentor = try f.mentor(org, "Liv", lastActivityDaysAgo: 1)
        let summary = try f.impactSummary(mentor, year: 2025, computedDaysAgo: 2)
        _ = try run()
        let inbox = try #require(try f.inbox(mentor).first)
        #expect(inbox.title == "Året ditt som likeperson")
        #expect(inbox.body == "Hei Liv! Oppsummeringen av det du har bidratt med i 2025 er klar. Trykk her for å se den.")
        #expect(inbox.data.contains(#""route": "/impact/2025""#))
        #expect(try f.decisionsWithSubjects(mentor) == ["notified:notified@year:2025"])
        try f.connection.execute("UPDATE impact_summaries SET computed_at = \(f.daysAgo(-1)) WHERE id = \(summary)")
        let again = try run(daysLater: 2)
        #expect(again.summary?["candidates"] as? Int == 0)
        #expect(try f.inbox(mentor).count == 1)
    }

    @Test func aWeekWithoutRunsIsCaughtUpAndOldSummariesAreNotAnnouncedOutOfTheBlue() throws {
        var recent: [UUID] = []
        for day in 1...7 {
            let mentor = try f.mentor(org, "Mentor \(day)", lastActivityDaysAgo: 1, locale: day == 1 ? "en" : nil)
            try f.impactSummary(mentor, year: 2025, computedDaysAgo: Double(day))
            recent.append(mentor)
        }
        let old = try f.mentor(org, "Old", lastActivityDaysAgo: 1)
        try f.impactSummary(old, year: 2025, computedDaysAgo: 45)
        let gone = try f.mentor(org, "Gone", lastActivityDaysAgo: 1)
        try f.impactSummary(gone, year: 2025, computedDaysAgo: 3)
        try f.connection.execute("UPDATE users SET deactivated_at = \(f.daysAgo(1)) WHERE id = \(gone)")
        let result = try run()
        #expect(result.summary?["notified"] as? Int == 7)
        #expect(try f.inbox(old).isEmpty)
        #expect(try f.inbox(gone).isEmpty)
        #expect(try f.inbox(recent[0]).first?.title == "Your year as a peer mentor")
    }

    @Test func anOrganizationMayLookFurtherBack() throws {
        try f.rule(org, scenario: "impact_summary", settings: #"{"max_age_days": 60}"#)
        let other = try f.organization("Other")
        let here = try f.mentor(org, "Here", lastActivityDaysAgo: 1)
        try f.impactSummary(here, year: 2025, computedDaysAgo: 45)
        let there = try f.mentor(other, "There", lastActivityDaysAgo: 1)
        try f.impactSummary(there, year: 2025, computedDaysAgo: 45)
        _ = try run()
        #expect(try f.inbox(here).count == 1)
        #expect(try f.inbox(there).isEmpty)
    }

    @Test func fourConcurrentRunsAnnounceEachYearOnce() throws {
        for i in 0..<100 {
            let mentor = try f.mentor(org, "M\(i)", lastActivityDaysAgo: 1)
            try f.impactSummary(mentor, year: 2024, computedDaysAgo: 20)
            try f.impactSummary(mentor, year: 2025, computedDaysAgo: 2)
        }
        let results = Locked<[ProcessRunner.Result]>([])
        let database = db, now = f.now
        DispatchQueue.concurrentPerform(iterations: 4) { _ in
            if let result = try? Jobs.run("impact-summary", ["--now", Jobs.iso(now)], database: database) { results.withLock { $0.append(result) } }
        }
        let finished = results.withLock { $0 }
        #expect(finished.count == 4 && finished.allSatisfy { $0.status == 0 })
        #expect(try f.count("notifications") == 200)
    }

    /// The four runs above meet at the job's lock (one decides, the others skip), never at the database's guard.
    /// Here a run meets another writer of the same summary's notification mid-flight: the other's insert holds
    /// the dedupe key, the run waits for it at the unique index, and once it commits the run stores nothing
    /// and queues no second push; its decision says why, and its summary counts the duplicate.
    @Test func aRunThatMeetsAnotherWriterOfTheSameNotificationStoresItOnce() throws {
        let mentor = try f.mentor(org, "Kari", lastActivityDaysAgo: 1)
        try f.impactSummary(mentor, year: 2025, computedDaysAgo: 2)
        let other = try db.connect()
        try other.execute("BEGIN")
        try other.execute("""
            INSERT INTO notifications (user_id, category, title, body, dedupe_key)
            VALUES (\(mentor), 'impact_summary', 'From the other writer', 'b', \("impact_summary:\(mentor.lowercasedString):2025"))
            """)
        let job = try ProcessRunner.start(Paths.executable("impact-summary"), ["--now", Jobs.iso(f.now), "--database-url", db.url])
        #expect(try f.waitForLockWaiters(1) == 1, "the run waits at the unique index")
        try other.execute("COMMIT")
        let result = try job.wait()
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.summary?["duplicates"] as? Int == 1, "\(result.stderr)")
        #expect(try f.decisions(mentor) == ["suppressed:already_notified"])
        #expect(try f.inbox(mentor).map(\.title) == ["From the other writer"])
        #expect(try f.deliveries(mentor) == 0, "no second push queued")
    }

    @Test func theSummaryOfOneOrganizationIsNeverAnnouncedByAnotherOrganizationsRun() throws {
        let other = try f.organization("Other")
        let mine = try f.mentor(org, "Mine", lastActivityDaysAgo: 1)
        let theirs = try f.mentor(other, "Theirs", lastActivityDaysAgo: 1)
        try f.impactSummary(mine, year: 2025, computedDaysAgo: 2)
        try f.impactSummary(theirs, year: 2025, computedDaysAgo: 2)
        let result = try Jobs.run("impact-summary", ["--now", Jobs.iso(f.now), "--org", org.uuidString], database: db)
        #expect(result.status == 0)
        #expect(try f.inbox(mine).count == 1)
        #expect(try f.inbox(theirs).isEmpty)
        #expect(try f.decisions(theirs).isEmpty)
    }
}
